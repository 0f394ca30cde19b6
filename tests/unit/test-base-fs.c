/* Unit tests for src/base/fs.c: reads never block and refuse what is not a
 * regular file (a FIFO with no writer, a directory, a socket), with the
 * errors callers turn into messages. */
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

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_regular_file),
                cmocka_unit_test(test_fifo_never_blocks),
                cmocka_unit_test(test_directory_and_socket),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
