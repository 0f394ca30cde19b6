/* The labels through the API server (--labels-output node-feature or node),
 * for the labeler: one publisher thread, which owns the API client.
 *
 * node-feature: NFD's NodeFeature object as GFD writes it with
 * --use-node-feature-api: nfd.k8s-sigs.io/v1alpha1, named
 * "nvidia-features-for-<node>" in --namespace, labelled
 * nfd.node.kubernetes.io/node-name=<node>, the labels in spec.labels.
 * Read, then created (POST) when missing or replaced (PUT of the object
 * read with our labels and spec: its resourceVersion makes a concurrent
 * writer's change fail the call, which is retried) when its labels differ;
 * nothing is written when they are the same.
 *
 * node: the Node's own labels, as AMD's k8s-node-labeller sets them.  The
 * keys devlet wrote are listed in the Node's annotation
 * LABELS_OWNED_ANNOTATION, so a label devlet no longer produces is
 * removed, after a restart too, and a label devlet never wrote is never
 * touched.  Read, then one JSON merge patch: the labels that differ, null
 * for owned ones that went, the new list of owned keys; nothing when the
 * Node already says all that.
 *
 * The loop hands each label set over (labels_publisher_set: a copy under
 * the mutex) and never waits on the server; the thread compares with what
 * the server holds on every set, and every LABELS_RESYNC_MS anyway (a label
 * someone removed comes back).  A failure (no answer, an error status, a
 * body that is not what it should be) is logged once per change of error
 * and retried with backoff (kapi_backoff_ms, up to LABELS_BACKOFF_CAP_MS);
 * the latest set is the one retried.  Stopping sets an atomic flag the API
 * client looks at every 100 ms and joins the thread. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/kapi.h"
#include "labels/labels.h"

#define LABELS_RESYNC_MS (5 * 60 * 1000)
#define LABELS_CALL_MS 10000
#define LABELS_BACKOFF_CAP_MS 30000
#define NODE_FEATURE_PREFIX "nvidia-features-for-"
#define NODE_NAME_LABEL "nfd.node.kubernetes.io/node-name"
#define NFD_API "/apis/nfd.k8s-sigs.io/v1alpha1"

struct labels_publisher {
        enum labels_output mode;
        char *kubeconfig;
        char *node;
        char *ns;

        pthread_t thread;
        pthread_mutex_t mu;
        pthread_cond_t cond; /* CLOCK_MONOTONIC */
        atomic_bool stop;
        json_t *desired; /* {key: value}; NULL until the first set */
        bool dirty;
};

enum labels_output labels_output_mode(const struct devlet_config *cfg)
{
        const char *m = cfg->labels_output ? cfg->labels_output : "";
        if (strcmp(m, "node") == 0)
                return LABELS_TO_NODE;
        if (strcmp(m, "node-feature") == 0)
                return LABELS_TO_NODE_FEATURE;
        if (strcmp(m, "features.d") == 0)
                return LABELS_TO_FILE;
        return cfg->labels_use_node_feature_api ? LABELS_TO_NODE_FEATURE : LABELS_TO_FILE;
}

const char *labels_output_name(enum labels_output mode)
{
        switch (mode) {
        case LABELS_TO_NODE_FEATURE:
                return "node-feature";
        case LABELS_TO_NODE:
                return "node";
        default:
                return "features.d";
        }
}

json_t *labels_to_json(const struct dev_labels *s)
{
        json_t *o = json_object();
        for (size_t i = 0; i < s->n; i++)
                json_object_set_new(o, s->v[i].key, json_string(s->v[i].value));
        return o;
}

