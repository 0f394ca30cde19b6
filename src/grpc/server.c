/* gRPC server: a Unix-socket listener, one nghttp2 session per connection,
 * one struct grpc_call per HTTP/2 stream.
 *
 * Bytes come in through nghttp2_session_mem_recv and go out through
 * h2_io_flush (h2.c).  A call is attached to its stream with
 * nghttp2_session_set_stream_user_data; its request is deframed as DATA
 * arrives and the handler runs once the request stream has ended with exactly
 * one message.  Responses are HEADERS, then DATA pulled by a data provider
 * from the call's queue (NGHTTP2_ERR_DEFERRED while empty), then trailers;
 * errors before any output use Trailers-Only.
 *
 * Lifetimes: a call is freed in the stream-close callback, except that a call
 * its handler still holds gets on_cancel first, or, without on_cancel, is
 * detached and freed by the handler's final grpc_call_finish/reply.  A
 * connection is closed with uv_close and its memory (session, remaining
 * calls) freed in the close callback, never inside an nghttp2 callback.
 *
 * Must never: block, trust a peer-supplied size before checking it against
 * GRPC_MAX_MESSAGE, call nghttp2_session_mem_send from inside an nghttp2
 * callback, let one connection's failure touch another, or log above debug. */
#include "grpc/grpc.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "grpc/h2.h"
#include "grpc/server-fuzz.h"

/* Defaults of struct grpc_server_limits (see grpc.h). */
#define SERVER_MAX_CONNS 128
#define SERVER_MAX_STREAMS 100
#define SERVER_MAX_CALLS 1024
#define SERVER_IDLE_MS (5 * 60 * 1000)
/* memory freed by closed connections goes back to the system this long after
 * the last close (malloc_trim), so a burst of clients leaves no bloat */
#define SERVER_TRIM_MS 1000
#define SERVER_STREAM_WINDOW (1u * 1024 * 1024)
#define SERVER_CONN_WINDOW (16u * 1024 * 1024)
/* partial request messages buffered per connection, over all its streams */
#define SERVER_CONN_INPUT_CAP (64u * 1024 * 1024)
/* response bytes queued for a peer that does not read, per call and in all */
#define SERVER_CALL_OUTPUT_CAP (16u * 1024 * 1024)
#define SERVER_CONN_OUTPUT_CAP (64u * 1024 * 1024)
#define SERVER_HEADER_BYTES_CAP (64u * 1024)
#define SERVER_PATH_MAX 512
#define SERVER_HANDSHAKE_MS 30000
#define SERVER_DRAIN_MS 2000

struct grpc_server {
        uv_loop_t *loop;
        uv_pipe_t listener;
        bool listener_open;
        char *path;
        const struct grpc_method *methods;
        size_t n_methods;
        void *userdata;
        nghttp2_session_callbacks *callbacks;
        struct grpc_conn *conns;
        size_t n_conns; /* connections not yet closing */
        size_t n_calls; /* calls on the connections' lists, over all of them */
        struct grpc_server_limits limits;
        uv_timer_t trim_timer;
        unsigned handles_open;
        bool freeing;
        /* Accepts are deferred to an idle callback, one per loop turn: libuv
         * stops polling the listener until uv_accept() is called, so a client
         * reconnecting in a tight loop cannot starve established connections,
         * and at SERVER_MAX_CONNS the listener simply stays paused. */
        uv_idle_t accept_idle;
        bool accept_pending;
};

struct grpc_conn {
        struct h2_io io; /* first: the pipe's handle points here */
        struct grpc_server *server;
        struct grpc_conn *prev, *next;
        nghttp2_session *session;
        struct grpc_call *calls;
        uv_timer_t timer; /* handshake, idle or drain deadline */
        uint64_t idle_since; /* loop time the last call went (or accept) */
        size_t n_calls;      /* calls on the list */
        size_t in_buffered;
        size_t out_queued; /* response bytes in call queues */
        unsigned handles_open;
        bool in_session;  /* inside mem_recv / mem_send */
        bool flush_again; /* output submitted while in_session */
        bool reading;
        bool draining;
        bool closing;
        bool got_settings;
};

struct grpc_call {
        struct grpc_conn *conn; /* NULL once detached from a closed stream */
        struct grpc_call *prev, *next;
        int32_t stream_id;
        const struct grpc_method *method;
        char *bad_path; /* an unknown :path, for the error message */
        char *encoding; /* grpc-encoding other than identity */
        size_t header_bytes;
        bool is_post, grpc_content_type;

        struct grpc_deframer deframer;
        size_t accounted; /* bytes of deframer counted in conn->in_buffered */
        uint8_t *req;
        size_t req_len;
        unsigned n_msgs;

