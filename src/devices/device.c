/* The device model: allocation answers, resources and their devices, each
 * device's description for DRA (struct dev_model, its value rules and its
 * ResourceSlice JSON), and the generic Allocate / GetPreferredAllocation
 * behaviour every backend gets unless it brings its own (struct
 * dev_resource_ops).
 *
 * Everything here runs on the loop thread and never blocks.  Devices are only
 * ever appended to a resource, never removed (a vanished device stays, marked
 * unhealthy), so indices into r->devices stay valid; pointers do not survive
 * dev_resource_add().  Nothing here logs: callers turn -EINVAL and diag into
 * gRPC errors. */
#include "devices/device.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"

/* ---- dev_alloc ---- */

/* NULL permissions mean "rw"; longer strings are cut to three letters. */
static void copy_perms(char dst[4], const char *perms)
{
        if (!perms)
                perms = "rw";
        size_t n = strnlen(perms, 3);
        memcpy(dst, perms, n);
        dst[n] = '\0';
}

void dev_alloc_add_node(struct dev_alloc *a, const char *host, const char *ctr, const char *perms)
{
        for (size_t i = 0; i < a->n_nodes; i++)
                if (strcmp(a->nodes[i].container_path, ctr) == 0)
                        return;
        xgrow((void **)&a->nodes, &a->cap_nodes, a->n_nodes + 1, sizeof(*a->nodes));
        struct dev_node *n = &a->nodes[a->n_nodes++];
        n->host_path = xstrdup(host);
        n->container_path = xstrdup(ctr);
        copy_perms(n->permissions, perms);
}

void dev_alloc_add_mount(struct dev_alloc *a, const char *host, const char *ctr, bool ro)
{
        for (size_t i = 0; i < a->n_mounts; i++)
                if (strcmp(a->mounts[i].container_path, ctr) == 0)
                        return;
        xgrow((void **)&a->mounts, &a->cap_mounts, a->n_mounts + 1, sizeof(*a->mounts));
        struct dev_mount *m = &a->mounts[a->n_mounts++];
        m->host_path = xstrdup(host);
        m->container_path = xstrdup(ctr);
        m->read_only = ro;
}

static void kv_set(struct dev_kv **v, size_t *n, size_t *cap, const char *key, const char *value)
{
        for (size_t i = 0; i < *n; i++)
                if (strcmp((*v)[i].key, key) == 0) {
                        free((*v)[i].value);
                        (*v)[i].value = xstrdup(value);
                        return;
                }
        xgrow((void **)v, cap, *n + 1, sizeof(**v));
        (*v)[*n].key = xstrdup(key);
        (*v)[*n].value = xstrdup(value);
        (*n)++;
}

void dev_alloc_set_env(struct dev_alloc *a, const char *key, const char *value)
{
        kv_set(&a->envs, &a->n_envs, &a->cap_envs, key, value);
}

void dev_alloc_set_annotation(struct dev_alloc *a, const char *key, const char *value)
{
        kv_set(&a->annotations, &a->n_annotations, &a->cap_annotations, key, value);
}

void dev_alloc_add_cdi(struct dev_alloc *a, const char *name)
{
        if (!strv_contains(a->cdi_devices, name))
                a->cdi_devices = strv_push(a->cdi_devices, name);
}

static void kv_free(struct dev_kv *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].key);
                free(v[i].value);
        }
        free(v);
}

static void nodes_free(struct dev_node *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].host_path);
                free(v[i].container_path);
        }
        free(v);
}

static void mounts_free(struct dev_mount *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].host_path);
                free(v[i].container_path);
        }
        free(v);
}

void dev_alloc_release(struct dev_alloc *a)
{
        kv_free(a->envs, a->n_envs);
        mounts_free(a->mounts, a->n_mounts);
        nodes_free(a->nodes, a->n_nodes);
        kv_free(a->annotations, a->n_annotations);
        strv_free(a->cdi_devices);
        memset(a, 0, sizeof(*a));
}

/* ---- the device model ---- */

struct dev_model *dev_model_new(const char *name)
{
        struct dev_model *m = xcalloc(1, sizeof(*m));
        m->name = xstrdup(name);
        return m;
}

