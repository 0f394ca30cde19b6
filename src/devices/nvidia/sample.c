/* NVML sampling for the metrics collector (see sample.h).
 *
 * Entry points are looked up with dlsym in the library handle we are given,
 * newest version first, and typed after devices/nvidia/nvml.h; a missing
 * optional one leaves its values out.  Each sample walks the GPUs (and, on
 * a GPU in MIG mode, its MIG devices), reads the telemetry, memory and the
 * running processes, and the per-process SM utilisation since the previous
 * sample.  Buffers NVML fills are bounded (4096 processes per device).
 * Runs on the collector thread only; never logs above debug. */
#include "metrics/sample.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"

#define SMP_FN(f) __typeof__(f) *
#define MAX_PROCS 4096
#define MAX_GPUS 64
#define MAX_MIGS 16
#define MIB (1024.0 * 1024.0)

struct smp_nvml {
        void *dl;
        SMP_FN(nvmlInit_v2) init;
        SMP_FN(nvmlShutdown) shutdown;
        SMP_FN(nvmlSystemGetDriverVersion) driver_version;
        SMP_FN(nvmlDeviceGetCount_v2) count;
        SMP_FN(nvmlDeviceGetHandleByIndex_v2) by_index;
        SMP_FN(nvmlDeviceGetUUID) uuid;
        SMP_FN(nvmlDeviceGetName) name;
        SMP_FN(nvmlDeviceGetPciInfo_v3) pci; /* _v3 or _v2: same layout */
        SMP_FN(nvmlDeviceGetMinorNumber) minor;
        SMP_FN(nvmlDeviceGetMigMode) mig_mode;
        SMP_FN(nvmlDeviceGetMaxMigDeviceCount) max_migs;
        SMP_FN(nvmlDeviceGetMigDeviceHandleByIndex) mig_by_index;
        SMP_FN(nvmlDeviceGetGpuInstanceId) gi_id;
        SMP_FN(nvmlDeviceGetComputeInstanceId) ci_id;
        SMP_FN(nvmlDeviceGetClockInfo) clock;
        SMP_FN(nvmlDeviceGetTemperature) temperature;
        SMP_FN(nvmlDeviceGetPowerUsage) power;
        SMP_FN(nvmlDeviceGetTotalEnergyConsumption) energy;
        SMP_FN(nvmlDeviceGetPcieReplayCounter) replay;
        SMP_FN(nvmlDeviceGetUtilizationRates) utilization;
        SMP_FN(nvmlDeviceGetEncoderUtilization) enc;
        SMP_FN(nvmlDeviceGetDecoderUtilization) dec;
        SMP_FN(nvmlDeviceGetMemoryInfo_v2) memory_v2;
        SMP_FN(nvmlDeviceGetMemoryInfo) memory;
        SMP_FN(nvmlDeviceGetRemappedRows) remapped;
        SMP_FN(nvmlDeviceGetFieldValues) fields;
        /* _v3 or _v2 fill 24-byte entries, the plain call 16-byte ones */
        SMP_FN(nvmlDeviceGetComputeRunningProcesses_v3) compute_procs;
        SMP_FN(nvmlDeviceGetComputeRunningProcesses) compute_procs_v1;
        SMP_FN(nvmlDeviceGetGraphicsRunningProcesses_v3) graphics_procs;
        SMP_FN(nvmlDeviceGetGraphicsRunningProcesses) graphics_procs_v1;
        SMP_FN(nvmlDeviceGetProcessUtilization) proc_util;

        char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
        /* per GPU index: the newest process-utilisation sample seen */
        unsigned long long last_util_ts[MAX_GPUS];
        nvmlProcessInfo_t *proc_buf;
        nvmlProcessUtilizationSample_t *util_buf;
};

static void *sym(void *dl, const char *a, const char *b)
{
        void *p = dlsym(dl, a);
        if (!p && b)
                p = dlsym(dl, b);
        return p;
}

#define LOOKUP(field, a, b) (n->field = (__typeof__(n->field))sym(dl, a, b))

