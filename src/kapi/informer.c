/* The informer (see informer.h): one state machine per collection, on the
 * loop, driving kapi's loop calls.
 *
 * A round is one request: a streaming list (a watch with initial events),
 * a page of a LIST, or a watch from the last resourceVersion.  What the
 * next round is follows from how the last ended:
 *   clean end of a watch that lived     -> a watch from rv, at once
 *   any other end, the cache complete   -> after the backoff, a streaming
 *                                          list not older than rv (LIST
 *                                          mode: a watch from rv, and a
 *                                          410 lists again)
 *   the cache not complete (first start, a resync cut short)
 *                                       -> a streaming list or a LIST
 * A resync marks the keys it sees; at its end (the initial-events-end
 * bookmark, the last page) the keys it did not see are DELETED.
 * The timer carries the backoff and the first turn; the one call in
 * flight is cancelled when the informer is freed. */
#include "kapi/informer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/internal.h"
#include "kapi/json-filter.h"

#define RV_MAX 128
#define CONTINUE_MAX 4096
#define PAGES_MAX 10000u
#define INITIAL_END "k8s.io/initial-events-end"

enum round_kind { ROUND_NONE, ROUND_STREAM, ROUND_LIST, ROUND_WATCH };

struct kapi_informer {
        uv_loop_t *loop;
        struct kapi_client *c;
        struct kapi_informer_ops ops;
        void *ud;
        char *path, *selector;
        struct kapi_keep event_keep, list_keep;
        char *event_spec, *list_spec;
        size_t max_objects;
        unsigned page, timeout_min_s, timeout_max_s;

        json_t *cache;      /* {key: object} */
        char rv[RV_MAX];    /* the last resourceVersion ("": none) */
        bool stream_ok;     /* the server serves streaming lists */
        bool complete;      /* the cache is a whole list's (or stream's) */
        bool synced_once;
        bool consistent;    /* LIST mode, after a 410: a read from etcd */
        bool list_next;     /* a stream failed where the server answered: LIST once */
        json_t *seen;       /* the keys a resync saw; NULL outside one */
        char *cont;         /* a LIST's continue token */
        unsigned pages;

        enum round_kind kind;
        struct kapi_call *call;
        struct kapi_rewatch pace;
        bool gone;          /* the round's ERROR event said 410 */
        bool refused;       /* the round's ERROR event refused the parameters */
        int event_err;      /* an event the informer could not take */
        struct diag event_why;
        uv_timer_t timer;
        bool freed;
        struct kapi_informer_stats stats;
};

/* ---- the cache ---- */

