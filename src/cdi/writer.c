/* The CDI specs `devlet run` keeps written in --cdi-spec-dir.
 *
 * Each write builds every spec from the backends as they are now and
 * replaces a file only when its bytes changed, so a device change that
 * leaves a spec as it was costs nothing and a runtime reading the directory
 * never sees a half-written file (fs_write_atomic).  Files are named as the
 * CDI library names them (<vendor>-<class>.yaml) and are left in place when
 * devlet stops: containers created from them may restart later.
 *
 * Specs are built on the loop (stat/readdir); the files are written by
 * cdi_writer_write_async() on libuv's thread pool, because each replacement
 * ends with fsync(2), which can stall under I/O pressure.  One batch is in
 * flight at a time (a change during it asks for one more), and a writer
 * freed while its batch is in flight goes when the batch completes; a batch
 * owns copies of everything it touches.  cdi_writer_write() does the same
 * work synchronously, for one-shot use. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cdi/generate.h"

struct written {
        char *path;
        char *data;
};

struct cdi_writer {
        const struct devlet_config *cfg;
        struct cdi_backend *backends;
        size_t n_backends;
        struct written *files;
        size_t n_files;

        struct cdi_batch *inflight; /* on the thread pool, or NULL */
        bool again;                 /* devices changed during that batch */
        bool freeing;               /* cdi_writer_free() came during that batch */
};

/* One file to replace: rendered on the loop, written off it. */
struct cdi_file {
        char *path, *data, *kind;
        size_t len, n_devices;
        int result;
        struct diag diag; /* why, when result < 0 */
};

struct cdi_batch {
        uv_work_t req;
        struct cdi_writer *w;
        uv_loop_t *loop;
        struct cdi_file *files;
        size_t n;
};

bool cdi_strategy_enabled(const struct devlet_config *cfg)
{
        char **s = cfg->device_list_strategy;
        return s && (strv_contains(s, "cdi-annotations") || strv_contains(s, "cdi-cri"));
}

struct cdi_writer *cdi_writer_new(const struct devlet_config *cfg,
                                  const struct cdi_backend *backends, size_t n)
{
        struct cdi_writer *w = xcalloc(1, sizeof(*w));
        w->cfg = cfg;
        w->n_backends = n;
        w->backends = xcalloc(n ? n : 1, sizeof(*w->backends));
        memcpy(w->backends, backends, n * sizeof(*backends));
        return w;
}

static struct written *file_slot(struct cdi_writer *w, const char *path)
{
        for (size_t i = 0; i < w->n_files; i++)
                if (strcmp(w->files[i].path, path) == 0)
                        return &w->files[i];
        w->files = xrealloc(w->files, (w->n_files + 1) * sizeof(*w->files));
        struct written *f = &w->files[w->n_files++];
        f->path = xstrdup(path);
        f->data = NULL;
        return f;
}

/* Builds every spec and renders those whose bytes changed since the last
 * successful write into *out.  Rendering failures are logged and counted in
 * *first. */
static size_t prepare(struct cdi_writer *w, struct cdi_file **out, int *first)
{
        struct cdi_spec_list specs = { 0 };
        struct dev_cdi_opts opts = { .cfg = w->cfg };
        for (size_t i = 0; i < w->n_backends; i++)
                if (w->backends[i].backend)
                        cdi_specs_for_backend(w->backends[i].ops, w->backends[i].backend, &opts,
                                              &specs);
        /* about the host (a missing node, driver file): once per process */
        for (size_t i = 0; specs.warnings && specs.warnings[i]; i++)
                log_emit_once(LOG_WARN, "cdi", "%s", specs.warnings[i]);

        struct cdi_file *files = xcalloc(specs.n ? specs.n : 1, sizeof(*files));
        size_t n = 0;
        for (size_t i = 0; i < specs.n; i++) {
                const struct cdi_spec *s = specs.specs[i];
                _cleanup_free_ char *data = NULL;
                struct diag diag = { 0 };
                size_t len = 0;
                int r = cdi_spec_render(s, CDI_FORMAT_YAML, &data, &len, &diag);
                if (r < 0) {
                        char buf[DIAG_FORMAT_MAX];
                        log_error("cdi", "spec not written kind=%s error=\"%s\"", s->kind,
                                  diag_format(&diag, buf, sizeof(buf)));
                        *first = *first ? *first : r;
                        continue;
                }
                _cleanup_free_ char *name = cdi_spec_file_name(s, CDI_FORMAT_YAML);
                _cleanup_free_ char *path = xasprintf("%s/%s", w->cfg->cdi_spec_dir, name);
                const struct written *f = file_slot(w, path);
                if (f->data && strcmp(f->data, data) == 0)
                        continue;
                files[n++] = (struct cdi_file){ .path = TAKE_PTR(path), .data = TAKE_PTR(data),
                                                .kind = xstrdup(s->kind), .len = len,
                                                .n_devices = s->n_devices };
        }
        cdi_spec_list_release(&specs);
        *out = files;
        return n;
}

