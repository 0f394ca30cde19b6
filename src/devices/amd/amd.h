/* AMD GPUs through amdgpu's and KFD's sysfs: a drop-in for AMD's
 * k8s-device-plugin (amd.com/gpu, amd.com/<compute>_<memory> partitions)
 * and its node labeller, with devlet's sharing, health and CDI. */
#ifndef DEVLET_DEVICES_AMD_AMD_H
#define DEVLET_DEVICES_AMD_AMD_H

#include "devices/device.h"

extern const struct dev_backend_ops amd_backend_ops;

#endif
