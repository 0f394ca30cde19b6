/* Helpers the fuzz targets share. */
#ifndef DEVLET_FUZZ_UTIL_H
#define DEVLET_FUZZ_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The input as a NUL-terminated heap string (NUL bytes inside split it into
 * fields), or NULL if out of memory. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1);
        if (s) {
                memcpy(s, data, size);
                s[size] = '\0';
        }
        return s;
}

#endif
