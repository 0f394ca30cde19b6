/* Allocate and GetPreferredAllocation for the NVIDIA resources.
 *
 * Allocate answers the way NVIDIA's plugin does, per device list strategy:
 *   envvar           NVIDIA_VISIBLE_DEVICES=<id>,<id>
 *   volume-mounts    NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices
 *                    and /dev/null mounted at .../<id> for each ID
 *   cdi-annotations  <prefix>nvidia-device-plugin_<random uuid> =
 *                    k8s.device-plugin.nvidia.com/gpu=<id>,... (one fresh UUID
 *                    per container response, as NVIDIA's)
 *   cdi-cri          the same names as CDI devices
 * where <id> is the UUID or the index (--device-id-strategy), replica
 * suffixes stripped and each device named once, in the order requested
 * (NVIDIA repeats a GPU once per replica).  When every strategy is a CDI
 * one, nothing else is added (NVIDIA's current behaviour); otherwise
 * pass-device-specs adds /dev/nvidiactl, /dev/nvidia-uvm,
 * /dev/nvidia-uvm-tools and /dev/nvidia-modeset when they exist under the
 * dev root, then /dev/nvidia<minor> of each GPU and, for MIG devices, the
 * GPU and compute instance capability nodes under /dev/nvidia-caps; and
 * NVIDIA_GDS, NVIDIA_MOFED, NVIDIA_GDRCOPY=enabled when asked (with CDI,
 * their gds/mofed/gdrcopy=all devices instead).  IMEX channel 0, when
 * configured and present, goes with every GPU as NVIDIA's: NVIDIA_IMEX_CHANNELS=0
 * (envvar), /dev/null at .../imex/0 (volume-mounts), its node (device specs),
 * the CDI device imex-channel=0.
 *
 * MPS resources add, whatever the strategy, the control daemon's pipe
 * directory and shm mounts and CUDA_MPS_PIPE_DIRECTORY,
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
 *
 * Refusals carry NVIDIA's words: an unknown ID, more than one replica when
 * failRequestsGreaterThanOne is set (always with MPS); devlet also refuses
 * unhealthy IDs.
 *
 * GetPreferredAllocation: whole GPUs by alloc_best_set() over the
 * inventory's topology (NVLink, then PCIe); replicas by
 * alloc_replicas_choose() with sharedDevicesAllocationPolicy; anything else
 * (MIG devices) by dev_preferred_generic().  Unknown and unhealthy available
 * IDs are skipped.  Runs on the loop; never touches NVML. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/nvidia.h"

void nvidia_random_uuid(char out[37])
{
        unsigned char b[16] = { 0 };
        size_t got = 0;
        while (got < sizeof(b)) {
                ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        if (got < sizeof(b)) {
                _cleanup_close_ int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
                if (fd >= 0 && read(fd, b, sizeof(b)) < 0)
                        got = 0;
        }
        b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
        b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
        snprintf(out, 37,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
}

/* ---- Allocate ---- */

static const struct nvidia_ctx *ctx_of(const struct dev_resource *r)
{
        return ((const struct nvidia_res *)r->backend_data)->ctx;
}

