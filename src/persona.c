/* The vendors' command names (see persona.h).
 *
 * Each persona is a row: the names it answers to, the devlet command it
 * runs, its tool's defaults (as config_set_defaults items), and a table of
 * the flags only that tool has.  Translation walks the vendor's argument
 * list once: a flag in the persona's table is translated (kept, mapped to
 * devlet's spelling, noted as meaningless here, or refused), anything else
 * goes to devlet's own parser unchanged, which knows every flag the
 * vendors share with devlet (NVIDIA's plugin and GFD flags, AMD's -pulse
 * ...).  The vendors' tools parse with Go's flag package or urfave/cli, so
 * a flag may come with one dash or two, its value after '=' or as the next
 * argument, and a bool flag takes a value only after '='.
 *
 * A vendor-only env var in a table is read as its flag would be, before the
 * command line (which wins).  Pure but for getenv and reading AMD's
 * exporter config for its port; never logs (the notes are returned). */
#include "persona.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"

struct translation;

enum pf_kind {
        PF_MAP,    /* becomes --to=VALUE */
        PF_IGNORE, /* accepted; a note (why) when given */
        PF_REFUSE, /* exit 2 with why */
        PF_CALL,   /* call decides */
};

struct pflag {
        const char *names; /* '|'-separated: the long name, then aliases */
        const char *env;   /* the tool's env var, or NULL */
        bool is_bool;
        enum pf_kind kind;
        const char *to; /* PF_MAP: devlet's flag */
        const char *why;
        int (*call)(struct translation *t, const char *value, struct diag *diag);
};

struct persona {
        const char *name;
        const char *command;        /* devlet's command */
        const char *const *defaults; /* config_set_defaults items */
        const struct pflag *flags;   /* ended by a row without names */
        /* after the walk: the last word (the command, extra flags); may be NULL */
        int (*finish)(struct translation *t, struct diag *diag);
};

struct translation {
        const struct persona *p;
        const char *command;
        char **head;  /* flags from env vars: before the command line's */
        char **args;  /* the command line's, in order */
        char **notes;
        bool from_env;   /* the value being translated came from an env var */
        /* gpu-feature-discovery */
        bool oneshot;
};

/* ---- helpers ---- */

static bool name_in(const char *names, const char *name, size_t len)
{
        for (const char *p = names; *p;) {
                const char *bar = strchr(p, '|');
                size_t n = bar ? (size_t)(bar - p) : strlen(p);
                if (n == len && strncmp(p, name, len) == 0)
                        return true;
                if (!bar)
                        break;
                p = bar + 1;
        }
        return false;
}

static size_t first_name_len(const char *names)
{
        const char *bar = strchr(names, '|');
        return bar ? (size_t)(bar - names) : strlen(names);
}

/* Go's strconv.ParseBool, which urfave/cli and flag use: 1 true, 0 false,
 * -1 neither. */
static int go_bool(const char *v)
{
        static const char *const yes[] = { "1", "t", "T", "TRUE", "true", "True" };
        static const char *const no[] = { "0", "f", "F", "FALSE", "false", "False" };
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                if (strcmp(v, yes[i]) == 0)
                        return 1;
                if (strcmp(v, no[i]) == 0)
                        return 0;
        }
        return -1;
}

static void add(struct translation *t, char *arg)
{
        char ***to = t->from_env ? &t->head : &t->args;
        *to = strv_push(*to, arg);
        free(arg);
}

static void note(struct translation *t, const struct pflag *f)
{
        /* one note per reason: AMD's labeller passes a dozen group flags */
        size_t wl = strlen(f->why);
        for (size_t i = 0; t->notes && t->notes[i]; i++) {
                size_t l = strlen(t->notes[i]);
                if (l > wl && strcmp(t->notes[i] + l - wl, f->why) == 0)
                        return;
        }
        char *line = xasprintf("%s: %.*s accepted and ignored: %s", t->p->name,
                               (int)first_name_len(f->names), f->names, f->why);
        t->notes = strv_push(t->notes, line);
        free(line);
}

static int bool_value(const struct pflag *f, const char *value, bool *out, struct diag *diag)
{
        int b = go_bool(value);
        if (b < 0)
                return diag_set(diag, -EINVAL, "invalid boolean value \"%s\" for flag %.*s", value,
                                (int)first_name_len(f->names), f->names);
        *out = b;
        return 0;
}

/* One flag of the persona's table with its value (bool flags: "true" when
 * given bare). */
