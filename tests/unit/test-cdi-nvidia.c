/* The NVIDIA CDI spec against the NVIDIA backend over the mock NVML: every
 * CDI name an Allocate answer gives (cdi-cri) is a device of the spec
 * cdi/generate.c writes, for each profile, MIG strategy, device-ID strategy
 * and sharing; MIG devices carry their capability nodes from
 * nvidia-caps/mig-minors; the node labels come from the same inventory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nvidia-test.h"

#include "cdi/generate.h"
#include "devices/nvidia/cdi.h"
#include "labels/labels.h"

#define GPUS 8
#define GIS 15
#define CIS 8

/* /dev/nvidia<N>, nvidiactl and the MIG capability nodes as symlinks to
 * /dev/null (a real character device, no mknod needed), and a mig-minors
 * file numbering every gpu/gi/ci access capability. */
static int setup(void **state)
{
        if (nvidia_group_setup(state) < 0)
                return -1;
        tmp_mkdir("root/dev/nvidia-caps");
        char p[PATH_MAX + 64];
        for (int i = 0; i < GPUS; i++) {
                snprintf(p, sizeof(p), "%s/root/dev/nvidia%d", tmp_dir, i);
                if (symlink("/dev/null", p) < 0)
                        return -1;
        }
        snprintf(p, sizeof(p), "%s/root/dev/nvidiactl", tmp_dir);
        if (symlink("/dev/null", p) < 0)
                return -1;
        char *minors = xstrdup("");
        int cap = 10;
        for (int g = 0; g < GPUS; g++)
                for (int gi = 0; gi < GIS; gi++)
                        for (int ci = -1; ci < CIS; ci++) {
                                char *line = ci < 0 ? xasprintf("gpu%d/gi%d/access %d\n", g, gi, cap)
                                                    : xasprintf("gpu%d/gi%d/ci%d/access %d\n", g,
                                                                gi, ci, cap);
                                char *all = xasprintf("%s%s", minors, line);
                                free(minors);
                                free(line);
                                minors = all;
                                snprintf(p, sizeof(p), "%s/root/dev/nvidia-caps/nvidia-cap%d",
                                         tmp_dir, cap++);
                                if (symlink("/dev/null", p) < 0)
                                        return -1;
                        }
        tmp_write("proc/driver/nvidia-caps/mig-minors", minors);
        free(minors);
        return 0;
}

static struct cdi_spec *nvidia_spec(struct dev_backend *b, const struct devlet_config *cfg,
                                    struct cdi_spec_list *specs)
{
        const struct dev_cdi_opts opts = { .cfg = cfg }; /* NVIDIA_CDI_PLUGIN_KIND */
        cdi_specs_for_backend(&nvidia_backend_ops, b, &opts, specs);
        assert_int_equal(specs->n, 1);
        assert_string_equal(specs->specs[0]->kind, "k8s.device-plugin.nvidia.com/gpu");
        return specs->specs[0];
}

/* The device a qualified CDI name "<kind>=<name>" names among specs, or
 * NULL. */
static const struct cdi_device *resolve(const struct cdi_spec_list *specs, const char *qualified)
{
        const char *eq = strchr(qualified, '=');
        if (!eq)
                return NULL;
        for (size_t i = 0; i < specs->n; i++) {
                const struct cdi_spec *s = specs->specs[i];
                if (strlen(s->kind) == (size_t)(eq - qualified) &&
                    strncmp(s->kind, qualified, (size_t)(eq - qualified)) == 0)
                        return cdi_spec_find_device(s, eq + 1);
        }
        return NULL;
}

/* Allocates every healthy ID alone and checks each CDI name it gives is a
 * device of the specs.  Returns how many names were checked. */
