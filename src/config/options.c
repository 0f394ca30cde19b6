/* The option table: every option is one row of options[] (flag, short
 * flag, alias, env vars, config-file key, type, default, choices, help)
 * or of a set a device family adds (struct config_family's options, whose
 * values live in a block of the family's own), the typed values of a row,
 * and the flags help.  The families come with the config (cfg->families)
 * or as a parameter; this file names none.
 *
 * A value goes through two steps: config_value_parse() turns text into a
 * typed value and checks it against the row, config_value_store() moves it
 * into struct devlet_config.  Parsing never touches the config, so a source
 * with an error changes nothing.  The sources (defaults, file, env, flags)
 * are load.c's; the config file's keys are matched in file.c.
 *
 * Never logs and never exits: every problem goes back as -EINVAL with a
 * diag that names the flag, env var or file position and what is allowed. */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "config/options.h"

static const char *const device_list_strategy_choices[] = { "envvar", "volume-mounts",
                                                            "cdi-annotations", "cdi-cri", NULL };
static const char *const allocation_policy_choices[] = { "distributed", "packed", NULL };
static const char *const hostname_label_choices[] = { "auto", "Hostname", "hostname", "none", NULL };
static const char *const serve_choices[] = { "plugin", "labels", "metrics", NULL };
static const char *const log_format_choices[] = { "text", "json", "klog", NULL };
static const char *const labels_output_choices[] = { "auto", "features.d", "node-feature", "node",
                                                     NULL };

#define FIELD(f) offsetof(struct devlet_config, f)

