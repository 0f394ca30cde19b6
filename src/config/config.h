/* devlet's configuration: one table of options, each settable by flag, env
 * var and config-file key (flags > env > file > default), plus the structured
 * sections of the config file (NVIDIA's sharing, devlet's hostDevices and
 * health; a family's own, such as NVIDIA's resources, come with the
 * family).
 *
 * The config file is NVIDIA's `version: v1` format extended with devlet's own
 * sections; unknown keys are kept as warnings (with file:line:column), never
 * errors, so NVIDIA's files stay accepted.  Errors carry their position. */
#ifndef DEVLET_CONFIG_CONFIG_H
#define DEVLET_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/diag.h"

/* ---- hostDevices section ---- */

enum hostdev_path_type {
        HOSTDEV_PATH_DEVICE = 0, /* a device node: DeviceSpec */
        HOSTDEV_PATH_MOUNT = 1,  /* any file or socket: bind Mount */
};

struct hostdev_path_cfg {
        char *path;         /* absolute; may contain glob characters */
        char *mount_path;   /* absolute; NULL = same as the matched path */
        char permissions[4]; /* subset of "rwm", default "rw" */
        enum hostdev_path_type type;
        bool read_only;     /* Mount only */
        bool optional;      /* a missing optional path does not make the device unhealthy */
};

struct hostdev_usb_cfg {
        char *vendor;  /* 4 hex digits, lower case */
        char *product; /* 4 hex digits, lower case */
        char *serial;  /* NULL = any */
};

/* the one bound on a group's count, checked by the config module only: the
 * backend trusts a loaded config */
#define HOSTDEV_COUNT_MAX 65536

struct hostdev_group_cfg {
        unsigned count; /* containers that may hold one instance at once; 1..HOSTDEV_COUNT_MAX */
        struct hostdev_path_cfg *paths;
        size_t n_paths;
        struct hostdev_usb_cfg *usb;
        size_t n_usb;
};

struct hostdev_device_cfg {
        char *name; /* resource = <domain>/<name> */
        struct hostdev_group_cfg *groups;
        size_t n_groups;
};

struct hostdev_cfg {
        char *domain; /* default "devlet.io" */
        struct hostdev_device_cfg *devices;
        size_t n_devices;
};

/* ---- sharing section (time-slicing and MPS replicas) ---- */

enum sharing_strategy { SHARING_NONE, SHARING_TIME_SLICING, SHARING_MPS };
enum sharing_devices_kind { SHARING_DEVICES_ALL, SHARING_DEVICES_COUNT, SHARING_DEVICES_LIST };

struct sharing_resource_cfg {
        char *name;   /* resource name as served before sharing, "<domain>/<name>" of
                       * the family whose rules (config_sharing_rules) claim it */
        char *rename; /* NULL: served as name; set to name + ".shared" by the parser when
                       * renameByDefault is on and no rename was given */
        unsigned replicas;                 /* 2 to 1024 */
        enum sharing_devices_kind devices_kind;
        unsigned devices_count;            /* SHARING_DEVICES_COUNT: the first N devices, >= 1 */
        char **devices;                    /* SHARING_DEVICES_LIST: strv of device selectors
                                            * in the family's canonical form (its rules'
                                            * device()): NVIDIA's GPU and MIG indices and
                                            * UUIDs, AMD's indices and device IDs */
};

struct sharing_cfg {
        enum sharing_strategy strategy; /* SHARING_NONE: no resources, nothing else set */
        bool rename_by_default;
        bool fail_requests_greater_than_one;
        struct sharing_resource_cfg *resources;
        size_t n_resources; /* >= 1 unless SHARING_NONE; names are distinct, and so are the
                             * names served (rename, else name) */
};

/* The name a shared resource is served under: rename, else name. */
const char *config_sharing_served_name(const struct sharing_resource_cfg *r);

/* ---- health section (devlet's own) ---- */

struct health_cfg {
        bool recovery_enabled;     /* health.recovery.enabled, default false */
        int64_t recovery_quiet_ms; /* health.recovery.quietPeriod, default 60s: an unhealthy
                                    * GPU comes back after this long without new critical
                                    * events, once NVML answers for it again; >= 0 */
};

/* ---- the whole configuration ---- */

