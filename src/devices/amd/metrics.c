/* The AMD sampler behind metrics (devices/measure.h): AMD's device metrics
 * exporter's families and labels, read from sysfs (sample.c) on the
 * collector thread.
 *
 * One unit per GPU (a partitioned GPU's partitions share its activity,
 * VRAM, power and clocks, which sysfs reports per GPU): labels gpu_id,
 * serial_number, card_model, the host label, gpu_partition_id,
 * gpu_compute_partition_type, gpu_memory_partition_type.  Attribution: the
 * unit's names are every device ID the plugin hands out for the GPU (the
 * PCI address, amdgpu_xcp_<N>), its device numbers every DRM card and
 * render node of its partitions (char 226), and its processes KFD's
 * per-process VRAM entries (class/kfd/kfd/proc/<pid>/vram_<gpu_id>) for
 * any of its partitions, which gpu_used_vram is split by.  gpu_health
 * mirrors the loop's verdict (amd_metrics_note_health, under a mutex).
 * The inventory is shared by reference and never written after load. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"
#include "devices/measure.h"

#define DRM_MAJOR 226
#define MAX_PROC_ENTRIES 65536
#define MIB (1024.0 * 1024.0)

enum amd_field {
        F_GFX_ACTIVITY,
        F_UMC_ACTIVITY,
        F_USED_VRAM,
        F_TOTAL_VRAM,
        F_FREE_VRAM,
        F_EDGE_TEMP,
        F_JUNCTION_TEMP,
        F_MEMORY_TEMP,
        F_PACKAGE_POWER,
        F_POWER_USAGE,
        F_ENERGY,
        F_CLOCK,
        F_ECC_CORRECT,
        F_ECC_UNCORRECT,
        F_HEALTH,
        F_COUNT
};

static const char *const clock_labels[] = { "clock_type", NULL };

#define G DEV_MEASURE_GAUGE
#define C DEV_MEASURE_COUNTER
static const struct dev_measure_family families[F_COUNT] = {
        [F_GFX_ACTIVITY] = { "gpu_gfx_activity", G, "Graphics engine activity (in %).", 0, 0, NULL },
        [F_UMC_ACTIVITY] = { "gpu_umc_activity", G, "Memory controller activity (in %).", 0, 0, NULL },
        [F_USED_VRAM] = { "gpu_used_vram", G, "VRAM in use (in MB).", DEV_SHARE_MEMORY, MIB, NULL },
        [F_TOTAL_VRAM] = { "gpu_total_vram", G, "Total VRAM (in MB).", 0, 0, NULL },
        [F_FREE_VRAM] = { "gpu_free_vram", G, "Free VRAM (in MB).", 0, 0, NULL },
        [F_EDGE_TEMP] = { "gpu_edge_temperature", G, "Edge temperature (in C).", 0, 0, NULL },
        [F_JUNCTION_TEMP] = { "gpu_junction_temperature", G, "Junction (hotspot) temperature (in C).",
                              0, 0, NULL },
        [F_MEMORY_TEMP] = { "gpu_memory_temperature", G, "Memory temperature (in C).", 0, 0, NULL },
        [F_PACKAGE_POWER] = { "gpu_package_power", G, "Package power (in W).", 0, 0, NULL },
        [F_POWER_USAGE] = { "gpu_power_usage", G, "Power usage (in W).", 0, 0, NULL },
        [F_ENERGY] = { "gpu_energy_consumed", G, "Accumulated energy consumed (in uJ).", 0, 0, NULL },
        [F_CLOCK] = { "gpu_clock", G, "Current system (graphics) clock (in MHz).", 0, 0, clock_labels },
        [F_ECC_CORRECT] = { "gpu_ecc_correct_total", C, "Correctable ECC errors, all blocks.", 0, 0,
                            NULL },
        [F_ECC_UNCORRECT] = { "gpu_ecc_uncorrect_total", C, "Uncorrectable ECC errors, all blocks.", 0,
                              0, NULL },
        [F_HEALTH] = { "gpu_health", G, "GPU health as devlet judges it (1 healthy, 0 not).", 0, 0,
                       NULL },
};
#undef G
#undef C

static const char *const resource_prefixes[] = { "amd.com/", NULL };
static const struct dev_devnum_range devnums[] = { { DRM_MAJOR, 0, 511 } };

const struct dev_attr_hints amd_attr_hints = {
        .resource_prefixes = resource_prefixes,
        .cdi_vendor = "amd.com",
        .devnums = devnums,
        .n_devnums = 1,
        .host_label = "hostname", /* AMD's exporter's */
};

struct amd_sampler {
        struct dev_sampler base;
        struct amd_inventory *inv;
        pthread_mutex_t mu; /* guards bad */
        bool *bad;          /* per GPU, the loop's verdict */
};

