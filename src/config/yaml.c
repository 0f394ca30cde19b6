/* The bottom of config/: libyaml events -> a small node tree with
 * positions, and the diagnostics that point into it.
 *
 * The tree keeps each node's 1-based line:column (libyaml's marks are
 * 0-based) so every error and warning points at the text to fix.  Building
 * it is where hostile input is bounded: the size is capped, aliases are
 * refused (no billion-laughs expansion), nesting depth and node count are
 * capped, duplicate keys and NUL characters are errors.  What the tree means
 * is file.c's business.  Warnings of one kind are tallied (config_tally),
 * so a file of many unknown keys says a few lines, not one per key.
 *
 * Never logs and never reads files (config_load does). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/tree.h"

#define NODE_MAX 200000 /* a real config has hundreds */
#define DEPTH_MAX 64

/* ---- nodes ---- */

void config_tree_free(struct config_node *n)
{
        if (!n)
                return;
        for (size_t i = 0; i < n->n_items; i++)
                config_tree_free(n->items[i]);
        free(n->items);
        free(n->text);
        free(n);
}

const struct config_node *config_node_get(const struct config_node *map, const char *key)
{
        if (!map || map->kind != CONFIG_NODE_MAP)
                return NULL;
        for (size_t i = 0; i + 1 < map->n_items; i += 2)
                if (strcmp(map->items[i]->text, key) == 0)
                        return map->items[i + 1];
        return NULL;
}

bool config_node_is_null(const struct config_node *n)
{
        return n && n->kind == CONFIG_NODE_SCALAR && n->plain &&
               (!n->text[0] || strcmp(n->text, "~") == 0 || strcmp(n->text, "null") == 0 ||
                strcmp(n->text, "Null") == 0 || strcmp(n->text, "NULL") == 0);
}

const char *config_node_kind_name(const struct config_node *n)
{
        switch (n->kind) {
        case CONFIG_NODE_MAP:
                return "a mapping";
        case CONFIG_NODE_SEQ:
                return "a list";
        case CONFIG_NODE_SCALAR:
                break;
        }
        return "a value";
}

int config_node_error(struct diag *d, const char *file, const struct config_node *n,
                      const char *path, const char *fmt, ...)
{
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return diag_set_at(d, -EINVAL, file, n ? n->line : 0, n ? n->column : 0, "%s%s%s", path,
                           path[0] ? ": " : "", msg);
}

void config_node_warn_unknown(char ***warnings, const char *file, const struct config_node *k)
{
        _cleanup_free_ char *w = xasprintf("%s:%d:%d: unknown key \"%.100s\" (ignored)", file,
                                           k->line, k->column, k->text);
        *warnings = strv_push(*warnings, w);
}

void config_node_warn_unknown_keys(char ***warnings, const char *file,
                                   const struct config_node *map, const char *path,
                                   const char *const *known)
{
        if (!map || map->kind != CONFIG_NODE_MAP)
                return;
        _cleanup_(config_tally_clear) struct config_tally unknown = { 0 };
        for (size_t i = 0; i + 1 < map->n_items; i += 2) {
                const struct config_node *k = map->items[i];
                bool found = false;
                for (size_t j = 0; known[j] && !found; j++)
                        found = strcmp(k->text, known[j]) == 0;
                if (!found)
                        config_tally_add(&unknown, file, k, "unknown key \"%.100s\" (ignored)",
                                         k->text);
        }
        _cleanup_free_ char *many = xasprintf("unknown keys in %s (ignored)", path);
        config_tally_flush(&unknown, warnings, file, many);
}

void config_tally_add(struct config_tally *t, const char *file, const struct config_node *n,
                      const char *fmt, ...)
{
        if (t->n < CONFIG_TALLY_EACH) {
                va_list ap;
                va_start(ap, fmt);
                _cleanup_free_ char *msg = xvasprintf(fmt, ap);
                va_end(ap);
                t->each[t->n] = xasprintf("%s:%d:%d: %s", file, n->line, n->column, msg);
        }
        t->first = t->first ? t->first : n;
        t->n++;
}

