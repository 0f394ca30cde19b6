/* What the mock NVML's unit tests share: every symbol of nvml.h resolved
 * from the mock library (N(f) calls one), a temporary directory for each
 * test's YAML, and small helpers.  Included by test-mock-nvml*.c only. */
#ifndef DEVLET_TESTS_MOCK_NVML_TEST_H
#define DEVLET_TESTS_MOCK_NVML_TEST_H

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "devices/nvidia/nvml.h"
#include "test-util.h"

/* Every function nvml.h declares. */
/* clang-format off */
#define NVML_FUNCS(X) \
        X(nvmlInit) X(nvmlInit_v2) X(nvmlInitWithFlags) X(nvmlShutdown) X(nvmlErrorString) \
        X(nvmlSystemGetDriverVersion) X(nvmlSystemGetNVMLVersion) \
        X(nvmlSystemGetCudaDriverVersion) X(nvmlSystemGetCudaDriverVersion_v2) \
        X(nvmlSystemGetProcessName) X(nvmlDeviceGetCount) X(nvmlDeviceGetCount_v2) \
        X(nvmlDeviceGetHandleByIndex) X(nvmlDeviceGetHandleByIndex_v2) \
        X(nvmlDeviceGetHandleByUUID) X(nvmlDeviceGetHandleBySerial) \
        X(nvmlDeviceGetHandleByPciBusId) X(nvmlDeviceGetHandleByPciBusId_v2) \
        X(nvmlDeviceGetUUID) X(nvmlDeviceGetName) X(nvmlDeviceGetBrand) X(nvmlDeviceGetIndex) \
        X(nvmlDeviceGetGpuFabricInfo) \
        X(nvmlDeviceGetAddressingMode) \
        X(nvmlDeviceGetC2cModeInfoV) \
        X(nvmlDeviceGetMinorNumber) X(nvmlDeviceGetSerial) X(nvmlDeviceGetBoardPartNumber) \
        X(nvmlDeviceGetVbiosVersion) X(nvmlDeviceGetPciInfo) X(nvmlDeviceGetPciInfo_v2) \
        X(nvmlDeviceGetPciInfo_v3) X(nvmlDeviceGetCudaComputeCapability) \
        X(nvmlDeviceGetArchitecture) X(nvmlDeviceGetPersistenceMode) X(nvmlDeviceGetComputeMode) \
        X(nvmlDeviceGetEccMode) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2) \
        X(nvmlDeviceGetNumaNodeId) X(nvmlDeviceGetMemoryAffinity) X(nvmlDeviceGetCpuAffinity) \
        X(nvmlDeviceGetCpuAffinityWithinScope) X(nvmlDeviceGetTopologyCommonAncestor) \
        X(nvmlDeviceGetP2PStatus) X(nvmlDeviceGetNvLinkState) \
        X(nvmlDeviceGetNvLinkRemotePciInfo) X(nvmlDeviceGetNvLinkRemotePciInfo_v2) \
        X(nvmlDeviceGetNvLinkRemoteDeviceType) X(nvmlDeviceGetNvLinkCapability) \
        X(nvmlDeviceGetMigMode) X(nvmlDeviceGetMaxMigDeviceCount) \
        X(nvmlDeviceGetMigDeviceHandleByIndex) X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle) \
        X(nvmlDeviceIsMigDeviceHandle) X(nvmlDeviceGetGpuInstanceId) \
        X(nvmlDeviceGetComputeInstanceId) X(nvmlDeviceGetAttributes) \
        X(nvmlDeviceGetAttributes_v2) X(nvmlDeviceGetGpuInstanceProfileInfo) \
        X(nvmlDeviceGetGpuInstanceProfileInfoV) X(nvmlDeviceGetGpuInstances) \
        X(nvmlDeviceGetGpuInstanceById) X(nvmlGpuInstanceGetInfo) \
        X(nvmlGpuInstanceGetComputeInstanceProfileInfo) \
        X(nvmlGpuInstanceGetComputeInstanceProfileInfoV) X(nvmlGpuInstanceGetComputeInstances) \
        X(nvmlGpuInstanceGetComputeInstanceById) X(nvmlComputeInstanceGetInfo) \
        X(nvmlComputeInstanceGetInfo_v2) X(nvmlEventSetCreate) X(nvmlDeviceRegisterEvents) \
        X(nvmlDeviceGetSupportedEventTypes) X(nvmlEventSetWait) X(nvmlEventSetWait_v2) \
        X(nvmlEventSetFree) X(nvmlDeviceGetUtilizationRates) X(nvmlDeviceGetEncoderUtilization) \
        X(nvmlDeviceGetDecoderUtilization) X(nvmlDeviceGetTemperature) \
        X(nvmlDeviceGetPowerUsage) X(nvmlDeviceGetPowerManagementLimit) \
        X(nvmlDeviceGetEnforcedPowerLimit) X(nvmlDeviceGetTotalEnergyConsumption) \
        X(nvmlDeviceGetClockInfo) X(nvmlDeviceGetMaxClockInfo) X(nvmlDeviceGetPerformanceState) \
        X(nvmlDeviceGetCurrentClocksThrottleReasons) X(nvmlDeviceGetCurrentClocksEventReasons) \
        X(nvmlDeviceGetPcieReplayCounter) X(nvmlDeviceGetRemappedRows) \
        X(nvmlDeviceGetFieldValues) X(nvmlDeviceGetComputeRunningProcesses) \
        X(nvmlDeviceGetComputeRunningProcesses_v2) X(nvmlDeviceGetComputeRunningProcesses_v3) \
        X(nvmlDeviceGetGraphicsRunningProcesses) X(nvmlDeviceGetGraphicsRunningProcesses_v2) \
        X(nvmlDeviceGetGraphicsRunningProcesses_v3) X(nvmlDeviceGetProcessUtilization) \
        X(nvmlDeviceGetPcieThroughput) X(nvmlGpmQueryDeviceSupport) X(nvmlGpmSampleAlloc) \
        X(nvmlGpmSampleFree) X(nvmlGpmSampleGet) X(nvmlGpmMigSampleGet) X(nvmlGpmMetricsGet)