static const char *str_at(const json_t *obj, const char *a, const char *b)
{
        const json_t *v = json_object_get(json_object_get(obj, a), b);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- node: the Node's labels and the list of those devlet owns ---- */

static int key_cmp(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The owned keys for desired: sorted, comma-separated. */
static char *owned_list(json_t *desired)
{
        size_t n = json_object_size(desired), k = 0;
        _cleanup_free_ const char **keys = xcalloc(n ? n : 1, sizeof(*keys));
        const char *key;
        json_t *v;
        json_object_foreach(desired, key, v)
                keys[k++] = key;
        qsort(keys, k, sizeof(*keys), key_cmp);
        size_t len = 1;
        for (size_t i = 0; i < k; i++)
                len += strlen(keys[i]) + 1;
        char *s = xmalloc(len);
        s[0] = '\0';
        size_t at = 0;
        for (size_t i = 0; i < k; i++)
                at += (size_t)sprintf(s + at, "%s%s", i ? "," : "", keys[i]);
        return s;
}

json_t *labels_node_patch(const json_t *node, json_t *desired)
{
        const json_t *meta = json_object_get(node, "metadata");
        const json_t *have = json_object_get(meta, "labels");
        const char *owned = str_at(meta, "annotations", LABELS_OWNED_ANNOTATION);
        json_t *labels = json_object();
        const char *key;
        json_t *v;
        json_object_foreach(desired, key, v) {
                const json_t *cur = json_object_get(have, key);
                if (!json_is_string(cur) || strcmp(json_string_value(cur), json_string_value(v)) != 0)
                        json_object_set_new(labels, key, json_string(json_string_value(v)));
        }
        /* what devlet wrote before and no longer produces: removed when
         * still there (a key in the list is only ever one devlet wrote) */
        _cleanup_free_ char *copy = xstrdup(owned ? owned : "");
        char *save = NULL;
        for (char *k = strtok_r(copy, ",", &save); k; k = strtok_r(NULL, ",", &save))
                if (!json_object_get(desired, k) && json_object_get(have, k))
                        json_object_set_new(labels, k, json_null());
        _cleanup_free_ char *want = owned_list(desired);
        if (json_object_size(labels) == 0 && owned && strcmp(owned, want) == 0) {
                json_decref(labels);
                return NULL;
        }
        return json_pack("{s:{s:o,s:{s:s}}}", "metadata", "labels", labels, "annotations",
                         LABELS_OWNED_ANNOTATION, want);
}

/* ---- node-feature: NFD's NodeFeature object ---- */

json_t *labels_node_feature(const char *node, const json_t *desired)
{
        _cleanup_free_ char *name = xasprintf(NODE_FEATURE_PREFIX "%s", node);
        return json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:{s:{},s:{},s:{}},s:O}}", "apiVersion",
                         "nfd.k8s-sigs.io/v1alpha1", "kind", "NodeFeature", "metadata", "name",
                         name, "labels", NODE_NAME_LABEL, node, "spec", "features", "flags",
                         "attributes", "instances", "labels", desired);
}

/* Whether the object read already says what want says. */
static bool node_feature_same(const json_t *have, const json_t *want)
{
        const json_t *hl = json_object_get(json_object_get(have, "spec"), "labels");
        const json_t *wl = json_object_get(json_object_get(want, "spec"), "labels");
        const json_t *hm = json_object_get(json_object_get(have, "metadata"), "labels");
        const json_t *wm = json_object_get(json_object_get(want, "metadata"), "labels");
        /* an empty map may come back absent */
        bool labels_same = json_is_object(hl) ? json_equal(hl, wl) : json_object_size(wl) == 0;
        return labels_same && json_is_object(hm) && json_equal(hm, wm);
}

/* ---- the calls ---- */

struct call_ctx {
        struct kapi_client *api;
        const atomic_bool *stop;
};

/* What is read of an answer: of the Node, its labels and our annotation; of
 * our NodeFeature, its metadata (a PUT sends it back) and spec's labels;
 * of an answer nobody reads, nothing but its kind.  The rest is skipped
 * unparsed. */
static const struct kapi_keep node_keep = {
        .spec = "{metadata{labels,annotations{" LABELS_OWNED_ANNOTATION "}}}",
};
static const struct kapi_keep feature_keep = { .spec = "{metadata,spec{labels}}" };
static const struct kapi_keep nothing_keep = { .spec = "{kind}" };

/* One call; 0 and *out (may be NULL: nothing of the answer is read) for a
 * 2xx answer, else <0 with diag and the status in *status (0: no answer). */
static int call(const struct call_ctx *c, const char *method, const char *path, const json_t *body,
                const struct kapi_keep *keep, json_t **out, long *status, struct diag *diag)
{
        struct kapi_response resp = { 0 };
        int r = kapi_request_keep(c->api, method, path, body, out ? keep : &nothing_keep,
                                  LABELS_CALL_MS, c->stop, &resp, diag);
        *status = resp.status;
        if (r >= 0 && (resp.status < 200 || resp.status >= 300)) {
                if (!diag->message[0])
                        diag_set(diag, -EPROTO, "%s %s: HTTP %ld", method, path, resp.status);
                r = -EPROTO;
        }
        if (r >= 0 && out)
                *out = json_incref(resp.body);
        kapi_response_release(&resp);
        return r;
}

