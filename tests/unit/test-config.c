/* Unit tests for src/config: the option table and its sources (flags, env,
 * file, defaults), the YAML parser's errors and warnings with their exact
 * positions, and the parser's input bounds (the hostDevices section:
 * test-config-hostdev.c). */
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
#include "devices/nvidia/internal.h"
#include "devices/amd/internal.h"

/* ---- defaults and sources ---- */

static void test_defaults(void **state)
{
        struct devlet_config *c = config_new_defaults(dev_config_families());
        assert_string_equal(c->config_file, "");
        assert_string_equal(c->plugin_directory, "/var/lib/kubelet/device-plugins");
        assert_string_equal(c->kubelet_socket, "");
        assert_int_equal(c->verbosity, 0);
        assert_strv(c->backends, STRV("auto"));
        assert_string_equal(c->sysfs_root, "/sys");
        assert_string_equal(c->dev_root, ""); /* each family's default: NVIDIA's driver root, / */
        assert_int_equal(c->rescan_interval_ms, 5000);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none");
        assert_true(c->fail_on_init_error);
        assert_string_equal(nvidia_options_get(c)->driver_root, "/");
        assert_false(c->pass_device_specs);
        assert_strv(c->device_list_strategy, STRV("envvar"));
        assert_string_equal(nvidia_options_get(c)->device_id_strategy, "uuid");
        assert_false(nvidia_options_get(c)->gds_enabled);
        assert_false(nvidia_options_get(c)->mofed_enabled);
        assert_false(nvidia_options_get(c)->gdrcopy_enabled);
        assert_string_equal(c->cdi_annotation_prefix, "cdi.k8s.io/");
        assert_string_equal(nvidia_options_get(c)->cdi_hook_path, "/usr/bin/nvidia-ctk");
        assert_string_equal(nvidia_options_get(c)->container_driver_root, "/driver-root");
        assert_string_equal(c->hostdev.domain, "devlet.io");
        assert_int_equal(c->hostdev.n_devices, 0);
        assert_null(c->warnings);
        config_free(c);
}

static void test_load_no_args(void **state)
{
        struct devlet_config *c = LOAD_OK();
        assert_string_equal(c->kubelet_socket, "/var/lib/kubelet/device-plugins/kubelet.sock");
        assert_string_equal(c->config_file, "");
        config_free(c);
}

static const char precedence_yaml[] = "version: v1\n"
                                      "flags:\n"
                                      "  pluginDirectory: /file\n"
                                      "  failOnInitError: false\n"
                                      "  verbosity: 1\n"
                                      "  backends: [nvidia]\n"
                                      "  rescanInterval: 1m\n";

static void test_precedence(void **state)
{
        const char *file = write_tmp(precedence_yaml, strlen(precedence_yaml));
        struct devlet_config *c;

        /* file over default */
        c = LOAD_OK("--config-file", file);
        assert_string_equal(c->plugin_directory, "/file");
        assert_false(c->fail_on_init_error);
        assert_int_equal(c->verbosity, 1);
        assert_strv(c->backends, STRV("nvidia"));
        assert_int_equal(c->rescan_interval_ms, 60000);
        assert_string_equal(c->kubelet_socket, "/file/kubelet.sock");
        assert_string_equal(c->config_file, file);
        config_free(c);

        /* env over file */
        setenv("PLUGIN_DIRECTORY", "/env", 1);
        setenv("FAIL_ON_INIT_ERROR", "true", 1);
        setenv("DEVLET_VERBOSITY", "2", 1);
        setenv("DEVLET_BACKENDS", "hostdev", 1);
        setenv("DEVLET_RESCAN_INTERVAL", "2s", 1);
        c = LOAD_OK("--config-file", file);
        assert_string_equal(c->plugin_directory, "/env");
        assert_true(c->fail_on_init_error);
        assert_int_equal(c->verbosity, 2);
        assert_strv(c->backends, STRV("hostdev"));
        assert_int_equal(c->rescan_interval_ms, 2000);
        config_free(c);

        /* flags over env */
        c = LOAD_OK("--config-file", file, "--plugin-directory=/flag",
                    "--fail-on-init-error=false", "-v", "3", "--backends", "auto",
                    "--rescan-interval", "3s");
        assert_string_equal(c->plugin_directory, "/flag");
        assert_false(c->fail_on_init_error);
        assert_int_equal(c->verbosity, 3);
        assert_strv(c->backends, STRV("auto"));
        assert_int_equal(c->rescan_interval_ms, 3000);
        assert_string_equal(c->kubelet_socket, "/flag/kubelet.sock");
        config_free(c);

        /* an empty env var counts as unset */
        setenv("PLUGIN_DIRECTORY", "", 1);
        c = LOAD_OK("--config-file", file);
        assert_string_equal(c->plugin_directory, "/file");
        config_free(c);
}

