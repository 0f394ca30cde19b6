/* MPS as NVIDIA's plugin v0.20 lays it out, shared by `devlet run` (which
 * serves an MPS resource only while its control daemon is ready, and tells
 * containers where it is) and `devlet mps-control-daemon` (which runs the
 * daemons, cmd-mps.c):
 *
 *   <mps-root>/<resource>/pipe      CUDA_MPS_PIPE_DIRECTORY of the daemon
 *   <mps-root>/<resource>/log       CUDA_MPS_LOG_DIRECTORY
 *   <mps-root>/<resource>/.started  readiness marker, written once the
 *                                   daemon has its limits; the supervisor
 *                                   touches it every second, so a marker
 *                                   older than NVIDIA_MPS_STALE_MS means
 *                                   the supervisor is gone
 *   <mps-root>/shm                  the tmpfs clients get as /dev/shm
 *
 * Containers see the pipe directory at /mps/<resource>/pipe (NVIDIA's
 * container root).  Limits as NVIDIA derives them from the replica count:
 * active threads 100 / replicas percent, pinned device memory the GPU's
 * memory / replicas, in MiB.  Reads the filesystem only in
 * nvidia_mps_ready (the marker opened with fs_open_regular: never blocks,
 * regular files only); never logs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/nvidia.h"

char *nvidia_mps_path(const char *root, const char *resource, const char *leaf)
{
        size_t n = strlen(root);
        while (n > 1 && root[n - 1] == '/')
                n--;
        if (!resource)
                return xasprintf("%.*s/%s", (int)n, root, leaf);
        return xasprintf("%.*s/%s/%s", (int)n, root, resource, leaf);
}

bool nvidia_mps_ready(const char *root, const char *resource)
{
        if (!root || !root[0])
                return false;
        _cleanup_free_ char *marker = nvidia_mps_path(root, resource, NVIDIA_MPS_MARKER);
        _cleanup_close_ int fd = fs_open_regular(marker);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return false;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t age_ms = (int64_t)(now.tv_sec - st.st_mtim.tv_sec) * 1000 +
                         (now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
        return age_ms < NVIDIA_MPS_STALE_MS;
}

bool nvidia_mps_refresh(struct nvidia_backend *b)
{
        bool changed = false;
        for (size_t i = 0; i < b->layout.n_res; i++) {
                struct dev_resource *r = b->layout.res[i];
                struct nvidia_res *nr = r->backend_data;
                if (!nr->mps)
                        continue;
                bool ready = nvidia_mps_ready(b->ctx.mps_root, r->name);
                changed |= ready != nr->mps_ready;
                nr->mps_ready = ready;
        }
        return changed;
}

bool nvidia_backend_mps_ready(struct dev_backend *db)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        bool any = false;
        for (size_t i = 0; b && i < b->layout.n_res; i++) {
                const struct nvidia_res *nr = b->layout.res[i]->backend_data;
                if (!nr->mps)
                        continue;
                if (!nr->mps_ready)
                        return false;
                any = true;
        }
        return any;
}

unsigned nvidia_mps_thread_percentage(unsigned replicas)
{
        return replicas ? 100 / replicas : 100;
}

unsigned long long nvidia_mps_pinned_mib(unsigned long long memory_bytes, unsigned replicas)
{
        return replicas ? memory_bytes / replicas / (1024 * 1024) : memory_bytes / (1024 * 1024);
}

size_t nvidia_backend_mps_daemons(struct dev_backend *db, struct dev_sidecar_daemon **out)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        struct dev_sidecar_daemon *v = NULL;
        size_t n = 0;
        for (size_t i = 0; b && i < b->layout.n_res; i++) {
                const struct dev_resource *r = b->layout.res[i];
                const struct nvidia_res *nr = r->backend_data;
                if (!nr->mps)
                        continue;
                v = xrealloc(v, (n + 1) * sizeof(*v));
                struct dev_sidecar_daemon *m = &v[n++];
                *m = (struct dev_sidecar_daemon){ .root = xstrdup(b->ctx.mps_root),
                                                 .resource = xstrdup(r->name),
                                                 .visible_devices = xstrdup(""),
                                                 .setup = xcalloc(1, sizeof(char *)),
                                                 .replicas = nr->replicas,
                                                 .max_clients = 48,
                                                 .pipe_dir = nvidia_mps_path(b->ctx.mps_root,
                                                                             r->name, "pipe"),
                                                 .log_dir = nvidia_mps_path(b->ctx.mps_root,
                                                                            r->name, "log"),
                                                 .marker = nvidia_mps_path(b->ctx.mps_root, r->name,
                                                                           NVIDIA_MPS_MARKER),
                                                 .shm_dir = nvidia_mps_path(b->ctx.mps_root, NULL,
                                                                            "shm") };
                for (size_t k = 0; b->ctx.program_roots && b->ctx.program_roots[k]; k++)
                        m->program_roots = strv_push(m->program_roots, b->ctx.program_roots[k]);
                size_t *gpus = xcalloc(r->n_devices + 1, sizeof(*gpus));
                size_t n_gpus = 0;
                for (size_t k = 0; k < r->n_devices; k++) {
                        const struct nvidia_dev *nd = r->devices[k].priv;
                        bool seen = false;
                        for (size_t j = 0; j < n_gpus; j++)
                                seen |= gpus[j] == nd->gpu;
                        if (!seen)
                                gpus[n_gpus++] = nd->gpu;
                }
                /* CUDA_VISIBLE_DEVICES renumbers the resource's GPUs from 0 */
                for (size_t j = 0; j < n_gpus; j++) {
                        const struct nvml_gpu *g = &b->inv->gpus[gpus[j]];
                        char *t = xasprintf("%s%s%s", m->visible_devices, j ? "," : "", g->uuid);
                        free(m->visible_devices);
                        m->visible_devices = t;
                        /* an MPS server takes 48 clients, 16 on GPUs NVIDIA
                         * counts as older than 7.5 */
                        bool old = g->cc_major >= 0 &&
                                   (g->cc_major < 7 || (g->cc_major == 7 && g->cc_minor < 5));
                        if (old)
                                m->max_clients = 16;
                        if (!g->memory_bytes)
                                continue;
                        _cleanup_free_ char *cmd = xasprintf(
                                "set_default_device_pinned_mem_limit %zu %lluM", j,
                                nvidia_mps_pinned_mib(g->memory_bytes, nr->replicas));
                        m->setup = strv_push(m->setup, cmd);
                }
                m->thread_percentage = nvidia_mps_thread_percentage(nr->replicas);
                _cleanup_free_ char *cmd = xasprintf("set_default_active_thread_percentage %u",
                                                     m->thread_percentage);
                m->setup = strv_push(m->setup, cmd);
                free(gpus);
        }
        *out = v;
        return n;
}

struct dev_sidecar_claims *nvidia_backend_mps_claims(struct dev_backend *db)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        if (!b || !b->ctx.mps_root || !b->ctx.mps_root[0])
                return NULL;
        struct dev_sidecar_claims *c = xcalloc(1, sizeof(*c));
        c->root = xstrdup(b->ctx.mps_root);
        c->dir = nvidia_mps_path(b->ctx.mps_root, NULL, NVIDIA_MPS_CLAIMS_DIR);
        c->daemon_prefix = nvidia_mps_path(b->ctx.mps_root, NULL, NVIDIA_MPS_CLAIM_PREFIX);
        c->marker_name = xstrdup(NVIDIA_MPS_MARKER);
        c->shm_dir = nvidia_mps_path(b->ctx.mps_root, NULL, "shm");
        c->program_roots = strv_copy((const char *const *)b->ctx.program_roots);
        return c;
}
