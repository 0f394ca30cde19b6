/* The device collector: calls the backends' samplers, attributes devices
 * to containers, renders the families the samplers name and publishes
 * them in the store's GPU slot.
 *
 * It runs on its own thread (or once on the caller's, for `devlet
 * metrics`).  The loop hands it two inputs through a mutex-guarded mailbox:
 * the latest pod-resources table and the samplers of the running
 * backends.  A scrape never reaches in here: it reads what the collector
 * published. */
#ifndef DEVLET_METRICS_COLLECTOR_H
#define DEVLET_METRICS_COLLECTOR_H

#include <stdint.h>

#include "devices/measure.h"
#include "metrics/attrib.h"
#include "metrics/podlabels.h"
#include "metrics/store.h"

struct collector_opts {
        uint64_t interval_ms;
        const char *hostname_label; /* "Hostname" (dcgm-exporter's), "hostname", "none" (no
                                     * host label) or "auto" (each unit's family's) */
        const char *hostname;
        const char *proc_root;      /* "/proc" */
        char *const *state_dirs;    /* container state directories */
        const char *cdi_prefix;     /* "cdi.k8s.io/" */
        /* where containers name devices, per family (copied) */
        const struct dev_attr_hints *const *hints;
        size_t n_hints;
        bool virtual_gpus;       /* --kubernetes-virtual-gpus */
        char *const *families;   /* the device families to export (copied); NULL: all */
        struct podlabels *pod_labels; /* the pods' labels (borrowed, outlives the
                                       * collector), or NULL */
        bool pod_labels_all;     /* --kubernetes-enable-pod-labels: every label of a
                                  * device's sole pod on its series */
        /* with --kubernetes: the kubeconfig ("" in-cluster) and node the
         * collector starts its own pod-label source with, on the thread, the
         * first time a unit asks for pod labels (dev_unit.pod_labels) and
         * pod_labels is NULL; node NULL: never (copied) */
        const char *kubeconfig, *node;
        double kube_api_qps; /* its API client's rate (podlabels_start) */
        unsigned kube_api_burst;
};

struct collector;

/* Without samplers (collector_put_samplers) it publishes nothing;
 * attribution inputs are still kept. */
struct collector *collector_new(const struct collector_opts *o, struct metrics_store *store);
/* Starts the sampling thread: a collection at once, then every interval.
 * Returns 0 or -errno. */
int collector_start(struct collector *c);
/* Stops and joins the thread (if any) and frees everything. */
void collector_free(struct collector *c);

/* One collection on the calling thread. */
void collector_run_once(struct collector *c);

/* Mailbox (any thread): the latest pod-resources table (taken; NULL = the
 * source is gone) and the samplers to call from the next collection on
 * (new references taken; the previous ones are dropped). */
void collector_put_podres(struct collector *c, struct attr_podres *p);
void collector_put_samplers(struct collector *c, struct dev_sampler *const *s, size_t n);

/* Figures for devlet's own families (any thread). */
uint64_t collector_last_duration_us(struct collector *c);
uint64_t collector_collections(struct collector *c);

#endif
