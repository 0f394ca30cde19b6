/* devlet's Prometheus endpoint: dcgm-exporter's GPU families with pod,
 * namespace and container attribution, and devlet's own families.
 *
 * Threads and ownership:
 *   - the loop (the caller's) owns struct metrics: a timer every
 *     collect-interval asks the kubelet's pod-resources List
 *     (asynchronously), renders devlet's own families from the sources
 *     below and publishes them; a 1 s timer beats the heart /health reads;
 *   - the collector thread samples NVML (its own reference to the library,
 *     loaded as the NVIDIA backend loads it, so reloads that rebuild the
 *     backend do not touch it), reads OCI specs and /proc, and publishes
 *     the GPU families; the loop hands it the pod-resources table
 *     and the last XIDs through a mutex-guarded mailbox;
 *   - libmicrohttpd's thread answers scrapes from the published snapshots
 *     (reference-counted, immutable text) and never computes anything.
 * Sources are read on the loop only. */
#ifndef DEVLET_METRICS_METRICS_H
#define DEVLET_METRICS_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "config/config.h"
#include "devices/device.h"
#include "kubelet/kubelet.h"

/* One served resource, for devlet's own families. */
struct metrics_resource {
        const struct dev_resource *resource;
        const struct plugin_stats *stats; /* NULL when no plugin server serves it */
        bool registered;
};

/* XIDs the NVIDIA backend counted on one GPU, one entry per code; seq grows
 * with every event, so a GPU's last XID is its entry with the highest seq. */
struct metrics_xid {
        const char *uuid;
        unsigned xid;
        uint64_t count;
        uint64_t seq;
};

/* What metrics reads from the rest of devlet.  Every callback runs on the
 * loop thread and may be NULL; pointers it hands out need only live until
 * it is called again.  ud is passed back. */
struct metrics_sources {
        void *ud;
        /* The resources served now; fills at most max, returns how many there are. */
        size_t (*resources)(void *ud, struct metrics_resource *out, size_t max);
        /* Kubelet restarts seen since devlet started. */
        uint64_t (*kubelet_restarts)(void *ud);
        /* XID counts per GPU and code; fills at most max, returns how many there are. */
        size_t (*xids)(void *ud, struct metrics_xid *out, size_t max);
};

struct metrics;

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
/* Whether a and b hold the same metrics settings (address, interval,
 * attribution sources, driver root): a reload restarts metrics only when
 * they differ, so an unchanged endpoint never misses a scrape. */
bool metrics_settings_equal(const struct devlet_config *a, const struct devlet_config *b);

/* The port the endpoint listens on (useful with port 0). */
uint16_t metrics_port(const struct metrics *m);

/* `devlet metrics`: one collection (pod-resources included, when the
 * socket answers) printed to out.  Returns 0, or 1 after printing why. */
int metrics_print_once(const struct devlet_config *cfg, FILE *out);

#endif
