/* NVIDIA GPUs through NVML: a drop-in for NVIDIA's k8s-device-plugin
 * (resources nvidia.com/gpu, nvidia.com/mig-<profile>, shared replicas). */
#ifndef DEVLET_DEVICES_NVIDIA_NVIDIA_H
#define DEVLET_DEVICES_NVIDIA_NVIDIA_H

#include <stdint.h>

#include "devices/device.h"

struct nvml_lib;
struct nvml_inventory;

extern const struct dev_backend_ops nvidia_backend_ops;

/* create() with a library already loaded (taken, closed on failure too);
 * for tests that hand in a table with symbols hidden. */
int nvidia_backend_create_with(struct nvml_lib *lib, uv_loop_t *loop,
                               const struct devlet_config *cfg, struct dev_backend **out,
                               char **err);

/* What NVML said at start-up (devices/nvidia/inventory.h), read-only, for
 * the consumers that describe GPUs beyond the device model: node labels and
 * CDI specs.  Valid while the backend lives. */
const struct nvml_inventory *nvidia_backend_inventory(struct dev_backend *b);

/* XID events seen by code, critical or not (for metrics and tests). */
uint64_t nvidia_backend_xid_count(struct dev_backend *b, unsigned long long xid);

#endif
