/* OpenSSL 3 loaded with dlopen (see ossl.h), once, under a pthread_once,
 * the first time a TLS user asks for it.
 *
 * The library is opened RTLD_NOW | RTLD_LOCAL: bound at load, its symbols
 * kept out of the global namespace.  A symbol it lacks fails the load with
 * its name.  OpenSSL's configuration file is not read (the image has none,
 * so a run on a host behaves the same).
 *
 * ossl_trim() finds libssl's and libcrypto's segments with
 * dl_iterate_phdr, by the base address dladdr gave for one symbol of each,
 * and drops their read-only pages with madvise(MADV_DONTNEED).  Never
 * logs. */
#include "base/ossl.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"

#define LIB_SONAME "libssl.so.3"
#define LIB_FALLBACK "libssl.so"

struct ossl_lib ossl;

#define OSSL_ROW(name) { #name, offsetof(struct ossl_lib, name) },
static const struct {
        const char *name;
        size_t offset;
} ossl_syms[] = { OSSL_SYMBOLS(OSSL_ROW) };

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers fit in void *");

/* Where libssl and libcrypto start in memory (dladdr's dli_fbase): the
 * trim's targets. */
static uintptr_t lib_base[2];

static bool has_textrel(const struct dl_phdr_info *info)
{
        for (int i = 0; i < info->dlpi_phnum; i++) {
                if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
                        continue;
                const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
                for (; d->d_tag != DT_NULL; d++)
                        if (d->d_tag == DT_TEXTREL ||
                            (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)))
                                return true;
        }
        return false;
}

static int trim_object(struct dl_phdr_info *info, size_t size, void *ud)
{
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), first = 0;
        for (int i = 0; i < info->dlpi_phnum && !first; i++)
                if (info->dlpi_phdr[i].p_type == PT_LOAD)
                        first = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) & ~(page - 1);
        if (!first || (first != lib_base[0] && first != lib_base[1]) || has_textrel(info))
                return 0;
        for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
                        continue;
                uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
                uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
                madvise((void *)start, end - start, MADV_DONTNEED);
        }
        return 0;
}

void ossl_trim(void)
{
        if (lib_base[0])
                dl_iterate_phdr(trim_object, NULL);
}

static _Atomic unsigned long uses;

void ossl_note_use(void)
{
        atomic_fetch_add_explicit(&uses, 1, memory_order_relaxed);
}

bool ossl_trim_idle(void)
{
        static unsigned long seen;
        static bool dirty;
        unsigned long now = atomic_load_explicit(&uses, memory_order_relaxed);
        if (now != seen) {
                seen = now;
                dirty = true;
                return false;
        }
        if (!dirty)
                return false;
        dirty = false;
        ossl_trim();
        return true;
}

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[sizeof(((struct diag *)0)->message)];

/* Appends sep and text to load_msg, truncating. */
static void msg_append(size_t *at, const char *sep, const char *text)
{
        int n = snprintf(load_msg + *at, sizeof(load_msg) - *at, "%s%s", sep, text);
        if (n > 0)
                *at += (size_t)n < sizeof(load_msg) - *at ? (size_t)n : sizeof(load_msg) - *at - 1;
}

/* dlopen, with the reason it failed appended to load_msg. */
static void *try_open(const char *name, size_t *at, bool more)
{
        void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *e = dlerror();
                msg_append(at, more ? "; " : "", e ? e : name);
        }
        return h;
}

static void load_fail(void *h)
{
        dlclose(h);
        memset(&ossl, 0, sizeof(ossl));
        load_rc = -ELIBACC;
}

static void load(void)
{
        const char *env = getenv(OSSL_LIB_ENV);
        bool own = env && *env;
        const char *first = own ? env : LIB_SONAME;
        size_t at = 0;
        msg_append(&at, "TLS: cannot load ", first);
        msg_append(&at, ": ", "");
        void *h = try_open(first, &at, false);
        if (!h && !own)
                h = try_open(LIB_FALLBACK, &at, true);
        if (!h) {
                load_rc = -ELIBACC;
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(ossl_syms); i++) {
                void *p = dlsym(h, ossl_syms[i].name);
                if (!p) {
                        snprintf(load_msg, sizeof(load_msg), "TLS: %s lacks the symbol %s", first,
                                 ossl_syms[i].name);
                        load_fail(h);
                        return;
                }
                memcpy((char *)&ossl + ossl_syms[i].offset, &p, sizeof(p));
        }
        if (ossl.OpenSSL_version_num() < 0x30000000UL) {
                snprintf(load_msg, sizeof(load_msg), "TLS: %s is %s; OpenSSL 3 is needed", first,
                         ossl.OpenSSL_version(OPENSSL_VERSION));
                load_fail(h);
                return;
        }
        if (!ossl.OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS |
                                           OPENSSL_INIT_NO_LOAD_CONFIG,
                                   NULL)) {
                snprintf(load_msg, sizeof(load_msg), "TLS: %s failed to initialise", first);
                load_rc = -ELIBACC;
                return;
        }
        ossl.handle = h;
        Dl_info a, b;
        if (dladdr((const void *)ossl.SSL_new, &a) && dladdr((const void *)ossl.X509_free, &b)) {
                lib_base[0] = (uintptr_t)a.dli_fbase;
                lib_base[1] = (uintptr_t)b.dli_fbase;
        }
        ossl_trim();
}

int ossl_load(struct diag *diag)
{
        pthread_once(&load_once, load);
        return load_rc < 0 ? diag_set(diag, load_rc, "%s", load_msg) : 0;
}

