/* AMD GPU health from sysfs, in two halves: amd_health_observe reads one
 * GPU's files (on its health thread, health-thread.c: a read of a GPU in
 * reset can block), amd_health_apply judges what was read against the
 * GPU's state (on the loop).
 *
 * A GPU fails a poll when
 *   - its PCI device is gone from amdgpu's sysfs, or one of its DRM render
 *     nodes (its own or a partition's) is gone;
 *   - KFD is there and the topology node of one of its partitions is gone
 *     or now names another render node (the GPU fell off the compute side);
 *   - an uncorrectable RAS count (ras/<block>_err_count, "ue:") rose since
 *     the previous poll;
 *   - it does not answer: amdgpu refuses sysfs reads (EPERM, ENODEV, EIO...)
 *     while the GPU is in reset or wedged, so gpu_busy_percent is read.
 * A GPU with a problem found at start-up (no KFD node) fails every poll.
 * AMD_DISABLE_HEALTHCHECKS names kinds of failure not to judge (the RAS
 * baseline still moves, so re-enabling does not report old errors).
 * Failing sets `since`; without recovery a failed GPU stays failed, with
 * recovery it is healthy again once quiet_ms passed without a failure.
 * Partitions follow their GPU (amd.c applies a GPU's state to every device
 * of it; it also fails a GPU whose reads stalled).  Pure with respect to
 * the device model; never logs. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

static bool exists(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0;
}

/* Sum of the "ue:" counts of every RAS block; -ENOENT without RAS. */
static int ras_ue_total(const struct amd_gpu *g, uint64_t *out)
{
        uint64_t total = 0;
        size_t read = 0;
        for (size_t i = 0; g->ras_files && g->ras_files[i]; i++) {
                _cleanup_free_ char *t = NULL;
                uint64_t ue, ce;
                if (amd_read_text(g->ras_files[i], &t) < 0 || amd_ras_parse(t, &ue, &ce) < 0)
                        continue;
                total += ue;
                read++;
        }
        if (!read)
                return -ENOENT;
        *out = total;
        return 0;
}

static char *part_render_dir(const struct amd_inventory *inv, const struct amd_gpu *g,
                             const struct amd_part *p)
{
        if (p->index == 0)
                return xasprintf("%s/drm/renderD%d", g->sysfs_dir, p->render);
        return xasprintf("%s/devices/platform/%s/drm/renderD%d", inv->sysfs_root, p->id, p->render);
}

static const struct {
        const char *name;
        unsigned bit;
} kind_bits[] = { { "gone", AMD_HEALTH_GONE },
                  { "kfd", AMD_HEALTH_KFD },
                  { "ras", AMD_HEALTH_RAS },
                  { "unresponsive", AMD_HEALTH_UNRESPONSIVE },
                  { "all", AMD_HEALTH_ALL } };

const char *amd_health_kind_name(unsigned kind)
{
        for (size_t k = 0; k < ARRAY_SIZE(kind_bits); k++)
                if (kind_bits[k].bit == kind)
                        return kind_bits[k].name;
        return "unhealthy";
}

unsigned amd_health_ignore_mask(const char *const *kinds)
{
        unsigned mask = 0;
        for (size_t i = 0; kinds && kinds[i]; i++)
                for (size_t k = 0; k < ARRAY_SIZE(kind_bits); k++)
                        if (strcmp(kind_bits[k].name, kinds[i]) == 0)
                                mask |= kind_bits[k].bit;
        return mask;
}

