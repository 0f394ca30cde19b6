/* Internal test hook of src/grpc/server.c, for fuzz/fuzz-grpc-server.c only. */
#ifndef DEVLET_GRPC_SERVER_FUZZ_H
#define DEVLET_GRPC_SERVER_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "grpc/grpc.h"

/* Runs one server connection without a socket or loop: a server-side
 * nghttp2 session with the real callbacks serving methods (handlers get
 * userdata), fed data in
 * pieces of at most chunk bytes (0: all at once), its output discarded.
 * Handlers run synchronously; a call still held at the end gets on_cancel
 * (a handler that holds a call without registering on_cancel leaks it).
 * Everything is freed before returning.  Returns 0 if the session accepted
 * all input, or the negative nghttp2 error that ended it. */
int grpc_server_feed_for_fuzzing(const struct grpc_method *methods, size_t n_methods,
                                 void *userdata, const uint8_t *data, size_t len, size_t chunk);

#endif