        bool shed;     /* reset at the server's call cap, not yet closed */
        bool held;     /* handler owns the call */
        bool rejected; /* request input is ignored from now on */
        bool response_started;
        bool finished; /* final status decided */
        bool deferred; /* data provider waits for output */
        int status;
        char *message;
        struct h2_chunk *out_head, *out_tail;
        size_t out_off, out_bytes;
        /* grpc_call_send_latest: [0] is being sent (from latest_off) or
         * waits; [1] waits behind a [0] already partly sent */
        struct grpc_msg *latest[2];
        size_t latest_off;

        void (*on_cancel)(struct grpc_call *call, void *ud);
        void *cancel_ud;
};

struct grpc_msg {
        unsigned refs;
        size_t len; /* prefix + payload */
        uint8_t data[];
};

static void conn_flush(struct grpc_conn *c);
static void conn_close(struct grpc_conn *c);
static void conn_idle_begin(struct grpc_conn *c);

/* ---- shared messages ---- */

struct grpc_msg *grpc_msg_new(const uint8_t *msg, size_t len)
{
        if (len > GRPC_MAX_MESSAGE)
                return NULL;
        struct grpc_msg *m = xmalloc(sizeof(*m) + 5 + len);
        m->refs = 1;
        m->len = 5 + len;
        grpc_frame_prefix(m->data, len);
        if (len)
                memcpy(m->data + 5, msg, len);
        return m;
}

void grpc_msg_unref(struct grpc_msg *m)
{
        if (m && --m->refs == 0)
                free(m);
}

/* ---- calls ---- */

static void call_unlink(struct grpc_call *call)
{
        struct grpc_conn *c = call->conn;
        if (call->prev)
                call->prev->next = call->next;
        else
                c->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        call->prev = call->next = NULL;
        c->n_calls--;
        c->server->n_calls--;
        if (!c->calls)
                conn_idle_begin(c);
}

static void call_release_input(struct grpc_call *call)
{
        if (call->conn)
                call->conn->in_buffered -= call->accounted;
        call->accounted = 0;
        grpc_deframer_release(&call->deframer);
        free(call->req);
        call->req = NULL;
}

static void call_drop_output(struct grpc_call *call)
{
        if (call->conn)
                call->conn->out_queued -= call->out_bytes;
        call->out_bytes = 0;
        call->out_off = 0;
        h2_chunks_free(&call->out_head, &call->out_tail);
        grpc_msg_unref(call->latest[0]);
        grpc_msg_unref(call->latest[1]);
        call->latest[0] = call->latest[1] = NULL;
        call->latest_off = 0;
}

/* Copies up to cap bytes of the latest messages, releasing those sent. */
static size_t call_latest_read(struct grpc_call *call, uint8_t *buf, size_t cap)
{
        size_t n = 0;
        while (n < cap && call->latest[0]) {
                struct grpc_msg *m = call->latest[0];
                size_t k = m->len - call->latest_off;
                if (k > cap - n)
                        k = cap - n;
                memcpy(buf + n, m->data + call->latest_off, k);
                n += k;
                call->latest_off += k;
                if (call->latest_off == m->len) {
                        grpc_msg_unref(m);
                        call->latest[0] = call->latest[1];
                        call->latest[1] = NULL;
                        call->latest_off = 0;
                }
        }
        return n;
}

static void call_free(struct grpc_call *call)
{
        call_release_input(call);
        call_drop_output(call);
        free(call->bad_path);
        free(call->encoding);
        free(call->message);
        free(call);
}

/* The stream is gone (peer reset, connection closed): a held call gets its
 * on_cancel and is freed; one held without on_cancel is detached and left for
 * the handler's final grpc_call_finish.  With free_now false the call stays
 * on the connection's list, to be freed with the connection. */
static void call_stream_gone(struct grpc_call *call, bool free_now)
{
        call_release_input(call);
        if (call->held && !call->on_cancel) {
                call_drop_output(call);
                call_unlink(call);
                call->conn = NULL;
                return;
        }
        if (call->held) {
                call->held = false;
                call->finished = true;
                call->on_cancel(call, call->cancel_ud);
        }
        if (free_now) {
                call_unlink(call);
                call_free(call);
        }
}

static void call_submit_trailers_only(struct grpc_call *call, const char *http_status, int status,
                                      const char *message)
{
        char code[16];
        snprintf(code, sizeof(code), "%d", status);
        _cleanup_free_ char *enc = message && *message ? grpc_percent_encode(message) : NULL;
        nghttp2_nv nva[] = {
                h2_nv(":status", http_status),
                h2_nv("content-type", "application/grpc"),
                h2_nv("grpc-status", code),
                h2_nv("grpc-message", enc ? enc : ""),
        };
        int r = nghttp2_submit_response(call->conn->session, call->stream_id, nva,
                                        enc ? 4 : 3, NULL);
        if (r < 0)
                log_debug("grpc", "submit trailers-only stream=%d: %s", call->stream_id,
                          nghttp2_strerror(r));
}

