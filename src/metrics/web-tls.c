/* The metrics endpoint's TLS (see web-tls.h): one SSL_CTX built from the
 * web configuration, one SSL per connection between two memory BIOs.
 *
 * exporter-toolkit's client_auth_type maps onto OpenSSL's verify modes:
 * NoClientCert asks for nothing; RequestClientCert and
 * RequireAnyClientCert ask (the second fails without one) but accept any
 * certificate (a verify callback that says yes); VerifyClientCertIfGiven
 * and RequireAndVerifyClientCert verify against the client CA (the second
 * fails without one).  client_allowed_sans is checked once the handshake
 * is done: a DNS, e-mail, URI or IP SAN equal to one entry.  No session
 * tickets nor session cache (a scraper keeps its connection), no
 * renegotiation, no compression; idle connections give their buffers back
 * (SSL_MODE_RELEASE_BUFFERS).  After a context is built and after each
 * handshake ossl_trim() drops the library pages that step touched.  Never
 * logs. */
#include "metrics/web-tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/ossl.h"
#include "base/xalloc.h"


struct web_tls_server {
        SSL_CTX *ctx;
        struct config_web w; /* the TLS members only, owned */
        struct fs_file_id cert, key, ca; /* what ctx was built from */
        struct fs_file_id failed[3];     /* cert, key, ca of the last build that failed */
        bool has_failed;
};

struct web_tls {
        SSL *ssl;
        BIO *in, *out; /* owned by ssl */
        char **sans;   /* the server's, borrowed: the server outlives its connections */
        bool done;
};

/* RequestClientCert, RequireAnyClientCert: any certificate will do. */
static int accept_any(int ok, X509_STORE_CTX *store)
{
        return 1;
}

static int ctx_setup(SSL_CTX *ctx, const struct config_web *w, struct diag *diag)
{
        char err[256];
        ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, w->min_version, NULL);
        ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, w->max_version, NULL);
        ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, SSL_MODE_RELEASE_BUFFERS, NULL);
        ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_SESS_CACHE_MODE, SSL_SESS_CACHE_OFF, NULL);
        ossl.SSL_CTX_set_num_tickets(ctx, 0);
        ossl.SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                              SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                              (w->prefer_server_ciphers
                                                       ? SSL_OP_CIPHER_SERVER_PREFERENCE
                                                       : 0));
        ossl.SSL_CTX_set_default_passwd_cb(ctx, ossl_no_passphrase);
        if (w->ciphers && ossl.SSL_CTX_set_cipher_list(ctx, w->ciphers) != 1)
                return diag_set(diag, -EINVAL, "%s: cipher_suites: %s", w->file,
                                ossl_error(err, sizeof(err), "none usable"));
        if (w->groups &&
            ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_GROUPS_LIST, 0, (void *)(uintptr_t)w->groups) != 1)
                return diag_set(diag, -EINVAL, "%s: curve_preferences: %s", w->file,
                                ossl_error(err, sizeof(err), "none usable"));

        /* files through base/fs's reader: a FIFO in their place is an
         * error, never an open that blocks the endpoint's thread */
        int r;
        if (w->cert)
                r = ossl_add_pem_certs(ctx, w->cert, OSSL_PEM_CHAIN, "tls_server_config.cert", diag);
        else
                r = ossl_add_pem_cert_file(ctx, w->cert_file, OSSL_PEM_CHAIN, "cert_file", diag);
        if (r < 0)
                return diag_prefix(diag, r, "%s", w->file);
        if (w->key)
                r = ossl_use_pem_key(ctx, w->key, "tls_server_config.key", diag);
        else
                r = ossl_use_pem_key_file(ctx, w->key_file, "key_file", diag);
        if (r < 0)
                return diag_prefix(diag, r, "%s", w->file);
        if (ossl.SSL_CTX_check_private_key(ctx) != 1)
                return diag_set(diag, -EINVAL, "%s: the key does not match the certificate: %s",
                                w->file, ossl_error(err, sizeof(err), "mismatch"));

        /* the CAs' names go with the server's request for a certificate */
        r = 0;
        if (w->client_ca)
                r = ossl_add_pem_certs(ctx, w->client_ca, OSSL_PEM_CLIENT_CA,
                                       "tls_server_config.client_ca", diag);
        else if (w->client_ca_file)
                r = ossl_add_pem_cert_file(ctx, w->client_ca_file, OSSL_PEM_CLIENT_CA,
                                           "client_ca_file", diag);
        if (r < 0)
                return diag_prefix(diag, r, "%s", w->file);
        switch (w->client_auth) {
        case CONFIG_WEB_NO_CLIENT_CERT:
                ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
                break;
        case CONFIG_WEB_REQUEST_CLIENT_CERT:
                ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any);
                break;
        case CONFIG_WEB_REQUIRE_ANY_CLIENT_CERT:
                ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                                        accept_any);
                break;
        case CONFIG_WEB_VERIFY_CLIENT_CERT_IF_GIVEN:
                ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
                break;
        case CONFIG_WEB_REQUIRE_AND_VERIFY_CLIENT_CERT:
                ossl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                                        NULL);
                break;
        }
        return 0;
}

