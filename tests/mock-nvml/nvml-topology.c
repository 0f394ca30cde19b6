/* Mock NVML: where GPUs sit relative to each other and to the host.
 *
 * PCIe topology comes from three optional device keys: `pcieSwitch` (equal
 * values share a switch: SINGLE; values "A/B" and "A/C" hang below the same
 * upstream switch: MULTIPLE), `hostBridge` (equal: HOSTBRIDGE) and
 * `numaNode` (equal: NODE); anything else is SYSTEM.  NVLink links come from
 * the `nvlink` map (config.c lays them out): a link to a GPU reports that
 * GPU's PCI address as its remote end, a link to the NVSwitch fabric the
 * switch's.  The multi-node fabric (`fabric`: cluster UUID, clique) is
 * told by nvmlDeviceGetGpuFabricInfo, NOT_SUPPORTED without the key; a
 * Grace GPU's link to its CPU (`addressingMode`, `c2c`) by
 * nvmlDeviceGetAddressingMode and nvmlDeviceGetC2cModeInfoV.  MIG device
 * handles answer for their parent GPU, except for the fabric. */
#include <string.h>

#include "mock.h"

static const struct nvmlDevice_st *gpu_of(const struct nvmlDevice_st *d)
{
        return d->parent ? d->parent : d;
}

static bool same_str(const char *a, const char *b)
{
        return a && b && !strcmp(a, b);
}

/* "A/B" and "A/C": under the same upstream switch A. */
static bool same_upstream(const char *a, const char *b)
{
        const char *sa = a ? strchr(a, '/') : NULL, *sb = b ? strchr(b, '/') : NULL;
        return sa && sb && sa - a == sb - b && !strncmp(a, b, (size_t)(sa - a));
}

static nvmlGpuTopologyLevel_t level_between(const struct mock_gpu *a, const struct mock_gpu *b)
{
        if (a == b)
                return NVML_TOPOLOGY_INTERNAL;
        if (same_str(a->pcie_switch, b->pcie_switch))
                return NVML_TOPOLOGY_SINGLE;
        if (same_upstream(a->pcie_switch, b->pcie_switch))
                return NVML_TOPOLOGY_MULTIPLE;
        if (same_str(a->host_bridge, b->host_bridge))
                return NVML_TOPOLOGY_HOSTBRIDGE;
        if (a->numa_node >= 0 && a->numa_node == b->numa_node)
                return NVML_TOPOLOGY_NODE;
        return NVML_TOPOLOGY_SYSTEM;
}

static nvmlReturn_t two_devices(nvmlDevice_t h1, nvmlDevice_t h2, const struct mock_gpu **a,
                                const struct mock_gpu **b)
{
        struct nvmlDevice_st *d1, *d2;
        nvmlReturn_t r = mock_device(h1, &d1);
        if (r == NVML_SUCCESS)
                r = mock_device(h2, &d2);
        if (r != NVML_SUCCESS)
                return r;
        *a = gpu_of(d1)->gpu;
        *b = gpu_of(d2)->gpu;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                             nvmlDevice_t device2,
                                                             nvmlGpuTopologyLevel_t *pathInfo)
{
        MOCK_LOCKED();
        const struct mock_gpu *a, *b;
        nvmlReturn_t r = two_devices(device1, device2, &a, &b);
        if (r != NVML_SUCCESS)
                return r;
        if (!pathInfo)
                return NVML_ERROR_INVALID_ARGUMENT;
        *pathInfo = level_between(a, b);
        return NVML_SUCCESS;
}

static unsigned links_between(const struct mock_gpu *a, const struct mock_gpu *b)
{
        const struct mock_config *c = mock_cfg();
        unsigned n = 0;
        for (int l = 0; l < NVML_NVLINK_MAX_LINKS; l++)
                n += a->links[l].kind == MOCK_LINK_GPU && &c->gpus[a->links[l].target] == b;
        return n;
}

static bool on_switch(const struct mock_gpu *g)
{
        for (int l = 0; l < NVML_NVLINK_MAX_LINKS; l++)
                if (g->links[l].kind == MOCK_LINK_SWITCH)
                        return true;
        return false;
}

