/* Where a config problem is and what it is: base's struct diag
 * (base/diag.h), "file:line:column: message", under config's older name
 * until config/ says diag.  The bottom of config/: includes nothing of
 * config's, so the YAML tree below the option table and a family's finish
 * hook above it can both set one. */
#ifndef DEVLET_CONFIG_DIAG_H
#define DEVLET_CONFIG_DIAG_H

#include <stddef.h>

#include "base/diag.h"

#define config_diag diag

/* Sets diag (may be NULL) and returns -EINVAL. */
int config_diag_set(struct config_diag *d, const char *file, int line, int column,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Formats "file:line:column: message" (or just the message) into buf. */
const char *config_diag_format(const struct config_diag *d, char *buf, size_t size);

#endif
