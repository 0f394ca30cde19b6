/* Unit tests for devices/amd/exporter-config.c (AMD's exporter
 * config.json): every key devlet reads, AMD's rules (an empty Fields is
 * every field, at most 10 custom labels, none of AMD's own labels but
 * CLUSTER_NAME, an invalid prefix dropped), warnings for what devlet does
 * not know, cannot give or does not read, each at its place, errors at
 * file:line:column, a file that is not there read as the defaults; files
 * of many thousand entries (inside the 1 MiB cap) parse to a few warnings
 * and at most AMD_EXPORTER_POD_LABELS_MAX pod labels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "amd-exporter-config-gen.h"
#include "base/xalloc.h"
#include "devices/amd/exporter-config.h"

static int parse(const char *text, struct amd_exporter_config **out, struct diag *d, char ***warnings)
{
        return amd_exporter_config_parse("config.json", text, strlen(text), out, warnings, d);
}

/* The warning that contains what, or NULL. */
static const char *warned(char **warnings, const char *what)
{
        for (size_t i = 0; warnings && warnings[i]; i++)
                if (strstr(warnings[i], what))
                        return warnings[i];
        return NULL;
}

static void test_every_key(void **state)
{
        struct amd_exporter_config *c = NULL;
        struct diag d = { 0 };
        char **w = NULL;
        const char *text = "{\n"
                           "  \"ServerPort\": 5001,\n"
                           "  \"GPUConfig\": {\n"
                           "    \"Fields\": [\"GPU_GFX_ACTIVITY\", \"gpu_package_power\", \"GPU_GFX_ACTIVITY\",\n"
                           "               \"PCIE_NAC_RECEIVED_COUNT\"],\n"
                           "    \"Labels\": [\"GPU_UUID\", \"SERIAL_NUMBER\", \"vbios_version\"],\n"
                           "    \"CustomLabels\": {\"CLUSTER_NAME\": \"west\", \"Team\": \"ml\"},\n"
                           "    \"ExtraPodLabels\": {\"WORKLOAD_ID\": \"amd-workload-id\"}\n"
                           "  },\n"
                           "  \"CommonConfig\": {\"MetricsFieldPrefix\": \"amd_\"}\n"
                           "}\n";
        assert_int_equal(parse(text, &c, &d, &w), 0);
        assert_int_equal(c->server_port, 5001);
        assert_int_equal(strv_len(c->fields), 3);
        assert_string_equal(c->fields[0], "GPU_GFX_ACTIVITY");
        assert_string_equal(c->fields[1], "GPU_PACKAGE_POWER");
        assert_string_equal(c->fields[2], "PCIE_NACK_RECEIVED_COUNT"); /* AMD's older spelling */
        assert_int_equal(strv_len(c->labels), 2);
        assert_string_equal(c->labels[0], "gpu_uuid");
        assert_string_equal(c->labels[1], "vbios_version");
        assert_int_equal(strv_len(c->custom), 4);
        assert_string_equal(c->custom[0], "cluster_name");
        assert_string_equal(c->custom[1], "west");
        assert_string_equal(c->custom[2], "team");
        assert_int_equal(strv_len(c->pod_labels), 2);
        assert_string_equal(c->pod_labels[0], "workload_id");
        assert_string_equal(c->pod_labels[1], "amd-workload-id");
        assert_string_equal(c->prefix, "amd_");
        assert_null(warned(w, "ExtraPodLabels")); /* exported now: nothing to say */
        amd_exporter_config_free(c);
        strv_free(w);
}

