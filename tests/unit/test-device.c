/* Unit tests for devices/device.c: allocation answers, generic Allocate and
 * generic GetPreferredAllocation, the backend table, the DRA model (its
 * value rules, names, JSON) and devices/pci.c's PCIe root. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/device.h"
#include "devices/hostdev/hostdev.h"
#include "devices/pci.h"


/* "a b c" -> a strv (NULL for ""); tests spell ID lists this way. */
static char **split(const char *s)
{
        char **v = xcalloc(1, sizeof(char *));
        char *copy = xstrdup(s), *save = NULL;
        for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
                v = strv_push(v, t);
        free(copy);
        return v;
}

static void test_alloc_dedup(void **state)
{
        struct dev_alloc a = { 0 };
        dev_alloc_add_node(&a, "/dev/a", "/dev/x", "rw");
        dev_alloc_add_node(&a, "/dev/b", "/dev/x", "r"); /* same container path: dropped */
        dev_alloc_add_node(&a, "/dev/a", "/dev/y", NULL);
        assert_int_equal(a.n_nodes, 2);
        assert_string_equal(a.nodes[0].host_path, "/dev/a");
        assert_string_equal(a.nodes[0].permissions, "rw");
        assert_string_equal(a.nodes[1].container_path, "/dev/y");
        assert_string_equal(a.nodes[1].permissions, "rw");

        dev_alloc_add_mount(&a, "/h1", "/c", true);
        dev_alloc_add_mount(&a, "/h2", "/c", false);
        dev_alloc_add_mount(&a, "/h2", "/d", false);
        assert_int_equal(a.n_mounts, 2);
        assert_string_equal(a.mounts[0].host_path, "/h1");
        assert_true(a.mounts[0].read_only);
        assert_false(a.mounts[1].read_only);

        dev_alloc_set_env(&a, "A", "1");
        dev_alloc_set_env(&a, "B", "2");
        dev_alloc_set_env(&a, "A", "3"); /* last value wins */
        assert_int_equal(a.n_envs, 2);
        assert_string_equal(a.envs[0].key, "A");
        assert_string_equal(a.envs[0].value, "3");
        assert_string_equal(a.envs[1].value, "2");

        dev_alloc_set_annotation(&a, "k", "v1");
        dev_alloc_set_annotation(&a, "k", "v2");
        assert_int_equal(a.n_annotations, 1);
        assert_string_equal(a.annotations[0].value, "v2");

        dev_alloc_add_cdi(&a, "devlet.io/fuse=fuse-0");
        dev_alloc_add_cdi(&a, "devlet.io/fuse=fuse-1");
        dev_alloc_add_cdi(&a, "devlet.io/fuse=fuse-0");
        assert_int_equal(strv_len(a.cdi_devices), 2);

        dev_alloc_release(&a);
        assert_null(a.nodes);
        assert_int_equal(a.n_nodes, 0);
        dev_alloc_release(&a); /* idempotent */
}

/* d0..d5: NUMA 0,0,1,1,-1,1; d5 unhealthy.  Each has its own node and a
 * shared mount. */
static struct dev_resource *make_resource(void)
{
        static const int numa[] = { 0, 0, 1, 1, -1, 1 };
        struct dev_resource *r = dev_resource_new("devlet.io/test");
        for (int i = 0; i < 6; i++) {
                char id[16], path[32];
                snprintf(id, sizeof(id), "d%d", i);
                snprintf(path, sizeof(path), "/dev/test%d", i);
                struct dev_device *d = dev_resource_add(r, id);
                assert_int_equal(d->health, DEV_HEALTHY);
                d->numa_node = numa[i];
                dev_device_add_node(d, path, path, "rw");
                dev_device_add_mount(d, "/lib/test", "/lib/test", true);
        }
        dev_resource_find(r, "d5")->health = DEV_UNHEALTHY;
        return r;
}

static void test_resource_basics(void **state)
{
        struct dev_resource *r = make_resource();
        assert_string_equal(r->name, "devlet.io/test");
        assert_int_equal(r->n_devices, 6);
        assert_int_equal(dev_resource_healthy(r), 5);
        assert_null(dev_resource_find(r, "nope"));
        assert_string_equal(dev_resource_find(r, "d3")->id, "d3");
        assert_int_equal(dev_resource_find(r, "d0")->numa_node, 0);
        dev_resource_free(r);
        dev_resource_free(NULL);
}

