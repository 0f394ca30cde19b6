/* The metrics endpoint: a small HTTP/1.1 server on a libuv loop of its own,
 * run by its own thread (see http.h).
 *
 * Requests are GET or HEAD with no body; a handler only takes references to
 * the store's latest snapshots (or reads its heartbeat and readiness), so a
 * response is ready at once and is written straight from the published text
 * by one uv_write, without a copy.  While a response is being written the
 * connection is not read: pipelined requests wait in its buffer and are
 * answered in order once the previous response is out, and a read never
 * takes more than the buffer has room for, so what does not fit waits in
 * the socket (back-pressure) instead of being dropped.  Request heads are
 * parsed strictly (http-request.c, RFC 9112): anything that could frame a
 * body, or be framed differently by another parser, is a 400 and a close.
 *
 * The port is reachable from every pod, so nothing a client does may keep a
 * slot, and /health must always get one:
 * - a request must arrive whole within HTTP_REQUEST_MS of the connection's
 *   start or of its previous response (a fixed deadline, not an inactivity
 *   timeout that each byte restarts), and fit in HTTP_REQUEST_MAX bytes;
 * - a response must be written within HTTP_WRITE_MS;
 * - a newcomer is always accepted: past HTTP_PER_SOURCE connections from its
 *   address, or max_conns in all (HTTP_MAX_CONNS, less where the fd limit
 *   is lower), it closes the connection that matters least among those past
 *   their first HTTP_GRACE_MS: a keep-alive connection waiting for its next
 *   request, else the oldest unfinished request, else the oldest response
 *   being written (among its own address's when that is the one over its
 *   share).  Connections in their grace period are closed only at twice the
 *   limit, oldest first.  An attacker's slow connections thus make way for
 *   a probe, whose request takes a millisecond, and an attacker who
 *   reconnects at once cannot push the probe out either: its own
 *   reconnections are the ones in their grace period.
 *
 * With a web configuration (config/web.h) the same server speaks TLS and
 * asks for basic authentication:
 * - TLS (web-tls.c) runs between the socket and the request buffer: bytes
 *   read are fed to OpenSSL's memory BIOs (at most WEB_TLS_INPUT_MAX
 *   waiting: the socket is read only while there is room), the handshake
 *   advances as they come, within the request's deadline (HTTP_REQUEST_MS
 *   from the accept covers the handshake and the first request), and what
 *   is decrypted fills the request buffer as plain bytes would.  A
 *   response is encrypted HTTP_TLS_STEP bytes at a time, each step written
 *   before the next is encrypted, so a large /metrics never sits whole in
 *   a second buffer.  A connection whose first byte cannot start a TLS
 *   record (plain HTTP on the TLS port) gets a plain 400, as Go's server
 *   answers it, and is closed; a failed handshake gets OpenSSL's alert and
 *   is closed.  Neither stops the server.
 * - basic authentication (web-auth.c) guards every path, /health and
 *   /ready included, as exporter-toolkit does: the kubelet's probes send
 *   the Authorization header (httpGet's httpHeaders).  A password not yet
 *   known is checked with bcrypt on libuv's thread pool when auth-gate.c
 *   gives the request a slot (taking turns across source addresses; a
 *   429 to an address over its failures, a 503 past its share of the
 *   queue), while the connection waits unread; results are remembered,
 *   so a scraper's later requests, and a wrong password repeated, cost a
 *   comparison.
 * - the configured headers are added to every response.
 *
 * Never touches devlet's loop or NVML; never logs above debug (the caller
 * logs start-up failures). */
#include "metrics/http.h"
#include "metrics/auth-gate.h"
#include "metrics/http-request.h"
#include "metrics/web-auth.h"
#include "metrics/web-tls.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <uv.h>

#include "base/cleanup.h"
#include "base/list.h"
#include "base/log.h"
#include "base/thread.h"
#include "base/xalloc.h"

#define HTTP_MAX_CONNS 1024
#define HTTP_PER_SOURCE 16
#define HTTP_GRACE_MS 250
/* file descriptors left to the rest of devlet when sizing max_conns */
#define HTTP_FD_RESERVE 256
#define HTTP_REQUEST_MAX 8192
#define HTTP_REQUEST_MS 5000
#define HTTP_WRITE_MS 30000
/* after the last response of a closing connection: reads are drained this
 * long, so that unread request bytes do not turn our close into a reset
 * that could destroy the response on its way */
#define HTTP_LINGER_MS 2000
/* the kernel caps it at net.core.somaxconn (4096 by default since 5.4):
 * under connection churn a short accept queue drops SYNs, which costs a
 * probe a one-second retransmission; libuv accepts until EAGAIN on each
 * readiness */
#define HTTP_BACKLOG 4096
/* plaintext encrypted per step of a TLS response */
#define HTTP_TLS_STEP (64 * 1024)
/* a 429 (or a 503 for a source past its share of the bcrypt queue) is held
 * this long, the connection unread: a connection then asks at most once
 * per hold, so with HTTP_PER_SOURCE an address cannot make devlet answer
 * thousands of refusals a second */
#define HTTP_AUTH_HOLD_MS 1000

