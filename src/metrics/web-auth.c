/* Basic authentication (see web-auth.h): the Authorization value decoded
 * (base64, at most WEB_AUTH_MAX bytes), the user looked up, the password
 * compared with the one last verified for that user, else bcrypt through
 * libcrypt's crypt_rn on a job.  libcrypt (libxcrypt's libcrypt.so.1) is
 * loaded with dlopen, once, when a configuration first has users, so a
 * daemon without basic authentication never maps it; crypt.h gives the
 * prototype the pointer is typed with.  Never logs; holds no lock. */
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

#include "base/base64.h"
#include "base/cleanup.h"
#include "base/xalloc.h"

/* decoded user:password bytes accepted (bcrypt reads 72 of the password) */
#define WEB_AUTH_MAX 512

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
        char *ok; /* the password last verified, or NULL */
        size_t ok_len;
};

struct web_auth {
        struct web_user *users;
        size_t n;
};

struct web_auth_job {
        size_t user; /* index; n: no such user */
        char *password;
        size_t password_len;
        char *hash; /* the user's, or a stand-in's for an unknown user */
        bool ok;
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
                forget(a->users[i].ok, a->users[i].ok_len);
        }
        free(a->users);
        free(a);
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
        if (user < a->n && a->users[user].ok &&
            same(a->users[user].ok, a->users[user].ok_len, pw, plen)) {
                explicit_bzero(buf, sizeof(buf));
                return WEB_AUTH_OK;
        }
        struct web_auth_job *j = xcalloc(1, sizeof(*j));
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

void web_auth_job_run(struct web_auth_job *j)
{
        struct crypt_data *cd = xcalloc(1, sizeof(*cd));
        /* a NUL in the password would cut it short for crypt: never equal */
        bool clean = strlen(j->password) == j->password_len;
        const char *h = crypt_fn(j->password, j->hash, cd, sizeof(*cd));
        j->ok = clean && h && h[0] != '*' && same(h, strlen(h), j->hash, strlen(j->hash));
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
}

bool web_auth_finish(struct web_auth *a, struct web_auth_job *j)
{
        bool ok = j->ok && j->user < a->n;
        if (ok) {
                struct web_user *u = &a->users[j->user];
                forget(u->ok, u->ok_len);
                u->ok = TAKE_PTR(j->password);
                u->ok_len = j->password_len;
        }
        forget(j->password, j->password_len);
        forget(j->hash, strlen(j->hash));
        free(j);
        return ok;
}
