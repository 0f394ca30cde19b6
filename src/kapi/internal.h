/* What kapi's files share beyond kapi.h (and what its unit test reaches):
 * the strict base64 decoder and the token file reader. */
#ifndef DEVLET_KAPI_INTERNAL_H
#define DEVLET_KAPI_INTERNAL_H

#include <stddef.h>

/* A bearer token file is at most this long. */
#define KAPI_TOKEN_MAX (64u << 10)

/* Decodes standard, padded base64 (line breaks skipped) into a
 * NUL-terminated heap buffer.  Returns 0 with *out and *out_len, or
 * -EINVAL with *bad_at (may be NULL) the offset of the first bad
 * character (len when the input ends inside a group). */
int kapi_base64_decode(const char *in, size_t len, char **out, size_t *out_len, size_t *bad_at);

/* Reads a bearer token file (a regular file of at most KAPI_TOKEN_MAX
 * bytes) without its surrounding whitespace.  Returns 0 and *out, -EFBIG
 * for a larger file, -ENODATA for an empty token, -EBADMSG for control
 * characters inside it (they would end the Authorization header), or
 * fs_read_file's errors. */
int kapi_token_read(const char *path, char **out);

#endif
