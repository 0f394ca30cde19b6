/* The metrics endpoint's request parser (see http-request.h): finds the end
 * of the head, then checks every line against RFC 9112 before any field is
 * given a meaning, so a field the server would skip can never be one
 * another parser acts on.  Pure; never allocates, never logs. */
#include "metrics/http-request.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* field-vchar, SP or HTAB (RFC 9110 5.5): no control but HTAB, no NUL */
static bool is_field_byte(unsigned char ch)
{
        return ch == '\t' || (ch >= ' ' && ch != 0x7f);
}

static bool is_ows(char ch)
{
        return ch == ' ' || ch == '\t';
}

/* Case-insensitive: does the comma-separated value hold token? */
static bool has_token(const char *v, size_t len, const char *token)
{
        size_t tl = strlen(token);
        for (size_t i = 0; i < len;) {
                while (i < len && (is_ows(v[i]) || v[i] == ','))
                        i++;
                size_t s = i;
                while (i < len && v[i] != ',')
                        i++;
                size_t e = i;
                while (e > s && is_ows(v[e - 1]))
                        e--;
                if (e - s == tl && strncasecmp(v + s, token, tl) == 0)
                        return true;
        }
        return false;
}

/* Where the head that starts at s ends (just past its empty line), 0 while
 * it is incomplete. */
static size_t head_end(const char *buf, size_t len, size_t s)
{
        for (size_t i = s; i + 1 < len; i++) {
                if (buf[i] != '\n')
                        continue;
                if (buf[i + 1] == '\n')
                        return i + 2;
                if (buf[i + 1] == '\r') {
                        if (i + 2 == len)
                                return 0;
                        if (buf[i + 2] == '\n')
                                return i + 3;
                }
        }
        return 0;
}

static size_t refuse(struct http_request *out, unsigned status, const char *why, size_t n)
{
        out->status = status;
        out->why = why;
        out->keep_alive = false;
        return n;
}

/* Content-Length: 1*DIGIT, saturating.  Returns false for anything else. */
static bool content_length(const char *v, size_t n, uint64_t *out)
{
        if (n == 0)
                return false;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return false;
                unsigned d = (unsigned)(v[i] - '0');
                x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
        }
        *out = x;
        return true;
}

size_t http_request_parse(const char *buf, size_t len, size_t max, struct http_request *out)
{
        *out = (struct http_request){ 0 };
        size_t s = 0;
        while (s < len && (buf[s] == '\n' || (buf[s] == '\r' && s + 1 < len && buf[s + 1] == '\n')))
                s += buf[s] == '\n' ? 1 : 2;
        size_t end = head_end(buf, len, s);
        if (!end)
                return len < max ? 0 : refuse(out, 431, "request too large\n", len);

        /* the request line */
        const char *line = buf + s;
        const char *le = memchr(line, '\n', (size_t)(buf + end - line));
        const char *lend = le > line && le[-1] == '\r' ? le - 1 : le;
        const char *p = line;
        while (p < lend && is_tchar((unsigned char)*p))
                p++;
        const char *method = line;
        size_t mlen = (size_t)(p - line);
        if (!mlen || p == lend || *p != ' ')
                return refuse(out, 400, "bad request line\n", end);
        const char *target = ++p;
        while (p < lend && (unsigned char)*p > ' ' && (unsigned char)*p < 0x7f)
                p++;
        size_t tlen = (size_t)(p - target);
        if (!tlen || p == lend || *p != ' ')
                return refuse(out, 400, "bad request line\n", end);
        const char *version = ++p;
        size_t vlen = (size_t)(lend - version);
        bool v11 = vlen == 8 && memcmp(version, "HTTP/1.1", 8) == 0;
        bool v10 = vlen == 8 && memcmp(version, "HTTP/1.0", 8) == 0;
        if (!v10 && !v11)
                return refuse(out, 400, "HTTP/1.0 or HTTP/1.1 only\n", end);
        out->head = mlen == 4 && memcmp(method, "HEAD", 4) == 0;
        bool get = mlen == 3 && memcmp(method, "GET", 3) == 0;

        /* the field lines: syntax first, then what devlet reads of them */
        bool keep = v11, body = false, cl_seen = false;
        uint64_t cl = 0;
        for (line = le + 1; line < buf + end; line = le + 1) {
                le = memchr(line, '\n', (size_t)(buf + end - line));
                lend = le > line && le[-1] == '\r' ? le - 1 : le;
                if (lend == line)
                        break; /* the empty line that ends the head */
                if (is_ows(*line))
                        return refuse(out, 400, "folded or indented header field\n", end);
                p = line;
                while (p < lend && is_tchar((unsigned char)*p))
                        p++;
                if (p == line || p == lend || *p != ':')
                        return refuse(out, 400, "malformed header field name\n", end);
                size_t nl = (size_t)(p - line);
                const char *v = p + 1;
                for (const char *q = v; q < lend; q++)
                        if (!is_field_byte((unsigned char)*q))
                                return refuse(out, 400, "invalid byte in a header field value\n",
                                              end);
                const char *ve = lend;
                while (v < ve && is_ows(*v))
                        v++;
                while (ve > v && is_ows(ve[-1]))
                        ve--;
                size_t vl = (size_t)(ve - v);
#define NAME(lit) (nl == sizeof(lit) - 1 && strncasecmp(line, lit, nl) == 0)
                if (NAME("Connection")) {
                        if (has_token(v, vl, "close"))
                                keep = false;
                        else if (has_token(v, vl, "keep-alive"))
                                keep = true;
                } else if (NAME("Authorization")) {
                        if (out->authorization)
                                return refuse(out, 400, "more than one Authorization field\n", end);
                        out->authorization = v;
                        out->authorization_len = vl;
                } else if (NAME("Transfer-Encoding")) {
                        body = true;
                } else if (NAME("Content-Length")) {
                        uint64_t n;
                        if (!content_length(v, vl, &n))
                                return refuse(out, 400, "invalid Content-Length\n", end);
                        if (cl_seen && n != cl)
                                return refuse(out, 400, "conflicting Content-Length\n", end);
                        cl_seen = true;
                        cl = n;
                        body |= n > 0;
                }
#undef NAME
        }
        /* bodies are never read: after one, where the next request starts
         * is unknown, so such a connection closes */
        out->keep_alive = keep && !body;
        if (!get && !out->head) {
                out->status = 405;
                out->why = "method not allowed\n";
                return end;
        }
        if (body)
                return refuse(out, 400, "request bodies are not accepted\n", end);
        out->path = target;
        const char *q = memchr(target, '?', tlen);
        out->path_len = q ? (size_t)(q - target) : tlen;
        return end;
}
