/* Device references -> the collector's units (see attrib.h).
 *
 * A unit lists the references that name it (its family's sampler knows
 * the forms: UUIDs, indices, ...); here they are only compared, after
 * devlet's replica suffix "<id>::<n>" is dropped; "all" means every whole
 * unit of the source's family.  Also the parsers of env var lists and CDI
 * device names.  Pure functions over a table; no I/O. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/xalloc.h"
#include "metrics/attrib.h"

/* Parses a decimal number filling all of s[0..n); -1 otherwise. */
static long parse_index(const char *s, size_t n)
{
        if (n == 0 || n > 6)
                return -1;
        long v = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                v = v * 10 + (s[i] - '0');
        }
        return v;
}

static void emit(size_t i, size_t *out, size_t max, size_t *count)
{
        if (*count < max)
                out[*count] = i;
        (*count)++;
}

static bool in_strv(char *const *v, const char *s, size_t len)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strlen(v[i]) == len && strncasecmp(v[i], s, len) == 0)
                        return true;
        return false;
}

size_t attr_resolve(const struct dev_unit *units, size_t n, const struct dev_attr_hints *ctx,
                    const char *ref, bool all_ok, size_t *out, size_t max)
{
        while (isspace((unsigned char)*ref))
                ref++;
        size_t len = strlen(ref);
        while (len > 0 && isspace((unsigned char)ref[len - 1]))
                len--;
        /* a replica of a time-shared device: "<id>::<n>" */
        for (size_t i = 0; i + 1 < len; i++) {
                if (ref[i] == ':' && ref[i + 1] == ':') {
                        if (parse_index(ref + i + 2, len - i - 2) < 0)
                                return 0;
                        len = i;
                        break;
                }
        }
        if (len == 0)
                return 0;
        size_t count = 0;
        if (len == 3 && memcmp(ref, "all", 3) == 0) {
                if (!all_ok || !ctx)
                        return 0;
                for (size_t i = 0; i < n; i++)
                        if (units[i].whole && units[i].hints == ctx)
                                emit(i, out, max, &count);
                return count;
        }
        for (size_t i = 0; i < n; i++) {
                const struct dev_unit *u = &units[i];
                if (in_strv(u->names, ref, len) ||
                    (ctx && u->hints == ctx && in_strv(u->local_names, ref, len)))
                        emit(i, out, max, &count);
        }
        return count;
}

ssize_t attr_resolve_devnum(const struct dev_unit *units, size_t n, struct dev_devnum d)
{
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < units[i].n_devnums; k++)
                        if (units[i].devnums[k].major == d.major && units[i].devnums[k].minor == d.minor)
                                return (ssize_t)i;
        return -1;
}

const struct dev_attr_hints *attr_hints_for_resource(const struct dev_attr_hints *const *hints,
                                                     size_t n, const char *resource)
{
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; hints[i]->resource_prefixes && hints[i]->resource_prefixes[k]; k++)
                        if (strncmp(resource, hints[i]->resource_prefixes[k],
                                    strlen(hints[i]->resource_prefixes[k])) == 0)
                                return hints[i];
        return NULL;
}

char **attr_visible_devices(const char *value, char **refs)
{
        while (isspace((unsigned char)*value))
                value++;
        size_t len = strlen(value);
        while (len > 0 && isspace((unsigned char)value[len - 1]))
                len--;
        if (len == 0 || (len == 4 && (memcmp(value, "none", 4) == 0 || memcmp(value, "void", 4) == 0)))
                return refs;
        const char *p = value, *end = value + len;
        while (p < end) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                const char *e = comma ? comma : end;
                const char *a = p;
                while (a < e && isspace((unsigned char)*a))
                        a++;
                const char *b = e;
                while (b > a && isspace((unsigned char)b[-1]))
                        b--;
                if (b > a) {
                        char *item = xstrndup(a, (size_t)(b - a));
                        refs = strv_push(refs, item);
                        free(item);
                }
                p = comma ? comma + 1 : end;
        }
        return refs;
}

char **attr_cdi_device(const char *qualified, const char *vendor, char **refs)
{
        while (isspace((unsigned char)*qualified))
                qualified++;
        const char *slash = strchr(qualified, '/');
        const char *eq = strchr(qualified, '=');
        if (!slash || !eq || eq < slash)
                return refs;
        size_t vlen = (size_t)(slash - qualified);
        if (!vendor || vlen != strlen(vendor) || strncmp(qualified, vendor, vlen) != 0)
                return refs;
        if (eq == slash + 1 || !eq[1])
                return refs;
        return attr_visible_devices(eq + 1, refs); /* one name; trims it */
}
