/* gRPC client: one call per connection, for the kubelet's Registration
 * service and the command-line tools.
 *
 * A call connects to a Unix socket, sends the HTTP/2 preface, SETTINGS and
 * one request (HEADERS + one length-prefixed DATA message with END_STREAM),
 * then reads the response headers, messages and trailers.  The status comes
 * from grpc-status (in trailers or a Trailers-Only response), else from the
 * HTTP status per gRPC's HTTP-to-gRPC mapping.  on_done runs exactly once;
 * the handles are then closed and all memory freed in their close callbacks,
 * never inside an nghttp2 callback.
 *
 * Must never: block (except grpc_client_unary_sync, which runs its own
 * loop), send PINGs of its own, accept a response message over
 * GRPC_MAX_MESSAGE, or log above debug. */
#include "grpc/grpc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "grpc/h2.h"

#define CLIENT_WINDOW (1u * 1024 * 1024)
#define CLIENT_MESSAGE_MAX 4096

struct grpc_client_call {
        struct h2_io io; /* first: the pipe's handle points here */
        uv_loop_t *loop;
        uv_connect_t connect_req;
        uv_timer_t timer;
        nghttp2_session *session;
        char *socket_path;
        char *method;
        uint64_t timeout_ms;
        struct h2_chunk *out_head, *out_tail;
        size_t out_off;
        int32_t stream_id;
        struct grpc_deframer deframer;

        int http_status;
        bool grpc_content_type;
        int grpc_status; /* -1 until received */
        char *grpc_message;

        bool done;
        bool in_session;
        unsigned handles_open;
        grpc_client_msg_fn on_msg;
        grpc_client_done_fn on_done;
        void *ud;
};

static void client_on_handle_closed(uv_handle_t *h)
{
        struct grpc_client_call *call = h->data;
        if (--call->handles_open > 0)
                return;
        nghttp2_session_del(call->session);
        grpc_deframer_release(&call->deframer);
        h2_chunks_free(&call->out_head, &call->out_tail);
        free(call->socket_path);
        free(call->method);
        free(call->grpc_message);
        free(call);
}

/* Reports the outcome once, then closes; memory goes in the close callbacks. */
static void client_finish(struct grpc_client_call *call, int status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void client_finish(struct grpc_client_call *call, int status, const char *fmt, ...)
{
        if (call->done)
                return;
        call->done = true;
        _cleanup_free_ char *msg = NULL;
        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                msg = xvasprintf(fmt, ap);
                va_end(ap);
        }
        log_debug("grpc", "client call done method=%s status=%s message=%s", call->method,
                  grpc_status_name(status), msg ? msg : "");
        uv_timer_stop(&call->timer);
        if (uv_is_active((uv_handle_t *)&call->io.pipe))
                uv_read_stop((uv_stream_t *)&call->io.pipe);
        call->on_done(status, msg, call->ud);
        uv_close((uv_handle_t *)&call->io.pipe, client_on_handle_closed);
        uv_close((uv_handle_t *)&call->timer, client_on_handle_closed);
}

/* gRPC's doc/http-grpc-status-mapping.md */
static int client_status_from_http(int http_status)
{
        switch (http_status) {
        case 400:
                return GRPC_STATUS_INTERNAL;
        case 401:
                return GRPC_STATUS_UNAUTHENTICATED;
        case 403:
                return GRPC_STATUS_PERMISSION_DENIED;
        case 404:
                return GRPC_STATUS_UNIMPLEMENTED;
        case 429:
        case 502:
        case 503:
        case 504:
                return GRPC_STATUS_UNAVAILABLE;
        default:
                return GRPC_STATUS_UNKNOWN;
        }
}

/* The response stream ended normally: decide the status. */
static void client_complete(struct grpc_client_call *call)
{
        if (call->grpc_status >= 0) {
                if (call->grpc_status == GRPC_STATUS_OK && call->deframer.hdr_len > 0)
                        client_finish(call, GRPC_STATUS_INTERNAL,
                                      "response ended inside a message");
                else
                        client_finish(call, call->grpc_status, call->grpc_message ? "%s" : NULL,
                                      call->grpc_message);
        } else if (call->http_status != 200) {
                client_finish(call, client_status_from_http(call->http_status),
                              "unexpected HTTP status %d", call->http_status);
        } else if (!call->grpc_content_type) {
                client_finish(call, GRPC_STATUS_INTERNAL, "unexpected response content-type");
        } else {
                client_finish(call, GRPC_STATUS_INTERNAL,
                              "server closed the stream without grpc-status");
        }
}

