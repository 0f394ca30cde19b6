/* dra/: what DRA decodes from the API server (a ResourceClaim's
 * allocation, refused with a message whenever it is not one for this
 * driver and node), the modes of --dra-resources, and the ResourceSlices a
 * device table calls for (an unhealthy device tainted, 64 per slice, a content
 * hash that changes with the content and only with it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/xalloc.h"
#include "config/config.h"
#include "dra/internal.h"

#define UID "8f0e6c1a-1111-4222-8333-444455556666"

static json_t *claim(const char *results)
{
        char *text = xasprintf("{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"" UID
                               "\"},\"status\":{\"allocation\":{\"devices\":{\"results\":%s}}}}",
                               results);
        json_t *j = json_loads(text, 0, NULL);
        free(text);
        assert_non_null(j);
        return j;
}

static void test_claim_decode(void **state)
{
        json_t *j = claim("[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"n1\","
                          "\"device\":\"gpu-0\"},{\"request\":\"nic\",\"driver\":\"x.example.com\","
                          "\"pool\":\"n1\",\"device\":\"nic-0\"},{\"request\":\"gpu\",\"driver\":"
                          "\"gpu.nvidia.com\",\"pool\":\"n1\",\"device\":\"gpu-1\","
                          "\"adminAccess\":true}]");
        struct dra_claim c = { 0 };
        struct diag why = { 0 };
        assert_int_equal(dra_claim_decode(j, UID, "gpu.nvidia.com", "n1", &c, &why), 0);
        assert_int_equal(c.n_devices, 2);
        assert_string_equal(c.devices[0].device, "gpu-0");
        assert_string_equal(c.devices[1].device, "gpu-1");
        assert_string_equal(c.devices[1].request, "gpu");
        assert_false(c.devices[0].admin_access);
        assert_true(c.devices[1].admin_access);
        assert_string_equal(c.namespace, "ns");
        dra_claim_release(&c);

        /* another driver's claim, another node's pool, another UID */
        assert_int_equal(dra_claim_decode(j, UID, "gpu.amd.com", "n1", &c, &why), -EINVAL);
        assert_non_null(strstr(why.message, "no device of driver gpu.amd.com"));
        assert_int_equal(dra_claim_decode(j, UID, "gpu.nvidia.com", "n2", &c, &why), -EINVAL);
        assert_non_null(strstr(why.message, "not this node's"));
        assert_int_equal(dra_claim_decode(j, "0000", "gpu.nvidia.com", "n1", &c, &why), -ESTALE);
        json_decref(j);
}

static void test_claim_refused(void **state)
{
        static const char *const bad[] = {
                "{}",
                "[]",
                "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"" UID "\"}}",
                "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"" UID
                "\"},\"status\":{\"allocation\":{\"devices\":{\"results\":{}}}}}",
                "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"" UID
                "\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"driver\":"
                "\"gpu.nvidia.com\",\"pool\":1,\"device\":\"x\",\"request\":\"r\"}]}}}}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *j = json_loads(bad[i], 0, NULL);
                assert_non_null(j);
                struct dra_claim c = { 0 };
                struct diag why = { 0 };
                assert_true(dra_claim_decode(j, UID, "gpu.nvidia.com", "n1", &c, &why) < 0);
                assert_true(why.message[0] != '\0');
                assert_int_equal(c.n_devices, 0);
                json_decref(j);
        }
}

static void test_uid_valid(void **state)
{
        assert_true(dra_uid_valid(UID));
        assert_false(dra_uid_valid(""));
        assert_false(dra_uid_valid("../etc"));
        assert_false(dra_uid_valid("A"));
        assert_false(dra_uid_valid(NULL));
}

static void test_modes(void **state)
{
        struct devlet_config cfg = { 0 };
        char *items[] = { (char[]){ "*" }, (char[]){ "devlet.io/fuse=both" },
                          (char[]){ "nvidia.com/gpu=device-plugin" }, NULL };
        cfg.dra_resources = items;
        assert_int_equal(dra_mode_of(&cfg, "amd.com/gpu", "gpu.amd.com"), DRA_MODE_DRA);
        assert_int_equal(dra_mode_of(&cfg, "devlet.io/fuse", "hostdev.devlet.io"), DRA_MODE_BOTH);
        assert_int_equal(dra_mode_of(&cfg, "nvidia.com/gpu", "gpu.nvidia.com"),
                         DRA_MODE_DEVICE_PLUGIN);
        /* a family without a DRA driver stays with the device plugin */
        assert_int_equal(dra_mode_of(&cfg, "amd.com/gpu", NULL), DRA_MODE_DEVICE_PLUGIN);
        char *glob[] = { (char[]){ "nvidia.com/*" }, NULL };
        cfg.dra_resources = glob;
        assert_int_equal(dra_mode_of(&cfg, "nvidia.com/mig-1g.10gb", "gpu.nvidia.com"), DRA_MODE_DRA);
        assert_int_equal(dra_mode_of(&cfg, "amd.com/gpu", "gpu.amd.com"), DRA_MODE_DEVICE_PLUGIN);
        cfg.dra_resources = NULL;
        assert_int_equal(dra_mode_of(&cfg, "amd.com/gpu", "gpu.amd.com"), DRA_MODE_DEVICE_PLUGIN);
}

