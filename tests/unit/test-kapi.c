/* Unit tests for src/kapi: the kubeconfig (the current context's cluster
 * and user, data against files, paths relative to the file, token files,
 * broken YAML and missing pieces with their exact positions, files that
 * are too large or not regular), the in-cluster account, the base64 and
 * token readers, escaping, the backoff's bounds, the watch loops' pace and
 * what is retryable, and the client's refusals that need no server (a bad
 * path or method, a stop already requested, a port that refuses).  The transfers themselves are
 * tested against a hostile server in tests/integration/test_kapi.py. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "base/base64.h"
#include "kapi/internal.h"
#include "kapi/kapi.h"
#include "test-util.h"

static char dir[64];

static int setup(void **state)
{
        strcpy(dir, "/tmp/test-kapi-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd);
}

/* Writes dir/name; returns its path (heap). */
static char *write_file(const char *name, const char *content)
{
        char *path = xasprintf("%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(content, f);
        fclose(f);
        return path;
}

#define PEM_CA "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
#define PEM_CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="

static const char kubeconfig_head[] = "apiVersion: v1\n"
                                      "kind: Config\n"
                                      "current-context: test\n"
                                      "contexts:\n"
                                      "- name: other\n"
                                      "  context: {cluster: wrong, user: wrong}\n"
                                      "- name: test\n"
                                      "  context:\n"
                                      "    cluster: right\n"
                                      "    user: me\n";

static int load(const char *name, const char *text, struct kapi_config **out, struct diag *d)
{
        _cleanup_free_ char *path = write_file(name, text);
        return kapi_config_load(path, NULL, out, d);
}

/* ---- kubeconfig ---- */

static void test_current_context_with_data(void **state)
{
        _cleanup_free_ char *text = xasprintf(
                "%s"
                "clusters:\n"
                "- name: wrong\n"
                "  cluster: {server: https://wrong.example}\n"
                "- name: right\n"
                "  cluster:\n"
                "    server: https://10.0.0.1:6443//\n"
                "    certificate-authority: ignored-ca.crt\n"
                "    certificate-authority-data: |\n"
                "      LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VS\n"
                "      VElGSUNBVEUtLS0tLQo=\n"
                "users:\n"
                "- name: wrong\n"
                "  user: {token: wrong}\n"
                "- name: me\n"
                "  user:\n"
                "    token: secret\n"
                "    client-certificate-data: %s\n"
                "    client-key-data: %s\n",
                kubeconfig_head, PEM_CA_B64, PEM_CA_B64);
        struct kapi_config *c = NULL;
        struct diag d = { 0 };
        assert_int_equal(load("kc-data", text, &c, &d), 0);
        assert_string_equal(c->server, "https://10.0.0.1:6443");
        assert_string_equal(c->ca_data, PEM_CA);
        assert_null(c->ca_file); /* data overrides the file */
        assert_string_equal(c->cert_data, PEM_CA);
        assert_string_equal(c->key_data, PEM_CA);
        assert_null(c->cert_file);
        assert_null(c->key_file);
        assert_string_equal(c->token, "secret");
        assert_null(c->token_file);
        assert_false(c->insecure);
        kapi_config_free(c);
}

static void test_relative_paths_and_token_file(void **state)
{
        char sub[128];
        snprintf(sub, sizeof(sub), "%s/conf", dir);
        mkdir(sub, 0755);
        _cleanup_free_ char *tok = write_file("conf/token", "  rotated-token \n");
        _cleanup_free_ char *text = xasprintf(
                "%s"
                "clusters:\n"
                "- name: right\n"
                "  cluster:\n"
                "    server: http://127.0.0.1:8080\n"
                "    certificate-authority: ca.crt\n"
                "    insecure-skip-tls-verify: true\n"
                "users:\n"
                "- name: me\n"
                "  user:\n"
                "    tokenFile: token\n"
                "    client-certificate: certs/client.crt\n"
                "    client-key: /abs/client.key\n",
                kubeconfig_head);
        struct kapi_config *c = NULL;
        struct diag d = { 0 };
        _cleanup_free_ char *path = write_file("conf/kubeconfig", text);
        assert_int_equal(kapi_config_load(path, NULL, &c, &d), 0);
        _cleanup_free_ char *ca = xasprintf("%s/ca.crt", sub);
        _cleanup_free_ char *cert = xasprintf("%s/certs/client.crt", sub);
        assert_string_equal(c->server, "http://127.0.0.1:8080");
        assert_string_equal(c->ca_file, ca);
        assert_null(c->ca_data);
        assert_true(c->insecure);
        assert_string_equal(c->token_file, tok);
        assert_null(c->token);
        assert_string_equal(c->cert_file, cert);
        assert_string_equal(c->key_file, "/abs/client.key");
        kapi_config_free(c);

        /* through a symlink: followed, and paths are from the link's directory */
        _cleanup_free_ char *link = xasprintf("%s/link-kubeconfig", dir);
        assert_int_equal(symlink(path, link), 0);
        assert_int_equal(kapi_config_load(link, NULL, &c, &d), -ENOENT);
        assert_string_equal(d.file, link);
        _cleanup_free_ char *want = xasprintf("users[0].user: token file %s/token: No such file", dir);
        assert_contains(d.message, want);
}

static void test_anonymous_user_and_no_user(void **state)
{
        struct kapi_config *c = NULL;
        struct diag d = { 0 };
        assert_int_equal(load("kc-anon",
                              "current-context: a\n"
                              "contexts: [{name: a, context: {cluster: c}}]\n"
                              "clusters: [{name: c, cluster: {server: 'https://[fd00::1]:6443'}}]\n",
                              &c, &d),
                         0);
        assert_string_equal(c->server, "https://[fd00::1]:6443");
        assert_null(c->token);
        assert_null(c->cert_file);
        kapi_config_free(c);
}

struct bad_case {
        const char *text;
        int r;
        int line, column;
        const char *message;
};

static void test_broken_and_missing_pieces(void **state)
{
        static const struct bad_case cases[] = {
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u\nclusters: []\n",
                  -EINVAL, 5, 9, "did not find expected ',' or '}' (while parsing a flow mapping started at 4:12)" },
                { "kind: Config\ncontexts: []\n", -EINVAL, 1, 1, "no current-context" },
                { "current-context: nope\ncontexts:\n- name: a\n  context: {cluster: c}\n",
                  -EINVAL, 1, 18, "current-context: no context named \"nope\" in contexts" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {user: u}\n",
                  -EINVAL, 4, 12, "contexts[0].context: no cluster" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: b\n  cluster: {server: https://x}\n",
                  -EINVAL, 4, 22, "contexts[0].context: no cluster named \"c\" in clusters" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: https://x}\nusers: []\n",
                  -EINVAL, 4, 31, "contexts[0].context: no user named \"u\" in users" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {certificate-authority: x}\n",
                  -EINVAL, 7, 12, "clusters[0].cluster: no server" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: ftp://x}\n",
                  -EINVAL, 7, 21, "clusters[0].cluster: server: \"ftp://x\" is not an http(s):// URL" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster:\n    server: https://x\n    certificate-authority-data: LS0t*\n",
                  -EINVAL, 9, 33, "clusters[0].cluster: certificate-authority-data: not base64 (at character 5)" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster:\n    server: https://x\n    insecure-skip-tls-verify: yes\n",
                  -EINVAL, 9, 31, "clusters[0].cluster: insecure-skip-tls-verify: expected true or false, found \"yes\"" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: https://x}\nusers:\n- name: u\n  user: {client-certificate: c.crt}\n",
                  -EINVAL, 10, 9, "users[0].user: a client certificate without its key" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: https://x}\nusers:\n- name: u\n  user:\n    exec: {command: aws}\n",
                  -EINVAL, 11, 11, "users[0].user: exec: not supported" },
                { "current-context: a\ncontexts: {a: b}\n", -EINVAL, 2, 11,
                  "contexts: expected a list, found a mapping" },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: [x]}\n",
                  -EINVAL, 7, 21, "clusters[0].cluster: server: expected a value, found a list" },
                { "", -EINVAL, 0, 0, "empty kubeconfig" },
                { "- a\n", -EINVAL, 1, 1, "expected a mapping, found a list" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct kapi_config *c = NULL;
                struct diag d = { 0 };
                char name[32];
                snprintf(name, sizeof(name), "kc-bad-%zu", i);
                _cleanup_free_ char *path = write_file(name, cases[i].text);
                int r = kapi_config_load(path, NULL, &c, &d);
                if (r != cases[i].r || d.line != cases[i].line || d.column != cases[i].column ||
                    !strstr(d.message, cases[i].message))
                        print_error("case %zu: r=%d at %d:%d: %s\n", i, r, d.line, d.column,
                                    d.message);
                assert_int_equal(r, cases[i].r);
                assert_null(c);
                assert_string_equal(d.file, path);
                assert_int_equal(d.line, cases[i].line);
                assert_int_equal(d.column, cases[i].column);
                assert_contains(d.message, cases[i].message);
        }
}

