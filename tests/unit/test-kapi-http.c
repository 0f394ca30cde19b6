/* Unit tests for kapi's HTTP layer without TLS: the response parser
 * (kapi/http-parser.c) on every framing (Content-Length, chunked with
 * extensions and trailers, until close, bodiless statuses, interim 1xx,
 * bare LF line ends), each input fed whole, cut at every byte boundary and
 * byte by byte, with the same outcome; every refusal (obs-fold, bad names
 * and values, bare CR, NUL, conflicting or malformed framing, bad chunk
 * sizes, over-long lines and heads, too many fields or interim heads) and
 * the cuts at the end of the stream.  The watch's line splitter.  And the
 * transport (kapi/http.c) through kapi_request against a scripted plain
 * HTTP server in a thread: keep-alive reuse, no reuse after a response
 * not read to its end or a Connection: close, a pooled connection the
 * server closed, the stop flag while the server is silent, the low-speed
 * cut, a broken response.  Also the diag when libssl cannot be loaded. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/xalloc.h"
#include "kapi/http-parser.h"
#include "kapi/internal.h"
#include "kapi/kapi.h"
#include "kapi/tls.h"
#include "test-util.h"

/* ---- the parser ---- */

struct outcome {
        int r;            /* 0, or the first error */
        const char *why;
        bool head, end;
        int status;
        bool keep_alive, has_length, chunked, until_close;
        unsigned retry_after_s;
        size_t taken;     /* bytes taken up to END (or all) */
        char body[1024];
        size_t body_len;
};

/* Feeds in[0, len) to p, stopping at END or an error. */
static void feed(struct kapi_http_parser *p, const char *in, size_t len, struct outcome *o)
{
        size_t off = 0;
        while (!o->r && !o->end) {
                struct kapi_http_step st;
                int r = kapi_http_parse(p, in + off, len - off, &st);
                if (r < 0) {
                        o->r = r;
                        o->why = p->why;
                        assert_non_null(p->why);
                        break;
                }
                assert_true(st.taken <= len - off);
                off += st.taken;
                if (st.event == KAPI_HTTP_MORE) {
                        assert_int_equal(off, len);
                        break;
                }
                if (st.event == KAPI_HTTP_HEAD) {
                        assert_false(o->head);
                        o->head = true;
                        o->status = p->status;
                        o->retry_after_s = p->retry_after_s;
                        o->has_length = p->has_length;
                        o->chunked = p->chunked;
                        o->until_close = p->until_close;
                } else if (st.event == KAPI_HTTP_BODY) {
                        assert_true(o->head);
                        assert_true(st.len > 0);
                        assert_ptr_equal(st.data + st.len, in + off);
                        assert_true(o->body_len + st.len <= sizeof(o->body));
                        memcpy(o->body + o->body_len, st.data, st.len);
                        o->body_len += st.len;
                } else {
                        o->end = true;
                        o->keep_alive = p->keep_alive;
                }
        }
        o->taken += off;
}

static void finish(struct kapi_http_parser *p, struct outcome *o, bool eof)
{
        if (!eof || o->r || o->end)
                return;
        int r = kapi_http_parse_eof(p);
        if (r == 0) {
                o->end = true;
                o->keep_alive = p->keep_alive;
        } else {
                o->r = r;
                o->why = p->why;
        }
}

/* in cut into pieces at the offsets in cuts (ascending, within len). */
static struct outcome parse_pieces(const char *in, size_t len, const size_t *cuts, size_t ncuts,
                                   bool eof)
{
        struct kapi_http_parser *p = xmalloc(sizeof(*p));
        kapi_http_parser_init(p);
        struct outcome o = { 0 };
        size_t at = 0;
        for (size_t i = 0; i <= ncuts; i++) {
                size_t end = i < ncuts ? cuts[i] : len;
                /* each piece in a buffer of its own size, so a read past it shows */
                char *piece = xmalloc(end - at + 1);
                memcpy(piece, in + at, end - at);
                feed(p, piece, end - at, &o);
                free(piece);
                if (o.r || o.end)
                        break;
                at = end;
        }
        finish(p, &o, eof);
        free(p);
        return o;
}

