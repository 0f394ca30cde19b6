/* Internal to devices/nvidia/: what NVML says about the node, read once at
 * start-up: versions, GPUs, their MIG devices, and the link between every
 * pair of GPUs.  Read-only afterwards (the health thread reads handles and
 * UUIDs from it). */
#ifndef DEVLET_DEVICES_NVIDIA_INVENTORY_H
#define DEVLET_DEVICES_NVIDIA_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/alloc.h"
#include "devices/nvidia/nvml-lib.h"

#define NVML_PROFILE_MAX 32

struct nvml_mig_dev {
        unsigned index; /* NVML's MIG device index within the GPU: NVIDIA's "<gpu>:<index>" */
        nvmlDevice_t handle;
        unsigned gi, ci;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        char profile[NVML_PROFILE_MAX]; /* "1g.10gb", "1c.3g.40gb", "1g.10gb+me" */
        unsigned long long memory_mib;
        unsigned multiprocessors;
        /* nvmlDeviceGetAttributes' slice and shared engine counts (GFD's MIG
         * labels); 0 when NVML does not tell */
        unsigned gi_slices, ci_slices;
        unsigned copy_engines, decoders, encoders, jpegs, ofas;
        int gi_cap, ci_cap; /* /dev/nvidia-caps/nvidia-cap<N> minors; -1 unknown */
        /* its GPU instance: NVML's profile ID and placement (memory slices
         * gi_start .. gi_start + gi_size - 1); gi_profile_id -1: unknown */
        int gi_profile_id;
        unsigned gi_start, gi_size;
};

struct nvml_gpu {
        unsigned index;
        nvmlDevice_t handle; /* NULL when NVML gave none */
        bool lost;           /* NVML counted it but could not tell who it is at start */
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE]; /* "" when lost */
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "0000:3b:00.0"; "" unknown */
        int minor;                                      /* /dev/nvidia<minor>; -1 unknown */
        unsigned long long memory_bytes;                /* NVML's total (v1) */
        int cc_major, cc_minor;                         /* -1 unknown */
        unsigned architecture;                          /* NVML_DEVICE_ARCH_* */
        int brand;                                      /* nvmlBrandType_t; -1 unknown */
        char pcie_root[32]; /* its PCIe root complex, "pci0000:3a" (sysfs); "" unknown */
        /* on a multi-node NVLink fabric: "<cluster UUID>.<clique ID>" (GFD's
         * nvidia.com/gpu.clique); "" when NVML tells none */
        char clique[64];
        /* how it reaches malloc'd system memory, as NVIDIA's DRA driver
         * names it: "ATS" (Grace: GH200, GB200), "HMM", "None"; "" when
         * NVML tells none (older drivers, no support) */
        char addressing_mode[8];
        int numa_node;                                  /* -1 unknown */
        bool mig_capable, mig_enabled;
        bool gpm; /* NVML's GPU Performance Monitoring works: the DCGM_FI_PROF_* families */
        struct nvml_mig_dev *migs;
        size_t n_migs;
        /* the profiles the GPU can make, one per GPU instance profile, in
         * NVML's profile order: NVIDIA's default mig-<profile> resources */
        char (*mig_profiles)[NVML_PROFILE_MAX];
        size_t n_mig_profiles;
};

struct nvml_inventory {
        char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE]; /* "" unknown */
        int cuda_version;                                            /* 12040; 0 unknown */
        struct nvml_gpu *gpus;
        size_t n_gpus;
        /* n_gpus * n_gpus, [i * n + j]; the diagonal is unused */
        unsigned *nvlinks;
        enum alloc_pcie_level *pcie;
        struct alloc_topology *topology; /* alloc_link_score of each pair; NULL without GPUs */
        bool mig_minors_found;           /* <proc_root>/driver/nvidia-caps/mig-minors was read */
};

struct nvml_inventory_env {
        const char *sysfs_root; /* "/sys" */
        const char *proc_root;  /* "/proc" */
};

/* Reads everything from an initialised NVML.  Returns 0 and *out, or
 * -EIO with diag when the GPUs cannot be counted.  A GPU whose identity
 * cannot be read is kept, marked lost. */
int nvml_inventory_load(const struct nvml_lib *lib, const struct nvml_inventory_env *env,
                        struct nvml_inventory **out, struct diag *diag);
void nvml_inventory_free(struct nvml_inventory *inv);

/* NVIDIA's MIG profile name (go-nvlib's): "<g>g.<gb>gb", "<c>c.<g>g.<gb>gb"
 * when the compute instance is smaller, "+me" for the media-extension GPU
 * instance profiles.  gi_profile and ci_profile are the
 * NVML_*_INSTANCE_PROFILE_* indices; gb is the instance's memory as a
 * multiple of an eighth of the GPU's, rounded up, times the GPU's memory in
 * whole GiB.  Returns 0, or -EINVAL for an unknown profile index. */
int nvml_mig_profile_name(unsigned gi_profile, unsigned ci_profile, unsigned long long mig_mib,
                          unsigned long long gpu_bytes, char *buf, size_t size);

/* The capability device minor for "gpu<gpu>/gi<gi>/access" (ci < 0) or
 * "gpu<gpu>/gi<gi>/ci<ci>/access" in the text of nvidia-caps/mig-minors;
 * -1 when not listed. */
int nvml_mig_minor_lookup(const char *text, int gpu, unsigned gi, int ci);

/* nvidia-smi topo -m's name of a PCIe level: "X", "PIX", "PXB", "PHB",
 * "NODE", "SYS", "?". */
const char *nvml_pcie_level_name(enum alloc_pcie_level level);

/* "0000:3b:00.0" from NVML's "00000000:3B:00.0" (lower case, 4-digit
 * domain). */
void nvml_bus_id_normalize(const char *in, char *out, size_t size);

#endif
