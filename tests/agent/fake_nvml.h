// A simulated NVML driver for the agent's tests: Nvml::open_with(fake_symbol) resolves every
// entry point gpuplane uses to the functions below, which answer like the real library (return
// codes, buffers, handles) over the GPUs of a FakeWorld. Handles are pointers to its structs.
// The MIG configuration calls change the world's GPUs, and any call can be made to fail once
// (FakeWorld::fail_next) to walk the failure paths.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/nvml.h"
#include "agent/nvml_types.h"

namespace gp::agent::fake_nvml {

using namespace nvml_abi;  // NOLINT: NVML's own names

// A simulated NVML driver. Handles are pointers to the structs below.

struct FakeHandle {
  bool is_mig_device = false;
};

struct FakeGpu;

struct FakeInstance {
  FakeGpu* gpu = nullptr;
  unsigned id = 0;
  unsigned profile_index = 0;
  unsigned start = 0;
  bool alive = true;    // false once destroyed (handles stay valid, as addresses)
  bool in_use = false;  // a process runs on it: its compute instances refuse to go
};

// A compute instance; NVML also hands it out as the MIG device handle.
struct FakeMigDevice : FakeHandle {
  FakeInstance* instance = nullptr;
  unsigned long long memory_used = 0;
  unsigned profile = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  bool alive = true;
};

struct FakeLink {
  nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_GPU;
  unsigned remote_bus = 0;
  bool active = true;
};

struct FakeGpu : FakeHandle {
  std::string name;
  std::string uuid;
  unsigned bus = 0;
  unsigned long long memory_total = 0;
  unsigned long long memory_used = 0;
  unsigned long long memory_reserved = 0;  // held by the driver: v1 counts it as used, v2 not
  int util = -1;                           // -1: NOT_SUPPORTED (as for a GPU in MIG mode)
  int mem_util = 0;                        // memory busy %, reported with util
  long long power_mw = -1;                 // -1: NOT_SUPPORTED, for this and the sensors below
  long long energy_mj = -1;
  int temperature_c = -1;
  int sm_clock_mhz = -1;
  int mig_mode = -1;              // -1: NOT_SUPPORTED; else NVML_DEVICE_MIG_DISABLE / _ENABLE
  int pending_mig_mode = -1;      // -1: as mig_mode; else set and waiting for a reset
  bool mode_needs_reset = false;  // nvmlDeviceSetMigMode defers the change to a GPU reset
  bool busy = false;              // processes run on it: nvmlDeviceSetMigMode answers IN_USE
  int numa_node = -1;             // -1: NOT_SUPPORTED
  long long ecc = -1;             // -1: NOT_SUPPORTED; the volatile uncorrected count
  long long ecc_corrected = 0;    // the volatile corrected count, when ecc is supported
  bool denied = false;            // nvmlDeviceGetHandleByIndex_v2 answers NO_PERMISSION
  bool xid_events = true;         // nvmlDeviceRegisterEvents supported
  bool registered = false;
  std::vector<FakeLink> links;
  std::deque<FakeInstance> instances;  // stable addresses: handed out as handles
  std::deque<FakeMigDevice> mig_devices;
};

struct FakeProfile {
  unsigned index;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned id;
  unsigned slices;
  unsigned long long memory_mb;
  unsigned max_instances;
  unsigned memory_slices;  // the placement size
};

// H200 GPU-instance profiles with NVML 12 profile IDs. Memory is plausible, not measured.
inline const std::vector<FakeProfile> kH200Profiles = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 16896, 7, 1},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 33536, 3, 2},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 69888, 2, 4},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 69888, 1, 4},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 140544, 1, 8},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 16896, 1, 1},  // 1g.18gb+me
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 33536, 4, 2},  // 1g.35gb
};

