/* The config file's meaning: `version: v1`, the `flags` keys of the option
 * table, and the structured sections, each a row of config_sections (key,
 * parse, clear, where it lives in struct devlet_config) or a section a
 * device family adds (struct config_family's section, kept on the heap).
 *
 * The tree comes from yaml.c.  `flags.*` keys (and any other group of
 * option keys, such as a family's) map onto the option table
 * (options.c); each section's key is handed to its parser, the families'
 * first, then devlet's in table order (sharing may check names against a
 * family's section); any other key
 * is a warning, never an error, so NVIDIA's own files stay loadable.
 * Values and sections are collected first and stored into the config only
 * when the whole file is good.
 *
 * Never logs and never reads files (config_load does). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/options.h"
#include "config/sections.h"

DEFINE_CLEANUP_FUNC(struct config_node, config_tree_free)

/* ---- flags: the option table's keys ---- */

struct walk {
        const struct config_families *families;
        const char *file;
        struct diag *diag;
        char **warnings;
        struct config_pending values;
        size_t unknown; /* unknown keys met, told or not */
        const struct config_node *first_untold;
};

/* Unknown keys told one by one, in file order, before the rest are only
 * counted: a file of 100k of them costs one line more, not 100k. */
#define WALK_UNKNOWN_EACH 16

static void walk_unknown(struct walk *w, const struct config_node *k)
{
        if (w->unknown++ < WALK_UNKNOWN_EACH)
                config_node_warn_unknown(&w->warnings, w->file, k);
        else if (!w->first_untold)
                w->first_untold = k;
}

/* One line for the unknown keys walk_unknown did not tell. */
static void walk_unknown_flush(struct walk *w)
{
        if (!w->first_untold)
                return;
        _cleanup_free_ char *line =
                xasprintf("%s:%d:%d: %zu more unknown keys (ignored), the first \"%.100s\"", w->file,
                          w->first_untold->line, w->first_untold->column,
                          w->unknown - WALK_UNKNOWN_EACH,
                          w->first_untold->text ? w->first_untold->text : "");
        w->warnings = strv_push(w->warnings, line);
}

static void walk_clear(struct walk *w)
{
        config_pending_clear(&w->values);
        strv_free(w->warnings);
}

static int walk_option(struct walk *w, const struct config_option *opt,
                       const struct config_node *n, const char *path)
{
        union config_value v = { 0 };
        int r;
        if (config_node_is_null(n))
                return 0; /* as if absent: the value stays */
        if (n->kind == CONFIG_NODE_SEQ && opt->type == CONFIG_LIST) {
                _cleanup_strv_free_ char **items = NULL;
                for (size_t i = 0; i < n->n_items; i++) {
                        if (n->items[i]->kind != CONFIG_NODE_SCALAR)
                                return config_node_error(w->diag, w->file, n->items[i], path,
                                                         "expected a value, found %s",
                                                         config_node_kind_name(n->items[i]));
                        items = strv_push(items, n->items[i]->text);
                }
                r = config_value_parse_items(w->families, opt, items, path, &v, w->diag);
        } else if (n->kind == CONFIG_NODE_SCALAR) {
                r = config_value_parse(w->families, opt, n->text, path, &v, w->diag);
        } else {
                return config_node_error(w->diag, w->file, n, path, "expected %s, found %s",
                                         opt->type == CONFIG_LIST ? "a list or a value"
                                                                  : "a value",
                                         config_node_kind_name(n));
        }
        if (r < 0) {
                /* the message names the key; add where it is */
                snprintf(w->diag->file, sizeof(w->diag->file), "%s", w->file);
                w->diag->line = n->line;
                w->diag->column = n->column;
                return r;
        }
        config_pending_add(&w->values, opt, &v);
        return 0;
}

/* Whether key (under prefix) is an option's or a group of options': the
 * keys a section (health) leaves to the rows a family adds under it. */
static bool option_key(const struct config_families *f, const char *prefix, const char *key)
{
        char path[256];
        if (strchr(key, '.') ||
            (size_t)snprintf(path, sizeof(path), "%s.%s", prefix, key) >= sizeof(path))
                return false;
        return config_option_by_key(f, path) || config_key_is_section(f, path);
}

static int walk_section(struct walk *w, const struct config_node *map, const char *prefix);

