/* Subcommands other than run; each parses its own arguments (argv[0] is the
 * subcommand's name) and returns the process exit code: 0 success, 1 failure,
 * 2 usage or configuration error. */
#ifndef DEVLET_CMD_H
#define DEVLET_CMD_H

#define EXIT_USAGE 2

int cmd_list(int argc, char **argv);
int cmd_cdi(int argc, char **argv);
int cmd_labels(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_mps(int argc, char **argv);
int cmd_dra(int argc, char **argv);
int cmd_config_manager(int argc, char **argv);
int cmd_mps_mount_shm(int argc, char **argv);

struct devlet_config;
struct dev_backend;
struct dev_backend_ops;

/* Loads the configuration for a subcommand, printing errors and warnings to
 * stderr.  Returns 0, or EXIT_USAGE / 1 after printing why. */
int cmd_load_config(int argc, char **argv, struct devlet_config **out, int *argi);

typedef void (*cmd_backend_fn)(const struct dev_backend_ops *ops, struct dev_backend *b, void *ud);

/* Creates each backend cfg selects without a loop (one scan, no watching),
 * hands it to fn and destroys it; backends with nothing to serve are
 * skipped.  One that fails to start is reported on stderr as
 * "devlet <cmd>: backend <name>: <why>".  Returns 1 if any failed, else 0. */
int cmd_each_backend(const char *cmd, const struct devlet_config *cfg, cmd_backend_fn fn, void *ud);

#endif
