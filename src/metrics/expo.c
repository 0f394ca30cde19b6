/* The Prometheus text format writer (see expo.h).
 *
 * Each family keeps its samples already rendered, one line each, in a byte
 * buffer, plus a hash set of canonical label-set keys (labels sorted by
 * name, "name\0value\0" each) to refuse duplicates in O(1); the buffer
 * opens with the family's HELP and TYPE lines when its first sample comes.  A label set is
 * prepared once (validated, escaped, keyed: the key stored once in the
 * exposition's arena) and may then be used for any number of families.  Rendering
 * concatenates the families' buffers in declaration order, or hands them
 * over as chunks without copying.  Never does I/O and never takes locks. */
#include "metrics/expo.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

/* ---- buffer ---- */

static void buf_reserve(struct expo_buf *b, size_t extra)
{
        if (b->len + extra + 1 <= b->cap)
                return;
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + extra + 1)
                cap = cap < (1u << 20) ? cap * 2 : cap + cap / 4; /* gentler past 1 MiB */
        b->data = xrealloc(b->data, cap);
        b->data[b->len] = '\0';
        b->cap = cap;
}

void expo_buf_put(struct expo_buf *b, const char *s, size_t n)
{
        buf_reserve(b, n);
        if (n)
                memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = '\0';
}

void expo_buf_puts(struct expo_buf *b, const char *s)
{
        expo_buf_put(b, s, strlen(s));
}

void expo_buf_printf(struct expo_buf *b, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char small[128];
        int n = vsnprintf(small, sizeof(small), fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n < sizeof(small)) {
                expo_buf_put(b, small, (size_t)n);
                return;
        }
        buf_reserve(b, (size_t)n);
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
}

char *expo_buf_take(struct expo_buf *b, size_t *len)
{
        if (!b->data)
                b->data = xstrdup("");
        if (len)
                *len = b->len;
        char *p = b->data;
        *b = (struct expo_buf){ 0 };
        return p;
}

void expo_buf_release(struct expo_buf *b)
{
        free(b->data);
        *b = (struct expo_buf){ 0 };
}

/* ---- names and escaping ---- */

static bool valid_name(const char *s, bool colon)
{
        if (!s || !*s)
                return false;
        for (const char *p = s; *p; p++) {
                char c = *p;
                bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                          (colon && c == ':') || (p != s && c >= '0' && c <= '9');
                if (!ok)
                        return false;
        }
        return true;
}

void expo_escape_label(struct expo_buf *b, const char *value)
{
        for (;;) {
                size_t run = strcspn(value, "\\\"\n");
                expo_buf_put(b, value, run);
                value += run;
                if (!*value)
                        return;
                expo_buf_put(b, *value == '\\' ? "\\\\" : *value == '"' ? "\\\"" : "\\n", 2);
                value++;
        }
}

static void escape_help(struct expo_buf *b, const char *help)
{
        const char *run = help;
        for (const char *p = help; *p; p++) {
                const char *esc = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : NULL;
                if (!esc)
                        continue;
                expo_buf_put(b, run, (size_t)(p - run));
                expo_buf_put(b, esc, 2);
                run = p + 1;
        }
        expo_buf_puts(b, run);
}

/* ---- families ---- */

struct key_slot {
        uint64_t hash; /* 0 = empty */
        size_t off, len; /* into the exposition's key arena */
};

struct expo_family {
        struct expo *owner;
        char *name;
        char *help;
        enum expo_type type;
        struct expo_buf samples;
        size_t n_samples;
        struct key_slot *slots;
        size_t n_slots; /* power of two */
};

struct expo {
        struct expo_family **families;
        size_t n_families, cap_families;
        struct expo_buf keys; /* canonical label-set keys, one copy per prepared set */
};

struct expo *expo_new(void)
{
        return xcalloc(1, sizeof(struct expo));
}

void expo_free(struct expo *e)
{
        if (!e)
                return;
        for (size_t i = 0; i < e->n_families; i++) {
                struct expo_family *f = e->families[i];
                free(f->name);
                free(f->help);
                expo_buf_release(&f->samples);
                free(f->slots);
                free(f);
        }
        free(e->families);
        expo_buf_release(&e->keys);
        free(e);
}

struct expo_family *expo_family(struct expo *e, const char *name, enum expo_type type,
                                const char *help)
{
        if (!valid_name(name, true))
                return NULL;
        /* a handful of families per exposition: a linear search is fine */
        for (size_t i = 0; i < e->n_families; i++)
                if (strcmp(e->families[i]->name, name) == 0)
                        return e->families[i];
        struct expo_family *f = xcalloc(1, sizeof(*f));
        f->owner = e;
        f->name = xstrdup(name);
        f->help = xstrdup(help ? help : "");
        f->type = type;
        xgrow((void **)&e->families, &e->cap_families, e->n_families + 1, sizeof(*e->families));
        e->families[e->n_families++] = f;
        return f;
}

size_t expo_family_samples(const struct expo_family *f)
{
        return f->n_samples;
}

static uint64_t fnv1a(const char *s, size_t n)
{
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char)s[i];
                h *= 1099511628211ULL;
        }
        return h ? h : 1;
}

