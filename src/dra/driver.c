/* DRA's lifecycle on the loop: the API client, one struct dra_driver per
 * driver that has devices to offer (its sockets, its threads), the device
 * tables rebuilt whenever a resource notifies a change, and the way out
 * (threads stopped and joined, slices deleted when asked).
 *
 * Owns every dra_driver; the threads share a driver's mutex-guarded part
 * (internal.h).  Never blocks the loop, except when a driver stops (a
 * reload that leaves it no resource, or shutdown): its threads are joined
 * (each leaves its API call within 100 ms: the client checks drv->stop)
 * and, when asked, its slices deleted with one call bounded to a second. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "dra/internal.h"

#define CLEANUP_MS 1000 /* within the daemon's shutdown deadline */

static int api_new(const struct devlet_config *cfg, struct kapi_client **out, struct diag *diag)
{
        struct kapi_config *kc = NULL;
        int r = kapi_config_load(cfg->kubeconfig, NULL, &kc, diag);
        if (r < 0)
                return diag_prefix(diag, r, "API server");
        r = kapi_client_new(kc, out, diag);
        if (r < 0)
                return r;
        kapi_client_set_user_agent(*out, "dra");
        kapi_client_set_rate(*out, cfg->kube_api_qps_value, (unsigned)cfg->kube_api_burst);
        return 0;
}

int dra_start(uv_loop_t *loop, const struct devlet_config *cfg, const struct dra_cdi_ops *cdi,
              struct dra **out, struct diag *diag)
{
        struct kapi_client *api = NULL;
        int r = api_new(cfg, &api, diag);
        if (r < 0)
                return r;
        struct dra *d = xcalloc(1, sizeof(*d));
        d->loop = loop;
        d->cdi_spec_dir = xstrdup(cfg->cdi_spec_dir);
        d->plugins_dir = xstrdup(cfg->kubelet_plugins_dir);
        d->registry_dir = xstrdup(cfg->kubelet_registry_dir);
        d->kubeconfig = xstrdup(cfg->kubeconfig);
        d->node_cfg = xstrdup(cfg->node_name);
        d->cleanup = cfg->dra_cleanup;
        d->cdi = *cdi;
        d->api = api;
        d->node = config_node_name(cfg);
        log_info("dra", "started server=%s node=%s", kapi_client_server(api), d->node);
        *out = d;
        return 0;
}

/* The loop side of a device change: a new table for the threads. */
static void refresh_table(struct dra_driver *drv)
{
        struct dra_table *t = dra_table_build(drv->name, drv->res, drv->n_res);
        pthread_mutex_lock(&drv->mu);
        struct dra_table *old = drv->table;
        drv->table = t;
        pthread_mutex_unlock(&drv->mu);
        dra_table_unref(old);
        dra_pub_changed(drv);
        dra_health_notify(drv);
}

static void on_resource_change(struct dev_resource *r, void *ud)
{
        refresh_table(ud);
}

static void unwatch_all(struct dra_driver *drv)
{
        for (size_t i = 0; i < drv->n_res; i++)
                dev_resource_unwatch(drv->res[i], on_resource_change, drv);
        free(TAKE_PTR(drv->res));
        drv->n_res = 0;
}

static void on_done_closed(struct handoff *h);

/* The health timer closed: the handoff next, whose close frees drv. */
static void on_health_closed(uv_handle_t *t)
{
        struct dra_driver *drv = t->data;
        drv->done.async.data = drv;
        handoff_close(&drv->done, on_done_closed);
}

static void on_done_closed(struct handoff *h)
{
        struct dra_driver *drv = handoff_data(h);
        sleeper_destroy(&drv->pause);
        pthread_mutex_destroy(&drv->mu);
        pthread_cond_destroy(&drv->cond);
        free(drv);
}

/* Stops the claims thread (joined), the publisher, the sockets, and frees
 * drv once its async handle is closed.  cleanup: the driver's slices go
 * too. */
static void driver_free(struct dra_driver *drv, bool cleanup)
{
        atomic_store(&drv->stop, true);
        sleeper_stop(&drv->pause);
        dra_claims_stop(drv);
        dra_pub_stop(drv);
        dra_plugin_stop(drv);
        unwatch_all(drv);
        if (cleanup) {
                struct diag why = { 0 };
                int r = dra_slices_delete(drv->dra->api, drv->dra->node, drv->name, CLEANUP_MS,
                                          NULL, &why);
                if (r < 0)
                        log_warn("dra", "cannot delete the ResourceSlices driver=%s error=\"%s\"",
                                 drv->name, why.message[0] ? why.message : strerror(-r));
                else
                        log_info("dra", "deleted the ResourceSlices driver=%s node=%s", drv->name,
                                 drv->dra->node);
        }
        /* jobs never answered (the server is gone, so are their calls) */
        for (struct dra_job *j = drv->jobs, *n; j; j = n) {
                n = j->next;
                dra_job_free(j);
        }
        dra_table_unref(drv->table);
        free(drv->name);
        free(drv->dir);
        free(drv->dra_socket);
        free(drv->reg_socket);
        free(drv->slice_prefix);
        /* answers never sent are dropped (their calls went with the server) */
        drv->closing = true;
        dra_health_stop(drv, on_health_closed);
}

static struct dra_driver *driver_new(struct dra *d, const char *name, struct diag *diag)
{
        struct dra_driver *drv = xcalloc(1, sizeof(*drv));
        drv->dra = d;
        drv->name = xstrdup(name);
        drv->dir = xasprintf("%s/%s", d->plugins_dir, name);
        drv->dra_socket = xasprintf("%s/dra.sock", drv->dir);
        drv->reg_socket = xasprintf("%s/%s-reg.sock", d->registry_dir, name);
        _cleanup_free_ char *label = dev_model_label(name);
        _cleanup_free_ char *node = dev_model_label(d->node);
        drv->slice_prefix = xasprintf("%.100s-%.60s", node, label);
        drv->jobs_tail = &drv->jobs;
        sleeper_init(&drv->pause);
        pthread_mutex_init(&drv->mu, NULL);
        clock_cond_init(&drv->cond);

