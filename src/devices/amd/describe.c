/* `devlet list`'s AMD section: the GPUs (PCI address, product, NUMA node,
 * partition mode, partitions, health), the partitions with their DRM and
 * KFD nodes, the XGMI matrix (XGMI or PCIE per pair, as `amd-smi topology`
 * prints link types), and AMD's labels, as text and as JSON.  Reads the
 * backend's state only. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "devices/amd/internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

const char *amd_link_name(const struct amd_inventory *inv, size_t a, size_t b)
{
        size_t n = inv->n_gpus;
        if (a == b)
                return "X";
        switch (inv->link_type[a * n + b]) {
        case AMD_LINK_XGMI:
                return "XGMI";
        case AMD_LINK_PCIE:
                return "PCIE";
        default:
                return "-";
        }
}

static const char *health_of(const struct amd_backend *b, size_t gpu)
{
        return b->watch[gpu].bad ? b->watch[gpu].reason : "healthy";
}

void amd_describe(struct dev_backend *db, FILE *f)
{
        const struct amd_backend *b = (const struct amd_backend *)db;
        const struct amd_inventory *inv = b->inv;
        fprintf(f, "\nAMD GPUs (driver %s, naming strategy %s, health %s):\n",
                inv->driver_version[0] ? inv->driver_version : "?", b->strategy,
                !b->timer_on ? "checked once"
                : b->policy.ignore == AMD_HEALTH_ALL ? "not polled"
                : b->policy.ignore                                    ? "polled, some checks off"
                                                                      : "polled");
        fprintf(f, "  %-4s %-14s %-28s %-5s %-9s %-6s %-9s %s\n", "GPU", "PCI", "PRODUCT", "NUMA",
                "MODE", "PARTS", "VRAM", "HEALTH");
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct amd_gpu *g = &inv->gpus[i];
                char mode[16], vram[32];
                amd_gpu_partition_type(g, mode, sizeof(mode));
                snprintf(vram, sizeof(vram), "%.0fG", (double)g->vram_total / GIB);
                fprintf(f, "  %-4zu %-14s %-28.28s %-5d %-9s %-6zu %-9s %s\n", i, g->bdf,
                        g->product_name[0] ? g->product_name : "?", g->numa_node,
                        mode[0] ? mode : "-", g->n_parts, vram, health_of(b, i));
        }
        bool any = false;
        for (size_t i = 0; i < inv->n_gpus; i++)
                any |= inv->gpus[i].n_parts > 1;
        if (any) {
                fprintf(f, "\n  partitions:\n  %-4s %-16s %-8s %-10s %-8s %s\n", "GPU", "ID", "CARD",
                        "RENDER", "KFD", "CUS");
                for (size_t i = 0; i < inv->n_gpus; i++)
                        for (size_t k = 0; inv->gpus[i].n_parts > 1 && k < inv->gpus[i].n_parts; k++) {
                                const struct amd_part *p = &inv->gpus[i].parts[k];
                                fprintf(f, "  %-4zu %-16s card%-4d renderD%-3d %-8d %llu\n", i, p->id,
                                        p->card, p->render, p->kfd_node,
                                        (unsigned long long)(p->simd_per_cu ? p->simd_count / p->simd_per_cu : 0));
                        }
        }
        if (inv->n_gpus > 1) {
                fprintf(f, "\n  links (KFD):\n  %-6s", "");
                for (size_t j = 0; j < inv->n_gpus; j++)
                        fprintf(f, " GPU%-3zu", j);
                fprintf(f, "\n");
                for (size_t i = 0; i < inv->n_gpus; i++) {
                        fprintf(f, "  GPU%-3zu", i);
                        for (size_t j = 0; j < inv->n_gpus; j++)
                                fprintf(f, " %-6s", amd_link_name(inv, i, j));
                        fprintf(f, "\n");
                }
        }
        size_t n = 0;
        struct dev_kv *kv = amd_labels(inv, &n);
        fprintf(f, "\n  labels (AMD's node labeller):\n");
        for (size_t i = 0; i < n; i++)
                fprintf(f, "  %s=%s\n", kv[i].key, kv[i].value);
        amd_labels_free(kv, n);
}

json_t *amd_describe_json(struct dev_backend *db)
{
        const struct amd_backend *b = (const struct amd_backend *)db;
        const struct amd_inventory *inv = b->inv;
        json_t *o = json_object();
        json_object_set_new(o, "driver_version", json_string(inv->driver_version));
        json_object_set_new(o, "naming_strategy", json_string(b->strategy));
        json_t *gpus = json_array();
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct amd_gpu *g = &inv->gpus[i];
                char mode[16];
                json_t *j = json_object();
                json_object_set_new(j, "pci", json_string(g->bdf));
                json_object_set_new(j, "product", json_string(g->product_name));
                json_object_set_new(j, "serial", json_string(g->serial));
                json_object_set_new(j, "device_id", json_string(g->device_id));
                json_object_set_new(j, "numa_node", json_integer(g->numa_node));
                json_object_set_new(j, "partition_mode", json_string(amd_gpu_partition_type(g, mode, sizeof(mode))));
                json_object_set_new(j, "vram_bytes", json_integer((json_int_t)g->vram_total));
                json_object_set_new(j, "gfx_target_version", json_integer(g->gfx_target_version));
                json_object_set_new(j, "healthy", json_boolean(!b->watch[i].bad));
                if (b->watch[i].bad)
                        json_object_set_new(j, "reason", json_string(b->watch[i].reason));
                json_t *parts = json_array();
                for (size_t k = 0; k < g->n_parts; k++) {
                        const struct amd_part *p = &g->parts[k];
                        json_t *pj = json_object();
                        json_object_set_new(pj, "id", json_string(p->id));
                        json_object_set_new(pj, "card", json_integer(p->card));
                        json_object_set_new(pj, "render", json_integer(p->render));
                        json_object_set_new(pj, "kfd_node", json_integer(p->kfd_node));
                        json_object_set_new(pj, "gpu_id", json_integer(p->gpu_id));
                        json_array_append_new(parts, pj);
                }
                json_object_set_new(j, "partitions", parts);
                json_t *links = json_array();
                for (size_t k = 0; k < inv->n_gpus; k++)
                        json_array_append_new(links, json_string(amd_link_name(inv, i, k)));
                json_object_set_new(j, "links", links);
                json_array_append_new(gpus, j);
        }
        json_object_set_new(o, "gpus", gpus);
        size_t n = 0;
        struct dev_kv *kv = amd_labels(inv, &n);
        json_t *labels = json_object();
        for (size_t i = 0; i < n; i++)
                json_object_set_new(labels, kv[i].key, json_string(kv[i].value));
        amd_labels_free(kv, n);
        json_object_set_new(o, "labels", labels);
        return o;
}
