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
 * Each family has one series per unit, labelled with the pod when exactly
 * one owner holds it (see DESIGN.md, "Series that add up"); devlet's
 * per-container families split the unit's memory and utilisation between
 * its owners by their processes, at most the unit's value, the rest
 * unattributed; --kubernetes-virtual-gpus adds dcgm-exporter's per-pod
 * series of shared units.  The rendered text is published in the store's
 * GPU slot.
 *
 * Threads: the collector's own (pthread) does all of this; the loop only
 * drops inputs in the mailbox (mutex) and reads two atomics.  The thread
 * never touches the loop, and a scrape never waits for it. */
#include "metrics/collector.h"

#include <ctype.h>
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
#include "base/thread.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "metrics/expo.h"
#include "metrics/podlabels.h"

/* Who uses a unit; the strings belong to a spec or the pod-resources
 * table, both alive for the whole collection. */
struct owner {
        const char *namespace, *pod, *container;
        char vgpu[16]; /* the replica it holds ("<id>::<n>"), "" unknown */
        uint64_t mem_bytes; /* from its processes */
        unsigned util, enc, dec; /* percent, from its processes' samples */
        bool util_known;
        json_t *labels; /* the pod's labels, names sanitised (sole owners, with
                         * --kubernetes-enable-pod-labels), or NULL */
        /* a sole owner's values of the unit's pod_labels keys, in their
         * order ("" where the pod lacks one), strv; NULL: none asked */
        char **asked;
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
        char *kubeconfig, *node; /* for own_pod_labels; node NULL: never started */
        struct podlabels *own_pod_labels; /* started when a unit first asks (thread's) */
        struct dev_sampler **samplers; /* our references */
        size_t n_samplers;
        const struct dev_attr_hints **hints;
        size_t n_hints;
        struct metrics_store *store;
        char **selected; /* --collectors: the families to export; NULL: all */
        bool *selected_checked; /* per selected name: warned or found once */
        bool valued_checked;    /* the selected families with no value were told */
        struct attr_specs *specs;
        struct attr_podres *podres; /* the collector's current table */

        struct sleeper sl; /* its mutex guards everything below */
        bool podres_new;
        struct attr_podres *podres_pending;
        bool samplers_new;
        struct dev_sampler **samplers_pending;
        size_t n_samplers_pending;

        pthread_t thread;
        bool thread_running;
        uint64_t last_trim_us; /* collector thread only */
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
        c->hostname_label = xstrdup(o->hostname_label && *o->hostname_label ? o->hostname_label : "auto");
        c->hostname = xstrdup(o->hostname ? o->hostname : "");
        c->proc_root = xstrdup(o->proc_root && *o->proc_root ? o->proc_root : "/proc");
        c->o.hostname_label = c->hostname_label;
        c->o.hostname = c->hostname;
        c->o.proc_root = c->proc_root;
        c->kubeconfig = xstrdup(o->kubeconfig ? o->kubeconfig : "");
        c->node = o->node ? xstrdup(o->node) : NULL;
        c->o.kubeconfig = NULL;
        c->o.node = NULL;
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
        for (size_t i = 0; o->families && o->families[i]; i++)
                c->selected = strv_push(c->selected, o->families[i]);
        if (o->families && !c->selected)
                c->selected = xcalloc(1, sizeof(*c->selected));
        c->o.families = NULL;
        size_t n_selected = 0;
        while (c->selected && c->selected[n_selected])
                n_selected++;
        c->selected_checked = xcalloc(n_selected + 1, sizeof(*c->selected_checked));
        c->specs = attr_specs_new(o->state_dirs, o->cdi_prefix, o->hints, o->n_hints);
        sleeper_init(&c->sl);
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
                _cleanup_strv_free_ char **refs = NULL;
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
                const char *replica = strstr(e->device, "::");
                for (size_t r = 0; refs && refs[r]; r++) {
                        size_t n = attr_resolve(smp->units, smp->n_units, ctx, refs[r], false, out,
                                                RESOLVE_MAX);
                        for (size_t k = 0; k < n && k < RESOLVE_MAX; k++) {
                                struct owner *o = owner_get(&owners[out[k]], e->namespace, e->pod,
                                                            e->container);
                                if (replica && replica[2] && strlen(replica + 2) < sizeof(o->vgpu))
                                        snprintf(o->vgpu, sizeof(o->vgpu), "%s", replica + 2);
                        }
                }
        }
}

