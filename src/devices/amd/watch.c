/* AMD GPUs that come, go or change partition mode after start-up, and the
 * kernel's word that a GPU is wedged.
 *
 * Two sources, both on the loop:
 *   - kernel uevents (base/uevent.c: the netlink socket, watched with
 *     uv_poll).  An add, remove, change, bind, unbind or move of a drm, kfd
 *     or pci device starts a short settle timer (a hot-plug is a burst of
 *     events; KFD's topology node comes after the DRM nodes), then a check.
 *     A drm `change` carrying WEDGED=<methods> (drm_dev_wedged_event, Linux
 *     6.14) fails the GPU whose PCI address (or partition) its DEVPATH names
 *     at once, the methods as the reason; it recovers as any failure does
 *     (health.recovery), once its reads succeed for the quiet period.
 *     WEDGED=none is the driver saying it hung and recovered by itself (a
 *     reset): reported, nothing failed;
 *   - every --rescan-interval, a check: the fallback when the socket could
 *     not be opened, and for what sends no uevent (a partition mode switch
 *     rewrites sysfs files).
 * A check reads the inventory's fingerprint (amdgpu's PCI devices, each
 * one's compute and memory partition modes, KFD's topology generation) on
 * libuv's pool, because a sysfs read of a GPU in reset can block for tens
 * of seconds; one at a time, a request during one runs after it.  A
 * fingerprint unlike the one read before the inventory asks the daemon to
 * rebuild the devices (dev_request_rebuild), which destroys this backend
 * and creates a new one from a fresh scan; one without any GPU does not
 * (the last GPU unbound for a reset, amdgpu reloading): a backend with no
 * GPU would not be created, and nothing would watch for their return, so
 * this one keeps its devices, the health poll fails them as gone, and
 * their return (or any other set) is the next change.
 * Everything that arrives on the socket is hostile until checked: only the
 * kernel's or root's messages are read, bounded and parsed strictly; a
 * malformed or untrusted one is counted, reported at powers of ten, and
 * dropped.  Never blocks the loop; never logs above debug (dev_report). */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/uevent.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

#define SETTLE_MS 200         /* after a uevent, before the check */
#define MSGS_PER_WAKE 64      /* then back to the loop; the rest next turn */
#define FP_MAX_GPUS 4096      /* a fingerprint's bound: past it, a broken tree */
#define FP_FIELD_MAX 16       /* a partition mode or a generation, as read */
#define REASON_ITEMS_MAX 4    /* differences named in a rebuild's reason */

struct fp_job {
        uv_work_t req;
        struct amd_watch *w;
        char *sysfs;
        char *result;
};

struct amd_watch {
        struct amd_backend *b; /* NULL once stopped */
        uv_loop_t *loop;
        char *sysfs;
        char *baseline; /* the fingerprint the running inventory was read after */
        int fd;         /* the uevent socket, -1 without */
        uv_poll_t poll;
        uv_timer_t settle, rescan;
        unsigned open_handles;
        struct fp_job *job; /* the check in flight */
        bool again;         /* asked for during it */
        /* messages dropped, by kind */
        uint64_t malformed, oversize, bad_methods, untrusted, overruns;
        char buf[UEVENT_MSG_MAX + 1];
};

/* ---- the fingerprint (any thread; may block on a GPU in reset) ---- */

/* The first line of dir/name, at most FP_FIELD_MAX bytes, lower case,
 * anything but [a-z0-9_] as '?'; "-" when unreadable. */
static char *fp_field(const char *dir, const char *name)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
        _cleanup_free_ char *t = NULL;
        if (amd_read_text(p, &t) < 0)
                return xstrdup("-");
        size_t n = strcspn(t, "\n");
        if (n > FP_FIELD_MAX)
                n = FP_FIELD_MAX;
        t[n] = '\0';
        for (char *c = t; *c; c++) {
                *c = (char)tolower((unsigned char)*c);
                if (!isalnum((unsigned char)*c) && *c != '_')
                        *c = '?';
        }
        return n ? TAKE_PTR(t) : xstrdup("-");
}

