/* Device references -> the collector's units (see attrib.h).
 *
 * Every form NVIDIA's tools and devlet hand out, in any source: UUIDs of
 * GPUs and MIG devices, the older "MIG-GPU-<uuid>/<gi>/<ci>", GPU indices,
 * "<gpu>:<mig>" MIG indices, time-slicing replicas "<id>::<n>", "all";
 * plus the parsers of NVIDIA_VISIBLE_DEVICES values and CDI device names.
 * Pure functions over a table; no I/O. */
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

/* "MIG-GPU-<uuid>/<gi>/<ci>" (drivers before R470). */
static size_t resolve_old_mig(const struct attr_unit *units, size_t n, const char *s, size_t len,
                              size_t *out, size_t max)
{
        const char *p = s + 4; /* "GPU-…/gi/ci" */
        const char *slash1 = memchr(p, '/', len - 4);
        if (!slash1)
                return 0;
        const char *slash2 = memchr(slash1 + 1, '/', len - (size_t)(slash1 + 1 - s));
        if (!slash2)
                return 0;
        long gi = parse_index(slash1 + 1, (size_t)(slash2 - slash1 - 1));
        long ci = parse_index(slash2 + 1, len - (size_t)(slash2 + 1 - s));
        if (gi < 0 || ci < 0)
                return 0;
        size_t count = 0, ulen = (size_t)(slash1 - p);
        for (size_t i = 0; i < n; i++) {
                const struct attr_unit *u = &units[i];
                if (u->mig >= 0 && u->gi == (unsigned)gi && u->ci == (unsigned)ci &&
                    strlen(u->parent_uuid) == ulen && strncasecmp(u->parent_uuid, p, ulen) == 0)
                        emit(i, out, max, &count);
        }
        return count;
}

size_t attr_resolve(const struct attr_unit *units, size_t n, const char *ref, bool all_ok,
                    size_t *out, size_t max)
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
                if (!all_ok)
                        return 0;
                for (size_t i = 0; i < n; i++)
                        if (units[i].mig < 0)
                                emit(i, out, max, &count);
                return count;
        }
        if (len > 8 && strncasecmp(ref, "MIG-GPU-", 8) == 0)
                return resolve_old_mig(units, n, ref, len, out, max);
        if (len > 4 && (strncasecmp(ref, "GPU-", 4) == 0 || strncasecmp(ref, "MIG-", 4) == 0)) {
                for (size_t i = 0; i < n; i++)
                        if (strlen(units[i].uuid) == len && strncasecmp(units[i].uuid, ref, len) == 0)
                                emit(i, out, max, &count);
                return count;
        }
        const char *colon = memchr(ref, ':', len);
        if (colon) {
                long g = parse_index(ref, (size_t)(colon - ref));
                long m = parse_index(colon + 1, len - (size_t)(colon + 1 - ref));
                if (g < 0 || m < 0)
                        return 0;
                for (size_t i = 0; i < n; i++)
                        if (units[i].gpu == (unsigned)g && units[i].mig == m)
                                emit(i, out, max, &count);
                return count;
        }
        long g = parse_index(ref, len);
        if (g < 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (units[i].mig < 0 && units[i].gpu == (unsigned)g)
                        emit(i, out, max, &count);
        return count;
}

ssize_t attr_resolve_minor(const struct attr_unit *units, size_t n, unsigned minor)
{
        for (size_t i = 0; i < n; i++)
                if (units[i].mig < 0 && units[i].minor >= 0 && (unsigned)units[i].minor == minor)
                        return (ssize_t)i;
        return -1;
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

char **attr_cdi_device(const char *qualified, char **refs)
{
        while (isspace((unsigned char)*qualified))
                qualified++;
        const char *slash = strchr(qualified, '/');
        const char *eq = strchr(qualified, '=');
        if (!slash || !eq || eq < slash)
                return refs;
        size_t vlen = (size_t)(slash - qualified);
        if (vlen != strlen("nvidia.com") || strncmp(qualified, "nvidia.com", vlen) != 0)
                return refs;
        if (eq == slash + 1 || !eq[1])
                return refs;
        return attr_visible_devices(eq + 1, refs); /* one name; trims it */
}
