/* GPU sampling through NVML, for the collector thread.
 *
 * The NVML entry points the metrics need are resolved once with dlsym from
 * the handle of the libnvidia-ml the NVIDIA backend loaded (or that
 * `devlet metrics` loaded), each typed after devices/nvidia/nvml.h, so a
 * missing symbol only drops the metric that needs it.  A sample enumerates
 * the GPUs and MIG devices afresh (MIG layouts change), reads every value
 * NVML answers and the processes on each device. */
#ifndef DEVLET_METRICS_SAMPLE_H
#define DEVLET_METRICS_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/nvidia/nvml.h"
#include "metrics/attrib.h"

/* Every value a unit may have; the collector's family table follows it. */
enum smp_field {
        SMP_SM_CLOCK,
        SMP_MEM_CLOCK,
        SMP_MEMORY_TEMP,
        SMP_GPU_TEMP,
        SMP_POWER_USAGE,
        SMP_TOTAL_ENERGY,
        SMP_PCIE_REPLAY,
        SMP_GPU_UTIL,
        SMP_MEM_COPY_UTIL,
        SMP_ENC_UTIL,
        SMP_DEC_UTIL,
        SMP_FB_FREE,
        SMP_FB_USED,
        SMP_FB_RESERVED,
        SMP_NVLINK_BANDWIDTH,
        SMP_REMAP_UNCORRECTABLE,
        SMP_REMAP_CORRECTABLE,
        SMP_REMAP_FAILURE,
        SMP_NFIELDS
};

struct smp_proc {
        unsigned pid;
        uint64_t mem_bytes;
        int sm_util; /* percent; -1 when NVML gave no sample for it */
};

/* A GPU or a MIG device and what NVML said about it this time. */
struct smp_unit {
        struct attr_unit id; /* points into the strings below */
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        char parent_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE]; /* the GPU's model name */
        char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* NVML's "00000000:3B:00.0" */
        char profile[32]; /* MIG: its GPU instance's profile, "3g.40gb" */
        nvmlDevice_t handle;
        bool has[SMP_NFIELDS];
        double value[SMP_NFIELDS];
        bool procs_known; /* NVML listed the processes */
        struct smp_proc *procs;
        size_t n_procs;
};

struct smp_sample {
        struct smp_unit *units;
        size_t n_units;
};

void smp_sample_release(struct smp_sample *s);

struct smp_nvml;

/* Resolves the entry points from dl (a dlopen handle of libnvidia-ml) and
 * initialises NVML (reference counted: paired with the nvmlShutdown in
 * smp_nvml_free).  Returns 0, or -ENOEXEC / -EIO with *err (heap). */
int smp_nvml_new(void *dl, struct smp_nvml **out, char **err);
void smp_nvml_free(struct smp_nvml *n);
/* The driver version ("" unknown). */
const char *smp_nvml_driver_version(const struct smp_nvml *n);

/* Samples every GPU and MIG device.  Returns 0, or -EIO when NVML cannot
 * count its GPUs (the sample is then empty). */
int smp_collect(struct smp_nvml *n, struct smp_sample *out);

#endif