char *amd_fingerprint_read(const char *sysfs_root)
{
        _cleanup_free_ char *drivers = xasprintf("%s/module/amdgpu/drivers/pci:amdgpu", sysfs_root);
        struct stat st;
        if (stat(drivers, &st) < 0 || !S_ISDIR(st.st_mode))
                return xstrdup("amdgpu -\n");
        _cleanup_free_ char *kfd_dir = xasprintf("%s/class/kfd/kfd/topology", sysfs_root);
        _cleanup_free_ char *gen = fp_field(kfd_dir, "generation_id");
        char *out = xasprintf("kfd %s\n", gen);
        _cleanup_free_ char *pat = xasprintf("%s/[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]:*",
                                             drivers);
        glob_t gl;
        memset(&gl, 0, sizeof(gl));
        if (glob(pat, 0, NULL, &gl) == 0) {
                for (size_t i = 0; i < gl.gl_pathc && i < FP_MAX_GPUS; i++) {
                        const char *dir = gl.gl_pathv[i];
                        char bdf[32];
                        snprintf(bdf, sizeof(bdf), "%s", strrchr(dir, '/') + 1);
                        for (char *c = bdf; *c; c++)
                                *c = (char)tolower((unsigned char)*c);
                        _cleanup_free_ char *c = fp_field(dir, "current_compute_partition");
                        _cleanup_free_ char *m = fp_field(dir, "current_memory_partition");
                        char *more = xasprintf("%sgpu %s %s %s\n", out, bdf, c, m);
                        free(out);
                        out = more;
                }
        }
        globfree(&gl);
        return out;
}

/* The line of fp that starts with key ("gpu 0000:0c:00.0 "), or NULL; *len
 * its length without the newline. */
static const char *fp_line(const char *fp, const char *key, size_t *len)
{
        size_t klen = strlen(key);
        for (const char *p = fp; p && *p;) {
                const char *eol = strchr(p, '\n');
                size_t n = eol ? (size_t)(eol - p) : strlen(p);
                if (n >= klen && strncmp(p, key, klen) == 0) {
                        *len = n;
                        return p;
                }
                p = eol ? eol + 1 : NULL;
        }
        return NULL;
}

struct reason {
        char *text;
        size_t items, more;
};