static void slots_grow(struct expo_family *f)
{
        size_t n = f->n_slots ? f->n_slots * 2 : 16;
        struct key_slot *slots = xcalloc(n, sizeof(*slots));
        for (size_t i = 0; i < f->n_slots; i++) {
                struct key_slot s = f->slots[i];
                if (!s.hash)
                        continue;
                size_t j = s.hash & (n - 1);
                while (slots[j].hash)
                        j = (j + 1) & (n - 1);
                slots[j] = s;
        }
        free(f->slots);
        f->slots = slots;
        f->n_slots = n;
}

/* Records the set's key in the family; false when it was already there. */
static bool key_insert(struct expo_family *f, const struct expo_labels *ls)
{
        if ((f->n_samples + 1) * 2 > f->n_slots)
                slots_grow(f);
        const char *keys = f->owner->keys.data;
        size_t j = ls->hash & (f->n_slots - 1);
        for (; f->slots[j].hash; j = (j + 1) & (f->n_slots - 1)) {
                const struct key_slot *s = &f->slots[j];
                if (s->hash == ls->hash && s->len == ls->key_len &&
                    memcmp(keys + s->off, keys + ls->key_off, ls->key_len) == 0)
                        return false;
        }
        f->slots[j] = (struct key_slot){ .hash = ls->hash, .off = ls->key_off, .len = ls->key_len };
        return true;
}

#define EXPO_MAX_LABELS 32

int expo_labels_prepare(struct expo *e, const struct expo_label *labels, size_t n,
                        struct expo_labels *out)
{
        if (n > EXPO_MAX_LABELS)
                return -EINVAL;
        size_t order[EXPO_MAX_LABELS];
        for (size_t i = 0; i < n; i++) {
                if (!valid_name(labels[i].name, false) || strncmp(labels[i].name, "__", 2) == 0 ||
                    !labels[i].value)
                        return -EINVAL;
                /* insertion sort by name: label sets are small */
                size_t j = i;
                while (j > 0 && strcmp(labels[order[j - 1]].name, labels[i].name) > 0) {
                        order[j] = order[j - 1];
                        j--;
                }
                order[j] = i;
        }
        for (size_t i = 1; i < n; i++)
                if (strcmp(labels[order[i - 1]].name, labels[order[i]].name) == 0)
                        return -EINVAL;
        /* the canonical key: sorted "name\0value\0" pairs, kept once in the arena */
        size_t key_off = e->keys.len;
        for (size_t i = 0; i < n; i++) {
                const struct expo_label *l = &labels[order[i]];
                expo_buf_put(&e->keys, l->name, strlen(l->name) + 1);
                expo_buf_put(&e->keys, l->value, strlen(l->value) + 1);
        }
        /* the text, in the caller's order */
        struct expo_buf text = { 0 };
        if (n > 0) {
                expo_buf_put(&text, "{", 1);
                for (size_t i = 0; i < n; i++) {
                        if (i > 0)
                                expo_buf_put(&text, ",", 1);
                        expo_buf_puts(&text, labels[i].name);
                        expo_buf_put(&text, "=\"", 2);
                        expo_escape_label(&text, labels[i].value);
                        expo_buf_put(&text, "\"", 1);
                }
                expo_buf_put(&text, "}", 1);
        }
        out->key_off = key_off;
        out->key_len = e->keys.len - key_off;
        out->hash = fnv1a(e->keys.data ? e->keys.data + key_off : "", out->key_len);
        out->text = expo_buf_take(&text, &out->text_len);
        return 0;
}

void expo_labels_release(struct expo_labels *ls)
{
        free(ls->text);
        ls->text = NULL;
}

static bool sample_head(struct expo_family *f, const struct expo_labels *ls)
{
        if (!key_insert(f, ls))
                return false;
        struct expo_buf *b = &f->samples;
        if (f->n_samples == 0) {
                /* the family's text starts with its HELP and TYPE lines */
                expo_buf_puts(b, "# HELP ");
                expo_buf_puts(b, f->name);
                expo_buf_put(b, " ", 1);
                escape_help(b, f->help);
                expo_buf_puts(b, "\n# TYPE ");
                expo_buf_puts(b, f->name);
                expo_buf_puts(b, f->type == EXPO_COUNTER     ? " counter\n"
                                 : f->type == EXPO_HISTOGRAM ? " histogram\n"
                                                             : " gauge\n");
        }
        f->n_samples++;
        if (f->type == EXPO_HISTOGRAM)
                return true; /* its lines are written by expo_add_histogram */
        expo_buf_puts(b, f->name);
        expo_buf_put(b, ls->text, ls->text_len);
        expo_buf_put(b, " ", 1);
        return true;
}

/* The shortest of %.15g and %.17g that reads back as the same double. */
static void put_double(struct expo_buf *b, double value)
{
        char buf[64];
        snprintf(buf, sizeof(buf), "%.15g", value);
        if (strtod(buf, NULL) != value)
                snprintf(buf, sizeof(buf), "%.17g", value);
        expo_buf_puts(b, buf);
        expo_buf_put(b, "\n", 1);
}

