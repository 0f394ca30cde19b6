/* Mock NVML: what a device handle tells about its device: identity, PCI,
 * memory, telemetry, running processes and field values.
 *
 * Static properties of a MIG device handle (PCI, brand, compute capability,
 * architecture, serial, ...) are its parent GPU's; its UUID, name, memory and
 * processes are its own.  Telemetry (utilisation, temperature, power, clocks,
 * counters) is per GPU: on a MIG device handle it is not supported, and
 * utilisation is not supported either on a GPU in MIG mode, as with NVML.
 * A value the configuration leaves out reads as NVML_ERROR_NOT_SUPPORTED, so
 * tests can model GPUs without a sensor. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mock.h"

#define MIB (1024ULL * 1024ULL)

/* Locks, validates the handle and binds d (the device) and g (its GPU's
 * configuration) for the rest of the function. */
#define DEVICE_CALL(handle)                          \
        MOCK_LOCKED();                               \
        struct nvmlDevice_st *d;                     \
        nvmlReturn_t r_ = mock_device((handle), &d); \
        if (r_ != NVML_SUCCESS)                      \
                return r_;                           \
        const struct mock_gpu *g = d->gpu

/* Same, for calls that only a full GPU answers. */
#define GPU_CALL(handle)                                 \
        MOCK_LOCKED();                                   \
        struct nvmlDevice_st *d;                         \
        nvmlReturn_t r_ = mock_device_gpu((handle), &d); \
        if (r_ != NVML_SUCCESS)                          \
                return r_;                               \
        const struct mock_gpu *g = d->gpu

static nvmlReturn_t put_uint(unsigned int *out, const struct mock_opt *v)
{
        if (!out)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!v->set)
                return NVML_ERROR_NOT_SUPPORTED;
        *out = (unsigned int)v->v;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
        DEVICE_CALL(device);
        (void)g;
        return mock_copy_str(uuid, length, d->uuid);
}

/* A MIG device is named after its GPU and profile, e.g.
 * "NVIDIA A100-SXM4-40GB MIG 1g.5gb". */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
        DEVICE_CALL(device);
        if (!d->mig)
                return mock_copy_str(name, length, g->name);
        char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 48];
        snprintf(buf, sizeof(buf), "%s MIG %s", g->name, d->mig->profile);
        return mock_copy_str(name, length, buf);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
        DEVICE_CALL(device);
        if (!type)
                return NVML_ERROR_INVALID_ARGUMENT;
        *type = g->brand;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
        GPU_CALL(device);
        (void)g;
        if (!index)
                return NVML_ERROR_INVALID_ARGUMENT;
        *index = d->index;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
        GPU_CALL(device);
        if (!minorNumber)
                return NVML_ERROR_INVALID_ARGUMENT;
        *minorNumber = g->minor;
        return NVML_SUCCESS;
}

