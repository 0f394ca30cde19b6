/* Loading libnvidia-ml.so.1: where it is looked for, and the one table of
 * typed function pointers every other file of the backend calls through.
 *
 * Each row of syms[] names a field of struct nvml_lib and its candidate
 * symbols, newest first (nvmlInit_v2 before nvmlInit); the first that
 * resolves wins.  A required row with no candidate fails the load with the
 * symbol's name; an optional one leaves the field NULL and is listed in
 * missing[] for the caller to log once.  The fields are typed with
 * __typeof__ of the prototypes in nvml.h, so every call is checked by the
 * compiler; candidates of one row share the prototype, and the few whose
 * older versions fill a shorter struct are wrapped below (pci info, remote
 * pci info, event wait).
 *
 * The library is opened RTLD_NOW | RTLD_LOCAL: every symbol is bound at
 * load, and NVML's symbols never leak into the global namespace.  Never
 * logs; never calls NVML beyond dlopen/dlsym. */
#include "devices/nvidia/nvml-lib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

#define LIB_SONAME "libnvidia-ml.so.1"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers fit in void *");

struct sym_row {
        size_t offset;
        bool required;
        bool quiet; /* optional and not listed in missing[]: a metric's only */
        const char *names[3]; /* candidates, newest first; NULL-terminated */
};

#define ROW(field, req, ...) { offsetof(struct nvml_lib, field), req, false, { __VA_ARGS__, NULL } }
#define METRIC(field, ...) { offsetof(struct nvml_lib, field), false, true, { __VA_ARGS__, NULL } }

