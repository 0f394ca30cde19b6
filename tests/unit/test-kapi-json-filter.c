/* Unit tests for the streaming JSON filter (kapi/json-filter.c): every
 * input fed whole, cut in two at every byte and fed byte by byte, with the
 * same outcome; what specs keep (nested members, items, type mismatches,
 * duplicate keys, escaped keys, keys no spec name can be); compaction
 * keeping strings, escapes, unicode and numbers byte for byte; every
 * malformed input refused at the right byte; the depth limit, kept or
 * skipped; the budgets of values and bytes (skipped values are free); the
 * spec grammar; kapi_json_load with jansson behind it; reset. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/xalloc.h"
#include "kapi/json-filter.h"
#include "test-util.h"

#define POD_LIST "{metadata{resourceVersion,continue},items[{metadata{name,namespace,labels}}]}"

struct outcome {
        int r;
        char *out; /* what was kept ("" for none), or why it failed */
};

static void outcome_release(struct outcome *o) { free(o->out); }

/* Feeds in pieces: cut == 0 whole, cut == SIZE_MAX byte by byte, else
 * two pieces cut at that byte. */
static struct outcome run(const char *spec_text, const struct kapi_json_budget *b,
                          const char *in, size_t len, size_t cut)
{
        struct kapi_json_spec *spec = NULL;
        if (spec_text)
                assert_int_equal(kapi_json_spec_new(spec_text, &spec), 0);
        struct kapi_json_filter *f = kapi_json_filter_new(spec, b);
        int r = 0;
        if (cut == SIZE_MAX) {
                for (size_t i = 0; i < len && r == 0; i++)
                        r = kapi_json_filter_feed(f, in + i, 1);
        } else if (cut == 0) {
                r = kapi_json_filter_feed(f, in, len);
        } else {
                r = kapi_json_filter_feed(f, in, cut);
                if (r == 0)
                        r = kapi_json_filter_feed(f, in + cut, len - cut);
        }
        const char *kept = NULL;
        size_t kept_len = 0;
        if (r == 0)
                r = kapi_json_filter_finish(f, &kept, &kept_len);
        struct outcome o = { .r = r };
        o.out = r == 0 ? xstrndup(kept ? kept : "", kept_len) : xstrdup(kapi_json_filter_why(f));
        kapi_json_filter_free(f);
        kapi_json_spec_free(spec);
        return o;
}

/* The outcome fed whole; fails unless every way of cutting it gives the same. */
static struct outcome run_all(const char *spec, const struct kapi_json_budget *b, const char *in,
                              size_t len)
{
        struct outcome whole = run(spec, b, in, len, 0);
        for (size_t cut = 1; cut <= len; cut++) {
                struct outcome o = run(spec, b, in, len, cut == len ? SIZE_MAX : cut);
                if (o.r != whole.r || strcmp(o.out, whole.out) != 0) {
                        print_error("input %s cut at %zu: %d \"%s\", whole: %d \"%s\"\n", in, cut,
                                    o.r, o.out, whole.r, whole.out);
                        fail();
                }
                outcome_release(&o);
        }
        return whole;
}

static void expect(const char *spec, const struct kapi_json_budget *b, const char *in, int r,
                   const char *want)
{
        struct outcome o = run_all(spec, b, in, strlen(in));
        if (o.r != r || (r == 0 ? strcmp(o.out, want) != 0 : !strstr(o.out, want))) {
                print_error("input %s: %d \"%s\", want %d \"%s\"\n", in, o.r, o.out, r, want);
                fail();
        }
        outcome_release(&o);
}

static void test_keep_all_compacts(void **state)
{
        (void)state;
        expect(NULL, NULL,
               " { \"a\" : [ 1 , -0.5e+10 , 0 , 2E-3, true , false , null , { } , [ ] ] ,\n"
               "\t\"s\" : \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00 \xc3\xa9\" } \r\n",
               0,
               "{\"a\":[1,-0.5e+10,0,2E-3,true,false,null,{},[]],"
               "\"s\":\"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00 \xc3\xa9\"}");
        expect(NULL, NULL, "  42 ", 0, "42");
        expect(NULL, NULL, "-7", 0, "-7");
        expect(NULL, NULL, "\"\"", 0, "\"\"");
        expect(NULL, NULL, "null", 0, "null");
        expect(NULL, NULL, " \n\t ", 0, "");
        expect(NULL, NULL, "", 0, "");
        expect("*", NULL, "[1,{\"a\":[]}]", 0, "[1,{\"a\":[]}]");
}

