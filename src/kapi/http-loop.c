/* The API client's HTTP/1.1 transport on a libuv loop (see http.h): the
 * blocking transport's steps (connect, TLS handshake, write, read through
 * the pure parser into the sink) cut where they would wait, each resumed
 * by a uv_poll of the socket.
 *
 * One call owns: its copy of the request's head and body, the connection
 * (its own, or one taken from the shared pool), a uv_poll_t per socket it
 * tried (closed before the next one, since a poll handle is bound to its
 * fd), and one uv_timer_t that carries the deadlines (the whole call, the
 * connect and handshake, the low-speed cut) and the turn a long stream
 * yields to the loop.  The call is freed once done was called (or the
 * call cancelled) and every handle and the resolver's request came back.
 *
 * SIGPIPE: OpenSSL writes without MSG_NOSIGNAL, so the signal is blocked
 * around the handshake's and writes' steps, as the blocking transport
 * does.  Never logs above debug. */
#include "kapi/http.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"

#define READ_BUF (16u << 10)

enum step {
        STEP_RESOLVE,
        STEP_CONNECT,
        STEP_HANDSHAKE,
        STEP_WRITE,
        STEP_READ,
        STEP_DONE,
};

struct poll_h {
        uv_poll_t h;
        struct kapi_http_loop_call *call;
};

struct kapi_http_loop_call {
        struct kapi_http *h;
        uv_loop_t *loop;
        struct kapi_http_sink sink;
        kapi_http_loop_done_fn done;
        void *ud;

        char *out;      /* head and body */
        size_t out_len, wrote;
        long timeout_ms, connect_timeout_ms, low_speed_ms;
        uint64_t call_end, connect_end, last_move;

        enum step step;
        struct kapi_conn *c;
        bool reused;
        bool retried;
        struct poll_h *poll;
        int events;     /* what the poll waits for */
        uv_timer_t timer;
        bool yielding;  /* the timer is the next read turn */
        uv_getaddrinfo_t gai;
        bool gai_pending;
        struct addrinfo *res, *ai;
        int last_err;

        struct kapi_http_parser parser;
        char *buf;
        long status;
        struct diag diag;
        int early;      /* an error before the first step: the first turn ends with it */
        bool ended;     /* done called or cancelled */
        bool in_step;   /* a step is running: cleanup waits for it */
        unsigned pending; /* handles and requests the loop still holds */
};

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void call_free(struct kapi_http_loop_call *a)
{
        if (a->out) {
                explicit_bzero(a->out, a->out_len); /* the token */
                free(a->out);
        }
        if (a->res)
                freeaddrinfo(a->res);
        free(a->buf);
        free(a);
}

static void pending_done(struct kapi_http_loop_call *a)
{
        if (--a->pending == 0 && a->ended && !a->in_step)
                call_free(a);
}

static void on_poll_closed(uv_handle_t *h)
{
        struct poll_h *p = h->data;
        struct kapi_http_loop_call *a = p->call;
        free(p);
        pending_done(a);
}

/* Closes the socket's poll handle (stopping it takes the fd out of the
 * loop at once, so the fd may be closed right after). */
static void poll_drop(struct kapi_http_loop_call *a)
{
        if (!a->poll)
                return;
        uv_poll_stop(&a->poll->h);
        uv_close((uv_handle_t *)&a->poll->h, on_poll_closed);
        a->poll = NULL;
        a->events = 0;
}

static void on_timer_closed(uv_handle_t *h)
{
        pending_done(h->data);
}

/* The end: done once (unless cancelled), then every resource let go. */
static void finish(struct kapi_http_loop_call *a, int r)
{
        if (a->ended)
                return;
        a->ended = true;
        a->step = STEP_DONE;
        bool reusable = r == 0 && a->c && a->c->reusable;
        poll_drop(a);
        if (a->c) {
                if (reusable)
                        kapi_http_pool_put(a->h, a->c);
                else
                        kapi_conn_close(a->c);
                a->c = NULL;
        }
        uv_timer_stop(&a->timer);
        uv_close((uv_handle_t *)&a->timer, on_timer_closed);
        if (a->gai_pending)
                uv_cancel((uv_req_t *)&a->gai);
        if (a->done)
                a->done(a->ud, r, a->status, &a->diag);
}

