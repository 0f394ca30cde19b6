/* The metrics HTTP endpoint: HTTP/1.1 on a libuv loop run by a thread of
 * its own.
 *
 *   GET /metrics  the latest snapshots of the store, concatenated
 *                 (Content-Type: text/plain; version=0.0.4; charset=utf-8)
 *   GET /health   200 "ok" while the loop's heartbeat is fresh, else 503
 *   GET /ready    200 "ok" while also every resource is registered with the
 *                 kubelet, or registration is off (metrics_store_ready),
 *                 else 503
 *   other paths   404;  methods other than GET and HEAD: 405
 *
 * A request only sends published text: it never samples, never reads
 * /proc, never waits for a collection.  Connections, their memory and the
 * time a request or a response may take are bounded, and a new connection
 * always gets in (see http.c). */
#ifndef DEVLET_METRICS_HTTP_H
#define DEVLET_METRICS_HTTP_H

#include <stdint.h>

#include "base/diag.h"
#include "config/web.h"
#include "metrics/store.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Splits "[host]:port" ("":9400" = every address, "127.0.0.1:9400",
 * "[::1]:9400", "localhost:9400").  *host is a heap string ("" for every
 * address).  Returns 0 or -EINVAL. */
int metrics_http_parse_address(const char *address, char **host, uint16_t *port);

struct metrics_http;

/* Listens on address (port 0 picks a free port, see metrics_http_port) and
 * serves store.  /health answers 503 once the heartbeat is older than
 * health_max_age_ms.  web (NULL: none) turns on TLS, basic authentication
 * on every path (401 with WWW-Authenticate: Basic without the right
 * credentials) and extra response headers; it is copied from.  Returns 0,
 * or -errno with diag saying why (-EINVAL or -ELIBACC: the certificate,
 * its key or OpenSSL is unusable). */
int metrics_http_start(const char *address, const struct config_web *web,
                       struct metrics_store *store, uint64_t health_max_age_ms,
                       struct metrics_http **out, struct diag *diag);
/* The port actually bound. */
uint16_t metrics_http_port(const struct metrics_http *h);
/* Stops the server thread and closes every connection. Safe with NULL. */
void metrics_http_stop(struct metrics_http *h);

#endif