static void test_spec_keeps_what_it_names(void **state)
{
        (void)state;
        expect(POD_LIST, NULL,
               "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"12\",\"x\":[1,{}]},"
               "\"items\":[{\"metadata\":{\"name\":\"a\",\"uid\":\"u\",\"labels\":{\"k\":\"v\","
               "\"n\":[1,true]}},\"spec\":{\"containers\":[{\"args\":[\"\",\"\",\"\\\"]\"]}]}},"
               "{\"spec\":{},\"metadata\":{\"namespace\":\"ns\"}}]}",
               0,
               "{\"metadata\":{\"resourceVersion\":\"12\"},\"items\":[{\"metadata\":{\"name\":"
               "\"a\",\"labels\":{\"k\":\"v\",\"n\":[1,true]}}},{\"metadata\":{\"namespace\":"
               "\"ns\"}}]}");
        /* a type that is not the spec's: kept empty, a scalar whole */
        expect("{items[{x}]}", NULL, "{\"items\":{\"x\":1}}", 0, "{\"items\":{}}");
        expect("{items[{x}]}", NULL, "{\"items\":[[1],2,\"s\",{\"x\":[1],\"y\":2}]}", 0,
               "{\"items\":[[],2,\"s\",{\"x\":[1]}]}");
        expect("{a{b}}", NULL, "[1,2]", 0, "[]");
        expect("{a{b}}", NULL, "\"s\"", 0, "\"s\"");
        /* duplicates in order (jansson keeps the last) */
        expect("{a}", NULL, "{\"a\":1,\"b\":0,\"a\":2}", 0, "{\"a\":1,\"a\":2}");
        /* a key is looked up decoded */
        expect("{metadata{name}}", NULL, "{\"\\u006detadat\\u0061\":{\"na\\/me\":1,\"name\":2}}",
               0, "{\"metadata\":{\"name\":2}}");
        /* keys no name can be: NUL, outside ASCII, longer than any name */
        expect("{a,b}", NULL,
               "{\"a\\u0000\":1,\"\\u00e9\":2,\"\xc3\xa9\":3,"
               "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":4,"
               "\"b\":5}",
               0, "{\"b\":5}");
        /* under a kept value, every key whatever it is */
        expect("{a}", NULL, "{\"a\":{\"\\u00e9\\n\":1,\"x\\\"y\":[]}}", 0,
               "{\"a\":{\"\\u00e9\\n\":1,\"x\\\"y\":[]}}");
        /* nothing named: the root only */
        expect("{a}", NULL, "{\"b\":{\"c\":[1,2,{\"d\":null}]},\"e\":\"\"}", 0, "{}");
        expect("[{a}]", NULL, "[{\"a\":1,\"b\":2},{\"b\":3}]", 0, "[{\"a\":1},{}]");
}

static void test_cap(void **state)
{
        (void)state;
        /* the first N members or items, each whole; nothing capped below */
        expect("{labels*2}", NULL, "{\"labels\":{\"a\":\"1\",\"b\":{\"x\":[1,2,3]},\"c\":\"3\","
                                   "\"d\":{}},\"z\":1}",
               0, "{\"labels\":{\"a\":\"1\",\"b\":{\"x\":[1,2,3]}}}");
        expect("*2", NULL, "[[1,2,3],{\"a\":1,\"b\":2,\"c\":3},3,4]", 0,
               "[[1,2,3],{\"a\":1,\"b\":2,\"c\":3}]");
        expect("[*1]", NULL, "[[1,2],{\"a\":1,\"b\":2},\"s\",[]]", 0, "[[1],{\"a\":1},\"s\",[]]");
        expect("{a*0}", NULL, "{\"a\":[1,2]}", 0, "{\"a\":[1,2]}");
        /* what is past the cap is free */
        struct kapi_json_budget b = { .max_values = 7 }; /* {, l, {, a, 1, b, 2 */
        expect("{l*2}", &b, "{\"l\":{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6}}", 0,
               "{\"l\":{\"a\":1,\"b\":2}}");
        struct kapi_json_spec *s = NULL;
        assert_int_equal(kapi_json_spec_new("{a*99999999999999999999999}", &s), -EINVAL);
        assert_int_equal(kapi_json_spec_new("{a*32769}", &s), -EINVAL);
        assert_int_equal(kapi_json_spec_new("{a*32768}", &s), 0);
        kapi_json_spec_free(s);
}

