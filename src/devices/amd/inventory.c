/* The AMD inventory: amdgpu's PCI devices, their partitions and the KFD
 * topology, read from sysfs once per (re)load.
 *
 * How it is read (layouts from the kernel's amdgpu and amdkfd drivers):
 *   1. <sysfs>/module/amdgpu/drivers/pci:amdgpu/<BDF>: one GPU each (PCI
 *      order), with its attributes (xgmi_hive_id among them), drm/card<N>
 *      and drm/renderD<N>; its PCIe root from <sysfs>/bus/pci/devices.
 *   2. <sysfs>/class/kfd/kfd/topology/nodes/<n>/properties: every compute
 *      node; GPU nodes name their render minor, PCI location and the GPU's
 *      unique_id, which its partitions share (and its hive_id, when amdgpu
 *      has no xgmi_hive_id file).
 *   3. <sysfs>/devices/platform/amdgpu_xcp_<N>: the further partitions of
 *      MI300-class GPUs.  One whose render minor KFD does not know is not
 *      a partition in the current mode (the driver makes them all at load)
 *      and is skipped, as AMD's plugin does.  A partition is joined to its
 *      GPU by unique_id (or, without one, by PCI domain and location).
 *   4. io_links and p2p_links of each GPU node: the best link to each other
 *      GPU (XGMI over PCIe, then the lowest weight).
 * Files that are missing, truncated or hold garbage are skipped with a
 * warning (inv->warnings); a GPU that cannot be used for compute (no KFD
 * node for its render minor while KFD is there) keeps a `problem` and is
 * served unhealthy.  Never logs. */
#include "devices/amd/inventory.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/pci.h"

#define AMD_TEXT_MAX 4096
/* More is a broken tree, not a node.  A cap keeps the first by number
 * (PCI address for GPUs, partition or node number), never glob's
 * alphabetical order ("10" before "9"), and is warned with the count
 * dropped. */
#define AMD_MAX_GPUS 256
#define AMD_MAX_PARTS_PER_GPU 64 /* MI300X: 8 (CPX) */
/* KFD nodes read, and amdgpu_xcp_* devices listed: every GPU's partitions */
#define AMD_MAX_KFD_NODES (AMD_MAX_GPUS * AMD_MAX_PARTS_PER_GPU)

/* ---- parsing ---- */

int amd_kfd_property(const char *text, const char *key, uint64_t *out)
{
        size_t klen = strlen(key);
        for (const char *p = text; p && *p;) {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t)(eol - p) : strlen(p);
                if (len > klen && strncmp(p, key, klen) == 0 && (p[klen] == ' ' || p[klen] == '\t')) {
                        const char *v = p + klen;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        if (!isdigit((unsigned char)*v))
                                return -EINVAL;
                        char *end;
                        errno = 0;
                        unsigned long long n = strtoull(v, &end, 10);
                        if (errno || (end < p + len && !isspace((unsigned char)*end)))
                                return -EINVAL;
                        *out = n;
                        return 0;
                }
                p = eol ? eol + 1 : NULL;
        }
        return -ENOENT;
}