void dev_model_free(struct dev_model *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_attrs; i++) {
                free(m->attrs[i].name);
                free(m->attrs[i].s);
        }
        for (size_t i = 0; i < m->n_capacity; i++) {
                free(m->capacity[i].name);
                free(m->capacity[i].value);
        }
        free(m->attrs);
        free(m->capacity);
        free(m->name);
        free(m);
}

struct dev_model *dev_model_copy(const struct dev_model *m)
{
        if (!m)
                return NULL;
        struct dev_model *c = dev_model_new(m->name);
        for (size_t i = 0; i < m->n_attrs; i++) {
                const struct dev_attr *a = &m->attrs[i];
                switch (a->type) {
                case DEV_ATTR_STRING: dev_model_string(c, a->name, a->s); break;
                case DEV_ATTR_VERSION: dev_model_version(c, a->name, a->s); break;
                case DEV_ATTR_INT: dev_model_int(c, a->name, a->i); break;
                case DEV_ATTR_BOOL: dev_model_bool(c, a->name, a->b); break;
                }
        }
        for (size_t i = 0; i < m->n_capacity; i++)
                dev_model_capacity(c, m->capacity[i].name, m->capacity[i].value);
        return c;
}

/* The attribute named name, made (unset) when it is not there yet. */
static struct dev_attr *model_slot(struct dev_model *m, const char *name)
{
        for (size_t i = 0; i < m->n_attrs; i++)
                if (strcmp(m->attrs[i].name, name) == 0) {
                        free(m->attrs[i].s);
                        m->attrs[i].s = NULL;
                        return &m->attrs[i];
                }
        xgrow((void **)&m->attrs, &m->cap_attrs, m->n_attrs + 1, sizeof(*m->attrs));
        struct dev_attr *a = &m->attrs[m->n_attrs++];
        memset(a, 0, sizeof(*a));
        a->name = xstrdup(name);
        return a;
}

static bool value_fits(const char *value)
{
        return value && *value && strnlen(value, DEV_MODEL_VALUE_MAX + 1) <= DEV_MODEL_VALUE_MAX;
}

void dev_model_string(struct dev_model *m, const char *name, const char *value)
{
        if (!value_fits(value))
                return;
        struct dev_attr *a = model_slot(m, name);
        a->type = DEV_ATTR_STRING;
        a->s = xstrdup(value);
}

void dev_model_version(struct dev_model *m, const char *name, const char *semver)
{
        if (!value_fits(semver))
                return;
        struct dev_attr *a = model_slot(m, name);
        a->type = DEV_ATTR_VERSION;
        a->s = xstrdup(semver);
}

void dev_model_version_loose(struct dev_model *m, const char *name, const char *text)
{
        if (!text)
                return;
        const char *p = text + (*text == 'v');
        uint64_t part[3] = { 0 };
        for (int i = 0; i < 3; i++) {
                size_t digits = strspn(p, "0123456789");
                if (digits == 0)
                        return; /* "", "x", "12." */
                while (digits > 1 && *p == '0') {
                        p++;
                        digits--;
                }
                if (digits > 19)
                        return;
                for (size_t k = 0; k < digits; k++)
                        part[i] = part[i] * 10 + (uint64_t)(p[k] - '0');
                p += digits;
                if (*p != '.' || p[1] < '0' || p[1] > '9')
                        break;
                p++;
        }
        char buf[3 * 21];
        snprintf(buf, sizeof(buf), "%" PRIu64 ".%" PRIu64 ".%" PRIu64, part[0], part[1], part[2]);
        dev_model_version(m, name, buf);
}

void dev_model_int(struct dev_model *m, const char *name, int64_t value)
{
        struct dev_attr *a = model_slot(m, name);
        a->type = DEV_ATTR_INT;
        a->i = value;
}

void dev_model_bool(struct dev_model *m, const char *name, bool value)
{
        struct dev_attr *a = model_slot(m, name);
        a->type = DEV_ATTR_BOOL;
        a->b = value;
}

