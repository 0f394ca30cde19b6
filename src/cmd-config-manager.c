/* `devlet config-manager` (also the `config-manager` command name): NVIDIA's
 * per-node config selection, as its chart runs it (init container with
 * --oneshot, then a sidecar).
 *
 * The node label (--node-label, default nvidia.com/device-plugin.config)
 * names one file of --config-file-srcdir (a mounted ConfigMap, one key per
 * config); --config-file-dst becomes a symlink to it, and the process named
 * --process-to-signal (argv[0] as /proc shows it; the pod shares its process
 * namespace) gets --signal, SIGHUP by default, on which devlet reloads.
 * With no label, --default-config is taken.  --fallback-strategies
 * (devlet's reading of NVIDIA's, comma-separated, tried in order) decides
 * what happens when that names no file: "named" (the default config's
 * file), "single" (the only file of srcdir), "empty" (an empty config, so
 * the plugin runs on its flags).  A label naming no file is an error:
 * logged, nothing changed, as NVIDIA's.
 *
 * Without --oneshot, an informer of the one Node (fieldSelector; the
 * API client's informer on a libuv loop: a streaming list, then watches of
 * 5 to 10 minutes from the last resourceVersion, resyncs after a lost
 * connection without 410 + GET, its backoff after a failure) follows the
 * label.  SIGTERM/SIGINT end it at once.  Flags come as urfave/cli takes them
 * (-flag or --flag, =VALUE or the next argument; bools only with =), and
 * the tool's env vars; a bad flag exits 1, as the tool's does. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "kapi/informer.h"
#include "kapi/kapi.h"

#define DEFAULT_LABEL "nvidia.com/device-plugin.config"
#define DEFAULT_PROCESS "nvidia-device-plugin"
#define CALL_TIMEOUT_MS 15000
#define CMDLINE_MAX 4096

struct cm {
        bool oneshot, send_signal;
        long signal;
        char *kubeconfig, *node_name, *node_label, *srcdir, *dst, *default_config, *fallback,
                *process;
        struct kapi_client *client;
        char *applied;       /* the label value last applied (NULL: none yet) */
        char *resource_version;
};

static atomic_bool stop_flag;

static void on_stop(int sig)
{
        (void)sig;
        atomic_store(&stop_flag, true);
}

/* ---- flags ---- */

enum cm_type { CM_STR, CM_BOOL, CM_INT };

struct cm_flag {
        const char *name, *env;
        enum cm_type type;
        size_t offset;
};

#define F(m) offsetof(struct cm, m)
static const struct cm_flag cm_flags[] = {
        { "oneshot", "ONESHOT", CM_BOOL, F(oneshot) },
        { "kubeconfig", "KUBECONFIG", CM_STR, F(kubeconfig) },
        { "node-name", "NODE_NAME", CM_STR, F(node_name) },
        { "node-label", "NODE_LABEL", CM_STR, F(node_label) },
        { "config-file-srcdir", "CONFIG_FILE_SRCDIR", CM_STR, F(srcdir) },
        { "config-file-dst", "CONFIG_FILE_DST", CM_STR, F(dst) },
        { "default-config", "DEFAULT_CONFIG", CM_STR, F(default_config) },
        { "fallback-strategies", "FALLBACK_STRATEGIES", CM_STR, F(fallback) },
        { "send-signal", "SEND_SIGNAL", CM_BOOL, F(send_signal) },
        { "signal", "SIGNAL", CM_INT, F(signal) },
        { "process-to-signal", "PROCESS_TO_SIGNAL", CM_STR, F(process) },
};

static int set_flag(struct cm *cm, const struct cm_flag *f, const char *v)
{
        void *at = (char *)cm + f->offset;
        if (f->type == CM_STR) {
                free(*(char **)at);
                *(char **)at = xstrdup(v);
                return 0;
        }
        if (f->type == CM_BOOL) {
                if (!strcmp(v, "1") || !strcasecmp(v, "t") || !strcasecmp(v, "true"))
                        *(bool *)at = true;
                else if (!strcmp(v, "0") || !strcasecmp(v, "f") || !strcasecmp(v, "false"))
                        *(bool *)at = false;
                else {
                        fprintf(stderr, "Error: invalid boolean value \"%s\" for flag %s\n", v,
                                f->name);
                        return -EINVAL;
                }
                return 0;
        }
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < 1 || n > 64) {
                fprintf(stderr, "Error: invalid value \"%s\" for flag %s: a signal number\n", v,
                        f->name);
                return -EINVAL;
        }
        *(long *)at = n;
        return 0;
}