static int parse_count(const char *text, const char *key, uint64_t *out)
{
        const char *p = text;
        size_t klen = strlen(key);
        while (p && *p) {
                while (*p == ' ' || *p == '\t')
                        p++;
                if (strncmp(p, key, klen) == 0) {
                        const char *v = p + klen;
                        while (*v == ' ')
                                v++;
                        if (!isdigit((unsigned char)*v))
                                return -EINVAL;
                        char *end;
                        errno = 0;
                        unsigned long long n = strtoull(v, &end, 10);
                        if (errno || (*end && !isspace((unsigned char)*end)))
                                return -EINVAL;
                        *out = n;
                        return 0;
                }
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
        return -EINVAL;
}

int amd_ras_parse(const char *text, uint64_t *ue, uint64_t *ce)
{
        uint64_t u, c;
        if (parse_count(text, "ue:", &u) < 0 || parse_count(text, "ce:", &c) < 0)
                return -EINVAL;
        *ue = u;
        *ce = c;
        return 0;
}

int amd_ras_parse_all(const char *text, uint64_t *ue, uint64_t *ce, uint64_t *de, bool *has_de)
{
        uint64_t d = 0;
        if (amd_ras_parse(text, ue, ce) < 0)
                return -EINVAL;
        *has_de = parse_count(text, "de:", &d) == 0;
        *de = *has_de ? d : 0;
        return 0;
}

/* One level line "N: <mhz>Mhz [*]" (N may be "S" for a sleep level). */
static int dpm_line(const char *p, size_t len, unsigned *mhz, bool *marked)
{
        const char *colon = memchr(p, ':', len);
        if (!colon)
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long v = strtoul(colon + 1, &end, 10);
        if (errno || end == colon + 1 || end > p + len || (size_t)(p + len - end) < 3 ||
            strncasecmp(end, "mhz", 3) != 0 || v > 100000)
                return -EINVAL;
        *mhz = (unsigned)v;
        *marked = memchr(p, '*', len) != NULL;
        return 0;
}

int amd_dpm_levels(const char *text, unsigned *cur, unsigned *min, unsigned *max)
{
        bool any = false, found = false;
        unsigned lo = 0, hi = 0, c = 0;
        for (const char *p = text; p && *p;) {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t)(eol - p) : strlen(p);
                unsigned mhz;
                bool marked;
                if (len > 0) {
                        if (dpm_line(p, len, &mhz, &marked) < 0)
                                return -EINVAL;
                        lo = any && lo < mhz ? lo : mhz;
                        hi = any && hi > mhz ? hi : mhz;
                        any = true;
                        if (marked && !found) {
                                c = mhz;
                                found = true;
                        }
                }
                p = eol ? eol + 1 : NULL;
        }
        if (!any)
                return -EINVAL;
        *min = lo;
        *max = hi;
        if (!found)
                return -ENOENT;
        *cur = c;
        return 0;
}

int amd_dpm_current(const char *text, unsigned *mhz)
{
        for (const char *p = text; p && *p;) {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t)(eol - p) : strlen(p);
                if (memchr(p, '*', len)) {
                        const char *colon = memchr(p, ':', len);
                        if (!colon)
                                return -EINVAL;
                        char *end;
                        errno = 0;
                        unsigned long v = strtoul(colon + 1, &end, 10);
                        if (errno || end == colon + 1 || strncasecmp(end, "mhz", 3) != 0 || v > 100000)
                                return -EINVAL;
                        *mhz = (unsigned)v;
                        return 0;
                }
                p = eol ? eol + 1 : NULL;
        }
        return -ENOENT;
}

int amd_read_text(const char *path, char **out)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = fs_read_file(path, AMD_TEXT_MAX, &buf, &len);
        if (r < 0)
                return r;
        if (memchr(buf, '\0', len))
                return -EINVAL;
        while (len > 0 && isspace((unsigned char)buf[len - 1]))
                buf[--len] = '\0';
        *out = TAKE_PTR(buf);
        return 0;
}

int amd_read_u64(const char *path, uint64_t *out)
{
        _cleanup_free_ char *t = NULL;
        int r = amd_read_text(path, &t);
        if (r < 0)
                return r;
        if (!isdigit((unsigned char)t[0]))
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(t, &end, 0);
        if (errno || *end)
                return -EINVAL;
        *out = v;
        return 0;
}

/* ---- the tree ---- */

struct kfd_node {
        int id;
        char *dir;
        uint64_t render, location, domain, unique_id, simd_count, simd_per_cu, gfx, hive;
        uint64_t vram;
        unsigned gpu_id;
        int gpu;  /* index into inv->gpus; -1 none yet */
};

/* A directory named by a number: a KFD node, an amdgpu_xcp_* device. */
struct numbered {
        unsigned long n;
        const char *path; /* into a glob_t */
        int card, render; /* amdgpu_xcp_*: its DRM minors; -1 none */
};