        const char *dirs[] = { drv->dir, d->registry_dir };
        int r = 0;
        for (size_t i = 0; i < ARRAY_SIZE(dirs) && r >= 0; i++) {
                r = fs_open_dir(AT_FDCWD, dirs[i], FS_CREATE, 0750, diag);
                if (r >= 0)
                        close(r);
                else
                        diag_prefix(diag, r, "cannot create %s", dirs[i]);
        }
        if (r < 0) {
                driver_free(drv, false);
                return NULL;
        }
        if (dra_plugin_serve(drv, diag) < 0) {
                driver_free(drv, false);
                return NULL;
        }
        if (dra_pub_start(drv, diag) < 0) {
                driver_free(drv, false);
                return NULL;
        }
        dra_claims_kick(drv); /* reads the checkpoint */
        log_info("dra", "serving driver=%s socket=%s registration=%s", name, drv->dra_socket,
                 drv->reg_socket);
        return drv;
}

void dra_update(struct dra *d, const struct devlet_config *cfg, const struct dra_resource *v,
                size_t n)
{
        d->cleanup = cfg->dra_cleanup;
        /* drivers that keep resources get them; the others stop */
        for (size_t i = 0; i < d->n_drivers;) {
                struct dra_driver *drv = d->drivers[i];
                unwatch_all(drv);
                for (size_t k = 0; k < n; k++)
                        if (strcmp(v[k].driver, drv->name) == 0) {
                                drv->res = xrealloc(drv->res, (drv->n_res + 1) * sizeof(*drv->res));
                                drv->res[drv->n_res++] = v[k].res;
                        }
                if (drv->n_res == 0) {
                        log_info("dra", "driver has no resource left, stopping driver=%s",
                                 drv->name);
                        driver_free(drv, true);
                        memmove(&d->drivers[i], &d->drivers[i + 1],
                                (--d->n_drivers - i) * sizeof(*d->drivers));
                        continue;
                }
                i++;
        }
        for (size_t k = 0; k < n; k++) {
                bool have = false;
                for (size_t i = 0; i < d->n_drivers; i++)
                        have = have || strcmp(d->drivers[i]->name, v[k].driver) == 0;
                if (have)
                        continue;
                struct diag why = { 0 };
                struct dra_driver *drv = driver_new(d, v[k].driver, &why);
                if (!drv) {
                        log_error("dra", "cannot serve the driver driver=%s error=\"%s\"",
                                  v[k].driver, why.message);
                        continue;
                }
                d->drivers = xrealloc(d->drivers, (d->n_drivers + 1) * sizeof(*d->drivers));
                d->drivers[d->n_drivers++] = drv;
                for (size_t j = k; j < n; j++)
                        if (strcmp(v[j].driver, drv->name) == 0) {
                                drv->res = xrealloc(drv->res, (drv->n_res + 1) * sizeof(*drv->res));
                                drv->res[drv->n_res++] = v[j].res;
                        }
        }
        for (size_t i = 0; i < d->n_drivers; i++) {
                struct dra_driver *drv = d->drivers[i];
                for (size_t k = 0; k < drv->n_res; k++)
                        dev_resource_watch(drv->res[k], on_resource_change, drv);
                refresh_table(drv);
        }
}

void dra_stop(struct dra *d)
{
        if (!d)
                return;
        /* every thread told at once: they leave their calls together */
        for (size_t i = 0; i < d->n_drivers; i++) {
                struct dra_driver *drv = d->drivers[i];
                atomic_store(&drv->stop, true);
                sleeper_stop(&drv->pause);
        }
        for (size_t i = 0; i < d->n_drivers; i++)
                driver_free(d->drivers[i], d->cleanup);
        free(d->drivers);
        kapi_client_free(d->api);
        free(d->node);
        free(d->cdi_spec_dir);
        free(d->plugins_dir);
        free(d->registry_dir);
        free(d->kubeconfig);
        free(d->node_cfg);
        free(d);
}

size_t dra_stats(const struct dra *d, struct dra_driver_stats *out, size_t max)
{
        if (!d)
                return 0;
        for (size_t i = 0; i < d->n_drivers && i < max; i++) {
                out[i] = d->drivers[i]->stats;
                out[i].driver = d->drivers[i]->name;
        }
        return d->n_drivers;
}

bool dra_config_same(const struct dra *d, const struct devlet_config *cfg)
{
        return strcmp(d->cdi_spec_dir, cfg->cdi_spec_dir) == 0 &&
               strcmp(d->plugins_dir, cfg->kubelet_plugins_dir) == 0 &&
               strcmp(d->registry_dir, cfg->kubelet_registry_dir) == 0 &&
               strcmp(d->kubeconfig, cfg->kubeconfig) == 0 &&
               strcmp(d->node_cfg, cfg->node_name) == 0;
}

int dra_cleanup_node(const struct devlet_config *cfg, char *const *drivers, struct diag *diag)
{
        struct kapi_client *api = NULL;
        int r = api_new(cfg, &api, diag);
        if (r < 0)
                return r;
        _cleanup_free_ char *node = config_node_name(cfg);
        for (size_t i = 0; drivers && drivers[i] && r >= 0; i++) {
                r = dra_slices_delete(api, node, drivers[i], 10000, NULL, diag);
                if (r < 0)
                        diag_prefix(diag, r, "driver %s", drivers[i]);
        }
        kapi_client_free(api);
        return r;
}
