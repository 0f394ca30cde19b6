/* The host-device backend: one resource "<domain>/<name>" per hostDevices
 * entry, kept in step with the host as devices come and go.
 *
 * Each rescan (scan.c) lists the instances a device has now.  An instance is
 * recognised across scans by its identity (scan.c: matched path, USB serial
 * or port, group); the first time it is seen it gets count IDs, appended to
 * the resource:
 *     count == 1   <key>               e.g. ttyUSB0, usb-046d-0825-ABC123
 *     count  > 1   <key>-0..<key>-N-1   e.g. fuse-0 .. fuse-9
 * If one of those IDs is already held by another instance the key becomes
 * <key>_2, <key>_3, ... so IDs are unique within the resource.  IDs are never
 * removed or reused: an instance that vanishes keeps its IDs, marked
 * unhealthy, and becomes healthy again when it returns (with its nodes
 * refreshed, e.g. a USB device re-plugged on another port).
 *
 * Hot-plug: with a loop, the parent directory of every configured path (the
 * last glob-free directory for globs), <sysfs>/bus/usb/devices and the
 * <dev_root>/dev/bus/usb trees when USB matchers exist are watched with
 * uv_fs_event; events are coalesced for DEBOUNCE_MS and then everything is
 * rescanned.  A timer rescans every rescan_interval_ms as well, for what
 * inotify cannot see (sysfs, directories that do not exist yet).  Watches
 * that failed, or whose directory was replaced, are retried on each rescan.
 * A resource is notified once per rescan when its IDs, health, NUMA nodes
 * or DRA models changed; changed nodes or mounts alone are updated
 * silently.
 *
 * DRA (hostdev.devlet.io): each instance is one DRA device named
 * "<resource's short name>-<instance index>" ("fuse-0"; "-<k>" added when
 * another resource already publishes the name), which every ID of the
 * instance carries (count > 1 makes replicas of one device).  Its
 * attributes are the scan's (scan.c) and resource, the resource name.
 *
 * Resources use the generic allocate/preferred (ops NULL) and do not
 * advertise GetPreferredAllocation: instances of a host device are
 * interchangeable, and the kubelet's own choice is as good as ours.
 *
 * Runs on the loop thread only and never blocks it beyond stat/glob/readdir.
 * The configuration is copied: cfg need not outlive the backend. */
#include "devices/hostdev/hostdev.h"

#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "devices/hostdev/scan.h"

#define DEBOUNCE_MS 20
/* the longest resource short name in a DRA device name, leaving room in
 * its 63 bytes for "-<instance>-<k>" */
#define MODEL_STEM_MAX 40

struct hostdev_inst {
        char *identity;
        size_t first; /* index of its first ID in r->devices */
        unsigned count;
};

struct hostdev_res {
        struct dev_resource *r;
        struct hostdev_device_cfg cfg; /* own copy */
        struct hostdev_inst *insts;
        size_t n_insts, cap_insts;
};

struct hostdev_backend;

struct hostdev_watch {
        uv_fs_event_t handle;
        struct hostdev_backend *b;
        char *path;
        dev_t dev;
        ino_t ino;
        bool active;
};

struct hostdev_backend {
        uv_loop_t *loop;
        struct hostdev_env env;
        int64_t rescan_interval_ms;
        bool has_usb;

        struct hostdev_res *res;
        struct dev_resource **resources;
        size_t n_res;

        struct hostdev_watch **watches;
        size_t n_watches, cap_watches;
        uv_timer_t debounce, rescan;
        unsigned pending_closes;
};

/* ---- configuration copy ---- */

static char *strdup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