struct loader {
        struct amd_inventory *inv;
        struct kfd_node *nodes; /* one per render minor amdgpu's sysfs names, at most */
        size_t n_nodes;
        glob_t xcp_glob;
        struct numbered *xcp; /* amdgpu_xcp_* in number order */
        size_t n_xcp;
};

static void warn(struct amd_inventory *inv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct amd_inventory *inv, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *m = xvasprintf(fmt, ap);
        va_end(ap);
        inv->warnings = strv_push(inv->warnings, m);
}

/* glob(3) of a pattern built with fmt; glob's return value.  On failure gl
 * holds nothing (the caller just returns); either way it is safe to
 * globfree. */
static int glob_fmt(glob_t *gl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int glob_fmt(glob_t *gl, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *pat = xvasprintf(fmt, ap);
        va_end(ap);
        memset(gl, 0, sizeof(*gl));
        int r = glob(pat, 0, NULL, gl);
        if (r != 0) { /* nothing to free for the caller on failure */
                globfree(gl);
                memset(gl, 0, sizeof(*gl));
        }
        return r;
}

static char *read_or_empty(const char *dir, const char *name)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
        char *t = NULL;
        if (amd_read_text(p, &t) < 0)
                return xstrdup("");
        return t;
}

/* card<N> and renderD<N> under dir/drm. */
static void drm_minors(const char *dir, int *card, int *render)
{
        *card = *render = -1;
        _cleanup_free_ char *drm = xasprintf("%s/drm", dir);
        DIR *d = opendir(drm);
        if (!d)
                return;
        struct dirent *e;
        while ((e = readdir(d))) {
                unsigned n;
                char tail;
                if (sscanf(e->d_name, "renderD%u%c", &n, &tail) == 1 && n < 1u << 20)
                        *render = (int)n;
                else if (sscanf(e->d_name, "card%u%c", &n, &tail) == 1 && n < 1u << 20)
                        *card = (int)n;
        }
        closedir(d);
}

static void lower_copy(char *dst, size_t size, const char *src)
{
        size_t i = 0;
        for (; src[i] && i + 1 < size; i++)
                dst[i] = (char)tolower((unsigned char)src[i]);
        dst[i] = '\0';
}

static bool word_ok(const char *s)
{
        if (!s[0] || strlen(s) > 6)
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s))
                        return false;
        return true;
}

static void read_partition_mode(struct amd_inventory *inv, struct amd_gpu *g)
{
        _cleanup_free_ char *c = read_or_empty(g->sysfs_dir, "current_compute_partition");
        _cleanup_free_ char *m = read_or_empty(g->sysfs_dir, "current_memory_partition");
        _cleanup_free_ char *ac = xasprintf("%s/available_compute_partition", g->sysfs_dir);
        _cleanup_free_ char *am = xasprintf("%s/available_memory_partition", g->sysfs_dir);
        struct stat st;
        g->compute_partitioning = stat(ac, &st) == 0;
        g->memory_partitioning = stat(am, &st) == 0;
        if (c[0] && m[0] && word_ok(c) && word_ok(m)) {
                lower_copy(g->compute, sizeof(g->compute), c);
                lower_copy(g->memory, sizeof(g->memory), m);
        } else if (c[0] || m[0]) {
                warn(inv, "%s: partition mode unreadable (compute \"%.20s\", memory \"%.20s\"); "
                          "served as a plain GPU",
                     g->bdf, c, m);
        }
}

static void find_ras(struct amd_gpu *g)
{
        glob_t gl;
        if (glob_fmt(&gl, "%s/ras/*_err_count", g->sysfs_dir) == 0)
                for (size_t i = 0; i < gl.gl_pathc; i++)
                        g->ras_files = strv_push(g->ras_files, gl.gl_pathv[i]);
        globfree(&gl);
}

static void find_hwmon(struct amd_gpu *g)
{
        glob_t gl;
        if (glob_fmt(&gl, "%s/hwmon/hwmon*", g->sysfs_dir) == 0 && gl.gl_pathc > 0)
                g->hwmon_dir = xstrdup(gl.gl_pathv[0]);
        globfree(&gl);
}

