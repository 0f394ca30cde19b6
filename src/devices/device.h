/* The device model every backend fills and every consumer reads.
 *
 * A backend (devices/<family>/) owns a fixed set of resources for its whole
 * life; each resource owns its devices.  Backends run on the loop thread and
 * mutate their resources only there, then call dev_resource_notify() so the
 * observer (the resource's plugin server) sends a fresh snapshot.  Consumers
 * (kubelet/, metrics/, labels/, cdi/, the daemon) never include backend
 * headers: what a family adds to labels, CDI specs and metrics reaches them
 * through the optional members of struct dev_backend_ops, in the neutral
 * types declared here and in devices/cdi-spec.h. */
#ifndef DEVLET_DEVICES_DEVICE_H
#define DEVLET_DEVICES_DEVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "base/diag.h"
#include "config/config.h"
#include "devices/measure.h"

enum dev_health { DEV_HEALTHY = 0, DEV_UNHEALTHY = 1 };

struct dev_node {
        char *host_path;
        char *container_path;
        char permissions[4];
};

struct dev_mount {
        char *host_path;
        char *container_path;
        bool read_only;
};

struct dev_kv {
        char *key;
        char *value;
};

/* What Allocate answers for one container. */
struct dev_alloc {
        struct dev_kv *envs;
        size_t n_envs, cap_envs;
        struct dev_mount *mounts;
        size_t n_mounts, cap_mounts;
        struct dev_node *nodes;
        size_t n_nodes, cap_nodes;
        struct dev_kv *annotations;
        size_t n_annotations, cap_annotations;
        char **cdi_devices; /* strv */
};

/* Adders copy their arguments and drop duplicates (same container path, or
 * same key: the last value wins for env and annotations). */
void dev_alloc_add_node(struct dev_alloc *a, const char *host, const char *ctr, const char *perms);
void dev_alloc_add_mount(struct dev_alloc *a, const char *host, const char *ctr, bool ro);
void dev_alloc_set_env(struct dev_alloc *a, const char *key, const char *value);
void dev_alloc_set_annotation(struct dev_alloc *a, const char *key, const char *value);
void dev_alloc_add_cdi(struct dev_alloc *a, const char *name);
void dev_alloc_release(struct dev_alloc *a);

/* ---- the device model: each device described once, with typed attributes
 * and capacities (DRA's model), read by DRA's ResourceSlices and by
 * whatever else describes devices ---- */

enum dev_attr_type { DEV_ATTR_STRING, DEV_ATTR_INT, DEV_ATTR_BOOL, DEV_ATTR_VERSION };

struct dev_attr {
        char *name; /* "productName", or qualified: "resource.kubernetes.io/pcieRoot" */
        enum dev_attr_type type;
        char *s;   /* DEV_ATTR_STRING, DEV_ATTR_VERSION (semantic version "12.8.0") */
        int64_t i; /* DEV_ATTR_INT */
        bool b;    /* DEV_ATTR_BOOL */
};

struct dev_quantity {
        char *name;  /* "memory" */
        char *value; /* a Kubernetes quantity: "81559Mi", "14" */
};

/* One device as its family's DRA driver publishes it. */
struct dev_model {
        char *name; /* a DNS label unique within the family's driver on this node:
                     * "gpu-0", "gpu-0-mig-1g10gb-19-0", "fuse-0" */
        struct dev_attr *attrs;
        size_t n_attrs, cap_attrs;
        struct dev_quantity *capacity;
        size_t n_capacity, cap_capacity;
};

struct dev_model *dev_model_new(const char *name);
void dev_model_free(struct dev_model *m);
struct dev_model *dev_model_copy(const struct dev_model *m);
/* Kubernetes' standard attributes (k8s.io/dynamic-resource-allocation's
 * deviceattribute), which every driver may publish under these names. */
