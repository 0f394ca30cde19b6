/* The AMD backend: AMD Instinct and Radeon GPUs from amdgpu's and KFD's
 * sysfs alone, a drop-in for AMD's k8s-device-plugin (resources, IDs,
 * Allocate) with devlet's sharing, XGMI-aware preferred allocation and
 * per-GPU health.
 *
 * create(): read the inventory (inventory.c), build the resources
 * (resources.c) and, with a loop, poll health every
 * --amd-health-interval (default 5 s; 0 turns polling off, as AMD's
 * --pulse 0).  What happens when something is missing:
 *   - no amdgpu module, amdgpu without GPUs, or amdgpu without KFD (no
 *     compute): no AMD backend and one line saying why, once per process,
 *     unless --backends names amd: then --fail-on-init-error decides (true:
 *     devlet exits 1 with the reason; false: logs it, runs without);
 *   - a layout AMD refuses (mixed partition styles under the single naming
 *     strategy): --fail-on-init-error decides, with AMD's words, whether or
 *     not amd is named (the GPUs are there, as for NVIDIA's refusals).
 * --amd-disable-healthchecks (AMD_DISABLE_HEALTHCHECKS, health.amd.disabled:
 * gone,kfd,ras,unresponsive|all) leaves kinds of failure unjudged; NVIDIA's
 * DP_DISABLE_HEALTHCHECKS does not (one info line says so).
 * --amd-device-count (AMD_GPU_DEVICE_COUNT) serves the first N GPUs only.
 * Health results change every device of the GPU (its partitions and their
 * replicas) and notify each changed resource once.  A reload, or a
 * rebuild after a hot-plug, carries over (inherit) the health of GPUs
 * matched by PCI address: a GPU that failed stays failed with its reason
 * and failure time, and its RAS baseline, so errors counted before the
 * reload are not news after it; a failure the fresh scan sees for itself
 * (a device or node missing, a start-up problem) is judged afresh.
 * GPUs hot-plugged, removed or re-partitioned after start-up, and the
 * kernel's WEDGED uevent, are watch.c's: it asks the daemon for a rebuild,
 * or fails a wedged GPU at once (amd_gpu_fail).
 * Metrics come from a sampler (metrics.c) that holds its own reference to
 * the inventory and is told each GPU's health as the loop decides it.
 * Node labels are AMD's labeller's (labels.c); CDI specs are the generic
 * ones, one per resource, whose kinds and names are what Allocate gives.
 * What the operator must see goes to dev_report(), never the log.
 * Runs on the loop thread, but reads no device file there after the
 * inventory: the health poll's reads run on a thread per GPU
 * (health-thread.c) and come back as results the loop judges; a read
 * stalled past AMD_HEALTH_STALL_MS fails its GPU, and nothing else waits
 * for it.  Without a loop (one-shot commands) the poll runs inline. */
#include "devices/amd/amd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"
#include "devices/measure.h"

static char *root_normalize(const char *s, const char *dflt)
{
        char *r = xstrdup(s && *s ? s : dflt);
        size_t n = strlen(r);
        while (n > 1 && r[n - 1] == '/')
                r[--n] = '\0';
        return r;
}

static int64_t now_ms(const struct amd_backend *b)
{
        return b->loop ? (int64_t)uv_now(b->loop) : 0;
}

/* The taint DRA publishes on an unhealthy partition of GPU w: the kind of
 * failure in NVIDIA's DRA driver's style, gpu.amd.com/<kind> (gone, kfd,
 * ras, unresponsive), NoExecute for the kinds --amd-dra-no-execute names,
 * NoSchedule otherwise. */
static void gpu_taint(const struct amd_gpu_watch *w, unsigned no_execute, struct dev_taint *t)
{
        snprintf(t->key, sizeof(t->key), "gpu.amd.com/%s", amd_health_kind_name(w->kind));
        t->since = w->bad_since;
        t->no_execute = (w->kind & no_execute) != 0;
}

