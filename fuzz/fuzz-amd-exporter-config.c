/* libFuzzer target for AMD's exporter config.json parser
 * (devices/amd/exporter-config.c): the input is the file's text.  Checks
 * what the AMD sampler relies on (abort otherwise): a refusal says where;
 * an accepted config has a prefix (maybe empty) that is a metric name
 * prefix, fields devlet has families for, only the optional labels it
 * gives, at most 10 custom labels, in name/value pairs, each name a
 * lower-case Prometheus label name; the pod labels in pairs, at most 64
 * of them; at most 64 warnings whatever the input.  Seeds
 * (fuzz/corpus/fuzz-amd-exporter-config/): AMD's example shape and each
 * key. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "devices/amd/exporter-config.h"
#include "devices/amd/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "amd-exporter-config: %s\n", what);
                abort();
        }
}

static bool label_name(const char *s)
{
        if (!*s || isdigit((unsigned char)*s) || strncmp(s, "__", 2) == 0)
                return false;
        for (; *s; s++)
                if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_'))
                        return false;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct amd_exporter_config *c = NULL;
        struct diag diag = { 0 };
        char **warnings = NULL;
        int r = amd_exporter_config_parse("config.json", (const char *)data, size, &c, &warnings, &diag);
        if (r < 0) {
                check(r == -EINVAL && diag.message[0] && !c, "a refusal without a reason");
        } else {
                check(c && c->prefix, "no config");
                for (const char *p = c->prefix; *p; p++)
                        check(isalnum((unsigned char)*p) || *p == '_' || *p == ':', "prefix");
                check(!isdigit((unsigned char)c->prefix[0]), "prefix starts with a digit");
                for (size_t i = 0; c->fields && c->fields[i]; i++)
                        check(amd_metrics_field_known(c->fields[i]), "a field without a family");
                for (size_t i = 0; c->labels && c->labels[i]; i++)
                        check(strcmp(c->labels[i], "gpu_uuid") == 0 ||
                                      strcmp(c->labels[i], "driver_version") == 0 ||
                                      strcmp(c->labels[i], "vbios_version") == 0,
                              "an optional label devlet does not give");
                size_t n = strv_len(c->custom);
                check(n % 2 == 0 && n / 2 <= AMD_EXPORTER_CUSTOM_LABELS_MAX, "custom labels");
                for (size_t i = 0; i < n; i += 2)
                        check(label_name(c->custom[i]), "custom label name");
                n = strv_len(c->pod_labels);
                check(n % 2 == 0 && n / 2 <= AMD_EXPORTER_POD_LABELS_MAX, "pod labels");
                /* a few lines a kind of warning, never one per entry */
                check(strv_len(warnings) <= 64, "warnings");
        }
        amd_exporter_config_free(c);
        strv_free(warnings);
        return 0;
}
