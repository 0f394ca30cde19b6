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
 * backends' `sidecar_daemons` member (the NVIDIA backend's layout, in family-
 * neutral types).  Their shm directory (<mps-root>/shm) is mounted as a
 * tmpfs for the clients' /dev/shm.
 *
 * A plain loop, one second a turn, around poll(2) on a signalfd (SIGTERM,
 * SIGINT, SIGCHLD): the markers are touched (a marker that stops being
 * touched is stale, so a killed sidecar does not leave resources served);
 * every other turn each daemon answers a control query, and one that does
 * not is restarted.  SIGTERM or SIGINT quits every daemon and removes the
 * markers, all within STOP_BUDGET_MS of the signal.
 *
 * It is often PID 1 of its container, and it is a subreaper anyway, so the
 * daemons the control program forks become its children when that program
 * exits: every SIGCHLD reaps whatever has exited (waitpid(-1)), so a dead
 * daemon never lingers as a zombie that still looks alive.  Each control
 * program runs in a process group of its own and with a deadline: past it,
 * or on a stop signal, the whole group is killed (a daemon it started
 * included), and nothing here ever waits without a deadline.  It is done
 * when the program exits, not when its stdout closes (a daemon may keep it
 * open).
 *
 * Below --mps-root no symlink is followed: directories are opened one
 * component at a time with O_NOFOLLOW (fs_open_dir), the marker is written
 * with fs_write_atomic_at, and shm is unmounted and mounted through
 * /proc/self/fd of the directory so checked.  DEVLET_MPS_SHM=dir keeps shm a
 * plain directory (for tests without the right to mount). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/run.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "config/config.h"
#include "devices/device.h"
#include "dra/dra.h"

#include <jansson.h>

extern char **environ;

#define CONTROL_BIN "nvidia-cuda-mps-control"
#define CONTROL_TIMEOUT_MS 10000
#define STOP_BUDGET_MS 1500 /* from SIGTERM to exit, every quit included */
#define KILL_WAIT_MS 500    /* a killed group's leader to exit; then the reaper has it */
#define TURN_MS 1000
#define HEALTH_EVERY_TURNS 2
#define OUTPUT_MAX 4096
#define SHM_UNMOUNT_MAX 16

struct mps_daemon {
        struct dev_sidecar_daemon spec;
        int root_fd; /* O_PATH of spec.root */
        /* below the root, where no symlink is followed */
        const char *pipe_rel, *log_rel, *shm_rel;
        char *marker_dir; /* the marker's directory (heap) */
        const char *marker_name;
        bool ready;
        char *claim_uid; /* a claim's daemon (spec owned); NULL: a resource's */
};

struct mps_sup {
        const char *bin;
        struct mps_daemon *d;
        size_t n;
        int sigfd;        /* SIGTERM, SIGINT, SIGCHLD */
        int stop_signal;  /* the SIGTERM or SIGINT received, 0 before */
        int64_t stop_at;  /* its time + STOP_BUDGET_MS */
        bool stopping;    /* quitting the daemons: control calls end by stop_at */
        pid_t client;     /* the control program running, 0 when none */
        bool client_exited;
        int client_status;
        /* DRA claims' daemons: their requests' directory, watched */
        struct dev_sidecar_claims *claims;
        int claims_ifd; /* inotify on claims->dir; -1 */
        bool claims_shm_ready;
        char **claims_refused; /* requests refused once, not logged again */
};

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reaps every child that has exited: the control program (its status is
 * kept) and whatever else became ours (daemons the control program forked,
 * any orphan when we are PID 1). */
static void reap(struct mps_sup *s)
{
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                if (pid == s->client) {
                        s->client_exited = true;
                        s->client_status = status;
                } else {
                        log_debug("mps", "reaped pid=%d status=0x%x", (int)pid, status);
                }
        }
}

static void take_signals(struct mps_sup *s)
{
        struct signalfd_siginfo si;
        while (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                int sig = (int)si.ssi_signo;
                if (sig == SIGCHLD || s->stop_signal)
                        continue;
                s->stop_signal = sig;
                s->stop_at = now_ms() + STOP_BUDGET_MS;
                log_info("mps", "stopping signal=%s", strsignal(sig));
        }
        reap(s);
}

/* Waits until deadline (monotonic ms) at most for a signal or for fd (-1:
 * none) to be readable, and handles the signals.  Returns whether fd is
 * readable (or closed). */
