/* GPU topology scores and the best set of whole GPUs for one request.
 *
 * Owns alloc_link_score(), the alloc_topology matrix and alloc_best_set().
 *
 * alloc_best_set() works on "candidates": the distinct available GPUs that
 * are not must-include, in the order of `available`.  The must GPUs are fixed,
 * so each candidate starts with a base gain (its scores to them) and the task
 * is to pick r more that maximize the score of the whole set.
 *
 * With at most ALLOC_EXACT_MAX candidates the answer is exact: a depth-first
 * branch and bound over include/exclude decisions taken in candidate order,
 * include first, visits the combinations in lexicographic order.  A subtree
 * is cut when its upper bound cannot reach the greedy's score (a reachable
 * one, used as a seed until the search finds a set) or cannot beat the best
 * set found; cutting on "cannot beat" keeps the first optimal set found,
 * which is the lexicographically smallest.  The bound is admissible: picking
 * `need` more from positions >= q adds, for each new GPU v, its gain (scores
 * to the GPUs already in) plus half its scores to the other new GPUs, which
 * is at most half the sum of v's need-1 best scores to positions >= q; the
 * need largest such values bound the completion.  Beyond ALLOC_EXACT_MAX: a
 * greedy from every start, then a swap local search.
 *
 * Pure and re-entrant: no logging, no global state, no driver calls; the
 * only allocations are xalloc scratch freed before returning. */
#include "alloc/alloc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

int alloc_link_score(unsigned nvlinks, enum alloc_pcie_level level)
{
        static const int pcie_points[] = {
                [ALLOC_PCIE_SAME_BOARD] = 60,    [ALLOC_PCIE_SINGLE_SWITCH] = 50,
                [ALLOC_PCIE_MULTIPLE_SWITCHES] = 40, [ALLOC_PCIE_HOST_BRIDGE] = 30,
                [ALLOC_PCIE_NUMA_NODE] = 20,     [ALLOC_PCIE_SYSTEM] = 10,
                [ALLOC_PCIE_UNKNOWN] = 0,
        };
        int pcie = (unsigned)level < ARRAY_SIZE(pcie_points) ? pcie_points[level] : 0;
        if (nvlinks > ALLOC_NVLINK_MAX)
                nvlinks = ALLOC_NVLINK_MAX;
        return (int)nvlinks * ALLOC_NVLINK_WEIGHT + pcie;
}

struct alloc_topology *alloc_topology_new(size_t n)
{
        if (n == 0 || n > ALLOC_MAX_GPUS)
                return NULL;
        struct alloc_topology *t = xmalloc(sizeof(*t));
        t->n = n;
        t->score = xcalloc(n * n, sizeof(*t->score));
        return t;
}

void alloc_topology_set(struct alloc_topology *t, size_t i, size_t j, int score)
{
        if (!t || i >= t->n || j >= t->n)
                return;
        t->score[i * t->n + j] = score;
        t->score[j * t->n + i] = score;
}

int64_t alloc_set_score(const struct alloc_topology *t, const size_t *set, size_t n)
{
        int64_t sum = 0;
        if (!t)
                return 0;
        for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++)
                        if (set[a] < t->n && set[b] < t->n && set[a] != set[b])
                                sum += t->score[set[a] * t->n + set[b]];
        return sum;
}

void alloc_topology_free(struct alloc_topology *t)
{
        if (!t)
                return;
        free(t->score);
        free(t);
}

/* The request seen from the candidates. */
struct cands {
        size_t m;       /* number of candidates */
        size_t r;       /* how many of them to choose, 0 < r < m */
        int64_t *w;     /* m*m scores between candidates, zero diagonal */
        int64_t *base;  /* m: each candidate's score to the must GPUs */
        int64_t must_score;
};

/* ---- greedy and local search ---- */

/* Greedy: starting from the must GPUs (and `start` when < m), repeatedly adds
 * the candidate with the highest gain (lowest position on ties).  Fills in[]
 * and returns the score of the whole set.  g is scratch of m. */
static int64_t greedy_from(const struct cands *c, size_t start, bool *in, int64_t *g)
{
        size_t m = c->m;
        int64_t score = c->must_score;
        memcpy(g, c->base, m * sizeof(*g));
        memset(in, 0, m * sizeof(*in));
        for (size_t k = 0; k < c->r; k++) {
                size_t pick = m;
                if (k == 0 && start < m) {
                        pick = start;
                } else {
                        for (size_t v = 0; v < m; v++)
                                if (!in[v] && (pick == m || g[v] > g[pick]))
                                        pick = v;
                }
                in[pick] = true;
                score += g[pick];
                for (size_t v = 0; v < m; v++)
                        g[v] += c->w[pick * m + v];
        }
        return score;
}

/* Best of the greedy runs from every start (and from the must GPUs alone
 * when there are some).  Fills best_in; returns its score. */