static ssize_t call_data_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                              size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                              void *user_data)
{
        struct grpc_call *call = source->ptr;
        size_t n = h2_chunks_read(&call->out_head, &call->out_tail, &call->out_off, buf, length);
        call->out_bytes -= n;
        call->conn->out_queued -= n;
        n += call_latest_read(call, buf + n, length - n);
        if (call->out_head || call->latest[0])
                return (ssize_t)n;
        if (!call->finished) {
                if (n)
                        return (ssize_t)n;
                call->deferred = true;
                return NGHTTP2_ERR_DEFERRED;
        }

        char code[16];
        snprintf(code, sizeof(code), "%d", call->status);
        _cleanup_free_ char *enc =
                call->message && *call->message ? grpc_percent_encode(call->message) : NULL;
        nghttp2_nv nva[] = { h2_nv("grpc-status", code), h2_nv("grpc-message", enc ? enc : "") };
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        if (nghttp2_submit_trailer(session, stream_id, nva, enc ? 2 : 1) == 0)
                *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        return (ssize_t)n;
}

static int call_start_response(struct grpc_call *call)
{
        nghttp2_nv nva[] = { h2_nv(":status", "200"), h2_nv("content-type", "application/grpc") };
        nghttp2_data_provider prd = { .source.ptr = call, .read_callback = call_data_read };
        int r = nghttp2_submit_response(call->conn->session, call->stream_id, nva, 2, &prd);
        if (r < 0)
                return -ECONNRESET;
        call->response_started = true;
        return 0;
}

static void call_resume(struct grpc_call *call)
{
        if (call->deferred) {
                call->deferred = false;
                nghttp2_session_resume_data(call->conn->session, call->stream_id);
        }
}

/* Decides the final status; the caller flushes. */
static void call_end(struct grpc_call *call, int status, char *message)
{
        call->held = false;
        call->finished = true;
        call->status = status;
        free(call->message);
        call->message = message;
        if (!call->conn || call->conn->closing)
                return;
        if (!call->response_started)
                call_submit_trailers_only(call, "200", status, message);
        else
                call_resume(call);
}

/* Refuses a request that has not reached its handler. */
static void call_reject(struct grpc_call *call, int status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void call_reject(struct grpc_call *call, int status, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        log_debug("grpc", "reject stream=%d status=%s: %s", call->stream_id,
                  grpc_status_name(status), msg);
        call->rejected = true;
        call_release_input(call);
        call_end(call, status, msg);
}

int grpc_call_send(struct grpc_call *call, const uint8_t *msg, size_t len)
{
        if (len > GRPC_MAX_MESSAGE)
                return -EMSGSIZE;
        struct grpc_conn *c = call->conn;
        if (!c || c->closing || call->finished)
                return -ECONNRESET;
        if (call->out_bytes + len > SERVER_CALL_OUTPUT_CAP ||
            c->out_queued + len > SERVER_CONN_OUTPUT_CAP)
                return -ENOBUFS;
        if (!call->response_started && call_start_response(call) < 0)
                return -ECONNRESET;

        struct h2_chunk *chunk = h2_chunk_new(msg, len);
        if (call->out_tail)
                call->out_tail->next = chunk;
        else
                call->out_head = chunk;
        call->out_tail = chunk;
        call->out_bytes += chunk->len;
        c->out_queued += chunk->len;
        call_resume(call);
        conn_flush(c);
        return 0;
}

int grpc_call_send_latest(struct grpc_call *call, struct grpc_msg *m)
{
        struct grpc_conn *c = call->conn;
        if (!c || c->closing || call->finished)
                return -ECONNRESET;
        if (!call->response_started && call_start_response(call) < 0)
                return -ECONNRESET;
        m->refs++;
        int slot = call->latest[0] && call->latest_off > 0 ? 1 : 0;
        grpc_msg_unref(call->latest[slot]);
        call->latest[slot] = m;
        call_resume(call);
        conn_flush(c);
        return 0;
}

int grpc_call_finish(struct grpc_call *call, int status, const char *fmt, ...)
{
        if (!call->conn) {
                /* detached: the stream went away while the handler held it */
                call_free(call);
                return -ECONNRESET;
        }
        if (call->finished)
                return -EALREADY;
        char *msg = NULL;
        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                msg = xvasprintf(fmt, ap);
                va_end(ap);
        }
        struct grpc_conn *c = call->conn;
        call_end(call, status, msg);
        conn_flush(c);
        return 0;
}

int grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len)
{
        int r = grpc_call_send(call, msg, len);
        if (r == -EMSGSIZE || r == -ENOBUFS) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                 "response of %zu bytes exceeds the limit", len);
                return r;
        }
        int f = grpc_call_finish(call, GRPC_STATUS_OK, NULL);
        return r < 0 ? r : f;
}

int grpc_call_reply_pb(struct grpc_call *call, const ProtobufCMessage *msg)
{
        size_t len = protobuf_c_message_get_packed_size(msg);
        if (len > GRPC_MAX_MESSAGE)
                return grpc_call_reply(call, NULL, len);
        _cleanup_free_ uint8_t *buf = xmalloc(len);
        protobuf_c_message_pack(msg, buf);
        return grpc_call_reply(call, buf, len);
}

int grpc_call_send_pb(struct grpc_call *call, const ProtobufCMessage *msg)
{
        size_t len = protobuf_c_message_get_packed_size(msg);
        if (len > GRPC_MAX_MESSAGE)
                return -EMSGSIZE;
        _cleanup_free_ uint8_t *buf = xmalloc(len);
        protobuf_c_message_pack(msg, buf);
        return grpc_call_send(call, buf, len);
}

void grpc_call_on_cancel(struct grpc_call *call, void (*fn)(struct grpc_call *call, void *ud),
                         void *ud)
{
        call->on_cancel = fn;
        call->cancel_ud = ud;
}

const char *grpc_call_method(const struct grpc_call *call)
{
        return call->method ? call->method->path : "";
}

/* ---- request input (nghttp2 callbacks) ---- */

static int call_on_msg(const uint8_t *msg, size_t len, void *ud)
{
        struct grpc_call *call = ud;
        if (++call->n_msgs > 1)
                return -E2BIG;
        call->req = xmalloc(len ? len : 1);
        memcpy(call->req, msg, len);
        call->req_len = len;
        return 0;
}

static void call_feed(struct grpc_call *call, const uint8_t *data, size_t len)
{
        struct grpc_conn *c = call->conn;
        int r = grpc_deframer_feed(&call->deframer, data, len, call_on_msg, call);
        if (r == -EMSGSIZE) {
                const uint8_t *h = call->deframer.hdr;
                uint32_t n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
                call_reject(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                            "grpc: received message larger than max (%u vs. %u)", n,
                            GRPC_MAX_MESSAGE);
                return;
        }
        if (r == -ENOTSUP) {
                if (call->encoding)
                        call_reject(call, GRPC_STATUS_UNIMPLEMENTED,
                                    "grpc: compression \"%s\" is not supported", call->encoding);
                else
                        call_reject(call, GRPC_STATUS_INTERNAL,
                                    "grpc: compressed flag set with identity or empty encoding");
                return;
        }
        if (r == -E2BIG) {
                call_reject(call, GRPC_STATUS_INTERNAL,
                            "grpc: more than one request message for a unary request");
                return;
        }
        size_t have = call->deframer.have + call->req_len;
        c->in_buffered += have - call->accounted;
        call->accounted = have;
        if (c->in_buffered > SERVER_CONN_INPUT_CAP)
                call_reject(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                            "grpc: connection input buffer full");
}

static void call_request_end(struct grpc_call *call, void *userdata)
{
        if (call->rejected || call->held || call->finished)
                return;
        if (call->deframer.hdr_len > 0) {
                call_reject(call, GRPC_STATUS_INTERNAL, "grpc: request ended inside a message");
                return;
        }
        if (call->n_msgs == 0) {
                call_reject(call, GRPC_STATUS_INTERNAL, "grpc: received no request message");
                return;
        }
        call->rejected = true; /* no more input is expected */
        _cleanup_free_ uint8_t *req = TAKE_PTR(call->req);
        size_t len = call->req_len;
        call_release_input(call);
        call->held = true;
        log_trace("grpc", "call stream=%d method=%s len=%zu", call->stream_id,
                  call->method->path, len);
        call->method->handler(call, req ? req : (const uint8_t *)"", len, userdata);
}

static const struct grpc_method *server_find_method(const struct grpc_server *s,
                                                    const uint8_t *path, size_t len)
{
        for (size_t i = 0; i < s->n_methods; i++)
                if (h2_eq(path, len, s->methods[i].path))
                        return &s->methods[i];
        return NULL;
}

/* At the server's call cap: resets the oldest call of the connection with the
 * most calls, so a peer that piles up streams pays for it and a connection
 * with one stream (the kubelet's ListAndWatch) keeps it.  The reset goes out
 * with that connection's next flush; the new call is admitted meanwhile. */
