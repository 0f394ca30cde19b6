/* GPU health: an NVML event set on a thread of its own, because
 * nvmlEventSetWait blocks.
 *
 * The thread owns the event set and its per-GPU view (unhealthy or not,
 * since when, whether it may ever recover).  It loops on nvmlEventSetWait
 * with a short timeout (wait_ms) so a stop request is noticed quickly, and
 * between waits, at most every wait_ms, it asks each GPU for its memory
 * info: NVML_ERROR_GPU_IS_LOST makes it unhealthy at once; with recovery
 * enabled, an unhealthy GPU that answers again and has had no critical
 * event for quiet_ms becomes healthy.  GPUs whose events cannot be
 * registered never recover (NVIDIA marks them unhealthy too).
 *
 * With health checks off but metrics on (xids_only) the same thread only
 * watches XIDs and posts them, never critical, for the XID metrics: no GPU
 * is judged, probed or marked unhealthy.
 *
 * XID events are judged by the policy; the event's MIG instance IDs are
 * recorded, but the whole GPU goes unhealthy: a fault in one instance is a
 * fault of the board (NVIDIA marks only the MIG device).  ECC events are
 * registered, as NVIDIA does, and skipped: a double-bit error comes with its
 * own XID (48).  A failed wait marks every GPU unhealthy (NVIDIA's rule:
 * it cannot tell which one is at fault).
 *
 * The queue to the loop is a handoff (base/thread.h): the thread posts
 * its messages; the loop takes what came in one turn and hands it to the
 * callback as one batch.  The inbox the other way, under the sleeper's
 * mutex: seeds (GPUs an earlier monitor saw fail, after a reload), taken by
 * the thread whenever a wait ends.
 *
 * Stopping never blocks the loop: stop stops the sleeper and returns; the
 * thread notices when its wait ends and posts its last message, "exited";
 * the loop then joins it (it is past its last NVML call), frees the event
 * set and closes the handoff, and the close callback tells
 * the owner, who may then shut NVML down.  The loop never calls NVML here
 * apart from registration before the thread starts and that last free; the
 * thread never touches devlet's device model.  Logs at debug only: the
 * callback decides what is worth telling. */
#include "devices/nvidia/health.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/thread.h"
#include "base/xalloc.h"

const unsigned long long nvidia_default_ignored_xids[6] = { 13, 31, 43, 45, 68, 109 };

#define EVENT_MASK                                                                                 \
        (nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError |                          \
         nvmlEventTypeSingleBitEccError)

/* ---- XID policy ---- */

static bool xid_in(const unsigned long long *v, size_t n, unsigned long long x)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] == x)
                        return true;
        return false;
}

static void xid_add(unsigned long long *v, size_t *n, unsigned long long x)
{
        if (!xid_in(v, *n, x) && *n < NVIDIA_XID_LIST_MAX)
                v[(*n)++] = x;
}

/* Calls item() for each trimmed, lower-cased, non-empty comma-separated
 * item of s. */
static void each_item(const char *s, void (*item)(const char *it, void *ud), void *ud)
{
        if (!s)
                return;
        _cleanup_free_ char *copy = xstrdup(s);
        char *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                while (isspace((unsigned char)*t))
                        t++;
                size_t n = strlen(t);
                while (n > 0 && isspace((unsigned char)t[n - 1]))
                        t[--n] = '\0';
                for (char *c = t; *c; c++)
                        *c = (char)tolower((unsigned char)*c);
                if (*t)
                        item(t, ud);
        }
}

static bool parse_xid(const char *s, unsigned long long *out)
{
        char *end;
        if (!isdigit((unsigned char)*s))
                return false;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end)
                return false;
        *out = v;
        return true;
}

struct policy_parse {
        struct nvidia_xid_policy *p;
        char ***warnings;
        bool disable_all;
        const char *var;
};

static void warn_item(struct policy_parse *pp, const char *it)
{
        _cleanup_free_ char *w = xasprintf("%s: ignoring \"%s\" (want all, xids or XID numbers)",
                                           pp->var, it);
        if (pp->warnings)
                *pp->warnings = strv_push(*pp->warnings, w);
}

