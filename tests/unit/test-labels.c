/* Unit tests for labels/: Kubernetes' key and value rules, the sanitiser
 * (long product names get a hash, never an invalid value), label sets and
 * their file form, GFD's rules on hand-built NVIDIA facts (sharing, MIG
 * strategies, versions, families), and labels_collect's checks with a
 * fake backend.  The mock-NVML golden files are checked end to end in
 * tests/integration/test_labels.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/config.h"
#include "devices/device.h"
#include "devices/nvidia/gfd-labels.h"
#include "labels/labels.h"

DEFINE_CLEANUP_FUNC(struct devlet_config, config_free)
#define _cleanup_config_ _cleanup_(config_freep)

static void assert_label(const struct dev_labels *s, const char *key, const char *value)
{
        const char *got = dev_labels_get(s, key);
        if (!got)
                fail_msg("label %s missing", key);
        if (strcmp(got, value) != 0)
                fail_msg("label %s: got \"%s\", want \"%s\"", key, got, value);
}

static void assert_no_label(const struct dev_labels *s, const char *key)
{
        const char *got = dev_labels_get(s, key);
        if (got)
                fail_msg("label %s present (\"%s\")", key, got);
}

/* A config with the defaults plus YAML (NULL: none). */
static struct devlet_config *config_with(const char *yaml)
{
        struct devlet_config *cfg = config_new_defaults(dev_config_families());
        free(cfg->machine_type_file);
        cfg->machine_type_file = xstrdup("");
        if (yaml) {
                struct diag d = { 0 };
                int r = config_parse_yaml("test.yaml", yaml, strlen(yaml), cfg, &d);
                if (r < 0)
                        fail_msg("config: %s", d.message);
        }
        return cfg;
}

/* ---- rules ---- */

static void test_valid_keys(void **state)
{
        static const char *const good[] = { "nvidia.com/gpu.product", "devlet.io/fuse.count",
                                            "nvidia.com/mig-1g.10gb.engines.copy", "simple",
                                            "a.b-c/X_y.Z" };
        static const char *const bad[] = { "", "/x", "nvidia.com/", "Nvidia.com/x",
                                           "nvidia..com/x", "-nvidia.com/x", "nvidia.com/-x",
                                           "nvidia.com/x-", "nvidia.com/a/b", "nvidia.com/a b",
                                           "nvidia.com/caf\xc3\xa9" };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                if (!labels_valid_key(good[i]))
                        fail_msg("key \"%s\" refused", good[i]);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (labels_valid_key(bad[i]))
                        fail_msg("key \"%s\" accepted", bad[i]);
        char key[128];
        snprintf(key, sizeof(key), "devlet.io/%063d", 0);
        assert_true(labels_valid_key(key));
        snprintf(key, sizeof(key), "devlet.io/%064d", 0);
        assert_false(labels_valid_key(key));
        assert_false(labels_valid_key(NULL));
}

static void test_valid_values(void **state)
{
        static const char *const good[] = { "", "0", "true", "NVIDIA-H100-80GB-HBM3",
                                            "550.54.15", "a_b.c-d" };
        static const char *const bad[] = { "-x", "x-", ".x", "x.", "a b", "a/b", "a=b",
                                           "NVIDIA H100", "caf\xc3\xa9" };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                if (!labels_valid_value(good[i]))
                        fail_msg("value \"%s\" refused", good[i]);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (labels_valid_value(bad[i]))
                        fail_msg("value \"%s\" accepted", bad[i]);
        char v[80];
        memset(v, 'a', 63);
        v[63] = '\0';
        assert_true(labels_valid_value(v));
        v[63] = 'a';
        v[64] = '\0';
        assert_false(labels_valid_value(v));
}

