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
#include "devices/nvidia/inventory.h"

/* CDI names of allocated GPUs: "k8s.device-plugin.nvidia.com/gpu=<id>". */
#define NVIDIA_CDI_VENDOR "k8s.device-plugin.nvidia.com"
/* The volume-mounts strategy's directory of empty files named after IDs. */
#define NVIDIA_DEVICE_LIST_ROOT "/var/run/nvidia-container-devices"

/* Settings Allocate and GetPreferredAllocation use, copied from the config
 * at create.  Owned by the backend; resources point at it. */
struct nvidia_ctx {
        const struct nvml_inventory *inv;
        char *dev_root; /* "" for "/" */
        bool list_envvar, list_volume_mounts, list_cdi_annotations, list_cdi_cri;
        bool index_ids; /* --device-id-strategy=index */
        bool pass_device_specs;
        bool gds, mofed, gdrcopy;
        char *cdi_annotation_prefix;
        enum sharing_strategy sharing;
        bool fail_requests_greater_than_one;
        enum alloc_replica_policy replica_policy;
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
        bool whole_gpus_only; /* whole GPUs and nothing else: topology-aware choice */
};

/* The resources one configuration makes of one inventory. */
struct nvidia_layout {
        struct dev_resource **res;
        size_t n_res;
};

/* Builds the resources: MIG strategy, resource patterns, sharing.  Returns 0
 * and fills out, or -EINVAL with *err in NVIDIA's wording for layouts it
 * refuses (mixed MIG modes or profiles with mig-strategy=single, a
 * MIG-enabled GPU without MIG devices, a sharing selection that names no
 * device).  Devices of lost GPUs are unhealthy from the start. */
int nvidia_layout_build(const struct nvml_inventory *inv, const struct devlet_config *cfg,
                        const struct nvidia_ctx *ctx, struct nvidia_layout *out, char **err);
/* Frees the resources with their nvidia_dev and nvidia_res. */
void nvidia_layout_release(struct nvidia_layout *l);

/* NVIDIA's resource pattern match: '*' matches any run of characters and
 * the pattern may match anywhere in s (NVIDIA's regular expression is not
 * anchored: "A100" matches "NVIDIA A100-SXM4-80GB"). */
bool nvidia_pattern_match(const char *pattern, const char *s);

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
};

void nvidia_describe(struct dev_backend *b, FILE *f);
struct json_t *nvidia_describe_json(struct dev_backend *b);

#endif
