/* Helpers that walk a libyaml document: typed, bounded reads of scalars,
 * mappings that accept only known keys, and errors that carry the position
 * of the offending node.  Used by config.c only; no state. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "yaml-walk.h"

int yw_fail(struct parser *p, const yaml_node_t *n, const char *fmt, ...)
{
        char msg[320];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (n)
                snprintf(p->err, p->errlen, "%s:%zu:%zu: %s", p->path, n->start_mark.line + 1,
                         n->start_mark.column + 1, msg);
        else
                snprintf(p->err, p->errlen, "%s: %s", p->path, msg);
        return -1;
}

/* Names a setting for messages ("devices[2].mig[0].profile"); long names
 * are cut, which only shortens a message. */
void yw_name(char *buf, size_t n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(buf, n, fmt, ap) >= (int)n)
                buf[n - 1] = 0;
        va_end(ap);
}

yaml_node_t *yw_node_at(struct parser *p, int id)
{
        return yaml_document_get_node(&p->doc, id);
}

const char *yw_scalar_of(const yaml_node_t *n)
{
        return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

bool yw_is_null(const yaml_node_t *n)
{
        const char *s = yw_scalar_of(n);
        return s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
               (!*s || !strcmp(s, "~") || !strcmp(s, "null"));
}

/* The value under key, or NULL when absent or null. */
yaml_node_t *yw_get(struct parser *p, yaml_node_t *map, const char *key)
{
        for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
             pr++) {
                const char *k = yw_scalar_of(yw_node_at(p, pr->key));
                if (k && !strcmp(k, key)) {
                        yaml_node_t *v = yw_node_at(p, pr->value);
                        return yw_is_null(v) ? NULL : v;
                }
        }
        return NULL;
}

/* A mapping whose keys are all in `keys` (NULL: any scalar keys), each once. */
int yw_check_map(struct parser *p, yaml_node_t *n, const char *what, const char *const *keys)
{
        if (!n || n->type != YAML_MAPPING_NODE)
                return yw_fail(p, n, "%s: expected a mapping", what);
        for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
             pr++) {
                yaml_node_t *kn = yw_node_at(p, pr->key);
                const char *k = yw_scalar_of(kn);
                if (!k)
                        return yw_fail(p, kn, "%s: keys must be scalars", what);
                for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < pr; q++)
                        if (!strcmp(k, yw_scalar_of(yw_node_at(p, q->key))))
                                return yw_fail(p, kn, "%s: key '%s' given twice", what, k);
                if (!keys)
                        continue;
                const char *const *a = keys;
                while (*a && strcmp(*a, k))
                        a++;
                if (!*a)
                        return yw_fail(p, kn, "%s: unknown key '%s'", what, k);
        }
        return 0;
}

size_t yw_seq_len(const yaml_node_t *n)
{
        return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

yaml_node_t *yw_seq_at(struct parser *p, const yaml_node_t *n, size_t i)
{
        return yw_node_at(p, n->data.sequence.items.start[i]);
}

int yw_parse_u64(struct parser *p, yaml_node_t *n, const char *what, unsigned long long max,
                 unsigned long long *out)
{
        const char *s = yw_scalar_of(n);
        if (!s)
                return yw_fail(p, n, "%s: expected a number", what);
        int base = 10;
        const char *d = s;
        if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
                base = 16;
                d += 2;
        }
        if (!isxdigit((unsigned char)*d))
                return yw_fail(p, n, "%s: '%s' is not a number", what, s);
        char *end;
        errno = 0;
        unsigned long long v = strtoull(d, &end, base);
        if (*end || errno)
                return yw_fail(p, n, "%s: '%s' is not a number", what, s);
        if (v > max)
                return yw_fail(p, n, "%s: %llu is larger than %llu", what, v, max);
        *out = v;
        return 0;
}

int yw_opt_u64(struct parser *p, yaml_node_t *map, const char *ctx, const char *key,
               unsigned long long max, struct mock_opt *out)
{
        char what[96];
        yw_name(what, sizeof(what), "%s.%s", ctx, key);
        yaml_node_t *n = yw_get(p, map, key);
        out->set = n != NULL;
        out->v = 0;
        return n ? yw_parse_u64(p, n, what, max, &out->v) : 0;
}

/* An unsigned with a default. */
int yw_uint_or(struct parser *p, yaml_node_t *map, const char *ctx, const char *key,
               unsigned long long max, unsigned long long dflt, unsigned long long *out)
{
        struct mock_opt o;
        if (yw_opt_u64(p, map, ctx, key, max, &o) < 0)
                return -1;
        *out = o.set ? o.v : dflt;
        return 0;
}

int yw_opt_str(struct parser *p, yaml_node_t *map, const char *ctx, const char *key, size_t maxlen,
               char **out)
{
        yaml_node_t *n = yw_get(p, map, key);
        *out = NULL;
        if (!n)
                return 0;
        const char *s = yw_scalar_of(n);
        if (!s)
                return yw_fail(p, n, "%s.%s: expected a string", ctx, key);
        if (strlen(s) > maxlen)
                return yw_fail(p, n, "%s.%s: longer than %zu characters", ctx, key, maxlen);
        *out = mock_strdup(s);
        return 0;
}

int yw_req_str(struct parser *p, yaml_node_t *map, const char *ctx, const char *key, size_t maxlen,
               char **out)
{
        if (yw_opt_str(p, map, ctx, key, maxlen, out) < 0)
                return -1;
        if (!*out)
                return yw_fail(p, map, "%s: missing '%s'", ctx, key);
        return 0;
}

int yw_opt_bool(struct parser *p, yaml_node_t *map, const char *ctx, const char *key, bool dflt,
                bool *out)
{
        yaml_node_t *n = yw_get(p, map, key);
        *out = dflt;
        if (!n)
                return 0;
        const char *s = yw_scalar_of(n);
        if (s && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")))
                *out = true;
        else if (s && (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")))
                *out = false;
        else
                return yw_fail(p, n, "%s.%s: expected true or false", ctx, key);
        return 0;
}

int yw_named(struct parser *p, yaml_node_t *n, const char *what, const struct name_value *tab,
             unsigned long long max, unsigned long long *out)
{
        const char *s = yw_scalar_of(n);
        if (s && !isdigit((unsigned char)*s)) {
                for (const struct name_value *t = tab; t->name; t++)
                        if (!strcasecmp(s, t->name)) {
                                *out = t->value;
                                return 0;
                        }
                return yw_fail(p, n, "%s: unknown value '%s'", what, s);
        }
        return yw_parse_u64(p, n, what, max, out);
}
