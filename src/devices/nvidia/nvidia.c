/* The NVIDIA backend: start-up, health results, shutdown.
 *
 * create(): load libnvidia-ml.so.1 (nvml-lib.c), nvmlInit, read the node
 * (inventory.c), build the resources (resources.c) and, with a loop, start
 * the health monitor (health.c).  What happens when something is missing:
 *   - no library and backends "auto": no NVIDIA backend, one info line;
 *   - no library with "nvidia" named, a library without a required symbol,
 *     nvmlInit failing, or a layout NVIDIA refuses (mixed MIG modes with
 *     mig-strategy=single...): --fail-on-init-error true makes create fail
 *     (devlet exits 1); false logs an error and runs without the backend;
 *   - NVML up but no GPUs: no backend, one info line.
 *
 * Health results come from the monitor's thread as batches on the loop
 * (on_health): every XID is counted by code; a GPU's state change is
 * applied to every device of that GPU in every resource (whole GPU, its MIG
 * devices, their replicas) and each changed resource is notified once per
 * batch.  When monitoring cannot start at all, every GPU is reported
 * unhealthy with a loud error (NVIDIA keeps advertising them as healthy).
 * DP_DISABLE_HEALTHCHECKS=all alone: every GPU healthy, and no monitor
 * unless metrics are on, which still need the XIDs: then the monitor runs
 * in xids_only mode and judges nothing.
 *
 * A reload builds a new backend from a fresh scan; inherit() carries over
 * what the scan cannot see, matching GPUs by UUID: the XID counts (metrics
 * counters must not reset) and every GPU the monitor saw fail (a critical
 * XID, lost, failed waits), which stays unhealthy with its reason and the
 * time of its last failure, handed to the new monitor as a seed so that
 * recovery, when enabled, still waits for the quiet period since that
 * failure.  Without recovery such a GPU stays unhealthy until devlet
 * restarts.  GPUs the monitor could not watch are judged again by the new
 * one; lost GPUs the scan cannot identify are unhealthy anyway.
 *
 * destroy() frees the device model at once but never waits for the health
 * thread: the inventory, the policy and our NVML reference (nvmlShutdown,
 * dlclose) go when the monitor reports its thread gone, on a later loop
 * turn.  Runs on the loop thread; NVML is only called here during create
 * and that final release (the health thread has its own calls).  What an
 * operator must see goes out through dev_report(), never the log. */
#include "devices/nvidia/nvidia.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "devices/nvidia/cdi.h"
#include "devices/nvidia/gfd-labels.h"
#include "devices/nvidia/health.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvml-lib.h"
#include "devices/nvidia/sample.h"

#define HEALTH_WAIT_MS 500
/* Where the driver's /proc files are (nvidia-caps/mig-minors); tests point
 * it at a fake tree. */
#define PROC_ROOT_ENV "DEVLET_PROC_ROOT"

static const char *const no_nvml_hint =
    "if this is a GPU node, check that the NVIDIA driver is installed and that devlet's "
    "container sees its libraries (NVIDIA Container Toolkit, or --nvidia-driver-root); if it is "
    "not, run devlet with --backends hostdev or schedule it on GPU nodes only";

static char *root_normalize(const char *s)
{
        char *r = xstrdup(s && *s ? s : "/");
        size_t n = strlen(r);
        while (n > 0 && r[n - 1] == '/')
                r[--n] = '\0';
        return r;
}

/* ---- health results ---- */

static void gpu_xid_count(struct nvidia_backend *b, size_t gpu, unsigned long long xid)
{
        uint64_t seq = ++b->xid_seq;
        for (size_t i = 0; i < b->n_gpu_xids; i++)
                if (b->gpu_xids[i].gpu == gpu && b->gpu_xids[i].xid == xid) {
                        b->gpu_xids[i].count++;
                        b->gpu_xids[i].seq = seq;
                        return;
                }
        b->gpu_xids = xrealloc(b->gpu_xids, (b->n_gpu_xids + 1) * sizeof(*b->gpu_xids));
        b->gpu_xids[b->n_gpu_xids++] =
                (struct nvidia_gpu_xid){ .gpu = gpu, .xid = xid, .count = 1, .seq = seq };
}

