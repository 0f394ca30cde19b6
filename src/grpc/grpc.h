/* gRPC over HTTP/2 (nghttp2) on a libuv loop, for Unix-domain sockets.
 *
 * Byte-level: handlers get and send serialized protobuf messages; the caller
 * packs and unpacks them with protobuf-c (see grpc_call_reply_pb).  Nothing
 * here blocks: every function returns at once and reports through callbacks
 * on the loop thread.  This module never logs above debug level.  Since a
 * peer may hang up at any time, creating a server or a client call sets
 * SIGPIPE to ignored if it is still at its default disposition. */
#ifndef DEVLET_GRPC_GRPC_H
#define DEVLET_GRPC_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

/* Canonical gRPC status codes. */
enum grpc_status {
        GRPC_STATUS_OK = 0,
        GRPC_STATUS_CANCELLED = 1,
        GRPC_STATUS_UNKNOWN = 2,
        GRPC_STATUS_INVALID_ARGUMENT = 3,
        GRPC_STATUS_DEADLINE_EXCEEDED = 4,
        GRPC_STATUS_NOT_FOUND = 5,
        GRPC_STATUS_ALREADY_EXISTS = 6,
        GRPC_STATUS_PERMISSION_DENIED = 7,
        GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
        GRPC_STATUS_FAILED_PRECONDITION = 9,
        GRPC_STATUS_ABORTED = 10,
        GRPC_STATUS_OUT_OF_RANGE = 11,
        GRPC_STATUS_UNIMPLEMENTED = 12,
        GRPC_STATUS_INTERNAL = 13,
        GRPC_STATUS_UNAVAILABLE = 14,
        GRPC_STATUS_DATA_LOSS = 15,
        GRPC_STATUS_UNAUTHENTICATED = 16,
};

/* Largest message accepted or sent (gRPC's default receive limit). */
#define GRPC_MAX_MESSAGE (4u * 1024 * 1024)

const char *grpc_status_name(int status);

/* ---- framing (frame.c): pure functions, unit-tested and fuzzed ---- */

/* Incremental parser for length-prefixed gRPC messages: 1 byte compressed
 * flag, 4 bytes big-endian length, payload.  Prefixes and payloads may be
 * split across any number of feeds. */
struct grpc_deframer {
        uint8_t hdr[5];
        size_t hdr_len;
        uint8_t *buf; /* payload being assembled */
        size_t need;  /* payload length from the prefix */
        size_t have;
        size_t max;   /* limit; GRPC_MAX_MESSAGE by default */
};

void grpc_deframer_init(struct grpc_deframer *d, size_t max);
void grpc_deframer_release(struct grpc_deframer *d);

/* Consumes up to len bytes.  For each complete message calls
 * on_msg(msg, msg_len, ud); a non-zero return from on_msg stops feeding and is
 * returned.  Returns 0 when all input was consumed, -EMSGSIZE for a prefix
 * over the limit, -ENOTSUP for a compressed message (no compression is ever
 * negotiated). */
int grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *data, size_t len,
                       int (*on_msg)(const uint8_t *msg, size_t len, void *ud), void *ud);

/* Writes the 5-byte prefix for a message of len bytes. */
void grpc_frame_prefix(uint8_t out[5], size_t len);

/* Percent-encodes a grpc-message value per the gRPC spec (bytes outside
 * 0x20..0x7E and '%' become %XX).  Returns a heap string. */
char *grpc_percent_encode(const char *s);
/* Decodes; malformed escapes are passed through literally.  Heap string. */
char *grpc_percent_decode(const char *s, size_t len);

/* ---- what decoding a request would cost (pbwire.c): pure, unit-tested, fuzzed ---- */

struct diag;

/* Bounds on a request, checked on its wire bytes before protobuf-c
 * decodes it (which allocates per field: 4 MiB of empty entries would
 * cost it over 200 MiB). */
