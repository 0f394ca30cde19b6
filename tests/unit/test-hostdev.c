/* Unit tests for devices/hostdev/: a fake /dev and sysfs in a temporary
 * directory (regular files stand in for device nodes, which the backend
 * accepts), configs built by hand, and a real uv loop for hot-plug. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/device.h"
#include "devices/hostdev/hostdev.h"

/* ---- a hand-built configuration ---- */

static struct devlet_config *cfg_new(const char *tmp)
{
        struct devlet_config *c = xcalloc(1, sizeof(*c));
        c->sysfs_root = xasprintf("%s/sys", tmp);
        c->dev_root = xasprintf("%s/", tmp); /* trailing slash on purpose */
        c->rescan_interval_ms = 0;
        return c;
}

static struct hostdev_device_cfg *cfg_device(struct devlet_config *c, const char *name)
{
        struct hostdev_cfg *h = &c->hostdev;
        h->devices = xrealloc(h->devices, (h->n_devices + 1) * sizeof(*h->devices));
        struct hostdev_device_cfg *d = &h->devices[h->n_devices++];
        memset(d, 0, sizeof(*d));
        d->name = xstrdup(name);
        return d;
}

static struct hostdev_group_cfg *cfg_group(struct hostdev_device_cfg *d, unsigned count)
{
        d->groups = xrealloc(d->groups, (d->n_groups + 1) * sizeof(*d->groups));
        struct hostdev_group_cfg *g = &d->groups[d->n_groups++];
        memset(g, 0, sizeof(*g));
        g->count = count;
        return g;
}

static struct hostdev_path_cfg *cfg_path(struct hostdev_group_cfg *g, enum hostdev_path_type type,
                                         const char *path, const char *mount_path)
{
        g->paths = xrealloc(g->paths, (g->n_paths + 1) * sizeof(*g->paths));
        struct hostdev_path_cfg *p = &g->paths[g->n_paths++];
        memset(p, 0, sizeof(*p));
        p->type = type;
        p->path = xstrdup(path);
        p->mount_path = mount_path ? xstrdup(mount_path) : NULL;
        strcpy(p->permissions, "rw");
        return p;
}

static void cfg_usb(struct hostdev_group_cfg *g, const char *vendor, const char *product,
                    const char *serial)
{
        g->usb = xrealloc(g->usb, (g->n_usb + 1) * sizeof(*g->usb));
        struct hostdev_usb_cfg *u = &g->usb[g->n_usb++];
        u->vendor = xstrdup(vendor);
        u->product = xstrdup(product);
        u->serial = serial ? xstrdup(serial) : NULL;
}

static void cfg_free(struct devlet_config *c)
{
        struct hostdev_cfg *h = &c->hostdev;
        for (size_t i = 0; i < h->n_devices; i++) {
                struct hostdev_device_cfg *d = &h->devices[i];
                for (size_t k = 0; k < d->n_groups; k++) {
                        struct hostdev_group_cfg *g = &d->groups[k];
                        for (size_t p = 0; p < g->n_paths; p++) {
                                free(g->paths[p].path);
                                free(g->paths[p].mount_path);
                        }
                        free(g->paths);
                        for (size_t u = 0; u < g->n_usb; u++) {
                                free(g->usb[u].vendor);
                                free(g->usb[u].product);
                                free(g->usb[u].serial);
                        }
                        free(g->usb);
                }
                free(d->groups);
                free(d->name);
        }
        free(h->devices);
        free(h->domain);
        free(c->sysfs_root);
        free(c->dev_root);
        free(c);
}

/* ---- the fake tree ---- */

static char tmp[256];

static char *tpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *tpath(const char *fmt, ...)
{
        static char bufs[8][1024];
        static int next;
        char rel[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rel, sizeof(rel), fmt, ap);
        va_end(ap);
        char *b = bufs[next++ % 8];
        snprintf(b, sizeof(bufs[0]), "%s/%s", tmp, rel);
        return b;
}

static void put(const char *path, const char *content)
{
        char *dir = xstrdup(path);
        *strrchr(dir, '/') = '\0';
        assert_int_equal(fs_mkdir_p(dir, 0755), 0);
        free(dir);
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(content, f);
        fclose(f);
}