const char *ossl_error(char *buf, size_t size, const char *fallback)
{
        unsigned long e, last = 0;
        while ((e = ossl.ERR_get_error()) != 0)
                last = e;
        if (!last)
                return fallback;
        ossl.ERR_error_string_n(last, buf, size);
        return buf;
}

int ossl_no_passphrase(char *buf, int size, int rwflag, void *ud)
{
        return 0;
}

int ossl_add_pem_certs(SSL_CTX *ctx, const char *text, enum ossl_pem_use use, const char *what,
                       struct diag *diag)
{
        char err[256];
        BIO *bio = ossl.BIO_new_mem_buf(text, -1);
        if (!bio)
                return diag_set(diag, -ENOMEM, "%s: %s", what, ossl_error(err, sizeof(err), "no memory"));
        bool chain = use == OSSL_PEM_CHAIN;
        X509_STORE *store = chain ? NULL : ossl.SSL_CTX_get_cert_store(ctx);
        int n = 0, r = 0;
        X509 *x;
        ossl.ERR_clear_error();
        while ((x = ossl.PEM_read_bio_X509(bio, NULL, ossl_no_passphrase, NULL)) != NULL) {
                bool ok;
                if (!chain)
                        ok = ossl.X509_STORE_add_cert(store, x) == 1 &&
                             (use != OSSL_PEM_CLIENT_CA || ossl.SSL_CTX_add_client_CA(ctx, x) == 1);
                else if (n == 0)
                        ok = ossl.SSL_CTX_use_certificate(ctx, x) == 1;
                else /* SSL_CTX_add0_chain_cert takes x */
                        ok = ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_CHAIN_CERT, 0, x) == 1;
                if (!chain || n == 0 || !ok)
                        ossl.X509_free(x);
                n++;
                if (!ok) {
                        r = diag_set(diag, -EINVAL, "%s: certificate %d: %s", what, n,
                                     ossl_error(err, sizeof(err), "refused"));
                        break;
                }
        }
        unsigned long e = ossl.ERR_peek_last_error();
        if (r == 0 && e &&
            !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE && n > 0))
                r = diag_set(diag, -EINVAL, "%s: %s", what,
                             ossl_error(err, sizeof(err), "no PEM certificate"));
        else if (r == 0 && n == 0)
                r = diag_set(diag, -EINVAL, "%s: no PEM certificate", what);
        ossl.ERR_clear_error();
        ossl.BIO_free(bio);
        return r;
}

int ossl_use_pem_key(SSL_CTX *ctx, const char *text, const char *what, struct diag *diag)
{
        char err[256];
        BIO *bio = ossl.BIO_new_mem_buf(text, -1);
        if (!bio)
                return diag_set(diag, -ENOMEM, "%s: no memory", what);
        EVP_PKEY *key = ossl.PEM_read_bio_PrivateKey(bio, NULL, ossl_no_passphrase, NULL);
        ossl.BIO_free(bio);
        int r = 0;
        if (!key || ossl.SSL_CTX_use_PrivateKey(ctx, key) != 1)
                r = diag_set(diag, -EINVAL, "%s: %s", what,
                             ossl_error(err, sizeof(err), "not a PEM private key"));
        ossl.EVP_PKEY_free(key);
        return r;
}

/* The file path read whole into *text, or -errno with diag naming it. */
static int read_pem(const char *path, const char *what, char **text, size_t *len,
                    struct diag *diag)
{
        int r = fs_read_file(path, OSSL_PEM_FILE_MAX, text, len);
        if (r == -EFBIG)
                return diag_set(diag, r, "%s %s: larger than %u MiB", what, path,
                                OSSL_PEM_FILE_MAX >> 20);
        if (r < 0)
                return diag_set(diag, r, "%s %s: %s", what, path, fs_strerror(r));
        return 0;
}

int ossl_add_pem_cert_file(SSL_CTX *ctx, const char *path, enum ossl_pem_use use,
                           const char *what, struct diag *diag)
{
        _cleanup_free_ char *text = NULL;
        int r = read_pem(path, what, &text, NULL, diag);
        if (r < 0)
                return r;
        _cleanup_free_ char *label = xasprintf("%s %s", what, path);
        return ossl_add_pem_certs(ctx, text, use, label, diag);
}

int ossl_use_pem_key_file(SSL_CTX *ctx, const char *path, const char *what, struct diag *diag)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_pem(path, what, &text, &len, diag);
        if (r < 0)
                return r;
        _cleanup_free_ char *label = xasprintf("%s %s", what, path);
        r = ossl_use_pem_key(ctx, text, label, diag);
        explicit_bzero(text, len);
        return r;
}

/* $env when set and not empty, else fallback. */
static const char *env_or(const char *env, const char *fallback)
{
        const char *v = getenv(env);
        return v && *v ? v : fallback;
}

int ossl_use_system_cas(SSL_CTX *ctx, struct diag *diag)
{
        const char *file = env_or(ossl.X509_get_default_cert_file_env(),
                                  ossl.X509_get_default_cert_file());
        int r = ossl_add_pem_cert_file(ctx, file, OSSL_PEM_TRUST, "the system's CA file", diag);
        if (r < 0 && r != -ENOENT)
                return r;
        /* looked up by subject hash during each verification: files the
         * system's packages put there, opened by OpenSSL itself */
        const char *dir = env_or(ossl.X509_get_default_cert_dir_env(),
                                 ossl.X509_get_default_cert_dir());
        if (ossl.X509_STORE_load_path(ossl.SSL_CTX_get_cert_store(ctx), dir) != 1)
                ossl.ERR_clear_error(); /* a missing directory: as OpenSSL's default */
        return 0;
}
