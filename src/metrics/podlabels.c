/* The pod-label source (see podlabels.h): one worker thread running a
 * libuv loop of its own, which owns the API client and one informer of
 * the node's pods (kapi/informer.h: a streaming list, then watches of 5 to
 * 10 minutes from the last resourceVersion, resyncs without relisting),
 * and the map it fills.  Its own loop because the collector, which may
 * start a source lazily, runs on a thread of its own, not on the daemon's
 * loop.
 *
 * The informer's events keep the map: ADDED/MODIFIED replace a pod's
 * labels, DELETED drops it.  Every answer is bounded by kapi (body, watch
 * line, and the JSON kept: only each pod's names, uid, resourceVersion and
 * first 64 labels are parsed, within a budget of values per event and per
 * page) and here (pods, labels per pod, key and value sizes).  A failure is
 * logged once per change of error; the informer retries with its backoff;
 * the map keeps what it knew, so series keep the labels they had.
 * Stopping pokes the worker's loop (a handoff, base/thread.h), which frees
 * the informer and closes its handles, and joins.
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
#include "base/thread.h"
#include "base/diag.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/informer.h"
#include "kapi/kapi.h"

#define PODLABELS_BACKOFF_CAP_MS 30000
#define PODLABELS_MAX_BODY (32u << 20)
/* Pods per page of a LIST (where the server serves no streaming list). */
#define PODLABELS_PAGE 100
/* The informer's cache: the pods of a node (their names and first labels
 * only); the map lookups read holds PODLABELS_MAX_PODS of them. */
#define PODLABELS_CACHE_MAX (4 * PODLABELS_MAX_PODS)
/* What is read of a pod beside its names: its first labels; all the rest
 * (its spec, status...) is skipped as it arrives, never parsed. */
#define PODLABELS_LABELS_SPEC "64"
_Static_assert(PODLABELS_MAX_LABELS == 64, "the informer keeps PODLABELS_MAX_LABELS labels");

struct podlabels {
        char *kubeconfig, *node;
        double qps;    /* the API client's rate */
        unsigned burst;
        pthread_t thread;
        pthread_mutex_t mu;
        atomic_bool stop;
        json_t *pods; /* {"ns/name": {labels}}, under mu */
        /* the worker's own: */
        uv_loop_t loop;
        bool loop_open;
        struct handoff wake; /* poked at stop */
        uv_timer_t retry;  /* until the client and the informer start */
        struct kapi_client *api;
        struct kapi_informer *inf;
        struct kapi_rewatch pace;
        bool full_warned;
        char last_error[DIAG_FORMAT_MAX];
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

json_t *podlabels_from_pod(const json_t *pod)
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

static void warn_full(struct podlabels *p)
{
        if (!p->full_warned)
                log_warn("metrics", "pod labels: more than %d pods on node=%s; the others carry "
                                    "no pod labels",
                         PODLABELS_MAX_PODS, p->node);
        p->full_warned = true;
}

/* ---- the worker: its own loop, one informer ---- */

static void on_pod(void *ud, enum kapi_informer_event ev, const char *key, const json_t *obj)
{
        struct podlabels *p = ud;
        _cleanup_free_ char *k = pod_key(obj);
        if (!k)
                return;
        json_t *labels = ev == KAPI_INFORMER_DELETED ? NULL : podlabels_from_pod(obj);
        bool full = false;
        pthread_mutex_lock(&p->mu);
        if (ev == KAPI_INFORMER_DELETED)
                json_object_del(p->pods, k);
        else if (labels && (json_object_get(p->pods, k) ||
                            json_object_size(p->pods) < PODLABELS_MAX_PODS))
                json_object_set(p->pods, k, labels);
        else
                full = labels != NULL;
        pthread_mutex_unlock(&p->mu);
        json_decref(labels);
        if (full)
                warn_full(p);
}

static void on_synced(void *ud)
{
        struct podlabels *p = ud;
        if (p->last_error[0])
                log_info("metrics", "pod labels: reading the pods again node=%s", p->node);
        p->last_error[0] = '\0';
}

static void on_failed(void *ud, int r, const struct diag *why)
{
        struct podlabels *p = ud;
        char buf[DIAG_FORMAT_MAX];
        if (why && why->message[0])
                diag_format(why, buf, sizeof(buf));
        else
                snprintf(buf, sizeof(buf), "%s", strerror(-r));
        /* once until the pods are read again: the paths of the retries
         * differ (each watch draws its own timeout) */
        if (!p->last_error[0])
                log_warn("metrics", "pod labels: cannot read the pods, retrying node=%s "
                                    "error=\"%s\"",
                         p->node, buf);
        else
                log_debug("metrics", "pod labels: still cannot read the pods error=\"%s\"", buf);
        snprintf(p->last_error, sizeof(p->last_error), "%s", buf);
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
                kapi_client_set_limits(*out, &(struct kapi_limits){ .max_body = PODLABELS_MAX_BODY });
        }
        return r;
}

