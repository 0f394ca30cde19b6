/* The labeler: keeps the labels file current for NFD's local source.
 *
 * One uv timer: the labels are collected and the file replaced at start,
 * every sleep interval and on labels_refresh().  The file is replaced with
 * rename(2), so NFD reads the old or the new labels, never half a file.
 * Unlike GFD, stopping leaves the file in place (labels do not vanish
 * during a rolling update) unless remove-on-exit is set.
 *
 * Runs on the loop thread, except the write itself: replacing the file ends
 * with fsync(2), which can stall under I/O pressure, so it runs on libuv's
 * thread pool, one write at a time (a refresh during a write asks for one
 * more).  A labeler stopped while its write is in flight is freed when the
 * write completes; nothing the write needs points into the config.  Write
 * errors are logged once per distinct error and the next tick tries again;
 * the labeler never stops devlet.
 *
 * With an API output (--labels-output node-feature or node) the labels
 * collected on the loop go to the publisher thread (publish.c) instead of
 * the file, which owns the retries and the logging. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "labels/labels.h"

#define LABELS_MIN_INTERVAL_MS 100

struct label_write;

struct labeler {
        const struct devlet_config *cfg; /* valid until labels_stop() */
        struct labels_backend *backends;
        size_t n_backends;
        uv_loop_t *loop;
        uv_timer_t timer;
        char *path;          /* the file (a copy); NULL: standard output */
        bool remove_on_exit;
        char *last_error;    /* the last write error logged; NULL after a success */
        size_t writes;

        bool api; /* the labels go to the API server (publisher), not a file */
        struct labels_publisher *publisher; /* with api; NULL until it could start */

        struct label_write *inflight; /* the write on the thread pool, or NULL */
        bool again;                   /* labels asked for during that write */
        bool stopping;
        bool timer_closed;
};

/* One write on the thread pool: owns copies of everything it touches. */
struct label_write {
        uv_work_t req;
        struct labeler *l;
        char *path;
        char *data;
        size_t len;
        size_t n_labels;
        int result;
        struct diag diag; /* why, when result < 0 */
};

const char *labels_output_path(const struct devlet_config *cfg)
{
        const char *p = cfg->labels_output_file;
        if (!p || !p[0])
                return LABELS_DEFAULT_OUTPUT_FILE;
        return strcmp(p, "-") == 0 ? NULL : p;
}

/* fs_write_atomic_at creates the file's directory when it is missing, and
 * refuses one someone else owns or may write. */
static int write_data(const char *path, const char *data, size_t len, struct diag *diag)
{
        int r = fs_write_atomic_at(AT_FDCWD, path, data, len, 0644, FS_CREATE, diag);
        if (r < 0)
                return diag_prefix(diag, r, "cannot write %s", path);
        return 0;
}

int labels_write_file(const char *path, const struct dev_labels *s, struct diag *diag)
{
        size_t len = 0;
        _cleanup_free_ char *data = labels_format(s, &len);
        if (!path) {
                if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
                        return diag_set(diag, -EIO, "cannot write to standard output");
                return 0;
        }
        return write_data(path, data, len, diag);
}

/* A warning is about the host or the devices, which a later pass finds
 * again: each is logged once per process. */
static void log_warnings(char **warnings)
{
        for (size_t i = 0; warnings && warnings[i]; i++)
                log_emit_once(LOG_WARN, "labels", "%s", warnings[i]);
}

static void labeler_free(struct labeler *l)
{
        free(l->backends);
        free(l->path);
        free(l->last_error);
        free(l);
}

static void remove_file(const struct labeler *l)
{
        if (!l->remove_on_exit || !l->path)
                return;
        if (unlink(l->path) < 0 && errno != ENOENT)
                log_warn_errno(-errno, "labels", "cannot remove the labels file file=%s", l->path);
        else
                log_info("labels", "labels file removed file=%s", l->path);
}

/* Logs a write's outcome once per change of outcome. */
static void write_done(struct labeler *l, int r, const struct diag *diag, size_t n)
{
        const char *shown = l->path ? l->path : "-";
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                diag_format(diag, buf, sizeof(buf));
                if (!l->last_error || strcmp(l->last_error, buf) != 0)
                        log_warn("labels", "write failed, retrying at the next interval error=\"%s\"",
                                 buf);
                free(l->last_error);
                l->last_error = xstrdup(buf);
                return;
        }
        if (l->last_error || l->writes == 0)
                log_info("labels", "labels written file=%s labels=%zu", shown, n);
        else
                log_debug("labels", "labels written file=%s labels=%zu", shown, n);
        free(TAKE_PTR(l->last_error));
        l->writes++;
}

