/* The Prometheus text format writer (see expo.h).
 *
 * Each family keeps its samples already rendered, one line each, in a byte
 * buffer, plus a hash set of canonical label-set keys (labels sorted by
 * name, "name\0value\0" each) to refuse duplicates in O(1).  Rendering
 * concatenates HELP, TYPE and the sample buffer of each family in
 * declaration order.  Never does I/O and never takes locks. */
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
                cap *= 2;
        b->data = xrealloc(b->data, cap);
        b->cap = cap;
}

void expo_buf_put(struct expo_buf *b, const char *s, size_t n)
{
        buf_reserve(b, n);
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
        const char *run = value;
        for (const char *p = value; *p; p++) {
                const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
                if (!esc)
                        continue;
                expo_buf_put(b, run, (size_t)(p - run));
                expo_buf_put(b, esc, 2);
                run = p + 1;
        }
        expo_buf_puts(b, run);
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
        size_t off, len; /* into keys */
};

struct expo_family {
        char *name;
        char *help;
        enum expo_type type;
        struct expo_buf samples;
        size_t n_samples;
        struct expo_buf keys; /* canonical keys back to back */
        struct key_slot *slots;
        size_t n_slots; /* power of two */
};

struct expo {
        struct expo_family **families;
        size_t n_families, cap_families;
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
                expo_buf_release(&f->keys);
                free(f->slots);
                free(f);
        }
        free(e->families);
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

/* Records the key; returns false when it was already there. */
static bool key_insert(struct expo_family *f, const char *key, size_t len)
{
        if ((f->n_samples + 1) * 2 > f->n_slots)
                slots_grow(f);
        uint64_t h = fnv1a(key, len);
        size_t j = h & (f->n_slots - 1);
        for (; f->slots[j].hash; j = (j + 1) & (f->n_slots - 1)) {
                struct key_slot *s = &f->slots[j];
                if (s->hash == h && s->len == len && memcmp(f->keys.data + s->off, key, len) == 0)
                        return false;
        }
        f->slots[j] = (struct key_slot){ .hash = h, .off = f->keys.len, .len = len };
        expo_buf_put(&f->keys, key, len);
        return true;
}

#define EXPO_MAX_LABELS 32

/* Validates the labels and adds the series' key; 1 new, 0 duplicate. */
static int series_new(struct expo_family *f, const struct expo_label *labels, size_t n)
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
        struct expo_buf key = { 0 };
        for (size_t i = 0; i < n; i++) {
                const struct expo_label *l = &labels[order[i]];
                if (i > 0 && strcmp(labels[order[i - 1]].name, l->name) == 0) {
                        expo_buf_release(&key);
                        return -EINVAL;
                }
                expo_buf_put(&key, l->name, strlen(l->name) + 1);
                expo_buf_put(&key, l->value, strlen(l->value) + 1);
        }
        bool added = key_insert(f, key.data ? key.data : "", key.len);
        expo_buf_release(&key);
        return added ? 1 : 0;
}

static void sample_head(struct expo_family *f, const struct expo_label *labels, size_t n)
{
        struct expo_buf *b = &f->samples;
        expo_buf_puts(b, f->name);
        if (n > 0) {
                expo_buf_put(b, "{", 1);
                for (size_t i = 0; i < n; i++) {
                        if (i > 0)
                                expo_buf_put(b, ",", 1);
                        expo_buf_puts(b, labels[i].name);
                        expo_buf_put(b, "=\"", 2);
                        expo_escape_label(b, labels[i].value);
                        expo_buf_put(b, "\"", 1);
                }
                expo_buf_put(b, "}", 1);
        }
        expo_buf_put(b, " ", 1);
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

int expo_add(struct expo_family *f, const struct expo_label *labels, size_t n, double value)
{
        int r = series_new(f, labels, n);
        if (r <= 0)
                return r;
        sample_head(f, labels, n);
        struct expo_buf *b = &f->samples;
        if (isnan(value))
                expo_buf_puts(b, "NaN\n");
        else if (isinf(value))
                expo_buf_puts(b, value > 0 ? "+Inf\n" : "-Inf\n");
        else if (value == (double)(int64_t)value && fabs(value) <= 9007199254740992.0)
                expo_buf_printf(b, "%" PRId64 "\n", (int64_t)value);
        else
                put_double(b, value);
        f->n_samples++;
        return 1;
}

int expo_add_u64(struct expo_family *f, const struct expo_label *labels, size_t n, uint64_t value)
{
        int r = series_new(f, labels, n);
        if (r <= 0)
                return r;
        sample_head(f, labels, n);
        expo_buf_printf(&f->samples, "%" PRIu64 "\n", value);
        f->n_samples++;
        return 1;
}

char *expo_render(const struct expo *e, size_t *len)
{
        struct expo_buf out = { 0 };
        for (size_t i = 0; i < e->n_families; i++) {
                const struct expo_family *f = e->families[i];
                if (f->n_samples == 0)
                        continue;
                expo_buf_puts(&out, "# HELP ");
                expo_buf_puts(&out, f->name);
                expo_buf_put(&out, " ", 1);
                escape_help(&out, f->help);
                expo_buf_puts(&out, "\n# TYPE ");
                expo_buf_puts(&out, f->name);
                expo_buf_puts(&out, f->type == EXPO_COUNTER ? " counter\n" : " gauge\n");
                expo_buf_put(&out, f->samples.data, f->samples.len);
        }
        return expo_buf_take(&out, len);
}
