/* devlet's declaration of the part of the NVML ABI it uses.
 *
 * devlet never links libnvidia-ml: it dlopen()s "libnvidia-ml.so.1" and
 * resolves each symbol into a pointer of the type declared here
 * (typeof(nvmlInit_v2) *), so a missing symbol is an error value, not a crash.
 * The mock library in tests/mock-nvml implements these same declarations.
 *
 * Names, numeric values and struct layouts follow NVIDIA's published nvml.h
 * (NVML API version 12); the static assertions pin the layouts whose sizes
 * were checked against that header.  Versioned symbols (nvmlInit_v2,
 * nvmlDeviceGetPciInfo_v3, ...) are declared under their real names and no
 * unversioned-to-versioned macros are defined: the older symbols stay
 * callable, and each names the layout it fills where it differs.
 *
 * This header declares only; it has no code and includes nothing of devlet. */
#ifndef DEVLET_DEVICES_NVIDIA_NVML_H
#define DEVLET_DEVICES_NVIDIA_NVML_H

#include <stddef.h> /* offsetof, for the layout checks */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Return codes                                                        */

typedef enum nvmlReturn_enum {
        NVML_SUCCESS = 0,
        NVML_ERROR_UNINITIALIZED = 1,
        NVML_ERROR_INVALID_ARGUMENT = 2,
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NO_PERMISSION = 4,
        NVML_ERROR_ALREADY_INITIALIZED = 5,
        NVML_ERROR_NOT_FOUND = 6,
        NVML_ERROR_INSUFFICIENT_SIZE = 7,
        NVML_ERROR_INSUFFICIENT_POWER = 8,
        NVML_ERROR_DRIVER_NOT_LOADED = 9,
        NVML_ERROR_TIMEOUT = 10,
        NVML_ERROR_IRQ_ISSUE = 11,
        NVML_ERROR_LIBRARY_NOT_FOUND = 12,
        NVML_ERROR_FUNCTION_NOT_FOUND = 13,
        NVML_ERROR_CORRUPTED_INFOROM = 14,
        NVML_ERROR_GPU_IS_LOST = 15,
        NVML_ERROR_RESET_REQUIRED = 16,
        NVML_ERROR_OPERATING_SYSTEM = 17,
        NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
        NVML_ERROR_IN_USE = 19,
        NVML_ERROR_MEMORY = 20,
        NVML_ERROR_NO_DATA = 21,
        NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
        NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
        NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
        NVML_ERROR_DEPRECATED = 26,
        NVML_ERROR_NOT_READY = 27,
        NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

/* ------------------------------------------------------------------ */
/* Handles (opaque)                                                    */

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

/* ------------------------------------------------------------------ */
/* Constants                                                           */

/* A versioned struct's version word: its size in the low 24 bits, the
 * version number above. */
#define NVML_STRUCT_VERSION(data, ver)                                         \
        (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

#define NVML_VALUE_NOT_AVAILABLE (-1)

#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

/* String buffer sizes guaranteed large enough, NUL included. */
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PART_NUMBER_BUFFER_SIZE 80
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE 32

#define NVML_NVLINK_MAX_LINKS 18

#define NVML_CUDA_DRIVER_VERSION_MAJOR(v) ((v) / 1000)
#define NVML_CUDA_DRIVER_VERSION_MINOR(v) (((v) % 1000) / 10)

/* nvmlDeviceGetArchitecture */
typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffffU

/* nvmlDeviceGetMemoryAffinity / nvmlDeviceGetCpuAffinityWithinScope */
typedef unsigned int nvmlAffinityScope_t;
#define NVML_AFFINITY_SCOPE_NODE 0
#define NVML_AFFINITY_SCOPE_SOCKET 1

/* Event types; a mask of them is passed to nvmlDeviceRegisterEvents. */
#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypePState 0x0000000000000004ULL
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
#define nvmlEventTypeClock 0x0000000000000010ULL
#define nvmlEventTypePowerSourceChange 0x0000000000000080ULL
#define nvmlEventMigConfigChange 0x0000000000000100ULL
#define nvmlEventTypeNone 0x0000000000000000ULL
#define nvmlEventTypeAll                                                       \
        (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |     \
         nvmlEventTypePState | nvmlEventTypeClock |                            \
         nvmlEventTypeXidCriticalError | nvmlEventTypePowerSourceChange |      \
         nvmlEventMigConfigChange)

/* Clock event (throttle) reasons */
#define nvmlClocksEventReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x0000000000000100ULL
#define nvmlClocksEventReasonNone 0x0000000000000000ULL

/* Field identifiers for nvmlDeviceGetFieldValues (the subset devlet reads). */
#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83
#define NVML_FI_DEV_NVLINK_LINK_COUNT 91
#define NVML_FI_DEV_PCIE_REPLAY_COUNTER 94
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
#define NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX 140
#define NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX 141
#define NVML_FI_DEV_REMAPPED_COR 142
#define NVML_FI_DEV_REMAPPED_UNC 143
#define NVML_FI_DEV_REMAPPED_PENDING 144
#define NVML_FI_DEV_REMAPPED_FAILURE 145
#define NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT 147
#define NVML_FI_DEV_POWER_INSTANT 186
#define NVML_FI_DEV_ENERGY 191
#define NVML_FI_MAX 197

/* Multi-Instance GPU */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

/* GPU instance profiles: the `profile` argument of
 * nvmlDeviceGetGpuInstanceProfileInfo (not the profile ID it returns). */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0xA

#define NVML_GPU_INSTANCE_PROFILE_CAPS_P2P 0x1
#define NVML_GPU_INSTANCE_PROFILE_CAPS_GFX 0x2

#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 0x8

#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT 0x1

/* Our name for the value NVML reports as the instance IDs of a process or
 * event outside any MIG instance (NVML documents the value, not a name). */
#define DEVLET_NVML_NO_INSTANCE_ID 0xFFFFFFFFU

/* ------------------------------------------------------------------ */
/* Enumerations                                                        */

typedef enum nvmlEnableState_enum {
        NVML_FEATURE_DISABLED = 0,
        NVML_FEATURE_ENABLED = 1,
} nvmlEnableState_t;

typedef enum nvmlBrandType_enum {
        NVML_BRAND_UNKNOWN = 0,
        NVML_BRAND_QUADRO = 1,
        NVML_BRAND_TESLA = 2,
        NVML_BRAND_NVS = 3,
        NVML_BRAND_GRID = 4,
        NVML_BRAND_GEFORCE = 5,
        NVML_BRAND_TITAN = 6,
        NVML_BRAND_NVIDIA_VAPPS = 7,
        NVML_BRAND_NVIDIA_VPC = 8,
        NVML_BRAND_NVIDIA_VCS = 9,
        NVML_BRAND_NVIDIA_VWS = 10,
        NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
        NVML_BRAND_QUADRO_RTX = 12,
        NVML_BRAND_NVIDIA_RTX = 13,
        NVML_BRAND_NVIDIA = 14,
        NVML_BRAND_GEFORCE_RTX = 15,
        NVML_BRAND_TITAN_RTX = 16,
        NVML_BRAND_COUNT,
} nvmlBrandType_t;

typedef enum nvmlTemperatureSensors_enum {
        NVML_TEMPERATURE_GPU = 0,
        NVML_TEMPERATURE_COUNT,
} nvmlTemperatureSensors_t;

typedef enum nvmlComputeMode_enum {
        NVML_COMPUTEMODE_DEFAULT = 0,
        NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
        NVML_COMPUTEMODE_PROHIBITED = 2,
        NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
        NVML_COMPUTEMODE_COUNT,
} nvmlComputeMode_t;

typedef enum nvmlClockType_enum {
        NVML_CLOCK_GRAPHICS = 0,
        NVML_CLOCK_SM = 1,
        NVML_CLOCK_MEM = 2,
        NVML_CLOCK_VIDEO = 3,
        NVML_CLOCK_COUNT,
} nvmlClockType_t;

typedef enum nvmlPStates_enum {
        NVML_PSTATE_0 = 0,
        NVML_PSTATE_15 = 15,
        NVML_PSTATE_UNKNOWN = 32,
} nvmlPstates_t;

/* Spaced so that levels can be added between them. */
typedef enum nvmlGpuLevel_enum {
        NVML_TOPOLOGY_INTERNAL = 0,
        NVML_TOPOLOGY_SINGLE = 10,
        NVML_TOPOLOGY_MULTIPLE = 20,
        NVML_TOPOLOGY_HOSTBRIDGE = 30,
        NVML_TOPOLOGY_NODE = 40,
        NVML_TOPOLOGY_SYSTEM = 50,
} nvmlGpuTopologyLevel_t;

typedef enum nvmlGpuP2PStatus_enum {
        NVML_P2P_STATUS_OK = 0,
        NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1,
        NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
        NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
        NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
        NVML_P2P_STATUS_NOT_SUPPORTED = 5,
        NVML_P2P_STATUS_UNKNOWN = 6,
} nvmlGpuP2PStatus_t;

typedef enum nvmlGpuP2PCapsIndex_enum {
        NVML_P2P_CAPS_INDEX_READ = 0,
        NVML_P2P_CAPS_INDEX_WRITE = 1,
        NVML_P2P_CAPS_INDEX_NVLINK = 2,
        NVML_P2P_CAPS_INDEX_ATOMICS = 3,
        NVML_P2P_CAPS_INDEX_PROP = 4,
        NVML_P2P_CAPS_INDEX_UNKNOWN = 5,
} nvmlGpuP2PCapsIndex_t;

typedef enum nvmlNvLinkCapability_enum {
        NVML_NVLINK_CAP_P2P_SUPPORTED = 0,
        NVML_NVLINK_CAP_SYSMEM_ACCESS = 1,
        NVML_NVLINK_CAP_P2P_ATOMICS = 2,
        NVML_NVLINK_CAP_SYSMEM_ATOMICS = 3,
        NVML_NVLINK_CAP_SLI_BRIDGE = 4,
        NVML_NVLINK_CAP_VALID = 5,
        NVML_NVLINK_CAP_COUNT,
} nvmlNvLinkCapability_t;

typedef enum nvmlIntNvLinkDeviceType_enum {
        NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
        NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
        NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
        NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
} nvmlIntNvLinkDeviceType_t;

typedef enum nvmlValueType_enum {
        NVML_VALUE_TYPE_DOUBLE = 0,
        NVML_VALUE_TYPE_UNSIGNED_INT = 1,
        NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
        NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
        NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
        NVML_VALUE_TYPE_SIGNED_INT = 5,
        NVML_VALUE_TYPE_COUNT,
} nvmlValueType_t;

/* ------------------------------------------------------------------ */
/* Structures                                                          */

/* Filled by nvmlDeviceGetPciInfo_v2/_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2.
 * The unversioned (v1) calls fill an older 52-byte layout: busId[16] in the
 * place of busIdLegacy, the same five integers, then 16 reserved bytes. */
typedef struct nvmlPciInfo_st {
        char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "%04X:%02X:%02X.0" */
        unsigned int domain;
        unsigned int bus;
        unsigned int device;
        unsigned int pciDeviceId;    /* device ID << 16 | vendor ID */
        unsigned int pciSubSystemId;
        char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

/* nvmlDeviceGetMemoryInfo: total excludes the system-reserved memory. */
typedef struct nvmlMemory_st {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_t;

/* nvmlDeviceGetMemoryInfo_v2: reserved is reported apart and counted in used. */
typedef struct nvmlMemory_v2_st {
        unsigned int version; /* nvmlMemory_v2 */
        unsigned long long total;
        unsigned long long reserved;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlUtilization_st {
        unsigned int gpu;    /* percent */
        unsigned int memory; /* percent */
} nvmlUtilization_t;

/* nvmlDeviceGet*RunningProcesses (no suffix) */
typedef struct nvmlProcessInfo_v1_st {
        unsigned int pid;
        unsigned long long usedGpuMemory; /* bytes */
} nvmlProcessInfo_v1_t;

/* nvmlDeviceGet*RunningProcesses_v2 and _v3 */
typedef struct nvmlProcessInfo_v2_st {
        unsigned int pid;
        unsigned long long usedGpuMemory; /* bytes */
        unsigned int gpuInstanceId;       /* DEVLET_NVML_NO_INSTANCE_ID outside MIG */
        unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t, nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
        unsigned int pid;
        unsigned long long timeStamp; /* CPU time, microseconds */
        unsigned int smUtil;
        unsigned int memUtil;
        unsigned int encUtil;
        unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct nvmlDeviceAttributes_st {
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
        unsigned int gpuInstanceSliceCount;
        unsigned int computeInstanceSliceCount;
        unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* nvmlEventSetWait_v2.  The unversioned nvmlEventSetWait fills only the
 * first three members (24 bytes). */
typedef struct nvmlEventData_st {
        nvmlDevice_t device;
        unsigned long long eventType;
        unsigned long long eventData; /* the Xid for nvmlEventTypeXidCriticalError */
        unsigned int gpuInstanceId;   /* DEVLET_NVML_NO_INSTANCE_ID when not attributable */
        unsigned int computeInstanceId;
} nvmlEventData_t;

typedef union nvmlValue_st {
        double dVal;
        int siVal;
        unsigned int uiVal;
        unsigned long ulVal;
        unsigned long long ullVal;
        signed long long sllVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
        unsigned int fieldId; /* NVML_FI_*, set by the caller */
        unsigned int scopeId; /* e.g. the NVLink link; set by the caller */
        long long timestamp;  /* microseconds since 1970 */
        long long latencyUsec;
        nvmlValueType_t valueType;
        nvmlReturn_t nvmlReturn; /* value is valid only when NVML_SUCCESS */
        nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct nvmlGpuInstancePlacement_st {
        unsigned int start; /* first memory slice */
        unsigned int size;  /* memory slices */
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
        unsigned int id; /* profile ID, unique within the device */
        unsigned int isP2pSupported;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int copyEngineCount;
        unsigned int decoderCount;
        unsigned int encoderCount;
        unsigned int jpegCount;
        unsigned int ofaCount;
        unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
        unsigned int version; /* nvmlGpuInstanceProfileInfo_v2 */
        unsigned int id;
        unsigned int isP2pSupported;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int copyEngineCount;
        unsigned int decoderCount;
        unsigned int encoderCount;
        unsigned int jpegCount;
        unsigned int ofaCount;
        unsigned long long memorySizeMB;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)

/* v3 drops isP2pSupported for a capabilities mask at the end. */
typedef struct nvmlGpuInstanceProfileInfo_v3_st {
        unsigned int version; /* nvmlGpuInstanceProfileInfo_v3 */
        unsigned int id;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int copyEngineCount;
        unsigned int decoderCount;
        unsigned int encoderCount;
        unsigned int jpegCount;
        unsigned int ofaCount;
        unsigned long long memorySizeMB;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        unsigned int capabilities; /* NVML_GPU_INSTANCE_PROFILE_CAPS_* */
} nvmlGpuInstanceProfileInfo_v3_t;
#define nvmlGpuInstanceProfileInfo_v3 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 3)

typedef struct nvmlGpuInstanceInfo_st {
        nvmlDevice_t device; /* parent */
        unsigned int id;
        unsigned int profileId;
        nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
        unsigned int start; /* first compute slice within the GPU instance */
        unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
        unsigned int id;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
        unsigned int version; /* nvmlComputeInstanceProfileInfo_v2 */
        unsigned int id;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlComputeInstanceProfileInfo_v2_t;
#define nvmlComputeInstanceProfileInfo_v2 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 2)

typedef struct nvmlComputeInstanceProfileInfo_v3_st {
        unsigned int version; /* nvmlComputeInstanceProfileInfo_v3 */
        unsigned int id;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        unsigned int capabilities;
} nvmlComputeInstanceProfileInfo_v3_t;
#define nvmlComputeInstanceProfileInfo_v3 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 3)

/* nvmlComputeInstanceGetInfo_v2.  The unversioned call fills only the first
 * four members (24 bytes). */
typedef struct nvmlComputeInstanceInfo_st {
        nvmlDevice_t device;
        nvmlGpuInstance_t gpuInstance;
        unsigned int id;
        unsigned int profileId;
        nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* nvmlDeviceGetGpuFabricInfo (R535 on): a GPU's place on a multi-node
 * NVLink fabric.  clusterUuid and cliqueId mean something only when state is
 * COMPLETED and status NVML_SUCCESS; an all-zero clusterUuid is no fabric. */
#define NVML_GPU_FABRIC_UUID_LEN 16
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_STATE_NOT_STARTED 1
#define NVML_GPU_FABRIC_STATE_IN_PROGRESS 2
#define NVML_GPU_FABRIC_STATE_COMPLETED 3
typedef unsigned char nvmlGpuFabricState_t;

typedef struct nvmlGpuFabricInfo_st {
        unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
        nvmlReturn_t status;
        unsigned int cliqueId;
        nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

/* nvmlDeviceGetAddressingMode (R570 on): how the GPU reaches system memory
 * allocated by malloc/mmap: ATS on Grace (GH200, GB200: one set of page
 * tables over NVLink-C2C), HMM (the driver mirrors the CPU's page tables) or
 * none.  A versioned struct: the caller sets version. */
#define NVML_DEVICE_ADDRESSING_MODE_NONE 0
#define NVML_DEVICE_ADDRESSING_MODE_HMM 1
#define NVML_DEVICE_ADDRESSING_MODE_ATS 2
typedef struct nvmlDeviceAddressingMode_v1_st {
        unsigned int version;
        unsigned int value;
} nvmlDeviceAddressingMode_v1_t;
typedef nvmlDeviceAddressingMode_v1_t nvmlDeviceAddressingMode_t;
#define nvmlDeviceAddressingMode_v1 NVML_STRUCT_VERSION(DeviceAddressingMode, 1)

/* nvmlDeviceGetC2cModeInfoV (R550 on): whether the GPU's chip-to-chip link
 * to its Grace CPU (NVLink-C2C) is on.  One field and, despite the V, no
 * version word. */
typedef struct nvmlC2cModeInfo_v1_st {
        unsigned int isC2cEnabled;
} nvmlC2cModeInfo_v1_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(nvmlGpuFabricInfo_t) == 28, "nvmlGpuFabricInfo_t layout");
_Static_assert(sizeof(nvmlDeviceAddressingMode_v1_t) == 8, "nvmlDeviceAddressingMode_v1_t layout");
_Static_assert(nvmlDeviceAddressingMode_v1 == 0x01000008, "nvmlDeviceAddressingMode_v1 version word");
_Static_assert(sizeof(nvmlC2cModeInfo_v1_t) == 4, "nvmlC2cModeInfo_v1_t layout");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(nvmlMemory_v2 == 0x02000028, "nvmlMemory_v2 version word");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t layout");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "process sample layout");
_Static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t layout");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "GPU instance profile layout");
_Static_assert(nvmlGpuInstanceProfileInfo_v2 == 0x02000098, "GPU instance profile v2");
_Static_assert(nvmlGpuInstanceProfileInfo_v3 == 0x03000098, "GPU instance profile v3");
_Static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t layout");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36, "CI profile layout");
_Static_assert(nvmlComputeInstanceProfileInfo_v2 == 0x02000088, "CI profile v2");
_Static_assert(nvmlComputeInstanceProfileInfo_v3 == 0x0300008C, "CI profile v3");
_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "nvmlComputeInstanceInfo_t layout");
#endif

/* ------------------------------------------------------------------ */
/* Functions                                                           */

/* Initialisation is reference counted: each successful init needs one
 * shutdown.  nvmlInit is the pre-5.319 entry point, kept for old clients. */
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);

/* System */
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length);

/* Enumeration and identity */
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type);
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info);
nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_t *mode);
nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, nvmlC2cModeInfo_v1_t *c2cModeInfo);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length);
nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
                                          unsigned int length);
nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci); /* v1 layout */
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode);
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode);
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending);

