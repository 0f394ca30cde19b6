/* The API client's HTTP/1.1 transport (see http.h): a connection per call
 * at a time, taken from a small pool or made, driven by poll() with the
 * call's deadlines; the response goes through the pure parser
 * (http-parser.c) straight to the caller's sink.
 *
 * Sockets are non-blocking although every call blocks its thread: a read
 * or a write is tried first and poll() waits only when it would block, so
 * a TLS record cut in half, or a peer that stops reading, can never hold a
 * call past its deadline or its stop flag.  SIGPIPE is blocked in the
 * calling thread for the length of a call (OpenSSL writes without
 * MSG_NOSIGNAL) and a SIGPIPE the call raised is taken before the mask is
 * restored, so the process's disposition is never touched.
 *
 * Name resolution (getaddrinfo) is the system resolver's, bounded by its
 * own timeouts, not by the call's.  Never logs above debug. */
#include "kapi/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
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
#include "kapi/tls.h"

#define READ_BUF (16u << 10)
#define KEEPALIVE_S 60


static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the server's URL ---- */

static bool is_host_byte(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '-' || ch == '.' || ch == '_';
}

static int parse_url(struct kapi_http *h, const char *url, struct diag *diag)
{
        const char *a;
        if (strncmp(url, "https://", 8) == 0) {
                h->https = true;
                a = url + 8;
        } else if (strncmp(url, "http://", 7) == 0) {
                a = url + 7;
        } else {
                return diag_set(diag, -EINVAL, "the server must be an http(s):// URL");
        }
        size_t alen = strcspn(a, "/?#");
        const char *path = a + alen;
        if (strpbrk(path, "?#"))
                return diag_set(diag, -EINVAL, "server %.300s: a query or fragment in the URL", url);
        for (const char *s = path; *s; s++)
                if ((unsigned char)*s <= ' ' || *s == 0x7f)
                        return diag_set(diag, -EINVAL, "server %.300s: a space or control byte",
                                        url);
        if (memchr(a, '@', alen))
                return diag_set(diag, -EINVAL, "server %.300s: a user in the URL", url);

        const char *host = a, *host_end, *port = NULL;
        if (alen > 0 && a[0] == '[') {
                host_end = memchr(a, ']', alen);
                if (!host_end)
                        return diag_set(diag, -EINVAL, "server %.300s: an unclosed [", url);
                host++;
                h->numeric = true;
                if (host_end + 1 < a + alen) {
                        if (host_end[1] != ':')
                                return diag_set(diag, -EINVAL, "server %.300s: a bad port", url);
                        port = host_end + 2;
                }
        } else {
                host_end = memchr(a, ':', alen);
                if (host_end)
                        port = host_end + 1;
                else
                        host_end = a + alen;
        }
        h->host = xstrndup(host, (size_t)(host_end - host));
        if (!h->host[0])
                return diag_set(diag, -EINVAL, "server %.300s: no host", url);
        if (h->numeric) {
                struct in6_addr in6;
                if (inet_pton(AF_INET6, h->host, &in6) != 1)
                        return diag_set(diag, -EINVAL, "server %.300s: not an IPv6 address in []",
                                        url);
        } else {
                for (const char *s = h->host; *s; s++)
                        if (!is_host_byte(*s))
                                return diag_set(diag, -EINVAL, "server %.300s: a bad host name",
                                                url);
                struct in_addr in4;
                h->numeric = inet_pton(AF_INET, h->host, &in4) == 1;
        }
        if (port) {
                size_t plen = (size_t)(a + alen - port);
                unsigned long v = 0;
                for (size_t i = 0; i < plen; i++)
                        v = port[i] >= '0' && port[i] <= '9' && v < 65536 ? v * 10 + (unsigned long)(port[i] - '0')
                                                                          : 65536;
                if (plen == 0 || v == 0 || v > 65535)
                        return diag_set(diag, -EINVAL, "server %.300s: a bad port", url);
                h->port = xasprintf("%lu", v);
        } else {
                h->port = xstrdup(h->https ? "443" : "80");
        }
        h->authority = xstrndup(a, alen);
        size_t plen = strlen(path);
        while (plen > 0 && path[plen - 1] == '/')
                plen--;
        h->prefix = xstrndup(path, plen);
        return 0;
}

