/* libFuzzer target: what the labels writer takes from outside (product
 * names, driver versions, resource names, as NVML and the config give
 * them).  Every NUL-separated field is sanitised, and the result must be a
 * valid label value (checked: abort otherwise); fields are also tried as
 * keys, and the set is formatted.  Seeds: fuzz/corpus/fuzz-labels/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels/labels.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *copy = fuzz_cstr(data, size);
        if (!copy)
                return 0;
        struct dev_labels set = { 0 };
        for (size_t i = 0; i <= size;) {
                const char *field = copy + i;
                char *value = labels_value_sanitize(field);
                if (!labels_valid_value(value)) {
                        fprintf(stderr, "sanitised \"%s\" into invalid \"%s\"\n", field, value);
                        abort();
                }
                char key[320];
                snprintf(key, sizeof(key), "nvidia.com/%s", field);
                if (labels_valid_key(key))
                        dev_labels_put(&set, key, value);
                dev_labels_putf(&set, "devlet.io/field", "%s", value);
                free(value);
                i += strlen(field) + 1;
        }
        size_t len;
        free(labels_format(&set, &len));
        dev_labels_release(&set);
        free(copy);
        return 0;
}