void amd_health_observe(const struct amd_inventory *inv, size_t gpu, unsigned ignore,
                        struct amd_health_obs *out)
{
        const struct amd_gpu *g = &inv->gpus[gpu];
        *out = (struct amd_health_obs){ 0 };
        out->rescan_sees = true; /* until the reads below are what fails */
        out->kind = AMD_HEALTH_GONE;
        if (g->problem) {
                out->why = xstrdup(g->problem);
                return;
        }
        if (!(ignore & AMD_HEALTH_GONE) && !exists(g->sysfs_dir)) {
                out->why = xstrdup("GPU gone from amdgpu's sysfs");
                return;
        }
        for (size_t k = 0; k < g->n_parts; k++) {
                const struct amd_part *p = &g->parts[k];
                if (p->render >= 0 && !(ignore & AMD_HEALTH_GONE)) {
                        _cleanup_free_ char *dir = part_render_dir(inv, g, p);
                        if (!exists(dir)) {
                                out->why = xasprintf("render node renderD%d of %s gone", p->render,
                                                     p->id);
                                return;
                        }
                }
                if (inv->kfd && p->kfd_node >= 0 && !(ignore & AMD_HEALTH_KFD)) {
                        _cleanup_free_ char *pp = xasprintf(
                                "%s/class/kfd/kfd/topology/nodes/%d/properties", inv->sysfs_root,
                                p->kfd_node);
                        _cleanup_free_ char *t = NULL;
                        uint64_t minor = 0;
                        if (amd_read_text(pp, &t) < 0 ||
                            amd_kfd_property(t, "drm_render_minor", &minor) < 0 ||
                            minor != (uint64_t)p->render) {
                                out->kind = AMD_HEALTH_KFD;
                                out->why = xasprintf("KFD topology node %d of %s gone",
                                                     p->kfd_node, p->id);
                                return;
                        }
                }
        }
        out->rescan_sees = false;
        out->ue_known = ras_ue_total(g, &out->ue_total) == 0;
        _cleanup_free_ char *busy = xasprintf("%s/gpu_busy_percent", g->sysfs_dir);
        _cleanup_free_ char *t = NULL;
        int r = amd_read_text(busy, &t);
        out->busy_err = r < 0 && r != -ENOENT ? -r : 0;
}

bool amd_health_apply(struct amd_gpu_watch *w, struct amd_health_obs *obs,
                      const struct amd_health_policy *p, int64_t now_ms)
{
        char *why = TAKE_PTR(obs->why);
        unsigned kind = obs->kind;
        bool rescan_sees = why && obs->rescan_sees;
        if (!why && obs->ue_known) {
                bool rose = w->ue_known && obs->ue_total > w->ue_total;
                uint64_t before = w->ue_total;
                w->ue_total = obs->ue_total;
                w->ue_known = true;
                if (rose && !(p->ignore & AMD_HEALTH_RAS)) {
                        kind = AMD_HEALTH_RAS;
                        why = xasprintf("uncorrectable RAS errors rose from %" PRIu64 " to %" PRIu64,
                                        before, obs->ue_total);
                }
        }
        if (!why && obs->busy_err && !(p->ignore & AMD_HEALTH_UNRESPONSIVE)) {
                kind = AMD_HEALTH_UNRESPONSIVE;
                why = xasprintf("not answering (gpu_busy_percent: %s): in reset or wedged",
                                strerror(obs->busy_err));
        }
        if (why) {
                bool changed = !w->bad || w->kind != kind;
                if (!w->bad)
                        w->bad_since = (int64_t)time(NULL);
                w->bad = true;
                w->kind = kind;
                w->since = now_ms;
                w->rescan_sees = rescan_sees;
                free(w->reason);
                w->reason = why;
                return changed;
        }
        if (w->bad && p->recovery && now_ms - w->since >= p->quiet_ms) {
                w->bad = false;
                w->kind = 0;
                w->bad_since = 0;
                free(w->reason);
                w->reason = NULL;
                return true;
        }
        return false;
}

void amd_health_baseline(const struct amd_inventory *inv, struct amd_gpu_watch *w)
{
        for (size_t i = 0; i < inv->n_gpus; i++) {
                uint64_t ue;
                if (!w[i].ue_known && ras_ue_total(&inv->gpus[i], &ue) == 0) {
                        w[i].ue_total = ue;
                        w[i].ue_known = true;
                }
        }
}

size_t amd_health_poll(const struct amd_inventory *inv, struct amd_gpu_watch *w,
                       const struct amd_health_policy *p, int64_t now_ms)
{
        size_t changed = 0;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                struct amd_health_obs obs;
                amd_health_observe(inv, i, p->ignore, &obs);
                changed += amd_health_apply(&w[i], &obs, p, now_ms);
        }
        return changed;
}
