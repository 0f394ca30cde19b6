/* Unit tests for src/base/thread.c: a started thread is named and blocks
 * every signal, detached when asked; a sleeper's
 * stop ends a pause at once and a pause without one lasts its time; a
 * handoff brings every item a worker posts to the loop, in order, and what
 * is left at close. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include <cmocka.h>

#include "base/thread.h"

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct seen {
        char name[16];
        bool sigterm_blocked;
};

static void *report(void *arg)
{
        struct seen *s = arg;
        pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
        sigset_t mask;
        pthread_sigmask(SIG_BLOCK, NULL, &mask);
        s->sigterm_blocked = sigismember(&mask, SIGTERM) == 1;
        return NULL;
}

static void test_start_names_and_blocks_signals(void **state)
{
        (void)state;
        struct seen s = { 0 };
        pthread_t t;
        assert_int_equal(thread_start(&t, "devlet-a-long-thread-name", NULL, report, &s), 0);
        pthread_join(t, NULL);
        assert_string_equal(s.name, "devlet-a-long-t"); /* the kernel's 15 */
        assert_true(s.sigterm_blocked);
        sigset_t mask;
        pthread_sigmask(SIG_BLOCK, NULL, &mask);
        assert_false(sigismember(&mask, SIGTERM)); /* the starter's mask is back */
}

struct ran {
        struct sleeper sl;
        bool ran;
};

static void *mark_ran(void *arg)
{
        struct ran *r = arg;
        sleeper_lock(&r->sl);
        r->ran = true;
        sleeper_wake_locked(&r->sl);
        sleeper_unlock(&r->sl);
        return NULL;
}

static void test_detached_with_a_stack(void **state)
{
        (void)state;
        static struct ran r; /* the detached thread may touch it after we return */
        sleeper_init(&r.sl);
        pthread_t t = 0;
        struct thread_opts o = { .stack = 256 * 1024, .detached = true };
        assert_int_equal(thread_start(&t, "devlet-x", &o, mark_ran, &r), 0);
        sleeper_lock(&r.sl);
        while (!r.ran)
                sleeper_wait_locked(&r.sl, NULL);
        sleeper_unlock(&r.sl);
}

struct pauser {
        struct sleeper *s;
        long ms;
        bool result;
        int64_t took;
};

static void *pause_thread(void *arg)
{
        struct pauser *p = arg;
        int64_t t0 = now_ms();
        p->result = sleeper_pause(p->s, p->ms);
        p->took = now_ms() - t0;
        return NULL;
}

static void test_a_stop_ends_a_pause(void **state)
{
        (void)state;
        struct sleeper s;
        sleeper_init(&s);
        struct pauser p = { .s = &s, .ms = 60000 };
        pthread_t t;
        assert_int_equal(thread_start(&t, "devlet-test", NULL, pause_thread, &p), 0);
        sleeper_wake(&s); /* a wake does not end a pause */
        sleeper_stop(&s);
        pthread_join(t, NULL);
        assert_false(p.result);
        assert_true(p.took < 30000);
        assert_true(sleeper_stopped(&s));
        assert_false(sleeper_pause(&s, 60000)); /* and every later one */
        sleeper_destroy(&s);
}

static void test_a_pause_lasts_its_time(void **state)
{
        (void)state;
        struct sleeper s;
        sleeper_init(&s);
        int64_t t0 = now_ms();
        assert_true(sleeper_pause(&s, 50));
        assert_true(now_ms() - t0 >= 50);
        sleeper_lock(&s);
        struct timespec until = sleeper_deadline(20);
        while (sleeper_wait_locked(&s, &until))
                ;
        assert_false(sleeper_stopped_locked(&s));
        sleeper_unlock(&s);
        assert_true(now_ms() - t0 >= 70);
        sleeper_destroy(&s);
}

struct num {
        struct handoff_item item; /* first */
        int n;
};

struct taker {
        int next;      /* the number expected */
        int takes;     /* take calls */
        int pokes;     /* of them with nothing */
        int want;
        bool closed;
        bool stop_loop;
        struct handoff h;
};

static void take(struct handoff *h, struct handoff_item *items)
{
        struct taker *tk = handoff_data(h);
        tk->takes++;
        if (!items)
                tk->pokes++;
        while (items) {
                struct num *n = (struct num *)items;
                items = items->next;
                assert_int_equal(n->n, tk->next);
                tk->next++;
                free(n);
        }
        if (tk->next == tk->want && tk->stop_loop)
                uv_stop(h->async.loop);
}

static void *poster(void *arg)
{
        struct taker *tk = arg;
        for (int i = 0; i < tk->want; i++) {
                struct num *n = calloc(1, sizeof(*n));
                n->n = i;
                handoff_post(&tk->h, &n->item);
        }
        return NULL;
}

static void on_closed(struct handoff *h)
{
        ((struct taker *)handoff_data(h))->closed = true;
}

static void test_handoff_brings_everything_in_order(void **state)
{
        (void)state;
        uv_loop_t loop;
        uv_loop_init(&loop);
        struct taker tk = { .want = 5000, .stop_loop = true };
        assert_int_equal(handoff_init(&tk.h, &loop, take, &tk), 0);
        pthread_t t;
        assert_int_equal(thread_start(&t, "devlet-test", NULL, poster, &tk), 0);
        uv_run(&loop, UV_RUN_DEFAULT);
        pthread_join(t, NULL);
        assert_int_equal(tk.next, 5000);
        assert_true(tk.takes >= 1);

        /* a poke calls take with nothing; close hands over what is left */
        handoff_poke(&tk.h);
        uv_run(&loop, UV_RUN_NOWAIT);
        assert_true(tk.pokes >= 1);
        tk.want = 5002;
        tk.stop_loop = false;
        for (int i = 0; i < 2; i++) {
                struct num *n = calloc(1, sizeof(*n));
                n->n = 5000 + i;
                handoff_post(&tk.h, &n->item);
        }
        handoff_close(&tk.h, on_closed);
        handoff_close(&tk.h, on_closed); /* idempotent */
        assert_int_equal(tk.next, 5002);
        assert_false(tk.closed); /* on a later turn */
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_true(tk.closed);
        assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_a_handoff_never_opened_closes_at_once(void **state)
{
        (void)state;
        struct taker tk = { 0 };
        memset(&tk.h, 0, sizeof(tk.h));
        tk.h.async.data = &tk;
        handoff_close(&tk.h, on_closed);
        assert_true(tk.closed);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_start_names_and_blocks_signals),
                cmocka_unit_test(test_detached_with_a_stack),
                cmocka_unit_test(test_a_stop_ends_a_pause),
                cmocka_unit_test(test_a_pause_lasts_its_time),
                cmocka_unit_test(test_handoff_brings_everything_in_order),
                cmocka_unit_test(test_a_handoff_never_opened_closes_at_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
