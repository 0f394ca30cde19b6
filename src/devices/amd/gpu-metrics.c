/* The gpu_metrics parser (see gpu-metrics.h).  Each known layout is
 * written down as the kernel declares it: its members in order, each with
 * its width, count and where it lands in struct amd_gpu_metrics (or
 * nowhere).  Offsets come from the C rules the kernel's structs follow on
 * Linux (natural alignment, no packing), so a layout is never a list of
 * hand-counted numbers; the size those rules give must equal the table's
 * structure_size, or the layout is not the one we know (v1.6 had an
 * earlier, different shape during development, for one).  Values are read
 * little-endian, one member at a time, each only when it lies wholly
 * inside both the bytes read and structure_size. */
#include "devices/amd/gpu-metrics.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"

#define NONE ((size_t)-1)
#define XCP_STATS ((size_t)-2)

/* One member: width in bytes (1, 2, 4, 8), count, where the values go
 * (an offsetof into the output struct or its xcp element, NONE to skip). */
struct member {
        size_t dest;
        unsigned width, count;
};

#define M(field, w, n) { offsetof(struct amd_gpu_metrics, field), w, n }
#define X(field, w, n) { offsetof(struct amd_gm_xcp, field), w, n }
#define SKIP(w, n) { NONE, w, n }
#define XCPS(n) { XCP_STATS, 0, n }

/* v1.1 to v1.3 (MI100/MI200 and the Navi dGPUs): each appends to the one
 * before, so one list serves all three, cut at structure_size. */
static const struct member v1_3[] = {
        SKIP(4, 1), /* header */
        M(temp_edge, 2, 1), M(temp_hotspot, 2, 1), M(temp_mem, 2, 1),
        M(temp_vrgfx, 2, 1), M(temp_vrsoc, 2, 1), M(temp_vrmem, 2, 1),
        M(gfx_activity, 2, 1), M(umc_activity, 2, 1), M(mm_activity, 2, 1),
        M(socket_power, 2, 1), M(energy_acc, 8, 1),
        SKIP(8, 1),  /* system_clock_counter */
        SKIP(2, 7),  /* average clocks */
        M(gfxclk, 2, 1), M(socclk, 2, 1), M(uclk, 2, 1), M(vclk, 2, 1), M(dclk, 2, 1),
        M(vclk[1], 2, 1), M(dclk[1], 2, 1),
        SKIP(4, 1),  /* throttle_status */
        SKIP(2, 1),  /* current_fan_speed */
        M(pcie_width, 2, 1), M(pcie_speed, 2, 1),
        SKIP(2, 1),  /* padding */
        SKIP(4, 2),  /* gfx/mem activity accumulators */
        M(temp_hbm, 2, 4),
        SKIP(8, 1),  /* v1.2: firmware_timestamp */
        M(voltage_soc, 2, 1), M(voltage_gfx, 2, 1), M(voltage_mem, 2, 1), /* v1.3 */
        SKIP(2, 1),
        SKIP(8, 1),  /* indep_throttle_status */
};

/* The MI300 tables' common middle, from the PCIe link on. */
#define PCIE_XGMI_LINKS                                                                     \
        M(pcie_width, 2, 1), M(pcie_speed, 2, 1), M(xgmi_width, 2, 1), M(xgmi_speed, 2, 1), \
        SKIP(4, 2) /* gfx/mem activity accumulators */
#define PCIE_COUNTERS                                                                         \
        M(pcie_bw_acc, 8, 1), M(pcie_bw_inst, 8, 1), M(pcie_l0_recov, 8, 1), M(pcie_replay, 8, 1), \
        M(pcie_replay_rover, 8, 1)
#define CLOCKS                                                                              \
        M(gfxclk, 2, 8), M(socclk, 2, 4), M(vclk, 2, 4), M(dclk, 2, 4), M(uclk, 2, 1)
#define RESIDENCIES                                                                           \
        M(accumulation_counter, 4, 1), M(prochot_acc, 4, 1), M(ppt_acc, 4, 1),                \
        M(socket_thm_acc, 4, 1), M(vr_thm_acc, 4, 1), M(hbm_thm_acc, 4, 1)
#define HEAD_1_4                                                                            \
        SKIP(4, 1), M(temp_hotspot, 2, 1), M(temp_mem, 2, 1), M(temp_vrsoc, 2, 1),            \
        M(socket_power, 2, 1), M(gfx_activity, 2, 1), M(umc_activity, 2, 1)

