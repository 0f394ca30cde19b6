/* TLS for kapi (see tls.h): OpenSSL 3 loaded with dlopen, once, under a
 * pthread_once, the first time an https client is made.
 *
 * OPENSSL_SYMBOLS below is the one list of every OpenSSL function devlet
 * calls.  Each becomes a field of `ssl`, typed with __typeof__ of the
 * prototype in OpenSSL's own headers (included for types and constants
 * only: nothing links against libssl), so every call is checked by the
 * compiler; a symbol the library lacks fails the load with its name.
 * OpenSSL's function-like macros (SSL_CTX_set_min_proto_version,
 * SSL_set_tlsext_host_name, SSL_CTX_add0_chain_cert, SSL_CTX_set_mode) are
 * spelled out as the SSL_CTX_ctrl/SSL_ctrl calls they expand to.
 *
 * The library is opened RTLD_NOW | RTLD_LOCAL: bound at load, its symbols
 * kept out of the global namespace.  OpenSSL's configuration file is not
 * read (the image has none, so a run on a host behaves the same).  A PEM
 * passphrase is never asked for (an encrypted key is refused, not prompted
 * for on a terminal).
 *
 * Memory: OpenSSL runs code from all over libcrypto once to set up (the
 * dynamic linker's pass over its symbol tables, the provider's algorithm
 * tables, SSL_CTX_new's fetch of every cipher, digest and group) and again
 * for each handshake (certificate parsing and verification, key exchange),
 * and the kernel maps the 64 KiB around every page faulted in
 * (fault-around): some 3 MB of clean pages that stay mapped, counted in the
 * daemon's RSS, that reading and writing records never touch.  After the
 * load, after each context is built and after each handshake, trim()
 * unmaps libssl's and libcrypto's read-only segments (MADV_DONTNEED: the
 * pages stay in the page cache, and what the next step needs is mapped
 * again on first use, a few hundred minor faults).  Writable segments
 * (relocated data) are never touched, nor a library with text
 * relocations.  Never logs. */
#include "kapi/tls.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

#define LIB_SONAME "libssl.so.3"
#define LIB_FALLBACK "libssl.so"

#define OPENSSL_SYMBOLS(X)                  \
        X(OpenSSL_version_num)              \
        X(OpenSSL_version)                  \
        X(OPENSSL_init_ssl)                 \
        X(ERR_get_error)                    \
        X(ERR_peek_last_error)              \
        X(ERR_clear_error)                  \
        X(ERR_error_string_n)               \
        X(TLS_client_method)                \
        X(SSL_CTX_new)                      \
        X(SSL_CTX_free)                     \
        X(SSL_CTX_ctrl)                     \
        X(SSL_CTX_set_options)              \
        X(SSL_CTX_set_verify)               \
        X(SSL_CTX_set_default_passwd_cb)    \
        X(SSL_CTX_set_default_verify_paths) \
        X(SSL_CTX_load_verify_locations)    \
        X(SSL_CTX_get_cert_store)           \
        X(SSL_CTX_use_certificate)          \
        X(SSL_CTX_use_certificate_chain_file) \
        X(SSL_CTX_use_PrivateKey)           \
        X(SSL_CTX_use_PrivateKey_file)      \
        X(SSL_CTX_check_private_key)        \
        X(X509_STORE_add_cert)              \
        X(X509_free)                        \
        X(X509_verify_cert_error_string)    \
        X(X509_VERIFY_PARAM_set1_ip_asc)    \
        X(EVP_PKEY_free)                    \
        X(BIO_new_mem_buf)                  \
        X(BIO_free)                         \
        X(BIO_number_read)                  \
        X(BIO_number_written)               \
        X(PEM_read_bio_X509)                \
        X(PEM_read_bio_PrivateKey)          \
        X(SSL_new)                          \
        X(SSL_free)                         \
        X(SSL_set_fd)                       \
        X(SSL_ctrl)                         \
        X(SSL_set1_host)                    \
        X(SSL_set_hostflags)                \
        X(SSL_get0_param)                   \
        X(SSL_get_rbio)                     \
        X(SSL_get_wbio)                     \
        X(SSL_connect)                      \
        X(SSL_read)                         \
        X(SSL_write)                        \
        X(SSL_pending)                      \
        X(SSL_get_error)                    \
        X(SSL_get_verify_result)

