/* Internals shared by the files of the mock libnvidia-ml.so.1.
 *
 * The mock is driven by a YAML file (env MOCK_NVML_CONFIG, format in
 * tests/mock-nvml/README.md).  config.c turns it into a struct mock_config;
 * state.c owns the one global state: the current config, the handle objects
 * and the event log, all guarded by one mutex; the nvml-*.c files implement
 * the exported NVML calls on top of it.  Only the NVML functions are exported
 * (MOCK_EXPORT); everything here is hidden by -fvisibility=hidden. */
#ifndef DEVLET_MOCK_NVML_H
#define DEVLET_MOCK_NVML_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/nvidia/nvml.h"

#define MOCK_EXPORT __attribute__((visibility("default")))

/* Bounds on what a configuration may ask for. */
#define MOCK_MAX_GPUS 64
#define MOCK_MAX_MIG 8
#define MOCK_MAX_PROCS 256
#define MOCK_MAX_EVENTS 4096
#define MOCK_MAX_SWITCHES 16
#define MOCK_MAX_CPUS 4096
#define MOCK_MEM_SLICES 8 /* memory slices of a 7-compute-slice MIG GPU */

#define MOCK_NO_ID DEVLET_NVML_NO_INSTANCE_ID

/* An optional number from the configuration. */
struct mock_opt {
        bool set;
        unsigned long long v;
};

struct mock_proc {
        unsigned pid;
        unsigned long long used_mib;
        char *name;
        bool graphics;
        struct mock_opt sm_util, mem_util, enc_util, dec_util;
        unsigned gi, ci; /* MOCK_NO_ID outside MIG */
};

/* One row of a GPU's MIG profile table, indexed by NVML_GPU_INSTANCE_PROFILE_*. */
struct mock_gi_profile {
        bool supported;
        unsigned id;
        unsigned slices;     /* compute slices */
        unsigned mem_slices; /* memory slices (placement size) */
        unsigned instances;  /* how many fit on the GPU */
        unsigned sms, ce, dec, enc, jpeg, ofa;
        unsigned long long memory_mib;
        char name[32]; /* "1g.10gb", "1g.10gb+me" */
};

/* One MIG device: a compute instance inside a GPU instance. */
struct mock_mig {
        unsigned gi, ci;
        char *uuid;
        char *profile;       /* as configured: "1g.10gb" or "1c.3g.40gb" */
        unsigned gi_profile; /* NVML_GPU_INSTANCE_PROFILE_* */
        unsigned ci_slices;
        unsigned gi_start, ci_start;
        unsigned long long memory_mib;
        unsigned sms, ce, dec, enc, jpeg, ofa;
};

enum mock_link_kind { MOCK_LINK_NONE = 0, MOCK_LINK_GPU, MOCK_LINK_SWITCH };

struct mock_link {
        enum mock_link_kind kind;
        unsigned target; /* GPU index or switch index */
};

struct mock_pci {
        unsigned domain, bus, device;
        unsigned device_id, subsystem_id;
};

enum { MOCK_CLK_GRAPHICS, MOCK_CLK_SM, MOCK_CLK_MEM, MOCK_CLK_VIDEO, MOCK_CLK_N };

/* GPM metrics the YAML can set (nvml-gpm.c maps NVML's metric IDs here) */
enum {
        MOCK_GPM_GRAPHICS, MOCK_GPM_SM, MOCK_GPM_OCCUPANCY, MOCK_GPM_TENSOR, MOCK_GPM_DRAM,
        MOCK_GPM_FP64, MOCK_GPM_FP32, MOCK_GPM_FP16, MOCK_GPM_PCIE_TX, MOCK_GPM_PCIE_RX,
        MOCK_GPM_NVLINK_TX, MOCK_GPM_NVLINK_RX, MOCK_GPM_N
};
extern const char *const mock_gpm_keys[MOCK_GPM_N + 2]; /* YAML keys, "supported", NULL */

struct mock_gpu {
        char *uuid, *name, *serial, *board_part, *vbios;
        nvmlBrandType_t brand;
        unsigned long long memory_mib, reserved_mib;
        struct mock_opt used_mib;
        struct mock_pci pci;
        unsigned minor;
        int cc_major, cc_minor;
        nvmlDeviceArchitecture_t arch;
        long numa_node; /* -1: none */
        struct mock_opt gpu_numa_node;
        char *pcie_switch, *host_bridge;
        bool has_cpus;
        unsigned long cpus[MOCK_MAX_CPUS / (8 * sizeof(unsigned long))];
        bool lost;

