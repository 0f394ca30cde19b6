/* Measurements of one AMD GPU from sysfs, in the units AMD's device
 * metrics exporter reports them (percent, MB, degrees C, W, uJ, MHz):
 *   gpu_busy_percent, mem_busy_percent          gfx and UMC activity
 *   mem_info_vram_used / mem_info_vram_total    VRAM (bytes -> MB)
 *   hwmon temp<N>_input by temp<N>_label        edge, junction, mem (m°C)
 *   hwmon power1_average or power1_input        package power (uW)
 *   hwmon energy1_input                         energy (uJ), where exposed
 *   mem_info_vis_vram_*, mem_info_gtt_*         visible VRAM, GTT (bytes -> MB)
 *   pp_dpm_{sclk,mclk,fclk,socclk,vclk,dclk}    clocks: the '*' level, lowest, highest
 *   current/max_link_speed, pcie_replay_count   PCIe (the PCI device's files)
 *   ras/<block>_err_count                       ECC (ue:, ce:, de:) per block and summed
 *   gpu_metrics                                 the firmware's table (gpu-metrics.c)
 * and KFD's per-process VRAM (class/kfd/kfd/proc/<pid>/vram_<gpu_id>).
 * A file that is missing or unreadable leaves its has_* false.  Meant for
 * a sampling thread: no shared state, never logs. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

#define MB (1024.0 * 1024.0)

static bool read_num(const char *dir, const char *name, double *out)
{
        if (!dir)
                return false;
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
        uint64_t v;
        if (amd_read_u64(p, &v) < 0)
                return false;
        *out = (double)v;
        return true;
}

static bool read_dpm(const char *dir, const char *name, double *out)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
        _cleanup_free_ char *t = NULL;
        unsigned mhz;
        if (amd_read_text(p, &t) < 0 || amd_dpm_current(t, &mhz) < 0)
                return false;
        *out = mhz;
        return true;
}

static void temps(const char *hw, struct amd_sample *s)
{
        for (int n = 1; hw && n <= 8; n++) {
                char name[32];
                snprintf(name, sizeof(name), "temp%d_label", n);
                _cleanup_free_ char *lp = xasprintf("%s/%s", hw, name);
                _cleanup_free_ char *label = NULL;
                double v;
                snprintf(name, sizeof(name), "temp%d_input", n);
                if (amd_read_text(lp, &label) < 0 || !read_num(hw, name, &v))
                        continue;
                if (strcmp(label, "edge") == 0) {
                        s->edge_c = v / 1000.0;
                        s->has_edge = true;
                } else if (strcmp(label, "junction") == 0) {
                        s->junction_c = v / 1000.0;
                        s->has_junction = true;
                } else if (strcmp(label, "mem") == 0) {
                        s->mem_c = v / 1000.0;
                        s->has_mem_temp = true;
                }
        }
}

static void ecc(const struct amd_gpu *g, struct amd_sample *s)
{
        for (size_t i = 0; g->ras_files && g->ras_files[i]; i++) {
                _cleanup_free_ char *t = NULL;
                uint64_t ue, ce, de;
                bool has_de;
                if (amd_read_text(g->ras_files[i], &t) < 0 ||
                    amd_ras_parse_all(t, &ue, &ce, &de, &has_de) < 0)
                        continue;
                s->ecc_uncorrect += ue;
                s->ecc_correct += ce;
                s->ecc_deferred += de;
                s->has_ecc = true;
                s->has_de |= has_de;
                const char *file = strrchr(g->ras_files[i], '/');
                file = file ? file + 1 : g->ras_files[i];
                size_t len = strlen(file) - strlen("_err_count");
                if (s->n_ras >= AMD_RAS_BLOCKS_MAX || len >= sizeof(s->ras[0].block))
                        continue;
                struct amd_ras_count *rc = &s->ras[s->n_ras++];
                *rc = (struct amd_ras_count){ .ue = ue, .ce = ce, .de = de, .has_de = has_de };
                memcpy(rc->block, file, len);
        }
}

static const char *const dpm_files[AMD_CLK_COUNT] = {
        [AMD_CLK_SYSTEM] = "pp_dpm_sclk", [AMD_CLK_MEMORY] = "pp_dpm_mclk",
        [AMD_CLK_FABRIC] = "pp_dpm_fclk", [AMD_CLK_SOC] = "pp_dpm_socclk",
        [AMD_CLK_VIDEO] = "pp_dpm_vclk",  [AMD_CLK_DATA] = "pp_dpm_dclk",
};

static void clocks(const char *d, struct amd_sample *s)
{
        for (int k = 0; k < AMD_CLK_COUNT; k++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", d, dpm_files[k]);
                _cleanup_free_ char *t = NULL;
                unsigned cur = 0, lo, hi;
                if (amd_read_text(p, &t) < 0)
                        continue;
                int r = amd_dpm_levels(t, &cur, &lo, &hi);
                if (r < 0 && r != -ENOENT)
                        continue;
                s->clk[k] = (struct amd_clock_levels){ .has = true, .min = lo, .max = hi,
                                                       .cur = r == 0 ? cur : NAN };
        }
}

/* "32.0 GT/s PCIe" (current_link_speed, max_link_speed) in GT/s. */
static bool read_gts(const char *dir, const char *name, double *out)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
        _cleanup_free_ char *t = NULL;
        if (amd_read_text(p, &t) < 0)
                return false;
        char *end;
        double v = strtod(t, &end);
        if (end == t || strncmp(end, " GT/s", 5) != 0 || !(v > 0 && v < 1000))
                return false;
        *out = v;
        return true;
}