static int notified;
static void on_change(struct dev_resource *r, void *ud)
{
        assert_ptr_equal(ud, &notified);
        notified++;
}

static void test_notify(void **state)
{
        struct dev_resource *r = dev_resource_new("devlet.io/n");
        notified = 0;
        dev_resource_notify(r); /* no observer: nothing happens */
        r->on_change = on_change;
        r->on_change_ud = &notified;
        dev_resource_notify(r);
        dev_resource_notify(r);
        assert_int_equal(notified, 2);
        dev_resource_free(r);
}

static void on_watch(struct dev_resource *r, void *ud)
{
        ++*(int *)ud;
}

/* Extra observers run after on_change, each with its own data, until
 * unwatched; the resource frees what remains. */
static void test_watch(void **state)
{
        struct dev_resource *r = dev_resource_new("devlet.io/w");
        int a = 0, b = 0;
        notified = 0;
        r->on_change = on_change;
        r->on_change_ud = &notified;
        dev_resource_watch(r, on_watch, &a);
        dev_resource_watch(r, on_watch, &b);
        dev_resource_notify(r);
        assert_int_equal(notified, 1);
        assert_int_equal(a, 1);
        assert_int_equal(b, 1);
        dev_resource_unwatch(r, on_watch, &a);
        dev_resource_unwatch(r, on_watch, &a); /* not watching: nothing */
        dev_resource_notify(r);
        assert_int_equal(notified, 2);
        assert_int_equal(a, 1);
        assert_int_equal(b, 2);
        dev_resource_free(r); /* with b still watching */
}

static void test_allocate_one(void **state)
{
        struct dev_resource *r = make_resource();
        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        _cleanup_strv_free_ char **ids = split("d1");
        assert_int_equal(dev_allocate(r, ids, 1, &a, &err), 0);
        assert_string_equal(err.message, "");
        assert_int_equal(a.n_nodes, 1);
        assert_string_equal(a.nodes[0].host_path, "/dev/test1");
        assert_string_equal(a.nodes[0].container_path, "/dev/test1");
        assert_string_equal(a.nodes[0].permissions, "rw");
        assert_int_equal(a.n_mounts, 1);
        assert_true(a.mounts[0].read_only);
        dev_alloc_release(&a);
        dev_resource_free(r);
}

static void test_allocate_many(void **state)
{
        struct dev_resource *r = make_resource();
        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        _cleanup_strv_free_ char **ids = split("d3 d0 d4");
        assert_int_equal(dev_allocate(r, ids, 3, &a, &err), 0);
        assert_int_equal(a.n_nodes, 3);
        assert_string_equal(a.nodes[0].host_path, "/dev/test3");
        assert_string_equal(a.nodes[1].host_path, "/dev/test0");
        assert_string_equal(a.nodes[2].host_path, "/dev/test4");
        assert_int_equal(a.n_mounts, 1); /* shared mount merged once */
        dev_alloc_release(&a);
        dev_resource_free(r);
}

static void test_allocate_errors(void **state)
{
        struct dev_resource *r = make_resource();
        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        _cleanup_strv_free_ char **unknown = split("d0 gpu-7");
        assert_int_equal(dev_allocate(r, unknown, 2, &a, &err), -EINVAL);
        assert_string_equal(err.message, "unknown device ID \"gpu-7\"");
        assert_int_equal(a.n_nodes, 0); /* untouched on failure */
        err = (struct diag){ 0 };
        _cleanup_strv_free_ char **sick = split("d1 d5");
        assert_int_equal(dev_allocate(r, sick, 2, &a, &err), -EINVAL);
        assert_string_equal(err.message, "device \"d5\" is unhealthy");
        assert_int_equal(a.n_nodes, 0);
        dev_alloc_release(&a);
        dev_resource_free(r);
}

static int custom_allocate(struct dev_resource *r, char *const *ids, size_t n,
                           struct dev_alloc *out, struct diag *diag)
{
        dev_alloc_set_env(out, "CUSTOM", ids[0]);
        return 0;
}