static nvmlReturn_t opt_str(char *dst, unsigned int len, const char *v)
{
        if (!dst)
                return NVML_ERROR_INVALID_ARGUMENT;
        return v ? mock_copy_str(dst, len, v) : NVML_ERROR_NOT_SUPPORTED;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
        DEVICE_CALL(device);
        return opt_str(serial, length, g->serial);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
                                                      unsigned int length)
{
        DEVICE_CALL(device);
        return opt_str(partNumber, length, g->board_part);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version,
                                                   unsigned int length)
{
        DEVICE_CALL(device);
        return opt_str(version, length, g->vbios);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        DEVICE_CALL(device);
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        mock_fill_pci(&g->pci, pci);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        return nvmlDeviceGetPciInfo_v3(device, pci);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        DEVICE_CALL(device);
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        mock_fill_pci_v1(&g->pci, pci);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                            int *minor)
{
        DEVICE_CALL(device);
        if (!major || !minor)
                return NVML_ERROR_INVALID_ARGUMENT;
        *major = g->cc_major;
        *minor = g->cc_minor;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                   nvmlDeviceArchitecture_t *arch)
{
        DEVICE_CALL(device);
        if (!arch)
                return NVML_ERROR_INVALID_ARGUMENT;
        *arch = g->arch;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
        GPU_CALL(device);
        if (!mode)
                return NVML_ERROR_INVALID_ARGUMENT;
        *mode = g->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
        GPU_CALL(device);
        if (!mode)
                return NVML_ERROR_INVALID_ARGUMENT;
        *mode = g->compute_mode;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                              nvmlEnableState_t *pending)
{
        GPU_CALL(device);
        if (!current || !pending)
                return NVML_ERROR_INVALID_ARGUMENT;
        *current = *pending = g->ecc ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Memory                                                              */

static unsigned long long used_mib(const struct nvmlDevice_st *d)
{
        const struct mock_gpu *g = d->gpu;
        if (!d->mig && g->used_mib.set)
                return g->used_mib.v;
        unsigned long long sum = 0;
        for (size_t i = 0; i < g->n_procs; i++)
                if (!d->mig || (g->procs[i].gi == d->mig->gi && g->procs[i].ci == d->mig->ci))
                        sum += g->procs[i].used_mib;
        return sum;
}

static void memory_of(const struct nvmlDevice_st *d, unsigned long long *total,
                      unsigned long long *reserved, unsigned long long *used)
{
        *total = (d->mig ? d->mig->memory_mib : d->gpu->memory_mib) * MIB;
        *reserved = d->mig ? 0 : d->gpu->reserved_mib * MIB;
        *used = used_mib(d) * MIB;
        if (*used + *reserved > *total)
                *used = *total - *reserved;
}

/* v1 leaves the reserved memory out of the total. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
        DEVICE_CALL(device);
        (void)g;
        if (!memory)
                return NVML_ERROR_INVALID_ARGUMENT;
        unsigned long long total, reserved, used;
        memory_of(d, &total, &reserved, &used);
        memory->total = total - reserved;
        memory->used = used;
        memory->free = memory->total - used;
        return NVML_SUCCESS;
}

/* v2 reports the reserved memory apart and counts it as used. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
        DEVICE_CALL(device);
        (void)g;
        if (!memory)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (memory->version != nvmlMemory_v2)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        unsigned long long total, reserved, used;
        memory_of(d, &total, &reserved, &used);
        memory->total = total;
        memory->reserved = reserved;
        memory->used = used + reserved;
        memory->free = total - memory->used;
        return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Telemetry                                                           */

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                       nvmlUtilization_t *utilization)
{
        GPU_CALL(device);
        if (!utilization)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (g->mig_enabled || !g->util_gpu.set)
                return NVML_ERROR_NOT_SUPPORTED;
        utilization->gpu = (unsigned)g->util_gpu.v;
        utilization->memory = g->util_mem.set ? (unsigned)g->util_mem.v : 0;
        return NVML_SUCCESS;
}

static nvmlReturn_t codec_util(const struct mock_gpu *g, const struct mock_opt *v,
                               unsigned int *utilization, unsigned int *samplingPeriodUs)
{
        if (!utilization || !samplingPeriodUs)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (g->mig_enabled || !v->set)
                return NVML_ERROR_NOT_SUPPORTED;
        *utilization = (unsigned)v->v;
        *samplingPeriodUs = 167000;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device,
                                                         unsigned int *utilization,
                                                         unsigned int *samplingPeriodUs)
{
        GPU_CALL(device);
        return codec_util(g, &g->util_enc, utilization, samplingPeriodUs);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device,
                                                         unsigned int *utilization,
                                                         unsigned int *samplingPeriodUs)
{
        GPU_CALL(device);
        return codec_util(g, &g->util_dec, utilization, samplingPeriodUs);
}