static bool read_mem(const char *d, const char *kind, double *used_mb, double *total_mb)
{
        _cleanup_free_ char *u = xasprintf("mem_info_%s_used", kind);
        _cleanup_free_ char *t = xasprintf("mem_info_%s_total", kind);
        double used, total;
        if (!read_num(d, u, &used) || !read_num(d, t, &total))
                return false;
        *used_mb = used / MB;
        *total_mb = total / MB;
        return true;
}

void amd_sample_gpu(const struct amd_gpu *g, struct amd_sample *out)
{
        *out = (struct amd_sample){ .healthy = !g->problem };
        struct amd_sample *s = out;
        const char *d = g->sysfs_dir;
        s->has_gfx = read_num(d, "gpu_busy_percent", &s->gfx_activity);
        s->has_umc = read_num(d, "mem_busy_percent", &s->umc_activity);
        if (read_mem(d, "vram", &s->vram_used_mb, &s->vram_total_mb)) {
                s->has_vram = true;
                s->vram_free_mb = s->vram_total_mb > s->vram_used_mb ? s->vram_total_mb - s->vram_used_mb : 0;
        }
        s->has_vis_vram = read_mem(d, "vis_vram", &s->vis_used_mb, &s->vis_total_mb);
        s->has_gtt = read_mem(d, "gtt", &s->gtt_used_mb, &s->gtt_total_mb);
        temps(g->hwmon_dir, s);
        double uw;
        if (read_num(g->hwmon_dir, "power1_average", &uw)) {
                s->has_avg_power = true;
                s->avg_power_w = uw / 1e6;
        }
        if (read_num(g->hwmon_dir, "power1_input", &uw) || read_num(g->hwmon_dir, "power1_average", &uw)) {
                s->has_power = true;
                s->power_w = uw / 1e6;
        }
        s->has_energy = read_num(g->hwmon_dir, "energy1_input", &s->energy_uj);
        s->has_sclk = read_dpm(d, "pp_dpm_sclk", &s->sclk_mhz);
        s->has_mclk = read_dpm(d, "pp_dpm_mclk", &s->mclk_mhz);
        clocks(d, s);
        s->has_pcie_speed = read_gts(d, "current_link_speed", &s->pcie_speed_gts);
        s->has_pcie_max_speed = read_gts(d, "max_link_speed", &s->pcie_max_speed_gts);
        double replay;
        if (read_num(d, "pcie_replay_count", &replay)) {
                s->has_pcie_replay = true;
                s->pcie_replay = (uint64_t)replay;
        }
        ecc(g, s);
        s->gm_err = amd_gpu_metrics_read(d, &s->gm);
        s->gm_ok = s->gm_err == 0;
}

size_t amd_proc_vram(const char *sysfs_root, size_t max, struct amd_proc_vram **out)
{
        _cleanup_free_ char *pat = xasprintf("%s/class/kfd/kfd/proc/*/vram_*", sysfs_root);
        glob_t gl;
        *out = NULL;
        if (glob(pat, 0, NULL, &gl) != 0)
                return 0;
        struct amd_proc_vram *v = xcalloc(gl.gl_pathc + 1, sizeof(*v));
        size_t n = 0;
        for (size_t i = 0; i < gl.gl_pathc && n < max; i++) {
                const char *p = gl.gl_pathv[i];
                const char *file = strrchr(p, '/');
                const char *pidp = file - 1;
                while (pidp > p && pidp[-1] != '/')
                        pidp--;
                char *end;
                long pid = strtol(pidp, &end, 10);
                unsigned long gid = strtoul(file + 6, &end, 10);
                uint64_t bytes;
                if (pid <= 0 || *end || amd_read_u64(p, &bytes) < 0)
                        continue;
                v[n++] = (struct amd_proc_vram){ .pid = (int)pid, .gpu_id = (unsigned)gid, .bytes = bytes };
        }
        globfree(&gl);
        *out = v;
        return n;
}
