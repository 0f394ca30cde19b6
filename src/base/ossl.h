/* OpenSSL 3, loaded with dlopen on first use: the one TLS library of the
 * whole daemon, shared by the API client (kapi/tls.c) and the metrics
 * endpoint (metrics/web-tls.c), so that a daemon that never needs TLS never
 * maps it.  Knows nothing of devlet.
 *
 * OSSL_SYMBOLS is the one list of every OpenSSL function devlet calls;
 * each is a field of `ossl`, typed with __typeof__ of the prototype in
 * OpenSSL's own headers (included for types and constants only: nothing
 * links against libssl), so every call is checked by the compiler.
 * OpenSSL's function-like macros (SSL_CTX_set_min_proto_version,
 * SSL_set_tlsext_host_name, SSL_CTX_add0_chain_cert, SSL_CTX_set_mode,
 * SSL_CTX_set1_groups_list, sk_*_num/value) are spelled out as the calls
 * they expand to.  The fields are set once by ossl_load and only read
 * afterwards, from any thread.
 *
 * OpenSSL never opens a file here: its *_file and load_verify_locations
 * calls open with a blocking fopen, which a FIFO put in a certificate's
 * place would hang for ever (with whatever lock the caller holds).  PEM
 * files are read by base/fs's reader (non-blocking, regular files only,
 * bounded) and parsed from memory.  Never logs. */
#ifndef DEVLET_BASE_OSSL_H
#define DEVLET_BASE_OSSL_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/diag.h"

/* The library to load instead of libssl.so.3: for tests and debugging. */
#define OSSL_LIB_ENV "DEVLET_LIBSSL"

#define OSSL_SYMBOLS(X)                     \
        X(OpenSSL_version_num)              \
        X(OpenSSL_version)                  \
        X(OPENSSL_init_ssl)                 \
        X(OPENSSL_sk_num)                   \
        X(OPENSSL_sk_value)                 \
        X(ERR_get_error)                    \
        X(ERR_peek_last_error)              \
        X(ERR_clear_error)                  \
        X(ERR_error_string_n)               \
        X(TLS_client_method)                \
        X(TLS_server_method)                \
        X(SSL_CTX_new)                      \
        X(SSL_CTX_free)                     \
        X(SSL_CTX_up_ref)                   \
        X(SSL_CTX_ctrl)                     \
        X(SSL_CTX_set_options)              \
        X(SSL_CTX_set_verify)               \
        X(SSL_CTX_set_cipher_list)          \
        X(SSL_CTX_set_num_tickets)          \
        X(SSL_CTX_add_client_CA)            \
        X(SSL_CTX_set_default_passwd_cb)    \
        X(SSL_CTX_get_cert_store)           \
        X(SSL_CTX_use_certificate)          \
        X(SSL_CTX_use_PrivateKey)           \
        X(SSL_CTX_check_private_key)        \
        X(X509_STORE_add_cert)              \
        X(X509_STORE_load_path)             \
        X(X509_get_default_cert_file)       \
        X(X509_get_default_cert_file_env)   \
        X(X509_get_default_cert_dir)        \
        X(X509_get_default_cert_dir_env)    \
        X(X509_free)                        \
        X(X509_get_ext_d2i)                 \
        X(X509_verify_cert_error_string)    \
        X(X509_VERIFY_PARAM_set1_ip_asc)    \
        X(GENERAL_NAMES_free)               \
        X(ASN1_STRING_get0_data)            \
        X(ASN1_STRING_length)               \
        X(EVP_PKEY_free)                    \
        X(BIO_new)                          \
        X(BIO_s_mem)                        \
        X(BIO_read)                         \
        X(BIO_write)                        \
        X(BIO_ctrl_pending)                 \
        X(BIO_new_mem_buf)                  \
        X(BIO_free)                         \
        X(BIO_number_read)                  \
        X(BIO_number_written)               \
        X(PEM_read_bio_X509)                \
        X(PEM_read_bio_PrivateKey)          \
        X(SSL_new)                          \
        X(SSL_free)                         \
        X(SSL_set_fd)                       \
        X(SSL_set_bio)                      \
        X(SSL_set_accept_state)             \
        X(SSL_do_handshake)                 \
        X(SSL_is_init_finished)             \
        X(SSL_shutdown)                     \
        X(SSL_ctrl)                         \
        X(SSL_set1_host)                    \
        X(SSL_set_hostflags)                \
        X(SSL_get0_param)                   \
        X(SSL_get0_peer_certificate)        \
        X(SSL_get_rbio)                     \
        X(SSL_get_wbio)                     \
        X(SSL_connect)                      \
        X(SSL_read)                         \
        X(SSL_write)                        \
        X(SSL_pending)                      \
        X(SSL_get_error)                    \
        X(SSL_get_verify_result)