static bool wait_events(struct mps_sup *s, int64_t deadline, int fd)
{
        struct pollfd p[2] = { { .fd = s->sigfd, .events = POLLIN }, { .fd = fd, .events = POLLIN } };
        int64_t left = deadline - now_ms();
        left = left < 0 ? 0 : left > INT_MAX ? INT_MAX : left;
        int r = poll(p, fd >= 0 ? 2 : 1, (int)left);
        if (r <= 0)
                return false;
        if (p[0].revents)
                take_signals(s);
        return fd >= 0 && p[1].revents;
}

/* The control program under the roots the backend names (NVIDIA's: the
 * driver root's mount in this container, then the driver root), then on
 * PATH. */
static char *find_control(char *const *roots)
{
        return run_find_program(roots, CONTROL_BIN);
}

/* Reads what the non-blocking fd holds now (at most 64 KiB a call), keeping
 * the first OUTPUT_MAX - 1 bytes in buf.  Returns true at end of file. */
static bool drain(int fd, char *buf, size_t *len)
{
        for (size_t total = 0; total < 65536;) {
                char scratch[512];
                bool keep = *len < OUTPUT_MAX - 1;
                ssize_t got = read(fd, keep ? buf + *len : scratch,
                                   keep ? OUTPUT_MAX - 1 - *len : sizeof(scratch));
                if (got == 0)
                        return true;
                if (got < 0)
                        return errno != EINTR && errno != EAGAIN;
                if (keep)
                        *len += (size_t)got;
                total += (size_t)got;
        }
        return false;
}

/* Runs the control program with arg (may be NULL) and input on its stdin
 * (may be NULL), the daemon's environment, in a process group of its own,
 * until it exits.  Its stdout (the first OUTPUT_MAX - 1 bytes; read while it
 * runs and, once it has exited, what is left without waiting for the end:
 * a daemon it started may hold the pipe) goes to *out (may be NULL).  At
 * deadline, or on a stop signal unless we are stopping (then stop_at is the
 * deadline too), the whole group is killed.  Returns its exit status
 * (128 + the signal that killed it), -ETIMEDOUT, -EINTR (a stop signal),
 * or -errno. */
