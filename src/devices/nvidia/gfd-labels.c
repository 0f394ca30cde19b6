/* GFD's labels for NVIDIA GPUs, rule for rule (NVIDIA/k8s-device-plugin,
 * internal/lm: nvml.go, resource.go, mig-strategy.go, machine-type.go).
 *
 * Full-GPU labels (nvidia.com/gpu.*) come from each product name: first the
 * MIG-enabled GPUs' names (without sharing: replicas 0), then the other
 * GPUs' names (with the sharing config), each later name replacing the
 * earlier one's labels; count is the number of GPUs of that name.  Where
 * GFD's order is a Go map's (random), ours is fixed: within each group the
 * lowest-index GPU's name is applied last, so it is the one that shows.
 * MIG strategy single labels the MIG devices under nvidia.com/gpu (or marks
 * the node <model>-MIG-INVALID when its MIG layout cannot be served as
 * single); mixed labels each profile under nvidia.com/mig-<profile>.
 *
 * Where GFD fails the whole run (an unparsable driver version, MPS sharing
 * with MIG enabled, a PCI class it cannot read) we leave out the labels
 * concerned and warn instead.
 * Reads the machine-type file (and, for the backend's member, each GPU's
 * PCI class and config space in sysfs); otherwise pure; never logs. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/nvidia/gfd-labels.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvidia.h"

#define GPU_RESOURCE "nvidia.com/gpu"
#define MACHINE_MAX 4096

static void warn(char ***warnings, char *msg)
{
        if (warnings)
                *warnings = strv_push(*warnings ? *warnings : xcalloc(1, sizeof(char *)), msg);
        free(msg);
}

const char *nvidia_gpu_family(int cc_major, int cc_minor)
{
        switch (cc_major) {
        case 1:
                return "tesla";
        case 2:
                return "fermi";
        case 3:
                return "kepler";
        case 5:
                return "maxwell";
        case 6:
                return "pascal";
        case 7:
                return cc_minor < 5 ? "volta" : "turing";
        case 8:
                return cc_minor < 9 ? "ampere" : "ada-lovelace";
        case 9:
                return "hopper";
        case 10:
        case 12:
                return "blackwell";
        default:
                return "undefined";
        }
}

bool nvidia_pci_config_is_vgpu(const uint8_t *c, size_t len)
{
        enum { STATUS = 0x06, CAP_LIST = 0x10, CAP_START = 0x34, CAP_VENDOR = 0x09 };
        if (len <= CAP_START || !(c[STATUS] & CAP_LIST))
                return false;
        bool seen[256] = { false };
        size_t pos = c[CAP_START];
        while (pos != 0 && pos + 2 < len && !seen[pos]) {
                seen[pos] = true;
                if (c[pos] == 0xff)
                        return false;
                if (c[pos] == CAP_VENDOR) {
                        size_t cap_len = c[pos + 2];
                        if (cap_len < 5 || pos + cap_len > len)
                                return false;
                        return c[pos + 3] == 0x56 || c[pos + 4] == 0x46;
                }
                pos = c[pos + 1];
        }
        return false;
}

const char *nvidia_gpu_mode(const char *pci_class)
{
        if (strcmp(pci_class, "0x030000") == 0)
                return "graphics";
        if (strcmp(pci_class, "0x030200") == 0)
                return "compute";
        return "unknown";
}

/* ---- one resource's labels (resource.go's resourceLabeler) ---- */

struct res_labeler {
        const char *resource;
        const struct devlet_config *cfg;
        bool sharing_disabled; /* GFD's nil config: MIG-enabled GPUs' full-GPU labels */
        bool mig;              /* MIG devices: never shared through MPS */
};

static const struct sharing_resource_cfg *replication(const struct res_labeler *rl)
{
        if (rl->sharing_disabled || rl->cfg->sharing.strategy == SHARING_NONE)
                return NULL;
        /* NVIDIA's MPS control daemon skips MIG devices: the backend
         * serves them unshared (resources.c), and so do the labels */
        if (rl->mig && rl->cfg->sharing.strategy == SHARING_MPS)
                return NULL;
        for (size_t i = 0; i < rl->cfg->sharing.n_resources; i++)
                if (strcmp(rl->cfg->sharing.resources[i].name, rl->resource) == 0)
                        return &rl->cfg->sharing.resources[i];
        return NULL;
}

