/* NVIDIA's `resources` and `sharing` sections of the config file.
 *
 * resources.gpus and resources.mig pair a glob on a GPU's product name (or
 * a MIG profile name) with the resource the matching devices are served as.
 * NVIDIA's plugin parses and then ignores them; devlet honours them.
 * sharing.timeSlicing and sharing.mps replicate resources: the devices of
 * each listed resource (all, the first N, or a list of indices and UUIDs)
 * are advertised `replicas` times each.  The two are mutually exclusive.
 *
 * Names follow NVIDIA's rules: "gpu" and "nvidia.com/gpu" both mean
 * nvidia.com/gpu, the part after the slash is a lowercase DNS subdomain, and
 * only the nvidia.com domain is served (NVIDIA's RESOURCE_PREFIX override is
 * not supported).  Each error names its node's path and line:column;
 * unknown keys become warnings; the result reaches the caller only when the
 * whole section is good.
 *
 * Never looks at devices (the nvidia backend matches patterns and device
 * references against what NVML reports) and never logs. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/sections.h"

#define NVIDIA_DOMAIN "nvidia.com"
#define AMD_DOMAIN "amd.com"
#define SHARED_SUFFIX ".shared"
#define LIST_MAX 1024     /* entries in resources.gpus, resources.mig, sharing.*.resources */
#define REPLICAS_MAX 1024
#define DEVICES_MAX 1024  /* a device count, a devices list's length, and any index */
#define UUID_LEN 36       /* 8-4-4-4-12 hex digits */

/* ---- names ---- */

/* "gpu" or "nvidia.com/gpu" -> "nvidia.com/gpu" in *out. */
static int resource_name(struct config_walk *w, const struct config_node *n, const char *path,
                         char **out)
{
        const char *s = n->text;
        const char *name = s;
        /* AMD's resources are shared with the same section */
        if (strncmp(s, AMD_DOMAIN "/", strlen(AMD_DOMAIN "/")) == 0) {
                /* AMD's partition resources carry '_' (amd.com/cpx_nps4) */
                if (!config_valid_resource_name(s))
                        return config_node_error(w->diag, w->file, n, path,
                                                 "\"%.100s\" is not a valid resource name", s);
                *out = xstrdup(s);
                return 0;
        }
        if (strncmp(s, NVIDIA_DOMAIN "/", strlen(NVIDIA_DOMAIN "/")) == 0)
                name = s + strlen(NVIDIA_DOMAIN "/");
        else if (strchr(s, '/'))
                return config_node_error(w->diag, w->file, n, path,
                                         "\"%.100s\" is not in the " NVIDIA_DOMAIN
                                         " domain (write \"" NVIDIA_DOMAIN
                                         "/<name>\" or just \"<name>\")",
                                         s);
        _cleanup_free_ char *full = xasprintf(NVIDIA_DOMAIN "/%s", name);
        if (!config_valid_dns_subdomain(name) || !config_valid_resource_name(full))
                return config_node_error(w->diag, w->file, n, path,
                                         "\"%.100s\" is not a valid resource name (at most 63 "
                                         "lowercase letters, digits, '-' or '.' after "
                                         "\"" NVIDIA_DOMAIN "/\", starting and ending with a "
                                         "letter or digit)",
                                         s);
        *out = TAKE_PTR(full);
        return 0;
}

/* A required key whose value is a resource name. */
static int get_resource_name(struct config_walk *w, const struct config_node *map,
                             const char *key, const char *parent, char **out,
                             const struct config_node **node)
{
        const char *s;
        char path[CONFIG_PATH_MAX];
        int r = config_walk_required(w, map, key, parent, &s, node);
        if (r < 0)
                return r;
        return resource_name(w, *node, config_subpath(path, sizeof(path), parent, ".%s", key), out);
}

static bool is_mig_resource(const char *name, const struct resources_cfg *res)
{
        if (strncmp(name, NVIDIA_DOMAIN "/mig-", strlen(NVIDIA_DOMAIN "/mig-")) == 0)
                return true;
        for (size_t i = 0; i < res->n_mig_resources; i++)
                if (strcmp(res->mig_resources[i].name, name) == 0)
                        return true;
        return false;
}

/* ---- resources ---- */