static void test_defaults_and_amds_rules(void **state)
{
        struct amd_exporter_config *c = NULL;
        struct diag d = { 0 };
        char **w = NULL;
        /* empty: every field, no prefix */
        assert_int_equal(parse("", &c, &d, &w), 0);
        assert_null(c->fields);
        assert_string_equal(c->prefix, "");
        amd_exporter_config_free(c);
        assert_int_equal(parse("{\"GPUConfig\": {\"Fields\": []}}", &c, &d, &w), 0);
        assert_null(c->fields);
        amd_exporter_config_free(c);
        /* fields devlet has none of: none exported */
        assert_int_equal(parse("{\"GPUConfig\": {\"Fields\": [\"GPU_PROF_SM_ACTIVE\", \"NOPE\"]}}", &c,
                               &d, &w),
                         0);
        assert_non_null(c->fields);
        assert_null(c->fields[0]);
        assert_non_null(warned(w, "config.json:1:27: GPUConfig.Fields names fields devlet cannot "
                                  "produce"));
        assert_non_null(warned(w, "fields=GPU_PROF_SM_ACTIVE"));
        assert_non_null(warned(w, "config.json:1:49: GPUConfig.Fields: unknown field \"NOPE\""));
        amd_exporter_config_free(c);
        strv_free(TAKE_PTR(w));
        /* custom labels: at most 10, none of AMD's own, no name twice */
        const char *many = "{\"GPUConfig\": {\"CustomLabels\": {\"GPU_ID\": \"x\", \"pod\": \"y\", "
                           "\"clock_type\": \"z\", \"a\": \"1\", \"A\": \"2\", \"b\": \"2\", \"c\": \"3\", "
                           "\"d\": \"4\", \"e\": \"5\", \"f\": \"6\", \"g\": \"7\", \"h\": \"8\", "
                           "\"i\": \"9\", \"j\": \"10\", \"k\": \"11\"}}}";
        assert_int_equal(parse(many, &c, &d, &w), 0);
        assert_int_equal(strv_len(c->custom), 2 * AMD_EXPORTER_CUSTOM_LABELS_MAX);
        assert_string_equal(c->custom[0], "a");
        assert_string_equal(c->custom[1], "1");
        assert_string_equal(c->custom[18], "j");
        assert_non_null(warned(w, "the label GPU_ID is the exporter's own"));
        assert_non_null(warned(w, "the label pod is the exporter's own"));
        assert_non_null(warned(w, "the label clock_type is the exporter's own"));
        assert_non_null(warned(w, "the label a is given twice"));
        assert_non_null(warned(w, "more than 10 labels"));
        amd_exporter_config_free(c);
        strv_free(TAKE_PTR(w));
        /* a prefix that is no metric name prefix is dropped, as AMD's exporter does */
        assert_int_equal(parse("{\"CommonConfig\": {\"MetricsFieldPrefix\": \"9-x\"}}", &c, &d, &w), 0);
        assert_string_equal(c->prefix, "");
        assert_non_null(warned(w, "MetricsFieldPrefix"));
        amd_exporter_config_free(c);
        strv_free(TAKE_PTR(w));
        /* labels devlet cannot give, keys it does not read or know */
        assert_int_equal(parse("{\"GPUConfig\": {\"Labels\": [\"CARD_VENDOR\", \"BOGUS\"], "
                               "\"Selector\": \"0,2-3\"}, \"NICConfig\": {}, \"Other\": 1}",
                               &c, &d, &w),
                         0);
        assert_null(c->labels);
        assert_non_null(warned(w, "devlet cannot give the label CARD_VENDOR"));
        assert_non_null(warned(w, "unknown label \"BOGUS\""));
        assert_non_null(warned(w, "GPUConfig.Selector is not read"));
        assert_non_null(warned(w, "unknown key \"Other\""));
        assert_null(warned(w, "NICConfig"));
        amd_exporter_config_free(c);
        strv_free(w);
}

