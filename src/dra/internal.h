/* What the files of dra/ share: the device table (an immutable snapshot of
 * one driver's devices, built on the loop and read by the threads), one
 * driver's state, and the threads' entry points. */
#ifndef DEVLET_DRA_INTERNAL_H
#define DEVLET_DRA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/thread.h"
#include "dra/dra.h"
#include "kapi/kapi.h"

/* One DRA device: what the slice says of it, and what a container holding
 * it gets (the family's Allocate answer for its device ID plus the
 * device's own nodes and mounts, taken on the loop when the table was
 * built). */
struct dra_dev {
        char *name;      /* DNS label, unique in the driver */
        char *resource;  /* the device plugin resource it belongs to */
        char *id;        /* its device ID there */
        bool healthy;
        struct dev_taint taint; /* !healthy: its family's reason, published as a taint */
        json_t *slice_device;   /* {"name", "attributes", "capacity"} */
        struct dev_alloc alloc;
};

/* A resource's appliers of claims' opaque configurations, with its
 * snapshot (dev_claim_config_ops). */
struct dra_res_config {
        char *resource;
        const struct dev_claim_config_ops *ops;
        void *ctx;
};

struct dra_table {
        atomic_int refs;
        char *driver;
        struct dra_dev *devs;
        size_t n;
        struct dra_res_config *configs; /* the resources that take opaque configs */
        size_t n_configs;
};

/* Builds the table of driver's devices from res (loop thread: calls the
 * families' Allocate).  Unhealthy devices stay in the table (a claim
 * prepared before may name them) and in the slices, tainted. */
struct dra_table *dra_table_build(const char *driver, struct dev_resource *const *res, size_t n);
struct dra_table *dra_table_ref(struct dra_table *t);
void dra_table_unref(struct dra_table *t);
const struct dra_dev *dra_table_find(const struct dra_table *t, const char *name);
/* resource's applier of opaque configs; NULL: it takes none. */
const struct dra_res_config *dra_table_config(const struct dra_table *t, const char *resource);

/* The slices of one pool: the table's devices, an unhealthy one with a
 * NoSchedule taint (its family's key and value, else "<driver>/unhealthy";
 * timeAdded when the family knows since when) -- or, !taints (an API
 * server that drops them: DRADeviceTaints off), left out -- at most
 * DRA_SLICE_DEVICES_MAX per slice (the API's limit for slices whose
 * devices may carry taints).  Returns a JSON array of ResourceSlice
 * objects named <prefix>-<k> (new reference), each with the hash of its
 * own content in its devlet.io/content-hash annotation, and the whole
 * pool's hash in hash (hex). */
#define DRA_SLICE_DEVICES_MAX 64
#define DRA_TAINT_EFFECT "NoSchedule"
json_t *dra_slices_desired(const struct dra_table *t, const char *node, const char *prefix,
                           bool taints, char hash[17]);

/* The DRA resource health service (health.c, on the loop): the handler of
 * NodeWatchResources (v1 and v1alpha1), the full list sent again on every
 * table change (notify) and every DRA_HEALTH_RESEND_MS while streams are
 * open (start arms it with the server); stop closes the resend timer and
 * calls closed with it (data: the driver), at once when never started. */
#define DRA_HEALTH_RESEND_MS 30000
struct dra_driver;
struct grpc_call;
void dra_health_on_watch(struct grpc_call *call, const uint8_t *req, size_t len, void *ud);
void dra_health_notify(struct dra_driver *drv);
void dra_health_start(struct dra_driver *drv);
void dra_health_stop(struct dra_driver *drv, uv_close_cb closed);

/* A job for a driver's claims work, answered on the loop. */
enum dra_job_kind { DRA_JOB_PREPARE, DRA_JOB_UNPREPARE };

struct dra_job_claim {
        char *namespace, *uid, *name;
};

