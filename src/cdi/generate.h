/* The CDI specs of running backends, and the writer of `devlet run`. */
#ifndef DEVLET_CDI_GENERATE_H
#define DEVLET_CDI_GENERATE_H

#include <uv.h>

#include "cdi/cdi.h"

/* Appends the specs of backend b (created by ops) to out, and a warning for
 * each resource or device left out: the backend's `cdi_specs` member, or
 * one spec per resource (cdi_spec_from_resource) for a backend without. */
void cdi_specs_for_backend(const struct dev_backend_ops *ops, struct dev_backend *b,
                           const struct dev_cdi_opts *opts, struct cdi_spec_list *out);

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
 * GPU families' specs under the kinds their Allocate names.
 * backends is copied; cfg and the backends must outlive the writer.  It
 * writes nothing until cdi_writer_write(). */
struct cdi_writer *cdi_writer_new(const struct devlet_config *cfg,
                                  const struct cdi_backend *backends, size_t n);
/* Builds every spec and writes those whose bytes changed since the last
 * write (each atomically, mode 0644).  Call at start-up and whenever devices
 * change.  Logs what it writes and failures (once per distinct message),
 * and each warning once per process.  Returns 0, or the first -errno of a
 * write that failed. */
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