static int custom_preferred(struct dev_resource *r, char *const *available, size_t n_available,
                            char *const *must, size_t n_must, size_t size, char ***out)
{
        *out = strv_push(NULL, "custom");
        return 0;
}

static void test_dispatch_ops(void **state)
{
        static const struct dev_resource_ops ops = { .allocate = custom_allocate,
                                                     .preferred = custom_preferred };
        struct dev_resource *r = make_resource();
        r->ops = &ops;
        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        _cleanup_strv_free_ char **ids = split("anything");
        assert_int_equal(dev_allocate(r, ids, 1, &a, &err), 0);
        assert_int_equal(a.n_envs, 1);
        assert_string_equal(a.envs[0].value, "anything");
        assert_int_equal(a.n_nodes, 0);
        char **out = NULL;
        assert_int_equal(dev_preferred(r, ids, 1, NULL, 0, 1, &out), 0);
        assert_string_equal(out[0], "custom");
        strv_free(out);
        dev_alloc_release(&a);
        dev_resource_free(r);
}

/* Runs the generic choice and compares with a space-separated expectation. */
static void expect_preferred(struct dev_resource *r, char **avail, char **must, size_t size,
                             const char *want)
{
        char **out = NULL;
        assert_int_equal(dev_preferred(r, avail, strv_len(avail), must, strv_len(must), size, &out),
                         0);
        assert_non_null(out);
        char got[256] = "";
        for (size_t i = 0; out[i]; i++) {
                if (i)
                        strcat(got, " ");
                strcat(got, out[i]);
        }
        assert_string_equal(got, want);
        strv_free(out);
}

static void test_preferred_must_and_size(void **state)
{
        struct dev_resource *r = make_resource();
        _cleanup_strv_free_ char **all = split("d0 d1 d2 d3 d4 d5");
        /* must first, then its NUMA node (1: d3; d5 is unhealthy), then the rest in order */
        _cleanup_strv_free_ char **must = split("d2");
        expect_preferred(r, all, must, 3, "d2 d3 d0");
        expect_preferred(r, all, must, 1, "d2");
        /* size larger than possible: every healthy one, once */
        expect_preferred(r, all, must, 10, "d2 d3 d0 d1 d4");
        /* size below the must count: the must IDs only */
        _cleanup_strv_free_ char **two = split("d4 d0");
        expect_preferred(r, all, two, 1, "d4 d0");
        /* size 0, nothing required: empty answer */
        expect_preferred(r, all, NULL, 0, "");
        dev_resource_free(r);
}

static void test_preferred_numa(void **state)
{
        struct dev_resource *r = make_resource();
        _cleanup_strv_free_ char **all = split("d4 d0 d2 d1 d3");
        /* must d0 (node 0): d1 joins it before the earlier-listed d4 and d2 */
        _cleanup_strv_free_ char **must0 = split("d0");
        expect_preferred(r, all, must0, 2, "d0 d1");
        /* must on two nodes: both nodes preferred, the unknown-node d4 last */
        _cleanup_strv_free_ char **mixed = split("d0 d2");
        expect_preferred(r, all, mixed, 4, "d0 d2 d1 d3");
        /* must with unknown NUMA: no preference, order given */
        _cleanup_strv_free_ char **unk = split("d4");
        expect_preferred(r, all, unk, 3, "d4 d0 d2");
        /* nothing required: the first node that holds size on its own */
        expect_preferred(r, all, NULL, 2, "d0 d1");
        _cleanup_strv_free_ char **rev = split("d3 d2 d1 d0");
        expect_preferred(r, rev, NULL, 2, "d3 d2");
        /* no node holds 3: the fullest node, then the rest in order */
        dev_resource_find(r, "d1")->numa_node = 2;
        expect_preferred(r, all, NULL, 3, "d2 d3 d4");
        dev_resource_free(r);
}

static void test_preferred_skips(void **state)
{
        struct dev_resource *r = make_resource();
        /* unhealthy d5, unknown x and duplicates are skipped */
        _cleanup_strv_free_ char **avail = split("d5 x d3 d3 d1 d1");
        expect_preferred(r, avail, NULL, 4, "d3 d1");
        /* a duplicated must ID counts once */
        _cleanup_strv_free_ char **must = split("d1 d1");
        expect_preferred(r, avail, must, 2, "d1 d3");
        /* an unknown must ID is refused */
        char **out = NULL;
        _cleanup_strv_free_ char **bad = split("nope");
        assert_int_equal(dev_preferred(r, avail, 6, bad, 1, 2, &out), -EINVAL);
        assert_null(out);
        dev_resource_free(r);
}

