/* Mock NVML: event sets.
 *
 * Events come from the configuration's `events` list, logged by state.c in
 * the order they appeared.  Each event set walks that log with its own
 * cursor, so every event is delivered once per set, to the sets that
 * registered its GPU for its type; a new set starts at the beginning.
 * nvmlEventSetWait gives the state lock up while it waits, waking when the
 * configuration changes (state.c broadcasts) and re-checking the file every
 * 20 ms (MOCK_NVML_EVENT_POLL_MS, 1 to 1000, changes it: the benchmark uses
 * 1 to time what devlet adds), so events appended to the file reach a
 * waiter within that time. */
#include <stdlib.h>
#include <string.h>

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
        set->regs[set->n_regs++] = (struct mock_reg){.dev = d, .mask = eventTypes};
        return NVML_SUCCESS;
}

/* Advances the set's cursor to the next event it registered for. */
static const struct mock_event *next_event(nvmlEventSet_t set)
{
        while (set->cursor < mock_event_count()) {
                const struct mock_event *e = mock_event_at(set->cursor++);
                for (size_t i = 0; i < set->n_regs; i++)
                        if (e->gpu && set->regs[i].dev == e->gpu && (set->regs[i].mask & e->type))
                                return e;
        }
        return NULL;
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
        set->waiters++;
        for (;;) {
                if (set->dead) {
                        r = NVML_ERROR_UNINITIALIZED;
                        break;
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
