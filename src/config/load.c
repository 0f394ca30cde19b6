/* Loading a config: defaults, the config file, environment variables and
 * the command line, in that order, so the later source wins; the command
 * line is parsed first, so a bad flag is reported before any file is read.
 * The families' option sets finish last, once every source is applied.  The
 * option table is options.c's, the file's meaning file.c's.
 *
 * Never logs and never exits: every problem goes back as -EINVAL with a
 * diag that names the flag, env var or file position and what is allowed. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "config/options.h"
#include "config/sections.h"
#include "config/web.h"

/* ---- the whole config ---- */

static const char *const *default_overrides;

void config_set_defaults(const char *const *items)
{
        default_overrides = items;
}

/* The default text of opt: an override's, else the table's. */
static const char *option_default(const struct config_option *opt)
{
        size_t len = strlen(opt->flag);
        for (size_t i = 0; default_overrides && default_overrides[i]; i++)
                if (strncmp(default_overrides[i], opt->flag, len) == 0 &&
                    default_overrides[i][len] == '=')
                        return default_overrides[i] + len + 1;
        return opt->default_value;
}

struct devlet_config *config_new_defaults(const struct config_families *families)
{
        struct devlet_config *cfg = xcalloc(1, sizeof(*cfg));
        cfg->families = families;
        config_options_alloc(cfg);
        const struct config_option *opt;
        for (size_t i = 0; (opt = config_option_at(families, i)); i++) {
                union config_value v = { 0 };
                int r = config_value_parse(families, opt, option_default(opt), opt->flag, &v,
                                           NULL);
                if (r < 0)
                        abort(); /* a bad default (table or override) is a programming error */
                config_value_store(cfg, opt, &v);
        }
        cfg->hostdev.domain = xstrdup("devlet.io");
        cfg->health.recovery_quiet_ms = CONFIG_HEALTH_QUIET_DEFAULT_MS;
        return cfg;
}

void config_free(struct devlet_config *cfg)
{
        if (!cfg)
                return;
        config_options_free(cfg);
        config_sections_clear(cfg);
        strv_free(cfg->warnings);
        config_web_free(cfg->web);
        free(cfg);
}

DEFINE_CLEANUP_FUNC(struct devlet_config, config_free)

/* ---- command line ---- */

static const struct config_option *find_short(const struct config_families *f, char c)
{
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(f, i)); i++) {
                if (o->short_flag && o->short_flag == c)
                        return o;
        }
        return NULL;
}

/* Levenshtein distance; SIZE_MAX for names too long to be worth it. */
static size_t edit_distance(const char *a, size_t la, const char *b)
{
        size_t lb = strlen(b);
        if (la > 64 || lb > 64)
                return SIZE_MAX;
        size_t row[65];
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t best = diag + (a[i - 1] != b[j - 1]);
                        if (up + 1 < best)
                                best = up + 1;
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

static int unknown_flag(const struct config_families *f, const char *shown, const char *name,
                        size_t len, struct diag *diag)
{
        const char *best = NULL;
        size_t best_d = 3;
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(f, i)); i++) {
                const char *names[] = { o->flag, o->alias };
                for (size_t j = 0; j < ARRAY_SIZE(names); j++) {
                        if (!names[j])
                                continue;
                        /* a suggestion must keep something of what was typed */
                        size_t d = edit_distance(name, len, names[j]);
                        if (d < best_d && d < len && d < strlen(names[j])) {
                                best_d = d;
                                best = names[j];
                        }
                }
        }
        if (best)
                return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                   "unknown flag %.*s%.*s; did you mean --%s?",
                                   (int)(name - shown), shown, (int)len, name, best);
        return diag_set_at(diag, -EINVAL, NULL, 0, 0, "unknown flag %.*s%.*s", (int)(name - shown),
                           shown, (int)len, name);
}

/* Collects argv's flags into s; *first_arg gets the index of the first
 * argument that is not a flag (argc if none). */
static int parse_args(const struct config_families *f, int argc, char **argv,
                      struct config_pending *s, int *first_arg, struct diag *diag)
{
        int i;
        for (i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--") == 0) {
                        i++;
                        break;
                }
                if (a[0] != '-' || a[1] == '\0')
                        break;