static unsigned replicas(const struct res_labeler *rl)
{
        if (rl->sharing_disabled)
                return 0;
        const struct sharing_resource_cfg *r = replication(rl);
        return r && r->replicas > 0 ? r->replicas : 1;
}

static void put(struct dev_labels *out, const struct res_labeler *rl, const char *suffix,
                const char *value)
{
        _cleanup_free_ char *key = xasprintf("%s.%s", rl->resource, suffix);
        dev_labels_put(out, key, value);
}

static void putu(struct dev_labels *out, const struct res_labeler *rl, const char *suffix,
                 unsigned long long v)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%llu", v);
        put(out, rl, suffix, buf);
}

/* GFD's sanitise: drop what is not [A-Za-z0-9._- ], join blank-separated
 * fields with '-'. */
static void append_part(char **product, const char *part)
{
        _cleanup_free_ char *clean = xmalloc(strlen(part) + 1);
        size_t len = 0;
        bool blank = false;
        for (const char *p = part; *p; p++) {
                if (isspace((unsigned char)*p)) {
                        blank = len > 0;
                        continue;
                }
                if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
                        continue;
                if (blank)
                        clean[len++] = '-';
                blank = false;
                clean[len++] = *p;
        }
        clean[len] = '\0';
        if (!len)
                return;
        char *joined = *product ? xasprintf("%s-%s", *product, clean) : xstrdup(clean);
        free(*product);
        *product = joined;
}

/* product, count, replicas and sharing-strategy (baseLabeler). parts is
 * NULL-terminated. */
static void base_labels(struct dev_labels *out, const struct res_labeler *rl, size_t count,
                        const char *const *parts)
{
        const struct sharing_resource_cfg *r = replication(rl);
        unsigned n = replicas(rl);
        _cleanup_free_ char *product = NULL;
        for (size_t i = 0; parts[i]; i++)
                append_part(&product, parts[i]);
        if (product && r && r->replicas > 1 && !r->rename)
                append_part(&product, "SHARED");
        put(out, rl, "product", product ? product : "");
        putu(out, rl, "count", count);
        putu(out, rl, "replicas", n);
        const char *strategy = "none";
        if (!rl->sharing_disabled && n > 1)
                strategy = rl->cfg->sharing.strategy == SHARING_MPS ? "mps" : "time-slicing";
        put(out, rl, "sharing-strategy", strategy);
}

static void full_gpu_labels(struct dev_labels *out, const struct devlet_config *cfg,
                            const struct nvidia_gfd_gpu *g, size_t count, bool with_sharing)
{
        struct res_labeler rl = { GPU_RESOURCE, cfg, !with_sharing, false };
        const char *parts[] = { g->name, NULL };
        base_labels(out, &rl, count, parts);
        if (g->memory_mib)
                putu(out, &rl, "memory", g->memory_mib);
        if (g->cc_major > 0) {
                put(out, &rl, "family", nvidia_gpu_family(g->cc_major, g->cc_minor));
                putu(out, &rl, "compute.major", (unsigned)g->cc_major);
                putu(out, &rl, "compute.minor", (unsigned)(g->cc_minor < 0 ? 0 : g->cc_minor));
        }
}

/* GFD's MIG device name: the profile with '+' turned into '.'. */
static char *mig_name(const char *profile)
{
        char *s = xstrdup(profile);
        for (char *p = s; *p; p++)
                if (*p == '+')
                        *p = '.';
        return s;
}

static void mig_labels(struct dev_labels *out, const struct devlet_config *cfg, const char *resource,
                       const struct nvidia_gfd_gpu *parent, const struct nvidia_gfd_mig *m, size_t count)
{
        struct res_labeler rl = { resource, cfg, false, true };
        _cleanup_free_ char *profile = mig_name(m->profile);
        const char *parts[] = { parent->name, "MIG", profile, NULL };
        base_labels(out, &rl, count, parts);
        putu(out, &rl, "memory", m->memory_mib);
        putu(out, &rl, "multiprocessors", m->multiprocessors);
        putu(out, &rl, "slices.gi", m->slices_gi);
        putu(out, &rl, "slices.ci", m->slices_ci);
        putu(out, &rl, "engines.copy", m->engines_copy);
        putu(out, &rl, "engines.decoder", m->engines_decoder);
        putu(out, &rl, "engines.encoder", m->engines_encoder);
        putu(out, &rl, "engines.jpeg", m->engines_jpeg);
        putu(out, &rl, "engines.ofa", m->engines_ofa);
}

