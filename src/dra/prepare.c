/* One driver's claims thread: NodePrepareResources and
 * NodeUnprepareResources, one job at a time, and the checkpoint of the
 * claims prepared.
 *
 * Prepare reads the ResourceClaim from the API server, takes the results
 * for this driver and node, finds each device in the device table (a
 * vanished or unhealthy device fails the claim with a message the kubelet
 * puts in the pod's events), writes one CDI spec for the claim
 * (<cdi-spec-dir>/k8s.<driver>-claim_<uid>.json, kind
 * k8s.<driver>/claim) and answers the CDI device IDs.  The edits of the
 * devices one request takes from one resource are merged into one CDI
 * device, so values such as NVIDIA_VISIBLE_DEVICES list every device.
 * Both calls are idempotent: a claim in the checkpoint is answered from
 * it (its spec written again if it went missing, or a crash left it
 * empty or torn: specs are written without fsync, the checkpoint with
 * one), and unpreparing an
 * unknown claim succeeds.  The checkpoint (<plugins>/<driver>/
 * checkpoint.json) is written atomically, never through a link, before
 * the answer goes, so a restart in between loses nothing and leaks
 * nothing.  Memory and disk never disagree: a claim whose checkpoint write
 * fails is not prepared (what was done for it is undone: its entry, its
 * CDI spec) and answers the error, so the retry prepares afresh; one whose
 * removal cannot be written stays prepared, in memory as on disk, and
 * answers the error, so the retry unprepares again.  Runs on its own
 * thread; owns the checkpoint. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "dra.pb-c.h"
#include "dra/internal.h"
#include "kapi/json-filter.h"

#define CHECKPOINT_MAX (16u * 1024 * 1024)
#define CDI_SPEC_MAX (4u * 1024 * 1024) /* a claim's spec: its devices' edits, a few KiB */
/* Values the checkpoint's tree may hold: a node's claims, a few dozen each. */
#define CHECKPOINT_VALUES_MAX (128u << 10)
#define CLAIM_GET_MS 10000
#define CLAIM_GET_TRIES 3

struct claims_state {
        struct dra_driver *drv;
        json_t *ckpt;   /* {"version": 1, "driver": D, "claims": {uid: {...}}} */
        char *ckpt_path;
};

static json_t *ckpt_claims(struct claims_state *s)
{
        return json_object_get(s->ckpt, "claims");
}

static void ckpt_load(struct claims_state *s)
{
        s->ckpt = json_pack("{s:i, s:s, s:{}}", "version", 1, "driver", s->drv->name, "claims");
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        /* never through a link: it would point us at a file someone else chose */
        int r = fs_read_file_nofollow(s->ckpt_path, CHECKPOINT_MAX, &data, &len);
        if (r == -ENOENT)
                return;
        if (r < 0) {
                log_warn("dra", "cannot read the checkpoint, starting empty path=%s error=\"%s\"",
                         s->ckpt_path, fs_strerror(r));
                return;
        }
        struct diag why = { 0 };
        json_t *j = NULL;
        r = kapi_json_load(data, len, NULL,
                           &(struct kapi_json_budget){ .max_values = CHECKPOINT_VALUES_MAX,
                                                       .max_bytes = CHECKPOINT_MAX },
                           JSON_REJECT_DUPLICATES, &j, &why);
        json_t *claims = json_object_get(j, "claims");
        if (!json_is_object(claims)) {
                log_warn("dra", "checkpoint is not devlet's, starting empty path=%s error=\"%s\"",
                         s->ckpt_path, r < 0 ? why.message : "no claims object");
                json_decref(j);
                return;
        }
        json_object_set(s->ckpt, "claims", claims);
        json_decref(j);
        log_info("dra", "checkpoint loaded driver=%s claims=%zu", s->drv->name,
                 json_object_size(claims));
}

static int ckpt_save(struct claims_state *s, struct diag *diag)
{
        _cleanup_free_ char *text = json_dumps(s->ckpt, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text)
                return diag_set(diag, -ENOMEM, "cannot render the checkpoint");
        int r = fs_write_atomic_at(AT_FDCWD, s->ckpt_path, text, strlen(text), 0600, FS_CREATE,
                                   diag);
        if (r < 0)
                return diag_prefix(diag, r, "cannot write the checkpoint %s", s->ckpt_path);
        return 0;
}