static const struct sym_row syms[] = {
        ROW(init, true, "nvmlInit_v2", "nvmlInit"),
        ROW(shutdown, true, "nvmlShutdown"),
        ROW(error_string, true, "nvmlErrorString"),
        ROW(device_count, true, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"),
        ROW(handle_by_index, true, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
        ROW(uuid, true, "nvmlDeviceGetUUID"),
        ROW(name, true, "nvmlDeviceGetName"),
        ROW(memory_info, true, "nvmlDeviceGetMemoryInfo"),
        /* checked as a pair below */
        ROW(pci_info, false, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"),
        ROW(pci_info_v1, false, "nvmlDeviceGetPciInfo"),

        ROW(minor_number, false, "nvmlDeviceGetMinorNumber"),
        ROW(driver_version, false, "nvmlSystemGetDriverVersion"),
        ROW(cuda_driver_version, false, "nvmlSystemGetCudaDriverVersion_v2",
            "nvmlSystemGetCudaDriverVersion"),
        ROW(compute_capability, false, "nvmlDeviceGetCudaComputeCapability"),
        ROW(architecture, false, "nvmlDeviceGetArchitecture"),
        ROW(brand, false, "nvmlDeviceGetBrand"),
        ROW(fabric_info, false, "nvmlDeviceGetGpuFabricInfo"),
        ROW(addressing_mode, false, "nvmlDeviceGetAddressingMode"),
        ROW(memory_affinity, false, "nvmlDeviceGetMemoryAffinity"),
        ROW(common_ancestor, false, "nvmlDeviceGetTopologyCommonAncestor"),
        ROW(nvlink_state, false, "nvmlDeviceGetNvLinkState"),
        ROW(nvlink_remote_pci, false, "nvmlDeviceGetNvLinkRemotePciInfo_v2"),
        ROW(nvlink_remote_pci_v1, false, "nvmlDeviceGetNvLinkRemotePciInfo"),
        ROW(nvlink_remote_type, false, "nvmlDeviceGetNvLinkRemoteDeviceType"),
        ROW(mig_mode, false, "nvmlDeviceGetMigMode"),
        ROW(max_mig_devices, false, "nvmlDeviceGetMaxMigDeviceCount"),
        ROW(mig_handle_by_index, false, "nvmlDeviceGetMigDeviceHandleByIndex"),
        ROW(mig_parent, false, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"),
        ROW(gpu_instance_id, false, "nvmlDeviceGetGpuInstanceId"),
        ROW(compute_instance_id, false, "nvmlDeviceGetComputeInstanceId"),
        ROW(attributes, false, "nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"),
        ROW(gi_profile_info, false, "nvmlDeviceGetGpuInstanceProfileInfo"),
        ROW(gi_by_id, false, "nvmlDeviceGetGpuInstanceById"),
        ROW(gi_info, false, "nvmlGpuInstanceGetInfo"),
        ROW(ci_profile_info, false, "nvmlGpuInstanceGetComputeInstanceProfileInfo"),
        ROW(ci_by_id, false, "nvmlGpuInstanceGetComputeInstanceById"),
        ROW(ci_info, false, "nvmlComputeInstanceGetInfo_v2", "nvmlComputeInstanceGetInfo"),
        ROW(event_set_create, false, "nvmlEventSetCreate"),
        ROW(register_events, false, "nvmlDeviceRegisterEvents"),
        ROW(supported_events, false, "nvmlDeviceGetSupportedEventTypes"),
        ROW(event_set_wait, false, "nvmlEventSetWait_v2", "nvmlEventSetWait"),
        ROW(event_set_free, false, "nvmlEventSetFree"),

        /* sampling for metrics (sample.c) */
        METRIC(clock, "nvmlDeviceGetClockInfo"),
        METRIC(temperature, "nvmlDeviceGetTemperature"),
        METRIC(power, "nvmlDeviceGetPowerUsage"),
        METRIC(energy, "nvmlDeviceGetTotalEnergyConsumption"),
        METRIC(pcie_replay, "nvmlDeviceGetPcieReplayCounter"),
        METRIC(utilization, "nvmlDeviceGetUtilizationRates"),
        METRIC(encoder_util, "nvmlDeviceGetEncoderUtilization"),
        METRIC(decoder_util, "nvmlDeviceGetDecoderUtilization"),
        METRIC(memory_info_v2, "nvmlDeviceGetMemoryInfo_v2"),
        METRIC(remapped_rows, "nvmlDeviceGetRemappedRows"),
        METRIC(field_values, "nvmlDeviceGetFieldValues"),
        METRIC(compute_procs, "nvmlDeviceGetComputeRunningProcesses_v3",
               "nvmlDeviceGetComputeRunningProcesses_v2"),
        METRIC(compute_procs_v1, "nvmlDeviceGetComputeRunningProcesses"),
        METRIC(graphics_procs, "nvmlDeviceGetGraphicsRunningProcesses_v3",
               "nvmlDeviceGetGraphicsRunningProcesses_v2"),
        METRIC(graphics_procs_v1, "nvmlDeviceGetGraphicsRunningProcesses"),
        METRIC(process_util, "nvmlDeviceGetProcessUtilization"),
        METRIC(pcie_throughput, "nvmlDeviceGetPcieThroughput"),
        METRIC(clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
               "nvmlDeviceGetCurrentClocksThrottleReasons"),
        METRIC(power_limit, "nvmlDeviceGetPowerManagementLimit"),
        METRIC(enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit"),
        METRIC(fan_speed, "nvmlDeviceGetFanSpeed"),
        METRIC(pstate, "nvmlDeviceGetPerformanceState"),
        METRIC(ecc_total, "nvmlDeviceGetTotalEccErrors"),
        METRIC(retired_pages, "nvmlDeviceGetRetiredPages"),
        METRIC(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus"),
        METRIC(violation, "nvmlDeviceGetViolationStatus"),
        METRIC(nvlink_errors, "nvmlDeviceGetNvLinkErrorCounter"),
        METRIC(grid_licenses, "nvmlDeviceGetGridLicensableFeatures_v4"),
        METRIC(serial, "nvmlDeviceGetSerial"),
        METRIC(nvml_version, "nvmlSystemGetNVMLVersion"),
        METRIC(vbios, "nvmlDeviceGetVbiosVersion"),
        METRIC(gpm_query, "nvmlGpmQueryDeviceSupport"),
        METRIC(gpm_sample_alloc, "nvmlGpmSampleAlloc"),
        METRIC(gpm_sample_free, "nvmlGpmSampleFree"),
        METRIC(gpm_sample_get, "nvmlGpmSampleGet"),
        METRIC(gpm_mig_sample_get, "nvmlGpmMigSampleGet"),
        METRIC(gpm_metrics_get, "nvmlGpmMetricsGet"),
};

/* Library directories below a driver root, as distributions and NVIDIA's
 * installer lay them out. */
static const char *const lib_dirs[] = {
        "usr/lib64",
        "usr/lib/x86_64-linux-gnu",
        "usr/lib/aarch64-linux-gnu",
        "usr/lib",
        "lib64",
        "lib/x86_64-linux-gnu",
        "lib/aarch64-linux-gnu",
        "lib",
        NULL,
};

int nvml_lib_resolve(struct nvml_lib *l, nvml_lib_lookup lookup, void *ctx, struct diag *diag)
{
        if (atomic_load(&l->refs) == 0)
                atomic_init(&l->refs, 1); /* a table a test built */
        for (size_t i = 0; i < ARRAY_SIZE(syms); i++) {
                const struct sym_row *row = &syms[i];
                void *p = NULL;
                for (size_t k = 0; row->names[k] && !p; k++)
                        p = lookup(ctx, row->names[k]);
                if (!p && row->required)
                        return diag_set(diag, -ENOEXEC, "%s lacks the required symbol %s",
                                        l->path ? l->path : LIB_SONAME, row->names[0]);
                if (!p && !row->quiet && row->offset != offsetof(struct nvml_lib, pci_info) &&
                    row->offset != offsetof(struct nvml_lib, pci_info_v1))
                        l->missing = strv_push(l->missing, row->names[0]);
                memcpy((char *)l + row->offset, &p, sizeof(p));
        }
        if (!l->pci_info && !l->pci_info_v1)
                return diag_set(diag, -ENOEXEC,
                                "%s lacks the required symbol nvmlDeviceGetPciInfo_v3",
                                l->path ? l->path : LIB_SONAME);
        return 0;
}

static void *dl_lookup(void *ctx, const char *name)
{
        return dlsym(ctx, name);
}

/* dlopen with the reason it failed appended to tried (a "; "-separated log).
 * A path that is not a regular file (a FIFO would block dlopen's open(2),
 * and with it the loop) is refused before dlopen sees it. */
static void *try_open(const char *path, char **tried)
{
        struct stat st;
        _cleanup_free_ char *why = NULL;
        if (strchr(path, '/') && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
                why = xasprintf("%s: not a regular file", path);
        } else {
                void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (h)
                        return h;
                const char *e = dlerror();
                why = xstrdup(e ? e : path);
        }
        char *t = xasprintf("%s%s%s", *tried ? *tried : "", *tried ? "; " : "", why);
        free(*tried);
        *tried = t;
        return NULL;
}

static void *search(const char *driver_root, char **path, char **tried)
{
        const char *env = getenv(NVML_LIB_ENV);
        if (env && *env) {
                void *h = try_open(env, tried);
                if (h)
                        *path = xstrdup(env);
                return h;
        }
        _cleanup_free_ char *root = xstrdup(driver_root && *driver_root ? driver_root : "/");
        size_t n = strlen(root);
        while (n > 0 && root[n - 1] == '/')
                root[--n] = '\0';
        for (size_t i = 0; lib_dirs[i]; i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s/" LIB_SONAME, root, lib_dirs[i]);
                if (access(p, F_OK) != 0)
                        continue;
                void *h = try_open(p, tried);
                if (h) {
                        *path = TAKE_PTR(p);
                        return h;
                }
        }
        void *h = try_open(LIB_SONAME, tried);
        if (h)
                *path = xstrdup(LIB_SONAME);
        return h;
}

int nvml_lib_open(const char *driver_root, struct nvml_lib **out, struct diag *diag)
{
        _cleanup_free_ char *tried = NULL;
        struct nvml_lib *l = xcalloc(1, sizeof(*l));
        atomic_init(&l->refs, 1);
        l->handle = search(driver_root, &l->path, &tried);
        if (!l->handle) {
                diag_set(diag, -ENOENT, "cannot load " LIB_SONAME ": %s",
                         tried ? tried : "not found");
                nvml_lib_close(l);
                return -ENOENT;
        }
        int r = nvml_lib_resolve(l, dl_lookup, l->handle, diag);
        if (r < 0) {
                nvml_lib_close(l);
                return r;
        }
        *out = l;
        return 0;
}

struct nvml_lib *nvml_lib_ref(struct nvml_lib *l)
{
        atomic_fetch_add(&l->refs, 1);
        return l;
}

void nvml_lib_close(struct nvml_lib *l)
{
        if (!l || atomic_fetch_sub(&l->refs, 1) > 1)
                return;
        if (l->handle)
                dlclose(l->handle);
        free(l->path);
        strv_free(l->missing);
        free(l);
}

const char *nvml_lib_strerror(const struct nvml_lib *l, nvmlReturn_t r)
{
        static __thread char buf[32];
        const char *s = l && l->error_string ? l->error_string(r) : NULL;
        if (s && *s)
                return s;
        snprintf(buf, sizeof(buf), "NVML error %d", (int)r);
        return buf;
}

/* The v1 layout puts a 16-byte busId where busIdLegacy is and has no busId
 * field: the long form is rebuilt from the numbers. */
static void pci_from_v1(nvmlPciInfo_t *pci)
{
        snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", pci->domain, pci->bus,
                 pci->device);
}

nvmlReturn_t nvml_lib_pci_info(const struct nvml_lib *l, nvmlDevice_t d, nvmlPciInfo_t *pci)
{
        memset(pci, 0, sizeof(*pci));
        if (l->pci_info)
                return l->pci_info(d, pci);
        nvmlReturn_t r = l->pci_info_v1(d, pci);
        if (r == NVML_SUCCESS)
                pci_from_v1(pci);
        return r;
}

nvmlReturn_t nvml_lib_nvlink_remote_pci(const struct nvml_lib *l, nvmlDevice_t d, unsigned link,
                                        nvmlPciInfo_t *pci)
{
        memset(pci, 0, sizeof(*pci));
        if (l->nvlink_remote_pci)
                return l->nvlink_remote_pci(d, link, pci);
        if (!l->nvlink_remote_pci_v1)
                return NVML_ERROR_FUNCTION_NOT_FOUND;
        nvmlReturn_t r = l->nvlink_remote_pci_v1(d, link, pci);
        if (r == NVML_SUCCESS)
                pci_from_v1(pci);
        return r;
}

nvmlReturn_t nvml_lib_event_wait(const struct nvml_lib *l, nvmlEventSet_t set,
                                 nvmlEventData_t *data, unsigned timeout_ms)
{
        memset(data, 0, sizeof(*data));
        data->gpuInstanceId = DEVLET_NVML_NO_INSTANCE_ID;
        data->computeInstanceId = DEVLET_NVML_NO_INSTANCE_ID;
        return l->event_set_wait(set, data, timeout_ms);
}
