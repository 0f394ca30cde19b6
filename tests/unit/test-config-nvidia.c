/* NVIDIA v0.20's newer flags, env vars and config keys (the NVIDIA
 * family's option set, src/devices/nvidia/options.c): accepted from every
 * source, refused where devlet cannot do them, warned about where they
 * have no effect. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "config-test.h"
#include "devices/nvidia/internal.h"

static const char *write_tmp_s(const char *s)
{
        return write_tmp(s, strlen(s));
}

static bool has_warning(const struct devlet_config *c, const char *needle)
{
        for (size_t i = 0; c->warnings && c->warnings[i]; i++)
                if (strstr(c->warnings[i], needle))
                        return true;
        return false;
}

static void test_dev_root_follows_driver_root(void **state)
{
        struct devlet_config *c = LOAD_OK("--nvidia-driver-root", "/run/nvidia/driver");
        assert_string_equal(nvidia_dev_root(c), "/run/nvidia/driver");
        /* NVIDIA's default is NVIDIA's: host devices and AMD GPUs stay under / */
        assert_string_equal(config_host_dev_root(c), "/");
        config_free(c);
        c = LOAD_OK("--nvidia-driver-root", "/run/nvidia/driver", "--nvidia-dev-root", "/");
        assert_string_equal(nvidia_dev_root(c), "/");
        assert_string_equal(config_host_dev_root(c), "/");
        config_free(c);
        setenv("NVIDIA_DEV_ROOT", "/host", 1);
        c = LOAD_OK();
        assert_string_equal(nvidia_dev_root(c), "/host");
        assert_string_equal(config_host_dev_root(c), "/host");
        config_free(c);
}

static void test_v020_keys_known(void **state)
{
        const char *path = write_tmp_s("version: v1\n"
                                         "flags:\n"
                                         "  mpsRoot: /run/mps\n"
                                         "  nvidiaDevRoot: /dev-root\n"
                                         "  useNodeFeatureAPI: false\n"
                                         "  deviceDiscoveryStrategy: nvml\n"
                                         "  plugin:\n"
                                         "    kubeletSocket: /k/kubelet.sock\n"
                                         "    cdiFeatureFlags: disable-nvsandbox-utils\n"
                                         "imex:\n"
                                         "  channelIDs: [0]\n"
                                         "  required: true\n");
        struct devlet_config *c = LOAD_OK("--config-file", path);
        assert_null(c->warnings);
        assert_string_equal(nvidia_options_get(c)->mps_root, "/run/mps");
        assert_string_equal(c->dev_root, "/dev-root");
        assert_string_equal(nvidia_options_get(c)->device_discovery_strategy, "nvml");
        assert_string_equal(c->kubelet_socket, "/k/kubelet.sock");
        assert_true(nvidia_options_get(c)->imex_channel0);
        assert_true(nvidia_options_get(c)->imex_required);
        config_free(c);
}

static void test_discovery_strategy(void **state)
{
        struct devlet_config *c = LOAD_OK("--device-discovery-strategy", "auto");
        config_free(c);
        struct diag d = LOAD_ERR("--device-discovery-strategy=tegra");
        assert_contains(d.message, "--device-discovery-strategy=tegra is not supported");
        setenv("DEVICE_DISCOVERY_STRATEGY", "bogus", 1);
        d = LOAD_ERR();
        assert_contains(d.message, "DEVICE_DISCOVERY_STRATEGY: invalid value \"bogus\"");
}

static void test_imex(void **state)
{
        struct devlet_config *c = LOAD_OK("--imex-channel-ids", "0", "--imex-required");
        assert_true(nvidia_options_get(c)->imex_channel0);
        assert_true(nvidia_options_get(c)->imex_required);
        config_free(c);
        c = LOAD_OK();
        assert_false(nvidia_options_get(c)->imex_channel0);
        assert_strv(nvidia_options_get(c)->imex_channel_ids, (const char *const[]){ NULL });
        config_free(c);
        setenv("IMEX_CHANNEL_IDS", "0,1", 1);
        struct diag d = LOAD_ERR();
        assert_contains(d.message, "channelIDs must be [] or [0]; found [0 1]");
}

