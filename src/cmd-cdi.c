/* `devlet cdi generate`: the CDI specs of this node's devices, printed or
 * written to a file or a directory.  Backends are created without a loop
 * (one scan, no watching), as `devlet list` does; every other flag is
 * configuration (--config-file, --backends, --nvidia-driver-root, ...). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "cdi/generate.h"
#include "cmd.h"
#include "config/config.h"
#include "devices/device.h"

static void cdi_usage(FILE *f)
{
        fputs("usage: devlet cdi generate [--output FILE|-] [--output-dir DIR] [--format yaml|json]\n"
              "                           [--vendor V --class C] [config flags]\n"
              "\n"
              "Prints the CDI specs of the node's devices (one YAML document or JSON object\n"
              "per spec), or writes them:\n"
              "  --output FILE     write the one spec to FILE (\"-\": standard output, the default)\n"
              "  --output-dir DIR  write each spec to DIR/<vendor>-<class>.<format>\n"
              "  --format F        yaml (default) or json\n"
              "  --vendor V        vendor of a GPU spec's kind (default: the GPU vendor's,\n"
              "                    nvidia.com)\n"
              "  --class C         class of a GPU spec's kind (default: the vendor's, gpu)\n"
              "Host devices get the kind <domain>/<name>, one CDI device per device ID.\n"
              "Every config flag applies; `devlet help flags` lists them.\n",
              f);
}

struct cdi_args {
        const char *output, *output_dir, *format, *vendor, *klass;
};

/* Takes generate's own flags out of argv; the rest goes to rest, the
 * configuration's flags.  Returns 0 or EXIT_USAGE after printing why. */
static int parse_args(int argc, char **argv, struct cdi_args *a, char **rest, int *n_rest)
{
        const struct {
                const char *name;
                const char **slot;
        } flags[] = {
                { "--output", &a->output },   { "-o", &a->output },
                { "--output-dir", &a->output_dir }, { "--format", &a->format },
                { "--vendor", &a->vendor },   { "--class", &a->klass },
        };
        static char name[] = "cdi generate"; /* how config errors name us */
        rest[(*n_rest)++] = name;
        for (int i = 1; i < argc; i++) {
                const char *arg = argv[i];
                size_t f = 0, n = 0;
                for (; f < ARRAY_SIZE(flags); f++) {
                        n = strlen(flags[f].name);
                        if (strncmp(arg, flags[f].name, n) == 0 && (!arg[n] || arg[n] == '='))
                                break;
                }
                if (f == ARRAY_SIZE(flags)) {
                        rest[(*n_rest)++] = argv[i];
                        continue;
                }
                if (arg[n] == '=') {
                        *flags[f].slot = arg + n + 1;
                } else if (i + 1 < argc) {
                        *flags[f].slot = argv[++i];
                } else {
                        fprintf(stderr, "devlet cdi generate: %s needs a value\n", arg);
                        return EXIT_USAGE;
                }
        }
        return 0;
}

struct cdi_collect {
        const struct dev_cdi_opts *opts;
        struct cdi_spec_list *specs;
};

static void cdi_collect_backend(const struct dev_backend_ops *ops, struct dev_backend *b, void *ud)
{
        struct cdi_collect *c = ud;
        cdi_specs_for_backend(ops, b, c->opts, c->specs);
}

