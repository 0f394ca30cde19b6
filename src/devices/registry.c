/* The table of device backends, in start-up order.
 *
 * Adding a device family means adding its folder under devices/ (which
 * defines `const struct dev_backend_ops <family>_backend_ops`, named
 * "<family>") and one line in DEV_BACKEND_TABLE; nothing else in devlet
 * names a backend.  The same line gives config/ the --backends choices
 * (config_backend_choices, declared in config/config.h), so config/ knows
 * the backends without including devices/; a family with a section of its
 * own in the config file lists it in config_backend_sections. */
#include "base/xalloc.h"
#include "devices/device.h"

#define DEV_BACKEND_TABLE(X) \
        X(nvidia)            \
        X(amd)               \
        X(hostdev)

#define DECLARE(family) extern const struct dev_backend_ops family##_backend_ops;
#define OPS(family) &family##_backend_ops,
#define NAME(family) #family,

DEV_BACKEND_TABLE(DECLARE)

const struct dev_backend_ops *const dev_backends[] = { DEV_BACKEND_TABLE(OPS) NULL };

const char *const config_backend_choices[] = { "auto", DEV_BACKEND_TABLE(NAME) NULL };

/* A family whose config file has a section of its own (struct
 * config_section in config/sections.h) also lists it here. */
const struct config_section *const config_backend_sections[] = { NULL };

bool dev_backend_wanted(const struct devlet_config *cfg, const char *name)
{
        return !cfg->backends || !cfg->backends[0] || strv_contains(cfg->backends, "auto") ||
               strv_contains(cfg->backends, name);
}
