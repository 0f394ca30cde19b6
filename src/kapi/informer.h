/* One collection of the API server kept in memory on a libuv loop, as
 * client-go's reflector and informer keep it: written once, for every
 * part of devlet that watches something (DRA's slices, pod labels,
 * config-manager's Node).
 *
 * How it stays true, with as few requests as it can:
 *   - It starts with a streaming list where the server serves one (a watch
 *     with sendInitialEvents=true, resourceVersionMatch=NotOlderThan: the
 *     objects come as ADDED events, then a bookmark marked
 *     k8s.io/initial-events-end); a server that refuses the parameters
 *     (422/400: WatchList off, as on Kubernetes 1.33, or older servers) is
 *     served a LIST from the watch cache (resourceVersion=0, paged) and a
 *     watch from its resourceVersion from then on.
 *   - Watches ask for bookmarks, which advance the resourceVersion, and
 *     for a random timeout of KAPI_INFORMER_TIMEOUT_MIN_S to _MAX_S; the
 *     stream's silence limit is that timeout plus a margin.  A watch the
 *     server ends cleanly is followed at once by one from the last
 *     resourceVersion; any other end (a broken connection, an API server
 *     restart, an error, 410 Gone) waits kapi_rewatch's backoff (800 ms
 *     doubling to 30 s, full jitter; the server's Retry-After on top) and
 *     then resyncs with a streaming list not older than the last
 *     resourceVersion, one request, never 410 + LIST + WATCH; in LIST mode
 *     a 410 lists again with a consistent read.
 *   - A resync's objects are compared with the cache: the consumer hears
 *     of what changed only (ADDED, MODIFIED with another resourceVersion,
 *     DELETED for what is no longer there), then `synced`.
 * Everything it reads is bounded: the JSON kept of each object (the
 * consumer's spec, which must keep metadata{name,namespace,resourceVersion}),
 * the values per event and per page, the objects in the cache.
 * Loop thread only; no thread of its own; never logs above debug (the
 * consumer hears of failures through `failed` and logs). */
#ifndef DEVLET_KAPI_INFORMER_H
#define DEVLET_KAPI_INFORMER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <uv.h>

#include "base/diag.h"
#include "kapi/kapi.h"

#define KAPI_INFORMER_TIMEOUT_MIN_S 300
#define KAPI_INFORMER_TIMEOUT_MAX_S 600
/* "MIN-MAX" seconds in the environment: the range where the config says 0
 * (tests, which cannot wait out 5 to 10 minutes). */
#define KAPI_INFORMER_TIMEOUT_ENV "DEVLET_KAPI_WATCH_TIMEOUT"
/* The silence limit of a watch: its timeoutSeconds plus this. */
#define KAPI_INFORMER_SILENCE_MARGIN_MS 30000L
#define KAPI_INFORMER_BACKOFF_CAP_MS 30000L
#define KAPI_INFORMER_VALUES_DEFAULT 1024u
#define KAPI_INFORMER_PAGE_DEFAULT 100u

struct kapi_informer;

struct kapi_informer_config {
        const char *path;     /* the collection: "/api/v1/pods" */
        const char *selector; /* query, escaped, without '?' ("fieldSelector=..."), or NULL */
        /* What is kept of each object (kapi/json-filter.h's grammar), beyond
         * metadata's name, namespace, uid and resourceVersion, which are
         * always kept: */
        const char *meta;        /* more members of metadata ("labels*64"), or NULL */
        const char *annotations; /* annotation keys kept ("devlet.io/x,a.b/c"), or NULL */
        const char *rest;        /* members beside metadata ("spec{pool}"), or NULL */
        size_t max_values;    /* kept per object; 0: KAPI_INFORMER_VALUES_DEFAULT */
        size_t max_objects;   /* the cache's bound: more is an error of the round */
        unsigned page;        /* a LIST's page (limit=); 0: KAPI_INFORMER_PAGE_DEFAULT */
        /* the watch's timeout range in seconds (0: KAPI_INFORMER_TIMEOUT_ENV,
         * else the defaults above) */
        unsigned timeout_min_s, timeout_max_s;
};

enum kapi_informer_event {
        KAPI_INFORMER_ADDED,
        KAPI_INFORMER_MODIFIED,
        KAPI_INFORMER_DELETED,
};

struct kapi_informer_ops {
        /* An object changed in the cache: obj is the new one (DELETED: the
         * last known), borrowed for the call.  key: "namespace/name" or
         * "name". */
        void (*event)(void *ud, enum kapi_informer_event ev, const char *key, const json_t *obj);
        /* The cache is complete again (after the first list and after each
         * resync); may be NULL. */
        void (*synced)(void *ud);
        /* A round failed (r, why); the informer retries after its backoff.
         * May be NULL. */
        void (*failed)(void *ud, int r, const struct diag *why);
};

/* Starts on loop (the first request goes out on the loop's next turn).
 * c must outlive the informer; cfg's strings are copied.  Returns 0 and
 * *out, or -EINVAL with diag (a keep spec that is not the grammar's). */
int kapi_informer_start(uv_loop_t *loop, struct kapi_client *c,
                        const struct kapi_informer_config *cfg,
                        const struct kapi_informer_ops *ops, void *ud,
                        struct kapi_informer **out, struct diag *diag);
/* Stops (no callback after it; safe from a callback) and frees once the
 * loop has closed its handles.  NULL is a no-op. */
void kapi_informer_free(struct kapi_informer *inf);

/* The cache: {key: object} (borrowed, never to be changed: jansson has no
 * const iteration; loop thread; changes with events). */
json_t *kapi_informer_cache(const struct kapi_informer *inf);
/* Whether the cache has been complete at least once. */
bool kapi_informer_has_synced(const struct kapi_informer *inf);
/* The last resourceVersion seen ("" before any). */
const char *kapi_informer_rv(const struct kapi_informer *inf);

/* What the informer sent, for tests and `make bench-scale`. */
struct kapi_informer_stats {
        unsigned long lists, watches, streams, gone, failures;
};
void kapi_informer_stats(const struct kapi_informer *inf, struct kapi_informer_stats *out);

#endif