/* Memory */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

/* Locality.  nvmlDeviceGetNumaNodeId reports the NUMA node that *is* the
 * GPU's memory (coherent platforms only); the node nearest a PCIe GPU comes
 * from nvmlDeviceGetMemoryAffinity or sysfs. */
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node);
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                         unsigned long *nodeSet, nvmlAffinityScope_t scope);
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                      unsigned long *cpuSet);
nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int cpuSetSize,
                                                 unsigned long *cpuSet, nvmlAffinityScope_t scope);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus);

/* NVLink (link < NVML_NVLINK_MAX_LINKS) */
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                              nvmlPciInfo_t *pci); /* v1 layout */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType);
nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                           nvmlNvLinkCapability_t capability,
                                           unsigned int *capResult);

/* Multi-Instance GPU */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes);
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info);
/* info->version selects the layout: nvmlGpuInstanceProfileInfo_v2 or _v3. */
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info);
/* profileId is the ID from the profile info, not the NVML_GPU_INSTANCE_PROFILE_* index. */
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count);
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info);
/* info->version selects the layout: nvmlComputeInstanceProfileInfo_v2 or _v3. */
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance,
                                                           unsigned int profile,
                                                           unsigned int engProfile,
                                                           nvmlComputeInstanceProfileInfo_v2_t *info);
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance);
nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance,
                                        nvmlComputeInstanceInfo_t *info);
nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info);

/* Events */
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes);
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                 unsigned int timeoutms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

/* Telemetry */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock);
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons);
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons);
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values);

/* Processes.  *infoCount is the capacity of infos on entry and the number of
 * entries on return; too small gives NVML_ERROR_INSUFFICIENT_SIZE with the
 * number needed. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                   nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos);
/* Samples newer than lastSeenTimeStamp (microseconds); a NULL buffer gives
 * NVML_ERROR_INSUFFICIENT_SIZE with the count, none gives NVML_ERROR_NOT_FOUND. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp);

/* PCIe throughput over the last 20 ms, in KB/s (every GPU NVML knows). */
typedef enum nvmlPcieUtilCounter_enum {
        NVML_PCIE_UTIL_TX_BYTES = 0,
        NVML_PCIE_UTIL_RX_BYTES = 1,
} nvmlPcieUtilCounter_t;
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value);

/* Error and throttling counters (dcgm-exporter's ECC, retired-page,
 * violation and NVLink error families). */
typedef enum nvmlMemoryErrorType_enum {
        NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
} nvmlMemoryErrorType_t;
typedef enum nvmlEccCounterType_enum {
        NVML_VOLATILE_ECC = 0,
        NVML_AGGREGATE_ECC = 1,
} nvmlEccCounterType_t;
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts);

