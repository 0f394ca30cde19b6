/* A small Kubernetes API client: its own HTTP/1.1 (http.c), OpenSSL 3
 * loaded on first use for HTTPS (tls.c; the one TLS library of the whole
 * daemon), jansson for JSON.
 *
 * Calls block: they are made from worker threads (dra/, labels/publish.c),
 * never from the loop.  A client is safe to use from several threads at once
 * (each call has a connection of its own; up to 4 idle ones are kept alive for
 * the next calls, under a lock).
 * Every answer is bounded: a body over its limit, a line of a watch over its
 * limit, JSON over its budget of values (kapi_keep), or a peer that stops
 * sending for the low-speed time fails the call with a clear diag, and memory
 * never grows with what the server sends.  Polite to a large cluster's API
 * server: a User-Agent per component, a token bucket per client and the
 * server's Retry-After obeyed (kapi_client_set_rate).  Knows nothing of
 * devices or DRA.  Never logs above debug. */
#ifndef DEVLET_KAPI_KAPI_H
#define DEVLET_KAPI_KAPI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <uv.h>

#include "base/diag.h"

/* Where the API server is and who we are to it.  Where a kubeconfig gives
 * both a file and its data, only the data is kept (kubectl's "will
 * override"). */
struct kapi_config {
        char *server;       /* "https://10.0.0.1:6443" */
        char *ca_file;      /* PEM file, or NULL */
        char *ca_data;      /* PEM text (kubeconfig's certificate-authority-data, decoded) */
        char *cert_file, *cert_data; /* client certificate (PEM) */
        char *key_file, *key_data;   /* its key (PEM) */
        char *token;        /* bearer token, or NULL */
        char *token_file;   /* re-read at most once a minute (bound tokens rotate); wins
                             * over token, as in client-go; at most 64 KiB */
        bool insecure;      /* insecure-skip-tls-verify */
};

/* Reads a kubeconfig file (its current context; relative paths are taken
 * from the file's directory), or with path NULL or "" the in-cluster
 * account: $KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT and sa_dir's
 * token and ca.crt (sa_dir NULL: /var/run/secrets/kubernetes.io/serviceaccount;
 * without a ca.crt the system's roots are trusted, as client-go does).  The
 * kubeconfig is at most 1 MiB and a regular file (a symlink is followed, a
 * FIFO or directory refused without blocking); exec, auth-provider and
 * basic-auth users are refused.  A token file is read once here.
 * Returns 0 and *out, or -errno with diag (file:line:column for a broken
 * kubeconfig or a missing context, cluster or user): -ENOENT (no file; not
 * in a cluster), -EFBIG, -EISDIR, -EINVAL. */
int kapi_config_load(const char *path, const char *sa_dir, struct kapi_config **out,
                     struct diag *diag);
void kapi_config_free(struct kapi_config *c);

struct kapi_client;

/* Takes cfg (frees it on failure too).  An https server loads OpenSSL
 * (once per process; an http one never does).  -EINVAL: a server that is
 * not http(s)://host[:port][/prefix] (host a name, an IPv4 address or an
 * [IPv6] address; no user, query or fragment), a token with control
 * characters, a certificate without its key or a key without its
 * certificate.  -ELIBACC: libssl.so.3 cannot be loaded ("TLS: cannot load
 * libssl.so.3: ...").  kapi_client_free: no call may be running. */
int kapi_client_new(struct kapi_config *cfg, struct kapi_client **out, struct diag *diag);
void kapi_client_free(struct kapi_client *c);
/* The server URL, for logs. */
const char *kapi_client_server(const struct kapi_client *c);

/* Limits (0 keeps the default).  Safe to set while calls run: each call
 * reads them once as it starts. */
struct kapi_limits {
        size_t max_body;        /* default 16 MiB */
        size_t max_watch_line;  /* default 4 MiB */
        long connect_timeout_ms; /* TCP connect and TLS handshake; default 5 s */
        long low_speed_ms;      /* a transfer that moves no byte for this long once
                                 * connected fails (-ETIMEDOUT); default 30 s.  A
                                 * watch too: the server sends nothing
                                 * between events, so a watcher puts
                                 * timeoutSeconds below this in its path (the
                                 * server then ends a quiet stream cleanly) */
};
void kapi_client_set_limits(struct kapi_client *c, const struct kapi_limits *l);

/* Who the client is to the API server, in its User-Agent: "devlet/<version>
 * (linux/<arch>) <component>" (component: "dra", "labels", ...; NULL or ""
 * leaves it out; at most 64 bytes of it), so audit logs and API Priority and
 * Fairness tell devlet's parts apart.  Safe while calls run. */
void kapi_client_set_user_agent(struct kapi_client *c, const char *component);