#define SSL_FIELD(name) __typeof__(&name) name;
static struct {
        void *handle;
        OPENSSL_SYMBOLS(SSL_FIELD)
} ssl;

#define SSL_ROW(name) { #name, offsetof(__typeof__(ssl), name) },
static const struct {
        const char *name;
        size_t offset;
} ssl_syms[] = { OPENSSL_SYMBOLS(SSL_ROW) };

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers fit in void *");

/* Where libssl and libcrypto start in memory (dladdr's dli_fbase): trim()'s
 * targets. */
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

static void trim(void)
{
        if (lib_base[0])
                dl_iterate_phdr(trim_object, NULL);
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

static void load(void)
{
        const char *env = getenv(KAPI_TLS_LIB_ENV);
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
        for (size_t i = 0; i < ARRAY_SIZE(ssl_syms); i++) {
                void *p = dlsym(h, ssl_syms[i].name);
                if (!p) {
                        snprintf(load_msg, sizeof(load_msg), "TLS: %s lacks the symbol %s", first,
                                 ssl_syms[i].name);
                        dlclose(h);
                        memset(&ssl, 0, sizeof(ssl));
                        load_rc = -ELIBACC;
                        return;
                }
                memcpy((char *)&ssl + ssl_syms[i].offset, &p, sizeof(p));
        }
        if (ssl.OpenSSL_version_num() < 0x30000000UL) {
                snprintf(load_msg, sizeof(load_msg), "TLS: %s is %s; OpenSSL 3 is needed", first,
                         ssl.OpenSSL_version(OPENSSL_VERSION));
                dlclose(h);
                memset(&ssl, 0, sizeof(ssl));
                load_rc = -ELIBACC;
                return;
        }
        if (!ssl.OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS |
                                          OPENSSL_INIT_NO_LOAD_CONFIG,
                                  NULL)) {
                snprintf(load_msg, sizeof(load_msg), "TLS: %s failed to initialise", first);
                load_rc = -ELIBACC;
                return;
        }
        ssl.handle = h;
        Dl_info a, b;
        if (dladdr((const void *)ssl.SSL_new, &a) && dladdr((const void *)ssl.X509_free, &b)) {
                lib_base[0] = (uintptr_t)a.dli_fbase;
                lib_base[1] = (uintptr_t)b.dli_fbase;
        }
        trim();
}

int kapi_tls_load(struct diag *diag)
{
        pthread_once(&load_once, load);
        return load_rc < 0 ? diag_set(diag, load_rc, "%s", load_msg) : 0;
}

/* The latest OpenSSL error of this thread as text (the queue cleared), or
 * fallback when there is none. */
static const char *ssl_error(char *buf, size_t size, const char *fallback)
{
        unsigned long e, last = 0;
        while ((e = ssl.ERR_get_error()) != 0)
                last = e;
        if (!last)
                return fallback;
        ssl.ERR_error_string_n(last, buf, size);
        return buf;
}

/* ---- the context ---- */

struct file_id {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        bool present;
};

struct kapi_tls_ctx {
        SSL_CTX *ctx;
        struct file_id ca, cert, key;
};

static struct file_id file_id_of(const char *path)
{
        struct stat st;
        if (!path || stat(path, &st) != 0)
                return (struct file_id){ 0 };
        return (struct file_id){ st.st_dev, st.st_ino, st.st_size, st.st_mtim, true };
}

static bool file_id_same(struct file_id a, struct file_id b)
{
        return a.present == b.present && a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
               a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec;
}

/* A key is never decrypted with a passphrase: none is asked for. */
static int no_passphrase(char *buf, int size, int rwflag, void *ud)
{
        return 0;
}

/* The PEM certificates in text (at least one) into the trust store, or the
 * first as the client certificate and the rest as its chain. */
