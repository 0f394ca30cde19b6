/* What NVIDIA's DRA driver, gpu.nvidia.com, publishes for each GPU and MIG
 * device (struct dev_model), from the inventory.  Names, types and values
 * are those of the driver's gpu-kubelet-plugin (kubernetes-sigs/
 * dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu: deviceinfo.go,
 * mig.go, nvlib.go):
 *
 *   GPU  "gpu-<minor>"; type "gpu", uuid, productName, brand and
 *        architecture (go-nvlib's strings: "Nvidia", "Hopper"),
 *        cudaComputeCapability, driverVersion and cudaDriverVersion as
 *        versions normalised as the driver's semver library does
 *        ("580.65.06" -> "580.65.6", CUDA 12080 -> "12.8" -> "12.8.0"),
 *        the standard resource.kubernetes.io/pciBusID, pcieRoot and
 *        numaNode, and pcieBusID (the driver's name for the bus ID before
 *        the standard one), addressingMode ("ATS" on Grace: GH200, GB200;
 *        "HMM"; "None"; left out when NVML cannot tell, where the driver
 *        publishes ""); capacity memory (bytes).
 *   MIG  "gpu-<minor>-mig-<profile without dots>-<GI profile ID>-<placement
 *        start>"; type "mig", uuid, parentUUID, profile and the GPU's
 *        attributes; capacity multiprocessors, copyEngines, decoders,
 *        encoders, jpegEngines, ofaEngines, memory and memorySlice<i> (1
 *        for each memory slice it holds).
 *
 * devlet's own additions, where the driver has no name: cliqueID (the
 * GPU's multi-node NVLink clique, "<cluster UUID>.<clique ID>" as GFD's
 * nvidia.com/gpu.clique label) and, for a compute instance smaller than
 * its GPU instance (which the driver does not publish), "-<CI ID>" after
 * the MIG name so that every name stays unique.  A GPU NVML lost at start,
 * or whose minor number it does not tell, has no model (the driver fails
 * on it as well).  Pure: never calls NVML. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/sample.h"

#define MIB (1024ULL * 1024ULL)

/* go-nvlib's GetArchitectureAsString */
static const char *arch_name(unsigned arch)
{
        switch (arch) {
        case NVML_DEVICE_ARCH_KEPLER: return "Kepler";
        case NVML_DEVICE_ARCH_MAXWELL: return "Maxwell";
        case NVML_DEVICE_ARCH_PASCAL: return "Pascal";
        case NVML_DEVICE_ARCH_VOLTA: return "Volta";
        case NVML_DEVICE_ARCH_TURING: return "Turing";
        case NVML_DEVICE_ARCH_AMPERE: return "Ampere";
        case NVML_DEVICE_ARCH_ADA: return "Ada Lovelace";
        case NVML_DEVICE_ARCH_HOPPER: return "Hopper";
        case NVML_DEVICE_ARCH_BLACKWELL: return "Blackwell";
        case NVML_DEVICE_ARCH_UNKNOWN: return "Unknown";
        }
        return NULL;
}

/* go-nvlib's GetBrandAsString */
const char *nvidia_brand_name(int brand)
{
        static const char *const names[] = {
                [NVML_BRAND_UNKNOWN] = "Unknown",
                [NVML_BRAND_QUADRO] = "Quadro",
                [NVML_BRAND_TESLA] = "Tesla",
                [NVML_BRAND_NVS] = "NVS",
                [NVML_BRAND_GRID] = "Grid",
                [NVML_BRAND_GEFORCE] = "GeForce",
                [NVML_BRAND_TITAN] = "Titan",
                [NVML_BRAND_NVIDIA_VAPPS] = "NvidiaVApps",
                [NVML_BRAND_NVIDIA_VPC] = "NvidiaVPC",
                [NVML_BRAND_NVIDIA_VCS] = "NvidiaVCS",
                [NVML_BRAND_NVIDIA_VWS] = "NvidiaVWS",
                [NVML_BRAND_NVIDIA_CLOUD_GAMING] = "NvidiaCloudGaming",
                [NVML_BRAND_QUADRO_RTX] = "QuadroRTX",
                [NVML_BRAND_NVIDIA_RTX] = "NvidiaRTX",
                [NVML_BRAND_NVIDIA] = "Nvidia",
                [NVML_BRAND_GEFORCE_RTX] = "GeForceRTX",
                [NVML_BRAND_TITAN_RTX] = "TitanRTX",
        };
        return brand >= 0 && (size_t)brand < ARRAY_SIZE(names) ? names[brand] : NULL;
}