static int control_run(struct mps_sup *s, const struct mps_daemon *d, const char *arg,
                       const char *input, int64_t deadline, char **out)
{
        _cleanup_free_ char *e_pipe = xasprintf("CUDA_MPS_PIPE_DIRECTORY=%s", d->spec.pipe_dir);
        _cleanup_free_ char *e_log = xasprintf("CUDA_MPS_LOG_DIRECTORY=%s", d->spec.log_dir);
        _cleanup_free_ char *e_vis = xasprintf("CUDA_VISIBLE_DEVICES=%s", d->spec.visible_devices);
        const char *p = getenv("PATH");
        _cleanup_free_ char *e_path = xasprintf("PATH=%s", p ? p : "/usr/bin:/bin");
        char *envp[] = { e_pipe, e_log, e_vis, e_path, NULL };
        char *argv[] = { (char *)(uintptr_t)s->bin, (char *)(uintptr_t)arg, NULL };
        if (s->stopping && deadline > s->stop_at)
                deadline = s->stop_at;
        int in[2], outp[2];
        if (pipe2(in, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(outp, O_CLOEXEC) < 0) {
                int e = -errno;
                close(in[0]), close(in[1]);
                return e;
        }
        /* ours never block: a program that does not read its stdin or keeps
         * writing cannot hold us */
        fcntl(in[1], F_SETFL, O_NONBLOCK);
        fcntl(outp[0], F_SETFL, O_NONBLOCK);
        pid_t pid;
        int r = run_spawn(argv, envp, in[0], outp[1], &pid);
        close(in[0]);
        close(outp[1]);
        if (r < 0) {
                close(in[1]);
                close(outp[0]);
                return r;
        }
        s->client = pid;
        s->client_exited = false;
        if (input) {
                /* the command is short: one write into an empty pipe */
                ssize_t w = write(in[1], input, strlen(input));
                (void)w;
        }
        close(in[1]);
        char buf[OUTPUT_MAX];
        size_t len = 0;
        bool eof = false;
        r = 0;
        for (;;) {
                if (!eof)
                        eof = drain(outp[0], buf, &len);
                if (s->client_exited)
                        break;
                if (s->stop_signal && !s->stopping) {
                        r = -EINTR;
                        break;
                }
                if (now_ms() >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                wait_events(s, deadline, eof ? -1 : outp[0]);
        }
        if (r < 0) {
                /* the program and whatever it started in its group */
                kill(-pid, SIGKILL);
                int64_t until = now_ms() + KILL_WAIT_MS;
                while (!s->client_exited && now_ms() < until)
                        wait_events(s, until, -1);
                if (!s->client_exited)
                        log_debug("mps", "control program not gone yet after SIGKILL pid=%d",
                                  (int)pid);
        }
        s->client = 0; /* not reaped yet: the next reap() takes it */
        close(outp[0]);
        if (r < 0)
                return r;
        buf[len] = '\0';
        if (out)
                *out = xstrdup(buf);
        int status = s->client_status;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int control_cmd(struct mps_sup *s, const struct mps_daemon *d, const char *cmd,
                       int64_t deadline)
{
        _cleanup_free_ char *out = NULL;
        int r = control_run(s, d, NULL, cmd, deadline, &out);
        if (r != 0)
                log_debug("mps", "control command failed resource=%s command=\"%s\" status=%d "
                                 "output=\"%s\"",
                          d->spec.resource, cmd, r, out ? out : "");
        return r;
}

/* The marker's directory, below the root without a symlink (O_PATH). */
static int marker_dir(const struct mps_daemon *d, unsigned flags, struct diag *diag)
{
        return fs_open_dir(d->root_fd, d->marker_dir, flags | FS_NO_SYMLINKS, 0755, diag);
}

static void marker_write(const struct mps_daemon *d)
{
        _cleanup_free_ char *text = xasprintf("resource=%s\nCUDA_VISIBLE_DEVICES=%s\n"
                                              "active_thread_percentage=%u\n",
                                              d->spec.resource, d->spec.visible_devices,
                                              d->spec.thread_percentage);
        struct diag diag = { 0 };
        _cleanup_close_ int dfd = marker_dir(d, FS_CREATE, &diag);
        int r = dfd < 0 ? dfd
                        : fs_write_atomic_at(dfd, d->marker_name, text, strlen(text), 0644,
                                             FS_NO_SYMLINKS, &diag);
        if (r < 0)
                log_error("mps", "cannot write the readiness marker file=%s error=\"%s\"",
                          d->spec.marker, diag.message);
}

static void marker_remove(const struct mps_daemon *d)
{
        _cleanup_close_ int dfd = marker_dir(d, 0, NULL);
        if (dfd >= 0)
                unlinkat(dfd, d->marker_name, 0);
}

static void marker_touch(const struct mps_daemon *d)
{
        _cleanup_close_ int dfd = marker_dir(d, 0, NULL);
        if (dfd < 0 || utimensat(dfd, d->marker_name, NULL, AT_SYMLINK_NOFOLLOW) < 0)
                log_debug("mps", "cannot touch file=%s error=\"%s\"", d->spec.marker,
                          strerror(dfd < 0 ? -dfd : errno));
}

/* mkdir -p below the root, no symlink followed. */
static int mkdir_below(const struct mps_daemon *d, const char *rel, struct diag *diag)
{
        int fd = fs_open_dir(d->root_fd, rel, FS_CREATE | FS_NO_SYMLINKS, 0755, diag);
        if (fd < 0)
                return diag_prefix(diag, fd, "%s/%s", d->spec.root, rel);
        close(fd);
        return 0;
}

static int daemon_start(struct mps_sup *s, struct mps_daemon *d)
{
        marker_remove(d);
        d->ready = false;
        struct diag diag = { 0 };
        int r = mkdir_below(d, d->pipe_rel, &diag);
        if (r == 0)
                r = mkdir_below(d, d->log_rel, &diag);
        if (r < 0) {
                log_error("mps", "cannot create the MPS directories resource=%s error=\"%s\"",
                          d->spec.resource, diag.message);
                return r;
        }
        r = control_run(s, d, "-d", NULL, now_ms() + CONTROL_TIMEOUT_MS, NULL);
        if (r == -EINTR)
                return r;
        if (r != 0) {
                log_error("mps", "MPS control daemon did not start resource=%s status=%d%s",
                          d->spec.resource, r, r == -ETIMEDOUT ? " (timed out, killed)" : "");
                return -EIO;
        }
        for (size_t i = 0; d->spec.setup && d->spec.setup[i]; i++) {
                r = control_cmd(s, d, d->spec.setup[i], now_ms() + CONTROL_TIMEOUT_MS);
                if (r == -EINTR)
                        return r;
                if (r != 0) {
                        log_error("mps", "MPS control daemon refused its limits resource=%s "
                                         "command=\"%s\"",
                                  d->spec.resource, d->spec.setup[i]);
                        return -EIO;
                }
        }
        marker_write(d);
        d->ready = true;
        log_info("mps", "MPS control daemon ready resource=%s gpus=%s "
                        "active_thread_percentage=%u pipe=%s",
                 d->spec.resource, d->spec.visible_devices, d->spec.thread_percentage,
                 d->spec.pipe_dir);
        return 0;
}

/* tmpfs at the daemon's shm_dir (<mps-root>/shm) for the clients' /dev/shm,
 * as NVIDIA's mount-shm: stale mounts are detached first.  The directory is
 * opened without following a symlink below the root, and both the unmount
 * and the mount go through /proc/self/fd, so they act on that directory and
 * never on where a link would lead. */
static int shm_prepare(const struct mps_daemon *d)
{
        const char *shm = d->spec.shm_dir;
        const char *mode = getenv("DEVLET_MPS_SHM");
        bool plain = mode && strcmp(mode, "dir") == 0;
        /* a tmpfs mounted there before is root's, mode 1777 */
        const unsigned flags = FS_NO_SYMLINKS | FS_STICKY_LAST;
        struct diag diag = { 0 };
        _cleanup_close_ int fd = fs_open_dir(d->root_fd, d->shm_rel, flags | FS_CREATE, 0755, &diag);
        char at[64];
        for (unsigned i = 0; fd >= 0 && !plain; i++) {
                snprintf(at, sizeof(at), "/proc/self/fd/%d", fd);
                /* nothing (more) mounted there: EINVAL */
                if (i == SHM_UNMOUNT_MAX || umount2(at, MNT_DETACH) < 0)
                        break;
                close(fd);
                fd = fs_open_dir(d->root_fd, d->shm_rel, flags, 0755, &diag);
        }
        if (fd < 0) {
                log_error("mps", "refusing the MPS shm directory path=%s error=\"%s\"%s", shm,
                          diag.message, fd == -ELOOP ? " (a symlink below --mps-root)" : "");
                return fd;
        }
        if (plain) {
                log_info("mps", "shm is a plain directory (DEVLET_MPS_SHM=dir) path=%s", shm);
                return 0;
        }
        if (mount("shm", at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME,
                  "size=65536k") < 0) {
                int r = -errno;
                log_error("mps", "cannot mount the MPS shm tmpfs path=%s error=\"%s\" (the "
                                 "container needs CAP_SYS_ADMIN and Bidirectional propagation)",
                          shm, strerror(-r));
                return r;
        }
        return 0;
}

static void claims_scan(struct mps_sup *s);

static void supervise(struct mps_sup *s)
{
        for (unsigned turn = 1;; turn++) {
                int64_t next = now_ms() + TURN_MS;
                while (!s->stop_signal && now_ms() < next)
                        if (wait_events(s, next, s->claims_ifd)) {
                                /* a claim's request came or went: at once */
                                char buf[4096];
                                while (read(s->claims_ifd, buf, sizeof(buf)) > 0)
                                        ;
                                break;
                        }
                if (!s->stop_signal)
                        claims_scan(s);
                for (size_t i = 0; i < s->n && !s->stop_signal; i++) {
                        struct mps_daemon *d = &s->d[i];
                        bool check = !d->ready || turn % HEALTH_EVERY_TURNS == 0;
                        if (d->ready && check &&
                            control_cmd(s, d, "get_default_active_thread_percentage",
                                        now_ms() + CONTROL_TIMEOUT_MS) != 0 &&
                            !s->stop_signal) {
                                log_warn("mps", "MPS control daemon not answering, restarting "
                                                "resource=%s",
                                         d->spec.resource);
                                marker_remove(d);
                                d->ready = false;
                        }
                        if (!d->ready && check && !s->stop_signal)
                                daemon_start(s, d);
                        if (d->ready)
                                marker_touch(d);
                }
                if (s->stop_signal)
                        return;
        }
}

/* Removes the markers and quits the daemons, by stop_at. */
static void stop_all(struct mps_sup *s)
{
        s->stopping = true;
        for (size_t i = 0; i < s->n; i++)
                marker_remove(&s->d[i]);
        for (size_t i = 0; i < s->n; i++) {
                struct mps_daemon *d = &s->d[i];
                if (now_ms() >= s->stop_at) {
                        log_warn("mps", "no time left to quit the MPS control daemon resource=%s",
                                 d->spec.resource);
                        continue;
                }
                if (control_cmd(s, d, "quit", s->stop_at) == 0)
                        log_info("mps", "MPS control daemon stopped resource=%s", d->spec.resource);
        }
        reap(s);
}

static int idle_until_signal(struct mps_sup *s)
{
        while (!s->stop_signal)
                wait_events(s, now_ms() + TURN_MS, -1);
        return 0;
}

/* path below root (both as the backend spelled them), or NULL. */
static const char *below(const char *root, const char *path)
{
        size_t n = strlen(root);
        while (n > 1 && root[n - 1] == '/')
                n--;
        if (strncmp(path, root, n) != 0 || (path[n] != '/' && root[n - 1] != '/'))
                return NULL;
        path += n;
        while (*path == '/')
                path++;
        return *path ? path : NULL;
}

/* Opens the daemon's root (created when missing; a link only root could
 * have made is followed there, as /var/run) and finds its paths below it. */
static int daemon_init(struct mps_daemon *d, const struct dev_sidecar_daemon *spec)
{
        d->spec = *spec;
        d->root_fd = -1;
        d->pipe_rel = below(spec->root, spec->pipe_dir);
        d->log_rel = below(spec->root, spec->log_dir);
        d->shm_rel = below(spec->root, spec->shm_dir);
        const char *marker = below(spec->root, spec->marker);
        if (!d->pipe_rel || !d->log_rel || !d->shm_rel || !marker) {
                log_error("mps", "MPS paths not below the MPS root root=%s resource=%s",
                          spec->root, spec->resource);
                return -EINVAL;
        }
        const char *slash = strrchr(marker, '/');
        d->marker_dir = slash ? xstrndup(marker, (size_t)(slash - marker)) : xstrdup(".");
        d->marker_name = slash ? slash + 1 : marker;
        struct diag diag = { 0 };
        d->root_fd = fs_open_dir(AT_FDCWD, spec->root, FS_CREATE, 0755, &diag);
        if (d->root_fd < 0) {
                log_error("mps", "cannot open the MPS root path=%s error=\"%s\"", spec->root,
                          diag.message);
                return d->root_fd;
        }
        return 0;
}

static void daemon_release(struct mps_daemon *d)
{
        if (d->root_fd >= 0)
                close(d->root_fd);
        free(d->marker_dir);
        if (d->claim_uid) {
                dev_sidecar_daemon_release(&d->spec);
                free(d->claim_uid);
        }
}

static void sup_free(struct mps_sup *s)
{
        for (size_t i = 0; i < s->n; i++)
                daemon_release(&s->d[i]);
        free(s->d);
        if (s->claims_ifd >= 0)
                close(s->claims_ifd);
        dev_sidecar_claims_free(s->claims);
        strv_free(s->claims_refused);
}

/* ---- DRA claims' daemons ---- */

#define CLAIMS_MAX 256
#define CLAIM_REQUEST_MAX 16384
#define CLAIM_DEVICES_MAX 64

static bool device_valid(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 96)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

/* One of the two commands a claim may ask for, with sane numbers; its
 * thread percentage in *pct when it is that one. */
static bool command_valid(const char *c, size_t n_devices, unsigned *pct)
{
        unsigned a = 0, dev = 0;
        unsigned long long mib = 0;
        int end = 0;
        if (sscanf(c, "set_default_active_thread_percentage %u%n", &a, &end) == 1 &&
            c[end] == '\0' && a <= 100) {
                *pct = a;
                return true;
        }
        end = 0;
        if (sscanf(c, "set_default_device_pinned_mem_limit %u %lluM%n", &dev, &mib, &end) == 2 &&
            end > 0 && c[end] == '\0' && dev < n_devices && mib > 0 && mib < (1ULL << 40))
                return true;
        return false;
}

/* The claim's request, read without following a link and bounded, as a
 * daemon's spec; -EINVAL with diag for one that is not a request. */
static int claim_request(struct mps_sup *s, int dfd, const char *name, const char *uid,
                         struct dev_sidecar_daemon *spec, struct diag *diag)
{
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return diag_set(diag, -errno, "cannot open it: %s", strerror(errno));
        if (!S_ISREG(st.st_mode) || st.st_size > CLAIM_REQUEST_MAX)
                return diag_set(diag, -EINVAL, "not a regular file of at most %d bytes",
                                CLAIM_REQUEST_MAX);
        json_error_t jerr;
        json_t *req = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
        if (!req)
                return diag_set(diag, -EINVAL, "not JSON: %s", jerr.text);
        const json_t *devs = json_object_get(req, "devices");
        const json_t *cmds = json_object_get(req, "commands");
        int r = 0;
        if (!json_is_array(devs) || json_array_size(devs) == 0 ||
            json_array_size(devs) > CLAIM_DEVICES_MAX || !json_is_array(cmds) ||
            json_array_size(cmds) > CLAIM_DEVICES_MAX + 1)
                r = diag_set(diag, -EINVAL, "devices (1 to %d) or commands missing",
                             CLAIM_DEVICES_MAX);
        *spec = (struct dev_sidecar_daemon){ .thread_percentage = 100, .max_clients = 48 };
        spec->visible_devices = xstrdup("");
        spec->setup = xcalloc(1, sizeof(char *));
        size_t i;
        const json_t *v;
        json_array_foreach(devs, i, v) {
                if (r < 0)
                        break;
                if (!json_is_string(v) || !device_valid(json_string_value(v))) {
                        r = diag_set(diag, -EINVAL, "devices[%zu] is not a device UUID", i);
                        break;
                }
                char *t = xasprintf("%s%s%s", spec->visible_devices, i ? "," : "",
                                    json_string_value(v));
                free(spec->visible_devices);
                spec->visible_devices = t;
        }
        json_array_foreach(cmds, i, v) {
                if (r < 0)
                        break;
                if (!json_is_string(v) ||
                    !command_valid(json_string_value(v), json_array_size(devs),
                                   &spec->thread_percentage)) {
                        r = diag_set(diag, -EINVAL, "commands[%zu] is not a limit devlet sends", i);
                        break;
                }
                spec->setup = strv_push(spec->setup, json_string_value(v));
        }
        json_decref(req);
        const struct dev_sidecar_claims *c = s->claims;
        spec->root = xstrdup(c->root);
        spec->resource = xasprintf("claim/%s", uid);
        spec->pipe_dir = xasprintf("%s%s/pipe", c->daemon_prefix, uid);
        spec->log_dir = xasprintf("%s%s/log", c->daemon_prefix, uid);
        spec->marker = xasprintf("%s%s/%s", c->daemon_prefix, uid, c->marker_name);
        spec->shm_dir = xstrdup(c->shm_dir);
        if (r < 0) {
                dev_sidecar_daemon_release(spec);
                return r;
        }
        return 0;
}

/* Removes what is below rel (files, fifos, and one more level of
 * directories), then rel; no symlink followed. */
static void remove_below(int root_fd, const char *rel, int depth)
{
        int pfd = fs_open_dir(root_fd, rel, FS_NO_SYMLINKS, 0755, NULL);
        if (pfd < 0)
                return;
        int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(pfd);
        if (fd < 0)
                return;
        DIR *dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return;
        }
        struct dirent *e;
        while ((e = readdir(dir))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (e->d_type == DT_DIR && depth > 0) {
                        _cleanup_free_ char *sub = xasprintf("%s/%s", rel, e->d_name);
                        remove_below(root_fd, sub, depth - 1);
                } else if (e->d_type != DT_DIR) {
                        unlinkat(dirfd(dir), e->d_name, 0);
                }
        }
        closedir(dir);
        unlinkat(root_fd, rel, AT_REMOVEDIR);
}

static void claim_stop(struct mps_sup *s, size_t i)
{
        struct mps_daemon *d = &s->d[i];
        marker_remove(d);
        if (d->ready && control_cmd(s, d, "quit", now_ms() + CONTROL_TIMEOUT_MS) == 0)
                log_info("mps", "MPS control daemon stopped resource=%s", d->spec.resource);
        /* <prefix><uid>: the marker's directory */
        if (d->root_fd >= 0)
                remove_below(d->root_fd, d->marker_dir, 1);
        daemon_release(d);
        memmove(&s->d[i], &s->d[i + 1], (s->n - i - 1) * sizeof(*s->d));
        s->n--;
}

static void claim_add(struct mps_sup *s, int dfd, const char *name, const char *uid)
{
        struct dev_sidecar_daemon spec;
        struct diag diag = { 0 };
        int r = claim_request(s, dfd, name, uid, &spec, &diag);
        if (r < 0) {
                if (!strv_contains(s->claims_refused, uid)) {
                        log_error("mps", "refusing a claim's MPS request file=%s/%s error=\"%s\"",
                                  s->claims->dir, name, diag.message);
                        if (!s->claims_refused)
                                s->claims_refused = xcalloc(1, sizeof(char *));
                        s->claims_refused = strv_push(s->claims_refused, uid);
                }
                return;
        }
        s->d = xrealloc(s->d, (s->n + 1) * sizeof(*s->d));
        struct mps_daemon *d = &s->d[s->n++];
        memset(d, 0, sizeof(*d));
        d->claim_uid = xstrdup(uid);
        if (daemon_init(d, &spec) < 0) {
                d->spec = spec; /* daemon_init copied it; released with d */
                daemon_release(d);
                s->n--;
                return;
        }
        if (!s->claims_shm_ready && shm_prepare(d) == 0)
                s->claims_shm_ready = true;
        log_info("mps", "MPS control daemon asked for by a claim resource=%s gpus=%s",
                 d->spec.resource, d->spec.visible_devices);
        daemon_start(s, d);
}

static void claims_scan(struct mps_sup *s)
{
        if (!s->claims)
                return;
        struct diag diag = { 0 };
        int dfd = fs_open_dir(AT_FDCWD, s->claims->dir, FS_CREATE, 0755, &diag);
        if (dfd < 0) {
                log_debug("mps", "cannot open the claims' directory path=%s error=\"%s\"",
                          s->claims->dir, diag.message);
                return;
        }
        /* fs_open_dir's is an O_PATH descriptor: a readable one to list */
        int lfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = lfd >= 0 ? fdopendir(lfd) : NULL;
        if (!dir) {
                if (lfd >= 0)
                        close(lfd);
                close(dfd);
                return;
        }
        _cleanup_strv_free_ char **uids = xcalloc(1, sizeof(char *));
        _cleanup_strv_free_ char **names = xcalloc(1, sizeof(char *));
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(dir)) && n < CLAIMS_MAX) {
                size_t len = strlen(e->d_name);
                if (len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0)
                        continue;
                _cleanup_free_ char *uid = xstrndup(e->d_name, len - 5);
                if (!dra_uid_valid(uid))
                        continue;
                uids = strv_push(uids, uid);
                names = strv_push(names, e->d_name);
                n++;
        }
        closedir(dir);
        /* gone requests: their daemons quit */
        for (size_t i = 0; i < s->n && !s->stop_signal;) {
                if (s->d[i].claim_uid && !strv_contains(uids, s->d[i].claim_uid)) {
                        claim_stop(s, i);
                        continue;
                }
                i++;
        }
        for (size_t k = 0; s->claims_refused && s->claims_refused[k];)
                if (!strv_contains(uids, s->claims_refused[k])) {
                        size_t left = 0;
                        while (s->claims_refused[k + left])
                                left++;
                        free(s->claims_refused[k]);
                        /* the rest and the NULL */
                        memmove(&s->claims_refused[k], &s->claims_refused[k + 1],
                                left * sizeof(char *));
                } else {
                        k++;
                }
        for (size_t k = 0; k < n && !s->stop_signal; k++) {
                bool have = false;
                for (size_t i = 0; i < s->n && !have; i++)
                        have = s->d[i].claim_uid && strcmp(s->d[i].claim_uid, uids[k]) == 0;
                if (!have)
                        claim_add(s, dfd, names[k], uids[k]);
        }
        close(dfd);
}