static void test_malformed(void **state)
{
        (void)state;
        static const struct {
                const char *in, *why;
        } cases[] = {
                { "[1,]", "byte 4: ']' where a value is due" },
                { "{\"a\" 1}", "byte 6: '1' where ':' is due" },
                { "{\"a\":1,}", "byte 8: '}' where a key is due" },
                { "{1:2}", "byte 2: '1' where a key is due" },
                { "[01]", "byte 3: '1' where ',' or ']' is due" },
                { "[1.]", "byte 4: ']' where a digit is due" },
                { "[1e]", "byte 4: ']' where a digit is due" },
                { "[1e+]", "byte 5: ']' where a digit is due" },
                { "[-]", "byte 3: ']' where a digit is due" },
                { "[-a]", "byte 3: 'a' where a digit is due" },
                { "[.5]", "byte 2: '.' where a value is due" },
                { "[+1]", "byte 2: '+' where a value is due" },
                { "\"\\x\"", "byte 3: 'x' where an escape is due" },
                { "\"\\u12g4\"", "byte 6: 'g' where a hex digit is due" },
                { "\"a\x01z\"", "byte 3: byte 0x01 where a string's next byte" },
                { "\"a\nz\"", "byte 3: byte 0x0a" },
                { "tru", "the document ends early" },
                { "trUe", "byte 3: 'U' where true is due" },
                { "nul l", "byte 4: byte 0x20 where null is due" },
                { "[", "byte 1: the document ends early" },
                { "\"abc", "the document ends early" },
                { "{\"a\":1}}", "byte 8: '}' where the end of the document is due" },
                { "}", "byte 1: '}' where a value is due" },
                { "[1 2]", "byte 4: '2' where ',' or ']' is due" },
                { "[] []", "byte 4: '[' where the end of the document is due" },
                { "[}", "byte 2: '}' where a value is due" },
                { "{]", "byte 2: ']' where a key is due" },
                { "[1}", "byte 3: '}' where ',' or ']' is due" },
                { "-", "the document ends early" },
                { "1.", "the document ends early" },
                { "\xef\xbb\xbf[]", "byte 1: byte 0xef where a value is due" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                expect(NULL, NULL, cases[i].in, -EBADMSG, cases[i].why);
                /* skipped or kept, the grammar is checked the same */
                expect("{zzz}", NULL, cases[i].in, -EBADMSG, cases[i].why);
        }
        /* NUL inside the input */
        struct outcome o = run_all(NULL, NULL, "[1,\0]", 5);
        assert_int_equal(o.r, -EBADMSG);
        assert_contains(o.out, "byte 4: byte 0x00");
        outcome_release(&o);
}

static char *nested(unsigned depth, const char *inner)
{
        size_t n = strlen(inner);
        char *s = xmalloc(2 * depth + n + 1);
        memset(s, '[', depth);
        memcpy(s + depth, inner, n);
        memset(s + depth + n, ']', depth);
        s[2 * depth + n] = '\0';
        return s;
}

static void test_depth(void **state)
{
        (void)state;
        struct kapi_json_budget b = { .max_depth = 128 };
        char *ok = nested(128, "1"), *deep = nested(129, "");
        struct outcome o = run(NULL, &b, ok, strlen(ok), 0);
        assert_int_equal(o.r, 0);
        assert_string_equal(o.out, ok);
        outcome_release(&o);
        o = run(NULL, &b, deep, strlen(deep), 0);
        assert_int_equal(o.r, -EMSGSIZE);
        assert_string_equal(o.out, "JSON document nested deeper than 128");
        outcome_release(&o);
        /* skipped brackets count too: the stack is what it bounds */
        char *skipped = xasprintf("{\"x\":%s}", deep);
        o = run("{a}", &b, skipped, strlen(skipped), SIZE_MAX);
        assert_int_equal(o.r, -EMSGSIZE);
        outcome_release(&o);
        /* the default, and the cap on what a budget may ask */
        char *huge = nested(KAPI_JSON_DEPTH_MAX + 1, "");
        o = run(NULL, NULL, huge, strlen(huge), 0);
        assert_int_equal(o.r, -EMSGSIZE);
        assert_contains(o.out, "deeper than 128");
        outcome_release(&o);
        b.max_depth = 100000;
        o = run(NULL, &b, huge, strlen(huge), 0);
        assert_int_equal(o.r, -EMSGSIZE);
        assert_contains(o.out, "deeper than 1024");
        outcome_release(&o);
        free(huge);
        free(skipped);
        free(ok);
        free(deep);
}

static void test_budgets(void **state)
{
        (void)state;
        struct kapi_json_budget b = { .max_values = 4 };
        expect(NULL, &b, "[[],[],[]]", 0, "[[],[],[]]");
        expect(NULL, &b, "[[],[],[],[]]", -EMSGSIZE, "JSON document over 4 values");
        /* keys count */
        expect(NULL, &b, "{\"a\":1,\"b\":2}", -EMSGSIZE, "over 4 values");
        /* skipped values are free */
        b.max_values = 3;
        expect("{a}", &b, "{\"a\":1,\"b\":[1,2,3,4,5,[],{},\"\"],\"c\":{\"d\":[]}}", 0,
               "{\"a\":1}");
        b = (struct kapi_json_budget){ .max_bytes = 10 };
        expect(NULL, &b, "\"01234567\"", 0, "\"01234567\"");
        expect(NULL, &b, "\"012345678\"", -EMSGSIZE, "JSON document over 10 bytes kept");
        expect("{a}", &b, "{\"b\":\"0123456789abcdef\",\"a\":1}", 0, "{\"a\":1}");

        /* 16 MiB of [],: refused early, whatever the cut */
        size_t n = (16u << 20) / 3;
        char *big = xmalloc(3 * n + 2);
        big[0] = '[';
        for (size_t i = 0; i < n; i++)
                memcpy(big + 1 + 3 * i, "[],", 3);
        big[3 * n] = ']';
        big[3 * n + 1] = '\0';
        struct outcome o = run(NULL, NULL, big, 3 * n + 1, 4096);
        assert_int_equal(o.r, -EMSGSIZE);
        assert_string_equal(o.out, "JSON document over 32768 values");
        outcome_release(&o);
        /* and nothing of it kept under a spec that names none of it */
        o = run("{items}", NULL, big, 3 * n + 1, 0);
        assert_int_equal(o.r, 0);
        assert_string_equal(o.out, "[]");
        outcome_release(&o);
        free(big);
}

static void test_spec_grammar(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "", "{", "{a", "{a,}", "{}", "[a]", "{a}}", "{a{}}", "[", "[]", "a", "{,a}",
                "{a b}", "**", "{a}x", "{a\"}", "{a\\}", "{\x01}", "{\xc3\xa9}",
                "{aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct kapi_json_spec *s = NULL;
                if (kapi_json_spec_new(bad[i], &s) != -EINVAL) {
                        print_error("spec \"%s\" was taken\n", bad[i]);
                        fail();
                }
        }
        static const char *const good[] = {
                "*", "[*]", "{a}", " { a , b [ { c } ] , d * } ", "[[{x{y[{z}]}}]]", POD_LIST,
        };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
                struct kapi_json_spec *s = NULL;
                assert_int_equal(kapi_json_spec_new(good[i], &s), 0);
                kapi_json_spec_free(s);
        }
        expect(" { a , b [ { c } ] } ", NULL, "{\"b\":[{\"c\":1,\"a\":2}],\"a\":3}", 0,
               "{\"b\":[{\"c\":1}],\"a\":3}");
}

