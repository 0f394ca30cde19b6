/* One HTTP/1.1 request head as the metrics endpoint reads it: RFC 9112's
 * message syntax, strictly.  The endpoint serves GET and HEAD without
 * bodies, so anything that could frame a body, or that another parser
 * might frame differently (request smuggling), is refused with 400 rather
 * than guessed at:
 *   - request line: token SP target SP HTTP/1.0|HTTP/1.1, the target
 *     visible ASCII only; a single space between the three;
 *   - line ends CRLF, or a bare LF (RFC 9112 2.2); a CR anywhere else
 *     (bare CR) is refused;
 *   - a field line is token ":" OWS value OWS: whitespace before the
 *     colon, a name byte outside tchar, a line without a colon, a line
 *     starting with whitespace (obs-fold, or whitespace before the first
 *     field) and a value byte that is a control other than HTAB (NUL
 *     included) are refused;
 *   - Content-Length must be digits only (no sign, no list), every one the
 *     same value, and 0: GET and HEAD carry no body; any Transfer-Encoding
 *     is refused;
 *   - at most one Authorization field (basic authentication reads it).
 * Pure: no allocation, no I/O; knows nothing of the server. */
#ifndef DEVLET_METRICS_HTTP_REQUEST_H
#define DEVLET_METRICS_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

struct http_request {
        /* 0: a well-formed GET or HEAD; else the status to answer: 400
         * (malformed, or a body), 405 (another method), 431 (no end within
         * max bytes) */
        unsigned status;
        const char *why;  /* for a status: static text, newline-terminated */
        bool head;        /* HEAD: answer without the body */
        bool keep_alive;  /* the connection may carry another request */
        const char *path; /* into the buffer parsed; the query is left out */
        size_t path_len;
        /* the Authorization field's value, trimmed, into the buffer parsed;
         * NULL: none (two are a 400) */
        const char *authorization;
        size_t authorization_len;
};

/* Parses the request head at the start of buf (len bytes; empty lines
 * before it are skipped, RFC 9112 2.2).  Returns 0 while the head is
 * incomplete and len < max; otherwise the bytes it spans (the skipped
 * empty lines and the empty line that ends it included; len for a 431) and
 * *out, whose status says whether to serve it.  A request answered with
 * 400 or 431 has keep_alive false: where the next one starts is unknown. */
size_t http_request_parse(const char *buf, size_t len, size_t max, struct http_request *out);

#endif
