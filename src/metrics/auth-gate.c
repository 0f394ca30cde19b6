/* The bcrypt gate (see auth-gate.h): one fixed table of AUTH_GATE_SOURCES
 * addresses, searched linearly (a few microseconds, and only for requests
 * that need a verification or fail), each with its token bucket (in
 * thousandths of a token), its count of running verifications and its
 * waiting items, oldest first.  A freed slot is given by scanning the table from
 * the entry after the one last served, so sources take turns in table
 * order.  A newcomer takes an unused entry, else the least recently seen
 * one with nothing running or waiting; at most AUTH_GATE_SLOTS +
 * AUTH_GATE_WAIT_MAX entries are busy, far fewer than the table holds, so
 * there always is one.  Never logs. */
#include "metrics/auth-gate.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

#define MILLI 1000u

_Static_assert(AUTH_GATE_SLOTS + AUTH_GATE_WAIT_MAX < AUTH_GATE_SOURCES,
               "an idle source must always be there to forget");

struct gate_source {
        unsigned char addr[AUTH_GATE_ADDR_SIZE];
        bool used;
        uint64_t seen; /* gate tick of the last use: the least is forgotten first */
        uint32_t milli;   /* tokens, in thousandths */
        uint64_t filled;  /* time (ms) milli was brought up to */
        unsigned running;
        void *waiting[AUTH_GATE_WAIT_PER_SOURCE]; /* oldest first */
        unsigned n_waiting;
};

struct auth_gate {
        struct gate_source src[AUTH_GATE_SOURCES];
        uint64_t tick;
        unsigned free_slots, n_waiting;
        size_t turn; /* the entry served last */
};

struct auth_gate *auth_gate_new(void)
{
        struct auth_gate *g = xcalloc(1, sizeof(*g));
        g->free_slots = AUTH_GATE_SLOTS;
        return g;
}

void auth_gate_free(struct auth_gate *g)
{
        free(g);
}

static void refill(struct gate_source *s, uint64_t now)
{
        if (now <= s->filled)
                return;
        uint64_t gain = (now - s->filled) * MILLI / AUTH_GATE_FAIL_REFILL_MS;
        uint64_t full = (uint64_t)AUTH_GATE_FAIL_BURST * MILLI;
        s->milli = s->milli + gain >= full ? (uint32_t)full : (uint32_t)(s->milli + gain);
        s->filled = now;
}

/* Seconds until s has a whole token (at least 1). */
static unsigned retry_after(const struct gate_source *s)
{
        uint64_t ms = ((uint64_t)(MILLI - s->milli) * AUTH_GATE_FAIL_REFILL_MS + MILLI - 1) / MILLI;
        unsigned secs = (unsigned)((ms + 999) / 1000);
        return secs ? secs : 1;
}

/* Takes a token; false when there is none. */
static bool take_token(struct gate_source *s, uint64_t now, unsigned *retry_s)
{
        refill(s, now);
        if (s->milli < MILLI) {
                *retry_s = retry_after(s);
                return false;
        }
        s->milli -= MILLI;
        return true;
}

static void give_token(struct gate_source *s)
{
        uint32_t full = AUTH_GATE_FAIL_BURST * MILLI;
        s->milli = s->milli + MILLI > full ? full : s->milli + MILLI;
}

static struct gate_source *find(struct auth_gate *g, const unsigned char *addr)
{
        for (size_t i = 0; i < AUTH_GATE_SOURCES; i++)
                if (g->src[i].used && memcmp(g->src[i].addr, addr, AUTH_GATE_ADDR_SIZE) == 0)
                        return &g->src[i];
        return NULL;
}

/* addr's entry, made (with a full bucket) when it has none. */
static struct gate_source *lookup(struct auth_gate *g, const unsigned char *addr, uint64_t now)
{
        struct gate_source *s = find(g, addr);
        if (!s) {
                for (size_t i = 0; i < AUTH_GATE_SOURCES; i++) {
                        struct gate_source *e = &g->src[i];
                        if (!e->used) {
                                s = e;
                                break;
                        }
                        if (!e->running && !e->n_waiting && (!s || e->seen < s->seen))
                                s = e;
                }
                memset(s, 0, sizeof(*s));
                s->used = true;
                memcpy(s->addr, addr, AUTH_GATE_ADDR_SIZE);
                s->milli = AUTH_GATE_FAIL_BURST * MILLI;
                s->filled = now;
        }
        s->seen = ++g->tick;
        return s;
}