/* The runtime IDs, each once, in request order. */
static char **runtime_ids(const struct nvidia_dev *const *ds, size_t n)
{
        char **ids = xcalloc(1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                if (!strv_contains(ids, ds[i]->runtime_id))
                        ids = strv_push(ids, ds[i]->runtime_id);
        return ids;
}

static char *strv_join(char *const *v, const char *sep)
{
        size_t len = 1;
        for (size_t i = 0; v[i]; i++)
                len += strlen(v[i]) + strlen(sep);
        char *s = xcalloc(len, 1);
        for (size_t i = 0; v[i]; i++) {
                if (i)
                        strcat(s, sep);
                strcat(s, v[i]);
        }
        return s;
}

static void cdi_add(const struct nvidia_ctx *c, char *const *ids, struct dev_alloc *out)
{
        _cleanup_strv_free_ char **names = xcalloc(1, sizeof(char *));
        for (size_t i = 0; ids[i]; i++) {
                _cleanup_free_ char *n = xasprintf(NVIDIA_CDI_VENDOR "/gpu=%s", ids[i]);
                names = strv_push(names, n);
        }
        if (c->gds)
                names = strv_push(names, NVIDIA_CDI_VENDOR "/gds=all");
        if (c->mofed)
                names = strv_push(names, NVIDIA_CDI_VENDOR "/mofed=all");
        if (c->gdrcopy)
                names = strv_push(names, NVIDIA_CDI_VENDOR "/gdrcopy=all");
        if (c->imex_channel0)
                names = strv_push(names, NVIDIA_CDI_VENDOR "/imex-channel=0");
        if (c->list_cdi_annotations) {
                char uuid[37];
                nvidia_random_uuid(uuid);
                _cleanup_free_ char *key =
                    xasprintf("%snvidia-device-plugin_%s", c->cdi_annotation_prefix, uuid);
                _cleanup_free_ char *value = strv_join(names, ",");
                dev_alloc_set_annotation(out, key, value);
        }
        if (c->list_cdi_cri)
                for (size_t i = 0; names[i]; i++)
                        dev_alloc_add_cdi(out, names[i]);
}

/* MPS clients: the daemon's pipe directory and the shared /dev/shm, and
 * NVIDIA's limits (threads 100 / replicas; pinned memory per GPU, numbered
 * as the container sees its GPUs). */
static void mps_add(const struct dev_resource *r, const struct nvidia_dev *const *ds, size_t n,
                    struct dev_alloc *out)
{
        const struct nvidia_res *nr = r->backend_data;
        if (!nr->mps)
                return;
        const struct nvidia_ctx *c = nr->ctx;
        _cleanup_free_ char *ctr_pipe = nvidia_mps_path(NVIDIA_MPS_CONTAINER_ROOT, r->name, "pipe");
        _cleanup_free_ char *host_pipe = nvidia_mps_path(c->mps_root, r->name, "pipe");
        _cleanup_free_ char *host_shm = nvidia_mps_path(c->mps_root, NULL, "shm");
        dev_alloc_set_env(out, "CUDA_MPS_PIPE_DIRECTORY", ctr_pipe);
        char pct[16];
        snprintf(pct, sizeof(pct), "%u", nvidia_mps_thread_percentage(nr->replicas));
        dev_alloc_set_env(out, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", pct);
        _cleanup_free_ char *limits = xstrdup("");
        size_t seen[64], n_seen = 0;
        for (size_t i = 0; i < n && n_seen < ARRAY_SIZE(seen); i++) {
                bool dup = false;
                for (size_t j = 0; j < n_seen; j++)
                        dup |= seen[j] == ds[i]->gpu;
                const struct nvml_gpu *g = &c->inv->gpus[ds[i]->gpu];
                if (dup || !g->memory_bytes)
                        continue;
                char *t = xasprintf("%s%s%zu=%lluM", limits, n_seen ? "," : "", n_seen,
                                    nvidia_mps_pinned_mib(g->memory_bytes, nr->replicas));
                free(limits);
                limits = t;
                seen[n_seen++] = ds[i]->gpu;
        }
        if (limits[0])
                dev_alloc_set_env(out, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", limits);
        dev_alloc_add_mount(out, host_pipe, ctr_pipe, false);
        dev_alloc_add_mount(out, host_shm, "/dev/shm", false);
}

static void node_if_present(const struct nvidia_ctx *c, const char *ctr, struct dev_alloc *out)
{
        _cleanup_free_ char *host = xasprintf("%s%s", c->dev_root, ctr);
        struct stat st;
        if (stat(host, &st) == 0)
                dev_alloc_add_node(out, host, ctr, "rw");
}

static void node_add(const struct nvidia_ctx *c, const char *ctr, struct dev_alloc *out)
{
        _cleanup_free_ char *host = xasprintf("%s%s", c->dev_root, ctr);
        dev_alloc_add_node(out, host, ctr, "rw");
}

static int device_specs(const struct nvidia_ctx *c, const struct dev_device *const *devs,
                        const struct nvidia_dev *const *ds, size_t n, struct dev_alloc *out,
                        struct diag *diag)
{
        static const char *const control[] = { "/dev/nvidiactl", "/dev/nvidia-uvm",
                                               "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset" };
        for (size_t i = 0; i < n; i++) {
                const struct nvml_gpu *g = &c->inv->gpus[ds[i]->gpu];
                const struct nvml_mig_dev *m = ds[i]->mig >= 0 ? &g->migs[ds[i]->mig] : NULL;
                if (g->minor < 0)
                        return diag_set(diag, -EINVAL,
                                        "cannot pass the device nodes of %s: NVML gave no "
                                        "minor number for GPU %u", devs[i]->id, g->index);
                if (m && (m->gi_cap < 0 || m->ci_cap < 0))
                        return diag_set(diag, -EINVAL,
                                        "cannot pass the device nodes of %s: gpu%d/gi%u%s is "
                                        "not in nvidia-caps/mig-minors", devs[i]->id, g->minor,
                                        m->gi, m->gi_cap < 0 ? "" : "/ci");
        }
        for (size_t i = 0; i < ARRAY_SIZE(control); i++)
                node_if_present(c, control[i], out);
        for (size_t i = 0; i < n; i++) {
                const struct nvml_gpu *g = &c->inv->gpus[ds[i]->gpu];
                char path[64];
                snprintf(path, sizeof(path), "/dev/nvidia%d", g->minor);
                node_add(c, path, out);
                if (ds[i]->mig < 0)
                        continue;
                const struct nvml_mig_dev *m = &g->migs[ds[i]->mig];
                snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", m->gi_cap);
                node_add(c, path, out);
                snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", m->ci_cap);
                node_add(c, path, out);
        }
        return 0;
}

static int nvidia_allocate(struct dev_resource *r, char *const *ids, size_t n,
                           struct dev_alloc *out, struct diag *diag)
{
        const struct nvidia_ctx *c = ctx_of(r);
        _cleanup_free_ const struct dev_device **devs = xcalloc(n + 1, sizeof(*devs));
        _cleanup_free_ const struct nvidia_dev **ds = xcalloc(n + 1, sizeof(*ds));
        bool replicas = false;
        for (size_t i = 0; i < n; i++) {
                devs[i] = dev_resource_find(r, ids[i]);
                if (!devs[i])
                        return diag_set(diag, -EINVAL, "invalid request: unknown device: %s",
                                        ids[i]);
                if (devs[i]->health != DEV_HEALTHY)
                        return diag_set(diag, -EINVAL, "invalid request: device %s is unhealthy",
                                        ids[i]);
                ds[i] = devs[i]->priv;
                replicas |= ds[i]->replica >= 0;
        }
        if (replicas && n > 1 &&
            (c->sharing == SHARING_MPS ||
             (c->sharing == SHARING_TIME_SLICING && c->fail_requests_greater_than_one)))
                return diag_set(diag, -EINVAL,
                                "invalid request: maximum request size for shared resources is "
                                "1; found %zu", n);

        struct dev_alloc a = { 0 };
        _cleanup_strv_free_ char **rids = runtime_ids(ds, n);
        if (c->list_cdi_annotations || c->list_cdi_cri)
                cdi_add(c, rids, &a);
        mps_add(r, ds, n, &a);
        bool only_cdi = !c->list_envvar && !c->list_volume_mounts;
        int rc = 0;
        if (!only_cdi) {
                if (c->list_envvar) {
                        _cleanup_free_ char *v = strv_join(rids, ",");
                        dev_alloc_set_env(&a, "NVIDIA_VISIBLE_DEVICES", v);
                        if (c->imex_channel0)
                                dev_alloc_set_env(&a, "NVIDIA_IMEX_CHANNELS", "0");
                }
                if (c->list_volume_mounts) {
                        dev_alloc_set_env(&a, "NVIDIA_VISIBLE_DEVICES", NVIDIA_DEVICE_LIST_ROOT);
                        for (size_t i = 0; rids[i]; i++) {
                                _cleanup_free_ char *ctr =
                                    xasprintf(NVIDIA_DEVICE_LIST_ROOT "/%s", rids[i]);
                                dev_alloc_add_mount(&a, "/dev/null", ctr, false);
                        }
                        if (c->imex_channel0)
                                dev_alloc_add_mount(&a, "/dev/null",
                                                    NVIDIA_DEVICE_LIST_ROOT "/imex/0", false);
                }
                if (c->pass_device_specs)
                        rc = device_specs(c, devs, ds, n, &a, diag);
                if (rc == 0 && c->pass_device_specs && c->imex_channel0)
                        node_add(c, NVIDIA_IMEX_CHANNEL0, &a);
                if (c->gds)
                        dev_alloc_set_env(&a, "NVIDIA_GDS", "enabled");
                if (c->mofed)
                        dev_alloc_set_env(&a, "NVIDIA_MOFED", "enabled");
                if (c->gdrcopy)
                        dev_alloc_set_env(&a, "NVIDIA_GDRCOPY", "enabled");
        }
        if (rc < 0) {
                dev_alloc_release(&a);
                return rc;
        }
        dev_alloc_release(out);
        *out = a;
        return 0;
}

/* ---- GetPreferredAllocation ---- */

struct pref {
        struct dev_resource *r;
        char *const *ids;                /* per candidate: the ID */
        const struct nvidia_dev **ds;    /* per candidate */
        size_t n;
        size_t *must;                    /* candidate indices */
        size_t n_must;
};

static ssize_t pref_find(const struct pref *p, const char *id)
{
        for (size_t i = 0; i < p->n; i++)
                if (strcmp(p->ids[i], id) == 0)
                        return (ssize_t)i;
        return -1;
}

/* Candidates: the must IDs (each must be known), then the healthy known
 * available IDs; each once. */
static int pref_collect(struct pref *p, char *const *available, size_t n_available,
                        char *const *must, size_t n_must, char **cand)
{
        for (size_t i = 0; i < n_must; i++) {
                const struct dev_device *d = dev_resource_find(p->r, must[i]);
                if (!d)
                        return -EINVAL;
                ssize_t k = pref_find(p, must[i]);
                if (k >= 0)
                        continue;
                cand[p->n] = must[i];
                p->ds[p->n] = d->priv;
                p->must[p->n_must++] = p->n++;
        }
        for (size_t i = 0; i < n_available; i++) {
                const struct dev_device *d = dev_resource_find(p->r, available[i]);
                if (!d || d->health != DEV_HEALTHY || pref_find(p, available[i]) >= 0)
                        continue;
                cand[p->n] = available[i];
                p->ds[p->n++] = d->priv;
        }
        return 0;
}

static char **answer_of(const struct pref *p, const size_t *idx, size_t n)
{
        char **ids = xcalloc(1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                ids = strv_push(ids, p->ids[idx[i]]);
        return ids;
}

static int preferred_gpus(struct pref *p, size_t size, char ***out)
{
        const struct nvml_inventory *inv = ctx_of(p->r)->inv;
        _cleanup_free_ size_t *avail = xcalloc(p->n + 1, sizeof(size_t));
        _cleanup_free_ size_t *must = xcalloc(p->n_must + 1, sizeof(size_t));
        _cleanup_free_ size_t *chosen = xcalloc(size + p->n_must + 1, sizeof(size_t));
        _cleanup_free_ size_t *back = xcalloc(inv->n_gpus + 1, sizeof(size_t));
        for (size_t i = 0; i < p->n; i++) {
                avail[i] = p->ds[i]->gpu;
                back[p->ds[i]->gpu] = i;
        }
        for (size_t i = 0; i < p->n_must; i++)
                must[i] = p->ds[p->must[i]]->gpu;
        int n = alloc_best_set(inv->topology, avail, p->n, must, p->n_must, size, chosen);
        if (n < 0)
                return n;
        for (int i = 0; i < n; i++)
                chosen[i] = back[chosen[i]];
        *out = answer_of(p, chosen, (size_t)n);
        return 0;
}

static int preferred_replicas(struct pref *p, size_t size, enum alloc_replica_policy policy,
                              char ***out)
{
        _cleanup_free_ struct alloc_replica *avail = xcalloc(p->n + 1, sizeof(*avail));
        _cleanup_free_ size_t *chosen = xcalloc(size + p->n_must + 1, sizeof(size_t));
        for (size_t i = 0; i < p->n; i++) {
                avail[i].gpu = p->ds[i]->unit;
                avail[i].replica = p->ds[i]->replica >= 0 ? (unsigned)p->ds[i]->replica : 0;
        }
        int n = alloc_replicas_choose(policy, avail, p->n, p->must, p->n_must, size, chosen);
        if (n < 0)
                return n;
        *out = answer_of(p, chosen, (size_t)n);
        return 0;
}

static int nvidia_preferred(struct dev_resource *r, char *const *available, size_t n_available,
                            char *const *must, size_t n_must, size_t size, char ***out)
{
        const struct nvidia_res *nr = r->backend_data;
        if (!nr->has_replicas && !nr->whole_gpus_only)
                return dev_preferred_generic(r, available, n_available, must, n_must, size, out);
        size_t cap = n_available + n_must + 1;
        _cleanup_free_ char **cand = xcalloc(cap, sizeof(char *));
        _cleanup_free_ const struct nvidia_dev **ds = xcalloc(cap, sizeof(*ds));
        _cleanup_free_ size_t *mustv = xcalloc(cap, sizeof(size_t));
        struct pref p = { .r = r, .ids = cand, .ds = ds, .must = mustv };
        int rc = pref_collect(&p, available, n_available, must, n_must, cand);
        if (rc < 0)
                return rc;
        if (size < p.n_must) {
                /* the kubelet's own constraint is broken: answer its must IDs */
                *out = answer_of(&p, p.must, p.n_must);
                return 0;
        }
        if (nr->has_replicas)
                return preferred_replicas(&p, size, ctx_of(r)->replica_policy, out);
        return preferred_gpus(&p, size, out);
}

const struct dev_resource_ops nvidia_resource_ops = {
        .claim_config = &nvidia_claim_config_ops,
        .allocate = nvidia_allocate,
        .preferred = nvidia_preferred,
};