static void test_sanitize(void **state)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3" },
                { "  Tesla   V100-SXM2-32GB ", "Tesla-V100-SXM2-32GB" },
                { "PowerEdge R750 (rev. 2)", "PowerEdge-R750-rev.-2" },
                { "-_.weird._-", "weird" },
                { "caf\xc3\xa9 GPU", "caf-GPU" },
                { "!!!", "" },
                { "", "" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *got = labels_value_sanitize(cases[i].in);
                if (strcmp(got, cases[i].out) != 0)
                        fail_msg("sanitize(\"%s\") = \"%s\", want \"%s\"", cases[i].in, got,
                                 cases[i].out);
                assert_true(labels_valid_value(got));
        }

        /* long names: 63 characters, a hash keeps distinct names distinct */
        const char *a = "NVIDIA Graphics Device With A Very Long Marketing Name 96GB HBM3e-MIG-1g.12gb-SHARED";
        const char *b = "NVIDIA Graphics Device With A Very Long Marketing Name 96GB HBM3e-MIG-2g.24gb-SHARED";
        _cleanup_free_ char *sa = labels_value_sanitize(a);
        _cleanup_free_ char *sb = labels_value_sanitize(b);
        assert_int_equal(strlen(sa), 63);
        assert_true(labels_valid_value(sa));
        assert_true(labels_valid_value(sb));
        assert_string_not_equal(sa, sb);
        assert_memory_equal(sa, "NVIDIA-Graphics-Device-With-A-Very-Long-Marketing-Name", 54);
        assert_int_equal(sa[54], '-');
        _cleanup_free_ char *again = labels_value_sanitize(a);
        assert_string_equal(sa, again); /* stable across runs */

        /* the cut never leaves a separator before the hash */
        char dots[100];
        memset(dots, 'x', sizeof(dots));
        dots[53] = '.';
        dots[99] = '\0';
        _cleanup_free_ char *sd = labels_value_sanitize(dots);
        assert_true(labels_valid_value(sd));
        assert_int_equal(strlen(sd), 62);
}

static void test_set_and_format(void **state)
{
        struct dev_labels s = { 0 };
        dev_labels_put(&s, "b.io/x", "1");
        dev_labels_put(&s, "a.io/y", "2");
        dev_labels_putf(&s, "b.io/x", "%d", 3); /* replaces */
        dev_labels_put(&s, "c.io/empty", "");
        assert_int_equal(s.n, 3);
        assert_label(&s, "b.io/x", "3");
        assert_null(dev_labels_get(&s, "nope"));
        size_t len = 0;
        _cleanup_free_ char *text = labels_format(&s, &len);
        assert_string_equal(text, "a.io/y=2\nb.io/x=3\nc.io/empty=\n");
        assert_int_equal(len, strlen(text));
        dev_labels_release(&s);
        _cleanup_free_ char *empty = labels_format(&s, &len);
        assert_string_equal(empty, "");
        assert_int_equal(len, 0);
}

/* ---- GFD's rules ---- */

static const struct nvidia_gfd_gpu h100 = {
        .name = "NVIDIA H100 80GB HBM3", .memory_mib = 81559, .cc_major = 9, .cc_minor = 0,
        .mig_capable = true,
};

static struct nvidia_gfd_node node_of(const struct nvidia_gfd_gpu *gpus, size_t n)
{
        return (struct nvidia_gfd_node){ .driver_version = "550.54.15", .cuda_version = 12040,
                                       .gpus = gpus, .n_gpus = n };
}

static void test_full_gpu(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        struct nvidia_gfd_gpu gpus[2] = { h100, h100 };
        struct nvidia_gfd_node node = node_of(gpus, 2);
        struct dev_labels s = { 0 };
        char **warnings = NULL;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_null(warnings);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3");
        assert_label(&s, "nvidia.com/gpu.count", "2");
        assert_label(&s, "nvidia.com/gpu.replicas", "1");
        assert_label(&s, "nvidia.com/gpu.sharing-strategy", "none");
        assert_label(&s, "nvidia.com/gpu.memory", "81559");
        assert_label(&s, "nvidia.com/gpu.family", "hopper");
        assert_label(&s, "nvidia.com/gpu.compute.major", "9");
        assert_label(&s, "nvidia.com/gpu.compute.minor", "0");
        assert_label(&s, "nvidia.com/gpu.machine", "unknown");
        assert_label(&s, "nvidia.com/mig.capable", "true");
        assert_label(&s, "nvidia.com/mps.capable", "false");
        assert_label(&s, "nvidia.com/cuda.driver-version.full", "550.54.15");
        assert_label(&s, "nvidia.com/cuda.driver-version.major", "550");
        assert_label(&s, "nvidia.com/cuda.driver-version.minor", "54");
        assert_label(&s, "nvidia.com/cuda.driver-version.revision", "15");
        assert_label(&s, "nvidia.com/cuda.driver.major", "550");
        assert_label(&s, "nvidia.com/cuda.driver.minor", "54");
        assert_label(&s, "nvidia.com/cuda.driver.rev", "15");
        assert_label(&s, "nvidia.com/cuda.runtime-version.full", "12.4");
        assert_label(&s, "nvidia.com/cuda.runtime-version.major", "12");
        assert_label(&s, "nvidia.com/cuda.runtime-version.minor", "4");
        assert_label(&s, "nvidia.com/cuda.runtime.major", "12");
        assert_label(&s, "nvidia.com/cuda.runtime.minor", "4");
        assert_label(&s, "nvidia.com/gpu.mode", "unknown");
        assert_label(&s, "nvidia.com/vgpu.present", "false");
        assert_no_label(&s, "nvidia.com/mig.strategy");
        assert_int_equal(s.n, 25);
        dev_labels_release(&s);

        /* no GPU: no labels at all */
        struct nvidia_gfd_node none = node_of(NULL, 0);
        nvidia_gfd_labels(&none, cfg, &s, &warnings);
        assert_int_equal(s.n, 0);
}