static int apply(struct translation *t, const struct pflag *f, const char *value,
                 struct diag *diag)
{
        switch (f->kind) {
        case PF_MAP:
                add(t, xasprintf("--%s=%s", f->to, value));
                return 0;
        case PF_IGNORE:
                if (f->why)
                        note(t, f);
                return 0;
        case PF_REFUSE:
                return diag_set(diag, -EINVAL, "flag %.*s is not supported: %s",
                                (int)first_name_len(f->names), f->names, f->why);
        case PF_CALL:
                return f->call(t, value, diag);
        }
        return 0;
}

/* ---- NVIDIA's dcgm-exporter ---- */


static int dcgm_no_hostname(struct translation *t, const char *value, struct diag *diag)
{
        static const struct pflag self = { .names = "no-hostname" };
        bool b;
        int r = bool_value(&self, value, &b, diag);
        if (r == 0 && b)
                add(t, xstrdup("--hostname-label=none"));
        return r;
}

static int dcgm_old_namespace(struct translation *t, const char *value, struct diag *diag)
{
        static const struct pflag self = { .names = "use-old-namespace" };
        bool b;
        int r = bool_value(&self, value, &b, diag);
        if (r == 0 && b)
                return diag_set(diag, -EINVAL,
                                "--use-old-namespace is not supported: devlet "
                                "exports dcgm-exporter 2.x's names (DCGM_FI_*), not 1.x's dcgm_*");
        return r;
}

static int dcgm_debug(struct translation *t, const char *value, struct diag *diag)
{
        static const struct pflag self = { .names = "debug" };
        bool b;
        int r = bool_value(&self, value, &b, diag);
        if (r == 0 && b)
                add(t, xstrdup("--verbosity=1"));
        return r;
}

static int dcgm_devices(struct translation *t, const char *value, struct diag *diag)
{
        static const struct pflag self = {
                .names = "devices",
                .why = "devlet exports every GPU and, on a GPU in MIG mode, each MIG device "
                       "(dcgm-exporter's \"f\")",
        };
        if (strcmp(value, "f") != 0)
                note(t, &self);
        return 0;
}


#define NOTHING_HERE(n, e, b, w) { .names = n, .env = e, .is_bool = b, .kind = PF_IGNORE, .why = w }