int kapi_http_new(const struct kapi_config *cfg, struct kapi_http **out, struct diag *diag)
{
        struct kapi_http *h = xcalloc(1, sizeof(*h));
        h->cfg = cfg;
        pthread_mutex_init(&h->mu, NULL);
        int r = parse_url(h, cfg->server ? cfg->server : "", diag);
        if (r == 0 && h->https)
                r = kapi_tls_load(diag);
        if (r < 0) {
                kapi_http_free(h);
                return r;
        }
        *out = h;
        return 0;
}

void kapi_conn_close(struct kapi_conn *c)
{
        if (!c)
                return;
        kapi_tls_free(c->tls);
        if (c->fd >= 0)
                close(c->fd);
        free(c);
}

void kapi_http_free(struct kapi_http *h)
{
        if (!h)
                return;
        for (size_t i = 0; i < h->n_idle; i++)
                kapi_conn_close(h->idle[i]);
        kapi_tls_ctx_free(h->tls);
        pthread_mutex_destroy(&h->mu);
        free(h->host);
        free(h->port);
        free(h->authority);
        free(h->prefix);
        free(h);
}

/* ---- deadlines ---- */

struct clock {
        const atomic_bool *stop;
        long timeout_ms, connect_timeout_ms, low_speed_ms;
        uint64_t call_end;    /* 0: none */
        uint64_t connect_end; /* while connecting */
        uint64_t last_move;   /* once connected: the low-speed limit */
        bool connected;
};

/* Waits until fd is ready for events (or in error: the next read or write
 * says which).  Returns 0, or -ECANCELED/-ETIMEDOUT with diag. */
static int wait_fd(int fd, short events, const struct clock *k, struct diag *diag)
{
        for (;;) {
                if (k->stop && atomic_load(k->stop))
                        return diag_set(diag, -ECANCELED, "stopped");
                uint64_t now = now_ms(), end = UINT64_MAX;
                if (k->call_end) {
                        if (now >= k->call_end)
                                return diag_set(diag, -ETIMEDOUT, "timed out after %ld ms",
                                                k->timeout_ms);
                        end = k->call_end;
                }
                if (!k->connected) {
                        if (now >= k->connect_end)
                                return diag_set(diag, -ETIMEDOUT, "no connection within %ld ms",
                                                k->connect_timeout_ms);
                        end = k->connect_end < end ? k->connect_end : end;
                } else if (k->low_speed_ms > 0) {
                        uint64_t ls = k->last_move + (uint64_t)k->low_speed_ms;
                        if (now >= ls)
                                return diag_set(diag, -ETIMEDOUT, "no byte moved for %ld ms",
                                                k->low_speed_ms);
                        end = ls < end ? ls : end;
                }
                uint64_t wait = end == UINT64_MAX ? (uint64_t)INT_MAX : end - now;
                if (k->stop && wait > KAPI_HTTP_STOP_POLL_MS)
                        wait = KAPI_HTTP_STOP_POLL_MS;
                struct pollfd pfd = { .fd = fd, .events = events };
                int n = poll(&pfd, 1, wait > INT_MAX ? INT_MAX : (int)wait);
                if (n > 0)
                        return 0;
                if (n < 0 && errno != EINTR)
                        return diag_set(diag, -errno, "poll: %s", strerror(errno));
        }
}

/* ---- a connection's bytes ---- */

/* SIGPIPE blocked in this thread for a call; see the opening comment. */
bool kapi_sigpipe_block(sigset_t *old)
{
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &s, old);
        return !sigismember(old, SIGPIPE);
}

void kapi_sigpipe_restore(const sigset_t *old, bool blocked)
{
        if (!blocked)
                return;
        sigset_t pending, s;
        sigemptyset(&s);
        sigaddset(&s, SIGPIPE);
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
                const struct timespec zero = { 0, 0 };
                while (sigtimedwait(&s, NULL, &zero) == SIGPIPE)
                        ;
        }
        pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* Whether bytes moved on the socket: the TLS records' bytes count, not
 * only the decrypted ones. */
static bool wire_moved(struct kapi_conn *c, ssize_t n)
{
        if (!c->tls)
                return n > 0;
        uint64_t w = kapi_tls_wire_bytes(c->tls);
        if (w == c->wire)
                return false;
        c->wire = w;
        return true;
}

