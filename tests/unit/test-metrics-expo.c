/* Unit tests for metrics/expo.c: the Prometheus text format writer —
 * escaping, families kept contiguous, duplicate series refused, values. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "metrics/expo.h"

DEFINE_CLEANUP_FUNC(struct expo, expo_free)
#define _cleanup_expo_ _cleanup_(expo_freep)

#define L(n, v) ((struct expo_label){ (n), (v) })

static char *render(struct expo *e)
{
        size_t len;
        char *s = expo_render(e, &len);
        assert_int_equal(strlen(s), len);
        return s;
}

static void test_escaping(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        struct expo_family *f = expo_family(e, "x_total", EXPO_COUNTER, "help with \\ and\nnewline \"q\"");
        assert_non_null(f);
        struct expo_label l[] = { L("a", "back\\slash \"quoted\"\nline"), L("b", "") };
        assert_int_equal(expo_add(f, l, 2, 3), 1);
        _cleanup_free_ char *s = render(e);
        assert_string_equal(s, "# HELP x_total help with \\\\ and\\nnewline \"q\"\n"
                               "# TYPE x_total counter\n"
                               "x_total{a=\"back\\\\slash \\\"quoted\\\"\\nline\",b=\"\"} 3\n");
}

static void test_families_contiguous(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        struct expo_family *a = expo_family(e, "a", EXPO_GAUGE, "A");
        struct expo_family *b = expo_family(e, "b", EXPO_GAUGE, "B");
        struct expo_label g0[] = { L("gpu", "0") }, g1[] = { L("gpu", "1") };
        expo_add(a, g0, 1, 1);
        expo_add(b, g0, 1, 2);
        /* a later declaration returns the same family, first help and type stay */
        assert_ptr_equal(expo_family(e, "a", EXPO_COUNTER, "other"), a);
        expo_add(a, g1, 1, 3);
        expo_add(b, g1, 1, 4);
        _cleanup_free_ char *s = render(e);
        assert_string_equal(s, "# HELP a A\n# TYPE a gauge\na{gpu=\"0\"} 1\na{gpu=\"1\"} 3\n"
                               "# HELP b B\n# TYPE b gauge\nb{gpu=\"0\"} 2\nb{gpu=\"1\"} 4\n");
        assert_int_equal(expo_family_samples(a), 2);
}

static void test_empty_family_not_rendered(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        expo_family(e, "unused", EXPO_GAUGE, "never sampled");
        struct expo_family *f = expo_family(e, "used", EXPO_GAUGE, "");
        expo_add(f, NULL, 0, 1);
        _cleanup_free_ char *s = render(e);
        assert_string_equal(s, "# HELP used \n# TYPE used gauge\nused 1\n");
}

static void test_duplicates_dropped(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        struct expo_family *f = expo_family(e, "m", EXPO_GAUGE, "h");
        struct expo_label ab[] = { L("a", "1"), L("b", "2") };
        struct expo_label ba[] = { L("b", "2"), L("a", "1") };
        struct expo_label ab3[] = { L("a", "1"), L("b", "3") };
        /* "a" "1\0b" must not collide with "a\0" "1" "b": keys keep the separators */
        struct expo_label odd[] = { L("a", "1b"), L("b", "2") };
        assert_int_equal(expo_add(f, ab, 2, 1), 1);
        assert_int_equal(expo_add(f, ba, 2, 9), 0); /* same set, other order */
        assert_int_equal(expo_add_u64(f, ab, 2, 9), 0);
        assert_int_equal(expo_add(f, ab3, 2, 2), 1);
        assert_int_equal(expo_add(f, odd, 2, 3), 1);
        assert_int_equal(expo_add(f, NULL, 0, 4), 1);
        assert_int_equal(expo_add(f, NULL, 0, 5), 0);
        assert_int_equal(expo_family_samples(f), 4);
        _cleanup_free_ char *s = render(e);
        assert_string_equal(s, "# HELP m h\n# TYPE m gauge\nm{a=\"1\",b=\"2\"} 1\nm{a=\"1\",b=\"3\"} 2\n"
                               "m{a=\"1b\",b=\"2\"} 3\nm 4\n");
        /* the same label set in another family is another series */
        struct expo_family *g = expo_family(e, "n", EXPO_GAUGE, "h");
        assert_int_equal(expo_add(g, ab, 2, 1), 1);
}