/* clang-format on */

#define DECLARE(f) static typeof(f) *p_##f;
NVML_FUNCS(DECLARE)
/* Calls through the resolved pointer: N(nvmlInit_v2)(). */
#define N(f) (p_##f)

TEST_HELPER void *lib;
static char dir[PATH_MAX], cfg_path[PATH_MAX + 16];
static const char *profiles = "tests/mock-nvml/profiles";

TEST_HELPER int setup(void **state)
{
        char path[PATH_MAX];
        if (test_mock_nvml_path(path, sizeof(path)) < 0)
                return -1;
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
                fprintf(stderr, "cannot load the mock NVML library: %s (build it with make)\n",
                        dlerror());
                return -1;
        }
        int missing = 0;
#define LOAD(f)                                              \
        if (!(p_##f = (typeof(f) *)dlsym(lib, #f))) {        \
                fprintf(stderr, "mock NVML lacks %s\n", #f); \
                missing++;                                   \
        }
        NVML_FUNCS(LOAD)
        snprintf(dir, sizeof(dir), "%s/mock-nvml-XXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir))
                return -1;
        snprintf(cfg_path, sizeof(cfg_path), "%s/nvml.yaml", dir);
        (void)state;
        return missing ? -1 : 0;
}

TEST_HELPER int teardown(void **state)
{
        (void)state;
        char p[PATH_MAX + 32];
        snprintf(p, sizeof(p), "%s/nvml.yaml", dir);
        unlink(p);
        rmdir(dir);
        if (lib)
                dlclose(lib);
        return 0;
}

/* Replaces the configuration file atomically and points the mock at it. */
TEST_HELPER void write_cfg(const char *yaml)
{
        char tmp[PATH_MAX + 32];
        snprintf(tmp, sizeof(tmp), "%s/.nvml.yaml.tmp", dir);
        FILE *f = fopen(tmp, "we");
        assert_non_null(f);
        fputs(yaml, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(rename(tmp, cfg_path), 0);
        setenv("MOCK_NVML_CONFIG", cfg_path, 1);
}

TEST_HELPER void use_profile(const char *name)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", profiles, name);
        assert_int_equal(access(p, R_OK), 0);
        setenv("MOCK_NVML_CONFIG", p, 1);
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
}

TEST_HELPER nvmlDevice_t dev(unsigned i)
{
        nvmlDevice_t d = NULL;
        assert_int_equal(N(nvmlDeviceGetHandleByIndex_v2)(i, &d), NVML_SUCCESS);
        return d;
}

TEST_HELPER nvmlDevice_t mig(nvmlDevice_t gpu, unsigned i)
{
        nvmlDevice_t m = NULL;
        assert_int_equal(N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, i, &m), NVML_SUCCESS);
        return m;
}

/* Runs fn with stderr sent to a file; returns what it printed. */
static char *capture_stderr(nvmlReturn_t (*fn)(void), nvmlReturn_t *r)
{
        static char buf[2048];
        char p[PATH_MAX + 32];
        snprintf(p, sizeof(p), "%s/stderr", dir);
        fflush(stderr);
        int saved = dup(2);
        FILE *f = fopen(p, "w+e");
        assert_non_null(f);
        dup2(fileno(f), 2);
        *r = fn();
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        rewind(f);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        fclose(f);
        unlink(p);
        return buf;
}

static const char two_gpus[] __attribute__((unused)) =
    "driverVersion: \"550.54.15\"\n"
    "devices:\n"
    "  - {uuid: GPU-aaaaaaaa-0000-0000-0000-000000000001, name: NVIDIA H100 80GB HBM3,\n"
    "     memoryMiB: 81559, pciBusId: \"00000000:18:00.0\", computeCapability: \"9.0\",\n"
    "     temperatureC: 41}\n"
    "  - {uuid: GPU-aaaaaaaa-0000-0000-0000-000000000002, name: NVIDIA H100 80GB HBM3,\n"
    "     memoryMiB: 81559, pciBusId: \"00000000:2a:00.0\", computeCapability: \"9.0\",\n"
    "     temperatureC: 42, memoryReservedMiB: 530, processes: [{pid: 7, usedMemoryMiB: 1000}]}\n";

#endif
