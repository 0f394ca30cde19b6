/* Published metrics: immutable, reference-counted text snapshots, one per
 * producer slot, swapped under a mutex.
 *
 * Producers (the collector thread, the loop) render a whole exposition and
 * publish it; readers (the HTTP threads, `devlet metrics`) take references
 * to the latest snapshot of every slot and concatenate them.  A reader never
 * waits for a collection, and a producer never waits for a reader beyond
 * the pointer swap.  The store also keeps the loop's heartbeat for /health. */
#ifndef DEVLET_METRICS_STORE_H
#define DEVLET_METRICS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metrics_slot {
        METRICS_SLOT_GPU = 0,    /* DCGM families, from the collector thread */
        METRICS_SLOT_DEVLET = 1, /* devlet's own families, from the loop */
        METRICS_SLOTS
};

/* One piece of a snapshot's text (a family, as the collector renders it). */
struct metrics_chunk {
        char *data; /* owned */
        size_t len;
};

/* A published exposition: its text is the chunks in order. */
struct metrics_snap {
        size_t len; /* total */
        struct metrics_chunk *chunks;
        size_t n_chunks;
};

struct metrics_store;

struct metrics_store *metrics_store_new(void);
/* Frees the store and its snapshots; readers must be done. */
void metrics_store_free(struct metrics_store *s);

/* Publishes text (taken: a heap string of len bytes) in slot. */
void metrics_store_publish(struct metrics_store *s, enum metrics_slot slot, char *text, size_t len);
/* Publishes n chunks (the array and every chunk's data are taken). */
void metrics_store_publish_chunks(struct metrics_store *s, enum metrics_slot slot,
                                  struct metrics_chunk *chunks, size_t n);

/* Takes a reference to the latest snapshot of every slot (NULL where none
 * was published yet) into out[]; each must be given back with
 * metrics_snap_unref. */
void metrics_store_get(struct metrics_store *s, const struct metrics_snap *out[METRICS_SLOTS]);
void metrics_snap_unref(const struct metrics_snap *snap);

/* The slots concatenated into one heap string (*len its length). */
char *metrics_store_render(struct metrics_store *s, size_t *len);

/* Number of snapshots published in slot so far. */
uint64_t metrics_store_generation(struct metrics_store *s, enum metrics_slot slot);

/* The loop calls this on every tick; /health is good while the last beat
 * is at most max_age_ms old (CLOCK_MONOTONIC). */
void metrics_store_heartbeat(struct metrics_store *s);
int metrics_store_healthy(struct metrics_store *s, uint64_t max_age_ms);

/* Readiness, for /ready: every resource is registered with the kubelet
 * (or registration is off, --kubelet-socket "").  The loop sets it; false until it first does. */
void metrics_store_set_ready(struct metrics_store *s, bool ready);
bool metrics_store_ready(struct metrics_store *s);

uint64_t metrics_now_ms(void);

#endif
