/* Internal to kapi/: a small HTTP/1.1 client for one server (the API
 * server), for calls that block their thread.
 *
 * A call connects (or takes an idle connection from the pool), writes its
 * request, and reads the response through kapi_http_parse, handing the
 * head and then the body, piece by piece as it arrives, to the caller's
 * sink, which may stop the call at any piece; nothing of the body is kept
 * here.  Deadlines: the whole call, the connection (TCP connect and TLS
 * handshake together), and the low-speed cut (no byte moved either way);
 * the stop flag is looked at at least every 100 ms while the call waits.
 * No redirects, no proxies.
 *
 * Keep-alive: up to KAPI_HTTP_POOL_MAX idle connections, under a mutex,
 * each taken by one call at a time.  A connection goes back to the pool
 * only when its response was read to its end and allowed another; an idle
 * connection that the server closed, or that has been idle for
 * KAPI_HTTP_IDLE_MS, is closed instead of used.  A call on a reused
 * connection that ends before any byte of a response came is made once
 * more on a new connection (the server may have closed it meanwhile).
 * Never logs above debug. */
#ifndef DEVLET_KAPI_HTTP_H
#define DEVLET_KAPI_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

#include <uv.h>

#include "base/diag.h"
#include "kapi/http-parser.h"
#include "kapi/kapi.h"
#include "kapi/tls.h"

#define KAPI_HTTP_POOL_MAX 4u
#define KAPI_HTTP_IDLE_MS 60000u
/* How often a waiting call looks at its stop flag. */
#define KAPI_HTTP_STOP_POLL_MS 100

struct kapi_http;

/* For cfg->server, http://host[:port][/prefix] or https://..., host a name,
 * an IPv4 address or [an IPv6 address]; a prefix goes in front of every
 * path.  cfg is borrowed and must outlive the result (its TLS settings
 * are read when the first https connection is made, and again when one of
 * its files changed).  https loads OpenSSL (kapi_tls_load).  Returns 0 and
 * *out, or with diag -EINVAL (a URL that is not that, or carries a
 * user, a query or a fragment) or -ELIBACC (no usable libssl). */
int kapi_http_new(const struct kapi_config *cfg, struct kapi_http **out, struct diag *diag);
/* Closes the pooled connections.  No call may be running. */
void kapi_http_free(struct kapi_http *h);

/* What the response goes to.  head: the final head came (p->status and
 * its framing); body: the next bytes of the body.  Each returns 0 to go
 * on, anything else to end the call (kapi_http_call then returns 1). */
struct kapi_http_sink {
        int (*head)(void *ud, const struct kapi_http_parser *p);
        int (*body)(void *ud, const char *data, size_t len);
        void *ud;
};

struct kapi_http_request {
        const char *method;
        const char *path;         /* from '/', escaped: goes after the URL's prefix */
        const char *user_agent;
        const char *accept;
        const char *content_type; /* NULL: no Content-Type */
        const char *body;         /* NULL: no body and no Content-Length */
        size_t body_len;
        const char *token;        /* Authorization: Bearer; NULL: none */
        long timeout_ms;          /* the whole call; <= 0: none */
        long connect_timeout_ms;  /* TCP connect and TLS handshake */
        long low_speed_ms;        /* no byte moved this long (after connecting) */
        const atomic_bool *stop;  /* may be NULL */
};

/* One exchange.  *status is the response's status as soon as its head
 * came (0 before), also when the call then fails.  Returns 0 when the
 * response was read to its end, 1 when the sink ended the call, or -errno
 * with diag (what failed, without the request's name):
 *   -ECANCELED  *stop became true
 *   -ETIMEDOUT  the whole call's bound, the connect timeout or the
 *               low-speed limit ("no byte moved for N ms")
 *   -EHOSTUNREACH  the name does not resolve; another connect errno
 *               (-ECONNREFUSED, -ENETUNREACH...) as connect(2) gave it
 *   -ECONNABORTED  the TLS handshake failed (the certificate's verdict)
 *   -ECONNRESET the connection broke or closed inside the response
 *   -EBADMSG    the response breaks HTTP/1.1 (the parser's reason)
 *   -EINVAL     the TLS files are unusable (kapi_tls_ctx_new)
 *   -ENOMEM     OpenSSL could not allocate */
int kapi_http_call(struct kapi_http *h, const struct kapi_http_request *rq,
                   const struct kapi_http_sink *sink, long *status, struct diag *diag);

