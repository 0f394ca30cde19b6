/* Unit tests for src/alloc/: link scores, the best GPU set (against real
 * topologies and against a brute-force enumerator) and replica policies. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc-topologies.h"
#include "alloc/alloc.h"
#include "base/cleanup.h"
#include "base/xalloc.h"

DEFINE_CLEANUP_FUNC(struct alloc_topology, alloc_topology_free)
#define _cleanup_topology_ _cleanup_(alloc_topology_freep)

/* xorshift64*: fixed seeds keep every run the same */
static uint64_t rng_state;
static uint64_t rng(void)
{
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545F4914F6CDD1DULL;
}
static size_t rnd(size_t n) { return (size_t)(rng() % n); }

/* ---- brute force: every combination, in lexicographic order of positions ---- */

struct brute {
        const struct alloc_topology *t;
        size_t list[ALLOC_MAX_GPUS]; /* distinct available, in order */
        size_t m, k;
        bool must[ALLOC_MAX_GPUS];
        size_t n_must;
        size_t cur[ALLOC_MAX_GPUS], best[ALLOC_MAX_GPUS];
        int64_t best_score;
        bool found;
};

static void brute_rec(struct brute *b, size_t start, size_t depth)
{
        if (depth == b->k) {
                size_t musts = 0;
                for (size_t i = 0; i < b->k; i++)
                        musts += b->must[b->cur[i]];
                if (musts != b->n_must)
                        return;
                int64_t s = alloc_set_score(b->t, b->cur, b->k);
                if (!b->found || s > b->best_score) {
                        b->found = true;
                        b->best_score = s;
                        memcpy(b->best, b->cur, b->k * sizeof(*b->cur));
                }
                return;
        }
        for (size_t p = start; p + (b->k - depth) <= b->m; p++) {
                b->cur[depth] = b->list[p];
                brute_rec(b, p + 1, depth + 1);
        }
}

static int cmp_size(const void *a, const void *b)
{
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        return (x > y) - (x < y);
}

/* The optimum (lexicographically first on ties), sorted, into out; returns
 * its size.  Inputs must be valid. */
static size_t brute_best(const struct alloc_topology *t, const size_t *avail, size_t n_avail,
                         const size_t *must, size_t n_must, size_t size, size_t *out, int64_t *score)
{
        static struct brute b;
        memset(&b, 0, sizeof(b));
        b.t = t;
        bool seen[ALLOC_MAX_GPUS] = { false };
        for (size_t i = 0; i < n_avail; i++)
                if (!seen[avail[i]]) {
                        seen[avail[i]] = true;
                        b.list[b.m++] = avail[i];
                }
        for (size_t i = 0; i < n_must; i++)
                if (!b.must[must[i]]) {
                        b.must[must[i]] = true;
                        b.n_must++;
                }
        b.k = size < b.m ? size : b.m;
        brute_rec(&b, 0, 0);
        assert_true(b.found);
        memcpy(out, b.best, b.k * sizeof(*out));
        qsort(out, b.k, sizeof(*out), cmp_size);
        *score = b.best_score;
        return b.k;
}

static const size_t all8[] = { 0, 1, 2, 3, 4, 5, 6, 7 };

static void assert_set(const size_t *got, int n, const size_t *want, size_t n_want)
{
        assert_int_equal(n, (int)n_want);
        for (size_t i = 0; i < n_want; i++)
                assert_int_equal(got[i], want[i]);
}

/* alloc_best_set must match the brute force exactly (same tie rule). */
static void check_vs_brute(const struct alloc_topology *t, const size_t *avail, size_t n_avail,
                           const size_t *must, size_t n_must, size_t size)
{
        size_t got[ALLOC_MAX_GPUS], want[ALLOC_MAX_GPUS];
        int64_t want_score;
        int n = alloc_best_set(t, avail, n_avail, must, n_must, size, got);
        size_t k = brute_best(t, avail, n_avail, must, n_must, size, want, &want_score);
        assert_int_equal(n, (int)k);
        assert_int_equal(alloc_set_score(t, got, k), want_score);
        assert_set(got, n, want, k);
}

