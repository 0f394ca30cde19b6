/* From the inventory and the configuration to the resources devlet serves,
 * the way NVIDIA's plugin builds its device map:
 *
 *   1. Units.  mig-strategy none: every GPU, MIG mode or not.  single and
 *      mixed: GPUs with MIG off, and the MIG devices of those with MIG on
 *      (each needs at least one; single also needs one profile on the whole
 *      node and no GPU with MIG off beside MIG devices).
 *   2. Names.  A GPU takes the first resources.gpus pattern matching its
 *      product name (unanchored, as NVIDIA's: nvidia_pattern_match), then
 *      the default "*" -> nvidia.com/gpu; a MIG device the first
 *      resources.mig pattern matching its whole profile name (fnmatch(3):
 *      "1g.10gb" never takes "1g.10gb+me", "3g.40gb" never "1c.3g.40gb"),
 *      then the defaults: "*" -> nvidia.com/gpu with single; with mixed
 *      nvidia.com/mig-<its own profile> ('+' becoming '.'), the name GFD
 *      gives its labels, so a pod gets exactly the slice it asked for.
 *      NVIDIA's plugin instead offers one resource per GPU-instance profile
 *      and matches device profiles against them unanchored;
 *      nvidia_layout_build_as_nvidia() rebuilds that (and drops what
 *      NVIDIA ignores: resources, rename, devices) so that compat.c can
 *      warn about every difference.
 *   3. Sharing.  For each sharing resource, the devices selected (all, the
 *      first N in index order, or listed by index or UUID) are served under
 *      the shared name (rename, else the same name) as <id>::0 .. <id>::R-1;
 *      devices not selected keep their plain IDs under the original name, as
 *      NVIDIA does.
 *
 * Each device carries its unit's DRA model (model.c); replicas carry
 * copies of it.
 *
 * IDs are NVIDIA's: the UUID (MIG UUID for MIG devices), whatever the ID
 * strategy, which only decides what the runtime is told.  A GPU NVML could
 * not identify at start is advertised as "lost-gpu-<index>", unhealthy.
 * Resource and device order follow GPU index order, so they are
 * deterministic (NVIDIA's follow Go map order).  Never logs. */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/nvidia/internal.h"

#define NVIDIA_DOMAIN "nvidia.com"
#define DEFAULT_RESOURCE NVIDIA_DOMAIN "/gpu"

bool nvidia_pattern_match(const char *pattern, const char *s)
{
        const char *at = s;
        const char *p = pattern;
        for (;;) {
                const char *star = strchr(p, '*');
                size_t len = star ? (size_t)(star - p) : strlen(p);
                if (len) {
                        /* the earliest occurrence leaves the most room for the rest */
                        const char *found = NULL;
                        for (const char *c = at; *c && !found; c++)
                                if (strncmp(c, p, len) == 0)
                                        found = c;
                        if (!found)
                                return false;
                        at = found + len;
                }
                if (!star)
                        return true;
                p = star + 1;
        }
}

/* ---- units ---- */

struct unit {
        size_t gpu;
        int mig; /* -1 whole GPU */
        size_t id; /* the unit number of struct nvidia_dev */
        const char *resource; /* name before sharing (points into names) */
};

struct builder {
        const struct nvml_inventory *inv;
        const struct devlet_config *cfg;
        const struct nvidia_ctx *ctx;
        const struct resources_cfg *res; /* the resources section (empty: as NVIDIA's) */
        struct unit *units;
        size_t n_units;
        char **names; /* strv of default MIG resource names made here */
        struct nvidia_layout *out;
        bool as_nvidia; /* NVIDIA's MIG naming (nvidia_layout_build_as_nvidia) */
};

static const struct nvml_mig_dev *unit_mig(const struct builder *b, const struct unit *u)
{
        return u->mig >= 0 ? &b->inv->gpus[u->gpu].migs[u->mig] : NULL;
}

