/* Unit tests for devices/amd/: sysfs parsing, the inventory of each fake
 * tree (tests/mock-amd profiles), resource naming, preferred allocation,
 * health polls, labels and measurements. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"
#include "amd-fixture.h"
#include "devices/measure.h"
#include "test-util.h"

#ifndef STRV
#define STRV(...) ((const char *const[]){ __VA_ARGS__, NULL })
#endif


/* Generates profile under root/<profile>/{sys,dev}; returns the sysfs root. */
static char *tree(const char *profile)
{
        char *sys = amd_fixture_tree(amd_fixture_root, profile);
        assert_non_null(sys);
        return sys;
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static struct amd_inventory *load(const char *sys)
{
        struct amd_inventory *inv = NULL;
        struct diag err = { 0 };
        assert_int_equal(amd_inventory_load(sys, &inv, &err), 0);
        return inv;
}

/* ---- parsing ---- */

static void test_parsers(void **state)
{
        uint64_t v = 0, ue = 0, ce = 0;
        assert_int_equal(amd_kfd_property("simd_count 1216\ndrm_render_minor 128\n", "drm_render_minor", &v), 0);
        assert_int_equal(v, 128);
        assert_int_equal(amd_kfd_property("simd_count 1216\n", "drm_render_minor", &v), -ENOENT);
        assert_int_equal(amd_kfd_property("drm_render_minor x12\n", "drm_render_minor", &v), -EINVAL);
        assert_int_equal(amd_kfd_property("drm_render_minor 12junk\n", "drm_render_minor", &v), -EINVAL);
        /* a key that is a prefix of another is not that key */
        assert_int_equal(amd_kfd_property("simd_count_x 3\nsimd_count 4\n", "simd_count", &v), 0);
        assert_int_equal(v, 4);
        assert_int_equal(amd_ras_parse("ue: 3\nce: 17\n", &ue, &ce), 0);
        assert_int_equal(ue, 3);
        assert_int_equal(ce, 17);
        assert_int_equal(amd_ras_parse("ue: \n", &ue, &ce), -EINVAL);
        assert_int_equal(amd_ras_parse("garbage", &ue, &ce), -EINVAL);
        unsigned mhz = 0;
        assert_int_equal(amd_dpm_current("0: 500Mhz\n1: 1300Mhz *\n2: 2100Mhz\n", &mhz), 0);
        assert_int_equal(mhz, 1300);
        assert_int_equal(amd_dpm_current("0: 500Mhz\n", &mhz), -ENOENT);
        assert_int_equal(amd_dpm_current("0 500Mhz *\n", &mhz), -EINVAL);
        /* every level: the marked one, the lowest and highest (MI300's "S:" sleep level) */
        unsigned cur = 0, lo = 0, hi = 0;
        assert_int_equal(amd_dpm_levels("S: 19Mhz\n0: 500Mhz\n1: 1300Mhz *\n2: 2100Mhz\n", &cur, &lo, &hi), 0);
        assert_true(cur == 1300 && lo == 19 && hi == 2100);
        assert_int_equal(amd_dpm_levels("0: 900Mhz\n1: 1300Mhz\n", &cur, &lo, &hi), -ENOENT);
        assert_true(lo == 900 && hi == 1300);
        assert_int_equal(amd_dpm_levels("0: 900\n", &cur, &lo, &hi), -EINVAL);
        assert_int_equal(amd_dpm_levels("", &cur, &lo, &hi), -EINVAL);
        assert_int_equal(amd_dpm_levels("0: 99999999999999999999Mhz *\n", &cur, &lo, &hi), -EINVAL);
        /* deferred errors where the kernel counts them */
        uint64_t de = 9;
        bool has_de = true;
        assert_int_equal(amd_ras_parse_all("ue: 1\nce: 2\n", &ue, &ce, &de, &has_de), 0);
        assert_true(ue == 1 && ce == 2 && de == 0 && !has_de);
        assert_int_equal(amd_ras_parse_all("ue: 1\nce: 2\nde: 5\n", &ue, &ce, &de, &has_de), 0);
        assert_true(de == 5 && has_de);
        assert_int_equal(amd_ras_parse_all("de: 5\n", &ue, &ce, &de, &has_de), -EINVAL);
}

static void test_family(void **state)
{
        assert_string_equal(amd_family_of(90402), "AI");  /* gfx942 MI300X */
        assert_string_equal(amd_family_of(90010), "AI");  /* gfx90a MI210 */
        assert_string_equal(amd_family_of(90012), "RV");  /* gfx90c Renoir */
        assert_string_equal(amd_family_of(100300), "NV"); /* gfx1030 */
        assert_string_equal(amd_family_of(100303), "VGH");
        assert_string_equal(amd_family_of(110000), "GC_11_0_0");
        assert_string_equal(amd_family_of(110003), "GC_11_0_1");
        assert_string_equal(amd_family_of(110501), "GC_11_5_0");
        assert_null(amd_family_of(0));
}

/* ---- inventory ---- */

static void test_inventory_spx(void **state)
{
        _cleanup_free_ char *sys = tree("mi300x-8x-spx");
        struct amd_inventory *inv = load(sys);
        assert_true(inv->kfd);
        assert_int_equal(inv->kfd_major, 235);
        assert_int_equal(inv->n_gpus, 8);
        assert_string_equal(inv->driver_version, "6.10.5");
        for (size_t i = 0; i < 8; i++) {
                const struct amd_gpu *g = &inv->gpus[i];
                assert_int_equal(g->n_parts, 1); /* SPX: the xcp devices are not partitions */
                assert_null(g->problem);
                assert_string_equal(g->compute, "spx");
                assert_string_equal(g->memory, "nps1");
                assert_int_equal(g->numa_node, i < 4 ? 0 : 1);
                assert_int_equal(g->gfx_target_version, 90402);
                assert_int_equal(g->parts[0].simd_count, 1216);
                for (size_t j = 0; j < 8; j++)
                        assert_string_equal(amd_link_name(inv, i, j), i == j ? "X" : "XGMI");
        }
        assert_string_equal(inv->gpus[0].bdf, "0000:0c:00.0");
        assert_string_equal(inv->gpus[0].device_id, "74a1");
        assert_string_equal(inv->gpus[0].product_name, "AMD Instinct MI300X OAM");
        amd_inventory_free(inv);
}

static void test_inventory_cpx(void **state)
{
        _cleanup_free_ char *sys = tree("mi300x-8x-cpx");
        struct amd_inventory *inv = load(sys);
        assert_int_equal(inv->n_gpus, 8);
        assert_int_equal(amd_inventory_units(inv), 64);
        const struct amd_gpu *g1 = &inv->gpus[1];
        assert_string_equal(g1->parts[0].id, "0000:22:00.0");
        assert_string_equal(g1->parts[1].id, "amdgpu_xcp_7");
        assert_string_equal(g1->parts[7].id, "amdgpu_xcp_13");
        assert_int_equal(g1->parts[1].render, 137);
        assert_int_equal(g1->parts[1].simd_count, 152);
        assert_int_equal(g1->parts[1].vram, 24ull << 30);
        amd_inventory_free(inv);
}

static void test_inventory_mi210_and_no_kfd(void **state)
{
        _cleanup_free_ char *sys = tree("mi210-pair");
        struct amd_inventory *inv = load(sys);
        assert_int_equal(inv->n_gpus, 4);
        assert_false(inv->gpus[0].compute_partitioning);
        assert_string_equal(inv->gpus[0].compute, "");
        assert_string_equal(amd_link_name(inv, 0, 1), "XGMI");
        assert_string_equal(amd_link_name(inv, 1, 0), "XGMI");
        assert_string_equal(amd_link_name(inv, 0, 2), "PCIE");
        amd_inventory_free(inv);

        _cleanup_free_ char *nk = tree("no-kfd");
        inv = load(nk);
        assert_false(inv->kfd);
        assert_int_equal(inv->n_gpus, 2);
        amd_inventory_free(inv);

        struct amd_inventory *none = NULL;
        struct diag err = { 0 };
        _cleanup_free_ char *empty = xasprintf("%s/empty", amd_fixture_root);
        mkdir(empty, 0755);
        assert_int_equal(amd_inventory_load(empty, &none, &err), -ENOENT);
        assert_contains(err.message, "amdgpu driver is not loaded");
        assert_null(none);
}

static void test_inventory_garbage(void **state)
{
        _cleanup_free_ char *sys = tree("mi210-pair");
        /* GPU 1's KFD node: garbage; GPU 2's: truncated to nothing useful */
        _cleanup_free_ char *p2 = xasprintf("%s/class/kfd/kfd/topology/nodes/2/properties", sys);
        _cleanup_free_ char *p3 = xasprintf("%s/class/kfd/kfd/topology/nodes/3/properties", sys);
        _cleanup_free_ char *mode = xasprintf("%s/devices/pci0000:00/0000:5c:00.0/numa_node", sys);
        write_file(p2, "\x01\x02 simd_count banana\ndrm_render_minor\n");
        write_file(p3, "cpu_cores_count 0\nsimd_co");
        write_file(mode, "not a number\n");
        struct amd_inventory *inv = load(sys);
        assert_int_equal(inv->n_gpus, 4);
        assert_null(inv->gpus[0].problem);
        assert_non_null(inv->gpus[1].problem);
        assert_non_null(inv->gpus[2].problem);
        assert_int_equal(inv->gpus[3].numa_node, -1);
        assert_non_null(inv->warnings);
        amd_inventory_free(inv);
}

static void write_fmt(const char *text, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void write_fmt(const char *text, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *path = xvasprintf(fmt, ap);
        va_end(ap);
        write_file(path, text);
}

static void mkdir_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mkdir_fmt(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *path = xvasprintf(fmt, ap);
        va_end(ap);
        assert_int_equal(mkdir(path, 0755), 0);
}

/* More than 2,048 KFD nodes: every GPU keeps its own nodes (the cap used to
 * keep the first 2,048 in glob's alphabetical order, losing "9" to
 * "1000"), a node that names another's render minor later in KFD's order
 * does not replace it, and the per-GPU partition cap is warned with the
 * count dropped. */
static void test_inventory_many_kfd_nodes(void **state)
{
        _cleanup_free_ char *sys = tree("mi300x-8x-cpx");
        struct amd_inventory *inv = load(sys);
        int kfd_node[8][8];
        for (size_t i = 0; i < 8; i++)
                for (size_t k = 0; k < 8; k++)
                        kfd_node[i][k] = inv->gpus[i].parts[k].kfd_node;
        unsigned long long uid0 = (unsigned long long)inv->gpus[0].unique_id_num;
        assert_null(inv->warnings);
        amd_inventory_free(inv);

        _cleanup_free_ char *nodes = xasprintf("%s/class/kfd/kfd/topology/nodes", sys);
        size_t unnamed = 0, twice = 0;
        for (int i = 100; i < 2300; i++) {
                mkdir_fmt("%s/%d", nodes, i);
                _cleanup_free_ char *props =
                        i % 3 == 0 ? xstrdup("cpu_cores_count 4\nsimd_count 0\ndrm_render_minor 0\n")
                        : i % 3 == 1 ? xasprintf("simd_count 4\ndrm_render_minor %d\n", 20000 + i)
                                     : xasprintf("simd_count 4\ndrm_render_minor %d\nunique_id 1\n",
                                                 128 + i % 64);
                unnamed += i % 3 == 1;
                twice += i % 3 == 2;
                write_fmt(props, "%s/%d/properties", nodes, i);
        }
        /* 70 more partitions of GPU 0 (it has 8): 64 are kept */
        for (int j = 0; j < 70; j++) {
                mkdir_fmt("%s/devices/platform/amdgpu_xcp_%d", sys, 1000 + j);
                mkdir_fmt("%s/devices/platform/amdgpu_xcp_%d/drm", sys, 1000 + j);
                mkdir_fmt("%s/devices/platform/amdgpu_xcp_%d/drm/renderD%d", sys, 1000 + j, 6000 + j);
                mkdir_fmt("%s/%d", nodes, 3000 + j);
                _cleanup_free_ char *props = xasprintf(
                        "simd_count 4\ndrm_render_minor %d\nunique_id %llu\n", 6000 + j, uid0);
                write_fmt(props, "%s/%d/properties", nodes, 3000 + j);
        }

        inv = load(sys);
        assert_int_equal(inv->n_gpus, 8);
        for (size_t i = 0; i < 8; i++) {
                assert_null(inv->gpus[i].problem);
                assert_int_equal(inv->gpus[i].n_parts, i == 0 ? 64 : 8);
                for (size_t k = 0; k < 8; k++)
                        assert_int_equal(inv->gpus[i].parts[k].kfd_node, kfd_node[i][k]);
        }
        assert_int_equal(inv->gpus[0].unique_id_num, uid0);
        assert_string_equal(inv->gpus[0].parts[63].id, "amdgpu_xcp_1055");
        _cleanup_free_ char *all = xstrdup("");
        for (size_t i = 0; inv->warnings && inv->warnings[i]; i++) {
                char *more = xasprintf("%s%s\n", all, inv->warnings[i]);
                free(all);
                all = more;
        }
        _cleanup_free_ char *w1 = xasprintf("%zu KFD GPU nodes name a render node amdgpu's sysfs "
                                            "does not; ignored", unnamed);
        _cleanup_free_ char *w2 = xasprintf("%zu KFD GPU nodes name a render node an earlier node "
                                            "has; ignored", twice);
        assert_contains(all, w1);
        assert_contains(all, w2);
        assert_contains(all, "0000:0c:00.0: 14 partitions past the first 64 ignored");
        amd_inventory_free(inv);
}

/* ---- resources and allocation ---- */

static int fixture_build(struct amd_fixture *f, const char *profile, const char *strategy, struct diag *diag)
{
        _cleanup_free_ char *sys = tree(profile);
        int r = amd_fixture_build(f, sys, strategy, diag);
        assert_non_null(f->inv);
        return r;
}

static struct dev_resource *res_named(struct amd_fixture *f, const char *name)
{
        for (size_t i = 0; i < f->layout.n_res; i++)
                if (strcmp(f->layout.res[i]->name, name) == 0)
                        return f->layout.res[i];
        print_error("no resource %s\n", name);
        abort();
}

static void test_naming(void **state)
{
        struct amd_fixture f = { 0 };
        struct diag err = { 0 };
        assert_int_equal(fixture_build(&f, "mixed-node", "single", &err), -EINVAL);
        assert_string_equal(err.message, AMD_MIXED_UNDER_SINGLE);
        amd_fixture_free(&f);

        f = (struct amd_fixture){ 0 };
        assert_int_equal(fixture_build(&f, "mixed-node", "mixed", &err), 0);
        assert_int_equal(f.layout.n_res, 2);
        assert_int_equal(res_named(&f, "amd.com/spx_nps1")->n_devices, 4);
        struct dev_resource *cpx = res_named(&f, "amd.com/cpx_nps4");
        assert_int_equal(cpx->n_devices, 32);
        assert_string_equal(cpx->devices[0].id, "0000:9f:00.0");
        assert_string_equal(cpx->devices[1].id, "amdgpu_xcp_28");
        assert_int_equal(cpx->devices[0].numa_node, 1);
        assert_int_equal(cpx->devices[1].n_nodes, 3);
        assert_string_equal(cpx->devices[1].nodes[0].container_path, "/dev/kfd");
        amd_fixture_free(&f);

        /* no partitioning: amd.com/gpu whatever the strategy */
        f = (struct amd_fixture){ 0 };
        assert_int_equal(fixture_build(&f, "mi210-pair", "mixed", &err), 0);
        assert_int_equal(f.layout.n_res, 1);
        assert_string_equal(f.layout.res[0]->name, "amd.com/gpu");
        amd_fixture_free(&f);

        f = (struct amd_fixture){ 0 };
        assert_int_equal(fixture_build(&f, "mi300x-8x-cpx", "single", &err), 0);
        assert_int_equal(f.layout.n_res, 1);
        assert_int_equal(f.layout.res[0]->n_devices, 64);
        amd_fixture_free(&f);
}

static void test_sharing(void **state)
{
        struct amd_fixture f = { 0 };
        struct diag err = { 0 };
        f.cfg = config_new_defaults(dev_config_families());
        struct sharing_cfg *sc = &f.cfg->sharing;
        sc->strategy = SHARING_TIME_SLICING;
        sc->resources = xcalloc(1, sizeof(*sc->resources));
        sc->n_resources = 1;
        sc->resources[0] = (struct sharing_resource_cfg){ .name = xstrdup("amd.com/gpu"),
                                                          .replicas = 4,
                                                          .devices_kind = SHARING_DEVICES_COUNT,
                                                          .devices_count = 2 };
        assert_int_equal(fixture_build(&f, "mi210-pair", "single", &err), 0);
        struct dev_resource *r = res_named(&f, "amd.com/gpu");
        assert_int_equal(r->n_devices, 4 * 2 + 2);
        assert_string_equal(r->devices[0].id, "0000:0c:00.0::0");
        assert_string_equal(r->devices[3].id, "0000:0c:00.0::3");
        assert_string_equal(r->devices[8].id, "0000:38:00.0");
        /* distributed: two replicas land on two GPUs */
        char *avail[] = { r->devices[0].id, r->devices[1].id, r->devices[4].id, r->devices[5].id };
        char **out = NULL;
        assert_int_equal(dev_preferred(r, avail, 4, NULL, 0, 2, &out), 0);
        assert_string_equal(out[0], "0000:0c:00.0::0");
        assert_string_equal(out[1], "0000:22:00.0::0");
        strv_free(out);
        amd_fixture_free(&f);
}

/* A config whose sharing section time-slices resource 3 times, listing
 * devices (a YAML flow list), loaded as a file would be. */
static struct devlet_config *sharing_yaml(const char *resource, const char *devices)
{
        struct devlet_config *c = config_new_defaults(dev_config_families());
        _cleanup_free_ char *yaml = xasprintf("version: v1\n"
                                              "sharing:\n"
                                              "  timeSlicing:\n"
                                              "    resources:\n"
                                              "      - name: %s\n"
                                              "        replicas: 3\n"
                                              "        devices: %s\n",
                                              resource, devices);
        struct diag d;
        int r = config_parse_yaml("t.yaml", yaml, strlen(yaml), c, &d);
        if (r < 0) {
                char buf[1024];
                print_error("config: %s\n", diag_format(&d, buf, sizeof(buf)));
                fail();
        }
        return c;
}

static size_t ids_with_prefix(const struct dev_resource *r, const char *prefix)
{
        size_t n = 0;
        for (size_t i = 0; i < r->n_devices; i++)
                n += strncmp(r->devices[i].id, prefix, strlen(prefix)) == 0;
        return n;
}

/* AMD's own device IDs select what is shared: a GPU by PCI address (any
 * case), a partition by its ID, beside an index into the resource. */
static void test_sharing_by_device_id(void **state)
{
        struct amd_fixture f = { 0 };
        struct diag err = { 0 };
        f.cfg = sharing_yaml("amd.com/gpu", "[\"0000:22:00.0\"]");
        assert_string_equal(f.cfg->sharing.resources[0].devices[0], "0000:22:00.0");
        assert_int_equal(fixture_build(&f, "mi210-pair", "single", &err), 0);
        struct dev_resource *r = res_named(&f, "amd.com/gpu");
        assert_int_equal(ids_with_prefix(r, "0000:22:00.0::"), 3);
        assert_int_equal(ids_with_prefix(r, "0000:0c:00.0::"), 0);
        assert_int_equal(ids_with_prefix(r, "0000:0c:00.0"), 1);
        amd_fixture_free(&f);

        f = (struct amd_fixture){ 0 };
        f.cfg = sharing_yaml("amd.com/gpu", "[\"0000:0C:00.0\", \"1\"]");
        assert_int_equal(fixture_build(&f, "mi210-pair", "single", &err), 0);
        r = res_named(&f, "amd.com/gpu");
        assert_int_equal(ids_with_prefix(r, "0000:0c:00.0::"), 3);
        assert_int_equal(ids_with_prefix(r, "0000:22:00.0::"), 3);
        amd_fixture_free(&f);

        f = (struct amd_fixture){ 0 };
        f.cfg = sharing_yaml("amd.com/cpx_nps4", "[amdgpu_xcp_1]");
        assert_int_equal(fixture_build(&f, "mi300x-8x-cpx", "mixed", &err), 0);
        r = res_named(&f, "amd.com/cpx_nps4");
        assert_int_equal(ids_with_prefix(r, "amdgpu_xcp_1::"), 3);
        assert_int_equal(ids_with_prefix(r, "amdgpu_xcp_0::"), 0);
        assert_int_equal(r->n_devices, 64 - 1 + 3);
        amd_fixture_free(&f);

        /* an ID of no device of the resource: refused at start-up */
        f = (struct amd_fixture){ 0 };
        f.cfg = sharing_yaml("amd.com/gpu", "[\"0000:ff:00.0\"]");
        assert_int_equal(fixture_build(&f, "mi210-pair", "single", &err), -EINVAL);
        assert_contains(err.message, "no matching device with ID: 0000:ff:00.0");
        amd_fixture_free(&f);

        /* NVIDIA's grammar is not AMD's: a GPU UUID is refused with AMD's forms */
        struct devlet_config *c = config_new_defaults(dev_config_families());
        const char *bad = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                          "      - {name: amd.com/gpu, replicas: 2, devices: [GPU-0]}\n";
        struct diag d;
        assert_int_equal(config_parse_yaml("t.yaml", bad, strlen(bad), c, &d), -EINVAL);
        assert_contains(d.message, "\"GPU-0\" is not a device index (\"0\", below 1024), a PCI "
                                   "address (\"0000:0c:00.0\") or a partition ID");
        config_free(c);
}

static void test_allocate(void **state)
{
        struct amd_fixture f = { 0 };
        struct diag err = { 0 };
        assert_int_equal(fixture_build(&f, "mi300x-8x-cpx", "mixed", &err), 0);
        struct dev_resource *r = res_named(&f, "amd.com/cpx_nps4");
        char id0[] = "amdgpu_xcp_0", id1[] = "0000:0c:00.0";
        char *ids[] = { id0, id1 };
        struct dev_alloc a = { 0 };
        assert_int_equal(dev_allocate(r, ids, 2, &a, &err), 0);
        assert_int_equal(a.n_nodes, 5); /* kfd once, two cards, two render nodes */
        assert_string_equal(a.nodes[0].container_path, "/dev/kfd");
        assert_string_equal(a.nodes[1].container_path, "/dev/dri/card2");
        assert_string_equal(a.nodes[2].container_path, "/dev/dri/renderD129");
        dev_alloc_release(&a);
        char bad0[] = "0000:ff:00.0";
        char *bad[] = { bad0 };
        assert_int_equal(dev_allocate(r, bad, 1, &a, &err), -EINVAL);
        assert_contains(err.message, "unknown device: 0000:ff:00.0");
        err = (struct diag){ 0 };

        f.ctx.cdi_cri = true;
        assert_int_equal(dev_allocate(r, ids, 1, &a, &err), 0);
        assert_int_equal(a.n_nodes, 0);
        assert_string_equal(a.cdi_devices[0], "amd.com/cpx_nps4=amdgpu_xcp_0");
        dev_alloc_release(&a);
        amd_fixture_free(&f);
}

static char **ids_of(struct dev_resource *r, size_t *n)
{
        char **v = xcalloc(r->n_devices + 1, sizeof(char *));
        for (size_t i = 0; i < r->n_devices; i++)
                v[i] = r->devices[i].id;
        *n = r->n_devices;
        return v;
}

static void test_preferred(void **state)
{
        struct amd_fixture f = { 0 };
        struct diag err = { 0 };
        size_t n;
        char **out = NULL;

        /* MI210: the XGMI pair wins over lower PCIe-only choices */
        assert_int_equal(fixture_build(&f, "mi210-pair", "single", &err), 0);
        struct dev_resource *r = f.layout.res[0];
        _cleanup_free_ char **all = ids_of(r, &n);
        char m2[] = "0000:22:00.0";
        char *must2[] = { m2 };
        assert_int_equal(dev_preferred(r, all, n, must2, 1, 2, &out), 0);
        assert_string_equal(out[0], "0000:0c:00.0");
        assert_string_equal(out[1], "0000:22:00.0");
        strv_free(out);
        amd_fixture_free(&f);

        /* CPX: 16 partitions are two whole GPUs; 2 go to the GPU with fewest free */
        f = (struct amd_fixture){ 0 };
        assert_int_equal(fixture_build(&f, "mi300x-8x-cpx", "single", &err), 0);
        r = f.layout.res[0];
        _cleanup_free_ char **cpx = ids_of(r, &n);
        assert_int_equal(dev_preferred(r, cpx, n, NULL, 0, 16, &out), 0);
        assert_int_equal(strv_len(out), 16);
        for (size_t i = 0; i < 16; i++)
                assert_int_equal(((struct amd_dev *)dev_resource_find(r, out[i])->priv)->gpu, i / 8);
        strv_free(out);
        /* GPU 0: 3 free (its last three), GPU 1..7: 8 free each */
        char *avail[64];
        size_t na = 0;
        for (size_t i = 5; i < 64; i++)
                avail[na++] = cpx[i];
        assert_int_equal(dev_preferred(r, avail, na, NULL, 0, 2, &out), 0);
        assert_string_equal(out[0], "amdgpu_xcp_4");
        assert_string_equal(out[1], "amdgpu_xcp_5");
        strv_free(out);
        /* a must ID's GPU is filled first */
        char m1[] = "amdgpu_xcp_20";
        char *must[] = { m1 };
        assert_int_equal(dev_preferred(r, cpx, n, must, 1, 4, &out), 0);
        for (size_t i = 0; i < 4; i++) /* xcp 14-20 are GPU 2's */
                assert_int_equal(((struct amd_dev *)dev_resource_find(r, out[i])->priv)->gpu, 2);
        strv_free(out);
        /* unhealthy IDs are never chosen */
        r->devices[0].health = DEV_UNHEALTHY;
        assert_int_equal(dev_preferred(r, cpx, n, NULL, 0, 8, &out), 0);
        for (size_t i = 0; i < 8; i++)
                assert_string_not_equal(out[i], cpx[0]);
        strv_free(out);
        amd_fixture_free(&f);
}

/* ---- health ---- */

static void test_health(void **state)
{
        _cleanup_free_ char *sys = tree("mi300x-8x-cpx");
        struct amd_inventory *inv = load(sys);
        struct amd_gpu_watch *w = xcalloc(inv->n_gpus, sizeof(*w));
        const struct amd_health_policy rec = { .recovery = true, .quiet_ms = 1000 };
        const struct amd_health_policy sticky = { 0 }, now = { .recovery = true };
        amd_health_baseline(inv, w);
        assert_int_equal(amd_health_poll(inv, w, &rec, 0), 0);

        /* RAS ue rising on GPU 2: unhealthy; recovers after the quiet period */
        _cleanup_free_ char *ras = xasprintf("%s/ras/umc_err_count", inv->gpus[2].sysfs_dir);
        write_file(ras, "ue: 1\nce: 4\n");
        assert_int_equal(amd_health_poll(inv, w, &rec, 100), 1);
        assert_true(w[2].bad);
        assert_contains(w[2].reason, "uncorrectable RAS errors rose from 0 to 1");
        assert_int_equal(amd_health_poll(inv, w, &rec, 600), 0);
        assert_true(w[2].bad);
        assert_int_equal(amd_health_poll(inv, w, &rec, 1100), 1);
        assert_false(w[2].bad);

        /* a partition's KFD node vanishing takes its GPU; without recovery it stays */
        _cleanup_free_ char *node = xasprintf("%s/class/kfd/kfd/topology/nodes/%d/properties", sys,
                                              inv->gpus[5].parts[3].kfd_node);
        assert_int_equal(unlink(node), 0);
        assert_int_equal(amd_health_poll(inv, w, &sticky, 2000), 1);
        assert_true(w[5].bad);
        assert_contains(w[5].reason, "KFD topology node");
        write_file(node, "simd_count 152\ndrm_render_minor 1\n"); /* back, but for another device */
        assert_int_equal(amd_health_poll(inv, w, &sticky, 3000), 0);
        assert_true(w[5].bad);

        /* not answering (amdgpu refuses reads while in reset) */
        _cleanup_free_ char *busy = xasprintf("%s/gpu_busy_percent", inv->gpus[0].sysfs_dir);
        assert_int_equal(unlink(busy), 0);
        assert_int_equal(mkdir(busy, 0755), 0);
        assert_int_equal(amd_health_poll(inv, w, &sticky, 4000), 1);
        assert_contains(w[0].reason, "not answering");

        /* the GPU gone from sysfs */
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", inv->gpus[7].sysfs_dir);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(amd_health_poll(inv, w, &now, 5000), 1);
        assert_contains(w[7].reason, "gone");
        for (size_t i = 0; i < inv->n_gpus; i++)
                free(w[i].reason);
        free(w);
        amd_inventory_free(inv);
}

/* What the health threads handed the loop (test_health_threads). */
struct thread_results {
        size_t got, n;
        bool why[8];
        bool ue_known[8];
};

static void on_thread_result(void *ud, size_t gpu, struct amd_health_obs *obs)
{
        struct thread_results *r = ud;
        assert_true(gpu < r->n);
        r->why[gpu] = obs->why != NULL;
        r->ue_known[gpu] = obs->ue_known;
        r->got++;
}

static void on_deadline(uv_timer_t *t)
{
        *(bool *)t->data = true;
}

/* Runs the loop (each turn waits for an event) until want results came, or
 * 10 s passed. */
static void run_until(uv_loop_t *loop, const size_t *got, size_t want)
{
        bool late = false;
        uv_timer_t deadline;
        uv_timer_init(loop, &deadline);
        deadline.data = &late;
        uv_timer_start(&deadline, on_deadline, 10000, 0);
        while (*got < want && !late)
                uv_run(loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *)&deadline, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        assert_int_equal(*got, want);
}

/* The reads off the loop: one result per GPU per kick, through the async
 * handle; a GPU whose read has not finished is not kicked again, and is
 * stalled past AMD_HEALTH_STALL_MS; stop never waits. */
static void test_health_threads(void **state)
{
        _cleanup_free_ char *sys = tree("mi210-pair");
        struct amd_inventory *inv = load(sys);
        uv_loop_t loop;
        assert_int_equal(uv_loop_init(&loop), 0);
        struct thread_results r = { .n = inv->n_gpus };
        struct amd_health_threads *t = amd_health_threads_start(&loop, inv, 0, on_thread_result, &r);
        assert_non_null(t);
        bool stalled[4];
        amd_health_threads_kick(t, 0, stalled);
        run_until(&loop, &r.got, 4);
        for (size_t i = 0; i < 4; i++) {
                assert_false(r.why[i]);
                assert_false(stalled[i]);
        }

        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", inv->gpus[3].sysfs_dir);
        assert_int_equal(system(cmd), 0);
        amd_health_threads_kick(t, 100, stalled);
        run_until(&loop, &r.got, 8);
        assert_true(r.why[3]);
        assert_false(r.why[0]);

        /* kicked twice without the loop draining: the first read is done, so
         * nothing counts as stalled however late the second kick is */
        amd_health_threads_kick(t, 200, stalled);
        run_until(&loop, &r.got, 12);
        amd_health_threads_kick(t, 200 + AMD_HEALTH_STALL_MS, stalled);
        for (size_t i = 0; i < 4; i++)
                assert_false(stalled[i]);
        amd_health_threads_stop(t);
        /* what was in flight never reaches the callback after stop */
        size_t at_stop = r.got;
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(r.got, at_stop);
        assert_int_equal(uv_loop_close(&loop), 0);
        amd_inventory_free(inv);
}

static void test_health_ignore(void **state)
{
        assert_int_equal(amd_health_ignore_mask(STRV("ras", "kfd")), AMD_HEALTH_RAS | AMD_HEALTH_KFD);
        assert_int_equal(amd_health_ignore_mask(STRV("all")), AMD_HEALTH_ALL);
        assert_int_equal(amd_health_ignore_mask(STRV("unresponsive")), AMD_HEALTH_UNRESPONSIVE);
        assert_int_equal(amd_health_ignore_mask(NULL), 0);

        _cleanup_free_ char *sys = tree("mi210-pair");
        struct amd_inventory *inv = load(sys);
        struct amd_gpu_watch *w = xcalloc(inv->n_gpus, sizeof(*w));
        const struct amd_health_policy no_ras = { .ignore = AMD_HEALTH_RAS }, all = { 0 };
        amd_health_baseline(inv, w);
        _cleanup_free_ char *ras = xasprintf("%s/ras/gfx_err_count", inv->gpus[0].sysfs_dir);
        write_file(ras, "ue: 5\nce: 0\n");
        assert_int_equal(amd_health_poll(inv, w, &no_ras, 10), 0);
        /* the baseline moved: judging RAS again does not report the old errors */
        assert_int_equal(amd_health_poll(inv, w, &all, 20), 0);
        write_file(ras, "ue: 6\nce: 0\n");
        assert_int_equal(amd_health_poll(inv, w, &all, 30), 1);
        assert_contains(w[0].reason, "from 5 to 6");
        for (size_t i = 0; i < inv->n_gpus; i++)
                free(w[i].reason);
        free(w);
        amd_inventory_free(inv);
}

/* ---- labels and measurements ---- */

static const char *label(struct dev_kv *kv, size_t n, const char *key)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(kv[i].key, key) == 0)
                        return kv[i].value;
        return NULL;
}

