/* The AMD sampler behind metrics (devices/measure.h): AMD's device metrics
 * exporter's families and labels, read from sysfs and the firmware's
 * gpu_metrics table (sample.c, gpu-metrics.c) on the collector thread.
 *
 * Units: one per GPU, or one per partition of a GPU split in more than one
 * (CPX, DPX, QPX), as AMD's exporter sees each partition as a GPU: labels
 * gpu_id (the node-wide unit number: GPU 0's partitions first), serial_number,
 * card_model, the host label, gpu_partition_id (the partition's number in
 * its GPU), gpu_compute_partition_type, gpu_memory_partition_type.  What
 * the kernel reports per partition goes on each partition's unit: its
 * gpu_metrics xcp_stats entry (gpu_gfx_busy_instantaneous and the VCN and
 * JPEG ones, per XCC/engine), its VRAM (KFD's memory bank for its node, and
 * what KFD's processes hold on it), gpu_health.  What the kernel reports
 * per GPU (temperatures, power, clocks, PCIe, XGMI, ECC, throttling) goes
 * on partition 0's unit only, as AMD's exporter leaves it off the others.
 *
 * Attribution: a unit's names are the device IDs the plugin hands out for
 * it (the PCI address for a whole GPU and partition 0, amdgpu_xcp_<N> for
 * the others), its device numbers its DRM card and render nodes (char
 * 226), its processes KFD's per-process VRAM entries
 * (class/kfd/kfd/proc/<pid>/vram_<gpu_id>) on its KFD node(s), which
 * gpu_used_vram is split by.  A pod holding partition 5 is on partition
 * 5's series.  gpu_health mirrors the loop's verdict
 * (amd_sampler_note_health, under a mutex).  The inventory is shared by
 * reference and never written after load.
 *
 * AMD's exporter config.json (--amd-metrics-config, exporter-config.c)
 * shapes the output through a view of the family table: Fields marks the
 * families left out (off), MetricsFieldPrefix renames them (each keeping
 * its plain name as the field --collectors may name), Labels adds the
 * optional labels devlet gives, CustomLabels constant labels,
 * ExtraPodLabels labels the collector values from the pod holding a unit
 * (dev_unit.pod_labels).  The file
 * is looked at once a collection, on the collector thread (one stat), so
 * a change applies from the next collection on without a reload. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/amd/exporter-config.h"
#include "devices/amd/internal.h"
#include "devices/measure.h"

#define DRM_MAJOR 226
#define MAX_PROC_ENTRIES 65536
#define MIB (1024.0 * 1024.0)
#define ENERGY_UJ 15.259 /* gpu_metrics' energy accumulator unit (2^-16 J) */

/* The RAS blocks AMD's exporter has ECC families for: its name, amdgpu's
 * ras/<file>_err_count. */
#define ECC_BLOCKS(X)                                                       \
        X(umc, "umc") X(sdma, "sdma") X(gfx, "gfx") X(mmhub, "mmhub")       \
        X(athub, "athub") X(bif, "pcie_bif") X(hdp, "hdp")                  \
        X(xgmi_wafl, "xgmi_wafl") X(df, "df") X(smn, "smn") X(sem, "sem")   \
        X(mp0, "mp0") X(mp1, "mp1") X(fuse, "fuse") X(mca, "mca")           \
        X(vcn, "vcn") X(jpeg, "jpeg") X(ih, "ih") X(mpio, "mpio")

enum amd_field {
        F_GFX_ACTIVITY,
        F_UMC_ACTIVITY,
        F_MMA_ACTIVITY,
        F_VCN_ACTIVITY,
        F_JPEG_ACTIVITY,
        F_GFX_BUSY_INST,
        F_VCN_BUSY_INST,
        F_JPEG_BUSY_INST,
        F_USED_VRAM,
        F_TOTAL_VRAM,
        F_FREE_VRAM,
        F_USED_VIS_VRAM,
        F_TOTAL_VIS_VRAM,
        F_FREE_VIS_VRAM,
        F_USED_GTT,
        F_TOTAL_GTT,
        F_FREE_GTT,
        F_VRAM_MAX_BW,
        F_EDGE_TEMP,
        F_JUNCTION_TEMP,
        F_MEMORY_TEMP,
        F_HBM_TEMP,
        F_PACKAGE_POWER,
        F_AVG_PACKAGE_POWER,
        F_POWER_USAGE,
        F_ENERGY,
        F_VOLTAGE,
        F_GFX_VOLTAGE,
        F_MEM_VOLTAGE,
        F_CLOCK,
        F_MIN_CLOCK,
        F_MAX_CLOCK,
        F_PCIE_SPEED,
        F_PCIE_MAX_SPEED,
        F_PCIE_BANDWIDTH,
        F_PCIE_BIDIR_BANDWIDTH,
        F_PCIE_REPLAY,
        F_PCIE_RECOVERY,
        F_PCIE_REPLAY_ROLLOVER,
        F_PCIE_NACK_SENT,
        F_PCIE_NACK_RECEIVED,
        F_XGMI_RX,
        F_XGMI_TX,
        F_VIOL_COUNTER,
        F_VIOL_PROCHOT,
        F_VIOL_PPT,
        F_VIOL_SOCKET_THM,
        F_VIOL_VR_THM,
        F_VIOL_HBM_THM,
        F_VIOL_PROCHOT_PCT,
        F_VIOL_PPT_PCT,
        F_VIOL_SOCKET_THM_PCT,
        F_VIOL_VR_THM_PCT,
        F_VIOL_HBM_THM_PCT,
        F_ECC_CORRECT,
        F_ECC_UNCORRECT,
        F_ECC_DEFERRED,
#define ECC_ENUM(name, file) F_ECC_CORRECT_##name, F_ECC_UNCORRECT_##name, F_ECC_DEFERRED_##name,
        ECC_BLOCKS(ECC_ENUM)
#undef ECC_ENUM
        F_HEALTH,
        F_COUNT
};

