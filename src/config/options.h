/* The option table's typed values (options.c): parsing text for a row,
 * storing a value into struct devlet_config (or the family's values block
 * that holds the row), and finding rows by flag or config-file key.  Used by the config file's walk (file.c) and the loader
 * (load.c). */
#ifndef DEVLET_CONFIG_OPTIONS_H
#define DEVLET_CONFIG_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "config/walk.h"

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
int config_value_parse(const struct config_families *families, const struct config_option *opt,
                       const char *text, const char *who, union config_value *out,
                       struct diag *diag);
/* The same for a list option given as separate items (a YAML list). */
int config_value_parse_items(const struct config_families *families,
                             const struct config_option *opt, char *const *items,
                             const char *who, union config_value *out,
                             struct diag *diag);
/* Moves v into cfg (freeing what it replaces); v is consumed. */
void config_value_store(struct devlet_config *cfg, const struct config_option *opt,
                        union config_value *v);
void config_value_clear(const struct config_option *opt, union config_value *v);

/* Where opt's value lives in cfg: in cfg itself, or in the values of the
 * family option set holding the row. */
const void *config_option_value(const struct devlet_config *cfg, const struct config_option *opt);
void *config_option_field(struct devlet_config *cfg, const struct config_option *opt);

/* Gives cfg a zeroed values block for every family's option set in
 * cfg->families (config_new_defaults), frees every option's value and the blocks
 * (config_free), and runs the sets' finish hooks in table order once every
 * source is applied (config_load): 0, or the first hook's -EINVAL with
 * diag set. */
void config_options_alloc(struct devlet_config *cfg);
void config_options_free(struct devlet_config *cfg);
int config_options_finish(struct devlet_config *cfg, struct diag *diag);
/* The sets' load hooks, in table order, after the files devlet's own options name. */
int config_options_load(struct devlet_config *cfg, struct diag *diag);

/* The option whose flag or alias is name[0..len), or NULL. */
const struct config_option *config_option_by_flag(const struct config_families *families,
                                                  const char *name, size_t len);
/* The option whose config-file key is key, or NULL. */
const struct config_option *config_option_by_key(const struct config_families *families,
                                                 const char *key);
/* Whether some option key lives under prefix ("flags.plugin"). */
bool config_key_is_section(const struct config_families *families, const char *prefix);


/* Values parsed from one source (the file, the command line) and not yet
 * stored, so that a source with an error changes nothing. */
struct config_pending {
        struct config_pending_value {
                const struct config_option *opt;
                union config_value v;
        } *items;
        size_t n, cap;
};

/* Takes *v (left zeroed).  A list option given again collects both
 * (--backends nvidia --backends hostdev). */
void config_pending_add(struct config_pending *p, const struct config_option *opt,
                        union config_value *v);
/* Moves every value into cfg, in the order given, and empties p. */
void config_pending_store(struct config_pending *p, struct devlet_config *cfg);
void config_pending_clear(struct config_pending *p);

#endif
