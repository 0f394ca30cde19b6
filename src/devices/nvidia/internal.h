/* Internal to devices/nvidia/: how the inventory becomes dev_resources
 * (resources.c) and what those resources do when the kubelet asks
 * (allocate.c).
 *
 * Every advertised ID is a struct nvidia_dev (dev_device.priv): a whole GPU
 * or a MIG device, maybe one replica of it.  IDs are what NVIDIA's plugin
 * advertises: the UUID ("GPU-...", "MIG-..."), with "::<n>" for replicas,
 * whatever --device-id-strategy says; the strategy decides what the
 * container runtime is told (runtime_id). */
#ifndef DEVLET_DEVICES_NVIDIA_INTERNAL_H
#define DEVLET_DEVICES_NVIDIA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/alloc.h"
#include "config/config.h"
#include "devices/device.h"
#include "devices/nvidia/health.h"
#include "devices/nvidia/inventory.h"

/* CDI names of allocated GPUs: "k8s.device-plugin.nvidia.com/gpu=<id>". */
#define NVIDIA_CDI_VENDOR "k8s.device-plugin.nvidia.com"
/* IMEX channel 0's node, under the dev root. */
#define NVIDIA_IMEX_CHANNEL0 "/dev/nvidia-caps-imex-channels/channel0"
/* The volume-mounts strategy's directory of empty files named after IDs. */
#define NVIDIA_DEVICE_LIST_ROOT "/var/run/nvidia-container-devices"

/* NVIDIA v0.20's newer flags and GFD's Kubernetes-client flags
 * (options.c): a backend option set, listed by the backend table, whose
 * values every config holds; its finish hook fills the derived members. */
struct nvidia_options {
        char *mig_strategy;              /* none|single|mixed */
        char *driver_root;               /* --nvidia-driver-root / --driver-root */
        char *device_id_strategy;        /* uuid|index */
        bool gds_enabled;
        bool mofed_enabled;
        bool gdrcopy_enabled;
        char *cdi_hook_path;             /* --nvidia-cdi-hook-path */
        char *container_driver_root;     /* --driver-root-ctr-path */
        char *mps_root;                  /* --mps-root, default /run/nvidia/mps */
        char *device_discovery_strategy; /* auto|nvml (tegra and vfio are refused) */
        char **imex_channel_ids;         /* --imex-channel-ids: empty or ["0"] */
        char **dra_no_execute;           /* --nvidia-dra-no-execute: XIDs, gpu-lost, all */
        bool imex_required;              /* --imex-required */
        char **cdi_feature_flags;        /* --cdi-feature-flags (may be empty) */
        char **cdi_disable_hooks;        /* --cdi-disable-hooks: hook names (may be empty) */
        /* derived by the finish hook, not options */
        bool imex_channel0;    /* IMEX channel 0 requested */
        bool cdi_hook_ldcache; /* the update-ldcache hook is not disabled */
};
extern const struct config_option_set nvidia_config_options;

/* The family's own section of the config file, `resources` (patterns.c):
 * resource naming by pattern. */
struct resource_pattern_cfg {
        char *pattern; /* glob ('*' wildcards): a GPU's product name or a MIG profile name */
        char *name;    /* full: "nvidia.com/<name>" */
};
struct resources_cfg {
        struct resource_pattern_cfg *gpu_resources; /* resources.gpus, in file order */
        size_t n_gpu_resources;
        struct resource_pattern_cfg *mig_resources; /* resources.mig, in file order */
        size_t n_mig_resources; /* no name is both a GPU and a MIG resource */
};
extern const struct config_section nvidia_resources_section;
/* cfg's resources section (never NULL: empty when the file has none). */
const struct resources_cfg *nvidia_resources_get(const struct devlet_config *cfg);
/* cfg's NVIDIA options (never NULL for a config from config/). */
const struct nvidia_options *nvidia_options_get(const struct devlet_config *cfg);
/* Where NVIDIA's /dev is: --dev-root, or when it is not given the driver
 * root (NVIDIA's default; other families use / then). */
