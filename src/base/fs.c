/* Bounded reads, directories opened without following links, and the one
 * atomic writer.
 *
 * Every read opens with O_NONBLOCK and checks with fstat that the path is a
 * regular file before reading: a path a user or a ConfigMap controls can be
 * swapped for a FIFO, whose blocking open or read would freeze the caller's
 * loop.  sysfs and /proc attributes are regular files, so readers of those
 * are covered too.
 *
 * devlet runs as root and writes into directories others may share (the CDI
 * spec directory, NFD's features.d, --mps-root), so a writer must never let
 * a name planted there redirect it: directories are walked one component at
 * a time with O_NOFOLLOW (a symlink only root could have made, such as
 * /var/run, is the one kind followed), and files are born under a random
 * name with O_CREAT|O_EXCL|O_NOFOLLOW, which refuses whatever already exists
 * (a link, a FIFO whose open would block) instead of opening it, and are
 * renamed into place.  Nor may the directories themselves be anyone else's:
 * each one walked is checked (fstat of the descriptor just opened, so what
 * is checked is what is used) to be owned by root or us and writable by
 * nobody else, a sticky parent such as /tmp excepted, because whoever owns
 * or may write the target directory can replace the file devlet wrote
 * there with their own. */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/diag.h"
#include "base/xalloc.h"

static int open_regular(const char *path, int flags)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | flags);
        if (fd < 0)
                return -errno;
        struct stat st;
        int r = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0
                                            : S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

int fs_open_regular(const char *path)
{
        return open_regular(path, 0);
}

const char *fs_strerror(int r)
{
        return r == -EINVAL ? "not a regular file" : strerror(-r);
}

static int read_file(const char *path, int flags, size_t max, char **out, size_t *len)
{
        _cleanup_close_ int fd = open_regular(path, flags);
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

int fs_read_file(const char *path, size_t max, char **out, size_t *len)
{
        return read_file(path, 0, max, out, len);
}

int fs_read_file_nofollow(const char *path, size_t max, char **out, size_t *len)
{
        return read_file(path, O_NOFOLLOW, max, out, len);
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

#define FS_MAX_LINKS 40
#define FS_TEMP_TRIES 100

/* dfd's entry name is not a directory: the target of a symlink we may
 * follow into *target, -ELOOP for one we may not, -ENOTDIR for anything
 * else. */
static int link_target(int dfd, const char *name, unsigned flags, char **target)
{
        struct stat st, dir;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISLNK(st.st_mode))
                return -ENOTDIR;
        if (flags & FS_NO_SYMLINKS)
                return -ELOOP;
        if (fstat(dfd, &dir) < 0)
                return -errno;
        /* only root (or we) could have made it, and nobody else can swap
         * it while we read it: the directory is not writable by others,
         * or sticky (as /tmp: only an entry's owner may replace it); the
         * walk has checked the directory already, this says it again */
        uid_t me = geteuid();
        bool trusted = (st.st_uid == 0 || st.st_uid == me) &&
                       (dir.st_uid == 0 || dir.st_uid == me) &&
                       (!(dir.st_mode & (S_IWGRP | S_IWOTH)) || (dir.st_mode & S_ISVTX));
        if (!trusted)
                return -ELOOP;
        _cleanup_free_ char *buf = xmalloc(PATH_MAX);
        ssize_t n = readlinkat(dfd, name, buf, PATH_MAX - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        *target = TAKE_PTR(buf);
        return 0;
}

/* The next component of *p (NUL-terminated in place), *p moved past it;
 * NULL when none is left. */
static char *next_component(char **p)
{
        char *s = *p;
        while (*s == '/')
                s++;
        if (!*s)
                return NULL;
        char *end = strchrnul(s, '/');
        *p = *end ? end + 1 : end;
        *end = '\0';
        return s;
}

/* The path of the directory fd names, for a message: what the kernel says
 * (/proc/self/fd), else fallback. */
static const char *dir_path(int fd, const char *fallback, char *buf, size_t size)
{
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, buf, size - 1);
        if (n <= 0)
                return fallback;
        buf[n] = '\0';
        return buf;
}

/* Whether devlet may write below (last false) or into (last true) the
 * directory fd: it is root's or ours, and nobody else may write to it
 * unless it is sticky and not the last.  -EPERM with diag naming it, its
 * owner and its mode. */
static int dir_trusted(int fd, bool last, unsigned flags, const char *name, struct diag *diag)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return diag_set(diag, -errno, "%s: %s", name, strerror(errno));
        uid_t me = geteuid();
        bool owner_ok = st.st_uid == 0 || st.st_uid == me;
        bool sticky_ok = (st.st_mode & S_ISVTX) && (!last || (flags & FS_STICKY_LAST));
        bool write_ok = !(st.st_mode & (S_IWGRP | S_IWOTH)) || sticky_ok;
        if (owner_ok && write_ok)
                return 0;
        char buf[PATH_MAX], who[48] = "root";
        if (me != 0)
                snprintf(who, sizeof(who), "root or uid %u", (unsigned)me);
        const char *path = dir_path(fd, name, buf, sizeof(buf));
        unsigned mode = (unsigned)(st.st_mode & 07777);
        if (!owner_ok)
                return diag_set(diag, -EPERM,
                                "refusing to write %s %s: it is owned by uid %u (mode %04o), "
                                "and only %s may own the directories devlet writes into",
                                last ? "into" : "below", path, (unsigned)st.st_uid, mode, who);
        return diag_set(diag, -EPERM,
                        "refusing to write %s %s: its mode %04o (owner uid %u) lets others write "
                        "to it%s",
                        last ? "into" : "below", path, mode, (unsigned)st.st_uid,
                        last ? "" : " and it is not sticky");
}