void dev_model_capacity(struct dev_model *m, const char *name, const char *quantity)
{
        if (!quantity || !*quantity)
                return;
        for (size_t i = 0; i < m->n_capacity; i++)
                if (strcmp(m->capacity[i].name, name) == 0) {
                        free(m->capacity[i].value);
                        m->capacity[i].value = xstrdup(quantity);
                        return;
                }
        xgrow((void **)&m->capacity, &m->cap_capacity, m->n_capacity + 1, sizeof(*m->capacity));
        m->capacity[m->n_capacity++] = (struct dev_quantity){ xstrdup(name), xstrdup(quantity) };
}

void dev_model_capacity_int(struct dev_model *m, const char *name, uint64_t value)
{
        static const char *const suffix[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei" };
        size_t e = 0;
        if (value >= 1024)
                while (e + 1 < ARRAY_SIZE(suffix) && value % 1024 == 0) {
                        value /= 1024;
                        e++;
                }
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64 "%s", value, suffix[e]);
        dev_model_capacity(m, name, buf);
}

const struct dev_attr *dev_model_attr(const struct dev_model *m, const char *name)
{
        for (size_t i = 0; m && i < m->n_attrs; i++)
                if (strcmp(m->attrs[i].name, name) == 0)
                        return &m->attrs[i];
        return NULL;
}

static bool attr_equal(const struct dev_attr *a, const struct dev_attr *b)
{
        if (!b || a->type != b->type)
                return false;
        switch (a->type) {
        case DEV_ATTR_STRING:
        case DEV_ATTR_VERSION: return strcmp(a->s, b->s) == 0;
        case DEV_ATTR_INT: return a->i == b->i;
        case DEV_ATTR_BOOL: return a->b == b->b;
        }
        return false;
}

static const char *capacity_of(const struct dev_model *m, const char *name)
{
        for (size_t i = 0; i < m->n_capacity; i++)
                if (strcmp(m->capacity[i].name, name) == 0)
                        return m->capacity[i].value;
        return NULL;
}

bool dev_model_equal(const struct dev_model *a, const struct dev_model *b)
{
        if (!a || !b)
                return a == b;
        if (strcmp(a->name, b->name) != 0 || a->n_attrs != b->n_attrs ||
            a->n_capacity != b->n_capacity)
                return false;
        for (size_t i = 0; i < a->n_attrs; i++)
                if (!attr_equal(&a->attrs[i], dev_model_attr(b, a->attrs[i].name)))
                        return false;
        for (size_t i = 0; i < a->n_capacity; i++) {
                const char *v = capacity_of(b, a->capacity[i].name);
                if (!v || strcmp(v, a->capacity[i].value) != 0)
                        return false;
        }
        return true;
}

char *dev_model_label(const char *s)
{
        char out[64];
        size_t n = 0;
        bool dash = false;
        for (; s && *s && n < 63; s++) {
                char c = *s;
                if (c >= 'A' && c <= 'Z')
                        c = (char)(c - 'A' + 'a');
                if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
                        if (dash && n > 0 && n < 62)
                                out[n++] = '-';
                        dash = false;
                        out[n++] = c;
                } else {
                        dash = true;
                }
        }
        out[n] = '\0';
        return xstrdup(n ? out : "dev");
}

json_t *dev_model_json(const struct dev_model *m)
{
        json_t *attrs = json_object(), *cap = json_object();
        for (size_t i = 0; i < m->n_attrs; i++) {
                const struct dev_attr *a = &m->attrs[i];
                json_t *v = NULL;
                switch (a->type) {
                case DEV_ATTR_STRING: v = json_pack("{s:s}", "string", a->s); break;
                case DEV_ATTR_VERSION: v = json_pack("{s:s}", "version", a->s); break;
                case DEV_ATTR_INT: v = json_pack("{s:I}", "int", (json_int_t)a->i); break;
                case DEV_ATTR_BOOL: v = json_pack("{s:b}", "bool", a->b); break;
                }
                json_object_set_new(attrs, a->name, v);
        }
        for (size_t i = 0; i < m->n_capacity; i++)
                json_object_set_new(cap, m->capacity[i].name,
                                    json_pack("{s:s}", "value", m->capacity[i].value));
        return json_pack("{s:s, s:o, s:o}", "name", m->name, "attributes", attrs, "capacity", cap);
}

/* ---- resources ---- */

