/* The device table: one driver's devices as DRA offers them, taken from
 * the resources on the loop thread and then only read, by reference, by
 * the publisher and claims threads (so they never touch a resource).
 * Also the ResourceSlices a table calls for.  Never blocks, never logs
 * above debug. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "dra/internal.h"

DEFINE_CLEANUP_FUNC(struct dev_model, dev_model_free)

/* A model for a device whose family gives none: "<resource's short
 * name>-<index>", with the resource and the ID. */
static struct dev_model *model_fallback(const struct dev_resource *r, size_t i)
{
        const char *slash = strrchr(r->name, '/');
        _cleanup_free_ char *raw = xasprintf("%s-%zu", slash ? slash + 1 : r->name, i);
        _cleanup_free_ char *name = dev_model_label(raw);
        struct dev_model *m = dev_model_new(name);
        dev_model_string(m, "resource", r->name);
        dev_model_string(m, "id", r->devices[i].id);
        return m;
}

static void dev_release(struct dra_dev *d)
{
        free(d->name);
        free(d->resource);
        free(d->id);
        json_decref(d->slice_device);
        dev_alloc_release(&d->alloc);
}

struct dra_table *dra_table_build(const char *driver, struct dev_resource *const *res, size_t n)
{
        struct dra_table *t = xcalloc(1, sizeof(*t));
        atomic_init(&t->refs, 1);
        t->driver = xstrdup(driver);
        size_t cap = 0;
        for (size_t k = 0; k < n; k++) {
                struct dev_resource *r = res[k];
                for (size_t i = 0; i < r->n_devices; i++) {
                        struct dev_device *d = &r->devices[i];
                        _cleanup_(dev_model_freep) struct dev_model *own =
                                d->model ? NULL : model_fallback(r, i);
                        const struct dev_model *m = d->model ? d->model : own;
                        if (dra_table_find(t, m->name))
                                continue; /* a replica of a unit already in */
                        xgrow((void **)&t->devs, &cap, t->n + 1, sizeof(*t->devs));
                        struct dra_dev *x = &t->devs[t->n];
                        memset(x, 0, sizeof(*x));
                        char *ids[] = { d->id };
                        if (d->health == DEV_HEALTHY &&
                            dev_allocate(r, ids, 1, &x->alloc, NULL) < 0) {
                                dev_alloc_release(&x->alloc);
                                continue;
                        }
                        /* the device's own nodes whatever the device-list
                         * strategy: a claim's CDI spec always carries them */
                        for (size_t j = 0; j < d->n_nodes; j++)
                                dev_alloc_add_node(&x->alloc, d->nodes[j].host_path,
                                                   d->nodes[j].container_path,
                                                   d->nodes[j].permissions);
                        for (size_t j = 0; j < d->n_mounts; j++)
                                dev_alloc_add_mount(&x->alloc, d->mounts[j].host_path,
                                                    d->mounts[j].container_path,
                                                    d->mounts[j].read_only);
                        x->name = xstrdup(m->name);
                        x->resource = xstrdup(r->name);
                        x->id = xstrdup(d->id);
                        x->healthy = d->health == DEV_HEALTHY;
                        if (!x->healthy)
                                x->taint = d->taint;
                        x->slice_device = dev_model_json(m);
                        t->n++;
                }
                const struct dev_claim_config_ops *cc = r->ops ? r->ops->claim_config : NULL;
                if (cc) {
                        t->configs = xrealloc(t->configs, (t->n_configs + 1) * sizeof(*t->configs));
                        t->configs[t->n_configs++] = (struct dra_res_config){
                                xstrdup(r->name), cc, cc->ctx_new(r)
                        };
                }
        }
        return t;
}

struct dra_table *dra_table_ref(struct dra_table *t)
{
        if (t)
                atomic_fetch_add(&t->refs, 1);
        return t;
}

void dra_table_unref(struct dra_table *t)
{
        if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
                return;
        for (size_t i = 0; i < t->n; i++)
                dev_release(&t->devs[i]);
        free(t->devs);
        for (size_t i = 0; i < t->n_configs; i++) {
                t->configs[i].ops->ctx_free(t->configs[i].ctx);
                free(t->configs[i].resource);
        }
        free(t->configs);
        free(t->driver);
        free(t);
}