static void disable_item(const char *it, void *ud)
{
        struct policy_parse *pp = ud;
        unsigned long long x;
        if (strcmp(it, "all") == 0) {
                pp->disable_all = true;
                pp->p->xids_off = true;
        } else if (strcmp(it, "xids") == 0) {
                pp->p->xids_off = true;
        } else if (parse_xid(it, &x)) {
                xid_add(pp->p->ignored, &pp->p->n_ignored, x);
        } else {
                warn_item(pp, it);
        }
}

static void enable_item(const char *it, void *ud)
{
        struct policy_parse *pp = ud;
        unsigned long long x;
        if (strcmp(it, "all") == 0 || strcmp(it, "xids") == 0)
                pp->p->all_critical = true;
        else if (parse_xid(it, &x))
                xid_add(pp->p->enabled, &pp->p->n_enabled, x);
        else
                warn_item(pp, it);
}

void nvidia_xid_policy_parse(const char *disable, const char *enable,
                             struct nvidia_xid_policy *out, char ***warnings)
{
        memset(out, 0, sizeof(*out));
        for (size_t i = 0; i < ARRAY_SIZE(nvidia_default_ignored_xids); i++)
                xid_add(out->ignored, &out->n_ignored, nvidia_default_ignored_xids[i]);
        struct policy_parse pp = { .p = out, .warnings = warnings, .var = "DP_DISABLE_HEALTHCHECKS" };
        each_item(disable, disable_item, &pp);
        pp.var = "DP_ENABLE_HEALTHCHECKS";
        each_item(enable, enable_item, &pp);
        out->monitor = !pp.disable_all || out->all_critical || out->n_enabled > 0;
}

bool nvidia_xid_critical(const struct nvidia_xid_policy *p, unsigned long long xid)
{
        if (!p->monitor)
                return false;
        if (p->all_critical || xid_in(p->enabled, p->n_enabled, xid))
                return true;
        if (p->xids_off)
                return false;
        return !xid_in(p->ignored, p->n_ignored, xid);
}

char *nvidia_xid_policy_ignored(const struct nvidia_xid_policy *p)
{
        if (p->all_critical)
                return xstrdup("none");
        if (p->xids_off) {
                if (!p->n_enabled)
                        return xstrdup("all");
                char *s = xstrdup("all except ");
                for (size_t i = 0; i < p->n_enabled; i++) {
                        char *t = xasprintf("%s%s%llu", s, i ? "," : "", p->enabled[i]);
                        free(s);
                        s = t;
                }
                return s;
        }
        char *s = xstrdup("");
        for (size_t i = 0; i < p->n_ignored; i++) {
                if (xid_in(p->enabled, p->n_enabled, p->ignored[i]))
                        continue;
                char *t = xasprintf("%s%s%llu", s, *s ? "," : "", p->ignored[i]);
                free(s);
                s = t;
        }
        if (!*s) {
                free(s);
                return xstrdup("none");
        }
        return s;
}

/* ---- the monitor ---- */

struct gpu_view {
        bool bad;
        bool lost;        /* NVML said so at the last probe */
        bool permanent;   /* never recovers (no events, or no handle) */
        bool registered;  /* in the event set */
        int64_t last_bad; /* ms, monotonic */
};

struct nvidia_health {
        struct nvidia_health_cfg cfg;
        nvmlEventSet_t set;
        pthread_t thread;
        struct gpu_view *view; /* the thread's, after start */

        struct sleeper sl; /* the thread's pauses; its mutex guards the seeds */
        struct nvidia_health_seed *seeds;
        size_t n_seeds;
        atomic_bool seeded; /* seeds waiting: the thread's cheap check */
        struct handoff out; /* the messages to the loop */
        nvidia_health_cb cb;
        void *ud;

        /* the loop's, once stop was asked */
        bool stopping;
        void (*done)(void *ud);
        void *done_ud;
};

int64_t nvidia_health_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A message on its way to the loop. */
struct posted {
        struct handoff_item item; /* first */
        bool exited;              /* the thread's last post: it made its last NVML call */
        struct nvidia_health_msg m;
};

