/* Unit tests for config/web.c (the web configuration file) and
 * metrics/web-auth.c: every key of exporter-toolkit's format, Go's cipher
 * and curve names turned into OpenSSL's, exporter-toolkit's rules (nothing
 * given is plain HTTP; a certificate needs its key; a client CA needs a
 * client_auth_type; verification needs a CA; client_allowed_sans needs a
 * required certificate), errors at their file:line:column (unknown keys
 * at every level, bad values), the rate_limit warning; and basic
 * authentication: missing, malformed and unknown credentials, bcrypt
 * through a job, the verified password and the wrong ones remembered (a
 * job given up remembers nothing; one issued before an answer was known
 * learns it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/xalloc.h"
#include "config/web.h"
#include "metrics/web-auth.h"

/* bcrypt of "correct horse", cost 4 */
#define HASH "$2b$04$sXbBbxpX7su5TnkBWt70zujkCkYte5dMgfkXTD3xA9Qs2ZAfVXwZO"

static int parse(const char *text, struct config_web **out, struct diag *diag, char ***warnings)
{
        return config_web_parse("web.yml", text, strlen(text), out, warnings, diag);
}

static void test_full(void **state)
{
        struct config_web *w = NULL;
        struct diag d = { 0 };
        const char *text = "tls_server_config:\n"
                           "  cert_file: /c.pem\n"
                           "  key_file: /k.pem\n"
                           "  client_auth_type: RequireAndVerifyClientCert\n"
                           "  client_ca_file: /ca.pem\n"
                           "  client_allowed_sans: [a.example, 10.0.0.1]\n"
                           "  min_version: TLS13\n"
                           "  max_version: TLS13\n"
                           "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,\n"
                           "    TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305, TLS_AES_128_GCM_SHA256,\n"
                           "    TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256]\n"
                           "  prefer_server_cipher_suites: false\n"
                           "  curve_preferences: [X25519, CurveP256]\n"
                           "http_server_config:\n"
                           "  http2: false\n"
                           "  headers:\n"
                           "    X-Frame-Options: deny\n"
                           "    Content-Security-Policy: \"\"\n"
                           "basic_auth_users:\n"
                           "  alice: " HASH "\n";
        assert_int_equal(parse(text, &w, &d, NULL), 0);
        assert_true(w->tls);
        assert_string_equal(w->cert_file, "/c.pem");
        assert_string_equal(w->key_file, "/k.pem");
        assert_null(w->cert);
        assert_int_equal(w->client_auth, CONFIG_WEB_REQUIRE_AND_VERIFY_CLIENT_CERT);
        assert_string_equal(w->client_ca_file, "/ca.pem");
        assert_string_equal(w->client_allowed_sans[1], "10.0.0.1");
        assert_int_equal(w->min_version, 0x0304);
        assert_int_equal(w->max_version, 0x0304);
        assert_string_equal(w->ciphers, "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305");
        assert_false(w->prefer_server_ciphers);
        assert_string_equal(w->groups, "X25519:P-256");
        assert_int_equal(w->n_headers, 1); /* a blank one is unset */
        assert_string_equal(w->headers[0].name, "X-Frame-Options");
        assert_int_equal(w->n_users, 1);
        assert_string_equal(w->users[0].hash, HASH);
        config_web_free(w);
}

static void test_plain_and_inline(void **state)
{
        struct config_web *w = NULL;
        struct diag d = { 0 };
        assert_int_equal(parse("", &w, &d, NULL), 0);
        assert_false(w->tls);
        assert_int_equal(w->n_users, 0);
        config_web_free(w);
        assert_int_equal(parse("tls_server_config: {}\nhttp_server_config:\n", &w, &d, NULL), 0);
        assert_false(w->tls);
        assert_int_equal(w->min_version, 0x0303);
        assert_true(w->prefer_server_ciphers || !w->tls);
        config_web_free(w);
        assert_int_equal(parse("tls_server_config:\n  cert: |\n    PEM\n  key: KEY\n", &w, &d, NULL), 0);
        assert_true(w->tls);
        assert_string_equal(w->cert, "PEM\n");
        assert_string_equal(w->key, "KEY");
        config_web_free(w);
}

