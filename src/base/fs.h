/* File helpers: bounded reads and atomic writes.  Knows nothing of devlet. */
#ifndef DEVLET_BASE_FS_H
#define DEVLET_BASE_FS_H

#include <stddef.h>
#include <sys/types.h>

/* Reads at most max bytes of path into a NUL-terminated heap buffer.
 * Returns 0 and sets *out and *len, -EFBIG if the file is larger than max,
 * or -errno. *out is untouched on failure. */
int fs_read_file(const char *path, size_t max, char **out, size_t *len);

/* Reads a small sysfs-style file and strips trailing whitespace. */
int fs_read_line(const char *path, char *buf, size_t size);

/* Writes data to path through a temporary file in the same directory and
 * rename(2), so readers see the old or the new content, never a mix. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* mkdir -p. */
int fs_mkdir_p(const char *path, mode_t mode);

#endif
