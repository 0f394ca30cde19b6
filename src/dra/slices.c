/* The node's ResourceSlices, kept equal to the device table through the
 * API server, on the loop: one informer of the driver's slices on this
 * node (kapi/informer.h: a streaming list, then watches from its
 * resourceVersion; no periodic LIST: the watch keeps the cache true) and
 * a publisher that compares the cache with the desired slices and writes
 * only what differs, one call at a time, through kapi's loop calls.
 *
 * What is written:
 *   - each desired slice carries the hash of its own content (annotation
 *     devlet.io/content-hash; the API server adds defaults of its own, so
 *     contents are never compared field by field);
 *   - nothing is written while the cache holds the desired slices, each
 *     with its hash, all of one generation;
 *   - else the pool's generation is bumped and every slice written with
 *     it (the API's rule: a change of a pool is a new generation on all
 *     its slices, and consumers use the highest), then the extra ones
 *     deleted; a node's pool is one slice up to DRA_SLICE_DEVICES_MAX
 *     devices, so a health change writes one slice;
 *   - every slice is owned by its Node (an owner reference with the
 *     Node's uid, read once), so the garbage collector removes the slices
 *     of a node that is deleted.
 * When: a table change or a cache event marks the pool dirty; a reconcile
 * starts at the earliest DRA_PUBLISH_SPACING_MS after the last one began
 * (a burst of changes is written once, about a second later at most); one
 * that writes after DRA_PUBLISH_FIGHTS that each wrote in a row means
 * someone keeps undoing our slices, and the spacing then grows to
 * DRA_BACKOFF_CAP_MS: a fight is paced, never a loop.  A failed write is
 * retried after kapi_backoff_ms.  Never blocks the loop; logs what an
 * operator must see, once per change of state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "dra/internal.h"
#include "kapi/informer.h"

#define DRA_CALL_MS 10000
#define DRA_BACKOFF_CAP_MS 30000
/* Reconciles start at least this far apart, so a burst of changes (health
 * flapping, a run of watch events) is written once; a change after a quiet
 * spell goes out at once. */
#define DRA_PUBLISH_SPACING_MS 1000
/* Writes this many reconciles in a row, each soon after the last, mean
 * someone keeps undoing our slices (another writer, a hostile server):
 * from then on the spacing grows as kapi_backoff_ms does, to its cap. */
#define DRA_PUBLISH_FIGHTS 3
/* A reconcile that starts this long after the earliest it could have is
 * not part of a fight. */
#define DRA_PUBLISH_QUIET_MS 5000
/* The Node's uid is asked for again at most this often after it failed. */
#define DRA_NODE_RETRY_MS (5 * 60 * 1000)
/* How long a write's own event may take to come back. */
#define DRA_ECHO_MS 10000
/* A node's slices of one driver: more is someone else's doing. */
#define DRA_SLICES_MAX 256

static const char *const slices_path = "/apis/resource.k8s.io/v1/resourceslices";