int expo_add_labels(struct expo_family *f, const struct expo_labels *ls, double value)
{
        if (f->type == EXPO_HISTOGRAM)
                return -EINVAL; /* expo_add_histogram */
        if (!sample_head(f, ls))
                return 0;
        struct expo_buf *b = &f->samples;
        if (isnan(value))
                expo_buf_puts(b, "NaN\n");
        else if (isinf(value))
                expo_buf_puts(b, value > 0 ? "+Inf\n" : "-Inf\n");
        else if (value == (double)(int64_t)value && fabs(value) <= 9007199254740992.0)
                expo_buf_printf(b, "%" PRId64 "\n", (int64_t)value);
        else
                put_double(b, value);
        return 1;
}

int expo_add_labels_u64(struct expo_family *f, const struct expo_labels *ls, uint64_t value)
{
        if (f->type == EXPO_HISTOGRAM)
                return -EINVAL;
        if (!sample_head(f, ls))
                return 0;
        expo_buf_printf(&f->samples, "%" PRIu64 "\n", value);
        return 1;
}

int expo_add(struct expo_family *f, const struct expo_label *labels, size_t n, double value)
{
        struct expo_labels ls;
        int r = expo_labels_prepare(f->owner, labels, n, &ls);
        if (r < 0)
                return r;
        r = expo_add_labels(f, &ls, value);
        expo_labels_release(&ls);
        return r;
}

int expo_add_u64(struct expo_family *f, const struct expo_label *labels, size_t n, uint64_t value)
{
        struct expo_labels ls;
        int r = expo_labels_prepare(f->owner, labels, n, &ls);
        if (r < 0)
                return r;
        r = expo_add_labels_u64(f, &ls, value);
        expo_labels_release(&ls);
        return r;
}

/* name<suffix>{labels,le="bound"}: ls's text with one more label. */
static void put_bucket_head(struct expo_family *f, const struct expo_labels *ls, const char *le)
{
        struct expo_buf *b = &f->samples;
        expo_buf_puts(b, f->name);
        expo_buf_puts(b, "_bucket{");
        if (ls->text_len > 2) {
                expo_buf_put(b, ls->text + 1, ls->text_len - 2); /* without the braces */
                expo_buf_put(b, ",", 1);
        }
        expo_buf_puts(b, "le=\"");
        expo_buf_puts(b, le);
        expo_buf_puts(b, "\"} ");
}

int expo_add_histogram(struct expo_family *f, const struct expo_label *labels, size_t n,
                       const double *bounds, const uint64_t *counts, size_t n_bounds,
                       uint64_t count, double sum)
{
        if (f->type != EXPO_HISTOGRAM)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (strcmp(labels[i].name, "le") == 0)
                        return -EINVAL;
        struct expo_labels ls;
        int r = expo_labels_prepare(f->owner, labels, n, &ls);
        if (r < 0)
                return r;
        if (!sample_head(f, &ls)) {
                expo_labels_release(&ls);
                return 0;
        }
        struct expo_buf *b = &f->samples;
        for (size_t i = 0; i < n_bounds; i++) {
                char le[64];
                snprintf(le, sizeof(le), "%.15g", bounds[i]);
                put_bucket_head(f, &ls, le);
                expo_buf_printf(b, "%" PRIu64 "\n", counts[i]);
        }
        put_bucket_head(f, &ls, "+Inf");
        expo_buf_printf(b, "%" PRIu64 "\n", count);
        expo_buf_puts(b, f->name);
        expo_buf_puts(b, "_sum");
        expo_buf_put(b, ls.text, ls.text_len);
        expo_buf_put(b, " ", 1);
        put_double(b, sum);
        expo_buf_puts(b, f->name);
        expo_buf_puts(b, "_count");
        expo_buf_put(b, ls.text, ls.text_len);
        expo_buf_printf(b, " %" PRIu64 "\n", count);
        expo_labels_release(&ls);
        return 1;
}

char *expo_render(const struct expo *e, size_t *len)
{
        size_t total = 0;
        for (size_t i = 0; i < e->n_families; i++)
                total += e->families[i]->samples.len;
        struct expo_buf out = { 0 };
        buf_reserve(&out, total); /* sized once */
        for (size_t i = 0; i < e->n_families; i++)
                expo_buf_put(&out, e->families[i]->samples.data, e->families[i]->samples.len);
        return expo_buf_take(&out, len);
}

size_t expo_render_chunks(struct expo *e, struct expo_chunk **out)
{
        struct expo_chunk *chunks = xcalloc(e->n_families + 1, sizeof(*chunks));
        size_t n = 0;
        for (size_t i = 0; i < e->n_families; i++) {
                struct expo_family *f = e->families[i];
                if (f->n_samples == 0)
                        continue;
                /* handed over as they are, trimmed to their length */
                size_t len;
                char *data = expo_buf_take(&f->samples, &len);
                chunks[n++] = (struct expo_chunk){ xrealloc(data, len + 1), len };
                f->n_samples = 0;
                free(f->slots);
                f->slots = NULL;
                f->n_slots = 0;
        }
        *out = chunks;
        return n;
}
