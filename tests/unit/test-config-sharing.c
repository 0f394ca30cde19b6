/* Unit tests for the config file's NVIDIA sections (sharing: time-slicing
 * and MPS replicas, resources: naming by pattern), devlet's health section,
 * and the options added with them (allocation policy, CDI, metrics and
 * attribution, integer bounds): every accepted form, every error with its
 * exact line:column, and NVIDIA's own example files. */
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
#include "config-test.h"
#include "devices/amd/internal.h"
#include "devices/nvidia/internal.h"

#define UUID "b1028956-cfa2-0990-bf4a-5da9abb51763"

/* Parses yaml and checks the error's position and message. */
static void check_err(const char *yaml, int line, int column, const char *message)
{
        struct diag d = parse_err(yaml);
        if (d.line != line || d.column != column || strcmp(d.message, message) != 0) {
                print_error("got %d:%d: %s\nwant %d:%d: %s\n", d.line, d.column, d.message, line,
                            column, message);
                fail();
        }
}

/* ---- defaults ---- */

static void test_defaults(void **state)
{
        struct devlet_config *c = config_new_defaults(dev_config_families());
        assert_int_equal(c->sharing.strategy, SHARING_NONE);
        assert_int_equal(c->sharing.n_resources, 0);
        assert_null(c->sharing.resources);
        assert_int_equal(nvidia_resources_get(c)->n_gpu_resources, 0);
        assert_int_equal(nvidia_resources_get(c)->n_mig_resources, 0);
        assert_false(c->health.recovery_enabled);
        assert_int_equal(c->health.recovery_quiet_ms, 60000);
        assert_string_equal(c->shared_devices_allocation_policy, "distributed");
        assert_string_equal(c->cdi_spec_dir, "/var/run/cdi");
        assert_string_equal(c->metrics_address, ":9400");
        assert_int_equal(c->collect_interval_ms, 30000);
        assert_string_equal(c->hostname_label, "auto");
        assert_string_equal(c->pod_resources_socket,
                            "/var/lib/kubelet/pod-resources/kubelet.sock");
        assert_strv(c->container_state_dirs,
                    STRV("/run/containerd/io.containerd.runtime.v2.task/k8s.io",
                         "/run/containers/storage/overlay-containers"));
        config_free(c);
}

/* ---- NVIDIA's examples ---- */

/* From the k8s-device-plugin README ("With CUDA Time-Slicing"). */
static const char readme_time_slicing[] = "version: v1\n"
                                          "sharing:\n"
                                          "  timeSlicing:\n"
                                          "    resources:\n"
                                          "    - name: nvidia.com/gpu\n"
                                          "      replicas: 10\n";

/* The GPU Operator's time-slicing ConfigMap entry, as a file. */
static const char operator_time_slicing[] = "version: v1\n"
                                            "flags:\n"
                                            "  migStrategy: none\n"
                                            "sharing:\n"
                                            "  timeSlicing:\n"
                                            "    renameByDefault: false\n"
                                            "    failRequestsGreaterThanOne: false\n"
                                            "    resources:\n"
                                            "      - name: nvidia.com/gpu\n"
                                            "        replicas: 4\n";

/* The GPU Operator's per-node example for an A100 40GB in mixed MIG mode. */
static const char operator_a100_mixed[] = "version: v1\n"
                                          "flags:\n"
                                          "  migStrategy: mixed\n"
                                          "sharing:\n"
                                          "  timeSlicing:\n"
                                          "    resources:\n"
                                          "    - name: nvidia.com/gpu\n"
                                          "      replicas: 8\n"
                                          "    - name: nvidia.com/mig-1g.5gb\n"
                                          "      replicas: 2\n"
                                          "    - name: nvidia.com/mig-2g.10gb\n"
                                          "      replicas: 2\n"
                                          "    - name: nvidia.com/mig-3g.20gb\n"
                                          "      replicas: 3\n"
                                          "    - name: nvidia.com/mig-7g.40gb\n"
                                          "      replicas: 7\n";

static void assert_resource(const struct sharing_resource_cfg *r, const char *name,
                            const char *rename, unsigned replicas)
{
        assert_string_equal(r->name, name);
        if (rename)
                assert_string_equal(r->rename, rename);
        else
                assert_null(r->rename);
        assert_int_equal(r->replicas, replicas);
}

static void test_nvidia_examples(void **state)
{
        struct devlet_config *c = parse_ok(readme_time_slicing);
        assert_null(c->warnings);
        assert_int_equal(c->sharing.strategy, SHARING_TIME_SLICING);
        assert_false(c->sharing.rename_by_default);
        assert_false(c->sharing.fail_requests_greater_than_one);
        assert_int_equal(c->sharing.n_resources, 1);
        assert_resource(&c->sharing.resources[0], "nvidia.com/gpu", NULL, 10);
        assert_int_equal(c->sharing.resources[0].devices_kind, SHARING_DEVICES_ALL);
        assert_null(c->sharing.resources[0].devices);
        assert_string_equal(config_sharing_served_name(&c->sharing.resources[0]),
                            "nvidia.com/gpu");
        config_free(c);

        /* the README's renameByDefault variant */
        c = parse_ok("version: v1\n"
                     "sharing:\n"
                     "  timeSlicing:\n"
                     "    renameByDefault: true\n"
                     "    resources:\n"
                     "    - name: nvidia.com/gpu\n"
                     "      replicas: 10\n");
        assert_true(c->sharing.rename_by_default);
        assert_resource(&c->sharing.resources[0], "nvidia.com/gpu", "nvidia.com/gpu.shared", 10);
        assert_string_equal(config_sharing_served_name(&c->sharing.resources[0]),
                            "nvidia.com/gpu.shared");
        config_free(c);

        c = parse_ok(operator_time_slicing);
        assert_null(c->warnings);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none");
        assert_int_equal(c->sharing.strategy, SHARING_TIME_SLICING);
        assert_resource(&c->sharing.resources[0], "nvidia.com/gpu", NULL, 4);
        config_free(c);

        c = parse_ok(operator_a100_mixed);
        assert_null(c->warnings);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "mixed");
        assert_int_equal(c->sharing.n_resources, 5);
        assert_resource(&c->sharing.resources[0], "nvidia.com/gpu", NULL, 8);
        assert_resource(&c->sharing.resources[1], "nvidia.com/mig-1g.5gb", NULL, 2);
        assert_resource(&c->sharing.resources[2], "nvidia.com/mig-2g.10gb", NULL, 2);
        assert_resource(&c->sharing.resources[3], "nvidia.com/mig-3g.20gb", NULL, 3);
        assert_resource(&c->sharing.resources[4], "nvidia.com/mig-7g.40gb", NULL, 7);
        config_free(c);

        /* the README's MPS example, and through config_load */
        static const char mps[] = "version: v1\n"
                                  "sharing:\n"
                                  "  mps:\n"
                                  "    renameByDefault: true\n"
                                  "    resources:\n"
                                  "    - name: nvidia.com/gpu\n"
                                  "      replicas: 10\n";
        const char *file = write_tmp(mps, strlen(mps));
        c = LOAD_OK("--config-file", file);
        assert_null(c->warnings);
        assert_int_equal(c->sharing.strategy, SHARING_MPS);
        assert_true(c->sharing.rename_by_default);
        assert_resource(&c->sharing.resources[0], "nvidia.com/gpu", "nvidia.com/gpu.shared", 10);
        config_free(c);
}

