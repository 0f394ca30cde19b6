/* Basic authentication for the metrics endpoint (the web configuration's
 * basic_auth_users: user name and bcrypt hash), as exporter-toolkit checks
 * it: every path needs a known user and the password of its hash.
 *
 * bcrypt costs tens of milliseconds by design, so the endpoint's thread
 * never runs it: a check that needs it gives a job (web_auth_job_run, on a
 * worker thread).  Results are remembered, as exporter-toolkit caches
 * them, by a keyed hash (SipHash-128 under a key drawn at web_auth_new) of
 * the user and password, never the password itself: the password that
 * matched, per user, so a scraper's next requests are checked at once;
 * and the last WEB_AUTH_FAILURES wrong ones (user and password), so a
 * wrong password repeated costs no bcrypt.  Comparisons with the right
 * password's digest, and of the computed hash, take the same time
 * whatever bytes differ.  An unknown user costs a job as a known one does,
 * so the time taken does not tell which users exist.  Who may run a job,
 * and when, is metrics/auth-gate.h's business.  Not thread-safe: one
 * web_auth belongs to the endpoint's thread, a job to whoever runs it. */
#ifndef DEVLET_METRICS_WEB_AUTH_H
#define DEVLET_METRICS_WEB_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "config/web.h"

struct web_auth;
struct web_auth_job;

enum web_auth_verdict {
        WEB_AUTH_OK,   /* a user and its password (remembered) */
        WEB_AUTH_DENY,   /* no credentials, or malformed: 401 */
        WEB_AUTH_FAILED, /* a user and password known wrong (remembered): 401 */
        WEB_AUTH_SLOW,   /* run the job, then web_auth_finish */
};

/* The users of w in *out; NULL when it has none (no authentication).
 * Loads libcrypt the first time.  Returns 0, or -ELIBACC with diag when
 * libcrypt cannot be loaded, or the -errno of getrandom(2) when no key
 * can be drawn (never "no authentication" then). */
int web_auth_new(const struct config_web *w, struct web_auth **out, struct diag *diag);
void web_auth_free(struct web_auth *a);

/* Checks an Authorization field value (NULL: absent).  WEB_AUTH_SLOW sets
 * *job, which the caller runs and hands to web_auth_finish. */
enum web_auth_verdict web_auth_check(struct web_auth *a, const char *value, size_t len,
                                     struct web_auth_job **job);
/* Whether job's answer became known since web_auth_check gave it (another
 * request with the same credentials was verified meanwhile): then *ok says
 * it, and the job need not run. */
bool web_auth_job_known(struct web_auth *a, const struct web_auth_job *job, bool *ok);
/* bcrypt, on any thread. */
void web_auth_job_run(struct web_auth_job *job);
/* Back on a's thread, after web_auth_job_run: whether the credentials were
 * right; the answer is remembered.  Frees job. */
bool web_auth_finish(struct web_auth *a, struct web_auth_job *job);
/* Frees a job that did not run (nothing remembered).  NULL: nothing. */
void web_auth_job_free(struct web_auth_job *job);

#endif
