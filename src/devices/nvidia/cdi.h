/* The CDI spec of a node's NVIDIA GPUs, in the shape NVIDIA's container
 * toolkit gives it: one CDI device per GPU (named by index and by UUID),
 * per MIG device ("<gpu>:<mig>" and its UUID) and "all"; the driver's
 * control nodes, user-space libraries and binaries in the spec-wide edits.
 *
 * Built from plain facts (filled from the NVIDIA backend's inventory by
 * the backend's `cdi_specs` member, or by hand in tests) and what the dev
 * root and the driver root hold now. */
#ifndef DEVLET_DEVICES_NVIDIA_CDI_H
#define DEVLET_DEVICES_NVIDIA_CDI_H

#include <stdbool.h>
#include <stddef.h>

#include "devices/cdi-spec.h"
#include "devices/device.h"

/* The kind devlet's own Allocate names (NVIDIA's plugin uses the same). */
#define NVIDIA_CDI_PLUGIN_KIND "k8s.device-plugin.nvidia.com/gpu"
/* The kind of `devlet cdi generate` (nvidia-ctk's default). */
#define NVIDIA_CDI_DEFAULT_KIND "nvidia.com/gpu"

struct nvidia_cdi_mig {
        unsigned index;   /* NVML's MIG device index within its GPU */
        const char *uuid; /* "MIG-..."; NULL or "": no UUID name */
        int gi_cap, ci_cap; /* /dev/nvidia-caps/nvidia-cap<N>; -1: unknown */
};

struct nvidia_cdi_gpu {
        const char *uuid; /* "GPU-..."; NULL or "": no UUID name */
        int minor;        /* /dev/nvidia<minor>; -1: unknown (no device) */
        bool mig_enabled;
        const struct nvidia_cdi_mig *migs;
        size_t n_migs;
};

struct nvidia_cdi_node {
        const char *driver_version; /* "550.54.15": picks the libraries; NULL: none */
        const struct nvidia_cdi_gpu *gpus; /* by index, as NVML counts them */
        size_t n_gpus;
};

struct nvidia_cdi_opts {
        const char *kind;
        /* Where the container runtime finds the driver (--nvidia-driver-root)
         * and where devlet finds it now (the same, or the mount of it in
         * devlet's own container).  A file at <search_root>/P is mounted from
         * <driver_root>/P to /P. */
        const char *driver_root;
        const char *search_root;
        const char *dev_root;  /* nodes are <dev_root>/dev/...; "/" or "" for the host's */
        const char *hook_path; /* the ldcache hook program; used only when it exists */
};

/* Builds the spec.  Device nodes are stat(2)ed under the dev root for their
 * type and numbers; a node that is missing is left out, with a warning.  A
 * GPU is named "<i>" (its position in node->gpus) and by its UUID, MIG
 * enabled or not (mig-strategy=none serves it whole); the MIG devices of a
 * MIG-enabled GPU are named "<i>:<index>" and by their UUIDs, and hold the
 * GPU's node and their access capabilities; "all" holds every other
 * device's edits.
 * The spec-wide edits hold NVIDIA_VISIBLE_DEVICES=void (so a legacy NVIDIA
 * hook does not inject GPUs again), /dev/nvidiactl, /dev/nvidia-uvm,
 * /dev/nvidia-uvm-tools and /dev/nvidia-modeset when present, the driver's
 * compute and utility libraries ("<lib>.so.<driver version>" and the
 * symlinks naming them) and binaries found under the search root, mounted
 * read-only ("ro", "nosuid", "nodev", "bind"), and, when hook_path exists,
 * a createContainer hook running "update-ldcache --folder <dir>..." for the
 * library directories.  Returns 0 and *out (valid), or -EINVAL with diag
 * (no GPU device to describe, or an invalid kind). */
int nvidia_cdi_spec(const struct nvidia_cdi_node *node, const struct nvidia_cdi_opts *opts,
                    struct cdi_spec **out, char ***warnings, struct diag *diag);

/* NVIDIA's extra kinds: class, the device nodes it holds, the one device's
 * name. */
struct nvidia_cdi_extra {
        const char *klass;
        const char *const *patterns;
        const char *device;
};
extern const struct nvidia_cdi_extra nvidia_cdi_gds, nvidia_cdi_mofed, nvidia_cdi_gdrcopy,
        nvidia_cdi_imex;

/* The spec of NVIDIA's extra kinds that Allocate names "<vendor>/<class>=all"
 * when GDS, MOFED or GDRCOPY is enabled (and "<vendor>/imex-channel=0" for
 * IMEX channel 0): one device x->device holding every character or block
 * device under the dev root that matches one of x's NULL-terminated glob
 * patterns (e.g. "/dev/nvidia-fs*").  Returns 0 and *out, or -ENOENT with
 * diag when nothing matches, -EINVAL for a bad kind. */
int nvidia_cdi_extra_spec(const char *kind, const char *dev_root,
                          const struct nvidia_cdi_extra *x, struct cdi_spec **out, struct diag *diag);

/* The backend's `cdi_specs` member: the GPU spec from the inventory, with
 * the GPU and MIG indices the backend's Allocate names ("<i>", "<i>:<j>":
 * the position in the inventory and NVML's MIG index) and the UUIDs, under
 * NVIDIA_CDI_PLUGIN_KIND, or standalone NVIDIA_CDI_DEFAULT_KIND with
 * opts->vendor and opts->klass in place of its parts; then one spec per
 * extra kind (GDS, MOFED, GDRCOPY, IMEX channel 0) that is enabled, named
 * "<vendor>/<class>=all" ("<vendor>/imex-channel=0"). */
void nvidia_backend_cdi_specs(struct dev_backend *b, const struct dev_cdi_opts *opts,
                              struct cdi_spec_list *out);

#endif
