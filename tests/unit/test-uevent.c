/* Unit tests for src/base/uevent.c: the kernel's uevent format parsed
 * strictly (header, KEY=VALUE entries, ACTION and DEVPATH agreeing with the
 * header, limits), udevd's format told apart, and whose messages are
 * believed (the kernel's port 0, root's credentials). */
#include <errno.h>
#include <linux/netlink.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "base/uevent.h"

/* A message from NUL-separated parts: "a@/x", "ACTION=a", ... */
static size_t build(char *buf, size_t size, const char *const *parts)
{
        size_t n = 0;
        for (; *parts; parts++) {
                size_t len = strlen(*parts) + 1;
                assert_true(n + len <= size);
                memcpy(buf + n, *parts, len);
                n += len;
        }
        return n;
}

#define WEDGED_PARTS                                                                           \
        "change@/devices/pci0000:00/0000:00:01.1/0000:0c:00.0/drm/card1", "ACTION=change",    \
                "DEVPATH=/devices/pci0000:00/0000:00:01.1/0000:0c:00.0/drm/card1",            \
                "SUBSYSTEM=drm", "WEDGED=rebind,bus-reset", "DEVNAME=dri/card1", "SEQNUM=4711"

static void test_parses_the_kernels_format(void **state)
{
        char buf[512];
        const char *parts[] = { WEDGED_PARTS, NULL };
        size_t n = build(buf, sizeof(buf), parts);
        struct uevent ev;
        assert_int_equal(uevent_parse(buf, n, &ev), 0);
        assert_string_equal(ev.action, "change");
        assert_string_equal(ev.devpath, "/devices/pci0000:00/0000:00:01.1/0000:0c:00.0/drm/card1");
        assert_string_equal(ev.subsystem, "drm");
        assert_int_equal(ev.n_vars, 6);
        assert_string_equal(uevent_get(&ev, "WEDGED"), "rebind,bus-reset");
        assert_string_equal(uevent_get(&ev, "SEQNUM"), "4711");
        assert_null(uevent_get(&ev, "WEDGE"));
        assert_null(uevent_get(&ev, "wedged"));
}

static void test_values_may_hold_equals_and_be_empty(void **state)
{
        char buf[256];
        const char *parts[] = { "add@/devices/x", "ACTION=add", "DEVPATH=/devices/x",
                                "MODALIAS=pci:v1002=d74A1", "EMPTY=", NULL };
        size_t n = build(buf, sizeof(buf), parts);
        struct uevent ev;
        assert_int_equal(uevent_parse(buf, n, &ev), 0);
        assert_string_equal(uevent_get(&ev, "MODALIAS"), "pci:v1002=d74A1");
        assert_string_equal(uevent_get(&ev, "EMPTY"), "");
        assert_null(ev.subsystem);
}

static void expect_invalid(const char *const *parts, int want)
{
        char buf[1024];
        size_t n = build(buf, sizeof(buf), parts);
        struct uevent ev = { .action = "untouched" };
        assert_int_equal(uevent_parse(buf, n, &ev), want);
        assert_string_equal(ev.action, "untouched");
}

static void test_refuses_malformed_messages(void **state)
{
        const char *no_at[] = { "change/devices/x", "ACTION=change", "DEVPATH=/devices/x", NULL };
        const char *relative[] = { "change@devices/x", "ACTION=change", "DEVPATH=devices/x", NULL };
        const char *upper_action[] = { "Change@/x", "ACTION=Change", "DEVPATH=/x", NULL };
        const char *no_action[] = { "change@/x", "DEVPATH=/x", NULL };
        const char *no_devpath[] = { "change@/x", "ACTION=change", NULL };
        const char *action_differs[] = { "change@/x", "ACTION=add", "DEVPATH=/x", NULL };
        const char *devpath_differs[] = { "change@/x", "ACTION=change", "DEVPATH=/y", NULL };
        const char *no_equals[] = { "change@/x", "ACTION=change", "DEVPATH=/x", "WEDGED", NULL };
        const char *empty_key[] = { "change@/x", "ACTION=change", "DEVPATH=/x", "=v", NULL };
        const char *lower_key[] = { "change@/x", "ACTION=change", "DEVPATH=/x", "wedged=none",
                                    NULL };
        const char *twice[] = { "change@/x", "ACTION=change", "DEVPATH=/x", "WEDGED=none",
                                "WEDGED=rebind", NULL };
        const char *control[] = { "change@/x", "ACTION=change", "DEVPATH=/x", "WEDGED=no\tne",
                                  NULL };
        const char *control_path[] = { "change@/x\n", "ACTION=change", "DEVPATH=/x\n", NULL };
        const char *const *bad[] = { no_at,          relative,        upper_action, no_action,
                                     no_devpath,     action_differs,  devpath_differs,
                                     no_equals,      empty_key,       lower_key,    twice,
                                     control,        control_path };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                expect_invalid(bad[i], -EINVAL);
}