const char *nvidia_dev_root(const struct devlet_config *cfg);

/* Settings Allocate and GetPreferredAllocation use, copied from the config
 * at create.  Owned by the backend; resources point at it. */
struct nvidia_ctx {
        const struct nvml_inventory *inv;
        char *dev_root; /* "" for "/" */
        bool list_envvar, list_volume_mounts, list_cdi_annotations, list_cdi_cri;
        bool index_ids; /* --device-id-strategy=index */
        bool pass_device_specs;
        bool gds, mofed, gdrcopy;
        bool imex_channel0; /* --imex-channel-ids 0, and its node exists */
        char *cdi_annotation_prefix;
        enum sharing_strategy sharing;
        bool fail_requests_greater_than_one;
        enum alloc_replica_policy replica_policy;
        char *mps_root; /* --mps-root, the host's */
        char **no_execute; /* --nvidia-dra-no-execute */
        char **program_roots; /* --driver-root-ctr-path, --nvidia-driver-root: where
                               * the MPS control program is looked for */
};

/* One advertised ID. */
struct nvidia_dev {
        size_t gpu;       /* index into inv->gpus */
        int mig;          /* index into inv->gpus[gpu].migs; -1: the whole GPU */
        int replica;      /* -1: not replicated */
        size_t unit;      /* the physical device: gpu, or n_gpus + the MIG device's ordinal */
        char *runtime_id; /* what the runtime is told: UUID, or "<i>" / "<i>:<j>" */
};

/* dev_resource.backend_data */
struct nvidia_res {
        const struct nvidia_ctx *ctx;
        bool has_replicas;
        bool mps;           /* shared by MPS: served only while its daemon is ready */
        bool mps_ready;
        unsigned replicas;  /* the sharing entry's replicas (0: not shared) */
        bool whole_gpus_only; /* whole GPUs and nothing else: topology-aware choice */
};

/* gpu.nvidia.com's opaque claim configurations (claim-config.c). */
extern const struct dev_claim_config_ops nvidia_claim_config_ops;
/* A Kubernetes quantity ("10Gi", "1.5G", "1e9") in bytes, rounded up;
 * false for what is not one, is negative, or passes 2^62. */
bool nvidia_quantity_bytes(const char *s, unsigned long long *out);

/* The resources one configuration makes of one inventory. */
struct nvidia_layout {
        struct dev_resource **res;
        size_t n_res;
};

/* Builds the resources: MIG strategy, resource patterns, sharing.  Returns 0
 * and fills out; -EINVAL with diag in NVIDIA's wording for a sharing
 * selection that names no device; -ENOTSUP with diag (NVIDIA's wording) for
 * a MIG layout that cannot be served (a MIG-enabled GPU without MIG
 * devices, or with strategy single mixed MIG modes or profiles).  Devices
 * of lost GPUs are unhealthy from the start. */
int nvidia_layout_build(const struct nvml_inventory *inv, const struct devlet_config *cfg,
                        const struct nvidia_ctx *ctx, struct nvidia_layout *out, struct diag *diag);
/* What NVIDIA's plugin v0.20 would build from the same inventory and file:
 * MIG devices named after the GPU-instance profile their profile name
 * contains (unanchored), resources/rename/devices ignored.  For compat.c's
 * warnings; never served. */
int nvidia_layout_build_as_nvidia(const struct nvml_inventory *inv,
                                  const struct devlet_config *cfg, const struct nvidia_ctx *ctx,
                                  struct nvidia_layout *out, struct diag *diag);
/* "nvidia.com/mig-<profile>" with '+' as '.': devlet's and GFD's name for
 * a MIG profile's resource (mig-1c.3g.40gb, mig-1g.10gb.me). */