size_t nvidia_backend_xid_events(struct dev_backend *db, struct nvidia_xid_event *out, size_t max)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        for (size_t i = 0; i < b->n_gpu_xids && i < max; i++) {
                const struct nvidia_gpu_xid *x = &b->gpu_xids[i];
                out[i] = (struct nvidia_xid_event){ .uuid = b->inv->gpus[x->gpu].uuid, .xid = x->xid,
                                                    .count = x->count, .seq = x->seq };
        }
        return b->n_gpu_xids;
}

static void xid_count(struct nvidia_backend *b, unsigned long long xid, uint64_t n)
{
        for (size_t i = 0; i < b->n_xids; i++)
                if (b->xids[i].xid == xid) {
                        b->xids[i].count += n;
                        return;
                }
        b->xids = xrealloc(b->xids, (b->n_xids + 1) * sizeof(*b->xids));
        b->xids[b->n_xids++] = (struct nvidia_xid_count){ .xid = xid, .count = n };
}

const struct nvml_inventory *nvidia_backend_inventory(struct dev_backend *db)
{
        return ((struct nvidia_backend *)db)->inv;
}

uint64_t nvidia_backend_xid_count(struct dev_backend *db, unsigned long long xid)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        for (size_t i = 0; i < b->n_xids; i++)
                if (b->xids[i].xid == xid)
                        return b->xids[i].count;
        return 0;
}

static void gpu_set(struct nvidia_backend *b, size_t gpu, bool bad, const char *reason)
{
        struct nvidia_gpu_health *g = &b->gpu_health[gpu];
        if (bad && !g->bad) {
                g->bad_since = (int64_t)time(NULL);
                g->kind = NVIDIA_HEALTH_UNSUPPORTED; /* unmonitored, unless told why */
                g->xid = 0;
        }
        g->bad = bad;
        free(g->reason);
        g->reason = bad ? xstrdup(reason ? reason : "unhealthy") : NULL;
        if (!bad)
                *g = (struct nvidia_gpu_health){ 0 };
}

/* The taint DRA publishes on an unhealthy device of GPU gh, as NVIDIA's
 * DRA driver names them: gpu.nvidia.com/xid=<XID>, gpu.nvidia.com/gpu-lost;
 * gpu.nvidia.com/unmonitored where its events cannot be watched (or the
 * waits failed), gpu.nvidia.com/mps=not-ready for an MPS share whose
 * control daemon is not up.  NoExecute for the XIDs and losses
 * --nvidia-dra-no-execute names; NoSchedule otherwise. */
static void gpu_taint(const struct nvidia_gpu_health *gh, bool mps_down, char *const *no_execute,
                      struct dev_taint *t)
{
        const char *key = "gpu.nvidia.com/unmonitored";
        t->value[0] = '\0';
        if (!gh->bad && mps_down) {
                key = "gpu.nvidia.com/mps";
                snprintf(t->value, sizeof(t->value), "not-ready");
        } else if (gh->kind == NVIDIA_HEALTH_XID) {
                key = "gpu.nvidia.com/xid";
                snprintf(t->value, sizeof(t->value), "%llu", gh->xid);
        } else if (gh->kind == NVIDIA_HEALTH_LOST) {
                key = "gpu.nvidia.com/gpu-lost";
        }
        snprintf(t->key, sizeof(t->key), "%s", key);
        t->since = gh->bad ? gh->bad_since : 0;
        /* --nvidia-dra-no-execute: the XIDs and gpu-lost it names, or all */
        bool failure = gh->bad && (gh->kind == NVIDIA_HEALTH_XID || gh->kind == NVIDIA_HEALTH_LOST);
        for (size_t i = 0; failure && no_execute && no_execute[i]; i++)
                t->no_execute |= strcmp(no_execute[i], "all") == 0 ||
                                 (gh->kind == NVIDIA_HEALTH_LOST &&
                                  strcmp(no_execute[i], "gpu-lost") == 0) ||
                                 (gh->kind == NVIDIA_HEALTH_XID &&
                                  strcmp(no_execute[i], t->value) == 0);
}

/* Brings every device in line with its GPU; notifies each changed resource
 * once. */