static const char *const clock_labels[] = { "clock_index", "clock_type", NULL };
static const char *const clock_type_labels[] = { "clock_type", NULL };
static const char *const hbm_labels[] = { "hbm_index", NULL };
static const char *const vcn_labels[] = { "vcn_index", NULL };
static const char *const jpeg_labels[] = { "jpeg_index", NULL };
static const char *const xcc_labels[] = { "xcc_index", NULL };
static const char *const link_labels[] = { "link_index", NULL };

#define G DEV_MEASURE_GAUGE
#define C DEV_MEASURE_COUNTER
#define FAM(f, n, t, h) [f] = { .name = n, .type = t, .help = h }
#define FAML(f, n, h, labels) [f] = { .name = n, .type = G, .help = h, .value_labels = labels }
static const struct dev_measure_family families[F_COUNT] = {
        FAM(F_GFX_ACTIVITY, "gpu_gfx_activity", G, "Graphics engine activity (in %)."),
        FAM(F_UMC_ACTIVITY, "gpu_umc_activity", G, "Memory controller activity (in %)."),
        FAM(F_MMA_ACTIVITY, "gpu_mma_activity", G, "Multimedia engine activity (in %)."),
        FAML(F_VCN_ACTIVITY, "gpu_vcn_activity", "VCN engine activity (in %).", vcn_labels),
        FAML(F_JPEG_ACTIVITY, "gpu_jpeg_activity", "JPEG engine activity (in %).", jpeg_labels),
        FAML(F_GFX_BUSY_INST, "gpu_gfx_busy_instantaneous",
             "Graphics busy, instantaneous, per XCC of the partition (in %).", xcc_labels),
        FAML(F_VCN_BUSY_INST, "gpu_vcn_busy_instantaneous",
             "VCN busy, instantaneous, per engine of the partition (in %).", vcn_labels),
        FAML(F_JPEG_BUSY_INST, "gpu_jpeg_busy_instantaneous",
             "JPEG busy, instantaneous, per engine of the partition (in %).", jpeg_labels),
        [F_USED_VRAM] = { .name = "gpu_used_vram", .type = G, .help = "VRAM in use (in MB).",
                          .share = DEV_SHARE_MEMORY, .share_unit = MIB },
        FAM(F_TOTAL_VRAM, "gpu_total_vram", G, "Total VRAM (in MB)."),
        FAM(F_FREE_VRAM, "gpu_free_vram", G, "Free VRAM (in MB)."),
        FAM(F_USED_VIS_VRAM, "gpu_used_visible_vram", G, "CPU-visible VRAM in use (in MB)."),
        FAM(F_TOTAL_VIS_VRAM, "gpu_total_visible_vram", G, "Total CPU-visible VRAM (in MB)."),
        FAM(F_FREE_VIS_VRAM, "gpu_free_visible_vram", G, "Free CPU-visible VRAM (in MB)."),
        FAM(F_USED_GTT, "gpu_used_gtt", G, "GTT memory in use (in MB)."),
        FAM(F_TOTAL_GTT, "gpu_total_gtt", G, "Total GTT memory (in MB)."),
        FAM(F_FREE_GTT, "gpu_free_gtt", G, "Free GTT memory (in MB)."),
        FAM(F_VRAM_MAX_BW, "gpu_vram_max_bandwidth", G,
            "VRAM bandwidth at the highest memory clock (in GB/s)."),
        FAM(F_EDGE_TEMP, "gpu_edge_temperature", G, "Edge temperature (in C)."),
        FAM(F_JUNCTION_TEMP, "gpu_junction_temperature", G, "Junction (hotspot) temperature (in C)."),
        FAM(F_MEMORY_TEMP, "gpu_memory_temperature", G, "Memory temperature (in C)."),
        FAML(F_HBM_TEMP, "gpu_hbm_temperature", "HBM stack temperature (in C).", hbm_labels),
        FAM(F_PACKAGE_POWER, "gpu_package_power", G, "Package power (in W)."),
        FAM(F_AVG_PACKAGE_POWER, "gpu_average_package_power", G, "Average package power (in W)."),
        FAM(F_POWER_USAGE, "gpu_power_usage", G, "Power usage (in W)."),
        FAM(F_ENERGY, "gpu_energy_consumed", G, "Accumulated energy consumed (in uJ)."),
        FAM(F_VOLTAGE, "gpu_voltage", G, "SoC voltage (in mV)."),
        FAM(F_GFX_VOLTAGE, "gpu_gfx_voltage", G, "Graphics voltage (in mV)."),
        FAM(F_MEM_VOLTAGE, "gpu_memory_voltage", G, "Memory voltage (in mV)."),
        FAML(F_CLOCK, "gpu_clock", "Current clock frequency (in MHz).", clock_labels),
        FAML(F_MIN_CLOCK, "gpu_min_clock", "Lowest clock level (in MHz).", clock_type_labels),
        FAML(F_MAX_CLOCK, "gpu_max_clock", "Highest clock level (in MHz).", clock_type_labels),
        FAM(F_PCIE_SPEED, "pcie_speed", G, "Current PCIe speed (in GT/s)."),
        FAM(F_PCIE_MAX_SPEED, "pcie_max_speed", G, "Maximum PCIe speed (in GT/s)."),
        FAM(F_PCIE_BANDWIDTH, "pcie_bandwidth", G, "Current PCIe bandwidth (in Mb/s)."),
        FAM(F_PCIE_BIDIR_BANDWIDTH, "pcie_bidirectional_bandwidth", G,
            "Accumulated PCIe bandwidth, as the firmware counts it."),
        FAM(F_PCIE_REPLAY, "pcie_replay_count", G, "PCIe replays."),
        FAM(F_PCIE_RECOVERY, "pcie_recovery_count", G, "PCIe L0 to recovery transitions."),
        FAM(F_PCIE_REPLAY_ROLLOVER, "pcie_replay_rollover_count", G, "PCIe replay rollovers."),
        FAM(F_PCIE_NACK_SENT, "pcie_nack_sent_count", G, "PCIe NAKs sent."),
        FAM(F_PCIE_NACK_RECEIVED, "pcie_nack_received_count", G, "PCIe NAKs received."),
        FAML(F_XGMI_RX, "gpu_xgmi_link_rx", "XGMI link data read, accumulated (in KB).", link_labels),
        FAML(F_XGMI_TX, "gpu_xgmi_link_tx", "XGMI link data written, accumulated (in KB).", link_labels),
        FAM(F_VIOL_COUNTER, "gpu_violation_current_accumulated_counter", G,
            "Firmware accumulation cycles the residency counters count in."),
        FAM(F_VIOL_PROCHOT, "gpu_violation_processor_hot_residency_accumulated", G,
            "Processor-hot throttling residency, accumulated."),
        FAM(F_VIOL_PPT, "gpu_violation_ppt_residency_accumulated", G,
            "Package power tracking throttling residency, accumulated."),
        FAM(F_VIOL_SOCKET_THM, "gpu_violation_socket_thermal_residency_accumulated", G,
            "Socket thermal throttling residency, accumulated."),
        FAM(F_VIOL_VR_THM, "gpu_violation_vr_thermal_residency_accumulated", G,
            "Voltage regulator thermal throttling residency, accumulated."),
        FAM(F_VIOL_HBM_THM, "gpu_violation_hbm_thermal_residency_accumulated", G,
            "HBM thermal throttling residency, accumulated."),
        FAM(F_VIOL_PROCHOT_PCT, "gpu_violation_processor_hot_residency_percentage", G,
            "Processor-hot throttling residency since the previous collection (in %)."),
        FAM(F_VIOL_PPT_PCT, "gpu_violation_ppt_residency_percentage", G,
            "Package power tracking throttling residency since the previous collection (in %)."),
        FAM(F_VIOL_SOCKET_THM_PCT, "gpu_violation_socket_thermal_residency_percentage", G,
            "Socket thermal throttling residency since the previous collection (in %)."),
        FAM(F_VIOL_VR_THM_PCT, "gpu_violation_vr_thermal_residency_percentage", G,
            "Voltage regulator thermal throttling residency since the previous collection (in %)."),
        FAM(F_VIOL_HBM_THM_PCT, "gpu_violation_hbm_thermal_residency_percentage", G,
            "HBM thermal throttling residency since the previous collection (in %)."),
        FAM(F_ECC_CORRECT, "gpu_ecc_correct_total", C, "Correctable ECC errors, all blocks."),
        FAM(F_ECC_UNCORRECT, "gpu_ecc_uncorrect_total", C, "Uncorrectable ECC errors, all blocks."),
        FAM(F_ECC_DEFERRED, "gpu_ecc_deferred_total", C, "Deferred ECC errors, all blocks."),
#define ECC_FAM(name, file)                                                                     \
        FAM(F_ECC_CORRECT_##name, "gpu_ecc_correct_" #name, G, "Correctable ECC errors, " file " block."), \
        FAM(F_ECC_UNCORRECT_##name, "gpu_ecc_uncorrect_" #name, G,                              \
            "Uncorrectable ECC errors, " file " block."),                                        \
        FAM(F_ECC_DEFERRED_##name, "gpu_ecc_deferred_" #name, G, "Deferred ECC errors, " file " block."),
        ECC_BLOCKS(ECC_FAM)
#undef ECC_FAM
        FAM(F_HEALTH, "gpu_health", G, "GPU health as devlet judges it (1 healthy, 0 not)."),
};
#undef G
#undef C
#undef FAM
#undef FAML

struct ecc_block {
        const char *file;
        size_t correct, uncorrect, deferred;
};
static const struct ecc_block ecc_blocks[] = {
#define ECC_ROW(name, file) { file, F_ECC_CORRECT_##name, F_ECC_UNCORRECT_##name, F_ECC_DEFERRED_##name },
        ECC_BLOCKS(ECC_ROW)
#undef ECC_ROW
};

/* The throttle residency accumulators of one collection: the percentages
 * are their growth over the accumulation counter's since the previous one
 * (as AMD SMI computes its violation status). */
#define N_RESIDENCIES 5
struct residency {
        bool has;
        double counter, acc[N_RESIDENCIES];
};

static void residency_of(const struct amd_gpu_metrics *gm, struct residency *r)
{
        const double acc[N_RESIDENCIES] = { gm->prochot_acc, gm->ppt_acc, gm->socket_thm_acc,
                                            gm->vr_thm_acc, gm->hbm_thm_acc };
        *r = (struct residency){ .has = !isnan(gm->accumulation_counter), .counter = gm->accumulation_counter };
        memcpy(r->acc, acc, sizeof(acc));
}

static void set_residency_pct(struct dev_unit *u, const struct residency *prev, const struct residency *cur)
{
        static const size_t fam[N_RESIDENCIES] = { F_VIOL_PROCHOT_PCT, F_VIOL_PPT_PCT, F_VIOL_SOCKET_THM_PCT,
                                                   F_VIOL_VR_THM_PCT, F_VIOL_HBM_THM_PCT };
        double span = cur->counter - prev->counter;
        if (!prev->has || !cur->has || !(span > 0))
                return;
        for (size_t k = 0; k < N_RESIDENCIES; k++) {
                double grew = cur->acc[k] - prev->acc[k];
                if (isnan(grew) || grew < 0)
                        continue;
                double pct = 100 * grew / span;
                dev_unit_set(u, fam[k], pct > 100 ? 100 : pct);
        }
}

static const char *const clock_types[AMD_CLK_COUNT] = {
        [AMD_CLK_SYSTEM] = "GPU_CLOCK_TYPE_SYSTEM", [AMD_CLK_MEMORY] = "GPU_CLOCK_TYPE_MEMORY",
        [AMD_CLK_FABRIC] = "GPU_CLOCK_TYPE_FABRIC", [AMD_CLK_SOC] = "GPU_CLOCK_TYPE_SOC",
        [AMD_CLK_VIDEO] = "GPU_CLOCK_TYPE_VIDEO",   [AMD_CLK_DATA] = "GPU_CLOCK_TYPE_DATA",
};

static const char *const resource_prefixes[] = { "amd.com/", NULL };
static const struct dev_devnum_range devnums[] = { { DRM_MAJOR, 0, 511 } };

const struct dev_attr_hints amd_attr_hints = {
        .resource_prefixes = resource_prefixes,
        .cdi_vendor = "amd.com",
        .devnums = devnums,
        .n_devnums = 1,
        .host_label = "hostname", /* AMD's exporter's */
};

bool amd_metrics_field_known(const char *field)
{
        for (size_t f = 0; f < F_COUNT; f++)
                if (strcasecmp(families[f].name, field) == 0)
                        return true;
        return false;
}

/* What one exporter config.json makes of the family table and the labels:
 * names with CommonConfig.MetricsFieldPrefix (the field stays the plain
 * name), the families GPUConfig.Fields leaves out marked off, the optional
 * labels GPUConfig.Labels asks for, GPUConfig.CustomLabels. */
struct amd_view {
        struct dev_measure_family fam[F_COUNT];
        char *names[F_COUNT]; /* prefixed names; NULL without a prefix */
        bool gpu_uuid, driver_version, vbios_version;
        char **custom; /* name, value, ... */
        char **pod_labels; /* metric label, pod label key, ... */
};

static void view_free(struct amd_view *v)
{
        if (!v)
                return;
        for (size_t f = 0; f < F_COUNT; f++)
                free(v->names[f]);
        strv_free(v->custom);
        strv_free(v->pod_labels);
        free(v);
}

static bool field_listed(char *const *fields, const char *name)
{
        for (size_t i = 0; fields[i]; i++)
                if (strcasecmp(fields[i], name) == 0)
                        return true;
        return false;
}

/* ec NULL: AMD's defaults, the table as it is. */
static struct amd_view *view_new(const struct amd_exporter_config *ec)
{
        struct amd_view *v = xcalloc(1, sizeof(*v));
        memcpy(v->fam, families, sizeof(families));
        if (!ec)
                return v;
        for (size_t f = 0; f < F_COUNT; f++) {
                if (ec->prefix && ec->prefix[0]) {
                        v->names[f] = xasprintf("%s%s", ec->prefix, families[f].name);
                        v->fam[f].name = v->names[f];
                        v->fam[f].field = families[f].name;
                }
                v->fam[f].off = ec->fields && !field_listed(ec->fields, families[f].name);
        }
        v->gpu_uuid = strv_contains(ec->labels, "gpu_uuid");
        v->driver_version = strv_contains(ec->labels, "driver_version");
        v->vbios_version = strv_contains(ec->labels, "vbios_version");
        v->custom = strv_copy((const char *const *)ec->custom);
        v->pod_labels = strv_copy((const char *const *)ec->pod_labels);
        return v;
}

struct amd_sampler {
        struct dev_sampler base;
        struct amd_inventory *inv;
        pthread_mutex_t mu; /* guards bad */
        bool *bad;          /* per GPU, the loop's verdict */
        /* the collector thread's alone (sample() is never called twice at once): */
        struct residency *prev; /* per GPU, the previous collection's */
        size_t inv_n_gpus;
        char **vbios;           /* per GPU, read when a config first asks for it */
        char *config_path;      /* --amd-metrics-config; NULL none */
        char *config_text;      /* what the view was made from; NULL: no file */
        struct fs_file_id config_id; /* the file as last read; absent before the first look */
        bool config_looked;
        /* the view of the running config, and the one before it (the
         * previous sample's units may point into it until it is released) */
        struct amd_view *view, *view_prev;
};

static void note(struct dev_sample *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct dev_sample *out, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0)
                abort();
        va_end(ap);
        out->notes = strv_push(out->notes, msg);
        free(msg);
}

/* The exporter config, looked at once a collection (one stat): when the
 * file is another (rewritten, renamed over, a ConfigMap's ..data swapped)
 * and its content differs, the new view applies from this collection on;
 * a file that does not parse keeps the running view, said once per
 * version of the file. */
static void config_refresh(struct amd_sampler *s, struct dev_sample *out)
{
        if (!s->config_path)
                return;
        struct fs_file_id id = fs_file_id_of(s->config_path);
        if (s->config_looked && fs_file_id_same(id, s->config_id))
                return;
        s->config_looked = true;
        s->config_id = id;
        _cleanup_free_ char *text = NULL;
        _cleanup_strv_free_ char **warnings = NULL;
        struct amd_exporter_config *ec = NULL;
        struct diag d = { 0 };
        int r = amd_exporter_config_load(s->config_path, &text, &ec, &warnings, &d);
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                note(out, "AMD metrics exporter config refused, keeping the running one error=\"%s\"",
                     diag_format(&d, buf, sizeof(buf)));
                return;
        }
        if (streq_ptr(text, s->config_text)) {
                amd_exporter_config_free(ec);
                return;
        }
        for (size_t i = 0; warnings && warnings[i]; i++)
                note(out, "AMD metrics exporter config: %s", warnings[i]);
        view_free(s->view_prev);
        s->view_prev = s->view;
        s->view = view_new(ec);
        amd_exporter_config_free(ec);
        free(s->config_text);
        s->config_text = TAKE_PTR(text);
}