                const struct config_option *opt;
                const char *value = NULL;
                char who[80];
                if (a[1] == '-') {
                        const char *name = a + 2;
                        const char *eq = strchr(name, '=');
                        size_t len = eq ? (size_t)(eq - name) : strlen(name);
                        opt = config_option_by_flag(f, name, len);
                        if (!opt)
                                return unknown_flag(f, a, name, len, diag);
                        snprintf(who, sizeof(who), "--%.*s", (int)len, name);
                        if (eq)
                                value = eq + 1;
                } else {
                        /* Go's single-dash form (-name=VALUE), as the vendors'
                         * tools take it: accepted for the alias spellings only
                         * (the vendors' own names), so -mig-strategy still gets
                         * a hint */
                        const char *eq = strchr(a + 1, '=');
                        size_t len = eq ? (size_t)(eq - a - 1) : strlen(a + 1);
                        opt = len > 1 ? config_option_by_flag(f, a + 1, len) : NULL;
                        if (opt && !(opt->alias && strlen(opt->alias) == len &&
                                     strncmp(opt->alias, a + 1, len) == 0))
                                opt = NULL;
                        if (opt) {
                                snprintf(who, sizeof(who), "-%.*s", (int)len, a + 1);
                                if (eq)
                                        value = eq + 1;
                        } else {
                                opt = find_short(f, a[1]);
                                if (!opt)
                                        return unknown_flag(f, a, a + 1, len, diag);
                                snprintf(who, sizeof(who), "-%c", a[1]);
                                if (a[2] == '=')
                                        value = a + 3;
                                else if (a[2])
                                        value = a + 2;
                        }
                }
                if (!value) {
                        if (opt->type == CONFIG_BOOL)
                                value = "true"; /* bools take a value only as --flag=VALUE */
                        else if (i + 1 < argc)
                                value = argv[++i];
                        else
                                return diag_set_at(diag, -EINVAL, NULL, 0, 0,
                                                   "flag %s needs a value", who);
                }
                union config_value v = { 0 };
                int r = config_value_parse(f, opt, value, who, &v, diag);
                if (r < 0)
                        return r;
                config_pending_add(s, opt, &v);
        }
        *first_arg = i;
        return 0;
}

/* The value of opt's first env var that is set and not empty, or NULL. */
static const char *option_env(const struct config_option *opt, const char **name)
{
        for (size_t i = 0; i < ARRAY_SIZE(opt->envs) && opt->envs[i]; i++) {
                const char *v = getenv(opt->envs[i]);
                if (v && v[0]) {
                        if (name)
                                *name = opt->envs[i];
                        return v;
                }
        }
        return NULL;
}

static int apply_env(struct devlet_config *cfg, struct diag *diag)
{
        const struct config_option *opt;
        for (size_t i = 0; (opt = config_option_at(cfg->families, i)); i++) {
                const char *name;
                const char *text = option_env(opt, &name);
                if (!text)
                        continue;
                union config_value v = { 0 };
                int r = config_value_parse(cfg->families, opt, text, name, &v, diag);
                if (r < 0)
                        return r;
                config_value_store(cfg, opt, &v);
        }
        return 0;
}

static int load_file(struct devlet_config *cfg, const char *path, struct diag *diag)
{
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = fs_read_file(path, CONFIG_FILE_MAX, &data, &len);
        if (r == -EFBIG)
                return diag_set_at(diag, -EINVAL, path, 0, 0, "larger than %d bytes",
                                   CONFIG_FILE_MAX);
        if (r < 0)
                return diag_set_at(diag, r, path, 0, 0, "cannot read: %s", fs_strerror(r));
        return config_parse_yaml(path, data, len, cfg, diag);
}

/* --dra-resources: RESOURCE[=dra|both|device-plugin] items (dra/ reads them). */
static int check_dra_resources(char *const *items, struct diag *diag)
{
        static const char *const modes[] = { "dra", "both", "device-plugin" };
        for (size_t i = 0; items && items[i]; i++) {
                const char *eq = strchr(items[i], '=');
                if (eq == items[i] || !items[i][0])
                        return diag_set(diag, -EINVAL, "--dra-resources: \"%s\" names no resource",
                                        items[i]);
                bool known = !eq;
                for (size_t k = 0; eq && k < ARRAY_SIZE(modes); k++)
                        known = known || strcmp(eq + 1, modes[k]) == 0;
                if (!known)
                        return diag_set(diag, -EINVAL,
                                        "--dra-resources: %s: unknown mode \"%s\" (dra, both or "
                                        "device-plugin)",
                                        items[i], eq + 1);
        }
        return 0;
}

