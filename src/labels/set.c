/* The file form of a label set, the Kubernetes rules for keys and values,
 * and the sanitiser that turns any text into a valid value.
 *
 * A set (struct dev_labels) keeps insertion order and replaces on a
 * repeated key (GFD merges its labelers the same way: the later one wins);
 * the file form is sorted by key, so the same labels always give the same
 * bytes.
 * Pure data: no I/O, no logging. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "labels/labels.h"

#define LABEL_NAME_MAX 63
#define LABEL_PREFIX_MAX 253
#define LABEL_HASH_KEEP 54 /* 54 + '-' + 8 hex digits = 63 */

static int by_key(const void *a, const void *b)
{
        const struct dev_kv *const *x = a, *const *y = b;
        return strcmp((*x)->key, (*y)->key);
}

char *labels_format(const struct dev_labels *s, size_t *len)
{
        _cleanup_free_ const struct dev_kv **order = xcalloc(s->n ? s->n : 1, sizeof(*order));
        size_t total = 1;
        for (size_t i = 0; i < s->n; i++) {
                order[i] = &s->v[i];
                total += strlen(s->v[i].key) + strlen(s->v[i].value) + 2;
        }
        qsort(order, s->n, sizeof(*order), by_key);
        char *buf = xmalloc(total), *p = buf;
        for (size_t i = 0; i < s->n; i++)
                p += sprintf(p, "%s=%s\n", order[i]->key, order[i]->value);
        *p = '\0';
        if (len)
                *len = (size_t)(p - buf);
        return buf;
}

/* ---- rules ---- */

static bool is_alnum(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A qualified name's name part (also what a value must be when not empty). */
static bool valid_name(const char *s, size_t len)
{
        if (len == 0 || len > LABEL_NAME_MAX || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

/* RFC 1123 subdomain: lower-case labels of [a-z0-9-], alphanumeric at both
 * ends, separated by dots. */
static bool valid_prefix(const char *s, size_t len)
{
        if (len == 0 || len > LABEL_PREFIX_MAX)
                return false;
        size_t start = 0;
        for (size_t i = 0; i <= len; i++) {
                if (i < len && s[i] != '.') {
                        char c = s[i];
                        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                                return false;
                        continue;
                }
                if (i == start || s[start] == '-' || s[i - 1] == '-')
                        return false;
                start = i + 1;
        }
        return true;
}

bool labels_valid_key(const char *s)
{
        if (!s)
                return false;
        const char *slash = strchr(s, '/');
        if (!slash)
                return valid_name(s, strlen(s));
        return valid_prefix(s, (size_t)(slash - s)) && valid_name(slash + 1, strlen(slash + 1));
}

bool labels_valid_value(const char *s)
{
        return s && (s[0] == '\0' || valid_name(s, strlen(s)));
}

/* ---- sanitising ---- */

static uint32_t fnv1a(const char *s)
{
        uint32_t h = 2166136261u;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

char *labels_value_sanitize(const char *text)
{
        /* GFD: keep [A-Za-z0-9._- ], then blank runs become one '-' */
        size_t n = strlen(text);
        char *out = xmalloc(n + 1);
        size_t len = 0;
        bool blank = false;
        for (size_t i = 0; i < n; i++) {
                char c = text[i];
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
                        blank = len > 0;
                        continue;
                }
                if (!is_alnum(c) && c != '-' && c != '_' && c != '.')
                        continue;
                if (blank)
                        out[len++] = '-';
                blank = false;
                out[len++] = c;
        }
        out[len] = '\0';

        /* a value starts and ends with a letter or digit */
        size_t start = 0;
        while (start < len && !is_alnum(out[start]))
                start++;
        while (len > start && !is_alnum(out[len - 1]))
                len--;
        memmove(out, out + start, len - start);
        len -= start;
        out[len] = '\0';

        if (len > LABEL_NAME_MAX) {
                uint32_t h = fnv1a(out);
                size_t keep = LABEL_HASH_KEEP;
                while (keep > 0 && !is_alnum(out[keep - 1]))
                        keep--;
                snprintf(out + keep, n + 1 - keep, "-%08x", h);
        }
        return out;
}
