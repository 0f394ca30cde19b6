/* gpu.nvidia.com's opaque claim configurations, as NVIDIA's DRA driver
 * takes them (resource.nvidia.com/v1beta1):
 *
 *   GpuConfig / MigDeviceConfig
 *     sharing:
 *       strategy: TimeSlicing | MPS
 *       timeSlicingConfig: {interval: Default | Short | Medium | Long}
 *       mpsConfig: {defaultActiveThreadPercentage: 0..100,
 *                   defaultPinnedDeviceMemoryLimit: <quantity>,
 *                   defaultPerDevicePinnedMemoryLimit: {<UUID or index>: <quantity>}}
 *
 * Decoded strictly (an unknown field is named, as NVIDIA's strict decoder
 * does), each fault a message with the field's path, which the kubelet puts
 * into the pod's events.  A GpuConfig configures whole GPUs and a
 * MigDeviceConfig MIG devices; one naming no request leaves devices of the
 * other kind alone, one naming requests refuses them.
 *
 * TimeSlicing: NVML has no call for the compute time-slice outside vGPU, so
 * as NVIDIA's driver does, `nvidia-smi compute-policy -i <UUID>
 * --set-timeslice <0..3>` (found under the driver roots, then PATH) for
 * each GPU; where nvidia-smi is missing or the GPU refuses (MIG devices
 * have no time-slice of their own), the claim is prepared and a warning
 * says what was not applied.
 *
 * MPS: one control daemon per claim, run by devlet's MPS sidecar (`devlet
 * mps-control-daemon`, the supervisor of the node-wide daemons too).  The
 * claim's request is a file the sidecar reads, <mps-root>/claims/<uid>.json
 * ({"devices": [UUIDs], "commands": [the limits as control commands]});
 * the sidecar starts the daemon with those limits and writes its marker,
 * <mps-root>/claim-<uid>/.started, which prepare waits for.  Containers get
 * the claim's pipe directory and the sidecar's shm, as MPS resources do. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/run.h"
#include "base/xalloc.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvidia.h"

#define API_VERSION "resource.nvidia.com/v1beta1"
#define SMI_TIMEOUT_MS 10000
#define MPS_START_MS 20000 /* the sidecar's turn is a second; its start takes a few */
#define MPS_POLL_MS 50 /* the wait's longest pause; it starts at 1 ms and doubles */

struct cc_dev {
        char *id;
        char *uuid;
        bool mig;
};

struct cc_ctx {
        struct cc_dev *devs;
        size_t n;
        char **program_roots;
        char *mps_root; /* "" when --mps-root is empty */
};

static void *cc_ctx_new(const struct dev_resource *r)
{
        const struct nvidia_res *nr = r->backend_data;
        const struct nvidia_ctx *c = nr->ctx;
        struct cc_ctx *x = xcalloc(1, sizeof(*x));
        x->devs = xcalloc(r->n_devices ? r->n_devices : 1, sizeof(*x->devs));
        for (size_t i = 0; i < r->n_devices; i++) {
                const struct nvidia_dev *nd = r->devices[i].priv;
                const struct nvml_gpu *g = &c->inv->gpus[nd->gpu];
                x->devs[x->n++] = (struct cc_dev){
                        xstrdup(r->devices[i].id),
                        xstrdup(nd->mig < 0 ? g->uuid : g->migs[nd->mig].uuid), nd->mig >= 0
                };
        }
        x->program_roots = strv_copy((const char *const *)c->program_roots);
        x->mps_root = xstrdup(c->mps_root ? c->mps_root : "");
        return x;
}

static void cc_ctx_free(void *p)
{
        struct cc_ctx *x = p;
        if (!x)
                return;
        for (size_t i = 0; i < x->n; i++) {
                free(x->devs[i].id);
                free(x->devs[i].uuid);
        }
        free(x->devs);
        strv_free(x->program_roots);
        free(x->mps_root);
        free(x);
}

static const struct cc_dev *dev_of(const struct cc_ctx *x, const char *id)
{
        for (size_t i = 0; i < x->n; i++)
                if (strcmp(x->devs[i].id, id) == 0)
                        return &x->devs[i];
        return NULL;
}

/* ---- decoding ---- */