/* Brings every device in line with its GPU; notifies changed resources. */
static void health_sync(struct amd_backend *b, bool notify)
{
        for (size_t i = 0; i < b->inv->n_gpus; i++)
                amd_sampler_note_health(b->sampler, i, b->watch[i].bad);
        for (size_t i = 0; i < b->layout.n_res; i++) {
                struct dev_resource *r = b->layout.res[i];
                bool changed = false;
                for (size_t k = 0; k < r->n_devices; k++) {
                        struct dev_device *d = &r->devices[k];
                        const struct amd_dev *ad = d->priv;
                        const struct amd_gpu_watch *w = &b->watch[ad->gpu];
                        enum dev_health want = w->bad ? DEV_UNHEALTHY : DEV_HEALTHY;
                        struct dev_taint t = { 0 };
                        if (w->bad)
                                gpu_taint(w, b->policy.no_execute, &t);
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

static void report_change(const struct amd_backend *b, size_t i)
{
        const struct amd_gpu *g = &b->inv->gpus[i];
        if (b->watch[i].bad)
                dev_report(DEV_REPORT_WARN, "amd", "GPU unhealthy gpu=%zu pci=%s reason=\"%s\"", i,
                           g->bdf, b->watch[i].reason);
        else
                dev_report(DEV_REPORT_INFO, "amd", "GPU healthy again gpu=%zu pci=%s", i, g->bdf);
}

/* NVIDIA's DP_DISABLE_HEALTHCHECKS is NVIDIA's: AMD's checks stay on
 * (they are turned off by --amd-disable-healthchecks); said once. */
static void health_env_note(unsigned ignore)
{
        static bool said;
        const char *dp = getenv("DP_DISABLE_HEALTHCHECKS");
        if (said || !dp || strcmp(dp, "all") != 0 || ignore == AMD_HEALTH_ALL)
                return;
        said = true;
        dev_report(DEV_REPORT_INFO, "amd", "DP_DISABLE_HEALTHCHECKS=all is NVIDIA's and turns off "
                                          "NVIDIA's checks only; AMD GPUs are still checked "
                                          "(AMD_DISABLE_HEALTHCHECKS=all or health.amd.disabled "
                                          "turns them off)");
}

/* One-shot (no loop): every GPU observed and judged inline. */
static void poll_once(struct amd_backend *b, bool notify)
{
        const struct amd_inventory *inv = b->inv;
        bool any = false;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                struct amd_health_obs obs;
                amd_health_observe(inv, i, b->policy.ignore, &obs);
                if (amd_health_apply(&b->watch[i], &obs, &b->policy, now_ms(b))) {
                        report_change(b, i);
                        any = true;
                }
        }
        if (any)
                health_sync(b, notify);
}

void amd_gpu_fail(struct amd_backend *b, size_t gpu, unsigned kind, char *why)
{
        struct amd_health_obs obs = { .why = why, .kind = kind };
        if (gpu >= b->inv->n_gpus || b->poll_ms <= 0 || (b->policy.ignore & kind)) {
                free(why);
                return;
        }
        if (amd_health_apply(&b->watch[gpu], &obs, &b->policy, now_ms(b))) {
                report_change(b, gpu);
                health_sync(b, true);
        }
}

/* A health thread's observation of gpu, on the loop. */
static void on_health_result(void *ud, size_t gpu, struct amd_health_obs *obs)
{
        struct amd_backend *b = ud;
        if (amd_health_apply(&b->watch[gpu], obs, &b->policy, now_ms(b))) {
                report_change(b, gpu);
                health_sync(b, true);
        }
}

/* The poll timer: new reads for the GPUs whose last one finished; a GPU
 * whose read has stalled fails now, and at each poll while it lasts. */
static void on_poll(uv_timer_t *t)
{
        struct amd_backend *b = t->data;
        if (!b->threads) {
                poll_once(b, true);
                return;
        }
        _cleanup_free_ bool *stalled = xcalloc(b->inv->n_gpus + 1, sizeof(bool));
        amd_health_threads_kick(b->threads, now_ms(b), stalled);
        bool any = false;
        for (size_t i = 0; i < b->inv->n_gpus; i++) {
                if (!stalled[i])
                        continue;
                struct amd_health_obs obs = {
                        .why = xasprintf("sysfs reads stalled for more than %d ms: in reset "
                                         "or wedged",
                                         AMD_HEALTH_STALL_MS),
                        .kind = AMD_HEALTH_UNRESPONSIVE,
                };
                if (amd_health_apply(&b->watch[i], &obs, &b->policy, now_ms(b))) {
                        report_change(b, i);
                        any = true;
                }
        }
        if (any)
                health_sync(b, true);
}

static void backend_free(struct amd_backend *b)
{
        if (!b)
                return;
        amd_health_threads_stop(b->threads);
        amd_layout_release(&b->layout);
        for (size_t i = 0; b->inv && b->watch && i < b->inv->n_gpus; i++)
                free(b->watch[i].reason);
        free(b->watch);
        alloc_topology_free(b->ctx.topo);
        free(b->ctx.dev_root);
        free(b->ctx.cdi_annotation_prefix);
        free(b->strategy);
        dev_sampler_unref(b->sampler);
        amd_inventory_free(b->inv);
        free(b);
}

DEFINE_CLEANUP_FUNC(struct amd_backend, backend_free)

/* "Nothing to serve" (rc, why): an info line once per process, or, with
 * amd named in --backends, rc with diag set to why under
 * --fail-on-init-error. */
static int nothing(const struct devlet_config *cfg, int rc, const struct diag *why,
                   struct dev_backend **out, struct diag *diag)
{
        static bool said;
        bool named = cfg->backends && strv_contains(cfg->backends, "amd");
        *out = NULL;
        if (named && cfg->fail_on_init_error) {
                if (diag)
                        *diag = *why;
                return rc;
        }
        if (named)
                dev_report(DEV_REPORT_ERROR, "amd", "AMD backend not started, running without it "
                                 "(fail-on-init-error=false) error=\"%s\"",
                          why->message);
        else if (!said)
                dev_report(DEV_REPORT_INFO, "amd", "no AMD GPUs served: %s", why->message);
        said = true;
        return 0;
}

static void ctx_fill(struct amd_ctx *c, const struct amd_inventory *inv,
                     const struct devlet_config *cfg)
{
        c->inv = inv;
        c->dev_root = root_normalize(config_host_dev_root(cfg), "/");
        if (strcmp(c->dev_root, "/") == 0)
                c->dev_root[0] = '\0';
        c->cdi_cri = cfg->device_list_strategy && strv_contains(cfg->device_list_strategy, "cdi-cri");
        c->cdi_annotations = cfg->device_list_strategy &&
                             strv_contains(cfg->device_list_strategy, "cdi-annotations");
        c->pass_device_specs = cfg->pass_device_specs;
        c->cdi_annotation_prefix =
                xstrdup(cfg->cdi_annotation_prefix ? cfg->cdi_annotation_prefix : "cdi.k8s.io/");
        c->fail_requests_greater_than_one = cfg->sharing.fail_requests_greater_than_one;
        c->replica_policy = cfg->shared_devices_allocation_policy &&
                                    strcmp(cfg->shared_devices_allocation_policy, "packed") == 0
                                ? ALLOC_REPLICAS_PACKED
                                : ALLOC_REPLICAS_DISTRIBUTED;
        c->topo = inv->n_gpus ? amd_topology_build(inv) : NULL;
}

static int amd_create(uv_loop_t *loop, const struct devlet_config *cfg, struct dev_backend **out,
                      struct diag *diag)
{
        if (!dev_backend_wanted(cfg, "amd")) {
                *out = NULL;
                return 0;
        }
        _cleanup_free_ char *sysfs = root_normalize(cfg->sysfs_root, "/sys");
        /* before the inventory: a change while it is read is a change */
        _cleanup_free_ char *fingerprint = loop ? amd_fingerprint_read(sysfs) : NULL;
        _cleanup_(backend_freep) struct amd_backend *b = xcalloc(1, sizeof(*b));
        struct diag why = { 0 };
        int r = amd_inventory_load(sysfs, &b->inv, &why);
        if (r < 0)
                return nothing(cfg, r, &why, out, diag);
        for (size_t i = 0; b->inv->warnings && b->inv->warnings[i]; i++)
                dev_report(DEV_REPORT_HOST_WARN, "amd", "%s", b->inv->warnings[i]);
        if (b->inv->n_gpus == 0) {
                diag_set(&why, -ENODEV, "amdgpu is loaded but drives no GPU");
                return nothing(cfg, -ENODEV, &why, out, diag);
        }
        if (!b->inv->kfd) {
                diag_set(&why, -ENODEV,
                         "amdgpu drives %zu GPU(s) but KFD, the compute interface, is not there "
                         "(no %s/class/kfd): check that the kernel has CONFIG_HSA_AMD and the GPUs "
                         "support compute",
                         b->inv->n_gpus, sysfs);
                return nothing(cfg, -ENODEV, &why, out, diag);
        }
        b->loop = loop;
        const struct amd_options *opts = amd_options_get(cfg);
        b->strategy = xstrdup(opts->resource_naming_strategy);
        b->policy.recovery = cfg->health.recovery_enabled;
        b->policy.quiet_ms = cfg->health.recovery_quiet_ms;
        b->poll_ms = opts->health_interval_ms;
        b->policy.ignore = amd_health_ignore_mask((const char *const *)opts->health_disabled);
        b->policy.no_execute = amd_health_ignore_mask((const char *const *)opts->dra_no_execute);
        health_env_note(b->policy.ignore);
        ctx_fill(&b->ctx, b->inv, cfg);
        r = amd_layout_build(b->inv, cfg, &b->ctx, &b->layout, &why);
        if (r < 0) {
                /* GPUs are there: a refused layout is an initialisation error, as
                 * NVIDIA's are, whether or not --backends names amd */
                if (cfg->fail_on_init_error) {
                        if (diag)
                                *diag = why;
                        return r;
                }
                dev_report(DEV_REPORT_ERROR, "amd", "AMD backend not started, running without it "
                                 "(fail-on-init-error=false) error=\"%s\"",
                          why.message);
                *out = NULL;
                return 0;
        }
        b->sampler = amd_sampler_new(b->inv, opts);
        b->watch = xcalloc(b->inv->n_gpus + 1, sizeof(*b->watch));
        if (loop && b->poll_ms > 0)
                b->threads = amd_health_threads_start(loop, b->inv, b->policy.ignore,
                                                      on_health_result, b);
        if (b->threads) {
                /* what needs no read now; the first reads set the RAS baselines */
                for (size_t i = 0; i < b->inv->n_gpus; i++) {
                        const char *problem = b->inv->gpus[i].problem;
                        struct amd_health_obs obs = { .why = problem ? xstrdup(problem) : NULL,
                                                      .kind = AMD_HEALTH_GONE };
                        amd_health_apply(&b->watch[i], &obs, &b->policy, now_ms(b));
                }
                health_sync(b, false);
        } else {
                if (loop && b->poll_ms > 0)
                        dev_report(DEV_REPORT_HOST_WARN, "amd", "cannot start the health "
                                          "threads: health is read on the loop, which a GPU "
                                          "in reset can stall");
                amd_health_baseline(b->inv, b->watch);
                poll_once(b, false);
        }
        size_t served = amd_served_gpus(b->inv, cfg);
        if (served < b->inv->n_gpus)
                dev_report(DEV_REPORT_INFO, "amd", "serving the first %zu of %zu GPUs "
                                  "(--amd-device-count, AMD_GPU_DEVICE_COUNT); %s to %s left out",
                          served, b->inv->n_gpus, b->inv->gpus[served].bdf,
                          b->inv->gpus[b->inv->n_gpus - 1].bdf);
        else if (opts->device_count > 0 && (size_t)opts->device_count > b->inv->n_gpus)
                dev_report(DEV_REPORT_HOST_WARN, "amd", "--amd-device-count (AMD_GPU_DEVICE_COUNT) "
                                  "is %ld but the node has %zu AMD GPUs: serving all",
                          opts->device_count, b->inv->n_gpus);
        size_t parts = 0;
        for (size_t i = 0; i < b->inv->n_gpus; i++)
                parts += b->inv->gpus[i].n_parts > 1 ? b->inv->gpus[i].n_parts : 0;
        dev_report(DEV_REPORT_INFO, "amd", "found GPUs gpus=%zu partitions=%zu driver=%s strategy=%s resources=%zu "
                        "health=%s",
                 b->inv->n_gpus, parts, b->inv->driver_version[0] ? b->inv->driver_version : "?",
                 b->strategy, b->layout.n_res,
                 !loop ? "one-shot"
                 : b->poll_ms <= 0 || b->policy.ignore == AMD_HEALTH_ALL ? "off"
                 : b->policy.ignore ? "partly ignored"
                                    : "polled");
        if (loop && b->poll_ms > 0) {
                uv_timer_init(loop, &b->timer);
                b->timer.data = b;
                /* with threads, the first reads start at once */
                uv_timer_start(&b->timer, on_poll, b->threads ? 0 : (uint64_t)b->poll_ms,
                               (uint64_t)b->poll_ms);
                b->timer_on = true;
        }
        if (loop)
                b->hotplug = amd_watch_start(loop, b, sysfs, TAKE_PTR(fingerprint),
                                             cfg->rescan_interval_ms);
        *out = (struct dev_backend *)TAKE_PTR(b);
        return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
        backend_free(h->data);
}

static void amd_destroy(struct dev_backend *db)
{
        struct amd_backend *b = (struct amd_backend *)db;
        if (!b)
                return;
        amd_health_threads_stop(TAKE_PTR(b->threads)); /* no result after this */
        amd_watch_stop(TAKE_PTR(b->hotplug));          /* no uevent or check either */
        if (b->timer_on) {
                uv_timer_stop(&b->timer);
                uv_close((uv_handle_t *)&b->timer, on_timer_closed);
                return;
        }
        backend_free(b);
}

static struct dev_resource **amd_resources(struct dev_backend *db, size_t *n)
{
        struct amd_backend *b = (struct amd_backend *)db;
        *n = b->layout.n_res;
        return b->layout.res;
}

static void amd_inherit(struct dev_backend *db, struct dev_backend *dprev)
{
        struct amd_backend *b = (struct amd_backend *)db, *prev = (struct amd_backend *)dprev;
        for (size_t i = 0; i < b->inv->n_gpus; i++)
                for (size_t j = 0; j < prev->inv->n_gpus; j++) {
                        if (strcmp(b->inv->gpus[i].bdf, prev->inv->gpus[j].bdf) != 0)
                                continue;
                        struct amd_gpu_watch *w = &b->watch[i];
                        const struct amd_gpu_watch *o = &prev->watch[j];
                        /* a GPU, node or KFD node that was missing: b's scan
                         * says whether it still is */
                        bool stale = o->rescan_sees || prev->inv->gpus[j].problem;
                        if (o->ue_known) {
                                w->ue_known = true;
                                w->ue_total = o->ue_total > w->ue_total ? o->ue_total : w->ue_total;
                        }
                        if (o->bad && !stale && !w->bad) {
                                w->bad = true;
                                w->kind = o->kind;
                                w->since = o->since;
                                w->bad_since = o->bad_since;
                                w->reason = xstrdup(o->reason);
                        } else if (o->bad && !stale && o->since > w->since) {
                                w->since = o->since;
                        }
                }
        health_sync(b, false);
}

/* AMD's node labeller's labels (the groups its flags select: all without
 * any), and "<resource>.count" for the partition resources
 * (amd.com/gpu.count is the labeller's: physical GPUs). */
static void amd_labels_op(struct dev_backend *db, const struct devlet_config *cfg,
                          struct dev_labels *out, char ***warnings)
{
        struct amd_backend *b = (struct amd_backend *)db;
        size_t n = 0;
        struct dev_kv *kv = amd_labels(b->inv, &n);
        const struct amd_options *o = amd_options_get(cfg);
        for (size_t i = 0; i < n; i++)
                if (amd_label_selected(o, kv[i].key))
                        dev_labels_put(out, kv[i].key, kv[i].value);
        amd_labels_free(kv, n);
        for (size_t i = 0; i < b->layout.n_res; i++) {
                const struct dev_resource *r = b->layout.res[i];
                if (strcmp(r->name, AMD_GPU_RESOURCE) == 0)
                        continue;
                _cleanup_free_ char *key = xasprintf("%s.count", r->name);
                dev_labels_putf(out, key, "%zu", dev_resource_healthy(r));
        }
}

static struct dev_sampler *amd_sampler(struct dev_backend *db)
{
        struct amd_backend *b = (struct amd_backend *)db;
        return b->sampler ? dev_sampler_ref(b->sampler) : NULL;
}

const struct dev_backend_ops amd_backend_ops = {
        .name = "amd",
        .dra_driver = "gpu.amd.com",
        .create = amd_create,
        .destroy = amd_destroy,
        .resources = amd_resources,
        .inherit = amd_inherit,
        .describe = amd_describe,
        .describe_json = amd_describe_json,
        .labels = amd_labels_op,
        .sampler = amd_sampler,
        .attr_hints = &amd_attr_hints,
};
