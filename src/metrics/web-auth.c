/* Basic authentication (see web-auth.h): the Authorization value decoded
 * (base64, at most WEB_AUTH_MAX bytes), the user looked up, the digest of
 * user and password compared with the one last verified for that user,
 * then looked up among the failures remembered, else bcrypt through
 * libcrypt's crypt_rn on a job.  The failures are a set-associative table
 * (WEB_AUTH_FAILURE_SETS sets of WEB_AUTH_FAILURE_WAYS digests, the least
 * recently used of a set replaced): a digest's first bytes pick its set,
 * and since no one without the key can predict a digest, a guesser cannot
 * aim at the set that holds someone else's failures.  libcrypt
 * (libxcrypt's libcrypt.so.1) is loaded with dlopen, once, when a
 * configuration first has users, so a daemon without basic authentication
 * never maps it; crypt.h gives the prototype the pointer is typed with.
 * Never logs; holds no lock. */
#include "metrics/web-auth.h"

#include <crypt.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "base/base64.h"
#include "base/cleanup.h"
#include "base/siphash.h"
#include "base/xalloc.h"

/* decoded user:password bytes accepted (bcrypt reads 72 of the password) */
#define WEB_AUTH_MAX 512
/* wrong passwords remembered, WEB_AUTH_FAILURES in all: more than a
 * guesser gets to try in AUTH_GATE_FAIL_BURST, and a fixed wrong password
 * (a stale Secret) stays remembered while random ones pass through */
#define WEB_AUTH_FAILURE_SETS 256
#define WEB_AUTH_FAILURE_WAYS 4
#define WEB_AUTH_FAILURES (WEB_AUTH_FAILURE_SETS * WEB_AUTH_FAILURE_WAYS)

#define CRYPT_SONAME "libcrypt.so.1"

static pthread_once_t crypt_once = PTHREAD_ONCE_INIT;
static __typeof__(&crypt_rn) crypt_fn;
static char crypt_error[256];

static void crypt_load(void)
{
        void *h = dlopen(CRYPT_SONAME, RTLD_NOW | RTLD_LOCAL);
        void *f = h ? dlsym(h, "crypt_rn") : NULL;
        if (!f) {
                const char *e = dlerror();
                snprintf(crypt_error, sizeof(crypt_error), "%s", e ? e : CRYPT_SONAME);
                return;
        }
        memcpy(&crypt_fn, &f, sizeof(f));
}

struct web_user {
        char *name, *hash;
        bool ok_known;
        uint8_t ok[SIPHASH_OUT_SIZE]; /* digest of the password last verified */
};

struct web_failure {
        uint8_t digest[SIPHASH_OUT_SIZE];
        uint64_t used; /* web_auth's tick at the last hit; 0: empty */
};

struct web_auth {
        struct web_user *users;
        size_t n;
        uint8_t key[SIPHASH_KEY_SIZE];
        uint64_t tick;
        struct web_failure failures[WEB_AUTH_FAILURE_SETS][WEB_AUTH_FAILURE_WAYS];
};

struct web_auth_job {
        size_t user; /* index; n: no such user */
        char *password;
        size_t password_len;
        char *hash; /* the user's, or a stand-in's for an unknown user */
        uint8_t digest[SIPHASH_OUT_SIZE];
        bool ran, ok;
};

/* Equal, in a time that depends on the lengths only. */
static bool same(const char *a, size_t alen, const char *b, size_t blen)
{
        size_t n = alen > blen ? alen : blen;
        unsigned char d = alen != blen;
        for (size_t i = 0; i < n; i++)
                d |= (unsigned char)((i < alen ? a[i] : 0) ^ (i < blen ? b[i] : 0));
        return d == 0;
}

/* The keyed digest of user and password: the user's length first, so
 * that no other split of the same bytes gives it. */
static void digest(const struct web_auth *a, const char *user, size_t ulen, const char *pw,
                   size_t plen, uint8_t out[SIPHASH_OUT_SIZE])
{
        uint8_t m[4 + WEB_AUTH_MAX];
        uint32_t n = (uint32_t)ulen;
        memcpy(m, &n, 4);
        memcpy(m + 4, user, ulen);
        memcpy(m + 4 + ulen, pw, plen);
        siphash128(a->key, m, 4 + ulen + plen, out);
        explicit_bzero(m, 4 + ulen + plen);
}

static struct web_failure *failure_set(struct web_auth *a, const uint8_t *d)
{
        return a->failures[((size_t)d[0] | (size_t)d[1] << 8) % WEB_AUTH_FAILURE_SETS];
}

/* Whether d is a remembered failure (then used now). */
static bool failure_find(struct web_auth *a, const uint8_t *d)
{
        struct web_failure *set = failure_set(a, d);
        for (size_t w = 0; w < WEB_AUTH_FAILURE_WAYS; w++)
                if (set[w].used && memcmp(set[w].digest, d, SIPHASH_OUT_SIZE) == 0) {
                        set[w].used = ++a->tick;
                        return true;
                }
        return false;
}

/* Remembers d, in place of its set's least recently used. */
static void failure_add(struct web_auth *a, const uint8_t *d)
{
        if (failure_find(a, d))
                return;
        struct web_failure *set = failure_set(a, d), *victim = &set[0];
        for (size_t w = 1; w < WEB_AUTH_FAILURE_WAYS; w++)
                if (set[w].used < victim->used)
                        victim = &set[w];
        memcpy(victim->digest, d, SIPHASH_OUT_SIZE);
        victim->used = ++a->tick;
}