enum conn_state {
        CONN_IDLE,    /* keep-alive, nothing of the next request yet */
        CONN_READING, /* part of a request */
        CONN_WRITING, /* a response in flight */
        CONN_LINGER,  /* last response sent, our side shut down, draining */
        CONN_CLOSING,
};

struct http_conn {
        uv_tcp_t tcp; /* first: handle callbacks cast back */
        uv_timer_t timer;
        struct metrics_http *h;
        DLIST_FIELDS(struct http_conn);
        enum conn_state state;
        uint64_t since;    /* loop time the state began */
        uint64_t accepted; /* loop time of the accept */
        unsigned char source[16]; /* peer address, IPv4 as v4-mapped IPv6 */
        bool keep_alive;
        char *buf; /* request bytes not yet handled */
        size_t len, cap;
        unsigned handles;
        struct web_tls *tls;  /* NULL: plain HTTP */
        bool tls_started;     /* a first byte came */
        /* a request waiting for its bcrypt verification: its job while it
         * waits for a slot (auth-gate.h), then the work request (it holds
         * the connection until its callback); what to answer once done */
        struct web_auth_job *auth_job;
        uv_work_t *auth_work;
        unsigned auth_refusal, auth_retry_s; /* a 429 or 503 held (HTTP_AUTH_HOLD_MS) */
        bool auth_head;
        size_t auth_path_off, auth_path_len, auth_consumed;
};

struct http_write {
        uv_write_t req;
        struct http_conn *c;
        char *head;
        struct held_snaps *held; /* NULL unless /metrics */
        /* TLS: the plaintext still to encrypt, from bufs[at] + off */
        uv_buf_t *bufs;
        size_t nbufs, at, off;
};

struct metrics_http {
        uv_loop_t loop;
        char rbuf[HTTP_REQUEST_MAX]; /* every read lands here first (conn_alloc) */
        uv_tcp_t listener;
        struct handoff stop; /* poked by metrics_http_stop */
        pthread_t thread;
        struct metrics_store *store;
        uint64_t health_max_age_ms;
        uint16_t port;
        struct http_conn *conns; /* newest first */
        size_t n_conns, max_conns;
        /* the web configuration's: NULL when off */
        struct web_tls_server *tls;
        struct web_auth *auth;
        char *extra_headers; /* "Name: value\r\n"...; "" when none */
        struct auth_gate *gate; /* with auth */
};

int metrics_http_parse_address(const char *address, char **host, uint16_t *port)
{
        if (!address)
                return -EINVAL;
        const char *colon;
        _cleanup_free_ char *h = NULL;
        if (address[0] == '[') {
                const char *close = strchr(address, ']');
                if (!close || close[1] != ':' || close == address + 1)
                        return -EINVAL;
                h = xstrndup(address + 1, (size_t)(close - address - 1));
                colon = close + 1;
        } else {
                colon = strrchr(address, ':');
                if (!colon)
                        return -EINVAL;
                h = xstrndup(address, (size_t)(colon - address));
                if (strchr(h, ':')) /* a bare IPv6 address needs brackets */
                        return -EINVAL;
        }
        const char *p = colon + 1;
        if (!*p || strlen(p) > 5)
                return -EINVAL;
        unsigned long v = 0;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long)(*p - '0');
        }
        if (v > 65535)
                return -EINVAL;
        *host = TAKE_PTR(h);
        *port = (uint16_t)v;
        return 0;
}

/* ---- connections ---- */

static void conn_unref(struct http_conn *c);

static void conn_on_closed(uv_handle_t *handle)
{
        conn_unref(handle->data);
}

static void conn_close(struct http_conn *c)
{
        if (c->state == CONN_CLOSING)
                return;
        c->state = CONN_CLOSING;
        struct metrics_http *h = c->h;
        if (c->auth_job) { /* waiting for a slot: gives up its place */
                auth_gate_cancel(h->gate, c->source, c);
                web_auth_job_free(TAKE_PTR(c->auth_job));
        }
        DLIST_REMOVE(h->conns, c);
        h->n_conns--;
        uv_close((uv_handle_t *)&c->tcp, conn_on_closed);
        uv_close((uv_handle_t *)&c->timer, conn_on_closed);
}

static void conn_on_deadline(uv_timer_t *t)
{
        struct http_conn *c = t->data;
        log_trace("metrics", "http: deadline passed, closing state=%d", (int)c->state);
        conn_close(c);
}

static void conn_set_state(struct http_conn *c, enum conn_state state, uint64_t deadline_ms)
{
        c->state = state;
        c->since = uv_now(&c->h->loop);
        uv_timer_start(&c->timer, conn_on_deadline, deadline_ms, 0);
}

/* Which connection a newcomer closes: lower is closed first. */
static int evict_rank(const struct http_conn *c, uint64_t now)
{
        int young = now - c->accepted < HTTP_GRACE_MS;
        int state = c->state == CONN_IDLE || c->state == CONN_LINGER ? 0
                    : c->state == CONN_READING                      ? 1
                                                                    : 2;
        return young * 3 + state;
}

