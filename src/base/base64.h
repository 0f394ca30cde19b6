/* Base64 decoding (base64.c). */
#ifndef DEVLET_BASE_BASE64_H
#define DEVLET_BASE_BASE64_H

#include <stddef.h>

/* Decodes standard, padded base64 (line breaks skipped) into a
 * NUL-terminated heap buffer *out of *out_len bytes.  0, or -EINVAL with
 * *bad_at (may be NULL) the offset of the first bad character (len for a
 * last group cut short); *out is untouched on failure. */
int base64_decode(const char *in, size_t len, char **out, size_t *out_len, size_t *bad_at);

#endif
