/* dcgm-exporter's counters CSV (`--collectors FILE`): which device
 * families to export, so an operator's existing file selects the same
 * families here.  Part of the configuration: the loader reads it with the
 * rest (config_load), so a broken file is a config error (exit 2 at
 * start-up with file:line, the running config kept on reload).
 *
 * One family per line, "FIELD, type, help"; '#' starts a comment line,
 * blank lines are skipped.  The type is gauge, counter, histogram or label
 * (label rows name label fields, e.g. DCGM_FI_DEV_SERIAL: they are listed
 * too, and metrics adds such a field as a label on every series of the
 * device, as dcgm-exporter does).  The file is read (at most 1 MiB, a regular file only) when
 * the configuration loads; a malformed line is an error with its line
 * number.  Pure apart from that one read; never logs. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "config/config.h"
#include "config/tree.h"

#define COUNTERS_MAX_BYTES (1024 * 1024)

static char *trim(char *s)
{
        while (isspace((unsigned char)*s))
                s++;
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1]))
                s[--n] = '\0';
        return s;
}

static bool valid_name(const char *s)
{
        if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && *s != '_')
                        return false;
        return true;
}

int config_counters_parse(const char *text, const char *path, char ***out,
                          struct diag *diag)
{
        _cleanup_free_ char *copy = xstrdup(text);
        _cleanup_strv_free_ char **names = NULL;
        unsigned line = 0;
        char *save = NULL;
        for (char *l = copy; l; l = save) {
                char *nl = strchr(l, '\n');
                save = nl ? nl + 1 : NULL;
                if (nl)
                        *nl = '\0';
                line++;
                char *s = trim(l);
                if (!*s || *s == '#')
                        continue;
                char *c1 = strchr(s, ',');
                char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
                if (!c1 || !c2)
                        return diag_set_at(diag, -EINVAL, path, (int)line, 1,
                                           "want \"field, type, help\"");
                *c1 = *c2 = '\0';
                char *field = trim(s), *type = trim(c1 + 1);
                if (!valid_name(field))
                        return diag_set_at(diag, -EINVAL, path, (int)line, 1,
                                           "invalid field name \"%s\"", field);
                if (strcmp(type, "label") != 0 && strcmp(type, "gauge") != 0 && strcmp(type, "counter") != 0 &&
                    strcmp(type, "histogram") != 0)
                        return diag_set_at(diag, -EINVAL, path, (int)line, 1,
                                           "unknown type \"%s\" (gauge, counter, histogram or label)",
                                           type);
                if (!strv_contains(names, field))
                        names = strv_push(names, field);
        }
        if (!names)
                names = xcalloc(1, sizeof(*names)); /* a file that selects nothing */
        *out = TAKE_PTR(names);
        return 0;
}

int config_counters_load(const char *path, char ***out, struct diag *diag)
{
        _cleanup_free_ char *text = NULL;
        int r = fs_read_file(path, COUNTERS_MAX_BYTES, &text, NULL);
        if (r == -EFBIG)
                return diag_set_at(diag, -EINVAL, path, 0, 0, "larger than %d bytes",
                                   COUNTERS_MAX_BYTES);
        if (r < 0)
                return diag_set_at(diag, r, path, 0, 0, "cannot read: %s", fs_strerror(r));
        return config_counters_parse(text, path, out, diag);
}
