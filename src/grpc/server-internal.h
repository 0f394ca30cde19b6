/* Internal to src/grpc/: the server's state, shared by server.c (listener,
 * connections, limits) and call.c (calls: request input through nghttp2's
 * callbacks, response output through data providers).  Loop thread only. */
#ifndef DEVLET_GRPC_SERVER_INTERNAL_H
#define DEVLET_GRPC_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <uv.h>

#include "base/list.h"
#include "grpc/grpc.h"
#include "grpc/h2.h"
#include "grpc/h2-request.h"

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
        DLIST_FIELDS(struct grpc_conn);
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
        DLIST_FIELDS(struct grpc_call);
        int32_t stream_id;
        struct h2_request h2; /* HTTP/2's rules for the request (h2-request.h) */
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

/* server.c */
/* Sends what nghttp2 has queued, unless inside a session call (then later). */
void conn_flush(struct grpc_conn *c);
/* Cancels every call and closes the socket; memory goes in the close
 * callbacks.  Safe inside nghttp2 callbacks and twice. */
void conn_close(struct grpc_conn *c);
/* The connection has no open stream from now (starts its idle deadline). */
void conn_idle_begin(struct grpc_conn *c);

/* call.c */
/* Removes call from its connection's list (and its counts). */
void call_unlink(struct grpc_call *call);
void call_free(struct grpc_call *call);
/* The stream is gone: a held call gets its on_cancel (or is detached); with
 * free_now false it stays on the list, to be freed with the connection. */
void call_stream_gone(struct grpc_call *call, bool free_now);
/* The nghttp2 callbacks of a server session. */
nghttp2_session_callbacks *server_callbacks_new(void);

#endif
