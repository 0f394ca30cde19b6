/* Unit tests for src/config's hostDevices section: the README's example,
 * each group's details, every error with its position, and resource names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/config.h"
#include "config-test.h"

static const char example_yaml[] = "version: v1\n"
                                   "hostDevices:\n"
                                   "  domain: devlet.io\n"
                                   "  devices:\n"
                                   "    - name: fuse\n"
                                   "      groups:\n"
                                   "        - count: 10\n"
                                   "          paths:\n"
                                   "            - path: /dev/fuse\n"
                                   "    - name: serial\n"
                                   "      groups:\n"
                                   "        - paths:\n"
                                   "            - path: /dev/ttyUSB*\n"
                                   "              mountPath: /dev/ttyUSB0\n"
                                   "              permissions: rw\n"
                                   "    - name: logitech-cam\n"
                                   "      groups:\n"
                                   "        - usb:\n"
                                   "            - vendor: \"046d\"\n"
                                   "              product: \"0825\"\n"
                                   "    - name: runtime-socket\n"
                                   "      groups:\n"
                                   "        - paths:\n"
                                   "            - path: /run/foo.sock\n"
                                   "              type: Mount\n"
                                   "              readOnly: true\n";

static void test_example_hostdev(void **state)
{
        struct devlet_config *c = parse_ok(example_yaml);
        const struct hostdev_cfg *h = &c->hostdev;
        assert_null(c->warnings);
        assert_string_equal(h->domain, "devlet.io");
        assert_int_equal(h->n_devices, 4);

        const struct hostdev_device_cfg *d = &h->devices[0];
        assert_string_equal(d->name, "fuse");
        assert_int_equal(d->n_groups, 1);
        assert_int_equal(d->groups[0].count, 10);
        assert_int_equal(d->groups[0].n_paths, 1);
        assert_int_equal(d->groups[0].n_usb, 0);
        assert_null(d->groups[0].usb);
        const struct hostdev_path_cfg *p = &d->groups[0].paths[0];
        assert_string_equal(p->path, "/dev/fuse");
        assert_null(p->mount_path);
        assert_string_equal(p->permissions, "rw");
        assert_int_equal(p->type, HOSTDEV_PATH_DEVICE);
        assert_false(p->read_only);
        assert_false(p->optional);

        d = &h->devices[1];
        assert_string_equal(d->name, "serial");
        assert_int_equal(d->n_groups, 1);
        assert_int_equal(d->groups[0].count, 1);
        assert_int_equal(d->groups[0].n_paths, 1);
        p = &d->groups[0].paths[0];
        assert_string_equal(p->path, "/dev/ttyUSB*");
        assert_string_equal(p->mount_path, "/dev/ttyUSB0");
        assert_string_equal(p->permissions, "rw");
        assert_int_equal(p->type, HOSTDEV_PATH_DEVICE);

        d = &h->devices[2];
        assert_string_equal(d->name, "logitech-cam");
        assert_int_equal(d->groups[0].count, 1);
        assert_int_equal(d->groups[0].n_paths, 0);
        assert_null(d->groups[0].paths);
        assert_int_equal(d->groups[0].n_usb, 1);
        assert_string_equal(d->groups[0].usb[0].vendor, "046d");
        assert_string_equal(d->groups[0].usb[0].product, "0825");
        assert_null(d->groups[0].usb[0].serial);

        d = &h->devices[3];
        assert_string_equal(d->name, "runtime-socket");
        p = &d->groups[0].paths[0];
        assert_string_equal(p->path, "/run/foo.sock");
        assert_null(p->mount_path);
        assert_int_equal(p->type, HOSTDEV_PATH_MOUNT);
        assert_true(p->read_only);
        assert_false(p->optional);
        config_free(c);
}

static void test_hostdev_details(void **state)
{
        struct devlet_config *c = parse_ok("version: v1\n"
                                           "hostDevices:\n"
                                           "  domain: example.com\n"
                                           "  devices:\n"
                                           "  - name: multi\n"
                                           "    groups:\n"
                                           "    - count: 2\n"
                                           "      paths:\n"
                                           "      - {path: /dev/a, permissions: mwr, optional: yes}\n"
                                           "      - {path: /dev/b, type: device, permissions: m}\n"
                                           "      usb:\n"
                                           "      - {vendor: 0X046D, product: '0aBc', serial: S1}\n"
                                           "    - paths: [{path: /x, type: mount}]\n");
        const struct hostdev_cfg *h = &c->hostdev;
        assert_string_equal(h->domain, "example.com");
        assert_int_equal(h->n_devices, 1);
        const struct hostdev_device_cfg *d = &h->devices[0];
        assert_int_equal(d->n_groups, 2);
        assert_int_equal(d->groups[0].count, 2);
        assert_int_equal(d->groups[0].n_paths, 2);
        assert_string_equal(d->groups[0].paths[0].permissions, "rwm");
        assert_true(d->groups[0].paths[0].optional);
        assert_string_equal(d->groups[0].paths[1].permissions, "m");
        assert_int_equal(d->groups[0].paths[1].type, HOSTDEV_PATH_DEVICE);
        assert_string_equal(d->groups[0].usb[0].vendor, "046d");
        assert_string_equal(d->groups[0].usb[0].product, "0abc");
        assert_string_equal(d->groups[0].usb[0].serial, "S1");
        assert_int_equal(d->groups[1].paths[0].type, HOSTDEV_PATH_MOUNT);
        assert_false(d->groups[1].paths[0].read_only);
        config_free(c);

        /* an empty section keeps the default domain */
        c = parse_ok("version: v1\nhostDevices:\n");
        assert_string_equal(c->hostdev.domain, "devlet.io");
        assert_int_equal(c->hostdev.n_devices, 0);
        config_free(c);
}

