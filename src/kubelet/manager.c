/* All plugin servers, and the watch that keeps them registered.
 *
 * The kubelet, when it starts, deletes every file in its device-plugins
 * directory and then creates kubelet.sock anew.  We watch that directory
 * (inotify through uv_fs_event) and, on any event, compare what is there with
 * what we expect: a missing or replaced plugin socket is re-created and
 * registered again; a kubelet.sock with a new inode means a new kubelet, so
 * every resource registers again (and the owner is told, to count it):
 * nothing is rebuilt or re-read.  A slow timer repeats the same check, which
 * covers a directory that is itself removed and re-created (its inotify watch
 * dies with it).  devlet never exits because the kubelet went away.
 * Runs on the loop thread; every check is a few stat(2) calls. */
#include "kubelet/kubelet.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"

/* A burst of directory events (the kubelet wiping it) becomes one check on
 * the next loop turn: the new kubelet is seen without waiting. */
#define DEBOUNCE_MS 0
#define POLL_MS 1000

struct dir_watch {
        char *path;
        uv_fs_event_t *handle; /* heap: closed asynchronously */
        dev_t dev;
        ino_t ino;
};

struct kubelet_manager {
        uv_loop_t *loop;
        char *plugin_dir;
        char *kubelet_socket;
        struct plugin_server **servers;
        size_t n_servers;

        struct dir_watch watches[2]; /* the plugin dir, and kubelet.sock's dir if different */
        size_t n_watches;
        uv_timer_t *debounce;
        uv_timer_t *poll;

        int kubelet_present;
        dev_t kubelet_dev;
        ino_t kubelet_ino;
        struct timespec kubelet_ctime;
        /* an inotify event named kubelet.sock: a quickly re-created socket
         * can get the same inode back, so identity alone misses it */
        int kubelet_event;
        uint64_t kubelet_event_ns; /* uv_hrtime() of that event, 0: none */
        char *kubelet_name;
        uint64_t restarts_seen;
        kubelet_restart_fn on_restart;
        void *on_restart_ud;
};

static void schedule_check(struct kubelet_manager *m);

static void free_handle(uv_handle_t *h)
{
        free(h);
}

static void on_dir_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
        struct kubelet_manager *m = h->data;
        log_trace("kubelet", "directory event file=%s events=%d status=%d", filename ? filename : "",
                  events, status);
        if (filename && strcmp(filename, m->kubelet_name) == 0 && (events & UV_RENAME)) {
                m->kubelet_event = 1;
                m->kubelet_event_ns = uv_hrtime();
        }
        schedule_check(m);
}

/* (Re)arms the inotify watch when the directory is new or was replaced. */
static void watch_refresh(struct kubelet_manager *m, struct dir_watch *w)
{
        struct stat st;
        if (stat(w->path, &st) < 0) {
                if (w->handle) {
                        uv_close((uv_handle_t *)TAKE_PTR(w->handle), free_handle);
                        log_warn("kubelet", "directory gone, polling dir=%s", w->path);
                }
                return;
        }
        if (w->handle && st.st_dev == w->dev && st.st_ino == w->ino)
                return;
        if (w->handle)
                uv_close((uv_handle_t *)TAKE_PTR(w->handle), free_handle);
        w->handle = xcalloc(1, sizeof(*w->handle));
        uv_fs_event_init(m->loop, w->handle);
        w->handle->data = m;
        int r = uv_fs_event_start(w->handle, on_dir_event, w->path, 0);
        if (r < 0) {
                log_warn("kubelet", "cannot watch dir=%s error=\"%s\", polling every %d ms", w->path,
                         uv_strerror(r), POLL_MS);
                uv_close((uv_handle_t *)TAKE_PTR(w->handle), free_handle);
                return;
        }
        w->dev = st.st_dev;
        w->ino = st.st_ino;
        log_debug("kubelet", "watching dir=%s", w->path);
}

