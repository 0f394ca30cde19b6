/* The snapshot store (see store.h).
 *
 * A snapshot (a list of text chunks) carries an atomic reference count
 * hidden in front of the public struct; the store holds one reference per
 * slot.  Publishing swaps the slot
 * pointer under the mutex and drops the old reference outside it; readers
 * take references under the mutex and read the text without it.  Nothing
 * here blocks apart from that short mutex. */
#include "metrics/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/xalloc.h"

struct snap_rc {
        atomic_uint refs;
        struct metrics_snap snap;
};

struct metrics_store {
        pthread_mutex_t mu;
        struct snap_rc *slots[METRICS_SLOTS];
        uint64_t generations[METRICS_SLOTS];
        _Atomic uint64_t heartbeat_ms;
        _Atomic bool ready;
};

uint64_t metrics_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct metrics_store *metrics_store_new(void)
{
        struct metrics_store *s = xcalloc(1, sizeof(*s));
        pthread_mutex_init(&s->mu, NULL);
        atomic_store(&s->heartbeat_ms, metrics_now_ms());
        return s;
}

static void rc_unref(struct snap_rc *rc)
{
        if (rc && atomic_fetch_sub(&rc->refs, 1) == 1) {
                for (size_t i = 0; i < rc->snap.n_chunks; i++)
                        free(rc->snap.chunks[i].data);
                free(rc->snap.chunks);
                free(rc);
        }
}

void metrics_snap_unref(const struct metrics_snap *snap)
{
        if (!snap)
                return;
        /* the public struct sits inside its snap_rc */
        struct snap_rc *rc = (struct snap_rc *)((uintptr_t)snap - offsetof(struct snap_rc, snap));
        rc_unref(rc);
}

void metrics_store_free(struct metrics_store *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < METRICS_SLOTS; i++)
                rc_unref(s->slots[i]);
        pthread_mutex_destroy(&s->mu);
        free(s);
}

void metrics_store_publish(struct metrics_store *s, enum metrics_slot slot, char *text, size_t len)
{
        struct metrics_chunk *c = xmalloc(sizeof(*c));
        c->data = text;
        c->len = len;
        metrics_store_publish_chunks(s, slot, c, 1);
}

void metrics_store_publish_chunks(struct metrics_store *s, enum metrics_slot slot,
                                  struct metrics_chunk *chunks, size_t n)
{
        struct snap_rc *rc = xmalloc(sizeof(*rc));
        atomic_init(&rc->refs, 1);
        rc->snap.chunks = chunks;
        rc->snap.n_chunks = n;
        rc->snap.len = 0;
        for (size_t i = 0; i < n; i++)
                rc->snap.len += chunks[i].len;
        pthread_mutex_lock(&s->mu);
        struct snap_rc *old = s->slots[slot];
        s->slots[slot] = rc;
        s->generations[slot]++;
        pthread_mutex_unlock(&s->mu);
        rc_unref(old);
}

void metrics_store_get(struct metrics_store *s, const struct metrics_snap *out[METRICS_SLOTS])
{
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < METRICS_SLOTS; i++) {
                struct snap_rc *rc = s->slots[i];
                if (rc)
                        atomic_fetch_add(&rc->refs, 1);
                out[i] = rc ? &rc->snap : NULL;
        }
        pthread_mutex_unlock(&s->mu);
}

char *metrics_store_render(struct metrics_store *s, size_t *len)
{
        const struct metrics_snap *snaps[METRICS_SLOTS];
        metrics_store_get(s, snaps);
        size_t total = 0;
        for (size_t i = 0; i < METRICS_SLOTS; i++)
                total += snaps[i] ? snaps[i]->len : 0;
        char *out = xmalloc(total + 1), *p = out;
        for (size_t i = 0; i < METRICS_SLOTS; i++) {
                if (!snaps[i])
                        continue;
                for (size_t k = 0; k < snaps[i]->n_chunks; k++) {
                        memcpy(p, snaps[i]->chunks[k].data, snaps[i]->chunks[k].len);
                        p += snaps[i]->chunks[k].len;
                }
                metrics_snap_unref(snaps[i]);
        }
        *p = '\0';
        if (len)
                *len = total;
        return out;
}

uint64_t metrics_store_generation(struct metrics_store *s, enum metrics_slot slot)
{
        pthread_mutex_lock(&s->mu);
        uint64_t g = s->generations[slot];
        pthread_mutex_unlock(&s->mu);
        return g;
}

void metrics_store_heartbeat(struct metrics_store *s)
{
        atomic_store(&s->heartbeat_ms, metrics_now_ms());
}

void metrics_store_set_ready(struct metrics_store *s, bool ready)
{
        atomic_store(&s->ready, ready);
}

bool metrics_store_ready(struct metrics_store *s)
{
        return atomic_load(&s->ready);
}

int metrics_store_healthy(struct metrics_store *s, uint64_t max_age_ms)
{
        uint64_t beat = atomic_load(&s->heartbeat_ms);
        return metrics_now_ms() - beat <= max_age_ms;
}
