/* Mock NVML: Multi-Instance GPU.
 *
 * A GPU whose configuration lists `mig` devices is in MIG mode.  Each entry
 * is one MIG device: a compute instance (ci) inside a GPU instance (gi), with
 * its own handle, UUID and attributes.  Profile queries answer from the GPU's
 * profile table (profiles.c); GPU- and compute-instance handles are the
 * stable objects of state.c.  Real NVML's privilege checks are not modelled. */
#include <stdio.h>
#include <string.h>

#include "mock.h"

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                              unsigned int *pendingMode)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!currentMode || !pendingMode)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->gpu->mig_capable)
                return NVML_ERROR_NOT_SUPPORTED;
        *currentMode = *pendingMode =
            d->gpu->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
        return NVML_SUCCESS;
}

/* Zero unless MIG is on. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        *count = !d->parent && d->gpu->mig_enabled ? d->gpu->mig_max : 0;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                             unsigned int index,
                                                             nvmlDevice_t *migDevice)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!migDevice)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->gpu->mig_enabled)
                return NVML_ERROR_NOT_SUPPORTED;
        if (index >= d->gpu->mig_max)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct nvmlDevice_st *m = mock_mig_at(d, index);
        if (!m)
                return NVML_ERROR_NOT_FOUND;
        *migDevice = m;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                      nvmlDevice_t *device)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(migDevice, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!device)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->parent)
                return NVML_ERROR_NOT_SUPPORTED;
        *device = d->parent;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!isMigDevice)
                return NVML_ERROR_INVALID_ARGUMENT;
        *isMigDevice = d->parent != NULL;
        return NVML_SUCCESS;
}

static nvmlReturn_t mig_id(nvmlDevice_t device, unsigned int *id, bool compute)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!id)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->mig)
                return NVML_ERROR_NOT_SUPPORTED;
        *id = compute ? d->mig->ci : d->mig->gi;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
        return mig_id(device, id, false);
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
        return mig_id(device, id, true);
}

/* Answered for MIG device handles only, as NVML documents. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                                    nvmlDeviceAttributes_t *attributes)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!attributes)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_mig *m = d->mig;
        if (!m)
                return NVML_ERROR_NOT_SUPPORTED;
        *attributes = (nvmlDeviceAttributes_t){
            .multiprocessorCount = m->sms,
            .sharedCopyEngineCount = m->ce,
            .sharedDecoderCount = m->dec,
            .sharedEncoderCount = m->enc,
            .sharedJpegCount = m->jpeg,
            .sharedOfaCount = m->ofa,
            .gpuInstanceSliceCount = d->gpu->profiles[m->gi_profile].slices,
            .computeInstanceSliceCount = m->ci_slices,
            .memorySizeMB = m->memory_mib,
        };
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device,
                                                 nvmlDeviceAttributes_t *attributes)
{
        return nvmlDeviceGetAttributes_v2(device, attributes);
}

/* ------------------------------------------------------------------ */
/* GPU instances                                                       */

static nvmlReturn_t gi_profile(nvmlDevice_t device, unsigned profile,
                               const struct mock_gi_profile **out)
{
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->gpu->mig_enabled || !d->gpu->profiles[profile].supported)
                return NVML_ERROR_NOT_SUPPORTED;
        *out = &d->gpu->profiles[profile];
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device,
                                                             unsigned int profile,
                                                             nvmlGpuInstanceProfileInfo_t *info)
{
        MOCK_LOCKED();
        const struct mock_gi_profile *p;
        nvmlReturn_t r = gi_profile(device, profile, &p);
        if (r != NVML_SUCCESS)
                return r;
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        *info = (nvmlGpuInstanceProfileInfo_t){
            .id = p->id,
            .isP2pSupported = 0,
            .sliceCount = p->slices,
            .instanceCount = p->instances,
            .multiprocessorCount = p->sms,
            .copyEngineCount = p->ce,
            .decoderCount = p->dec,
            .encoderCount = p->enc,
            .jpegCount = p->jpeg,
            .ofaCount = p->ofa,
            .memorySizeMB = p->memory_mib,
        };
        return NVML_SUCCESS;
}

