/* Tests of the mock libnvidia-ml.so.1 (tests/mock-nvml), used the way devlet
 * will use the real one: dlopen() and symbols resolved through the
 * prototypes of src/devices/nvidia/nvml.h.
 *
 * The library is <BUILD>/mock-nvml/libnvidia-ml.so.1, found next to this
 * binary (<BUILD>/tests/) or at $MOCK_NVML_LIB; the profiles are read from
 * tests/mock-nvml/profiles below the working directory (make runs tests
 * from the repository root).  Each test writes its own YAML into a temporary
 * directory and replaces it atomically (write, then rename) to change it. */
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

static void test_all_symbols(void **state)
{
        (void)state;
        /* setup() fails when one is missing; check a few resolved to distinct code. */
        assert_ptr_not_equal((void *)N(nvmlInit), (void *)N(nvmlShutdown));
        assert_ptr_not_equal((void *)N(nvmlEventSetWait), (void *)N(nvmlEventSetWait_v2));
}

static void test_error_strings(void **state)
{
        (void)state;
        assert_string_equal(N(nvmlErrorString)(NVML_SUCCESS), "Success");
        assert_string_equal(N(nvmlErrorString)(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
        assert_string_equal(N(nvmlErrorString)(NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
        assert_string_equal(N(nvmlErrorString)(NVML_ERROR_TIMEOUT), "Timeout");
        assert_string_equal(N(nvmlErrorString)(NVML_ERROR_UNKNOWN), "Unknown Error");
        assert_string_equal(N(nvmlErrorString)((nvmlReturn_t)4242), "Unknown Error");
}

static void test_init_refcount(void **state)
{
        (void)state;
        unsigned n;
        unsetenv("MOCK_NVML_CONFIG");
        nvmlReturn_t r;
        const char *err = capture_stderr(N(nvmlInit_v2), &r);
        assert_int_equal(r, NVML_ERROR_LIBRARY_NOT_FOUND);
        assert_non_null(strstr(err, "mock-nvml: MOCK_NVML_CONFIG is not set"));
        setenv("MOCK_NVML_CONFIG", "/nonexistent/nvml.yaml", 1);
        err = capture_stderr(N(nvmlInit), &r);
        assert_int_equal(r, NVML_ERROR_LIBRARY_NOT_FOUND);
        assert_non_null(strstr(err, "mock-nvml: /nonexistent/nvml.yaml"));

        assert_int_equal(N(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED);
        write_cfg(two_gpus);
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        assert_int_equal(N(nvmlInitWithFlags)(NVML_INIT_FLAG_NO_GPUS), NVML_SUCCESS);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
        assert_int_equal(n, 2);
        assert_int_equal(N(nvmlDeviceGetCount)(NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED);
}

static void test_init_errors(void **state)
{
        (void)state;
        nvmlReturn_t r;
        write_cfg("initError: NVML_ERROR_DRIVER_NOT_LOADED\n");
        assert_int_equal(N(nvmlInit_v2)(), NVML_ERROR_DRIVER_NOT_LOADED);
        assert_int_equal(N(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED);
        write_cfg("initError: 18\ndevices: []\n");
        assert_int_equal(N(nvmlInit_v2)(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);

        write_cfg("devices: [\n");
        const char *err = capture_stderr(N(nvmlInit_v2), &r);
        assert_int_equal(r, NVML_ERROR_UNKNOWN);
        assert_non_null(strstr(err, "mock-nvml: "));
        assert_non_null(strstr(err, cfg_path));
        write_cfg("devices:\n  - {uuid: GPU-1, name: x, memoryMiB: 1, pciBusId: \"0:1:0.0\",\n"
                  "     computeCapability: \"8.0\", temperature: 3}\n");
        err = capture_stderr(N(nvmlInit_v2), &r);
        assert_int_equal(r, NVML_ERROR_UNKNOWN);
        assert_non_null(strstr(err, "nvml.yaml:3:32: devices[0]: unknown key"));
        write_cfg("devices:\n"
                  "  - {uuid: GPU-1, name: a, memoryMiB: 1, pciBusId: \"0:1:0.0\", "
                  "computeCapability: \"7.0\", nvlink: {1: 2}}\n"
                  "  - {uuid: GPU-2, name: b, memoryMiB: 1, pciBusId: \"0:2:0.0\", "
                  "computeCapability: \"7.0\", nvlink: {0: 1}}\n");
        err = capture_stderr(N(nvmlInit_v2), &r);
        assert_int_equal(r, NVML_ERROR_UNKNOWN);
        assert_non_null(strstr(err, "2 links to device 1, which has 1 back"));
        write_cfg("devices:\n  - {uuid: GPU-1, name: a, memoryMiB: 40960, pciBusId: \"0:1:0.0\",\n"
                  "     computeCapability: \"8.0\", mig: [{gi: 1, ci: 0, profile: 5g.50gb, uuid: "
                  "MIG-1}]}\n");
        err = capture_stderr(N(nvmlInit_v2), &r);
        assert_int_equal(r, NVML_ERROR_UNKNOWN);
        assert_non_null(strstr(err, "profile '5g.50gb' is not one of: 1g.5gb 2g.10gb 3g.20gb"));
        write_cfg("devices:\n  - {uuid: GPU-1, name: a, memoryMiB: 1, pciBusId: \"0:1:0.0\",\n"
                  "     computeCapability: \"10.0\", fabric: {clusterUuid: 12-34, cliqueId: 1}}\n");
        err = capture_stderr(N(nvmlInit_v2), &r);
        assert_int_equal(r, NVML_ERROR_UNKNOWN);
        assert_non_null(strstr(err, "devices[0].fabric.clusterUuid: '12-34' is not a UUID"));
}

/* nvmlDeviceGetGpuFabricInfo: what the `fabric` key says, NOT_SUPPORTED
 * without it. */
static void test_fabric(void **state)
{
        (void)state;
        write_cfg("devices:\n"
                  "  - {uuid: GPU-1, name: a, memoryMiB: 1, pciBusId: \"0:1:0.0\", computeCapability: "
                  "\"10.0\", fabric: {clusterUuid: 5c1b0e6a-3f0e-4a8e-9d4c-0b7f2c9e1a11, cliqueId: 7}}\n"
                  "  - {uuid: GPU-2, name: b, memoryMiB: 1, pciBusId: \"0:2:0.0\", computeCapability: "
                  "\"10.0\", fabric: {state: not_started, status: 3}}\n"
                  "  - {uuid: GPU-3, name: c, memoryMiB: 1, pciBusId: \"0:3:0.0\", computeCapability: "
                  "\"9.0\"}\n");
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        nvmlGpuFabricInfo_t fi;
        memset(&fi, 0xff, sizeof(fi));
        assert_int_equal(N(nvmlDeviceGetGpuFabricInfo)(dev(0), &fi), NVML_SUCCESS);
        static const unsigned char uuid[16] = { 0x5c, 0x1b, 0x0e, 0x6a, 0x3f, 0x0e, 0x4a, 0x8e,
                                                0x9d, 0x4c, 0x0b, 0x7f, 0x2c, 0x9e, 0x1a, 0x11 };
        assert_memory_equal(fi.clusterUuid, uuid, sizeof(uuid));
        assert_int_equal(fi.cliqueId, 7);
        assert_int_equal(fi.state, NVML_GPU_FABRIC_STATE_COMPLETED);
        assert_int_equal(fi.status, NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetGpuFabricInfo)(dev(1), &fi), NVML_SUCCESS);
        assert_int_equal(fi.state, NVML_GPU_FABRIC_STATE_NOT_STARTED);
        assert_int_equal(fi.status, NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(fi.cliqueId, 0);
        assert_int_equal(N(nvmlDeviceGetGpuFabricInfo)(dev(2), &fi), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlDeviceGetGpuFabricInfo)(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

/* Grace: nvmlDeviceGetAddressingMode (versioned struct, v1 only) and
 * nvmlDeviceGetC2cModeInfoV (no version word) from `addressingMode` and
 * `c2c`; NOT_SUPPORTED without the keys. */
static void test_grace_c2c(void **state)
{
        (void)state;
        write_cfg("devices:\n"
                  "  - {uuid: GPU-1, name: a, memoryMiB: 1, pciBusId: \"9:1:0.0\", computeCapability: "
                  "\"9.0\", addressingMode: ats, c2c: true}\n"
                  "  - {uuid: GPU-2, name: b, memoryMiB: 1, pciBusId: \"0:2:0.0\", computeCapability: "
                  "\"9.0\"}\n");
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        nvmlDeviceAddressingMode_t mode = { .version = nvmlDeviceAddressingMode_v1 };
        assert_int_equal(N(nvmlDeviceGetAddressingMode)(dev(0), &mode), NVML_SUCCESS);
        assert_int_equal(mode.value, NVML_DEVICE_ADDRESSING_MODE_ATS);
        mode.version = 0x02000008;
        assert_int_equal(N(nvmlDeviceGetAddressingMode)(dev(0), &mode),
                         NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        mode.version = nvmlDeviceAddressingMode_v1;
        assert_int_equal(N(nvmlDeviceGetAddressingMode)(dev(1), &mode), NVML_ERROR_NOT_SUPPORTED);
        nvmlC2cModeInfo_v1_t c2c = { 0 };
        assert_int_equal(N(nvmlDeviceGetC2cModeInfoV)(dev(0), &c2c), NVML_SUCCESS);
        assert_int_equal(c2c.isC2cEnabled, 1);
        assert_int_equal(N(nvmlDeviceGetC2cModeInfoV)(dev(1), &c2c), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_enumeration(void **state)
{
        (void)state;
        use_profile("h100-8x-nvswitch.yaml");
        unsigned n, idx, minor;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
        nvmlDevice_t d, other;
        assert_int_equal(N(nvmlDeviceGetCount)(&n), NVML_SUCCESS);
        assert_int_equal(n, 8);
        for (unsigned i = 0; i < n; i++) {
                d = dev(i);
                assert_int_equal(N(nvmlDeviceGetIndex)(d, &idx), NVML_SUCCESS);
                assert_int_equal(idx, i);
                assert_int_equal(N(nvmlDeviceGetMinorNumber)(d, &minor), NVML_SUCCESS);
                assert_int_equal(minor, i);
                assert_int_equal(N(nvmlDeviceGetUUID)(d, uuid, sizeof(uuid)), NVML_SUCCESS);
                assert_int_equal(N(nvmlDeviceGetHandleByUUID)(uuid, &other), NVML_SUCCESS);
                assert_ptr_equal(other, d);
                assert_int_equal(N(nvmlDeviceGetSerial)(d, serial, sizeof(serial)), NVML_SUCCESS);
                assert_int_equal(N(nvmlDeviceGetHandleBySerial)(serial, &other), NVML_SUCCESS);
                assert_ptr_equal(other, d);
        }
        assert_int_equal(N(nvmlDeviceGetHandleByIndex)(1, &d), NVML_SUCCESS);
        assert_ptr_equal(d, dev(1));
        assert_int_equal(N(nvmlDeviceGetHandleByPciBusId_v2)("00000000:2A:00.0", &other),
                         NVML_SUCCESS);
        assert_ptr_equal(other, d);
        assert_int_equal(N(nvmlDeviceGetHandleByPciBusId)("0000:2a:00.0", &other), NVML_SUCCESS);
        assert_ptr_equal(other, d);
        assert_int_equal(N(nvmlDeviceGetHandleByPciBusId_v2)("0000:2b:00.0", &other),
                         NVML_ERROR_NOT_FOUND);
        assert_int_equal(N(nvmlDeviceGetHandleByPciBusId_v2)("garbage", &other),
                         NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlDeviceGetHandleByIndex_v2)(8, &d), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlDeviceGetHandleByIndex_v2)(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(
            N(nvmlDeviceGetHandleByUUID)("GPU-00000000-0000-0000-0000-000000000000", &d),
            NVML_ERROR_NOT_FOUND);
        /* A pointer the library never handed out is refused, not followed. */
        assert_int_equal(N(nvmlDeviceGetUUID)((nvmlDevice_t)(void *)uuid, uuid, sizeof(uuid)),
                         NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlDeviceGetUUID)(dev(0), uuid, 10), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(N(nvmlDeviceGetUUID)(dev(0), NULL, 80), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_attributes(void **state)
{
        (void)state;
        use_profile("h100-8x-nvswitch.yaml");
        nvmlDevice_t d = dev(0);
        char s[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        unsigned u, u2, u3, u4;
        unsigned long long ull;
        int major, minor;
        assert_int_equal(N(nvmlSystemGetDriverVersion)(s, sizeof(s)), NVML_SUCCESS);
        assert_string_equal(s, "550.54.15");
        assert_int_equal(N(nvmlSystemGetNVMLVersion)(s, sizeof(s)), NVML_SUCCESS);
        assert_string_equal(s, "12.550.54.15");
        assert_int_equal(N(nvmlSystemGetDriverVersion)(s, 5), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(N(nvmlSystemGetCudaDriverVersion_v2)(&major), NVML_SUCCESS);
        assert_int_equal(major, 12040);
        assert_int_equal(N(nvmlDeviceGetName)(d, s, sizeof(s)), NVML_SUCCESS);
        assert_string_equal(s, "NVIDIA H100 80GB HBM3");
        nvmlBrandType_t brand;
        assert_int_equal(N(nvmlDeviceGetBrand)(d, &brand), NVML_SUCCESS);
        assert_int_equal(brand, NVML_BRAND_NVIDIA);
        assert_int_equal(N(nvmlDeviceGetCudaComputeCapability)(d, &major, &minor), NVML_SUCCESS);
        assert_int_equal(major * 10 + minor, 90);
        nvmlDeviceArchitecture_t arch;
        assert_int_equal(N(nvmlDeviceGetArchitecture)(d, &arch), NVML_SUCCESS);
        assert_int_equal(arch, NVML_DEVICE_ARCH_HOPPER);
        assert_int_equal(N(nvmlDeviceGetBoardPartNumber)(d, s, sizeof(s)), NVML_SUCCESS);
        assert_string_equal(s, "692-2G520-0200-000");
        assert_int_equal(N(nvmlDeviceGetVbiosVersion)(d, s, sizeof(s)), NVML_SUCCESS);
        assert_string_equal(s, "96.00.74.00.01");

        nvmlPciInfo_t pci;
        assert_int_equal(N(nvmlDeviceGetPciInfo_v3)(d, &pci), NVML_SUCCESS);
        assert_string_equal(pci.busId, "00000000:18:00.0");
        assert_string_equal(pci.busIdLegacy, "0000:18:00.0");
        assert_int_equal(pci.domain, 0);
        assert_int_equal(pci.bus, 0x18);
        assert_int_equal(pci.device, 0);
        assert_int_equal(pci.pciDeviceId, 0x233010de);
        assert_int_equal(pci.pciSubSystemId, 0x16c110de);
        /* The v1 layout is 52 bytes: nothing past it is written. */
        unsigned char raw[sizeof(nvmlPciInfo_t)];
        memset(raw, 0xa5, sizeof(raw));
        assert_int_equal(N(nvmlDeviceGetPciInfo)(d, (nvmlPciInfo_t *)(void *)raw), NVML_SUCCESS);
        assert_string_equal((char *)raw, "0000:18:00.0");
        assert_int_equal(raw[52], 0xa5);
        assert_int_equal(raw[51], 0);

        nvmlMemory_t m1;
        nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
        assert_int_equal(N(nvmlDeviceGetMemoryInfo)(d, &m1), NVML_SUCCESS);
        assert_int_equal(m1.total, 81559ULL << 20);
        assert_int_equal(m1.used, 0);
        assert_int_equal(m1.free, m1.total);
        assert_int_equal(N(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_SUCCESS);
        assert_int_equal(m2.total, 81559ULL << 20);
        m2.version = 1;
        assert_int_equal(N(nvmlDeviceGetMemoryInfo_v2)(d, &m2),
                         NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

        nvmlUtilization_t ut;
        assert_int_equal(N(nvmlDeviceGetUtilizationRates)(d, &ut), NVML_SUCCESS);
        assert_int_equal(ut.gpu, 0);
        assert_int_equal(N(nvmlDeviceGetEncoderUtilization)(d, &u, &u2), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetDecoderUtilization)(d, &u, &u2), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetTemperature)(d, NVML_TEMPERATURE_GPU, &u), NVML_SUCCESS);
        assert_int_equal(u, 30);
        assert_int_equal(N(nvmlDeviceGetPowerUsage)(d, &u), NVML_SUCCESS);
        assert_int_equal(u, 69000);
        assert_int_equal(N(nvmlDeviceGetPowerManagementLimit)(d, &u), NVML_SUCCESS);
        assert_int_equal(u, 700000);
        assert_int_equal(N(nvmlDeviceGetEnforcedPowerLimit)(d, &u), NVML_SUCCESS);
        assert_int_equal(u, 700000);
        assert_int_equal(N(nvmlDeviceGetTotalEnergyConsumption)(d, &ull), NVML_SUCCESS);
        assert_int_equal(ull, 120000000);
        assert_int_equal(N(nvmlDeviceGetClockInfo)(d, NVML_CLOCK_SM, &u), NVML_SUCCESS);
        assert_int_equal(u, 345);
        assert_int_equal(N(nvmlDeviceGetClockInfo)(d, NVML_CLOCK_GRAPHICS, &u), NVML_SUCCESS);
        assert_int_equal(u, 345);
        assert_int_equal(N(nvmlDeviceGetMaxClockInfo)(d, NVML_CLOCK_MEM, &u), NVML_SUCCESS);
        assert_int_equal(u, 2619);
        assert_int_equal(N(nvmlDeviceGetClockInfo)(d, (nvmlClockType_t)9, &u),
                         NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlDeviceGetPcieReplayCounter)(d, &u), NVML_SUCCESS);
        assert_int_equal(u, 0);
        assert_int_equal(N(nvmlDeviceGetRemappedRows)(d, &u, &u2, &u3, &u4), NVML_SUCCESS);
        assert_int_equal(u + u2 + u3 + u4, 0);
        nvmlEnableState_t on, pending;
        assert_int_equal(N(nvmlDeviceGetPersistenceMode)(d, &on), NVML_SUCCESS);
        assert_int_equal(on, NVML_FEATURE_ENABLED);
        assert_int_equal(N(nvmlDeviceGetEccMode)(d, &on, &pending), NVML_SUCCESS);
        nvmlComputeMode_t mode;
        assert_int_equal(N(nvmlDeviceGetComputeMode)(d, &mode), NVML_SUCCESS);
        assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT);
        assert_int_equal(N(nvmlDeviceGetCurrentClocksThrottleReasons)(d, &ull), NVML_SUCCESS);

        nvmlFieldValue_t f[4] = {
            {.fieldId = NVML_FI_DEV_MEMORY_TEMP},
            {.fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION},
            {.fieldId = NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT},
            {.fieldId = 7},
        };
        assert_int_equal(N(nvmlDeviceGetFieldValues)(d, 4, f), NVML_SUCCESS);
        assert_int_equal(f[0].nvmlReturn, NVML_SUCCESS);
        assert_int_equal(f[0].value.uiVal, 38);
        assert_int_equal(f[1].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
        assert_int_equal(f[1].value.ullVal, 120000000);
        assert_int_equal(f[2].value.uiVal, 18);
        assert_int_equal(f[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);

        /* Left out of the configuration: not supported. */
        write_cfg(two_gpus);
        setenv("MOCK_NVML_CONFIG", cfg_path, 1);
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetPowerUsage)(dev(0), &u), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlDeviceGetSerial)(dev(0), s, sizeof(s)), NVML_ERROR_NOT_SUPPORTED);
        /* Reserved memory: left out of v1's total, reported and counted as
         * used by v2; processes' memory is used memory. */
        assert_int_equal(N(nvmlDeviceGetMemoryInfo)(dev(1), &m1), NVML_SUCCESS);
        assert_int_equal(m1.total, (81559ULL - 530) << 20);
        assert_int_equal(m1.used, 1000ULL << 20);
        assert_int_equal(m1.used + m1.free, m1.total);
        m2.version = nvmlMemory_v2;
        assert_int_equal(N(nvmlDeviceGetMemoryInfo_v2)(dev(1), &m2), NVML_SUCCESS);
        assert_int_equal(m2.total, 81559ULL << 20);
        assert_int_equal(m2.reserved, 530ULL << 20);
        assert_int_equal(m2.used, 1530ULL << 20);
        assert_int_equal(m2.free, (81559ULL - 1530) << 20);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_mig(void **state)
{
        (void)state;
        use_profile("a100-mig-mixed.yaml");
        unsigned cur, pend, n, id;
        char s[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        nvmlDevice_t g0 = dev(0), g4 = dev(4), m, other;
        assert_int_equal(N(nvmlDeviceGetMigMode)(g0, &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
        assert_int_equal(N(nvmlDeviceGetMigMode)(g4, &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
        assert_int_equal(N(nvmlDeviceGetMaxMigDeviceCount)(g0, &n), NVML_SUCCESS);
        assert_int_equal(n, 7);
        assert_int_equal(N(nvmlDeviceGetMaxMigDeviceCount)(g4, &n), NVML_SUCCESS);
        assert_int_equal(n, 0);
        assert_int_equal(N(nvmlDeviceGetMigDeviceHandleByIndex)(g0, 4, &m), NVML_ERROR_NOT_FOUND);
        assert_int_equal(N(nvmlDeviceGetMigDeviceHandleByIndex)(g0, 7, &m),
                         NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlDeviceGetMigDeviceHandleByIndex)(g4, 0, &m),
                         NVML_ERROR_NOT_SUPPORTED);

        /* GPU 0, MIG device 1: the 3g.40gb in GPU instance 1. */
        m = mig(g0, 1);
        assert_ptr_not_equal(m, g0);
        assert_int_equal(N(nvmlDeviceIsMigDeviceHandle)(m, &n), NVML_SUCCESS);
        assert_int_equal(n, 1);
        assert_int_equal(N(nvmlDeviceIsMigDeviceHandle)(g0, &n), NVML_SUCCESS);
        assert_int_equal(n, 0);
        assert_int_equal(N(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(m, &other), NVML_SUCCESS);
        assert_ptr_equal(other, g0);
        assert_int_equal(N(nvmlDeviceGetGpuInstanceId)(m, &id), NVML_SUCCESS);
        assert_int_equal(id, 1);
        assert_int_equal(N(nvmlDeviceGetComputeInstanceId)(m, &id), NVML_SUCCESS);
        assert_int_equal(id, 0);
        assert_int_equal(N(nvmlDeviceGetGpuInstanceId)(g0, &id), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlDeviceGetName)(m, s, sizeof(s)), NVML_SUCCESS);
        assert_string_equal(s, "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
        assert_int_equal(N(nvmlDeviceGetUUID)(m, uuid, sizeof(uuid)), NVML_SUCCESS);
        assert_memory_equal(uuid, "MIG-", 4);
        assert_int_equal(N(nvmlDeviceGetHandleByUUID)(uuid, &other), NVML_SUCCESS);
        assert_ptr_equal(other, m);
        nvmlDeviceAttributes_t a;
        assert_int_equal(N(nvmlDeviceGetAttributes_v2)(m, &a), NVML_SUCCESS);
        assert_int_equal(a.multiprocessorCount, 42);
        assert_int_equal(a.memorySizeMB, 40192);
        assert_int_equal(a.gpuInstanceSliceCount, 3);
        assert_int_equal(a.computeInstanceSliceCount, 3);
        assert_int_equal(a.sharedCopyEngineCount, 3);
        assert_int_equal(a.sharedDecoderCount, 2);
        assert_int_equal(N(nvmlDeviceGetAttributes)(g0, &a), NVML_ERROR_NOT_SUPPORTED);
        nvmlMemory_t mem;
        assert_int_equal(N(nvmlDeviceGetMemoryInfo)(m, &mem), NVML_SUCCESS);
        assert_int_equal(mem.total, 40192ULL << 20);
        nvmlUtilization_t ut;
        assert_int_equal(N(nvmlDeviceGetUtilizationRates)(g0, &ut), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlDeviceGetTemperature)(m, NVML_TEMPERATURE_GPU, &n),
                         NVML_ERROR_NOT_SUPPORTED);

        /* Profiles: the argument is the profile index, the answer its ID. */
        nvmlGpuInstanceProfileInfo_t pi;
        assert_int_equal(
            N(nvmlDeviceGetGpuInstanceProfileInfo)(g0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &pi),
            NVML_SUCCESS);
        assert_int_equal(pi.id, 19);
        assert_int_equal(pi.sliceCount, 1);
        assert_int_equal(pi.instanceCount, 7);
        assert_int_equal(pi.multiprocessorCount, 14);
        assert_int_equal(pi.memorySizeMB, 9728);
        assert_int_equal(
            N(nvmlDeviceGetGpuInstanceProfileInfo)(g0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &pi),
            NVML_SUCCESS);
        assert_int_equal(pi.id, 9);
        assert_int_equal(
            N(nvmlDeviceGetGpuInstanceProfileInfo)(g0, NVML_GPU_INSTANCE_PROFILE_8_SLICE, &pi),
            NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(
            N(nvmlDeviceGetGpuInstanceProfileInfo)(g0, NVML_GPU_INSTANCE_PROFILE_COUNT, &pi),
            NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N(nvmlDeviceGetGpuInstanceProfileInfo)(g4, 0, &pi),
                         NVML_ERROR_NOT_SUPPORTED);
        nvmlGpuInstanceProfileInfo_v2_t p2 = {.version = nvmlGpuInstanceProfileInfo_v2};
        assert_int_equal(N(nvmlDeviceGetGpuInstanceProfileInfoV)(
                             g0, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, &p2),
                         NVML_SUCCESS);
        assert_int_equal(p2.id, 20);
        assert_string_equal(p2.name, "MIG 1g.10gb+me");
        nvmlGpuInstanceProfileInfo_v3_t p3 = {.version = nvmlGpuInstanceProfileInfo_v3};
        assert_int_equal(
            N(nvmlDeviceGetGpuInstanceProfileInfoV)(g0, NVML_GPU_INSTANCE_PROFILE_7_SLICE,
                                                    (nvmlGpuInstanceProfileInfo_v2_t *)(void *)&p3),
            NVML_SUCCESS);
        assert_int_equal(p3.id, 0);
        assert_int_equal(p3.sliceCount, 7);
        assert_string_equal(p3.name, "MIG 7g.80gb");
        p2.version = 7;
        assert_int_equal(N(nvmlDeviceGetGpuInstanceProfileInfoV)(g0, 0, &p2),
                         NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

        /* GPU instances and compute instances. */
        nvmlGpuInstance_t gis[7], gi;
        n = 0;
        assert_int_equal(N(nvmlDeviceGetGpuInstances)(dev(1), 19, gis, &n), NVML_SUCCESS);
        assert_int_equal(n, 7);
        assert_int_equal(N(nvmlDeviceGetGpuInstanceById)(g0, 1, &gi), NVML_SUCCESS);
        assert_int_equal(N(nvmlDeviceGetGpuInstanceById)(g0, 3, &gi), NVML_ERROR_NOT_FOUND);
        assert_int_equal(N(nvmlDeviceGetGpuInstanceById)(g0, 1, &gi), NVML_SUCCESS);
        nvmlGpuInstanceInfo_t gii;
        assert_int_equal(N(nvmlGpuInstanceGetInfo)(gi, &gii), NVML_SUCCESS);
        assert_ptr_equal(gii.device, g0);
        assert_int_equal(gii.id, 1);
        assert_int_equal(gii.profileId, 9);
        assert_int_equal(gii.placement.start, 4);
        assert_int_equal(gii.placement.size, 4);
        nvmlComputeInstance_t ci, cis[3];
        nvmlComputeInstanceInfo_t cii;
        assert_int_equal(N(nvmlGpuInstanceGetComputeInstanceById)(gi, 0, &ci), NVML_SUCCESS);
        assert_int_equal(N(nvmlComputeInstanceGetInfo_v2)(ci, &cii), NVML_SUCCESS);
        assert_ptr_equal(cii.device, g0);
        assert_ptr_equal(cii.gpuInstance, gi);
        assert_int_equal(cii.profileId, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE);
        assert_int_equal(cii.placement.size, 3);
        assert_int_equal(N(nvmlGpuInstanceGetComputeInstanceById)(gi, 1, &ci),
                         NVML_ERROR_NOT_FOUND);

        /* GPU 3: GPU instance 2 split into a 1-slice and a 2-slice compute instance. */
        nvmlDevice_t g3 = dev(3), sub = mig(g3, 1);
        assert_int_equal(N(nvmlDeviceGetName)(sub, s, sizeof(s)), NVML_SUCCESS);
        assert_string_equal(s, "NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb");
        assert_int_equal(N(nvmlDeviceGetAttributes)(sub, &a), NVML_SUCCESS);
        assert_int_equal(a.gpuInstanceSliceCount, 3);
        assert_int_equal(a.computeInstanceSliceCount, 1);
        assert_int_equal(a.multiprocessorCount, 14);
        assert_int_equal(a.memorySizeMB, 40192);
        assert_int_equal(N(nvmlDeviceGetGpuInstanceById)(g3, 2, &gi), NVML_SUCCESS);
        nvmlComputeInstanceProfileInfo_t cp;
        assert_int_equal(N(nvmlGpuInstanceGetComputeInstanceProfileInfo)(
                             gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
                             NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cp),
                         NVML_SUCCESS);
        assert_int_equal(cp.sliceCount, 2);
        assert_int_equal(cp.instanceCount, 1);
        assert_int_equal(cp.multiprocessorCount, 28);
        assert_int_equal(N(nvmlGpuInstanceGetComputeInstanceProfileInfo)(
                             gi, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
                             NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cp),
                         NVML_ERROR_NOT_SUPPORTED);
        nvmlComputeInstanceProfileInfo_v2_t cp2 = {.version = nvmlComputeInstanceProfileInfo_v2};
        assert_int_equal(N(nvmlGpuInstanceGetComputeInstanceProfileInfoV)(
                             gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                             NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cp2),
                         NVML_SUCCESS);
        assert_string_equal(cp2.name, "MIG 1c.3g.40gb");
        n = 0;
        assert_int_equal(N(nvmlGpuInstanceGetComputeInstances)(
                             gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, cis, &n),
                         NVML_SUCCESS);
        assert_int_equal(n, 1);
        /* The unversioned call fills only the members before placement. */
        memset(&cii, 0xa5, sizeof(cii));
        assert_int_equal(N(nvmlComputeInstanceGetInfo)(cis[0], &cii), NVML_SUCCESS);
        assert_int_equal(cii.id, 1);
        assert_int_equal(cii.placement.start, 0xa5a5a5a5);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

static unsigned links_to(nvmlDevice_t d, const nvmlPciInfo_t *peer, unsigned *active)
{
        unsigned n = 0;
        *active = 0;
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
                nvmlEnableState_t on;
                nvmlPciInfo_t r;
                nvmlReturn_t ret = N(nvmlDeviceGetNvLinkState)(d, l, &on);
                if (ret == NVML_ERROR_NOT_SUPPORTED)
                        continue;
                assert_int_equal(ret, NVML_SUCCESS);
                if (on != NVML_FEATURE_ENABLED)
                        continue;
                ++*active;
                assert_int_equal(N(nvmlDeviceGetNvLinkRemotePciInfo_v2)(d, l, &r), NVML_SUCCESS);
                n += !strcmp(r.busId, peer->busId);
        }
        return n;
}

static void test_topology(void **state)
{
        (void)state;
        static const unsigned dgx1[8][8] = {
            {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
            {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
            {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
        };
        use_profile("v100-dgx1.yaml");
        nvmlGpuTopologyLevel_t lvl;
        nvmlPciInfo_t pci[8];
        unsigned active;
        for (unsigned i = 0; i < 8; i++)
                assert_int_equal(N(nvmlDeviceGetPciInfo_v3)(dev(i), &pci[i]), NVML_SUCCESS);
        for (unsigned i = 0; i < 8; i++)
                for (unsigned j = 0; j < 8; j++) {
                        assert_int_equal(links_to(dev(i), &pci[j], &active), dgx1[i][j]);
                        assert_int_equal(active, 6);
                }
        struct {
                unsigned a, b;
                nvmlGpuTopologyLevel_t want;
        } v100[] = {
            {0, 0, NVML_TOPOLOGY_INTERNAL},   {0, 1, NVML_TOPOLOGY_SINGLE},
            {0, 2, NVML_TOPOLOGY_HOSTBRIDGE}, {0, 4, NVML_TOPOLOGY_SYSTEM},
            {6, 7, NVML_TOPOLOGY_SINGLE},     {5, 7, NVML_TOPOLOGY_HOSTBRIDGE},
        };
        for (size_t k = 0; k < sizeof(v100) / sizeof(v100[0]); k++) {
                assert_int_equal(
                    N(nvmlDeviceGetTopologyCommonAncestor)(dev(v100[k].a), dev(v100[k].b), &lvl),
                    NVML_SUCCESS);
                assert_int_equal(lvl, v100[k].want);
        }
        nvmlEnableState_t on;
        assert_int_equal(N(nvmlDeviceGetNvLinkState)(dev(0), 6, &on), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlDeviceGetNvLinkState)(dev(0), NVML_NVLINK_MAX_LINKS, &on),
                         NVML_ERROR_INVALID_ARGUMENT);
        nvmlIntNvLinkDeviceType_t type;
        assert_int_equal(N(nvmlDeviceGetNvLinkRemoteDeviceType)(dev(0), 0, &type), NVML_SUCCESS);
        assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_GPU);
        unsigned cap;
        assert_int_equal(
            N(nvmlDeviceGetNvLinkCapability)(dev(0), 0, NVML_NVLINK_CAP_P2P_SUPPORTED, &cap),
            NVML_SUCCESS);
        assert_int_equal(cap, 1);
        nvmlGpuP2PStatus_t p2p;
        assert_int_equal(
            N(nvmlDeviceGetP2PStatus)(dev(0), dev(4), NVML_P2P_CAPS_INDEX_NVLINK, &p2p),
            NVML_SUCCESS);
        assert_int_equal(p2p, NVML_P2P_STATUS_OK);
        assert_int_equal(
            N(nvmlDeviceGetP2PStatus)(dev(0), dev(5), NVML_P2P_CAPS_INDEX_NVLINK, &p2p),
            NVML_SUCCESS);
        assert_int_equal(p2p, NVML_P2P_STATUS_NOT_SUPPORTED);
        unsigned long set[2], cpus[4];
        assert_int_equal(N(nvmlDeviceGetMemoryAffinity)(dev(5), 2, set, NVML_AFFINITY_SCOPE_NODE),
                         NVML_SUCCESS);
        assert_int_equal(set[0], 2);
        assert_int_equal(N(nvmlDeviceGetCpuAffinity)(dev(5), 4, cpus), NVML_SUCCESS);
        assert_int_equal(cpus[0], 0xf00000fffff00000UL); /* CPUs 20-39, 60-63 */
        assert_int_equal(cpus[1], 0xffffUL);
        unsigned node;
        assert_int_equal(N(nvmlDeviceGetNumaNodeId)(dev(5), &node), NVML_ERROR_NOT_SUPPORTED);
        unsigned cur, pend;
        assert_int_equal(N(nvmlDeviceGetMigMode)(dev(0), &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);

        /* H100: every GPU's 18 links end on an NVSwitch. */
        use_profile("h100-8x-nvswitch.yaml");
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
                nvmlPciInfo_t r;
                assert_int_equal(N(nvmlDeviceGetNvLinkState)(dev(3), l, &on), NVML_SUCCESS);
                assert_int_equal(on, NVML_FEATURE_ENABLED);
                assert_int_equal(N(nvmlDeviceGetNvLinkRemoteDeviceType)(dev(3), l, &type),
                                 NVML_SUCCESS);
                assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_SWITCH);
                assert_int_equal(N(nvmlDeviceGetNvLinkRemotePciInfo_v2)(dev(3), l, &r),
                                 NVML_SUCCESS);
                assert_int_equal(r.pciDeviceId, 0x22a310de);
                assert_int_equal(r.bus, 5 + l % 4);
        }
        assert_int_equal(
            N(nvmlDeviceGetP2PStatus)(dev(0), dev(7), NVML_P2P_CAPS_INDEX_NVLINK, &p2p),
            NVML_SUCCESS);
        assert_int_equal(p2p, NVML_P2P_STATUS_OK);
        assert_int_equal(N(nvmlDeviceGetTopologyCommonAncestor)(dev(0), dev(3), &lvl),
                         NVML_SUCCESS);
        assert_int_equal(lvl, NVML_TOPOLOGY_NODE);
        assert_int_equal(N(nvmlDeviceGetTopologyCommonAncestor)(dev(0), dev(4), &lvl),
                         NVML_SUCCESS);
        assert_int_equal(lvl, NVML_TOPOLOGY_SYSTEM);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);

        use_profile("a100-mig-mixed.yaml");
        assert_int_equal(N(nvmlDeviceGetTopologyCommonAncestor)(dev(0), dev(1), &lvl),
                         NVML_SUCCESS);
        assert_int_equal(lvl, NVML_TOPOLOGY_MULTIPLE);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_gpm(void **state)
{
        (void)state;
        write_cfg("devices:\n"
                  "  - {uuid: GPU-aaaaaaaa-0000-0000-0000-000000000001, name: NVIDIA H100 80GB HBM3,\n"
                  "     memoryMiB: 81559, pciBusId: \"00000000:18:00.0\", computeCapability: \"9.0\",\n"
                  "     gpm: {smUtil: 61, tensorUtil: 40, pcieTxMiBps: 3000},\n"
                  "     pcieThroughputKBps: {tx: 100, rx: 200}}\n"
                  "  - {uuid: GPU-aaaaaaaa-0000-0000-0000-000000000002, name: Tesla V100-SXM2-32GB,\n"
                  "     memoryMiB: 32510, pciBusId: \"00000000:2a:00.0\", computeCapability: \"7.0\"}\n");
        assert_int_equal(N(nvmlInit_v2)(), NVML_SUCCESS);
        nvmlGpmSupport_t sup = { .version = 2 };
        assert_int_equal(N(nvmlGpmQueryDeviceSupport)(dev(0), &sup), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        sup.version = NVML_GPM_SUPPORT_VERSION;
        assert_int_equal(N(nvmlGpmQueryDeviceSupport)(dev(0), &sup), NVML_SUCCESS);
        assert_int_equal(sup.isSupportedDevice, 1);
        assert_int_equal(N(nvmlGpmQueryDeviceSupport)(dev(1), &sup), NVML_SUCCESS);
        assert_int_equal(sup.isSupportedDevice, 0); /* Volta */

        nvmlGpmSample_t a, b, c;
        assert_int_equal(N(nvmlGpmSampleAlloc)(&a), NVML_SUCCESS);
        assert_int_equal(N(nvmlGpmSampleAlloc)(&b), NVML_SUCCESS);
        assert_int_equal(N(nvmlGpmSampleAlloc)(&c), NVML_SUCCESS);
        assert_int_equal(N(nvmlGpmSampleGet)(dev(1), c), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlGpmMigSampleGet)(dev(0), 1, c), NVML_ERROR_NOT_FOUND);
        assert_int_equal(N(nvmlGpmSampleGet)(dev(0), a), NVML_SUCCESS);
        assert_int_equal(N(nvmlGpmSampleGet)(dev(0), b), NVML_SUCCESS);
        nvmlGpmMetricsGet_t *m = calloc(1, sizeof(*m));
        m->version = NVML_GPM_METRICS_GET_VERSION;
        m->numMetrics = 4;
        m->sample1 = a;
        m->sample2 = c; /* never taken */
        m->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
        m->metrics[1].metricId = NVML_GPM_METRIC_ANY_TENSOR_UTIL;
        m->metrics[2].metricId = NVML_GPM_METRIC_PCIE_TX_PER_SEC;
        m->metrics[3].metricId = NVML_GPM_METRIC_INTEGER_UTIL; /* not modelled */
        assert_int_equal(N(nvmlGpmMetricsGet)(m), NVML_ERROR_INVALID_ARGUMENT);
        m->sample2 = b;
        assert_int_equal(N(nvmlGpmMetricsGet)(m), NVML_SUCCESS);
        assert_int_equal(m->metrics[0].nvmlReturn, NVML_SUCCESS);
        assert_true(m->metrics[0].value == 61.0);
        assert_true(m->metrics[1].value == 40.0);
        assert_true(m->metrics[2].value == 3000.0);
        assert_int_equal(m->metrics[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
        m->version = 0;
        assert_int_equal(N(nvmlGpmMetricsGet)(m), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        free(m);
        assert_int_equal(N(nvmlGpmSampleFree)(a), NVML_SUCCESS);
        assert_int_equal(N(nvmlGpmSampleFree)(b), NVML_SUCCESS);
        assert_int_equal(N(nvmlGpmSampleFree)(c), NVML_SUCCESS);

        unsigned kbps = 0;
        assert_int_equal(N(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_RX_BYTES, &kbps), NVML_SUCCESS);
        assert_int_equal(kbps, 200);
        assert_int_equal(N(nvmlDeviceGetPcieThroughput)(dev(1), NVML_PCIE_UTIL_TX_BYTES, &kbps),
                         NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_processes(void **state)
{
        (void)state;
        use_profile("a100-mig-mixed.yaml");
        nvmlDevice_t g4 = dev(4), g1 = dev(1);
        unsigned n = 0;
        nvmlProcessInfo_t v3[4];
        assert_int_equal(N(nvmlDeviceGetComputeRunningProcesses_v3)(g4, &n, NULL),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(n, 1);
        n = 4;
        assert_int_equal(N(nvmlDeviceGetComputeRunningProcesses_v3)(g4, &n, v3), NVML_SUCCESS);
        assert_int_equal(n, 1);
        assert_int_equal(v3[0].pid, 4242);
        assert_int_equal(v3[0].usedGpuMemory, 20480ULL << 20);
        assert_int_equal(v3[0].gpuInstanceId, DEVLET_NVML_NO_INSTANCE_ID);
        assert_int_equal(v3[0].computeInstanceId, DEVLET_NVML_NO_INSTANCE_ID);
        /* v1 entries are 16 bytes apart: the second entry slot stays untouched. */
        nvmlProcessInfo_v1_t v1[2];
        memset(v1, 0xa5, sizeof(v1));
        n = 2;
        assert_int_equal(N(nvmlDeviceGetComputeRunningProcesses)(g4, &n, v1), NVML_SUCCESS);
        assert_int_equal(v1[0].pid, 4242);
        assert_int_equal(v1[1].pid, 0xa5a5a5a5);
        n = 0;
        assert_int_equal(N(nvmlDeviceGetGraphicsRunningProcesses_v2)(g4, &n, NULL), NVML_SUCCESS);
        assert_int_equal(n, 0);

        /* MIG: the GPU sees both processes with their instances, each MIG
         * device only its own. */
        nvmlProcessInfo_v2_t v2[2];
        n = 2;
        assert_int_equal(N(nvmlDeviceGetComputeRunningProcesses_v2)(g1, &n, v2), NVML_SUCCESS);
        assert_int_equal(n, 2);
        assert_int_equal(v2[0].gpuInstanceId, 7);
        assert_int_equal(v2[1].gpuInstanceId, 9);
        n = 1;
        assert_int_equal(N(nvmlDeviceGetComputeRunningProcesses_v2)(g1, &n, v2),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(n, 2);
        n = 2;
        assert_int_equal(N(nvmlDeviceGetComputeRunningProcesses_v3)(mig(g1, 2), &n, v3),
                         NVML_SUCCESS);
        assert_int_equal(n, 1);
        assert_int_equal(v3[0].pid, 3102);
        nvmlMemory_t mem;
        assert_int_equal(N(nvmlDeviceGetMemoryInfo)(mig(g1, 2), &mem), NVML_SUCCESS);
        assert_int_equal(mem.used, 2048ULL << 20);

        nvmlProcessUtilizationSample_t s[2];
        n = 0;
        assert_int_equal(N(nvmlDeviceGetProcessUtilization)(g4, NULL, &n, 0),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(n, 1);
        assert_int_equal(N(nvmlDeviceGetProcessUtilization)(g4, s, &n, 0), NVML_SUCCESS);
        assert_int_equal(s[0].pid, 4242);
        assert_int_equal(s[0].smUtil, 63);
        assert_int_equal(s[0].memUtil, 21);
        assert_int_equal(
            N(nvmlDeviceGetProcessUtilization)(g4, s, &n, s[0].timeStamp + 3600000000ULL),
            NVML_ERROR_NOT_FOUND);
        assert_int_equal(N(nvmlDeviceGetProcessUtilization)(g1, s, &n, 0),
                         NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N(nvmlShutdown)(), NVML_SUCCESS);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_all_symbols),
            cmocka_unit_test(test_gpm),
            cmocka_unit_test(test_error_strings),
            cmocka_unit_test(test_init_refcount),
            cmocka_unit_test(test_init_errors),
            cmocka_unit_test(test_enumeration),
            cmocka_unit_test(test_attributes),
            cmocka_unit_test(test_mig),
            cmocka_unit_test(test_topology),
            cmocka_unit_test(test_fabric),
            cmocka_unit_test(test_grace_c2c),
            cmocka_unit_test(test_processes),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
