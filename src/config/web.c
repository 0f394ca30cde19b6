/* The web configuration file (see web.h): read into config/'s YAML tree,
 * so errors carry file:line:column, then walked key by key.  Every mapping
 * is checked for keys the format does not have before any is read.  Go's
 * cipher suite and curve names are turned into OpenSSL's here, from two
 * tables, so that a name OpenSSL would not know is an error at its
 * position.  Pure apart from the one read; never logs. */
#include "config/web.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "config/tree.h"
#include "config/walk.h"

#define WEB_CONFIG_MAX (1024 * 1024)

/* Go's crypto/tls names (tls.CipherSuites(): the secure ones) and
 * OpenSSL's.  TLS 1.3's suites cannot be chosen, in Go as here: NULL. */
static const struct {
        const char *go, *openssl;
} ciphers[] = {
        { "TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA" },
        { "TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA" },
        { "TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256" },
        { "TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384" },
        { "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA" },
        { "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA" },
        { "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA" },
        { "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA" },
        { "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256" },
        { "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256" },
        { "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256" },
        { "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256" },
        { "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384" },
        { "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384" },
        { "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305" },
        { "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305" },
        { "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305" },
        { "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305" },
        { "TLS_AES_128_GCM_SHA256", NULL },
        { "TLS_AES_256_GCM_SHA384", NULL },
        { "TLS_CHACHA20_POLY1305_SHA256", NULL },
};

static const struct {
        const char *go, *openssl;
} curves[] = {
        { "CurveP256", "P-256" },
        { "CurveP384", "P-384" },
        { "CurveP521", "P-521" },
        { "X25519", "X25519" },
};

static const struct {
        const char *name;
        enum config_web_client_auth v;
} client_auths[] = {
        { "NoClientCert", CONFIG_WEB_NO_CLIENT_CERT },
        { "RequestClientCert", CONFIG_WEB_REQUEST_CLIENT_CERT },
        { "RequireAnyClientCert", CONFIG_WEB_REQUIRE_ANY_CLIENT_CERT },
        { "VerifyClientCertIfGiven", CONFIG_WEB_VERIFY_CLIENT_CERT_IF_GIVEN },
        { "RequireAndVerifyClientCert", CONFIG_WEB_REQUIRE_AND_VERIFY_CLIENT_CERT },
};

static const struct {
        const char *name;
        int v;
} versions[] = {
        { "TLS10", 0x0301 },
        { "TLS11", 0x0302 },
        { "TLS12", 0x0303 },
        { "TLS13", 0x0304 },
};

/* exporter-toolkit's headers, and the values it allows where it limits
 * them (NULL: any) */
static const struct {
        const char *name;
        const char *const *allowed;
} headers[] = {
        { "Content-Security-Policy", NULL },
        { "X-Frame-Options", (const char *const[]){ "deny", "sameorigin", NULL } },
        { "X-Content-Type-Options", (const char *const[]){ "nosniff", NULL } },
        { "X-XSS-Protection", NULL },
        { "Strict-Transport-Security", NULL },
};

struct web_parse {
        const char *file;
        struct diag *diag;
        char ***warnings;
        struct config_web *w;
};