static int read_gpus(struct amd_inventory *inv)
{
        glob_t gl;
        int r = glob_fmt(&gl,
                         "%s/module/amdgpu/drivers/pci:amdgpu/[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]:*",
                         inv->sysfs_root);
        if (r == GLOB_NOMATCH)
                return 0;
        if (r != 0)
                return -EIO;
        size_t n = gl.gl_pathc < AMD_MAX_GPUS ? gl.gl_pathc : AMD_MAX_GPUS;
        inv->gpus = xcalloc(n ? n : 1, sizeof(*inv->gpus));
        for (size_t i = 0; i < n; i++) {
                const char *dir = gl.gl_pathv[i];
                struct amd_gpu *g = &inv->gpus[inv->n_gpus];
                const char *slash = strrchr(dir, '/');
                char bdf[32];
                lower_copy(bdf, sizeof(bdf), slash + 1);
                uint64_t vendor = 0;
                _cleanup_free_ char *vp = xasprintf("%s/vendor", dir);
                if (amd_read_u64(vp, &vendor) == 0 && vendor != 0x1002)
                        continue;
                g->bdf = xstrdup(bdf);
                g->sysfs_dir = xstrdup(dir);
                _cleanup_free_ char *devid = read_or_empty(dir, "device");
                const char *hex = strncmp(devid, "0x", 2) == 0 ? devid + 2 : devid;
                lower_copy(g->device_id, sizeof(g->device_id), hex);
                g->product_name = read_or_empty(dir, "product_name");
                g->serial = read_or_empty(dir, "serial_number");
                g->unique_id = read_or_empty(dir, "unique_id");
                uint64_t v;
                _cleanup_free_ char *numa = read_or_empty(dir, "numa_node");
                char *end;
                long nn = strtol(numa, &end, 10);
                g->numa_node = numa[0] && !*end && nn >= 0 && nn < 4096 ? (int)nn : -1;
                _cleanup_free_ char *vt = xasprintf("%s/mem_info_vram_total", dir);
                if (amd_read_u64(vt, &v) == 0)
                        g->vram_total = v;
                _cleanup_free_ char *hive = xasprintf("%s/xgmi_hive_id", dir);
                if (amd_read_u64(hive, &v) == 0)
                        g->xgmi_hive_id = v;
                if (dev_pci_root(inv->sysfs_root, g->bdf, g->pcie_root, sizeof(g->pcie_root)) < 0)
                        g->pcie_root[0] = '\0';
                read_partition_mode(inv, g);
                find_hwmon(g);
                find_ras(g);
                amd_firmware_read(g);
                g->parts = xcalloc(1, sizeof(*g->parts));
                g->n_parts = 1;
                g->parts[0].id = xstrdup(g->bdf);
                g->parts[0].kfd_node = -1;
                drm_minors(dir, &g->parts[0].card, &g->parts[0].render);
                if (g->parts[0].render < 0)
                        warn(inv, "%s: no render node in sysfs (drm/renderD*)", g->bdf);
                inv->n_gpus++;
        }
        if (gl.gl_pathc > AMD_MAX_GPUS)
                warn(inv, "%zu amdgpu devices past the first %d (by PCI address) ignored",
                     gl.gl_pathc - AMD_MAX_GPUS, AMD_MAX_GPUS);
        globfree(&gl);
        return 0;
}

static void node_free(struct kfd_node *k)
{
        free(k->dir);
}

static int numbered_cmp(const void *a, const void *b)
{
        unsigned long x = ((const struct numbered *)a)->n, y = ((const struct numbered *)b)->n;
        return x < y ? -1 : x > y;
}

/* The entries of gl whose name ends in a number after prefix (the part
 * after the last '/'), sorted by it: heap, *n of them. */
