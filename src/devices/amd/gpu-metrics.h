/* amdgpu's gpu_metrics table (sysfs device/gpu_metrics): a binary struct
 * the power-management firmware fills, versioned by its header (structure
 * size u16, format revision u8, content revision u8; layouts in the
 * kernel's kgd_pp_interface.h, gpu_metrics_v<format>_<content>).  The
 * parser knows the dGPU layouts v1.1-v1.8 by their exact sizes and refuses
 * the rest (APU v2.x/v3.x, the pointer-based v1.9, unknown sizes).  Pure:
 * no I/O, never logs; every field is read only when its bytes lie inside
 * both the buffer and structure_size, and all-ones ("not supported") reads
 * as absent. */
#ifndef DEVLET_DEVICES_AMD_GPU_METRICS_H
#define DEVLET_DEVICES_AMD_GPU_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AMD_GM_MAX_SIZE 4096 /* the largest layout (v1.8) is 3360 bytes */
#define AMD_GM_HBM 4
#define AMD_GM_XGMI_LINKS 8
#define AMD_GM_GFX_CLKS 8
#define AMD_GM_CLKS 4
#define AMD_GM_VCN 4
#define AMD_GM_JPEG 40
#define AMD_GM_XCC 8
#define AMD_GM_XCP 8

/* One partition's (XCP) figures, v1.6 and later. */
struct amd_gm_xcp {
        double gfx_busy_inst[AMD_GM_XCC];     /* percent, per XCC of the partition */
        double vcn_busy[AMD_GM_VCN];          /* percent */
        double jpeg_busy[AMD_GM_JPEG];        /* percent */
        double gfx_busy_acc[AMD_GM_XCC];
        double gfx_below_host_limit_acc[AMD_GM_XCC]; /* v1.7 (v1.8: power) */
        double gfx_below_host_limit_thm_acc[AMD_GM_XCC]; /* v1.8 */
        double gfx_low_utilization_acc[AMD_GM_XCC];      /* v1.8 */
};

/* Every value is NAN when the table has no such field, the field lies past
 * the bytes read, or the firmware marked it unsupported (all ones).  Units
 * as the kernel gives them. */
struct amd_gpu_metrics {
        unsigned format, content, size;
        double temp_edge, temp_hotspot, temp_mem, temp_vrgfx, temp_vrsoc, temp_vrmem; /* C */
        double temp_hbm[AMD_GM_HBM];
        double gfx_activity, umc_activity, mm_activity; /* percent */
        double vcn_activity[AMD_GM_VCN], jpeg_activity[AMD_GM_JPEG];
        double socket_power;   /* W: v1.3 average, v1.4+ current */
        double energy_acc;     /* the raw accumulator, 15.259 uJ units */
        double gfxclk[AMD_GM_GFX_CLKS], socclk[AMD_GM_CLKS], vclk[AMD_GM_CLKS], dclk[AMD_GM_CLKS];
        double uclk;           /* MHz */
        double voltage_soc, voltage_gfx, voltage_mem; /* mV */
        double pcie_width, pcie_speed; /* lanes, 0.1 GT/s */
        double pcie_bw_acc, pcie_bw_inst, pcie_l0_recov, pcie_replay, pcie_replay_rover;
        double pcie_nak_sent, pcie_nak_rcvd, pcie_other_end_recovery;
        double xgmi_width, xgmi_speed;
        double xgmi_read[AMD_GM_XGMI_LINKS], xgmi_write[AMD_GM_XGMI_LINKS]; /* KB */
        double xgmi_link_status[AMD_GM_XGMI_LINKS];
        double accumulation_counter, prochot_acc, ppt_acc, socket_thm_acc, vr_thm_acc, hbm_thm_acc;
        double mem_max_bandwidth; /* GB/s */
        double num_partition;
        struct amd_gm_xcp xcp[AMD_GM_XCP];
};

/* Parses len bytes of a gpu_metrics file into *out (every field set, NAN
 * where absent).  A file shorter than its structure_size (truncated) keeps
 * the fields it holds.  Returns 0, -EINVAL for a header that cannot be
 * (under 4 bytes, a structure_size under 4), -ENOTSUP for a layout not
 * known (out then holds the header only). */
int amd_gpu_metrics_parse(const void *buf, size_t len, struct amd_gpu_metrics *out);

/* Reads and parses <dir>/gpu_metrics.  Returns 0, -errno, or the parser's
 * error. */
int amd_gpu_metrics_read(const char *dir, struct amd_gpu_metrics *out);

#endif
