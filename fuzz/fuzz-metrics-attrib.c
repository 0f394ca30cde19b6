/* libFuzzer target for the metrics attribution parsers: what a container
 * runtime, the kernel or the kubelet hands devlet.  The first byte picks the
 * parser — an OCI config.json (attr_spec_parse), a /proc/<pid>/cgroup text
 * (attr_cgroup_parse), a ListPodResourcesResponse (attr_podres_unpack), an
 * NVIDIA_VISIBLE_DEVICES value or a device reference resolved against a
 * small unit table; the rest is the input.  None may crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "metrics/attrib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct attr_unit units[] = {
        { "GPU-0", "GPU-0", 0, -1, 0, 0, 0 },
        { "GPU-1", "GPU-1", 1, -1, 1, 0, 0 },
        { "MIG-1a", "GPU-1", 1, 0, 1, 1, 0 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size == 0)
                return 0;
        unsigned which = data[0] % 5;
        data++;
        size--;
        char *text = xstrndup((const char *)data, size);
        switch (which) {
        case 0: {
                struct attr_spec *s = NULL;
                char *err = NULL;
                if (attr_spec_parse((const char *)data, size, "id", "cdi.k8s.io/", &s, &err) == 0)
                        attr_spec_free(s);
                free(err);
                break;
        }
        case 1: {
                char id[ATTR_ID_LEN + 1];
                attr_cgroup_parse(text, id);
                break;
        }
        case 2: {
                struct attr_podres *p = NULL;
                if (attr_podres_unpack(data, size, &p) == 0)
                        attr_podres_free(p);
                break;
        }
        case 3:
                strv_free(attr_cdi_device(text, attr_visible_devices(text, NULL)));
                break;
        default: {
                size_t out[4];
                attr_resolve(units, 3, text, true, out, 4);
                break;
        }
        }
        free(text);
        return 0;
}
