/* What differs between two configs, and what that needs: the reload's
 * decision, derived from the tables.  Each option row and each section row
 * carries CONFIG_APPLY_* flags (config.h); config_diff compares the running
 * config with the new one row by row, generically (an option by its type
 * at its offset, a section with its equal function) and returns the union
 * of the changed rows' flags.  Nothing here names an option: a row added
 * to any table is compared and reported without a line here.
 *
 * Pure: no logging, no I/O. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/config.h"
#include "config/options.h"
#include "config/sections.h"

static const char *const apply_names[] = { "none", "reserve", "sockets",
                                           "metrics", "outputs", "restart" };
_Static_assert(ARRAY_SIZE(apply_names) == 6 && CONFIG_APPLY_ALL == (1u << 6) - 1,
               "one name per CONFIG_APPLY_* flag");

const char *config_apply_text(unsigned apply, char *buf, size_t size)
{
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < ARRAY_SIZE(apply_names) && off < size; i++)
                if (apply & (1u << i))
                        off += (size_t)snprintf(buf + off, size - off, "%s%s", off ? "," : "",
                                                apply_names[i]);
        if (!buf[0])
                snprintf(buf, size, "none");
        return buf;
}

static const void *at(const struct devlet_config *cfg, const struct config_option *opt,
                      size_t offset)
{
        return (const char *)config_option_value(cfg, opt) - opt->offset + offset;
}

static bool option_equal(const struct devlet_config *a, const struct devlet_config *b,
                         const struct config_option *opt)
{
        const void *va = config_option_value(a, opt), *vb = config_option_value(b, opt);
        if (opt->loaded &&
            !strv_equal(*(char *const *const *)at(a, opt, opt->loaded),
                        *(char *const *const *)at(b, opt, opt->loaded)))
                return false;
        switch (opt->type) {
        case CONFIG_STRING:
                return streq_ptr(*(const char *const *)va, *(const char *const *)vb);
        case CONFIG_LIST:
                return strv_equal(*(char *const *const *)va, *(char *const *const *)vb);
        case CONFIG_BOOL:
                return *(const bool *)va == *(const bool *)vb;
        case CONFIG_INT:
                return *(const long *)va == *(const long *)vb;
        case CONFIG_DURATION:
                return *(const int64_t *)va == *(const int64_t *)vb;
        }
        return false;
}

static bool section_equal(const struct config_section *s, const void *a, const void *b)
{
        if (!a || !b)
                return a == b;
        return s->equal(a, b);
}

static void add(struct config_change **v, size_t *n, size_t *cap, const char *name,
                const struct config_option *opt, unsigned apply)
{
        if (!v)
                return;
        xgrow((void **)v, cap, *n + 1, sizeof(**v));
        (*v)[(*n)++] = (struct config_change){ .name = name, .option = opt, .apply = apply };
}

unsigned config_diff(const struct devlet_config *prev, const struct devlet_config *next,
                     struct config_change **out, size_t *n_out)
{
        struct config_change *v = NULL;
        size_t n = 0, cap = 0;
        unsigned apply = 0;
        const struct config_option *opt;
        /* a reload loads with the same table: prev's families are next's */
        const struct config_families *f = next->families;
        for (size_t i = 0; (opt = config_option_at(f, i)); i++)
                if (!option_equal(prev, next, opt)) {
                        apply |= opt->apply;
                        add(out ? &v : NULL, &n, &cap, opt->flag, opt, opt->apply);
                }
        for (const struct config_section *s = config_sections; s->key; s++)
                if (!section_equal(s, (const char *)prev + s->offset,
                                   (const char *)next + s->offset)) {
                        apply |= s->apply;
                        add(out ? &v : NULL, &n, &cap, s->key, NULL, s->apply);
                }
        for (size_t j = 0; j < CONFIG_FAMILIES_MAX && f->v[j]; j++) {
                const struct config_section *s = f->v[j]->section;
                if (s && !section_equal(s, prev->backend_sections[j], next->backend_sections[j])) {
                        apply |= s->apply;
                        add(out ? &v : NULL, &n, &cap, s->key, NULL, s->apply);
                }
        }
        if (out) {
                *out = v;
                *n_out = n;
        }
        return apply;
}

void config_option_copy(struct devlet_config *dst, const struct devlet_config *src,
                        const struct config_option *opt)
{
        const void *from = config_option_value(src, opt);
        union config_value v;
        switch (opt->type) {
        case CONFIG_STRING: {
                const char *s = *(const char *const *)from;
                v.s = s ? xstrdup(s) : NULL;
                break;
        }
        case CONFIG_LIST:
                v.list = strv_copy(*(const char *const *const *)from);
                break;
        case CONFIG_BOOL:
                v.b = *(const bool *)from;
                break;
        case CONFIG_INT:
                v.i = *(const long *)from;
                break;
        case CONFIG_DURATION:
                v.ms = *(const int64_t *)from;
                break;
        }
        config_value_store(dst, opt, &v);
        if (opt->loaded) {
                char ***loaded = (char ***)((char *)config_option_field(dst, opt) - opt->offset +
                                            opt->loaded);
                strv_free(*loaded);
                *loaded = strv_copy(*(const char *const *const *)at(src, opt, opt->loaded));
        }
}
