/* The labels through the API server (--labels-output node-feature or node),
 * for the labeler: one publisher thread, which owns the API client.
 *
 * node-feature: NFD's NodeFeature object as GFD writes it with
 * --use-node-feature-api: nfd.k8s-sigs.io/v1alpha1, named
 * "nvidia-features-for-<node>" in --namespace, labelled
 * nfd.node.kubernetes.io/node-name=<node>, the labels in spec.labels.
 * Read, then created (POST) when missing or replaced (PUT of the object
 * read with our labels and spec: its resourceVersion makes a concurrent
 * writer's change fail the call) when its labels differ; nothing is written
 * when they are the same.  Afterwards a change is a PUT of the object the
 * last answer returned; a conflict (409) or a deleted object (404) reads it
 * again at once.
 *
 * node: the Node's own labels, as AMD's k8s-node-labeller sets them.  The
 * keys devlet wrote are listed in the Node's annotation
 * LABELS_OWNED_ANNOTATION, so a label devlet no longer produces is
 * removed, after a restart too, and a label devlet never wrote is never
 * touched.  Read, then one JSON merge patch: the labels that differ, null
 * for owned ones that went, the new list of owned keys; nothing when the
 * Node already says all that.  Afterwards a change is a merge patch of the
 * changed keys alone (the list only when the keys changed), with no read.
 *
 * Writes only on change: at 5,000 nodes a read every labelling round is a
 * storm for nothing.  The thread keeps what the server holds as of its last
 * successful read or write (struct published) and compares each set handed
 * over with that, not with the server: equal labels cost no request.  It
 * reads the object again only after a failure, and at the re-sync
 * (--labels-resync-interval plus up to as much again at random, so nodes
 * do not read together): a label someone removed comes back then.
 *
 * The loop hands each label set over (labels_publisher_set: a copy under
 * the mutex) and never waits on the server.  A failure (no answer, an
 * error status, a body that is not what it should be) is logged once per
 * change of error and retried with backoff (kapi_backoff_ms, up to
 * LABELS_BACKOFF_CAP_MS); the latest set is the one retried.  Stopping
 * sets an atomic flag the API client looks at every 100 ms and joins the
 * thread. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/thread.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/kapi.h"
#include "labels/labels.h"

#define LABELS_RESYNC_MIN_MS 1000
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
        double qps; /* --kube-api-qps and --kube-api-burst, for the client */
        unsigned burst;

        pthread_t thread;
        struct sleeper sl; /* its mutex guards desired and dirty */
        atomic_bool stop;  /* for the API calls: set before the sleeper's stop */
        json_t *desired; /* {key: value}; NULL until the first set; never changed once set */
        bool dirty;
        int64_t resync_ms; /* -1: never */
};

/* What the server holds as of the thread's last successful read or write:
 * a set equal to labels costs no request.  Only the publishing thread (or
 * labels_publish_once) touches it. */
struct published {
        json_t *labels; /* the labels devlet owns there; NULL: unknown, read first */
        json_t *object; /* node-feature: the object as last answered; NULL: read first */
};

static void published_forget(struct published *st)
{
        json_decref(TAKE_PTR(st->labels));
        json_decref(TAKE_PTR(st->object));
}

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