/* Every call (a watch once, as it opens) takes a token from the client's
 * bucket, shared by its threads: qps a second, up to burst saved (burst 0
 * reads as KAPI_BURST_DEFAULT; qps 0 as KAPI_QPS_DEFAULT; qps < 0: no limit,
 * as in client-go).  A call with no token waits for one
 * (looking at its stop flag; a turn later than its timeout_ms is
 * -ETIMEDOUT at the deadline) rather than failing.  A 429, or a 503 with
 * Retry-After, pauses the client's calls for its Retry-After seconds (at
 * most 60; an HTTP-date is ignored), so every retry waits at least that
 * long.  A new client: client-go's defaults. */
#define KAPI_QPS_DEFAULT 5.0
#define KAPI_BURST_DEFAULT 10u
void kapi_client_set_rate(struct kapi_client *c, double qps, unsigned burst);

struct kapi_response {
        long status;  /* HTTP status, 0 when no answer came (set on failure too) */
        long retry_after_ms; /* the pause a 429/503 asked for (see above; 0: none) */
        json_t *body; /* the parsed body (NULL: empty or not JSON) */
};
void kapi_response_release(struct kapi_response *r);

/* One request.  method: "GET", "POST", "PUT", "PATCH" (body as a merge
 * patch), "DELETE".  path: "/apis/resource.k8s.io/v1/resourceslices?..."
 * (already escaped).  body may be NULL.  timeout_ms bounds the whole call
 * (<= 0: only the low-speed limit does).  stop may be NULL (else it is
 * looked at at least every 100 ms).  Redirects are not followed (a 3xx is
 * an answer).  *resp is always set: the status that came (0: none), the
 * body only on success.
 * Returns 0 when an HTTP answer came (any status: resp->status says which;
 * for a status >= 400 diag holds "GET /path: 404 Not Found: <the Status's
 * message>"), or -errno with diag when none did (-ETIMEDOUT: the whole
 * call's bound, the connect timeout or the low-speed limit; -ECONNREFUSED
 * or another connect errno; -EHOSTUNREACH: the name does not resolve;
 * -ECONNABORTED: TLS failed, e.g. the server's certificate is not signed by
 * the CA; -ECONNRESET: the connection broke, or closed inside the response;
 * -EMSGSIZE for a body over max_body; -EBADMSG for a body that is not JSON
 * where JSON is due (status < 400), or a response that breaks HTTP/1.1's
 * syntax or framing; -ECANCELED when *stop became true;
 * -EINVAL for a path that does not start with '/' or holds spaces or
 * control characters, an unknown method, unusable local TLS files). */
int kapi_request(struct kapi_client *c, const char *method, const char *path, const json_t *body,
                 long timeout_ms, const atomic_bool *stop, struct kapi_response *resp,
                 struct diag *diag);

/* What a call keeps of an answer's JSON (kapi/json-filter.h): spec, in the
 * filter's grammar (NULL keeps it all), and the budget of what is kept
 * (0: KAPI_JSON_VALUES_DEFAULT values, KAPI_JSON_BYTES_DEFAULT bytes).  The
 * body is filtered as it arrives and never kept whole: only what the spec
 * names is parsed.  A watch's spec is of each event's object (its "type"
 * is always kept).  The answer of a refusal (status >= 400) is kept whole,
 * up to 64 KiB: it is a Status. */
struct kapi_keep {
        const char *spec;
        size_t max_values, max_bytes;
};

/* kapi_request, keeping of the answer what keep says (NULL: all, within
 * the default budget; kapi_request is this with NULL).  Over the budget:
 * -EMSGSIZE ("GET /path: JSON document over N values"); a spec that is
 * not the grammar's: -EINVAL. */
int kapi_request_keep(struct kapi_client *c, const char *method, const char *path,
                      const json_t *body, const struct kapi_keep *keep, long timeout_ms,
                      const atomic_bool *stop, struct kapi_response *resp, struct diag *diag);

/* A watch: GET path (which must carry ?watch=1 or &watch=1, and may carry
 * resourceVersion and timeoutSeconds) and calls fn for each event line,
 * type "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR" with its
 * object (borrowed: valid during the call).  fn returns 0 to go on, any
 * other value to stop (returned).  Ends when the server ends the stream
 * (0), when *stop becomes true (-ECANCELED), on a line over
 * max_watch_line (-EMSGSIZE) or a line that is not an event (-EBADMSG), or
 * with the HTTP status as -EPROTO and diag when the server refuses
 * (410 Gone comes as an "ERROR" event or as status 410: *status_out says
 * which status came, may be NULL), or with kapi_request's transport errors
 * (-ETIMEDOUT when the stream stays silent for low_speed_ms; see
 * kapi_limits).  A path without watch=1 is -EINVAL.  A last line without
 * its '\n' is parsed as an event too. */
typedef int (*kapi_event_fn)(const char *type, json_t *object, void *ud);
int kapi_watch(struct kapi_client *c, const char *path, const atomic_bool *stop, kapi_event_fn fn,
               void *ud, long *status_out, struct diag *diag);
/* kapi_watch, keeping of each event's object what keep says (NULL: all,
 * within the default budget, per event).  An event over the budget ends
 * the watch with -EMSGSIZE ("line N: JSON document over N values"). */