static int err(struct web_parse *p, const struct config_node *n, const char *path,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int err(struct web_parse *p, const struct config_node *n, const char *path,
               const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return config_node_error(p->diag, p->file, n, path, "%s", msg);
}

/* n must be a mapping whose keys are all in known. */
static int expect_map(struct web_parse *p, const struct config_node *n, const char *path,
                      const char *const *known)
{
        if (n->kind != CONFIG_NODE_MAP)
                return err(p, n, path, "expected a mapping, found %s", config_node_kind_name(n));
        for (size_t i = 0; known && i < n->n_items; i += 2) {
                const struct config_node *k = n->items[i];
                bool ok = false;
                for (size_t j = 0; known[j] && !ok; j++)
                        ok = strcmp(k->text, known[j]) == 0;
                if (!ok)
                        return config_node_error(p->diag, p->file, k, path,
                                                 "unknown key \"%s\" (the web configuration "
                                                 "format has no such key)",
                                                 k->text);
        }
        return 0;
}

/* The node under key when it is of kind (what names it in the error), or
 * NULL when absent or null; path gets its dotted path for the caller. */
static int child(struct web_parse *p, const struct config_node *map, const char *key,
                 const char *parent, enum config_node_kind kind, const char *what,
                 const struct config_node **out, char path[CONFIG_PATH_MAX])
{
        const struct config_node *v = config_node_get(map, key);
        *out = NULL;
        if (!v || config_node_is_null(v))
                return 0;
        config_subpath(path, CONFIG_PATH_MAX, parent, ".%s", key);
        if (v->kind != kind)
                return err(p, v, path, "expected %s, found %s", what, config_node_kind_name(v));
        *out = v;
        return 0;
}

/* A scalar under key, or NULL when absent or null; non-scalars are errors. */
static int scalar(struct web_parse *p, const struct config_node *map, const char *key,
                  const char *parent, const struct config_node **out)
{
        char path[CONFIG_PATH_MAX];
        return child(p, map, key, parent, CONFIG_NODE_SCALAR, "a value", out, path);
}

/* A string under key into *out (a copy; "" counts as not given). */
static int string(struct web_parse *p, const struct config_node *map, const char *key,
                  const char *parent, char **out)
{
        const struct config_node *v;
        int r = scalar(p, map, key, parent, &v);
        if (r < 0)
                return r;
        if (v && v->text[0])
                *out = xstrdup(v->text);
        return 0;
}

static int list(struct web_parse *p, const struct config_node *map, const char *key,
                const char *parent, const struct config_node **out)
{
        char path[CONFIG_PATH_MAX];
        const struct config_node *v;
        int r = child(p, map, key, parent, CONFIG_NODE_SEQ, "a list", &v, path);
        if (r < 0 || !v)
                return r;
        for (size_t i = 0; i < v->n_items; i++)
                if (v->items[i]->kind != CONFIG_NODE_SCALAR)
                        return err(p, v->items[i], path, "expected a value, found %s",
                                   config_node_kind_name(v->items[i]));
        *out = v;
        return 0;
}

static int version(struct web_parse *p, const struct config_node *map, const char *key, int dflt,
                   int *out)
{
        const struct config_node *v;
        int r = scalar(p, map, key, "tls_server_config", &v);
        if (r < 0)
                return r;
        *out = dflt;
        if (!v)
                return 0;
        for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
                if (strcmp(v->text, versions[i].name) == 0) {
                        *out = versions[i].v;
                        return 0;
                }
        char path[CONFIG_PATH_MAX];
        config_subpath(path, sizeof(path), "tls_server_config", ".%s", key);
        return err(p, v, path, "unknown TLS version \"%s\" (want TLS10, TLS11, TLS12 or TLS13)",
                   v->text);
}

/* Appends item to the ':'-separated *joined unless it is there. */
static void join(char **joined, const char *item)
{
        if (*joined) {
                size_t n = strlen(item);
                for (const char *s = *joined; s; s = strchr(s, ':') ? strchr(s, ':') + 1 : NULL)
                        if (strncmp(s, item, n) == 0 && (s[n] == ':' || !s[n]))
                                return;
        }
        char *next = xasprintf("%s%s%s", *joined ? *joined : "", *joined ? ":" : "", item);
        free(*joined);
        *joined = next;
}

static int parse_tls(struct web_parse *p, const struct config_node *t)
{
        static const char *const known[] = { "cert", "key", "client_ca", "cert_file", "key_file",
                                             "client_auth_type", "client_ca_file",
                                             "client_allowed_sans", "min_version", "max_version",
                                             "cipher_suites", "prefer_server_cipher_suites",
                                             "curve_preferences", NULL };
        const char *P = "tls_server_config";
        struct config_web *w = p->w;
        int r = expect_map(p, t, P, known);
        if (r < 0)
                return r;
        if ((r = string(p, t, "cert_file", P, &w->cert_file)) < 0 ||
            (r = string(p, t, "cert", P, &w->cert)) < 0 ||
            (r = string(p, t, "key_file", P, &w->key_file)) < 0 ||
            (r = string(p, t, "key", P, &w->key)) < 0 ||
            (r = string(p, t, "client_ca_file", P, &w->client_ca_file)) < 0 ||
            (r = string(p, t, "client_ca", P, &w->client_ca)) < 0)
                return r;
        if (w->cert_file && w->cert)
                return err(p, config_node_get(t, "cert"), P, "%s",
                           "give cert_file or cert, not both");
        if (w->key_file && w->key)
                return err(p, config_node_get(t, "key"), P, "%s", "give key_file or key, not both");
        if (w->client_ca_file && w->client_ca)
                return err(p, config_node_get(t, "client_ca"), P, "%s",
                           "give client_ca_file or client_ca, not both");

        const struct config_node *v;
        if ((r = scalar(p, t, "client_auth_type", P, &v)) < 0)
                return r;
        bool auth_given = v != NULL;
        if (v) {
                size_t i = 0;
                while (i < ARRAY_SIZE(client_auths) && strcmp(v->text, client_auths[i].name) != 0)
                        i++;
                if (i == ARRAY_SIZE(client_auths))
                        return err(p, v, "tls_server_config.client_auth_type",
                                   "unknown client_auth_type \"%s\" (want NoClientCert, "
                                   "RequestClientCert, RequireAnyClientCert, "
                                   "VerifyClientCertIfGiven or RequireAndVerifyClientCert)",
                                   v->text);
                w->client_auth = client_auths[i].v;
        }
        if ((r = version(p, t, "min_version", 0x0303, &w->min_version)) < 0 ||
            (r = version(p, t, "max_version", 0x0304, &w->max_version)) < 0)
                return r;
        if (w->min_version > w->max_version)
                return err(p, config_node_get(t, "max_version"), "tls_server_config.max_version",
                           "%s", "lower than min_version");

        if ((r = list(p, t, "cipher_suites", P, &v)) < 0)
                return r;
        for (size_t i = 0; v && i < v->n_items; i++) {
                const struct config_node *c = v->items[i];
                size_t j = 0;
                while (j < ARRAY_SIZE(ciphers) && strcmp(c->text, ciphers[j].go) != 0)
                        j++;
                if (j == ARRAY_SIZE(ciphers))
                        return err(p, c, "tls_server_config.cipher_suites",
                                   "unknown cipher suite \"%s\" (Go's crypto/tls names, e.g. "
                                   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
                                   c->text);
                if (ciphers[j].openssl)
                        join(&w->ciphers, ciphers[j].openssl);
        }
        w->prefer_server_ciphers = true;
        if ((r = scalar(p, t, "prefer_server_cipher_suites", P, &v)) < 0)
                return r;
        if (v && config_parse_bool(v->text, &w->prefer_server_ciphers) < 0)
                return err(p, v, "tls_server_config.prefer_server_cipher_suites",
                           "expected true or false, found \"%s\"", v->text);
        if ((r = list(p, t, "curve_preferences", P, &v)) < 0)
                return r;
        for (size_t i = 0; v && i < v->n_items; i++) {
                const struct config_node *c = v->items[i];
                size_t j = 0;
                while (j < ARRAY_SIZE(curves) && strcmp(c->text, curves[j].go) != 0)
                        j++;
                if (j == ARRAY_SIZE(curves))
                        return err(p, c, "tls_server_config.curve_preferences",
                                   "unknown curve \"%s\" (want CurveP256, CurveP384, CurveP521 "
                                   "or X25519)",
                                   c->text);
                join(&w->groups, curves[j].openssl);
        }
        if ((r = list(p, t, "client_allowed_sans", P, &v)) < 0)
                return r;
        for (size_t i = 0; v && i < v->n_items; i++)
                w->client_allowed_sans = strv_push(w->client_allowed_sans, v->items[i]->text);

        /* exporter-toolkit's rules: nothing given is plain HTTP; anything
         * given needs a certificate and its key */
        bool any = w->cert_file || w->cert || w->key_file || w->key || w->client_ca_file ||
                   w->client_ca || auth_given;
        if (!any)
                return 0;
        if (!w->cert_file && !w->cert)
                return err(p, t, P, "%s", "cert_file (or cert) is required for TLS");
        if (!w->key_file && !w->key)
                return err(p, t, P, "%s", "key_file (or key) is required for TLS");
        bool verify = w->client_auth == CONFIG_WEB_VERIFY_CLIENT_CERT_IF_GIVEN ||
                      w->client_auth == CONFIG_WEB_REQUIRE_AND_VERIFY_CLIENT_CERT;
        bool has_ca = w->client_ca_file || w->client_ca;
        if (has_ca && w->client_auth == CONFIG_WEB_NO_CLIENT_CERT)
                return err(p, t, P, "%s",
                           "client_ca_file is given without a client_auth_type that asks for "
                           "client certificates");
        if (verify && !has_ca)
                return err(p, t, P, "%s",
                           "client_ca_file (or client_ca) is required to verify client "
                           "certificates");
        if (w->client_allowed_sans && w->client_auth != CONFIG_WEB_REQUIRE_ANY_CLIENT_CERT &&
            w->client_auth != CONFIG_WEB_REQUIRE_AND_VERIFY_CLIENT_CERT)
                return err(p, config_node_get(t, "client_allowed_sans"),
                           "tls_server_config.client_allowed_sans", "%s",
                           "needs client_auth_type RequireAnyClientCert or "
                           "RequireAndVerifyClientCert");
        w->tls = true;
        return 0;
}

static bool header_value_ok(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < ' ' || *s == 0x7f)
                        return false;
        return true;
}