static void test_files_refused(void **state)
{
        struct kapi_config *c = NULL;
        struct diag d = { 0 };
        /* over 1 MiB */
        size_t n = (1u << 20) + 2;
        _cleanup_free_ char *big = xmalloc(n + 1);
        memset(big, '#', n);
        big[n] = '\0';
        assert_int_equal(load("kc-big", big, &c, &d), -EFBIG);
        assert_contains(d.message, "larger than 1048576 bytes");
        /* a directory, a FIFO (its open must not block), nothing */
        assert_int_equal(kapi_config_load(dir, NULL, &c, &d), -EISDIR);
        _cleanup_free_ char *fifo = xasprintf("%s/kc-fifo", dir);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        assert_int_equal(kapi_config_load(fifo, NULL, &c, &d), -EINVAL);
        assert_contains(d.message, "not a regular file");
        _cleanup_free_ char *none = xasprintf("%s/none", dir);
        assert_int_equal(kapi_config_load(none, NULL, &c, &d), -ENOENT);
        assert_string_equal(d.file, none);
        assert_null(c);
}

/* ---- in-cluster ---- */

static void test_in_cluster(void **state)
{
        char sa[128];
        snprintf(sa, sizeof(sa), "%s/sa", dir);
        mkdir(sa, 0755);
        free(write_file("sa/token", "sa-token\n"));
        struct kapi_config *c = NULL;
        struct diag d = { 0 };

        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
        assert_int_equal(kapi_config_load(NULL, sa, &c, &d), -ENOENT);
        assert_contains(d.message, "not in a cluster");

        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        assert_int_equal(kapi_config_load("", sa, &c, &d), 0);
        assert_string_equal(c->server, "https://10.96.0.1:443");
        _cleanup_free_ char *tok = xasprintf("%s/token", sa);
        assert_string_equal(c->token_file, tok);
        assert_null(c->ca_file); /* no ca.crt: the system's roots, as client-go */
        assert_null(c->token);
        kapi_config_free(c);

        free(write_file("sa/ca.crt", PEM_CA));
        setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
        assert_int_equal(kapi_config_load(NULL, sa, &c, &d), 0);
        assert_string_equal(c->server, "https://[fd00:10:96::1]:443");
        _cleanup_free_ char *ca = xasprintf("%s/ca.crt", sa);
        assert_string_equal(c->ca_file, ca);
        kapi_config_free(c);

        c = NULL;
        setenv("KUBERNETES_SERVICE_PORT", "70000", 1);
        assert_int_equal(kapi_config_load(NULL, sa, &c, &d), -EINVAL);
        assert_contains(d.message, "KUBERNETES_SERVICE_PORT");
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        setenv("KUBERNETES_SERVICE_HOST", "evil/path", 1);
        assert_int_equal(kapi_config_load(NULL, sa, &c, &d), -EINVAL);
        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        _cleanup_free_ char *none = xasprintf("%s/none", dir);
        assert_int_equal(kapi_config_load(NULL, none, &c, &d), -ENOENT);
        assert_contains(d.message, "/none/token: No such file");
        assert_null(c);
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
}

