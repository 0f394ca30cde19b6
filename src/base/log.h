/* Structured logging: one line per event on stderr, in one of three
 * formats (log_set_format):
 *
 *   text  2026-11-21T04:24:54.123Z info  kubelet: registered resource=devlet.io/fuse
 *   json  {"ts":"2026-11-21T04:24:54.123Z","level":"info","component":"kubelet",
 *          "msg":"registered","resource":"devlet.io/fuse"}
 *   klog  I1121 04:24:54.123456   12345 devlet/kubelet:0] registered resource=devlet.io/fuse
 *
 * The message is a short event name followed by key=value fields that the
 * caller formats.  Library-style modules (base/, grpc/) log only at debug
 * level; the module that decides what to do with an error logs it once. */
#ifndef DEVLET_BASE_LOG_H
#define DEVLET_BASE_LOG_H

#include <string.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3, LOG_TRACE = 4 };

/* Verbosity: 0 prints error+warn+info; each -v step adds a level. */
void log_set_verbosity(int v);

/* How lines are written; text until set.  Safe from any thread.
 *   LOG_FORMAT_TEXT: the line above, in UTC;
 *   LOG_FORMAT_JSON: one object per line: ts (UTC), level, component, msg
 *     (the event words), and one string field per key=value that follows
 *     them (a quoted value unquoted); a message whose tail does not parse
 *     as key=value pairs is msg whole.  A field named like one of the four
 *     is written with a "_" prefix.  Invalid UTF-8 becomes U+FFFD;
 *   LOG_FORMAT_KLOG: klog's header (Lmmdd hh:mm:ss.uuuuuu threadid
 *     file:line], local time as klog's) with "devlet/<component>:0" for
 *     the file and line, which a C build does not keep; E, W or I (debug
 *     and trace are I). */
enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON = 1, LOG_FORMAT_KLOG = 2 };
void log_set_format(enum log_format f);
/* "text", "json", "klog" → *out; returns 0, or -EINVAL for any other name
 * (*out untouched). */
int log_format_from_name(const char *name, enum log_format *out);
int log_enabled(enum log_level level);
void log_emit(enum log_level level, const char *component, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* The same, but only the first time this component logs this message in
 * the process: for facts about the host that do not change while devlet
 * runs (a missing DMI product name), which every reload would find again.
 * Remembers up to LOG_ONCE_MAX distinct messages (by hash), then logs
 * every message. */
#define LOG_ONCE_MAX 4096
void log_emit_once(enum log_level level, const char *component, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#define log_error(comp, ...) log_emit(LOG_ERROR, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_emit(LOG_WARN, comp, __VA_ARGS__)
#define log_info(comp, ...) log_emit(LOG_INFO, comp, __VA_ARGS__)
#define log_debug(comp, ...)                                                   \
        do {                                                                   \
                if (log_enabled(LOG_DEBUG))                                    \
                        log_emit(LOG_DEBUG, comp, __VA_ARGS__);                \
        } while (0)
#define log_trace(comp, ...)                                                   \
        do {                                                                   \
                if (log_enabled(LOG_TRACE))                                    \
                        log_emit(LOG_TRACE, comp, __VA_ARGS__);                \
        } while (0)

/* Log with ` error="<strerror(-r)>"` appended and evaluate to r (a -errno),
 * so that the caller that decides logs and returns in one line:
 *   return log_error_errno(r, "kubelet", "cannot serve socket=%s", path); */
#define log_errno(level, r, comp, fmt, ...)                                    \
        ({                                                                     \
                int log_r_ = (r);                                              \
                log_emit(level, comp, fmt " error=\"%s\"", ##__VA_ARGS__,      \
                         strerror(log_r_ < 0 ? -log_r_ : log_r_));             \
                log_r_;                                                        \
        })
#define log_error_errno(r, comp, ...) log_errno(LOG_ERROR, r, comp, __VA_ARGS__)
#define log_warn_errno(r, comp, ...) log_errno(LOG_WARN, r, comp, __VA_ARGS__)
#define log_debug_errno(r, comp, ...)                                          \
        ({                                                                     \
                int log_d_ = (r);                                              \
                if (log_enabled(LOG_DEBUG))                                    \
                        log_errno(LOG_DEBUG, log_d_, comp, __VA_ARGS__);       \
                log_d_;                                                        \
        })

#endif
