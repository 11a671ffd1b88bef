// The slice of NVIDIA's NVML C ABI that gpuplane uses, declared here so that nothing at build
// time depends on CUDA or the driver: libnvidia-ml.so.1 is opened at run time (nvml.cpp) and its
// entry points are resolved by name. Names, values and layouts follow NVIDIA's public nvml.h
// (API version 12; checked against the 12.2 and 12.9 headers) so they can be compared line by
// line; that is why they keep NVML's spelling instead of gpuplane's.
//
// Read-only queries, plus the MIG configuration calls the agent's MIG applier makes (agent/mig.h:
// GPU and compute instances created and destroyed, MIG mode set). Nothing else that changes GPU
// state (clocks, power limits, persistence, resets) may be declared here.
#pragma once

#include <cstddef>

namespace gp::agent::nvml_abi {

// nvmlReturn_t. A C enum: passed and returned as a 32-bit integer.
enum nvmlReturn_t : unsigned int {
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
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999,
};

// Opaque handles.
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlGpuInstance_st;
using nvmlGpuInstance_t = nvmlGpuInstance_st*;
struct nvmlComputeInstance_st;
using nvmlComputeInstance_t = nvmlComputeInstance_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;

inline constexpr unsigned int NVML_DEVICE_NAME_BUFFER_SIZE = 64;
inline constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_UUID_BUFFER_SIZE = 80;
inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
inline constexpr unsigned int NVML_NVLINK_MAX_LINKS = 18;

// nvmlEnableState_t
enum nvmlEnableState_t : unsigned int {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1,
};

// nvmlMemoryErrorType_t, nvmlEccCounterType_t
enum nvmlMemoryErrorType_t : unsigned int {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
};
enum nvmlEccCounterType_t : unsigned int {
  NVML_VOLATILE_ECC = 0,
  NVML_AGGREGATE_ECC = 1,
};

// nvmlIntNvLinkDeviceType_t: what the far end of an NVLink is.
enum nvmlIntNvLinkDeviceType_t : unsigned int {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
};

// nvmlTemperatureSensors_t and nvmlClockType_t: the values gpuplane reads.
inline constexpr unsigned int NVML_TEMPERATURE_GPU = 0;
inline constexpr unsigned int NVML_CLOCK_SM = 1;
// nvmlDeviceGetMigMode modes.
inline constexpr unsigned int NVML_DEVICE_MIG_DISABLE = 0x0;
inline constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 0x1;

// GPU-instance profile indices for nvmlDeviceGetGpuInstanceProfileInfo. NVML_GPU_INSTANCE_
// PROFILE_COUNT grows with driver releases (0xA in 12.2, more later), so callers probe indices
// up to kMaxGpuInstanceProfileIndex and skip the ones the driver refuses.
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0;
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1;
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2;
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3;
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4;
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5;
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6;
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;  // 1g +me
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8;  // 2g +me
inline constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9;  // 1g, 2 memory slices
inline constexpr unsigned int kMaxGpuInstanceProfileIndex = 0x20;

// Compute-instance profile indices for nvmlGpuInstanceGetComputeInstanceProfileInfo: the
// compute instance of N slices (a GPU instance's whole compute is the one matching its slices).
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x8;
inline constexpr unsigned int NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0;

// Event types for nvmlDeviceRegisterEvents (a 64-bit mask).
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x0000000000000008ULL;

// nvmlPciInfo_t as filled by the _v3 / _v2 entry points.
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

// nvmlMemory_t (v1, for nvmlDeviceGetMemoryInfo). Bytes.
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlMemory_v2_t (for nvmlDeviceGetMemoryInfo_v2). Bytes; `used` excludes `reserved`, the
// memory the driver and firmware hold (v1's `used` includes it, so an idle GPU is not at zero).
struct nvmlMemory_v2_t {
  unsigned int version;  // nvmlMemory_v2
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct's size, and the version in the top byte.
inline constexpr unsigned int nvmlMemory_v2 = sizeof(nvmlMemory_v2_t) | (2U << 24U);

// nvmlUtilization_t. Percent over the driver's last sample period.
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

// nvmlGpuInstancePlacement_t: in memory slices.
struct nvmlGpuInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

// nvmlGpuInstanceProfileInfo_t (v1).
struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id;  // profile ID, unique within the device
  unsigned int isP2pSupported;
  unsigned int sliceCount;     // GPU (compute) slices
  unsigned int instanceCount;  // max instances of this profile
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;  // MiB
};

// nvmlGpuInstanceInfo_t.
struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;  // parent device
  unsigned int id;      // GPU instance ID, unique within the device
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};

// nvmlComputeInstanceProfileInfo_t (v1).
struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;  // profile ID, unique within the GPU instance
  unsigned int sliceCount;
  unsigned int instanceCount;  // max instances of this profile
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