json_t *labels_node_patch_since(json_t *written, json_t *desired)
{
        json_t *labels = json_object();
        bool keys_changed = false;
        const char *key;
        json_t *v;
        json_object_foreach(desired, key, v) {
                const json_t *cur = json_object_get(written, key);
                keys_changed |= !cur;
                if (!json_is_string(cur) ||
                    strcmp(json_string_value(cur), json_string_value(v)) != 0)
                        json_object_set_new(labels, key, json_string(json_string_value(v)));
        }
        json_object_foreach(written, key, v)
                if (!json_object_get(desired, key)) {
                        json_object_set_new(labels, key, json_null());
                        keys_changed = true;
                }
        if (json_object_size(labels) == 0) {
                json_decref(labels);
                return NULL;
        }
        json_t *meta = json_pack("{s:o}", "labels", labels);
        if (keys_changed) {
                _cleanup_free_ char *want = owned_list(desired);
                json_object_set_new(meta, "annotations",
                                    json_pack("{s:s}", LABELS_OWNED_ANNOTATION, want));
        }
        return json_pack("{s:o}", "metadata", meta);
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

/* node: the first time (and after a failure or at the re-sync) the Node is
 * read and patched where it differs; afterwards only the keys that changed
 * since the last write are patched, without a read. */
static int publish_node(const struct call_ctx *c, const char *node, json_t *desired,
                        struct published *st, int *writes, struct diag *diag)
{
        _cleanup_free_ char *esc = kapi_escape(node);
        _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", esc);
        long status;
        int r;
        json_t *patch;
        if (st->labels) {
                patch = labels_node_patch_since(st->labels, desired);
        } else {
                json_t *obj = NULL;
                r = call(c, "GET", path, NULL, &node_keep, &obj, &status, diag);
                if (r >= 0)
                        r = want_object(obj, path, diag);
                if (r < 0) {
                        json_decref(obj);
                        return r;
                }
                patch = labels_node_patch(obj, desired);
                json_decref(obj);
        }
        if (patch) {
                published_forget(st); /* unknown until the answer says otherwise */
                r = call(c, "PATCH", path, patch, NULL, NULL, &status, diag);
                json_decref(patch);
                if (r < 0)
                        return r;
                (*writes)++;
        }
        json_decref(st->labels);
        st->labels = json_incref(desired);
        return 0;
}

/* GFD's update: the object read (its resourceVersion, and what others keep
 * in its metadata) with our labels and spec. */
static json_t *node_feature_update(const json_t *have, const json_t *want)
{
        json_t *put = json_deep_copy(have);
        json_t *meta = json_object_get(put, "metadata");
        json_object_set(meta, "labels",
                        json_object_get(json_object_get(want, "metadata"), "labels"));
        json_object_set(put, "spec", json_object_get(want, "spec"));
        json_object_set_new(put, "apiVersion", json_string("nfd.k8s-sigs.io/v1alpha1"));
        json_object_set_new(put, "kind", json_string("NodeFeature"));
        return put;
}

/* A write (POST or PUT) whose answer, the object as stored, becomes
 * st->object: the next change is a PUT of it, with no read.  An answer that
 * is not an object leaves st->object NULL (the next change reads first). */
static int node_feature_write(const struct call_ctx *c, const char *method, const char *path,
                              const json_t *body, struct published *st, long *status,
                              int *writes, struct diag *diag)
{
        published_forget(st);
        json_t *answer = NULL;
        int r = call(c, method, path, body, &feature_keep, &answer, status, diag);
        if (r < 0) {
                json_decref(answer);
                return r;
        }
        (*writes)++;
        struct diag ignored = { 0 };
        if (want_object(answer, path, &ignored) == 0)
                st->object = TAKE_PTR(answer);
        json_decref(answer);
        return 0;
}

static int publish_node_feature(const struct call_ctx *c, const char *node, const char *ns,
                                json_t *desired, struct published *st, int *writes,
                                struct diag *diag)
{
        _cleanup_free_ char *ens = kapi_escape(ns);
        _cleanup_free_ char *name = xasprintf(NODE_FEATURE_PREFIX "%s", node);
        _cleanup_free_ char *ename = kapi_escape(name);
        _cleanup_free_ char *coll = xasprintf(NFD_API "/namespaces/%s/nodefeatures", ens);
        _cleanup_free_ char *path = xasprintf("%s/%s", coll, ename);
        json_t *want = labels_node_feature(node, desired);
        long status = 0;
        int r = 0;
        if (st->object) {
                json_t *put = node_feature_update(st->object, want);
                r = node_feature_write(c, "PUT", path, put, st, &status, writes, diag);
                json_decref(put);
                if (r < 0 && (status == 409 || status == 404)) {
                        /* someone changed or deleted it since: read it again now */
                        *diag = (struct diag){ 0 };
                        r = 1;
                }
                if (r <= 0)
                        goto done;
        }
        json_t *have = NULL;
        struct diag why = { 0 };
        r = call(c, "GET", path, NULL, &feature_keep, &have, &status, &why);
        if (r < 0 && status == 404) {
                json_decref(have);
                r = node_feature_write(c, "POST", coll, want, st, &status, writes, diag);
                goto done;
        }
        if (r >= 0)
                r = want_object(have, path, &why);
        if (r < 0) {
                *diag = why;
                json_decref(have);
                goto done;
        }
        if (!node_feature_same(have, want)) {
                json_t *put = node_feature_update(have, want);
                r = node_feature_write(c, "PUT", path, put, st, &status, writes, diag);
                json_decref(put);
                json_decref(have);
        } else {
                st->object = have;
        }
done:
        if (r >= 0) {
                json_decref(st->labels);
                st->labels = json_incref(desired);
        }
        json_decref(want);
        return r < 0 ? r : 0;
}

static int api_new(const char *kubeconfig, double qps, unsigned burst, struct kapi_client **out,
                   struct diag *diag)
{
        struct kapi_config *kc = NULL;
        int r = kapi_config_load(kubeconfig, NULL, &kc, diag);
        if (r < 0)
                return diag_prefix(diag, r, "API server");
        r = kapi_client_new(kc, out, diag);
        if (r < 0)
                return r;
        kapi_client_set_user_agent(*out, "labels");
        kapi_client_set_rate(*out, qps, burst);
        return 0;
}

/* Makes the server hold desired; no request at all when st says it does.
 * On failure st is forgotten (the next try reads first). */
static int publish(struct kapi_client *api, const atomic_bool *stop, enum labels_output mode,
                   const char *node, const char *ns, json_t *desired, struct published *st,
                   int *writes, struct diag *diag)
{
        if (st->labels && json_equal(st->labels, desired))
                return 0;
        const struct call_ctx c = { api, stop };
        int r = mode == LABELS_TO_NODE
                        ? publish_node(&c, node, desired, st, writes, diag)
                        : publish_node_feature(&c, node, ns, desired, st, writes, diag);
        if (r < 0)
                published_forget(st);
        return r;
}

int labels_publish_once(const struct devlet_config *cfg, const struct dev_labels *set,
                        struct diag *diag)
{
        struct kapi_client *api = NULL;
        int r = api_new(cfg->kubeconfig, cfg->kube_api_qps_value, (unsigned)cfg->kube_api_burst,
                        &api, diag);
        if (r < 0)
                return r;
        _cleanup_free_ char *node = config_node_name(cfg);
        json_t *desired = labels_to_json(set);
        struct published st = { 0 };
        int writes = 0;
        r = publish(api, NULL, labels_output_mode(cfg), node, cfg->labels_namespace, desired,
                    &st, &writes, diag);
        published_forget(&st);
        json_decref(desired);
        kapi_client_free(api);
        return r;
}

/* ---- the thread ---- */

/* Waits ms or until stopped (the mutex held); a new set does not cut a
 * backoff. */
static void sleep_ms(struct labels_publisher *p, long ms)
{
        struct timespec until = sleeper_deadline(ms);
        while (sleeper_wait_locked(&p->sl, &until))
                ;
}

/* When to read the object again: the interval plus up to as much again at
 * random, so the nodes of a cluster started together do not read together. */
static struct timespec resync_deadline(int64_t every_ms)
{
        if (every_ms < LABELS_RESYNC_MIN_MS)
                every_ms = LABELS_RESYNC_MIN_MS;
        uint64_t u = 0;
        if (getrandom(&u, sizeof(u), GRND_NONBLOCK) != (ssize_t)sizeof(u)) {
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                u = (uint64_t)now.tv_nsec * 2654435761u;
        }
        return sleeper_deadline((long)(every_ms + (int64_t)(u % (uint64_t)every_ms)));
}

static void *publisher_main(void *ud)
{
        struct labels_publisher *p = ud;
        struct kapi_client *api = NULL;
        struct published st = { 0 };
        unsigned attempt = 0;
        char last_error[DIAG_FORMAT_MAX] = "";
        bool published = false;
        bool resync_armed = false;
        struct timespec resync = { 0 };
        sleeper_lock(&p->sl);
        for (;;) {
                while ((!p->dirty || !p->desired) && !sleeper_stopped_locked(&p->sl)) {
                        if (!sleeper_wait_locked(&p->sl, resync_armed ? &resync : NULL) &&
                            !sleeper_stopped_locked(&p->sl)) {
                                published_forget(&st); /* read again: what was removed comes back */
                                resync_armed = false;
                                p->dirty = true;
                        }
                }
                if (sleeper_stopped_locked(&p->sl))
                        break;
                p->dirty = false;
                json_t *desired = json_incref(p->desired);
                sleeper_unlock(&p->sl);

                struct diag why = { 0 };
                int writes = 0;
                bool read = !st.labels;
                int r = api ? 0 : api_new(p->kubeconfig, p->qps, p->burst, &api, &why);
                if (r >= 0)
                        r = publish(api, &p->stop, p->mode, p->node, p->ns, desired, &st, &writes,
                                    &why);
                size_t n = json_object_size(desired);
                json_decref(desired);

                sleeper_lock(&p->sl);
                if (r < 0 && sleeper_stopped_locked(&p->sl))
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
                if (read && p->resync_ms >= 0) {
                        resync = resync_deadline(p->resync_ms);
                        resync_armed = true;
                }
                if (last_error[0] || !published)
                        log_info("labels", "labels published output=%s node=%s labels=%zu "
                                           "writes=%d",
                                 labels_output_name(p->mode), p->node, n, writes);
                else if (writes)
                        log_debug("labels", "labels published output=%s labels=%zu",
                                  labels_output_name(p->mode), n);
                else
                        log_trace("labels", "labels unchanged, nothing sent output=%s",
                                  labels_output_name(p->mode));
                last_error[0] = '\0';
                published = true;
                attempt = 0;
        }
        sleeper_unlock(&p->sl);
        published_forget(&st);
        kapi_client_free(api);
        return NULL;
}

static void publisher_free(struct labels_publisher *p)
{
        sleeper_destroy(&p->sl);
        json_decref(p->desired);
        free(p->kubeconfig);
        free(p->node);
        free(p->ns);
        free(p);
}

struct labels_publisher *labels_publisher_start(const struct devlet_config *cfg)
{
        struct labels_publisher *p = xcalloc(1, sizeof(*p));
        p->mode = labels_output_mode(cfg);
        p->kubeconfig = xstrdup(cfg->kubeconfig ? cfg->kubeconfig : "");
        p->qps = cfg->kube_api_qps_value;
        p->burst = (unsigned)cfg->kube_api_burst;
        p->node = config_node_name(cfg);
        p->ns = xstrdup(cfg->labels_namespace && cfg->labels_namespace[0] ? cfg->labels_namespace
                                                                           : "default");
        p->resync_ms = cfg->labels_resync_interval_ms;
        sleeper_init(&p->sl);
        int e = thread_start(&p->thread, "devlet-labels", NULL, publisher_main, p);
        if (e < 0) {
                log_error("labels", "cannot start the publisher thread, labels are not "
                                    "published error=\"%s\"", strerror(-e));
                publisher_free(p);
                return NULL;
        }
        log_info("labels", "publishing through the API server output=%s node=%s%s%s",
                 labels_output_name(p->mode), p->node,
                 p->mode == LABELS_TO_NODE_FEATURE ? " namespace=" : "",
                 p->mode == LABELS_TO_NODE_FEATURE ? p->ns : "");
        return p;
}

void labels_publisher_set(struct labels_publisher *p, const struct dev_labels *set)
{
        json_t *desired = labels_to_json(set);
        sleeper_lock(&p->sl);
        json_t *old = p->desired;
        p->desired = desired;
        p->dirty = true;
        sleeper_wake_locked(&p->sl);
        sleeper_unlock(&p->sl);
        json_decref(old);
}

void labels_publisher_stop(struct labels_publisher *p)
{
        if (!p)
                return;
        atomic_store(&p->stop, true);
        sleeper_stop(&p->sl);
        pthread_join(p->thread, NULL);
        publisher_free(p);
}