static struct numbered *by_number(const glob_t *gl, const char *prefix, size_t *n)
{
        struct numbered *v = xcalloc(gl->gl_pathc + 1, sizeof(*v));
        size_t k = 0, plen = strlen(prefix);
        for (size_t i = 0; i < gl->gl_pathc; i++) {
                const char *base = strrchr(gl->gl_pathv[i], '/') + 1;
                if (strncmp(base, prefix, plen) != 0 || !isdigit((unsigned char)base[plen]))
                        continue;
                char *end;
                errno = 0;
                unsigned long id = strtoul(base + plen, &end, 10);
                if (*end || errno || id > INT32_MAX)
                        continue;
                v[k++] = (struct numbered){ .n = id, .path = gl->gl_pathv[i], .card = -1, .render = -1 };
        }
        qsort(v, k, sizeof(*v), numbered_cmp);
        *n = k;
        return v;
}

/* amdgpu's further partitions (amdgpu_xcp_*), with their render minors. */
static void list_xcp(struct loader *l)
{
        if (glob_fmt(&l->xcp_glob, "%s/devices/platform/amdgpu_xcp_*", l->inv->sysfs_root) != 0)
                return;
        l->xcp = by_number(&l->xcp_glob, "amdgpu_xcp_", &l->n_xcp);
        if (l->n_xcp > AMD_MAX_KFD_NODES) {
                warn(l->inv, "%zu amdgpu_xcp_* devices past the first %d ignored",
                     l->n_xcp - AMD_MAX_KFD_NODES, AMD_MAX_KFD_NODES);
                l->n_xcp = AMD_MAX_KFD_NODES;
        }
        for (size_t i = 0; i < l->n_xcp; i++)
                drm_minors(l->xcp[i].path, &l->xcp[i].card, &l->xcp[i].render);
}

static struct kfd_node *node_by_render(struct loader *l, int render);

/* Whether amdgpu's sysfs names render (a GPU's own node, a partition's):
 * only KFD nodes of those are kept, so nodes of nothing devlet serves
 * cannot crowd out the GPUs' own. */
static bool render_named(const struct loader *l, uint64_t render)
{
        for (size_t i = 0; i < l->inv->n_gpus; i++)
                if (l->inv->gpus[i].parts[0].render >= 0 &&
                    (uint64_t)l->inv->gpus[i].parts[0].render == render)
                        return true;
        for (size_t i = 0; i < l->n_xcp; i++)
                if (l->xcp[i].render >= 0 && (uint64_t)l->xcp[i].render == render)
                        return true;
        return false;
}

/* KFD's GPU nodes, in node order (the kernel's: GPUs first found, first
 * numbered), one per render minor amdgpu's sysfs names. */
static void read_kfd_nodes(struct loader *l)
{
        struct amd_inventory *inv = l->inv;
        glob_t gl;
        if (glob_fmt(&gl, "%s/class/kfd/kfd/topology/nodes/*", inv->sysfs_root) != 0)
                return;
        size_t n = 0, unnamed = 0, twice = 0;
        _cleanup_free_ struct numbered *dirs = by_number(&gl, "", &n);
        l->nodes = xcalloc(inv->n_gpus + l->n_xcp + 1, sizeof(*l->nodes));
        for (size_t i = 0; i < n; i++) {
                if (i == AMD_MAX_KFD_NODES) {
                        warn(inv, "%zu KFD nodes past the first %d (by number) not read",
                             n - AMD_MAX_KFD_NODES, AMD_MAX_KFD_NODES);
                        break;
                }
                const char *dir = dirs[i].path;
                long id = (long)dirs[i].n;
                _cleanup_free_ char *pp = xasprintf("%s/properties", dir);
                _cleanup_free_ char *props = NULL;
                if (amd_read_text(pp, &props) < 0) {
                        warn(inv, "KFD node %ld: properties unreadable", id);
                        continue;
                }
                struct kfd_node k = { .id = (int)id, .gpu = -1 };
                uint64_t cores = 0;
                if (amd_kfd_property(props, "drm_render_minor", &k.render) < 0 ||
                    amd_kfd_property(props, "simd_count", &k.simd_count) < 0) {
                        if (amd_kfd_property(props, "cpu_cores_count", &cores) < 0)
                                warn(inv, "KFD node %ld: properties without drm_render_minor or "
                                          "simd_count (garbage or truncated); ignored",
                                     id);
                        continue;
                }
                if (k.simd_count == 0 || k.render == 0)
                        continue; /* a CPU node */
                if (k.render > INT32_MAX || !render_named(l, k.render)) {
                        unnamed++;
                        continue;
                }
                if (node_by_render(l, (int)k.render)) {
                        twice++;
                        continue;
                }
                amd_kfd_property(props, "location_id", &k.location);
                amd_kfd_property(props, "domain", &k.domain);
                amd_kfd_property(props, "unique_id", &k.unique_id);
                amd_kfd_property(props, "simd_per_cu", &k.simd_per_cu);
                amd_kfd_property(props, "gfx_target_version", &k.gfx);
                amd_kfd_property(props, "hive_id", &k.hive);
                _cleanup_free_ char *mp = xasprintf("%s/mem_banks/0/properties", dir);
                _cleanup_free_ char *mem = NULL;
                if (amd_read_text(mp, &mem) == 0)
                        amd_kfd_property(mem, "size_in_bytes", &k.vram);
                uint64_t gid = 0;
                _cleanup_free_ char *gp = xasprintf("%s/gpu_id", dir);
                if (amd_read_u64(gp, &gid) == 0 && gid <= UINT32_MAX)
                        k.gpu_id = (unsigned)gid;
                k.dir = xstrdup(dir);
                l->nodes[l->n_nodes++] = k;
        }
        if (unnamed)
                warn(inv, "%zu KFD GPU nodes name a render node amdgpu's sysfs does not; ignored",
                     unnamed);
        if (twice)
                warn(inv, "%zu KFD GPU nodes name a render node an earlier node has; ignored", twice);
        globfree(&gl);
}

