/* The structured sections of the config file: one table row per top-level
 * key (key, parse, clear, where it lives in struct devlet_config), and the
 * parsers of devlet's own sections.  Built on walk.h; the config file's
 * walk (file.c) goes through the table. */
#ifndef DEVLET_CONFIG_SECTIONS_H
#define DEVLET_CONFIG_SECTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "config/walk.h"

/* One top-level section of the config file.  parse fills out (a zeroed
 * value of size bytes) from node, which may be a YAML null; next is the
 * config as the file leaves it so far (the sections before this one in
 * the table in place), for checks across sections.  It returns 0, or
 * -EINVAL with diag set, leaving nothing to free.  clear frees what a
 * value holds (NULL: nothing). */
struct json_t;

struct config_section {
        const char *key; /* "hostDevices" */
        size_t offset, size; /* where the value lives in struct devlet_config */
        int (*parse)(const struct config_node *node, const char *file,
                     const struct devlet_config *next, void *out, char ***warnings,
                     struct diag *diag);
        void (*clear)(void *value);
        /* whether two parsed values mean the same (config_diff) */
        bool (*equal)(const void *a, const void *b);
        unsigned apply; /* what a change needs: CONFIG_APPLY_* flags (config.h), never 0 */
        /* a family's section only, optional: its shape in the start-up
         * config line (a new jansson reference) under its key; value is
         * NULL when the file has none */
        struct json_t *(*dump)(const void *value);
};

/* The sections, in parse order; a row with key NULL ends it.  Adding a
 * section: its struct in struct devlet_config, its parser, one row. */
#define CONFIG_SECTIONS_MAX 16
extern const struct config_section config_sections[];

/* Frees every section's value in cfg. */
void config_sections_clear(struct devlet_config *cfg);

/* ---- hostDevices (hostdev.c) ---- */

/* Parses the hostDevices section (node may be a YAML null: no devices).
 * Fills out only on success; -EINVAL with diag otherwise. */
int config_hostdev_parse(const struct config_node *node, const char *file, struct hostdev_cfg *out,
                         char ***warnings, struct diag *diag);
void config_hostdev_clear(struct hostdev_cfg *h);
bool config_hostdev_equal(const struct hostdev_cfg *a, const struct hostdev_cfg *b);

/* ---- sharing (sharing.c) ---- */

/* Parses the `sharing` section (node may be a YAML null: nothing).  Names
 * and devices follow the rules of the family that claims each name
 * (struct config_sharing_rules in next->families); a family may refuse a
 * name given its own section (NVIDIA: MPS takes no resource its
 * `resources` section names a MIG resource), so the families' sections
 * are parsed first.  Fills out only on success; -EINVAL with diag
 * otherwise. */
int config_sharing_parse(const struct config_node *node, const char *file,
                         const struct devlet_config *next, struct sharing_cfg *out,
                         char ***warnings, struct diag *diag);
void config_sharing_clear(struct sharing_cfg *s);
bool config_sharing_equal(const struct sharing_cfg *a, const struct sharing_cfg *b);
/* A resource name n names, by the rules of the family that claims it ("gpu"
 * -> "nvidia.com/gpu" in *out), for a section that names resources as the
 * sharing section does.  0, or -EINVAL with w->diag at n and path. */
int config_resource_name(struct config_walk *w, const struct config_families *families,
                         const struct config_node *n, const char *path, char **out);

/* ---- health (health.c) ---- */

#define CONFIG_HEALTH_QUIET_DEFAULT_MS 60000

/* Parses devlet's `health` section (node may be a YAML null: all defaults).
 * Fills out only on success; -EINVAL with diag otherwise. */
int config_health_parse(const struct config_node *node, const char *file, struct health_cfg *out,
                        char ***warnings, struct diag *diag);
bool config_health_equal(const struct health_cfg *a, const struct health_cfg *b);


#endif