ssize_t kapi_conn_read_step(struct kapi_conn *c, char *buf, size_t len, short *want, bool *moved,
                            struct diag *diag)
{
        ssize_t n;
        *want = POLLIN;
        if (c->tls) {
                n = kapi_tls_read(c->tls, buf, len, want, diag);
        } else {
                do
                        n = recv(c->fd, buf, len, 0);
                while (n < 0 && errno == EINTR);
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        n = -EAGAIN;
                else if (n < 0)
                        n = diag_set(diag, -ECONNRESET, "read: %s", strerror(errno));
        }
        *moved = wire_moved(c, n);
        return n;
}

ssize_t kapi_conn_write_step(struct kapi_conn *c, const char *buf, size_t len, short *want,
                             bool *moved, struct diag *diag)
{
        ssize_t n;
        *want = POLLOUT;
        if (c->tls) {
                sigset_t old;
                bool blocked = kapi_sigpipe_block(&old);
                n = kapi_tls_write(c->tls, buf, len, want, diag);
                kapi_sigpipe_restore(&old, blocked);
        } else {
                do
                        n = send(c->fd, buf, len, MSG_NOSIGNAL);
                while (n < 0 && errno == EINTR);
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        n = -EAGAIN;
                else if (n < 0)
                        n = diag_set(diag, -ECONNRESET, "write: %s", strerror(errno));
        }
        *moved = wire_moved(c, n);
        return n;
}

/* Reads what came: > 0 bytes, 0 at the end of the stream, or -errno with
 * diag (-ECONNRESET, or wait_fd's). */
static ssize_t conn_read(struct kapi_conn *c, char *buf, size_t len, struct clock *k,
                         struct diag *diag)
{
        for (;;) {
                short want;
                bool moved;
                ssize_t n = kapi_conn_read_step(c, buf, len, &want, &moved, diag);
                if (moved)
                        k->last_move = now_ms();
                if (n != -EAGAIN)
                        return n;
                int r = wait_fd(c->fd, want, k, diag);
                if (r < 0)
                        return r;
        }
}

/* Writes all of buf.  Returns 0, or -errno with diag (-ECONNRESET, or
 * wait_fd's). */
static int conn_write_all(struct kapi_conn *c, const char *buf, size_t len, struct clock *k,
                          struct diag *diag)
{
        while (len > 0) {
                short want;
                bool moved;
                ssize_t n = kapi_conn_write_step(c, buf, len, &want, &moved, diag);
                if (moved)
                        k->last_move = now_ms();
                if (n > 0) {
                        buf += n;
                        len -= (size_t)n;
                        continue;
                }
                int r = n == -EAGAIN ? wait_fd(c->fd, want, k, diag) : (int)n;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- connecting ---- */

void kapi_http_socket_options(int fd)
{
        int on = 1, idle = KEEPALIVE_S;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
}

/* Tries each address of the host in turn within the connect deadline.
 * Returns 0 and *out, or -errno with diag. */
static int connect_tcp(struct kapi_http *h, struct clock *k, int *out, struct diag *diag)
{
        struct addrinfo hints = {
                .ai_family = AF_UNSPEC,
                .ai_socktype = SOCK_STREAM,
                .ai_flags = AI_NUMERICSERV | (h->numeric ? AI_NUMERICHOST : AI_ADDRCONFIG),
        };
        struct addrinfo *res = NULL;
        int g = getaddrinfo(h->host, h->port, &hints, &res);
        if (g != 0)
                return diag_set(diag, -EHOSTUNREACH, "cannot resolve %s: %s", h->host,
                                g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
        int r = -EHOSTUNREACH;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                _cleanup_close_ int fd =
                        socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0) {
                        r = diag_set(diag, -errno, "socket: %s", strerror(errno));
                        continue;
                }
                kapi_http_socket_options(fd);
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                        if (errno != EINPROGRESS) {
                                r = diag_set(diag, -errno, "connect to %s port %s: %s", h->host,
                                             h->port, strerror(errno));
                                continue;
                        }
                        r = wait_fd(fd, POLLOUT, k, diag);
                        if (r < 0)
                                break; /* out of time, or stopped */
                        int err = 0;
                        socklen_t el = sizeof(err);
                        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
                                err = errno;
                        if (err) {
                                r = diag_set(diag, -err, "connect to %s port %s: %s", h->host,
                                             h->port, strerror(err));
                                continue;
                        }
                }
                *out = TAKE_FD(fd);
                r = 0;
                break;
        }
        freeaddrinfo(res);
        return r;
}