static const struct pflag dcgm_flags[] = {
        { .names = "address|a", .env = "DCGM_EXPORTER_LISTEN", .kind = PF_MAP,
          .to = "metrics-address" },
        { .names = "collect-interval|c", .env = "DCGM_EXPORTER_INTERVAL", .kind = PF_MAP,
          .to = "collect-interval" },
        { .names = "kubernetes|k", .env = "DCGM_EXPORTER_KUBERNETES", .is_bool = true,
          .kind = PF_MAP, .to = "kubernetes" },
        { .names = "use-old-namespace|o", .env = "DCGM_EXPORTER_USE_OLD_NAMESPACE",
          .is_bool = true, .kind = PF_CALL, .call = dcgm_old_namespace },
        { .names = "no-hostname|n", .env = "DCGM_EXPORTER_NO_HOSTNAME", .is_bool = true,
          .kind = PF_CALL, .call = dcgm_no_hostname },
        { .names = "devices|d", .env = "DCGM_EXPORTER_DEVICES_STR", .kind = PF_CALL,
          .call = dcgm_devices },
        { .names = "debug", .env = "DCGM_EXPORTER_DEBUG", .is_bool = true, .kind = PF_CALL,
          .call = dcgm_debug },
        { .names = "pod-resources-kubelet-socket", .env = "DCGM_POD_RESOURCES_KUBELET_SOCKET",
          .kind = PF_MAP, .to = "pod-resources-socket" },
        NOTHING_HERE("remote-hostengine-info|r", "DCGM_REMOTE_HOSTENGINE_INFO", false,
                     "devlet reads NVML itself; there is no DCGM host engine"),
        NOTHING_HERE("cpu-devices|p", "DCGM_EXPORTER_CPU_DEVICES_STR", false,
                     "NVML gives no CPU metrics"),
        NOTHING_HERE("switch-devices|s", "DCGM_EXPORTER_OTHER_DEVICES_STR", false,
                     "NVML gives no NVSwitch metrics on this node's GPUs"),
        NOTHING_HERE("fake-gpus", "DCGM_EXPORTER_USE_FAKE_GPUS", true,
                     "devlet serves the GPUs NVML reports"),
        NOTHING_HERE("configmap-data|m", "DCGM_EXPORTER_CONFIGMAP_DATA", false,
                     "devlet reads the fields from the --collectors file only; mount the "
                     "ConfigMap and pass -f"),
        NOTHING_HERE("config-file", "DCGM_EXPORTER_CONFIG_FILE", false,
                     "devlet does not read dcgm-exporter's YAML config; give its settings as "
                     "flags or env vars"),
        NOTHING_HERE("web-systemd-socket", NULL, true, "devlet listens on --address itself"),
        NOTHING_HERE("web-read-timeout", "DCGM_EXPORTER_WEB_READ_TIMEOUT", false,
                     "devlet's server has its own bounded timeouts"),
        NOTHING_HERE("web-write-timeout", "DCGM_EXPORTER_WEB_WRITE_TIMEOUT", false,
                     "devlet's server has its own bounded timeouts"),
        NOTHING_HERE("enable-dcgm-log", "DCGM_EXPORTER_ENABLE_DCGM_LOG", true,
                     "there is no DCGM library to log"),
        NOTHING_HERE("dcgm-log-level", "DCGM_EXPORTER_DCGM_LOG_LEVEL", false,
                     "there is no DCGM library to log"),
        NOTHING_HERE("kubernetes-gpu-id-type", "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", false,
                     "devlet matches the kubelet's device IDs in every form (UUIDs, MIG "
                     "UUIDs, replica IDs)"),
        NOTHING_HERE("nvidia-resource-names", "NVIDIA_RESOURCE_NAMES", false,
                     "devlet attributes every resource whose devices it knows"),
        { .names = "kubernetes-enable-pod-labels", .env = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS",
          .is_bool = true, .kind = PF_MAP, .to = "kubernetes-enable-pod-labels" },
        NOTHING_HERE("kubernetes-enable-pod-uid", "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID", true,
                     "the pod UID label is not exported"),
        NOTHING_HERE("kubernetes-pod-label-allowlist-regex",
                     "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", false,
                     "pod labels in metrics are not exported"),
        NOTHING_HERE("kubernetes-enable-dra", "KUBERNETES_ENABLE_DRA", true,
                     "devlet attributes what the pod-resources API reports"),
        NOTHING_HERE("hpc-job-mapping-dir", "DCGM_HPC_JOB_MAPPING_DIR", false,
                     "HPC job mapping is not done"),
        NOTHING_HERE("container-labels", "DCGM_EXPORTER_CONTAINER_LABELS", true,
                     "runtime container labels are not exported"),
        NOTHING_HERE("container-runtime-socket", "DCGM_CONTAINER_RUNTIME_SOCKET", false,
                     "devlet reads the runtimes' state directories (--container-state-dirs)"),
        NOTHING_HERE("replace-blanks-in-model-name|rbmn",
                     "DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME", true,
                     "the modelName label keeps NVML's name"),
        NOTHING_HERE("xid-count-window-size|x", "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", false,
                     "DCGM_EXP_XID_ERRORS_COUNT's window is dcgm-exporter's default, 5 minutes"),
        NOTHING_HERE("clock-events-count-window-size",
                     "DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE", false,
                     "DCGM_EXP_CLOCK_EVENTS_COUNT's window is dcgm-exporter's default, 5 minutes"),
        NOTHING_HERE("dump-enabled", "DCGM_EXPORTER_DUMP_ENABLED", true, "no debug dumps"),
        NOTHING_HERE("dump-directory", "DCGM_EXPORTER_DUMP_DIRECTORY", false, "no debug dumps"),
        NOTHING_HERE("dump-retention", "DCGM_EXPORTER_DUMP_RETENTION", false, "no debug dumps"),
        NOTHING_HERE("dump-compression", "DCGM_EXPORTER_DUMP_COMPRESSION", true,
                     "no debug dumps"),
        NOTHING_HERE("disable-startup-validate", "DCGM_EXPORTER_DISABLE_STARTUP_VALIDATE", true,
                     NULL),
        NOTHING_HERE("enable-gpu-bind-unbind-watch", "DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH",
                     true, "devlet rescans for GPUs itself (--rescan-interval)"),
        NOTHING_HERE("gpu-bind-unbind-poll-interval",
                     "DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL", false,
                     "devlet rescans for GPUs itself (--rescan-interval)"),
        NOTHING_HERE("enable-pprof", "DCGM_EXPORTER_ENABLE_PPROF", true, "no Go profiler here"),
        { 0 },
};

