/* The NVIDIA backend against the mock libnvidia-ml.so.1: loading and symbol
 * fallbacks, the inventory of each mock profile, resources per MIG strategy
 * and NVIDIA's errors, resource names, sharing, Allocate per device list
 * strategy, and GetPreferredAllocation.  Health has its own file
 * (test-nvidia-health.c).  Backends are created without a loop here: no
 * health thread. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "nvidia-test.h"

#include "devices/nvidia/internal.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvml-lib.h"

#define V100_0 "GPU-907a70c3-1012-f037-b64c-e4228c38fb29"
#define V100_3 "GPU-c7a2ea20-b2f1-4c94-2e05-319acb5c7427"
#define V100_5 "GPU-9be4bcfc-49b6-4a08-72e6-cc3ababced20"
#define MIG_GPU "GPU-03e0d681-5524-54f1-4fab-6f3e164f1513"
#define MIG_3G "MIG-2274ea18-1e34-b3f1-ec3f-bf4dc20ef164"
#define MIG_2G "MIG-02cdf2af-19de-2bc1-b4ff-00ae3f1347de"
#define MIG_1G "MIG-7ca07386-cc09-9a1e-7706-4c2c0f552c94"
#define PLAIN_GPU "GPU-303a07b2-8f2d-f760-ae9c-a08b2d7c5048"

/* DGX-1V's hybrid cube-mesh: NVLinks between GPU i and j. */
static const unsigned dgx1_links[8][8] = {
        { 0, 1, 1, 2, 2, 0, 0, 0 }, { 1, 0, 2, 1, 0, 2, 0, 0 }, { 1, 2, 0, 2, 0, 0, 1, 0 },
        { 2, 1, 2, 0, 0, 0, 0, 1 }, { 2, 0, 0, 0, 0, 1, 1, 2 }, { 0, 2, 0, 0, 1, 0, 2, 1 },
        { 0, 0, 1, 0, 1, 2, 0, 2 }, { 0, 0, 0, 1, 2, 1, 2, 0 },
};

/* ---- loading ---- */

static const char *const *hidden;

static void *hiding_lookup(void *ctx, const char *name)
{
        for (size_t i = 0; hidden && hidden[i]; i++)
                if (strcmp(hidden[i], name) == 0)
                        return NULL;
        return dlsym(ctx, name);
}

/* The mock, resolved with the names in hide made invisible. */
static struct nvml_lib *lib_hiding(const char *const *hide, struct diag *diag)
{
        struct nvml_lib *l = xcalloc(1, sizeof(*l));
        l->handle = dlopen(mock_lib, RTLD_NOW | RTLD_LOCAL);
        assert_non_null(l->handle);
        l->path = xstrdup(mock_lib);
        hidden = hide;
        if (nvml_lib_resolve(l, hiding_lookup, l->handle, diag) < 0) {
                nvml_lib_close(l);
                return NULL;
        }
        return l;
}

