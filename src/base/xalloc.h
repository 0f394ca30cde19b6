/* Allocation that never returns NULL.
 *
 * A node agent that runs out of memory cannot do anything useful, so devlet
 * aborts with a message rather than threading -ENOMEM through every call
 * (valkey's zmalloc makes the same choice).  Peer-controlled sizes must be
 * bounded by the caller before they reach these functions. */
#ifndef DEVLET_BASE_XALLOC_H
#define DEVLET_BASE_XALLOC_H

#include <stdarg.h>
#include <stddef.h>

#include "base/cleanup.h"

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
/* Grows *arr (element size elsz) so that it holds at least need elements. */
void xgrow(void **arr, size_t *cap, size_t need, size_t elsz);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* A NULL-terminated vector of owned strings. */
char **strv_push(char **v, const char *s);
size_t strv_len(char *const *v);
/* A new vector holding copies of v's strings; NULL for NULL. */
char **strv_copy(const char *const *v);
void strv_free(char **v);
static inline void strv_freep(char ***v) { strv_free(*v); }
#define _cleanup_strv_free_ _cleanup_(strv_freep)
int strv_contains(char *const *v, const char *s);
/* Whether a and b hold the same strings in the same order (NULL is empty). */
int strv_equal(char *const *a, char *const *b);
/* Whether a and b are both NULL or equal strings. */
int streq_ptr(const char *a, const char *b);

#endif
