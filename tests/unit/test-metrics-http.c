/* Unit tests for metrics/store.c and metrics/http.c: snapshots and their
 * references, address parsing, and the endpoint answering real HTTP
 * requests on a loopback port (status, content type, body, limits). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "metrics/http.h"
#include "metrics/store.h"

static void test_store_slots(void **state)
{
        struct metrics_store *s = metrics_store_new();
        size_t len;
        _cleanup_free_ char *empty = metrics_store_render(s, &len);
        assert_string_equal(empty, "");
        assert_int_equal(len, 0);

        metrics_store_publish(s, METRICS_SLOT_DEVLET, xstrdup("b 1\n"), 4);
        metrics_store_publish(s, METRICS_SLOT_GPU, xstrdup("a 1\n"), 4);
        _cleanup_free_ char *both = metrics_store_render(s, &len);
        assert_string_equal(both, "a 1\nb 1\n"); /* GPU slot first */

        /* a reader's reference outlives a newer publication */
        const struct metrics_snap *snaps[METRICS_SLOTS];
        metrics_store_get(s, snaps);
        metrics_store_publish(s, METRICS_SLOT_GPU, xstrdup("a 2\n"), 4);
        assert_int_equal(snaps[METRICS_SLOT_GPU]->n_chunks, 1);
        assert_string_equal(snaps[METRICS_SLOT_GPU]->chunks[0].data, "a 1\n");
        for (size_t i = 0; i < METRICS_SLOTS; i++)
                metrics_snap_unref(snaps[i]);
        _cleanup_free_ char *now = metrics_store_render(s, NULL);
        assert_string_equal(now, "a 2\nb 1\n");
        assert_int_equal(metrics_store_generation(s, METRICS_SLOT_GPU), 2);
        assert_int_equal(metrics_store_generation(s, METRICS_SLOT_DEVLET), 1);

        metrics_store_heartbeat(s);
        assert_true(metrics_store_healthy(s, 60000));
        metrics_store_free(s);
}

static void test_parse_address(void **state)
{
        struct {
                const char *in;
                const char *host;
                int port;
        } ok[] = {
                { ":9400", "", 9400 },           { "127.0.0.1:9400", "127.0.0.1", 9400 },
                { "[::1]:9400", "::1", 9400 },   { "localhost:0", "localhost", 0 },
                { "0.0.0.0:65535", "0.0.0.0", 65535 },
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                _cleanup_free_ char *host = NULL;
                uint16_t port;
                assert_int_equal(metrics_http_parse_address(ok[i].in, &host, &port), 0);
                assert_string_equal(host, ok[i].host);
                assert_int_equal(port, ok[i].port);
        }
        const char *bad[] = { "9400", "", ":", "::1:9400", "[::1]9400", "[]:1", "h:65536", "h:12a",
                              "h:-1", "h:000009400", "[::1", NULL };
        for (size_t i = 0; bad[i]; i++) {
                char *host = NULL;
                uint16_t port;
                assert_int_equal(metrics_http_parse_address(bad[i], &host, &port), -EINVAL);
                assert_null(host);
        }
}

/* One HTTP/1.0 exchange with 127.0.0.1:port; returns the raw response. */
static char *http(uint16_t port, const char *request)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        size_t n = strlen(request);
        assert_int_equal(write(fd, request, n), (ssize_t)n);
        size_t cap = 1 << 16, len = 0;
        char *buf = xmalloc(cap + 1);
        for (;;) {
                ssize_t r = read(fd, buf + len, cap - len);
                assert_true(r >= 0);
                if (r == 0)
                        break;
                len += (size_t)r;
                if (len == cap) {
                        cap *= 2;
                        buf = xrealloc(buf, cap + 1);
                }
        }
        buf[len] = '\0';
        close(fd);
        return buf;
}

static const char *body(const char *resp)
{
        const char *p = strstr(resp, "\r\n\r\n");
        assert_non_null(p);
        return p + 4;
}

