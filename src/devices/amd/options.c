/* The AMD family's command-line options (AMD's device plugin flags), a
 * backend option set config/ loads like its own rows: flag, AMD's spelling
 * (-resource_naming_strategy, -pulse, taken with one dash as Go's flag
 * package does), env var, config key, default, choices.  The values live
 * in struct amd_options, which the backend reads with amd_options_get().
 * Only rows and storage: no finish hook, no I/O. */
#include <stddef.h>

#include "base/cleanup.h"
#include "devices/amd/internal.h"

static const char *const naming_strategy_choices[] = { "single", "mixed", NULL };

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
        },
        {
                .flag = "amd-health-interval",
                .alias = "pulse",
                .envs = { "DEVLET_AMD_HEALTH_INTERVAL" },
                .key = "flags.amd.healthInterval",
                .type = CONFIG_DURATION,
                .default_value = "5s",
                .offset = FIELD(health_interval_ms),
                .help = "How often AMD GPU health is polled from sysfs (0: never; --pulse is "
                        "AMD's name, in seconds)",
        },
};

const struct config_option_set amd_config_options = {
        .options = rows,
        .n_options = ARRAY_SIZE(rows),
        .size = sizeof(struct amd_options),
};

const struct config_family amd_config_family = {
        .name = "amd",
        .options = &amd_config_options,
};

const struct amd_options *amd_options_get(const struct devlet_config *cfg)
{
        return config_backend_options(cfg, &amd_config_options);
}