/* ---- sharing: accepted forms ---- */

/* AMD GPUs' resources are shared with the same section (by index). */
static void test_sharing_amd(void **state)
{
        struct devlet_config *c = parse_ok("version: v1\n"
                                           "sharing:\n"
                                           "  timeSlicing:\n"
                                           "    renameByDefault: true\n"
                                           "    resources:\n"
                                           "    - name: amd.com/gpu\n"
                                           "      replicas: 4\n"
                                           "      devices: [0, 2]\n"
                                           "    - name: amd.com/cpx_nps4\n"
                                           "      rename: amd.com/cpx-shared\n"
                                           "      replicas: 2\n");
        struct sharing_cfg *s = &c->sharing;
        assert_null(c->warnings);
        assert_int_equal(s->n_resources, 2);
        assert_resource(&s->resources[0], "amd.com/gpu", "amd.com/gpu.shared", 4);
        assert_int_equal(s->resources[0].devices_kind, SHARING_DEVICES_LIST);
        assert_string_equal(s->resources[0].devices[1], "2");
        assert_resource(&s->resources[1], "amd.com/cpx_nps4", "amd.com/cpx-shared", 2);
        config_free(c);

        /* a bare rename stays in its resource's domain (it was taken for
         * nvidia.com/, the domain of bare names); a full one is kept */
        c = parse_ok("version: v1\n"
                     "sharing:\n"
                     "  timeSlicing:\n"
                     "    resources:\n"
                     "    - name: amd.com/gpu\n"
                     "      rename: gpu-shared\n"
                     "      replicas: 2\n"
                     "    - name: gpu\n"
                     "      rename: gpu-ts\n"
                     "      replicas: 2\n");
        assert_resource(&c->sharing.resources[0], "amd.com/gpu", "amd.com/gpu-shared", 2);
        assert_resource(&c->sharing.resources[1], "nvidia.com/gpu", "nvidia.com/gpu-ts", 2);
        config_free(c);
        check_err("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                  "    - name: amd.com/gpu\n      rename: -x\n      replicas: 2\n",
                  6, 15, "sharing.timeSlicing.resources[0].rename: \"-x\" is not a valid resource name");
}

static void test_sharing_forms(void **state)
{
        struct devlet_config *c = parse_ok(
                "version: v1\n"
                "sharing:\n"
                "  timeSlicing:\n"
                "    renameByDefault: yes\n"
                "    failRequestsGreaterThanOne: true\n"
                "    resources:\n"
                "    - name: gpu\n"                      /* bare: nvidia.com/gpu */
                "      rename: nvidia.com/gpu-ts\n"      /* rename beats renameByDefault */
                "      replicas: \"4\"\n"
                "      devices: all\n"
                "    - name: mig-1g.10gb\n"
                "      replicas: 2\n"
                "      devices: 3\n"
                "    - name: nvidia.com/mig-2g.20gb\n"
                "      rename: shared-2g\n"
                "      replicas: 1024\n"
                "      devices: [0, \"007\", \"1:0\", \"02:01\", GPU-" UUID ",\n"
                "                GPU-B1028956-CFA2-0990-BF4A-5DA9ABB51764, MIG-" UUID ",\n"
                "                MIG-GPU-" UUID "/07/0, 1023]\n"
                "    - name: nvidia.com/h100\n"
                "      replicas: 3\n"
                "      devices: ~\n");
        struct sharing_cfg *s = &c->sharing;
        assert_null(c->warnings);
        assert_int_equal(s->strategy, SHARING_TIME_SLICING);
        assert_true(s->rename_by_default);
        assert_true(s->fail_requests_greater_than_one);
        assert_int_equal(s->n_resources, 4);

        assert_resource(&s->resources[0], "nvidia.com/gpu", "nvidia.com/gpu-ts", 4);
        assert_int_equal(s->resources[0].devices_kind, SHARING_DEVICES_ALL);

        assert_resource(&s->resources[1], "nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb.shared",
                        2);
        assert_int_equal(s->resources[1].devices_kind, SHARING_DEVICES_COUNT);
        assert_int_equal(s->resources[1].devices_count, 3);
        assert_null(s->resources[1].devices);

        assert_resource(&s->resources[2], "nvidia.com/mig-2g.20gb", "nvidia.com/shared-2g", 1024);
        assert_int_equal(s->resources[2].devices_kind, SHARING_DEVICES_LIST);
        assert_strv(s->resources[2].devices,
                    STRV("0", "7", "1:0", "2:1", "GPU-" UUID,
                         "GPU-b1028956-cfa2-0990-bf4a-5da9abb51764", "MIG-" UUID,
                         "MIG-GPU-" UUID "/7/0", "1023"));

        assert_resource(&s->resources[3], "nvidia.com/h100", "nvidia.com/h100.shared", 3);
        assert_int_equal(s->resources[3].devices_kind, SHARING_DEVICES_ALL);
        config_free(c);

        /* null sections mean no sharing; an empty timeSlicing beside resourced MPS is fine */
        c = parse_ok("version: v1\nsharing:\n");
        assert_int_equal(c->sharing.strategy, SHARING_NONE);
        config_free(c);
        c = parse_ok("version: v1\nsharing: {timeSlicing: ~, mps: null}\n");
        assert_int_equal(c->sharing.strategy, SHARING_NONE);
        config_free(c);
        c = parse_ok("version: v1\nsharing:\n  timeSlicing:\n  mps:\n"
                     "    resources: [{name: gpu, replicas: 2, devices: [0, GPU-" UUID "]}]\n");
        assert_int_equal(c->sharing.strategy, SHARING_MPS);
        assert_strv(c->sharing.resources[0].devices, STRV("0", "GPU-" UUID));
        config_free(c);

        /* a rename equal to the name is no rename at all, but allowed */
        c = parse_ok("version: v1\nsharing:\n  timeSlicing:\n"
                     "    resources: [{name: gpu, rename: nvidia.com/gpu, replicas: 2}]\n");
        assert_string_equal(config_sharing_served_name(&c->sharing.resources[0]),
                            "nvidia.com/gpu");
        config_free(c);
}