/* Every string is non-NULL ("" when empty); lists are NULL-terminated
 * string vectors with at least one item, except those whose default is
 * empty (they may be empty). */
struct config_families;
#define CONFIG_FAMILIES_MAX 8 /* device families in one table */

struct devlet_config {
        /* core */
        char *config_file;      /* --config-file, CONFIG_FILE */
        char *plugin_directory; /* --plugin-directory, default /var/lib/kubelet/device-plugins */
        char *kubelet_socket;   /* --kubelet-socket; "" = <plugin_directory>/kubelet.sock,
                                 * which config_load fills in */
        long verbosity;         /* -v N */
        char *log_format;       /* --log-format text|json|klog (log_format_from_name) */
        char **backends;        /* --backends auto or family names (config_families.choices) */
        char **serve;           /* --serve: plugin, labels, metrics (config_serves) */
        char *sysfs_root;       /* --sysfs-root, default /sys (tests point it at a fake tree) */
        char *dev_root;         /* --dev-root; "": each family's default (config_host_dev_root) */
        int64_t rescan_interval_ms; /* --rescan-interval, hot-plug fallback rescan; -1 = never */

        /* NVIDIA's device plugin flags that every family honours (those
         * only NVIDIA GPUs mean are the nvidia family's options) */
        bool fail_on_init_error;     /* a family that cannot start fails start-up */
        bool pass_device_specs;      /* device nodes in Allocate responses */
        char **device_list_strategy; /* envvar, volume-mounts, cdi-annotations, cdi-cri */
        char *cdi_annotation_prefix;
        char *shared_devices_allocation_policy; /* distributed|packed */

        /* CDI, metrics and attribution */
        char *cdi_spec_dir;           /* --cdi-spec-dir, default /var/run/cdi */
        char *metrics_address;        /* --metrics-address, default ":9400"; "" = no metrics */
        long collect_interval_ms;     /* --collect-interval, milliseconds, >= 100 */
        char *hostname_label;         /* Hostname|hostname: the metrics label naming the node */
        bool kubernetes;              /* attribute series to pods (dcgm-exporter's -k) */
        char *pod_resources_socket;   /* the kubelet's pod-resources socket */
        char **container_state_dirs;  /* where runtimes keep container state (OCI specs) */
        bool kubernetes_virtual_gpus; /* dcgm-exporter's per-pod series of shared devices */
        bool kubernetes_enable_pod_labels; /* the pod's labels on its devices' series */
        char *collectors_file;        /* dcgm-exporter's counters CSV: the families to export */
        char **collectors;            /* the families that file selects (strv, loaded with the
                                       * config); NULL: no file, export every family */
        char *web_config_file;        /* --web-config-file: exporter-toolkit's web config */
        char **web_config_text;       /* that file's text as one item (what a reload compares);
                                       * NULL: no file */
        struct config_web *web;       /* that file parsed (config/web.h); NULL: no file */

        /* feature-discovery labels (GFD's flags) */
        bool labels_oneshot;              /* --oneshot: `devlet labels` labels once and exits */
        bool labels_no_timestamp;         /* --no-timestamp */
        int64_t labels_sleep_interval_ms; /* --sleep-interval, default 60s; -1 = infinite */
        int64_t labels_resync_interval_ms; /* --labels-resync-interval, default 30m; -1 = never */
        char *labels_output_file;         /* --output-file; "" = LABELS_DEFAULT_OUTPUT_FILE
                                           * (`devlet labels`: standard output); "-" = stdout */
        char *machine_type_file;          /* --machine-type-file */
        bool labels_remove_on_exit;       /* --remove-on-exit: delete the file when stopping */
        char *labels_output;              /* --labels-output: auto|features.d|node-feature|node
                                           * (labels_output_mode() decides auto) */
        bool labels_use_node_feature_api; /* --use-node-feature-api: auto means node-feature */
        char *labels_namespace;           /* --namespace: the NodeFeature object's */

        /* Dynamic Resource Allocation */
        char **dra_resources;        /* PATTERN[=dra|both|device-plugin] items, the last match wins */
        char *kubeconfig;            /* "" = in-cluster service account */
        char *kube_api_qps;          /* --kube-api-qps as given (a number; see below) */
        long kube_api_burst;         /* --kube-api-burst */
        char *node_name;             /* "" = the host name */
        char *kubelet_registry_dir;  /* the kubelet's plugins_registry */
        char *kubelet_plugins_dir;   /* <dir>/<driver>/dra.sock and checkpoint */
        bool dra_cleanup;            /* delete our ResourceSlices on the way out */

