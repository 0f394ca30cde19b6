/* The GPU collector thread (see collector.h).
 *
 * Each collection: take the mailbox (pod-resources table, last XIDs), sample
 * NVML (sample.c), rescan the OCI specs (ocispec.c), then build each unit's
 * owners — the (namespace, pod, container) using it — from three sources:
 *   1. processes: NVML's pids -> /proc/<pid>/cgroup -> container ID -> spec
 *      names; these also carry the owner's memory and SM utilisation,
 *   2. specs: the devices each running container's spec names,
 *   3. pod-resources: the devices the kubelet assigned.
 * Every owner of a unit gets its own series of every family (a GPU nobody
 * uses gets one series without pod labels).  On a unit where processes
 * were mapped to owners, DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_GPU_UTIL are
 * each owner's share; elsewhere every series carries the device's value, as
 * dcgm-exporter does.  The rendered text is published in the store's GPU
 * slot.
 *
 * Threads: the collector's own (pthread) does all of this; the loop only
 * drops inputs in the mailbox (mutex) and reads two atomics.  The thread
 * never touches the loop, and a scrape never waits for it. */
#include "metrics/collector.h"

#include <errno.h>
#include <malloc.h>
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

static const struct family {
        int field; /* enum smp_field, or FIELD_XID */
        const char *name;
        enum expo_type type;
        const char *help;
} families[] = {
#define FIELD_XID (-1)
        { SMP_SM_CLOCK, "DCGM_FI_DEV_SM_CLOCK", EXPO_GAUGE, "SM clock frequency (in MHz)." },
        { SMP_MEM_CLOCK, "DCGM_FI_DEV_MEM_CLOCK", EXPO_GAUGE, "Memory clock frequency (in MHz)." },
        { SMP_MEMORY_TEMP, "DCGM_FI_DEV_MEMORY_TEMP", EXPO_GAUGE, "Memory temperature (in C)." },
        { SMP_GPU_TEMP, "DCGM_FI_DEV_GPU_TEMP", EXPO_GAUGE, "GPU temperature (in C)." },
        { SMP_POWER_USAGE, "DCGM_FI_DEV_POWER_USAGE", EXPO_GAUGE, "Power draw (in W)." },
        { SMP_TOTAL_ENERGY, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", EXPO_COUNTER,
          "Total energy consumption since boot (in mJ)." },
        { SMP_PCIE_REPLAY, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", EXPO_COUNTER,
          "Total number of PCIe retries." },
        { SMP_GPU_UTIL, "DCGM_FI_DEV_GPU_UTIL", EXPO_GAUGE, "GPU utilization (in %)." },
        { SMP_MEM_COPY_UTIL, "DCGM_FI_DEV_MEM_COPY_UTIL", EXPO_GAUGE, "Memory utilization (in %)." },
        { SMP_ENC_UTIL, "DCGM_FI_DEV_ENC_UTIL", EXPO_GAUGE, "Encoder utilization (in %)." },
        { SMP_DEC_UTIL, "DCGM_FI_DEV_DEC_UTIL", EXPO_GAUGE, "Decoder utilization (in %)." },
        { FIELD_XID, "DCGM_FI_DEV_XID_ERRORS", EXPO_GAUGE, "Value of the last XID error encountered." },
        { SMP_FB_FREE, "DCGM_FI_DEV_FB_FREE", EXPO_GAUGE, "Framebuffer memory free (in MiB)." },
        { SMP_FB_USED, "DCGM_FI_DEV_FB_USED", EXPO_GAUGE, "Framebuffer memory used (in MiB)." },
        { SMP_FB_RESERVED, "DCGM_FI_DEV_FB_RESERVED", EXPO_GAUGE,
          "Framebuffer memory reserved (in MiB)." },
        { SMP_NVLINK_BANDWIDTH, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", EXPO_COUNTER,
          "Total number of NVLink bandwidth counters for all lanes." },
        { SMP_REMAP_UNCORRECTABLE, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", EXPO_COUNTER,
          "Number of remapped rows for uncorrectable errors." },
        { SMP_REMAP_CORRECTABLE, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", EXPO_COUNTER,
          "Number of remapped rows for correctable errors." },
        { SMP_REMAP_FAILURE, "DCGM_FI_DEV_ROW_REMAP_FAILURE", EXPO_GAUGE,
          "Whether remapping of rows has failed." },
};

