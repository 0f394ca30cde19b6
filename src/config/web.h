/* The web configuration file (`--web-config-file`, dcgm-exporter's
 * DCGM_EXPORTER_WEB_CONFIG_FILE): the Prometheus exporter-toolkit's format,
 * which turns on TLS, client certificates, extra response headers and
 * basic authentication on the metrics endpoint.  Part of the
 * configuration: config_load reads it with the rest, so a broken file is a
 * config error (exit 2 at start-up with file:line:column, the running
 * config kept on a reload).  A key the format does not have is an error,
 * as exporter-toolkit's strict YAML decoding makes it.
 *
 *   tls_server_config:   cert_file/cert, key_file/key (a file or inline
 *                        PEM, one of the two), client_auth_type,
 *                        client_ca_file/client_ca, client_allowed_sans,
 *                        min_version/max_version (TLS10..TLS13),
 *                        cipher_suites (Go's names, TLS 1.2 and below),
 *                        prefer_server_cipher_suites, curve_preferences
 *   http_server_config:  headers (the five exporter-toolkit allows),
 *                        http2 (accepted; devlet speaks HTTP/1.1 only)
 *   basic_auth_users:    user: bcrypt hash ($2a$, $2b$ or $2y$)
 *   rate_limit:          interval, burst (accepted and ignored, with a
 *                        warning)
 *
 * The TLS settings are checked for form here; the files they name are read
 * by the endpoint (metrics/web-tls.c).  Pure apart from reading the file;
 * never logs. */
#ifndef DEVLET_CONFIG_WEB_H
#define DEVLET_CONFIG_WEB_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"

/* Go's tls.ClientAuthType, by exporter-toolkit's names. */
enum config_web_client_auth {
        CONFIG_WEB_NO_CLIENT_CERT,             /* NoClientCert (the default) */
        CONFIG_WEB_REQUEST_CLIENT_CERT,        /* RequestClientCert: asked, never checked */
        CONFIG_WEB_REQUIRE_ANY_CLIENT_CERT,    /* RequireAnyClientCert: required, not checked */
        CONFIG_WEB_VERIFY_CLIENT_CERT_IF_GIVEN, /* VerifyClientCertIfGiven */
        CONFIG_WEB_REQUIRE_AND_VERIFY_CLIENT_CERT, /* RequireAndVerifyClientCert */
};

struct config_web_header {
        char *name, *value;
};

struct config_web_user {
        char *name, *hash; /* hash: bcrypt's "$2b$10$..." */
};

struct config_web {
        char *file; /* the path it was read from, for messages */
        /* TLS: on when tls_server_config names a certificate */
        bool tls;
        char *cert_file, *cert; /* one of the two (the other NULL) */
        char *key_file, *key;
        char *client_ca_file, *client_ca; /* at most one */
        enum config_web_client_auth client_auth;
        char **client_allowed_sans; /* NULL: any */
        int min_version, max_version; /* OpenSSL's TLS1_2_VERSION...: 0x0301..0x0304 */
        char *ciphers; /* OpenSSL's cipher list ("ECDHE-RSA-AES128-GCM-SHA256:..."); NULL: default */
        bool prefer_server_ciphers;
        char *groups; /* OpenSSL's group list ("P-256:X25519"); NULL: default */
        /* responses */
        struct config_web_header *headers;
        size_t n_headers;
        /* basic authentication: none when n_users is 0 */
        struct config_web_user *users;
        size_t n_users;
};

/* Reads and parses the file at path (1 MiB at most).  Warnings (ignored
 * keys) are appended to *warnings.  Returns 0, *out and (text not NULL)
 * the file's text in *text, or -EINVAL with diag at the offending key,
 * -errno when the file cannot be read. */
int config_web_load(const char *path, struct config_web **out, char **text, char ***warnings,
                    struct diag *diag);
/* The same from text, file naming it in messages. */
int config_web_parse(const char *file, const char *data, size_t len, struct config_web **out,
                     char ***warnings, struct diag *diag);
void config_web_free(struct config_web *w);

#endif
