/* Unit tests for src/metrics/auth-gate.c: one address never holds more
 * than its slot, so another finds one at once; slots are handed round-robin
 * across addresses and first come first served within one; a legitimate
 * address waits for at most one verification per other address with
 * requests waiting; the per-address share and the whole queue are bounded
 * (a newcomer pushes out the newest of the address with most waiting);
 * the failure bucket (burst, refill, 429 with Retry-After, a success
 * giving its token back, a cancelled request too); the table of addresses
 * forgets the least recently seen idle one, never a busy one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "metrics/auth-gate.h"

struct addr {
        unsigned char b[AUTH_GATE_ADDR_SIZE];
};

static struct addr addr(uint32_t i)
{
        struct addr a = { { 0 } };
        a.b[10] = a.b[11] = 0xff;
        memcpy(a.b + 12, &i, sizeof(i));
        return a;
}

/* distinct items: the address of a slot in this array */
static char items[4096];

static enum auth_gate_verdict submit(struct auth_gate *g, uint32_t src, size_t item, uint64_t now)
{
        struct addr a = addr(src);
        unsigned retry = 0;
        void *bumped = NULL;
        enum auth_gate_verdict v = auth_gate_submit(g, a.b, &items[item], now, &retry, &bumped);
        assert_null(bumped);
        return v;
}

static void *done(struct auth_gate *g, uint32_t src, bool ok, uint32_t *next_src)
{
        struct addr a = addr(src), n;
        void *next = auth_gate_done(g, a.b, ok, n.b);
        if (next)
                memcpy(next_src, n.b + 12, sizeof(*next_src));
        return next;
}

static unsigned tokens(struct auth_gate *g, uint32_t src, uint64_t now)
{
        struct addr a = addr(src);
        unsigned running, waiting, t;
        assert_true(auth_gate_source_state(g, a.b, now, &running, &waiting, &t));
        return t;
}

static void test_one_address_cannot_take_every_slot(void **state)
{
        struct auth_gate *g = auth_gate_new();
        /* the attacker: one running, its share waiting, then 503 */
        assert_int_equal(submit(g, 2, 0, 0), AUTH_GATE_RUN);
        for (size_t i = 1; i <= AUTH_GATE_WAIT_PER_SOURCE; i++)
                assert_int_equal(submit(g, 2, i, 0), AUTH_GATE_WAIT);
        assert_int_equal(submit(g, 2, 99, 0), AUTH_GATE_BUSY);
        /* the scraper from another address runs at once */
        assert_int_equal(submit(g, 1, 100, 0), AUTH_GATE_RUN);
        /* the attacker's next waits for its own previous one, first come
         * first served */
        uint32_t next = 0;
        assert_null(done(g, 1, true, &next));
        assert_ptr_equal(done(g, 2, false, &next), &items[1]);
        assert_int_equal(next, 2);
        assert_null(done(g, 1, true, &next)); /* not running: nothing changes */
        assert_ptr_equal(done(g, 2, false, &next), &items[2]);
        auth_gate_free(g);
}

static void test_round_robin_across_addresses(void **state)
{
        struct auth_gate *g = auth_gate_new();
        /* 2, 3: running; 2 has three waiting, 3 one, 4 two */
        assert_int_equal(submit(g, 2, 0, 0), AUTH_GATE_RUN);
        assert_int_equal(submit(g, 3, 10, 0), AUTH_GATE_RUN);
        for (size_t i = 1; i <= 3; i++)
                assert_int_equal(submit(g, 2, i, 0), AUTH_GATE_WAIT);
        assert_int_equal(submit(g, 3, 11, 0), AUTH_GATE_WAIT);
        assert_int_equal(submit(g, 4, 20, 0), AUTH_GATE_WAIT);
        assert_int_equal(submit(g, 4, 21, 0), AUTH_GATE_WAIT);
        /* each freed slot goes to the next address in turn that may run
         * (one running at most per address), in the order addresses came */
        uint32_t next = 0;
        static const struct {
                uint32_t freed;
                size_t item;
                uint32_t from;
        } turns[] = { { 2, 20, 4 }, { 3, 1, 2 }, { 4, 11, 3 }, { 2, 21, 4 }, { 3, 2, 2 } };
        for (size_t i = 0; i < sizeof(turns) / sizeof(turns[0]); i++) {
                assert_ptr_equal(done(g, turns[i].freed, false, &next), &items[turns[i].item]);
                assert_int_equal(next, turns[i].from);
        }
        /* only 2 has one waiting, and 2 runs: the slot stays free */
        assert_null(done(g, 4, false, &next));
        assert_ptr_equal(done(g, 2, false, &next), &items[3]);
        assert_null(done(g, 2, false, &next));
        /* with nothing waiting, a newcomer runs at once */
        assert_int_equal(submit(g, 5, 30, 0), AUTH_GATE_RUN);
        auth_gate_free(g);
}