DEFINE_CLEANUP_FUNC(struct devlet_config, config_free)

/* The daemons of every backend that has MPS resources. */
struct mps_specs {
        struct dev_sidecar_daemon *v;
        size_t n;
        struct dev_sidecar_claims *claims; /* the first backend's that has them */
};

static void collect_specs(const struct dev_backend_ops *ops, struct dev_backend *b, void *ud)
{
        struct mps_specs *acc = ud;
        if (!acc->claims && ops->sidecar_claims)
                acc->claims = ops->sidecar_claims(b);
        _cleanup_free_ struct dev_sidecar_daemon *v = NULL;
        size_t n = ops->sidecar_daemons ? ops->sidecar_daemons(b, &v) : 0;
        if (!n)
                return;
        acc->v = xrealloc(acc->v, (acc->n + n) * sizeof(*acc->v));
        memcpy(acc->v + acc->n, v, n * sizeof(*v));
        acc->n += n;
}

/* NVIDIA's chart runs `mps-control-daemon mount-shm` as an init container
 * before its sidecar; devlet's sidecar mounts each daemon's shm tmpfs as it
 * starts it (shm_prepare), so there is nothing to do before. */
int cmd_mps_mount_shm(int argc, char **argv)
{
        log_info("mps", "mount-shm: the MPS sidecar mounts each daemon's shm tmpfs when it "
                        "starts it; nothing to do before");
        return 0;
}

