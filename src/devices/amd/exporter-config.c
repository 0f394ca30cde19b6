/* AMD's exporter config.json (see exporter-config.h).
 *
 * The file is read into config/'s YAML tree, JSON being YAML's flow style,
 * so a syntax error and a value of the wrong kind both point at
 * file:line:column.  What AMD's exporter would accept and devlet cannot
 * honour is a warning, never an error (a drop-in must start on the
 * operator's file): keys it does not read, field and label names it does
 * not know or cannot give.  Errors are kept for what neither would run
 * with: not JSON, a list where a map belongs, a custom label name
 * Prometheus refuses.  AMD's own rules: an empty Fields exports every
 * field; CustomLabels holds at most 10 labels and may not set one of its
 * labels but CLUSTER_NAME; a MetricsFieldPrefix that is not a valid metric
 * name prefix is dropped.  The names of AMD's fields and labels below are
 * the names its documentation lists.
 *
 * The file is the operator's but may be large (1 MiB): every pass is
 * linear in it.  What it makes us keep is bounded (ExtraPodLabels to
 * AMD_EXPORTER_POD_LABELS_MAX, a name's duplicate looked for among those
 * kept), and so are the warnings: many of one kind are one line
 * (config_tally), never one per key. */
#include "devices/amd/exporter-config.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "config/tree.h"
#include "config/walk.h"
#include "devices/amd/internal.h"

#define EXPORTER_CONFIG_MAX (1024 * 1024)

/* Fields AMD's exporter reads through amdsmi or rocprofiler, which sysfs
 * does not give: exact names, then prefixes. */
static const char *const foreign_fields[] = {
        "GPU_NODES_TOTAL",
        "PCIE_RX",
        "PCIE_TX",
        "GPU_VIOLATION_GFX_CLOCK_BELOW_HOST_LIMIT_POWER_ACCUMULATED",
        "GPU_VIOLATION_GFX_CLOCK_BELOW_HOST_LIMIT_POWER_PERCENTAGE",
        "GPU_VIOLATION_GFX_CLOCK_BELOW_HOST_LIMIT_THERMAL_ACCUMULATED",
        "GPU_VIOLATION_GFX_CLOCK_BELOW_HOST_LIMIT_THERMAL_PERCENTAGE",
        "GPU_VIOLATION_GFX_CLOCK_BELOW_HOST_LIMIT_TOTAL_ACCUMULATED",
        "GPU_VIOLATION_GFX_CLOCK_BELOW_HOST_LIMIT_TOTAL_PERCENTAGE",
        "GPU_VIOLATION_LOW_UTILIZATION_ACCUMULATED",
        "GPU_VIOLATION_LOW_UTILIZATION_PERCENTAGE",
        NULL,
};
static const char *const foreign_prefixes[] = { "GPU_PROF_", "GPU_XGMI_NBR_", NULL };

/* Names AMD's releases spelled otherwise for one of devlet's families. */
static const struct {
        const char *old, *now;
} field_aliases[] = {
        { "PCIE_NAC_RECEIVED_COUNT", "PCIE_NACK_RECEIVED_COUNT" },
        { "GPU_VC_BUSY_INSTANTANEOUS", "GPU_VCN_BUSY_INSTANTANEOUS" },
        { "GPU_CURRENT_ACCUMULATED_COUNTER", "GPU_VIOLATION_CURRENT_ACCUMULATED_COUNTER" },
};

enum label_kind {
        LABEL_MANDATORY, /* on every series whatever Labels says */
        LABEL_GIVEN,     /* optional, and devlet gives it */
        LABEL_ABSENT,    /* optional, and devlet cannot give it */
};

