/* What kapi's files share beyond kapi.h (and what its unit tests and fuzz
 * target reach): the token file reader, the client's token bucket and the
 * watch's line splitter. */
#ifndef DEVLET_KAPI_INTERNAL_H
#define DEVLET_KAPI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* A bearer token file is at most this long. */
#define KAPI_TOKEN_MAX (64u << 10)


/* Reads a bearer token file (a regular file of at most KAPI_TOKEN_MAX
 * bytes) without its surrounding whitespace.  Returns 0 and *out, -EFBIG
 * for a larger file, -ENODATA for an empty token, -EBADMSG for control
 * characters inside it (they would end the Authorization header), or
 * fs_read_file's errors. */
int kapi_token_read(const char *path, char **out);

/* A client's token bucket and Retry-After pause (rate.c).  Pure: the
 * caller holds the client's lock and passes CLOCK_MONOTONIC ms. */
struct kapi_rate {
        double qps;                /* tokens a second; <= 0: no limit */
        double burst;              /* the most saved up */
        double tokens;             /* below 0: the debt of calls waiting */
        uint64_t last_ms;          /* when tokens was last refilled */
        uint64_t paused_until_ms;  /* no call starts before (Retry-After) */
};
/* A full bucket at now_ms; burst 0 reads as 1. */
void kapi_rate_init(struct kapi_rate *r, double qps, unsigned burst, uint64_t now_ms);
/* Takes one call's token at now_ms.  Returns the ms the call waits before
 * it starts (0: at once): the time until its token is earned, or until the
 * pause ends, whichever is later.  The token is taken either way. */
long kapi_rate_take(struct kapi_rate *r, uint64_t now_ms);
/* No call starts before now_ms + ms (a later pause already set stays);
 * what was saved up shrinks to one token and nothing is saved during the
 * pause. */
void kapi_rate_pause(struct kapi_rate *r, uint64_t now_ms, long ms);

/* A watch's stream cut into lines at each '\n', every whole line handed
 * to a function as it completes; only the unfinished rest is kept, at most
 * max bytes (the watch's memory bound).  Pure. */
struct kapi_lines {
        size_t max;     /* the longest line, its '\n' left out */
        unsigned count; /* lines completed so far (empty ones too) */
        char *buf;      /* the unfinished line */
        size_t len, cap;
};
/* line: borrowed for the call, without its '\n'; returns 0 to go on. */
typedef int (*kapi_line_fn)(void *ud, const char *line, size_t len);

/* Feeds the next bytes.  Returns 0, fn's first nonzero value, or -EMSGSIZE
 * when the line being gathered (number count + 1) grows past max. */
int kapi_lines_feed(struct kapi_lines *l, const char *data, size_t len, kapi_line_fn fn,
                    void *ud);
/* The stream ended: an unfinished last line goes to fn as well.  Returns
 * 0 or fn's value. */
int kapi_lines_finish(struct kapi_lines *l, kapi_line_fn fn, void *ud);
void kapi_lines_release(struct kapi_lines *l);

/* A number drawn evenly from [lo, hi] (util.c's jitter source). */
long kapi_random_between(long lo, long hi);

#endif