struct dra_job {
        struct handoff_item done; /* first: on its way back to the loop */
        struct dra_job *next;
        enum dra_job_kind kind;
        struct grpc_call *call; /* loop thread only; NULL once the peer is gone */
        struct dra_job_claim *claims;
        size_t n_claims;
        uint8_t *reply; /* packed response, set by the thread */
        size_t reply_len;
        uint64_t queued_ns; /* when the loop queued it (uv_hrtime) */
        size_t claim_errors;     /* set by the work: claims answered with an error */
        size_t prepared_devices; /* set by the work: the checkpoint's devices after it */
};

struct dra_driver {
        struct dra *dra;
        char *name;       /* "gpu.nvidia.com" */
        char *dir;        /* <plugins>/<driver> */
        char *dra_socket; /* <dir>/dra.sock */
        char *reg_socket; /* <registry>/<driver>-reg.sock */
        char *slice_prefix;
        struct grpc_server *reg_srv, *dra_srv;
        struct dev_resource **res;
        size_t n_res;
        bool registered;

        struct dra_pub *pub; /* the slices' informer and publisher (slices.c; loop) */

        struct sleeper pause; /* the claims' work's pauses, stopped with the driver */
        pthread_mutex_t mu;   /* guards what follows, shared with the claims' work */
        pthread_cond_t cond;  /* claims_running went false */
        struct dra_table *table; /* set on the loop (which reads it without the lock) */
        bool cleanup_on_stop;
        struct dra_job *jobs, **jobs_tail; /* for the claims' work */
        atomic_bool stop;

        /* the claims' work in libuv's pool (prepare.c): one at a time */
        struct dra_claims_work *claims_work; /* loop thread's */
        bool claims_running;                 /* under mu: it is running */
        bool claims_kicked;                  /* under mu: the first turn was queued */
        struct claims_state *claims;         /* the work's own (its checkpoint) */
        struct handoff done; /* the answered jobs, to the loop (plugin.c) */
        /* the kubelet's health streams and their resend (health.c; loop) */
        struct dra_health_stream *health_streams;
        uv_timer_t health_timer;
        bool health_timer_open;
        bool closing;        /* the driver is freed: answers are dropped */
        struct dra_driver_stats stats; /* loop's (plugin.c) */
};

/* The global state: dra.c. */
struct dra {
        uv_loop_t *loop;
        /* taken from the config at start (the threads read them; a reload
         * swaps the config under them) */
        char *cdi_spec_dir, *plugins_dir, *registry_dir, *kubeconfig, *node_cfg;
        bool cleanup; /* the latest config's --dra-cleanup (loop only) */
        struct dra_cdi_ops cdi;
        struct kapi_client *api;
        char *node;
        struct dra_driver **drivers;
        size_t n_drivers;
};

/* The claims' work (prepare.c), on the loop thread: kick runs the queued
 * jobs in libuv's pool, one work item per driver at a time; stop (drv->stop
 * set) waits for a running one to leave (within its job) and frees the
 * claims' state. */
struct dra_claims_work;
struct claims_state;
void dra_claims_kick(struct dra_driver *drv);
void dra_claims_stop(struct dra_driver *drv);

/* The slices' informer and publisher, on the loop (slices.c).  start:
 * 0, or -EINVAL with diag; changed: the table changed; stop: no call or
 * callback after it, memory freed once the loop closed its handles. */
struct dra_pub;
int dra_pub_start(struct dra_driver *drv, struct diag *diag);
void dra_pub_changed(struct dra_driver *drv);
void dra_pub_stop(struct dra_driver *drv);

/* The reg and DRA gRPC servers of a driver (plugin.c). */
int dra_plugin_serve(struct dra_driver *drv, struct diag *diag);
void dra_plugin_stop(struct dra_driver *drv);
void dra_job_free(struct dra_job *j);

/* Deletes every slice of driver on node (one DELETE of the collection). */
int dra_slices_delete(struct kapi_client *api, const char *node, const char *driver,
                      long timeout_ms, const atomic_bool *stop, struct diag *diag);

#endif
