/* The node as NVML describes it, read once when the backend is created.
 *
 * Per GPU: identity, brand, PCI address and PCIe root complex (sysfs),
 * memory, compute capability, NUMA node (sysfs first, as NVIDIA's plugin
 * reads it, then NVML's memory affinity), its multi-node NVLink clique, MIG
 * mode and MIG devices (with their GPU instance's profile ID and
 * placement).  A MIG device's profile is named the way
 * NVIDIA's go-nvlib names it: the GPU and compute instance profile indices
 * are found by matching the instance's profile ID against NVML's profile
 * tables, and the memory is rounded to eighths of the GPU (see
 * nvml_mig_profile_name).  Without those calls the attributes' slice counts
 * give the name, without "+me".
 *
 * Topology: for every pair, the NVLink count and the PCIe level.  A link
 * whose far end is another GPU's PCI address counts for that pair; links to
 * an NVSwitch count for every pair of GPUs on the same switch, as many as
 * both have to it (an 8-GPU NVSwitch node gives every pair the same count,
 * as nvidia-smi topo -m shows NV18 everywhere on a DGX H100).
 *
 * Optional NVML calls that are missing or fail leave "unknown" values; only
 * failing to count the GPUs is an error.  Never logs above debug. */
#include "devices/nvidia/inventory.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "devices/pci.h"

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define MIG_MINORS_MAX (1024 * 1024)

/* ---- pure helpers ---- */

void nvml_bus_id_normalize(const char *in, char *out, size_t size)
{
        char tmp[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
        size_t n = 0;
        for (; in[n] && n + 1 < sizeof(tmp); n++)
                tmp[n] = (char)tolower((unsigned char)in[n]);
        tmp[n] = '\0';
        /* "00000000:3b:00.0": an 8-digit domain whose upper half is zero */
        const char *s = tmp;
        const char *colon = strchr(tmp, ':');
        if (colon && colon - tmp == 8 && strncmp(tmp, "0000", 4) == 0)
                s = tmp + 4;
        snprintf(out, size, "%s", s);
}

static int gi_slices(unsigned profile)
{
        switch (profile) {
        case NVML_GPU_INSTANCE_PROFILE_1_SLICE:
        case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
        case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2:
                return 1;
        case NVML_GPU_INSTANCE_PROFILE_2_SLICE:
        case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
                return 2;
        case NVML_GPU_INSTANCE_PROFILE_3_SLICE:
                return 3;
        case NVML_GPU_INSTANCE_PROFILE_4_SLICE:
                return 4;
        case NVML_GPU_INSTANCE_PROFILE_6_SLICE:
                return 6;
        case NVML_GPU_INSTANCE_PROFILE_7_SLICE:
                return 7;
        case NVML_GPU_INSTANCE_PROFILE_8_SLICE:
                return 8;
        }
        return -1;
}

static int ci_slices(unsigned profile)
{
        switch (profile) {
        case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE:
        case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1:
                return 1;
        case NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE:
                return 2;
        case NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE:
                return 3;
        case NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE:
                return 4;
        case NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE:
                return 6;
        case NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE:
                return 7;
        case NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE:
                return 8;
        }
        return -1;
}

static unsigned long long mig_gb(unsigned long long mig_mib, unsigned long long gpu_bytes)
{
        if (gpu_bytes == 0)
                return 0;
        double frac = (double)mig_mib * (double)MIB / (double)gpu_bytes;
        frac = ceil(frac * 8.0) / 8.0;
        double gpu_gb = (double)((gpu_bytes + GIB - 1) / GIB);
        return (unsigned long long)llround(frac * gpu_gb);
}

static void profile_format(int c, int g, unsigned long long gb, bool me, char *buf, size_t size)
{
        const char *suffix = me ? "+me" : "";
        if (c == g)
                snprintf(buf, size, "%dg.%llugb%s", g, gb, suffix);
        else
                snprintf(buf, size, "%dc.%dg.%llugb%s", c, g, gb, suffix);
}

int nvml_mig_profile_name(unsigned gi_profile, unsigned ci_profile, unsigned long long mig_mib,
                          unsigned long long gpu_bytes, char *buf, size_t size)
{
        int g = gi_slices(gi_profile), c = ci_slices(ci_profile);
        if (g < 0 || c < 0)
                return -EINVAL;
        bool me = gi_profile == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 ||
                  gi_profile == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
        profile_format(c, g, mig_gb(mig_mib, gpu_bytes), me, buf, size);
        return 0;
}

int nvml_mig_minor_lookup(const char *text, int gpu, unsigned gi, int ci)
{
        char want[96];
        if (ci < 0)
                snprintf(want, sizeof(want), "gpu%d/gi%u/access", gpu, gi);
        else
                snprintf(want, sizeof(want), "gpu%d/gi%u/ci%d/access", gpu, gi, ci);
        size_t wl = strlen(want);
        for (const char *line = text; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line) : strlen(line);
                if (len > wl && strncmp(line, want, wl) == 0 && line[wl] == ' ') {
                        char *stop;
                        long v = strtol(line + wl + 1, &stop, 10);
                        if (stop != line + wl + 1 && v >= 0 && v < 1 << 20)
                                return (int)v;
                }
                line = end ? end + 1 : NULL;
        }
        return -1;
}