int fs_open_dir(int dirfd, const char *path, unsigned flags, mode_t mode, struct diag *diag)
{
        if (!path[0])
                return diag_set(diag, -ENOENT, "%s", strerror(ENOENT));
        _cleanup_close_ int dfd = openat(path[0] == '/' ? AT_FDCWD : dirfd,
                                         path[0] == '/' ? "/" : ".",
                                         O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return diag_set(diag, -errno, "%s", strerror(errno));
        int r = dir_trusted(dfd, false, flags, path[0] == '/' ? "/" : ".", diag);
        if (r < 0)
                return r;
        /* what is created is never writable by group or others, whatever
         * the umask: the check below would refuse it */
        mode &= ~(mode_t)(S_IWGRP | S_IWOTH);
        _cleanup_free_ char *todo = xstrdup(path);
        char *p = todo;
        unsigned links = 0;
        for (char *name; (name = next_component(&p));) {
                if (strcmp(name, ".") == 0)
                        continue;
                int fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT && (flags & FS_CREATE)) {
                        if (mkdirat(dfd, name, mode) < 0 && errno != EEXIST)
                                return diag_set(diag, -errno, "%s: %s", name, strerror(errno));
                        fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (fd >= 0) {
                        close(dfd);
                        dfd = fd;
                        /* the last one is checked as such below */
                        r = p[strspn(p, "/")] ? dir_trusted(dfd, false, flags, name, diag) : 0;
                        if (r < 0)
                                return r;
                        continue;
                }
                if (errno != ENOTDIR && errno != ELOOP)
                        return diag_set(diag, -errno, "%s", strerror(errno));
                _cleanup_free_ char *target = NULL;
                r = link_target(dfd, name, flags, &target);
                if (r >= 0 && ++links > FS_MAX_LINKS)
                        r = -ELOOP;
                if (r < 0)
                        return diag_set(diag, r, "%s", fs_strerror(r));
                if (target[0] == '/') {
                        fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (fd < 0)
                                return diag_set(diag, -errno, "%s", strerror(errno));
                        close(dfd);
                        dfd = fd;
                        r = dir_trusted(dfd, false, flags, "/", diag);
                        if (r < 0)
                                return r;
                }
                /* the link's target, then what followed the link */
                char *rest = xasprintf("%s/%s", target, p);
                free(todo);
                todo = p = rest;
        }
        r = dir_trusted(dfd, true, flags, path, diag);
        if (r < 0)
                return r;
        return TAKE_FD(dfd);
}

int fs_mkdir_p(const char *path, mode_t mode)
{
        int fd = fs_open_dir(AT_FDCWD, path, FS_CREATE, mode, NULL);
        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

/* A fresh temporary name for base: ".<base>.<12 characters>". */
static void temp_name(char *out, size_t size, const char *base)
{
        static atomic_uint_fast64_t counter;
        static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        uint64_t v;
        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
                /* entropy not ready (early boot): unpredictable enough to
                 * make a collision rare, and O_EXCL makes one harmless */
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                v = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
                    (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
        }
        char rnd[13];
        for (size_t i = 0; i < 12; i++) {
                rnd[i] = chars[v % 36];
                v /= 36; /* 36^12 < 2^64: twelve digits of one random value */
        }
        rnd[12] = '\0';
        /* a long base is cut so the name stays within NAME_MAX */
        snprintf(out, size, ".%.*s.%s", NAME_MAX - 15, base, rnd);
}

static int write_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t w = write(fd, p, len);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += w;
                len -= (size_t)w;
        }
        return 0;
}

int fs_write_atomic_at(int dirfd, const char *path, const void *data, size_t len, mode_t mode,
                       unsigned flags, struct diag *diag)
{
        const char *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path;
        if (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
                return diag_set(diag, -EISDIR, "%s", strerror(EISDIR));
        _cleanup_free_ char *dir = slash ? xstrndup(path, slash == path ? 1 : (size_t)(slash - path))
                                         : xstrdup(".");
        _cleanup_close_ int dfd = fs_open_dir(dirfd, dir, flags, 0755, diag);
        if (dfd < 0)
                return dfd;
        char tmp[NAME_MAX + 1];
        _cleanup_close_ int fd = -1;
        for (unsigned tries = 0; fd < 0; tries++) {
                temp_name(tmp, sizeof(tmp), base);
                fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
                            0600);
                if (fd < 0 && (errno != EEXIST || tries + 1 == FS_TEMP_TRIES))
                        return diag_set(diag, -errno, "%s", strerror(errno));
        }
        int r = write_all(fd, data, len);
        if (r == 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r == 0 && !(flags & FS_NO_FSYNC) && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, base) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dfd, tmp, 0);
                return diag_set(diag, r, "%s", strerror(-r));
        }
        return 0;
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
        return fs_write_atomic_at(AT_FDCWD, path, data, len, mode, FS_CREATE, NULL);
}

struct fs_file_id fs_file_id_of(const char *path)
{
        struct stat st;
        if (!path || stat(path, &st) != 0)
                return (struct fs_file_id){ 0 };
        return (struct fs_file_id){ st.st_dev, st.st_ino, st.st_size, st.st_mtim, true };
}

bool fs_file_id_same(struct fs_file_id a, struct fs_file_id b)
{
        return a.present == b.present && a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
               a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec;
}