/* ---- sharing: errors ---- */

#define TS "version: v1\nsharing:\n  timeSlicing:\n"
#define TS_RES TS "    resources:\n"
#define R0 "sharing.timeSlicing.resources[0]"
#define R1 "sharing.timeSlicing.resources[1]"

static void test_sharing_errors(void **state)
{
        check_err("version: v1\nsharing: [1]\n", 2, 10,
                  "sharing: expected a mapping, found a list");
        check_err(TS "    resources: []\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n", 4,
                  16, "sharing.timeSlicing.resources: needs at least one resource");
        check_err(TS_RES "    - {name: gpu, replicas: 2}\n"
                         "  mps:\n"
                         "    resources: [{name: gpu, replicas: 2}]\n",
                  7, 5,
                  "sharing.mps: time-slicing and MPS are mutually exclusive: only one of "
                  "sharing.timeSlicing and sharing.mps may have resources");
        check_err(TS "    renameByDefault: true\n", 4, 5,
                  "sharing.timeSlicing: \"resources\" is required");
        check_err(TS "    {}\n", 4, 5, "sharing.timeSlicing: \"resources\" is required");
        check_err(TS "    resources: {name: gpu}\n", 4, 16,
                  "sharing.timeSlicing.resources: expected a list, found a mapping");
        check_err(TS "    renameByDefault: maybe\n    resources: [{name: gpu, replicas: 2}]\n", 4,
                  22, "sharing.timeSlicing.renameByDefault: \"maybe\" is not a boolean (true or "
                      "false)");
        check_err(TS "    failRequestsGreaterThanOne: [1]\n", 4, 33,
                  "sharing.timeSlicing.failRequestsGreaterThanOne: expected a value, found a list");
        check_err(TS_RES "    - gpu\n", 5, 7, R0 ": expected a mapping, found a value");

        /* names */
        check_err(TS_RES "    - replicas: 2\n", 5, 7, R0 ": \"name\" is required");
        check_err(TS_RES "    - {name: ~, replicas: 2}\n", 5, 14, R0 ": \"name\" is required");
        /* AMD GPUs share through the same section; other domains are refused */
        check_err(TS_RES "    - name: intel.com/gpu\n      replicas: 2\n", 5, 13,
                  R0 ".name: \"intel.com/gpu\" is not in the nvidia.com domain (write "
                     "\"nvidia.com/<name>\" or just \"<name>\")");
        check_err(TS_RES "    - name: amd.com/-gpu\n      replicas: 2\n", 5, 13,
                  R0 ".name: \"amd.com/-gpu\" is not a valid resource name");
        static const char invalid_name[] =
                "is not a valid resource name (at most 63 lowercase letters, digits, '-' or '.' "
                "after \"nvidia.com/\", starting and ending with a letter or digit)";
        char want[512];
        snprintf(want, sizeof(want), R0 ".name: \"nvidia.com/GPU\" %s", invalid_name);
        check_err(TS_RES "    - name: nvidia.com/GPU\n      replicas: 2\n", 5, 13, want);
        snprintf(want, sizeof(want), R0 ".name: \"gpu_x\" %s", invalid_name);
        check_err(TS_RES "    - name: gpu_x\n      replicas: 2\n", 5, 13, want);
        snprintf(want, sizeof(want), R0 ".name: \"nvidia.com/\" %s", invalid_name);
        check_err(TS_RES "    - name: nvidia.com/\n      replicas: 2\n", 5, 13, want);
        snprintf(want, sizeof(want), R0 ".name: \"%s\" %s",
                 "a234567890123456789012345678901234567890123456789012345678901234", invalid_name);
        check_err(TS_RES "    - name: "
                         "a234567890123456789012345678901234567890123456789012345678901234\n"
                         "      replicas: 2\n",
                  5, 13, want);
        snprintf(want, sizeof(want), R0 ".rename: \"-x\" %s", invalid_name);
        check_err(TS_RES "    - {name: gpu, rename: -x, replicas: 2}\n", 5, 27, want);
        check_err(TS_RES "    - {name: gpu, rename: [x], replicas: 2}\n", 5, 27,
                  R0 ".rename: expected a value, found a list");
        check_err(TS_RES "    - {name: gpu, replicas: 2}\n"
                         "    - {name: nvidia.com/gpu, replicas: 3}\n",
                  6, 14,
                  R1 ".name: \"nvidia.com/gpu\" is already listed as "
                     "sharing.timeSlicing.resources[0]");
        /* two resources served under one name */
        check_err(TS_RES "    - {name: gpu, rename: x, replicas: 2}\n"
                         "    - {name: mig-1g.5gb, rename: nvidia.com/x, replicas: 2}\n",
                  6, 34,
                  R1 ".rename: \"nvidia.com/x\" is already served by "
                     "sharing.timeSlicing.resources[0]");
        check_err(TS "    renameByDefault: true\n    resources:\n"
                     "    - {name: gpu, rename: mig-1g.5gb.shared, replicas: 2}\n"
                     "    - {name: mig-1g.5gb, replicas: 2}\n",
                  7, 14,
                  R1 ".name: \"nvidia.com/mig-1g.5gb.shared\" is already served by "
                     "sharing.timeSlicing.resources[0]");
        check_err(TS_RES "    - {name: gpu, rename: mig-1g.5gb, replicas: 2}\n"
                         "    - {name: mig-1g.5gb, replicas: 2}\n",
                  6, 14,
                  R1 ".name: \"nvidia.com/mig-1g.5gb\" is already served by "
                     "sharing.timeSlicing.resources[0]");
        /* 59 characters are a valid name, but not with ".shared" */
        check_err(TS "    renameByDefault: true\n    resources:\n"
                     "    - name: a2345678901234567890123456789012345678901234567890123456789\n"
                     "      replicas: 2\n",
                  6, 13,
                  R0 ".name: renameByDefault would serve it as "
                     "\"nvidia.com/a2345678901234567890123456789012345678901234567890123456789"
                     ".shared\", which is not a valid resource name");

        /* replicas */
        check_err(TS_RES "    - name: gpu\n", 5, 7, R0 ": \"replicas\" is required");
        check_err(TS_RES "    - {name: gpu, replicas: 1}\n", 5, 29,
                  R0 ".replicas: \"1\" is not an integer from 2 to 1024");
        check_err(TS_RES "    - {name: gpu, replicas: 1025}\n", 5, 29,
                  R0 ".replicas: \"1025\" is not an integer from 2 to 1024");
        check_err(TS_RES "    - {name: gpu, replicas: -4}\n", 5, 29,
                  R0 ".replicas: \"-4\" is not an integer from 2 to 1024");
        check_err(TS_RES "    - {name: gpu, replicas: 99999999999999999999}\n", 5, 29,
                  R0 ".replicas: \"99999999999999999999\" is not an integer from 2 to 1024");
        check_err(TS_RES "    - {name: gpu, replicas: {n: 2}}\n", 5, 29,
                  R0 ".replicas: expected a value, found a mapping");

        /* devices */
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: some}\n", 5, 41,
                  R0 ".devices: \"some\" is not \"all\", a count from 1 to 1024, or a list of "
                     "devices");
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: 0}\n", 5, 41,
                  R0 ".devices: \"0\" is not \"all\", a count from 1 to 1024, or a list of "
                     "devices");
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: 1025}\n", 5, 41,
                  R0 ".devices: \"1025\" is not \"all\", a count from 1 to 1024, or a list of "
                     "devices");
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: {all: true}}\n", 5, 41,
                  R0 ".devices: expected \"all\", a count or a list, found a mapping");
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: []}\n", 5, 41,
                  R0 ".devices: needs at least one device (leave it out for all)");
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: [0, [1]]}\n", 5, 45,
                  R0 ".devices[1]: expected a value, found a list");
        static const char bad_ref[] = "is not a GPU index (\"0\"), a MIG index (\"0:1\"), both "
                                      "below 1024, or a GPU or MIG UUID (\"GPU-<uuid>\", "
                                      "\"MIG-<uuid>\")";
        static const char *const bad_refs[] = {
                "all",  "-1", "1024", "1:1024", "1:", ":1", "1:2:3", "GPU-", "GPU-" UUID "0",
                "GPU-b1028956-cfa2-0990-bf4a-5da9abb5176g",
                "GPU-b1028956cfa2-0990-bf4a-5da9abb517630",
                "gpu-" UUID, "MIG-GPU-" UUID, "MIG-GPU-" UUID "/1", "MIG-GPU-" UUID "/1/x",
                "MIG-GPU-" UUID "/1/2/3", "",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad_refs); i++) {
                char yaml[512];
                snprintf(yaml, sizeof(yaml),
                         TS_RES "    - name: gpu\n      replicas: 2\n      devices:\n"
                                "      - \"%s\"\n",
                         bad_refs[i]);
                snprintf(want, sizeof(want), R0 ".devices[0]: \"%s\" %s", bad_refs[i], bad_ref);
                check_err(yaml, 8, 9, want);
        }
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: [1, \"01\"]}\n", 5, 45,
                  R0 ".devices[1]: \"01\" is already listed as " R0 ".devices[0]");
        check_err(TS_RES "    - {name: gpu, replicas: 2, devices: [GPU-" UUID ", GPU-"
                         "B1028956-CFA2-0990-BF4A-5DA9ABB51763]}\n",
                  5, 84,
                  R0 ".devices[1]: \"GPU-B1028956-CFA2-0990-BF4A-5DA9ABB51763\" is already "
                     "listed as " R0 ".devices[0]");
}