static void client_flush(struct grpc_client_call *call)
{
        if (call->done || call->in_session || !call->session)
                return;
        call->in_session = true;
        int r = h2_io_flush(&call->io, call->session);
        call->in_session = false;
        if (call->done)
                return;
        if (r < 0) {
                client_finish(call, GRPC_STATUS_UNAVAILABLE, "write to %s failed: %s",
                              call->socket_path, h2_strerror(r));
                return;
        }
        if (!nghttp2_session_want_read(call->session) && !nghttp2_session_want_write(call->session))
                client_finish(call, GRPC_STATUS_UNAVAILABLE, "connection to %s closed",
                              call->socket_path);
}

static int client_on_header(nghttp2_session *session, const nghttp2_frame *frame,
                            const uint8_t *name, size_t namelen, const uint8_t *value,
                            size_t valuelen, uint8_t flags, void *ud)
{
        struct grpc_client_call *call = ud;
        if (call->done)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (frame->hd.type != NGHTTP2_HEADERS || frame->hd.stream_id != call->stream_id)
                return 0;
        if (h2_eq(name, namelen, ":status")) {
                int st = 0;
                for (size_t i = 0; i < valuelen && i < 3; i++)
                        st = st * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
                call->http_status = st;
        } else if (h2_eq(name, namelen, "content-type")) {
                call->grpc_content_type = h2_is_grpc_content_type(value, valuelen);
        } else if (h2_eq(name, namelen, "grpc-status")) {
                int st = 0;
                bool ok = valuelen > 0 && valuelen <= 3;
                for (size_t i = 0; ok && i < valuelen; i++) {
                        ok = value[i] >= '0' && value[i] <= '9';
                        st = st * 10 + (value[i] - '0');
                }
                call->grpc_status = ok ? st : GRPC_STATUS_UNKNOWN;
        } else if (h2_eq(name, namelen, "grpc-message")) {
                free(call->grpc_message);
                call->grpc_message = grpc_percent_decode(
                        (const char *)value, valuelen < CLIENT_MESSAGE_MAX ? valuelen : CLIENT_MESSAGE_MAX);
        }
        return 0;
}

static int client_deliver(const uint8_t *msg, size_t len, void *ud)
{
        struct grpc_client_call *call = ud;
        return call->on_msg ? call->on_msg(msg, len, call->ud) : 0;
}

static int client_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                                const uint8_t *data, size_t len, void *ud)
{
        struct grpc_client_call *call = ud;
        if (call->done)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (stream_id != call->stream_id || call->http_status != 200)
                return 0;
        int r = grpc_deframer_feed(&call->deframer, data, len, client_deliver, call);
        if (r == 0 || call->done)
                return 0;
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
        if (r == -EMSGSIZE)
                client_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                              "received message larger than max (%u bytes)", GRPC_MAX_MESSAGE);
        else if (r == -ENOTSUP)
                client_finish(call, GRPC_STATUS_INTERNAL, "received a compressed message");
        else
                client_finish(call, GRPC_STATUS_CANCELLED, "cancelled by the message callback");
        return 0;
}

static int client_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
        struct grpc_client_call *call = ud;
        if (call->done)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (frame->hd.stream_id != call->stream_id ||
            (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA))
                return 0;
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
                client_complete(call);
        return 0;
}

static int client_on_stream_close(nghttp2_session *session, int32_t stream_id,
                                  uint32_t error_code, void *ud)
{
        struct grpc_client_call *call = ud;
        if (call->done || stream_id != call->stream_id)
                return 0;
        switch (error_code) {
        case NGHTTP2_NO_ERROR:
                client_complete(call);
                break;
        case NGHTTP2_REFUSED_STREAM:
                client_finish(call, GRPC_STATUS_UNAVAILABLE, "stream refused by the server");
                break;
        case NGHTTP2_CANCEL:
                client_finish(call, GRPC_STATUS_CANCELLED, "stream cancelled by the server");
                break;
        case NGHTTP2_ENHANCE_YOUR_CALM:
                client_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "server says: enhance your calm");
                break;
        default:
                client_finish(call, GRPC_STATUS_INTERNAL, "stream reset by the server: %s",
                              nghttp2_http2_strerror(error_code));
        }
        return 0;
}

static ssize_t client_data_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                                size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                                void *user_data)
{
        struct grpc_client_call *call = source->ptr;
        size_t n = h2_chunks_read(&call->out_head, &call->out_tail, &call->out_off, buf, length);
        if (!call->out_head)
                *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
}