/* The option rows under a section's key ("health.amd.disabled" under
 * "health"): those keys only; the section's parser warns about the rest. */
static int walk_section_rows(struct walk *w, const struct config_node *map, const char *prefix)
{
        if (map->kind != CONFIG_NODE_MAP)
                return 0; /* the section's parser says what is wrong */
        for (size_t i = 0; i + 1 < map->n_items; i += 2) {
                const struct config_node one = { .kind = CONFIG_NODE_MAP,
                                                 .items = (struct config_node **)&map->items[i],
                                                 .n_items = 2 };
                if (!option_key(w->families, prefix, map->items[i]->text))
                        continue;
                int r = walk_section(w, &one, prefix);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A mapping of option keys under prefix ("flags", "flags.plugin"). */
static int walk_section(struct walk *w, const struct config_node *map, const char *prefix)
{
        if (config_node_is_null(map))
                return 0;
        if (map->kind != CONFIG_NODE_MAP)
                return config_node_error(w->diag, w->file, map, prefix,
                                         "expected a mapping, found %s",
                                         config_node_kind_name(map));
        for (size_t i = 0; i + 1 < map->n_items; i += 2) {
                const struct config_node *k = map->items[i], *v = map->items[i + 1];
                char path[256];
                /* a dotted key ("plugin.passDeviceSpecs") is not a path */
                if (strchr(k->text, '.') ||
                    (size_t)snprintf(path, sizeof(path), "%s.%s", prefix, k->text) >=
                            sizeof(path)) {
                        walk_unknown(w, k);
                        continue;
                }
                const struct config_option *opt = config_option_by_key(w->families, path);
                int r = 0;
                if (opt)
                        r = walk_option(w, opt, v, path);
                else if (config_key_is_section(w->families, path))
                        r = walk_section(w, v, path);
                else
                        walk_unknown(w, k);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int check_version(struct walk *w, const struct config_node *root)
{
        const struct config_node *v = config_node_get(root, "version");
        if (!v)
                return config_node_error(w->diag, w->file, root, "",
                                         "missing \"version: v1\"");
        if (v->kind != CONFIG_NODE_SCALAR || strcmp(v->text, "v1") != 0)
                return config_node_error(w->diag, w->file, v, "version",
                                         "unsupported version %s%.100s%s (expected v1)",
                                         v->kind == CONFIG_NODE_SCALAR ? "\"" : "",
                                         v->kind == CONFIG_NODE_SCALAR
                                                 ? v->text
                                                 : config_node_kind_name(v),
                                         v->kind == CONFIG_NODE_SCALAR ? "\"" : "");
        return 0;
}

/* ---- the structured sections ---- */

static int parse_hostdev(const struct config_node *node, const char *file,
                         const struct devlet_config *next, void *out, char ***warnings,
                         struct diag *diag)
{
        return config_hostdev_parse(node, file, out, warnings, diag);
}

static int parse_sharing(const struct config_node *node, const char *file,
                         const struct devlet_config *next, void *out, char ***warnings,
                         struct diag *diag)
{
        return config_sharing_parse(node, file, next, out, warnings, diag);
}

static int parse_health(const struct config_node *node, const char *file,
                        const struct devlet_config *next, void *out, char ***warnings,
                        struct diag *diag)
{
        return config_health_parse(node, file, out, warnings, diag);
}

static void clear_hostdev(void *p)
{
        config_hostdev_clear(p);
}

static void clear_sharing(void *p)
{
        config_sharing_clear(p);
}

static bool equal_hostdev(const void *a, const void *b)
{
        return config_hostdev_equal(a, b);
}

static bool equal_sharing(const void *a, const void *b)
{
        return config_sharing_equal(a, b);
}

static bool equal_health(const void *a, const void *b)
{
        return config_health_equal(a, b);
}

#define SECTION(k, field, parse_fn, clear_fn, equal_fn, apply_flags)                        \
        {                                                                                   \
                .key = k, .offset = offsetof(struct devlet_config, field),                  \
                .size = sizeof(((struct devlet_config *)0)->field), .parse = parse_fn,      \
                .clear = clear_fn, .equal = equal_fn, .apply = apply_flags                  \
        }

/* In parse order, after the families' own sections (sharing may check its
 * names against one: NVIDIA's resources).  What a change needs: every
 * section's devices are the backends' (a fresh scan); host devices and
 * shared resources also change the labels (<resource>.count, replicas)
 * and the CDI specs. */
const struct config_section config_sections[] = {
        SECTION("hostDevices", hostdev, parse_hostdev, clear_hostdev, equal_hostdev,
                CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS),
        SECTION("sharing", sharing, parse_sharing, clear_sharing, equal_sharing,
                CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS),
        SECTION("health", health, parse_health, NULL, equal_health, CONFIG_APPLY_RESERVE),
        { .key = NULL },
};

/* Family j's section, or NULL (none, or past the last family). */
static const struct config_section *family_section(const struct config_families *f, size_t j)
{
        return j < CONFIG_FAMILIES_MAX && f->v[j] ? f->v[j]->section : NULL;
}

#define EACH_FAMILY(f, j) for (size_t j = 0; j < CONFIG_FAMILIES_MAX && (f)->v[j]; j++)

static const struct config_section *section_by_key(const struct config_families *f,
                                                   const char *key)
{
        for (const struct config_section *s = config_sections; s->key; s++)
                if (strcmp(s->key, key) == 0)
                        return s;
        EACH_FAMILY(f, j)
                if (family_section(f, j) && strcmp(family_section(f, j)->key, key) == 0)
                        return family_section(f, j);
        return NULL;
}

/* The sections of one file, parsed in table order into scratch values and
 * held until the whole file is good; NULL: not in the file. */
struct parsed {
        const struct config_families *families;
        void *own[CONFIG_SECTIONS_MAX];     /* by config_sections index */
        void *family[CONFIG_FAMILIES_MAX];  /* by family index */
};

static void value_free(const struct config_section *s, void *v)
{
        if (v && s && s->clear)
                s->clear(v);
        free(v);
}

static void parsed_clear(struct parsed *p)
{
        for (size_t i = 0; i < CONFIG_SECTIONS_MAX && config_sections[i].key; i++)
                value_free(&config_sections[i], p->own[i]);
        EACH_FAMILY(p->families, j)
                if (p->family[j])
                        value_free(family_section(p->families, j), p->family[j]);
}

/* Parses section s when root holds it: *out gets its value (heap). */
static int parse_one(const struct config_section *s, const char *file,
                     const struct config_node *root, const struct devlet_config *next, void **out,
                     char ***warnings, struct diag *diag)
{
        const struct config_node *node = config_node_get(root, s->key);
        if (!node)
                return 0;
        /* without the keys a family's option rows own (walk_section_rows) */
        _cleanup_free_ struct config_node **items = NULL;
        struct config_node own;
        if (node->kind == CONFIG_NODE_MAP && config_key_is_section(next->families, s->key)) {
                own = *node;
                own.items = items = xcalloc(node->n_items + 1, sizeof(*items));
                own.n_items = 0;
                for (size_t i = 0; i + 1 < node->n_items; i += 2) {
                        if (option_key(next->families, s->key, node->items[i]->text))
                                continue;
                        items[own.n_items++] = node->items[i];
                        items[own.n_items++] = node->items[i + 1];
                }
                own.cap_items = own.n_items;
                node = &own;
        }
        void *v = xcalloc(1, s->size);
        int r = s->parse(node, file, next, v, warnings, diag);
        if (r < 0) {
                free(v);
                return r;
        }
        *out = v;
        return 0;
}

/* Parses every section root holds: the families', then devlet's own.
 * next starts as a shallow copy of cfg and gets each parsed section in
 * turn, so a later section sees what the file will leave (sharing: the
 * resources NVIDIA's section names); it is only read. */
static int parse_sections(const char *file, const struct config_node *root,
                          const struct devlet_config *cfg, struct parsed *out, char ***warnings,
                          struct diag *diag)
{
        struct devlet_config next = *cfg;
        EACH_FAMILY(cfg->families, j) {
                const struct config_section *s = family_section(cfg->families, j);
                if (!s)
                        continue;
                int r = parse_one(s, file, root, &next, &out->family[j], warnings, diag);
                if (r < 0)
                        return r;
                if (out->family[j])
                        next.backend_sections[j] = out->family[j];
        }
        for (size_t i = 0; config_sections[i].key; i++) {
                const struct config_section *s = &config_sections[i];
                int r = parse_one(s, file, root, &next, &out->own[i], warnings, diag);
                if (r < 0)
                        return r;
                if (out->own[i])
                        memcpy((char *)&next + s->offset, out->own[i], s->size);
        }
        return 0;
}

/* Moves the parsed sections into cfg, freeing what they replace. */
static void store_sections(struct devlet_config *cfg, struct parsed *p)
{
        for (size_t i = 0; config_sections[i].key; i++) {
                const struct config_section *s = &config_sections[i];
                if (!p->own[i])
                        continue;
                void *field = (char *)cfg + s->offset;
                if (s->clear)
                        s->clear(field);
                memcpy(field, p->own[i], s->size);
                free(TAKE_PTR(p->own[i]));
        }
        EACH_FAMILY(cfg->families, j) {
                if (!p->family[j])
                        continue;
                if (cfg->backend_sections[j])
                        value_free(family_section(cfg->families, j), cfg->backend_sections[j]);
                cfg->backend_sections[j] = TAKE_PTR(p->family[j]);
        }
}

void config_sections_clear(struct devlet_config *cfg)
{
        for (const struct config_section *s = config_sections; s->key; s++)
                if (s->clear)
                        s->clear((char *)cfg + s->offset);
        EACH_FAMILY(cfg->families, j)
                if (cfg->backend_sections[j])
                        value_free(family_section(cfg->families, j),
                                   TAKE_PTR(cfg->backend_sections[j]));
}

const void *config_backend_section(const struct devlet_config *cfg,
                                   const struct config_section *s)
{
        EACH_FAMILY(cfg->families, j)
                if (s && family_section(cfg->families, j) == s)
                        return cfg->backend_sections[j];
        return NULL;
}

/* ---- the file ---- */

int config_parse_yaml(const char *file, const char *data, size_t len, struct devlet_config *cfg,
                      struct diag *diag)
{
        struct diag scratch;
        if (!diag)
                diag = &scratch;
        memset(diag, 0, sizeof(*diag));
        if (!file)
                file = "<config>";
        if (len > CONFIG_FILE_MAX)
                return diag_set_at(diag, -EINVAL, file, 0, 0, "larger than %d bytes",
                                   CONFIG_FILE_MAX);

        _cleanup_(config_tree_freep) struct config_node *root = NULL;
        int r = config_tree_parse(file, data, len, &root, diag);
        if (r < 0)
                return r;
        if (!root || config_node_is_null(root)) /* empty, or comments only */
                return diag_set_at(diag, -EINVAL, file, 1, 1, "missing \"version: v1\"");
        if (root->kind != CONFIG_NODE_MAP)
                return config_node_error(diag, file, root, "",
                                         "expected a mapping at the top, found %s",
                                         config_node_kind_name(root));

        _cleanup_(walk_clear) struct walk w = { .families = cfg->families, .file = file,
                                                .diag = diag };
        r = check_version(&w, root);
        if (r < 0)
                return r;

        /* flags first, then unknown keys warned in file order */
        for (size_t i = 0; i + 1 < root->n_items; i += 2) {
                const struct config_node *k = root->items[i], *v = root->items[i + 1];
                if (strcmp(k->text, "version") == 0)
                        continue;
                if (section_by_key(cfg->families, k->text))
                        r = config_key_is_section(cfg->families, k->text)
                                    ? walk_section_rows(&w, v, k->text)
                                    : 0;
                else if (config_key_is_section(cfg->families, k->text)) /* flags, or a family's group */
                        r = walk_section(&w, v, k->text);
                else
                        walk_unknown(&w, k);
                if (r < 0)
                        return r;
        }
        walk_unknown_flush(&w);
        _cleanup_(parsed_clear) struct parsed sec = { .families = cfg->families };
        r = parse_sections(file, root, cfg, &sec, &w.warnings, diag);
        if (r < 0)
                return r;

        /* all good: only now does cfg change */
        config_pending_store(&w.values, cfg);
        store_sections(cfg, &sec);
        for (size_t i = 0; w.warnings && w.warnings[i]; i++)
                cfg->warnings = strv_push(cfg->warnings, w.warnings[i]);
        return 0;
}