/* Fills a v2 or a v3 struct, as info->version asks. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device,
                                                              unsigned int profile,
                                                              nvmlGpuInstanceProfileInfo_v2_t *info)
{
        MOCK_LOCKED();
        const struct mock_gi_profile *p;
        nvmlReturn_t r = gi_profile(device, profile, &p);
        if (r != NVML_SUCCESS)
                return r;
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        snprintf(name, sizeof(name), "MIG %s", p->name);
        if (info->version == nvmlGpuInstanceProfileInfo_v2) {
                *info = (nvmlGpuInstanceProfileInfo_v2_t){
                    .version = nvmlGpuInstanceProfileInfo_v2,
                    .id = p->id,
                    .sliceCount = p->slices,
                    .instanceCount = p->instances,
                    .multiprocessorCount = p->sms,
                    .copyEngineCount = p->ce,
                    .decoderCount = p->dec,
                    .encoderCount = p->enc,
                    .jpegCount = p->jpeg,
                    .ofaCount = p->ofa,
                    .memorySizeMB = p->memory_mib,
                };
                memcpy(info->name, name, sizeof(name));
                return NVML_SUCCESS;
        }
        if (info->version == nvmlGpuInstanceProfileInfo_v3) {
                nvmlGpuInstanceProfileInfo_v3_t *v3 =
                    (nvmlGpuInstanceProfileInfo_v3_t *)(void *)info;
                *v3 = (nvmlGpuInstanceProfileInfo_v3_t){
                    .version = nvmlGpuInstanceProfileInfo_v3,
                    .id = p->id,
                    .sliceCount = p->slices,
                    .instanceCount = p->instances,
                    .multiprocessorCount = p->sms,
                    .copyEngineCount = p->ce,
                    .decoderCount = p->dec,
                    .encoderCount = p->enc,
                    .jpegCount = p->jpeg,
                    .ofaCount = p->ofa,
                    .memorySizeMB = p->memory_mib,
                    .capabilities = 0,
                };
                memcpy(v3->name, name, sizeof(name));
                return NVML_SUCCESS;
        }
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

static nvmlGpuInstancePlacement_t gi_placement(const struct nvmlGpuInstance_st *gi)
{
        const struct mock_gpu *g = gi->gpu->gpu;
        return (nvmlGpuInstancePlacement_t){
            .start = gi->mig->gi_start,
            .size = g->profiles[gi->mig->gi_profile].mem_slices,
        };
}

/* Writes at most the profile's instance count: the buffer size NVML asks for. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                                   nvmlGpuInstance_t *gpuInstances,
                                                   unsigned int *count)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!gpuInstances || !count)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_gpu *g = d->gpu;
        if (!g->mig_enabled)
                return NVML_ERROR_NOT_SUPPORTED;
        unsigned index;
        const struct mock_gi_profile *p = mock_profile_by_id(g, profileId, &index);
        if (!p)
                return NVML_ERROR_INVALID_ARGUMENT;
        unsigned n = 0;
        for (size_t k = 0; k < g->n_mig && n < p->instances; k++) {
                const struct mock_mig *m = &g->mig[k];
                struct nvmlGpuInstance_st *gi = mock_gi_find(d, m->gi);
                if (m->gi_profile == index && gi->mig == m)
                        gpuInstances[n++] = gi;
        }
        *count = n;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                      nvmlGpuInstance_t *gpuInstance)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!gpuInstance)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->gpu->mig_enabled)
                return NVML_ERROR_NOT_SUPPORTED;
        struct nvmlGpuInstance_st *gi = mock_gi_find(d, id);
        if (!gi)
                return NVML_ERROR_NOT_FOUND;
        *gpuInstance = gi;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance,
                                                nvmlGpuInstanceInfo_t *info)
{
        MOCK_LOCKED();
        struct nvmlGpuInstance_st *gi;
        nvmlReturn_t r = mock_gpu_instance(gpuInstance, &gi);
        if (r != NVML_SUCCESS)
                return r;
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        *info = (nvmlGpuInstanceInfo_t){
            .device = gi->gpu,
            .id = gi->id,
            .profileId = gi->gpu->gpu->profiles[gi->mig->gi_profile].id,
            .placement = gi_placement(gi),
        };
        return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Compute instances                                                   */

struct ci_profile {
        unsigned id, slices, instances, sms;
        const struct mock_gi_profile *gi;
};

/* Compute-instance profile IDs equal their NVML_COMPUTE_INSTANCE_PROFILE_*
 * index; each shares the engines of its GPU instance. */
static nvmlReturn_t ci_profile(nvmlGpuInstance_t gpuInstance, unsigned profile, unsigned engProfile,
                               struct ci_profile *out)
{
        struct nvmlGpuInstance_st *gi;
        nvmlReturn_t r = mock_gpu_instance(gpuInstance, &gi);
        if (r != NVML_SUCCESS)
                return r;
        if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
            engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_gi_profile *p = &gi->gpu->gpu->profiles[gi->mig->gi_profile];
        for (unsigned c = 1; c <= 8; c++)
                if (mock_ci_profile_index(c) == (int)profile &&
                    mock_ci_slices_allowed(p->slices, c)) {
                        *out = (struct ci_profile){
                            .id = profile,
                            .slices = c,
                            .instances = p->slices / c,
                            .sms = p->sms * c / p->slices,
                            .gi = p,
                        };
                        return NVML_SUCCESS;
                }
        return NVML_ERROR_NOT_SUPPORTED;
}