static void health_sync(struct nvidia_backend *b, bool notify)
{
        for (size_t i = 0; i < b->layout.n_res; i++) {
                struct dev_resource *r = b->layout.res[i];
                bool changed = false;
                for (size_t k = 0; k < r->n_devices; k++) {
                        struct dev_device *d = &r->devices[k];
                        const struct nvidia_dev *nd = d->priv;
                        const struct nvidia_res *nr = r->backend_data;
                        bool mps_down = nr->mps && !nr->mps_ready;
                        enum dev_health want = b->gpu_health[nd->gpu].bad || mps_down
                                                       ? DEV_UNHEALTHY
                                                       : DEV_HEALTHY;
                        struct dev_taint t = { 0 };
                        if (want == DEV_UNHEALTHY)
                                gpu_taint(&b->gpu_health[nd->gpu], mps_down, b->ctx.no_execute,
                                          &t);
                        if (d->health != want || memcmp(&d->taint, &t, sizeof(t)) != 0) {
                                d->health = want;
                                d->taint = t;
                                changed = true;
                        }
                }
                if (changed && notify)
                        dev_resource_notify(r);
        }
}

static void on_health(void *ud, const struct nvidia_health_msg *msgs, size_t n)
{
        struct nvidia_backend *b = ud;
        for (size_t i = 0; i < n; i++) {
                const struct nvidia_health_msg *m = &msgs[i];
                const struct nvml_gpu *g = &b->inv->gpus[m->gpu];
                if (m->kind == NVIDIA_HEALTH_XID) {
                        xid_count(b, m->xid, 1);
                        gpu_xid_count(b, m->gpu, m->xid);
                        nvidia_sampler_note_xid(b->sampler, m->gpu, m->xid);
                }
                if (m->kind == NVIDIA_HEALTH_XID && !m->critical) {
                        dev_report(DEV_REPORT_INFO, "nvidia", "%s gpu=%zu uuid=%s xid=%llu reason=\"%s\"",
                                   b->policy && !b->policy->monitor ? "XID (health checks disabled)"
                                                                    : "ignored XID",
                                   m->gpu, g->uuid[0] ? g->uuid : "?", m->xid, m->reason);
                        continue;
                }
                if (b->policy && !b->policy->monitor)
                        continue; /* health checks off: nothing else is judged */
                const char *uuid = g->uuid[0] ? g->uuid : "?";
                if (m->healthy)
                        dev_report(DEV_REPORT_INFO, "nvidia", "GPU healthy again gpu=%zu uuid=%s reason=\"%s\"",
                                 m->gpu, uuid, m->reason);
                else
                        dev_report(DEV_REPORT_WARN, "nvidia", "GPU unhealthy gpu=%zu uuid=%s reason=\"%s\"", m->gpu,
                                 uuid, m->reason);
                gpu_set(b, m->gpu, !m->healthy, m->reason);
                if (!m->healthy) {
                        b->gpu_health[m->gpu].kind = m->kind;
                        b->gpu_health[m->gpu].xid = m->kind == NVIDIA_HEALTH_XID ? m->xid : 0;
                }
                if (!m->healthy && m->kind != NVIDIA_HEALTH_UNSUPPORTED) {
                        struct nvidia_gpu_health *gh = &b->gpu_health[m->gpu];
                        gh->seen_failing = true;
                        gh->lasting |= m->kind == NVIDIA_HEALTH_LOST ||
                                       m->kind == NVIDIA_HEALTH_WAIT_FAILED;
                        gh->since = m->since;
                }
        }
        health_sync(b, true);
}

