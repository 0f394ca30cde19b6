/* What AMD's DRA driver, gpu.amd.com, publishes for each GPU and partition
 * (struct dev_model), from the inventory.  Names, types and values are
 * those of ROCm/k8s-gpu-dra-driver (cmd/gpu-kubeletplugin/deviceinfo.go,
 * pkg/amdgpu, docs/driver-attributes.md):
 *
 *   name  "gpu-<card index>-<render index>" for a GPU and a partition alike;
 *   type  "amdgpu" for a GPU in SPX or without partitioning,
 *         "amdgpu-partition" for every partition of one split further;
 *   productName (sysfs product_name, spaces as '_', parentheses dropped),
 *   deviceID ("0x74a1"), driverVersion (the module's version, its first
 *   three numbers), driverVersionFull and driverSrcVersion (as the module
 *   says), partitionProfile ("cpx_nps4"), computePartition and
 *   memoryPartition ("cpx", "nps4": its auto-partition names), numaNode,
 *   cardIndex and renderIndex, family (the node labeller's, "AI"), the
 *   standard resource.kubernetes.io/pciBusID (the GPU's, for a partition
 *   too), pcieRoot and numaNode;
 *   capacity memory (the KFD memory bank; a GPU's VRAM when KFD tells
 *   none), computeUnits and simdUnits.
 *
 * devlet's own additions, where AMD's driver has no name: gfxTarget
 * ("gfx942", from KFD's gfx_target_version) and xgmiHiveID (the XGMI hive
 * the GPU belongs to, in decimal as amdgpu's xgmi_hive_id file writes it;
 * absent outside a hive).  A unit whose card or render node sysfs does
 * not name has no model (AMD's driver skips it).  Pure. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

/* AMD's product name: spaces as '_', parentheses dropped. */
static char *product_name(const char *s)
{
        char *out = xstrdup(s), *o = out;
        for (; *s; s++)
                if (*s == ' ')
                        *o++ = '_';
                else if (*s != '(' && *s != ')')
                        *o++ = *s;
        *o = '\0';
        return out;
}

/* LLVM's processor name of a KFD gfx_target_version: 90402 -> "gfx942",
 * 90010 -> "gfx90a", 110000 -> "gfx1100".  False when v is 0 or odd. */
static bool gfx_target(unsigned v, char *buf, size_t size)
{
        unsigned major = v / 10000, minor = v / 100 % 100, step = v % 100;
        if (!major || minor > 15 || step > 15)
                return false;
        snprintf(buf, size, "gfx%u%x%x", major, minor, step);
        return true;
}

struct dev_model *amd_model(const struct amd_inventory *inv, size_t gpu, size_t part)
{
        const struct amd_gpu *g = &inv->gpus[gpu];
        const struct amd_part *p = &g->parts[part];
        if (p->card < 0 || p->render < 0)
                return NULL;
        char buf[64];
        snprintf(buf, sizeof(buf), "gpu-%d-%d", p->card, p->render);
        struct dev_model *m = dev_model_new(buf);
        bool split = g->n_parts > 1 || (g->compute[0] && strcmp(g->compute, "spx") != 0);
        dev_model_string(m, "type", split ? "amdgpu-partition" : "amdgpu");
        _cleanup_free_ char *product = product_name(g->product_name);
        dev_model_string(m, "productName", product);
        if (g->device_id[0]) {
                snprintf(buf, sizeof(buf), "0x%s", g->device_id);
                dev_model_string(m, "deviceID", buf);
        }
        dev_model_string(m, "family", amd_family_of(g->gfx_target_version));
        if (gfx_target(g->gfx_target_version, buf, sizeof(buf)))
                dev_model_string(m, "gfxTarget", buf);
        dev_model_version_loose(m, "driverVersion", inv->driver_version);
        dev_model_string(m, "driverVersionFull", inv->driver_version);
        dev_model_string(m, "driverSrcVersion", inv->driver_srcversion);
        dev_model_string(m, "partitionProfile", amd_gpu_partition_type(g, buf, sizeof(buf)));
        dev_model_string(m, "computePartition", g->compute);
        dev_model_string(m, "memoryPartition", g->memory);
        if (g->numa_node >= 0) {
                dev_model_int(m, "numaNode", g->numa_node);
                dev_model_int(m, DEV_ATTR_NUMA_NODE, g->numa_node);
        }
        dev_model_int(m, "cardIndex", p->card);
        dev_model_int(m, "renderIndex", p->render);
        if (g->xgmi_hive_id) {
                snprintf(buf, sizeof(buf), "%" PRIu64, g->xgmi_hive_id);
                dev_model_string(m, "xgmiHiveID", buf);
        }
        dev_model_string(m, DEV_ATTR_PCI_BUS_ID, g->bdf);
        dev_model_string(m, DEV_ATTR_PCIE_ROOT, g->pcie_root);

        uint64_t vram = p->vram ? p->vram : g->n_parts == 1 ? g->vram_total : 0;
        if (vram)
                dev_model_capacity_int(m, "memory", vram);
        if (p->simd_count && p->simd_per_cu)
                dev_model_capacity_int(m, "computeUnits", p->simd_count / p->simd_per_cu);
        if (p->simd_count)
                dev_model_capacity_int(m, "simdUnits", p->simd_count);
        return m;
}
