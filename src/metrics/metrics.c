/* The metrics module's loop side: owns the store, the HTTP endpoint and
 * the collector thread, and renders devlet's own families.
 *
 * Every collect-interval the loop's timer (1) starts an asynchronous
 * pod-resources List (one at a time, 2 s timeout) whose table goes to the
 * collector's mailbox, (2) hands the collector the backends' samplers when
 * they changed (a reload) and (3) renders devlet's families from the
 * sources and publishes them.  A
 * 1 s timer beats the heart that /health checks.  An absent or failing
 * pod-resources socket is logged once (and once more when it answers
 * again); its attribution is dropped meanwhile.  Never blocks the loop:
 * sampling, /proc and OCI specs belong to the collector thread.  Names no
 * device family: what to measure and where containers name devices come
 * from the backends (devices/measure.h). */
#include "metrics/metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "grpc/grpc.h"
#include "metrics/attrib.h"
#include "metrics/collector.h"
#include "metrics/expo.h"
#include "metrics/http.h"
#include "metrics/podlabels.h"
#include "metrics/store.h"
#include "metrics/web-auth.h"
#include "metrics/web-tls.h"

#define PODRES_TIMEOUT_MS 2000
#define HEARTBEAT_MS 1000
#define HEALTH_MAX_AGE_MS 10000
#define MAX_HINTS 16

struct metrics {
        uv_loop_t *loop;
        struct metrics_sources src;
        struct metrics_store *store;
        struct metrics_http *http;
        struct collector *collector;
        struct podlabels *pod_labels; /* the pods' labels, when a feature wants them */
        struct dev_sampler **samplers; /* what the collector was last given (references) */
        size_t n_samplers;
        char *pod_resources_socket;
        uint64_t interval_ms;

        uv_timer_t *tick, *beat;
        struct attr_podres_client *podres_call;
        int podres_up; /* -1 unknown, 0 failing, 1 answering */
        int refs;      /* handles and calls still to finish, +1 until stopped */
};

/* serving: a long-lived collector, which may start a pod-label source of
 * its own; a one-shot collection looks up no pod labels. */
static struct collector *collector_for(const struct devlet_config *cfg, struct metrics_store *store,
                                       struct podlabels *pod_labels, bool serving)
{
        _cleanup_free_ char *host = config_node_name(cfg);
        const struct dev_attr_hints *hints[MAX_HINTS];
        size_t n_hints = dev_attr_hints_all(hints, MAX_HINTS);
        struct collector_opts o = {
                .interval_ms = cfg->collect_interval_ms > 0 ? (uint64_t)cfg->collect_interval_ms : 30000,
                .hostname_label = cfg->hostname_label,
                .hostname = host,
                .proc_root = "/proc",
                /* --kubernetes=false: no pod, namespace or container labels */
                .state_dirs = cfg->kubernetes ? cfg->container_state_dirs : NULL,
                .cdi_prefix = cfg->cdi_annotation_prefix,
                .hints = hints,
                .n_hints = n_hints < MAX_HINTS ? n_hints : MAX_HINTS,
                .virtual_gpus = cfg->kubernetes_virtual_gpus,
                .families = cfg->collectors,
                .pod_labels = pod_labels,
                .pod_labels_all = cfg->kubernetes_enable_pod_labels,
                /* a family's own config may ask for pod labels (AMD's
                 * ExtraPodLabels) at any collection: the collector starts a
                 * source of its own then, with --kubernetes */
                .kubeconfig = cfg->kubeconfig,
                .node = serving && cfg->kubernetes ? host : NULL,
                .kube_api_qps = cfg->kube_api_qps_value,
                .kube_api_burst = (unsigned)cfg->kube_api_burst,
        };
        return collector_new(&o, store);
}

static void samplers_drop(struct dev_sampler **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dev_sampler_unref(v[i]);
        free(v);
}

/* Hands the collector the backends' samplers when they are not the ones
 * it has (at start, after a reload). */
static void samplers_refresh(struct metrics *m)
{
        if (!m->src.samplers)
                return;
        size_t n = m->src.samplers(m->src.ud, NULL, 0);
        struct dev_sampler **v = xcalloc(n + 1, sizeof(*v));
        n = m->src.samplers(m->src.ud, v, n);
        bool same = n == m->n_samplers;
        for (size_t i = 0; same && i < n; i++)
                same = v[i] == m->samplers[i];
        if (same) {
                samplers_drop(v, n);
                return;
        }
        collector_put_samplers(m->collector, v, n);
        samplers_drop(m->samplers, m->n_samplers);
        m->samplers = v;
        m->n_samplers = n;
}

