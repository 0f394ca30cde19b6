/* TLS for the metrics endpoint, server side, on OpenSSL as base/ossl.h
 * loads it (only when a web configuration turns TLS on).  The endpoint's
 * loop owns the socket; OpenSSL only ever sees memory: the bytes read are
 * fed in (web_tls_feed), the bytes to send are taken out
 * (web_tls_take_output), so no call blocks or touches a file descriptor.
 *
 * The certificate, its key and the client CA are files (or inline PEM),
 * read by base/fs's reader (never blocking: a FIFO in their place is an
 * error) and parsed from memory; when one of the files changes (device,
 * inode, size or modification time, looked at for each new connection:
 * web_tls_server_refresh) the next connection gets a context built afresh,
 * as exporter-toolkit reads them per handshake; a file that fails to load
 * then keeps the previous context, and is tried again only once it changes
 * again.  Not thread-safe: everything here belongs to the endpoint's
 * thread.  Never logs. */
#ifndef DEVLET_METRICS_WEB_TLS_H
#define DEVLET_METRICS_WEB_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/diag.h"
#include "config/web.h"

/* ciphertext buffered from the peer at most: the endpoint reads the socket
 * only while there is room */
#define WEB_TLS_INPUT_MAX (64 * 1024)

struct web_tls_server;

/* Loads OpenSSL and builds the context from w (w->tls must be true; w is
 * copied from).  Returns 0 and *out, -ELIBACC (no usable OpenSSL), or
 * -EINVAL (also a FIFO or device in a file's place), -EISDIR, -EFBIG or
 * another -errno of reading a file, with diag naming the file or setting
 * that is unusable. */
int web_tls_server_new(const struct config_web *w, struct web_tls_server **out,
                       struct diag *diag);
void web_tls_server_free(struct web_tls_server *s);

/* One connection's TLS state. */
struct web_tls;

/* Builds the context again if one of its files changed since it was built
 * and since the last attempt that failed.  Returns 1 when it did, 0 when
 * there was nothing to do, or the error web_tls_server_new would return,
 * with diag, once per change: the previous context stays in use. */
int web_tls_server_refresh(struct web_tls_server *s, struct diag *diag);

/* A new connection on the current context.  Returns 0 and *out, or
 * -ENOMEM. */
int web_tls_new(struct web_tls_server *s, struct web_tls **out);
void web_tls_free(struct web_tls *t);

/* How much ciphertext is buffered and not yet processed. */
size_t web_tls_input_pending(const struct web_tls *t);
/* Buffers len bytes from the socket (the caller keeps within
 * WEB_TLS_INPUT_MAX).  Returns 0 or -ENOMEM. */
int web_tls_feed(struct web_tls *t, const char *data, size_t len);
/* Advances the handshake with what is buffered: 1 when it is done
 * (client_allowed_sans checked), 0 when it waits for more, -ECONNABORTED
 * with diag saying why (an alert for the peer may wait in the output). */
int web_tls_handshake(struct web_tls *t, struct diag *diag);
/* Decrypted bytes into buf: how many (> 0), 0 when none is ready,
 * -ECONNRESET when the peer closed or broke the stream. */
ssize_t web_tls_read(struct web_tls *t, char *buf, size_t len);
/* Encrypts len bytes into the output.  Returns 0 or -EIO. */
int web_tls_write(struct web_tls *t, const char *buf, size_t len);
/* Queues close_notify. */
void web_tls_close_notify(struct web_tls *t);
/* Moves the ciphertext waiting to be sent into a new heap buffer *out:
 * returns its length (0: nothing, *out untouched). */
size_t web_tls_take_output(struct web_tls *t, char **out);

#endif
