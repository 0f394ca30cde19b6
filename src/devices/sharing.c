/* The sharing section's selection, once for every family: which units of
 * each listed resource are replicated (all, the first N, or those the
 * devices list names).  The family brings its units and its answer to
 * "does this selector name this unit" (struct dev_share_units); what
 * replication then means (IDs, replica policies, MPS) stays the family's.
 *
 * Pure: no device access, no logging. */
#include <errno.h>
#include <string.h>

#include "base/xalloc.h"
#include "devices/device.h"

static bool unit_of(const struct dev_share_units *u, size_t k, const char *resource)
{
        return strcmp(u->resource(k, u->ud), resource) == 0;
}

/* Marks the unit of s's resource that ref names; false when none does. */
static bool select_ref(const struct sharing_resource_cfg *s, const struct dev_share_units *u,
                       const char *ref, const struct sharing_resource_cfg **out)
{
        size_t nth = 0;
        for (size_t k = 0; k < u->n; k++) {
                if (!unit_of(u, k, s->name))
                        continue;
                if (u->names(ref, k, nth++, u->ud)) {
                        out[k] = s;
                        return true;
                }
        }
        return false;
}

static int select_entry(const struct sharing_resource_cfg *s, const struct dev_share_units *u,
                        const struct sharing_resource_cfg **out, struct diag *diag)
{
        size_t n = 0;
        for (size_t k = 0; k < u->n; k++)
                n += unit_of(u, k, s->name);
        if (n == 0)
                return 0;
        switch (s->devices_kind) {
        case SHARING_DEVICES_ALL:
        case SHARING_DEVICES_COUNT:
                if (s->devices_kind == SHARING_DEVICES_COUNT && s->devices_count > n)
                        return diag_set(diag, -EINVAL,
                                        "unable to get IDs of devices to replicate for '%s' "
                                        "resource: requested %u devices to be replicated, but "
                                        "only %zu devices available", s->name, s->devices_count, n);
                for (size_t k = 0, nth = 0; k < u->n; k++)
                        if (unit_of(u, k, s->name) &&
                            (s->devices_kind == SHARING_DEVICES_ALL || nth++ < s->devices_count))
                                out[k] = s;
                return 0;
        case SHARING_DEVICES_LIST:
                for (size_t i = 0; s->devices && s->devices[i]; i++)
                        if (!select_ref(s, u, s->devices[i], out))
                                return diag_set(diag, -EINVAL,
                                                "unable to get IDs of devices to replicate for "
                                                "'%s' resource: no matching device %s: %s", s->name,
                                                u->ref_kind(s->devices[i]), s->devices[i]);
                return 0;
        }
        return -EINVAL;
}

int dev_share_assign(const struct sharing_cfg *sc, const struct dev_share_units *u,
                     const struct sharing_resource_cfg **out, struct diag *diag)
{
        for (size_t k = 0; k < u->n; k++)
                out[k] = NULL;
        for (size_t i = 0; sc->strategy != SHARING_NONE && i < sc->n_resources; i++) {
                int r = select_entry(&sc->resources[i], u, out, diag);
                if (r < 0)
                        return r;
        }
        return 0;
}
