/* Typed reads from the config tree (tree.h) with their positions, and the
 * scalar syntaxes every layer above shares (booleans, durations).  Section
 * parsers (sections.h) and the option table (options.h) build on it. */
#ifndef DEVLET_CONFIG_WALK_H
#define DEVLET_CONFIG_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "config/tree.h"

/* true/false, yes/no, on/off, 1/0, case-insensitive. */
int config_parse_bool(const char *s, bool *out);
/* CONFIG_DURATION's syntax: "500ms", "5s", "2m", "1h", "1h30m", a bare
 * number of seconds, or "infinite" (-1).  -EINVAL on anything else or on
 * overflow. */
int config_parse_duration(const char *s, int64_t *out);
/* A decimal integer of at least 0 that fits a long; -EINVAL otherwise. */
int config_parse_nonneg_long(const char *s, long *out);

/* Room for a node's dotted path in messages
 * ("hostDevices.devices[3].groups[0].paths[12].mountPath"). */
#define CONFIG_PATH_MAX 300

/* What a section parser carries along: where errors and warnings go. */
struct config_walk {
        const char *file;
        struct diag *diag;
        char ***warnings;
};

/* parent + the formatted suffix ("hostDevices.devices[0]" + ".name") into
 * buf, truncated if it must be; returns buf. */
const char *config_subpath(char *buf, size_t size, const char *parent, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* Each returns 0, or -EINVAL with w->diag set at the offending node and
 * its path.  A key that is absent or null is "not given": *out is left
 * NULL (strings, lists) or untouched (bool, uint), and *node (may be NULL)
 * gets the value node or NULL. */
int config_walk_expect(struct config_walk *w, const struct config_node *n,
                       enum config_node_kind kind, const char *path);
/* n must be a mapping; its keys not in known (NULL-terminated) are warned. */
int config_walk_map(struct config_walk *w, const struct config_node *n, const char *path,
                    const char *const *known);
/* A scalar; *out points into the tree. */
int config_walk_string(struct config_walk *w, const struct config_node *map, const char *key,
                       const char *parent, const char **out, const struct config_node **node);
/* The same, but "not given" is an error ("\"key\" is required" at the map). */
int config_walk_required(struct config_walk *w, const struct config_node *map, const char *key,
                         const char *parent, const char **out, const struct config_node **node);
int config_walk_bool(struct config_walk *w, const struct config_node *map, const char *key,
                     const char *parent, bool *out, const struct config_node **node);
/* A decimal integer from min to max. */
int config_walk_uint(struct config_walk *w, const struct config_node *map, const char *key,
                     const char *parent, unsigned min, unsigned max, unsigned *out,
                     const struct config_node **node);
/* A list node. */
int config_walk_list(struct config_walk *w, const struct config_node *map, const char *key,
                     const char *parent, const struct config_node **out);

#endif
