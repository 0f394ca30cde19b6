/* Where the API server is and who we are to it: a kubeconfig file, or the
 * in-cluster service account.
 *
 * A kubeconfig is read whole (at most 1 MiB, a regular file: symlinks are
 * followed, as kubeconfigs often are links, but a FIFO or a directory is
 * refused without blocking) into config/'s YAML tree, which keeps each
 * node's line:column, so every complaint points at the text to fix.  Only
 * the current context is read: its cluster (server, CA as a file or as
 * base64 data, insecure-skip-tls-verify) and its user (token, tokenFile,
 * client certificate and key as files or data).  Relative paths are taken
 * from the kubeconfig's directory, as kubectl does.  Where a kubeconfig
 * gives both a file and data, the data wins (kubectl's "will override").
 * A token file is read once here so that a missing one is reported at
 * start-up with its position; the client re-reads it as it rotates.
 *
 * Never logs above debug; never talks to the network. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "config/tree.h"
#include "kapi/internal.h"
#include "kapi/kapi.h"

#define KUBECONFIG_MAX (1u << 20)
#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"

static void free_secret(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

void kapi_config_free(struct kapi_config *c)
{
        if (!c)
                return;
        free(c->server);
        free(c->ca_file);
        free(c->ca_data);
        free(c->cert_file);
        free(c->cert_data);
        free(c->key_file);
        free_secret(c->key_data);
        free_secret(c->token);
        free(c->token_file);
        free(c);
}

DEFINE_CLEANUP_FUNC(struct kapi_config, kapi_config_free)
DEFINE_CLEANUP_FUNC(struct config_node, config_tree_free)

/* ---- the kubeconfig's tree ---- */

struct kubeconfig {
        const char *file;
        const char *dir; /* for relative paths */
        struct diag *diag;
};

/* The scalar under key in map (NULL when absent or YAML's null); anything
 * else is an error at its position. */
static int get_scalar(const struct kubeconfig *k, const struct config_node *map, const char *key,
                      const char *path, const struct config_node **out)
{
        const struct config_node *n = config_node_get(map, key);
        *out = NULL;
        if (!n || config_node_is_null(n))
                return 0;
        if (n->kind != CONFIG_NODE_SCALAR)
                return config_node_error(k->diag, k->file, n, path, "%s: expected a value, found %s",
                                         key, config_node_kind_name(n));
        *out = n;
        return 0;
}

static char *resolve_path(const struct kubeconfig *k, const char *p)
{
        if (p[0] == '/')
                return xstrdup(p);
        return xasprintf("%s/%s", k->dir, p);
}

/* A file path (relative to the kubeconfig's directory) under key. */
static int get_path(const struct kubeconfig *k, const struct config_node *map, const char *key,
                    const char *path, char **out)
{
        const struct config_node *n;
        int r = get_scalar(k, map, key, path, &n);
        if (r < 0 || !n || !n->text[0])
                return r;
        *out = resolve_path(k, n->text);
        return 0;
}

/* A PEM text given as base64 under key. */
static int get_data(const struct kubeconfig *k, const struct config_node *map, const char *key,
                    const char *path, char **out)
{
        const struct config_node *n;
        int r = get_scalar(k, map, key, path, &n);
        if (r < 0 || !n || !n->text[0])
                return r;
        char *data;
        size_t len, bad_at;
        if (base64_decode(n->text, strlen(n->text), &data, &len, &bad_at) < 0)
                return config_node_error(k->diag, k->file, n, path,
                                         "%s: not base64 (at character %zu)", key, bad_at + 1);
        if (memchr(data, '\0', len)) {
                free_secret(data);
                return config_node_error(k->diag, k->file, n, path,
                                         "%s: decodes to binary data, not PEM text", key);
        }
        *out = data;
        return 0;
}

/* The entry of list (contexts, clusters, users) whose name is name: its
 * inner mapping (context, cluster, user; NULL for an empty one) and its
 * index.  ref is the node that named it, where a miss is reported. */
static int find_named(const struct kubeconfig *k, const struct config_node *root, const char *list,
                      const char *inner, const struct config_node *ref, const char *ref_path,
                      const struct config_node **out, size_t *index)
{
        const struct config_node *seq = config_node_get(root, list);
        if (seq && !config_node_is_null(seq) && seq->kind != CONFIG_NODE_SEQ)
                return config_node_error(k->diag, k->file, seq, list, "expected a list, found %s",
                                         config_node_kind_name(seq));
        for (size_t i = 0; seq && seq->kind == CONFIG_NODE_SEQ && i < seq->n_items; i++) {
                const struct config_node *item = seq->items[i];
                char path[64];
                snprintf(path, sizeof(path), "%s[%zu]", list, i);
                if (item->kind != CONFIG_NODE_MAP)
                        return config_node_error(k->diag, k->file, item, path,
                                                 "expected a mapping, found %s",
                                                 config_node_kind_name(item));
                const struct config_node *name;
                int r = get_scalar(k, item, "name", path, &name);
                if (r < 0)
                        return r;
                if (!name || strcmp(name->text, ref->text) != 0)
                        continue;
                const struct config_node *v = config_node_get(item, inner);
                if (v && !config_node_is_null(v) && v->kind != CONFIG_NODE_MAP)
                        return config_node_error(k->diag, k->file, v, path,
                                                 "%s: expected a mapping, found %s", inner,
                                                 config_node_kind_name(v));
                *out = v && v->kind == CONFIG_NODE_MAP ? v : NULL;
                *index = i;
                return 0;
        }
        return config_node_error(k->diag, k->file, ref, ref_path, "no %s named \"%.200s\" in %s",
                                 inner, ref->text, list);
}