const char *nvml_pcie_level_name(enum alloc_pcie_level level)
{
        switch (level) {
        case ALLOC_PCIE_SAME_BOARD:
                return "X";
        case ALLOC_PCIE_SINGLE_SWITCH:
                return "PIX";
        case ALLOC_PCIE_MULTIPLE_SWITCHES:
                return "PXB";
        case ALLOC_PCIE_HOST_BRIDGE:
                return "PHB";
        case ALLOC_PCIE_NUMA_NODE:
                return "NODE";
        case ALLOC_PCIE_SYSTEM:
                return "SYS";
        default:
                return "?";
        }
}

/* ---- per GPU ---- */

static int numa_from_sysfs(const char *sysfs_root, const char *bus_id, bool *found)
{
        char buf[32];
        _cleanup_free_ char *path =
            xasprintf("%s/bus/pci/devices/%s/numa_node", sysfs_root, bus_id);
        *found = false;
        if (fs_read_line(path, buf, sizeof(buf)) < 0)
                return -1;
        char *end;
        long v = strtol(buf, &end, 10);
        if (end == buf)
                return -1;
        *found = true;
        return v >= 0 && v < 1 << 16 ? (int)v : -1;
}

static int numa_from_nvml(const struct nvml_lib *lib, nvmlDevice_t h)
{
        unsigned long set[4] = { 0 };
        if (!lib->memory_affinity ||
            lib->memory_affinity(h, ARRAY_SIZE(set), set, NVML_AFFINITY_SCOPE_NODE) != NVML_SUCCESS)
                return -1;
        for (size_t w = 0; w < ARRAY_SIZE(set); w++)
                for (unsigned b = 0; b < sizeof(long) * 8; b++)
                        if (set[w] & (1UL << b))
                                return (int)(w * sizeof(long) * 8 + b);
        return -1;
}

/* Finds the NVML profile index whose info carries the ID an instance was
 * made from.  -1 when not found. */
static int gi_profile_index(const struct nvml_lib *lib, nvmlDevice_t gpu, unsigned id)
{
        for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++) {
                nvmlGpuInstanceProfileInfo_t info;
                if (lib->gi_profile_info(gpu, i, &info) == NVML_SUCCESS && info.id == id)
                        return (int)i;
        }
        return -1;
}

static int ci_profile_index(const struct nvml_lib *lib, nvmlGpuInstance_t gi, unsigned id)
{
        for (unsigned j = 0; j < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; j++) {
                nvmlComputeInstanceProfileInfo_t info;
                if (lib->ci_profile_info(gi, j, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                         &info) == NVML_SUCCESS &&
                    info.id == id)
                        return (int)j;
        }
        return -1;
}

/* The profile of one MIG device from its instances' profile IDs, and its
 * GPU instance's profile ID and placement; false when NVML cannot tell the
 * profile. */