int smp_nvml_new(void *dl, struct smp_nvml **out, char **err)
{
        _cleanup_free_ struct smp_nvml *n = xcalloc(1, sizeof(*n));
        n->dl = dl;
        LOOKUP(init, "nvmlInit_v2", "nvmlInit");
        LOOKUP(shutdown, "nvmlShutdown", NULL);
        LOOKUP(count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
        LOOKUP(by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
        LOOKUP(uuid, "nvmlDeviceGetUUID", NULL);
        if (!n->init || !n->shutdown || !n->count || !n->by_index || !n->uuid) {
                *err = xstrdup("libnvidia-ml lacks nvmlInit, nvmlDeviceGetCount, "
                               "nvmlDeviceGetHandleByIndex or nvmlDeviceGetUUID");
                return -ENOEXEC;
        }
        LOOKUP(driver_version, "nvmlSystemGetDriverVersion", NULL);
        LOOKUP(name, "nvmlDeviceGetName", NULL);
        LOOKUP(pci, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
        LOOKUP(minor, "nvmlDeviceGetMinorNumber", NULL);
        LOOKUP(mig_mode, "nvmlDeviceGetMigMode", NULL);
        LOOKUP(max_migs, "nvmlDeviceGetMaxMigDeviceCount", NULL);
        LOOKUP(mig_by_index, "nvmlDeviceGetMigDeviceHandleByIndex", NULL);
        LOOKUP(gi_id, "nvmlDeviceGetGpuInstanceId", NULL);
        LOOKUP(ci_id, "nvmlDeviceGetComputeInstanceId", NULL);
        LOOKUP(clock, "nvmlDeviceGetClockInfo", NULL);
        LOOKUP(temperature, "nvmlDeviceGetTemperature", NULL);
        LOOKUP(power, "nvmlDeviceGetPowerUsage", NULL);
        LOOKUP(energy, "nvmlDeviceGetTotalEnergyConsumption", NULL);
        LOOKUP(replay, "nvmlDeviceGetPcieReplayCounter", NULL);
        LOOKUP(utilization, "nvmlDeviceGetUtilizationRates", NULL);
        LOOKUP(enc, "nvmlDeviceGetEncoderUtilization", NULL);
        LOOKUP(dec, "nvmlDeviceGetDecoderUtilization", NULL);
        LOOKUP(memory_v2, "nvmlDeviceGetMemoryInfo_v2", NULL);
        LOOKUP(memory, "nvmlDeviceGetMemoryInfo", NULL);
        LOOKUP(remapped, "nvmlDeviceGetRemappedRows", NULL);
        LOOKUP(fields, "nvmlDeviceGetFieldValues", NULL);
        LOOKUP(compute_procs, "nvmlDeviceGetComputeRunningProcesses_v3",
               "nvmlDeviceGetComputeRunningProcesses_v2");
        LOOKUP(compute_procs_v1, "nvmlDeviceGetComputeRunningProcesses", NULL);
        LOOKUP(graphics_procs, "nvmlDeviceGetGraphicsRunningProcesses_v3",
               "nvmlDeviceGetGraphicsRunningProcesses_v2");
        LOOKUP(graphics_procs_v1, "nvmlDeviceGetGraphicsRunningProcesses", NULL);
        LOOKUP(proc_util, "nvmlDeviceGetProcessUtilization", NULL);

        nvmlReturn_t r = n->init();
        if (r != NVML_SUCCESS) {
                *err = xasprintf("nvmlInit failed: NVML error %d", (int)r);
                return -EIO;
        }
        if (!n->driver_version || n->driver_version(n->driver, sizeof(n->driver)) != NVML_SUCCESS)
                n->driver[0] = '\0';
        n->proc_buf = xcalloc(MAX_PROCS, sizeof(*n->proc_buf));
        n->util_buf = xcalloc(MAX_PROCS, sizeof(*n->util_buf));
        *out = TAKE_PTR(n);
        return 0;
}

void smp_nvml_free(struct smp_nvml *n)
{
        if (!n)
                return;
        n->shutdown();
        free(n->proc_buf);
        free(n->util_buf);
        free(n);
}

const char *smp_nvml_driver_version(const struct smp_nvml *n)
{
        return n->driver;
}

void smp_sample_release(struct smp_sample *s)
{
        for (size_t i = 0; i < s->n_units; i++)
                free(s->units[i].procs);
        free(s->units);
        *s = (struct smp_sample){ 0 };
}

static void set(struct smp_unit *u, enum smp_field f, double v)
{
        u->has[f] = true;
        u->value[f] = v;
}

static void sample_memory(struct smp_nvml *n, struct smp_unit *u)
{
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        if (n->memory_v2 && n->memory_v2(u->handle, &m2) == NVML_SUCCESS) {
                /* NVML counts reserved memory in "used" or apart depending on
                 * the driver; total - free - reserved is the allocated memory
                 * either way */
                unsigned long long taken = m2.total - m2.free;
                unsigned long long used = taken >= m2.reserved ? taken - m2.reserved : m2.used;
                set(u, SMP_FB_FREE, (double)(m2.free / (1024 * 1024)));
                set(u, SMP_FB_USED, (double)(used / (1024 * 1024)));
                set(u, SMP_FB_RESERVED, (double)(m2.reserved / (1024 * 1024)));
                return;
        }
        nvmlMemory_t m;
        if (n->memory && n->memory(u->handle, &m) == NVML_SUCCESS) {
                set(u, SMP_FB_FREE, (double)(m.free / (1024 * 1024)));
                set(u, SMP_FB_USED, (double)(m.used / (1024 * 1024)));
        }
}

static void sample_telemetry(struct smp_nvml *n, struct smp_unit *u)
{
        nvmlDevice_t h = u->handle;
        unsigned v, period;
        unsigned long long ull;
        if (n->clock && n->clock(h, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
                set(u, SMP_SM_CLOCK, v);
        if (n->clock && n->clock(h, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
                set(u, SMP_MEM_CLOCK, v);
        if (n->temperature && n->temperature(h, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
                set(u, SMP_GPU_TEMP, v);
        if (n->power && n->power(h, &v) == NVML_SUCCESS)
                set(u, SMP_POWER_USAGE, v / 1000.0);
        if (n->energy && n->energy(h, &ull) == NVML_SUCCESS)
                set(u, SMP_TOTAL_ENERGY, (double)ull);
        if (n->replay && n->replay(h, &v) == NVML_SUCCESS)
                set(u, SMP_PCIE_REPLAY, v);
        nvmlUtilization_t util;
        if (n->utilization && n->utilization(h, &util) == NVML_SUCCESS) {
                set(u, SMP_GPU_UTIL, util.gpu);
                set(u, SMP_MEM_COPY_UTIL, util.memory);
        }
        if (n->enc && n->enc(h, &v, &period) == NVML_SUCCESS)
                set(u, SMP_ENC_UTIL, v);
        if (n->dec && n->dec(h, &v, &period) == NVML_SUCCESS)
                set(u, SMP_DEC_UTIL, v);
        unsigned cor, unc, pending, failure;
        if (n->remapped && n->remapped(h, &cor, &unc, &pending, &failure) == NVML_SUCCESS) {
                set(u, SMP_REMAP_CORRECTABLE, cor);
                set(u, SMP_REMAP_UNCORRECTABLE, unc);
                set(u, SMP_REMAP_FAILURE, failure ? 1 : 0);
        }
        if (n->fields) {
                /* scope UINT_MAX: NVLink counters summed over every link */
                nvmlFieldValue_t f[3] = {
                        { .fieldId = NVML_FI_DEV_MEMORY_TEMP },
                        { .fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, .scopeId = ~0U },
                        { .fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, .scopeId = ~0U },
                };
                if (n->fields(h, 3, f) == NVML_SUCCESS) {
                        if (f[0].nvmlReturn == NVML_SUCCESS)
                                set(u, SMP_MEMORY_TEMP, f[0].valueType == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                                                                ? (double)f[0].value.ullVal
                                                                : (double)f[0].value.uiVal);
                        if (f[1].nvmlReturn == NVML_SUCCESS && f[2].nvmlReturn == NVML_SUCCESS)
                                set(u, SMP_NVLINK_BANDWIDTH,
                                    (double)(f[1].value.ullVal + f[2].value.ullVal));
                }
        }
}

/* One kind of process list into procs (pids already there are merged). */
static void list_procs(struct smp_nvml *n, struct smp_unit *u, bool graphics)
{
        SMP_FN(nvmlDeviceGetComputeRunningProcesses_v3) v3 = graphics ? n->graphics_procs : n->compute_procs;
        SMP_FN(nvmlDeviceGetComputeRunningProcesses) v1 = graphics ? n->graphics_procs_v1 : n->compute_procs_v1;
        unsigned count = MAX_PROCS;
        nvmlReturn_t r;
        size_t stride;
        if (v3) {
                r = v3(u->handle, &count, n->proc_buf);
                stride = sizeof(nvmlProcessInfo_t);
        } else if (v1) {
                r = v1(u->handle, &count, (nvmlProcessInfo_v1_t *)n->proc_buf);
                stride = sizeof(nvmlProcessInfo_v1_t);
        } else {
                return;
        }
        if (r != NVML_SUCCESS || count > MAX_PROCS)
                return;
        u->procs_known = true;
        for (unsigned i = 0; i < count; i++) {
                nvmlProcessInfo_v1_t p;
                memcpy(&p, (const char *)n->proc_buf + (size_t)i * stride, sizeof(p));
                bool merged = false;
                for (size_t k = 0; k < u->n_procs && !merged; k++) {
                        if (u->procs[k].pid == p.pid) {
                                u->procs[k].mem_bytes += p.usedGpuMemory;
                                merged = true;
                        }
                }
                if (merged)
                        continue;
                u->procs = xrealloc(u->procs, (u->n_procs + 1) * sizeof(*u->procs));
                /* NVML reports NVML_VALUE_NOT_AVAILABLE (all ones) without permission */
                uint64_t mem = p.usedGpuMemory == ~0ULL ? 0 : p.usedGpuMemory;
                u->procs[u->n_procs++] = (struct smp_proc){ .pid = p.pid, .mem_bytes = mem, .sm_util = -1 };
        }
}

/* SM utilisation per process since the last sample (whole GPUs only). */
static void proc_utilization(struct smp_nvml *n, struct smp_unit *u)
{
        if (!n->proc_util || u->id.gpu >= MAX_GPUS || u->n_procs == 0)
                return;
        unsigned count = MAX_PROCS;
        unsigned long long *last = &n->last_util_ts[u->id.gpu];
        if (n->proc_util(u->handle, n->util_buf, &count, *last) != NVML_SUCCESS || count > MAX_PROCS)
                return;
        unsigned long long newest = *last;
        _cleanup_free_ unsigned long long *seen = xcalloc(u->n_procs, sizeof(*seen));
        for (unsigned i = 0; i < count; i++) {
                const nvmlProcessUtilizationSample_t *s = &n->util_buf[i];
                if (s->timeStamp > newest)
                        newest = s->timeStamp;
                for (size_t k = 0; k < u->n_procs; k++) {
                        /* several samples of one process: the newest counts */
                        if (u->procs[k].pid != s->pid || (u->procs[k].sm_util >= 0 && s->timeStamp < seen[k]))
                                continue;
                        u->procs[k].sm_util = (int)(s->smUtil > 100 ? 100 : s->smUtil);
                        seen[k] = s->timeStamp;
                }
        }
        *last = newest;
}

static struct smp_unit *unit_add(struct smp_sample *s, size_t *cap)
{
        xgrow((void **)&s->units, cap, s->n_units + 1, sizeof(*s->units));
        struct smp_unit *u = &s->units[s->n_units++];
        memset(u, 0, sizeof(*u));
        return u;
}

/* The GPU instance's profile from a MIG device's name, "<GPU name> MIG
 * 1g.10gb"; a compute instance's "1c.3g.40gb" names its GPU instance's
 * "3g.40gb" (DCGM reports per GPU instance). */
static void mig_profile(const char *name, char *out, size_t size)
{
        const char *p = strstr(name, " MIG ");
        p = p ? p + 5 : "";
        const char *q = p;
        while (*q >= '0' && *q <= '9')
                q++;
        if (q > p && q[0] == 'c' && q[1] == '.')
                p = q + 2;
        snprintf(out, size, "%s", p);
}

static void fix_ids(struct smp_sample *s)
{
        /* the strings live in the units: point at them once the array stopped moving */
        for (size_t i = 0; i < s->n_units; i++) {
                struct smp_unit *u = &s->units[i];
                u->id.uuid = u->uuid;
                u->id.parent_uuid = u->parent_uuid;
        }
}

static void sample_migs(struct smp_nvml *n, struct smp_sample *s, size_t *cap, size_t gpu_idx)
{
        if (!n->mig_by_index || !n->max_migs)
                return;
        unsigned max = 0;
        if (n->max_migs(s->units[gpu_idx].handle, &max) != NVML_SUCCESS)
                return;
        for (unsigned j = 0; j < max && j < MAX_MIGS; j++) {
                nvmlDevice_t mh;
                if (n->mig_by_index(s->units[gpu_idx].handle, j, &mh) != NVML_SUCCESS)
                        continue;
                struct smp_unit *u = unit_add(s, cap);
                const struct smp_unit *g = &s->units[gpu_idx];
                u->handle = mh;
                u->id.gpu = g->id.gpu;
                u->id.mig = (int)j;
                u->id.minor = g->id.minor;
                memcpy(u->parent_uuid, g->uuid, sizeof(u->parent_uuid));
                memcpy(u->name, g->name, sizeof(u->name));
                memcpy(u->bus_id, g->bus_id, sizeof(u->bus_id));
                if (n->uuid(mh, u->uuid, sizeof(u->uuid)) != NVML_SUCCESS)
                        u->uuid[0] = '\0';
                char mig_name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
                if (n->name && n->name(mh, mig_name, sizeof(mig_name)) == NVML_SUCCESS)
                        mig_profile(mig_name, u->profile, sizeof(u->profile));
                unsigned id;
                if (n->gi_id && n->gi_id(mh, &id) == NVML_SUCCESS)
                        u->id.gi = id;
                if (n->ci_id && n->ci_id(mh, &id) == NVML_SUCCESS)
                        u->id.ci = id;
                sample_memory(n, u);
                list_procs(n, u, false);
                list_procs(n, u, true);
        }
}

int smp_collect(struct smp_nvml *n, struct smp_sample *out)
{
        struct smp_sample s = { 0 };
        size_t cap = 0;
        unsigned count = 0;
        if (n->count(&count) != NVML_SUCCESS) {
                *out = s;
                return -EIO;
        }
        for (unsigned i = 0; i < count && i < MAX_GPUS; i++) {
                nvmlDevice_t h;
                if (n->by_index(i, &h) != NVML_SUCCESS)
                        continue;
                size_t gi = s.n_units;
                struct smp_unit *u = unit_add(&s, &cap);
                u->handle = h;
                u->id.gpu = i;
                u->id.mig = -1;
                u->id.minor = -1;
                if (n->uuid(h, u->uuid, sizeof(u->uuid)) != NVML_SUCCESS) {
                        s.n_units--; /* a lost GPU: nothing to say about it */
                        continue;
                }
                memcpy(u->parent_uuid, u->uuid, sizeof(u->uuid));
                if (!n->name || n->name(h, u->name, sizeof(u->name)) != NVML_SUCCESS)
                        u->name[0] = '\0';
                nvmlPciInfo_t pci;
                if (n->pci && n->pci(h, &pci) == NVML_SUCCESS)
                        snprintf(u->bus_id, sizeof(u->bus_id), "%s", pci.busId);
                unsigned minor;
                if (n->minor && n->minor(h, &minor) == NVML_SUCCESS)
                        u->id.minor = (int)minor;
                sample_telemetry(n, u);
                sample_memory(n, u);
                unsigned mode = 0, pending = 0;
                bool mig = n->mig_mode && n->mig_mode(h, &mode, &pending) == NVML_SUCCESS &&
                           mode == NVML_DEVICE_MIG_ENABLE;
                if (mig) {
                        sample_migs(n, &s, &cap, gi);
                        continue;
                }
                list_procs(n, u, false);
                list_procs(n, u, true);
                proc_utilization(n, u);
        }
        fix_ids(&s);
        *out = s;
        return 0;
}
