/* The AMD backend's DRA model (devices/amd/model.c) on the fake sysfs trees
 * of tests/mock-amd: gpu.amd.com's names, attribute types and values for
 * whole GPUs and CPX partitions, the XGMI hive, the PCIe root, the driver
 * version trimmed to semver, replicas sharing one model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"
#include "amd-fixture.h"
#include "test-util.h"


/* Builds profile's tree (its sysfs root returned in *sys when asked) and the
 * layout for strategy. */
static void build(struct amd_fixture *f, const char *profile, const char *strategy, char **sys)
{
        char *s = amd_fixture_tree(amd_fixture_root, profile);
        assert_non_null(s);
        struct diag err = { 0 };
        assert_int_equal(amd_fixture_build(f, s, strategy, &err), 0);
        if (sys)
                *sys = s;
        else
                free(s);
}

static struct dev_resource *res_named(struct amd_fixture *f, const char *name)
{
        for (size_t i = 0; i < f->layout.n_res; i++)
                if (strcmp(f->layout.res[i]->name, name) == 0)
                        return f->layout.res[i];
        fail_msg("no resource %s", name);
        return NULL;
}

static const char *attr_s(const struct dev_model *m, const char *name)
{
        const struct dev_attr *a = dev_model_attr(m, name);
        if (!a)
                return NULL;
        assert_int_equal(a->type, DEV_ATTR_STRING);
        return a->s;
}

static int64_t attr_i(const struct dev_model *m, const char *name)
{
        const struct dev_attr *a = dev_model_attr(m, name);
        assert_non_null(a);
        assert_int_equal(a->type, DEV_ATTR_INT);
        return a->i;
}

static const char *cap(const struct dev_model *m, const char *name)
{
        for (size_t i = 0; i < m->n_capacity; i++)
                if (strcmp(m->capacity[i].name, name) == 0)
                        return m->capacity[i].value;
        return NULL;
}

static void test_spx(void **state)
{
        (void)state;
        struct amd_fixture f = { 0 };
        build(&f, "mi300x-8x-spx", "single", NULL);
        struct dev_resource *r = res_named(&f, "amd.com/gpu");
        assert_int_equal(r->n_devices, 8);
        const struct dev_model *m = r->devices[0].model;
        assert_non_null(m);
        assert_string_equal(m->name, "gpu-1-128");
        assert_string_equal(attr_s(m, "type"), "amdgpu");
        assert_string_equal(attr_s(m, "productName"), "AMD_Instinct_MI300X_OAM");
        assert_string_equal(attr_s(m, "deviceID"), "0x74a1");
        assert_string_equal(attr_s(m, "family"), "AI");
        assert_string_equal(attr_s(m, "gfxTarget"), "gfx942");
        const struct dev_attr *v = dev_model_attr(m, "driverVersion");
        assert_int_equal(v->type, DEV_ATTR_VERSION);
        assert_string_equal(v->s, "6.10.5");
        assert_string_equal(attr_s(m, "driverVersionFull"), "6.10.5");
        assert_string_equal(attr_s(m, "driverSrcVersion"), "2C3E4B71F7A1D0B8E5C9A01");
        assert_string_equal(attr_s(m, "partitionProfile"), "spx_nps1");
        assert_string_equal(attr_s(m, "computePartition"), "spx");
        assert_string_equal(attr_s(m, "memoryPartition"), "nps1");
        assert_int_equal(attr_i(m, "numaNode"), 0);
        assert_int_equal(attr_i(m, "resource.kubernetes.io/numaNode"), 0);
        assert_int_equal(attr_i(m, "cardIndex"), 1);
        assert_int_equal(attr_i(m, "renderIndex"), 128);
        assert_string_equal(attr_s(m, "xgmiHiveID"), "1515847680"); /* 0x5A5A0000 */
        assert_string_equal(attr_s(m, "resource.kubernetes.io/pciBusID"), "0000:0c:00.0");
        assert_string_equal(attr_s(m, "resource.kubernetes.io/pcieRoot"), "pci0000:00");
        assert_int_equal(m->n_capacity, 3);
        assert_string_equal(cap(m, "memory"), "192Gi");
        assert_string_equal(cap(m, "computeUnits"), "304");
        assert_string_equal(cap(m, "simdUnits"), "1216");
        /* the next GPU: its own nodes, NUMA node 1 past the first four */
        const struct dev_model *m7 = r->devices[7].model;
        assert_string_equal(m7->name, "gpu-57-184");
        assert_int_equal(attr_i(m7, "numaNode"), 1);
        amd_fixture_free(&f);
}

/* CPX: every XCD a partition with its own card and render node, sharing the
 * GPU's PCI address; VRAM and CUs split eight ways. */
