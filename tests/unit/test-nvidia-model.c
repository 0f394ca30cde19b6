/* The NVIDIA backend's DRA model (devices/nvidia/model.c) against the mock
 * libnvidia-ml.so.1: gpu.nvidia.com's names, attribute types and values for
 * whole GPUs and MIG devices, versions normalised as NVIDIA's driver does,
 * the PCIe root from a fake sysfs, the NVLink clique, replicas sharing one
 * model, lost GPUs without one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "nvidia-test.h"

#include "labels/labels.h"

#define H100_0 "GPU-6513270e-269e-0d37-f2a7-4de452e6b438"
#define A100_0 "GPU-15c1d2df-a996-4aef-012d-0ea67ff12229"
#define MIG_2G "MIG-db5b5fab-8f4d-3e27-dda1-494c73cf256d"
#define MIG_3G "MIG-73ab4876-7734-d7c1-c7fd-e805ec99108d"
#define CLUSTER "5c1b0e6a-3f0e-4a8e-9d4c-0b7f2c9e1a11"

static const struct dev_device *dev_by_id(struct dev_backend *b, const char *id)
{
        size_t n;
        struct dev_resource **res = nvidia_backend_ops.resources(b, &n);
        for (size_t i = 0; i < n; i++) {
                struct dev_device *d = dev_resource_find(res[i], id);
                if (d)
                        return d;
        }
        fail_msg("no device %s", id);
        return NULL;
}

/* The value of a string attribute (type must match). */
static const char *attr_s(const struct dev_model *m, const char *name)
{
        const struct dev_attr *a = dev_model_attr(m, name);
        if (!a)
                return NULL;
        assert_int_equal(a->type, DEV_ATTR_STRING);
        return a->s;
}

static const char *attr_v(const struct dev_model *m, const char *name)
{
        const struct dev_attr *a = dev_model_attr(m, name);
        assert_non_null(a);
        assert_int_equal(a->type, DEV_ATTR_VERSION);
        return a->s;
}

static const char *cap(const struct dev_model *m, const char *name)
{
        for (size_t i = 0; i < m->n_capacity; i++)
                if (strcmp(m->capacity[i].name, name) == 0)
                        return m->capacity[i].value;
        return NULL;
}

static bool dns_label(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* Every device has a model with a DNS-label name; units (devices that are
 * not replicas of one another) have distinct names: returns how many. */
static size_t distinct_names(struct dev_backend *b)
{
        size_t n, count = 0;
        struct dev_resource **res = nvidia_backend_ops.resources(b, &n);
        char **seen = NULL;
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < res[i]->n_devices; k++) {
                        const struct dev_model *m = res[i]->devices[k].model;
                        assert_non_null(m);
                        assert_true(dns_label(m->name));
                        if (!strv_contains(seen, m->name)) {
                                seen = strv_push(seen, m->name);
                                count++;
                        }
                }
        strv_free(seen);
        return count;
}