/* A new context from s->w, with the files' identities as they were just
 * before reading them (remembered as the ones that failed, on failure). */
static int ctx_build(struct web_tls_server *s, struct diag *diag)
{
        char err[256];
        struct fs_file_id cert = fs_file_id_of(s->w.cert_file), key = fs_file_id_of(s->w.key_file),
                       ca = fs_file_id_of(s->w.client_ca_file);
        s->failed[0] = cert;
        s->failed[1] = key;
        s->failed[2] = ca;
        s->has_failed = true;
        ossl.ERR_clear_error();
        SSL_CTX *ctx = ossl.SSL_CTX_new(ossl.TLS_server_method());
        if (!ctx)
                return diag_set(diag, -ENOMEM, "TLS: %s", ossl_error(err, sizeof(err), "no context"));
        int r = ctx_setup(ctx, &s->w, diag);
        ossl.ERR_clear_error();
        ossl_trim();
        if (r < 0) {
                ossl.SSL_CTX_free(ctx);
                return r;
        }
        if (s->ctx)
                ossl.SSL_CTX_free(s->ctx); /* connections keep their own reference */
        s->ctx = ctx;
        s->cert = cert;
        s->key = key;
        s->ca = ca;
        s->has_failed = false;
        return 0;
}

static char *dup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

int web_tls_server_new(const struct config_web *w, struct web_tls_server **out,
                       struct diag *diag)
{
        int r = ossl_load(diag);
        if (r < 0)
                return r;
        struct web_tls_server *s = xcalloc(1, sizeof(*s));
        s->w = (struct config_web){
                .file = xstrdup(w->file),
                .tls = true,
                .cert_file = dup_or_null(w->cert_file),
                .cert = dup_or_null(w->cert),
                .key_file = dup_or_null(w->key_file),
                .key = dup_or_null(w->key),
                .client_ca_file = dup_or_null(w->client_ca_file),
                .client_ca = dup_or_null(w->client_ca),
                .client_auth = w->client_auth,
                .client_allowed_sans = strv_copy((const char *const *)w->client_allowed_sans),
                .min_version = w->min_version,
                .max_version = w->max_version,
                .ciphers = dup_or_null(w->ciphers),
                .prefer_server_ciphers = w->prefer_server_ciphers,
                .groups = dup_or_null(w->groups),
        };
        r = ctx_build(s, diag);
        if (r < 0) {
                web_tls_server_free(s);
                return r;
        }
        *out = s;
        return 0;
}

void web_tls_server_free(struct web_tls_server *s)
{
        if (!s)
                return;
        if (s->ctx)
                ossl.SSL_CTX_free(s->ctx);
        free(s->w.file);
        free(s->w.cert_file);
        free(s->w.cert);
        free(s->w.key_file);
        if (s->w.key) {
                explicit_bzero(s->w.key, strlen(s->w.key));
                free(s->w.key);
        }
        free(s->w.client_ca_file);
        free(s->w.client_ca);
        strv_free(s->w.client_allowed_sans);
        free(s->w.ciphers);
        free(s->w.groups);
        free(s);
}

int web_tls_server_refresh(struct web_tls_server *s, struct diag *diag)
{
        struct fs_file_id now[3] = { fs_file_id_of(s->w.cert_file), fs_file_id_of(s->w.key_file),
                                     fs_file_id_of(s->w.client_ca_file) };
        const struct fs_file_id *built[3] = { &s->cert, &s->key, &s->ca };
        bool changed = false, same_failure = s->has_failed;
        for (size_t i = 0; i < 3; i++) {
                changed |= !fs_file_id_same(*built[i], now[i]);
                same_failure &= fs_file_id_same(s->failed[i], now[i]);
        }
        if (!changed || same_failure)
                return 0;
        int r = ctx_build(s, diag); /* a broken file keeps the previous context */
        return r < 0 ? r : 1;
}

int web_tls_new(struct web_tls_server *s, struct web_tls **out)
{
        ossl.ERR_clear_error();
        SSL *ssl = ossl.SSL_new(s->ctx);
        BIO *in = ossl.BIO_new(ossl.BIO_s_mem()), *out_bio = ossl.BIO_new(ossl.BIO_s_mem());
        if (!ssl || !in || !out_bio) {
                if (ssl)
                        ossl.SSL_free(ssl);
                if (in)
                        ossl.BIO_free(in);
                if (out_bio)
                        ossl.BIO_free(out_bio);
                ossl.ERR_clear_error();
                return -ENOMEM;
        }
        ossl.SSL_set_bio(ssl, in, out_bio); /* ssl owns both */
        ossl.SSL_set_accept_state(ssl);
        struct web_tls *t = xcalloc(1, sizeof(*t));
        t->ssl = ssl;
        t->in = in;
        t->out = out_bio;
        t->sans = s->w.client_allowed_sans;
        *out = t;
        return 0;
}

void web_tls_free(struct web_tls *t)
{
        if (!t)
                return;
        ossl.SSL_free(t->ssl);
        free(t);
        ossl_trim(); /* the record layer's code, until the next connection */
}

