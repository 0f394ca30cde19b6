/* `make bench`: the AMD backend's costs on generated sysfs trees
 * (tests/mock-amd): GetPreferredAllocation for 4 of 8 MI300X (SPX) and 16 of
 * 64 CPX partitions (each call with a different random set of available
 * IDs, as a busy node offers), one health poll of 8 GPUs x 8 partitions,
 * the sysfs read at start-up, and the parse of AMD's exporter config.json
 * at its 1 MiB cap (80k ExtraPodLabels, 95k unknown keys: linear, a few
 * warnings).  Prints p50/p99 table rows; asserts nothing (the target, p99
 * <= 1 ms for preferred allocation, is read off). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/xalloc.h"
#include "amd-exporter-config-gen.h"
#include "amd-fixture.h"
#include "bench-util.h"
#include "config/config.h"
#include "devices/amd/exporter-config.h"
#include "devices/amd/internal.h"

static int node_load(const char *root, const char *profile, struct amd_fixture *n)
{
        char *sys = amd_fixture_tree(root, profile);
        struct diag why = { 0 };
        int r = sys ? amd_fixture_build(n, sys, "single", &why) : -1;
        if (r < 0)
                fprintf(stderr, "bench-amd: %s: %s\n", profile, sys ? why.message : "no tree");
        free(sys);
        return r;
}

/* iters calls of preferred allocation for size IDs, each offering a random
 * subset of at least min_avail of the resource's devices. */
static int bench_preferred(const char *name, struct amd_fixture *n, size_t size, size_t min_avail,
                           size_t iters)
{
        struct dev_resource *r = n->layout.res[0];
        char **avail = xcalloc(r->n_devices + 1, sizeof(char *));
        uint64_t *ns = xmalloc(iters * sizeof(*ns));
        for (size_t it = 0; it < iters; it++) {
                size_t k = 0;
                size_t keep = min_avail + (size_t)(rng() % (r->n_devices - min_avail + 1));
                for (size_t i = 0; i < r->n_devices; i++)
                        if ((size_t)(rng() % r->n_devices) < keep || r->n_devices - i <= keep - k)
                                if (k < keep)
                                        avail[k++] = r->devices[i].id;
                char **out = NULL;
                uint64_t t0 = now_ns();
                int rc = dev_preferred(r, avail, k, NULL, 0, size, &out);
                ns[it] = now_ns() - t0;
                if (rc < 0 || strv_len(out) != size) {
                        fprintf(stderr, "bench-amd: %s: unexpected answer\n", name);
                        return -1;
                }
                strv_free(out);
        }
        report(name, ns, iters);
        free(ns);
        free(avail);
        return 0;
}

static void bench_health(struct amd_fixture *n, size_t iters)
{
        struct amd_gpu_watch *w = xcalloc(n->inv->n_gpus, sizeof(*w));
        amd_health_baseline(n->inv, w);
        uint64_t *ns = xmalloc(iters * sizeof(*ns));
        const struct amd_health_policy policy = { 0 };
        for (size_t i = 0; i < iters; i++) {
                uint64_t t0 = now_ns();
                amd_health_poll(n->inv, w, &policy, (int64_t)i);
                ns[i] = now_ns() - t0;
        }
        report("amd health poll, 8 MI300X x 8 CPX partitions (sysfs)", ns, iters);
        for (size_t i = 0; i < n->inv->n_gpus; i++)
                free(w[i].reason);
        free(w);
        free(ns);
}

static void bench_load(const char *root, size_t iters)
{
        char *sys = xasprintf("%s/mi300x-8x-cpx/sys", root);
        uint64_t *ns = xmalloc(iters * sizeof(*ns));
        for (size_t i = 0; i < iters; i++) {
                struct amd_inventory *inv = NULL;
                struct diag why = { 0 };
                uint64_t t0 = now_ns();
                int r = amd_inventory_load(sys, &inv, &why);
                ns[i] = now_ns() - t0;
                if (r < 0 || inv->n_gpus != 8) {
                        fprintf(stderr, "bench-amd: inventory read failed: %s\n", why.message);
                        amd_inventory_free(inv);
                        free(ns);
                        free(sys);
                        return;
                }
                amd_inventory_free(inv);
        }
        report("amd inventory read, 8 MI300X CPX (64 partitions, 66 KFD nodes)", ns, iters);
        free(ns);
        free(sys);
}

/* iters parses of text, as the collector thread does when the file changes. */
static int bench_exporter_config(const char *name, char *text, size_t iters)
{
        uint64_t *ns = xmalloc(iters * sizeof(*ns));
        int rc = 0;
        for (size_t i = 0; i < iters && rc == 0; i++) {
                struct amd_exporter_config *c = NULL;
                struct diag why = { 0 };
                char **warnings = NULL;
                uint64_t t0 = now_ns();
                rc = amd_exporter_config_parse("config.json", text, strlen(text), &c, &warnings, &why);
                ns[i] = now_ns() - t0;
                if (rc < 0)
                        fprintf(stderr, "bench-amd: %s: %s\n", name, why.message);
                amd_exporter_config_free(c);
                strv_free(warnings);
        }
        if (rc == 0)
                report(name, ns, iters);
        free(ns);
        free(text);
        return rc < 0 ? -1 : 0;
}

int main(void)
{
        char root[] = "/tmp/devlet-bench-amd-XXXXXX";
        if (!mkdtemp(root)) {
                perror("bench-amd: mkdtemp");
                return 1;
        }
        struct amd_fixture spx = { 0 }, cpx = { 0 };
        int rc = 0;
        if (node_load(root, "mi300x-8x-spx", &spx) < 0 || node_load(root, "mi300x-8x-cpx", &cpx) < 0)
                rc = 1;
        if (!rc)
                rc = bench_preferred("amd preferred 4 of 8 MI300X (XGMI, random availability)",
                                     &spx, 4, 4, 20000);
        if (!rc)
                rc = bench_preferred("amd preferred 16 of 64 MI300X CPX partitions", &cpx, 16, 16,
                                     20000);
        if (!rc) {
                bench_health(&cpx, 2000);
                bench_load(root, 200);
        }
        if (!rc)
                rc = bench_exporter_config("amd exporter config.json, 80k ExtraPodLabels (1 MiB)",
                                           amd_config_gen_pod_labels(80000), 20);
        if (!rc)
                rc = bench_exporter_config("amd exporter config.json, 95k unknown keys (1 MiB)",
                                           amd_config_gen_unknown_keys(95000), 20);
        if (spx.inv)
                amd_fixture_free(&spx);
        if (cpx.inv)
                amd_fixture_free(&cpx);
        char *cmd = xasprintf("rm -rf '%s'", root);
        if (system(cmd) != 0)
                rc = 1;
        free(cmd);
        return rc;
}