#define OSSL_FIELD(name) __typeof__(&name) name;
struct ossl_lib {
        void *handle; /* NULL until ossl_load succeeded */
        OSSL_SYMBOLS(OSSL_FIELD)
};
#undef OSSL_FIELD

/* The loaded library's functions; valid once ossl_load returned 0. */
extern struct ossl_lib ossl;

/* Loads and initialises OpenSSL (libssl.so.3, then libssl.so, or
 * $DEVLET_LIBSSL), once per process: later calls return the first one's
 * outcome.  OpenSSL's configuration file is not read.  Returns 0, or
 * -ELIBACC with diag ("TLS: cannot load libssl.so.3: ..."; a library that
 * lacks a symbol or is older than OpenSSL 3 is named too). */
int ossl_load(struct diag *diag);

/* Unmaps the pages of libssl's and libcrypto's read-only segments that are
 * mapped now (MADV_DONTNEED: they stay in the page cache and come back on
 * first use).  OpenSSL runs code from all over libcrypto once to set up
 * and for each context and handshake, and the kernel maps the 64 KiB around
 * every page faulted in: some 3 MB of clean pages that reading and writing
 * records never touch.  Call after such a step.  Does nothing before a
 * load, nor to a library with text relocations; writable segments are
 * never touched. */
void ossl_trim(void);

/* Counts one use of the libraries: a TLS read, write, handshake or free.
 * Any thread; an atomic increment, nothing more. */
void ossl_note_use(void);

/* The idle trim, for one owner to call at a steady pace (each second):
 * ossl_trim() once, at the first call that finds no use since the call
 * before while some came before that, so the record layer's pages (a
 * watch's reads, a call's round trip) go 1 to 2 paces after the last use
 * instead of staying until the next handshake.  Returns whether it
 * trimmed.  One thread only. */
bool ossl_trim_idle(void);

/* The latest OpenSSL error of this thread as text (its queue cleared), or
 * fallback when there is none. */
const char *ossl_error(char *buf, size_t size, const char *fallback);

/* A PEM passphrase callback that refuses: an encrypted key is refused, not
 * prompted for on a terminal. */
int ossl_no_passphrase(char *buf, int size, int rwflag, void *ud);

/* What PEM certificates are for. */
enum ossl_pem_use {
        OSSL_PEM_TRUST,     /* CAs the peer's certificate is verified against */
        OSSL_PEM_CLIENT_CA, /* the same, their names sent when asking for a client certificate */
        OSSL_PEM_CHAIN,     /* ctx's own certificate, then the rest of its chain */
};

/* Adds the PEM certificates in text (at least one) to ctx, for use.  what
 * names the source in diag.  Returns 0, -ENOMEM or -EINVAL with diag. */
int ossl_add_pem_certs(SSL_CTX *ctx, const char *text, enum ossl_pem_use use, const char *what,
                       struct diag *diag);
/* Uses the PEM private key in text as ctx's.  Returns 0 or -EINVAL/-ENOMEM
 * with diag. */
int ossl_use_pem_key(SSL_CTX *ctx, const char *text, const char *what, struct diag *diag);

/* The largest PEM file read (a system CA bundle is some 200 KiB). */
#define OSSL_PEM_FILE_MAX (4u << 20)

/* ossl_add_pem_certs and ossl_use_pem_key on the content of the file path,
 * read with fs_read_file (O_NONBLOCK, a regular file only, at most
 * OSSL_PEM_FILE_MAX bytes; a key's copy is wiped after use).  Returns 0,
 * -EINVAL for a FIFO, socket or device ("not a regular file"), -EISDIR,
 * -EFBIG, -errno, or their errors, with diag "<what> <path>: <why>". */
int ossl_add_pem_cert_file(SSL_CTX *ctx, const char *path, enum ossl_pem_use use,
                           const char *what, struct diag *diag);
int ossl_use_pem_key_file(SSL_CTX *ctx, const char *path, const char *what, struct diag *diag);

/* Trusts the system's CAs, as SSL_CTX_set_default_verify_paths would: the
 * bundle ($SSL_CERT_FILE or OpenSSL's default) read as above, a missing one
 * skipped, and the hashed directory ($SSL_CERT_DIR or the default) looked
 * up during verification.  Returns 0 or the errors above. */
int ossl_use_system_cas(SSL_CTX *ctx, struct diag *diag);

#endif
