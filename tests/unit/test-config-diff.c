/* config_diff: what differs between two configs and what that needs, from
 * the tables.  Every row (devlet's and every family's) and every section
 * carries apply flags; a change of any one option, whatever its type, is
 * found and reported with its row's flags; sections are compared by value;
 * an option's loaded file content counts; config_option_copy gives back
 * the running value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/xalloc.h"
#include "config/config.h"
#include "config/options.h"
#include "config/sections.h"

#include "config-test.h"

/* Every row says what a change needs; a row without a config-file key can
 * change only with a new process, and only such a row is RESTART. */
static void test_every_row_tagged(void **state)
{
        const struct config_option *o[256];
        size_t n = config_options_all(o, ARRAY_SIZE(o));
        assert_true(n > 40);
        for (size_t i = 0; i < n; i++) {
                if (!o[i]->apply || (o[i]->apply & ~CONFIG_APPLY_ALL))
                        fail_msg("option %s has no apply flags", o[i]->flag);
                bool restart = o[i]->apply & CONFIG_APPLY_RESTART;
                if (restart != !o[i]->key)
                        fail_msg("option %s: RESTART is for the rows without a key", o[i]->flag);
        }
        size_t k = 0;
        for (const struct config_section *s = config_sections; s->key; s++, k++) {
                assert_non_null(s->equal);
                assert_true(s->apply && !(s->apply & ~CONFIG_APPLY_ALL));
                assert_false(s->apply & CONFIG_APPLY_RESTART);
        }
        assert_int_equal(k, 3);
        const struct config_families *f = TEST_FAMILIES;
        for (size_t j = 0; f->v[j]; j++) {
                const struct config_section *s = f->v[j]->section;
                if (!s)
                        continue;
                assert_non_null(s->equal);
                assert_true(s->apply);
                assert_false(s->apply & CONFIG_APPLY_RESTART);
        }
}

static void test_same(void **state)
{
        struct devlet_config *a = config_new_defaults(TEST_FAMILIES), *b = config_new_defaults(TEST_FAMILIES);
        struct config_change *ch = (void *)1;
        size_t n = 99;
        assert_int_equal(config_diff(a, b, &ch, &n), 0);
        assert_int_equal(n, 0);
        free(ch);
        assert_int_equal(config_diff(a, a, NULL, NULL), 0);
        config_free(a);
        config_free(b);
}

/* Changes the value of opt in cfg, whatever its type. */
static void change(struct devlet_config *cfg, const struct config_option *opt)
{
        void *f = config_option_field(cfg, opt);
        switch (opt->type) {
        case CONFIG_STRING:
                free(*(char **)f);
                *(char **)f = xstrdup("changed");
                break;
        case CONFIG_LIST:
                *(char ***)f = strv_push(*(char ***)f ?: xcalloc(1, sizeof(char *)), "changed");
                break;
        case CONFIG_BOOL:
                *(bool *)f = !*(bool *)f;
                break;
        case CONFIG_INT:
                *(long *)f += 1;
                break;
        case CONFIG_DURATION:
                *(int64_t *)f += 1;
                break;
        }
}

/* One option changed, for every row: found, named, its flags returned;
 * config_option_copy gives the running value back. */
static void test_each_option(void **state)
{
        const struct config_option *o[256];
        size_t n = config_options_all(o, ARRAY_SIZE(o));
        for (size_t i = 0; i < n; i++) {
                struct devlet_config *prev = config_new_defaults(TEST_FAMILIES), *next = config_new_defaults(TEST_FAMILIES);
                change(next, o[i]);
                struct config_change *ch = NULL;
                size_t nc = 0;
                unsigned apply = config_diff(prev, next, &ch, &nc);
                if (nc != 1)
                        fail_msg("option %s: %zu changes", o[i]->flag, nc);
                assert_string_equal(ch[0].name, o[i]->flag);
                assert_ptr_equal(ch[0].option, o[i]);
                assert_int_equal(ch[0].apply, o[i]->apply);
                assert_int_equal(apply, o[i]->apply);
                free(ch);
                config_option_copy(next, prev, o[i]);
                assert_int_equal(config_diff(prev, next, NULL, NULL), 0);
                config_free(prev);
                config_free(next);
        }
}

/* Several at once: the union of their flags, in table order. */
static void test_union(void **state)
{
        struct devlet_config *prev = LOAD_OK("--collect-interval", "1000");
        struct devlet_config *next = LOAD_OK("--collect-interval", "2000", "--cdi-spec-dir", "/x",
                                             "--mig-strategy", "mixed");
        struct config_change *ch = NULL;
        size_t n = 0;
        unsigned apply = config_diff(prev, next, &ch, &n);
        assert_int_equal(apply, CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS | CONFIG_APPLY_METRICS);
        assert_int_equal(n, 3);
        /* devlet's rows, then the families' (mig-strategy is NVIDIA's) */
        assert_string_equal(ch[0].name, "cdi-spec-dir");
        assert_string_equal(ch[1].name, "collect-interval");
        assert_string_equal(ch[2].name, "mig-strategy");
        char buf[128];
        assert_string_equal(config_apply_text(apply, buf, sizeof(buf)), "reserve,metrics,outputs");
        assert_string_equal(config_apply_text(0, buf, sizeof(buf)), "none");
        free(ch);
        config_free(prev);
        config_free(next);
}