size_t web_tls_input_pending(const struct web_tls *t)
{
        return ossl.BIO_ctrl_pending(t->in);
}

int web_tls_feed(struct web_tls *t, const char *data, size_t len)
{
        while (len) {
                int chunk = len > INT32_MAX ? INT32_MAX : (int)len;
                int n = ossl.BIO_write(t->in, data, chunk);
                if (n <= 0) {
                        ossl.ERR_clear_error();
                        return -ENOMEM;
                }
                data += n;
                len -= (size_t)n;
        }
        return 0;
}

static bool san_allowed(const GENERAL_NAME *g, char *const *allowed)
{
        const ASN1_STRING *v;
        switch (g->type) {
        case GEN_DNS: v = g->d.dNSName; break;
        case GEN_EMAIL: v = g->d.rfc822Name; break;
        case GEN_URI: v = g->d.uniformResourceIdentifier; break;
        case GEN_IPADD: v = g->d.iPAddress; break;
        default: return false;
        }
        const unsigned char *data = ossl.ASN1_STRING_get0_data(v);
        int len = ossl.ASN1_STRING_length(v);
        for (size_t i = 0; allowed[i]; i++) {
                if (g->type == GEN_IPADD) {
                        unsigned char ip[16];
                        if ((len == 4 && inet_pton(AF_INET, allowed[i], ip) == 1 &&
                             memcmp(ip, data, 4) == 0) ||
                            (len == 16 && inet_pton(AF_INET6, allowed[i], ip) == 1 &&
                             memcmp(ip, data, 16) == 0))
                                return true;
                } else if (strlen(allowed[i]) == (size_t)len &&
                           memcmp(allowed[i], data, (size_t)len) == 0) {
                        return true;
                }
        }
        return false;
}

/* client_allowed_sans: the peer's certificate has one of them. */
static bool sans_ok(struct web_tls *t)
{
        if (!t->sans)
                return true;
        X509 *peer = ossl.SSL_get0_peer_certificate(t->ssl);
        if (!peer)
                return false;
        GENERAL_NAMES *names = ossl.X509_get_ext_d2i(peer, NID_subject_alt_name, NULL, NULL);
        bool ok = false;
        int n = names ? ossl.OPENSSL_sk_num((const OPENSSL_STACK *)names) : 0;
        for (int i = 0; i < n && !ok; i++)
                ok = san_allowed(ossl.OPENSSL_sk_value((const OPENSSL_STACK *)names, i), t->sans);
        if (names)
                ossl.GENERAL_NAMES_free(names);
        ossl.ERR_clear_error();
        return ok;
}

int web_tls_handshake(struct web_tls *t, struct diag *diag)
{
        char err[256];
        if (t->done)
                return 1;
        ossl.ERR_clear_error();
        ossl_note_use();
        int n = ossl.SSL_do_handshake(t->ssl);
        if (n == 1) {
                ossl_trim();
                if (!sans_ok(t))
                        return diag_set(diag, -ECONNABORTED,
                                        "TLS handshake: the client certificate has none of "
                                        "client_allowed_sans");
                t->done = true;
                return 1;
        }
        int e = ossl.SSL_get_error(t->ssl, n);
        if (e == SSL_ERROR_WANT_READ)
                return 0;
        long v = ossl.SSL_get_verify_result(t->ssl);
        const char *why = ossl_error(err, sizeof(err), "the connection closed");
        if (v != X509_V_OK)
                return diag_set(diag, -ECONNABORTED, "TLS handshake: %s: %s", why,
                                ossl.X509_verify_cert_error_string(v));
        return diag_set(diag, -ECONNABORTED, "TLS handshake: %s", why);
}

ssize_t web_tls_read(struct web_tls *t, char *buf, size_t len)
{
        ossl.ERR_clear_error();
        ossl_note_use();
        int n = ossl.SSL_read(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        if (n > 0)
                return n;
        int e = ossl.SSL_get_error(t->ssl, n);
        ossl.ERR_clear_error();
        return e == SSL_ERROR_WANT_READ ? 0 : -ECONNRESET;
}

int web_tls_write(struct web_tls *t, const char *buf, size_t len)
{
        ossl.ERR_clear_error();
        ossl_note_use();
        while (len) {
                int n = ossl.SSL_write(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
                if (n <= 0) {
                        ossl.ERR_clear_error();
                        return -EIO;
                }
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

void web_tls_close_notify(struct web_tls *t)
{
        ossl.SSL_shutdown(t->ssl);
        ossl.ERR_clear_error();
}

size_t web_tls_take_output(struct web_tls *t, char **out)
{
        size_t n = ossl.BIO_ctrl_pending(t->out);
        if (!n)
                return 0;
        char *buf = xmalloc(n);
        int got = ossl.BIO_read(t->out, buf, n > INT32_MAX ? INT32_MAX : (int)n);
        if (got <= 0) {
                free(buf);
                return 0;
        }
        *out = buf;
        return (size_t)got;
}