static const struct {
        const char *name;
        enum label_kind kind;
        const char *why; /* LABEL_ABSENT */
} labels[] = {
        { "SERIAL_NUMBER", LABEL_MANDATORY, NULL },
        { "GPU_ID", LABEL_MANDATORY, NULL },
        { "POD", LABEL_MANDATORY, NULL },
        { "NAMESPACE", LABEL_MANDATORY, NULL },
        { "CONTAINER", LABEL_MANDATORY, NULL },
        { "JOB_ID", LABEL_MANDATORY, NULL },
        { "JOB_USER", LABEL_MANDATORY, NULL },
        { "JOB_PARTITION", LABEL_MANDATORY, NULL },
        { "CARD_MODEL", LABEL_MANDATORY, NULL },
        { "HOSTNAME", LABEL_MANDATORY, NULL },
        { "GPU_PARTITION_ID", LABEL_MANDATORY, NULL },
        { "GPU_COMPUTE_PARTITION_TYPE", LABEL_MANDATORY, NULL },
        { "GPU_MEMORY_PARTITION_TYPE", LABEL_MANDATORY, NULL },
        { "DEPLOYMENT_MODE", LABEL_MANDATORY, NULL },
        { "GPU_UUID", LABEL_GIVEN, NULL },
        { "DRIVER_VERSION", LABEL_GIVEN, NULL },
        { "VBIOS_VERSION", LABEL_GIVEN, NULL },
        { "CARD_SERIES", LABEL_ABSENT, "amdsmi's market name" },
        { "CARD_VENDOR", LABEL_ABSENT, "amdsmi's vendor name" },
        { "KFD_PROCESS_ID", LABEL_ABSENT, "one series per process" },
        { "POD_UUID", LABEL_ABSENT, "the API server's pod UID" },
        { "CLUSTER_NAME", LABEL_ABSENT, "set it in CustomLabels" },
};

/* Labels of devlet's own on AMD's series that a custom label would clash with. */
static const char *const reserved_labels[] = { "clock_index", "clock_type", "hbm_index", "vcn_index",
                                               "jpeg_index", "xcc_index", "link_index", "vgpu",
                                               NULL };

static bool reserved(const char *l)
{
        for (size_t i = 0; reserved_labels[i]; i++)
                if (strcmp(reserved_labels[i], l) == 0)
                        return true;
        return false;
}

static char *upper(const char *s)
{
        char *u = xstrdup(s);
        for (char *c = u; *c; c++)
                *c = (char)toupper((unsigned char)*c);
        return u;
}

static char *lower(const char *s)
{
        char *l = xstrdup(s);
        for (char *c = l; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        return l;
}

static void warn(char ***warnings, const char *file, const struct config_node *n, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void warn(char ***warnings, const char *file, const struct config_node *n, const char *fmt, ...)
{
        if (!warnings)
                return;
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0)
                abort();
        va_end(ap);
        char *w = n ? xasprintf("%s:%d:%d: %s", file, n->line, n->column, msg)
                    : xasprintf("%s: %s", file, msg);
        *warnings = strv_push(*warnings, w);
        free(w);
}

static bool foreign_field(const char *f)
{
        for (size_t i = 0; foreign_fields[i]; i++)
                if (strcmp(f, foreign_fields[i]) == 0)
                        return true;
        for (size_t i = 0; foreign_prefixes[i]; i++)
                if (strncmp(f, foreign_prefixes[i], strlen(foreign_prefixes[i])) == 0)
                        return true;
        return false;
}

/* [a-zA-Z_][a-zA-Z0-9_]*, or with colons too for a metric name. */
static bool prom_name(const char *s, bool metric)
{
        if (!*s || isdigit((unsigned char)*s))
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && *s != '_' && !(metric && *s == ':'))
                        return false;
        return true;
}

static int scalar_list(struct config_walk *w, const struct config_node *list, const char *path)
{
        for (size_t i = 0; i < list->n_items; i++)
                if (list->items[i]->kind != CONFIG_NODE_SCALAR) {
                        char p[CONFIG_PATH_MAX];
                        return config_node_error(w->diag, w->file, list->items[i],
                                                 config_subpath(p, sizeof(p), path, "[%zu]", i),
                                                 "expected a value, found %s",
                                                 config_node_kind_name(list->items[i]));
                }
        return 0;
}

/* Up to this many of the fields devlet cannot produce are named. */
#define FOREIGN_NAMED 10

