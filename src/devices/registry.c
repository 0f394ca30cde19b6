/* The table of device backends, in start-up order.
 *
 * Adding a device family means adding its folder under devices/ (which
 * defines `const struct dev_backend_ops <family>_backend_ops`, named
 * "<family>") and one line in DEV_BACKEND_TABLE; nothing else in devlet
 * names a backend.  The same line gives config/ the --backends choices
 * (config_backend_choices, declared in config/config.h) and the family's
 * command-line options (config_backend_option_sets: the set
 * `<family>_config_options` its folder defines), so config/ knows the
 * backends without including devices/; a family with a section of its own
 * in the config file lists it in config_backend_sections. */
#include "base/xalloc.h"
#include "devices/device.h"

#define DEV_BACKEND_TABLE(X) \
        X(nvidia)            \
        X(amd)               \
        X(hostdev)

#define DECLARE(family)                                          \
        extern const struct dev_backend_ops family##_backend_ops; \
        extern const struct config_option_set family##_config_options;
#define OPS(family) &family##_backend_ops,
#define NAME(family) #family,
#define OPTIONS(family) &family##_config_options,

DEV_BACKEND_TABLE(DECLARE)

const struct dev_backend_ops *const dev_backends[] = { DEV_BACKEND_TABLE(OPS) NULL };

const char *const config_backend_choices[] = { "auto", DEV_BACKEND_TABLE(NAME) NULL };

/* Every family's command-line options (`<family>_config_options`, a
 * struct config_option_set in config/config.h; a family without options
 * defines an empty one), in table order: the --help order. */
const struct config_option_set *const config_backend_option_sets[] = {
        DEV_BACKEND_TABLE(OPTIONS) NULL
};

/* A family whose config file has a section of its own (struct
 * config_section in config/sections.h) also lists it here. */
const struct config_section *const config_backend_sections[] = { NULL };

bool dev_backend_wanted(const struct devlet_config *cfg, const char *name)
{
        return !cfg->backends || !cfg->backends[0] || strv_contains(cfg->backends, "auto") ||
               strv_contains(cfg->backends, name);
}