MOCK_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_t *info)
{
        MOCK_LOCKED();
        struct ci_profile c;
        nvmlReturn_t r = ci_profile(gpuInstance, profile, engProfile, &c);
        if (r != NVML_SUCCESS)
                return r;
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        *info = (nvmlComputeInstanceProfileInfo_t){
            .id = c.id,
            .sliceCount = c.slices,
            .instanceCount = c.instances,
            .multiprocessorCount = c.sms,
            .sharedCopyEngineCount = c.gi->ce,
            .sharedDecoderCount = c.gi->dec,
            .sharedEncoderCount = c.gi->enc,
            .sharedJpegCount = c.gi->jpeg,
            .sharedOfaCount = c.gi->ofa,
        };
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_v2_t *info)
{
        MOCK_LOCKED();
        struct ci_profile c;
        nvmlReturn_t r = ci_profile(gpuInstance, profile, engProfile, &c);
        if (r != NVML_SUCCESS)
                return r;
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        if (c.slices == c.gi->slices)
                snprintf(name, sizeof(name), "MIG %s", c.gi->name);
        else
                snprintf(name, sizeof(name), "MIG %uc.%s", c.slices, c.gi->name);
        nvmlComputeInstanceProfileInfo_v2_t v = {
            .id = c.id,
            .sliceCount = c.slices,
            .instanceCount = c.instances,
            .multiprocessorCount = c.sms,
            .sharedCopyEngineCount = c.gi->ce,
            .sharedDecoderCount = c.gi->dec,
            .sharedEncoderCount = c.gi->enc,
            .sharedJpegCount = c.gi->jpeg,
            .sharedOfaCount = c.gi->ofa,
        };
        memcpy(v.name, name, sizeof(name));
        if (info->version == nvmlComputeInstanceProfileInfo_v2) {
                v.version = nvmlComputeInstanceProfileInfo_v2;
                *info = v;
                return NVML_SUCCESS;
        }
        if (info->version == nvmlComputeInstanceProfileInfo_v3) {
                /* v3 is v2 plus a capabilities word at the end. */
                nvmlComputeInstanceProfileInfo_v3_t *v3 =
                    (nvmlComputeInstanceProfileInfo_v3_t *)(void *)info;
                v.version = nvmlComputeInstanceProfileInfo_v3;
                memcpy(v3, &v, sizeof(v));
                v3->capabilities = 0;
                return NVML_SUCCESS;
        }
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

MOCK_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                            unsigned int profileId,
                                                            nvmlComputeInstance_t *computeInstances,
                                                            unsigned int *count)
{
        MOCK_LOCKED();
        struct ci_profile c;
        nvmlReturn_t r =
            ci_profile(gpuInstance, profileId, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &c);
        if (r != NVML_SUCCESS)
                return r;
        if (!computeInstances || !count)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct nvmlGpuInstance_st *gi = gpuInstance;
        const struct mock_gpu *g = gi->gpu->gpu;
        unsigned n = 0;
        for (size_t k = 0; k < g->n_mig && n < c.instances; k++)
                if (g->mig[k].gi == gi->id && g->mig[k].ci_slices == c.slices)
                        computeInstances[n++] = mock_ci_find(gi, g->mig[k].ci);
        *count = n;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(
    nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t *computeInstance)
{
        MOCK_LOCKED();
        struct nvmlGpuInstance_st *gi;
        nvmlReturn_t r = mock_gpu_instance(gpuInstance, &gi);
        if (r != NVML_SUCCESS)
                return r;
        if (!computeInstance)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct nvmlComputeInstance_st *ci = mock_ci_find(gi, id);
        if (!ci)
                return NVML_ERROR_NOT_FOUND;
        *computeInstance = ci;
        return NVML_SUCCESS;
}

static nvmlReturn_t ci_info(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info,
                            size_t size)
{
        MOCK_LOCKED();
        struct nvmlComputeInstance_st *ci;
        nvmlReturn_t r = mock_compute_instance(computeInstance, &ci);
        if (r != NVML_SUCCESS)
                return r;
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlComputeInstanceInfo_t v = {
            .device = ci->gi->gpu,
            .gpuInstance = ci->gi,
            .id = ci->id,
            .profileId = (unsigned)mock_ci_profile_index(ci->mig->ci_slices),
            .placement = {.start = ci->mig->ci_start, .size = ci->mig->ci_slices},
        };
        memcpy(info, &v, size);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                                       nvmlComputeInstanceInfo_t *info)
{
        return ci_info(computeInstance, info, sizeof(*info));
}

/* The unversioned call predates the placement member. */
MOCK_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance,
                                                    nvmlComputeInstanceInfo_t *info)
{
        return ci_info(computeInstance, info, offsetof(nvmlComputeInstanceInfo_t, placement));
}