static void work_write(uv_work_t *req)
{
        struct label_write *w = req->data;
        w->result = write_data(w->path, w->data, w->len, &w->diag);
}

static void write_labels(struct labeler *l);

static void after_write(uv_work_t *req, int status)
{
        struct label_write *w = req->data;
        struct labeler *l = w->l;
        l->inflight = NULL;
        if (status == UV_ECANCELED)
                w->result = diag_set(&w->diag, -ECANCELED, "cancelled");
        write_done(l, w->result, &w->diag, w->n_labels);
        free(w->path);
        free(w->data);
        free(w);
        if (l->stopping) {
                remove_file(l); /* after the last write, so it cannot bring the file back */
                if (l->timer_closed)
                        labeler_free(l);
                return;
        }
        if (l->again) {
                l->again = false;
                write_labels(l);
        }
}

static void write_labels(struct labeler *l)
{
        if (l->inflight) {
                l->again = true;
                return;
        }
        struct dev_labels set = { 0 };
        _cleanup_strv_free_ char **warnings = NULL;
        labels_collect(l->cfg, l->backends, l->n_backends, &set, &warnings);
        log_warnings(warnings);
        size_t n = set.n;
        if (l->api) {
                /* a publisher that could not start is tried again each round */
                if (!l->publisher)
                        l->publisher = labels_publisher_start(l->cfg);
                if (l->publisher)
                        labels_publisher_set(l->publisher, &set);
                dev_labels_release(&set);
                return;
        }
        if (!l->path) {
                struct diag diag = { 0 };
                int r = labels_write_file(NULL, &set, &diag);
                dev_labels_release(&set);
                write_done(l, r, &diag, n);
                return;
        }
        struct label_write *w = xcalloc(1, sizeof(*w));
        w->req.data = w;
        w->l = l;
        w->path = xstrdup(l->path);
        w->data = labels_format(&set, &w->len);
        w->n_labels = n;
        dev_labels_release(&set);
        int r = uv_queue_work(l->loop, &w->req, work_write, after_write);
        if (r < 0) {
                struct diag diag = { 0 };
                diag_set(&diag, r, "cannot queue the write: %s", uv_strerror(r));
                write_done(l, r, &diag, n);
                free(w->path);
                free(w->data);
                free(w);
                return;
        }
        l->inflight = w;
}

static void on_timer(uv_timer_t *t)
{
        write_labels(t->data);
}

int labels_start(uv_loop_t *loop, const struct devlet_config *cfg,
                 const struct labels_backend *backends, size_t n, struct labeler **out)
{
        struct labeler *l = xcalloc(1, sizeof(*l));
        l->cfg = cfg;
        l->loop = loop;
        const char *path = labels_output_path(cfg);
        l->path = path ? xstrdup(path) : NULL;
        l->remove_on_exit = cfg->labels_remove_on_exit;
        l->n_backends = n;
        l->backends = xcalloc(n ? n : 1, sizeof(*l->backends));
        memcpy(l->backends, backends, n * sizeof(*backends));
        enum labels_output mode = labels_output_mode(cfg);
        if (mode != LABELS_TO_FILE) {
                l->api = true;
                l->publisher = labels_publisher_start(cfg);
                l->remove_on_exit = false;
        } else if (cfg->labels_use_node_feature_api) {
                log_warn("labels", "--use-node-feature-api is overruled by --labels-output=%s: "
                                   "the labels go to the file",
                         cfg->labels_output);
        }
        uv_timer_init(loop, &l->timer);
        l->timer.data = l;
        write_labels(l);
        int64_t every = cfg->labels_sleep_interval_ms;
        if (every >= 0) {
                if (every < LABELS_MIN_INTERVAL_MS)
                        every = LABELS_MIN_INTERVAL_MS;
                uv_timer_start(&l->timer, on_timer, (uint64_t)every, (uint64_t)every);
        }
        *out = l;
        return 0;
}

void labels_refresh(struct labeler *l)
{
        if (l && !l->stopping)
                write_labels(l);
}

static void on_closed(uv_handle_t *h)
{
        struct labeler *l = h->data;
        l->timer_closed = true;
        if (!l->inflight)
                labeler_free(l);
}

void labels_stop(struct labeler *l)
{
        if (!l)
                return;
        uv_timer_stop(&l->timer);
        labels_publisher_stop(TAKE_PTR(l->publisher));
        l->stopping = true;
        l->cfg = NULL; /* the config may go now; an in-flight write needs none of it */
        if (!l->inflight)
                remove_file(l);
        uv_close((uv_handle_t *)&l->timer, on_closed);
}