/* The same path with other content is a change (the counters CSV). */
static void test_loaded_content(void **state)
{
        struct devlet_config *prev = config_new_defaults(TEST_FAMILIES), *next = config_new_defaults(TEST_FAMILIES);
        const char *names[] = { "kubernetes-virtual-gpus", "collectors" };
        free(prev->collectors_file);
        prev->collectors_file = xstrdup("/etc/c.csv");
        free(next->collectors_file);
        next->collectors_file = xstrdup("/etc/c.csv");
        prev->collectors = strv_push(xcalloc(1, sizeof(char *)), "DCGM_FI_DEV_GPU_TEMP");
        next->collectors = strv_push(xcalloc(1, sizeof(char *)), "DCGM_FI_DEV_POWER_USAGE");
        next->kubernetes_virtual_gpus = true;
        struct config_change *ch = NULL;
        size_t n = 0;
        assert_int_equal(config_diff(prev, next, &ch, &n), CONFIG_APPLY_METRICS);
        assert_int_equal(n, 2);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(ch[i].name, names[i]);
        free(ch);
        config_option_copy(next, prev, config_option_by_flag(TEST_FAMILIES, "collectors", 10));
        assert_string_equal(next->collectors[0], "DCGM_FI_DEV_GPU_TEMP");
        assert_null(next->collectors[1]);
        config_free(prev);
        config_free(next);
}

/* Sections are compared by value, deep (a path's permissions, a sharing
 * resource's device list). */
static void test_sections(void **state)
{
        static const struct {
                const char *a, *b, *name;
                unsigned apply;
        } cases[] = {
                { "version: v1\n", "version: v1\nhealth: {recovery: {enabled: true}}\n", "health",
                  CONFIG_APPLY_RESERVE },
                { "version: v1\nhealth: {recovery: {enabled: true, quietPeriod: 10s}}\n",
                  "version: v1\nhealth: {recovery: {enabled: true, quietPeriod: 20s}}\n", "health",
                  CONFIG_APPLY_RESERVE },
                { "version: v1\nhostDevices: {devices: [{name: a, groups: [{paths: [{path: "
                  "/dev/a, permissions: r}]}]}]}\n",
                  "version: v1\nhostDevices: {devices: [{name: a, groups: [{paths: [{path: "
                  "/dev/a, permissions: rw}]}]}]}\n",
                  "hostDevices", CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS },
                { "version: v1\nresources: {gpus: [{pattern: '*A100*', name: a100}]}\n",
                  "version: v1\nresources: {gpus: [{pattern: '*H100*', name: a100}]}\n",
                  "resources", CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS },
                { "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, "
                  "replicas: 2, devices: [0]}]}}\n",
                  "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, "
                  "replicas: 2, devices: [1]}]}}\n",
                  "sharing", CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct devlet_config *a = parse_ok(cases[i].a), *b = parse_ok(cases[i].b);
                struct devlet_config *a2 = parse_ok(cases[i].a);
                assert_int_equal(config_diff(a, a2, NULL, NULL), 0);
                struct config_change *ch = NULL;
                size_t n = 0;
                assert_int_equal(config_diff(a, b, &ch, &n), cases[i].apply);
                assert_int_equal(n, 1);
                assert_string_equal(ch[0].name, cases[i].name);
                assert_null(ch[0].option);
                free(ch);
                config_free(a);
                config_free(a2);
                config_free(b);
        }
}

/* `devlet help options-json`'s table: every row with its flags. */
static void test_table_json(void **state)
{
        char *s = config_table_json(TEST_FAMILIES);
        assert_non_null(strstr(s, "{\"flag\":\"collectors\",\"alias\":null,\"short\":\"f\",\"key\":\"flags.collectors\""));
        assert_non_null(strstr(s, "\"apply\":[\"metrics\"]"));
        assert_non_null(strstr(s, "{\"key\":\"sharing\",\"apply\":[\"reserve\",\"outputs\"]}"));
        free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_every_row_tagged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_same, setup, teardown),
                cmocka_unit_test_setup_teardown(test_each_option, setup, teardown),
                cmocka_unit_test_setup_teardown(test_union, setup, teardown),
                cmocka_unit_test_setup_teardown(test_loaded_content, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sections, setup, teardown),
                cmocka_unit_test_setup_teardown(test_table_json, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