static struct kfd_node *node_by_render(struct loader *l, int render)
{
        for (size_t i = 0; render >= 0 && i < l->n_nodes; i++)
                if (l->nodes[i].render == (uint64_t)render)
                        return &l->nodes[i];
        return NULL;
}

static void part_fill(struct amd_part *p, const struct kfd_node *k)
{
        p->kfd_node = k->id;
        p->gpu_id = k->gpu_id;
        p->simd_count = k->simd_count;
        p->simd_per_cu = k->simd_per_cu;
        p->vram = k->vram;
}

/* The GPU a partition's KFD node belongs to: same unique_id, else same
 * PCI domain and location. */
static int gpu_of_node(struct loader *l, const struct kfd_node *k)
{
        for (size_t i = 0; i < l->inv->n_gpus; i++) {
                const struct amd_gpu *g = &l->inv->gpus[i];
                const struct kfd_node *own = node_by_render(l, g->parts[0].render);
                if (!own || own == k)
                        continue;
                if (k->unique_id ? own->unique_id == k->unique_id
                                 : own->location == k->location && own->domain == k->domain)
                        return (int)i;
        }
        return -1;
}

/* The partitions past each GPU's own node: amdgpu_xcp_* devices, in
 * number order, whose render minor has a KFD node; at most
 * AMD_MAX_PARTS_PER_GPU per GPU. */
static void read_partitions(struct loader *l)
{
        struct amd_inventory *inv = l->inv;
        _cleanup_free_ size_t *dropped = xcalloc(inv->n_gpus + 1, sizeof(*dropped));
        for (size_t i = 0; i < l->n_xcp; i++) {
                const char *path = l->xcp[i].path;
                int render = l->xcp[i].render;
                struct kfd_node *k = node_by_render(l, render);
                if (!k)
                        continue; /* not a partition in the current mode */
                int gi = gpu_of_node(l, k);
                if (gi < 0) {
                        warn(inv, "%s: KFD node %d matches no amdgpu PCI device; ignored",
                             strrchr(path, '/') + 1, k->id);
                        continue;
                }
                struct amd_gpu *g = &inv->gpus[gi];
                if (g->n_parts >= AMD_MAX_PARTS_PER_GPU) {
                        dropped[gi]++;
                        continue;
                }
                g->parts = xrealloc(g->parts, (g->n_parts + 1) * sizeof(*g->parts));
                struct amd_part *p = &g->parts[g->n_parts];
                *p = (struct amd_part){ .id = xstrdup(strrchr(path, '/') + 1),
                                        .index = (unsigned)g->n_parts,
                                        .card = l->xcp[i].card,
                                        .render = render };
                part_fill(p, k);
                k->gpu = gi;
                g->n_parts++;
        }
        for (size_t i = 0; i < inv->n_gpus; i++)
                if (dropped[i])
                        warn(inv, "%s: %zu partitions past the first %d ignored", inv->gpus[i].bdf,
                             dropped[i], AMD_MAX_PARTS_PER_GPU);
}

