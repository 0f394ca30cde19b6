/* Line-oriented logger.  Each line is formatted into one buffer on the
 * stack and written with a single write(2), so lines from different threads
 * never interleave and logging never allocates (a line too long for the
 * buffer is cut, a JSON line still closed).  The caller's message is
 * formatted first, then written in the chosen format; the JSON format
 * splits it into its event words and key=value fields.
 * log_emit_once() remembers what it logged in a small set of hashes under a
 * mutex. */
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/xalloc.h"

/* A message holds 8 KiB: the start-up config line is about 2 KiB of JSON
 * with the defaults alone, more with a config */
#define LOG_MSG_MAX 8192
#define LOG_LINE_MAX (2 * LOG_MSG_MAX)

static int verbosity;
static int format; /* enum log_format, read and set atomically */

void log_set_verbosity(int v)
{
        verbosity = v < 0 ? 0 : v;
}

int log_enabled(enum log_level level)
{
        return (int)level <= LOG_INFO + verbosity;
}

void log_set_format(enum log_format f)
{
        __atomic_store_n(&format, (int)f, __ATOMIC_RELAXED);
}

int log_format_from_name(const char *name, enum log_format *out)
{
        static const char *const names[] = { "text", "json", "klog" };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (name && strcmp(name, names[i]) == 0) {
                        *out = (enum log_format)i;
                        return 0;
                }
        return -EINVAL;
}

/* A bounded line: appends that do not fit are dropped, keeping `reserve`
 * bytes for what closes the line. */
struct line {
        char buf[LOG_LINE_MAX];
        size_t n, reserve;
        bool full; /* an append was dropped */
};

static void put(struct line *l, const char *s, size_t len)
{
        if (l->n + len + l->reserve > sizeof(l->buf)) {
                l->full = true;
                return;
        }
        memcpy(l->buf + l->n, s, len);
        l->n += len;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
        size_t len;
        uint32_t cp;
        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                len = 2, cp = s[0] & 0x1f;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                len = 3, cp = s[0] & 0x0f;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                len = 4, cp = s[0] & 0x07;
        else
                return 0;
        if (len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
                return 0;
        return len;
}

/* s[0..n) as the inside of a JSON string; a piece that does not fit ends it. */
static void put_json_chars(struct line *l, const char *s, size_t n)
{
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < n;) {
                size_t before = l->n;
                unsigned char c = p[i];
                size_t len = utf8_len(p + i, n - i);
                char esc[8];
                if (c == '"')
                        put(l, "\\\"", 2);
                else if (c == '\\')
                        put(l, "\\\\", 2);
                else if (c == '\n')
                        put(l, "\\n", 2);
                else if (c == '\t')
                        put(l, "\\t", 2);
                else if (c == '\r')
                        put(l, "\\r", 2);
                else if (c < 0x20 || c == 0x7f) {
                        snprintf(esc, sizeof(esc), "\\u%04x", c);
                        put(l, esc, 6);
                } else if (len == 0) {
                        put(l, "\\ufffd", 6);
                        len = 1;
                } else
                        put(l, s + i, len);
                if (l->n == before)
                        return; /* full */
                i += len ? len : 1;
        }
}

static void put_json_string(struct line *l, const char *s, size_t n)
{
        put(l, "\"", 1);
        l->reserve += 1; /* room for the closing quote */
        put_json_chars(l, s, n);
        l->reserve -= 1;
        put(l, "\"", 1);
}

static bool key_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-' || c == '/';
}

/* Whether a quote followed by s closes a quoted value: at the end, or
 * before the next key=.  devlet's lines quote strerror() and diag texts
 * without escaping the quotes inside, e.g. error="invalid value "xml"". */
static bool closes_value(const char *s)
{
        if (!*s)
                return true;
        if (*s != ' ')
                return false;
        while (*s == ' ')
                s++;
        const char *k = s;
        while (key_char(*s))
                s++;
        return s > k && *s == '=';
}

/* The key=value pairs of s, separated by spaces: with l NULL, checks that
 * s is only such pairs; else writes them as ,"key":"value".  A value is a
 * run of non-spaces, or double-quoted with backslash escapes (a quote
 * inside that is not escaped is kept, see closes_value).  Returns NULL, or
 * where s stops being pairs. */
