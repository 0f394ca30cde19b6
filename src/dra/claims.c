/* What DRA reads from the API server's answers, as pure functions: a
 * ResourceClaim's allocation for one driver and pool, and the modes of
 * --dra-resources.  Unit-tested and fuzzed (fuzz/fuzz-dra-claim.c): the
 * API server is a peer like any other, so nothing here trusts a type, a
 * length or a count in what it sends. */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "dra/dra.h"

/* The most devices one claim may hold for one driver (the API allows 32
 * per request and 32 requests). */
#define CLAIM_DEVICES_MAX 1024

bool dra_uid_valid(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

static const char *str_at(const json_t *obj, const char *key)
{
        const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
        return json_is_string(v) ? json_string_value(v) : NULL;
}

void dra_claim_release(struct dra_claim *c)
{
        for (size_t i = 0; i < c->n_devices; i++) {
                free(c->devices[i].request);
                free(c->devices[i].pool);
                free(c->devices[i].device);
        }
        free(c->devices);
        free(c->uid);
        free(c->namespace);
        free(c->name);
        memset(c, 0, sizeof(*c));
}

int dra_claim_decode(const json_t *claim, const char *uid, const char *driver, const char *pool,
                     struct dra_claim *out, struct diag *diag)
{
        const json_t *meta = json_is_object(claim) ? json_object_get(claim, "metadata") : NULL;
        const char *ns = str_at(meta, "namespace"), *name = str_at(meta, "name");
        const char *got_uid = str_at(meta, "uid");
        if (!ns || !name || !got_uid)
                return diag_set(diag, -EINVAL, "not a ResourceClaim (no metadata)");
        if (strcmp(got_uid, uid) != 0)
                return diag_set(diag, -ESTALE, "its UID is %s, not %s (replaced)", got_uid, uid);
        const json_t *status = json_object_get(claim, "status");
        const json_t *alloc = json_is_object(status) ? json_object_get(status, "allocation") : NULL;
        const json_t *devs = json_is_object(alloc) ? json_object_get(alloc, "devices") : NULL;
        const json_t *results = json_is_object(devs) ? json_object_get(devs, "results") : NULL;
        if (!json_is_object(alloc))
                return diag_set(diag, -EINVAL, "not allocated");
        if (results && !json_is_array(results))
                return diag_set(diag, -EINVAL, "status.allocation.devices.results is not a list");

        struct dra_claim c = { 0 };
        size_t cap = 0;
        size_t i;
        const json_t *r;
        json_array_foreach(results, i, r) {
                const char *drv = str_at(r, "driver");
                if (!drv || strcmp(drv, driver) != 0)
                        continue;
                const char *req = str_at(r, "request"), *p = str_at(r, "pool"),
                           *dev = str_at(r, "device");
                if (!req || !p || !dev) {
                        dra_claim_release(&c);
                        return diag_set(diag, -EINVAL, "result %zu lacks request, pool or device",
                                        i);
                }
                if (strcmp(p, pool) != 0) {
                        dra_claim_release(&c);
                        return diag_set(diag, -EINVAL, "device %s is in pool %s, not this node's (%s)",
                                        dev, p, pool);
                }
                if (c.n_devices == CLAIM_DEVICES_MAX) {
                        dra_claim_release(&c);
                        return diag_set(diag, -EINVAL, "more than %d devices", CLAIM_DEVICES_MAX);
                }
                xgrow((void **)&c.devices, &cap, c.n_devices + 1, sizeof(*c.devices));
                c.devices[c.n_devices++] = (struct dra_claim_device){
                        xstrdup(req), xstrdup(p), xstrdup(dev),
                        json_is_true(json_object_get(r, "adminAccess"))
                };
        }
        if (c.n_devices == 0)
                return diag_set(diag, -EINVAL, "no device of driver %s is allocated", driver);
        c.uid = xstrdup(uid);
        c.namespace = xstrdup(ns);
        c.name = xstrdup(name);
        *out = c;
        return 0;
}

/* ---- --dra-resources ---- */

static int mode_parse(const char *s, enum dra_mode *out)
{
        if (strcmp(s, "dra") == 0)
                *out = DRA_MODE_DRA;
        else if (strcmp(s, "both") == 0)
                *out = DRA_MODE_BOTH;
        else if (strcmp(s, "device-plugin") == 0)
                *out = DRA_MODE_DEVICE_PLUGIN;
        else
                return -EINVAL;
        return 0;
}

enum dra_mode dra_mode_of(const struct devlet_config *cfg, const char *resource,
                          const char *driver)
{
        if (!driver)
                return DRA_MODE_DEVICE_PLUGIN;
        enum dra_mode mode = DRA_MODE_DEVICE_PLUGIN;
        /* the last item whose pattern matches decides */
        for (size_t i = 0; cfg->dra_resources && cfg->dra_resources[i]; i++) {
                const char *it = cfg->dra_resources[i], *eq = strchr(it, '=');
                _cleanup_free_ char *pattern = xstrndup(it, eq ? (size_t)(eq - it) : strlen(it));
                enum dra_mode m = DRA_MODE_DRA;
                if (eq && mode_parse(eq + 1, &m) < 0)
                        continue;
                if (fnmatch(pattern, resource, 0) == 0)
                        mode = m;
        }
        return mode;
}