/* Until there is a client and an informer: the kubeconfig may come later. */
static void on_retry(uv_timer_t *t)
{
        struct podlabels *p = t->data;
        struct diag why = { 0 };
        int r = p->api ? 0 : api_new(p, &p->api, &why);
        if (r == 0) {
                _cleanup_free_ char *q = kapi_field_selector("spec.nodeName=%s", p->node);
                const struct kapi_informer_config cfg = {
                        .path = "/api/v1/pods",
                        .selector = q,
                        .meta = "labels*" PODLABELS_LABELS_SPEC,
                        .max_values = 2 * PODLABELS_MAX_LABELS + 32,
                        .max_objects = PODLABELS_CACHE_MAX,
                        .page = PODLABELS_PAGE,
                };
                const struct kapi_informer_ops ops = {
                        .event = on_pod,
                        .synced = on_synced,
                        .failed = on_failed,
                };
                r = kapi_informer_start(&p->loop, p->api, &cfg, &ops, p, &p->inf, &why);
        }
        if (r == 0)
                return;
        on_failed(p, r, &why);
        uv_timer_start(&p->retry, on_retry,
                       (uint64_t)kapi_rewatch_end(&p->pace, false, PODLABELS_BACKOFF_CAP_MS), 0);
}

static void on_wake(struct handoff *h, struct handoff_item *items)
{
        (void)items; /* only pokes */
        struct podlabels *p = handoff_data(h);
        if (!atomic_load(&p->stop))
                return;
        kapi_informer_free(TAKE_PTR(p->inf));
        uv_close((uv_handle_t *)&p->retry, NULL);
        handoff_close(&p->wake, NULL);
}

static void *worker_main(void *ud)
{
        struct podlabels *p = ud;
        uv_run(&p->loop, UV_RUN_DEFAULT);
        return NULL; /* the client goes with the rest, in podlabels_free */
}

static void podlabels_free(struct podlabels *p)
{
        if (p->loop_open)
                uv_loop_close(&p->loop);
        kapi_client_free(p->api);
        pthread_mutex_destroy(&p->mu);
        json_decref(p->pods);
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
        int e = uv_loop_init(&p->loop);
        if (e < 0) {
                log_error("metrics", "pod labels: cannot start a loop error=\"%s\"", uv_strerror(e));
                podlabels_free(p);
                return NULL;
        }
        p->loop_open = true;
        e = handoff_init(&p->wake, &p->loop, on_wake, p);
        if (e < 0) {
                log_error("metrics", "pod labels: cannot start a loop error=\"%s\"", uv_strerror(e));
                uv_loop_close(&p->loop);
                p->loop_open = false;
                podlabels_free(p);
                return NULL;
        }
        uv_timer_init(&p->loop, &p->retry);
        p->retry.data = p;
        uv_timer_start(&p->retry, on_retry, 0, 0);
        e = thread_start(&p->thread, "devlet-podlabel", NULL, worker_main, p);
        if (e < 0) {
                log_error("metrics", "pod labels: cannot start the thread, series carry no pod "
                                     "labels error=\"%s\"", strerror(-e));
                atomic_store(&p->stop, true);
                on_wake(&p->wake, NULL);
                uv_run(&p->loop, UV_RUN_DEFAULT);
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
        handoff_poke(&p->wake);
        pthread_join(p->thread, NULL);
        podlabels_free(p);
}

