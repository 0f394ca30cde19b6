/* The device collector thread (see collector.h).
 *
 * Each collection: take the mailbox (pod-resources table, samplers), call
 * every backend's sampler (devices/measure.h), rescan the OCI specs
 * (ocispec.c), then build each unit's owners — the (namespace, pod,
 * container) using it — from three sources:
 *   1. processes: the sampler's pids -> /proc/<pid>/cgroup -> container ID
 *      -> spec names; these also carry the owner's memory and utilisation,
 *   2. specs: the devices each running container's spec names,
 *   3. pod-resources: the devices the kubelet assigned.
 * Every owner of a unit gets its own series of every family (a device
 * nobody uses gets one series without pod labels).  On a unit where
 * processes were mapped to owners, families whose share is memory or
 * utilisation carry each owner's share; elsewhere every series carries the
 * device's value.  The rendered text is published in the store's GPU slot.
 *
 * Threads: the collector's own (pthread) does all of this; the loop only
 * drops inputs in the mailbox (mutex) and reads two atomics.  The thread
 * never touches the loop, and a scrape never waits for it. */
#include "metrics/collector.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "metrics/expo.h"

/* Who uses a unit; the strings belong to a spec or the pod-resources
 * table, both alive for the whole collection. */
struct owner {
        const char *namespace, *pod, *container;
        uint64_t mem_bytes; /* from its processes */
        unsigned util, enc, dec; /* percent, from its processes' samples */
        bool util_known;
};

struct unit_owners {
        struct owner *v;
        size_t n, cap;
        bool procs_mapped; /* a process on the unit belongs to an owner */
        bool util_known;   /* a process on the unit had a utilisation sample */
};

struct collector {
        struct collector_opts o;
        char *hostname_label, *hostname, *proc_root;
        struct dev_sampler **samplers; /* our references */
        size_t n_samplers;
        const struct dev_attr_hints **hints;
        size_t n_hints;
        struct metrics_store *store;
        struct attr_specs *specs;
        struct attr_podres *podres; /* the collector's current table */

        pthread_mutex_t mu; /* guards everything below */
        pthread_cond_t cond;
        bool stop;
        bool podres_new;
        struct attr_podres *podres_pending;
        bool samplers_new;
        struct dev_sampler **samplers_pending;
        size_t n_samplers_pending;

        pthread_t thread;
        bool thread_running;
        _Atomic uint64_t last_duration_us;
        _Atomic uint64_t collections;
};

static uint64_t now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

struct collector *collector_new(const struct collector_opts *o, struct metrics_store *store)
{
        struct collector *c = xcalloc(1, sizeof(*c));
        c->o = *o;
        c->hostname_label = xstrdup(o->hostname_label && *o->hostname_label ? o->hostname_label : "Hostname");
        c->hostname = xstrdup(o->hostname ? o->hostname : "");
        c->proc_root = xstrdup(o->proc_root && *o->proc_root ? o->proc_root : "/proc");
        c->o.hostname_label = c->hostname_label;
        c->o.hostname = c->hostname;
        c->o.proc_root = c->proc_root;
        c->o.state_dirs = NULL;
        c->o.cdi_prefix = NULL;
        if (c->o.interval_ms < 100)
                c->o.interval_ms = 100;
        c->store = store;
        c->n_hints = o->n_hints;
        c->hints = xcalloc(o->n_hints + 1, sizeof(*c->hints));
        if (o->n_hints)
                memcpy(c->hints, o->hints, o->n_hints * sizeof(*o->hints));
        c->o.hints = NULL;
        c->specs = attr_specs_new(o->state_dirs, o->cdi_prefix, o->hints, o->n_hints);
        pthread_mutex_init(&c->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->cond, &ca);
        pthread_condattr_destroy(&ca);
        return c;
}

/* ---- attribution ---- */

