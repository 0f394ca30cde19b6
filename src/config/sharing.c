/* The `sharing` section of the config file (NVIDIA's format, which every
 * family's sharing uses), and the resource names a family's section may
 * share with it (config_resource_name).
 *
 * sharing.timeSlicing and sharing.mps replicate resources: the devices of
 * each listed resource (all, the first N, or a list of selectors) are
 * advertised `replicas` times each.  The two are mutually exclusive.
 *
 * Which names and selectors are good is the families' say: a name belongs
 * to the family whose domain it carries (or, without a domain, to the
 * family that takes bare names: "gpu" is nvidia.com/gpu; a bare `rename`
 * stays in the domain of the resource it renames), must be a valid
 * resource name and pass the family's own rule; each devices entry goes
 * through the family's grammar, which gives the canonical form its backend
 * compares.  Each error names its node's path and line:column; unknown
 * keys become warnings; the result reaches the caller only when the whole
 * section is good.
 *
 * Names no family and never looks at devices (each backend matches the
 * selectors against its own, devices/sharing.c); never logs. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/sections.h"

#define SHARED_SUFFIX ".shared"
#define LIST_MAX 1024     /* entries in sharing.*.resources */
#define REPLICAS_MAX 1024
#define DEVICES_MAX 1024  /* a device count and a devices list's length */

/* ---- names ---- */

#define EACH_RULES(f, j, r)                                                                 \
        for (size_t j = 0; j < CONFIG_FAMILIES_MAX && (f)->v[j]; j++)                      \
                for (const struct config_sharing_rules *r = (f)->v[j]->sharing; r; r = NULL)

/* The rules of the family that claims s, and where its name starts. */
static const struct config_sharing_rules *rules_of(const struct config_families *f,
                                                   const char *s, const char **name)
{
        EACH_RULES(f, j, r) {
                size_t n = strlen(r->domain);
                if (strncmp(s, r->domain, n) == 0 && s[n] == '/') {
                        *name = s + n + 1;
                        return r;
                }
        }
        if (strchr(s, '/'))
                return NULL;
        EACH_RULES(f, j, r)
                if (r->bare_names) {
                        *name = s;
                        return r;
                }
        return NULL;
}

static int unclaimed(struct config_walk *w, const struct config_families *f,
                     const struct config_node *n, const char *path)
{
        char domains[256] = "";
        EACH_RULES(f, j, r)
                if (r->bare_names)
                        return config_node_error(w->diag, w->file, n, path,
                                                 "\"%.100s\" is not in the %s domain (write "
                                                 "\"%s/<name>\" or just \"<name>\")",
                                                 n->text, r->domain, r->domain);
        EACH_RULES(f, j, r)
                snprintf(domains + strlen(domains), sizeof(domains) - strlen(domains), "%s%s",
                         domains[0] ? ", " : "", r->domain);
        return config_node_error(w->diag, w->file, n, path,
                                 "\"%.100s\" is not a resource of a family that shares "
                                 "devices (%s)",
                                 n->text, domains[0] ? domains : "none does");
}

/* "<r's domain>/<name>" in *out when it is a valid name by r's rules. */
static int in_domain(struct config_walk *w, const struct config_sharing_rules *r,
                     const char *name, const struct config_node *n, const char *path, char **out)
{
        _cleanup_free_ char *full = xasprintf("%s/%s", r->domain, name);
        if ((r->valid_name && !r->valid_name(name)) || !config_valid_resource_name(full))
                return config_node_error(w->diag, w->file, n, path,
                                         "\"%.100s\" is not a valid resource name%s%s%s",
                                         n->text, r->name_rule ? " (" : "",
                                         r->name_rule ? r->name_rule : "",
                                         r->name_rule ? ")" : "");
        *out = TAKE_PTR(full);
        return 0;
}

/* "gpu" or "nvidia.com/gpu" -> "nvidia.com/gpu" in *out, by the rules of
 * the family that claims it (*rules, may be NULL). */
static int resource_name(struct config_walk *w, const struct config_families *f,
                         const struct config_node *n, const char *path, char **out,
                         const struct config_sharing_rules **rules)
{
        const char *name;
        const struct config_sharing_rules *r = rules_of(f, n->text, &name);
        if (!r)
                return unclaimed(w, f, n, path);
        int rc = in_domain(w, r, name, n, path, out);
        if (rc == 0 && rules)
                *rules = r;
        return rc;
}