/* ---- MPS ---- */

#define MPS_RES "version: v1\nsharing:\n  mps:\n    resources:\n"
#define M0 "sharing.mps.resources[0]"

static void test_mps(void **state)
{
        struct devlet_config *c = parse_ok(MPS_RES "    - name: gpu\n      replicas: 4\n"
                                                   "      devices: [0, 1]\n"
                                                   "    - name: h100\n      replicas: 2\n");
        assert_int_equal(c->sharing.strategy, SHARING_MPS);
        assert_int_equal(c->sharing.n_resources, 2);
        assert_strv(c->sharing.resources[0].devices, STRV("0", "1"));
        config_free(c);

        check_err(MPS_RES "    - {name: mig-1g.10gb, replicas: 2}\n", 5, 14,
                  M0 ".name: \"nvidia.com/mig-1g.10gb\" is a MIG resource: MPS shares full GPUs "
                     "only");
        check_err(MPS_RES "    - {name: gpu, replicas: 2, devices: [0, \"1:0\"]}\n", 5, 45,
                  M0 ".devices[1]: \"1:0\" is a MIG device: MPS shares full GPUs only");
        check_err(MPS_RES "    - {name: gpu, replicas: 2, devices: [MIG-" UUID "]}\n", 5, 42,
                  M0 ".devices[0]: \"MIG-" UUID "\" is a MIG device: MPS shares full GPUs only");
        /* a resources.mig name is a MIG resource too, wherever resources is in the file */
        check_err(MPS_RES "    - {name: small, replicas: 2}\n"
                          "resources:\n  mig:\n  - {pattern: 1g.10gb, name: small}\n",
                  5, 14,
                  M0 ".name: \"nvidia.com/small\" is a MIG resource: MPS shares full GPUs only");
        /* and a resources.gpus name is not */
        c = parse_ok(MPS_RES "    - {name: big, replicas: 2}\n"
                             "resources:\n  gpus:\n  - {pattern: '*H100*', name: big}\n");
        assert_string_equal(c->sharing.resources[0].name, "nvidia.com/big");
        config_free(c);
}