static void test_load(void **state)
{
        (void)state;
        struct kapi_json_spec *spec = NULL;
        assert_int_equal(kapi_json_spec_new(POD_LIST, &spec), 0);
        const char *in = "{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[{\"metadata\":"
                         "{\"name\":\"p\",\"labels\":{\"a\":\"b\"}},\"spec\":\"\xff\"}]}";
        json_t *j = NULL;
        struct diag d = { 0 };
        /* bytes that are not UTF-8 in what is skipped do not matter */
        assert_int_equal(kapi_json_load(in, strlen(in), spec, NULL, 0, &j, &d), 0);
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "metadata"),
                                                              "resourceVersion")),
                            "7");
        json_t *pod = json_array_get(json_object_get(j, "items"), 0);
        assert_null(json_object_get(pod, "spec"));
        assert_string_equal(json_string_value(json_object_get(
                                    json_object_get(json_object_get(pod, "metadata"), "labels"),
                                    "a")),
                            "b");
        json_decref(j);
        /* in what is kept, jansson refuses them */
        j = NULL;
        assert_int_equal(kapi_json_load(in, strlen(in), NULL, NULL, 0, &j, &d), -EBADMSG);
        assert_null(j);
        assert_contains(d.message, "unable to decode byte 0xff");
        /* a lone surrogate as well */
        assert_int_equal(kapi_json_load("\"\\ud800\"", 8, NULL, NULL, 0, &j, &d), -EBADMSG);
        /* the budget's error comes as it is */
        struct kapi_json_budget b = { .max_values = 1 };
        assert_int_equal(kapi_json_load("[1]", 3, NULL, &b, 0, &j, &d), -EMSGSIZE);
        assert_string_equal(d.message, "JSON document over 1 values");
        /* only whitespace: no value, no error */
        j = (json_t *)1;
        assert_int_equal(kapi_json_load("  ", 2, NULL, NULL, 0, &j, &d), 0);
        assert_null(j);
        /* jansson's flags apply to what is kept */
        assert_int_equal(kapi_json_load("{\"a\":1,\"a\":2}", 13, NULL, NULL,
                                        JSON_REJECT_DUPLICATES, &j, &d),
                         -EBADMSG);
        kapi_json_spec_free(spec);
}