/* ---- scores ---- */

static void test_link_score(void **state)
{
        /* one link beats the best PCIe level; more links beat fewer */
        assert_true(alloc_link_score(1, ALLOC_PCIE_SYSTEM) > alloc_link_score(0, ALLOC_PCIE_SAME_BOARD));
        assert_true(alloc_link_score(2, ALLOC_PCIE_UNKNOWN) > alloc_link_score(1, ALLOC_PCIE_SAME_BOARD));
        /* PCIe levels: closer is better, at every link count */
        for (unsigned l = 0; l < 3; l++)
                for (int lv = ALLOC_PCIE_SAME_BOARD; lv < ALLOC_PCIE_UNKNOWN; lv++)
                        assert_true(alloc_link_score(l, (enum alloc_pcie_level)lv) >
                                    alloc_link_score(l, (enum alloc_pcie_level)(lv + 1)));
        assert_int_equal(alloc_link_score(0, ALLOC_PCIE_UNKNOWN), 0);
        assert_int_equal(alloc_link_score(0, (enum alloc_pcie_level)42), 0);
        assert_int_equal(alloc_link_score(1000000, ALLOC_PCIE_SYSTEM),
                         alloc_link_score(ALLOC_NVLINK_MAX, ALLOC_PCIE_SYSTEM));
        /* a 16-GPU set's PCIe part never outweighs one link */
        int pcie_span = alloc_link_score(0, ALLOC_PCIE_SAME_BOARD) - alloc_link_score(0, ALLOC_PCIE_UNKNOWN);
        assert_true(120 * pcie_span < ALLOC_NVLINK_WEIGHT);
}

static void test_topology_object(void **state)
{
        assert_null(alloc_topology_new(0));
        assert_null(alloc_topology_new(ALLOC_MAX_GPUS + 1));
        _cleanup_topology_ struct alloc_topology *t = alloc_topology_new(3);
        assert_non_null(t);
        assert_int_equal(t->n, 3);
        alloc_topology_set(t, 0, 2, 7);
        alloc_topology_set(t, 1, 2, -3);
        alloc_topology_set(t, 3, 0, 99); /* out of range: ignored */
        alloc_topology_set(NULL, 0, 1, 1);
        assert_int_equal(t->score[0 * 3 + 2], 7);
        assert_int_equal(t->score[2 * 3 + 0], 7);
        assert_int_equal(t->score[2 * 3 + 1], -3);
        size_t set[] = { 0, 1, 2 };
        assert_int_equal(alloc_set_score(t, set, 3), 4);
        alloc_topology_free(NULL);
}

/* ---- DGX-1 V100 ---- */

static unsigned set_links(const size_t *set, size_t n)
{
        unsigned links = 0;
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++)
                        links += dgx1_nvlinks[set[a]][set[b]];
        return links;
}