static void device_cfg_copy(struct hostdev_device_cfg *dst, const struct hostdev_device_cfg *src)
{
        dst->name = xstrdup(src->name);
        dst->n_groups = src->n_groups;
        dst->groups = xcalloc(src->n_groups, sizeof(*dst->groups));
        for (size_t k = 0; k < src->n_groups; k++) {
                const struct hostdev_group_cfg *sg = &src->groups[k];
                struct hostdev_group_cfg *g = &dst->groups[k];
                g->count = sg->count;
                g->n_paths = sg->n_paths;
                g->paths = xcalloc(sg->n_paths, sizeof(*g->paths));
                for (size_t i = 0; i < sg->n_paths; i++) {
                        g->paths[i] = sg->paths[i];
                        g->paths[i].path = xstrdup(sg->paths[i].path);
                        g->paths[i].mount_path = strdup_or_null(sg->paths[i].mount_path);
                }
                g->n_usb = sg->n_usb;
                g->usb = xcalloc(sg->n_usb, sizeof(*g->usb));
                for (size_t i = 0; i < sg->n_usb; i++) {
                        g->usb[i].vendor = strdup_or_null(sg->usb[i].vendor);
                        g->usb[i].product = strdup_or_null(sg->usb[i].product);
                        g->usb[i].serial = strdup_or_null(sg->usb[i].serial);
                }
        }
}

static void device_cfg_free(struct hostdev_device_cfg *c)
{
        for (size_t k = 0; k < c->n_groups; k++) {
                struct hostdev_group_cfg *g = &c->groups[k];
                for (size_t i = 0; i < g->n_paths; i++) {
                        free(g->paths[i].path);
                        free(g->paths[i].mount_path);
                }
                free(g->paths);
                for (size_t i = 0; i < g->n_usb; i++) {
                        free(g->usb[i].vendor);
                        free(g->usb[i].product);
                        free(g->usb[i].serial);
                }
                free(g->usb);
        }
        free(c->groups);
        free(c->name);
}

/* The config module validates hostDevices (and alone bounds each group's
 * count); these checks only keep the backend safe on its own (tests, other
 * callers). */
static int device_cfg_check(const struct hostdev_cfg *hc, size_t i, struct diag *diag)
{
        const struct hostdev_device_cfg *d = &hc->devices[i];
        if (!d->name || !d->name[0] || strchr(d->name, '/'))
                return diag_set(diag, -EINVAL, "hostDevices[%zu]: invalid name", i);
        for (size_t j = 0; j < i; j++)
                if (strcmp(hc->devices[j].name, d->name) == 0)
                        return diag_set(diag, -EINVAL, "hostDevices[%zu]: duplicate name \"%s\"", i,
                                        d->name);
        if (d->n_groups == 0)
                return diag_set(diag, -EINVAL, "hostDevices \"%s\": no device groups", d->name);
        for (size_t k = 0; k < d->n_groups; k++) {
                const struct hostdev_group_cfg *g = &d->groups[k];
                if (g->n_paths == 0 && g->n_usb == 0)
                        return diag_set(diag, -EINVAL,
                                        "hostDevices \"%s\": group %zu has no paths and no usb",
                                        d->name, k);
                for (size_t p = 0; p < g->n_paths; p++)
                        if (!g->paths[p].path || g->paths[p].path[0] != '/' ||
                            (g->paths[p].mount_path && g->paths[p].mount_path[0] != '/'))
                                return diag_set(diag, -EINVAL,
                                                "hostDevices \"%s\": group %zu: paths must be "
                                                "absolute", d->name, k);
                for (size_t u = 0; u < g->n_usb; u++)
                        if (!g->usb[u].vendor || !g->usb[u].product)
                                return diag_set(diag, -EINVAL,
                                                "hostDevices \"%s\": group %zu: usb needs "
                                                "vendor and product", d->name, k);
        }
        return 0;
}

/* "/" and "" become "", trailing slashes go. */
static char *root_normalize(const char *s, const char *dflt)
{
        char *r = xstrdup(s && s[0] ? s : dflt);
        size_t n = strlen(r);
        while (n > 0 && r[n - 1] == '/')
                r[--n] = '\0';
        return r;
}

/* ---- reconciling a scan with the resource ---- */

static char *device_id(const char *key, unsigned count, unsigned n)
{
        return count == 1 ? xstrdup(key) : xasprintf("%s-%u", key, n);
}

