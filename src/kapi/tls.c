/* TLS for kapi (see tls.h): the client side, on OpenSSL 3 as base/ossl.c
 * loads it (dlopen, once, the first time an https client is made; every
 * symbol in its one typed table).
 *
 * A PEM passphrase is never asked for (an encrypted key is refused, not
 * prompted for on a terminal).  The CA, certificate and key files are read
 * by base/fs's reader and parsed from memory (ossl_*_file): OpenSSL never
 * opens them, so a FIFO in their place is an error, not a hang.  After each context is built and after
 * each handshake, ossl_trim() drops the libraries' read-only pages that
 * step faulted in (see base/ossl.h).  Never logs. */
#include "kapi/tls.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "base/cleanup.h"
#include "base/fs.h"
#include "base/ossl.h"
#include "base/xalloc.h"

int kapi_tls_load(struct diag *diag)
{
        return ossl_load(diag);
}

/* ---- the context ---- */


struct kapi_tls_ctx {
        SSL_CTX *ctx;
        struct fs_file_id ca, cert, key;
};

static int ctx_setup(struct kapi_tls_ctx *t, const struct kapi_config *cfg, struct diag *diag)
{
        char err[256];
        SSL_CTX *ctx = t->ctx;
        ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
        /* partial writes and a moving buffer suit the non-blocking loop;
         * idle connections give their buffers back */
        ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                 SSL_MODE_RELEASE_BUFFERS,
                         NULL);
        /* a peer closing without close_notify is an end of stream: HTTP's
         * framing says whether the response was complete */
        ossl.SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
                                             SSL_OP_NO_COMPRESSION);
        ossl.SSL_CTX_set_default_passwd_cb(ctx, ossl_no_passphrase);
        ossl.SSL_CTX_set_verify(ctx, cfg->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);

        /* the kubeconfig's CA alone is trusted when it names one; files
         * are read by base/fs (never blocking, regular files only): a FIFO
         * would hang an fopen, and with it every call waiting for h->mu */
        int r;
        if (cfg->ca_data) {
                r = ossl_add_pem_certs(ctx, cfg->ca_data, OSSL_PEM_TRUST, "certificate-authority-data",
                                       diag);
        } else if (cfg->ca_file) {
                t->ca = fs_file_id_of(cfg->ca_file);
                r = ossl_add_pem_cert_file(ctx, cfg->ca_file, OSSL_PEM_TRUST, "CA file", diag);
        } else {
                r = ossl_use_system_cas(ctx, diag);
        }
        if (r < 0)
                return r;

        if (cfg->cert_data) {
                r = ossl_add_pem_certs(ctx, cfg->cert_data, OSSL_PEM_CHAIN, "client-certificate-data",
                                       diag);
        } else if (cfg->cert_file) {
                t->cert = fs_file_id_of(cfg->cert_file);
                r = ossl_add_pem_cert_file(ctx, cfg->cert_file, OSSL_PEM_CHAIN, "client certificate",
                                           diag);
        }
        if (r < 0)
                return r;
        if (cfg->key_data) {
                r = ossl_use_pem_key(ctx, cfg->key_data, "client-key-data", diag);
        } else if (cfg->key_file) {
                t->key = fs_file_id_of(cfg->key_file);
                r = ossl_use_pem_key_file(ctx, cfg->key_file, "client key", diag);
        }
        if (r < 0)
                return r;
        if ((cfg->cert_data || cfg->cert_file) && ossl.SSL_CTX_check_private_key(ctx) != 1)
                return diag_set(diag, -EINVAL, "the client key does not match its certificate: %s",
                                ossl_error(err, sizeof(err), "mismatch"));
        return 0;
}