static void unit_labels(struct amd_sampler *s, struct dev_unit *u, size_t gpu, size_t unit, unsigned part)
{
        const struct amd_gpu *g = &s->inv->gpus[gpu];
        const struct amd_view *v = s->view;
        char buf[32];
        snprintf(buf, sizeof(buf), "%zu", unit);
        dev_unit_label(u, "gpu_id", buf);
        dev_unit_label(u, "serial_number", g->serial);
        dev_unit_label(u, "card_model", g->product_name);
        u->host_at = u->n_labels;
        snprintf(buf, sizeof(buf), "%u", part);
        dev_unit_label(u, "gpu_partition_id", buf);
        dev_unit_label(u, "gpu_compute_partition_type", g->compute);
        dev_unit_label(u, "gpu_memory_partition_type", g->memory);
        if (v->gpu_uuid)
                dev_unit_label(u, "gpu_uuid", g->unique_id);
        if (v->driver_version)
                dev_unit_label(u, "driver_version", s->inv->driver_version);
        if (v->vbios_version) {
                if (!s->vbios[gpu]) {
                        _cleanup_free_ char *path = xasprintf("%s/vbios_version", g->sysfs_dir);
                        char line[128] = "";
                        if (fs_read_line(path, line, sizeof(line)) < 0)
                                line[0] = '\0';
                        s->vbios[gpu] = xstrdup(line);
                }
                dev_unit_label(u, "vbios_version", s->vbios[gpu]);
        }
        for (size_t i = 0; v->custom && v->custom[i] && v->custom[i + 1]; i += 2)
                dev_unit_label(u, v->custom[i], v->custom[i + 1]);
        for (size_t i = 0; v->pod_labels && v->pod_labels[i] && v->pod_labels[i + 1]; i += 2)
                dev_unit_pod_label(u, v->pod_labels[i], v->pod_labels[i + 1]);
}