static int node_gpu(struct loader *l, uint64_t id)
{
        for (size_t i = 0; i < l->n_nodes; i++)
                if ((uint64_t)l->nodes[i].id == id)
                        return l->nodes[i].gpu;
        return -1;
}

static void read_links_of(struct loader *l, size_t gi, const char *dir, const char *kind)
{
        struct amd_inventory *inv = l->inv;
        size_t n = inv->n_gpus;
        glob_t gl;
        if (glob_fmt(&gl, "%s/%s/*/properties", dir, kind) != 0)
                return;
        for (size_t i = 0; i < gl.gl_pathc; i++) {
                _cleanup_free_ char *t = NULL;
                uint64_t type, to, weight;
                if (amd_read_text(gl.gl_pathv[i], &t) < 0 ||
                    amd_kfd_property(t, "type", &type) < 0 ||
                    amd_kfd_property(t, "node_to", &to) < 0 ||
                    amd_kfd_property(t, "weight", &weight) < 0 || weight > UINT32_MAX)
                        continue;
                int gj = node_gpu(l, to);
                if (gj < 0 || (size_t)gj == gi)
                        continue;
                size_t at = gi * n + (size_t)gj;
                bool better = inv->link_type[at] == 0 ||
                              (type == AMD_LINK_XGMI && inv->link_type[at] != AMD_LINK_XGMI) ||
                              ((type == AMD_LINK_XGMI) == (inv->link_type[at] == AMD_LINK_XGMI) &&
                               weight < inv->link_weight[at]);
                if (better && type < 256) {
                        inv->link_type[at] = (unsigned char)type;
                        inv->link_weight[at] = (unsigned)weight;
                }
        }
        globfree(&gl);
}

static void read_links(struct loader *l)
{
        struct amd_inventory *inv = l->inv;
        size_t n = inv->n_gpus;
        inv->link_type = xcalloc(n * n + 1, 1);
        inv->link_weight = xcalloc(n * n + 1, sizeof(unsigned));
        for (size_t i = 0; i < n; i++) {
                const struct kfd_node *k = node_by_render(l, inv->gpus[i].parts[0].render);
                if (!k)
                        continue;
                read_links_of(l, i, k->dir, "io_links");
                read_links_of(l, i, k->dir, "p2p_links");
        }
        /* KFD lists links from both ends; keep the matrix symmetric */
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        size_t a = i * n + j, b = j * n + i;
                        if (!inv->link_type[a] || (inv->link_type[b] == AMD_LINK_XGMI &&
                                                   inv->link_type[a] != AMD_LINK_XGMI)) {
                                inv->link_type[a] = inv->link_type[b];
                                inv->link_weight[a] = inv->link_weight[b];
                        }
                        inv->link_type[b] = inv->link_type[a];
                        inv->link_weight[b] = inv->link_weight[a];
                }
}