static void client_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
        struct grpc_client_call *call = h2_container_of(stream, struct grpc_client_call, io.pipe);
        if (nread == 0 || call->done)
                return;
        if (nread < 0) {
                client_finish(call, GRPC_STATUS_UNAVAILABLE, "connection to %s closed: %s",
                              call->socket_path, uv_strerror((int)nread));
                return;
        }
        call->in_session = true;
        ssize_t r = nghttp2_session_mem_recv(call->session, (const uint8_t *)buf->base,
                                             (size_t)nread);
        call->in_session = false;
        if (call->done)
                return;
        if (r < 0) {
                client_finish(call, GRPC_STATUS_INTERNAL, "HTTP/2 protocol error from %s: %s",
                              call->socket_path, nghttp2_strerror((int)r));
                return;
        }
        client_flush(call);
}

static void client_on_written(struct h2_io *io)
{
        struct grpc_client_call *call = h2_container_of(io, struct grpc_client_call, io);
        if (call->done)
                return;
        if (io->write_error) {
                client_finish(call, GRPC_STATUS_UNAVAILABLE, "write to %s failed: %s",
                              call->socket_path, uv_strerror(io->write_error));
                return;
        }
        client_flush(call);
}

static int client_session_new(struct grpc_client_call *call)
{
        nghttp2_session_callbacks *cbs;
        if (nghttp2_session_callbacks_new(&cbs) != 0)
                return -ENOMEM;
        nghttp2_session_callbacks_set_on_header_callback(cbs, client_on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, client_on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, client_on_frame_recv);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, client_on_stream_close);
        int r = nghttp2_session_client_new(&call->session, cbs, call);
        nghttp2_session_callbacks_del(cbs);
        if (r != 0)
                return -ENOMEM;

        nghttp2_settings_entry iv[] = {
                { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, CLIENT_WINDOW },
        };
        if (nghttp2_submit_settings(call->session, NGHTTP2_FLAG_NONE, iv, ARRAY_SIZE(iv)) != 0 ||
            nghttp2_session_set_local_window_size(call->session, NGHTTP2_FLAG_NONE, 0,
                                                  CLIENT_WINDOW) != 0)
                return -EPROTO;

        char timeout[32] = "";
        if (call->timeout_ms > 99999999)
                snprintf(timeout, sizeof(timeout), "%" PRIu64 "S",
                         call->timeout_ms / 1000 > 99999999 ? 99999999 : call->timeout_ms / 1000);
        else if (call->timeout_ms)
                snprintf(timeout, sizeof(timeout), "%" PRIu64 "m", call->timeout_ms);
        nghttp2_nv nva[] = {
                h2_nv(":method", "POST"),
                h2_nv(":scheme", "http"),
                h2_nv(":path", call->method),
                h2_nv(":authority", "localhost"),
                h2_nv("content-type", "application/grpc"),
                h2_nv("te", "trailers"),
                h2_nv("user-agent", "devlet-grpc/" DEVLET_VERSION),
                h2_nv("grpc-timeout", timeout),
        };
        nghttp2_data_provider prd = { .source.ptr = call, .read_callback = client_data_read };
        int32_t id = nghttp2_submit_request(call->session, NULL, nva,
                                            ARRAY_SIZE(nva) - (timeout[0] ? 0 : 1), &prd, NULL);
        if (id < 0)
                return -EPROTO;
        call->stream_id = id;
        return 0;
}

static void client_on_connect(uv_connect_t *req, int status)
{
        struct grpc_client_call *call = req->data;
        if (call->done)
                return;
        if (status < 0) {
                client_finish(call, GRPC_STATUS_UNAVAILABLE, "cannot connect to %s: %s",
                              call->socket_path, uv_strerror(status));
                return;
        }
        int r = client_session_new(call);
        if (r < 0) {
                client_finish(call, GRPC_STATUS_INTERNAL, "cannot start HTTP/2 session: %s",
                              strerror(-r));
                return;
        }
        r = uv_read_start((uv_stream_t *)&call->io.pipe, h2_io_alloc, client_on_read);
        if (r < 0) {
                client_finish(call, GRPC_STATUS_UNAVAILABLE, "cannot read from %s: %s",
                              call->socket_path, uv_strerror(r));
                return;
        }
        client_flush(call);
}

static void client_on_timeout(uv_timer_t *t)
{
        struct grpc_client_call *call = t->data;
        client_finish(call, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline of %" PRIu64 " ms exceeded",
                      call->timeout_ms);
}

