/* The error a user must read: a message, where it is (file, line, column,
 * each optional) and the context added on the way up.
 *
 * Functions that can fail return 0/positive or -errno (systemd's
 * convention).  Most failures need nothing more: the caller that decides
 * logs the code once (log_error_errno).  Where a person must be told what
 * to fix (a config file, a spec, a peer's reply), the function also takes a
 * `struct diag *` as its last parameter: it fills it on failure (NULL:
 * nobody wants the text), and each caller on the way up may put its
 * context in front with diag_prefix ("resource x: kind y: ...").  A diag
 * lives on the caller's stack; it owns no memory.  Knows nothing of
 * devlet. */
#ifndef DEVLET_BASE_DIAG_H
#define DEVLET_BASE_DIAG_H

#include <stddef.h>

struct diag {
        char file[256]; /* "" when the problem is in no file (a flag, a peer) */
        int line;       /* 1-based; 0: no position */
        int column;
        char message[1024]; /* room for a loader's list of paths tried and a hint */
};

/* Room diag_format needs for any diag. */
#define DIAG_FORMAT_MAX (sizeof(((struct diag *)0)->file) + sizeof(((struct diag *)0)->message) + 32)

/* Sets d (may be NULL) to the message, without a position; returns r (a
 * -errno), so that `return diag_set(d, -EINVAL, "...")` is one line. */
int diag_set(struct diag *d, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same at file:line:column (file NULL or "", line 0: unknown). */
int diag_set_at(struct diag *d, int r, const char *file, int line, int column, const char *fmt,
                ...) __attribute__((format(printf, 6, 7)));
/* Puts "context: " in front of d's message (d may be NULL); returns r. */
int diag_prefix(struct diag *d, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "file:line:column: message", "file: message" or "message" into buf. */
const char *diag_format(const struct diag *d, char *buf, size_t size);

#endif
