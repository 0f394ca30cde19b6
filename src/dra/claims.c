/* What DRA reads from the API server's answers, as pure functions: a
 * ResourceClaim's allocation for one driver and pool, and the modes of
 * --dra-resources.  Unit-tested and fuzzed (fuzz/fuzz-dra-claim.c): the
 * API server is a peer like any other, so nothing here trusts a type, a
 * length or a count in what it sends. */
#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "dra/dra.h"

/* The most devices one claim may hold for one driver (the API allows 32
 * per request and 32 requests). */
#define CLAIM_DEVICES_MAX 1024
/* The API's bounds on a claim's and a class's configs and their requests. */
#define CLAIM_CONFIGS_MAX 64
#define CONFIG_REQUESTS_MAX 32

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
        for (size_t i = 0; i < c->n_configs; i++) {
                strv_free(c->configs[i].requests);
                json_decref(c->configs[i].parameters);
        }
        free(c->configs);
        free(c->uid);
        free(c->namespace);
        free(c->name);
        memset(c, 0, sizeof(*c));
}

bool dra_claim_config_applies(const struct dra_claim_config *config, const char *request)
{
        if (!config->requests)
                return true;
        for (size_t i = 0; config->requests[i]; i++) {
                size_t n = strlen(config->requests[i]);
                if (strncmp(request, config->requests[i], n) == 0 &&
                    (request[n] == '\0' || request[n] == '/'))
                        return true;
        }
        return false;
}

/* status.allocation.devices.config: driver's opaque configs into c, the
 * class's first (the API server lists them so; sorted anyway). */
static int configs_decode(const json_t *list, const char *driver, struct dra_claim *c,
                          struct diag *diag)
{
        if (!list)
                return 0;
        if (!json_is_array(list))
                return diag_set(diag, -EINVAL, "status.allocation.devices.config is not a list");
        if (json_array_size(list) > CLAIM_CONFIGS_MAX)
                return diag_set(diag, -EINVAL, "more than %d configs", CLAIM_CONFIGS_MAX);
        size_t seen[2] = { 0, 0 }; /* per source: FromClaim, FromClass */
        for (int pass = 1; pass >= 0; pass--) {
                size_t i;
                const json_t *e;
                json_array_foreach(list, i, e) {
                        const char *source = str_at(e, "source");
                        bool from_class = source && strcmp(source, "FromClass") == 0;
                        if (!source || (!from_class && strcmp(source, "FromClaim") != 0))
                                return diag_set(diag, -EINVAL,
                                                "config %zu: source is not FromClass or FromClaim",
                                                i);
                        if ((int)from_class != pass)
                                continue;
                        size_t index = seen[from_class]++;
                        const json_t *opaque = json_object_get(e, "opaque");
                        const char *drv = str_at(opaque, "driver");
                        if (!drv || strcmp(drv, driver) != 0)
                                continue; /* another driver's, or not opaque */
                        const json_t *params = json_object_get(opaque, "parameters");
                        const json_t *reqs = json_object_get(e, "requests");
                        if (reqs && !json_is_array(reqs))
                                return diag_set(diag, -EINVAL, "config %zu: requests is not a list",
                                                i);
                        if (json_array_size(reqs) > CONFIG_REQUESTS_MAX)
                                return diag_set(diag, -EINVAL, "config %zu: more than %d requests",
                                                i, CONFIG_REQUESTS_MAX);
                        char **rv = NULL;
                        size_t k;
                        const json_t *q;
                        json_array_foreach(reqs, k, q) {
                                if (!json_is_string(q)) {
                                        strv_free(rv);
                                        return diag_set(diag, -EINVAL,
                                                        "config %zu: a request is not a string", i);
                                }
                                if (!rv)
                                        rv = xcalloc(1, sizeof(char *));
                                rv = strv_push(rv, json_string_value(q));
                        }
                        c->configs = xrealloc(c->configs, (c->n_configs + 1) * sizeof(*c->configs));
                        c->configs[c->n_configs++] = (struct dra_claim_config){
                                from_class, index, rv,
                                params ? json_incref((json_t *)(uintptr_t)params) : json_null()
                        };
                }
        }
        return 0;
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
        int rc = configs_decode(json_is_object(devs) ? json_object_get(devs, "config") : NULL,
                                driver, &c, diag);
        if (rc < 0) {
                dra_claim_release(&c);
                return rc;
        }
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
