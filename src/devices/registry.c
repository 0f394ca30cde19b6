/* The table of device backends, in start-up order.
 *
 * Adding a device family means adding its folder under devices/ and one
 * line in DEV_BACKEND_TABLE; nothing else in devlet names a family.  The
 * folder defines `const struct dev_backend_ops <family>_backend_ops`,
 * named "<family>", and `const struct config_family <family>_config_family`
 * (config/config.h): what config/ is to know of it, its option rows, its
 * config-file section and its sharing rules.  From the same line this file
 * builds the backend list (dev_backends) and the table of families that
 * the callers hand config_load (dev_config_families): --backends' choices
 * and each family's config_family, so config/ knows the families without
 * including devices/. */
#include "base/xalloc.h"
#include "devices/device.h"

#define DEV_BACKEND_TABLE(X) \
        X(nvidia)            \
        X(amd)               \
        X(hostdev)

#define DECLARE(family)                                          \
        extern const struct dev_backend_ops family##_backend_ops; \
        extern const struct config_family family##_config_family;
#define OPS(family) &family##_backend_ops,
#define NAME(family) #family,
#define FAMILY(family) &family##_config_family,

DEV_BACKEND_TABLE(DECLARE)

const struct dev_backend_ops *const dev_backends[] = { DEV_BACKEND_TABLE(OPS) NULL };

static const char *const choices[] = { "auto", DEV_BACKEND_TABLE(NAME) NULL };
static const struct config_family *const families[] = { DEV_BACKEND_TABLE(FAMILY) NULL };
static const struct config_families table = { .choices = choices, .v = families };

const struct config_families *dev_config_families(void)
{
        return &table;
}

bool dev_backend_wanted(const struct devlet_config *cfg, const char *name)
{
        return !cfg->backends || !cfg->backends[0] || strv_contains(cfg->backends, "auto") ||
               strv_contains(cfg->backends, name);
}