static void assert_same(const struct outcome *a, const struct outcome *b)
{
        assert_int_equal(a->r, b->r);
        if (a->r) {
                assert_string_equal(a->why, b->why);
                return;
        }
        assert_int_equal(a->head, b->head);
        assert_int_equal(a->end, b->end);
        assert_int_equal(a->status, b->status);
        assert_int_equal(a->keep_alive, b->keep_alive);
        assert_int_equal(a->has_length, b->has_length);
        assert_int_equal(a->chunked, b->chunked);
        assert_int_equal(a->until_close, b->until_close);
        assert_int_equal(a->body_len, b->body_len);
        assert_memory_equal(a->body, b->body, a->body_len);
        if (a->end)
                assert_int_equal(a->taken, b->taken);
}

/* Parses in whole, then cut at every byte boundary, then byte by byte:
 * the same outcome every time, which is returned. */
static struct outcome parse_all_ways(const char *in, size_t len, bool eof)
{
        struct outcome whole = parse_pieces(in, len, NULL, 0, eof);
        for (size_t k = 0; k <= len; k++) {
                struct outcome o = parse_pieces(in, len, &k, 1, eof);
                assert_same(&whole, &o);
        }
        size_t *cuts = xmalloc((len + 1) * sizeof(*cuts));
        for (size_t k = 0; k < len; k++)
                cuts[k] = k + 1;
        struct outcome bytes = parse_pieces(in, len, cuts, len ? len - 1 : 0, eof);
        free(cuts);
        assert_same(&whole, &bytes);
        return whole;
}

#define PARSE(lit, eof) parse_all_ways(lit, sizeof(lit) - 1, eof)

static void assert_body(const struct outcome *o, const char *body)
{
        assert_int_equal(o->r, 0);
        assert_int_equal(o->body_len, strlen(body));
        assert_memory_equal(o->body, body, o->body_len);
}