#define POSTED_OF(msg) ((struct posted *)((char *)(msg) - offsetof(struct posted, m)))

static struct nvidia_health_msg *msg_new(size_t gpu, enum nvidia_health_kind kind, bool healthy)
{
        struct posted *p = xcalloc(1, sizeof(*p));
        struct nvidia_health_msg *m = &p->m;
        m->gpu = gpu;
        m->kind = kind;
        m->healthy = healthy;
        m->critical = true;
        m->mig = -1;
        return m;
}

static void post(struct nvidia_health *h, struct nvidia_health_msg *m)
{
        handoff_post(&h->out, &POSTED_OF(m)->item);
}

static void msg_free(struct nvidia_health_msg *m)
{
        free(POSTED_OF(m));
}

static void on_closed(struct handoff *out);

/* The thread is gone or about to return: nothing of NVML is in use any
 * more but the event set. */
static void finish(struct nvidia_health *h)
{
        pthread_join(h->thread, NULL);
        h->cfg.lib->event_set_free(h->set);
        h->set = NULL;
        log_debug("nvidia", "health monitor stopped");
        handoff_close(&h->out, on_closed);
}

static void on_posted(struct handoff *out, struct handoff_item *items)
{
        struct nvidia_health *h = handoff_data(out);
        size_t n = 0;
        bool exited = false;
        for (struct handoff_item *it = items; it; it = it->next) {
                exited |= ((struct posted *)it)->exited;
                n++;
        }
        if (!h->stopping && n) {
                _cleanup_free_ struct nvidia_health_msg *batch = xcalloc(n, sizeof(*batch));
                size_t i = 0;
                for (struct handoff_item *it = items; it; it = it->next)
                        if (!((struct posted *)it)->exited)
                                batch[i++] = ((struct posted *)it)->m;
                for (size_t k = 0; k + 1 < i; k++)
                        batch[k].next = &batch[k + 1];
                if (i) {
                        batch[i - 1].next = NULL;
                        h->cb(h->ud, batch, i);
                }
        }
        while (items) {
                struct handoff_item *next = items->next;
                free(items);
                items = next;
        }
        if (h->stopping && exited)
                finish(h);
}

/* Marks gpu unhealthy in the thread's view; posts m when the state changed,
 * when m is an XID (every critical XID is counted by the loop) or when tell
 * is set.  Takes m. */
static void mark_bad(struct nvidia_health *h, size_t gpu, struct nvidia_health_msg *m, bool tell)
{
        struct gpu_view *v = &h->view[gpu];
        bool changed = !v->bad;
        v->bad = true;
        v->last_bad = nvidia_health_now_ms();
        m->since = v->last_bad;
        if (changed || tell || m->kind == NVIDIA_HEALTH_XID)
                post(h, m);
        else
                msg_free(m);
}

static ssize_t gpu_of_handle(const struct nvidia_health *h, nvmlDevice_t d)
{
        const struct nvml_inventory *inv = h->cfg.inv;
        for (size_t i = 0; i < inv->n_gpus; i++)
                if (inv->gpus[i].handle && inv->gpus[i].handle == d)
                        return (ssize_t)i;
        const struct nvml_lib *lib = h->cfg.lib;
        nvmlDevice_t parent;
        if (lib->mig_parent && lib->mig_parent(d, &parent) == NVML_SUCCESS)
                for (size_t i = 0; i < inv->n_gpus; i++)
                        if (inv->gpus[i].handle == parent)
                                return (ssize_t)i;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        if (lib->uuid(d, uuid, sizeof(uuid)) == NVML_SUCCESS)
                for (size_t i = 0; i < inv->n_gpus; i++)
                        if (inv->gpus[i].uuid[0] && strcmp(inv->gpus[i].uuid, uuid) == 0)
                                return (ssize_t)i;
        return -1;
}