/* The unit's references: partitions first..last of g (all of them for a
 * whole GPU, one for a partition's unit). */
static void unit_refs(struct dev_unit *u, const struct amd_gpu *g, size_t unit, size_t first,
                      size_t last)
{
        char buf[32];
        u->key = xstrdup(g->parts[first].id);
        for (size_t k = first; k <= last; k++)
                u->names = strv_push(u->names, g->parts[k].id);
        snprintf(buf, sizeof(buf), "%zu", unit);
        u->local_names = strv_push(u->local_names, buf);
        u->whole = true;
        u->devnums = xcalloc(2 * (last - first + 1) + 1, sizeof(*u->devnums));
        for (size_t k = first; k <= last; k++) {
                if (g->parts[k].card >= 0)
                        u->devnums[u->n_devnums++] = (struct dev_devnum){ DRM_MAJOR, (unsigned)g->parts[k].card };
                if (g->parts[k].render >= 0)
                        u->devnums[u->n_devnums++] = (struct dev_devnum){ DRM_MAJOR, (unsigned)g->parts[k].render };
        }
}

/* KFD's processes on partitions first..last; returns the bytes they hold. */
static uint64_t unit_procs(struct dev_unit *u, const struct amd_gpu *g, size_t first, size_t last,
                           const struct amd_proc_vram *pv, size_t n)
{
        uint64_t total = 0;
        u->procs_known = true;
        for (size_t i = 0; i < n; i++) {
                bool mine = false;
                for (size_t k = first; k <= last && !mine; k++)
                        mine = g->parts[k].gpu_id && g->parts[k].gpu_id == pv[i].gpu_id;
                if (!mine)
                        continue;
                size_t k = 0;
                while (k < u->n_procs && u->procs[k].pid != (unsigned)pv[i].pid)
                        k++;
                if (k == u->n_procs) {
                        u->procs = xrealloc(u->procs, (u->n_procs + 1) * sizeof(*u->procs));
                        u->procs[u->n_procs++] = (struct dev_proc){ .pid = (unsigned)pv[i].pid,
                                                                    .util = -1, .enc = -1, .dec = -1 };
                }
                u->procs[k].mem_bytes += pv[i].bytes;
                total += pv[i].bytes;
        }
        return total;
}

