/* devlet's entry point: subcommand dispatch, and where backends' reports go. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "config/config.h"
#include "daemon.h"
#include "devices/device.h"
#include "persona.h"

static void usage(FILE *f)
{
        fputs("usage: devlet <command> [flags]\n"
              "\n"
              "devlet makes a Kubernetes node's devices usable and observable: a kubelet\n"
              "device plugin for host devices (and GPUs), in one small daemon.\n"
              "\n"
              "commands:\n"
              "  run       serve the node's devices to the kubelet (the DaemonSet's job)\n"
              "  list      print the resources and devices devlet would serve\n"
              "  probe     act as the kubelet toward one plugin socket and print its answers\n"
              "  labels    print the node's feature-discovery labels (GFD's, for NFD)\n"
              "  cdi       `cdi generate`: print or write the CDI specs of the node's devices\n"
              "  metrics   print one collection of the GPU metrics (Prometheus text format)\n"
              "  version   print the version\n"
              "  mps-control-daemon  run NVIDIA's MPS control daemons (the MPS sidecar)\n"
              "  dra cleanup         delete this node's ResourceSlices (uninstalling devlet)\n"
              "  help      print this text; `devlet help flags` lists every flag,\n"
              "            `devlet help <command>` that command's help\n"
              "\n"
              "`devlet <command> --help` prints that command's flags.  Flags without a\n"
              "command (`devlet --mig-strategy=mixed`, as NVIDIA's image runs its plugin)\n"
              "mean `devlet run`.\n",
              f);
}

static int wants_help(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--") == 0)
                        break;
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
                        return 1;
        }
        return 0;
}

static int dispatch(int argc, char **argv);

static int cmd_run(int argc, char **argv)
{
        struct devlet_config *cfg = NULL;
        int r = cmd_load_config(argc, argv, &cfg, NULL);
        if (r)
                return r;
        log_set_verbosity((int)cfg->verbosity);
        return daemon_run(cfg, argc, argv);
}

/* What a backend reports for the operator becomes a log line under its
 * name; a warning about the host, once per process. */
static void report_to_log(enum dev_report_level level, const char *backend, const char *msg,
                          void *ud)
{
        if (level == DEV_REPORT_HOST_WARN)
                log_emit_once(LOG_WARN, backend, "%s", msg);
        else
                log_emit(level == DEV_REPORT_ERROR  ? LOG_ERROR
                         : level == DEV_REPORT_WARN ? LOG_WARN
                                                    : LOG_INFO,
                         backend, "%s", msg);
}

/* Runs argv as the vendor tool persona names (see persona.h). */
static int run_persona(const char *persona, int argc, char **argv)
{
        struct diag diag = { 0 };
        struct persona_run pr = { 0 };
        int r = persona_translate(persona, argc, argv, &pr, &diag);
        if (r == 1)
                return 0;
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                fprintf(stderr, "%s: %s\n", persona, diag_format(&diag, buf, sizeof(buf)));
                return EXIT_USAGE;
        }
        config_set_defaults(pr.defaults);
        for (size_t i = 0; pr.notes && pr.notes[i]; i++)
                log_warn("persona", "%s", pr.notes[i]);
        log_info("persona", "answering as %s command=%s", persona, pr.argv[0]);
        /* dispatch() takes the command at argv[1], after a program name */
        _cleanup_free_ char **full = xcalloc((size_t)pr.argc + 2, sizeof(char *));
        full[0] = argv[0];
        for (int i = 0; i < pr.argc; i++)
                full[i + 1] = pr.argv[i];
        /* pr.argv stays alive while the command runs: a running daemon
         * reloads from it */
        r = dispatch(pr.argc + 1, full);
        persona_run_clear(&pr);
        return r;
}

int main(int argc, char **argv)
{
        dev_report_sink(report_to_log, NULL);
        const char *persona = persona_of(argv[0]);
        if (persona)
                return run_persona(persona, argc, argv);
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        const char *cmd = argv[1];
        /* NVIDIA's image runs its plugin with flags and no subcommand:
         * `devlet --mig-strategy=mixed` is `devlet run --mig-strategy=mixed` */
        if (cmd[0] == '-' && strcmp(cmd, "--version") != 0 && strcmp(cmd, "--help") != 0 &&
            strcmp(cmd, "-h") != 0) {
                static char run_name[] = "run";
                _cleanup_free_ char **run_argv = xcalloc((size_t)argc + 1, sizeof(char *));
                run_argv[0] = run_name;
                for (int i = 1; i < argc; i++)
                        run_argv[i] = argv[i];
                return cmd_run(argc, run_argv);
        }
        if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
                printf("devlet %s\n", DEVLET_VERSION);
                return 0;
        }
        if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
                if (argc > 2 && strcmp(argv[2], "flags") == 0) {
                        config_print_help(dev_config_families(), stdout);
                        return 0;
                }
                if (argc > 2 && strcmp(argv[2], "options-json") == 0) {
                        /* not in the usage: the option and section tables as
                         * JSON, with what a change of each needs, for tests */
                        _cleanup_free_ char *table = config_table_json(dev_config_families());
                        puts(table);
                        return 0;
                }
                if (argc > 2) {
                        /* `devlet help run` is `devlet run --help` */
                        static char help_flag[] = "--help";
                        char *help_argv[] = { argv[0], argv[2], help_flag, NULL };
                        return dispatch(3, help_argv);
                }
                usage(stdout);
                return 0;
        }
        return dispatch(argc, argv);
}

static int dispatch(int argc, char **argv)
{
        const char *cmd = argv[1];

        static const struct {
                const char *name;
                int (*fn)(int argc, char **argv);
                /* NULL: the command parses its own flags; else --help lists the
                 * config flags, then these, the command's own */
                const char *own_flags;
        } cmds[] = {
                { "run", cmd_run, "" },
                { "list", cmd_list, " [-o table|json]" },
                { "probe", cmd_probe, NULL },
                { "cdi", cmd_cdi, NULL },
                { "labels", cmd_labels, "" },
                { "metrics", cmd_metrics, "" },
                { "mps-control-daemon", cmd_mps, "" },
                { "dra", cmd_dra, NULL },
                { "config-manager", cmd_config_manager, NULL },
                { "mps-mount-shm", cmd_mps_mount_shm, NULL },
        };
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                if (strcmp(cmd, cmds[i].name) != 0)
                        continue;
                if (cmds[i].own_flags && wants_help(argc - 1, argv + 1)) {
                        printf("usage: devlet %s [flags]%s\n\nflags (flag > env > config file > default):\n",
                               cmd, cmds[i].own_flags);
                        config_print_help(dev_config_families(), stdout);
                        return 0;
                }
                return cmds[i].fn(argc - 1, argv + 1);
        }
        fprintf(stderr, "devlet: unknown command \"%s\"\n\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
}