static void test_backend_table(void **state)
{
        /* NVIDIA first: GPUs are the node's main resource, host devices follow */
        assert_string_equal(dev_backends[0]->name, "nvidia");
        size_t n = 0, hostdev = 0;
        while (dev_backends[n]) {
                if (dev_backends[n] == &hostdev_backend_ops)
                        hostdev = n;
                n++;
        }
        assert_true(n >= 2);
        assert_true(hostdev > 0);
        for (size_t i = 0; i < n; i++) {
                assert_non_null(dev_backends[i]->create);
                assert_non_null(dev_backends[i]->destroy);
                assert_non_null(dev_backends[i]->resources);
        }
        /* --backends offers "auto" and exactly the table's names, in order,
         * and config/ gets each family under the same name */
        const struct config_families *f = dev_config_families();
        assert_string_equal(f->choices[0], "auto");
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(f->choices[i + 1], dev_backends[i]->name);
                assert_non_null(f->v[i]);
                assert_string_equal(f->v[i]->name, dev_backends[i]->name);
        }
        assert_null(f->choices[n + 1]);
        assert_null(f->v[n]);
}

/* ---- the DRA model ---- */

static void label_is(const char *in, const char *want)
{
        _cleanup_free_ char *l = dev_model_label(in);
        assert_string_equal(l, want);
}

static void test_model_label(void **state)
{
        (void)state;
        label_is("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb");
        label_is("fuse", "fuse");
        label_is("--My__Dev..", "my-dev");
        label_is("1g.10gb+me", "1g-10gb-me");
        label_is("", "dev");
        label_is("+++", "dev");
        label_is(NULL, "dev");
        char long_in[200];
        memset(long_in, 'a', sizeof(long_in));
        long_in[62] = '-'; /* a dash right at the cut is dropped */
        long_in[199] = '\0';
        _cleanup_free_ char *l = dev_model_label(long_in);
        assert_true(strlen(l) <= 63);
        assert_true(l[strlen(l) - 1] != '-');
}

static const char *version_of(const char *text)
{
        static char buf[80];
        struct dev_model *m = dev_model_new("x");
        dev_model_version_loose(m, "v", text);
        const struct dev_attr *a = dev_model_attr(m, "v");
        if (a) {
                assert_int_equal(a->type, DEV_ATTR_VERSION);
                snprintf(buf, sizeof(buf), "%s", a->s);
        }
        dev_model_free(m);
        return a ? buf : NULL;
}

static void test_model_versions(void **state)
{
        (void)state;
        assert_string_equal(version_of("580.65.06"), "580.65.6");  /* NVIDIA's driver */
        assert_string_equal(version_of("535.104"), "535.104.0");
        assert_string_equal(version_of("12.8"), "12.8.0");         /* CUDA */
        assert_string_equal(version_of("9.0"), "9.0.0");           /* compute capability */
        assert_string_equal(version_of("6.19.14.31400000"), "6.19.14"); /* AMD's module */
        assert_string_equal(version_of("6.8.5"), "6.8.5");
        assert_string_equal(version_of("v1.2.3-rc1"), "1.2.3");
        assert_string_equal(version_of("7"), "7.0.0");
        assert_string_equal(version_of("00.0.000"), "0.0.0");
        assert_string_equal(version_of("12."), "12.0.0");
        assert_null(version_of(""));
        assert_null(version_of("abc"));
        assert_null(version_of(".1"));
        assert_null(version_of(NULL));
        assert_null(version_of("99999999999999999999.1")); /* past uint64 */
}

static const char *quantity_of(uint64_t v)
{
        static char buf[32];
        struct dev_model *m = dev_model_new("x");
        dev_model_capacity_int(m, "q", v);
        assert_int_equal(m->n_capacity, 1);
        snprintf(buf, sizeof(buf), "%s", m->capacity[0].value);
        dev_model_free(m);
        return buf;
}

