/* The MIG geometry of a mock GPU.
 *
 * A MIG-capable GPU gets the profile table NVIDIA ships for its 7-slice
 * parts (A100, H100 and their successors): seven GPU instance profiles with
 * their fixed profile IDs (1g 19, 1g+me 20, 1g with two memory slices 15,
 * 2g 14, 3g 9, 4g 5, 7g 0), names built from the card's memory the way
 * nvidia-smi names them ("1g.10gb" on an 80 GB card, "1g.5gb" on a 40 GB
 * one), and per-architecture engine counts.  Values a MIG entry of the
 * configuration gives (memory, SMs, engines) override the table row of its
 * profile, so a profile written from a real card reports that card's
 * numbers.  Then each MIG entry is resolved to a row and given GPU- and
 * compute-instance placements that do not overlap.  Pure functions of one
 * struct mock_gpu; no global state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock.h"

struct row {
        unsigned index, id, slices, mem_slices, instances;
        bool media; /* "+me": the one slice that owns the media engines */
};

static const struct row rows[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 1, 7, false},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, 1, true},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 2, 4, false},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 2, 3, false},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 4, 2, false},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 4, 1, false},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 8, 1, false},
};

/* Engine counts of a row when the configuration gives none: A100 values from
 * its published MIG profiles, one decoder and JPEG engine per slice later. */
static void default_engines(const struct mock_gpu *g, const struct row *r,
                            struct mock_gi_profile *p)
{
        bool ampere = g->arch == NVML_DEVICE_ARCH_AMPERE;
        p->sms = r->slices * (ampere ? 14 : 16);
        p->ce = r->slices == 7 && !ampere ? 8 : r->slices;
        if (ampere) {
                static const unsigned dec[8] = {0, 0, 1, 2, 2, 0, 0, 5};
                p->dec = r->media || r->mem_slices == 2 ? 1 : dec[r->slices];
                p->jpeg = r->media || r->slices == 7 ? 1 : 0;
        } else {
                p->dec = r->media ? 1 : r->slices;
                p->jpeg = p->dec;
        }
        p->enc = 0;
        p->ofa = r->media || r->slices == 7 ? 1 : 0;
}

static void build_table(struct mock_gpu *g)
{
        /* nvidia-smi names profiles after the card's nominal size in GB. */
        unsigned long long card_gb = (g->memory_mib + 512) / 1024;
        memset(g->profiles, 0, sizeof(g->profiles));
        if (!g->mig_capable)
                return;
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                const struct row *r = &rows[i];
                struct mock_gi_profile *p = &g->profiles[r->index];
                p->supported = true;
                p->id = r->id;
                p->slices = r->slices;
                p->mem_slices = r->mem_slices;
                p->instances = r->instances;
                unsigned long long gb =
                    (card_gb * r->mem_slices + MOCK_MEM_SLICES - 1) / MOCK_MEM_SLICES;
                snprintf(p->name, sizeof(p->name), "%ug.%llugb%s", r->slices, gb,
                         r->media ? "+me" : "");
                /* The driver keeps a little of each slice; an approximation
                 * until a configured MIG device gives the real figure. */
                unsigned long long mib = g->memory_mib * r->mem_slices / MOCK_MEM_SLICES;
                p->memory_mib = (mib & ~255ULL) > 512 ? (mib & ~255ULL) - 512 : mib;
                default_engines(g, r, p);
        }
}

/* "1g.10gb", "1g.10gb+me" or "2c.3g.40gb": the GPU-instance part and the
 * compute-slice count. */
static bool split_profile(const char *s, char *gi_part, size_t len, unsigned *ci_slices)
{
        const char *dot = strchr(s, '.');
        *ci_slices = 0;
        if (dot && dot[-1] == 'c') {
                char *end;
                unsigned long c = strtoul(s, &end, 10);
                if (end != dot - 1 || c < 1 || c > 8)
                        return false;
                *ci_slices = (unsigned)c;
                s = dot + 1;
        }
        if (strlen(s) >= len)
                return false;
        strcpy(gi_part, s);
        return true;
}

bool mock_ci_slices_allowed(unsigned gi_slices, unsigned ci_slices)
{
        switch (ci_slices) {
        case 1:
        case 2:
                return ci_slices <= gi_slices;
        case 3:
                return gi_slices == 3 || gi_slices == 7;
        case 4:
                return gi_slices >= 4;
        case 7:
                return gi_slices == 7;
        default:
                return false;
        }
}

int mock_ci_profile_index(unsigned ci_slices)
{
        switch (ci_slices) {
        case 1:
                return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
        case 2:
                return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
        case 3:
                return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
        case 4:
                return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
        case 7:
                return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
        default:
                return -1;
        }
}

const struct mock_gi_profile *mock_profile_by_id(const struct mock_gpu *g, unsigned id,
                                                 unsigned *index)
{
        for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
                if (g->profiles[i].supported && g->profiles[i].id == id) {
                        if (index)
                                *index = i;
                        return &g->profiles[i];
                }
        return NULL;
}

static bool overlaps(unsigned a, unsigned an, unsigned b, unsigned bn)
{
        return a < b + bn && b < a + an;
}

/* The first MIG entry of the same GPU instance, if it comes before k. */
static const struct mock_mig *first_of_gi(const struct mock_gpu *g, size_t k)
{
        for (size_t j = 0; j < k; j++)
                if (g->mig[j].gi == g->mig[k].gi)
                        return &g->mig[j];
        return NULL;
}