/* Fails (rather than crashing) on a missing label. */
#define assert_label(kv, n, key, want)                                          \
        do {                                                                    \
                const char *v_ = label(kv, n, key);                             \
                if (!v_)                                                        \
                        fail_msg("no label %s", key);                           \
                assert_string_equal(v_, want);                                  \
        } while (0)

static void test_labels(void **state)
{
        _cleanup_free_ char *sys = tree("mi300x-8x-cpx");
        struct amd_inventory *inv = load(sys);
        size_t n = 0;
        struct dev_kv *kv = amd_labels(inv, &n);
        assert_label(kv, n, "amd.com/gpu.family", "AI");
        assert_label(kv, n, "beta.amd.com/gpu.family.AI", "64");
        assert_label(kv, n, "amd.com/gpu.device-id", "74a1");
        assert_label(kv, n, "amd.com/gpu.product-name", "AMD_Instinct_MI300X_OAM");
        assert_label(kv, n, "amd.com/gpu.vram", "24G");
        assert_label(kv, n, "beta.amd.com/gpu.vram.24G", "64");
        assert_label(kv, n, "amd.com/gpu.cu-count", "38");
        assert_label(kv, n, "amd.com/gpu.simd-count", "152");
        assert_label(kv, n, "amd.com/gpu.compute-memory-partition", "cpx_nps4");
        assert_label(kv, n, "amd.com/gpu.compute-partitioning-supported", "true");
        assert_label(kv, n, "amd.com/gpu.memory-partitioning-supported", "true");
        assert_label(kv, n, "amd.com/gpu.driver-version", "6.10.5");
        assert_label(kv, n, "amd.com/gpu.count", "8");
        for (size_t i = 1; i < n; i++)
                assert_true(strcmp(kv[i - 1].key, kv[i].key) < 0);
        amd_labels_free(kv, n);
        amd_inventory_free(inv);

        /* several values: amd.com/gpu.<p>.<value> counts, no bare key */
        _cleanup_free_ char *mixed = tree("mixed-node");
        inv = load(mixed);
        free(inv->gpus[0].product_name);
        inv->gpus[0].product_name = xstrdup("  AMD Instinct (tm) MI300X / \"special\" edition with a name far too long for a label  ");
        kv = amd_labels(inv, &n);
        assert_null(label(kv, n, "amd.com/gpu.vram"));
        assert_label(kv, n, "amd.com/gpu.vram.192G", "4");
        assert_label(kv, n, "amd.com/gpu.vram.24G", "32");
        assert_null(label(kv, n, "amd.com/gpu.compute-memory-partition"));
        assert_label(kv, n, "amd.com/gpu.product-name.AMD_Instinct_tm_MI300X____special__edition_wit", "1");
        amd_labels_free(kv, n);
        amd_inventory_free(inv);
}