/* resource.NewQuantity(v, resource.BinarySI).String() */
static void test_model_quantities(void **state)
{
        (void)state;
        assert_string_equal(quantity_of(0), "0");
        assert_string_equal(quantity_of(16), "16");
        assert_string_equal(quantity_of(1023), "1023");
        assert_string_equal(quantity_of(1024), "1Ki");
        assert_string_equal(quantity_of(1536), "1536");
        assert_string_equal(quantity_of(1536 * 1024), "1536Ki");
        assert_string_equal(quantity_of(81559ULL << 20), "81559Mi");
        assert_string_equal(quantity_of(80ULL << 30), "80Gi");
        assert_string_equal(quantity_of(192ULL << 30), "192Gi");
        assert_string_equal(quantity_of(1ULL << 60), "1Ei");
        assert_string_equal(quantity_of(1ULL << 62), "4Ei");
        assert_string_equal(quantity_of(85520809985ULL), "85520809985");
}

static void test_model_setters(void **state)
{
        (void)state;
        struct dev_model *m = dev_model_new("gpu-0");
        char v64[65], v65[66];
        memset(v64, 'x', 64);
        v64[64] = '\0';
        memset(v65, 'x', 65);
        v65[65] = '\0';
        dev_model_string(m, "ok", v64);
        dev_model_string(m, "long", v65); /* DRA refuses past 64: not set */
        dev_model_string(m, "empty", "");
        dev_model_string(m, "null", NULL);
        dev_model_version(m, "vlong", v65);
        assert_non_null(dev_model_attr(m, "ok"));
        assert_null(dev_model_attr(m, "long"));
        assert_null(dev_model_attr(m, "empty"));
        assert_null(dev_model_attr(m, "null"));
        assert_null(dev_model_attr(m, "vlong"));
        /* setting again replaces value and type, keeping one entry */
        dev_model_string(m, "k", "a");
        dev_model_int(m, "k", 5);
        assert_int_equal(m->n_attrs, 2);
        assert_int_equal(dev_model_attr(m, "k")->type, DEV_ATTR_INT);
        assert_null(dev_model_attr(m, "k")->s);
        dev_model_capacity(m, "memory", "1Gi");
        dev_model_capacity(m, "memory", "2Gi");
        assert_int_equal(m->n_capacity, 1);
        assert_string_equal(m->capacity[0].value, "2Gi");

        struct dev_model *c = dev_model_copy(m);
        assert_true(dev_model_equal(m, c));
        assert_true(dev_model_equal(NULL, NULL));
        assert_false(dev_model_equal(m, NULL));
        dev_model_bool(c, "extra", true);
        assert_false(dev_model_equal(m, c));
        dev_model_free(c);
        c = dev_model_copy(m);
        dev_model_int(c, "k", 6);
        assert_false(dev_model_equal(m, c));
        dev_model_free(c);
        c = dev_model_copy(m);
        dev_model_capacity(c, "memory", "3Gi");
        assert_false(dev_model_equal(m, c));
        dev_model_free(c);
        c = dev_model_copy(m);
        free(c->name);
        c->name = xstrdup("gpu-1");
        assert_false(dev_model_equal(m, c));
        dev_model_free(c);
        assert_null(dev_model_copy(NULL));
        dev_model_free(m);
        dev_model_free(NULL);
}

/* The shape of a resource.k8s.io/v1 ResourceSlice device. */
static void test_model_json(void **state)
{
        (void)state;
        struct dev_model *m = dev_model_new("gpu-0");
        dev_model_string(m, "productName", "NVIDIA H100 80GB HBM3");
        dev_model_version_loose(m, "driverVersion", "580.65.06");
        dev_model_int(m, DEV_ATTR_NUMA_NODE, 1);
        dev_model_bool(m, "virtual", false);
        dev_model_capacity_int(m, "memory", 80ULL << 30);
        json_t *j = dev_model_json(m);
        _cleanup_free_ char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "{\"attributes\":{"
                               "\"driverVersion\":{\"version\":\"580.65.6\"},"
                               "\"productName\":{\"string\":\"NVIDIA H100 80GB HBM3\"},"
                               "\"resource.kubernetes.io/numaNode\":{\"int\":1},"
                               "\"virtual\":{\"bool\":false}},"
                               "\"capacity\":{\"memory\":{\"value\":\"80Gi\"}},"
                               "\"name\":\"gpu-0\"}");
        json_decref(j);
        dev_model_free(m);
        /* empty maps stay (a device with no capacity) */
        m = dev_model_new("fuse-0");
        j = dev_model_json(m);
        _cleanup_free_ char *e = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(e, "{\"attributes\":{},\"capacity\":{},\"name\":\"fuse-0\"}");
        json_decref(j);
        dev_model_free(m);
}

