/* Preferred allocation: which devices to hand a container, as pure functions.
 *
 * Whole GPUs: the backend reads the topology once at start-up (NVLink counts
 * and the PCIe level between every pair), turns each pair into a score with
 * alloc_link_score() and keeps an alloc_topology; GetPreferredAllocation then
 * calls alloc_best_set(), which answers in microseconds and never touches the
 * driver.  Time-sliced GPUs: alloc_replicas_choose() spreads or packs replicas.
 *
 * Knows nothing of NVML, the kubelet or device IDs: callers map IDs to GPU
 * indices.  Nothing here logs, blocks or keeps state between calls. */
#ifndef DEVLET_ALLOC_ALLOC_H
#define DEVLET_ALLOC_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Topologies larger than this are refused (alloc_topology_new returns NULL). */
#define ALLOC_MAX_GPUS 256
/* alloc_best_set is exact when at most this many GPUs are candidates. */
#define ALLOC_EXACT_MAX 16
/* What one NVLink between a pair is worth; larger than the PCIe part of all
 * 120 pairs of a 16-GPU set together, so a set with more NVLinks always wins. */
#define ALLOC_NVLINK_WEIGHT 10000
/* Link counts above this are scored as this many (keeps sums far from overflow). */
#define ALLOC_NVLINK_MAX 100

/* Link between two GPUs, as the NVIDIA backend reads it from NVML
 * (NVML's GPU topology levels, closest first). */
enum alloc_pcie_level {
        ALLOC_PCIE_SAME_BOARD,        /* INTERNAL: two GPUs on one board */
        ALLOC_PCIE_SINGLE_SWITCH,     /* SINGLE / nvidia-smi PIX */
        ALLOC_PCIE_MULTIPLE_SWITCHES, /* MULTIPLE / PXB */
        ALLOC_PCIE_HOST_BRIDGE,       /* HOSTBRIDGE / PHB */
        ALLOC_PCIE_NUMA_NODE,         /* NODE: same NUMA node, across host bridges */
        ALLOC_PCIE_SYSTEM,            /* SYSTEM / SYS: across the CPU interconnect */
        ALLOC_PCIE_UNKNOWN,
};

/* Pair score: nvlinks dominate (each link is worth ALLOC_NVLINK_WEIGHT, more
 * than the best PCIe level), then the PCIe level: 60 for the same board down
 * by 10 per level to 10 for SYSTEM, 0 for UNKNOWN or an out-of-range level.
 * Always >= 0. */
int alloc_link_score(unsigned nvlinks, enum alloc_pcie_level level);

struct alloc_topology {
        size_t n;
        int *score; /* n*n, symmetric, score[i*n+j]; the diagonal is unused */
};

/* A topology of n GPUs with every pair scored 0.  NULL when n is 0 or larger
 * than ALLOC_MAX_GPUS. */
struct alloc_topology *alloc_topology_new(size_t n);
/* Sets score(i, j) and score(j, i).  Out-of-range indices are ignored. */
void alloc_topology_set(struct alloc_topology *t, size_t i, size_t j, int score);
/* Sum of the pairwise scores over set[0..n) (every unordered pair once;
 * out-of-range indices contribute nothing). */
int64_t alloc_set_score(const struct alloc_topology *t, const size_t *set, size_t n);
void alloc_topology_free(struct alloc_topology *t);

/* Chooses `size` GPU indices from `available` that include every index in
 * `must`, maximizing the sum of pairwise scores over the chosen set.
 *
 * Exact (branch and bound with an admissible bound) when at most
 * ALLOC_EXACT_MAX GPUs are candidates (available minus must); beyond that, a
 * multi-start greedy followed by a swap local search (no single swap of a
 * chosen and an unchosen GPU improves the answer).  Ties: the exact search
 * answers the optimal set whose positions in `available` are lexicographically
 * smallest (so with `available` ascending, the lowest indices).
 *
 * Input handling: duplicates in `available` or `must` count once; GPUs that
 * are lost simply are not in `available`; size larger than what is available
 * answers every available GPU; size 0 (with no must) answers 0.
 *
 * Writes the chosen indices to out (room for size) in ascending order.
 * Returns the count, min(size, distinct available), or -EINVAL if t is NULL,
 * an index in available or must is out of range, a must index is not in
 * available, or size is smaller than the number of distinct must indices.
 * out is untouched on error. */
int alloc_best_set(const struct alloc_topology *t, const size_t *available, size_t n_available,
                   const size_t *must, size_t n_must, size_t size, size_t *out);

/* Replica policies for time-sliced GPUs: each GPU is advertised as R replica
 * IDs "<uuid>::<n>" and the kubelet passes those still available. */
enum alloc_replica_policy {
        /* Spread a request over distinct GPUs (one replica per GPU while there
         * are GPUs it does not use yet), the least loaded GPUs (most replicas
         * still available) first. */
        ALLOC_REPLICAS_DISTRIBUTED,
        /* Fill the most loaded GPU (fewest replicas still available) first,
         * keeping whole GPUs free. */
        ALLOC_REPLICAS_PACKED,
};

/* One available replica: which GPU it belongs to and its replica number. */
struct alloc_replica {
        size_t gpu;
        unsigned replica;
};

/* Chooses size replicas from available.  `must` holds indices into available
 * (the kubelet's must-include IDs); they are answered first, in the order
 * given, and count as taken by the request when the rest are chosen.  Each
 * further replica comes from the GPU the policy ranks first:
 *   distributed: fewest replicas taken by this request, then most replicas
 *                still available, then lowest GPU number;
 *   packed:      fewest replicas still available (but at least one), then
 *                lowest GPU number;
 * within a GPU, the lowest replica number.  Deterministic: which replicas
 * are chosen depends only on the set of (gpu, replica) pairs and must, not on
 * the order of available.
 *
 * Duplicates (same gpu and replica, or a repeated must index) count once.
 * Writes indices into `available` to out (room for size).  Returns the count,
 * min(size, distinct available), or -EINVAL for an unknown policy, more than
 * INT_MAX available, a must index out of range, or size smaller than the
 * number of distinct must indices.  out is untouched on error. */
int alloc_replicas_choose(enum alloc_replica_policy policy, const struct alloc_replica *available,
                          size_t n_available, const size_t *must, size_t n_must, size_t size,
                          size_t *out);

#endif