struct dev_resource *dev_resource_new(const char *name)
{
        struct dev_resource *r = xcalloc(1, sizeof(*r));
        r->name = xstrdup(name);
        return r;
}

/* Frees the devices and the resource; priv and backend_data are the
 * backend's to free first. */
void dev_resource_free(struct dev_resource *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n_devices; i++) {
                struct dev_device *d = &r->devices[i];
                free(d->id);
                nodes_free(d->nodes, d->n_nodes);
                mounts_free(d->mounts, d->n_mounts);
                dev_model_free(d->model);
        }
        free(r->devices);
        free(r->watches);
        free(r->name);
        free(r);
}

struct dev_device *dev_resource_add(struct dev_resource *r, const char *id)
{
        xgrow((void **)&r->devices, &r->cap_devices, r->n_devices + 1, sizeof(*r->devices));
        struct dev_device *d = &r->devices[r->n_devices++];
        memset(d, 0, sizeof(*d));
        d->id = xstrdup(id);
        d->health = DEV_HEALTHY;
        d->numa_node = -1;
        return d;
}

struct dev_device *dev_resource_find(struct dev_resource *r, const char *id)
{
        for (size_t i = 0; i < r->n_devices; i++)
                if (strcmp(r->devices[i].id, id) == 0)
                        return &r->devices[i];
        return NULL;
}

void dev_device_add_node(struct dev_device *d, const char *host, const char *ctr, const char *perms)
{
        d->nodes = xrealloc(d->nodes, (d->n_nodes + 1) * sizeof(*d->nodes));
        struct dev_node *n = &d->nodes[d->n_nodes++];
        n->host_path = xstrdup(host);
        n->container_path = xstrdup(ctr);
        copy_perms(n->permissions, perms);
}

void dev_device_add_mount(struct dev_device *d, const char *host, const char *ctr, bool ro)
{
        d->mounts = xrealloc(d->mounts, (d->n_mounts + 1) * sizeof(*d->mounts));
        struct dev_mount *m = &d->mounts[d->n_mounts++];
        m->host_path = xstrdup(host);
        m->container_path = xstrdup(ctr);
        m->read_only = ro;
}

void dev_resource_watch(struct dev_resource *r, void (*fn)(struct dev_resource *r, void *ud),
                        void *ud)
{
        r->watches = xrealloc(r->watches, (r->n_watches + 1) * sizeof(*r->watches));
        r->watches[r->n_watches++] = (struct dev_watch){ fn, ud };
}

void dev_resource_unwatch(struct dev_resource *r, void (*fn)(struct dev_resource *r, void *ud),
                          void *ud)
{
        for (size_t i = 0; i < r->n_watches; i++)
                if (r->watches[i].fn == fn && r->watches[i].ud == ud) {
                        memmove(&r->watches[i], &r->watches[i + 1],
                                (r->n_watches - i - 1) * sizeof(*r->watches));
                        r->n_watches--;
                        return;
                }
}

void dev_resource_notify(struct dev_resource *r)
{
        if (r->on_change)
                r->on_change(r, r->on_change_ud);
        for (size_t i = 0; i < r->n_watches; i++)
                r->watches[i].fn(r, r->watches[i].ud);
}

size_t dev_resource_healthy(const struct dev_resource *r)
{
        size_t n = 0;
        for (size_t i = 0; i < r->n_devices; i++)
                if (r->devices[i].health == DEV_HEALTHY)
                        n++;
        return n;
}

/* ---- Allocate ---- */

/* Every ID is checked before anything is merged, so out is untouched when the
 * request is refused. */
static int allocate_generic(struct dev_resource *r, char *const *ids, size_t n,
                            struct dev_alloc *out, struct diag *diag)
{
        _cleanup_free_ const struct dev_device **ds = xcalloc(n, sizeof(*ds));
        for (size_t i = 0; i < n; i++) {
                ds[i] = dev_resource_find(r, ids[i]);
                if (!ds[i])
                        return diag_set(diag, -EINVAL, "unknown device ID \"%s\"", ids[i]);
                if (ds[i]->health != DEV_HEALTHY)
                        return diag_set(diag, -EINVAL, "device \"%s\" is unhealthy", ids[i]);
        }
        for (size_t i = 0; i < n; i++) {
                const struct dev_device *d = ds[i];
                for (size_t j = 0; j < d->n_nodes; j++)
                        dev_alloc_add_node(out, d->nodes[j].host_path, d->nodes[j].container_path,
                                           d->nodes[j].permissions);
                for (size_t j = 0; j < d->n_mounts; j++)
                        dev_alloc_add_mount(out, d->mounts[j].host_path,
                                            d->mounts[j].container_path, d->mounts[j].read_only);
        }
        return 0;
}