/* Who uses a unit; the strings belong to a spec or the pod-resources
 * table, both alive for the whole collection. */
struct owner {
        const char *namespace, *pod, *container;
        uint64_t mem_bytes; /* from its processes */
        unsigned sm_util;   /* from its processes' samples */
        bool sm_known;
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
        struct smp_nvml *nvml;
        struct metrics_store *store;
        struct attr_specs *specs;
        struct attr_podres *podres; /* the collector's current table */

        pthread_mutex_t mu; /* guards everything below */
        pthread_cond_t cond;
        bool stop;
        bool podres_new;
        struct attr_podres *podres_pending;
        struct collector_xid *xids;
        size_t n_xids;

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

struct collector *collector_new(const struct collector_opts *o, struct smp_nvml *nvml,
                                struct metrics_store *store)
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
        c->nvml = nvml;
        c->store = store;
        c->specs = attr_specs_new(o->state_dirs, o->cdi_prefix);
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

static void attribute_processes(struct collector *c, const struct smp_sample *smp,
                                struct unit_owners *owners)
{
        for (size_t i = 0; i < smp->n_units; i++) {
                const struct smp_unit *u = &smp->units[i];
                for (size_t k = 0; k < u->n_procs; k++) {
                        const struct smp_proc *p = &u->procs[k];
                        if (p->sm_util >= 0)
                                owners[i].util_known = true;
                        char id[ATTR_ID_LEN + 1];
                        if (attr_cgroup_container_id(c->proc_root, p->pid, id) < 0)
                                continue;
                        const struct attr_spec *s = attr_specs_find(c->specs, id);
                        if (!spec_named(s))
                                continue;
                        struct owner *o = owner_get(&owners[i], s->namespace, s->pod, s->container);
                        o->mem_bytes += p->mem_bytes;
                        if (p->sm_util >= 0) {
                                o->sm_util += (unsigned)p->sm_util;
                                o->sm_known = true;
                        }
                        owners[i].procs_mapped = true;
                }
        }
}

static void attribute_specs(struct collector *c, const struct smp_sample *smp,
                            const struct attr_unit *ids, struct unit_owners *owners)
{
        size_t out[64];
        for (size_t i = 0; i < attr_specs_count(c->specs); i++) {
                const struct attr_spec *s = attr_specs_at(c->specs, i);
                if (!spec_named(s))
                        continue;
                for (size_t r = 0; s->refs && s->refs[r]; r++) {
                        size_t n = attr_resolve(ids, smp->n_units, s->refs[r], true, out, 64);
                        for (size_t k = 0; k < n && k < 64; k++)
                                owner_get(&owners[out[k]], s->namespace, s->pod, s->container);
                }
                for (size_t m = 0; m < s->n_minors; m++) {
                        ssize_t k = attr_resolve_minor(ids, smp->n_units, s->minors[m]);
                        if (k >= 0)
                                owner_get(&owners[k], s->namespace, s->pod, s->container);
                }
        }
}

static bool uuid_form(const char *id)
{
        return strncasecmp(id, "GPU-", 4) == 0 || strncasecmp(id, "MIG-", 4) == 0;
}

static void attribute_podres(struct collector *c, const struct smp_sample *smp,
                             const struct attr_unit *ids, struct unit_owners *owners)
{
        if (!c->podres)
                return;
        size_t out[64];
        for (size_t i = 0; i < c->podres->n; i++) {
                const struct attr_podres_entry *e = &c->podres->entries[i];
                if (!*e->pod)
                        continue;
                char **refs = NULL;
                if (!*e->resource) /* a DRA claim's CDI device */
                        refs = attr_cdi_device(e->device, refs);
                else if (attr_podres_gpu_resource(e->resource) || uuid_form(e->device))
                        refs = strv_push(refs, e->device);
                for (size_t r = 0; refs && refs[r]; r++) {
                        size_t n = attr_resolve(ids, smp->n_units, refs[r], false, out, 64);
                        for (size_t k = 0; k < n && k < 64; k++)
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

#define MAX_LABELS 16

struct render_ctx {
        const struct collector *c;
        const char *driver;
        const struct collector_xid *xids;
        size_t n_xids;
};

static unsigned last_xid(const struct render_ctx *rc, const char *uuid)
{
        for (size_t i = 0; i < rc->n_xids; i++)
                if (strcmp(rc->xids[i].uuid, uuid) == 0)
                        return rc->xids[i].xid;
        return 0;
}

/* The value family f has on unit u for owner o (NULL: nobody); false when
 * there is none. */
static bool value_for(const struct render_ctx *rc, const struct family *f, const struct smp_unit *u,
                      const struct unit_owners *uo, const struct owner *o, double *v)
{
        if (f->field == FIELD_XID) {
                if (u->id.mig >= 0)
                        return false;
                *v = last_xid(rc, u->uuid);
                return true;
        }
        if (!u->has[f->field])
                return false;
        *v = u->value[f->field];
        if (o && uo->procs_mapped && f->field == SMP_FB_USED)
                *v = (double)(o->mem_bytes / (1024 * 1024));
        if (o && uo->procs_mapped && uo->util_known && f->field == SMP_GPU_UTIL)
                *v = o->sm_util > 100 ? 100 : o->sm_util;
        return true;
}

/* Renders the DCGM families; returns the chunks (one per family) in *out. */
static size_t render(const struct render_ctx *rc, const struct smp_sample *smp,
                     const struct unit_owners *owners, struct metrics_chunk **out)
{
        struct expo *e = expo_new();
        struct expo_family *fams[ARRAY_SIZE(families)];
        for (size_t f = 0; f < ARRAY_SIZE(families); f++)
                fams[f] = expo_family(e, families[f].name, families[f].type, families[f].help);

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
                const struct smp_unit *u = &smp->units[i];
                const struct unit_owners *uo = &owners[i];
                char gpu[16], device[32], gi[16];
                snprintf(gpu, sizeof(gpu), "%u", u->id.gpu);
                snprintf(device, sizeof(device), "nvidia%u", u->id.gpu);
                snprintf(gi, sizeof(gi), "%u", u->id.gi);
                /* dcgm-exporter's label order */
                struct expo_label l[MAX_LABELS];
                size_t base = 0;
                l[base++] = (struct expo_label){ "gpu", gpu };
                l[base++] = (struct expo_label){ "UUID", u->parent_uuid };
                l[base++] = (struct expo_label){ "pci_bus_id", u->bus_id };
                l[base++] = (struct expo_label){ "device", device };
                l[base++] = (struct expo_label){ "modelName", u->name };
                if (u->id.mig >= 0) {
                        l[base++] = (struct expo_label){ "GPU_I_PROFILE", u->profile };
                        l[base++] = (struct expo_label){ "GPU_I_ID", gi };
                }
                l[base++] = (struct expo_label){ rc->c->hostname_label, rc->c->hostname };
                if (*rc->driver)
                        l[base++] = (struct expo_label){ "DCGM_FI_DRIVER_VERSION", rc->driver };
                for (size_t o = 0; o < (uo->n ? uo->n : 1); o++, k++) {
                        size_t n = base;
                        if (uo->n) {
                                l[n++] = (struct expo_label){ "container", uo->v[o].container };
                                l[n++] = (struct expo_label){ "namespace", uo->v[o].namespace };
                                l[n++] = (struct expo_label){ "pod", uo->v[o].pod };
                        }
                        set_unit[k] = i;
                        set_owner[k] = uo->n ? &uo->v[o] : NULL;
                        set_ok[k] = expo_labels_prepare(e, l, n, &sets[k]) == 0;
                        if (set_ok[k])
                                text_total += sets[k].text_len;
                }
        }
        /* each family gets about one line per set: room for it at once */
        for (size_t f = 0; f < ARRAY_SIZE(families); f++)
                expo_family_reserve(fams[f], text_total + n_sets * (strlen(families[f].name) + 24));
        for (size_t f = 0; f < ARRAY_SIZE(families); f++) {
                for (size_t i = 0; i < n_sets; i++) {
                        double v;
                        size_t u = set_unit[i];
                        if (set_ok[i] && value_for(rc, &families[f], &smp->units[u], &owners[u],
                                                   set_owner[i], &v))
                                expo_add_labels(fams[f], &sets[i], v);
                }
        }
        for (size_t i = 0; i < n_sets; i++)
                expo_labels_release(&sets[i]);
        free(sets);
        free(set_unit);
        free(set_owner);
        free(set_ok);

        struct expo_chunk *chunks;
        size_t n_chunks = expo_render_chunks(e, &chunks);
        expo_free(e);
        struct metrics_chunk *mc = xcalloc(n_chunks + 1, sizeof(*mc));
        for (size_t i = 0; i < n_chunks; i++)
                mc[i] = (struct metrics_chunk){ chunks[i].data, chunks[i].len };
        free(chunks);
        *out = mc;
        return n_chunks;
}

/* ---- one collection ---- */

static void take_mailbox(struct collector *c, struct collector_xid **xids, size_t *n_xids)
{
        pthread_mutex_lock(&c->mu);
        if (c->podres_new) {
                attr_podres_free(c->podres);
                c->podres = TAKE_PTR(c->podres_pending);
                c->podres_new = false;
        }
        *n_xids = c->n_xids;
        *xids = c->n_xids ? xmalloc(c->n_xids * sizeof(**xids)) : NULL;
        if (c->n_xids)
                memcpy(*xids, c->xids, c->n_xids * sizeof(**xids));
        pthread_mutex_unlock(&c->mu);
}

void collector_run_once(struct collector *c)
{
        uint64_t t0 = now_us();
        _cleanup_free_ struct collector_xid *xids = NULL;
        size_t n_xids = 0;
        take_mailbox(c, &xids, &n_xids);

        struct smp_sample smp = { 0 };
        if (c->nvml && smp_collect(c->nvml, &smp) < 0)
                log_debug("metrics", "NVML could not count the GPUs");
        attr_specs_scan(c->specs);

        _cleanup_free_ struct attr_unit *ids = xcalloc(smp.n_units + 1, sizeof(*ids));
        for (size_t i = 0; i < smp.n_units; i++)
                ids[i] = smp.units[i].id;
        struct unit_owners *owners = xcalloc(smp.n_units + 1, sizeof(*owners));
        attribute_processes(c, &smp, owners);
        attribute_specs(c, &smp, ids, owners);
        attribute_podres(c, &smp, ids, owners);
        for (size_t i = 0; i < smp.n_units; i++)
                if (owners[i].n > 1)
                        qsort(owners[i].v, owners[i].n, sizeof(*owners[i].v), owner_cmp);

        struct render_ctx rc = {
                .c = c,
                .driver = c->nvml ? smp_nvml_driver_version(c->nvml) : "",
                .xids = xids,
                .n_xids = n_xids,
        };
        struct metrics_chunk *chunks;
        size_t n_chunks = render(&rc, &smp, owners, &chunks);
        metrics_store_publish_chunks(c->store, METRICS_SLOT_GPU, chunks, n_chunks);

        for (size_t i = 0; i < smp.n_units; i++)
                free(owners[i].v);
        free(owners);
        smp_sample_release(&smp);
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
        smp_nvml_free(c->nvml);
        attr_specs_free(c->specs);
        attr_podres_free(c->podres);
        attr_podres_free(c->podres_pending);
        free(c->xids);
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

void collector_put_xids(struct collector *c, const struct collector_xid *x, size_t n)
{
        struct collector_xid *copy = n ? xmalloc(n * sizeof(*copy)) : NULL;
        if (n)
                memcpy(copy, x, n * sizeof(*copy));
        pthread_mutex_lock(&c->mu);
        free(c->xids);
        c->xids = copy;
        c->n_xids = n;
        pthread_mutex_unlock(&c->mu);
}

uint64_t collector_last_duration_us(struct collector *c)
{
        return atomic_load(&c->last_duration_us);
}

uint64_t collector_collections(struct collector *c)
{
        return atomic_load(&c->collections);
}
