/* The NVML sampler behind metrics (see sample.h).
 *
 * Calls go through the backend's one NVML table (nvml-lib.c), whose
 * metric-only entry points are optional: a missing one leaves its family
 * absent.  Each sample walks the inventory's GPUs (and, on a GPU in MIG
 * mode, its MIG devices as they are now), reads the telemetry, memory and
 * the running processes, and each process's SM, encoder and decoder
 * utilisation since the previous sample.  The families dcgm-exporter's
 * default file leaves out (ECC, retired pages, violations, NVLink errors,
 * limits, fan, P-state, the DCGM_EXP_*_COUNT window counters) come last in
 * the table, opt-in, and their NVML calls are made only when the consumer
 * asks for them (dev_sample_wants).  Label fields (serial, VBIOS...) are
 * read once at creation.  NVML's buffers are bounded (MAX_PROCS processes
 * per device, XID_RING XIDs per GPU, one clock-event bucket per second of
 * the window).  Runs on the collector thread only, one sample at a time;
 * the XID tables (last XID, recent XIDs) are the only state the loop
 * writes, under the mutex.  Never logs above debug. */
#include "devices/nvidia/sample.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/nvidia/gpm.h"
#include "devices/nvidia/nvml-lib.h"

#define MAX_PROCS 4096
#define MAX_MIGS 64 /* bounds what a broken driver could claim */
#define MIB (1024.0 * 1024.0)
#define NVIDIA_MAJOR 195
#define NVIDIA_GPU_MINOR_LAST 253 /* 254 is nvidia-modeset, 255 nvidiactl */

/* dcgm-exporter's families, in its default order. */
enum nv_field {
        F_SM_CLOCK,
        F_MEM_CLOCK,
        F_MEMORY_TEMP,
        F_GPU_TEMP,
        F_POWER_USAGE,
        F_TOTAL_ENERGY,
        F_PCIE_TX_THROUGHPUT,
        F_PCIE_RX_THROUGHPUT,
        F_PCIE_REPLAY,
        F_GPU_UTIL,
        F_MEM_COPY_UTIL,
        F_ENC_UTIL,
        F_DEC_UTIL,
        F_XID,
        F_FB_FREE,
        F_FB_USED,
        F_FB_RESERVED,
        F_NVLINK_BANDWIDTH,
        F_VGPU_LICENSE,
        F_REMAP_UNCORRECTABLE,
        F_REMAP_CORRECTABLE,
        F_REMAP_FAILURE,
        F_CLOCKS_EVENT_REASONS,
        /* profiling: GPM (Hopper on); PCIe and NVLink rates on older GPUs too */
        F_PROF_GR_ENGINE,
        F_PROF_SM_ACTIVE,
        F_PROF_SM_OCCUPANCY,
        F_PROF_TENSOR,
        F_PROF_DRAM,
        F_PROF_FP64,
        F_PROF_FP32,
        F_PROF_FP16,
        F_PROF_PCIE_TX,
        F_PROF_PCIE_RX,
        F_PROF_NVLINK_TX,
        F_PROF_NVLINK_RX,
        /* the fields dcgm-exporter's default file leaves commented out:
         * exported when a --collectors file names them */
        F_POWER_MGMT_LIMIT,
        F_ENFORCED_POWER_LIMIT,
        F_FAN_SPEED,
        F_PSTATE,
        F_POWER_VIOLATION, /* NVML_PERF_POLICY_* order, POWER to RELIABILITY */
        F_THERMAL_VIOLATION,
        F_SYNC_BOOST_VIOLATION,
        F_BOARD_LIMIT_VIOLATION,
        F_LOW_UTIL_VIOLATION,
        F_RELIABILITY_VIOLATION,
        F_ECC_SBE_VOL,
        F_ECC_DBE_VOL,
        F_ECC_SBE_AGG,
        F_ECC_DBE_AGG,
        F_RETIRED_SBE,
        F_RETIRED_DBE,
        F_RETIRED_PENDING,
        F_NVLINK_CRC_FLIT,
        F_NVLINK_CRC_DATA,
        F_NVLINK_REPLAY,
        F_NVLINK_RECOVERY,
        F_EXP_XID_COUNT,
        F_EXP_CLOCK_EVENTS_COUNT,
        F_COUNT
};
#define N_OPT_IN (F_COUNT - F_POWER_MGMT_LIMIT)

/* dcgm-exporter's DCGM_EXP_*_COUNT window (its --xid-count-window-size and
 * --clock-events-count-window-size defaults) */
#define EXP_WINDOW_MS 300000
#define EXP_WINDOW_LABEL "300000"
#define XID_RING 256 /* XIDs remembered per GPU within the window */

static const char *const xid_labels[] = { "err_code", "err_msg", NULL };
static const char *const xid_count_labels[] = { "window_size_in_ms", "xid", NULL };
static const char *const clock_event_labels[] = { "window_size_in_ms", "clock_event", NULL };

/* dcgm-exporter's clock_event names of the DCGM_CLOCKS_EVENT_REASON_* bits
 * (NVML's nvmlClocksEventReasons bits are the same) */
static const char *const clock_event_names[] = {
        "gpu_idle", "clocks_setting", "power_cap", "hw_slowdown", "sync_boost",
        "sw_thermal", "hw_thermal", "hw_power_brake", "display_clocks",
};
#define CLOCK_EVENTS ARRAY_SIZE(clock_event_names)
#define CLOCK_BUCKETS (EXP_WINDOW_MS / 1000) /* one per second of the window */

/* dcgm-exporter's label fields this sampler can give (as extra labels on
 * every series of the GPU, named by the field); DCGM_FI_DRIVER_VERSION is
 * on every series anyway, as devlet always had it */
static const char *const label_fields[] = {
        "DCGM_FI_DEV_NAME", "DCGM_FI_DEV_UUID", "DCGM_FI_DEV_SERIAL", "DCGM_FI_DEV_VBIOS_VERSION",
        "DCGM_FI_DEV_BRAND", "DCGM_FI_DEV_MINOR_NUMBER", "DCGM_FI_DEV_PCI_BUSID",
        "DCGM_FI_NVML_VERSION", "DCGM_FI_DRIVER_VERSION", NULL,
};