static void test_gpu_h100(void **state)
{
        (void)state;
        /* GPU 0 behind a root port of root complex pci0000:17, as in /sys */
        tmp_mkdir("sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0");
        char link[PATH_MAX + 64];
        tmp_path(link, sizeof(link), "sys/bus/pci/devices/0000:18:00.0");
        unlink(link);
        assert_int_equal(symlink("../../../devices/pci0000:17/0000:17:01.0/0000:18:00.0", link), 0);
        nvml_profile("h100-8x-nvswitch");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        const struct dev_model *m = dev_by_id(b, H100_0)->model;
        assert_non_null(m);
        assert_string_equal(m->name, "gpu-0");
        assert_string_equal(attr_s(m, "type"), "gpu");
        assert_string_equal(attr_s(m, "uuid"), H100_0);
        assert_string_equal(attr_s(m, "productName"), "NVIDIA H100 80GB HBM3");
        assert_string_equal(attr_s(m, "brand"), "Nvidia");
        assert_string_equal(attr_s(m, "architecture"), "Hopper");
        assert_string_equal(attr_v(m, "cudaComputeCapability"), "9.0.0");
        assert_string_equal(attr_v(m, "driverVersion"), "550.54.15");
        assert_string_equal(attr_v(m, "cudaDriverVersion"), "12.4.0");
        assert_string_equal(attr_s(m, "resource.kubernetes.io/pciBusID"), "0000:18:00.0");
        assert_string_equal(attr_s(m, "pcieBusID"), "0000:18:00.0");
        assert_string_equal(attr_s(m, "resource.kubernetes.io/pcieRoot"), "pci0000:17");
        const struct dev_attr *numa = dev_model_attr(m, "resource.kubernetes.io/numaNode");
        assert_non_null(numa);
        assert_int_equal(numa->type, DEV_ATTR_INT);
        assert_int_equal(numa->i, 0);
        assert_null(dev_model_attr(m, "cliqueID")); /* no multi-node fabric */
        assert_int_equal(m->n_capacity, 1);
        assert_string_equal(cap(m, "memory"), "81559Mi");
        /* GPU 1 has no sysfs entry here: no root, the rest as GPU 0 */
        const struct dev_model *m1 =
                res_find(b, "nvidia.com/gpu")->devices[1].model;
        assert_string_equal(m1->name, "gpu-1");
        assert_null(dev_model_attr(m1, "resource.kubernetes.io/pcieRoot"));
        assert_int_equal(dev_model_attr(m1, "resource.kubernetes.io/numaNode")->i, 0);
        assert_int_equal(distinct_names(b), 8);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* NVIDIA's driver reads versions with Masterminds/semver: leading zeros
 * dropped, missing parts as 0; CUDA's integer as "<major>.<minor>". */
static void test_versions(void **state)
{
        (void)state;
        nvml_profile("v100-dgx1"); /* driver 535.161.08, CUDA 12020 */
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        const struct dev_model *m = res_find(b, "nvidia.com/gpu")->devices[0].model;
        assert_string_equal(attr_v(m, "driverVersion"), "535.161.8");
        assert_string_equal(attr_v(m, "cudaDriverVersion"), "12.2.0");
        assert_string_equal(attr_v(m, "cudaComputeCapability"), "7.0.0");
        assert_string_equal(attr_s(m, "brand"), "Tesla");
        assert_string_equal(attr_s(m, "architecture"), "Volta");
        assert_string_equal(cap(m, "memory"), "32Gi");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        nvml_write("driverVersion: \"580.65.06\"\ncudaDriverVersion: 12080\ndevices:\n"
                   "  - {uuid: GPU-70000000-0000-0000-0000-000000000000, name: NVIDIA L4,"
                   " memoryMiB: 23034, pciBusId: '00000000:31:00.0', computeCapability: '8.9',"
                   " brand: nvidia, architecture: ada, minor: 3}\n");
        cfg = cfg_yaml(NULL);
        b = backend_new(NULL, cfg);
        m = res_find(b, "nvidia.com/gpu")->devices[0].model;
        assert_string_equal(m->name, "gpu-3"); /* the minor, not the index */
        assert_string_equal(attr_v(m, "driverVersion"), "580.65.6");
        assert_string_equal(attr_v(m, "cudaDriverVersion"), "12.8.0");
        assert_string_equal(attr_v(m, "cudaComputeCapability"), "8.9.0");
        assert_string_equal(attr_s(m, "architecture"), "Ada Lovelace");
        assert_string_equal(cap(m, "memory"), "23034Mi");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        nvml_profile("a100-mig-single"); /* driver "535.104" */
        cfg = cfg_yaml("version: v1\nflags: {migStrategy: single}\n");
        b = backend_new(NULL, cfg);
        m = res_find(b, "nvidia.com/gpu")->devices[0].model;
        assert_string_equal(attr_v(m, "driverVersion"), "535.104.0");
        assert_string_equal(attr_s(m, "type"), "mig");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

static void test_mig(void **state)
{
        (void)state;
        nvml_profile("a100-mig-mixed");
        struct devlet_config *cfg = cfg_yaml("version: v1\nflags: {migStrategy: mixed}\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        /* 2g.20gb: GPU instance profile 14 on memory slices 0-1 */
        const struct dev_model *m = dev_by_id(b, MIG_2G)->model;
        assert_string_equal(m->name, "gpu-0-mig-2g20gb-14-0");
        assert_string_equal(attr_s(m, "type"), "mig");
        assert_string_equal(attr_s(m, "uuid"), MIG_2G);
        assert_string_equal(attr_s(m, "parentUUID"), A100_0);
        assert_string_equal(attr_s(m, "profile"), "2g.20gb");
        assert_string_equal(attr_s(m, "productName"), "NVIDIA A100-SXM4-80GB");
        assert_string_equal(attr_s(m, "architecture"), "Ampere");
        assert_string_equal(attr_v(m, "cudaComputeCapability"), "8.0.0");
        assert_string_equal(attr_s(m, "resource.kubernetes.io/pciBusID"), "0000:07:00.0");
        assert_string_equal(cap(m, "multiprocessors"), "28");
        assert_string_equal(cap(m, "copyEngines"), "2");
        assert_string_equal(cap(m, "decoders"), "1");
        assert_string_equal(cap(m, "encoders"), "0");
        assert_string_equal(cap(m, "jpegEngines"), "0");
        assert_string_equal(cap(m, "ofaEngines"), "0");
        assert_string_equal(cap(m, "memory"), "19968Mi");
        assert_string_equal(cap(m, "memorySlice0"), "1");
        assert_string_equal(cap(m, "memorySlice1"), "1");
        assert_null(cap(m, "memorySlice2"));
        /* 3g.40gb: profile 9 on slices 4-7 */
        m = dev_by_id(b, MIG_3G)->model;
        assert_string_equal(m->name, "gpu-0-mig-3g40gb-9-4");
        for (int i = 4; i < 8; i++) {
                char s[32];
                snprintf(s, sizeof(s), "memorySlice%d", i);
                assert_string_equal(cap(m, s), "1");
        }
        assert_null(cap(m, "memorySlice3"));
        /* GPU 3's second 3g.40gb split in 1c + 2c: one GPU instance, two
         * names told apart by the compute instance */
        const struct dev_model *c1 = res_find(b, "nvidia.com/mig-1c.3g.40gb")->devices[0].model;
        const struct dev_model *c2 = res_find(b, "nvidia.com/mig-2c.3g.40gb")->devices[0].model;
        assert_true(strncmp(c1->name, "gpu-3-mig-1c3g40gb-9-4-", 23) == 0);
        assert_true(strncmp(c2->name, "gpu-3-mig-2c3g40gb-9-4-", 23) == 0);
        assert_string_equal(attr_s(c1, "profile"), "1c.3g.40gb");
        assert_string_equal(cap(c1, "multiprocessors"), "14");
        /* 16 MIG devices on GPUs 0-3, whole GPUs 4-7: every name unique */
        assert_int_equal(distinct_names(b), 20);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);

        /* strategy none: the MIG-enabled GPU is served, and published, whole */
        cfg = cfg_yaml(NULL);
        b = backend_new(NULL, cfg);
        m = dev_by_id(b, A100_0)->model;
        assert_string_equal(m->name, "gpu-0");
        assert_string_equal(attr_s(m, "type"), "gpu");
        assert_string_equal(cap(m, "memory"), "80Gi");
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* Time-slicing replicas are one DRA device: copies of one model. */
static void test_replicas(void **state)
{
        (void)state;
        nvml_profile("v100-dgx1");
        struct devlet_config *cfg = cfg_yaml("version: v1\nsharing:\n  timeSlicing:\n"
                                             "    resources: [{name: gpu, replicas: 3}]\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 24);
        for (size_t k = 0; k < r->n_devices; k++) {
                const struct dev_model *m = r->devices[k].model;
                char want[32];
                snprintf(want, sizeof(want), "gpu-%zu", k / 3);
                assert_string_equal(m->name, want);
                if (k % 3) {
                        assert_ptr_not_equal(m, r->devices[k - 1].model); /* each owns its copy */
                        assert_true(dev_model_equal(m, r->devices[k - 1].model));
                }
        }
        assert_int_equal(distinct_names(b), 8);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* The clique of a completed fabric registration; none while in progress;
 * no model for a GPU lost at start. */
static void test_clique_and_lost(void **state)
{
        (void)state;
        nvml_write("devices:\n"
                   "  - {uuid: GPU-80000000-0000-0000-0000-000000000000, name: NVIDIA GB200,"
                   " memoryMiB: 189471, pciBusId: '00000008:01:00.0', computeCapability: '10.0',"
                   " fabric: {clusterUuid: " CLUSTER ", cliqueId: 7}}\n"
                   "  - {uuid: GPU-81000000-0000-0000-0000-000000000000, name: NVIDIA GB200,"
                   " memoryMiB: 189471, pciBusId: '00000009:01:00.0', computeCapability: '10.0',"
                   " fabric: {clusterUuid: " CLUSTER ", cliqueId: 7, state: in_progress}}\n"
                   "  - {uuid: GPU-82000000-0000-0000-0000-000000000000, name: NVIDIA GB200,"
                   " memoryMiB: 189471, pciBusId: '00000018:01:00.0', computeCapability: '10.0',"
                   " lost: true}\n"
                   "  - {uuid: GPU-83000000-0000-0000-0000-000000000000, name: NVIDIA GB200,"
                   " memoryMiB: 189471, pciBusId: '00000019:01:00.0', computeCapability: '10.0',"
                   " fabric: {cliqueId: 7}}\n");
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 4);
        const struct dev_model *m = r->devices[0].model;
        assert_string_equal(attr_s(m, "cliqueID"), CLUSTER ".7");
        assert_string_equal(attr_s(m, "architecture"), "Blackwell");
        assert_string_equal(attr_s(m, "resource.kubernetes.io/pciBusID"), "0008:01:00.0");
        assert_null(dev_model_attr(r->devices[1].model, "cliqueID"));
        assert_string_equal(r->devices[2].id, "lost-gpu-2");
        assert_null(r->devices[2].model);
        assert_null(dev_model_attr(r->devices[3].model, "cliqueID")); /* zero cluster UUID */
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* Grace (tests/mock-nvml/profiles): a GH200 reaches system memory through
 * ATS and sits on no multi-node fabric; a GB200 NVL72 tray's four GPUs name
 * one clique, which is GFD's nvidia.com/gpu.clique label and each GPU's
 * cliqueID. */
static void test_grace(void **state)
{
        (void)state;
        nvml_profile("gh200");
        struct devlet_config *cfg = cfg_yaml(NULL);
        cfg->labels_no_timestamp = true;
        struct dev_backend *b = backend_new(NULL, cfg);
        struct dev_resource *r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 1);
        const struct dev_model *m = r->devices[0].model;
        assert_string_equal(attr_s(m, "productName"), "NVIDIA GH200 480GB");
        assert_string_equal(attr_s(m, "architecture"), "Hopper");
        assert_string_equal(attr_s(m, "addressingMode"), "ATS");
        assert_string_equal(attr_s(m, "resource.kubernetes.io/pciBusID"), "0009:01:00.0");
        assert_null(dev_model_attr(m, "cliqueID"));
        struct labels_backend lb = { &nvidia_backend_ops, b };
        struct dev_labels set = { 0 };
        char **warnings = NULL;
        labels_collect(cfg, &lb, 1, &set, &warnings);
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.product"), "NVIDIA-GH200-480GB");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.family"), "hopper");
        assert_null(dev_labels_get(&set, "nvidia.com/gpu.clique"));
        strv_free(warnings);
        dev_labels_release(&set);
        nvidia_backend_ops.destroy(b);

        nvml_profile("gb200-nvl-tray");
        b = backend_new(NULL, cfg);
        r = res_find(b, "nvidia.com/gpu");
        assert_int_equal(r->n_devices, 4);
        for (size_t i = 0; i < 4; i++) {
                m = r->devices[i].model;
                assert_string_equal(attr_s(m, "architecture"), "Blackwell");
                assert_string_equal(attr_s(m, "addressingMode"), "ATS");
                assert_string_equal(attr_s(m, "cliqueID"),
                                    "4a6f1c2e-8d3b-4f7a-9c15-2e8b7d6a5f01.32766");
        }
        lb.backend = b;
        warnings = NULL;
        labels_collect(cfg, &lb, 1, &set, &warnings);
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.clique"),
                            "4a6f1c2e-8d3b-4f7a-9c15-2e8b7d6a5f01.32766");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.count"), "4");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.product"), "NVIDIA-GB200");
        strv_free(warnings); /* the fake root has no DMI machine type */
        dev_labels_release(&set);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_gpu_h100),
                cmocka_unit_test(test_versions),
                cmocka_unit_test(test_mig),
                cmocka_unit_test(test_replicas),
                cmocka_unit_test(test_clique_and_lost),
                cmocka_unit_test(test_grace),
        };
        return cmocka_run_group_tests(tests, nvidia_group_setup, nvidia_group_teardown);
}
