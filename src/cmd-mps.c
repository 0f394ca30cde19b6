/* `devlet mps-control-daemon`: NVIDIA's MPS sidecar (a second container of
 * devlet's pod, as NVIDIA's chart deploys its control daemon).
 *
 * For each MPS resource of the configuration it starts one
 * `nvidia-cuda-mps-control -d` (found under the driver root) with
 * CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY under --mps-root and
 * CUDA_VISIBLE_DEVICES set to the resource's GPUs, sends it NVIDIA's limits
 * (pinned device memory and active-thread percentage from the replica
 * count), and then writes the resource's readiness marker, which `devlet
 * run` waits for.  The daemons, their directories and limits come from the
 * backends' `mps_daemons` member (the NVIDIA backend's layout, in family-
 * neutral types).  Their shm directory (<mps-root>/shm) is mounted as a
 * tmpfs for the clients' /dev/shm.
 *
 * A plain loop, one second a turn: the markers are touched (a marker that
 * stops being touched is stale, so a killed sidecar does not leave resources
 * served); every other turn each daemon answers a control query, and one that
 * does not is restarted.  SIGTERM or SIGINT quits every daemon and removes
 * the markers.  The control program is run with a bounded wait: a wedged one
 * is killed.  DEVLET_MPS_SHM=dir keeps shm a plain directory (for tests
 * without the right to mount). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "config/config.h"
#include "devices/device.h"

extern char **environ;

#define CONTROL_BIN "nvidia-cuda-mps-control"
#define CONTROL_TIMEOUT_MS 10000
#define HEALTH_EVERY_TURNS 2

struct mps_daemon {
        struct dev_mps_daemon spec;
        const char *pipe_dir, *log_dir, *marker; /* the spec's */
        bool ready;
};

struct mps_sup {
        const char *bin;
        struct mps_daemon *d;
        size_t n;
};

/* The control program under the driver root (its mount in this container
 * first), then on PATH. */