static const char *meta_str(const json_t *obj, const char *key)
{
        const json_t *v = json_object_get(json_object_get(obj, "metadata"), key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool rv_ok(const char *rv)
{
        size_t n = rv ? strlen(rv) : 0;
        if (n == 0 || n >= RV_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((rv[i] >= '0' && rv[i] <= '9') || (rv[i] >= 'a' && rv[i] <= 'z') ||
                      (rv[i] >= 'A' && rv[i] <= 'Z') || rv[i] == '-' || rv[i] == '.'))
                        return false;
        return true;
}

static void keep_rv(struct kapi_informer *inf, const char *rv)
{
        if (rv_ok(rv))
                snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
}

/* "namespace/name" or "name" into key; false for an object without a
 * usable name. */
static bool object_key(const json_t *obj, char *key, size_t size)
{
        const char *name = meta_str(obj, "name"), *ns = meta_str(obj, "namespace");
        if (!name || !name[0] || strlen(name) > 253 || (ns && strlen(ns) > 63))
                return false;
        if (ns && ns[0])
                snprintf(key, size, "%s/%s", ns, name);
        else
                snprintf(key, size, "%s", name);
        return true;
}

static void emit(struct kapi_informer *inf, enum kapi_informer_event ev, const char *key,
                 const json_t *obj)
{
        if (inf->ops.event && !inf->freed)
                inf->ops.event(inf->ud, ev, key, obj);
}

/* An object as an event or a resync brought it: into the cache, and to
 * the consumer when it changed.  Returns 0, or -ENOSPC past max_objects. */
static int put(struct kapi_informer *inf, const char *type, json_t *obj)
{
        char key[320];
        if (!object_key(obj, key, sizeof(key)))
                return 0; /* nothing can name it: not ours to keep */
        if (inf->seen)
                json_object_set_new(inf->seen, key, json_true());
        json_t *old = json_object_get(inf->cache, key);
        if (strcmp(type, "DELETED") == 0) {
                if (!old)
                        return 0;
                json_incref(old);
                json_object_del(inf->cache, key);
                emit(inf, KAPI_INFORMER_DELETED, key, old);
                json_decref(old);
                return 0;
        }
        const char *orv = old ? meta_str(old, "resourceVersion") : NULL;
        const char *nrv = meta_str(obj, "resourceVersion");
        if (old && orv && nrv && strcmp(orv, nrv) == 0)
                return 0; /* a resync's copy of what is known */
        if (!old && inf->max_objects && json_object_size(inf->cache) >= inf->max_objects)
                return -ENOSPC;
        json_object_set(inf->cache, key, obj);
        emit(inf, old ? KAPI_INFORMER_MODIFIED : KAPI_INFORMER_ADDED, key, obj);
        return 0;
}

/* A resync ended: what it did not see is gone. */
static void resync_end(struct kapi_informer *inf)
{
        if (!inf->seen)
                return;
        _cleanup_(json_decrefp) json_t *gone = json_array();
        const char *key;
        json_t *v;
        json_object_foreach(inf->cache, key, v)
                if (!json_object_get(inf->seen, key))
                        json_array_append_new(gone, json_string(key));
        size_t i;
        json_array_foreach(gone, i, v) {
                const char *k = json_string_value(v);
                json_t *old = json_incref(json_object_get(inf->cache, k));
                json_object_del(inf->cache, k);
                emit(inf, KAPI_INFORMER_DELETED, k, old);
                json_decref(old);
        }
        json_decref(inf->seen);
        inf->seen = NULL;
        inf->complete = true;
        inf->synced_once = true;
        if (inf->ops.synced && !inf->freed)
                inf->ops.synced(inf->ud);
}

static void resync_begin(struct kapi_informer *inf)
{
        json_decref(inf->seen);
        inf->seen = json_object();
        inf->complete = false;
}

/* ---- rounds ---- */

static void round_start(struct kapi_informer *inf);

static void on_timer(uv_timer_t *t)
{
        struct kapi_informer *inf = t->data;
        if (!inf->freed)
                round_start(inf);
}

static void fail(struct kapi_informer *inf, int r, const struct diag *why)
{
        inf->stats.failures++;
        if (inf->ops.failed && !inf->freed)
                inf->ops.failed(inf->ud, r, why);
}

/* The round ended: the next after its wait. */
static void round_end(struct kapi_informer *inf, bool clean)
{
        inf->call = NULL;
        inf->kind = ROUND_NONE;
        if (inf->freed)
                return;
        long wait = kapi_rewatch_end(&inf->pace, clean, KAPI_INFORMER_BACKOFF_CAP_MS);
        if (wait > 0)
                log_debug("kapi", "informer round ended path=%s clean=%d wait_ms=%ld", inf->path,
                          clean, wait);
        uv_timer_start(&inf->timer, on_timer, (uint64_t)(wait > 0 ? wait : 0), 0);
}

static int on_event(const char *type, json_t *object, void *ud)
{
        struct kapi_informer *inf = ud;
        if (strcmp(type, "ERROR") == 0) {
                const json_t *code = json_object_get(object, "code");
                long status = json_is_integer(code) ? (long)json_integer_value(code) : 0;
                inf->gone = status == 410;
                inf->refused = status == 400 || status == 422;
                const char *msg = json_string_value(json_object_get(object, "message"));
                diag_set(&inf->event_why, -EPROTO, "GET %.200s: an ERROR event: %ld %.300s",
                         inf->path, status, msg ? msg : "");
                inf->event_err = -EPROTO;
                return 1;
        }
        kapi_rewatch_progress(&inf->pace);
        keep_rv(inf, meta_str(object, "resourceVersion"));
        if (strcmp(type, "BOOKMARK") == 0) {
                const json_t *a = json_object_get(json_object_get(object, "metadata"),
                                                  "annotations");
                const char *end = json_string_value(json_object_get(a, INITIAL_END));
                if (inf->kind == ROUND_STREAM && inf->seen && end && strcmp(end, "true") == 0)
                        resync_end(inf);
                return 0;
        }
        if (strcmp(type, "ADDED") != 0 && strcmp(type, "MODIFIED") != 0 &&
            strcmp(type, "DELETED") != 0)
                return 0; /* a type of tomorrow: not ours to judge */
        int r = put(inf, type, object);
        if (r < 0) {
                diag_set(&inf->event_why, r, "GET %.200s: more than %zu objects", inf->path,
                         inf->max_objects);
                inf->event_err = r;
                return 1;
        }
        return inf->freed ? 1 : 0;
}

static void on_watch_done(void *ud, int r, struct kapi_response *resp, struct diag *why)
{
        struct kapi_informer *inf = ud;
        enum round_kind kind = inf->kind;
        inf->call = NULL;
        if (inf->freed)
                return;
        long status = resp ? resp->status : 0;
        bool gone = inf->gone || status == 410;
        bool refused = kind == ROUND_STREAM &&
                       (inf->refused || (r == -EPROTO && (status == 400 || status == 422)));
        if (r == 1 && inf->event_err)
                r = inf->event_err;
        const struct diag *d = inf->event_err ? &inf->event_why : why;
        if (refused) {
                /* WatchList is off here: LIST and WATCH from now on */
                log_debug("kapi", "no streaming lists path=%s status=%ld", inf->path, status);
                inf->stream_ok = false;
                inf->seen = (json_decref(inf->seen), NULL);
                inf->gone = inf->refused = false;
                inf->event_err = 0;
                inf->kind = ROUND_NONE;
                uv_timer_start(&inf->timer, on_timer, 0, 0);
                return;
        }
        if (gone) {
                inf->stats.gone++;
                if (!inf->stream_ok) {
                        inf->rv[0] = '\0';
                        inf->consistent = true;
                }
        }
        bool clean = r == 0 && !gone && !inf->event_err;
        if (kind == ROUND_STREAM && inf->seen) {
                /* cut short before its initial events ended: where the
                 * server answered (a stream it ended, a 410), the next
                 * resync is a LIST, as client-go falls back ("progress is
                 * better than a deadlock"); streams are tried again after */
                inf->seen = (json_decref(inf->seen), NULL);
                clean = false;
                inf->list_next = gone || (status >= 200 && status < 300);
        }
        if (!clean) {
                if (!gone && r != 0)
                        fail(inf, r, d);
                else if (gone)
                        log_debug("kapi", "watch too old (410) path=%s", inf->path);
        }
        inf->gone = inf->refused = false;
        inf->event_err = 0;
        round_end(inf, clean);
}

static void start_watch(struct kapi_informer *inf, bool stream)
{
        long t = kapi_random_between(inf->timeout_min_s, inf->timeout_max_s);
        const char *rv = inf->rv[0] ? inf->rv : "0";
        _cleanup_free_ char *path = xasprintf(
                "%s?%s%swatch=1&allowWatchBookmarks=true&timeoutSeconds=%ld&resourceVersion=%s%s",
                inf->path, inf->selector ? inf->selector : "", inf->selector ? "&" : "", t, rv,
                stream ? "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan" : "");
        inf->kind = stream ? ROUND_STREAM : ROUND_WATCH;
        if (stream) {
                inf->stats.streams++;
                resync_begin(inf);
        } else {
                inf->stats.watches++;
        }
        struct diag why = { 0 };
        int r = kapi_watch_start(inf->c, inf->loop, path, &inf->event_keep,
                                 t * 1000 + KAPI_INFORMER_SILENCE_MARGIN_MS, on_event,
                                 on_watch_done, inf, &inf->call, &why);
        if (r < 0) {
                fail(inf, r, &why);
                round_end(inf, false);
        }
}

static void start_list(struct kapi_informer *inf);

static void on_list_done(void *ud, int r, struct kapi_response *resp, struct diag *why)
{
        struct kapi_informer *inf = ud;
        inf->call = NULL;
        if (inf->freed)
                return;
        if (r == 0 && resp->status == 410 && inf->cont) {
                /* the continue token expired: the list from the start */
                free(inf->cont);
                inf->cont = NULL;
                inf->consistent = true;
                round_end(inf, false);
                return;
        }
        if (r == 0 && (resp->status < 200 || resp->status >= 300))
                r = -EPROTO;
        const json_t *items = resp ? json_object_get(resp->body, "items") : NULL;
        if (r == 0 && !json_is_array(items))
                r = diag_set(why, -EBADMSG, "GET %.200s: a list without items", inf->path);
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
                if (r < 0)
                        break;
                if (!json_is_object(it))
                        continue;
                r = put(inf, "ADDED", it);
                if (r < 0)
                        diag_set(why, r, "GET %.200s: more than %zu objects", inf->path,
                                 inf->max_objects);
                if (inf->freed)
                        return;
        }
        if (r < 0) {
                free(inf->cont);
                inf->cont = NULL;
                inf->seen = (json_decref(inf->seen), NULL);
                fail(inf, r, why);
                round_end(inf, false);
                return;
        }
        /* a list is no progress of the round: only the watch after it can
         * show the server serves (else a server that lists and refuses
         * every watch would reset the backoff each round) */
        const json_t *meta = json_object_get(resp->body, "metadata");
        const char *cont = json_string_value(json_object_get(meta, "continue"));
        free(inf->cont);
        inf->cont = NULL;
        if (cont && cont[0] && strlen(cont) < CONTINUE_MAX && inf->pages < PAGES_MAX) {
                inf->cont = xstrdup(cont);
                start_list(inf);
                return;
        }
        keep_rv(inf, json_string_value(json_object_get(meta, "resourceVersion")));
        inf->consistent = false;
        inf->list_next = false;
        resync_end(inf);
        if (inf->freed)
                return;
        /* on with a watch from the list's version, at once */
        inf->kind = ROUND_NONE;
        start_watch(inf, false);
}

static void start_list(struct kapi_informer *inf)
{
        _cleanup_free_ char *cont = inf->cont ? kapi_escape(inf->cont) : NULL;
        const char *sel = inf->selector ? inf->selector : "";
        const char *amp = inf->selector ? "&" : "";
        _cleanup_free_ char *path =
                cont ? xasprintf("%s?%s%slimit=%u&continue=%s", inf->path, sel, amp, inf->page,
                                 cont)
                     : xasprintf("%s?%s%slimit=%u%s", inf->path, sel, amp, inf->page,
                                 inf->consistent ? "" : "&resourceVersion=0");
        if (!cont) {
                inf->pages = 0;
                inf->stats.lists++;
                resync_begin(inf);
        }
        inf->pages++;
        inf->kind = ROUND_LIST;
        struct diag why = { 0 };
        int r = kapi_request_start(inf->c, inf->loop, "GET", path, NULL, &inf->list_keep, 30000,
                                   on_list_done, inf, &inf->call, &why);
        if (r < 0) {
                fail(inf, r, &why);
                round_end(inf, false);
        }
}

static void round_start(struct kapi_informer *inf)
{
        kapi_rewatch_begin(&inf->pace);
        /* attempt 0: the last round ended cleanly (or none ran yet) */
        if (inf->complete && inf->rv[0] && inf->pace.attempt == 0)
                start_watch(inf, false);
        else if (inf->stream_ok && !inf->list_next)
                start_watch(inf, true);
        else if (inf->complete && inf->rv[0])
                start_watch(inf, false);
        else
                start_list(inf);
}

/* ---- the interface ---- */

int kapi_informer_start(uv_loop_t *loop, struct kapi_client *c,
                        const struct kapi_informer_config *cfg,
                        const struct kapi_informer_ops *ops, void *ud,
                        struct kapi_informer **out, struct diag *diag)
{
        const char *ann = cfg->annotations;
        _cleanup_free_ char *obj = xasprintf(
                "{metadata{name,namespace,uid,resourceVersion,annotations{" INITIAL_END "%s%s}%s%s},"
                "code,reason,message%s%s}",
                ann ? "," : "", ann ? ann : "", cfg->meta ? "," : "", cfg->meta ? cfg->meta : "",
                cfg->rest ? "," : "", cfg->rest ? cfg->rest : "");
        struct kapi_json_spec *check;
        if (kapi_json_spec_new(obj, &check) < 0)
                return diag_set(diag, -EINVAL, "informer %s: a spec that is not the grammar's: %s",
                                cfg->path, obj);
        kapi_json_spec_free(check);
        struct kapi_informer *inf = xcalloc(1, sizeof(*inf));
        inf->loop = loop;
        inf->c = c;
        inf->ops = *ops;
        inf->ud = ud;
        inf->path = xstrdup(cfg->path);
        inf->selector = cfg->selector && cfg->selector[0] ? xstrdup(cfg->selector) : NULL;
        size_t values = cfg->max_values ? cfg->max_values : KAPI_INFORMER_VALUES_DEFAULT;
        inf->page = cfg->page ? cfg->page : KAPI_INFORMER_PAGE_DEFAULT;
        inf->event_spec = xstrdup(obj);
        inf->list_spec = xasprintf("{metadata{resourceVersion,continue},items[%s]}", obj);
        inf->event_keep = (struct kapi_keep){ .spec = inf->event_spec, .max_values = values + 16 };
        inf->list_keep = (struct kapi_keep){ .spec = inf->list_spec,
                                             .max_values = values * inf->page + 64 };
        inf->max_objects = cfg->max_objects;
        inf->timeout_min_s = cfg->timeout_min_s ? cfg->timeout_min_s : KAPI_INFORMER_TIMEOUT_MIN_S;
        inf->timeout_max_s = cfg->timeout_max_s ? cfg->timeout_max_s : KAPI_INFORMER_TIMEOUT_MAX_S;
        const char *e = getenv(KAPI_INFORMER_TIMEOUT_ENV);
        unsigned lo, hi;
        if (!cfg->timeout_min_s && e && sscanf(e, "%u-%u", &lo, &hi) == 2 && lo > 0 && lo <= hi &&
            hi <= 3600) {
                inf->timeout_min_s = lo;
                inf->timeout_max_s = hi;
        }
        if (inf->timeout_max_s < inf->timeout_min_s)
                inf->timeout_max_s = inf->timeout_min_s;
        inf->cache = json_object();
        inf->stream_ok = true;
        uv_timer_init(loop, &inf->timer);
        inf->timer.data = inf;
        uv_timer_start(&inf->timer, on_timer, 0, 0);
        *out = inf;
        return 0;
}

static void on_closed(uv_handle_t *h)
{
        struct kapi_informer *inf = h->data;
        json_decref(inf->cache);
        json_decref(inf->seen);
        free(inf->cont);
        free(inf->path);
        free(inf->selector);
        free(inf->event_spec);
        free(inf->list_spec);
        free(inf);
}

void kapi_informer_free(struct kapi_informer *inf)
{
        if (!inf || inf->freed)
                return;
        inf->freed = true;
        kapi_call_cancel(inf->call);
        inf->call = NULL;
        uv_timer_stop(&inf->timer);
        uv_close((uv_handle_t *)&inf->timer, on_closed);
}

json_t *kapi_informer_cache(const struct kapi_informer *inf) { return inf->cache; }

bool kapi_informer_has_synced(const struct kapi_informer *inf) { return inf->synced_once; }

const char *kapi_informer_rv(const struct kapi_informer *inf) { return inf->rv; }

void kapi_informer_stats(const struct kapi_informer *inf, struct kapi_informer_stats *out)
{
        *out = inf->stats;
}
