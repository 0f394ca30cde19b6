/* The AMD family's command-line options (AMD's device plugin flags), a
 * backend option set config/ loads like its own rows: flag, AMD's spelling
 * (-resource_naming_strategy, -pulse, taken with one dash as Go's flag
 * package does), env var, config key, default, choices.  The values live
 * in struct amd_options, which the backend reads with amd_options_get().
 * AMD's node labeller's flags (-vram, -cu-count, ...) select its label
 * groups (amd_label_selected); with none given every group is written.
 * AMD's exporter's config.json (--amd-metrics-config) is read by the set's
 * load hook, the one I/O here; no finish hook. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/exporter-config.h"
#include "devices/amd/internal.h"

static const char *const naming_strategy_choices[] = { "single", "mixed", NULL };
static const char *const health_check_choices[] = { "gone", "kfd", "ras", "unresponsive", "all",
                                                    NULL };

#define FIELD(f) offsetof(struct amd_options, f)

static const struct config_option rows[] = {
        {
                .flag = "resource-naming-strategy",
                .alias = "resource_naming_strategy",
                .envs = { "RESOURCE_NAMING_STRATEGY" },
                .key = "flags.amd.resourceNamingStrategy",
                .type = CONFIG_STRING,
                .default_value = "single",
                .offset = FIELD(resource_naming_strategy),
                .choices = naming_strategy_choices,
                .help = "AMD GPUs: single serves amd.com/gpu; mixed serves partitions as "
                        "amd.com/<compute>_<memory> (amd.com/cpx_nps4)",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-health-interval",
                .alias = "pulse",
                .envs = { "DEVLET_AMD_HEALTH_INTERVAL" },
                .key = "flags.amd.healthInterval",
                .key_alias = "health.amd.interval",
                .type = CONFIG_DURATION,
                .default_value = "5s",
                .offset = FIELD(health_interval_ms),
                .help = "How often AMD GPU health is polled from sysfs (0: never; --pulse is "
                        "AMD's name, in seconds)",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "amd-disable-healthchecks",
                .envs = { "AMD_DISABLE_HEALTHCHECKS" },
                .key = "health.amd.disabled",
                .key_alias = "flags.amd.disableHealthChecks",
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = FIELD(health_disabled),
                .choices = health_check_choices,
                .help = "AMD GPU health checks left unjudged: gone (the GPU left sysfs), kfd "
                        "(its KFD node), ras (uncorrectable RAS errors), unresponsive (sysfs "
                        "reads fail or stall), all.  NVIDIA's DP_DISABLE_HEALTHCHECKS does "
                        "not turn these off",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "amd-dra-no-execute",
                .envs = { "DEVLET_AMD_DRA_NO_EXECUTE" },
                .key = "flags.amd.draNoExecute",
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = FIELD(dra_no_execute),
                .choices = health_check_choices,
                .help = "AMD GPU failures whose DRA taint is NoExecute (the pods holding the "
                        "GPU are evicted) rather than NoSchedule: gone, kfd, ras, unresponsive, "
                        "all",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "amd-device-count",
                .envs = { "AMD_GPU_DEVICE_COUNT" },
                .key = "flags.amd.deviceCount",
                .type = CONFIG_INT,
                .default_value = "0",
                .offset = FIELD(device_count),
                .min = 0,
                .max = 1024,
                .help = "Serve only the first N AMD GPUs in PCI order, with their partitions, "
                        "leaving the rest to workloads outside Kubernetes (0: every GPU); "
                        "metrics still cover every GPU",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-family",
                .alias = "family",
                .key = "flags.amd.labels.family",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_family),
                .help = "AMD's node labeller's -family: the amd.com/gpu.family labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-device-id",
                .alias = "device-id",
                .key = "flags.amd.labels.deviceId",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_device_id),
                .help = "AMD's node labeller's -device-id: the amd.com/gpu.device-id labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-product-name",
                .alias = "product-name",
                .key = "flags.amd.labels.productName",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_product_name),
                .help = "AMD's node labeller's -product-name: the amd.com/gpu.product-name labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-vram",
                .alias = "vram",
                .key = "flags.amd.labels.vram",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_vram),
                .help = "AMD's node labeller's -vram: the amd.com/gpu.vram labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-simd-count",
                .alias = "simd-count",
                .key = "flags.amd.labels.simdCount",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_simd_count),
                .help = "AMD's node labeller's -simd-count: the amd.com/gpu.simd-count labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-cu-count",
                .alias = "cu-count",
                .key = "flags.amd.labels.cuCount",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_cu_count),
                .help = "AMD's node labeller's -cu-count: the amd.com/gpu.cu-count labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-driver-version",
                .alias = "driver-version",
                .key = "flags.amd.labels.driverVersion",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_driver_version),
                .help = "AMD's node labeller's -driver-version: the amd.com/gpu.driver-version labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-driver-src-version",
                .alias = "driver-src-version",
                .key = "flags.amd.labels.driverSrcVersion",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_driver_src_version),
                .help = "AMD's node labeller's -driver-src-version: the amd.com/gpu.driver-src-version labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-compute-memory-partition",
                .alias = "compute-memory-partition",
                .key = "flags.amd.labels.computeMemoryPartition",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_compute_memory_partition),
                .help = "AMD's node labeller's -compute-memory-partition: the amd.com/gpu.compute-memory-partition labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-compute-partitioning-supported",
                .alias = "compute-partitioning-supported",
                .key = "flags.amd.labels.computePartitioningSupported",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_compute_partitioning_supported),
                .help = "AMD's node labeller's -compute-partitioning-supported: the amd.com/gpu.compute-partitioning-supported labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-memory-partitioning-supported",
                .alias = "memory-partitioning-supported",
                .key = "flags.amd.labels.memoryPartitioningSupported",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_memory_partitioning_supported),
                .help = "AMD's node labeller's -memory-partitioning-supported: the amd.com/gpu.memory-partitioning-supported labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-label-firmware",
                .alias = "firmware",
                .key = "flags.amd.labels.firmware",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(label_firmware),
                .help = "AMD's node labeller's -firmware: the beta.amd.com/gpu.firmware labels (no -<group> flag given: every group)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "amd-metrics-config",
                .envs = { "DEVLET_AMD_METRICS_CONFIG" },
                .key = "flags.amd.metricsConfig",
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(metrics_config),
                .help = "AMD's device metrics exporter's config.json (its -amd-metrics-config): "
                        "GPUConfig's Fields, Labels and CustomLabels and CommonConfig's "
                        "MetricsFieldPrefix shape the AMD families; re-read when it changes (a "
                        "ConfigMap's ..data swap too); a missing file is AMD's defaults; empty: "
                        "none",
                .apply = CONFIG_APPLY_METRICS,
                .loaded = FIELD(metrics_config_text),
        },
};

/* Reads --amd-metrics-config, so a broken file is a config error at its
 * file:line:column (exit 2 at start-up, the running config kept on a
 * reload); the sampler parses the text it keeps again. */