static void expect_error(const char *text, int line, int column, const char *words)
{
        struct config_web *w = NULL;
        struct diag d = { 0 };
        assert_int_equal(parse(text, &w, &d, NULL), -EINVAL);
        assert_null(w);
        assert_string_equal(d.file, "web.yml");
        if (d.line != line || d.column != column || !strstr(d.message, words))
                fail_msg("%s: got %d:%d: %s", text, d.line, d.column, d.message);
}

static void test_errors(void **state)
{
        expect_error("tls_server_config:\n  cert_file: a\n  kye_file: b\n", 3, 3, "unknown key \"kye_file\"");
        expect_error("tls_config:\n  cert_file: a\n", 1, 1, "unknown key \"tls_config\"");
        expect_error("http_server_config:\n  headers:\n    X-Powered-By: me\n", 3, 5, "unknown key");
        expect_error("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", 3, 22, "not allowed");
        expect_error("http_server_config:\n  http2: maybe\n", 2, 10, "true or false");
        expect_error("rate_limit:\n  every: 1s\n", 2, 3, "unknown key");
        expect_error("tls_server_config:\n  cert_file: a\n", 2, 3, "key_file (or key) is required");
        expect_error("tls_server_config:\n  key_file: a\n", 2, 3, "cert_file (or cert) is required");
        expect_error("tls_server_config:\n  cert_file: a\n  cert: b\n  key_file: k\n", 3, 9, "not both");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Sometimes\n",
                     4, 21, "unknown client_auth_type");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n", 2, 3,
                     "without a client_auth_type");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n"
                     "  client_auth_type: VerifyClientCertIfGiven\n",
                     2, 3, "client_ca_file (or client_ca) is required");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n"
                     "  client_auth_type: RequestClientCert\n  client_allowed_sans: [x]\n",
                     5, 24, "needs client_auth_type");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n", 4, 16,
                     "unknown TLS version");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n"
                     "  max_version: TLS12\n",
                     5, 16, "lower than min_version");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [RC4]\n", 4, 19,
                     "unknown cipher suite");
        expect_error("tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [P-256]\n",
                     4, 23, "unknown curve");
        expect_error("tls_server_config:\n  cert_file: [a]\n", 2, 14, "expected a value");
        expect_error("basic_auth_users:\n  alice: secret\n", 2, 10, "not a bcrypt hash");
        expect_error("basic_auth_users:\n  \"a:b\": " HASH "\n", 2, 3, "holds a colon");
        expect_error("basic_auth_users: [alice]\n", 1, 19, "expected a mapping");
        expect_error("- a\n", 1, 1, "expected a mapping");
}

static void test_rate_limit_warns(void **state)
{
        struct config_web *w = NULL;
        struct diag d = { 0 };
        char **warnings = NULL;
        assert_int_equal(parse("rate_limit:\n  interval: 1s\n  burst: 20\n", &w, &d, &warnings), 0);
        assert_non_null(warnings);
        assert_non_null(strstr(warnings[0], "web.yml:2:3: rate_limit is not supported"));
        strv_free(warnings);
        config_web_free(w);
}

static enum web_auth_verdict check(struct web_auth *a, const char *value, bool *ok)
{
        struct web_auth_job *job = NULL;
        enum web_auth_verdict v = web_auth_check(a, value, value ? strlen(value) : 0, &job);
        if (v == WEB_AUTH_SLOW) {
                web_auth_job_run(job);
                *ok = web_auth_finish(a, job);
        }
        return v;
}