static const struct config_option options[] = {
        {
                .flag = "config-file",
                .envs = { "CONFIG_FILE", "GFD_CONFIG_FILE" },
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(config_file),
                .help = "YAML config file: NVIDIA's \"version: v1\" format plus devlet's sections",
                .apply = CONFIG_APPLY_RESTART,
        },
        {
                .flag = "plugin-directory",
                .envs = { "PLUGIN_DIRECTORY" },
                .key = "flags.pluginDirectory",
                .type = CONFIG_STRING,
                .default_value = "/var/lib/kubelet/device-plugins",
                .offset = FIELD(plugin_directory),
                .help = "Directory of the kubelet's device-plugin sockets",
                .apply = CONFIG_APPLY_SOCKETS,
        },
        {
                .flag = "kubelet-socket",
                .envs = { "KUBELET_SOCKET" },
                .key = "flags.kubeletSocket",
                .key_alias = "flags.plugin.kubeletSocket",
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(kubelet_socket),
                .help = "Kubelet registration socket (default: <plugin-directory>/kubelet.sock; "
                        "--kubelet-socket \"\": serve the sockets but never register, as NVIDIA's)",
                .apply = CONFIG_APPLY_SOCKETS,
        },
        {
                .flag = "verbosity",
                .short_flag = 'v',
                .alias = "v",
                .envs = { "DEVLET_VERBOSITY" },
                .key = "flags.verbosity",
                .type = CONFIG_INT,
                .default_value = "0",
                .offset = FIELD(verbosity),
                .min = 0,
                .max = 10,
                .help = "Log verbosity: 1 adds debug messages, 2 adds trace",
                .apply = CONFIG_APPLY_NONE,
        },
        {
                .flag = "log-format",
                .envs = { "DEVLET_LOG_FORMAT" },
                .key = "flags.logFormat",
                .type = CONFIG_STRING,
                .default_value = "text",
                .offset = FIELD(log_format),
                .choices = log_format_choices,
                .help = "Log line format: text (\"<RFC 3339 UTC> info  kubelet: registered "
                        "resource=...\"), json (one object per line: ts, level, component, msg "
                        "and one string field per key=value), klog (klog's header as NVIDIA's "
                        "plugin prints it, local time, with devlet/<component>:0 for file:line; "
                        "debug and trace are I).  Applies once the config is loaded: an error "
                        "before that is plain text",
                .apply = CONFIG_APPLY_NONE,
        },
        {
                .flag = "backends",
                .envs = { "DEVLET_BACKENDS" },
                .key = "flags.backends",
                .type = CONFIG_LIST,
                .default_value = "auto",
                .offset = FIELD(backends),
                /* choices: the families' names (row_choices) */
                .help = "Device backends to run (auto: each backend that finds devices)",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "serve",
                .envs = { "DEVLET_SERVE" },
                .type = CONFIG_LIST,
                .default_value = "plugin,labels,metrics",
                .offset = FIELD(serve),
                .choices = serve_choices,
                .help = "What `devlet run` does: plugin (the device plugin, DRA and CDI specs), labels "
                        "(feature-discovery labels), metrics (the metrics endpoint).  The vendors' "
                        "command names each start with their tool's part only.  Per process, so "
                        "no config-file key",
                .apply = CONFIG_APPLY_RESTART,
        },
        {
                .flag = "sysfs-root",
                .envs = { "DEVLET_SYSFS_ROOT" },
                .type = CONFIG_STRING,
                .default_value = "/sys",
                .offset = FIELD(sysfs_root),
                .help = "Where sysfs is mounted",
                .apply = CONFIG_APPLY_RESTART,
        },
        {
                .flag = "dev-root",
                .alias = "nvidia-dev-root",
                .envs = { "NVIDIA_DEV_ROOT", "DEV_ROOT" },
                .key = "flags.nvidiaDevRoot",
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(dev_root),
                .help = "Root under which /dev is found (empty: the NVIDIA driver root for NVIDIA "
                        "GPUs, as NVIDIA's; / for the other families)",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "rescan-interval",
                .envs = { "DEVLET_RESCAN_INTERVAL" },
                .key = "flags.rescanInterval",
                .type = CONFIG_DURATION,
                .default_value = "5s",
                .offset = FIELD(rescan_interval_ms),
                .help = "Fallback rescan for hot-plugged devices (infinite: never)",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "fail-on-init-error",
                .envs = { "FAIL_ON_INIT_ERROR", "GFD_FAIL_ON_INIT_ERROR" },
                .key = "flags.failOnInitError",
                .type = CONFIG_BOOL,
                .default_value = "true",
                .offset = FIELD(fail_on_init_error),
                .help = "Exit when the NVIDIA backend cannot start (false: run without it)",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "pass-device-specs",
                .envs = { "PASS_DEVICE_SPECS" },
                .key = "flags.plugin.passDeviceSpecs",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(pass_device_specs),
                .help = "Return device nodes to the kubelet in Allocate responses",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "device-list-strategy",
                .envs = { "DEVICE_LIST_STRATEGY" },
                .key = "flags.plugin.deviceListStrategy",
                .type = CONFIG_LIST,
                .default_value = "envvar",
                .offset = FIELD(device_list_strategy),
                .choices = device_list_strategy_choices,
                .help = "How allocated GPUs are passed to the container runtime",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "cdi-annotation-prefix",
                .envs = { "CDI_ANNOTATION_PREFIX" },
                .key = "flags.plugin.cdiAnnotationPrefix",
                .type = CONFIG_STRING,
                .default_value = "cdi.k8s.io/",
                .offset = FIELD(cdi_annotation_prefix),
                .help = "Prefix of the CDI annotations (cdi-annotations strategy)",
                .apply = CONFIG_APPLY_RESERVE | CONFIG_APPLY_METRICS,
        },
        {
                .flag = "shared-devices-allocation-policy",
                .envs = { "SHARED_DEVICES_ALLOCATION_POLICY" },
                .key = "flags.plugin.sharedDevicesAllocationPolicy",
                .type = CONFIG_STRING,
                .default_value = "distributed",
                .offset = FIELD(shared_devices_allocation_policy),
                .choices = allocation_policy_choices,
                .help = "How shared (replicated) devices are picked: spread over GPUs, "
                        "or packed onto as few as possible",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "cdi-spec-dir",
                .envs = { "DEVLET_CDI_SPEC_DIR" },
                .key = "flags.cdiSpecDir",
                .type = CONFIG_STRING,
                .default_value = "/var/run/cdi",
                .offset = FIELD(cdi_spec_dir),
                .help = "Directory the CDI specs are written to",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "metrics-address",
                .envs = { "DEVLET_METRICS_ADDRESS", "DCGM_EXPORTER_LISTEN" },
                .key = "flags.metricsAddress",
                .type = CONFIG_STRING,
                .default_value = ":9400",
                .offset = FIELD(metrics_address),
                .help = "Listen address of the metrics endpoint, [host]:port (empty: no "
                        "metrics; an empty env var counts as unset)",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "collect-interval",
                .envs = { "DCGM_EXPORTER_INTERVAL" },
                .key = "flags.collectInterval",
                .type = CONFIG_INT,
                .default_value = "30000",
                .offset = FIELD(collect_interval_ms),
                .min = 100,
                .help = "Interval between metric samples, in milliseconds",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "hostname-label",
                .envs = { "DEVLET_HOSTNAME_LABEL" },
                .key = "flags.hostnameLabel",
                .type = CONFIG_STRING,
                .default_value = "auto",
                .offset = FIELD(hostname_label),
                .choices = hostname_label_choices,
                .help = "Name of the metrics label that carries the node name (auto: each "
                        "family's exporter's, Hostname as dcgm-exporter's for NVIDIA GPUs, "
                        "hostname as AMD's exporter's for AMD GPUs and devlet's own families; "
                        "none: no such label, as dcgm-exporter's --no-hostname)",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "kubernetes",
                .envs = { "DEVLET_KUBERNETES" },
                .key = "flags.kubernetes",
                .type = CONFIG_BOOL,
                .default_value = "true",
                .offset = FIELD(kubernetes),
                .help = "Attribute each series to the pod, namespace and container holding the "
                        "device (false: no such labels; dcgm-exporter's -k, off by default under "
                        "its command name)",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "pod-resources-socket",
                .envs = { "DEVLET_POD_RESOURCES_SOCKET" },
                .key = "flags.podResourcesSocket",
                .type = CONFIG_STRING,
                .default_value = "/var/lib/kubelet/pod-resources/kubelet.sock",
                .offset = FIELD(pod_resources_socket),
                .help = "The kubelet's pod-resources socket (which pod holds which device)",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "container-state-dirs",
                .envs = { "DEVLET_CONTAINER_STATE_DIRS" },
                .key = "flags.containerStateDirs",
                .type = CONFIG_LIST,
                .default_value = "/run/containerd/io.containerd.runtime.v2.task/k8s.io,"
                                 "/run/containers/storage/overlay-containers",
                .offset = FIELD(container_state_dirs),
                .help = "Where container runtimes keep each container's state and OCI spec",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "web-config-file",
                .envs = { "DCGM_EXPORTER_WEB_CONFIG_FILE" },
                .key = "flags.webConfigFile",
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(web_config_file),
                .help = "The metrics endpoint's web configuration (dcgm-exporter's and the "
                        "Prometheus exporter-toolkit's YAML format): TLS (tls_server_config), "
                        "client certificates, response headers (http_server_config) and basic "
                        "authentication (basic_auth_users, bcrypt hashes), on every path; empty: "
                        "plain HTTP, no authentication",
                .apply = CONFIG_APPLY_METRICS,
                .loaded = FIELD(web_config_text),
        },
        /* metrics: dcgm-exporter's flags and env vars */
        {
                .flag = "kubernetes-virtual-gpus",
                .envs = { "KUBERNETES_VIRTUAL_GPUS" },
                .key = "flags.kubernetesVirtualGPUs",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(kubernetes_virtual_gpus),
                .help = "Also export, for a device several pods share, one GPU_UTIL and FB_USED "
                        "series per pod (label vgpu: its replica), as dcgm-exporter does",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "kubernetes-enable-pod-labels",
                .envs = { "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS" },
                .key = "flags.metrics.podLabels",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(kubernetes_enable_pod_labels),
                .help = "Add the Kubernetes labels of the pod that holds a device to its series, "
                        "names sanitised (app.kubernetes.io/name: app_kubernetes_io_name), as "
                        "dcgm-exporter does; watches the node's pods through the API server "
                        "(--kubeconfig; RBAC: pods list, watch)",
                .apply = CONFIG_APPLY_METRICS,
        },
        {
                .flag = "collectors",
                .short_flag = 'f',
                .envs = { "DCGM_EXPORTER_COLLECTORS" },
                .key = "flags.collectors",
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(collectors_file),
                .help = "dcgm-exporter's counters CSV (field, type, help): the device families to "
                        "export and label fields to add (empty: dcgm-exporter's default set and more)",
                .apply = CONFIG_APPLY_METRICS,
                .loaded = FIELD(collectors),
        },
        /* feature-discovery labels: GFD's flags, env vars and config keys */
        {
                .flag = "oneshot",
                .envs = { "GFD_ONESHOT", "ONESHOT" },
                .key = "flags.gfd.oneshot",
                .type = CONFIG_BOOL,
                .default_value = "true",
                .offset = FIELD(labels_oneshot),
                .help = "`devlet labels`: label once and exit (false: rewrite the output file "
                        "every --sleep-interval); `devlet run` always keeps the labels current",
                .apply = CONFIG_APPLY_NONE,
        },
        {
                .flag = "no-timestamp",
                .envs = { "GFD_NO_TIMESTAMP", "NO_TIMESTAMP" },
                .key = "flags.gfd.noTimestamp",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(labels_no_timestamp),
                .help = "Leave out the nvidia.com/gfd.timestamp label",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "sleep-interval",
                .envs = { "GFD_SLEEP_INTERVAL", "SLEEP_INTERVAL" },
                .key = "flags.gfd.sleepInterval",
                .type = CONFIG_DURATION,
                .default_value = "60s",
                .offset = FIELD(labels_sleep_interval_ms),
                .help = "Time between two labelings (infinite: only at start and when devices "
                        "change)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "output-file",
                .short_flag = 'o',
                .alias = "output",
                .envs = { "GFD_OUTPUT_FILE", "OUTPUT_FILE" },
                .key = "flags.gfd.outputFile",
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(labels_output_file),
                .help = "Labels file for NFD's local source (empty: "
                        "/etc/kubernetes/node-feature-discovery/features.d/gfd, and `devlet "
                        "labels` prints to standard output; \"-\": standard output)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "machine-type-file",
                .envs = { "GFD_MACHINE_TYPE_FILE", "MACHINE_TYPE_FILE" },
                .key = "flags.gfd.machineTypeFile",
                .type = CONFIG_STRING,
                .default_value = "/sys/class/dmi/id/product_name",
                .offset = FIELD(machine_type_file),
                .help = "File holding the node's DMI product name (nvidia.com/gpu.machine)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "remove-on-exit",
                .envs = { "GFD_REMOVE_ON_EXIT", "REMOVE_ON_EXIT" },
                .key = "flags.gfd.removeOnExit",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(labels_remove_on_exit),
                .help = "Delete the labels file when devlet stops (GFD's behaviour; by default "
                        "the labels stay across restarts)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "labels-output",
                .envs = { "DEVLET_LABELS_OUTPUT" },
                .key = "flags.labelsOutput",
                .type = CONFIG_STRING,
                .default_value = "auto",
                .offset = FIELD(labels_output),
                .choices = labels_output_choices,
                .help = "Where the node labels go: features.d (the --output-file for NFD's "
                        "local source), node-feature (an NFD NodeFeature object through the API "
                        "server, GFD's --use-node-feature-api), node (the Node's own labels, "
                        "patched through the API server, as AMD's k8s-node-labeller does; "
                        "labels devlet no longer produces are removed), or auto (node-feature "
                        "with --use-node-feature-api, else features.d)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "labels-resync-interval",
                .envs = { "DEVLET_LABELS_RESYNC_INTERVAL" },
                .key = "flags.labelsResyncInterval",
                .type = CONFIG_DURATION,
                .default_value = "30m",
                .offset = FIELD(labels_resync_interval_ms),
                .help = "With --labels-output node or node-feature: how long devlet trusts what "
                        "it wrote before reading the object again (a label someone removed "
                        "comes back), plus up to as much again at random; infinite: only after "
                        "a failed write",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "use-node-feature-api",
                .envs = { "GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API" },
                .key = "flags.useNodeFeatureAPI",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(labels_use_node_feature_api),
                .help = "GFD's: write the labels as an NFD NodeFeature object "
                        "(nfd.k8s-sigs.io/v1alpha1) instead of the features.d file; what "
                        "--labels-output=auto means",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        {
                .flag = "namespace",
                .envs = { "NAMESPACE" },
                .key = "flags.gfd.namespace",
                .type = CONFIG_STRING,
                .default_value = "default",
                .offset = FIELD(labels_namespace),
                .help = "Namespace of the NodeFeature object (--labels-output=node-feature)",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
        /* Dynamic Resource Allocation (resource.k8s.io/v1) */
        {
                .flag = "dra-resources",
                .envs = { "DEVLET_DRA_RESOURCES" },
                .key = "flags.draResources",
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = FIELD(dra_resources),
                .help = "Resources served through DRA instead of the device plugin, each "
                        "PATTERN[=dra|both|device-plugin], a shell pattern (\"*\", "
                        "\"nvidia.com/*\") matched against the resources whose family has a DRA "
                        "driver; the last item that matches decides.  both: DRA, and pods "
                        "asking for the extended resource are served through the DeviceClass's "
                        "extendedResourceName",
                .apply = CONFIG_APPLY_SOCKETS,
        },
        {
                .flag = "kubeconfig",
                .envs = { "KUBECONFIG" },
                .key = "flags.kubeconfig",
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(kubeconfig),
                .help = "Kubeconfig file for the API server (empty: the in-cluster service "
                        "account)",
                .apply = CONFIG_APPLY_SOCKETS,
        },
        {
                .flag = "kube-api-qps",
                .envs = { "KUBE_API_QPS" },
                .type = CONFIG_STRING,
                .default_value = "5",
                .offset = FIELD(kube_api_qps),
                .help = "Requests a second each Kubernetes client makes at most, after its "
                        "burst (client-go's QPS: 0 is 5, negative is no limit)",
                .apply = CONFIG_APPLY_RESTART,
        },
        {
                .flag = "kube-api-burst",
                .envs = { "KUBE_API_BURST" },
                .type = CONFIG_INT,
                .default_value = "10",
                .offset = FIELD(kube_api_burst),
                .min = 0,
                .max = 100000,
                .help = "Requests each Kubernetes client makes at once before --kube-api-qps "
                        "paces it (0 is 10)",
                .apply = CONFIG_APPLY_RESTART,
        },
        {
                .flag = "node-name",
                .envs = { "NODE_NAME" },
                .type = CONFIG_STRING,
                .default_value = "",
                .offset = FIELD(node_name),
                .help = "This node's name in the API server and in the metrics' host label "
                        "(empty: the host name); per node, so no config-file key",
                .apply = CONFIG_APPLY_RESTART,
        },
        {
                .flag = "kubelet-registrar-directory-path",
                .envs = { "KUBELET_REGISTRAR_DIRECTORY_PATH" },
                .key = "flags.kubeletRegistrarDirectoryPath",
                .type = CONFIG_STRING,
                .default_value = "/var/lib/kubelet/plugins_registry",
                .offset = FIELD(kubelet_registry_dir),
                .help = "Where the kubelet's plugin watcher looks for DRA drivers' "
                        "registration sockets",
                .apply = CONFIG_APPLY_SOCKETS,
        },
        {
                .flag = "kubelet-plugins-directory-path",
                .envs = { "KUBELET_PLUGINS_DIRECTORY_PATH" },
                .key = "flags.kubeletPluginsDirectoryPath",
                .type = CONFIG_STRING,
                .default_value = "/var/lib/kubelet/plugins",
                .offset = FIELD(kubelet_plugins_dir),
                .help = "Where each DRA driver's socket and checkpoint live (one directory "
                        "per driver)",
                .apply = CONFIG_APPLY_SOCKETS,
        },
        {
                .flag = "dra-cleanup",
                .envs = { "DEVLET_DRA_CLEANUP" },
                .key = "flags.draCleanup",
                .type = CONFIG_BOOL,
                .default_value = "false",
                .offset = FIELD(dra_cleanup),
                .help = "Delete this node's ResourceSlices when devlet stops (uninstalling)",
                .apply = CONFIG_APPLY_NONE,
        },
};

/* ---- the rows: devlet's own, then the families' ---- */

/* The families' sets, by family index: NULL for a family without options
 * (and past the last family). */
static const struct config_option_set *family_set(const struct config_families *f, size_t j)
{
        return j < CONFIG_FAMILIES_MAX && f->v[j] ? f->v[j]->options : NULL;
}

#define EACH_FAMILY(f, j) for (size_t j = 0; j < CONFIG_FAMILIES_MAX && (f)->v[j]; j++)

size_t config_option_count(const struct config_families *f)
{
        size_t n = ARRAY_SIZE(options);
        EACH_FAMILY(f, j)
                n += family_set(f, j) ? family_set(f, j)->n_options : 0;
        return n;
}

const struct config_option *config_option_at(const struct config_families *f, size_t i)
{
        if (i < ARRAY_SIZE(options))
                return &options[i];
        i -= ARRAY_SIZE(options);
        EACH_FAMILY(f, j) {
                const struct config_option_set *set = family_set(f, j);
                if (!set)
                        continue;
                if (i < set->n_options)
                        return &set->options[i];
                i -= set->n_options;
        }
        return NULL;
}

/* The index of the family whose set holds opt; -1 for devlet's own rows. */
static int option_set_index(const struct config_families *f, const struct config_option *opt)
{
        EACH_FAMILY(f, j) {
                const struct config_option_set *set = family_set(f, j);
                if (set && opt >= set->options && opt < set->options + set->n_options)
                        return (int)j;
        }
        return -1;
}

const void *config_option_value(const struct devlet_config *cfg, const struct config_option *opt)
{
        int j = option_set_index(cfg->families, opt);
        const char *base = j < 0 ? (const char *)cfg : (const char *)cfg->backend_options[j];
        return base + opt->offset;
}

void *config_option_field(struct devlet_config *cfg, const struct config_option *opt)
{
        int j = option_set_index(cfg->families, opt);
        char *base = j < 0 ? (char *)cfg : (char *)cfg->backend_options[j];
        return base + opt->offset;
}

void *config_backend_options(const struct devlet_config *cfg, const struct config_option_set *set)
{
        EACH_FAMILY(cfg->families, j)
                if (set && family_set(cfg->families, j) == set)
                        return cfg->backend_options[j];
        return NULL;
}

void config_options_alloc(struct devlet_config *cfg)
{
        EACH_FAMILY(cfg->families, j)
                if (family_set(cfg->families, j))
                        cfg->backend_options[j] = xcalloc(1, family_set(cfg->families, j)->size ?: 1);
}

void config_options_free(struct devlet_config *cfg)
{
        const struct config_option *opt;
        for (size_t i = 0; (opt = config_option_at(cfg->families, i)); i++) {
                int j = option_set_index(cfg->families, opt);
                if (j >= 0 && !cfg->backend_options[j])
                        continue;
                void *field = config_option_field(cfg, opt);
                if (opt->type == CONFIG_STRING)
                        free(*(char **)field);
                else if (opt->type == CONFIG_LIST)
                        strv_free(*(char ***)field);
                if (opt->loaded)
                        strv_free(*(char ***)((char *)field - opt->offset + opt->loaded));
        }
        for (size_t j = 0; j < CONFIG_FAMILIES_MAX; j++)
                free(TAKE_PTR(cfg->backend_options[j]));
}

int config_options_finish(struct devlet_config *cfg, struct diag *diag)
{
        EACH_FAMILY(cfg->families, j) {
                const struct config_option_set *set = family_set(cfg->families, j);
                if (!set || !set->finish)
                        continue;
                int r = set->finish(cfg, cfg->backend_options[j], &cfg->warnings, diag);
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_options_load(struct devlet_config *cfg, struct diag *diag)
{
        EACH_FAMILY(cfg->families, j) {
                const struct config_option_set *set = family_set(cfg->families, j);
                if (!set || !set->load)
                        continue;
                int r = set->load(cfg, cfg->backend_options[j], &cfg->warnings, diag);
                if (r < 0)
                        return r;
        }
        return 0;
}

const struct config_option *config_option_by_flag(const struct config_families *f,
                                                  const char *name, size_t len)
{
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(f, i)); i++) {
                const char *names[] = { o->flag, o->alias };
                for (size_t k = 0; k < ARRAY_SIZE(names); k++)
                        if (names[k] && strlen(names[k]) == len && strncmp(names[k], name, len) == 0)
                                return o;
        }
        return NULL;
}

const struct config_option *config_option_by_key(const struct config_families *f,
                                                 const char *key)
{
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(f, i)); i++) {
                if ((o->key && strcmp(o->key, key) == 0) ||
                    (o->key_alias && strcmp(o->key_alias, key) == 0))
                        return o;
        }
        return NULL;
}