static char *spec_path(const struct dra_driver *drv, const char *uid)
{
        return xasprintf("%s/k8s.%s-claim_%s.json", drv->dra->cdi_spec_dir, drv->name, uid);
}

/* Values of the same variable from several devices: listed, comma-separated. */
static void merge_alloc(struct dev_alloc *dst, const struct dev_alloc *src)
{
        for (size_t i = 0; i < src->n_nodes; i++)
                dev_alloc_add_node(dst, src->nodes[i].host_path, src->nodes[i].container_path,
                                   src->nodes[i].permissions);
        for (size_t i = 0; i < src->n_mounts; i++)
                dev_alloc_add_mount(dst, src->mounts[i].host_path, src->mounts[i].container_path,
                                    src->mounts[i].read_only);
        for (size_t i = 0; i < src->n_envs; i++) {
                const struct dev_kv *e = &src->envs[i];
                const char *old = NULL;
                for (size_t k = 0; k < dst->n_envs; k++)
                        if (strcmp(dst->envs[k].key, e->key) == 0)
                                old = dst->envs[k].value;
                if (old && strcmp(old, e->value) != 0) {
                        _cleanup_free_ char *v = xasprintf("%s,%s", old, e->value);
                        dev_alloc_set_env(dst, e->key, v);
                } else {
                        dev_alloc_set_env(dst, e->key, e->value);
                }
        }
        for (size_t i = 0; src->cdi_devices && src->cdi_devices[i]; i++)
                dev_alloc_add_cdi(dst, src->cdi_devices[i]);
}

DEFINE_CLEANUP_FUNC(struct cdi_spec, cdi_spec_free)

/* The claim's opaque configs, applied: each device takes the last config
 * that applies to its request; each config goes to its resources' families
 * once per resource, with the devices it won.  What a config gives the
 * containers becomes a CDI device of the claim's spec, "<uid>-config-<k>",
 * whose name goes into extra[i] of each device i it applies to. */
