/* The API client: one libcurl easy handle per call, all of a client's
 * handles sharing one connection cache, TLS session cache and DNS cache
 * (a CURLSH, one mutex per kind of data), so that several threads may call
 * at once and still reuse connections.
 *
 * Every answer is bounded where it arrives, in the write callback: a body
 * is kept up to max_body (a Content-Length above it fails the call before
 * a byte is kept), a watch keeps one line at a time up to max_watch_line.
 * The progress callback, which libcurl calls at least once a second even
 * while nothing moves, checks the stop flag and cuts a transfer that moved
 * no byte for low_speed_ms (libcurl's own low-speed limit counts whole
 * seconds and cannot tell us apart from a timeout).  Redirects are not
 * followed and only http and https are spoken, so a server cannot send us
 * elsewhere.  HTTP/1.1 only: each call runs its own transfer loop in its
 * own thread, so HTTP/2 multiplexing would buy nothing, and a watch holds
 * its connection anyway.
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

#include <curl/curl.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/internal.h"
#include "kapi/kapi.h"

#define MAX_BODY_DEFAULT (16u << 20)
#define MAX_WATCH_LINE_DEFAULT (4u << 20)
#define CONNECT_TIMEOUT_DEFAULT 5000L
#define LOW_SPEED_DEFAULT 30000L
#define TOKEN_REREAD_MS 60000u
/* What a refused watch keeps of its answer: enough for a Status. */
#define REFUSAL_BODY_MAX (64u << 10)

struct kapi_client {
        struct kapi_config *cfg;
        CURLSH *share;
        pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
        pthread_mutex_t mu; /* limits and the token read from token_file */
        struct kapi_limits limits;
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

static void free_secretp(char **s) { free_secret(*s); }

DEFINE_CLEANUP_FUNC(CURL, curl_easy_cleanup)
DEFINE_CLEANUP_FUNC(struct curl_slist, curl_slist_free_all)

/* ---- the client ---- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
        struct kapi_client *c = ud;
        pthread_mutex_lock(&c->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
        struct kapi_client *c = ud;
        pthread_mutex_unlock(&c->share_locks[data]);
}

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
        pthread_once(&global_once, global_init);
        if (global_rc != CURLE_OK) {
                kapi_config_free(cfg);
                return diag_set(diag, -EIO, "libcurl: %s", curl_easy_strerror(global_rc));
        }
        CURLSH *share = curl_share_init();
        if (!share)
                abort(); /* only for lack of memory, as xmalloc would */
        struct kapi_client *c = xcalloc(1, sizeof(*c));
        c->cfg = cfg;
        c->share = share;
        for (size_t i = 0; i < ARRAY_SIZE(c->share_locks); i++)
                pthread_mutex_init(&c->share_locks[i], NULL);
        pthread_mutex_init(&c->mu, NULL);
        curl_share_setopt(share, CURLSHOPT_LOCKFUNC, share_lock);
        curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, share_unlock);
        curl_share_setopt(share, CURLSHOPT_USERDATA, c);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        kapi_client_set_limits(c, &(struct kapi_limits){ 0 });
        *out = c;
        return 0;
}