static int parse_fields(struct config_walk *w, const struct config_node *list,
                        struct amd_exporter_config *c)
{
        int r = scalar_list(w, list, "GPUConfig.Fields");
        if (r < 0)
                return r;
        _cleanup_free_ char *foreign = NULL;
        size_t n_foreign = 0;
        const struct config_node *first_foreign = NULL;
        _cleanup_(config_tally_clear) struct config_tally unknown = { 0 };
        for (size_t i = 0; i < list->n_items; i++) {
                const struct config_node *n = list->items[i];
                _cleanup_free_ char *f = upper(n->text);
                for (size_t a = 0; a < ARRAY_SIZE(field_aliases); a++)
                        if (strcmp(f, field_aliases[a].old) == 0) {
                                free(f);
                                f = xstrdup(field_aliases[a].now);
                        }
                if (amd_metrics_field_known(f)) {
                        /* c->fields holds each family once: a short scan */
                        if (!strv_contains(c->fields, f))
                                c->fields = strv_push(c->fields, f);
                } else if (foreign_field(f)) {
                        if (n_foreign++ < FOREIGN_NAMED) {
                                char *more = xasprintf("%s%s%s", foreign ? foreign : "",
                                                       foreign ? "," : "", f);
                                free(foreign);
                                foreign = more;
                        }
                        first_foreign = first_foreign ? first_foreign : n;
                } else {
                        config_tally_add(&unknown, w->file, n,
                                         "GPUConfig.Fields: unknown field \"%s\" (ignored)", n->text);
                }
        }
        config_tally_flush(&unknown, w->warnings, w->file,
                           "unknown fields in GPUConfig.Fields (ignored)");
        if (n_foreign > FOREIGN_NAMED)
                warn(w->warnings, w->file, first_foreign,
                     "GPUConfig.Fields names %zu fields devlet cannot produce (AMD's exporter reads "
                     "them through amdsmi or rocprofiler; sysfs does not give them) fields=%s,...",
                     n_foreign, foreign);
        else if (foreign)
                warn(w->warnings, w->file, first_foreign,
                     "GPUConfig.Fields names fields devlet cannot produce (AMD's exporter reads "
                     "them through amdsmi or rocprofiler; sysfs does not give them) fields=%s",
                     foreign);
        /* Fields that name none of devlet's families export none of them */
        if (list->n_items && !c->fields)
                c->fields = xcalloc(1, sizeof(*c->fields));
        return 0;
}

static int parse_labels(struct config_walk *w, const struct config_node *list,
                        struct amd_exporter_config *c)
{
        int r = scalar_list(w, list, "GPUConfig.Labels");
        if (r < 0)
                return r;
        _cleanup_(config_tally_clear) struct config_tally unknown = { 0 };
        bool told[ARRAY_SIZE(labels)] = { false }; /* each absent label once */
        for (size_t i = 0; i < list->n_items; i++) {
                const struct config_node *n = list->items[i];
                _cleanup_free_ char *u = upper(n->text);
                size_t k = 0;
                while (k < ARRAY_SIZE(labels) && strcmp(labels[k].name, u) != 0)
                        k++;
                if (k == ARRAY_SIZE(labels)) {
                        config_tally_add(&unknown, w->file, n,
                                         "GPUConfig.Labels: unknown label \"%s\" (ignored)", n->text);
                        continue;
                }
                if (labels[k].kind == LABEL_ABSENT) {
                        if (!told[k])
                                warn(w->warnings, w->file, n,
                                     "GPUConfig.Labels: devlet cannot give the label %s (%s; ignored)",
                                     labels[k].name, labels[k].why);
                        told[k] = true;
                        continue;
                }
                _cleanup_free_ char *l = lower(u);
                if (labels[k].kind == LABEL_GIVEN && !strv_contains(c->labels, l))
                        c->labels = strv_push(c->labels, l);
        }
        config_tally_flush(&unknown, w->warnings, w->file,
                           "unknown labels in GPUConfig.Labels (ignored)");
        return 0;
}

/* A map of names to values: a custom label's or an extra pod label's.
 * At most max pairs are kept (why: the reason, for the warning), so the
 * check for a name given twice scans at most max names. */
