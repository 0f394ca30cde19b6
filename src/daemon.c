/* `devlet run`: owns the event loop and the modules, in start-up and
 * shutdown order.
 *
 * Start: device backends build their resources (an initial scan), then the
 * kubelet manager serves one socket per resource and registers them, then
 * the labeler writes the node labels and, with a CDI device-list strategy,
 * the CDI writer the specs; both again whenever a resource changes, and
 * both are rebuilt with the devices on a reload.
 * SIGHUP reloads the configuration; so does a change of the config file's
 * content (watched through its directory, because a ConfigMap volume swaps a
 * `..data` symlink rather than writing the file).  A config that fails to
 * load leaves the running one in place.  A kubelet restart is only a
 * re-registration (the kubelet manager's): no reload, no rescan, no
 * rewrite of labels or CDI specs, no metrics restart.
 * A backend whose devices changed under it (an AMD GPU hot-plugged, a
 * partition mode switched) asks for a rebuild (dev_request_rebuild): on a
 * fresh loop turn, every request until then coalesced into one, the
 * device set is built again from the running configuration and served as
 * a reload's would be, without counting as a reload.  SIGTERM/SIGINT
 * remove our sockets and exit 0, within SHUTDOWN_DEADLINE_MS whatever a
 * worker thread is doing: a watchdog armed at the signal ends the process
 * (after logging) if stopping the modules or finishing their closes waits
 * on a thread that does not come back (a write stuck in the thread pool, a
 * sampler stuck in a device library).
 * The loop thread owns every module's state; nothing here blocks it apart
 * from the backends' initial scans. */
#include "daemon.h"

#include <errno.h>
#include <libgen.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/ossl.h"
#include "base/pool.h"
#include "base/watchdog.h"
#include "base/xalloc.h"
#include "cdi/generate.h"
#include "cdi/cdi.h"
#include "devices/device.h"
#include "dra/dra.h"
#include "kubelet/kubelet.h"
#include "labels/labels.h"
#include "metrics/metrics.h"

struct backend_slot {
        const struct dev_backend_ops *ops;
        struct dev_backend *b;
};

/* The running backends and the resources they serve. */
struct devset {
        struct backend_slot backends[8];
        size_t n_backends;
        struct dev_resource **resources;
        size_t n_resources;
        /* the same resources split by how they are served (--dra-resources) */
        struct dev_resource **plugin_res;
        size_t n_plugin_res;
        struct dra_resource *dra_res;
        size_t n_dra_res;
};

struct daemon {
        uv_loop_t loop;
        int argc;
        char **argv;
        struct devlet_config *cfg;

        struct devset devs;
        struct kubelet_manager *kubelet;
        struct dra *dra;             /* NULL until a resource is served through DRA */
        struct dra_driver_stats *dra_stats; /* metrics' last copy (metrics_dra_drivers) */
        struct labeler *labeler;
        struct cdi_writer *cdi;      /* NULL unless a CDI device-list strategy is on */
        uv_timer_t devices_changed; /* coalesces notifies into one refresh */
        uv_timer_t rebuild;         /* a backend's rebuild request, on a fresh loop turn */
        uv_timer_t tls_trim;        /* OpenSSL's pages dropped once TLS goes quiet */
        char *rebuild_why;          /* the requests' reasons, until it runs */
        size_t rebuild_asks;
        struct metrics *metrics;
        uint64_t kubelet_restarts; /* seen since start, across reloads */
        uint64_t reloads_applied, reloads_rejected;
        bool last_reload_ok; /* true until a reload is rejected */

        uv_signal_t sig_hup, sig_term, sig_int;
        int exit_code;
        int stopping;
        struct watchdog *shutdown_deadline; /* armed once stopping */

        /* config file watch */
        uv_fs_event_t cfg_watch;
        uv_timer_t cfg_debounce;
        int cfg_watching;
        char *cfg_content; /* what the running config was loaded from */
        char *cfg_tried;   /* the file's content the watch last reloaded from, which
                            * may have been refused: tried once, not at each event */
};

#define CONFIG_MAX_BYTES (1u << 20)
#define SHUTDOWN_DEADLINE_MS 1500 /* from SIGTERM to exit, whatever a thread does */
#define CONFIG_DEBOUNCE_MS 100
#define REBUILD_WHY_MAX 512 /* the reasons logged; more are counted */
#define TLS_TRIM_MS 1000    /* the idle trim's pace (base/ossl.h) */

/* Destroys the backends; their handles finish closing on the loop. */
static void devset_stop(struct devset *set)
{
        for (size_t i = 0; i < set->n_backends; i++)
                set->backends[i].ops->destroy(set->backends[i].b);
        set->n_backends = 0;
        free(TAKE_PTR(set->resources));
        set->n_resources = 0;
        free(TAKE_PTR(set->plugin_res));
        set->n_plugin_res = 0;
        free(TAKE_PTR(set->dra_res));
        set->n_dra_res = 0;
}