static void on_event(struct nvidia_health *h, const nvmlEventData_t *e)
{
        if (e->eventType != nvmlEventTypeXidCriticalError) {
                log_debug("nvidia", "skipping event type=0x%llx", e->eventType);
                return;
        }
        ssize_t gi = gpu_of_handle(h, e->device);
        if (gi < 0) {
                log_debug("nvidia", "event for an unknown device xid=%llu", e->eventData);
                return;
        }
        size_t gpu = (size_t)gi;
        const struct nvml_gpu *g = &h->cfg.inv->gpus[gpu];
        struct nvidia_health_msg *m = msg_new(gpu, NVIDIA_HEALTH_XID, false);
        m->xid = e->eventData;
        if (e->gpuInstanceId != DEVLET_NVML_NO_INSTANCE_ID)
                for (size_t j = 0; j < g->n_migs; j++)
                        if (g->migs[j].gi == e->gpuInstanceId &&
                            (e->computeInstanceId == DEVLET_NVML_NO_INSTANCE_ID ||
                             g->migs[j].ci == e->computeInstanceId))
                                m->mig = (int)j;
        if (m->mig >= 0)
                snprintf(m->reason, sizeof(m->reason), "XID %llu on MIG device %s (gi %u, ci %u)",
                         m->xid, g->migs[m->mig].uuid, g->migs[m->mig].gi, g->migs[m->mig].ci);
        else
                snprintf(m->reason, sizeof(m->reason), "XID %llu", m->xid);
        if (h->cfg.xids_only || !nvidia_xid_critical(h->cfg.policy, m->xid)) {
                m->critical = false;
                m->healthy = !h->view[gpu].bad;
                post(h, m);
                return;
        }
        mark_bad(h, gpu, m, false);
}

static void on_wait_failed(struct nvidia_health *h, nvmlReturn_t r)
{
        const char *why = nvml_lib_strerror(h->cfg.lib, r);
        if (h->cfg.xids_only)
                return; /* nothing is judged */
        for (size_t i = 0; i < h->cfg.inv->n_gpus; i++) {
                struct nvidia_health_msg *m = msg_new(i, NVIDIA_HEALTH_WAIT_FAILED, false);
                snprintf(m->reason, sizeof(m->reason), "waiting for NVML events failed: %s", why);
                mark_bad(h, i, m, false);
        }
}

static bool register_gpu(struct nvidia_health *h, nvmlDevice_t d, char *why, size_t size);

/* The cheap look at every GPU: lost ones go unhealthy, quiet ones that
 * answer come back. */
static void probe(struct nvidia_health *h)
{
        const struct nvml_inventory *inv = h->cfg.inv;
        int64_t now = nvidia_health_now_ms();
        for (size_t i = 0; i < inv->n_gpus; i++) {
                struct gpu_view *v = &h->view[i];
                nvmlDevice_t d = inv->gpus[i].handle;
                if (!d)
                        continue;
                nvmlMemory_t mem;
                nvmlReturn_t r = h->cfg.lib->memory_info(d, &mem);
                if (r == NVML_ERROR_GPU_IS_LOST) {
                        /* told once per loss, even when already unhealthy: the loop
                         * learns the failure lasts (what a reload carries over) */
                        struct nvidia_health_msg *m = msg_new(i, NVIDIA_HEALTH_LOST, false);
                        snprintf(m->reason, sizeof(m->reason), "%s",
                                 nvml_lib_strerror(h->cfg.lib, r));
                        mark_bad(h, i, m, !v->lost);
                        v->lost = true;
                        continue;
                }
                if (r == NVML_SUCCESS)
                        v->lost = false;
                if (!v->bad || v->permanent || !h->cfg.recovery || r != NVML_SUCCESS ||
                    now - v->last_bad < h->cfg.quiet_ms)
                        continue;
                char why[160];
                if (!v->registered && !register_gpu(h, d, why, sizeof(why))) {
                        v->permanent = true;
                        struct nvidia_health_msg *m = msg_new(i, NVIDIA_HEALTH_UNSUPPORTED, false);
                        m->since = v->last_bad;
                        snprintf(m->reason, sizeof(m->reason), "%s", why);
                        post(h, m);
                        continue;
                }
                v->registered = true;
                v->bad = false;
                struct nvidia_health_msg *m = msg_new(i, NVIDIA_HEALTH_RECOVERED, true);
                snprintf(m->reason, sizeof(m->reason),
                         "no critical event for %lld ms and answering NVML again",
                         (long long)(now - v->last_bad));
                post(h, m);
        }
}

