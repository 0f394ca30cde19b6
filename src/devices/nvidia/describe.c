/* `devlet list`'s NVIDIA section: the GPUs, their MIG devices and
 * replicas, health, and the topology matrix in the form of nvidia-smi
 * topo -m (NV<n> for n NVLinks, else the PCIe path: PIX, PXB, PHB, NODE,
 * SYS), as text and as JSON.  Reads the backend's state; never calls NVML. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "devices/nvidia/health.h"
#include "devices/nvidia/internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static size_t replicas_of(const struct nvidia_backend *b, size_t gpu)
{
        size_t n = 0;
        for (size_t i = 0; i < b->layout.n_res; i++) {
                const struct dev_resource *r = b->layout.res[i];
                for (size_t k = 0; k < r->n_devices; k++) {
                        const struct nvidia_dev *nd = r->devices[k].priv;
                        n += nd->gpu == gpu && nd->replica >= 0;
                }
        }
        return n;
}

static void link_name(const struct nvml_inventory *inv, size_t a, size_t b, char *buf, size_t size)
{
        size_t n = inv->n_gpus;
        if (a == b)
                snprintf(buf, size, "X");
        else if (inv->nvlinks[a * n + b])
                snprintf(buf, size, "NV%u", inv->nvlinks[a * n + b]);
        else
                snprintf(buf, size, "%s", nvml_pcie_level_name(inv->pcie[a * n + b]));
}

static const char *health_of(const struct nvidia_backend *b, size_t gpu)
{
        return b->gpu_health[gpu].bad ? "Unhealthy" : "Healthy";
}

void nvidia_describe(struct dev_backend *db, FILE *f)
{
        const struct nvidia_backend *b = (const struct nvidia_backend *)db;
        const struct nvml_inventory *inv = b->inv;
        fprintf(f, "\nNVIDIA: driver %s, CUDA %d.%d, %zu GPUs, mig-strategy %s, health %s\n",
                inv->driver_version[0] ? inv->driver_version : "?",
                NVML_CUDA_DRIVER_VERSION_MAJOR(inv->cuda_version),
                NVML_CUDA_DRIVER_VERSION_MINOR(inv->cuda_version), inv->n_gpus, b->mig_strategy,
                b->health_state ? b->health_state : "?");
        fprintf(f, "%-4s %-26s %-41s %-13s %-10s %-5s %-4s %-8s %s\n", "GPU", "NAME", "UUID",
                "BUS ID", "MEMORY", "NUMA", "MIG", "REPLICAS", "HEALTH");
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                char mem[32], numa[16] = "-", reps[24] = "-";
                snprintf(mem, sizeof(mem), "%.1f GiB", (double)g->memory_bytes / GIB);
                if (g->numa_node >= 0)
                        snprintf(numa, sizeof(numa), "%d", g->numa_node);
                size_t nr = replicas_of(b, i);
                if (nr)
                        snprintf(reps, sizeof(reps), "%zu", nr);
                fprintf(f, "%-4zu %-26s %-41s %-13s %-10s %-5s %-4s %-8s %s", i,
                        g->lost ? "?" : g->name, g->lost ? "(lost)" : g->uuid,
                        g->bus_id[0] ? g->bus_id : "?", mem, numa,
                        !g->mig_capable ? "-" : g->mig_enabled ? "on" : "off", reps,
                        health_of(b, i));
                if (b->gpu_health[i].bad && b->gpu_health[i].reason)
                        fprintf(f, " (%s)", b->gpu_health[i].reason);
                fputc('\n', f);
                for (size_t j = 0; j < g->n_migs; j++) {
                        const struct nvml_mig_dev *m = &g->migs[j];
                        fprintf(f, "       MIG %zu:%u  %-12s %-41s gi %-2u ci %-2u %6.1f GiB %4u SMs\n",
                                i, m->index, m->profile, m->uuid, m->gi, m->ci,
                                (double)m->memory_mib / 1024.0, m->multiprocessors);
                }
        }
        /* which GPUs lack the DCGM_FI_PROF_* families (no NVML GPM: before Hopper) */
        char lacking[256] = "";
        size_t n_lacking = 0, len = 0;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                if (inv->gpus[i].gpm || inv->gpus[i].lost)
                        continue;
                n_lacking++;
                if (len < sizeof(lacking) - 8)
                        len += (size_t)snprintf(lacking + len, sizeof(lacking) - len, "%s%zu",
                                                n_lacking > 1 ? "," : "", i);
        }
        if (n_lacking)
                fprintf(f, "Profiling metrics (DCGM_FI_PROF_*): GPUs %s lack NVML GPM (only PCIe and "
                           "NVLink rates where NVML has them)\n",
                        lacking);
        else
                fprintf(f, "Profiling metrics (DCGM_FI_PROF_*): every GPU, through NVML GPM\n");
        if (inv->n_gpus < 2)
                return;
        fprintf(f, "\nTopology (NV<n>: n NVLinks; otherwise the PCIe path: PIX one switch, PXB "
                   "several, PHB host bridge, NODE same NUMA node, SYS across CPUs)\n%-7s", "");
        for (size_t j = 0; j < inv->n_gpus; j++) {
                char h[32];
                snprintf(h, sizeof(h), "GPU%zu", j);
                fprintf(f, " %-5s", h);
        }
        fprintf(f, " %s\n", "NUMA");
        for (size_t a = 0; a < inv->n_gpus; a++) {
                char h[32], numa[16] = "-";
                snprintf(h, sizeof(h), "GPU%zu", a);
                fprintf(f, "%-7s", h);
                for (size_t c = 0; c < inv->n_gpus; c++) {
                        char cell[16];
                        link_name(inv, a, c, cell, sizeof(cell));
                        fprintf(f, " %-5s", cell);
                }
                if (inv->gpus[a].numa_node >= 0)
                        snprintf(numa, sizeof(numa), "%d", inv->gpus[a].numa_node);
                fprintf(f, " %s\n", numa);
        }
}