/* obj's members all among allowed (NULL-terminated); else -EINVAL naming
 * the first that is not. */
static int only_fields(const json_t *obj, const char *path, const char *const *allowed,
                       const char *where, struct diag *diag)
{
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)(uintptr_t)obj, key, v) {
                bool ok = false;
                for (size_t i = 0; allowed[i] && !ok; i++)
                        ok = strcmp(key, allowed[i]) == 0;
                if (!ok)
                        return diag_set(diag, -EINVAL, "%s: %s.%.64s: unknown field", where, path,
                                        key);
        }
        return 0;
}

/* A Kubernetes quantity ("10Gi", "512M", "1.5G", "1e9") in bytes; false
 * for what is not one, or is negative or past 2^62. */
bool nvidia_quantity_bytes(const char *s, unsigned long long *out)
{
        size_t n = strlen(s);
        if (n == 0 || n > 64)
                return false;
        const char *p = s;
        if (*p == '+')
                p++;
        const char *num = p;
        bool digits = false;
        while (*p >= '0' && *p <= '9')
                p++, digits = true;
        if (*p == '.') {
                p++;
                while (*p >= '0' && *p <= '9')
                        p++, digits = true;
        }
        if (!digits)
                return false;
        char numbuf[72];
        snprintf(numbuf, sizeof(numbuf), "%.*s", (int)(p - num), num);
        long double v = strtold(numbuf, NULL);
        static const struct {
                const char *suffix;
                long double factor;
        } units[] = {
                { "Ki", 1024.0L }, { "Mi", 1048576.0L }, { "Gi", 1073741824.0L },
                { "Ti", 1099511627776.0L }, { "Pi", 1125899906842624.0L },
                { "Ei", 1152921504606846976.0L }, { "k", 1e3L }, { "M", 1e6L }, { "G", 1e9L },
                { "T", 1e12L }, { "P", 1e15L }, { "E", 1e18L }, { "m", 1e-3L }, { "", 1.0L },
        };
        long double factor = 0;
        if (*p == 'e' || *p == 'E') {
                /* a decimal exponent; "E" alone is exa, handled below */
                const char *q = p + 1;
                if (*q == '+' || *q == '-')
                        q++;
                if (*q >= '0' && *q <= '9') {
                        char *end = NULL;
                        long e = strtol(p + 1, &end, 10);
                        if (*end || e > 30 || e < -30)
                                return false;
                        factor = powl(10.0L, (long double)e);
                        p = end;
                }
        }
        for (size_t i = 0; factor == 0 && i < sizeof(units) / sizeof(units[0]); i++)
                if (strcmp(p, units[i].suffix) == 0) {
                        factor = units[i].factor;
                        p += strlen(units[i].suffix);
                }
        if (factor == 0 || *p)
                return false;
        long double bytes = v * factor;
        if (bytes < 0 || bytes > 4611686018427387904.0L)
                return false;
        *out = (unsigned long long)ceill(bytes);
        return true;
}

enum cc_strategy { CC_NONE, CC_TIMESLICING, CC_MPS };

struct cc_config {
        bool mig_kind; /* MigDeviceConfig */
        enum cc_strategy strategy;
        int interval; /* 0..3 */
        int thread_percentage; /* -1: not set */
        unsigned long long pinned_default_mib; /* 0: not set */
        const json_t *per_device;              /* defaultPerDevicePinnedMemoryLimit */
};

static int quantity_mib(const json_t *v, const char *path, const char *where,
                        unsigned long long *mib, struct diag *diag)
{
        unsigned long long bytes = 0;
        if (!json_is_string(v) || !nvidia_quantity_bytes(json_string_value(v), &bytes))
                return diag_set(diag, -EINVAL, "%s: %s: not a quantity (such as 10Gi)", where, path);
        if (bytes / 1048576 == 0)
                return diag_set(diag, -EINVAL, "%s: %s: %s is below 1Mi", where, path,
                                json_string_value(v));
        *mib = bytes / 1048576;
        return 0;
}