/* Creates every wanted backend from cfg (each scans its devices now).  On
 * failure nothing is left running and *set is empty. */
static int devset_start(uv_loop_t *loop, const struct devlet_config *cfg, struct devset *set)
{
        *set = (struct devset){ 0 };
        for (size_t i = 0; dev_backends[i] && set->n_backends < ARRAY_SIZE(set->backends); i++) {
                const struct dev_backend_ops *ops = dev_backends[i];
                if (!dev_backend_wanted(cfg, ops->name))
                        continue;
                struct dev_backend *b = NULL;
                struct diag why = { 0 };
                int r = ops->create(loop, cfg, &b, &why);
                if (r < 0) {
                        log_error("daemon", "backend failed backend=%s error=\"%s\"", ops->name,
                                  why.message[0] ? why.message : strerror(-r));
                        devset_stop(set);
                        return r;
                }
                if (!b) {
                        log_debug("daemon", "backend not configured backend=%s", ops->name);
                        continue;
                }
                set->backends[set->n_backends].ops = ops;
                set->backends[set->n_backends++].b = b;
                size_t n;
                struct dev_resource **res = ops->resources(b, &n);
                set->resources = xrealloc(set->resources,
                                          (set->n_resources + n) * sizeof(*set->resources));
                memcpy(set->resources + set->n_resources, res, n * sizeof(*res));
                set->n_resources += n;
                for (size_t k = 0; k < n; k++) {
                        enum dra_mode mode = dra_mode_of(cfg, res[k]->name, ops->dra_driver);
                        if (mode == DRA_MODE_DEVICE_PLUGIN) {
                                set->plugin_res = xrealloc(set->plugin_res,
                                                           (set->n_plugin_res + 1) *
                                                                   sizeof(*set->plugin_res));
                                set->plugin_res[set->n_plugin_res++] = res[k];
                                continue;
                        }
                        set->dra_res = xrealloc(set->dra_res,
                                                (set->n_dra_res + 1) * sizeof(*set->dra_res));
                        set->dra_res[set->n_dra_res++] =
                                (struct dra_resource){ ops->dra_driver, res[k] };
                        log_info("daemon", "served through DRA resource=%s driver=%s mode=%s",
                                 res[k]->name, ops->dra_driver,
                                 mode == DRA_MODE_BOTH ? "both" : "dra");
                }
                log_info("daemon", "backend started backend=%s resources=%zu", ops->name, n);
        }
        if (set->n_resources == 0)
                log_warn("daemon", "nothing to serve: no backend found devices to advertise "
                                   "(configure hostDevices, or check the backends)");
        return 0;
}

/* Lets each new backend take over from the running one of its family what
 * a fresh scan cannot see (the NVIDIA backend: GPUs found unhealthy, XID
 * counts), before the new resources are served and the old ones go. */
static void devset_inherit(struct devset *next, const struct devset *prev)
{
        for (size_t i = 0; i < next->n_backends; i++) {
                const struct dev_backend_ops *ops = next->backends[i].ops;
                for (size_t k = 0; ops->inherit && k < prev->n_backends; k++)
                        if (prev->backends[k].ops == ops) {
                                ops->inherit(next->backends[i].b, prev->backends[k].b);
                                break;
                        }
        }
}

/* ---- node labels and CDI specs: extras whose failures are logged and never
 * stop the plugins ---- */

static void on_devices_changed_turn(uv_timer_t *t)
{
        struct daemon *d = t->data;
        labels_refresh(d->labeler);
        if (d->cdi)
                cdi_writer_write_async(d->cdi, &d->loop);
}

static void on_devices_changed(struct dev_resource *r, void *ud)
{
        struct daemon *d = ud;
        uv_timer_start(&d->devices_changed, on_devices_changed_turn, 0, 0);
}

/* Starts the labeler and the CDI writer on d->devs and d->cfg. */
static void outputs_start(struct daemon *d)
{
        const struct devset *set = &d->devs;
        struct labels_backend lb[ARRAY_SIZE(set->backends)];
        struct cdi_backend cb[ARRAY_SIZE(set->backends)];
        for (size_t i = 0; i < set->n_backends; i++) {
                lb[i] = (struct labels_backend){ set->backends[i].ops, set->backends[i].b };
                cb[i] = (struct cdi_backend){ set->backends[i].ops, set->backends[i].b };
        }
        if (config_serves(d->cfg, "labels"))
                labels_start(&d->loop, d->cfg, lb, set->n_backends, &d->labeler);
        if (config_serves(d->cfg, "plugin") && cdi_strategy_enabled(d->cfg)) {
                d->cdi = cdi_writer_new(d->cfg, cb, set->n_backends);
                cdi_writer_write_async(d->cdi, &d->loop);
        }
        for (size_t i = 0; i < set->n_resources; i++)
                dev_resource_watch(set->resources[i], on_devices_changed, d);
}