static void test_parse_content_length(void **state)
{
        static const char r1[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 5\r\ncontent-length:  5 \r\n\r\nhelloHTTP/1.1";
        struct outcome o = PARSE(r1, false);
        assert_body(&o, "hello");
        assert_true(o.end && o.keep_alive && o.has_length);
        assert_int_equal(o.status, 200);
        assert_int_equal(o.taken, sizeof(r1) - 1 - 8); /* what follows is not taken */

        o = PARSE("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false);
        assert_body(&o, "");
        assert_true(o.end && o.keep_alive);
        assert_int_equal(o.status, 404);

        /* no reason phrase, bare LF line ends, obs-text in a value */
        o = PARSE("HTTP/1.1 201\nX: \xe9t\xe9\nContent-Length: 2\n\nok", false);
        assert_body(&o, "ok");
        assert_int_equal(o.status, 201);
        o = PARSE("HTTP/1.1 200 \r\nContent-Length: 1\r\n\r\nx", false);
        assert_body(&o, "x");

        /* Connection: close and HTTP/1.0 end the connection */
        o = PARSE("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 1\r\n\r\nx",
                  false);
        assert_true(o.end);
        assert_false(o.keep_alive);
        o = PARSE("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false);
        assert_true(o.end);
        assert_false(o.keep_alive);

        /* cut short: the connection ended inside the body or the head */
        o = PARSE("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", true);
        assert_int_equal(o.r, -ECONNRESET);
        assert_string_equal(o.why, "the connection closed inside the response");
        o = PARSE("HTTP/1.1 200 OK\r\nContent-Len", true);
        assert_int_equal(o.r, -ECONNRESET);
        o = PARSE("", true);
        assert_int_equal(o.r, -ECONNRESET);
        assert_string_equal(o.why, "the connection closed before a response came");
}

static void test_parse_chunked(void **state)
{
        static const char r1[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "5;name=value\r\nhello\r\n"
                                 "6 ; x\r\n world\r\n"
                                 "A\r\n0123456789\r\n"
                                 "000\r\nX-Trailer: t\r\nY:\r\n\r\n";
        struct outcome o = PARSE(r1, false);
        assert_body(&o, "hello world0123456789");
        assert_true(o.end && o.keep_alive && o.chunked);
        assert_false(o.has_length);
        assert_int_equal(o.taken, sizeof(r1) - 1);

        /* bare LF everywhere, a coding list with empty elements, case */
        o = PARSE("HTTP/1.1 200 OK\nTransfer-Encoding: , Chunked\n\n3\nabc\n0\n\n", false);
        assert_body(&o, "abc");
        assert_true(o.end);

        /* the watch's stream: many chunks, the end cut */
        o = PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n1\r\n\n\r\n", true);
        assert_int_equal(o.r, -ECONNRESET);
        o = PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n", true);
        assert_int_equal(o.r, -ECONNRESET);
}

/* Retry-After's delay-seconds (429 and 503 carry it); an HTTP-date or a
 * malformed value reads as none; a huge one is bounded; an interim head's
 * is forgotten. */
static void test_parse_retry_after(void **state)
{
        struct outcome o = PARSE("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\n"
                                 "Content-Length: 0\r\n\r\n", false);
        assert_int_equal(o.status, 429);
        assert_int_equal(o.retry_after_s, 3);
        o = PARSE("HTTP/1.1 503 Service Unavailable\r\nretry-after:  120 \r\n"
                  "Content-Length: 0\r\n\r\n", false);
        assert_int_equal(o.retry_after_s, 120);
        o = PARSE("HTTP/1.1 503 Service Unavailable\r\n"
                  "Retry-After: Fri, 31 Dec 1999 23:59:59 GMT\r\nContent-Length: 0\r\n\r\n",
                  false);
        assert_true(o.end);
        assert_int_equal(o.retry_after_s, 0);
        o = PARSE("HTTP/1.1 429 Too Many Requests\r\nRetry-After: -1\r\n"
                  "Content-Length: 0\r\n\r\n", false);
        assert_int_equal(o.retry_after_s, 0);
        o = PARSE("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 9999999999999\r\n"
                  "Content-Length: 0\r\n\r\n", false);
        assert_int_equal(o.retry_after_s, KAPI_HTTP_RETRY_AFTER_MAX);
        o = PARSE("HTTP/1.1 103 Early Hints\r\nRetry-After: 5\r\n\r\n"
                  "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert_int_equal(o.status, 200);
        assert_int_equal(o.retry_after_s, 0);
        o = PARSE("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert_int_equal(o.retry_after_s, 0);
}

static void test_parse_until_close_and_bodiless(void **state)
{
        struct outcome o = PARSE("HTTP/1.1 200 OK\r\nContent-Type: x\r\n\r\n{\"a\": 1}", true);
        assert_body(&o, "{\"a\": 1}");
        assert_true(o.end && o.until_close);
        assert_false(o.keep_alive);
        /* until close: no end before the connection's */
        o = PARSE("HTTP/1.1 200 OK\r\n\r\nabc", false);
        assert_false(o.end);
        assert_body(&o, "abc");

        /* 204 and 304 have no body whatever their fields say */
        o = PARSE("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", false);
        assert_true(o.end && o.keep_alive);
        assert_false(o.has_length);
        assert_body(&o, "");
        o = PARSE("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", false);
        assert_true(o.end && o.keep_alive);

        /* interim heads are skipped */
        o = PARSE("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
                  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                  false);
        assert_body(&o, "ok");
        assert_int_equal(o.status, 200);
        assert_true(o.end);
}

struct refusal {
        const char *in;
        const char *why;
};

static void test_parse_refusals(void **state)
{
        static const struct refusal cases[] = {
                { "HTTP/2 200 OK\r\n\r\n", "not an HTTP/1.x status line" },
                { "HTTP/1.1  200 OK\r\n\r\n", "a status code that is not 3 digits" },
                { "http/1.1 200 OK\r\n\r\n", "not an HTTP/1.x status line" },
                { "HTTP/1.1 20 OK\r\n\r\n", "a status code that is not 3 digits" },
                { "HTTP/1.1 2000 OK\r\n\r\n", "a status code that is not 3 digits" },
                { "HTTP/1.1 099 OK\r\n\r\n", "a status code outside 100-599" },
                { "HTTP/1.1 600 OK\r\n\r\n", "a status code outside 100-599" },
                { "HTTP/1.1 200 O\x01K\r\n\r\n", "a control byte in the reason phrase" },
                { "\r\nHTTP/1.1 200 OK\r\n\r\n", "not an HTTP/1.x status line" },
                { "HTTP/1.1 101 Switching Protocols\r\n\r\n",
                  "101 Switching Protocols, which was not asked for" },
                { "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", "a folded field line (obs-fold)" },
                { "HTTP/1.1 200 OK\r\n\tA: b\r\n\r\n", "a folded field line (obs-fold)" },
                { "HTTP/1.1 200 OK\r\nA : b\r\n\r\n", "a malformed field name" },
                { "HTTP/1.1 200 OK\r\nA(b): c\r\n\r\n", "a malformed field name" },
                { "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "a malformed field name" },
                { "HTTP/1.1 200 OK\r\n: b\r\n\r\n", "a malformed field name" },
                { "HTTP/1.1 200 OK\r\nA: b\x01\r\n\r\n", "a control byte in a field value" },
                { "HTTP/1.1 200 OK\r\nA: b\x7f\r\n\r\n", "a control byte in a field value" },
                { "HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", "a CR that does not end a line" },
                { "HTTP/1.1 200 OK\r\nA: b\r\r\n\r\n", "a CR that does not end a line" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\nx", "a malformed Content-Length" },
                { "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", "a malformed Content-Length" },
                { "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nx", "a malformed Content-Length" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\nx", "a malformed Content-Length" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 12345678901234567890\r\n\r\n",
                  "a malformed Content-Length" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
                  "conflicting Content-Length fields" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                  "both Transfer-Encoding and Content-Length" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                  "a Transfer-Encoding other than chunked" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                  "Transfer-Encoding chunked twice" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n", "an empty Transfer-Encoding" },
                { "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                  "Transfer-Encoding in an HTTP/1.0 response" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\ng\r\n",
                  "a chunk without its size" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
                  "a chunk without its size" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
                  "a chunk without its size" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000001\r\n",
                  "a chunk size over 16 hex digits" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n",
                  "a malformed chunk size" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;a\x01\r\n",
                  "a control byte in a chunk extension" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n",
                  "chunk data longer than its size" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rx",
                  "chunk data longer than its size" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded: t\r\n\r\n",
                  "a folded field line (obs-fold)" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT x: t\r\n\r\n",
                  "a malformed field name" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct outcome o = parse_all_ways(cases[i].in, strlen(cases[i].in), true);
                if (o.r != -EBADMSG || strcmp(o.why, cases[i].why) != 0)
                        fail_msg("case %zu (%s): %d %s", i, cases[i].in, o.r, o.why ? o.why : "-");
        }
        /* a NUL in a head */
        static const char nul[] = "HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n";
        struct outcome o = PARSE(nul, false);
        assert_int_equal(o.r, -EBADMSG);
        assert_string_equal(o.why, "a NUL byte in a line");
}

static void test_parse_limits(void **state)
{
        /* a line over 8 KiB, in the head and as a chunk size */
        char *in = xmalloc(3 * KAPI_HTTP_HEAD_MAX);
        int n = sprintf(in, "HTTP/1.1 200 OK\r\nX: ");
        memset(in + n, 'a', KAPI_HTTP_LINE_MAX);
        strcpy(in + n + KAPI_HTTP_LINE_MAX, "\r\n\r\n");
        struct outcome o = parse_pieces(in, strlen(in), NULL, 0, true);
        assert_int_equal(o.r, -EBADMSG);
        assert_string_equal(o.why, "a line of the response is over 8 KiB");
        /* just under: fine */
        n = sprintf(in, "HTTP/1.1 200 OK\r\nX: ");
        memset(in + n, 'a', KAPI_HTTP_LINE_MAX - 5);
        strcpy(in + n + KAPI_HTTP_LINE_MAX - 5, "\r\nContent-Length: 0\r\n\r\n");
        o = parse_pieces(in, strlen(in), NULL, 0, false);
        assert_int_equal(o.r, 0);
        assert_true(o.end);

        /* a head over 64 KiB in 4 KiB lines */
        n = sprintf(in, "HTTP/1.1 200 OK\r\n");
        for (int i = 0; i < 17; i++) {
                n += sprintf(in + n, "X%d: ", i);
                memset(in + n, 'b', 4000);
                n += 4000;
                n += sprintf(in + n, "\r\n");
        }
        strcpy(in + n, "\r\n");
        o = parse_pieces(in, strlen(in), NULL, 0, true);
        assert_int_equal(o.r, -EBADMSG);
        assert_string_equal(o.why, "the response's head is over 64 KiB");

        /* too many field lines; the trailers count too */
        n = sprintf(in, "HTTP/1.1 200 OK\r\n");
        for (unsigned i = 0; i <= KAPI_HTTP_FIELDS_MAX; i++)
                n += sprintf(in + n, "X: %u\r\n", i);
        strcpy(in + n, "\r\n");
        o = parse_pieces(in, strlen(in), NULL, 0, true);
        assert_int_equal(o.r, -EBADMSG);
        assert_string_equal(o.why, "too many field lines");
        n = sprintf(in, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n");
        for (unsigned i = 0; i < KAPI_HTTP_FIELDS_MAX; i++)
                n += sprintf(in + n, "T: %u\r\n", i);
        strcpy(in + n, "\r\n");
        o = parse_pieces(in, strlen(in), NULL, 0, true);
        assert_int_equal(o.r, -EBADMSG);

        /* interim heads without end */
        n = 0;
        for (unsigned i = 0; i <= KAPI_HTTP_INTERIM_MAX; i++)
                n += sprintf(in + n, "HTTP/1.1 100 Continue\r\n\r\n");
        sprintf(in + n, "HTTP/1.1 200 OK\r\n\r\n");
        o = parse_pieces(in, strlen(in), NULL, 0, true);
        assert_int_equal(o.r, -EBADMSG);
        assert_string_equal(o.why, "too many interim (1xx) responses");

        /* a chunk size at the limit, body bytes counted exactly */
        o = PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
                  true);
        assert_int_equal(o.r, -ECONNRESET);
        o = parse_pieces("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
                         68, NULL, 0, false);
        assert_body(&o, "abc");
        free(in);
}

static void test_parser_started(void **state)
{
        struct kapi_http_parser *p = xmalloc(sizeof(*p));
        kapi_http_parser_init(p);
        assert_false(kapi_http_parser_started(p));
        struct kapi_http_step st;
        assert_int_equal(kapi_http_parse(p, "", 0, &st), 0);
        assert_int_equal(st.event, KAPI_HTTP_MORE);
        assert_false(kapi_http_parser_started(p));
        assert_int_equal(kapi_http_parse(p, "H", 1, &st), 0);
        assert_true(kapi_http_parser_started(p));
        /* after END, END again with nothing taken */
        kapi_http_parser_init(p);
        static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_int_equal(kapi_http_parse(p, r, sizeof(r) - 1, &st), 0);
        assert_int_equal(st.event, KAPI_HTTP_HEAD);
        assert_int_equal(st.taken, sizeof(r) - 1);
        assert_int_equal(kapi_http_parse(p, "xyz", 3, &st), 0);
        assert_int_equal(st.event, KAPI_HTTP_END);
        assert_int_equal(st.taken, 0);
        assert_int_equal(kapi_http_parse(p, "xyz", 3, &st), 0);
        assert_int_equal(st.event, KAPI_HTTP_END);
        assert_int_equal(kapi_http_parse_eof(p), 0);
        free(p);
}

/* ---- the watch's line splitter ---- */

struct seen {
        char text[512];
        size_t len;
        unsigned lines;
        unsigned stop_at; /* return 7 from that line on (0: never) */
};

static int on_line(void *ud, const char *line, size_t len)
{
        struct seen *s = ud;
        assert_true(s->len + len + 1 <= sizeof(s->text));
        memcpy(s->text + s->len, line, len);
        s->len += len;
        s->text[s->len++] = '|';
        s->lines++;
        return s->stop_at && s->lines >= s->stop_at ? 7 : 0;
}

static void test_lines(void **state)
{
        static const char in[] = "{\"a\":1}\n\nline three\r\nlast";
        size_t len = sizeof(in) - 1;
        for (size_t k = 0; k <= len; k++) {
                struct kapi_lines l = { .max = 11 };
                struct seen s = { 0 };
                assert_int_equal(kapi_lines_feed(&l, in, k, on_line, &s), 0);
                assert_int_equal(kapi_lines_feed(&l, in + k, len - k, on_line, &s), 0);
                assert_int_equal(kapi_lines_finish(&l, on_line, &s), 0);
                assert_int_equal(l.count, 4);
                s.text[s.len] = '\0';
                assert_string_equal(s.text, "{\"a\":1}||line three\r|last|");
                kapi_lines_release(&l);
        }
        /* byte by byte; the last line ends with its '\n': nothing to finish */
        struct kapi_lines l = { .max = 11 };
        struct seen s = { 0 };
        for (size_t i = 0; i < len; i++)
                assert_int_equal(kapi_lines_feed(&l, in + i, 1, on_line, &s), 0);
        assert_int_equal(kapi_lines_feed(&l, "\n", 1, on_line, &s), 0);
        assert_int_equal(kapi_lines_finish(&l, on_line, &s), 0);
        assert_int_equal(s.lines, 4);
        kapi_lines_release(&l);

        /* max bytes fit, one more does not, split or not */
        l = (struct kapi_lines){ .max = 4 };
        s = (struct seen){ 0 };
        assert_int_equal(kapi_lines_feed(&l, "abcd\nab", 7, on_line, &s), 0);
        assert_int_equal(kapi_lines_feed(&l, "cd", 2, on_line, &s), 0);
        assert_int_equal(kapi_lines_feed(&l, "e", 1, on_line, &s), -EMSGSIZE);
        assert_int_equal(l.count, 1);
        kapi_lines_release(&l);
        l = (struct kapi_lines){ .max = 4 };
        assert_int_equal(kapi_lines_feed(&l, "abcde\n", 6, on_line, &s), -EMSGSIZE);
        kapi_lines_release(&l);

        /* the function's value stops the feed */
        l = (struct kapi_lines){ .max = 100 };
        s = (struct seen){ .stop_at = 2 };
        assert_int_equal(kapi_lines_feed(&l, "a\nb\nc\n", 6, on_line, &s), 7);
        assert_int_equal(s.lines, 2);
        kapi_lines_release(&l);
}

/* ---- the transport, against a scripted server ---- */

enum after { KEEP, CLOSE, HANG };

struct reply {
        const char *text;
        enum after after;
};

struct server {
        int lfd, port;
        const struct reply *replies;
        size_t n_replies, next;
        int connections;
        int wake[2]; /* written to end a HANG */
        pthread_t thread;
};

/* Reads one request head (our requests here carry no body); false at EOF. */
static bool read_request(int fd)
{
        char buf[4096];
        size_t len = 0;
        while (len < sizeof(buf)) {
                ssize_t n = read(fd, buf + len, sizeof(buf) - len);
                if (n <= 0)
                        return false;
                len += (size_t)n;
                if (len >= 4 && memmem(buf, len, "\r\n\r\n", 4))
                        return true;
        }
        return false;
}

static void *serve(void *ud)
{
        struct server *s = ud;
        while (s->next < s->n_replies) {
                int fd = accept(s->lfd, NULL, NULL);
                if (fd < 0)
                        break;
                s->connections++;
                while (s->next < s->n_replies && read_request(fd)) {
                        const struct reply *r = &s->replies[s->next++];
                        assert_int_equal(write(fd, r->text, strlen(r->text)), (ssize_t)strlen(r->text));
                        if (r->after == CLOSE)
                                break;
                        if (r->after == HANG) {
                                struct pollfd p = { .fd = s->wake[0], .events = POLLIN };
                                char c;
                                if (poll(&p, 1, 10000) == 1 && read(s->wake[0], &c, 1) != 1)
                                        break;
                                break;
                        }
                }
                close(fd);
        }
        return NULL;
}

static void server_start(struct server *s, const struct reply *replies, size_t n)
{
        *s = (struct server){ .replies = replies, .n_replies = n };
        s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sin);
        assert_int_equal(bind(s->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
        assert_int_equal(listen(s->lfd, 8), 0);
        assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&sin, &sl), 0);
        s->port = ntohs(sin.sin_port);
        assert_int_equal(pipe2(s->wake, O_CLOEXEC), 0);
        pthread_create(&s->thread, NULL, serve, s);
}

static void server_stop(struct server *s)
{
        assert_int_equal(write(s->wake[1], "x", 1), 1);
        shutdown(s->lfd, SHUT_RDWR);
        pthread_join(s->thread, NULL);
        close(s->lfd);
        close(s->wake[0]);
        close(s->wake[1]);
}

static struct kapi_client *client_for(const struct server *s)
{
        struct kapi_config *cfg = xcalloc(1, sizeof(*cfg));
        cfg->server = xasprintf("http://127.0.0.1:%d/prefix/", s->port);
        struct kapi_client *k = NULL;
        struct diag d = { 0 };
        assert_int_equal(kapi_client_new(cfg, &k, &d), 0);
        return k;
}

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#define OK_JSON "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{\"a\": 1}"

static int get(struct kapi_client *k, long timeout_ms, const atomic_bool *stop, long *status,
               struct diag *d)
{
        struct kapi_response resp = { 0 };
        int r = kapi_request(k, "GET", "/x", NULL, timeout_ms, stop, &resp, d);
        *status = resp.status;
        kapi_response_release(&resp);
        return r;
}

static void test_transport_keep_alive(void **state)
{
        static const struct reply replies[] = {
                { OK_JSON, KEEP },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n5\r\n\": 2}\r\n0\r\n\r\n", KEEP },
                /* over max_body (16 bytes here): not read to its end, so not reused */
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{\"a\": \"01234567890123456789012\"}\r\n0\r\n\r\n", KEEP },
                { OK_JSON, KEEP },
                /* Connection: close: not reused */
                { "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", KEEP },
                /* the server closes a connection the client keeps: the next
                 * call finds it gone and goes on with a new one */
                { OK_JSON, CLOSE },
                { OK_JSON, KEEP },
                /* the server takes a request on a kept connection and closes
                 * it without a word: the call is made again on a new one */
                { "", CLOSE },
                { OK_JSON, KEEP },
        };
        struct server s;
        server_start(&s, replies, ARRAY_SIZE(replies));
        struct kapi_client *k = client_for(&s);
        kapi_client_set_limits(k, &(struct kapi_limits){ .max_body = 16 });
        struct diag d = { 0 };
        long status;
        assert_int_equal(get(k, 5000, NULL, &status, &d), 0);
        assert_int_equal(get(k, 5000, NULL, &status, &d), 0);
        assert_int_equal(s.connections, 1);
        assert_int_equal(get(k, 5000, NULL, &status, &d), -EMSGSIZE);
        assert_int_equal(status, 200);
        assert_contains(d.message, "GET /x: the body is over the limit (16 bytes)");
        assert_int_equal(get(k, 5000, NULL, &status, &d), 0);
        assert_int_equal(s.connections, 2);
        assert_int_equal(get(k, 5000, NULL, &status, &d), 0);
        assert_int_equal(get(k, 5000, NULL, &status, &d), 0);
        assert_int_equal(s.connections, 3);
        usleep(50 * 1000); /* the server's close arrives */
        assert_int_equal(get(k, 5000, NULL, &status, &d), 0);
        assert_int_equal(s.connections, 4);
        assert_int_equal(get(k, 5000, NULL, &status, &d), 0);
        assert_int_equal(status, 200);
        assert_int_equal(s.connections, 5);
        kapi_client_free(k);
        server_stop(&s);
}

static void test_transport_broken_response(void **state)
{
        static const struct reply replies[] = {
                { "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", KEEP },
                { "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{}", CLOSE },
        };
        struct server s;
        server_start(&s, replies, ARRAY_SIZE(replies));
        struct kapi_client *k = client_for(&s);
        struct diag d = { 0 };
        long status;
        assert_int_equal(get(k, 5000, NULL, &status, &d), -EBADMSG);
        assert_int_equal(status, 0);
        assert_contains(d.message, "both Transfer-Encoding and Content-Length");
        assert_contains(d.message, "GET http://127.0.0.1:");
        assert_int_equal(get(k, 5000, NULL, &status, &d), -ECONNRESET);
        assert_int_equal(status, 200);
        assert_contains(d.message, "the connection closed inside the response");
        kapi_client_free(k);
        server_stop(&s);
}

struct stopper {
        atomic_bool *stop;
        unsigned after_ms;
};

static void *stop_later(void *ud)
{
        struct stopper *st = ud;
        usleep(st->after_ms * 1000);
        atomic_store(st->stop, true);
        return NULL;
}

static void test_transport_stop_and_low_speed(void **state)
{
        static const struct reply replies[] = {
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HANG },
                { "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{", HANG },
                { "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{", HANG },
        };
        struct server s;
        server_start(&s, replies, ARRAY_SIZE(replies));
        struct kapi_client *k = client_for(&s);
        struct diag d = { 0 };
        long status;

        /* the stop flag, set while the server says nothing: seen within 100 ms */
        atomic_bool stop = false;
        struct stopper st = { &stop, 300 };
        pthread_t t;
        pthread_create(&t, NULL, stop_later, &st);
        uint64_t start = mono_ms();
        assert_int_equal(get(k, 0, &stop, &status, &d), -ECANCELED);
        uint64_t took = mono_ms() - start;
        pthread_join(t, NULL);
        assert_true(took >= 300 && took < 300 + 350);
        assert_int_equal(status, 200);
        assert_int_equal(write(s.wake[1], "x", 1), 1);

        /* the low-speed cut */
        kapi_client_set_limits(k, &(struct kapi_limits){ .low_speed_ms = 300 });
        start = mono_ms();
        assert_int_equal(get(k, 0, NULL, &status, &d), -ETIMEDOUT);
        took = mono_ms() - start;
        assert_true(took >= 300 && took < 300 + 350);
        assert_contains(d.message, "no byte moved for 300 ms");
        assert_int_equal(write(s.wake[1], "x", 1), 1);

        /* the whole call's bound */
        kapi_client_set_limits(k, &(struct kapi_limits){ 0 });
        start = mono_ms();
        assert_int_equal(get(k, 200, NULL, &status, &d), -ETIMEDOUT);
        took = mono_ms() - start;
        assert_true(took >= 200 && took < 200 + 350);
        assert_contains(d.message, "timed out after 200 ms");
        kapi_client_free(k);
        server_stop(&s);
}

/* ---- TLS that cannot be loaded ---- */

static void test_tls_not_loadable(void **state)
{
        /* in a child: the load happens once per process */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv(KAPI_TLS_LIB_ENV, "/nonexistent/libssl.so.3", 1);
                struct kapi_config *cfg = xcalloc(1, sizeof(*cfg));
                cfg->server = xstrdup("https://127.0.0.1:6443");
                struct kapi_client *k = NULL;
                struct diag d = { 0 };
                int r = kapi_client_new(cfg, &k, &d);
                _exit(r == -ELIBACC && !k &&
                                      strstr(d.message, "TLS: cannot load /nonexistent/libssl.so.3: ")
                              ? 0
                              : 1);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

        /* plain http needs no TLS at all */
        struct kapi_config *cfg = xcalloc(1, sizeof(*cfg));
        cfg->server = xstrdup("http://[::1]:8080/a");
        struct kapi_client *k = NULL;
        assert_int_equal(kapi_client_new(cfg, &k, NULL), 0);
        kapi_client_free(k);
        /* URLs that are not one server's */
        static const char *const bad[] = { "http://", "http://a@b", "http://h:0", "http://h:65536",
                                           "http://h:1x", "http://[::1", "http://[zz]:1",
                                           "http://h/a?b", "http://h#x", "http://h h" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                cfg = xcalloc(1, sizeof(*cfg));
                cfg->server = xstrdup(bad[i]);
                if (kapi_client_new(cfg, &k, NULL) != -EINVAL)
                        fail_msg("%s accepted", bad[i]);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_content_length),
                cmocka_unit_test(test_parse_chunked),
                cmocka_unit_test(test_parse_retry_after),
                cmocka_unit_test(test_parse_until_close_and_bodiless),
                cmocka_unit_test(test_parse_refusals),
                cmocka_unit_test(test_parse_limits),
                cmocka_unit_test(test_parser_started),
                cmocka_unit_test(test_lines),
                cmocka_unit_test(test_transport_keep_alive),
                cmocka_unit_test(test_transport_broken_response),
                cmocka_unit_test(test_transport_stop_and_low_speed),
                cmocka_unit_test(test_tls_not_loadable),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