static void test_basic_auth(void **state)
{
        struct config_web *w = NULL;
        struct diag d = { 0 };
        assert_int_equal(parse("basic_auth_users:\n  alice: " HASH "\n  bob: " HASH "\n", &w, &d, NULL), 0);
        struct web_auth *a = (struct web_auth *)&d;
        assert_int_equal(web_auth_new(NULL, &a, &d), 0);
        assert_null(a);
        assert_int_equal(web_auth_new(w, &a, &d), 0);
        config_web_free(w);
        bool ok = true;
        assert_int_equal(check(a, NULL, &ok), WEB_AUTH_DENY);
        assert_int_equal(check(a, "Bearer x", &ok), WEB_AUTH_DENY);
        assert_int_equal(check(a, "Basic !!!!", &ok), WEB_AUTH_DENY);
        assert_int_equal(check(a, "Basic YWxpY2U=", &ok), WEB_AUTH_DENY); /* "alice": no colon */
        /* "alice:wrong", then remembered as wrong: no second bcrypt */
        assert_int_equal(check(a, "Basic YWxpY2U6d3Jvbmc=", &ok), WEB_AUTH_SLOW);
        assert_false(ok);
        assert_int_equal(check(a, "Basic YWxpY2U6d3Jvbmc=", &ok), WEB_AUTH_FAILED);
        /* "bob:wrong" is another user's failure */
        assert_int_equal(check(a, "Basic Ym9iOndyb25n", &ok), WEB_AUTH_SLOW);
        /* "mallory:correct horse": an unknown user costs the same job */
        ok = true;
        assert_int_equal(check(a, "Basic bWFsbG9yeTpjb3JyZWN0IGhvcnNl", &ok), WEB_AUTH_SLOW);
        assert_false(ok);
        assert_int_equal(check(a, "Basic bWFsbG9yeTpjb3JyZWN0IGhvcnNl", &ok), WEB_AUTH_FAILED);
        /* "alice:correct horse", then remembered; scheme case-insensitive */
        assert_int_equal(check(a, "Basic YWxpY2U6Y29ycmVjdCBob3JzZQ==", &ok), WEB_AUTH_SLOW);
        assert_true(ok);
        assert_int_equal(check(a, "basic  YWxpY2U6Y29ycmVjdCBob3JzZQ==", &ok), WEB_AUTH_OK);
        /* unpadded base64 is refused, as Go's StdEncoding (net/http's BasicAuth) */
        assert_int_equal(check(a, "Basic YWxpY2U6Y29ycmVjdCBob3JzZQ", &ok), WEB_AUTH_DENY);
        /* bob is not alice: his own verification */
        ok = false;
        assert_int_equal(check(a, "Basic Ym9iOmNvcnJlY3QgaG9yc2U=", &ok), WEB_AUTH_SLOW);
        assert_true(ok);
        /* a longer password with alice's as its prefix is not hers */
        ok = true;
        assert_int_equal(check(a, "Basic YWxpY2U6Y29ycmVjdCBob3JzZXg=", &ok), WEB_AUTH_SLOW);
        assert_false(ok);
        assert_int_equal(check(a, "Basic YWxpY2U6Y29ycmVjdCBob3JzZQ==", &ok), WEB_AUTH_OK);
        web_auth_free(a);
}

/* An authenticator with one user, alice, whose password is HASH's. */
static struct web_auth *alice_auth(void)
{
        struct config_web *w = NULL;
        struct diag d = { 0 };
        assert_int_equal(parse("basic_auth_users:\n  alice: " HASH "\n", &w, &d, NULL), 0);
        struct web_auth *a = NULL;
        assert_int_equal(web_auth_new(w, &a, &d), 0);
        config_web_free(w);
        return a;
}

