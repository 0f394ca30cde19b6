/* Internal test hook of src/kubelet/plugin.c, for fuzz/fuzz-plugin.c only. */
#ifndef DEVLET_KUBELET_PLUGIN_FUZZ_H
#define DEVLET_KUBELET_PLUGIN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "devices/device.h"

/* Serves res's DevicePlugin service (the real handlers: options,
 * ListAndWatch, GetPreferredAllocation, Allocate, PreStartContainer) on one
 * socketless connection fed data (HTTP/2 from the client's side) in pieces
 * of at most chunk bytes, as grpc_server_feed_for_fuzzing.  No socket, no
 * registration; everything is freed before returning. */
int plugin_feed_for_fuzzing(struct dev_resource *res, const uint8_t *data, size_t len, size_t chunk);

#endif
