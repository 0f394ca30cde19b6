/* The NVIDIA CDI spec: GPU and MIG devices, control nodes, driver files.
 *
 * What goes in follows NVIDIA's tools: the device nodes of
 * nvidia-container-toolkit's CDI generation (per-GPU /dev/nvidia<minor>,
 * MIG access capabilities under /dev/nvidia-caps, the control nodes in the
 * spec-wide edits), the compute and utility libraries and binaries of
 * libnvidia-container's lists (src/nvc_info.c), picked by the driver
 * version's suffix as the toolkit does ("*.so.<version>"), mounted with the
 * toolkit's options, and its update-ldcache hook.  Files are looked for in
 * fixed library and binary directories under the driver root, not through
 * its ld.so.cache.
 *
 * Only stat/readdir/realpath; never logs (warnings go back). */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/nvidia/cdi.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvidia.h"

/* libnvidia-container's utility_libs and compute_libs */
static const char *const driver_libs[] = {
        "libnvidia-ml.so",       "libnvidia-cfg.so",          "libnvidia-nscq.so",
        "libcuda.so",            "libcudadebugger.so",        "libnvidia-opencl.so",
        "libnvidia-gpucomp.so",  "libnvidia-ptxjitcompiler.so", "libnvidia-fatbinaryloader.so",
        "libnvidia-allocator.so", "libnvidia-compiler.so",    "libnvidia-pkcs11.so",
        "libnvidia-pkcs11-openssl3.so", "libnvidia-nvvm.so",  "libnvidia-tileiras.so",
};

