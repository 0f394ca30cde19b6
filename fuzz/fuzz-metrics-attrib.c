/* libFuzzer target for the metrics attribution parsers: what a container
 * runtime, the kernel or the kubelet hands devlet.  The first byte picks the
 * parser — an OCI config.json (attr_spec_parse, with every family's
 * hints), a /proc/<pid>/cgroup text (attr_cgroup_parse), a
 * ListPodResourcesResponse (attr_podres_unpack), an env var list or CDI
 * name, or a device reference resolved against a small unit table; the
 * rest is the input.  None may crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "metrics/attrib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g0[] = "GPU-0", i0[] = "0", g1[] = "GPU-1", i1[] = "1";
static char m0[] = "MIG-1a", m0old[] = "MIG-GPU-1/1/0", i10[] = "1:0";
static char *names0[] = { g0, NULL }, *local0[] = { i0, NULL };
static char *names1[] = { g1, NULL }, *local1[] = { i1, NULL };
static char *names2[] = { m0, m0old, NULL }, *local2[] = { i10, NULL };
static const struct dev_attr_hints hints = { .cdi_vendor = "example.com" };
static const struct dev_unit units[] = {
        { .hints = &hints, .names = names0, .local_names = local0, .whole = true },
        { .hints = &hints, .names = names1, .local_names = local1, .whole = true },
        { .hints = &hints, .names = names2, .local_names = local2 },
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
                const struct dev_attr_hints *all[8];
                size_t n = dev_attr_hints_all(all, 8);
                if (attr_spec_parse((const char *)data, size, "id", "cdi.k8s.io/", all, n < 8 ? n : 8,
                                    &s, NULL) == 0)
                        attr_spec_free(s);
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
                strv_free(attr_cdi_device(text, "nvidia.com", attr_visible_devices(text, NULL)));
                break;
        default: {
                size_t out[4];
                attr_resolve(units, 3, &hints, text, true, out, 4);
                break;
        }
        }
        free(text);
        return 0;
}