static const char *annotation(const json_t *obj, const char *key)
{
        const json_t *a = json_object_get(json_object_get(obj, "metadata"), "annotations");
        const json_t *v = json_object_get(a, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *meta_str(const json_t *obj, const char *key)
{
        const json_t *v = json_object_get(json_object_get(obj, "metadata"), key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static char *selector_query(const char *node, const char *driver)
{
        return kapi_field_selector("spec.nodeName=%s,spec.driver=%s", node, driver);
}

int dra_slices_delete(struct kapi_client *api, const char *node, const char *driver,
                      long timeout_ms, const atomic_bool *stop, struct diag *diag)
{
        _cleanup_free_ char *q = selector_query(node, driver);
        _cleanup_free_ char *path = xasprintf("%s?%s", slices_path, q);
        struct kapi_response resp = { 0 };
        int r = kapi_request(api, "DELETE", path, NULL, timeout_ms, stop, &resp, diag);
        long status = resp.status;
        kapi_response_release(&resp);
        if (r < 0)
                return r;
        return status >= 200 && status < 300 ? 0 : -EPROTO;
}

/* ---- the publisher's state (loop thread) ---- */

struct dra_pub {
        struct dra_driver *drv;
        struct kapi_informer *inf;
        uv_timer_t timer;       /* the next reconcile, while it is active */
        bool dirty;
        bool failing, warned_node;
        bool watch_failing;     /* the informer failed since it last synced */
        unsigned attempt, fights;
        uint64_t next_ms;       /* the earliest the next reconcile may start */
        long long generation;   /* the pool generation last written */
        /* the writes of one reconcile, one call at a time */
        json_t *ops;            /* [{"method","path","body","name"}] */
        /* slices written whose event has not come back yet: {name: ms};
         * the cache is behind for them, and a reconcile waits for it (at
         * most DRA_ECHO_MS) rather than write again with a stale version */
        json_t *written;
        size_t op;
        int writes;
        struct kapi_call *call;
        char *node_uid;         /* the Node's, for the owner reference */
        uint64_t node_tried_ms;
        bool node_asked;        /* the Node's GET is in flight */
        bool taints_dropped;    /* the server dropped our device taints: unhealthy devices left out */
};

static uint64_t now_ms(const struct dra_pub *p)
{
        return uv_now(p->drv->dra->loop);
}

static void reconcile(struct dra_pub *p);

static void on_timer(uv_timer_t *t)
{
        reconcile(t->data);
}

/* A reconcile at the earliest allowed, unless one is set or running. */
static void schedule(struct dra_pub *p)
{
        p->dirty = true;
        if (uv_is_active((uv_handle_t *)&p->timer) || p->call || p->node_asked || !p->drv->table)
                return;
        uint64_t now = now_ms(p);
        uv_timer_start(&p->timer, on_timer, p->next_ms > now ? p->next_ms - now : 0, 0);
}

static void retry_later(struct dra_pub *p, long ms)
{
        p->dirty = true;
        uv_timer_start(&p->timer, on_timer, (uint64_t)(ms > 0 ? ms : 0), 0);
}

/* ---- the Node's uid ---- */

static void on_node(void *ud, int r, struct kapi_response *resp, struct diag *why)
{
        struct dra_pub *p = ud;
        p->call = NULL;
        p->node_asked = false;
        const char *uid = r == 0 && resp->status == 200 ? meta_str(resp->body, "uid") : NULL;
        if (uid && uid[0] && strlen(uid) < 64) {
                p->node_uid = xstrdup(uid);
        } else if (!p->warned_node) {
                p->warned_node = true;
                log_warn("dra", "cannot read the Node's uid; slices are written without an owner "
                                "reference node=%s error=\"%s\"",
                         p->drv->dra->node,
                         r < 0 || resp->status >= 400 ? why->message : "no uid");
        }
        reconcile(p);
}

static bool ask_node(struct dra_pub *p)
{
        if (p->node_uid || (p->node_tried_ms && now_ms(p) - p->node_tried_ms < DRA_NODE_RETRY_MS))
                return false;
        p->node_tried_ms = now_ms(p);
        static const struct kapi_keep keep = { .spec = "{metadata{uid}}" };
        _cleanup_free_ char *name = kapi_escape(p->drv->dra->node);
        _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", name);
        struct diag why = { 0 };
        if (kapi_request_start(p->drv->dra->api, p->drv->dra->loop, "GET", path, NULL, &keep,
                               DRA_CALL_MS, on_node, p, &p->call, &why) < 0)
                return false;
        p->node_asked = true;
        return true;
}

/* ---- writes ---- */

static void next_op(struct dra_pub *p);

/* The reconcile ended (r < 0: a write failed, why says which). */
static void reconcile_end(struct dra_pub *p, int r, const char *why)
{
        json_decref(p->ops);
        p->ops = NULL;
        struct dra_driver *drv = p->drv;
        if (r < 0) {
                if (!p->failing)
                        log_warn("dra", "cannot publish ResourceSlices, retrying driver=%s "
                                        "error=\"%s\"",
                                 drv->name, why && why[0] ? why : strerror(-r));
                p->failing = true;
                retry_later(p, kapi_backoff_ms(p->attempt++, DRA_BACKOFF_CAP_MS));
                return;
        }
        if (p->failing || p->writes) {
                size_t healthy = 0;
                for (size_t i = 0; drv->table && i < drv->table->n; i++)
                        healthy += drv->table->devs[i].healthy;
                log_info("dra", "published ResourceSlices driver=%s node=%s devices=%zu writes=%d",
                         drv->name, drv->dra->node, healthy, p->writes);
        }
        p->failing = false;
        p->attempt = 0;
        p->fights = p->writes ? p->fights + 1 : 0;
        p->next_ms = now_ms(p) + (uint64_t)(p->fights < DRA_PUBLISH_FIGHTS
                                                    ? DRA_PUBLISH_SPACING_MS
                                                    : kapi_backoff_ms(p->fights -
                                                                              DRA_PUBLISH_FIGHTS + 3,
                                                                      DRA_BACKOFF_CAP_MS));
        if (p->dirty)
                schedule(p);
}

/* From a write's answer: its resourceVersion, and whether the devices
 * kept their taints. */
static const struct kapi_keep written_keep = {
        .spec = "{metadata{resourceVersion},spec{devices[{taints[{key}]}]}}",
};

static bool any_taint(const json_t *slice)
{
        size_t i;
        const json_t *d;
        json_array_foreach(json_object_get(json_object_get(slice, "spec"), "devices"), i, d)
                if (json_array_size(json_object_get(d, "taints")))
                        return true;
        return false;
}

static void on_write(void *ud, int r, struct kapi_response *resp, struct diag *why)
{
        struct dra_pub *p = ud;
        p->call = NULL;
        const json_t *op = json_array_get(p->ops, p->op);
        const char *method = json_string_value(json_object_get(op, "method"));
        long status = resp ? resp->status : 0;
        bool ok = r == 0 && status >= 200 && status < 300;
        /* a slice already gone is what a DELETE wanted */
        if (r == 0 && status == 404 && method && strcmp(method, "DELETE") == 0)
                ok = true;
        if (!ok) {
                if (r == 0 && !why->message[0])
                        diag_set(why, -EPROTO, "%s: HTTP %ld", method, status);
                /* a conflict: the cache is behind; the watch brings the
                 * slice and the next reconcile starts from it */
                reconcile_end(p, r < 0 ? r : -EPROTO, why->message);
                return;
        }
        const char *name = json_string_value(json_object_get(op, "name"));
        const char *rv = resp ? meta_str(resp->body, "resourceVersion") : NULL;
        bool del = method && strcmp(method, "DELETE") == 0;
        json_t *w = name ? json_object_get(p->written, name) : NULL;
        if (w && json_is_true(json_object_get(w, "seen")))
                json_object_del(p->written, name); /* its event came first */
        else if (w)
                json_object_update_new(w, json_pack("{s:I, s:s?, s:b}", "at", (json_int_t)now_ms(p),
                                                "rv", rv, "del", del));
        if (!del && !p->taints_dropped && any_taint(json_object_get(op, "body")) &&
            !(resp && any_taint(resp->body))) {
                /* DRADeviceTaints off (alpha before 1.36): a device sent
                 * tainted is published schedulable.  Leave the unhealthy
                 * ones out instead, as before taints. */
                log_warn("dra", "the API server drops device taints (DRADeviceTaints off): "
                                "unhealthy devices leave the ResourceSlices instead driver=%s",
                         p->drv->name);
                p->taints_dropped = true;
                p->dirty = true;
        }
        p->writes++;
        p->op++;
        next_op(p);
}


static void next_op(struct dra_pub *p)
{
        const json_t *op = json_array_get(p->ops, p->op);
        if (!op) {
                reconcile_end(p, 0, NULL);
                return;
        }
        /* its event may come before its answer: on_slice marks it seen */
        json_object_set_new(p->written, json_string_value(json_object_get(op, "name")),
                            json_pack("{s:I, s:b}", "at", (json_int_t)now_ms(p), "seen", 0));
        struct diag why = { 0 };
        int r = kapi_request_start(p->drv->dra->api, p->drv->dra->loop,
                                   json_string_value(json_object_get(op, "method")),
                                   json_string_value(json_object_get(op, "path")),
                                   json_object_get(op, "body"), &written_keep,
                                   DRA_CALL_MS, on_write, p, &p->call, &why);
        if (r < 0)
                reconcile_end(p, r, why.message);
}

static void add_op(json_t *ops, const char *method, const char *path, const char *name,
                   json_t *body)
{
        json_t *op = json_pack("{s:s, s:s, s:s}", "method", method, "path", path, "name", name);
        if (body)
                json_object_set(op, "body", body);
        json_array_append_new(ops, op);
}

/* Whether a write of ours has not come back through the watch yet (the
 * cache is behind for its slice); entries that came back, or are older
 * than DRA_ECHO_MS, are dropped. */
static bool echo_pending(struct dra_pub *p)
{
        json_t *cache = kapi_informer_cache(p->inf);
        uint64_t now = now_ms(p);
        const char *name;
        json_t *w, *tmp;
        bool pending = false;
        json_object_foreach_safe(p->written, tmp, name, w) {
                const json_t *have = json_object_get(cache, name);
                const char *rv = json_string_value(json_object_get(w, "rv"));
                const char *hrv = have ? meta_str(have, "resourceVersion") : NULL;
                bool back = json_is_true(json_object_get(w, "seen")) ||
                            (json_is_true(json_object_get(w, "del"))
                                     ? !have
                                     : rv && hrv && strcmp(rv, hrv) == 0);
                uint64_t at = (uint64_t)json_integer_value(json_object_get(w, "at"));
                if (back || now - at >= DRA_ECHO_MS)
                        json_object_del(p->written, name);
                else
                        pending = true;
        }
        return pending;
}

/* One reconcile: the writes that make the cache the desired slices. */
static void reconcile(struct dra_pub *p)
{
        struct dra_driver *drv = p->drv;
        if (p->call || p->node_asked || !drv->table || !p->dirty)
                return;
        if (!kapi_informer_has_synced(p->inf))
                return; /* the informer's synced schedules it */
        if (p->generation > 0 && p->node_uid && json_object_size(kapi_informer_cache(p->inf)) == 0) {
                /* a wiped pool (the kubelet's start, or the garbage
                 * collector after the Node was replaced): its uid may be
                 * another now */
                free(p->node_uid);
                p->node_uid = NULL;
                p->node_tried_ms = 0;
        }
        if (ask_node(p))
                return; /* on_node goes on */
        if (echo_pending(p)) {
                retry_later(p, DRA_PUBLISH_SPACING_MS); /* or its event, sooner */
                return;
        }
        p->dirty = false;
        p->writes = 0;
        uint64_t quiet = p->next_ms + DRA_PUBLISH_QUIET_MS;
        if (now_ms(p) >= quiet)
                p->fights = 0;

        char hash[17];
        _cleanup_(json_decrefp) json_t *desired =
                dra_slices_desired(drv->table, drv->dra->node, drv->slice_prefix,
                                   !p->taints_dropped, hash);
        json_t *cache = kapi_informer_cache(p->inf);
        json_int_t gen = 0, low = -1;
        const char *key;
        json_t *it;
        json_object_foreach(cache, key, it) {
                const json_t *g = json_object_get(
                        json_object_get(json_object_get(it, "spec"), "pool"), "generation");
                json_int_t v = json_is_integer(g) ? json_integer_value(g) : 0;
                gen = v > gen ? v : gen;
                low = low < 0 || v < low ? v : low;
        }
        /* up to date: the same slices, each with its hash, one generation */
        bool same = json_object_size(cache) == json_array_size(desired) && low == gen;
        size_t k;
        json_t *want;
        json_array_foreach(desired, k, want) {
                const json_t *have = json_object_get(cache, meta_str(want, "name"));
                const char *hh = have ? annotation(have, "devlet.io/content-hash") : NULL;
                const char *wh = annotation(want, "devlet.io/content-hash");
                same = same && hh && wh && strcmp(hh, wh) == 0;
        }
        if (same) {
                reconcile_end(p, 0, NULL);
                return;
        }
        /* a change of the pool is a new generation on all its slices (the
         * API's rule: consumers use the slices of the highest one); never
         * back: a pool whose slices were all deleted (the kubelet wipes
         * them when it starts) continues after what we last wrote */
        if (gen < p->generation)
                gen = p->generation;
        p->generation = ++gen;

        json_t *ops = json_array();
        json_array_foreach(desired, k, want) {
                const char *name = meta_str(want, "name");
                const json_t *have = json_object_get(cache, name);
                json_t *meta = json_object_get(want, "metadata");
                json_object_set_new(json_object_get(json_object_get(want, "spec"), "pool"),
                                    "generation", json_integer(gen));
                if (p->node_uid)
                        json_object_set_new(
                                meta, "ownerReferences",
                                json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "v1",
                                          "kind", "Node", "name", drv->dra->node, "uid",
                                          p->node_uid, "controller", 1));
                const char *rv = have ? meta_str(have, "resourceVersion") : NULL;
                if (rv) {
                        json_object_set_new(meta, "resourceVersion", json_string(rv));
                        _cleanup_free_ char *path = xasprintf("%s/%s", slices_path, name);
                        add_op(ops, "PUT", path, name, want);
                } else {
                        add_op(ops, "POST", slices_path, name, want);
                }
        }
        json_object_foreach(cache, key, it) {
                bool wanted = false;
                json_array_foreach(desired, k, want)
                        wanted = wanted || strcmp(key, meta_str(want, "name")) == 0;
                if (wanted)
                        continue;
                _cleanup_free_ char *name = kapi_escape(key);
                _cleanup_free_ char *path = xasprintf("%s/%s", slices_path, name);
                add_op(ops, "DELETE", path, key, NULL);
        }
        p->ops = ops;
        p->op = 0;
        p->writes = 0;
        next_op(p);
}

/* ---- the informer's news ---- */

static void on_slice(void *ud, enum kapi_informer_event ev, const char *key, const json_t *obj)
{
        struct dra_pub *p = ud;
        json_t *w = json_object_get(p->written, key);
        if (w && p->call) /* a write in flight: its own event, most likely */
                json_object_set_new(w, "seen", json_true());
        else if (w)
                json_object_del(p->written, key);
        /* ours coming back as well as someone else's change: a reconcile
         * compares, and writes only when the cache is not what we want */
        schedule(ud);
}

static void on_synced(void *ud)
{
        struct dra_pub *p = ud;
        if (p->watch_failing)
                log_info("dra", "watching ResourceSlices again driver=%s", p->drv->name);
        p->watch_failing = false;
        schedule(p);
}

static void on_failed(void *ud, int r, const struct diag *why)
{
        struct dra_pub *p = ud;
        const char *msg = why && why->message[0] ? why->message : strerror(-r);
        if (!p->watch_failing)
                log_warn("dra", "cannot watch ResourceSlices, retrying driver=%s error=\"%s\"",
                         p->drv->name, msg);
        else
                log_debug("dra", "slice watch failed again driver=%s error=\"%s\"",
                          p->drv->name, msg);
        p->watch_failing = true;
}

int dra_pub_start(struct dra_driver *drv, struct diag *diag)
{
        struct dra_pub *p = xcalloc(1, sizeof(*p));
        p->drv = drv;
        p->written = json_object();
        _cleanup_free_ char *q = selector_query(drv->dra->node, drv->name);
        const struct kapi_informer_config cfg = {
                .path = slices_path,
                .selector = q,
                .annotations = "devlet.io/content-hash",
                .rest = "spec{pool{generation}}",
                .max_values = 64,
                .max_objects = DRA_SLICES_MAX,
        };
        const struct kapi_informer_ops ops = {
                .event = on_slice,
                .synced = on_synced,
                .failed = on_failed,
        };
        int r = kapi_informer_start(drv->dra->loop, drv->dra->api, &cfg, &ops, p, &p->inf, diag);
        if (r < 0) {
                free(p);
                return r;
        }
        uv_timer_init(drv->dra->loop, &p->timer);
        p->timer.data = p;
        drv->pub = p;
        return 0;
}

void dra_pub_changed(struct dra_driver *drv)
{
        if (drv->pub)
                schedule(drv->pub);
}

static void on_pub_closed(uv_handle_t *h)
{
        struct dra_pub *p = h->data;
        json_decref(p->ops);
        json_decref(p->written);
        free(p->node_uid);
        free(p);
}

void dra_pub_stop(struct dra_driver *drv)
{
        struct dra_pub *p = drv->pub;
        if (!p)
                return;
        drv->pub = NULL;
        kapi_informer_free(p->inf);
        kapi_call_cancel(p->call);
        uv_timer_stop(&p->timer);
        uv_close((uv_handle_t *)&p->timer, on_pub_closed);
}
