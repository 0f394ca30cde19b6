/* Dynamic Resource Allocation (resource.k8s.io/v1): devlet as a DRA driver
 * for every family that names one (dev_backend_ops.dra_driver), beside the
 * device plugin.
 *
 * For each driver with devices to offer, one registration socket in the
 * kubelet's plugins_registry (pluginregistration.v1, type DRAPlugin), one
 * DRA service socket under <plugins>/<driver>/ (NodePrepareResources and
 * NodeUnprepareResources, v1 and v1beta1), the node's ResourceSlices kept
 * equal to the devices through the API server, and a checkpoint of the
 * claims prepared, so a restart loses nothing and leaks nothing.
 *
 * Threads: the loop owns the gRPC servers, the resources and the device
 * tables (immutable snapshots handed to the threads by reference); one
 * publisher thread per driver keeps the slices (woken by a device change,
 * a slice changed by someone else, or its resync timer); one claims
 * thread per driver prepares and unprepares (API reads, CDI spec and
 * checkpoint writes) and hands each answer to the loop through a uv_async.
 * Nothing the API server does can block the loop or the device plugin. */
#ifndef DEVLET_DRA_DRA_H
#define DEVLET_DRA_DRA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <uv.h>

#include "base/diag.h"
#include "config/config.h"
#include "devices/cdi-spec.h"
#include "devices/device.h"

/* How a resource is served (--dra-resources). */
enum dra_mode {
        DRA_MODE_DEVICE_PLUGIN = 0,
        DRA_MODE_DRA,
        /* DRA, with the extended resource's name mapped to it by the
         * DeviceClass (pods asking "nvidia.com/gpu: 1" are served by DRA);
         * the device plugin does not register the resource, so no device
         * is offered twice */
        DRA_MODE_BOTH,
};

/* The mode cfg gives resource: the last --dra-resources item whose shell
 * pattern matches it; DRA modes only for a family with a driver (driver
 * NULL: always the device plugin). */
enum dra_mode dra_mode_of(const struct devlet_config *cfg, const char *resource,
                          const char *driver);

/* A resource DRA serves, with its family's driver. */
struct dra_resource {
        const char *driver;
        struct dev_resource *res;
};

/* What DRA needs from cdi/ (which it may not include): container edits
 * from an allocation, and a spec rendered as JSON. */
struct dra_cdi_ops {
        void (*edits_from_alloc)(const struct dev_alloc *a, struct cdi_edits *out);
        int (*render_json)(const struct cdi_spec *s, char **out, size_t *len,
                           struct diag *diag);
};

struct dra;

/* Starts DRA for cfg: the API client (cfg->kubeconfig or in-cluster).
 * The API server, node name, directories and CDI spec directory are
 * cfg's for as long as DRA runs.  Serves nothing until dra_update names
 * resources.  Returns 0 and *out,
 * or -errno with diag (no API server configuration). */
int dra_start(uv_loop_t *loop, const struct devlet_config *cfg, const struct dra_cdi_ops *cdi,
              struct dra **out, struct diag *diag);
/* The resources DRA serves from now on (at start and after each reload):
 * drivers that gain devices start serving, drivers left without any stop
 * and their slices are deleted.  Resources must outlive the next update
 * or dra_stop. */
void dra_update(struct dra *d, const struct devlet_config *cfg, const struct dra_resource *v,
                size_t n);
/* Stops every driver (their sockets go; with the last config's --dra-cleanup the slices
 * are deleted first, within a few seconds at most); handle closes
 * complete on the loop. */
void dra_stop(struct dra *d);

/* What each driver answered the kubelet, for devlet's metrics: the
 * durations of NodePrepareResources and NodeUnprepareResources (from the
 * request's arrival to its answer, queueing included) in buckets whose
 * upper bounds are dra_duration_bounds, the claims they refused, the
 * requests not yet answered, and the devices its prepared claims hold now
 * (the checkpoint's). */
#define DRA_DURATION_BUCKETS 11
extern const double dra_duration_bounds[DRA_DURATION_BUCKETS];

struct dra_op_stats {
        uint64_t buckets[DRA_DURATION_BUCKETS]; /* observations <= each bound (cumulative) */
        uint64_t count;
        double sum_s;
        uint64_t claim_errors;
};

struct dra_driver_stats {
        const char *driver; /* valid until the next dra_update or dra_stop */
        struct dra_op_stats prepare, unprepare;
        uint64_t in_flight;
        uint64_t prepared_devices;
};

/* Fills at most max drivers' stats; returns how many drivers there are.
 * Loop thread. NULL d: none. */
size_t dra_stats(const struct dra *d, struct dra_driver_stats *out, size_t max);

/* Whether d runs with what cfg says of the API server, the node, the
 * kubelet's directories and the CDI spec directory (else a reload
 * restarts DRA). */
bool dra_config_same(const struct dra *d, const struct devlet_config *cfg);

/* `devlet dra cleanup`: deletes every ResourceSlice of this node for the
 * drivers given (NULL: every driver devlet knows).  Returns 0 or -errno
 * with diag. */
int dra_cleanup_node(const struct devlet_config *cfg, char *const *drivers, struct diag *diag);

/* ---- claims.c: pure decoding, unit-tested and fuzzed ---- */

/* One device of a claim's allocation that is ours. */
struct dra_claim_device {
        char *request; /* "gpu", or "gpu/sub" for a subrequest */
        char *pool;
        char *device;
        bool admin_access; /* the result's adminAccess: a monitoring or debugging claim */
};

/* An opaque configuration of the claim's allocation for the driver. */
struct dra_claim_config {
        bool from_class; /* source FromClass (else FromClaim) */
        size_t index;    /* its place among its source's configs */
        char **requests; /* strv; NULL: it applies to every request */
        json_t *parameters; /* opaque.parameters (a reference) */
};

struct dra_claim {
        char *uid, *namespace, *name;
        struct dra_claim_device *devices;
        size_t n_devices;
        /* the driver's opaque configs, the class's first, each source's in
         * its order: a device takes the last one that applies to it */
        struct dra_claim_config *configs;
        size_t n_configs;
};

/* Whether config applies to a device of request ("gpu", or "gpu/sub" of a
 * config naming "gpu"). */
bool dra_claim_config_applies(const struct dra_claim_config *config, const char *request);

/* Decodes a ResourceClaim (API JSON) for driver on pool: its uid must be
 * uid, it must be allocated, and the results for driver must name pool.
 * Returns 0 and fills *out (dra_claim_release), or -EINVAL with diag
 * saying what is wrong ("not allocated"; the caller names the claim),
 * -ESTALE when the uid differs (the claim was replaced). */
int dra_claim_decode(const json_t *claim, const char *uid, const char *driver, const char *pool,
                     struct dra_claim *out, struct diag *diag);
void dra_claim_release(struct dra_claim *c);
/* Whether s may name a claim in a file name: a UID (1..64 of [a-z0-9-]). */
bool dra_uid_valid(const char *s);

#endif
