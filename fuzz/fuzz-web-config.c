/* libFuzzer target for the web configuration parser (config/web.c): the
 * input is the file's text.  Checks what the endpoint relies on (abort
 * otherwise): a refusal says where; an accepted config with TLS names a
 * certificate and a key, one way each; versions lie within TLS 1.0..1.3,
 * the minimum first; every header has a name and a value without a
 * control byte; every user a name without a colon and a 60-byte bcrypt
 * hash.  Seeds (fuzz/corpus/fuzz-web-config/): exporter-toolkit's example
 * and each key. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "config/web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "web-config: %s\n", what);
                abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct config_web *w = NULL;
        struct diag diag = { 0 };
        char **warnings = NULL;
        int r = config_web_parse("web.yml", (const char *)data, size, &w, &warnings, &diag);
        if (r < 0) {
                check(r == -EINVAL && diag.message[0] && !w, "a refusal without a reason");
        } else {
                check(w != NULL, "no config");
                if (w->tls) {
                        check(!w->cert_file != !w->cert, "certificate given twice or not at all");
                        check(!w->key_file != !w->key, "key given twice or not at all");
                }
                check(w->min_version >= 0x0301 && w->min_version <= w->max_version &&
                              w->max_version <= 0x0304,
                      "TLS versions");
                for (size_t i = 0; i < w->n_headers; i++) {
                        check(w->headers[i].name[0] && w->headers[i].value[0], "empty header");
                        for (const char *p = w->headers[i].value; *p; p++)
                                check((unsigned char)*p >= ' ' && *p != 0x7f, "control in a header");
                }
                for (size_t i = 0; i < w->n_users; i++) {
                        check(w->users[i].name[0] && !strchr(w->users[i].name, ':'), "user name");
                        check(strlen(w->users[i].hash) == 60, "bcrypt hash");
                }
        }
        config_web_free(w);
        strv_free(warnings);
        return 0;
}