/* However many addresses flood the queue, a newcomer is served within one
 * turn of each: here 12 busy addresses, each keeping its share full. */
static void test_newcomer_waits_one_turn_per_address(void **state)
{
        struct auth_gate *g = auth_gate_new();
        enum { ATTACKERS = 12 };
        size_t item = 0;
        for (uint32_t a = 0; a < ATTACKERS; a++)
                for (int k = 0; k <= AUTH_GATE_WAIT_PER_SOURCE; k++)
                        submit(g, 100 + a, item++, 0);
        assert_int_equal(submit(g, 1, 4000, 0), AUTH_GATE_WAIT);
        /* the slots keep turning; an attacker whose request ends submits
         * another at once */
        uint32_t running[AUTH_GATE_SLOTS] = { 100, 101 }, next = 0;
        size_t handed = 0;
        for (;;) {
                uint32_t src = running[handed % AUTH_GATE_SLOTS];
                void *it = done(g, src, false, &next);
                assert_non_null(it);
                handed++;
                if (it == &items[4000])
                        break;
                running[(handed - 1) % AUTH_GATE_SLOTS] = next;
                submit(g, src, item++, 0);
        }
        assert_true(handed <= ATTACKERS);
        auth_gate_free(g);
}

static void test_queue_bounded_newcomer_pushes_out_the_longest(void **state)
{
        struct auth_gate *g = auth_gate_new();
        enum { SOURCES = AUTH_GATE_WAIT_MAX / AUTH_GATE_WAIT_PER_SOURCE };
        size_t item = 0;
        for (uint32_t a = 0; a < SOURCES; a++)
                for (int k = 0; k < AUTH_GATE_WAIT_PER_SOURCE + (a < AUTH_GATE_SLOTS); k++)
                        assert_int_not_equal(submit(g, 100 + a, item++, 0), AUTH_GATE_BUSY);
        struct addr n = addr(1);
        unsigned retry = 0;
        void *bumped = NULL;
        /* full: the newcomer takes the place of the newest of the first
         * address with the most waiting */
        assert_int_equal(auth_gate_submit(g, n.b, &items[4000], 0, &retry, &bumped), AUTH_GATE_WAIT);
        assert_ptr_equal(bumped, &items[AUTH_GATE_WAIT_PER_SOURCE]);
        /* the newcomer's next one too (its address has 1, others 4) */
        assert_int_equal(auth_gate_submit(g, n.b, &items[4001], 0, &retry, &bumped), AUTH_GATE_WAIT);
        assert_non_null(bumped);
        unsigned running, waiting, t;
        struct addr first = addr(100);
        assert_true(auth_gate_source_state(g, first.b, 0, &running, &waiting, &t));
        assert_int_equal(waiting, AUTH_GATE_WAIT_PER_SOURCE - 1);
        assert_int_equal(t, AUTH_GATE_FAIL_BURST - AUTH_GATE_WAIT_PER_SOURCE); /* the pushed out one's given back */
        auth_gate_free(g);
}

