/* Threads and what passes between them and the loop (thread.c): one way
 * to start a thread, one stop-able pause, one worker → loop queue.  Knows
 * nothing of devlet.
 *
 * A worker thread of devlet is started with thread_start (checked, named,
 * every signal blocked), pauses in a sleeper (monotonic clock; a stop ends
 * every pause at once) and hands its results to the loop through a handoff
 * (a FIFO under a mutex, drained on the loop by a uv_async). */
#ifndef DEVLET_BASE_THREAD_H
#define DEVLET_BASE_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <uv.h>

/* ---- starting a thread ---- */

struct thread_opts {
        size_t stack;  /* bytes; 0: the default */
        bool detached; /* never joined */
};

/* Starts fn(arg) on a new thread named name (at most 15 characters: what
 * top -H and /proc/PID/task show), with every signal blocked in it: the
 * loop's thread takes the process's signals.  o may be NULL.  Returns 0 and
 * *out (untouched on failure), or -errno; the caller says what is lost
 * (tests/preload/fail-threads.c makes every start fail, for the tests). */
int thread_start(pthread_t *out, const char *name, const struct thread_opts *o,
                 void *(*fn)(void *arg), void *arg);

/* ---- a stop-able pause ---- */

/* A mutex and a condition variable on CLOCK_MONOTONIC, with a stop flag
 * under that mutex.  The mutex may guard the owner's own fields too
 * (sleeper_lock); a stop wakes every waiter and ends every later wait. */
struct sleeper {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        bool stopped;
};

void sleeper_init(struct sleeper *s);
void sleeper_destroy(struct sleeper *s);
void sleeper_lock(struct sleeper *s);
void sleeper_unlock(struct sleeper *s);

/* ms from now on the sleeper's clock. */
struct timespec sleeper_deadline(long ms);

/* With the mutex held: waits once, until a sleeper_wake, a stop or until
 * (NULL: no deadline).  Returns false when until has passed or the sleeper
 * is stopped, true otherwise (the caller looks at its condition again: a
 * wake may be spurious). */
bool sleeper_wait_locked(struct sleeper *s, const struct timespec *until);

/* Without the mutex: pauses ms, cut short only by a stop.  Returns false
 * when stopped (before or during the pause). */
bool sleeper_pause(struct sleeper *s, long ms);

/* Wakes every waiter of sleeper_wait_locked (mutex held or not: both take
 * it themselves when not held -- use the _locked forms under it). */
void sleeper_wake(struct sleeper *s);
void sleeper_wake_locked(struct sleeper *s);

/* Sets the stop flag and wakes every waiter; for good. */
void sleeper_stop(struct sleeper *s);

/* The flag, read under the mutex (or, _locked, with it held). */
bool sleeper_stopped(struct sleeper *s);
bool sleeper_stopped_locked(const struct sleeper *s);

/* ---- worker → loop ---- */

/* An item handed to the loop: embed it in the owner's struct. */
struct handoff_item {
        struct handoff_item *next;
};

struct handoff;

/* Called on the loop with what was posted since the last call, oldest
 * first (items linked by next; NULL when only handoff_poke was called),
 * the items now the callee's. */
typedef void (*handoff_take_fn)(struct handoff *h, struct handoff_item *items);

struct handoff {
        uv_async_t async; /* data: the owner's */
        pthread_mutex_t mu;
        struct handoff_item *head, **tail;
        handoff_take_fn take;
        void (*closed)(struct handoff *h);
        bool open;
};

/* On the loop's thread: h ready for posts.  Returns 0 or a libuv error. */
int handoff_init(struct handoff *h, uv_loop_t *loop, handoff_take_fn take, void *data);

/* The owner's pointer given to handoff_init. */
void *handoff_data(const struct handoff *h);

/* Any thread: it goes to the loop (take on the loop's next turn; posts
 * that come together are taken together).  After handoff_close, do not. */
void handoff_post(struct handoff *h, struct handoff_item *it);

/* Any thread: take runs with nothing new (the worker changed state the
 * loop reads under the owner's lock). */
void handoff_poke(struct handoff *h);

/* On the loop: hands what is still queued to take one last time, closes
 * the async handle and calls closed(h) (NULL: nothing) once it is closed,
 * on a later turn; h may be freed there.  Idempotent; a handoff never
 * opened calls closed at once. */
void handoff_close(struct handoff *h, void (*closed)(struct handoff *h));

#endif
