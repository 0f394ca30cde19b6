/* Tests of the mock libnvidia-ml.so.1's events (XIDs through an event set,
 * held events, each event once per process) and of GPUs lost and found
 * again when its YAML changes.  Shared set-up: mock-nvml-test.h. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/nvidia/nvml.h"

#include "mock-nvml-test.h"

static const char events_cfg[] =
    "devices:\n"
    "  - {uuid: GPU-bbbbbbbb-0000-0000-0000-000000000001, name: NVIDIA A100-SXM4-40GB,\n"
    "     memoryMiB: 40960, pciBusId: \"00000000:07:00.0\", computeCapability: \"8.0\",\n"
    "     mig: [{gi: 1, ci: 0, profile: 3g.20gb, uuid: "
    "MIG-bbbbbbbb-0000-0000-0000-000000000011}]}\n"
    "  - {uuid: GPU-bbbbbbbb-0000-0000-0000-000000000002, name: NVIDIA A100-SXM4-40GB,\n"
    "     memoryMiB: 40960, pciBusId: \"00000000:0f:00.0\", computeCapability: \"8.0\"}\n"
    "events:\n"
    "  - {device: 0, type: xid, xid: 79}\n"
    "  - {device: GPU-bbbbbbbb-0000-0000-0000-000000000002, type: doubleBitEcc}\n"
    "  - {device: 0, type: xid, xid: 43, gi: 1, ci: 0}\n";

struct waiter {
        nvmlEventSet_t set;
        bool no_timeout; /* wait 0 ms instead of a minute */
        nvmlReturn_t r;
        nvmlEventData_t data;
};

static void *wait_thread(void *arg)
{
        struct waiter *w = arg;
        w->r = N(nvmlEventSetWait_v2)(w->set, &w->data, w->no_timeout ? 0 : 60000);
        return NULL;
}