static bool mig_profile_exact(const struct nvml_lib *lib, const struct nvml_gpu *g,
                              struct nvml_mig_dev *m)
{
        if (!lib->gi_by_id || !lib->gi_info || !lib->ci_by_id || !lib->ci_info ||
            !lib->gi_profile_info || !lib->ci_profile_info)
                return false;
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        nvmlGpuInstanceInfo_t gi_info;
        nvmlComputeInstanceInfo_t ci_info;
        memset(&ci_info, 0, sizeof(ci_info));
        if (lib->gi_by_id(g->handle, m->gi, &gi) != NVML_SUCCESS ||
            lib->gi_info(gi, &gi_info) != NVML_SUCCESS)
                return false;
        m->gi_profile_id = (int)gi_info.profileId;
        m->gi_start = gi_info.placement.start;
        m->gi_size = gi_info.placement.size;
        if (lib->ci_by_id(gi, m->ci, &ci) != NVML_SUCCESS ||
            lib->ci_info(ci, &ci_info) != NVML_SUCCESS)
                return false;
        int gp = gi_profile_index(lib, g->handle, gi_info.profileId);
        int cp = ci_profile_index(lib, gi, ci_info.profileId);
        return gp >= 0 && cp >= 0 &&
               nvml_mig_profile_name((unsigned)gp, (unsigned)cp, m->memory_mib, g->memory_bytes,
                                     m->profile, sizeof(m->profile)) == 0;
}

static void mig_load_one(const struct nvml_lib *lib, const struct nvml_gpu *g, const char *minors,
                         struct nvml_mig_dev *m)
{
        nvmlDeviceAttributes_t attr;
        memset(&attr, 0, sizeof(attr));
        bool have_attr = lib->attributes && lib->attributes(m->handle, &attr) == NVML_SUCCESS;
        if (have_attr) {
                m->memory_mib = attr.memorySizeMB;
                m->multiprocessors = attr.multiprocessorCount;
                m->gi_slices = attr.gpuInstanceSliceCount;
                m->ci_slices = attr.computeInstanceSliceCount;
                m->copy_engines = attr.sharedCopyEngineCount;
                m->decoders = attr.sharedDecoderCount;
                m->encoders = attr.sharedEncoderCount;
                m->jpegs = attr.sharedJpegCount;
                m->ofas = attr.sharedOfaCount;
        }
        if (!mig_profile_exact(lib, g, m) && have_attr && attr.gpuInstanceSliceCount)
                profile_format((int)attr.computeInstanceSliceCount, (int)attr.gpuInstanceSliceCount,
                               mig_gb(m->memory_mib, g->memory_bytes), false, m->profile,
                               sizeof(m->profile));
        m->gi_cap = m->ci_cap = -1;
        if (minors && g->minor >= 0) {
                m->gi_cap = nvml_mig_minor_lookup(minors, g->minor, m->gi, -1);
                m->ci_cap = nvml_mig_minor_lookup(minors, g->minor, m->gi, (int)m->ci);
        }
}

static void mig_load(const struct nvml_lib *lib, struct nvml_gpu *g, const char *minors)
{
        unsigned max = 0;
        if (!lib->max_mig_devices || !lib->mig_handle_by_index || !lib->gpu_instance_id ||
            !lib->compute_instance_id || lib->max_mig_devices(g->handle, &max) != NVML_SUCCESS)
                return;
        if (max > 64)
                max = 64;
        for (unsigned j = 0; j < max; j++) {
                nvmlDevice_t h;
                if (lib->mig_handle_by_index(g->handle, j, &h) != NVML_SUCCESS)
                        continue;
                struct nvml_mig_dev m = { .index = j, .handle = h, .gi_profile_id = -1 };
                if (lib->uuid(h, m.uuid, sizeof(m.uuid)) != NVML_SUCCESS ||
                    lib->gpu_instance_id(h, &m.gi) != NVML_SUCCESS ||
                    lib->compute_instance_id(h, &m.ci) != NVML_SUCCESS)
                        continue;
                mig_load_one(lib, g, minors, &m);
                g->migs = xrealloc(g->migs, (g->n_migs + 1) * sizeof(*g->migs));
                g->migs[g->n_migs++] = m;
        }
}

/* One default profile per GPU instance profile the GPU offers (NVIDIA's
 * VisitMigProfiles with C == G), in NVML's profile order. */
static void mig_profiles_load(const struct nvml_lib *lib, struct nvml_gpu *g)
{
        if (!lib->gi_profile_info)
                return;
        for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++) {
                nvmlGpuInstanceProfileInfo_t info;
                if (lib->gi_profile_info(g->handle, i, &info) != NVML_SUCCESS)
                        continue;
                int s = gi_slices(i);
                char name[NVML_PROFILE_MAX];
                if (s < 0)
                        continue;
                /* the compute profile with as many slices as the instance */
                unsigned ci = s == 6 ? NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE
                            : s == 8 ? NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE
                            : s == 7 ? NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE
                                     : (unsigned)s - 1;
                if (nvml_mig_profile_name(i, ci, info.memorySizeMB, g->memory_bytes, name,
                                          sizeof(name)) < 0)
                        continue;
                g->mig_profiles = xrealloc(g->mig_profiles,
                                           (g->n_mig_profiles + 1) * sizeof(*g->mig_profiles));
                memcpy(g->mig_profiles[g->n_mig_profiles++], name, sizeof(name));
        }
}