static void test_lib_open(void **state)
{
        struct nvml_lib *l = NULL;
        struct diag err = { 0 };
        assert_int_equal(nvml_lib_open("/nonexistent-root", &l, &err), 0);
        assert_string_equal(l->path, mock_lib);
        assert_non_null(l->init);
        assert_non_null(l->event_set_wait);
        assert_ptr_equal(l->init, dlsym(l->handle, "nvmlInit_v2"));
        assert_null(l->missing);
        assert_string_equal(nvml_lib_strerror(l, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
        nvml_lib_close(l);

        setenv("DEVLET_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
        assert_int_equal(nvml_lib_open("/", &l, &err), -ENOENT);
        assert_contains(err.message, "/nonexistent/libnvidia-ml.so.1");
        setenv("DEVLET_NVML_LIBRARY", mock_lib, 1);
}

static void test_lib_fallbacks(void **state)
{
        static const char *const hide[] = { "nvmlInit_v2", "nvmlDeviceGetCount_v2",
                                            "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2",
                                            "nvmlEventSetWait_v2",
                                            "nvmlDeviceGetTopologyCommonAncestor", NULL };
        struct diag err = { 0 };
        struct nvml_lib *l = lib_hiding(hide, &err);
        assert_non_null(l);
        assert_ptr_equal(l->init, dlsym(l->handle, "nvmlInit"));
        assert_ptr_equal(l->device_count, dlsym(l->handle, "nvmlDeviceGetCount"));
        assert_null(l->pci_info);
        assert_non_null(l->pci_info_v1);
        assert_ptr_equal(l->event_set_wait, dlsym(l->handle, "nvmlEventSetWait"));
        assert_null(l->common_ancestor);
        assert_int_equal(strv_len(l->missing), 1);
        assert_string_equal(l->missing[0], "nvmlDeviceGetTopologyCommonAncestor");

        /* the inventory still works: PCI addresses from the old layout, no PCIe levels */
        nvml_profile("v100-dgx1");
        assert_int_equal(l->init(), NVML_SUCCESS);
        struct nvml_inventory *inv = NULL;
        struct nvml_inventory_env env = { .sysfs_root = "/nonexistent", .proc_root = "/nonexistent" };
        assert_int_equal(nvml_inventory_load(l, &env, &inv, &err), 0);
        assert_int_equal(inv->n_gpus, 8);
        assert_string_equal(inv->gpus[4].bus_id, "0000:85:00.0");
        assert_int_equal(inv->pcie[0 * 8 + 1], ALLOC_PCIE_UNKNOWN);
        assert_int_equal(inv->nvlinks[0 * 8 + 3], 2);
        nvml_inventory_free(inv);
        l->shutdown();
        nvml_lib_close(l);

        static const char *const no_uuid[] = { "nvmlDeviceGetUUID", NULL };
        assert_null(lib_hiding(no_uuid, &err));
        assert_contains(err.message, "required symbol nvmlDeviceGetUUID");
        static const char *const no_pci[] = { "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2",
                                              "nvmlDeviceGetPciInfo", NULL };
        err = (struct diag){ 0 };
        assert_null(lib_hiding(no_pci, &err));
        assert_contains(err.message, "nvmlDeviceGetPciInfo_v3");
}

/* ---- inventory ---- */

static struct nvml_inventory *inventory_of(struct dev_backend *b)
{
        return ((struct nvidia_backend *)b)->inv;
}

static void test_inventory_dgx1(void **state)
{
        nvml_profile("v100-dgx1");
        /* sysfs wins over NVML for the NUMA node, as NVIDIA reads it */
        tmp_mkdir("sys/bus/pci/devices/0000:86:00.0");
        tmp_write("sys/bus/pci/devices/0000:86:00.0/numa_node", "3\n");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        const struct nvml_inventory *inv = inventory_of(b);
        assert_string_equal(inv->driver_version, "535.161.08");
        assert_int_equal(inv->cuda_version, 12020);
        assert_int_equal(inv->n_gpus, 8);
        assert_string_equal(inv->gpus[0].uuid, V100_0);
        assert_string_equal(inv->gpus[0].name, "Tesla V100-SXM2-32GB");
        assert_string_equal(inv->gpus[0].bus_id, "0000:06:00.0");
        assert_int_equal(inv->gpus[0].cc_major, 7);
        assert_int_equal(inv->gpus[0].minor, 0);
        assert_int_equal(inv->gpus[0].numa_node, 0);
        assert_int_equal(inv->gpus[4].numa_node, 1);
        assert_int_equal(inv->gpus[5].numa_node, 3);
        assert_false(inv->gpus[0].mig_capable);
        for (size_t i = 0; i < 8; i++)
                for (size_t j = 0; j < 8; j++)
                        if (i != j)
                                assert_int_equal(inv->nvlinks[i * 8 + j], dgx1_links[i][j]);
        assert_int_equal(inv->pcie[0 * 8 + 1], ALLOC_PCIE_SINGLE_SWITCH);
        assert_int_equal(inv->pcie[0 * 8 + 2], ALLOC_PCIE_HOST_BRIDGE);
        assert_int_equal(inv->pcie[0 * 8 + 4], ALLOC_PCIE_SYSTEM);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->devices[5].numa_node, 3);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
        char p[PATH_MAX + 64];
        tmp_path(p, sizeof(p), "sys/bus/pci/devices/0000:86:00.0/numa_node");
        unlink(p);
}

static void test_inventory_nvswitch(void **state)
{
        nvml_profile("h100-8x-nvswitch");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        const struct nvml_inventory *inv = inventory_of(b);
        assert_int_equal(inv->n_gpus, 8);
        for (size_t i = 0; i < 8; i++) {
                assert_true(inv->gpus[i].mig_capable);
                assert_false(inv->gpus[i].mig_enabled);
                for (size_t j = 0; j < 8; j++)
                        if (i != j)
                                assert_int_equal(inv->nvlinks[i * 8 + j], 18);
        }
        /* equal NVLink scores: the PCIe path decides the rest */
        assert_int_equal(alloc_link_score(18, inv->pcie[1]) / ALLOC_NVLINK_WEIGHT, 18);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_inventory_mig(void **state)
{
        nvml_profile("a100-mig-mixed");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        const struct nvml_inventory *inv = inventory_of(b);
        size_t migs = 0;
        for (size_t i = 0; i < inv->n_gpus; i++)
                migs += inv->gpus[i].n_migs;
        assert_int_equal(migs, 16);
        const struct nvml_gpu *g0 = &inv->gpus[0];
        assert_true(g0->mig_enabled);
        assert_int_equal(g0->n_migs, 4);
        assert_string_equal(g0->migs[0].uuid, "MIG-db5b5fab-8f4d-3e27-dda1-494c73cf256d");
        assert_string_equal(g0->migs[0].profile, "2g.20gb");
        assert_int_equal(g0->migs[0].gi, 5);
        assert_int_equal(g0->migs[0].multiprocessors, 28);
        assert_string_equal(g0->migs[1].profile, "3g.40gb");
        assert_string_equal(g0->migs[2].profile, "1g.10gb");
        assert_int_equal(g0->migs[2].memory_mib, 9728);
        const struct nvml_gpu *g3 = &inv->gpus[3];
        assert_string_equal(g3->migs[1].profile, "1c.3g.40gb");
        assert_string_equal(g3->migs[2].profile, "2c.3g.40gb");
        assert_int_equal(g3->migs[2].ci, 1);
        assert_false(inv->gpus[4].mig_enabled);
        assert_true(inv->gpus[4].mig_capable);
        /* profiles the GPUs offer, NVIDIA's default mixed resources */
        bool seen_me = false;
        for (size_t k = 0; k < g0->n_mig_profiles; k++)
                seen_me |= strcmp(g0->mig_profiles[k], "1g.10gb+me") == 0;
        assert_true(seen_me);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        nvml_profile("mig-one-plain-one");
        cfg = cfg_yaml(NULL);
        b = backend_new(NULL, cfg);
        inv = inventory_of(b);
        assert_int_equal(inv->n_gpus, 2);
        assert_string_equal(inv->gpus[0].migs[0].profile, "3g.20gb");
        assert_string_equal(inv->gpus[0].migs[1].profile, "2g.10gb");
        assert_string_equal(inv->gpus[0].migs[2].profile, "1g.5gb");
        assert_false(inv->gpus[1].mig_capable && inv->gpus[1].mig_enabled);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_pure_helpers(void **state)
{
        char buf[32];
        const unsigned long long gib80 = 80ULL << 30, gib40 = 40ULL << 30;
        assert_int_equal(nvml_mig_profile_name(NVML_GPU_INSTANCE_PROFILE_1_SLICE,
                                               NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9728, gib80,
                                               buf, sizeof(buf)), 0);
        assert_string_equal(buf, "1g.10gb");
        nvml_mig_profile_name(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
                              NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9728, gib80, buf, sizeof(buf));
        assert_string_equal(buf, "1g.10gb+me");
        nvml_mig_profile_name(NVML_GPU_INSTANCE_PROFILE_3_SLICE,
                              NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 20096, gib40, buf, sizeof(buf));
        assert_string_equal(buf, "2c.3g.20gb");
        nvml_mig_profile_name(NVML_GPU_INSTANCE_PROFILE_7_SLICE,
                              NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, 40192, gib40, buf, sizeof(buf));
        assert_string_equal(buf, "7g.40gb");
        assert_int_equal(nvml_mig_profile_name(99, 0, 1, gib40, buf, sizeof(buf)), -EINVAL);

        const char *minors = "config 1\nmonitor 2\ngpu0/gi1/access 21\ngpu0/gi1/ci0/access 22\n"
                             "gpu1/gi13/access 140\ngpu1/gi13/ci0/access 141";
        assert_int_equal(nvml_mig_minor_lookup(minors, 0, 1, -1), 21);
        assert_int_equal(nvml_mig_minor_lookup(minors, 0, 1, 0), 22);
        assert_int_equal(nvml_mig_minor_lookup(minors, 1, 13, 0), 141);
        assert_int_equal(nvml_mig_minor_lookup(minors, 1, 1, -1), -1);

        nvml_bus_id_normalize("00000000:3B:00.0", buf, sizeof(buf));
        assert_string_equal(buf, "0000:3b:00.0");
        nvml_bus_id_normalize("00010000:3B:00.0", buf, sizeof(buf));
        assert_string_equal(buf, "00010000:3b:00.0");

        assert_true(nvidia_pattern_match("*", "anything"));
        assert_true(nvidia_pattern_match("A100", "NVIDIA A100-SXM4-80GB"));
        assert_true(nvidia_pattern_match("*V100*", "Tesla V100-SXM2-32GB"));
        assert_true(nvidia_pattern_match("Tesla*32GB", "Tesla V100-SXM2-32GB"));
        assert_false(nvidia_pattern_match("*H100*", "Tesla V100-SXM2-32GB"));
        assert_false(nvidia_pattern_match("32GB*Tesla", "Tesla V100-SXM2-32GB"));
        assert_true(nvidia_pattern_match("3g.40gb", "1c.3g.40gb"));
        /* devlet's MIG resource names are GFD's label names */
        char *name = nvidia_mig_resource_name("1g.10gb+me");
        assert_string_equal(name, "nvidia.com/mig-1g.10gb.me");
        free(name);
        name = nvidia_mig_resource_name("1c.3g.40gb");
        assert_string_equal(name, "nvidia.com/mig-1c.3g.40gb");
        free(name);

        char u[37];
        nvidia_random_uuid(u);
        assert_int_equal(strlen(u), 36);
        assert_int_equal(u[14], '4');
}

/* ---- resources ---- */

static void test_mig_strategies(void **state)
{
        nvml_profile("a100-mig-mixed");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 1);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 8); /* MIG-enabled GPUs as whole GPUs */
        assert_string_equal(r->devices[0].id, "GPU-15c1d2df-a996-4aef-012d-0ea67ff12229");
        assert_int_equal(r->devices[0].numa_node, 3);
        assert_true(r->preferred_allocation);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        cfg = cfg_yaml("version: v1\nflags: {migStrategy: mixed}\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 7);
        assert_int_equal(res_find(b, "nvidia.com/gpu")->n_devices, 4);
        assert_int_equal(res_find(b, "nvidia.com/mig-1g.10gb")->n_devices, 9);
        assert_int_equal(res_find(b, "nvidia.com/mig-2g.20gb")->n_devices, 1);
        /* each profile its own resource (NVIDIA's unanchored "3g.40gb" would
         * also take 1c.3g.40gb and 2c.3g.40gb) */
        r = res_find(b, "nvidia.com/mig-3g.40gb");
        assert_int_equal(r->n_devices, 3);
        assert_null(dev_resource_find(r, "MIG-320094ea-d7a9-4ded-9749-1e2370c6a5b8"));
        assert_non_null(dev_resource_find(res_find(b, "nvidia.com/mig-1c.3g.40gb"),
                                          "MIG-320094ea-d7a9-4ded-9749-1e2370c6a5b8"));
        assert_non_null(dev_resource_find(res_find(b, "nvidia.com/mig-2c.3g.40gb"),
                                          "MIG-4b4d8474-a3ea-284d-3bd0-334684e55160"));
        assert_int_equal(res_find(b, "nvidia.com/mig-4g.40gb")->n_devices, 1);
        assert_int_equal(dev_resource_find(r, "MIG-73ab4876-7734-d7c1-c7fd-e805ec99108d")->numa_node,
                         3);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        /* resources.mig patterns match the whole profile name */
        cfg = cfg_yaml("version: v1\nflags: {migStrategy: mixed}\nresources:\n  mig:\n"
                       "    - {pattern: 3g.40gb, name: mig-exact}\n"
                       "    - {pattern: '*c.3g.40gb', name: mig-split}\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(res_find(b, "nvidia.com/mig-exact")->n_devices, 3);
        assert_int_equal(res_find(b, "nvidia.com/mig-split")->n_devices, 2);
        assert_null(res_find(b, "nvidia.com/mig-3g.40gb"));
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        /* single: one profile over the whole node */
        nvml_write("devices:\n"
                   "  - {uuid: GPU-5a000000-0000-0000-0000-000000000000, name: NVIDIA A100-SXM4-40GB,"
                   " memoryMiB: 40960, pciBusId: '00000000:10:00.0', computeCapability: '8.0',\n"
                   "     mig: [{gi: 7, ci: 0, profile: 1g.5gb, uuid: MIG-5a000000-0000-0000-0000-000000000001},"
                   " {gi: 8, ci: 0, profile: 1g.5gb, uuid: MIG-5a000000-0000-0000-0000-000000000002}]}\n"
                   "  - {uuid: GPU-5b000000-0000-0000-0000-000000000000, name: NVIDIA A100-SXM4-40GB,"
                   " memoryMiB: 40960, pciBusId: '00000000:20:00.0', computeCapability: '8.0',\n"
                   "     mig: [{gi: 7, ci: 0, profile: 1g.5gb, uuid: MIG-5b000000-0000-0000-0000-000000000001}]}\n");
        cfg = cfg_yaml("version: v1\nflags: {migStrategy: single}\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 1);
        r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 3);
        assert_string_equal(r->devices[2].id, "MIG-5b000000-0000-0000-0000-000000000001");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_mig_errors(void **state)
{
        /* layouts NVIDIA's plugin refuses: the backend runs (its inventory
         * feeds GFD's MIG-INVALID labels and the metrics) and serves nothing */
        nvml_profile("a100-mig-mixed");
        struct devlet_config *cfg = cfg_yaml("version: v1\nflags: {migStrategy: single}\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 0);
        assert_non_null(nvidia_backend_inventory(b));
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
        char *err = NULL;

        nvml_write("devices:\n"
                   "  - {uuid: GPU-5c000000-0000-0000-0000-000000000000, name: NVIDIA A100-SXM4-40GB,"
                   " memoryMiB: 40960, pciBusId: '00000000:10:00.0', computeCapability: '8.0',\n"
                   "     mig: [{gi: 7, ci: 0, profile: 1g.5gb, uuid: MIG-5c000000-0000-0000-0000-000000000001}]}\n"
                   "  - {uuid: GPU-5d000000-0000-0000-0000-000000000000, name: NVIDIA A100-PCIE-40GB,"
                   " memoryMiB: 40960, pciBusId: '00000000:20:00.0', computeCapability: '8.0'}\n");
        cfg = cfg_yaml("version: v1\nflags: {migStrategy: single}\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 0);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        nvml_write("devices:\n"
                   "  - {uuid: GPU-5e000000-0000-0000-0000-000000000000, name: NVIDIA A100-PCIE-40GB,"
                   " memoryMiB: 40960, pciBusId: '00000000:20:00.0', computeCapability: '8.0'}\n"
                   "  - {uuid: GPU-5f000000-0000-0000-0000-000000000000, name: NVIDIA A100-SXM4-40GB,"
                   " memoryMiB: 40960, pciBusId: '00000000:10:00.0', computeCapability: '8.0', mig: []}\n");
        cfg = cfg_yaml("version: v1\nflags: {migStrategy: mixed}\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 0);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
        /* a sharing selection naming no device still fails, as NVIDIA's */
        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                       "      - {name: nvidia.com/gpu, replicas: 2, devices: [GPU-00000000-0000-0000-0000-000000000000]}\n");
        err = backend_fails(cfg);
        assert_non_null(strstr(err, "no matching device with UUID: GPU-00000000"));
        free(err);
        config_free(cfg);
        /* none takes the GPU whole */
        cfg = cfg_yaml(NULL);
        b = backend_new(NULL, cfg);
        assert_int_equal(res_find(b, "nvidia.com/gpu")->n_devices, 2);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_no_library_no_gpus(void **state)
{
        /* auto: a missing library is no backend; named: an error (or not, without
         * fail-on-init-error) */
        setenv("DEVLET_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = NULL;
        char *err = NULL;
        assert_int_equal(nvidia_backend_ops.create(NULL, cfg, &b, NULL), 0);
        assert_null(b);
        config_free(cfg);
        cfg = cfg_yaml("version: v1\nflags: {backends: [nvidia]}\n");
        err = backend_fails(cfg);
        assert_contains(err, "cannot load libnvidia-ml.so.1");
        free(err);
        cfg->fail_on_init_error = false;
        assert_int_equal(nvidia_backend_ops.create(NULL, cfg, &b, NULL), 0);
        assert_null(b);
        config_free(cfg);
        setenv("DEVLET_NVML_LIBRARY", mock_lib, 1);

        /* NVML there but failing to start */
        nvml_write("initError: NVML_ERROR_DRIVER_NOT_LOADED\ndevices: []\n");
        cfg = cfg_yaml(NULL);
        err = backend_fails(cfg);
        assert_contains(err, "failed to initialize NVML: Driver Not Loaded");
        free(err);
        config_free(cfg);

        nvml_write("devices: []\n");
        cfg = cfg_yaml(NULL);
        assert_int_equal(nvidia_backend_ops.create(NULL, cfg, &b, NULL), 0);
        assert_null(b);
        config_free(cfg);
}

static void test_rename(void **state)
{
        nvml_profile("v100-dgx1");
        struct devlet_config *cfg = cfg_yaml("version: v1\n"
                                             "resources:\n"
                                             "  gpus:\n"
                                             "  - {pattern: 'H100', name: h100}\n"
                                             "  - {pattern: '*V100*', name: v100}\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 1);
        assert_int_equal(res_find(b, "nvidia.com/v100")->n_devices, 8);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        nvml_profile("mig-one-plain-one");
        cfg = cfg_yaml("version: v1\nflags: {migStrategy: mixed}\n"
                       "resources:\n"
                       "  gpus: [{pattern: A100-PCIE, name: pcie}]\n"
                       "  mig: [{pattern: '1g.5gb', name: small}, {pattern: '*g.*', name: big}]\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 3);
        assert_non_null(dev_resource_find(res_find(b, "nvidia.com/pcie"), PLAIN_GPU));
        assert_non_null(dev_resource_find(res_find(b, "nvidia.com/small"), MIG_1G));
        assert_int_equal(res_find(b, "nvidia.com/big")->n_devices, 2);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_time_slicing(void **state)
{
        nvml_profile("v100-dgx1");
        struct devlet_config *cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                                             "    resources: [{name: nvidia.com/gpu, replicas: 4}]\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 1);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 32);
        assert_string_equal(r->devices[0].id, V100_0 "::0");
        assert_string_equal(r->devices[3].id, V100_0 "::3");
        assert_int_equal(r->devices[31].numa_node, 1);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                       "    resources: [{name: gpu, replicas: 2, devices: 2}]\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(res_count(b), 2);
        assert_int_equal(res_find(b, "nvidia.com/gpu")->n_devices, 6);
        r = res_find(b, "nvidia.com/gpu.shared");
        assert_int_equal(r->n_devices, 4);
        assert_string_equal(r->devices[0].id, V100_0 "::0");
        assert_null(dev_resource_find(res_find(b, "nvidia.com/gpu"), V100_0));
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                       "    resources: [{name: gpu, rename: tiny, replicas: 3, devices: ['5', " V100_3 "]}]\n");
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/tiny");
        assert_int_equal(r->n_devices, 6);
        assert_string_equal(r->devices[0].id, V100_3 "::0");
        assert_string_equal(r->devices[5].id, V100_5 "::2");
        assert_int_equal(res_find(b, "nvidia.com/gpu")->n_devices, 6);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        /* not renamed: selected devices replicated beside the plain ones */
        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                       "    resources: [{name: gpu, replicas: 2, devices: ['0']}]\n");
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(res_count(b), 1);
        assert_int_equal(r->n_devices, 9);
        assert_string_equal(r->devices[1].id, V100_0 "::1");
        assert_string_equal(r->devices[2].id, "GPU-881ed162-ae2e-b154-7f15-052434b9b5df");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                       "    resources: [{name: gpu, replicas: 2, devices: 9}]\n");
        char *err = backend_fails(cfg);
        assert_string_equal(err, "unable to get IDs of devices to replicate for 'nvidia.com/gpu' "
                                 "resource: requested 9 devices to be replicated, but only 8 "
                                 "devices available");
        free(err);
        config_free(cfg);
        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                       "    resources: [{name: gpu, replicas: 2, devices: ['12']}]\n");
        err = backend_fails(cfg);
        assert_contains(err, "no matching device at index: 12");
        free(err);
        config_free(cfg);

        /* MIG devices replicated, by index and by the old MIG-GPU- form */
        nvml_profile("mig-one-plain-one");
        cfg = cfg_yaml("version: v1\nflags: {migStrategy: mixed}\nsharing:\n  timeSlicing:\n"
                       "    resources: [{name: mig-3g.20gb, replicas: 2, devices: ['MIG-" MIG_GPU "/1/0']},"
                       " {name: mig-1g.5gb, replicas: 2}]\n");
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/mig-1g.5gb");
        assert_int_equal(r->n_devices, 2);
        assert_string_equal(r->devices[1].id, MIG_1G "::1");
        assert_int_equal(res_find(b, "nvidia.com/mig-3g.20gb")->n_devices, 2);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* ---- Allocate ---- */

static int alloc(struct dev_resource *r, struct dev_alloc *a, struct diag *diag, size_t n, ...)
{
        char *ids[16];
        va_list ap;
        va_start(ap, n);
        for (size_t i = 0; i < n; i++)
                ids[i] = va_arg(ap, char *);
        va_end(ap);
        memset(a, 0, sizeof(*a));
        *diag = (struct diag){ 0 };
        return dev_allocate(r, ids, n, a, diag);
}

static struct dev_backend *mig_backend(const char *flags, struct devlet_config **cfg)
{
        char yaml[512];
        nvml_profile("mig-one-plain-one");
        snprintf(yaml, sizeof(yaml), "version: v1\nflags: {migStrategy: mixed, %s}\n", flags);
        *cfg = cfg_yaml(yaml);
        return backend_new(NULL, *cfg);
}

static void test_allocate_envvar(void **state)
{
        struct devlet_config *cfg;
        struct dev_backend *b = mig_backend("gdsEnabled: true, mofedEnabled: true", &cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        struct dev_alloc a;
        struct diag err = { 0 };
        assert_int_equal(alloc(r, &a, &err, 1, PLAIN_GPU), 0);
        assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), PLAIN_GPU);
        assert_string_equal(env_of(&a, "NVIDIA_GDS"), "enabled");
        assert_string_equal(env_of(&a, "NVIDIA_MOFED"), "enabled");
        assert_null(env_of(&a, "NVIDIA_GDRCOPY"));
        assert_int_equal(a.n_nodes, 0);
        assert_int_equal(a.n_mounts, 0);
        assert_int_equal(a.n_annotations, 0);
        assert_null(a.cdi_devices);
        dev_alloc_release(&a);

        assert_int_equal(alloc(r, &a, &err, 1, "GPU-nope"), -EINVAL);
        assert_string_equal(err.message, "invalid request: unknown device: GPU-nope");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        b = mig_backend("plugin: {deviceIDStrategy: index}", &cfg);
        assert_int_equal(alloc(res_find(b, "nvidia.com/mig-2g.10gb"), &a, &err, 1, MIG_2G), 0);
        assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "0:1");
        dev_alloc_release(&a);
        assert_int_equal(alloc(res_find(b, "nvidia.com/gpu"), &a, &err, 1, PLAIN_GPU), 0);
        assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "1");
        dev_alloc_release(&a);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_allocate_volume_mounts(void **state)
{
        nvml_profile("v100-dgx1");
        struct devlet_config *cfg =
            cfg_yaml("version: v1\nflags: {plugin: {deviceListStrategy: volume-mounts}}\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_alloc a;
        struct diag err = { 0 };
        assert_int_equal(alloc(res_find(b, "nvidia.com/gpu"), &a, &err, 2, V100_3, V100_0), 0);
        assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
        assert_int_equal(a.n_mounts, 2);
        assert_string_equal(a.mounts[0].host_path, "/dev/null");
        assert_string_equal(a.mounts[0].container_path, "/var/run/nvidia-container-devices/" V100_3);
        assert_string_equal(a.mounts[1].container_path, "/var/run/nvidia-container-devices/" V100_0);
        dev_alloc_release(&a);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_allocate_cdi(void **state)
{
        nvml_profile("v100-dgx1");
        struct devlet_config *cfg = cfg_yaml(
            "version: v1\nflags: {gdrcopyEnabled: true, plugin: {deviceListStrategy: cdi-annotations}}\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        struct dev_alloc a;
        struct diag err = { 0 };
        assert_int_equal(alloc(r, &a, &err, 2, V100_0, V100_3), 0);
        assert_int_equal(a.n_annotations, 1);
        const char *prefix = "cdi.k8s.io/nvidia-device-plugin_";
        assert_memory_equal(a.annotations[0].key, prefix, strlen(prefix));
        assert_int_equal(strlen(a.annotations[0].key), strlen(prefix) + 36);
        assert_string_equal(a.annotations[0].value,
                            "k8s.device-plugin.nvidia.com/gpu=" V100_0
                            ",k8s.device-plugin.nvidia.com/gpu=" V100_3
                            ",k8s.device-plugin.nvidia.com/gdrcopy=all");
        /* only CDI strategies: nothing else */
        assert_int_equal(a.n_envs, 0);
        assert_null(a.cdi_devices);
        char *first = xstrdup(a.annotations[0].key);
        dev_alloc_release(&a);
        assert_int_equal(alloc(r, &a, &err, 1, V100_0), 0);
        assert_string_not_equal(a.annotations[0].key, first); /* a new UUID per response */
        free(first);
        dev_alloc_release(&a);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        cfg = cfg_yaml("version: v1\nflags: {gdsEnabled: true, plugin: {deviceListStrategy: "
                       "[envvar, cdi-cri, cdi-annotations], cdiAnnotationPrefix: custom.io/, "
                       "deviceIDStrategy: index}}\n");
        b = backend_new(NULL, cfg);
        assert_int_equal(alloc(res_find(b, "nvidia.com/gpu"), &a, &err, 1, V100_5), 0);
        assert_int_equal(strv_len(a.cdi_devices), 2);
        assert_string_equal(a.cdi_devices[0], "k8s.device-plugin.nvidia.com/gpu=5");
        assert_string_equal(a.cdi_devices[1], "k8s.device-plugin.nvidia.com/gds=all");
        assert_memory_equal(a.annotations[0].key, "custom.io/nvidia-device-plugin_", 31);
        assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "5");
        assert_string_equal(env_of(&a, "NVIDIA_GDS"), "enabled");
        dev_alloc_release(&a);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_allocate_device_specs(void **state)
{
        tmp_write("root/dev/nvidiactl", "");
        tmp_write("root/dev/nvidia-uvm", "");
        tmp_write("proc/driver/nvidia-caps/mig-minors",
                  "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
                  "gpu0/gi5/access 57\ngpu0/gi5/ci0/access 58\n");
        struct devlet_config *cfg;
        struct dev_backend *b = mig_backend("plugin: {passDeviceSpecs: true}", &cfg);
        char root[PATH_MAX + 16], host[PATH_MAX + 64];
        tmp_path(root, sizeof(root), "root");
        struct dev_alloc a;
        struct diag err = { 0 };
        assert_int_equal(alloc(res_find(b, "nvidia.com/gpu"), &a, &err, 1, PLAIN_GPU), 0);
        assert_int_equal(a.n_nodes, 3);
        assert_string_equal(a.nodes[0].container_path, "/dev/nvidiactl");
        snprintf(host, sizeof(host), "%s/dev/nvidiactl", root);
        assert_string_equal(a.nodes[0].host_path, host);
        assert_string_equal(a.nodes[0].permissions, "rw");
        assert_non_null(node_of(&a, "/dev/nvidia-uvm"));
        assert_null(node_of(&a, "/dev/nvidia-uvm-tools"));
        assert_null(node_of(&a, "/dev/nvidia-modeset"));
        snprintf(host, sizeof(host), "%s/dev/nvidia1", root);
        assert_string_equal(node_host(&a, "/dev/nvidia1"), host);
        dev_alloc_release(&a);

        assert_int_equal(alloc(res_find(b, "nvidia.com/mig-3g.20gb"), &a, &err, 1, MIG_3G), 0);
        assert_int_equal(a.n_nodes, 5);
        assert_non_null(node_of(&a, "/dev/nvidia0"));
        assert_non_null(node_of(&a, "/dev/nvidia-caps/nvidia-cap12"));
        snprintf(host, sizeof(host), "%s/dev/nvidia-caps/nvidia-cap13", root);
        assert_string_equal(node_host(&a, "/dev/nvidia-caps/nvidia-cap13"), host);
        dev_alloc_release(&a);

        /* 1g.5gb's instance is not in mig-minors: refused, saying why */
        assert_int_equal(alloc(res_find(b, "nvidia.com/mig-1g.5gb"), &a, &err, 1, MIG_1G), -EINVAL);
        assert_contains(err.message, "gpu0/gi13 is not in nvidia-caps/mig-minors");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_allocate_replicas(void **state)
{
        nvml_profile("v100-dgx1");
        struct devlet_config *cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                                             "    resources: [{name: gpu, replicas: 4}]\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        struct dev_alloc a;
        struct diag err = { 0 };
        assert_int_equal(alloc(r, &a, &err, 3, V100_3 "::1", V100_0 "::2", V100_3 "::0"), 0);
        assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), V100_3 "," V100_0);
        dev_alloc_release(&a);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n"
                       "    resources: [{name: gpu, replicas: 4}]\n");
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(alloc(r, &a, &err, 2, V100_3 "::1", V100_3 "::0"), -EINVAL);
        assert_string_equal(err.message, "invalid request: maximum request size for shared resources is "
                                 "1; found 2");
        assert_int_equal(alloc(r, &a, &err, 1, V100_3 "::1"), 0);
        dev_alloc_release(&a);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        /* MPS: one replica per container, whatever the flag says; unhealthy
         * until the control daemon's marker is there */
        cfg = cfg_yaml("version: v1\nsharing:\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n");
        char root[PATH_MAX + 64];
        tmp_path(root, sizeof(root), "mps");
        struct nvidia_options *opts = config_backend_options(cfg, &nvidia_config_options);
        free(opts->mps_root);
        opts->mps_root = xstrdup(root);
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->devices[0].health, DEV_UNHEALTHY);
        nvidia_backend_ops.destroy(b);
        tmp_mkdir("mps/nvidia.com/gpu");
        /* a FIFO in the marker's place is no marker, and reading it never
         * blocks the loop */
        char marker[PATH_MAX + 64];
        tmp_path(marker, sizeof(marker), "mps/nvidia.com/gpu/.started");
        assert_int_equal(mkfifo(marker, 0600), 0);
        assert_false(nvidia_mps_ready(root, "nvidia.com/gpu"));
        assert_int_equal(unlink(marker), 0);
        tmp_write("mps/nvidia.com/gpu/.started", "ready\n");
        assert_true(nvidia_mps_ready(root, "nvidia.com/gpu"));
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->devices[0].health, DEV_HEALTHY);
        /* what `devlet mps-control-daemon` runs, through the neutral member */
        struct dev_sidecar_daemon *md = NULL;
        assert_int_equal(nvidia_backend_ops.sidecar_daemons(b, &md), 1);
        assert_string_equal(md[0].resource, "nvidia.com/gpu");
        assert_int_equal(md[0].replicas, 2);
        assert_int_equal(md[0].thread_percentage, 50);
        char want[PATH_MAX + 128];
        snprintf(want, sizeof(want), "%s/nvidia.com/gpu/pipe", root);
        assert_string_equal(md[0].pipe_dir, want);
        snprintf(want, sizeof(want), "%s/nvidia.com/gpu/log", root);
        assert_string_equal(md[0].log_dir, want);
        assert_string_equal(md[0].marker, marker);
        assert_string_equal(md[0].root, root);
        dev_sidecar_daemons_free(md, 1);
        assert_int_equal(alloc(r, &a, &err, 2, V100_3 "::1", V100_0 "::0"), -EINVAL);
        assert_contains(err.message, "maximum request size for shared resources is 1");
        assert_int_equal(alloc(r, &a, &err, 1, V100_3 "::1"), 0);
        assert_string_equal(env_of(&a, "CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu/pipe");
        assert_string_equal(env_of(&a, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
        assert_string_equal(env_of(&a, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=16384M");
        assert_int_equal(a.n_mounts, 2);
        assert_string_equal(a.mounts[1].container_path, "/dev/shm");
        dev_alloc_release(&a);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* ---- GetPreferredAllocation ---- */

static char **prefer(struct dev_resource *r, char **must, size_t n_must, size_t size)
{
        char **avail = xcalloc(r->n_devices + 1, sizeof(char *));
        for (size_t i = 0; i < r->n_devices; i++)
                avail[i] = r->devices[i].id;
        char **out = NULL;
        assert_int_equal(dev_preferred(r, avail, r->n_devices, must, n_must, size, &out), 0);
        free(avail);
        return out;
}

static size_t gpu_of_id(struct dev_resource *r, const char *id)
{
        const struct nvidia_dev *nd = dev_resource_find(r, id)->priv;
        return nd->gpu;
}

static unsigned links_of(struct dev_resource *r, char **ids)
{
        unsigned sum = 0;
        for (size_t i = 0; ids[i]; i++)
                for (size_t j = i + 1; ids[j]; j++)
                        sum += dgx1_links[gpu_of_id(r, ids[i])][gpu_of_id(r, ids[j])];
        return sum;
}

/* The most NVLinks any set of size GPUs has. */
static unsigned best_links(size_t size)
{
        unsigned best = 0;
        for (unsigned mask = 0; mask < 256; mask++) {
                if ((size_t)__builtin_popcount(mask) != size)
                        continue;
                unsigned sum = 0;
                for (int i = 0; i < 8; i++)
                        for (int j = i + 1; j < 8; j++)
                                if ((mask >> i & 1) && (mask >> j & 1))
                                        sum += dgx1_links[i][j];
                best = sum > best ? sum : best;
        }
        return best;
}

static void test_preferred_dgx1(void **state)
{
        nvml_profile("v100-dgx1");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        for (size_t size = 2; size <= 6; size++) {
                char **out = prefer(r, NULL, 0, size);
                assert_int_equal(strv_len(out), size);
                assert_int_equal(links_of(r, out), best_links(size));
                strv_free(out);
        }
        char **out = prefer(r, NULL, 0, 4);
        assert_string_equal(out[0], V100_0); /* ties: the lowest indices, {0,1,2,3} */
        assert_string_equal(out[3], V100_3);
        strv_free(out);
        /* GPU 5's NV2 partner under the same host bridge is 6 */
        char must0[] = V100_5;
        char *must[] = { must0 };
        out = prefer(r, must, 1, 2);
        assert_int_equal(strv_len(out), 2);
        assert_int_equal(gpu_of_id(r, out[0]), 5);
        assert_int_equal(gpu_of_id(r, out[1]), 6);
        strv_free(out);
        /* unknown must: refused; unknown available: skipped */
        char nope[] = "GPU-nope", zero[] = V100_0;
        char *bad[] = { nope };
        char **res = NULL;
        assert_int_equal(dev_preferred(r, bad, 1, bad, 1, 1, &res), -EINVAL);
        char *avail[] = { nope, zero };
        assert_int_equal(dev_preferred(r, avail, 2, NULL, 0, 2, &res), 0);
        assert_int_equal(strv_len(res), 1);
        strv_free(res);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_preferred_lost_and_replicas(void **state)
{
        /* GPU 1 lost at start: listed, unhealthy, never chosen */
        nvml_write("devices:\n"
                   "  - {uuid: GPU-60000000-0000-0000-0000-000000000000, name: Tesla V100-SXM2-32GB,"
                   " memoryMiB: 32768, pciBusId: '00000000:06:00.0', computeCapability: '7.0', nvlink: {1: 2, 2: 1}}\n"
                   "  - {uuid: GPU-61000000-0000-0000-0000-000000000000, name: Tesla V100-SXM2-32GB,"
                   " memoryMiB: 32768, pciBusId: '00000000:07:00.0', computeCapability: '7.0', nvlink: {0: 2}, lost: true}\n"
                   "  - {uuid: GPU-62000000-0000-0000-0000-000000000000, name: Tesla V100-SXM2-32GB,"
                   " memoryMiB: 32768, pciBusId: '00000000:08:00.0', computeCapability: '7.0', nvlink: {0: 1}}\n");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 3);
        assert_string_equal(r->devices[1].id, "lost-gpu-1");
        assert_int_equal(r->devices[1].health, DEV_UNHEALTHY);
        char **out = prefer(r, NULL, 0, 2);
        assert_int_equal(strv_len(out), 2);
        assert_string_equal(out[0], "GPU-60000000-0000-0000-0000-000000000000");
        assert_string_equal(out[1], "GPU-62000000-0000-0000-0000-000000000000");
        strv_free(out);
        struct dev_alloc a;
        struct diag err = { 0 };
        assert_int_equal(alloc(r, &a, &err, 1, "lost-gpu-1"), -EINVAL);
        assert_contains(err.message, "unhealthy");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        nvml_profile("v100-dgx1");
        cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                       "    resources: [{name: gpu, replicas: 3, devices: ['0', '1']}]\n");
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/gpu");
        out = prefer(r, NULL, 0, 2); /* distributed: two GPUs */
        assert_int_equal(strv_len(out), 2);
        assert_int_not_equal(gpu_of_id(r, out[0]), gpu_of_id(r, out[1]));
        strv_free(out);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
        cfg = cfg_yaml("version: v1\nflags: {plugin: {sharedDevicesAllocationPolicy: packed}}\n"
                       "sharing:\n  timeSlicing:\n"
                       "    resources: [{name: gpu, rename: shared, replicas: 3, devices: ['0', '1']}]\n");
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/shared");
        out = prefer(r, NULL, 0, 2); /* packed: one GPU */
        assert_int_equal(strv_len(out), 2);
        assert_int_equal(gpu_of_id(r, out[0]), gpu_of_id(r, out[1]));
        strv_free(out);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        /* MIG devices: the generic choice */
        struct dev_backend *m = mig_backend("plugin: {}", &cfg);
        r = res_find(m, "nvidia.com/mig-1g.5gb");
        out = prefer(r, NULL, 0, 1);
        assert_string_equal(out[0], MIG_1G);
        strv_free(out);
        nvidia_backend_ops.destroy(m);
        config_free(cfg);
}

/* Kubernetes quantities, as claims' MPS limits spell them. */
static void test_quantities(void **state)
{
        (void)state;
        static const struct {
                const char *text;
                bool ok;
                unsigned long long bytes;
        } cases[] = {
                { "10Gi", true, 10737418240ULL }, { "512Mi", true, 536870912ULL },
                { "1.5Gi", true, 1610612736ULL }, { "1G", true, 1000000000ULL },
                { "1e9", true, 1000000000ULL },   { "2E3", true, 2000ULL },
                { "1E", true, 1000000000000000000ULL }, { "+4Ki", true, 4096ULL },
                { "1024", true, 1024ULL },        { "1500m", true, 2ULL },
                { ".5Ki", true, 512ULL },         { "", false, 0 },
                { "Gi", false, 0 },               { "-1Gi", false, 0 },
                { "10GB", false, 0 },             { "10 Gi", false, 0 },
                { "1e99", false, 0 },             { "8Ei", false, 0 },
                { "1.2.3", false, 0 },            { "ten", false, 0 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                unsigned long long got = 0;
                bool ok = nvidia_quantity_bytes(cases[i].text, &got);
                if (ok != cases[i].ok || (ok && got != cases[i].bytes))
                        fail_msg("%s: ok=%d bytes=%llu, want ok=%d bytes=%llu", cases[i].text, ok,
                                 got, cases[i].ok, cases[i].bytes);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lib_open),
                cmocka_unit_test(test_lib_fallbacks),
                cmocka_unit_test(test_inventory_dgx1),
                cmocka_unit_test(test_inventory_nvswitch),
                cmocka_unit_test(test_inventory_mig),
                cmocka_unit_test(test_pure_helpers),
                cmocka_unit_test(test_quantities),
                cmocka_unit_test(test_mig_strategies),
                cmocka_unit_test(test_mig_errors),
                cmocka_unit_test(test_no_library_no_gpus),
                cmocka_unit_test(test_rename),
                cmocka_unit_test(test_time_slicing),
                cmocka_unit_test(test_allocate_envvar),
                cmocka_unit_test(test_allocate_volume_mounts),
                cmocka_unit_test(test_allocate_cdi),
                cmocka_unit_test(test_allocate_device_specs),
                cmocka_unit_test(test_allocate_replicas),
                cmocka_unit_test(test_preferred_dgx1),
                cmocka_unit_test(test_preferred_lost_and_replicas),
        };
        return cmocka_run_group_tests(tests, nvidia_group_setup, nvidia_group_teardown);
}