/* -k is off by default: no pod labels unless asked */
static const char *const dcgm_defaults[] = { "serve=metrics", "backends=nvidia", "kubernetes=false",
                                              NULL };

/* ---- NVIDIA's gpu-feature-discovery ---- */

static int gfd_oneshot(struct translation *t, const char *value, struct diag *diag)
{
        static const struct pflag self = { .names = "oneshot" };
        int r = bool_value(&self, value, &t->oneshot, diag);
        if (r == 0)
                add(t, xasprintf("--oneshot=%s", t->oneshot ? "true" : "false"));
        return r;
}

static int gfd_finish(struct translation *t, struct diag *diag)
{
        /* GFD labels once with --oneshot (`devlet labels`), else keeps the
         * file current (`devlet run`, labels only) */
        t->command = t->oneshot ? "labels" : "run";
        return 0;
}

static const struct pflag gfd_flags[] = {
        { .names = "oneshot", .env = "GFD_ONESHOT", .is_bool = true, .kind = PF_CALL,
          .call = gfd_oneshot },
        NOTHING_HERE("imex-nodes-config-file", "GFD_IMEX_NODES_CONFIG_FILE", false, NULL),
        { 0 },
};

static const char *const gfd_defaults[] = {
        "serve=labels", "backends=nvidia", "oneshot=false",
        "output-file=/etc/kubernetes/node-feature-discovery/features.d/gfd", NULL
};

/* ---- NVIDIA's device plugin, MPS daemon and config manager ---- */

static const char *const nvidia_plugin_defaults[] = { "serve=plugin", "backends=nvidia",
                                                      "log-format=klog", NULL };

static const struct pflag no_flags[] = { { 0 } };

/* NVIDIA's chart runs `mps-control-daemon mount-shm` as an init container;
 * devlet's sidecar mounts the shm tmpfs itself when its daemons start. */
static int mps_finish(struct translation *t, struct diag *diag)
{
        if (t->args && strcmp(t->args[0], "mount-shm") == 0) {
                t->command = "mps-mount-shm";
                strv_free(t->args);
                t->args = NULL;
        }
        return 0;
}

/* ---- AMD's tools: glog's flags, then each tool's ---- */

#define GLOG_FLAGS                                                                                \
        NOTHING_HERE("logtostderr", NULL, true, NULL),                                          \
                NOTHING_HERE("alsologtostderr", NULL, true, NULL),                              \
                NOTHING_HERE("stderrthreshold", NULL, false, NULL),                             \
                NOTHING_HERE("log_dir", NULL, false, "devlet logs to standard error only"),     \
                NOTHING_HERE("log_file", NULL, false, "devlet logs to standard error only"),    \
                NOTHING_HERE("log_file_max_size", NULL, false, NULL),                           \
                NOTHING_HERE("log_link", NULL, false, NULL),                                    \
                NOTHING_HERE("log_backtrace_at", NULL, false, NULL),                            \
                NOTHING_HERE("logbuflevel", NULL, false, NULL),                                 \
                NOTHING_HERE("one_output", NULL, true, NULL),                                   \
                NOTHING_HERE("skip_headers", NULL, true, NULL),                                 \
                NOTHING_HERE("skip_log_headers", NULL, true, NULL),                             \
                NOTHING_HERE("add_dir_header", NULL, true, NULL),                               \
                NOTHING_HERE("vmodule", NULL, false,                                            \
                             "devlet's verbosity is one level (--verbosity)"),                  \
                NOTHING_HERE("v", NULL, false,                                                  \
                             "glog's level; devlet's verbosity is --verbosity (0-2)")

static int amd_driver_type(struct translation *t, const char *value, struct diag *diag)
{
        if (!value[0] || strcmp(value, "container") == 0)
                return 0;
        return diag_set(diag, -EINVAL,
                        "-driver_type=%s is not supported: devlet serves GPUs "
                        "to containers only (container); VFIO passthrough to virtual machines "
                        "is not done",
                        value);
}

static const struct pflag amd_plugin_flags[] = {
        GLOG_FLAGS,
        { .names = "driver_type|driver-type", .env = NULL, .kind = PF_CALL,
          .call = amd_driver_type },
        NOTHING_HERE("kubelet-url|kubelet_url", NULL, false,
                     "devlet talks to the kubelet through its sockets only"),
        { 0 },
};

static const char *const amd_plugin_defaults[] = { "serve=plugin", "backends=amd",
                                                   "log-format=klog", NULL };

