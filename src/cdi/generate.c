/* Every CDI spec a set of running backends calls for: the one place that
 * knows which builder serves which backend, shared by `devlet cdi generate`
 * and the writer of `devlet run`.
 *
 * NVIDIA: one spec from the backend's inventory (cdi/nvidia.c), with the
 * GPU and MIG indices the backend's Allocate names ("<i>", "<i>:<j>": the
 * position in the inventory and NVML's MIG index) and the UUIDs.  Host
 * devices (and any backend without a builder of its own): one spec per
 * resource, cdi_spec_from_resource().  A resource that cannot become a spec
 * is a warning, not a failure: the others are still written.
 * Never logs; warnings go back to the caller. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "cdi/generate.h"
#include "cdi/nvidia.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvidia.h"

void cdi_spec_list_release(struct cdi_spec_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                cdi_spec_free(l->specs[i]);
        free(l->specs);
        strv_free(l->warnings);
        memset(l, 0, sizeof(*l));
}

static void warn(struct cdi_spec_list *l, char *msg)
{
        l->warnings = strv_push(l->warnings ? l->warnings : xcalloc(1, sizeof(char *)), msg);
        free(msg);
}

static void push(struct cdi_spec_list *l, struct cdi_spec *s)
{
        l->specs = xrealloc(l->specs, (l->n + 1) * sizeof(*l->specs));
        l->specs[l->n++] = s;
}

static void add_generic(struct cdi_spec_list *l, struct dev_resource *const *res, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct cdi_spec *s = NULL;
                char **skipped = NULL;
                _cleanup_free_ char *err = NULL;
                int r = cdi_spec_from_resource(res[i], &s, &skipped, &err);
                for (size_t k = 0; skipped && skipped[k]; k++)
                        warn(l, xasprintf("resource %s: device ID \"%s\" left out of the CDI "
                                          "spec (not a valid CDI device name, or nothing to "
                                          "give a container)",
                                          res[i]->name, skipped[k]));
                strv_free(skipped);
                if (r < 0) {
                        warn(l, xasprintf("no CDI spec: %s", err));
                        continue;
                }
                push(l, s);
        }
}

/* Where devlet finds the driver now: the driver root's mount in devlet's
 * own container (--driver-root-ctr-path) when there is one, else the driver
 * root itself. */
static const char *driver_search_root(const struct devlet_config *cfg)
{
        struct stat st;
        const char *ctr = cfg->container_driver_root;
        if (ctr && ctr[0] && stat(ctr, &st) == 0 && S_ISDIR(st.st_mode))
                return ctr;
        return cfg->driver_root;
}

static void add_nvidia(struct cdi_spec_list *l, struct dev_backend *b,
                       const struct cdi_generate_opts *opts)
{
        const struct nvml_inventory *inv = nvidia_backend_inventory(b);
        if (!inv || inv->n_gpus == 0)
                return;
        size_t n_migs = 0;
        for (size_t i = 0; i < inv->n_gpus; i++)
                n_migs += inv->gpus[i].n_migs;
        _cleanup_free_ struct cdi_nvidia_gpu *gpus = xcalloc(inv->n_gpus, sizeof(*gpus));
        _cleanup_free_ struct cdi_nvidia_mig *migs = xcalloc(n_migs ? n_migs : 1, sizeof(*migs));
        struct cdi_nvidia_mig *next = migs;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                /* a GPU lost at start-up keeps its index, with no device */
                gpus[i] = (struct cdi_nvidia_gpu){ .uuid = g->uuid,
                                                   .minor = g->lost ? -1 : g->minor,
                                                   .mig_enabled = g->mig_enabled,
                                                   .migs = next,
                                                   .n_migs = g->n_migs };
                for (size_t k = 0; k < g->n_migs; k++)
                        *next++ = (struct cdi_nvidia_mig){ .index = g->migs[k].index,
                                                           .uuid = g->migs[k].uuid,
                                                           .gi_cap = g->migs[k].gi_cap,
                                                           .ci_cap = g->migs[k].ci_cap };
        }
        const struct cdi_nvidia_node node = { inv->driver_version, gpus, inv->n_gpus };
        const struct devlet_config *cfg = opts->cfg;
        const struct cdi_nvidia_opts o = {
                .kind = opts->nvidia_kind ? opts->nvidia_kind : CDI_NVIDIA_PLUGIN_KIND,
                .driver_root = cfg->driver_root,
                .search_root = driver_search_root(cfg),
                .dev_root = cfg->dev_root,
                .hook_path = cfg->cdi_hook_ldcache ? cfg->nvidia_cdi_hook_path : NULL,
        };
        struct cdi_spec *s = NULL;
        _cleanup_free_ char *err = NULL;
        if (cdi_spec_nvidia(&node, &o, &s, &l->warnings, &err) < 0) {
                warn(l, xasprintf("no NVIDIA CDI spec: %s", err));
                return;
        }
        push(l, s);

        /* the kinds Allocate names "<vendor>/gds=all" and so on */
        const struct {
                bool on;
                const struct cdi_nvidia_extra *x;
        } extras[] = { { cfg->gds_enabled, &cdi_nvidia_gds },
                       { cfg->mofed_enabled, &cdi_nvidia_mofed },
                       { cfg->gdrcopy_enabled, &cdi_nvidia_gdrcopy },
                       { cfg->imex_channel0, &cdi_nvidia_imex } };
        const char *slash = strchr(o.kind, '/');
        for (size_t i = 0; i < ARRAY_SIZE(extras); i++) {
                if (!extras[i].on)
                        continue;
                _cleanup_free_ char *kind = xasprintf("%.*s/%s", (int)(slash - o.kind), o.kind,
                                                      extras[i].x->klass);
                _cleanup_free_ char *xerr = NULL;
                struct cdi_spec *x = NULL;
                if (cdi_spec_nvidia_extra(kind, cfg->dev_root, extras[i].x, &x, &xerr) < 0)
                        warn(l, xasprintf("no CDI spec for %s: %s", kind, xerr));
                else
                        push(l, x);
        }
}

void cdi_specs_for_backend(const struct dev_backend_ops *ops, struct dev_backend *b,
                           const struct cdi_generate_opts *opts, struct cdi_spec_list *out)
{
        if (ops == &nvidia_backend_ops) {
                add_nvidia(out, b, opts);
                return;
        }
        size_t n = 0;
        struct dev_resource **res = ops->resources(b, &n);
        add_generic(out, res, n);
}
