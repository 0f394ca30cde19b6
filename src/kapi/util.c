/* kapi's small pure pieces: query escaping, the retry policy (backoff, the
 * pace of watch loops and what is worth retrying), the bearer token file
 * reader and the watch's line splitter.  No network. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "kapi/internal.h"
#include "kapi/kapi.h"

#define BACKOFF_BASE_MS 200L
#define BACKOFF_CAP_DEFAULT_MS 30000L

char *kapi_escape(const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t n = strlen(s);
        char *out = xmalloc(3 * n + 1), *o = out;
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
                        *o++ = (char)ch;
                } else {
                        *o++ = '%';
                        *o++ = hex[ch >> 4];
                        *o++ = hex[ch & 15];
                }
        }
        *o = '\0';
        return out;
}

/* splitmix64 on a per-thread state seeded from getrandom: jitter needs no
 * more, and no lock. */
static uint64_t jitter_random(void)
{
        static _Thread_local uint64_t state;
        if (!state) {
                if (getrandom(&state, sizeof(state), GRND_NONBLOCK) != (ssize_t)sizeof(state)) {
                        struct timespec ts;
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        state = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                                (uint64_t)(uintptr_t)&state;
                }
                state |= 1;
        }
        uint64_t z = (state += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        return z ^ (z >> 31);
}

long kapi_backoff_ms(unsigned attempt, long cap_ms)
{
        if (cap_ms <= 0)
                cap_ms = BACKOFF_CAP_DEFAULT_MS;
        long base = cap_ms;
        if (attempt < 32 && (BACKOFF_BASE_MS << attempt) < cap_ms)
                base = BACKOFF_BASE_MS << attempt;
        /* ±20%: base * [0.8, 1.2] */
        long spread = base * 2 / 5;
        long lo = base - base / 5;
        return lo + (spread > 0 ? (long)(jitter_random() % (uint64_t)(spread + 1)) : 0);
}

#define REWATCH_BASE_MS 800L

static long long monotonic_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kapi_rewatch_begin(struct kapi_rewatch *w)
{
        w->started_ms = monotonic_ms();
        w->progress = false;
}

void kapi_rewatch_progress(struct kapi_rewatch *w)
{
        w->progress = true;
}

long kapi_rewatch_end(struct kapi_rewatch *w, bool clean, long cap_ms)
{
        if (cap_ms <= 0)
                cap_ms = BACKOFF_CAP_DEFAULT_MS;
        bool lived = monotonic_ms() - w->started_ms >= KAPI_REWATCH_MIN_MS;
        if (lived || w->progress)
                w->attempt = 0;
        if (clean && lived)
                return 0;
        long hi = cap_ms;
        if (w->attempt < 32 && (REWATCH_BASE_MS << w->attempt) < cap_ms)
                hi = REWATCH_BASE_MS << w->attempt;
        if (w->attempt < UINT_MAX)
                w->attempt++;
        return 1 + (long)(jitter_random() % (uint64_t)hi);
}

bool kapi_retryable(int r, long status)
{
        if (r < 0 && r != -EPROTO)
                return r != -ECANCELED && r != -EMSGSIZE && r != -EBADMSG;
        return status == 429 || status == 500 || status == 502 || status == 503 ||
               status == 504;
}

int kapi_token_read(const char *path, char **out)
{
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r = fs_read_file(path, KAPI_TOKEN_MAX, &data, &len);
        if (r < 0)
                return r;
        size_t start = 0;
        while (len > 0 && isspace((unsigned char)data[len - 1]))
                len--;
        while (start < len && isspace((unsigned char)data[start]))
                start++;
        int bad = len == start ? -ENODATA : 0;
        for (size_t i = start; i < len && !bad; i++)
                if ((unsigned char)data[i] < 0x20 || data[i] == 0x7f)
                        bad = -EBADMSG;
        if (bad) {
                explicit_bzero(data, len);
                return bad;
        }
        data[len] = '\0';
        if (start)
                memmove(data, data + start, len - start + 1);
        *out = TAKE_PTR(data);
        return 0;
}

/* Appends to the unfinished line; the caller checked it fits max. */
static void lines_append(struct kapi_lines *l, const char *data, size_t len)
{
        if (l->len + len > l->cap) {
                size_t cap = l->cap ? l->cap : 4096;
                while (cap < l->len + len)
                        cap *= 2;
                if (cap > l->max)
                        cap = l->max;
                l->buf = xrealloc(l->buf, cap);
                l->cap = cap;
        }
        memcpy(l->buf + l->len, data, len);
        l->len += len;
}

int kapi_lines_feed(struct kapi_lines *l, const char *data, size_t len, kapi_line_fn fn,
                    void *ud)
{
        const char *p = data, *end = data + len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = (size_t)((nl ? nl : end) - p);
                if (n > l->max - l->len)
                        return -EMSGSIZE;
                if (!nl) {
                        lines_append(l, p, n);
                        return 0;
                }
                /* a whole line within data is handed on where it lies */
                const char *line = p;
                if (l->len) {
                        lines_append(l, p, n);
                        line = l->buf;
                        n = l->len;
                }
                p = nl + 1;
                l->len = 0;
                l->count++;
                int r = fn(ud, line, n);
                if (r)
                        return r;
        }
        return 0;
}

int kapi_lines_finish(struct kapi_lines *l, kapi_line_fn fn, void *ud)
{
        if (!l->len)
                return 0;
        size_t n = l->len;
        l->len = 0;
        l->count++;
        return fn(ud, l->buf, n);
}

void kapi_lines_release(struct kapi_lines *l)
{
        free(l->buf);
        l->buf = NULL;
        l->len = l->cap = 0;
}

long kapi_random_between(long lo, long hi)
{
        if (hi <= lo)
                return lo;
        return lo + (long)(jitter_random() % (uint64_t)(hi - lo + 1));
}

char *kapi_field_selector(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *sel = xvasprintf(fmt, ap);
        va_end(ap);
        char *esc = kapi_escape(sel);
        free(sel);
        char *out = xasprintf("fieldSelector=%s", esc);
        free(esc);
        return out;
}