/* The label group flags (-vram, -cu-count, ...) are the AMD family's own
 * (--amd-label-<group>, with AMD's spellings as aliases).  AMD's manifest
 * gives the node's name as DS_NODE_NAME. */
static const struct pflag amd_labeller_flags[] = {
        GLOG_FLAGS,
        { .names = "ds-node-name", .env = "DS_NODE_NAME", .kind = PF_MAP, .to = "node-name" },
        { 0 },
};

/* AMD's labeller patches the Node's labels through the API server */
static const char *const amd_labeller_defaults[] = { "serve=labels", "backends=amd",
                                                     "labels-output=node", "log-format=klog",
                                                     NULL };

/* -amd-metrics-config: AMD's exporter config, devlet's --amd-metrics-config
 * (the AMD family reads the rest of it, and again when it changes); its
 * ServerPort is the port, read here once at start, through base/fs's
 * reader (a FIFO there must not hang the start), at most as much as the
 * family reads. */
#define AMD_EXPORTER_CONFIG_MAX (1024 * 1024)
static int amd_exporter_port(struct translation *t, const char *value, struct diag *diag)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = fs_read_file(value, AMD_EXPORTER_CONFIG_MAX, &text, &len);
        if (r == -ENOENT)
                return 0; /* AMD's exporter runs without the file, on its defaults */
        if (r < 0)
                return diag_set_at(diag, r, value, 0, 0, "AMD metrics exporter config: %s",
                                   r == -EFBIG ? "larger than 1 MiB" : fs_strerror(r));
        json_error_t err;
        json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
        if (!root)
                return diag_set_at(diag, -EINVAL, value, err.line, err.column,
                                   "AMD metrics exporter config: %s", err.text);
        json_t *port = json_is_object(root) ? json_object_get(root, "ServerPort") : NULL;
        r = 0;
        if (port && (!json_is_integer(port) || json_integer_value(port) < 0 ||
                     json_integer_value(port) > 65535))
                r = diag_set_at(diag, -EINVAL, value, 0, 0,
                                "AMD metrics exporter config: ServerPort must be a port number");
        else if (port && json_integer_value(port) > 0)
                add(t, xasprintf("--metrics-address=:%lld", (long long)json_integer_value(port)));
        json_decref(root);
        return r;
}

static int amd_exporter_config(struct translation *t, const char *value, struct diag *diag)
{
        add(t, xasprintf("--amd-metrics-config=%s", value));
        return amd_exporter_port(t, value, diag);
}

static const struct pflag amd_exporter_flags[] = {
        GLOG_FLAGS,
        { .names = "amd-metrics-config", .kind = PF_CALL, .call = amd_exporter_config },
        NOTHING_HERE("agent-grpc-port", NULL, false, "devlet has no gRPC metrics agent"),
        { 0 },
};

static const char *const amd_exporter_defaults[] = {
        "serve=metrics", "backends=amd", "metrics-address=:5000", "hostname-label=hostname",
        "log-format=klog", "amd-metrics-config=/etc/metrics/config.json", NULL
};

static int amd_exporter_finish(struct translation *t, struct diag *diag)
{
        /* AMD's exporter reads /etc/metrics/config.json when it is there */
        static const char path[] = "/etc/metrics/config.json";
        bool given = false;
        for (size_t i = 0; t->args && t->args[i]; i++)
                given = given || strncmp(t->args[i], "--metrics-address=", 18) == 0 ||
                        strncmp(t->args[i], "--amd-metrics-config=", 21) == 0;
        if (!given && access(path, F_OK) == 0) {
                char **saved = t->args;
                t->args = NULL;
                int r = amd_exporter_port(t, path, diag);
                /* the file's port goes below the command line's */
                for (size_t i = 0; t->args && t->args[i]; i++)
                        t->head = strv_push(t->head, t->args[i]);
                strv_free(t->args);
                t->args = saved;
                return r;
        }
        return 0;
}

/* ---- the table ---- */

static const struct persona personas[] = {
        { "nvidia-device-plugin", "run", nvidia_plugin_defaults, no_flags, NULL },
        { "gpu-feature-discovery", "run", gfd_defaults, gfd_flags, gfd_finish },
        { "dcgm-exporter", "run", dcgm_defaults, dcgm_flags, NULL },
        { "mps-control-daemon", "mps-control-daemon", NULL, no_flags, mps_finish },
        { "config-manager", "config-manager", NULL, no_flags, NULL },
        { "k8s-device-plugin", "run", amd_plugin_defaults, amd_plugin_flags, NULL },
        { "k8s-node-labeller", "run", amd_labeller_defaults, amd_labeller_flags, NULL },
        { "amd-metrics-exporter", "run", amd_exporter_defaults, amd_exporter_flags,
          amd_exporter_finish },
};

