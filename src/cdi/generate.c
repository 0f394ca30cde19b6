/* Every CDI spec a set of running backends calls for: the one place that
 * knows which builder serves which backend, shared by `devlet cdi generate`
 * and the writer of `devlet run`.
 *
 * Host devices (and any backend without a builder of its own): one spec per
 * resource, cdi_spec_from_resource().  A resource that cannot become a spec
 * is a warning, not a failure: the others are still written.
 * Never logs; warnings go back to the caller. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "cdi/generate.h"

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

void cdi_specs_for_backend(const struct dev_backend_ops *ops, struct dev_backend *b,
                           const struct cdi_generate_opts *opts, struct cdi_spec_list *out)
{
        (void)opts;
        size_t n = 0;
        struct dev_resource **res = ops->resources(b, &n);
        add_generic(out, res, n);
}
