/* Internal to kapi/: TLS for the API client, on OpenSSL 3 as base/ossl.h
 * loads it with dlopen on first use (libssl.so.3, then libssl.so;
 * libcrypto comes with it), so a daemon that never talks to an API server
 * over TLS never maps it.  Client side only: TLS 1.2 or later, the peer's certificate and
 * name (or IP address) verified unless insecure, SNI for names, a client
 * certificate and key from files or PEM text.  Connections run on
 * non-blocking sockets: every step says which poll event it waits for.
 * The libraries' read-only pages are unmapped after their one-time set-up
 * and after each handshake (ossl_trim).  Never logs. */
#ifndef DEVLET_KAPI_TLS_H
#define DEVLET_KAPI_TLS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/diag.h"
#include "base/ossl.h"
#include "kapi/kapi.h"

/* The library to load instead of libssl.so.3: for tests and debugging. */
#define KAPI_TLS_LIB_ENV OSSL_LIB_ENV

/* Loads and initialises OpenSSL, once per process (later calls return the
 * first one's outcome).  Returns 0, or -ELIBACC with diag ("TLS: cannot
 * load libssl.so.3: ..."; a library that lacks a symbol or is older than
 * OpenSSL 3 is named too). */
int kapi_tls_load(struct diag *diag);

/* An SSL_CTX built from a kapi_config's TLS settings, and what its files
 * were when it was read. */
struct kapi_tls_ctx;

/* Reads the CA, the client certificate and its key (files or PEM text; a
 * file through base/fs's reader, never blocking).  kapi_tls_load must have
 * succeeded.  Returns 0 and *out, or -EINVAL (also a FIFO or device in a
 * file's place), -EISDIR, -EFBIG (over OSSL_PEM_FILE_MAX), -ENOENT or
 * another -errno, with diag naming the file or field that is unusable. */
int kapi_tls_ctx_new(const struct kapi_config *cfg, struct kapi_tls_ctx **out,
                     struct diag *diag);
void kapi_tls_ctx_free(struct kapi_tls_ctx *ctx);
/* Whether one of the files ctx was read from changed since (device,
 * inode, size or modification time), as a rotated client certificate
 * does: the caller then builds a new one. */
bool kapi_tls_ctx_stale(const struct kapi_tls_ctx *ctx, const struct kapi_config *cfg);

/* One connection's TLS state over a connected non-blocking socket. */
struct kapi_tls;

/* host: the server's name (sent as SNI and checked against the
 * certificate) or IP address (checked against its IP SANs).  Returns 0 and
 * *out, or -ENOMEM/-EINVAL with diag.  The connection keeps its own
 * reference to ctx. */
int kapi_tls_new(struct kapi_tls_ctx *ctx, int fd, const char *host, struct kapi_tls **out,
                 struct diag *diag);
void kapi_tls_free(struct kapi_tls *t);

/* One step of the handshake.  Returns 0 when it is done, -EAGAIN with
 * *want (POLLIN or POLLOUT) to wait for, or -ECONNABORTED with diag (the
 * certificate's verdict, e.g. "certificate verify failed: unable to get
 * local issuer certificate"). */
int kapi_tls_handshake(struct kapi_tls *t, short *want, struct diag *diag);
/* Reads up to len bytes: returns how many (> 0), 0 at the end of the
 * stream (close_notify, or the peer closing without one: the HTTP framing
 * decides whether that is a cut), -EAGAIN with *want, or -ECONNRESET with
 * diag. */
ssize_t kapi_tls_read(struct kapi_tls *t, void *buf, size_t len, short *want,
                      struct diag *diag);
/* Writes up to len bytes (partial writes happen): the same returns. */
ssize_t kapi_tls_write(struct kapi_tls *t, const void *buf, size_t len, short *want,
                       struct diag *diag);
/* Bytes read and written on the socket so far, TLS records included: the
 * low-speed limit counts these, not only the decrypted ones. */
uint64_t kapi_tls_wire_bytes(const struct kapi_tls *t);
/* For a pooled connection: whether it is still usable, that is, nothing
 * but TLS housekeeping (session tickets) came since the last response, and
 * the peer has not closed it. */
bool kapi_tls_idle_ok(struct kapi_tls *t);

#endif
