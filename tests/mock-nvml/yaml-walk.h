/* Walking a libyaml document for the mock's configuration reader (config.c).
 *
 * Each helper checks one value's shape and bounds and, on a mismatch, writes
 * "file:line:column: setting: problem" into the parser's error buffer and
 * returns -1; optional values read as absent when missing or null. */
#ifndef DEVLET_MOCK_NVML_YAML_WALK_H
#define DEVLET_MOCK_NVML_YAML_WALK_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

#include "mock.h"

struct parser {
        yaml_document_t doc;
        const char *path;
        char *err;
        size_t errlen;
};

/* A name from a table, or a number. */
struct name_value {
        const char *name;
        unsigned long long value;
};

__attribute__((format(printf, 3, 4))) int yw_fail(struct parser *p, const yaml_node_t *n,
                                                  const char *fmt, ...);
/* Names a setting for messages ("devices[2].mig[0]"); a long name is cut. */
__attribute__((format(printf, 3, 4))) void yw_name(char *buf, size_t n, const char *fmt, ...);
yaml_node_t *yw_node_at(struct parser *p, int id);
const char *yw_scalar_of(const yaml_node_t *n);
bool yw_is_null(const yaml_node_t *n);
yaml_node_t *yw_get(struct parser *p, yaml_node_t *map, const char *key);
int yw_check_map(struct parser *p, yaml_node_t *n, const char *what, const char *const *keys);
size_t yw_seq_len(const yaml_node_t *n);
yaml_node_t *yw_seq_at(struct parser *p, const yaml_node_t *n, size_t i);
int yw_parse_u64(struct parser *p, yaml_node_t *n, const char *what, unsigned long long max,
                 unsigned long long *out);
int yw_opt_u64(struct parser *p, yaml_node_t *map, const char *ctx, const char *key,
               unsigned long long max, struct mock_opt *out);
int yw_uint_or(struct parser *p, yaml_node_t *map, const char *ctx, const char *key,
               unsigned long long max, unsigned long long dflt, unsigned long long *out);
int yw_opt_str(struct parser *p, yaml_node_t *map, const char *ctx, const char *key, size_t maxlen,
               char **out);
int yw_req_str(struct parser *p, yaml_node_t *map, const char *ctx, const char *key, size_t maxlen,
               char **out);
int yw_opt_bool(struct parser *p, yaml_node_t *map, const char *ctx, const char *key, bool dflt,
                bool *out);
int yw_named(struct parser *p, yaml_node_t *n, const char *what, const struct name_value *tab,
             unsigned long long max, unsigned long long *out);

#endif