static int place(struct mock_gpu *g, size_t k, char *err, size_t errlen, unsigned gpu_index)
{
        struct mock_mig *m = &g->mig[k];
        const struct mock_gi_profile *p = &g->profiles[m->gi_profile];
        const struct mock_mig *head = first_of_gi(g, k);
        if (head) {
                m->gi_start = head->gi_start;
        } else {
                /* GPU instances start on a multiple of their size, within
                 * the span their instance count covers (2g at 0, 2 or 4; 3g
                 * at 0 or 4); 1-slice ones may use slices 0-6. */
                unsigned limit = p->instances * p->mem_slices;
                if (p->mem_slices == 1)
                        limit = MOCK_MEM_SLICES - 1;
                bool ok = false;
                for (unsigned s = 0; s + p->mem_slices <= limit && !ok; s += p->mem_slices) {
                        if (m->gi_start != ~0U && m->gi_start != s)
                                continue;
                        ok = true;
                        for (size_t j = 0; j < k && ok; j++)
                                if (g->mig[j].gi != m->gi &&
                                    overlaps(s, p->mem_slices, g->mig[j].gi_start,
                                             g->profiles[g->mig[j].gi_profile].mem_slices))
                                        ok = false;
                        if (ok)
                                m->gi_start = s;
                }
                if (!ok) {
                        snprintf(err, errlen,
                                 "devices[%u].mig[%zu]: no room for a %s GPU instance%s", gpu_index,
                                 k, p->name, m->gi_start != ~0U ? " at that placement" : "");
                        return -1;
                }
        }
        unsigned used = 0;
        for (size_t j = 0; j < k; j++)
                if (g->mig[j].gi == m->gi)
                        used += g->mig[j].ci_slices;
        if (used + m->ci_slices > p->slices) {
                snprintf(err, errlen,
                         "devices[%u].mig[%zu]: GPU instance %u has no %u free compute slices",
                         gpu_index, k, m->gi, m->ci_slices);
                return -1;
        }
        m->ci_start = used;
        return 0;
}

int mock_profiles_build(struct mock_gpu *g, unsigned gpu_index, char *err, size_t errlen)
{
        build_table(g);
        /* Configured MIG devices carry the real numbers of their profile. */
        for (size_t k = 0; k < g->n_mig; k++) {
                struct mock_mig *m = &g->mig[k];
                char gi_part[32];
                unsigned c;
                int found = -1;
                if (split_profile(m->profile, gi_part, sizeof(gi_part), &c))
                        for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
                                if (g->profiles[i].supported &&
                                    !strcmp(g->profiles[i].name, gi_part))
                                        found = (int)i;
                if (found < 0) {
                        char names[256] = "";
                        for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
                                if (g->profiles[i].supported) {
                                        strncat(names, " ", sizeof(names) - strlen(names) - 1);
                                        strncat(names, g->profiles[i].name,
                                                sizeof(names) - strlen(names) - 1);
                                }
                        snprintf(err, errlen, "devices[%u].mig[%zu]: profile '%s' is not one of:%s",
                                 gpu_index, k, m->profile, names);
                        return -1;
                }
                struct mock_gi_profile *p = &g->profiles[found];
                m->gi_profile = (unsigned)found;
                m->ci_slices = c ? c : p->slices;
                if (!mock_ci_slices_allowed(p->slices, m->ci_slices)) {
                        snprintf(
                            err, errlen,
                            "devices[%u].mig[%zu]: no %uc compute instance in a %ug GPU instance",
                            gpu_index, k, m->ci_slices, p->slices);
                        return -1;
                }
                const struct mock_mig *head = first_of_gi(g, k);
                if (head && head->gi_profile != m->gi_profile) {
                        snprintf(err, errlen,
                                 "devices[%u].mig[%zu]: GPU instance %u has two profiles",
                                 gpu_index, k, m->gi);
                        return -1;
                }
                for (size_t j = 0; j < k; j++)
                        if (g->mig[j].gi == m->gi && g->mig[j].ci == m->ci) {
                                snprintf(err, errlen,
                                         "devices[%u].mig[%zu]: gi %u ci %u given twice", gpu_index,
                                         k, m->gi, m->ci);
                                return -1;
                        }
                if (m->memory_mib)
                        p->memory_mib = m->memory_mib;
                if (m->ci_slices == p->slices && m->sms)
                        p->sms = m->sms;
                if (m->ce != ~0U)
                        p->ce = m->ce;
                if (m->dec != ~0U)
                        p->dec = m->dec;
                if (m->enc != ~0U)
                        p->enc = m->enc;
                if (m->jpeg != ~0U)
                        p->jpeg = m->jpeg;
                if (m->ofa != ~0U)
                        p->ofa = m->ofa;
        }
        for (size_t k = 0; k < g->n_mig; k++) {
                struct mock_mig *m = &g->mig[k];
                const struct mock_gi_profile *p = &g->profiles[m->gi_profile];
                if (!m->memory_mib)
                        m->memory_mib = p->memory_mib;
                if (!m->sms)
                        m->sms = p->sms * m->ci_slices / p->slices;
                m->ce = p->ce;
                m->dec = p->dec;
                m->enc = p->enc;
                m->jpeg = p->jpeg;
                m->ofa = p->ofa;
                if (place(g, k, err, errlen, gpu_index) < 0)
                        return -1;
        }
        return 0;
}
