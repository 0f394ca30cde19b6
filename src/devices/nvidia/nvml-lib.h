/* Internal to devices/nvidia/: libnvidia-ml.so.1 loaded with dlopen and
 * every symbol devlet uses resolved once into a table of typed pointers.
 *
 * The table is read-only after nvml_lib_open() and shared by the loop thread
 * and the health thread.  Required symbols missing make the load fail with
 * the name; optional ones are NULL (listed in missing[]) and the features
 * that need them are skipped. */
#ifndef DEVLET_DEVICES_NVIDIA_NVML_LIB_H
#define DEVLET_DEVICES_NVIDIA_NVML_LIB_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/diag.h"
#include "devices/nvidia/nvml.h"

/* Full path of the library to load instead of searching: for tests and
 * debugging. */
#define NVML_LIB_ENV "DEVLET_NVML_LIBRARY"

#define NVML_FN(f) __typeof__(f) *

struct nvml_lib {
        atomic_uint refs; /* nvml_lib_ref / nvml_lib_close */
        void *handle; /* dlopen handle; NULL for a table resolved by a test lookup */
        char *path;   /* what was loaded */
        char **missing; /* optional symbols not found, strv (NULL when none) */

        /* required */
        NVML_FN(nvmlInit_v2) init;             /* nvmlInit_v2, nvmlInit */
        NVML_FN(nvmlShutdown) shutdown;
        NVML_FN(nvmlErrorString) error_string;
        NVML_FN(nvmlDeviceGetCount_v2) device_count;            /* _v2, plain */
        NVML_FN(nvmlDeviceGetHandleByIndex_v2) handle_by_index; /* _v2, plain */
        NVML_FN(nvmlDeviceGetUUID) uuid;
        NVML_FN(nvmlDeviceGetName) name;
        NVML_FN(nvmlDeviceGetMemoryInfo) memory_info;
        /* one of pci_info (_v3, _v2) and pci_info_v1 (older 52-byte layout) */
        NVML_FN(nvmlDeviceGetPciInfo_v3) pci_info;
        NVML_FN(nvmlDeviceGetPciInfo) pci_info_v1;

        /* optional */
        NVML_FN(nvmlDeviceGetMinorNumber) minor_number;
        NVML_FN(nvmlSystemGetDriverVersion) driver_version;
        NVML_FN(nvmlSystemGetCudaDriverVersion_v2) cuda_driver_version; /* _v2, plain */
        NVML_FN(nvmlDeviceGetCudaComputeCapability) compute_capability;
        NVML_FN(nvmlDeviceGetArchitecture) architecture;
        NVML_FN(nvmlDeviceGetBrand) brand;
        NVML_FN(nvmlDeviceGetGpuFabricInfo) fabric_info;
        NVML_FN(nvmlDeviceGetAddressingMode) addressing_mode;
        NVML_FN(nvmlDeviceGetMemoryAffinity) memory_affinity;
        NVML_FN(nvmlDeviceGetTopologyCommonAncestor) common_ancestor;
        NVML_FN(nvmlDeviceGetNvLinkState) nvlink_state;
        NVML_FN(nvmlDeviceGetNvLinkRemotePciInfo_v2) nvlink_remote_pci;
        NVML_FN(nvmlDeviceGetNvLinkRemotePciInfo) nvlink_remote_pci_v1;
        NVML_FN(nvmlDeviceGetNvLinkRemoteDeviceType) nvlink_remote_type;
        NVML_FN(nvmlDeviceGetMigMode) mig_mode;
        NVML_FN(nvmlDeviceGetMaxMigDeviceCount) max_mig_devices;
        NVML_FN(nvmlDeviceGetMigDeviceHandleByIndex) mig_handle_by_index;
        NVML_FN(nvmlDeviceGetDeviceHandleFromMigDeviceHandle) mig_parent;
        NVML_FN(nvmlDeviceGetGpuInstanceId) gpu_instance_id;
        NVML_FN(nvmlDeviceGetComputeInstanceId) compute_instance_id;
        NVML_FN(nvmlDeviceGetAttributes_v2) attributes; /* _v2, plain */
        NVML_FN(nvmlDeviceGetGpuInstanceProfileInfo) gi_profile_info;
        NVML_FN(nvmlDeviceGetGpuInstanceById) gi_by_id;
        NVML_FN(nvmlGpuInstanceGetInfo) gi_info;
        NVML_FN(nvmlGpuInstanceGetComputeInstanceProfileInfo) ci_profile_info;
        NVML_FN(nvmlGpuInstanceGetComputeInstanceById) ci_by_id;
        NVML_FN(nvmlComputeInstanceGetInfo_v2) ci_info; /* _v2, plain (first 24 bytes) */
        NVML_FN(nvmlEventSetCreate) event_set_create;
        NVML_FN(nvmlDeviceRegisterEvents) register_events;
        NVML_FN(nvmlDeviceGetSupportedEventTypes) supported_events;
        NVML_FN(nvmlEventSetWait_v2) event_set_wait; /* _v2, plain (no instance IDs) */
        NVML_FN(nvmlEventSetFree) event_set_free;