static void reason_add(struct reason *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reason_add(struct reason *r, const char *fmt, ...)
{
        if (r->items == REASON_ITEMS_MAX) {
                r->more++;
                return;
        }
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *item = xvasprintf(fmt, ap);
        va_end(ap);
        char *t = xasprintf("%s%s%s", r->text ? r->text : "", r->text ? ", " : "", item);
        free(r->text);
        r->text = t;
        r->items++;
}

/* Adds what the lines of a that b lacks (or has otherwise) mean. */
static void fp_diff_side(const char *a, const char *b, bool a_is_new, struct reason *r)
{
        for (const char *p = a; p && *p;) {
                const char *eol = strchr(p, '\n');
                size_t n = eol ? (size_t)(eol - p) : strlen(p);
                char bdf[48], c[FP_FIELD_MAX + 1], m[FP_FIELD_MAX + 1];
                _cleanup_free_ char *line = xstrndup(p, n);
                p = eol ? eol + 1 : NULL;
                if (sscanf(line, "gpu %47s %16s %16s", bdf, c, m) != 3)
                        continue;
                _cleanup_free_ char *key = xasprintf("gpu %s ", bdf);
                size_t olen;
                const char *other = fp_line(b, key, &olen);
                if (!other) {
                        reason_add(r, a_is_new ? "new AMD GPU %s" : "AMD GPU %s gone", bdf);
                        continue;
                }
                if (!a_is_new || (olen == n && strncmp(other, line, n) == 0))
                        continue;
                _cleanup_free_ char *oline = xstrndup(other, olen);
                char oc[FP_FIELD_MAX + 1], om[FP_FIELD_MAX + 1];
                if (sscanf(oline, "gpu %*s %16s %16s", oc, om) == 2)
                        reason_add(r, "AMD GPU %s partition mode %s/%s -> %s/%s", bdf, oc, om, c,
                                   m);
        }
}

/* Why now differs from before, for the log: "new AMD GPU 0000:0c:00.0". */
static char *fp_diff(const char *before, const char *now)
{
        struct reason r = { 0 };
        fp_diff_side(now, before, true, &r);
        fp_diff_side(before, now, false, &r);
        size_t bl = 0, nl = 0;
        const char *bk = fp_line(before, "kfd ", &bl), *nk = fp_line(now, "kfd ", &nl);
        if (bk && nk && (bl != nl || strncmp(bk, nk, bl) != 0)) {
                _cleanup_free_ char *b = xstrndup(bk + 4, bl - 4), *n = xstrndup(nk + 4, nl - 4);
                reason_add(&r, "KFD topology generation %s -> %s", b, n);
        }
        if (!r.text)
                return xstrdup("AMD GPUs changed");
        if (r.more) {
                char *t = xasprintf("%s and %zu more", r.text, r.more);
                free(r.text);
                return t;
        }
        return r.text;
}

/* ---- checks, on the pool ---- */

static void watch_maybe_free(struct amd_watch *w)
{
        if (w->b || w->open_handles || w->job)
                return;
        free(w->sysfs);
        free(w->baseline);
        free(w);
}

static void fp_work(uv_work_t *req)
{
        struct fp_job *job = req->data;
        job->result = amd_fingerprint_read(job->sysfs);
}

static void check_start(struct amd_watch *w);

static void fp_done(uv_work_t *req, int status)
{
        struct fp_job *job = req->data;
        struct amd_watch *w = job->w;
        _cleanup_free_ char *now = TAKE_PTR(job->result);
        free(job->sysfs);
        free(job);
        w->job = NULL;
        if (!w->b) {
                watch_maybe_free(w);
                return;
        }
        if (status == 0 && now && strcmp(now, w->baseline) != 0 && !strstr(now, "\ngpu ")) {
                /* not one GPU left (unbound for a reset, the driver reloading):
                 * the health poll fails them as gone meanwhile, and the
                 * watch stays, to see them come back */
                log_debug("amd", "no AMD GPU in sysfs now, keeping the devices until one is");
        } else if (status == 0 && now && strcmp(now, w->baseline) != 0) {
                _cleanup_free_ char *why = fp_diff(w->baseline, now);
                free(w->baseline);
                w->baseline = TAKE_PTR(now); /* one request per change, even if refused */
                w->again = false;
                dev_request_rebuild("amd", "%s", why);
                return;
        }
        if (w->again) {
                w->again = false;
                check_start(w);
        }
}

static void check_start(struct amd_watch *w)
{
        if (w->job) {
                w->again = true;
                return;
        }
        struct fp_job *job = xcalloc(1, sizeof(*job));
        job->w = w;
        job->sysfs = xstrdup(w->sysfs);
        job->req.data = job;
        if (uv_queue_work(w->loop, &job->req, fp_work, fp_done) < 0) {
                free(job->sysfs);
                free(job);
                return;
        }
        w->job = job;
}

static void on_settled(uv_timer_t *t)
{
        check_start(t->data);
}

static void on_rescan(uv_timer_t *t)
{
        check_start(t->data);
}

/* ---- uevents, on the loop ---- */

/* Reports a dropped message at the 1st, 10th, 100th ... of its kind. */
static void count_dropped(uint64_t *counter, const char *what)
{
        uint64_t n = ++*counter;
        uint64_t p = 1;
        while (p < n && p <= UINT64_MAX / 10)
                p *= 10;
        if (p == n)
                dev_report(DEV_REPORT_WARN, "amd", "ignored a kernel uevent: %s (%llu so far)", what,
                           (unsigned long long)n);
        else
                log_debug("amd", "ignored a kernel uevent: %s", what);
}

/* The GPU whose PCI device (or partition) is the device right above the
 * "/drm/" of devpath; n_gpus when none. */
static size_t gpu_of_devpath(const struct amd_inventory *inv, const char *devpath)
{
        const char *drm = strstr(devpath, "/drm/");
        if (!drm)
                return inv->n_gpus;
        const char *start = drm;
        while (start > devpath && start[-1] != '/')
                start--;
        size_t n = (size_t)(drm - start);
        for (size_t i = 0; i < inv->n_gpus; i++)
                for (size_t k = 0; k < inv->gpus[i].n_parts; k++) {
                        const char *id = inv->gpus[i].parts[k].id;
                        if (strlen(id) == n && strncasecmp(id, start, n) == 0)
                                return i;
                }
        return inv->n_gpus;
}

/* The kernel's recovery methods: words of [a-z-] separated by commas. */
static bool methods_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 64 || s[0] == ',' || s[n - 1] == ',' || strstr(s, ",,"))
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || *s == '-' || *s == ','))
                        return false;
        return true;
}

