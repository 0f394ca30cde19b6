/* Unit tests for src/base/log.c's three formats: each line is captured by
 * pointing stderr at a temporary file.  text keeps today's layout; every
 * json line parses (jansson) with ts, level, component, msg and one field
 * per key=value, escaping control characters, quotes and invalid UTF-8;
 * klog lines have klog's header.  Long messages stay one bounded line. */
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/log.h"

static char captured[65536];

/* Runs log_emit(level, component, "%s", msg) with stderr captured; the line
 * lands in captured. */
static void capture(enum log_level level, const char *component, const char *msg)
{
        FILE *tmp = tmpfile();
        assert_non_null(tmp);
        int saved = dup(STDERR_FILENO);
        assert_true(saved >= 0);
        assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
        log_emit(level, component, "%s", msg);
        dup2(saved, STDERR_FILENO);
        close(saved);
        rewind(tmp);
        size_t n = fread(captured, 1, sizeof(captured) - 1, tmp);
        captured[n] = 0;
        fclose(tmp);
}

static void assert_matches(const char *s, const char *pattern)
{
        regex_t re;
        assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
        int r = regexec(&re, s, 0, NULL, 0);
        regfree(&re);
        if (r != 0) {
                print_error("\"%s\" does not match /%s/\n", s, pattern);
                fail();
        }
}

/* The captured line as a JSON object (exactly one line). */
static json_t *json_line(void)
{
        size_t n = strlen(captured);
        assert_true(n > 0 && captured[n - 1] == '\n');
        assert_null(memchr(captured, '\n', n - 1));
        json_error_t err;
        json_t *o = json_loads(captured, JSON_REJECT_DUPLICATES, &err);
        if (!o) {
                print_error("not JSON (%s): %s\n", err.text, captured);
                fail();
        }
        assert_true(json_is_object(o));
        return o;
}

static const char *field(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        if (!v || !json_is_string(v)) {
                print_error("no string field %s in %s\n", key, captured);
                fail();
        }
        return json_string_value(v);
}

static void test_format_names(void **state)
{
        enum log_format f = LOG_FORMAT_TEXT;
        assert_int_equal(log_format_from_name("json", &f), 0);
        assert_int_equal(f, LOG_FORMAT_JSON);
        assert_int_equal(log_format_from_name("klog", &f), 0);
        assert_int_equal(f, LOG_FORMAT_KLOG);
        assert_int_equal(log_format_from_name("JSON", &f), -EINVAL);
        assert_int_equal(log_format_from_name(NULL, &f), -EINVAL);
        assert_int_equal(f, LOG_FORMAT_KLOG);
}

static void test_text_unchanged(void **state)
{
        log_set_format(LOG_FORMAT_TEXT);
        capture(LOG_INFO, "kubelet", "registered resource=devlet.io/fuse");
        assert_matches(captured, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                                 "info  kubelet: registered resource=devlet\\.io/fuse\n$");
        capture(LOG_WARN, "config", "x");
        assert_matches(captured, "Z warn  config: x\n$");
}

static void test_json_fields(void **state)
{
        log_set_format(LOG_FORMAT_JSON);
        capture(LOG_INFO, "kubelet", "registered resource=devlet.io/fuse");
        json_t *o = json_line();
        assert_matches(field(o, "ts"), "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z$");
        assert_string_equal(field(o, "level"), "info");
        assert_string_equal(field(o, "component"), "kubelet");
        assert_string_equal(field(o, "msg"), "registered");
        assert_string_equal(field(o, "resource"), "devlet.io/fuse");
        assert_int_equal(json_object_size(o), 5);
        json_decref(o);

        /* quoted values with escapes, several words of event */
        capture(LOG_ERROR, "daemon", "cannot serve socket=/a/b error=\"no such \\\"file\\\"\" n=3");
        o = json_line();
        assert_string_equal(field(o, "level"), "error");
        assert_string_equal(field(o, "msg"), "cannot serve");
        assert_string_equal(field(o, "socket"), "/a/b");
        assert_string_equal(field(o, "error"), "no such \"file\"");
        assert_string_equal(field(o, "n"), "3");
        json_decref(o);

        /* devlet does not escape the quotes inside a value */
        capture(LOG_ERROR, "config", "reload failed error=\"f:1: invalid value \"xml\" (allowed)\" n=\"a\"b\"");
        o = json_line();
        assert_string_equal(field(o, "msg"), "reload failed");
        assert_string_equal(field(o, "error"), "f:1: invalid value \"xml\" (allowed)");
        assert_string_equal(field(o, "n"), "a\"b");
        json_decref(o);

        /* a field named like ours keeps both */
        log_set_verbosity(1);
        capture(LOG_DEBUG, "c", "event msg=hi level=9");
        log_set_verbosity(0);
        o = json_line();
        assert_string_equal(field(o, "msg"), "event");
        assert_string_equal(field(o, "_msg"), "hi");
        assert_string_equal(field(o, "_level"), "9");
        json_decref(o);
        log_set_format(LOG_FORMAT_TEXT);
}

