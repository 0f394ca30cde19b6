/* NVIDIA's `resources` section of the config file, the family's own
 * section (struct config_section, parsed by config/ like devlet's):
 * resources.gpus and resources.mig pair a glob on a GPU's product name (or
 * a MIG profile name) with the resource the matching devices are served
 * as.  NVIDIA's plugin parses and then ignores them; devlet honours them
 * (resources.c).  Names follow the sharing section's rules
 * (config_resource_name: "h100" is nvidia.com/h100); no name is both a GPU
 * and a MIG resource.  Each error names its node's path and line:column;
 * unknown keys become warnings.
 *
 * Never looks at devices and never logs. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/sections.h"
#include "devices/nvidia/internal.h"

#define LIST_MAX 1024 /* entries in resources.gpus, resources.mig */

static int parse_patterns(struct config_walk *w, const struct devlet_config *next,
                          const struct config_node *map, const char *key,
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
                if ((r = config_walk_required(w, n, "name", path, &s, &node)) < 0)
                        return r;
                config_subpath(sub, sizeof(sub), path, ".name");
                if ((r = config_resource_name(w, next->families, node, sub, &p->name)) < 0)
                        return r;
                for (size_t j = 0; j < n_others; j++)
                        if (strcmp(others[j].name, p->name) == 0)
                                return config_node_error(
                                        w->diag, w->file, node, sub,
                                        "\"%s\" is already resources.%s[%zu]'s name: full GPUs "
                                        "and MIG devices cannot be one resource",
                                        p->name, others_key, j);
        }
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

static void section_clear(void *value)
{
        struct resources_cfg *r = value;
        patterns_free(r->gpu_resources, r->n_gpu_resources);
        patterns_free(r->mig_resources, r->n_mig_resources);
        *r = (struct resources_cfg){ 0 };
}

static int section_parse(const struct config_node *node, const char *file,
                         const struct devlet_config *next, void *out, char ***warnings,
                         struct diag *diag)
{
        static const char *const known[] = { "gpus", "mig", NULL };
        struct config_walk w = { .file = file, .diag = diag, .warnings = warnings };
        struct resources_cfg *res = out;
        int r = 0;
        if (!config_node_is_null(node)) {
                r = config_walk_map(&w, node, "resources", known);
                if (r >= 0)
                        r = parse_patterns(&w, next, node, "gpus", NULL, 0, NULL,
                                           &res->gpu_resources, &res->n_gpu_resources);
                if (r >= 0)
                        r = parse_patterns(&w, next, node, "mig", res->gpu_resources,
                                           res->n_gpu_resources, "gpus", &res->mig_resources,
                                           &res->n_mig_resources);
        }
        if (r < 0)
                section_clear(res);
        return r;
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

static bool section_equal(const void *va, const void *vb)
{
        const struct resources_cfg *a = va, *b = vb;
        return patterns_equal(a->gpu_resources, a->n_gpu_resources, b->gpu_resources,
                              b->n_gpu_resources) &&
               patterns_equal(a->mig_resources, a->n_mig_resources, b->mig_resources,
                              b->n_mig_resources);
}

static json_t *patterns_json(const struct resource_pattern_cfg *p, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) {
                json_t *e = json_object();
                json_object_set_new(e, "pattern", json_string(p[i].pattern));
                json_object_set_new(e, "name", json_string(p[i].name));
                json_array_append_new(a, e);
        }
        return a;
}

static json_t *section_dump(const void *value)
{
        static const struct resources_cfg none;
        const struct resources_cfg *r = value ? value : &none;
        json_t *o = json_object();
        json_object_set_new(o, "gpus", patterns_json(r->gpu_resources, r->n_gpu_resources));
        json_object_set_new(o, "mig", patterns_json(r->mig_resources, r->n_mig_resources));
        return o;
}

const struct config_section nvidia_resources_section = {
        .key = "resources",
        .size = sizeof(struct resources_cfg),
        .parse = section_parse,
        .clear = section_clear,
        .equal = section_equal,
        /* renamed resources change the labels (<resource>.count) and CDI */
        .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        .dump = section_dump,
};

const struct resources_cfg *nvidia_resources_get(const struct devlet_config *cfg)
{
        static const struct resources_cfg none;
        const struct resources_cfg *r = config_backend_section(cfg, &nvidia_resources_section);
        return r ? r : &none;
}
