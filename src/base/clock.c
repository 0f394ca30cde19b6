/* Time points for timed waits (see clock.h). */
#include "base/clock.h"

struct timespec clock_monotonic_in(long ms)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

void clock_cond_init(pthread_cond_t *c)
{
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(c, &ca);
        pthread_condattr_destroy(&ca);
}