static int parse_http(struct web_parse *p, const struct config_node *h)
{
        static const char *const known[] = { "headers", "http2", NULL };
        const char *P = "http_server_config";
        int r = expect_map(p, h, P, known);
        if (r < 0)
                return r;
        const struct config_node *v;
        if ((r = scalar(p, h, "http2", P, &v)) < 0)
                return r;
        bool b;
        if (v && config_parse_bool(v->text, &b) < 0)
                return err(p, v, "http_server_config.http2", "expected true or false, found \"%s\"",
                           v->text);
        const struct config_node *hs = config_node_get(h, "headers");
        if (!hs || config_node_is_null(hs))
                return 0;
        static const char *const names[] = { "Content-Security-Policy", "X-Frame-Options",
                                             "X-Content-Type-Options", "X-XSS-Protection",
                                             "Strict-Transport-Security", NULL };
        if ((r = expect_map(p, hs, "http_server_config.headers", names)) < 0)
                return r;
        struct config_web *w = p->w;
        for (size_t i = 0; i < ARRAY_SIZE(headers); i++) {
                char *value = NULL;
                if ((r = string(p, hs, headers[i].name, "http_server_config.headers", &value)) < 0)
                        return r;
                if (!value)
                        continue; /* blank: unset */
                const struct config_node *vn = config_node_get(hs, headers[i].name);
                bool ok = header_value_ok(value);
                for (size_t j = 0; ok && headers[i].allowed; j++) {
                        if (!headers[i].allowed[j]) {
                                ok = false;
                                break;
                        }
                        if (strcasecmp(value, headers[i].allowed[j]) == 0)
                                break;
                }
                if (!ok) {
                        free(value);
                        return err(p, vn, "http_server_config.headers",
                                   "value not allowed for %s", headers[i].name);
                }
                w->headers = xrealloc(w->headers, (w->n_headers + 1) * sizeof(*w->headers));
                w->headers[w->n_headers++] =
                        (struct config_web_header){ xstrdup(headers[i].name), value };
        }
        return 0;
}

