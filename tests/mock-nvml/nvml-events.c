/* Mock NVML: event sets.
 *
 * Events come from the configuration's `events` list, logged by state.c in
 * the order they appeared, each stamped with when it happened.  Each event
 * set walks that log with its own cursor and delivers an event once, if it
 * had registered the event's GPU before the event happened and registered
 * it for the event's type: a set created after an event never sees it, as
 * with NVML.  The events in the file at start-up happen at the first wait
 * after nvmlInit (state.c), so every set registered by then gets them.
 * nvmlEventSetWait gives the state lock up while it waits, waking when the
 * configuration changes (state.c broadcasts) and re-checking the file every
 * 20 ms (MOCK_NVML_EVENT_POLL_MS, 1 to 1000, changes it: the benchmark uses
 * 1 to time what devlet adds), so events appended to the file reach a
 * waiter within that time.
 *
 * MOCK_NVML_EVENT_HOLD names a file: while it exists, a wait neither
 * delivers nor times out (only a freed set or nvmlShutdown ends it), and
 * each wait appends "held" to the file when it starts being held, so a test
 * knows that a waiter is stuck inside NVML, as a real wait is for up to its
 * timeout. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mock.h"

#define POLL_MS_DEFAULT 20ULL

static unsigned long long poll_us(void)
{
        const char *s = getenv("MOCK_NVML_EVENT_POLL_MS");
        char *end;
        unsigned long long ms = s && *s ? strtoull(s, &end, 10) : 0;
        if (!s || !*s || *end || ms < 1 || ms > 1000)
                ms = POLL_MS_DEFAULT;
        return ms * 1000ULL;
}

MOCK_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!set)
                return NVML_ERROR_INVALID_ARGUMENT;
        *set = mock_event_set_new();
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!mock_event_set_valid(set))
                return NVML_ERROR_INVALID_ARGUMENT;
        mock_event_set_release(set);
        return NVML_SUCCESS;
}

MOCK_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                          unsigned long long *eventTypes)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!eventTypes)
                return NVML_ERROR_INVALID_ARGUMENT;
        *eventTypes = d->gpu->supported_events;
        return NVML_SUCCESS;
}

/* Registration is per GPU: events of a MIG instance arrive on its parent
 * with the instance IDs set.  Asking for a type the GPU does not support
 * registers nothing. */
MOCK_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                  unsigned long long eventTypes, nvmlEventSet_t set)
{
        MOCK_LOCKED();
        struct nvmlDevice_st *d;
        nvmlReturn_t r = mock_device_gpu(device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!mock_event_set_valid(set))
                return NVML_ERROR_INVALID_ARGUMENT;
        if (eventTypes & ~d->gpu->supported_events)
                return NVML_ERROR_NOT_SUPPORTED;
        for (size_t i = 0; i < set->n_regs; i++)
                if (set->regs[i].dev == d) {
                        set->regs[i].mask |= eventTypes;
                        return NVML_SUCCESS;
                }
        mock_grow((void **)&set->regs, &set->cap_regs, set->n_regs + 1, sizeof(*set->regs));
        set->regs[set->n_regs++] =
            (struct mock_reg){.dev = d, .mask = eventTypes, .since = mock_event_clock_tick()};
        return NVML_SUCCESS;
}

/* Advances the set's cursor to the next event it registered for before
 * the event happened. */
static const struct mock_event *next_event(nvmlEventSet_t set)
{
        while (set->cursor < mock_event_count()) {
                const struct mock_event *e = mock_event_at(set->cursor);
                if (!e->at)
                        break; /* not happened yet */
                set->cursor++;
                for (size_t i = 0; i < set->n_regs; i++)
                        if (e->gpu && set->regs[i].dev == e->gpu && (set->regs[i].mask & e->type) &&
                            set->regs[i].since < e->at)
                                return e;
        }
        return NULL;
}

/* Whether MOCK_NVML_EVENT_HOLD's file exists; the first time for a wait,
 * appends "held" to it. */
static bool hold(bool *told)
{
        const char *path = getenv("MOCK_NVML_EVENT_HOLD");
        if (!path || !*path || access(path, F_OK) != 0)
                return false;
        if (!*told) {
                int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
                if (fd >= 0) {
                        if (write(fd, "held\n", 5) != 5)
                                fputs("mock-nvml: cannot write to MOCK_NVML_EVENT_HOLD\n", stderr);
                        close(fd);
                }
                *told = true;
        }
        return true;
}

/* size: 32 bytes for _v2, 24 (no instance IDs) for the unversioned call. */
static nvmlReturn_t wait_event(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeoutms,
                               size_t size)
{
        MOCK_LOCKED();
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        if (!data || !mock_event_set_valid(set))
                return NVML_ERROR_INVALID_ARGUMENT;
        unsigned long long deadline = mock_monotonic_us() + (unsigned long long)timeoutms * 1000ULL;
        unsigned long long poll = poll_us();
        const struct mock_event *e;
        bool told = false;
        mock_events_begin();
        set->waiters++;
        for (;;) {
                if (set->dead) {
                        r = NVML_ERROR_UNINITIALIZED;
                        break;
                }
                if (hold(&told)) {
                        mock_wait_until(mock_monotonic_us() + poll);
                        if (!set->dead)
                                mock_enter();
                        continue;
                }
                if ((e = next_event(set))) {
                        nvmlEventData_t v = {
                            .device = e->gpu,
                            .eventType = e->type,
                            .eventData = e->data,
                            .gpuInstanceId = e->gi,
                            .computeInstanceId = e->ci,
                        };
                        memcpy(data, &v, size);
                        r = NVML_SUCCESS;
                        break;
                }
                unsigned long long now = mock_monotonic_us();
                if (now >= deadline) {
                        r = NVML_ERROR_TIMEOUT;
                        break;
                }
                mock_wait_until(deadline - now < poll ? deadline : now + poll);
                /* After shutdown the set is dead; otherwise look at the file. */
                if (!set->dead)
                        mock_enter();
        }
        mock_event_set_leave(set);
        return r;
}

MOCK_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                             unsigned int timeoutms)
{
        return wait_event(set, data, timeoutms, sizeof(*data));
}

MOCK_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data,
                                          unsigned int timeoutms)
{
        return wait_event(set, data, timeoutms, offsetof(nvmlEventData_t, gpuInstanceId));
}
