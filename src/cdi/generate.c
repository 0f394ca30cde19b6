/* Every CDI spec a set of running backends calls for, shared by `devlet cdi
 * generate` and the writer of `devlet run`.
 *
 * A backend with a `cdi_specs` member builds its own (a GPU family: one
 * spec from its inventory).  Every other backend (host devices): one spec
 * per resource, cdi_spec_from_resource().  A resource that cannot become a
 * spec is a warning, not a failure: the others are still written.
 * Never logs; warnings go back to the caller. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "cdi/generate.h"

static void add_generic(struct cdi_spec_list *l, struct dev_resource *const *res, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct cdi_spec *s = NULL;
                _cleanup_strv_free_ char **skipped = NULL;
                struct diag diag = { 0 };
                int r = cdi_spec_from_resource(res[i], &s, &skipped, &diag);
                for (size_t k = 0; skipped && skipped[k]; k++)
                        cdi_spec_list_warn(l, xasprintf("resource %s: device ID \"%s\" left out "
                                                        "of the CDI spec (not a valid CDI device "
                                                        "name, or nothing to give a container)",
                                                        res[i]->name, skipped[k]));
                if (r < 0) {
                        char buf[DIAG_FORMAT_MAX];
                        cdi_spec_list_warn(l, xasprintf("no CDI spec: %s",
                                                        diag_format(&diag, buf, sizeof(buf))));
                        continue;
                }
                cdi_spec_list_push(l, s);
        }
}

void cdi_specs_for_backend(const struct dev_backend_ops *ops, struct dev_backend *b,
                           const struct dev_cdi_opts *opts, struct cdi_spec_list *out)
{
        if (ops->cdi_specs) {
                ops->cdi_specs(b, opts, out);
                return;
        }
        size_t n = 0;
        struct dev_resource **res = ops->resources(b, &n);
        add_generic(out, res, n);
}