static void cm_clear(struct cm *cm)
{
        for (size_t i = 0; i < ARRAY_SIZE(cm_flags); i++)
                if (cm_flags[i].type == CM_STR)
                        free(*(char **)((char *)cm + cm_flags[i].offset));
        kapi_client_free(cm->client);
        free(cm->applied);
        free(cm->resource_version);
}

static int parse(struct cm *cm, int argc, char **argv)
{
        *cm = (struct cm){ .send_signal = true, .signal = SIGHUP };
        cm->node_label = xstrdup(DEFAULT_LABEL);
        cm->process = xstrdup(DEFAULT_PROCESS);
        cm->fallback = xstrdup("named,single");
        for (size_t i = 0; i < ARRAY_SIZE(cm_flags); i++) {
                const char *v = getenv(cm_flags[i].env);
                if (v && v[0] && set_flag(cm, &cm_flags[i], v) < 0)
                        return -EINVAL;
        }
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (a[0] != '-' || !a[1]) {
                        fprintf(stderr, "Error: unexpected argument \"%s\"\n", a);
                        return -EINVAL;
                }
                const char *name = a + (a[1] == '-' ? 2 : 1);
                const char *eq = strchr(name, '=');
                size_t len = eq ? (size_t)(eq - name) : strlen(name);
                const struct cm_flag *f = NULL;
                for (size_t k = 0; k < ARRAY_SIZE(cm_flags); k++)
                        if (strlen(cm_flags[k].name) == len &&
                            strncmp(cm_flags[k].name, name, len) == 0)
                                f = &cm_flags[k];
                if (!f) {
                        fprintf(stderr, "Error: flag provided but not defined: -%.*s\n", (int)len,
                                name);
                        return -EINVAL;
                }
                const char *v = eq ? eq + 1 : f->type == CM_BOOL ? "true" : NULL;
                if (!v && i + 1 < argc)
                        v = argv[++i];
                if (!v) {
                        fprintf(stderr, "Error: flag needs an argument: -%s\n", f->name);
                        return -EINVAL;
                }
                if (set_flag(cm, f, v) < 0)
                        return -EINVAL;
        }
        static const struct {
                size_t offset;
                const char *name;
        } required[] = {
                { F(node_name), "node-name" },       { F(node_label), "node-label" },
                { F(srcdir), "config-file-srcdir" }, { F(dst), "config-file-dst" },
                { F(default_config), "default-config" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(required); i++) {
                const char *v = *(char **)((char *)cm + required[i].offset);
                if (!v || !v[0]) {
                        fprintf(stderr, "Error: invalid <%s>: must not be empty string\n",
                                required[i].name);
                        return -EINVAL;
                }
        }
        return 0;
}

/* ---- choosing and applying a config ---- */

/* A config name is one file name: no '/', not "." or "..", printable. */
static bool name_ok(const char *s)
{
        if (!s[0] || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 253)
                return false;
        for (const char *p = s; *p; p++)
                if (*p == '/' || !isprint((unsigned char)*p))
                        return false;
        return true;
}

static bool src_exists(const struct cm *cm, const char *name)
{
        if (!name_ok(name))
                return false;
        _cleanup_free_ char *p = xasprintf("%s/%s", cm->srcdir, name);
        struct stat st;
        return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The only regular file of srcdir not starting with '.' (a ConfigMap
 * volume's ..data and its timestamped directory are dot names), or NULL. */
static char *single_file(const struct cm *cm)
{
        DIR *d = opendir(cm->srcdir);
        if (!d)
                return NULL;
        char *found = NULL;
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d)) && n < 2) {
                if (e->d_name[0] == '.' || !src_exists(cm, e->d_name))
                        continue;
                if (n++ == 0)
                        found = xstrdup(e->d_name);
        }
        closedir(d);
        if (n != 1) {
                free(found);
                return NULL;
        }
        return found;
}

