/* What NVIDIA v0.20's newer options (options-nvidia.inc) mean for devlet,
 * decided once per load after every source has been applied:
 *
 *   --dev-root          empty (the default) is the driver root, as NVIDIA's;
 *                       other families then use "/" (config_host_dev_root)
 *   --device-discovery-strategy  auto and nvml are NVML; tegra and vfio are
 *                       refused (devlet has neither discovery)
 *   --imex-channel-ids  [] or [0], as NVIDIA checks; [0] adds channel0
 *   --cdi-disable-hooks which hooks the CDI specs leave out
 *   --cdi-feature-flags flags devlet's specs already satisfy are quiet,
 *                       others get one warning each
 *   MPS                 needs --mps-root and is refused with mig-strategy
 *                       mixed, as NVIDIA's
 *   --use-node-feature-api  one warning: the labels go to the features.d file
 *
 * Problems are -EINVAL with diag set; warnings join cfg->warnings.  Never
 * logs, never touches the filesystem. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "config/options.h"

static void warn(struct devlet_config *cfg, char *msg)
{
        cfg->warnings = strv_push(cfg->warnings, msg);
        free(msg);
}

static bool listed(const char *const *v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

static int check_imex(struct devlet_config *cfg, struct config_diag *diag)
{
        char **ids = cfg->imex_channel_ids;
        size_t n = strv_len(ids);
        cfg->imex_channel0 = false;
        if (n == 0)
                return 0;
        if (n == 1 && strcmp(ids[0], "0") == 0) {
                cfg->imex_channel0 = true;
                return 0;
        }
        char found[128] = "";
        for (size_t i = 0; i < n; i++)
                snprintf(found + strlen(found), sizeof(found) - strlen(found), "%s%.20s",
                         i ? " " : "", ids[i]);
        return config_diag_set(diag, NULL, 0, 0,
                               "invalid IMEX channel IDs: channelIDs must be [] or [0]; found "
                               "[%s]",
                               found);
}

static void check_cdi(struct devlet_config *cfg)
{
        static const char *const hooks[] = { "update-ldcache", "create-symlinks",
                                             "enable-cuda-compat", "chmod",
                                             "disable-device-node-modification", "all", NULL };
        /* satisfied by every spec devlet writes: the libraries are listed
         * explicitly, and nvsandboxutils is never used */
        static const char *const satisfied[] = { "enable-explicit-driver-libraries",
                                                 "disable-nvsandbox-utils",
                                                 "disable-nvsandboxutils", NULL };
        char **dis = cfg->cdi_disable_hooks;
        cfg->cdi_hook_ldcache = !strv_contains(dis, "update-ldcache") && !strv_contains(dis, "all");
        for (size_t i = 0; dis && dis[i]; i++)
                if (!listed(hooks, dis[i]))
                        warn(cfg, xasprintf("--cdi-disable-hooks: unknown hook \"%s\" (devlet's "
                                            "CDI specs only ever hold update-ldcache)",
                                            dis[i]));
        for (size_t i = 0; cfg->cdi_feature_flags && cfg->cdi_feature_flags[i]; i++)
                if (!listed(satisfied, cfg->cdi_feature_flags[i]))
                        warn(cfg, xasprintf("--cdi-feature-flags: \"%s\" has no effect on the "
                                            "CDI specs devlet writes (ignored)",
                                            cfg->cdi_feature_flags[i]));
}

int config_nvidia_finish(struct devlet_config *cfg, struct config_diag *diag)
{
        cfg->dev_root_is_driver_root = !cfg->dev_root[0];
        if (cfg->dev_root_is_driver_root) {
                free(cfg->dev_root);
                cfg->dev_root = xstrdup(cfg->driver_root);
        }
        const char *dds = cfg->device_discovery_strategy;
        if (strcmp(dds, "tegra") == 0 || strcmp(dds, "vfio") == 0)
                return config_diag_set(diag, NULL, 0, 0,
                                       "--device-discovery-strategy=%s is not supported: devlet "
                                       "finds GPUs through NVML only (use auto or nvml)",
                                       dds);
        int r = check_imex(cfg, diag);
        if (r < 0)
                return r;
        if (cfg->sharing.strategy == SHARING_MPS) {
                if (strcmp(cfg->mig_strategy, "mixed") == 0)
                        return config_diag_set(diag, NULL, 0, 0,
                                               "using --mig-strategy=mixed is not supported "
                                               "with MPS");
                if (!cfg->mps_root[0])
                        return config_diag_set(diag, NULL, 0, 0,
                                               "using MPS requires --mps-root to be specified");
        }
        check_cdi(cfg);
        if (cfg->use_node_feature_api)
                warn(cfg, xasprintf("--use-node-feature-api: devlet does not write NFD "
                                    "NodeFeature objects; the labels go to the features.d file "
                                    "%s for NFD's local source (see docs/MIGRATION.md)",
                                    cfg->labels_output_file[0]
                                            ? cfg->labels_output_file
                                            : "/etc/kubernetes/node-feature-discovery/features.d/gfd"));
        return 0;
}

const char *config_host_dev_root(const struct devlet_config *cfg)
{
        return cfg->dev_root_is_driver_root ? "/" : cfg->dev_root;
}