static void on_timer(uv_timer_t *t);
static void on_poll(uv_poll_t *h, int status, int events);

/* finish from a callback of the loop's (not inside a step): the call's
 * memory goes at once when no handle is left to close. */
static void finish_now(struct kapi_http_loop_call *a, int r)
{
        a->in_step = true;
        finish(a, r);
        a->in_step = false;
        if (a->pending == 0)
                call_free(a);
}

static void arm_deadline(struct kapi_http_loop_call *a)
{
        uint64_t end = a->call_end ? a->call_end : UINT64_MAX;
        bool connected = a->step == STEP_WRITE || a->step == STEP_READ;
        if (!connected) {
                if (a->connect_end < end)
                        end = a->connect_end;
        } else if (a->low_speed_ms > 0) {
                uint64_t ls = a->last_move + (uint64_t)a->low_speed_ms;
                if (ls < end)
                        end = ls;
        }
        if (end == UINT64_MAX) {
                uv_timer_stop(&a->timer);
                return;
        }
        uint64_t now = now_ms();
        uv_timer_start(&a->timer, on_timer, end > now ? end - now : 0, 0);
}

static void run(struct kapi_http_loop_call *a);

static void wait_for(struct kapi_http_loop_call *a, int events)
{
        if (a->events != events) {
                a->events = events;
                uv_poll_start(&a->poll->h, events, on_poll);
        }
}

static void on_poll(uv_poll_t *h, int status, int events)
{
        (void)status; /* an error shows in the next read or write */
        (void)events;
        struct poll_h *p = h->data;
        run(p->call);
}

static void poll_on(struct kapi_http_loop_call *a, int fd)
{
        struct poll_h *p = xcalloc(1, sizeof(*p));
        p->call = a;
        p->h.data = p;
        uv_poll_init_socket(a->loop, &p->h, fd);
        a->pending++;
        a->poll = p;
        a->events = 0;
}

/* ---- steps ---- */

/* The next address: 0 when a connect is under way (or done), or the last
 * connect error when none is left. */