static void health_start(struct nvidia_backend *b, const struct devlet_config *cfg)
{
        struct nvidia_xid_policy *policy = xcalloc(1, sizeof(*policy));
        _cleanup_strv_free_ char **warnings = NULL;
        nvidia_xid_policy_parse(getenv("DP_DISABLE_HEALTHCHECKS"), getenv("DP_ENABLE_HEALTHCHECKS"),
                                policy, &warnings);
        for (size_t i = 0; warnings && warnings[i]; i++)
                dev_report(DEV_REPORT_HOST_WARN, "nvidia", "%s", warnings[i]);
        b->policy = policy;
        /* the XID metrics need the events even without health checks */
        bool xids_only = !policy->monitor && b->loop && b->sampler && cfg->metrics_address &&
                         cfg->metrics_address[0];
        if (!policy->monitor) {
                b->health_state = xstrdup(xids_only ? "disabled (DP_DISABLE_HEALTHCHECKS=all); XIDs "
                                                      "watched for metrics only"
                                                    : "disabled (DP_DISABLE_HEALTHCHECKS=all)");
                dev_report(DEV_REPORT_INFO, "nvidia", "health checks disabled (DP_DISABLE_HEALTHCHECKS=all)%s",
                           xids_only ? "; XIDs still watched for metrics" : "");
                if (!xids_only)
                        return;
                struct nvidia_health_cfg hc = {
                        .lib = b->lib, .inv = b->inv, .policy = policy, .wait_ms = HEALTH_WAIT_MS,
                        .xids_only = true,
                };
                struct diag why = { 0 };
                if (nvidia_health_start(b->loop, &hc, on_health, b, &b->health, &why) < 0)
                        dev_report(DEV_REPORT_WARN, "nvidia", "no XID events for metrics error=\"%s\"",
                                   why.message);
                return;
        }
        _cleanup_free_ char *ignored = nvidia_xid_policy_ignored(policy);
        if (!b->loop) {
                b->health_state = xasprintf("not monitored (one-shot); XIDs ignored: %s", ignored);
                return;
        }
        struct nvidia_health_cfg hc = {
                .lib = b->lib,
                .inv = b->inv,
                .policy = policy,
                .recovery = cfg->health.recovery_enabled,
                .quiet_ms = cfg->health.recovery_quiet_ms,
                .wait_ms = HEALTH_WAIT_MS,
        };
        struct diag why = { 0 };
        int r = nvidia_health_start(b->loop, &hc, on_health, b, &b->health, &why);
        if (r < 0) {
                const char *e = why.message[0] ? why.message : strerror(-r);
                dev_report(DEV_REPORT_ERROR, "nvidia", "health monitoring cannot start, every GPU is reported "
                                    "unhealthy error=\"%s\"",
                          e);
                b->health_state = xasprintf("failed: %s", e);
                for (size_t i = 0; i < b->inv->n_gpus; i++)
                        gpu_set(b, i, true, "health monitoring cannot start");
                health_sync(b, false);
                return;
        }
        b->health_state = xasprintf("monitored; XIDs ignored: %s%s", ignored,
                                    hc.recovery ? "; recovery on" : "");
        dev_report(DEV_REPORT_INFO, "nvidia", "health monitoring started xids_ignored=%s recovery=%s", ignored,
                 hc.recovery ? "on" : "off");
}

/* ---- life cycle ---- */

/* What the health thread reads (the inventory, the policy, NVML), once it
 * is gone. */
static void backend_release(void *ud)
{
        struct nvidia_backend *b = ud;
        nvml_inventory_free(b->inv);
        free(b->policy);
        if (b->nvml_up)
                b->lib->shutdown();
        nvml_lib_close(b->lib);
        free(b);
}

static void mps_timer_free(uv_handle_t *h)
{
        free(h);
}

/* Frees the device model now and the rest when the monitor is gone: at
 * once without one, else on a later loop turn. */
static void backend_free(struct nvidia_backend *b)
{
        if (!b)
                return;
        nvidia_layout_release(&b->layout);
        if (b->inv && b->gpu_health)
                for (size_t i = 0; i < b->inv->n_gpus; i++)
                        free(b->gpu_health[i].reason);
        free(b->gpu_health);
        free(b->ctx.dev_root);
        free(b->ctx.cdi_annotation_prefix);
        free(b->ctx.mps_root);
        strv_free(b->ctx.no_execute);
        strv_free(b->ctx.program_roots);
        if (b->mps_timer)
                uv_close((uv_handle_t *)TAKE_PTR(b->mps_timer), mps_timer_free);
        free(b->mig_strategy);
        free(b->health_state);
        free(b->xids);
        free(b->gpu_xids);
        dev_sampler_unref(b->sampler);
        nvidia_health_stop(TAKE_PTR(b->health), backend_release, b);
}

DEFINE_CLEANUP_FUNC(struct nvidia_backend, backend_free)

/* An initialisation failure (rc, why): under --fail-on-init-error, rc
 * with diag set to why; otherwise a loud log and no backend. */
static int init_failed(const struct devlet_config *cfg, int rc, const struct diag *why,
                       struct dev_backend **out, struct diag *diag)
{
        if (cfg->fail_on_init_error) {
                if (diag)
                        *diag = *why;
                return rc;
        }
        dev_report(DEV_REPORT_ERROR, "nvidia", "NVIDIA backend not started, running without it "
                            "(fail-on-init-error=false) error=\"%s\"",
                  why->message);
        *out = NULL;
        return 0;
}

