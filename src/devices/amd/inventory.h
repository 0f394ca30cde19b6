/* What the amdgpu and KFD sysfs say about the node's AMD GPUs, read once per
 * (re)load: the PCI devices amdgpu drives, their partitions, the KFD
 * topology nodes that make them usable for compute, and the links between
 * them.  Pure reading: never logs, never touches /dev. */
#ifndef DEVLET_DEVICES_AMD_INVENTORY_H
#define DEVLET_DEVICES_AMD_INVENTORY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"

/* KFD io_link types (kfd_crat.h: CRAT_IOLINK_TYPE_*) */
#define AMD_LINK_PCIE 2
#define AMD_LINK_XGMI 11

/* One schedulable device: a whole GPU, or one compute partition of it. */
struct amd_part {
        char *id;        /* AMD's device ID: the PCI address ("0000:0c:00.0") for the
                          * GPU's own node, "amdgpu_xcp_<N>" for the other partitions */
        unsigned index;  /* partition number within its GPU (0: the PCI device's nodes) */
        int card;        /* /dev/dri/card<N>; -1 when sysfs names none */
        int render;      /* /dev/dri/renderD<N>; -1 when sysfs names none */
        int kfd_node;    /* KFD topology node; -1: KFD does not know it */
        unsigned gpu_id; /* KFD's gpu_id (proc/<pid>/vram_<gpu_id>); 0 unknown */
        uint64_t simd_count, simd_per_cu;
        uint64_t vram;   /* its memory bank 0 (KFD), bytes; 0 unknown */
};

/* The firmware blocks AMD's node labeller names, in its order and
 * spelling (label), with amdgpu's fw_version file (<file>_fw_version). */
#define AMD_FW_BLOCKS 10
struct amd_fw_block {
        const char *label, *file;
};
extern const struct amd_fw_block amd_fw_blocks[AMD_FW_BLOCKS];

struct amd_fw {
        bool known;       /* the file read as a number */
        uint32_t version; /* 0: the GPU has no such block */
};

struct amd_gpu {
        char *bdf;          /* PCI address, lower case */
        char *sysfs_dir;    /* <sysfs>/module/amdgpu/drivers/pci:amdgpu/<bdf> */
        char *hwmon_dir;    /* its amdgpu hwmon directory, NULL if none */
        char device_id[8];  /* "74a1" (no 0x) */
        char *product_name; /* "" when sysfs has none */
        char *serial;       /* "" when sysfs has none */
        char *unique_id;    /* amdgpu's unique_id (hex), "" when none */
        uint64_t unique_id_num; /* the same as KFD writes it; 0 unknown */
        int numa_node;      /* -1: the host does not tell */
        char compute[8];    /* current compute partition, lower case ("cpx"); "" none */
        char memory[8];     /* current memory partition ("nps4"); "" none */
        bool compute_partitioning; /* available_compute_partition exists */
        bool memory_partitioning;  /* available_memory_partition exists */
        uint64_t vram_total;       /* mem_info_vram_total, bytes */
        unsigned gfx_target_version; /* KFD's, e.g. 90402 for gfx942; 0 unknown */
        uint64_t xgmi_hive_id; /* its XGMI hive: amdgpu's xgmi_hive_id, else KFD's
                                * hive_id; 0 none */
        char pcie_root[32];    /* its PCIe root complex, "pci0000:00"; "" unknown */
        char *problem;      /* why it cannot be used (no KFD node...), NULL if fine */
        char **ras_files;   /* its ras/<block>_err_count files, strv or NULL (no RAS) */
        struct amd_fw fw[AMD_FW_BLOCKS]; /* by amd_fw_blocks */
        struct amd_part *parts; /* parts[0]: the PCI device's own nodes */
        size_t n_parts;
};

struct amd_inventory {
        char *sysfs_root;
        char *driver_version;    /* module/amdgpu/version, "" unknown */
        char *driver_srcversion; /* module/amdgpu/srcversion, "" unknown */
        bool kfd;                /* class/kfd/kfd exists */
        int kfd_major, kfd_minor; /* class/kfd/kfd/dev; -1 unknown */
        struct amd_gpu *gpus;    /* in PCI address order */
        size_t n_gpus;
        /* between GPUs i and j (index i * n_gpus + j): the best KFD link of
         * any of their nodes, 0 when KFD names none */
        unsigned char *link_type;
        unsigned *link_weight;
        char **warnings; /* files skipped (garbage, truncated, missing), strv or NULL */
        atomic_uint refs; /* never changed after load otherwise: readers on any thread */
};

/* Reads the node under sysfs_root ("/sys").  Returns 0 and *out (maybe
 * with no GPUs: amdgpu loaded and driving none), -ENOENT with diag when the
 * amdgpu module is not loaded, -ENOMEM never (allocation aborts). */
int amd_inventory_load(const char *sysfs_root, struct amd_inventory **out, struct diag *diag);
/* A new reference (a sampler thread keeps one past the backend's life). */
struct amd_inventory *amd_inventory_ref(struct amd_inventory *inv);
/* Drops a reference; the last frees.  NULL is fine. */
void amd_inventory_free(struct amd_inventory *inv);

/* The partition style "cpx_nps4" of a GPU, "" when it has none.  buf has
 * room for 16. */
const char *amd_gpu_partition_type(const struct amd_gpu *g, char *buf, size_t size);

/* Total partitions and the GPU a partition ID belongs to. */
size_t amd_inventory_units(const struct amd_inventory *inv);

/* ---- sysfs parsing, exposed for tests and the health/metrics readers ---- */

/* Value of "key" in a KFD properties text ("name value" per line).
 * Returns 0 and *out, -ENOENT when missing, -EINVAL when not a number. */
int amd_kfd_property(const char *text, const char *key, uint64_t *out);
/* "ue: N" (uncorrectable) and "ce: N" of a ras/<block>_err_count text.
 * Returns 0 when both parse, -EINVAL otherwise. */
int amd_ras_parse(const char *text, uint64_t *ue, uint64_t *ce);
/* The current level of pp_dpm_sclk / pp_dpm_mclk ("1: 1300Mhz *") in MHz.
 * Returns 0 and *mhz, -ENOENT when no level is marked, -EINVAL on garbage. */
int amd_dpm_current(const char *text, unsigned *mhz);
/* The levels of a pp_dpm_* text: the marked one and the lowest and
 * highest.  Returns 0, -ENOENT when no level is marked (min and max still
 * set), -EINVAL on garbage. */
int amd_dpm_levels(const char *text, unsigned *cur, unsigned *min, unsigned *max);
/* "ue: N", "ce: N" and, where the kernel counts them, "de: N" (deferred)
 * of a ras/<block>_err_count text.  Returns 0, -EINVAL when ue or ce is
 * missing; *has_de says whether de was there. */
int amd_ras_parse_all(const char *text, uint64_t *ue, uint64_t *ce, uint64_t *de, bool *has_de);
/* A sysfs file's first line as an unsigned number (decimal or 0x hex).
 * Returns 0, -errno, or -EINVAL for garbage. */
int amd_read_u64(const char *path, uint64_t *out);
/* Reads g's firmware versions (firmware.c) into g->fw. */
void amd_firmware_read(struct amd_gpu *g);
/* A small sysfs file, trailing whitespace stripped, at most 4 KiB. */
int amd_read_text(const char *path, char **out);

#endif