static int label_map(struct config_walk *w, const struct config_node *map, const char *path,
                     size_t max, const char *why, char ***out)
{
        int r = config_walk_expect(w, map, CONFIG_NODE_MAP, path);
        if (r < 0)
                return r;
        char p[CONFIG_PATH_MAX];
        size_t n = 0;
        _cleanup_(config_tally_clear) struct config_tally own = { 0 }, twice = { 0 };
        for (size_t i = 0; i + 1 < map->n_items; i += 2) {
                const struct config_node *k = map->items[i], *v = map->items[i + 1];
                config_subpath(p, sizeof(p), path, ".%s", k->text);
                if (v->kind != CONFIG_NODE_SCALAR)
                        return config_node_error(w->diag, w->file, v, p, "expected a value, found %s",
                                                 config_node_kind_name(v));
                if (!prom_name(k->text, false) || strncmp(k->text, "__", 2) == 0)
                        return config_node_error(w->diag, w->file, k, p,
                                                 "\"%s\" is not a Prometheus label name "
                                                 "([a-zA-Z_][a-zA-Z0-9_]*, no leading \"__\")",
                                                 k->text);
                _cleanup_free_ char *u = upper(k->text), *l = lower(k->text);
                bool amds = false;
                for (size_t m = 0; m < ARRAY_SIZE(labels); m++)
                        amds |= strcmp(labels[m].name, u) == 0 && strcmp(u, "CLUSTER_NAME") != 0;
                if (amds || reserved(l)) {
                        config_tally_add(&own, w->file, k,
                                         "%s: the label %s is the exporter's own and cannot be set "
                                         "(ignored)", path, k->text);
                        continue;
                }
                bool dup = false;
                for (size_t m = 0; *out && (*out)[m]; m += 2)
                        dup |= strcmp((*out)[m], l) == 0;
                if (dup) {
                        config_tally_add(&twice, w->file, k,
                                         "%s: the label %s is given twice (the first kept)", path, l);
                        continue;
                }
                if (n == max) {
                        warn(w->warnings, w->file, k, "%s: more than %zu labels, the rest ignored %s",
                             path, max, why);
                        break;
                }
                *out = strv_push(*out, l);
                *out = strv_push(*out, v->text);
                n++;
        }
        _cleanup_free_ char *many_own =
                xasprintf("labels in %s that are the exporter's own and cannot be set (ignored)", path);
        _cleanup_free_ char *many_twice =
                xasprintf("labels in %s given twice (the first kept)", path);
        config_tally_flush(&own, w->warnings, w->file, many_own);
        config_tally_flush(&twice, w->warnings, w->file, many_twice);
        return 0;
}

static int parse_gpu(struct config_walk *w, const struct config_node *gpu,
                     struct amd_exporter_config *c)
{
        static const char *const known[] = { "Selector",       "Fields",         "Labels",
                                             "HealthThresholds", "CustomLabels", "ExtraPodLabels",
                                             "ProfilerMetrics", NULL };
        int r = config_walk_map(w, gpu, "GPUConfig", known);
        if (r < 0)
                return r;
        const struct config_node *list = NULL;
        r = config_walk_list(w, gpu, "Fields", "GPUConfig", &list);
        if (r == 0 && list)
                r = parse_fields(w, list, c);
        list = NULL;
        if (r == 0)
                r = config_walk_list(w, gpu, "Labels", "GPUConfig", &list);
        if (r == 0 && list)
                r = parse_labels(w, list, c);
        const struct config_node *map = config_node_get(gpu, "CustomLabels");
        if (r == 0 && map && !config_node_is_null(map))
                r = label_map(w, map, "GPUConfig.CustomLabels", AMD_EXPORTER_CUSTOM_LABELS_MAX,
                              "as AMD's exporter does", &c->custom);
        map = config_node_get(gpu, "ExtraPodLabels");
        if (r == 0 && map && !config_node_is_null(map))
                r = label_map(w, map, "GPUConfig.ExtraPodLabels", AMD_EXPORTER_POD_LABELS_MAX,
                              "(devlet keeps at most that many labels of a pod)", &c->pod_labels);
        static const char *const unread[] = { "Selector", "HealthThresholds", "ProfilerMetrics" };
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(unread); i++) {
                const struct config_node *n = config_node_get(gpu, unread[i]);
                if (n && !config_node_is_null(n))
                        warn(w->warnings, w->file, n, "GPUConfig.%s is not read by devlet (ignored)",
                             unread[i]);
        }
        return r;
}