static bool ids_free(struct dev_resource *r, const char *key, unsigned count)
{
        for (unsigned n = 0; n < count; n++) {
                _cleanup_free_ char *id = device_id(key, count, n);
                if (dev_resource_find(r, id))
                        return false;
        }
        return true;
}

static char *choose_key(struct dev_resource *r, const char *key, unsigned count)
{
        if (ids_free(r, key, count))
                return xstrdup(key);
        for (unsigned k = 2;; k++) {
                char *c = xasprintf("%s_%u", key, k);
                if (ids_free(r, c, count))
                        return c;
                free(c);
        }
}

static bool nodes_equal(const struct dev_device *a, const struct dev_device *b)
{
        if (a->n_nodes != b->n_nodes || a->n_mounts != b->n_mounts)
                return false;
        for (size_t i = 0; i < a->n_nodes; i++)
                if (strcmp(a->nodes[i].host_path, b->nodes[i].host_path) != 0 ||
                    strcmp(a->nodes[i].container_path, b->nodes[i].container_path) != 0 ||
                    strcmp(a->nodes[i].permissions, b->nodes[i].permissions) != 0)
                        return false;
        for (size_t i = 0; i < a->n_mounts; i++)
                if (strcmp(a->mounts[i].host_path, b->mounts[i].host_path) != 0 ||
                    strcmp(a->mounts[i].container_path, b->mounts[i].container_path) != 0 ||
                    a->mounts[i].read_only != b->mounts[i].read_only)
                        return false;
        return true;
}

static void spec_copy(struct dev_device *d, const struct dev_device *spec)
{
        for (size_t i = 0; i < spec->n_nodes; i++)
                dev_device_add_node(d, spec->nodes[i].host_path, spec->nodes[i].container_path,
                                    spec->nodes[i].permissions);
        for (size_t i = 0; i < spec->n_mounts; i++)
                dev_device_add_mount(d, spec->mounts[i].host_path, spec->mounts[i].container_path,
                                     spec->mounts[i].read_only);
}

/* ---- the DRA model ---- */

/* Whether a device of b is published under name. */
static bool model_name_taken(const struct hostdev_backend *b, const char *name)
{
        for (size_t i = 0; i < b->n_res; i++) {
                const struct dev_resource *r = b->res[i].r;
                for (size_t k = 0; k < r->n_devices; k++)
                        if (r->devices[k].model && strcmp(r->devices[k].model->name, name) == 0)
                                return true;
        }
        return false;
}

/* "<resource's short name>-<instance index>" as a DNS label ("fuse-0"), with
 * "-<k>" after it when another resource of b already publishes that name
 * (two domains, one short name). */
static char *model_name(const struct hostdev_backend *b, const struct dev_resource *r, size_t inst)
{
        const char *slash = strrchr(r->name, '/');
        _cleanup_free_ char *label = dev_model_label(slash ? slash + 1 : r->name);
        size_t n = strlen(label);
        if (n > MODEL_STEM_MAX)
                n = MODEL_STEM_MAX;
        while (n > 1 && label[n - 1] == '-')
                n--;
        label[n] = '\0';
        char *name = xasprintf("%s-%zu", label, inst);
        for (unsigned k = 2; model_name_taken(b, name); k++) {
                free(name);
                name = xasprintf("%s-%zu-%u", label, inst, k);
        }
        return name;
}

/* What the devices of an instance publish: the scan's attributes under
 * their name, and the resource they are served as. */
static struct dev_model *model_for(const struct dev_resource *r, const struct hostdev_found *f,
                                   const char *name)
{
        struct dev_model *m = dev_model_copy(f->model);
        free(m->name);
        m->name = xstrdup(name);
        dev_model_string(m, "resource", r->name);
        return m;
}

/* Brings d in line with what the scan saw; true when the kubelet-visible
 * part (health, NUMA) or the DRA model changed. */
