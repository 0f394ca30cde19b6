/* libFuzzer target: the CDI writer's inputs (resource and device names,
 * paths and env from the config and the host).  NUL-separated fields become
 * a spec's kind, device names, env, node, mount and hook paths; the name
 * checks run on each field; a spec that validates must render as YAML and
 * JSON (checked: abort otherwise), one that does not must be refused by the
 * renderer too.  Seeds: fuzz/corpus/fuzz-cdi/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi/spec.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *copy = fuzz_cstr(data, size);
        if (!copy)
                return 0;
        const char *f[8];
        size_t n = 0;
        for (size_t i = 0; i <= size && n < 8;) {
                f[n++] = copy + i;
                i += strlen(copy + i) + 1;
        }
        for (size_t i = n; i < 8; i++)
                f[i] = "";
        for (size_t i = 0; i < n; i++) {
                (void)cdi_valid_vendor(f[i]);
                (void)cdi_valid_class(f[i]);
                (void)cdi_valid_kind(f[i]);
                (void)cdi_valid_device_name(f[i]);
        }
        struct cdi_spec *s = cdi_spec_new(f[0]);
        struct cdi_device *d = cdi_spec_add_device(s, f[1]);
        cdi_edits_add_env(&d->edits, f[2], f[3]);
        const char *perms = f[6][0] ? f[6] : NULL;
        struct cdi_device_node *node = cdi_edits_add_node(&d->edits, f[4], f[5], perms);
        node->type = f[7][0] == 'b' ? 'b' : 'c';
        node->major = 1;
        node->minor = (long)strlen(f[7]);
        const char *opts[] = { "ro", f[7], NULL };
        cdi_edits_add_mount(&s->edits, f[5], f[4], perms, opts);
        const char *args[] = { f[4], f[3], NULL };
        cdi_edits_add_hook(&s->edits, "createContainer", f[4], args, NULL);
        if (f[2][0] == 'x')
                cdi_spec_add_device(s, f[2]);

        char *out = NULL;
        size_t len = 0;
        int valid = cdi_spec_validate(s, NULL) == 0;
        for (int fmt = 0; fmt < 2; fmt++) {
                enum cdi_format format = fmt ? CDI_FORMAT_JSON : CDI_FORMAT_YAML;
                struct diag diag = { 0 };
                int r = cdi_spec_render(s, format, &out, &len, &diag);
                if ((r == 0) != valid) {
                        fprintf(stderr, "validate: %d, render: %d (%s)\n", valid, r,
                                diag.message);
                        abort();
                }
                free(out);
                out = NULL;
        }
        if (valid) {
                (void)cdi_spec_min_version(s);
                free(cdi_spec_file_name(s, CDI_FORMAT_YAML));
        }
        cdi_spec_free(s);
        free(copy);
        return 0;
}