static const char *unit_uuid(const struct builder *b, const struct unit *u)
{
        const struct nvml_mig_dev *m = unit_mig(b, u);
        return m ? m->uuid : b->inv->gpus[u->gpu].uuid;
}

static void unit_add(struct builder *b, size_t gpu, int mig, size_t id)
{
        b->units = xrealloc(b->units, (b->n_units + 1) * sizeof(*b->units));
        b->units[b->n_units++] = (struct unit){ .gpu = gpu, .mig = mig, .id = id };
}

static bool mig_in_use(const struct nvml_gpu *g)
{
        return g->mig_enabled && !g->lost;
}

/* NVIDIA's checks of a MIG layout (its messages, with the index it means:
 * NVIDIA's always says "device 0"). */
static int mig_layout_check(const struct builder *b, bool single, struct diag *diag)
{
        const struct nvml_inventory *inv = b->inv;
        for (size_t i = 0; i < inv->n_gpus; i++)
                if (mig_in_use(&inv->gpus[i]) && inv->gpus[i].n_migs == 0)
                        return diag_set(diag, -ENOTSUP,
                                        "invalid MIG configuration: at least one device with "
                                        "migEnabled=true was not configured correctly: device "
                                        "%zu has an invalid MIG configuration", i);
        if (!single)
                return 0;
        const char *first = NULL;
        bool whole = false, migs = false;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                if (!mig_in_use(g)) {
                        whole = true;
                        continue;
                }
                for (size_t j = 0; j < g->n_migs; j++) {
                        migs = true;
                        if (!first)
                                first = g->migs[j].profile;
                        else if (strcmp(first, g->migs[j].profile) != 0)
                                return diag_set(diag, -ENOTSUP,
                                                "invalid MIG configuration: more than one MIG "
                                                "device type present on node");
                }
        }
        if (whole && migs)
                return diag_set(diag, -ENOTSUP,
                                "all devices on the node must be configured with the same "
                                "migEnabled value");
        return 0;
}

static int units_build(struct builder *b, struct diag *diag)
{
        const struct nvml_inventory *inv = b->inv;
        const char *strategy = nvidia_options_get(b->cfg)->mig_strategy;
        bool none = strcmp(strategy, "none") == 0;
        if (!none) {
                int r = mig_layout_check(b, strcmp(strategy, "single") == 0, diag);
                if (r < 0)
                        return r;
        }
        size_t mig_ordinal = 0;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                if (none || !mig_in_use(g)) {
                        unit_add(b, i, -1, i);
                        continue;
                }
                for (size_t j = 0; j < g->n_migs; j++)
                        unit_add(b, i, (int)j, inv->n_gpus + mig_ordinal++);
        }
        return 0;
}

/* ---- names ---- */

static const char *name_gpu(struct builder *b, const struct nvml_gpu *g)
{
        const struct resources_cfg *rc = b->res;
        for (size_t k = 0; k < rc->n_gpu_resources; k++)
                if (nvidia_pattern_match(rc->gpu_resources[k].pattern, g->name))
                        return rc->gpu_resources[k].name;
        return DEFAULT_RESOURCE;
}

/* Interned: the names outlive the units pointing at them. */
static const char *name_intern(struct builder *b, const char *name)
{
        for (size_t n = 0; b->names && b->names[n]; n++)
                if (strcmp(b->names[n], name) == 0)
                        return b->names[n];
        b->names = strv_push(b->names, name);
        return b->names[strv_len(b->names) - 1];
}

static const char *default_mig_name(struct builder *b, const char *profile)
{
        if (!b->as_nvidia) {
                _cleanup_free_ char *name = nvidia_mig_resource_name(profile);
                return name_intern(b, name);
        }
        for (size_t i = 0; i < b->inv->n_gpus; i++) {
                const struct nvml_gpu *g = &b->inv->gpus[i];
                if (!mig_in_use(g))
                        continue;
                for (size_t k = 0; k < g->n_mig_profiles; k++) {
                        if (!nvidia_pattern_match(g->mig_profiles[k], profile))
                                continue;
                        _cleanup_free_ char *name =
                            xasprintf(NVIDIA_DOMAIN "/mig-%s", g->mig_profiles[k]);
                        for (char *c = name; *c; c++)
                                if (*c == '+')
                                        *c = '.';
                        return name_intern(b, name);
                }
        }
        return NULL;
}