/* ---- node-wide labels ---- */

static void machine_label(struct dev_labels *out, const struct devlet_config *cfg, char ***warnings)
{
        _cleanup_free_ char *data = NULL;
        const char *path = cfg->machine_type_file;
        const char *machine = "unknown";
        if (path && path[0]) {
                int r = fs_read_file(path, MACHINE_MAX, &data, NULL);
                if (r < 0)
                        warn(warnings, xasprintf("cannot read the machine type from %s: %s", path,
                                                 strerror(-r)));
                else
                        machine = data;
        }
        /* TrimSpace, then spaces become '-' (labels_collect sanitises the rest) */
        while (isspace((unsigned char)*machine))
                machine++;
        _cleanup_free_ char *m = xstrdup(machine);
        size_t n = strlen(m);
        while (n > 0 && isspace((unsigned char)m[n - 1]))
                m[--n] = '\0';
        for (char *p = m; *p; p++)
                if (*p == ' ')
                        *p = '-';
        dev_labels_put(out, "nvidia.com/gpu.machine", m);
}

static void version_labels(struct dev_labels *out, const struct nvidia_gfd_node *node,
                           char ***warnings)
{
        const char *v = node->driver_version ? node->driver_version : "";
        /* strings.Split(v, "."): two or three fields, the last one may be empty */
        const char *dot1 = strchr(v, '.');
        const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
        bool ok = v[0] && dot1 && (!dot2 || !strchr(dot2 + 1, '.'));
        _cleanup_free_ char *major = ok ? xstrndup(v, (size_t)(dot1 - v)) : NULL;
        _cleanup_free_ char *minor =
                ok ? (dot2 ? xstrndup(dot1 + 1, (size_t)(dot2 - dot1 - 1)) : xstrdup(dot1 + 1))
                   : NULL;
        _cleanup_free_ char *rev = ok ? xstrdup(dot2 ? dot2 + 1 : "") : NULL;
        if (!ok) {
                warn(warnings, xasprintf("driver version \"%s\" is not X.Y[.Z]: no driver "
                                         "version labels",
                                         v));
        } else {
                dev_labels_put(out, "nvidia.com/cuda.driver.major", major);
                dev_labels_put(out, "nvidia.com/cuda.driver.minor", minor);
                dev_labels_put(out, "nvidia.com/cuda.driver.rev", rev);
                dev_labels_put(out, "nvidia.com/cuda.driver-version.major", major);
                dev_labels_put(out, "nvidia.com/cuda.driver-version.minor", minor);
                dev_labels_put(out, "nvidia.com/cuda.driver-version.revision", rev);
                dev_labels_put(out, "nvidia.com/cuda.driver-version.full", v);
        }
        if (node->cuda_version <= 0) {
                warn(warnings, xstrdup("CUDA driver version unknown: no CUDA runtime labels"));
                return;
        }
        /* NVML: 1000 * major + 10 * minor */
        int cmaj = node->cuda_version / 1000, cmin = (node->cuda_version % 1000) / 10;
        dev_labels_putf(out, "nvidia.com/cuda.runtime.major", "%d", cmaj);
        dev_labels_putf(out, "nvidia.com/cuda.runtime.minor", "%d", cmin);
        dev_labels_putf(out, "nvidia.com/cuda.runtime-version.major", "%d", cmaj);
        dev_labels_putf(out, "nvidia.com/cuda.runtime-version.minor", "%d", cmin);
        dev_labels_putf(out, "nvidia.com/cuda.runtime-version.full", "%d.%d", cmaj, cmin);
}