static void test_dgx1(void **state)
{
        _cleanup_topology_ struct alloc_topology *t = dgx1_topology();
        size_t out[8];

        /* size 2: a double-link pair; (2,3) and (6,7) also share a PCIe switch */
        int n = alloc_best_set(t, all8, 8, NULL, 0, 2, out);
        assert_set(out, n, (size_t[]){ 2, 3 }, 2);
        assert_int_equal(dgx1_nvlinks[out[0]][out[1]], 2);
        check_vs_brute(t, all8, 8, NULL, 0, 2);

        /* size 4: the two socket quads have 9 links each, the most any quad
         * has; {0,1,2,3} comes first */
        n = alloc_best_set(t, all8, 8, NULL, 0, 4, out);
        assert_set(out, n, (size_t[]){ 0, 1, 2, 3 }, 4);
        assert_int_equal(set_links(out, 4), 9);
        check_vs_brute(t, all8, 8, NULL, 0, 4);
        for (size_t s = 1; s <= 8; s++)
                check_vs_brute(t, all8, 8, NULL, 0, s);

        /* must {5}, size 2: 5 has two links to 1 (other socket) and to 6 (same socket) */
        n = alloc_best_set(t, all8, 8, (size_t[]){ 5 }, 1, 2, out);
        assert_set(out, n, (size_t[]){ 5, 6 }, 2);
        assert_int_equal(dgx1_nvlinks[5][6], 2);

        /* must {0,5}, size 4: the brute-force optimum containing both */
        n = alloc_best_set(t, all8, 8, (size_t[]){ 0, 5 }, 2, 4, out);
        assert_int_equal(n, 4);
        assert_non_null(bsearch(&(size_t){ 0 }, out, 4, sizeof(size_t), cmp_size));
        assert_non_null(bsearch(&(size_t){ 5 }, out, 4, sizeof(size_t), cmp_size));
        assert_int_equal(set_links(out, 4), 6);
        check_vs_brute(t, all8, 8, (size_t[]){ 0, 5 }, 2, 4);

        /* size 8: everything */
        n = alloc_best_set(t, all8, 8, NULL, 0, 8, out);
        assert_set(out, n, all8, 8);
}

static void test_dgx1_lost_gpus(void **state)
{
        _cleanup_topology_ struct alloc_topology *t = dgx1_topology();
        size_t out[8];
        /* GPU 3 is gone: (6,7) is the best pair left, {4,5,6,7} the best quad */
        const size_t no3[] = { 0, 1, 2, 4, 5, 6, 7 };
        int n = alloc_best_set(t, no3, 7, NULL, 0, 2, out);
        assert_set(out, n, (size_t[]){ 6, 7 }, 2);
        n = alloc_best_set(t, no3, 7, NULL, 0, 4, out);
        assert_set(out, n, (size_t[]){ 4, 5, 6, 7 }, 4);
        for (size_t s = 1; s <= 7; s++)
                check_vs_brute(t, no3, 7, NULL, 0, s);
        /* a lost GPU cannot be must-include */
        memset(out, 0xff, sizeof(out));
        assert_int_equal(alloc_best_set(t, no3, 7, (size_t[]){ 3 }, 1, 2, out), -EINVAL);
        assert_int_equal(out[0], SIZE_MAX); /* untouched */
        /* half the node gone, more asked than left: all that is left */
        const size_t half[] = { 6, 1, 4 };
        n = alloc_best_set(t, half, 3, NULL, 0, 4, out);
        assert_set(out, n, (size_t[]){ 1, 4, 6 }, 3);
        n = alloc_best_set(t, half, 3, NULL, 0, 2, out);
        assert_set(out, n, (size_t[]){ 4, 6 }, 2); /* NV1 beats nothing */
        /* every GPU lost */
        assert_int_equal(alloc_best_set(t, NULL, 0, NULL, 0, 2, out), 0);
}

/* ---- NVSwitch: every pair equal over NVLink ---- */

