/* devlet's Prometheus endpoint: the device families the backends' samplers
 * declare (the vendors' exporters' names) with pod, namespace and container
 * attribution, and devlet's own families.
 *
 * Threads and ownership:
 *   - the loop (the caller's) owns struct metrics: a timer every
 *     collect-interval asks the kubelet's pod-resources List
 *     (asynchronously), renders devlet's own families from the sources
 *     below and publishes them; a 1 s timer beats the heart /health reads;
 *   - the collector thread calls the backends' samplers (reference-counted,
 *     so a reload that destroys a backend does not pull one from under
 *     it), reads OCI specs and /proc, and publishes the device families;
 *     the loop hands it the pod-resources table and the samplers through
 *     a mutex-guarded mailbox;
 *   - the HTTP thread (http.c) answers scrapes from the published snapshots
 *     (reference-counted, immutable text) and never computes anything.
 * Sources are read on the loop only. */
#ifndef DEVLET_METRICS_METRICS_H
#define DEVLET_METRICS_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "config/config.h"
#include "devices/measure.h"

/* One served resource, for devlet's own families: plain values. */
struct metrics_resource {
        const char *name; /* "devlet.io/fuse" */
        size_t healthy, unhealthy;
        bool registered;
        bool served; /* a plugin server serves it: the counters below are its */
        uint64_t registrations, registration_errors;
        uint64_t allocations, allocation_errors;
        uint64_t snapshots; /* ListAndWatch messages sent */
};

/* One DRA driver, for devlet's own families: plain values. */
struct metrics_dra_op {
        const uint64_t *buckets; /* cumulative, one per bound */
        uint64_t count;
        double sum_s;
        uint64_t claim_errors;
};

struct metrics_dra_driver {
        const char *driver; /* "gpu.nvidia.com" */
        const double *bounds; /* the buckets' upper bounds, seconds */
        size_t n_bounds;
        struct metrics_dra_op prepare, unprepare;
        uint64_t in_flight;
        uint64_t prepared_devices;
};

/* The config reloads of `devlet run` since it started. */
struct metrics_reloads {
        uint64_t applied, rejected;
        bool last_successful; /* true before any reload */
};

/* What metrics reads from the rest of devlet.  Every callback runs on the
 * loop thread and may be NULL; pointers it hands out need only live until
 * it is called again.  ud is passed back. */
struct metrics_sources {
        void *ud;
        /* The resources served now; fills at most max, returns how many there are. */
        size_t (*resources)(void *ud, struct metrics_resource *out, size_t max);
        /* Whether resources register with the kubelet (false with
         * --kubelet-socket ""): without registration, ready means serving
         * metrics.  NULL: they do. */
        bool (*registering)(void *ud);
        /* Kubelet restarts seen since devlet started. */
        uint64_t (*kubelet_restarts)(void *ud);
        /* The config reloads: devlet_config_reloads_total and
         * devlet_config_last_reload_successful.  NULL: neither family. */
        void (*reloads)(void *ud, struct metrics_reloads *out);
        /* The DRA drivers served; fills at most max, returns how many
         * there are.  NULL: no DRA families. */
        size_t (*dra_drivers)(void *ud, struct metrics_dra_driver *out, size_t max);
        /* The backends' event counters; fills at most max, returns how many there are. */
        size_t (*events)(void *ud, struct dev_event_count *out, size_t max);
        /* The backends' samplers as new references (the callee drops
         * them); fills at most max, returns how many there are.  Asked at
         * start and on every collect-interval: a reload's new samplers
         * replace the old ones. */
        size_t (*samplers)(void *ud, struct dev_sampler **out, size_t max);
};

struct metrics;

/* Whether the web configuration's TLS certificate, key and client CA load
 * and, with basic_auth_users, libcrypt (OpenSSL is loaded for TLS, libcrypt
 * for users; neither when the configuration does not ask): start-up calls
 * it to refuse a broken one with exit 2, a reload to keep the running
 * config.  Returns 0, or -EINVAL/-ELIBACC with diag saying which file and
 * why. */
int metrics_check_web(const struct devlet_config *cfg, struct diag *diag);

/* Starts the endpoint on cfg->metrics_address and the collection every
 * cfg->collect_interval_ms.  An empty address disables metrics: returns 0
 * with *out NULL.  src is copied.  Returns 0, or -errno after logging why
 * (the address is invalid or taken). */
int metrics_start(uv_loop_t *loop, const struct devlet_config *cfg,
                  const struct metrics_sources *src, struct metrics **out);
/* Stops the HTTP server and the collector (joining their threads) and
 * cancels a pod-resources call in flight; the loop must run afterwards to
 * finish closing its handles.  Safe with NULL. */
void metrics_stop(struct metrics *m);

/* `devlet metrics`: one collection with these samplers (pod-resources
 * included, when the socket answers) printed to out.  Returns 0, or 1
 * after printing why. */
int metrics_print_once(const struct devlet_config *cfg, struct dev_sampler *const *samplers,
                       size_t n_samplers, FILE *out);

#endif