bool config_key_is_section(const struct config_families *f, const char *prefix)
{
        size_t n = strlen(prefix);
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(f, i)); i++) {
                for (int k = 0; k < 2; k++) {
                        const char *key = k ? o->key_alias : o->key;
                        if (key && strncmp(key, prefix, n) == 0 && key[n] == '.')
                                return true;
                }
        }
        return false;
}

/* ---- values ---- */


/* What opt allows (NULL-terminated), or NULL for anything: the row's
 * choices, or for --backends the families' names. */
static const char *const *row_choices(const struct config_families *f,
                                      const struct config_option *opt)
{
        bool own = opt >= options && opt < options + ARRAY_SIZE(options);
        if (own && opt->offset == FIELD(backends))
                return f->choices;
        return opt->choices;
}

static bool in_choices(const char *const *choices, const char *s)
{
        if (!choices)
                return true;
        for (size_t i = 0; choices[i]; i++)
                if (strcmp(choices[i], s) == 0)
                        return true;
        return false;
}

static const char *choices_join(const char *const *choices, const char *sep, char *buf,
                                size_t size)
{
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; choices && choices[i] && off < size; i++)
                off += (size_t)snprintf(buf + off, size - off, "%s%s", i ? sep : "", choices[i]);
        return buf;
}

static int bad_choice(const char *const *choices, const char *who, const char *value,
                      struct diag *diag)
{
        char allowed[256];
        return diag_set_at(diag, -EINVAL, NULL, 0, 0, "%s: invalid value \"%.100s\" (allowed: %s)",
                           who, value, choices_join(choices, ", ", allowed, sizeof(allowed)));
}

