/* The response parser (see http-parser.h): a state machine over lines and
 * counted spans.  Lines (the status line, field lines, chunk sizes,
 * trailers) are gathered in the parser's own buffer, so a line may arrive
 * split at any byte; body bytes are never copied, each step points into
 * the caller's buffer.  Every line is checked in full before any field is
 * given a meaning, so a field this parser skips can never be one another
 * parser acts on.  Pure; never allocates, never logs. */
#include "kapi/http-parser.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "base/ascii.h"

enum {
        S_STATUS,
        S_FIELDS,
        S_LENGTH,     /* a Content-Length body */
        S_CLOSE,      /* a body until the connection closes */
        S_CHUNK_SIZE,
        S_CHUNK_DATA,
        S_CHUNK_END,  /* the line end after a chunk's data */
        S_TRAILERS,
        S_END,
        S_ERROR,
};

void kapi_http_parser_init(struct kapi_http_parser *p)
{
        /* the line buffer needs no clearing */
        memset(p, 0, offsetof(struct kapi_http_parser, line));
        p->state = S_STATUS;
}

bool kapi_http_parser_started(const struct kapi_http_parser *p)
{
        return p->state != S_STATUS || p->line_len > 0 || p->head_bytes > 0;
}

static int refuse(struct kapi_http_parser *p, const char *why)
{
        p->why = why;
        p->state = S_ERROR;
        p->keep_alive = false;
        return -EBADMSG;
}

static bool is_tchar(unsigned char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* field-vchar, obs-text, SP or HTAB (RFC 9110 5.5) */
static bool is_field_byte(unsigned char ch)
{
        return ch == '\t' || (ch >= ' ' && ch != 0x7f);
}

static bool is_ows(char ch)
{
        return ch == ' ' || ch == '\t';
}

/* Gathers bytes from buf[*i] into p->line up to a LF.  Returns 1 with the
 * line in p->line[0, *n) (its CRLF or LF left off; p->line_len back to 0),
 * 0 when buf ran out first, or -EBADMSG.  in_head: the bytes count
 * towards KAPI_HTTP_HEAD_MAX. */
static int take_line(struct kapi_http_parser *p, const char *buf, size_t len, size_t *i,
                     bool in_head, size_t *n)
{
        const char *nl = memchr(buf + *i, '\n', len - *i);
        size_t k = (size_t)((nl ? nl : buf + len) - (buf + *i));
        if (k > KAPI_HTTP_LINE_MAX - p->line_len)
                return refuse(p, "a line of the response is over 8 KiB");
        if (in_head) {
                if (k + 1 > KAPI_HTTP_HEAD_MAX - p->head_bytes)
                        return refuse(p, "the response's head is over 64 KiB");
                p->head_bytes += k + (nl ? 1 : 0);
        }
        memcpy(p->line + p->line_len, buf + *i, k);
        p->line_len += k;
        *i += k;
        if (!nl)
                return 0;
        *i += 1;
        size_t l = p->line_len;
        p->line_len = 0;
        if (l > 0 && p->line[l - 1] == '\r')
                l--;
        if (memchr(p->line, '\r', l))
                return refuse(p, "a CR that does not end a line");
        if (memchr(p->line, '\0', l))
                return refuse(p, "a NUL byte in a line");
        *n = l;
        return 1;
}

static int status_line(struct kapi_http_parser *p, const char *l, size_t n)
{
        if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || l[7] < '0' || l[7] > '9' || l[8] != ' ')
                return refuse(p, "not an HTTP/1.x status line");
        int status = 0;
        for (size_t i = 9; i < 12; i++) {
                if (l[i] < '0' || l[i] > '9')
                        return refuse(p, "a status code that is not 3 digits");
                status = status * 10 + (l[i] - '0');
        }
        if (status < 100 || status > 599)
                return refuse(p, "a status code outside 100-599");
        if (n > 12 && l[12] != ' ')
                return refuse(p, "a status code that is not 3 digits");
        for (size_t i = 13; i < n; i++)
                if (!is_field_byte((unsigned char)l[i]))
                        return refuse(p, "a control byte in the reason phrase");
        p->status = status;
        p->v11 = l[7] != '0';
        return 0;
}

/* Content-Length: 1 to 19 digits (no sign, no list, no overflow). */
static bool parse_length(const char *v, size_t n, uint64_t *out)
{
        if (n == 0 || n > 19)
                return false;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return false;
                x = x * 10 + (uint64_t)(v[i] - '0');
        }
        *out = x;
        return true;
}

