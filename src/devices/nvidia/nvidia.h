/* NVIDIA GPUs through NVML: a drop-in for NVIDIA's k8s-device-plugin
 * (resources nvidia.com/gpu, nvidia.com/mig-<profile>, shared replicas). */
#ifndef DEVLET_DEVICES_NVIDIA_NVIDIA_H
#define DEVLET_DEVICES_NVIDIA_NVIDIA_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/device.h"

struct nvml_lib;
struct nvml_inventory;

extern const struct dev_backend_ops nvidia_backend_ops;

/* create() with a library already loaded (taken, closed on failure too);
 * for tests that hand in a table with symbols hidden. */
int nvidia_backend_create_with(struct nvml_lib *lib, uv_loop_t *loop,
                               const struct devlet_config *cfg, struct dev_backend **out,
                               struct diag *diag);

/* What NVML said at start-up (devices/nvidia/inventory.h), read-only, for
 * the consumers that describe GPUs beyond the device model: node labels and
 * CDI specs.  Valid while the backend lives. */
const struct nvml_inventory *nvidia_backend_inventory(struct dev_backend *b);

/* XID events seen by code, critical or not (for metrics and tests). */
uint64_t nvidia_backend_xid_count(struct dev_backend *b, unsigned long long xid);

/* XID events by GPU and code, for metrics: seq grows with every event, so a
 * GPU's last XID is its entry with the highest seq.  uuid points into the
 * backend (valid until it is destroyed).  Fills at most max entries and
 * returns how many there are.  Loop thread. */
struct nvidia_xid_event {
        const char *uuid;
        unsigned long long xid;
        uint64_t count;
        uint64_t seq;
};
size_t nvidia_backend_xid_events(struct dev_backend *b, struct nvidia_xid_event *out, size_t max);

/* ---- MPS (mps.c): NVIDIA's layout under --mps-root ---- */

#define NVIDIA_MPS_MARKER ".started" /* <root>/<resource>/.started: the daemon is ready */
#define NVIDIA_MPS_STALE_MS 5000     /* a marker not touched for this long is stale */
#define NVIDIA_MPS_CONTAINER_ROOT "/mps" /* where containers see the MPS root */
/* per-claim MPS (claim-config.c): <root>/claims/<uid>.json is a claim's
 * request to the sidecar, <root>/claim-<uid>/ its daemon's directory */
#define NVIDIA_MPS_CLAIMS_DIR "claims"
#define NVIDIA_MPS_CLAIM_PREFIX "claim-"

/* <root>/<resource>/<leaf>, or <root>/<leaf> when resource is NULL. */
char *nvidia_mps_path(const char *root, const char *resource, const char *leaf);
/* Whether resource's control daemon is ready: its marker exists and was
 * touched within NVIDIA_MPS_STALE_MS. */
bool nvidia_mps_ready(const char *root, const char *resource);
/* NVIDIA's limits for a GPU shared by replicas clients. */
unsigned nvidia_mps_thread_percentage(unsigned replicas);
unsigned long long nvidia_mps_pinned_mib(unsigned long long memory_bytes, unsigned replicas);

/* The backend's `sidecar_daemons` member: one daemon per MPS resource, with
 * NVIDIA's layout under --mps-root and limits (max_clients 48, 16 on GPUs
 * older than compute capability 7.5). */
size_t nvidia_backend_mps_daemons(struct dev_backend *b, struct dev_sidecar_daemon **out);
/* The backend's `sidecar_claims` member: MPS per claim, <mps-root>/claims;
 * NULL without an MPS root. */
struct dev_sidecar_claims *nvidia_backend_mps_claims(struct dev_backend *b);
/* Every MPS resource's daemon is ready (false when there is none). */
bool nvidia_backend_mps_ready(struct dev_backend *b);

#endif
