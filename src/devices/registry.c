/* The table of device backends, in start-up order.  Adding a device family
 * means adding its folder under devices/ and one line here; nothing else in
 * devlet names a backend. */
#include "base/xalloc.h"
#include "devices/device.h"
#include "devices/amd/amd.h"
#include "devices/hostdev/hostdev.h"
#include "devices/nvidia/nvidia.h"

const struct dev_backend_ops *const dev_backends[] = {
        &nvidia_backend_ops,
        &amd_backend_ops,
        &hostdev_backend_ops,
        NULL,
};

bool dev_backend_wanted(const struct devlet_config *cfg, const char *name)
{
        return !cfg->backends || !cfg->backends[0] || strv_contains(cfg->backends, "auto") ||
               strv_contains(cfg->backends, name);
}
