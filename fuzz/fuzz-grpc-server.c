/* libFuzzer target: arbitrary bytes into the gRPC server's connection input.
 *
 * The first input byte picks how the rest is cut into reads (0: one read,
 * n: n-byte reads), so frames and message prefixes get split everywhere.
 * The rest goes through grpc_server_feed_for_fuzzing: the real nghttp2
 * callbacks, deframer, dispatch and response path, with output discarded.
 * Seeds: fuzz/corpus/fuzz-grpc-server/ (from gen-corpus-grpc-server.py). */
#include <stddef.h>
#include <stdint.h>

#include "grpc/grpc.h"
#include "grpc/server-fuzz.h"

static void unary(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        grpc_call_reply(call, req, len);
}

static void fail(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "bad %s \xc3\xa9 %%", "input");
}

static void stream(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        unsigned n = len ? req[0] % 4 : 0;
        for (unsigned i = 0; i < n; i++)
                grpc_call_send(call, req, len);
        grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static void on_cancel(struct grpc_call *call, void *ud)
{
}

static void hold(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
        grpc_call_on_cancel(call, on_cancel, NULL);
        grpc_call_send(call, req, len);
}

static const struct grpc_method methods[] = {
        { "/test.Echo/Unary", false, unary },
        { "/test.Echo/Fail", false, fail },
        { "/test.Echo/Stream", true, stream },
        { "/test.Echo/Hold", true, hold },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        grpc_server_feed_for_fuzzing(methods, sizeof(methods) / sizeof(methods[0]), NULL, data + 1,
                                     size - 1, data[0]);
        return 0;
}
