/* libFuzzer target for amdgpu's gpu_metrics parser: any bytes as the
 * sysfs file's content.  The table is the kernel's, but a truncated file,
 * a layout from a newer kernel or a half-written one must never read past
 * what was read or crash; the parsed values must be numbers or absent. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "devices/amd/gpu-metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > AMD_GM_MAX_SIZE)
                return 0;
        /* a copy of exactly size bytes, so ASan sees any read past them */
        uint8_t *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        for (size_t i = 0; i < size; i++)
                copy[i] = data[i];
        struct amd_gpu_metrics m;
        int r = amd_gpu_metrics_parse(copy, size, &m);
        if (r == 0 && !isnan(m.energy_acc) && m.energy_acc < 0)
                abort();
        for (size_t k = 0; k < AMD_GM_XCP; k++)
                if (!isnan(m.xcp[k].gfx_busy_inst[0]) && m.xcp[k].gfx_busy_inst[0] > 4294967295.0)
                        abort();
        free(copy);
        return 0;
}