void kapi_client_free(struct kapi_client *c)
{
        if (!c)
                return;
        curl_share_cleanup(c->share);
        for (size_t i = 0; i < ARRAY_SIZE(c->share_locks); i++)
                pthread_mutex_destroy(&c->share_locks[i]);
        pthread_mutex_destroy(&c->mu);
        free_secret(c->file_token);
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

void kapi_response_release(struct kapi_response *r)
{
        json_decref(r->body);
        r->body = NULL;
        r->status = 0;
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
        CURL *h;
        const atomic_bool *stop;
        long low_speed_ms;
        uint64_t last_move;
        curl_off_t last_dl, last_ul;
        int err;       /* why a callback ended the transfer (-errno, or fn's value) */
        char msg[256]; /* and what to say */
        /* the body (a request's, or a refused watch's) or the watch's line */
        char *buf;
        size_t len, cap, max;
        bool truncate; /* keep the first max bytes and drop the rest */
        bool started;
        /* a watch */
        kapi_event_fn fn;
        void *ud;
        unsigned lines;
};

static void xfer_release(struct xfer *x) { free(x->buf); }

static void xfer_fail(struct xfer *x, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void xfer_fail(struct xfer *x, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
        va_end(ap);
        x->err = err;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
        struct xfer *x = ud;
        if (x->stop && atomic_load(x->stop)) {
                xfer_fail(x, -ECANCELED, "stopped");
                return 1;
        }
        uint64_t now = now_ms();
        if (dlnow != x->last_dl || ulnow != x->last_ul) {
                x->last_dl = dlnow;
                x->last_ul = ulnow;
                x->last_move = now;
        } else if (now - x->last_move >= (uint64_t)x->low_speed_ms) {
                xfer_fail(x, -ETIMEDOUT, "no byte moved for %ld ms", x->low_speed_ms);
                return 1;
        }
        return 0;
}

/* Appends data to x->buf within x->max; false when it does not fit. */
static bool buf_append(struct xfer *x, const char *data, size_t len)
{
        if (len > x->max - x->len) {
                if (!x->truncate)
                        return false;
                len = x->max - x->len;
        }
        if (x->len + len + 1 > x->cap) {
                size_t cap = x->cap ? x->cap : 16384;
                while (cap < x->len + len + 1)
                        cap *= 2;
                if (cap > x->max + 1)
                        cap = x->max + 1;
                x->buf = xrealloc(x->buf, cap);
                x->cap = cap;
        }
        memcpy(x->buf + x->len, data, len);
        x->len += len;
        x->buf[x->len] = '\0';
        return true;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
        struct xfer *x = ud;
        size_t len = size * n;
        if (!x->started) {
                x->started = true;
                curl_off_t cl = -1;
                curl_easy_getinfo(x->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
                if (cl > 0 && (uint64_t)cl > x->max && !x->truncate) {
                        xfer_fail(x, -EMSGSIZE, "a body of %lld bytes is over the limit (%zu)",
                                  (long long)cl, x->max);
                        return CURL_WRITEFUNC_ERROR;
                }
        }
        if (!buf_append(x, data, len)) {
                xfer_fail(x, -EMSGSIZE, "the body is over the limit (%zu bytes)", x->max);
                return CURL_WRITEFUNC_ERROR;
        }
        return len;
}

static int watch_line(struct xfer *x)
{
        x->lines++;
        size_t len = x->len;
        while (len > 0 && (x->buf[len - 1] == '\r' || x->buf[len - 1] == ' '))
                len--;
        x->len = 0;
        if (len == 0)
                return 0;
        json_error_t je;
        _cleanup_(json_decrefp) json_t *ev = json_loadb(x->buf, len, 0, &je);
        if (!ev) {
                xfer_fail(x, -EBADMSG, "line %u is not JSON: %s (column %d)", x->lines, je.text,
                          je.column);
                return x->err;
        }
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *object = json_object_get(ev, "object");
        if (!json_is_object(ev) || !type || !json_is_object(object)) {
                xfer_fail(x, -EBADMSG,
                          "line %u is not an event ({\"type\": string, \"object\": object})",
                          x->lines);
                return x->err;
        }
        int r = x->fn(type, object, x->ud);
        if (r != 0)
                xfer_fail(x, r, "stopped by the event handler (%d)", r);
        return r;
}

static size_t on_watch(char *data, size_t size, size_t n, void *ud)
{
        struct xfer *x = ud;
        size_t len = size * n;
        long status = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 400 || status < 200) {
                /* a refusal: keep the start of its Status */
                x->truncate = true;
                x->max = REFUSAL_BODY_MAX;
                buf_append(x, data, len);
                return len;
        }
        const char *p = data, *end = data + len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t chunk = (size_t)((nl ? nl : end) - p);
                if (!buf_append(x, p, chunk)) {
                        xfer_fail(x, -EMSGSIZE, "line %u is over the limit (%zu bytes)",
                                  x->lines + 1, x->max);
                        return CURL_WRITEFUNC_ERROR;
                }
                if (!nl)
                        break;
                p = nl + 1;
                if (watch_line(x) != 0)
                        return CURL_WRITEFUNC_ERROR;
        }
        return len;
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

static int curl_errno(CURLcode rc, CURL *h)
{
        long os_errno = 0;
        switch (rc) {
        case CURLE_COULDNT_CONNECT:
                curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
                return os_errno > 0 ? -(int)os_errno : -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
                return -ECONNABORTED;
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_BAD_FUNCTION_ARGUMENT:
                return -EINVAL;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                return -ECONNRESET;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        default:
                return -EIO;
        }
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

/* One transfer on a new handle sharing c's caches: sets it up, runs it,
 * and says why it failed.  Returns 0 when an HTTP answer came (*status),
 * or -errno with diag. */
static int perform(struct kapi_client *c, struct xfer *x, const char *method, const char *path,
                   const char *body, long timeout_ms, long *status, struct diag *diag)
{
        *status = 0;
        if (!path_ok(path))
                return diag_set(diag, -EINVAL,
                                "%s %.300s: the path must start with / and be escaped", method,
                                path);
        bool is_get = strcmp(method, "GET") == 0, is_post = strcmp(method, "POST") == 0;
        if (!is_get && !is_post && strcmp(method, "PUT") != 0 && strcmp(method, "PATCH") != 0 &&
            strcmp(method, "DELETE") != 0)
                return diag_set(diag, -EINVAL, "%.20s: not a method kapi sends", method);
        if (x->stop && atomic_load(x->stop))
                return diag_set(diag, -ECANCELED, "%s %.300s: stopped", method, path);

        pthread_mutex_lock(&c->mu);
        struct kapi_limits lim = c->limits;
        pthread_mutex_unlock(&c->mu);
        x->low_speed_ms = lim.low_speed_ms;
        if (!x->max)
                x->max = x->fn ? lim.max_watch_line : lim.max_body;

        _cleanup_(free_secretp) char *token = NULL;
        int r = call_token(c, &token, diag);
        if (r < 0)
                return diag_prefix(diag, r, "%s %.300s", method, path);

        _cleanup_(curl_easy_cleanupp) CURL *h = curl_easy_init();
        if (!h)
                abort(); /* only for lack of memory, as xmalloc would */
        x->h = h;
        const struct kapi_config *cfg = c->cfg;
        _cleanup_free_ char *url = xasprintf("%s%s", cfg->server, path);
        char errbuf[CURL_ERROR_SIZE] = "";

        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        headers = curl_slist_append(headers, "Accept: application/json");
        if (body)
                headers = curl_slist_append(headers,
                                            strcmp(method, "PATCH") == 0
                                                    ? "Content-Type: application/merge-patch+json"
                                                    : "Content-Type: application/json");
        headers = curl_slist_append(headers, "Expect:");
        _cleanup_(free_secretp) char *auth = NULL;
        if (token) {
                auth = xasprintf("Authorization: Bearer %s", token);
                headers = curl_slist_append(headers, auth);
        }
        if (!headers)
                abort();

        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_SHARE, c->share);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "devlet/" DEVLET_VERSION);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, lim.connect_timeout_ms);
        if (timeout_ms > 0)
                curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, x->fn ? on_watch : on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, x);

        if (is_post)
                curl_easy_setopt(h, CURLOPT_POST, 1L);
        else if (!is_get)
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (body || is_post) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                                 (curl_off_t)(body ? strlen(body) : 0));
        }

        /* TLS: the kubeconfig's CA alone is trusted when it names one. */
        if (cfg->ca_data) {
                struct curl_blob blob = { cfg->ca_data, strlen(cfg->ca_data), CURL_BLOB_COPY };
                curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
                curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
        } else if (cfg->ca_file) {
                curl_easy_setopt(h, CURLOPT_CAINFO, cfg->ca_file);
                curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
        }
        if (cfg->insecure) {
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (cfg->cert_data) {
                struct curl_blob blob = { cfg->cert_data, strlen(cfg->cert_data), CURL_BLOB_COPY };
                curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &blob);
        } else if (cfg->cert_file) {
                curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->cert_file);
        }
        if (cfg->cert_data || cfg->cert_file)
                curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        if (cfg->key_data) {
                struct curl_blob blob = { cfg->key_data, strlen(cfg->key_data), CURL_BLOB_COPY };
                curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &blob);
        } else if (cfg->key_file) {
                curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->key_file);
        }
        if (cfg->key_data || cfg->key_file)
                curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");

        x->last_move = now_ms();
        CURLcode rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        x->h = NULL;
        if (rc == CURLE_OK)
                return 0;
        if (x->err && (rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK))
                return diag_set(diag, x->err, "%s %.300s: %s", method, path, x->msg);
        r = curl_errno(rc, h);
        log_debug("kapi", "transfer failed method=%s path=%.300s curl=%d", method, path, (int)rc);
        return diag_set(diag, r, "%s %s%.300s: %s", method, cfg->server, path,
                        errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

int kapi_request(struct kapi_client *c, const char *method, const char *path, const json_t *body,
                 long timeout_ms, const atomic_bool *stop, struct kapi_response *resp,
                 struct diag *diag)
{
        *resp = (struct kapi_response){ 0 };
        _cleanup_free_ char *text = NULL;
        if (body) {
                text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
                if (!text)
                        return diag_set(diag, -EINVAL, "%s %.300s: the body cannot be encoded",
                                        method, path);
        }
        _cleanup_(xfer_release) struct xfer x = { .stop = stop };
        long status;
        int r = perform(c, &x, method, path, text, timeout_ms, &status, diag);
        resp->status = status;
        if (r < 0)
                return r;

        json_t *json = NULL;
        if (x.len > 0) {
                json_error_t je;
                json = json_loadb(x.buf, x.len, 0, &je);
                if (!json && status < 400)
                        return diag_set(diag, -EBADMSG,
                                        "%s %.300s: %ld: the body is not JSON: %s (line %d column %d)",
                                        method, path, status, je.text, je.line, je.column);
        }
        if (status >= 400)
                status_diag(diag, method, path, status, json);
        resp->body = json;
        return 0;
}

int kapi_watch(struct kapi_client *c, const char *path, const atomic_bool *stop, kapi_event_fn fn,
               void *ud, long *status_out, struct diag *diag)
{
        const char *q = strchr(path, '?');
        if (!q || (!strstr(q, "?watch=") && !strstr(q, "&watch=")))
                return diag_set(diag, -EINVAL, "GET %.300s: a watch's path carries watch=1", path);
        _cleanup_(xfer_release) struct xfer x = { .stop = stop, .fn = fn, .ud = ud };
        long status;
        int r = perform(c, &x, "GET", path, NULL, 0, &status, diag);
        if (status_out)
                *status_out = status;
        if (r != 0)
                return r;
        if (status >= 400 || status < 200) {
                _cleanup_(json_decrefp) json_t *json =
                        x.len ? json_loadb(x.buf, x.len, 0, NULL) : NULL;
                status_diag(diag, "GET", path, status, json);
                return -EPROTO;
        }
        /* The stream ended inside a line: what came is the last event, or not one. */
        if (x.len > 0) {
                r = watch_line(&x);
                if (r != 0)
                        return diag_set(diag, r, "GET %.300s: %s", path, x.msg);
        }
        return 0;
}