static int parse_patterns(struct config_walk *w, const struct config_node *map, const char *key,
                          const struct resource_pattern_cfg *others, size_t n_others,
                          const char *others_key, struct resource_pattern_cfg **out,
                          size_t *n_out)
{
        static const char *const known[] = { "pattern", "name", NULL };
        const struct config_node *list;
        char path[CONFIG_PATH_MAX], sub[CONFIG_PATH_MAX];
        int r = config_walk_list(w, map, key, "resources", &list);
        if (r < 0 || !list)
                return r;
        config_subpath(path, sizeof(path), "resources", ".%s", key);
        if (list->n_items > LIST_MAX)
                return config_node_error(w->diag, w->file, list, path, "more than %d entries",
                                         LIST_MAX);
        if (list->n_items)
                *out = xcalloc(list->n_items, sizeof(**out));
        for (size_t i = 0; i < list->n_items; i++) {
                const struct config_node *n = list->items[i], *node;
                struct resource_pattern_cfg *p = &(*out)[i];
                const char *s;
                config_subpath(path, sizeof(path), "resources", ".%s[%zu]", key, i);
                (*n_out)++;
                if ((r = config_walk_map(w, n, path, known)) < 0)
                        return r;
                if ((r = config_walk_required(w, n, "pattern", path, &s, &node)) < 0)
                        return r;
                if (!s[0])
                        return config_node_error(w->diag, w->file, node,
                                                 config_subpath(sub, sizeof(sub), path,
                                                                ".pattern"),
                                                 "must not be empty (\"*\" matches any)");
                p->pattern = xstrdup(s);
                if ((r = get_resource_name(w, n, "name", path, &p->name, &node)) < 0)
                        return r;
                for (size_t j = 0; j < n_others; j++)
                        if (strcmp(others[j].name, p->name) == 0)
                                return config_node_error(
                                        w->diag, w->file, node,
                                        config_subpath(sub, sizeof(sub), path, ".name"),
                                        "\"%s\" is already resources.%s[%zu]'s name: full GPUs "
                                        "and MIG devices cannot be one resource",
                                        p->name, others_key, j);
        }
        return 0;
}

int config_resources_parse(const struct config_node *node, const char *file,
                           struct resources_cfg *out, char ***warnings,
                           struct config_diag *diag)
{
        static const char *const known[] = { "gpus", "mig", NULL };
        struct config_walk w = { .file = file, .diag = diag, .warnings = warnings };
        struct resources_cfg res = { 0 };
        int r = 0;
        if (!config_node_is_null(node)) {
                r = config_walk_map(&w, node, "resources", known);
                if (r >= 0)
                        r = parse_patterns(&w, node, "gpus", NULL, 0, NULL, &res.gpu_resources,
                                           &res.n_gpu_resources);
                if (r >= 0)
                        r = parse_patterns(&w, node, "mig", res.gpu_resources,
                                           res.n_gpu_resources, "gpus", &res.mig_resources,
                                           &res.n_mig_resources);
        }
        if (r < 0) {
                config_resources_clear(&res);
                return r;
        }
        *out = res;
        return 0;
}

static void patterns_free(struct resource_pattern_cfg *p, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(p[i].pattern);
                free(p[i].name);
        }
        free(p);
}

void config_resources_clear(struct resources_cfg *r)
{
        patterns_free(r->gpu_resources, r->n_gpu_resources);
        patterns_free(r->mig_resources, r->n_mig_resources);
        *r = (struct resources_cfg){ 0 };
}

/* ---- device references ---- */

static bool is_uuid(const char *s, size_t len)
{
        if (len != UUID_LEN)
                return false;
        for (size_t i = 0; i < len; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
                        return false;
        }
        return true;
}

/* Decimal digits only, at most max. */
static bool parse_number(const char *s, size_t len, unsigned max, unsigned *out)
{
        if (len == 0)
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < len; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return false;
                v = v * 10 + (unsigned)(s[i] - '0');
                if (v > max)
                        return false;
        }
        *out = v;
        return true;
}

static bool parse_index(const char *s, size_t len, unsigned *out)
{
        return parse_number(s, len, DEVICES_MAX - 1, out);
}

enum device_ref { DEVICE_REF_BAD, DEVICE_REF_GPU, DEVICE_REF_MIG };

/* Classifies a devices-list entry and gives its canonical form: indices in
 * plain decimal, UUID hex digits in lower case (as NVML reports them).
 * Forms: "3", "3:1" (GPU 3's MIG device 1), "GPU-<uuid>", "MIG-<uuid>" and
 * the older "MIG-GPU-<uuid>/<gi>/<ci>". */