static int decode(const struct dev_claim_config *c, struct cc_config *out, struct diag *diag)
{
        const char *where = c->where;
        const json_t *p = c->parameters;
        *out = (struct cc_config){ .thread_percentage = -1 };
        if (!json_is_object(p))
                return diag_set(diag, -EINVAL, "%s: parameters: not an object", where);
        const json_t *av = json_object_get(p, "apiVersion"), *kind = json_object_get(p, "kind");
        if (!json_is_string(av) || strcmp(json_string_value(av), API_VERSION) != 0)
                return diag_set(diag, -EINVAL, "%s: .apiVersion: %s%.64s%s, not " API_VERSION,
                                where, json_is_string(av) ? "\"" : "",
                                json_is_string(av) ? json_string_value(av) : "missing",
                                json_is_string(av) ? "\"" : "");
        const char *k = json_is_string(kind) ? json_string_value(kind) : "";
        if (strcmp(k, "MigDeviceConfig") == 0)
                out->mig_kind = true;
        else if (strcmp(k, "GpuConfig") != 0)
                return diag_set(diag, -EINVAL,
                                "%s: .kind: \"%.64s\" is not served by devlet (GpuConfig or "
                                "MigDeviceConfig)",
                                where, k);
        static const char *const top[] = { "apiVersion", "kind", "sharing", NULL };
        int r = only_fields(p, "", top, where, diag);
        if (r < 0)
                return r;
        const json_t *sharing = json_object_get(p, "sharing");
        if (!sharing || json_is_null(sharing))
                return 0;
        if (!json_is_object(sharing))
                return diag_set(diag, -EINVAL, "%s: .sharing: not an object", where);
        static const char *const sh[] = { "strategy", "timeSlicingConfig", "mpsConfig", NULL };
        if ((r = only_fields(sharing, ".sharing", sh, where, diag)) < 0)
                return r;
        const json_t *st = json_object_get(sharing, "strategy");
        const char *s = json_is_string(st) ? json_string_value(st) : NULL;
        const json_t *ts = json_object_get(sharing, "timeSlicingConfig");
        const json_t *mps = json_object_get(sharing, "mpsConfig");
        if (ts && json_is_null(ts))
                ts = NULL;
        if (mps && json_is_null(mps))
                mps = NULL;
        if (!s)
                return diag_set(diag, -EINVAL, "%s: .sharing.strategy: missing (TimeSlicing or MPS)",
                                where);
        if (strcmp(s, "TimeSlicing") == 0)
                out->strategy = CC_TIMESLICING;
        else if (strcmp(s, "MPS") == 0)
                out->strategy = CC_MPS;
        else if (strcmp(s, "Fabric") == 0)
                return diag_set(diag, -EINVAL,
                                "%s: .sharing.strategy: the Fabric strategy is not enabled", where);
        else
                return diag_set(diag, -EINVAL,
                                "%s: .sharing.strategy: unknown GPU sharing strategy \"%.64s\" "
                                "(TimeSlicing or MPS)",
                                where, s);
        if (out->strategy == CC_TIMESLICING) {
                if (mps)
                        return diag_set(diag, -EINVAL,
                                        "%s: .sharing.mpsConfig: cannot be used with the "
                                        "TimeSlicing strategy",
                                        where);
                if (out->mig_kind && ts)
                        return diag_set(diag, -EINVAL,
                                        "%s: .sharing.timeSlicingConfig: MIG devices take no "
                                        "time-slicing settings",
                                        where);
                if (!ts)
                        return 0;
                if (!json_is_object(ts))
                        return diag_set(diag, -EINVAL, "%s: .sharing.timeSlicingConfig: not an "
                                                       "object",
                                        where);
                static const char *const tsf[] = { "interval", NULL };
                if ((r = only_fields(ts, ".sharing.timeSlicingConfig", tsf, where, diag)) < 0)
                        return r;
                const json_t *iv = json_object_get(ts, "interval");
                if (!iv || json_is_null(iv))
                        return 0;
                static const char *const names[] = { "Default", "Short", "Medium", "Long" };
                const char *ivs = json_is_string(iv) ? json_string_value(iv) : "";
                out->interval = -1;
                for (int i = 0; i < 4; i++)
                        if (strcmp(ivs, names[i]) == 0)
                                out->interval = i;
                if (out->interval < 0)
                        return diag_set(diag, -EINVAL,
                                        "%s: .sharing.timeSlicingConfig.interval: unknown "
                                        "time-slice interval \"%.64s\" (Default, Short, Medium "
                                        "or Long)",
                                        where, ivs);
                return 0;
        }
        if (ts)
                return diag_set(diag, -EINVAL,
                                "%s: .sharing.timeSlicingConfig: cannot be used with the MPS "
                                "strategy",
                                where);
        if (!mps)
                return 0;
        if (!json_is_object(mps))
                return diag_set(diag, -EINVAL, "%s: .sharing.mpsConfig: not an object", where);
        static const char *const mf[] = { "defaultActiveThreadPercentage",
                                          "defaultPinnedDeviceMemoryLimit",
                                          "defaultPerDevicePinnedMemoryLimit", NULL };
        if ((r = only_fields(mps, ".sharing.mpsConfig", mf, where, diag)) < 0)
                return r;
        const json_t *pct = json_object_get(mps, "defaultActiveThreadPercentage");
        if (pct && !json_is_null(pct)) {
                if (!json_is_integer(pct))
                        return diag_set(diag, -EINVAL,
                                        "%s: .sharing.mpsConfig.defaultActiveThreadPercentage: "
                                        "not an integer",
                                        where);
                json_int_t v = json_integer_value(pct);
                if (v < 0)
                        return diag_set(diag, -EINVAL,
                                        "%s: .sharing.mpsConfig.defaultActiveThreadPercentage: "
                                        "active thread percentage must not be negative",
                                        where);
                if (v > 100)
                        return diag_set(diag, -EINVAL,
                                        "%s: .sharing.mpsConfig.defaultActiveThreadPercentage: "
                                        "active thread percentage must not be greater than 100",
                                        where);
                out->thread_percentage = (int)v;
        }
        const json_t *pin = json_object_get(mps, "defaultPinnedDeviceMemoryLimit");
        if (pin && !json_is_null(pin) &&
            (r = quantity_mib(pin, ".sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", where,
                              &out->pinned_default_mib, diag)) < 0)
                return r;
        const json_t *per = json_object_get(mps, "defaultPerDevicePinnedMemoryLimit");
        if (per && !json_is_null(per)) {
                if (!json_is_object(per))
                        return diag_set(diag, -EINVAL,
                                        "%s: .sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: "
                                        "not an object",
                                        where);
                out->per_device = per;
        }
        return 0;
}