static void test_config_file_source(void **state)
{
        static const char a[] = "version: v1\nflags:\n  migStrategy: single\n";
        static const char b[] = "version: v1\nflags:\n  migStrategy: mixed\n";
        const char *fa = write_tmp(a, strlen(a));
        const char *fb = write_tmp(b, strlen(b));

        setenv("CONFIG_FILE", fa, 1);
        struct devlet_config *c = LOAD_OK("--mig-strategy=none");
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none"); /* flag beats the env's file */
        assert_string_equal(c->config_file, fa);
        config_free(c);

        c = LOAD_OK("-v0");
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "single");
        config_free(c);

        c = LOAD_OK("--config-file", fb);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "mixed"); /* --config-file beats CONFIG_FILE */
        assert_string_equal(c->config_file, fb);
        config_free(c);
}

static void test_kubelet_socket(void **state)
{
        struct devlet_config *c = LOAD_OK("--plugin-directory", "/tmp/plugins/");
        assert_string_equal(c->kubelet_socket, "/tmp/plugins/kubelet.sock");
        config_free(c);

        c = LOAD_OK("--kubelet-socket", "/run/k.sock");
        assert_string_equal(c->kubelet_socket, "/run/k.sock");
        config_free(c);
}

static void test_flag_forms(void **state)
{
        struct devlet_config *c;

        c = LOAD_OK("-v", "3");
        assert_int_equal(c->verbosity, 3);
        config_free(c);
        c = LOAD_OK("-v=4");
        assert_int_equal(c->verbosity, 4);
        config_free(c);
        c = LOAD_OK("-v5");
        assert_int_equal(c->verbosity, 5);
        config_free(c);
        c = LOAD_OK("--verbosity=6");
        assert_int_equal(c->verbosity, 6);
        config_free(c);
        c = LOAD_OK("--v", "7");
        assert_int_equal(c->verbosity, 7);
        config_free(c);

        c = LOAD_OK("--mig-strategy", "single", "--device-id-strategy=index");
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "single");
        assert_string_equal(nvidia_options_get(c)->device_id_strategy, "index");
        config_free(c);

        /* bools: bare, =value, and never a separate value */
        c = LOAD_OK("--pass-device-specs", "--fail-on-init-error=false", "--gds-enabled=YES",
                    "--mofed-enabled=1", "--gdrcopy-enabled=on");
        assert_true(c->pass_device_specs);
        assert_false(c->fail_on_init_error);
        assert_true(nvidia_options_get(c)->gds_enabled);
        assert_true(nvidia_options_get(c)->mofed_enabled);
        assert_true(nvidia_options_get(c)->gdrcopy_enabled);
        config_free(c);

        /* the last of a repeated flag wins */
        c = LOAD_OK("--mig-strategy=single", "--mig-strategy=mixed");
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "mixed");
        config_free(c);
}

static void test_unknown_flag(void **state)
{
        struct diag d;

        d = LOAD_ERR("--plugin-directroy", "/x");
        assert_string_equal(d.message,
                            "unknown flag --plugin-directroy; did you mean --plugin-directory?");
        assert_int_equal(d.line, 0);
        assert_string_equal(d.file, "");

        d = LOAD_ERR("--foo");
        assert_string_equal(d.message, "unknown flag --foo");

        d = LOAD_ERR("--mig-stratgy=single");
        assert_string_equal(d.message, "unknown flag --mig-stratgy; did you mean --mig-strategy?");

        d = LOAD_ERR("-x");
        assert_string_equal(d.message, "unknown flag -x");

        /* a Go-style single-dash long flag points at the real one */
        d = LOAD_ERR("-mig-strategy=single");
        assert_string_equal(d.message, "unknown flag -mig-strategy; did you mean --mig-strategy?");

        /* ... except AMD's own spellings, which AMD's tools take that way */
        struct devlet_config *c = LOAD_OK("-resource_naming_strategy=mixed", "-pulse", "2");
        assert_string_equal(amd_options_get(c)->resource_naming_strategy, "mixed");
        assert_int_equal(amd_options_get(c)->health_interval_ms, 2000);
        config_free(c);
}