static void test_sample(void **state)
{
        _cleanup_free_ char *sys = tree("mi300x-8x-spx");
        struct amd_inventory *inv = load(sys);
        struct amd_sample s;
        amd_sample_gpu(&inv->gpus[2], &s);
        assert_true(s.has_gfx && s.has_umc && s.has_vram && s.has_power && s.has_energy);
        assert_false(s.has_edge); /* MI300X reports no edge temperature */
        assert_true(s.has_junction && s.has_mem_temp);
        assert_int_equal((int)s.gfx_activity, 14);
        assert_int_equal((int)s.vram_used_mb, 302);
        assert_int_equal((int)s.vram_total_mb, 192 * 1024);
        assert_int_equal((int)s.junction_c, 54);
        assert_int_equal((int)s.power_w, 184);
        assert_int_equal((int)s.sclk_mhz, 1300);
        assert_int_equal((int)s.mclk_mhz, 1300);
        assert_true(s.has_ecc);
        assert_int_equal(s.ecc_uncorrect, 0);

        _cleanup_free_ char *proc = xasprintf("%s/class/kfd/kfd/proc/4242", sys);
        assert_int_equal(mkdir(proc, 0755), 0);
        _cleanup_free_ char *vram = xasprintf("%s/vram_%u", proc, inv->gpus[2].parts[0].gpu_id);
        write_file(vram, "1073741824\n");
        _cleanup_free_ char *junk = xasprintf("%s/vram_garbage", proc);
        write_file(junk, "x\n");
        struct amd_proc_vram *pv = NULL;
        size_t n = amd_proc_vram(sys, 16, &pv);
        assert_int_equal(n, 1);
        assert_int_equal(pv[0].pid, 4242);
        assert_int_equal(pv[0].gpu_id, inv->gpus[2].parts[0].gpu_id);
        assert_int_equal(pv[0].bytes, 1ull << 30);
        free(pv);
        amd_inventory_free(inv);
}

