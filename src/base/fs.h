/* File helpers: bounded reads and atomic writes.  Knows nothing of devlet. */
#ifndef DEVLET_BASE_FS_H
#define DEVLET_BASE_FS_H

#include <stddef.h>
#include <sys/types.h>

/* Opens path for reading without ever blocking (O_NONBLOCK, so a FIFO's
 * open returns at once) and only if it is a regular file.  Returns the fd,
 * -EISDIR for a directory, -EINVAL for any other file that is not regular
 * (FIFO, socket, device), or -errno. */
int fs_open_regular(const char *path);

/* strerror() for the errors above: -EINVAL reads "not a regular file". */
const char *fs_strerror(int r);

/* Reads at most max bytes of the regular file path (fs_open_regular) into a
 * NUL-terminated heap buffer.  Returns 0 and sets *out and *len, -EFBIG if
 * the file is larger than max, or fs_open_regular's errors or -errno.  *out
 * is untouched on failure. */
int fs_read_file(const char *path, size_t max, char **out, size_t *len);

/* Reads a small sysfs-style regular file (fs_open_regular) and strips
 * trailing whitespace. */
int fs_read_line(const char *path, char *buf, size_t size);

/* Writes data to path through a temporary file in the same directory and
 * rename(2), so readers see the old or the new content, never a mix. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* mkdir -p. */
int fs_mkdir_p(const char *path, mode_t mode);

#endif
