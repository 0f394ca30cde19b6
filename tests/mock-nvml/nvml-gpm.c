/* Mock NVML: GPU Performance Monitoring and PCIe throughput.
 *
 * A GPU supports GPM when its configuration says so (`gpm: {supported:}`),
 * by default from Hopper on, as with NVML.  A sample records which device
 * (and GPU instance, for nvmlGpmMigSampleGet) it was taken on and when;
 * nvmlGpmMetricsGet checks the versioned struct and that both samples are
 * of one device, then answers each metric with the configured value (0
 * when left out) or NVML_ERROR_NOT_SUPPORTED for a metric the mock does
 * not model.  The values do not depend on the interval: the YAML describes
 * the rates the GPU runs at. */
#include <stdlib.h>
#include <string.h>

#include "mock.h"

const char *const mock_gpm_keys[MOCK_GPM_N + 2] = {
        [MOCK_GPM_GRAPHICS] = "graphicsUtil",  [MOCK_GPM_SM] = "smUtil",
        [MOCK_GPM_OCCUPANCY] = "smOccupancy",  [MOCK_GPM_TENSOR] = "tensorUtil",
        [MOCK_GPM_DRAM] = "dramBwUtil",        [MOCK_GPM_FP64] = "fp64Util",
        [MOCK_GPM_FP32] = "fp32Util",          [MOCK_GPM_FP16] = "fp16Util",
        [MOCK_GPM_PCIE_TX] = "pcieTxMiBps",    [MOCK_GPM_PCIE_RX] = "pcieRxMiBps",
        [MOCK_GPM_NVLINK_TX] = "nvlinkTxMiBps", [MOCK_GPM_NVLINK_RX] = "nvlinkRxMiBps",
        [MOCK_GPM_N] = "supported",            [MOCK_GPM_N + 1] = NULL,
};

struct nvmlGpmSample_st {
        unsigned magic;
        struct nvmlDevice_st *dev; /* NULL until taken */
        int gi;                    /* -1: the whole GPU */
        unsigned long long at_us;
};

#define SAMPLE_MAGIC 0x67706d73u

static int metric_slot(unsigned id)
{
        switch (id) {
        case NVML_GPM_METRIC_GRAPHICS_UTIL: return MOCK_GPM_GRAPHICS;
        case NVML_GPM_METRIC_SM_UTIL: return MOCK_GPM_SM;
        case NVML_GPM_METRIC_SM_OCCUPANCY: return MOCK_GPM_OCCUPANCY;
        case NVML_GPM_METRIC_ANY_TENSOR_UTIL: return MOCK_GPM_TENSOR;
        case NVML_GPM_METRIC_DRAM_BW_UTIL: return MOCK_GPM_DRAM;
        case NVML_GPM_METRIC_FP64_UTIL: return MOCK_GPM_FP64;
        case NVML_GPM_METRIC_FP32_UTIL: return MOCK_GPM_FP32;
        case NVML_GPM_METRIC_FP16_UTIL: return MOCK_GPM_FP16;
        case NVML_GPM_METRIC_PCIE_TX_PER_SEC: return MOCK_GPM_PCIE_TX;
        case NVML_GPM_METRIC_PCIE_RX_PER_SEC: return MOCK_GPM_PCIE_RX;
        case NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: return MOCK_GPM_NVLINK_TX;
        case NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: return MOCK_GPM_NVLINK_RX;
        default: return -1;
        }
}

MOCK_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!gpmSupport)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        gpmSupport->isSupportedDevice = d->gpu->gpm_supported ? 1 : 0;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
        if (!gpmSample)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct nvmlGpmSample_st *s = mock_alloc(sizeof(*s));
        s->magic = SAMPLE_MAGIC;
        s->gi = -1;
        *gpmSample = s;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
        if (!gpmSample || gpmSample->magic != SAMPLE_MAGIC)
                return NVML_ERROR_INVALID_ARGUMENT;
        gpmSample->magic = 0;
        free(gpmSample);
        return NVML_SUCCESS;
}

static nvmlReturn_t take(nvmlDevice_t device, int gi, nvmlGpmSample_t s)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!s || s->magic != SAMPLE_MAGIC)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->gpu->gpm_supported)
                return NVML_ERROR_NOT_SUPPORTED;
        if (gi >= 0 && (!d->gpu->mig_enabled || !mock_gi_find(d, (unsigned)gi)))
                return NVML_ERROR_NOT_FOUND;
        if (gi < 0 && d->gpu->mig_enabled)
                return NVML_ERROR_NOT_SUPPORTED; /* a GPU in MIG mode is sampled per instance */
        s->dev = d;
        s->gi = gi;
        s->at_us = mock_monotonic_us();
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
        return take(device, -1, gpmSample);
}

MOCK_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                             nvmlGpmSample_t gpmSample)
{
        if (gpuInstanceId > 0x7fffffffu)
                return NVML_ERROR_INVALID_ARGUMENT;
        return take(device, (int)gpuInstanceId, gpmSample);
}

MOCK_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!m)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (m->version != NVML_GPM_METRICS_GET_VERSION)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        const struct nvmlGpmSample_st *a = m->sample1, *b = m->sample2;
        if (!a || !b || a->magic != SAMPLE_MAGIC || b->magic != SAMPLE_MAGIC || !a->dev || !b->dev ||
            a->dev != b->dev || a->gi != b->gi || m->numMetrics > NVML_GPM_METRIC_MAX)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!a->dev->present)
                return NVML_ERROR_GPU_IS_LOST;
        const struct mock_gpu *g = a->dev->gpu;
        for (unsigned i = 0; i < m->numMetrics; i++) {
                nvmlGpmMetric_t *x = &m->metrics[i];
                int slot = metric_slot(x->metricId);
                x->metricInfo.shortName = x->metricInfo.longName = x->metricInfo.unit = NULL;
                if (slot < 0) {
                        x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
                        x->value = 0;
                        continue;
                }
                x->nvmlReturn = NVML_SUCCESS;
                x->value = g->gpm[slot].set ? (double)g->gpm[slot].v : 0.0;
        }
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                                     unsigned int *value)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!value || (counter != NVML_PCIE_UTIL_TX_BYTES && counter != NVML_PCIE_UTIL_RX_BYTES))
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_opt *o = counter == NVML_PCIE_UTIL_TX_BYTES ? &d->gpu->pcie_tx_kbps
                                                                      : &d->gpu->pcie_rx_kbps;
        if (!o->set)
                return NVML_ERROR_NOT_SUPPORTED;
        *value = (unsigned)o->v;
        return NVML_SUCCESS;
}