static void capability_labels(struct dev_labels *out, const struct nvidia_gfd_node *node,
                              const struct devlet_config *cfg, char ***warnings)
{
        bool mig_capable = false, mig_enabled = false;
        for (size_t i = 0; i < node->n_gpus; i++) {
                mig_capable |= node->gpus[i].mig_capable;
                mig_enabled |= node->gpus[i].mig_enabled;
        }
        dev_labels_put(out, "nvidia.com/mig.capable", mig_capable ? "true" : "false");
        bool mps = cfg->sharing.strategy == SHARING_MPS;
        if (mps && !node->mps_ready) {
                warn(warnings, xstrdup("no MPS control daemon ready (devlet mps-control-daemon): "
                                       "nvidia.com/mps.capable=false"));
                mps = false;
        }
        if (mps && mig_enabled) {
                warn(warnings, xstrdup("MPS sharing is not supported with MIG enabled: "
                                       "nvidia.com/mps.capable=false"));
                mps = false;
        }
        dev_labels_put(out, "nvidia.com/mps.capable", mps ? "true" : "false");
}

/* gpu.mode over every GPU (GFD looks at the first only) and vgpu.present
 * (GFD writes it only when true). */
static void mode_labels(struct dev_labels *out, const struct nvidia_gfd_node *node,
                        char ***warnings)
{
        const char *mode = NULL;
        bool differ = false, vgpu = false;
        for (size_t i = 0; i < node->n_gpus; i++) {
                const struct nvidia_gfd_gpu *g = &node->gpus[i];
                vgpu |= g->vgpu;
                const char *m = g->pci_class ? nvidia_gpu_mode(g->pci_class) : "unknown";
                if (mode && strcmp(mode, m) != 0)
                        differ = true;
                if (!mode || strcmp(m, "unknown") == 0)
                        mode = m;
        }
        if (differ) {
                _cleanup_free_ char *list = xstrdup("");
                for (size_t i = 0; i < node->n_gpus; i++) {
                        const char *c = node->gpus[i].pci_class;
                        char *t = xasprintf("%s%s%zu:%s", list, i ? ", " : "", i,
                                            c ? nvidia_gpu_mode(c) : "unknown");
                        free(list);
                        list = t;
                }
                warn(warnings, xasprintf("the GPUs' modes differ (%s): nvidia.com/gpu.mode=unknown",
                                         list));
                mode = "unknown";
        }
        dev_labels_put(out, "nvidia.com/gpu.mode", mode ? mode : "unknown");
        dev_labels_put(out, "nvidia.com/vgpu.present", vgpu ? "true" : "false");
}

/* GFD's imex.go: the clique every GPU on a multi-node NVLink fabric names
 * (GPUs off any fabric do not count); none when they differ. */
static void clique_label(struct dev_labels *out, const struct nvidia_gfd_node *node,
                         char ***warnings)
{
        const char *clique = NULL;
        for (size_t i = 0; i < node->n_gpus; i++) {
                const char *c = node->gpus[i].clique;
                if (!c || !c[0])
                        continue;
                if (clique && strcmp(clique, c) != 0) {
                        warn(warnings, xasprintf("the GPUs name different NVLink cliques (%s, "
                                                 "%s): no nvidia.com/gpu.clique label",
                                                 clique, c));
                        return;
                }
                clique = c;
        }
        if (clique)
                dev_labels_put(out, "nvidia.com/gpu.clique", clique);
}

/* ---- resources (mig-strategy.go) ---- */

/* The GPUs nvidia.com/gpu serves whole: all of them under strategy none
 * (by_mode false), else those whose MIG mode is mig. */
static size_t count_whole(const struct nvidia_gfd_node *node, bool by_mode, bool mig)
{
        size_t n = 0;
        for (size_t i = 0; i < node->n_gpus; i++)
                n += !by_mode || node->gpus[i].mig_enabled == mig;
        return n;
}

/* GFD counts the GPUs of the product labelled, MIG-enabled or not, and
 * labels MIG-enabled GPUs without sharing even where they are served whole
 * and shared.  devlet's nvidia.com/gpu.count is the GPUs nvidia.com/gpu
 * serves (all under strategy none, those of the mode labelled under single
 * and mixed), whatever their products, and GPUs served whole carry the
 * sharing labels: count x replicas equals the devices served. */
static void full_gpus(struct dev_labels *out, const struct nvidia_gfd_node *node,
                      const struct devlet_config *cfg, bool by_mode)
{
        for (int pass = 0; pass < 2; pass++) {
                bool want_mig = pass == 0;
                for (size_t i = node->n_gpus; i-- > 0;) {
                        const struct nvidia_gfd_gpu *g = &node->gpus[i];
                        if (g->mig_enabled == want_mig)
                                full_gpu_labels(out, cfg, g, count_whole(node, by_mode, want_mig),
                                                !by_mode || !want_mig);
                }
        }
}