static void ctx_fill(struct nvidia_ctx *c, const struct nvidia_backend *b,
                     const struct devlet_config *cfg)
{
        const struct nvidia_options *o = nvidia_options_get(cfg);
        c->inv = b->inv;
        c->dev_root = root_normalize(nvidia_dev_root(cfg));
        for (size_t i = 0; cfg->device_list_strategy && cfg->device_list_strategy[i]; i++) {
                const char *s = cfg->device_list_strategy[i];
                c->list_envvar |= strcmp(s, "envvar") == 0;
                c->list_volume_mounts |= strcmp(s, "volume-mounts") == 0;
                c->list_cdi_annotations |= strcmp(s, "cdi-annotations") == 0;
                c->list_cdi_cri |= strcmp(s, "cdi-cri") == 0;
        }
        if (!c->list_envvar && !c->list_volume_mounts && !c->list_cdi_annotations &&
            !c->list_cdi_cri)
                c->list_envvar = true;
        c->index_ids = o->device_id_strategy && strcmp(o->device_id_strategy, "index") == 0;
        c->pass_device_specs = cfg->pass_device_specs;
        c->gds = o->gds_enabled;
        c->mofed = o->mofed_enabled;
        c->gdrcopy = o->gdrcopy_enabled;
        c->cdi_annotation_prefix = xstrdup(cfg->cdi_annotation_prefix ? cfg->cdi_annotation_prefix
                                                                      : "cdi.k8s.io/");
        c->sharing = cfg->sharing.strategy;
        c->fail_requests_greater_than_one = cfg->sharing.fail_requests_greater_than_one;
        c->mps_root = xstrdup(o->mps_root);
        c->no_execute = strv_copy((const char *const *)o->dra_no_execute);
        if (o->container_driver_root[0])
                c->program_roots = strv_push(c->program_roots, o->container_driver_root);
        if (o->driver_root[0])
                c->program_roots = strv_push(c->program_roots, o->driver_root);
        c->replica_policy = cfg->shared_devices_allocation_policy &&
                                    strcmp(cfg->shared_devices_allocation_policy, "packed") == 0
                                ? ALLOC_REPLICAS_PACKED
                                : ALLOC_REPLICAS_DISTRIBUTED;
}

static void mps_log(const struct nvidia_backend *b)
{
        for (size_t i = 0; i < b->layout.n_res; i++) {
                const struct nvidia_res *nr = b->layout.res[i]->backend_data;
                if (!nr->mps)
                        continue;
                if (nr->mps_ready)
                        dev_report(DEV_REPORT_INFO, "nvidia",
                                   "MPS control daemon ready, serving resource=%s",
                                   b->layout.res[i]->name);
                else
                        dev_report(DEV_REPORT_WARN, "nvidia",
                                   "MPS control daemon not ready, devices unhealthy until it is "
                                   "resource=%s marker=%s/%s/%s",
                                   b->layout.res[i]->name, b->ctx.mps_root,
                                   b->layout.res[i]->name, NVIDIA_MPS_MARKER);
        }
}

static void on_mps_timer(uv_timer_t *t)
{
        struct nvidia_backend *b = t->data;
        if (!nvidia_mps_refresh(b))
                return;
        mps_log(b);
        health_sync(b, true);
}

/* MPS resources serve only while their control daemon (`devlet
 * mps-control-daemon`) is ready: read at once, then every second. */
static void mps_start(struct nvidia_backend *b)
{
        bool any = false;
        for (size_t i = 0; i < b->layout.n_res; i++)
                any |= ((const struct nvidia_res *)b->layout.res[i]->backend_data)->mps;
        if (!any)
                return;
        nvidia_mps_refresh(b);
        health_sync(b, false);
        if (!b->loop)
                return;
        mps_log(b);
        b->mps_timer = xcalloc(1, sizeof(*b->mps_timer));
        uv_timer_init(b->loop, b->mps_timer);
        b->mps_timer->data = b;
        uv_timer_start(b->mps_timer, on_mps_timer, 1000, 1000);
}

/* NVIDIA's IMEX rule: a required channel must exist at start-up; one not
 * required is left out when its node is missing. */
