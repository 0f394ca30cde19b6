/* Time points for timed waits (clock.c). */
#ifndef DEVLET_BASE_CLOCK_H
#define DEVLET_BASE_CLOCK_H

#include <pthread.h>
#include <time.h>

/* ms from now on CLOCK_MONOTONIC (a condition variable's clock set with
 * pthread_condattr_setclock). */
struct timespec clock_monotonic_in(long ms);

/* Initialises c to time its waits on CLOCK_MONOTONIC, the clock of
 * clock_monotonic_in's time points. */
void clock_cond_init(pthread_cond_t *c);

#endif