static int64_t greedy_best(const struct cands *c, bool *best_in)
{
        size_t m = c->m;
        _cleanup_free_ bool *in = xmalloc(m * sizeof(*in));
        _cleanup_free_ int64_t *g = xmalloc(m * sizeof(*g));
        bool have = false;
        int64_t best = 0;
        /* start == m: no forced start, the must GPUs lead */
        for (size_t start = 0; start <= m; start++) {
                int64_t s = greedy_from(c, start, in, g);
                if (!have || s > best) {
                        best = s;
                        have = true;
                        memcpy(best_in, in, m * sizeof(*in));
                }
        }
        return best;
}

/* Swaps a chosen and an unchosen candidate while some swap improves the
 * score, best swap first (first found on ties).  Returns the new score. */
static int64_t local_search(const struct cands *c, bool *in, int64_t score)
{
        size_t m = c->m;
        _cleanup_free_ int64_t *g = xmalloc(m * sizeof(*g));
        /* g[x]: x's score to every GPU in the set (must and chosen) but itself */
        memcpy(g, c->base, m * sizeof(*g));
        for (size_t u = 0; u < m; u++)
                if (in[u])
                        for (size_t x = 0; x < m; x++)
                                g[x] += c->w[u * m + x];
        for (;;) {
                int64_t best_delta = 0;
                size_t bu = m, bv = m;
                for (size_t u = 0; u < m; u++) {
                        if (!in[u])
                                continue;
                        for (size_t v = 0; v < m; v++) {
                                if (in[v])
                                        continue;
                                int64_t delta = g[v] - g[u] - c->w[u * m + v];
                                if (delta > best_delta) {
                                        best_delta = delta;
                                        bu = u;
                                        bv = v;
                                }
                        }
                }
                if (bu == m)
                        return score;
                in[bu] = false;
                in[bv] = true;
                score += best_delta;
                for (size_t x = 0; x < m; x++)
                        g[x] += c->w[bv * m + x] - c->w[bu * m + x];
        }
}

/* ---- exact: branch and bound ---- */

struct search {
        const struct cands *c;
        /* tops[(q * m + v) * r + j]: sum of v's j best scores to candidates
         * at positions >= q other than v (j < r) */
        int64_t *tops;
        int64_t *gain; /* m: score of each candidate to the GPUs in the set */
        bool *in, *best_in;
        int64_t *sel;  /* r: scratch for the bound */
        int64_t cur;   /* score of the set so far (must included) */
        int64_t best;  /* score of best_in, once found */
        int64_t seed;  /* a score known to be reachable (the greedy's) */
        bool found;
};

static void build_tops(const struct cands *c, int64_t *tops)
{
        size_t m = c->m, r = c->r;
        int64_t sorted[ALLOC_EXACT_MAX];
        for (size_t v = 0; v < m; v++) {
                size_t n = 0;
                /* walk q downwards, inserting v's score to q into a descending list */
                for (size_t q = m; q-- > 0;) {
                        if (q != v) {
                                int64_t x = c->w[v * m + q];
                                size_t k = n++;
                                while (k > 0 && sorted[k - 1] < x) {
                                        sorted[k] = sorted[k - 1];
                                        k--;
                                }
                                sorted[k] = x;
                        }
                        int64_t *row = &tops[(q * m + v) * r];
                        int64_t sum = 0;
                        for (size_t j = 0; j < r; j++) {
                                row[j] = sum; /* fewer than j scores: the rest cannot be chosen anyway */
                                if (j < n)
                                        sum += sorted[j];
                        }
                }
        }
}

/* Twice an upper bound on the score of any completion of the current set
 * that picks `need` more candidates among positions >= q. */
static int64_t bound2(struct search *s, size_t q, size_t need)
{
        const struct cands *c = s->c;
        size_t m = c->m, n = 0;
        for (size_t v = q; v < m; v++) {
                int64_t x = 2 * s->gain[v] + s->tops[(q * m + v) * c->r + need - 1];
                if (n < need) {
                        n++;
                } else if (x <= s->sel[need - 1]) {
                        continue;
                }
                size_t k = n - 1;
                while (k > 0 && s->sel[k - 1] < x) {
                        s->sel[k] = s->sel[k - 1];
                        k--;
                }
                s->sel[k] = x;
        }
        int64_t sum = 2 * s->cur;
        for (size_t k = 0; k < n; k++)
                sum += s->sel[k];
        return sum;
}

