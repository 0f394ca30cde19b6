/* The lowest layer of config/, on base's diagnostics (base/diag.h): a YAML
 * document as a small tree of nodes that keep their line:column, and the
 * diagnostics that point at them.  Knows nothing of devlet's options or
 * sections.  walk.h builds on it; section parsers (config/'s own and a
 * family's) reach it through walk.h. */
#ifndef DEVLET_CONFIG_TREE_H
#define DEVLET_CONFIG_TREE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"

enum config_node_kind { CONFIG_NODE_SCALAR, CONFIG_NODE_MAP, CONFIG_NODE_SEQ };

struct config_node {
        enum config_node_kind kind;
        int line, column; /* 1-based */
        bool plain;       /* scalar written without quotes (so "~" or "" may be null) */
        char *text;       /* scalar text, NUL-free */
        /* SEQ: the items; MAP: key, value, key, value... (keys are scalars) */
        struct config_node **items;
        size_t n_items, cap_items;
};

/* The value under key in a mapping, or NULL. */
const struct config_node *config_node_get(const struct config_node *map, const char *key);
/* A plain empty, "~" or "null" scalar: YAML's null. */
bool config_node_is_null(const struct config_node *n);
/* "a mapping", "a list", "a value": for "expected X, found Y" messages. */
const char *config_node_kind_name(const struct config_node *n);

/* Sets diag at n's position to "path: message" and returns -EINVAL. */
int config_node_error(struct diag *d, const char *file, const struct config_node *n,
                      const char *path, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* Appends "file:line:col: unknown key "x" (ignored)" for key node k. */
void config_node_warn_unknown(char ***warnings, const char *file, const struct config_node *k);
/* Warns for the keys of map (at path, for the message) not in known
 * (NULL-terminated), as one config_tally: a few lines however many. */
void config_node_warn_unknown_keys(char ***warnings, const char *file,
                                   const struct config_node *map, const char *path,
                                   const char *const *known);

/* Warnings of one kind (the unknown keys of one mapping, the unknown
 * fields of one list) kept to a few lines whatever the file holds, at the
 * cost of one counter per node: up to CONFIG_TALLY_EACH are told each at
 * its place; more are told as one line at the first one's place, with
 * their count and the first one's text. */
#define CONFIG_TALLY_EACH 3
struct config_tally {
        size_t n;
        const struct config_node *first;
        char *each[CONFIG_TALLY_EACH]; /* the first ones' warnings */
};
/* Counts n (a key or a list item: a scalar); fmt and what follows are its
 * own warning, after "file:line:col: ", formatted only while it may be
 * told on its own. */
void config_tally_add(struct config_tally *t, const char *file, const struct config_node *n,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Appends the tally's warnings to *warnings (warnings NULL: drops them)
 * and empties it: each one's own, or, for more than CONFIG_TALLY_EACH,
 * "file:line:col: <count> <many>, the first "text"" with many the kind in
 * the plural ("unknown keys in GPUConfig (ignored)"). */
void config_tally_flush(struct config_tally *t, char ***warnings, const char *file,
                        const char *many);
/* Empties t without telling (an error ends the walk). */
void config_tally_clear(struct config_tally *t);

/* Builds the tree of one YAML document (the caller caps its size).  Aliases, duplicate keys, NUL characters, deep nesting and too many nodes
 * are errors.  Returns 0 and *out (NULL for an empty document), or -EINVAL
 * with diag set. */
int config_tree_parse(const char *file, const char *data, size_t len, struct config_node **out,
                      struct diag *diag);
void config_tree_free(struct config_node *n);

#endif
