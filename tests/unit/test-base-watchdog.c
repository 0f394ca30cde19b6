/* Unit tests for src/base/watchdog.c: the deadline fires on its own thread
 * when nothing disarms it (even while the arming thread is stuck), and never
 * after a disarm.  Waits are on a condition variable, bounded by alarm(). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/watchdog.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int fired;
static pthread_t fired_on;

static void on_expired(void *ud)
{
        pthread_mutex_lock(&mu);
        fired += *(int *)ud;
        fired_on = pthread_self();
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&mu);
}

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_fires_when_not_disarmed(void **state)
{
        int one = 1;
        fired = 0;
        struct watchdog *w = NULL;
        int64_t start = now_ms();
        assert_int_equal(watchdog_arm(100, on_expired, &one, &w), 0);
        pthread_mutex_lock(&mu);
        while (!fired)
                pthread_cond_wait(&cond, &mu); /* the arming thread "stuck" */
        pthread_mutex_unlock(&mu);
        int64_t took = now_ms() - start;
        assert_true(took >= 100);
        assert_true(took < 1000);
        assert_false(pthread_equal(fired_on, pthread_self()));
        watchdog_disarm(w);
        assert_int_equal(fired, 1);
}

static void test_never_fires_after_disarm(void **state)
{
        int one = 1;
        fired = 0;
        struct watchdog *w = NULL;
        assert_int_equal(watchdog_arm(50, on_expired, &one, &w), 0);
        watchdog_disarm(w); /* joins: nothing of it runs afterwards */
        assert_int_equal(watchdog_arm(1000000, on_expired, &one, &w), 0);
        watchdog_disarm(w);
        assert_int_equal(fired, 0);
        watchdog_disarm(NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fires_when_not_disarmed),
                cmocka_unit_test(test_never_fires_after_disarm),
        };
        alarm(20);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
