/* Unit tests for src/grpc/h2-request.c: the server's own HTTP/2 request
 * checks against libnghttp2's (HTTP messaging on), request by request.
 *
 * Each case is one connection's bytes: the preface, SETTINGS, a request's
 * HEADERS, maybe DATA and trailers.  They go to two server sessions: stock
 * nghttp2, and nghttp2 with its checks off plus h2-request.c called from the
 * callbacks as call.c calls it.  Both must reset the same streams with the
 * same code, and hand the same fields, bytes and stream end to the
 * application where they do not.  The one intended difference, :authority
 * and host values that are not URI authority syntax, has tests of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "grpc/h2-request.h"

#define NO_RST UINT32_MAX

struct side {
        bool ours;
        struct h2_request req;
        uint8_t fields[8192]; /* name NUL value NUL, each field delivered */
        size_t fields_len;
        size_t data;     /* DATA payload bytes delivered */
        unsigned frames; /* HEADERS and DATA frames delivered */
        bool ended;      /* a delivered frame ended the stream */
        ssize_t recv_rv; /* nghttp2_session_mem_recv */
        uint32_t rst;    /* the first RST_STREAM's code for stream 1 */
};

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
        struct side *s = ud;
        if (s->ours && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
                h2_request_init(&s->req);
        return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
        struct side *s = ud;
        if (s->ours) {
                int r = h2_request_on_header(session, frame, &s->req, name, namelen, value,
                                             valuelen);
                if (r != 0)
                        return r == H2_REQUEST_DROP ? 0 : r;
        }
        assert_true(s->fields_len + namelen + valuelen + 2 <= sizeof(s->fields));
        memcpy(s->fields + s->fields_len, name, namelen + 1);
        s->fields_len += namelen + 1;
        memcpy(s->fields + s->fields_len, value, valuelen + 1);
        s->fields_len += valuelen + 1;
        return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
        struct side *s = ud;
        if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
                return 0;
        if (s->ours && !h2_request_on_frame_recv(session, frame, &s->req))
                return 0;
        s->frames++;
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
                s->ended = true;
        return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *ud)
{
        struct side *s = ud;
        if (s->ours && !h2_request_on_data_chunk(session, stream_id, &s->req, len))
                return 0;
        s->data += len;
        return 0;
}

static void side_run(struct side *s, bool ours, const uint8_t *in, size_t len)
{
        memset(s, 0, sizeof(*s));
        s->ours = ours;
        s->rst = NO_RST;
        nghttp2_session_callbacks *cbs;
        assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session *session;
        if (ours)
                assert_int_equal(h2_request_session_new(&session, cbs, s), 0);
        else
                assert_int_equal(nghttp2_session_server_new(&session, cbs, s), 0);
        nghttp2_session_callbacks_del(cbs);

        s->recv_rv = nghttp2_session_mem_recv(session, in, len);
        const uint8_t *out;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(session, &out)) > 0) {
                for (ssize_t off = 0; off + 9 <= n;) {
                        const uint8_t *f = out + off;
                        size_t flen = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
                        uint32_t sid = ((uint32_t)f[5] << 24 | (uint32_t)f[6] << 16 |
                                        (uint32_t)f[7] << 8 | f[8]) & 0x7fffffff;
                        if (f[3] == NGHTTP2_RST_STREAM && sid == 1 && s->rst == NO_RST &&
                            flen == 4)
                                s->rst = (uint32_t)f[9] << 24 | (uint32_t)f[10] << 16 |
                                         (uint32_t)f[11] << 8 | f[12];
                        off += 9 + (ssize_t)flen;
                }
        }
        assert_true(n == 0);
        nghttp2_session_del(session);
}

/* ---- building a connection's bytes ---- */

struct field {
        const char *name, *value;
        size_t namelen, valuelen;
};

/* string literals may hold NUL bytes */
#define F(n, v) { (n), (v), sizeof(n) - 1, sizeof(v) - 1 }

struct bytes {
        uint8_t d[8192];
        size_t n;
};

/* the case being built, for failure messages */
static char case_text[4096];

static void describe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void describe(const char *fmt, ...)
{
        size_t used = strlen(case_text);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(case_text + used, sizeof(case_text) - used, fmt, ap);
        va_end(ap);
}

