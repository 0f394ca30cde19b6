/* Who gets the metrics endpoint's bcrypt verifications, and when
 * (auth-gate.c): a password not yet known costs tens of milliseconds of a
 * core, so a client from one address must not be able to take them all,
 * nor keep a core busy guessing.
 *
 * - at most AUTH_GATE_SLOTS verifications run at once, at most
 *   AUTH_GATE_RUN_PER_SOURCE of them for one source address;
 * - the others wait in a bounded queue (AUTH_GATE_WAIT_PER_SOURCE per
 *   source, AUTH_GATE_WAIT_MAX in all) and a freed slot goes to the next
 *   source in turn (round-robin across addresses, first come first served
 *   within one), so a client waits for a few verifications at most however
 *   many connections another address opens;
 * - every failure, and every verification started, takes a token from the
 *   source's bucket (AUTH_GATE_FAIL_BURST, one back each
 *   AUTH_GATE_FAIL_REFILL_MS; a verification that succeeds gives its
 *   token back); an empty bucket is a 429 with no bcrypt, so what one
 *   address can make devlet compute is bounded;
 * - sources are remembered in a table of AUTH_GATE_SOURCES, the least
 *   recently seen idle one forgotten for a newcomer.
 *
 * Pure bookkeeping: no clock of its own (callers pass milliseconds of a
 * monotonic clock), no I/O, never logs.  Not thread-safe: one gate belongs
 * to the endpoint's thread. */
#ifndef DEVLET_METRICS_AUTH_GATE_H
#define DEVLET_METRICS_AUTH_GATE_H

#include <stdbool.h>
#include <stdint.h>

/* verifications at once (libuv's pool has 4 threads, which devlet's file
 * writes share) */
#define AUTH_GATE_SLOTS 2
/* verifications at once for one address: another address always finds a
 * slot free within one verification's time */
#define AUTH_GATE_RUN_PER_SOURCE 1
/* requests of one address waiting for a slot (beyond: 503) */
#define AUTH_GATE_WAIT_PER_SOURCE 4
/* requests waiting in all (beyond: the address with most waiting loses its
 * newest, or the newcomer gets a 503) */
#define AUTH_GATE_WAIT_MAX 64
/* failures an address may have in a burst: a mistyped password retried by
 * hand, a few scrapers starting with a stale Secret */
#define AUTH_GATE_FAIL_BURST 10
/* one more failure allowed per this many milliseconds: a guesser costs at
 * most one bcrypt a second per address (a few percent of a core at
 * exporter-toolkit's usual cost 10), a scraper that has the wrong password
 * every 15 s is never refused for it */
#define AUTH_GATE_FAIL_REFILL_MS 1000
/* addresses remembered (a forgotten one comes back with a full bucket) */
#define AUTH_GATE_SOURCES 1024

/* a source address: IPv4 as v4-mapped IPv6 */
#define AUTH_GATE_ADDR_SIZE 16

struct auth_gate;

enum auth_gate_verdict {
        AUTH_GATE_RUN,     /* run it now: the slot is the caller's until auth_gate_done */
        AUTH_GATE_WAIT,    /* queued: auth_gate_done hands the item back in its turn */
        AUTH_GATE_LIMITED, /* the source failed too often: 429, retry after *retry_s */
        AUTH_GATE_BUSY,    /* the source's share of the queue is full: 503 */
};

/* A gate with nothing running; never fails (aborts on no memory). */
struct auth_gate *auth_gate_new(void);
void auth_gate_free(struct auth_gate *g);

/* A request from source needs a verification; item is the caller's, not
 * touched, handed back by auth_gate_done when its turn comes.  RUN and
 * WAIT take a token from source's bucket.  *bumped: an item of another
 * source's pushed out of the full queue to make room (answer it 503, it is
 * forgotten), else NULL.  *retry_s: seconds until a token, for LIMITED. */
enum auth_gate_verdict auth_gate_submit(struct auth_gate *g, const unsigned char *source,
                                        void *item, uint64_t now_ms, unsigned *retry_s,
                                        void **bumped);

/* A failure known without bcrypt (remembered): takes a token and returns
 * true, or returns false when the bucket is empty (429 after *retry_s). */
bool auth_gate_fail(struct auth_gate *g, const unsigned char *source, uint64_t now_ms,
                    unsigned *retry_s);

/* source's running verification ended (ok: the password was right, its
 * token given back).  Returns the item whose turn it is now (its slot
 * taken: the caller runs it, or calls auth_gate_done for it too), or NULL
 * when none may run; *next_source: that item's source. */
void *auth_gate_done(struct auth_gate *g, const unsigned char *source, bool ok,
                     unsigned char *next_source);

/* A waiting item given up (its connection closed): out of the queue, its
 * token given back.  Nothing when it is not waiting. */
void auth_gate_cancel(struct auth_gate *g, const unsigned char *source, void *item);

/* How many of source's are running and waiting, and its whole tokens now
 * (for tests and debugging); false when source is not remembered. */
bool auth_gate_source_state(struct auth_gate *g, const unsigned char *source, uint64_t now_ms,
                            unsigned *running, unsigned *waiting, unsigned *tokens);

#endif
