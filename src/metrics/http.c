/* The metrics endpoint on libmicrohttpd (see http.h).
 *
 * MHD runs its own polling thread (MHD_USE_INTERNAL_POLLING_THREAD); the
 * access handler runs there and does nothing but take references to the
 * store's latest snapshots and hand MHD an I/O vector over them, so a
 * scrape copies nothing and never waits for a collection.
 * Limits: 64 connections (16 per client address), 16 KiB of memory per
 * connection (headers beyond that are refused by MHD), 10 s idle timeout;
 * request bodies are never read.  MHD's own messages go to debug logging.
 * Never touches the loop or a device library. */
#include "metrics/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"

#define HTTP_CONNECTION_LIMIT 64
#define HTTP_PER_IP_LIMIT 16
#define HTTP_CONNECTION_MEMORY (16 * 1024)
#define HTTP_TIMEOUT_S 10

struct metrics_http {
        struct MHD_Daemon *mhd;
        struct metrics_store *store;
        uint64_t health_max_age_ms;
        uint16_t port;
};

int metrics_http_parse_address(const char *address, char **host, uint16_t *port)
{
        if (!address)
                return -EINVAL;
        const char *colon;
        _cleanup_free_ char *h = NULL;
        if (address[0] == '[') {
                const char *close = strchr(address, ']');
                if (!close || close[1] != ':' || close == address + 1)
                        return -EINVAL;
                h = xstrndup(address + 1, (size_t)(close - address - 1));
                colon = close + 1;
        } else {
                colon = strrchr(address, ':');
                if (!colon)
                        return -EINVAL;
                h = xstrndup(address, (size_t)(colon - address));
                if (strchr(h, ':')) /* a bare IPv6 address needs brackets */
                        return -EINVAL;
        }
        const char *p = colon + 1;
        if (!*p || strlen(p) > 5)
                return -EINVAL;
        unsigned long v = 0;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long)(*p - '0');
        }
        if (v > 65535)
                return -EINVAL;
        *host = TAKE_PTR(h);
        *port = (uint16_t)v;
        return 0;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text,
                                  const char *allow)
{
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text,
                                                                 MHD_RESPMEM_PERSISTENT);
        if (!r)
                return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        if (allow)
                MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
        enum MHD_Result ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ret;
}

/* The references a /metrics response holds until MHD is done sending. */
struct held_snaps {
        const struct metrics_snap *snaps[METRICS_SLOTS];
};

static void release_snaps(void *cls)
{
        struct held_snaps *held = cls;
        for (size_t i = 0; i < METRICS_SLOTS; i++)
                metrics_snap_unref(held->snaps[i]);
        free(held);
}

/* Sends the published snapshots themselves (an I/O vector over them, the
 * references dropped when MHD frees the response): no copy per scrape. */
static enum MHD_Result reply_metrics(struct metrics_http *h, struct MHD_Connection *c)
{
        struct held_snaps *held = xcalloc(1, sizeof(*held));
        metrics_store_get(h->store, held->snaps);
        size_t total = 0;
        for (size_t i = 0; i < METRICS_SLOTS; i++)
                total += held->snaps[i] ? held->snaps[i]->n_chunks : 0;
        _cleanup_free_ struct MHD_IoVec *iov = xcalloc(total + 1, sizeof(*iov));
        unsigned n = 0;
        for (size_t i = 0; i < METRICS_SLOTS; i++) {
                for (size_t k = 0; held->snaps[i] && k < held->snaps[i]->n_chunks; k++) {
                        const struct metrics_chunk *ch = &held->snaps[i]->chunks[k];
                        if (ch->len > 0)
                                iov[n++] = (struct MHD_IoVec){ ch->data, ch->len };
                }
        }
        /* MHD copies the vector itself, not the bytes it points at */
        struct MHD_Response *r = MHD_create_response_from_iovec(iov, n, release_snaps, held);
        if (!r) {
                release_snaps(held);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
        struct metrics_http *h = cls;
        bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
        bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        if (!get && !head)
                return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", "GET, HEAD");
        if (strcmp(url, "/metrics") == 0)
                return reply_metrics(h, c);
        if (strcmp(url, "/health") == 0) {
                if (metrics_store_healthy(h->store, h->health_max_age_ms))
                        return reply_text(c, MHD_HTTP_OK, "ok", NULL);
                return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "event loop stalled", NULL);
        }
        return reply_text(c, MHD_HTTP_NOT_FOUND, "not found; try /metrics\n", NULL);
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        if (!log_enabled(LOG_DEBUG))
                return;
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        size_t n = strlen(msg);
        while (n > 0 && msg[n - 1] == '\n')
                msg[--n] = '\0';
        log_debug("metrics", "http: %s", msg);
}

/* Resolves host (numeric or a name such as localhost) for binding. */
static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        char service[8];
        snprintf(service, sizeof(service), "%u", (unsigned)port);
        struct addrinfo *res = NULL;
        int r = getaddrinfo(host, service, &hints, &res);
        if (r != 0)
                return -EADDRNOTAVAIL;
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
        freeaddrinfo(res);
        return 0;
}

static struct MHD_Daemon *start_mhd(struct metrics_http *h, unsigned flags,
                                    const struct sockaddr *sa)
{
        flags |= MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
        return MHD_start_daemon(flags, h->port, NULL, NULL, on_request, h,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTION_LIMIT,
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_IP_LIMIT,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
                                MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                sa ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, sa, MHD_OPTION_END);
}

int metrics_http_start(const char *address, struct metrics_store *store,
                       uint64_t health_max_age_ms, struct metrics_http **out, char **err)
{
        _cleanup_free_ char *host = NULL;
        uint16_t port;
        if (metrics_http_parse_address(address, &host, &port) < 0) {
                *err = xasprintf("invalid metrics address \"%s\": want [host]:port", address);
                return -EINVAL;
        }
        struct metrics_http *h = xcalloc(1, sizeof(*h));
        h->store = store;
        h->health_max_age_ms = health_max_age_ms;
        h->port = port;
        int saved = 0;
        if (!*host) {
                /* every address: IPv6 dual stack, or IPv4 where IPv6 is off */
                h->mhd = start_mhd(h, MHD_USE_DUAL_STACK, NULL);
                saved = errno;
                if (!h->mhd) {
                        h->mhd = start_mhd(h, 0, NULL);
                        saved = errno;
                }
        } else {
                struct sockaddr_storage ss;
                socklen_t len;
                int r = resolve(host, port, &ss, &len);
                if (r < 0) {
                        free(h);
                        *err = xasprintf("cannot resolve metrics address \"%s\"", address);
                        return r;
                }
                h->mhd = start_mhd(h, ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0,
                                   (const struct sockaddr *)&ss);
                saved = errno;
        }
        if (!h->mhd) {
                free(h);
                if (saved == 0)
                        saved = EADDRINUSE;
                *err = xasprintf("cannot listen on %s: %s", address, strerror(saved));
                return -saved;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
        if (info)
                h->port = info->port;
        *out = h;
        return 0;
}

uint16_t metrics_http_port(const struct metrics_http *h)
{
        return h->port;
}

void metrics_http_stop(struct metrics_http *h)
{
        if (!h)
                return;
        MHD_stop_daemon(h->mhd);
        free(h);
}
