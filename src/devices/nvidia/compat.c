/* Where devlet serves a node differently from NVIDIA's plugin v0.20, said
 * once at start-up so that nobody's pods stop scheduling by surprise.
 *
 * devlet honours keys NVIDIA's plugin ignores (resources.gpus/mig, a
 * sharing rename other than renameByDefault's, a sharing devices
 * selection) and names MIG resources after each device's own profile.  The
 * layout NVIDIA's plugin would build from the same inventory and file
 * (nvidia_layout_build_as_nvidia) is compared with devlet's, resource by
 * resource (name and device count) and MIG device by MIG device (the
 * resource it lands in).  Pure: returns the warnings, never logs. */
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/nvidia/internal.h"

static void warn(char ***w, char *msg)
{
        *w = strv_push(*w, msg);
        free(msg);
}

static const struct dev_resource *by_name(const struct nvidia_layout *l, const char *name)
{
        for (size_t i = 0; i < l->n_res; i++)
                if (strcmp(l->res[i]->name, name) == 0)
                        return l->res[i];
        return NULL;
}

/* The resource of l holding physical device unit, or NULL. */
static const struct dev_resource *holding(const struct nvidia_layout *l, size_t unit)
{
        for (size_t i = 0; i < l->n_res; i++)
                for (size_t k = 0; k < l->res[i]->n_devices; k++) {
                        const struct nvidia_dev *nd = l->res[i]->devices[k].priv;
                        if (nd && nd->unit == unit)
                                return l->res[i];
                }
        return NULL;
}

/* "a, b" of the names l gives the units of r. */
static char *names_elsewhere(const struct nvidia_layout *l, const struct dev_resource *r)
{
        _cleanup_strv_free_ char **names = NULL;
        for (size_t k = 0; k < r->n_devices; k++) {
                const struct nvidia_dev *nd = r->devices[k].priv;
                const struct dev_resource *o = nd ? holding(l, nd->unit) : NULL;
                const char *name = o ? o->name : "(not served)";
                if (!strv_contains(names, name))
                        names = strv_push(names, name);
        }
        size_t len = 1;
        for (size_t i = 0; names && names[i]; i++)
                len += strlen(names[i]) + 2;
        char *s = xcalloc(len, 1);
        for (size_t i = 0; names && names[i]; i++) {
                if (i)
                        strcat(s, ", ");
                strcat(s, names[i]);
        }
        return s;
}

static void mig_warnings(const struct nvml_inventory *inv, const struct nvidia_layout *ours,
                         const struct nvidia_layout *theirs, char ***w)
{
        for (size_t i = 0; i < ours->n_res; i++) {
                const struct dev_resource *r = ours->res[i];
                for (size_t k = 0; k < r->n_devices; k++) {
                        const struct nvidia_dev *nd = r->devices[k].priv;
                        if (!nd || nd->mig < 0 || nd->replica > 0)
                                continue;
                        const struct dev_resource *o = holding(theirs, nd->unit);
                        if (o && strcmp(o->name, r->name) == 0)
                                continue;
                        const struct nvml_mig_dev *m = &inv->gpus[nd->gpu].migs[nd->mig];
                        warn(w, xasprintf("MIG device %s (GPU %zu, profile %s) is served as %s; "
                                          "NVIDIA's plugin would serve it as %s",
                                          m->uuid, nd->gpu, m->profile, r->name,
                                          o ? o->name : "nothing"));
                }
        }
}

char **nvidia_compat_warnings(const struct nvml_inventory *inv, const struct devlet_config *cfg,
                              const struct nvidia_ctx *ctx, const struct nvidia_layout *layout)
{
        char **w = NULL;
        struct nvidia_layout theirs = { 0 };
        struct diag why = { 0 };
        if (nvidia_layout_build_as_nvidia(inv, cfg, ctx, &theirs, &why) < 0) {
                warn(&w, xasprintf("NVIDIA's plugin would not start on this node with this "
                                   "configuration: %s",
                                   why.message[0] ? why.message : "refused"));
                return w;
        }
        for (size_t i = 0; i < layout->n_res; i++) {
                const struct dev_resource *r = layout->res[i];
                const struct dev_resource *o = by_name(&theirs, r->name);
                if (!o) {
                        _cleanup_free_ char *where = names_elsewhere(&theirs, r);
                        warn(&w, xasprintf("resource %s (%zu devices) would not exist with "
                                           "NVIDIA's plugin and the same config: it would serve "
                                           "these devices as %s",
                                           r->name, r->n_devices, where));
                } else if (o->n_devices != r->n_devices) {
                        warn(&w, xasprintf("resource %s has %zu devices; NVIDIA's plugin would "
                                           "serve %zu from the same config",
                                           r->name, r->n_devices, o->n_devices));
                }
        }
        for (size_t i = 0; i < theirs.n_res; i++)
                if (!by_name(layout, theirs.res[i]->name)) {
                        _cleanup_free_ char *where = names_elsewhere(layout, theirs.res[i]);
                        warn(&w, xasprintf("NVIDIA's plugin would serve resource %s (%zu "
                                           "devices) from the same config; devlet serves these "
                                           "devices as %s",
                                           theirs.res[i]->name, theirs.res[i]->n_devices, where));
                }
        mig_warnings(inv, layout, &theirs, &w);
        nvidia_layout_release(&theirs);
        return w;
}