static void describe_field(const struct field *f)
{
        describe(" ");
        for (size_t k = 0; k < f->namelen + f->valuelen + 1; k++) {
                unsigned char c = k < f->namelen ? (unsigned char)f->name[k]
                                  : k == f->namelen ? ':'
                                                    : (unsigned char)f->value[k - f->namelen - 1];
                describe(c > 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
        }
}

static void put(struct bytes *b, const void *p, size_t n)
{
        assert_true(b->n + n <= sizeof(b->d));
        if (n > 0)
                memcpy(b->d + b->n, p, n);
        b->n += n;
}

static void put_frame(struct bytes *b, uint8_t type, uint8_t flags, const uint8_t *payload,
                      size_t len)
{
        uint8_t hd[9] = { (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags,
                          0, 0, 0, type == NGHTTP2_SETTINGS ? 0 : 1 };
        put(b, hd, 9);
        put(b, payload, len);
}

/* HPACK literal fields without indexing, no Huffman (short strings only) */
static void put_headers(struct bytes *b, const struct field *f, size_t n, bool end_stream)
{
        struct bytes block = { .n = 0 };
        describe(" HEADERS%s [", end_stream ? "+END" : "");
        for (size_t i = 0; i < n; i++)
                describe_field(&f[i]);
        describe(" ]");
        for (size_t i = 0; i < n; i++) {
                assert_true(f[i].namelen < 127 && f[i].valuelen < 127);
                uint8_t z = 0, nl = (uint8_t)f[i].namelen, vl = (uint8_t)f[i].valuelen;
                put(&block, &z, 1);
                put(&block, &nl, 1);
                put(&block, f[i].name, f[i].namelen);
                put(&block, &vl, 1);
                put(&block, f[i].value, f[i].valuelen);
        }
        put_frame(b, NGHTTP2_HEADERS,
                  NGHTTP2_FLAG_END_HEADERS | (end_stream ? NGHTTP2_FLAG_END_STREAM : 0), block.d,
                  block.n);
}

static void put_start(struct bytes *b)
{
        case_text[0] = '\0';
        b->n = 0;
        put(b, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
        put_frame(b, NGHTTP2_SETTINGS, 0, NULL, 0);
}

static void put_data(struct bytes *b, size_t len, bool end_stream)
{
        static const uint8_t zeros[64];
        assert_true(len <= sizeof(zeros));
        describe(" DATA%s(%zu)", end_stream ? "+END" : "", len);
        put_frame(b, NGHTTP2_DATA, end_stream ? NGHTTP2_FLAG_END_STREAM : 0, zeros, len);
}

static const struct field base_request[] = {
        F(":method", "POST"),
        F(":scheme", "http"),
        F(":path", "/test.Echo/Unary"),
        F(":authority", "localhost"),
        F("content-type", "application/grpc"),
        F("te", "trailers"),
};
#define BASE_N (sizeof(base_request) / sizeof(base_request[0]))

/* Fields on whose verdict stock nghttp2 and ours must agree: no :authority or
 * host value that only nghttp2_check_authority refuses. */
static const struct field vocabulary[] = {
        F(":method", "POST"), F(":method", "GET"), F(":method", "CONNECT"),
        F(":method", "OPTIONS"), F(":method", "HEAD"), F(":method", ""),
        F(":method", "PO ST"), F(":method", "P\x01"), F(":method", "post"),
        F(":scheme", "http"), F(":scheme", "https"), F(":scheme", "HTTPS"), F(":scheme", ""),
        F(":scheme", "1x"), F(":scheme", "a+b-c.d"), F(":scheme", "ht tp"),
        F(":scheme", "grpc"),
        F(":path", "/test.Echo/Unary"), F(":path", "*"), F(":path", ""), F(":path", "x"),
        F(":path", "/a b"), F(":path", "/\x7f"), F(":path", "/a?b#c"), F(":path", " /a"),
        F(":authority", "localhost"), F(":authority", "a:1"), F(":authority", "[::1]:8080"),
        F(":authority", ""), F(":authority", " x"), F(":authority", "x\x01"),
        F(":authority", "user@host"), F(":authority", "%41"), F(":authority", "x\t"),
        F(":protocol", "websocket"), F(":status", "200"), F(":foo", "bar"), F(":", "x"),
        F(":Method", "POST"), F(":me thod", "POST"),
        F("content-type", "application/grpc"), F("content-type", "text/plain"),
        F("content-type", " application/grpc"), F("content-type", "application/grpc "),
        F("content-type", "a\x01" "b"), F("content-type", "a\0b"), F("content-type", ""),
        F("te", "trailers"), F("te", "TRAILERS"), F("te", "gzip"), F("te", ""),
        F("te", " trailers"),
        F("content-length", "0"), F("content-length", "3"), F("content-length", "5"),
        F("content-length", "abc"), F("content-length", ""), F("content-length", "-1"),
        F("content-length", "99999999999999999999"), F("content-length", "9223372036854775807"),
        F("content-length", "1 "), F("content-length", "+1"),
        F("connection", "close"), F("keep-alive", "5"), F("proxy-connection", "x"),
        F("transfer-encoding", "chunked"), F("upgrade", "h2c"),
        F("host", "localhost"), F("host", ""), F("host", "a:1"), F("host", " x"),
        F("user-agent", "grpc-c"), F("X-Upper", "v"), F("x-UPPER", "v"), F("bad name", "v"),
        F("", "v"), F("a\0b", "v"), F("x", "a\0b"), F("x", "\t"), F("x", "a\tb"), F("x", ""),
        F("grpc-timeout", "1S"), F("priority", "u=1"), F("x\x7f", "v"), F("\xc3\xa9", "v"),
        F("x", "\xc3\xa9"), F("x", "a\r\nb"),
};
#define VOCAB_N (sizeof(vocabulary) / sizeof(vocabulary[0]))

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static unsigned rnd(unsigned n)
{
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return (unsigned)(rng_state % n);
}

/* A request: the base one mutated, or fields drawn at random. */
static size_t random_fields(struct field *out, size_t cap)
{
        size_t n = 0;
        if (rnd(3) > 0) {
                memcpy(out, base_request, sizeof(base_request));
                n = BASE_N;
                for (unsigned k = rnd(4); k > 0; k--) {
                        unsigned op = rnd(4), i = n ? rnd((unsigned)n) : 0;
                        if (op == 0 && n < cap) { /* insert */
                                memmove(out + i + 1, out + i, (n - i) * sizeof(*out));
                                out[i] = vocabulary[rnd(VOCAB_N)];
                                n++;
                        } else if (op == 1 && n > 0) { /* delete */
                                memmove(out + i, out + i + 1, (n - i - 1) * sizeof(*out));
                                n--;
                        } else if (op == 2 && n > 1 && i + 1 < n) { /* swap */
                                struct field t = out[i];
                                out[i] = out[i + 1];
                                out[i + 1] = t;
                        } else if (n > 0 && n < cap) { /* duplicate */
                                out[n++] = out[i];
                        }
                }
                return n;
        }
        for (unsigned k = rnd(9); k > 0 && n < cap; k--)
                out[n++] = vocabulary[rnd(VOCAB_N)];
        return n;
}

static void random_case(struct bytes *b)
{
        static const size_t data_lens[] = { 0, 1, 3, 5, 7 };
        struct field f[16];
        put_start(b);
        bool end = rnd(4) == 0;
        put_headers(b, f, random_fields(f, 16), end);
        for (unsigned k = rnd(3); k > 0 && !end; k--) {
                end = k == 1 && rnd(2) == 0;
                put_data(b, data_lens[rnd(5)], end);
        }
        if (!end && rnd(2) == 0) {
                size_t n = 0;
                for (unsigned k = rnd(4); k > 0; k--)
                        f[n++] = rnd(3) == 0 ? vocabulary[rnd(VOCAB_N)]
                                             : (struct field)F("grpc-status", "0");
                put_headers(b, f, n, rnd(4) != 0);
        }
}

static void assert_same(const struct side *stock, const struct side *ours, unsigned i)
{
        if (stock->recv_rv == ours->recv_rv && stock->rst == ours->rst &&
            (stock->rst != NO_RST ||
             (stock->fields_len == ours->fields_len &&
              memcmp(stock->fields, ours->fields, stock->fields_len) == 0 &&
              stock->data == ours->data && stock->frames == ours->frames &&
              stock->ended == ours->ended)))
                return;
        print_error("case %u: stock rv=%zd rst=%u fields=%zu data=%zu frames=%u ended=%d, "
                    "ours rv=%zd rst=%u fields=%zu data=%zu frames=%u ended=%d\n%s\n",
                    i, stock->recv_rv, stock->rst, stock->fields_len, stock->data, stock->frames,
                    stock->ended, ours->recv_rv, ours->rst, ours->fields_len, ours->data,
                    ours->frames, ours->ended, case_text);
        fail();
}

static void test_same_verdicts_as_nghttp2(void **state)
{
        struct bytes b;
        struct side stock, ours;
        unsigned reset = 0, delivered = 0;
        for (unsigned i = 0; i < 20000; i++) {
                random_case(&b);
                side_run(&stock, false, b.d, b.n);
                side_run(&ours, true, b.d, b.n);
                assert_same(&stock, &ours, i);
                if (stock.rst == NGHTTP2_PROTOCOL_ERROR)
                        reset++;
                else if (stock.ended)
                        delivered++;
        }
        /* both outcomes are well represented */
        assert_true(reset > 4000);
        assert_true(delivered > 2000);
}

/* ---- the intended difference, and named cases ---- */

static void run_both(const struct field *f, size_t n, bool end, struct side *stock,
                     struct side *ours)
{
        struct bytes b;
        put_start(&b);
        put_headers(&b, f, n, end);
        side_run(stock, false, b.d, b.n);
        side_run(ours, true, b.d, b.n);
}

static bool delivered(const struct side *s, const char *name, const char *value)
{
        size_t nl = strlen(name) + 1, vl = strlen(value) + 1;
        for (size_t off = 0; off < s->fields_len;) {
                size_t a = strlen((const char *)s->fields + off) + 1;
                size_t c = strlen((const char *)s->fields + off + a) + 1;
                if (a == nl && c == vl && memcmp(s->fields + off, name, nl) == 0 &&
                    memcmp(s->fields + off + a, value, vl) == 0)
                        return true;
                off += a + c;
        }
        return false;
}

#define SOCKET_PATH "/var/lib/kubelet/device-plugins/devlet-devlet.io_fuse.sock"

static void test_authority_socket_path(void **state)
{
        /* what kubelets before v1.26 send */
        struct field f[BASE_N];
        memcpy(f, base_request, sizeof(f));
        f[3] = (struct field)F(":authority", SOCKET_PATH);
        struct side stock, ours;
        run_both(f, BASE_N, true, &stock, &ours);
        assert_int_equal(stock.rst, NGHTTP2_PROTOCOL_ERROR); /* why h2-request.c exists */
        assert_int_equal(ours.rst, NO_RST);
        assert_true(ours.ended);
        assert_true(delivered(&ours, ":authority", SOCKET_PATH));
        assert_true(delivered(&ours, ":path", "/test.Echo/Unary"));
}

static void test_authority_any_field_value(void **state)
{
        static const char *const accepted[] = { "x y", "a/b", "unix:///run/x.sock", "\xc3\xa9",
                                                "a\"b{}|^`" };
        static const char *const refused[] = { "x\x01", "a\x7f", " x", "x ", "x\t" };
        struct field f[BASE_N];
        struct side stock, ours;
        memcpy(f, base_request, sizeof(f));
        for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
                f[3] = (struct field){ ":authority", accepted[i], 10, strlen(accepted[i]) };
                run_both(f, BASE_N, true, &stock, &ours);
                assert_int_equal(ours.rst, NO_RST);
                assert_true(ours.ended && delivered(&ours, ":authority", accepted[i]));
        }
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                f[3] = (struct field){ ":authority", refused[i], 10, strlen(refused[i]) };
                run_both(f, BASE_N, true, &stock, &ours);
                assert_int_equal(stock.rst, NGHTTP2_PROTOCOL_ERROR);
                assert_int_equal(ours.rst, NGHTTP2_PROTOCOL_ERROR);
        }
}

static void test_host_socket_path(void **state)
{
        /* host instead of :authority: nghttp2 drops the field, and then the
         * request has no authority at all */
        struct field f[BASE_N];
        memcpy(f, base_request, sizeof(f));
        memmove(f + 3, f + 4, 2 * sizeof(*f));
        f[5] = (struct field)F("host", SOCKET_PATH);
        struct side stock, ours;
        run_both(f, BASE_N, true, &stock, &ours);
        assert_int_equal(stock.rst, NGHTTP2_PROTOCOL_ERROR);
        assert_int_equal(ours.rst, NO_RST);
        assert_true(ours.ended && delivered(&ours, "host", SOCKET_PATH));
}

/* Requests malformed in one way each: both reset them. */
static void test_malformed_requests_are_reset(void **state)
{
        static const struct {
                struct field f;
                int at; /* replaces base_request[at]; -1: appended */
        } cases[] = {
                { F("connection", "close"), -1 },
                { F("transfer-encoding", "chunked"), -1 },
                { F("upgrade", "h2c"), -1 },
                { F("Content-Type", "application/grpc"), 4 },
                { F("te", "gzip"), 5 },
                { F(":path", "/test.Echo/Unary"), -1 },     /* twice, and after a regular field */
                { F(":authority", "localhost"), -1 },       /* the same */
                { F("content-type", "application/grpc"), 0 }, /* no :method */
                { F("te", "trailers"), 1 },                 /* no :scheme */
                { F(":path", "test.Echo/Unary"), 2 },       /* not absolute */
                { F(":scheme", "h ttp"), 1 },
                { F(":method", "PO\x01ST"), 0 },
                { F(":foo", "bar"), 4 },
                { F(":protocol", "websocket"), 4 },
                { F("content-length", "x"), -1 },
                { F("content-length", "3"), -1 }, /* but END_STREAM with no DATA */
                { F("x-note", "a\x01" "b"), -1 },
                { F("x-note", " a"), -1 },
                { F("x note", "a"), -1 },
        };
        struct field f[BASE_N + 1];
        struct side stock, ours;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                memcpy(f, base_request, sizeof(base_request));
                size_t n = BASE_N;
                if (cases[i].at < 0)
                        f[n++] = cases[i].f;
                else
                        f[cases[i].at] = cases[i].f;
                run_both(f, n, true, &stock, &ours);
                if (stock.rst != NGHTTP2_PROTOCOL_ERROR || ours.rst != NGHTTP2_PROTOCOL_ERROR) {
                        print_error("case %zu (%s): stock rst=%u ours rst=%u\n", i,
                                    cases[i].f.name, stock.rst, ours.rst);
                        fail();
                }
                assert_false(ours.ended);
        }
}