static bool device_update(const struct dev_resource *r, struct dev_device *d,
                          const struct hostdev_found *f, const char *model_name)
{
        const struct dev_device *spec = &f->spec;
        bool changed = d->health != spec->health || d->numa_node != spec->numa_node;
        d->health = spec->health;
        d->numa_node = spec->numa_node;
        if (!nodes_equal(d, spec)) {
                hostdev_spec_clear(d);
                spec_copy(d, spec);
        }
        struct dev_model *m = model_for(r, f, model_name);
        if (dev_model_equal(d->model, m)) {
                dev_model_free(m);
        } else {
                dev_model_free(d->model);
                d->model = m;
                changed = true;
        }
        return changed;
}

static void inst_add(const struct hostdev_backend *b, struct hostdev_res *hr,
                     const struct hostdev_found *f)
{
        struct dev_resource *r = hr->r;
        _cleanup_free_ char *key = choose_key(r, f->key, f->count);
        _cleanup_free_ char *name = model_name(b, r, hr->n_insts);
        xgrow((void **)&hr->insts, &hr->cap_insts, hr->n_insts + 1, sizeof(*hr->insts));
        struct hostdev_inst *in = &hr->insts[hr->n_insts++];
        in->identity = xstrdup(f->identity);
        in->first = r->n_devices;
        in->count = f->count;
        for (unsigned n = 0; n < f->count; n++) {
                _cleanup_free_ char *id = device_id(key, f->count, n);
                struct dev_device *d = dev_resource_add(r, id);
                device_update(r, d, f, name);
        }
}

static bool res_reconcile(const struct hostdev_backend *b, struct hostdev_res *hr,
                          const struct hostdev_scan *s)
{
        struct dev_resource *r = hr->r;
        size_t n_old = hr->n_insts;
        _cleanup_free_ bool *seen = xcalloc(n_old, sizeof(bool));
        bool changed = false;

        for (size_t i = 0; i < s->n; i++) {
                const struct hostdev_found *f = &s->v[i];
                size_t j = 0;
                while (j < hr->n_insts && strcmp(hr->insts[j].identity, f->identity) != 0)
                        j++;
                if (j == hr->n_insts) {
                        inst_add(b, hr, f);
                        changed = true;
                        continue;
                }
                if (j < n_old)
                        seen[j] = true;
                const struct hostdev_inst *in = &hr->insts[j];
                _cleanup_free_ char *name = xstrdup(r->devices[in->first].model->name);
                for (unsigned n = 0; n < in->count; n++)
                        changed |= device_update(r, &r->devices[in->first + n], f, name);
        }
        for (size_t j = 0; j < n_old; j++) {
                if (seen[j])
                        continue;
                const struct hostdev_inst *in = &hr->insts[j];
                for (unsigned n = 0; n < in->count; n++) {
                        struct dev_device *d = &r->devices[in->first + n];
                        if (d->health != DEV_UNHEALTHY) {
                                d->health = DEV_UNHEALTHY;
                                changed = true;
                        }
                }
        }
        return changed;
}

static void rescan_resources(struct hostdev_backend *b, bool notify)
{
        for (size_t i = 0; i < b->n_res; i++) {
                struct hostdev_res *hr = &b->res[i];
                struct hostdev_scan s = { 0 };
                hostdev_scan_device(&b->env, &hr->cfg, &s);
                bool changed = res_reconcile(b, hr, &s);
                hostdev_scan_release(&s);
                if (changed) {
                        log_debug("hostdev", "changed resource=%s devices=%zu healthy=%zu",
                                  hr->r->name, hr->r->n_devices, dev_resource_healthy(hr->r));
                        if (notify)
                                dev_resource_notify(hr->r);
                }
        }
}

/* ---- watching ---- */

static void rescan_all(struct hostdev_backend *b);

static void on_debounce(uv_timer_t *t)
{
        rescan_all(t->data);
}

static void on_fs_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
        struct hostdev_watch *w = h->data;
        struct hostdev_backend *b = w->b;
        if (!uv_is_active((uv_handle_t *)&b->debounce))
                uv_timer_start(&b->debounce, on_debounce, DEBOUNCE_MS, 0);
}

