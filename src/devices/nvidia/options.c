/* The flags of NVIDIA's device plugin that only NVIDIA GPUs mean (MIG
 * strategy, driver root, device IDs, GDS/MOFED/gdrcopy, the CDI hook), its
 * v0.20's newer flags and GFD v0.20's Kubernetes-client flags, with their
 * env vars and config-file keys, so that NVIDIA's
 * DaemonSet args, Helm env and ConfigMaps load unchanged: a backend option
 * set config/ loads like its own rows, whose values live in struct
 * nvidia_options (nvidia_options_get()).  What they mean for devlet is
 * decided by the set's finish hook once every source has been applied:
 *
 *   --device-discovery-strategy  auto and nvml are NVML; tegra and vfio are
 *                       refused (devlet has neither discovery)
 *   --imex-channel-ids  [] or [0], as NVIDIA checks; [0] adds channel0
 *   --cdi-disable-hooks which hooks the CDI specs leave out
 *   --cdi-feature-flags flags devlet's specs already satisfy are quiet,
 *                       others get one warning each
 *   MPS                 needs --mps-root and is refused with mig-strategy
 *                       mixed, as NVIDIA's
 *
 * Problems are -EINVAL with diag set (start-up exits 2); warnings join
 * the config's.  Never logs, never touches the filesystem. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/nvidia/internal.h"

#define NVIDIA_DOMAIN "nvidia.com"

static const char *const discovery_strategy_choices[] = { "auto", "nvml", "tegra", "vfio", NULL };
static const char *const mig_strategy_choices[] = { "none", "single", "mixed", NULL };
static const char *const device_id_strategy_choices[] = { "uuid", "index", NULL };

#define FIELD(f) offsetof(struct nvidia_options, f)

static const struct config_option rows[] = {
        {
                .flag = "mig-strategy",
                .envs = { "MIG_STRATEGY", "GFD_MIG_STRATEGY" },
                .key = "flags.migStrategy",
                .type = CONFIG_STRING,
                .default_value = "none",
                .offset = FIELD(mig_strategy),
                .choices = mig_strategy_choices,
                .help = "How MIG devices are exposed",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "nvidia-driver-root",
                .alias = "driver-root",
                .envs = { "NVIDIA_DRIVER_ROOT" },
                .key = "flags.nvidiaDriverRoot",
                .type = CONFIG_STRING,
                .default_value = "/",
                .offset = FIELD(driver_root),
                .help = "Root of the NVIDIA driver installation on the host",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "device-id-strategy",
                .envs = { "DEVICE_ID_STRATEGY" },
                .key = "flags.plugin.deviceIDStrategy",
                .type = CONFIG_STRING,
                .default_value = "uuid",
                .offset = FIELD(device_id_strategy),
                .choices = device_id_strategy_choices,
                .help = "How GPUs are named to the container runtime",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "gds-enabled",
                .envs = { "GDS_ENABLED" },
                .key = "flags.gdsEnabled",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(gds_enabled),
                .help = "Give containers the GPUDirect Storage devices",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "mofed-enabled",
                .envs = { "MOFED_ENABLED" },
                .key = "flags.mofedEnabled",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(mofed_enabled),
                .help = "Give containers the Mellanox OFED devices",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "gdrcopy-enabled",
                .envs = { "GDRCOPY_ENABLED" },
                .key = "flags.gdrcopyEnabled",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(gdrcopy_enabled),
                .help = "Give containers the gdrcopy device",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "nvidia-cdi-hook-path",
                .alias = "nvidia-ctk-path",
                .envs = { "NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH" },
                .key = "flags.plugin.nvidiaCTKPath",
                .type = CONFIG_STRING,
                .default_value = "/usr/bin/nvidia-ctk",
                .offset = FIELD(cdi_hook_path),
                .help = "Host path of the hook program named in generated CDI specs",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "driver-root-ctr-path",
                .alias = "container-driver-root",
                .envs = { "DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT" },
                .key = "flags.plugin.containerDriverRoot",
                .type = CONFIG_STRING,
                .default_value = "/driver-root",
                .offset = FIELD(container_driver_root),
                .help = "Where the driver root is mounted in devlet's container",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "mps-root",
                .envs = { "MPS_ROOT" },
                .key = "flags.mpsRoot",
                .type = CONFIG_STRING,
                .default_value = "/run/nvidia/mps",
                .offset = FIELD(mps_root),
                .help = "Host directory of the MPS control daemons' pipe, log and shm directories "
                        "(one subdirectory per MPS resource)",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "device-discovery-strategy",
                .envs = { "DEVICE_DISCOVERY_STRATEGY" },
                .key = "flags.deviceDiscoveryStrategy",
                .type = CONFIG_STRING,
                .default_value = "auto",
                .offset = FIELD(device_discovery_strategy),
                .choices = discovery_strategy_choices,
                .help = "How GPUs are found: auto or nvml (both NVML; tegra and vfio are refused: "
                        "devlet has no Tegra/CSV or VFIO discovery)",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "imex-channel-ids",
                .envs = { "IMEX_CHANNEL_IDS" },
                .key = "imex.channelIDs",
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = FIELD(imex_channel_ids),
                .help = "IMEX channels given to every container that gets a GPU: empty or 0 "
                        "(/dev/nvidia-caps-imex-channels/channel0)",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "nvidia-dra-no-execute",
                .envs = { "DEVLET_NVIDIA_DRA_NO_EXECUTE" },
                .key = "flags.nvidiaDraNoExecute",
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = FIELD(dra_no_execute),
                .help = "GPU failures whose DRA taint is NoExecute (the pods holding the GPU "
                        "are evicted) rather than NoSchedule: XID numbers, gpu-lost, or all",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "imex-required",
                .envs = { "IMEX_REQUIRED" },
                .key = "imex.required",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(imex_required),
                .help = "The IMEX channels must exist: start-up fails without them (false: a missing "
                        "channel is left out)",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "cdi-feature-flags",
                .envs = { "CDI_FEATURE_FLAGS" },
                .key = "flags.plugin.cdiFeatureFlags",
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = FIELD(cdi_feature_flags),
                .help = "nvidia-ctk's CDI feature flags, comma-separated (devlet's specs already list "
                        "the driver's libraries explicitly and never use nvsandboxutils; others are "
                        "warned about)",
                .apply = CONFIG_APPLY_NONE,
        },
        {
                .flag = "cdi-disable-hooks",
                .envs = { "CDI_DISABLE_HOOKS" },
                .key = "flags.plugin.cdiDisableHooks",
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = FIELD(cdi_disable_hooks),
                .help = "CDI hooks left out of the specs devlet writes, comma-separated "
                        "(update-ldcache, create-symlinks, enable-cuda-compat, chmod, or all)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
};

static void warn(char ***warnings, char *msg)
{
        *warnings = strv_push(*warnings, msg);
        free(msg);
}

static bool listed(const char *const *v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

static int check_imex(struct nvidia_options *o, struct diag *diag)
{
        char **ids = o->imex_channel_ids;
        size_t n = strv_len(ids);
        o->imex_channel0 = false;
        if (n == 0)
                return 0;
        if (n == 1 && strcmp(ids[0], "0") == 0) {
                o->imex_channel0 = true;
                return 0;
        }
        char found[128] = "";
        for (size_t i = 0; i < n; i++)
                snprintf(found + strlen(found), sizeof(found) - strlen(found), "%s%.20s",
                         i ? " " : "", ids[i]);
        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                           "invalid IMEX channel IDs: channelIDs must be [] or [0]; found "
                           "[%s]",
                           found);
}

static int check_no_execute(const struct nvidia_options *o, struct diag *diag)
{
        for (size_t i = 0; o->dra_no_execute && o->dra_no_execute[i]; i++) {
                const char *s = o->dra_no_execute[i];
                char *end = NULL;
                unsigned long xid = strtoul(s, &end, 10);
                bool number = s[0] >= '0' && s[0] <= '9' && !*end && xid > 0 && xid < 1000000;
                if (!number && strcmp(s, "gpu-lost") != 0 && strcmp(s, "all") != 0)
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                           "invalid --nvidia-dra-no-execute entry \"%.32s\": an "
                                           "XID number, gpu-lost or all",
                                           s);
        }
        return 0;
}

static void check_cdi(struct nvidia_options *o, char ***warnings)
{
        static const char *const hooks[] = { "update-ldcache", "create-symlinks",
                                             "enable-cuda-compat", "chmod",
                                             "disable-device-node-modification", "all", NULL };
        /* satisfied by every spec devlet writes: the libraries are listed
         * explicitly, and nvsandboxutils is never used */
        static const char *const satisfied[] = { "enable-explicit-driver-libraries",
                                                 "disable-nvsandbox-utils",
                                                 "disable-nvsandboxutils", NULL };
        char **dis = o->cdi_disable_hooks;
        o->cdi_hook_ldcache = !strv_contains(dis, "update-ldcache") && !strv_contains(dis, "all");
        for (size_t i = 0; dis && dis[i]; i++)
                if (!listed(hooks, dis[i]))
                        warn(warnings, xasprintf("--cdi-disable-hooks: unknown hook \"%s\" "
                                                 "(devlet's CDI specs only ever hold "
                                                 "update-ldcache)",
                                                 dis[i]));
        for (size_t i = 0; o->cdi_feature_flags && o->cdi_feature_flags[i]; i++)
                if (!listed(satisfied, o->cdi_feature_flags[i]))
                        warn(warnings, xasprintf("--cdi-feature-flags: \"%s\" has no effect "
                                                 "on the CDI specs devlet writes (ignored)",
                                                 o->cdi_feature_flags[i]));
}