static void push(struct auth_gate *g, struct gate_source *s, void *item)
{
        s->waiting[s->n_waiting++] = item;
        g->n_waiting++;
}

/* Removes the k-th waiting item of s (0: the oldest), keeping the order. */
static void *take(struct auth_gate *g, struct gate_source *s, unsigned k)
{
        void *item = s->waiting[k];
        s->n_waiting--;
        memmove(&s->waiting[k], &s->waiting[k + 1], (s->n_waiting - k) * sizeof(*s->waiting));
        g->n_waiting--;
        return item;
}

enum auth_gate_verdict auth_gate_submit(struct auth_gate *g, const unsigned char *source,
                                        void *item, uint64_t now_ms, unsigned *retry_s,
                                        void **bumped)
{
        *bumped = NULL;
        struct gate_source *s = lookup(g, source, now_ms);
        if (s->n_waiting >= AUTH_GATE_WAIT_PER_SOURCE)
                return AUTH_GATE_BUSY;
        /* the queue is full: the address with most waiting (more than this
         * one's) makes room, its newest leaving */
        struct gate_source *most = NULL;
        if (g->n_waiting >= AUTH_GATE_WAIT_MAX) {
                for (size_t i = 0; i < AUTH_GATE_SOURCES; i++)
                        if (g->src[i].n_waiting > (most ? most->n_waiting : s->n_waiting))
                                most = &g->src[i];
                if (!most)
                        return AUTH_GATE_BUSY;
        }
        if (!take_token(s, now_ms, retry_s))
                return AUTH_GATE_LIMITED;
        if (most) {
                *bumped = take(g, most, most->n_waiting - 1);
                give_token(most);
        }
        if (g->free_slots && s->running < AUTH_GATE_RUN_PER_SOURCE) {
                /* nothing of s waits: a free slot is never left while an
                 * item that may run waits */
                g->free_slots--;
                s->running++;
                return AUTH_GATE_RUN;
        }
        push(g, s, item);
        return AUTH_GATE_WAIT;
}

bool auth_gate_fail(struct auth_gate *g, const unsigned char *source, uint64_t now_ms,
                    unsigned *retry_s)
{
        return take_token(lookup(g, source, now_ms), now_ms, retry_s);
}

void *auth_gate_done(struct auth_gate *g, const unsigned char *source, bool ok,
                     unsigned char *next_source)
{
        struct gate_source *s = find(g, source);
        if (s && s->running) {
                s->running--;
                g->free_slots++;
                if (ok)
                        give_token(s);
        }
        if (!g->free_slots || !g->n_waiting)
                return NULL;
        for (size_t k = 1; k <= AUTH_GATE_SOURCES; k++) {
                size_t i = (g->turn + k) % AUTH_GATE_SOURCES;
                struct gate_source *e = &g->src[i];
                if (!e->n_waiting || e->running >= AUTH_GATE_RUN_PER_SOURCE)
                        continue;
                g->turn = i;
                g->free_slots--;
                e->running++;
                memcpy(next_source, e->addr, AUTH_GATE_ADDR_SIZE);
                return take(g, e, 0);
        }
        return NULL;
}

void auth_gate_cancel(struct auth_gate *g, const unsigned char *source, void *item)
{
        struct gate_source *s = find(g, source);
        if (!s)
                return;
        for (unsigned k = 0; k < s->n_waiting; k++)
                if (s->waiting[k] == item) {
                        take(g, s, k);
                        give_token(s);
                        return;
                }
}

bool auth_gate_source_state(struct auth_gate *g, const unsigned char *source, uint64_t now_ms,
                            unsigned *running, unsigned *waiting, unsigned *tokens)
{
        struct gate_source *s = find(g, source);
        if (!s)
                return false;
        refill(s, now_ms);
        *running = s->running;
        *waiting = s->n_waiting;
        *tokens = s->milli / MILLI;
        return true;
}