static void test_pci_root(void **state)
{
        (void)state;
        char tmp[] = "/tmp/devlet-pci-XXXXXX";
        assert_non_null(mkdtemp(tmp));
        char sys[64], p[256], q[256], out[32];
        snprintf(sys, sizeof(sys), "%s/sys", tmp);
        /* as the kernel links them: relative, through bridges */
        snprintf(p, sizeof(p), "%s/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", sys);
        assert_int_equal(fs_mkdir_p(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/bus/pci/devices", sys);
        assert_int_equal(fs_mkdir_p(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:3b:00.0", sys);
        assert_int_equal(symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", p), 0);
        assert_int_equal(dev_pci_root(sys, "0000:3b:00.0", out, sizeof(out)), 0);
        assert_string_equal(out, "pci0000:3a");
        /* a trailing slash or ./.. in the root changes nothing */
        snprintf(q, sizeof(q), "%s/./sys/../sys/", tmp);
        assert_int_equal(dev_pci_root(q, "0000:3b:00.0", out, sizeof(out)), 0);
        assert_string_equal(out, "pci0000:3a");
        /* an absolute link works as well */
        snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:3a:00.0", sys);
        snprintf(q, sizeof(q), "%s/devices/pci0000:3a/0000:3a:00.0", sys);
        assert_int_equal(symlink(q, p), 0);
        assert_int_equal(dev_pci_root(sys, "0000:3a:00.0", out, sizeof(out)), 0);
        assert_string_equal(out, "pci0000:3a");
        assert_int_equal(dev_pci_root(sys, "0000:3a:00.0", out, 4), -ENAMETOOLONG);
        /* links that do not lead to a device below a root complex */
        snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:01:00.0", sys);
        assert_int_equal(symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", p), 0);
        assert_int_equal(dev_pci_root(sys, "0000:01:00.0", out, sizeof(out)), -EINVAL);
        snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:02:00.0", sys);
        assert_int_equal(symlink("../../../../elsewhere/0000:02:00.0", p), 0);
        assert_int_equal(dev_pci_root(sys, "0000:02:00.0", out, sizeof(out)), -EINVAL);
        assert_int_equal(dev_pci_root(sys, "0000:04:00.0", out, sizeof(out)), -ENOENT);
        /* BDFs Kubernetes would refuse */
        assert_int_equal(dev_pci_root(sys, "0000:3B:00.0", out, sizeof(out)), -EINVAL);
        assert_int_equal(dev_pci_root(sys, "00000000:3b:00.0", out, sizeof(out)), -EINVAL);
        assert_int_equal(dev_pci_root(sys, "../../x", out, sizeof(out)), -EINVAL);
        assert_true(dev_pci_bdf_valid("0000:3b:1f.7"));
        assert_false(dev_pci_bdf_valid("0000:3b:1f"));
        assert_false(dev_pci_bdf_valid(NULL));
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmp);
        assert_int_equal(system(cmd), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_alloc_dedup),
                cmocka_unit_test(test_resource_basics),
                cmocka_unit_test(test_notify),
                cmocka_unit_test(test_watch),
                cmocka_unit_test(test_allocate_one),
                cmocka_unit_test(test_allocate_many),
                cmocka_unit_test(test_allocate_errors),
                cmocka_unit_test(test_dispatch_ops),
                cmocka_unit_test(test_preferred_must_and_size),
                cmocka_unit_test(test_preferred_numa),
                cmocka_unit_test(test_preferred_skips),
                cmocka_unit_test(test_backend_table),
                cmocka_unit_test(test_model_label),
                cmocka_unit_test(test_model_versions),
                cmocka_unit_test(test_model_quantities),
                cmocka_unit_test(test_model_setters),
                cmocka_unit_test(test_model_json),
                cmocka_unit_test(test_pci_root),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
