/* The AMD health reads, off the loop: one thread per GPU, because a sysfs
 * read of a GPU in reset can block for tens of seconds, and the loop
 * serves Allocate and the heartbeat /health reads.
 *
 * The loop's poll timer kicks every GPU whose previous read has finished
 * (amd_health_threads_kick); each thread then runs amd_health_observe on
 * its GPU and leaves the result in its slot.  The way to the loop: per-GPU
 * slots under the sleeper's mutex and a poke of a handoff (base/thread.h);
 * on_poke drains every finished slot and hands each result to the owner's
 * callback, which judges it (health.c) and touches the device model.  A
 * read still running AMD_HEALTH_STALL_MS after its kick is reported as
 * stalled at the next kick, and that GPU is not kicked again until the
 * read returns: a stuck GPU costs one thread, never the loop or the other
 * GPUs.
 *
 * The threads share one reference-counted block with the loop side: the
 * loop's reference goes at stop, each thread's when it leaves, the last
 * frees it (and drops the inventory).  Stopping never waits: it stops the
 * sleeper and forgets the handoff under its mutex (a thread pokes only
 * while it is there) and closes the handoff; a thread stuck in
 * a read leaves once the read returns, or is ended by the process's exit.
 * The threads are detached, block every signal (they may outlive the
 * loop's handlers) and never log or touch the device model. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/thread.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

#define THREAD_STACK (256 * 1024)

struct gpu_slot {
        uint64_t kicks, taken; /* the thread reads while taken < kicks */
        bool busy;             /* kicked and not finished */
        int64_t kicked_at;     /* loop ms of the kick that made it busy */
        bool done;             /* obs holds a result the loop has not drained */
        struct amd_health_obs obs;
};

struct shared {
        atomic_uint refs;
        struct sleeper sl;    /* its mutex guards the slots and out */
        struct handoff *out; /* NULL once stopped */
        struct amd_inventory *inv;
        unsigned ignore;
        size_t n;
        struct gpu_slot *slots;
};

struct amd_health_threads {
        struct handoff out; /* first: the close callback frees the whole */
        struct shared *sh;
        amd_health_result_fn on_result;
        void *ud;
};

struct thread_arg {
        struct shared *sh;
        size_t gpu;
};

static void shared_unref(struct shared *sh)
{
        if (atomic_fetch_sub(&sh->refs, 1) != 1)
                return;
        for (size_t i = 0; i < sh->n; i++)
                free(sh->slots[i].obs.why);
        free(sh->slots);
        amd_inventory_free(sh->inv);
        sleeper_destroy(&sh->sl);
        free(sh);
}

static void *gpu_thread(void *arg)
{
        struct thread_arg a = *(struct thread_arg *)arg;
        free(arg);
        struct shared *sh = a.sh;
        struct gpu_slot *s = &sh->slots[a.gpu];
        sleeper_lock(&sh->sl);
        for (;;) {
                while (s->taken == s->kicks && sleeper_wait_locked(&sh->sl, NULL))
                        ;
                if (sleeper_stopped_locked(&sh->sl))
                        break;
                s->taken = s->kicks;
                sleeper_unlock(&sh->sl);
                struct amd_health_obs obs;
                amd_health_observe(sh->inv, a.gpu, sh->ignore, &obs);
                sleeper_lock(&sh->sl);
                free(s->obs.why);
                s->obs = obs;
                s->done = true;
                s->busy = false;
                if (sh->out)
                        handoff_poke(sh->out);
        }
        sleeper_unlock(&sh->sl);
        shared_unref(sh);
        return NULL;
}

static void on_poke(struct handoff *out, struct handoff_item *items)
{
        (void)items; /* only pokes */
        struct amd_health_threads *t = (struct amd_health_threads *)out;
        struct shared *sh = t->sh;
        if (!sh)
                return; /* stopped */
        _cleanup_free_ struct amd_health_obs *got = xcalloc(sh->n + 1, sizeof(*got));
        _cleanup_free_ bool *has = xcalloc(sh->n + 1, sizeof(*has));
        sleeper_lock(&sh->sl);
        for (size_t i = 0; i < sh->n; i++) {
                if (!sh->slots[i].done)
                        continue;
                got[i] = sh->slots[i].obs;
                sh->slots[i].obs = (struct amd_health_obs){ 0 };
                sh->slots[i].done = false;
                has[i] = true;
        }
        sleeper_unlock(&sh->sl);
        for (size_t i = 0; i < sh->n; i++) {
                if (!has[i])
                        continue;
                t->on_result(t->ud, i, &got[i]);
                free(got[i].why);
        }
}

static void on_closed(struct handoff *out)
{
        free(out); /* the first member */
}

struct amd_health_threads *amd_health_threads_start(uv_loop_t *loop, struct amd_inventory *inv,
                                                    unsigned ignore,
                                                    amd_health_result_fn on_result, void *ud)
{
        struct shared *sh = xcalloc(1, sizeof(*sh));
        atomic_init(&sh->refs, 1);
        sleeper_init(&sh->sl);
        sh->inv = amd_inventory_ref(inv);
        sh->ignore = ignore;
        sh->n = inv->n_gpus;
        sh->slots = xcalloc(sh->n + 1, sizeof(*sh->slots));
        struct amd_health_threads *t = xcalloc(1, sizeof(*t));
        t->sh = sh;
        t->on_result = on_result;
        t->ud = ud;
        if (handoff_init(&t->out, loop, on_poke, t) < 0) {
                free(t);
                shared_unref(sh);
                return NULL;
        }
        sh->out = &t->out;

        const struct thread_opts o = { .stack = THREAD_STACK, .detached = true };
        int r = 0;
        for (size_t i = 0; i < sh->n && r == 0; i++) {
                struct thread_arg *a = xcalloc(1, sizeof(*a));
                *a = (struct thread_arg){ .sh = sh, .gpu = i };
                atomic_fetch_add(&sh->refs, 1);
                char name[16];
                snprintf(name, sizeof(name), "devlet-amd-%u", (unsigned)(i % 1000));
                pthread_t th;
                r = thread_start(&th, name, &o, gpu_thread, a);
                if (r < 0) {
                        atomic_fetch_sub(&sh->refs, 1);
                        free(a);
                }
        }
        if (r < 0) {
                amd_health_threads_stop(t);
                return NULL;
        }
        return t;
}

void amd_health_threads_kick(struct amd_health_threads *t, int64_t now_ms, bool *stalled)
{
        struct shared *sh = t->sh;
        sleeper_lock(&sh->sl);
        for (size_t i = 0; i < sh->n; i++) {
                struct gpu_slot *s = &sh->slots[i];
                stalled[i] = s->busy && now_ms - s->kicked_at >= AMD_HEALTH_STALL_MS;
                if (s->busy)
                        continue;
                s->busy = true;
                s->kicked_at = now_ms;
                s->kicks++;
        }
        sleeper_wake_locked(&sh->sl);
        sleeper_unlock(&sh->sl);
}

void amd_health_threads_stop(struct amd_health_threads *t)
{
        if (!t)
                return;
        struct shared *sh = t->sh;
        sleeper_lock(&sh->sl);
        sh->out = NULL;
        sleeper_unlock(&sh->sl);
        sleeper_stop(&sh->sl);
        t->sh = NULL; /* what the close hands over is dropped */
        shared_unref(sh);
        handoff_close(&t->out, on_closed);
}