/* The file dst should point to for label value (NULL: an empty config),
 * in *out; -ENOENT with a message when there is none. */
static int choose(const struct cm *cm, const char *value, char **out, bool *empty)
{
        *empty = false;
        if (value && value[0]) {
                if (!src_exists(cm, value)) {
                        log_error("config-manager", "unknown configuration config=%s srcdir=%s",
                                  value, cm->srcdir);
                        return -ENOENT;
                }
                *out = xasprintf("%s/%s", cm->srcdir, value);
                return 0;
        }
        _cleanup_free_ char *list = xstrdup(cm->fallback);
        char *save = NULL;
        for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
                while (*s == ' ')
                        s++;
                if (!strcmp(s, "named") && src_exists(cm, cm->default_config)) {
                        *out = xasprintf("%s/%s", cm->srcdir, cm->default_config);
                        return 0;
                }
                if (!strcmp(s, "single")) {
                        _cleanup_free_ char *one = single_file(cm);
                        if (one) {
                                *out = xasprintf("%s/%s", cm->srcdir, one);
                                return 0;
                        }
                }
                if (!strcmp(s, "empty")) {
                        *empty = true;
                        *out = NULL;
                        return 0;
                }
        }
        log_error("config-manager", "no label and no fallback applies default=%s srcdir=%s "
                                    "fallback-strategies=%s",
                  cm->default_config, cm->srcdir, cm->fallback);
        return -ENOENT;
}

/* Points dst at target (or writes an empty config), replacing it in one
 * rename, in dst's directory as fs_open_dir checks it (root's or ours, not
 * writable by others: whoever could write there could point dst, which
 * devlet reads as root, anywhere).  1 when it changed, 0 when it already
 * was so, -errno with diag. */
static int update_dst(const struct cm *cm, const char *target, bool empty, struct diag *diag)
{
        const char *slash = strrchr(cm->dst, '/');
        const char *base = slash ? slash + 1 : cm->dst;
        _cleanup_free_ char *dir = slash ? xstrndup(cm->dst, slash == cm->dst ? 1
                                                                          : (size_t)(slash - cm->dst))
                                         : xstrdup(".");
        _cleanup_close_ int dfd = fs_open_dir(AT_FDCWD, dir, 0, 0755, diag);
        if (dfd < 0)
                return dfd;
        char cur[4096];
        ssize_t n = readlinkat(dfd, base, cur, sizeof(cur) - 1);
        if (n >= 0) {
                cur[n] = '\0';
                if (target && strcmp(cur, target) == 0)
                        return 0;
        } else if (empty) {
                struct stat st;
                if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                    st.st_size == 0)
                        return 0;
        }
        /* a random name beside dst: created exclusively, never through a link */
        unsigned long long rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                rnd = (unsigned long long)getpid() << 32 ^ (unsigned long long)time(NULL);
        _cleanup_free_ char *tmp = xasprintf("%.200s.%016llx.tmp", base, rnd);
        if (empty) {
                int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
                if (fd < 0)
                        return diag_set(diag, -errno, "%s", strerror(errno));
                close(fd);
        } else if (symlinkat(target, dfd, tmp) < 0) {
                return diag_set(diag, -errno, "%s", strerror(errno));
        }
        if (renameat(dfd, tmp, dfd, base) < 0) {
                int r = -errno;
                (void)unlinkat(dfd, tmp, 0);
                return diag_set(diag, r, "%s", strerror(-r));
        }
        return 1;
}

/* The pid whose argv[0] is name (itself excluded), or -ESRCH. */
static pid_t find_process(const char *name)
{
        DIR *d = opendir("/proc");
        if (!d)
                return -errno;
        pid_t found = -ESRCH, self = getpid();
        struct dirent *e;
        while ((e = readdir(d)) && found < 0) {
                char *end;
                long pid = strtol(e->d_name, &end, 10);
                if (*end || pid <= 0 || pid == self)
                        continue;
                char path[64], buf[CMDLINE_MAX];
                snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                if (strcmp(buf, name) == 0)
                        found = (pid_t)pid;
        }
        closedir(d);
        return found;
}

