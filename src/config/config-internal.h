/* Shared between the config module's files only: typed option values
 * (options.c), the YAML node tree (yaml.c), typed reads from it (walk.c)
 * and the section parsers (hostdev.c, sharing.c, health.c).  Nothing
 * outside src/config/ includes this. */
#ifndef DEVLET_CONFIG_CONFIG_INTERNAL_H
#define DEVLET_CONFIG_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* ---- option values (options.c) ---- */

/* One parsed value, in the member that the option's type selects. */
union config_value {
        char *s;     /* CONFIG_STRING (owned) */
        char **list; /* CONFIG_LIST (owned strv) */
        bool b;
        long i;
        int64_t ms; /* CONFIG_DURATION, -1 = infinite */
};

/* Parses text for opt: lists are split on commas; every value is checked
 * against the option's choices.  who names the source in the message
 * ("--mig-strategy", "MIG_STRATEGY", "flags.migStrategy").  Returns 0, or
 * -EINVAL with diag's message set (position left for the caller). */
int config_value_parse(const struct config_option *opt, const char *text, const char *who,
                       union config_value *out, struct config_diag *diag);
/* The same for a list option given as separate items (a YAML list). */
int config_value_parse_items(const struct config_option *opt, char *const *items,
                             const char *who, union config_value *out,
                             struct config_diag *diag);
/* Moves v into cfg (freeing what it replaces); v is consumed. */
void config_value_store(struct devlet_config *cfg, const struct config_option *opt,
                        union config_value *v);
void config_value_clear(const struct config_option *opt, union config_value *v);

/* The option whose config-file key is key, or NULL. */
const struct config_option *config_option_by_key(const char *key);
/* Whether some option key lives under prefix ("flags.plugin"). */
bool config_key_is_section(const char *prefix);

/* true/false, yes/no, on/off, 1/0, case-insensitive. */
int config_parse_bool(const char *s, bool *out);
/* CONFIG_DURATION's syntax: "500ms", "5s", "2m", "1h", "1h30m", a bare
 * number of seconds, or "infinite" (-1).  -EINVAL on anything else or on
 * overflow. */
int config_parse_duration(const char *s, int64_t *out);

/* Sets diag (may be NULL) and returns -EINVAL. */
int config_diag_set(struct config_diag *d, const char *file, int line, int column,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Decides what NVIDIA v0.20's newer options mean once every source is
 * applied (options-nvidia.c): fills the derived fields, adds warnings for
 * what is accepted without effect; -EINVAL with diag for what devlet
 * refuses (tegra discovery, bad IMEX channel IDs, MPS without --mps-root or
 * with mig-strategy mixed). */
int config_nvidia_finish(struct devlet_config *cfg, struct config_diag *diag);

/* ---- the YAML node tree (yaml.c) ---- */

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
int config_node_error(struct config_diag *d, const char *file, const struct config_node *n,
                      const char *path, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* Appends "file:line:col: unknown key "x" (ignored)" for key node k. */
void config_node_warn_unknown(char ***warnings, const char *file, const struct config_node *k);
/* Warns for every key of map not in known (NULL-terminated). */
void config_node_warn_unknown_keys(char ***warnings, const char *file,
                                   const struct config_node *map, const char *const *known);

/* ---- typed reads from the tree (walk.c) ---- */

/* Room for a node's dotted path in messages
 * ("hostDevices.devices[3].groups[0].paths[12].mountPath"). */
#define CONFIG_PATH_MAX 300

/* What a section parser carries along: where errors and warnings go. */
struct config_walk {
        const char *file;
        struct config_diag *diag;
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

/* ---- hostDevices (hostdev.c) ---- */

/* Parses the hostDevices section (node may be a YAML null: no devices).
 * Fills out only on success; -EINVAL with diag otherwise. */
int config_hostdev_parse(const struct config_node *node, const char *file, struct hostdev_cfg *out,
                         char ***warnings, struct config_diag *diag);
void config_hostdev_clear(struct hostdev_cfg *h);

/* ---- sharing and resources (sharing.c) ---- */

/* Parse NVIDIA's `resources` and `sharing` sections (node may be a YAML
 * null: nothing).  Sharing names are checked against resources (MPS takes
 * no MIG resource), so resources is parsed first.  Each fills out only on
 * success; -EINVAL with diag otherwise. */
int config_resources_parse(const struct config_node *node, const char *file,
                           struct resources_cfg *out, char ***warnings,
                           struct config_diag *diag);
int config_sharing_parse(const struct config_node *node, const char *file,
                         const struct resources_cfg *resources, struct sharing_cfg *out,
                         char ***warnings, struct config_diag *diag);
void config_resources_clear(struct resources_cfg *r);
void config_sharing_clear(struct sharing_cfg *s);

/* ---- health (health.c) ---- */

#define CONFIG_HEALTH_QUIET_DEFAULT_MS 60000

/* Parses devlet's `health` section (node may be a YAML null: all defaults).
 * Fills out only on success; -EINVAL with diag otherwise. */
int config_health_parse(const struct config_node *node, const char *file, struct health_cfg *out,
                        char ***warnings, struct config_diag *diag);

/* A DNS-1123 subdomain: at most 253 characters, dot-separated labels of
 * lowercase letters, digits and '-', each starting and ending alphanumeric. */
bool config_valid_dns_subdomain(const char *s);

#endif
