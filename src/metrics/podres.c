/* The kubelet's pod-resources API, v1.PodResourcesLister/List, asked on the
 * loop with the asynchronous one-call gRPC client.
 *
 * The reply is unpacked into a flat table of (resource, device ID, pod,
 * namespace, container) rows that the collector thread resolves to devices;
 * DRA claims contribute their CDI device names.  The reply is bounded by
 * the gRPC client (4 MiB) and the table by MAX_ENTRIES.  Never blocks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "grpc/grpc.h"
#include "metrics/attrib.h"
#include "podresources.pb-c.h"

#define LIST_METHOD "/v1.PodResourcesLister/List"
#define MAX_ENTRIES 65536

void attr_podres_free(struct attr_podres *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++) {
                struct attr_podres_entry *e = &p->entries[i];
                free(e->resource);
                free(e->device);
                free(e->pod);
                free(e->namespace);
                free(e->container);
        }
        free(p->entries);
        free(p);
}

static void add(struct attr_podres *p, const char *resource, const char *device, const char *pod,
                const char *ns, const char *ctr)
{
        if (p->n >= MAX_ENTRIES || !device || !*device)
                return;
        xgrow((void **)&p->entries, &p->cap, p->n + 1, sizeof(*p->entries));
        p->entries[p->n++] = (struct attr_podres_entry){
                .resource = xstrdup(resource ? resource : ""),
                .device = xstrdup(device),
                .pod = xstrdup(pod ? pod : ""),
                .namespace = xstrdup(ns ? ns : ""),
                .container = xstrdup(ctr ? ctr : ""),
        };
}

int attr_podres_unpack(const uint8_t *msg, size_t len, struct attr_podres **out)
{
        V1__ListPodResourcesResponse *resp = v1__list_pod_resources_response__unpack(NULL, len, msg);
        if (!resp)
                return -EBADMSG;
        struct attr_podres *p = xcalloc(1, sizeof(*p));
        for (size_t i = 0; i < resp->n_pod_resources; i++) {
                const V1__PodResources *pod = resp->pod_resources[i];
                for (size_t j = 0; j < pod->n_containers; j++) {
                        const V1__ContainerResources *c = pod->containers[j];
                        for (size_t k = 0; k < c->n_devices; k++) {
                                const V1__ContainerDevices *d = c->devices[k];
                                for (size_t l = 0; l < d->n_device_ids; l++)
                                        add(p, d->resource_name, d->device_ids[l], pod->name,
                                            pod->namespace_, c->name);
                        }
                        for (size_t k = 0; k < c->n_dynamic_resources; k++) {
                                const V1__DynamicResource *dr = c->dynamic_resources[k];
                                for (size_t l = 0; l < dr->n_claim_resources; l++) {
                                        const V1__ClaimResource *cr = dr->claim_resources[l];
                                        for (size_t m = 0; m < cr->n_cdi_devices; m++)
                                                add(p, "", cr->cdi_devices[m]->name, pod->name,
                                                    pod->namespace_, c->name);
                                }
                        }
                }
        }
        v1__list_pod_resources_response__free_unpacked(resp, NULL);
        *out = p;
        return 0;
}

struct attr_podres_client {
        struct grpc_client_call *call;
        attr_podres_fn fn;
        void *ud;
        struct attr_podres *result;
        bool malformed;
};

static int on_msg(const uint8_t *msg, size_t len, void *ud)
{
        struct attr_podres_client *c = ud;
        attr_podres_free(TAKE_PTR(c->result));
        if (attr_podres_unpack(msg, len, &c->result) < 0) {
                c->malformed = true;
                return 1;
        }
        return 0;
}

static void on_done(int status, const char *message, void *ud)
{
        struct attr_podres_client *c = ud;
        if (c->malformed) {
                status = GRPC_STATUS_INTERNAL;
                message = "malformed ListPodResourcesResponse";
        } else if (status == GRPC_STATUS_OK && !c->result) {
                status = GRPC_STATUS_INTERNAL;
                message = "no ListPodResourcesResponse";
        }
        if (status == GRPC_STATUS_OK)
                c->fn(TAKE_PTR(c->result), status, message, c->ud);
        else
                c->fn(NULL, status, message, c->ud);
        attr_podres_free(c->result);
        free(c);
}

int attr_podres_list(uv_loop_t *loop, const char *socket_path, uint64_t timeout_ms,
                     attr_podres_fn fn, void *ud, struct attr_podres_client **out)
{
        _cleanup_free_ struct attr_podres_client *c = xcalloc(1, sizeof(*c));
        c->fn = fn;
        c->ud = ud;
        /* ListPodResourcesRequest has no fields: its encoding is empty */
        int r = grpc_client_call_start(loop, socket_path, LIST_METHOD, NULL, 0, timeout_ms, on_msg,
                                       on_done, c, &c->call);
        if (r < 0)
                return r;
        /* the call owns c now: on_done frees it */
        struct attr_podres_client *started = TAKE_PTR(c);
        if (out)
                *out = started;
        return 0;
}

void attr_podres_cancel(struct attr_podres_client *c)
{
        grpc_client_call_cancel(c->call);
}

int attr_podres_list_sync(const char *socket_path, uint64_t timeout_ms, struct attr_podres **out,
                          struct diag *diag)
{
        _cleanup_free_ uint8_t *reply = NULL;
        _cleanup_free_ char *message = NULL;
        size_t len = 0;
        int status = grpc_client_unary_sync(socket_path, LIST_METHOD, NULL, 0, timeout_ms, &reply,
                                            &len, &message);
        if (status != GRPC_STATUS_OK)
                return diag_set(diag, -EIO, "%s: %s", grpc_status_name(status),
                                message ? message : "");
        if (attr_podres_unpack(reply, len, out) < 0)
                return diag_set(diag, -EBADMSG, "malformed ListPodResourcesResponse");
        return 0;
}