static enum device_ref device_ref(const char *s, char **canon)
{
        size_t len = strlen(s);
        const char *colon = strchr(s, ':');
        unsigned a, b;
        if (!colon && parse_index(s, len, &a)) {
                *canon = xasprintf("%u", a);
                return DEVICE_REF_GPU;
        }
        if (colon && parse_index(s, (size_t)(colon - s), &a) &&
            parse_index(colon + 1, strlen(colon + 1), &b)) {
                *canon = xasprintf("%u:%u", a, b);
                return DEVICE_REF_MIG;
        }
        enum device_ref kind = DEVICE_REF_BAD;
        size_t hex = 4; /* where the UUID starts */
        if (strncmp(s, "GPU-", 4) == 0 && is_uuid(s + 4, len - 4)) {
                kind = DEVICE_REF_GPU;
                *canon = xstrdup(s);
        } else if (strncmp(s, "MIG-", 4) == 0 && is_uuid(s + 4, len - 4)) {
                kind = DEVICE_REF_MIG;
                *canon = xstrdup(s);
        } else if (strncmp(s, "MIG-GPU-", 8) == 0 && len > 8 + UUID_LEN &&
                   is_uuid(s + 8, UUID_LEN) && s[8 + UUID_LEN] == '/') {
                const char *gi = s + 8 + UUID_LEN + 1;
                const char *slash = strchr(gi, '/');
                if (slash && parse_index(gi, (size_t)(slash - gi), &a) &&
                    parse_index(slash + 1, strlen(slash + 1), &b)) {
                        kind = DEVICE_REF_MIG;
                        hex = 8;
                        *canon = xasprintf("%.*s/%u/%u", 8 + UUID_LEN, s, a, b);
                }
        }
        if (kind != DEVICE_REF_BAD)
                for (size_t i = hex; i < hex + UUID_LEN; i++)
                        (*canon)[i] = (char)tolower((unsigned char)(*canon)[i]);
        return kind;
}

/* ---- sharing ---- */

struct replicated {
        const char *path; /* "sharing.timeSlicing" */
        enum sharing_strategy strategy;
        const struct resources_cfg *res;
};

static int parse_devices(struct config_walk *w, const struct config_node *map, const char *path,
                         const struct replicated *ctx, struct sharing_resource_cfg *out)
{
        const struct config_node *n = config_node_get(map, "devices");
        char sub[CONFIG_PATH_MAX], item[CONFIG_PATH_MAX];
        config_subpath(sub, sizeof(sub), path, ".devices");
        out->devices_kind = SHARING_DEVICES_ALL;
        if (!n || config_node_is_null(n))
                return 0;
        if (n->kind == CONFIG_NODE_SCALAR) {
                unsigned count;
                if (strcmp(n->text, "all") == 0)
                        return 0;
                if (!parse_number(n->text, strlen(n->text), DEVICES_MAX, &count) || count == 0)
                        return config_node_error(w->diag, w->file, n, sub,
                                                 "\"%.100s\" is not \"all\", a count from 1 to "
                                                 "%d, or a list of devices",
                                                 n->text, DEVICES_MAX);
                out->devices_kind = SHARING_DEVICES_COUNT;
                out->devices_count = count;
                return 0;
        }
        if (n->kind != CONFIG_NODE_SEQ)
                return config_node_error(w->diag, w->file, n, sub,
                                         "expected \"all\", a count or a list, found %s",
                                         config_node_kind_name(n));
        if (!n->n_items)
                return config_node_error(w->diag, w->file, n, sub,
                                         "needs at least one device (leave it out for all)");
        if (n->n_items > DEVICES_MAX)
                return config_node_error(w->diag, w->file, n, sub, "more than %d devices",
                                         DEVICES_MAX);
        out->devices_kind = SHARING_DEVICES_LIST;
        for (size_t i = 0; i < n->n_items; i++) {
                const struct config_node *d = n->items[i];
                config_subpath(item, sizeof(item), sub, "[%zu]", i);
                int r = config_walk_expect(w, d, CONFIG_NODE_SCALAR, item);
                if (r < 0)
                        return r;
                _cleanup_free_ char *canon = NULL;
                enum device_ref kind = device_ref(d->text, &canon);
                if (kind == DEVICE_REF_BAD)
                        return config_node_error(w->diag, w->file, d, item,
                                                 "\"%.100s\" is not a GPU index (\"0\"), a MIG "
                                                 "index (\"0:1\"), both below %d, or a GPU or "
                                                 "MIG UUID (\"GPU-<uuid>\", \"MIG-<uuid>\")",
                                                 d->text, DEVICES_MAX);
                if (kind == DEVICE_REF_MIG && ctx->strategy == SHARING_MPS)
                        return config_node_error(w->diag, w->file, d, item,
                                                 "\"%.100s\" is a MIG device: MPS shares full "
                                                 "GPUs only",
                                                 d->text);
                for (size_t j = 0; out->devices && out->devices[j]; j++)
                        if (strcmp(out->devices[j], canon) == 0)
                                return config_node_error(w->diag, w->file, d, item,
                                                         "\"%.100s\" is already listed as "
                                                         "%s.devices[%zu]",
                                                         d->text, path, j);
                out->devices = strv_push(out->devices, canon);
        }
        return 0;
}