static void test_nvswitch(void **state)
{
        _cleanup_topology_ struct alloc_topology *t = hgx_h100_topology();
        size_t out[8];
        /* same NUMA node wins; the lowest quad first */
        int n = alloc_best_set(t, all8, 8, NULL, 0, 4, out);
        assert_set(out, n, (size_t[]){ 0, 1, 2, 3 }, 4);
        /* ties follow the order of available */
        const size_t rev[] = { 7, 6, 5, 4, 3, 2, 1, 0 };
        n = alloc_best_set(t, rev, 8, NULL, 0, 4, out);
        assert_set(out, n, (size_t[]){ 4, 5, 6, 7 }, 4);
        n = alloc_best_set(t, rev, 8, NULL, 0, 2, out);
        assert_set(out, n, (size_t[]){ 6, 7 }, 2);
        /* with 2 and 3 taken, the full node-1 quad beats 0,1 plus two across */
        const size_t some[] = { 0, 1, 4, 5, 6, 7 };
        n = alloc_best_set(t, some, 6, NULL, 0, 4, out);
        assert_set(out, n, (size_t[]){ 4, 5, 6, 7 }, 4);
        /* a must GPU pulls its NUMA neighbours */
        n = alloc_best_set(t, all8, 8, (size_t[]){ 5 }, 1, 2, out);
        assert_set(out, n, (size_t[]){ 4, 5 }, 2);
        n = alloc_best_set(t, all8, 8, (size_t[]){ 6 }, 1, 3, out);
        assert_set(out, n, (size_t[]){ 4, 5, 6 }, 3);
        /* all-equal matrix: deterministic, the first ones in available */
        _cleanup_topology_ struct alloc_topology *flat = alloc_topology_new(8);
        for (size_t i = 0; i < 8; i++)
                for (size_t j = i + 1; j < 8; j++)
                        alloc_topology_set(flat, i, j, alloc_link_score(18, ALLOC_PCIE_SYSTEM));
        for (int rep = 0; rep < 3; rep++) {
                n = alloc_best_set(flat, all8, 8, NULL, 0, 3, out);
                assert_set(out, n, (size_t[]){ 0, 1, 2 }, 3);
        }
        const size_t order[] = { 5, 2, 7, 0, 1, 3, 4, 6 };
        n = alloc_best_set(flat, order, 8, NULL, 0, 3, out);
        assert_set(out, n, (size_t[]){ 2, 5, 7 }, 3);
}

/* ---- random matrices against brute force ---- */

static void random_matrix(struct alloc_topology *t, int lo, int hi)
{
        for (size_t i = 0; i < t->n; i++)
                for (size_t j = i + 1; j < t->n; j++)
                        alloc_topology_set(t, i, j, lo + (int)rnd((size_t)(hi - lo + 1)));
}

static void test_random_vs_brute(void **state)
{
        rng_state = 0x9E3779B97F4A7C15ULL;
        /* narrow ranges make ties common, wide ones make them rare */
        static const int ranges[][2] = { { 0, 2 }, { -5, 5 }, { 0, 1000 }, { -100000, 100000 } };
        size_t cases = 0;
        for (size_t n = 1; n <= 12; n++) {
                _cleanup_topology_ struct alloc_topology *t = alloc_topology_new(n);
                for (int rep = 0; rep < 300; rep++) {
                        const int *rg = ranges[rnd(ARRAY_SIZE(ranges))];
                        random_matrix(t, rg[0], rg[1]);
                        /* a random subset in random order, sometimes with duplicates */
                        size_t avail[2 * 12], n_avail = 0, perm[12];
                        for (size_t i = 0; i < n; i++)
                                perm[i] = i;
                        for (size_t i = n; i > 1; i--) {
                                size_t j = rnd(i), x = perm[i - 1];
                                perm[i - 1] = perm[j];
                                perm[j] = x;
                        }
                        size_t keep = 1 + rnd(n);
                        for (size_t i = 0; i < keep; i++) {
                                avail[n_avail++] = perm[i];
                                if (rnd(8) == 0)
                                        avail[n_avail++] = perm[rnd(i + 1)];
                        }
                        size_t must[4], n_must = rnd(keep < 3 ? keep + 1 : 4);
                        for (size_t i = 0; i < n_must; i++)
                                must[i] = perm[rnd(keep)];
                        size_t size = n_must + rnd(keep + 2 - n_must);
                        check_vs_brute(t, avail, n_avail, must, n_must, size);
                        cases++;
                }
        }
        assert_int_equal(cases, 12 * 300);
}