/* Closes the connection that matters least among those from source (NULL:
 * among all): idle keep-alive first, then the oldest request, then the
 * oldest response; one in its grace period only if hard. */
static void evict_one(struct metrics_http *h, const unsigned char *source, bool hard)
{
        uint64_t now = uv_now(&h->loop);
        struct http_conn *victim = NULL;
        for (struct http_conn *c = h->conns; c; c = c->next) {
                if (source && memcmp(c->source, source, sizeof(c->source)) != 0)
                        continue;
                if (!hard && now - c->accepted < HTTP_GRACE_MS)
                        continue;
                int r = evict_rank(c, now), v = victim ? evict_rank(victim, now) : 0;
                if (!victim || r < v || (r == v && c->since <= victim->since))
                        victim = c;
        }
        if (victim) {
                log_trace("metrics", "http: making room, closing a connection state=%d",
                          (int)victim->state);
                conn_close(victim);
        }
}

static size_t source_count(const struct metrics_http *h, const unsigned char *source)
{
        size_t n = 0;
        for (const struct http_conn *c = h->conns; c; c = c->next)
                n += memcmp(c->source, source, sizeof(c->source)) == 0;
        return n;
}

static void peer_source(uv_tcp_t *tcp, unsigned char out[16])
{
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        memset(out, 0, 16);
        if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) < 0)
                return;
        if (ss.ss_family == AF_INET6) {
                memcpy(out, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        } else if (ss.ss_family == AF_INET) {
                out[10] = out[11] = 0xff;
                memcpy(out + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        }
}

/* Whether c's request waits for its verification or a refusal held. */
static bool conn_auth_pending(const struct http_conn *c)
{
        return c->auth_job || c->auth_work || c->auth_refusal;
}

/* ---- responses ---- */

/* The references a /metrics response holds until it is written. */
struct held_snaps {
        const struct metrics_snap *snaps[METRICS_SLOTS];
};

static void held_free(struct held_snaps *held)
{
        if (!held)
                return;
        for (size_t i = 0; i < METRICS_SLOTS; i++)
                metrics_snap_unref(held->snaps[i]);
        free(held);
}

static const char *status_text(unsigned status)
{
        switch (status) {
        case 200: return "OK";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        default: return "Error";
        }
}

static void conn_handle_buffered(struct http_conn *c);
static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void conn_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
        struct http_conn *c = req->data;
        free(req);
        if (status < 0 || c->state == CONN_CLOSING) {
                conn_close(c);
                return;
        }
        conn_set_state(c, CONN_LINGER, HTTP_LINGER_MS);
        c->len = 0;
        if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read) < 0)
                conn_close(c);
}

/* Shuts our side down after what is queued is written, then lingers. */
static void conn_finish(struct http_conn *c)
{
        uv_shutdown_t *sd = xcalloc(1, sizeof(*sd));
        sd->data = c;
        if (uv_shutdown(sd, (uv_stream_t *)&c->tcp, conn_on_shutdown) < 0) {
                free(sd);
                conn_close(c);
        }
}

static void conn_tls_pull(struct http_conn *c);

/* A response is out (status < 0: it failed): the next request, or the end. */
static void conn_written(struct http_write *w, int status)
{
        struct http_conn *c = w->c;
        free(w->head);
        held_free(w->held);
        free(w->bufs);
        free(w);
        if (c->state == CONN_CLOSING)
                return;
        if (status < 0) {
                conn_close(c);
                return;
        }
        if (!c->keep_alive) {
                conn_finish(c);
                return;
        }
        conn_set_state(c, c->len ? CONN_READING : CONN_IDLE, HTTP_REQUEST_MS);
        if (c->tls)
                conn_tls_pull(c); /* records that came with the previous request */
        if (c->state == CONN_CLOSING)
                return;
        conn_handle_buffered(c); /* a pipelined request, if one is whole */
        if (c->state != CONN_WRITING && c->state != CONN_CLOSING && !conn_auth_pending(c) &&
            uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read) < 0)
                conn_close(c);
}

static void conn_on_written(uv_write_t *req, int status)
{
        conn_written((struct http_write *)req, status); /* req is its first member */
}

/* ---- TLS output ---- */

/* One write of ciphertext; w: the response it is part of (continued when
 * it is written), or NULL (handshake records; finish: close after it). */
struct tls_out {
        uv_write_t req;
        struct http_conn *c;
        struct http_write *w;
        bool finish;
        char *data;
};

static void tls_send_more(struct http_write *w, int status);

static void tls_out_done(uv_write_t *req, int status)
{
        struct tls_out *o = (struct tls_out *)req;
        struct http_conn *c = o->c;
        struct http_write *w = o->w;
        bool finish = o->finish;
        free(o->data);
        free(o);
        if (w) {
                tls_send_more(w, status);
        } else if (c->state != CONN_CLOSING) {
                if (status < 0)
                        conn_close(c);
                else if (finish)
                        conn_finish(c);
        }
}

/* Writes the ciphertext waiting in c's TLS state.  Returns 1 when a write
 * was queued, 0 when there was nothing to send, or a negative libuv error. */