/* ---- devlet's own families ---- */

/* The DRA drivers' families: what each answered the kubelet. */
static void render_dra(struct metrics *m, struct expo *e)
{
        size_t n = m->src.dra_drivers(m->src.ud, NULL, 0);
        if (!n)
                return;
        _cleanup_free_ struct metrics_dra_driver *drv = xcalloc(n + 1, sizeof(*drv));
        n = m->src.dra_drivers(m->src.ud, drv, n);
        struct expo_family *dur = expo_family(
                e, "devlet_dra_operation_duration_seconds", EXPO_HISTOGRAM,
                "Time from a DRA request's arrival to its answer, by driver and method.");
        struct expo_family *err = expo_family(e, "devlet_dra_claim_errors_total", EXPO_COUNTER,
                                              "Claims a DRA request was answered with an error for.");
        struct expo_family *fl = expo_family(e, "devlet_dra_requests_in_flight", EXPO_GAUGE,
                                             "DRA requests received and not yet answered.");
        struct expo_family *pd = expo_family(e, "devlet_dra_prepared_devices", EXPO_GAUGE,
                                             "Devices the driver's prepared claims hold.");
        for (size_t i = 0; i < n; i++) {
                const struct metrics_dra_driver *d = &drv[i];
                if (!d->driver)
                        continue;
                const struct {
                        const char *method;
                        const struct metrics_dra_op *op;
                } ops[] = { { "NodePrepareResources", &d->prepare },
                            { "NodeUnprepareResources", &d->unprepare } };
                for (size_t k = 0; k < 2; k++) {
                        struct expo_label l[] = { { "driver", d->driver }, { "method", ops[k].method } };
                        expo_add_histogram(dur, l, 2, d->bounds, ops[k].op->buckets, d->n_bounds,
                                           ops[k].op->count, ops[k].op->sum_s);
                        expo_add_u64(err, l, 2, ops[k].op->claim_errors);
                }
                struct expo_label l[] = { { "driver", d->driver } };
                expo_add_u64(fl, l, 1, d->in_flight);
                expo_add_u64(pd, l, 1, d->prepared_devices);
        }
}