static void dfs(struct search *s, size_t q, size_t need)
{
        const struct cands *c = s->c;
        size_t m = c->m;
        if (need == 0) {
                if (s->found ? s->cur > s->best : s->cur >= s->seed) {
                        s->found = true;
                        s->best = s->cur;
                        memcpy(s->best_in, s->in, m * sizeof(*s->in));
                }
                return;
        }
        if (m - q < need)
                return;
        int64_t goal = s->found ? s->best + 1 : s->seed;
        if (bound2(s, q, need) < 2 * goal)
                return;

        /* include q */
        s->in[q] = true;
        s->cur += s->gain[q];
        for (size_t v = q + 1; v < m; v++)
                s->gain[v] += c->w[q * m + v];
        dfs(s, q + 1, need - 1);
        for (size_t v = q + 1; v < m; v++)
                s->gain[v] -= c->w[q * m + v];
        s->cur -= s->gain[q];
        s->in[q] = false;

        /* exclude q */
        dfs(s, q + 1, need);
}

/* Fills best_in with the optimal choice (lexicographically smallest on ties). */
static void exact(const struct cands *c, bool *best_in)
{
        size_t m = c->m;
        struct search s = {
                .c = c,
                .tops = xmalloc(m * m * c->r * sizeof(*s.tops)),
                .gain = xmalloc(m * sizeof(*s.gain)),
                .in = xcalloc(m, sizeof(*s.in)),
                .best_in = best_in,
                .sel = xmalloc(c->r * sizeof(*s.sel)),
                .cur = c->must_score,
        };
        build_tops(c, s.tops);
        memcpy(s.gain, c->base, m * sizeof(*s.gain));
        s.seed = greedy_best(c, best_in);
        dfs(&s, 0, c->r);
        /* the greedy's set reaches the seed, so the search finds a set too */
        free(s.tops);
        free(s.gain);
        free(s.in);
        free(s.sel);
}

static int cmp_size(const void *a, const void *b)
{
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        return (x > y) - (x < y);
}

enum { SEEN_NOT = 0, SEEN_AVAILABLE = 1, SEEN_MUST = 2 };

int alloc_best_set(const struct alloc_topology *t, const size_t *available, size_t n_available,
                   const size_t *must, size_t n_must, size_t size, size_t *out)
{
        if (!t || (n_available && !available) || (n_must && !must))
                return -EINVAL;
        size_t n = t->n;
        _cleanup_free_ unsigned char *seen = xcalloc(n, 1);
        size_t n_distinct = 0, n_must_distinct = 0;
        for (size_t i = 0; i < n_available; i++) {
                if (available[i] >= n)
                        return -EINVAL;
                if (seen[available[i]] == SEEN_NOT) {
                        seen[available[i]] = SEEN_AVAILABLE;
                        n_distinct++;
                }
        }
        for (size_t i = 0; i < n_must; i++) {
                if (must[i] >= n || seen[must[i]] == SEEN_NOT)
                        return -EINVAL;
                if (seen[must[i]] == SEEN_AVAILABLE) {
                        seen[must[i]] = SEEN_MUST;
                        n_must_distinct++;
                }
        }
        if (size < n_must_distinct)
                return -EINVAL;
        size_t target = size < n_distinct ? size : n_distinct;
        if (target && !out)
                return -EINVAL;

        /* the must GPUs, then the candidates in the order of available */
        _cleanup_free_ size_t *gpu = xmalloc(n_distinct * sizeof(*gpu));
        size_t n_fixed = 0, m = 0;
        for (size_t i = 0; i < n_available; i++)
                if (seen[available[i]] == SEEN_MUST) {
                        gpu[n_fixed++] = available[i];
                        seen[available[i]] = SEEN_NOT; /* each once */
                }
        size_t *cand = gpu + n_fixed;
        for (size_t i = 0; i < n_available; i++)
                if (seen[available[i]] == SEEN_AVAILABLE) {
                        cand[m++] = available[i];
                        seen[available[i]] = SEEN_NOT;
                }

        size_t r = target - n_fixed, k = n_fixed;
        if (r == m) {
                k += m;
        } else if (r > 0) {
                struct cands c = { .m = m, .r = r };
                _cleanup_free_ int64_t *w = xmalloc(m * m * sizeof(*w));
                _cleanup_free_ int64_t *base = xcalloc(m, sizeof(*base));
                _cleanup_free_ bool *in = xmalloc(m * sizeof(*in));
                for (size_t a = 0; a < m; a++) {
                        for (size_t b = 0; b < m; b++)
                                w[a * m + b] = a == b ? 0 : t->score[cand[a] * n + cand[b]];
                        for (size_t f = 0; f < n_fixed; f++)
                                base[a] += t->score[cand[a] * n + gpu[f]];
                }
                c.w = w;
                c.base = base;
                c.must_score = alloc_set_score(t, gpu, n_fixed);
                if (m <= ALLOC_EXACT_MAX) {
                        exact(&c, in);
                } else {
                        int64_t score = greedy_best(&c, in);
                        local_search(&c, in, score);
                }
                for (size_t a = 0; a < m; a++)
                        if (in[a])
                                gpu[k++] = cand[a];
        }
        if (k) {
                qsort(gpu, k, sizeof(*gpu), cmp_size);
                memcpy(out, gpu, k * sizeof(*gpu));
        }
        return (int)k;
}
