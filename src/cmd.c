/* Helpers the subcommands share: loading the configuration with readable
 * errors, and visiting each selected backend once, without a loop. */
#include "cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "config/config.h"
#include "devices/device.h"

int cmd_load_config(int argc, char **argv, struct devlet_config **out, int *argi)
{
        struct diag diag = { 0 };
        int r = config_load(dev_config_families(), argc, argv, out, &diag, argi);
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                fprintf(stderr, "devlet %s: %s\n", argv[0], diag_format(&diag, buf, sizeof(buf)));
                return EXIT_USAGE; /* whatever the cause: the file, a flag or a value */
        }
        /* the log format from here on (nothing logs before: a config error
         * above is printed plain); each command sets the verbosity */
        enum log_format f = LOG_FORMAT_TEXT;
        (void)log_format_from_name((*out)->log_format, &f); /* one of the row's choices */
        log_set_format(f);
        /* DEVLET_CHECK_CONFIG=1: check the command line, env vars and file
         * the command would run with, print the effective config, exit 0
         * (an error above exits 2 as ever) */
        const char *check = getenv("DEVLET_CHECK_CONFIG");
        if (check && strcmp(check, "1") == 0) {
                for (size_t i = 0; (*out)->warnings && (*out)->warnings[i]; i++)
                        fprintf(stderr, "devlet %s: warning: %s\n", argv[0], (*out)->warnings[i]);
                char *json = config_to_json(*out);
                printf("%s\n", json);
                free(json); /* exit() runs no cleanup attribute */
                config_free(TAKE_PTR(*out));
                exit(0);
        }
        /* `run` logs its warnings itself, with the rest of its log */
        if (strcmp(argv[0], "run") != 0)
                for (size_t i = 0; (*out)->warnings && (*out)->warnings[i]; i++)
                        fprintf(stderr, "devlet %s: warning: %s\n", argv[0], (*out)->warnings[i]);
        return 0;
}

int cmd_each_backend(const char *cmd, const struct devlet_config *cfg, cmd_backend_fn fn, void *ud)
{
        int rc = 0;
        for (size_t i = 0; dev_backends[i]; i++) {
                const struct dev_backend_ops *ops = dev_backends[i];
                if (!dev_backend_wanted(cfg, ops->name))
                        continue;
                struct dev_backend *b = NULL;
                struct diag why = { 0 };
                int r = ops->create(NULL, cfg, &b, &why);
                if (r < 0) {
                        fprintf(stderr, "devlet %s: backend %s: %s\n", cmd, ops->name,
                                why.message[0] ? why.message : strerror(-r));
                        rc = 1;
                        continue;
                }
                if (!b)
                        continue;
                fn(ops, b, ud);
                ops->destroy(b);
        }
        return rc;
}
