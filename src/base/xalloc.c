/* Allocation wrappers that abort on exhaustion, and small string vectors. */
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void __attribute__((noreturn)) oom(size_t n)
{
        fprintf(stderr, "devlet: out of memory allocating %zu bytes\n", n);
        abort();
}

void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);
        if (!p)
                oom(n);
        return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
        void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
        if (!p)
                oom(nmemb * size);
        return p;
}

void *xrealloc(void *p, size_t n)
{
        void *q = realloc(p, n ? n : 1);
        if (!q)
                oom(n);
        return q;
}

void xgrow(void **arr, size_t *cap, size_t need, size_t elsz)
{
        if (need <= *cap)
                return;
        size_t ncap = *cap ? *cap : 4;
        while (ncap < need)
                ncap *= 2;
        *arr = xrealloc(*arr, ncap * elsz);
        memset((char *)*arr + *cap * elsz, 0, (ncap - *cap) * elsz);
        *cap = ncap;
}

char *xstrdup(const char *s)
{
        return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
        char *p = xmalloc(n + 1);
        memcpy(p, s, n);
        p[n] = '\0';
        return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
        char *s;
        if (vasprintf(&s, fmt, ap) < 0)
                oom(0);
        return s;
}

char *xasprintf(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = xvasprintf(fmt, ap);
        va_end(ap);
        return s;
}

size_t strv_len(char *const *v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

char **strv_push(char **v, const char *s)
{
        size_t n = strv_len(v);
        v = xrealloc(v, (n + 2) * sizeof(*v));
        v[n] = xstrdup(s);
        v[n + 1] = NULL;
        return v;
}

char **strv_copy(const char *const *v)
{
        if (!v)
                return NULL;
        char **out = xcalloc(1, sizeof(*out));
        for (size_t i = 0; v[i]; i++)
                out = strv_push(out, v[i]);
        return out;
}

void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

int strv_contains(char *const *v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return 1;
        return 0;
}

int strv_equal(char *const *a, char *const *b)
{
        size_t i = 0;
        for (; a && a[i] && b && b[i]; i++)
                if (strcmp(a[i], b[i]) != 0)
                        return 0;
        return !(a && a[i]) && !(b && b[i]);
}

int streq_ptr(const char *a, const char *b)
{
        return a && b ? strcmp(a, b) == 0 : a == b;
}