static struct owner *owner_get(struct unit_owners *uo, const char *ns, const char *pod,
                               const char *ctr)
{
        ns = ns ? ns : "";
        ctr = ctr ? ctr : "";
        for (size_t i = 0; i < uo->n; i++) {
                struct owner *o = &uo->v[i];
                if (strcmp(o->pod, pod) == 0 && strcmp(o->namespace, ns) == 0 &&
                    strcmp(o->container, ctr) == 0)
                        return o;
        }
        xgrow((void **)&uo->v, &uo->cap, uo->n + 1, sizeof(*uo->v));
        struct owner *o = &uo->v[uo->n++];
        *o = (struct owner){ .namespace = ns, .pod = pod, .container = ctr };
        return o;
}

static bool spec_named(const struct attr_spec *s)
{
        return s && !s->sandbox && s->pod && s->namespace;
}

static void attribute_processes(struct collector *c, const struct dev_sample *smp,
                                struct unit_owners *owners)
{
        for (size_t i = 0; i < smp->n_units; i++) {
                const struct dev_unit *u = &smp->units[i];
                for (size_t k = 0; k < u->n_procs; k++) {
                        const struct dev_proc *p = &u->procs[k];
                        if (p->util >= 0)
                                owners[i].util_known = true;
                        char id[ATTR_ID_LEN + 1];
                        if (attr_cgroup_container_id(c->proc_root, p->pid, id) < 0)
                                continue;
                        const struct attr_spec *s = attr_specs_find(c->specs, id);
                        if (!spec_named(s))
                                continue;
                        struct owner *o = owner_get(&owners[i], s->namespace, s->pod, s->container);
                        o->mem_bytes += p->mem_bytes;
                        if (p->util >= 0) {
                                o->util += (unsigned)p->util;
                                o->util_known = true;
                        }
                        if (p->enc >= 0)
                                o->enc += (unsigned)p->enc;
                        if (p->dec >= 0)
                                o->dec += (unsigned)p->dec;
                        owners[i].procs_mapped = true;
                }
        }
}

#define RESOLVE_MAX 64

static void attribute_specs(struct collector *c, const struct dev_sample *smp,
                            struct unit_owners *owners)
{
        size_t out[RESOLVE_MAX];
        for (size_t i = 0; i < attr_specs_count(c->specs); i++) {
                const struct attr_spec *s = attr_specs_at(c->specs, i);
                if (!spec_named(s))
                        continue;
                for (size_t r = 0; s->refs && s->refs[r]; r++) {
                        size_t n = attr_resolve(smp->units, smp->n_units, s->ref_hints[r], s->refs[r],
                                                true, out, RESOLVE_MAX);
                        for (size_t k = 0; k < n && k < RESOLVE_MAX; k++)
                                owner_get(&owners[out[k]], s->namespace, s->pod, s->container);
                }
                for (size_t m = 0; m < s->n_devnums; m++) {
                        ssize_t k = attr_resolve_devnum(smp->units, smp->n_units, s->devnums[m]);
                        if (k >= 0)
                                owner_get(&owners[k], s->namespace, s->pod, s->container);
                }
        }
}

static void attribute_podres(struct collector *c, const struct dev_sample *smp,
                             struct unit_owners *owners)
{
        if (!c->podres)
                return;
        size_t out[RESOLVE_MAX];
        for (size_t i = 0; i < c->podres->n; i++) {
                const struct attr_podres_entry *e = &c->podres->entries[i];
                if (!*e->pod)
                        continue;
                char **refs = NULL;
                const struct dev_attr_hints *ctx = NULL;
                if (!*e->resource) { /* a DRA claim's CDI device */
                        for (size_t h = 0; h < c->n_hints && !refs; h++) {
                                refs = attr_cdi_device(e->device, c->hints[h]->cdi_vendor, NULL);
                                ctx = c->hints[h];
                        }
                } else {
                        ctx = attr_hints_for_resource(c->hints, c->n_hints, e->resource);
                        refs = strv_push(NULL, e->device);
                }
                for (size_t r = 0; refs && refs[r]; r++) {
                        size_t n = attr_resolve(smp->units, smp->n_units, ctx, refs[r], false, out,
                                                RESOLVE_MAX);
                        for (size_t k = 0; k < n && k < RESOLVE_MAX; k++)
                                owner_get(&owners[out[k]], e->namespace, e->pod, e->container);
                }
                strv_free(refs);
        }
}