/* ---- readers ---- */

static void test_base64(void **state)
{
        static const struct {
                const char *in, *out;
        } good[] = {
                { "", "" },         { "YQ==", "a" },       { "YWI=", "ab" },
                { "YWJj", "abc" },  { "YW\r\nJj\n", "abc" }, { "/+8=", "\xff\xef" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
                char *out;
                size_t len;
                assert_int_equal(base64_decode(good[i].in, strlen(good[i].in), &out, &len, NULL), 0);
                assert_int_equal(len, strlen(good[i].out));
                assert_memory_equal(out, good[i].out, len);
                free(out);
        }
        static const struct {
                const char *in;
                size_t bad_at;
        } bad[] = {
                { "YQ", 2 }, { "Y===", 1 }, { "YQ==YQ==", 4 }, { "YW J", 2 }, { "YQ=a", 3 }, { "-_==", 0 },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *out = NULL;
                size_t len, at = 99;
                assert_int_equal(base64_decode(bad[i].in, strlen(bad[i].in), &out, &len, &at), -EINVAL);
                assert_int_equal(at, bad[i].bad_at);
                assert_null(out);
        }
}

static void test_token_read(void **state)
{
        _cleanup_free_ char *ok = write_file("tok-ok", "\n  abc.def-ghi \r\n");
        _cleanup_free_ char *empty = write_file("tok-empty", " \n");
        _cleanup_free_ char *ctrl = write_file("tok-ctrl", "abc\r\nInjected: 1\n");
        char *big_text = xmalloc(KAPI_TOKEN_MAX + 2);
        memset(big_text, 'x', KAPI_TOKEN_MAX + 1);
        big_text[KAPI_TOKEN_MAX + 1] = '\0';
        _cleanup_free_ char *big = write_file("tok-big", big_text);
        big_text[KAPI_TOKEN_MAX] = '\0';
        _cleanup_free_ char *max = write_file("tok-max", big_text);
        free(big_text);
        char *tok = NULL;
        assert_int_equal(kapi_token_read(ok, &tok), 0);
        assert_string_equal(tok, "abc.def-ghi");
        free(tok);
        tok = NULL;
        assert_int_equal(kapi_token_read(empty, &tok), -ENODATA);
        assert_int_equal(kapi_token_read(ctrl, &tok), -EBADMSG);
        assert_int_equal(kapi_token_read(big, &tok), -EFBIG);
        assert_null(tok);
        assert_int_equal(kapi_token_read(max, &tok), 0);
        assert_int_equal(strlen(tok), KAPI_TOKEN_MAX);
        free(tok);
}

/* ---- escape, backoff, retryable ---- */

static void test_escape(void **state)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "", "" },
                { "AZaz09-._~", "AZaz09-._~" },
                { "spec.nodeName=node 1,a/b", "spec.nodeName%3Dnode%201%2Ca%2Fb" },
                { "x&y?z#%+", "x%26y%3Fz%23%25%2B" },
                { "caf\xc3\xa9", "caf%C3%A9" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *e = kapi_escape(cases[i].in);
                assert_string_equal(e, cases[i].out);
                free(e);
        }
}