static const struct dev_unit *unit_of(const struct dev_sample *s, const char *key)
{
        for (size_t i = 0; i < s->n_units; i++)
                if (strcmp(s->units[i].key, key) == 0)
                        return &s->units[i];
        print_error("no unit %s\n", key);
        abort();
}

static size_t family(const struct dev_unit *u, const char *name)
{
        for (size_t i = 0; i < u->n_families; i++)
                if (strcmp(u->families[i].name, name) == 0)
                        return i;
        print_error("no family %s\n", name);
        abort();
}

static void test_sampler(void **state)
{
        _cleanup_free_ char *sys = tree("mi300x-8x-cpx");
        struct amd_inventory *inv = load(sys);
        struct dev_sampler *s = amd_sampler_new(inv, NULL);
        amd_inventory_free(inv); /* the sampler keeps its own reference */
        const struct amd_gpu *g = &inv->gpus[1];
        _cleanup_free_ char *proc = xasprintf("%s/class/kfd/kfd/proc/777", sys);
        assert_int_equal(mkdir(proc, 0755), 0);
        _cleanup_free_ char *v1 = xasprintf("%s/vram_%u", proc, g->parts[2].gpu_id);
        _cleanup_free_ char *v2 = xasprintf("%s/vram_%u", proc, g->parts[5].gpu_id);
        write_file(v1, "1048576\n");
        write_file(v2, "2097152\n");
        amd_sampler_note_health(s, 6, true);

        struct dev_sample out = { 0 };
        assert_int_equal(s->ops->sample(s, &out), 0);
        /* one unit per partition: 8 GPUs in CPX */
        assert_int_equal(out.n_units, 64);
        const struct dev_unit *u = unit_of(&out, "0000:22:00.0");
        /* partition 0 of GPU 1: the PCI address, its own DRM nodes */
        assert_int_equal(strv_len(u->names), 1);
        assert_int_equal(u->n_devnums, 2);
        assert_int_equal(u->devnums[0].major, 226);
        assert_string_equal(u->labels[0].name, "gpu_id");
        assert_string_equal(u->labels[0].value, "8");
        assert_string_equal(u->labels[u->host_at].name, "gpu_partition_id");
        assert_string_equal(u->labels[u->host_at].value, "0");
        assert_true(u->procs_known);
        assert_int_equal(u->n_procs, 0);
        /* what the kernel reports per GPU sits on partition 0 only */
        assert_true(u->values[family(u, "gpu_junction_temperature")].has);
        assert_true(u->values[family(u, "gpu_xgmi_link_rx")].has);
        assert_false(u->values[family(u, "gpu_edge_temperature")].has);
        assert_int_equal((int)u->values[family(u, "gpu_health")].v, 1);
        /* partition 5: its own ID, its xcp_stats entry, KFD's processes on its node */
        const struct dev_unit *p5 = unit_of(&out, g->parts[5].id);
        assert_string_equal(p5->labels[0].value, "13");
        assert_string_equal(p5->labels[p5->host_at].value, "5");
        assert_string_equal(p5->names[0], g->parts[5].id);
        assert_int_equal(p5->n_devnums, 2);
        assert_int_equal(p5->devnums[1].minor, (unsigned)g->parts[5].render);
        assert_int_equal(p5->n_procs, 1);
        assert_int_equal(p5->procs[0].pid, 777);
        assert_int_equal(p5->procs[0].mem_bytes, 2 << 20);
        assert_int_equal((int)p5->values[family(p5, "gpu_used_vram")].v, 2);
        assert_int_equal((int)p5->values[family(p5, "gpu_total_vram")].v, 24 * 1024);
        const struct dev_value *busy = &p5->values[family(p5, "gpu_gfx_busy_instantaneous")];
        assert_true(busy->has);
        assert_int_equal(busy->n_more, 0); /* one XCC per CPX partition */
        assert_string_equal(busy->labels[0], "0");
        assert_false(p5->values[family(p5, "gpu_junction_temperature")].has);
        const struct dev_unit *p2 = unit_of(&out, g->parts[2].id);
        assert_int_equal(p2->procs[0].mem_bytes, 1 << 20);
        assert_true(p2->values[family(p2, "gpu_gfx_busy_instantaneous")].v != busy->v);
        /* GPU 6 unhealthy: every one of its partitions */
        for (size_t k = 48; k < 56; k++)
                assert_int_equal((int)out.units[k].values[family(&out.units[k], "gpu_health")].v, 0);
        assert_int_equal((int)out.units[47].values[family(&out.units[47], "gpu_health")].v, 1);
        /* throttling percentages need a previous collection */
        assert_false(u->values[family(u, "gpu_violation_ppt_residency_percentage")].has);
        dev_sample_release(&out);

        /* the firmware counted 1000 more cycles, 250 of them power-limited */
        _cleanup_free_ char *gm = xasprintf("%s/gpu_metrics", g->sysfs_dir);
        FILE *f = fopen(gm, "r+b");
        assert_non_null(f);
        unsigned char b[4];
        uint32_t acc, ppt;
        assert_int_equal(fseek(f, 40, SEEK_SET), 0); /* v1.7 accumulation_counter */
        assert_int_equal(fread(b, 1, 4, f), 4);
        acc = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
        assert_int_equal(fseek(f, 48, SEEK_SET), 0); /* ppt_residency_acc */
        assert_int_equal(fread(b, 1, 4, f), 4);
        ppt = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
        acc += 1000;
        ppt += 250;
        unsigned char w[4] = { acc & 0xff, acc >> 8 & 0xff, acc >> 16 & 0xff, acc >> 24 };
        assert_int_equal(fseek(f, 40, SEEK_SET), 0);
        assert_int_equal(fwrite(w, 1, 4, f), 4);
        unsigned char w2[4] = { ppt & 0xff, ppt >> 8 & 0xff, ppt >> 16 & 0xff, ppt >> 24 };
        assert_int_equal(fseek(f, 48, SEEK_SET), 0);
        assert_int_equal(fwrite(w2, 1, 4, f), 4);
        fclose(f);
        assert_int_equal(s->ops->sample(s, &out), 0);
        u = unit_of(&out, "0000:22:00.0");
        assert_int_equal((int)u->values[family(u, "gpu_violation_ppt_residency_percentage")].v, 25);
        assert_int_equal((int)u->values[family(u, "gpu_violation_processor_hot_residency_percentage")].v, 0);
        /* GPU 2's counters did not move: no percentage */
        const struct dev_unit *two = unit_of(&out, "0000:38:00.0");
        assert_false(two->values[family(two, "gpu_violation_ppt_residency_percentage")].has);
        dev_sample_release(&out);
        dev_sampler_unref(s);
}

#define T(f) cmocka_unit_test_setup_teardown(f, amd_fixture_root_setup, amd_fixture_root_teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parsers),
                cmocka_unit_test(test_family),
                T(test_inventory_spx),
                T(test_inventory_cpx),
                T(test_inventory_mi210_and_no_kfd),
                T(test_inventory_garbage),
                T(test_inventory_many_kfd_nodes),
                T(test_naming),
                T(test_sharing),
                T(test_sharing_by_device_id),
                T(test_allocate),
                T(test_preferred),
                T(test_health),
                T(test_health_ignore),
                T(test_health_threads),
                T(test_labels),
                T(test_sample),
                T(test_sampler),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
