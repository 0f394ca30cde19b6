/* One driver's DRA resource health service (KEP-4680): the kubelet holds a
 * NodeWatchResources stream on the driver's DRA socket (v1 from Kubernetes
 * 1.37, chosen from what GetInfo advertises; v1alpha1 before, when the
 * ResourceHealthStatus gate is on) and shows what devlet tells it in the
 * status of every pod holding a device (allocatedResourcesStatus).
 *
 * Each message is the driver's full list (the kubelet counts a device
 * missing from it as Unknown): every device of the table, HEALTHY or
 * UNHEALTHY, the unhealthy ones with their taint as the message.  It is
 * sent when a stream opens, whenever the table changes (a health change is
 * a new table) and every DRA_HEALTH_RESEND_MS, the time stamp being when
 * devlet last looked (its monitors watch without pause), with a timeout of
 * three resends, so a devlet that stops answering turns its devices
 * Unknown.  A slow kubelet holds only the latest list (send_latest).  On the
 * loop only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/list.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "dra/internal.h"
#include "drahealth.pb-c.h"
#include "grpc/grpc.h"

struct dra_health_stream {
        DLIST_FIELDS(struct dra_health_stream);
        struct dra_driver *drv;
        struct grpc_call *call;
};

/* The driver's devices as one packed NodeWatchResourcesResponse. */
static struct grpc_msg *snapshot(const struct dra_driver *drv)
{
        const struct dra_table *t = drv->table;
        size_t n = t ? t->n : 0;
        _cleanup_free_ Dra__Health__DeviceHealth *devs = xcalloc(n + 1, sizeof(*devs));
        _cleanup_free_ Dra__Health__DeviceIdentifier *ids = xcalloc(n + 1, sizeof(*ids));
        _cleanup_free_ Dra__Health__DeviceHealth **ptrs = xcalloc(n + 1, sizeof(*ptrs));
        _cleanup_free_ char *msgs = xcalloc(n + 1, 160);
        int64_t now = (int64_t)time(NULL);
        for (size_t i = 0; i < n; i++) {
                const struct dra_dev *d = &t->devs[i];
                dra__health__device_identifier__init(&ids[i]);
                ids[i].pool_name = drv->dra->node;
                ids[i].device_name = d->name;
                dra__health__device_health__init(&devs[i]);
                devs[i].device = &ids[i];
                devs[i].health = d->healthy ? DRA__HEALTH__HEALTH_STATUS__HEALTHY
                                            : DRA__HEALTH__HEALTH_STATUS__UNHEALTHY;
                devs[i].last_updated_time = now;
                devs[i].health_check_timeout_seconds = 3 * DRA_HEALTH_RESEND_MS / 1000;
                if (!d->healthy) {
                        char *m = msgs + i * 160;
                        if (d->taint.key[0])
                                snprintf(m, 160, "%s%s%s", d->taint.key, d->taint.value[0] ? "=" : "",
                                         d->taint.value);
                        else /* the slice's taint */
                                snprintf(m, 160, "%s/unhealthy", drv->name);
                        devs[i].message = m;
                }
                ptrs[i] = &devs[i];
        }
        Dra__Health__NodeWatchResourcesResponse resp;
        dra__health__node_watch_resources_response__init(&resp);
        resp.n_devices = n;
        resp.devices = ptrs;
        size_t len = dra__health__node_watch_resources_response__get_packed_size(&resp);
        _cleanup_free_ uint8_t *buf = xmalloc(len + 1);
        dra__health__node_watch_resources_response__pack(&resp, buf);
        return grpc_msg_new(buf, len);
}

static void on_cancel(struct grpc_call *call, void *ud)
{
        (void)call;
        struct dra_health_stream *s = ud;
        DLIST_REMOVE(s->drv->health_streams, s);
        free(s);
}

void dra_health_on_watch(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        (void)req;
        (void)len; /* an empty request: nothing to read */
        struct dra_driver *drv = ud;
        struct grpc_msg *m = snapshot(drv);
        int r = m ? grpc_call_send_latest(call, m) : -EMSGSIZE;
        grpc_msg_unref(m);
        if (r < 0) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "the device list is too large");
                return;
        }
        struct dra_health_stream *s = xcalloc(1, sizeof(*s));
        s->drv = drv;
        s->call = call;
        DLIST_PREPEND(drv->health_streams, s);
        grpc_call_on_cancel(call, on_cancel, s);
        log_info("dra", "health watched driver=%s", drv->name);
}

void dra_health_notify(struct dra_driver *drv)
{
        if (!drv->health_streams)
                return;
        struct grpc_msg *m = snapshot(drv);
        for (struct dra_health_stream *s = drv->health_streams; m && s; s = s->next)
                grpc_call_send_latest(s->call, m);
        grpc_msg_unref(m);
}

static void on_resend(uv_timer_t *t)
{
        dra_health_notify(t->data);
}

void dra_health_start(struct dra_driver *drv)
{
        if (drv->health_timer_open)
                return;
        uv_timer_init(drv->dra->loop, &drv->health_timer);
        drv->health_timer.data = drv;
        uv_timer_start(&drv->health_timer, on_resend, DRA_HEALTH_RESEND_MS, DRA_HEALTH_RESEND_MS);
        uv_unref((uv_handle_t *)&drv->health_timer);
        drv->health_timer_open = true;
}

void dra_health_stop(struct dra_driver *drv, uv_close_cb closed)
{
        /* the streams went with the server (their on_cancel ran) */
        if (!drv->health_timer_open) {
                drv->health_timer.data = drv;
                closed((uv_handle_t *)&drv->health_timer);
                return;
        }
        drv->health_timer_open = false;
        uv_close((uv_handle_t *)&drv->health_timer, closed);
}