static void unit_labels(struct dev_unit *u, const struct amd_gpu *g, size_t index)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%zu", index);
        dev_unit_label(u, "gpu_id", buf);
        dev_unit_label(u, "serial_number", g->serial);
        dev_unit_label(u, "card_model", g->product_name);
        u->host_at = u->n_labels;
        dev_unit_label(u, "gpu_partition_id", "0");
        dev_unit_label(u, "gpu_compute_partition_type", g->compute);
        dev_unit_label(u, "gpu_memory_partition_type", g->memory);
}

static void unit_refs(struct dev_unit *u, const struct amd_gpu *g, size_t index)
{
        char buf[32];
        u->key = xstrdup(g->bdf);
        for (size_t k = 0; k < g->n_parts; k++)
                u->names = strv_push(u->names, g->parts[k].id);
        snprintf(buf, sizeof(buf), "%zu", index);
        u->local_names = strv_push(u->local_names, buf);
        u->whole = true;
        u->devnums = xcalloc(2 * g->n_parts + 1, sizeof(*u->devnums));
        for (size_t k = 0; k < g->n_parts; k++) {
                if (g->parts[k].card >= 0)
                        u->devnums[u->n_devnums++] = (struct dev_devnum){ DRM_MAJOR, (unsigned)g->parts[k].card };
                if (g->parts[k].render >= 0)
                        u->devnums[u->n_devnums++] = (struct dev_devnum){ DRM_MAJOR, (unsigned)g->parts[k].render };
        }
}

static void unit_procs(struct dev_unit *u, const struct amd_gpu *g, const struct amd_proc_vram *pv,
                       size_t n)
{
        u->procs_known = true;
        for (size_t i = 0; i < n; i++) {
                bool mine = false;
                for (size_t k = 0; k < g->n_parts && !mine; k++)
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
        }
}

static int amd_sample(struct dev_sampler *ds, struct dev_sample *out)
{
        struct amd_sampler *s = (struct amd_sampler *)ds;
        const struct amd_inventory *inv = s->inv;
        struct amd_proc_vram *pv = NULL;
        size_t n_pv = inv->kfd ? amd_proc_vram(inv->sysfs_root, MAX_PROC_ENTRIES, &pv) : 0;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct amd_gpu *g = &inv->gpus[i];
                struct amd_sample m;
                amd_sample_gpu(g, &m);
                struct dev_unit *u = dev_sample_add(out, families, F_COUNT, &amd_attr_hints);
                unit_labels(u, g, i);
                unit_refs(u, g, i);
                if (m.has_gfx)
                        dev_unit_set(u, F_GFX_ACTIVITY, m.gfx_activity);
                if (m.has_umc)
                        dev_unit_set(u, F_UMC_ACTIVITY, m.umc_activity);
                if (m.has_vram) {
                        dev_unit_set(u, F_USED_VRAM, m.vram_used_mb);
                        dev_unit_set(u, F_TOTAL_VRAM, m.vram_total_mb);
                        dev_unit_set(u, F_FREE_VRAM, m.vram_free_mb);
                }
                if (m.has_edge)
                        dev_unit_set(u, F_EDGE_TEMP, m.edge_c);
                if (m.has_junction)
                        dev_unit_set(u, F_JUNCTION_TEMP, m.junction_c);
                if (m.has_mem_temp)
                        dev_unit_set(u, F_MEMORY_TEMP, m.mem_c);
                if (m.has_power) {
                        dev_unit_set(u, F_PACKAGE_POWER, m.power_w);
                        dev_unit_set(u, F_POWER_USAGE, m.power_w);
                }
                if (m.has_energy)
                        dev_unit_set(u, F_ENERGY, m.energy_uj);
                if (m.has_sclk) {
                        dev_unit_set(u, F_CLOCK, m.sclk_mhz);
                        u->values[F_CLOCK].labels = strv_push(NULL, "GPU_CLOCK_TYPE_SYSTEM");
                }
                if (m.has_ecc) {
                        dev_unit_set(u, F_ECC_CORRECT, (double)m.ecc_correct);
                        dev_unit_set(u, F_ECC_UNCORRECT, (double)m.ecc_uncorrect);
                }
                pthread_mutex_lock(&s->mu);
                bool bad = s->bad[i];
                pthread_mutex_unlock(&s->mu);
                dev_unit_set(u, F_HEALTH, bad || g->problem ? 0 : 1);
                if (inv->kfd)
                        unit_procs(u, g, pv, n_pv);
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
        free(s);
}

static const struct dev_sampler_ops amd_sampler_ops = {
        .name = "amd",
        .families = families,
        .n_families = F_COUNT,
        .sample = amd_sample,
        .free = amd_sampler_free,
};

struct dev_sampler *amd_sampler_new(struct amd_inventory *inv)
{
        struct amd_sampler *s = xcalloc(1, sizeof(*s));
        dev_sampler_init(&s->base, &amd_sampler_ops);
        s->inv = amd_inventory_ref(inv);
        s->bad = xcalloc(inv->n_gpus + 1, sizeof(bool));
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