static int str_cmp(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
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

#define MAX_LABELS (24 + PODLABELS_MAX_LABELS)

/* devlet's per-container families, one per way a device value splits. */
static const struct share_family {
        enum dev_share share;
        const char *container, *container_help;
        const char *rest, *rest_help;
} share_families[] = {
        { DEV_SHARE_MEMORY, "devlet_container_memory_used_bytes",
          "Device memory used by the container's processes (in bytes); summed over the "
          "containers of a device it is at most the device's.",
          "devlet_unattributed_memory_used_bytes",
          "Device memory used outside any container attributed to the device (in bytes)." },
        { DEV_SHARE_UTIL, "devlet_container_utilization_percent",
          "The container's share of the device's utilization (in %); summed over the "
          "containers of a device it is at most the device's.",
          "devlet_unattributed_utilization_percent",
          "The device's utilization not attributed to a container (in %)." },
        { DEV_SHARE_ENC, "devlet_container_encoder_utilization_percent",
          "The container's share of the device's encoder utilization (in %).",
          "devlet_unattributed_encoder_utilization_percent",
          "The device's encoder utilization not attributed to a container (in %)." },
        { DEV_SHARE_DEC, "devlet_container_decoder_utilization_percent",
          "The container's share of the device's decoder utilization (in %).",
          "devlet_unattributed_decoder_utilization_percent",
          "The device's decoder utilization not attributed to a container (in %)." },
};

static struct expo_family *family_of(struct expo *e, const struct dev_measure_family *mf)
{
        return expo_family(e, mf->name, mf->type == DEV_MEASURE_COUNTER ? EXPO_COUNTER : EXPO_GAUGE,
                           mf->help);
}

/* The owner's raw figure for a kind of share, from its processes. */
static double owner_raw(const struct owner *o, enum dev_share k)
{
        switch (k) {
        case DEV_SHARE_MEMORY:
                return (double)o->mem_bytes;
        case DEV_SHARE_UTIL:
                return o->util;
        case DEV_SHARE_ENC:
                return o->enc;
        case DEV_SHARE_DEC:
                return o->dec;
        default:
                return 0;
        }
}

/* The device's value of the family that splits by k, in the share's unit
 * (bytes for memory); false when the unit has none. */
static bool device_total(const struct dev_unit *u, enum dev_share k, double *total)
{
        for (size_t f = 0; f < u->n_families; f++) {
                const struct dev_measure_family *mf = &u->families[f];
                if (mf->share != k || !u->values[f].has)
                        continue;
                *total = u->values[f].v * (k == DEV_SHARE_MEMORY && mf->share_unit > 0 ? mf->share_unit : 1);
                return true;
        }
        return false;
}

/* Splits the device's total between its owners (out[o]) so that they sum
 * to at most the total; returns the rest.  Owners get what their processes
 * used; an owner alone on a device whose processes could not be mapped
 * gets everything. */
static double split(const struct unit_owners *uo, enum dev_share k, double total, double *out)
{
        bool known = k == DEV_SHARE_MEMORY ? uo->procs_mapped : uo->procs_mapped && uo->util_known;
        double sum = 0;
        for (size_t o = 0; o < uo->n; o++) {
                out[o] = known ? owner_raw(&uo->v[o], k) : 0;
                sum += out[o];
        }
        if (!known && uo->n == 1) {
                out[0] = total;
                sum = total;
        }
        if (sum > total && sum > 0) {
                double scale = total / sum;
                sum = 0;
                for (size_t o = 0; o < uo->n; o++) {
                        out[o] *= scale;
                        sum += out[o];
                }
        }
        return total > sum ? total - sum : 0;
}

/* Whether a label name follows Prometheus' convention (no "aB"). */
static bool snake_case(const char *name)
{
        for (size_t i = 0; name[i] && name[i + 1]; i++)
                if (islower((unsigned char)name[i]) && isupper((unsigned char)name[i + 1]))
                        return false;
        return true;
}

/* A --collectors file names the field (label rows included), without case. */
static bool field_named(const struct collector *c, const char *name)
{
        for (size_t i = 0; c->selected && c->selected[i]; i++)
                if (strcasecmp(c->selected[i], name) == 0)
                        return true;
        return false;
}

/* A --collectors file names the family, by its name or its field. */
static bool family_named(const struct collector *c, const struct dev_measure_family *mf)
{
        return field_named(c, mf->name) || (mf->field && field_named(c, mf->field));
}

/* The labels of a series: the unit's with the host label at its place, then
 * (sorted, as dcgm-exporter's attributes) the owner's and extra ones.
 * devlet's own families (own) keep only the unit's snake_case labels, as
 * Prometheus' naming rules want.  Returns how many. */
static size_t series_labels(const struct collector *c, const struct dev_unit *u, const struct owner *o,
                            bool vgpu, bool own, const struct expo_label *extra, size_t n_extra,
                            struct expo_label *l)
{
        size_t n = 0;
        /* --hostname-label none: no host label (dcgm-exporter's --no-hostname);
         * auto: the one the unit's family's exporter uses */
        bool host = strcmp(c->hostname_label, "none") != 0;
        const char *host_label = c->hostname_label;
        if (strcmp(host_label, "auto") == 0)
                host_label = u->hints && u->hints->host_label ? u->hints->host_label : "Hostname";
        for (size_t i = 0; i < u->n_labels && n < MAX_LABELS - 8; i++) {
                if (i == u->host_at && host)
                        l[n++] = (struct expo_label){ host_label, c->hostname };
                if (u->labels[i].field && (own || !field_named(c, u->labels[i].name)))
                        continue;
                if (!own || snake_case(u->labels[i].name))
                        l[n++] = (struct expo_label){ u->labels[i].name, u->labels[i].value };
        }
        if (u->host_at >= u->n_labels && host)
                l[n++] = (struct expo_label){ host_label, c->hostname };
        size_t first = n;
        if (o) {
                l[n++] = (struct expo_label){ "container", o->container };
                l[n++] = (struct expo_label){ "namespace", o->namespace };
                l[n++] = (struct expo_label){ "pod", o->pod };
                if (vgpu && o->vgpu[0])
                        l[n++] = (struct expo_label){ "vgpu", o->vgpu };
        }
        for (size_t i = 0; i < n_extra && n < MAX_LABELS; i++)
                l[n++] = extra[i];
        /* the labels the unit asks of its pod, before the pod's own */
        for (size_t i = 0; o && !own && u->pod_labels && u->pod_labels[i] && u->pod_labels[i + 1];
             i += 2) {
                bool taken = n >= MAX_LABELS;
                for (size_t k = 0; k < n && !taken; k++)
                        taken = strcmp(l[k].name, u->pod_labels[i]) == 0;
                if (!taken)
                        l[n++] = (struct expo_label){ u->pod_labels[i],
                                                      o->asked && o->asked[i / 2] ? o->asked[i / 2] : "" };
        }
        /* the pod's own labels: never one that would repeat a label name */
        const char *key;
        json_t *v;
        if (o && !own)
                json_object_foreach(o->labels, key, v) {
                        bool taken = n >= MAX_LABELS;
                        for (size_t i = 0; i < n && !taken; i++)
                                taken = strcmp(l[i].name, key) == 0;
                        if (!taken)
                                l[n++] = (struct expo_label){ key, json_string_value(v) };
                }
        /* insertion sort of the attributes by name */
        for (size_t i = first + 1; i < n; i++)
                for (size_t j = i; j > first && strcmp(l[j - 1].name, l[j].name) > 0; j--) {
                        struct expo_label t = l[j];
                        l[j] = l[j - 1];
                        l[j - 1] = t;
                }
        return n;
}

/* Without --collectors: every family but the opt-in ones (those
 * dcgm-exporter's default file leaves out). */
static bool family_selected(const struct collector *c, const struct dev_unit *u, size_t f)
{
        if (u->families[f].off)
                return false; /* the family's own exporter config leaves it out */
        if (!c->selected)
                return f + u->n_opt_in < u->n_families;
        return family_named(c, &u->families[f]);
}

/* One series of a family whose values carry labels of their own. */
static void add_valued(const struct collector *c, struct expo_family *fam, const struct dev_unit *u,
                       const struct owner *sole, double v, const char *const *names, char *const *values,
                       struct expo_label *l)
{
        struct expo_label extra[4];
        size_t n_extra = 0;
        for (size_t k = 0; names[k] && values[k] && n_extra < 4; k++)
                extra[n_extra++] = (struct expo_label){ names[k], values[k] };
        size_t m = series_labels(c, u, sole, false, false, extra, n_extra, l);
        expo_add(fam, l, m, v);
}

/* One device: its one series per family (pod labels when exactly one
 * container holds it), dcgm-exporter's per-pod series of a shared device
 * with --kubernetes-virtual-gpus, and devlet's per-container families. */
static void render_unit(const struct collector *c, struct expo *e, const struct dev_unit *u,
                        const struct unit_owners *uo, double *shares)
{
        struct expo_label l[MAX_LABELS];
        const struct owner *sole = uo->n == 1 ? &uo->v[0] : NULL;
        struct expo_labels dev;
        size_t n = series_labels(c, u, sole, false, false, NULL, 0, l);
        bool dev_ok = expo_labels_prepare(e, l, n, &dev) == 0;
        for (size_t f = 0; f < u->n_families; f++) {
                const struct dev_measure_family *mf = &u->families[f];
                const struct dev_value *v = &u->values[f];
                if (!v->has || !family_selected(c, u, f))
                        continue;
                struct expo_family *fam = family_of(e, mf);
                if (mf->value_labels && v->labels) {
                        add_valued(c, fam, u, sole, v->v, mf->value_labels, v->labels, l);
                        for (size_t k = 0; k < v->n_more; k++)
                                if (v->more[k].labels)
                                        add_valued(c, fam, u, sole, v->more[k].v, mf->value_labels,
                                                   v->more[k].labels, l);
                } else if (dev_ok) {
                        expo_add_labels(fam, &dev, v->v);
                }
        }
        if (dev_ok)
                expo_labels_release(&dev);

        /* dcgm-exporter's --kubernetes-virtual-gpus: per-pod series of a
         * shared device for the families that split (GPU_UTIL, FB_USED) */
        if (c->o.virtual_gpus && uo->n > 1) {
                for (size_t f = 0; f < u->n_families; f++) {
                        const struct dev_measure_family *mf = &u->families[f];
                        if (!u->values[f].has || !family_selected(c, u, f) ||
                            (mf->share != DEV_SHARE_UTIL && mf->share != DEV_SHARE_MEMORY))
                                continue;
                        double total = 0;
                        device_total(u, mf->share, &total);
                        split(uo, mf->share, total, shares);
                        bool known = mf->share == DEV_SHARE_MEMORY ? uo->procs_mapped
                                                                   : uo->procs_mapped && uo->util_known;
                        struct expo_family *fam = family_of(e, mf);
                        for (size_t o = 0; o < uo->n; o++) {
                                double v = u->values[f].v;
                                if (known)
                                        v = mf->share == DEV_SHARE_MEMORY && mf->share_unit > 0
                                                    ? floor(shares[o] / mf->share_unit)
                                                    : round(shares[o]);
                                size_t m = series_labels(c, u, &uo->v[o], true, false, NULL, 0, l);
                                expo_add(fam, l, m, v);
                        }
                }
        }

        for (size_t k = 0; k < ARRAY_SIZE(share_families); k++) {
                const struct share_family *sf = &share_families[k];
                double total;
                if (!device_total(u, sf->share, &total))
                        continue;
                double rest = split(uo, sf->share, total, shares);
                struct expo_family *cf = expo_family(e, sf->container, EXPO_GAUGE, sf->container_help);
                struct expo_family *rf = expo_family(e, sf->rest, EXPO_GAUGE, sf->rest_help);
                for (size_t o = 0; o < uo->n; o++) {
                        size_t m = series_labels(c, u, &uo->v[o], false, true, NULL, 0, l);
                        expo_add(cf, l, m, shares[o]);
                }
                n = series_labels(c, u, NULL, false, true, NULL, 0, l);
                expo_add(rf, l, n, rest);
        }
}

/* Renders the units' families; returns the chunks (one per family) in *out. */
static size_t render(const struct collector *c, const struct dev_sample *smp,
                     const struct unit_owners *owners, struct metrics_chunk **out)
{
        struct expo *e = expo_new();
        /* the device families first, in the samplers' order, then devlet's */
        for (size_t i = 0; i < smp->n_units; i++)
                for (size_t f = 0; f < smp->units[i].n_families; f++)
                        if (family_selected(c, &smp->units[i], f))
                                family_of(e, &smp->units[i].families[f]);
        size_t max_owners = 0;
        for (size_t i = 0; i < smp->n_units; i++)
                if (owners[i].n > max_owners)
                        max_owners = owners[i].n;
        _cleanup_free_ double *shares = xcalloc(max_owners + 1, sizeof(*shares));
        for (size_t i = 0; i < smp->n_units; i++)
                render_unit(c, e, &smp->units[i], &owners[i], shares);

        _cleanup_free_ struct expo_chunk *chunks = NULL;
        size_t n_chunks = expo_render_chunks(e, &chunks);
        expo_free(e);
        struct metrics_chunk *mc = xcalloc(n_chunks + 1, sizeof(*mc));
        for (size_t i = 0; i < n_chunks; i++)
                mc[i] = (struct metrics_chunk){ chunks[i].data, chunks[i].len };
        *out = mc;
        return n_chunks;
}

/* ---- one collection ---- */

#define TRIM_EVERY_US (30 * 1000000ULL)

static bool sampler_knows(const struct dev_sampler *s, const char *field)
{
        for (size_t f = 0; f < s->ops->n_families; f++) {
                const struct dev_measure_family *mf = &s->ops->families[f];
                if (strcasecmp(mf->name, field) == 0 || (mf->field && strcasecmp(mf->field, field) == 0))
                        return true;
        }
        for (size_t k = 0; s->ops->label_fields && s->ops->label_fields[k]; k++)
                if (strcasecmp(s->ops->label_fields[k], field) == 0)
                        return true;
        return false;
}

/* A --collectors field no sampler knows is warned about once, with the
 * first sampler's reason; the NVSwitch fields together in one line. */
static void check_selected(struct collector *c)
{
        _cleanup_free_ char *nvswitch = NULL;
        const char *nvswitch_why = NULL;
        for (size_t i = 0; c->selected && c->selected[i]; i++) {
                if (c->selected_checked[i])
                        continue;
                bool known = false;
                const char *why = NULL;
                for (size_t s = 0; s < c->n_samplers && !known; s++) {
                        known = sampler_knows(c->samplers[s], c->selected[i]);
                        if (!why && c->samplers[s]->ops->why_absent)
                                why = c->samplers[s]->ops->why_absent(c->selected[i]);
                }
                if (!known && c->n_samplers == 0)
                        continue; /* nothing to compare with yet */
                c->selected_checked[i] = true;
                if (known)
                        continue;
                if (strncmp(c->selected[i], "DCGM_FI_DEV_NVSWITCH_", 21) == 0) {
                        char *more = xasprintf("%s%s%s", nvswitch ? nvswitch : "", nvswitch ? "," : "",
                                               c->selected[i]);
                        free(nvswitch);
                        nvswitch = more;
                        nvswitch_why = why;
                        continue;
                }
                log_warn("metrics", "--collectors names a field devlet does not export field=%s reason=\"%s\"",
                         c->selected[i], why ? why : "no device family gives it");
        }
        if (nvswitch)
                log_warn("metrics", "--collectors names NVSwitch fields devlet does not export fields=%s "
                         "reason=\"%s\"",
                         nvswitch, nvswitch_why ? nvswitch_why : "no device family gives them");
}

/* Once, at the first sample with devices: a --collectors family the
 * samplers declare but no device gave a value for (the driver answers "not
 * supported": retired pages on GPUs that remap rows, a fan on a passively
 * cooled board) is absent, as with dcgm-exporter, and said so. */
static void check_valued(struct collector *c, const struct dev_sample *smp)
{
        if (!c->selected || c->valued_checked || smp->n_units == 0)
                return;
        c->valued_checked = true;
        for (size_t i = 0; c->selected[i]; i++) {
                bool declared = false, valued = false;
                for (size_t k = 0; k < smp->n_units && !valued; k++) {
                        const struct dev_unit *u = &smp->units[k];
                        for (size_t f = 0; f < u->n_families; f++)
                                if (strcasecmp(u->families[f].name, c->selected[i]) == 0 ||
                                    (u->families[f].field &&
                                     strcasecmp(u->families[f].field, c->selected[i]) == 0)) {
                                        declared = true;
                                        valued |= u->values[f].has;
                                }
                }
                if (declared && !valued)
                        log_warn("metrics", "--collectors names a field no device gives a value for, so it "
                                 "is left out field=%s reason=\"the driver does not support it on these "
                                 "devices\"",
                                 c->selected[i]);
        }
}

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
        sleeper_lock(&c->sl);
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
        sleeper_unlock(&c->sl);
        samplers_release(old, n_old); /* may free a sampler (a library call): outside the lock */
}

