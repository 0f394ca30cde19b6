/* A client's politeness to the API server: a token bucket (client-go's
 * flowcontrol rate limiter: qps tokens a second, up to burst saved) and
 * the pause a 429 or 503 with Retry-After asks for.  Reservations: a call
 * takes its token at once, the bucket may go below zero, and the call
 * waits the time the debt takes to repay, so callers queue in the order
 * they came without a condition variable.  Pure: the caller passes the
 * clock and holds the lock. */
#include "kapi/internal.h"

void kapi_rate_init(struct kapi_rate *r, double qps, unsigned burst, uint64_t now_ms)
{
        if (burst == 0)
                burst = 1;
        *r = (struct kapi_rate){ .qps = qps, .burst = burst, .tokens = burst, .last_ms = now_ms };
}

long kapi_rate_take(struct kapi_rate *r, uint64_t now_ms)
{
        long wait = 0;
        if (r->qps > 0) {
                if (now_ms > r->last_ms) {
                        r->tokens += (double)(now_ms - r->last_ms) * r->qps / 1000.0;
                        if (r->tokens > r->burst)
                                r->tokens = r->burst;
                        r->last_ms = now_ms;
                }
                r->tokens -= 1;
                /* the debt is repaid from last_ms on, which a pause may
                 * have put in the future */
                double ms = r->tokens < 0 ? -r->tokens * 1000.0 / r->qps : 0;
                if (r->last_ms > now_ms)
                        ms += (double)(r->last_ms - now_ms);
                wait = (long)ms + ((double)(long)ms < ms);
        }
        if (r->paused_until_ms > now_ms && (long)(r->paused_until_ms - now_ms) > wait)
                wait = (long)(r->paused_until_ms - now_ms);
        return wait;
}

void kapi_rate_pause(struct kapi_rate *r, uint64_t now_ms, long ms)
{
        if (ms <= 0)
                return;
        if (now_ms + (uint64_t)ms > r->paused_until_ms)
                r->paused_until_ms = now_ms + (uint64_t)ms;
        /* what was saved shrinks to one token, and nothing is saved during
         * the pause: no burst is spent at once as it ends */
        if (r->tokens > 1)
                r->tokens = 1;
        if (r->paused_until_ms > r->last_ms)
                r->last_ms = r->paused_until_ms;
}
