/* Every label of the running backends, checked against Kubernetes' rules.
 *
 * NVIDIA GPUs get GFD's labels (labels/nvidia.c) from the backend's
 * inventory, which NVML filled at start-up (GFD asks NVML again each time;
 * devlet re-reads it when the config is reloaded or the kubelet restarts);
 * GPUs NVML lost at start-up are left out; gpu.mode and vgpu.present come
 * from each GPU's PCI class and config space in sysfs.  Every other resource gets
 * "<resource>.count", its healthy devices.  Then each label is checked: an invalid key is dropped, an
 * invalid value sanitised, and either becomes a warning, so the file never
 * holds a label that NFD or the API server would refuse.
 * Never logs; warnings go back to the caller. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvidia.h"
#include "labels/labels.h"
#include "labels/nvidia.h"

static void warn(char ***warnings, char *msg)
{
        if (warnings)
                *warnings = strv_push(*warnings ? *warnings : xcalloc(1, sizeof(char *)), msg);
        free(msg);
}

static void resource_labels(struct label_set *out, const struct labels_backend *b)
{
        size_t n = 0;
        struct dev_resource **res = b->ops->resources(b->backend, &n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *key = xasprintf("%s.count", res[i]->name);
                label_set_putf(out, key, "%zu", dev_resource_healthy(res[i]));
        }
}

/* gpu.mode's PCI class and vgpu.present's config space, from sysfs */
static void pci_facts(const struct devlet_config *cfg, const struct nvml_gpu *g,
                      struct labels_gpu *l, char **class_owned)
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
                l->vgpu = labels_pci_config_is_vgpu((const uint8_t *)config, len);
}

static void nvidia_labels(const struct devlet_config *cfg, struct dev_backend *b,
                          struct label_set *out, char ***warnings)
{
        const struct nvml_inventory *inv = nvidia_backend_inventory(b);
        if (!inv)
                return;
        struct labels_gpu *gpus = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*gpus));
        char **classes = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*classes));
        size_t n = 0, n_migs = 0;
        for (size_t i = 0; i < inv->n_gpus; i++)
                n_migs += inv->gpus[i].n_migs;
        struct labels_mig *migs = xcalloc(n_migs ? n_migs : 1, sizeof(*migs));
        struct labels_mig *next = migs;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                if (g->lost)
                        continue;
                struct labels_gpu *l = &gpus[n++];
                l->name = g->name;
                l->memory_mib = g->memory_bytes >> 20;
                l->cc_major = g->cc_major;
                l->cc_minor = g->cc_minor;
                l->mig_capable = g->mig_capable;
                l->mig_enabled = g->mig_enabled;
                pci_facts(cfg, g, l, &classes[n - 1]);
                l->migs = next;
                l->n_migs = g->n_migs;
                for (size_t k = 0; k < g->n_migs; k++) {
                        const struct nvml_mig_dev *m = &g->migs[k];
                        *next++ = (struct labels_mig){
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
        const struct labels_nvidia node = { .driver_version = inv->driver_version,
                                            .cuda_version = inv->cuda_version,
                                            .mps_ready = nvidia_backend_mps_ready(b),
                                            .gpus = gpus,
                                            .n_gpus = n };
        labels_nvidia_add(&node, cfg, out, warnings);
        for (size_t i = 0; i < n; i++)
                free(classes[i]);
        free(classes);
        free(migs);
        free(gpus);
}

/* Drops invalid keys and sanitises invalid values, in place. */
static void check(struct label_set *s, char ***warnings)
{
        size_t kept = 0;
        for (size_t i = 0; i < s->n; i++) {
                struct label *l = &s->v[i];
                if (!labels_valid_key(l->key)) {
                        warn(warnings, xasprintf("label key \"%s\" is not a valid Kubernetes "
                                                 "label key: left out",
                                                 l->key));
                        free(l->key);
                        free(l->value);
                        continue;
                }
                if (!labels_valid_value(l->value)) {
                        char *clean = labels_value_sanitize(l->value);
                        warn(warnings, xasprintf("label %s: value \"%s\" is not a valid "
                                                 "Kubernetes label value: written as \"%s\"",
                                                 l->key, l->value, clean));
                        free(l->value);
                        l->value = clean;
                }
                s->v[kept++] = *l;
        }
        s->n = kept;
}

void labels_collect(const struct devlet_config *cfg, const struct labels_backend *backends,
                    size_t n, struct label_set *out, char ***warnings)
{
        if (!cfg->labels_no_timestamp)
                label_set_putf(out, "nvidia.com/gfd.timestamp", "%lld", (long long)time(NULL));
        for (size_t i = 0; i < n; i++) {
                const struct labels_backend *b = &backends[i];
                if (!b->backend)
                        continue;
                /* NVIDIA resources are GFD's: nvidia.com/gpu.count is its label */
                if (b->ops == &nvidia_backend_ops)
                        nvidia_labels(cfg, b->backend, out, warnings);
                else
                        resource_labels(out, b);
        }
        check(out, warnings);
}
