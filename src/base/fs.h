/* File helpers: bounded reads, directories opened without following
 * links, atomic writes.  Knows nothing of devlet. */
#ifndef DEVLET_BASE_FS_H
#define DEVLET_BASE_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "base/diag.h"

/* Opens path for reading without ever blocking (O_NONBLOCK, so a FIFO's
 * open returns at once) and only if it is a regular file.  Returns the fd,
 * -EISDIR for a directory, -EINVAL for any other file that is not regular
 * (FIFO, socket, device), or -errno. */
int fs_open_regular(const char *path);

/* What tells a file's content changed without reading it: device, inode,
 * size and mtime (a replaced or rewritten file), or absent. */
struct fs_file_id {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        bool present;
};
/* path's identity now (stat, following links); absent for NULL or an error. */
struct fs_file_id fs_file_id_of(const char *path);
bool fs_file_id_same(struct fs_file_id a, struct fs_file_id b);

/* strerror() for the errors above: -EINVAL reads "not a regular file". */
const char *fs_strerror(int r);

/* Reads at most max bytes of the regular file path (fs_open_regular) into a
 * NUL-terminated heap buffer.  Returns 0 and sets *out and *len, -EFBIG if
 * the file is larger than max, or fs_open_regular's errors or -errno.  *out
 * is untouched on failure. */
int fs_read_file(const char *path, size_t max, char **out, size_t *len);

/* fs_read_file, but a symlink at path (its last component) is refused with
 * -ELOOP, never followed: for the files devlet alone writes, such as a
 * checkpoint. */
int fs_read_file_nofollow(const char *path, size_t max, char **out, size_t *len);

/* Reads a small sysfs-style regular file (fs_open_regular) and strips
 * trailing whitespace. */
int fs_read_line(const char *path, char *buf, size_t size);

/* How fs_open_dir() and fs_write_atomic_at() treat the directories on the
 * way. */
enum {
        FS_CREATE = 1 << 0,      /* create a missing directory */
        FS_NO_SYMLINKS = 1 << 1, /* refuse every symlink, even one only root could have made */
        FS_STICKY_LAST = 1 << 2, /* the last directory may be sticky and writable by all, as a
                                  * parent may (a tmpfs mount point: nothing is written there) */
        FS_NO_FSYNC = 1 << 3,    /* fs_write_atomic_at: no fsync before the rename, for a file
                                  * made again from state kept durably elsewhere, whose
                                  * reader checks it (a crash may leave it empty) */
};

/* Opens the directory path (relative paths from dirfd, which may be
 * AT_FDCWD) one component at a time, each with O_NOFOLLOW, and returns an
 * O_PATH descriptor of it.
 *
 * Every directory on the way, dirfd's or "/" included, must be owned by
 * root or our own user, and none may be writable by group or others unless
 * it is sticky (as /tmp: only an entry's owner may replace it), which the
 * last one may not be (except with FS_STICKY_LAST): a directory someone
 * else made or may write is where they could swap in what devlet writes
 * (a CDI spec the runtime obeys as root).
 *
 * A symlink on the way is followed only if nobody but root or our own user
 * could have put it there (the link is theirs, in a directory that passed
 * the check above, as /var/run -> /run), and never with FS_NO_SYMLINKS;
 * its target is walked the same way.  With FS_CREATE a missing component
 * is created (mode, less the umask, and never writable by group or others)
 * and opened and checked the same way, so a link or a directory raced into
 * its place is refused.
 *
 * Returns the fd, -EPERM for a directory owned by someone else or writable
 * by others, -ELOOP for a symlink refused (or more than 40 followed),
 * -ENOTDIR for a component that is not a directory, or -errno.  diag (may
 * be NULL) gets the message: for -EPERM the directory's path, owner and
 * mode, else fs_strerror's text. */
int fs_open_dir(int dirfd, const char *path, unsigned flags, mode_t mode, struct diag *diag);

/* mkdir -p through fs_open_dir(AT_FDCWD, path, FS_CREATE, mode, NULL): the
 * same checks, only the code. */
int fs_mkdir_p(const char *path, mode_t mode);

/* The one way devlet writes a file.  path's directory is opened with
 * fs_open_dir (dirfd, flags, diag; missing directories made 0755 with
 * FS_CREATE), so nothing is written below a directory someone else owns or
 * may write; data goes into a new file there with a random name
 * (".<name>.XXXXXXXXXXXX", created O_CREAT|O_EXCL|O_NOFOLLOW: never a
 * link, a FIFO or anything that was there before), which gets mode (fchmod
 * on the descriptor), is fsynced (unless FS_NO_FSYNC) and renamed over path, so readers see the
 * old or the new content, never a mix, and a symlink at path is replaced,
 * not followed.  Returns 0, fs_open_dir's errors, -EISDIR when path names
 * no file, or -errno, with diag as fs_open_dir sets it; on failure the
 * temporary file is gone and path is as it was. */
int fs_write_atomic_at(int dirfd, const char *path, const void *data, size_t len, mode_t mode,
                       unsigned flags, struct diag *diag);

/* fs_write_atomic_at(AT_FDCWD, path, data, len, mode, FS_CREATE, NULL). */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

#endif
