/* gRPC message framing, status names and grpc-message percent-encoding.
 *
 * Pure functions over bytes: no I/O, no loop, no logging.  The deframer is
 * fed raw HTTP/2 DATA payloads and hands out whole messages; it allocates
 * only as payload bytes actually arrive, so a peer that announces a large
 * message and sends nothing costs nothing, and a prefix over the limit is
 * refused before any allocation.  Unit-tested and fuzzed through the server. */
#include "grpc/grpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/ascii.h"
#include "base/xalloc.h"

/* First payload allocation; grown by doubling up to the announced length. */
#define DEFRAMER_MIN_ALLOC 4096u

const char *grpc_status_name(int status)
{
        static const char *const names[] = {
                [GRPC_STATUS_OK] = "OK",
                [GRPC_STATUS_CANCELLED] = "CANCELLED",
                [GRPC_STATUS_UNKNOWN] = "UNKNOWN",
                [GRPC_STATUS_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
                [GRPC_STATUS_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
                [GRPC_STATUS_NOT_FOUND] = "NOT_FOUND",
                [GRPC_STATUS_ALREADY_EXISTS] = "ALREADY_EXISTS",
                [GRPC_STATUS_PERMISSION_DENIED] = "PERMISSION_DENIED",
                [GRPC_STATUS_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
                [GRPC_STATUS_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
                [GRPC_STATUS_ABORTED] = "ABORTED",
                [GRPC_STATUS_OUT_OF_RANGE] = "OUT_OF_RANGE",
                [GRPC_STATUS_UNIMPLEMENTED] = "UNIMPLEMENTED",
                [GRPC_STATUS_INTERNAL] = "INTERNAL",
                [GRPC_STATUS_UNAVAILABLE] = "UNAVAILABLE",
                [GRPC_STATUS_DATA_LOSS] = "DATA_LOSS",
                [GRPC_STATUS_UNAUTHENTICATED] = "UNAUTHENTICATED",
        };
        if (status < 0 || (size_t)status >= sizeof(names) / sizeof(names[0]))
                return "UNKNOWN_STATUS";
        return names[status];
}

void grpc_deframer_init(struct grpc_deframer *d, size_t max)
{
        *d = (struct grpc_deframer){ .max = max ? max : GRPC_MAX_MESSAGE };
}

void grpc_deframer_release(struct grpc_deframer *d)
{
        free(d->buf);
        d->buf = NULL;
        d->hdr_len = 0;
        d->need = 0;
        d->have = 0;
}

/* Capacity currently allocated for the payload: tracked implicitly as the
 * smallest power-of-two multiple of DEFRAMER_MIN_ALLOC >= have, capped at need,
 * so the struct in the contract needs no extra field. */
static size_t deframer_cap(size_t have, size_t need)
{
        size_t cap = DEFRAMER_MIN_ALLOC;
        while (cap < have)
                cap *= 2;
        return cap < need ? cap : need;
}

static void deframer_append(struct grpc_deframer *d, const uint8_t *data, size_t n)
{
        size_t cap = d->buf ? deframer_cap(d->have, d->need) : 0;
        if (d->have + n > cap) {
                size_t ncap = deframer_cap(d->have + n, d->need);
                d->buf = xrealloc(d->buf, ncap);
        }
        memcpy(d->buf + d->have, data, n);
        d->have += n;
}

/* Validates a complete prefix.  The prefix stays in place on error so every
 * later feed reports the same error. */
static int deframer_check_prefix(struct grpc_deframer *d)
{
        if (d->hdr[0] != 0)
                return -ENOTSUP;
        uint32_t n = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
                     (uint32_t)d->hdr[3] << 8 | (uint32_t)d->hdr[4];
        if (n > d->max)
                return -EMSGSIZE;
        d->need = n;
        return 0;
}

int grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *data, size_t len,
                       int (*on_msg)(const uint8_t *msg, size_t len, void *ud), void *ud)
{
        static const uint8_t empty[1];

        for (;;) {
                if (d->hdr_len < sizeof(d->hdr)) {
                        if (len == 0)
                                return 0;
                        size_t n = sizeof(d->hdr) - d->hdr_len;
                        if (n > len)
                                n = len;
                        memcpy(d->hdr + d->hdr_len, data, n);
                        d->hdr_len += n;
                        data += n;
                        len -= n;
                        if (d->hdr_len < sizeof(d->hdr))
                                return 0;
                        d->have = 0;
                }
                int r = deframer_check_prefix(d);
                if (r < 0)
                        return r;

                const uint8_t *msg;
                size_t rest = d->need - d->have;
                if (d->have == 0 && len >= d->need) {
                        /* whole payload in this feed: no copy */
                        msg = d->need ? data : empty;
                        data += d->need;
                        len -= d->need;
                } else {
                        size_t n = rest < len ? rest : len;
                        if (n)
                                deframer_append(d, data, n);
                        data += n;
                        len -= n;
                        if (d->have < d->need)
                                return 0;
                        msg = d->buf;
                }
                size_t msg_len = d->need;
                /* hand the buffer over without resetting first: on_msg may
                 * look at msg, then we free it */
                uint8_t *owned = d->buf;
                d->buf = NULL;
                d->hdr_len = 0;
                d->need = 0;
                d->have = 0;
                r = on_msg(msg, msg_len, ud);
                free(owned);
                if (r != 0)
                        return r;
        }
}

void grpc_frame_prefix(uint8_t out[5], size_t len)
{
        out[0] = 0;
        out[1] = (uint8_t)(len >> 24);
        out[2] = (uint8_t)(len >> 16);
        out[3] = (uint8_t)(len >> 8);
        out[4] = (uint8_t)len;
}

char *grpc_percent_encode(const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                n += (*p < 0x20 || *p > 0x7e || *p == '%') ? 3 : 1;

        char *out = xmalloc(n + 1), *o = out;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p < 0x20 || *p > 0x7e || *p == '%') {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 0xf];
                } else {
                        *o++ = (char)*p;
                }
        }
        *o = '\0';
        return out;
}

char *grpc_percent_decode(const char *s, size_t len)
{
        char *out = xmalloc(len + 1), *o = out;
        for (size_t i = 0; i < len; i++) {
                int hi, lo;
                if (s[i] == '%' && i + 2 < len && (hi = ascii_hex_value(s[i + 1])) >= 0 &&
                    (lo = ascii_hex_value(s[i + 2])) >= 0) {
                        *o++ = (char)(hi << 4 | lo);
                        i += 2;
                } else {
                        *o++ = s[i];
                }
        }
        *o = '\0';
        return out;
}
