/* One driver's kubelet plugin: the registration socket the kubelet's
 * plugin watcher finds (GetInfo, NotifyRegistrationStatus), the DRA
 * service socket (NodePrepareResources, NodeUnprepareResources; v1 and
 * v1beta1, same messages), and the job queue between them and the claims
 * thread (prepare.c).
 *
 * A request's claims are counted on its wire bytes before it is decoded
 * (grpc_call_unpack), so one over DRA_CLAIMS_MAX costs nothing to refuse.
 * Handlers run on the loop and never block it: a request becomes a job
 * queued for the claims thread, whose packed answer comes back through
 * the driver's done handoff and is sent here.  A call the kubelet gives up on
 * (cancel, connection gone) is forgotten; its job still runs to the end,
 * so the checkpoint stays true. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "dra.pb-c.h"
#include "dra/internal.h"
#include "grpc/grpc.h"
#include "pluginregistration.pb-c.h"

/* The kubelet keeps one connection to each driver and counts a driver
 * without one as gone (its slices are wiped 30 s later): never close an
 * idle kubelet connection. */
#define DRA_IDLE_MS (24u * 3600 * 1000)

/* Claims in one request: checked on the wire bytes before the request is
 * decoded (a Claim has 3 fields; room for a few a newer kubelet may add). */
#define DRA_CLAIMS_MAX 1024
static const struct grpc_pb_limits claims_limits = {
        .max_entries = DRA_CLAIMS_MAX,
        .max_fields = 8 * DRA_CLAIMS_MAX,
};

void dra_job_free(struct dra_job *j)
{
        if (!j)
                return;
        for (size_t i = 0; i < j->n_claims; i++) {
                free(j->claims[i].namespace);
                free(j->claims[i].uid);
                free(j->claims[i].name);
        }
        free(j->claims);
        free(j->reply);
        free(j);
}

/* ---- registration ---- */

static void on_get_info(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        struct dra_driver *drv = ud;
        static char v1[] = "v1.DRAPlugin", v1beta1[] = "v1beta1.DRAPlugin", type[] = "DRAPlugin";
        /* the health service too (KEP-4680): 1.37's kubelet picks the first
         * it knows of its own list, v1 before v1alpha1 */
        static char h1[] = "v1.DRAResourceHealth", h1a1[] = "v1alpha1.DRAResourceHealth";
        char *versions[] = { v1, v1beta1, h1, h1a1 };
        Pluginregistration__PluginInfo info;
        pluginregistration__plugin_info__init(&info);
        info.type = type;
        info.name = drv->name;
        info.endpoint = drv->dra_socket;
        info.n_supported_versions = ARRAY_SIZE(versions);
        info.supported_versions = versions;
        grpc_call_reply_pb(call, &info.base);
}

static void on_registration_status(struct grpc_call *call, const uint8_t *req, size_t len,
                                   void *ud)
{
        struct dra_driver *drv = ud;
        Pluginregistration__RegistrationStatus *st =
                pluginregistration__registration_status__unpack(NULL, len, req);
        if (!st) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed RegistrationStatus");
                return;
        }
        if (st->plugin_registered) {
                log_info("dra", "registered with the kubelet driver=%s endpoint=%s", drv->name,
                         drv->dra_socket);
        } else {
                log_error("dra", "the kubelet refused the driver driver=%s error=\"%s\"",
                          drv->name, st->error ? st->error : "");
        }
        drv->registered = st->plugin_registered;
        pluginregistration__registration_status__free_unpacked(st, NULL);
        Pluginregistration__RegistrationStatusResponse resp =
                PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
        grpc_call_reply_pb(call, &resp.base);
}

static const struct grpc_method reg_methods[] = {
        { "/pluginregistration.Registration/GetInfo", false, on_get_info },
        { "/pluginregistration.Registration/NotifyRegistrationStatus", false,
          on_registration_status },
};

/* ---- prepare / unprepare ---- */

static void on_job_cancel(struct grpc_call *call, void *ud)
{
        struct dra_job *j = ud;
        j->call = NULL;
}

/* A Kubernetes object name or namespace: 1..253 of [a-z0-9.-]. */
static bool k8s_name_valid(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '-' || s[i] == '.'))
                        return false;
        return true;
}

static void queue_job(struct dra_driver *drv, struct grpc_call *call, enum dra_job_kind kind,
                      Dra__V1__Claim **claims, size_t n)
{
        if (n > DRA_CLAIMS_MAX) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "more than %d claims",
                                 DRA_CLAIMS_MAX);
                return;
        }
        struct dra_job *j = xcalloc(1, sizeof(*j));
        j->kind = kind;
        j->call = call;
        j->queued_ns = uv_hrtime();
        drv->stats.in_flight++;
        j->claims = xcalloc(n ? n : 1, sizeof(*j->claims));
        for (size_t i = 0; i < n; i++) {
                const Dra__V1__Claim *c = claims[i];
                if (!k8s_name_valid(c->namespace_) || !k8s_name_valid(c->name) ||
                    !dra_uid_valid(c->uid)) {
                        grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT,
                                         "claim %zu: invalid namespace, name or UID", i);
                        dra_job_free(j);
                        return;
                }
                j->claims[j->n_claims++] = (struct dra_job_claim){
                        xstrdup(c->namespace_), xstrdup(c->uid), xstrdup(c->name)
                };
        }
        grpc_call_on_cancel(call, on_job_cancel, j);
        pthread_mutex_lock(&drv->mu);
        *drv->jobs_tail = j;
        drv->jobs_tail = &j->next;
        pthread_mutex_unlock(&drv->mu);
        dra_claims_kick(drv);
}