char *nvidia_mig_resource_name(const char *profile);
/* Warnings, one per line, for every resource whose name or count differs
 * from what NVIDIA's plugin would serve (layout against
 * nvidia_layout_build_as_nvidia()), and every MIG device it would serve
 * under another name.  NULL when there is nothing to say. */
char **nvidia_compat_warnings(const struct nvml_inventory *inv, const struct devlet_config *cfg,
                              const struct nvidia_ctx *ctx, const struct nvidia_layout *layout);
/* Frees the resources with their nvidia_dev and nvidia_res. */
void nvidia_layout_release(struct nvidia_layout *l);

/* NVIDIA's resource pattern match: '*' matches any run of characters and
 * the pattern may match anywhere in s (NVIDIA's regular expression is not
 * anchored: "A100" matches "NVIDIA A100-SXM4-80GB"). */
bool nvidia_pattern_match(const char *pattern, const char *s);

/* What gpu.nvidia.com publishes for GPU gpu (mig < 0) or its MIG device
 * mig (model.c); NULL for a GPU NVML lost or whose minor it does not tell. */
struct dev_model *nvidia_model(const struct nvml_inventory *inv, size_t gpu, int mig);

/* Allocate and GetPreferredAllocation for every NVIDIA resource. */
extern const struct dev_resource_ops nvidia_resource_ops;

/* Fills a random RFC 4122 version 4 UUID (36 characters and a NUL). */
void nvidia_random_uuid(char out[37]);

/* ---- the backend (nvidia.c), as describe.c reads it ---- */

struct nvidia_health;
struct nvidia_xid_policy;
struct nvml_lib;

struct nvidia_xid_count {
        unsigned long long xid;
        uint64_t count;
};

/* XID events of one GPU and code, for metrics. */
struct nvidia_gpu_xid {
        size_t gpu; /* index into inv->gpus */
        unsigned long long xid;
        uint64_t count;
        uint64_t seq; /* of its latest event */
};

/* The loop's view of one GPU's health. */
struct nvidia_gpu_health {
        bool bad;
        char *reason; /* why it is unhealthy (NULL when healthy) */
        /* what a reload carries over to the next scan (nvidia_inherit) */
        bool seen_failing; /* the monitor saw it fail (not: could not watch it) */
        bool lasting;      /* lost, or waits failed: failing until seen answering, so
                            * its last failure may be as late as now */
        int64_t since;     /* its last failure reported (nvidia_health_now_ms) */
        /* DRA's taint: the kind of the failure that made it unhealthy and,
         * for an XID, its number; when (Unix seconds) */
        enum nvidia_health_kind kind;
        unsigned long long xid;
        int64_t bad_since;
};

struct nvidia_backend {
        uv_loop_t *loop;
        struct nvml_lib *lib;
        bool nvml_up; /* nvmlInit succeeded: one nvmlShutdown owed */
        struct nvml_inventory *inv;
        struct nvidia_ctx ctx;
        struct nvidia_layout layout;
        char *mig_strategy;
        struct nvidia_xid_policy *policy;
        struct nvidia_health *health;
        char *health_state; /* "XIDs ignored: 13,...", "disabled", "failed: ..." */
        struct nvidia_gpu_health *gpu_health; /* per GPU */
        struct nvidia_xid_count *xids; /* XID events seen, by code */
        size_t n_xids;
        struct nvidia_gpu_xid *gpu_xids; /* the same by GPU and code */
        size_t n_gpu_xids;
        uint64_t xid_seq;
        struct dev_sampler *sampler; /* for metrics (sample.c); NULL when NVML refused */
        uv_timer_t *mps_timer; /* heap, closed asynchronously; NULL without MPS or loop */
};

/* Reads every MPS resource's readiness (mps.c); true when one changed.  The
 * caller then brings the devices in line (health_sync). */
bool nvidia_mps_refresh(struct nvidia_backend *b);

void nvidia_describe(struct dev_backend *b, FILE *f);
struct json_t *nvidia_describe_json(struct dev_backend *b);

#endif