static int conn_tls_flush(struct http_conn *c, struct http_write *w, bool finish)
{
        char *data;
        size_t n = web_tls_take_output(c->tls, &data);
        if (!n)
                return 0;
        struct tls_out *o = xcalloc(1, sizeof(*o));
        o->c = c;
        o->w = w;
        o->finish = finish;
        o->data = data;
        uv_buf_t b = uv_buf_init(data, (unsigned)n);
        int r = uv_write(&o->req, (uv_stream_t *)&c->tcp, &b, 1, tls_out_done);
        if (r < 0) {
                free(data);
                free(o);
                return r;
        }
        return 1;
}

/* Encrypts the next HTTP_TLS_STEP bytes of w and writes them; once all is
 * written, the response is done. */
static void tls_send_more(struct http_write *w, int status)
{
        struct http_conn *c = w->c;
        if (status < 0 || c->state == CONN_CLOSING) {
                conn_written(w, status < 0 ? status : UV_ECANCELED);
                return;
        }
        size_t budget = HTTP_TLS_STEP;
        bool was_done = w->at == w->nbufs;
        while (budget && w->at < w->nbufs) {
                const uv_buf_t *b = &w->bufs[w->at];
                size_t n = b->len - w->off < budget ? b->len - w->off : budget;
                if (web_tls_write(c->tls, b->base + w->off, n) < 0) {
                        conn_written(w, UV_EIO);
                        return;
                }
                w->off += n;
                budget -= n;
                if (w->off == b->len) {
                        w->at++;
                        w->off = 0;
                }
        }
        if (!was_done && w->at == w->nbufs && !c->keep_alive)
                web_tls_close_notify(c->tls);
        int r = conn_tls_flush(c, w, false);
        if (r <= 0)
                conn_written(w, r);
}

/* Queues one response: head, then the body bytes unless HEAD.  The
 * connection is not read until it is written. */
static void respond(struct http_conn *c, unsigned status, bool head_only, const char *ctype,
                    const char *text, struct held_snaps *held, const char *extra)
{
        uv_buf_t bufs[1 + 64];
        size_t nb = 1, body = 0;
        if (held) {
                for (size_t i = 0; i < METRICS_SLOTS; i++)
                        for (size_t k = 0; held->snaps[i] && k < held->snaps[i]->n_chunks; k++)
                                body += held->snaps[i]->chunks[k].len;
        } else {
                body = strlen(text);
        }
        struct http_write *w = xcalloc(1, sizeof(*w));
        w->c = c;
        w->held = held;
        w->head = xasprintf("HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s\r\n",
                            status, status_text(status), ctype, body, extra ? extra : "",
                            c->h->extra_headers, c->keep_alive ? "" : "Connection: close\r\n");
        bufs[0] = uv_buf_init(w->head, (unsigned)strlen(w->head));
        uv_buf_t *v = bufs;
        _cleanup_free_ uv_buf_t *big = NULL;
        if (!head_only && held) {
                size_t n = 0;
                for (size_t i = 0; i < METRICS_SLOTS; i++)
                        n += held->snaps[i] ? held->snaps[i]->n_chunks : 0;
                if (1 + n > ARRAY_SIZE(bufs)) {
                        big = xcalloc(1 + n, sizeof(*big));
                        big[0] = bufs[0];
                        v = big;
                }
                for (size_t i = 0; i < METRICS_SLOTS; i++)
                        for (size_t k = 0; held->snaps[i] && k < held->snaps[i]->n_chunks; k++) {
                                const struct metrics_chunk *ch = &held->snaps[i]->chunks[k];
                                if (ch->len)
                                        v[nb++] = uv_buf_init((char *)(uintptr_t)ch->data,
                                                              (unsigned)ch->len);
                        }
        } else if (!head_only && body) {
                bufs[nb++] = uv_buf_init((char *)(uintptr_t)text, (unsigned)body);
        }
        uv_read_stop((uv_stream_t *)&c->tcp);
        conn_set_state(c, CONN_WRITING, HTTP_WRITE_MS);
        if (c->tls) {
                /* text is static or held: it outlives the steps */
                w->bufs = xmalloc(nb * sizeof(*w->bufs));
                memcpy(w->bufs, v, nb * sizeof(*v));
                w->nbufs = nb;
                tls_send_more(w, 0);
                return;
        }
        if (uv_write(&w->req, (uv_stream_t *)&c->tcp, v, (unsigned)nb, conn_on_written) < 0) {
                free(w->head);
                held_free(w->held);
                free(w);
                conn_close(c);
        }
}

static void respond_text(struct http_conn *c, unsigned status, bool head_only, const char *text)
{
        respond(c, status, head_only, "text/plain; charset=utf-8", text, NULL,
                status == 405 ? "Allow: GET, HEAD\r\n" : NULL);
}