/* NVLink (direct or through the switch fabric) makes every capability
 * available; over PCIe, reads and writes work below one host bridge. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                                nvmlGpuP2PCapsIndex_t p2pIndex,
                                                nvmlGpuP2PStatus_t *p2pStatus)
{
        MOCK_LOCKED();
        const struct mock_gpu *a, *b;
        nvmlReturn_t r = two_devices(device1, device2, &a, &b);
        if (r != NVML_SUCCESS)
                return r;
        if (!p2pStatus || (unsigned)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
                return NVML_ERROR_INVALID_ARGUMENT;
        bool nvlink = a != b && (links_between(a, b) || (on_switch(a) && on_switch(b)));
        bool pcie = level_between(a, b) <= NVML_TOPOLOGY_HOSTBRIDGE;
        switch (p2pIndex) {
        case NVML_P2P_CAPS_INDEX_READ:
        case NVML_P2P_CAPS_INDEX_WRITE:
                *p2pStatus =
                    nvlink || pcie ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED;
                break;
        case NVML_P2P_CAPS_INDEX_NVLINK:
        case NVML_P2P_CAPS_INDEX_ATOMICS:
                *p2pStatus = nvlink ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
                break;
        default:
                *p2pStatus = NVML_P2P_STATUS_NOT_SUPPORTED;
        }
        return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* NVLink                                                              */

/* A link index beyond NVML's range is an invalid argument; one beyond the
 * GPU's ports (or on a GPU without NVLink) is not supported. */
static nvmlReturn_t link_of(nvmlDevice_t device, unsigned link, const struct mock_gpu **g,
                            const struct mock_link **out)
{
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (link >= NVML_NVLINK_MAX_LINKS)
                return NVML_ERROR_INVALID_ARGUMENT;
        *g = gpu_of(d)->gpu;
        if (link >= (*g)->link_ports)
                return NVML_ERROR_NOT_SUPPORTED;
        *out = &(*g)->links[link];
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                  nvmlEnableState_t *isActive)
{
        MOCK_LOCKED();
        const struct mock_gpu *g;
        const struct mock_link *l;
        nvmlReturn_t r = link_of(device, link, &g, &l);
        if (r != NVML_SUCCESS)
                return r;
        if (!isActive)
                return NVML_ERROR_INVALID_ARGUMENT;
        *isActive = l->kind != MOCK_LINK_NONE ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        return NVML_SUCCESS;
}

