/* libFuzzer target for the metrics endpoint's request parser
 * (metrics/http-request.c), fed as the server feeds it: the input is one
 * connection's bytes, parsed request after request (pipelining) until one
 * is incomplete or ends the connection.  Checks what the server relies on
 * (abort otherwise): the bytes taken lie within the input, 0 only below the
 * limit; a served path lies within the head and holds visible ASCII only;
 * a refused request closes the connection; and an accepted head holds no
 * NUL, no bare CR and no folded line: the smuggling shapes RFC 9112
 * forbids.  Seeds (fuzz/corpus/fuzz-http-request/): pipelined GET and
 * HEAD, each shape the issue names. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/http-request.h"

#define MAX 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "http-request: %s\n", what);
                abort();
        }
}

/* An accepted head: no NUL, every CR before an LF, no line after the
 * first starting with whitespace. */
static void check_accepted(const char *h, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                check(h[i] != '\0', "NUL in an accepted head");
                check(h[i] != '\r' || (i + 1 < n && h[i + 1] == '\n'), "bare CR in an accepted head");
                if (h[i] == '\n' && i + 1 < n)
                        check(h[i + 1] != ' ' && h[i + 1] != '\t', "folded line in an accepted head");
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a copy of the exact size, so ASan sees any read past it */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        size_t off = 0;
        while (off < size) {
                size_t len = size - off < MAX ? size - off : MAX;
                struct http_request r;
                size_t n = http_request_parse(buf + off, len, MAX, &r);
                if (!n) {
                        check(len < MAX, "incomplete at the limit");
                        break;
                }
                check(n <= len, "took more than it was given");
                check(r.status == 0 || r.status == 400 || r.status == 405 || r.status == 431,
                      "unknown status");
                if (r.status == 400 || r.status == 431) {
                        check(!r.keep_alive, "a refused request keeps the connection");
                        check(r.why && r.why[0], "a refusal without a reason");
                        break;
                }
                check_accepted(buf + off, n);
                if (r.status == 0) {
                        check(r.path >= buf + off && r.path + r.path_len <= buf + off + n,
                              "path outside the head");
                        for (size_t i = 0; i < r.path_len; i++)
                                check(r.path[i] > ' ' && r.path[i] < 0x7f && r.path[i] != '?',
                                      "path byte not visible ASCII");
                }
                if (!r.keep_alive)
                        break;
                off += n;
        }
        free(buf);
        return 0;
}