static void test_16_gpus(void **state)
{
        rng_state = 0xD1B54A32D192ED03ULL;
        size_t all[16];
        for (size_t i = 0; i < 16; i++)
                all[i] = i;
        _cleanup_topology_ struct alloc_topology *t = alloc_topology_new(16);
        for (int rep = 0; rep < 4; rep++) {
                if (rep % 2)
                        random_matrix(t, 0, 3); /* many ties */
                else
                        random_matrix(t, 0, 20 * ALLOC_NVLINK_WEIGHT);
                for (size_t size = 2; size <= 8; size++)
                        check_vs_brute(t, all, 16, NULL, 0, size);
                check_vs_brute(t, all, 16, (size_t[]){ 3, 11 }, 2, 6);
                check_vs_brute(t, all, 16, (size_t[]){ 15 }, 1, 8);
        }
        /* two 16-GPU cube-meshes' worth: a DGX-1 pattern copied into both halves */
        for (size_t i = 0; i < 16; i++)
                for (size_t j = i + 1; j < 16; j++)
                        alloc_topology_set(t, i, j,
                                           i / 8 == j / 8 ? alloc_link_score(dgx1_nvlinks[i % 8][j % 8],
                                                                             dgx1_pcie(i % 8, j % 8))
                                                          : alloc_link_score(0, ALLOC_PCIE_SYSTEM));
        size_t out[16];
        int n = alloc_best_set(t, all, 16, NULL, 0, 4, out);
        assert_set(out, n, (size_t[]){ 0, 1, 2, 3 }, 4);
        for (size_t size = 2; size <= 8; size++)
                check_vs_brute(t, all, 16, NULL, 0, size);
}

/* Beyond ALLOC_EXACT_MAX: a valid set that no single swap improves. */
static void test_large_local_optimum(void **state)
{
        rng_state = 0x1234567887654321ULL;
        const size_t n = 40;
        _cleanup_topology_ struct alloc_topology *t = alloc_topology_new(n);
        size_t all[40];
        for (size_t i = 0; i < n; i++)
                all[i] = i;
        for (int rep = 0; rep < 10; rep++) {
                random_matrix(t, -50, 1000);
                size_t must[] = { rnd(n), rnd(n) };
                size_t size = 3 + rnd(20), out[40];
                int k = alloc_best_set(t, all, n, must, 2, size, out);
                assert_int_equal(k, (int)size);
                bool in[40] = { false };
                for (int i = 0; i < k; i++) {
                        assert_false(in[out[i]]);
                        in[out[i]] = true;
                        if (i)
                                assert_true(out[i - 1] < out[i]);
                }
                assert_true(in[must[0]] && in[must[1]]);
                int64_t score = alloc_set_score(t, out, (size_t)k);
                for (int i = 0; i < k; i++) {
                        if (out[i] == must[0] || out[i] == must[1])
                                continue;
                        for (size_t v = 0; v < n; v++) {
                                if (in[v])
                                        continue;
                                size_t swapped[40];
                                memcpy(swapped, out, (size_t)k * sizeof(*out));
                                swapped[i] = v;
                                assert_true(alloc_set_score(t, swapped, (size_t)k) <= score);
                        }
                }
        }
        /* and a DGX-1-like 24-GPU node still gets its quads right */
        _cleanup_topology_ struct alloc_topology *big = alloc_topology_new(24);
        for (size_t i = 0; i < 24; i++)
                for (size_t j = i + 1; j < 24; j++)
                        alloc_topology_set(big, i, j,
                                           i / 8 == j / 8 ? alloc_link_score(dgx1_nvlinks[i % 8][j % 8],
                                                                             dgx1_pcie(i % 8, j % 8))
                                                          : alloc_link_score(0, ALLOC_PCIE_SYSTEM));
        size_t out[24];
        int k = alloc_best_set(big, all, 24, (size_t[]){ 13 }, 1, 2, out);
        assert_set(out, k, (size_t[]){ 13, 14 }, 2);
        k = alloc_best_set(big, all, 24, NULL, 0, 4, out);
        assert_int_equal(k, 4);
        assert_int_equal(alloc_set_score(big, out, 4), alloc_set_score(big, all, 4)); /* 9 links */
}