/* temperatureStallMs: how long the call hangs before it answers. */
static unsigned long long temperature_stall_ms(nvmlDevice_t device)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        if (mock_device_gpu(device, &d) != NVML_SUCCESS)
                return 0;
        return d->gpu->temperature_stall_ms;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                  nvmlTemperatureSensors_t sensorType,
                                                  unsigned int *temp)
{
        /* a driver call that hangs: outside the lock, so the other calls
         * (and other threads) go on */
        unsigned long long stall = temperature_stall_ms(device);
        if (stall) {
                fprintf(stderr, "mock-nvml: nvmlDeviceGetTemperature stalls for %llu ms\n", stall);
                struct timespec ts = { .tv_sec = (time_t)(stall / 1000),
                                       .tv_nsec = (long)(stall % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
        GPU_CALL(device);
        if (sensorType != NVML_TEMPERATURE_GPU)
                return NVML_ERROR_INVALID_ARGUMENT;
        return put_uint(temp, &g->temp);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
        GPU_CALL(device);
        return put_uint(power, &g->power);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
        GPU_CALL(device);
        return put_uint(limit, &g->power_limit);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
        GPU_CALL(device);
        return put_uint(limit, &g->enforced_limit);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                             unsigned long long *energy)
{
        GPU_CALL(device);
        if (!energy)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!g->energy.set)
                return NVML_ERROR_NOT_SUPPORTED;
        *energy = g->energy.v;
        return NVML_SUCCESS;
}

static nvmlReturn_t clock_of(const struct mock_opt *table, nvmlClockType_t type,
                             unsigned int *clock)
{
        if ((unsigned)type >= MOCK_CLK_N)
                return NVML_ERROR_INVALID_ARGUMENT;
        return put_uint(clock, &table[type]);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                unsigned int *clock)
{
        GPU_CALL(device);
        return clock_of(g->clocks, type, clock);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                   unsigned int *clock)
{
        GPU_CALL(device);
        return clock_of(g->max_clocks, type, clock);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
        GPU_CALL(device);
        if (!pState)
                return NVML_ERROR_INVALID_ARGUMENT;
        *pState = (nvmlPstates_t)g->pstate;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                                unsigned long long *reasons)
{
        GPU_CALL(device);
        if (!reasons)
                return NVML_ERROR_INVALID_ARGUMENT;
        *reasons = g->clock_reasons;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                   unsigned long long *reasons)
{
        return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
        GPU_CALL(device);
        if (!value)
                return NVML_ERROR_INVALID_ARGUMENT;
        *value = (unsigned)g->replay;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                                   unsigned int *uncRows, unsigned int *isPending,
                                                   unsigned int *failureOccurred)
{
        GPU_CALL(device);
        if (!corrRows || !uncRows || !isPending || !failureOccurred)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!g->has_remap)
                return NVML_ERROR_NOT_SUPPORTED;
        *corrRows = g->remap_cor;
        *uncRows = g->remap_unc;
        *isPending = g->remap_pending;
        *failureOccurred = g->remap_failure;
        return NVML_SUCCESS;
}

static unsigned active_links(const struct mock_gpu *g, enum mock_link_kind kind)
{
        unsigned n = 0;
        for (int l = 0; l < NVML_NVLINK_MAX_LINKS; l++)
                n += kind ? g->links[l].kind == kind : g->links[l].kind != MOCK_LINK_NONE;
        return n;
}

/* An NVLink throughput counter: scope UINT_MAX is the sum over all links,
 * otherwise the total is shared evenly by the active links. */
static nvmlReturn_t nvlink_counter(const struct mock_gpu *g, const struct mock_opt *total,
                                   unsigned scope, unsigned long long *out)
{
        unsigned n = active_links(g, 0);
        if (!total->set)
                return NVML_ERROR_NOT_SUPPORTED;
        if (scope == ~0U) {
                *out = total->v;
                return NVML_SUCCESS;
        }
        if (scope >= g->link_ports)
                return NVML_ERROR_INVALID_ARGUMENT;
        *out = g->links[scope].kind == MOCK_LINK_NONE ? 0 : total->v / n;
        return NVML_SUCCESS;
}

static void field_value(const struct mock_gpu *g, nvmlFieldValue_t *f)
{
        unsigned long long u = 0;
        nvmlReturn_t r = NVML_SUCCESS;
        nvmlValueType_t type = NVML_VALUE_TYPE_UNSIGNED_INT;
        switch (f->fieldId) {
        case NVML_FI_DEV_MEMORY_TEMP:
                r = g->mem_temp.set ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
                u = g->mem_temp.v;
                break;
        case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
        case NVML_FI_DEV_ENERGY:
                r = g->energy.set ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
                u = g->energy.v;
                type = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                break;
        case NVML_FI_DEV_POWER_INSTANT:
                r = g->power.set ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
                u = g->power.v;
                break;
        case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
                u = g->replay;
                type = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                break;
        case NVML_FI_DEV_REMAPPED_COR:
        case NVML_FI_DEV_REMAPPED_UNC:
        case NVML_FI_DEV_REMAPPED_PENDING:
        case NVML_FI_DEV_REMAPPED_FAILURE: {
                const unsigned v[] = {g->remap_cor, g->remap_unc, g->remap_pending,
                                      g->remap_failure};
                r = g->has_remap ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
                u = v[f->fieldId - NVML_FI_DEV_REMAPPED_COR];
                break;
        }
        case NVML_FI_DEV_NVLINK_LINK_COUNT:
                r = g->link_ports ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
                u = g->link_ports;
                break;
        case NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT:
                u = active_links(g, MOCK_LINK_SWITCH);
                break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX: {
                const struct mock_opt *t[] = {&g->nvl_data_tx, &g->nvl_data_rx, &g->nvl_raw_tx,
                                              &g->nvl_raw_rx};
                r = nvlink_counter(g, t[f->fieldId - NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX],
                                   f->scopeId, &u);
                type = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                break;
        }
        default:
                r = f->fieldId >= NVML_FI_MAX ? NVML_ERROR_INVALID_ARGUMENT
                                              : NVML_ERROR_NOT_SUPPORTED;
        }
        f->timestamp = (long long)mock_realtime_us();
        f->latencyUsec = 0;
        f->nvmlReturn = r;
        f->valueType = type;
        memset(&f->value, 0, sizeof(f->value));
        if (type == NVML_VALUE_TYPE_UNSIGNED_INT)
                f->value.uiVal = (unsigned)u;
        else
                f->value.ullVal = u;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                                  nvmlFieldValue_t *values)
{
        GPU_CALL(device);
        if (valuesCount < 0 || (valuesCount && !values))
                return NVML_ERROR_INVALID_ARGUMENT;
        for (int i = 0; i < valuesCount; i++)
                field_value(g, &values[i]);
        return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Processes                                                           */

/* The processes a handle sees: all of a GPU's, or those in one MIG device. */
static bool sees(const struct nvmlDevice_st *d, const struct mock_proc *p, bool graphics)
{
        if (p->graphics != graphics)
                return false;
        return !d->mig || (p->gi == d->mig->gi && p->ci == d->mig->ci);
}

/* Fills entries of `size` bytes: 16 (v1: pid, memory) or 24 (v2 and v3 add
 * the GPU and compute instance IDs). */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *count, void *infos, size_t size,
                              bool graphics)
{
        DEVICE_CALL(device);
        if (!count || (*count && !infos))
                return NVML_ERROR_INVALID_ARGUMENT;
        unsigned n = 0;
        for (size_t i = 0; i < g->n_procs; i++)
                n += sees(d, &g->procs[i], graphics);
        if (n > *count) {
                *count = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        unsigned k = 0;
        for (size_t i = 0; i < g->n_procs; i++) {
                const struct mock_proc *p = &g->procs[i];
                if (!sees(d, p, graphics))
                        continue;
                nvmlProcessInfo_v2_t e = {
                    .pid = p->pid,
                    .usedGpuMemory = p->used_mib * MIB,
                    .gpuInstanceId = p->gi,
                    .computeInstanceId = p->ci,
                };
                memcpy((char *)infos + (size_t)k++ * size, &e, size);
        }
        *count = n;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                              unsigned int *infoCount,
                                                              nvmlProcessInfo_v1_t *infos)
{
        return processes(device, infoCount, infos, sizeof(nvmlProcessInfo_v1_t), false);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                 unsigned int *infoCount,
                                                                 nvmlProcessInfo_v2_t *infos)
{
        return processes(device, infoCount, infos, sizeof(nvmlProcessInfo_v2_t), false);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned int *infoCount,
                                                                 nvmlProcessInfo_t *infos)
{
        return processes(device, infoCount, infos, sizeof(nvmlProcessInfo_t), false);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device,
                                                               unsigned int *infoCount,
                                                               nvmlProcessInfo_v1_t *infos)
{
        return processes(device, infoCount, infos, sizeof(nvmlProcessInfo_v1_t), true);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_v2_t *infos)
{
        return processes(device, infoCount, infos, sizeof(nvmlProcessInfo_v2_t), true);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_t *infos)
{
        return processes(device, infoCount, infos, sizeof(nvmlProcessInfo_t), true);
}

/* One sample per process with utilisation figures, stamped now (so always
 * newer than a timestamp the caller saw before). */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
    unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp)
{
        GPU_CALL(device);
        if (!processSamplesCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (g->mig_enabled)
                return NVML_ERROR_NOT_SUPPORTED;
        unsigned long long now = mock_realtime_us();
        unsigned n = 0;
        for (size_t i = 0; i < g->n_procs; i++)
                n += g->procs[i].sm_util.set;
        if (!n || now <= lastSeenTimeStamp) {
                *processSamplesCount = 0;
                return NVML_ERROR_NOT_FOUND;
        }
        if (!utilization || *processSamplesCount < n) {
                *processSamplesCount = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        unsigned k = 0;
        for (size_t i = 0; i < g->n_procs; i++) {
                const struct mock_proc *p = &g->procs[i];
                if (!p->sm_util.set)
                        continue;
                utilization[k++] = (nvmlProcessUtilizationSample_t){
                    .pid = p->pid,
                    .timeStamp = now,
                    .smUtil = (unsigned)p->sm_util.v,
                    .memUtil = (unsigned)p->mem_util.v,
                    .encUtil = (unsigned)p->enc_util.v,
                    .decUtil = (unsigned)p->dec_util.v,
                };
        }
        *processSamplesCount = n;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                     nvmlEccCounterType_t counterType,
                                                     unsigned long long *eccCounts)
{
        GPU_CALL(device);
        if (!eccCounts || (unsigned)errorType > 1 || (unsigned)counterType > 1)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!g->ecc)
                return NVML_ERROR_NOT_SUPPORTED;
        *eccCounts = g->ecc_counts[errorType][counterType];
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                                   unsigned int *pageCount, unsigned long long *addresses)
{
        GPU_CALL(device);
        if (!pageCount || (unsigned)cause > 1 || (*pageCount && !addresses))
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!g->has_retired)
                return NVML_ERROR_NOT_SUPPORTED;
        unsigned n = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? g->retired_dbe : g->retired_sbe;
        unsigned cap = *pageCount;
        *pageCount = n;
        if (cap < n)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        for (unsigned i = 0; i < n; i++) /* made-up page addresses, 4 KiB apart */
                addresses[i] = 0x100000ULL * (cause + 1) + 0x1000ULL * i;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                                nvmlEnableState_t *isPending)
{
        GPU_CALL(device);
        if (!isPending)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!g->has_retired)
                return NVML_ERROR_NOT_SUPPORTED;
        *isPending = g->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                                      nvmlViolationTime_t *violTime)
{
        GPU_CALL(device);
        if (!violTime)
                return NVML_ERROR_INVALID_ARGUMENT;
        if ((unsigned)perfPolicyType > NVML_PERF_POLICY_RELIABILITY)
                return NVML_ERROR_NOT_SUPPORTED;
        violTime->referenceTime = mock_realtime_us();
        violTime->violationTime = g->violation_ns[perfPolicyType];
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
        GPU_CALL(device);
        return put_uint(speed, &g->fan_percent);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                         nvmlNvLinkErrorCounter_t counter,
                                                         unsigned long long *counterValue)
{
        GPU_CALL(device);
        if (!counterValue || link >= NVML_NVLINK_MAX_LINKS || (unsigned)counter > NVML_NVLINK_ERROR_DL_ECC_DATA)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (link >= g->link_ports || g->links[link].kind == MOCK_LINK_NONE)
                return NVML_ERROR_NOT_SUPPORTED;
        *counterValue = counter < 4 ? g->nvl_errors[counter] : 0;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v4(nvmlDevice_t device,
                                                                nvmlGridLicensableFeatures_t *features)
{
        GPU_CALL(device);
        if (!features)
                return NVML_ERROR_INVALID_ARGUMENT;
        memset(features, 0, sizeof(*features));
        if (!g->vgpu_licensed)
                return NVML_SUCCESS; /* bare metal: licensing not supported, no features */
        features->isGridLicenseSupported = 1;
        features->licensableFeaturesCount = 1;
        nvmlGridLicensableFeature_t *f = &features->gridLicensableFeatures[0];
        f->featureCode = NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE;
        f->featureState = 1;
        f->featureEnabled = 1;
        snprintf(f->productName, sizeof(f->productName), "%s", "NVIDIA Virtual Compute Server");
        return NVML_SUCCESS;
}
