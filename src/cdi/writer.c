/* The CDI specs `devlet run` keeps written in --cdi-spec-dir.
 *
 * Each write builds every spec from the backends as they are now and
 * replaces a file only when its bytes changed, so a device change that
 * leaves a spec as it was costs nothing and a runtime reading the directory
 * never sees a half-written file (fs_write_atomic).  Files are named as the
 * CDI library names them (<vendor>-<class>.yaml) and are left in place when
 * devlet stops: containers created from them may restart later.
 *
 * Runs on the loop thread: stat/readdir and small writes only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cdi/generate.h"
#include "cdi/nvidia.h"

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
        char *last_warnings;
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

static void log_warnings(struct cdi_writer *w, char **warnings)
{
        _cleanup_free_ char *joined = xstrdup("");
        for (size_t i = 0; warnings && warnings[i]; i++) {
                char *j = xasprintf("%s%s\n", joined, warnings[i]);
                free(joined);
                joined = j;
        }
        if (w->last_warnings && strcmp(w->last_warnings, joined) == 0)
                return;
        for (size_t i = 0; warnings && warnings[i]; i++)
                log_warn("cdi", "%s", warnings[i]);
        free(w->last_warnings);
        w->last_warnings = TAKE_PTR(joined);
}

int cdi_writer_write(struct cdi_writer *w)
{
        struct cdi_spec_list specs = { 0 };
        struct cdi_generate_opts opts = { .cfg = w->cfg, .nvidia_kind = CDI_NVIDIA_PLUGIN_KIND };
        for (size_t i = 0; i < w->n_backends; i++)
                if (w->backends[i].backend)
                        cdi_specs_for_backend(w->backends[i].ops, w->backends[i].backend, &opts,
                                              &specs);
        log_warnings(w, specs.warnings);

        int first = 0;
        for (size_t i = 0; i < specs.n; i++) {
                const struct cdi_spec *s = specs.specs[i];
                _cleanup_free_ char *data = NULL, *err = NULL;
                size_t len = 0;
                int r = cdi_spec_render(s, CDI_FORMAT_YAML, &data, &len, &err);
                if (r < 0) {
                        log_error("cdi", "spec not written kind=%s error=\"%s\"", s->kind, err);
                        first = first ? first : r;
                        continue;
                }
                _cleanup_free_ char *name = cdi_spec_file_name(s, CDI_FORMAT_YAML);
                _cleanup_free_ char *path = xasprintf("%s/%s", w->cfg->cdi_spec_dir, name);
                struct written *f = file_slot(w, path);
                if (f->data && strcmp(f->data, data) == 0)
                        continue;
                r = fs_mkdir_p(w->cfg->cdi_spec_dir, 0755);
                if (r >= 0)
                        r = fs_write_atomic(path, data, len, 0644);
                if (r < 0) {
                        log_error("cdi", "spec not written kind=%s file=%s error=\"%s\"", s->kind,
                                  path, strerror(-r));
                        first = first ? first : r;
                        continue;
                }
                log_info("cdi", "spec written kind=%s file=%s devices=%zu", s->kind, path,
                         s->n_devices);
                free(f->data);
                f->data = TAKE_PTR(data);
        }
        cdi_spec_list_release(&specs);
        return first;
}

void cdi_writer_free(struct cdi_writer *w)
{
        if (!w)
                return;
        for (size_t i = 0; i < w->n_files; i++) {
                free(w->files[i].path);
                free(w->files[i].data);
        }
        free(w->files);
        free(w->backends);
        free(w->last_warnings);
        free(w);
}