/* Walks a comma-separated list: each element, trimmed, to fn; empty
 * elements are skipped (RFC 9110 5.6.1).  Stops at fn's first nonzero. */
static int each_element(struct kapi_http_parser *p, const char *v, size_t n,
                        int (*fn)(struct kapi_http_parser *p, const char *e, size_t len))
{
        for (size_t i = 0; i < n;) {
                size_t s = i;
                while (i < n && v[i] != ',')
                        i++;
                size_t e = i++;
                while (s < e && is_ows(v[s]))
                        s++;
                while (e > s && is_ows(v[e - 1]))
                        e--;
                if (e > s) {
                        int r = fn(p, v + s, e - s);
                        if (r)
                                return r;
                }
        }
        return 0;
}

static bool token_is(const char *e, size_t n, const char *lit)
{
        return n == strlen(lit) && strncasecmp(e, lit, n) == 0;
}

static int transfer_coding(struct kapi_http_parser *p, const char *e, size_t n)
{
        if (!token_is(e, n, "chunked"))
                return refuse(p, "a Transfer-Encoding other than chunked");
        if (p->chunked)
                return refuse(p, "Transfer-Encoding chunked twice");
        p->chunked = true;
        return 0;
}

static int connection_option(struct kapi_http_parser *p, const char *e, size_t n)
{
        if (token_is(e, n, "close"))
                p->close = true;
        return 0;
}

static int field_line(struct kapi_http_parser *p, const char *l, size_t n, bool trailer)
{
        if (is_ows(l[0]))
                return refuse(p, "a folded field line (obs-fold)");
        size_t k = 0;
        while (k < n && is_tchar((unsigned char)l[k]))
                k++;
        if (k == 0 || k == n || l[k] != ':')
                return refuse(p, "a malformed field name");
        for (size_t i = k + 1; i < n; i++)
                if (!is_field_byte((unsigned char)l[i]))
                        return refuse(p, "a control byte in a field value");
        if (++p->fields > KAPI_HTTP_FIELDS_MAX)
                return refuse(p, "too many field lines");
        if (trailer)
                return 0;
        const char *v = l + k + 1, *ve = l + n;
        while (v < ve && is_ows(*v))
                v++;
        while (ve > v && is_ows(ve[-1]))
                ve--;
        size_t vl = (size_t)(ve - v);
        if (token_is(l, k, "Content-Length")) {
                uint64_t x;
                if (!parse_length(v, vl, &x))
                        return refuse(p, "a malformed Content-Length");
                if (p->has_length && x != p->length)
                        return refuse(p, "conflicting Content-Length fields");
                p->has_length = true;
                p->length = x;
        } else if (token_is(l, k, "Transfer-Encoding")) {
                bool had = p->chunked;
                int r = each_element(p, v, vl, transfer_coding);
                if (r)
                        return r;
                if (p->chunked == had)
                        return refuse(p, "an empty Transfer-Encoding");
        } else if (token_is(l, k, "Connection")) {
                each_element(p, v, vl, connection_option);
        } else if (token_is(l, k, "Retry-After")) {
                /* delay-seconds only; an HTTP-date (the API server never
                 * sends one) or a malformed value is ignored */
                uint64_t x;
                if (parse_length(v, vl, &x))
                        p->retry_after_s = x > KAPI_HTTP_RETRY_AFTER_MAX ? KAPI_HTTP_RETRY_AFTER_MAX
                                                                         : (unsigned)x;
        }
        return 0;
}

/* The empty line that ends a head: skips an interim 1xx head, else decides
 * how the body is framed. */
static int head_done(struct kapi_http_parser *p, bool *final)
{
        *final = false;
        if (p->status < 200) {
                if (p->status == 101)
                        return refuse(p, "101 Switching Protocols, which was not asked for");
                if (++p->interim > KAPI_HTTP_INTERIM_MAX)
                        return refuse(p, "too many interim (1xx) responses");
                p->fields = 0;
                p->has_length = p->chunked = p->close = false;
                p->length = 0;
                p->retry_after_s = 0;
                p->state = S_STATUS;
                return 0;
        }
        if (p->chunked && p->has_length)
                return refuse(p, "both Transfer-Encoding and Content-Length");
        if (p->chunked && !p->v11)
                return refuse(p, "Transfer-Encoding in an HTTP/1.0 response");
        *final = true;
        if (p->status == 204 || p->status == 304) {
                p->has_length = p->chunked = false;
                p->length = 0;
                p->state = S_END;
        } else if (p->chunked) {
                p->state = S_CHUNK_SIZE;
        } else if (p->has_length) {
                p->left = p->length;
                p->state = p->left ? S_LENGTH : S_END;
        } else {
                p->until_close = true;
                p->state = S_CLOSE;
        }
        p->keep_alive = p->v11 && !p->close && !p->until_close;
        return 0;
}

