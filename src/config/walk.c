/* Typed reads from the YAML node tree, shared by the section parsers
 * (hostdev.c, sharing.c, health.c).
 *
 * Each reader looks one key up in a mapping and checks the value's shape
 * (value, list, boolean, bounded integer); a key that is absent or YAML's
 * null reads as "not given" so that `key:` and `key: ~` mean the default.
 * Every error names the key's dotted path (parent + ".key") and points at the
 * offending node, or at the mapping when a required key is missing.
 *
 * Also the scalar syntaxes (booleans, durations, counts) that the option
 * table and the sections share.
 *
 * Never allocates what it returns (strings point into the tree) and never
 * logs. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/walk.h"

/* vsnprintf because the paths are short and truncation would only shorten
 * a message. */
const char *config_subpath(char *buf, size_t size, const char *parent, const char *fmt, ...)
{
        int n = snprintf(buf, size, "%s", parent);
        if (n < 0 || (size_t)n >= size)
                return buf;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf + n, size - (size_t)n, fmt, ap);
        va_end(ap);
        return buf;
}

int config_walk_expect(struct config_walk *w, const struct config_node *n,
                       enum config_node_kind kind, const char *path)
{
        if (n->kind == kind)
                return 0;
        return config_node_error(w->diag, w->file, n, path, "expected %s, found %s",
                                 kind == CONFIG_NODE_MAP   ? "a mapping"
                                 : kind == CONFIG_NODE_SEQ ? "a list"
                                                           : "a value",
                                 config_node_kind_name(n));
}

/* The node at map[key] if it is present, not null and of the given type:
 * 0 with *out set (NULL when absent or null), or the type error. */
static int walk_typed(struct config_walk *w, const struct config_node *map, const char *key,
                      const char *parent, enum config_node_kind type,
                      const struct config_node **out)
{
        const struct config_node *n = config_node_get(map, key);
        char path[CONFIG_PATH_MAX];
        config_subpath(path, sizeof(path), parent, ".%s", key);
        *out = NULL;
        if (!n || config_node_is_null(n))
                return 0;
        int r = config_walk_expect(w, n, type, path);
        if (r < 0)
                return r;
        *out = n;
        return 0;
}

int config_walk_string(struct config_walk *w, const struct config_node *map, const char *key,
                       const char *parent, const char **out, const struct config_node **node)
{
        const struct config_node *n = config_node_get(map, key);
        if (node)
                *node = n;
        const struct config_node *scalar;
        int r = walk_typed(w, map, key, parent, CONFIG_NODE_SCALAR, &scalar);
        *out = scalar ? scalar->text : NULL;
        return r;
}

int config_walk_required(struct config_walk *w, const struct config_node *map, const char *key,
                         const char *parent, const char **out, const struct config_node **node)
{
        const struct config_node *n;
        int r = config_walk_string(w, map, key, parent, out, &n);
        if (node)
                *node = n;
        if (r < 0)
                return r;
        if (!*out)
                return config_node_error(w->diag, w->file, n ? n : map, parent,
                                         "\"%s\" is required", key);
        return 0;
}

int config_walk_bool(struct config_walk *w, const struct config_node *map, const char *key,
                     const char *parent, bool *out, const struct config_node **node)
{
        const struct config_node *n;
        const char *s;
        char path[CONFIG_PATH_MAX];
        int r = config_walk_string(w, map, key, parent, &s, &n);
        if (node)
                *node = n;
        if (r < 0 || !s)
                return r;
        config_subpath(path, sizeof(path), parent, ".%s", key);
        if (config_parse_bool(s, out) < 0)
                return config_node_error(w->diag, w->file, n, path,
                                         "\"%.100s\" is not a boolean (true or false)", s);
        return 0;
}

int config_walk_uint(struct config_walk *w, const struct config_node *map, const char *key,
                     const char *parent, unsigned min, unsigned max, unsigned *out,
                     const struct config_node **node)
{
        const struct config_node *n;
        const char *s;
        char path[CONFIG_PATH_MAX];
        int r = config_walk_string(w, map, key, parent, &s, &n);
        if (node)
                *node = n;
        if (r < 0 || !s)
                return r;
        char *end = NULL;
        errno = 0;
        unsigned long v = isdigit((unsigned char)s[0]) ? strtoul(s, &end, 10) : 0;
        if (!isdigit((unsigned char)s[0]) || errno || *end || v < min || v > max) {
                config_subpath(path, sizeof(path), parent, ".%s", key);
                return config_node_error(w->diag, w->file, n, path,
                                         "\"%.100s\" is not an integer from %u to %u", s, min,
                                         max);
        }
        *out = (unsigned)v;
        return 0;
}

int config_walk_list(struct config_walk *w, const struct config_node *map, const char *key,
                     const char *parent, const struct config_node **out)
{
        return walk_typed(w, map, key, parent, CONFIG_NODE_SEQ, out);
}

int config_walk_map(struct config_walk *w, const struct config_node *n, const char *path,
                    const char *const *known)
{
        int r = config_walk_expect(w, n, CONFIG_NODE_MAP, path);
        if (r < 0)
                return r;
        config_node_warn_unknown_keys(w->warnings, w->file, n, path, known);
        return 0;
}

/* ---- scalars ---- */

int config_parse_bool(const char *s, bool *out)
{
        static const char *const yes[] = { "true", "yes", "on", "1" };
        static const char *const no[] = { "false", "no", "off", "0" };
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *out = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *out = false;
                        return 0;
                }
        }
        return -EINVAL;
}

int config_parse_nonneg_long(const char *s, long *out)
{
        if (!isdigit((unsigned char)s[0]))
                return -EINVAL;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || *end)
                return -EINVAL;
        *out = v;
        return 0;
}

int config_parse_duration(const char *s, int64_t *out)
{
        if (strcmp(s, "infinite") == 0) {
                *out = -1;
                return 0;
        }
        if (!s[0])
                return -EINVAL;
        bool bare = s[strspn(s, "0123456789")] == '\0';
        int64_t total = 0;
        const char *p = s;
        while (*p) {
                if (!isdigit((unsigned char)*p))
                        return -EINVAL;
                int64_t n = 0, unit;
                for (; isdigit((unsigned char)*p); p++)
                        if (__builtin_mul_overflow(n, 10, &n) ||
                            __builtin_add_overflow(n, *p - '0', &n))
                                return -EINVAL;
                if (bare)
                        unit = 1000;
                else if (strncmp(p, "ms", 2) == 0)
                        unit = 1, p += 2;
                else if (*p == 's')
                        unit = 1000, p++;
                else if (*p == 'm')
                        unit = 60 * 1000, p++;
                else if (*p == 'h')
                        unit = 3600 * 1000, p++;
                else
                        return -EINVAL;
                if (__builtin_mul_overflow(n, unit, &n) || __builtin_add_overflow(total, n, &total))
                        return -EINVAL;
        }
        *out = total;
        return 0;
}