static void test_json_unparsable_is_msg(void **state)
{
        log_set_format(LOG_FORMAT_JSON);
        const char *const msgs[] = {
                "nothing to serve: no backend found devices",
                "a=b then words",
                "broken error=\"unterminated",
                "quote error=\"a\"b",
                "bad key=\"v\"x",
                "",
        };
        for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
                capture(LOG_INFO, "c", msgs[i]);
                json_t *o = json_line();
                assert_string_equal(field(o, "msg"), msgs[i]);
                assert_int_equal(json_object_size(o), 4);
                json_decref(o);
        }
        /* the words before the pairs stay msg, even with an '=' in them */
        capture(LOG_INFO, "c", "x=1 y then z=2");
        json_t *o = json_line();
        assert_string_equal(field(o, "msg"), "x=1 y then");
        assert_string_equal(field(o, "z"), "2");
        json_decref(o);
        log_set_format(LOG_FORMAT_TEXT);
}

static void test_json_escapes(void **state)
{
        log_set_format(LOG_FORMAT_JSON);
        capture(LOG_WARN, "comp\"\\", "line\none\ttab \x01\x7f \"q\" \\ caf\xc3\xa9 bad\xff\xc3 "
                                     "over\xe0\x80\x80 k=\"\xfe\"");
        json_t *o = json_line();
        assert_string_equal(field(o, "component"), "comp\"\\");
        assert_string_equal(field(o, "msg"), "line\none\ttab \x01\x7f \"q\" \\ caf\xc3\xa9 "
                                             "bad\xef\xbf\xbd\xef\xbf\xbd "
                                             "over\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        assert_string_equal(field(o, "k"), "\xef\xbf\xbd");
        json_decref(o);
        log_set_format(LOG_FORMAT_TEXT);
}

static void test_json_long_line_stays_valid(void **state)
{
        log_set_format(LOG_FORMAT_JSON);
        static char msg[8000];
        /* control characters expand six times: the line is cut, still closed */
        memset(msg, '\x01', sizeof(msg) - 1);
        msg[sizeof(msg) - 1] = 0;
        capture(LOG_INFO, "c", msg);
        json_t *o = json_line();
        assert_true(strlen(field(o, "msg")) > 100);
        json_decref(o);
        /* a pair that does not fit is left out whole */
        char big[7000];
        memset(big, 'v', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        snprintf(msg, sizeof(msg), "ev a=1 b=\"%s\\n\\n\\n\"", big);
        for (char *p = strstr(msg, "vvvv"); p && *p == 'v'; p += 2)
                *p = '\x02';
        capture(LOG_INFO, "c", msg);
        o = json_line();
        assert_string_equal(field(o, "a"), "1");
        assert_null(json_object_get(o, "b"));
        json_decref(o);
        log_set_format(LOG_FORMAT_TEXT);
}

static void test_klog_header(void **state)
{
        log_set_format(LOG_FORMAT_KLOG);
        const struct {
                enum log_level level;
                char letter;
        } cases[] = { { LOG_ERROR, 'E' }, { LOG_WARN, 'W' }, { LOG_INFO, 'I' } };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                capture(cases[i].level, "kubelet", "registered resource=devlet.io/fuse");
                assert_int_equal(captured[0], cases[i].letter);
                assert_matches(captured, "^[EWI][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} "
                                         "[ 0-9]{7} devlet/kubelet:0\\] "
                                         "registered resource=devlet\\.io/fuse\n$");
        }
        char tid[16];
        snprintf(tid, sizeof(tid), " %7d ", gettid());
        assert_non_null(strstr(captured, tid));
        log_set_verbosity(2);
        capture(LOG_TRACE, "x", "t");
        assert_int_equal(captured[0], 'I');
        log_set_verbosity(0);
        log_set_format(LOG_FORMAT_TEXT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_format_names),
                cmocka_unit_test(test_text_unchanged),
                cmocka_unit_test(test_json_fields),
                cmocka_unit_test(test_json_unparsable_is_msg),
                cmocka_unit_test(test_json_escapes),
                cmocka_unit_test(test_json_long_line_stays_valid),
                cmocka_unit_test(test_klog_header),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