static void test_machine_type(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        char path[] = "/tmp/devlet-test-machine-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        /* straight into /tmp: fs_write_atomic refuses a world-writable directory */
        assert_int_equal(write(fd, "  DGX H100 \n", 12), 12);
        close(fd);
        free(cfg->machine_type_file);
        cfg->machine_type_file = xstrdup(path);
        struct nvidia_gfd_node node = node_of(&h100, 1);
        struct dev_labels s = { 0 };
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/gpu.machine", "DGX-H100");
        dev_labels_release(&s);
        unlink(path);

        /* unreadable: "unknown" and a warning */
        char **warnings = NULL;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_label(&s, "nvidia.com/gpu.machine", "unknown");
        assert_int_equal(strv_len(warnings), 1);
        assert_non_null(strstr(warnings[0], path));
        strv_free(warnings);
        dev_labels_release(&s);
}

static void test_versions(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        struct nvidia_gfd_node node = node_of(&h100, 1);
        struct dev_labels s = { 0 };

        node.driver_version = "535.104";
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/cuda.driver-version.revision", "");
        assert_label(&s, "nvidia.com/cuda.driver.rev", "");
        assert_label(&s, "nvidia.com/cuda.driver-version.minor", "104");
        dev_labels_release(&s);

        static const char *const bad[] = { "550", "1.2.3.4", "", NULL };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char **warnings = NULL;
                node.driver_version = bad[i];
                node.cuda_version = 0;
                nvidia_gfd_labels(&node, cfg, &s, &warnings);
                assert_no_label(&s, "nvidia.com/cuda.driver-version.full");
                assert_no_label(&s, "nvidia.com/cuda.runtime-version.full");
                assert_int_equal(strv_len(warnings), 2);
                assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3");
                strv_free(warnings);
                dev_labels_release(&s);
        }
        node.driver_version = "470.57.02";
        node.cuda_version = 11040;
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/cuda.runtime-version.full", "11.4");
        assert_label(&s, "nvidia.com/cuda.driver-version.revision", "02");
        dev_labels_release(&s);
}

static void test_gpu_mode(void **state)
{
        assert_string_equal(nvidia_gpu_mode("0x030200"), "compute");
        assert_string_equal(nvidia_gpu_mode("0x030000"), "graphics");
        assert_string_equal(nvidia_gpu_mode("0x038000"), "unknown");
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        struct nvidia_gfd_node node = node_of(&h100, 1);
        struct dev_labels s = { 0 };
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/gpu.mode", "unknown"); /* sysfs cannot tell */
        assert_label(&s, "nvidia.com/vgpu.present", "false");
        dev_labels_release(&s);
        struct nvidia_gfd_gpu two[2] = { h100, h100 };
        two[0].pci_class = two[1].pci_class = "0x030200";
        node.gpus = two;
        node.n_gpus = 2;
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/gpu.mode", "compute");
        dev_labels_release(&s);
        /* every GPU counts, not the first: modes that differ are unknown */
        two[1].pci_class = "0x030000";
        two[1].vgpu = true;
        char **warnings = NULL;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_label(&s, "nvidia.com/gpu.mode", "unknown");
        assert_label(&s, "nvidia.com/vgpu.present", "true");
        assert_non_null(warnings);
        assert_non_null(strstr(warnings[0], "0:compute, 1:graphics"));
        strv_free(warnings);
        dev_labels_release(&s);
}