static void server_shed_call(struct grpc_server *s)
{
        struct grpc_conn *busiest = NULL;
        for (struct grpc_conn *c = s->conns; c; c = c->next)
                if (!c->closing && c->calls && (!busiest || c->n_calls > busiest->n_calls))
                        busiest = c;
        if (!busiest)
                return;
        struct grpc_call *oldest = NULL; /* calls are pushed at the front */
        for (struct grpc_call *call = busiest->calls; call; call = call->next)
                if (!call->shed)
                        oldest = call;
        if (!oldest)
                return;
        oldest->shed = true;
        log_debug("grpc", "call cap reached, resetting stream=%d of a connection with %zu calls",
                  oldest->stream_id, busiest->n_calls);
        nghttp2_submit_rst_stream(busiest->session, NGHTTP2_FLAG_NONE, oldest->stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        conn_flush(busiest);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
        struct grpc_conn *c = ud;
        if (c->closing)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        struct grpc_server *s = c->server;
        if (s->n_calls >= s->limits.max_calls)
                server_shed_call(s);
        struct grpc_call *call = xcalloc(1, sizeof(*call));
        call->conn = c;
        call->stream_id = frame->hd.stream_id;
        grpc_deframer_init(&call->deframer, GRPC_MAX_MESSAGE);
        if (!c->calls && c->io.has_socket && c->got_settings)
                uv_timer_stop(&c->timer); /* no longer idle */
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        c->n_calls++;
        s->n_calls++;
        nghttp2_session_set_stream_user_data(session, call->stream_id, call);
        return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
        struct grpc_conn *c = ud;
        if (c->closing)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        call->header_bytes += namelen + valuelen + 32;
        if (call->header_bytes > SERVER_HEADER_BYTES_CAP)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;

        if (h2_eq(name, namelen, ":method")) {
                call->is_post = h2_eq(value, valuelen, "POST");
        } else if (h2_eq(name, namelen, ":path")) {
                call->method = server_find_method(c->server, value, valuelen);
                free(call->bad_path);
                call->bad_path = xstrndup((const char *)value,
                                          valuelen < SERVER_PATH_MAX ? valuelen : SERVER_PATH_MAX);
        } else if (h2_eq(name, namelen, "content-type")) {
                call->grpc_content_type = h2_is_grpc_content_type(value, valuelen);
        } else if (h2_eq(name, namelen, "grpc-encoding")) {
                free(call->encoding);
                call->encoding = h2_eq(value, valuelen, "identity")
                                         ? NULL
                                         : xstrndup((const char *)value, valuelen < 64 ? valuelen : 64);
        }
        return 0;
}

static void call_check_request_headers(struct grpc_call *call)
{
        if (!call->is_post) {
                call->rejected = true;
                nghttp2_submit_rst_stream(call->conn->session, NGHTTP2_FLAG_NONE, call->stream_id,
                                          NGHTTP2_PROTOCOL_ERROR);
                return;
        }
        if (!call->grpc_content_type) {
                /* 415 so that plain HTTP clients do not take it for success */
                call->rejected = true;
                call->finished = true;
                call_submit_trailers_only(call, "415", GRPC_STATUS_INTERNAL,
                                          "invalid gRPC request content-type");
                return;
        }
        if (!call->method)
                call_reject(call, GRPC_STATUS_UNIMPLEMENTED, "unknown method %s",
                            call->bad_path ? call->bad_path : "");
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
        struct grpc_conn *c = ud;
        if (c->closing)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
                if (!c->got_settings) {
                        c->got_settings = true; /* the handshake deadline gives way to idleness */
                        if (c->io.has_socket)
                                uv_timer_stop(&c->timer);
                        if (!c->calls)
                                conn_idle_begin(c);
                }
                return 0;
        }
        if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
                return 0;
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
                call_check_request_headers(call);
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
                call_request_end(call, c->server->userdata);
        return 0;
}

static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                              const uint8_t *data, size_t len, void *ud)
{
        struct grpc_conn *c = ud;
        if (c->closing)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
        if (call && !call->rejected)
                call_feed(call, data, len);
        return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
        /* The response ended before the request did (a rejected request):
         * tell the peer to stop sending, as gRPC servers do. */
        if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
            nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0)
                nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                          NGHTTP2_NO_ERROR);
        return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *ud)
{
        struct grpc_conn *c = ud;
        if (c->closing)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
        if (!call)
                return 0;
        nghttp2_session_set_stream_user_data(session, stream_id, NULL);
        log_trace("grpc", "stream closed stream=%d error=%u", stream_id, error_code);
        call_stream_gone(call, true);
        return 0;
}

static nghttp2_session_callbacks *server_callbacks_new(void)
{
        nghttp2_session_callbacks *cbs;
        if (nghttp2_session_callbacks_new(&cbs) != 0)
                abort();
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        return cbs;
}

/* ---- connections ---- */