static void test_histogram(void **state)
{
        (void)state;
        struct expo *e = expo_new();
        struct expo_family *h = expo_family(e, "op_seconds", EXPO_HISTOGRAM, "Durations.");
        const double bounds[] = { 0.005, 0.1, 2.5 };
        const uint64_t counts[] = { 1, 3, 4 };
        struct expo_label l[] = { { "driver", "gpu.nvidia.com" } };
        assert_int_equal(expo_add_histogram(h, l, 1, bounds, counts, 3, 5, 7.25), 1);
        assert_int_equal(expo_add_histogram(h, l, 1, bounds, counts, 3, 5, 7.25), 0); /* the same series */
        struct expo_label bad[] = { { "le", "1" } };
        assert_int_equal(expo_add_histogram(h, bad, 1, bounds, counts, 3, 5, 1), -EINVAL);
        assert_int_equal(expo_add(h, l, 1, 1), -EINVAL);
        struct expo_family *g = expo_family(e, "plain", EXPO_GAUGE, "A gauge.");
        assert_int_equal(expo_add_histogram(g, l, 1, bounds, counts, 3, 5, 1), -EINVAL);
        assert_int_equal(expo_add_histogram(h, NULL, 0, bounds, counts, 1, 1, 0.5), 1);
        _cleanup_free_ char *text = expo_render(e, NULL);
        assert_string_equal(text,
                            "# HELP op_seconds Durations.\n"
                            "# TYPE op_seconds histogram\n"
                            "op_seconds_bucket{driver=\"gpu.nvidia.com\",le=\"0.005\"} 1\n"
                            "op_seconds_bucket{driver=\"gpu.nvidia.com\",le=\"0.1\"} 3\n"
                            "op_seconds_bucket{driver=\"gpu.nvidia.com\",le=\"2.5\"} 4\n"
                            "op_seconds_bucket{driver=\"gpu.nvidia.com\",le=\"+Inf\"} 5\n"
                            "op_seconds_sum{driver=\"gpu.nvidia.com\"} 7.25\n"
                            "op_seconds_count{driver=\"gpu.nvidia.com\"} 5\n"
                            "op_seconds_bucket{le=\"0.005\"} 1\n"
                            "op_seconds_bucket{le=\"+Inf\"} 1\n"
                            "op_seconds_sum 0.5\n"
                            "op_seconds_count 1\n");
        expo_free(e);
}

static void test_prepared_label_sets(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        struct expo_family *a = expo_family(e, "a", EXPO_GAUGE, "A");
        struct expo_family *b = expo_family(e, "b_total", EXPO_COUNTER, "B");
        struct expo_label l[] = { L("gpu", "0"), L("pod", "p\"1") };
        struct expo_labels ls;
        assert_int_equal(expo_labels_prepare(e, l, 2, &ls), 0);
        assert_string_equal(ls.text, "{gpu=\"0\",pod=\"p\\\"1\"}");
        assert_int_equal(expo_add_labels(a, &ls, 1), 1);
        assert_int_equal(expo_add_labels_u64(b, &ls, 2), 1);
        assert_int_equal(expo_add_labels(a, &ls, 3), 0); /* the same series again */
        expo_labels_release(&ls);
        /* a set prepared apart, with the same labels in another order, is the same series */
        struct expo_label r[] = { L("pod", "p\"1"), L("gpu", "0") };
        assert_int_equal(expo_add(a, r, 2, 4), 0);
        struct expo_labels none;
        assert_int_equal(expo_labels_prepare(e, NULL, 0, &none), 0);
        assert_string_equal(none.text, "");
        assert_int_equal(expo_add_labels(a, &none, 5), 1);
        expo_labels_release(&none);
        struct expo_label bad[] = { L("x", "1"), L("x", "2") };
        assert_int_equal(expo_labels_prepare(e, bad, 2, &ls), -EINVAL);
        _cleanup_free_ char *s = render(e);
        assert_string_equal(s, "# HELP a A\n# TYPE a gauge\na{gpu=\"0\",pod=\"p\\\"1\"} 1\na 5\n"
                               "# HELP b_total B\n# TYPE b_total counter\nb_total{gpu=\"0\",pod=\"p\\\"1\"} 2\n");
}

static void test_render_chunks(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        struct expo_family *a = expo_family(e, "a", EXPO_GAUGE, "A");
        expo_family(e, "empty", EXPO_GAUGE, "never sampled");
        struct expo_family *b = expo_family(e, "b", EXPO_GAUGE, "B");
        expo_add(b, NULL, 0, 2);
        expo_add(a, NULL, 0, 1);
        _cleanup_free_ char *whole = render(e);
        struct expo_chunk *chunks = NULL;
        size_t n = expo_render_chunks(e, &chunks);
        assert_int_equal(n, 2);
        assert_string_equal(chunks[0].data, "# HELP a A\n# TYPE a gauge\na 1\n");
        assert_int_equal(chunks[0].len, strlen(chunks[0].data));
        assert_string_equal(chunks[1].data, "# HELP b B\n# TYPE b gauge\nb 2\n");
        assert_int_equal(strlen(whole), chunks[0].len + chunks[1].len);
        for (size_t i = 0; i < n; i++)
                free(chunks[i].data);
        free(chunks);
        /* the families are empty now, and usable again */
        _cleanup_free_ char *after = render(e);
        assert_string_equal(after, "");
        assert_int_equal(expo_add(a, NULL, 0, 3), 1);
}

