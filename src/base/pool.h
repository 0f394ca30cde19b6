/* libuv's thread pool, started on our terms.  Knows nothing of devlet. */
#ifndef DEVLET_BASE_POOL_H
#define DEVLET_BASE_POOL_H

#include <stddef.h>
#include <uv.h>

/* Starts libuv's thread pool now, with signums blocked in its threads (they
 * inherit the mask of the thread that starts them).  The pool threads live
 * until the process exits, past the point where the loop's signal handlers
 * are removed, so a process-directed signal must never be delivered to one
 * of them.  Call on the loop thread before anything queues work. */
void pool_start_blocking(uv_loop_t *loop, const int *signums, size_t n);

#endif