int config_value_parse_items(const struct config_families *f, const struct config_option *opt,
                             char *const *items, const char *who, union config_value *out,
                             struct diag *diag)
{
        char allowed[256];
        const char *const *choices = row_choices(f, opt);
        if ((!items || !items[0]) && !opt->default_value[0]) {
                out->list = xcalloc(1, sizeof(char *)); /* a list that may be empty */
                return 0;
        }
        if (!items || !items[0])
                return diag_set_at(diag, -EINVAL, NULL, 0, 0, "%s: needs at least one value%s%s%s",
                                   who, choices ? " (allowed: " : "",
                                   choices_join(choices, ", ", allowed, sizeof(allowed)),
                                   choices ? ")" : "");
        for (size_t i = 0; items[i]; i++) {
                if (!items[i][0])
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0, "%s: empty list item", who);
                if (!in_choices(choices, items[i]))
                        return bad_choice(choices, who, items[i], diag);
        }
        char **v = NULL;
        for (size_t i = 0; items[i]; i++)
                v = strv_push(v, items[i]);
        out->list = v;
        return 0;
}

/* Splits on commas, trimming blanks; empty items are dropped. */
static char **split_list(const char *text)
{
        char **v = NULL;
        const char *p = text;
        for (;;) {
                const char *end = strchrnul(p, ',');
                const char *a = p, *b = end;
                while (a < b && isblank((unsigned char)*a))
                        a++;
                while (b > a && isblank((unsigned char)b[-1]))
                        b--;
                if (b > a) {
                        _cleanup_free_ char *item = xstrndup(a, (size_t)(b - a));
                        v = strv_push(v, item);
                }
                if (!*end)
                        return v;
                p = end + 1;
        }
}