/* ---- bad inputs ---- */

static void test_bad_inputs(void **state)
{
        _cleanup_topology_ struct alloc_topology *t = dgx1_topology();
        size_t out[8];
        memset(out, 0xff, sizeof(out));
        /* must not in available, out of range, more must than size */
        assert_int_equal(alloc_best_set(t, (size_t[]){ 0, 1 }, 2, (size_t[]){ 2 }, 1, 2, out), -EINVAL);
        assert_int_equal(alloc_best_set(t, all8, 8, (size_t[]){ 8 }, 1, 2, out), -EINVAL);
        assert_int_equal(alloc_best_set(t, (size_t[]){ 0, 9 }, 2, NULL, 0, 1, out), -EINVAL);
        assert_int_equal(alloc_best_set(t, all8, 8, (size_t[]){ 1, 2 }, 2, 1, out), -EINVAL);
        assert_int_equal(alloc_best_set(NULL, all8, 8, NULL, 0, 1, out), -EINVAL);
        assert_int_equal(alloc_best_set(t, NULL, 3, NULL, 0, 1, out), -EINVAL);
        assert_int_equal(alloc_best_set(t, all8, 8, NULL, 0, 1, NULL), -EINVAL);
        for (size_t i = 0; i < 8; i++)
                assert_int_equal(out[i], SIZE_MAX);
        /* size 0 */
        assert_int_equal(alloc_best_set(t, all8, 8, NULL, 0, 0, out), 0);
        assert_int_equal(alloc_best_set(t, all8, 8, NULL, 0, 0, NULL), 0);
        /* size > n: all of them */
        size_t big[16];
        int n = alloc_best_set(t, all8, 8, NULL, 0, 16, big);
        assert_set(big, n, all8, 8);
        /* duplicates in available and must count once */
        const size_t dup[] = { 5, 5, 6, 5, 6 };
        n = alloc_best_set(t, dup, 5, (size_t[]){ 6, 6 }, 2, 8, out);
        assert_set(out, n, (size_t[]){ 5, 6 }, 2);
        n = alloc_best_set(t, dup, 5, (size_t[]){ 6, 6 }, 2, 1, out);
        assert_set(out, n, (size_t[]){ 6 }, 1);
        /* must equal to size: exactly the must set */
        n = alloc_best_set(t, all8, 8, (size_t[]){ 7, 0 }, 2, 2, out);
        assert_set(out, n, (size_t[]){ 0, 7 }, 2);
}

/* ---- replicas ---- */

/* gpus x reps replicas; free[g] of GPU g's replicas still available (the
 * highest-numbered ones are the ones taken). */
static size_t make_replicas(struct alloc_replica *r, size_t gpus, const unsigned *free_per_gpu)
{
        size_t n = 0;
        for (size_t g = 0; g < gpus; g++)
                for (unsigned k = 0; k < free_per_gpu[g]; k++)
                        r[n++] = (struct alloc_replica){ g, k };
        return n;
}

