/* What the C benchmarks share: a deterministic xorshift generator, a
 * monotonic clock in nanoseconds and the p50/p99 table row.  Each benchmark is
 * one program, so the helpers are static here. */
#ifndef DEVLET_BENCH_UTIL_H
#define DEVLET_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BENCH_HELPER static __attribute__((unused))

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
BENCH_HELPER uint64_t rng(void)
{
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545F4914F6CDD1DULL;
}

BENCH_HELPER uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

BENCH_HELPER int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return (x > y) - (x < y);
}

BENCH_HELPER void report(const char *name, uint64_t *ns, size_t n)
{
        qsort(ns, n, sizeof(*ns), cmp_u64);
        printf("%s | p50 %.2f us | p99 %.2f us\n", name, (double)ns[n / 2] / 1e3,
               (double)ns[n * 99 / 100] / 1e3);
}

#endif