        /* derived by config_load, not options */
        bool kubelet_disabled;  /* --kubelet-socket "" given: serve, never register */
        double kube_api_qps_value; /* --kube-api-qps read (kapi_client_set_rate's qps) */

        /* sections */
        struct hostdev_cfg hostdev;
        struct sharing_cfg sharing;
        struct health_cfg health;
        /* the device families the config was made with (their rows,
         * sections and sharing rules), and by their index there: the
         * values of each family's section (NULL: not in the file; read
         * with config_backend_section()) and of its options (a zeroed
         * block of the set's size, holding the defaults at least; NULL for
         * a family without options; read with config_backend_options()) */
        const struct config_families *families;
        void *backend_sections[CONFIG_FAMILIES_MAX];
        void *backend_options[CONFIG_FAMILIES_MAX];

        /* warnings found while loading (unknown keys...), formatted with
         * their position; the caller logs them */
        char **warnings;
};

/* Config files larger than this are refused. */
#define CONFIG_FILE_MAX (1024 * 1024)

enum config_type {
        CONFIG_STRING,
        CONFIG_BOOL,
        CONFIG_INT,
        CONFIG_LIST,     /* comma-separated on the command line, list or string in YAML */
        CONFIG_DURATION, /* "500ms", "5s", "2m", "1h", a bare number of seconds, or "infinite" (-1) */
};

/* What a change of an option or a section needs in a running `devlet
 * run`, as bit flags; every row carries at least one.  A reload compares
 * the running config with the new one (config_diff) and derives what it
 * does from the union of the changed rows' flags. */
enum config_apply {
        CONFIG_APPLY_NONE = 1u << 0,    /* nothing: read where it is used, or set again by
                                         * every reload (the log verbosity and format) */
        CONFIG_APPLY_RESERVE = 1u << 1, /* the backends rebuilt from a fresh scan, their
                                         * resources served again */
        CONFIG_APPLY_SOCKETS = 1u << 2, /* new plugin servers on new sockets, registered again */
        CONFIG_APPLY_METRICS = 1u << 3, /* metrics restarted */
        CONFIG_APPLY_OUTPUTS = 1u << 4, /* the labels file and the CDI specs written again */
        CONFIG_APPLY_RESTART = 1u << 5, /* only a new process applies it (an option without a
                                         * config-file key: a reload never sees it change);
                                         * a reload that does keeps the running value */
};
#define CONFIG_APPLY_ALL ((1u << 6) - 1)

struct config_option {
        const char *flag;         /* long flag without "--" */
        char short_flag;          /* 0 for none */
        const char *alias;        /* second long flag name (NVIDIA's older name), or NULL */
        const char *envs[3];      /* env var names, first wins; NULL-terminated */
        const char *key;          /* dotted config-file key ("flags.migStrategy") or NULL */
        const char *key_alias;    /* a second key (NVIDIA's spelling), or NULL */
        enum config_type type;
        const char *default_value;
        size_t offset;            /* into struct devlet_config, or into the values of
                                   * the family's option set that holds the row */
        const char *const *choices; /* allowed values (each list item for CONFIG_LIST),
                                     * NULL-terminated; NULL = any */
        long min, max;            /* CONFIG_INT bounds, inclusive; max 0 = no upper bound */
        const char *help;
        unsigned apply;           /* what a change needs: CONFIG_APPLY_* flags, never 0 */
        size_t loaded;            /* for an option naming a file config_load reads: the
                                   * offset (in the same struct as offset) of the string
                                   * vector read from it, compared as part of the option's
                                   * value; 0: none */
};

/* ---- what device families bring to config/ ----
 *
 * config/ names no family: each brings its rows, its section and its
 * sharing rules in a struct config_family defined in its own folder, and
 * the caller hands config_load (or config_new_defaults) the table of them,
 * which devices/ builds from its backend table (dev_config_families()); a
 * test may hand in a table of its own. */