/* ---- the same transport on a libuv loop (http-loop.c) ----
 * One call driven by the loop: the name resolved (an IP address at once,
 * a name through uv_getaddrinfo), a non-blocking connect and TLS
 * handshake, the request written and the response read, each step waiting
 * on a uv_poll of the socket and the deadlines on one uv_timer.  The pool
 * of idle connections is the blocking calls' own (taken and put back
 * under its mutex, never waited on).  rq's stop flag is not looked at:
 * kapi_http_loop_cancel stops a call.  A stream that keeps the socket
 * readable is read KAPI_HTTP_LOOP_READS buffers at a time, then the loop
 * runs its other handles before the next turn. */
#define KAPI_HTTP_LOOP_READS 16

struct kapi_http_loop_call;

/* Called once as the call ends (never after kapi_http_loop_cancel): r and
 * status as kapi_http_call's; diag is the call's (borrowed). */
typedef void (*kapi_http_loop_done_fn)(void *ud, int r, long status, struct diag *diag);

/* Starts rq on loop (rq and its strings are copied; the sink is called on
 * the loop).  Returns 0 and *out (valid until done is called or the call
 * is cancelled), or -EINVAL with diag (a line break in the head). */
int kapi_http_loop_start(struct kapi_http *h, uv_loop_t *loop, const struct kapi_http_request *rq,
                         const struct kapi_http_sink *sink, kapi_http_loop_done_fn done,
                         void *ud, struct kapi_http_loop_call **out, struct diag *diag);
/* Ends the call without calling done; its memory goes once the loop has
 * closed its handles.  Safe from the sink's callbacks. */
void kapi_http_loop_cancel(struct kapi_http_loop_call *call);

/* ---- shared by http.c and http-loop.c ---- */
struct kapi_conn {
        int fd;
        struct kapi_tls *tls;   /* NULL: plain http */
        uint64_t wire;          /* kapi_tls_wire_bytes when last looked at */
        uint64_t idle_since;
        bool reusable;
};

struct kapi_http {
        const struct kapi_config *cfg; /* borrowed: the TLS settings */
        bool https;
        bool numeric;                  /* host is an IP address */
        char *host;                    /* without brackets */
        char *port;
        char *authority;               /* the Host field: as the URL has it */
        char *prefix;                  /* "" or "/a/b", no trailing '/' */

        pthread_mutex_t mu;            /* tls and the pool */
        struct kapi_tls_ctx *tls;
        struct kapi_conn *idle[KAPI_HTTP_POOL_MAX];
        size_t n_idle;
};

void kapi_conn_close(struct kapi_conn *c);
/* An idle pooled connection still usable, or NULL. */
struct kapi_conn *kapi_http_pool_take(struct kapi_http *h);
/* Back to the pool (or closed when it is full). */
void kapi_http_pool_put(struct kapi_http *h, struct kapi_conn *c);
/* A connection's TLS state (the context built or rebuilt under h->mu). */
int kapi_http_tls_for(struct kapi_http *h, int fd, struct kapi_tls **out, struct diag *diag);
void kapi_http_socket_options(int fd);
/* One non-blocking read (write) on c, EINTR retried, SIGPIPE blocked
 * around a TLS write: > 0 bytes moved, 0 at the end of the stream (a
 * read), -EAGAIN with *want (POLLIN or POLLOUT) to wait for, or
 * -ECONNRESET (or TLS's error) with diag; *moved says whether bytes moved
 * on the socket (TLS records count: the low-speed limit). */
ssize_t kapi_conn_read_step(struct kapi_conn *c, char *buf, size_t len, short *want, bool *moved,
                            struct diag *diag);
ssize_t kapi_conn_write_step(struct kapi_conn *c, const char *buf, size_t len, short *want,
                             bool *moved, struct diag *diag);
/* SIGPIPE blocked in the calling thread (OpenSSL writes without
 * MSG_NOSIGNAL), and restored with any SIGPIPE raised meanwhile taken. */
bool kapi_sigpipe_block(sigset_t *old);
void kapi_sigpipe_restore(const sigset_t *old, bool blocked);
/* The request's head (heap, *len bytes), or NULL with -EINVAL in diag. */
char *kapi_http_head(const struct kapi_http *h, const struct kapi_http_request *rq,
                     size_t *len, struct diag *diag);

#endif