int config_value_parse(const struct config_families *f, const struct config_option *opt,
                       const char *text, const char *who, union config_value *out,
                       struct diag *diag)
{
        switch (opt->type) {
        case CONFIG_STRING:
                if (!in_choices(row_choices(f, opt), text))
                        return bad_choice(row_choices(f, opt), who, text, diag);
                out->s = xstrdup(text);
                return 0;
        case CONFIG_BOOL:
                if (config_parse_bool(text, &out->b) < 0)
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                           "%s: invalid value \"%.100s\" (expected true or false)",
                                           who, text);
                return 0;
        case CONFIG_INT:
                if (config_parse_nonneg_long(text, &out->i) < 0)
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                           "%s: invalid value \"%.100s\" (expected a non-negative integer)",
                                           who, text);
                if (out->i < opt->min || (opt->max && out->i > opt->max)) {
                        if (opt->max)
                                return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                                   "%s: %ld is out of range (%ld to %ld)",
                                                   who, out->i, opt->min, opt->max);
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                           "%s: %ld is out of range (at least %ld)", who,
                                           out->i, opt->min);
                }
                return 0;
        case CONFIG_DURATION:
                if (config_parse_duration(text, &out->ms) < 0)
                        return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                           "%s: invalid value \"%.100s\" (expected a duration "
                                           "such as 500ms, 5s, 2m, 1h, a number of seconds, "
                                           "or infinite)",
                                           who, text);
                return 0;
        case CONFIG_LIST: {
                _cleanup_strv_free_ char **items = split_list(text);
                return config_value_parse_items(f, opt, items, who, out, diag);
        }
        }
        return -EINVAL;
}