static void set_if(struct dev_unit *u, size_t f, double v)
{
        if (!isnan(v))
                dev_unit_set(u, f, v);
}

/* One series per present element of a gpu_metrics array, labelled by its
 * index. */
static void add_array(struct dev_unit *u, size_t f, const double *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (isnan(v[i]))
                        continue;
                char idx[24];
                snprintf(idx, sizeof(idx), "%zu", i);
                const char *labels[] = { idx, NULL };
                dev_unit_add(u, f, v[i], labels);
        }
}

static void add_clock(struct dev_unit *u, size_t f, size_t index, enum amd_clock_kind kind, double v)
{
        char idx[24];
        snprintf(idx, sizeof(idx), "%zu", index);
        const char *both[] = { idx, clock_types[kind], NULL };
        const char *type[] = { clock_types[kind], NULL };
        dev_unit_add(u, f, v, f == F_CLOCK ? both : type);
}

/* gpu_clock: the firmware's current clocks per instance where the table
 * has them, the marked DPM level otherwise; min and max from the levels. */
static void set_clocks(struct dev_unit *u, const struct amd_sample *m)
{
        const struct amd_gpu_metrics *gm = &m->gm;
        struct {
                enum amd_clock_kind kind;
                const double *v;
                size_t n;
        } const from_gm[] = {
                { AMD_CLK_SYSTEM, gm->gfxclk, AMD_GM_GFX_CLKS }, { AMD_CLK_MEMORY, &gm->uclk, 1 },
                { AMD_CLK_SOC, gm->socclk, AMD_GM_CLKS },        { AMD_CLK_VIDEO, gm->vclk, AMD_GM_CLKS },
                { AMD_CLK_DATA, gm->dclk, AMD_GM_CLKS },
        };
        bool done[AMD_CLK_COUNT] = { false };
        for (size_t i = 0; i < ARRAY_SIZE(from_gm); i++)
                for (size_t k = 0; k < from_gm[i].n; k++)
                        if (!isnan(from_gm[i].v[k])) {
                                add_clock(u, F_CLOCK, k, from_gm[i].kind, from_gm[i].v[k]);
                                done[from_gm[i].kind] = true;
                        }
        for (int k = 0; k < AMD_CLK_COUNT; k++) {
                if (!m->clk[k].has)
                        continue;
                if (!done[k] && !isnan(m->clk[k].cur))
                        add_clock(u, F_CLOCK, 0, (enum amd_clock_kind)k, m->clk[k].cur);
                add_clock(u, F_MIN_CLOCK, 0, (enum amd_clock_kind)k, m->clk[k].min);
                add_clock(u, F_MAX_CLOCK, 0, (enum amd_clock_kind)k, m->clk[k].max);
        }
}

