/* From the AMD inventory to dev_resources, as AMD's device plugin names
 * them, plus devlet's sharing.
 *
 *   1. Naming (--resource-naming-strategy).  A GPU's partition style is
 *      "<compute>_<memory>" (cpx_nps4) when both current_* files exist.
 *      The node is homogeneous when at most one style is present (GPUs
 *      without partitioning do not count).  single: every unit is
 *      amd.com/gpu, and a heterogeneous node is refused with AMD's error.
 *      mixed: a unit is amd.com/<style>, or amd.com/gpu for a GPU without
 *      partitioning.
 *   2. IDs: the PCI address for a GPU's own nodes, amdgpu_xcp_<N> for its
 *      other partitions (AMD's IDs, so pod-resources consumers see the same).
 *   3. Sharing (sharing.timeSlicing, names "amd.com/<name>"): the units of
 *      a resource that devices/sharing.c selects (all, the first N, or
 *      those listed by index into the resource's units in this order or by
 *      device ID: PCI address, partition ID) are advertised replicas times
 *      as "<id>::<n>", under the rename when there is one.
 * Every device carries /dev/kfd and its DRM card and render nodes (rw), its
 * GPU's NUMA node and its unit's DRA model (model.c; replicas carry
 * copies); devices of a GPU with a problem start unhealthy. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

struct unit {
        size_t gpu, part, unit;
        char *resource; /* before sharing */
};

struct builder {
        const struct amd_inventory *inv;
        const struct devlet_config *cfg;
        const struct amd_ctx *ctx;
        struct amd_layout *out;
        struct unit *units;
        size_t n_units;
};

static struct dev_resource *resource_get(struct builder *b, const char *name, bool replicas,
                                         bool partitions)
{
        for (size_t i = 0; i < b->out->n_res; i++)
                if (strcmp(b->out->res[i]->name, name) == 0) {
                        struct amd_res *ar = b->out->res[i]->backend_data;
                        ar->has_replicas |= replicas;
                        ar->partitions |= partitions;
                        return b->out->res[i];
                }
        struct dev_resource *r = dev_resource_new(name);
        struct amd_res *ar = xcalloc(1, sizeof(*ar));
        ar->ctx = b->ctx;
        ar->has_replicas = replicas;
        ar->partitions = partitions;
        r->backend_data = ar;
        r->ops = &amd_resource_ops;
        r->preferred_allocation = true;
        b->out->res = xrealloc(b->out->res, (b->out->n_res + 1) * sizeof(*b->out->res));
        b->out->res[b->out->n_res++] = r;
        return r;
}

static void device_add(struct builder *b, struct dev_resource *r, const struct unit *u, int replica)
{
        const struct amd_gpu *g = &b->inv->gpus[u->gpu];
        const struct amd_part *p = &g->parts[u->part];
        _cleanup_free_ char *id = replica < 0 ? xstrdup(p->id) : xasprintf("%s::%d", p->id, replica);
        struct dev_device *d = dev_resource_add(r, id);
        d->numa_node = g->numa_node;
        d->health = g->problem ? DEV_UNHEALTHY : DEV_HEALTHY;
        d->model = amd_model(b->inv, u->gpu, u->part); /* replicas: one unit, one name */
        struct amd_dev *ad = xcalloc(1, sizeof(*ad));
        *ad = (struct amd_dev){ .gpu = u->gpu, .part = u->part, .unit = u->unit, .replica = replica };
        d->priv = ad;
        const char *root = b->ctx->dev_root;
        _cleanup_free_ char *kfd = xasprintf("%s/dev/kfd", root);
        dev_device_add_node(d, kfd, "/dev/kfd", "rw");
        if (p->card >= 0) {
                _cleanup_free_ char *ctr = xasprintf("/dev/dri/card%d", p->card);
                _cleanup_free_ char *host = xasprintf("%s%s", root, ctr);
                dev_device_add_node(d, host, ctr, "rw");
        }
        if (p->render >= 0) {
                _cleanup_free_ char *ctr = xasprintf("/dev/dri/renderD%d", p->render);
                _cleanup_free_ char *host = xasprintf("%s%s", root, ctr);
                dev_device_add_node(d, host, ctr, "rw");
        }
}

size_t amd_served_gpus(const struct amd_inventory *inv, const struct devlet_config *cfg)
{
        long limit = amd_options_get(cfg)->device_count;
        return limit > 0 && (size_t)limit < inv->n_gpus ? (size_t)limit : inv->n_gpus;
}

