/* GFD's labels for NVIDIA GPUs, from plain facts about the node.
 *
 * The facts are filled from the NVIDIA backend's inventory (the backend's
 * `labels` member, nvidia_backend_labels) or by hand (tests), so the rules
 * here need neither NVML nor a backend. */
#ifndef DEVLET_DEVICES_NVIDIA_GFD_LABELS_H
#define DEVLET_DEVICES_NVIDIA_GFD_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "devices/device.h"

struct nvidia_gfd_mig {
        const char *profile; /* NVIDIA's profile name: "1g.10gb", "1g.10gb+me" */
        uint64_t memory_mib;
        unsigned multiprocessors;
        unsigned slices_gi, slices_ci;
        unsigned engines_copy, engines_decoder, engines_encoder, engines_jpeg, engines_ofa;
};

struct nvidia_gfd_gpu {
        const char *name; /* "NVIDIA H100 80GB HBM3" */
        uint64_t memory_mib; /* 0: unknown */
        int cc_major, cc_minor; /* 0 or less: unknown */
        bool mig_capable, mig_enabled;
        const struct nvidia_gfd_mig *migs;
        size_t n_migs;
        const char *pci_class; /* "0x030200"; NULL: sysfs cannot tell */
        bool vgpu;             /* its PCI config space carries NVIDIA's vGPU signature */
        /* "<cluster UUID>.<clique ID>" when NVML's fabric registration is
         * complete (inventory.c); NULL or "": not on a multi-node fabric */
        const char *clique;
};

struct nvidia_gfd_node {
        const char *driver_version; /* "550.54.15"; NULL or "": unknown */
        int cuda_version;           /* NVML's: 12040 = 12.4; 0: unknown */
        bool mps_ready;             /* every MPS resource's control daemon is ready */
        const struct nvidia_gfd_gpu *gpus;
        size_t n_gpus;
};

/* GFD's labels for the node (nothing when it has no GPU): gpu.machine (the
 * machine-type file), the CUDA driver and runtime versions, mig.capable,
 * mps.capable, vgpu.present, gpu.mode (the PCI class all GPUs share;
 * "unknown" when one cannot tell or they differ, with a warning for the
 * latter), the full-GPU labels (nvidia.com/gpu.product, count,
 * replicas, sharing-strategy, memory, family, compute.major/minor) and, for
 * the single and mixed MIG strategies, mig.strategy and the MIG labels;
 * gpu.clique when every GPU on a multi-node NVLink fabric names the same
 * clique (GFD's rule; different ones are a warning and no label).
 * Sharing comes from cfg->sharing (GFD ignores resource renaming); MPS
 * never shares a MIG device (NVIDIA's MPS daemon skips them), so MIG
 * labels under MPS say replicas 1 and sharing-strategy none.  Values
 * are not yet sanitised (labels/ does that).  Facts GFD would fail
 * on become warnings (appended to *warnings when warnings is not NULL) and
 * the labels they feed are left out. */
void nvidia_gfd_labels(const struct nvidia_gfd_node *node, const struct devlet_config *cfg,
                       struct dev_labels *out, char ***warnings);

/* GFD's gpu.mode for a PCI class: "graphics" (0x030000), "compute"
 * (0x030200), else "unknown". */
const char *nvidia_gpu_mode(const char *pci_class);

/* GFD's architecture family for a compute capability: "kepler", "maxwell",
 * "pascal", "volta", "turing", "ampere", "ada-lovelace", "hopper",
 * "blackwell", ...; "undefined" when unknown. */
const char *nvidia_gpu_family(int cc_major, int cc_minor);

struct dev_backend;

/* The backend's `labels` member: GFD's labels from the inventory NVML filled
 * at start-up (GFD asks NVML again each time; devlet re-reads it when the
 * config is reloaded).  GPUs NVML lost at start-up are left out; gpu.mode
 * and vgpu.present come from each GPU's PCI class and config space in
 * sysfs. */
void nvidia_backend_labels(struct dev_backend *b, const struct devlet_config *cfg,
                           struct dev_labels *out, char ***warnings);

/* GFD's vGPU test on a PCI config space: the capability list holds a
 * vendor-specific capability whose byte 3 is 0x56 (vGPU) or byte 4 0x46
 * (GRID).  Bounded by len; a looping list ends the walk. */
bool nvidia_pci_config_is_vgpu(const uint8_t *config, size_t len);

#endif