static int finish(const struct devlet_config *cfg, void *values, char ***warnings,
                  struct diag *diag)
{
        struct nvidia_options *o = values;
        const char *dds = o->device_discovery_strategy;
        if (strcmp(dds, "tegra") == 0 || strcmp(dds, "vfio") == 0)
                return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                   "--device-discovery-strategy=%s is not supported: devlet "
                                   "finds GPUs through NVML only (use auto or nvml)",
                                   dds);
        int r = check_imex(o, diag);
        if (r == 0)
                r = check_no_execute(o, diag);
        if (r < 0)
                return r;
        if (cfg->sharing.strategy == SHARING_MPS) {
                if (strcmp(o->mig_strategy, "mixed") == 0)
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                           "using --mig-strategy=mixed is not supported "
                                           "with MPS");
                if (!o->mps_root[0])
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                           "using MPS requires --mps-root to be specified");
        }
        check_cdi(o, warnings);
        return 0;
}

const struct config_option_set nvidia_config_options = {
        .options = rows,
        .n_options = ARRAY_SIZE(rows),
        .size = sizeof(struct nvidia_options),
        .finish = finish,
};

/* ---- the sharing section: NVIDIA's names and device references ---- */

#define UUID_LEN 36     /* 8-4-4-4-12 hex digits */
#define INDEX_MAX 1023  /* GPU and MIG indices in a devices list */