static char *render_devlet(struct metrics *m, struct collector *col, size_t *len)
{
        struct expo *e = expo_new();
        struct expo_family *info = expo_family(e, "devlet_build_info", EXPO_GAUGE,
                                               "devlet's version (always 1).");
        struct expo_label vl[] = { { "version", DEVLET_VERSION } };
        expo_add(info, vl, 1, 1);

        if (m && m->src.resources) {
                size_t n = m->src.resources(m->src.ud, NULL, 0);
                _cleanup_free_ struct metrics_resource *res = xcalloc(n + 1, sizeof(*res));
                n = m->src.resources(m->src.ud, res, n);
                struct expo_family *dev = expo_family(e, "devlet_devices", EXPO_GAUGE,
                                                      "Devices advertised per resource and health.");
                struct expo_family *reg = expo_family(e, "devlet_plugin_registered", EXPO_GAUGE,
                                                      "Whether the resource is registered with the kubelet.");
                struct expo_family *regs = expo_family(e, "devlet_registrations_total", EXPO_COUNTER,
                                                       "Successful registrations with the kubelet.");
                struct expo_family *rege = expo_family(e, "devlet_registration_errors_total", EXPO_COUNTER,
                                                       "Failed registration attempts.");
                struct expo_family *al = expo_family(e, "devlet_allocations_total", EXPO_COUNTER,
                                                     "Container allocations answered.");
                struct expo_family *ale = expo_family(e, "devlet_allocation_errors_total", EXPO_COUNTER,
                                                      "Container allocations refused.");
                struct expo_family *snap = expo_family(e, "devlet_list_and_watch_updates_total", EXPO_COUNTER,
                                                       "ListAndWatch messages sent.");
                for (size_t i = 0; i < n; i++) {
                        const struct metrics_resource *r = &res[i];
                        if (!r->name)
                                continue;
                        struct expo_label h[] = { { "resource", r->name }, { "health", "healthy" } };
                        expo_add(dev, h, 2, (double)r->healthy);
                        h[1].value = "unhealthy";
                        expo_add(dev, h, 2, (double)r->unhealthy);
                        struct expo_label rl[] = { { "resource", r->name } };
                        expo_add(reg, rl, 1, r->registered ? 1 : 0);
                        if (!r->served)
                                continue;
                        expo_add_u64(regs, rl, 1, r->registrations);
                        expo_add_u64(rege, rl, 1, r->registration_errors);
                        expo_add_u64(al, rl, 1, r->allocations);
                        expo_add_u64(ale, rl, 1, r->allocation_errors);
                        expo_add_u64(snap, rl, 1, r->snapshots);
                }
        }
        if (m && m->src.kubelet_restarts) {
                struct expo_family *f = expo_family(e, "devlet_kubelet_restarts_total", EXPO_COUNTER,
                                                    "Kubelet restarts seen.");
                expo_add_u64(f, NULL, 0, m->src.kubelet_restarts(m->src.ud));
        }
        if (m && m->src.reloads) {
                struct metrics_reloads rl = { .last_successful = true };
                m->src.reloads(m->src.ud, &rl);
                struct expo_family *f = expo_family(e, "devlet_config_reloads_total", EXPO_COUNTER,
                                                    "Config reloads by result: applied, or "
                                                    "rejected (the running configuration stays).");
                struct expo_label applied[] = { { "result", "applied" } };
                struct expo_label rejected[] = { { "result", "rejected" } };
                expo_add_u64(f, applied, 1, rl.applied);
                expo_add_u64(f, rejected, 1, rl.rejected);
                f = expo_family(e, "devlet_config_last_reload_successful", EXPO_GAUGE,
                                "Whether the last config reload was applied (1 before any).");
                expo_add(f, NULL, 0, rl.last_successful ? 1 : 0);
        }
        if (m && m->src.events) {
                size_t n = m->src.events(m->src.ud, NULL, 0);
                _cleanup_free_ struct dev_event_count *ev = xcalloc(n + 1, sizeof(*ev));
                n = m->src.events(m->src.ud, ev, n);
                for (size_t i = 0; i < n; i++) {
                        if (!ev[i].kind || !ev[i].device || !ev[i].device_label)
                                continue;
                        _cleanup_free_ char *name = xasprintf("devlet_%s_events_total", ev[i].kind);
                        struct expo_family *f = expo_family(e, name, EXPO_COUNTER,
                                                            ev[i].help ? ev[i].help : "Events per device and code.");
                        char code[24];
                        snprintf(code, sizeof(code), "%llu", ev[i].code);
                        struct expo_label l[] = { { ev[i].device_label, ev[i].device }, { ev[i].kind, code } };
                        expo_add_u64(f, l, 2, ev[i].count);
                }
        }
        if (m) {
                struct expo_family *f = expo_family(e, "devlet_pod_resources_up", EXPO_GAUGE,
                                                    "Whether the kubelet's pod-resources List answered last time.");
                if (m->podres_up >= 0)
                        expo_add(f, NULL, 0, m->podres_up);
        }
        if (col) {
                struct expo_family *d = expo_family(e, "devlet_collection_duration_seconds", EXPO_GAUGE,
                                                    "Duration of the last GPU collection.");
                struct expo_family *c = expo_family(e, "devlet_collections_total", EXPO_COUNTER,
                                                    "GPU collections done.");
                uint64_t done = collector_collections(col);
                if (done > 0)
                        expo_add(d, NULL, 0, (double)collector_last_duration_us(col) / 1e6);
                expo_add_u64(c, NULL, 0, done);
        }
        if (m && m->src.dra_drivers)
                render_dra(m, e);
        char *text = expo_render(e, len);
        expo_free(e);
        return text;
}

/* ---- the loop side ---- */

static void unref(struct metrics *m)
{
        if (--m->refs > 0)
                return;
        free(m->pod_resources_socket);
        free(m);
}

static void on_handle_closed(uv_handle_t *h)
{
        struct metrics *m = h->data;
        free(h);
        unref(m);
}