static int parse_users(struct web_parse *p, const struct config_node *u)
{
        int r = expect_map(p, u, "basic_auth_users", NULL);
        if (r < 0)
                return r;
        struct config_web *w = p->w;
        for (size_t i = 0; i < u->n_items; i += 2) {
                const struct config_node *k = u->items[i], *v = u->items[i + 1];
                if (!k->text[0] || strchr(k->text, ':'))
                        return config_node_error(p->diag, p->file, k, "basic_auth_users",
                                                 "user name \"%s\" is empty or holds a colon",
                                                 k->text);
                char path[CONFIG_PATH_MAX];
                config_subpath(path, sizeof(path), "basic_auth_users", ".%s", k->text);
                if (v->kind != CONFIG_NODE_SCALAR)
                        return err(p, v, path, "expected a bcrypt hash, found %s",
                                   config_node_kind_name(v));
                const char *h = v->text;
                if (strlen(h) != 60 || h[0] != '$' || h[1] != '2' || !strchr("aby", h[2]) ||
                    h[3] != '$')
                        return err(p, v, path, "%s",
                                   "not a bcrypt hash (\"$2y$10$\" and 53 more characters; "
                                   "htpasswd -nBC 10 \"\" makes one)");
                w->users = xrealloc(w->users, (w->n_users + 1) * sizeof(*w->users));
                w->users[w->n_users++] = (struct config_web_user){ xstrdup(k->text), xstrdup(h) };
        }
        return 0;
}