static void test_flag_errors(void **state)
{
        struct diag d;

        d = LOAD_ERR("--mig-strategy");
        assert_string_equal(d.message, "flag --mig-strategy needs a value");

        d = LOAD_ERR("--mig-strategy=bogus");
        assert_string_equal(d.message,
                            "--mig-strategy: invalid value \"bogus\" (allowed: none, single, mixed)");

        d = LOAD_ERR("--fail-on-init-error=maybe");
        assert_string_equal(d.message,
                            "--fail-on-init-error: invalid value \"maybe\" (expected true or false)");

        d = LOAD_ERR("-v", "high");
        assert_string_equal(d.message, "-v: invalid value \"high\" (expected a non-negative integer)");

        d = LOAD_ERR("--v=-1");
        assert_contains(d.message, "--v: invalid value \"-1\"");

        d = LOAD_ERR("--device-list-strategy", "envvar,bogus");
        assert_string_equal(d.message,
                            "--device-list-strategy: invalid value \"bogus\" (allowed: envvar, "
                            "volume-mounts, cdi-annotations, cdi-cri)");

        d = LOAD_ERR("--backends", " , ");
        assert_string_equal(d.message,
                            "--backends: needs at least one value (allowed: auto, nvidia, amd, hostdev)");

        setenv("MIG_STRATEGY", "bogus", 1);
        d = LOAD_ERR("-v1");
        assert_string_equal(d.message,
                            "MIG_STRATEGY: invalid value \"bogus\" (allowed: none, single, mixed)");
        assert_int_equal(d.line, 0);
        unsetenv("MIG_STRATEGY");

        setenv("FAIL_ON_INIT_ERROR", "sometimes", 1);
        d = LOAD_ERR("-v1");
        assert_contains(d.message, "FAIL_ON_INIT_ERROR: invalid value \"sometimes\"");
}

static void test_positional(void **state)
{
        struct devlet_config *c = NULL;
        struct diag d;
        int argi = -1;

        assert_int_equal(LOAD(&c, &d, NULL, "-v1", "extra"), -EINVAL);
        assert_string_equal(d.message, "unexpected argument \"extra\"");
        assert_null(c);

        assert_int_equal(LOAD(&c, &d, &argi, "-v", "2", "foo", "--mig-strategy", "single"), 0);
        assert_int_equal(argi, 3);
        assert_int_equal(c->verbosity, 2);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none"); /* parsing stopped at foo */
        config_free(c);

        assert_int_equal(LOAD(&c, &d, &argi, "--v=1", "--", "--mig-strategy=single"), 0);
        assert_int_equal(argi, 3);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none");
        config_free(c);

        assert_int_equal(LOAD(&c, &d, &argi, "--v=1"), 0);
        assert_int_equal(argi, 2);
        config_free(c);

        /* "--" with nothing after it is fine without argi */
        assert_int_equal(LOAD(&c, &d, NULL, "--v=1", "--"), 0);
        config_free(c);
        assert_int_equal(LOAD(&c, &d, NULL, "--", "x"), -EINVAL);
        assert_string_equal(d.message, "unexpected argument \"x\"");
}

static void test_aliases(void **state)
{
        struct devlet_config *c;

        c = LOAD_OK("--driver-root", "/a", "--nvidia-ctk-path=/b", "--container-driver-root",
                    "/c");
        assert_string_equal(nvidia_options_get(c)->driver_root, "/a");
        assert_string_equal(nvidia_options_get(c)->cdi_hook_path, "/b");
        assert_string_equal(nvidia_options_get(c)->container_driver_root, "/c");
        config_free(c);

        c = LOAD_OK("--nvidia-driver-root", "/d", "--nvidia-cdi-hook-path=/e",
                    "--driver-root-ctr-path", "/f");
        assert_string_equal(nvidia_options_get(c)->driver_root, "/d");
        assert_string_equal(nvidia_options_get(c)->cdi_hook_path, "/e");
        assert_string_equal(nvidia_options_get(c)->container_driver_root, "/f");
        config_free(c);

        /* second env name alone, then the first one wins over it */
        setenv("NVIDIA_CTK_PATH", "/old", 1);
        setenv("CONTAINER_DRIVER_ROOT", "/old-root", 1);
        setenv("DEV_ROOT", "/old-dev", 1);
        c = LOAD_OK("-v0");
        assert_string_equal(nvidia_options_get(c)->cdi_hook_path, "/old");
        assert_string_equal(nvidia_options_get(c)->container_driver_root, "/old-root");
        assert_string_equal(c->dev_root, "/old-dev");
        config_free(c);
        setenv("NVIDIA_CDI_HOOK_PATH", "/new", 1);
        setenv("DRIVER_ROOT_CTR_PATH", "/new-root", 1);
        setenv("NVIDIA_DEV_ROOT", "/new-dev", 1);
        c = LOAD_OK("-v0");
        assert_string_equal(nvidia_options_get(c)->cdi_hook_path, "/new");
        assert_string_equal(nvidia_options_get(c)->container_driver_root, "/new-root");
        assert_string_equal(c->dev_root, "/new-dev");
        config_free(c);
}