typedef enum nvmlPageRetirementCause_enum {
        NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
        NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
} nvmlPageRetirementCause_t;
/* *pageCount: the capacity of addresses on entry (0 with NULL asks for the
 * count), the pages retired for cause on return; too small gives
 * NVML_ERROR_INSUFFICIENT_SIZE with the count. */
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int *pageCount, unsigned long long *addresses);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t *isPending);

typedef enum nvmlPerfPolicyType_enum {
        NVML_PERF_POLICY_POWER = 0,
        NVML_PERF_POLICY_THERMAL = 1,
        NVML_PERF_POLICY_SYNC_BOOST = 2,
        NVML_PERF_POLICY_BOARD_LIMIT = 3,
        NVML_PERF_POLICY_LOW_UTILIZATION = 4,
        NVML_PERF_POLICY_RELIABILITY = 5,
        NVML_PERF_POLICY_TOTAL_APP_CLOCKS = 10,
        NVML_PERF_POLICY_TOTAL_BASE_CLOCKS = 11,
} nvmlPerfPolicyType_t;
typedef struct nvmlViolationTime_st {
        unsigned long long referenceTime; /* µs, CPU time of the reading */
        unsigned long long violationTime; /* ns spent held back since boot */
} nvmlViolationTime_t;
_Static_assert(sizeof(nvmlViolationTime_t) == 16, "nvmlViolationTime_t layout");
nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                          nvmlViolationTime_t *violTime);