int grpc_client_call_start(uv_loop_t *loop, const char *socket_path, const char *method,
                           const uint8_t *req, size_t req_len, uint64_t timeout_ms,
                           grpc_client_msg_fn on_msg, grpc_client_done_fn on_done, void *ud,
                           struct grpc_client_call **out)
{
        if (!socket_path || !method || method[0] != '/' || !on_done || (!req && req_len))
                return -EINVAL;
        if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
                return -ENAMETOOLONG;
        if (req_len > GRPC_MAX_MESSAGE)
                return -EMSGSIZE;

        h2_ignore_sigpipe();
        struct grpc_client_call *call = xcalloc(1, sizeof(*call));
        int r = uv_pipe_init(loop, &call->io.pipe, 0);
        if (r < 0) {
                free(call);
                return r;
        }
        call->loop = loop;
        call->io.has_socket = true;
        call->io.on_written = client_on_written;
        call->io.pipe.data = call;
        uv_timer_init(loop, &call->timer);
        call->timer.data = call;
        call->handles_open = 2;
        call->socket_path = xstrdup(socket_path);
        call->method = xstrdup(method);
        call->timeout_ms = timeout_ms;
        call->grpc_status = -1;
        call->on_msg = on_msg;
        call->on_done = on_done;
        call->ud = ud;
        grpc_deframer_init(&call->deframer, GRPC_MAX_MESSAGE);
        call->out_head = call->out_tail = h2_chunk_new(req, req_len);

        call->connect_req.data = call;
        uv_pipe_connect(&call->connect_req, &call->io.pipe, socket_path, client_on_connect);
        if (timeout_ms)
                uv_timer_start(&call->timer, client_on_timeout, timeout_ms, 0);
        if (out)
                *out = call;
        return 0;
}

void grpc_client_call_cancel(struct grpc_client_call *call)
{
        if (call)
                client_finish(call, GRPC_STATUS_CANCELLED, "cancelled");
}

/* ---- blocking helper ---- */

struct unary_sync {
        int status;
        char *message;
        uint8_t *reply;
        size_t reply_len;
        unsigned n_msgs;
};

static int unary_sync_on_msg(const uint8_t *msg, size_t len, void *ud)
{
        struct unary_sync *st = ud;
        if (++st->n_msgs > 1)
                return 1;
        st->reply = xmalloc(len ? len : 1);
        memcpy(st->reply, msg, len);
        st->reply_len = len;
        return 0;
}

static void unary_sync_on_done(int status, const char *message, void *ud)
{
        struct unary_sync *st = ud;
        st->status = status;
        st->message = message ? xstrdup(message) : NULL;
}

int grpc_client_unary_sync(const char *socket_path, const char *method, const uint8_t *req,
                           size_t req_len, uint64_t timeout_ms, uint8_t **reply,
                           size_t *reply_len, char **message)
{
        struct unary_sync st = { .status = GRPC_STATUS_UNKNOWN };
        uv_loop_t loop;
        int r = uv_loop_init(&loop);
        if (r < 0) {
                st.status = GRPC_STATUS_INTERNAL;
                st.message = xasprintf("cannot create an event loop: %s", uv_strerror(r));
        } else {
                r = grpc_client_call_start(&loop, socket_path, method, req, req_len, timeout_ms,
                                           unary_sync_on_msg, unary_sync_on_done, &st, NULL);
                if (r < 0) {
                        st.status = r == -EMSGSIZE ? GRPC_STATUS_RESOURCE_EXHAUSTED
                                                   : GRPC_STATUS_INVALID_ARGUMENT;
                        st.message = xasprintf("cannot call %s on %s: %s", method ? method : "",
                                               socket_path ? socket_path : "", strerror(-r));
                }
                /* returns once every handle has closed */
                uv_run(&loop, UV_RUN_DEFAULT);
                uv_loop_close(&loop);
        }

        if (st.status == GRPC_STATUS_CANCELLED && st.n_msgs > 1) {
                st.status = GRPC_STATUS_INTERNAL;
                free(st.message);
                st.message = xstrdup("more than one response message to a unary call");
        } else if (st.status == GRPC_STATUS_OK && st.n_msgs == 0) {
                st.status = GRPC_STATUS_INTERNAL;
                free(st.message);
                st.message = xstrdup("no response message to a unary call");
        }
        if (st.status != GRPC_STATUS_OK) {
                free(st.reply);
                st.reply = NULL;
                st.reply_len = 0;
        }
        if (reply)
                *reply = st.reply;
        else
                free(st.reply);
        if (reply_len)
                *reply_len = st.reply_len;
        if (message)
                *message = st.message;
        else
                free(st.message);
        return st.status;
}