/* Under h->mu: the TLS context, built on first use and again when one of
 * its files changed, and a connection's TLS state from it. */
int kapi_http_tls_for(struct kapi_http *h, int fd, struct kapi_tls **out, struct diag *diag)
{
        pthread_mutex_lock(&h->mu);
        int r = 0;
        if (h->tls && kapi_tls_ctx_stale(h->tls, h->cfg)) {
                log_debug("kapi", "TLS files changed; reading them again");
                kapi_tls_ctx_free(h->tls);
                h->tls = NULL;
        }
        if (!h->tls)
                r = kapi_tls_ctx_new(h->cfg, &h->tls, diag);
        if (r == 0)
                r = kapi_tls_new(h->tls, fd, h->host, out, diag);
        pthread_mutex_unlock(&h->mu);
        return r;
}

static int conn_open(struct kapi_http *h, struct clock *k, struct kapi_conn **out, struct diag *diag)
{
        k->connected = false;
        k->connect_end = now_ms() + (uint64_t)k->connect_timeout_ms;
        struct kapi_conn *c = xcalloc(1, sizeof(*c));
        c->fd = -1;
        int r = connect_tcp(h, k, &c->fd, diag);
        if (r == 0 && h->https)
                r = kapi_http_tls_for(h, c->fd, &c->tls, diag);
        while (r == 0 && c->tls) {
                short want = 0;
                r = kapi_tls_handshake(c->tls, &want, diag);
                if (r == 0)
                        break;
                if (r == -EAGAIN)
                        r = wait_fd(c->fd, want, k, diag);
        }
        if (r < 0) {
                kapi_conn_close(c);
                return r;
        }
        if (c->tls)
                c->wire = kapi_tls_wire_bytes(c->tls);
        *out = c;
        return 0;
}

/* ---- the pool ---- */

static bool conn_idle_ok(struct kapi_conn *c)
{
        if (c->tls)
                return kapi_tls_idle_ok(c->tls);
        char b;
        return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
               (errno == EAGAIN || errno == EWOULDBLOCK);
}

struct kapi_conn *kapi_http_pool_take(struct kapi_http *h)
{
        for (;;) {
                pthread_mutex_lock(&h->mu);
                struct kapi_conn *c = h->n_idle ? h->idle[--h->n_idle] : NULL;
                pthread_mutex_unlock(&h->mu);
                if (!c)
                        return NULL;
                if (now_ms() - c->idle_since < KAPI_HTTP_IDLE_MS && conn_idle_ok(c))
                        return c;
                kapi_conn_close(c);
        }
}

void kapi_http_pool_put(struct kapi_http *h, struct kapi_conn *c)
{
        c->idle_since = now_ms();
        pthread_mutex_lock(&h->mu);
        if (h->n_idle < KAPI_HTTP_POOL_MAX) {
                h->idle[h->n_idle++] = c;
                c = NULL;
        }
        pthread_mutex_unlock(&h->mu);
        kapi_conn_close(c);
}

/* ---- one exchange ---- */

struct exchange {
        struct kapi_http_parser parser;
        char buf[READ_BUF];
};

/* Writes the request on c and reads its response into the sink.  Returns
 * as kapi_http_call; *nothing_came says the connection failed before any
 * byte of a response (the server may have closed it while it was idle). */
static int exchange(struct kapi_conn *c, const char *head, size_t head_len,
                    const struct kapi_http_request *rq, const struct kapi_http_sink *sink,
                    struct clock *k, long *status, bool *nothing_came, struct diag *diag)
{
        k->connected = true;
        k->last_move = now_ms();
        c->reusable = false;
        *nothing_came = false;
        int r = conn_write_all(c, head, head_len, k, diag);
        if (r == 0 && rq->body)
                r = conn_write_all(c, rq->body, rq->body_len, k, diag);
        if (r < 0) {
                *nothing_came = r == -ECONNRESET;
                return r;
        }