/* dcgm-exporter's --kubernetes-enable-pod-labels: the pod's labels, each
 * name sanitised ("app.kubernetes.io/name" -> "app_kubernetes_io_name");
 * of two that sanitise alike, the first in key order wins.  NULL when the
 * pod is not known. */
static json_t *sanitized_labels(json_t *raw)
{
        if (!raw)
                return NULL;
        size_t n = json_object_size(raw), k = 0;
        _cleanup_free_ const char **keys = xcalloc(n + 1, sizeof(*keys));
        const char *key;
        json_t *v;
        json_object_foreach(raw, key, v)
                keys[k++] = key;
        qsort(keys, k, sizeof(*keys), str_cmp);
        json_t *out = json_object();
        char name[PODLABELS_MAX_KEY + 2];
        for (size_t i = 0; i < k; i++) {
                podlabels_sanitize(keys[i], name, sizeof(name));
                if (!json_object_get(out, name))
                        json_object_set(out, name, json_object_get(raw, keys[i]));
        }
        return out;
}

/* The values of the keys a unit asks of its pod (raw: the pod's labels,
 * NULL when not known yet: every value ""). */
static char **asked_values(const struct dev_unit *u, json_t *raw)
{
        char **out = NULL;
        for (size_t i = 0; u->pod_labels[i] && u->pod_labels[i + 1]; i += 2) {
                const char *v = json_string_value(json_object_get(raw, u->pod_labels[i + 1]));
                out = strv_push(out, v ? v : "");
        }
        return out;
}