static void route(struct http_conn *c, bool head_only, const char *path, size_t plen)
{
        struct metrics_http *h = c->h;
#define IS(lit) (plen == sizeof(lit) - 1 && memcmp(path, lit, plen) == 0)
        if (IS("/metrics")) {
                struct held_snaps *held = xcalloc(1, sizeof(*held));
                metrics_store_get(h->store, held->snaps);
                respond(c, 200, head_only, METRICS_CONTENT_TYPE, NULL, held, NULL);
        } else if (IS("/health")) {
                if (metrics_store_healthy(h->store, h->health_max_age_ms))
                        respond_text(c, 200, head_only, "ok");
                else
                        respond_text(c, 503, head_only, "event loop stalled");
        } else if (IS("/ready")) {
                if (!metrics_store_healthy(h->store, h->health_max_age_ms))
                        respond_text(c, 503, head_only, "event loop stalled");
                else if (metrics_store_ready(h->store))
                        respond_text(c, 200, head_only, "ok");
                else
                        respond_text(c, 503, head_only,
                                     "not every resource is registered with the kubelet");
        } else {
                respond_text(c, 404, head_only, "not found; try /metrics\n");
        }
#undef IS
}

/* ---- requests ---- */

/* Drops a reference a handle or a work request held on c. */
static void conn_unref(struct http_conn *c)
{
        if (--c->handles > 0)
                return;
        web_tls_free(c->tls);
        free(c->buf);
        free(c);
}

static void respond_401(struct http_conn *c, bool head_only)
{
        respond(c, 401, head_only, "text/plain; charset=utf-8", "Unauthorized\n", NULL,
                "WWW-Authenticate: Basic\r\n");
}

/* Answers the request the verification was for (status 200: as asked),
 * then drops its bytes. */
static void conn_after_auth(struct http_conn *c, unsigned status, unsigned retry_s)
{
        char extra[40];
        if (status == 200) {
                route(c, c->auth_head, c->buf + c->auth_path_off, c->auth_path_len);
        } else if (status == 401) {
                respond_401(c, c->auth_head);
        } else {
                snprintf(extra, sizeof(extra), "Retry-After: %u\r\n", retry_s);
                respond(c, status, c->auth_head, "text/plain; charset=utf-8",
                        status == 429 ? "too many failed authentications; try again later\n"
                                      : "busy verifying passwords; try again\n",
                        NULL, extra);
        }
        memmove(c->buf, c->buf + c->auth_consumed, c->len - c->auth_consumed);
        c->len -= c->auth_consumed;
}

static void conn_on_hold_end(uv_timer_t *t)
{
        struct http_conn *c = t->data;
        unsigned status = c->auth_refusal;
        c->auth_refusal = 0;
        conn_after_auth(c, status, c->auth_retry_s);
}

/* A refusal for a source past its limits, answered HTTP_AUTH_HOLD_MS
 * later (instead of the request's deadline). */
static void conn_refuse_later(struct http_conn *c, unsigned status, unsigned retry_s)
{
        c->auth_refusal = status;
        c->auth_retry_s = retry_s;
        uv_read_stop((uv_stream_t *)&c->tcp);
        uv_timer_start(&c->timer, conn_on_hold_end, HTTP_AUTH_HOLD_MS, 0);
}

struct auth_work {
        uv_work_t req;
        struct http_conn *c;
        struct web_auth_job *job;
};

static void auth_start(struct http_conn *c);

/* A verification slot of source's is free: the next waiting request in
 * turn gets it. */
static void auth_next(struct metrics_http *h, const unsigned char *source, bool ok)
{
        unsigned char next_source[AUTH_GATE_ADDR_SIZE];
        struct http_conn *next = auth_gate_done(h->gate, source, ok, next_source);
        if (next)
                auth_start(next);
}

static void auth_run(uv_work_t *req)
{
        web_auth_job_run(((struct auth_work *)req)->job);
}

static void auth_done(uv_work_t *req, int status)
{
        struct auth_work *a = (struct auth_work *)req;
        struct http_conn *c = a->c;
        struct metrics_http *h = c->h;
        bool ok = false;
        if (status == 0)
                ok = web_auth_finish(h->auth, a->job);
        else
                web_auth_job_free(a->job);
        free(a);
        c->auth_work = NULL;
        unsigned char source[AUTH_GATE_ADDR_SIZE];
        memcpy(source, c->source, sizeof(source));
        if (c->state != CONN_CLOSING)
                conn_after_auth(c, ok ? 200 : 401, 0);
        conn_unref(c);
        auth_next(h, source, ok);
}

/* c's request has a verification slot: bcrypt on the pool, unless its
 * answer became known while it waited. */
static void auth_start(struct http_conn *c)
{
        struct metrics_http *h = c->h;
        unsigned char source[AUTH_GATE_ADDR_SIZE];
        memcpy(source, c->source, sizeof(source));
        struct web_auth_job *job = TAKE_PTR(c->auth_job);
        bool ok = false;
        if (!web_auth_job_known(h->auth, job, &ok)) {
                struct auth_work *a = xcalloc(1, sizeof(*a));
                a->c = c;
                a->job = job;
                if (uv_queue_work(&h->loop, &a->req, auth_run, auth_done) == 0) {
                        c->handles++;
                        c->auth_work = &a->req;
                        return;
                }
                free(a);
        }
        web_auth_job_free(job);
        conn_after_auth(c, ok ? 200 : 401, 0);
        auth_next(h, source, ok);
}