static int parse_resource(struct config_walk *w, const struct config_node *n, const char *path,
                          const struct replicated *ctx, const struct sharing_cfg *done,
                          struct sharing_resource_cfg *out)
{
        static const char *const known[] = { "name", "rename", "replicas", "devices", NULL };
        const struct config_node *name_node, *rename_node = NULL, *node;
        const char *s;
        char sub[CONFIG_PATH_MAX];
        int r = config_walk_map(w, n, path, known);
        if (r < 0)
                return r;

        if ((r = get_resource_name(w, n, "name", path, &out->name, &name_node)) < 0)
                return r;
        config_subpath(sub, sizeof(sub), path, ".name");
        if (ctx->strategy == SHARING_MPS && is_mig_resource(out->name, ctx->res))
                return config_node_error(w->diag, w->file, name_node, sub,
                                         "\"%s\" is a MIG resource: MPS shares full GPUs only",
                                         out->name);
        for (size_t i = 0; i < done->n_resources; i++)
                if (strcmp(done->resources[i].name, out->name) == 0)
                        return config_node_error(w->diag, w->file, name_node, sub,
                                                 "\"%s\" is already listed as %s.resources[%zu]",
                                                 out->name, ctx->path, i);

        if ((r = config_walk_string(w, n, "rename", path, &s, &rename_node)) < 0)
                return r;
        if (s) {
                config_subpath(sub, sizeof(sub), path, ".rename");
                if ((r = resource_name(w, rename_node, sub, &out->rename)) < 0)
                        return r;
        } else {
                rename_node = NULL;
        }

        if ((r = config_walk_required(w, n, "replicas", path, &s, &node)) < 0)
                return r;
        if ((r = config_walk_uint(w, n, "replicas", path, 2, REPLICAS_MAX, &out->replicas,
                                  NULL)) < 0)
                return r;

        if ((r = parse_devices(w, n, path, ctx, out)) < 0)
                return r;

        if (!out->rename && done->rename_by_default) {
                out->rename = xasprintf("%s" SHARED_SUFFIX, out->name);
                if (!config_valid_resource_name(out->rename))
                        return config_node_error(w->diag, w->file, name_node,
                                                 config_subpath(sub, sizeof(sub), path, ".name"),
                                                 "renameByDefault would serve it as \"%s\", "
                                                 "which is not a valid resource name",
                                                 out->rename);
        }
        const char *served = config_sharing_served_name(out);
        for (size_t i = 0; i < done->n_resources; i++)
                if (strcmp(config_sharing_served_name(&done->resources[i]), served) == 0)
                        return config_node_error(
                                w->diag, w->file, rename_node ? rename_node : name_node,
                                config_subpath(sub, sizeof(sub), path,
                                               rename_node ? ".rename" : ".name"),
                                "\"%s\" is already served by %s.resources[%zu]", served,
                                ctx->path, i);
        return 0;
}