static int owner_cmp(const void *a, const void *b)
{
        const struct owner *x = a, *y = b;
        int r = strcmp(x->namespace, y->namespace);
        if (!r)
                r = strcmp(x->pod, y->pod);
        if (!r)
                r = strcmp(x->container, y->container);
        return r;
}

/* ---- rendering ---- */

#define MAX_LABELS 24

struct render_ctx {
        const struct collector *c;
        struct expo *e;
        /* one exposition family per distinct family name, in first-seen order */
        struct fam {
                const char *name;
                struct expo_family *f;
        } *fams;
        size_t n_fams, cap_fams;
};

static struct expo_family *fam_for(struct render_ctx *rc, const struct dev_measure_family *mf)
{
        for (size_t i = 0; i < rc->n_fams; i++)
                if (strcmp(rc->fams[i].name, mf->name) == 0)
                        return rc->fams[i].f;
        xgrow((void **)&rc->fams, &rc->cap_fams, rc->n_fams + 1, sizeof(*rc->fams));
        struct expo_family *f = expo_family(rc->e, mf->name,
                                            mf->type == DEV_MEASURE_COUNTER ? EXPO_COUNTER : EXPO_GAUGE,
                                            mf->help);
        rc->fams[rc->n_fams++] = (struct fam){ mf->name, f };
        return f;
}

/* The value family f has on unit u for owner o (NULL: nobody); false when
 * there is none. */
static bool value_for(const struct dev_unit *u, size_t f, const struct unit_owners *uo,
                      const struct owner *o, double *v)
{
        if (!u->values[f].has)
                return false;
        *v = u->values[f].v;
        const struct dev_measure_family *mf = &u->families[f];
        if (o && uo->procs_mapped && mf->share == DEV_SHARE_MEMORY && mf->share_unit > 0)
                *v = floor((double)o->mem_bytes / mf->share_unit);
        if (o && uo->procs_mapped && uo->util_known && mf->share == DEV_SHARE_UTIL)
                *v = o->util > 100 ? 100 : o->util;
        return true;
}

/* A unit's labels with the host label and, for an owner, the pod's; the
 * extra value labels of family mf last.  Returns how many. */
static size_t unit_labels(const struct render_ctx *rc, const struct dev_unit *u,
                          const struct owner *o, struct expo_label *l)
{
        size_t n = 0;
        for (size_t i = 0; i < u->n_labels && n < MAX_LABELS - 4; i++) {
                if (i == u->host_at)
                        l[n++] = (struct expo_label){ rc->c->hostname_label, rc->c->hostname };
                l[n++] = (struct expo_label){ u->labels[i].name, u->labels[i].value };
        }
        if (u->host_at >= u->n_labels)
                l[n++] = (struct expo_label){ rc->c->hostname_label, rc->c->hostname };
        if (o) {
                l[n++] = (struct expo_label){ "container", o->container };
                l[n++] = (struct expo_label){ "namespace", o->namespace };
                l[n++] = (struct expo_label){ "pod", o->pod };
        }
        return n;
}