static void test_cpx_partitions(void **state)
{
        (void)state;
        struct amd_fixture f = { 0 };
        build(&f, "mi300x-8x-cpx", "mixed", NULL);
        struct dev_resource *r = res_named(&f, "amd.com/cpx_nps4");
        assert_int_equal(r->n_devices, 64);
        char **names = NULL;
        for (size_t k = 0; k < r->n_devices; k++) {
                const struct dev_model *m = r->devices[k].model;
                assert_non_null(m);
                assert_false(strv_contains(names, m->name));
                names = strv_push(names, m->name);
                assert_string_equal(attr_s(m, "type"), "amdgpu-partition");
                assert_string_equal(attr_s(m, "partitionProfile"), "cpx_nps4");
                assert_string_equal(cap(m, "memory"), "24Gi");
                assert_string_equal(cap(m, "computeUnits"), "38");
                assert_string_equal(cap(m, "simdUnits"), "152");
        }
        strv_free(names);
        /* GPU 0: partition 0 is the PCI device's own nodes, 1-7 amdgpu_xcp_* */
        const struct dev_model *p0 = r->devices[0].model, *p1 = r->devices[1].model;
        assert_string_equal(p0->name, "gpu-1-128");
        assert_string_equal(p1->name, "gpu-2-129");
        assert_string_equal(attr_s(p1, "resource.kubernetes.io/pciBusID"), "0000:0c:00.0");
        assert_string_equal(attr_s(p1, "resource.kubernetes.io/pcieRoot"), "pci0000:00");
        assert_int_equal(attr_i(p1, "cardIndex"), 2);
        assert_int_equal(attr_i(p1, "renderIndex"), 129);
        amd_fixture_free(&f);
}

/* mi210-pair: GPUs 0 and 1 in one hive, 2 and 3 in none; gfx90a. */
static void test_hive_and_families(void **state)
{
        (void)state;
        struct amd_fixture f = { 0 };
        build(&f, "mi210-pair", "single", NULL);
        struct dev_resource *r = res_named(&f, "amd.com/gpu");
        assert_int_equal(r->n_devices, 4);
        const struct dev_model *m = r->devices[0].model;
        assert_string_equal(attr_s(m, "type"), "amdgpu");
        assert_string_equal(attr_s(m, "gfxTarget"), "gfx90a");
        assert_string_equal(attr_s(m, "productName"), "AMD_Instinct_MI210");
        assert_null(dev_model_attr(m, "partitionProfile")); /* MI200 has no partitions */
        assert_string_equal(attr_s(m, "xgmiHiveID"), attr_s(r->devices[1].model, "xgmiHiveID"));
        assert_null(dev_model_attr(r->devices[2].model, "xgmiHiveID"));
        assert_null(dev_model_attr(r->devices[3].model, "xgmiHiveID"));
        assert_string_equal(cap(m, "memory"), "64Gi");
        amd_fixture_free(&f);

        build(&f, "radeon-w7900", "single", NULL);
        m = res_named(&f, "amd.com/gpu")->devices[0].model;
        assert_string_equal(attr_s(m, "gfxTarget"), "gfx1100");
        assert_string_equal(attr_s(m, "family"), "GC_11_0_0");
        assert_string_equal(attr_s(m, "productName"), "AMD_Radeon_PRO_W7900");
        assert_null(dev_model_attr(m, "xgmiHiveID"));
        amd_fixture_free(&f);

        /* no KFD: no CU counts, the VRAM amdgpu tells */
        build(&f, "no-kfd", "single", NULL);
        m = res_named(&f, "amd.com/gpu")->devices[0].model;
        assert_string_equal(cap(m, "memory"), "64Gi");
        assert_null(cap(m, "computeUnits"));
        assert_null(dev_model_attr(m, "gfxTarget"));
        amd_fixture_free(&f);
}

/* The out-of-tree module's four-part version: semver of its first three
 * numbers, the whole in driverVersionFull (AMD's SemverDriverVersion). */
static void test_driver_version(void **state)
{
        (void)state;
        char *sys = amd_fixture_tree(amd_fixture_root, "radeon-w7900");
        assert_non_null(sys);
        _cleanup_free_ char *path = xasprintf("%s/module/amdgpu/version", sys);
        FILE *fp = fopen(path, "w");
        assert_non_null(fp);
        fputs("6.19.14.31400000\n", fp);
        fclose(fp);
        struct amd_fixture f = { 0 };
        struct diag err = { 0 };
        assert_int_equal(amd_fixture_build(&f, sys, "single", &err), 0);
        const struct dev_model *m = res_named(&f, "amd.com/gpu")->devices[0].model;
        assert_string_equal(dev_model_attr(m, "driverVersion")->s, "6.19.14");
        assert_string_equal(attr_s(m, "driverVersionFull"), "6.19.14.31400000");
        amd_fixture_free(&f);
        free(sys);
}

static void test_replicas(void **state)
{
        (void)state;
        struct amd_fixture f = { 0 };
        f.cfg = config_new_defaults(dev_config_families());
        struct sharing_cfg *sc = &f.cfg->sharing;
        sc->strategy = SHARING_TIME_SLICING;
        sc->resources = xcalloc(1, sizeof(*sc->resources));
        sc->n_resources = 1;
        sc->resources[0] = (struct sharing_resource_cfg){ .name = xstrdup("amd.com/gpu"),
                                                          .replicas = 3,
                                                          .devices_kind = SHARING_DEVICES_ALL };
        build(&f, "mi210-pair", "single", NULL);
        struct dev_resource *r = res_named(&f, "amd.com/gpu");
        assert_int_equal(r->n_devices, 12);
        for (size_t k = 0; k < r->n_devices; k++) {
                const struct dev_model *m = r->devices[k].model;
                const struct dev_model *first = r->devices[k - k % 3].model;
                assert_true(dev_model_equal(m, first));
                if (k % 3 == 0 && k)
                        assert_string_not_equal(m->name, r->devices[k - 1].model->name);
        }
        amd_fixture_free(&f);
}

#define T(f) cmocka_unit_test_setup_teardown(f, amd_fixture_root_setup, amd_fixture_root_teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                T(test_spx),
                T(test_cpx_partitions),
                T(test_hive_and_families),
                T(test_driver_version),
                T(test_replicas),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
