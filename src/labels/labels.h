/* Node labels in the format of NVIDIA's gpu-feature-discovery (GFD), for
 * node-feature-discovery's local source (`key=value` lines in a file), or
 * through the API server: an NFD NodeFeature object (GFD's
 * --use-node-feature-api) or the Node's own labels (AMD's labeller);
 * --labels-output chooses.
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

#include <jansson.h>
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
 * nvidia.com/gfd.timestamp unless cfg->labels_no_timestamp or the output is
 * the API server's (labels_output_mode: only a change is written there, and
 * a timestamp would be one every round).  A label whose
 * key is invalid is left out and a value that is not valid is sanitised;
 * each becomes a warning appended to *warnings (a strv, created when NULL;
 * warnings may be NULL). */
void labels_collect(const struct devlet_config *cfg, const struct labels_backend *backends,
                    size_t n, struct dev_labels *out, char ***warnings);

/* ---- where the labels go (--labels-output) ---- */

enum labels_output {
        LABELS_TO_FILE,         /* features.d: the labels file (or standard output) */
        LABELS_TO_NODE_FEATURE, /* an NFD NodeFeature object (GFD's --use-node-feature-api) */
        LABELS_TO_NODE,         /* the Node's labels, patched (AMD's k8s-node-labeller) */
};

/* The Node annotation listing the label keys devlet wrote there
 * (comma-separated, sorted), so the ones it no longer produces can go. */
#define LABELS_OWNED_ANNOTATION "devlet.io/owned-labels"

/* cfg->labels_output, with "auto" decided by --use-node-feature-api. */
enum labels_output labels_output_mode(const struct devlet_config *cfg);
/* "features.d", "node-feature", "node". */
const char *labels_output_name(enum labels_output mode);

/* ---- the API side (publish.c) ---- */

/* {key: value} of s.  New reference. */
json_t *labels_to_json(const struct dev_labels *s);
/* The merge patch that makes node (a Node object as read) carry desired
 * ({key: value}): the labels that differ, null for the keys its
 * LABELS_OWNED_ANNOTATION lists that desired lacks (when still there), and
 * the annotation listing desired's keys.  NULL when nothing would change.
 * Never names a label neither desired nor the annotation holds. */
json_t *labels_node_patch(const json_t *node, json_t *desired);
/* The merge patch that takes a Node from written (the labels devlet last
 * wrote there, {key: value}) to desired: the labels that changed or came,
 * null for those that went, and the LABELS_OWNED_ANNOTATION list only when
 * the keys changed.  NULL when they are the same.  Reads nothing of the
 * Node: the publisher's write on change (publish.c). */
json_t *labels_node_patch_since(json_t *written, json_t *desired);
/* GFD's NodeFeature object for node carrying desired (borrowed). */
json_t *labels_node_feature(const char *node, const json_t *desired);

struct labels_publisher;

/* Starts the thread that keeps the labels handed over in the API server,
 * in labels_output_mode(cfg) (not LABELS_TO_FILE), for
 * config_node_name(cfg), through cfg->kubeconfig (empty: in-cluster),
 * writing only what changed and reading the object again only after a
 * failure and every cfg->labels_resync_interval_ms (plus jitter).
 * Nothing is read from cfg afterwards.  The API client is made on the
 * thread, and retried like any failed call.  NULL (logged) only when the
 * thread cannot start. */
struct labels_publisher *labels_publisher_start(const struct devlet_config *cfg);
/* Hands the thread a copy of set to publish; never waits on the server. */
void labels_publisher_set(struct labels_publisher *p, const struct dev_labels *set);
/* Stops the thread and joins it (it leaves an API call within 100 ms).
 * NULL is a no-op.  What was published stays. */
void labels_publisher_stop(struct labels_publisher *p);
/* One publish, now, blocking (`devlet labels` with --oneshot): 0, or -errno
 * with diag (no API server, an error status, a broken answer). */
int labels_publish_once(const struct devlet_config *cfg, const struct dev_labels *set,
                        struct diag *diag);

/* ---- the labeler: the labels file, kept current ---- */

struct labeler;

/* The file the labeler writes: cfg->labels_output_file, or the default when
 * it is empty; NULL for "-" (standard output). */
const char *labels_output_path(const struct devlet_config *cfg);

/* Writes s as "key=value" lines to path (NULL: standard output), replacing
 * the file atomically (fs_write_atomic: never through a planted link, mode
 * 0644) and creating its directory.  Returns 0, or -errno with diag set. */
int labels_write_file(const char *path, const struct dev_labels *s, struct diag *diag);

/* Writes the labels of backends to labels_output_path(cfg) (or, for the API
 * outputs, hands them to a labels_publisher) now, then every
 * cfg->labels_sleep_interval_ms (at least 100 ms; never again when it is -1)
 * and on labels_refresh().  backends is copied; cfg and the backends must
 * outlive the labeler.  Always starts (returns 0 and *out): a failed write
 * is logged once and tried again at the next tick. */
int labels_start(uv_loop_t *loop, const struct devlet_config *cfg,
                 const struct labels_backend *backends, size_t n, struct labeler **out);
/* Writes the labels again now (devices changed). */
void labels_refresh(struct labeler *l);
/* Stops the timer (and joins the publisher); with cfg->labels_remove_on_exit
 * also deletes the file (the API outputs stay as published).
 * The labeler is freed once its timer has closed, so the loop must run
 * afterwards.  NULL is a no-op. */
void labels_stop(struct labeler *l);

#endif
