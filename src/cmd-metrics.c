/* `devlet metrics`: one collection of the metrics endpoint's GPU families
 * (with attribution) printed to stdout in the Prometheus text format. */
#include <stdio.h>

#include "base/log.h"
#include "cmd.h"
#include "config/config.h"
#include "metrics/metrics.h"

int cmd_metrics(int argc, char **argv)
{
        struct devlet_config *cfg = NULL;
        int r = cmd_load_config(argc, argv, &cfg, NULL);
        if (r)
                return r;
        log_set_verbosity((int)cfg->verbosity);
        r = metrics_print_once(cfg, stdout);
        config_free(cfg);
        return r;
}