/* ---- resources ---- */

static void test_resources(void **state)
{
        struct devlet_config *c = parse_ok("version: v1\n"
                                           "resources:\n"
                                           "  gpus:\n"
                                           "  - pattern: \"*H100*\"\n"
                                           "    name: h100\n"
                                           "  - pattern: \"NVIDIA A100-SXM4-40GB\"\n"
                                           "    name: nvidia.com/a100\n"
                                           "  - pattern: \"*\"\n"
                                           "    name: h100\n" /* two patterns, one resource */
                                           "  mig:\n"
                                           "  - pattern: 1g.10gb\n"
                                           "    name: mig-small\n");
        const struct resources_cfg *r = nvidia_resources_get(c);
        assert_null(c->warnings);
        assert_int_equal(r->n_gpu_resources, 3);
        assert_string_equal(r->gpu_resources[0].pattern, "*H100*");
        assert_string_equal(r->gpu_resources[0].name, "nvidia.com/h100");
        assert_string_equal(r->gpu_resources[1].pattern, "NVIDIA A100-SXM4-40GB");
        assert_string_equal(r->gpu_resources[1].name, "nvidia.com/a100");
        assert_string_equal(r->gpu_resources[2].name, "nvidia.com/h100");
        assert_int_equal(r->n_mig_resources, 1);
        assert_string_equal(r->mig_resources[0].pattern, "1g.10gb");
        assert_string_equal(r->mig_resources[0].name, "nvidia.com/mig-small");
        config_free(c);

        c = parse_ok("version: v1\nresources:\n");
        assert_int_equal(nvidia_resources_get(c)->n_gpu_resources, 0);
        config_free(c);
        c = parse_ok("version: v1\nresources: {gpus: [], mig: ~}\n");
        assert_int_equal(nvidia_resources_get(c)->n_gpu_resources, 0);
        assert_null(nvidia_resources_get(c)->gpu_resources);
        config_free(c);

        check_err("version: v1\nresources: [a]\n", 2, 12,
                  "resources: expected a mapping, found a list");
        check_err("version: v1\nresources:\n  gpus: {pattern: x}\n", 3, 9,
                  "resources.gpus: expected a list, found a mapping");
        check_err("version: v1\nresources:\n  gpus: [x]\n", 3, 10,
                  "resources.gpus[0]: expected a mapping, found a value");
        check_err("version: v1\nresources:\n  gpus:\n  - name: x\n", 4, 5,
                  "resources.gpus[0]: \"pattern\" is required");
        check_err("version: v1\nresources:\n  mig:\n  - {pattern: '', name: x}\n", 4, 15,
                  "resources.mig[0].pattern: must not be empty (\"*\" matches any)");
        check_err("version: v1\nresources:\n  gpus:\n  - {pattern: '*'}\n", 4, 5,
                  "resources.gpus[0]: \"name\" is required");
        check_err("version: v1\nresources:\n  gpus:\n  - {pattern: '*', name: example.com/x}\n", 4,
                  26,
                  "resources.gpus[0].name: \"example.com/x\" is not in the nvidia.com domain "
                  "(write \"nvidia.com/<name>\" or just \"<name>\")");
        check_err("version: v1\nresources:\n  gpus:\n  - {pattern: '*', name: H100}\n", 4, 26,
                  "resources.gpus[0].name: \"H100\" is not a valid resource name (at most 63 "
                  "lowercase letters, digits, '-' or '.' after \"nvidia.com/\", starting and "
                  "ending with a letter or digit)");
        check_err("version: v1\nresources:\n"
                  "  gpus:\n  - {pattern: '*A100*', name: a100}\n  - {pattern: '*', name: gpu}\n"
                  "  mig:\n  - {pattern: '*', name: gpu}\n",
                  7, 26,
                  "resources.mig[0].name: \"nvidia.com/gpu\" is already resources.gpus[1]'s name: "
                  "full GPUs and MIG devices cannot be one resource");
}

/* ---- health ---- */

