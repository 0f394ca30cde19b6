/* PCI facts from sysfs that are no family's own (devices/pci.h). */
#include "devices/pci.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool dev_pci_bdf_valid(const char *bdf)
{
        static const char shape[] = "hhhh:hh:hh.h";
        if (!bdf || strlen(bdf) != sizeof(shape) - 1)
                return false;
        for (size_t i = 0; shape[i]; i++) {
                char c = bdf[i];
                bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                if (shape[i] == 'h' ? !hex : c != shape[i])
                        return false;
        }
        return true;
}

/* Removes "." and "name/.." components of an absolute path, in place. */
static void path_clean(char *p)
{
        char *out = p;
        const char *in = p;
        while (*in) {
                while (*in == '/')
                        in++;
                const char *end = strchrnul(in, '/');
                size_t len = (size_t)(end - in);
                if (len == 0 || (len == 1 && in[0] == '.')) {
                        /* nothing */
                } else if (len == 2 && in[0] == '.' && in[1] == '.') {
                        while (out > p && *--out != '/')
                                ;
                } else {
                        *out++ = '/';
                        memmove(out, in, len);
                        out += len;
                }
                in = end;
        }
        if (out == p)
                *out++ = '/';
        *out = '\0';
}

int dev_pci_root(const char *sysfs_root, const char *bdf, char *out, size_t size)
{
        if (!dev_pci_bdf_valid(bdf))
                return -EINVAL;
        char link[PATH_MAX], target[PATH_MAX], path[2 * PATH_MAX + 2], devices[PATH_MAX + 16];
        int n = snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", sysfs_root, bdf);
        if (n < 0 || (size_t)n >= sizeof(link))
                return -ENAMETOOLONG;
        ssize_t len = readlink(link, target, sizeof(target) - 1);
        if (len < 0)
                return -errno;
        target[len] = '\0';
        if (target[0] == '/')
                snprintf(path, sizeof(path), "%s", target);
        else
                snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs_root, target);
        snprintf(devices, sizeof(devices), "/%s/devices/", sysfs_root);
        path_clean(path);
        path_clean(devices);
        size_t dl = strlen(devices); /* path_clean dropped the trailing slash */
        devices[dl++] = '/';
        devices[dl] = '\0';
        const char *slash = strrchr(path, '/');
        if (strncmp(path, devices, dl) != 0 || strncmp(path + dl, "pci", 3) != 0 ||
            strcmp(slash + 1, bdf) != 0)
                return -EINVAL;
        const char *root = path + dl;
        size_t rl = strcspn(root, "/");
        if (root[rl] != '/')
                return -EINVAL; /* the device itself is not below a root complex */
        if (rl >= size)
                return -ENAMETOOLONG;
        memcpy(out, root, rl);
        out[rl] = '\0';
        return 0;
}