static void test_data_and_trailers(void **state)
{
        struct bytes b;
        struct side stock, ours;
        struct field f[BASE_N + 1];
        memcpy(f, base_request, sizeof(base_request));
        f[BASE_N] = (struct field)F("content-length", "5");

        /* more DATA than content-length: reset, the excess never delivered */
        put_start(&b);
        put_headers(&b, f, BASE_N + 1, false);
        put_data(&b, 3, false);
        put_data(&b, 3, true);
        side_run(&ours, true, b.d, b.n);
        assert_int_equal(ours.rst, NGHTTP2_PROTOCOL_ERROR);
        assert_int_equal(ours.data, 3);
        assert_false(ours.ended);

        /* exactly content-length, then trailers that end the stream */
        struct field trailer = F("grpc-status", "0");
        put_start(&b);
        put_headers(&b, f, BASE_N + 1, false);
        put_data(&b, 5, false);
        put_headers(&b, &trailer, 1, true);
        side_run(&ours, true, b.d, b.n);
        assert_int_equal(ours.rst, NO_RST);
        assert_true(ours.ended);
        assert_int_equal(ours.data, 5);

        /* a pseudo-header in trailers, and trailers that do not end it */
        struct field pseudo = F(":path", "/x");
        for (int k = 0; k < 2; k++) {
                put_start(&b);
                put_headers(&b, f, BASE_N, false);
                put_data(&b, 5, false);
                put_headers(&b, k == 0 ? &pseudo : &trailer, 1, k == 0);
                side_run(&stock, false, b.d, b.n);
                side_run(&ours, true, b.d, b.n);
                assert_int_equal(stock.rst, NGHTTP2_PROTOCOL_ERROR);
                assert_int_equal(ours.rst, NGHTTP2_PROTOCOL_ERROR);
                assert_false(ours.ended);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_same_verdicts_as_nghttp2),
                cmocka_unit_test(test_authority_socket_path),
                cmocka_unit_test(test_authority_any_field_value),
                cmocka_unit_test(test_host_socket_path),
                cmocka_unit_test(test_malformed_requests_are_reset),
                cmocka_unit_test(test_data_and_trailers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
