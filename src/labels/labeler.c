/* The labeler: keeps the labels file current for NFD's local source.
 *
 * One uv timer: the labels are collected and the file replaced at start,
 * every sleep interval and on labels_refresh().  The file is replaced with
 * rename(2), so NFD reads the old or the new labels, never half a file.
 * Unlike GFD, stopping leaves the file in place (labels do not vanish
 * during a rolling update) unless remove-on-exit is set.
 *
 * Runs on the loop thread; a write is a few small syscalls, cheap enough
 * for the loop.  Write errors are logged once per distinct error and the
 * next tick tries again; the labeler never stops devlet. */
#include <errno.h>
#include <libgen.h>
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

struct labeler {
        const struct devlet_config *cfg;
        struct labels_backend *backends;
        size_t n_backends;
        uv_timer_t timer;
        char *last_error;    /* the last write error logged; NULL after a success */
        char *last_warnings; /* the warnings last logged, joined */
        size_t writes;
};

const char *labels_output_path(const struct devlet_config *cfg)
{
        const char *p = cfg->labels_output_file;
        if (!p || !p[0])
                return LABELS_DEFAULT_OUTPUT_FILE;
        return strcmp(p, "-") == 0 ? NULL : p;
}

int labels_write_file(const char *path, const struct label_set *s, char **err)
{
        size_t len = 0;
        _cleanup_free_ char *data = label_set_format(s, &len);
        if (!path) {
                if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
                        *err = xstrdup("cannot write to standard output");
                        return -EIO;
                }
                return 0;
        }
        _cleanup_free_ char *copy = xstrdup(path);
        const char *dir = dirname(copy);
        int r = fs_mkdir_p(dir, 0755);
        if (r < 0) {
                *err = xasprintf("cannot create %s: %s", dir, strerror(-r));
                return r;
        }
        r = fs_write_atomic(path, data, len, 0644);
        if (r < 0)
                *err = xasprintf("cannot write %s: %s", path, strerror(-r));
        return r;
}

static void log_warnings(struct labeler *l, char **warnings)
{
        _cleanup_free_ char *joined = xstrdup("");
        for (size_t i = 0; warnings && warnings[i]; i++) {
                char *j = xasprintf("%s%s\n", joined, warnings[i]);
                free(joined);
                joined = j;
        }
        if (l->last_warnings && strcmp(l->last_warnings, joined) == 0)
                return;
        for (size_t i = 0; warnings && warnings[i]; i++)
                log_warn("labels", "%s", warnings[i]);
        free(l->last_warnings);
        l->last_warnings = TAKE_PTR(joined);
}

static void write_labels(struct labeler *l)
{
        struct label_set set = { 0 };
        char **warnings = NULL;
        labels_collect(l->cfg, l->backends, l->n_backends, &set, &warnings);
        log_warnings(l, warnings);
        strv_free(warnings);
        const char *path = labels_output_path(l->cfg);
        _cleanup_free_ char *err = NULL;
        int r = labels_write_file(path, &set, &err);
        size_t n = set.n;
        label_set_release(&set);
        if (r < 0) {
                if (!l->last_error || strcmp(l->last_error, err) != 0)
                        log_warn("labels", "write failed, retrying at the next interval error=\"%s\"",
                                 err);
                free(l->last_error);
                l->last_error = TAKE_PTR(err);
                return;
        }
        if (l->last_error || l->writes == 0)
                log_info("labels", "labels written file=%s labels=%zu", path ? path : "-", n);
        else
                log_debug("labels", "labels written file=%s labels=%zu", path ? path : "-", n);
        free(TAKE_PTR(l->last_error));
        l->writes++;
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
        l->n_backends = n;
        l->backends = xcalloc(n ? n : 1, sizeof(*l->backends));
        memcpy(l->backends, backends, n * sizeof(*backends));
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
        if (l)
                write_labels(l);
}

static void on_closed(uv_handle_t *h)
{
        struct labeler *l = h->data;
        free(l->backends);
        free(l->last_error);
        free(l->last_warnings);
        free(l);
}

void labels_stop(struct labeler *l)
{
        if (!l)
                return;
        uv_timer_stop(&l->timer);
        const char *path = labels_output_path(l->cfg);
        if (l->cfg->labels_remove_on_exit && path) {
                if (unlink(path) < 0 && errno != ENOENT)
                        log_warn("labels", "cannot remove the labels file file=%s error=\"%s\"",
                                 path, strerror(errno));
                else
                        log_info("labels", "labels file removed file=%s", path);
        }
        uv_close((uv_handle_t *)&l->timer, on_closed);
}