        _cleanup_free_ struct exchange *x = xmalloc(sizeof(*x));
        struct kapi_http_parser *p = &x->parser;
        kapi_http_parser_init(p);
        for (;;) {
                ssize_t n = conn_read(c, x->buf, sizeof(x->buf), k, diag);
                if (n < 0) {
                        *nothing_came = n == -ECONNRESET && !kapi_http_parser_started(p);
                        return (int)n;
                }
                if (n == 0) {
                        *nothing_came = !kapi_http_parser_started(p);
                        r = kapi_http_parse_eof(p);
                        return r < 0 ? diag_set(diag, r, "%s", p->why) : 0;
                }
                size_t off = 0;
                for (;;) {
                        struct kapi_http_step st;
                        r = kapi_http_parse(p, x->buf + off, (size_t)n - off, &st);
                        if (r < 0)
                                return diag_set(diag, r, "a broken response: %s", p->why);
                        off += st.taken;
                        if (st.event == KAPI_HTTP_MORE)
                                break;
                        if (st.event == KAPI_HTTP_END) {
                                /* bytes past the response: something is off */
                                c->reusable = p->keep_alive && off == (size_t)n;
                                return 0;
                        }
                        if (st.event == KAPI_HTTP_HEAD) {
                                *status = p->status;
                                if (sink->head && sink->head(sink->ud, p) != 0)
                                        return 1;
                        } else if (sink->body && sink->body(sink->ud, st.data, st.len) != 0) {
                                return 1;
                        }
                }
        }
}

static bool has_crlf(const char *s)
{
        return s && strpbrk(s, "\r\n");
}

char *kapi_http_head(const struct kapi_http *h, const struct kapi_http_request *rq,
                     size_t *len, struct diag *diag)
{
        if (has_crlf(rq->method) || has_crlf(rq->path) || has_crlf(rq->token) ||
            has_crlf(rq->content_type) || has_crlf(rq->user_agent) || has_crlf(rq->accept)) {
                diag_set(diag, -EINVAL, "a line break inside the request's head");
                return NULL;
        }
        char length[32] = "";
        if (rq->body)
                snprintf(length, sizeof(length), "Content-Length: %zu\r\n", rq->body_len);
        const char *ct = rq->content_type, *tok = rq->token;
        char *head = xasprintf("%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\nAccept: %s\r\n"
                               "%s%s%s%s%s%s%s\r\n",
                               rq->method, h->prefix, rq->path, h->authority, rq->user_agent,
                               rq->accept, ct ? "Content-Type: " : "", ct ? ct : "",
                               ct ? "\r\n" : "", length, tok ? "Authorization: Bearer " : "",
                               tok ? tok : "", tok ? "\r\n" : "");
        *len = strlen(head);
        return head;
}

int kapi_http_call(struct kapi_http *h, const struct kapi_http_request *rq,
                   const struct kapi_http_sink *sink, long *status, struct diag *diag)
{
        *status = 0;
        size_t head_len;
        char *head = kapi_http_head(h, rq, &head_len, diag);
        if (!head)
                return -EINVAL;

        struct clock k = {
                .stop = rq->stop,
                .timeout_ms = rq->timeout_ms,
                .connect_timeout_ms = rq->connect_timeout_ms,
                .low_speed_ms = rq->low_speed_ms,
                .call_end = rq->timeout_ms > 0 ? now_ms() + (uint64_t)rq->timeout_ms : 0,
        };
        sigset_t old;
        bool blocked = kapi_sigpipe_block(&old);
        int r;
        for (int attempt = 0;; attempt++) {
                if (rq->stop && atomic_load(rq->stop)) {
                        r = diag_set(diag, -ECANCELED, "stopped");
                        break;
                }
                struct kapi_conn *c = kapi_http_pool_take(h);
                bool reused = c != NULL, nothing_came = false;
                if (!c) {
                        r = conn_open(h, &k, &c, diag);
                        if (r < 0)
                                break;
                }
                r = exchange(c, head, head_len, rq, sink, &k, status, &nothing_came, diag);
                if (r == 0 && c->reusable)
                        kapi_http_pool_put(h, c);
                else
                        kapi_conn_close(c);
                if (r < 0 && reused && nothing_came && attempt == 0) {
                        log_debug("kapi", "idle connection gone; once more on a new one error=%d",
                                  r);
                        continue;
                }
                break;
        }
        kapi_sigpipe_restore(&old, blocked);
        explicit_bzero(head, head_len);
        free(head);
        return r;
}