static int load_cluster(const struct kubeconfig *k, const struct config_node *cl, size_t i,
                        struct kapi_config *c)
{
        char path[64];
        snprintf(path, sizeof(path), "clusters[%zu].cluster", i);
        const struct config_node *server, *insecure;
        int r = get_scalar(k, cl, "server", path, &server);
        if (r < 0)
                return r;
        if (!server || !server->text[0])
                return config_node_error(k->diag, k->file, cl, path, "no server");
        if (strncmp(server->text, "https://", 8) != 0 && strncmp(server->text, "http://", 7) != 0)
                return config_node_error(k->diag, k->file, server, path,
                                         "server: \"%.200s\" is not an http(s):// URL",
                                         server->text);
        c->server = xstrdup(server->text);
        size_t n = strlen(c->server);
        while (n > 0 && c->server[n - 1] == '/')
                c->server[--n] = '\0';

        r = get_data(k, cl, "certificate-authority-data", path, &c->ca_data);
        if (r == 0 && !c->ca_data)
                r = get_path(k, cl, "certificate-authority", path, &c->ca_file);
        if (r == 0)
                r = get_scalar(k, cl, "insecure-skip-tls-verify", path, &insecure);
        if (r < 0)
                return r;
        if (insecure) {
                if (strcmp(insecure->text, "true") == 0)
                        c->insecure = true;
                else if (strcmp(insecure->text, "false") != 0)
                        return config_node_error(k->diag, k->file, insecure, path,
                                                 "insecure-skip-tls-verify: expected true or "
                                                 "false, found \"%.100s\"",
                                                 insecure->text);
        }
        return 0;
}

/* Reads the token file once, so that a missing or oversized one is
 * reported where it is named (n: its node, or NULL outside a kubeconfig). */
static int check_token_file(const struct kubeconfig *k, const struct config_node *n,
                            const char *path, const char *token_file)
{
        _cleanup_free_ char *tok = NULL;
        int r = kapi_token_read(token_file, &tok);
        if (r >= 0) {
                explicit_bzero(tok, strlen(tok));
                return 0;
        }
        const char *why = r == -EFBIG ? "larger than 64 KiB" : r == -ENODATA ? "empty"
                          : r == -EBADMSG ? "holds control characters" : fs_strerror(r);
        if (n)
                return diag_set_at(k->diag, r, k->file, n->line, n->column,
                                   "%s: token file %s: %s", path, token_file, why);
        return diag_set(k->diag, r, "token file %s: %s", token_file, why);
}

static int load_user(const struct kubeconfig *k, const struct config_node *u, size_t i,
                     struct kapi_config *c)
{
        char path[64];
        snprintf(path, sizeof(path), "users[%zu].user", i);
        const struct config_node *token, *token_file;
        int r = get_scalar(k, u, "token", path, &token);
        if (r == 0)
                r = get_scalar(k, u, "tokenFile", path, &token_file);
        if (r == 0)
                r = get_data(k, u, "client-certificate-data", path, &c->cert_data);
        if (r == 0 && !c->cert_data)
                r = get_path(k, u, "client-certificate", path, &c->cert_file);
        if (r == 0)
                r = get_data(k, u, "client-key-data", path, &c->key_data);
        if (r == 0 && !c->key_data)
                r = get_path(k, u, "client-key", path, &c->key_file);
        if (r < 0)
                return r;
        if (token && token->text[0])
                c->token = xstrdup(token->text);
        if (token_file && token_file->text[0]) {
                c->token_file = resolve_path(k, token_file->text);
                r = check_token_file(k, token_file, path, c->token_file);
                if (r < 0)
                        return r;
        }
        bool cert = c->cert_data || c->cert_file, key = c->key_data || c->key_file;
        if (cert != key)
                return config_node_error(k->diag, k->file, u, path,
                                         cert ? "a client certificate without its key"
                                              : "a client key without its certificate");
        if (!cert && !c->token && !c->token_file) {
                static const char *const unsupported[] = { "exec", "auth-provider", "username" };
                for (size_t j = 0; j < ARRAY_SIZE(unsupported); j++) {
                        const struct config_node *n = config_node_get(u, unsupported[j]);
                        if (n && !config_node_is_null(n))
                                return config_node_error(
                                        k->diag, k->file, n, path,
                                        "%s: not supported (use a token, a token file or a "
                                        "client certificate)",
                                        unsupported[j]);
                }
        }
        return 0;
}