/* Renders the units' families; returns the chunks (one per family) in *out. */
static size_t render(const struct collector *c, const struct dev_sample *smp,
                     const struct unit_owners *owners, struct metrics_chunk **out)
{
        struct render_ctx rc = { .c = c, .e = expo_new() };
        /* the families in the samplers' order, so that each stays contiguous */
        for (size_t i = 0; i < smp->n_units; i++)
                for (size_t f = 0; f < smp->units[i].n_families; f++)
                        fam_for(&rc, &smp->units[i].families[f]);

        /* one prepared label set per series owner of each unit (or one for a
         * unit nobody uses), used for every family */
        size_t n_sets = 0;
        for (size_t i = 0; i < smp->n_units; i++)
                n_sets += owners[i].n ? owners[i].n : 1;
        struct expo_labels *sets = xcalloc(n_sets + 1, sizeof(*sets));
        size_t *set_unit = xcalloc(n_sets + 1, sizeof(*set_unit));
        const struct owner **set_owner = xcalloc(n_sets + 1, sizeof(*set_owner));
        bool *set_ok = xcalloc(n_sets + 1, sizeof(*set_ok));
        size_t k = 0, text_total = 0;
        for (size_t i = 0; i < smp->n_units; i++) {
                const struct unit_owners *uo = &owners[i];
                for (size_t o = 0; o < (uo->n ? uo->n : 1); o++, k++) {
                        struct expo_label l[MAX_LABELS];
                        set_unit[k] = i;
                        set_owner[k] = uo->n ? &uo->v[o] : NULL;
                        size_t n = unit_labels(&rc, &smp->units[i], set_owner[k], l);
                        set_ok[k] = expo_labels_prepare(rc.e, l, n, &sets[k]) == 0;
                        if (set_ok[k])
                                text_total += sets[k].text_len;
                }
        }
        /* each family gets about one line per set: room for it at once */
        for (size_t f = 0; f < rc.n_fams; f++)
                expo_family_reserve(rc.fams[f].f, text_total + n_sets * (strlen(rc.fams[f].name) + 24));
        for (size_t i = 0; i < n_sets; i++) {
                size_t u = set_unit[i];
                const struct dev_unit *unit = &smp->units[u];
                if (!set_ok[i])
                        continue;
                for (size_t f = 0; f < unit->n_families; f++) {
                        double v;
                        if (value_for(unit, f, &owners[u], set_owner[i], &v))
                                expo_add_labels(fam_for(&rc, &unit->families[f]), &sets[i], v);
                }
        }
        for (size_t i = 0; i < n_sets; i++)
                expo_labels_release(&sets[i]);
        free(sets);
        free(set_unit);
        free(set_owner);
        free(set_ok);
        free(rc.fams);

        struct expo_chunk *chunks;
        size_t n_chunks = expo_render_chunks(rc.e, &chunks);
        expo_free(rc.e);
        struct metrics_chunk *mc = xcalloc(n_chunks + 1, sizeof(*mc));
        for (size_t i = 0; i < n_chunks; i++)
                mc[i] = (struct metrics_chunk){ chunks[i].data, chunks[i].len };
        free(chunks);
        *out = mc;
        return n_chunks;
}

/* ---- one collection ---- */

static void samplers_release(struct dev_sampler **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dev_sampler_unref(v[i]);
        free(v);
}

static void take_mailbox(struct collector *c)
{
        struct dev_sampler **old = NULL;
        size_t n_old = 0;
        pthread_mutex_lock(&c->mu);
        if (c->podres_new) {
                attr_podres_free(c->podres);
                c->podres = TAKE_PTR(c->podres_pending);
                c->podres_new = false;
        }
        if (c->samplers_new) {
                old = c->samplers;
                n_old = c->n_samplers;
                c->samplers = TAKE_PTR(c->samplers_pending);
                c->n_samplers = c->n_samplers_pending;
                c->n_samplers_pending = 0;
                c->samplers_new = false;
        }
        pthread_mutex_unlock(&c->mu);
        samplers_release(old, n_old); /* may free a sampler (a library call): outside the lock */
}

