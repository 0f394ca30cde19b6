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

/* Loads the configuration for a subcommand, printing errors and warnings to
 * stderr.  Returns 0, or EXIT_USAGE / 1 after printing why. */
struct devlet_config;
int cmd_load_config(int argc, char **argv, struct devlet_config **out, int *argi);

#endif
