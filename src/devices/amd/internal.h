/* Internal to devices/amd/: how the inventory becomes dev_resources
 * (resources.c), what they do when the kubelet asks (allocate.c), the
 * health poll (health.c), labels (labels.c), measurements (sample.c) and
 * `devlet list` (describe.c), around the backend (amd.c).
 *
 * Every advertised ID is a struct amd_dev (dev_device.priv): one unit (a
 * whole GPU or one partition), maybe one replica of it.  Units are numbered
 * over the node: GPU 0's partitions first, then GPU 1's, ... */
#ifndef DEVLET_DEVICES_AMD_INTERNAL_H
#define DEVLET_DEVICES_AMD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/alloc.h"
#include "config/config.h"
#include "devices/amd/gpu-metrics.h"
#include "devices/amd/inventory.h"
#include "devices/device.h"

#define AMD_DOMAIN "amd.com"
#define AMD_GPU_RESOURCE "amd.com/gpu"
/* AMD's error for mixed partition styles under the single strategy. */
#define AMD_MIXED_UNDER_SINGLE                                                              \
        "Partitions of different styles across GPUs in a node is not supported with single " \
        "strategy. Please start device plugin with mixed strategy"

/* AMD's device plugin flags (options.c): a backend option set, listed by
 * the backend table, whose values every config holds. */
/* The node labeller's label groups, each selected by one of its flags
 * (-vram, -cu-count, ...); none selected: every group (devlet's default). */
#define AMD_LABEL_GROUPS(X)                                                        \
        X(family) X(device_id) X(product_name) X(vram) X(simd_count) X(cu_count)   \
        X(driver_version) X(driver_src_version) X(compute_memory_partition)        \
        X(compute_partitioning_supported) X(memory_partitioning_supported) X(firmware)

struct amd_options {
        char *resource_naming_strategy; /* single|mixed */
        int64_t health_interval_ms;     /* --amd-health-interval (AMD's --pulse); 0 = no polling */
        char **health_disabled;         /* --amd-disable-healthchecks: gone, kfd, ras, ... all */
        char **dra_no_execute;          /* --amd-dra-no-execute: the same kinds */
        long device_count;              /* AMD_GPU_DEVICE_COUNT: serve the first N GPUs; 0 all */
#define AMD_LABEL_FIELD(g) bool label_##g;
        AMD_LABEL_GROUPS(AMD_LABEL_FIELD)
#undef AMD_LABEL_FIELD
        char *metrics_config;        /* AMD's exporter config.json; "" none */
        char **metrics_config_text;  /* its content as loaded (one string), NULL: not there */
};
/* Whether the label key (amd.com/gpu.<group>..., beta.amd.com/gpu.<group>...)
 * belongs to a group o selects; keys outside the groups (amd.com/gpu.count,
 * "<resource>.count") always do. */
bool amd_label_selected(const struct amd_options *o, const char *key);
extern const struct config_option_set amd_config_options;
/* cfg's AMD options (never NULL for a config from config/). */
const struct amd_options *amd_options_get(const struct devlet_config *cfg);

/* Settings Allocate and GetPreferredAllocation use, copied from the config. */
struct amd_ctx {
        const struct amd_inventory *inv;
        char *dev_root; /* "" for "/" */
        bool cdi_cri, cdi_annotations, pass_device_specs;
        char *cdi_annotation_prefix;
        bool fail_requests_greater_than_one;
        enum alloc_replica_policy replica_policy;
        struct alloc_topology *topo; /* between GPUs */
};

struct amd_dev {
        size_t gpu;   /* index into inv->gpus */
        size_t part;  /* index into gpus[gpu].parts */
        size_t unit;  /* node-wide unit number */
        int replica;  /* -1: not replicated */
};

/* dev_resource.backend_data */
struct amd_res {
        const struct amd_ctx *ctx;
        bool has_replicas;
        bool partitions; /* holds partitions of GPUs split in more than one */
};

struct amd_layout {
        struct dev_resource **res;
        size_t n_res;
};

/* Builds the resources for the naming strategy ("single"/"mixed") and the
 * sharing config.  Returns 0, or -EINVAL with diag: AMD's error for mixed
 * partition styles under single, a sharing selection naming no device. */
int amd_layout_build(const struct amd_inventory *inv, const struct devlet_config *cfg,
                     const struct amd_ctx *ctx, struct amd_layout *out, struct diag *diag);
