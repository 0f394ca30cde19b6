/* `devlet run`: the long-running job. */
#ifndef DEVLET_DAEMON_H
#define DEVLET_DAEMON_H

#include "config/config.h"

/* Runs until SIGTERM/SIGINT.  Takes cfg.  argc/argv (argv[0] = "run") are
 * kept to reload the same flags on SIGHUP.  Returns the process exit code. */
int daemon_run(struct devlet_config *cfg, int argc, char **argv);

#endif
