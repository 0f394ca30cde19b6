/* Bounded reads and atomic writes.
 *
 * Every read opens with O_NONBLOCK and checks with fstat that the path is a
 * regular file before reading: a path a user or a ConfigMap controls can be
 * swapped for a FIFO, whose blocking open or read would freeze the caller's
 * loop.  sysfs and /proc attributes are regular files, so readers of those
 * are covered too. */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

int fs_open_regular(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return -errno;
        struct stat st;
        int r = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0
                                            : S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

const char *fs_strerror(int r)
{
        return r == -EINVAL ? "not a regular file" : strerror(-r);
}

int fs_read_file(const char *path, size_t max, char **out, size_t *len)
{
        _cleanup_close_ int fd = fs_open_regular(path);
        if (fd < 0)
                return fd;
        size_t cap = 4096, n = 0;
        _cleanup_free_ char *buf = xmalloc(cap + 1);
        for (;;) {
                if (n == cap) {
                        if (cap > max)
                                return -EFBIG;
                        cap *= 2;
                        buf = xrealloc(buf, cap + 1);
                }
                ssize_t r = read(fd, buf + n, cap - n);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (r == 0)
                        break;
                n += (size_t)r;
                if (n > max)
                        return -EFBIG;
        }
        buf[n] = '\0';
        *out = TAKE_PTR(buf);
        if (len)
                *len = n;
        return 0;
}

int fs_read_line(const char *path, char *buf, size_t size)
{
        _cleanup_close_ int fd = fs_open_regular(path);
        if (fd < 0)
                return fd;
        ssize_t r = read(fd, buf, size - 1);
        if (r < 0)
                return -errno;
        while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' ' || buf[r - 1] == '\t'))
                r--;
        buf[r] = '\0';
        return 0;
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
        _cleanup_free_ char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        const char *p = data;
        while (len > 0) {
                ssize_t w = write(fd, p, len);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        unlink(tmp);
                        return r;
                }
                p += w;
                len -= (size_t)w;
        }
        if (fchmod(fd, mode) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
                int r = -errno;
                unlink(tmp);
                return r;
        }
        return 0;
}

int fs_mkdir_p(const char *path, mode_t mode)
{
        _cleanup_free_ char *p = xstrdup(path);
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}