static void test_cdi_flags(void **state)
{
        struct devlet_config *c = LOAD_OK();
        assert_true(nvidia_options_get(c)->cdi_hook_ldcache);
        config_free(c);
        c = LOAD_OK("--cdi-disable-hooks", "update-ldcache,bogus-hook", "--cdi-feature-flags",
                    "enable-explicit-driver-libraries,enable-coherent-annotations");
        assert_false(nvidia_options_get(c)->cdi_hook_ldcache);
        assert_true(has_warning(c, "unknown hook \"bogus-hook\""));
        assert_true(has_warning(c, "\"enable-coherent-annotations\" has no effect"));
        assert_false(has_warning(c, "enable-explicit-driver-libraries"));
        config_free(c);
        setenv("CDI_DISABLE_HOOKS", "all", 1);
        c = LOAD_OK();
        assert_false(nvidia_options_get(c)->cdi_hook_ldcache);
        config_free(c);
}

static void test_kubelet_socket_empty(void **state)
{
        struct devlet_config *c = LOAD_OK("--kubelet-socket", "");
        assert_true(c->kubelet_disabled);
        config_free(c);
        c = LOAD_OK("--kubelet-socket=");
        assert_true(c->kubelet_disabled);
        config_free(c);
        c = LOAD_OK("--kubelet-socket", "/x/kubelet.sock");
        assert_false(c->kubelet_disabled);
        config_free(c);
}

static void test_node_feature_api(void **state)
{
        setenv("GFD_USE_NODE_FEATURE_API", "true", 1);
        struct devlet_config *c = LOAD_OK("--kubeconfig", "/k", "--node-name", "n1",
                                          "--namespace", "gpu", "--kube-api-qps", "7.5");
        assert_true(c->labels_use_node_feature_api);
        assert_string_equal(c->labels_namespace, "gpu");
        assert_string_equal(c->labels_output, "auto");
        assert_int_equal(strv_len(c->warnings), 0);
        config_free(c);
        unsetenv("GFD_USE_NODE_FEATURE_API");
        c = LOAD_OK("--labels-output", "node");
        assert_false(c->labels_use_node_feature_api);
        assert_string_equal(c->labels_output, "node");
        assert_string_equal(c->labels_namespace, "default");
        config_free(c);
}

static void test_mps_checks(void **state)
{
        const char *path = write_tmp_s("version: v1\n"
                                         "sharing:\n"
                                         "  mps:\n"
                                         "    resources:\n"
                                         "      - name: nvidia.com/gpu\n"
                                         "        replicas: 2\n");
        struct diag d = LOAD_ERR("--config-file", path, "--mig-strategy", "mixed");
        assert_contains(d.message, "mig-strategy=mixed is not supported with MPS");
        d = LOAD_ERR("--config-file", path, "--mps-root", "");
        assert_contains(d.message, "MPS requires --mps-root");
        struct devlet_config *c = LOAD_OK("--config-file", path);
        assert_string_equal(nvidia_options_get(c)->mps_root, "/run/nvidia/mps");
        config_free(c);
}

static void test_effective_json(void **state)
{
        struct devlet_config *c = LOAD_OK("--mig-strategy", "mixed", "--imex-channel-ids", "0");
        char *j = config_to_json(c);
        assert_contains(j, "\"mig-strategy\":\"mixed\"");
        assert_contains(j, "\"imex-channel-ids\":[\"0\"]");
        assert_contains(j, "\"sharing\":{\"resources\":[],\"strategy\":\"none\"}");
        /* the family's own section, by its dump: empty when not in the file */
        assert_contains(j, "\"resources\":{\"gpus\":[],\"mig\":[]}");
        assert_null(strchr(j, '\n'));
        free(j);
        config_free(c);

        const char *path = write_tmp_s("version: v1\nresources:\n  gpus: [{pattern: '*', name: big}]\n");
        c = LOAD_OK("--config-file", path);
        j = config_to_json(c);
        assert_contains(j, "\"resources\":{\"gpus\":[{\"name\":\"nvidia.com/big\",\"pattern\":\"*\"}],"
                           "\"mig\":[]}");
        free(j);
        config_free(c);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                T(test_dev_root_follows_driver_root), T(test_v020_keys_known),
                T(test_discovery_strategy),           T(test_imex),
                T(test_cdi_flags),                    T(test_kubelet_socket_empty),
                T(test_node_feature_api),             T(test_mps_checks),
                T(test_effective_json),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
