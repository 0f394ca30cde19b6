/* The Prometheus text exposition format 0.0.4, built in memory.
 *
 * An exposition is a list of families (name, HELP, TYPE) in the order they
 * were first declared; each family holds its samples in the order they were
 * added.  Samples may be added to any family at any time: rendering emits
 * every family contiguously, with one HELP and one TYPE line.  A sample
 * whose label set (names and values, in any order) equals an earlier one of
 * the same family is dropped, so the output never holds a duplicate series.
 * Label values and HELP texts are escaped as the format requires.
 *
 * Pure code: no I/O, no locks; one exposition belongs to one thread. */
#ifndef DEVLET_METRICS_EXPO_H
#define DEVLET_METRICS_EXPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer (always NUL-terminated once written to). */
struct expo_buf {
        char *data;
        size_t len, cap;
};

void expo_buf_put(struct expo_buf *b, const char *s, size_t n);
void expo_buf_puts(struct expo_buf *b, const char *s);
void expo_buf_printf(struct expo_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the bytes over (a heap string, "" when nothing was written). */
char *expo_buf_take(struct expo_buf *b, size_t *len);
void expo_buf_release(struct expo_buf *b);

enum expo_type { EXPO_GAUGE, EXPO_COUNTER, EXPO_HISTOGRAM };

struct expo_label {
        const char *name;
        const char *value;
};

struct expo;
struct expo_family;

struct expo *expo_new(void);
void expo_free(struct expo *e);

/* The family called name, declared now if it is new (help and type of the
 * first declaration stay).  Returns NULL for a name that is not a valid
 * metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). */
struct expo_family *expo_family(struct expo *e, const char *name, enum expo_type type,
                                const char *help);

/* Adds one sample.  Returns 1 when added, 0 when the family already has a
 * series with this label set (the first one stays), -EINVAL for an invalid
 * label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__") or a label
 * name given twice.  Values: integers up to 2^53 print exactly, NaN and
 * infinities as the format spells them. */
int expo_add(struct expo_family *f, const struct expo_label *labels, size_t n, double value);
/* The same for an unsigned counter (prints every digit). */
int expo_add_u64(struct expo_family *f, const struct expo_label *labels, size_t n, uint64_t value);
/* One series of an EXPO_HISTOGRAM family: <name>_bucket with le="<bound>"
 * for each of the n_bounds upper bounds (ascending; counts[i]: the
 * observations <= bounds[i], cumulative) and le="+Inf" (count), then
 * <name>_sum and <name>_count.  labels must not name "le".  Returns as
 * expo_add. */
int expo_add_histogram(struct expo_family *f, const struct expo_label *labels, size_t n,
                       const double *bounds, const uint64_t *counts, size_t n_bounds,
                       uint64_t count, double sum);

/* A label set prepared once for samples in many families: validated,
 * escaped and keyed.  The rules and return values of expo_add apply. */
struct expo_labels {
        uint64_t hash;
        size_t key_off, key_len; /* the canonical key, in the exposition */
        char *text;              /* "{a=\"x\",b=\"y\"}" or "" */
        size_t text_len;
};

int expo_labels_prepare(struct expo *e, const struct expo_label *labels, size_t n,
                        struct expo_labels *out);
void expo_labels_release(struct expo_labels *ls);
/* Returns 1 when added, 0 for a duplicate series.  ls must come from the
 * family's exposition. */
int expo_add_labels(struct expo_family *f, const struct expo_labels *ls, double value);
int expo_add_labels_u64(struct expo_family *f, const struct expo_labels *ls, uint64_t value);

size_t expo_family_samples(const struct expo_family *f);

/* Renders every family that has at least one sample, in declaration
 * order.  Returns a heap string; *len (may be NULL) gets its length. */
char *expo_render(const struct expo *e, size_t *len);

/* The same text as chunks, one per family with samples (its HELP, TYPE and
 * samples), handed over without a copy: *out is a heap array whose chunks'
 * data the caller frees.  The exposition's families are empty afterwards.
 * Returns the number of chunks. */
struct expo_chunk {
        char *data;
        size_t len;
};
size_t expo_render_chunks(struct expo *e, struct expo_chunk **out);

/* Appends value to b escaped as a label value (\\, \", \n). */
void expo_escape_label(struct expo_buf *b, const char *value);

#endif
