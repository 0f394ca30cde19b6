/* CDI specs for resources served with the generic allocate (host devices):
 * one CDI device per device ID, with the device nodes and mounts Allocate
 * would give a container holding that ID (see cdi/cdi.h for the mapping).
 *
 * Reads the device model and stats device nodes; never changes either, never
 * logs above debug. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "cdi/cdi.h"

static const char *const bind_ro[] = { "rbind", "ro", NULL };
static const char *const bind_rw[] = { "rbind", NULL };

static void add_node(struct cdi_edits *e, const struct dev_node *n)
{
        struct stat st;
        if (stat(n->host_path, &st) < 0) {
                cdi_edits_add_node(e, n->container_path, n->host_path, n->permissions);
                return;
        }
        if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
                bool rw = strchr(n->permissions, 'w') != NULL;
                cdi_edits_add_mount(e, n->host_path, n->container_path, NULL, rw ? bind_rw : bind_ro);
                return;
        }
        struct cdi_device_node *c =
                cdi_edits_add_node(e, n->container_path, n->host_path, n->permissions);
        c->type = S_ISCHR(st.st_mode) ? 'c' : 'b';
        c->major = major(st.st_rdev);
        c->minor = minor(st.st_rdev);
}

DEFINE_CLEANUP_FUNC(struct cdi_spec, cdi_spec_free)

int cdi_spec_from_resource(const struct dev_resource *r, struct cdi_spec **out, char ***skipped,
                           struct diag *diag)
{
        if (!cdi_valid_kind(r->name))
                return diag_set(diag, -EINVAL,
                                "resource %s: not a valid CDI kind (the name after the '/' must "
                                "start with a letter)",
                                r->name);
        _cleanup_(cdi_spec_freep) struct cdi_spec *s = cdi_spec_new(r->name);
        for (size_t i = 0; i < r->n_devices; i++) {
                const struct dev_device *d = &r->devices[i];
                if (!cdi_valid_device_name(d->id) || (d->n_nodes == 0 && d->n_mounts == 0)) {
                        if (skipped)
                                *skipped = strv_push(*skipped ? *skipped
                                                              : xcalloc(1, sizeof(char *)),
                                                     d->id);
                        continue;
                }
                struct cdi_device *c = cdi_spec_add_device(s, d->id);
                for (size_t k = 0; k < d->n_nodes; k++)
                        add_node(&c->edits, &d->nodes[k]);
                for (size_t k = 0; k < d->n_mounts; k++)
                        cdi_edits_add_mount(&c->edits, d->mounts[k].host_path,
                                            d->mounts[k].container_path, NULL,
                                            d->mounts[k].read_only ? bind_ro : bind_rw);
        }
        int rc = cdi_spec_validate(s, diag);
        if (rc < 0)
                return diag_prefix(diag, rc, "resource %s", r->name);
        *out = TAKE_PTR(s);
        return 0;
}

void cdi_edits_from_alloc(const struct dev_alloc *a, struct cdi_edits *out)
{
        for (size_t i = 0; i < a->n_nodes; i++)
                add_node(out, &a->nodes[i]);
        for (size_t i = 0; i < a->n_mounts; i++)
                cdi_edits_add_mount(out, a->mounts[i].host_path, a->mounts[i].container_path, NULL,
                                    a->mounts[i].read_only ? bind_ro : bind_rw);
        for (size_t i = 0; i < a->n_envs; i++)
                cdi_edits_add_env(out, a->envs[i].key, a->envs[i].value);
}

int cdi_spec_render_json(const struct cdi_spec *s, char **out, size_t *len, struct diag *diag)
{
        return cdi_spec_render(s, CDI_FORMAT_JSON, out, len, diag);
}