static int apply_value(struct cm *cm, const char *value)
{
        const char *shown = value && value[0] ? value : "(none)";
        _cleanup_free_ char *target = NULL;
        bool empty;
        int r = choose(cm, value, &target, &empty);
        if (r < 0)
                return r;
        struct diag diag = { 0 };
        r = update_dst(cm, target, empty, &diag);
        if (r < 0) {
                log_error("config-manager", "cannot update the config file dst=%s error=\"%s\"",
                          cm->dst, diag.message);
                return r;
        }
        free(cm->applied);
        cm->applied = xstrdup(value ? value : "");
        if (r == 0) {
                log_info("config-manager", "already configured label=%s dst=%s", shown, cm->dst);
                return 0;
        }
        log_info("config-manager", "config updated label=%s dst=%s target=%s", shown, cm->dst,
                 target ? target : "(empty config)");
        if (!cm->send_signal)
                return 0;
        pid_t pid = find_process(cm->process);
        if (pid < 0 || kill(pid, (int)cm->signal) < 0) {
                log_error("config-manager", "cannot signal the process process=%s error=\"%s\"",
                          cm->process, pid < 0 ? "no such process" : strerror(errno));
                return -ESRCH;
        }
        log_info("config-manager", "signalled process=%s pid=%d signal=%ld", cm->process,
                 (int)pid, cm->signal);
        return 0;
}

/* ---- the API server ---- */

static const char *node_label(const json_t *node, const char *key)
{
        json_t *v = json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"),
                                    key);
        return json_is_string(v) ? json_string_value(v) : "";
}

static void keep_version(struct cm *cm, json_t *obj)
{
        json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
        if (json_is_string(rv)) {
                free(cm->resource_version);
                cm->resource_version = xstrdup(json_string_value(rv));
        }
}

/* What is read of the Node: its labels and version, the rest skipped unparsed. */
static const struct kapi_keep node_keep = { .spec = "{metadata{resourceVersion,labels}}" };

static int get_node(struct cm *cm, char **value)
{
        _cleanup_free_ char *name = kapi_escape(cm->node_name);
        _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", name);
        struct kapi_response resp = { 0 };
        struct diag diag = { 0 };
        int r = kapi_request_keep(cm->client, "GET", path, NULL, &node_keep, CALL_TIMEOUT_MS,
                                  &stop_flag, &resp, &diag);
        if (r == 0 && resp.status != 200)
                r = -EPROTO;
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                log_warn("config-manager", "cannot read the node node=%s error=\"%s\"",
                         cm->node_name, diag_format(&diag, buf, sizeof(buf)));
        } else {
                *value = xstrdup(node_label(resp.body, cm->node_label));
                keep_version(cm, resp.body);
        }
        kapi_response_release(&resp);
        return r;
}

/* Sleeps ms, or less once a stop signal came. */
static void pause_ms(long ms)
{
        for (long waited = 0; waited < ms && !atomic_load(&stop_flag); waited += 100)
                nanosleep(&(struct timespec){ 0, 100 * 1000000L }, NULL);
}

/* ---- following the label: an informer of the one Node, on a loop ---- */

struct follower {
        struct cm *cm;
        uv_loop_t loop;
        uv_signal_t sigterm, sigint;
        struct kapi_informer *inf;
        bool failing, missing_warned;
};

static void on_node(void *ud, enum kapi_informer_event ev, const char *key, const json_t *obj)
{
        struct follower *f = ud;
        struct cm *cm = f->cm;
        const char *v = ev == KAPI_INFORMER_DELETED ? "" : node_label(obj, cm->node_label);
        f->missing_warned = false;
        if (cm->applied && strcmp(cm->applied, v) == 0)
                return;
        if (cm->applied)
                log_info("config-manager", "label changed label=%s value=%s", cm->node_label, v);
        (void)apply_value(cm, v);
}

