/* The API client: requests and watches on kapi's own HTTP/1.1 transport
 * (http.c, with TLS from OpenSSL loaded on first use in tls.c) and JSON
 * from jansson.  A client owns its config, its transport (one server, a
 * small pool of kept-alive connections) and the token read from its token
 * file; several threads may call at once.
 *
 * Every answer is bounded where it arrives, in the sink the transport
 * hands each piece of the body to: a body goes through the JSON filter
 * (json-filter.c) as it comes, up to max_body bytes (a Content-Length
 * above it fails the call before a byte is read), and only what the
 * call's spec names, within its budget of values and bytes, reaches
 * jansson; a watch keeps one line at a time up to max_watch_line and
 * filters each the same way.  A refusal's Status is kept up to 64 KiB.
 * Redirects are not followed and only http and https are spoken, so a
 * server cannot send us elsewhere.  Every call, a watch as it opens, first
 * takes its turn from the client's token bucket (rate.c), which a 429 or a
 * 503 with Retry-After pauses; the User-Agent names the component.
 * HTTP/1.1 only: each call runs in its own thread, so HTTP/2 multiplexing
 * would buy nothing, and a watch holds its connection anyway.
 *
 * Never logs above debug: the caller gets -errno and a diag. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/http.h"
#include "kapi/internal.h"
#include "kapi/json-filter.h"
#include "kapi/kapi.h"

#define MAX_BODY_DEFAULT (16u << 20)
#define MAX_WATCH_LINE_DEFAULT (4u << 20)
#define CONNECT_TIMEOUT_DEFAULT 5000L
#define LOW_SPEED_DEFAULT 30000L
#define TOKEN_REREAD_MS 60000u
/* A Retry-After is obeyed up to this long: a server (or a proxy) that asks
 * for more does not stop a node's daemon for longer. */
#define RETRY_AFTER_MAX_S 60L
/* The architecture as Kubernetes (GOARCH) names it, for the User-Agent. */
#if defined(__x86_64__)
#define UA_ARCH "amd64"
#elif defined(__aarch64__)
#define UA_ARCH "arm64"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define UA_ARCH "ppc64le"
#elif defined(__s390x__)
#define UA_ARCH "s390x"
#elif defined(__i386__)
#define UA_ARCH "386"
#else
#define UA_ARCH "unknown"
#endif
/* client-go's form, binary/version (os/arch) then who is calling */
#define UA_BASE "devlet/" DEVLET_VERSION " (linux/" UA_ARCH ")"
/* What a refused watch keeps of its answer: enough for a Status. */
#define REFUSAL_BODY_MAX (64u << 10)

struct kapi_client {
        struct kapi_config *cfg;
        struct kapi_http *http;
        pthread_mutex_t mu; /* limits, user agent, rate and the token read from token_file */
        struct kapi_limits limits;
        char *user_agent;
        struct kapi_rate rate;
        char *file_token;
        uint64_t file_token_at; /* monotonic ms of the last read; 0: never */
};

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void free_secret(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}


/* ---- the client ---- */

static bool has_control(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return true;
        return false;
}

int kapi_client_new(struct kapi_config *cfg, struct kapi_client **out, struct diag *diag)
{
        if (!cfg->server || (strncmp(cfg->server, "https://", 8) != 0 &&
                             strncmp(cfg->server, "http://", 7) != 0)) {
                kapi_config_free(cfg);
                return diag_set(diag, -EINVAL, "the server must be an http(s):// URL");
        }
        if (cfg->token && has_control(cfg->token)) {
                kapi_config_free(cfg);
                return diag_set(diag, -EINVAL, "the token holds control characters");
        }
        if ((cfg->cert_file || cfg->cert_data) != (cfg->key_file || cfg->key_data)) {
                kapi_config_free(cfg);
                return diag_set(diag, -EINVAL, "a client certificate needs its key, and a key its certificate");
        }
        struct kapi_http *http;
        int r = kapi_http_new(cfg, &http, diag);
        if (r < 0) {
                kapi_config_free(cfg);
                return r;
        }
        struct kapi_client *c = xcalloc(1, sizeof(*c));
        c->cfg = cfg;
        c->http = http;
        pthread_mutex_init(&c->mu, NULL);
        kapi_client_set_limits(c, &(struct kapi_limits){ 0 });
        c->user_agent = xstrdup(UA_BASE);
        kapi_rate_init(&c->rate, KAPI_QPS_DEFAULT, KAPI_BURST_DEFAULT, now_ms());
        *out = c;
        return 0;
}