static void test_errors_at_their_place(void **state)
{
        static const struct {
                const char *text, *where, *what;
        } cases[] = {
                { "{\"GPUConfig\": [}", "config.json:1:", "" },
                { "{\n  \"GPUConfig\": {\n    \"Fields\": {\"GPU_GFX_ACTIVITY\": 1}\n  }\n}", "config.json:3:15",
                  "expected a list" },
                { "{\"GPUConfig\": {\"Labels\": [[\"GPU_UUID\"]]}}", "config.json:1:27", "expected a value" },
                { "{\"GPUConfig\": {\"CustomLabels\": [\"a\"]}}", "config.json:1:32", "expected a mapping" },
                { "{\"GPUConfig\": {\"CustomLabels\": {\"my-label\": \"x\"}}}", "config.json:1:33",
                  "not a Prometheus label name" },
                { "{\"GPUConfig\": {\"CustomLabels\": {\"a\": {\"b\": 1}}}}", "config.json:1:38",
                  "expected a value" },
                { "{\"ServerPort\": 70000}", "config.json:1:16", "from 0 to 65535" },
                { "[1, 2]", "config.json:1:1", "expected a mapping" },
                { "{\"a\": 1, \"a\": 2}", "config.json:1:", "" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct amd_exporter_config *c = NULL;
                struct diag d = { 0 };
                char buf[DIAG_FORMAT_MAX];
                assert_int_equal(parse(cases[i].text, &c, &d, NULL), -EINVAL);
                assert_null(c);
                const char *msg = diag_format(&d, buf, sizeof(buf));
                if (!strstr(msg, cases[i].where) || !strstr(msg, cases[i].what))
                        fail_msg("case %zu: %s", i, msg);
        }
}

/* Many entries of one kind are one warning: its count, the first one's
 * place and text; up to CONFIG_TALLY_EACH are each told as before.  The
 * parser's cost is linear in the file (bench-amd prints it). */
static void test_many_pod_labels_bounded(void **state)
{
        struct amd_exporter_config *c = NULL;
        struct diag d = { 0 };
        char **w = NULL;
        /* 80k extra pod labels: the first 64 kept, one warning for the rest */
        _cleanup_free_ char *pods = amd_config_gen_pod_labels(80000);
        assert_int_equal(parse(pods, &c, &d, &w), 0);
        assert_int_equal(strv_len(c->pod_labels), 2 * AMD_EXPORTER_POD_LABELS_MAX);
        assert_string_equal(c->pod_labels[0], "l00000");
        assert_string_equal(c->pod_labels[1], "v");
        assert_string_equal(c->pod_labels[126], "l00063");
        assert_int_equal(strv_len(w), 1);
        assert_non_null(warned(w, "GPUConfig.ExtraPodLabels: more than 64 labels, the rest ignored"));
        amd_exporter_config_free(c);
        strv_free(w);
}

static void test_many_unknown_keys_one_warning(void **state)
{
        struct amd_exporter_config *c = NULL;
        struct diag d = { 0 };
        char **w = NULL;
        _cleanup_free_ char *keys = amd_config_gen_unknown_keys(95000);
        assert_int_equal(parse(keys, &c, &d, &w), 0);
        assert_int_equal(strv_len(w), 1);
        assert_string_equal(w[0], "config.json:2:1: 95000 unknown keys in GPUConfig (ignored), the "
                                  "first \"k00000\"");
        amd_exporter_config_free(c);
        strv_free(w);
}

static void test_many_unknown_fields_one_warning(void **state)
{
        struct amd_exporter_config *c = NULL;
        struct diag d = { 0 };
        char **w = NULL;
        _cleanup_free_ char *fields = amd_config_gen_unknown_fields(95000);
        assert_int_equal(parse(fields, &c, &d, &w), 0);
        assert_non_null(c->fields);
        assert_null(c->fields[0]);
        assert_int_equal(strv_len(w), 1);
        assert_string_equal(w[0], "config.json:2:1: 95000 unknown fields in GPUConfig.Fields "
                                  "(ignored), the first \"F00000\"");
        amd_exporter_config_free(c);
        strv_free(w);
}

/* One line a kind: unknown and absent labels, foreign fields, AMD's own
 * labels, names given twice; up to 3 each at its place. */
static void test_one_warning_a_kind(void **state)
{
        struct amd_exporter_config *c = NULL;
        struct diag d = { 0 };
        char **w = NULL;
        _cleanup_free_ char *labels = amd_config_gen("{\"GPUConfig\": {\"Labels\": [",
                                                     "\"CARD_VENDOR\", \"X", "\"", "],\n", 5000);
        _cleanup_free_ char *foreign = amd_config_gen("\"Fields\": [", "\"GPU_PROF_", "\"", "],\n",
                                                      5000);
        _cleanup_free_ char *all = xasprintf(
                "%s%s\"ExtraPodLabels\": {\"ab\": \"k\", \"aB\": \"k\", \"Ab\": \"k\", \"AB\": \"k\",\n"
                "  \"x\": \"k\", \"X\": \"k\", \"pod\": \"k\", \"POD\": \"k\", \"Pod\": \"k\", "
                "\"gpu_id\": \"k\"}},\n"
                "\"top0\": 1, \"top1\": 1}\n",
                labels, foreign);
        assert_int_equal(parse(all, &c, &d, &w), 0);
        assert_int_equal(strv_len(c->pod_labels), 2 * 2);
        assert_string_equal(c->pod_labels[0], "ab");
        assert_string_equal(c->pod_labels[2], "x");
        assert_non_null(warned(w, "config.json:1:27: GPUConfig.Labels: devlet cannot give the "
                                  "label CARD_VENDOR"));
        assert_non_null(warned(w, "config.json:1:42: 5000 unknown labels in GPUConfig.Labels "
                                  "(ignored), the first \"X00000\""));
        assert_non_null(warned(w, "config.json:2:12: GPUConfig.Fields names 5000 fields devlet "
                                  "cannot produce"));
        assert_non_null(warned(w, "fields=GPU_PROF_00000,GPU_PROF_00001,"));
        assert_non_null(warned(w, "GPU_PROF_00009,..."));
        assert_null(warned(w, "GPU_PROF_00010"));
        assert_non_null(warned(w, "config.json:3:31: 4 labels in GPUConfig.ExtraPodLabels given "
                                  "twice (the first kept), the first \"aB\""));
        assert_non_null(warned(w, "config.json:4:23: 4 labels in GPUConfig.ExtraPodLabels that are "
                                  "the exporter's own and cannot be set (ignored), the first \"pod\""));
        assert_non_null(warned(w, "config.json:5:1: unknown key \"top0\" (ignored)"));
        assert_non_null(warned(w, "config.json:5:12: unknown key \"top1\" (ignored)"));
        assert_int_equal(strv_len(w), 7);
        amd_exporter_config_free(c);
        strv_free(w);
}

static void test_load(void **state)
{
        char dir[] = "/tmp/test-amd-exporter-config-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char *path = xasprintf("%s/config.json", dir);
        struct amd_exporter_config *c = NULL;
        struct diag d = { 0 };
        char *text = NULL;
        /* not there: AMD's defaults */
        assert_int_equal(amd_exporter_config_load(path, &text, &c, NULL, &d), 0);
        assert_null(text);
        assert_null(c->fields);
        amd_exporter_config_free(c);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("{\"CommonConfig\": {\"MetricsFieldPrefix\": \"x_\"}}", f);
        fclose(f);
        assert_int_equal(amd_exporter_config_load(path, &text, &c, NULL, &d), 0);
        assert_string_equal(c->prefix, "x_");
        assert_non_null(strstr(text, "x_"));
        amd_exporter_config_free(c);
        free(text);
        /* a directory is not a file */
        assert_true(amd_exporter_config_load(dir, &text, &c, NULL, &d) < 0);
        unlink(path);
        rmdir(dir);
        free(path);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_key),
                cmocka_unit_test(test_defaults_and_amds_rules),
                cmocka_unit_test(test_errors_at_their_place),
                cmocka_unit_test(test_many_pod_labels_bounded),
                cmocka_unit_test(test_many_unknown_keys_one_warning),
                cmocka_unit_test(test_many_unknown_fields_one_warning),
                cmocka_unit_test(test_one_warning_a_kind),
                cmocka_unit_test(test_load),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