/* utility_bins and compute_bins */
static const char *const driver_bins[] = { "nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                           "nvidia-cuda-mps-control", "nvidia-cuda-mps-server" };

/* Library directories, /usr first so that merged-/usr links resolve to the
 * /usr path. */
static const char *const lib_dirs[] = {
        "/usr/lib64",      "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64/nvidia", "/usr/lib/x86_64-linux-gnu/nvidia",
        "/usr/lib/aarch64-linux-gnu/nvidia", "/usr/lib/nvidia", "/usr/lib",
        "/lib64",          "/lib/x86_64-linux-gnu",     "/lib/aarch64-linux-gnu", "/lib",
        "/usr/local/nvidia/lib64",
};

static const char *const bin_dirs[] = { "/usr/bin", "/usr/sbin", "/bin", "/sbin",
                                        "/usr/local/bin", "/usr/local/nvidia/bin" };

static const char *const control_nodes[] = { "/dev/nvidiactl", "/dev/nvidia-uvm",
                                             "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset" };

static const char *const mount_options[] = { "ro", "nosuid", "nodev", "bind", NULL };

struct builder {
        const struct nvidia_cdi_opts *opts;
        char *driver_root, *search_root, *dev_root; /* "" for "/" */
        char ***warnings;
        char **seen; /* real paths of the files already mounted (strv) */
        char **lib_dirs_used; /* container paths of library directories (strv) */
};

static void warn(struct builder *b, char *msg)
{
        if (b->warnings)
                *b->warnings = strv_push(*b->warnings ? *b->warnings : xcalloc(1, sizeof(char *)),
                                         msg);
        free(msg);
}

static char *root_normalize(const char *s)
{
        char *r = xstrdup(s ? s : "");
        size_t n = strlen(r);
        while (n > 0 && r[n - 1] == '/')
                r[--n] = '\0';
        return r;
}

static void strv_add_unique(char ***v, const char *s)
{
        if (!*v)
                *v = xcalloc(1, sizeof(char *));
        if (!strv_contains(*v, s))
                *v = strv_push(*v, s);
}

/* ---- device nodes ---- */

/* Adds node path (a /dev path) when it exists under the dev root.  Returns
 * whether it did. */
static bool add_node(struct builder *b, struct cdi_edits *e, const char *path, bool quiet)
{
        _cleanup_free_ char *host = xasprintf("%s%s", b->dev_root, path);
        struct stat st;
        if (stat(host, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
                if (!quiet)
                        warn(b, xasprintf("device node %s missing: left out of the CDI spec",
                                          host));
                return false;
        }
        struct cdi_device_node *n = cdi_edits_add_node(e, path, host, "rw");
        n->type = S_ISCHR(st.st_mode) ? 'c' : 'b';
        n->major = major(st.st_rdev);
        n->minor = minor(st.st_rdev);
        return true;
}

static void add_cap(struct builder *b, struct cdi_edits *e, int cap)
{
        if (cap < 0)
                return;
        _cleanup_free_ char *path = xasprintf("/dev/nvidia-caps/nvidia-cap%d", cap);
        add_node(b, e, path, false);
}

/* ---- driver files ---- */

static bool all_digits(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* Mounts <search_root>/rel from <driver_root>/rel at /rel, once per real
 * file.  Returns whether it did. */
static bool add_file(struct builder *b, struct cdi_edits *e, const char *rel)
{
        _cleanup_free_ char *found = xasprintf("%s%s", b->search_root, rel);
        char real[PATH_MAX];
        if (!realpath(found, real))
                return false;
        if (b->seen && strv_contains(b->seen, real))
                return false;
        strv_add_unique(&b->seen, real);
        _cleanup_free_ char *host = xasprintf("%s%s", b->driver_root, rel);
        cdi_edits_add_mount(e, host, rel, NULL, mount_options);
        return true;
}

/* In dir: lib.<version>, and the lib.<N> symlinks that lead to it. */
static void add_library(struct builder *b, struct cdi_edits *e, const char *dir, const char *lib,
                        const char *version)
{
        _cleanup_free_ char *rel = xasprintf("%s/%s.%s", dir, lib, version);
        _cleanup_free_ char *abs = xasprintf("%s%s", b->search_root, rel);
        struct stat st;
        if (stat(abs, &st) < 0 || !S_ISREG(st.st_mode) || !add_file(b, e, rel))
                return;
        strv_add_unique(&b->lib_dirs_used, dir);

        _cleanup_free_ char *absdir = xasprintf("%s%s", b->search_root, dir);
        DIR *d = opendir(absdir);
        if (!d)
                return;
        size_t n = strlen(lib);
        char target[PATH_MAX];
        if (!realpath(abs, target)) {
                closedir(d);
                return;
        }
        for (struct dirent *de; (de = readdir(d));) {
                if (strncmp(de->d_name, lib, n) != 0 || de->d_name[n] != '.' ||
                    !all_digits(de->d_name + n + 1))
                        continue;
                _cleanup_free_ char *lrel = xasprintf("%s/%s", dir, de->d_name);
                _cleanup_free_ char *labs = xasprintf("%s%s", b->search_root, lrel);
                char ltarget[PATH_MAX];
                struct stat lst;
                if (lstat(labs, &lst) == 0 && S_ISLNK(lst.st_mode) && realpath(labs, ltarget) &&
                    strcmp(ltarget, target) == 0) {
                        _cleanup_free_ char *host = xasprintf("%s%s", b->driver_root, lrel);
                        cdi_edits_add_mount(e, host, lrel, NULL, mount_options);
                }
        }
        closedir(d);
}

static void add_driver_files(struct builder *b, struct cdi_edits *e, const char *version)
{
        if (version && version[0]) {
                for (size_t l = 0; l < ARRAY_SIZE(driver_libs); l++)
                        for (size_t d = 0; d < ARRAY_SIZE(lib_dirs); d++)
                                add_library(b, e, lib_dirs[d], driver_libs[l], version);
        } else {
                warn(b, xstrdup("driver version unknown: no driver libraries in the CDI spec"));
        }
        for (size_t i = 0; i < ARRAY_SIZE(driver_bins); i++)
                for (size_t d = 0; d < ARRAY_SIZE(bin_dirs); d++) {
                        _cleanup_free_ char *rel = xasprintf("%s/%s", bin_dirs[d], driver_bins[i]);
                        _cleanup_free_ char *abs = xasprintf("%s%s", b->search_root, rel);
                        struct stat st;
                        if (stat(abs, &st) == 0 && S_ISREG(st.st_mode) && add_file(b, e, rel))
                                break;
                }
}

/* The hook's path is the host's (the runtime runs it there).  devlet may run
 * in a container that sees the host's root under the search root (the
 * container driver root), so look there first, then at the path itself.
 * nvidia-ctk takes "hook" before the hook's name; nvidia-cdi-hook does not. */
static void add_ldcache_hook(struct builder *b, struct cdi_edits *e)
{
        const char *path = b->opts->hook_path;
        if (!path || path[0] != '/' || !b->lib_dirs_used)
                return;
        _cleanup_free_ char *seen = xasprintf("%s%s", b->search_root, path);
        struct stat st;
        if ((stat(seen, &st) < 0 || !S_ISREG(st.st_mode)) &&
            (stat(path, &st) < 0 || !S_ISREG(st.st_mode)))
                return;
        const char *base = strrchr(path, '/') + 1;
        _cleanup_strv_free_ char **args = strv_push(xcalloc(1, sizeof(char *)), base);
        if (strcmp(base, "nvidia-ctk") == 0)
                args = strv_push(args, "hook");
        args = strv_push(args, "update-ldcache");
        for (size_t i = 0; b->lib_dirs_used[i]; i++) {
                args = strv_push(args, "--folder");
                args = strv_push(args, b->lib_dirs_used[i]);
        }
        cdi_edits_add_hook(e, "createContainer", path, (const char *const *)args, NULL);
}

/* ---- devices ---- */

static void add_named(struct cdi_spec *s, const char *name, const struct cdi_edits *e)
{
        if (!name || !name[0] || cdi_spec_find_device(s, name))
                return;
        cdi_edits_merge(&cdi_spec_add_device(s, name)->edits, e);
}

int nvidia_cdi_spec(const struct nvidia_cdi_node *node, const struct nvidia_cdi_opts *opts,
                    struct cdi_spec **out, char ***warnings, struct diag *diag)
{
        if (!cdi_valid_kind(opts->kind))
                return diag_set(diag, -EINVAL, "invalid CDI kind \"%s\"",
                                opts->kind ? opts->kind : "");
        struct builder b = { .opts = opts, .warnings = warnings };
        b.driver_root = root_normalize(opts->driver_root);
        b.search_root = root_normalize(opts->search_root ? opts->search_root : opts->driver_root);
        b.dev_root = root_normalize(opts->dev_root);

        struct cdi_spec *s = cdi_spec_new(opts->kind);
        struct cdi_edits all = { 0 };
        for (size_t i = 0; i < node->n_gpus; i++) {
                const struct nvidia_cdi_gpu *g = &node->gpus[i];
                _cleanup_free_ char *gpu_node = g->minor >= 0 ? xasprintf("/dev/nvidia%d", g->minor)
                                                              : NULL;
                if (!gpu_node) {
                        warn(&b, xasprintf("GPU %zu: device minor unknown: left out of the CDI "
                                           "spec",
                                           i));
                        continue;
                }
                /* a MIG-enabled GPU too: with mig-strategy=none it is
                 * served whole, and Allocate names it */
                struct cdi_edits whole = { 0 };
                if (add_node(&b, &whole, gpu_node, false)) {
                        _cleanup_free_ char *index = xasprintf("%zu", i);
                        add_named(s, index, &whole);
                        add_named(s, g->uuid, &whole);
                        cdi_edits_merge(&all, &whole);
                }
                cdi_edits_release(&whole);
                for (size_t k = 0; g->mig_enabled && k < g->n_migs; k++) {
                        const struct nvidia_cdi_mig *m = &g->migs[k];
                        struct cdi_edits e = { 0 };
                        if (add_node(&b, &e, gpu_node, false)) {
                                add_cap(&b, &e, m->gi_cap);
                                add_cap(&b, &e, m->ci_cap);
                                _cleanup_free_ char *index = xasprintf("%zu:%u", i, m->index);
                                add_named(s, index, &e);
                                add_named(s, m->uuid, &e);
                                cdi_edits_merge(&all, &e);
                        }
                        cdi_edits_release(&e);
                }
        }
        int r = 0;
        if (s->n_devices == 0) {
                r = diag_set(diag, -EINVAL, "no GPU device nodes under %s/dev to describe",
                             b.dev_root[0] ? b.dev_root : "");
                goto done;
        }
        add_named(s, "all", &all);

        cdi_edits_add_env(&s->edits, "NVIDIA_VISIBLE_DEVICES", "void");
        for (size_t i = 0; i < ARRAY_SIZE(control_nodes); i++)
                add_node(&b, &s->edits, control_nodes[i], i > 0);
        add_driver_files(&b, &s->edits, node->driver_version);
        add_ldcache_hook(&b, &s->edits);

        r = cdi_spec_validate(s, diag);
done:
        cdi_edits_release(&all);
        free(b.driver_root);
        free(b.search_root);
        free(b.dev_root);
        strv_free(b.seen);
        strv_free(b.lib_dirs_used);
        if (r < 0) {
                cdi_spec_free(s);
                return r;
        }
        *out = s;
        return 0;
}

/* ---- GDS, MOFED, GDRCOPY ---- */

static const char *const gds_nodes[] = { "/dev/nvidia-fs*", NULL };
static const char *const mofed_nodes[] = { "/dev/infiniband/*", NULL };
static const char *const gdrcopy_nodes[] = { "/dev/gdrdrv", NULL };
static const char *const imex_nodes[] = { "/dev/nvidia-caps-imex-channels/channel0", NULL };
const struct nvidia_cdi_extra nvidia_cdi_gds = { "gds", gds_nodes, "all" };
const struct nvidia_cdi_extra nvidia_cdi_mofed = { "mofed", mofed_nodes, "all" };
const struct nvidia_cdi_extra nvidia_cdi_gdrcopy = { "gdrcopy", gdrcopy_nodes, "all" };
const struct nvidia_cdi_extra nvidia_cdi_imex = { "imex-channel", imex_nodes, "0" };

int nvidia_cdi_extra_spec(const char *kind, const char *dev_root,
                          const struct nvidia_cdi_extra *x, struct cdi_spec **out, struct diag *diag)
{
        const char *const *patterns = x->patterns;
        if (!cdi_valid_kind(kind))
                return diag_set(diag, -EINVAL, "invalid CDI kind \"%s\"", kind ? kind : "");
        _cleanup_free_ char *root = root_normalize(dev_root);
        struct cdi_spec *s = cdi_spec_new(kind);
        struct cdi_device *all = cdi_spec_add_device(s, x->device);
        for (size_t p = 0; patterns[p]; p++) {
                _cleanup_free_ char *pattern = xasprintf("%s%s", root, patterns[p]);
                glob_t g = { 0 };
                if (glob(pattern, 0, NULL, &g) == 0)
                        for (size_t i = 0; i < g.gl_pathc; i++) {
                                struct stat st;
                                const char *host = g.gl_pathv[i];
                                if (stat(host, &st) < 0 ||
                                    !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
                                        continue;
                                struct cdi_device_node *n =
                                        cdi_edits_add_node(&all->edits, host + strlen(root), host,
                                                           "rw");
                                n->type = S_ISCHR(st.st_mode) ? 'c' : 'b';
                                n->major = major(st.st_rdev);
                                n->minor = minor(st.st_rdev);
                        }
                globfree(&g);
        }
        if (all->edits.n_nodes == 0) {
                cdi_spec_free(s);
                return diag_set(diag, -ENOENT, "%s: no device node under %s/dev matches %s", kind,
                                root, patterns[0]);
        }
        *out = s;
        return 0;
}

/* ---- the backend's member: facts from the inventory ---- */

/* Where devlet finds the driver now: the driver root's mount in devlet's
 * own container (--driver-root-ctr-path) when there is one, else the driver
 * root itself. */
static const char *driver_search_root(const struct devlet_config *cfg)
{
        struct stat st;
        const char *ctr = nvidia_options_get(cfg)->container_driver_root;
        if (ctr && ctr[0] && stat(ctr, &st) == 0 && S_ISDIR(st.st_mode))
                return ctr;
        return nvidia_options_get(cfg)->driver_root;
}

void nvidia_backend_cdi_specs(struct dev_backend *b, const struct dev_cdi_opts *opts,
                              struct cdi_spec_list *l)
{
        const struct nvml_inventory *inv = nvidia_backend_inventory(b);
        if (!inv || inv->n_gpus == 0)
                return;
        size_t n_migs = 0;
        for (size_t i = 0; i < inv->n_gpus; i++)
                n_migs += inv->gpus[i].n_migs;
        _cleanup_free_ struct nvidia_cdi_gpu *gpus = xcalloc(inv->n_gpus, sizeof(*gpus));
        _cleanup_free_ struct nvidia_cdi_mig *migs = xcalloc(n_migs ? n_migs : 1, sizeof(*migs));
        struct nvidia_cdi_mig *next = migs;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct nvml_gpu *g = &inv->gpus[i];
                /* a GPU lost at start-up keeps its index, with no device */
                gpus[i] = (struct nvidia_cdi_gpu){ .uuid = g->uuid,
                                                   .minor = g->lost ? -1 : g->minor,
                                                   .mig_enabled = g->mig_enabled,
                                                   .migs = next,
                                                   .n_migs = g->n_migs };
                for (size_t k = 0; k < g->n_migs; k++)
                        *next++ = (struct nvidia_cdi_mig){ .index = g->migs[k].index,
                                                           .uuid = g->migs[k].uuid,
                                                           .gi_cap = g->migs[k].gi_cap,
                                                           .ci_cap = g->migs[k].ci_cap };
        }
        const struct nvidia_cdi_node node = { inv->driver_version, gpus, inv->n_gpus };
        const struct devlet_config *cfg = opts->cfg;
        const struct nvidia_options *no = nvidia_options_get(cfg);
        _cleanup_free_ char *main_kind =
                opts->standalone ? xasprintf("%s/%s", opts->vendor ? opts->vendor : "nvidia.com",
                                             opts->klass ? opts->klass : "gpu")
                                 : xstrdup(NVIDIA_CDI_PLUGIN_KIND);
        const struct nvidia_cdi_opts o = {
                .kind = main_kind,
                .driver_root = no->driver_root,
                .search_root = driver_search_root(cfg),
                .dev_root = nvidia_dev_root(cfg),
                .hook_path = no->cdi_hook_ldcache ? no->cdi_hook_path : NULL,
        };
        struct cdi_spec *s = NULL;
        struct diag why = { 0 };
        if (nvidia_cdi_spec(&node, &o, &s, &l->warnings, &why) < 0) {
                cdi_spec_list_warn(l, xasprintf("no NVIDIA CDI spec: %s", why.message));
                return;
        }
        cdi_spec_list_push(l, s);

        /* the kinds Allocate names "<vendor>/gds=all" and so on */
        const struct {
                bool on;
                const struct nvidia_cdi_extra *x;
        } extras[] = { { no->gds_enabled, &nvidia_cdi_gds },
                       { no->mofed_enabled, &nvidia_cdi_mofed },
                       { no->gdrcopy_enabled, &nvidia_cdi_gdrcopy },
                       { no->imex_channel0, &nvidia_cdi_imex } };
        const char *slash = strchr(o.kind, '/');
        for (size_t i = 0; i < ARRAY_SIZE(extras); i++) {
                if (!extras[i].on)
                        continue;
                _cleanup_free_ char *kind = xasprintf("%.*s/%s", (int)(slash - o.kind), o.kind,
                                                      extras[i].x->klass);
                struct diag xwhy = { 0 };
                struct cdi_spec *x = NULL;
                if (nvidia_cdi_extra_spec(kind, nvidia_dev_root(cfg), extras[i].x, &x, &xwhy) < 0)
                        cdi_spec_list_warn(l, xasprintf("no CDI spec for %s: %s", kind, xwhy.message));
                else
                        cdi_spec_list_push(l, x);
        }
}
