/* struct diag: setting, adding context, formatting.  Messages are cut at
 * the buffer's size, never allocated. */
#include "base/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 5, 0))) static void
diag_vset(struct diag *d, const char *file, int line, int column, const char *fmt, va_list ap)
{
        snprintf(d->file, sizeof(d->file), "%s", file ? file : "");
        d->line = line;
        d->column = column;
        vsnprintf(d->message, sizeof(d->message), fmt, ap);
}

int diag_set(struct diag *d, int r, const char *fmt, ...)
{
        if (!d)
                return r;
        va_list ap;
        va_start(ap, fmt);
        diag_vset(d, NULL, 0, 0, fmt, ap);
        va_end(ap);
        return r;
}

int diag_set_at(struct diag *d, int r, const char *file, int line, int column, const char *fmt,
                ...)
{
        if (!d)
                return r;
        va_list ap;
        va_start(ap, fmt);
        diag_vset(d, file, line, column, fmt, ap);
        va_end(ap);
        return r;
}

int diag_prefix(struct diag *d, int r, const char *fmt, ...)
{
        if (!d)
                return r;
        char context[sizeof(d->message)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(context, sizeof(context), fmt, ap);
        va_end(ap);
        char message[sizeof(d->message)];
        /* cut at the buffer's size, as every diag message is */
        if (snprintf(message, sizeof(message), "%s: %s", context, d->message) >= 0)
                memcpy(d->message, message, sizeof(message));
        return r;
}

const char *diag_format(const struct diag *d, char *buf, size_t size)
{
        if (d->file[0] && d->line > 0)
                snprintf(buf, size, "%s:%d:%d: %s", d->file, d->line, d->column, d->message);
        else if (d->file[0])
                snprintf(buf, size, "%s: %s", d->file, d->message);
        else
                snprintf(buf, size, "%s", d->message);
        return buf;
}