int cmd_mps(int argc, char **argv)
{
        _cleanup_(config_freep) struct devlet_config *cfg = NULL;
        int r = cmd_load_config(argc, argv, &cfg, NULL);
        if (r)
                return r;
        log_set_verbosity((int)cfg->verbosity);
        /* the daemons the control program forks are ours to reap when it
         * exits, PID 1 or not */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                log_debug_errno(-errno, "mps", "cannot become a subreaper");
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGCHLD);
        sigprocmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);
        _cleanup_close_ int sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        if (sigfd < 0) {
                log_error_errno(-errno, "mps", "cannot create a signalfd");
                return 1;
        }
        struct mps_sup s = { .sigfd = sigfd, .claims_ifd = -1 };

        if (cfg->sharing.strategy != SHARING_MPS)
                log_info("mps", "sharing strategy is not MPS: no control daemon to run for a "
                                "resource; DRA claims may ask for theirs");
        struct mps_specs specs = { 0 };
        r = cmd_each_backend("mps-control-daemon", cfg, collect_specs, &specs);
        if (cfg->sharing.strategy != SHARING_MPS) {
                dev_sidecar_daemons_free(specs.v, specs.n);
                specs = (struct mps_specs){ .claims = specs.claims };
                _cleanup_free_ char *found = specs.claims ? find_control(specs.claims->program_roots)
                                                          : NULL;
                if (!found) {
                        log_info("mps", "%s, idle until stopped",
                                 specs.claims ? CONTROL_BIN " not found under the driver roots "
                                                "nor on PATH: no claim's daemon can run either"
                                              : "no backend takes MPS claims");
                        dev_sidecar_claims_free(specs.claims);
                        return idle_until_signal(&s);
                }
        }
        if (specs.claims) {
                s.claims = specs.claims;
                s.claims_ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
                if (s.claims_ifd >= 0) {
                        fs_mkdir_p(s.claims->dir, 0755);
                        if (inotify_add_watch(s.claims_ifd, s.claims->dir,
                                              IN_CREATE | IN_DELETE | IN_MOVED_TO |
                                                  IN_MOVED_FROM | IN_CLOSE_WRITE) < 0) {
                                close(s.claims_ifd);
                                s.claims_ifd = -1;
                        }
                }
        }
        if (!r && specs.n == 0 && s.claims) {
                _cleanup_free_ char *cbin = find_control(s.claims->program_roots);
                if (!cbin) {
                        log_error("mps", "%s not found under the driver roots nor on PATH: no "
                                         "claim's MPS daemon can run",
                                  CONTROL_BIN);
                        sup_free(&s);
                        return 1;
                }
                s.bin = cbin;
                log_info("mps", "supervising the DRA claims' daemons control=%s requests=%s",
                         cbin, s.claims->dir);
                supervise(&s);
                stop_all(&s);
                sup_free(&s);
                return 0;
        }
        if (r || specs.n == 0) {
                if (!r)
                        log_error("mps", "no GPUs to share: no resource of a running backend "
                                         "is shared by MPS");
                dev_sidecar_daemons_free(specs.v, specs.n);
                sup_free(&s);
                return 1;
        }
        size_t n = specs.n;
        for (size_t i = 0; i < n; i++)
                if (specs.v[i].replicas > specs.v[i].max_clients) {
                        log_error("mps", "invalid MPS configuration: maximum allowed replicas "
                                         "exceeded: %u > %u resource=%s",
                                  specs.v[i].replicas, specs.v[i].max_clients,
                                  specs.v[i].resource);
                        dev_sidecar_daemons_free(specs.v, n);
                        sup_free(&s);
                        return 1;
                }
        _cleanup_free_ char *bin = find_control(specs.v[0].program_roots);
        if (!bin) {
                char roots[512] = "";
                for (size_t i = 0; specs.v[0].program_roots && specs.v[0].program_roots[i]; i++)
                        snprintf(roots + strlen(roots), sizeof(roots) - strlen(roots), "%s%s",
                                 i ? " or " : "", specs.v[0].program_roots[i]);
                log_error("mps", "%s not found under the driver root (%s) nor on PATH",
                          CONTROL_BIN, roots);
                dev_sidecar_daemons_free(specs.v, n);
                sup_free(&s);
                return 1;
        }
        s.bin = bin;
        s.d = xcalloc(n, sizeof(*s.d));
        for (size_t i = 0; i < n; i++) {
                s.n++;
                r = daemon_init(&s.d[i], &specs.v[i]);
                bool seen = false;
                for (size_t j = 0; j < i; j++)
                        seen |= strcmp(specs.v[j].shm_dir, specs.v[i].shm_dir) == 0;
                if (r == 0 && !seen)
                        r = shm_prepare(&s.d[i]);
                if (r == 0 && s.claims && strcmp(s.claims->shm_dir, specs.v[i].shm_dir) == 0)
                        s.claims_shm_ready = true;
                if (r < 0) {
                        sup_free(&s);
                        dev_sidecar_daemons_free(specs.v, n);
                        return 1;
                }
        }
        for (size_t i = 0; i < n && !s.stop_signal; i++)
                daemon_start(&s, &s.d[i]);
        log_info("mps", "supervising control=%s daemons=%zu shm=%s", bin, n, specs.v[0].shm_dir);
        supervise(&s);
        stop_all(&s);
        sup_free(&s);
        dev_sidecar_daemons_free(specs.v, n);
        return 0;
}