        bool mig_capable, mig_enabled;
        unsigned mig_max;
        struct mock_gi_profile profiles[NVML_GPU_INSTANCE_PROFILE_COUNT];
        struct mock_mig *mig;
        size_t n_mig;

        unsigned link_ports;
        struct mock_link links[NVML_NVLINK_MAX_LINKS];
        bool has_fabric; /* nvmlDeviceGetGpuFabricInfo answers (else NOT_SUPPORTED) */
        nvmlGpuFabricInfo_t fabric;
        /* Grace: nvmlDeviceGetAddressingMode's value (-1: NOT_SUPPORTED) and
         * nvmlDeviceGetC2cModeInfoV's (-1: NOT_SUPPORTED, else 0 or 1) */
        int addressing_mode;
        int c2c;
        struct mock_opt nvl_data_tx, nvl_data_rx, nvl_raw_tx, nvl_raw_rx; /* KiB */

        struct mock_opt util_gpu, util_mem, util_enc, util_dec;
        struct mock_opt pcie_tx_kbps, pcie_rx_kbps; /* nvmlDeviceGetPcieThroughput */
        bool gpm_supported; /* default: Hopper and later */
        struct mock_opt gpm[MOCK_GPM_N]; /* GPM metric values (MOCK_GPM_*); unset: 0 */
        struct mock_opt temp, mem_temp, power, power_limit, enforced_limit, energy;
        struct mock_opt clocks[MOCK_CLK_N], max_clocks[MOCK_CLK_N];
        unsigned long long replay;
        unsigned long long temperature_stall_ms; /* nvmlDeviceGetTemperature hangs this long */
        bool has_remap;
        unsigned remap_cor, remap_unc;
        bool remap_pending, remap_failure;
        bool persistence, ecc;
        nvmlComputeMode_t compute_mode;
        unsigned pstate;
        unsigned long long clock_reasons, supported_events;
        /* error and throttling counters */
        unsigned long long ecc_counts[2][2]; /* [nvmlMemoryErrorType_t][nvmlEccCounterType_t] */
        bool has_retired;             /* default: before Ampere (later GPUs remap rows) */
        unsigned retired_sbe, retired_dbe;
        bool retired_pending;
        unsigned long long violation_ns[6]; /* NVML_PERF_POLICY_POWER..RELIABILITY */
        struct mock_opt fan_percent;
        unsigned long long nvl_errors[4]; /* per active link, nvmlNvLinkErrorCounter_t 0-3 */
        bool vgpu_licensed;               /* one vGPU feature licensed (else none) */

        struct mock_proc *procs;
        size_t n_procs;
};

struct mock_event_cfg {
        unsigned gpu;
        unsigned long long type, data;
        unsigned gi, ci;
};

struct mock_config {
        char *driver_version, *nvml_version;
        int cuda_version;
        nvmlReturn_t init_error; /* NVML_SUCCESS: none */
        struct mock_gpu *gpus;
        size_t n_gpus;
        struct mock_pci *switches;
        size_t n_switches;
        struct mock_event_cfg *events;
        size_t n_events;
};

/* config.c: NULL on error, with a "path:line:col: message" in err. */
struct mock_config *mock_config_load(const char *path, char *err, size_t errlen);
void mock_config_free(struct mock_config *c);
bool mock_event_cfg_equal(const struct mock_event_cfg *a, const struct mock_event_cfg *b);

/* profiles.c: fills g->profiles and resolves each MIG entry's profile,
 * engines and placement.  -1 with err on an impossible layout. */
int mock_profiles_build(struct mock_gpu *g, unsigned gpu_index, char *err, size_t errlen);
const struct mock_gi_profile *mock_profile_by_id(const struct mock_gpu *g, unsigned id,
                                                 unsigned *index);
/* Compute-instance profile index for a slice count, or -1. */
int mock_ci_profile_index(unsigned ci_slices);
bool mock_ci_slices_allowed(unsigned gi_slices, unsigned ci_slices);

/* ------------------------------------------------------------------ */
/* Handle objects.  They live until the library is unloaded, so a handle a
 * client holds stays a valid pointer across reloads; `present` says whether
 * the current configuration still has the thing it names. */

struct nvmlDevice_st {
        struct nvmlDevice_st *parent; /* MIG device: its GPU; GPU: NULL */
        char *uuid;
        bool present;
        const struct mock_gpu *gpu; /* GPU's config (the parent's for a MIG device) */
        const struct mock_mig *mig; /* MIG device only */
        unsigned index;             /* GPU index, or MIG device index under its parent */
};

struct nvmlGpuInstance_st {
        struct nvmlDevice_st *gpu;
        unsigned id;
        bool present;
        const struct mock_mig *mig; /* first MIG device in it: carries the GI profile */
};