static void test_bool_forms(void **state)
{
        static const struct {
                const char *text;
                bool value;
        } forms[] = { { "true", true },  { "TRUE", true },   { "1", true },   { "yes", true },
                      { "Yes", true },   { "on", true },     { "false", false }, { "False", false },
                      { "0", false },    { "no", false },    { "NO", false }, { "off", false } };
        for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
                setenv("PASS_DEVICE_SPECS", forms[i].text, 1);
                struct devlet_config *c = LOAD_OK("-v0");
                assert_int_equal(c->pass_device_specs, forms[i].value);
                config_free(c);

                /* the config file: plain and quoted */
                char yaml[128];
                snprintf(yaml, sizeof(yaml), "version: v1\nflags:\n  plugin:\n    passDeviceSpecs: %s\n",
                         forms[i].text);
                c = parse_ok(yaml);
                assert_int_equal(c->pass_device_specs, forms[i].value);
                config_free(c);
                snprintf(yaml, sizeof(yaml),
                         "version: v1\nflags:\n  plugin:\n    passDeviceSpecs: \"%s\"\n",
                         forms[i].text);
                c = parse_ok(yaml);
                assert_int_equal(c->pass_device_specs, forms[i].value);
                config_free(c);
        }

        struct diag d = parse_err("version: v1\nflags:\n  gdsEnabled: maybe\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 15);
        assert_string_equal(d.message,
                            "flags.gdsEnabled: invalid value \"maybe\" (expected true or false)");
}

static void test_durations(void **state)
{
        static const struct {
                const char *text;
                int64_t ms;
        } ok[] = { { "500ms", 500 },   { "5s", 5000 },     { "2m", 120000 }, { "1h", 3600000 },
                   { "10", 10000 },    { "infinite", -1 }, { "0", 0 },       { "1h30m", 5400000 },
                   { "1m500ms", 60500 } };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                struct devlet_config *c = LOAD_OK("--rescan-interval", ok[i].text);
                assert_int_equal(c->rescan_interval_ms, ok[i].ms);
                config_free(c);
        }
        static const char *const bad[] = { "5x", "-1", "", "1.5s", "s", "5s5",
                                           "99999999999999999999h", "9999999999999999h", "forever" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct diag d = LOAD_ERR("--rescan-interval", bad[i]);
                assert_contains(d.message, "--rescan-interval: invalid value");
                assert_contains(d.message, "500ms, 5s, 2m, 1h");
        }

        struct devlet_config *c = parse_ok("version: v1\nflags:\n  rescanInterval: 250ms\n");
        assert_int_equal(c->rescan_interval_ms, 250);
        config_free(c);
        c = parse_ok("version: v1\nflags:\n  rescanInterval: infinite\n");
        assert_int_equal(c->rescan_interval_ms, -1);
        config_free(c);
}

static void test_lists(void **state)
{
        struct devlet_config *c;

        c = LOAD_OK("--backends", "nvidia,hostdev");
        assert_strv(c->backends, STRV("nvidia", "hostdev"));
        config_free(c);

        c = LOAD_OK("--backends= nvidia , hostdev,");
        assert_strv(c->backends, STRV("nvidia", "hostdev"));
        config_free(c);

        /* a repeated list flag collects */
        c = LOAD_OK("--device-list-strategy=envvar", "--device-list-strategy", "cdi-cri");
        assert_strv(c->device_list_strategy, STRV("envvar", "cdi-cri"));
        config_free(c);

        setenv("DEVICE_LIST_STRATEGY", "volume-mounts,cdi-annotations", 1);
        c = LOAD_OK("-v0");
        assert_strv(c->device_list_strategy, STRV("volume-mounts", "cdi-annotations"));
        config_free(c);

        c = parse_ok("version: v1\nflags:\n  plugin:\n    deviceListStrategy: [envvar, cdi-cri]\n");
        assert_strv(c->device_list_strategy, STRV("envvar", "cdi-cri"));
        config_free(c);
        c = parse_ok("version: v1\nflags:\n  plugin:\n    deviceListStrategy:\n      - cdi-cri\n");
        assert_strv(c->device_list_strategy, STRV("cdi-cri"));
        config_free(c);
        c = parse_ok("version: v1\nflags:\n  plugin:\n    deviceListStrategy: envvar,cdi-annotations\n");
        assert_strv(c->device_list_strategy, STRV("envvar", "cdi-annotations"));
        config_free(c);

        struct diag d =
                parse_err("version: v1\nflags:\n  backends: [nvidia, intel]\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 13);
        assert_string_equal(d.message, "flags.backends: invalid value \"intel\" (allowed: auto, "
                                       "nvidia, amd, hostdev)");

        d = parse_err("version: v1\nflags:\n  backends: []\n");
        assert_contains(d.message, "flags.backends: needs at least one value");

        d = parse_err("version: v1\nflags:\n  backends: [nvidia, {a: b}]\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 22);
        assert_string_equal(d.message, "flags.backends: expected a value, found a mapping");
}

/* ---- the config file ---- */

static void test_nvidia_file(void **state)
{
        static const char yaml[] = "version: v1\n"
                                   "flags:\n"
                                   "  migStrategy: mixed\n"
                                   "  failOnInitError: true\n"
                                   "  nvidiaDriverRoot: /run/nvidia/driver\n"
                                   "  plugin:\n"
                                   "    passDeviceSpecs: true\n"
                                   "    deviceListStrategy: [envvar, cdi-cri]\n"
                                   "    deviceIDStrategy: index\n"
                                   "    containerDriverRoot: /driver\n"
                                   "sharing:\n"
                                   "  timeSlicing:\n"
                                   "    resources:\n"
                                   "    - name: nvidia.com/gpu\n"
                                   "      replicas: 4\n"
                                   "resources:\n"
                                   "  gpus:\n"
                                   "  - pattern: \"*\"\n"
                                   "    name: gpu\n"
                                   "health: {}\n";
        struct devlet_config *c = parse_ok(yaml);
        assert_null(c->warnings);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "mixed");
        assert_true(c->fail_on_init_error);
        assert_string_equal(nvidia_options_get(c)->driver_root, "/run/nvidia/driver");
        assert_true(c->pass_device_specs);
        assert_strv(c->device_list_strategy, STRV("envvar", "cdi-cri"));
        assert_string_equal(nvidia_options_get(c)->device_id_strategy, "index");
        assert_string_equal(nvidia_options_get(c)->container_driver_root, "/driver");
        config_free(c);

        /* the same file through config_load, with a flag on top */
        const char *file = write_tmp(yaml, strlen(yaml));
        c = LOAD_OK("--config-file", file, "--mig-strategy=single");
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "single");
        assert_true(c->pass_device_specs);
        config_free(c);
}