static void usb_dev(const char *dir, const char *vendor, const char *product, const char *serial,
                    int bus, int dev)
{
        char buf[16];
        put(tpath("%s/idVendor", dir), vendor);
        put(tpath("%s/idProduct", dir), product);
        if (serial)
                put(tpath("%s/serial", dir), serial);
        snprintf(buf, sizeof(buf), "%d\n", bus);
        put(tpath("%s/busnum", dir), buf);
        snprintf(buf, sizeof(buf), "%d\n", dev);
        put(tpath("%s/devnum", dir), buf);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static int setup(void **state)
{
        snprintf(tmp, sizeof(tmp), "/tmp/devlet-hostdev-XXXXXX");
        assert_non_null(mkdtemp(tmp));
        return 0;
}

static int teardown(void **state)
{
        nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        return 0;
}

/* ---- helpers ---- */

static struct dev_backend *create_ok(uv_loop_t *loop, const struct devlet_config *c)
{
        struct dev_backend *b = NULL;
        struct diag err = { 0 };
        int rc = hostdev_backend_ops.create(loop, c, &b, &err);
        if (rc < 0)
                fail_msg("create failed: %s", err.message);
        assert_non_null(b);
        return b;
}

static struct dev_resource *res(struct dev_backend *b, size_t i)
{
        size_t n = 0;
        struct dev_resource **v = hostdev_backend_ops.resources(b, &n);
        assert_true(i < n);
        return v[i];
}

static const char *ids(const struct dev_resource *r)
{
        static char buf[1024];
        buf[0] = '\0';
        for (size_t i = 0; i < r->n_devices; i++) {
                if (i)
                        strcat(buf, " ");
                strcat(buf, r->devices[i].id);
                if (r->devices[i].health != DEV_HEALTHY)
                        strcat(buf, "!");
        }
        return buf;
}

static int changes;
static void on_change(struct dev_resource *r, void *ud)
{
        changes++;
}

static void on_deadline(uv_timer_t *t)
{
        *(bool *)t->data = true;
}

/* Runs the loop until changes reaches want or a generous deadline passes. */
static void wait_changes(uv_loop_t *loop, int want)
{
        bool expired = false;
        uv_timer_t t;
        uv_timer_init(loop, &t);
        t.data = &expired;
        uv_timer_start(&t, on_deadline, 10000, 0);
        while (changes < want && !expired)
                uv_run(loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *)&t, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        assert_int_equal(changes, want);
}

static void destroy_and_drain(uv_loop_t *loop, struct dev_backend *b)
{
        hostdev_backend_ops.destroy(b);
        if (loop) {
                uv_run(loop, UV_RUN_DEFAULT);
                assert_int_equal(uv_loop_close(loop), 0);
        }
}

/* ---- tests ---- */

static void test_nothing_configured(void **state)
{
        struct devlet_config *c = cfg_new(tmp);
        struct dev_backend *b = (struct dev_backend *)&b;
        struct diag err = { 0 };
        assert_int_equal(hostdev_backend_ops.create(NULL, c, &b, &err), 0);
        assert_null(b);
        assert_string_equal(err.message, "");
        cfg_free(c);
}

static void test_invalid_config(void **state)
{
        struct devlet_config *c = cfg_new(tmp);
        struct hostdev_group_cfg *g = cfg_group(cfg_device(c, "x"), 0);
        cfg_path(g, HOSTDEV_PATH_DEVICE, "/dev/null", NULL);
        struct dev_backend *b = NULL;
        struct diag err = { 0 };
        g->count = 1; /* count's bounds are the config module's alone */
        free(g->paths[0].path);
        g->paths[0].path = xstrdup("relative/path");
        assert_int_equal(hostdev_backend_ops.create(NULL, c, &b, &err), -EINVAL);
        assert_non_null(strstr(err.message, "absolute"));
        err = (struct diag){ 0 };
        g->paths[0].path[0] = '/';
        cfg_group(cfg_device(c, "x"), 1);
        assert_int_equal(hostdev_backend_ops.create(NULL, c, &b, &err), -EINVAL);
        assert_non_null(strstr(err.message, "duplicate"));
        cfg_free(c);
}

static void test_glob(void **state)
{
        put(tpath("dev/ttyUSB1"), "");
        put(tpath("dev/ttyUSB0"), "");
        put(tpath("dev/ttyACM0"), "");
        put(tpath("dev/serial-ctl"), "");
        struct devlet_config *c = cfg_new(tmp);
        struct hostdev_group_cfg *g = cfg_group(cfg_device(c, "serial"), 1);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/ttyUSB*"), NULL);
        struct hostdev_path_cfg *ctl = cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/serial-ctl"),
                                                "/dev/ctl");
        strcpy(ctl->permissions, "r");
        /* mountPath on a glob: each instance sees its own match there */
        g = cfg_group(cfg_device(c, "modem"), 1);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/tty[UA]*0"), "/dev/modem");
        c->hostdev.domain = xstrdup("example.com");

        struct dev_backend *b = create_ok(NULL, c);
        struct dev_resource *r = res(b, 0);
        assert_string_equal(r->name, "example.com/serial");
        assert_string_equal(ids(r), "ttyUSB0 ttyUSB1");
        assert_false(r->preferred_allocation);
        const struct dev_device *d = dev_resource_find(r, "ttyUSB1");
        assert_int_equal(d->n_nodes, 2);
        assert_int_equal(d->n_mounts, 0);
        assert_string_equal(d->nodes[0].host_path, tpath("dev/ttyUSB1"));
        assert_string_equal(d->nodes[0].container_path, tpath("dev/ttyUSB1"));
        assert_string_equal(d->nodes[0].permissions, "rw");
        assert_string_equal(d->nodes[1].host_path, tpath("dev/serial-ctl"));
        assert_string_equal(d->nodes[1].container_path, "/dev/ctl");
        assert_string_equal(d->nodes[1].permissions, "r");
        assert_int_equal(d->numa_node, -1);

        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        char id0[] = "ttyUSB0", id1[] = "ttyUSB1";
        char *two[] = { id0, id1 };
        assert_int_equal(dev_allocate(r, two, 2, &a, &err), 0);
        assert_int_equal(a.n_nodes, 3); /* serial-ctl once */
        dev_alloc_release(&a);

        r = res(b, 1);
        assert_string_equal(r->name, "example.com/modem");
        assert_string_equal(ids(r), "ttyACM0 ttyUSB0");
        d = dev_resource_find(r, "ttyACM0");
        assert_string_equal(d->nodes[0].host_path, tpath("dev/ttyACM0"));
        assert_string_equal(d->nodes[0].container_path, "/dev/modem");
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

static void test_glob_basename_collision(void **state)
{
        put(tpath("c/a/tty"), "");
        put(tpath("c/b/tty"), "");
        struct devlet_config *c = cfg_new(tmp);
        struct hostdev_group_cfg *g = cfg_group(cfg_device(c, "tty"), 2);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("c/*/tty"), NULL);
        struct dev_backend *b = create_ok(NULL, c);
        struct dev_resource *r = res(b, 0);
        assert_string_equal(ids(r), "tty-0 tty-1 tty_2-0 tty_2-1");
        assert_string_equal(dev_resource_find(r, "tty_2-1")->nodes[0].host_path,
                            tpath("c/b/tty"));
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

static void test_count_and_groups(void **state)
{
        put(tpath("dev/fuse"), "");
        put(tpath("dev/kvm"), "");
        struct devlet_config *c = cfg_new(tmp);
        cfg_path(cfg_group(cfg_device(c, "fuse"), 10), HOSTDEV_PATH_DEVICE, tpath("dev/fuse"),
                 "/dev/fuse");
        struct hostdev_device_cfg *v = cfg_device(c, "virt");
        cfg_path(cfg_group(v, 1), HOSTDEV_PATH_DEVICE, tpath("dev/kvm"), NULL);
        cfg_path(cfg_group(v, 2), HOSTDEV_PATH_DEVICE, tpath("dev/fuse"), NULL);

        struct dev_backend *b = create_ok(NULL, c);
        struct dev_resource *r = res(b, 0);
        assert_string_equal(r->name, "devlet.io/fuse");
        assert_string_equal(ids(r), "fuse-0 fuse-1 fuse-2 fuse-3 fuse-4 fuse-5 fuse-6 fuse-7 "
                                    "fuse-8 fuse-9");
        assert_int_equal(dev_resource_healthy(r), 10);
        for (size_t i = 0; i < r->n_devices; i++) {
                assert_int_equal(r->devices[i].n_nodes, 1);
                assert_string_equal(r->devices[i].nodes[0].host_path, tpath("dev/fuse"));
                assert_string_equal(r->devices[i].nodes[0].container_path, "/dev/fuse");
        }
        assert_string_equal(ids(res(b, 1)), "virt-g0 virt-g1-0 virt-g1-1");
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

static void test_optional_and_missing(void **state)
{
        put(tpath("dev/present"), "");
        struct devlet_config *c = cfg_new(tmp);
        struct hostdev_group_cfg *g = cfg_group(cfg_device(c, "ok"), 1);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/present"), NULL);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/absent"), NULL)->optional = true;
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/absent*"), NULL)->optional = true;
        g = cfg_group(cfg_device(c, "broken"), 1);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/present"), NULL);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/absent"), NULL);
        g = cfg_group(cfg_device(c, "noglob"), 1);
        cfg_path(g, HOSTDEV_PATH_DEVICE, tpath("dev/none*"), NULL);

        struct dev_backend *b = create_ok(NULL, c);
        struct dev_resource *r = res(b, 0);
        assert_string_equal(ids(r), "ok");
        assert_int_equal(r->devices[0].n_nodes, 1); /* the missing optional path is left out */
        r = res(b, 1);
        assert_string_equal(ids(r), "broken!");
        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        char id[] = "broken";
        char *one[] = { id };
        assert_int_equal(dev_allocate(r, one, 1, &a, &err), -EINVAL);
        assert_string_equal(err.message, "device \"broken\" is unhealthy");
        assert_string_equal(ids(res(b, 2)), ""); /* a glob without matches: no devices */
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

