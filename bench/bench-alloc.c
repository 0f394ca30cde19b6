/* `make bench`: latency of the preferred-allocation choices in src/alloc/.
 *
 * Times single calls of alloc_best_set() on the DGX-1 V100 topology and on
 * random 16-GPU matrices (every pair scored at random: no structure for the
 * bound to exploit, so a hard case), and of alloc_replicas_choose(), and
 * prints p50/p99 per case as table rows.  Figures only, nothing asserted. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc-topologies.h"
#include "bench-util.h"
#include "alloc/alloc.h"
#include "base/xalloc.h"

#define N_RANDOM 64 /* random 16-GPU matrices, cycled */

/* Times iters calls cycling over the n_topo topologies. */
static void bench_best_set(const char *name, struct alloc_topology **topo, size_t n_topo,
                           const size_t *avail, size_t n_avail, const size_t *must, size_t n_must,
                           size_t size, size_t iters)
{
        uint64_t *ns = xmalloc(iters * sizeof(*ns));
        size_t out[ALLOC_MAX_GPUS];
        for (size_t i = 0; i < iters; i++) {
                uint64_t t0 = now_ns();
                int r = alloc_best_set(topo[i % n_topo], avail, n_avail, must, n_must, size, out);
                ns[i] = now_ns() - t0;
                if (r != (int)size) {
                        fprintf(stderr, "bench-alloc: %s: unexpected answer %d\n", name, r);
                        exit(1);
                }
        }
        report(name, ns, iters);
        free(ns);
}

static void bench_replicas(const char *name, enum alloc_replica_policy policy, size_t gpus,
                           unsigned reps, size_t size, size_t iters)
{
        struct alloc_replica *r = xmalloc(gpus * reps * sizeof(*r));
        size_t n = 0;
        for (size_t g = 0; g < gpus; g++)
                for (unsigned k = g % reps; k < reps; k++) /* GPU g has g replicas taken */
                        r[n++] = (struct alloc_replica){ g, k };
        uint64_t *ns = xmalloc(iters * sizeof(*ns));
        size_t *out = xmalloc(size * sizeof(*out));
        for (size_t i = 0; i < iters; i++) {
                uint64_t t0 = now_ns();
                int k = alloc_replicas_choose(policy, r, n, NULL, 0, size, out);
                ns[i] = now_ns() - t0;
                if (k != (int)size) {
                        fprintf(stderr, "bench-alloc: %s: unexpected answer %d\n", name, k);
                        exit(1);
                }
        }
        report(name, ns, iters);
        free(out);
        free(ns);
        free(r);
}

int main(void)
{
        static const size_t all[16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
        static const size_t no3[] = { 0, 1, 2, 4, 5, 6, 7 };

        struct alloc_topology *dgx1 = dgx1_topology();
        bench_best_set("preferred allocation, 8 GPUs, size 2", &dgx1, 1, all, 8, NULL, 0, 2, 20000);
        bench_best_set("preferred allocation, 8 GPUs, size 4", &dgx1, 1, all, 8, NULL, 0, 4, 20000);
        bench_best_set("preferred allocation, 8 GPUs, size 4, must 1, GPU 3 lost", &dgx1, 1, no3, 7,
                       (const size_t[]){ 5 }, 1, 4, 20000);

        struct alloc_topology *rnd[N_RANDOM];
        for (size_t k = 0; k < N_RANDOM; k++) {
                rnd[k] = alloc_topology_new(16);
                for (size_t i = 0; i < 16; i++)
                        for (size_t j = i + 1; j < 16; j++)
                                alloc_topology_set(rnd[k], i, j, (int)(rng() % (20 * ALLOC_NVLINK_WEIGHT)));
        }
        bench_best_set("preferred allocation, 16 GPUs, size 4", rnd, N_RANDOM, all, 16, NULL, 0, 4, 5000);
        bench_best_set("preferred allocation, 16 GPUs, size 8", rnd, N_RANDOM, all, 16, NULL, 0, 8, 5000);

        bench_replicas("replicas distributed, 8 GPUs x 16, size 4", ALLOC_REPLICAS_DISTRIBUTED, 8, 16, 4,
                       20000);
        bench_replicas("replicas packed, 8 GPUs x 16, size 4", ALLOC_REPLICAS_PACKED, 8, 16, 4, 20000);

        for (size_t k = 0; k < N_RANDOM; k++)
                alloc_topology_free(rnd[k]);
        alloc_topology_free(dgx1);
        return 0;
}
