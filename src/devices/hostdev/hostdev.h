/* Host devices from the config file's hostDevices section: /dev paths and
 * globs, bind mounts, USB devices matched in sysfs; hot-plug aware. */
#ifndef DEVLET_DEVICES_HOSTDEV_HOSTDEV_H
#define DEVLET_DEVICES_HOSTDEV_HOSTDEV_H

#include "devices/device.h"

extern const struct dev_backend_ops hostdev_backend_ops;

#endif