void amd_layout_release(struct amd_layout *l);

/* The topology score between two GPUs: an XGMI link dominates (as an NVLink
 * does), then whether they share a NUMA node. */
struct alloc_topology *amd_topology_build(const struct amd_inventory *inv);

extern const struct dev_resource_ops amd_resource_ops;

/* What gpu.amd.com publishes for partition part of GPU gpu (model.c); NULL
 * when sysfs names no card or render node for it. */
struct dev_model *amd_model(const struct amd_inventory *inv, size_t gpu, size_t part);

/* ---- health (health.c) ---- */

/* What one poll saw of a GPU, compared with the previous poll. */
struct amd_gpu_watch {
        bool bad;
        unsigned kind;     /* the failure's AMD_HEALTH_* bit, 0 when healthy */
        int64_t bad_since; /* s since the epoch it turned bad (its DRA taint's timeAdded) */
        char *reason;      /* heap, NULL when healthy */
        uint64_t ue_total; /* uncorrectable RAS errors, summed over blocks */
        bool ue_known;
        int64_t since;     /* ms (monotonic) of its last failure */
        bool rescan_sees;  /* the failure is one a fresh scan sees again (a device or
                            * node gone, a start-up problem): a rebuild or reload
                            * judges it afresh instead of carrying it over */
};

/* Kinds of failure a poll can find; AMD_DISABLE_HEALTHCHECKS names those
 * to ignore ("gone", "kfd", "ras", "unresponsive", or "all"). */
enum {
        AMD_HEALTH_GONE = 1u << 0,         /* the PCI device or a render node vanished */
        AMD_HEALTH_KFD = 1u << 1,          /* a KFD topology node vanished */
        AMD_HEALTH_RAS = 1u << 2,          /* uncorrectable RAS errors rose */
        AMD_HEALTH_UNRESPONSIVE = 1u << 3, /* sysfs reads refused: in reset or wedged */
        AMD_HEALTH_ALL = 0xfu,
};

struct amd_health_policy {
        bool recovery;    /* health.recovery.enabled */
        int64_t quiet_ms; /* health.recovery.quietPeriod */
        unsigned ignore;  /* AMD_HEALTH_* kinds not judged */
        unsigned no_execute; /* AMD_HEALTH_* kinds whose DRA taint is NoExecute */
};

/* How many of inv's GPUs are served (--amd-device-count: the first N in
 * PCI order; the rest are left to workloads outside Kubernetes). */
size_t amd_served_gpus(const struct amd_inventory *inv, const struct devlet_config *cfg);

/* The AMD_HEALTH_* bits of --amd-disable-healthchecks' (or
 * --amd-dra-no-execute's) kinds (a strv the option's choices checked;
 * NULL: none). */
unsigned amd_health_ignore_mask(const char *const *kinds);
/* The name of one AMD_HEALTH_* kind ("gone", "kfd", "ras", "unresponsive";
 * "unhealthy" for none). */
const char *amd_health_kind_name(unsigned kind);

/* What one look at a GPU's sysfs found: the reads, apart from judging. */
struct amd_health_obs {
        char *why;         /* heap: a problem found at start-up, the GPU or one of its
                            * render or KFD nodes gone; NULL when none */
        unsigned kind;     /* why's AMD_HEALTH_* kind */
        bool ue_known;     /* its RAS counts were read (why NULL only) */
        uint64_t ue_total; /* uncorrectable RAS errors, summed over blocks */
        int busy_err;      /* errno reading gpu_busy_percent (not ENOENT); 0 read */
        bool rescan_sees;  /* why is a fact of the tree a fresh scan sees again */
};

/* Reads gpu's sysfs: the PCI device and its DRM nodes present, the KFD
 * nodes of its partitions present (when KFD is), its RAS counts, whether
 * it answers (gpu_busy_percent readable: amdgpu refuses sysfs reads during
 * a reset).  Kinds in ignore are not read.  Any thread; may block as long
 * as a sysfs read does (health-thread.c runs it off the loop). */
void amd_health_observe(const struct amd_inventory *inv, size_t gpu, unsigned ignore,
                        struct amd_health_obs *out);
/* Judges obs (taking its why) into w at now_ms (the caller's clock): a
 * failure, uncorrectable RAS counts that rose, a GPU not answering (unless
 * ignored) make it bad with a reason and the time; with recovery, a bad
 * GPU comes back after quiet_ms without a new failure; without, bad is
 * sticky.  Returns whether bad changed. */
