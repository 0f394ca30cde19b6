/* The API client's HTTP/1.1 response parser (RFC 9112), strict and
 * incremental: bytes go in as they arrive, split anywhere, and come out as
 * steps (the head is complete; these bytes are body; the response ended).
 * What it accepts:
 *   - a status line "HTTP/1.x SP 3DIGIT [SP reason]", the reason free of
 *     controls but HTAB; status 100..599; interim 1xx heads (but 101) are
 *     skipped, at most KAPI_HTTP_INTERIM_MAX of them;
 *   - lines ending CRLF or a bare LF (RFC 9112 2.2); a CR anywhere else and
 *     a NUL anywhere in a head are refused;
 *   - field lines token ":" OWS value OWS: a line that starts with
 *     whitespace (obs-fold), whitespace before the colon, a name byte
 *     outside tchar or a control but HTAB in a value are refused; a line is
 *     at most KAPI_HTTP_LINE_MAX bytes, a head (interim heads and the
 *     trailers counted in) at most KAPI_HTTP_HEAD_MAX, with at most
 *     KAPI_HTTP_FIELDS_MAX field lines;
 *   - framing (RFC 9112 6.3): 1xx, 204 and 304 have no body; else
 *     Transfer-Encoding, which must be exactly "chunked" (any other coding,
 *     chunked twice, or with Content-Length, or in an HTTP/1.0 response, is
 *     refused); else Content-Length, 1 to 19 digits, every copy the same;
 *     else the body lasts until the connection closes;
 *   - Retry-After as delay-seconds (an HTTP-date is ignored);
 *   - chunks: 1 to 16 hex digits (no overflow), then optional extensions
 *     (";" and field bytes, ignored), the data, and CRLF or LF right after
 *     it; trailer fields are checked like head fields and dropped.
 * Pure: no I/O, no allocation, never logs; knows nothing of kapi. */
#ifndef DEVLET_KAPI_HTTP_PARSER_H
#define DEVLET_KAPI_HTTP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KAPI_HTTP_LINE_MAX 8192u
#define KAPI_HTTP_HEAD_MAX (64u << 10)
#define KAPI_HTTP_FIELDS_MAX 128u
#define KAPI_HTTP_INTERIM_MAX 8u
/* A Retry-After above this many seconds reads as this (kapi bounds it
 * further). */
#define KAPI_HTTP_RETRY_AFTER_MAX 86400u

enum kapi_http_event {
        KAPI_HTTP_MORE, /* every byte given was taken: give more (or the end) */
        KAPI_HTTP_HEAD, /* the final head is complete: status and framing are set */
        KAPI_HTTP_BODY, /* body bytes: step.data, step.len */
        KAPI_HTTP_END,  /* the response is complete */
};

struct kapi_http_step {
        enum kapi_http_event event;
        size_t taken;     /* bytes of the input this step used */
        const char *data; /* KAPI_HTTP_BODY: into the input, the last len bytes taken */
        size_t len;
};

struct kapi_http_parser {
        /* the response, from KAPI_HTTP_HEAD on */
        int status;
        bool has_length;     /* Content-Length framed the body */
        uint64_t length;
        bool chunked;
        bool until_close;    /* the body ends when the connection does */
        bool keep_alive;     /* after KAPI_HTTP_END the connection may carry another call */
        unsigned retry_after_s; /* Retry-After's delay-seconds (0: none) */
        const char *why;     /* after a refusal or a cut: static text */

        /* private */
        int state;
        bool v11, close;
        unsigned fields, interim;
        size_t head_bytes;
        uint64_t left;       /* of the body or of the chunk */
        size_t line_len;
        char line[KAPI_HTTP_LINE_MAX];
};

void kapi_http_parser_init(struct kapi_http_parser *p);

/* Parses the next len bytes of the response (len may be 0: after HEAD a
 * bodiless response still has its END to give).  Returns 0 and *step:
 * call again with the bytes after step->taken until the step is
 * KAPI_HTTP_MORE (all taken) or KAPI_HTTP_END (bytes left after it are not
 * this response's); or -EBADMSG with p->why, and the connection is beyond
 * use.  After KAPI_HTTP_END every call gives KAPI_HTTP_END with nothing
 * taken. */
int kapi_http_parse(struct kapi_http_parser *p, const char *buf, size_t len,
                    struct kapi_http_step *step);

/* The connection ended.  Returns 0 when that completes the response (a
 * body read until close, or a response already complete), or
 * -ECONNRESET with p->why: it ended before the response did. */
int kapi_http_parse_eof(struct kapi_http_parser *p);

/* Whether any byte of a response has come (a reused connection that ends
 * before one did may be retried on a fresh one). */
bool kapi_http_parser_started(const struct kapi_http_parser *p);

#endif