static void test_events(void **state)
{
        (void)state;
        write_cfg(events_cfg);
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        nvmlDevice_t g0 = dev(0), g1 = dev(1);
        nvmlEventSet_t only0, both;
        nvmlEventData_t e;
        unsigned long long types;
        assert_int_equal(N(nvmlDeviceGetSupportedEventTypes)(g0, &types), NVML_SUCCESS);
        assert_true(types & nvmlEventTypeXidCriticalError);
        assert_int_equal(N(nvmlEventSetCreate)(&only0), NVML_SUCCESS);
        assert_int_equal(N(nvmlEventSetCreate)(&both), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceRegisterEvents)(g0, nvmlEventTypePowerSourceChange, only0),
                         NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(
            N(nvmlDeviceRegisterEvents)(mig(g0, 0), nvmlEventTypeXidCriticalError, only0),
            NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlDeviceRegisterEvents)(g0, nvmlEventTypeXidCriticalError, only0),
                         NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceRegisterEvents)(g0, nvmlEventTypeXidCriticalError, both),
                         NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceRegisterEvents)(g1, nvmlEventTypeDoubleBitEccError, both),
                         NVML_SUCCESS);

        assert_int_equal(N(nvmlEventSetWait_v2)(only0, &e, 1000), NVML_SUCCESS);
        assert_ptr_equal(e.device, g0);
        assert_int_equal(e.eventType, nvmlEventTypeXidCriticalError);
        assert_int_equal(e.eventData, 79);
        assert_int_equal(e.gpuInstanceId, DEVLET_NVML_NO_INSTANCE_ID);
        assert_int_equal(N(nvmlEventSetWait_v2)(only0, &e, 1000), NVML_SUCCESS);
        assert_int_equal(e.eventData, 43);
        assert_int_equal(e.gpuInstanceId, 1);
        assert_int_equal(e.computeInstanceId, 0);
        assert_int_equal(N(nvmlEventSetWait_v2)(only0, &e, 30), NVML_ERROR_TIMEOUT);

        /* The unversioned wait fills 24 bytes. */
        unsigned char raw[sizeof(nvmlEventData_t)];
        memset(raw, 0xa5, sizeof(raw));
        assert_int_equal(N(nvmlEventSetWait)(both, (nvmlEventData_t *)(void *)raw, 1000),
                         NVML_SUCCESS);
        assert_int_equal(raw[24], 0xa5);
        assert_int_equal(N(nvmlEventSetWait_v2)(both, &e, 1000), NVML_SUCCESS);
        assert_ptr_equal(e.device, g1);
        assert_int_equal(e.eventType, nvmlEventTypeDoubleBitEccError);
        assert_int_equal(N(nvmlEventSetWait_v2)(both, &e, 1000), NVML_SUCCESS);
        assert_int_equal(e.eventData, 43);
        assert_int_equal(N(nvmlEventSetWait_v2)(both, &e, 0), NVML_ERROR_TIMEOUT);

        /* A waiter blocked in another thread does not hold the library, and
         * an event appended to the file reaches it (and only that one: the
         * three already seen are not delivered again). */
        struct waiter w = {.set = only0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
        unsigned n;
        assert_int_equal(N(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
        char more[sizeof(events_cfg) + 64];
        snprintf(more, sizeof(more), "%s  - {device: 0, type: xid, xid: 48}\n", events_cfg);
        write_cfg(more);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(w.r, NVML_SUCCESS);
        assert_int_equal(w.data.eventData, 48);
        assert_int_equal(N(nvmlEventSetWait_v2)(only0, &e, 0), NVML_ERROR_TIMEOUT);

        /* A set registered now gets none of the events that happened before
         * (NVML reports what happens after registration); one appended now
         * reaches it and the older sets alike. */
        nvmlEventSet_t late;
        assert_int_equal(N(nvmlEventSetCreate)(&late), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceRegisterEvents)(g0, nvmlEventTypeXidCriticalError, late),
                         NVML_SUCCESS);
        assert_int_equal(N(nvmlEventSetWait_v2)(late, &e, 0), NVML_ERROR_TIMEOUT);
        char again[sizeof(more) + 64];
        snprintf(again, sizeof(again), "%s  - {device: 0, type: xid, xid: 31}\n", more);
        write_cfg(again);
        assert_int_equal(N(nvmlEventSetWait_v2)(both, &e, 1000), NVML_SUCCESS);
        assert_int_equal(e.eventData, 48); /* not read from this set yet */
        nvmlEventSet_t sets[] = {late, only0, both};
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(N(nvmlEventSetWait_v2)(sets[i], &e, 1000), NVML_SUCCESS);
                assert_int_equal(e.eventData, 31);
                assert_int_equal(N(nvmlEventSetWait_v2)(sets[i], &e, 0), NVML_ERROR_TIMEOUT);
        }
        assert_int_equal(N(nvmlEventSetFree)(late), NVML_SUCCESS);
        assert_int_equal(N(nvmlEventSetFree)(late), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlEventSetFree)(only0), NVML_SUCCESS);

        /* Shutdown ends a wait, whether it is under way or not yet begun. */
        w = (struct waiter){.set = both};
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(w.r, NVML_ERROR_UNINITIALIZED);

        /* Once per process: after nvmlShutdown and nvmlInit the events in
         * the file have happened, and a new set gets none of them. */
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        nvmlEventSet_t fresh;
        assert_int_equal(N(nvmlEventSetCreate)(&fresh), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceRegisterEvents)(g0, nvmlEventTypeXidCriticalError, fresh),
                         NVML_SUCCESS);
        assert_int_equal(N(nvmlEventSetWait_v2)(fresh, &e, 0), NVML_ERROR_TIMEOUT);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

/* MOCK_NVML_EVENT_HOLD: a wait stays inside the library while the file
 * exists, says so in the file, and carries on when it is removed. */