const char *const persona_names[] = {
        "nvidia-device-plugin", "gpu-feature-discovery", "dcgm-exporter",
        "mps-control-daemon",   "config-manager",        "k8s-device-plugin",
        "k8s-node-labeller",    "amd-metrics-exporter",  NULL,
};

static const struct persona *find(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(personas); i++)
                if (strcmp(personas[i].name, name) == 0)
                        return &personas[i];
        return NULL;
}

const char *persona_of(const char *argv0)
{
        if (!argv0)
                return NULL;
        const char *base = strrchr(argv0, '/');
        base = base ? base + 1 : argv0;
        const struct persona *p = find(base);
        return p ? p->name : NULL;
}

static const struct pflag *lookup(const struct persona *p, const char *name, size_t len)
{
        for (const struct pflag *f = p->flags; f && f->names; f++)
                if (name_in(f->names, name, len))
                        return f;
        return NULL;
}

void persona_run_clear(struct persona_run *r)
{
        strv_free(r->argv);
        strv_free(r->notes);
        *r = (struct persona_run){ 0 };
}

int persona_translate(const char *name, int argc, char **argv, struct persona_run *out,
                      struct diag *diag)
{
        const struct persona *p = find(name);
        if (!p)
                return diag_set(diag, -EINVAL, "unknown command name %s", name);
        struct translation t = { .p = p, .command = p->command };
        int r = 0;

        /* the tool's own env vars, below its command line */
        t.from_env = true;
        for (const struct pflag *f = p->flags; f && f->names && r == 0; f++) {
                const char *v = f->env ? getenv(f->env) : NULL;
                if (v && v[0])
                        r = apply(&t, f, v, diag);
        }
        t.from_env = false;

        int i;
        for (i = 1; i < argc && r == 0; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--") == 0)
                        break; /* the rest is devlet's */
                if (a[0] != '-' || !a[1]) {
                        /* an operand, or the value of one of devlet's flags
                         * (-f FILE): devlet's parser sorts them out */
                        t.args = strv_push(t.args, a);
                        continue;
                }
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ||
                    strcmp(a, "-help") == 0) {
                        printf("%s is devlet %s answering as %s: its flags and env vars are "
                               "accepted as that tool takes them.\n`devlet help flags` lists "
                               "devlet's own; docs/MIGRATION.md maps each vendor flag.\n",
                               p->name, DEVLET_VERSION, p->name);
                        r = 1;
                        break;
                }
                if (strcmp(a, "--version") == 0 || strcmp(a, "-version") == 0) {
                        printf("%s (devlet %s)\n", p->name, DEVLET_VERSION);
                        r = 1;
                        break;
                }
                const char *nm = a + (a[1] == '-' ? 2 : 1);
                const char *eq = strchr(nm, '=');
                size_t len = eq ? (size_t)(eq - nm) : strlen(nm);
                const struct pflag *f = lookup(p, nm, len);
                if (!f) {
                        /* devlet's own parser knows it, or says it does not */
                        t.args = strv_push(t.args, a);
                        continue;
                }
                const char *value;
                if (eq)
                        value = eq + 1;
                else if (f->is_bool)
                        value = "true";
                else if (i + 1 < argc)
                        value = argv[++i];
                else {
                        r = diag_set(diag, -EINVAL, "flag %s needs a value", a);
                        break;
                }
                r = apply(&t, f, value, diag);
        }
        /* operands, or what follows "--", are the command's */
        for (; i < argc && r == 0; i++)
                t.args = strv_push(t.args, argv[i]);
        if (r == 0 && p->finish)
                r = p->finish(&t, diag);

        if (r == 0) {
                char **v = strv_push(NULL, t.command);
                for (size_t k = 0; t.head && t.head[k]; k++)
                        v = strv_push(v, t.head[k]);
                for (size_t k = 0; t.args && t.args[k]; k++)
                        v = strv_push(v, t.args[k]);
                *out = (struct persona_run){
                        .persona = p->name,
                        .argv = v,
                        .argc = (int)strv_len(v),
                        .defaults = p->defaults,
                        .notes = TAKE_PTR(t.notes),
                };
        }
        strv_free(t.head);
        strv_free(t.args);
        strv_free(t.notes);
        return r;
}