static void test_mount(void **state)
{
        put(tpath("run/agent.sock"), "");
        put(tpath("etc/agent.conf"), "");
        struct devlet_config *c = cfg_new(tmp);
        struct hostdev_group_cfg *g = cfg_group(cfg_device(c, "agent"), 3);
        cfg_path(g, HOSTDEV_PATH_MOUNT, tpath("run/agent.sock"), "/run/agent.sock");
        cfg_path(g, HOSTDEV_PATH_MOUNT, tpath("etc/agent.conf"), NULL)->read_only = true;
        struct dev_backend *b = create_ok(NULL, c);
        struct dev_resource *r = res(b, 0);
        assert_string_equal(ids(r), "agent-0 agent-1 agent-2");
        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        char id[] = "agent-2";
        char *one[] = { id };
        assert_int_equal(dev_allocate(r, one, 1, &a, &err), 0);
        assert_int_equal(a.n_nodes, 0);
        assert_int_equal(a.n_mounts, 2);
        assert_string_equal(a.mounts[0].host_path, tpath("run/agent.sock"));
        assert_string_equal(a.mounts[0].container_path, "/run/agent.sock");
        assert_false(a.mounts[0].read_only);
        assert_string_equal(a.mounts[1].container_path, tpath("etc/agent.conf"));
        assert_true(a.mounts[1].read_only);
        dev_alloc_release(&a);
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

static void test_usb(void **state)
{
        /* a webcam behind a PCI host controller on NUMA node 1 */
        const char *ctl = "sys/devices/pci0000:00/0000:00:14.0";
        put(tpath("%s/numa_node", ctl), "1\n");
        usb_dev("sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2", "046d", "0825", "ABC 123",
                1, 5);
        assert_int_equal(fs_mkdir_p(tpath("sys/bus/usb/devices"), 0755), 0);
        assert_int_equal(symlink(tpath("%s/usb1/1-1/1-1.2", ctl),
                                 tpath("sys/bus/usb/devices/1-1.2")), 0);
        usb_dev("sys/bus/usb/devices/2-1", "046d", "0825", NULL, 2, 17);  /* no serial */
        usb_dev("sys/bus/usb/devices/2-2", "046d", "c52b", "XYZ", 2, 18); /* other product */
        usb_dev("sys/bus/usb/devices/3-1", "1234", "5678", "S1", 3, 2);
        usb_dev("sys/bus/usb/devices/3-2", "1234", "5678", "S2", 3, 3);
        put(tpath("sys/bus/usb/devices/1-1.2:1.0/bInterfaceClass"), "0e\n");
        put(tpath("dev/bus/usb/001/005"), "");
        put(tpath("dev/bus/usb/002/017"), "");
        put(tpath("dev/bus/usb/003/003"), "");

        struct devlet_config *c = cfg_new(tmp);
        cfg_usb(cfg_group(cfg_device(c, "webcam"), 1), "046d", "0825", NULL);
        cfg_usb(cfg_group(cfg_device(c, "key"), 2), "1234", "5678", "S2");

        struct dev_backend *b = create_ok(NULL, c);
        struct dev_resource *r = res(b, 0);
        assert_string_equal(ids(r), "usb-046d-0825-ABC_123 usb-046d-0825-2-1");
        const struct dev_device *d = &r->devices[0];
        assert_int_equal(d->n_nodes, 1);
        assert_string_equal(d->nodes[0].host_path, tpath("dev/bus/usb/001/005"));
        assert_string_equal(d->nodes[0].container_path, "/dev/bus/usb/001/005");
        assert_int_equal(d->numa_node, 1);
        d = &r->devices[1];
        assert_string_equal(d->nodes[0].host_path, tpath("dev/bus/usb/002/017"));
        assert_string_equal(d->nodes[0].container_path, "/dev/bus/usb/002/017");
        assert_int_equal(d->numa_node, -1);

        r = res(b, 1);
        assert_string_equal(ids(r), "usb-1234-5678-S2-0 usb-1234-5678-S2-1");
        assert_string_equal(r->devices[1].nodes[0].container_path, "/dev/bus/usb/003/003");
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

static void test_numa(void **state)
{
        struct stat st;
        assert_int_equal(stat("/dev/null", &st), 0);
        assert_true(S_ISCHR(st.st_mode));
        put(tpath("sys/dev/char/%u:%u/device/numa_node", major(st.st_rdev), minor(st.st_rdev)),
            "1\n");
        assert_int_equal(stat("/dev/zero", &st), 0);
        put(tpath("sys/dev/char/%u:%u/device/numa_node", major(st.st_rdev), minor(st.st_rdev)),
            "-1\n");
        struct devlet_config *c = cfg_new(tmp);
        cfg_path(cfg_group(cfg_device(c, "null"), 1), HOSTDEV_PATH_DEVICE, "/dev/null", NULL);
        cfg_path(cfg_group(cfg_device(c, "zero"), 1), HOSTDEV_PATH_DEVICE, "/dev/zero", NULL);
        cfg_path(cfg_group(cfg_device(c, "full"), 1), HOSTDEV_PATH_DEVICE, "/dev/full", NULL);
        struct dev_backend *b = create_ok(NULL, c);
        assert_int_equal(res(b, 0)->devices[0].numa_node, 1);
        assert_int_equal(res(b, 1)->devices[0].numa_node, -1);
        assert_int_equal(res(b, 2)->devices[0].numa_node, -1); /* nothing in sysfs */
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

static void test_hotplug_glob(void **state)
{
        put(tpath("dev/hp0"), "");
        put(tpath("dev/fixed"), "");
        struct devlet_config *c = cfg_new(tmp);
        cfg_path(cfg_group(cfg_device(c, "hp"), 1), HOSTDEV_PATH_DEVICE, tpath("dev/hp*"), NULL);
        cfg_path(cfg_group(cfg_device(c, "fixed"), 2), HOSTDEV_PATH_DEVICE, tpath("dev/fixed"),
                 NULL);
        uv_loop_t loop;
        uv_loop_init(&loop);
        struct dev_backend *b = create_ok(&loop, c);
        struct dev_resource *r = res(b, 0);
        r->on_change = on_change;
        res(b, 1)->on_change = on_change;
        changes = 0;
        assert_string_equal(ids(r), "hp0");

        put(tpath("dev/hp1"), "");
        wait_changes(&loop, 1);
        assert_string_equal(ids(r), "hp0 hp1");

        assert_int_equal(unlink(tpath("dev/hp0")), 0);
        wait_changes(&loop, 2);
        assert_string_equal(ids(r), "hp0! hp1");

        put(tpath("dev/hp0"), "");
        wait_changes(&loop, 3);
        assert_string_equal(ids(r), "hp0 hp1");

        /* a plain path: both IDs go unhealthy and come back, one notification each */
        assert_int_equal(unlink(tpath("dev/fixed")), 0);
        wait_changes(&loop, 4);
        assert_string_equal(ids(res(b, 1)), "fixed-0! fixed-1!");
        put(tpath("dev/fixed"), "");
        wait_changes(&loop, 5);
        assert_string_equal(ids(res(b, 1)), "fixed-0 fixed-1");
        assert_string_equal(ids(r), "hp0 hp1");

        destroy_and_drain(&loop, b);
        cfg_free(c);
}

static void test_hotplug_usb(void **state)
{
        usb_dev("sys/bus/usb/devices/1-1", "abcd", "0001", "A", 1, 2);
        put(tpath("dev/bus/usb/001/002"), "");
        struct devlet_config *c = cfg_new(tmp);
        cfg_usb(cfg_group(cfg_device(c, "tag"), 1), "abcd", "0001", NULL);
        uv_loop_t loop;
        uv_loop_init(&loop);
        struct dev_backend *b = create_ok(&loop, c);
        struct dev_resource *r = res(b, 0);
        r->on_change = on_change;
        changes = 0;
        assert_string_equal(ids(r), "usb-abcd-0001-A");

        /* plugged in: the node appears, then the sysfs directory, complete */
        put(tpath("dev/bus/usb/001/003"), "");
        usb_dev("staging/1-2", "abcd", "0001", "B", 1, 3);
        assert_int_equal(rename(tpath("staging/1-2"), tpath("sys/bus/usb/devices/1-2")), 0);
        wait_changes(&loop, 1);
        assert_string_equal(ids(r), "usb-abcd-0001-A usb-abcd-0001-B");
        assert_string_equal(r->devices[0].model->name, "tag-0");
        assert_string_equal(r->devices[1].model->name, "tag-1");

        /* unplugged: the node goes away */
        assert_int_equal(unlink(tpath("dev/bus/usb/001/002")), 0);
        wait_changes(&loop, 2);
        assert_string_equal(ids(r), "usb-abcd-0001-A! usb-abcd-0001-B");

        destroy_and_drain(&loop, b);
        cfg_free(c);
}

static void test_rescan_timer(void **state)
{
        /* <tmp>/late does not exist yet, so nothing can watch it: only the
         * rescan timer sees the device arrive */
        struct devlet_config *c = cfg_new(tmp);
        c->rescan_interval_ms = 20;
        cfg_path(cfg_group(cfg_device(c, "late"), 1), HOSTDEV_PATH_DEVICE, tpath("late/dev*"),
                 NULL);
        uv_loop_t loop;
        uv_loop_init(&loop);
        struct dev_backend *b = create_ok(&loop, c);
        struct dev_resource *r = res(b, 0);
        r->on_change = on_change;
        changes = 0;
        assert_string_equal(ids(r), "");

        put(tpath("late/dev0"), "");
        wait_changes(&loop, 1);
        assert_string_equal(ids(r), "dev0");

        destroy_and_drain(&loop, b);
        cfg_free(c);
}

static void test_config_copied(void **state)
{
        put(tpath("dev/x"), "");
        struct devlet_config *c = cfg_new(tmp);
        c->rescan_interval_ms = 1000;
        cfg_path(cfg_group(cfg_device(c, "x"), 1), HOSTDEV_PATH_DEVICE, tpath("dev/x"), NULL);
        uv_loop_t loop;
        uv_loop_init(&loop);
        struct dev_backend *b = create_ok(&loop, c);
        cfg_free(c); /* the backend keeps its own copy */
        assert_string_equal(ids(res(b, 0)), "x");
        destroy_and_drain(&loop, b);
}

static const char *mattr_s(const struct dev_device *d, const char *name)
{
        const struct dev_attr *a = dev_model_attr(d->model, name);
        if (!a)
                return NULL;
        assert_int_equal(a->type, DEV_ATTR_STRING);
        return a->s;
}

/* hostdev.devlet.io: one DRA device per instance, named after the
 * resource's short name and the instance's index, carried by every ID of
 * the instance; path, major/minor of its first node, USB IDs, resource. */
static void test_dra_model(void **state)
{
        bool root = geteuid() == 0;
        if (root) {
                assert_int_equal(fs_mkdir_p(tpath("dev"), 0755), 0);
                assert_int_equal(mknod(tpath("dev/fuse"), S_IFCHR | 0666, makedev(10, 229)), 0);
        } else {
                put(tpath("dev/fuse"), "");
        }
        put(tpath("dev/ttyX0"), "");
        put(tpath("dev/ttyX1"), "");
        usb_dev("sys/bus/usb/devices/1-3", "046d", "0825", "CAM1", 1, 7);
        put(tpath("dev/bus/usb/001/007"), "");
        put(tpath("dev/odd"), "");

        struct devlet_config *c = cfg_new(tmp);
        cfg_path(cfg_group(cfg_device(c, "fuse"), 3), HOSTDEV_PATH_DEVICE, tpath("dev/fuse"), "/dev/fuse");
        cfg_path(cfg_group(cfg_device(c, "tty"), 1), HOSTDEV_PATH_DEVICE, tpath("dev/ttyX*"), NULL);
        cfg_usb(cfg_group(cfg_device(c, "webcam"), 1), "046d", "0825", NULL);
        /* two names, one DNS label */
        cfg_path(cfg_group(cfg_device(c, "my_dev"), 1), HOSTDEV_PATH_DEVICE, tpath("dev/odd"), NULL);
        cfg_path(cfg_group(cfg_device(c, "My.Dev"), 1), HOSTDEV_PATH_DEVICE, tpath("dev/odd"), NULL);

        struct dev_backend *b = create_ok(NULL, c);
        assert_string_equal(hostdev_backend_ops.dra_driver, "hostdev.devlet.io");
        struct dev_resource *r = res(b, 0);
        assert_string_equal(ids(r), "fuse-0 fuse-1 fuse-2");
        for (size_t i = 0; i < 3; i++) {
                const struct dev_device *d = &r->devices[i];
                assert_non_null(d->model);
                assert_string_equal(d->model->name, "fuse-0"); /* replicas of one device */
                assert_string_equal(mattr_s(d, "path"), tpath("dev/fuse"));
                assert_string_equal(mattr_s(d, "resource"), r->name);
                const struct dev_attr *major = dev_model_attr(d->model, "major");
                if (root) {
                        assert_int_equal(major->type, DEV_ATTR_INT);
                        assert_int_equal(major->i, 10);
                        assert_int_equal(dev_model_attr(d->model, "minor")->i, 229);
                } else {
                        assert_null(major); /* a regular file stands in: no numbers */
                }
        }
        r = res(b, 1);
        assert_string_equal(ids(r), "ttyX0 ttyX1");
        assert_string_equal(r->devices[0].model->name, "tty-0");
        assert_string_equal(r->devices[1].model->name, "tty-1");
        assert_string_equal(mattr_s(&r->devices[1], "path"), tpath("dev/ttyX1"));
        assert_null(dev_model_attr(r->devices[1].model, "major"));

        r = res(b, 2);
        const struct dev_device *d = &r->devices[0];
        assert_string_equal(d->model->name, "webcam-0");
        assert_string_equal(mattr_s(d, "usbVendorID"), "046d");
        assert_string_equal(mattr_s(d, "usbProductID"), "0825");
        assert_string_equal(mattr_s(d, "path"), tpath("dev/bus/usb/001/007"));

        assert_string_equal(res(b, 3)->devices[0].model->name, "my-dev-0");
        assert_string_equal(res(b, 4)->devices[0].model->name, "my-dev-0-2");
        destroy_and_drain(NULL, b);
        cfg_free(c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                T(test_nothing_configured),
                T(test_invalid_config),
                T(test_glob),
                T(test_glob_basename_collision),
                T(test_count_and_groups),
                T(test_optional_and_missing),
                T(test_mount),
                T(test_usb),
                T(test_numa),
                T(test_hotplug_glob),
                T(test_hotplug_usb),
                T(test_rescan_timer),
                T(test_config_copied),
                T(test_dra_model),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