static const struct member v1_4[] = {
        HEAD_1_4, M(vcn_activity, 2, 4),
        M(energy_acc, 8, 1), SKIP(8, 1), SKIP(4, 2), /* throttle, gfxclk lock */
        PCIE_XGMI_LINKS, PCIE_COUNTERS,
        M(xgmi_read, 8, 8), M(xgmi_write, 8, 8), SKIP(8, 1), CLOCKS, SKIP(2, 1),
};

static const struct member v1_5[] = {
        HEAD_1_4, M(vcn_activity, 2, 4), M(jpeg_activity, 2, 32),
        M(energy_acc, 8, 1), SKIP(8, 1), SKIP(4, 2),
        PCIE_XGMI_LINKS, PCIE_COUNTERS, M(pcie_nak_sent, 4, 1), M(pcie_nak_rcvd, 4, 1),
        M(xgmi_read, 8, 8), M(xgmi_write, 8, 8), SKIP(8, 1), CLOCKS, SKIP(2, 1),
};

static const struct member v1_6[] = {
        HEAD_1_4, M(energy_acc, 8, 1), SKIP(8, 1), RESIDENCIES, SKIP(4, 1),
        PCIE_XGMI_LINKS, PCIE_COUNTERS, M(pcie_nak_sent, 4, 1), M(pcie_nak_rcvd, 4, 1),
        M(xgmi_read, 8, 8), M(xgmi_write, 8, 8), SKIP(8, 1), CLOCKS,
        M(num_partition, 2, 1), XCPS(8), M(pcie_other_end_recovery, 4, 1),
};

/* v1.7 and v1.8 differ only in their partitions' element */
static const struct member v1_7[] = {
        HEAD_1_4, M(mem_max_bandwidth, 8, 1), M(energy_acc, 8, 1), SKIP(8, 1), RESIDENCIES,
        SKIP(4, 1), PCIE_XGMI_LINKS, PCIE_COUNTERS, M(pcie_nak_sent, 4, 1), M(pcie_nak_rcvd, 4, 1),
        M(xgmi_read, 8, 8), M(xgmi_write, 8, 8), M(xgmi_link_status, 2, 8), SKIP(2, 1),
        SKIP(8, 1), CLOCKS, M(num_partition, 2, 1), XCPS(8), M(pcie_other_end_recovery, 4, 1),
};

static const struct member xcp_v1_0[] = {
        X(gfx_busy_inst, 4, 8), X(jpeg_busy, 2, 32), X(vcn_busy, 2, 4), X(gfx_busy_acc, 8, 8),
};
static const struct member xcp_v1_1[] = {
        X(gfx_busy_inst, 4, 8), X(jpeg_busy, 2, 32), X(vcn_busy, 2, 4), X(gfx_busy_acc, 8, 8),
        X(gfx_below_host_limit_acc, 8, 8),
};
static const struct member xcp_v1_2[] = {
        X(gfx_busy_inst, 4, 8), X(jpeg_busy, 2, 40), X(vcn_busy, 2, 4), X(gfx_busy_acc, 8, 8),
        X(gfx_below_host_limit_acc, 8, 8), X(gfx_below_host_limit_thm_acc, 8, 8),
        X(gfx_low_utilization_acc, 8, 8),
};

struct layout {
        unsigned content;
        const struct member *m;
        size_t n;
        const struct member *xcp; /* the xcp_stats element, NULL when none */
        size_t n_xcp;
};

#define L(c, list, x, nx) { c, list, ARRAY_SIZE(list), x, nx }
static const struct layout layouts[] = {
        L(1, v1_3, NULL, 0), L(2, v1_3, NULL, 0), L(3, v1_3, NULL, 0),
        L(4, v1_4, NULL, 0), L(5, v1_5, NULL, 0),
        L(6, v1_6, xcp_v1_0, ARRAY_SIZE(xcp_v1_0)),
        L(7, v1_7, xcp_v1_1, ARRAY_SIZE(xcp_v1_1)),
        L(8, v1_7, xcp_v1_2, ARRAY_SIZE(xcp_v1_2)),
};

static size_t align_up(size_t off, size_t a)
{
        return (off + a - 1) / a * a;
}

/* The bytes and alignment of a member list laid out from 0; an element's
 * size is rounded up to its alignment, as an array of it would be. */