const struct dra_res_config *dra_table_config(const struct dra_table *t, const char *resource)
{
        for (size_t i = 0; i < t->n_configs; i++)
                if (strcmp(t->configs[i].resource, resource) == 0)
                        return &t->configs[i];
        return NULL;
}

const struct dra_dev *dra_table_find(const struct dra_table *t, const char *name)
{
        for (size_t i = 0; t && i < t->n; i++)
                if (strcmp(t->devs[i].name, name) == 0)
                        return &t->devs[i];
        return NULL;
}

/* FNV-1a, 64 bits */
static uint64_t hash_text(uint64_t h, const char *s)
{
        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 0x100000001b3ull;
        }
        return h;
}

/* A copy of d's slice device with its taint. */
static json_t *tainted(const struct dra_table *t, const struct dra_dev *d)
{
        json_t *dev = json_copy(d->slice_device);
        json_t *taint = json_object();
        if (d->taint.key[0])
                json_object_set_new(taint, "key", json_string(d->taint.key));
        else
                json_object_set_new(taint, "key", json_sprintf("%s/unhealthy", t->driver));
        if (d->taint.value[0])
                json_object_set_new(taint, "value", json_string(d->taint.value));
        json_object_set_new(taint, "effect",
                            json_string(d->taint.no_execute ? "NoExecute" : DRA_TAINT_EFFECT));
        if (d->taint.since > 0) {
                time_t since = (time_t)d->taint.since;
                struct tm tm;
                char when[32];
                if (gmtime_r(&since, &tm) && strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
                        json_object_set_new(taint, "timeAdded", json_string(when));
        }
        json_object_set_new(dev, "taints", json_pack("[o]", taint));
        return dev;
}

json_t *dra_slices_desired(const struct dra_table *t, const char *node, const char *prefix,
                           bool taints, char hash[17])
{
        json_t *devices = json_array();
        for (size_t i = 0; i < t->n; i++) {
                if (t->devs[i].healthy)
                        json_array_append(devices, t->devs[i].slice_device);
                else if (taints)
                        json_array_append_new(devices, tainted(t, &t->devs[i]));
        }
        size_t n = json_array_size(devices);
        size_t count = n ? (n + DRA_SLICE_DEVICES_MAX - 1) / DRA_SLICE_DEVICES_MAX : 1;

        _cleanup_free_ char *text = json_dumps(devices, JSON_COMPACT | JSON_SORT_KEYS);
        uint64_t h = hash_text(hash_text(hash_text(0xcbf29ce484222325ull, t->driver), node),
                               text ? text : "");
        snprintf(hash, 17, "%016" PRIx64, h);

        json_t *slices = json_array();
        for (size_t k = 0; k < count; k++) {
                json_t *part = json_array();
                for (size_t i = k * DRA_SLICE_DEVICES_MAX;
                     i < n && i < (k + 1) * DRA_SLICE_DEVICES_MAX; i++)
                        json_array_append(part, json_array_get(devices, i));
                _cleanup_free_ char *name = xasprintf("%s-%zu", prefix, k);
                /* each slice's own hash: a change rewrites only its slice */
                _cleanup_free_ char *ptext = json_dumps(part, JSON_COMPACT | JSON_SORT_KEYS);
                char shash[17];
                snprintf(shash, sizeof(shash), "%016" PRIx64,
                         hash_text(hash_text(h, name), ptext ? ptext : ""));
                json_t *s = json_pack(
                        "{s:s, s:s, s:{s:s, s:{s:s, s:s}, s:{s:s}}, s:{s:s, s:s, s:{s:s, s:I, s:I}, s:o}}",
                        "apiVersion", "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata",
                        "name", name, "labels", "app.kubernetes.io/managed-by", "devlet",
                        "devlet.io/driver", t->driver, "annotations", "devlet.io/content-hash",
                        shash, "spec", "driver", t->driver, "nodeName", node, "pool", "name", node,
                        "generation", (json_int_t)0, "resourceSliceCount", (json_int_t)count,
                        "devices", part);
                json_array_append_new(slices, s);
        }
        json_decref(devices);
        return slices;
}