/* Before the backends or the config they read go away. */
static void outputs_stop(struct daemon *d)
{
        uv_timer_stop(&d->devices_changed);
        labels_stop(TAKE_PTR(d->labeler));
        cdi_writer_free(TAKE_PTR(d->cdi));
        for (size_t i = 0; i < d->devs.n_resources; i++)
                dev_resource_unwatch(d->devs.resources[i], on_devices_changed, d);
}

/* Stops every module; the loop must run afterwards to finish the closes.
 * The kubelet sockets go first: they are removed at once, and the other
 * modules may wait on a thread (metrics joins its collector), which the
 * shutdown deadline may cut short. */
static void modules_stop(struct daemon *d)
{
        kubelet_manager_free(TAKE_PTR(d->kubelet));
        dra_stop(TAKE_PTR(d->dra));
        metrics_stop(TAKE_PTR(d->metrics));
        free(TAKE_PTR(d->dra_stats));
        outputs_stop(d);
        devset_stop(&d->devs);
}

static const struct dra_cdi_ops dra_cdi = {
        .edits_from_alloc = cdi_edits_from_alloc,
        .render_json = cdi_spec_render_json,
};

/* Serves set's DRA resources, starting DRA when the first one comes; a DRA
 * that cannot start (no API server) is logged, and those resources wait
 * for the next reload. */
static void dra_serve(struct daemon *d, const struct devlet_config *cfg, const struct devset *set)
{
        if (d->dra && !dra_config_same(d->dra, cfg)) {
                log_info("dra", "restarting: the API server, node or directories changed");
                dra_stop(TAKE_PTR(d->dra));
        }
        if (!d->dra && set->n_dra_res) {
                struct diag why = { 0 };
                int r = dra_start(&d->loop, cfg, &dra_cdi, &d->dra, &why);
                if (r < 0) {
                        char buf[DIAG_FORMAT_MAX];
                        log_error("dra", "cannot start; the resources served through DRA are not "
                                         "offered error=\"%s\"",
                                  diag_format(&why, buf, sizeof(buf)));
                        return;
                }
        }
        if (d->dra)
                dra_update(d->dra, cfg, set->dra_res, set->n_dra_res);
}

/* On the watchdog's thread: the loop thread is still waiting on a thread
 * (or a module) that does not return.  Exit without it; nothing that runs
 * at exit (libuv's pool joins its threads there) may wait on it either. */
static void on_shutdown_deadline(void *ud)
{
        (void)ud;
        log_error("daemon", "shutdown did not finish within %u ms, exiting without waiting "
                            "for a stuck worker",
                  SHUTDOWN_DEADLINE_MS);
        _exit(0);
}

static void shutdown_deadline_arm(struct daemon *d)
{
        if (d->shutdown_deadline)
                return;
        int r = watchdog_arm(SHUTDOWN_DEADLINE_MS, on_shutdown_deadline, d, &d->shutdown_deadline);
        if (r < 0)
                log_warn_errno(r, "daemon", "no shutdown deadline");
}

static void on_kubelet_restart(void *ud);

/* ---- what the metrics module reads, on the loop ---- */

static size_t metrics_resources(void *ud, struct metrics_resource *out, size_t max)
{
        struct daemon *d = ud;
        size_t n = 0;
        struct plugin_server *p;
        while (d->kubelet && (p = kubelet_manager_server(d->kubelet, n))) {
                if (n < max) {
                        const struct dev_resource *r = plugin_server_resource(p);
                        const struct plugin_stats *st = plugin_server_stats(p);
                        size_t healthy = r ? dev_resource_healthy(r) : 0;
                        out[n] = (struct metrics_resource){
                                .name = r ? r->name : NULL,
                                .healthy = healthy,
                                .unhealthy = r ? r->n_devices - healthy : 0,
                                .registered = plugin_server_registered(p),
                        };
                        if (st) {
                                out[n].served = true;
                                out[n].registrations = st->registrations;
                                out[n].registration_errors = st->registration_errors;
                                out[n].allocations = st->allocations;
                                out[n].allocation_errors = st->allocation_errors;
                                out[n].snapshots = st->snapshots;
                        }
                }
                n++;
        }
        return n;
}

static bool metrics_registering(void *ud)
{
        struct daemon *d = ud;
        return config_serves(d->cfg, "plugin") && !d->cfg->kubelet_disabled;
}