static void test_many_series(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        struct expo_family *f = expo_family(e, "m", EXPO_GAUGE, "h");
        char v[16];
        for (int i = 0; i < 5000; i++) {
                snprintf(v, sizeof(v), "%d", i);
                struct expo_label l[] = { L("i", v) };
                assert_int_equal(expo_add(f, l, 1, i), 1);
        }
        for (int i = 0; i < 5000; i += 7) {
                snprintf(v, sizeof(v), "%d", i);
                struct expo_label l[] = { L("i", v) };
                assert_int_equal(expo_add(f, l, 1, i), 0);
        }
        assert_int_equal(expo_family_samples(f), 5000);
}

static void test_invalid_names(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        assert_null(expo_family(e, "9abc", EXPO_GAUGE, ""));
        assert_null(expo_family(e, "a-b", EXPO_GAUGE, ""));
        assert_null(expo_family(e, "", EXPO_GAUGE, ""));
        struct expo_family *f = expo_family(e, "ns:sub_total", EXPO_COUNTER, "");
        assert_non_null(f);
        struct expo_label bad1[] = { L("a:b", "x") };
        struct expo_label bad2[] = { L("__name__", "x") };
        struct expo_label bad3[] = { L("a", "x"), L("a", "y") };
        struct expo_label bad4[] = { L("1a", "x") };
        assert_int_equal(expo_add(f, bad1, 1, 1), -EINVAL);
        assert_int_equal(expo_add(f, bad2, 1, 1), -EINVAL);
        assert_int_equal(expo_add(f, bad3, 2, 1), -EINVAL);
        assert_int_equal(expo_add(f, bad4, 1, 1), -EINVAL);
        assert_int_equal(expo_family_samples(f), 0);
        _cleanup_free_ char *s = render(e);
        assert_string_equal(s, "");
}

static void test_values(void **state)
{
        _cleanup_expo_ struct expo *e = expo_new();
        struct expo_family *f = expo_family(e, "v", EXPO_GAUGE, "h");
        const char *names[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" };
        double values[] = { 0, -3, 0.5, 1e300, NAN, INFINITY, -INFINITY, 9007199254740992.0, 0.004582, 0.1 + 0.2 };
        for (size_t i = 0; i < 10; i++) {
                struct expo_label l[] = { L("k", names[i]) };
                expo_add(f, l, 1, values[i]);
        }
        struct expo_label big[] = { L("k", "u64") };
        expo_add_u64(f, big, 1, UINT64_MAX);
        _cleanup_free_ char *s = render(e);
        assert_string_equal(s, "# HELP v h\n# TYPE v gauge\n"
                               "v{k=\"a\"} 0\nv{k=\"b\"} -3\nv{k=\"c\"} 0.5\nv{k=\"d\"} 1e+300\n"
                               "v{k=\"e\"} NaN\nv{k=\"f\"} +Inf\nv{k=\"g\"} -Inf\n"
                               "v{k=\"h\"} 9007199254740992\nv{k=\"i\"} 0.004582\nv{k=\"j\"} 0.30000000000000004\n"
                               "v{k=\"u64\"} 18446744073709551615\n");
}

static void test_buf(void **state)
{
        struct expo_buf b = { 0 };
        size_t len = 99;
        _cleanup_free_ char *empty = expo_buf_take(&b, &len);
        assert_string_equal(empty, "");
        assert_int_equal(len, 0);
        char big[1000];
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        expo_buf_printf(&b, "%s-%d", big, 7);
        assert_int_equal(b.len, 1001);
        assert_string_equal(b.data + 999, "-7");
        expo_buf_release(&b);
        assert_null(b.data);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_escaping),
                cmocka_unit_test(test_families_contiguous),
                cmocka_unit_test(test_empty_family_not_rendered),
                cmocka_unit_test(test_duplicates_dropped),
                cmocka_unit_test(test_prepared_label_sets),
                cmocka_unit_test(test_histogram),
                cmocka_unit_test(test_render_chunks),
                cmocka_unit_test(test_many_series),
                cmocka_unit_test(test_invalid_names),
                cmocka_unit_test(test_values),
                cmocka_unit_test(test_buf),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