static int options_load(const struct devlet_config *cfg, void *values, char ***warnings,
                        struct diag *diag)
{
        (void)cfg;
        struct amd_options *o = values;
        if (!o->metrics_config || !o->metrics_config[0])
                return 0;
        _cleanup_free_ char *text = NULL;
        struct amd_exporter_config *ec = NULL;
        int r = amd_exporter_config_load(o->metrics_config, &text, &ec, warnings, diag);
        if (r < 0)
                return r;
        amd_exporter_config_free(ec);
        if (text)
                o->metrics_config_text = strv_push(NULL, text);
        else
                *warnings = strv_push(*warnings, "--amd-metrics-config: the file is not there; AMD's "
                                                 "defaults until it is");
        return 0;
}

const struct config_option_set amd_config_options = {
        .options = rows,
        .n_options = ARRAY_SIZE(rows),
        .size = sizeof(struct amd_options),
        .load = options_load,
};

/* ---- the sharing section: AMD's devices ---- */

#define INDEX_MAX 1023
#define AMD_XCP_PREFIX "amdgpu_xcp_"

/* "0000:0c:00.0": domain, bus, device and function in hex. */
static bool is_pci_address(const char *s)
{
        static const char shape[] = "xxxx:xx:xx.x";
        if (strlen(s) != sizeof(shape) - 1)
                return false;
        for (size_t i = 0; shape[i]; i++)
                if (shape[i] == 'x' ? !isxdigit((unsigned char)s[i]) : s[i] != shape[i])
                        return false;
        return s[11] <= '7';
}

