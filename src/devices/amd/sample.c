/* Measurements of one AMD GPU from sysfs, in the units AMD's device
 * metrics exporter reports them (percent, MB, degrees C, W, uJ, MHz):
 *   gpu_busy_percent, mem_busy_percent          gfx and UMC activity
 *   mem_info_vram_used / mem_info_vram_total    VRAM (bytes -> MB)
 *   hwmon temp<N>_input by temp<N>_label        edge, junction, mem (m°C)
 *   hwmon power1_average or power1_input        package power (uW)
 *   hwmon energy1_input                         energy (uJ), where exposed
 *   pp_dpm_sclk / pp_dpm_mclk (the '*' level)   system and memory clocks
 *   ras/<block>_err_count                       ECC (ce:, ue:) summed
 * and KFD's per-process VRAM (class/kfd/kfd/proc/<pid>/vram_<gpu_id>).
 * A file that is missing or unreadable leaves its has_* false.  Meant for
 * a sampling thread: no shared state, never logs. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
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
                uint64_t ue, ce;
                if (amd_read_text(g->ras_files[i], &t) < 0 || amd_ras_parse(t, &ue, &ce) < 0)
                        continue;
                s->ecc_uncorrect += ue;
                s->ecc_correct += ce;
                s->has_ecc = true;
        }
}

void amd_sample_gpu(const struct amd_gpu *g, struct amd_sample *out)
{
        struct amd_sample s = { .healthy = !g->problem };
        const char *d = g->sysfs_dir;
        s.has_gfx = read_num(d, "gpu_busy_percent", &s.gfx_activity);
        s.has_umc = read_num(d, "mem_busy_percent", &s.umc_activity);
        double used, total;
        if (read_num(d, "mem_info_vram_used", &used) && read_num(d, "mem_info_vram_total", &total)) {
                s.has_vram = true;
                s.vram_used_mb = used / MB;
                s.vram_total_mb = total / MB;
                s.vram_free_mb = total > used ? (total - used) / MB : 0;
        }
        temps(g->hwmon_dir, &s);
        double uw;
        if (read_num(g->hwmon_dir, "power1_average", &uw) || read_num(g->hwmon_dir, "power1_input", &uw)) {
                s.has_power = true;
                s.power_w = uw / 1e6;
        }
        s.has_energy = read_num(g->hwmon_dir, "energy1_input", &s.energy_uj);
        s.has_sclk = read_dpm(d, "pp_dpm_sclk", &s.sclk_mhz);
        s.has_mclk = read_dpm(d, "pp_dpm_mclk", &s.mclk_mhz);
        ecc(g, &s);
        *out = s;
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