static void test_basic_auth_jobs(void **state)
{
        struct web_auth *a = alice_auth();
        static const char right[] = "Basic YWxpY2U6Y29ycmVjdCBob3JzZQ==", wrong[] = "Basic YWxpY2U6d3Jvbmc=";
        /* a job given up (its connection closed) remembers nothing */
        struct web_auth_job *j1 = NULL, *j2 = NULL, *j3 = NULL, *j4 = NULL;
        assert_int_equal(web_auth_check(a, wrong, strlen(wrong), &j1), WEB_AUTH_SLOW);
        web_auth_job_free(j1);
        assert_int_equal(web_auth_check(a, wrong, strlen(wrong), &j1), WEB_AUTH_SLOW);
        /* two requests with the same credentials before either is verified:
         * the second learns the first's answer, right or wrong */
        assert_int_equal(web_auth_check(a, wrong, strlen(wrong), &j2), WEB_AUTH_SLOW);
        assert_int_equal(web_auth_check(a, right, strlen(right), &j3), WEB_AUTH_SLOW);
        assert_int_equal(web_auth_check(a, right, strlen(right), &j4), WEB_AUTH_SLOW);
        bool ok = true;
        assert_false(web_auth_job_known(a, j2, &ok));
        web_auth_job_run(j1);
        assert_false(web_auth_finish(a, j1));
        assert_true(web_auth_job_known(a, j2, &ok));
        assert_false(ok);
        web_auth_job_free(j2);
        assert_false(web_auth_job_known(a, j4, &ok));
        web_auth_job_run(j3);
        assert_true(web_auth_finish(a, j3));
        assert_true(web_auth_job_known(a, j4, &ok));
        assert_true(ok);
        web_auth_job_free(j4);
        /* a job that did not run (its work cancelled) is not a failure */
        assert_int_equal(web_auth_check(a, "Basic YWxpY2U6eA==", 18, &j1), WEB_AUTH_SLOW);
        assert_false(web_auth_finish(a, j1));
        assert_int_equal(web_auth_check(a, "Basic YWxpY2U6eA==", 18, &j1), WEB_AUTH_SLOW);
        web_auth_job_free(j1);
        web_auth_free(a);
}

/* Wrong passwords in numbers never push out the right one (kept apart
 * from the bounded table of failures), and the latest failures are
 * remembered. */
static void test_basic_auth_failures_bounded(void **state)
{
        struct web_auth *a = alice_auth();
        bool ok = false;
        assert_int_equal(check(a, "Basic YWxpY2U6Y29ycmVjdCBob3JzZQ==", &ok), WEB_AUTH_SLOW);
        assert_true(ok);
        for (int i = 0; i < 300; i++) {
                char cred[64], b64[128];
                snprintf(cred, sizeof(cred), "alice:guess%d", i);
                static const char tab[] =
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                size_t n = strlen(cred), o = 0;
                strcpy(b64, "Basic ");
                o = 6;
                for (size_t k = 0; k < n; k += 3) {
                        unsigned v = (unsigned char)cred[k] << 16;
                        if (k + 1 < n)
                                v |= (unsigned char)cred[k + 1] << 8;
                        if (k + 2 < n)
                                v |= (unsigned char)cred[k + 2];
                        b64[o++] = tab[v >> 18 & 63];
                        b64[o++] = tab[v >> 12 & 63];
                        b64[o++] = k + 1 < n ? tab[v >> 6 & 63] : '=';
                        b64[o++] = k + 2 < n ? tab[v & 63] : '=';
                }
                b64[o] = '\0';
                struct web_auth_job *j = NULL;
                assert_int_equal(web_auth_check(a, b64, o, &j), WEB_AUTH_SLOW);
                web_auth_job_run(j);
                assert_false(web_auth_finish(a, j));
                assert_int_equal(web_auth_check(a, b64, o, &j), WEB_AUTH_FAILED);
        }
        assert_int_equal(check(a, "Basic YWxpY2U6Y29ycmVjdCBob3JzZQ==", &ok), WEB_AUTH_OK);
        web_auth_free(a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_full),
                cmocka_unit_test(test_plain_and_inline),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_rate_limit_warns),
                cmocka_unit_test(test_basic_auth),
                cmocka_unit_test(test_basic_auth_jobs),
                cmocka_unit_test(test_basic_auth_failures_bounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