static void test_hostdev_errors(void **state)
{
        static const struct {
                const char *yaml;
                int line, column;
                const char *message;
        } cases[] = {
                { "version: v1\n"
                  "hostDevices:\n"
                  "  devices:\n"
                  "    - name: a\n"
                  "      groups:\n"
                  "        - paths: [{path: /dev/a}]\n"
                  "    - name: b\n"
                  "      groups:\n"
                  "        - paths: [{path: /dev/b, permissions: rwx}]\n",
                  9, 47,
                  "hostDevices.devices[1].groups[0].paths[0].permissions: \"rwx\" is not a subset "
                  "of \"rwm\"" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev/a\n        permissions: rwr\n",
                  8, 22,
                  "hostDevices.devices[0].groups[0].paths[0].permissions: \"rwr\" repeats 'r'" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev/a\n        permissions: ''\n",
                  8, 22,
                  "hostDevices.devices[0].groups[0].paths[0].permissions: must not be empty (a "
                  "subset of \"rwm\")" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: dev/a\n",
                  7, 15,
                  "hostDevices.devices[0].groups[0].paths[0].path: \"dev/a\" is not a clean "
                  "absolute path (no \"..\", \".\" or \"//\")" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev/../etc/shadow\n",
                  7, 15, NULL },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev//a\n",
                  7, 15, NULL },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev/a\n        mountPath: a\n",
                  8, 20,
                  "hostDevices.devices[0].groups[0].paths[0].mountPath: \"a\" is not a clean "
                  "absolute path (no \"..\", \".\" or \"//\")" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - mountPath: /a\n",
                  7, 9, "hostDevices.devices[0].groups[0].paths[0]: \"path\" is required" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev/a\n        type: Socket\n",
                  8, 15,
                  "hostDevices.devices[0].groups[0].paths[0].type: \"Socket\" is not one of "
                  "Device, Mount" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev/a\n        readOnly: true\n",
                  8, 19,
                  "hostDevices.devices[0].groups[0].paths[0].readOnly: only applies to type "
                  "Mount" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths:\n      - path: /dev/a\n        optional: maybe\n",
                  8, 19,
                  "hostDevices.devices[0].groups[0].paths[0].optional: \"maybe\" is not a boolean "
                  "(true or false)" },
                { "version: v1\nhostDevices:\n  devices:\n  - groups:\n    - paths: [{path: /a}]\n",
                  4, 5, "hostDevices.devices[0]: \"name\" is required" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: Fuse\n"
                  "    groups: [{paths: [{path: /a}]}]\n",
                  4, 11,
                  "hostDevices.devices[0].name: \"Fuse\" is not a valid name (at most 63 "
                  "lowercase letters, digits, '-', '.' or '_', starting and ending with a letter "
                  "or digit)" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: -fuse\n"
                  "    groups: [{paths: [{path: /a}]}]\n",
                  4, 11, NULL },
                { "version: v1\nhostDevices:\n  devices:\n"
                  "  - name: fuse\n    groups: [{paths: [{path: /a}]}]\n"
                  "  - name: fuse\n    groups: [{paths: [{path: /b}]}]\n",
                  6, 11,
                  "hostDevices.devices[1].name: \"fuse\" is already used by "
                  "hostDevices.devices[0]" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n", 4, 5,
                  "hostDevices.devices[0]: \"groups\" is required" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups: []\n", 5, 13,
                  "hostDevices.devices[0].groups: needs at least one group" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - count: 2\n",
                  6, 7,
                  "hostDevices.devices[0].groups[0]: needs at least one entry in \"paths\" or "
                  "\"usb\"" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - count: 0\n      paths: [{path: /a}]\n",
                  6, 14,
                  "hostDevices.devices[0].groups[0].count: \"0\" is not an integer from 1 to "
                  "65536" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - count: 65537\n      paths: [{path: /a}]\n",
                  6, 14, NULL },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - count: -3\n      paths: [{path: /a}]\n",
                  6, 14, NULL },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - count: [1]\n      paths: [{path: /a}]\n",
                  6, 14,
                  "hostDevices.devices[0].groups[0].count: expected a value, found a list" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - usb: [{vendor: 46d, product: '0825'}]\n",
                  6, 22,
                  "hostDevices.devices[0].groups[0].usb[0].vendor: \"46d\" is not a 4-digit hex "
                  "ID (like \"046d\")" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - usb: [{vendor: '046d', product: 08g5}]\n",
                  6, 39, NULL },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - usb: [{vendor: '046d'}]\n",
                  6, 13, "hostDevices.devices[0].groups[0].usb[0]: \"product\" is required" },
                { "version: v1\nhostDevices:\n  domain: Devlet.IO\n", 3, 11,
                  "hostDevices.domain: \"Devlet.IO\" is not a valid DNS subdomain (lowercase "
                  "letters, digits, '-' and '.')" },
                { "version: v1\nhostDevices:\n  domain: kubernetes.io\n  devices:\n  - name: a\n"
                  "    groups: [{paths: [{path: /a}]}]\n",
                  3, 11,
                  "hostDevices.domain: \"kubernetes.io\" is reserved for Kubernetes' own "
                  "resources" },
                { "version: v1\nhostDevices:\n  devices:\n    name: a\n", 4, 5,
                  "hostDevices.devices: expected a list, found a mapping" },
                { "version: v1\nhostDevices: [a]\n", 2, 14,
                  "hostDevices: expected a mapping, found a list" },
                { "version: v1\nhostDevices:\n  devices:\n  - name: a\n    groups:\n"
                  "    - paths: /dev/a\n",
                  6, 14, "hostDevices.devices[0].groups[0].paths: expected a list, found a value" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct diag d = parse_err(cases[i].yaml);
                if (d.line != cases[i].line || d.column != cases[i].column ||
                    (cases[i].message && strcmp(d.message, cases[i].message) != 0)) {
                        print_error("case %zu: got %d:%d: %s\n", i, d.line, d.column, d.message);
                        fail();
                }
        }
}