static int imex_probe(struct nvidia_ctx *c, const struct devlet_config *cfg, struct diag *diag)
{
        const struct nvidia_options *opts = nvidia_options_get(cfg);
        if (!opts->imex_channel0)
                return 0;
        _cleanup_free_ char *path = xasprintf("%s" NVIDIA_IMEX_CHANNEL0, c->dev_root);
        struct stat st;
        if (stat(path, &st) == 0) {
                c->imex_channel0 = true;
                return 0;
        }
        if (opts->imex_required)
                return diag_set(diag, -ENOENT,
                                "IMEX channel 0 is required (--imex-required) but %s is "
                                "missing: %s", path, strerror(errno));
        dev_report(DEV_REPORT_WARN, "nvidia",
                   "IMEX channel 0 not found, containers get no IMEX channel path=%s", path);
        return 0;
}

static void report_found(const struct nvidia_backend *b)
{
        const struct nvml_inventory *inv = b->inv;
        size_t migs = 0, lost = 0;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                migs += inv->gpus[i].n_migs;
                lost += inv->gpus[i].lost;
        }
        dev_report(DEV_REPORT_INFO, "nvidia", "found GPUs gpus=%zu mig_devices=%zu lost=%zu driver=%s cuda=%d.%d "
                           "library=%s resources=%zu",
                 inv->n_gpus, migs, lost, inv->driver_version[0] ? inv->driver_version : "?",
                 NVML_CUDA_DRIVER_VERSION_MAJOR(inv->cuda_version),
                 NVML_CUDA_DRIVER_VERSION_MINOR(inv->cuda_version), b->lib->path,
                 b->layout.n_res);
        for (size_t i = 0; i < inv->n_gpus; i++)
                if (inv->gpus[i].lost)
                        dev_report(DEV_REPORT_WARN, "nvidia", "GPU lost at start, advertised unhealthy gpu=%zu", i);
}

int nvidia_backend_create_with(struct nvml_lib *lib, uv_loop_t *loop,
                               const struct devlet_config *cfg, struct dev_backend **out,
                               struct diag *diag)
{
        _cleanup_(backend_freep) struct nvidia_backend *b = xcalloc(1, sizeof(*b));
        b->lib = lib;
        b->loop = loop;
        if (lib->missing) {
                _cleanup_free_ char *names = xstrdup("");
                for (size_t i = 0; lib->missing[i]; i++) {
                        char *t = xasprintf("%s%s%s", names, i ? "," : "", lib->missing[i]);
                        free(names);
                        names = t;
                }
                dev_report(DEV_REPORT_INFO, "nvidia", "NVML lacks optional calls, the features using them are off "
                                   "library=%s missing=%s",
                         lib->path ? lib->path : "?", names);
        }
        struct diag why = { 0 };
        nvmlReturn_t nr = lib->init();
        if (nr != NVML_SUCCESS) {
                diag_set(&why, -EIO, "failed to initialize NVML: %s (%s)",
                         nvml_lib_strerror(lib, nr), no_nvml_hint);
                return init_failed(cfg, -EIO, &why, out, diag);
        }
        b->nvml_up = true;
        _cleanup_free_ char *sysfs = root_normalize(cfg->sysfs_root);
        const char *proc_env = getenv(PROC_ROOT_ENV);
        _cleanup_free_ char *proc = root_normalize(proc_env && *proc_env ? proc_env : "/proc");
        struct nvml_inventory_env env = { .sysfs_root = sysfs, .proc_root = proc };
        int r = nvml_inventory_load(lib, &env, &b->inv, &why);
        if (r < 0)
                return init_failed(cfg, r, &why, out, diag);
        if (b->inv->n_gpus == 0) {
                dev_report(DEV_REPORT_INFO, "nvidia", "NVML found no GPUs; no NVIDIA resources library=%s",
                         lib->path ? lib->path : "?");
                *out = NULL;
                return 0;
        }
        ctx_fill(&b->ctx, b, cfg);
        r = imex_probe(&b->ctx, cfg, &why);
        if (r < 0)
                return init_failed(cfg, r, &why, out, diag);
        const char *mig_strategy = nvidia_options_get(cfg)->mig_strategy;
        b->mig_strategy = xstrdup(mig_strategy ? mig_strategy : "none");
        r = nvidia_layout_build(b->inv, cfg, &b->ctx, &b->layout, &why);
        if (r == -ENOTSUP) {
                /* GFD labels such a node (<model>-MIG-INVALID): keep the
                 * inventory for the labels and metrics, serve nothing */
                dev_report(DEV_REPORT_ERROR, "nvidia",
                           "MIG layout cannot be served, no NVIDIA resources mig_strategy=%s "
                           "error=\"%s\"",
                           b->mig_strategy, why.message);
        } else if (r < 0) {
                return init_failed(cfg, r, &why, out, diag);
        } else if (loop) {
                _cleanup_strv_free_ char **compat =
                        nvidia_compat_warnings(b->inv, cfg, &b->ctx, &b->layout);
                for (size_t i = 0; compat && compat[i]; i++)
                        dev_report(DEV_REPORT_WARN, "nvidia", "differs from NVIDIA's plugin: %s",
                                   compat[i]);
        }
        b->gpu_health = xcalloc(b->inv->n_gpus, sizeof(*b->gpu_health));
        for (size_t i = 0; i < b->inv->n_gpus; i++)
                if (b->inv->gpus[i].lost) {
                        gpu_set(b, i, true, "lost at start");
                        b->gpu_health[i].kind = NVIDIA_HEALTH_LOST;
                }
        if (b->ctx.pass_device_specs && !b->inv->mig_minors_found)
                for (size_t i = 0; i < b->inv->n_gpus; i++)
                        if (b->inv->gpus[i].n_migs && strcmp(b->mig_strategy, "none") != 0) {
                                dev_report(DEV_REPORT_HOST_WARN, "nvidia",
                                           "no nvidia-caps/mig-minors: MIG devices cannot be "
                                           "passed as device specs");
                                break;
                        }
        mps_start(b);
        report_found(b);
        struct diag sampler_why = { 0 };
        if (nvidia_sampler_new(lib, b->inv, &b->sampler, &sampler_why) < 0)
                log_debug("nvidia", "no GPU metrics error=\"%s\"", sampler_why.message);
        health_start(b, cfg);
        *out = (struct dev_backend *)TAKE_PTR(b);
        return 0;
}