static void test_backoff_bounds(void **state)
{
        for (unsigned attempt = 0; attempt < 70; attempt++) {
                long base = attempt < 10 ? 200L << attempt : 10000;
                if (base > 10000)
                        base = 10000;
                long lo = base * 4 / 5, hi = base * 6 / 5, min = hi, max = lo;
                for (int i = 0; i < 200; i++) {
                        long v = kapi_backoff_ms(attempt, 10000);
                        assert_in_range(v, lo, hi);
                        min = v < min ? v : min;
                        max = v > max ? v : max;
                }
                /* jitter: 200 draws over [lo, hi] do not all land in one half */
                assert_true(min < base && max > base);
        }
        /* no cap given: 30 s */
        assert_in_range(kapi_backoff_ms(100, 0), 24000, 36000);
        assert_in_range(kapi_backoff_ms(0, 50), 40, 60);
}

/* Full jitter: after n rounds in a row that did not last, a wait in
 * [1, min(cap, 800 ms << n)], spread over the whole range; events reset the
 * climb, and only a clean round that lasted goes on at once (not testable
 * without waiting KAPI_REWATCH_MIN_MS, so the integration tests count
 * requests instead). */
static void test_rewatch_pace(void **state)
{
        struct kapi_rewatch w = { 0 };
        for (unsigned n = 0; n < 40; n++) {
                long hi = n < 6 ? 800L << n : 30000;
                if (hi > 30000)
                        hi = 30000;
                long min = hi, max = 0;
                for (int i = 0; i < 200; i++) {
                        struct kapi_rewatch probe = w;
                        kapi_rewatch_begin(&probe);
                        long v = kapi_rewatch_end(&probe, i % 2 == 0, 30000);
                        assert_in_range(v, 1, hi);
                        assert_int_equal(probe.attempt, n + 1);
                        min = v < min ? v : min;
                        max = v > max ? v : max;
                }
                assert_true(min < hi / 4 && max > hi * 3 / 4);
                kapi_rewatch_begin(&w);
                kapi_rewatch_end(&w, true, 30000);
        }
        /* an event resets the climb: the next wait is the first's */
        kapi_rewatch_begin(&w);
        kapi_rewatch_progress(&w);
        assert_in_range(kapi_rewatch_end(&w, false, 30000), 1, 800);
        assert_int_equal(w.attempt, 1);
        /* no cap given: 30 s; a cap below the base bounds the first wait */
        w.attempt = 100;
        kapi_rewatch_begin(&w);
        assert_in_range(kapi_rewatch_end(&w, false, 0), 1, 30000);
        w.attempt = 0;
        kapi_rewatch_begin(&w);
        assert_in_range(kapi_rewatch_end(&w, false, 50), 1, 50);
}