static void test_replicas_distributed(void **state)
{
        struct alloc_replica r[64];
        size_t out[64];
        size_t n = make_replicas(r, 4, (unsigned[]){ 4, 4, 4, 4 });
        /* a pod asking for 2 gets 2 different GPUs; 4 -> all four */
        int k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 2, out);
        assert_int_equal(k, 2);
        assert_int_equal(r[out[0]].gpu, 0);
        assert_int_equal(r[out[1]].gpu, 1);
        k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 4, out);
        assert_int_equal(k, 4);
        for (int i = 0; i < 4; i++) {
                assert_int_equal(r[out[i]].gpu, (size_t)i);
                assert_int_equal(r[out[i]].replica, 0);
        }
        /* more than GPUs: a second round, still one more per GPU at a time */
        k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 6, out);
        assert_int_equal(k, 6);
        assert_int_equal(r[out[4]].gpu, 0);
        assert_int_equal(r[out[4]].replica, 1);
        assert_int_equal(r[out[5]].gpu, 1);

        /* loaded node: free 1, 4, 2, 3 -> the least loaded GPUs first */
        n = make_replicas(r, 4, (unsigned[]){ 1, 4, 2, 3 });
        k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 2, out);
        assert_int_equal(k, 2);
        assert_int_equal(r[out[0]].gpu, 1);
        assert_int_equal(r[out[1]].gpu, 3);
        k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 4, out);
        assert_int_equal(k, 4);
        assert_int_equal(r[out[2]].gpu, 2);
        assert_int_equal(r[out[3]].gpu, 0);
        /* one idle GPU does not get both slices (NVIDIA's plain load order would) */
        n = make_replicas(r, 2, (unsigned[]){ 10, 2 });
        k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 2, out);
        assert_int_equal(k, 2);
        assert_int_not_equal(r[out[0]].gpu, r[out[1]].gpu);
        /* only one GPU left: replicas of it */
        n = make_replicas(r, 1, (unsigned[]){ 3 });
        k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 2, out);
        assert_int_equal(k, 2);
        assert_int_equal(r[out[0]].replica, 0);
        assert_int_equal(r[out[1]].replica, 1);
}

static void test_replicas_packed(void **state)
{
        struct alloc_replica r[64];
        size_t out[64];
        size_t n = make_replicas(r, 4, (unsigned[]){ 4, 4, 4, 4 });
        int k = alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, NULL, 0, 3, out);
        assert_int_equal(k, 3);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(r[out[i]].gpu, 0);
                assert_int_equal(r[out[i]].replica, (unsigned)i);
        }
        /* fill GPU 0 then go on with the next */
        k = alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, NULL, 0, 6, out);
        assert_int_equal(k, 6);
        assert_int_equal(r[out[4]].gpu, 1);
        assert_int_equal(r[out[5]].gpu, 1);
        /* most loaded first: free 3, 4, 1, 2 -> GPU 2, then GPU 3 */
        n = make_replicas(r, 4, (unsigned[]){ 3, 4, 1, 2 });
        k = alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, NULL, 0, 3, out);
        assert_int_equal(k, 3);
        assert_int_equal(r[out[0]].gpu, 2);
        assert_int_equal(r[out[1]].gpu, 3);
        assert_int_equal(r[out[2]].gpu, 3);
        /* GPU 1 stays whole */
        k = alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, NULL, 0, 6, out);
        for (int i = 0; i < k; i++)
                assert_int_not_equal(r[out[i]].gpu, 1);
}

static void test_replicas_must(void **state)
{
        struct alloc_replica r[64];
        size_t out[64];
        size_t n = make_replicas(r, 4, (unsigned[]){ 4, 4, 4, 4 });
        size_t must = 9; /* GPU 2, replica 1 */
        assert_int_equal(r[must].gpu, 2);
        int k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, &must, 1, 3, out);
        assert_int_equal(k, 3);
        assert_int_equal(out[0], must);
        assert_int_equal(r[out[1]].gpu, 0); /* GPU 2 is taken by the request already */
        assert_int_equal(r[out[2]].gpu, 1);
        /* packed: the must GPU is the most loaded now, fill it */
        k = alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, &must, 1, 3, out);
        assert_int_equal(k, 3);
        assert_int_equal(out[0], must);
        assert_int_equal(r[out[1]].gpu, 2);
        assert_int_equal(r[out[1]].replica, 0);
        assert_int_equal(r[out[2]].gpu, 2);
        assert_int_equal(r[out[2]].replica, 2);
        /* must only */
        k = alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, (size_t[]){ 3, 3, 15 }, 3, 2, out);
        assert_int_equal(k, 2);
        assert_int_equal(out[0], 3);
        assert_int_equal(out[1], 15);
}