/* The pod-label source: metrics' (--kubernetes-enable-pod-labels), or the
 * collector's own, started the first time a unit asks for pod labels with
 * --kubernetes on (a sampler's config may ask at any time, AMD's re-read
 * each collection), and kept until the collector is freed.  NULL: none. */
static struct podlabels *pod_source(struct collector *c, const struct dev_sample *smp)
{
        if (c->o.pod_labels || c->own_pod_labels || !c->node)
                return c->o.pod_labels ? c->o.pod_labels : c->own_pod_labels;
        bool asked = false;
        for (size_t i = 0; i < smp->n_units && !asked; i++)
                asked = smp->units[i].pod_labels && smp->units[i].pod_labels[0];
        if (!asked)
                return NULL;
        log_info("metrics", "starting the pod-label source for the labels a device family asks of pods");
        c->own_pod_labels = podlabels_start(c->kubeconfig, c->node, c->o.kube_api_qps,
                                            c->o.kube_api_burst);
        return c->own_pod_labels;
}

void collector_run_once(struct collector *c)
{
        uint64_t t0 = now_us();
        take_mailbox(c);

        struct dev_sample smp = { .fields = c->selected };
        for (size_t i = 0; i < c->n_samplers; i++)
                if (c->samplers[i]->ops->sample(c->samplers[i], &smp) < 0)
                        log_debug("metrics", "a sampler failed sampler=%s", c->samplers[i]->ops->name);
        for (size_t i = 0; smp.notes && smp.notes[i]; i++)
                log_warn("metrics", "%s", smp.notes[i]);
        attr_specs_scan(c->specs);
        check_selected(c);
        check_valued(c, &smp);

        struct unit_owners *owners = xcalloc(smp.n_units + 1, sizeof(*owners));
        attribute_processes(c, &smp, owners);
        attribute_specs(c, &smp, owners);
        attribute_podres(c, &smp, owners);
        for (size_t i = 0; i < smp.n_units; i++)
                if (owners[i].n > 1)
                        qsort(owners[i].v, owners[i].n, sizeof(*owners[i].v), owner_cmp);
        struct podlabels *pl = pod_source(c, &smp);
        for (size_t i = 0; pl && i < smp.n_units; i++) {
                bool asked = smp.units[i].pod_labels && smp.units[i].pod_labels[0];
                if (owners[i].n != 1 || !(asked || c->o.pod_labels_all))
                        continue;
                struct owner *o = &owners[i].v[0];
                json_t *raw = podlabels_get(pl, o->namespace, o->pod);
                if (c->o.pod_labels_all)
                        o->labels = sanitized_labels(raw);
                if (asked)
                        o->asked = asked_values(&smp.units[i], raw);
                json_decref(raw);
        }

        struct metrics_chunk *chunks;
        size_t n_chunks = render(c, &smp, owners, &chunks);
        metrics_store_publish_chunks(c->store, METRICS_SLOT_GPU, chunks, n_chunks);

        for (size_t i = 0; i < smp.n_units; i++) {
                for (size_t k = 0; k < owners[i].n; k++) {
                        json_decref(owners[i].v[k].labels);
                        strv_free(owners[i].v[k].asked);
                }
                free(owners[i].v);
        }
        free(owners);
        dev_sample_release(&smp);
        /* A collection frees a few times the text it rendered; glibc keeps
         * such memory resident in this thread's arena unless asked.  Asking
         * (madvise, and a TLB shootdown on every CPU) costs more than the
         * collection itself, so at most every TRIM_EVERY_US. */
        if (t0 - c->last_trim_us >= TRIM_EVERY_US) {
                malloc_trim(0);
                c->last_trim_us = t0;
        }
        atomic_store(&c->last_duration_us, now_us() - t0);
        atomic_fetch_add(&c->collections, 1);
}