/* The attributes a MIG device shares with its GPU. */
static void common_attrs(struct dev_model *m, const struct nvml_inventory *inv,
                         const struct nvml_gpu *g)
{
        dev_model_string(m, "productName", g->name);
        dev_model_string(m, "brand", nvidia_brand_name(g->brand));
        dev_model_string(m, "architecture", arch_name(g->architecture));
        if (g->cc_major >= 0) {
                char cc[24];
                snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
                dev_model_version_loose(m, "cudaComputeCapability", cc);
        }
        dev_model_version_loose(m, "driverVersion", inv->driver_version);
        if (inv->cuda_version > 0) {
                char cuda[24];
                snprintf(cuda, sizeof(cuda), "%d.%d", inv->cuda_version / 1000,
                         inv->cuda_version % 1000 / 10);
                dev_model_version_loose(m, "cudaDriverVersion", cuda);
        }
        if (g->bus_id[0]) {
                dev_model_string(m, DEV_ATTR_PCI_BUS_ID, g->bus_id);
                dev_model_string(m, "pcieBusID", g->bus_id);
        }
        dev_model_string(m, DEV_ATTR_PCIE_ROOT, g->pcie_root);
        if (g->numa_node >= 0)
                dev_model_int(m, DEV_ATTR_NUMA_NODE, g->numa_node);
        dev_model_string(m, "cliqueID", g->clique);
        dev_model_string(m, "addressingMode", g->addressing_mode);
}

static struct dev_model *gpu_model(const struct nvml_inventory *inv, const struct nvml_gpu *g)
{
        char name[32];
        snprintf(name, sizeof(name), "gpu-%d", g->minor);
        struct dev_model *m = dev_model_new(name);
        dev_model_string(m, "type", "gpu");
        dev_model_string(m, "uuid", g->uuid);
        common_attrs(m, inv, g);
        if (g->memory_bytes)
                dev_model_capacity_int(m, "memory", g->memory_bytes);
        return m;
}

/* The profile as the driver puts it in a name: dots dropped, then a DNS
 * label ("1g.10gb+me" -> "1g10gb-me"). */
static char *profile_label(const char *profile)
{
        _cleanup_free_ char *s = xstrdup(profile);
        char *o = s;
        for (const char *c = profile; *c; c++)
                if (*c != '.')
                        *o++ = *c;
        *o = '\0';
        return dev_model_label(s);
}

static struct dev_model *mig_model(const struct nvml_inventory *inv, const struct nvml_gpu *g,
                                   const struct nvml_mig_dev *mg)
{
        _cleanup_free_ char *label = profile_label(mg->profile[0] ? mg->profile : "mig");
        _cleanup_free_ char *name = NULL;
        if (mg->gi_profile_id >= 0)
                name = xasprintf("gpu-%d-mig-%s-%d-%u", g->minor, label, mg->gi_profile_id,
                                 mg->gi_start);
        else /* NVML tells no placement: the instance IDs keep it unique */
                name = xasprintf("gpu-%d-mig-%s-gi%u", g->minor, label, mg->gi);
        if (mg->ci_slices && mg->gi_slices && mg->ci_slices < mg->gi_slices) {
                char *t = xasprintf("%s-%u", name, mg->ci);
                free(name);
                name = t;
        }
        struct dev_model *m = dev_model_new(name);
        dev_model_string(m, "type", "mig");
        dev_model_string(m, "uuid", mg->uuid);
        dev_model_string(m, "parentUUID", g->uuid);
        dev_model_string(m, "profile", mg->profile);
        common_attrs(m, inv, g);
        dev_model_capacity_int(m, "multiprocessors", mg->multiprocessors);
        dev_model_capacity_int(m, "copyEngines", mg->copy_engines);
        dev_model_capacity_int(m, "decoders", mg->decoders);
        dev_model_capacity_int(m, "encoders", mg->encoders);
        dev_model_capacity_int(m, "jpegEngines", mg->jpegs);
        dev_model_capacity_int(m, "ofaEngines", mg->ofas);
        dev_model_capacity_int(m, "memory", mg->memory_mib * MIB);
        for (unsigned i = 0; mg->gi_profile_id >= 0 && i < mg->gi_size && i < 16; i++) {
                char slice[24];
                snprintf(slice, sizeof(slice), "memorySlice%u", mg->gi_start + i);
                dev_model_capacity_int(m, slice, 1);
        }
        return m;
}

struct dev_model *nvidia_model(const struct nvml_inventory *inv, size_t gpu, int mig)
{
        const struct nvml_gpu *g = &inv->gpus[gpu];
        if (g->lost || g->minor < 0)
                return NULL;
        return mig >= 0 ? mig_model(inv, g, &g->migs[mig]) : gpu_model(inv, g);
}
