/* Unit tests for src/base/fs.c: reads never block and refuse what is not a
 * regular file (a FIFO with no writer, a directory, a socket), with the
 * errors callers turn into messages; the atomic writer never follows a
 * planted link nor opens a planted FIFO, and directories on the way are
 * walked without following links anyone but root could have made, nor
 * into directories someone else owns or may write.  The
 * whole file runs under alarm(): a blocking open fails it instead of
 * hanging. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"

static char dir[64];

static int setup(void **state)
{
        strcpy(dir, "/tmp/test-fs-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd);
}

static void test_regular_file(void **state)
{
        char path[128];
        snprintf(path, sizeof(path), "%s/file", dir);
        assert_int_equal(fs_write_atomic(path, "value \n", 7, 0644), 0);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(fs_read_file(path, 100, &data, &len), 0);
        assert_int_equal(len, 7);
        assert_string_equal(data, "value \n");
        free(data);
        char line[16];
        assert_int_equal(fs_read_line(path, line, sizeof(line)), 0);
        assert_string_equal(line, "value");
        assert_int_equal(fs_read_file(path, 3, &data, &len), -EFBIG);
}

static void test_read_nofollow(void **state)
{
        char path[128], link[128];
        snprintf(path, sizeof(path), "%s/nofollow-target", dir);
        snprintf(link, sizeof(link), "%s/nofollow-link", dir);
        assert_int_equal(fs_write_atomic(path, "x", 1, 0600), 0);
        assert_int_equal(symlink(path, link), 0);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(fs_read_file_nofollow(link, 100, &data, &len), -ELOOP);
        assert_null(data);
        assert_int_equal(fs_read_file_nofollow(path, 100, &data, &len), 0);
        assert_int_equal(len, 1);
        free(data);
        /* fs_read_file follows it (kubeconfigs and ConfigMaps are links) */
        assert_int_equal(fs_read_file(link, 100, &data, &len), 0);
        free(data);
}

