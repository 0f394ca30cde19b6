/* `devlet metrics`: one collection of the metrics endpoint's device
 * families (with attribution) printed to stdout in the Prometheus text
 * format.  The backends are created once, without a loop, for their
 * samplers, which outlive them. */
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "config/config.h"
#include "devices/device.h"
#include "metrics/metrics.h"

struct samplers {
        struct dev_sampler **v;
        size_t n;
};

static void take_sampler(const struct dev_backend_ops *ops, struct dev_backend *b, void *ud)
{
        struct samplers *s = ud;
        struct dev_sampler *smp = ops->sampler ? ops->sampler(b) : NULL;
        if (!smp)
                return;
        s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
        s->v[s->n++] = smp;
}

int cmd_metrics(int argc, char **argv)
{
        struct devlet_config *cfg = NULL;
        int r = cmd_load_config(argc, argv, &cfg, NULL);
        if (r)
                return r;
        log_set_verbosity((int)cfg->verbosity);
        struct samplers s = { 0 };
        /* a backend that cannot start is reported; the others are measured */
        (void)cmd_each_backend("metrics", cfg, take_sampler, &s);
        r = metrics_print_once(cfg, s.v, s.n, stdout);
        for (size_t i = 0; i < s.n; i++)
                dev_sampler_unref(s.v[i]);
        free(s.v);
        config_free(cfg);
        return r;
}