static void test_health(void **state)
{
        struct devlet_config *c = parse_ok("version: v1\n"
                                           "health:\n"
                                           "  recovery:\n"
                                           "    enabled: true\n"
                                           "    quietPeriod: 5m\n");
        assert_null(c->warnings);
        assert_true(c->health.recovery_enabled);
        assert_int_equal(c->health.recovery_quiet_ms, 300000);
        config_free(c);

        c = parse_ok("version: v1\nhealth:\n  recovery: {enabled: on}\n");
        assert_true(c->health.recovery_enabled);
        assert_int_equal(c->health.recovery_quiet_ms, 60000);
        config_free(c);

        c = parse_ok("version: v1\nhealth:\n  recovery: {quietPeriod: 0}\n");
        assert_false(c->health.recovery_enabled);
        assert_int_equal(c->health.recovery_quiet_ms, 0);
        config_free(c);

        c = parse_ok("version: v1\nhealth:\n  recovery:\n");
        assert_false(c->health.recovery_enabled);
        assert_int_equal(c->health.recovery_quiet_ms, 60000);
        config_free(c);

        /* NVIDIA's own health keys are not acted on: warned, not refused */
        c = parse_ok("version: v1\n"
                     "health:\n"
                     "  disabled: false\n"
                     "  ignoredXIDs: [13, 31]\n"
                     "  recovery: {enabled: true, after: 1m}\n");
        assert_strv(c->warnings, STRV("t.yaml:3:3: unknown key \"disabled\" (ignored)",
                                      "t.yaml:4:3: unknown key \"ignoredXIDs\" (ignored)",
                                      "t.yaml:5:29: unknown key \"after\" (ignored)"));
        assert_true(c->health.recovery_enabled);
        config_free(c);

        /* a family's rows under health (AMD's checks) beside devlet's own
         * keys; an unknown key under them is warned at its place */
        c = parse_ok("version: v1\n"
                     "health:\n"
                     "  amd:\n"
                     "    disabled: [ras, kfd]\n"
                     "    interval: 2s\n"
                     "    typo: 1\n"
                     "  recovery: {enabled: true}\n");
        assert_strv(c->warnings, STRV("t.yaml:6:5: unknown key \"typo\" (ignored)"));
        assert_true(c->health.recovery_enabled);
        assert_strv(amd_options_get(c)->health_disabled, STRV("ras", "kfd"));
        assert_int_equal(amd_options_get(c)->health_interval_ms, 2000);
        config_free(c);
        check_err("version: v1\nhealth:\n  amd:\n    disabled: [xid]\n", 4, 15,
                  "health.amd.disabled: invalid value \"xid\" (allowed: gone, kfd, ras, "
                  "unresponsive, all)");

        check_err("version: v1\nhealth: true\n", 2, 9,
                  "health: expected a mapping, found a value");
        check_err("version: v1\nhealth:\n  recovery: [1]\n", 3, 13,
                  "health.recovery: expected a mapping, found a list");
        check_err("version: v1\nhealth:\n  recovery:\n    enabled: sometimes\n", 4, 14,
                  "health.recovery.enabled: \"sometimes\" is not a boolean (true or false)");
        check_err("version: v1\nhealth:\n  recovery:\n    quietPeriod: soon\n", 4, 18,
                  "health.recovery.quietPeriod: \"soon\" is not a duration such as 30s, 5m or 1h "
                  "(to never recover, set enabled: false)");
        check_err("version: v1\nhealth:\n  recovery:\n    quietPeriod: infinite\n", 4, 18,
                  "health.recovery.quietPeriod: \"infinite\" is not a duration such as 30s, 5m or "
                  "1h (to never recover, set enabled: false)");
        check_err("version: v1\nhealth:\n  recovery:\n    quietPeriod: [1s]\n", 4, 18,
                  "health.recovery.quietPeriod: expected a value, found a list");
}

/* ---- the sections together ---- */

static void test_section_warnings(void **state)
{
        struct devlet_config *c = parse_ok("version: v1\n"
                                           "sharing:\n"
                                           "  strategy: round-robin\n"
                                           "  timeSlicing:\n"
                                           "    strategy: packed\n"
                                           "    resources:\n"
                                           "    - {name: gpu, replicas: 2, weight: 3}\n"
                                           "resources:\n"
                                           "  tpus: []\n"
                                           "  gpus:\n"
                                           "  - {pattern: '*', name: gpu, priority: 1}\n");
        /* sharing is read after resources, whose names it checks */
        assert_strv(c->warnings, STRV("t.yaml:9:3: unknown key \"tpus\" (ignored)",
                                      "t.yaml:11:31: unknown key \"priority\" (ignored)",
                                      "t.yaml:3:3: unknown key \"strategy\" (ignored)",
                                      "t.yaml:5:5: unknown key \"strategy\" (ignored)",
                                      "t.yaml:7:32: unknown key \"weight\" (ignored)"));
        assert_int_equal(c->sharing.n_resources, 1);
        config_free(c);
}