bool amd_health_apply(struct amd_gpu_watch *w, struct amd_health_obs *obs,
                      const struct amd_health_policy *p, int64_t now_ms);
/* Observes and judges every GPU once (one-shot commands and tests);
 * returns how many changed state. */
size_t amd_health_poll(const struct amd_inventory *inv, struct amd_gpu_watch *w,
                       const struct amd_health_policy *p, int64_t now_ms);
/* First poll: records RAS baselines without judging them. */
void amd_health_baseline(const struct amd_inventory *inv, struct amd_gpu_watch *w);

/* ---- off-loop health reads (health-thread.c) ---- */

/* A read of a GPU's sysfs that takes this long has stalled (a GPU in
 * reset can block reads for tens of seconds): the GPU is judged failing
 * at the first poll past it, and at every poll while it lasts. */
#define AMD_HEALTH_STALL_MS 2000

struct amd_health_threads;

/* One finished observation, handed to the loop. */
typedef void (*amd_health_result_fn)(void *ud, size_t gpu, struct amd_health_obs *obs);

/* Starts one thread per GPU of inv (holding a reference to it) that
 * observes its GPU whenever kicked; results reach on_result on the loop
 * (through one mutex-protected slot per GPU and a uv_async).  Returns NULL
 * when a thread cannot be started (the caller polls on the loop then). */
struct amd_health_threads *amd_health_threads_start(uv_loop_t *loop, struct amd_inventory *inv,
                                                    unsigned ignore,
                                                    amd_health_result_fn on_result, void *ud);
/* On the loop: asks every GPU whose previous read has finished for a new
 * one; sets stalled[i] (n_gpus entries) for each GPU whose read began at
 * least AMD_HEALTH_STALL_MS before now_ms and has not finished. */
void amd_health_threads_kick(struct amd_health_threads *t, int64_t now_ms, bool *stalled);
/* On the loop; never waits: the threads end when their current read
 * does (one stuck in the kernel ends with the process), and no result
 * reaches on_result after this.  NULL is fine. */
void amd_health_threads_stop(struct amd_health_threads *t);

/* ---- hot-plug and the kernel's uevents (watch.c) ---- */

struct amd_backend;
struct amd_watch;

/* What a rebuild would change, cheaply: amdgpu's PCI devices and their
 * partition modes, KFD's topology generation, as text (heap).  Any
 * thread; may block as long as a sysfs read does. */
char *amd_fingerprint_read(const char *sysfs_root);
/* Watches kernel uevents (when the socket opens) and checks the
 * fingerprint every rescan_ms (<= 0: never) against fingerprint (taken;
 * NULL: read now), which the caller read before its inventory; a change
 * asks for a rebuild, a WEDGED uevent fails its GPU (amd_gpu_fail).  On
 * the loop. */
struct amd_watch *amd_watch_start(uv_loop_t *loop, struct amd_backend *b, const char *sysfs_root,
                                  char *fingerprint, int64_t rescan_ms);
/* No call into the backend after this; handles close on the loop.  NULL
 * is fine. */
void amd_watch_stop(struct amd_watch *w);
/* A failure of kind (AMD_HEALTH_*) found outside the poll, judged at once
 * as the poll's are (why taken): nothing when health is off or kind is
 * ignored. */
void amd_gpu_fail(struct amd_backend *b, size_t gpu, unsigned kind, char *why);

/* ---- labels (labels.c) ---- */

/* AMD's node labeller's labels for the inventory, as key/value pairs
 * (dev_kv, heap), sorted by key.  Every value is a valid label value. */
struct dev_kv *amd_labels(const struct amd_inventory *inv, size_t *n);
void amd_labels_free(struct dev_kv *kv, size_t n);
/* The family AMD's labeller derives from libdrm ("AI", "NV", "GC_11_0_0"...)
 * from KFD's gfx_target_version; NULL when unknown. */
const char *amd_family_of(unsigned gfx_target_version);

/* ---- measurements (sample.c) ---- */

/* The clocks amdgpu lists levels of (pp_dpm_<name>), as AMD's exporter
 * types them. */
enum amd_clock_kind {
        AMD_CLK_SYSTEM, /* pp_dpm_sclk: graphics */
        AMD_CLK_MEMORY, /* pp_dpm_mclk */
        AMD_CLK_FABRIC, /* pp_dpm_fclk */
        AMD_CLK_SOC,    /* pp_dpm_socclk */
        AMD_CLK_VIDEO,  /* pp_dpm_vclk */
        AMD_CLK_DATA,   /* pp_dpm_dclk */
        AMD_CLK_COUNT
};