/* Whether the request may be answered now: true when no authentication is
 * asked for or its credentials are known good; false when it was answered
 * (401, 429, 503) or waits for bcrypt (then answered by auth_done). */
static bool conn_authorized(struct http_conn *c, const struct http_request *req, size_t n)
{
        struct metrics_http *h = c->h;
        if (!h->auth)
                return true;
        struct web_auth_job *job = NULL;
        uint64_t now = uv_now(&h->loop);
        unsigned retry_s = 1;
        c->auth_head = req->head;
        c->auth_path_off = (size_t)(req->path - c->buf);
        c->auth_path_len = req->path_len;
        c->auth_consumed = n;
        switch (web_auth_check(h->auth, req->authorization, req->authorization_len, &job)) {
        case WEB_AUTH_OK:
                return true;
        case WEB_AUTH_DENY:
                conn_after_auth(c, 401, 0);
                return false;
        case WEB_AUTH_FAILED:
                if (auth_gate_fail(h->gate, c->source, now, &retry_s))
                        conn_after_auth(c, 401, 0);
                else
                        conn_refuse_later(c, 429, retry_s);
                return false;
        case WEB_AUTH_SLOW:
                break;
        }
        void *bumped = NULL;
        enum auth_gate_verdict v = auth_gate_submit(h->gate, c->source, c, now, &retry_s, &bumped);
        if (bumped) { /* another address's request, pushed out of the queue */
                struct http_conn *b = bumped;
                web_auth_job_free(TAKE_PTR(b->auth_job));
                conn_after_auth(b, 503, 1);
        }
        if (v == AUTH_GATE_LIMITED || v == AUTH_GATE_BUSY) {
                web_auth_job_free(job);
                conn_refuse_later(c, v == AUTH_GATE_LIMITED ? 429 : 503, retry_s);
                return false;
        }
        c->auth_job = job;
        uv_read_stop((uv_stream_t *)&c->tcp); /* the buffer stays as it is */
        if (v == AUTH_GATE_RUN)
                auth_start(c);
        return false;
}

/* Answers the first request in the buffer if its head is whole (parsed by
 * http-request.c). */
static void conn_handle_buffered(struct http_conn *c)
{
        if (conn_auth_pending(c))
                return;
        struct http_request req;
        size_t n = http_request_parse(c->buf, c->len, HTTP_REQUEST_MAX, &req);
        if (!n)
                return;
        c->keep_alive = req.keep_alive;
        if (req.status) {
                respond_text(c, req.status, req.head, req.why);
        } else if (conn_authorized(c, &req, n)) {
                route(c, req.head, req.path, req.path_len); /* path points into c->buf */
        } else {
                return; /* answered, or waiting: conn_authorized moved the buffer on */
        }
        memmove(c->buf, c->buf + n, c->len - n);
        c->len -= n;
}

/* Reads never take more than the request buffer has room for (with TLS:
 * than the ciphertext buffer has): the rest stays in the socket
 * (back-pressure), so pipelined requests wait for their turn instead of
 * being dropped.  While lingering, bytes are read to be dropped. */
static void conn_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
        const struct http_conn *c = handle->data;
        char *rbuf = c->h->rbuf;
        size_t room = c->state == CONN_LINGER ? HTTP_REQUEST_MAX : HTTP_REQUEST_MAX - c->len;
        if (c->tls && c->state != CONN_LINGER) {
                size_t pending = web_tls_input_pending(c->tls);
                room = pending < WEB_TLS_INPUT_MAX ? WEB_TLS_INPUT_MAX - pending : 0;
                room = room < HTTP_REQUEST_MAX ? room : HTTP_REQUEST_MAX;
        }
        *buf = uv_buf_init(rbuf, (unsigned)room);
}

/* Appends plain request bytes. */
static void conn_append(struct http_conn *c, const char *data, size_t n)
{
        if (c->len + n > c->cap) {
                c->cap = c->len + n < 512 ? 512 : HTTP_REQUEST_MAX;
                c->buf = xrealloc(c->buf, c->cap);
        }
        memcpy(c->buf + c->len, data, n);
        c->len += n;
        if (c->state == CONN_IDLE) {
                /* the deadline of a whole request keeps running: it started
                 * when the connection did or the previous response ended */
                c->state = CONN_READING;
                c->since = uv_now(&c->h->loop);
        }
}

/* Decrypts what is buffered into the request buffer, as far as it has
 * room; a broken stream closes the connection. */
static void conn_tls_pull(struct http_conn *c)
{
        char plain[HTTP_REQUEST_MAX];
        while (c->len < HTTP_REQUEST_MAX) {
                ssize_t n = web_tls_read(c->tls, plain, HTTP_REQUEST_MAX - c->len);
                if (n == 0)
                        break;
                if (n < 0) {
                        conn_close(c);
                        return;
                }
                conn_append(c, plain, (size_t)n);
        }
        if (conn_tls_flush(c, NULL, false) < 0)
                conn_close(c);
}

static const char plain_on_tls[] = "HTTP/1.0 400 Bad Request\r\nConnection: close\r\n\r\n"
                                   "Client sent an HTTP request to an HTTPS server.\n";

