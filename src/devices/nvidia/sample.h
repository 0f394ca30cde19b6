/* Internal to devices/nvidia/: the NVML sampler that metrics calls through
 * struct dev_sampler (devices/measure.h).
 *
 * It is built from the backend's inventory and NVML table (taking its own
 * references: nvml_lib_ref and an nvmlInit of its own), so it outlives a
 * backend that a reload destroys.  sample() runs on the metrics collector
 * thread; the GPU list is fixed at creation, MIG devices are enumerated
 * afresh each time (layouts change), and every value NVML answers becomes
 * a family of dcgm-exporter's.  The XIDs of each GPU are noted by the
 * backend on the loop (under the sampler's mutex): the last one, and the
 * recent ones for DCGM_EXP_XID_ERRORS_COUNT; they arrive with health
 * checks off too (the monitor's xids_only mode). */
#ifndef DEVLET_DEVICES_NVIDIA_SAMPLE_H
#define DEVLET_DEVICES_NVIDIA_SAMPLE_H

#include <stddef.h>

#include "devices/measure.h"
#include "devices/nvidia/inventory.h"

/* Where NVIDIA GPUs are named in containers and pod-resources. */
extern const struct dev_attr_hints nvidia_attr_hints;

/* Returns 0 and *out (one reference), or -EIO with diag when NVML
 * cannot be initialised again. */
int nvidia_sampler_new(struct nvml_lib *lib, const struct nvml_inventory *inv,
                       struct dev_sampler **out, struct diag *diag);

/* An XID seen on the inventory's GPU gpu, now (loop thread; any thread is
 * safe). */
void nvidia_sampler_note_xid(struct dev_sampler *s, size_t gpu, unsigned long long xid);

/* go-nvlib's name of an nvmlBrandType_t ("Tesla"), or NULL. */
const char *nvidia_brand_name(int brand);

/* NVIDIA's description of an XID code (dcgm-exporter's err_msg). */
const char *nvidia_xid_text(unsigned long long xid);

#endif