static int conn_session_new(struct grpc_conn *c, nghttp2_session_callbacks *cbs)
{
        int r = nghttp2_session_server_new(&c->session, cbs, c);
        if (r != 0)
                return -ENOMEM;
        nghttp2_settings_entry iv[] = {
                { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->server->limits.max_streams },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, SERVER_STREAM_WINDOW },
                { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, SERVER_HEADER_BYTES_CAP },
        };
        r = nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, ARRAY_SIZE(iv));
        if (r == 0)
                r = nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0,
                                                          SERVER_CONN_WINDOW);
        return r == 0 ? 0 : -EPROTO;
}

/* Frees what is left once no nghttp2 callback can run any more. */
static void conn_free(struct grpc_conn *c)
{
        nghttp2_session_del(c->session);
        while (c->calls) {
                struct grpc_call *call = c->calls;
                call_unlink(call);
                call->conn = NULL;
                call_free(call);
        }
        free(c);
}

static void server_maybe_free(struct grpc_server *s)
{
        if (!s->freeing || s->handles_open > 0)
                return;
        nghttp2_session_callbacks_del(s->callbacks);
        free(s->path);
        free(s);
}

static void server_on_trim(uv_timer_t *t)
{
        malloc_trim(0);
}

static void conn_on_handle_closed(uv_handle_t *h)
{
        struct grpc_conn *c = h->data;
        if (--c->handles_open > 0)
                return;
        struct grpc_server *s = c->server;
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        conn_free(c);
        s->handles_open--;
        if (!s->freeing && !uv_is_active((uv_handle_t *)&s->trim_timer))
                uv_timer_start(&s->trim_timer, server_on_trim, SERVER_TRIM_MS, 0);
        server_maybe_free(s);
}

static void server_accept_one(uv_idle_t *idle);

/* Cancels every call and closes the socket; memory goes in the close
 * callbacks.  Safe to call from inside nghttp2 callbacks and twice. */
static void conn_close(struct grpc_conn *c)
{
        if (c->closing)
                return;
        c->closing = true;
        c->server->n_conns--;
        if (c->server->accept_pending && !c->server->freeing)
                uv_idle_start(&c->server->accept_idle, server_accept_one);
        log_debug("grpc", "connection closing");
        struct grpc_call *next;
        for (struct grpc_call *call = c->calls; call; call = next) {
                next = call->next;
                call_stream_gone(call, false);
        }
        if (!c->io.has_socket)
                return;
        uv_close((uv_handle_t *)&c->io.pipe, conn_on_handle_closed);
        uv_close((uv_handle_t *)&c->timer, conn_on_handle_closed);
}

static void conn_on_timer(uv_timer_t *t)
{
        conn_close(t->data);
}

static void conn_drain(struct grpc_conn *c);

/* No open stream for the idle time: GOAWAY, then close. */
static void conn_on_idle_timer(uv_timer_t *t)
{
        struct grpc_conn *c = t->data;
        log_debug("grpc", "closing an idle connection");
        nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->session),
                              NGHTTP2_NO_ERROR, NULL, 0);
        conn_drain(c);
}

/* The connection has no open stream from now: its idle deadline starts
 * (after the handshake), and it becomes the first to go if the server is at
 * its connection cap with a newcomer waiting. */
static void conn_idle_begin(struct grpc_conn *c)
{
        if (c->closing || c->draining || !c->io.has_socket)
                return;
        struct grpc_server *s = c->server;
        c->idle_since = uv_now(s->loop);
        if (c->got_settings)
                uv_timer_start(&c->timer, conn_on_idle_timer, s->limits.idle_ms, 0);
        if (s->accept_pending && !s->freeing && s->n_conns >= s->limits.max_conns)
                uv_idle_start(&s->accept_idle, server_accept_one);
}

/* At the connection cap: closes the connection idle the longest (no open
 * stream; one still in its handshake counts).  Returns whether one went. */
static bool server_evict_idle(struct grpc_server *s)
{
        struct grpc_conn *victim = NULL;
        /* the list is newest first: on a tie the older one wins */
        for (struct grpc_conn *c = s->conns; c; c = c->next)
                if (!c->closing && !c->draining && !c->calls &&
                    (!victim || c->idle_since <= victim->idle_since))
                        victim = c;
        if (!victim)
                return false;
        log_debug("grpc", "connection cap reached, closing the longest idle connection");
        conn_close(victim);
        return true;
}