static void test_resource_names(void **state)
{
        static const char *const good[] = { "devlet.io/fuse", "nvidia.com/gpu", "a/b",
                                            "example.com/Cam_1.x", "x-y.z/a-b" };
        static const char *const bad[] = { "fuse",         "/fuse",         "devlet.io/",
                                           "Devlet.io/a",  "devlet..io/a",  "-devlet.io/a",
                                           "devlet.io/-a", "devlet.io/a/b", "devlet.io/a b",
                                           "kubernetes.io/a", "x.kubernetes.io/a", "" };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                assert_true(config_valid_resource_name(good[i]));
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (config_valid_resource_name(bad[i])) {
                        print_error("accepted \"%s\"\n", bad[i]);
                        fail();
                }
        char name[128];
        snprintf(name, sizeof(name), "d.io/%063d", 0);
        assert_true(config_valid_resource_name(name));
        snprintf(name, sizeof(name), "d.io/%064d", 0);
        assert_false(config_valid_resource_name(name));
        char domain[300];
        memset(domain, 'a', 254);
        strcpy(domain + 254, "/x");
        assert_false(config_valid_resource_name(domain));
        assert_false(config_valid_resource_name(NULL));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
        const struct CMUnitTest tests[] = {
                T(test_example_hostdev), T(test_hostdev_details),
                T(test_hostdev_errors),  T(test_resource_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