static void test_unknown_keys_warn(void **state)
{
        struct devlet_config *c = parse_ok("version: v1\n"
                                           "flags:\n"
                                           "  migStrategie: mixed\n"
                                           "  plugin:\n"
                                           "    bogus: 1\n"
                                           "  plugin.passDeviceSpecs: true\n"
                                           "extra: [1, 2]\n"
                                           "hostDevices:\n"
                                           "  colour: red\n"
                                           "  devices:\n"
                                           "  - name: a\n"
                                           "    size: 3\n"
                                           "    groups:\n"
                                           "    - paths: [{path: /a, mode: x}]\n"
                                           "      usb: [{vendor: '0001', product: '0002', bus: 1}]\n");
        assert_strv(c->warnings,
                    STRV("t.yaml:3:3: unknown key \"migStrategie\" (ignored)",
                         "t.yaml:5:5: unknown key \"bogus\" (ignored)",
                         "t.yaml:6:3: unknown key \"plugin.passDeviceSpecs\" (ignored)",
                         "t.yaml:7:1: unknown key \"extra\" (ignored)",
                         "t.yaml:9:3: unknown key \"colour\" (ignored)",
                         "t.yaml:12:5: unknown key \"size\" (ignored)",
                         "t.yaml:14:26: unknown key \"mode\" (ignored)",
                         "t.yaml:15:47: unknown key \"bus\" (ignored)"));
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none");
        assert_false(c->pass_device_specs);
        config_free(c);

        /* warnings from each parse accumulate */
        c = parse_ok("version: v1\na: 1\n");
        struct diag d;
        static const char more[] = "version: v1\nb: 1\n";
        assert_int_equal(config_parse_yaml("u.yaml", more, strlen(more), c, &d), 0);
        assert_strv(c->warnings, STRV("t.yaml:2:1: unknown key \"a\" (ignored)",
                                      "u.yaml:2:1: unknown key \"b\" (ignored)"));
        config_free(c);
}

/* 80k unknown keys (under the 1 MiB cap): the first few told at their places, the rest one
 * line (before, a line each, and quadratic time) */
static void test_many_unknown_keys_warn_once(void **state)
{
        size_t cap = 2u << 20, len = 0;
        _cleanup_free_ char *text = xmalloc(cap);
        len += (size_t)snprintf(text + len, cap - len, "version: v1\nflags:\n");
        for (int i = 0; i < 80000; i++)
                len += (size_t)snprintf(text + len, cap - len, "  k%05d: 1\n", i);
        struct devlet_config *c = config_new_defaults(dev_config_families());
        struct diag d;
        assert_int_equal(config_parse_yaml("t.yaml", text, len, c, &d), 0);
        assert_int_equal(strv_len(c->warnings), 17);
        assert_string_equal(c->warnings[0], "t.yaml:3:3: unknown key \"k00000\" (ignored)");
        assert_string_equal(c->warnings[16],
                            "t.yaml:19:3: 79984 more unknown keys (ignored), the first \"k00016\"");
        config_free(c);
}

