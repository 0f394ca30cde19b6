/* Where a config problem is and what it is: the diagnostics every layer of
 * config/ fills and every caller prints, "file:line:column: message".  The
 * bottom of config/: includes nothing of devlet's, so the YAML tree below
 * the option table and a family's finish hook above it can both set one. */
#ifndef DEVLET_CONFIG_DIAG_H
#define DEVLET_CONFIG_DIAG_H

#include <stddef.h>

/* line and column are 1-based; 0 when the problem has no position (a flag
 * or env var). */
struct config_diag {
        char file[256];
        int line;
        int column;
        char message[512];
};

/* Sets diag (may be NULL) and returns -EINVAL. */
int config_diag_set(struct config_diag *d, const char *file, int line, int column,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Formats "file:line:column: message" (or just the message) into buf. */
const char *config_diag_format(const struct config_diag *d, char *buf, size_t size);

#endif
