/* A deadline on a thread of its own: pthread_cond_timedwait on the
 * monotonic clock until the deadline or a disarm.  The thread blocks every
 * signal, so a process-directed signal never lands on it, and it touches
 * nothing but its own struct until it calls expired. */
#include "base/clock.h"
#include "base/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "base/xalloc.h"

struct watchdog {
        pthread_t thread;
        pthread_mutex_t mu;
        pthread_cond_t cond;
        struct timespec deadline; /* CLOCK_MONOTONIC */
        bool disarmed;
        void (*expired)(void *ud);
        void *ud;
};

static void *watchdog_main(void *arg)
{
        struct watchdog *w = arg;
        pthread_mutex_lock(&w->mu);
        int r = 0;
        while (!w->disarmed && r != ETIMEDOUT)
                r = pthread_cond_timedwait(&w->cond, &w->mu, &w->deadline);
        bool fire = !w->disarmed;
        pthread_mutex_unlock(&w->mu);
        if (fire)
                w->expired(w->ud);
        return NULL;
}

int watchdog_arm(unsigned ms, void (*expired)(void *ud), void *ud, struct watchdog **out)
{
        struct watchdog *w = xcalloc(1, sizeof(*w));
        w->expired = expired;
        w->ud = ud;
        clock_gettime(CLOCK_MONOTONIC, &w->deadline);
        w->deadline.tv_sec += ms / 1000;
        w->deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (w->deadline.tv_nsec >= 1000000000L) {
                w->deadline.tv_sec++;
                w->deadline.tv_nsec -= 1000000000L;
        }
        clock_cond_init(&w->cond);
        pthread_mutex_init(&w->mu, NULL);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        int r = pthread_create(&w->thread, NULL, watchdog_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
                pthread_cond_destroy(&w->cond);
                pthread_mutex_destroy(&w->mu);
                free(w);
                return -r;
        }
        *out = w;
        return 0;
}

void watchdog_disarm(struct watchdog *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->mu);
        w->disarmed = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->mu);
        free(w);
}
