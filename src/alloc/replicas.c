/* Replica policies for time-sliced GPUs: which replica IDs a request gets.
 *
 * Owns alloc_replicas_choose().  The available replicas are sorted by (GPU,
 * replica number, position) and grouped per GPU; must-include replicas are
 * answered first and counted as taken; then each further replica comes from
 * the GPU the policy ranks first, re-ranked after every pick:
 *   distributed  fewest taken by this request, then most still available,
 *                then lowest GPU number.  NVIDIA's device plugin
 *                (--shared-devices-allocation-policy=distributed) ranks by
 *                load first and only breaks ties towards GPUs the request does
 *                not use yet, so a pod asking for 2 can get two slices of one
 *                idle GPU; devlet gives it two GPUs while it can.
 *   packed       fewest still available (the most loaded GPU), then lowest
 *                GPU number, as NVIDIA's "packed": fill busy GPUs, keep whole
 *                ones free.
 *
 * Pure: no logging, no global state; sizes are bounded by the caller. */
#include "alloc/alloc.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

struct entry {
        size_t gpu;
        unsigned replica;
        size_t pos; /* index in available */
};

struct group {
        size_t gpu;
        size_t next, end; /* its replicas still to hand out: pool[next..end) */
        size_t taken;     /* its replicas in the answer */
};

static int cmp_entry(const void *a, const void *b)
{
        const struct entry *x = a, *y = b;
        if (x->gpu != y->gpu)
                return x->gpu < y->gpu ? -1 : 1;
        if (x->replica != y->replica)
                return x->replica < y->replica ? -1 : 1;
        return (x->pos > y->pos) - (x->pos < y->pos);
}

/* True when group a should give the next replica rather than group b. */
static bool ranks_before(enum alloc_replica_policy policy, const struct group *a,
                         const struct group *b)
{
        size_t free_a = a->end - a->next, free_b = b->end - b->next;
        if (policy == ALLOC_REPLICAS_DISTRIBUTED) {
                if (a->taken != b->taken)
                        return a->taken < b->taken;
                if (free_a != free_b)
                        return free_a > free_b;
        } else if (free_a != free_b) {
                return free_a < free_b;
        }
        return a->gpu < b->gpu;
}

int alloc_replicas_choose(enum alloc_replica_policy policy, const struct alloc_replica *available,
                          size_t n_available, const size_t *must, size_t n_must, size_t size,
                          size_t *out)
{
        if (policy != ALLOC_REPLICAS_DISTRIBUTED && policy != ALLOC_REPLICAS_PACKED)
                return -EINVAL;
        if ((n_available && !available) || (n_must && !must) || n_available > INT_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n_must; i++)
                if (must[i] >= n_available)
                        return -EINVAL;

        _cleanup_free_ struct entry *e = xmalloc(n_available * sizeof(*e));
        for (size_t i = 0; i < n_available; i++)
                e[i] = (struct entry){ available[i].gpu, available[i].replica, i };
        qsort(e, n_available, sizeof(*e), cmp_entry);

        /* canon[pos]: the first position holding the same (gpu, replica) */
        _cleanup_free_ size_t *canon = xmalloc(n_available * sizeof(*canon));
        size_t n_distinct = 0;
        for (size_t i = 0; i < n_available; i++) {
                bool dup = i > 0 && e[i].gpu == e[i - 1].gpu && e[i].replica == e[i - 1].replica;
                canon[e[i].pos] = dup ? canon[e[i - 1].pos] : e[i].pos;
                n_distinct += !dup;
        }

        _cleanup_free_ bool *is_must = xcalloc(n_available, sizeof(*is_must));
        _cleanup_free_ size_t *musts = xmalloc(n_must * sizeof(*musts));
        size_t n_must_distinct = 0;
        for (size_t i = 0; i < n_must; i++)
                if (!is_must[canon[must[i]]]) {
                        is_must[canon[must[i]]] = true;
                        musts[n_must_distinct++] = must[i];
                }
        if (size < n_must_distinct)
                return -EINVAL;
        size_t target = size < n_distinct ? size : n_distinct;
        if (target && !out)
                return -EINVAL;

        /* groups per GPU, in GPU order; pool holds their free replicas */
        _cleanup_free_ struct group *g = xmalloc(n_available * sizeof(*g));
        _cleanup_free_ size_t *pool = xmalloc(n_available * sizeof(*pool));
        size_t n_groups = 0, n_pool = 0;
        for (size_t i = 0; i < n_available; i++) {
                if (canon[e[i].pos] != e[i].pos)
                        continue;
                if (n_groups == 0 || g[n_groups - 1].gpu != e[i].gpu)
                        g[n_groups++] = (struct group){ .gpu = e[i].gpu, .next = n_pool, .end = n_pool };
                struct group *cur = &g[n_groups - 1];
                if (is_must[e[i].pos]) {
                        cur->taken++;
                } else {
                        pool[n_pool++] = e[i].pos;
                        cur->end = n_pool;
                }
        }

        size_t k = 0;
        for (; k < n_must_distinct; k++)
                out[k] = musts[k];
        for (; k < target; k++) {
                struct group *best = NULL;
                for (size_t i = 0; i < n_groups; i++)
                        if (g[i].next < g[i].end && (!best || ranks_before(policy, &g[i], best)))
                                best = &g[i];
                if (!best) /* cannot happen: target <= distinct replicas */
                        break;
                out[k] = pool[best->next++];
                best->taken++;
        }
        return (int)k;
}