int kapi_watch_keep(struct kapi_client *c, const char *path, const struct kapi_keep *keep,
                    const atomic_bool *stop, kapi_event_fn fn, void *ud, long *status_out,
                    struct diag *diag);

/* Percent-encodes s for a query value (fieldSelector=...).  Heap string. */
char *kapi_escape(const char *s);
/* "fieldSelector=<the selector, escaped>", the selector printed from fmt
 * ("spec.nodeName=%s").  Heap string. */
char *kapi_field_selector(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Bounded retry: the delay before attempt n (0-based) of a call that
 * failed for a reason that may pass (no answer, 429, 5xx): 200 ms doubling
 * to cap_ms (<= 0: 30 s), then ±20% jitter (so up to 1.2 * cap_ms).  A
 * Retry-After the answer carried is waited on top, inside the client's
 * next call (kapi_client_set_rate), as it is after kapi_rewatch_end. */
long kapi_backoff_ms(unsigned attempt, long cap_ms);
/* The pace of a loop that lists and watches, or anything else that may
 * end at once and start over: a watch the server ends at once, a 410, an
 * error.  Full jitter: the wait before round n+1 after n rounds in a row
 * that did not last is drawn from [1, min(cap, 800 ms * 2^n)], so a server
 * that ends every watch at once, or answers each with 410, sees a few
 * requests in the first seconds and then one per cap/2 on average, never
 * a loop, and many nodes do not come back in step.  Zero-initialised;
 * one thread's own. */
struct kapi_rewatch {
        unsigned attempt;
        long long started_ms; /* CLOCK_MONOTONIC, as the round began */
        bool progress;        /* an event (a bookmark too) came in this round */
};
/* A round that lived this long served: it resets the backoff. */
#define KAPI_REWATCH_MIN_MS 2000
/* As a round (a list, a watch, or both) begins. */
void kapi_rewatch_begin(struct kapi_rewatch *w);
/* An event came: the server is serving (resets the backoff, see below). */
void kapi_rewatch_progress(struct kapi_rewatch *w);
/* As the round ended; clean: the watch ended as watches end (the server's
 * timeoutSeconds), not with an error, a 410 or an ERROR event.  Returns the
 * milliseconds to wait before the next round (cap_ms <= 0: 30 s): 0 only
 * after a clean round that lived KAPI_REWATCH_MIN_MS; a round that lived
 * that long or brought events resets the backoff first, so the wait after
 * it is short (at most 800 ms) but never skipped. */
long kapi_rewatch_end(struct kapi_rewatch *w, bool clean, long cap_ms);
/* Whether a call's outcome is worth retrying: r < 0 other than
 * -ECANCELED/-EMSGSIZE/-EBADMSG/-EPROTO, or status 429, 500, 502, 503, 504
 * (a watch's -EPROTO is judged by its status, like an answer). */
bool kapi_retryable(int r, long status);

/* ---- calls on a libuv loop ----
 * The same calls, for code that runs on a loop and must never block it:
 * they start at once and end in a callback on the loop (the loop's
 * thread only).  The client's rate, Retry-After pause, limits, token
 * and idle connections are shared with the blocking calls (a call whose
 * turn has not come waits on a timer).  A call that could not start
 * (a bad path, its rate turn later than its timeout_ms) ends through done
 * too, on a later turn of the loop: done never runs inside *_start. */
struct kapi_call;
/* The call ended: r and resp as kapi_request_keep's (for a watch, as
 * kapi_watch_keep's, with resp->status the status that came); resp and
 * diag are borrowed for the callback (take resp->body with json_incref).
 * The call is gone once done returns. */
typedef void (*kapi_done_fn)(void *ud, int r, struct kapi_response *resp, struct diag *diag);
/* kapi_request_keep on loop.  Returns 0 and *out (valid until done), or
 * -EINVAL with diag (a spec that is not the grammar's, a body that cannot
 * be encoded). */
int kapi_request_start(struct kapi_client *c, uv_loop_t *loop, const char *method,
                       const char *path, const json_t *body, const struct kapi_keep *keep,
                       long timeout_ms, kapi_done_fn done, void *ud, struct kapi_call **out,
                       struct diag *diag);
/* kapi_watch_keep on loop: fn is called on the loop for each event (its
 * nonzero value ends the watch with it), done as the watch ends.
 * low_speed_ms: the stream's silence limit (> its timeoutSeconds; <= 0:
 * the client's). */
int kapi_watch_start(struct kapi_client *c, uv_loop_t *loop, const char *path,
                     const struct kapi_keep *keep, long low_speed_ms, kapi_event_fn fn,
                     kapi_done_fn done, void *ud, struct kapi_call **out, struct diag *diag);
/* Ends a call without calling its done (safe from its own fn; NULL and a
 * call already ended are no-ops: the caller drops its pointer in done). */
void kapi_call_cancel(struct kapi_call *call);

#endif