void config_tally_flush(struct config_tally *t, char ***warnings, const char *file,
                        const char *many)
{
        if (warnings && t->n > CONFIG_TALLY_EACH) {
                _cleanup_free_ char *w = xasprintf("%s:%d:%d: %zu %s, the first \"%.100s\"", file,
                                                   t->first->line, t->first->column, t->n, many,
                                                   t->first->text ? t->first->text : "");
                *warnings = strv_push(*warnings, w);
        } else if (warnings) {
                for (size_t i = 0; i < t->n; i++)
                        *warnings = strv_push(*warnings, t->each[i]);
        }
        config_tally_clear(t);
}

void config_tally_clear(struct config_tally *t)
{
        for (size_t i = 0; i < CONFIG_TALLY_EACH; i++)
                free(t->each[i]);
        *t = (struct config_tally){ 0 };
}

/* ---- building the tree ---- */

struct builder {
        const char *file;
        struct diag *diag;
        struct config_node *root;
        struct config_node *stack[DEPTH_MAX];
        size_t depth;
        size_t n_nodes;
        bool seen_document;
};

struct key_ref {
        const char *text;
        size_t index;
};

static int key_ref_cmp(const void *a, const void *b)
{
        const struct key_ref *x = a, *y = b;
        int c = strcmp(x->text, y->text);
        if (c)
                return c;
        return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorting makes this O(n log n) even for a hostile mapping with many keys. */
static int check_duplicate_keys(struct builder *b, const struct config_node *map)
{
        size_t n = map->n_items / 2;
        if (n < 2)
                return 0;
        _cleanup_free_ struct key_ref *keys = xmalloc(n * sizeof(*keys));
        for (size_t i = 0; i < n; i++)
                keys[i] = (struct key_ref){ map->items[2 * i]->text, 2 * i };
        qsort(keys, n, sizeof(*keys), key_ref_cmp);
        size_t second = SIZE_MAX;
        for (size_t i = 1; i < n; i++)
                if (strcmp(keys[i - 1].text, keys[i].text) == 0 && keys[i].index < second)
                        second = keys[i].index;
        if (second == SIZE_MAX)
                return 0;
        const struct config_node *k = map->items[second];
        return config_node_error(b->diag, b->file, k, "", "duplicate key \"%.100s\"", k->text);
}

static struct config_node *node_new(enum config_node_kind kind, const yaml_mark_t *mark)
{
        struct config_node *n = xcalloc(1, sizeof(*n));
        n->kind = kind;
        n->line = (int)mark->line + 1;
        n->column = (int)mark->column + 1;
        return n;
}

/* Hands n to the tree (root, or the open container) before any check, so
 * that freeing the root always frees it. */
static int attach(struct builder *b, struct config_node *n)
{
        if (++b->n_nodes > NODE_MAX) {
                int r = config_node_error(b->diag, b->file, n, "", "more than %d YAML nodes",
                                          NODE_MAX);
                config_tree_free(n);
                return r;
        }
        if (b->depth == 0) {
                b->root = n;
                return 0;
        }
        struct config_node *parent = b->stack[b->depth - 1];
        xgrow((void **)&parent->items, &parent->cap_items, parent->n_items + 1,
              sizeof(*parent->items));
        parent->items[parent->n_items++] = n;
        if (parent->kind == CONFIG_NODE_MAP && parent->n_items % 2 == 1 &&
            n->kind != CONFIG_NODE_SCALAR)
                return config_node_error(b->diag, b->file, n, "",
                                         "mapping keys must be plain values, not %s",
                                         config_node_kind_name(n));
        return 0;
}

static int on_event(struct builder *b, const yaml_event_t *ev, bool *done)
{
        struct config_node *n;
        int r;

        switch (ev->type) {
        case YAML_NO_EVENT:
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
                return 0;
        case YAML_STREAM_END_EVENT:
                *done = true;
                return 0;
        case YAML_DOCUMENT_START_EVENT:
                if (b->seen_document) {
                        n = node_new(CONFIG_NODE_SCALAR, &ev->start_mark);
                        r = config_node_error(b->diag, b->file, n, "",
                                              "only one YAML document is allowed");
                        config_tree_free(n);
                        return r;
                }
                b->seen_document = true;
                return 0;
        case YAML_ALIAS_EVENT:
                n = node_new(CONFIG_NODE_SCALAR, &ev->start_mark);
                r = config_node_error(b->diag, b->file, n, "",
                                      "YAML aliases (*%.100s) are not supported",
                                      (const char *)ev->data.alias.anchor);
                config_tree_free(n);
                return r;
        case YAML_SCALAR_EVENT: {
                const char *v = (const char *)ev->data.scalar.value;
                size_t len = ev->data.scalar.length;
                n = node_new(CONFIG_NODE_SCALAR, &ev->start_mark);
                n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                n->text = xstrndup(v, len);
                r = attach(b, n);
                if (r < 0)
                        return r;
                if (memchr(v, '\0', len))
                        return config_node_error(b->diag, b->file, n, "",
                                                 "NUL characters are not allowed");
                return 0;
        }
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
                n = node_new(ev->type == YAML_MAPPING_START_EVENT ? CONFIG_NODE_MAP
                                                                  : CONFIG_NODE_SEQ,
                             &ev->start_mark);
                r = attach(b, n);
                if (r < 0)
                        return r;
                if (b->depth == DEPTH_MAX)
                        return config_node_error(b->diag, b->file, n, "",
                                                 "nested deeper than %d levels", DEPTH_MAX);
                b->stack[b->depth++] = n;
                return 0;
        case YAML_SEQUENCE_END_EVENT:
                b->depth--;
                return 0;
        case YAML_MAPPING_END_EVENT:
                n = b->stack[--b->depth];
                return check_duplicate_keys(b, n);
        }
        return 0;
}

/* libyaml reports reader errors (bad UTF-8, control characters) as a byte
 * offset; the others with a mark. */
static int syntax_error(struct builder *b, const yaml_parser_t *p, const char *data, size_t len)
{
        int line, column;
        if (p->error == YAML_MEMORY_ERROR)
                abort(); /* as xmalloc would */
        if (p->error == YAML_READER_ERROR) {
                line = 1, column = 1;
                for (size_t i = 0; i < p->problem_offset && i < len; i++) {
                        if (data[i] == '\n')
                                line++, column = 1;
                        else if (((unsigned char)data[i] & 0xc0) != 0x80)
                                column++;
                }
        } else {
                line = (int)p->problem_mark.line + 1;
                column = (int)p->problem_mark.column + 1;
        }
        const char *problem = p->problem ? p->problem : "invalid YAML";
        if (p->context && p->error != YAML_READER_ERROR)
                return diag_set_at(b->diag, -EINVAL, b->file, line, column,
                                   "%s (%s started at %d:%d)", problem, p->context,
                                   (int)p->context_mark.line + 1,
                                   (int)p->context_mark.column + 1);
        return diag_set_at(b->diag, -EINVAL, b->file, line, column, "%s", problem);
}

int config_tree_parse(const char *file, const char *data, size_t len, struct config_node **out,
                      struct diag *diag)
{
        struct builder b = { .file = file, .diag = diag };
        yaml_parser_t parser;
        if (!yaml_parser_initialize(&parser))
                abort();
        yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);

        int r = 0;
        bool done = false;
        while (r == 0 && !done) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&parser, &ev)) {
                        r = syntax_error(&b, &parser, data, len);
                        break;
                }
                r = on_event(&b, &ev, &done);
                yaml_event_delete(&ev);
        }
        yaml_parser_delete(&parser);
        if (r < 0) {
                config_tree_free(b.root);
                return r;
        }
        *out = b.root;
        return 0;
}