int dev_allocate(struct dev_resource *r, char *const *ids, size_t n, struct dev_alloc *out,
                 struct diag *diag)
{
        if (r->ops && r->ops->allocate)
                return r->ops->allocate(r, ids, n, out, diag);
        return allocate_generic(r, ids, n, out, diag);
}

/* ---- GetPreferredAllocation ---- */

int dev_preferred(struct dev_resource *r, char *const *available, size_t n_available,
                  char *const *must, size_t n_must, size_t size, char ***out)
{
        if (r->ops && r->ops->preferred)
                return r->ops->preferred(r, available, n_available, must, n_must, size, out);
        return dev_preferred_generic(r, available, n_available, must, n_must, size, out);
}

struct pick {
        char **ids; /* strv being built */
        size_t n;
        const int *numa; /* NUMA nodes to prefer; n_numa == 0: none */
        size_t n_numa;
};

static bool numa_wanted(const struct pick *p, int node)
{
        for (size_t i = 0; i < p->n_numa; i++)
                if (p->numa[i] == node)
                        return true;
        return false;
}

/* A healthy device of r that is not chosen yet. */
static const struct dev_device *eligible(struct dev_resource *r, const struct pick *p,
                                         const char *id)
{
        const struct dev_device *d = dev_resource_find(r, id);
        if (!d || d->health != DEV_HEALTHY || strv_contains(p->ids, id))
                return NULL;
        return d;
}

static void pick_add(struct pick *p, const char *id)
{
        p->ids = strv_push(p->ids, id);
        p->n++;
}

/* With no must IDs to anchor on, prefer one NUMA node: the first (in the
 * order of available) whose eligible devices alone satisfy size, or else the
 * one with the most eligible devices.  Returns -1 when no eligible device has
 * a known node. */
static int numa_anchor(struct dev_resource *r, char *const *available, size_t n_available,
                       size_t size)
{
        _cleanup_free_ int *nodes = xcalloc(n_available, sizeof(int));
        _cleanup_free_ size_t *counts = xcalloc(n_available, sizeof(size_t));
        size_t n_nodes = 0;
        struct pick none = { 0 };
        for (size_t i = 0; i < n_available; i++) {
                /* duplicates in available would count twice: only the first */
                bool dup = false;
                for (size_t j = 0; j < i && !dup; j++)
                        dup = strcmp(available[j], available[i]) == 0;
                const struct dev_device *d = dup ? NULL : eligible(r, &none, available[i]);
                if (!d || d->numa_node < 0)
                        continue;
                size_t k = 0;
                while (k < n_nodes && nodes[k] != d->numa_node)
                        k++;
                if (k == n_nodes)
                        nodes[n_nodes++] = d->numa_node;
                counts[k]++;
        }
        size_t best = 0;
        for (size_t k = 0; k < n_nodes; k++) {
                if (counts[k] >= size)
                        return nodes[k];
                if (counts[k] > counts[best])
                        best = k;
        }
        return n_nodes ? nodes[best] : -1;
}

/* The choice, in order:
 *   1. every must ID (each must be a device of r, else -EINVAL; health is
 *      not checked: the kubelet insists on them);
 *   2. healthy available IDs on the NUMA nodes of the must IDs (with no must
 *      IDs: on the node numa_anchor() picks);
 *   3. the remaining healthy available IDs, in the order given.
 * Unknown and unhealthy available IDs are skipped, nothing is chosen twice,
 * and the answer holds exactly min(size, what is possible) IDs, except that
 * when size < n_must it holds the must IDs and nothing else: dropping one
 * would break the kubelet's own constraint, and the kubelet rejects the
 * mismatch itself. */