static void test_fifo_never_blocks(void **state)
{
        char path[128];
        snprintf(path, sizeof(path), "%s/fifo", dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        char *data = NULL;
        /* a blocking open(2) would wait here for a writer for ever */
        assert_int_equal(fs_read_file(path, 100, &data, NULL), -EINVAL);
        assert_null(data);
        char line[16];
        assert_int_equal(fs_read_line(path, line, sizeof(line)), -EINVAL);
        assert_string_equal(fs_strerror(-EINVAL), "not a regular file");
}

static void test_directory_and_socket(void **state)
{
        char *data = NULL;
        assert_int_equal(fs_read_file(dir, 100, &data, NULL), -EISDIR);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_true(fs_open_regular(sa.sun_path) < 0); /* ENXIO from open, or EINVAL */
        close(fd);
        char missing[128];
        snprintf(missing, sizeof(missing), "%s/missing", dir);
        assert_int_equal(fs_read_file(missing, 100, &data, NULL), -ENOENT);
}

static void read_text(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        assert_true(fd >= 0);
        ssize_t n = read(fd, buf, size - 1);
        assert_true(n >= 0);
        buf[n] = '\0';
        close(fd);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

/* Entries of d (not . and ..), sorted by name into one string "a b c". */
static void entries(const char *d, char *out, size_t size)
{
        struct dirent **list = NULL;
        int n = scandir(d, &list, NULL, alphasort);
        assert_true(n >= 0);
        out[0] = '\0';
        for (int i = 0; i < n; i++) {
                if (strcmp(list[i]->d_name, ".") && strcmp(list[i]->d_name, "..")) {
                        if (out[0])
                                strncat(out, " ", size - strlen(out) - 1);
                        strncat(out, list[i]->d_name, size - strlen(out) - 1);
                }
                free(list[i]);
        }
        free(list);
}

/* The name the writer used to take, <path>.tmp.<pid>, is a link to a file
 * of someone else's: it stays as it was, content and mode. */
static void test_write_never_follows_a_planted_link(void **state)
{
        char sub[128], path[160], planted[192], victim[128], buf[64], list[512];
        snprintf(sub, sizeof(sub), "%s/link", dir);
        assert_int_equal(mkdir(sub, 0755), 0);
        snprintf(victim, sizeof(victim), "%s/victim", dir);
        write_text(victim, "secret\n", 0600);
        snprintf(path, sizeof(path), "%s/labels", sub);
        snprintf(planted, sizeof(planted), "%s.tmp.%ld", path, (long)getpid());
        assert_int_equal(symlink(victim, planted), 0);

        assert_int_equal(fs_write_atomic(path, "a=b\n", 4, 0644), 0);
        read_text(victim, buf, sizeof(buf));
        assert_string_equal(buf, "secret\n");
        struct stat st;
        assert_int_equal(stat(victim, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        read_text(path, buf, sizeof(buf));
        assert_string_equal(buf, "a=b\n");
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0644);
        /* the planted link is untouched and no temporary file is left */
        entries(sub, list, sizeof(list));
        char want[256];
        snprintf(want, sizeof(want), "labels labels.tmp.%ld", (long)getpid());
        assert_string_equal(list, want);

        /* a link at the path itself is replaced, not written through */
        unlink(planted);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(symlink(victim, path), 0);
        assert_int_equal(fs_write_atomic(path, "c=d\n", 4, 0644), 0);
        read_text(victim, buf, sizeof(buf));
        assert_string_equal(buf, "secret\n");
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
}

/* A FIFO at the old temporary name: the writer neither opens nor waits on
 * it (a blocking open would wait for a reader for ever: alarm() ends it). */
static void test_write_never_opens_a_planted_fifo(void **state)
{
        char sub[128], path[160], planted[192], buf[64];
        snprintf(sub, sizeof(sub), "%s/fifo-dir", dir);
        assert_int_equal(mkdir(sub, 0755), 0);
        snprintf(path, sizeof(path), "%s/spec.yaml", sub);
        snprintf(planted, sizeof(planted), "%s.tmp.%ld", path, (long)getpid());
        assert_int_equal(mkfifo(planted, 0600), 0);
        assert_int_equal(fs_write_atomic(path, "x: 1\n", 5, 0644), 0);
        read_text(path, buf, sizeof(buf));
        assert_string_equal(buf, "x: 1\n");
        struct stat st;
        assert_int_equal(lstat(planted, &st), 0);
        assert_true(S_ISFIFO(st.st_mode));
}

/* A directory others may write holds a link where the writer would create
 * a directory: refused, nothing lands in the link's target. */
static void test_planted_directory_link_refused(void **state)
{
        char shared[128], target[128], link[160], path[192], list[256];
        snprintf(shared, sizeof(shared), "%s/shared", dir);
        assert_int_equal(mkdir(shared, 0755), 0);
        assert_int_equal(chmod(shared, 0777), 0);
        snprintf(target, sizeof(target), "%s/target", dir);
        assert_int_equal(mkdir(target, 0755), 0);
        snprintf(link, sizeof(link), "%s/features.d", shared);
        assert_int_equal(symlink(target, link), 0);

        /* the directory is refused before its link is looked at */
        snprintf(path, sizeof(path), "%s/gfd", link);
        assert_int_equal(fs_write_atomic(path, "a=b\n", 4, 0644), -EPERM);
        snprintf(path, sizeof(path), "%s/more/dirs", link);
        assert_int_equal(fs_mkdir_p(path, 0755), -EPERM);
        entries(target, list, sizeof(list));
        assert_string_equal(list, "");
        /* sticky, as /tmp, it may be on the way: the link, nobody's, is not */
        assert_int_equal(chmod(shared, 01777), 0);
        assert_int_equal(lchown(link, 65534, 65534), 0);
        snprintf(path, sizeof(path), "%s/gfd", link);
        assert_int_equal(fs_write_atomic(path, "a=b\n", 4, 0644), -ELOOP);
        snprintf(path, sizeof(path), "%s/more/dirs", link);
        assert_int_equal(fs_mkdir_p(path, 0755), -ELOOP);
        entries(target, list, sizeof(list));
        assert_string_equal(list, "");
        /* a link that is only a file's name at the end is no directory */
        snprintf(path, sizeof(path), "%s/file", dir);
        write_text(path, "x", 0644);
        snprintf(path, sizeof(path), "%s/file/gfd", dir);
        assert_int_equal(fs_write_atomic(path, "a=b\n", 4, 0644), -ENOTDIR);
}

/* A link only root (or we) could have made, in a directory nobody else may
 * write, is followed (/var/run -> /run); FS_NO_SYMLINKS refuses it too. */
static void test_trusted_link_followed_unless_no_symlinks(void **state)
{
        char base[128], real[160], alias[160], path[192], buf[16];
        snprintf(base, sizeof(base), "%s/trusted", dir);
        assert_int_equal(mkdir(base, 0755), 0);
        assert_int_equal(chmod(base, 0755), 0);
        snprintf(real, sizeof(real), "%s/real", base);
        assert_int_equal(mkdir(real, 0755), 0);
        snprintf(alias, sizeof(alias), "%s/alias", base);
        assert_int_equal(symlink("real", alias), 0);
        snprintf(path, sizeof(path), "%s/sub/file", alias);
        assert_int_equal(fs_write_atomic(path, "ok", 2, 0644), 0);
        snprintf(path, sizeof(path), "%s/sub/file", real);
        read_text(path, buf, sizeof(buf));
        assert_string_equal(buf, "ok");

        int bfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(bfd >= 0);
        assert_int_equal(
                fs_write_atomic_at(bfd, "alias/sub/file", "no", 2, 0644, FS_NO_SYMLINKS, NULL),
                -ELOOP);
        assert_int_equal(fs_open_dir(bfd, "alias", FS_NO_SYMLINKS, 0755, NULL), -ELOOP);
        assert_int_equal(fs_write_atomic_at(bfd, "real/sub/file", "yes", 3, 0644,
                                            FS_CREATE | FS_NO_SYMLINKS, NULL),
                         0);
        read_text(path, buf, sizeof(buf));
        assert_string_equal(buf, "yes");
        close(bfd);

        /* our link in a sticky directory (as /tmp): nobody else may replace it */
        assert_int_equal(chmod(base, 01777), 0);
        snprintf(path, sizeof(path), "%s/sub/sticky", alias);
        assert_int_equal(fs_write_atomic(path, "ok", 2, 0644), 0);
        /* but not without the sticky bit: the directory itself is refused */
        assert_int_equal(chmod(base, 0777), 0);
        assert_int_equal(fs_write_atomic(path, "no", 2, 0644), -EPERM);
}

/* Missing directories are created (0755), and a FIFO where a directory
 * should be is refused without blocking. */
static void test_directories_created_and_checked(void **state)
{
        char path[192], buf[16];
        mode_t old = umask(022);
        snprintf(path, sizeof(path), "%s/a/b/c/file", dir);
        assert_int_equal(fs_write_atomic(path, "1", 1, 0640), 0);
        umask(old);
        read_text(path, buf, sizeof(buf));
        assert_string_equal(buf, "1");
        struct stat st;
        snprintf(path, sizeof(path), "%s/a/b", dir);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0755);
        snprintf(path, sizeof(path), "%s/a/b/c/file", dir);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);

        snprintf(path, sizeof(path), "%s/pipe", dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        snprintf(path, sizeof(path), "%s/pipe/file", dir);
        assert_int_equal(fs_write_atomic(path, "1", 1, 0644), -ENOTDIR);
        assert_int_equal(fs_mkdir_p(path, 0755), -ENOTDIR);
        assert_int_equal(fs_write_atomic(dir, "1", 1, 0644) < 0, 1); /* a directory */
        snprintf(path, sizeof(path), "%s/a/", dir);
        assert_int_equal(fs_write_atomic(path, "1", 1, 0644), -EISDIR);
}

/* A failed rename leaves no temporary file behind. */
static void test_failure_leaves_nothing(void **state)
{
        char sub[128], path[160], list[256];
        snprintf(sub, sizeof(sub), "%s/fail", dir);
        assert_int_equal(mkdir(sub, 0755), 0);
        snprintf(path, sizeof(path), "%s/taken", sub);
        assert_int_equal(mkdir(path, 0755), 0);
        assert_true(fs_write_atomic(path, "1", 1, 0644) < 0); /* a directory is there */
        entries(sub, list, sizeof(list));
        assert_string_equal(list, "taken");
}

/* dir/<name>, made with mode (chmod: the umask aside) and owner uid. */
static void make_dir(char *out, size_t size, const char *name, mode_t mode, uid_t uid)
{
        snprintf(out, size, "%s/%s", dir, name);
        assert_int_equal(mkdir(out, 0700), 0);
        assert_int_equal(chmod(out, mode), 0);
        assert_int_equal(chown(out, uid, uid), 0);
}

/* A write into dir/<name>/file is refused with -EPERM and a message naming
 * the offending directory, its owner and mode; nothing lands there. */
static void assert_refused(const char *name, const char *offender, const char *owner_mode)
{
        char path[192], list[256];
        snprintf(path, sizeof(path), "%s/%s/file", dir, name);
        struct diag diag = { 0 };
        assert_int_equal(fs_write_atomic_at(AT_FDCWD, path, "x", 1, 0644, FS_CREATE, &diag),
                         -EPERM);
        char want[192];
        snprintf(want, sizeof(want), "%s/%s", dir, offender);
        assert_non_null(strstr(diag.message, want));
        assert_non_null(strstr(diag.message, owner_mode));
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        entries(path, list, sizeof(list));
        assert_string_equal(list, "");
        assert_int_equal(fs_open_dir(AT_FDCWD, path, 0, 0755, NULL), -EPERM);
        assert_int_equal(fs_write_atomic(strcat(path, "/file"), "x", 1, 0644), -EPERM);
}

/* The directory written into must be root's (or ours) and writable by
 * nobody else; every directory above it root's (or ours), writable by
 * others only when sticky, as /tmp.  What someone else made first (CDI's
 * directory, features.d) is refused: they could swap the file for theirs. */
static void test_directories_of_others_refused(void **state)
{
        if (geteuid() != 0)
                skip(); /* chown */
        char d[160], sub[192];
        make_dir(d, sizeof(d), "nobodys", 0755, 65534);
        assert_refused("nobodys", "nobodys", "uid 65534 (mode 0755)");
        make_dir(d, sizeof(d), "open", 0777, 0);
        assert_refused("open", "open", "mode 0777 (owner uid 0)");
        make_dir(d, sizeof(d), "group", 0775, 0);
        assert_refused("group", "group", "mode 0775");
        /* sticky does for a parent, not for the directory written into */
        make_dir(d, sizeof(d), "sticky", 01777, 0);
        assert_refused("sticky", "sticky", "mode 1777");
        /* a parent owned by nobody (or open to all and not sticky) taints
         * the root-owned directory below it */
        make_dir(d, sizeof(d), "np", 0755, 65534);
        make_dir(sub, sizeof(sub), "np/cdi", 0755, 0);
        assert_refused("np/cdi", "np", "uid 65534");
        make_dir(d, sizeof(d), "op", 0777, 0);
        make_dir(sub, sizeof(sub), "op/cdi", 0755, 0);
        assert_refused("op/cdi", "op", "not sticky");
        /* nobody's sticky directory is nobody's all the same */
        make_dir(d, sizeof(d), "ns", 01777, 65534);
        make_dir(sub, sizeof(sub), "ns/cdi", 0755, 0);
        assert_refused("ns/cdi", "ns", "uid 65534");

        /* a root-owned sticky parent, as /tmp, is fine */
        make_dir(d, sizeof(d), "tmp", 01777, 0);
        make_dir(sub, sizeof(sub), "tmp/cdi", 0755, 0);
        char path[224], buf[8];
        snprintf(path, sizeof(path), "%s/spec.yaml", sub);
        assert_int_equal(fs_write_atomic(path, "ok", 2, 0644), 0);
        read_text(path, buf, sizeof(buf));
        assert_string_equal(buf, "ok");
        /* nothing is created below a directory refused */
        snprintf(path, sizeof(path), "%s/nobodys/new/file", dir);
        assert_int_equal(fs_write_atomic(path, "x", 1, 0644), -EPERM);
        snprintf(path, sizeof(path), "%s/nobodys/new", dir);
        assert_int_equal(access(path, F_OK), -1);
        /* FS_STICKY_LAST: a mount point such as a tmpfs for /dev/shm */
        snprintf(path, sizeof(path), "%s/sticky", dir);
        int fd = fs_open_dir(AT_FDCWD, path, FS_STICKY_LAST, 0755, NULL);
        assert_true(fd >= 0);
        close(fd);
        snprintf(path, sizeof(path), "%s/open", dir);
        assert_int_equal(fs_open_dir(AT_FDCWD, path, FS_STICKY_LAST, 0755, NULL), -EPERM);
        /* relative to a descriptor: that directory is checked too */
        snprintf(path, sizeof(path), "%s/nobodys", dir);
        int nfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(nfd >= 0);
        assert_int_equal(fs_write_atomic_at(nfd, "file", "x", 1, 0644, 0, NULL), -EPERM);
        close(nfd);
}

/* Directories devlet creates are never writable by others, whatever the
 * umask and mode: the walk would refuse them the next time. */
static void test_created_directories_not_writable_by_others(void **state)
{
        char path[192];
        mode_t old = umask(0);
        snprintf(path, sizeof(path), "%s/made/here", dir);
        int r = fs_mkdir_p(path, 0777);
        umask(old);
        assert_int_equal(r, 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(st.st_uid, geteuid());
        snprintf(path, sizeof(path), "%s/made/here/file", dir);
        assert_int_equal(fs_write_atomic(path, "1", 1, 0644), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_regular_file),
                cmocka_unit_test(test_read_nofollow),
                cmocka_unit_test(test_fifo_never_blocks),
                cmocka_unit_test(test_directory_and_socket),
                cmocka_unit_test(test_write_never_follows_a_planted_link),
                cmocka_unit_test(test_write_never_opens_a_planted_fifo),
                cmocka_unit_test(test_planted_directory_link_refused),
                cmocka_unit_test(test_trusted_link_followed_unless_no_symlinks),
                cmocka_unit_test(test_directories_created_and_checked),
                cmocka_unit_test(test_failure_leaves_nothing),
                cmocka_unit_test(test_directories_of_others_refused),
                cmocka_unit_test(test_created_directories_not_writable_by_others),
        };
        alarm(20); /* a writer that blocks fails the run (SIGALRM) */
        return cmocka_run_group_tests(tests, setup, teardown);
}
