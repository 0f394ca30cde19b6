/* The Kubernetes labels of the pods on this node, for the series of the
 * devices they hold (dcgm-exporter's --kubernetes-enable-pod-labels, AMD's
 * GPUConfig.ExtraPodLabels).
 *
 * One worker thread lists and watches /api/v1/pods with
 * fieldSelector=spec.nodeName=<node> through kapi/ and keeps a map
 * "namespace/name" -> labels under a mutex; the collector thread looks a
 * pod up when it attributes a device to it.  Never runs on the loop. */
#ifndef DEVLET_METRICS_PODLABELS_H
#define DEVLET_METRICS_PODLABELS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define PODLABELS_MAX_PODS 1024      /* pods kept per node; more are not kept */
#define PODLABELS_MAX_LABELS 64      /* labels kept per pod; more are dropped */
#define PODLABELS_MAX_KEY 317        /* a label key: 253 prefix + '/' + 63 name */
#define PODLABELS_MAX_VALUE 1024     /* a value (Kubernetes allows 63) */

struct podlabels;

/* Starts the worker: kubeconfig "" for the in-cluster account, node the
 * node's name, qps and burst its API client's rate (kapi_client_set_rate:
 * --kube-api-qps, --kube-api-burst).  An unreachable API server is
 * logged (once per change of error) and retried with backoff, and lookups
 * find nothing.  NULL (logged) only when the thread cannot start; lookups
 * and stop take NULL. */
struct podlabels *podlabels_start(const char *kubeconfig, const char *node, double qps,
                                  unsigned burst);
/* Stops and joins the worker (within about 100 ms) and frees; NULL is fine. */
void podlabels_stop(struct podlabels *p);

/* The labels of namespace/name: a new JSON object {key: value} (the
 * caller's), or NULL when the pod is not known (yet).  Any thread. */
json_t *podlabels_get(struct podlabels *p, const char *ns, const char *name);

/* Validates a pod object's metadata.labels into a new {key: value} object
 * (bounded by the limits above; labels over them are dropped).  Returns
 * NULL when labels is not an object.  Pure, for tests. */
json_t *podlabels_from_pod(const json_t *pod);

/* Writes name with every byte outside [a-zA-Z0-9_] replaced by '_' into
 * out (size > 0; truncated), as dcgm-exporter sanitises label names; a
 * leading digit gets a '_' in front, as Prometheus requires. */
void podlabels_sanitize(const char *name, char *out, size_t size);

#endif