inline const FakeProfile* profile_at(unsigned index) {
  for (const FakeProfile& p : kH200Profiles) {
    if (p.index == index) return &p;
  }
  return nullptr;
}
inline const FakeProfile* profile_with_id(unsigned id) {
  for (const FakeProfile& p : kH200Profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

// Compute slices of NVML_COMPUTE_INSTANCE_PROFILE_<index> (0: no such profile here).
inline unsigned compute_profile_slices(unsigned index) {
  static const std::map<unsigned, unsigned> kSlices = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 7}};
  auto it = kSlices.find(index);
  return it == kSlices.end() ? 0 : it->second;
}
inline unsigned full_compute_profile(unsigned slices) {
  for (unsigned index = 0; index < 8; ++index)
    if (compute_profile_slices(index) == slices) return index;
  return 0;
}

struct FakeEvent {
  FakeGpu* gpu;
  unsigned long long type;
  unsigned long long data;
};

struct FakeWorld {
  std::deque<FakeGpu> gpus;
  nvmlReturn_t init_rc = NVML_SUCCESS;
  nvmlReturn_t list_instances_rc = NVML_SUCCESS;
  std::set<std::string> absent;  // symbols this "driver" does not export
  std::deque<FakeEvent> events;
  int inits = 0;
  int shutdowns = 0;
  int event_sets_created = 0;
  int event_sets_freed = 0;
  int registrations = 0;
  // MIG configuration: each call made ("nvmlGpuInstanceDestroy 3g.71gb@4", ...), and calls to
  // fail once with the given code (by symbol name).
  std::vector<std::string> calls;
  std::map<std::string, nvmlReturn_t> fail_next;

  // The code to answer `symbol` with this time, if it is to fail; logs the call otherwise.
  std::optional<nvmlReturn_t> fails(const std::string& symbol, const std::string& what,
                                    bool log = true) {
    if (auto it = fail_next.find(symbol); it != fail_next.end()) {
      const nvmlReturn_t rc = it->second;
      fail_next.erase(it);
      return rc;
    }
    if (log) calls.push_back(what.empty() ? symbol : symbol + " " + what);
    return std::nullopt;
  }
  // A driver that answers success to nvmlDeviceCreateGpuInstanceWithPlacement and creates
  // nothing: what the agent's verification is for.
  bool creates_nothing = false;

  FakeGpu& add_gpu(std::string name, std::string uuid, unsigned bus) {
    FakeGpu& gpu = gpus.emplace_back();
    gpu.name = std::move(name);
    gpu.uuid = std::move(uuid);
    gpu.bus = bus;
    gpu.memory_total = 150'754'820'096ULL;  // 143771 MiB, an H200
    return gpu;
  }

  // A GPU instance and one MIG device (compute instance) per `compute_instances`.
  FakeInstance& add_instance(FakeGpu& gpu, unsigned profile_index, unsigned start, unsigned id,
                             unsigned long long memory_used, int compute_instances = 1) {
    FakeInstance& instance = gpu.instances.emplace_back();
    instance = {.gpu = &gpu, .id = id, .profile_index = profile_index, .start = start};
    const unsigned slices = profile_at(profile_index)->slices;
    for (int i = 0; i < compute_instances; ++i) {
      FakeMigDevice& device = gpu.mig_devices.emplace_back();
      device.is_mig_device = true;
      device.instance = &instance;
      device.memory_used = memory_used;
      device.profile = compute_instances == 1 ? full_compute_profile(slices) : 0;
    }
    return instance;
  }

  // The live instances of a GPU as "<profile index>@<start>/<compute instances>", by start.
  static std::vector<std::string> describe(const FakeGpu& gpu) {
    std::map<unsigned, std::string> out;
    for (const FakeInstance& i : gpu.instances) {
      if (!i.alive) continue;
      int compute = 0;
      for (const FakeMigDevice& d : gpu.mig_devices) compute += d.alive && d.instance == &i;
      out[i.start] = std::to_string(profile_at(i.profile_index)->slices) + "g@" +
                     std::to_string(i.start) + "/" + std::to_string(compute);
    }
    std::vector<std::string> v;
    for (auto& [start, text] : out) v.push_back(text);
    return v;
  }
};

