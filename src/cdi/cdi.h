/* CDI specs from devlet's devices: what `devlet cdi generate` prints and
 * what `devlet run` keeps written in --cdi-spec-dir.
 *
 * A host-device resource "<domain>/<name>" becomes a spec of that kind with
 * one CDI device per device ID.  The model is in cdi/spec.h; this header
 * turns the device model (devices/device.h) into specs. */
#ifndef DEVLET_CDI_CDI_H
#define DEVLET_CDI_CDI_H

#include "cdi/spec.h"
#include "config/config.h"
#include "devices/device.h"

/* The spec of a resource served with the generic allocate (host devices):
 * kind is the resource name, and each device ID whose name CDI accepts
 * becomes a CDI device whose edits are what Allocate gives for it:
 *   - a node whose host path is a character or block device: a device node
 *     with its type and major:minor (stat(2) of the host path now), the
 *     host path when it differs, and its cgroup permissions;
 *   - a node that does not exist now: a device node without numbers (the
 *     runtime stats it when a container starts);
 *   - a node that exists but is no device (tests stand files in for nodes):
 *     a bind mount, read-only unless the permissions include 'w';
 *   - a mount: a bind mount ("rbind", plus "ro" when read-only).
 * IDs CDI does not accept as device names are left out and, when skipped is
 * not NULL, appended to *skipped (a strv, created when NULL).  Returns 0 and
 * *out (a valid spec), or -EINVAL with diag set ("resource <name>: ...") when
 * the resource name is not a valid CDI kind or no device is left. */
int cdi_spec_from_resource(const struct dev_resource *r, struct cdi_spec **out, char ***skipped,
                           struct diag *diag);

/* The container edits of an allocation (what Allocate answered for some
 * device IDs): its device nodes as above, its mounts as bind mounts, its
 * environment.  Annotations and CDI device names are the caller's. */
void cdi_edits_from_alloc(const struct dev_alloc *a, struct cdi_edits *out);

/* cdi_spec_render as JSON (DRA's per-claim specs). */
int cdi_spec_render_json(const struct cdi_spec *s, char **out, size_t *len, struct diag *diag);

#endif