/* ---- thread and mailbox ---- */

static void *thread_main(void *arg)
{
        struct collector *c = arg;
        while (!sleeper_stopped(&c->sl)) {
                uint64_t start = now_us();
                collector_run_once(c);
                uint64_t took_ms = (now_us() - start) / 1000;
                if (took_ms < c->o.interval_ms)
                        sleeper_pause(&c->sl, (long)(c->o.interval_ms - took_ms));
        }
        return NULL;
}

int collector_start(struct collector *c)
{
        int r = thread_start(&c->thread, "devlet-metrics", NULL, thread_main, c);
        if (r < 0)
                return r;
        c->thread_running = true;
        return 0;
}

void collector_free(struct collector *c)
{
        if (!c)
                return;
        if (c->thread_running) {
                sleeper_stop(&c->sl);
                pthread_join(c->thread, NULL);
        }
        podlabels_stop(c->own_pod_labels); /* after the thread, its reader */
        free(c->kubeconfig);
        free(c->node);
        samplers_release(c->samplers, c->n_samplers);
        samplers_release(c->samplers_pending, c->n_samplers_pending);
        free(c->hints);
        strv_free(c->selected);
        free(c->selected_checked);
        attr_specs_free(c->specs);
        attr_podres_free(c->podres);
        attr_podres_free(c->podres_pending);
        free(c->hostname_label);
        free(c->hostname);
        free(c->proc_root);
        sleeper_destroy(&c->sl);
        free(c);
}

void collector_put_podres(struct collector *c, struct attr_podres *p)
{
        sleeper_lock(&c->sl);
        attr_podres_free(c->podres_pending);
        c->podres_pending = p;
        c->podres_new = true;
        sleeper_unlock(&c->sl);
}

void collector_put_samplers(struct collector *c, struct dev_sampler *const *s, size_t n)
{
        struct dev_sampler **copy = xcalloc(n + 1, sizeof(*copy));
        for (size_t i = 0; i < n; i++)
                copy[i] = dev_sampler_ref(s[i]);
        sleeper_lock(&c->sl);
        struct dev_sampler **old = c->samplers_pending;
        size_t n_old = c->n_samplers_pending;
        c->samplers_pending = copy;
        c->n_samplers_pending = n;
        c->samplers_new = true;
        sleeper_unlock(&c->sl);
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