inline FakeWorld* world = nullptr;

inline nvmlDevice_t handle_of(FakeHandle* h) { return reinterpret_cast<nvmlDevice_t>(h); }
inline FakeHandle* from_handle(nvmlDevice_t d) { return reinterpret_cast<FakeHandle*>(d); }
inline FakeGpu* gpu_of(nvmlDevice_t d) {
  FakeHandle* h = from_handle(d);
  return h == nullptr || h->is_mig_device ? nullptr : static_cast<FakeGpu*>(h);
}

inline nvmlReturn_t copy_string(const std::string& s, char* buffer, unsigned length) {
  if (s.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buffer, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

inline nvmlReturn_t fake_init() {
  ++world->inits;
  return world->init_rc;
}
inline nvmlReturn_t fake_shutdown() {
  ++world->shutdowns;
  return NVML_SUCCESS;
}
inline const char* fake_error_string(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    default:
      return "Simulated Error";
  }
}
inline nvmlReturn_t fake_count(unsigned* count) {
  *count = static_cast<unsigned>(world->gpus.size());
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_handle_by_index(unsigned index, nvmlDevice_t* device) {
  if (index >= world->gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (world->gpus[index].denied) return NVML_ERROR_NO_PERMISSION;
  *device = handle_of(&world->gpus[index]);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_name(nvmlDevice_t d, char* name, unsigned length) {
  FakeGpu* gpu = gpu_of(d);
  return gpu ? copy_string(gpu->name, name, length) : NVML_ERROR_INVALID_ARGUMENT;
}
inline nvmlReturn_t fake_uuid(nvmlDevice_t d, char* uuid, unsigned length) {
  FakeGpu* gpu = gpu_of(d);
  return gpu ? copy_string(gpu->uuid, uuid, length) : NVML_ERROR_INVALID_ARGUMENT;
}
inline nvmlReturn_t fake_memory(nvmlDevice_t d, nvmlMemory_t* memory) {
  FakeHandle* h = from_handle(d);
  if (h->is_mig_device) {
    auto* mig = static_cast<FakeMigDevice*>(h);
    memory->total = profile_at(mig->instance->profile_index)->memory_mb << 20;
    memory->used = mig->memory_used;
  } else {
    auto* gpu = static_cast<FakeGpu*>(h);
    memory->total = gpu->memory_total;
    memory->used = gpu->memory_used + gpu->memory_reserved;  // v1 counts the reserved as used
  }
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_memory_v2(nvmlDevice_t d, nvmlMemory_v2_t* memory) {
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlMemory_t v1 = {};
  fake_memory(d, &v1);
  FakeGpu* gpu = gpu_of(d);
  memory->reserved = gpu != nullptr ? gpu->memory_reserved : 0;
  memory->total = v1.total;
  memory->used = v1.used - memory->reserved;
  memory->free = v1.free;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_pci(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = {};
  pci->bus = gpu->bus;
  std::snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", gpu->bus);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_utilization(nvmlDevice_t d, nvmlUtilization_t* utilization) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu == nullptr || gpu->util < 0) return NVML_ERROR_NOT_SUPPORTED;  // MIG devices too
  utilization->gpu = static_cast<unsigned>(gpu->util);
  utilization->memory = static_cast<unsigned>(gpu->mem_util);
  return NVML_SUCCESS;
}
// The board sensors: NOT_SUPPORTED for MIG devices and for a GPU without the sensor.
template <typename Value>
nvmlReturn_t fake_reading(nvmlDevice_t d, long long FakeGpu::*field, Value* out) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu == nullptr || gpu->*field < 0) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<Value>(gpu->*field);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_power(nvmlDevice_t d, unsigned* mw) {
  return fake_reading(d, &FakeGpu::power_mw, mw);
}
inline nvmlReturn_t fake_energy(nvmlDevice_t d, unsigned long long* mj) {
  return fake_reading(d, &FakeGpu::energy_mj, mj);
}
// Only the sensor and clock gpuplane asks for answer, so asking for another one shows.
inline nvmlReturn_t fake_temperature(nvmlDevice_t d, unsigned sensor, unsigned* c) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu == nullptr || gpu->temperature_c < 0) return NVML_ERROR_NOT_SUPPORTED;
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *c = static_cast<unsigned>(gpu->temperature_c);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_clock(nvmlDevice_t d, unsigned type, unsigned* mhz) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu == nullptr || gpu->sm_clock_mhz < 0) return NVML_ERROR_NOT_SUPPORTED;
  if (type != NVML_CLOCK_SM) return NVML_ERROR_INVALID_ARGUMENT;
  *mhz = static_cast<unsigned>(gpu->sm_clock_mhz);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_numa(nvmlDevice_t d, unsigned* node) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu->numa_node < 0) return NVML_ERROR_NOT_SUPPORTED;
  *node = static_cast<unsigned>(gpu->numa_node);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_ecc(nvmlDevice_t d, nvmlMemoryErrorType_t type,
                             nvmlEccCounterType_t counter, unsigned long long* count) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu == nullptr || gpu->ecc < 0) return NVML_ERROR_NOT_SUPPORTED;
  // Only the volatile counts are non-zero, so asking for the aggregate ones shows.
  const long long value = counter != NVML_VOLATILE_ECC                 ? 0
                          : type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? gpu->ecc
                                                                       : gpu->ecc_corrected;
  *count = static_cast<unsigned long long>(value);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_mig_mode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = static_cast<unsigned>(gpu->mig_mode);
  *pending =
      static_cast<unsigned>(gpu->pending_mig_mode >= 0 ? gpu->pending_mig_mode : gpu->mig_mode);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_profile_info(nvmlDevice_t d, unsigned index,
                                      nvmlGpuInstanceProfileInfo_t* info) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu->mig_mode != static_cast<int>(NVML_DEVICE_MIG_ENABLE)) return NVML_ERROR_NOT_SUPPORTED;
  if (index > 0xC) return NVML_ERROR_INVALID_ARGUMENT;  // past this driver's PROFILE_COUNT
  const FakeProfile* profile = profile_at(index);
  if (profile == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *info = {};
  info->id = profile->id;
  info->sliceCount = profile->slices;
  info->instanceCount = profile->max_instances;
  info->memorySizeMB = profile->memory_mb;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_gpu_instances(nvmlDevice_t d, unsigned profile_id, nvmlGpuInstance_t* out,
                                       unsigned* count) {
  if (world->list_instances_rc != NVML_SUCCESS) return world->list_instances_rc;
  FakeGpu* gpu = gpu_of(d);
  *count = 0;
  for (FakeInstance& instance : gpu->instances) {
    if (!instance.alive || profile_at(instance.profile_index)->id != profile_id) continue;
    out[(*count)++] = reinterpret_cast<nvmlGpuInstance_t>(&instance);
  }
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_instance_info(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t* info) {
  auto* instance = reinterpret_cast<FakeInstance*>(gi);
  const FakeProfile* profile = profile_at(instance->profile_index);
  info->device = handle_of(instance->gpu);
  info->id = instance->id;
  info->profileId = profile->id;
  info->placement = {.start = instance->start, .size = 0};
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_max_mig_devices(nvmlDevice_t d, unsigned* count) {
  *count = gpu_of(d)->mig_mode == static_cast<int>(NVML_DEVICE_MIG_ENABLE) ? 7 : 0;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_mig_device_by_index(nvmlDevice_t d, unsigned index, nvmlDevice_t* out) {
  FakeGpu* gpu = gpu_of(d);
  if (index >= gpu->mig_devices.size() || !gpu->mig_devices[index].alive) {
    return NVML_ERROR_NOT_FOUND;
  }
  *out = handle_of(&gpu->mig_devices[index]);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_gpu_instance_id(nvmlDevice_t d, unsigned* id) {
  FakeHandle* h = from_handle(d);
  if (!h->is_mig_device) return NVML_ERROR_INVALID_ARGUMENT;
  *id = static_cast<FakeMigDevice*>(h)->instance->id;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_nvlink_state(nvmlDevice_t d, unsigned link, nvmlEnableState_t* active) {
  FakeGpu* gpu = gpu_of(d);
  if (gpu->links.empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= gpu->links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *active = gpu->links[link].active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_nvlink_remote_pci(nvmlDevice_t d, unsigned link, nvmlPciInfo_t* pci) {
  FakeGpu* gpu = gpu_of(d);
  if (link >= gpu->links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = {};
  pci->bus = gpu->links[link].remote_bus;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_nvlink_remote_type(nvmlDevice_t d, unsigned link,
                                            nvmlIntNvLinkDeviceType_t* type) {
  FakeGpu* gpu = gpu_of(d);
  if (link >= gpu->links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *type = gpu->links[link].type;
  return NVML_SUCCESS;
}
inline int fake_event_set_token = 0;
inline nvmlReturn_t fake_event_set_create(nvmlEventSet_t* set) {
  ++world->event_sets_created;
  *set = reinterpret_cast<nvmlEventSet_t>(&fake_event_set_token);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_register_events(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t) {
  FakeGpu* gpu = gpu_of(d);
  if (!gpu->xid_events) return NVML_ERROR_NOT_SUPPORTED;
  if (types != nvmlEventTypeXidCriticalError) return NVML_ERROR_INVALID_ARGUMENT;
  ++world->registrations;
  gpu->registered = true;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_event_set_wait(nvmlEventSet_t, nvmlEventData_t* data,
                                        unsigned timeout_ms) {
  if (timeout_ms != 0) return NVML_ERROR_INVALID_ARGUMENT;  // would block the agent
  while (!world->events.empty()) {
    FakeEvent event = world->events.front();
    world->events.pop_front();
    if (!event.gpu->registered) continue;
    *data = {};
    data->device = handle_of(event.gpu);
    data->eventType = event.type;
    data->eventData = event.data;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}
inline nvmlReturn_t fake_event_set_free(nvmlEventSet_t) {
  ++world->event_sets_freed;
  return NVML_SUCCESS;
}

// ---- MIG configuration

inline std::string placed(const FakeInstance& i) {
  return std::to_string(profile_at(i.profile_index)->slices) + "g@" + std::to_string(i.start);
}

inline nvmlReturn_t fake_set_mig_mode(nvmlDevice_t d, unsigned mode, nvmlReturn_t* activation) {
  FakeGpu* gpu = gpu_of(d);
  if (auto rc = world->fails("nvmlDeviceSetMigMode", std::to_string(mode))) return *rc;
  if (gpu->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
  if (mode != NVML_DEVICE_MIG_ENABLE && mode != NVML_DEVICE_MIG_DISABLE) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (gpu->busy) return NVML_ERROR_IN_USE;
  for (const FakeInstance& i : gpu->instances) {
    if (i.alive) return NVML_ERROR_IN_USE;  // instances must go before the mode changes
  }
  if (gpu->mode_needs_reset) {
    gpu->pending_mig_mode = static_cast<int>(mode);
    *activation = NVML_ERROR_RESET_REQUIRED;
  } else {
    gpu->mig_mode = static_cast<int>(mode);
    *activation = NVML_SUCCESS;
  }
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_create_gpu_instance(nvmlDevice_t d, unsigned profile_id,
                                             const nvmlGpuInstancePlacement_t* placement,
                                             nvmlGpuInstance_t* out) {
  FakeGpu* gpu = gpu_of(d);
  const FakeProfile* profile = profile_with_id(profile_id);
  const std::string what =
      profile ? std::to_string(profile->slices) + "g@" + std::to_string(placement->start) : "?";
  if (auto rc = world->fails("nvmlDeviceCreateGpuInstanceWithPlacement", what)) return *rc;
  if (gpu->mig_mode != static_cast<int>(NVML_DEVICE_MIG_ENABLE)) return NVML_ERROR_NOT_SUPPORTED;
  if (profile == nullptr || placement->size != profile->memory_slices ||
      placement->start % placement->size != 0 || placement->start + placement->size > 8) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (world->creates_nothing) return NVML_SUCCESS;
  unsigned next_id = 1;
  for (const FakeInstance& i : gpu->instances) {
    next_id = std::max(next_id, i.id + 1);
    if (!i.alive) continue;
    const unsigned size = profile_at(i.profile_index)->memory_slices;
    if (i.start < placement->start + placement->size && placement->start < i.start + size) {
      return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
  }
  FakeInstance& created = gpu->instances.emplace_back();
  created = {.gpu = gpu, .id = next_id, .profile_index = profile->index, .start = placement->start};
  *out = reinterpret_cast<nvmlGpuInstance_t>(&created);
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_destroy_gpu_instance(nvmlGpuInstance_t gi) {
  auto* instance = reinterpret_cast<FakeInstance*>(gi);
  if (auto rc = world->fails("nvmlGpuInstanceDestroy", placed(*instance))) return *rc;
  if (!instance->alive) return NVML_ERROR_INVALID_ARGUMENT;
  for (const FakeMigDevice& ci : instance->gpu->mig_devices) {
    if (ci.alive && ci.instance == instance) return NVML_ERROR_IN_USE;
  }
  instance->alive = false;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_compute_profile_info(nvmlGpuInstance_t gi, unsigned index, unsigned engine,
                                              nvmlComputeInstanceProfileInfo_t* info) {
  auto* instance = reinterpret_cast<FakeInstance*>(gi);
  if (auto rc = world->fails("nvmlGpuInstanceGetComputeInstanceProfileInfo", "", false)) return *rc;
  if (engine != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned slices = compute_profile_slices(index);
  const unsigned gi_slices = profile_at(instance->profile_index)->slices;
  if (slices == 0 || slices > gi_slices) return NVML_ERROR_NOT_SUPPORTED;
  *info = {};
  info->id = index;  // the simulated driver numbers compute profiles by index
  info->sliceCount = slices;
  info->instanceCount = gi_slices / slices;
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_create_compute_instance(nvmlGpuInstance_t gi, unsigned profile_id,
                                                 nvmlComputeInstance_t* out) {
  auto* instance = reinterpret_cast<FakeInstance*>(gi);
  if (auto rc = world->fails("nvmlGpuInstanceCreateComputeInstance", placed(*instance))) return *rc;
  if (!instance->alive) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned used = 0;
  for (const FakeMigDevice& ci : instance->gpu->mig_devices) {
    if (ci.alive && ci.instance == instance) used += compute_profile_slices(ci.profile);
  }
  if (used + compute_profile_slices(profile_id) > profile_at(instance->profile_index)->slices) {
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  FakeMigDevice& ci = instance->gpu->mig_devices.emplace_back();
  ci.is_mig_device = true;
  ci.instance = instance;
  ci.profile = profile_id;
  *out = reinterpret_cast<nvmlComputeInstance_t>(static_cast<FakeHandle*>(&ci));
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_compute_instances(nvmlGpuInstance_t gi, unsigned profile_id,
                                           nvmlComputeInstance_t* out, unsigned* count) {
  auto* instance = reinterpret_cast<FakeInstance*>(gi);
  *count = 0;
  for (FakeMigDevice& ci : instance->gpu->mig_devices) {
    if (!ci.alive || ci.instance != instance || ci.profile != profile_id) continue;
    out[(*count)++] = reinterpret_cast<nvmlComputeInstance_t>(static_cast<FakeHandle*>(&ci));
  }
  return NVML_SUCCESS;
}
inline nvmlReturn_t fake_destroy_compute_instance(nvmlComputeInstance_t handle) {
  auto* ci = static_cast<FakeMigDevice*>(reinterpret_cast<FakeHandle*>(handle));
  if (auto rc = world->fails("nvmlComputeInstanceDestroy", placed(*ci->instance))) return *rc;
  if (!ci->alive) return NVML_ERROR_INVALID_ARGUMENT;
  if (ci->instance->in_use) return NVML_ERROR_IN_USE;
  ci->alive = false;
  return NVML_SUCCESS;
}

inline void* fake_symbol(const char* symbol) {
  static const std::map<std::string, void*> kSymbols = {
      {"nvmlInit_v2", reinterpret_cast<void*>(&fake_init)},
      {"nvmlShutdown", reinterpret_cast<void*>(&fake_shutdown)},
      {"nvmlErrorString", reinterpret_cast<void*>(&fake_error_string)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<void*>(&fake_count)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void*>(&fake_handle_by_index)},
      {"nvmlDeviceGetName", reinterpret_cast<void*>(&fake_name)},
      {"nvmlDeviceGetUUID", reinterpret_cast<void*>(&fake_uuid)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void*>(&fake_memory)},
      {"nvmlDeviceGetMemoryInfo_v2", reinterpret_cast<void*>(&fake_memory_v2)},
      {"nvmlDeviceGetPciInfo_v3", reinterpret_cast<void*>(&fake_pci)},
      {"nvmlDeviceGetUtilizationRates", reinterpret_cast<void*>(&fake_utilization)},
      {"nvmlDeviceGetNumaNodeId", reinterpret_cast<void*>(&fake_numa)},
      {"nvmlDeviceGetTotalEccErrors", reinterpret_cast<void*>(&fake_ecc)},
      {"nvmlDeviceGetPowerUsage", reinterpret_cast<void*>(&fake_power)},
      {"nvmlDeviceGetTotalEnergyConsumption", reinterpret_cast<void*>(&fake_energy)},
      {"nvmlDeviceGetTemperature", reinterpret_cast<void*>(&fake_temperature)},
      {"nvmlDeviceGetClockInfo", reinterpret_cast<void*>(&fake_clock)},
      {"nvmlDeviceGetMigMode", reinterpret_cast<void*>(&fake_mig_mode)},
      {"nvmlDeviceGetGpuInstanceProfileInfo", reinterpret_cast<void*>(&fake_profile_info)},
      {"nvmlDeviceGetGpuInstances", reinterpret_cast<void*>(&fake_gpu_instances)},
      {"nvmlGpuInstanceGetInfo", reinterpret_cast<void*>(&fake_instance_info)},
      {"nvmlDeviceGetMaxMigDeviceCount", reinterpret_cast<void*>(&fake_max_mig_devices)},
      {"nvmlDeviceGetMigDeviceHandleByIndex", reinterpret_cast<void*>(&fake_mig_device_by_index)},
      {"nvmlDeviceGetGpuInstanceId", reinterpret_cast<void*>(&fake_gpu_instance_id)},
      {"nvmlDeviceGetNvLinkState", reinterpret_cast<void*>(&fake_nvlink_state)},
      {"nvmlDeviceGetNvLinkRemotePciInfo_v2", reinterpret_cast<void*>(&fake_nvlink_remote_pci)},
      {"nvmlDeviceGetNvLinkRemoteDeviceType", reinterpret_cast<void*>(&fake_nvlink_remote_type)},
      {"nvmlEventSetCreate", reinterpret_cast<void*>(&fake_event_set_create)},
      {"nvmlDeviceRegisterEvents", reinterpret_cast<void*>(&fake_register_events)},
      {"nvmlEventSetWait_v2", reinterpret_cast<void*>(&fake_event_set_wait)},
      {"nvmlEventSetFree", reinterpret_cast<void*>(&fake_event_set_free)},
      {"nvmlDeviceSetMigMode", reinterpret_cast<void*>(&fake_set_mig_mode)},
      {"nvmlDeviceCreateGpuInstanceWithPlacement",
       reinterpret_cast<void*>(&fake_create_gpu_instance)},
      {"nvmlGpuInstanceDestroy", reinterpret_cast<void*>(&fake_destroy_gpu_instance)},
      {"nvmlGpuInstanceGetComputeInstanceProfileInfo",
       reinterpret_cast<void*>(&fake_compute_profile_info)},
      {"nvmlGpuInstanceCreateComputeInstance",
       reinterpret_cast<void*>(&fake_create_compute_instance)},
      {"nvmlGpuInstanceGetComputeInstances", reinterpret_cast<void*>(&fake_compute_instances)},
      {"nvmlComputeInstanceDestroy", reinterpret_cast<void*>(&fake_destroy_compute_instance)},
  };
  if (world->absent.contains(symbol)) return nullptr;
  auto it = kSymbols.find(symbol);
  return it == kSymbols.end() ? nullptr : it->second;
}

class NvmlSimulated : public ::testing::Test {
 protected:
  void SetUp() override { world = &world_; }
  void TearDown() override { world = nullptr; }

  std::unique_ptr<Nvml> open() {
    Result<std::unique_ptr<Nvml>> nvml = Nvml::open_with(fake_symbol);
    EXPECT_TRUE(nvml.has_value()) << nvml.error().message;
    return nvml ? std::move(*nvml) : nullptr;
  }

  std::vector<fleet::GpuInfo> discover() {
    std::unique_ptr<Nvml> nvml = open();
    if (!nvml) return {};
    Result<std::vector<fleet::GpuInfo>> gpus = nvml->discover();
    EXPECT_TRUE(gpus.has_value()) << gpus.error().message;
    return gpus ? *gpus : std::vector<fleet::GpuInfo>{};
  }

  // Two NVLinked H200s: GPU 0 in MIG mode with three instances, GPU 1 whole and busy.
  void two_h200s() {
    FakeGpu& mig = world_.add_gpu("NVIDIA H200", "GPU-aaaaaaaa-0000-0000-0000-000000000000", 0x18);
    mig.mig_mode = NVML_DEVICE_MIG_ENABLE;
    mig.numa_node = 0;
    mig.ecc = 0;
    mig.memory_used = 6ULL << 30;
    mig.links = {{.remote_bus = 0x2a}, {.remote_bus = 0x2a}, {.remote_bus = 0x2a, .active = false}};
    world_.add_instance(mig, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 4, /*id=*/1, 5ULL << 30);
    world_.add_instance(mig, NVML_GPU_INSTANCE_PROFILE_2_SLICE, 2, /*id=*/5, 1ULL << 30,
                        /*compute_instances=*/2);
    world_.add_instance(mig, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0, /*id=*/9, 0);

    FakeGpu& whole =
        world_.add_gpu("NVIDIA H200", "GPU-bbbbbbbb-0000-0000-0000-000000000000", 0x2a);
    whole.mig_mode = NVML_DEVICE_MIG_DISABLE;
    whole.numa_node = 1;
    whole.ecc = 2;
    whole.util = 42;
    whole.mem_util = 17;
    whole.power_mw = 312'500;
    whole.energy_mj = 9'000'000'000;  // past 2^32: NVML's counter is 64-bit
    whole.temperature_c = 41;
    whole.sm_clock_mhz = 1980;
    whole.ecc_corrected = 3;
    whole.memory_used = 70ULL << 30;
    whole.memory_reserved = 616ULL << 20;  // as an idle H200 reports
    whole.links = {{.remote_bus = 0x18}, {.remote_bus = 0x18}};
  }

  FakeWorld world_;
};

}  // namespace gp::agent::fake_nvml