static size_t check_names(struct dev_backend *b, const struct cdi_spec_list *specs)
{
        size_t n_res, checked = 0;
        struct dev_resource **res = nvidia_backend_ops.resources(b, &n_res);
        for (size_t i = 0; i < n_res; i++)
                for (size_t k = 0; k < res[i]->n_devices; k++) {
                        struct dev_device *d = &res[i]->devices[k];
                        if (d->health != DEV_HEALTHY)
                                continue;
                        struct dev_alloc a = { 0 };
                        struct diag err = { 0 };
                        char *ids[] = { d->id };
                        assert_int_equal(dev_allocate(res[i], ids, 1, &a, &err), 0);
                        /* cdi-cri: CDI devices; cdi-annotations: one annotation,
                         * its value the names joined by ',' */
                        char **names = strv_push(xcalloc(1, sizeof(char *)), "");
                        for (size_t c = 0; a.cdi_devices && a.cdi_devices[c]; c++)
                                names = strv_push(names, a.cdi_devices[c]);
                        for (size_t c = 0; c < a.n_annotations; c++) {
                                if (!strstr(a.annotations[c].key, "nvidia-device-plugin_"))
                                        continue;
                                char *copy = xstrdup(a.annotations[c].value), *save = NULL;
                                for (char *t = strtok_r(copy, ",", &save); t;
                                     t = strtok_r(NULL, ",", &save))
                                        names = strv_push(names, t);
                                free(copy);
                        }
                        if (!names[1])
                                fail_msg("%s: Allocate named no CDI device", d->id);
                        for (size_t c = 1; names[c]; c++) {
                                if (!resolve(specs, names[c]))
                                        fail_msg("%s: Allocate names %s, which no spec has",
                                                 d->id, names[c]);
                                checked++;
                        }
                        strv_free(names);
                        dev_alloc_release(&a);
                }
        return checked;
}

struct names_case {
        const char *profile;
        const char *yaml;
        size_t devices; /* in the spec */
};

static void test_allocate_names_are_in_the_spec(void **state)
{
        static const struct names_case cases[] = {
                { "h100-8x-nvswitch", "version: v1\nflags:\n  plugin:\n    deviceListStrategy: cdi-cri\n",
                  17 },
                { "h100-8x-nvswitch",
                  "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [envvar, cdi-cri]\n"
                  "    deviceIDStrategy: index\n",
                  17 },
                { "h100-8x-nvswitch",
                  "version: v1\nflags:\n  plugin:\n    deviceListStrategy: cdi-cri\n"
                  "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 3\n",
                  17 },
                { "a100-mig-mixed",
                  "version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n"
                  "    deviceListStrategy: cdi-cri\n",
                  2 * (8 + 16) + 1 },
                { "a100-mig-mixed",
                  "version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n"
                  "    deviceListStrategy: cdi-cri\n    deviceIDStrategy: index\n",
                  2 * (8 + 16) + 1 },
                { "a100-mig-single",
                  "version: v1\nflags:\n  migStrategy: single\n  plugin:\n"
                  "    deviceListStrategy: cdi-annotations\n    deviceIDStrategy: index\n",
                  2 * (2 + 14) + 1 },
                { "mig-one-plain-one",
                  "version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n"
                  "    deviceListStrategy: cdi-cri\n",
                  2 * (2 + 3) + 1 },
                { "mig-one-plain-one",
                  "version: v1\nflags:\n  plugin:\n    deviceListStrategy: cdi-cri\n", 2 * (2 + 3) + 1 },
                { "a100-mig-mixed",
                  "version: v1\nflags:\n  plugin:\n    deviceListStrategy: cdi-cri\n"
                  "    deviceIDStrategy: index\n",
                  2 * (8 + 16) + 1 },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                nvml_profile(cases[i].profile);
                struct devlet_config *cfg = cfg_yaml(cases[i].yaml);
                struct dev_backend *b = backend_new(NULL, cfg);
                struct cdi_spec_list specs = { 0 };
                const struct cdi_spec *s = nvidia_spec(b, cfg, &specs);
                if (s->n_devices != cases[i].devices)
                        fail_msg("case %zu: %zu devices in the spec, want %zu", i, s->n_devices,
                                 cases[i].devices);
                if (check_names(b, &specs) == 0)
                        fail_msg("case %zu: no CDI name to check", i);
                cdi_spec_list_release(&specs);
                nvidia_backend_ops.destroy(b);
                config_free(cfg);
        }
}

static const struct cdi_device_node *node_in(const struct cdi_edits *e, const char *path)
{
        for (size_t i = 0; i < e->n_nodes; i++)
                if (strcmp(e->nodes[i].path, path) == 0)
                        return &e->nodes[i];
        return NULL;
}

/* A MIG device: its GPU's node and the two access capabilities that
 * mig-minors names for its GPU instance and compute instance. */
