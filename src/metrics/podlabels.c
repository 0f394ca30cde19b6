/* The pod-label source (see podlabels.h): one worker thread, which owns
 * the API client, and the map it fills.
 *
 * The worker lists the node's pods in pages of PODLABELS_PAGE (the map is
 * replaced by the list), then watches from the list's resourceVersion:
 * ADDED/MODIFIED replace a pod's labels, DELETED drops it.  When the watch ends
 * (its timeoutSeconds, a 410, a broken stream) the worker lists again.  Every
 * answer is bounded by kapi (body, watch line, and the JSON kept: only each
 * pod's names, uid, resourceVersion and first 64 labels are parsed, within a
 * budget of values per page and per event) and here (pods, labels per pod, key
 * and value sizes); a body that is not what it should be is an error like no
 * answer.  A failure is logged once per change of error; every round but a
 * clean end of a watch that lasted (a failure, a 410, a watch the server ends
 * at once) waits kapi_rewatch's backoff before the next; the map keeps what it
 * knew, so series keep the labels they had.  Stopping sets an atomic flag the
 * API client looks at every 100 ms, wakes the backoff wait and joins.
 *
 * Never runs on the loop, never blocks a lookup on the server: lookups
 * take the mutex only to copy one pod's labels. */
#include "metrics/podlabels.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/diag.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/kapi.h"

#define PODLABELS_CALL_MS 30000
#define PODLABELS_BACKOFF_CAP_MS 30000
/* The server ends a quiet watch at timeoutSeconds; the client's low-speed
 * limit is set above it (api_new). */
#define PODLABELS_WATCH_SECONDS 240
#define PODLABELS_MAX_BODY (32u << 20)
/* Pods per page of the list; a page's answer keeps at most the budget. */
#define PODLABELS_PAGE 100
#define PODLABELS_PAGES_MAX (PODLABELS_MAX_PODS / PODLABELS_PAGE + 16)
#define PODLABELS_CONTINUE_MAX 4096

/* What is read of a pod: all the rest (its spec, status...) is skipped
 * as it arrives, never parsed. */
#define POD_KEPT "{metadata{name,namespace,uid,resourceVersion,labels*64}}"
_Static_assert(PODLABELS_MAX_LABELS == 64, "POD_KEPT keeps PODLABELS_MAX_LABELS labels");
static const struct kapi_keep list_keep = {
        .spec = "{metadata{resourceVersion,continue},items[" POD_KEPT "]}",
        .max_values = 65536,
        .max_bytes = 8u << 20,
};
static const struct kapi_keep event_keep = { .spec = POD_KEPT };

struct podlabels {
        char *kubeconfig, *node;
        double qps;    /* the API client's rate */
        unsigned burst;
        pthread_t thread;
        pthread_mutex_t mu;
        pthread_cond_t cond; /* CLOCK_MONOTONIC; the backoff wait */
        atomic_bool stop;
        json_t *pods; /* {"ns/name": {labels}}, under mu */
        char *resource_version; /* the worker's own */
        struct kapi_rewatch pace; /* the worker's own */
        bool full_warned;       /* the worker's own */
};

void podlabels_sanitize(const char *name, char *out, size_t size)
{
        size_t n = 0;
        if (size == 0)
                return;
        if (name[0] >= '0' && name[0] <= '9' && n + 1 < size)
                out[n++] = '_';
        for (const char *s = name; *s && n + 1 < size; s++) {
                char ch = *s;
                bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                          (ch >= '0' && ch <= '9') || ch == '_';
                out[n++] = ok ? ch : '_';
        }
        out[n] = '\0';
}

static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