static int generate(int argc, char **argv)
{
        struct cdi_args a = { .output = "-", .format = "yaml" };
        _cleanup_free_ char **rest = xcalloc((size_t)argc + 1, sizeof(*rest));
        int n_rest = 0;
        int r = parse_args(argc, argv, &a, rest, &n_rest);
        if (r)
                return r;
        enum cdi_format format;
        if (strcmp(a.format, "yaml") == 0) {
                format = CDI_FORMAT_YAML;
        } else if (strcmp(a.format, "json") == 0) {
                format = CDI_FORMAT_JSON;
        } else {
                fprintf(stderr, "devlet cdi generate: unknown format \"%s\" (yaml or json)\n",
                        a.format);
                return EXIT_USAGE;
        }
        if ((a.vendor && !cdi_valid_vendor(a.vendor)) || (a.klass && !cdi_valid_class(a.klass))) {
                _cleanup_free_ char *kind = xasprintf("%s/%s", a.vendor ? a.vendor : "<vendor>",
                                                      a.klass ? a.klass : "<class>");
                fprintf(stderr, "devlet cdi generate: \"%s\" is not a valid CDI kind: vendor and "
                                "class start with a letter, end with a letter or digit and hold "
                                "letters, digits, '_', '-' and '.'\n",
                        kind);
                return EXIT_USAGE;
        }

        struct devlet_config *cfg = NULL;
        r = cmd_load_config(n_rest, rest, &cfg, NULL);
        if (r)
                return r;

        struct cdi_spec_list specs = { 0 };
        struct dev_cdi_opts opts = {
                .cfg = cfg, .standalone = true, .vendor = a.vendor, .klass = a.klass
        };
        struct cdi_collect c = { .opts = &opts, .specs = &specs };
        int rc = cmd_each_backend("cdi generate", cfg, cdi_collect_backend, &c);
        for (size_t i = 0; specs.warnings && specs.warnings[i]; i++)
                fprintf(stderr, "devlet cdi generate: warning: %s\n", specs.warnings[i]);

        if (specs.n == 0) {
                fprintf(stderr, "devlet cdi generate: no devices to describe\n");
                rc = 1;
        } else if (a.output_dir) {
                for (size_t i = 0; i < specs.n; i++) {
                        _cleanup_free_ char *path = NULL;
                        struct diag diag = { 0 };
                        char buf[DIAG_FORMAT_MAX];
                        if (cdi_spec_write(specs.specs[i], a.output_dir, format, &path, &diag) < 0) {
                                fprintf(stderr, "devlet cdi generate: %s\n",
                                        diag_format(&diag, buf, sizeof(buf)));
                                rc = 1;
                        } else {
                                fprintf(stderr, "devlet cdi generate: wrote %s\n", path);
                        }
                }
        } else if (strcmp(a.output, "-") != 0 && specs.n > 1) {
                fprintf(stderr, "devlet cdi generate: %zu specs (", specs.n);
                for (size_t i = 0; i < specs.n; i++)
                        fprintf(stderr, "%s%s", i ? ", " : "", specs.specs[i]->kind);
                fprintf(stderr, ") do not fit one file: use --output-dir, or choose with "
                                "--backends\n");
                rc = 1;
        } else {
                for (size_t i = 0; i < specs.n && rc == 0; i++) {
                        _cleanup_free_ char *data = NULL;
                        struct diag diag = { 0 };
                        char buf[DIAG_FORMAT_MAX];
                        size_t len = 0;
                        r = cdi_spec_render(specs.specs[i], format, &data, &len, &diag);
                        if (r < 0) {
                                fprintf(stderr, "devlet cdi generate: %s\n",
                                        diag_format(&diag, buf, sizeof(buf)));
                                rc = 1;
                        } else if (strcmp(a.output, "-") == 0) {
                                fwrite(data, 1, len, stdout);
                        } else if ((r = fs_write_atomic_at(AT_FDCWD, a.output, data, len, 0644,
                                                           FS_CREATE, &diag)) < 0) {
                                fprintf(stderr, "devlet cdi generate: cannot write %s: %s\n",
                                        a.output, diag.message);
                                rc = 1;
                        }
                }
        }
        cdi_spec_list_release(&specs);
        config_free(cfg);
        return rc;
}

int cmd_cdi(int argc, char **argv)
{
        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
                cdi_usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : 0;
        }
        if (strcmp(argv[1], "generate") != 0) {
                fprintf(stderr, "devlet cdi: unknown command \"%s\" (generate)\n\n", argv[1]);
                cdi_usage(stderr);
                return EXIT_USAGE;
        }
        for (int i = 2; i < argc; i++) {
                if (strcmp(argv[i], "--") == 0)
                        break;
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        cdi_usage(stdout);
                        return 0;
                }
        }
        return generate(argc - 1, argv + 1);
}
