/* A deadline on a thread of its own: a sleeper's wait until the deadline
 * or a disarm (the sleeper's stop).  The thread blocks every signal
 * (thread_start), so a process-directed signal never lands on it, and it
 * touches nothing but its own struct until it calls expired. */
#include "base/watchdog.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "base/thread.h"

#include "base/xalloc.h"

struct watchdog {
        pthread_t thread;
        struct sleeper sl; /* its stop is the disarm */
        struct timespec deadline;
        void (*expired)(void *ud);
        void *ud;
};

static void *watchdog_main(void *arg)
{
        struct watchdog *w = arg;
        sleeper_lock(&w->sl);
        while (sleeper_wait_locked(&w->sl, &w->deadline))
                ;
        bool fire = !sleeper_stopped_locked(&w->sl);
        sleeper_unlock(&w->sl);
        if (fire)
                w->expired(w->ud);
        return NULL;
}

int watchdog_arm(unsigned ms, void (*expired)(void *ud), void *ud, struct watchdog **out)
{
        struct watchdog *w = xcalloc(1, sizeof(*w));
        w->expired = expired;
        w->ud = ud;
        w->deadline = sleeper_deadline((long)ms);
        sleeper_init(&w->sl);
        int r = thread_start(&w->thread, "devlet-watchdog", NULL, watchdog_main, w);
        if (r < 0) {
                sleeper_destroy(&w->sl);
                free(w);
                return r;
        }
        *out = w;
        return 0;
}

void watchdog_disarm(struct watchdog *w)
{
        if (!w)
                return;
        sleeper_stop(&w->sl);
        pthread_join(w->thread, NULL);
        sleeper_destroy(&w->sl);
        free(w);
}