/* A rename: a bare name ("gpu-shared") stays in the domain of the
 * resource it renames (amd.com/gpu -> amd.com/gpu-shared), as NVIDIA's
 * bare names do; a full name must be a resource of a family that shares
 * devices. */
static int rename_name(struct config_walk *w, const struct config_families *f,
                       const struct config_sharing_rules *of, const struct config_node *n,
                       const char *path, char **out)
{
        if (strchr(n->text, '/') || !of)
                return resource_name(w, f, n, path, out, NULL);
        return in_domain(w, of, n->text, n, path, out);
}

/* A required key whose value is a resource name. */
static int get_resource_name(struct config_walk *w, const struct config_families *f,
                             const struct config_node *map, const char *key, const char *parent,
                             char **out, const struct config_node **node,
                             const struct config_sharing_rules **rules)
{
        const char *s;
        char path[CONFIG_PATH_MAX];
        int r = config_walk_required(w, map, key, parent, &s, node);
        if (r < 0)
                return r;
        return resource_name(w, f, *node, config_subpath(path, sizeof(path), parent, ".%s", key),
                             out, rules);
}

/* A family's refusal (why's message) as the error at node n. */
static int refused(struct config_walk *w, const struct config_node *n, const char *path,
                   const struct diag *why)
{
        return config_node_error(w->diag, w->file, n, path, "%s",
                                 why->message[0] ? why->message : "refused");
}

int config_resource_name(struct config_walk *w, const struct config_families *families,
                         const struct config_node *n, const char *path, char **out)
{
        return resource_name(w, families, n, path, out, NULL);
}

/* ---- sharing ---- */

struct replicated {
        const char *path; /* "sharing.timeSlicing" */
        enum sharing_strategy strategy;
        const struct devlet_config *next;
};

/* Decimal digits only, from 1 to max. */
static bool parse_count(const char *s, unsigned max, unsigned *out)
{
        unsigned v = 0;
        for (size_t i = 0; s[i]; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return false;
                v = v * 10 + (unsigned)(s[i] - '0');
                if (v > max)
                        return false;
        }
        *out = v;
        return s[0] && v > 0;
}

static int parse_devices(struct config_walk *w, const struct config_node *map, const char *path,
                         const struct replicated *ctx, const struct config_sharing_rules *rules,
                         struct sharing_resource_cfg *out)
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
                if (!parse_count(n->text, DEVICES_MAX, &count))
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
                struct diag why = { 0 };
                if (rules->device(d->text, ctx->strategy, &canon, &why) < 0)
                        return refused(w, d, item, &why);
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

        const struct config_sharing_rules *rules;
        if ((r = get_resource_name(w, ctx->next->families, n, "name", path, &out->name,
                                   &name_node, &rules)) < 0)
                return r;
        config_subpath(sub, sizeof(sub), path, ".name");
        struct diag why = { 0 };
        if (rules->refuse && rules->refuse(out->name, ctx->strategy, ctx->next, &why) < 0)
                return refused(w, name_node, sub, &why);
        for (size_t i = 0; i < done->n_resources; i++)
                if (strcmp(done->resources[i].name, out->name) == 0)
                        return config_node_error(w->diag, w->file, name_node, sub,
                                                 "\"%s\" is already listed as %s.resources[%zu]",
                                                 out->name, ctx->path, i);

        if ((r = config_walk_string(w, n, "rename", path, &s, &rename_node)) < 0)
                return r;
        if (s) {
                config_subpath(sub, sizeof(sub), path, ".rename");
                if ((r = rename_name(w, ctx->next->families, rules, rename_node, sub,
                                     &out->rename)) < 0)
                        return r;
        } else {
                rename_node = NULL;
        }

        if ((r = config_walk_required(w, n, "replicas", path, &s, &node)) < 0)
                return r;
        if ((r = config_walk_uint(w, n, "replicas", path, 2, REPLICAS_MAX, &out->replicas,
                                  NULL)) < 0)
                return r;

        if ((r = parse_devices(w, n, path, ctx, rules, out)) < 0)
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
                         const struct devlet_config *next, struct sharing_cfg *out,
                         char ***warnings, struct diag *diag)
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
                                                  next };
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
                        struct replicated ctx = { "sharing.mps", SHARING_MPS, next };
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
