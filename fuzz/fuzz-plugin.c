/* libFuzzer target: kubelet requests into the real DevicePlugin server.
 *
 * The resource is a real host-device backend's (fuse-0 .. fuse-7 on
 * /dev/null, a bind mount beside it), built once.  Each input is
 *   byte 0     the method: GetDevicePluginOptions, ListAndWatch,
 *              GetPreferredAllocation, Allocate, PreStartContainer (mod 5);
 *              bit 7 adds a second request (Allocate) on the same connection
 *   byte 1     how the connection's bytes are cut into reads (0: one read)
 *   the rest   the request message: valid or invalid protobuf
 * and becomes what a gRPC client sends (preface, SETTINGS, HEADERS, DATA
 * with the length-prefixed message), fed through plugin_feed_for_fuzzing:
 * nghttp2, the deframer, dispatch, protobuf-c unpacking, the handlers and
 * the backend's Allocate and preferred allocation.  Seeds:
 * fuzz/corpus/fuzz-plugin/ (from gen-corpus-plugin.py). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "devices/device.h"
#include "kubelet/plugin-fuzz.h"

#define BODY_MAX (64 * 1024)

static const char *const methods[] = {
        "/v1beta1.DevicePlugin/GetDevicePluginOptions",
        "/v1beta1.DevicePlugin/ListAndWatch",
        "/v1beta1.DevicePlugin/GetPreferredAllocation",
        "/v1beta1.DevicePlugin/Allocate",
        "/v1beta1.DevicePlugin/PreStartContainer",
};

/* built once, kept for the process's lifetime (reachable: no leak report) */
static struct devlet_config *config;
static struct dev_backend *backend;
static struct dev_resource *resource;

static void die(const char *what)
{
        fprintf(stderr, "fuzz-plugin: %s\n", what);
        abort();
}

static void setup(void)
{
        char path[] = "/tmp/fuzz-plugin-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0)
                die("mkstemp");
        static const char yaml[] =
                "version: v1\nhostDevices:\n  domain: devlet.io\n  devices:\n"
                "    - name: fuse\n      groups:\n        - count: 8\n          paths:\n"
                "            - path: /dev/null\n              mountPath: /dev/fuse\n"
                "            - path: /dev/null\n              mountPath: /run/x.sock\n"
                "              type: Mount\n              readOnly: true\n";
        if (write(fd, yaml, sizeof(yaml) - 1) != (ssize_t)(sizeof(yaml) - 1))
                die("write");
        close(fd);
        char a0[] = "run", a1[] = "--config-file", a3[] = "--backends", a4[] = "hostdev";
        char *argv[] = { a0, a1, path, a3, a4, NULL };
        struct diag diag;
        if (config_load(dev_config_families(), 5, argv, &config, &diag, NULL) < 0)
                die(diag.message);
        unlink(path);
        for (size_t i = 0; dev_backends[i]; i++) {
                if (strcmp(dev_backends[i]->name, "hostdev") != 0)
                        continue;
                struct diag why = { 0 };
                if (dev_backends[i]->create(NULL, config, &backend, &why) < 0 || !backend)
                        die(why.message[0] ? why.message : "no hostdev backend");
                size_t n = 0;
                struct dev_resource **res = dev_backends[i]->resources(backend, &n);
                if (n < 1)
                        die("no resource");
                resource = res[0];
        }
        if (!resource)
                die("no hostdev backend");
}

static uint8_t *put_frame(uint8_t *p, uint8_t type, uint8_t flags, uint32_t stream,
                          const uint8_t *payload, size_t len)
{
        *p++ = (uint8_t)(len >> 16);
        *p++ = (uint8_t)(len >> 8);
        *p++ = (uint8_t)len;
        *p++ = type;
        *p++ = flags;
        *p++ = (uint8_t)(stream >> 24);
        *p++ = (uint8_t)(stream >> 16);
        *p++ = (uint8_t)(stream >> 8);
        *p++ = (uint8_t)stream;
        if (len)
                memcpy(p, payload, len);
        return p + len;
}

/* HPACK literal header fields without indexing (every value < 127 bytes). */
static size_t request_headers(uint8_t *out, const char *path)
{
        const char *h[][2] = { { ":method", "POST" },
                               { ":scheme", "http" },
                               { ":path", path },
                               { ":authority", "localhost" },
                               { "content-type", "application/grpc" },
                               { "te", "trailers" } };
        size_t n = 0;
        for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
                size_t nl = strlen(h[i][0]), vl = strlen(h[i][1]);
                out[n++] = 0;
                out[n++] = (uint8_t)nl;
                memcpy(out + n, h[i][0], nl);
                n += nl;
                out[n++] = (uint8_t)vl;
                memcpy(out + n, h[i][1], vl);
                n += vl;
        }
        return n;
}

/* HEADERS and the message in DATA frames of at most 16 KiB. */
static uint8_t *put_request(uint8_t *p, uint32_t stream, const char *path, const uint8_t *msg,
                            size_t len)
{
        uint8_t hdr[512];
        p = put_frame(p, 1, 0x4, stream, hdr, request_headers(hdr, path));
        uint8_t prefix[5] = { 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                              (uint8_t)len };
        size_t first = len < 16384 - 5 ? len : 16384 - 5;
        uint8_t buf[16384];
        memcpy(buf, prefix, 5);
        memcpy(buf + 5, msg, first);
        p = put_frame(p, 0, first == len ? 0x1 : 0, stream, buf, 5 + first);
        for (size_t off = first; off < len; off += 16384) {
                size_t k = len - off < 16384 ? len - off : 16384;
                p = put_frame(p, 0, off + k == len ? 0x1 : 0, stream, msg + off, k);
        }
        return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!resource)
                setup();
        if (size < 2)
                return 0;
        const char *method = methods[(data[0] & 0x7f) % 5];
        bool second = data[0] & 0x80;
        size_t chunk = data[1];
        const uint8_t *msg = data + 2;
        size_t len = size - 2 < BODY_MAX ? size - 2 : BODY_MAX;

        size_t cap = 64 + 2 * (len + 1024 + 9 * (len / 16384 + 2));
        uint8_t *in = malloc(cap), *p = in;
        if (!in)
                return 0;
        static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        memcpy(p, preface, sizeof(preface) - 1);
        p += sizeof(preface) - 1;
        p = put_frame(p, 4, 0, 0, NULL, 0);
        p = put_request(p, 1, method, msg, len);
        if (second)
                p = put_request(p, 3, methods[3], msg, len);
        plugin_feed_for_fuzzing(resource, in, (size_t)(p - in), chunk);
        free(in);
        return 0;
}