static int parse_rate_limit(struct web_parse *p, const struct config_node *n)
{
        static const char *const known[] = { "interval", "burst", NULL };
        int r = expect_map(p, n, "rate_limit", known);
        if (r < 0)
                return r;
        *p->warnings = strv_push(*p->warnings, "");
        size_t last = strv_len(*p->warnings) - 1;
        free((*p->warnings)[last]);
        (*p->warnings)[last] = xasprintf("%s:%d:%d: rate_limit is not supported and is ignored",
                                         p->file, n->line, n->column);
        return 0;
}

void config_web_free(struct config_web *w)
{
        if (!w)
                return;
        free(w->file);
        free(w->cert_file);
        free(w->cert);
        free(w->key_file);
        free(w->key);
        free(w->client_ca_file);
        free(w->client_ca);
        strv_free(w->client_allowed_sans);
        free(w->ciphers);
        free(w->groups);
        for (size_t i = 0; i < w->n_headers; i++) {
                free(w->headers[i].name);
                free(w->headers[i].value);
        }
        free(w->headers);
        for (size_t i = 0; i < w->n_users; i++) {
                free(w->users[i].name);
                explicit_bzero(w->users[i].hash, strlen(w->users[i].hash));
                free(w->users[i].hash);
        }
        free(w->users);
        free(w);
}

DEFINE_CLEANUP_FUNC(struct config_web, config_web_free)
DEFINE_CLEANUP_FUNC(struct config_node, config_tree_free)

int config_web_parse(const char *file, const char *data, size_t len, struct config_web **out,
                     char ***warnings, struct diag *diag)
{
        _cleanup_(config_tree_freep) struct config_node *root = NULL;
        int r = config_tree_parse(file, data, len, &root, diag);
        if (r < 0)
                return r;
        _cleanup_(config_web_freep) struct config_web *w = xcalloc(1, sizeof(*w));
        w->file = xstrdup(file);
        w->min_version = 0x0303;
        w->max_version = 0x0304;
        char **no_warnings = NULL;
        struct web_parse p = { .file = file, .diag = diag,
                               .warnings = warnings ? warnings : &no_warnings, .w = w };
        if (root) {
                static const char *const known[] = { "tls_server_config", "http_server_config",
                                                     "basic_auth_users", "rate_limit", NULL };
                r = expect_map(&p, root, "", known);
                const struct config_node *n;
                if (r == 0 && (n = config_node_get(root, "tls_server_config")) &&
                    !config_node_is_null(n))
                        r = parse_tls(&p, n);
                if (r == 0 && (n = config_node_get(root, "http_server_config")) &&
                    !config_node_is_null(n))
                        r = parse_http(&p, n);
                if (r == 0 && (n = config_node_get(root, "basic_auth_users")) &&
                    !config_node_is_null(n))
                        r = parse_users(&p, n);
                if (r == 0 && (n = config_node_get(root, "rate_limit")) &&
                    !config_node_is_null(n))
                        r = parse_rate_limit(&p, n);
        }
        strv_free(no_warnings);
        if (r < 0)
                return r;
        *out = TAKE_PTR(w);
        return 0;
}

int config_web_load(const char *path, struct config_web **out, char **text, char ***warnings,
                    struct diag *diag)
{
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r = fs_read_file(path, WEB_CONFIG_MAX, &data, &len);
        if (r == -EFBIG)
                return diag_set_at(diag, r, path, 0, 0, "larger than %u bytes", WEB_CONFIG_MAX);
        if (r < 0)
                return diag_set_at(diag, r, path, 0, 0, "%s", fs_strerror(r));
        r = config_web_parse(path, data, len, out, warnings, diag);
        if (r == 0 && text)
                *text = TAKE_PTR(data);
        return r;
}
