/* Internal to devices/hostdev/: one look at the host for one configured
 * device (struct hostdev_device_cfg), without any state between looks. */
#ifndef DEVLET_DEVICES_HOSTDEV_SCAN_H
#define DEVLET_DEVICES_HOSTDEV_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "devices/device.h"

/* Where the host's trees are: no trailing slash, "" for "/". */
struct hostdev_env {
        char *sysfs_root;
        char *dev_root;
};

/* One instance a scan saw. */
struct hostdev_found {
        char *identity; /* what makes it the same instance across scans */
        char *key;      /* preferred ID stem (sanitized) */
        unsigned count; /* IDs: key if 1, else key-0 .. key-(count-1) */
        struct dev_device spec; /* health, numa_node, nodes, mounts; id unused */
        /* its DRA attributes as the scan sees them (path, major, minor, USB
         * IDs); name "" (hostdev.c names it) */
        struct dev_model *model;
};

struct hostdev_scan {
        struct hostdev_found *v;
        size_t n, cap;
};

/* Appends every instance dev has now to out.  Never fails: what is missing
 * makes fewer instances or unhealthy ones. */
void hostdev_scan_device(const struct hostdev_env *env, const struct hostdev_device_cfg *dev,
                         struct hostdev_scan *out);
void hostdev_scan_release(struct hostdev_scan *s);

/* Frees a device's nodes and mounts (not its id). */
void hostdev_spec_clear(struct dev_device *d);

bool hostdev_has_glob(const char *s);

#endif