/* Applies the seeds the loop handed in, as if this thread had seen those
 * failures: unhealthy, last failed at the later of the seed's time and its
 * own. */
static void take_seeds(struct nvidia_health *h)
{
        if (!atomic_load(&h->seeded))
                return;
        sleeper_lock(&h->sl);
        for (size_t i = 0; i < h->n_seeds; i++) {
                const struct nvidia_health_seed *s = &h->seeds[i];
                if (s->gpu >= h->cfg.inv->n_gpus)
                        continue;
                struct gpu_view *v = &h->view[s->gpu];
                if (!v->bad || s->since > v->last_bad)
                        v->last_bad = s->since;
                v->bad = true;
                log_debug("nvidia", "health seeded gpu=%zu since_ms=%lld", s->gpu,
                          (long long)(nvidia_health_now_ms() - s->since));
        }
        free(h->seeds);
        h->seeds = NULL;
        h->n_seeds = 0;
        atomic_store(&h->seeded, false);
        sleeper_unlock(&h->sl);
}

static void *health_main(void *arg)
{
        struct nvidia_health *h = arg;
        int64_t last_probe = 0;
        take_seeds(h);
        while (!sleeper_stopped(&h->sl)) {
                nvmlEventData_t e;
                nvmlReturn_t r = nvml_lib_event_wait(h->cfg.lib, h->set, &e, h->cfg.wait_ms);
                if (sleeper_stopped(&h->sl))
                        break;
                take_seeds(h);
                if (r == NVML_SUCCESS)
                        on_event(h, &e);
                else if (r != NVML_ERROR_TIMEOUT) {
                        log_debug("nvidia", "event wait failed error=\"%s\"",
                                  nvml_lib_strerror(h->cfg.lib, r));
                        on_wait_failed(h, r);
                        sleeper_pause(&h->sl, (long)h->cfg.wait_ms);
                }
                int64_t now = nvidia_health_now_ms();
                if (!h->cfg.xids_only && now - last_probe >= (int64_t)h->cfg.wait_ms) {
                        probe(h);
                        last_probe = now;
                }
        }
        /* the last touch of h: the loop may join and free once it takes this */
        struct posted *last = xcalloc(1, sizeof(*last));
        last->exited = true;
        handoff_post(&h->out, &last->item);
        return NULL;
}

/* Registers one GPU for the events NVIDIA watches, those it supports.
 * Returns false with why filled when it cannot be watched. */
static bool register_gpu(struct nvidia_health *h, nvmlDevice_t d, char *why, size_t size)
{
        const struct nvml_lib *lib = h->cfg.lib;
        const struct nvidia_xid_policy *p = h->cfg.policy;
        bool need_xids = h->cfg.xids_only || p->all_critical || p->n_enabled > 0 || !p->xids_off;
        unsigned long long supported = EVENT_MASK;
        nvmlReturn_t r;
        if (lib->supported_events && (r = lib->supported_events(d, &supported)) != NVML_SUCCESS) {
                snprintf(why, size, "cannot read its supported events: %s",
                         nvml_lib_strerror(lib, r));
                return false;
        }
        if (need_xids && !(supported & nvmlEventTypeXidCriticalError)) {
                snprintf(why, size, "it does not report XID events (too old to support health "
                                    "checking)");
                return false;
        }
        if ((supported & EVENT_MASK) &&
            (r = lib->register_events(d, supported & EVENT_MASK, h->set)) != NVML_SUCCESS) {
                snprintf(why, size, "%s: %s",
                         r == NVML_ERROR_NOT_SUPPORTED ? "too old to support health checking"
                                                       : "cannot register for events",
                         nvml_lib_strerror(lib, r));
                return false;
        }
        return true;
}

/* Registration, on the loop thread before the thread starts.  Failures go
 * straight to the callback. */
