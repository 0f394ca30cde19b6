/* Base64 decoding (RFC 4648, the standard alphabet, padded), strict as
 * Go's StdEncoding: kubeconfig data fields and HTTP basic credentials. */
#include "base/base64.h"

#include <errno.h>
#include <stdint.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

static int b64_value(unsigned char ch)
{
        if (ch >= 'A' && ch <= 'Z')
                return ch - 'A';
        if (ch >= 'a' && ch <= 'z')
                return ch - 'a' + 26;
        if (ch >= '0' && ch <= '9')
                return ch - '0' + 52;
        if (ch == '+')
                return 62;
        if (ch == '/')
                return 63;
        return -1;
}

int base64_decode(const char *in, size_t len, char **out, size_t *out_len, size_t *bad_at)
{
        /* Line breaks are skipped (Go's decoder, which kubectl uses, does the same). */
        _cleanup_free_ char *buf = xmalloc(len / 4 * 3 + 4);
        size_t n = 0, pad = 0, quad = 0;
        uint32_t acc = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)in[i];
                if (ch == '\n' || ch == '\r')
                        continue;
                int v = b64_value(ch);
                if (ch == '=' && quad >= 2) {
                        pad++;
                        v = 0;
                } else if (v < 0 || pad) {
                        if (bad_at)
                                *bad_at = i;
                        return -EINVAL;
                }
                acc = acc << 6 | (uint32_t)v;
                if (++quad == 4) {
                        buf[n++] = (char)(acc >> 16);
                        if (pad < 2)
                                buf[n++] = (char)(acc >> 8 & 0xff);
                        if (pad < 1)
                                buf[n++] = (char)(acc & 0xff);
                        quad = 0;
                        acc = 0;
                }
        }
        if (quad) {
                if (bad_at)
                        *bad_at = len;
                return -EINVAL;
        }
        buf[n] = '\0';
        *out = TAKE_PTR(buf);
        *out_len = n;
        return 0;
}
