/* Unit tests for src/base/diag.c and log_*_errno: setting with and without
 * a position, context added on the way up, messages cut at the buffer's
 * size, a NULL diag, and the value log_error_errno evaluates to. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/log.h"

static void test_set_and_format(void **state)
{
        struct diag d = { 0 };
        char buf[DIAG_FORMAT_MAX];
        assert_int_equal(diag_set(&d, -EINVAL, "bad %s", "value"), -EINVAL);
        assert_string_equal(diag_format(&d, buf, sizeof(buf)), "bad value");
        assert_int_equal(diag_set_at(&d, -EINVAL, "/etc/devlet.yaml", 3, 7, "unknown key"),
                         -EINVAL);
        assert_string_equal(diag_format(&d, buf, sizeof(buf)),
                            "/etc/devlet.yaml:3:7: unknown key");
        assert_int_equal(diag_set_at(&d, -E2BIG, "/etc/devlet.yaml", 0, 0, "too large"), -E2BIG);
        assert_string_equal(diag_format(&d, buf, sizeof(buf)), "/etc/devlet.yaml: too large");
        /* a later set replaces the position too */
        diag_set(&d, -EIO, "plain");
        assert_string_equal(diag_format(&d, buf, sizeof(buf)), "plain");
}

static void test_prefix_adds_context(void **state)
{
        struct diag d = { 0 };
        char buf[DIAG_FORMAT_MAX];
        diag_set_at(&d, -EINVAL, "f.yaml", 2, 1, "not a number");
        assert_int_equal(diag_prefix(&d, -EINVAL, "sharing"), -EINVAL);
        assert_int_equal(diag_prefix(&d, -EINVAL, "resource %s", "a/b"), -EINVAL);
        assert_string_equal(diag_format(&d, buf, sizeof(buf)),
                            "f.yaml:2:1: resource a/b: sharing: not a number");
}

static void test_null_and_long(void **state)
{
        assert_int_equal(diag_set(NULL, -ENOENT, "x"), -ENOENT);
        assert_int_equal(diag_set_at(NULL, -ENOENT, "f", 1, 1, "x"), -ENOENT);
        assert_int_equal(diag_prefix(NULL, -ENOENT, "x"), -ENOENT);
        struct diag d = { 0 };
        char big[2000];
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        diag_set(&d, -EINVAL, "%s", big);
        assert_int_equal(strlen(d.message), sizeof(d.message) - 1);
        diag_prefix(&d, -EINVAL, "context");
        assert_int_equal(strlen(d.message), sizeof(d.message) - 1);
        assert_memory_equal(d.message, "context: xx", 11);
}

static int log_and_return(int r)
{
        return log_debug_errno(r, "test", "failed thing=%d", 1);
}

static void test_log_errno_returns_r(void **state)
{
        assert_int_equal(log_and_return(-EPERM), -EPERM);
        assert_int_equal(log_error_errno(-EACCES, "test", "denied path=%s", "/x"), -EACCES);
        assert_int_equal(log_warn_errno(-ENOENT, "test", "gone"), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_set_and_format),
                cmocka_unit_test(test_prefix_adds_context),
                cmocka_unit_test(test_null_and_long),
                cmocka_unit_test(test_log_errno_returns_r),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