typedef enum nvmlNvLinkErrorCounter_enum {
        NVML_NVLINK_ERROR_DL_REPLAY = 0,
        NVML_NVLINK_ERROR_DL_RECOVERY = 1,
        NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
        NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
        NVML_NVLINK_ERROR_DL_ECC_DATA = 4,
} nvmlNvLinkErrorCounter_t;
nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                             nvmlNvLinkErrorCounter_t counter,
                                             unsigned long long *counterValue);

/* Percent of the fan's maximum (fan 0). */
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed);

/* vGPU software licensing (the _v4 layout). */
#define NVML_GRID_LICENSE_BUFFER_SIZE 128
#define NVML_GRID_LICENSE_FEATURE_MAX_COUNT 3
typedef enum nvmlGridLicenseFeatureCode_t {
        NVML_GRID_LICENSE_FEATURE_CODE_UNKNOWN = 0,
        NVML_GRID_LICENSE_FEATURE_CODE_VGPU = 1,
        NVML_GRID_LICENSE_FEATURE_CODE_NVIDIA_RTX = 2,
        NVML_GRID_LICENSE_FEATURE_CODE_GAMING = 3,
        NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE = 4,
} nvmlGridLicenseFeatureCode_t;
typedef struct nvmlGridLicenseExpiry_st {
        unsigned int year;
        unsigned short month, day, hour, min, sec;
        unsigned char status;
} nvmlGridLicenseExpiry_t;
typedef struct nvmlGridLicensableFeature_st {
        nvmlGridLicenseFeatureCode_t featureCode;
        unsigned int featureState; /* non-zero: licensed now */
        char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
        char productName[NVML_GRID_LICENSE_BUFFER_SIZE];
        unsigned int featureEnabled;
        nvmlGridLicenseExpiry_t licenseExpiry;
} nvmlGridLicensableFeature_t;
typedef struct nvmlGridLicensableFeatures_st {
        int isGridLicenseSupported;
        unsigned int licensableFeaturesCount;
        nvmlGridLicensableFeature_t gridLicensableFeatures[NVML_GRID_LICENSE_FEATURE_MAX_COUNT];
} nvmlGridLicensableFeatures_t;
_Static_assert(sizeof(nvmlGridLicenseExpiry_t) == 16, "nvmlGridLicenseExpiry_t layout");
_Static_assert(sizeof(nvmlGridLicensableFeature_t) == 284, "nvmlGridLicensableFeature_t layout");
_Static_assert(sizeof(nvmlGridLicensableFeatures_t) == 860, "nvmlGridLicensableFeatures_t layout");
nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v4(nvmlDevice_t device,
                                                    nvmlGridLicensableFeatures_t *features);