static void on_rescan_timer(uv_timer_t *t)
{
        rescan_all(t->data);
}

static struct hostdev_watch *watch_get(struct hostdev_backend *b, const char *path)
{
        for (size_t i = 0; i < b->n_watches; i++)
                if (strcmp(b->watches[i]->path, path) == 0)
                        return b->watches[i];
        struct hostdev_watch *w = xcalloc(1, sizeof(*w));
        w->b = b;
        w->path = xstrdup(path);
        uv_fs_event_init(b->loop, &w->handle);
        w->handle.data = w;
        xgrow((void **)&b->watches, &b->cap_watches, b->n_watches + 1, sizeof(*b->watches));
        b->watches[b->n_watches++] = w;
        return w;
}

/* Starts watching path, or restarts when the directory was replaced since. */
static void watch_want(struct hostdev_backend *b, const char *path)
{
        struct hostdev_watch *w = watch_get(b, path);
        struct stat st;
        bool exists = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        if (w->active && exists && st.st_dev == w->dev && st.st_ino == w->ino)
                return;
        if (w->active) {
                uv_fs_event_stop(&w->handle);
                w->active = false;
        }
        if (!exists)
                return;
        int rc = uv_fs_event_start(&w->handle, on_fs_event, path, 0);
        if (rc < 0) {
                log_debug("hostdev", "watch failed path=%s error=%s", path, uv_strerror(rc));
                return;
        }
        w->active = true;
        w->dev = st.st_dev;
        w->ino = st.st_ino;
}

/* The directory whose entries decide whether pattern matches: its parent,
 * cut back to the last component free of glob characters. */
static char *watch_dir_of(const char *pattern)
{
        char *d = xstrdup(pattern);
        for (;;) {
                char *slash = strrchr(d, '/');
                if (!slash || slash == d) {
                        free(d);
                        return xstrdup("/");
                }
                *slash = '\0';
                if (!hostdev_has_glob(d))
                        return d;
        }
}