static uint64_t metrics_kubelet_restarts(void *ud)
{
        struct daemon *d = ud;
        return d->kubelet_restarts;
}

static void metrics_reloads(void *ud, struct metrics_reloads *out)
{
        struct daemon *d = ud;
        *out = (struct metrics_reloads){ .applied = d->reloads_applied,
                                         .rejected = d->reloads_rejected,
                                         .last_successful = d->last_reload_ok };
}

/* DRA's stats as metrics' plain values; the buckets point into a copy
 * that lives until the next call. */
static size_t metrics_dra_drivers(void *ud, struct metrics_dra_driver *out, size_t max)
{
        struct daemon *d = ud;
        size_t n = dra_stats(d->dra, NULL, 0);
        if (!max || !n)
                return n;
        free(d->dra_stats);
        struct dra_driver_stats *held = d->dra_stats = xcalloc(n, sizeof(*held));
        n = dra_stats(d->dra, held, n);
        for (size_t i = 0; i < n && i < max; i++) {
                const struct dra_driver_stats *s = &held[i];
                out[i] = (struct metrics_dra_driver){
                        .driver = s->driver,
                        .bounds = dra_duration_bounds,
                        .n_bounds = DRA_DURATION_BUCKETS,
                        .prepare = { s->prepare.buckets, s->prepare.count, s->prepare.sum_s,
                                     s->prepare.claim_errors },
                        .unprepare = { s->unprepare.buckets, s->unprepare.count,
                                       s->unprepare.sum_s, s->unprepare.claim_errors },
                        .in_flight = s->in_flight,
                        .prepared_devices = s->prepared_devices,
                };
        }
        return n;
}

static size_t metrics_events(void *ud, struct dev_event_count *out, size_t max)
{
        struct daemon *d = ud;
        size_t n = 0;
        for (size_t i = 0; i < d->devs.n_backends; i++) {
                const struct backend_slot *s = &d->devs.backends[i];
                if (s->ops->events)
                        n += s->ops->events(s->b, out ? out + (n < max ? n : max) : NULL,
                                            n < max ? max - n : 0);
        }
        return n;
}

static size_t metrics_samplers(void *ud, struct dev_sampler **out, size_t max)
{
        struct daemon *d = ud;
        size_t n = 0;
        for (size_t i = 0; i < d->devs.n_backends; i++) {
                const struct backend_slot *s = &d->devs.backends[i];
                struct dev_sampler *smp = s->ops->sampler ? s->ops->sampler(s->b) : NULL;
                if (!smp)
                        continue;
                if (n < max)
                        out[n] = smp;
                else
                        dev_sampler_unref(smp);
                n++;
        }
        return n;
}

/* Metrics hold references to the backends' samplers, which outlive a
 * backend, so a reload only restarts them, to apply the new configuration. */
static void metrics_restart(struct daemon *d)
{
        metrics_stop(TAKE_PTR(d->metrics));
        if (!config_serves(d->cfg, "metrics"))
                return;
        const struct metrics_sources src = {
                .ud = d,
                .resources = metrics_resources,
                .registering = metrics_registering,
                .kubelet_restarts = metrics_kubelet_restarts,
                .reloads = metrics_reloads,
                .events = metrics_events,
                .samplers = metrics_samplers,
                .dra_drivers = metrics_dra_drivers,
        };
        /* failing to serve metrics (logged) leaves the plugins running */
        metrics_start(&d->loop, d->cfg, &src, &d->metrics);
}

/* "" when --kubelet-socket "" was given: the sockets serve, nothing registers */
static const char *daemon_kubelet_socket(const struct devlet_config *cfg)
{
        return cfg->kubelet_disabled ? "" : cfg->kubelet_socket;
}

/* The device plugin's servers for set, unless --serve leaves the plugin
 * out (a vendor's labeller or exporter command name): 0 then, and
 * d->kubelet stays NULL. */
static int kubelet_start(struct daemon *d, const struct devlet_config *cfg,
                         const struct devset *set)
{
        if (!config_serves(cfg, "plugin"))
                return 0;
        return kubelet_manager_new(&d->loop, cfg->plugin_directory, daemon_kubelet_socket(cfg),
                                   set->plugin_res, set->n_plugin_res, on_kubelet_restart, d,
                                   &d->kubelet);
}

static int modules_start(struct daemon *d)
{
        int r = devset_start(&d->loop, d->cfg, &d->devs);
        if (r < 0)
                return r;
        r = kubelet_start(d, d->cfg, &d->devs);
        if (r < 0) {
                modules_stop(d);
                return r;
        }
        if (config_serves(d->cfg, "plugin"))
                dra_serve(d, d->cfg, &d->devs);
        outputs_start(d);
        metrics_restart(d);
        return 0;
}

