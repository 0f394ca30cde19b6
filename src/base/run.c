/* See run.h.  The child's output is read through a non-blocking pipe polled
 * in slices of at most 50 ms, between which waitpid(WNOHANG) looks for its
 * exit: the output's end alone does not end the wait, since a program may
 * leave a daemon holding it open. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/run.h"
#include "base/xalloc.h"

#define SLICE_MS 50
#define KILL_WAIT_MS 1000

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads what fd holds now into buf (keeping at most RUN_OUTPUT_MAX - 1
 * bytes, discarding the rest).  Returns true at end of file. */
static bool drain(int fd, char *buf, size_t *len)
{
        char chunk[1024];
        for (;;) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n == 0)
                        return true;
                if (n < 0)
                        return errno != EAGAIN && errno != EINTR;
                size_t take = (size_t)n;
                if (take > RUN_OUTPUT_MAX - 1 - *len)
                        take = RUN_OUTPUT_MAX - 1 - *len;
                memcpy(buf + *len, chunk, take);
                *len += take;
        }
}

int run_spawn(char *const *argv, char *const *envp, int in_fd, int out_fd, pid_t *pid)
{
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        if (in_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
        else
                posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
        posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
        /* its own process group; the signals our threads block unblocked,
         * and the ones we ignore or catch back to their defaults */
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        sigset_t none, dfl;
        sigemptyset(&none);
        sigfillset(&dfl);
        sigdelset(&dfl, SIGKILL);
        sigdelset(&dfl, SIGSTOP);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                POSIX_SPAWN_SETSIGDEF);
        posix_spawnattr_setpgroup(&attr, 0);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &dfl);
        static char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
        char *const path_only[] = { path_env, NULL };
        int r = posix_spawn(pid, argv[0], &fa, &attr, argv, envp ? envp : path_only);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        return -r;
}

int run_program(char *const *argv, char *const *envp, long timeout_ms, char **output,
                struct diag *diag)
{
        const char *path = argv[0];
        /* said here, not as the child's exit 127: where fork stands in for
         * vfork (qemu-user), posix_spawn cannot report a failed exec */
        if (access(path, X_OK) < 0)
                return diag_set(diag, -errno, "cannot start %s: %s", path, strerror(errno));
        int outp[2];
        if (pipe2(outp, O_CLOEXEC) < 0)
                return diag_set(diag, -errno, "cannot start %s: %s", path, strerror(errno));
        fcntl(outp[0], F_SETFL, O_NONBLOCK);
        pid_t pid;
        int r = -run_spawn(argv, envp, -1, outp[1], &pid);
        close(outp[1]);
        if (r != 0) {
                close(outp[0]);
                return diag_set(diag, -r, "cannot start %s: %s", path, strerror(r));
        }
        char buf[RUN_OUTPUT_MAX];
        size_t len = 0;
        bool eof = false;
        int status = 0;
        int64_t deadline = mono_ms() + timeout_ms;
        for (;;) {
                if (!eof)
                        eof = drain(outp[0], buf, &len);
                pid_t w = waitpid(pid, &status, WNOHANG);
                if (w == pid)
                        break;
                if (w < 0 && errno != EINTR) {
                        r = diag_set(diag, -errno, "cannot wait for %s: %s", path, strerror(errno));
                        break;
                }
                int64_t left = deadline - mono_ms();
                if (left <= 0) {
                        r = diag_set(diag, -ETIMEDOUT, "%s ran past %ld ms (killed)", path,
                                     timeout_ms);
                        break;
                }
                struct pollfd p = { .fd = outp[0], .events = POLLIN };
                (void)poll(&p, eof ? 0 : 1, (int)(left < SLICE_MS ? left : SLICE_MS));
        }
        if (r < 0) {
                /* the program and whatever it started in its group */
                kill(-pid, SIGKILL);
                int64_t until = mono_ms() + KILL_WAIT_MS;
                while (waitpid(pid, &status, WNOHANG) == 0 && mono_ms() < until)
                        (void)poll(NULL, 0, 10);
        }
        close(outp[0]);
        if (r < 0)
                return r;
        if (output) {
                buf[len] = '\0';
                *output = xstrdup(buf);
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char *run_find_program(char *const *roots, const char *name)
{
        static const char *const dirs[] = { "usr/bin", "usr/local/bin", "bin", "usr/sbin", "sbin" };
        for (size_t r = 0; roots && roots[r]; r++) {
                if (!roots[r][0])
                        continue;
                size_t n = strlen(roots[r]);
                while (n > 0 && roots[r][n - 1] == '/')
                        n--;
                for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                        _cleanup_free_ char *p =
                            xasprintf("%.*s/%s/%s", (int)n, roots[r], dirs[i], name);
                        if (access(p, X_OK) == 0)
                                return TAKE_PTR(p);
                }
        }
        const char *env = getenv("PATH");
        _cleanup_free_ char *copy = xstrdup(env ? env : "/usr/bin:/bin");
        char *save = NULL;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
                if (access(p, X_OK) == 0)
                        return TAKE_PTR(p);
        }
        return NULL;
}
