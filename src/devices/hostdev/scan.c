/* One scan of the host for one configured host device: which instances exist
 * now, what a container holding each gets, whether each is healthy and which
 * NUMA node it sits on.  Keeps no state: hostdev.c compares scans.
 *
 * Instances of a group:
 *   - with usb matchers: one per USB device in <sysfs>/bus/usb/devices whose
 *     idVendor/idProduct (and serial, when the matcher names one) match; its
 *     node is <dev_root>/dev/bus/usb/BBB/DDD from busnum/devnum, seen in the
 *     container at /dev/bus/usb/BBB/DDD;
 *   - else, when a non-optional path has glob characters: one per match of
 *     the first such path (glob(3), sorted), seen at its mountPath or its
 *     own path (an optional glob only adds what it matches, as below);
 *   - else one instance.
 * Every other path of the group (plain, or every match of a glob) is added to
 * every instance.  An instance is healthy when each non-optional path exists
 * (any kind of file: tests stand regular files in for device nodes) and a
 * non-optional glob matches something; a missing optional path is left out.
 *
 * Identity and key (the ID stem, see hostdev.c):
 *   glob match   identity "g<k>:<matched path>", key = its basename;
 *   USB          identity "g<k>:usb:<vendor>:<product>:<serial>" and key
 *                "usb-<vendor>-<product>-<serial>" when the device has a
 *                serial (stable across re-plugging), else identity
 *                "g<k>:usb:<sysfs name>" and key "usb-<vendor>-<product>-<sysfs
 *                name>" (the bus/port path, e.g. 1-1.2: stable per port);
 *   plain group  identity "g<k>", key "<name>" (one group) or "<name>-g<k>".
 * Keys keep [A-Za-z0-9_.-] and turn anything else into '_'.
 *
 * DRA attributes (hostdev.c names the model): path, the host path of the
 * instance's first device node, and major and minor when it is a char or
 * block device; usbVendorID and usbProductID (sysfs idVendor/idProduct,
 * "046d") for a USB instance.
 *
 * Only stat, glob, readdir and small sysfs reads: cheap enough for the loop.
 * Never logs above debug, never follows config paths outside what the config
 * names. */
#include "devices/hostdev/scan.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"

bool hostdev_has_glob(const char *s)
{
        return strpbrk(s, "*?[") != NULL;
}

void hostdev_spec_clear(struct dev_device *d)
{
        for (size_t i = 0; i < d->n_nodes; i++) {
                free(d->nodes[i].host_path);
                free(d->nodes[i].container_path);
        }
        free(d->nodes);
        d->nodes = NULL;
        d->n_nodes = 0;
        for (size_t i = 0; i < d->n_mounts; i++) {
                free(d->mounts[i].host_path);
                free(d->mounts[i].container_path);
        }
        free(d->mounts);
        d->mounts = NULL;
        d->n_mounts = 0;
}

void hostdev_scan_release(struct hostdev_scan *s)
{
        for (size_t i = 0; i < s->n; i++) {
                free(s->v[i].identity);
                free(s->v[i].key);
                hostdev_spec_clear(&s->v[i].spec);
                dev_model_free(s->v[i].model);
        }
        free(s->v);
        memset(s, 0, sizeof(*s));
}

static char *sanitize_key(const char *s)
{
        char *k = xstrdup(s);
        for (char *p = k; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-')
                        *p = '_';
        return k;
}

static struct hostdev_found *found_add(struct hostdev_scan *s, char *identity, const char *key,
                                       unsigned count)
{
        xgrow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v));
        struct hostdev_found *f = &s->v[s->n++];
        memset(f, 0, sizeof(*f));
        f->identity = identity;
        f->key = sanitize_key(key);
        f->count = count;
        f->spec.health = DEV_HEALTHY;
        f->spec.numa_node = -1;
        f->model = dev_model_new("");
        return f;
}

/* The attributes of an instance's first device node: its host path and,
 * for a char or block device, its numbers. */
static void model_fill(struct hostdev_found *f)
{
        if (f->spec.n_nodes == 0)
                return;
        const char *path = f->spec.nodes[0].host_path;
        dev_model_string(f->model, "path", path);
        struct stat st;
        if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
                dev_model_int(f->model, "major", major(st.st_rdev));
                dev_model_int(f->model, "minor", minor(st.st_rdev));
        }
}

static bool identity_seen(const struct hostdev_scan *s, const char *identity)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->v[i].identity, identity) == 0)
                        return true;
        return false;
}

/* ---- NUMA ---- */

static int read_numa(const char *dir, bool *present)
{
        _cleanup_free_ char *file = xasprintf("%s/numa_node", dir);
        char buf[32];
        *present = fs_read_line(file, buf, sizeof(buf)) == 0;
        if (!*present)
                return -1;
        char *end;
        errno = 0;
        long v = strtol(buf, &end, 10);
        if (errno || end == buf || *end || v < 0 || v > INT_MAX)
                return -1;
        return (int)v;
}

/* The first numa_node file in dir or its parents, up to the sysfs root:
 * device nodes of PCI functions carry it on the function, USB devices on
 * their host controller. */