static void log_warnings(const struct devlet_config *cfg)
{
        for (size_t i = 0; cfg->warnings && cfg->warnings[i]; i++)
                log_warn("config", "%s", cfg->warnings[i]);
}

static char *config_content(const struct devlet_config *cfg)
{
        char *data = NULL;
        if (!cfg->config_file || !*cfg->config_file ||
            fs_read_file(cfg->config_file, CONFIG_MAX_BYTES, &data, NULL) < 0)
                return NULL;
        return data;
}

static void config_watch_start(struct daemon *d);

/* The log settings a reload applies at once. */
static void daemon_log_settings(const struct devlet_config *cfg)
{
        enum log_format f = LOG_FORMAT_TEXT;
        (void)log_format_from_name(cfg->log_format, &f); /* one of the row's choices */
        log_set_format(f);
        log_set_verbosity((int)cfg->verbosity);
}

/* For devlet_config_reloads_total and devlet_config_last_reload_successful:
 * rejected when the running configuration stays (the new one does not
 * load, or its backends do not start). */
static void reload_outcome(struct daemon *d, bool applied)
{
        if (applied)
                d->reloads_applied++;
        else
                d->reloads_rejected++;
        d->last_reload_ok = applied;
}

/* Keeps the running value of every changed option a reload cannot apply
 * (CONFIG_APPLY_RESTART), with one warning each; returns the flags the
 * other changes need. */
static unsigned keep_restart_options(struct devlet_config *next, const struct devlet_config *prev,
                                     const struct config_change *changes, size_t n)
{
        unsigned need = 0;
        for (size_t i = 0; i < n; i++) {
                if (!(changes[i].apply & CONFIG_APPLY_RESTART) || !changes[i].option) {
                        need |= changes[i].apply;
                        continue;
                }
                log_warn("config", "a reload cannot apply this option, keeping the running "
                                   "value until devlet restarts option=%s",
                         changes[i].name);
                config_option_copy(next, prev, changes[i].option);
        }
        return need;
}

/* "a,b,c" from the changes' names; "none" */
static char *changes_text(const struct config_change *changes, size_t n)
{
        char *s = xstrdup(n ? "" : "none");
        for (size_t i = 0; i < n; i++) {
                char *t = xasprintf("%s%s%s", s, i ? "," : "", changes[i].name);
                free(s);
                s = t;
        }
        return s;
}

/* Serves devs (just started, from cfg) in place of d->devs, whose backends
 * go: each new backend inherits from its predecessor, the plugin servers
 * are updated (those of resources that stay keep their sockets and
 * streams; new_sockets: all made again), DRA gets the new table, and the
 * labeler and CDI writer, which read the old backends, are stopped (the
 * caller starts them again once its config is in place).  Returns what
 * serving the plugin resources returned. */
static int devset_replace(struct daemon *d, const struct devlet_config *cfg, struct devset *devs,
                          bool new_sockets)
{
        devset_inherit(devs, &d->devs);
        int r;
        if (d->kubelet && !new_sockets) {
                r = kubelet_manager_update(d->kubelet, devs->plugin_res, devs->n_plugin_res);
        } else {
                kubelet_manager_free(TAKE_PTR(d->kubelet));
                r = kubelet_start(d, cfg, devs);
        }
        if (config_serves(cfg, "plugin"))
                dra_serve(d, cfg, devs);
        outputs_stop(d);
        devset_stop(&d->devs);
        d->devs = *devs;
        return r;
}

/* The rebuild a backend asked for: every backend again from a fresh scan
 * under the running config, served as a reload would serve them (the
 * health and counters of devices that stay carried over).  Not a reload:
 * the config is not read, nothing restarts, the reload counters stay. */
static void on_rebuild_turn(uv_timer_t *t)
{
        struct daemon *d = t->data;
        _cleanup_free_ char *why = TAKE_PTR(d->rebuild_why);
        size_t asks = d->rebuild_asks;
        d->rebuild_asks = 0;
        if (d->stopping || !why)
                return;
        log_info("daemon", "devices changed: %s%s", why,
                 asks > 1 ? " (requests coalesced)" : "");
        struct devset devs;
        if (devset_start(&d->loop, d->cfg, &devs) < 0) {
                log_error("daemon", "rebuilding the devices failed; still serving the previous "
                                    "devices until the next change or reload");
                return;
        }
        int r = devset_replace(d, d->cfg, &devs, false);
        if (r < 0)
                log_error("daemon", "could not serve every resource after the rebuild "
                                    "error=\"%s\"",
                          strerror(-r));
        outputs_start(d);
        log_info("daemon", "devices rebuilt resources=%zu", d->devs.n_resources);
}