static void set_ecc(struct dev_unit *u, const struct amd_sample *m)
{
        if (!m->has_ecc)
                return;
        dev_unit_set(u, F_ECC_CORRECT, (double)m->ecc_correct);
        dev_unit_set(u, F_ECC_UNCORRECT, (double)m->ecc_uncorrect);
        if (m->has_de)
                dev_unit_set(u, F_ECC_DEFERRED, (double)m->ecc_deferred);
        for (size_t i = 0; i < m->n_ras; i++)
                for (size_t b = 0; b < ARRAY_SIZE(ecc_blocks); b++) {
                        if (strcmp(m->ras[i].block, ecc_blocks[b].file) != 0)
                                continue;
                        dev_unit_set(u, ecc_blocks[b].correct, (double)m->ras[i].ce);
                        dev_unit_set(u, ecc_blocks[b].uncorrect, (double)m->ras[i].ue);
                        if (m->ras[i].has_de)
                                dev_unit_set(u, ecc_blocks[b].deferred, (double)m->ras[i].de);
                }
}

/* What the kernel reports for the whole GPU: on its only unit, or its
 * partition 0's. */
static void set_gpu_wide(struct dev_unit *u, const struct amd_sample *m, bool whole)
{
        const struct amd_gpu_metrics *gm = &m->gm;
        if (m->has_gfx)
                dev_unit_set(u, F_GFX_ACTIVITY, m->gfx_activity);
        else
                set_if(u, F_GFX_ACTIVITY, gm->gfx_activity);
        if (m->has_umc)
                dev_unit_set(u, F_UMC_ACTIVITY, m->umc_activity);
        else
                set_if(u, F_UMC_ACTIVITY, gm->umc_activity);
        set_if(u, F_MMA_ACTIVITY, gm->mm_activity);
        add_array(u, F_VCN_ACTIVITY, gm->vcn_activity, AMD_GM_VCN);
        add_array(u, F_JPEG_ACTIVITY, gm->jpeg_activity, 32);
        if (whole && m->has_vram) {
                dev_unit_set(u, F_USED_VRAM, m->vram_used_mb);
                dev_unit_set(u, F_TOTAL_VRAM, m->vram_total_mb);
                dev_unit_set(u, F_FREE_VRAM, m->vram_free_mb);
        }
        if (m->has_vis_vram) {
                dev_unit_set(u, F_USED_VIS_VRAM, m->vis_used_mb);
                dev_unit_set(u, F_TOTAL_VIS_VRAM, m->vis_total_mb);
                dev_unit_set(u, F_FREE_VIS_VRAM, m->vis_total_mb > m->vis_used_mb ? m->vis_total_mb - m->vis_used_mb : 0);
        }
        if (m->has_gtt) {
                dev_unit_set(u, F_USED_GTT, m->gtt_used_mb);
                dev_unit_set(u, F_TOTAL_GTT, m->gtt_total_mb);
                dev_unit_set(u, F_FREE_GTT, m->gtt_total_mb > m->gtt_used_mb ? m->gtt_total_mb - m->gtt_used_mb : 0);
        }
        set_if(u, F_VRAM_MAX_BW, gm->mem_max_bandwidth);
        if (m->has_edge)
                dev_unit_set(u, F_EDGE_TEMP, m->edge_c);
        else
                set_if(u, F_EDGE_TEMP, gm->temp_edge);
        if (m->has_junction)
                dev_unit_set(u, F_JUNCTION_TEMP, m->junction_c);
        else
                set_if(u, F_JUNCTION_TEMP, gm->temp_hotspot);
        if (m->has_mem_temp)
                dev_unit_set(u, F_MEMORY_TEMP, m->mem_c);
        else
                set_if(u, F_MEMORY_TEMP, gm->temp_mem);
        add_array(u, F_HBM_TEMP, gm->temp_hbm, AMD_GM_HBM);
        /* v1.3's socket power is an average, v1.4's the current one */
        double gm_power = gm->socket_power;
        bool gm_average = gm->content <= 3;
        if (m->has_power) {
                dev_unit_set(u, F_PACKAGE_POWER, m->power_w);
                dev_unit_set(u, F_POWER_USAGE, m->power_w);
        } else if (!isnan(gm_power)) {
                dev_unit_set(u, F_PACKAGE_POWER, gm_power);
                dev_unit_set(u, F_POWER_USAGE, gm_power);
        }
        if (m->has_avg_power)
                dev_unit_set(u, F_AVG_PACKAGE_POWER, m->avg_power_w);
        else if (gm_average)
                set_if(u, F_AVG_PACKAGE_POWER, gm_power);
        if (m->has_energy)
                dev_unit_set(u, F_ENERGY, m->energy_uj);
        else
                set_if(u, F_ENERGY, gm->energy_acc * ENERGY_UJ);
        set_if(u, F_VOLTAGE, gm->voltage_soc);
        set_if(u, F_GFX_VOLTAGE, gm->voltage_gfx);
        set_if(u, F_MEM_VOLTAGE, gm->voltage_mem);
        set_clocks(u, m);
        if (m->has_pcie_speed)
                dev_unit_set(u, F_PCIE_SPEED, m->pcie_speed_gts);
        else
                set_if(u, F_PCIE_SPEED, gm->pcie_speed / 10);
        if (m->has_pcie_max_speed)
                dev_unit_set(u, F_PCIE_MAX_SPEED, m->pcie_max_speed_gts);
        set_if(u, F_PCIE_BANDWIDTH, gm->pcie_bw_inst);
        set_if(u, F_PCIE_BIDIR_BANDWIDTH, gm->pcie_bw_acc);
        if (!isnan(gm->pcie_replay))
                dev_unit_set(u, F_PCIE_REPLAY, gm->pcie_replay);
        else if (m->has_pcie_replay)
                dev_unit_set(u, F_PCIE_REPLAY, (double)m->pcie_replay);
        set_if(u, F_PCIE_RECOVERY, gm->pcie_l0_recov);
        set_if(u, F_PCIE_REPLAY_ROLLOVER, gm->pcie_replay_rover);
        set_if(u, F_PCIE_NACK_SENT, gm->pcie_nak_sent);
        set_if(u, F_PCIE_NACK_RECEIVED, gm->pcie_nak_rcvd);
        add_array(u, F_XGMI_RX, gm->xgmi_read, AMD_GM_XGMI_LINKS);
        add_array(u, F_XGMI_TX, gm->xgmi_write, AMD_GM_XGMI_LINKS);
        set_if(u, F_VIOL_COUNTER, gm->accumulation_counter);
        set_if(u, F_VIOL_PROCHOT, gm->prochot_acc);
        set_if(u, F_VIOL_PPT, gm->ppt_acc);
        set_if(u, F_VIOL_SOCKET_THM, gm->socket_thm_acc);
        set_if(u, F_VIOL_VR_THM, gm->vr_thm_acc);
        set_if(u, F_VIOL_HBM_THM, gm->hbm_thm_acc);
        set_ecc(u, m);
}