static void test_failure_bucket(void **state)
{
        struct auth_gate *g = auth_gate_new();
        struct addr a = addr(7);
        unsigned retry = 0;
        for (int i = 0; i < AUTH_GATE_FAIL_BURST; i++)
                assert_true(auth_gate_fail(g, a.b, 1000, &retry));
        assert_false(auth_gate_fail(g, a.b, 1000, &retry));
        assert_int_equal(retry, (AUTH_GATE_FAIL_REFILL_MS + 999) / 1000);
        /* an empty bucket refuses a verification too: no slot taken */
        assert_int_equal(submit(g, 7, 0, 1000), AUTH_GATE_LIMITED);
        assert_int_equal(submit(g, 8, 1, 1000), AUTH_GATE_RUN);
        assert_int_equal(submit(g, 9, 2, 1000), AUTH_GATE_RUN);
        /* half a refill is not a token; a whole one is */
        assert_false(auth_gate_fail(g, a.b, 1000 + AUTH_GATE_FAIL_REFILL_MS / 2, &retry));
        assert_true(auth_gate_fail(g, a.b, 1000 + AUTH_GATE_FAIL_REFILL_MS, &retry));
        assert_false(auth_gate_fail(g, a.b, 1000 + AUTH_GATE_FAIL_REFILL_MS, &retry));
        /* refilled up to the burst, no further */
        assert_int_equal(tokens(g, 7, 1000000), AUTH_GATE_FAIL_BURST);
        /* a verification takes a token, a success gives it back */
        uint32_t next;
        assert_int_equal(tokens(g, 8, 1000), AUTH_GATE_FAIL_BURST - 1);
        assert_null(done(g, 8, true, &next));
        assert_int_equal(tokens(g, 8, 1000), AUTH_GATE_FAIL_BURST);
        assert_null(done(g, 9, false, &next));
        assert_int_equal(tokens(g, 9, 1000), AUTH_GATE_FAIL_BURST - 1);
        auth_gate_free(g);
}

static void test_cancel_gives_the_place_and_token_back(void **state)
{
        struct auth_gate *g = auth_gate_new();
        assert_int_equal(submit(g, 2, 0, 0), AUTH_GATE_RUN);
        assert_int_equal(submit(g, 2, 1, 0), AUTH_GATE_WAIT);
        assert_int_equal(submit(g, 2, 2, 0), AUTH_GATE_WAIT);
        assert_int_equal(tokens(g, 2, 0), AUTH_GATE_FAIL_BURST - 3);
        struct addr a = addr(2);
        auth_gate_cancel(g, a.b, &items[1]);
        auth_gate_cancel(g, a.b, &items[1]); /* not waiting: nothing */
        assert_int_equal(tokens(g, 2, 0), AUTH_GATE_FAIL_BURST - 2);
        uint32_t next;
        assert_ptr_equal(done(g, 2, false, &next), &items[2]);
        assert_null(done(g, 2, false, &next));
        auth_gate_free(g);
}

static void test_table_forgets_the_least_recent_idle_address(void **state)
{
        struct auth_gate *g = auth_gate_new();
        unsigned retry, running, waiting, t;
        assert_int_equal(submit(g, 0, 0, 0), AUTH_GATE_RUN); /* busy: never forgotten */
        for (uint32_t i = 1; i <= AUTH_GATE_SOURCES + 10; i++) {
                struct addr a = addr(i);
                assert_true(auth_gate_fail(g, a.b, 0, &retry));
        }
        struct addr busy = addr(0), old = addr(1), recent = addr(AUTH_GATE_SOURCES + 10);
        assert_true(auth_gate_source_state(g, busy.b, 0, &running, &waiting, &t));
        assert_int_equal(running, 1);
        assert_false(auth_gate_source_state(g, old.b, 0, &running, &waiting, &t));
        assert_true(auth_gate_source_state(g, recent.b, 0, &running, &waiting, &t));
        assert_int_equal(t, AUTH_GATE_FAIL_BURST - 1);
        uint32_t next;
        assert_null(done(g, 0, false, &next));
        auth_gate_free(g);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_one_address_cannot_take_every_slot),
                cmocka_unit_test(test_round_robin_across_addresses),
                cmocka_unit_test(test_newcomer_waits_one_turn_per_address),
                cmocka_unit_test(test_queue_bounded_newcomer_pushes_out_the_longest),
                cmocka_unit_test(test_failure_bucket),
                cmocka_unit_test(test_cancel_gives_the_place_and_token_back),
                cmocka_unit_test(test_table_forgets_the_least_recent_idle_address),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