static bool named_explicitly(const struct devlet_config *cfg)
{
        return cfg->backends && strv_contains(cfg->backends, "nvidia");
}

static int nvidia_create(uv_loop_t *loop, const struct devlet_config *cfg,
                         struct dev_backend **out, struct diag *diag)
{
        struct nvml_lib *lib = NULL;
        struct diag why = { 0 };
        int r = nvml_lib_open(nvidia_options_get(cfg)->driver_root, &lib, &why);
        if (r == -ENOENT && !named_explicitly(cfg)) {
                dev_report(DEV_REPORT_INFO, "nvidia", "no NVIDIA driver library, NVIDIA backend off detail=\"%s\"",
                         why.message);
                *out = NULL;
                return 0;
        }
        if (r < 0) {
                struct diag full = { 0 };
                diag_set(&full, r, "%s (%s)", why.message, no_nvml_hint);
                return init_failed(cfg, r, &full, out, diag);
        }
        return nvidia_backend_create_with(lib, loop, cfg, out, diag);
}

static void nvidia_destroy(struct dev_backend *db)
{
        backend_free((struct nvidia_backend *)db);
}

/* ---- reloads ---- */

static ssize_t gpu_by_uuid(const struct nvml_inventory *inv, const char *uuid)
{
        if (!uuid[0])
                return -1;
        for (size_t i = 0; i < inv->n_gpus; i++)
                if (strcmp(inv->gpus[i].uuid, uuid) == 0)
                        return (ssize_t)i;
        return -1;
}

static void inherit_xids(struct nvidia_backend *b, const struct nvidia_backend *prev)
{
        for (size_t i = 0; i < prev->n_xids; i++)
                xid_count(b, prev->xids[i].xid, prev->xids[i].count);
        for (size_t i = 0; i < prev->n_gpu_xids; i++) {
                const struct nvidia_gpu_xid *x = &prev->gpu_xids[i];
                ssize_t j = gpu_by_uuid(b->inv, prev->inv->gpus[x->gpu].uuid);
                if (j < 0)
                        continue; /* the GPU is gone, and its series with it */
                b->gpu_xids = xrealloc(b->gpu_xids, (b->n_gpu_xids + 1) * sizeof(*b->gpu_xids));
                b->gpu_xids[b->n_gpu_xids++] = (struct nvidia_gpu_xid){
                        .gpu = (size_t)j, .xid = x->xid, .count = x->count, .seq = x->seq
                };
        }
        if (prev->xid_seq > b->xid_seq)
                b->xid_seq = prev->xid_seq;
        /* the metrics gauge: each GPU's last XID, the entry with the highest seq */
        for (size_t g = 0; g < b->inv->n_gpus; g++) {
                uint64_t seq = 0;
                for (size_t i = 0; i < b->n_gpu_xids; i++)
                        if (b->gpu_xids[i].gpu == g && b->gpu_xids[i].seq > seq) {
                                seq = b->gpu_xids[i].seq;
                                nvidia_sampler_note_xid(b->sampler, g, b->gpu_xids[i].xid);
                        }
        }
}