static void test_reset(void **state)
{
        (void)state;
        struct kapi_json_spec *spec = NULL;
        assert_int_equal(kapi_json_spec_new("{type,object{metadata{name}}}", &spec), 0);
        struct kapi_json_filter *f = kapi_json_filter_new(spec, NULL);
        const char *kept;
        size_t len;
        assert_int_equal(kapi_json_filter_feed(f, "{\"type\":\"ADDED\",\"object\":{\"x\":1}}", 33), 0);
        assert_int_equal(kapi_json_filter_finish(f, &kept, &len), 0);
        assert_memory_equal(kept, "{\"type\":\"ADDED\",\"object\":{}}", len);
        assert_int_equal(kapi_json_filter_feed(f, "[", 1), -EBADMSG);
        assert_int_equal(kapi_json_filter_feed(f, "]", 1), -EBADMSG); /* it stays failed */
        assert_int_equal(kapi_json_filter_finish(f, &kept, &len), -EBADMSG);
        kapi_json_filter_reset(f);
        assert_string_equal(kapi_json_filter_why(f), "");
        const char *ev = "{\"object\":{\"metadata\":{\"name\":\"n\",\"uid\":\"u\"}},\"type\":\"MODIFIED\"}";
        assert_int_equal(kapi_json_filter_feed(f, ev, strlen(ev)), 0);
        assert_int_equal(kapi_json_filter_finish(f, &kept, &len), 0);
        const char *want = "{\"object\":{\"metadata\":{\"name\":\"n\"}},\"type\":\"MODIFIED\"}";
        assert_int_equal(len, strlen(want));
        assert_memory_equal(kept, want, len);
        kapi_json_filter_free(f);
        kapi_json_spec_free(spec);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_keep_all_compacts),
                cmocka_unit_test(test_spec_keeps_what_it_names),
                cmocka_unit_test(test_cap),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_depth),
                cmocka_unit_test(test_budgets),
                cmocka_unit_test(test_spec_grammar),
                cmocka_unit_test(test_load),
                cmocka_unit_test(test_reset),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