        /* optional, for metrics only (not listed in missing[]) */
        NVML_FN(nvmlDeviceGetClockInfo) clock;
        NVML_FN(nvmlDeviceGetTemperature) temperature;
        NVML_FN(nvmlDeviceGetPowerUsage) power;
        NVML_FN(nvmlDeviceGetTotalEnergyConsumption) energy;
        NVML_FN(nvmlDeviceGetPcieReplayCounter) pcie_replay;
        NVML_FN(nvmlDeviceGetUtilizationRates) utilization;
        NVML_FN(nvmlDeviceGetEncoderUtilization) encoder_util;
        NVML_FN(nvmlDeviceGetDecoderUtilization) decoder_util;
        NVML_FN(nvmlDeviceGetMemoryInfo_v2) memory_info_v2;
        NVML_FN(nvmlDeviceGetRemappedRows) remapped_rows;
        NVML_FN(nvmlDeviceGetFieldValues) field_values;
        /* _v3 or _v2 fill 24-byte entries, the plain calls 16-byte ones */
        NVML_FN(nvmlDeviceGetComputeRunningProcesses_v3) compute_procs;
        NVML_FN(nvmlDeviceGetComputeRunningProcesses) compute_procs_v1;
        NVML_FN(nvmlDeviceGetGraphicsRunningProcesses_v3) graphics_procs;
        NVML_FN(nvmlDeviceGetGraphicsRunningProcesses) graphics_procs_v1;
        NVML_FN(nvmlDeviceGetProcessUtilization) process_util;
        NVML_FN(nvmlDeviceGetPcieThroughput) pcie_throughput;
        NVML_FN(nvmlDeviceGetCurrentClocksEventReasons) clocks_event_reasons; /* or ...ThrottleReasons */
        NVML_FN(nvmlDeviceGetPowerManagementLimit) power_limit;
        NVML_FN(nvmlDeviceGetEnforcedPowerLimit) enforced_power_limit;
        NVML_FN(nvmlDeviceGetFanSpeed) fan_speed;
        NVML_FN(nvmlDeviceGetPerformanceState) pstate;
        NVML_FN(nvmlDeviceGetTotalEccErrors) ecc_total;
        NVML_FN(nvmlDeviceGetRetiredPages) retired_pages;
        NVML_FN(nvmlDeviceGetRetiredPagesPendingStatus) retired_pending;
        NVML_FN(nvmlDeviceGetViolationStatus) violation;
        NVML_FN(nvmlDeviceGetNvLinkErrorCounter) nvlink_errors;
        NVML_FN(nvmlDeviceGetGridLicensableFeatures_v4) grid_licenses;
        NVML_FN(nvmlDeviceGetSerial) serial;
        NVML_FN(nvmlSystemGetNVMLVersion) nvml_version;
        NVML_FN(nvmlDeviceGetVbiosVersion) vbios;
        NVML_FN(nvmlGpmQueryDeviceSupport) gpm_query;
        NVML_FN(nvmlGpmSampleAlloc) gpm_sample_alloc;
        NVML_FN(nvmlGpmSampleFree) gpm_sample_free;
        NVML_FN(nvmlGpmSampleGet) gpm_sample_get;
        NVML_FN(nvmlGpmMigSampleGet) gpm_mig_sample_get;
        NVML_FN(nvmlGpmMetricsGet) gpm_metrics_get;
};

/* Finds a symbol by name; NULL when absent.  nvml_lib_resolve() asks for
 * each candidate name in preference order. */
typedef void *(*nvml_lib_lookup)(void *ctx, const char *name);

/* Loads the library: $DEVLET_NVML_LIBRARY when set (that path only), else
 * libnvidia-ml.so.1 in <driver_root>'s library directories, else by soname
 * (the dynamic loader's search, LD_LIBRARY_PATH included).  Returns 0 and
 * *out, -ENOENT when no library could be loaded (diag lists what was
 * tried), or -ENOEXEC when a required symbol is missing (diag names it). */
int nvml_lib_open(const char *driver_root, struct nvml_lib **out, struct diag *diag);

/* Fills the table of l through lookup (nvml_lib_open uses dlsym).  Returns
 * 0, or -ENOEXEC with diag naming the first required symbol missing.  For
 * tests: a lookup that hides names exercises the fallbacks. */
int nvml_lib_resolve(struct nvml_lib *l, nvml_lib_lookup lookup, void *ctx, struct diag *diag);

/* Another reference to l (the metrics sampler holds one): any thread. */
struct nvml_lib *nvml_lib_ref(struct nvml_lib *l);
/* Drops a reference; the last dlcloses and frees.  NULL is fine; any
 * thread.  nvmlShutdown is the caller's. */
void nvml_lib_close(struct nvml_lib *l);

/* NVML's text for r ("GPU is lost"), or "NVML error <r>". */
const char *nvml_lib_strerror(const struct nvml_lib *l, nvmlReturn_t r);

/* nvmlDeviceGetPciInfo through whichever layout the library has; busId is
 * always filled. */
nvmlReturn_t nvml_lib_pci_info(const struct nvml_lib *l, nvmlDevice_t d, nvmlPciInfo_t *pci);
/* The PCI address at the far end of an NVLink, as above. */
nvmlReturn_t nvml_lib_nvlink_remote_pci(const struct nvml_lib *l, nvmlDevice_t d, unsigned link,
                                        nvmlPciInfo_t *pci);
/* nvmlEventSetWait; the instance IDs read DEVLET_NVML_NO_INSTANCE_ID when
 * the library cannot tell them. */
nvmlReturn_t nvml_lib_event_wait(const struct nvml_lib *l, nvmlEventSet_t set,
                                 nvmlEventData_t *data, unsigned timeout_ms);

#endif
