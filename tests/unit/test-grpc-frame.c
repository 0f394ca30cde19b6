/* Unit tests for src/grpc/frame.c: the deframer, prefixes, percent-encoding
 * and status names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/xalloc.h"
#include "grpc/grpc.h"

struct collected {
        size_t n;
        uint8_t *msgs[16];
        size_t lens[16];
        int stop_after; /* on_msg returns 7 after this many messages; 0: never */
};

static int collect(const uint8_t *msg, size_t len, void *ud)
{
        struct collected *c = ud;
        assert_true(c->n < 16);
        assert_non_null(msg);
        c->msgs[c->n] = xmalloc(len ? len : 1);
        memcpy(c->msgs[c->n], msg, len);
        c->lens[c->n] = len;
        c->n++;
        return c->stop_after && (int)c->n >= c->stop_after ? 7 : 0;
}

static void collected_free(struct collected *c)
{
        for (size_t i = 0; i < c->n; i++)
                free(c->msgs[i]);
        c->n = 0;
}

/* prefix + payload for each message, concatenated */
static uint8_t *frame_all(const char *const *msgs, size_t n, size_t *out_len)
{
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
                total += 5 + strlen(msgs[i]);
        uint8_t *buf = xmalloc(total), *p = buf;
        for (size_t i = 0; i < n; i++) {
                size_t l = strlen(msgs[i]);
                grpc_frame_prefix(p, l);
                memcpy(p + 5, msgs[i], l);
                p += 5 + l;
        }
        *out_len = total;
        return buf;
}

static void test_prefix(void **state)
{
        uint8_t p[5];
        grpc_frame_prefix(p, 0x01020304);
        assert_memory_equal(p, ((uint8_t[]){ 0, 1, 2, 3, 4 }), 5);
        grpc_frame_prefix(p, 0);
        assert_memory_equal(p, ((uint8_t[]){ 0, 0, 0, 0, 0 }), 5);
}

static void test_split_every_boundary(void **state)
{
        static const char *const msgs[] = { "hello", "", "world!", "x" };
        size_t len;
        uint8_t *buf = frame_all(msgs, 4, &len);

        for (size_t a = 0; a <= len; a++) {
                for (size_t b = a; b <= len; b++) {
                        struct grpc_deframer d;
                        struct collected c = { 0 };
                        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
                        assert_int_equal(grpc_deframer_feed(&d, buf, a, collect, &c), 0);
                        assert_int_equal(grpc_deframer_feed(&d, buf + a, b - a, collect, &c), 0);
                        assert_int_equal(grpc_deframer_feed(&d, buf + b, len - b, collect, &c), 0);
                        assert_int_equal(c.n, 4);
                        for (size_t i = 0; i < 4; i++) {
                                assert_int_equal(c.lens[i], strlen(msgs[i]));
                                assert_memory_equal(c.msgs[i], msgs[i], c.lens[i]);
                        }
                        assert_int_equal(d.hdr_len, 0);
                        assert_null(d.buf);
                        collected_free(&c);
                        grpc_deframer_release(&d);
                }
        }
        free(buf);
}

static void test_byte_at_a_time_large(void **state)
{
        size_t n = 100000;
        uint8_t *buf = xmalloc(n + 5);
        grpc_frame_prefix(buf, n);
        for (size_t i = 0; i < n; i++)
                buf[5 + i] = (uint8_t)(i * 13);

        struct grpc_deframer d;
        struct collected c = { 0 };
        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
        for (size_t i = 0; i < n + 5; i += 997) {
                size_t k = n + 5 - i < 997 ? n + 5 - i : 997;
                assert_int_equal(grpc_deframer_feed(&d, buf + i, k, collect, &c), 0);
        }
        assert_int_equal(c.n, 1);
        assert_int_equal(c.lens[0], n);
        assert_memory_equal(c.msgs[0], buf + 5, n);
        collected_free(&c);
        grpc_deframer_release(&d);
        free(buf);
}

static void test_several_in_one_feed(void **state)
{
        static const char *const msgs[] = { "a", "bb", "", "", "ccc" };
        size_t len;
        uint8_t *buf = frame_all(msgs, 5, &len);
        struct grpc_deframer d;
        struct collected c = { 0 };
        grpc_deframer_init(&d, 0);
        assert_int_equal(d.max, GRPC_MAX_MESSAGE);
        assert_int_equal(grpc_deframer_feed(&d, buf, len, collect, &c), 0);
        assert_int_equal(c.n, 5);
        assert_int_equal(c.lens[2], 0);
        assert_int_equal(c.lens[3], 0);
        assert_memory_equal(c.msgs[4], "ccc", 3);
        collected_free(&c);
        grpc_deframer_release(&d);
        free(buf);
}

static void test_callback_stops(void **state)
{
        static const char *const msgs[] = { "one", "two", "three" };
        size_t len;
        uint8_t *buf = frame_all(msgs, 3, &len);
        struct grpc_deframer d;
        struct collected c = { .stop_after = 2 };
        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
        assert_int_equal(grpc_deframer_feed(&d, buf, len, collect, &c), 7);
        assert_int_equal(c.n, 2);
        collected_free(&c);
        grpc_deframer_release(&d);
        free(buf);
}