#define DEV_ATTR_PCI_BUS_ID "resource.kubernetes.io/pciBusID" /* "0000:3b:00.0" */
#define DEV_ATTR_PCIE_ROOT "resource.kubernetes.io/pcieRoot"  /* "pci0000:3a" */
#define DEV_ATTR_NUMA_NODE "resource.kubernetes.io/numaNode"  /* int, sysfs numa_node */
/* DRA's longest string or version value: longer ones are not set. */
#define DEV_MODEL_VALUE_MAX 64

/* Setters copy their arguments; setting a name again replaces it.  NULL,
 * empty and over-long (DEV_MODEL_VALUE_MAX) string values are not set. */
void dev_model_string(struct dev_model *m, const char *name, const char *value);
void dev_model_version(struct dev_model *m, const char *name, const char *semver);
/* A version attribute from a looser text, normalised as the vendors'
 * drivers do theirs: the first three dot-separated numbers (an optional
 * leading 'v'), leading zeros dropped ("580.65.06" -> "580.65.6"), missing
 * ones as 0 ("12.8" -> "12.8.0"), a fourth and whatever follows the numbers
 * dropped ("6.19.14.31400000" -> "6.19.14").  Text that does not start
 * with a number sets nothing. */
void dev_model_version_loose(struct dev_model *m, const char *name, const char *text);
void dev_model_int(struct dev_model *m, const char *name, int64_t value);
void dev_model_bool(struct dev_model *m, const char *name, bool value);
void dev_model_capacity(struct dev_model *m, const char *name, const char *quantity);
/* A capacity from a count or a size in bytes, in the canonical form of a
 * Kubernetes quantity made with resource.BinarySI (what the vendors'
 * drivers publish): below 1024 or not a multiple of it plain ("16",
 * "1536"), else the largest exact power-of-1024 suffix ("81559Mi", "80Gi"). */
void dev_model_capacity_int(struct dev_model *m, const char *name, uint64_t value);
const struct dev_attr *dev_model_attr(const struct dev_model *m, const char *name);
/* Whether a and b publish the same name, attributes and capacities (in any
 * order).  Two NULLs are equal. */
bool dev_model_equal(const struct dev_model *a, const struct dev_model *b);
/* A DNS label from s: lowercase, [a-z0-9-], runs of others as one '-',
 * trimmed, at most 63 bytes.  Heap string ("" becomes "dev"). */
char *dev_model_label(const char *s);
/* The model as a resource.k8s.io/v1 ResourceSlice device (a new reference):
 * {"name": ..., "attributes": {"<name>": {"string"|"int"|"bool"|"version":
 * value}}, "capacity": {"<name>": {"value": "<quantity>"}}}. */
struct json_t *dev_model_json(const struct dev_model *m);

/* Why an unhealthy device is unhealthy, as DRA publishes it (a device
 * taint): the key and value its family chooses (label name and value;
 * key "": DRA's generic "<driver>/unhealthy"), and when it was first
 * seen unhealthy (Unix seconds; 0: now).  Meaningless while healthy. */
struct dev_taint {
        char key[64];
        char value[64];
        int64_t since;
        /* the pods holding the device are evicted (effect NoExecute), not
         * only new claims kept off it (NoSchedule); the family's option */
        bool no_execute;
};

struct dev_device {
        char *id;
        enum dev_health health;
        struct dev_taint taint;
        int numa_node; /* -1: the host does not tell */
        /* what a container holding this ID gets (generic allocate) */
        struct dev_node *nodes;
        size_t n_nodes;
        struct dev_mount *mounts;
        size_t n_mounts;
        /* the device as DRA publishes it (owned; NULL: not offered through
         * DRA).  Replicas of one unit carry copies with the same name: one
         * DRA device. */
        struct dev_model *model;
        void *priv; /* backend's */
};

struct dev_resource;

/* A DRA claim's opaque configuration (its `opaque.parameters`, for the
 * family's driver), for the devices of one resource it applies to. */
