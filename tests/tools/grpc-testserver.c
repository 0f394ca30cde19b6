/* Test gRPC server for tests/integration/test_grpc.py.
 *
 *   grpc-testserver SOCKET [MAX_CONNS MAX_STREAMS MAX_CALLS IDLE_MS]
 *
 * The optional numbers are the server's struct grpc_server_limits (0: the
 * default).
 * Serves the test.Echo service on SOCKET with src/grpc/server.c, prints
 * "ready" once listening, and exits 0 on SIGTERM/SIGINT after
 * grpc_server_free and a full drain of the loop (so a sanitizer's leak check
 * sees everything freed).  Methods:
 *   /test.Echo/Unary   echoes the request
 *   /test.Echo/Stream  server-streaming: sends the request back N times (N is
 *                      its first byte), 5 ms apart, then OK
 *   /test.Echo/Fail    INVALID_ARGUMENT with a message holding UTF-8 and '%'
 *   /test.Echo/Hold    server-streaming: sends "held", then keeps the call
 *                      until the peer cancels it
 *   /test.Echo/Late    unary, replies "late" after 20 ms (an asynchronous reply)
 *   /test.Echo/Stats   "open_calls=N connections=M cancels=K" */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "grpc/grpc.h"

#define FAIL_MESSAGE "bad request: caf\xc3\xa9 \xe2\x9c\x93 100% done %41 tab\there"

struct test_state {
        struct grpc_server *server;
        uv_signal_t sigterm, sigint;
        unsigned open_calls;
        unsigned cancels;
};

static struct test_state state;

/* A call kept across loop iterations; freed in its timer's close callback. */
struct held_call {
        struct grpc_call *call;
        uv_timer_t timer;
        uint8_t *msg;
        size_t len;
        unsigned left;
};

static void held_free(uv_handle_t *h)
{
        struct held_call *hc = h->data;
        free(hc->msg);
        free(hc);
}

static void held_end(struct held_call *hc)
{
        state.open_calls--;
        uv_close((uv_handle_t *)&hc->timer, held_free);
}

static void held_on_cancel(struct grpc_call *call, void *ud)
{
        state.cancels++;
        held_end(ud);
}

static struct held_call *held_new(struct grpc_call *call, const uint8_t *req, size_t len)
{
        struct held_call *hc = xcalloc(1, sizeof(*hc));
        hc->call = call;
        hc->msg = xmalloc(len ? len : 1);
        memcpy(hc->msg, req, len);
        hc->len = len;
        uv_timer_init(uv_default_loop(), &hc->timer);
        hc->timer.data = hc;
        state.open_calls++;
        grpc_call_on_cancel(call, held_on_cancel, hc);
        return hc;
}

static void unary(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        grpc_call_reply(call, req, len);
}

static void stream_tick(uv_timer_t *t)
{
        struct held_call *hc = t->data;
        if (hc->left == 0) {
                grpc_call_finish(hc->call, GRPC_STATUS_OK, NULL);
                held_end(hc);
                return;
        }
        hc->left--;
        if (grpc_call_send(hc->call, hc->msg, hc->len) < 0) {
                grpc_call_finish(hc->call, GRPC_STATUS_INTERNAL, "send failed");
                held_end(hc);
                return;
        }
        uv_timer_start(&hc->timer, stream_tick, 5, 0);
}

static void stream(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        struct held_call *hc = held_new(call, req, len);
        hc->left = len ? req[0] : 0;
        uv_timer_start(&hc->timer, stream_tick, 0, 0);
}

static void fail(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "%s", FAIL_MESSAGE);
}

static void hold(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        held_new(call, req, len);
        grpc_call_send(call, (const uint8_t *)"held", 4);
}

static void late_tick(uv_timer_t *t)
{
        struct held_call *hc = t->data;
        grpc_call_reply(hc->call, (const uint8_t *)"late", 4);
        held_end(hc);
}

static void late(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        struct held_call *hc = held_new(call, req, len);
        uv_timer_start(&hc->timer, late_tick, 20, 0);
}

static void stats(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        char buf[128];
        int n = snprintf(buf, sizeof(buf), "open_calls=%u connections=%zu cancels=%u",
                         state.open_calls, grpc_server_connections(state.server), state.cancels);
        grpc_call_reply(call, (const uint8_t *)buf, (size_t)n);
}

static const struct grpc_method methods[] = {
        { "/test.Echo/Unary", false, unary },
        { "/test.Echo/Stream", true, stream },
        { "/test.Echo/Fail", false, fail },
        { "/test.Echo/Hold", true, hold },
        { "/test.Echo/Late", false, late },
        { "/test.Echo/Stats", false, stats },
};

static void on_signal(uv_signal_t *sig, int signum)
{
        grpc_server_free(state.server);
        state.server = NULL;
        uv_close((uv_handle_t *)&state.sigterm, NULL);
        uv_close((uv_handle_t *)&state.sigint, NULL);
}

int main(int argc, char **argv)
{
        if (argc != 2 && argc != 6) {
                fprintf(stderr, "usage: %s SOCKET [MAX_CONNS MAX_STREAMS MAX_CALLS IDLE_MS]\n",
                        argv[0]);
                return 2;
        }
        uv_loop_t *loop = uv_default_loop();
        int r = grpc_server_new(loop, argv[1], methods, sizeof(methods) / sizeof(methods[0]),
                                &state, &state.server);
        if (r < 0) {
                fprintf(stderr, "grpc-testserver: cannot serve %s: %s\n", argv[1], strerror(-r));
                return 1;
        }
        if (argc == 6) {
                struct grpc_server_limits l = {
                        (unsigned)strtoul(argv[2], NULL, 10), (unsigned)strtoul(argv[3], NULL, 10),
                        (unsigned)strtoul(argv[4], NULL, 10), (unsigned)strtoul(argv[5], NULL, 10),
                };
                grpc_server_set_limits(state.server, &l);
        }
        uv_signal_init(loop, &state.sigterm);
        uv_signal_start(&state.sigterm, on_signal, SIGTERM);
        uv_signal_init(loop, &state.sigint);
        uv_signal_start(&state.sigint, on_signal, SIGINT);
        printf("ready\n");
        fflush(stdout);

        uv_run(loop, UV_RUN_DEFAULT);
        r = uv_loop_close(loop);
        if (r < 0) {
                fprintf(stderr, "grpc-testserver: loop not drained: %s\n", uv_strerror(r));
                return 1;
        }
        return state.open_calls == 0 ? 0 : 1;
}