/* The object an answer must carry: a JSON object with metadata. */
static int want_object(const json_t *obj, const char *what, struct diag *diag)
{
        if (json_is_object(obj) && json_is_object(json_object_get(obj, "metadata")))
                return 0;
        return diag_set(diag, -EBADMSG, "%s: the API server's answer is not an object", what);
}

static int publish_node(const struct call_ctx *c, const char *node, json_t *desired,
                        int *writes, struct diag *diag)
{
        _cleanup_free_ char *esc = kapi_escape(node);
        _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", esc);
        json_t *obj = NULL;
        long status;
        int r = call(c, "GET", path, NULL, &node_keep, &obj, &status, diag);
        if (r >= 0)
                r = want_object(obj, path, diag);
        if (r < 0) {
                json_decref(obj);
                return r;
        }
        json_t *patch = labels_node_patch(obj, desired);
        json_decref(obj);
        if (!patch)
                return 0;
        r = call(c, "PATCH", path, patch, NULL, NULL, &status, diag);
        json_decref(patch);
        if (r >= 0)
                (*writes)++;
        return r;
}

static int publish_node_feature(const struct call_ctx *c, const char *node, const char *ns,
                                json_t *desired, int *writes, struct diag *diag)
{
        _cleanup_free_ char *ens = kapi_escape(ns);
        _cleanup_free_ char *name = xasprintf(NODE_FEATURE_PREFIX "%s", node);
        _cleanup_free_ char *ename = kapi_escape(name);
        _cleanup_free_ char *coll = xasprintf(NFD_API "/namespaces/%s/nodefeatures", ens);
        _cleanup_free_ char *path = xasprintf("%s/%s", coll, ename);
        json_t *want = labels_node_feature(node, desired);
        json_t *have = NULL;
        long status;
        struct diag why = { 0 };
        int r = call(c, "GET", path, NULL, &feature_keep, &have, &status, &why);
        if (r < 0 && status == 404) {
                r = call(c, "POST", coll, want, NULL, NULL, &status, diag);
                if (r >= 0)
                        (*writes)++;
                json_decref(want);
                return r;
        }
        if (r >= 0)
                r = want_object(have, path, &why);
        if (r < 0) {
                *diag = why;
                json_decref(have);
                json_decref(want);
                return r;
        }
        if (!node_feature_same(have, want)) {
                /* GFD's update: the object read (its resourceVersion, and
                 * what others keep in its metadata) with our labels and spec */
                json_t *put = json_deep_copy(have);
                json_t *meta = json_object_get(put, "metadata");
                json_object_set(meta, "labels",
                                json_object_get(json_object_get(want, "metadata"), "labels"));
                json_object_set(put, "spec", json_object_get(want, "spec"));
                json_object_set_new(put, "apiVersion", json_string("nfd.k8s-sigs.io/v1alpha1"));
                json_object_set_new(put, "kind", json_string("NodeFeature"));
                r = call(c, "PUT", path, put, NULL, NULL, &status, diag);
                json_decref(put);
                if (r >= 0)
                        (*writes)++;
        }
        json_decref(have);
        json_decref(want);
        return r;
}

static int api_new(const char *kubeconfig, struct kapi_client **out, struct diag *diag)
{
        struct kapi_config *kc = NULL;
        int r = kapi_config_load(kubeconfig, NULL, &kc, diag);
        if (r < 0)
                return diag_prefix(diag, r, "API server");
        return kapi_client_new(kc, out, diag);
}

static int publish(struct kapi_client *api, const atomic_bool *stop, enum labels_output mode,
                   const char *node, const char *ns, json_t *desired, int *writes,
                   struct diag *diag)
{
        const struct call_ctx c = { api, stop };
        if (mode == LABELS_TO_NODE)
                return publish_node(&c, node, desired, writes, diag);
        return publish_node_feature(&c, node, ns, desired, writes, diag);
}

int labels_publish_once(const struct devlet_config *cfg, const struct dev_labels *set,
                        struct diag *diag)
{
        struct kapi_client *api = NULL;
        int r = api_new(cfg->kubeconfig, &api, diag);
        if (r < 0)
                return r;
        _cleanup_free_ char *node = config_node_name(cfg);
        json_t *desired = labels_to_json(set);
        int writes = 0;
        r = publish(api, NULL, labels_output_mode(cfg), node, cfg->labels_namespace, desired,
                    &writes, diag);
        json_decref(desired);
        kapi_client_free(api);
        return r;
}

/* ---- the thread ---- */