static void podres_state(struct metrics *m, int up, const char *why)
{
        if (m->podres_up == up)
                return;
        if (up)
                log_info("metrics", "pod-resources answering socket=%s", m->pod_resources_socket);
        else
                log_info("metrics", "pod-resources unavailable, no attribution from it socket=%s error=\"%s\"",
                         m->pod_resources_socket, why);
        m->podres_up = up;
}

static void on_podres(struct attr_podres *p, int status, const char *message, void *ud)
{
        struct metrics *m = ud;
        m->podres_call = NULL;
        if (!m->collector) { /* stopping */
                attr_podres_free(p);
                unref(m);
                return;
        }
        if (p) {
                podres_state(m, 1, NULL);
                collector_put_podres(m->collector, p);
        } else {
                _cleanup_free_ char *why = xasprintf("%s%s%s", grpc_status_name(status),
                                                     message && *message ? ": " : "", message ? message : "");
                podres_state(m, 0, why);
                collector_put_podres(m->collector, NULL);
        }
        unref(m);
}

static void podres_start(struct metrics *m)
{
        if (m->podres_call || !*m->pod_resources_socket)
                return;
        m->refs++;
        int r = attr_podres_list(m->loop, m->pod_resources_socket, PODRES_TIMEOUT_MS, on_podres, m,
                                 &m->podres_call);
        if (r < 0) {
                m->refs--;
                podres_state(m, 0, strerror(-r));
                collector_put_podres(m->collector, NULL);
        }
}

static void on_tick(uv_timer_t *t)
{
        struct metrics *m = t->data;
        podres_start(m);
        samplers_refresh(m);
        size_t len;
        char *text = render_devlet(m, m->collector, &len);
        metrics_store_publish(m->store, METRICS_SLOT_DEVLET, text, len);
}

/* Ready: serving metrics (this runs) and, when devlet registers with the
 * kubelet, every resource served registered, however many there are. */
static bool ready(struct metrics *m)
{
        if (m->src.registering && !m->src.registering(m->src.ud))
                return true;
        if (!m->src.resources)
                return true;
        size_t n = m->src.resources(m->src.ud, NULL, 0);
        _cleanup_free_ struct metrics_resource *res = xcalloc(n + 1, sizeof(*res));
        n = m->src.resources(m->src.ud, res, n);
        for (size_t i = 0; i < n; i++)
                if (!res[i].registered)
                        return false;
        return true;
}

static void on_beat(uv_timer_t *t)
{
        struct metrics *m = t->data;
        metrics_store_heartbeat(m->store);
        metrics_store_set_ready(m->store, ready(m));
}

static uv_timer_t *timer_new(struct metrics *m)
{
        uv_timer_t *t = xcalloc(1, sizeof(*t));
        uv_timer_init(m->loop, t);
        t->data = m;
        m->refs++;
        return t;
}

int metrics_start(uv_loop_t *loop, const struct devlet_config *cfg,
                  const struct metrics_sources *src, struct metrics **out)
{
        *out = NULL;
        if (!cfg->metrics_address || !*cfg->metrics_address)
                return 0;
        struct metrics *m = xcalloc(1, sizeof(*m));
        m->loop = loop;
        m->src = *src;
        m->refs = 1;
        m->podres_up = -1;
        m->pod_resources_socket = xstrdup(cfg->kubernetes && cfg->pod_resources_socket
                                                  ? cfg->pod_resources_socket
                                                  : "");
        m->interval_ms = cfg->collect_interval_ms > 0 ? (uint64_t)cfg->collect_interval_ms : 30000;
        m->store = metrics_store_new();
        struct diag diag = { 0 };
        int r = metrics_http_start(cfg->metrics_address, cfg->web, m->store, HEALTH_MAX_AGE_MS,
                                   &m->http, &diag);
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                log_error("metrics", "cannot serve metrics error=\"%s\"",
                          diag_format(&diag, buf, sizeof(buf)));
                metrics_store_free(m->store);
                free(m->pod_resources_socket);
                free(m);
                return r;
        }
        /* pod labels need the pods: --kubernetes and the API server */
        if (cfg->kubernetes && cfg->kubernetes_enable_pod_labels) {
                _cleanup_free_ char *node = config_node_name(cfg);
                m->pod_labels = podlabels_start(cfg->kubeconfig, node, cfg->kube_api_qps_value,
                                                (unsigned)cfg->kube_api_burst);
        }
        m->collector = collector_for(cfg, m->store, m->pod_labels, true);
        /* the samplers before the collector's first pass */
        samplers_refresh(m);
        size_t len;
        char *text = render_devlet(m, m->collector, &len);
        metrics_store_publish(m->store, METRICS_SLOT_DEVLET, text, len);
        r = collector_start(m->collector);
        if (r < 0) {
                log_error_errno(r, "metrics", "cannot start the collector thread");
                metrics_http_stop(m->http);
                collector_free(m->collector);
                podlabels_stop(m->pod_labels);
                samplers_drop(m->samplers, m->n_samplers);
                metrics_store_free(m->store);
                free(m->pod_resources_socket);
                free(m);
                return r;
        }
        m->tick = timer_new(m);
        m->beat = timer_new(m);
        uv_timer_start(m->tick, on_tick, 0, m->interval_ms);
        uv_timer_start(m->beat, on_beat, 0, HEARTBEAT_MS);
        log_info("metrics",
                 "serving metrics address=%s port=%u interval_ms=%llu devices=%s tls=%s "
                 "basic_auth=%s",
                 cfg->metrics_address, (unsigned)metrics_http_port(m->http),
                 (unsigned long long)m->interval_ms, m->n_samplers ? "yes" : "no",
                 cfg->web && cfg->web->tls ? "on" : "off",
                 cfg->web && cfg->web->n_users ? "on" : "off");
        *out = m;
        return 0;
}

