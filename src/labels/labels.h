/* Node labels in the format of NVIDIA's gpu-feature-discovery (GFD), for
 * node-feature-discovery's local source: `key=value` lines in a file.
 *
 * A label set is struct dev_labels (devices/device.h), which backends
 * fill; the rules that turn a family's facts into labels live with the
 * family (GFD's, with the NVIDIA backend).  labels_collect() gathers
 * every label of the running backends; the labeler keeps the file current
 * in `devlet run` and `devlet labels --oneshot=false`. */
#ifndef DEVLET_LABELS_LABELS_H
#define DEVLET_LABELS_LABELS_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "base/diag.h"
#include "config/config.h"
#include "devices/device.h"

/* Where NFD's local source reads label files, and GFD writes its own. */
#define LABELS_DEFAULT_OUTPUT_FILE "/etc/kubernetes/node-feature-discovery/features.d/gfd"

/* ---- label sets (struct dev_labels, devices/device.h) ---- */

/* "key=value\n" lines sorted by key, NUL-terminated; length in *len. */
char *labels_format(const struct dev_labels *s, size_t *len);

/* Kubernetes' rules.  Key: an optional DNS-subdomain prefix (at most 253
 * characters) and '/', then a name of at most 63 characters of
 * [A-Za-z0-9._-] starting and ending with a letter or digit.  Value: empty,
 * or at most 63 such characters starting and ending with a letter or digit. */
bool labels_valid_key(const char *s);
bool labels_valid_value(const char *s);

/* Makes text a valid label value: GFD's sanitising (characters other than
 * [A-Za-z0-9._- ] dropped, runs of blanks turned into one '-'), then
 * leading and trailing characters other than letters and digits dropped,
 * then a value longer than 63 characters cut to 54 and ended with '-' and
 * eight hex digits of a hash of the whole, so distinct long names stay
 * distinct.  Returns a heap string. */
char *labels_value_sanitize(const char *text);

/* ---- the labels of running backends ---- */

struct labels_backend {
        const struct dev_backend_ops *ops;
        struct dev_backend *backend;
};

/* Every label the backends call for (their `labels` member, or
 * "<resource>.count", the healthy devices, for a backend without one), plus
 * nvidia.com/gfd.timestamp unless cfg->labels_no_timestamp.  A label whose
 * key is invalid is left out and a value that is not valid is sanitised;
 * each becomes a warning appended to *warnings (a strv, created when NULL;
 * warnings may be NULL). */
void labels_collect(const struct devlet_config *cfg, const struct labels_backend *backends,
                    size_t n, struct dev_labels *out, char ***warnings);

/* ---- the labeler: the labels file, kept current ---- */

struct labeler;

/* The file the labeler writes: cfg->labels_output_file, or the default when
 * it is empty; NULL for "-" (standard output). */
const char *labels_output_path(const struct devlet_config *cfg);

/* Writes s as "key=value" lines to path (NULL: standard output), replacing
 * the file atomically (fs_write_atomic: never through a planted link, mode
 * 0644) and creating its directory.  Returns 0, or -errno with diag set. */
int labels_write_file(const char *path, const struct dev_labels *s, struct diag *diag);

/* Writes the labels of backends to labels_output_path(cfg) now, then every
 * cfg->labels_sleep_interval_ms (at least 100 ms; never again when it is -1)
 * and on labels_refresh().  backends is copied; cfg and the backends must
 * outlive the labeler.  Always starts (returns 0 and *out): a failed write
 * is logged once and tried again at the next tick. */
int labels_start(uv_loop_t *loop, const struct devlet_config *cfg,
                 const struct labels_backend *backends, size_t n, struct labeler **out);
/* Writes the labels again now (devices changed). */
void labels_refresh(struct labeler *l);
/* Stops the timer; with cfg->labels_remove_on_exit also deletes the file.
 * The labeler is freed once its timer has closed, so the loop must run
 * afterwards.  NULL is a no-op. */
void labels_stop(struct labeler *l);

#endif