/* Called by the daemon right after b was created from a fresh scan, before
 * its resources are served and before prev is destroyed; no loop turn has
 * run in between, so b has seen no health message yet. */
static void nvidia_inherit(struct dev_backend *db, struct dev_backend *dprev)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        const struct nvidia_backend *prev = (const struct nvidia_backend *)dprev;
        inherit_xids(b, prev);
        if (!b->health || !b->policy->monitor)
                return; /* not monitored (or for XIDs only): health is what the scan found */
        _cleanup_free_ struct nvidia_health_seed *seeds =
                xcalloc(b->inv->n_gpus + 1, sizeof(*seeds));
        size_t n = 0;
        int64_t now = nvidia_health_now_ms();
        for (size_t i = 0; i < prev->inv->n_gpus; i++) {
                const struct nvidia_gpu_health *old = &prev->gpu_health[i];
                if (!old->bad || !old->seen_failing)
                        continue;
                ssize_t j = gpu_by_uuid(b->inv, prev->inv->gpus[i].uuid);
                if (j < 0 || b->gpu_health[j].bad)
                        continue; /* gone, or unhealthy in the new scan for its own reason */
                gpu_set(b, (size_t)j, true, old->reason);
                struct nvidia_gpu_health *g = &b->gpu_health[j];
                g->kind = old->kind;
                g->xid = old->xid;
                g->bad_since = old->bad_since;
                g->seen_failing = true;
                g->lasting = old->lasting;
                g->since = old->lasting ? now : old->since;
                seeds[n++] = (struct nvidia_health_seed){ .gpu = (size_t)j, .since = g->since };
                dev_report(DEV_REPORT_INFO, "nvidia", "GPU still unhealthy after re-enumeration gpu=%zd uuid=%s "
                                   "reason=\"%s\"",
                         j, b->inv->gpus[j].uuid, g->reason);
        }
        health_sync(b, false);
        nvidia_health_seed(b->health, seeds, n);
}

static struct dev_resource **nvidia_resources(struct dev_backend *db, size_t *n)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        *n = b->layout.n_res;
        return b->layout.res;
}

static struct dev_sampler *nvidia_sampler(struct dev_backend *db)
{
        return dev_sampler_ref(((struct nvidia_backend *)db)->sampler);
}

static size_t nvidia_events(struct dev_backend *db, struct dev_event_count *out, size_t max)
{
        struct nvidia_backend *b = (struct nvidia_backend *)db;
        for (size_t i = 0; i < b->n_gpu_xids && i < max; i++) {
                const struct nvidia_gpu_xid *x = &b->gpu_xids[i];
                out[i] = (struct dev_event_count){ .kind = "xid",
                                                   .help = "XID events per GPU and code.",
                                                   .device_label = "UUID",
                                                   .device = b->inv->gpus[x->gpu].uuid,
                                                   .code = x->xid, .count = x->count };
        }
        return b->n_gpu_xids;
}

const struct dev_backend_ops nvidia_backend_ops = {
        .name = "nvidia",
        .dra_driver = "gpu.nvidia.com",
        .create = nvidia_create,
        .destroy = nvidia_destroy,
        .resources = nvidia_resources,
        .inherit = nvidia_inherit,
        .describe = nvidia_describe,
        .describe_json = nvidia_describe_json,
        .labels = nvidia_backend_labels,
        .cdi_specs = nvidia_backend_cdi_specs,
        .sampler = nvidia_sampler,
        .events = nvidia_events,
        .attr_hints = &nvidia_attr_hints,
        .sidecar_daemons = nvidia_backend_mps_daemons,
        .sidecar_claims = nvidia_backend_mps_claims,
};