/* What the kernel reports per partition (gpu_metrics' xcp_stats[part]). */
static void set_partition(struct dev_unit *u, const struct amd_sample *m, unsigned part)
{
        if (part >= AMD_GM_XCP)
                return;
        const struct amd_gm_xcp *x = &m->gm.xcp[part];
        add_array(u, F_GFX_BUSY_INST, x->gfx_busy_inst, AMD_GM_XCC);
        add_array(u, F_VCN_BUSY_INST, x->vcn_busy, AMD_GM_VCN);
        add_array(u, F_JPEG_BUSY_INST, x->jpeg_busy, AMD_GM_JPEG);
}

static int amd_sample(struct dev_sampler *ds, struct dev_sample *out)
{
        struct amd_sampler *s = (struct amd_sampler *)ds;
        const struct amd_inventory *inv = s->inv;
        struct amd_proc_vram *pv = NULL;
        config_refresh(s, out);
        const struct dev_measure_family *fams = s->view->fam;
        size_t n_pv = inv->kfd ? amd_proc_vram(inv->sysfs_root, MAX_PROC_ENTRIES, &pv) : 0;
        _cleanup_free_ struct amd_sample *m = xcalloc(1, sizeof(*m));
        size_t unit = 0;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct amd_gpu *g = &inv->gpus[i];
                amd_sample_gpu(g, m);
                struct residency now;
                residency_of(&m->gm, &now);
                pthread_mutex_lock(&s->mu);
                bool bad = s->bad[i];
                pthread_mutex_unlock(&s->mu);
                bool whole = g->n_parts <= 1;
                size_t n_units = whole ? 1 : g->n_parts;
                for (size_t p = 0; p < n_units; p++, unit++) {
                        struct dev_unit *u = dev_sample_add(out, fams, F_COUNT, &amd_attr_hints);
                        size_t first = whole ? 0 : p, last = whole ? (g->n_parts ? g->n_parts - 1 : 0) : p;
                        unit_labels(s, u, i, unit, whole ? 0 : g->parts[p].index);
                        if (g->n_parts)
                                unit_refs(u, g, unit, first, last);
                        else
                                u->key = xstrdup(g->bdf);
                        if (p == 0) {
                                set_gpu_wide(u, m, whole);
                                set_residency_pct(u, &s->prev[i], &now);
                        }
                        set_partition(u, m, whole ? 0 : g->parts[p].index);
                        uint64_t held = inv->kfd && g->n_parts ? unit_procs(u, g, first, last, pv, n_pv) : 0;
                        /* a partition's VRAM: its KFD node's bank, what KFD's processes hold */
                        if (!whole && g->parts[p].vram) {
                                double total = (double)g->parts[p].vram / MIB, used = (double)held / MIB;
                                dev_unit_set(u, F_USED_VRAM, used);
                                dev_unit_set(u, F_TOTAL_VRAM, total);
                                dev_unit_set(u, F_FREE_VRAM, total > used ? total - used : 0);
                        }
                        dev_unit_set(u, F_HEALTH, bad || g->problem ? 0 : 1);
                }
                s->prev[i] = now;
        }
        free(pv);
        return 0;
}