struct dev_claim_config {
        const char *claim_uid;
        /* where its author wrote it, for messages: "the claim's config[0]",
         * "the DeviceClass's config[1]" */
        const char *where;
        const struct json_t *parameters;
        char *const *ids; /* the resource's device IDs it applies to */
        size_t n;
        /* it names no request: a device of a kind it does not configure is
         * left alone rather than refused */
        bool all_requests;
        /* set when devlet stops: a configure that waits gives up */
        const atomic_bool *stop;
};

struct dev_claim_config_ops {
        /* On the loop thread: what configure needs of r, copied (heap; any
         * thread frees it with ctx_free). */
        void *(*ctx_new)(const struct dev_resource *r);
        void (*ctx_free)(void *ctx);
        /* On DRA's claims work (a worker thread; may block for seconds,
         * reads only ctx and c): checks c and applies it to its devices,
         * adding to out what the claim's containers need.  Returns 0, or
         * -EINVAL with diag naming the field (".sharing.strategy: ...") and
         * other -errno for what could not be done. */
        int (*configure)(const void *ctx, const struct dev_claim_config *c, struct dev_alloc *out,
                         struct diag *diag);
        /* Optional, on the same thread: the claim is unprepared; undoes what
         * configure left running for it (any config, any of its devices). */
        void (*unconfigure)(const void *ctx, const char *claim_uid);
};

struct dev_resource_ops {
        /* Optional: DRA claims' opaque configurations for the family's
         * driver; NULL: the driver takes none (a claim that has one is
         * refused). */
        const struct dev_claim_config_ops *claim_config;
        /* Fills out for one container holding ids.  On an unknown or unhealthy
         * ID returns -EINVAL with diag naming it.  NULL: the
         * generic merge of each device's nodes and mounts. */
        int (*allocate)(struct dev_resource *r, char *const *ids, size_t n, struct dev_alloc *out,
                        struct diag *diag);
        /* Chooses size IDs from available, including every must ID.  Returns
         * a strv in *out.  NULL: the generic choice (dev_preferred_generic). */
        int (*preferred)(struct dev_resource *r, char *const *available, size_t n_available,
                         char *const *must, size_t n_must, size_t size, char ***out);
};

struct dev_resource {
        char *name; /* "devlet.io/fuse", "nvidia.com/gpu" */
        struct dev_device *devices;
        size_t n_devices, cap_devices;
        bool preferred_allocation; /* advertise GetPreferredAllocation */
        const struct dev_resource_ops *ops;
        void *backend_data;

        /* the observer, set by whoever serves the resource */
        void (*on_change)(struct dev_resource *r, void *ud);
        void *on_change_ud;
        /* further observers (labels, CDI specs), after on_change; see
         * dev_resource_watch() */
        struct dev_watch *watches;
        size_t n_watches;
};

struct dev_watch {
        void (*fn)(struct dev_resource *r, void *ud);
        void *ud;
};

struct dev_resource *dev_resource_new(const char *name);
void dev_resource_free(struct dev_resource *r);
/* Appends a device (copies id; takes nothing else) and returns it. */
struct dev_device *dev_resource_add(struct dev_resource *r, const char *id);
struct dev_device *dev_resource_find(struct dev_resource *r, const char *id);
void dev_device_add_node(struct dev_device *d, const char *host, const char *ctr, const char *perms);
void dev_device_add_mount(struct dev_device *d, const char *host, const char *ctr, bool ro);
/* Adds an observer called after on_change on every notify; removed by
 * dev_resource_unwatch() with the same fn and ud (not from inside a
 * notify), or with the resource. */
void dev_resource_watch(struct dev_resource *r, void (*fn)(struct dev_resource *r, void *ud),
                        void *ud);
void dev_resource_unwatch(struct dev_resource *r, void (*fn)(struct dev_resource *r, void *ud),
                          void *ud);