static void register_gpus(struct nvidia_health *h)
{
        const struct nvml_inventory *inv = h->cfg.inv;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                struct gpu_view *v = &h->view[i];
                if (g->lost) {
                        /* unhealthy from the start; comes back (registered then) if NVML
                         * answers again */
                        v->bad = v->lost = true;
                        v->permanent = !g->handle;
                        v->last_bad = nvidia_health_now_ms();
                        continue;
                }
                char why[160];
                if (register_gpu(h, g->handle, why, sizeof(why))) {
                        v->registered = true;
                        continue;
                }
                if (h->cfg.xids_only) {
                        log_debug("nvidia", "no XID events for metrics gpu=%zu why=\"%s\"", i, why);
                        continue;
                }
                v->bad = v->permanent = true;
                v->last_bad = nvidia_health_now_ms();
                struct nvidia_health_msg m = { .gpu = i, .kind = NVIDIA_HEALTH_UNSUPPORTED,
                                               .critical = true, .mig = -1, .since = v->last_bad };
                snprintf(m.reason, sizeof(m.reason), "%s", why);
                h->cb(h->ud, &m, 1);
        }
}

static void on_closed(struct handoff *out)
{
        struct nvidia_health *h = handoff_data(out);
        if (h->done)
                h->done(h->done_ud);
        free(h->seeds);
        sleeper_destroy(&h->sl);
        free(h->view);
        free(h);
}

int nvidia_health_start(uv_loop_t *loop, const struct nvidia_health_cfg *cfg,
                        nvidia_health_cb cb, void *ud, struct nvidia_health **out, struct diag *diag)
{
        const struct nvml_lib *lib = cfg->lib;
        if (!lib->event_set_create || !lib->register_events || !lib->event_set_wait ||
            !lib->event_set_free)
                return diag_set(diag, -ENOTSUP, "NVML lacks the event calls (nvmlEventSetCreate, "
                                "nvmlDeviceRegisterEvents, nvmlEventSetWait, nvmlEventSetFree)");
        nvmlEventSet_t set;
        nvmlReturn_t r = lib->event_set_create(&set);
        if (r != NVML_SUCCESS)
                return diag_set(diag, -EIO, "cannot create an NVML event set: %s",
                                nvml_lib_strerror(lib, r));
        struct nvidia_health *h = xcalloc(1, sizeof(*h));
        h->cfg = *cfg;
        if (h->cfg.wait_ms == 0)
                h->cfg.wait_ms = 500;
        h->set = set;
        h->cb = cb;
        h->ud = ud;
        h->view = xcalloc(cfg->inv->n_gpus + 1, sizeof(*h->view));
        sleeper_init(&h->sl);
        int rc = handoff_init(&h->out, loop, on_posted, h);
        if (rc < 0) {
                lib->event_set_free(h->set);
                sleeper_destroy(&h->sl);
                free(h->view);
                free(h);
                return diag_set(diag, -EIO, "uv_async_init: %s", uv_strerror(rc));
        }
        register_gpus(h);
        rc = thread_start(&h->thread, "devlet-health", NULL, health_main, h);
        if (rc < 0) {
                diag_set(diag, rc, "cannot start the health thread: %s", strerror(-rc));
                lib->event_set_free(h->set);
                h->set = NULL;
                h->stopping = true; /* what registration posted is dropped */
                handoff_close(&h->out, on_closed);
                return rc;
        }
        *out = h;
        return 0;
}

void nvidia_health_seed(struct nvidia_health *h, const struct nvidia_health_seed *seeds,
                        size_t n)
{
        if (!h || !n)
                return;
        sleeper_lock(&h->sl);
        h->seeds = xrealloc(h->seeds, (h->n_seeds + n) * sizeof(*h->seeds));
        memcpy(h->seeds + h->n_seeds, seeds, n * sizeof(*seeds));
        h->n_seeds += n;
        atomic_store(&h->seeded, true);
        sleeper_unlock(&h->sl);
}

void nvidia_health_stop(struct nvidia_health *h, void (*done)(void *ud), void *ud)
{
        if (!h) {
                if (done)
                        done(ud);
                return;
        }
        h->stopping = true;
        h->done = done;
        h->done_ud = ud;
        sleeper_stop(&h->sl);
        /* the thread posts "exited" when it is out; on_posted finishes */
}
