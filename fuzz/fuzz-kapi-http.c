/* libFuzzer target for what the API client reads from a server: the HTTP
 * response parser (kapi/http-parser.c) and the watch's line splitter
 * (kapi_lines_*).  The first input byte picks a piece size (1..64) and a
 * line limit; the rest is the server's bytes.  Checks (abort otherwise):
 * every step takes bytes within what it was given and a body step points
 * at the last bytes taken; MORE takes all; the outcome (error and reason,
 * status, framing, body bytes, where the response ends) is the same fed
 * whole and fed in pieces; a body framed by Content-Length never exceeds
 * it; after END nothing more is taken; the splitter hands on exactly the
 * lines between the '\n's, none longer than its limit, and refuses
 * exactly at the first line that is.  Seeds (fuzz/corpus/fuzz-kapi-http/):
 * each framing, interim heads, trailers, watch streams, refusals. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kapi/http-parser.h"
#include "kapi/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "kapi-http: %s\n", what);
                abort();
        }
}

struct result {
        int r;
        const char *why;
        bool head, end;
        int status;
        bool keep_alive, has_length, chunked;
        uint64_t length;
        uint64_t body_len, body_hash;
        size_t taken;
};

static struct kapi_http_parser parser;

static struct result parse(const char *in, size_t n, size_t piece)
{
        struct result res = { .body_hash = 1469598103934665603u };
        kapi_http_parser_init(&parser);
        size_t at = 0;
        while (!res.r && !res.end) {
                size_t len = n - at < piece ? n - at : piece;
                const char *buf = in + at;
                size_t off = 0;
                for (;;) {
                        struct kapi_http_step st;
                        int r = kapi_http_parse(&parser, buf + off, len - off, &st);
                        if (r < 0) {
                                check(r == -EBADMSG && parser.why, "an error without its reason");
                                res.r = r;
                                res.why = parser.why;
                                break;
                        }
                        check(st.taken <= len - off, "took more than it was given");
                        off += st.taken;
                        if (st.event == KAPI_HTTP_MORE) {
                                check(off == len, "MORE without taking all");
                                break;
                        }
                        if (st.event == KAPI_HTTP_END) {
                                res.end = true;
                                res.keep_alive = parser.keep_alive;
                                struct kapi_http_step again;
                                check(kapi_http_parse(&parser, buf + off, len - off, &again) == 0 &&
                                              again.event == KAPI_HTTP_END && again.taken == 0,
                                      "END not final");
                                break;
                        }
                        if (st.event == KAPI_HTTP_HEAD) {
                                check(!res.head, "two final heads");
                                check(parser.status >= 200 && parser.status <= 599, "a bad status");
                                check(!(parser.has_length && parser.chunked), "two framings");
                                res.head = true;
                                res.status = parser.status;
                                res.has_length = parser.has_length;
                                res.chunked = parser.chunked;
                                res.length = parser.length;
                                continue;
                        }
                        check(res.head, "body before the head");
                        check(st.len > 0 && st.data + st.len == buf + off, "body outside the step");
                        res.body_len += st.len;
                        check(!res.has_length || res.body_len <= res.length,
                              "more body than its Content-Length");
                        for (size_t i = 0; i < st.len; i++)
                                res.body_hash = (res.body_hash ^ (uint8_t)st.data[i]) * 1099511628211u;
                }
                at += off;
                if (at == n || res.r)
                        break;
        }
        res.taken = at;
        if (!res.r && !res.end) {
                int r = kapi_http_parse_eof(&parser);
                check(r == 0 || r == -ECONNRESET, "an unknown end");
                if (r == 0) {
                        res.end = true;
                        check(!parser.keep_alive, "kept alive after a body until close");
                } else {
                        res.r = r;
                        res.why = parser.why;
                }
        }
        check(!res.has_length || !res.end || res.body_len == res.length,
              "ended short of its Content-Length");
        return res;
}

struct lines_seen {
        const char *in;
        size_t pos; /* where the next line starts in in */
        size_t max;
        unsigned count;
};

static int on_line(void *ud, const char *line, size_t len)
{
        struct lines_seen *s = ud;
        check(len <= s->max, "a line over the limit handed on");
        check(!memchr(line, '\n', len), "a line with its LF");
        check(memcmp(line, s->in + s->pos, len) == 0, "a line that is not the input's");
        s->pos += len + 1;
        s->count++;
        return 0;
}

static void split_lines(const char *in, size_t n, size_t piece, size_t max)
{
        struct kapi_lines l = { .max = max };
        struct lines_seen s = { .in = in, .max = max };
        int r = 0;
        for (size_t at = 0; at < n && r == 0; at += piece)
                r = kapi_lines_feed(&l, in + at, n - at < piece ? n - at : piece, on_line, &s);
        check(r == 0 || r == -EMSGSIZE, "an unknown refusal");
        check(l.count == s.count, "count is not the lines handed on");
        /* the reference: the line after the last one handed on */
        const char *nl = s.pos <= n ? memchr(in + s.pos, '\n', n - s.pos) : NULL;
        size_t next = (size_t)((nl ? nl : in + n) - (in + s.pos));
        if (r == -EMSGSIZE) {
                check(next > max, "refused a line within the limit");
        } else {
                check(!nl, "a whole line not handed on");
                check(next <= max, "kept a line over the limit");
                check(l.len == next, "kept other than the last line");
                check(kapi_lines_finish(&l, on_line, &s) == 0, "finish failed");
                check(next == 0 || s.pos == n + 1, "the last line not handed on");
        }
        kapi_lines_release(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t piece = (size_t)(data[0] & 63) + 1;
        size_t max = (size_t)(data[0] >> 2) + 1;
        size_t n = size - 1;
        /* a copy of the exact size, so ASan sees any read past it */
        char *in = malloc(n ? n : 1);
        if (!in)
                return 0;
        memcpy(in, data + 1, n);

        struct result whole = parse(in, n, n ? n : 1);
        struct result split = parse(in, n, piece);
        check(whole.r == split.r, "whole and split differ: error");
        check(whole.why == split.why, "whole and split differ: reason");
        check(whole.head == split.head && whole.status == split.status &&
                      whole.has_length == split.has_length && whole.chunked == split.chunked,
              "whole and split differ: head");
        check(whole.end == split.end && whole.keep_alive == split.keep_alive,
              "whole and split differ: end");
        check(whole.body_len == split.body_len && whole.body_hash == split.body_hash,
              "whole and split differ: body");
        check(!whole.end || whole.r || whole.taken == split.taken, "whole and split differ: length");

        split_lines(in, n, piece, max);
        free(in);
        return 0;
}