int dev_preferred_generic(struct dev_resource *r, char *const *available, size_t n_available,
                          char *const *must, size_t n_must, size_t size, char ***out)
{
        _cleanup_free_ int *numa = xcalloc(n_must + 1, sizeof(int));
        struct pick p = { .ids = xcalloc(1, sizeof(char *)), .numa = numa };

        for (size_t i = 0; i < n_must; i++) {
                const struct dev_device *d = dev_resource_find(r, must[i]);
                if (!d) {
                        strv_free(p.ids);
                        return -EINVAL;
                }
                if (strv_contains(p.ids, must[i]))
                        continue;
                pick_add(&p, must[i]);
                if (d->numa_node >= 0 && !numa_wanted(&p, d->numa_node))
                        numa[p.n_numa++] = d->numa_node;
        }
        if (n_must == 0 && size > 1) {
                int anchor = numa_anchor(r, available, n_available, size);
                if (anchor >= 0)
                        numa[p.n_numa++] = anchor;
        }

        for (size_t i = 0; i < n_available && p.n < size && p.n_numa > 0; i++) {
                const struct dev_device *d = eligible(r, &p, available[i]);
                if (d && numa_wanted(&p, d->numa_node))
                        pick_add(&p, available[i]);
        }
        for (size_t i = 0; i < n_available && p.n < size; i++)
                if (eligible(r, &p, available[i]))
                        pick_add(&p, available[i]);

        *out = p.ids;
        return 0;
}

/* ---- node labels ---- */

void dev_labels_put(struct dev_labels *s, const char *key, const char *value)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->v[i].key, key) == 0) {
                        free(s->v[i].value);
                        s->v[i].value = xstrdup(value);
                        return;
                }
        xgrow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v));
        s->v[s->n].key = xstrdup(key);
        s->v[s->n].value = xstrdup(value);
        s->n++;
}

void dev_labels_putf(struct dev_labels *s, const char *key, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *value = xvasprintf(fmt, ap);
        va_end(ap);
        dev_labels_put(s, key, value);
}

const char *dev_labels_get(const struct dev_labels *s, const char *key)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->v[i].key, key) == 0)
                        return s->v[i].value;
        return NULL;
}

void dev_labels_release(struct dev_labels *s)
{
        for (size_t i = 0; i < s->n; i++) {
                free(s->v[i].key);
                free(s->v[i].value);
        }
        free(s->v);
        memset(s, 0, sizeof(*s));
}

/* ---- reports ---- */

static dev_report_fn *report_fn;
static void *report_ud;

void dev_report_sink(dev_report_fn *fn, void *ud)
{
        report_fn = fn;
        report_ud = ud;
}

void dev_report(enum dev_report_level level, const char *backend, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        if (report_fn)
                report_fn(level, backend, msg, report_ud);
        else
                log_debug(backend, "%s", msg);
}

/* ---- rebuild requests ---- */

static dev_rebuild_fn *rebuild_fn;
static void *rebuild_ud;

void dev_rebuild_handler(dev_rebuild_fn *fn, void *ud)
{
        rebuild_fn = fn;
        rebuild_ud = ud;
}

void dev_request_rebuild(const char *backend, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *why = xvasprintf(fmt, ap);
        va_end(ap);
        if (rebuild_fn)
                rebuild_fn(backend, why, rebuild_ud);
        else
                log_debug(backend, "devices changed, nothing to rebuild them: %s", why);
}

void dev_sidecar_daemon_release(struct dev_sidecar_daemon *d)
{
        free(d->root);
        free(d->resource);
        free(d->visible_devices);
        strv_free(d->setup);
        free(d->pipe_dir);
        free(d->log_dir);
        free(d->marker);
        free(d->shm_dir);
        strv_free(d->program_roots);
}

void dev_sidecar_daemons_free(struct dev_sidecar_daemon *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dev_sidecar_daemon_release(&v[i]);
        free(v);
}

void dev_sidecar_claims_free(struct dev_sidecar_claims *c)
{
        if (!c)
                return;
        free(c->root);
        free(c->dir);
        free(c->daemon_prefix);
        free(c->marker_name);
        free(c->shm_dir);
        strv_free(c->program_roots);
        free(c);
}