static void test_oversize(void **state)
{
        struct grpc_deframer d;
        struct collected c = { 0 };
        grpc_deframer_init(&d, 10);
        uint8_t ok[5 + 10];
        grpc_frame_prefix(ok, 10);
        memset(ok + 5, 'z', 10);
        assert_int_equal(grpc_deframer_feed(&d, ok, sizeof(ok), collect, &c), 0);
        assert_int_equal(c.n, 1);

        uint8_t big[5];
        grpc_frame_prefix(big, 11);
        assert_int_equal(grpc_deframer_feed(&d, big, 3, collect, &c), 0);
        assert_int_equal(grpc_deframer_feed(&d, big + 3, 2, collect, &c), -EMSGSIZE);
        assert_null(d.buf);
        /* the error sticks */
        assert_int_equal(grpc_deframer_feed(&d, (const uint8_t *)"x", 1, collect, &c), -EMSGSIZE);
        grpc_deframer_release(&d);

        /* a 4 GiB announcement allocates nothing */
        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
        uint8_t huge[5] = { 0, 0xff, 0xff, 0xff, 0xff };
        assert_int_equal(grpc_deframer_feed(&d, huge, 5, collect, &c), -EMSGSIZE);
        assert_null(d.buf);
        grpc_deframer_release(&d);

        /* exactly the limit is fine */
        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
        uint8_t lim[5];
        grpc_frame_prefix(lim, GRPC_MAX_MESSAGE);
        assert_int_equal(grpc_deframer_feed(&d, lim, 5, collect, &c), 0);
        grpc_deframer_release(&d);
        assert_int_equal(c.n, 1);
        collected_free(&c);
}

static void test_partial_payload_allocates_only_what_arrived(void **state)
{
        struct grpc_deframer d;
        struct collected c = { 0 };
        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
        uint8_t p[5 + 3] = { 0 };
        grpc_frame_prefix(p, GRPC_MAX_MESSAGE);
        memcpy(p + 5, "abc", 3);
        assert_int_equal(grpc_deframer_feed(&d, p, sizeof(p), collect, &c), 0);
        assert_int_equal(d.have, 3);
        assert_int_equal(d.need, GRPC_MAX_MESSAGE);
        assert_int_equal(c.n, 0);
        grpc_deframer_release(&d);
        assert_null(d.buf);
}

static void test_compressed(void **state)
{
        struct grpc_deframer d;
        struct collected c = { 0 };
        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
        uint8_t p[6] = { 1, 0, 0, 0, 1, 'x' };
        assert_int_equal(grpc_deframer_feed(&d, p, sizeof(p), collect, &c), -ENOTSUP);
        assert_int_equal(c.n, 0);
        grpc_deframer_release(&d);

        grpc_deframer_init(&d, GRPC_MAX_MESSAGE);
        p[0] = 0x80;
        assert_int_equal(grpc_deframer_feed(&d, p, sizeof(p), collect, &c), -ENOTSUP);
        grpc_deframer_release(&d);
}

static void check_roundtrip(const char *s)
{
        char *enc = grpc_percent_encode(s);
        for (const unsigned char *p = (const unsigned char *)enc; *p; p++)
                assert_true(*p >= 0x20 && *p <= 0x7e);
        char *dec = grpc_percent_decode(enc, strlen(enc));
        assert_string_equal(dec, s);
        free(enc);
        free(dec);
}

static void test_percent(void **state)
{
        char *enc = grpc_percent_encode("a b%c\xc3\xa9\n\x7f~");
        assert_string_equal(enc, "a b%25c%C3%A9%0A%7F~");
        free(enc);

        check_roundtrip("");
        check_roundtrip("plain ascii text: 100 / 3 = 33");
        check_roundtrip("100% %41 %%");
        check_roundtrip("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80");
        check_roundtrip("\x01\x02\t\r\n\x1f\x7f\xff");

        char all[256];
        for (int i = 1; i < 256; i++)
                all[i - 1] = (char)i;
        all[255] = '\0';
        check_roundtrip(all);
}

static void test_percent_decode_malformed(void **state)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "%", "%" },         { "%4", "%4" },     { "%zz", "%zz" },   { "%4g", "%4g" },
                { "abc%", "abc%" },   { "%%41", "%A" },   { "%41%", "A%" },   { "%e2%9C%93", "\xe2\x9c\x93" },
                { "%G1x", "%G1x" },   { "100%", "100%" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *d = grpc_percent_decode(cases[i].in, strlen(cases[i].in));
                assert_string_equal(d, cases[i].out);
                free(d);
        }
        /* len bounds the input: an escape cut by len is literal */
        char *d = grpc_percent_decode("a%41", 3);
        assert_string_equal(d, "a%4");
        free(d);
}

static void test_status_names(void **state)
{
        assert_string_equal(grpc_status_name(GRPC_STATUS_OK), "OK");
        assert_string_equal(grpc_status_name(GRPC_STATUS_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
        assert_string_equal(grpc_status_name(GRPC_STATUS_UNAUTHENTICATED), "UNAUTHENTICATED");
        assert_string_equal(grpc_status_name(-1), "UNKNOWN_STATUS");
        assert_string_equal(grpc_status_name(17), "UNKNOWN_STATUS");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_prefix),
                cmocka_unit_test(test_split_every_boundary),
                cmocka_unit_test(test_byte_at_a_time_large),
                cmocka_unit_test(test_several_in_one_feed),
                cmocka_unit_test(test_callback_stops),
                cmocka_unit_test(test_oversize),
                cmocka_unit_test(test_partial_payload_allocates_only_what_arrived),
                cmocka_unit_test(test_compressed),
                cmocka_unit_test(test_percent),
                cmocka_unit_test(test_percent_decode_malformed),
                cmocka_unit_test(test_status_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