static int numa_walk(const struct hostdev_env *env, const char *dir)
{
        char root[PATH_MAX], cur[PATH_MAX];
        if (!realpath(env->sysfs_root[0] ? env->sysfs_root : "/", root) || !realpath(dir, cur))
                return -1;
        size_t rl = strlen(root);
        if (rl == 1)
                rl = 0; /* root is "/": every absolute path is under it */
        while (strncmp(cur, root, rl) == 0 && cur[rl] == '/') {
                bool present;
                int v = read_numa(cur, &present);
                if (present)
                        return v;
                char *slash = strrchr(cur, '/');
                if (!slash || (size_t)(slash - cur) <= rl)
                        break;
                *slash = '\0';
        }
        return -1;
}

/* NUMA node of a char or block device node, from
 * <sysfs>/dev/{char,block}/MAJ:MIN/device (or the class device itself). */
static int numa_of_node(const struct hostdev_env *env, const char *path)
{
        struct stat st;
        if (stat(path, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
                return -1;
        _cleanup_free_ char *dir = xasprintf("%s/dev/%s/%u:%u", env->sysfs_root,
                                             S_ISCHR(st.st_mode) ? "char" : "block",
                                             major(st.st_rdev), minor(st.st_rdev));
        _cleanup_free_ char *dev = xasprintf("%s/device", dir);
        struct stat dst;
        return numa_walk(env, stat(dev, &dst) == 0 ? dev : dir);
}

/* ---- paths ---- */

static void add_entry(const struct hostdev_env *env, struct dev_device *spec,
                      const struct hostdev_path_cfg *p, const char *host, const char *ctr)
{
        if (p->type == HOSTDEV_PATH_MOUNT) {
                dev_device_add_mount(spec, host, ctr, p->read_only);
                return;
        }
        dev_device_add_node(spec, host, ctr, p->permissions[0] ? p->permissions : "rw");
        if (spec->numa_node < 0)
                spec->numa_node = numa_of_node(env, host);
}

/* Adds path p to an instance.  A glob adds each match; with mountPath set
 * and several matches each keeps its own path (one container path cannot
 * hold several files). */
static void add_path(const struct hostdev_env *env, struct dev_device *spec,
                     const struct hostdev_path_cfg *p)
{
        if (hostdev_has_glob(p->path)) {
                glob_t g = { 0 };
                int rc = glob(p->path, 0, NULL, &g);
                if (rc != 0 || g.gl_pathc == 0) {
                        if (!p->optional)
                                spec->health = DEV_UNHEALTHY;
                } else {
                        for (size_t i = 0; i < g.gl_pathc; i++) {
                                const char *m = g.gl_pathv[i];
                                const char *ctr = p->mount_path && g.gl_pathc == 1 ? p->mount_path : m;
                                add_entry(env, spec, p, m, ctr);
                        }
                }
                globfree(&g);
                return;
        }
        struct stat st;
        if (stat(p->path, &st) < 0) {
                if (p->optional)
                        return;
                spec->health = DEV_UNHEALTHY;
        }
        add_entry(env, spec, p, p->path, p->mount_path ? p->mount_path : p->path);
}

static void add_paths_except(const struct hostdev_env *env, struct dev_device *spec,
                             const struct hostdev_group_cfg *g, size_t skip)
{
        for (size_t i = 0; i < g->n_paths; i++)
                if (i != skip)
                        add_path(env, spec, &g->paths[i]);
}

/* ---- USB ---- */

struct usb_dev {
        char vendor[16], product[16], serial[256];
        bool has_serial;
        long busnum, devnum;
};

static long read_num(const char *dir, const char *name)
{
        _cleanup_free_ char *file = xasprintf("%s/%s", dir, name);
        char buf[32];
        if (fs_read_line(file, buf, sizeof(buf)) < 0)
                return -1;
        char *end;
        errno = 0;
        long v = strtol(buf, &end, 10);
        if (errno || end == buf || *end || v < 1 || v > 999)
                return -1;
        return v;
}

static int usb_read(const char *dir, struct usb_dev *u)
{
        _cleanup_free_ char *fv = xasprintf("%s/idVendor", dir);
        _cleanup_free_ char *fp = xasprintf("%s/idProduct", dir);
        _cleanup_free_ char *fs = xasprintf("%s/serial", dir);
        if (fs_read_line(fv, u->vendor, sizeof(u->vendor)) < 0 ||
            fs_read_line(fp, u->product, sizeof(u->product)) < 0)
                return -ENOENT;
        u->has_serial = fs_read_line(fs, u->serial, sizeof(u->serial)) == 0 && u->serial[0];
        u->busnum = read_num(dir, "busnum");
        u->devnum = read_num(dir, "devnum");
        if (u->busnum < 0 || u->devnum < 0)
                return -ENOENT;
        return 0;
}

static bool usb_matches(const struct hostdev_group_cfg *g, const struct usb_dev *u)
{
        for (size_t i = 0; i < g->n_usb; i++) {
                const struct hostdev_usb_cfg *m = &g->usb[i];
                if (!m->vendor || !m->product || strcasecmp(m->vendor, u->vendor) != 0 ||
                    strcasecmp(m->product, u->product) != 0)
                        continue;
                if (m->serial && (!u->has_serial || strcmp(m->serial, u->serial) != 0))
                        continue;
                return true;
        }
        return false;
}

static int usb_entry_filter(const struct dirent *e)
{
        /* interfaces ("1-1.2:1.0") carry no idVendor; skip them early */
        return e->d_name[0] != '.' && !strchr(e->d_name, ':');
}

static void scan_usb(const struct hostdev_env *env, const struct hostdev_group_cfg *g, size_t k,
                     struct hostdev_scan *out)
{
        _cleanup_free_ char *base = xasprintf("%s/bus/usb/devices", env->sysfs_root);
        struct dirent **names = NULL;
        int n = scandir(base, &names, usb_entry_filter, alphasort);
        for (int i = 0; i < n; i++) {
                const char *name = names[i]->d_name;
                _cleanup_free_ char *dir = xasprintf("%s/%s", base, name);
                struct usb_dev u = { 0 };
                if (usb_read(dir, &u) == 0 && usb_matches(g, &u)) {
                        char *identity = NULL, *key = NULL;
                        if (u.has_serial) {
                                identity = xasprintf("g%zu:usb:%s:%s:%s", k, u.vendor, u.product,
                                                     u.serial);
                                key = xasprintf("usb-%s-%s-%s", u.vendor, u.product, u.serial);
                        }
                        /* two devices sharing a serial fall back to their port */
                        if (!identity || identity_seen(out, identity)) {
                                free(identity);
                                free(key);
                                identity = xasprintf("g%zu:usb:%s", k, name);
                                key = xasprintf("usb-%s-%s-%s", u.vendor, u.product, name);
                        }
                        struct hostdev_found *f = found_add(out, identity, key, g->count);
                        free(key);
                        dev_model_string(f->model, "usbVendorID", u.vendor);
                        dev_model_string(f->model, "usbProductID", u.product);
                        _cleanup_free_ char *ctr =
                                xasprintf("/dev/bus/usb/%03ld/%03ld", u.busnum, u.devnum);
                        _cleanup_free_ char *host = xasprintf("%s%s", env->dev_root, ctr);
                        struct stat st;
                        if (stat(host, &st) < 0)
                                f->spec.health = DEV_UNHEALTHY;
                        dev_device_add_node(&f->spec, host, ctr, "rw");
                        f->spec.numa_node = numa_of_node(env, host);
                        if (f->spec.numa_node < 0)
                                f->spec.numa_node = numa_walk(env, dir);
                        add_paths_except(env, &f->spec, g, SIZE_MAX);
                }
                free(names[i]);
        }
        free(names);
}

/* ---- groups ---- */

static void scan_glob(const struct hostdev_env *env, const struct hostdev_group_cfg *g, size_t k,
                      size_t first, struct hostdev_scan *out)
{
        const struct hostdev_path_cfg *p = &g->paths[first];
        glob_t gl = { 0 };
        if (glob(p->path, 0, NULL, &gl) == 0) {
                for (size_t i = 0; i < gl.gl_pathc; i++) {
                        const char *m = gl.gl_pathv[i];
                        const char *slash = strrchr(m, '/');
                        struct hostdev_found *f = found_add(out, xasprintf("g%zu:%s", k, m),
                                                            slash ? slash + 1 : m, g->count);
                        struct stat st;
                        if (stat(m, &st) < 0) /* a dangling link */
                                f->spec.health = DEV_UNHEALTHY;
                        add_entry(env, &f->spec, p, m, p->mount_path ? p->mount_path : m);
                        add_paths_except(env, &f->spec, g, first);
                }
        }
        globfree(&gl);
}

void hostdev_scan_device(const struct hostdev_env *env, const struct hostdev_device_cfg *dev,
                         struct hostdev_scan *out)
{
        size_t first_found = out->n;
        for (size_t k = 0; k < dev->n_groups; k++) {
                const struct hostdev_group_cfg *g = &dev->groups[k];
                if (g->n_usb > 0) {
                        scan_usb(env, g, k, out);
                        continue;
                }
                size_t first = SIZE_MAX;
                for (size_t i = 0; i < g->n_paths && first == SIZE_MAX; i++)
                        if (hostdev_has_glob(g->paths[i].path) && !g->paths[i].optional)
                                first = i;
                if (first != SIZE_MAX) {
                        scan_glob(env, g, k, first, out);
                        continue;
                }
                _cleanup_free_ char *key = dev->n_groups == 1 ? xstrdup(dev->name)
                                                              : xasprintf("%s-g%zu", dev->name, k);
                struct hostdev_found *f = found_add(out, xasprintf("g%zu", k), key, g->count);
                add_paths_except(env, &f->spec, g, SIZE_MAX);
        }
        for (size_t i = first_found; i < out->n; i++)
                model_fill(&out->v[i]);
}