static int apply_configs(const struct dra_table *t, const struct dra_claim *c,
                         const struct dra_dev **devs, struct cdi_spec *spec, const char *kind,
                         const struct dra_cdi_ops *cdi, const atomic_bool *stop, char **extra,
                         struct diag *diag)
{
        if (c->n_configs == 0)
                return 0;
        _cleanup_free_ size_t *winner = xcalloc(c->n_devices, sizeof(size_t));
        for (size_t i = 0; i < c->n_devices; i++) {
                winner[i] = SIZE_MAX;
                for (size_t k = 0; k < c->n_configs; k++)
                        if (dra_claim_config_applies(&c->configs[k], c->devices[i].request))
                                winner[i] = k;
        }
        _cleanup_free_ const char **ids = xcalloc(c->n_devices + 1, sizeof(char *));
        for (size_t k = 0; k < c->n_configs; k++) {
                const struct dra_claim_config *cc = &c->configs[k];
                _cleanup_free_ char *where = xasprintf("the %s's config[%zu]",
                                                       cc->from_class ? "DeviceClass" : "claim",
                                                       cc->index);
                struct dev_alloc merged = { 0 };
                int r = 0;
                /* once per resource, in the order devices name them */
                for (size_t i = 0; i < c->n_devices && r == 0; i++) {
                        if (winner[i] != k)
                                continue;
                        bool done = false;
                        for (size_t j = 0; j < i; j++)
                                done = done || (winner[j] == k &&
                                                strcmp(devs[j]->resource, devs[i]->resource) == 0);
                        if (done)
                                continue;
                        const struct dra_res_config *rc = dra_table_config(t, devs[i]->resource);
                        if (!rc) {
                                r = diag_set(diag, -EINVAL,
                                             "%s: driver %s takes no opaque configuration "
                                             "for %s (device %s)",
                                             where, t->driver, devs[i]->resource, devs[i]->name);
                                break;
                        }
                        size_t n = 0;
                        for (size_t j = i; j < c->n_devices; j++)
                                if (winner[j] == k &&
                                    strcmp(devs[j]->resource, devs[i]->resource) == 0)
                                        ids[n++] = devs[j]->id;
                        ids[n] = NULL;
                        struct dev_claim_config dc = {
                                .claim_uid = c->uid,
                                .where = where,
                                .parameters = cc->parameters,
                                .ids = (char *const *)(uintptr_t)ids,
                                .n = n,
                                .all_requests = cc->requests == NULL,
                                .stop = stop,
                        };
                        r = rc->ops->configure(rc->ctx, &dc, &merged, diag);
                }
                if (r == 0 && (merged.n_envs || merged.n_mounts || merged.n_nodes)) {
                        _cleanup_free_ char *dev_name = xasprintf("%s-config-%zu", c->uid, k);
                        struct cdi_device *cd = cdi_spec_add_device(spec, dev_name);
                        cdi->edits_from_alloc(&merged, &cd->edits);
                        for (size_t i = 0; i < c->n_devices; i++)
                                if (winner[i] == k)
                                        extra[i] = xasprintf("%s=%s", kind, dev_name);
                }
                dev_alloc_release(&merged);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The claim's devices in the table, its spec written; the answer's devices
 * (JSON, for the checkpoint and the reply) in *out. */
static int prepare_devices(struct claims_state *s, const struct dra_claim *c, json_t **out,
                           struct diag *diag)
{
        struct dra_driver *drv = s->drv;
        pthread_mutex_lock(&drv->mu);
        struct dra_table *t = dra_table_ref(drv->table);
        pthread_mutex_unlock(&drv->mu);

        const struct dra_dev **devs = xcalloc(c->n_devices, sizeof(*devs));
        int r = 0;
        for (size_t i = 0; i < c->n_devices && r == 0; i++) {
                devs[i] = dra_table_find(t, c->devices[i].device);
                if (!devs[i])
                        r = diag_set(diag, -ENODEV, "device %s is not on this node any more",
                                     c->devices[i].device);
                else if (!devs[i]->healthy && !c->devices[i].admin_access)
                        /* an admin-access claim (monitoring, debugging)
                         * gets it all the same: a broken device is what
                         * such a pod looks at */
                        r = diag_set(diag, -EIO, "device %s is unhealthy", devs[i]->name);
        }

        _cleanup_free_ char *kind = xasprintf("k8s.%s/claim", drv->name);
        _cleanup_(cdi_spec_freep) struct cdi_spec *spec = r == 0 ? cdi_spec_new(kind) : NULL;
        char **extra = xcalloc(c->n_devices, sizeof(char *));
        if (r == 0)
                r = apply_configs(t, c, devs, spec, kind, &drv->dra->cdi, &drv->stop, extra, diag);
        json_t *answer = json_array();
        /* one CDI device per (request, resource), named after its first device */
        for (size_t i = 0; i < c->n_devices && r == 0; i++) {
                const char *cdi_id = NULL;
                _cleanup_free_ char *id = NULL;
                bool first = true;
                for (size_t k = 0; k < i; k++)
                        if (strcmp(c->devices[k].request, c->devices[i].request) == 0 &&
                            strcmp(devs[k]->resource, devs[i]->resource) == 0)
                                first = false;
                json_t *ids = json_array();
                if (first) {
                        struct dev_alloc merged = { 0 };
                        for (size_t k = i; k < c->n_devices; k++)
                                if (strcmp(c->devices[k].request, c->devices[i].request) == 0 &&
                                    strcmp(devs[k]->resource, devs[i]->resource) == 0)
                                        merge_alloc(&merged, &devs[k]->alloc);
                        _cleanup_free_ char *dev_name = xasprintf("%s-%s", c->uid, devs[i]->name);
                        struct cdi_device *cd = cdi_spec_add_device(spec, dev_name);
                        drv->dra->cdi.edits_from_alloc(&merged, &cd->edits);
                        if (cdi_edits_empty(&cd->edits))
                                cdi_edits_add_env(&cd->edits, "DEVLET_DRA_CLAIM", c->uid);
                        id = xasprintf("%s=%s", kind, dev_name);
                        cdi_id = id;
                        json_array_append_new(ids, json_string(cdi_id));
                        for (size_t k = 0; merged.cdi_devices && merged.cdi_devices[k]; k++)
                                json_array_append_new(ids, json_string(merged.cdi_devices[k]));
                        dev_alloc_release(&merged);
                        /* the configs' CDI devices of the group, each once */
                        for (size_t k = i; k < c->n_devices; k++) {
                                if (!extra[k] || strcmp(c->devices[k].request,
                                                        c->devices[i].request) != 0 ||
                                    strcmp(devs[k]->resource, devs[i]->resource) != 0)
                                        continue;
                                bool have = false;
                                size_t x;
                                json_t *v;
                                json_array_foreach(ids, x, v)
                                        have = have || strcmp(json_string_value(v), extra[k]) == 0;
                                if (!have)
                                        json_array_append_new(ids, json_string(extra[k]));
                        }
                }
                json_array_append_new(answer,
                                      json_pack("{s:[s], s:s, s:s, s:o}", "requests",
                                                c->devices[i].request, "pool", c->devices[i].pool,
                                                "device", c->devices[i].device, "cdiDeviceIDs",
                                                ids));
        }
        if (r == 0) {
                _cleanup_free_ char *text = NULL;
                size_t len = 0;
                r = drv->dra->cdi.render_json(spec, &text, &len, diag);
                _cleanup_free_ char *path = spec_path(drv, c->uid);
                if (r == 0) {
                        /* no fsync: the checkpoint's is the one that counts, and a
                         * spec a crash left empty or torn is made again (spec_intact) */
                        r = fs_write_atomic_at(AT_FDCWD, path, text, len, 0644,
                                               FS_CREATE | FS_NO_FSYNC, diag);
                        if (r < 0)
                                diag_prefix(diag, r, "cannot write the CDI spec %s", path);
                }
        }
        for (size_t i = 0; i < c->n_devices; i++)
                free(extra[i]);
        free(extra);
        free(devs);
        dra_table_unref(t);
        if (r < 0) {
                json_decref(answer);
                return r;
        }
        *out = answer;
        return 0;
}

/* What dra_claim_decode reads of a claim; the rest (its spec, the
 * requests) is skipped unparsed. */
static const struct kapi_keep claim_keep = {
        .spec = "{metadata{namespace,name,uid},"
                "status{allocation{devices{results[{driver,request,pool,device,adminAccess}],"
                "config[{source,requests*32,opaque{driver,parameters}}]}}}}",
};

/* GET the claim, with a few tries for failures that may pass. */
static int claim_get(struct claims_state *s, const struct dra_job_claim *jc, struct dra_claim *out,
                     struct diag *diag)
{
        struct dra_driver *drv = s->drv;
        _cleanup_free_ char *path = xasprintf("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
                                              jc->namespace, jc->name);
        int r = 0;
        for (unsigned attempt = 0; attempt < CLAIM_GET_TRIES; attempt++) {
                if (attempt)
                        if (!sleeper_pause(&drv->pause, (long)kapi_backoff_ms(attempt - 1, 2000)))
                                break; /* the driver stops */
                struct kapi_response resp = { 0 };
                memset(diag, 0, sizeof(*diag));
                r = kapi_request_keep(drv->dra->api, "GET", path, NULL, &claim_keep, CLAIM_GET_MS,
                                      &drv->stop, &resp, diag);
                long status = resp.status;
                if (r == 0 && status == 200) {
                        /* the claim as the API server holds it: asking again
                         * would get the same refusal */
                        r = dra_claim_decode(resp.body, jc->uid, drv->name, drv->dra->node, out,
                                             diag);
                        kapi_response_release(&resp);
                        break;
                }
                if (r == 0)
                        r = -EPROTO;
                kapi_response_release(&resp);
                if (r == 0 || !kapi_retryable(r == -EPROTO ? 0 : r, status) ||
                    atomic_load(&drv->stop))
                        break;
        }
        return r;
}

/* What the families left running for the claim's configs (an MPS daemon)
 * is stopped, whatever they were: unknown or none, it costs a lookup. */
static void unconfigure(struct dra_driver *drv, const char *uid)
{
        pthread_mutex_lock(&drv->mu);
        struct dra_table *t = dra_table_ref(drv->table);
        pthread_mutex_unlock(&drv->mu);
        for (size_t i = 0; t && i < t->n_configs; i++)
                if (t->configs[i].ops->unconfigure)
                        t->configs[i].ops->unconfigure(t->configs[i].ctx, uid);
        dra_table_unref(t);
}

/* Whether the claim's CDI spec at path is there and whole: a regular file
 * that parses as JSON (it is written without fsync, so after a crash it
 * may be empty or cut short). */
static bool spec_intact(const char *path)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (fs_read_file_nofollow(path, CDI_SPEC_MAX, &text, &len) < 0 || len == 0)
                return false;
        json_t *j = NULL;
        int r = kapi_json_load(text, len, NULL,
                               &(struct kapi_json_budget){ .max_values = CHECKPOINT_VALUES_MAX,
                                                           .max_bytes = CDI_SPEC_MAX },
                               JSON_REJECT_DUPLICATES, &j, NULL);
        bool ok = r == 0 && json_is_object(j);
        json_decref(j);
        return ok;
}

static json_t *prepare_one(struct claims_state *s, const struct dra_job_claim *jc, char **error)
{
        struct dra_driver *drv = s->drv;
        json_t *known = json_object_get(ckpt_claims(s), jc->uid);
        struct diag why = { 0 };
        if (json_is_object(known)) {
                _cleanup_free_ char *path = spec_path(drv, jc->uid);
                if (spec_intact(path))
                        return json_incref(json_object_get(known, "devices"));
        }
        struct dra_claim c = { 0 };
        int r = claim_get(s, jc, &c, &why);
        json_t *devices = NULL;
        if (r == 0)
                r = prepare_devices(s, &c, &devices, &why);
        if (r == 0) {
                /* what the checkpoint on disk holds for it, put back if
                 * the write fails */
                json_t *before = json_incref(known);
                json_object_set_new(ckpt_claims(s), jc->uid,
                                    json_pack("{s:s, s:s, s:O}", "namespace", jc->namespace,
                                              "name", jc->name, "devices", devices));
                r = ckpt_save(s, &why);
                if (r < 0) {
                        if (before)
                                json_object_set(ckpt_claims(s), jc->uid, before);
                        else
                                json_object_del(ckpt_claims(s), jc->uid);
                        _cleanup_free_ char *path = spec_path(drv, jc->uid);
                        (void)unlink(path);
                }
                json_decref(before);
        }
        dra_claim_release(&c);
        if (r < 0) {
                unconfigure(drv, jc->uid); /* a config that was applied before the failure */
                json_decref(devices);
                *error = xasprintf("claim %s/%s: %s", jc->namespace, jc->name,
                                   why.message[0] ? why.message : strerror(-r));
                log_warn("dra", "prepare failed driver=%s claim=%s/%s uid=%s error=\"%s\"",
                         drv->name, jc->namespace, jc->name, jc->uid, *error);
                return NULL;
        }
        log_info("dra", "prepared driver=%s claim=%s/%s uid=%s devices=%zu", drv->name,
                 jc->namespace, jc->name, jc->uid, json_array_size(devices));
        return devices;
}

static char *unprepare_one(struct claims_state *s, const struct dra_job_claim *jc)
{
        unconfigure(s->drv, jc->uid);
        _cleanup_free_ char *path = spec_path(s->drv, jc->uid);
        if (unlink(path) < 0 && errno != ENOENT)
                return xasprintf("claim %s/%s: cannot remove %s: %s", jc->namespace, jc->name,
                                 path, strerror(errno));
        json_t *known = json_incref(json_object_get(ckpt_claims(s), jc->uid));
        if (known) {
                json_object_del(ckpt_claims(s), jc->uid);
                struct diag why = { 0 };
                if (ckpt_save(s, &why) < 0) {
                        /* still prepared on disk: so in memory, for the retry */
                        json_object_set_new(ckpt_claims(s), jc->uid, known);
                        log_warn("dra", "unprepare failed driver=%s claim=%s/%s uid=%s "
                                        "error=\"%s\"",
                                 s->drv->name, jc->namespace, jc->name, jc->uid, why.message);
                        return xasprintf("claim %s/%s: %s", jc->namespace, jc->name, why.message);
                }
                json_decref(known);
                log_info("dra", "unprepared driver=%s claim=%s/%s uid=%s", s->drv->name,
                         jc->namespace, jc->name, jc->uid);
        }
        return NULL;
}

/* ---- packing the answers ---- */

static char **json_strv(const json_t *a, size_t *n)
{
        *n = json_array_size(a);
        char **v = xcalloc(*n + 1, sizeof(char *));
        for (size_t i = 0; i < *n; i++) {
                const char *s = json_string_value(json_array_get(a, i));
                v[i] = xstrdup(s ? s : "");
        }
        return v;
}

/* The devices the checkpoint's claims hold. */
static size_t ckpt_devices(struct claims_state *s)
{
        size_t n = 0;
        const char *uid;
        json_t *c;
        json_object_foreach(ckpt_claims(s), uid, c)
                n += json_array_size(json_object_get(c, "devices"));
        return n;
}

static void pack_prepare(struct claims_state *s, struct dra_job *j)
{
        size_t n = j->n_claims;
        Dra__V1__NodePrepareResourcesResponse resp = DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
        Dra__V1__NodePrepareResourcesResponse__ClaimsEntry *entries = xcalloc(n + 1, sizeof(*entries));
        Dra__V1__NodePrepareResourcesResponse__ClaimsEntry **ep = xcalloc(n + 1, sizeof(*ep));
        Dra__V1__NodePrepareResourceResponse *rs = xcalloc(n + 1, sizeof(*rs));
        json_t **answers = xcalloc(n + 1, sizeof(*answers));
        char **errors = xcalloc(n + 1, sizeof(*errors));
        for (size_t i = 0; i < n; i++) {
                dra__v1__node_prepare_resources_response__claims_entry__init(&entries[i]);
                dra__v1__node_prepare_resource_response__init(&rs[i]);
                answers[i] = prepare_one(s, &j->claims[i], &errors[i]);
                entries[i].key = j->claims[i].uid;
                entries[i].value = &rs[i];
                ep[i] = &entries[i];
                if (!answers[i]) {
                        rs[i].error = errors[i];
                        j->claim_errors++;
                        continue;
                }
                size_t nd = json_array_size(answers[i]);
                rs[i].n_devices = nd;
                rs[i].devices = xcalloc(nd + 1, sizeof(*rs[i].devices));
                for (size_t k = 0; k < nd; k++) {
                        const json_t *d = json_array_get(answers[i], k);
                        Dra__V1__Device *pd = xcalloc(1, sizeof(*pd));
                        dra__v1__device__init(pd);
                        pd->request_names = json_strv(json_object_get(d, "requests"),
                                                      &pd->n_request_names);
                        pd->pool_name = xstrdup(json_string_value(json_object_get(d, "pool")) ?: "");
                        pd->device_name =
                                xstrdup(json_string_value(json_object_get(d, "device")) ?: "");
                        pd->cdi_device_ids = json_strv(json_object_get(d, "cdiDeviceIDs"),
                                                       &pd->n_cdi_device_ids);
                        rs[i].devices[k] = pd;
                }
        }
        resp.n_claims = n;
        resp.claims = ep;
        j->reply_len = dra__v1__node_prepare_resources_response__get_packed_size(&resp);
        j->reply = xmalloc(j->reply_len + 1);
        dra__v1__node_prepare_resources_response__pack(&resp, j->reply);
        for (size_t i = 0; i < n; i++) {
                for (size_t k = 0; k < rs[i].n_devices; k++) {
                        Dra__V1__Device *pd = rs[i].devices[k];
                        strv_free(pd->request_names);
                        strv_free(pd->cdi_device_ids);
                        free(pd->pool_name);
                        free(pd->device_name);
                        free(pd);
                }
                free(rs[i].devices);
                json_decref(answers[i]);
                free(errors[i]);
        }
        free(entries);
        free(ep);
        free(rs);
        free(answers);
        free(errors);
}

static void pack_unprepare(struct claims_state *s, struct dra_job *j)
{
        size_t n = j->n_claims;
        Dra__V1__NodeUnprepareResourcesResponse resp =
                DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
        Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry *entries =
                xcalloc(n + 1, sizeof(*entries));
        Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry **ep = xcalloc(n + 1, sizeof(*ep));
        Dra__V1__NodeUnprepareResourceResponse *rs = xcalloc(n + 1, sizeof(*rs));
        for (size_t i = 0; i < n; i++) {
                dra__v1__node_unprepare_resources_response__claims_entry__init(&entries[i]);
                dra__v1__node_unprepare_resource_response__init(&rs[i]);
                rs[i].error = unprepare_one(s, &j->claims[i]);
                if (rs[i].error != protobuf_c_empty_string)
                        j->claim_errors++;
                entries[i].key = j->claims[i].uid;
                entries[i].value = &rs[i];
                ep[i] = &entries[i];
        }
        resp.n_claims = n;
        resp.claims = ep;
        j->reply_len = dra__v1__node_unprepare_resources_response__get_packed_size(&resp);
        j->reply = xmalloc(j->reply_len + 1);
        dra__v1__node_unprepare_resources_response__pack(&resp, j->reply);
        for (size_t i = 0; i < n; i++)
                if (rs[i].error != protobuf_c_empty_string)
                        free(rs[i].error);
        free(entries);
        free(ep);
        free(rs);
}

/* ---- the claims' work, in libuv's pool ----
 * One work item per driver at a time, so the claims are prepared in the
 * order they came and the checkpoint has one writer: it takes the queued
 * jobs until none is left, answers each through the done handoff, and asks
 * for another turn when jobs came meanwhile (claims_after). */

struct dra_claims_work {
        uv_work_t req;
        struct dra_driver *drv; /* NULL: the driver stopped while it ran */
};

static void claims_work(uv_work_t *req)
{
        struct dra_driver *drv = ((struct dra_claims_work *)req->data)->drv;
        struct claims_state *s = drv->claims;
        if (!s) {
                s = drv->claims = xcalloc(1, sizeof(*s));
                s->drv = drv;
                s->ckpt_path = xasprintf("%s/checkpoint.json", drv->dir);
                ckpt_load(s);
        }
        pthread_mutex_lock(&drv->mu);
        while (!atomic_load(&drv->stop) && drv->jobs) {
                struct dra_job *j = drv->jobs;
                drv->jobs = j->next;
                if (!drv->jobs)
                        drv->jobs_tail = &drv->jobs;
                j->next = NULL;
                pthread_mutex_unlock(&drv->mu);
                if (j->kind == DRA_JOB_PREPARE)
                        pack_prepare(s, j);
                else
                        pack_unprepare(s, j);
                j->prepared_devices = ckpt_devices(s);
                log_info("dra", "answered method=%s driver=%s claims=%zu ms=%.2f",
                         j->kind == DRA_JOB_PREPARE ? "NodePrepareResources"
                                                    : "NodeUnprepareResources",
                         drv->name, j->n_claims, (double)(uv_hrtime() - j->queued_ns) / 1e6);
                handoff_post(&drv->done, &j->done);
                pthread_mutex_lock(&drv->mu);
        }
        drv->claims_running = false;
        pthread_cond_broadcast(&drv->cond);
        pthread_mutex_unlock(&drv->mu);
}

static void claims_after(uv_work_t *req, int status)
{
        struct dra_claims_work *w = req->data;
        struct dra_driver *drv = w->drv;
        free(w);
        if (!drv)
                return; /* the driver is gone */
        drv->claims_work = NULL;
        dra_claims_kick(drv);
}

void dra_claims_kick(struct dra_driver *drv)
{
        if (drv->claims_work || atomic_load(&drv->stop))
                return;
        pthread_mutex_lock(&drv->mu);
        /* the first turn runs at once: it reads the checkpoint (and says
         * what is wrong with it) before a claim comes */
        bool any = drv->jobs != NULL || !drv->claims_kicked;
        drv->claims_kicked = true;
        if (any)
                drv->claims_running = true;
        pthread_mutex_unlock(&drv->mu);
        if (!any)
                return;
        struct dra_claims_work *w = xcalloc(1, sizeof(*w));
        w->drv = drv;
        w->req.data = w;
        int r = uv_queue_work(drv->dra->loop, &w->req, claims_work, claims_after);
        if (r < 0) {
                /* cannot happen with a live loop; the jobs wait for the next kick */
                log_error("dra", "cannot queue the claims' work driver=%s error=\"%s\"",
                          drv->name, uv_strerror(r));
                pthread_mutex_lock(&drv->mu);
                drv->claims_running = false;
                pthread_mutex_unlock(&drv->mu);
                free(w);
                return;
        }
        drv->claims_work = w;
}

void dra_claims_stop(struct dra_driver *drv)
{
        /* drv->stop is set: the work leaves after the job it is on (its API
         * calls look at the flag every 100 ms) */
        if (drv->claims_work && uv_cancel((uv_req_t *)&drv->claims_work->req) == 0) {
                pthread_mutex_lock(&drv->mu); /* it never ran */
                drv->claims_running = false;
                pthread_mutex_unlock(&drv->mu);
        }
        pthread_mutex_lock(&drv->mu);
        while (drv->claims_running)
                pthread_cond_wait(&drv->cond, &drv->mu);
        pthread_mutex_unlock(&drv->mu);
        if (drv->claims_work)
                drv->claims_work->drv = NULL; /* its after-callback frees it alone */
        drv->claims_work = NULL;
        if (drv->claims) {
                json_decref(drv->claims->ckpt);
                free(drv->claims->ckpt_path);
                free(drv->claims);
                drv->claims = NULL;
        }
}