static void on_synced(void *ud)
{
        struct follower *f = ud;
        if (f->failing)
                log_info("config-manager", "watching the node again node=%s", f->cm->node_name);
        f->failing = false;
        if (json_object_size(kapi_informer_cache(f->inf)) == 0 && !f->missing_warned) {
                log_warn("config-manager", "cannot read the node node=%s error=\"no such Node\"",
                         f->cm->node_name);
                f->missing_warned = true;
        }
}

static void on_failed(void *ud, int r, const struct diag *why)
{
        struct follower *f = ud;
        char buf[DIAG_FORMAT_MAX];
        if (!f->failing)
                log_warn("config-manager", "watch ended error=\"%s\"",
                         why && why->message[0] ? diag_format(why, buf, sizeof(buf))
                                                : strerror(-r));
        f->failing = true;
}

static void on_signal(uv_signal_t *s, int signum)
{
        struct follower *f = s->data;
        log_info("config-manager", "stopping signal=%d", signum);
        kapi_informer_free(TAKE_PTR(f->inf));
        uv_close((uv_handle_t *)&f->sigterm, NULL);
        uv_close((uv_handle_t *)&f->sigint, NULL);
}

/* Follows the Node's label until SIGTERM or SIGINT: one informer
 * (kapi/informer.h: a streaming list of the one Node, then watches of 5 to
 * 10 minutes from its last resourceVersion; its backoff after a failure). */
static int follow(struct cm *cm)
{
        struct follower f = { .cm = cm };
        if (uv_loop_init(&f.loop) < 0)
                return 1;
        uv_signal_init(&f.loop, &f.sigterm);
        uv_signal_init(&f.loop, &f.sigint);
        f.sigterm.data = f.sigint.data = &f;
        uv_signal_start(&f.sigterm, on_signal, SIGTERM);
        uv_signal_start(&f.sigint, on_signal, SIGINT);
        _cleanup_free_ char *q = kapi_field_selector("metadata.name=%s", cm->node_name);
        const struct kapi_informer_config cfg = {
                .path = "/api/v1/nodes",
                .selector = q,
                .meta = "labels",
                .max_objects = 1,
        };
        const struct kapi_informer_ops ops = {
                .event = on_node,
                .synced = on_synced,
                .failed = on_failed,
        };
        struct diag diag = { 0 };
        int r = kapi_informer_start(&f.loop, cm->client, &cfg, &ops, &f, &f.inf, &diag);
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                log_error("config-manager", "cannot watch the node error=\"%s\"",
                          diag_format(&diag, buf, sizeof(buf)));
                on_signal(&f.sigterm, 0);
        }
        /* a stop that came before the loop's handlers did */
        if (atomic_load(&stop_flag) && f.inf)
                on_signal(&f.sigterm, SIGTERM);
        uv_run(&f.loop, UV_RUN_DEFAULT);
        uv_loop_close(&f.loop);
        return r < 0 ? 1 : 0;
}

int cmd_config_manager(int argc, char **argv)
{
        _cleanup_(cm_clear) struct cm cm;
        if (parse(&cm, argc, argv) < 0)
                return 1;
        struct sigaction sa = { .sa_handler = on_stop };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        struct kapi_config *kc = NULL;
        struct diag diag = { 0 };
        int r = kapi_config_load(cm.kubeconfig, NULL, &kc, &diag);
        if (r == 0)
                r = kapi_client_new(kc, &cm.client, &diag);
        if (r == 0)
                kapi_client_set_user_agent(cm.client, "config-manager");
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                fprintf(stderr, "Error: no API server: %s\n", diag_format(&diag, buf, sizeof(buf)));
                return 1;
        }
        log_info("config-manager", "starting node=%s label=%s srcdir=%s dst=%s oneshot=%s",
                 cm.node_name, cm.node_label, cm.srcdir, cm.dst, cm.oneshot ? "true" : "false");
        if (cm.oneshot) {
                _cleanup_free_ char *v = NULL;
                for (unsigned attempt = 0; !atomic_load(&stop_flag); attempt++) {
                        r = get_node(&cm, &v);
                        if (r == 0 || attempt >= 4)
                                break;
                        pause_ms(kapi_backoff_ms(attempt, 5000));
                }
                if (r < 0)
                        return 1;
                return apply_value(&cm, v) < 0 ? 1 : 0;
        }
        return follow(&cm);
}