static void check(struct kubelet_manager *m)
{
        /* a new kubelet is seen at its socket's event, or now (the poll) */
        uint64_t seen_ns = m->kubelet_event_ns ? m->kubelet_event_ns : uv_hrtime();
        m->kubelet_event_ns = 0;
        for (size_t i = 0; i < m->n_watches; i++)
                watch_refresh(m, &m->watches[i]);

        struct stat st;
        int present = m->kubelet_socket[0] && stat(m->kubelet_socket, &st) == 0 &&
                      S_ISSOCK(st.st_mode);
        int kubelet_new = present && (!m->kubelet_present || m->kubelet_event ||
                                      st.st_dev != m->kubelet_dev || st.st_ino != m->kubelet_ino ||
                                      st.st_ctim.tv_sec != m->kubelet_ctime.tv_sec ||
                                      st.st_ctim.tv_nsec != m->kubelet_ctime.tv_nsec);
        m->kubelet_event = 0;
        int restart = 0;
        if (present && kubelet_new) {
                if (m->kubelet_present || m->kubelet_ino) {
                        m->restarts_seen++;
                        restart = 1;
                }
                log_info("kubelet", "kubelet socket found socket=%s restarts_seen=%llu",
                         m->kubelet_socket, (unsigned long long)m->restarts_seen);
                m->kubelet_dev = st.st_dev;
                m->kubelet_ino = st.st_ino;
                m->kubelet_ctime = st.st_ctim;
        } else if (!present && m->kubelet_present) {
                log_warn("kubelet", "kubelet socket gone, waiting for the kubelet socket=%s",
                         m->kubelet_socket);
        }
        m->kubelet_present = present;

        if (restart && m->on_restart)
                m->on_restart(m->on_restart_ud);
        for (size_t i = 0; i < m->n_servers; i++) {
                int recreated = plugin_server_ensure_socket(m->servers[i]);
                if (present && (kubelet_new || recreated > 0))
                        plugin_server_register(m->servers[i], m->kubelet_socket);
        }
        /* devlet's own share of a re-registration, for `make bench` */
        if (restart)
                log_debug("kubelet", "registering again after a kubelet restart resources=%zu "
                                     "seen_to_sent_us=%llu",
                          m->n_servers, (unsigned long long)((uv_hrtime() - seen_ns) / 1000));
}

static void on_debounce(uv_timer_t *t)
{
        check(t->data);
}

static void schedule_check(struct kubelet_manager *m)
{
        if (!uv_is_active((uv_handle_t *)m->debounce))
                uv_timer_start(m->debounce, on_debounce, DEBOUNCE_MS, 0);
}

static void on_poll(uv_timer_t *t)
{
        check(t->data);
}

static uv_timer_t *timer_new(struct kubelet_manager *m)
{
        uv_timer_t *t = xcalloc(1, sizeof(*t));
        uv_timer_init(m->loop, t);
        t->data = m;
        return t;
}

int kubelet_manager_new(uv_loop_t *loop, const char *plugin_dir, const char *kubelet_socket,
                        struct dev_resource *const *resources, size_t n,
                        kubelet_restart_fn on_restart, void *ud, struct kubelet_manager **out)
{
        struct diag diag = { 0 };
        int r = fs_open_dir(AT_FDCWD, plugin_dir, FS_CREATE, 0755, &diag);
        if (r < 0) {
                log_error("kubelet", "cannot create plugin directory dir=%s error=\"%s\"",
                          plugin_dir, diag.message);
                return r;
        }
        close(r);

        struct kubelet_manager *m = xcalloc(1, sizeof(*m));
        m->loop = loop;
        m->plugin_dir = xstrdup(plugin_dir);
        m->kubelet_socket = xstrdup(kubelet_socket);
        m->debounce = timer_new(m);
        m->poll = timer_new(m);
        m->on_restart = on_restart;
        m->on_restart_ud = ud;

        m->watches[m->n_watches++].path = xstrdup(plugin_dir);
        _cleanup_free_ char *ks = xstrdup(kubelet_socket);
        m->kubelet_name = xstrdup(ks[0] ? basename(ks) : "");
        const char *kdir = ks[0] ? dirname(ks) : plugin_dir;
        if (strcmp(kdir, plugin_dir) != 0)
                m->watches[m->n_watches++].path = xstrdup(kdir);

        m->servers = xcalloc(n ? n : 1, sizeof(*m->servers));
        for (size_t i = 0; i < n; i++) {
                /* one resource's socket failing is that resource's failure only */
                r = plugin_server_new(loop, plugin_dir, resources[i], &m->servers[m->n_servers]);
                if (r < 0) {
                        log_error("kubelet", "cannot serve resource=%s, the others are served "
                                             "error=\"%s\"",
                                  resources[i]->name, strerror(-r));
                        continue;
                }
                m->n_servers++;
        }

        check(m);
        if (!m->kubelet_socket[0])
                log_info("kubelet", "no kubelet socket (--kubelet-socket \"\"): serving the "
                                    "plugin sockets without registering");
        else if (!m->kubelet_present)
                log_info("kubelet", "waiting for the kubelet socket=%s", m->kubelet_socket);
        uv_timer_start(m->poll, on_poll, POLL_MS, POLL_MS);
        *out = m;
        return 0;
}