/* Waits ms or until stopped (mu held); a new set does not cut a backoff. */
static void sleep_ms(struct labels_publisher *p, long ms)
{
        struct timespec until = clock_monotonic_in(ms);
        while (!atomic_load(&p->stop) &&
               pthread_cond_timedwait(&p->cond, &p->mu, &until) != ETIMEDOUT)
                ;
}

static void *publisher_main(void *ud)
{
        struct labels_publisher *p = ud;
        struct kapi_client *api = NULL;
        unsigned attempt = 0;
        char last_error[DIAG_FORMAT_MAX] = "";
        bool published = false;
        pthread_mutex_lock(&p->mu);
        for (;;) {
                struct timespec resync = clock_monotonic_in(LABELS_RESYNC_MS);
                while ((!p->dirty || !p->desired) && !atomic_load(&p->stop))
                        if (pthread_cond_timedwait(&p->cond, &p->mu, &resync) == ETIMEDOUT) {
                                p->dirty = true;
                                resync = clock_monotonic_in(LABELS_RESYNC_MS);
                        }
                if (atomic_load(&p->stop))
                        break;
                p->dirty = false;
                json_t *desired = json_incref(p->desired);
                pthread_mutex_unlock(&p->mu);

                struct diag why = { 0 };
                int writes = 0;
                int r = api ? 0 : api_new(p->kubeconfig, &api, &why);
                if (r >= 0)
                        r = publish(api, &p->stop, p->mode, p->node, p->ns, desired, &writes,
                                    &why);
                size_t n = json_object_size(desired);
                json_decref(desired);

                pthread_mutex_lock(&p->mu);
                if (r < 0 && atomic_load(&p->stop))
                        break; /* the stop cut the call short */
                if (r < 0) {
                        char buf[DIAG_FORMAT_MAX];
                        if (why.message[0])
                                diag_format(&why, buf, sizeof(buf));
                        else
                                snprintf(buf, sizeof(buf), "%s", strerror(-r));
                        if (strcmp(buf, last_error) != 0)
                                log_warn("labels", "cannot publish the labels, retrying output=%s "
                                                   "node=%s error=\"%s\"",
                                         labels_output_name(p->mode), p->node, buf);
                        snprintf(last_error, sizeof(last_error), "%s", buf);
                        sleep_ms(p, kapi_backoff_ms(attempt++, LABELS_BACKOFF_CAP_MS));
                        p->dirty = true;
                        continue;
                }
                if (last_error[0] || !published)
                        log_info("labels", "labels published output=%s node=%s labels=%zu "
                                           "writes=%d",
                                 labels_output_name(p->mode), p->node, n, writes);
                else if (writes)
                        log_debug("labels", "labels published output=%s labels=%zu",
                                  labels_output_name(p->mode), n);
                last_error[0] = '\0';
                published = true;
                attempt = 0;
        }
        pthread_mutex_unlock(&p->mu);
        kapi_client_free(api);
        return NULL;
}

struct labels_publisher *labels_publisher_start(const struct devlet_config *cfg)
{
        struct labels_publisher *p = xcalloc(1, sizeof(*p));
        p->mode = labels_output_mode(cfg);
        p->kubeconfig = xstrdup(cfg->kubeconfig ? cfg->kubeconfig : "");
        p->node = config_node_name(cfg);
        p->ns = xstrdup(cfg->labels_namespace && cfg->labels_namespace[0] ? cfg->labels_namespace
                                                                           : "default");
        pthread_mutex_init(&p->mu, NULL);
        clock_cond_init(&p->cond);
        pthread_create(&p->thread, NULL, publisher_main, p);
        log_info("labels", "publishing through the API server output=%s node=%s%s%s",
                 labels_output_name(p->mode), p->node,
                 p->mode == LABELS_TO_NODE_FEATURE ? " namespace=" : "",
                 p->mode == LABELS_TO_NODE_FEATURE ? p->ns : "");
        return p;
}

void labels_publisher_set(struct labels_publisher *p, const struct dev_labels *set)
{
        json_t *desired = labels_to_json(set);
        pthread_mutex_lock(&p->mu);
        json_t *old = p->desired;
        p->desired = desired;
        p->dirty = true;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->mu);
        json_decref(old);
}

void labels_publisher_stop(struct labels_publisher *p)
{
        if (!p)
                return;
        atomic_store(&p->stop, true);
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cond);
        json_decref(p->desired);
        free(p->kubeconfig);
        free(p->node);
        free(p->ns);
        free(p);
}