static bool is_uuid(const char *s, size_t len)
{
        if (len != UUID_LEN)
                return false;
        for (size_t i = 0; i < len; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
                        return false;
        }
        return true;
}

/* Decimal digits only, at most INDEX_MAX. */
static bool parse_index(const char *s, size_t len, unsigned *out)
{
        if (len == 0)
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < len; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return false;
                v = v * 10 + (unsigned)(s[i] - '0');
                if (v > INDEX_MAX)
                        return false;
        }
        *out = v;
        return true;
}

enum device_ref { DEVICE_REF_BAD, DEVICE_REF_GPU, DEVICE_REF_MIG };

/* Classifies a devices-list entry and gives its canonical form: indices in
 * plain decimal, UUID hex digits in lower case (as NVML reports them).
 * Forms: "3", "3:1" (GPU 3's MIG device 1), "GPU-<uuid>", "MIG-<uuid>" and
 * the older "MIG-GPU-<uuid>/<gi>/<ci>". */
static enum device_ref device_ref(const char *s, char **canon)
{
        size_t len = strlen(s);
        const char *colon = strchr(s, ':');
        unsigned a, b;
        if (!colon && parse_index(s, len, &a)) {
                *canon = xasprintf("%u", a);
                return DEVICE_REF_GPU;
        }
        if (colon && parse_index(s, (size_t)(colon - s), &a) &&
            parse_index(colon + 1, strlen(colon + 1), &b)) {
                *canon = xasprintf("%u:%u", a, b);
                return DEVICE_REF_MIG;
        }
        enum device_ref kind = DEVICE_REF_BAD;
        size_t hex = 4; /* where the UUID starts */
        if (strncmp(s, "GPU-", 4) == 0 && is_uuid(s + 4, len - 4)) {
                kind = DEVICE_REF_GPU;
                *canon = xstrdup(s);
        } else if (strncmp(s, "MIG-", 4) == 0 && is_uuid(s + 4, len - 4)) {
                kind = DEVICE_REF_MIG;
                *canon = xstrdup(s);
        } else if (strncmp(s, "MIG-GPU-", 8) == 0 && len > 8 + UUID_LEN &&
                   is_uuid(s + 8, UUID_LEN) && s[8 + UUID_LEN] == '/') {
                const char *gi = s + 8 + UUID_LEN + 1;
                const char *slash = strchr(gi, '/');
                if (slash && parse_index(gi, (size_t)(slash - gi), &a) &&
                    parse_index(slash + 1, strlen(slash + 1), &b)) {
                        kind = DEVICE_REF_MIG;
                        hex = 8;
                        *canon = xasprintf("%.*s/%u/%u", 8 + UUID_LEN, s, a, b);
                }
        }
        if (kind != DEVICE_REF_BAD)
                for (size_t i = hex; i < hex + UUID_LEN; i++)
                        (*canon)[i] = (char)tolower((unsigned char)(*canon)[i]);
        return kind;
}