/* The options a family adds: rows of the same shape as devlet's own
 * (flag, alias, env vars, config key, type, default, choices, help),
 * whose offsets point into the family's own struct of size bytes, which
 * every config holds (config_backend_options).  They are parsed, listed in
 * the help, dumped and reported exactly as devlet's own options, with the
 * same precedence (flags > env > file > default).  finish (may be NULL)
 * runs once config_load has applied every source: it may fill members of
 * values that no row sets (decisions taken from the options), add
 * warnings to *warnings, or refuse the configuration with -EINVAL and diag
 * set (start-up then exits 2).  It never logs and never touches the
 * filesystem. */
struct config_option_set {
        const struct config_option *options;
        size_t n_options;
        size_t size; /* of the family's values struct */
        int (*finish)(const struct devlet_config *cfg, void *values, char ***warnings,
                      struct diag *diag);
        /* load (may be NULL) runs after every finish: the one hook that may
         * read the filesystem, for the files the family's options name (a
         * row's `loaded` vector, which a reload compares and config_free
         * frees, holds what it read).  Warnings and refusals as finish. */
        int (*load)(const struct devlet_config *cfg, void *values, char ***warnings,
                    struct diag *diag);
};

struct config_section; /* config/sections.h */

/* What a family lets the sharing section name, and how its devices are
 * selected there (sharing.<strategy>.resources[].devices); the family's
 * backend matches the canonical selectors against its devices.  Every
 * function returns 0, or -EINVAL with diag set to the message after
 * the node's path; none logs. */
struct config_sharing_rules {
        const char *domain; /* "nvidia.com": the family's resources are "<domain>/<name>" */
        bool bare_names;    /* a name without a domain ("gpu") means "<domain>/gpu";
                             * at most one family of a table says so */
        /* Optional: the part after "<domain>/" must also pass this (a valid
         * resource name always must); name_rule says what it allows, for
         * the message. */
        bool (*valid_name)(const char *name);
        const char *name_rule;
        /* One devices-list entry ("0", "GPU-<uuid>", "0000:0c:00.0"):
         * *canon gets the form the backend compares, under strategy. */
        int (*device)(const char *ref, enum sharing_strategy strategy, char **canon,
                      struct diag *diag);
        /* Optional: refuses resource name under strategy (NVIDIA: MPS
         * shares no MIG resource); next is the config as the file leaves
         * it so far (the families' own sections in place). */
        int (*refuse)(const char *name, enum sharing_strategy strategy,
                      const struct devlet_config *next, struct diag *diag);
};

/* One device family, as config/ sees it. */
struct config_family {
        const char *name;                        /* "nvidia": its --backends choice */
        const struct config_option_set *options; /* NULL: no options of its own */
        /* a top-level section of the config file that is the family's own
         * (struct config_section, config/sections.h: key, size, parse,
         * clear), parsed after devlet's; NULL: none */
        const struct config_section *section;
        /* the resources it lets the sharing section name, and how a
         * device is selected there; NULL: none of its resources is shared */
        const struct config_sharing_rules *sharing;
};

/* The families, in start-up order (the --help order of their options). */
struct config_families {
        const char *const *choices;           /* --backends: "auto", then each family's
                                               * name; NULL-terminated */
        const struct config_family *const *v; /* NULL-terminated; at most CONFIG_FAMILIES_MAX */
};

/* A family's values, by the set its struct config_family names: never NULL
 * for a config loaded with that family in its table (the block belongs to
 * cfg; a family only reads it, a test may set a value). */
void *config_backend_options(const struct devlet_config *cfg, const struct config_option_set *set);
/* A family's section as the file gave it; NULL when the file has none. */
const void *config_backend_section(const struct devlet_config *cfg,
                                   const struct config_section *s);

/* Every option, in --help order: devlet's own table, then each family's
 * set in table order.  config_option_at returns NULL from
 * config_option_count() on. */
size_t config_option_count(const struct config_families *families);
const struct config_option *config_option_at(const struct config_families *families, size_t i);

/* Loads the configuration for a subcommand: defaults, then the config file
 * (from --config-file / CONFIG_FILE), then env vars, then flags from argv.
 * argv[0] is the subcommand name; parsing stops at "--" or the first
 * non-option, whose index goes to *argi (may be NULL; extra arguments are
 * then an error).  Returns 0 and a new config in *out, -EINVAL with diag
 * filled for bad flags/values/files, -errno when the file cannot be read. */