void config_value_clear(const struct config_option *opt, union config_value *v)
{
        if (opt->type == CONFIG_STRING)
                free(TAKE_PTR(v->s));
        else if (opt->type == CONFIG_LIST)
                strv_free(TAKE_PTR(v->list));
}

void config_value_store(struct devlet_config *cfg, const struct config_option *opt,
                        union config_value *v)
{
        void *field = config_option_field(cfg, opt);
        switch (opt->type) {
        case CONFIG_STRING:
                free(*(char **)field);
                *(char **)field = TAKE_PTR(v->s);
                break;
        case CONFIG_LIST:
                strv_free(*(char ***)field);
                *(char ***)field = TAKE_PTR(v->list);
                break;
        case CONFIG_BOOL:
                *(bool *)field = v->b;
                break;
        case CONFIG_INT:
                *(long *)field = v->i;
                break;
        case CONFIG_DURATION:
                *(int64_t *)field = v->ms;
                break;
        }
}

/* ---- values not yet stored ---- */

void config_pending_add(struct config_pending *p, const struct config_option *opt,
                        union config_value *v)
{
        if (opt->type == CONFIG_LIST)
                for (size_t i = 0; i < p->n; i++)
                        if (p->items[i].opt == opt) {
                                for (size_t j = 0; v->list[j]; j++)
                                        p->items[i].v.list = strv_push(p->items[i].v.list,
                                                                       v->list[j]);
                                config_value_clear(opt, v);
                                return;
                        }
        xgrow((void **)&p->items, &p->cap, p->n + 1, sizeof(*p->items));
        p->items[p->n].opt = opt;
        p->items[p->n].v = *v;
        p->n++;
        *v = (union config_value){ 0 };
}