json_t *podlabels_from_pod(json_t *pod)
{
        json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
        if (labels && !json_is_object(labels))
                return NULL;
        json_t *out = json_object();
        const char *k;
        json_t *v;
        json_object_foreach(labels, k, v) {
                if (json_object_size(out) >= PODLABELS_MAX_LABELS)
                        break;
                if (!json_is_string(v) || !*k || strlen(k) > PODLABELS_MAX_KEY ||
                    json_string_length(v) > PODLABELS_MAX_VALUE || !printable(k) ||
                    strlen(json_string_value(v)) != json_string_length(v) ||
                    !printable(json_string_value(v)))
                        continue;
                json_object_set(out, k, v);
        }
        return out;
}

/* "ns/name" of a pod object, or NULL when it has no proper names. */
static char *pod_key(const json_t *pod)
{
        const json_t *md = json_object_get(pod, "metadata");
        const json_t *ns = json_object_get(md, "namespace"), *name = json_object_get(md, "name");
        if (!json_is_string(ns) || !json_is_string(name) || json_string_length(ns) == 0 ||
            json_string_length(name) == 0 || json_string_length(ns) > 253 ||
            json_string_length(name) > 253)
                return NULL;
        return xasprintf("%s/%s", json_string_value(ns), json_string_value(name));
}

json_t *podlabels_get(struct podlabels *p, const char *ns, const char *name)
{
        if (!p)
                return NULL;
        _cleanup_free_ char *key = xasprintf("%s/%s", ns, name);
        pthread_mutex_lock(&p->mu);
        json_t *v = json_deep_copy(json_object_get(p->pods, key));
        pthread_mutex_unlock(&p->mu);
        return v;
}

/* Puts one pod's labels (mu not held); false when the map is full. */
static bool put_pod(struct podlabels *p, json_t *map, json_t *pod)
{
        _cleanup_free_ char *key = pod_key(pod);
        json_t *labels = key ? podlabels_from_pod(pod) : NULL;
        if (!labels)
                return true;
        if (!json_object_get(map, key) && json_object_size(map) >= PODLABELS_MAX_PODS) {
                json_decref(labels);
                return false;
        }
        (void)p;
        json_object_set_new(map, key, labels);
        return true;
}

static void warn_full(struct podlabels *p)
{
        if (!p->full_warned)
                log_warn("metrics", "pod labels: more than %d pods on node=%s; the others carry "
                                    "no pod labels",
                         PODLABELS_MAX_PODS, p->node);
        p->full_warned = true;
}

static void keep_version(struct podlabels *p, const json_t *obj)
{
        const json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
        if (json_is_string(rv) && json_string_length(rv) > 0 && json_string_length(rv) <= 64) {
                free(p->resource_version);
                p->resource_version = xstrdup(json_string_value(rv));
        }
}

/* One page of the list: its pods into map.  Returns 0 (its continue
 * token in *cont, NULL after the last page) or -errno with diag. */
static int list_page(struct podlabels *p, struct kapi_client *api, json_t *map, char **cont,
                     bool *full, struct diag *diag)
{
        _cleanup_free_ char *sel = xasprintf("spec.nodeName=%s", p->node);
        _cleanup_free_ char *esel = kapi_escape(sel);
        _cleanup_free_ char *econt = *cont ? kapi_escape(*cont) : NULL;
        _cleanup_free_ char *path = xasprintf("/api/v1/pods?fieldSelector=%s&limit=%d%s%s", esel,
                                              PODLABELS_PAGE, econt ? "&continue=" : "",
                                              econt ? econt : "");
        free(*cont);
        *cont = NULL;
        struct kapi_response resp = { 0 };
        int r = kapi_request_keep(api, "GET", path, NULL, &list_keep, PODLABELS_CALL_MS, &p->stop,
                                  &resp, diag);
        if (r == 0 && resp.status != 200)
                r = -EPROTO;
        json_t *items = json_object_get(resp.body, "items");
        if (r == 0 && !json_is_array(items))
                r = diag_set(diag, -EBADMSG, "GET /api/v1/pods: not a PodList");
        if (r == 0) {
                size_t i;
                json_t *pod;
                json_array_foreach(items, i, pod)
                        *full |= !put_pod(p, map, pod);
                keep_version(p, resp.body);
                const json_t *c = json_object_get(json_object_get(resp.body, "metadata"),
                                                  "continue");
                if (json_is_string(c) && json_string_length(c) > PODLABELS_CONTINUE_MAX)
                        r = diag_set(diag, -EBADMSG,
                                     "GET /api/v1/pods: a continue token over %d bytes",
                                     PODLABELS_CONTINUE_MAX);
                else if (json_is_string(c) && json_string_length(c) > 0)
                        *cont = xstrdup(json_string_value(c));
        }
        kapi_response_release(&resp);
        return r;
}