static int chunk_size(struct kapi_http_parser *p, const char *l, size_t n)
{
        size_t i = 0;
        uint64_t v = 0;
        for (int d; i < n && (d = ascii_hex_value(l[i])) >= 0; i++) {
                if (i == 16)
                        return refuse(p, "a chunk size over 16 hex digits");
                v = v << 4 | (uint64_t)d;
        }
        if (i == 0)
                return refuse(p, "a chunk without its size");
        while (i < n && is_ows(l[i]))
                i++;
        if (i < n && l[i] != ';')
                return refuse(p, "a malformed chunk size");
        for (; i < n; i++)
                if (!is_field_byte((unsigned char)l[i]))
                        return refuse(p, "a control byte in a chunk extension");
        p->left = v;
        p->state = v ? S_CHUNK_DATA : S_TRAILERS;
        return 0;
}

static int step_out(struct kapi_http_step *step, enum kapi_http_event ev, size_t taken,
                    const char *data, size_t len)
{
        *step = (struct kapi_http_step){ .event = ev, .taken = taken, .data = data, .len = len };
        return 0;
}

int kapi_http_parse(struct kapi_http_parser *p, const char *buf, size_t len,
                    struct kapi_http_step *step)
{
        size_t i = 0, n = 0;
        for (;;) {
                int r = 0;
                switch (p->state) {
                case S_STATUS:
                case S_FIELDS:
                case S_TRAILERS:
                case S_CHUNK_SIZE:
                        r = take_line(p, buf, len, &i, p->state != S_CHUNK_SIZE, &n);
                        if (r <= 0)
                                return r < 0 ? r : step_out(step, KAPI_HTTP_MORE, i, NULL, 0);
                        if (p->state == S_STATUS) {
                                r = status_line(p, p->line, n);
                                if (r == 0)
                                        p->state = S_FIELDS;
                        } else if (p->state == S_CHUNK_SIZE) {
                                r = chunk_size(p, p->line, n);
                        } else if (n > 0) {
                                r = field_line(p, p->line, n, p->state == S_TRAILERS);
                        } else if (p->state == S_TRAILERS) {
                                p->state = S_END;
                        } else {
                                bool final;
                                r = head_done(p, &final);
                                if (r == 0 && final)
                                        return step_out(step, KAPI_HTTP_HEAD, i, NULL, 0);
                        }
                        if (r < 0)
                                return r;
                        break;
                case S_LENGTH:
                case S_CHUNK_DATA:
                        if (i == len)
                                return step_out(step, KAPI_HTTP_MORE, i, NULL, 0);
                        n = len - i < p->left ? len - i : (size_t)p->left;
                        p->left -= n;
                        if (!p->left)
                                p->state = p->state == S_LENGTH ? S_END : S_CHUNK_END;
                        return step_out(step, KAPI_HTTP_BODY, i + n, buf + i, n);
                case S_CHUNK_END:
                        for (; i < len; i++) {
                                if (buf[i] == '\n')
                                        break;
                                if (buf[i] != '\r' || p->line_len)
                                        return refuse(p, "chunk data longer than its size");
                                p->line_len = 1;
                        }
                        if (i == len)
                                return step_out(step, KAPI_HTTP_MORE, i, NULL, 0);
                        i++;
                        p->line_len = 0;
                        p->state = S_CHUNK_SIZE;
                        break;
                case S_CLOSE:
                        if (i == len)
                                return step_out(step, KAPI_HTTP_MORE, i, NULL, 0);
                        return step_out(step, KAPI_HTTP_BODY, len, buf + i, len - i);
                case S_END:
                        return step_out(step, KAPI_HTTP_END, i, NULL, 0);
                default:
                        return -EBADMSG;
                }
        }
}

int kapi_http_parse_eof(struct kapi_http_parser *p)
{
        if (p->state == S_CLOSE)
                p->state = S_END;
        if (p->state == S_END)
                return 0;
        if (p->state != S_ERROR) {
                p->why = kapi_http_parser_started(p) ? "the connection closed inside the response"
                                                     : "the connection closed before a response came";
                p->state = S_ERROR;
        }
        p->keep_alive = false;
        return -ECONNRESET;
}