static size_t list_size(const struct member *m, size_t n, const struct member *xcp, size_t n_xcp,
                        size_t *align, size_t stop_at, size_t *offsets)
{
        size_t off = 0, max = 1;
        for (size_t i = 0; i < n && i < stop_at; i++) {
                size_t w = m[i].width, a = w, count = m[i].count;
                if (m[i].dest == XCP_STATS) {
                        w = list_size(xcp, n_xcp, NULL, 0, &a, SIZE_MAX, NULL);
                        w = align_up(w, a);
                }
                off = align_up(off, a);
                if (offsets)
                        offsets[i] = off;
                off += w * count;
                if (a > max)
                        max = a;
        }
        *align = max;
        return off;
}

static uint64_t read_le(const unsigned char *p, unsigned width)
{
        uint64_t v = 0;
        for (unsigned i = width; i > 0; i--)
                v = v << 8 | p[i - 1];
        return v;
}

static double sentinel_or(uint64_t v, unsigned width)
{
        uint64_t ones = width == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * width)) - 1;
        return v == ones ? NAN : (double)v;
}

/* Reads list m laid out at base into dest (a struct of doubles), each
 * value only where its bytes lie below limit. */
static void read_list(const unsigned char *buf, size_t limit, size_t base, const struct member *m,
                      size_t n, const struct layout *l, void *dest, struct amd_gpu_metrics *out)
{
        size_t offsets[64];
        size_t align;
        if (n > ARRAY_SIZE(offsets))
                return;
        list_size(m, n, l->xcp, l->n_xcp, &align, n, offsets);
        for (size_t i = 0; i < n; i++) {
                if (m[i].dest == NONE)
                        continue;
                if (m[i].dest == XCP_STATS) {
                        size_t a;
                        size_t stride = list_size(l->xcp, l->n_xcp, NULL, 0, &a, SIZE_MAX, NULL);
                        stride = align_up(stride, a);
                        for (unsigned k = 0; k < m[i].count && k < AMD_GM_XCP; k++)
                                read_list(buf, limit, base + offsets[i] + k * stride, l->xcp, l->n_xcp,
                                          l, &out->xcp[k], out);
                        continue;
                }
                double *d = (double *)((char *)dest + m[i].dest);
                for (unsigned k = 0; k < m[i].count; k++) {
                        size_t at = base + offsets[i] + (size_t)k * m[i].width;
                        if (at + m[i].width > limit)
                                break;
                        d[k] = sentinel_or(read_le(buf + at, m[i].width), m[i].width);
                }
        }
}

static void set_absent(struct amd_gpu_metrics *m)
{
        double *d = &m->temp_edge;
        double *end = (double *)(m + 1);
        for (; d < end; d++)
                *d = NAN;
}

int amd_gpu_metrics_parse(const void *buf, size_t len, struct amd_gpu_metrics *out)
{
        const unsigned char *b = buf;
        *out = (struct amd_gpu_metrics){ 0 };
        set_absent(out);
        if (len < 4)
                return -EINVAL;
        out->size = (unsigned)read_le(b, 2);
        out->format = b[2];
        out->content = b[3];
        if (out->size < 4)
                return -EINVAL;
        if (out->format != 1)
                return -ENOTSUP;
        const struct layout *l = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(layouts) && !l; i++)
                if (layouts[i].content == out->content)
                        l = &layouts[i];
        if (!l)
                return -ENOTSUP;
        size_t align, full = list_size(l->m, l->n, l->xcp, l->n_xcp, &align, SIZE_MAX, NULL);
        full = align_up(full, align);
        /* v1.1-v1.3 share a list: each is a prefix of it */
        bool prefix = l->content <= 3;
        if (prefix ? out->size > full : out->size != full)
                return -ENOTSUP;
        size_t limit = len < out->size ? len : out->size;
        read_list(b, limit, 0, l->m, l->n, l, out, out);
        return 0;
}

int amd_gpu_metrics_read(const char *dir, struct amd_gpu_metrics *out)
{
        _cleanup_free_ char *path = xasprintf("%s/gpu_metrics", dir);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = fs_read_file(path, AMD_GM_MAX_SIZE, &buf, &len);
        if (r < 0) {
                *out = (struct amd_gpu_metrics){ 0 };
                set_absent(out);
                return r;
        }
        return amd_gpu_metrics_parse(buf, len, out);
}
