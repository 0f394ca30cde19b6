/* Test tool for tests/integration/test_helm.py: devlet's effective
 * configuration for a command line, the env and the config file it names,
 * printed whole as the JSON that `devlet run` logs as `config: running
 * with config=...` (whose log line is cut at the logger's 2 KiB).
 *
 *   config-dump [run's flags...]
 *
 * Loads as `devlet run` does (defaults, the file, env vars, flags) and
 * prints the JSON on one line, and each warning (an unknown key...) on
 * stderr as "warning: ...".  Exit: 0, or 2 with the diag on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "base/diag.h"
#include "config/config.h"
#include "devices/device.h"

int main(int argc, char **argv)
{
        char name[] = "run";
        argv[0] = name;
        struct devlet_config *cfg = NULL;
        struct diag diag = { 0 };
        if (config_load(dev_config_families(), argc, argv, &cfg, &diag, NULL) < 0) {
                char buf[DIAG_FORMAT_MAX];
                fprintf(stderr, "config-dump: %s\n", diag_format(&diag, buf, sizeof(buf)));
                return 2;
        }
        char *json = config_to_json(cfg);
        if (!json) {
                config_free(cfg);
                return 2;
        }
        puts(json);
        for (size_t i = 0; cfg->warnings && cfg->warnings[i]; i++)
                fprintf(stderr, "warning: %s\n", cfg->warnings[i]);
        free(json);
        config_free(cfg);
        return 0;
}
