/* A GPU's firmware versions, for AMD's node labeller's firmware labels:
 * amdgpu's <gpu>/fw_version/<block>_fw_version files ("0x0000009d"), for
 * the blocks AMD's labeller names (VCE, UVD, MC, ME, PFP, CE, RLC, MEC,
 * SMC, SDMA0, in its spelling).  A block the GPU does not have reads 0,
 * as the driver writes it; a file that is missing or holds garbage leaves
 * the block unknown (no label).
 *
 * AMD's labeller asks the driver through libdrm (an AMDGPU_INFO ioctl on
 * the card, which also gives each block's feature version); devlet opens
 * no GPU for a label, so it writes the `fw` labels and not the `feat`
 * ones.  Pure reads; never logs. */
#include <stdio.h>
#include <stdlib.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/inventory.h"

const struct amd_fw_block amd_fw_blocks[AMD_FW_BLOCKS] = {
        { "VCE", "vce" }, { "UVD", "uvd" }, { "MC", "mc" },   { "ME", "me" },   { "PFP", "pfp" },
        { "CE", "ce" },   { "RLC", "rlc" }, { "MEC", "mec" }, { "SMC", "smc" }, { "SDMA0", "sdma" },
};

void amd_firmware_read(struct amd_gpu *g)
{
        for (size_t i = 0; i < AMD_FW_BLOCKS; i++) {
                _cleanup_free_ char *path = xasprintf("%s/fw_version/%s_fw_version", g->sysfs_dir,
                                                      amd_fw_blocks[i].file);
                uint64_t v;
                g->fw[i].known = amd_read_u64(path, &v) == 0 && v <= UINT32_MAX;
                g->fw[i].version = g->fw[i].known ? (uint32_t)v : 0;
        }
}