static void test_version(void **state)
{
        struct diag d;

        d = parse_err("flags:\n  migStrategy: mixed\n");
        assert_int_equal(d.line, 1);
        assert_int_equal(d.column, 1);
        assert_string_equal(d.message, "missing \"version: v1\"");

        d = parse_err("# nothing here\n");
        assert_int_equal(d.line, 1);
        assert_int_equal(d.column, 1);
        assert_string_equal(d.message, "missing \"version: v1\"");

        d = parse_err("---\n");
        assert_string_equal(d.message, "missing \"version: v1\"");

        d = parse_err("flags: {}\nversion: v2\n");
        assert_int_equal(d.line, 2);
        assert_int_equal(d.column, 10);
        assert_string_equal(d.message, "version: unsupported version \"v2\" (expected v1)");

        d = parse_err("version: [v1]\n");
        assert_int_equal(d.line, 1);
        assert_int_equal(d.column, 10);
        assert_string_equal(d.message, "version: unsupported version a list (expected v1)");

        d = parse_err("- version: v1\n");
        assert_int_equal(d.line, 1);
        assert_int_equal(d.column, 1);
        assert_string_equal(d.message, "expected a mapping at the top, found a list");

        /* quoted is fine */
        config_free(parse_ok("version: \"v1\"\n"));
}

