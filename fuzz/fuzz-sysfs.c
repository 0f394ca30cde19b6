/* libFuzzer target: the readers of host files devlet does not write.
 *
 * Fields of the input, separated by NUL bytes, become a fake sysfs USB
 * device's idVendor, idProduct, serial, busnum and devnum (two devices, the
 * second a copy with the serial reversed, so shared serials and port
 * fall-backs happen), scanned by the host-device backend's scan with a usb
 * group matching 046d:0825 (any serial) beside a glob group under the fake
 * /dev; the last field is the text of /proc/driver/nvidia-caps/mig-minors,
 * looked up for a few GPU, GPU-instance and compute-instance numbers.
 * Seeds: fuzz/corpus/fuzz-sysfs/. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "devices/hostdev/scan.h"
#include "devices/nvidia/inventory.h"
#include "fuzz-util.h"

static char root[64];
static struct hostdev_env env;

static void setup(void)
{
        strcpy(root, "/tmp/fuzz-sysfs-XXXXXX");
        if (!mkdtemp(root))
                abort();
        char path[256];
        const char *dirs[] = { "sys", "sys/bus", "sys/bus/usb", "sys/bus/usb/devices",
                               "sys/bus/usb/devices/1-1", "sys/bus/usb/devices/1-2",
                               "sys/bus/usb/devices/1-1:1.0", "dev", "dev/bus", "dev/bus/usb",
                               "dev/bus/usb/001" };
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
                mkdir(path, 0755);
        }
        const char *files[] = { "dev/bus/usb/001/002", "dev/bus/usb/001/003", "dev/ttyUSB0" };
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", root, files[i]);
                fs_write_atomic(path, "", 0, 0644);
        }
        static char sys[80], dev[80];
        snprintf(sys, sizeof(sys), "%s/sys", root);
        snprintf(dev, sizeof(dev), "%s", root);
        env.sysfs_root = sys;
        env.dev_root = dev;
}

static void put(const char *dev, const char *name, const char *value, size_t len)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/sys/bus/usb/devices/%s/%s", root, dev, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                abort();
        if (len && write(fd, value, len) != (ssize_t)len)
                abort();
        close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!root[0])
                setup();
        const char *field[6] = { "", "", "", "", "", "" };
        size_t flen[6] = { 0 };
        char *copy = fuzz_cstr(data, size);
        if (!copy)
                return 0;
        size_t f = 0, start = 0;
        for (size_t i = 0; i <= size && f < 6; i++) {
                if (i == size || copy[i] == '\0') {
                        field[f] = copy + start;
                        flen[f] = i - start;
                        f++;
                        start = i + 1;
                }
        }
        static const char *const names[] = { "idVendor", "idProduct", "serial", "busnum",
                                             "devnum" };
        for (size_t k = 0; k < 5; k++) {
                put("1-1", names[k], field[k], flen[k]);
                char *rev = malloc(flen[k] + 1);
                for (size_t i = 0; i < flen[k]; i++)
                        rev[i] = k == 2 ? field[k][flen[k] - 1 - i] : field[k][i];
                put("1-2", names[k], rev, flen[k]);
                free(rev);
        }

        char vendor[] = "046d", product[] = "0825", glob[128];
        snprintf(glob, sizeof(glob), "%s/dev/ttyUSB*", root);
        struct hostdev_usb_cfg usb = { vendor, product, NULL };
        struct hostdev_path_cfg path = { .path = glob, .permissions = "rw" };
        struct hostdev_group_cfg groups[2] = { { .count = 1, .usb = &usb, .n_usb = 1 },
                                               { .count = 2, .paths = &path, .n_paths = 1 } };
        char name[] = "cam";
        struct hostdev_device_cfg dev = { name, groups, 2 };
        struct hostdev_scan scan = { 0 };
        hostdev_scan_device(&env, &dev, &scan);
        hostdev_scan_release(&scan);

        const char *minors = field[5];
        for (int gpu = -1; gpu < 3; gpu++)
                for (unsigned gi = 0; gi < 3; gi++)
                        for (int ci = -1; ci < 2; ci++)
                                (void)nvml_mig_minor_lookup(minors, gpu, gi, ci);
        free(copy);
        return 0;
}
