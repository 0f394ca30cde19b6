/* Line-oriented logger.  Each line is formatted into one buffer and written
 * with a single write(2), so lines from different threads never interleave.
 * log_emit_once() remembers what it logged in a small set of hashes under a
 * mutex. */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/xalloc.h"

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

static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *once_seen;
static size_t once_n, once_cap;

/* FNV-1a over "component\0message". */
static uint64_t once_hash(const char *component, const char *msg)
{
        uint64_t h = 14695981039346656037ull;
        for (const char *p = component;; p++) {
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
                if (!*p)
                        break;
        }
        for (const char *p = msg; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
        return h;
}

/* Whether (component, msg) is new; records it. */
static int once_first(const char *component, const char *msg)
{
        uint64_t h = once_hash(component, msg);
        int first = 1;
        pthread_mutex_lock(&once_lock);
        for (size_t i = 0; i < once_n && first; i++)
                first = once_seen[i] != h;
        if (first && once_n < LOG_ONCE_MAX) {
                xgrow((void **)&once_seen, &once_cap, once_n + 1, sizeof(*once_seen));
                once_seen[once_n++] = h;
        }
        pthread_mutex_unlock(&once_lock);
        return first;
}

void log_emit_once(enum log_level level, const char *component, const char *fmt, ...)
{
        char msg[1536];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (once_first(component, msg))
                log_emit(level, component, "%s", msg);
}