static void test_event_hold(void **state)
{
        (void)state;
        char hold[PATH_MAX + 32];
        snprintf(hold, sizeof(hold), "%s/hold", dir);
        write_cfg(events_cfg);
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        nvmlEventSet_t set;
        assert_int_equal(N(nvmlEventSetCreate)(&set), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceRegisterEvents)(dev(0), nvmlEventTypeXidCriticalError, set),
                         NVML_SUCCESS);
        FILE *f = fopen(hold, "we");
        assert_non_null(f);
        assert_int_equal(fclose(f), 0);
        setenv("MOCK_NVML_EVENT_HOLD", hold, 1);

        /* even a wait that would time out at once is held */
        struct waiter w = {.set = set, .no_timeout = true};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
        char text[64] = "";
        for (int i = 0; i < 10000 && !strstr(text, "held"); i++) {
                f = fopen(hold, "re");
                assert_non_null(f);
                size_t n = fread(text, 1, sizeof(text) - 1, f);
                text[n] = 0;
                fclose(f);
                usleep(1000);
        }
        assert_non_null(strstr(text, "held"));
        /* an event appended while held is delivered once released */
        char more[sizeof(events_cfg) + 64];
        snprintf(more, sizeof(more), "%s  - {device: 0, type: xid, xid: 63}\n", events_cfg);
        write_cfg(more);
        unsigned n;
        assert_int_equal(N(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
        assert_int_equal(unlink(hold), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        unsetenv("MOCK_NVML_EVENT_HOLD");
        assert_int_equal(w.r, NVML_SUCCESS);
        assert_int_equal(w.data.eventData, 63);
        assert_int_equal(N(nvmlEventSetFree)(set), NVML_SUCCESS);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

static const char lost_cfg[] =
    "devices:\n"
    "  - {uuid: GPU-cccccccc-0000-0000-0000-000000000001, name: NVIDIA A100-SXM4-40GB,\n"
    "     memoryMiB: 40960, pciBusId: \"00000000:07:00.0\", computeCapability: \"8.0\", "
    "temperatureC: 40,\n"
    "     lost: %s, mig: [{gi: 2, ci: 0, profile: 3g.20gb, uuid: "
    "MIG-cccccccc-0000-0000-0000-000000000011}]}\n"
    "  - {uuid: GPU-cccccccc-0000-0000-0000-000000000002, name: NVIDIA A100-SXM4-40GB,\n"
    "     memoryMiB: 40960, pciBusId: \"00000000:0f:00.0\", computeCapability: \"8.0\", "
    "temperatureC: %d}\n";

static void write_lost(const char *lost, int temp)
{
        char buf[sizeof(lost_cfg) + 32];
        snprintf(buf, sizeof(buf), lost_cfg, lost, temp);
        write_cfg(buf);
}

static nvmlReturn_t count_call(void)
{
        unsigned n;
        return N(nvmlDeviceGetCount_v2)(&n);
}

static void test_lost_and_reload(void **state)
{
        (void)state;
        char name[96];
        unsigned t;
        nvmlDevice_t d, m;
        write_lost("false", 50);
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        nvmlDevice_t g0 = dev(0), g1 = dev(1), m0 = mig(g0, 0);
        assert_int_equal(N(nvmlDeviceGetTemperature)(g1, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
        assert_int_equal(t, 50);

        /* The file changes: the next call sees it, through the same handles. */
        write_lost("true", 61);
        assert_int_equal(N(nvmlDeviceGetTemperature)(g1, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
        assert_int_equal(t, 61);
        assert_int_equal(N(nvmlDeviceGetName)(g0, name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(N(nvmlDeviceGetTemperature)(g0, NVML_TEMPERATURE_GPU, &t),
                         NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(N(nvmlDeviceGetName)(m0, name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(
            N(nvmlDeviceGetHandleByUUID)("GPU-cccccccc-0000-0000-0000-000000000001", &d),
            NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(N(nvmlDeviceGetHandleByIndex_v2)(0, &d), NVML_SUCCESS);
        assert_ptr_equal(d, g0);
        assert_int_equal(N(nvmlDeviceGetMigDeviceHandleByIndex)(g0, 0, &m), NVML_ERROR_GPU_IS_LOST);

        write_lost("false", 62);
        assert_int_equal(N(nvmlDeviceGetName)(m0, name, sizeof(name)), NVML_SUCCESS);
        assert_string_equal(name, "NVIDIA A100-SXM4-40GB MIG 3g.20gb");
        assert_ptr_equal(mig(g0, 0), m0);

        /* A broken rewrite is reported once and the last good configuration
         * stays; at init a broken file is an error. */
        write_cfg("devices: {\n");
        nvmlReturn_t r;
        const char *err = capture_stderr(count_call, &r);
        assert_int_equal(r, NVML_SUCCESS);
        assert_non_null(strstr(err, "keeping the previous configuration"));
        assert_int_equal(N(nvmlDeviceGetTemperature)(g1, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
        assert_int_equal(t, 62);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
        err = capture_stderr(N(nvmlInit_v2), &r);
        assert_int_equal(r, NVML_ERROR_UNKNOWN);
        write_lost("false", 63);
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetTemperature)(g1, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
        assert_int_equal(t, 63);

        /* GPU 0 and its MIG device disappear from the file. */
        write_cfg(
            "devices:\n"
            "  - {uuid: GPU-cccccccc-0000-0000-0000-000000000002, name: NVIDIA A100-SXM4-40GB,\n"
            "     memoryMiB: 40960, pciBusId: \"00000000:0f:00.0\", computeCapability: \"8.0\"}\n");
        assert_int_equal(N(nvmlDeviceGetName)(g0, name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(N(nvmlDeviceGetName)(m0, name, sizeof(name)), NVML_ERROR_INVALID_ARGUMENT);
        assert_ptr_equal(dev(0), g1);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_events),
            cmocka_unit_test(test_event_hold),
            cmocka_unit_test(test_lost_and_reload),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