struct profile_count {
        const char *profile;
        const struct nvidia_gfd_gpu *parent;
        const struct nvidia_gfd_mig *first;
        size_t count;
};

/* The distinct MIG profiles of the node, in the order first seen. */
static size_t mig_profiles(const struct nvidia_gfd_node *node, struct profile_count **out)
{
        struct profile_count *v = NULL;
        size_t n = 0;
        for (size_t i = 0; i < node->n_gpus; i++) {
                const struct nvidia_gfd_gpu *g = &node->gpus[i];
                for (size_t k = 0; g->mig_enabled && k < g->n_migs; k++) {
                        const struct nvidia_gfd_mig *m = &g->migs[k];
                        size_t j = 0;
                        while (j < n && strcmp(v[j].profile, m->profile) != 0)
                                j++;
                        if (j == n) {
                                v = xrealloc(v, (n + 1) * sizeof(*v));
                                v[n++] = (struct profile_count){ m->profile, g, m, 0 };
                        }
                        v[j].count++;
                }
        }
        *out = v;
        return n;
}

static void mig_invalid(struct dev_labels *out, const struct nvidia_gfd_gpu *g, const char *why,
                        char ***warnings)
{
        warn(warnings, xasprintf("invalid configuration for mig-strategy=single: %s", why));
        struct res_labeler rl = { GPU_RESOURCE, NULL, true, false };
        _cleanup_free_ char *product = NULL;
        append_part(&product, g->name);
        append_part(&product, "MIG");
        append_part(&product, "INVALID");
        put(out, &rl, "product", product);
        put(out, &rl, "count", "0");
        put(out, &rl, "replicas", "0");
        put(out, &rl, "memory", "0");
        /* GFD's: nothing is served, so no strategy (not "none") */
        put(out, &rl, "sharing-strategy", "");
}

static void mig_single(struct dev_labels *out, const struct nvidia_gfd_node *node,
                       const struct devlet_config *cfg, char ***warnings)
{
        const struct nvidia_gfd_gpu *first_enabled = NULL;
        bool any_disabled = false, any_empty = false;
        for (size_t i = 0; i < node->n_gpus; i++) {
                const struct nvidia_gfd_gpu *g = &node->gpus[i];
                if (!g->mig_enabled) {
                        any_disabled = true;
                        continue;
                }
                if (!first_enabled)
                        first_enabled = g;
                any_empty |= g->n_migs == 0;
        }
        if (!first_enabled)
                return; /* no MIG: the same as strategy none */
        if (any_empty) {
                mig_invalid(out, first_enabled, "at least one MIG device is enabled but empty",
                            warnings);
                return;
        }
        if (any_disabled) {
                mig_invalid(out, first_enabled, "devices with MIG enabled and disable detected",
                            warnings);
                return;
        }
        _cleanup_free_ struct profile_count *profiles = NULL;
        size_t n = mig_profiles(node, &profiles);
        if (n != 1) {
                mig_invalid(out, first_enabled, "more than one MIG device type present on node",
                            warnings);
                return;
        }
        mig_labels(out, cfg, GPU_RESOURCE, profiles[0].parent, profiles[0].first,
                   profiles[0].count);
}

static void mig_mixed(struct dev_labels *out, const struct nvidia_gfd_node *node,
                      const struct devlet_config *cfg)
{
        _cleanup_free_ struct profile_count *profiles = NULL;
        size_t n = mig_profiles(node, &profiles);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = mig_name(profiles[i].profile);
                _cleanup_free_ char *resource = xasprintf("nvidia.com/mig-%s", name);
                mig_labels(out, cfg, resource, profiles[i].parent, profiles[i].first,
                           profiles[i].count);
        }
}

void nvidia_gfd_labels(const struct nvidia_gfd_node *node, const struct devlet_config *cfg,
                       struct dev_labels *out, char ***warnings)
{
        if (node->n_gpus == 0)
                return;
        machine_label(out, cfg, warnings);
        version_labels(out, node, warnings);
        capability_labels(out, node, cfg, warnings);
        mode_labels(out, node, warnings);
        clique_label(out, node, warnings);
        const char *strategy = nvidia_options_get(cfg)->mig_strategy;
        full_gpus(out, node, cfg, strcmp(strategy, "none") != 0);
        if (strcmp(strategy, "single") == 0 || strcmp(strategy, "mixed") == 0) {
                dev_labels_put(out, "nvidia.com/mig.strategy", strategy);
                if (strategy[0] == 's')
                        mig_single(out, node, cfg, warnings);
                else
                        mig_mixed(out, node, cfg);
        }
}