/* dev_rebuild_fn: called by a backend, from inside its own callback, so the
 * rebuild (which destroys it) waits for a fresh loop turn. */
static void on_rebuild_request(const char *backend, const char *reason, void *ud)
{
        struct daemon *d = ud;
        if (d->stopping)
                return;
        d->rebuild_asks++;
        if (!d->rebuild_why) {
                d->rebuild_why = xstrdup(reason);
        } else if (strlen(d->rebuild_why) + strlen(reason) + 2 <= REBUILD_WHY_MAX) {
                char *more = xasprintf("%s; %s", d->rebuild_why, reason);
                free(d->rebuild_why);
                d->rebuild_why = more;
        }
        log_debug("daemon", "rebuild requested backend=%s reason=\"%s\"", backend, reason);
        uv_timer_start(&d->rebuild, on_rebuild_turn, 0, 0);
}

/* Re-reads the config and re-enumerates devices from a fresh scan, then
 * re-registers (SIGHUP, or the config file changed).  The new backends are
 * built before the old ones go (and take over what the old ones knew that a
 * scan cannot see), so a backend that fails to start leaves everything
 * running as it was; plugin servers of resources that stay keep their
 * sockets and open streams (they get a fresh snapshot).  A config that
 * fails to load keeps the running one.  What else a reload does comes
 * from the option tables (config_diff): new sockets when a SOCKETS row
 * changed, a metrics restart when a METRICS row did, the running value of
 * a RESTART row kept. */
static void reload(struct daemon *d)
{
        struct devlet_config *cfg = NULL;
        struct diag diag = { 0 };
        int r = config_load(dev_config_families(), d->argc, d->argv, &cfg, &diag, NULL);
        if (r < 0) {
                char buf[1024];
                log_error("config", "reload failed, keeping the running configuration error=\"%s\"",
                          diag_format(&diag, buf, sizeof(buf)));
                reload_outcome(d, false);
                return;
        }
        r = metrics_check_web(cfg, &diag);
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                log_error("config", "reload failed, keeping the running configuration error=\"%s\"",
                          diag_format(&diag, buf, sizeof(buf)));
                config_free(cfg);
                reload_outcome(d, false);
                return;
        }
        log_warnings(cfg);
        log_info("daemon", "reloading configuration");
        _cleanup_free_ struct config_change *changes = NULL;
        size_t n_changes = 0;
        unsigned changed_apply = config_diff(d->cfg, cfg, &changes, &n_changes);
        unsigned need = keep_restart_options(cfg, d->cfg, changes, n_changes);
        _cleanup_free_ char *effective = config_to_json(cfg);
        log_info("config", "running with config=%s", effective);

        struct devset devs;
        if (devset_start(&d->loop, cfg, &devs) < 0) {
                log_error("daemon", "reload could not start the backends; still serving the "
                                    "previous devices");
                config_free(cfg);
                reload_outcome(d, false);
                return;
        }
        r = devset_replace(d, cfg, &devs, need & CONFIG_APPLY_SOCKETS);
        if (r < 0)
                log_error("daemon", "could not serve every resource after the reload; waiting for "
                                    "the next SIGHUP or config change error=\"%s\"", strerror(-r));
        /* the fresh scan saw whatever a pending rebuild was for */
        uv_timer_stop(&d->rebuild);
        free(TAKE_PTR(d->rebuild_why));
        d->rebuild_asks = 0;

        bool metrics_kept = d->metrics && !(need & CONFIG_APPLY_METRICS);
        config_free(d->cfg);
        d->cfg = cfg;
        free(d->cfg_content);
        d->cfg_content = config_content(cfg);
        config_watch_start(d);
        daemon_log_settings(cfg);
        reload_outcome(d, true);
        outputs_start(d);
        if (!metrics_kept)
                metrics_restart(d);
        char needs[128];
        _cleanup_free_ char *changed = changes_text(changes, n_changes);
        log_info("daemon", "reloaded resources=%zu metrics=%s changed=%s needs=%s",
                 d->devs.n_resources, metrics_kept ? "kept" : d->metrics ? "restarted" : "off",
                 changed, config_apply_text(changed_apply, needs, sizeof(needs)));
}

/* A kubelet restart is only a re-registration, which the manager does: the
 * config, the devices, labels, CDI specs and metrics stay as they are. */
static void on_kubelet_restart(void *ud)
{
        struct daemon *d = ud;
        d->kubelet_restarts++;
}