/* GFD's clique: the GPU's fabric registration, when complete and on a
 * cluster (a zero cluster UUID is none). */
static void clique_load(const struct nvml_lib *lib, struct nvml_gpu *g)
{
        nvmlGpuFabricInfo_t fi;
        memset(&fi, 0, sizeof(fi));
        if (!lib->fabric_info || lib->fabric_info(g->handle, &fi) != NVML_SUCCESS ||
            fi.state != NVML_GPU_FABRIC_STATE_COMPLETED || fi.status != NVML_SUCCESS)
                return;
        static const unsigned char zero[NVML_GPU_FABRIC_UUID_LEN];
        if (memcmp(fi.clusterUuid, zero, sizeof(zero)) == 0)
                return;
        const unsigned char *u = fi.clusterUuid;
        snprintf(g->clique, sizeof(g->clique),
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x.%u", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                 u[14], u[15], fi.cliqueId);
}

/* NVIDIA's DRA driver's addressingMode: "" when NVML cannot tell. */
static void addressing_mode_load(const struct nvml_lib *lib, struct nvml_gpu *g)
{
        static const char *const names[] = {
                [NVML_DEVICE_ADDRESSING_MODE_NONE] = "None",
                [NVML_DEVICE_ADDRESSING_MODE_HMM] = "HMM",
                [NVML_DEVICE_ADDRESSING_MODE_ATS] = "ATS",
        };
        nvmlDeviceAddressingMode_t mode = { .version = nvmlDeviceAddressingMode_v1 };
        if (!lib->addressing_mode || lib->addressing_mode(g->handle, &mode) != NVML_SUCCESS ||
            mode.value >= sizeof(names) / sizeof(names[0]))
                return;
        snprintf(g->addressing_mode, sizeof(g->addressing_mode), "%s", names[mode.value]);
}

static void gpu_load(const struct nvml_lib *lib, const struct nvml_inventory_env *env,
                     const char *minors, unsigned index, struct nvml_gpu *g)
{
        g->index = index;
        g->minor = g->numa_node = g->cc_major = g->cc_minor = -1;
        g->architecture = NVML_DEVICE_ARCH_UNKNOWN;
        g->brand = -1;
        nvmlReturn_t r = lib->handle_by_index(index, &g->handle);
        if (r != NVML_SUCCESS) {
                g->handle = NULL;
                g->lost = true;
                log_debug("nvidia", "no handle index=%u error=\"%s\"", index,
                          nvml_lib_strerror(lib, r));
                return;
        }
        r = lib->uuid(g->handle, g->uuid, sizeof(g->uuid));
        if (r != NVML_SUCCESS) {
                g->uuid[0] = '\0';
                g->lost = true;
                log_debug("nvidia", "no identity index=%u error=\"%s\"", index,
                          nvml_lib_strerror(lib, r));
                return;
        }
        if (lib->name(g->handle, g->name, sizeof(g->name)) != NVML_SUCCESS)
                g->name[0] = '\0';
        nvmlPciInfo_t pci;
        if (nvml_lib_pci_info(lib, g->handle, &pci) == NVML_SUCCESS)
                nvml_bus_id_normalize(pci.busId, g->bus_id, sizeof(g->bus_id));
        unsigned minor;
        if (lib->minor_number && lib->minor_number(g->handle, &minor) == NVML_SUCCESS &&
            minor < 1 << 20)
                g->minor = (int)minor;
        nvmlMemory_t mem;
        if (lib->memory_info(g->handle, &mem) == NVML_SUCCESS)
                g->memory_bytes = mem.total;
        if (lib->compute_capability &&
            lib->compute_capability(g->handle, &g->cc_major, &g->cc_minor) != NVML_SUCCESS)
                g->cc_major = g->cc_minor = -1;
        if (lib->architecture && lib->architecture(g->handle, &g->architecture) != NVML_SUCCESS)
                g->architecture = NVML_DEVICE_ARCH_UNKNOWN;
        nvmlBrandType_t brand;
        if (lib->brand && lib->brand(g->handle, &brand) == NVML_SUCCESS)
                g->brand = (int)brand;
        clique_load(lib, g);
        addressing_mode_load(lib, g);
        bool found = false;
        if (g->bus_id[0]) {
                g->numa_node = numa_from_sysfs(env->sysfs_root, g->bus_id, &found);
                if (dev_pci_root(env->sysfs_root, g->bus_id, g->pcie_root, sizeof(g->pcie_root)) < 0)
                        g->pcie_root[0] = '\0';
        }
        if (!found)
                g->numa_node = numa_from_nvml(lib, g->handle);
        nvmlGpmSupport_t gpm = { .version = NVML_GPM_SUPPORT_VERSION };
        g->gpm = lib->gpm_query && lib->gpm_sample_alloc && lib->gpm_metrics_get &&
                 lib->gpm_query(g->handle, &gpm) == NVML_SUCCESS && gpm.isSupportedDevice;
        unsigned cur, pending;
        if (lib->mig_mode && lib->mig_mode(g->handle, &cur, &pending) == NVML_SUCCESS) {
                g->mig_capable = true;
                g->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
        }
        if (g->mig_enabled) {
                mig_load(lib, g, minors);
                mig_profiles_load(lib, g);
        }
}

/* ---- topology ---- */

struct switch_links {
        char (*bus)[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* distinct switch addresses */
        size_t n;
        unsigned *count; /* links from each GPU to each switch: [gpu * cap + switch] */
        size_t cap;
};

static int gpu_by_bus(const struct nvml_inventory *inv, const char *bus)
{
        for (size_t i = 0; i < inv->n_gpus; i++)
                if (inv->gpus[i].bus_id[0] && strcmp(inv->gpus[i].bus_id, bus) == 0)
                        return (int)i;
        return -1;
}

static size_t switch_index(struct switch_links *sw, size_t n_gpus, const char *bus)
{
        for (size_t s = 0; s < sw->n; s++)
                if (strcmp(sw->bus[s], bus) == 0)
                        return s;
        if (sw->n == sw->cap) {
                size_t cap = sw->cap ? sw->cap * 2 : 8;
                unsigned *count = xcalloc(n_gpus * cap, sizeof(*count));
                for (size_t g = 0; g < n_gpus; g++)
                        for (size_t s = 0; s < sw->n; s++)
                                count[g * cap + s] = sw->count[g * sw->cap + s];
                free(sw->count);
                sw->count = count;
                sw->cap = cap;
                sw->bus = xrealloc(sw->bus, cap * sizeof(*sw->bus));
        }
        snprintf(sw->bus[sw->n], sizeof(sw->bus[sw->n]), "%s", bus);
        return sw->n++;
}

static void nvlinks_load(const struct nvml_lib *lib, struct nvml_inventory *inv)
{
        size_t n = inv->n_gpus;
        struct switch_links sw = { 0 };
        _cleanup_free_ unsigned *direct = xcalloc(n * n, sizeof(*direct));
        if (!lib->nvlink_state || (!lib->nvlink_remote_pci && !lib->nvlink_remote_pci_v1))
                return;
        for (size_t a = 0; a < n; a++) {
                const struct nvml_gpu *g = &inv->gpus[a];
                if (!g->handle || g->lost)
                        continue;
                for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
                        nvmlEnableState_t on;
                        nvmlPciInfo_t pci;
                        char bus[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
                        if (lib->nvlink_state(g->handle, l, &on) != NVML_SUCCESS ||
                            on != NVML_FEATURE_ENABLED ||
                            nvml_lib_nvlink_remote_pci(lib, g->handle, l, &pci) != NVML_SUCCESS)
                                continue;
                        nvml_bus_id_normalize(pci.busId, bus, sizeof(bus));
                        int b = gpu_by_bus(inv, bus);
                        nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
                        if (lib->nvlink_remote_type)
                                lib->nvlink_remote_type(g->handle, l, &type);
                        if (b >= 0 && (size_t)b != a)
                                direct[a * n + (size_t)b]++;
                        else if (b < 0 && (type == NVML_NVLINK_DEVICE_TYPE_SWITCH ||
                                           type == NVML_NVLINK_DEVICE_TYPE_UNKNOWN)) {
                                size_t s = switch_index(&sw, n, bus);
                                sw.count[a * sw.cap + s]++;
                        }
                }
        }
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++) {
                        unsigned links = direct[a * n + b] > direct[b * n + a] ? direct[a * n + b]
                                                                               : direct[b * n + a];
                        for (size_t s = 0; s < sw.n; s++) {
                                unsigned x = sw.count[a * sw.cap + s], y = sw.count[b * sw.cap + s];
                                links += x < y ? x : y;
                        }
                        inv->nvlinks[a * n + b] = inv->nvlinks[b * n + a] = links;
                }
        free(sw.count);
        free(sw.bus);
}

static enum alloc_pcie_level level_of(nvmlGpuTopologyLevel_t l)
{
        switch (l) {
        case NVML_TOPOLOGY_INTERNAL:
                return ALLOC_PCIE_SAME_BOARD;
        case NVML_TOPOLOGY_SINGLE:
                return ALLOC_PCIE_SINGLE_SWITCH;
        case NVML_TOPOLOGY_MULTIPLE:
                return ALLOC_PCIE_MULTIPLE_SWITCHES;
        case NVML_TOPOLOGY_HOSTBRIDGE:
                return ALLOC_PCIE_HOST_BRIDGE;
        case NVML_TOPOLOGY_NODE:
                return ALLOC_PCIE_NUMA_NODE;
        case NVML_TOPOLOGY_SYSTEM:
                return ALLOC_PCIE_SYSTEM;
        }
        return ALLOC_PCIE_UNKNOWN;
}

static void topology_load(const struct nvml_lib *lib, struct nvml_inventory *inv)
{
        size_t n = inv->n_gpus;
        inv->nvlinks = xcalloc(n * n, sizeof(*inv->nvlinks));
        inv->pcie = xcalloc(n * n, sizeof(*inv->pcie));
        for (size_t i = 0; i < n * n; i++)
                inv->pcie[i] = ALLOC_PCIE_UNKNOWN;
        nvlinks_load(lib, inv);
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++) {
                        const struct nvml_gpu *ga = &inv->gpus[a], *gb = &inv->gpus[b];
                        nvmlGpuTopologyLevel_t l;
                        if (lib->common_ancestor && !ga->lost && !gb->lost &&
                            lib->common_ancestor(ga->handle, gb->handle, &l) == NVML_SUCCESS)
                                inv->pcie[a * n + b] = inv->pcie[b * n + a] = level_of(l);
                }
        inv->topology = alloc_topology_new(n);
        if (!inv->topology)
                return;
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++)
                        alloc_topology_set(inv->topology, a, b,
                                           alloc_link_score(inv->nvlinks[a * n + b],
                                                            inv->pcie[a * n + b]));
}

