/* Allocate and GetPreferredAllocation for AMD resources.
 *
 * Allocate gives what AMD's plugin gives, /dev/kfd plus each device's
 * /dev/dri/card<N> and renderD<N>, rw (replicas of one unit once).  With a
 * CDI device-list strategy the container gets CDI names instead
 * ("<resource>=<id>", the kinds `devlet cdi generate` writes): cdi-cri in
 * the response's CDI devices, cdi-annotations as one annotation; the device
 * nodes come too only with --pass-device-specs.
 *
 * Preferred allocation (pure; the topology was read at start-up):
 *   - replicas: alloc_replicas_choose() over the units (distributed/packed);
 *   - whole GPUs: alloc_best_set(), the exact best XGMI set (as NVLink);
 *   - partitions: keep a request on as few GPUs as it can: first the GPUs
 *     the must IDs are on, then the GPU that fits what is left with the
 *     fewest free partitions (AMD's anti-fragmentation rule), else the GPU
 *     with the most free; ties go to the best link to the GPUs already
 *     chosen, then the lowest index.
 * Unknown and unhealthy available IDs are never chosen.  Never logs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

static const struct amd_ctx *ctx_of(const struct dev_resource *r)
{
        return ((const struct amd_res *)r->backend_data)->ctx;
}

static char *cdi_name(const struct dev_resource *r, const char *id)
{
        return xasprintf("%s=%s", r->name, id);
}

static int amd_allocate(struct dev_resource *r, char *const *ids, size_t n, struct dev_alloc *out,
                        struct diag *diag)
{
        const struct amd_ctx *c = ctx_of(r);
        bool replicas = false;
        for (size_t i = 0; i < n; i++) {
                const struct dev_device *d = dev_resource_find(r, ids[i]);
                if (!d)
                        return diag_set(diag, -EINVAL, "invalid request: unknown device: %s",
                                        ids[i]);
                if (d->health != DEV_HEALTHY)
                        return diag_set(diag, -EINVAL, "invalid request: device %s is unhealthy",
                                        ids[i]);
                replicas |= ((const struct amd_dev *)d->priv)->replica >= 0;
        }
        if (replicas && n > 1 && c->fail_requests_greater_than_one)
                return diag_set(diag, -EINVAL,
                                "invalid request: maximum request size for shared resources is "
                                "1; found %zu", n);
        struct dev_alloc a = { 0 };
        bool cdi = c->cdi_cri || c->cdi_annotations;
        _cleanup_free_ char *joined = NULL;
        for (size_t i = 0; i < n && cdi; i++) {
                _cleanup_free_ char *name = cdi_name(r, ids[i]);
                if (c->cdi_cri)
                        dev_alloc_add_cdi(&a, name);
                char *j = joined ? xasprintf("%s,%s", joined, name) : xstrdup(name);
                free(joined);
                joined = j;
        }
        if (c->cdi_annotations && joined) {
                _cleanup_free_ char *key = xasprintf("%sdevlet-amd", c->cdi_annotation_prefix);
                dev_alloc_set_annotation(&a, key, joined);
        }
        if (!cdi || c->pass_device_specs)
                for (size_t i = 0; i < n; i++) {
                        const struct dev_device *d = dev_resource_find(r, ids[i]);
                        for (size_t k = 0; k < d->n_nodes; k++)
                                dev_alloc_add_node(&a, d->nodes[k].host_path,
                                                   d->nodes[k].container_path,
                                                   d->nodes[k].permissions);
                }
        dev_alloc_release(out);
        *out = a;
        return 0;
}

/* ---- GetPreferredAllocation ---- */

struct cand {
        const char *id;
        const struct amd_dev *d;
};

struct pick {
        const struct amd_ctx *c;
        struct cand *cands; /* must IDs first */
        size_t n, n_must;
};

static bool listed(const struct pick *p, const char *id)
{
        for (size_t i = 0; i < p->n; i++)
                if (strcmp(p->cands[i].id, id) == 0)
                        return true;
        return false;
}

static int collect(struct dev_resource *r, struct pick *p, char *const *available, size_t n_available,
                   char *const *must, size_t n_must)
{
        for (size_t i = 0; i < n_must; i++) {
                const struct dev_device *d = dev_resource_find(r, must[i]);
                if (!d)
                        return -EINVAL;
                if (!listed(p, must[i]))
                        p->cands[p->n++] = (struct cand){ must[i], d->priv };
        }
        p->n_must = p->n;
        for (size_t i = 0; i < n_available; i++) {
                const struct dev_device *d = dev_resource_find(r, available[i]);
                if (d && d->health == DEV_HEALTHY && !listed(p, available[i]))
                        p->cands[p->n++] = (struct cand){ available[i], d->priv };
        }
        return 0;
}

