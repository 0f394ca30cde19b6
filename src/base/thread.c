/* Threads and their hand-offs (see thread.h).  A thread is started with
 * every signal blocked (it inherits the mask of the thread that starts it,
 * so the starter blocks them around pthread_create) and named.  The
 * handoff's queue is the only state the worker and the loop share through
 * it; uv_async_send coalesces, so take drains the whole queue each time. */
#include "base/thread.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* What a new thread does first: names itself, so its name is there before
 * its first line runs. */
struct start {
        void *(*fn)(void *arg);
        void *arg;
        char name[16];
};

static void *trampoline(void *p)
{
        struct start st = *(struct start *)p;
        free(p);
        pthread_setname_np(pthread_self(), st.name);
        return st.fn(st.arg);
}

int thread_start(pthread_t *out, const char *name, const struct thread_opts *o,
                 void *(*fn)(void *arg), void *arg)
{
        struct start *st = malloc(sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->fn = fn;
        st->arg = arg;
        snprintf(st->name, sizeof(st->name), "%s", name);
        pthread_attr_t attr;
        int r = pthread_attr_init(&attr);
        if (r != 0) {
                free(st);
                return -r;
        }
        if (o && o->detached)
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (o && o->stack)
                pthread_attr_setstacksize(&attr, o->stack);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        pthread_t t;
        r = pthread_create(&t, &attr, trampoline, st);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                free(st);
                return -r;
        }
        *out = t;
        return 0;
}

/* ---- sleeper ---- */

void sleeper_init(struct sleeper *s)
{
        pthread_mutex_init(&s->mu, NULL);
        clock_cond_init(&s->cond);
        s->stopped = false;
}

void sleeper_destroy(struct sleeper *s)
{
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->mu);
}

void sleeper_lock(struct sleeper *s)
{
        pthread_mutex_lock(&s->mu);
}

void sleeper_unlock(struct sleeper *s)
{
        pthread_mutex_unlock(&s->mu);
}

struct timespec sleeper_deadline(long ms)
{
        return clock_monotonic_in(ms);
}

bool sleeper_wait_locked(struct sleeper *s, const struct timespec *until)
{
        if (s->stopped)
                return false;
        if (!until) {
                pthread_cond_wait(&s->cond, &s->mu);
                return !s->stopped;
        }
        int r = pthread_cond_timedwait(&s->cond, &s->mu, until);
        return r != ETIMEDOUT && !s->stopped;
}

bool sleeper_pause(struct sleeper *s, long ms)
{
        struct timespec until = clock_monotonic_in(ms);
        pthread_mutex_lock(&s->mu);
        while (!s->stopped && pthread_cond_timedwait(&s->cond, &s->mu, &until) != ETIMEDOUT)
                ;
        bool go_on = !s->stopped;
        pthread_mutex_unlock(&s->mu);
        return go_on;
}

void sleeper_wake_locked(struct sleeper *s)
{
        pthread_cond_broadcast(&s->cond);
}

void sleeper_wake(struct sleeper *s)
{
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
}

void sleeper_stop(struct sleeper *s)
{
        pthread_mutex_lock(&s->mu);
        s->stopped = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
}

bool sleeper_stopped_locked(const struct sleeper *s)
{
        return s->stopped;
}

bool sleeper_stopped(struct sleeper *s)
{
        pthread_mutex_lock(&s->mu);
        bool v = s->stopped;
        pthread_mutex_unlock(&s->mu);
        return v;
}

/* ---- handoff ---- */

static struct handoff_item *handoff_take_all(struct handoff *h)
{
        pthread_mutex_lock(&h->mu);
        struct handoff_item *items = h->head;
        h->head = NULL;
        h->tail = &h->head;
        pthread_mutex_unlock(&h->mu);
        return items;
}

static void on_async(uv_async_t *a)
{
        struct handoff *h = (struct handoff *)a; /* the first member */
        h->take(h, handoff_take_all(h));
}

int handoff_init(struct handoff *h, uv_loop_t *loop, handoff_take_fn take, void *data)
{
        memset(h, 0, sizeof(*h));
        int r = uv_async_init(loop, &h->async, on_async);
        if (r < 0)
                return r;
        h->async.data = data;
        pthread_mutex_init(&h->mu, NULL);
        h->tail = &h->head;
        h->take = take;
        h->open = true;
        return 0;
}

void *handoff_data(const struct handoff *h)
{
        return h->async.data;
}

void handoff_post(struct handoff *h, struct handoff_item *it)
{
        it->next = NULL;
        pthread_mutex_lock(&h->mu);
        *h->tail = it;
        h->tail = &it->next;
        pthread_mutex_unlock(&h->mu);
        uv_async_send(&h->async);
}

void handoff_poke(struct handoff *h)
{
        uv_async_send(&h->async);
}

static void on_handoff_closed(uv_handle_t *a)
{
        struct handoff *h = (struct handoff *)a;
        pthread_mutex_destroy(&h->mu);
        if (h->closed)
                h->closed(h);
}

void handoff_close(struct handoff *h, void (*closed)(struct handoff *h))
{
        if (!h->open) {
                if (closed && !uv_is_closing((uv_handle_t *)&h->async))
                        closed(h);
                return;
        }
        h->open = false;
        struct handoff_item *rest = handoff_take_all(h);
        if (rest)
                h->take(h, rest);
        h->closed = closed;
        uv_close((uv_handle_t *)&h->async, on_handoff_closed);
}