static int connect_next(struct kapi_http_loop_call *a)
{
        for (; a->ai; a->ai = a->ai->ai_next) {
                int fd = socket(a->ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0) {
                        a->last_err = diag_set(&a->diag, -errno, "socket: %s", strerror(errno));
                        continue;
                }
                kapi_http_socket_options(fd);
                if (connect(fd, a->ai->ai_addr, a->ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        a->last_err = diag_set(&a->diag, -errno, "connect to %s port %s: %s",
                                               a->h->host, a->h->port, strerror(errno));
                        close(fd);
                        continue;
                }
                a->c = xcalloc(1, sizeof(*a->c));
                a->c->fd = fd;
                a->ai = a->ai->ai_next;
                poll_on(a, fd);
                a->step = STEP_CONNECT;
                wait_for(a, UV_WRITABLE);
                return 0;
        }
        return a->last_err ? a->last_err
                           : diag_set(&a->diag, -EHOSTUNREACH, "cannot resolve %s", a->h->host);
}

static int step_connect(struct kapi_http_loop_call *a)
{
        int err = 0;
        socklen_t el = sizeof(err);
        if (getsockopt(a->c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
                err = errno;
        if (err == EINPROGRESS || err == EALREADY)
                return -EAGAIN;
        if (err) {
                a->last_err = diag_set(&a->diag, -err, "connect to %s port %s: %s", a->h->host,
                                       a->h->port, strerror(err));
                poll_drop(a);
                kapi_conn_close(a->c);
                a->c = NULL;
                return connect_next(a) == 0 ? -EAGAIN : a->last_err;
        }
        if (a->h->https) {
                int r = kapi_http_tls_for(a->h, a->c->fd, &a->c->tls, &a->diag);
                if (r < 0)
                        return r;
                a->step = STEP_HANDSHAKE;
        } else {
                a->step = STEP_WRITE;
                a->last_move = now_ms();
        }
        return 0;
}

static int step_handshake(struct kapi_http_loop_call *a)
{
        short want = 0;
        sigset_t old;
        bool blocked = kapi_sigpipe_block(&old);
        int r = kapi_tls_handshake(a->c->tls, &want, &a->diag);
        kapi_sigpipe_restore(&old, blocked);
        if (r == -EAGAIN) {
                wait_for(a, want & POLLOUT ? UV_WRITABLE : UV_READABLE);
                return -EAGAIN;
        }
        if (r < 0)
                return r;
        a->c->wire = kapi_tls_wire_bytes(a->c->tls);
        a->step = STEP_WRITE;
        a->last_move = now_ms();
        return 0;
}

static int step_write(struct kapi_http_loop_call *a)
{
        while (a->wrote < a->out_len) {
                short want;
                bool moved;
                ssize_t n = kapi_conn_write_step(a->c, a->out + a->wrote, a->out_len - a->wrote,
                                                 &want, &moved, &a->diag);
                if (moved)
                        a->last_move = now_ms();
                if (n == -EAGAIN) {
                        wait_for(a, want & POLLIN ? UV_READABLE : UV_WRITABLE);
                        return -EAGAIN;
                }
                if (n < 0)
                        return (int)n;
                a->wrote += (size_t)n;
        }
        a->step = STEP_READ;
        kapi_http_parser_init(&a->parser);
        if (!a->buf)
                a->buf = xmalloc(READ_BUF);
        return 0;
}

/* Feeds n bytes to the parser and the sink.  Returns 0 to read on, 1 when
 * the response ended (or the sink ended it: *sink_ended), <0 with diag. */
static int feed(struct kapi_http_loop_call *a, size_t n, bool *sink_ended)
{
        struct kapi_http_parser *p = &a->parser;
        size_t off = 0;
        for (;;) {
                struct kapi_http_step st;
                int r = kapi_http_parse(p, a->buf + off, n - off, &st);
                if (r < 0)
                        return diag_set(&a->diag, r, "a broken response: %s", p->why);
                off += st.taken;
                if (st.event == KAPI_HTTP_MORE)
                        return 0;
                if (st.event == KAPI_HTTP_END) {
                        a->c->reusable = p->keep_alive && off == n;
                        return 1;
                }
                int s;
                if (st.event == KAPI_HTTP_HEAD) {
                        a->status = p->status;
                        s = a->sink.head ? a->sink.head(a->sink.ud, p) : 0;
                } else {
                        s = a->sink.body ? a->sink.body(a->sink.ud, st.data, st.len) : 0;
                }
                if (a->ended) /* cancelled from the sink */
                        return 1;
                if (s != 0) {
                        *sink_ended = true;
                        return 1;
                }
        }
}

/* Returns -EAGAIN to wait, 0 (the response ended), 1 (the sink ended it),
 * or <0 with diag; *nothing_came as the blocking transport's. */
static int step_read(struct kapi_http_loop_call *a, bool *nothing_came)
{
        for (unsigned turn = 0;; turn++) {
                if (turn == KAPI_HTTP_LOOP_READS) {
                        /* the rest on the next turn, after the loop's other handles */
                        a->yielding = true;
                        uv_timer_start(&a->timer, on_timer, 0, 0);
                        return -EAGAIN;
                }
                short want;
                bool moved;
                ssize_t n = kapi_conn_read_step(a->c, a->buf, READ_BUF, &want, &moved, &a->diag);
                if (moved)
                        a->last_move = now_ms();
                if (n == -EAGAIN) {
                        wait_for(a, want & POLLOUT ? UV_WRITABLE : UV_READABLE);
                        return -EAGAIN;
                }
                if (n < 0) {
                        *nothing_came = n == -ECONNRESET && !kapi_http_parser_started(&a->parser);
                        return (int)n;
                }
                if (n == 0) {
                        *nothing_came = !kapi_http_parser_started(&a->parser);
                        int r = kapi_http_parse_eof(&a->parser);
                        return r < 0 ? diag_set(&a->diag, r, "%s", a->parser.why) : 0;
                }
                bool sink_ended = false;
                int r = feed(a, (size_t)n, &sink_ended);
                if (r != 0)
                        return r < 0 ? r : sink_ended ? 1 : 0;
        }
}

static int start_fresh(struct kapi_http_loop_call *a);

/* Runs steps until one waits, or the call ends. */
static void run(struct kapi_http_loop_call *a)
{
        a->in_step = true;
        int r = 0;
        bool nothing_came = false;
        while (!a->ended && r == 0) {
                switch (a->step) {
                case STEP_RESOLVE:
                        r = -EAGAIN;
                        break;
                case STEP_CONNECT:
                        r = step_connect(a);
                        break;
                case STEP_HANDSHAKE:
                        r = step_handshake(a);
                        break;
                case STEP_WRITE:
                        r = step_write(a);
                        if (r < 0 && r != -EAGAIN)
                                nothing_came = r == -ECONNRESET;
                        break;
                case STEP_READ:
                        r = step_read(a, &nothing_came);
                        if (r >= 0) {
                                finish(a, r);
                                r = 1;
                        }
                        break;
                case STEP_DONE:
                        r = 1;
                        break;
                }
        }
        if (!a->ended && r < 0 && r != -EAGAIN) {
                if (a->reused && nothing_came && !a->retried) {
                        /* the server closed it while it was idle */
                        log_debug("kapi", "idle connection gone; once more on a new one error=%d",
                                  r);
                        a->retried = true;
                        poll_drop(a);
                        kapi_conn_close(a->c);
                        a->c = NULL;
                        memset(&a->diag, 0, sizeof(a->diag));
                        r = start_fresh(a);
                }
                if (r < 0 && r != -EAGAIN)
                        finish(a, r);
        }
        if (!a->ended && r == -EAGAIN && !a->yielding)
                arm_deadline(a);
        a->in_step = false;
        if (a->ended && a->pending == 0)
                call_free(a);
}

static void on_timer(uv_timer_t *t)
{
        struct kapi_http_loop_call *a = t->data;
        if (a->ended)
                return;
        if (a->early) {
                finish_now(a, a->early);
                return;
        }
        if (a->yielding) {
                a->yielding = false;
                run(a);
                return;
        }
        uint64_t now = now_ms();
        bool connected = a->step == STEP_WRITE || a->step == STEP_READ;
        int r = 0;
        if (a->call_end && now >= a->call_end)
                r = diag_set(&a->diag, -ETIMEDOUT, "timed out after %ld ms", a->timeout_ms);
        else if (!connected && now >= a->connect_end)
                r = diag_set(&a->diag, -ETIMEDOUT, "no connection within %ld ms",
                             a->connect_timeout_ms);
        else if (connected && a->low_speed_ms > 0 &&
                 now >= a->last_move + (uint64_t)a->low_speed_ms)
                r = diag_set(&a->diag, -ETIMEDOUT, "no byte moved for %ld ms", a->low_speed_ms);
        if (r < 0) {
                finish_now(a, r);
                return;
        }
        arm_deadline(a);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
        struct kapi_http_loop_call *a = req->data;
        a->gai_pending = false;
        if (a->ended) {
                if (res)
                        uv_freeaddrinfo(res);
                pending_done(a);
                return;
        }
        a->pending--; /* the request is back; the call goes on */
        if (status < 0) {
                finish_now(a, diag_set(&a->diag, -EHOSTUNREACH, "cannot resolve %s: %s", a->h->host,
                                   uv_strerror(status)));
                return;
        }
        a->res = res;
        a->ai = res;
        int r = connect_next(a);
        if (r < 0) {
                finish_now(a, r);
                return;
        }
        run(a);
}

/* A new connection: resolve (an address: at once), then connect. */
static int start_fresh(struct kapi_http_loop_call *a)
{
        a->reused = false;
        a->wrote = 0;
        a->connect_end = now_ms() + (uint64_t)a->connect_timeout_ms;
        if (a->res) {
                a->ai = a->res;
                a->last_err = 0;
                a->step = STEP_RESOLVE;
                return connect_next(a) < 0 ? a->last_err : -EAGAIN;
        }
        struct addrinfo hints = {
                .ai_family = AF_UNSPEC,
                .ai_socktype = SOCK_STREAM,
                .ai_flags = AI_NUMERICSERV | (a->h->numeric ? AI_NUMERICHOST : AI_ADDRCONFIG),
        };
        a->step = STEP_RESOLVE;
        if (a->h->numeric) {
                /* no resolver: an address is parsed at once */
                int g = getaddrinfo(a->h->host, a->h->port, &hints, &a->res);
                if (g != 0)
                        return diag_set(&a->diag, -EHOSTUNREACH, "cannot resolve %s: %s",
                                        a->h->host, gai_strerror(g));
                a->ai = a->res;
                int r = connect_next(a);
                return r < 0 ? r : -EAGAIN;
        }
        a->gai.data = a;
        int r = uv_getaddrinfo(a->loop, &a->gai, on_resolved, a->h->host, a->h->port, &hints);
        if (r < 0)
                return diag_set(&a->diag, -EHOSTUNREACH, "cannot resolve %s: %s", a->h->host,
                                uv_strerror(r));
        a->gai_pending = true;
        a->pending++;
        return -EAGAIN;
}

int kapi_http_loop_start(struct kapi_http *h, uv_loop_t *loop, const struct kapi_http_request *rq,
                         const struct kapi_http_sink *sink, kapi_http_loop_done_fn done,
                         void *ud, struct kapi_http_loop_call **out, struct diag *diag)
{
        size_t head_len;
        char *head = kapi_http_head(h, rq, &head_len, diag);
        if (!head)
                return -EINVAL;
        struct kapi_http_loop_call *a = xcalloc(1, sizeof(*a));
        a->h = h;
        a->loop = loop;
        a->sink = *sink;
        a->done = done;
        a->ud = ud;
        a->out_len = head_len + (rq->body ? rq->body_len : 0);
        a->out = xmalloc(a->out_len + 1);
        memcpy(a->out, head, head_len);
        if (rq->body)
                memcpy(a->out + head_len, rq->body, rq->body_len);
        explicit_bzero(head, head_len);
        free(head);
        a->timeout_ms = rq->timeout_ms;
        a->connect_timeout_ms = rq->connect_timeout_ms;
        a->low_speed_ms = rq->low_speed_ms;
        a->call_end = rq->timeout_ms > 0 ? now_ms() + (uint64_t)rq->timeout_ms : 0;
        uv_timer_init(loop, &a->timer);
        a->timer.data = a;
        a->pending++;
        *out = a;

        a->c = kapi_http_pool_take(h);
        if (a->c) {
                a->reused = true;
                poll_on(a, a->c->fd);
                a->step = STEP_WRITE;
                a->last_move = now_ms();
                wait_for(a, UV_WRITABLE); /* the first write on the loop's next turn */
        } else {
                int r = start_fresh(a);
                if (r < 0 && r != -EAGAIN) {
                        /* done comes from the loop, never from inside start */
                        a->early = r;
                        uv_timer_start(&a->timer, on_timer, 0, 0);
                        return 0;
                }
        }
        arm_deadline(a);
        return 0;
}

void kapi_http_loop_cancel(struct kapi_http_loop_call *a)
{
        if (!a || a->ended)
                return;
        a->done = NULL;
        finish(a, -ECANCELED);
        if (!a->in_step && a->pending == 0)
                call_free(a);
}