static void test_framing_and_limits(void **state)
{
        static char buf[UEVENT_MSG_MAX + 64];
        struct uevent ev;
        const char *parts[] = { WEDGED_PARTS, NULL };
        size_t n = build(buf, sizeof(buf), parts);
        /* not NUL-ended */
        assert_int_equal(uevent_parse(buf, n - 1, &ev), -EINVAL);
        /* an empty entry: two NULs in a row */
        n = build(buf, sizeof(buf), parts);
        buf[n++] = '\0';
        assert_int_equal(uevent_parse(buf, n, &ev), -EINVAL);
        assert_int_equal(uevent_parse(buf, 0, &ev), -EINVAL);
        assert_int_equal(uevent_parse(buf, 1, &ev), -EINVAL);
        assert_int_equal(uevent_parse(buf, UEVENT_MSG_MAX + 1, &ev), -EMSGSIZE);
        /* UEVENT_VARS_MAX entries pass, one more does not */
        n = build(buf, sizeof(buf), (const char *const[]){ "add@/x", "ACTION=add", "DEVPATH=/x",
                                                           NULL });
        for (int i = 2; i < UEVENT_VARS_MAX; i++)
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "K%d=v", i) + 1;
        assert_int_equal(uevent_parse(buf, n, &ev), 0);
        assert_int_equal(ev.n_vars, UEVENT_VARS_MAX);
        n = build(buf, sizeof(buf), (const char *const[]){ "add@/x", "ACTION=add", "DEVPATH=/x",
                                                           NULL });
        for (int i = 2; i <= UEVENT_VARS_MAX; i++)
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "K%d=v", i) + 1;
        assert_int_equal(uevent_parse(buf, n, &ev), -EINVAL);
}

static void test_libudev_messages_are_told_apart(void **state)
{
        char buf[64] = "libudev";
        struct uevent ev;
        memset(buf + 8, 0xfe, 40);
        assert_int_equal(uevent_parse(buf, 48, &ev), -EPROTO);
}

static void test_who_is_believed(void **state)
{
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK, .nl_pid = 0, .nl_groups = 1 };
        struct sockaddr_nl user = { .nl_family = AF_NETLINK, .nl_pid = 4242, .nl_groups = 1 };
        struct sockaddr_nl other = { .nl_family = AF_UNIX };
        struct ucred root = { .pid = 4242, .uid = 0, .gid = 0 };
        struct ucred nobody = { .pid = 4242, .uid = 65534, .gid = 65534 };
        assert_true(uevent_sender_trusted(&kernel, sizeof(kernel), NULL));
        assert_true(uevent_sender_trusted(&user, sizeof(user), &root));
        assert_false(uevent_sender_trusted(&user, sizeof(user), &nobody));
        assert_false(uevent_sender_trusted(&user, sizeof(user), NULL));
        assert_false(uevent_sender_trusted(&kernel, sizeof(kernel) - 1, &root));
        assert_false(uevent_sender_trusted(&other, sizeof(other), &root));
        assert_false(uevent_sender_trusted(NULL, 0, &root));
}

static void test_recv_refuses_a_small_buffer(void **state)
{
        char small[16];
        assert_int_equal(uevent_socket_recv(-1, small, sizeof(small)), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parses_the_kernels_format),
                cmocka_unit_test(test_values_may_hold_equals_and_be_empty),
                cmocka_unit_test(test_refuses_malformed_messages),
                cmocka_unit_test(test_framing_and_limits),
                cmocka_unit_test(test_libudev_messages_are_told_apart),
                cmocka_unit_test(test_who_is_believed),
                cmocka_unit_test(test_recv_refuses_a_small_buffer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