/* Ciphertext from the socket: the handshake first, then requests. */
static void conn_tls_input(struct http_conn *c, const char *data, size_t n)
{
        if (!c->tls_started) {
                c->tls_started = true;
                if ((unsigned char)data[0] != 0x16) { /* not a handshake record */
                        log_trace("metrics", "http: not TLS on the TLS port, answering 400");
                        uv_read_stop((uv_stream_t *)&c->tcp);
                        conn_set_state(c, CONN_WRITING, HTTP_WRITE_MS);
                        struct tls_out *o = xcalloc(1, sizeof(*o));
                        o->c = c;
                        o->finish = true;
                        uv_buf_t b = uv_buf_init((char *)(uintptr_t)plain_on_tls,
                                                 sizeof(plain_on_tls) - 1);
                        if (uv_write(&o->req, (uv_stream_t *)&c->tcp, &b, 1, tls_out_done) < 0) {
                                free(o);
                                conn_close(c);
                        }
                        return;
                }
        }
        if (web_tls_feed(c->tls, data, n) < 0) {
                conn_close(c);
                return;
        }
        struct diag diag = { 0 };
        int r = web_tls_handshake(c->tls, &diag);
        if (r < 0) {
                log_trace("metrics", "http: %s", diag.message);
                uv_read_stop((uv_stream_t *)&c->tcp);
                conn_set_state(c, CONN_WRITING, HTTP_WRITE_MS);
                int f = conn_tls_flush(c, NULL, true); /* the alert, then the end */
                if (f < 0)
                        conn_close(c);
                else if (f == 0)
                        conn_finish(c);
                return;
        }
        if (r == 0) {
                if (conn_tls_flush(c, NULL, false) < 0)
                        conn_close(c);
                return;
        }
        conn_tls_pull(c);
        if (c->state != CONN_CLOSING && c->state != CONN_WRITING)
                conn_handle_buffered(c);
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
        struct http_conn *c = stream->data;
        if (nread == 0 || c->state == CONN_CLOSING)
                return;
        if (nread < 0 || c->state == CONN_LINGER) {
                if (nread < 0)
                        conn_close(c); /* EOF or error; while lingering, bytes are dropped */
                return;
        }
        if (c->tls) {
                conn_tls_input(c, buf->base, (size_t)nread);
                return;
        }
        conn_append(c, buf->base, (size_t)nread); /* at most the room left (conn_alloc) */
        conn_handle_buffered(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
        struct metrics_http *h = listener->data;
        if (status < 0)
                return;
        struct http_conn *c = xcalloc(1, sizeof(*c));
        c->h = h;
        uv_tcp_init(&h->loop, &c->tcp);
        uv_timer_init(&h->loop, &c->timer);
        c->tcp.data = c;
        c->timer.data = c;
        c->handles = 2;
        if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
                c->state = CONN_CLOSING;
                uv_close((uv_handle_t *)&c->tcp, conn_on_closed);
                uv_close((uv_handle_t *)&c->timer, conn_on_closed);
                return;
        }
        peer_source(&c->tcp, c->source);
        size_t from_source = source_count(h, c->source);
        if (from_source >= HTTP_PER_SOURCE)
                evict_one(h, c->source, from_source >= 2 * HTTP_PER_SOURCE);
        if (h->n_conns >= h->max_conns)
                evict_one(h, NULL, h->n_conns >= 2 * h->max_conns);
        c->accepted = uv_now(&h->loop);
        DLIST_PREPEND(h->conns, c);
        h->n_conns++;
        uv_tcp_nodelay(&c->tcp, 1);
        conn_set_state(c, CONN_READING, HTTP_REQUEST_MS);
        struct diag diag = { 0 };
        if (h->tls && web_tls_server_refresh(h->tls, &diag) < 0)
                log_warn("metrics", "TLS files not reloaded, serving the previous ones error=\"%s\"",
                         diag.message);
        if (h->tls && web_tls_new(h->tls, &c->tls) < 0) {
                conn_close(c);
                return;
        }
        if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read) < 0)
                conn_close(c);
}

/* max_conns: HTTP_MAX_CONNS, or what the fd limit allows for twice as many
 * (the hard limit) beside HTTP_FD_RESERVE for the rest of devlet, after
 * raising the soft fd limit towards the hard one. */
static size_t conns_limit(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 64;
        rlim_t want = 2 * HTTP_MAX_CONNS + HTTP_FD_RESERVE;
        if (rl.rlim_cur < want && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur <= HTTP_FD_RESERVE + 2 * 16)
                return 16;
        size_t n = (size_t)(rl.rlim_cur - HTTP_FD_RESERVE) / 2;
        return n < HTTP_MAX_CONNS ? n : HTTP_MAX_CONNS;
}

/* ---- the thread ---- */

static void on_stop(struct handoff *stop, struct handoff_item *items)
{
        (void)items; /* only a poke */
        struct metrics_http *h = handoff_data(stop);
        while (h->conns)
                conn_close(h->conns);
        uv_close((uv_handle_t *)&h->listener, NULL);
        handoff_close(&h->stop, NULL);
}

