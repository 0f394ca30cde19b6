/* Real GPU topologies for the alloc tests and bench/bench-alloc.c.
 *
 * DGX-1 with V100 (the SXM2 hybrid cube-mesh), as `nvidia-smi topo -m` prints
 * it.  Sources: the output recorded on NERSC Cori-GPU nodes (8x V100 SXM2,
 * same baseboard) and in OneFlow's DLPerf reports ("close to a DGX-1"), and
 * NCCL's topology dump of a DGX1-V100 in NVIDIA/nccl#671 (GPU0: 1 link to
 * GPU1 and GPU2, 2 to GPU3 and GPU4; GPU0 and GPU1 behind one PLX switch):
 *
 *         GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7  CPU Affinity
 *   GPU0   X   NV1  NV1  NV2  NV2  SYS  SYS  SYS   0-19,40-59
 *   GPU1  NV1   X   NV2  NV1  SYS  NV2  SYS  SYS   0-19,40-59
 *   GPU2  NV1  NV2   X   NV2  SYS  SYS  NV1  SYS   0-19,40-59
 *   GPU3  NV2  NV1  NV2   X   SYS  SYS  SYS  NV1   0-19,40-59
 *   GPU4  NV2  SYS  SYS  SYS   X   NV1  NV1  NV2   20-39,60-79
 *   GPU5  SYS  NV2  SYS  SYS  NV1   X   NV2  NV1   20-39,60-79
 *   GPU6  SYS  SYS  NV1  SYS  NV1  NV2   X   NV2   20-39,60-79
 *   GPU7  SYS  SYS  SYS  NV1  NV2  NV1  NV2   X    20-39,60-79
 *
 * Every V100 uses its 6 links.  PCIe: GPUs 0-3 hang off one CPU socket, 4-7
 * off the other; (0,1), (2,3), (4,5), (6,7) share a PLX switch (nvidia-smi
 * shows NV# wherever NVLink exists, the PCIe level comes from the PCIe tree). */
#ifndef DEVLET_TESTS_ALLOC_TOPOLOGIES_H
#define DEVLET_TESTS_ALLOC_TOPOLOGIES_H

#include "alloc/alloc.h"

static const unsigned dgx1_nvlinks[8][8] = {
        { 0, 1, 1, 2, 2, 0, 0, 0 }, { 1, 0, 2, 1, 0, 2, 0, 0 }, { 1, 2, 0, 2, 0, 0, 1, 0 },
        { 2, 1, 2, 0, 0, 0, 0, 1 }, { 2, 0, 0, 0, 0, 1, 1, 2 }, { 0, 2, 0, 0, 1, 0, 2, 1 },
        { 0, 0, 1, 0, 1, 2, 0, 2 }, { 0, 0, 0, 1, 2, 1, 2, 0 },
};

static inline enum alloc_pcie_level dgx1_pcie(size_t i, size_t j)
{
        if (i / 2 == j / 2)
                return ALLOC_PCIE_SINGLE_SWITCH;
        if (i / 4 == j / 4)
                return ALLOC_PCIE_NUMA_NODE;
        return ALLOC_PCIE_SYSTEM;
}

static inline struct alloc_topology *dgx1_topology(void)
{
        struct alloc_topology *t = alloc_topology_new(8);
        for (size_t i = 0; i < 8; i++)
                for (size_t j = i + 1; j < 8; j++)
                        alloc_topology_set(t, i, j, alloc_link_score(dgx1_nvlinks[i][j], dgx1_pcie(i, j)));
        return t;
}

/* 8x H100 SXM behind NVSwitch: NV18 between every pair; GPUs 0-3 on NUMA
 * node 0 and 4-7 on node 1, each on its own host bridge. */
static inline struct alloc_topology *hgx_h100_topology(void)
{
        struct alloc_topology *t = alloc_topology_new(8);
        for (size_t i = 0; i < 8; i++)
                for (size_t j = i + 1; j < 8; j++)
                        alloc_topology_set(t, i, j,
                                           alloc_link_score(18, i / 4 == j / 4 ? ALLOC_PCIE_NUMA_NODE
                                                                               : ALLOC_PCIE_SYSTEM));
        return t;
}

#endif