static void test_http_endpoint(void **state)
{
        struct metrics_store *s = metrics_store_new();
        struct metrics_http *h = NULL;
        assert_int_equal(metrics_http_start("127.0.0.1:0", NULL, s, 60000, &h, NULL), 0);
        uint16_t port = metrics_http_port(h);
        assert_true(port > 0);

        const char *a = "# HELP a x\n# TYPE a gauge\na 1\n", *b = "# HELP b y\n# TYPE b gauge\nb 2\n";
        /* the GPU slot in two chunks, as the collector publishes it */
        struct metrics_chunk *ch = xcalloc(2, sizeof(*ch));
        ch[0] = (struct metrics_chunk){ xstrndup(a, 11), 11 };
        ch[1] = (struct metrics_chunk){ xstrdup(a + 11), strlen(a) - 11 };
        metrics_store_publish_chunks(s, METRICS_SLOT_GPU, ch, 2);
        metrics_store_publish(s, METRICS_SLOT_DEVLET, xstrdup(b), strlen(b));
        _cleanup_free_ char *m = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
        assert_true(strncmp(m, "HTTP/1.0 200", 12) == 0 || strncmp(m, "HTTP/1.1 200", 12) == 0);
        assert_non_null(strstr(m, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert_string_equal(body(m), "# HELP a x\n# TYPE a gauge\na 1\n# HELP b y\n# TYPE b gauge\nb 2\n");

        _cleanup_free_ char *hd = http(port, "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert_non_null(strstr(hd, " 200 "));
        assert_string_equal(body(hd), "");

        _cleanup_free_ char *ok = http(port, "GET /health HTTP/1.0\r\n\r\n");
        assert_non_null(strstr(ok, " 200 "));
        assert_string_equal(body(ok), "ok");

        _cleanup_free_ char *nf = http(port, "GET /nope HTTP/1.0\r\n\r\n");
        assert_non_null(strstr(nf, " 404 "));

        _cleanup_free_ char *post = http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc");
        assert_non_null(strstr(post, " 405 "));
        assert_non_null(strstr(post, "Allow: GET, HEAD\r\n"));

        /* headers beyond the connection's memory are refused, not buffered */
        size_t big = 64 * 1024;
        _cleanup_free_ char *huge = xmalloc(big + 64);
        int n = snprintf(huge, 64, "GET /metrics HTTP/1.0\r\nX-Big: ");
        memset(huge + n, 'x', big);
        strcpy(huge + n + big, "\r\n\r\n");
        _cleanup_free_ char *refused = http(port, huge);
        assert_null(strstr(refused, " 200 "));

        /* still serving */
        _cleanup_free_ char *again = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_non_null(strstr(again, " 200 "));

        metrics_http_stop(h);
        metrics_store_free(s);
}

static void test_http_stale_heartbeat(void **state)
{
        struct metrics_store *s = metrics_store_new();
        struct metrics_http *h = NULL;
        /* max age 0: any beat older than this millisecond is stale; wait for
         * the clock to move on instead of sleeping a fixed time */
        assert_int_equal(metrics_http_start("127.0.0.1:0", NULL, s, 0, &h, NULL), 0);
        uint64_t t0 = metrics_now_ms();
        metrics_store_heartbeat(s);
        while (metrics_now_ms() < t0 + 2)
                ;
        _cleanup_free_ char *r = http(metrics_http_port(h), "GET /health HTTP/1.0\r\n\r\n");
        assert_non_null(strstr(r, " 503 "));
        metrics_http_stop(h);
        metrics_store_free(s);
}

static void test_http_bad_address(void **state)
{
        struct metrics_store *s = metrics_store_new();
        struct metrics_http *h = NULL;
        struct diag diag = { 0 };
        assert_int_equal(metrics_http_start("nonsense", NULL, s, 1000, &h, &diag), -EINVAL);
        assert_true(diag.message[0] != '\0');
        diag = (struct diag){ 0 };
        /* a port in use is an error with a message, not a crash */
        struct metrics_http *h1 = NULL;
        assert_int_equal(metrics_http_start("127.0.0.1:0", NULL, s, 1000, &h1, &diag), 0);
        _cleanup_free_ char *addr = xasprintf("127.0.0.1:%u", (unsigned)metrics_http_port(h1));
        assert_true(metrics_http_start(addr, NULL, s, 1000, &h, &diag) < 0);
        assert_true(diag.message[0] != '\0');
        metrics_http_stop(h1);
        metrics_http_stop(NULL);
        metrics_store_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_store_slots),
                cmocka_unit_test(test_parse_address),
                cmocka_unit_test(test_http_endpoint),
                cmocka_unit_test(test_http_stale_heartbeat),
                cmocka_unit_test(test_http_bad_address),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