static void on_wedged(struct amd_watch *w, const struct uevent *ev, const char *methods)
{
        struct amd_backend *b = w->b;
        if (!methods_ok(methods)) {
                count_dropped(&w->bad_methods, "WEDGED with malformed recovery methods");
                return;
        }
        size_t gpu = gpu_of_devpath(b->inv, ev->devpath);
        if (gpu == b->inv->n_gpus) {
                log_debug("amd", "WEDGED uevent for a device not served devpath=%s", ev->devpath);
                return;
        }
        const char *bdf = b->inv->gpus[gpu].bdf;
        if (strcmp(methods, "none") == 0) {
                /* drm-uapi: wedged for a while, recovered from the driver's
                 * side (a reset); nothing for the consumer to do */
                dev_report(DEV_REPORT_WARN, "amd",
                           "GPU hung and its driver recovered it gpu=%zu pci=%s uevent=\"WEDGED=none\"",
                           gpu, bdf);
                return;
        }
        dev_report(DEV_REPORT_WARN, "amd",
                   "GPU wedged, the kernel says gpu=%zu pci=%s recovery=\"%s\"", gpu, bdf,
                   methods);
        amd_gpu_fail(b, gpu, AMD_HEALTH_UNRESPONSIVE,
                     xasprintf("wedged: the kernel asks for recovery by %s (WEDGED=%s)",
                               strcmp(methods, "unknown") == 0 ? "an unknown method" : methods,
                               methods));
}

static bool one_of(const char *s, const char *const *set)
{
        for (; s && *set; set++)
                if (strcmp(s, *set) == 0)
                        return true;
        return false;
}