/* Sends what is queued (a GOAWAY, typically), then closes. */
static void conn_drain(struct grpc_conn *c)
{
        if (c->closing || c->draining)
                return;
        c->draining = true;
        if (c->reading) {
                uv_read_stop((uv_stream_t *)&c->io.pipe);
                c->reading = false;
        }
        conn_flush(c);
        if (c->closing)
                return;
        if (c->io.write_pending == 0 || !c->io.has_socket) {
                conn_close(c);
                return;
        }
        uv_timer_start(&c->timer, conn_on_timer, SERVER_DRAIN_MS, 0);
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void conn_update_reading(struct grpc_conn *c)
{
        if (!c->io.has_socket || c->closing || c->draining)
                return;
        if (c->reading && c->io.write_pending >= H2_WRITE_HIGH) {
                uv_read_stop((uv_stream_t *)&c->io.pipe);
                c->reading = false;
        } else if (!c->reading && c->io.write_pending < H2_WRITE_LOW) {
                if (uv_read_start((uv_stream_t *)&c->io.pipe, h2_io_alloc, conn_on_read) == 0)
                        c->reading = true;
                else
                        conn_close(c);
        }
}

static void conn_flush(struct grpc_conn *c)
{
        if (c->closing)
                return;
        if (c->in_session) {
                c->flush_again = true;
                return;
        }
        int r;
        do {
                c->flush_again = false;
                c->in_session = true;
                r = h2_io_flush(&c->io, c->session);
                c->in_session = false;
        } while (r == 0 && c->flush_again && !c->closing);
        if (c->closing)
                return;
        if (r < 0) {
                log_debug("grpc", "connection write failed: %d", r);
                conn_close(c);
                return;
        }
        if (c->draining) {
                if (c->io.write_pending == 0)
                        conn_close(c);
                return;
        }
        if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session) &&
            c->io.write_pending == 0) {
                conn_close(c);
                return;
        }
        conn_update_reading(c);
}

/* Feeds peer bytes to the session; a protocol error ends the connection
 * after a GOAWAY where the peer speaks HTTP/2 at all. */
static int conn_feed(struct grpc_conn *c, const uint8_t *data, size_t len)
{
        c->in_session = true;
        ssize_t r = nghttp2_session_mem_recv(c->session, data, len);
        c->in_session = false;
        if (c->closing)
                return r < 0 ? (int)r : 0;
        if (r < 0) {
                log_debug("grpc", "connection protocol error: %s", nghttp2_strerror((int)r));
                if (r != NGHTTP2_ERR_BAD_CLIENT_MAGIC)
                        nghttp2_session_terminate_session(c->session, NGHTTP2_PROTOCOL_ERROR);
                conn_drain(c);
                return (int)r;
        }
        conn_flush(c);
        return 0;
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
        struct grpc_conn *c = h2_container_of(stream, struct grpc_conn, io.pipe);
        if (nread == 0 || c->closing)
                return;
        if (nread < 0) {
                conn_close(c);
                return;
        }
        conn_feed(c, (const uint8_t *)buf->base, (size_t)nread);
}

static void conn_on_written(struct h2_io *io)
{
        struct grpc_conn *c = h2_container_of(io, struct grpc_conn, io);
        if (c->closing)
                return;
        if (io->write_error) {
                conn_close(c);
                return;
        }
        conn_flush(c);
}

static void server_accept_one(uv_idle_t *idle)
{
        struct grpc_server *s = idle->data;
        uv_idle_stop(idle);
        if (!s->accept_pending || s->freeing)
                return;
        if (s->n_conns >= s->limits.max_conns && !server_evict_idle(s))
                return; /* a connection closing or going idle restarts us */
        s->accept_pending = false;

        struct grpc_conn *c = xcalloc(1, sizeof(*c));
        c->server = s;
        c->io.has_socket = true;
        c->io.on_written = conn_on_written;
        uv_pipe_init(s->loop, &c->io.pipe, 0);
        uv_timer_init(s->loop, &c->timer);
        c->io.pipe.data = c;
        c->timer.data = c;
        c->handles_open = 2;
        c->idle_since = uv_now(s->loop);
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        s->handles_open++;

        int r = uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->io.pipe);
        if (r < 0 || conn_session_new(c, s->callbacks) < 0) {
                log_debug("grpc", "connection refused: %s", r < 0 ? uv_strerror(r) : "session");
                conn_close(c);
                return;
        }
        uv_timer_start(&c->timer, conn_on_timer, SERVER_HANDSHAKE_MS, 0);
        conn_flush(c); /* our SETTINGS go first */
}

static void server_on_connection(uv_stream_t *listener, int status)
{
        struct grpc_server *s = listener->data;
        if (status < 0 || s->freeing)
                return;
        s->accept_pending = true;
        uv_idle_start(&s->accept_idle, server_accept_one);
}

/* ---- server ---- */

/* Binds and listens under a temporary name in the same directory, then
 * renames the socket into place: its path appears only once it accepts, so a
 * peer that waits for the file never gets ECONNREFUSED, and an old file at
 * the path is replaced atomically. */
