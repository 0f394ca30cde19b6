/* Internal to devices/nvidia/: GPU health from NVML events, on a thread of
 * its own, reported to the loop through one queue.
 *
 * Which XIDs are critical comes from DP_DISABLE_HEALTHCHECKS and
 * DP_ENABLE_HEALTHCHECKS (struct nvidia_xid_policy, a pure value so it can
 * be tested alone). */
#ifndef DEVLET_DEVICES_NVIDIA_HEALTH_H
#define DEVLET_DEVICES_NVIDIA_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvml-lib.h"

#define NVIDIA_XID_LIST_MAX 64

/* XIDs NVIDIA's plugin ignores by default: application errors after which
 * the GPU is still fine (13 graphics engine exception, 31 GPU memory page
 * fault, 43 GPU stopped processing, 45 preemptive cleanup, 68 video
 * processor exception, 109 context switch timeout). */
extern const unsigned long long nvidia_default_ignored_xids[6];

/* The meaning of the two variables, case-insensitive, comma-separated:
 *
 *   DP_DISABLE_HEALTHCHECKS  "all"  no health checks at all (no thread, every
 *                                   GPU healthy), unless DP_ENABLE_HEALTHCHECKS
 *                                   names XIDs: then only those are critical
 *                                   (NVIDIA documents this but turns every
 *                                   check off instead);
 *                            "xids" every XID ignored (lost GPUs are still
 *                                   detected);
 *                            N,...  XIDs ignored besides the defaults.
 *   DP_ENABLE_HEALTHCHECKS   "all"  no XID ignored, defaults included;
 *                            N,...  XIDs critical even if ignored above.
 *
 * Anything else is skipped with a warning, as NVIDIA skips malformed XIDs. */
struct nvidia_xid_policy {
        bool monitor;      /* false: no health checks (DISABLE=all alone) */
        bool xids_off;     /* DISABLE=all or xids: only enabled[] XIDs are critical */
        bool all_critical; /* ENABLE=all */
        unsigned long long ignored[NVIDIA_XID_LIST_MAX]; /* defaults + DISABLE's */
        size_t n_ignored;
        unsigned long long enabled[NVIDIA_XID_LIST_MAX];
        size_t n_enabled;
};

/* Parses the two values (NULL = unset).  Malformed items are described in
 * *warnings (strv, may stay NULL). */
void nvidia_xid_policy_parse(const char *disable, const char *enable,
                             struct nvidia_xid_policy *out, char ***warnings);
bool nvidia_xid_critical(const struct nvidia_xid_policy *p, unsigned long long xid);
/* "13,31,43,45,68,109" (heap), or "none", or "all". */
char *nvidia_xid_policy_ignored(const struct nvidia_xid_policy *p);

/* Why a GPU changed state. */
enum nvidia_health_kind {
        NVIDIA_HEALTH_XID,         /* an XID event (critical or ignored: see critical) */
        NVIDIA_HEALTH_LOST,        /* NVML says the GPU is lost */
        NVIDIA_HEALTH_UNSUPPORTED, /* events cannot be registered for it */
        NVIDIA_HEALTH_WAIT_FAILED, /* waiting for events failed: every GPU */
        NVIDIA_HEALTH_RECOVERED,   /* quiet long enough and answering again */
};

/* One entry of the queue from the health thread to the loop. */
struct nvidia_health_msg {
        struct nvidia_health_msg *next;
        size_t gpu;          /* index into inv->gpus */
        enum nvidia_health_kind kind;
        bool healthy;        /* the GPU's state after this */
        bool critical;       /* NVIDIA_HEALTH_XID: false for an ignored XID (state unchanged) */
        int64_t since;       /* !healthy: when the GPU was last seen failing (nvidia_health_now_ms) */
        unsigned long long xid;
        int mig;             /* the MIG device (index into migs) the event named; -1 none */
        char reason[192];
};

/* Called on the loop thread with a batch of messages, oldest first. */
typedef void (*nvidia_health_cb)(void *ud, const struct nvidia_health_msg *msgs, size_t n);

struct nvidia_health_cfg {
        const struct nvml_lib *lib;
        const struct nvml_inventory *inv;
        const struct nvidia_xid_policy *policy;
        bool recovery;
        int64_t quiet_ms;
        unsigned wait_ms; /* nvmlEventSetWait timeout and the lost-GPU poll period */
        /* health checks off but metrics on: XIDs are watched and posted (as
         * not critical) for the XID metrics, and no GPU is ever judged (no
         * lost-GPU probe, failed registrations and waits tell nothing) */
        bool xids_only;
};

struct nvidia_health;

/* The monitor's clock: CLOCK_MONOTONIC in milliseconds. */
int64_t nvidia_health_now_ms(void);

/* Creates the event set, registers every identified GPU for XID (and ECC,
 * as NVIDIA does) events, and starts the thread.  GPUs that cannot be
 * registered are reported through cb before this returns (so the caller
 * sees them as part of its start).  Returns 0 and *out, or -errno with
 * diag when monitoring cannot start at all (no event set); cb is then not
 * called.  cfg and everything it points at must stay until stop's done
 * callback. */
int nvidia_health_start(uv_loop_t *loop, const struct nvidia_health_cfg *cfg,
                        nvidia_health_cb cb, void *ud, struct nvidia_health **out, struct diag *diag);

/* A GPU that starts unhealthy in this monitor because an earlier monitor
 * (before a re-enumeration) saw it fail at since (nvidia_health_now_ms):
 * with recovery on, it comes back once it answers and since is quiet_ms
 * old, as if this monitor had seen the failure itself. */
struct nvidia_health_seed {
        size_t gpu; /* index into inv->gpus */
        int64_t since;
};

/* Hands seeds to the thread (copied), which applies them to its view as
 * soon as its current event wait ends (within wait_ms), before it looks at
 * any event or GPU.  Posts nothing: the caller has already marked those
 * GPUs unhealthy.  Loop thread. */
void nvidia_health_seed(struct nvidia_health *h, const struct nvidia_health_seed *seeds,
                        size_t n);

/* Asks the thread to stop and returns at once: the loop never waits for
 * the event wait to end.  No callback runs after this returns.  When the
 * thread has left its wait (within wait_ms) it tells the loop, which joins
 * it (at once), frees the event set, closes the async handle and then
 * calls done(ud): only from then on may the caller shut NVML down and free
 * what cfg points at.  The loop must run until then.  With h NULL, done
 * is called before this returns. */
void nvidia_health_stop(struct nvidia_health *h, void (*done)(void *ud), void *ud);

#endif
