/* Running a short program to completion from a worker thread (never the
 * loop): posix_spawn into a process group of its own, stdin from /dev/null,
 * stdout and stderr kept (the first RUN_OUTPUT_MAX - 1 bytes), a deadline
 * past which the whole group is killed.  Waits only for its own child
 * (waitpid on that PID), so libuv's SIGCHLD handling of its own children is
 * left alone.  Never logs. */
#ifndef DEVLET_BASE_RUN_H
#define DEVLET_BASE_RUN_H

#include <sys/types.h>

#include "base/diag.h"

#define RUN_OUTPUT_MAX 4096

/* posix_spawn of argv (argv[0] the program's path) with envp (NULL: PATH
 * only) in a process group of its own, with an empty signal mask and every
 * signal's default disposition: stdin from in_fd (-1: /dev/null), stdout
 * and stderr to out_fd.  Returns 0 and *pid, or -errno. */
int run_spawn(char *const *argv, char *const *envp, int in_fd, int out_fd, pid_t *pid);

/* Runs argv (argv[0] the program's path) with envp (NULL: PATH only) for at
 * most timeout_ms.  Returns the exit status (0..255; 128 + the signal for a
 * program killed by one) and its output in *output (heap, may be NULL), or
 * -errno with diag: "cannot start <path>: ...", "<path> ran past N ms"
 * (killed). */
int run_program(char *const *argv, char *const *envp, long timeout_ms, char **output,
                struct diag *diag);

/* The first of <root>/{usr/bin,usr/local/bin,bin,usr/sbin,sbin}/name that is
 * executable, for each root in order ("" and NULL roots skipped), then
 * PATH's directories.  Returns a heap path, or NULL. */
char *run_find_program(char *const *roots, const char *name);

#endif