static int server_listen_fd(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *tmp = xasprintf("%s.%ld~", path, (long)getpid());
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        /* a path too long for the temporary name is bound directly */
        const char *bind_path = strlen(tmp) < sizeof(sa.sun_path) ? tmp : path;
        strcpy(sa.sun_path, bind_path);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (unlink(bind_path) < 0 && errno != ENOENT)
                return -errno;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        if (listen(fd, 128) < 0 || (bind_path != path && rename(bind_path, path) < 0)) {
                int r = -errno;
                unlink(bind_path);
                return r;
        }
        return TAKE_FD(fd);
}

static void server_on_listener_closed(uv_handle_t *h)
{
        struct grpc_server *s = h->data;
        s->handles_open--;
        server_maybe_free(s);
}

int grpc_server_new(uv_loop_t *loop, const char *socket_path, const struct grpc_method *methods,
                    size_t n_methods, void *userdata, struct grpc_server **out)
{
        h2_ignore_sigpipe();
        int fd = server_listen_fd(socket_path);
        if (fd < 0)
                return fd;

        struct grpc_server *s = xcalloc(1, sizeof(*s));
        s->loop = loop;
        s->path = xstrdup(socket_path);
        s->methods = methods;
        s->n_methods = n_methods;
        s->userdata = userdata;
        s->callbacks = server_callbacks_new();
        s->limits = (struct grpc_server_limits){ SERVER_MAX_CONNS, SERVER_MAX_STREAMS,
                                                 SERVER_MAX_CALLS, SERVER_IDLE_MS };

        int r = uv_pipe_init(loop, &s->listener, 0);
        if (r < 0) {
                close(fd);
                unlink(socket_path);
                nghttp2_session_callbacks_del(s->callbacks);
                free(s->path);
                free(s);
                return r;
        }
        s->listener.data = s;
        s->listener_open = true;
        uv_idle_init(loop, &s->accept_idle);
        s->accept_idle.data = s;
        uv_timer_init(loop, &s->trim_timer);
        s->trim_timer.data = s;
        s->handles_open = 3;
        r = uv_pipe_open(&s->listener, fd);
        if (r < 0)
                close(fd);
        else
                r = uv_listen((uv_stream_t *)&s->listener, 128, server_on_connection);
        if (r < 0) {
                grpc_server_free(s); /* memory goes once the loop closes the handle */
                return r;
        }
        log_debug("grpc", "listening path=%s methods=%zu", socket_path, n_methods);
        *out = s;
        return 0;
}

void grpc_server_free(struct grpc_server *s)
{
        if (!s || s->freeing)
                return;
        s->freeing = true;
        struct grpc_conn *next;
        for (struct grpc_conn *c = s->conns; c; c = next) {
                next = c->next;
                conn_close(c);
        }
        if (s->listener_open) {
                s->listener_open = false;
                uv_close((uv_handle_t *)&s->listener, server_on_listener_closed);
                uv_close((uv_handle_t *)&s->accept_idle, server_on_listener_closed);
                uv_close((uv_handle_t *)&s->trim_timer, server_on_listener_closed);
                unlink(s->path);
        }
        server_maybe_free(s);
}

size_t grpc_server_connections(const struct grpc_server *s)
{
        return s->n_conns;
}

void grpc_server_set_limits(struct grpc_server *s, const struct grpc_server_limits *l)
{
        s->limits.max_conns = l->max_conns ? l->max_conns : SERVER_MAX_CONNS;
        s->limits.max_streams = l->max_streams ? l->max_streams : SERVER_MAX_STREAMS;
        s->limits.max_calls = l->max_calls ? l->max_calls : SERVER_MAX_CALLS;
        s->limits.idle_ms = l->idle_ms ? l->idle_ms : SERVER_IDLE_MS;
}

/* ---- fuzzing hook ---- */

int grpc_server_feed_for_fuzzing(const struct grpc_method *methods, size_t n_methods,
                                 void *userdata, const uint8_t *data, size_t len, size_t chunk)
{
        struct grpc_server s = {
                .methods = methods,
                .n_methods = n_methods,
                .userdata = userdata,
                .callbacks = server_callbacks_new(),
                .limits = { SERVER_MAX_CONNS, SERVER_MAX_STREAMS, SERVER_MAX_CALLS, SERVER_IDLE_MS },
        };
        struct grpc_conn *c = xcalloc(1, sizeof(*c));
        c->server = &s;
        s.n_conns = 1;
        int r = conn_session_new(c, s.callbacks);
        if (r == 0) {
                conn_flush(c);
                if (chunk == 0)
                        chunk = len ? len : 1;
                for (size_t off = 0; off < len && !c->closing && !c->draining; off += chunk) {
                        size_t n = len - off < chunk ? len - off : chunk;
                        r = conn_feed(c, data + off, n);
                }
        }
        conn_close(c);
        conn_free(c);
        nghttp2_session_callbacks_del(s.callbacks);
        return r;
}