static void test_mig_capabilities(void **state)
{
        nvml_profile("mig-one-plain-one");
        struct devlet_config *cfg = cfg_yaml("version: v1\nflags:\n  migStrategy: mixed\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        struct cdi_spec_list specs = { 0 };
        const struct cdi_spec *s = nvidia_spec(b, cfg, &specs);
        assert_null(specs.warnings);
        /* GPU 0 gi 1 ci 0: caps numbered gpu-major from 10, 9 per gi */
        const struct cdi_device *d = cdi_spec_find_device(s, "MIG-2274ea18-1e34-b3f1-ec3f-bf4dc20ef164");
        assert_non_null(d);
        assert_int_equal(d->edits.n_nodes, 3);
        assert_non_null(node_in(&d->edits, "/dev/nvidia0"));
        assert_non_null(node_in(&d->edits, "/dev/nvidia-caps/nvidia-cap19"));
        assert_non_null(node_in(&d->edits, "/dev/nvidia-caps/nvidia-cap20"));
        assert_non_null(cdi_spec_find_device(s, "0:0"));
        assert_int_equal(cdi_spec_find_device(s, "0")->edits.n_nodes, 1); /* served whole */
        assert_non_null(cdi_spec_find_device(s, "1"));
        const struct cdi_device_node *ctl = node_in(&s->edits, "/dev/nvidiactl");
        assert_non_null(ctl);
        assert_true(ctl && ctl->type == 'c' && ctl->major == 1 && ctl->minor == 3);
        cdi_spec_list_release(&specs);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* With GDS and MOFED on, Allocate also names <vendor>/gds=all and
 * <vendor>/mofed=all: specs of those kinds hold the nodes present; GDRCOPY
 * without /dev/gdrdrv gets no spec, and a warning says so. */
static void test_extra_kinds(void **state)
{
        char p[PATH_MAX + 64];
        tmp_mkdir("root/dev/infiniband");
        const char *const nodes[] = { "root/dev/nvidia-fs0", "root/dev/nvidia-fs1",
                                      "root/dev/infiniband/uverbs0" };
        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
                tmp_path(p, sizeof(p), nodes[i]);
                assert_int_equal(symlink("/dev/null", p), 0);
        }
        nvml_profile("h100-8x-nvswitch");
        struct devlet_config *cfg = cfg_yaml("version: v1\nflags:\n  gdsEnabled: true\n"
                                             "  mofedEnabled: true\n  gdrcopyEnabled: true\n"
                                             "  plugin:\n    deviceListStrategy: cdi-cri\n");
        struct dev_backend *b = backend_new(NULL, cfg);
        struct cdi_spec_list specs = { 0 };
        const struct dev_cdi_opts opts = { .cfg = cfg }; /* NVIDIA_CDI_PLUGIN_KIND */
        cdi_specs_for_backend(&nvidia_backend_ops, b, &opts, &specs);
        assert_int_equal(specs.n, 3);
        assert_string_equal(specs.specs[1]->kind, "k8s.device-plugin.nvidia.com/gds");
        assert_int_equal(specs.specs[1]->devices[0].edits.n_nodes, 2);
        assert_string_equal(specs.specs[1]->devices[0].edits.nodes[0].path, "/dev/nvidia-fs0");
        assert_string_equal(specs.specs[2]->kind, "k8s.device-plugin.nvidia.com/mofed");
        assert_string_equal(specs.specs[2]->devices[0].edits.nodes[0].path,
                            "/dev/infiniband/uverbs0");
        assert_int_equal(strv_len(specs.warnings), 1);
        assert_non_null(strstr(specs.warnings[0], "k8s.device-plugin.nvidia.com/gdrcopy"));
        /* every name but gdrcopy's resolves */
        size_t n_res = 0;
        struct dev_resource *r = nvidia_backend_ops.resources(b, &n_res)[0];
        assert_string_equal(r->name, "nvidia.com/gpu");
        struct dev_alloc a = { 0 };
        struct diag err = { 0 };
        char *ids[] = { r->devices[0].id };
        assert_int_equal(dev_allocate(r, ids, 1, &a, &err), 0);
        size_t resolved = 0;
        for (size_t i = 0; a.cdi_devices && a.cdi_devices[i]; i++)
                resolved += resolve(&specs, a.cdi_devices[i]) != NULL;
        assert_int_equal(strv_len(a.cdi_devices), 4);
        assert_int_equal(resolved, 3);
        dev_alloc_release(&a);
        cdi_spec_list_release(&specs);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
                tmp_path(p, sizeof(p), nodes[i]);
                unlink(p);
        }
}

