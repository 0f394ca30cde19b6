/* gRPC server: a Unix-socket listener and one nghttp2 session per
 * connection; the calls on them are call.c's.
 *
 * Bytes come in through nghttp2_session_mem_recv and go out through
 * h2_io_flush (h2.c).  A connection is closed with uv_close and its memory
 * (session, remaining calls) freed in the close callback, never inside an
 * nghttp2 callback.  What peers can hold is bounded (struct
 * grpc_server_limits): connections (the longest idle one makes way for a
 * newcomer), streams per connection, calls in all (the busiest connection's
 * oldest goes), idle time; memory freed by closed connections is trimmed
 * back to the system shortly after.
 *
 * Must never: block, let one connection's failure touch another, or log
 * above debug. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "grpc/server-fuzz.h"
#include "grpc/server-internal.h"

/* ---- connections ---- */

static int conn_session_new(struct grpc_conn *c, nghttp2_session_callbacks *cbs)
{
        int r = h2_request_session_new(&c->session, cbs, c);
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
        DLIST_REMOVE(s->conns, c);
        conn_free(c);
        s->handles_open--;
        if (!s->freeing && !uv_is_active((uv_handle_t *)&s->trim_timer))
                uv_timer_start(&s->trim_timer, server_on_trim, SERVER_TRIM_MS, 0);
        server_maybe_free(s);
}

static void server_accept_one(uv_idle_t *idle);

/* Cancels every call and closes the socket; memory goes in the close
 * callbacks.  Safe to call from inside nghttp2 callbacks and twice. */
void conn_close(struct grpc_conn *c)
{
        if (c->closing)
                return;
        c->closing = true;
        c->server->n_conns--;
        if (c->server->accept_pending && !c->server->freeing)
                uv_idle_start(&c->server->accept_idle, server_accept_one);
        log_debug("grpc", "connection closing");
        struct grpc_call *call, *next;
        DLIST_FOREACH_SAFE(call, next, c->calls)
                call_stream_gone(call, false);
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
void conn_idle_begin(struct grpc_conn *c)
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

void conn_flush(struct grpc_conn *c)
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
        DLIST_PREPEND(s->conns, c);
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
        struct grpc_conn *c, *next;
        DLIST_FOREACH_SAFE(c, next, s->conns)
                conn_close(c);
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
                .limits = { SERVER_MAX_CONNS, SERVER_MAX_STREAMS, SERVER_MAX_CALLS,
                            SERVER_IDLE_MS },
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