int web_auth_new(const struct config_web *w, struct web_auth **out, struct diag *diag)
{
        *out = NULL;
        if (!w || !w->n_users)
                return 0;
        pthread_once(&crypt_once, crypt_load);
        if (!crypt_fn)
                return diag_set(diag, -ELIBACC,
                                "basic_auth_users: cannot load %s (bcrypt): %s", CRYPT_SONAME,
                                crypt_error);
        struct web_auth *a = xcalloc(1, sizeof(*a));
        if (getrandom(a->key, sizeof(a->key), GRND_NONBLOCK) != (ssize_t)sizeof(a->key)) {
                int r = errno ? -errno : -EIO;
                free(a);
                return diag_set(diag, r, "basic_auth_users: cannot draw a random key: %s",
                                strerror(-r));
        }
        a->users = xcalloc(w->n_users, sizeof(*a->users));
        a->n = w->n_users;
        for (size_t i = 0; i < a->n; i++) {
                a->users[i].name = xstrdup(w->users[i].name);
                a->users[i].hash = xstrdup(w->users[i].hash);
        }
        *out = a;
        return 0;
}

static void forget(char *s, size_t n)
{
        if (s) {
                explicit_bzero(s, n);
                free(s);
        }
}

void web_auth_free(struct web_auth *a)
{
        if (!a)
                return;
        for (size_t i = 0; i < a->n; i++) {
                free(a->users[i].name);
                forget(a->users[i].hash, strlen(a->users[i].hash));
        }
        free(a->users);
        forget((char *)a, sizeof(*a));
}

enum web_auth_verdict web_auth_check(struct web_auth *a, const char *value, size_t len,
                                     struct web_auth_job **job)
{
        if (!value || len < 6 || strncasecmp(value, "Basic ", 6) != 0)
                return WEB_AUTH_DENY;
        const char *s = value + 6;
        size_t n = len - 6;
        while (n && (*s == ' ' || *s == '\t')) {
                s++;
                n--;
        }
        char buf[WEB_AUTH_MAX];
        _cleanup_free_ char *dec = NULL;
        size_t dlen = 0;
        long dn = -1;
        if (n <= WEB_AUTH_MAX / 3 * 4 && base64_decode(s, n, &dec, &dlen, NULL) == 0 &&
            dlen <= sizeof(buf)) {
                memcpy(buf, dec, dlen);
                dn = (long)dlen;
        }
        if (dec)
                explicit_bzero(dec, dlen);
        const char *colon = dn > 0 ? memchr(buf, ':', (size_t)dn) : NULL;
        if (!colon) {
                explicit_bzero(buf, sizeof(buf));
                return WEB_AUTH_DENY;
        }
        size_t ulen = (size_t)(colon - buf), plen = (size_t)dn - ulen - 1;
        const char *pw = colon + 1;
        size_t user = a->n;
        for (size_t i = 0; i < a->n; i++)
                if (strlen(a->users[i].name) == ulen && memcmp(a->users[i].name, buf, ulen) == 0)
                        user = i;
        uint8_t d[SIPHASH_OUT_SIZE];
        digest(a, buf, ulen, pw, plen, d);
        if (user < a->n && a->users[user].ok_known &&
            same((const char *)a->users[user].ok, sizeof(d), (const char *)d, sizeof(d))) {
                explicit_bzero(buf, sizeof(buf));
                return WEB_AUTH_OK;
        }
        if (failure_find(a, d)) {
                explicit_bzero(buf, sizeof(buf));
                return WEB_AUTH_FAILED;
        }
        struct web_auth_job *j = xcalloc(1, sizeof(*j));
        memcpy(j->digest, d, sizeof(d));
        j->user = user;
        j->password = xmalloc(plen + 1);
        memcpy(j->password, pw, plen);
        j->password[plen] = '\0';
        j->password_len = plen;
        j->hash = xstrdup(a->users[user < a->n ? user : 0].hash);
        explicit_bzero(buf, sizeof(buf));
        *job = j;
        return WEB_AUTH_SLOW;
}

bool web_auth_job_known(struct web_auth *a, const struct web_auth_job *j, bool *ok)
{
        const struct web_user *u = j->user < a->n ? &a->users[j->user] : NULL;
        if (u && u->ok_known &&
            same((const char *)u->ok, sizeof(u->ok), (const char *)j->digest, sizeof(j->digest))) {
                *ok = true;
                return true;
        }
        if (failure_find(a, j->digest)) {
                *ok = false;
                return true;
        }
        return false;
}

void web_auth_job_run(struct web_auth_job *j)
{
        struct crypt_data *cd = xcalloc(1, sizeof(*cd));
        /* a NUL in the password would cut it short for crypt: never equal */
        bool clean = strlen(j->password) == j->password_len;
        const char *h = crypt_fn(j->password, j->hash, cd, sizeof(*cd));
        j->ok = clean && h && h[0] != '*' && same(h, strlen(h), j->hash, strlen(j->hash));
        j->ran = true;
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
}

void web_auth_job_free(struct web_auth_job *j)
{
        if (!j)
                return;
        forget(j->password, j->password_len);
        forget(j->hash, strlen(j->hash));
        explicit_bzero(j->digest, sizeof(j->digest));
        free(j);
}

bool web_auth_finish(struct web_auth *a, struct web_auth_job *j)
{
        bool ok = j->ran && j->ok && j->user < a->n;
        if (ok) {
                struct web_user *u = &a->users[j->user];
                memcpy(u->ok, j->digest, sizeof(u->ok));
                u->ok_known = true;
        } else if (j->ran) {
                failure_add(a, j->digest);
        }
        web_auth_job_free(j);
        return ok;
}