/* ---- the backend's member: facts from the inventory ---- */

/* gpu.mode's PCI class and vgpu.present's config space, from sysfs */
static void pci_facts(const struct devlet_config *cfg, const struct nvml_gpu *g,
                      struct nvidia_gfd_gpu *l, char **class_owned)
{
        if (!g->bus_id[0])
                return;
        char pci_class[32];
        _cleanup_free_ char *path = xasprintf("%s/bus/pci/devices/%s/class", cfg->sysfs_root,
                                              g->bus_id);
        if (fs_read_line(path, pci_class, sizeof(pci_class)) == 0)
                l->pci_class = *class_owned = xstrdup(pci_class);
        _cleanup_free_ char *cpath = xasprintf("%s/bus/pci/devices/%s/config", cfg->sysfs_root,
                                               g->bus_id);
        _cleanup_free_ char *config = NULL;
        size_t len = 0;
        if (fs_read_file(cpath, 8192, &config, &len) == 0)
                l->vgpu = nvidia_pci_config_is_vgpu((const uint8_t *)config, len);
}

void nvidia_backend_labels(struct dev_backend *b, const struct devlet_config *cfg,
                           struct dev_labels *out, char ***warnings)
{
        const struct nvml_inventory *inv = nvidia_backend_inventory(b);
        if (!inv)
                return;
        size_t present = 0;
        for (size_t i = 0; i < inv->n_gpus; i++)
                present += !inv->gpus[i].lost;
        /* GFD's: when its labels were written (--no-timestamp: never); a
         * node without an NVIDIA GPU (NVML loads, finds none) gets none of
         * GFD's labels, the timestamp included */
        if (present && !cfg->labels_no_timestamp)
                dev_labels_putf(out, "nvidia.com/gfd.timestamp", "%lld", (long long)time(NULL));
        struct nvidia_gfd_gpu *gpus = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*gpus));
        char **classes = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*classes));
        size_t n = 0, n_migs = 0;
        for (size_t i = 0; i < inv->n_gpus; i++)
                n_migs += inv->gpus[i].n_migs;
        struct nvidia_gfd_mig *migs = xcalloc(n_migs ? n_migs : 1, sizeof(*migs));
        struct nvidia_gfd_mig *next = migs;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                if (g->lost)
                        continue;
                struct nvidia_gfd_gpu *l = &gpus[n++];
                l->name = g->name;
                l->memory_mib = g->memory_bytes >> 20;
                l->cc_major = g->cc_major;
                l->cc_minor = g->cc_minor;
                l->mig_capable = g->mig_capable;
                l->mig_enabled = g->mig_enabled;
                l->clique = g->clique;
                pci_facts(cfg, g, l, &classes[n - 1]);
                l->migs = next;
                l->n_migs = g->n_migs;
                for (size_t k = 0; k < g->n_migs; k++) {
                        const struct nvml_mig_dev *m = &g->migs[k];
                        *next++ = (struct nvidia_gfd_mig){
                                .profile = m->profile,
                                .memory_mib = m->memory_mib,
                                .multiprocessors = m->multiprocessors,
                                .slices_gi = m->gi_slices,
                                .slices_ci = m->ci_slices,
                                .engines_copy = m->copy_engines,
                                .engines_decoder = m->decoders,
                                .engines_encoder = m->encoders,
                                .engines_jpeg = m->jpegs,
                                .engines_ofa = m->ofas,
                        };
                }
        }
        const struct nvidia_gfd_node node = { .driver_version = inv->driver_version,
                                              .cuda_version = inv->cuda_version,
                                              .mps_ready = nvidia_backend_mps_ready(b),
                                              .gpus = gpus,
                                              .n_gpus = n };
        nvidia_gfd_labels(&node, cfg, out, warnings);
        for (size_t i = 0; i < n; i++)
                free(classes[i]);
        free(classes);
        free(migs);
        free(gpus);
}
