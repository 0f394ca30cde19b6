/* Mock NVML: initialisation, error strings, system queries and the calls
 * that turn an index, UUID, serial or PCI bus ID into a device handle.
 * Every call takes the state lock for its whole duration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock.h"

MOCK_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
        MOCK_LOCKED();
        return mock_init(flags);
}

MOCK_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
        MOCK_LOCKED();
        return mock_init(0);
}

MOCK_EXPORT nvmlReturn_t nvmlInit(void)
{
        MOCK_LOCKED();
        return mock_init(0);
}

MOCK_EXPORT nvmlReturn_t nvmlShutdown(void)
{
        MOCK_LOCKED();
        return mock_shutdown();
}

MOCK_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
        switch (result) {
        case NVML_SUCCESS:
                return "Success";
        case NVML_ERROR_UNINITIALIZED:
                return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT:
                return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED:
                return "Not Supported";
        case NVML_ERROR_NO_PERMISSION:
                return "Insufficient Permissions";
        case NVML_ERROR_ALREADY_INITIALIZED:
                return "Already Initialized";
        case NVML_ERROR_NOT_FOUND:
                return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE:
                return "Insufficient Size";
        case NVML_ERROR_INSUFFICIENT_POWER:
                return "Insufficient External Power";
        case NVML_ERROR_DRIVER_NOT_LOADED:
                return "Driver Not Loaded";
        case NVML_ERROR_TIMEOUT:
                return "Timeout";
        case NVML_ERROR_IRQ_ISSUE:
                return "Interrupt Request Issue";
        case NVML_ERROR_LIBRARY_NOT_FOUND:
                return "NVML Shared Library Not Found";
        case NVML_ERROR_FUNCTION_NOT_FOUND:
                return "Function Not Found";
        case NVML_ERROR_CORRUPTED_INFOROM:
                return "Corrupted infoROM";
        case NVML_ERROR_GPU_IS_LOST:
                return "GPU is lost";
        case NVML_ERROR_RESET_REQUIRED:
                return "GPU requires restart";
        case NVML_ERROR_OPERATING_SYSTEM:
                return "The operating system has blocked the request";
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
                return "RM has detected an NVML/RM version mismatch";
        case NVML_ERROR_IN_USE:
                return "In use by another client";
        case NVML_ERROR_MEMORY:
                return "Insufficient Memory";
        case NVML_ERROR_NO_DATA:
                return "No data";
        case NVML_ERROR_INSUFFICIENT_RESOURCES:
                return "Insufficient Resources";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
                return "Argument version mismatch";
        case NVML_ERROR_DEPRECATED:
                return "Deprecated";
        case NVML_ERROR_NOT_READY:
                return "Not Ready";
        default:
                return "Unknown Error";
        }
}

/* The version queries answer from the last configuration read, which exists
 * only once nvmlInit has run. */
static nvmlReturn_t system_cfg(const struct mock_config **out)
{
        if (mock_enter() == NVML_SUCCESS || mock_cfg()) {
                *out = mock_cfg();
                return NVML_SUCCESS;
        }
        return NVML_ERROR_UNINITIALIZED;
}

MOCK_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        return r != NVML_SUCCESS ? r : mock_copy_str(version, length, mock_cfg()->driver_version);
}

MOCK_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
        MOCK_LOCKED();
        const struct mock_config *c;
        nvmlReturn_t r = system_cfg(&c);
        return r != NVML_SUCCESS ? r : mock_copy_str(version, length, c->nvml_version);
}

MOCK_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
        MOCK_LOCKED();
        const struct mock_config *c;
        nvmlReturn_t r = system_cfg(&c);
        if (r != NVML_SUCCESS)
                return r;
        if (!cudaDriverVersion)
                return NVML_ERROR_INVALID_ARGUMENT;
        *cudaDriverVersion = c->cuda_version;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
        return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* A configured process name, else the running process's, else not found. */
MOCK_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!name || !length)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_config *c = mock_cfg();
        for (size_t i = 0; i < c->n_gpus; i++)
                for (size_t k = 0; k < c->gpus[i].n_procs; k++) {
                        const struct mock_proc *p = &c->gpus[i].procs[k];
                        if (p->pid == pid && p->name) {
                                snprintf(name, length, "%s", p->name);
                                return NVML_SUCCESS;
                        }
                }
        char path[64], buf[256];
        snprintf(path, sizeof(path), "/proc/%u/comm", pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return NVML_ERROR_NOT_FOUND;
        bool ok = fgets(buf, sizeof(buf), f) != NULL;
        fclose(f);
        if (!ok)
                return NVML_ERROR_NOT_FOUND;
        buf[strcspn(buf, "\n")] = 0;
        snprintf(name, length, "%s", buf);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!deviceCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        *deviceCount = (unsigned)mock_cfg()->n_gpus;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
        return nvmlDeviceGetCount_v2(deviceCount);
}

/* A handle by index is given out even for a lost GPU: the calls on it are
 * what fail, as on a GPU that fell off the bus after enumeration. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        struct nvmlDevice_st *d = mock_gpu_at(index);
        if (!device || !d)
                return NVML_ERROR_INVALID_ARGUMENT;
        *device = d;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
        return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static nvmlReturn_t found(struct nvmlDevice_st *d, nvmlDevice_t *device)
{
        if (!d)
                return NVML_ERROR_NOT_FOUND;
        if (d->gpu->lost)
                return NVML_ERROR_GPU_IS_LOST;
        *device = d;
        return NVML_SUCCESS;
}

/* Also accepts the pre-R470 MIG form "MIG-GPU-<uuid>/<gi>/<ci>". */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!uuid || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct nvmlDevice_st *d = mock_device_by_uuid(uuid);
        if (!d && !strncmp(uuid, "MIG-GPU-", 8)) {
                char gpu_uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
                unsigned gi, ci;
                const char *slash = strchr(uuid, '/');
                size_t n = slash ? (size_t)(slash - (uuid + 4)) : 0;
                char tail;
                if (slash && n < sizeof(gpu_uuid) &&
                    sscanf(slash, "/%u/%u%c", &gi, &ci, &tail) == 2) {
                        memcpy(gpu_uuid, uuid + 4, n);
                        gpu_uuid[n] = 0;
                        struct nvmlDevice_st *g = mock_device_by_uuid(gpu_uuid);
                        for (unsigned i = 0; g && !g->parent && i < MOCK_MAX_MIG && !d; i++) {
                                struct nvmlDevice_st *m = mock_mig_at(g, i);
                                if (m && m->mig->gi == gi && m->mig->ci == ci)
                                        d = m;
                        }
                }
        }
        return found(d, device);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!serial || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_config *c = mock_cfg();
        for (size_t i = 0; i < c->n_gpus; i++)
                if (c->gpus[i].serial && !strcmp(c->gpus[i].serial, serial))
                        return found(mock_gpu_at((unsigned)i), device);
        return NVML_ERROR_NOT_FOUND;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId,
                                                          nvmlDevice_t *device)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        struct mock_pci want;
        if (!device || !mock_parse_pci(pciBusId, &want))
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_config *c = mock_cfg();
        for (size_t i = 0; i < c->n_gpus; i++) {
                const struct mock_pci *p = &c->gpus[i].pci;
                if (p->domain == want.domain && p->bus == want.bus && p->device == want.device)
                        return found(mock_gpu_at((unsigned)i), device);
        }
        return NVML_ERROR_NOT_FOUND;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
        return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}