void kapi_client_free(struct kapi_client *c)
{
        if (!c)
                return;
        kapi_http_free(c->http);
        pthread_mutex_destroy(&c->mu);
        free_secret(c->file_token);
        free(c->user_agent);
        kapi_config_free(c->cfg);
        free(c);
}

const char *kapi_client_server(const struct kapi_client *c) { return c->cfg->server; }

void kapi_client_set_limits(struct kapi_client *c, const struct kapi_limits *l)
{
        struct kapi_limits v = {
                .max_body = l->max_body ? l->max_body : MAX_BODY_DEFAULT,
                .max_watch_line = l->max_watch_line ? l->max_watch_line : MAX_WATCH_LINE_DEFAULT,
                .connect_timeout_ms = l->connect_timeout_ms > 0 ? l->connect_timeout_ms
                                                                : CONNECT_TIMEOUT_DEFAULT,
                .low_speed_ms = l->low_speed_ms > 0 ? l->low_speed_ms : LOW_SPEED_DEFAULT,
        };
        pthread_mutex_lock(&c->mu);
        c->limits = v;
        pthread_mutex_unlock(&c->mu);
}

void kapi_client_set_user_agent(struct kapi_client *c, const char *component)
{
        char *ua = component && component[0] && !has_control(component)
                           ? xasprintf("%s %.64s", UA_BASE, component)
                           : xstrdup(UA_BASE);
        pthread_mutex_lock(&c->mu);
        free(c->user_agent);
        c->user_agent = ua;
        pthread_mutex_unlock(&c->mu);
}

void kapi_client_set_rate(struct kapi_client *c, double qps, unsigned burst)
{
        if (qps == 0)
                qps = KAPI_QPS_DEFAULT;
        if (burst == 0)
                burst = KAPI_BURST_DEFAULT;
        pthread_mutex_lock(&c->mu);
        uint64_t paused = c->rate.paused_until_ms;
        kapi_rate_init(&c->rate, qps, burst, now_ms());
        c->rate.paused_until_ms = paused;
        pthread_mutex_unlock(&c->mu);
}

void kapi_response_release(struct kapi_response *r)
{
        json_decref(r->body);
        r->body = NULL;
        r->status = 0;
        r->retry_after_ms = 0;
}

/* Waits for the call's turn under the client's rate and pause.  Returns 0,
 * -ECANCELED when *stop became true, or -ETIMEDOUT when the turn comes
 * after the call's deadline (*timeout_ms, which loses the time waited). */