static char **answer(const struct pick *p, const size_t *idx, size_t n)
{
        char **ids = xcalloc(1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                ids = strv_push(ids, p->cands[idx[i]].id);
        return ids;
}

static int pick_replicas(struct pick *p, size_t size, char ***out)
{
        _cleanup_free_ struct alloc_replica *av = xcalloc(p->n + 1, sizeof(*av));
        _cleanup_free_ size_t *must = xcalloc(p->n_must + 1, sizeof(size_t));
        _cleanup_free_ size_t *chosen = xcalloc(size + p->n_must + 1, sizeof(size_t));
        for (size_t i = 0; i < p->n; i++)
                av[i] = (struct alloc_replica){ .gpu = p->cands[i].d->unit,
                                                .replica = (unsigned)(p->cands[i].d->replica < 0
                                                                          ? 0
                                                                          : p->cands[i].d->replica) };
        for (size_t i = 0; i < p->n_must; i++)
                must[i] = i;
        int n = alloc_replicas_choose(p->c->replica_policy, av, p->n, must, p->n_must, size, chosen);
        if (n < 0)
                return n;
        *out = answer(p, chosen, (size_t)n);
        return 0;
}

static int pick_gpus(struct pick *p, size_t size, char ***out)
{
        size_t n_gpus = p->c->inv->n_gpus;
        _cleanup_free_ size_t *av = xcalloc(p->n + 1, sizeof(size_t));
        _cleanup_free_ size_t *must = xcalloc(p->n_must + 1, sizeof(size_t));
        _cleanup_free_ size_t *chosen = xcalloc(size + p->n_must + 1, sizeof(size_t));
        _cleanup_free_ size_t *back = xcalloc(n_gpus + 1, sizeof(size_t));
        for (size_t i = 0; i < p->n; i++) {
                av[i] = p->cands[i].d->gpu;
                back[av[i]] = i;
        }
        for (size_t i = 0; i < p->n_must; i++)
                must[i] = av[i];
        int n = alloc_best_set(p->c->topo, av, p->n, must, p->n_must, size, chosen);
        if (n < 0)
                return n;
        for (int i = 0; i < n; i++)
                chosen[i] = back[chosen[i]];
        *out = answer(p, chosen, (size_t)n);
        return 0;
}

static int64_t link_to_chosen(const struct pick *p, size_t g, const size_t *taken)
{
        const struct alloc_topology *t = p->c->topo;
        int64_t s = 0;
        for (size_t j = 0; t && j < t->n; j++)
                if (taken[j] && j != g)
                        s += t->score[g * t->n + j];
        return s;
}

/* Partitions: whole GPUs' worth kept together (see the top). */
static int pick_partitions(struct pick *p, size_t size, char ***out)
{
        size_t n_gpus = p->c->inv->n_gpus;
        _cleanup_free_ size_t *free_n = xcalloc(n_gpus + 1, sizeof(size_t));
        _cleanup_free_ size_t *taken = xcalloc(n_gpus + 1, sizeof(size_t));
        _cleanup_free_ bool *used = xcalloc(p->n + 1, sizeof(bool));
        _cleanup_free_ size_t *chosen = xcalloc(p->n + 1, sizeof(size_t));
        size_t n_chosen = 0;
        for (size_t i = 0; i < p->n_must; i++) {
                used[i] = true;
                chosen[n_chosen++] = i;
                taken[p->cands[i].d->gpu]++;
        }
        for (size_t i = p->n_must; i < p->n; i++)
                free_n[p->cands[i].d->gpu]++;
        while (n_chosen < size) {
                size_t need = size - n_chosen;
                ssize_t best = -1;
                int best_class = 0; /* 3: a GPU already used, 2: fits, 1: largest */
                int64_t best_link = 0;
                for (size_t g = 0; g < n_gpus; g++) {
                        if (!free_n[g])
                                continue;
                        int cls = taken[g] ? 3 : free_n[g] >= need ? 2 : 1;
                        int64_t link = link_to_chosen(p, g, taken);
                        bool better;
                        if (best < 0 || cls != best_class)
                                better = best < 0 || cls > best_class;
                        else if (free_n[g] != free_n[best])
                                better = cls == 1 ? free_n[g] > free_n[best] : free_n[g] < free_n[best];
                        else
                                better = link > best_link;
                        if (better) {
                                best = (ssize_t)g;
                                best_class = cls;
                                best_link = link;
                        }
                }
                if (best < 0)
                        break;
                /* this GPU's free partitions, lowest partition first */
                for (size_t want = need < free_n[best] ? need : free_n[best]; want > 0; want--) {
                        ssize_t low = -1;
                        for (size_t i = p->n_must; i < p->n; i++)
                                if (!used[i] && p->cands[i].d->gpu == (size_t)best &&
                                    (low < 0 || p->cands[i].d->part < p->cands[low].d->part))
                                        low = (ssize_t)i;
                        used[low] = true;
                        chosen[n_chosen++] = (size_t)low;
                        free_n[best]--;
                        taken[best]++;
                }
        }
        *out = answer(p, chosen, n_chosen);
        return 0;
}

static int amd_preferred(struct dev_resource *r, char *const *available, size_t n_available,
                         char *const *must, size_t n_must, size_t size, char ***out)
{
        const struct amd_res *ar = r->backend_data;
        size_t cap = n_available + n_must + 1;
        _cleanup_free_ struct cand *cands = xcalloc(cap, sizeof(*cands));
        struct pick p = { .c = ar->ctx, .cands = cands };
        int rc = collect(r, &p, available, n_available, must, n_must);
        if (rc < 0)
                return rc;
        if (size < p.n_must) {
                /* the kubelet's own constraint is broken: answer its must IDs */
                _cleanup_free_ size_t *idx = xcalloc(p.n_must + 1, sizeof(size_t));
                for (size_t i = 0; i < p.n_must; i++)
                        idx[i] = i;
                *out = answer(&p, idx, p.n_must);
                return 0;
        }
        if (ar->has_replicas)
                return pick_replicas(&p, size, out);
        if (ar->partitions)
                return pick_partitions(&p, size, out);
        if (!p.c->topo)
                return dev_preferred_generic(r, available, n_available, must, n_must, size, out);
        return pick_gpus(&p, size, out);
}

const struct dev_resource_ops amd_resource_ops = {
        .allocate = amd_allocate,
        .preferred = amd_preferred,
};
