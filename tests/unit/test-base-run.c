/* Unit tests for src/base/run.c: a program's exit status and output (kept
 * to its first 4 KiB), a program that is not there, one that runs past its
 * deadline (killed with what it started: its process group), one whose
 * child keeps the output open (its exit, not the pipe's end, ends the
 * wait), and the search under roots before PATH. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/run.h"

static int sh(const char *script, long timeout_ms, char **out, struct diag *diag)
{
        char a0[] = "/bin/sh", a1[] = "-c";
        char *argv[] = { a0, a1, (char *)(uintptr_t)script, NULL };
        return run_program(argv, NULL, timeout_ms, out, diag);
}

static void test_status_and_output(void **state)
{
        (void)state;
        char *out = NULL;
        assert_int_equal(sh("echo hello; echo oops >&2; exit 3", 5000, &out, NULL), 3);
        assert_string_equal(out, "hello\noops\n");
        free(out);
        out = NULL;
        assert_int_equal(sh("kill -TERM $$", 5000, &out, NULL), 128 + SIGTERM);
        free(out);
        out = NULL;
        /* a long output: its first 4095 bytes */
        assert_int_equal(sh("yes | head -c 100000", 5000, &out, NULL), 0);
        assert_int_equal(strlen(out), RUN_OUTPUT_MAX - 1);
        free(out);
        /* the environment is what it is given: PATH alone by default */
        out = NULL;
        assert_int_equal(sh("echo \"$PATH|$HOME\"", 5000, &out, NULL), 0);
        assert_string_equal(out, "/usr/sbin:/usr/bin:/sbin:/bin|\n");
        free(out);
}

static void test_missing_program(void **state)
{
        (void)state;
        char a0[] = "/nonexistent/program";
        char *argv[] = { a0, NULL };
        struct diag d = { 0 };
        assert_int_equal(run_program(argv, NULL, 1000, NULL, &d), -ENOENT);
        assert_non_null(strstr(d.message, "cannot start /nonexistent/program"));
}

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_deadline_kills_the_group(void **state)
{
        (void)state;
        char path[] = "/tmp/devlet-run-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        char script[256];
        /* a grandchild in the same group, its PID written down */
        snprintf(script, sizeof(script), "sleep 60 & echo $! > %s; wait", path);
        struct diag d = { 0 };
        int64_t t0 = now_ms();
        assert_int_equal(sh(script, 200, NULL, &d), -ETIMEDOUT);
        assert_true(now_ms() - t0 < 5000);
        assert_non_null(strstr(d.message, "ran past 200 ms (killed)"));
        FILE *f = fopen(path, "r");
        int pid = 0;
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%d", &pid), 1);
        fclose(f);
        unlink(path);
        /* gone (or a zombie of init's): signal 0 fails, or its state is Z */
        for (int i = 0; i < 200 && kill(pid, 0) == 0; i++) {
                char stat[64], buf[256] = "";
                snprintf(stat, sizeof(stat), "/proc/%d/stat", pid);
                FILE *s = fopen(stat, "r");
                if (!s)
                        break;
                size_t n = fread(buf, 1, sizeof(buf) - 1, s);
                fclose(s);
                buf[n] = '\0';
                const char *close_paren = strrchr(buf, ')');
                if (close_paren && close_paren[2] == 'Z')
                        break;
                usleep(10000);
        }
        char stat[64];
        snprintf(stat, sizeof(stat), "/proc/%d/stat", pid);
        FILE *s = fopen(stat, "r");
        if (s) {
                char buf[256] = "";
                size_t n = fread(buf, 1, sizeof(buf) - 1, s);
                fclose(s);
                buf[n] = '\0';
                const char *close_paren = strrchr(buf, ')');
                assert_true(close_paren && close_paren[2] == 'Z');
        }
}

static void test_child_holding_output(void **state)
{
        (void)state;
        /* the shell exits at once; its background child keeps stdout */
        char *out = NULL;
        int64_t t0 = now_ms();
        assert_int_equal(sh("(sleep 3 &) ; echo started", 5000, &out, NULL), 0);
        assert_true(now_ms() - t0 < 4000);
        assert_string_equal(out, "started\n");
        free(out);
}

static void test_find_program(void **state)
{
        (void)state;
        char root[] = "/tmp/devlet-root-XXXXXX";
        assert_non_null(mkdtemp(root));
        char dir[128], prog[160];
        snprintf(dir, sizeof(dir), "%s/usr", root);
        assert_int_equal(mkdir(dir, 0755), 0);
        snprintf(dir, sizeof(dir), "%s/usr/bin", root);
        assert_int_equal(mkdir(dir, 0755), 0);
        snprintf(prog, sizeof(prog), "%s/sh", dir);
        FILE *f = fopen(prog, "w");
        assert_non_null(f);
        fclose(f);
        char *roots[] = { (char *)(uintptr_t) "", root, NULL };
        /* not executable: PATH's sh instead */
        char *got = run_find_program(roots, "sh");
        assert_non_null(got);
        assert_string_not_equal(got, prog);
        free(got);
        assert_int_equal(chmod(prog, 0755), 0);
        got = run_find_program(roots, "sh");
        assert_string_equal(got, prog);
        free(got);
        assert_null(run_find_program(roots, "devlet-no-such-program"));
        unlink(prog);
        rmdir(dir);
        snprintf(dir, sizeof(dir), "%s/usr", root);
        rmdir(dir);
        rmdir(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_status_and_output),
                cmocka_unit_test(test_missing_program),
                cmocka_unit_test(test_deadline_kills_the_group),
                cmocka_unit_test(test_child_holding_output),
                cmocka_unit_test(test_find_program),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