static int list_pods(struct podlabels *p, struct kapi_client *api, struct diag *diag)
{
        json_t *map = json_object();
        _cleanup_free_ char *cont = NULL;
        bool full = false;
        free(p->resource_version);
        p->resource_version = NULL;
        int r = 0;
        for (unsigned page = 0; r == 0; page++) {
                if (page == PODLABELS_PAGES_MAX) {
                        r = diag_set(diag, -EBADMSG, "GET /api/v1/pods: more than %d pages",
                                     PODLABELS_PAGES_MAX);
                        break;
                }
                r = list_page(p, api, map, &cont, &full, diag);
                if (!cont)
                        break;
        }
        if (r == 0 && !p->resource_version)
                r = diag_set(diag, -EBADMSG, "GET /api/v1/pods: no resourceVersion");
        if (r < 0) {
                free(p->resource_version);
                p->resource_version = NULL;
                json_decref(map);
                return r;
        }
        if (full)
                warn_full(p);
        pthread_mutex_lock(&p->mu);
        json_t *old = p->pods;
        p->pods = map;
        pthread_mutex_unlock(&p->mu);
        json_decref(old);
        return 0;
}

static int on_event(const char *type, json_t *object, void *ud)
{
        struct podlabels *p = ud;
        if (strcmp(type, "ERROR") == 0)
                return -EPROTO;
        keep_version(p, object);
        kapi_rewatch_progress(&p->pace);
        bool del = strcmp(type, "DELETED") == 0;
        if (!del && strcmp(type, "ADDED") != 0 && strcmp(type, "MODIFIED") != 0)
                return 0; /* BOOKMARK */
        _cleanup_free_ char *key = pod_key(object);
        if (!key)
                return 0;
        json_t *labels = del ? NULL : podlabels_from_pod(object);
        pthread_mutex_lock(&p->mu);
        bool full = false;
        if (del)
                json_object_del(p->pods, key);
        else if (labels && (json_object_get(p->pods, key) ||
                            json_object_size(p->pods) < PODLABELS_MAX_PODS))
                json_object_set(p->pods, key, labels);
        else
                full = labels != NULL;
        pthread_mutex_unlock(&p->mu);
        json_decref(labels);
        if (full)
                warn_full(p);
        return 0;
}

static int watch_pods(struct podlabels *p, struct kapi_client *api, struct diag *diag)
{
        _cleanup_free_ char *sel = xasprintf("spec.nodeName=%s", p->node);
        _cleanup_free_ char *esel = kapi_escape(sel);
        _cleanup_free_ char *erv = kapi_escape(p->resource_version);
        _cleanup_free_ char *path = xasprintf("/api/v1/pods?fieldSelector=%s&watch=1"
                                              "&resourceVersion=%s&allowWatchBookmarks=true"
                                              "&timeoutSeconds=%d",
                                              esel, erv, PODLABELS_WATCH_SECONDS);
        long status = 0;
        int r = kapi_watch_keep(api, path, &event_keep, &p->stop, on_event, p, &status, diag);
        if (r == -EPROTO && status == 410)
                r = 1; /* too old: relist, after the backoff */
        free(p->resource_version);
        p->resource_version = NULL; /* relist after every watch: simple, and bounded by
                                     * the watch's timeoutSeconds */
        return r;
}