static void on_config_debounce(uv_timer_t *t)
{
        struct daemon *d = t->data;
        _cleanup_free_ char *now = config_content(d->cfg);
        if (!now)
                return; /* unreadable mid-swap: the swap's last event comes */
        if ((d->cfg_content && strcmp(now, d->cfg_content) == 0) ||
            (d->cfg_tried && strcmp(now, d->cfg_tried) == 0)) {
                log_debug("daemon", "config file event, content loaded or refused already file=%s",
                          d->cfg->config_file);
                return;
        }
        log_info("daemon", "config file changed file=%s", d->cfg->config_file);
        free(d->cfg_tried);
        d->cfg_tried = TAKE_PTR(now);
        reload(d);
}

static void on_config_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
        struct daemon *d = h->data;
        /* Only the file's own name and Kubernetes' ConfigMap swap
         * (`..data` renamed over) concern it: other files in the directory
         * (devlet's own log, say) would otherwise keep re-reading it. */
        if (filename) {
                _cleanup_free_ char *copy = xstrdup(d->cfg->config_file);
                if (strcmp(filename, basename(copy)) != 0 && strncmp(filename, "..", 2) != 0)
                        return;
        }
        uv_timer_start(&d->cfg_debounce, on_config_debounce, CONFIG_DEBOUNCE_MS, 0);
}

/* Watches the directory holding the config file (again after a reload, whose
 * file may have moved). */
static void config_watch_start(struct daemon *d)
{
        if (d->cfg_watching) {
                uv_fs_event_stop(&d->cfg_watch);
                d->cfg_watching = 0;
        }
        if (!d->cfg->config_file || !*d->cfg->config_file)
                return;
        _cleanup_free_ char *copy = xstrdup(d->cfg->config_file);
        const char *dir = dirname(copy);
        int r = uv_fs_event_start(&d->cfg_watch, on_config_event, dir, 0);
        if (r < 0) {
                log_warn("daemon", "cannot watch the config file, reload with SIGHUP dir=%s error=\"%s\"",
                         dir, uv_strerror(r));
                return;
        }
        d->cfg_watching = 1;
}

static void on_signal(uv_signal_t *h, int signum)
{
        struct daemon *d = h->data;
        if (d->stopping)
                return; /* a signal while shutting down changes nothing */
        if (signum == SIGHUP) {
                log_info("daemon", "SIGHUP received");
                reload(d);
                return;
        }
        d->stopping = 1;
        log_info("daemon", "shutting down signal=%s", strsignal(signum));
        shutdown_deadline_arm(d);
        modules_stop(d);
        uv_timer_stop(&d->cfg_debounce);
        uv_timer_stop(&d->rebuild);
        if (d->cfg_watching)
                uv_fs_event_stop(&d->cfg_watch);
        uv_stop(&d->loop);
}

/* The daemon's own handles (the modules close theirs when stopped). */
static void close_own(struct daemon *d)
{
        uv_handle_t *own[] = {
                (uv_handle_t *)&d->sig_hup,       (uv_handle_t *)&d->sig_term,
                (uv_handle_t *)&d->sig_int,       (uv_handle_t *)&d->cfg_watch,
                (uv_handle_t *)&d->cfg_debounce,  (uv_handle_t *)&d->devices_changed,
                (uv_handle_t *)&d->rebuild,       (uv_handle_t *)&d->tls_trim,
        };
        for (size_t i = 0; i < ARRAY_SIZE(own); i++)
                if (!uv_is_closing(own[i]))
                        uv_close(own[i], NULL);
}

/* The API client's watches and calls, the metrics endpoint's TLS
 * connections and the claims' reads all run OpenSSL's record layer, which
 * faults in some 2 MB of its libraries' pages (fault-around maps 64 KiB
 * around each): once TLS has been quiet for a pace they go back to the page
 * cache, so an idle devlet holds only what it uses between two events. */
static void on_tls_trim(uv_timer_t *t)
{
        (void)t;
        ossl_trim_idle();
}