static void watch_refresh(struct hostdev_backend *b)
{
        for (size_t i = 0; i < b->n_res; i++) {
                const struct hostdev_device_cfg *c = &b->res[i].cfg;
                for (size_t k = 0; k < c->n_groups; k++)
                        for (size_t p = 0; p < c->groups[k].n_paths; p++) {
                                _cleanup_free_ char *dir = watch_dir_of(c->groups[k].paths[p].path);
                                watch_want(b, dir);
                        }
        }
        if (!b->has_usb)
                return;
        _cleanup_free_ char *sys = xasprintf("%s/bus/usb/devices", b->env.sysfs_root);
        _cleanup_free_ char *usb = xasprintf("%s/dev/bus/usb", b->env.dev_root);
        _cleanup_free_ char *buses = xasprintf("%s/*", usb);
        watch_want(b, sys);
        watch_want(b, usb);
        glob_t g = { 0 };
        if (glob(buses, GLOB_ONLYDIR, NULL, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc; i++)
                        watch_want(b, g.gl_pathv[i]);
        globfree(&g);
}

static void rescan_all(struct hostdev_backend *b)
{
        watch_refresh(b);
        rescan_resources(b, true);
}

/* ---- life cycle ---- */

static void backend_free(struct hostdev_backend *b)
{
        for (size_t i = 0; i < b->n_res; i++) {
                struct hostdev_res *hr = &b->res[i];
                for (size_t j = 0; j < hr->n_insts; j++)
                        free(hr->insts[j].identity);
                free(hr->insts);
                device_cfg_free(&hr->cfg);
                dev_resource_free(hr->r);
        }
        free(b->res);
        free(b->resources);
        for (size_t i = 0; i < b->n_watches; i++) {
                free(b->watches[i]->path);
                free(b->watches[i]);
        }
        free(b->watches);
        free(b->env.sysfs_root);
        free(b->env.dev_root);
        free(b);
}

DEFINE_CLEANUP_FUNC(struct hostdev_backend, backend_free)

static int hostdev_create(uv_loop_t *loop, const struct devlet_config *cfg,
                          struct dev_backend **out, struct diag *diag)
{
        const struct hostdev_cfg *hc = &cfg->hostdev;
        if (hc->n_devices == 0) {
                *out = NULL;
                return 0;
        }
        for (size_t i = 0; i < hc->n_devices; i++) {
                int rc = device_cfg_check(hc, i, diag);
                if (rc < 0)
                        return rc;
        }

        _cleanup_(backend_freep) struct hostdev_backend *b = xcalloc(1, sizeof(*b));
        b->env.sysfs_root = root_normalize(cfg->sysfs_root, "/sys");
        b->env.dev_root = root_normalize(config_host_dev_root(cfg), "/");
        b->rescan_interval_ms = cfg->rescan_interval_ms;
        b->res = xcalloc(hc->n_devices, sizeof(*b->res));
        b->resources = xcalloc(hc->n_devices, sizeof(*b->resources));
        const char *domain = hc->domain && hc->domain[0] ? hc->domain : "devlet.io";
        for (size_t i = 0; i < hc->n_devices; i++) {
                struct hostdev_res *hr = &b->res[i];
                device_cfg_copy(&hr->cfg, &hc->devices[i]);
                _cleanup_free_ char *name = xasprintf("%s/%s", domain, hr->cfg.name);
                hr->r = dev_resource_new(name);
                hr->r->backend_data = hr;
                b->resources[i] = hr->r;
                b->n_res++;
                for (size_t k = 0; k < hr->cfg.n_groups; k++)
                        if (hr->cfg.groups[k].n_usb > 0)
                                b->has_usb = true;
        }

        /* watch before the first scan, so nothing slips in between */
        if (loop) {
                b->loop = loop;
                uv_timer_init(loop, &b->debounce);
                uv_timer_init(loop, &b->rescan);
                b->debounce.data = b;
                b->rescan.data = b;
                watch_refresh(b);
                if (b->rescan_interval_ms > 0)
                        uv_timer_start(&b->rescan, on_rescan_timer,
                                       (uint64_t)b->rescan_interval_ms,
                                       (uint64_t)b->rescan_interval_ms);
        }
        rescan_resources(b, false);
        log_debug("hostdev", "created resources=%zu watches=%zu", b->n_res, b->n_watches);
        *out = (struct dev_backend *)TAKE_PTR(b);
        return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
        struct hostdev_backend *b = h->data;
        if (--b->pending_closes == 0)
                backend_free(b);
}

static void on_watch_closed(uv_handle_t *h)
{
        struct hostdev_watch *w = h->data;
        struct hostdev_backend *b = w->b;
        if (--b->pending_closes == 0)
                backend_free(b);
}

static void hostdev_destroy(struct dev_backend *db)
{
        struct hostdev_backend *b = (struct hostdev_backend *)db;
        if (!b)
                return;
        if (!b->loop) {
                backend_free(b);
                return;
        }
        b->pending_closes = 2 + (unsigned)b->n_watches;
        for (size_t i = 0; i < b->n_watches; i++)
                uv_close((uv_handle_t *)&b->watches[i]->handle, on_watch_closed);
        uv_close((uv_handle_t *)&b->debounce, on_handle_closed);
        uv_close((uv_handle_t *)&b->rescan, on_handle_closed);
}

static struct dev_resource **hostdev_resources(struct dev_backend *db, size_t *n)
{
        struct hostdev_backend *b = (struct hostdev_backend *)db;
        *n = b->n_res;
        return b->resources;
}

const struct dev_backend_ops hostdev_backend_ops = {
        .name = "hostdev",
        .dra_driver = "hostdev.devlet.io",
        .create = hostdev_create,
        .destroy = hostdev_destroy,
        .resources = hostdev_resources,
};

/* Host devices take no command-line options of their own (their config is
 * the hostDevices section). */
const struct config_family hostdev_config_family = { .name = "hostdev" };
