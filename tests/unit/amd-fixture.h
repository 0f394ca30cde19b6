/* A node of the AMD backend built from a generated sysfs tree, without a
 * loop: what test-amd.c and bench/bench-amd.c both start from.  Include
 * after devices/amd/internal.h; run from the repository root (the
 * generator is tests/mock-amd/gen_sysfs.py). */
#ifndef DEVLET_TESTS_AMD_FIXTURE_H
#define DEVLET_TESTS_AMD_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "base/xalloc.h"
#include "config/config.h"
#include "devices/device.h"
#include "devices/amd/internal.h"

#define AMD_FIXTURE_HELPER static __attribute__((unused))

struct amd_fixture {
        struct amd_inventory *inv;
        struct devlet_config *cfg; /* may be set before amd_fixture_build */
        struct amd_ctx ctx;
        struct amd_layout layout;
};

/* The directory a test's trees go under: amd_fixture_root_setup (a cmocka
 * setup) makes a fresh one, amd_fixture_root_teardown removes it. */
static __attribute__((unused)) char amd_fixture_root[64];

AMD_FIXTURE_HELPER int amd_fixture_root_setup(void **state)
{
        (void)state;
        snprintf(amd_fixture_root, sizeof(amd_fixture_root), "/tmp/devlet-amd-test-XXXXXX");
        return mkdtemp(amd_fixture_root) ? 0 : -1;
}

AMD_FIXTURE_HELPER int amd_fixture_root_teardown(void **state)
{
        (void)state;
        char *cmd = xasprintf("rm -rf '%s'", amd_fixture_root);
        int r = system(cmd);
        free(cmd);
        return r == 0 ? 0 : -1;
}

/* Generates profile under root/<profile>/{sys,dev} (replacing what is
 * there).  Returns the sysfs root (heap), or NULL when the generator fails. */
AMD_FIXTURE_HELPER char *amd_fixture_tree(const char *root, const char *profile)
{
        char *cmd = xasprintf("rm -rf '%s/%s' && /usr/bin/python3 tests/mock-amd/gen_sysfs.py %s "
                              "--sysfs '%s/%s/sys' --dev '%s/%s'",
                              root, profile, profile, root, profile, root, profile);
        int r = system(cmd);
        free(cmd);
        return r == 0 ? xasprintf("%s/%s/sys", root, profile) : NULL;
}

/* Loads the inventory of sys and builds the resources for strategy.
 * Returns 0; -ENOENT with diag set when the inventory fails to load; the
 * layout's error otherwise (f->inv is loaded then). */
AMD_FIXTURE_HELPER int amd_fixture_build(struct amd_fixture *f, const char *sys,
                                         const char *strategy, struct diag *diag)
{
        int r = amd_inventory_load(sys, &f->inv, diag);
        if (r < 0)
                return r;
        if (!f->cfg)
                f->cfg = config_new_defaults(dev_config_families());
        struct amd_options *opts = config_backend_options(f->cfg, &amd_config_options);
        free(opts->resource_naming_strategy);
        opts->resource_naming_strategy = xstrdup(strategy);
        f->ctx = (struct amd_ctx){ .inv = f->inv, .dev_root = xstrdup(""),
                                   .cdi_annotation_prefix = xstrdup("cdi.k8s.io/"),
                                   .topo = amd_topology_build(f->inv) };
        return amd_layout_build(f->inv, f->cfg, &f->ctx, &f->layout, diag);
}

AMD_FIXTURE_HELPER void amd_fixture_free(struct amd_fixture *f)
{
        amd_layout_release(&f->layout);
        alloc_topology_free(f->ctx.topo);
        free(f->ctx.dev_root);
        free(f->ctx.cdi_annotation_prefix);
        amd_inventory_free(f->inv);
        config_free(f->cfg);
        *f = (struct amd_fixture){ 0 };
}

#endif