static int add_pem_certs(SSL_CTX *ctx, const char *text, bool client, const char *what,
                         struct diag *diag)
{
        char err[256];
        BIO *bio = ssl.BIO_new_mem_buf(text, -1);
        if (!bio)
                return diag_set(diag, -ENOMEM, "%s: %s", what, ssl_error(err, sizeof(err), "no memory"));
        X509_STORE *store = client ? NULL : ssl.SSL_CTX_get_cert_store(ctx);
        int n = 0, r = 0;
        X509 *x;
        ssl.ERR_clear_error();
        while ((x = ssl.PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)) != NULL) {
                bool ok;
                if (!client)
                        ok = ssl.X509_STORE_add_cert(store, x) == 1;
                else if (n == 0)
                        ok = ssl.SSL_CTX_use_certificate(ctx, x) == 1;
                else /* SSL_CTX_add0_chain_cert takes x */
                        ok = ssl.SSL_CTX_ctrl(ctx, SSL_CTRL_CHAIN_CERT, 0, x) == 1;
                if (!client || n == 0 || !ok)
                        ssl.X509_free(x);
                n++;
                if (!ok) {
                        r = diag_set(diag, -EINVAL, "%s: certificate %d: %s", what, n,
                                     ssl_error(err, sizeof(err), "refused"));
                        break;
                }
        }
        unsigned long e = ssl.ERR_peek_last_error();
        if (r == 0 && e &&
            !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE && n > 0))
                r = diag_set(diag, -EINVAL, "%s: %s", what,
                             ssl_error(err, sizeof(err), "no PEM certificate"));
        else if (r == 0 && n == 0)
                r = diag_set(diag, -EINVAL, "%s: no PEM certificate", what);
        ssl.ERR_clear_error();
        ssl.BIO_free(bio);
        return r;
}

static int use_pem_key(SSL_CTX *ctx, const char *text, struct diag *diag)
{
        char err[256];
        BIO *bio = ssl.BIO_new_mem_buf(text, -1);
        if (!bio)
                return diag_set(diag, -ENOMEM, "client-key-data: no memory");
        EVP_PKEY *key = ssl.PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
        ssl.BIO_free(bio);
        int r = 0;
        if (!key || ssl.SSL_CTX_use_PrivateKey(ctx, key) != 1)
                r = diag_set(diag, -EINVAL, "client-key-data: %s",
                             ssl_error(err, sizeof(err), "not a PEM private key"));
        ssl.EVP_PKEY_free(key);
        return r;
}

static int ctx_setup(struct kapi_tls_ctx *t, const struct kapi_config *cfg, struct diag *diag)
{
        char err[256];
        SSL_CTX *ctx = t->ctx;
        ssl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
        /* partial writes and a moving buffer suit the non-blocking loop;
         * idle connections give their buffers back */
        ssl.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                 SSL_MODE_RELEASE_BUFFERS,
                         NULL);
        /* a peer closing without close_notify is an end of stream: HTTP's
         * framing says whether the response was complete */
        ssl.SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
                                             SSL_OP_NO_COMPRESSION);
        ssl.SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
        ssl.SSL_CTX_set_verify(ctx, cfg->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);

        /* the kubeconfig's CA alone is trusted when it names one */
        int r;
        if (cfg->ca_data) {
                r = add_pem_certs(ctx, cfg->ca_data, false, "certificate-authority-data", diag);
                if (r < 0)
                        return r;
        } else if (cfg->ca_file) {
                t->ca = file_id_of(cfg->ca_file);
                if (ssl.SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1)
                        return diag_set(diag, -EINVAL, "CA file %s: %s", cfg->ca_file,
                                        ssl_error(err, sizeof(err), "unusable"));
        } else if (ssl.SSL_CTX_set_default_verify_paths(ctx) != 1) {
                return diag_set(diag, -EINVAL, "the system's CA certificates: %s",
                                ssl_error(err, sizeof(err), "unusable"));
        }

        if (cfg->cert_data) {
                r = add_pem_certs(ctx, cfg->cert_data, true, "client-certificate-data", diag);
                if (r < 0)
                        return r;
        } else if (cfg->cert_file) {
                t->cert = file_id_of(cfg->cert_file);
                if (ssl.SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1)
                        return diag_set(diag, -EINVAL, "client certificate %s: %s", cfg->cert_file,
                                        ssl_error(err, sizeof(err), "unusable"));
        }
        if (cfg->key_data) {
                r = use_pem_key(ctx, cfg->key_data, diag);
                if (r < 0)
                        return r;
        } else if (cfg->key_file) {
                t->key = file_id_of(cfg->key_file);
                if (ssl.SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1)
                        return diag_set(diag, -EINVAL, "client key %s: %s", cfg->key_file,
                                        ssl_error(err, sizeof(err), "unusable"));
        }
        if ((cfg->cert_data || cfg->cert_file) && ssl.SSL_CTX_check_private_key(ctx) != 1)
                return diag_set(diag, -EINVAL, "the client key does not match its certificate: %s",
                                ssl_error(err, sizeof(err), "mismatch"));
        return 0;
}