/* The token bucket on an injected clock: the burst at once, then one
 * call per 1/qps, reservations queueing, the cap on what is saved, no
 * limit at qps 0, and a Retry-After pause that outlasts the rate. */
static void test_rate_bucket(void **state)
{
        struct kapi_rate r;
        kapi_rate_init(&r, 2.0, 3, 1000);
        for (int i = 0; i < 3; i++)
                assert_int_equal(kapi_rate_take(&r, 1000), 0);
        /* the 4th and 5th reserve the next tokens: 500 ms, then 1000 ms */
        assert_int_equal(kapi_rate_take(&r, 1000), 500);
        assert_int_equal(kapi_rate_take(&r, 1000), 1000);
        /* at 2000 the debt is repaid: the next waits its own 500 ms */
        assert_int_equal(kapi_rate_take(&r, 2000), 500);
        /* a long quiet time saves only burst tokens */
        kapi_rate_init(&r, 2.0, 3, 0);
        assert_int_equal(kapi_rate_take(&r, 600000), 0);
        assert_int_equal(kapi_rate_take(&r, 600000), 0);
        assert_int_equal(kapi_rate_take(&r, 600000), 0);
        assert_int_equal(kapi_rate_take(&r, 600000), 500);
        /* burst 0 reads as 1 */
        kapi_rate_init(&r, 10.0, 0, 0);
        assert_int_equal(kapi_rate_take(&r, 0), 0);
        assert_int_equal(kapi_rate_take(&r, 0), 100);
        /* qps 0: no limit, but a pause still holds */
        kapi_rate_init(&r, 0, 0, 0);
        for (int i = 0; i < 100; i++)
                assert_int_equal(kapi_rate_take(&r, 5), 0);
        kapi_rate_pause(&r, 10, 3000);
        assert_int_equal(kapi_rate_take(&r, 10), 3000);
        assert_int_equal(kapi_rate_take(&r, 2010), 1000);
        assert_int_equal(kapi_rate_take(&r, 3010), 0);
        /* a shorter pause does not shorten a longer one */
        kapi_rate_pause(&r, 4000, 5000);
        kapi_rate_pause(&r, 4000, 1000);
        assert_int_equal(kapi_rate_take(&r, 4000), 5000);
        /* a pause drains what was saved to one token: after it, the rate */
        kapi_rate_init(&r, 1.0, 10, 0);
        kapi_rate_pause(&r, 0, 2000);
        assert_int_equal(kapi_rate_take(&r, 0), 2000);
        assert_int_equal(kapi_rate_take(&r, 2000), 1000);
        assert_int_equal(kapi_rate_take(&r, 2000), 2000);
        /* a call in debt at a pause waits the pause and then its token */
        kapi_rate_init(&r, 0.5, 1, 0);
        assert_int_equal(kapi_rate_take(&r, 0), 0);
        kapi_rate_pause(&r, 0, 1000);
        assert_int_equal(kapi_rate_take(&r, 0), 3000);
}