static struct dev_resource *resource(size_t n)
{
        struct dev_resource *r = dev_resource_new("devlet.io/fuse");
        for (size_t i = 0; i < n; i++) {
                char id[32];
                snprintf(id, sizeof(id), "fuse%zu", i);
                struct dev_device *d = dev_resource_add(r, id);
                dev_device_add_node(d, "/dev/fuse", "/dev/fuse", "rw");
                char name[32];
                snprintf(name, sizeof(name), "fuse-%zu", i);
                d->model = dev_model_new(name);
                dev_model_string(d->model, "path", "/dev/fuse");
                dev_model_int(d->model, "minor", 229);
                dev_model_capacity(d->model, "slots", "1");
        }
        return r;
}

static void test_slices(void **state)
{
        struct dev_resource *r = resource(300);
        r->devices[7].health = DEV_UNHEALTHY;
        struct dra_table *t = dra_table_build("hostdev.devlet.io", &r, 1);
        assert_int_equal(t->n, 300);
        assert_non_null(dra_table_find(t, "fuse-299"));
        assert_int_equal(t->devs[0].alloc.n_nodes, 1);
        char h1[17], h2[17];
        json_t *s = dra_slices_desired(t, "node-a", "node-a-hostdev-devlet-io", true, h1);
        assert_int_equal(json_array_size(s), 5);
        size_t total = 0;
        for (size_t i = 0; i < 5; i++) {
                json_t *spec = json_object_get(json_array_get(s, i), "spec");
                assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "node-a");
                json_t *pool = json_object_get(spec, "pool");
                assert_int_equal(json_integer_value(json_object_get(pool, "resourceSliceCount")), 5);
                total += json_array_size(json_object_get(spec, "devices"));
        }
        assert_int_equal(total, 300); /* the unhealthy one stays, tainted */
        json_t *dev7 = json_array_get(json_object_get(json_object_get(json_array_get(s, 0), "spec"),
                                                      "devices"),
                                      7);
        json_t *taint = json_array_get(json_object_get(dev7, "taints"), 0);
        assert_string_equal(json_string_value(json_object_get(taint, "key")),
                            "hostdev.devlet.io/unhealthy");
        assert_string_equal(json_string_value(json_object_get(taint, "effect")), "NoSchedule");
        assert_null(json_object_get(taint, "timeAdded"));
        assert_null(json_object_get(json_array_get(json_object_get(json_object_get(
                                                           json_array_get(s, 0), "spec"),
                                                                           "devices"),
                                                   6),
                                    "taints"));
        json_decref(s);
        /* the family's key, value and time */
        dra_table_unref(t);
        snprintf(r->devices[7].taint.key, sizeof(r->devices[7].taint.key), "gpu.nvidia.com/xid");
        snprintf(r->devices[7].taint.value, sizeof(r->devices[7].taint.value), "79");
        r->devices[7].taint.since = 1796659200; /* 2026-12-07T16:00:00Z */
        t = dra_table_build("hostdev.devlet.io", &r, 1);
        s = dra_slices_desired(t, "node-a", "node-a-hostdev-devlet-io", true, h1);
        dev7 = json_array_get(json_object_get(json_object_get(json_array_get(s, 0), "spec"),
                                              "devices"),
                              7);
        taint = json_array_get(json_object_get(dev7, "taints"), 0);
        assert_string_equal(json_string_value(json_object_get(taint, "key")), "gpu.nvidia.com/xid");
        assert_string_equal(json_string_value(json_object_get(taint, "value")), "79");
        assert_string_equal(json_string_value(json_object_get(taint, "timeAdded")),
                            "2026-12-07T16:00:00Z");
        json_t *dev0 = json_array_get(json_object_get(json_object_get(json_array_get(s, 0), "spec"),
                                                      "devices"),
                                      0);
        assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(json_object_get(dev0, "attributes"), "minor"),
                                 "int")),
                         229);
        json_decref(s);
        /* the same content, the same hash; a health change, another */
        s = dra_slices_desired(t, "node-a", "node-a-hostdev-devlet-io", true, h2);
        assert_string_equal(h1, h2);
        json_decref(s);
        dra_table_unref(t);
        r->devices[7].health = DEV_HEALTHY;
        t = dra_table_build("hostdev.devlet.io", &r, 1);
        s = dra_slices_desired(t, "node-a", "node-a-hostdev-devlet-io", true, h2);
        assert_string_not_equal(h1, h2);
        json_decref(s);
        dra_table_unref(t);
        dev_resource_free(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_claim_decode),
                cmocka_unit_test(test_claim_refused),
                cmocka_unit_test(test_uid_valid),
                cmocka_unit_test(test_modes),
                cmocka_unit_test(test_slices),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