static char *find_control(const struct devlet_config *cfg)
{
        static const char *const dirs[] = { "usr/bin", "usr/local/bin", "bin", "usr/sbin", "sbin" };
        const char *roots[] = { cfg->container_driver_root, cfg->driver_root };
        for (size_t r = 0; r < ARRAY_SIZE(roots); r++) {
                if (!roots[r] || !roots[r][0])
                        continue;
                for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                        size_t n = strlen(roots[r]);
                        while (n > 0 && roots[r][n - 1] == '/')
                                n--;
                        char *p = xasprintf("%.*s/%s/%s", (int)n, roots[r], dirs[i], CONTROL_BIN);
                        if (access(p, X_OK) == 0)
                                return p;
                        free(p);
                }
        }
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = xstrdup(path ? path : "/usr/bin:/bin");
        char *save = NULL;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                char *p = xasprintf("%s/%s", dir, CONTROL_BIN);
                if (access(p, X_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

/* Runs the control program with args, input on its stdin (may be NULL),
 * the daemon's environment; its stdout goes to *out (may be NULL).
 * Returns its exit status, or -errno (-ETIMEDOUT: killed after
 * CONTROL_TIMEOUT_MS). */
static int control_run(const struct mps_sup *s, const struct mps_daemon *d, const char *arg,
                       const char *input, char **out)
{
        _cleanup_free_ char *e_pipe = xasprintf("CUDA_MPS_PIPE_DIRECTORY=%s", d->pipe_dir);
        _cleanup_free_ char *e_log = xasprintf("CUDA_MPS_LOG_DIRECTORY=%s", d->log_dir);
        _cleanup_free_ char *e_vis = xasprintf("CUDA_VISIBLE_DEVICES=%s", d->spec.visible_devices);
        const char *p = getenv("PATH");
        _cleanup_free_ char *e_path = xasprintf("PATH=%s", p ? p : "/usr/bin:/bin");
        char *envp[] = { e_pipe, e_log, e_vis, e_path, NULL };
        char *argv[] = { (char *)(uintptr_t)s->bin, (char *)(uintptr_t)arg, NULL };
        if (!arg)
                argv[1] = NULL;
        int in[2], outp[2];
        if (pipe2(in, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(outp, O_CLOEXEC) < 0) {
                int e = -errno;
                close(in[0]), close(in[1]);
                return e;
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
        pid_t pid;
        int r = posix_spawn(&pid, s->bin, &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        close(in[0]);
        close(outp[1]);
        if (r != 0) {
                close(in[1]);
                close(outp[0]);
                return -r;
        }
        if (input) {
                /* the command is short: one write into an empty pipe */
                ssize_t w = write(in[1], input, strlen(input));
                (void)w;
        }
        close(in[1]);
        char buf[4096];
        size_t len = 0;
        int64_t waited = 0;
        bool timed_out = false;
        for (;;) {
                struct pollfd pfd = { .fd = outp[0], .events = POLLIN };
                int pr = poll(&pfd, 1, 100);
                if (pr > 0) {
                        ssize_t got = read(outp[0], buf + len, sizeof(buf) - 1 - len);
                        if (got <= 0)
                                break;
                        len += (size_t)got;
                        if (len == sizeof(buf) - 1)
                                break;
                } else if (pr == 0 && (waited += 100) >= CONTROL_TIMEOUT_MS) {
                        timed_out = true;
                        break;
                }
        }
        close(outp[0]);
        buf[len] = '\0';
        int status = 0;
        if (timed_out)
                kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (timed_out)
                return -ETIMEDOUT;
        if (out)
                *out = xstrdup(buf);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int control_cmd(const struct mps_sup *s, const struct mps_daemon *d, const char *cmd)
{
        _cleanup_free_ char *out = NULL;
        int r = control_run(s, d, NULL, cmd, &out);
        if (r != 0)
                log_debug("mps", "control command failed resource=%s command=\"%s\" status=%d "
                                 "output=\"%s\"",
                          d->spec.resource, cmd, r, out ? out : "");
        return r;
}

static void marker_write(const struct mps_daemon *d)
{
        _cleanup_free_ char *text = xasprintf("resource=%s\nCUDA_VISIBLE_DEVICES=%s\n"
                                              "active_thread_percentage=%u\n",
                                              d->spec.resource, d->spec.visible_devices,
                                              d->spec.thread_percentage);
        int r = fs_write_atomic(d->marker, text, strlen(text), 0644);
        if (r < 0)
                log_error("mps", "cannot write the readiness marker file=%s error=\"%s\"",
                          d->marker, strerror(-r));
}

static int daemon_start(const struct mps_sup *s, struct mps_daemon *d)
{
        unlink(d->marker);
        d->ready = false;
        int r = fs_mkdir_p(d->pipe_dir, 0755);
        if (r == 0)
                r = fs_mkdir_p(d->log_dir, 0755);
        if (r < 0) {
                log_error("mps", "cannot create the MPS directories resource=%s error=\"%s\"",
                          d->spec.resource, strerror(-r));
                return r;
        }
        r = control_run(s, d, "-d", NULL, NULL);
        if (r != 0) {
                log_error("mps", "MPS control daemon did not start resource=%s status=%d",
                          d->spec.resource, r);
                return -EIO;
        }
        for (size_t i = 0; d->spec.setup && d->spec.setup[i]; i++)
                if (control_cmd(s, d, d->spec.setup[i]) != 0) {
                        log_error("mps", "MPS control daemon refused its limits resource=%s "
                                         "command=\"%s\"",
                                  d->spec.resource, d->spec.setup[i]);
                        return -EIO;
                }
        marker_write(d);
        d->ready = true;
        log_info("mps", "MPS control daemon ready resource=%s gpus=%s "
                        "active_thread_percentage=%u pipe=%s",
                 d->spec.resource, d->spec.visible_devices, d->spec.thread_percentage,
                 d->pipe_dir);
        return 0;
}

/* tmpfs at shm (the daemons' shm_dir, <mps-root>/shm) for the clients'
 * /dev/shm, as NVIDIA's mount-shm: a stale mount is detached first. */
static int shm_prepare(const char *shm)
{
        const char *mode = getenv("DEVLET_MPS_SHM");
        if (mode && strcmp(mode, "dir") == 0) {
                log_info("mps", "shm is a plain directory (DEVLET_MPS_SHM=dir) path=%s", shm);
                return fs_mkdir_p(shm, 0755);
        }
        umount2(shm, MNT_DETACH); /* nothing mounted there: EINVAL, fine */
        int r = fs_mkdir_p(shm, 0755);
        if (r < 0)
                return r;
        if (mount("shm", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME,
                  "size=65536k") < 0) {
                r = -errno;
                log_error("mps", "cannot mount the MPS shm tmpfs path=%s error=\"%s\" (the "
                                 "container needs CAP_SYS_ADMIN and Bidirectional propagation)",
                          shm, strerror(errno));
                return r;
        }
        return 0;
}

static void touch(const char *path)
{
        if (utimensat(AT_FDCWD, path, NULL, 0) < 0 && errno != ENOENT)
                log_debug("mps", "cannot touch file=%s error=\"%s\"", path, strerror(errno));
}

static void supervise(struct mps_sup *s)
{
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        for (unsigned turn = 1;; turn++) {
                struct timespec tick = { .tv_sec = 1 };
                int sig = sigtimedwait(&set, NULL, &tick);
                if (sig == SIGTERM || sig == SIGINT) {
                        log_info("mps", "stopping signal=%s", strsignal(sig));
                        return;
                }
                for (size_t i = 0; i < s->n; i++) {
                        struct mps_daemon *d = &s->d[i];
                        bool check = !d->ready || turn % HEALTH_EVERY_TURNS == 0;
                        if (d->ready && check &&
                            control_cmd(s, d, "get_default_active_thread_percentage") != 0) {
                                log_warn("mps", "MPS control daemon not answering, restarting "
                                                "resource=%s",
                                         d->spec.resource);
                                unlink(d->marker);
                                d->ready = false;
                        }
                        if (!d->ready && check)
                                daemon_start(s, d);
                        if (d->ready)
                                touch(d->marker);
                }
        }
}

static void stop_all(struct mps_sup *s)
{
        for (size_t i = 0; i < s->n; i++) {
                struct mps_daemon *d = &s->d[i];
                unlink(d->marker);
                if (control_cmd(s, d, "quit") == 0)
                        log_info("mps", "MPS control daemon stopped resource=%s", d->spec.resource);
        }
}

static int idle_until_signal(void)
{
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        int sig;
        while (sigwait(&set, &sig) != 0)
                ;
        return 0;
}

DEFINE_CLEANUP_FUNC(struct devlet_config, config_free)

/* The daemons of every backend that has MPS resources. */
struct mps_specs {
        struct dev_mps_daemon *v;
        size_t n;
};

static void collect_specs(const struct dev_backend_ops *ops, struct dev_backend *b, void *ud)
{
        struct mps_specs *acc = ud;
        struct dev_mps_daemon *v = NULL;
        size_t n = ops->mps_daemons ? ops->mps_daemons(b, &v) : 0;
        if (!n) {
                free(v);
                return;
        }
        acc->v = xrealloc(acc->v, (acc->n + n) * sizeof(*acc->v));
        memcpy(acc->v + acc->n, v, n * sizeof(*v));
        acc->n += n;
        free(v);
}

int cmd_mps(int argc, char **argv)
{
        _cleanup_(config_freep) struct devlet_config *cfg = NULL;
        int r = cmd_load_config(argc, argv, &cfg, NULL);
        if (r)
                return r;
        log_set_verbosity((int)cfg->verbosity);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigprocmask(SIG_BLOCK, &set, NULL);

        if (cfg->sharing.strategy != SHARING_MPS) {
                log_info("mps", "sharing strategy is not MPS: no control daemon to run, idle "
                                "until stopped");
                return idle_until_signal();
        }
        struct mps_specs specs = { 0 };
        r = cmd_each_backend("mps-control-daemon", cfg, collect_specs, &specs);
        if (r || specs.n == 0) {
                if (!r)
                        log_error("mps", "no GPUs to share: no resource of a running backend "
                                         "is shared by MPS");
                dev_mps_daemons_free(specs.v, specs.n);
                return 1;
        }
        size_t n = specs.n;
        for (size_t i = 0; i < n; i++)
                if (specs.v[i].replicas > specs.v[i].max_clients) {
                        log_error("mps", "invalid MPS configuration: maximum allowed replicas "
                                         "exceeded: %u > %u resource=%s",
                                  specs.v[i].replicas, specs.v[i].max_clients,
                                  specs.v[i].resource);
                        dev_mps_daemons_free(specs.v, n);
                        return 1;
                }
        _cleanup_free_ char *bin = find_control(cfg);
        if (!bin) {
                log_error("mps", "%s not found under the driver root (%s or %s) nor on PATH",
                          CONTROL_BIN, cfg->container_driver_root, cfg->driver_root);
                dev_mps_daemons_free(specs.v, n);
                return 1;
        }
        for (size_t i = 0; i < n; i++) {
                bool seen = false;
                for (size_t j = 0; j < i; j++)
                        seen |= strcmp(specs.v[j].shm_dir, specs.v[i].shm_dir) == 0;
                if (!seen && shm_prepare(specs.v[i].shm_dir) < 0) {
                        dev_mps_daemons_free(specs.v, n);
                        return 1;
                }
        }
        struct mps_sup s = { .bin = bin, .n = n,
                             .d = xcalloc(n ? n : 1, sizeof(*s.d)) };
        for (size_t i = 0; i < n; i++) {
                struct mps_daemon *d = &s.d[i];
                d->spec = specs.v[i];
                d->pipe_dir = d->spec.pipe_dir;
                d->log_dir = d->spec.log_dir;
                d->marker = d->spec.marker;
                daemon_start(&s, d);
        }
        log_info("mps", "supervising control=%s daemons=%zu shm=%s", bin, n, specs.v[0].shm_dir);
        supervise(&s);
        stop_all(&s);
        free(s.d);
        dev_mps_daemons_free(specs.v, n);
        return 0;
}
