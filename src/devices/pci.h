/* What every family reads the same way about a PCI device in sysfs: the
 * PCIe root complex Kubernetes' standard attribute names
 * (resource.kubernetes.io/pcieRoot).  Backends call it when they scan; it
 * reads one symlink and never logs. */
#ifndef DEVLET_DEVICES_PCI_H
#define DEVLET_DEVICES_PCI_H

#include <stdbool.h>
#include <stddef.h>

/* An extended BDF as Kubernetes takes it: "0000:3b:00.0", lower-case hex. */
bool dev_pci_bdf_valid(const char *bdf);

/* The root complex of the PCI device bdf, "pci<domain>:<bus>", as
 * deviceattribute.GetPCIeRootAttributeByPCIBusID finds it: the first
 * component under <sysfs_root>/devices of what <sysfs_root>/bus/pci/devices/
 * <bdf> links to (a relative link resolved lexically, so a fake tree under
 * another root works as /sys does).  Returns 0 and out; -EINVAL for a bad
 * BDF or a link that does not lead below a "pci..." directory of
 * <sysfs_root>/devices to a device named bdf, -ENAMETOOLONG when out is
 * too small, or the readlink's -errno. */
int dev_pci_root(const char *sysfs_root, const char *bdf, char *out, size_t size);

#endif