static json_t *mig_json(const struct nvml_mig_dev *m, size_t gpu)
{
        char index[32];
        snprintf(index, sizeof(index), "%zu:%u", gpu, m->index);
        return json_pack("{s:s, s:s, s:s, s:i, s:i, s:I, s:i}", "index", index, "uuid", m->uuid,
                         "profile", m->profile, "gi", (int)m->gi, "ci", (int)m->ci, "memory_mib",
                         (json_int_t)m->memory_mib, "multiprocessors", (int)m->multiprocessors);
}

json_t *nvidia_describe_json(struct dev_backend *db)
{
        const struct nvidia_backend *b = (const struct nvidia_backend *)db;
        const struct nvml_inventory *inv = b->inv;
        json_t *gpus = json_array();
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                json_t *migs = json_array();
                for (size_t j = 0; j < g->n_migs; j++)
                        json_array_append_new(migs, mig_json(&g->migs[j], i));
                char cc[16] = "";
                if (g->cc_major >= 0)
                        snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
                json_array_append_new(
                    gpus, json_pack("{s:i, s:s, s:s, s:s, s:I, s:o, s:o, s:s, s:b, s:b, s:o, s:i, "
                                    "s:s, s:o, s:b}",
                                    "index", (int)i, "name", g->name, "uuid", g->uuid, "bus_id",
                                    g->bus_id, "memory_bytes", (json_int_t)g->memory_bytes, "numa",
                                    g->numa_node >= 0 ? json_integer(g->numa_node) : json_null(),
                                    "minor", g->minor >= 0 ? json_integer(g->minor) : json_null(),
                                    "compute_capability", cc, "lost", g->lost, "mig_enabled",
                                    g->mig_enabled, "mig_devices", migs, "replicas",
                                    (int)replicas_of(b, i), "health", health_of(b, i), "reason",
                                    b->gpu_health[i].reason ? json_string(b->gpu_health[i].reason)
                                                            : json_null(),
                                    "profiling_metrics", g->gpm));
        }
        json_t *nv = json_array(), *links = json_array();
        for (size_t a = 0; a < inv->n_gpus; a++) {
                json_t *row = json_array(), *lrow = json_array();
                for (size_t c = 0; c < inv->n_gpus; c++) {
                        char cell[16];
                        link_name(inv, a, c, cell, sizeof(cell));
                        json_array_append_new(row, json_integer(a == c ? 0 : inv->nvlinks[a * inv->n_gpus + c]));
                        json_array_append_new(lrow, json_string(cell));
                }
                json_array_append_new(nv, row);
                json_array_append_new(links, lrow);
        }
        json_t *xids = json_object();
        for (size_t i = 0; i < b->n_xids; i++) {
                char k[32];
                snprintf(k, sizeof(k), "%llu", b->xids[i].xid);
                json_object_set_new(xids, k, json_integer((json_int_t)b->xids[i].count));
        }
        char cuda[16];
        snprintf(cuda, sizeof(cuda), "%d.%d", NVML_CUDA_DRIVER_VERSION_MAJOR(inv->cuda_version),
                 NVML_CUDA_DRIVER_VERSION_MINOR(inv->cuda_version));
        return json_pack("{s:s, s:s, s:s, s:s, s:o, s:{s:o, s:o}, s:o}", "driver_version",
                         inv->driver_version, "cuda_version", cuda, "mig_strategy",
                         b->mig_strategy, "health", b->health_state ? b->health_state : "",
                         "gpus", gpus, "topology", "nvlinks", nv, "matrix", links, "xid_events",
                         xids);
}