struct grpc_pb_limits {
        size_t max_entries; /* of each repeated field, over the whole message
                             * (a field of a repeated submessage: summed) */
        size_t max_fields;  /* fields on the wire at every depth, unknown ones too */
};

/* Walks msg by d's schema without decoding or allocating.  Returns 0,
 * -EBADMSG with diag for bytes that are not protobuf's wire format (a tag,
 * varint or length cut short or longer than 5, 10 or 10 bytes, a length
 * past the end, field number 0, a group or reserved wire type, a message
 * field that is not length-delimited, nesting deeper than 32), or -E2BIG
 * with diag for a message over lim ("NodePrepareResourcesRequest.claims:
 * more than 1024 entries", "...: more than N fields").  What protobuf-c
 * checks on decoding (a string field as a varint, UTF-8) it leaves to it. */
int grpc_pb_check(const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len,
                  const struct grpc_pb_limits *lim, struct diag *diag);

/* ---- server (server.c) ---- */

struct grpc_server;
struct grpc_call;

/* Called once per request message.  For unary methods the handler must end
 * the call with grpc_call_reply*() or grpc_call_finish(), now or later.  For
 * server-streaming methods it may keep the call and send messages over time
 * with grpc_call_send(); the call stays valid until it calls
 * grpc_call_finish() or until the on_cancel callback fires.  req is valid
 * only until the handler returns. */
typedef void (*grpc_handler_fn)(struct grpc_call *call, const uint8_t *req, size_t len,
                                void *userdata);

struct grpc_method {
        const char *path; /* "/v1beta1.DevicePlugin/Allocate" */
        bool server_streaming;
        grpc_handler_fn handler;
};

/* Creates a server listening on socket_path (an existing file there is
 * unlinked first), serving methods with userdata passed to every handler.
 * The methods array must outlive the server.  Returns 0 or -errno. */
int grpc_server_new(uv_loop_t *loop, const char *socket_path, const struct grpc_method *methods,
                    size_t n_methods, void *userdata, struct grpc_server **out);

/* Closes the listener and every connection (cancelling their calls: each
 * held streaming call gets on_cancel first), unlinks the socket, frees all
 * memory once libuv has closed the handles. Safe with NULL. */
void grpc_server_free(struct grpc_server *s);

size_t grpc_server_connections(const struct grpc_server *s);

/* What one server lets its peers hold; 0 keeps a field's default.  Nothing a
 * peer does can make the server exceed them, and the kubelet (one connection,
 * one ListAndWatch stream) is never the one that pays:
 * - at max_conns (default 128) a new connection closes the one idle the
 *   longest (no open stream); with none idle, it waits for a slot;
 * - max_streams (default 100) is SETTINGS_MAX_CONCURRENT_STREAMS;
 * - at max_calls over all connections (default 1024), a new stream resets the
 *   oldest stream of the connection holding the most;
 * - a connection without an open stream for idle_ms (default 5 min) gets a
 *   GOAWAY and is closed. */
struct grpc_server_limits {
        unsigned max_conns;
        unsigned max_streams;
        unsigned max_calls;
        unsigned idle_ms;
};

/* Applies to connections accepted from now on (max_streams) and at once
 * (the rest). */
void grpc_server_set_limits(struct grpc_server *s, const struct grpc_server_limits *l);

/* A framed message that many streams can share (reference counted). */
struct grpc_msg;
/* NULL if len > GRPC_MAX_MESSAGE. */
struct grpc_msg *grpc_msg_new(const uint8_t *msg, size_t len);
void grpc_msg_unref(struct grpc_msg *m);

/* Server-streaming where each message supersedes the ones before (full
 * snapshots): queues m, taking a reference, in place of any message the
 * peer has not begun to receive.  A stream thus holds at most two messages
 * (one partly sent, the latest) however slowly its peer reads, and a message
 * sent to many streams is stored once.  Returns 0 or -ECONNRESET if the
 * stream is already gone. */
