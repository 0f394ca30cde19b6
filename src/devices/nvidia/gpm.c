/* GPU Performance Monitoring through NVML (see gpm.h).
 *
 * One previous sample is kept per target (GPU index, GPU instance or -1),
 * in a list that grows with the targets seen; a target not measured for a
 * while keeps its sample (a MIG layout that comes back reuses it).  Each
 * measurement takes a new sample, asks nvmlGpmMetricsGet for the metrics
 * between the two, and swaps them.  A target whose sample fails is
 * forgotten until it answers again.  Never logs above debug. */
#include "devices/nvidia/gpm.h"

#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

static const unsigned metric_ids[GPM_COUNT] = {
        [GPM_GRAPHICS] = NVML_GPM_METRIC_GRAPHICS_UTIL,
        [GPM_SM] = NVML_GPM_METRIC_SM_UTIL,
        [GPM_OCCUPANCY] = NVML_GPM_METRIC_SM_OCCUPANCY,
        [GPM_TENSOR] = NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        [GPM_DRAM] = NVML_GPM_METRIC_DRAM_BW_UTIL,
        [GPM_FP64] = NVML_GPM_METRIC_FP64_UTIL,
        [GPM_FP32] = NVML_GPM_METRIC_FP32_UTIL,
        [GPM_FP16] = NVML_GPM_METRIC_FP16_UTIL,
        [GPM_PCIE_TX] = NVML_GPM_METRIC_PCIE_TX_PER_SEC,
        [GPM_PCIE_RX] = NVML_GPM_METRIC_PCIE_RX_PER_SEC,
        [GPM_NVLINK_TX] = NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
        [GPM_NVLINK_RX] = NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
};

struct target {
        unsigned gpu;
        int gi;
        nvmlGpmSample_t prev, next;
        bool primed; /* prev holds a sample */
};

struct nvidia_gpm {
        const struct nvml_lib *lib;
        struct target *t;
        size_t n, cap;
        nvmlGpmMetricsGet_t *req; /* ~4 KiB: one, reused */
};

struct nvidia_gpm *nvidia_gpm_new(const struct nvml_lib *lib)
{
        struct nvidia_gpm *g = xcalloc(1, sizeof(*g));
        g->lib = lib;
        g->req = xcalloc(1, sizeof(*g->req));
        return g;
}

void nvidia_gpm_free(struct nvidia_gpm *g)
{
        if (!g)
                return;
        for (size_t i = 0; i < g->n; i++) {
                if (g->t[i].prev)
                        g->lib->gpm_sample_free(g->t[i].prev);
                if (g->t[i].next)
                        g->lib->gpm_sample_free(g->t[i].next);
        }
        free(g->t);
        free(g->req);
        free(g);
}

static struct target *target_get(struct nvidia_gpm *g, unsigned gpu, int gi)
{
        for (size_t i = 0; i < g->n; i++)
                if (g->t[i].gpu == gpu && g->t[i].gi == gi)
                        return &g->t[i];
        struct target t = { .gpu = gpu, .gi = gi };
        if (g->lib->gpm_sample_alloc(&t.prev) != NVML_SUCCESS)
                return NULL;
        if (g->lib->gpm_sample_alloc(&t.next) != NVML_SUCCESS) {
                g->lib->gpm_sample_free(t.prev);
                return NULL;
        }
        xgrow((void **)&g->t, &g->cap, g->n + 1, sizeof(*g->t));
        g->t[g->n] = t;
        return &g->t[g->n++];
}

bool nvidia_gpm_measure(struct nvidia_gpm *g, nvmlDevice_t gpu_handle, unsigned gpu, int gi,
                        double *v, bool *has)
{
        const struct nvml_lib *l = g->lib;
        if (!l->gpm_sample_alloc || !l->gpm_sample_free || !l->gpm_metrics_get ||
            (gi < 0 ? !l->gpm_sample_get : !l->gpm_mig_sample_get))
                return false;
        struct target *t = target_get(g, gpu, gi);
        if (!t)
                return false;
        nvmlReturn_t r = gi < 0 ? l->gpm_sample_get(gpu_handle, t->next)
                                : l->gpm_mig_sample_get(gpu_handle, (unsigned)gi, t->next);
        if (r != NVML_SUCCESS) {
                t->primed = false;
                return false;
        }
        bool ok = false;
        if (t->primed) {
                memset(g->req, 0, sizeof(*g->req));
                g->req->version = NVML_GPM_METRICS_GET_VERSION;
                g->req->numMetrics = GPM_COUNT;
                g->req->sample1 = t->prev;
                g->req->sample2 = t->next;
                for (size_t i = 0; i < GPM_COUNT; i++)
                        g->req->metrics[i].metricId = metric_ids[i];
                if (l->gpm_metrics_get(g->req) == NVML_SUCCESS) {
                        for (size_t i = 0; i < GPM_COUNT; i++) {
                                has[i] = g->req->metrics[i].nvmlReturn == NVML_SUCCESS;
                                v[i] = has[i] ? g->req->metrics[i].value : 0;
                                ok |= has[i];
                        }
                }
        }
        nvmlGpmSample_t s = t->prev;
        t->prev = t->next;
        t->next = s;
        t->primed = true;
        return ok;
}