static void read_kfd(struct loader *l)
{
        struct amd_inventory *inv = l->inv;
        _cleanup_free_ char *kfd = xasprintf("%s/class/kfd/kfd", inv->sysfs_root);
        struct stat st;
        inv->kfd_major = inv->kfd_minor = -1;
        inv->kfd = stat(kfd, &st) == 0 && S_ISDIR(st.st_mode);
        if (!inv->kfd)
                return;
        _cleanup_free_ char *dev = read_or_empty(kfd, "dev");
        int ma, mi;
        char tail;
        if (sscanf(dev, "%d:%d%c", &ma, &mi, &tail) == 2 && ma > 0 && mi >= 0) {
                inv->kfd_major = ma;
                inv->kfd_minor = mi;
        }
        list_xcp(l);
        read_kfd_nodes(l);
        for (size_t i = 0; i < inv->n_gpus; i++) {
                struct amd_gpu *g = &inv->gpus[i];
                struct kfd_node *k = node_by_render(l, g->parts[0].render);
                if (!k) {
                        g->problem = xstrdup("KFD has no topology node for its render node "
                                             "(not usable for compute)");
                        continue;
                }
                k->gpu = (int)i;
                part_fill(&g->parts[0], k);
                g->unique_id_num = k->unique_id;
                g->gfx_target_version = (unsigned)(k->gfx <= UINT32_MAX ? k->gfx : 0);
                if (!g->xgmi_hive_id)
                        g->xgmi_hive_id = k->hive;
        }
        read_partitions(l);
        read_links(l);
}

int amd_inventory_load(const char *sysfs_root, struct amd_inventory **out, struct diag *diag)
{
        _cleanup_free_ char *drv = xasprintf("%s/module/amdgpu/drivers", sysfs_root);
        struct stat st;
        if (stat(drv, &st) < 0 || !S_ISDIR(st.st_mode))
                return diag_set(diag, -ENOENT, "the amdgpu driver is not loaded (no %s)", drv);
        struct amd_inventory *inv = xcalloc(1, sizeof(*inv));
        atomic_init(&inv->refs, 1);
        inv->sysfs_root = xstrdup(sysfs_root);
        _cleanup_free_ char *mod = xasprintf("%s/module/amdgpu", sysfs_root);
        inv->driver_version = read_or_empty(mod, "version");
        inv->driver_srcversion = read_or_empty(mod, "srcversion");
        int r = read_gpus(inv);
        if (r < 0) {
                diag_set(diag, r, "cannot list %s: %s", drv, strerror(-r));
                amd_inventory_free(inv);
                return r;
        }
        struct loader l = { .inv = inv };
        read_kfd(&l);
        if (!inv->link_type) {
                inv->link_type = xcalloc(inv->n_gpus * inv->n_gpus + 1, 1);
                inv->link_weight = xcalloc(inv->n_gpus * inv->n_gpus + 1, sizeof(unsigned));
        }
        for (size_t i = 0; i < l.n_nodes; i++)
                node_free(&l.nodes[i]);
        free(l.nodes);
        free(l.xcp);
        globfree(&l.xcp_glob);
        *out = inv;
        return 0;
}

struct amd_inventory *amd_inventory_ref(struct amd_inventory *inv)
{
        atomic_fetch_add(&inv->refs, 1);
        return inv;
}

void amd_inventory_free(struct amd_inventory *inv)
{
        if (!inv || atomic_fetch_sub(&inv->refs, 1) != 1)
                return;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                struct amd_gpu *g = &inv->gpus[i];
                for (size_t k = 0; k < g->n_parts; k++)
                        free(g->parts[k].id);
                free(g->parts);
                free(g->bdf);
                free(g->sysfs_dir);
                free(g->hwmon_dir);
                free(g->product_name);
                free(g->serial);
                free(g->unique_id);
                free(g->problem);
                strv_free(g->ras_files);
        }
        free(inv->gpus);
        free(inv->link_type);
        free(inv->link_weight);
        free(inv->sysfs_root);
        free(inv->driver_version);
        free(inv->driver_srcversion);
        strv_free(inv->warnings);
        free(inv);
}

const char *amd_gpu_partition_type(const struct amd_gpu *g, char *buf, size_t size)
{
        if (!g->compute[0] || !g->memory[0])
                snprintf(buf, size, "%s", "");
        else
                snprintf(buf, size, "%s_%s", g->compute, g->memory);
        return buf;
}

size_t amd_inventory_units(const struct amd_inventory *inv)
{
        size_t n = 0;
        for (size_t i = 0; i < inv->n_gpus; i++)
                n += inv->gpus[i].n_parts;
        return n;
}