static int name_mig(struct builder *b, const struct nvml_mig_dev *m, const char **out, struct diag *diag)
{
        const struct resources_cfg *rc = b->res;
        for (size_t k = 0; k < rc->n_mig_resources; k++)
                if (fnmatch(rc->mig_resources[k].pattern, m->profile, 0) == 0) {
                        *out = rc->mig_resources[k].name;
                        return 0;
                }
        if (strcmp(nvidia_options_get(b->cfg)->mig_strategy, "single") == 0) {
                *out = DEFAULT_RESOURCE;
                return 0;
        }
        *out = default_mig_name(b, m->profile);
        if (!*out)
                return diag_set(diag, -EINVAL,
                                "MIG profile '%s' does not match any resource patterns",
                                m->profile);
        return 0;
}

static int names_assign(struct builder *b, struct diag *diag)
{
        for (size_t k = 0; k < b->n_units; k++) {
                struct unit *u = &b->units[k];
                const struct nvml_mig_dev *m = unit_mig(b, u);
                if (!m) {
                        u->resource = name_gpu(b, &b->inv->gpus[u->gpu]);
                        continue;
                }
                int r = name_mig(b, m, &u->resource, diag);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- devices ---- */

static struct dev_resource *resource_get(struct builder *b, const char *name, bool create)
{
        struct nvidia_layout *l = b->out;
        for (size_t i = 0; i < l->n_res; i++)
                if (strcmp(l->res[i]->name, name) == 0)
                        return l->res[i];
        if (!create)
                return NULL;
        struct dev_resource *r = dev_resource_new(name);
        struct nvidia_res *nr = xcalloc(1, sizeof(*nr));
        nr->ctx = b->ctx;
        nr->whole_gpus_only = true;
        r->backend_data = nr;
        r->ops = &nvidia_resource_ops;
        r->preferred_allocation = true;
        l->res = xrealloc(l->res, (l->n_res + 1) * sizeof(*l->res));
        l->res[l->n_res++] = r;
        return r;
}

static void node_add(const struct builder *b, struct dev_device *d, const char *ctr)
{
        _cleanup_free_ char *host = xasprintf("%s%s", b->ctx->dev_root, ctr);
        dev_device_add_node(d, host, ctr, "rw");
}

/* The device's own nodes, with pass-device-specs: what Allocate adds beyond
 * the control nodes (shown by devlet list).  Without it the container
 * runtime, not the kubelet, gives the container its nodes. */
static void nodes_add(const struct builder *b, const struct unit *u, struct dev_device *d)
{
        const struct nvml_gpu *g = &b->inv->gpus[u->gpu];
        char path[64];
        if (!b->ctx->pass_device_specs || g->minor < 0)
                return;
        snprintf(path, sizeof(path), "/dev/nvidia%d", g->minor);
        node_add(b, d, path);
        const struct nvml_mig_dev *m = unit_mig(b, u);
        if (!m)
                return;
        if (m->gi_cap >= 0) {
                snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", m->gi_cap);
                node_add(b, d, path);
        }
        if (m->ci_cap >= 0) {
                snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", m->ci_cap);
                node_add(b, d, path);
        }
}

static void device_add(struct builder *b, struct dev_resource *r, const struct unit *u,
                       int replica)
{
        const struct nvml_gpu *g = &b->inv->gpus[u->gpu];
        const struct nvml_mig_dev *m = unit_mig(b, u);
        _cleanup_free_ char *base =
            g->lost ? xasprintf("lost-gpu-%zu", u->gpu) : xstrdup(unit_uuid(b, u));
        _cleanup_free_ char *id =
            replica >= 0 ? xasprintf("%s::%d", base, replica) : xstrdup(base);
        struct dev_device *d = dev_resource_add(r, id);
        d->numa_node = g->numa_node;
        d->health = g->lost ? DEV_UNHEALTHY : DEV_HEALTHY;
        d->model = nvidia_model(b->inv, u->gpu, u->mig); /* replicas: one unit, one name */
        nodes_add(b, u, d);
        struct nvidia_dev *nd = xcalloc(1, sizeof(*nd));
        nd->gpu = u->gpu;
        nd->mig = u->mig;
        nd->replica = replica;
        nd->unit = u->id;
        if (b->ctx->index_ids)
                nd->runtime_id = m ? xasprintf("%zu:%u", u->gpu, m->index)
                                   : xasprintf("%zu", u->gpu);
        else
                nd->runtime_id = xstrdup(base);
        d->priv = nd;
        struct nvidia_res *nr = r->backend_data;
        if (replica >= 0)
                nr->has_replicas = true;
        if (m || replica >= 0)
                nr->whole_gpus_only = false;
}

/* ---- sharing: which devices a selector names (devices/sharing.c selects) ---- */

static const char *share_resource(size_t k, const void *ud)
{
        const struct builder *b = ud;
        return b->units[k].resource;
}

/* ref is canonical (nvidia/options.c): "3", "3:1", UUIDs in lower case,
 * "MIG-GPU-<uuid>/<gi>/<ci>". */
static bool share_names(const char *ref, size_t k, size_t nth, const void *ud)
{
        const struct builder *b = ud;
        const struct unit *u = &b->units[k];
        const struct nvml_gpu *g = &b->inv->gpus[u->gpu];
        const struct nvml_mig_dev *m = unit_mig(b, u);
        if (strncmp(ref, "GPU-", 4) == 0 || strncmp(ref, "MIG-", 4) == 0) {
                if (!g->lost && strcasecmp(unit_uuid(b, u), ref) == 0)
                        return true;
                /* the older "MIG-GPU-<uuid>/<gi>/<ci>" form */
                const char *slash = strchr(ref, '/');
                unsigned gi, ci;
                char tail;
                return m && strncmp(ref, "MIG-GPU-", 8) == 0 && slash &&
                       strncasecmp(ref + 4, g->uuid, (size_t)(slash - ref - 4)) == 0 &&
                       strlen(g->uuid) == (size_t)(slash - ref - 4) &&
                       sscanf(slash, "/%u/%u%c", &gi, &ci, &tail) == 2 && gi == m->gi &&
                       ci == m->ci;
        }
        char want[32];
        if (m)
                snprintf(want, sizeof(want), "%zu:%u", u->gpu, m->index);
        else
                snprintf(want, sizeof(want), "%zu", u->gpu);
        return strcmp(ref, want) == 0;
}

static const char *share_ref_kind(const char *ref)
{
        return strncmp(ref, "GPU-", 4) == 0 || strncmp(ref, "MIG-", 4) == 0 ? "with UUID"
                                                                            : "at index";
}

static int devices_build(struct builder *b, struct diag *diag)
{
        _cleanup_free_ const struct sharing_resource_cfg **share =
                xcalloc(b->n_units + 1, sizeof(*share));
        const struct dev_share_units units = { .n = b->n_units,
                                               .resource = share_resource,
                                               .names = share_names,
                                               .ref_kind = share_ref_kind,
                                               .ud = b };
        int r = dev_share_assign(&b->cfg->sharing, &units, share, diag);
        if (r < 0)
                return r;
        bool mps = b->cfg->sharing.strategy == SHARING_MPS;
        size_t mig_unshared = 0;
        for (size_t k = 0; k < b->n_units; k++) {
                const struct unit *u = &b->units[k];
                const struct sharing_resource_cfg *s = share[k];
                /* NVIDIA's MPS control daemon skips MIG devices (MIG
                 * single serves them as nvidia.com/gpu): served whole */
                if (s && mps && u->mig >= 0) {
                        s = NULL;
                        mig_unshared++;
                }
                if (!s) {
                        device_add(b, resource_get(b, u->resource, true), u, -1);
                        continue;
                }
                struct dev_resource *res = resource_get(b, config_sharing_served_name(s), true);
                struct nvidia_res *nr = res->backend_data;
                nr->mps = b->cfg->sharing.strategy == SHARING_MPS;
                nr->replicas = s->replicas;
                for (unsigned n = 0; n < s->replicas; n++)
                        device_add(b, res, u, (int)n);
        }
        if (mig_unshared)
                dev_report(DEV_REPORT_WARN, "nvidia",
                           "MPS does not share MIG devices (NVIDIA's MPS control daemon skips "
                           "them): %zu MIG device(s) served without replicas; share full GPUs "
                           "(mig-strategy none, or MIG disabled) to use MPS",
                           mig_unshared);
        return 0;
}

/* ---- the whole layout ---- */

char *nvidia_mig_resource_name(const char *profile)
{
        char *name = xasprintf(NVIDIA_DOMAIN "/mig-%s", profile);
        for (char *c = name; *c; c++)
                if (*c == '+')
                        *c = '.';
        return name;
}

static int layout_build(const struct nvml_inventory *inv, const struct devlet_config *cfg,
                        const struct nvidia_ctx *ctx, bool as_nvidia, struct nvidia_layout *out,
                        struct diag *diag)
{
        struct nvidia_layout l = { 0 };
        static const struct resources_cfg none;
        struct builder b = { .inv = inv, .cfg = cfg, .ctx = ctx, .out = &l, .as_nvidia = as_nvidia,
                             .res = as_nvidia ? &none : nvidia_resources_get(cfg) };
        int r = units_build(&b, diag);
        if (r == 0)
                r = names_assign(&b, diag);
        if (r == 0)
                r = devices_build(&b, diag);
        free(b.units);
        strv_free(b.names);
        if (r < 0) {
                nvidia_layout_release(&l);
                return r;
        }
        *out = l;
        return 0;
}

int nvidia_layout_build(const struct nvml_inventory *inv, const struct devlet_config *cfg,
                        const struct nvidia_ctx *ctx, struct nvidia_layout *out, struct diag *diag)
{
        return layout_build(inv, cfg, ctx, false, out, diag);
}

int nvidia_layout_build_as_nvidia(const struct nvml_inventory *inv,
                                  const struct devlet_config *cfg, const struct nvidia_ctx *ctx,
                                  struct nvidia_layout *out, struct diag *diag)
{
        /* NVIDIA's plugin ignores resources, a rename other than
         * renameByDefault's and any devices selection: a shallow copy with
         * those taken out (the strings stay cfg's) */
        struct devlet_config c = *cfg;
        size_t n = cfg->sharing.strategy == SHARING_NONE ? 0 : cfg->sharing.n_resources;
        _cleanup_free_ struct sharing_resource_cfg *res = xcalloc(n + 1, sizeof(*res));
        _cleanup_strv_free_ char **renames = NULL;
        for (size_t i = 0; i < n; i++) {
                res[i] = cfg->sharing.resources[i];
                res[i].rename = NULL;
                if (cfg->sharing.rename_by_default) {
                        _cleanup_free_ char *r = xasprintf("%s.shared", res[i].name);
                        renames = strv_push(renames, r);
                        res[i].rename = renames[strv_len(renames) - 1];
                }
                res[i].devices_kind = SHARING_DEVICES_ALL;
        }
        c.sharing.resources = res;
        return layout_build(inv, &c, ctx, true, out, diag);
}

void nvidia_layout_release(struct nvidia_layout *l)
{
        for (size_t i = 0; i < l->n_res; i++) {
                struct dev_resource *r = l->res[i];
                for (size_t k = 0; k < r->n_devices; k++) {
                        struct nvidia_dev *nd = r->devices[k].priv;
                        if (nd)
                                free(nd->runtime_id);
                        free(nd);
                }
                free(r->backend_data);
                dev_resource_free(r);
        }
        free(l->res);
        memset(l, 0, sizeof(*l));
}
