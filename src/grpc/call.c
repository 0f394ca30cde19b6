/* gRPC server calls: one struct grpc_call per HTTP/2 stream (see
 * server.c for the connections that carry them).
 *
 * A call is attached to its stream with nghttp2_session_set_stream_user_data;
 * every field and frame of its request passes h2-request.c's HTTP/2 checks
 * (nghttp2's own are off) before anything here acts on it; the request is
 * deframed as DATA arrives and the handler runs once the request stream has
 * ended with exactly one message.  Responses are HEADERS, then DATA pulled
 * by a data provider from the call's queue (NGHTTP2_ERR_DEFERRED while
 * empty), then trailers; errors before any output use Trailers-Only.
 * grpc_call_send_latest keeps, per stream, only the message being sent and
 * the latest one, shared between streams.
 *
 * Lifetimes: a call is freed in the stream-close callback, except that a call
 * its handler still holds gets on_cancel first, or, without on_cancel, is
 * detached and freed by the handler's final grpc_call_finish/reply.
 *
 * Must never: block, trust a peer-supplied size before checking it against
 * GRPC_MAX_MESSAGE, call nghttp2_session_mem_send from inside an nghttp2
 * callback, or log above debug. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/diag.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "grpc/server-internal.h"

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

void call_unlink(struct grpc_call *call)
{
        struct grpc_conn *c = call->conn;
        DLIST_REMOVE(c->calls, call);
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

void call_free(struct grpc_call *call)
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
void call_stream_gone(struct grpc_call *call, bool free_now)
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

ProtobufCMessage *grpc_call_unpack(struct grpc_call *call, const ProtobufCMessageDescriptor *d,
                                   const uint8_t *req, size_t len,
                                   const struct grpc_pb_limits *lim)
{
        struct diag why = { 0 };
        int r = grpc_pb_check(d, req, len, lim, &why);
        if (r == -E2BIG) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", why.message);
                return NULL;
        }
        ProtobufCMessage *m = r == 0 ? protobuf_c_message_unpack(d, NULL, len, req) : NULL;
        if (!m)
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed %s%s%s",
                                 d->short_name, r < 0 ? ": " : "", r < 0 ? why.message : "");
        return m;
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

void grpc_call_on_cancel(struct grpc_call *call, void (*fn)(struct grpc_call *call, void *ud),
                         void *ud)
{
        call->on_cancel = fn;
        call->cancel_ud = ud;
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
        h2_request_init(&call->h2);
        grpc_deframer_init(&call->deframer, GRPC_MAX_MESSAGE);
        if (!c->calls && c->io.has_socket && c->got_settings)
                uv_timer_stop(&c->timer); /* no longer idle */
        DLIST_PREPEND(c->calls, call);
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
        if (frame->hd.type != NGHTTP2_HEADERS)
                return 0;
        struct grpc_call *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!call)
                return 0;
        call->header_bytes += namelen + valuelen + 32;
        if (call->header_bytes > SERVER_HEADER_BYTES_CAP)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        int r = h2_request_on_header(session, frame, &call->h2, name, namelen, value, valuelen);
        if (r != 0)
                return r == H2_REQUEST_DROP ? 0 : r;
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0; /* trailers: nothing in them for us */

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
        if (!h2_request_on_frame_recv(session, frame, &call->h2)) {
                call->rejected = true; /* reset: PROTOCOL_ERROR */
                return 0;
        }
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
        if (!call)
                return 0;
        if (!h2_request_on_data_chunk(session, stream_id, &call->h2, len))
                call->rejected = true; /* reset: PROTOCOL_ERROR */
        else if (!call->rejected)
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

nghttp2_session_callbacks *server_callbacks_new(void)
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