/* Tells the observers that presence or health changed. */
void dev_resource_notify(struct dev_resource *r);
size_t dev_resource_healthy(const struct dev_resource *r);

/* Dispatchers used by the plugin server: the resource's ops or the generic
 * behaviour. */
int dev_allocate(struct dev_resource *r, char *const *ids, size_t n, struct dev_alloc *out,
                 struct diag *diag);
int dev_preferred(struct dev_resource *r, char *const *available, size_t n_available,
                  char *const *must, size_t n_must, size_t size, char ***out);
/* Generic preferred allocation: every must ID, then available IDs that share
 * a NUMA node with the must IDs, then the rest, skipping unknown and
 * unhealthy IDs. */
int dev_preferred_generic(struct dev_resource *r, char *const *available, size_t n_available,
                          char *const *must, size_t n_must, size_t size, char ***out);

/* ---- what a backend contributes to node labels, CDI specs and metrics ---- */

/* Node labels: key/value pairs in insertion order; putting a key again
 * replaces its value (the later rule wins). */
struct dev_labels {
        struct dev_kv *v;
        size_t n, cap;
};

void dev_labels_put(struct dev_labels *s, const char *key, const char *value);
void dev_labels_putf(struct dev_labels *s, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The value of key, or NULL. */
const char *dev_labels_get(const struct dev_labels *s, const char *key);
void dev_labels_release(struct dev_labels *s);

/* The CDI spec model and a list of specs: devices/cdi-spec.h. */
struct cdi_spec_list;

struct dev_cdi_opts {
        const struct devlet_config *cfg;
        /* false: the kinds the backend's Allocate names (what `devlet run`
         * writes); true: `devlet cdi generate`, the kinds the vendor's own
         * CDI tool gives, with vendor and klass (NULL: the vendor's)
         * replacing the parts of a GPU family's main kind. */
        bool standalone;
        const char *vendor, *klass;
};


/* ---- what backends report to the operator ---- */

enum dev_report_level {
        DEV_REPORT_ERROR,
        DEV_REPORT_WARN,
        DEV_REPORT_INFO,
        /* a warning about the host that stays true while devlet runs (a
         * missing file, the environment): the sink shows it once per
         * process, not at every reload */
        DEV_REPORT_HOST_WARN,
};

/* Backends log at debug level only.  What an operator must see (a GPU gone
 * unhealthy, a missing driver, a health monitor that cannot start) is
 * reported with dev_report() to the sink the program installed: main's
 * logs it at the level given, under the backend's name.  Without a sink a
 * report is logged at debug level.  Reports come from the loop thread (or
 * from create(), before any loop runs). */
typedef void dev_report_fn(enum dev_report_level level, const char *backend, const char *msg,
                           void *ud);
void dev_report_sink(dev_report_fn *fn, void *ud);
void dev_report(enum dev_report_level level, const char *backend, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* ---- asking for the devices to be rebuilt ---- */

/* A backend whose devices changed in a way its fixed resources cannot
 * follow (a GPU hot-plugged or removed, a partition mode switched) asks
 * whoever runs it to rebuild the device set from a fresh scan: every
 * backend created again from the running configuration, as a reload does
 * without re-reading it, each taking over what its predecessor knew
 * (inherit).  reason says what changed, for the log ("new AMD GPU
 * 0000:0c:00.0").  The handler the program installed (the daemon's)
 * decides when, and never rebuilds from inside this call: the rebuild
 * destroys the backend asking.  Without a handler (one-shot commands) the
 * request is logged at debug level and dropped.  Loop thread only. */
typedef void dev_rebuild_fn(const char *backend, const char *reason, void *ud);
/* Installs fn (NULL: none). */
void dev_rebuild_handler(dev_rebuild_fn *fn, void *ud);
void dev_request_rebuild(const char *backend, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* ---- sharing: which devices the sharing section replicates ---- */

/* A family's devices as the shared selection sees them: n units (GPUs,
 * MIG devices, partitions) in the family's order, each with the resource
 * it is served as before sharing, and the family's answer to "does this
 * selector name this unit". */
struct dev_share_units {
        size_t n;
        const char *(*resource)(size_t unit, const void *ud);
        /* ref: a devices-list entry in the canonical form of the family's
         * config_sharing_rules; nth: the unit's place among its resource's
         * units (what an index means to some families) */
        bool (*names)(const char *ref, size_t unit, size_t nth, const void *ud);
        /* how ref names a device ("at index", "with UUID"), for the error
         * when none matches */
        const char *(*ref_kind)(const char *ref);
        const void *ud;
};

/* For each unit k, the sharing entry of sc that replicates it (out[k],
 * room for u->n), or NULL: served as it is.  An entry selects all the
 * units of its resource, the first devices_count of them, or those its
 * devices list names; a resource without units has nothing to share.
 * Returns 0, or -EINVAL with diag (NVIDIA's wording) when a count
 * is more than the resource has or a listed device names none of its
 * units. */
int dev_share_assign(const struct sharing_cfg *sc, const struct dev_share_units *u,
                     const struct sharing_resource_cfg **out, struct diag *diag);

/* ---- sidecar daemons: what a shared resource needs running beside devlet ---- */

/* One control daemon a resource's sharing needs in a sidecar container
 * (`devlet mps-control-daemon`; NVIDIA's MPS is the one family that has
 * them): where it lives under its root (the backend's layout) and what it
 * is told once started.  The directories, marker and shm are below root,
 * where the supervisor follows no symlink. */
struct dev_sidecar_daemon {
        char *root;            /* the sidecars' host directory (NVIDIA: --mps-root) */
        char *resource;        /* "nvidia.com/gpu" */
        char *visible_devices; /* the resource's devices, by UUID (CUDA_VISIBLE_DEVICES) */
        unsigned thread_percentage;
        char **setup;          /* control commands once started (pinned memory, threads) */
        unsigned replicas;
        unsigned max_clients;  /* the most clients one server takes on these GPUs */
        char *pipe_dir, *log_dir; /* the daemon's pipe and log directories */
        char *marker;          /* the readiness marker the supervisor writes and touches */
        char *shm_dir;         /* mounted as a tmpfs for the clients' /dev/shm (daemons
                                * may share one) */
        char **program_roots;  /* roots whose bin directories hold the control program,
                                * searched in order before PATH (may be NULL) */
};
/* Frees what one daemon holds (not the daemon itself). */
void dev_sidecar_daemon_release(struct dev_sidecar_daemon *d);
void dev_sidecar_daemons_free(struct dev_sidecar_daemon *v, size_t n);

/* Where DRA claims ask the sidecar for daemons of their own (NVIDIA: MPS
 * per claim, claim-config.c), and the layout such a daemon gets. */
struct dev_sidecar_claims {
        char *root;          /* the sidecars' host directory; all below is below it */
        char *dir;           /* the requests: <claim uid>.json, {"devices": [UUIDs],
                              * "commands": [control commands]} */
        char *daemon_prefix; /* a claim's daemon: <daemon_prefix><uid>/{pipe,log,<marker>} */
        char *marker_name;
        char *shm_dir;
        char **program_roots;
};
void dev_sidecar_claims_free(struct dev_sidecar_claims *c);

/* ---- backends ---- */

struct dev_backend;

struct dev_backend_ops {
        const char *name; /* "hostdev", "nvidia" */
        /* the DRA driver name the family's devices are published under
         * ("gpu.nvidia.com"); NULL: the family has no DRA driver */
        const char *dra_driver;
        /* Builds the backend's resources from cfg (an initial scan happens
         * here, synchronously) and starts watching on loop (loop may be NULL
         * for one-shot use such as `devlet list`: no watching).  Returns 0 and
         * *out, or 0 with *out NULL when cfg configures nothing for this
         * backend, or -errno with diag saying why. */
        int (*create)(uv_loop_t *loop, const struct devlet_config *cfg, struct dev_backend **out,
                      struct diag *diag);
        /* Stops watching and frees everything; handle closes complete on the
         * loop, so the loop must run afterwards. */
        void (*destroy)(struct dev_backend *b);
        struct dev_resource **(*resources)(struct dev_backend *b, size_t *n);
        /* Optional: on a reload, b (just created from a fresh scan, not yet
         * served) takes over from prev (the running backend of the same ops,
         * destroyed afterwards) what a scan cannot see, e.g. devices found
         * unhealthy and event counters.  No loop turn runs between b's
         * create and this call. */
        void (*inherit)(struct dev_backend *b, struct dev_backend *prev);
        /* Optional: a backend-specific section `devlet list` prints after its
         * table (the NVIDIA backend: GPUs, MIG devices, topology). */
        void (*describe)(struct dev_backend *b, FILE *f);
        /* Optional: the same as a JSON object (jansson json_t, new reference),
         * which `devlet list -o json` puts under "backends": {"<name>": ...}. */
        struct json_t *(*describe_json)(struct dev_backend *b);
        /* Optional: the node labels b calls for, put into out.  Facts a label
         * cannot be made from become warnings appended to *warnings (a strv,
         * created when NULL; warnings may be NULL).  Values need not be valid
         * Kubernetes label values (labels/ sanitises them).  NULL:
         * "<resource>.count", the healthy devices of each resource. */
        void (*labels)(struct dev_backend *b, const struct devlet_config *cfg,
                       struct dev_labels *out, char ***warnings);
        /* Optional: the CDI specs of b's devices, each valid, appended to out
         * with a warning for each device or spec left out.  NULL: one spec
         * per resource, its devices' nodes and mounts (cdi/). */
        void (*cdi_specs)(struct dev_backend *b, const struct dev_cdi_opts *opts,
                          struct cdi_spec_list *out);
        /* Optional, for metrics (devices/measure.h).  sampler: a new
         * reference to the backend's sampler (NULL: nothing to measure),
         * which outlives the backend for as long as the caller holds it.
         * events: the per-device event counters (loop thread); fills at
         * most max, returns how many there are; the strings live until the
         * backend changes.  attr_hints: static, where containers name the
         * family's devices. */
        struct dev_sampler *(*sampler)(struct dev_backend *b);
        size_t (*events)(struct dev_backend *b, struct dev_event_count *out, size_t max);
        const struct dev_attr_hints *attr_hints;
        /* Optional: the sidecar daemons b's shared resources need (NVIDIA:
         * one MPS control daemon per resource shared by MPS; `devlet
         * mps-control-daemon` runs them); *out is a heap array
         * (dev_sidecar_daemons_free), NULL when there is none.  Returns how
         * many. */
        size_t (*sidecar_daemons)(struct dev_backend *b, struct dev_sidecar_daemon **out);
        /* Optional: where DRA claims ask the sidecar for daemons (heap,
         * dev_sidecar_claims_free; NULL: nowhere). */
        struct dev_sidecar_claims *(*sidecar_claims)(struct dev_backend *b);
};

/* Every backend devlet knows, in start-up order; NULL-terminated. */
extern const struct dev_backend_ops *const dev_backends[];

/* The same families as config/ sees them (their options, config-file
 * sections, sharing rules, and --backends' choices), in the same order:
 * what callers hand config_load(), config_new_defaults() and
 * config_print_help().  Static; never NULL. */
const struct config_families *dev_config_families(void);

/* Whether --backends selects the backend named name: an empty list or
 * "auto" selects every backend (each then decides whether it has anything
 * to serve). */
bool dev_backend_wanted(const struct devlet_config *cfg, const char *name);

#endif