/* ---- time-slicing ---- */

static void timeslice_apply(const struct cc_ctx *x, const struct dev_claim_config *c,
                            const struct cc_dev *const *ds, size_t n, int interval)
{
        _cleanup_free_ char *smi = run_find_program(x->program_roots, "nvidia-smi");
        for (size_t i = 0; i < n; i++) {
                if (ds[i]->mig) {
                        log_warn("nvidia", "time-slice not applied claim_uid=%s device=%s "
                                           "reason=\"a MIG device has no time-slice of its own\"",
                                 c->claim_uid, ds[i]->uuid);
                        continue;
                }
                if (!smi) {
                        log_warn("nvidia", "time-slice not applied claim_uid=%s device=%s "
                                           "reason=\"nvidia-smi not found under the driver root "
                                           "nor on PATH\"",
                                 c->claim_uid, ds[i]->uuid);
                        continue;
                }
                char level[4];
                snprintf(level, sizeof(level), "%d", interval);
                char a_policy[] = "compute-policy", a_i[] = "-i", a_set[] = "--set-timeslice";
                char *argv[] = { smi, a_policy, a_i, ds[i]->uuid, a_set, level, NULL };
                _cleanup_free_ char *output = NULL;
                struct diag why = { 0 };
                int st = run_program(argv, NULL, SMI_TIMEOUT_MS, &output, &why);
                if (st != 0) {
                        /* its answer on one line */
                        size_t len = output ? strlen(output) : 0;
                        while (len > 0 && (output[len - 1] == '\n' || output[len - 1] == ' '))
                                output[--len] = '\0';
                        for (char *q = output; q && *q; q++)
                                if (*q == '\n' || *q == '"')
                                        *q = ' ';
                        log_warn("nvidia", "time-slice not applied claim_uid=%s device=%s "
                                           "interval=%d reason=\"%s\"",
                                 c->claim_uid, ds[i]->uuid, interval,
                                 st < 0 ? why.message : (output && output[0] ? output : "refused"));
                        continue;
                }
                log_info("nvidia", "time-slice applied claim_uid=%s device=%s interval=%d",
                         c->claim_uid, ds[i]->uuid, interval);
        }
}

