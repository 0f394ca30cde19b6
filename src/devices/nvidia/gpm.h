/* Internal to devices/nvidia/: NVML's GPU Performance Monitoring for the
 * sampler, which turns it into dcgm-exporter's DCGM_FI_PROF_* families.
 *
 * Each call takes a new GPM sample of a GPU (or of one GPU instance of a GPU
 * in MIG mode) and computes the metrics over the interval since the
 * previous sample of the same target, which it then keeps.  The first call
 * for a target gives nothing.  Collector thread only. */
#ifndef DEVLET_DEVICES_NVIDIA_GPM_H
#define DEVLET_DEVICES_NVIDIA_GPM_H

#include <stdbool.h>

#include "devices/nvidia/nvml-lib.h"

/* What one GPM interval measured, in NVML's units. */
enum nvidia_gpm_metric {
        GPM_GRAPHICS, GPM_SM, GPM_OCCUPANCY, GPM_TENSOR, GPM_DRAM, GPM_FP64, GPM_FP32, GPM_FP16,
        GPM_PCIE_TX, GPM_PCIE_RX, GPM_NVLINK_TX, GPM_NVLINK_RX, GPM_COUNT
};

struct nvidia_gpm;

struct nvidia_gpm *nvidia_gpm_new(const struct nvml_lib *lib);
void nvidia_gpm_free(struct nvidia_gpm *g);
/* gpu: the GPU's index (the target's key with gi); gi < 0 for the whole
 * GPU.  Fills v[] and has[] (GPM_COUNT entries) and returns true when an
 * interval could be measured. */
bool nvidia_gpm_measure(struct nvidia_gpm *g, nvmlDevice_t gpu_handle, unsigned gpu, int gi,
                        double *v, bool *has);

#endif