static void test_sections_replace(void **state)
{
        struct devlet_config *c = config_new_defaults(dev_config_families());
        struct diag d;
        static const char first[] = "version: v1\n"
                                    "sharing:\n  timeSlicing:\n"
                                    "    resources: [{name: gpu, replicas: 4}]\n"
                                    "resources:\n  mig: [{pattern: '*', name: small}]\n"
                                    "health:\n  recovery: {enabled: true}\n";
        assert_int_equal(config_parse_yaml("a.yaml", first, strlen(first), c, &d), 0);
        assert_int_equal(c->sharing.strategy, SHARING_TIME_SLICING);
        assert_int_equal(nvidia_resources_get(c)->n_mig_resources, 1);
        assert_true(c->health.recovery_enabled);

        /* a failing file changes nothing, whichever section fails */
        static const char bad[] = "version: v1\n"
                                  "sharing:\n  mps:\n    resources: [{name: gpu, replicas: 8}]\n"
                                  "resources:\n  gpus: [{pattern: '*', name: big}]\n"
                                  "health:\n  recovery: {enabled: false, quietPeriod: x}\n";
        assert_int_equal(config_parse_yaml("b.yaml", bad, strlen(bad), c, &d), -EINVAL);
        assert_int_equal(d.line, 8);
        assert_int_equal(c->sharing.strategy, SHARING_TIME_SLICING);
        assert_int_equal(c->sharing.resources[0].replicas, 4);
        assert_int_equal(nvidia_resources_get(c)->n_gpu_resources, 0);
        assert_int_equal(nvidia_resources_get(c)->n_mig_resources, 1);
        assert_true(c->health.recovery_enabled);
        static const char bad_sharing[] = "version: v1\n"
                                          "resources:\n  gpus: [{pattern: '*', name: big}]\n"
                                          "health: ~\n"
                                          "sharing:\n  mps:\n"
                                          "    resources: [{name: gpu, replicas: 1}]\n";
        assert_int_equal(config_parse_yaml("b.yaml", bad_sharing, strlen(bad_sharing), c, &d),
                         -EINVAL);
        assert_int_equal(d.line, 7);
        assert_int_equal(nvidia_resources_get(c)->n_gpu_resources, 0);
        assert_true(c->health.recovery_enabled);

        /* a file without resources checks sharing against the resources already loaded */
        static const char mps[] = "version: v1\n"
                                  "sharing:\n  mps:\n    resources: [{name: small, replicas: 2}]\n";
        assert_int_equal(config_parse_yaml("c.yaml", mps, strlen(mps), c, &d), -EINVAL);
        assert_string_equal(d.message, "sharing.mps.resources[0].name: \"nvidia.com/small\" is a "
                                       "MIG resource: MPS shares full GPUs only");

        /* sections present replace, sections absent stay; null sections reset */
        static const char second[] = "version: v1\n"
                                     "sharing:\n  mps:\n    resources: [{name: gpu, replicas: 3}]\n"
                                     "health:\n";
        assert_int_equal(config_parse_yaml("d.yaml", second, strlen(second), c, &d), 0);
        assert_int_equal(c->sharing.strategy, SHARING_MPS);
        assert_int_equal(c->sharing.n_resources, 1);
        assert_int_equal(c->sharing.resources[0].replicas, 3);
        assert_int_equal(nvidia_resources_get(c)->n_mig_resources, 1);
        assert_false(c->health.recovery_enabled);
        static const char third[] = "version: v1\nsharing: ~\nresources: ~\n";
        assert_int_equal(config_parse_yaml("e.yaml", third, strlen(third), c, &d), 0);
        assert_int_equal(c->sharing.strategy, SHARING_NONE);
        assert_int_equal(c->sharing.n_resources, 0);
        assert_int_equal(nvidia_resources_get(c)->n_mig_resources, 0);
        config_free(c);
}

static void test_bounds(void **state)
{
        char *yaml = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&yaml, &len);
        fputs("version: v1\nsharing:\n  timeSlicing:\n    resources:\n", f);
        for (int i = 0; i < 1025; i++)
                fprintf(f, "    - {name: r%d, replicas: 2}\n", i);
        fclose(f);
        check_err(yaml, 5, 5, "sharing.timeSlicing.resources: more than 1024 resources");
        free(yaml);

        f = open_memstream(&yaml, &len);
        fputs("version: v1\nresources:\n  mig:\n", f);
        for (int i = 0; i < 1025; i++)
                fprintf(f, "  - {pattern: p%d, name: r%d}\n", i, i);
        fclose(f);
        check_err(yaml, 4, 3, "resources.mig: more than 1024 entries");
        free(yaml);

        /* 1024 devices are fine, 1025 are not */
        f = open_memstream(&yaml, &len);
        fputs("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
              "    - name: gpu\n      replicas: 2\n      devices: [",
              f);
        for (int i = 0; i < 1024; i++)
                fprintf(f, "%s%d", i ? ", " : "", i);
        fputs("]\n", f);
        fclose(f);
        struct devlet_config *c = parse_ok(yaml);
        assert_int_equal(strv_len(c->sharing.resources[0].devices), 1024);
        config_free(c);
        free(yaml);

        f = open_memstream(&yaml, &len);
        fputs("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
              "    - name: gpu\n      replicas: 2\n      devices: [",
              f);
        for (int i = 0; i < 1025; i++)
                fprintf(f, "%s\"%d:%d\"", i ? ", " : "", i / 8, i % 8);
        fputs("]\n", f);
        fclose(f);
        check_err(yaml, 7, 16, R0 ".devices: more than 1024 devices");
        free(yaml);
}

/* ---- the new options ---- */

static const char options_yaml[] = "version: v1\n"
                                   "flags:\n"
                                   "  cdiSpecDir: /file/cdi\n"
                                   "  metricsAddress: 127.0.0.1:9401\n"
                                   "  collectInterval: 1000\n"
                                   "  hostnameLabel: hostname\n"
                                   "  podResourcesSocket: /file/pr.sock\n"
                                   "  containerStateDirs: [/file/a, /file/b]\n"
                                   "  plugin:\n"
                                   "    sharedDevicesAllocationPolicy: packed\n";