static void *http_thread(void *arg)
{
        struct metrics_http *h = arg;
        uv_run(&h->loop, UV_RUN_DEFAULT);
        return NULL;
}

/* Resolves host (numeric or a name such as localhost) for binding; "" is
 * every address, IPv6 dual stack first. */
static int bind_listener(struct metrics_http *h, const char *host, uint16_t port)
{
        if (!*host) {
                struct sockaddr_in6 any6;
                uv_ip6_addr("::", port, &any6);
                int r = uv_tcp_bind(&h->listener, (const struct sockaddr *)&any6, 0);
                if (r == 0)
                        return 0;
                struct sockaddr_in any4;
                uv_ip4_addr("0.0.0.0", port, &any4);
                return uv_tcp_bind(&h->listener, (const struct sockaddr *)&any4, 0);
        }
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        char service[8];
        snprintf(service, sizeof(service), "%u", (unsigned)port);
        struct addrinfo *res = NULL;
        if (getaddrinfo(host, service, &hints, &res) != 0)
                return UV_EADDRNOTAVAIL;
        int r = uv_tcp_bind(&h->listener, res->ai_addr,
                            res->ai_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
        freeaddrinfo(res);
        return r;
}

/* What the web configuration asks for: TLS, users, headers. */
static int web_setup(struct metrics_http *h, const struct config_web *web, struct diag *diag)
{
        h->extra_headers = xstrdup("");
        if (!web)
                return 0;
        for (size_t i = 0; i < web->n_headers; i++) {
                char *next = xasprintf("%s%s: %s\r\n", h->extra_headers, web->headers[i].name,
                                       web->headers[i].value);
                free(h->extra_headers);
                h->extra_headers = next;
        }
        int r = web_auth_new(web, &h->auth, diag);
        if (r < 0)
                return r;
        if (h->auth)
                h->gate = auth_gate_new();
        return web->tls ? web_tls_server_new(web, &h->tls, diag) : 0;
}

static void http_free(struct metrics_http *h)
{
        web_tls_server_free(h->tls);
        web_auth_free(h->auth);
        auth_gate_free(h->gate);
        free(h->extra_headers);
        free(h);
}

int metrics_http_start(const char *address, const struct config_web *web,
                       struct metrics_store *store, uint64_t health_max_age_ms,
                       struct metrics_http **out, struct diag *diag)
{
        _cleanup_free_ char *host = NULL;
        uint16_t port;
        if (metrics_http_parse_address(address, &host, &port) < 0)
                return diag_set(diag, -EINVAL, "invalid metrics address \"%s\": want [host]:port",
                                address);
        struct metrics_http *h = xcalloc(1, sizeof(*h));
        h->store = store;
        h->health_max_age_ms = health_max_age_ms;
        h->max_conns = conns_limit();
        int r = web_setup(h, web, diag);
        if (r < 0) {
                http_free(h);
                return r;
        }
        r = uv_loop_init(&h->loop);
        if (r < 0) {
                http_free(h);
                return diag_set(diag, r, "cannot create the HTTP loop: %s", uv_strerror(r));
        }
        uv_tcp_init(&h->loop, &h->listener);
        h->listener.data = h;
        r = handoff_init(&h->stop, &h->loop, on_stop, h);
        if (r < 0) {
                uv_close((uv_handle_t *)&h->listener, NULL);
                uv_run(&h->loop, UV_RUN_DEFAULT);
                uv_loop_close(&h->loop);
                http_free(h);
                return diag_set(diag, r, "cannot create the HTTP loop: %s", uv_strerror(r));
        }
        bool thread_failed = false;
        r = bind_listener(h, host, port);
        if (r == 0)
                r = uv_listen((uv_stream_t *)&h->listener, HTTP_BACKLOG, on_connection);
        if (r == 0) {
                struct sockaddr_storage ss;
                int len = sizeof(ss);
                if (uv_tcp_getsockname(&h->listener, (struct sockaddr *)&ss, &len) == 0)
                        h->port = ntohs(ss.ss_family == AF_INET6
                                                ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
                r = thread_start(&h->thread, "devlet-http", NULL, http_thread, h);
                if (r < 0)
                        thread_failed = true;
        }
        if (r < 0) {
                if (thread_failed)
                        diag_set(diag, r, "cannot start the HTTP thread: %s", strerror(-r));
                else if (r == UV_EADDRNOTAVAIL && *host)
                        diag_set(diag, r, "cannot resolve metrics address \"%s\"", address);
                else
                        diag_set(diag, r, "cannot listen on %s: %s", address, uv_strerror(r));
                uv_close((uv_handle_t *)&h->listener, NULL);
                handoff_close(&h->stop, NULL);
                uv_run(&h->loop, UV_RUN_DEFAULT);
                uv_loop_close(&h->loop);
                http_free(h);
                return r;
        }
        *out = h;
        return 0;
}

uint16_t metrics_http_port(const struct metrics_http *h)
{
        return h->port;
}

void metrics_http_stop(struct metrics_http *h)
{
        if (!h)
                return;
        handoff_poke(&h->stop);
        pthread_join(h->thread, NULL);
        uv_loop_close(&h->loop);
        http_free(h);
}