int kapi_tls_ctx_new(const struct kapi_config *cfg, struct kapi_tls_ctx **out,
                     struct diag *diag)
{
        char err[256];
        if (!ssl.handle)
                return diag_set(diag, -ELIBACC, "TLS: OpenSSL is not loaded");
        ssl.ERR_clear_error();
        struct kapi_tls_ctx *t = xcalloc(1, sizeof(*t));
        t->ctx = ssl.SSL_CTX_new(ssl.TLS_client_method());
        if (!t->ctx) {
                free(t);
                return diag_set(diag, -ENOMEM, "TLS: %s", ssl_error(err, sizeof(err), "no context"));
        }
        int r = ctx_setup(t, cfg, diag);
        trim();
        if (r < 0) {
                ssl.ERR_clear_error();
                kapi_tls_ctx_free(t);
                return r;
        }
        *out = t;
        return 0;
}

void kapi_tls_ctx_free(struct kapi_tls_ctx *t)
{
        if (!t)
                return;
        ssl.SSL_CTX_free(t->ctx);
        free(t);
}

bool kapi_tls_ctx_stale(const struct kapi_tls_ctx *t, const struct kapi_config *cfg)
{
        return (!cfg->ca_data && cfg->ca_file && !file_id_same(t->ca, file_id_of(cfg->ca_file))) ||
               (!cfg->cert_data && cfg->cert_file &&
                !file_id_same(t->cert, file_id_of(cfg->cert_file))) ||
               (!cfg->key_data && cfg->key_file && !file_id_same(t->key, file_id_of(cfg->key_file)));
}

/* ---- a connection ---- */

struct kapi_tls {
        SSL *ssl;
        char host[256];
};

static bool is_ip_literal(const char *host)
{
        return strchr(host, ':') || strspn(host, "0123456789.") == strlen(host);
}