static void test_replicas_deterministic(void **state)
{
        rng_state = 42;
        struct alloc_replica r[40], shuffled[40];
        size_t out[40], out2[40], n = make_replicas(r, 8, (unsigned[]){ 5, 3, 5, 1, 4, 5, 2, 5 });
        for (int policy = 0; policy < 2; policy++) {
                for (size_t size = 1; size <= n; size++) {
                        int k = alloc_replicas_choose((enum alloc_replica_policy)policy, r, n, NULL, 0, size, out);
                        assert_int_equal(k, (int)size);
                        memcpy(shuffled, r, n * sizeof(*r));
                        for (size_t i = n; i > 1; i--) {
                                size_t j = rnd(i);
                                struct alloc_replica x = shuffled[i - 1];
                                shuffled[i - 1] = shuffled[j];
                                shuffled[j] = x;
                        }
                        int k2 = alloc_replicas_choose((enum alloc_replica_policy)policy, shuffled, n, NULL, 0,
                                                       size, out2);
                        assert_int_equal(k2, k);
                        for (int i = 0; i < k; i++) {
                                assert_int_equal(r[out[i]].gpu, shuffled[out2[i]].gpu);
                                assert_int_equal(r[out[i]].replica, shuffled[out2[i]].replica);
                        }
                }
        }
}

static void test_replicas_bad_inputs(void **state)
{
        struct alloc_replica r[16];
        size_t out[16];
        size_t n = make_replicas(r, 2, (unsigned[]){ 2, 2 });
        memset(out, 0xff, sizeof(out));
        assert_int_equal(alloc_replicas_choose((enum alloc_replica_policy)7, r, n, NULL, 0, 1, out), -EINVAL);
        assert_int_equal(alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, (size_t[]){ 4 }, 1, 1, out), -EINVAL);
        assert_int_equal(alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, (size_t[]){ 0, 1 }, 2, 1, out),
                         -EINVAL);
        assert_int_equal(alloc_replicas_choose(ALLOC_REPLICAS_PACKED, NULL, 3, NULL, 0, 1, out), -EINVAL);
        assert_int_equal(alloc_replicas_choose(ALLOC_REPLICAS_PACKED, r, n, NULL, 0, 1, NULL), -EINVAL);
        assert_int_equal(out[0], SIZE_MAX);
        /* size 0, nothing available, more asked than there is */
        assert_int_equal(alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 0, out), 0);
        assert_int_equal(alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, NULL, 0, NULL, 0, 2, out), 0);
        assert_int_equal(alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, r, n, NULL, 0, 9, out), 4);
        /* duplicates count once */
        struct alloc_replica dup[] = { { 1, 0 }, { 1, 0 }, { 0, 3 }, { 1, 0 } };
        int k = alloc_replicas_choose(ALLOC_REPLICAS_DISTRIBUTED, dup, 4, (size_t[]){ 3 }, 1, 4, out);
        assert_int_equal(k, 2);
        assert_int_equal(out[0], 3);
        assert_int_equal(out[1], 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_link_score),
                cmocka_unit_test(test_topology_object),
                cmocka_unit_test(test_dgx1),
                cmocka_unit_test(test_dgx1_lost_gpus),
                cmocka_unit_test(test_nvswitch),
                cmocka_unit_test(test_random_vs_brute),
                cmocka_unit_test(test_16_gpus),
                cmocka_unit_test(test_large_local_optimum),
                cmocka_unit_test(test_bad_inputs),
                cmocka_unit_test(test_replicas_distributed),
                cmocka_unit_test(test_replicas_packed),
                cmocka_unit_test(test_replicas_must),
                cmocka_unit_test(test_replicas_deterministic),
                cmocka_unit_test(test_replicas_bad_inputs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