static const char *put_fields(struct line *l, const char *s)
{
        while (*s == ' ')
                s++;
        while (*s) {
                const char *k = s;
                while (key_char(*s))
                        s++;
                if (s == k || *s != '=')
                        return s;
                size_t klen = (size_t)(s - k);
                s++;
                char val[LOG_MSG_MAX];
                size_t vn = 0;
                if (*s == '"') {
                        for (s++; *s && !(*s == '"' && closes_value(s + 1)); s++) {
                                if (*s == '\\' && s[1]) {
                                        s++;
                                        val[vn++] = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s;
                                } else
                                        val[vn++] = *s;
                        }
                        if (*s != '"')
                                return s;
                        s++;
                } else {
                        while (*s && *s != ' ')
                                val[vn++] = *s++;
                }
                if (*s && *s != ' ')
                        return s;
                while (*s == ' ')
                        s++;
                if (!l)
                        continue;
                bool reserved = (klen == 2 && memcmp(k, "ts", 2) == 0) ||
                                (klen == 3 && memcmp(k, "msg", 3) == 0) ||
                                (klen == 5 && memcmp(k, "level", 5) == 0) ||
                                (klen == 9 && memcmp(k, "component", 9) == 0);
                /* the pair goes in whole or not at all */
                size_t mark = l->n;
                bool was_full = l->full;
                l->full = false;
                put(l, reserved ? ",\"_" : ",\"", reserved ? 3 : 2);
                put_json_chars(l, k, klen);
                put(l, "\":", 2);
                put_json_string(l, val, vn);
                if (l->full)
                        l->n = mark;
                l->full |= was_full;
        }
        return NULL;
}

/* Where the fields of msg start: the first word that begins a tail made of
 * key=value pairs only; strlen(msg) when there is none. */
static size_t fields_start(const char *msg)
{
        size_t i = 0;
        while (msg[i]) {
                const char *stop = put_fields(NULL, msg + i);
                if (!stop)
                        return i;
                /* a start before stop would stop there too: the next word after it */
                i = (size_t)(stop - msg);
                while (msg[i] && msg[i] != ' ')
                        i++;
                while (msg[i] == ' ')
                        i++;
        }
        return i;
}

static void format_json(struct line *l, const struct timespec *ts, const char *level,
                        const char *component, const char *msg)
{
        struct tm tm;
        gmtime_r(&ts->tv_sec, &tm);
        char head[96];
        int n = snprintf(head, sizeof(head),
                         "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"%s\","
                         "\"component\":",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts->tv_nsec / 1000000, level);
        l->reserve = 3; /* "}\n" and a spare */
        put(l, head, (size_t)n);
        put_json_string(l, component, strlen(component));
        put(l, ",\"msg\":", 7);
        size_t f = fields_start(msg);
        size_t words = f;
        while (words > 0 && msg[words - 1] == ' ')
                words--;
        put_json_string(l, msg, words);
        put_fields(l, msg + f);
        l->reserve = 0;
        put(l, "}\n", 2);
}

static void format_klog(struct line *l, const struct timespec *ts, enum log_level level,
                        const char *component, const char *msg)
{
        struct tm tm;
        localtime_r(&ts->tv_sec, &tm);
        char letter = level == LOG_ERROR ? 'E' : level == LOG_WARN ? 'W' : 'I';
        char head[160];
        int n = snprintf(head, sizeof(head), "%c%02d%02d %02d:%02d:%02d.%06ld %7ld devlet/%s:0] ",
                         letter, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                         ts->tv_nsec / 1000, (long)syscall(SYS_gettid), component);
        l->reserve = 1;
        put(l, head, (size_t)n < sizeof(head) ? (size_t)n : sizeof(head) - 1);
        put(l, msg, strlen(msg));
        l->reserve = 0;
        put(l, "\n", 1);
}

static void format_text(struct line *l, const struct timespec *ts, const char *level,
                        const char *component, const char *msg)
{
        struct tm tm;
        gmtime_r(&ts->tv_sec, &tm);
        /* as one snprintf always did: the line cut at LOG_MSG_MAX - 1 bytes */
        int n = snprintf(l->buf, LOG_MSG_MAX - 1, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: %s",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts->tv_nsec / 1000000, level, component, msg);
        l->n = n < 0 ? 0 : n > LOG_MSG_MAX - 2 ? LOG_MSG_MAX - 2 : (size_t)n;
        l->buf[l->n++] = '\n';
}

void log_emit(enum log_level level, const char *component, const char *fmt, ...)
{
        static const char *const names[] = { "error", "warn", "info", "debug", "trace" };
        if (!log_enabled(level))
                return;

        char msg[LOG_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct line l = { .n = 0 };
        switch (__atomic_load_n(&format, __ATOMIC_RELAXED)) {
        case LOG_FORMAT_JSON:
                format_json(&l, &ts, names[level], component, msg);
                break;
        case LOG_FORMAT_KLOG:
                format_klog(&l, &ts, level, component, msg);
                break;
        default:
                format_text(&l, &ts, names[level], component, msg);
                break;
        }
        ssize_t w = write(STDERR_FILENO, l.buf, l.n);
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
