/* Unit tests for metrics/podlabels.c's pure parts: label names sanitised
 * as dcgm-exporter does, a pod object's labels validated and bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/cleanup.h"
#include "metrics/podlabels.h"

static void test_sanitize(void **state)
{
        char out[64];
        podlabels_sanitize("app.kubernetes.io/name", out, sizeof(out));
        assert_string_equal(out, "app_kubernetes_io_name");
        podlabels_sanitize("tier", out, sizeof(out));
        assert_string_equal(out, "tier");
        podlabels_sanitize("a-b_C9", out, sizeof(out));
        assert_string_equal(out, "a_b_C9");
        /* a leading digit gets a '_' in front, as Prometheus wants */
        podlabels_sanitize("9lives", out, sizeof(out));
        assert_string_equal(out, "_9lives");
        /* every byte outside [a-zA-Z0-9_], UTF-8 included, is one '_' */
        podlabels_sanitize("\xc3\xa9t\xc3\xa9", out, sizeof(out));
        assert_string_equal(out, "__t__");
        podlabels_sanitize("", out, sizeof(out));
        assert_string_equal(out, "");
}

static void test_sanitize_truncates(void **state)
{
        char out[5];
        podlabels_sanitize("abcdefgh", out, sizeof(out));
        assert_string_equal(out, "abcd");
        podlabels_sanitize("1234567", out, sizeof(out));
        assert_string_equal(out, "_123");
        char one[1] = { 'x' };
        podlabels_sanitize("abc", one, sizeof(one));
        assert_int_equal(one[0], '\0');
        char untouched = 'x';
        podlabels_sanitize("abc", &untouched, 0);
        assert_int_equal(untouched, 'x');
}

static json_t *pod_with(json_t *labels)
{
        json_t *pod = json_pack("{s:{s:s, s:s}}", "metadata", "namespace", "team", "name", "p");
        if (labels)
                json_object_set_new(json_object_get(pod, "metadata"), "labels", labels);
        return pod;
}

static void test_from_pod(void **state)
{
        json_t *pod = pod_with(json_pack("{s:s, s:s, s:i, s:n, s:s, s:s}", "tier", "gold",
                                         "app.kubernetes.io/name", "llm", "number", 3, "null",
                                         "ctl", "a\nb", "empty", ""));
        json_t *l = podlabels_from_pod(pod);
        assert_non_null(l);
        assert_string_equal(json_string_value(json_object_get(l, "tier")), "gold");
        assert_string_equal(json_string_value(json_object_get(l, "app.kubernetes.io/name")), "llm");
        assert_string_equal(json_string_value(json_object_get(l, "empty")), "");
        /* not strings, control characters: dropped */
        assert_null(json_object_get(l, "number"));
        assert_null(json_object_get(l, "null"));
        assert_null(json_object_get(l, "ctl"));
        assert_int_equal(json_object_size(l), 3);
        json_decref(l);
        json_decref(pod);
}

static void test_from_pod_without_labels(void **state)
{
        /* no labels: an empty object; labels that are not an object: NULL */
        json_t *pod = pod_with(NULL);
        json_t *l = podlabels_from_pod(pod);
        assert_non_null(l);
        assert_int_equal(json_object_size(l), 0);
        json_decref(l);
        json_decref(pod);
        pod = pod_with(json_string("tier=gold"));
        assert_null(podlabels_from_pod(pod));
        json_decref(pod);
        l = podlabels_from_pod(NULL);
        assert_non_null(l);
        assert_int_equal(json_object_size(l), 0);
        json_decref(l);
}

static void test_from_pod_bounds(void **state)
{
        json_t *labels = json_object();
        for (int i = 0; i < PODLABELS_MAX_LABELS + 10; i++) {
                char k[32];
                snprintf(k, sizeof(k), "k%03d", i);
                json_object_set_new(labels, k, json_string("v"));
        }
        _cleanup_free_ char *long_key = malloc(PODLABELS_MAX_KEY + 2);
        memset(long_key, 'k', PODLABELS_MAX_KEY + 1);
        long_key[PODLABELS_MAX_KEY + 1] = '\0';
        _cleanup_free_ char *long_value = malloc(PODLABELS_MAX_VALUE + 2);
        memset(long_value, 'v', PODLABELS_MAX_VALUE + 1);
        long_value[PODLABELS_MAX_VALUE + 1] = '\0';
        json_t *pod = pod_with(labels);
        json_t *l = podlabels_from_pod(pod);
        assert_int_equal(json_object_size(l), PODLABELS_MAX_LABELS);
        json_decref(l);
        json_decref(pod);
        pod = pod_with(json_pack("{s:s, s:s, s:s}", long_key, "v", "long", long_value, "ok", "v"));
        l = podlabels_from_pod(pod);
        assert_int_equal(json_object_size(l), 1);
        assert_non_null(json_object_get(l, "ok"));
        json_decref(l);
        json_decref(pod);
        /* a value with a NUL inside is refused */
        pod = pod_with(json_pack("{s:s%}", "nul", "a\0b", (size_t)3));
        l = podlabels_from_pod(pod);
        assert_int_equal(json_object_size(l), 0);
        json_decref(l);
        json_decref(pod);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sanitize),
                cmocka_unit_test(test_sanitize_truncates),
                cmocka_unit_test(test_from_pod),
                cmocka_unit_test(test_from_pod_without_labels),
                cmocka_unit_test(test_from_pod_bounds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