int kubelet_manager_update(struct kubelet_manager *m, struct dev_resource *const *resources,
                           size_t n)
{
        struct plugin_server **next = xcalloc(n, sizeof(*next));
        _cleanup_free_ bool *again = xcalloc(n + 1, sizeof(*again));
        size_t n_next = 0;
        int ret = 0;
        for (size_t i = 0; i < n; i++) {
                struct plugin_server *keep = NULL;
                for (size_t j = 0; j < m->n_servers && !keep; j++) {
                        if (m->servers[j] &&
                            strcmp(plugin_server_resource(m->servers[j])->name, resources[i]->name) == 0) {
                                keep = m->servers[j];
                                m->servers[j] = NULL;
                        }
                }
                if (keep) {
                        plugin_server_rebind(keep, resources[i]);
                        /* after a kubelet restart its socket file is gone */
                        int e = plugin_server_ensure_socket(keep);
                        if (e < 0 && !ret)
                                ret = -EIO;
                        int f = e > 0 ? 1 : plugin_server_refresh(keep);
                        if (f < 0 && !ret)
                                ret = f;
                        again[n_next] = f > 0;
                } else {
                        int r = plugin_server_new(m->loop, m->plugin_dir, resources[i], &keep);
                        if (r < 0) {
                                log_error_errno(r, "kubelet", "cannot serve resource=%s",
                                                resources[i]->name);
                                if (!ret)
                                        ret = r;
                                continue;
                        }
                        again[n_next] = true;
                }
                next[n_next++] = keep;
        }
        for (size_t j = 0; j < m->n_servers; j++) {
                if (!m->servers[j])
                        continue;
                log_info("kubelet", "resource removed resource=%s",
                         plugin_server_resource(m->servers[j])->name);
                plugin_server_free(m->servers[j]);
        }
        free(m->servers);
        m->servers = next;
        m->n_servers = n_next;

        /* Register what the kubelet must learn of: new resources, changed
         * options, re-created sockets; not the rest (a kubelet since 1.37
         * refuses a second registration while connected). */
        struct stat st;
        if (m->kubelet_socket[0] && stat(m->kubelet_socket, &st) == 0 && S_ISSOCK(st.st_mode))
                for (size_t i = 0; i < m->n_servers; i++)
                        if (again[i])
                                plugin_server_register(m->servers[i], m->kubelet_socket);
        return ret;
}

void kubelet_manager_free(struct kubelet_manager *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_servers; i++)
                plugin_server_free(m->servers[i]);
        free(m->servers);
        for (size_t i = 0; i < m->n_watches; i++) {
                if (m->watches[i].handle)
                        uv_close((uv_handle_t *)m->watches[i].handle, free_handle);
                free(m->watches[i].path);
        }
        uv_close((uv_handle_t *)m->debounce, free_handle);
        uv_close((uv_handle_t *)m->poll, free_handle);
        free(m->plugin_dir);
        free(m->kubelet_socket);
        free(m->kubelet_name);
        free(m);
}

struct plugin_server *kubelet_manager_server(const struct kubelet_manager *m, size_t i)
{
        return i < m->n_servers ? m->servers[i] : NULL;
}