int config_load(const struct config_families *families, int argc, char **argv,
                struct devlet_config **out, struct diag *diag, int *argi);

/* dcgm-exporter's counters CSV ("field, type, help" lines, '#' comments):
 * *out is the strv of the fields it names: families to export and label
 * fields (label rows) to add as labels.
 * Returns 0, or -EINVAL with diag at the file and line; _load also -errno
 * when the file cannot be read.  config_load() loads cfg->collectors_file
 * into cfg->collectors. */
int config_counters_parse(const char *text, const char *path, char ***out,
                          struct diag *diag);
int config_counters_load(const char *path, char ***out, struct diag *diag);

/* Parses config-file content into cfg (which holds defaults already).
 * file names the source in diagnostics.  Exposed for tests and fuzzing.
 * Content larger than CONFIG_FILE_MAX is refused.  cfg changes only when
 * the whole file is good: -EINVAL with diag filled leaves it as it was. */
int config_parse_yaml(const char *file, const char *data, size_t len, struct devlet_config *cfg,
                      struct diag *diag);

/* A config holding only the defaults (kubelet_socket is "", see above) of
 * devlet's options and those of the families, which it keeps (the table
 * must outlive it). */
struct devlet_config *config_new_defaults(const struct config_families *families);
void config_free(struct devlet_config *cfg);

/* One option or section whose value differs between two configs. */
struct config_change {
        const char *name;                   /* the option's flag, or the section's key */
        const struct config_option *option; /* NULL for a section */
        unsigned apply;                     /* the row's CONFIG_APPLY_* flags */
};

/* What differs between the running config prev and next: each option by
 * its type (strings, numbers, lists item by item, and for an option with
 * `loaded` the content read from its file too), each section by its
 * `equal` (a backend's section present in one config only differs).
 * Returns the union of the changed rows' apply flags, 0 when nothing
 * differs.  With out non-NULL, *out is a new array of the changes in table
 * order (free() it) and *n their count. */
unsigned config_diff(const struct devlet_config *prev, const struct devlet_config *next,
                     struct config_change **out, size_t *n);

/* Gives opt in dst a copy of its value in src (what `loaded` names
 * included): the running value of an option a reload cannot apply. */
void config_option_copy(struct devlet_config *dst, const struct devlet_config *src,
                        const struct config_option *opt);

/* The names of apply's flags, comma-separated ("reserve,outputs"; "none"
 * for 0), in buf. */
const char *config_apply_text(unsigned apply, char *buf, size_t size);

/* Every option and section with its apply flags, as JSON (`devlet help
 * options-json`, for tests and tools): {"options": [{"flag", "alias", "short", "key",
 * "key_alias", "type", "default", "choices", "apply": [...]}],
 * "sections": [{"key", "apply"}]};
 * free() it. */
char *config_table_json(const struct config_families *families);

/* The effective configuration as compact JSON (for the start-up log line);
 * never NULL, free() it. */
char *config_to_json(const struct devlet_config *cfg);

/* --node-name, or the host name when it is empty.  Heap string. */
char *config_node_name(const struct devlet_config *cfg);

/* The root under which a family finds /dev: --dev-root when given, else
 * "/" (a family may have a default of its own instead: NVIDIA's is its
 * driver root, as NVIDIA's plugin has it). */
const char *config_host_dev_root(const struct devlet_config *cfg);

/* Whether --serve names what ("plugin", "labels", "metrics"). */
bool config_serves(const struct devlet_config *cfg, const char *what);

/* Defaults that replace the table's for this process: "flag=value" items,
 * applied below the config file, env vars and flags (a vendor command
 * name's own defaults, see persona.c).  The vector must outlive every
 * config load; NULL restores the table's.  An item naming no option is
 * ignored (tests/integration/test_personas.py checks each command name's). */
void config_set_defaults(const char *const *items);

/* Prints the flags table (flag, env vars, config key, default, help):
 * devlet's options, then the families'. */
void config_print_help(const struct config_families *families, FILE *f);

/* Resource name validation shared with the backends: "<domain>/<name>". */
bool config_valid_resource_name(const char *s);
/* A DNS-1123 subdomain: at most 253 characters, dot-separated labels of
 * lowercase letters, digits and '-', each starting and ending alphanumeric. */
bool config_valid_dns_subdomain(const char *s);

#endif