static int load_kubeconfig(const char *file, struct kapi_config *c, struct diag *diag)
{
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r = fs_read_file(file, KUBECONFIG_MAX, &data, &len);
        if (r == -EFBIG)
                return diag_set_at(diag, r, file, 0, 0, "larger than %u bytes", KUBECONFIG_MAX);
        if (r < 0)
                return diag_set_at(diag, r, file, 0, 0, "%s", fs_strerror(r));

        _cleanup_free_ char *dir = xstrdup(file);
        char *slash = strrchr(dir, '/');
        if (!slash)
                strcpy(dir, ".");
        else if (slash == dir)
                slash[1] = '\0';
        else
                *slash = '\0';
        struct kubeconfig k = { .file = file, .dir = dir, .diag = diag };

        _cleanup_(config_tree_freep) struct config_node *root = NULL;
        r = config_tree_parse(file, data, len, &root, diag);
        if (r < 0)
                return r;
        if (!root)
                return diag_set_at(diag, -EINVAL, file, 0, 0, "empty kubeconfig");
        if (root->kind != CONFIG_NODE_MAP)
                return config_node_error(diag, file, root, "", "expected a mapping, found %s",
                                         config_node_kind_name(root));

        const struct config_node *current, *cluster_name, *user_name;
        r = get_scalar(&k, root, "current-context", "", &current);
        if (r < 0)
                return r;
        if (!current || !current->text[0])
                return config_node_error(diag, file, root, "", "no current-context");
        const struct config_node *ctx, *cl, *u;
        size_t ci, cli, ui;
        r = find_named(&k, root, "contexts", "context", current, "current-context", &ctx, &ci);
        if (r < 0)
                return r;
        char path[64];
        snprintf(path, sizeof(path), "contexts[%zu].context", ci);
        if (!ctx)
                return config_node_error(diag, file, current, "current-context",
                                         "context \"%.200s\" is empty", current->text);
        r = get_scalar(&k, ctx, "cluster", path, &cluster_name);
        if (r == 0)
                r = get_scalar(&k, ctx, "user", path, &user_name);
        if (r < 0)
                return r;
        if (!cluster_name)
                return config_node_error(diag, file, ctx, path, "no cluster");
        r = find_named(&k, root, "clusters", "cluster", cluster_name, path, &cl, &cli);
        if (r < 0)
                return r;
        if (!cl)
                return config_node_error(diag, file, cluster_name, path,
                                         "cluster \"%.200s\" is empty", cluster_name->text);
        r = load_cluster(&k, cl, cli, c);
        if (r < 0)
                return r;
        /* A context without a user is anonymous, as kubectl allows. */
        if (!user_name)
                return 0;
        r = find_named(&k, root, "users", "user", user_name, path, &u, &ui);
        if (r < 0 || !u)
                return r;
        return load_user(&k, u, ui, c);
}

/* ---- in-cluster ---- */

static int load_in_cluster(const char *sa_dir, struct kapi_config *c, struct diag *diag)
{
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !host[0] || !port || !port[0])
                return diag_set(diag, -ENOENT,
                                "no kubeconfig given and not in a cluster "
                                "($KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT unset)");
        char *end;
        errno = 0;
        unsigned long p = strtoul(port, &end, 10);
        if (errno || *end || p == 0 || p > 65535 || port[0] == '-' || port[0] == '+')
                return diag_set(diag, -EINVAL, "$KUBERNETES_SERVICE_PORT: \"%.50s\" is not a port",
                                port);
        for (const char *s = host; *s; s++)
                if (*s <= ' ' || *s == '/' || *s == '@' || *s == '[' || *s == ']' || *s == 0x7f)
                        return diag_set(diag, -EINVAL,
                                        "$KUBERNETES_SERVICE_HOST: \"%.100s\" is not a host", host);
        bool v6 = strchr(host, ':') != NULL;
        c->server = xasprintf("https://%s%s%s:%lu", v6 ? "[" : "", host, v6 ? "]" : "", p);

        if (!sa_dir || !sa_dir[0])
                sa_dir = SA_DIR_DEFAULT;
        c->token_file = xasprintf("%s/token", sa_dir);
        struct kubeconfig k = { .diag = diag };
        int r = check_token_file(&k, NULL, NULL, c->token_file);
        if (r < 0)
                return r;
        /* As client-go: without a readable CA the system's roots are used. */
        c->ca_file = xasprintf("%s/ca.crt", sa_dir);
        int fd = fs_open_regular(c->ca_file);
        if (fd < 0) {
                log_debug("kapi", "no service account CA path=%s error=\"%s\"", c->ca_file,
                          fs_strerror(fd));
                free(c->ca_file);
                c->ca_file = NULL;
        } else {
                close(fd);
        }
        return 0;
}

int kapi_config_load(const char *path, const char *sa_dir, struct kapi_config **out,
                     struct diag *diag)
{
        _cleanup_(kapi_config_freep) struct kapi_config *c = xcalloc(1, sizeof(*c));
        int r = path && path[0] ? load_kubeconfig(path, c, diag) : load_in_cluster(sa_dir, c, diag);
        if (r < 0)
                return r;
        *out = TAKE_PTR(c);
        return 0;
}
