/* The node's ResourceSlices, kept equal to the device table through the
 * API server: one publisher thread and one watch thread per driver.
 *
 * The publisher reconciles when woken (the table changed, the watch saw a
 * slice that is not what we last wanted, a retry is due) and every
 * DRA_RESYNC_MS anyway: it lists the pool's slices, and when any differs
 * from the desired content (compared by the content hash devlet puts in
 * an annotation, since the API server adds defaults of its own) it writes
 * them all with the pool's generation bumped, then deletes the extra ones.
 * Reconciles start DRA_PUBLISH_SPACING_MS apart, so a burst of changes is
 * one write; one that writes, after DRA_PUBLISH_FIGHTS that each wrote in
 * a row, means someone keeps undoing our slices, and the spacing then
 * grows to DRA_BACKOFF_CAP_MS: a fight is paced, never a loop.
 * The watch exists so that a slice deleted by someone else (the kubelet
 * wipes a node's slices when it starts) comes back at once.  It starts
 * from a list's resourceVersion (from the watch cache; after a 410 a
 * consistent read), never from the slices' own versions, which can be
 * older than the cache holds; each watch goes on from the resourceVersion
 * of the last event (bookmarks asked for), so one that ends (the server's
 * timeout, a broken connection) misses nothing; after a 410 Gone it lists
 * again, and so does the publisher, since no event tells of what happened
 * before.
 * Every round but a clean end of a watch that lasted waits its
 * kapi_rewatch backoff first (a 410 too), so a server that ends each
 * watch at once or refuses each with 410 never gets a loop.  Backoffs and
 * the resync run to their time: the condition variable they wait on also
 * wakes the claims thread.  Both threads
 * block only in the API client, which checks drv->stop; both log what an
 * operator must see, once per change of state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "dra/internal.h"

#define DRA_RESYNC_MS (5 * 60 * 1000)
#define DRA_CALL_MS 10000
#define DRA_BACKOFF_CAP_MS 30000
/* below the API client's default low-speed time (30 s) */
#define DRA_WATCH_TIMEOUT_S 20
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

static const char *const slices_path = "/apis/resource.k8s.io/v1/resourceslices";
/* What is read of our slices, as listed and as watched: the rest (their
 * devices) is skipped unparsed. */
#define SLICE_KEPT "{metadata{name,resourceVersion,annotations},spec{pool{generation}}}"
static const struct kapi_keep list_keep = {
        .spec = "{metadata{resourceVersion},items[" SLICE_KEPT "]}",
};
/* an ERROR event's object is a Status: its code says 410 */
static const struct kapi_keep event_keep = {
        .spec = "{metadata{name,resourceVersion,annotations},code}",
};

static bool past(const struct timespec *t)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Waits until t or drv->stop (mu held); wake-ups do not end it. */
static void wait_until_ts(struct dra_driver *drv, const struct timespec *t)
{
        while (!atomic_load(&drv->stop) &&
               pthread_cond_timedwait(&drv->cond, &drv->mu, t) != ETIMEDOUT)
                ;
}

/* Waits until ms passed or drv->stop (mu held).  drv->cond also wakes the
 * claims thread and carries every table change, so a wake-up alone never
 * ends a backoff early. */
static void sleep_ms(struct dra_driver *drv, long ms)
{
        struct timespec until = clock_monotonic_in(ms);
        while (!atomic_load(&drv->stop) &&
               pthread_cond_timedwait(&drv->cond, &drv->mu, &until) != ETIMEDOUT)
                ;
}