static int parse_common(struct config_walk *w, const struct config_node *common,
                        struct amd_exporter_config *c)
{
        static const char *const known[] = { "MetricsFieldPrefix", "HealthService", "Logging",
                                             "ProfilerConfig", "Debug", NULL };
        int r = config_walk_map(w, common, "CommonConfig", known);
        if (r < 0)
                return r;
        const char *prefix = NULL;
        const struct config_node *n = NULL;
        r = config_walk_string(w, common, "MetricsFieldPrefix", "CommonConfig", &prefix, &n);
        if (r < 0)
                return r;
        if (prefix && *prefix && !prom_name(prefix, true))
                warn(w->warnings, w->file, n,
                     "CommonConfig.MetricsFieldPrefix \"%s\" is not a metric name prefix; no prefix, "
                     "as AMD's exporter does", prefix);
        else if (prefix) {
                free(c->prefix);
                c->prefix = xstrdup(prefix);
        }
        for (size_t i = 1; known[i]; i++) {
                n = config_node_get(common, known[i]);
                if (n && !config_node_is_null(n))
                        warn(w->warnings, w->file, n,
                             "CommonConfig.%s is not read by devlet (its own settings apply)", known[i]);
        }
        return 0;
}

int amd_exporter_config_parse(const char *file, const char *data, size_t len,
                              struct amd_exporter_config **out, char ***warnings,
                              struct diag *diag)
{
        if (len > EXPORTER_CONFIG_MAX)
                return diag_set_at(diag, -EINVAL, file, 0, 0, "larger than %d bytes",
                                   EXPORTER_CONFIG_MAX);
        struct config_node *root = NULL;
        int r = config_tree_parse(file, data, len, &root, diag);
        if (r < 0)
                return r;
        _cleanup_strv_free_ char **w_list = NULL;
        struct config_walk w = { .file = file, .diag = diag, .warnings = &w_list };
        struct amd_exporter_config *c = xcalloc(1, sizeof(*c));
        c->prefix = xstrdup("");
        if (root) {
                static const char *const known[] = { "ServerPort", "GPUConfig", "CommonConfig",
                                                     "NICConfig", "IFOEConfig", NULL };
                r = config_walk_map(&w, root, "the file", known);
                if (r == 0)
                        r = config_walk_uint(&w, root, "ServerPort", "", 0, 65535, &c->server_port,
                                             NULL);
                const struct config_node *n = config_node_get(root, "GPUConfig");
                if (r == 0 && n && !config_node_is_null(n))
                        r = parse_gpu(&w, n, c);
                n = config_node_get(root, "CommonConfig");
                if (r == 0 && n && !config_node_is_null(n))
                        r = parse_common(&w, n, c);
        }
        config_tree_free(root);
        if (r < 0) {
                amd_exporter_config_free(c);
                return r;
        }
        for (size_t i = 0; warnings && w_list && w_list[i]; i++)
                *warnings = strv_push(*warnings, w_list[i]);
        *out = c;
        return 0;
}

int amd_exporter_config_load(const char *path, char **text, struct amd_exporter_config **out,
                             char ***warnings, struct diag *diag)
{
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = fs_read_file(path, EXPORTER_CONFIG_MAX, &data, &len);
        if (r == -ENOENT) {
                struct amd_exporter_config *c = xcalloc(1, sizeof(*c));
                c->prefix = xstrdup("");
                *out = c;
                *text = NULL;
                return 0;
        }
        if (r == -EFBIG)
                return diag_set_at(diag, -EINVAL, path, 0, 0, "larger than %d bytes",
                                   EXPORTER_CONFIG_MAX);
        if (r < 0)
                return diag_set_at(diag, r, path, 0, 0, "cannot read: %s", fs_strerror(r));
        r = amd_exporter_config_parse(path, data, len, out, warnings, diag);
        if (r < 0)
                return r;
        *text = TAKE_PTR(data);
        return 0;
}

void amd_exporter_config_free(struct amd_exporter_config *c)
{
        if (!c)
                return;
        strv_free(c->fields);
        strv_free(c->labels);
        strv_free(c->custom);
        strv_free(c->pod_labels);
        free(c->prefix);
        free(c);
}