static void amd_sampler_free(struct dev_sampler *ds)
{
        struct amd_sampler *s = (struct amd_sampler *)ds;
        amd_inventory_free(s->inv);
        pthread_mutex_destroy(&s->mu);
        free(s->bad);
        free(s->prev);
        for (size_t i = 0; s->vbios && i < s->inv_n_gpus; i++)
                free(s->vbios[i]);
        free(s->vbios);
        free(s->config_path);
        free(s->config_text);
        view_free(s->view);
        view_free(s->view_prev);
        free(s);
}

static const struct dev_sampler_ops amd_sampler_ops = {
        .name = "amd",
        .families = families,
        .n_families = F_COUNT,
        .sample = amd_sample,
        .free = amd_sampler_free,
};

struct dev_sampler *amd_sampler_new(struct amd_inventory *inv, const struct amd_options *o)
{
        struct amd_sampler *s = xcalloc(1, sizeof(*s));
        dev_sampler_init(&s->base, &amd_sampler_ops);
        s->inv = amd_inventory_ref(inv);
        s->bad = xcalloc(inv->n_gpus + 1, sizeof(bool));
        s->prev = xcalloc(inv->n_gpus + 1, sizeof(*s->prev));
        s->inv_n_gpus = inv->n_gpus;
        s->vbios = xcalloc(inv->n_gpus + 1, sizeof(*s->vbios));
        /* the config as it was loaded (its warnings told then); the first
         * sample looks at the file again */
        struct amd_exporter_config *ec = NULL;
        if (o && o->metrics_config && o->metrics_config[0]) {
                s->config_path = xstrdup(o->metrics_config);
                const char *text = o->metrics_config_text ? o->metrics_config_text[0] : NULL;
                struct diag d = { 0 };
                if (text && amd_exporter_config_parse(s->config_path, text, strlen(text), &ec, NULL, &d) == 0)
                        s->config_text = xstrdup(text);
        }
        s->view = view_new(ec);
        amd_exporter_config_free(ec);
        pthread_mutex_init(&s->mu, NULL);
        return &s->base;
}

void amd_sampler_note_health(struct dev_sampler *ds, size_t gpu, bool bad)
{
        struct amd_sampler *s = (struct amd_sampler *)ds;
        if (!s || gpu >= s->inv->n_gpus)
                return;
        pthread_mutex_lock(&s->mu);
        s->bad[gpu] = bad;
        pthread_mutex_unlock(&s->mu);
}