/* "amdgpu_xcp_<N>": a partition past a GPU's own node. */
static bool is_partition_id(const char *s)
{
        const char *n = s + strlen(AMD_XCP_PREFIX);
        if (strncmp(s, AMD_XCP_PREFIX, strlen(AMD_XCP_PREFIX)) != 0 || !*n || strlen(n) > 9)
                return false;
        for (; *n; n++)
                if (!isdigit((unsigned char)*n))
                        return false;
        return true;
}

/* An index into the resource's devices in order, or a device ID as AMD's
 * plugin advertises it (the GPU's PCI address, a partition's ID). */
static int sharing_device(const char *ref, enum sharing_strategy strategy, char **canon,
                          struct diag *diag)
{
        char *end;
        unsigned long v = strtoul(ref, &end, 10);
        if (isdigit((unsigned char)ref[0]) && !*end && v <= INDEX_MAX) {
                *canon = xasprintf("%lu", v);
                return 0;
        }
        if (is_pci_address(ref) || is_partition_id(ref)) {
                *canon = xstrdup(ref);
                for (char *c = *canon; *c; c++)
                        *c = (char)tolower((unsigned char)*c);
                return 0;
        }
        return diag_set(diag, -EINVAL,
                        "\"%.100s\" is not a device index (\"0\", below %d), a PCI address "
                        "(\"0000:0c:00.0\") or a partition ID (\"" AMD_XCP_PREFIX "1\")", ref,
                        INDEX_MAX + 1);
}

static const struct config_sharing_rules sharing_rules = {
        .domain = AMD_DOMAIN,
        .device = sharing_device,
};

const struct config_family amd_config_family = {
        .name = "amd",
        .options = &amd_config_options,
        .sharing = &sharing_rules,
};

bool amd_label_selected(const struct amd_options *o, const char *key)
{
        static const struct {
                const char *name;
                size_t offset;
        } groups[] = {
#define AMD_LABEL_ROW(g) { #g, offsetof(struct amd_options, label_##g) },
                AMD_LABEL_GROUPS(AMD_LABEL_ROW)
#undef AMD_LABEL_ROW
        };
        bool any = false;
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                any |= *(const bool *)((const char *)o + groups[i].offset);
        if (!any)
                return true;
        const char *rest = NULL;
        if (strncmp(key, "amd.com/gpu.", 12) == 0)
                rest = key + 12;
        else if (strncmp(key, "beta.amd.com/gpu.", 17) == 0)
                rest = key + 17;
        if (!rest)
                return true;
        size_t len = strcspn(rest, ".");
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++) {
                const char *g = groups[i].name;
                if (strlen(g) != len)
                        continue;
                bool same = true; /* "device_id" names the labels' "device-id" */
                for (size_t k = 0; k < len && same; k++)
                        same = g[k] == rest[k] || (g[k] == '_' && rest[k] == '-');
                if (same)
                        return *(const bool *)((const char *)o + groups[i].offset);
        }
        return true;
}

const struct amd_options *amd_options_get(const struct devlet_config *cfg)
{
        return config_backend_options(cfg, &amd_config_options);
}