static void on_prepare(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        Dra__V1__NodePrepareResourcesRequest *r = (Dra__V1__NodePrepareResourcesRequest *)
                grpc_call_unpack(call, &dra__v1__node_prepare_resources_request__descriptor, req,
                                 len, &claims_limits);
        if (!r)
                return;
        queue_job(ud, call, DRA_JOB_PREPARE, r->claims, r->n_claims);
        dra__v1__node_prepare_resources_request__free_unpacked(r, NULL);
}

static void on_unprepare(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        Dra__V1__NodeUnprepareResourcesRequest *r = (Dra__V1__NodeUnprepareResourcesRequest *)
                grpc_call_unpack(call, &dra__v1__node_unprepare_resources_request__descriptor, req,
                                 len, &claims_limits);
        if (!r)
                return;
        queue_job(ud, call, DRA_JOB_UNPREPARE, r->claims, r->n_claims);
        dra__v1__node_unprepare_resources_request__free_unpacked(r, NULL);
}

static const struct grpc_method dra_methods[] = {
        { "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", false, on_prepare },
        { "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources", false,
          on_unprepare },
        { "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources", false,
          on_prepare },
        { "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources", false,
          on_unprepare },
        { "/v1.DRAResourceHealth/NodeWatchResources", true, dra_health_on_watch },
        { "/v1alpha1.DRAResourceHealth/NodeWatchResources", true, dra_health_on_watch },
};

const double dra_duration_bounds[DRA_DURATION_BUCKETS] = {
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

/* One answered job in the driver's stats. */
static void account(struct dra_driver *drv, const struct dra_job *j)
{
        struct dra_op_stats *op =
                j->kind == DRA_JOB_PREPARE ? &drv->stats.prepare : &drv->stats.unprepare;
        double s = (double)(uv_hrtime() - j->queued_ns) / 1e9;
        for (size_t i = 0; i < DRA_DURATION_BUCKETS; i++)
                if (s <= dra_duration_bounds[i])
                        op->buckets[i]++;
        op->count++;
        op->sum_s += s;
        op->claim_errors += j->claim_errors;
        if (drv->stats.in_flight)
                drv->stats.in_flight--;
        drv->stats.prepared_devices = j->prepared_devices;
}

/* The claims' work's answers, sent on the loop. */
static void on_jobs_done(struct handoff *h, struct handoff_item *done)
{
        struct dra_driver *drv = handoff_data(h);
        while (done) { /* in the order they were answered, which is the order they came */
                struct dra_job *j = (struct dra_job *)done;
                done = done->next;
                account(drv, j);
                if (j->call && !drv->closing) {
                        grpc_call_on_cancel(j->call, NULL, NULL);
                        if (j->reply)
                                grpc_call_reply(j->call, j->reply, j->reply_len);
                        else
                                grpc_call_finish(j->call, GRPC_STATUS_INTERNAL, "no answer");
                }
                dra_job_free(j);
        }
}

int dra_plugin_serve(struct dra_driver *drv, struct diag *diag)
{
        uv_loop_t *loop = drv->dra->loop;
        if (!drv->done.open) {
                int r = handoff_init(&drv->done, loop, on_jobs_done, drv);
                if (r < 0)
                        return diag_set(diag, r, "uv_async_init: %s", uv_strerror(r));
        }
        dra_health_start(drv);
        int r = grpc_server_new(loop, drv->dra_socket, dra_methods, ARRAY_SIZE(dra_methods), drv,
                                &drv->dra_srv);
        if (r < 0)
                return diag_set(diag, r, "cannot serve %s: %s", drv->dra_socket, strerror(-r));
        grpc_server_set_limits(drv->dra_srv, &(struct grpc_server_limits){ .idle_ms = DRA_IDLE_MS });
        r = grpc_server_new(loop, drv->reg_socket, reg_methods, ARRAY_SIZE(reg_methods), drv,
                            &drv->reg_srv);
        if (r < 0)
                return diag_set(diag, r, "cannot serve %s: %s", drv->reg_socket, strerror(-r));
        return 0;
}

void dra_plugin_stop(struct dra_driver *drv)
{
        grpc_server_free(TAKE_PTR(drv->reg_srv));
        grpc_server_free(TAKE_PTR(drv->dra_srv));
}