static nvmlReturn_t remote_pci(nvmlDevice_t device, unsigned link, struct mock_pci *out)
{
        const struct mock_gpu *g;
        const struct mock_link *l;
        nvmlReturn_t r = link_of(device, link, &g, &l);
        if (r != NVML_SUCCESS)
                return r;
        const struct mock_config *c = mock_cfg();
        if (l->kind == MOCK_LINK_GPU)
                *out = c->gpus[l->target].pci;
        else if (l->kind == MOCK_LINK_SWITCH)
                *out = c->switches[l->target];
        else
                return NVML_ERROR_NOT_SUPPORTED;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                             nvmlPciInfo_t *pci)
{
        MOCK_LOCKED();
        struct mock_pci p;
        nvmlReturn_t r = remote_pci(device, link, &p);
        if (r != NVML_SUCCESS)
                return r;
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        mock_fill_pci(&p, pci);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                                          nvmlPciInfo_t *pci)
{
        MOCK_LOCKED();
        struct mock_pci p;
        nvmlReturn_t r = remote_pci(device, link, &p);
        if (r != NVML_SUCCESS)
                return r;
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        mock_fill_pci_v1(&p, pci);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                             nvmlIntNvLinkDeviceType_t *type)
{
        MOCK_LOCKED();
        const struct mock_gpu *g;
        const struct mock_link *l;
        nvmlReturn_t r = link_of(device, link, &g, &l);
        if (r != NVML_SUCCESS)
                return r;
        if (!type)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (l->kind == MOCK_LINK_NONE)
                return NVML_ERROR_NOT_SUPPORTED;
        *type =
            l->kind == MOCK_LINK_GPU ? NVML_NVLINK_DEVICE_TYPE_GPU : NVML_NVLINK_DEVICE_TYPE_SWITCH;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                                       nvmlNvLinkCapability_t capability,
                                                       unsigned int *capResult)
{
        MOCK_LOCKED();
        const struct mock_gpu *g;
        const struct mock_link *l;
        nvmlReturn_t r = link_of(device, link, &g, &l);
        if (r != NVML_SUCCESS)
                return r;
        if (!capResult || (unsigned)capability >= NVML_NVLINK_CAP_COUNT)
                return NVML_ERROR_INVALID_ARGUMENT;
        bool up = l->kind != MOCK_LINK_NONE;
        switch (capability) {
        case NVML_NVLINK_CAP_P2P_SUPPORTED:
        case NVML_NVLINK_CAP_SYSMEM_ACCESS:
        case NVML_NVLINK_CAP_P2P_ATOMICS:
                *capResult = up;
                break;
        case NVML_NVLINK_CAP_VALID:
                *capResult = 1;
                break;
        default:
                *capResult = 0;
        }
        return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Host locality                                                       */

/* Only set on platforms whose GPU memory is itself a NUMA node. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!node)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->gpu->gpu_numa_node.set)
                return NVML_ERROR_NOT_SUPPORTED;
        *node = (unsigned)d->gpu->gpu_numa_node.v;
        return NVML_SUCCESS;
}

#define WORD_BITS (8 * sizeof(unsigned long))

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                                     unsigned long *nodeSet,
                                                     nvmlAffinityScope_t scope)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!nodeSet || !nodeSetSize || scope > NVML_AFFINITY_SCOPE_SOCKET)
                return NVML_ERROR_INVALID_ARGUMENT;
        long node = d->gpu->numa_node;
        if (node < 0)
                return NVML_ERROR_NOT_SUPPORTED;
        if ((unsigned long)node / WORD_BITS >= nodeSetSize)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memset(nodeSet, 0, nodeSetSize * sizeof(*nodeSet));
        nodeSet[(unsigned long)node / WORD_BITS] = 1UL << ((unsigned long)node % WORD_BITS);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device,
                                                             unsigned int cpuSetSize,
                                                             unsigned long *cpuSet,
                                                             nvmlAffinityScope_t scope)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!cpuSet || !cpuSetSize || scope > NVML_AFFINITY_SCOPE_SOCKET)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct mock_gpu *g = d->gpu;
        if (!g->has_cpus)
                return NVML_ERROR_NOT_SUPPORTED;
        size_t words = sizeof(g->cpus) / sizeof(g->cpus[0]);
        for (size_t i = cpuSetSize; i < words; i++)
                if (g->cpus[i])
                        return NVML_ERROR_INSUFFICIENT_SIZE;
        memset(cpuSet, 0, cpuSetSize * sizeof(*cpuSet));
        memcpy(cpuSet, g->cpus, (cpuSetSize < words ? cpuSetSize : words) * sizeof(*cpuSet));
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                                  unsigned long *cpuSet)
{
        return nvmlDeviceGetCpuAffinityWithinScope(device, cpuSetSize, cpuSet,
                                                   NVML_AFFINITY_SCOPE_NODE);
}

/* The GPU a handle names and a non-NULL output, or the error NVML gives. */
static nvmlReturn_t gpu_and_out(nvmlDevice_t device, const void *out, struct nvmlDevice_st **d)
{
        nvmlReturn_t r = mock_device_gpu(device, d);
        if (r != NVML_SUCCESS)
                return r;
        return out ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* Grace: ATS over NVLink-C2C.  The addressing mode is a versioned struct
 * (version v1 or VERSION_MISMATCH); the C2C info has no version word. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_t *mode)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = gpu_and_out(device, mode, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (mode->version != nvmlDeviceAddressingMode_v1)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        if (d->gpu->addressing_mode < 0)
                return NVML_ERROR_NOT_SUPPORTED;
        mode->value = (unsigned)d->gpu->addressing_mode;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, nvmlC2cModeInfo_v1_t *info)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = gpu_and_out(device, info, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (d->gpu->c2c < 0)
                return NVML_ERROR_NOT_SUPPORTED;
        info->isC2cEnabled = (unsigned)d->gpu->c2c;
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = gpu_and_out(device, info, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!d->gpu->has_fabric)
                return NVML_ERROR_NOT_SUPPORTED;
        *info = d->gpu->fabric;
        return NVML_SUCCESS;
}