/* GPU Performance Monitoring (Hopper and later): two samples taken some
 * time apart give the metrics over that interval.  Percentages are
 * 0.0-100.0; the *_PER_SEC rates are MiB/s. */
typedef enum nvmlGpmMetricId_enum {
        NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
        NVML_GPM_METRIC_SM_UTIL = 2,
        NVML_GPM_METRIC_SM_OCCUPANCY = 3,
        NVML_GPM_METRIC_INTEGER_UTIL = 4,
        NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
        NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
        NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
        NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
        NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
        NVML_GPM_METRIC_FP64_UTIL = 11,
        NVML_GPM_METRIC_FP32_UTIL = 12,
        NVML_GPM_METRIC_FP16_UTIL = 13,
        NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,
        NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
        NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60,
        NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61,
        NVML_GPM_METRIC_MAX = 98, /* the size of nvmlGpmMetricsGet_t.metrics */
} nvmlGpmMetricId_t;

typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

typedef struct nvmlGpmMetric_st {
        unsigned int metricId;   /* in */
        nvmlReturn_t nvmlReturn; /* out: value is valid only when NVML_SUCCESS */
        double value;            /* out */
        struct {
                char *shortName;
                char *longName;
                char *unit;
        } metricInfo; /* out; may be NULL */
} nvmlGpmMetric_t;