/* fs_write_atomic_at creates --cdi-spec-dir when it is missing, checking each
 * directory it walks or creates: one someone else owns or may write is
 * refused. */
static void write_one(struct cdi_file *f)
{
        f->result = fs_write_atomic_at(AT_FDCWD, f->path, f->data, f->len, 0644, FS_CREATE,
                                       &f->diag);
}

/* Logs a file's outcome and remembers what was written; frees the file. */
static void commit(struct cdi_writer *w, struct cdi_file *f, int *first)
{
        if (f->result < 0) {
                log_error("cdi", "spec not written kind=%s file=%s error=\"%s\"", f->kind, f->path,
                          f->diag.message[0] ? f->diag.message : strerror(-f->result));
                *first = *first ? *first : f->result;
        } else {
                log_info("cdi", "spec written kind=%s file=%s devices=%zu", f->kind, f->path,
                         f->n_devices);
                struct written *slot = file_slot(w, f->path);
                free(slot->data);
                slot->data = TAKE_PTR(f->data);
        }
        free(f->path);
        free(f->data);
        free(f->kind);
}

int cdi_writer_write(struct cdi_writer *w)
{
        int first = 0;
        _cleanup_free_ struct cdi_file *files = NULL;
        size_t n = prepare(w, &files, &first);
        for (size_t i = 0; i < n; i++) {
                write_one(&files[i]);
                commit(w, &files[i], &first);
        }
        return first;
}

static void batch_work(uv_work_t *req)
{
        struct cdi_batch *b = req->data;
        for (size_t i = 0; i < b->n; i++)
                write_one(&b->files[i]);
}

static void writer_release(struct cdi_writer *w);

static void batch_done(uv_work_t *req, int status)
{
        struct cdi_batch *b = req->data;
        struct cdi_writer *w = b->w;
        int first = 0;
        for (size_t i = 0; i < b->n; i++) {
                if (status == UV_ECANCELED)
                        b->files[i].result = diag_set(&b->files[i].diag, -ECANCELED, "%s",
                                                      strerror(ECANCELED));
                commit(w, &b->files[i], &first);
        }
        uv_loop_t *loop = b->loop;
        free(b->files);
        free(b);
        w->inflight = NULL;
        if (w->freeing) {
                writer_release(w);
                return;
        }
        if (w->again) {
                w->again = false;
                cdi_writer_write_async(w, loop);
        }
}

void cdi_writer_write_async(struct cdi_writer *w, uv_loop_t *loop)
{
        if (w->inflight) {
                w->again = true;
                return;
        }
        int first = 0;
        struct cdi_file *files = NULL;
        size_t n = prepare(w, &files, &first);
        if (n == 0) {
                free(files);
                return;
        }
        struct cdi_batch *b = xcalloc(1, sizeof(*b));
        *b = (struct cdi_batch){ .w = w, .loop = loop, .files = files, .n = n };
        b->req.data = b;
        if (uv_queue_work(loop, &b->req, batch_work, batch_done) < 0) {
                /* no pool: write here rather than not at all */
                batch_work(&b->req);
                w->inflight = b;
                batch_done(&b->req, 0);
                return;
        }
        w->inflight = b;
}

static void writer_release(struct cdi_writer *w)
{
        for (size_t i = 0; i < w->n_files; i++) {
                free(w->files[i].path);
                free(w->files[i].data);
        }
        free(w->files);
        free(w->backends);
        free(w);
}

void cdi_writer_free(struct cdi_writer *w)
{
        if (!w)
                return;
        if (w->inflight) {
                w->freeing = true; /* batch_done frees it */
                w->cfg = NULL;
                return;
        }
        writer_release(w);
}