static int sharing_device(const char *ref, enum sharing_strategy strategy, char **canon,
                          struct diag *diag)
{
        _cleanup_free_ char *c = NULL;
        enum device_ref kind = device_ref(ref, &c);
        if (kind == DEVICE_REF_BAD)
                return diag_set(diag, -EINVAL,
                                "\"%.100s\" is not a GPU index (\"0\"), a MIG index (\"0:1\"), "
                                "both below %d, or a GPU or MIG UUID (\"GPU-<uuid>\", "
                                "\"MIG-<uuid>\")", ref, INDEX_MAX + 1);
        if (kind == DEVICE_REF_MIG && strategy == SHARING_MPS)
                return diag_set(diag, -EINVAL,
                                "\"%.100s\" is a MIG device: MPS shares full GPUs only", ref);
        *canon = TAKE_PTR(c);
        return 0;
}

/* MPS shares full GPUs: no MIG resource, by its default name or by the
 * resources section's. */
static int sharing_refuse(const char *name, enum sharing_strategy strategy,
                          const struct devlet_config *next, struct diag *diag)
{
        bool mig = strncmp(name, NVIDIA_DOMAIN "/mig-", strlen(NVIDIA_DOMAIN "/mig-")) == 0;
        const struct resources_cfg *res = nvidia_resources_get(next);
        for (size_t i = 0; i < res->n_mig_resources; i++)
                mig |= strcmp(res->mig_resources[i].name, name) == 0;
        if (strategy != SHARING_MPS || !mig)
                return 0;
        return diag_set(diag, -EINVAL, "\"%s\" is a MIG resource: MPS shares full GPUs only", name);
}

static const struct config_sharing_rules sharing_rules = {
        .domain = NVIDIA_DOMAIN,
        .bare_names = true,
        .valid_name = config_valid_dns_subdomain,
        .name_rule = "at most 63 lowercase letters, digits, '-' or '.' after \"" NVIDIA_DOMAIN
                     "/\", starting and ending with a letter or digit",
        .device = sharing_device,
        .refuse = sharing_refuse,
};

const struct config_family nvidia_config_family = {
        .name = "nvidia",
        .options = &nvidia_config_options,
        .section = &nvidia_resources_section,
        .sharing = &sharing_rules,
};

const struct nvidia_options *nvidia_options_get(const struct devlet_config *cfg)
{
        return config_backend_options(cfg, &nvidia_config_options);
}

const char *nvidia_dev_root(const struct devlet_config *cfg)
{
        return cfg->dev_root[0] ? cfg->dev_root : nvidia_options_get(cfg)->driver_root;
}