int kapi_tls_ctx_new(const struct kapi_config *cfg, struct kapi_tls_ctx **out,
                     struct diag *diag)
{
        char err[256];
        if (!ossl.handle)
                return diag_set(diag, -ELIBACC, "TLS: OpenSSL is not loaded");
        ossl.ERR_clear_error();
        struct kapi_tls_ctx *t = xcalloc(1, sizeof(*t));
        t->ctx = ossl.SSL_CTX_new(ossl.TLS_client_method());
        if (!t->ctx) {
                free(t);
                return diag_set(diag, -ENOMEM, "TLS: %s", ossl_error(err, sizeof(err), "no context"));
        }
        int r = ctx_setup(t, cfg, diag);
        ossl_trim();
        if (r < 0) {
                ossl.ERR_clear_error();
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
        ossl.SSL_CTX_free(t->ctx);
        free(t);
}

bool kapi_tls_ctx_stale(const struct kapi_tls_ctx *t, const struct kapi_config *cfg)
{
        return (!cfg->ca_data && cfg->ca_file && !fs_file_id_same(t->ca, fs_file_id_of(cfg->ca_file))) ||
               (!cfg->cert_data && cfg->cert_file &&
                !fs_file_id_same(t->cert, fs_file_id_of(cfg->cert_file))) ||
               (!cfg->key_data && cfg->key_file && !fs_file_id_same(t->key, fs_file_id_of(cfg->key_file)));
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
        ossl.ERR_clear_error();
        SSL *s = ossl.SSL_new(ctx->ctx);
        if (!s)
                return diag_set(diag, -ENOMEM, "TLS: %s", ossl_error(err, sizeof(err), "no memory"));
        struct kapi_tls *t = xcalloc(1, sizeof(*t));
        t->ssl = s;
        snprintf(t->host, sizeof(t->host), "%s", host);
        bool ok = ossl.SSL_set_fd(s, fd) == 1;
        if (ok && is_ip_literal(host)) {
                ok = ossl.X509_VERIFY_PARAM_set1_ip_asc(ossl.SSL_get0_param(s), host) == 1;
        } else if (ok) {
                ossl.SSL_set_hostflags(s, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                /* SSL_set_tlsext_host_name */
                ok = ossl.SSL_ctrl(s, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                                  t->host) == 1 &&
                     ossl.SSL_set1_host(s, host) == 1;
        }
        if (!ok) {
                diag_set(diag, -EINVAL, "TLS: server %s: %s", host,
                         ossl_error(err, sizeof(err), "cannot be checked"));
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
        ossl_note_use();
        ossl.SSL_free(t->ssl);
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
        switch (ossl.SSL_get_error(t->ssl, n)) {
        case SSL_ERROR_WANT_READ:
                *want = POLLIN;
                return -EAGAIN;
        case SSL_ERROR_WANT_WRITE:
                *want = POLLOUT;
                return -EAGAIN;
        case SSL_ERROR_ZERO_RETURN:
                ossl.ERR_clear_error();
                return 0;
        case SSL_ERROR_SYSCALL: {
                int e = errno;
                const char *why = ossl_error(err, sizeof(err), NULL);
                return diag_set(diag, r_fail, "TLS %s %s: %s", doing, t->host,
                                why ? why : e ? strerror(e) : "the connection closed");
        }
        default:
                return diag_set(diag, r_fail, "TLS %s %s: %s", doing, t->host,
                                ossl_error(err, sizeof(err), "failed"));
        }
}

int kapi_tls_handshake(struct kapi_tls *t, short *want, struct diag *diag)
{
        char err[256];
        ossl.ERR_clear_error();
        ossl_note_use();
        int n = ossl.SSL_connect(t->ssl);
        if (n == 1) {
                ossl_trim();
                return 0;
        }
        long v = ossl.SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK && ossl.SSL_get_error(t->ssl, n) == SSL_ERROR_SSL) {
                /* the verdict says more than "certificate verify failed" alone */
                const char *e = ossl_error(err, sizeof(err), "certificate verify failed");
                const char *colon = strrchr(e, ':');
                return diag_set(diag, -ECONNABORTED, "TLS handshake with %s: %s: %s", t->host,
                                colon ? colon + 1 : e, ossl.X509_verify_cert_error_string(v));
        }
        ssize_t r = outcome(t, n, want, -ECONNABORTED, "handshake with", diag);
        if (r == 0)
                return diag_set(diag, -ECONNABORTED, "TLS handshake with %s: the connection closed",
                                t->host);
        return (int)r;
}

ssize_t kapi_tls_read(struct kapi_tls *t, void *buf, size_t len, short *want, struct diag *diag)
{
        ossl.ERR_clear_error();
        ossl_note_use();
        int n = ossl.SSL_read(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        return outcome(t, n, want, -ECONNRESET, "read from", diag);
}

ssize_t kapi_tls_write(struct kapi_tls *t, const void *buf, size_t len, short *want,
                       struct diag *diag)
{
        ossl.ERR_clear_error();
        ossl_note_use();
        int n = ossl.SSL_write(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        ssize_t r = outcome(t, n, want, -ECONNRESET, "write to", diag);
        return r == 0 ? diag_set(diag, -ECONNRESET, "TLS write to %s: the connection closed",
                                 t->host)
                      : r;
}

uint64_t kapi_tls_wire_bytes(const struct kapi_tls *t)
{
        return ossl.BIO_number_read(ossl.SSL_get_rbio(t->ssl)) +
               ossl.BIO_number_written(ossl.SSL_get_wbio(t->ssl));
}

bool kapi_tls_idle_ok(struct kapi_tls *t)
{
        if (ossl.SSL_pending(t->ssl) > 0)
                return false;
        /* a session ticket or a key update is consumed and leaves
         * WANT_READ; data, an alert or the end of the stream make the
         * connection unusable */
        char byte;
        short want = 0;
        return kapi_tls_read(t, &byte, 1, &want, NULL) == -EAGAIN && want == POLLIN;
}