void config_pending_store(struct config_pending *p, struct devlet_config *cfg)
{
        for (size_t i = 0; i < p->n; i++)
                config_value_store(cfg, p->items[i].opt, &p->items[i].v);
        p->n = 0;
}

void config_pending_clear(struct config_pending *p)
{
        for (size_t i = 0; i < p->n; i++)
                config_value_clear(p->items[i].opt, &p->items[i].v);
        free(p->items);
        *p = (struct config_pending){ 0 };
}

/* ---- help ---- */

static const char *metavar(const struct config_families *f, const struct config_option *opt,
                           char *buf, size_t size)
{
        char choices[256];
        switch (opt->type) {
        case CONFIG_BOOL:
                return "[=true|false]";
        case CONFIG_INT:
                return " N";
        case CONFIG_DURATION:
                return " DURATION";
        case CONFIG_STRING:
        case CONFIG_LIST:
                break;
        }
        if (!row_choices(f, opt))
                return opt->type == CONFIG_LIST ? " A,B,..." : " VALUE";
        choices_join(row_choices(f, opt), "|", choices, sizeof(choices));
        snprintf(buf, size, " %s%s", choices, opt->type == CONFIG_LIST ? "[,...]" : "");
        return buf;
}

void config_print_help(const struct config_families *families, FILE *f)
{
        fputs("Options (a flag beats its env var, which beats the config file key):\n", f);
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(families, i)); i++) {
                char mv[300];
                fputs("\n  ", f);
                if (o->short_flag)
                        fprintf(f, "-%c, ", o->short_flag);
                fprintf(f, "--%s%s", o->flag, metavar(families, o, mv, sizeof(mv)));
                if (o->alias)
                        fprintf(f, "  (also --%s)", o->alias);
                fprintf(f, "\n      %s\n      ", o->help);
                for (size_t j = 0; j < ARRAY_SIZE(o->envs) && o->envs[j]; j++)
                        fprintf(f, "%s%s", j ? ", " : "env: ", o->envs[j]);
                if (o->key)
                        fprintf(f, "; key: %s", o->key);
                if (o->key_alias)
                        fprintf(f, " or %s", o->key_alias);
                fprintf(f, "; default: %s\n", o->default_value[0] ? o->default_value : "(none)");
        }
}
