/* A deadline kept by a thread of its own, for work that may never return
 * (a shutdown waiting on a stuck thread).  Knows nothing of devlet. */
#ifndef DEVLET_BASE_WATCHDOG_H
#define DEVLET_BASE_WATCHDOG_H

struct watchdog;

/* Starts a thread (every signal blocked in it) that calls expired(ud) ms
 * from now unless watchdog_disarm() comes first; expired runs on that
 * thread and is meant to end the process (log, then _exit).  Returns 0 and
 * *out, or -errno (no thread: no deadline). */
int watchdog_arm(unsigned ms, void (*expired)(void *ud), void *ud, struct watchdog **out);

/* Cancels the deadline (or waits for expired to return), joins the thread
 * and frees w.  NULL is a no-op. */
void watchdog_disarm(struct watchdog *w);

#endif
