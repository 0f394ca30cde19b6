/* devlet's `health` section of the config file:
 *
 *   health:
 *     recovery:
 *       enabled: true      # default false: an unhealthy GPU stays unhealthy
 *       quietPeriod: 60s   # how long without new critical events before it
 *                          # comes back (once NVML answers for it again)
 *
 * NVIDIA's plugin has its own keys under `health` (disabled, eventTypes,
 * ignoredXIDs, criticalXIDs); devlet does not act on them, so they are
 * warned about as unknown keys like any other.  The result reaches the
 * caller only when the whole section is good.  Never logs. */
#include "config/sections.h"

int config_health_parse(const struct config_node *node, const char *file, struct health_cfg *out,
                        char ***warnings, struct diag *diag)
{
        static const char *const known[] = { "recovery", NULL };
        static const char *const recovery_known[] = { "enabled", "quietPeriod", NULL };
        struct config_walk w = { .file = file, .diag = diag, .warnings = warnings };
        struct health_cfg h = { .recovery_quiet_ms = CONFIG_HEALTH_QUIET_DEFAULT_MS };
        const char *path = "health.recovery";
        int r;

        if (!config_node_is_null(node)) {
                if ((r = config_walk_map(&w, node, "health", known)) < 0)
                        return r;
                const struct config_node *rec = config_node_get(node, "recovery");
                if (rec && !config_node_is_null(rec)) {
                        const struct config_node *qn;
                        const char *s;
                        if ((r = config_walk_map(&w, rec, path, recovery_known)) < 0)
                                return r;
                        if ((r = config_walk_bool(&w, rec, "enabled", path, &h.recovery_enabled,
                                                  NULL)) < 0)
                                return r;
                        if ((r = config_walk_string(&w, rec, "quietPeriod", path, &s, &qn)) < 0)
                                return r;
                        if (s && (config_parse_duration(s, &h.recovery_quiet_ms) < 0 ||
                                  h.recovery_quiet_ms < 0))
                                return config_node_error(diag, file, qn,
                                                         "health.recovery.quietPeriod",
                                                         "\"%.100s\" is not a duration such as "
                                                         "30s, 5m or 1h (to never recover, set "
                                                         "enabled: false)",
                                                         s);
                }
        }
        *out = h;
        return 0;
}

bool config_health_equal(const struct health_cfg *a, const struct health_cfg *b)
{
        return a->recovery_enabled == b->recovery_enabled &&
               a->recovery_quiet_ms == b->recovery_quiet_ms;
}