int grpc_call_send_latest(struct grpc_call *call, struct grpc_msg *m);

/* Server-streaming: sends one message.  Returns 0, or -ECONNRESET if the
 * stream is already gone, -EMSGSIZE if len > GRPC_MAX_MESSAGE, -ENOBUFS if
 * the peer is not reading and too much output is already queued for it. */
int grpc_call_send(struct grpc_call *call, const uint8_t *msg, size_t len);
/* Unary: sends the one response message and status OK.  Always ends the
 * call: a message refused with -EMSGSIZE or -ENOBUFS ends it with
 * RESOURCE_EXHAUSTED instead. */
int grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len);
/* A unary request as d's message: grpc_pb_check with lim, then protobuf-c's
 * unpack (free it with protobuf_c_message_free_unpacked).  On refusal ends
 * the call, RESOURCE_EXHAUSTED for a message over lim and INVALID_ARGUMENT
 * for one that is malformed, each saying why, and returns NULL. */
ProtobufCMessage *grpc_call_unpack(struct grpc_call *call, const ProtobufCMessageDescriptor *d,
                                   const uint8_t *req, size_t len,
                                   const struct grpc_pb_limits *lim);
/* Packs msg with protobuf-c and replies (unary). */
int grpc_call_reply_pb(struct grpc_call *call, const ProtobufCMessage *msg);
/* Ends the call with status and optional message (printf-style; NULL for
 * none).  Uses Trailers-Only when nothing was sent yet.  After this the call
 * pointer is invalid for the caller. */
int grpc_call_finish(struct grpc_call *call, int status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Registers fn to run when the peer cancels the stream, the connection
 * drops, or the server is freed before the handler finished the call.  After
 * fn returns the call is freed; fn must not call grpc_call_finish.  Without
 * it, such a call stays valid (sends fail with -ECONNRESET) until the
 * handler ends it with grpc_call_finish or grpc_call_reply. */
void grpc_call_on_cancel(struct grpc_call *call, void (*fn)(struct grpc_call *call, void *ud),
                         void *ud);

/* ---- client (client.c): one call per connection ---- */

struct grpc_client_call;

/* Called for every response message; return non-zero to cancel the call
 * (on_done then reports GRPC_STATUS_CANCELLED). */
typedef int (*grpc_client_msg_fn)(const uint8_t *msg, size_t len, void *ud);
/* Called exactly once, when the call ends for any reason: the server's
 * status and message, or a local status (UNAVAILABLE when the socket cannot
 * be reached or the connection breaks, DEADLINE_EXCEEDED on timeout,
 * CANCELLED on cancel, INTERNAL on a protocol error).  After it returns the
 * call object is freed. */
typedef void (*grpc_client_done_fn)(int status, const char *message, void *ud);

/* Connects to socket_path, sends one request message to method and reads
 * responses until the server ends the stream.  timeout_ms = 0 means none.
 * The request is copied.  Never sends keepalive PINGs.  Returns 0 (on_done
 * will be called) or -errno (it will not). *out may be NULL. */
int grpc_client_call_start(uv_loop_t *loop, const char *socket_path, const char *method,
                           const uint8_t *req, size_t req_len, uint64_t timeout_ms,
                           grpc_client_msg_fn on_msg, grpc_client_done_fn on_done, void *ud,
                           struct grpc_client_call **out);
/* Cancels a call in progress; on_done runs (with CANCELLED) before this
 * returns or on the next loop iteration. */
void grpc_client_call_cancel(struct grpc_client_call *call);

/* Blocking helper for command-line tools: runs a private loop for one unary
 * call.  *reply is a heap buffer (may be NULL with *reply_len 0) when the
 * status is OK; *message a heap string or NULL.  Returns the gRPC status. */
int grpc_client_unary_sync(const char *socket_path, const char *method, const uint8_t *req,
                           size_t req_len, uint64_t timeout_ms, uint8_t **reply,
                           size_t *reply_len, char **message);

#endif