/* ---- MPS ---- */

/* The claim's limits as control commands, each device's pinned memory from
 * the default and then the per-device entries (a UUID of the config's
 * devices, or an index into them). */
static int mps_commands(const struct cc_config *cfg, const struct dev_claim_config *c,
                        const struct cc_dev *const *ds, size_t n, json_t *commands,
                        struct diag *diag)
{
        if (cfg->thread_percentage >= 0)
                json_array_append_new(commands,
                                      json_sprintf("set_default_active_thread_percentage %d",
                                                   cfg->thread_percentage));
        _cleanup_free_ unsigned long long *mib = xcalloc(n ? n : 1, sizeof(*mib));
        for (size_t i = 0; i < n; i++)
                mib[i] = cfg->pinned_default_mib;
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)(uintptr_t)cfg->per_device, key, v) {
                _cleanup_free_ char *path =
                    xasprintf(".sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit.%.64s", key);
                size_t at = n;
                for (size_t i = 0; i < n; i++)
                        if (strcmp(ds[i]->uuid, key) == 0)
                                at = i;
                if (at == n) {
                        char *end = NULL;
                        unsigned long idx = strtoul(key, &end, 10);
                        if (!key[0] || *end || key[0] == '-' || key[0] == '+')
                                return diag_set(diag, -EINVAL,
                                                "%s: %s: invalid device: not a UUID of the "
                                                "claim's devices nor an index",
                                                c->where, path);
                        if (idx >= n)
                                return diag_set(diag, -EINVAL,
                                                "%s: %s: invalid device index: %lu (the config "
                                                "applies to %zu devices)",
                                                c->where, path, idx, n);
                        at = idx;
                }
                int r = quantity_mib(v, path, c->where, &mib[at], diag);
                if (r < 0)
                        return r;
        }
        /* numbered as CUDA_VISIBLE_DEVICES (the devices, in order) renumbers them */
        for (size_t i = 0; i < n; i++)
                if (mib[i])
                        json_array_append_new(commands,
                                              json_sprintf("set_default_device_pinned_mem_limit "
                                                           "%zu %lluM",
                                                           i, mib[i]));
        return 0;
}

static int mps_start(const struct cc_ctx *x, const struct cc_config *cfg,
                     const struct dev_claim_config *c, const struct cc_dev *const *ds, size_t n,
                     struct dev_alloc *out, struct diag *diag)
{
        if (!x->mps_root[0])
                return diag_set(diag, -EINVAL, "%s: .sharing.strategy: MPS needs an MPS root "
                                               "(--mps-root), and this node has none",
                                c->where);
        json_t *commands = json_array();
        int r = mps_commands(cfg, c, ds, n, commands, diag);
        if (r < 0) {
                json_decref(commands);
                return r;
        }
        json_t *devices = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(devices, json_string(ds[i]->uuid));
        json_t *req = json_pack("{s:o, s:o}", "devices", devices, "commands", commands);
        _cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        _cleanup_free_ char *dir = nvidia_mps_path(x->mps_root, NULL, NVIDIA_MPS_CLAIMS_DIR);
        _cleanup_free_ char *file = xasprintf("%s.json", c->claim_uid);
        _cleanup_close_ int dfd = fs_open_dir(AT_FDCWD, dir, FS_CREATE, 0755, diag);
        if (dfd < 0)
                return diag_prefix(diag, dfd, "%s: cannot write the claim's MPS request", c->where);
        r = fs_write_atomic_at(dfd, file, text, strlen(text), 0644, FS_NO_SYMLINKS, diag);
        if (r < 0)
                return diag_prefix(diag, r, "%s: cannot write the claim's MPS request", c->where);
        _cleanup_free_ char *sub = xasprintf(NVIDIA_MPS_CLAIM_PREFIX "%s", c->claim_uid);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long wait_ms = 1;; wait_ms = wait_ms * 2 < MPS_POLL_MS ? wait_ms * 2 : MPS_POLL_MS) {
                if (nvidia_mps_ready(x->mps_root, sub))
                        break;
                if (c->stop && atomic_load(c->stop))
                        return diag_set(diag, -ECANCELED, "%s: devlet is stopping", c->where);
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                long ms = (long)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
                if (ms >= MPS_START_MS)
                        return diag_set(diag, -ETIMEDOUT,
                                        "%s: the claim's MPS control daemon was not ready within "
                                        "%d s (devlet's mps-control-daemon sidecar reads %s/%s)",
                                        c->where, MPS_START_MS / 1000, dir, file);
                struct timespec pause = { 0, wait_ms * 1000000L };
                nanosleep(&pause, NULL);
        }
        _cleanup_free_ char *ctr_pipe = nvidia_mps_path(NVIDIA_MPS_CONTAINER_ROOT, sub, "pipe");
        _cleanup_free_ char *host_pipe = nvidia_mps_path(x->mps_root, sub, "pipe");
        _cleanup_free_ char *host_shm = nvidia_mps_path(x->mps_root, NULL, "shm");
        dev_alloc_set_env(out, "CUDA_MPS_PIPE_DIRECTORY", ctr_pipe);
        dev_alloc_add_mount(out, host_pipe, ctr_pipe, false);
        dev_alloc_add_mount(out, host_shm, "/dev/shm", false);
        log_info("nvidia", "MPS control daemon ready for the claim claim_uid=%s devices=%zu",
                 c->claim_uid, n);
        return 0;
}