static void close_any(uv_handle_t *h, void *arg)
{
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

/* A process that is not root (an image's or a manifest's user) cannot
 * create the kubelet's sockets or write the labels file, which are owned
 * by root: one line saying what it needs, for each part served, rather
 * than a failure later that does not say why. */
static void check_privileges(const struct devlet_config *cfg)
{
        if (geteuid() == 0)
                return;
        const char *label_file = cfg->labels_output_file && cfg->labels_output_file[0] &&
                                                 strcmp(cfg->labels_output_file, "-") != 0
                                         ? cfg->labels_output_file
                                         : LABELS_DEFAULT_OUTPUT_FILE;
        _cleanup_free_ char *label_dir = xstrdup(label_file);
        char *slash = strrchr(label_dir, '/');
        if (slash)
                *slash = '\0';
        const struct {
                const char *part, *dir, *what;
        } needs[] = {
                { "plugin", cfg->plugin_directory, "the device plugin's sockets" },
                { "labels", label_dir, "the labels file" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(needs); i++)
                if (config_serves(cfg, needs[i].part) && access(needs[i].dir, W_OK) != 0 &&
                    (errno == EACCES || errno == EPERM))
                        log_error("daemon", "running as uid %u, which cannot write %s in %s: "
                                            "run the container as root (securityContext.runAsUser: "
                                            "0) error=\"%s\"",
                                  (unsigned)geteuid(), needs[i].what, needs[i].dir,
                                  strerror(errno));
}

int daemon_run(struct devlet_config *cfg, int argc, char **argv)
{
        struct daemon d = { .argc = argc, .argv = argv, .cfg = cfg, .last_reload_ok = true };
        int r = uv_loop_init(&d.loop);
        if (r < 0) {
                log_error("daemon", "cannot create the event loop error=\"%s\"", uv_strerror(r));
                config_free(cfg);
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        /* One malloc arena: devlet's threads (health, metrics, DRA)
         * allocate little and seldom, and glibc's default of an arena per
         * thread costs each one its own touched pages (1 MiB over DRA's
         * nine threads, measured). */
        mallopt(M_ARENA_MAX, 1);
        uv_signal_t *sigs[] = { &d.sig_hup, &d.sig_term, &d.sig_int };
        int signums[] = { SIGHUP, SIGTERM, SIGINT };
        /* The thread pool (the labels writes) outlives our signal handlers:
         * its threads must never be the ones a late SIGTERM is delivered to. */
        pool_start_blocking(&d.loop, signums, ARRAY_SIZE(signums));
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
                uv_signal_init(&d.loop, sigs[i]);
                sigs[i]->data = &d;
                uv_signal_start(sigs[i], on_signal, signums[i]);
        }

        uv_fs_event_init(&d.loop, &d.cfg_watch);
        d.cfg_watch.data = &d;
        uv_timer_init(&d.loop, &d.cfg_debounce);
        d.cfg_debounce.data = &d;
        uv_timer_init(&d.loop, &d.devices_changed);
        d.devices_changed.data = &d;
        uv_timer_init(&d.loop, &d.rebuild);
        d.rebuild.data = &d;
        uv_timer_init(&d.loop, &d.tls_trim);
        uv_timer_start(&d.tls_trim, on_tls_trim, TLS_TRIM_MS, TLS_TRIM_MS);
        uv_unref((uv_handle_t *)&d.tls_trim);
        dev_rebuild_handler(on_rebuild_request, &d);
        d.cfg_content = config_content(cfg);
        config_watch_start(&d);

        log_info("daemon", "starting version=%s plugin_dir=%s kubelet_socket=%s", DEVLET_VERSION,
                 cfg->plugin_directory, cfg->kubelet_socket);
        _cleanup_free_ char *effective = config_to_json(cfg);
        log_info("config", "running with config=%s", effective);
        log_warnings(cfg);
        check_privileges(cfg);
        struct diag diag = { 0 };
        if (metrics_check_web(cfg, &diag) < 0) {
                /* a config error, as a broken config file is (cmd.h's EXIT_USAGE) */
                char buf[DIAG_FORMAT_MAX];
                log_error("metrics", "cannot serve metrics with the web configuration error=\"%s\"",
                          diag_format(&diag, buf, sizeof(buf)));
                d.exit_code = 2;
        } else if (modules_start(&d) < 0)
                d.exit_code = 1;
        else
                uv_run(&d.loop, UV_RUN_DEFAULT);

        /* Finish every close the modules started, then tear the loop down.
         * Closing a uv_signal_t restores the default action, so block those
         * signals first: one arriving now stays pending and dies with us.
         * With our own handles closed, the loop runs until the modules are
         * done, which includes a backend's health thread leaving its wait
         * (a backend may release its library only then); anything a module
         * left open but idle is closed last. */
        sigset_t block;
        sigemptyset(&block);
        for (size_t i = 0; i < ARRAY_SIZE(signums); i++)
                sigaddset(&block, signums[i]);
        sigprocmask(SIG_BLOCK, &block, NULL);
        shutdown_deadline_arm(&d);
        dev_rebuild_handler(NULL, NULL);
        modules_stop(&d);
        close_own(&d);
        uv_run(&d.loop, UV_RUN_DEFAULT);
        uv_walk(&d.loop, close_any, NULL);
        uv_run(&d.loop, UV_RUN_DEFAULT);
        r = uv_loop_close(&d.loop);
        if (r < 0)
                log_warn("daemon", "event loop not empty at exit error=\"%s\"", uv_strerror(r));
        config_free(d.cfg);
        free(d.cfg_content);
        free(d.cfg_tried);
        free(d.rebuild_why);
        watchdog_disarm(TAKE_PTR(d.shutdown_deadline));
        log_info("daemon", "stopped");
        return d.exit_code;
}
