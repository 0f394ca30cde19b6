/* Every label of the running backends, checked against Kubernetes' rules.
 *
 * A backend with a `labels` member gives its own (the NVIDIA backend:
 * GFD's, from the inventory NVML filled at start-up, its timestamp
 * included in the features.d file only); every other
 * backend's resources get "<resource>.count", their healthy devices.
 * Then each label is checked: an invalid key is dropped, an
 * invalid value sanitised, and either becomes a warning, so the file never
 * holds a label that NFD or the API server would refuse.
 * Never logs; warnings go back to the caller. */
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "labels/labels.h"

static void warn(char ***warnings, char *msg)
{
        if (warnings)
                *warnings = strv_push(*warnings ? *warnings : xcalloc(1, sizeof(char *)), msg);
        free(msg);
}

static void resource_labels(struct dev_labels *out, const struct labels_backend *b)
{
        size_t n = 0;
        struct dev_resource **res = b->ops->resources(b->backend, &n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *key = xasprintf("%s.count", res[i]->name);
                dev_labels_putf(out, key, "%zu", dev_resource_healthy(res[i]));
        }
}

/* Drops invalid keys and sanitises invalid values, in place. */
static void check(struct dev_labels *s, char ***warnings)
{
        size_t kept = 0;
        for (size_t i = 0; i < s->n; i++) {
                struct dev_kv *l = &s->v[i];
                if (!labels_valid_key(l->key)) {
                        warn(warnings, xasprintf("label key \"%s\" is not a valid Kubernetes "
                                                 "label key: left out",
                                                 l->key));
                        free(l->key);
                        free(l->value);
                        continue;
                }
                if (!labels_valid_value(l->value)) {
                        char *clean = labels_value_sanitize(l->value);
                        warn(warnings, xasprintf("label %s: value \"%s\" is not a valid "
                                                 "Kubernetes label value: written as \"%s\"",
                                                 l->key, l->value, clean));
                        free(l->value);
                        l->value = clean;
                }
                s->v[kept++] = *l;
        }
        s->n = kept;
}

void labels_collect(const struct devlet_config *cfg, const struct labels_backend *backends,
                    size_t n, struct dev_labels *out, char ***warnings)
{
        /* Through the API server the labels are written only when they
         * change; a timestamp would change them every round, so there the
         * backends label as with --no-timestamp (the file keeps GFD's). */
        struct devlet_config view = *cfg;
        if (labels_output_mode(cfg) != LABELS_TO_FILE)
                view.labels_no_timestamp = true;
        cfg = &view;
        for (size_t i = 0; i < n; i++) {
                const struct labels_backend *b = &backends[i];
                if (!b->backend)
                        continue;
                if (b->ops->labels)
                        b->ops->labels(b->backend, cfg, out, warnings);
                else
                        resource_labels(out, b);
        }
        check(out, warnings);
}
