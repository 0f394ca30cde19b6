/* Line-oriented logger.  Each line is formatted into one buffer and written
 * with a single write(2), so lines from different threads never interleave. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int verbosity;

void log_set_verbosity(int v)
{
        verbosity = v < 0 ? 0 : v;
}

int log_enabled(enum log_level level)
{
        return (int)level <= LOG_INFO + verbosity;
}

void log_emit(enum log_level level, const char *component, const char *fmt, ...)
{
        static const char *const names[] = { "error", "warn", "info", "debug", "trace" };
        if (!log_enabled(level))
                return;

        char line[2048];
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts.tv_nsec / 1000000, names[level], component);
        va_list ap;
        va_start(ap, fmt);
        n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        if (n > (int)sizeof(line) - 2)
                n = (int)sizeof(line) - 2;
        line[n++] = '\n';
        ssize_t w = write(STDERR_FILENO, line, (size_t)n);
        (void)w;
}