int kapi_tls_new(struct kapi_tls_ctx *ctx, int fd, const char *host, struct kapi_tls **out,
                 struct diag *diag)
{
        char err[256];
        ssl.ERR_clear_error();
        SSL *s = ssl.SSL_new(ctx->ctx);
        if (!s)
                return diag_set(diag, -ENOMEM, "TLS: %s", ssl_error(err, sizeof(err), "no memory"));
        struct kapi_tls *t = xcalloc(1, sizeof(*t));
        t->ssl = s;
        snprintf(t->host, sizeof(t->host), "%s", host);
        bool ok = ssl.SSL_set_fd(s, fd) == 1;
        if (ok && is_ip_literal(host)) {
                ok = ssl.X509_VERIFY_PARAM_set1_ip_asc(ssl.SSL_get0_param(s), host) == 1;
        } else if (ok) {
                ssl.SSL_set_hostflags(s, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                /* SSL_set_tlsext_host_name */
                ok = ssl.SSL_ctrl(s, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                                  t->host) == 1 &&
                     ssl.SSL_set1_host(s, host) == 1;
        }
        if (!ok) {
                diag_set(diag, -EINVAL, "TLS: server %s: %s", host,
                         ssl_error(err, sizeof(err), "cannot be checked"));
                kapi_tls_free(t);
                return -EINVAL;
        }
        *out = t;
        return 0;
}

void kapi_tls_free(struct kapi_tls *t)
{
        if (!t)
                return;
        /* no close_notify: HTTP frames every response, and the write could
         * block or meet a closed socket */
        ssl.SSL_free(t->ssl);
        free(t);
}

/* What an SSL_* call's result means: > 0 bytes, 0 end of stream, -EAGAIN
 * with *want, or r_fail with diag. */
static ssize_t outcome(struct kapi_tls *t, int n, short *want, int r_fail, const char *doing,
                       struct diag *diag)
{
        char err[256];
        if (n > 0)
                return n;
        switch (ssl.SSL_get_error(t->ssl, n)) {
        case SSL_ERROR_WANT_READ:
                *want = POLLIN;
                return -EAGAIN;
        case SSL_ERROR_WANT_WRITE:
                *want = POLLOUT;
                return -EAGAIN;
        case SSL_ERROR_ZERO_RETURN:
                ssl.ERR_clear_error();
                return 0;
        case SSL_ERROR_SYSCALL: {
                int e = errno;
                const char *why = ssl_error(err, sizeof(err), NULL);
                return diag_set(diag, r_fail, "TLS %s %s: %s", doing, t->host,
                                why ? why : e ? strerror(e) : "the connection closed");
        }
        default:
                return diag_set(diag, r_fail, "TLS %s %s: %s", doing, t->host,
                                ssl_error(err, sizeof(err), "failed"));
        }
}

int kapi_tls_handshake(struct kapi_tls *t, short *want, struct diag *diag)
{
        char err[256];
        ssl.ERR_clear_error();
        int n = ssl.SSL_connect(t->ssl);
        if (n == 1) {
                trim();
                return 0;
        }
        long v = ssl.SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK && ssl.SSL_get_error(t->ssl, n) == SSL_ERROR_SSL) {
                /* the verdict says more than "certificate verify failed" alone */
                const char *e = ssl_error(err, sizeof(err), "certificate verify failed");
                const char *colon = strrchr(e, ':');
                return diag_set(diag, -ECONNABORTED, "TLS handshake with %s: %s: %s", t->host,
                                colon ? colon + 1 : e, ssl.X509_verify_cert_error_string(v));
        }
        ssize_t r = outcome(t, n, want, -ECONNABORTED, "handshake with", diag);
        if (r == 0)
                return diag_set(diag, -ECONNABORTED, "TLS handshake with %s: the connection closed",
                                t->host);
        return (int)r;
}

ssize_t kapi_tls_read(struct kapi_tls *t, void *buf, size_t len, short *want, struct diag *diag)
{
        ssl.ERR_clear_error();
        int n = ssl.SSL_read(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        return outcome(t, n, want, -ECONNRESET, "read from", diag);
}

ssize_t kapi_tls_write(struct kapi_tls *t, const void *buf, size_t len, short *want,
                       struct diag *diag)
{
        ssl.ERR_clear_error();
        int n = ssl.SSL_write(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        ssize_t r = outcome(t, n, want, -ECONNRESET, "write to", diag);
        return r == 0 ? diag_set(diag, -ECONNRESET, "TLS write to %s: the connection closed",
                                 t->host)
                      : r;
}

uint64_t kapi_tls_wire_bytes(const struct kapi_tls *t)
{
        return ssl.BIO_number_read(ssl.SSL_get_rbio(t->ssl)) +
               ssl.BIO_number_written(ssl.SSL_get_wbio(t->ssl));
}

bool kapi_tls_idle_ok(struct kapi_tls *t)
{
        if (ssl.SSL_pending(t->ssl) > 0)
                return false;
        /* a session ticket or a key update is consumed and leaves
         * WANT_READ; data, an alert or the end of the stream make the
         * connection unusable */
        char byte;
        short want = 0;
        return kapi_tls_read(t, &byte, 1, &want, NULL) == -EAGAIN && want == POLLIN;
}