static int units_build(struct builder *b, struct diag *diag)
{
        const struct amd_inventory *inv = b->inv;
        bool mixed = strcmp(amd_options_get(b->cfg)->resource_naming_strategy, "mixed") == 0;
        char first[16] = "", t[16];
        bool heterogeneous = false;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                amd_gpu_partition_type(&inv->gpus[i], t, sizeof(t));
                if (!t[0])
                        continue;
                if (!first[0])
                        snprintf(first, sizeof(first), "%s", t);
                else if (strcmp(first, t) != 0)
                        heterogeneous = true;
        }
        if (heterogeneous && !mixed)
                return diag_set(diag, -EINVAL, "%s", AMD_MIXED_UNDER_SINGLE);
        b->units = xcalloc(amd_inventory_units(inv) + 1, sizeof(*b->units));
        for (size_t i = 0; i < amd_served_gpus(inv, b->cfg); i++) {
                const struct amd_gpu *g = &inv->gpus[i];
                amd_gpu_partition_type(g, t, sizeof(t));
                for (size_t k = 0; k < g->n_parts; k++) {
                        struct unit *u = &b->units[b->n_units];
                        *u = (struct unit){ .gpu = i, .part = k, .unit = b->n_units };
                        u->resource = mixed && t[0] ? xasprintf(AMD_DOMAIN "/%s", t)
                                                    : xstrdup(AMD_GPU_RESOURCE);
                        b->n_units++;
                }
        }
        return 0;
}

/* ---- sharing: which units a selector names (devices/sharing.c selects) ---- */

static const char *share_resource(size_t k, const void *ud)
{
        const struct builder *b = ud;
        return b->units[k].resource;
}

/* ref is canonical (amd/options.c): an index into the resource's units
 * in this order, or a device ID (PCI address, partition ID). */
static bool share_names(const char *ref, size_t k, size_t nth, const void *ud)
{
        const struct builder *b = ud;
        const struct unit *u = &b->units[k];
        char idx[24];
        snprintf(idx, sizeof(idx), "%zu", nth);
        return strcmp(ref, idx) == 0 || strcmp(ref, b->inv->gpus[u->gpu].parts[u->part].id) == 0;
}

static const char *share_ref_kind(const char *ref)
{
        return strspn(ref, "0123456789") == strlen(ref) ? "at index" : "with ID";
}

int amd_layout_build(const struct amd_inventory *inv, const struct devlet_config *cfg,
                     const struct amd_ctx *ctx, struct amd_layout *out, struct diag *diag)
{
        struct amd_layout l = { 0 };
        struct builder b = { .inv = inv, .cfg = cfg, .ctx = ctx, .out = &l };
        int r = units_build(&b, diag);
        _cleanup_free_ const struct sharing_resource_cfg **share =
                xcalloc(b.n_units + 1, sizeof(*share));
        const struct dev_share_units units = { .n = b.n_units,
                                               .resource = share_resource,
                                               .names = share_names,
                                               .ref_kind = share_ref_kind,
                                               .ud = &b };
        /* AMD GPUs are shared by time-slicing only: MPS is NVIDIA's */
        if (r == 0 && cfg->sharing.strategy == SHARING_TIME_SLICING)
                r = dev_share_assign(&cfg->sharing, &units, share, diag);
        for (size_t k = 0; r == 0 && k < b.n_units; k++) {
                const struct unit *u = &b.units[k];
                bool parts = inv->gpus[u->gpu].n_parts > 1;
                const struct sharing_resource_cfg *s = share[k];
                if (!s) {
                        device_add(&b, resource_get(&b, u->resource, false, parts), u, -1);
                        continue;
                }
                struct dev_resource *res = resource_get(&b, config_sharing_served_name(s), true, parts);
                for (unsigned n = 0; n < s->replicas; n++)
                        device_add(&b, res, u, (int)n);
        }
        for (size_t k = 0; k < b.n_units; k++)
                free(b.units[k].resource);
        free(b.units);
        if (r < 0) {
                amd_layout_release(&l);
                return r;
        }
        *out = l;
        return 0;
}

void amd_layout_release(struct amd_layout *l)
{
        for (size_t i = 0; i < l->n_res; i++) {
                struct dev_resource *r = l->res[i];
                for (size_t k = 0; k < r->n_devices; k++)
                        free(r->devices[k].priv);
                free(r->backend_data);
                dev_resource_free(r);
        }
        free(l->res);
        memset(l, 0, sizeof(*l));
}

struct alloc_topology *amd_topology_build(const struct amd_inventory *inv)
{
        size_t n = inv->n_gpus;
        struct alloc_topology *t = alloc_topology_new(n ? n : 1);
        if (!t)
                return NULL;
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        bool xgmi = inv->link_type[i * n + j] == AMD_LINK_XGMI;
                        int ni = inv->gpus[i].numa_node, nj = inv->gpus[j].numa_node;
                        enum alloc_pcie_level level = ni >= 0 && ni == nj ? ALLOC_PCIE_NUMA_NODE
                                                                          : ALLOC_PCIE_SYSTEM;
                        if (ni < 0 || nj < 0)
                                level = ALLOC_PCIE_UNKNOWN;
                        alloc_topology_set(t, i, j, alloc_link_score(xgmi ? 1 : 0, level));
                }
        return t;
}