static void backoff(struct podlabels *p, long ms)
{
        struct timespec until = clock_monotonic_in(ms);
        pthread_mutex_lock(&p->mu);
        while (!atomic_load(&p->stop) && pthread_cond_timedwait(&p->cond, &p->mu, &until) != ETIMEDOUT)
                ;
        pthread_mutex_unlock(&p->mu);
}

static int api_new(const struct podlabels *p, struct kapi_client **out, struct diag *diag)
{
        struct kapi_config *kc = NULL;
        int r = kapi_config_load(p->kubeconfig, NULL, &kc, diag);
        if (r < 0)
                return diag_prefix(diag, r, "API server");
        r = kapi_client_new(kc, out, diag);
        if (r == 0) {
                kapi_client_set_user_agent(*out, "podlabels");
                kapi_client_set_rate(*out, p->qps, p->burst);
        }
        if (r == 0)
                kapi_client_set_limits(*out, &(struct kapi_limits){
                                                     .max_body = PODLABELS_MAX_BODY,
                                                     .low_speed_ms = (PODLABELS_WATCH_SECONDS + 30) * 1000L,
                                             });
        return r;
}

static void *worker_main(void *ud)
{
        struct podlabels *p = ud;
        struct kapi_client *api = NULL;
        char last_error[DIAG_FORMAT_MAX] = "";
        while (!atomic_load(&p->stop)) {
                struct diag why = { 0 };
                kapi_rewatch_begin(&p->pace);
                int r = api ? 0 : api_new(p, &api, &why);
                if (r == 0 && !p->resource_version)
                        r = list_pods(p, api, &why);
                if (r == 0)
                        r = watch_pods(p, api, &why);
                if (atomic_load(&p->stop))
                        break;
                if (r >= 0) {
                        if (last_error[0])
                                log_info("metrics", "pod labels: reading the pods again node=%s",
                                         p->node);
                        last_error[0] = '\0';
                        backoff(p, kapi_rewatch_end(&p->pace, r == 0, PODLABELS_BACKOFF_CAP_MS));
                        continue;
                }
                char buf[DIAG_FORMAT_MAX];
                if (why.message[0])
                        diag_format(&why, buf, sizeof(buf));
                else
                        snprintf(buf, sizeof(buf), "%s", strerror(-r));
                if (strcmp(buf, last_error) != 0)
                        log_warn("metrics", "pod labels: cannot read the pods, retrying node=%s "
                                            "error=\"%s\"",
                                 p->node, buf);
                snprintf(last_error, sizeof(last_error), "%s", buf);
                backoff(p, kapi_rewatch_end(&p->pace, false, PODLABELS_BACKOFF_CAP_MS));
        }
        kapi_client_free(api);
        return NULL;
}

static void podlabels_free(struct podlabels *p)
{
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cond);
        json_decref(p->pods);
        free(p->resource_version);
        free(p->kubeconfig);
        free(p->node);
        free(p);
}

struct podlabels *podlabels_start(const char *kubeconfig, const char *node, double qps,
                                  unsigned burst)
{
        struct podlabels *p = xcalloc(1, sizeof(*p));
        p->qps = qps;
        p->burst = burst;
        p->kubeconfig = xstrdup(kubeconfig ? kubeconfig : "");
        p->node = xstrdup(node);
        p->pods = json_object();
        pthread_mutex_init(&p->mu, NULL);
        clock_cond_init(&p->cond);
        int e = pthread_create(&p->thread, NULL, worker_main, p);
        if (e != 0) {
                log_error("metrics", "pod labels: cannot start the thread error=\"%s\"", strerror(e));
                podlabels_free(p);
                return NULL;
        }
        log_info("metrics", "pod labels: watching the pods of node=%s", p->node);
        return p;
}

void podlabels_stop(struct podlabels *p)
{
        if (!p)
                return;
        atomic_store(&p->stop, true);
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
        podlabels_free(p);
}