/* Labels come from the same inventory: the MIG attributes NVML reports. */
static void test_labels_from_backend(void **state)
{
        nvml_profile("mig-one-plain-one");
        /* gpu.mode reads every GPU's class: one GPU without is "unknown" */
        tmp_mkdir("sys/bus/pci/devices/0000:3b:00.0");
        tmp_write("sys/bus/pci/devices/0000:3b:00.0/class", "0x030200\n");
        struct devlet_config *cfg = cfg_yaml("version: v1\nflags:\n  migStrategy: mixed\n");
        struct dev_backend *b0 = backend_new(NULL, cfg);
        struct labels_backend lb0 = { &nvidia_backend_ops, b0 };
        struct dev_labels set0 = { 0 };
        labels_collect(cfg, &lb0, 1, &set0, NULL);
        assert_string_equal(dev_labels_get(&set0, "nvidia.com/gpu.mode"), "unknown");
        assert_string_equal(dev_labels_get(&set0, "nvidia.com/vgpu.present"), "false");
        dev_labels_release(&set0);
        nvidia_backend_ops.destroy(b0);
        tmp_mkdir("sys/bus/pci/devices/0000:af:00.0");
        tmp_write("sys/bus/pci/devices/0000:af:00.0/class", "0x030200\n");
        cfg->labels_no_timestamp = true;
        struct dev_backend *b = backend_new(NULL, cfg);
        struct labels_backend lb = { &nvidia_backend_ops, b };
        struct dev_labels set = { 0 };
        char **warnings = NULL;
        labels_collect(cfg, &lb, 1, &set, &warnings);
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.product"), "NVIDIA-A100-PCIE-40GB");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/mig-3g.20gb.slices.gi"), "3");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/mig-3g.20gb.memory"), "20096");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/mig-2g.10gb.engines.copy"), "2");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.count"), "1");
        assert_string_equal(dev_labels_get(&set, "nvidia.com/gpu.mode"), "compute");
        strv_free(warnings);
        dev_labels_release(&set);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

/* The ldcache hook's path is the host's: devlet, in its container, finds the
 * program under the search root (its mount of the host's root) and the spec
 * names the host path; without the program there is no hook. */
static void test_ldcache_hook_under_search_root(void **state)
{
        tmp_mkdir("hostroot/usr/lib/x86_64-linux-gnu");
        tmp_mkdir("hostroot/usr/bin");
        tmp_write("hostroot/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "elf");
        char search[PATH_MAX + 64], hook[PATH_MAX + 64], dev_root[PATH_MAX + 64];
        tmp_path(search, sizeof(search), "hostroot");
        tmp_path(dev_root, sizeof(dev_root), "root"); /* the fixture's /dev/nvidia0 */
        tmp_path(hook, sizeof(hook), "hostroot/usr/bin/nvidia-cdi-hook-test");
        const struct nvidia_cdi_gpu gpu = { .uuid = "GPU-11111111-2222-3333-4444-555555555555",
                                            .minor = 0 };
        const struct nvidia_cdi_node node = { .driver_version = "550.54.15", .gpus = &gpu,
                                              .n_gpus = 1 };
        const struct nvidia_cdi_opts opts = { .kind = "nvidia.com/gpu", .driver_root = "/",
                                              .search_root = search, .dev_root = dev_root,
                                              .hook_path = "/usr/bin/nvidia-cdi-hook-test" };
        for (int present = 1; present >= 0; present--) {
                if (present)
                        tmp_write("hostroot/usr/bin/nvidia-cdi-hook-test", "#!/bin/true\n");
                else
                        assert_int_equal(unlink(hook), 0);
                struct cdi_spec *s = NULL;
                char **warnings = NULL;
                struct diag err = { 0 };
                assert_int_equal(nvidia_cdi_spec(&node, &opts, &s, &warnings, &err), 0);
                assert_int_equal(s->edits.n_hooks, (size_t)present);
                if (present) {
                        const struct cdi_hook *h = &s->edits.hooks[0];
                        assert_string_equal(h->path, "/usr/bin/nvidia-cdi-hook-test");
                        assert_string_equal(h->args[1], "update-ldcache");
                        assert_string_equal(h->args[2], "--folder");
                        assert_string_equal(h->args[3], "/usr/lib/x86_64-linux-gnu");
                }
                strv_free(warnings);
                cdi_spec_free(s);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_allocate_names_are_in_the_spec),
                cmocka_unit_test(test_mig_capabilities),
                cmocka_unit_test(test_ldcache_hook_under_search_root),
                cmocka_unit_test(test_extra_kinds),
                cmocka_unit_test(test_labels_from_backend),
        };
        return cmocka_run_group_tests(tests, setup, nvidia_group_teardown);
}