#define G DEV_MEASURE_GAUGE
#define C DEV_MEASURE_COUNTER
static const struct dev_measure_family families[F_COUNT] = {
        [F_SM_CLOCK] = { .name = "DCGM_FI_DEV_SM_CLOCK", .type = G, .help = "SM clock frequency (in MHz)." },
        [F_MEM_CLOCK] = { .name = "DCGM_FI_DEV_MEM_CLOCK", .type = G, .help = "Memory clock frequency (in MHz)." },
        [F_MEMORY_TEMP] = { .name = "DCGM_FI_DEV_MEMORY_TEMP", .type = G, .help = "Memory temperature (in C)." },
        [F_GPU_TEMP] = { .name = "DCGM_FI_DEV_GPU_TEMP", .type = G, .help = "GPU temperature (in C)." },
        [F_POWER_USAGE] = { .name = "DCGM_FI_DEV_POWER_USAGE", .type = G, .help = "Power draw (in W)." },
        [F_TOTAL_ENERGY] = { .name = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", .type = C, .help = "Total energy consumption since boot (in mJ)." },
        [F_PCIE_TX_THROUGHPUT] = { .name = "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", .type = C, .help = "PCIe transmit throughput (in KB/s), as NVML measures it over 20 ms." },
        [F_PCIE_RX_THROUGHPUT] = { .name = "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", .type = C, .help = "PCIe receive throughput (in KB/s), as NVML measures it over 20 ms." },
        [F_PCIE_REPLAY] = { .name = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", .type = C, .help = "Total number of PCIe retries." },
        [F_GPU_UTIL] = { .name = "DCGM_FI_DEV_GPU_UTIL", .type = G, .help = "GPU utilization (in %).", .share = DEV_SHARE_UTIL },
        [F_MEM_COPY_UTIL] = { .name = "DCGM_FI_DEV_MEM_COPY_UTIL", .type = G, .help = "Memory utilization (in %)." },
        [F_ENC_UTIL] = { .name = "DCGM_FI_DEV_ENC_UTIL", .type = G, .help = "Encoder utilization (in %).", .share = DEV_SHARE_ENC },
        [F_DEC_UTIL] = { .name = "DCGM_FI_DEV_DEC_UTIL", .type = G, .help = "Decoder utilization (in %).", .share = DEV_SHARE_DEC },
        [F_XID] = { .name = "DCGM_FI_DEV_XID_ERRORS", .type = G, .help = "Value of the last XID error encountered.", .value_labels = xid_labels },
        [F_FB_FREE] = { .name = "DCGM_FI_DEV_FB_FREE", .type = G, .help = "Framebuffer memory free (in MiB)." },
        [F_FB_USED] = { .name = "DCGM_FI_DEV_FB_USED", .type = G, .help = "Framebuffer memory used (in MiB).", .share = DEV_SHARE_MEMORY, .share_unit = MIB },
        [F_FB_RESERVED] = { .name = "DCGM_FI_DEV_FB_RESERVED", .type = G, .help = "Framebuffer memory reserved (in MiB)." },
        [F_NVLINK_BANDWIDTH] = { .name = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", .type = C, .help = "Total number of NVLink bandwidth counters for all lanes." },
        [F_VGPU_LICENSE] = { .name = "DCGM_FI_DEV_VGPU_LICENSE_STATUS", .type = G, .help = "vGPU software license status (1: a feature is licensed, 0: none)." },
        [F_REMAP_UNCORRECTABLE] = { .name = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", .type = C, .help = "Number of remapped rows for uncorrectable errors." },
        [F_REMAP_CORRECTABLE] = { .name = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", .type = C, .help = "Number of remapped rows for correctable errors." },
        [F_REMAP_FAILURE] = { .name = "DCGM_FI_DEV_ROW_REMAP_FAILURE", .type = G, .help = "Whether remapping of rows has failed." },
        [F_CLOCKS_EVENT_REASONS] = { .name = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", .type = G, .help = "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)." },
        [F_PROF_GR_ENGINE] = { .name = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", .type = G, .help = "Ratio of time the graphics engine is active." },
        [F_PROF_SM_ACTIVE] = { .name = "DCGM_FI_PROF_SM_ACTIVE", .type = G, .help = "The ratio of cycles an SM has at least 1 warp assigned." },
        [F_PROF_SM_OCCUPANCY] = { .name = "DCGM_FI_PROF_SM_OCCUPANCY", .type = G, .help = "The ratio of number of warps resident on an SM." },
        [F_PROF_TENSOR] = { .name = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", .type = G, .help = "Ratio of cycles the tensor (HMMA) pipe is active." },
        [F_PROF_DRAM] = { .name = "DCGM_FI_PROF_DRAM_ACTIVE", .type = G, .help = "Ratio of cycles the device memory interface is active sending or receiving data." },
        [F_PROF_FP64] = { .name = "DCGM_FI_PROF_PIPE_FP64_ACTIVE", .type = G, .help = "Ratio of cycles the fp64 pipes are active." },
        [F_PROF_FP32] = { .name = "DCGM_FI_PROF_PIPE_FP32_ACTIVE", .type = G, .help = "Ratio of cycles the fp32 pipes are active." },
        [F_PROF_FP16] = { .name = "DCGM_FI_PROF_PIPE_FP16_ACTIVE", .type = G, .help = "Ratio of cycles the fp16 pipes are active." },
        [F_PROF_PCIE_TX] = { .name = "DCGM_FI_PROF_PCIE_TX_BYTES", .type = G, .help = "The rate of data transmitted over the PCIe bus - including both protocol "
                             "headers and data payloads - in bytes per second." },
        [F_PROF_PCIE_RX] = { .name = "DCGM_FI_PROF_PCIE_RX_BYTES", .type = G, .help = "The rate of data received over the PCIe bus - including both protocol "
                             "headers and data payloads - in bytes per second." },
        [F_PROF_NVLINK_TX] = { .name = "DCGM_FI_PROF_NVLINK_TX_BYTES", .type = G, .help = "The number of bytes of active NvLink tx (transmit) data including both "
                               "header and payload." },
        [F_PROF_NVLINK_RX] = { .name = "DCGM_FI_PROF_NVLINK_RX_BYTES", .type = G, .help = "The number of bytes of active NvLink rx (read) data including both header "
                               "and payload." },
        [F_POWER_MGMT_LIMIT] = { .name = "DCGM_FI_DEV_POWER_MGMT_LIMIT", .type = G, .help = "Power management limit (in W)." },
        [F_ENFORCED_POWER_LIMIT] = { .name = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", .type = G, .help = "Power limit the driver enforces (in W)." },
        [F_FAN_SPEED] = { .name = "DCGM_FI_DEV_FAN_SPEED", .type = G, .help = "Fan speed (in % of its maximum)." },
        [F_PSTATE] = { .name = "DCGM_FI_DEV_PSTATE", .type = G, .help = "Performance state (0: highest, 15: lowest)." },
        [F_POWER_VIOLATION] = { .name = "DCGM_FI_DEV_POWER_VIOLATION", .type = C, .help = "Time held back by the power limit since boot (in ns)." },
        [F_THERMAL_VIOLATION] = { .name = "DCGM_FI_DEV_THERMAL_VIOLATION", .type = C, .help = "Time held back by thermal limits since boot (in ns)." },
        [F_SYNC_BOOST_VIOLATION] = { .name = "DCGM_FI_DEV_SYNC_BOOST_VIOLATION", .type = C, .help = "Time held back by sync boost since boot (in ns)." },
        [F_BOARD_LIMIT_VIOLATION] = { .name = "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", .type = C, .help = "Time held back by the board limit since boot (in ns)." },
        [F_LOW_UTIL_VIOLATION] = { .name = "DCGM_FI_DEV_LOW_UTIL_VIOLATION", .type = C, .help = "Time held back for low utilization since boot (in ns)." },
        [F_RELIABILITY_VIOLATION] = { .name = "DCGM_FI_DEV_RELIABILITY_VIOLATION", .type = C, .help = "Time held back by reliability limits since boot (in ns)." },
        [F_ECC_SBE_VOL] = { .name = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", .type = C, .help = "Single-bit (corrected) ECC errors since the driver loaded." },
        [F_ECC_DBE_VOL] = { .name = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", .type = C, .help = "Double-bit (uncorrected) ECC errors since the driver loaded." },
        [F_ECC_SBE_AGG] = { .name = "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", .type = C, .help = "Single-bit (corrected) ECC errors over the GPU's life." },
        [F_ECC_DBE_AGG] = { .name = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", .type = C, .help = "Double-bit (uncorrected) ECC errors over the GPU's life." },
        [F_RETIRED_SBE] = { .name = "DCGM_FI_DEV_RETIRED_SBE", .type = C, .help = "Pages retired after multiple single-bit ECC errors." },
        [F_RETIRED_DBE] = { .name = "DCGM_FI_DEV_RETIRED_DBE", .type = C, .help = "Pages retired after a double-bit ECC error." },
        [F_RETIRED_PENDING] = { .name = "DCGM_FI_DEV_RETIRED_PENDING", .type = C, .help = "Whether pages wait for retirement at the next driver load (1) or not (0)." },
        [F_NVLINK_CRC_FLIT] = { .name = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", .type = C, .help = "NVLink flow-control CRC errors, all links." },
        [F_NVLINK_CRC_DATA] = { .name = "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", .type = C, .help = "NVLink data CRC errors, all links." },
        [F_NVLINK_REPLAY] = { .name = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", .type = C, .help = "NVLink replays (retries), all links." },
        [F_NVLINK_RECOVERY] = { .name = "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", .type = C, .help = "NVLink recoveries, all links." },
        [F_EXP_XID_COUNT] = { .name = "DCGM_EXP_XID_ERRORS_COUNT", .type = G, .help = "XID errors seen within the window, per XID code.", .value_labels = xid_count_labels },
        [F_EXP_CLOCK_EVENTS_COUNT] = { .name = "DCGM_EXP_CLOCK_EVENTS_COUNT", .type = G, .help = "Samples within the window that had the clock event reason set.", .value_labels = clock_event_labels },
};

/* GPM's metrics in the families' units: ratios from percentages, bytes/s
 * from MiB/s. */
static const struct {
        enum nv_field field;
        double scale;
} gpm_to_family[GPM_COUNT] = {
        [GPM_GRAPHICS] = { F_PROF_GR_ENGINE, 0.01 }, [GPM_SM] = { F_PROF_SM_ACTIVE, 0.01 },
        [GPM_OCCUPANCY] = { F_PROF_SM_OCCUPANCY, 0.01 }, [GPM_TENSOR] = { F_PROF_TENSOR, 0.01 },
        [GPM_DRAM] = { F_PROF_DRAM, 0.01 }, [GPM_FP64] = { F_PROF_FP64, 0.01 },
        [GPM_FP32] = { F_PROF_FP32, 0.01 }, [GPM_FP16] = { F_PROF_FP16, 0.01 },
        [GPM_PCIE_TX] = { F_PROF_PCIE_TX, MIB }, [GPM_PCIE_RX] = { F_PROF_PCIE_RX, MIB },
        [GPM_NVLINK_TX] = { F_PROF_NVLINK_TX, MIB }, [GPM_NVLINK_RX] = { F_PROF_NVLINK_RX, MIB },
};
#undef G
#undef C

static const char *const resource_prefixes[] = { "nvidia.com/", NULL };
static const char *const env_vars[] = { "NVIDIA_VISIBLE_DEVICES", NULL };
static const char *const mount_dirs[] = { "/var/run/nvidia-container-devices/",
                                          "/run/nvidia-container-devices/", NULL };
static const struct dev_devnum_range devnums[] = { { NVIDIA_MAJOR, 0, NVIDIA_GPU_MINOR_LAST } };

const struct dev_attr_hints nvidia_attr_hints = {
        .resource_prefixes = resource_prefixes,
        .env_vars = env_vars,
        .mount_dirs = mount_dirs,
        .cdi_vendor = "nvidia.com",
        .devnums = devnums,
        .n_devnums = ARRAY_SIZE(devnums),
        .host_label = "Hostname", /* dcgm-exporter's */
};

struct nv_gpu {
        unsigned index;
        nvmlDevice_t handle;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* NVML's "00000000:3B:00.0" */
        int minor;
        bool gpm; /* GPU Performance Monitoring works */
        unsigned long long last_util_ts; /* newest process-utilisation sample seen */
        /* NVLink data counters (KiB) at the previous sample, for their rates */
        unsigned long long nvl_tx, nvl_rx, nvl_at_us;
        char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE], vbios[NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE];
        int brand;
        /* DCGM_EXP_CLOCK_EVENTS_COUNT: per second of the window, how many
         * samples had each reason */
        struct {
                unsigned long long sec;
                unsigned short n[CLOCK_EVENTS];
        } clock_buckets[CLOCK_BUCKETS];
};

/* An XID seen (the loop notes them; the collector counts them). */
struct xid_seen {
        unsigned long long at_ms, xid;
};

struct xid_window {
        struct xid_seen v[XID_RING]; /* ring, oldest overwritten */
        size_t next, n;
};

struct nvidia_sampler {
        struct dev_sampler base;
        struct nvml_lib *lib;
        char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
        struct nv_gpu *gpus;
        size_t n_gpus;
        struct nvidia_gpm *gpm;
        nvmlProcessInfo_t *proc_buf;
        nvmlProcessUtilizationSample_t *util_buf;

        char nvml_version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];

        pthread_mutex_t mu; /* guards last_xid and xids */
        unsigned long long *last_xid; /* per GPU; 0: none */
        struct xid_window *xids;      /* per GPU */
};

/* ---- one device ---- */

struct nv_unit {
        struct dev_unit *u;
        nvmlDevice_t handle;
};

static void set(struct dev_unit *u, enum nv_field f, double v)
{
        dev_unit_set(u, f, v);
}

static void sample_memory(const struct nvml_lib *l, struct dev_unit *u, nvmlDevice_t h)
{
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        if (l->memory_info_v2 && l->memory_info_v2(h, &m2) == NVML_SUCCESS) {
                /* NVML counts reserved memory in "used" or apart depending on
                 * the driver; total - free - reserved is the allocated memory
                 * either way */
                unsigned long long taken = m2.total - m2.free;
                unsigned long long used = taken >= m2.reserved ? taken - m2.reserved : m2.used;
                set(u, F_FB_FREE, (double)(m2.free / (1024 * 1024)));
                set(u, F_FB_USED, (double)(used / (1024 * 1024)));
                set(u, F_FB_RESERVED, (double)(m2.reserved / (1024 * 1024)));
                return;
        }
        nvmlMemory_t m;
        if (l->memory_info(h, &m) == NVML_SUCCESS) {
                set(u, F_FB_FREE, (double)(m.free / (1024 * 1024)));
                set(u, F_FB_USED, (double)(m.used / (1024 * 1024)));
        }
}

static unsigned long long now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
}

/* Without GPM, the NVLink rates from the data counters (KiB) between two
 * samples. */
static void nvlink_rates(struct nv_gpu *g, struct dev_unit *u, unsigned long long tx,
                         unsigned long long rx)
{
        unsigned long long now = now_us();
        if (!g->gpm && g->nvl_at_us && now > g->nvl_at_us && tx >= g->nvl_tx && rx >= g->nvl_rx) {
                double secs = (double)(now - g->nvl_at_us) / 1e6;
                set(u, F_PROF_NVLINK_TX, (double)(tx - g->nvl_tx) * 1024.0 / secs);
                set(u, F_PROF_NVLINK_RX, (double)(rx - g->nvl_rx) * 1024.0 / secs);
        }
        g->nvl_tx = tx;
        g->nvl_rx = rx;
        g->nvl_at_us = now;
}

/* DCGM_FI_PROF_*: from GPM where the GPU has it, else the PCIe rates NVML
 * keeps for every GPU (the NVLink ones come with the field values). */
static void sample_profiling(struct nvidia_sampler *s, struct dev_unit *u, struct nv_gpu *g, int gi)
{
        const struct nvml_lib *l = s->lib;
        if (g->gpm) {
                double v[GPM_COUNT];
                bool has[GPM_COUNT];
                if (nvidia_gpm_measure(s->gpm, g->handle, g->index, gi, v, has))
                        for (size_t i = 0; i < GPM_COUNT; i++)
                                if (has[i])
                                        set(u, gpm_to_family[i].field, v[i] * gpm_to_family[i].scale);
                return;
        }
        unsigned kbps;
        if (gi < 0 && l->pcie_throughput) {
                if (l->pcie_throughput(g->handle, NVML_PCIE_UTIL_TX_BYTES, &kbps) == NVML_SUCCESS)
                        set(u, F_PROF_PCIE_TX, kbps * 1024.0);
                if (l->pcie_throughput(g->handle, NVML_PCIE_UTIL_RX_BYTES, &kbps) == NVML_SUCCESS)
                        set(u, F_PROF_PCIE_RX, kbps * 1024.0);
        }
}

/* The counters dcgm-exporter's default file leaves out: limits, fan,
 * P-state, throttling time, ECC, retired pages, NVLink errors. */
/* Whether any of the families first..last is exported: the opt-in ones
 * cost many NVML calls (NVLink errors: five per link), made only when asked. */
static bool wanted(const struct dev_sample *out, enum nv_field first, enum nv_field last)
{
        for (enum nv_field f = first; f <= last; f++)
                if (dev_sample_wants(out, families[f].name, f >= F_POWER_MGMT_LIMIT))
                        return true;
        return false;
}

static void sample_errors(const struct nvml_lib *l, const struct dev_sample *out, struct dev_unit *u,
                          nvmlDevice_t h)
{
        unsigned v;
        unsigned long long ull;
        if (!wanted(out, F_POWER_MGMT_LIMIT, F_RETIRED_PENDING) &&
            !wanted(out, F_NVLINK_CRC_FLIT, F_NVLINK_RECOVERY))
                return;
        if (l->power_limit && l->power_limit(h, &v) == NVML_SUCCESS)
                set(u, F_POWER_MGMT_LIMIT, v / 1000.0);
        if (l->enforced_power_limit && l->enforced_power_limit(h, &v) == NVML_SUCCESS)
                set(u, F_ENFORCED_POWER_LIMIT, v / 1000.0);
        if (l->fan_speed && l->fan_speed(h, &v) == NVML_SUCCESS)
                set(u, F_FAN_SPEED, v);
        nvmlPstates_t ps;
        if (l->pstate && l->pstate(h, &ps) == NVML_SUCCESS && ps != NVML_PSTATE_UNKNOWN)
                set(u, F_PSTATE, (double)ps);
        for (int p = NVML_PERF_POLICY_POWER; p <= NVML_PERF_POLICY_RELIABILITY && l->violation; p++) {
                nvmlViolationTime_t vt;
                if (l->violation(h, (nvmlPerfPolicyType_t)p, &vt) == NVML_SUCCESS)
                        set(u, F_POWER_VIOLATION + (size_t)p, (double)vt.violationTime);
        }
        static const struct {
                enum nv_field f;
                nvmlMemoryErrorType_t type;
                nvmlEccCounterType_t counter;
        } ecc[] = {
                { F_ECC_SBE_VOL, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC },
                { F_ECC_DBE_VOL, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC },
                { F_ECC_SBE_AGG, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC },
                { F_ECC_DBE_AGG, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC },
        };
        for (size_t i = 0; i < ARRAY_SIZE(ecc) && l->ecc_total; i++)
                if (l->ecc_total(h, ecc[i].type, ecc[i].counter, &ull) == NVML_SUCCESS)
                        set(u, ecc[i].f, (double)ull);
        if (l->retired_pages) {
                /* a count only: 0 entries asks for the number */
                unsigned n = 0;
                nvmlReturn_t r = l->retired_pages(h, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                                                  &n, NULL);
                if (r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE)
                        set(u, F_RETIRED_SBE, n);
                n = 0;
                r = l->retired_pages(h, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &n, NULL);
                if (r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE)
                        set(u, F_RETIRED_DBE, n);
        }
        nvmlEnableState_t pending;
        if (l->retired_pending && l->retired_pending(h, &pending) == NVML_SUCCESS)
                set(u, F_RETIRED_PENDING, pending == NVML_FEATURE_ENABLED ? 1 : 0);
        if (l->nvlink_errors && wanted(out, F_NVLINK_CRC_FLIT, F_NVLINK_RECOVERY)) {
                static const struct {
                        enum nv_field f;
                        nvmlNvLinkErrorCounter_t c;
                } nvl[] = {
                        { F_NVLINK_CRC_FLIT, NVML_NVLINK_ERROR_DL_CRC_FLIT },
                        { F_NVLINK_CRC_DATA, NVML_NVLINK_ERROR_DL_CRC_DATA },
                        { F_NVLINK_REPLAY, NVML_NVLINK_ERROR_DL_REPLAY },
                        { F_NVLINK_RECOVERY, NVML_NVLINK_ERROR_DL_RECOVERY },
                };
                double sum[ARRAY_SIZE(nvl)] = { 0 };
                bool any = false;
                for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
                        nvmlEnableState_t active;
                        if (l->nvlink_state && (l->nvlink_state(h, link, &active) != NVML_SUCCESS ||
                                                active != NVML_FEATURE_ENABLED))
                                continue;
                        for (size_t i = 0; i < ARRAY_SIZE(nvl); i++)
                                if (l->nvlink_errors(h, link, nvl[i].c, &ull) == NVML_SUCCESS) {
                                        sum[i] += (double)ull;
                                        any = true;
                                }
                }
                for (size_t i = 0; i < ARRAY_SIZE(nvl) && any; i++)
                        set(u, nvl[i].f, sum[i]);
        }
}

/* DCGM_EXP_CLOCK_EVENTS_COUNT: this sample's reasons into the window, then
 * per reason the samples within it that had it. */
static void count_clock_events(struct nv_gpu *g, struct dev_unit *u, unsigned long long reasons)
{
        unsigned long long sec = now_us() / 1000000ULL;
        __typeof__(g->clock_buckets[0]) *b = &g->clock_buckets[sec % CLOCK_BUCKETS];
        if (b->sec != sec)
                memset(b, 0, sizeof(*b));
        b->sec = sec;
        for (size_t i = 0; i < CLOCK_EVENTS; i++)
                if ((reasons & (1ULL << i)) && b->n[i] < USHRT_MAX)
                        b->n[i]++;
        bool any = false;
        for (size_t i = 0; i < CLOCK_EVENTS; i++) {
                unsigned long long n = 0;
                for (size_t k = 0; k < CLOCK_BUCKETS; k++)
                        if (g->clock_buckets[k].sec + CLOCK_BUCKETS > sec)
                                n += g->clock_buckets[k].n[i];
                if (!n)
                        continue;
                dev_unit_add_series(u, F_EXP_CLOCK_EVENTS_COUNT, (double)n,
                                    strv_push(strv_push(NULL, EXP_WINDOW_LABEL), clock_event_names[i]));
                any = true;
        }
        if (!any) /* dcgm-exporter's one zero series without the reason */
                dev_unit_add_series(u, F_EXP_CLOCK_EVENTS_COUNT, 0, strv_push(NULL, EXP_WINDOW_LABEL));
}

static void sample_telemetry(const struct nvml_lib *l, const struct dev_sample *out, struct dev_unit *u,
                             nvmlDevice_t h, struct nv_gpu *g)
{
        unsigned v, period;
        unsigned long long ull;
        if (l->clock && l->clock(h, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
                set(u, F_SM_CLOCK, v);
        if (l->clock && l->clock(h, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
                set(u, F_MEM_CLOCK, v);
        if (l->temperature && l->temperature(h, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
                set(u, F_GPU_TEMP, v);
        if (l->power && l->power(h, &v) == NVML_SUCCESS)
                set(u, F_POWER_USAGE, v / 1000.0);
        if (l->energy && l->energy(h, &ull) == NVML_SUCCESS)
                set(u, F_TOTAL_ENERGY, (double)ull);
        if (l->pcie_replay && l->pcie_replay(h, &v) == NVML_SUCCESS)
                set(u, F_PCIE_REPLAY, v);
        nvmlUtilization_t util;
        if (l->utilization && l->utilization(h, &util) == NVML_SUCCESS) {
                set(u, F_GPU_UTIL, util.gpu);
                set(u, F_MEM_COPY_UTIL, util.memory);
        }
        if (l->encoder_util && l->encoder_util(h, &v, &period) == NVML_SUCCESS)
                set(u, F_ENC_UTIL, v);
        if (l->decoder_util && l->decoder_util(h, &v, &period) == NVML_SUCCESS)
                set(u, F_DEC_UTIL, v);
        if (l->clocks_event_reasons && l->clocks_event_reasons(h, &ull) == NVML_SUCCESS) {
                set(u, F_CLOCKS_EVENT_REASONS, (double)ull);
                if (g && wanted(out, F_EXP_CLOCK_EVENTS_COUNT, F_EXP_CLOCK_EVENTS_COUNT))
                        count_clock_events(g, u, ull);
        }
        if (l->pcie_throughput && l->pcie_throughput(h, NVML_PCIE_UTIL_TX_BYTES, &v) == NVML_SUCCESS)
                set(u, F_PCIE_TX_THROUGHPUT, v);
        if (l->pcie_throughput && l->pcie_throughput(h, NVML_PCIE_UTIL_RX_BYTES, &v) == NVML_SUCCESS)
                set(u, F_PCIE_RX_THROUGHPUT, v);
        nvmlGridLicensableFeatures_t lic;
        memset(&lic, 0, sizeof(lic));
        if (l->grid_licenses && l->grid_licenses(h, &lic) == NVML_SUCCESS) {
                bool licensed = false;
                for (unsigned i = 0; i < lic.licensableFeaturesCount && i < NVML_GRID_LICENSE_FEATURE_MAX_COUNT;
                     i++)
                        licensed |= lic.gridLicensableFeatures[i].featureState != 0;
                set(u, F_VGPU_LICENSE, lic.isGridLicenseSupported && licensed ? 1 : 0);
        }
        sample_errors(l, out, u, h);
        unsigned cor, unc, pending, failure;
        if (l->remapped_rows && l->remapped_rows(h, &cor, &unc, &pending, &failure) == NVML_SUCCESS) {
                set(u, F_REMAP_CORRECTABLE, cor);
                set(u, F_REMAP_UNCORRECTABLE, unc);
                set(u, F_REMAP_FAILURE, failure ? 1 : 0);
        }
        if (l->field_values) {
                /* scope UINT_MAX: NVLink counters summed over every link */
                nvmlFieldValue_t f[3] = {
                        { .fieldId = NVML_FI_DEV_MEMORY_TEMP },
                        { .fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, .scopeId = ~0U },
                        { .fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, .scopeId = ~0U },
                };
                if (l->field_values(h, 3, f) == NVML_SUCCESS) {
                        if (f[0].nvmlReturn == NVML_SUCCESS)
                                set(u, F_MEMORY_TEMP,
                                    f[0].valueType == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                                            ? (double)f[0].value.ullVal
                                            : (double)f[0].value.uiVal);
                        if (f[1].nvmlReturn == NVML_SUCCESS && f[2].nvmlReturn == NVML_SUCCESS) {
                                set(u, F_NVLINK_BANDWIDTH,
                                    (double)(f[1].value.ullVal + f[2].value.ullVal));
                                if (g)
                                        nvlink_rates(g, u, f[1].value.ullVal, f[2].value.ullVal);
                        }
                }
        }
}

/* One kind of process list into u's (pids already there are merged). */
static void list_procs(struct nvidia_sampler *s, struct dev_unit *u, nvmlDevice_t h, bool graphics)
{
        const struct nvml_lib *l = s->lib;
        NVML_FN(nvmlDeviceGetComputeRunningProcesses_v3) v3 = graphics ? l->graphics_procs : l->compute_procs;
        NVML_FN(nvmlDeviceGetComputeRunningProcesses) v1 = graphics ? l->graphics_procs_v1 : l->compute_procs_v1;
        unsigned count = MAX_PROCS;
        nvmlReturn_t r;
        size_t stride;
        if (v3) {
                r = v3(h, &count, s->proc_buf);
                stride = sizeof(nvmlProcessInfo_t);
        } else if (v1) {
                r = v1(h, &count, (nvmlProcessInfo_v1_t *)s->proc_buf);
                stride = sizeof(nvmlProcessInfo_v1_t);
        } else {
                return;
        }
        if (r != NVML_SUCCESS || count > MAX_PROCS)
                return;
        u->procs_known = true;
        for (unsigned i = 0; i < count; i++) {
                nvmlProcessInfo_v1_t p;
                memcpy(&p, (const char *)s->proc_buf + (size_t)i * stride, sizeof(p));
                /* NVML reports NVML_VALUE_NOT_AVAILABLE (all ones) without permission */
                uint64_t mem = p.usedGpuMemory == ~0ULL ? 0 : p.usedGpuMemory;
                bool merged = false;
                for (size_t k = 0; k < u->n_procs && !merged; k++) {
                        if (u->procs[k].pid == p.pid) {
                                u->procs[k].mem_bytes += mem;
                                merged = true;
                        }
                }
                if (merged)
                        continue;
                u->procs = xrealloc(u->procs, (u->n_procs + 1) * sizeof(*u->procs));
                u->procs[u->n_procs++] =
                        (struct dev_proc){ .pid = p.pid, .mem_bytes = mem, .util = -1, .enc = -1, .dec = -1 };
        }
}

static int pct(unsigned v)
{
        return (int)(v > 100 ? 100 : v);
}

/* Utilisation per process since the last sample (whole GPUs only). */
static void proc_utilization(struct nvidia_sampler *s, struct dev_unit *u, struct nv_gpu *g)
{
        if (!s->lib->process_util || u->n_procs == 0)
                return;
        unsigned count = MAX_PROCS;
        if (s->lib->process_util(g->handle, s->util_buf, &count, g->last_util_ts) != NVML_SUCCESS ||
            count > MAX_PROCS)
                return;
        unsigned long long newest = g->last_util_ts;
        _cleanup_free_ unsigned long long *seen = xcalloc(u->n_procs, sizeof(*seen));
        for (unsigned i = 0; i < count; i++) {
                const nvmlProcessUtilizationSample_t *smp = &s->util_buf[i];
                if (smp->timeStamp > newest)
                        newest = smp->timeStamp;
                for (size_t k = 0; k < u->n_procs; k++) {
                        struct dev_proc *p = &u->procs[k];
                        /* several samples of one process: the newest counts */
                        if (p->pid != smp->pid || (p->util >= 0 && smp->timeStamp < seen[k]))
                                continue;
                        p->util = pct(smp->smUtil);
                        p->enc = pct(smp->encUtil);
                        p->dec = pct(smp->decUtil);
                        seen[k] = smp->timeStamp;
                }
        }
        g->last_util_ts = newest;
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

/* dcgm-exporter's label order; the host label goes before the driver's. */
static void unit_labels(struct nvidia_sampler *s, struct dev_unit *u, const struct nv_gpu *g,
                        const char *profile, const unsigned *gi)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%u", g->index);
        dev_unit_label(u, "gpu", buf);
        dev_unit_label(u, "UUID", g->uuid);
        dev_unit_label(u, "pci_bus_id", g->bus_id);
        snprintf(buf, sizeof(buf), "nvidia%u", g->index);
        dev_unit_label(u, "device", buf);
        dev_unit_label(u, "modelName", g->name);
        if (profile) {
                dev_unit_label(u, "GPU_I_PROFILE", profile);
                snprintf(buf, sizeof(buf), "%u", *gi);
                dev_unit_label(u, "GPU_I_ID", buf);
        }
        u->host_at = u->n_labels;
        if (s->driver[0])
                dev_unit_label(u, "DCGM_FI_DRIVER_VERSION", s->driver);
        /* label fields, each on the series only when the counters file has its row */
        dev_unit_field_label(u, "DCGM_FI_DEV_NAME", g->name);
        dev_unit_field_label(u, "DCGM_FI_DEV_UUID", g->uuid);
        dev_unit_field_label(u, "DCGM_FI_DEV_SERIAL", g->serial);
        dev_unit_field_label(u, "DCGM_FI_DEV_VBIOS_VERSION", g->vbios);
        dev_unit_field_label(u, "DCGM_FI_DEV_BRAND", nvidia_brand_name(g->brand));
        if (g->minor >= 0) {
                snprintf(buf, sizeof(buf), "%d", g->minor);
                dev_unit_field_label(u, "DCGM_FI_DEV_MINOR_NUMBER", buf);
        }
        dev_unit_field_label(u, "DCGM_FI_DEV_PCI_BUSID", g->bus_id);
        dev_unit_field_label(u, "DCGM_FI_NVML_VERSION", s->nvml_version);
}

/* DCGM_EXP_XID_ERRORS_COUNT: the GPU's XIDs within the window, per code
 * (the caller holds the mutex). */
static void count_xids(struct nvidia_sampler *s, struct dev_unit *u, size_t gi)
{
        struct xid_window *w = &s->xids[gi];
        unsigned long long now = now_us() / 1000ULL;
        unsigned long long codes[XID_RING], counts[XID_RING];
        size_t n = 0;
        for (size_t k = 0; k < w->n; k++) {
                const struct xid_seen *x = &w->v[(w->next + XID_RING - w->n + k) % XID_RING];
                if (x->at_ms + EXP_WINDOW_MS <= now)
                        continue;
                size_t j = 0;
                while (j < n && codes[j] != x->xid)
                        j++;
                if (j == n) {
                        codes[n] = x->xid;
                        counts[n++] = 0;
                }
                counts[j]++;
        }
        for (size_t j = 0; j < n; j++) {
                char code[24];
                snprintf(code, sizeof(code), "%llu", codes[j]);
                dev_unit_add_series(u, F_EXP_XID_COUNT, (double)counts[j],
                                    strv_push(strv_push(NULL, EXP_WINDOW_LABEL), code));
        }
        if (!n) /* dcgm-exporter's one zero series without an xid */
                dev_unit_add_series(u, F_EXP_XID_COUNT, 0, strv_push(NULL, EXP_WINDOW_LABEL));
}

static void sample_migs(struct nvidia_sampler *s, struct dev_sample *out, struct nv_gpu *g)
{
        const struct nvml_lib *l = s->lib;
        if (!l->mig_handle_by_index || !l->max_mig_devices)
                return;
        unsigned max = 0;
        if (l->max_mig_devices(g->handle, &max) != NVML_SUCCESS)
                return;
        for (unsigned j = 0; j < max && j < MAX_MIGS; j++) {
                nvmlDevice_t mh;
                if (l->mig_handle_by_index(g->handle, j, &mh) != NVML_SUCCESS)
                        continue;
                char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
                if (l->uuid(mh, uuid, sizeof(uuid)) != NVML_SUCCESS)
                        uuid[0] = '\0';
                char mig_name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "", profile[NVML_PROFILE_MAX] = "";
                if (l->name(mh, mig_name, sizeof(mig_name)) == NVML_SUCCESS)
                        mig_profile(mig_name, profile, sizeof(profile));
                unsigned gi = 0, ci = 0;
                if (l->gpu_instance_id && l->gpu_instance_id(mh, &gi) != NVML_SUCCESS)
                        gi = 0;
                if (l->compute_instance_id && l->compute_instance_id(mh, &ci) != NVML_SUCCESS)
                        ci = 0;

                struct dev_unit *u = dev_sample_add(out, families, F_COUNT, &nvidia_attr_hints);
                u->n_opt_in = N_OPT_IN;
                unit_labels(s, u, g, profile, &gi);
                u->key = xstrdup(uuid);
                if (uuid[0])
                        u->names = strv_push(u->names, uuid);
                char ref[NVML_DEVICE_UUID_V2_BUFFER_SIZE + 32];
                snprintf(ref, sizeof(ref), "MIG-%s/%u/%u", g->uuid, gi, ci); /* before R470 */
                u->names = strv_push(u->names, ref);
                snprintf(ref, sizeof(ref), "%u:%u", g->index, j);
                u->local_names = strv_push(u->local_names, ref);
                sample_profiling(s, u, g, (int)gi);
                sample_memory(l, u, mh);
                list_procs(s, u, mh, false);
                list_procs(s, u, mh, true);
        }
}

static int nv_sample(struct dev_sampler *ds, struct dev_sample *out)
{
        struct nvidia_sampler *s = (struct nvidia_sampler *)ds;
        const struct nvml_lib *l = s->lib;
        for (size_t i = 0; i < s->n_gpus; i++) {
                struct nv_gpu *g = &s->gpus[i];
                char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
                if (l->uuid(g->handle, uuid, sizeof(uuid)) != NVML_SUCCESS)
                        continue; /* lost: nothing to say about it */
                struct dev_unit *u = dev_sample_add(out, families, F_COUNT, &nvidia_attr_hints);
                u->n_opt_in = N_OPT_IN;
                unit_labels(s, u, g, NULL, NULL);
                u->key = xstrdup(g->uuid);
                u->names = strv_push(u->names, g->uuid);
                char ref[16];
                snprintf(ref, sizeof(ref), "%u", g->index);
                u->local_names = strv_push(u->local_names, ref);
                u->whole = true;
                if (g->minor >= 0) {
                        u->devnums = xcalloc(1, sizeof(*u->devnums));
                        u->devnums[0] = (struct dev_devnum){ NVIDIA_MAJOR, (unsigned)g->minor };
                        u->n_devnums = 1;
                }
                sample_telemetry(l, out, u, g->handle, g);
                sample_memory(l, u, g->handle);
                pthread_mutex_lock(&s->mu);
                unsigned long long xid = s->last_xid[g - s->gpus];
                count_xids(s, u, (size_t)(g - s->gpus));
                pthread_mutex_unlock(&s->mu);
                set(u, F_XID, (double)xid);
                char code[24];
                snprintf(code, sizeof(code), "%llu", xid);
                u->values[F_XID].labels = strv_push(strv_push(NULL, code), nvidia_xid_text(xid));
                unsigned mode = 0, pending = 0;
                bool mig = l->mig_mode && l->mig_mode(g->handle, &mode, &pending) == NVML_SUCCESS &&
                           mode == NVML_DEVICE_MIG_ENABLE;
                if (!mig)
                        sample_profiling(s, u, g, -1);
                if (mig) {
                        sample_migs(s, out, g);
                        continue;
                }
                u = &out->units[out->n_units - 1];
                list_procs(s, u, g->handle, false);
                list_procs(s, u, g->handle, true);
                proc_utilization(s, u, g);
        }
        return 0;
}

static void nv_free(struct dev_sampler *ds)
{
        struct nvidia_sampler *s = (struct nvidia_sampler *)ds;
        nvidia_gpm_free(s->gpm);
        s->lib->shutdown();
        nvml_lib_close(s->lib);
        pthread_mutex_destroy(&s->mu);
        free(s->gpus);
        free(s->last_xid);
        free(s->xids);
        free(s->proc_buf);
        free(s->util_buf);
        free(s);
}

/* Fields of dcgm-exporter's files NVML cannot give, and why. */
static const char *nv_why_absent(const char *field)
{
        if (strncmp(field, "DCGM_FI_DEV_NVSWITCH_", 21) == 0)
                return "NVSwitch fields come from DCGM's NVSwitch module (fabric manager); NVML on a GPU "
                       "node gives nothing for them";
        if (strncmp(field, "DCGM_FI_PROF_", 13) == 0)
                return "a DCGM profiling field NVML's GPU Performance Monitoring has no metric for";
        if (strcmp(field, "DCGM_EXP_XID_ERRORS_TOTAL") == 0 || strcmp(field, "DCGM_EXP_CLOCK_EVENTS_TOTAL") == 0)
                return "not implemented; devlet_xid_events_total counts XIDs by GPU and code since start";
        if (strncmp(field, "DCGM_EXP_", 9) == 0)
                return "a dcgm-exporter field built on DCGM's health or P2P checks, which NVML does not run";
        if (strstr(field, "INFOROM"))
                return "devlet does not read the infoROM versions";
        return "no NVML call devlet makes gives it";
}

static const struct dev_sampler_ops nv_sampler_ops = {
        .name = "nvidia",
        .families = families,
        .n_families = F_COUNT,
        .sample = nv_sample,
        .free = nv_free,
        .label_fields = label_fields,
        .why_absent = nv_why_absent,
};

int nvidia_sampler_new(struct nvml_lib *lib, const struct nvml_inventory *inv,
                       struct dev_sampler **out, struct diag *diag)
{
        nvmlReturn_t r = lib->init(); /* NVML counts: paired with nv_free's shutdown */
        if (r != NVML_SUCCESS)
                return diag_set(diag, -EIO, "nvmlInit failed: %s", nvml_lib_strerror(lib, r));
        struct nvidia_sampler *s = xcalloc(1, sizeof(*s));
        dev_sampler_init(&s->base, &nv_sampler_ops);
        s->lib = nvml_lib_ref(lib);
        snprintf(s->driver, sizeof(s->driver), "%s", inv->driver_version);
        s->gpus = xcalloc(inv->n_gpus + 1, sizeof(*s->gpus));
        s->last_xid = xcalloc(inv->n_gpus + 1, sizeof(*s->last_xid));
        s->xids = xcalloc(inv->n_gpus + 1, sizeof(*s->xids));
        if (!lib->nvml_version || lib->nvml_version(s->nvml_version, sizeof(s->nvml_version)) != NVML_SUCCESS)
                s->nvml_version[0] = '\0';
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *ig = &inv->gpus[i];
                struct nv_gpu *g = &s->gpus[s->n_gpus++];
                memset(g, 0, sizeof(*g));
                g->index = ig->index;
                g->handle = ig->lost ? NULL : ig->handle;
                g->minor = ig->minor;
                g->gpm = ig->gpm;
                snprintf(g->uuid, sizeof(g->uuid), "%s", ig->uuid);
                snprintf(g->name, sizeof(g->name), "%s", ig->name);
                g->brand = ig->brand;
                if (!g->handle || !lib->serial || lib->serial(g->handle, g->serial, sizeof(g->serial)) != NVML_SUCCESS)
                        g->serial[0] = '\0';
                if (!g->handle || !lib->vbios || lib->vbios(g->handle, g->vbios, sizeof(g->vbios)) != NVML_SUCCESS)
                        g->vbios[0] = '\0';
                nvmlPciInfo_t pci;
                if (g->handle && nvml_lib_pci_info(lib, g->handle, &pci) == NVML_SUCCESS)
                        snprintf(g->bus_id, sizeof(g->bus_id), "%s", pci.busId);
                if (!g->handle || !g->uuid[0])
                        s->n_gpus--; /* lost at start: never measured */
        }
        pthread_mutex_init(&s->mu, NULL);
        /* the first GPM sample of every target now, so that the first
         * collection already has an interval */
        s->gpm = nvidia_gpm_new(lib);
        for (size_t i = 0; i < s->n_gpus; i++) {
                const struct nvml_gpu *ig = &inv->gpus[s->gpus[i].index];
                double v[GPM_COUNT];
                bool has[GPM_COUNT];
                if (!s->gpus[i].gpm)
                        continue;
                if (!ig->mig_enabled)
                        nvidia_gpm_measure(s->gpm, s->gpus[i].handle, s->gpus[i].index, -1, v, has);
                for (size_t k = 0; k < ig->n_migs; k++)
                        nvidia_gpm_measure(s->gpm, s->gpus[i].handle, s->gpus[i].index, (int)ig->migs[k].gi,
                                           v, has);
        }
        s->proc_buf = xcalloc(MAX_PROCS, sizeof(*s->proc_buf));
        s->util_buf = xcalloc(MAX_PROCS, sizeof(*s->util_buf));
        *out = &s->base;
        return 0;
}

void nvidia_sampler_note_xid(struct dev_sampler *ds, size_t gpu, unsigned long long xid)
{
        struct nvidia_sampler *s = (struct nvidia_sampler *)ds;
        if (!s)
                return;
        pthread_mutex_lock(&s->mu);
        unsigned long long now = now_us() / 1000ULL;
        for (size_t i = 0; i < s->n_gpus; i++)
                if (s->gpus[i].index == gpu) {
                        s->last_xid[i] = xid;
                        struct xid_window *w = &s->xids[i];
                        w->v[w->next] = (struct xid_seen){ now, xid };
                        w->next = (w->next + 1) % XID_RING;
                        if (w->n < XID_RING)
                                w->n++;
                }
        pthread_mutex_unlock(&s->mu);
}