/* --kube-api-qps: a decimal number (GFD's is a float: "7.5"). */
static int read_qps(const char *text, double *out, struct diag *diag)
{
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (!text[0] || *end || errno || !isfinite(v))
                return diag_set(diag, -EINVAL, "--kube-api-qps: \"%.40s\" is not a number", text);
        *out = v;
        return 0;
}

int config_load(const struct config_families *families, int argc, char **argv,
                struct devlet_config **out, struct diag *diag, int *argi)
{
        struct diag scratch;
        if (!diag)
                diag = &scratch;
        memset(diag, 0, sizeof(*diag));

        _cleanup_(config_pending_clear) struct config_pending flags = { 0 };
        int first_arg = argc;
        int r = parse_args(families, argc, argv, &flags, &first_arg, diag);
        if (r < 0)
                return r;
        if (first_arg < argc && !argi)
                return diag_set_at(diag, -EINVAL, NULL, 0, 0, "unexpected argument \"%.100s\"",
                                   argv[first_arg]);

        _cleanup_(config_freep) struct devlet_config *cfg = config_new_defaults(families);

        const struct config_option *file_opt = config_option_by_flag(families, "config-file", 11);
        const char *path = option_env(file_opt, NULL);
        for (size_t i = 0; i < flags.n; i++)
                if (flags.items[i].opt == file_opt)
                        path = flags.items[i].v.s;
        if (path && path[0]) {
                r = load_file(cfg, path, diag);
                if (r < 0)
                        return r;
        }

        r = apply_env(cfg, diag);
        if (r < 0)
                return r;
        const struct config_option *socket_opt = config_option_by_flag(families, "kubelet-socket", 14);
        for (size_t i = 0; i < flags.n; i++)
                if (flags.items[i].opt == socket_opt)
                        cfg->kubelet_disabled = !flags.items[i].v.s[0];
        config_pending_store(&flags, cfg);

        r = config_options_finish(cfg, diag);
        if (r < 0)
                return r;

        if (!cfg->kubelet_socket[0]) {
                size_t n = strlen(cfg->plugin_directory);
                while (n > 1 && cfg->plugin_directory[n - 1] == '/')
                        n--;
                free(cfg->kubelet_socket);
                cfg->kubelet_socket = xasprintf("%.*s/kubelet.sock", (int)n, cfg->plugin_directory);
        }

        r = check_dra_resources(cfg->dra_resources, diag);
        if (r < 0)
                return r;
        r = read_qps(cfg->kube_api_qps, &cfg->kube_api_qps_value, diag);
        if (r < 0)
                return r;

        if (cfg->collectors_file && cfg->collectors_file[0]) {
                r = config_counters_load(cfg->collectors_file, &cfg->collectors, diag);
                if (r < 0)
                        return r;
        }

        if (cfg->web_config_file && cfg->web_config_file[0]) {
                _cleanup_free_ char *text = NULL;
                r = config_web_load(cfg->web_config_file, &cfg->web, &text, &cfg->warnings, diag);
                if (r < 0)
                        return r;
                cfg->web_config_text = strv_push(NULL, text);
        }

        r = config_options_load(cfg, diag);
        if (r < 0)
                return r;

        if (argi)
                *argi = first_arg;
        *out = TAKE_PTR(cfg);
        return 0;
}

char *config_node_name(const struct devlet_config *cfg)
{
        if (cfg->node_name && cfg->node_name[0])
                return xstrdup(cfg->node_name);
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) < 0)
                host[0] = '\0';
        return xstrdup(host);
}

bool config_serves(const struct devlet_config *cfg, const char *what)
{
        return strv_contains(cfg->serve, what);
}

const char *config_host_dev_root(const struct devlet_config *cfg)
{
        return cfg->dev_root[0] ? cfg->dev_root : "/";
}
