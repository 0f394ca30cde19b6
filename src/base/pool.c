/* Starts libuv's thread pool with chosen signals blocked in its threads:
 * uv_queue_work() creates the pool's threads synchronously the first time
 * it is called, so one no-op job queued under a temporary signal mask is
 * enough. */
#include "base/pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "base/xalloc.h"

static void noop_work(uv_work_t *req)
{
        (void)req;
}

static void free_work(uv_work_t *req, int status)
{
        (void)status;
        free(req);
}

void pool_start_blocking(uv_loop_t *loop, const int *signums, size_t n)
{
        sigset_t block, old;
        sigemptyset(&block);
        for (size_t i = 0; i < n; i++)
                sigaddset(&block, signums[i]);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        uv_work_t *req = xcalloc(1, sizeof(*req));
        if (uv_queue_work(loop, req, noop_work, free_work) < 0)
                free(req);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}