static void test_vgpu_signature(void **state)
{
        uint8_t c[256] = { 0 };
        assert_false(nvidia_pci_config_is_vgpu(c, sizeof(c)));
        c[0x06] = 0x10;                       /* capability list present */
        c[0x34] = 0x40;                       /* first capability */
        c[0x40] = 0x01, c[0x41] = 0x60;       /* power management, next at 0x60 */
        c[0x60] = 0x09, c[0x61] = 0x00, c[0x62] = 0x14; /* vendor-specific, 20 bytes */
        assert_false(nvidia_pci_config_is_vgpu(c, sizeof(c)));
        c[0x63] = 0x56;
        assert_true(nvidia_pci_config_is_vgpu(c, sizeof(c)));
        c[0x63] = 0, c[0x64] = 0x46;
        assert_true(nvidia_pci_config_is_vgpu(c, sizeof(c)));
        assert_false(nvidia_pci_config_is_vgpu(c, 0x64)); /* capability cut short */
        c[0x61] = 0x40, c[0x60] = 0x05;       /* a loop, no vendor capability */
        assert_false(nvidia_pci_config_is_vgpu(c, sizeof(c)));
}

static void test_families(void **state)
{
        static const struct {
                int major, minor;
                const char *family;
        } cases[] = {
                { 1, 3, "tesla" },    { 2, 0, "fermi" },   { 3, 7, "kepler" },
                { 5, 2, "maxwell" },  { 6, 0, "pascal" },  { 7, 0, "volta" },
                { 7, 2, "volta" },    { 7, 5, "turing" },  { 8, 0, "ampere" },
                { 8, 6, "ampere" },   { 8, 9, "ada-lovelace" }, { 9, 0, "hopper" },
                { 10, 0, "blackwell" }, { 12, 0, "blackwell" }, { 4, 0, "undefined" },
                { 11, 0, "undefined" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                assert_string_equal(nvidia_gpu_family(cases[i].major, cases[i].minor),
                                    cases[i].family);

        /* an unknown compute capability: no family or compute labels */
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        struct nvidia_gfd_gpu g = h100;
        g.cc_major = -1;
        g.memory_mib = 0;
        struct nvidia_gfd_node node = node_of(&g, 1);
        struct dev_labels s = { 0 };
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_no_label(&s, "nvidia.com/gpu.family");
        assert_no_label(&s, "nvidia.com/gpu.compute.major");
        assert_no_label(&s, "nvidia.com/gpu.memory");
        dev_labels_release(&s);
}

static void test_time_slicing(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "    - name: nvidia.com/gpu\n      replicas: 4\n");
        struct nvidia_gfd_node node = node_of(&h100, 1);
        struct dev_labels s = { 0 };
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-SHARED");
        assert_label(&s, "nvidia.com/gpu.replicas", "4");
        assert_label(&s, "nvidia.com/gpu.sharing-strategy", "time-slicing");
        assert_label(&s, "nvidia.com/gpu.count", "1");
        assert_label(&s, "nvidia.com/mps.capable", "false");
        dev_labels_release(&s);

        /* renamed: no -SHARED */
        _cleanup_config_ struct devlet_config *renamed = config_with(
                "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n");
        nvidia_gfd_labels(&node, renamed, &s, NULL);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3");
        assert_label(&s, "nvidia.com/gpu.replicas", "4");
        dev_labels_release(&s);

        /* sharing another resource: this one is not replicated */
        _cleanup_config_ struct devlet_config *other = config_with(
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "    - name: nvidia.com/mig-1g.10gb\n      replicas: 4\n");
        nvidia_gfd_labels(&node, other, &s, NULL);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3");
        assert_label(&s, "nvidia.com/gpu.replicas", "1");
        assert_label(&s, "nvidia.com/gpu.sharing-strategy", "none");
        dev_labels_release(&s);
}

static void test_mps(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(
                "version: v1\nsharing:\n  mps:\n    resources:\n"
                "    - name: nvidia.com/gpu\n      replicas: 10\n");
        struct nvidia_gfd_node node = node_of(&h100, 1);
        struct dev_labels s = { 0 };
        /* no control daemon ready: not MPS-capable, with a warning */
        char **warnings = NULL;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_label(&s, "nvidia.com/mps.capable", "false");
        assert_int_equal(strv_len(warnings), 1);
        assert_non_null(strstr(warnings[0], "no MPS control daemon ready"));
        strv_free(TAKE_PTR(warnings));
        dev_labels_release(&s);
        node.mps_ready = true;
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/mps.capable", "true");
        assert_label(&s, "nvidia.com/gpu.sharing-strategy", "mps");
        assert_label(&s, "nvidia.com/gpu.replicas", "10");
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-SHARED");
        dev_labels_release(&s);

        /* MIG enabled somewhere: not MPS-capable (GFD would stop) */
        struct nvidia_gfd_gpu g = h100;
        g.mig_enabled = true;
        node = node_of(&g, 1);
        node.mps_ready = true;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_label(&s, "nvidia.com/mps.capable", "false");
        assert_int_equal(strv_len(warnings), 1);
        strv_free(warnings);
        dev_labels_release(&s);
}

static const struct nvidia_gfd_mig mig_1g = {
        .profile = "1g.10gb", .memory_mib = 9856, .multiprocessors = 16, .slices_gi = 1,
        .slices_ci = 1, .engines_copy = 1, .engines_decoder = 1, .engines_jpeg = 0,
};
static const struct nvidia_gfd_mig mig_1g_me = {
        .profile = "1g.10gb+me", .memory_mib = 9856, .multiprocessors = 16, .slices_gi = 1,
        .slices_ci = 1, .engines_copy = 1, .engines_decoder = 1, .engines_jpeg = 1,
        .engines_ofa = 1,
};
static const struct nvidia_gfd_mig mig_3g = {
        .profile = "3g.40gb", .memory_mib = 40192, .multiprocessors = 60, .slices_gi = 3,
        .slices_ci = 3, .engines_copy = 3, .engines_decoder = 2,
};

static void test_mig_single(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with("version: v1\nflags:\n  migStrategy: single\n");
        const struct nvidia_gfd_mig migs[] = { mig_1g, mig_1g, mig_1g };
        struct nvidia_gfd_gpu g = h100;
        g.mig_enabled = true;
        g.migs = migs;
        g.n_migs = 3;
        struct nvidia_gfd_gpu gpus[2] = { g, g };
        struct nvidia_gfd_node node = node_of(gpus, 2);
        struct dev_labels s = { 0 };
        char **warnings = NULL;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_null(warnings);
        assert_label(&s, "nvidia.com/mig.strategy", "single");
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb");
        assert_label(&s, "nvidia.com/gpu.count", "6");
        assert_label(&s, "nvidia.com/gpu.replicas", "1");
        assert_label(&s, "nvidia.com/gpu.memory", "9856");
        assert_label(&s, "nvidia.com/gpu.multiprocessors", "16");
        assert_label(&s, "nvidia.com/gpu.slices.gi", "1");
        assert_label(&s, "nvidia.com/gpu.slices.ci", "1");
        assert_label(&s, "nvidia.com/gpu.engines.copy", "1");
        assert_label(&s, "nvidia.com/gpu.engines.decoder", "1");
        assert_label(&s, "nvidia.com/gpu.engines.encoder", "0");
        assert_label(&s, "nvidia.com/gpu.engines.jpeg", "0");
        assert_label(&s, "nvidia.com/gpu.engines.ofa", "0");
        assert_label(&s, "nvidia.com/gpu.family", "hopper"); /* from the full-GPU labels */
        dev_labels_release(&s);

        /* two profiles: invalid */
        const struct nvidia_gfd_mig two[] = { mig_1g, mig_3g };
        gpus[1].migs = two;
        gpus[1].n_migs = 2;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-INVALID");
        assert_label(&s, "nvidia.com/gpu.count", "0");
        assert_label(&s, "nvidia.com/gpu.replicas", "0");
        assert_label(&s, "nvidia.com/gpu.memory", "0");
        /* GFD's: nothing served, so no strategy */
        assert_label(&s, "nvidia.com/gpu.sharing-strategy", "");
        assert_int_equal(strv_len(warnings), 1);
        assert_non_null(strstr(warnings[0], "more than one MIG device type"));
        strv_free(TAKE_PTR(warnings));
        dev_labels_release(&s);

        /* one GPU MIG-enabled but empty: invalid */
        gpus[1].n_migs = 0;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-INVALID");
        assert_non_null(strstr(warnings[0], "enabled but empty"));
        strv_free(TAKE_PTR(warnings));
        dev_labels_release(&s);

        /* MIG on one GPU, off on the other: invalid */
        gpus[1] = h100;
        gpus[1].name = "NVIDIA A100-PCIE-40GB";
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-INVALID");
        assert_non_null(strstr(warnings[0], "enabled and disable"));
        strv_free(TAKE_PTR(warnings));
        dev_labels_release(&s);

        /* no MIG at all: like strategy none, plus mig.strategy */
        gpus[0] = h100;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_null(warnings);
        assert_label(&s, "nvidia.com/mig.strategy", "single");
        assert_no_label(&s, "nvidia.com/gpu.multiprocessors");
        dev_labels_release(&s);
}

static void test_mig_mixed(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(
                "version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n"
                "    resources:\n    - name: nvidia.com/mig-3g.40gb\n      replicas: 2\n");
        const struct nvidia_gfd_mig a[] = { mig_1g, mig_1g_me, mig_3g };
        const struct nvidia_gfd_mig b[] = { mig_3g };
        struct nvidia_gfd_gpu gpus[3] = { h100, h100, h100 };
        gpus[0].mig_enabled = gpus[1].mig_enabled = true;
        gpus[0].migs = a;
        gpus[0].n_migs = 3;
        gpus[1].migs = b;
        gpus[1].n_migs = 1;
        gpus[2].name = "NVIDIA H100 PCIe";
        gpus[2].memory_mib = 81559;
        struct nvidia_gfd_node node = node_of(gpus, 3);
        struct dev_labels s = { 0 };
        char **warnings = NULL;
        nvidia_gfd_labels(&node, cfg, &s, &warnings);
        assert_null(warnings);
        assert_label(&s, "nvidia.com/mig.strategy", "mixed");
        /* the plain GPU's name wins the full-GPU labels, counted by name */
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-PCIe");
        assert_label(&s, "nvidia.com/gpu.count", "1");
        assert_label(&s, "nvidia.com/gpu.replicas", "1");
        assert_label(&s, "nvidia.com/mig-1g.10gb.count", "1");
        assert_label(&s, "nvidia.com/mig-1g.10gb.product", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb");
        assert_label(&s, "nvidia.com/mig-1g.10gb.replicas", "1");
        assert_label(&s, "nvidia.com/mig-1g.10gb.sharing-strategy", "none");
        assert_label(&s, "nvidia.com/mig-1g.10gb.me.count", "1");
        assert_label(&s, "nvidia.com/mig-1g.10gb.me.product", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me");
        assert_label(&s, "nvidia.com/mig-1g.10gb.me.engines.ofa", "1");
        assert_label(&s, "nvidia.com/mig-3g.40gb.count", "2");
        assert_label(&s, "nvidia.com/mig-3g.40gb.product", "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED");
        assert_label(&s, "nvidia.com/mig-3g.40gb.replicas", "2");
        assert_label(&s, "nvidia.com/mig-3g.40gb.sharing-strategy", "time-slicing");
        assert_label(&s, "nvidia.com/mig-3g.40gb.memory", "40192");
        assert_label(&s, "nvidia.com/mig-3g.40gb.multiprocessors", "60");
        assert_label(&s, "nvidia.com/mig-3g.40gb.slices.gi", "3");
        dev_labels_release(&s);

        /* only MIG-enabled GPUs: the full-GPU labels have no sharing */
        node.n_gpus = 2;
        nvidia_gfd_labels(&node, cfg, &s, NULL);
        assert_label(&s, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3");
        assert_label(&s, "nvidia.com/gpu.count", "2");
        assert_label(&s, "nvidia.com/gpu.replicas", "0");
        assert_label(&s, "nvidia.com/gpu.sharing-strategy", "none");
        dev_labels_release(&s);
}

/* ---- labels_collect ---- */

static struct dev_resource *fake_res[2];
static int fake_backend; /* any non-NULL pointer stands for the backend */

static int fake_create(uv_loop_t *loop, const struct devlet_config *cfg, struct dev_backend **out,
                       struct diag *diag)
{
        return 0;
}

static void fake_destroy(struct dev_backend *b)
{
}

static struct dev_resource **fake_resources(struct dev_backend *b, size_t *n)
{
        *n = 2;
        return fake_res;
}

static const struct dev_backend_ops fake_ops = { .name = "hostdev",
                                                   .create = fake_create,
                                                   .destroy = fake_destroy,
                                                   .resources = fake_resources };

static void test_collect(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        fake_res[0] = dev_resource_new("devlet.io/fuse");
        for (int i = 0; i < 3; i++) {
                char id[32];
                snprintf(id, sizeof(id), "fuse-%d", i);
                dev_resource_add(fake_res[0], id)->health = i == 2 ? DEV_UNHEALTHY : DEV_HEALTHY;
        }
        fake_res[1] = dev_resource_new("devlet.io/a-resource-name-that-is-far-too-long-to-become-a-label-key");
        struct labels_backend b = { &fake_ops, (struct dev_backend *)&fake_backend };

        struct dev_labels s = { 0 };
        char **warnings = NULL;
        labels_collect(cfg, &b, 1, &s, &warnings);
        assert_label(&s, "devlet.io/fuse.count", "2");
        /* GFD's timestamp is the NVIDIA backend's, not every node's */
        assert_null(dev_labels_get(&s, "nvidia.com/gfd.timestamp"));
        assert_int_equal(s.n, 1);
        assert_int_equal(strv_len(warnings), 1);
        assert_non_null(strstr(warnings[0], "not a valid Kubernetes label key"));
        strv_free(TAKE_PTR(warnings));
        dev_labels_release(&s);


        dev_resource_free(fake_res[0]);
        dev_resource_free(fake_res[1]);
}

static void test_output_path(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        assert_string_equal(labels_output_path(cfg), LABELS_DEFAULT_OUTPUT_FILE);
        free(cfg->labels_output_file);
        cfg->labels_output_file = xstrdup("-");
        assert_null(labels_output_path(cfg));
        free(cfg->labels_output_file);
        cfg->labels_output_file = xstrdup("/tmp/x/gfd");
        assert_string_equal(labels_output_path(cfg), "/tmp/x/gfd");
}

static void test_output_mode(void **state)
{
        _cleanup_config_ struct devlet_config *cfg = config_with(NULL);
        assert_int_equal(labels_output_mode(cfg), LABELS_TO_FILE);
        cfg->labels_use_node_feature_api = true;
        assert_int_equal(labels_output_mode(cfg), LABELS_TO_NODE_FEATURE);
        free(cfg->labels_output);
        cfg->labels_output = xstrdup("features.d");
        assert_int_equal(labels_output_mode(cfg), LABELS_TO_FILE);
        free(cfg->labels_output);
        cfg->labels_output = xstrdup("node");
        assert_int_equal(labels_output_mode(cfg), LABELS_TO_NODE);
        assert_string_equal(labels_output_name(LABELS_TO_NODE), "node");
}

static json_t *node_with(const char *labels, const char *owned)
{
        json_error_t e;
        json_t *n = json_loads(labels, 0, &e);
        assert_non_null(n);
        json_t *node = json_pack("{s:{s:o,s:{}}}", "metadata", "labels", n, "annotations");
        if (owned)
                json_object_set_new(json_object_get(json_object_get(node, "metadata"),
                                                    "annotations"),
                                    LABELS_OWNED_ANNOTATION, json_string(owned));
        return node;
}

static void assert_json(json_t *got, const char *want)
{
        json_error_t e;
        json_t *w = json_loads(want, 0, &e);
        assert_non_null(w);
        if (!json_equal(got, w)) {
                char *g = json_dumps(got, JSON_SORT_KEYS);
                fail_msg("got %s, want %s", g, want);
        }
        json_decref(w);
}

static void test_node_patch(void **state)
{
        json_error_t e;
        json_t *desired = json_loads("{\"a.io/x\": \"1\", \"a.io/y\": \"\"}", 0, &e);
        /* new: both set, owned listed; foreign labels never named */
        json_t *node = node_with("{\"team\": \"ml\"}", NULL);
        json_t *p = labels_node_patch(node, desired);
        assert_json(p, "{\"metadata\": {\"labels\": {\"a.io/x\": \"1\", \"a.io/y\": \"\"},"
                       " \"annotations\": {\"" LABELS_OWNED_ANNOTATION "\": \"a.io/x,a.io/y\"}}}");
        json_decref(p);
        json_decref(node);
        /* the same: nothing to do */
        node = node_with("{\"team\": \"ml\", \"a.io/x\": \"1\", \"a.io/y\": \"\"}",
                         "a.io/x,a.io/y");
        assert_null(labels_node_patch(node, desired));
        json_decref(node);
        /* an owned label that went is removed; an owned one already gone,
         * and one devlet never listed, are not named */
        node = node_with("{\"a.io/x\": \"2\", \"a.io/y\": \"\", \"a.io/old\": \"1\","
                         " \"a.io/foreign\": \"1\"}",
                         "a.io/old,a.io/gone,a.io/x");
        p = labels_node_patch(node, desired);
        assert_json(p, "{\"metadata\": {\"labels\": {\"a.io/x\": \"1\", \"a.io/old\": null},"
                       " \"annotations\": {\"" LABELS_OWNED_ANNOTATION "\": \"a.io/x,a.io/y\"}}}");
        json_decref(p);
        json_decref(node);
        /* a node without labels or annotations at all */
        node = json_pack("{s:{}}", "metadata");
        p = labels_node_patch(node, desired);
        assert_non_null(p);
        json_decref(p);
        json_decref(node);
        json_decref(desired);
}

static void test_node_patch_since(void **state)
{
        json_error_t e;
        json_t *written = json_loads("{\"a.io/x\": \"1\", \"a.io/y\": \"\"}", 0, &e);
        json_t *same = json_loads("{\"a.io/y\": \"\", \"a.io/x\": \"1\"}", 0, &e);
        assert_null(labels_node_patch_since(written, same));
        /* a value changed: that key alone, the owned list untouched */
        json_t *changed = json_loads("{\"a.io/x\": \"2\", \"a.io/y\": \"\"}", 0, &e);
        json_t *p = labels_node_patch_since(written, changed);
        assert_json(p, "{\"metadata\": {\"labels\": {\"a.io/x\": \"2\"}}}");
        json_decref(p);
        /* a key went and one came: null for the one, the new list */
        json_t *moved = json_loads("{\"a.io/x\": \"1\", \"a.io/z\": \"3\"}", 0, &e);
        p = labels_node_patch_since(written, moved);
        assert_json(p, "{\"metadata\": {\"labels\": {\"a.io/y\": null, \"a.io/z\": \"3\"},"
                       " \"annotations\": {\"" LABELS_OWNED_ANNOTATION "\": \"a.io/x,a.io/z\"}}}");
        json_decref(p);
        json_decref(moved);
        json_decref(changed);
        json_decref(same);
        json_decref(written);
}

static void test_node_feature_object(void **state)
{
        json_error_t e;
        json_t *desired = json_loads("{\"nvidia.com/gpu.count\": \"8\"}", 0, &e);
        json_t *o = labels_node_feature("n1", desired);
        assert_json(o, "{\"apiVersion\": \"nfd.k8s-sigs.io/v1alpha1\", \"kind\": \"NodeFeature\","
                       " \"metadata\": {\"name\": \"nvidia-features-for-n1\", \"labels\":"
                       " {\"nfd.node.kubernetes.io/node-name\": \"n1\"}},"
                       " \"spec\": {\"features\": {\"flags\": {}, \"attributes\": {},"
                       " \"instances\": {}}, \"labels\": {\"nvidia.com/gpu.count\": \"8\"}}}");
        json_decref(o);
        json_decref(desired);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid_keys),   cmocka_unit_test(test_valid_values),
                cmocka_unit_test(test_sanitize),     cmocka_unit_test(test_set_and_format),
                cmocka_unit_test(test_full_gpu),     cmocka_unit_test(test_machine_type),
                cmocka_unit_test(test_versions),     cmocka_unit_test(test_families),
                cmocka_unit_test(test_gpu_mode),
                cmocka_unit_test(test_vgpu_signature),
                cmocka_unit_test(test_time_slicing), cmocka_unit_test(test_mps),
                cmocka_unit_test(test_mig_single),   cmocka_unit_test(test_mig_mixed),
                cmocka_unit_test(test_collect),      cmocka_unit_test(test_output_path),
                cmocka_unit_test(test_output_mode),  cmocka_unit_test(test_node_patch),
                cmocka_unit_test(test_node_patch_since),
                cmocka_unit_test(test_node_feature_object),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