static char *selector_query(const char *node, const char *driver)
{
        _cleanup_free_ char *sel = xasprintf("spec.nodeName=%s,spec.driver=%s", node, driver);
        _cleanup_free_ char *esc = kapi_escape(sel);
        return xasprintf("fieldSelector=%s", esc);
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

/* A call that must answer 2xx: 0, or <0 with diag (status in *status).
 * keep: what is read of the answer (NULL: all, within kapi's budget; with
 * out NULL nothing is read but its kind). */
static int call_keep(struct dra_driver *drv, const char *method, const char *path,
                     const json_t *body, const struct kapi_keep *keep, json_t **out, long *status,
                     struct diag *diag)
{
        static const struct kapi_keep nothing = { .spec = "{kind}" };
        struct kapi_response resp = { 0 };
        int r = kapi_request_keep(drv->dra->api, method, path, body, out ? keep : &nothing,
                                  DRA_CALL_MS, &drv->stop, &resp, diag);
        *status = resp.status;
        if (r >= 0 && (resp.status < 200 || resp.status >= 300)) {
                if (!diag || !diag->message[0])
                        diag_set(diag, -EPROTO, "%s %s: HTTP %ld", method, path, resp.status);
                r = -EPROTO;
        }
        if (r >= 0 && out)
                *out = json_incref(resp.body);
        kapi_response_release(&resp);
        return r;
}

static int call(struct dra_driver *drv, const char *method, const char *path, const json_t *body,
                json_t **out, long *status, struct diag *diag)
{
        return call_keep(drv, method, path, body, NULL, out, status, diag);
}

/* One reconcile of the pool with t.  0 when the slices are as desired. */
static int reconcile(struct dra_driver *drv, const struct dra_table *t, int *writes,
                     struct diag *diag)
{
        const char *node = drv->dra->node;
        char hash[17];
        json_t *desired = dra_slices_desired(t, node, drv->slice_prefix, hash);
        pthread_mutex_lock(&drv->mu);
        memcpy(drv->desired_hash, hash, sizeof(hash));
        pthread_mutex_unlock(&drv->mu);

        _cleanup_free_ char *q = selector_query(node, drv->name);
        _cleanup_free_ char *list_path = xasprintf("%s?%s", slices_path, q);
        json_t *list = NULL;
        long status;
        int r = call_keep(drv, "GET", list_path, NULL, &list_keep, &list, &status, diag);
        if (r < 0) {
                json_decref(desired);
                return r;
        }
        const json_t *items = json_object_get(list, "items");
        json_int_t gen = 0;
        bool same = json_is_array(items) && json_array_size(items) == json_array_size(desired);
        size_t i;
        const json_t *it;
        json_array_foreach(items, i, it) {
                const json_t *g = json_object_get(json_object_get(json_object_get(it, "spec"), "pool"),
                                                  "generation");
                if (json_is_integer(g) && json_integer_value(g) > gen)
                        gen = json_integer_value(g);
                const char *h = annotation(it, "devlet.io/content-hash");
                if (!h || strcmp(h, hash) != 0)
                        same = false;
        }
        size_t k;
        json_t *want;
        json_array_foreach(desired, k, want) {
                bool found = false;
                json_array_foreach(items, i, it) {
                        const char *n = meta_str(it, "name");
                        found = found || (n && strcmp(n, meta_str(want, "name")) == 0);
                }
                same = same && found;
        }
        if (same) {
                json_decref(list);
                json_decref(desired);
                return 0;
        }

        /* never back: a pool whose slices were all deleted (the kubelet
         * wipes them when it starts) continues after what we last wrote */
        if (gen < drv->generation)
                gen = drv->generation;
        gen++;
        drv->generation = gen;
        json_array_foreach(desired, k, want) {
                json_object_set_new(json_object_get(json_object_get(want, "spec"), "pool"),
                                    "generation", json_integer(gen));
                const char *name = meta_str(want, "name");
                const char *rv = NULL;
                json_array_foreach(items, i, it) {
                        const char *n = meta_str(it, "name");
                        if (n && strcmp(n, name) == 0)
                                rv = meta_str(it, "resourceVersion");
                }
                if (rv) {
                        json_object_set_new(json_object_get(want, "metadata"), "resourceVersion",
                                            json_string(rv));
                        _cleanup_free_ char *path = xasprintf("%s/%s", slices_path, name);
                        r = call(drv, "PUT", path, want, NULL, &status, diag);
                } else {
                        r = call(drv, "POST", slices_path, want, NULL, &status, diag);
                }
                if (r < 0)
                        goto out;
                (*writes)++;
        }
        json_array_foreach(items, i, it) {
                const char *n = meta_str(it, "name");
                bool wanted = false;
                json_array_foreach(desired, k, want)
                        wanted = wanted || (n && strcmp(n, meta_str(want, "name")) == 0);
                if (wanted || !n)
                        continue;
                _cleanup_free_ char *path = xasprintf("%s/%s", slices_path, n);
                r = call(drv, "DELETE", path, NULL, NULL, &status, diag);
                if (r < 0 && status != 404)
                        goto out;
                r = 0;
                (*writes)++;
        }
out:
        json_decref(list);
        json_decref(desired);
        return r;
}

void *dra_publisher_main(void *ud)
{
        struct dra_driver *drv = ud;
        unsigned attempt = 0, fights = 0;
        bool failing = false;
        struct timespec next = { 0 }; /* the earliest the next reconcile may start */
        pthread_mutex_lock(&drv->mu);
        for (;;) {
                struct timespec resync = clock_monotonic_in(DRA_RESYNC_MS);
                while (!drv->pub_dirty && !atomic_load(&drv->stop))
                        if (pthread_cond_timedwait(&drv->cond, &drv->mu, &resync) == ETIMEDOUT)
                                drv->pub_dirty = true;
                struct timespec quiet = next;
                quiet.tv_sec += DRA_PUBLISH_QUIET_MS / 1000;
                if (past(&quiet))
                        fights = 0;
                wait_until_ts(drv, &next); /* what comes meanwhile is written with it */
                if (atomic_load(&drv->stop))
                        break;
                drv->pub_dirty = false;
                struct dra_table *t = dra_table_ref(drv->table);
                pthread_mutex_unlock(&drv->mu);

                struct diag why = { 0 };
                int writes = 0;
                int r = t ? reconcile(drv, t, &writes, &why) : 0;
                size_t healthy = 0;
                for (size_t i = 0; t && i < t->n; i++)
                        healthy += t->devs[i].healthy;
                dra_table_unref(t);

                pthread_mutex_lock(&drv->mu);
                if (atomic_load(&drv->stop))
                        break;
                if (r < 0) {
                        if (!failing)
                                log_warn("dra", "cannot publish ResourceSlices, retrying driver=%s "
                                                "error=\"%s\"",
                                         drv->name, why.message[0] ? why.message : strerror(-r));
                        failing = true;
                        sleep_ms(drv, kapi_backoff_ms(attempt++, DRA_BACKOFF_CAP_MS));
                        drv->pub_dirty = true;
                        continue;
                }
                if (failing || writes)
                        log_info("dra", "published ResourceSlices driver=%s node=%s devices=%zu "
                                        "writes=%d",
                                 drv->name, drv->dra->node, healthy, writes);
                failing = false;
                attempt = 0;
                fights = writes ? fights + 1 : 0;
                next = clock_monotonic_in(
                        fights < DRA_PUBLISH_FIGHTS
                                ? DRA_PUBLISH_SPACING_MS
                                : kapi_backoff_ms(fights - DRA_PUBLISH_FIGHTS + 3, DRA_BACKOFF_CAP_MS));
        }
        pthread_mutex_unlock(&drv->mu);
        return NULL;
}

/* The watch's place in the slices' history: the resourceVersion of the
 * last event (a bookmark's too), so a watch that ends (the server's
 * timeout, a broken connection) goes on from there and misses nothing;
 * empty after a 410 Gone, when the history is too old to go on from. */
struct watch_state {
        struct dra_driver *drv;
        char rv[64];
        bool gone;
        struct kapi_rewatch pace;
};

static void keep_rv(struct watch_state *st, const json_t *object)
{
        const char *rv = meta_str(object, "resourceVersion");
        size_t n = rv ? strlen(rv) : 0;
        if (n == 0 || n >= sizeof(st->rv))
                return;
        for (size_t i = 0; i < n; i++)
                if (!((rv[i] >= '0' && rv[i] <= '9') || (rv[i] >= 'a' && rv[i] <= 'z') ||
                      (rv[i] >= 'A' && rv[i] <= 'Z') || rv[i] == '-' || rv[i] == '.'))
                        return;
        memcpy(st->rv, rv, n + 1);
}

static int on_slice_event(const char *type, json_t *object, void *ud)
{
        struct watch_state *st = ud;
        struct dra_driver *drv = st->drv;
        if (strcmp(type, "ERROR") == 0) {
                const json_t *code = json_object_get(object, "code");
                st->gone = json_is_integer(code) && json_integer_value(code) == 410;
                return 1;
        }
        keep_rv(st, object);
        kapi_rewatch_progress(&st->pace);
        if (strcmp(type, "BOOKMARK") == 0)
                return 0;
        const char *h = annotation(object, "devlet.io/content-hash");
        pthread_mutex_lock(&drv->mu);
        if (drv->desired_hash[0] &&
            (strcmp(type, "DELETED") == 0 || !h || strcmp(h, drv->desired_hash) != 0)) {
                drv->pub_dirty = true;
                pthread_cond_broadcast(&drv->cond);
        }
        pthread_mutex_unlock(&drv->mu);
        return 0;
}

/* The list's resourceVersion (its items skipped unparsed), where a watch
 * from nowhere starts: the objects' own versions, which a watch without
 * one would replay, can be older than the server's watch cache, and every
 * watch from them would be refused with 410.  consistent: a read from
 * etcd (after a 410, when the cache's version is what was too old), else
 * served from the watch cache (resourceVersion=0). */
static int list_rv(struct watch_state *st, const char *q, bool consistent, struct diag *why)
{
        static const struct kapi_keep rv_keep = { .spec = "{metadata{resourceVersion}}" };
        struct dra_driver *drv = st->drv;
        _cleanup_free_ char *path =
                xasprintf("%s?%s%s", slices_path, q, consistent ? "" : "&resourceVersion=0");
        struct kapi_response resp = { 0 };
        int r = kapi_request_keep(drv->dra->api, "GET", path, NULL, &rv_keep, DRA_CALL_MS,
                                  &drv->stop, &resp, why);
        if (r == 0 && resp.status != 200)
                r = -EPROTO;
        if (r == 0) {
                keep_rv(st, resp.body);
                if (!st->rv[0])
                        r = diag_set(why, -EBADMSG, "GET %s: a list without a resourceVersion",
                                     slices_path);
        }
        kapi_response_release(&resp);
        return r;
}

void *dra_watch_main(void *ud)
{
        struct watch_state st = { .drv = ud };
        struct dra_driver *drv = st.drv;
        _cleanup_free_ char *q = selector_query(drv->dra->node, drv->name);
        bool missed = false, consistent = false;
        while (!atomic_load(&drv->stop)) {
                struct diag why = { 0 };
                long status = 0;
                kapi_rewatch_begin(&st.pace);
                int r = 0;
                if (!st.rv[0]) {
                        /* what happened before the list is in no event: a
                         * slice deleted meanwhile, so the publisher lists */
                        if (missed) {
                                pthread_mutex_lock(&drv->mu);
                                drv->pub_dirty = true;
                                pthread_cond_broadcast(&drv->cond);
                                pthread_mutex_unlock(&drv->mu);
                        }
                        r = list_rv(&st, q, consistent, &why);
                        consistent = consistent && r < 0;
                }
                if (r == 0) {
                        _cleanup_free_ char *path = xasprintf(
                                "%s?%s&watch=1&timeoutSeconds=%d&allowWatchBookmarks=true"
                                "&resourceVersion=%s",
                                slices_path, q, DRA_WATCH_TIMEOUT_S, st.rv);
                        r = kapi_watch_keep(drv->dra->api, path, &event_keep, &drv->stop,
                                            on_slice_event, &st, &status, &why);
                }
                if (atomic_load(&drv->stop))
                        break;
                bool gone = st.gone || status == 410;
                consistent = consistent || gone;
                if (gone) {
                        /* too far behind: from nowhere again, after the backoff */
                        st.rv[0] = '\0';
                        st.gone = false;
                }
                long wait = kapi_rewatch_end(&st.pace, r == 0 && !gone, DRA_BACKOFF_CAP_MS);
                if (wait == 0) {
                        missed = false;
                        continue;
                }
                log_debug("dra", "slice watch ended driver=%s r=%d status=%ld wait_ms=%ld "
                                 "error=\"%s\"",
                          drv->name, r, status, wait, gone ? "410 Gone" : why.message);
                missed = true;
                pthread_mutex_lock(&drv->mu);
                sleep_ms(drv, wait);
                pthread_mutex_unlock(&drv->mu);
        }
        return NULL;
}