static void test_retryable(void **state)
{
        assert_true(kapi_retryable(-ETIMEDOUT, 0));
        assert_true(kapi_retryable(-ECONNREFUSED, 0));
        assert_true(kapi_retryable(-ECONNRESET, 0));
        assert_false(kapi_retryable(-ECANCELED, 0));
        assert_false(kapi_retryable(-EMSGSIZE, 200));
        assert_false(kapi_retryable(-EBADMSG, 200));
        static const long yes[] = { 429, 500, 502, 503, 504 };
        static const long no[] = { 200, 201, 400, 401, 403, 404, 409, 410, 422, 501 };
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                assert_true(kapi_retryable(0, yes[i]));
                assert_true(kapi_retryable(-EPROTO, yes[i])); /* a watch refused */
        }
        for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
                assert_false(kapi_retryable(0, no[i]));
                assert_false(kapi_retryable(-EPROTO, no[i]));
        }
}

/* ---- the client's refusals ---- */

static struct kapi_config *config_for(const char *server)
{
        struct kapi_config *c = xcalloc(1, sizeof(*c));
        c->server = xstrdup(server);
        return c;
}

static int no_event(const char *type, json_t *object, void *ud) { return 0; }

static void test_client_refusals(void **state)
{
        struct kapi_client *k = NULL;
        struct diag d = { 0 };
        assert_int_equal(kapi_client_new(config_for("ftp://x"), &k, &d), -EINVAL);
        struct kapi_config *cfg = config_for("https://x");
        cfg->token = xstrdup("abc\r\nX-Injected: 1");
        assert_int_equal(kapi_client_new(cfg, &k, &d), -EINVAL);
        assert_contains(d.message, "control characters");
        cfg = config_for("https://x");
        cfg->cert_file = xstrdup("/c.crt");
        assert_int_equal(kapi_client_new(cfg, &k, &d), -EINVAL);
        assert_null(k);

        /* a port that refuses: bound, never listening, so nobody else takes it */
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sin);
        assert_int_equal(bind(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
        assert_int_equal(getsockname(s, (struct sockaddr *)&sin, &sl), 0);
        char server[64];
        snprintf(server, sizeof(server), "http://127.0.0.1:%d", ntohs(sin.sin_port));
        assert_int_equal(kapi_client_new(config_for(server), &k, &d), 0);
        assert_string_equal(kapi_client_server(k), server);

        struct kapi_response resp = { .status = 123 };
        assert_int_equal(kapi_request(k, "GET", "/api", NULL, 5000, NULL, &resp, &d), -ECONNREFUSED);
        assert_int_equal(resp.status, 0);
        assert_null(resp.body);
        assert_true(kapi_retryable(-ECONNREFUSED, resp.status));
        assert_contains(d.message, "GET http://127.0.0.1:");

        atomic_bool stop = true;
        assert_int_equal(kapi_request(k, "GET", "/api", NULL, 0, &stop, &resp, &d), -ECANCELED);
        assert_int_equal(kapi_watch(k, "/api?watch=1", &stop, no_event, NULL, NULL, &d), -ECANCELED);
        assert_int_equal(kapi_request(k, "GET", "api", NULL, 0, NULL, &resp, &d), -EINVAL);
        assert_int_equal(kapi_request(k, "GET", "/a b", NULL, 0, NULL, &resp, &d), -EINVAL);
        assert_int_equal(kapi_request(k, "GET", "/a\r\nX: y", NULL, 0, NULL, &resp, &d), -EINVAL);
        assert_int_equal(kapi_request(k, "TRACE", "/api", NULL, 0, NULL, &resp, &d), -EINVAL);
        long status = 7;
        assert_int_equal(kapi_watch(k, "/api/v1/pods", NULL, no_event, NULL, &status, &d), -EINVAL);
        assert_int_equal(kapi_watch(k, "/api/v1/pods?x=1&nowatch=1", NULL, no_event, NULL, NULL, &d),
                         -EINVAL);
        assert_contains(d.message, "watch=1");
        kapi_client_free(k);
        close(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_current_context_with_data),
                cmocka_unit_test(test_relative_paths_and_token_file),
                cmocka_unit_test(test_anonymous_user_and_no_user),
                cmocka_unit_test(test_broken_and_missing_pieces),
                cmocka_unit_test(test_files_refused),
                cmocka_unit_test(test_in_cluster),
                cmocka_unit_test(test_base64),
                cmocka_unit_test(test_token_read),
                cmocka_unit_test(test_escape),
                cmocka_unit_test(test_backoff_bounds),
                cmocka_unit_test(test_rewatch_pace),
                cmocka_unit_test(test_rate_bucket),
                cmocka_unit_test(test_retryable),
                cmocka_unit_test(test_client_refusals),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