static void test_options_precedence(void **state)
{
        const char *file = write_tmp(options_yaml, strlen(options_yaml));

        struct devlet_config *c = LOAD_OK("--config-file", file);
        assert_string_equal(c->cdi_spec_dir, "/file/cdi");
        assert_string_equal(c->metrics_address, "127.0.0.1:9401");
        assert_int_equal(c->collect_interval_ms, 1000);
        assert_string_equal(c->hostname_label, "hostname");
        assert_string_equal(c->pod_resources_socket, "/file/pr.sock");
        assert_strv(c->container_state_dirs, STRV("/file/a", "/file/b"));
        assert_string_equal(c->shared_devices_allocation_policy, "packed");
        config_free(c);

        /* env over file; DCGM-exporter's names work for the metrics options */
        setenv("DEVLET_CDI_SPEC_DIR", "/env/cdi", 1);
        setenv("DCGM_EXPORTER_LISTEN", ":9500", 1);
        setenv("DCGM_EXPORTER_INTERVAL", "2000", 1);
        setenv("DEVLET_HOSTNAME_LABEL", "Hostname", 1);
        setenv("DEVLET_POD_RESOURCES_SOCKET", "/env/pr.sock", 1);
        setenv("DEVLET_CONTAINER_STATE_DIRS", "/env/a, /env/b,", 1);
        setenv("SHARED_DEVICES_ALLOCATION_POLICY", "distributed", 1);
        c = LOAD_OK("--config-file", file);
        assert_string_equal(c->cdi_spec_dir, "/env/cdi");
        assert_string_equal(c->metrics_address, ":9500");
        assert_int_equal(c->collect_interval_ms, 2000);
        assert_string_equal(c->hostname_label, "Hostname");
        assert_string_equal(c->pod_resources_socket, "/env/pr.sock");
        assert_strv(c->container_state_dirs, STRV("/env/a", "/env/b"));
        assert_string_equal(c->shared_devices_allocation_policy, "distributed");
        config_free(c);

        /* DEVLET_METRICS_ADDRESS beats DCGM_EXPORTER_LISTEN */
        setenv("DEVLET_METRICS_ADDRESS", ":9600", 1);
        c = LOAD_OK("--config-file", file);
        assert_string_equal(c->metrics_address, ":9600");
        config_free(c);

        /* flags over env; an empty --metrics-address turns metrics off */
        c = LOAD_OK("--config-file", file, "--cdi-spec-dir=/flag/cdi", "--metrics-address=",
                    "--collect-interval", "100", "--hostname-label", "hostname",
                    "--pod-resources-socket", "/flag/pr.sock", "--container-state-dirs",
                    "/flag/a", "--container-state-dirs=/flag/b",
                    "--shared-devices-allocation-policy", "packed");
        assert_string_equal(c->cdi_spec_dir, "/flag/cdi");
        assert_string_equal(c->metrics_address, "");
        assert_int_equal(c->collect_interval_ms, 100);
        assert_string_equal(c->hostname_label, "hostname");
        assert_string_equal(c->pod_resources_socket, "/flag/pr.sock");
        assert_strv(c->container_state_dirs, STRV("/flag/a", "/flag/b"));
        assert_string_equal(c->shared_devices_allocation_policy, "packed");
        config_free(c);

        /* an empty metricsAddress in the file turns metrics off too */
        c = parse_ok("version: v1\nflags:\n  metricsAddress: \"\"\n");
        assert_string_equal(c->metrics_address, "");
        config_free(c);
}

static void test_options_bounds(void **state)
{
        struct diag d;
        struct devlet_config *c;

        d = LOAD_ERR("--collect-interval=99");
        assert_string_equal(d.message, "--collect-interval: 99 is out of range (at least 100)");
        assert_int_equal(d.line, 0);
        d = LOAD_ERR("--collect-interval=1s");
        assert_string_equal(d.message, "--collect-interval: invalid value \"1s\" (expected a "
                                       "non-negative integer)");
        setenv("DCGM_EXPORTER_INTERVAL", "0", 1);
        d = LOAD_ERR();
        assert_string_equal(d.message, "DCGM_EXPORTER_INTERVAL: 0 is out of range (at least 100)");
        unsetenv("DCGM_EXPORTER_INTERVAL");
        c = LOAD_OK("--collect-interval=86400000");
        assert_int_equal(c->collect_interval_ms, 86400000);
        config_free(c);

        check_err("version: v1\nflags:\n  collectInterval: 50\n", 3, 20,
                  "flags.collectInterval: 50 is out of range (at least 100)");

        /* verbosity is 0 to 10 */
        c = LOAD_OK("-v10");
        assert_int_equal(c->verbosity, 10);
        config_free(c);
        d = LOAD_ERR("-v", "11");
        assert_string_equal(d.message, "-v: 11 is out of range (0 to 10)");
        check_err("version: v1\nflags:\n  verbosity: 99\n", 3, 14,
                  "flags.verbosity: 99 is out of range (0 to 10)");

        /* choices */
        d = LOAD_ERR("--shared-devices-allocation-policy=spread");
        assert_string_equal(d.message, "--shared-devices-allocation-policy: invalid value "
                                       "\"spread\" (allowed: distributed, packed)");
        check_err("version: v1\nflags:\n  hostnameLabel: HOSTNAME\n", 3, 18,
                  "flags.hostnameLabel: invalid value \"HOSTNAME\" (allowed: auto, Hostname, hostname, none)");
        check_err("version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: [packed]\n",
                  4, 36,
                  "flags.plugin.sharedDevicesAllocationPolicy: expected a value, found a list");
        check_err("version: v1\nflags:\n  containerStateDirs: []\n", 3, 23,
                  "flags.containerStateDirs: needs at least one value");

        /* the bounds are in the table */
        const struct config_option *o[256];
        size_t n = config_options_all(o, ARRAY_SIZE(o));
        for (size_t i = 0; i < n; i++) {
                if (strcmp(o[i]->flag, "collect-interval") == 0)
                        assert_true(o[i]->min == 100 && o[i]->max == 0);
                if (strcmp(o[i]->flag, "verbosity") == 0)
                        assert_true(o[i]->min == 0 && o[i]->max == 10);
                if (o[i]->type != CONFIG_INT)
                        assert_true(o[i]->min == 0 && o[i]->max == 0);
        }
}

static void test_options_help(void **state)
{
        char *buf = help_text();
        assert_contains(buf, "--shared-devices-allocation-policy distributed|packed");
        assert_contains(buf, "env: SHARED_DEVICES_ALLOCATION_POLICY; key: "
                             "flags.plugin.sharedDevicesAllocationPolicy; default: distributed");
        assert_contains(buf, "env: DEVLET_METRICS_ADDRESS, DCGM_EXPORTER_LISTEN; key: "
                             "flags.metricsAddress; default: :9400");
        assert_contains(buf, "--collect-interval N");
        assert_contains(buf, "env: DCGM_EXPORTER_INTERVAL; key: flags.collectInterval; "
                             "default: 30000");
        assert_contains(buf, "--hostname-label auto|Hostname|hostname|none");
        assert_contains(buf, "--container-state-dirs A,B,...");
        free(buf);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                T(test_defaults),          T(test_nvidia_examples),    T(test_sharing_forms), T(test_sharing_amd),
                T(test_sharing_errors),    T(test_mps),                T(test_resources),
                T(test_health),            T(test_section_warnings),   T(test_sections_replace),
                T(test_bounds),            T(test_options_precedence), T(test_options_bounds),
                T(test_options_help),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