static void test_type_errors(void **state)
{
        struct diag d;

        d = parse_err("version: v1\nflags:\n  - migStrategy\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 3);
        assert_string_equal(d.message, "flags: expected a mapping, found a list");

        d = parse_err("version: v1\nflags:\n  migStrategy: [mixed]\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 16);
        assert_string_equal(d.message, "flags.migStrategy: expected a value, found a list");

        d = parse_err("version: v1\nflags:\n  plugin: true\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 11);
        assert_string_equal(d.message, "flags.plugin: expected a mapping, found a value");

        d = parse_err("version: v1\nflags:\n  verbosity: {a: 1}\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 14);

        d = parse_err("version: v1\nflags:\n  migStrategy: single\n  verbosity: loud\n");
        assert_int_equal(d.line, 4);
        assert_int_equal(d.column, 14);
        assert_string_equal(d.message,
                            "flags.verbosity: invalid value \"loud\" (expected a non-negative integer)");

        d = parse_err("version: v1\n[a]: b\n");
        assert_int_equal(d.line, 2);
        assert_int_equal(d.column, 1);
        assert_string_equal(d.message, "mapping keys must be plain values, not a list");

        d = parse_err("version: v1\nflags:\n  pluginDirectory: \"a\\0b\"\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 20);
        assert_string_equal(d.message, "NUL characters are not allowed");

        /* null values leave the defaults */
        struct devlet_config *c = parse_ok("version: v1\nflags:\n  migStrategy:\n  verbosity: ~\n");
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none");
        config_free(c);
        c = parse_ok("version: v1\nflags:\n");
        config_free(c);
}

static void test_duplicate_keys(void **state)
{
        struct diag d;

        d = parse_err("version: v1\nflags:\n  migStrategy: single\n  verbosity: 1\n"
                      "  migStrategy: mixed\n");
        assert_int_equal(d.line, 5);
        assert_int_equal(d.column, 3);
        assert_string_equal(d.message, "duplicate key \"migStrategy\"");

        d = parse_err("version: v1\nversion: v1\n");
        assert_int_equal(d.line, 2);
        assert_int_equal(d.column, 1);

        /* the first repeated key in document order is the one reported */
        d = parse_err("version: v1\nhostDevices:\n  devices:\n  - {name: a, b: 1, name: c, b: 2}\n");
        assert_int_equal(d.line, 4);
        assert_int_equal(d.column, 21);
        assert_string_equal(d.message, "duplicate key \"name\"");
}

static void test_syntax_error(void **state)
{
        struct diag d;

        d = parse_err("version: v1\nflags:\n  migStrategy: [none\n");
        assert_int_equal(d.line, 4);
        assert_int_equal(d.column, 1);
        assert_contains(d.message, "did not find expected ',' or ']'");

        d = parse_err("version: v1\nflags:\n  a: b\n c: d\n");
        assert_int_equal(d.line, 4);
        assert_int_equal(d.column, 2);
        assert_contains(d.message, "did not find expected key");

        d = parse_err("version: v1\nflags: \"unterminated\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 1);
        assert_contains(d.message, "found unexpected end of stream");

        /* bad UTF-8 is a reader error, positioned from its byte offset */
        d = parse_err("version: v1\nflags:\n  pluginDirectory: /a\xff\n");
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 22);
        assert_contains(d.message, "invalid");

        char buf[600];
        assert_contains(diag_format(&d, buf, sizeof(buf)), "t.yaml:3:22: ");
}

static void test_alias_bomb(void **state)
{
        static const char bomb[] = "version: v1\n"
                                   "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
                                   "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                                   "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                                   "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                                   "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                                   "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
                                   "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
                                   "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
                                   "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
                                   "flags: *i\n";
        struct diag d = parse_err(bomb);
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 8);
        assert_string_equal(d.message, "YAML aliases (*a) are not supported");

        /* an anchor alone is harmless */
        struct devlet_config *c = parse_ok("version: v1\nflags: &f\n  migStrategy: single\n");
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "single");
        config_free(c);
}

/* --kube-api-qps is GFD's float ("7.5"), read once by config_load;
 * --kube-api-burst an integer; client-go's 5 and 10 by default. */
static void test_kube_api_rate(void **state)
{
        struct devlet_config *c = LOAD_OK("--kube-api-qps", "7.5", "--kube-api-burst", "3");
        assert_true(c->kube_api_qps_value == 7.5);
        assert_int_equal(c->kube_api_burst, 3);
        config_free(c);
        c = LOAD_OK();
        assert_true(c->kube_api_qps_value == 5.0);
        assert_int_equal(c->kube_api_burst, 10);
        config_free(c);
        setenv("KUBE_API_QPS", "-1", 1);
        c = LOAD_OK();
        assert_true(c->kube_api_qps_value == -1.0);
        config_free(c);
        unsetenv("KUBE_API_QPS");
        struct diag d = LOAD_ERR("--kube-api-qps", "fast");
        assert_string_equal(d.message, "--kube-api-qps: \"fast\" is not a number");
        d = LOAD_ERR("--kube-api-qps", "");
        assert_contains(d.message, "is not a number");
        d = LOAD_ERR("--kube-api-qps", "inf");
        assert_contains(d.message, "is not a number");
        d = LOAD_ERR("--kube-api-burst", "-1");
        assert_contains(d.message, "kube-api-burst");
}

static void test_bounds(void **state)
{
        /* 2 MiB: refused before parsing */
        size_t big = 2 * 1024 * 1024;
        char *data = xmalloc(big);
        memset(data, '#', big);
        memcpy(data, "version: v1\n", 12);
        data[big - 1] = '\n';
        struct devlet_config *c = config_new_defaults(dev_config_families());
        struct diag d;
        assert_int_equal(config_parse_yaml("big.yaml", data, big, c, &d), -EINVAL);
        assert_string_equal(d.message, "larger than 1048576 bytes");
        config_free(c);

        const char *file = write_tmp(data, big);
        free(data);
        d = LOAD_ERR("--config-file", file);
        assert_string_equal(d.file, file);
        assert_string_equal(d.message, "larger than 1048576 bytes");

        /* deep nesting */
        char deep[400] = "version: v1\nx: ";
        size_t n = strlen(deep);
        for (int i = 0; i < 100; i++)
                deep[n++] = '[';
        deep[n] = '\0';
        d = parse_err(deep);
        assert_string_equal(d.message, "nested deeper than 64 levels");
        assert_int_equal(d.line, 2);
        assert_int_equal(d.column, 4 + 63);

        /* node count: 200001 list items in well under 1 MiB */
        size_t cap = 16 + 2 * 200001 + 2;
        char *many = xmalloc(cap);
        strcpy(many, "version: v1\nx: [");
        n = strlen(many);
        for (int i = 0; i < 200001; i++) {
                many[n++] = '1';
                many[n++] = ',';
        }
        many[n - 1] = ']';
        many[n] = '\0';
        assert_true(n < cap);
        d = parse_err(many);
        free(many);
        assert_string_equal(d.message, "more than 200000 YAML nodes");
        assert_int_equal(d.line, 2);

        /* device count */
        char *devs = NULL;
        size_t devs_len = 0;
        FILE *f = open_memstream(&devs, &devs_len);
        fputs("version: v1\nhostDevices:\n  devices:\n", f);
        for (int i = 0; i < 1025; i++)
                fprintf(f, "  - {name: d%d, groups: [{paths: [{path: /a}]}]}\n", i);
        fclose(f);
        d = parse_err(devs);
        free(devs);
        assert_string_equal(d.message, "hostDevices.devices: more than 1024 devices");
        assert_int_equal(d.line, 4);
        assert_int_equal(d.column, 3);

        d = parse_err("version: v1\n---\nversion: v1\n");
        assert_int_equal(d.line, 2);
        assert_string_equal(d.message, "only one YAML document is allowed");
}

static void test_failure_keeps_config(void **state)
{
        struct devlet_config *c = config_new_defaults(dev_config_families());
        struct diag d;
        /* the error comes after good flags and a warning: none of them lands */
        static const char bad[] = "version: v1\n"
                                  "flags:\n  migStrategy: mixed\n"
                                  "unknown: 1\n"
                                  "hostDevices:\n  devices:\n  - name: a\n"
                                  "    groups: [{paths: [{path: a}]}]\n";
        assert_int_equal(config_parse_yaml("t.yaml", bad, strlen(bad), c, &d), -EINVAL);
        assert_string_equal(nvidia_options_get(c)->mig_strategy, "none");
        assert_int_equal(c->hostdev.n_devices, 0);
        assert_null(c->warnings);
        config_free(c);
}

static void test_load_file_errors(void **state)
{
        struct devlet_config *c = NULL;
        struct diag d;
        assert_int_equal(LOAD(&c, &d, NULL, "--config-file", "/nonexistent/devlet.yaml"),
                         -ENOENT);
        assert_null(c);
        assert_string_equal(d.file, "/nonexistent/devlet.yaml");
        assert_contains(d.message, "cannot read");

        static const char bad[] = "version: v1\nflags:\n  migStrategy: bogus\n";
        const char *file = write_tmp(bad, strlen(bad));
        assert_int_equal(LOAD(&c, &d, NULL, "--config-file", file), -EINVAL);
        assert_string_equal(d.file, file);
        assert_int_equal(d.line, 3);
        assert_int_equal(d.column, 16);

        /* a bad flag is reported before the file is read */
        assert_int_equal(LOAD(&c, &d, NULL, "--config-file", "/nonexistent", "--bogus"), -EINVAL);
        assert_string_equal(d.message, "unknown flag --bogus");
}

static void test_help(void **state)
{
        char *buf = help_text();
        assert_contains(buf, "--mig-strategy none|single|mixed");
        assert_contains(buf, "env: MIG_STRATEGY, GFD_MIG_STRATEGY; key: flags.migStrategy; default: none");
        assert_contains(buf, "-v, --verbosity N  (also --v)");
        assert_contains(buf, "--nvidia-driver-root VALUE  (also --driver-root)");
        assert_contains(buf, "env: NVIDIA_CDI_HOOK_PATH, NVIDIA_CTK_PATH; key: "
                             "flags.plugin.nvidiaCTKPath; default: /usr/bin/nvidia-ctk");
        assert_contains(buf, "--device-list-strategy envvar|volume-mounts|cdi-annotations|cdi-cri[,...]");
        assert_contains(buf, "--pass-device-specs[=true|false]");
        assert_contains(buf, "env: CONFIG_FILE, GFD_CONFIG_FILE; default: (none)");
        /* table order */
        const struct config_option *o[256];
        size_t n = config_options_all(o, ARRAY_SIZE(o));
        const char *prev = buf;
        for (size_t i = 0; i < n; i++) {
                char flag[80];
                snprintf(flag, sizeof(flag), "--%s", o[i]->flag);
                const char *at = strstr(prev, flag);
                assert_non_null(at);
                prev = at;
        }
        free(buf);
}

static void test_table(void **state)
{
        const struct config_option *o[256];
        size_t n = config_options_all(o, ARRAY_SIZE(o));
        assert_true(n >= 20);
        for (size_t i = 0; i < n; i++) {
                assert_non_null(o[i]->flag);
                assert_non_null(o[i]->help);
                assert_non_null(o[i]->default_value);
                for (size_t j = 0; j < i; j++) {
                        assert_string_not_equal(o[i]->flag, o[j]->flag);
                        if (o[i]->key && o[j]->key)
                                assert_string_not_equal(o[i]->key, o[j]->key);
                }
        }
}

static void test_diag_format(void **state)
{
        struct diag d = { .line = 3, .column = 7 };
        char buf[128];
        strcpy(d.file, "f.yaml");
        strcpy(d.message, "bad");
        assert_string_equal(diag_format(&d, buf, sizeof(buf)), "f.yaml:3:7: bad");
        d.line = 0;
        assert_string_equal(diag_format(&d, buf, sizeof(buf)), "f.yaml: bad");
        d.file[0] = '\0';
        assert_string_equal(diag_format(&d, buf, sizeof(buf)), "bad");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                T(test_defaults),        T(test_load_no_args),      T(test_precedence),
                T(test_config_file_source), T(test_kubelet_socket), T(test_flag_forms),
                T(test_unknown_flag),    T(test_flag_errors),       T(test_positional),
                T(test_aliases),         T(test_bool_forms),        T(test_durations),
                T(test_lists),           T(test_nvidia_file),
                T(test_unknown_keys_warn), T(test_many_unknown_keys_warn_once), T(test_version),         T(test_type_errors),
                T(test_duplicate_keys),  T(test_syntax_error),      T(test_alias_bomb),
                T(test_bounds),          T(test_kube_api_rate),          T(test_failure_keeps_config), T(test_load_file_errors),
                T(test_help),            T(test_table),             T(test_diag_format),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