int metrics_check_web(const struct devlet_config *cfg, struct diag *diag)
{
        if (!cfg->web || !cfg->metrics_address || !*cfg->metrics_address)
                return 0;
        struct web_auth *a = NULL;
        int r = web_auth_new(cfg->web, &a, diag);
        web_auth_free(a);
        if (r < 0 || !cfg->web->tls)
                return r;
        struct web_tls_server *s = NULL;
        r = web_tls_server_new(cfg->web, &s, diag);
        web_tls_server_free(s);
        return r;
}

void metrics_stop(struct metrics *m)
{
        if (!m)
                return;
        metrics_http_stop(TAKE_PTR(m->http));
        collector_free(TAKE_PTR(m->collector)); /* joins the thread; on_podres sees NULL */
        podlabels_stop(TAKE_PTR(m->pod_labels));  /* after the collector, its reader */
        samplers_drop(TAKE_PTR(m->samplers), m->n_samplers);
        m->n_samplers = 0;
        metrics_store_free(TAKE_PTR(m->store));
        if (m->podres_call)
                attr_podres_cancel(m->podres_call);
        uv_close((uv_handle_t *)TAKE_PTR(m->tick), on_handle_closed);
        uv_close((uv_handle_t *)TAKE_PTR(m->beat), on_handle_closed);
        unref(m);
}

/* ---- devlet metrics ---- */

int metrics_print_once(const struct devlet_config *cfg, struct dev_sampler *const *samplers,
                       size_t n_samplers, FILE *out)
{
        struct metrics_store *store = metrics_store_new();
        struct collector *col = collector_for(cfg, store, NULL, false);
        collector_put_samplers(col, samplers, n_samplers);
        if (cfg->kubernetes && cfg->pod_resources_socket && *cfg->pod_resources_socket &&
            access(cfg->pod_resources_socket, F_OK) == 0) {
                struct attr_podres *p = NULL;
                struct diag diag = { 0 };
                char buf[DIAG_FORMAT_MAX];
                if (attr_podres_list_sync(cfg->pod_resources_socket, PODRES_TIMEOUT_MS, &p, &diag) < 0)
                        fprintf(stderr, "devlet metrics: pod-resources List failed: %s\n",
                                diag_format(&diag, buf, sizeof(buf)));
                else
                        collector_put_podres(col, p);
        }
        collector_run_once(col);
        size_t len;
        char *text = render_devlet(NULL, col, &len);
        metrics_store_publish(store, METRICS_SLOT_DEVLET, text, len);
        _cleanup_free_ char *all = metrics_store_render(store, &len);
        collector_free(col);
        metrics_store_free(store);
        if (fwrite(all, 1, len, out) != len || fflush(out) != 0) {
                fprintf(stderr, "devlet metrics: cannot write the output\n");
                return 1;
        }
        return 0;
}