void collector_run_once(struct collector *c)
{
        uint64_t t0 = now_us();
        take_mailbox(c);

        struct dev_sample smp = { 0 };
        for (size_t i = 0; i < c->n_samplers; i++)
                if (c->samplers[i]->ops->sample(c->samplers[i], &smp) < 0)
                        log_debug("metrics", "a sampler failed sampler=%s", c->samplers[i]->ops->name);
        attr_specs_scan(c->specs);

        struct unit_owners *owners = xcalloc(smp.n_units + 1, sizeof(*owners));
        attribute_processes(c, &smp, owners);
        attribute_specs(c, &smp, owners);
        attribute_podres(c, &smp, owners);
        for (size_t i = 0; i < smp.n_units; i++)
                if (owners[i].n > 1)
                        qsort(owners[i].v, owners[i].n, sizeof(*owners[i].v), owner_cmp);

        struct metrics_chunk *chunks;
        size_t n_chunks = render(c, &smp, owners, &chunks);
        metrics_store_publish_chunks(c->store, METRICS_SLOT_GPU, chunks, n_chunks);

        for (size_t i = 0; i < smp.n_units; i++)
                free(owners[i].v);
        free(owners);
        dev_sample_release(&smp);
        /* A collection frees a few times the text it rendered; glibc keeps
         * such memory resident in this thread's arena unless asked. */
        malloc_trim(0);
        atomic_store(&c->last_duration_us, now_us() - t0);
        atomic_fetch_add(&c->collections, 1);
}

/* ---- thread and mailbox ---- */

static void *thread_main(void *arg)
{
        struct collector *c = arg;
        pthread_mutex_lock(&c->mu);
        while (!c->stop) {
                pthread_mutex_unlock(&c->mu);
                uint64_t start = now_us();
                collector_run_once(c);
                uint64_t deadline = start + c->o.interval_ms * 1000;
                struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000),
                                       .tv_nsec = (long)(deadline % 1000000) * 1000 };
                pthread_mutex_lock(&c->mu);
                while (!c->stop && now_us() < deadline)
                        pthread_cond_timedwait(&c->cond, &c->mu, &ts);
        }
        pthread_mutex_unlock(&c->mu);
        return NULL;
}

int collector_start(struct collector *c)
{
        int r = pthread_create(&c->thread, NULL, thread_main, c);
        if (r != 0)
                return -r;
        pthread_setname_np(c->thread, "devlet-metrics"); /* seen in top -H, /proc/<pid>/task */
        c->thread_running = true;
        return 0;
}

void collector_free(struct collector *c)
{
        if (!c)
                return;
        if (c->thread_running) {
                pthread_mutex_lock(&c->mu);
                c->stop = true;
                pthread_cond_signal(&c->cond);
                pthread_mutex_unlock(&c->mu);
                pthread_join(c->thread, NULL);
        }
        samplers_release(c->samplers, c->n_samplers);
        samplers_release(c->samplers_pending, c->n_samplers_pending);
        free(c->hints);
        attr_specs_free(c->specs);
        attr_podres_free(c->podres);
        attr_podres_free(c->podres_pending);
        free(c->hostname_label);
        free(c->hostname);
        free(c->proc_root);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
        free(c);
}

void collector_put_podres(struct collector *c, struct attr_podres *p)
{
        pthread_mutex_lock(&c->mu);
        attr_podres_free(c->podres_pending);
        c->podres_pending = p;
        c->podres_new = true;
        pthread_mutex_unlock(&c->mu);
}

void collector_put_samplers(struct collector *c, struct dev_sampler *const *s, size_t n)
{
        struct dev_sampler **copy = xcalloc(n + 1, sizeof(*copy));
        for (size_t i = 0; i < n; i++)
                copy[i] = dev_sampler_ref(s[i]);
        pthread_mutex_lock(&c->mu);
        struct dev_sampler **old = c->samplers_pending;
        size_t n_old = c->n_samplers_pending;
        c->samplers_pending = copy;
        c->n_samplers_pending = n;
        c->samplers_new = true;
        pthread_mutex_unlock(&c->mu);
        samplers_release(old, n_old);
}

uint64_t collector_last_duration_us(struct collector *c)
{
        return atomic_load(&c->last_duration_us);
}

uint64_t collector_collections(struct collector *c)
{
        return atomic_load(&c->collections);
}