struct amd_clock_levels {
        bool has;
        double cur, min, max; /* MHz */
};

/* One RAS block's counts (ras/<block>_err_count). */
#define AMD_RAS_BLOCKS_MAX 24
struct amd_ras_count {
        char block[16]; /* the file's block name: "umc", "pcie_bif" */
        uint64_t ue, ce, de;
        bool has_de;
};

/* One GPU's measurements from sysfs; has_* say which were readable. */
struct amd_sample {
        bool has_gfx, has_umc, has_vram, has_edge, has_junction, has_mem_temp;
        bool has_power, has_avg_power, has_energy, has_sclk, has_mclk, has_ecc, has_de;
        bool has_vis_vram, has_gtt, has_pcie_speed, has_pcie_max_speed, has_pcie_replay;
        double gfx_activity;     /* percent */
        double umc_activity;     /* percent */
        double vram_used_mb, vram_total_mb, vram_free_mb;
        double vis_used_mb, vis_total_mb, gtt_used_mb, gtt_total_mb;
        double edge_c, junction_c, mem_c;
        double power_w;          /* package power */
        double avg_power_w;      /* hwmon power1_average */
        double energy_uj;        /* accumulated */
        double sclk_mhz, mclk_mhz;
        double pcie_speed_gts, pcie_max_speed_gts;
        uint64_t pcie_replay;    /* amdgpu's pcie_replay_count */
        struct amd_clock_levels clk[AMD_CLK_COUNT];
        uint64_t ecc_correct, ecc_uncorrect, ecc_deferred;
        struct amd_ras_count ras[AMD_RAS_BLOCKS_MAX];
        size_t n_ras;
        bool gm_ok;              /* gpu_metrics parsed (gm is all absent otherwise) */
        int gm_err;              /* its read or parse error, 0 when read */
        struct amd_gpu_metrics gm;
        bool healthy;
};


void amd_sample_gpu(const struct amd_gpu *g, struct amd_sample *out);

/* One KFD process's VRAM on one GPU (proc/<pid>/vram_<gpu_id>). */
struct amd_proc_vram {
        int pid;
        unsigned gpu_id;
        uint64_t bytes;
};
/* Lists <sysfs>/class/kfd/kfd/proc/<pid>/vram_<gpu_id>.  Returns the count
 * and *out (heap), at most max entries. */
size_t amd_proc_vram(const char *sysfs_root, size_t max, struct amd_proc_vram **out);

/* ---- metrics (metrics.c) ---- */

struct dev_sampler;
struct dev_attr_hints;

/* AMD's exporter families over sysfs and gpu_metrics: one unit per GPU,
 * or per partition of a partitioned GPU; holds a reference to inv.  Any
 * thread may sample it. */
struct dev_sampler *amd_sampler_new(struct amd_inventory *inv, const struct amd_options *o);
/* Whether the sampler has a family for AMD's field name (GPU_GFX_ACTIVITY:
 * its family's name in upper case). */
bool amd_metrics_field_known(const char *field);
/* The loop's health verdict for gpu, for gpu_health.  NULL s is fine. */
void amd_sampler_note_health(struct dev_sampler *s, size_t gpu, bool bad);
extern const struct dev_attr_hints amd_attr_hints;

/* ---- the backend (amd.c), as describe.c reads it ---- */

struct amd_backend {
        uv_loop_t *loop;
        struct amd_inventory *inv;
        struct amd_ctx ctx;
        struct amd_layout layout;
        char *strategy;
        struct amd_gpu_watch *watch; /* per GPU */
        struct amd_health_policy policy;
        int64_t poll_ms;
        uv_timer_t timer;
        bool timer_on;
        struct amd_health_threads *threads; /* the sysfs reads, off the loop */
        struct amd_watch *hotplug;          /* uevents and the rescan (watch.c) */
        struct dev_sampler *sampler;
};

void amd_describe(struct dev_backend *b, FILE *f);
struct json_t *amd_describe_json(struct dev_backend *b);
/* "XGMI", "PCIE", "X" or "-" for a pair of GPUs. */
const char *amd_link_name(const struct amd_inventory *inv, size_t a, size_t b);

#endif