struct nvmlComputeInstance_st {
        struct nvmlGpuInstance_st *gi;
        unsigned id;
        bool present;
        const struct mock_mig *mig;
};

struct mock_event {
        struct nvmlDevice_st *gpu;
        unsigned long long type, data;
        unsigned gi, ci;
        unsigned long long at; /* when it happened on the event clock; 0: not yet */
};

struct mock_reg {
        struct nvmlDevice_st *dev;
        unsigned long long mask;
        unsigned long long since; /* event clock at registration: later events only */
};

struct nvmlEventSet_st {
        struct nvmlEventSet_st *next;
        size_t cursor; /* next event log entry to look at */
        struct mock_reg *regs;
        size_t n_regs, cap_regs;
        unsigned waiters;
        bool dead; /* freed (or shut down) while a waiter still held it */
};

/* state.c */
void mock_lock(void);
void mock_unlock(void);
static inline void mock_unlock_guard(int *unused)
{
        (void)unused;
        mock_unlock();
}
/* Holds the state lock until the end of the enclosing scope. */
#define MOCK_LOCKED() \
        __attribute__((cleanup(mock_unlock_guard), unused)) int mock_guard_ = (mock_lock(), 0)

nvmlReturn_t mock_init(unsigned flags);
nvmlReturn_t mock_shutdown(void);
/* Initialised?  Re-reads the configuration if its file changed. */
nvmlReturn_t mock_enter(void);
const struct mock_config *mock_cfg(void);
/* Validates a device handle (after mock_enter).  Lost GPUs, and the MIG
 * devices of lost GPUs, give NVML_ERROR_GPU_IS_LOST. */
nvmlReturn_t mock_device(nvmlDevice_t h, struct nvmlDevice_st **out);
/* Same, but a MIG device handle gives NVML_ERROR_NOT_SUPPORTED. */
nvmlReturn_t mock_device_gpu(nvmlDevice_t h, struct nvmlDevice_st **out);
nvmlReturn_t mock_gpu_instance(nvmlGpuInstance_t h, struct nvmlGpuInstance_st **out);
nvmlReturn_t mock_compute_instance(nvmlComputeInstance_t h, struct nvmlComputeInstance_st **out);
struct nvmlDevice_st *mock_gpu_at(unsigned index);
struct nvmlDevice_st *mock_mig_at(const struct nvmlDevice_st *gpu, unsigned index);
struct nvmlDevice_st *mock_device_by_uuid(const char *uuid);
struct nvmlGpuInstance_st *mock_gi_find(const struct nvmlDevice_st *gpu, unsigned id);
struct nvmlComputeInstance_st *mock_ci_find(const struct nvmlGpuInstance_st *gi, unsigned id);

/* Events (state.c): the log of every event read from the configuration.
 * An event happens when it is first seen in the file, except that those
 * seen before the first wait since nvmlInit (the file's events at start-up)
 * happen at that wait (mock_events_begin). */
size_t mock_event_count(void);
const struct mock_event *mock_event_at(size_t i);
/* Ticks the event clock and returns the new time (registrations). */
unsigned long long mock_event_clock_tick(void);
/* Called by every wait: makes the events still waiting to happen happen. */
void mock_events_begin(void);
nvmlEventSet_t mock_event_set_new(void);
bool mock_event_set_valid(nvmlEventSet_t set);
/* nvmlEventSetFree: unlinks the set; a thread waiting on it frees it when it
 * leaves (mock_event_set_leave, after its own waiters++). */
void mock_event_set_release(nvmlEventSet_t set);
void mock_event_set_leave(nvmlEventSet_t set);
/* Waits on the state condition until woken or until deadline (CLOCK_MONOTONIC
 * microseconds); the lock is dropped while waiting. */
void mock_wait_until(unsigned long long deadline_us);

/* util.c */
void *mock_alloc(size_t n); /* zeroed; aborts on exhaustion */
char *mock_strdup(const char *s);
void mock_grow(void **arr, size_t *cap, size_t need, size_t elsz);
nvmlReturn_t mock_copy_str(char *dst, unsigned int len, const char *src);
unsigned long long mock_realtime_us(void);
unsigned long long mock_monotonic_us(void);
void mock_fill_pci(const struct mock_pci *p, nvmlPciInfo_t *out);
void mock_fill_pci_v1(const struct mock_pci *p, void *out);
/* Parses "DDDDDDDD:BB:DD.F" or "DDDD:BB:DD.F"; false if malformed. */
bool mock_parse_pci(const char *s, struct mock_pci *out);

#endif