#define NVML_GPM_METRICS_GET_VERSION 1

typedef struct nvmlGpmMetricsGet_st {
        unsigned int version;    /* NVML_GPM_METRICS_GET_VERSION */
        unsigned int numMetrics; /* entries of metrics[] in use */
        nvmlGpmSample_t sample1;
        nvmlGpmSample_t sample2;
        nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

#define NVML_GPM_SUPPORT_VERSION 1

typedef struct nvmlGpmSupport_st {
        unsigned int version;           /* NVML_GPM_SUPPORT_VERSION */
        unsigned int isSupportedDevice; /* out */
} nvmlGpmSupport_t;

_Static_assert(sizeof(nvmlGpmMetric_t) == 40, "nvmlGpmMetric_t layout");
_Static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24, "nvmlGpmMetricsGet_t layout");
_Static_assert(sizeof(nvmlGpmMetricsGet_t) == 24 + 98 * 40, "nvmlGpmMetricsGet_t size");
_Static_assert(sizeof(nvmlGpmSupport_t) == 8, "nvmlGpmSupport_t layout");

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport);
nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample);
nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample);
/* device: a GPU (not a MIG device handle) */
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample);
/* one GPU instance of a GPU in MIG mode */
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample);
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet);

#ifdef __cplusplus
}
#endif

#endif
