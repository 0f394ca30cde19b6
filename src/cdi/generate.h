/* The CDI specs of running backends: which builder serves which backend. */
#ifndef DEVLET_CDI_GENERATE_H
#define DEVLET_CDI_GENERATE_H

#include <uv.h>

#include "cdi/cdi.h"

struct cdi_spec_list {
        struct cdi_spec **specs; /* each valid */
        size_t n;
        char **warnings; /* strv or NULL: what was left out, and why */
};

struct cdi_generate_opts {
        const struct devlet_config *cfg;
        const char *nvidia_kind; /* kind of the NVIDIA spec: "k8s.device-plugin.nvidia.com/gpu"
                                  * for the plugin's own annotations, "nvidia.com/gpu" for
                                  * `cdi generate` */
};

/* Appends the specs of backend b (created by ops) to out, and a warning for
 * each resource or device left out. */
void cdi_specs_for_backend(const struct dev_backend_ops *ops, struct dev_backend *b,
                           const struct cdi_generate_opts *opts, struct cdi_spec_list *out);
void cdi_spec_list_release(struct cdi_spec_list *l);

/* ---- the writer of `devlet run` ---- */

struct cdi_backend {
        const struct dev_backend_ops *ops;
        struct dev_backend *backend;
};

/* Whether cfg's device-list strategy names CDI devices (cdi-annotations or
 * cdi-cri): only then does `devlet run` write specs. */
bool cdi_strategy_enabled(const struct devlet_config *cfg);

struct cdi_writer;

/* A writer of the backends' specs into cfg->cdi_spec_dir, as YAML, the
 * NVIDIA spec under CDI_NVIDIA_PLUGIN_KIND (the kind Allocate names).
 * backends is copied; cfg and the backends must outlive the writer.  It
 * writes nothing until cdi_writer_write(). */
struct cdi_writer *cdi_writer_new(const struct devlet_config *cfg,
                                  const struct cdi_backend *backends, size_t n);
/* Builds every spec and writes those whose bytes changed since the last
 * write (each atomically, mode 0644).  Call at start-up and whenever devices
 * change.  Logs what it writes, warnings and failures (once per distinct
 * message).  Returns 0, or the first -errno of a write that failed. */
int cdi_writer_write(struct cdi_writer *w);
/* The same, with the files written on libuv's thread pool so the loop never
 * waits for a disk: what to write is decided now, the outcome is logged when
 * the write completes.  A call while a batch is in flight asks for one more
 * afterwards. */
void cdi_writer_write_async(struct cdi_writer *w, uv_loop_t *loop);
/* Frees the writer now, or when its batch in flight completes (the loop must
 * then run on). */
void cdi_writer_free(struct cdi_writer *w);

#endif
