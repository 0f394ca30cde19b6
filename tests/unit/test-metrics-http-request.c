/* Unit tests for metrics/http-request.c: well-formed GET and HEAD heads
 * (keep-alive, queries, bare LF line ends, blank lines before), incomplete
 * heads and the 431 at the limit, and every shape RFC 9112 says to refuse:
 * whitespace before the colon, bytes outside tchar in a name, controls and
 * NUL in a value, obs-fold, bare CR, malformed, signed, listed or
 * conflicting Content-Length, Transfer-Encoding, bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "metrics/http-request.h"

#define MAX 8192

static size_t parse(const char *text, size_t len, struct http_request *out)
{
        return http_request_parse(text, len, MAX, out);
}

#define PARSE(lit, out) parse(lit, sizeof(lit) - 1, out)

static void test_well_formed(void **state)
{
        struct http_request r;
        static const char get[] = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\nGET /";
        assert_int_equal(PARSE(get, &r), sizeof(get) - 1 - 5);
        assert_int_equal(r.status, 0);
        assert_false(r.head);
        assert_true(r.keep_alive);
        assert_int_equal(r.path_len, 8);
        assert_memory_equal(r.path, "/metrics", 8);

        /* bare LF line ends, empty lines before, Connection tokens, HTTP/1.0 */
        static const char head[] = "\r\n\nHEAD /health HTTP/1.0\nConnection: x, Keep-Alive\n\n";
        assert_int_equal(PARSE(head, &r), sizeof(head) - 1);
        assert_int_equal(r.status, 0);
        assert_true(r.head);
        assert_true(r.keep_alive);
        PARSE("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &r);
        assert_int_equal(r.status, 0);
        assert_false(r.keep_alive);
        PARSE("GET / HTTP/1.0\r\n\r\n", &r);
        assert_false(r.keep_alive);

        /* Content-Length 0, repeated with the same value, OWS around values,
         * obs-text in a value */
        PARSE("GET / HTTP/1.1\r\nContent-Length: 0\r\ncontent-length:\t00 \r\nX: \xe9t\xe9\r\n\r\n", &r);
        assert_int_equal(r.status, 0);
        assert_true(r.keep_alive);

        /* another method: 405, the connection kept */
        PARSE("DELETE / HTTP/1.1\r\n\r\n", &r);
        assert_int_equal(r.status, 405);
        assert_true(r.keep_alive);
}

static void test_incomplete_and_too_large(void **state)
{
        struct http_request r;
        assert_int_equal(PARSE("", &r), 0);
        assert_int_equal(PARSE("\r\n\r\n", &r), 0);
        assert_int_equal(PARSE("GET / HTTP/1.1\r\nHost: a\r\n", &r), 0);
        assert_int_equal(PARSE("GET / HTTP/1.1\r\nHost: a\r\n\r", &r), 0);
        static char big[MAX];
        memset(big, 'a', sizeof(big));
        memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
        assert_int_equal(parse(big, sizeof(big), &r), sizeof(big));
        assert_int_equal(r.status, 431);
        assert_false(r.keep_alive);
        assert_int_equal(parse(big, sizeof(big) - 1, &r), 0);
}

static void test_refused(void **state)
{
        static const char *bad[] = {
                /* request line */
                "GET  / HTTP/1.1\r\n\r\n",
                "GET /  HTTP/1.1\r\n\r\n",
                " GET / HTTP/1.1\r\n\r\n",
                "GET / HTTP/1.1 \r\n\r\n",
                "GET / HTTP/2.0\r\n\r\n",
                "GET /\x01 HTTP/1.1\r\n\r\n",
                "G(T / HTTP/1.1\r\n\r\n",
                "GET\r\n\r\n",
                "GET / HTTP/1.1\r\r\n\r\n",
                "\rGET / HTTP/1.1\r\n\r\n",
                /* field names */
                "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n",
                "GET / HTTP/1.1\r\nTransfer-Encoding\t: chunked\r\n\r\n",
                "GET / HTTP/1.1\r\nX@: a\r\n\r\n",
                "GET / HTTP/1.1\r\n: a\r\n\r\n",
                "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
                "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
                "GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n",
                "GET / HTTP/1.1\r\nX: a\rContent-Length: 5\r\n\r\n",
                "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n",
                "GET / HTTP/1.1\r\nX: \x1b[0m\r\n\r\n",
                /* bodies and their framing */
                "GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
                "HEAD / HTTP/1.1\r\nContent-Length: 1\r\n\r\n",
                "GET / HTTP/1.1\r\nContent-Length: +0\r\n\r\n",
                "GET / HTTP/1.1\r\nContent-Length: -0\r\n\r\n",
                "GET / HTTP/1.1\r\nContent-Length: 0x0\r\n\r\n",
                "GET / HTTP/1.1\r\nContent-Length: 0, 0\r\n\r\n",
                "GET / HTTP/1.1\r\nContent-Length: \r\n\r\n",
                "GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n",
                "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
                "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "GET / HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n",
                NULL,
        };
        for (size_t i = 0; bad[i]; i++) {
                struct http_request r;
                size_t n = strlen(bad[i]);
                assert_int_equal(http_request_parse(bad[i], n, MAX, &r), n);
                if (r.status != 400)
                        fail_msg("accepted (%u): %s", r.status, bad[i]);
                assert_false(r.keep_alive);
                assert_non_null(r.why);
        }
        /* NUL bytes, which the strings above cannot hold */
        static const char nul_name[] = "GET / HTTP/1.1\r\nContent\0Length: 5\r\n\r\n";
        static const char nul_value[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
        static const char nul_target[] = "GET /\0 HTTP/1.1\r\n\r\n";
        struct http_request r;
        PARSE(nul_name, &r);
        assert_int_equal(r.status, 400);
        PARSE(nul_value, &r);
        assert_int_equal(r.status, 400);
        PARSE(nul_target, &r);
        assert_int_equal(r.status, 400);
}

/* basic authentication reads one Authorization field, trimmed */
static void test_authorization(void **state)
{
        struct http_request r;
        static const char one[] = "GET / HTTP/1.1\r\nAuthorization:  Basic YTpi \r\n\r\n";
        assert_int_equal(PARSE(one, &r), sizeof(one) - 1);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.authorization_len, 10);
        assert_memory_equal(r.authorization, "Basic YTpi", 10);
        static const char none[] = "GET / HTTP/1.1\r\n\r\n";
        PARSE(none, &r);
        assert_null(r.authorization);
        static const char two[] = "GET / HTTP/1.1\r\nAuthorization: Basic YTpi\r\n"
                                  "authorization: Basic YTpj\r\n\r\n";
        PARSE(two, &r);
        assert_int_equal(r.status, 400);
        assert_false(r.keep_alive);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_well_formed),
                cmocka_unit_test(test_incomplete_and_too_large),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_authorization),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