/* ---- the whole node ---- */

int nvml_inventory_load(const struct nvml_lib *lib, const struct nvml_inventory_env *env,
                        struct nvml_inventory **out, struct diag *diag)
{
        unsigned count = 0;
        nvmlReturn_t r = lib->device_count(&count);
        if (r != NVML_SUCCESS)
                return diag_set(diag, -EIO, "cannot count the GPUs: %s", nvml_lib_strerror(lib, r));
        if (count > ALLOC_MAX_GPUS)
                count = ALLOC_MAX_GPUS;
        struct nvml_inventory *inv = xcalloc(1, sizeof(*inv));
        if (lib->driver_version &&
            lib->driver_version(inv->driver_version, sizeof(inv->driver_version)) != NVML_SUCCESS)
                inv->driver_version[0] = '\0';
        if (lib->cuda_driver_version &&
            lib->cuda_driver_version(&inv->cuda_version) != NVML_SUCCESS)
                inv->cuda_version = 0;

        _cleanup_free_ char *minors = NULL;
        _cleanup_free_ char *minors_path =
            xasprintf("%s/driver/nvidia-caps/mig-minors", env->proc_root);
        inv->mig_minors_found = fs_read_file(minors_path, MIG_MINORS_MAX, &minors, NULL) == 0;

        inv->gpus = xcalloc(count ? count : 1, sizeof(*inv->gpus));
        inv->n_gpus = count;
        for (unsigned i = 0; i < count; i++)
                gpu_load(lib, env, minors, i, &inv->gpus[i]);
        if (count)
                topology_load(lib, inv);
        *out = inv;
        return 0;
}

void nvml_inventory_free(struct nvml_inventory *inv)
{
        if (!inv)
                return;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                free(inv->gpus[i].migs);
                free(inv->gpus[i].mig_profiles);
        }
        free(inv->gpus);
        free(inv->nvlinks);
        free(inv->pcie);
        alloc_topology_free(inv->topology);
        free(inv);
}