// nvmlEventData_t as of NVML 11.x+ (gpuInstanceId / computeInstanceId were appended; older
// drivers write only the first three fields, so the larger buffer is safe with either).
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError (999: unknown)
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// Layouts the C header fixes; a mismatch here would corrupt memory at run time.
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(offsetof(nvmlPciInfo_t, domain) == 16 && offsetof(nvmlPciInfo_t, busId) == 36);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlMemory_v2_t) == 40 && nvmlMemory_v2 == 0x02000028);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB) == 40);
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24);
static_assert(offsetof(nvmlGpuInstanceInfo_t, placement) == 16);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36);

// Entry point signatures, named after the symbols they are resolved from.
extern "C" {
using nvmlInit_v2_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t);
using nvmlDeviceGetCount_v2_fn = nvmlReturn_t (*)(unsigned int* count);
using nvmlDeviceGetHandleByIndex_v2_fn = nvmlReturn_t (*)(unsigned int index, nvmlDevice_t* device);
using nvmlDeviceGetName_fn = nvmlReturn_t (*)(nvmlDevice_t, char* name, unsigned int length);
using nvmlDeviceGetUUID_fn = nvmlReturn_t (*)(nvmlDevice_t, char* uuid, unsigned int length);
using nvmlDeviceGetMemoryInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using nvmlDeviceGetMemoryInfo_v2_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
using nvmlDeviceGetPciInfo_v3_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using nvmlDeviceGetUtilizationRates_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using nvmlDeviceGetNumaNodeId_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* node);
using nvmlDeviceGetTotalEccErrors_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemoryErrorType_t,
                                                        nvmlEccCounterType_t,
                                                        unsigned long long* count);
using nvmlDeviceGetPowerUsage_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* milliwatts);
using nvmlDeviceGetTotalEnergyConsumption_fn = nvmlReturn_t (*)(nvmlDevice_t,
                                                                unsigned long long* millijoules);
using nvmlDeviceGetTemperature_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int sensor,
                                                     unsigned int* celsius);
using nvmlDeviceGetClockInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int clock_type,
                                                   unsigned int* mhz);
using nvmlDeviceGetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* current_mode,
                                                 unsigned int* pending_mode);
using nvmlDeviceGetGpuInstanceProfileInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int profile,
                                                                nvmlGpuInstanceProfileInfo_t*);
using nvmlDeviceGetGpuInstances_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int profile_id,
                                                      nvmlGpuInstance_t* instances,
                                                      unsigned int* count);
using nvmlGpuInstanceGetInfo_fn = nvmlReturn_t (*)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
using nvmlDeviceGetMaxMigDeviceCount_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* count);
using nvmlDeviceGetMigDeviceHandleByIndex_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int index,
                                                                nvmlDevice_t* mig_device);
using nvmlDeviceGetGpuInstanceId_fn = nvmlReturn_t (*)(nvmlDevice_t mig_device, unsigned int* id);
using nvmlDeviceGetNvLinkState_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int link,
                                                     nvmlEnableState_t* is_active);
using nvmlDeviceGetNvLinkRemotePciInfo_v2_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int link,
                                                                nvmlPciInfo_t*);
using nvmlDeviceGetNvLinkRemoteDeviceType_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int link,
                                                                nvmlIntNvLinkDeviceType_t*);
// MIG configuration (agent/mig.h).
using nvmlDeviceSetMigMode_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int mode,
                                                 nvmlReturn_t* activation_status);
using nvmlDeviceCreateGpuInstanceWithPlacement_fn =
    nvmlReturn_t (*)(nvmlDevice_t, unsigned int profile_id,
                     const nvmlGpuInstancePlacement_t* placement, nvmlGpuInstance_t* instance);
using nvmlGpuInstanceDestroy_fn = nvmlReturn_t (*)(nvmlGpuInstance_t);
using nvmlGpuInstanceGetComputeInstanceProfileInfo_fn =
    nvmlReturn_t (*)(nvmlGpuInstance_t, unsigned int profile, unsigned int eng_profile,
                     nvmlComputeInstanceProfileInfo_t* info);
using nvmlGpuInstanceCreateComputeInstance_fn = nvmlReturn_t (*)(nvmlGpuInstance_t,
                                                                 unsigned int profile_id,
                                                                 nvmlComputeInstance_t* instance);
using nvmlGpuInstanceGetComputeInstances_fn = nvmlReturn_t (*)(nvmlGpuInstance_t,
                                                               unsigned int profile_id,
                                                               nvmlComputeInstance_t* instances,
                                                               unsigned int* count);
using nvmlComputeInstanceDestroy_fn = nvmlReturn_t (*)(nvmlComputeInstance_t);
using nvmlEventSetCreate_fn = nvmlReturn_t (*)(nvmlEventSet_t* set);
using nvmlDeviceRegisterEvents_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long event_types,
                                                     nvmlEventSet_t set);
using nvmlEventSetWait_v2_fn = nvmlReturn_t (*)(nvmlEventSet_t set, nvmlEventData_t* data,
                                                unsigned int timeout_ms);
using nvmlEventSetFree_fn = nvmlReturn_t (*)(nvmlEventSet_t set);
}

}  // namespace gp::agent::nvml_abi
