/* libFuzzer target for the AMD backend's sysfs parsers: any bytes (as a
 * NUL-terminated text, as sysfs hands them after amd_read_text) go to the
 * KFD properties, RAS count and DPM level parsers.  sysfs is the kernel's,
 * but a truncated or half-written file must never crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "devices/amd/inventory.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = fuzz_cstr(data, size);
        if (!text)
                return 0;
        uint64_t v, ue, ce;
        unsigned mhz;
        static const char *const keys[] = { "drm_render_minor", "simd_count", "unique_id",
                                            "location_id", "type", "node_to", "weight" };
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                (void)amd_kfd_property(text, keys[i], &v);
        (void)amd_ras_parse(text, &ue, &ce);
        (void)amd_dpm_current(text, &mhz);
        free(text);
        return 0;
}