/* ---- the hook ---- */

static int cc_configure(const void *ctxp, const struct dev_claim_config *c, struct dev_alloc *out,
                        struct diag *diag)
{
        const struct cc_ctx *x = ctxp;
        struct cc_config cfg;
        int r = decode(c, &cfg, diag);
        if (r < 0)
                return r;
        _cleanup_free_ const struct cc_dev **ds = xcalloc(c->n ? c->n : 1, sizeof(*ds));
        size_t n = 0;
        for (size_t i = 0; i < c->n; i++) {
                const struct cc_dev *d = dev_of(x, c->ids[i]);
                if (!d)
                        return diag_set(diag, -ENODEV, "%s: device %s is gone", c->where,
                                        c->ids[i]);
                if (d->mig != cfg.mig_kind) {
                        if (c->all_requests)
                                continue;
                        return diag_set(diag, -EINVAL,
                                        "%s: .kind: a %s cannot configure %s %s; use a %s",
                                        c->where, cfg.mig_kind ? "MigDeviceConfig" : "GpuConfig",
                                        d->mig ? "MIG device" : "GPU", d->uuid,
                                        d->mig ? "MigDeviceConfig" : "GpuConfig");
                }
                ds[n++] = d;
        }
        if (n == 0)
                return 0;
        if (cfg.strategy == CC_TIMESLICING && !cfg.mig_kind)
                timeslice_apply(x, c, ds, n, cfg.interval);
        else if (cfg.strategy == CC_MPS)
                return mps_start(x, &cfg, c, ds, n, out, diag);
        return 0;
}

/* The claim's MPS request withdrawn: the sidecar quits its daemon. */
static void cc_unconfigure(const void *ctxp, const char *claim_uid)
{
        const struct cc_ctx *x = ctxp;
        if (!x->mps_root[0])
                return;
        _cleanup_free_ char *dir = nvidia_mps_path(x->mps_root, NULL, NVIDIA_MPS_CLAIMS_DIR);
        _cleanup_close_ int dfd = fs_open_dir(AT_FDCWD, dir, 0, 0755, NULL);
        _cleanup_free_ char *file = xasprintf("%s.json", claim_uid);
        if (dfd >= 0 && unlinkat(dfd, file, 0) == 0)
                log_info("nvidia", "MPS request withdrawn claim_uid=%s", claim_uid);
}

const struct dev_claim_config_ops nvidia_claim_config_ops = {
        .ctx_new = cc_ctx_new,
        .ctx_free = cc_ctx_free,
        .configure = cc_configure,
        .unconfigure = cc_unconfigure,
};