static int rate_wait(struct kapi_client *c, long *timeout_ms, const atomic_bool *stop)
{
        pthread_mutex_lock(&c->mu);
        long wait = kapi_rate_take(&c->rate, now_ms());
        pthread_mutex_unlock(&c->mu);
        if (wait <= 0)
                return 0;
        bool late = *timeout_ms > 0 && wait >= *timeout_ms;
        long left = late ? *timeout_ms : wait;
        while (left > 0) {
                if (stop && atomic_load(stop))
                        return -ECANCELED;
                long step = left < KAPI_HTTP_STOP_POLL_MS ? left : KAPI_HTTP_STOP_POLL_MS;
                struct timespec ts = { .tv_sec = step / 1000, .tv_nsec = step % 1000 * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
                left -= step;
        }
        if (late)
                return -ETIMEDOUT;
        if (*timeout_ms > 0)
                *timeout_ms -= wait;
        return 0;
}

/* A 429, or a 503 that says when to come back: no call of this client
 * starts before then (at most RETRY_AFTER_MAX_S).  Returns the pause in
 * ms (0: none). */
static long obey_retry_after(struct kapi_client *c, long status, unsigned retry_after_s)
{
        if ((status != 429 && status != 503) || retry_after_s == 0)
                return 0;
        long ms = (retry_after_s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : (long)retry_after_s) *
                  1000L;
        pthread_mutex_lock(&c->mu);
        kapi_rate_pause(&c->rate, now_ms(), ms);
        pthread_mutex_unlock(&c->mu);
        log_debug("kapi", "server asks to wait status=%ld retry_after_ms=%ld", status, ms);
        return ms;
}

/* The bearer token for one call (a copy; NULL: none).  A token file wins
 * over a token (client-go's rule) and is re-read at most once a minute;
 * when a re-read fails the last good token goes on being used. */
static int call_token(struct kapi_client *c, char **out, struct diag *diag)
{
        *out = NULL;
        if (!c->cfg->token_file) {
                if (c->cfg->token)
                        *out = xstrdup(c->cfg->token);
                return 0;
        }
        int r = 0;
        pthread_mutex_lock(&c->mu);
        uint64_t now = now_ms();
        if (!c->file_token_at || now - c->file_token_at >= TOKEN_REREAD_MS) {
                char *tok;
                r = kapi_token_read(c->cfg->token_file, &tok);
                if (r == 0) {
                        free_secret(c->file_token);
                        c->file_token = tok;
                        c->file_token_at = now;
                } else {
                        log_debug("kapi", "token file unread path=%s error=%d",
                                  c->cfg->token_file, r);
                }
        }
        if (c->file_token) {
                *out = xstrdup(c->file_token);
                r = 0;
        } else if (c->cfg->token) {
                *out = xstrdup(c->cfg->token);
                r = 0;
        }
        pthread_mutex_unlock(&c->mu);
        if (r < 0)
                return diag_set(diag, r, "token file %s: %s", c->cfg->token_file,
                                r == -EFBIG ? "larger than 64 KiB" : strerror(-r));
        return 0;
}

/* ---- one transfer ---- */

struct xfer {
        int err;       /* why the sink ended the transfer (-errno, or fn's value) */
        char msg[256]; /* and what to say */
        /* what is kept of the JSON: a request's body, or each watch event */
        const struct kapi_json_spec *spec; /* NULL: all */
        struct kapi_json_budget budget;
        struct kapi_json_filter *filter;   /* a request's body, once its head came */
        size_t body_len, max;              /* of a request's body */
        /* a refusal's body: its first REFUSAL_BODY_MAX bytes */
        char *buf;
        size_t len, cap;
        long status;
        unsigned retry_after_s;
        /* a watch */
        kapi_event_fn fn;
        void *ud;
        bool refused;  /* its status is not 2xx-3xx: the body is a Status */
        long low_speed_ms; /* a watch's own silence limit (0: the client's) */
        struct kapi_lines lines;
};

static void xfer_release(struct xfer *x)
{
        free(x->buf);
        kapi_json_filter_free(x->filter);
        kapi_lines_release(&x->lines);
}

static int xfer_fail(struct xfer *x, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int xfer_fail(struct xfer *x, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
        va_end(ap);
        x->err = err;
        return err;
}

/* Appends data to x->buf, keeping its first REFUSAL_BODY_MAX bytes. */
static void buf_append(struct xfer *x, const char *data, size_t len)
{
        if (len > REFUSAL_BODY_MAX - x->len)
                len = REFUSAL_BODY_MAX - x->len;
        if (x->len + len + 1 > x->cap) {
                size_t cap = x->cap ? x->cap : 16384;
                while (cap < x->len + len + 1)
                        cap *= 2;
                if (cap > REFUSAL_BODY_MAX + 1)
                        cap = REFUSAL_BODY_MAX + 1;
                x->buf = xrealloc(x->buf, cap);
                x->cap = cap;
        }
        memcpy(x->buf + x->len, data, len);
        x->len += len;
        x->buf[x->len] = '\0';
}

static int on_head(void *ud, const struct kapi_http_parser *p)
{
        struct xfer *x = ud;
        x->status = p->status;
        x->retry_after_s = p->retry_after_s;
        /* a refusal: keep the start of its Status */
        x->refused = p->status >= 400 || p->status < 200;
        if (x->fn || x->refused)
                return 0;
        if (p->has_length && p->length > x->max)
                return xfer_fail(x, -EMSGSIZE, "a body of %llu bytes is over the limit (%zu)",
                                 (unsigned long long)p->length, x->max);
        x->filter = kapi_json_filter_new(x->spec, &x->budget);
        return 0;
}

static int watch_line(void *ud, const char *line, size_t len)
{
        struct xfer *x = ud;
        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
                len--;
        if (len == 0)
                return 0;
        struct diag why = { 0 };
        _cleanup_(json_decrefp) json_t *ev = NULL;
        int r = kapi_json_load(line, len, x->spec, &x->budget, 0, &ev, &why);
        if (r == -EMSGSIZE)
                return xfer_fail(x, r, "line %u: %s", x->lines.count, why.message);
        if (r < 0)
                return xfer_fail(x, r, "line %u is not JSON: %s", x->lines.count, why.message);
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *object = json_object_get(ev, "object");
        if (!json_is_object(ev) || !type || !json_is_object(object))
                return xfer_fail(x, -EBADMSG,
                                 "line %u is not an event ({\"type\": string, \"object\": object})",
                                 x->lines.count);
        r = x->fn(type, object, x->ud);
        if (r != 0)
                xfer_fail(x, r, "stopped by the event handler (%d)", r);
        return r;
}

static int on_body(void *ud, const char *data, size_t len)
{
        struct xfer *x = ud;
        if (x->fn && !x->refused) {
                int r = kapi_lines_feed(&x->lines, data, len, watch_line, x);
                if (r != 0 && !x->err)
                        xfer_fail(x, -EMSGSIZE, "line %u is over the limit (%zu bytes)",
                                  x->lines.count + 1, x->lines.max);
                return r;
        }
        if (x->refused) {
                buf_append(x, data, len);
                return 0;
        }
        if (len > x->max - x->body_len)
                return xfer_fail(x, -EMSGSIZE, "the body is over the limit (%zu bytes)", x->max);
        x->body_len += len;
        /* over the budget: at once, like a body over max_body.  Not JSON:
         * the filter keeps its error and the body is read (not parsed) to
         * its end, so a transport error or the call's bound still comes
         * first, as when the whole body was parsed at its end */
        int r = kapi_json_filter_feed(x->filter, data, len);
        if (r == -EMSGSIZE)
                return xfer_fail(x, r, "%s", kapi_json_filter_why(x->filter));
        return 0;
}

/* "404 Not Found" for the statuses the API server sends. */
static const char *reason(long status)
{
        static const struct {
                long status;
                const char *text;
        } reasons[] = {
                { 400, "Bad Request" },        { 401, "Unauthorized" },
                { 403, "Forbidden" },          { 404, "Not Found" },
                { 405, "Method Not Allowed" }, { 406, "Not Acceptable" },
                { 409, "Conflict" },           { 410, "Gone" },
                { 413, "Payload Too Large" },  { 415, "Unsupported Media Type" },
                { 422, "Unprocessable Entity" }, { 429, "Too Many Requests" },
                { 500, "Internal Server Error" }, { 501, "Not Implemented" },
                { 502, "Bad Gateway" },        { 503, "Service Unavailable" },
                { 504, "Gateway Timeout" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(reasons); i++)
                if (reasons[i].status == status)
                        return reasons[i].text;
        return "";
}

/* "GET /path: 404 Not Found: <the Status's message>" into diag. */
static void status_diag(struct diag *diag, const char *method, const char *path, long status,
                        const json_t *body)
{
        const char *msg = json_string_value(json_object_get(body, "message"));
        const char *r = reason(status);
        diag_set(diag, 0, "%s %.300s: %ld%s%s%s%.600s", method, path, status, r[0] ? " " : "", r,
                 msg ? ": " : "", msg ? msg : "");
}

static bool path_ok(const char *path)
{
        if (path[0] != '/')
                return false;
        for (const char *s = path; *s; s++)
                if ((unsigned char)*s <= ' ' || *s == 0x7f || *s == '#')
                        return false;
        return true;
}

/* A call's request, checked and filled in (what it owns: its copies of
 * the User-Agent and the token). */
struct prepared {
        struct kapi_http_request rq;
        char *user_agent;
        char *token;
};

static void prepared_release(struct prepared *p)
{
        free(p->user_agent);
        free_secret(p->token);
        p->user_agent = p->token = NULL;
}

/* Checks the call and fills in p (limits, User-Agent, token) for c's
 * transport.  Returns 0, or -errno with diag. */
static int prepare(struct kapi_client *c, struct xfer *x, const char *method, const char *path,
                   const char *body, long timeout_ms, struct prepared *p, struct diag *diag)
{
        if (!path_ok(path))
                return diag_set(diag, -EINVAL,
                                "%s %.300s: the path must start with / and be escaped", method,
                                path);
        bool is_get = strcmp(method, "GET") == 0, is_post = strcmp(method, "POST") == 0;
        bool is_patch = strcmp(method, "PATCH") == 0;
        if (!is_get && !is_post && !is_patch && strcmp(method, "PUT") != 0 &&
            strcmp(method, "DELETE") != 0)
                return diag_set(diag, -EINVAL, "%.20s: not a method kapi sends", method);

        pthread_mutex_lock(&c->mu);
        struct kapi_limits lim = c->limits;
        p->user_agent = xstrdup(c->user_agent);
        pthread_mutex_unlock(&c->mu);
        if (x->fn) {
                x->lines.max = lim.max_watch_line;
                if (x->low_speed_ms > 0)
                        lim.low_speed_ms = x->low_speed_ms;
        } else {
                x->max = lim.max_body;
        }

        int r = call_token(c, &p->token, diag);
        if (r < 0) {
                prepared_release(p);
                return diag_prefix(diag, r, "%s %.300s", method, path);
        }

        /* a POST always says its length, even of nothing */
        if (!body && is_post)
                body = "";
        p->rq = (struct kapi_http_request){
                .method = method,
                .path = path,
                .user_agent = p->user_agent,
                .accept = "application/json",
                .content_type = !body || !body[0] ? NULL
                                : is_patch        ? "application/merge-patch+json"
                                                  : "application/json",
                .body = body,
                .body_len = body ? strlen(body) : 0,
                .token = p->token,
                .timeout_ms = timeout_ms,
                .connect_timeout_ms = lim.connect_timeout_ms,
                .low_speed_ms = lim.low_speed_ms,
        };
        return 0;
}

/* What a transfer's end means for the client (a Retry-After obeyed) and
 * for its diag.  Returns r as the call returns it. */
static int performed(struct kapi_client *c, struct xfer *x, const char *method, const char *path,
                     int r, long status, long *retry_after_ms, struct diag *diag)
{
        if (status)
                *retry_after_ms = obey_retry_after(c, status, x->retry_after_s);
        if (r == 0)
                return 0;
        if (r == 1)
                return diag_set(diag, x->err, "%s %.300s: %s", method, path, x->msg);
        log_debug("kapi", "transfer failed method=%s path=%.300s error=%d", method, path, r);
        return diag_prefix(diag, r, "%s %s%.300s", method, c->cfg->server, path);
}

/* One transfer: checks the call, waits for its turn (the client's rate),
 * then runs it on c's transport.  Returns 0 when an HTTP answer came
 * (*status, as soon as it came; *retry_after_ms, the pause it asked for),
 * or -errno with diag. */
static int perform(struct kapi_client *c, struct xfer *x, const char *method, const char *path,
                   const char *body, long timeout_ms, const atomic_bool *stop, long *status,
                   long *retry_after_ms, struct diag *diag)
{
        *status = 0;
        *retry_after_ms = 0;
        if (stop && atomic_load(stop))
                return diag_set(diag, -ECANCELED, "%s %.300s: stopped", method, path);
        struct prepared p = { 0 };
        int r = prepare(c, x, method, path, body, timeout_ms, &p, diag);
        if (r < 0)
                return r;
        r = rate_wait(c, &p.rq.timeout_ms, stop);
        if (r == -ECANCELED) {
                prepared_release(&p);
                return diag_set(diag, r, "%s %.300s: stopped", method, path);
        }
        if (r < 0) {
                prepared_release(&p);
                return diag_set(diag, r, "%s %.300s: the client's rate limit or the server's "
                                "Retry-After outlasts the call's deadline", method, path);
        }
        p.rq.stop = stop;
        struct kapi_http_sink sink = { .head = on_head, .body = on_body, .ud = x };
        r = kapi_http_call(c->http, &p.rq, &sink, status, diag);
        prepared_release(&p);
        return performed(c, x, method, path, r, *status, retry_after_ms, diag);
}

/* A request's answer from what its transfer kept: the body parsed (a
 * refusal's Status whole), the diag of a status >= 400. */
static int request_result(struct xfer *x, const char *method, const char *path, long status,
                          struct kapi_response *resp, struct diag *diag)
{
        json_t *json = NULL;
        if (x->refused) {
                if (x->len) /* a Status, or nothing worth reading */
                        (void)kapi_json_load(x->buf, x->len, NULL, NULL, 0, &json, NULL);
        } else if (x->filter) {
                const char *kept = NULL;
                size_t kept_len = 0;
                json_error_t je;
                int r = kapi_json_filter_finish(x->filter, &kept, &kept_len);
                if (r == 0 && kept) {
                        json = json_loadb(kept, kept_len, 0, &je);
                        if (!json)
                                return diag_set(diag, -EBADMSG,
                                                "%s %.300s: %ld: the body is not JSON: %s",
                                                method, path, status, je.text);
                }
                if (r < 0)
                        return diag_set(diag, r, "%s %.300s: %ld: the body is not JSON: %s",
                                        method, path, status, kapi_json_filter_why(x->filter));
        }
        if (status >= 400)
                status_diag(diag, method, path, status, json);
        resp->body = json;
        return 0;
}

/* A watch's end from what its transfer kept: a refusal as -EPROTO with
 * its Status in diag, a last line without its newline as an event. */
static int watch_result(struct xfer *x, const char *path, long status, struct diag *diag)
{
        if (status >= 400 || status < 200) {
                _cleanup_(json_decrefp) json_t *json = NULL;
                if (x->len)
                        (void)kapi_json_load(x->buf, x->len, NULL, NULL, 0, &json, NULL);
                status_diag(diag, "GET", path, status, json);
                return -EPROTO;
        }
        /* The stream ended inside a line: what came is the last event, or not one. */
        int r = kapi_lines_finish(&x->lines, watch_line, x);
        if (r != 0)
                return diag_set(diag, r, "GET %.300s: %s", path, x->msg);
        return 0;
}

/* Compiles keep's spec for x (*spec owns it) and its budget; a watch's
 * spec wraps the object's. */
static int keep_setup(struct xfer *x, const struct kapi_keep *keep, bool watch,
                      struct kapi_json_spec **spec)
{
        *spec = NULL;
        if (!keep)
                return 0;
        x->budget = (struct kapi_json_budget){ .max_values = keep->max_values,
                                               .max_bytes = keep->max_bytes };
        if (!keep->spec)
                return 0;
        _cleanup_free_ char *text = watch ? xasprintf("{type,object%s}", keep->spec)
                                          : xstrdup(keep->spec);
        int r = kapi_json_spec_new(text, spec);
        x->spec = *spec;
        return r;
}

static void spec_freep(struct kapi_json_spec **s) { kapi_json_spec_free(*s); }

int kapi_request(struct kapi_client *c, const char *method, const char *path, const json_t *body,
                 long timeout_ms, const atomic_bool *stop, struct kapi_response *resp,
                 struct diag *diag)
{
        return kapi_request_keep(c, method, path, body, NULL, timeout_ms, stop, resp, diag);
}

int kapi_request_keep(struct kapi_client *c, const char *method, const char *path,
                      const json_t *body, const struct kapi_keep *keep, long timeout_ms,
                      const atomic_bool *stop, struct kapi_response *resp, struct diag *diag)
{
        *resp = (struct kapi_response){ 0 };
        _cleanup_(xfer_release) struct xfer x = { 0 };
        _cleanup_(spec_freep) struct kapi_json_spec *spec = NULL;
        if (keep_setup(&x, keep, false, &spec) < 0)
                return diag_set(diag, -EINVAL, "%s %.300s: a spec that is not the grammar's: %s",
                                method, path, keep->spec);
        _cleanup_free_ char *text = NULL;
        if (body) {
                text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
                if (!text)
                        return diag_set(diag, -EINVAL, "%s %.300s: the body cannot be encoded",
                                        method, path);
        }
        long status, retry_after_ms;
        int r = perform(c, &x, method, path, text, timeout_ms, stop, &status, &retry_after_ms,
                        diag);
        resp->status = status;
        resp->retry_after_ms = retry_after_ms;
        if (r < 0)
                return r;
        return request_result(&x, method, path, status, resp, diag);
}

int kapi_watch(struct kapi_client *c, const char *path, const atomic_bool *stop, kapi_event_fn fn,
               void *ud, long *status_out, struct diag *diag)
{
        return kapi_watch_keep(c, path, NULL, stop, fn, ud, status_out, diag);
}

int kapi_watch_keep(struct kapi_client *c, const char *path, const struct kapi_keep *keep,
                    const atomic_bool *stop, kapi_event_fn fn, void *ud, long *status_out,
                    struct diag *diag)
{
        if (status_out)
                *status_out = 0;
        const char *q = strchr(path, '?');
        if (!q || (!strstr(q, "?watch=") && !strstr(q, "&watch=")))
                return diag_set(diag, -EINVAL, "GET %.300s: a watch's path carries watch=1", path);
        _cleanup_(xfer_release) struct xfer x = { .fn = fn, .ud = ud };
        _cleanup_(spec_freep) struct kapi_json_spec *spec = NULL;
        if (keep_setup(&x, keep, true, &spec) < 0)
                return diag_set(diag, -EINVAL, "GET %.300s: a spec that is not the grammar's: %s",
                                path, keep->spec);
        long status, retry_after_ms;
        int r = perform(c, &x, "GET", path, NULL, 0, stop, &status, &retry_after_ms, diag);
        if (status_out)
                *status_out = status;
        if (r != 0)
                return r;
        return watch_result(&x, path, status, diag);
}

/* ---- calls on a loop ---- */

struct kapi_call {
        struct kapi_client *c;
        uv_loop_t *loop;
        struct xfer x;
        struct kapi_json_spec *spec;
        char *method, *path, *body;
        long timeout_ms;
        kapi_done_fn done;
        void *ud;
        uv_timer_t timer; /* the turn under the client's rate; an early end */
        int early;        /* an error the first turn ends with */
        struct kapi_http_loop_call *http;
        bool ended;
};

static void call_closed(uv_handle_t *h)
{
        struct kapi_call *k = h->data;
        xfer_release(&k->x);
        kapi_json_spec_free(k->spec);
        free(k->method);
        free(k->path);
        free(k->body);
        free(k);
}

/* Calls done once (never after a cancel) and lets the call go. */
static void call_end(struct kapi_call *k, int r, struct kapi_response *resp, struct diag *diag)
{
        if (k->ended)
                return;
        k->ended = true;
        uv_timer_stop(&k->timer);
        if (k->done)
                k->done(k->ud, r, resp, diag);
        uv_close((uv_handle_t *)&k->timer, call_closed);
}

static void on_http_done(void *ud, int r, long status, struct diag *hdiag)
{
        struct kapi_call *k = ud;
        k->http = NULL;
        struct diag diag = *hdiag;
        struct kapi_response resp = { .status = status };
        r = performed(k->c, &k->x, k->method, k->path, r, status, &resp.retry_after_ms, &diag);
        if (r == 0)
                r = k->x.fn ? watch_result(&k->x, k->path, status, &diag)
                            : request_result(&k->x, k->method, k->path, status, &resp, &diag);
        call_end(k, r, &resp, &diag);
        kapi_response_release(&resp);
}

static void on_turn(uv_timer_t *t)
{
        struct kapi_call *k = t->data;
        struct diag diag = { 0 };
        struct kapi_response resp = { 0 };
        int r = k->early;
        struct prepared p = { 0 };
        if (r == 0)
                r = prepare(k->c, &k->x, k->method, k->path, k->body, k->timeout_ms, &p, &diag);
        else
                diag_set(&diag, r, "%s %.300s: the client's rate limit or the server's "
                         "Retry-After outlasts the call's deadline", k->method, k->path);
        if (r == 0) {
                struct kapi_http_sink sink = { .head = on_head, .body = on_body, .ud = &k->x };
                r = kapi_http_loop_start(k->c->http, k->loop, &p.rq, &sink, on_http_done, k,
                                         &k->http, &diag);
                if (r < 0)
                        diag_prefix(&diag, r, "%s %.300s", k->method, k->path);
        }
        prepared_release(&p);
        if (r < 0)
                call_end(k, r, &resp, &diag);
}

static int call_start(struct kapi_client *c, uv_loop_t *loop, const char *method,
                      const char *path, const json_t *body, const struct kapi_keep *keep,
                      long timeout_ms, bool watch, long low_speed_ms, kapi_event_fn fn,
                      kapi_done_fn done, void *ud, struct kapi_call **out, struct diag *diag)
{
        struct kapi_call *k = xcalloc(1, sizeof(*k));
        k->x.fn = fn;
        k->x.ud = ud;
        k->x.low_speed_ms = low_speed_ms;
        if (keep_setup(&k->x, keep, watch, &k->spec) < 0) {
                kapi_json_spec_free(k->spec);
                free(k);
                return diag_set(diag, -EINVAL, "%s %.300s: a spec that is not the grammar's: %s",
                                method, path, keep->spec);
        }
        if (body) {
                k->body = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
                if (!k->body) {
                        kapi_json_spec_free(k->spec);
                        free(k);
                        return diag_set(diag, -EINVAL, "%s %.300s: the body cannot be encoded",
                                        method, path);
                }
        }
        k->c = c;
        k->loop = loop;
        k->method = xstrdup(method);
        k->path = xstrdup(path);
        k->done = done;
        k->ud = ud;
        uv_timer_init(loop, &k->timer);
        k->timer.data = k;

        /* the turn under the client's rate; the call starts on the loop's
         * next turn at the soonest, so done never runs inside start */
        pthread_mutex_lock(&c->mu);
        long wait = kapi_rate_take(&c->rate, now_ms());
        pthread_mutex_unlock(&c->mu);
        if (wait < 0)
                wait = 0;
        if (timeout_ms > 0 && wait >= timeout_ms) {
                k->early = -ETIMEDOUT;
                wait = timeout_ms;
        } else if (timeout_ms > 0) {
                timeout_ms -= wait;
        }
        k->timeout_ms = timeout_ms;
        uv_timer_start(&k->timer, on_turn, (uint64_t)wait, 0);
        *out = k;
        return 0;
}

int kapi_request_start(struct kapi_client *c, uv_loop_t *loop, const char *method,
                       const char *path, const json_t *body, const struct kapi_keep *keep,
                       long timeout_ms, kapi_done_fn done, void *ud, struct kapi_call **out,
                       struct diag *diag)
{
        return call_start(c, loop, method, path, body, keep, timeout_ms, false, 0, NULL, done, ud,
                          out, diag);
}

int kapi_watch_start(struct kapi_client *c, uv_loop_t *loop, const char *path,
                     const struct kapi_keep *keep, long low_speed_ms, kapi_event_fn fn,
                     kapi_done_fn done, void *ud, struct kapi_call **out, struct diag *diag)
{
        const char *q = strchr(path, '?');
        if (!q || (!strstr(q, "?watch=") && !strstr(q, "&watch=")))
                return diag_set(diag, -EINVAL, "GET %.300s: a watch's path carries watch=1", path);
        return call_start(c, loop, "GET", path, NULL, keep, 0, true, low_speed_ms, fn, done, ud,
                          out, diag);
}

void kapi_call_cancel(struct kapi_call *k)
{
        if (!k || k->ended)
                return;
        k->done = NULL;
        if (k->http)
                kapi_http_loop_cancel(k->http);
        k->http = NULL;
        call_end(k, -ECANCELED, NULL, NULL);
}