static int parse_replicated(struct config_walk *w, const struct config_node *n,
                            const struct replicated *ctx, struct sharing_cfg *out)
{
        static const char *const known[] = { "renameByDefault", "failRequestsGreaterThanOne",
                                             "resources", NULL };
        const struct config_node *list;
        char sub[CONFIG_PATH_MAX];
        int r = config_walk_map(w, n, ctx->path, known);
        if (r < 0)
                return r;

        struct sharing_cfg s = { .strategy = ctx->strategy };
        if ((r = config_walk_bool(w, n, "renameByDefault", ctx->path, &s.rename_by_default,
                                  NULL)) < 0)
                return r;
        if ((r = config_walk_bool(w, n, "failRequestsGreaterThanOne", ctx->path,
                                  &s.fail_requests_greater_than_one, NULL)) < 0)
                return r;
        if ((r = config_walk_list(w, n, "resources", ctx->path, &list)) < 0)
                return r;
        config_subpath(sub, sizeof(sub), ctx->path, ".resources");
        if (!list)
                return config_node_error(w->diag, w->file, n, ctx->path,
                                         "\"resources\" is required");
        if (!list->n_items)
                return config_node_error(w->diag, w->file, list, sub,
                                         "needs at least one resource");
        if (list->n_items > LIST_MAX)
                return config_node_error(w->diag, w->file, list, sub,
                                         "more than %d resources", LIST_MAX);

        s.resources = xcalloc(list->n_items, sizeof(*s.resources));
        for (size_t i = 0; i < list->n_items; i++) {
                config_subpath(sub, sizeof(sub), ctx->path, ".resources[%zu]", i);
                struct sharing_resource_cfg res = { 0 };
                r = parse_resource(w, list->items[i], sub, ctx, &s, &res);
                s.resources[s.n_resources++] = res;
                if (r < 0) {
                        config_sharing_clear(&s);
                        return r;
                }
        }
        *out = s;
        return 0;
}

int config_sharing_parse(const struct config_node *node, const char *file,
                         const struct resources_cfg *resources, struct sharing_cfg *out,
                         char ***warnings, struct config_diag *diag)
{
        static const char *const known[] = { "timeSlicing", "mps", NULL };
        struct config_walk w = { .file = file, .diag = diag, .warnings = warnings };
        struct sharing_cfg s = { .strategy = SHARING_NONE };
        int r;
        if (!config_node_is_null(node)) {
                if ((r = config_walk_map(&w, node, "sharing", known)) < 0)
                        return r;
                const struct config_node *ts = config_node_get(node, "timeSlicing");
                const struct config_node *mps = config_node_get(node, "mps");
                if (ts && !config_node_is_null(ts)) {
                        struct replicated ctx = { "sharing.timeSlicing", SHARING_TIME_SLICING,
                                                  resources };
                        if ((r = parse_replicated(&w, ts, &ctx, &s)) < 0)
                                return r;
                }
                if (mps && !config_node_is_null(mps)) {
                        if (s.strategy != SHARING_NONE) {
                                config_sharing_clear(&s);
                                return config_node_error(
                                        diag, file, mps, "sharing.mps",
                                        "time-slicing and MPS are mutually exclusive: only one "
                                        "of sharing.timeSlicing and sharing.mps may have "
                                        "resources");
                        }
                        struct replicated ctx = { "sharing.mps", SHARING_MPS, resources };
                        if ((r = parse_replicated(&w, mps, &ctx, &s)) < 0)
                                return r;
                }
        }
        *out = s;
        return 0;
}

const char *config_sharing_served_name(const struct sharing_resource_cfg *r)
{
        return r->rename ? r->rename : r->name;
}

void config_sharing_clear(struct sharing_cfg *s)
{
        for (size_t i = 0; i < s->n_resources; i++) {
                free(s->resources[i].name);
                free(s->resources[i].rename);
                strv_free(s->resources[i].devices);
        }
        free(s->resources);
        *s = (struct sharing_cfg){ 0 };
}

static bool patterns_equal(const struct resource_pattern_cfg *a, size_t na,
                           const struct resource_pattern_cfg *b, size_t nb)
{
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!streq_ptr(a[i].pattern, b[i].pattern) || !streq_ptr(a[i].name, b[i].name))
                        return false;
        return true;
}

bool config_resources_equal(const struct resources_cfg *a, const struct resources_cfg *b)
{
        return patterns_equal(a->gpu_resources, a->n_gpu_resources, b->gpu_resources,
                              b->n_gpu_resources) &&
               patterns_equal(a->mig_resources, a->n_mig_resources, b->mig_resources,
                              b->n_mig_resources);
}

bool config_sharing_equal(const struct sharing_cfg *a, const struct sharing_cfg *b)
{
        if (a->strategy != b->strategy || a->rename_by_default != b->rename_by_default ||
            a->fail_requests_greater_than_one != b->fail_requests_greater_than_one ||
            a->n_resources != b->n_resources)
                return false;
        for (size_t i = 0; i < a->n_resources; i++) {
                const struct sharing_resource_cfg *ra = &a->resources[i], *rb = &b->resources[i];
                if (!streq_ptr(ra->name, rb->name) || !streq_ptr(ra->rename, rb->rename) ||
                    ra->replicas != rb->replicas || ra->devices_kind != rb->devices_kind ||
                    ra->devices_count != rb->devices_count || !strv_equal(ra->devices, rb->devices))
                        return false;
        }
        return true;
}