static void on_uevent(struct amd_watch *w, struct uevent *ev)
{
        static const char *const subsystems[] = { "drm", "kfd", "pci", NULL };
        static const char *const actions[] = { "add", "remove", "change", "bind", "unbind", "move",
                                               NULL };
        if (!one_of(ev->subsystem, subsystems) || !one_of(ev->action, actions))
                return;
        const char *wedged = uevent_get(ev, "WEDGED");
        if (wedged && strcmp(ev->subsystem, "drm") == 0 && strcmp(ev->action, "change") == 0) {
                on_wedged(w, ev, wedged);
                return;
        }
        log_debug("amd", "uevent action=%s subsystem=%s devpath=%s", ev->action, ev->subsystem,
                  ev->devpath);
        uv_timer_start(&w->settle, on_settled, SETTLE_MS, 0);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
        struct amd_watch *w = h->data;
        if (status < 0) {
                /* the socket is broken: the rescan is what is left */
                log_debug("amd", "uevent socket error=\"%s\", no longer watched",
                          uv_strerror(status));
                uv_poll_stop(h);
                return;
        }
        for (int i = 0; i < MSGS_PER_WAKE && w->b; i++) {
                ssize_t n = uevent_socket_recv(w->fd, w->buf, sizeof(w->buf));
                if (n == -EAGAIN || n == -EINTR)
                        return;
                if (n == -ENOBUFS) {
                        /* the kernel dropped events: look for ourselves */
                        w->overruns++;
                        log_debug("amd", "uevent socket overrun, checking the GPUs");
                        uv_timer_start(&w->settle, on_settled, SETTLE_MS, 0);
                        continue;
                }
                if (n == -EPERM) {
                        count_dropped(&w->untrusted, "sent by neither the kernel nor root");
                        continue;
                }
                if (n == -EMSGSIZE) {
                        count_dropped(&w->oversize, "longer than the kernel sends");
                        continue;
                }
                if (n < 0) {
                        log_debug("amd", "uevent socket error=\"%s\"", strerror((int)-n));
                        return;
                }
                struct uevent ev;
                int r = uevent_parse(w->buf, (size_t)n, &ev);
                if (r == -EPROTO)
                        continue; /* udevd's format, not the kernel's */
                if (r < 0) {
                        count_dropped(&w->malformed, "malformed");
                        continue;
                }
                on_uevent(w, &ev);
        }
}

/* ---- start and stop ---- */

static void on_handle_closed(uv_handle_t *h)
{
        struct amd_watch *w = h->data;
        w->open_handles--;
        watch_maybe_free(w);
}

struct amd_watch *amd_watch_start(uv_loop_t *loop, struct amd_backend *b, const char *sysfs_root,
                                  char *fingerprint, int64_t rescan_ms)
{
        struct amd_watch *w = xcalloc(1, sizeof(*w));
        w->b = b;
        w->loop = loop;
        w->sysfs = xstrdup(sysfs_root);
        w->baseline = fingerprint ? fingerprint : amd_fingerprint_read(sysfs_root);
        w->fd = -1;
        uv_timer_init(loop, &w->settle);
        uv_timer_init(loop, &w->rescan);
        w->settle.data = w->rescan.data = w;
        w->open_handles = 2;
        int fd = uevent_socket_open();
        if (fd >= 0 && uv_poll_init(loop, &w->poll, fd) == 0) {
                w->fd = fd;
                w->poll.data = w;
                w->open_handles++;
                uv_poll_start(&w->poll, UV_READABLE, on_readable);
        } else {
                if (fd >= 0)
                        close(fd);
                dev_report(DEV_REPORT_HOST_WARN, "amd",
                           "cannot watch kernel uevents: hot-plugged AMD GPUs are found %s, "
                           "and the kernel's WEDGED events go unseen error=\"%s\"",
                           rescan_ms > 0 ? "by the --rescan-interval check only"
                                         : "by no one (--rescan-interval is infinite)",
                           strerror(fd < 0 ? -fd : EIO));
        }
        if (rescan_ms > 0)
                uv_timer_start(&w->rescan, on_rescan, (uint64_t)rescan_ms, (uint64_t)rescan_ms);
        /* what changed between the baseline and the socket's opening */
        check_start(w);
        return w;
}

void amd_watch_stop(struct amd_watch *w)
{
        if (!w)
                return;
        w->b = NULL;
        if (w->job)
                uv_cancel((uv_req_t *)&w->job->req); /* fp_done frees it either way */
        uv_close((uv_handle_t *)&w->settle, on_handle_closed);
        uv_close((uv_handle_t *)&w->rescan, on_handle_closed);
        if (w->fd >= 0) {
                uv_poll_stop(&w->poll);
                close(w->fd);
                w->fd = -1;
                uv_close((uv_handle_t *)&w->poll, on_handle_closed);
        }
}
