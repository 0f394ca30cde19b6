/* Test gRPC client for tests/integration/test_grpc.py: drives src/grpc/client.c
 * against a grpcio server.
 *
 *   grpc-testclient [options] SOCKET METHOD [REQUEST]
 *     --size N          request of N pattern bytes (byte i = i * 7 % 251)
 *     --timeout MS      deadline (default none)
 *     --stream          use grpc_client_call_start and print every message
 *     --cancel-after K  (with --stream) cancel from the message callback
 *                       after K messages
 *     --repeat N        run N asynchronous calls at once on one loop
 *
 * Prints key=value lines: for each message "msg len=L fnv=H text=T", then
 * "status=NAME" and "message=M"; with --repeat, "ok=N" and one status line
 * per distinct failure.  Exits 0 when the call(s) ran (whatever the status),
 * 2 on a usage error. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "grpc/grpc.h"

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < n; i++) {
                h ^= p[i];
                h *= 16777619u;
        }
        return h;
}

static void print_msg(const uint8_t *msg, size_t len)
{
        printf("msg len=%zu fnv=%08" PRIx32 " text=", len, fnv1a(msg, len));
        for (size_t i = 0; i < len && i < 64; i++)
                putchar(msg[i] >= 0x20 && msg[i] < 0x7f ? msg[i] : '.');
        putchar('\n');
}

struct stream_state {
        unsigned n_msgs;
        unsigned cancel_after;
        bool done;
};

static int stream_on_msg(const uint8_t *msg, size_t len, void *ud)
{
        struct stream_state *st = ud;
        print_msg(msg, len);
        st->n_msgs++;
        return st->cancel_after && st->n_msgs >= st->cancel_after;
}

static void stream_on_done(int status, const char *message, void *ud)
{
        struct stream_state *st = ud;
        st->done = true;
        printf("status=%s\nmessage=%s\n", grpc_status_name(status), message ? message : "");
}

struct repeat_state {
        unsigned ok;
        unsigned failed;
        const uint8_t *req;
        size_t req_len;
        unsigned bad_replies;
};

struct repeat_call {
        struct repeat_state *st;
        bool good_reply;
};

static int repeat_on_msg(const uint8_t *msg, size_t len, void *ud)
{
        struct repeat_call *rc = ud;
        rc->good_reply = len == rc->st->req_len && memcmp(msg, rc->st->req, len) == 0;
        return 0;
}

static void repeat_on_done(int status, const char *message, void *ud)
{
        struct repeat_call *rc = ud;
        if (status == GRPC_STATUS_OK && rc->good_reply) {
                rc->st->ok++;
        } else {
                rc->st->failed++;
                printf("status=%s\nmessage=%s\n", grpc_status_name(status), message ? message : "");
        }
        free(rc);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "size", required_argument, NULL, 's' },
                { "timeout", required_argument, NULL, 't' },
                { "stream", no_argument, NULL, 'S' },
                { "cancel-after", required_argument, NULL, 'c' },
                { "repeat", required_argument, NULL, 'r' },
                {},
        };
        long size = -1, repeat = 0, cancel_after = 0;
        uint64_t timeout = 0;
        bool streaming = false;
        int o;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (o) {
                case 's':
                        size = strtol(optarg, NULL, 10);
                        break;
                case 't':
                        timeout = strtoull(optarg, NULL, 10);
                        break;
                case 'S':
                        streaming = true;
                        break;
                case 'c':
                        cancel_after = strtol(optarg, NULL, 10);
                        break;
                case 'r':
                        repeat = strtol(optarg, NULL, 10);
                        break;
                default:
                        return 2;
                }
        }
        if (argc - optind < 2 || argc - optind > 3) {
                fprintf(stderr, "usage: %s [options] SOCKET METHOD [REQUEST]\n", argv[0]);
                return 2;
        }
        const char *sock = argv[optind], *method = argv[optind + 1];
        uint8_t *req;
        size_t req_len;
        if (size >= 0) {
                req_len = (size_t)size;
                req = xmalloc(req_len ? req_len : 1);
                for (size_t i = 0; i < req_len; i++)
                        req[i] = (uint8_t)(i * 7 % 251);
        } else {
                const char *s = argc - optind == 3 ? argv[optind + 2] : "";
                req_len = strlen(s);
                req = (uint8_t *)xstrdup(s);
        }

        int rc = 0;
        if (streaming || repeat > 0) {
                uv_loop_t loop;
                uv_loop_init(&loop);
                struct stream_state st = { .cancel_after = (unsigned)cancel_after };
                struct repeat_state rs = { .req = req, .req_len = req_len };
                if (streaming) {
                        int r = grpc_client_call_start(&loop, sock, method, req, req_len, timeout,
                                                       stream_on_msg, stream_on_done, &st, NULL);
                        if (r < 0) {
                                printf("start=%s\n", strerror(-r));
                                rc = 1;
                        }
                } else {
                        for (long i = 0; i < repeat; i++) {
                                struct repeat_call *c = xcalloc(1, sizeof(*c));
                                c->st = &rs;
                                int r = grpc_client_call_start(&loop, sock, method, req, req_len,
                                                               timeout, repeat_on_msg,
                                                               repeat_on_done, c, NULL);
                                if (r < 0) {
                                        printf("start=%s\n", strerror(-r));
                                        free(c);
                                        rc = 1;
                                }
                        }
                }
                uv_run(&loop, UV_RUN_DEFAULT);
                if (uv_loop_close(&loop) < 0) {
                        printf("loop=busy\n");
                        rc = 1;
                }
                if (repeat > 0)
                        printf("ok=%u\n", rs.ok);
        } else {
                uint8_t *reply = NULL;
                size_t reply_len = 0;
                char *message = NULL;
                int status = grpc_client_unary_sync(sock, method, req, req_len, timeout, &reply,
                                                    &reply_len, &message);
                if (status == GRPC_STATUS_OK)
                        print_msg(reply, reply_len);
                printf("status=%s\nmessage=%s\n", grpc_status_name(status),
                       message ? message : "");
                free(reply);
                free(message);
        }
        free(req);
        return rc;
}
