#include "agent/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "agent/nvml_types.h"
#include "vocab/vocab.h"

namespace gp::agent {

using namespace nvml_abi;  // NOLINT: NVML's own names, declared in nvml_types.h

// Entry points of the loaded library. Required ones are never null once a session is open;
// optional ones are null when the driver lacks them.
struct NvmlApi {
  // Required.
  nvmlInit_v2_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlDeviceGetCount_v2_fn device_count = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn handle_by_index = nullptr;
  nvmlDeviceGetName_fn name = nullptr;
  nvmlDeviceGetUUID_fn uuid = nullptr;
  nvmlDeviceGetMemoryInfo_fn memory_info = nullptr;
  nvmlDeviceGetPciInfo_v3_fn pci_info = nullptr;
  nvmlDeviceGetUtilizationRates_fn utilization = nullptr;
  // Optional.
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetNumaNodeId_fn numa_node = nullptr;
  nvmlDeviceGetTotalEccErrors_fn total_ecc_errors = nullptr;
  nvmlDeviceGetMemoryInfo_v2_fn memory_info_v2 = nullptr;
  nvmlDeviceGetPowerUsage_fn power_usage = nullptr;
  nvmlDeviceGetTotalEnergyConsumption_fn total_energy = nullptr;
  nvmlDeviceGetTemperature_fn temperature = nullptr;
  nvmlDeviceGetClockInfo_fn clock_info = nullptr;
  nvmlDeviceGetMigMode_fn mig_mode = nullptr;
  nvmlDeviceGetGpuInstanceProfileInfo_fn gpu_instance_profile_info = nullptr;
  nvmlDeviceGetGpuInstances_fn gpu_instances = nullptr;
  nvmlGpuInstanceGetInfo_fn gpu_instance_info = nullptr;
  nvmlDeviceGetMaxMigDeviceCount_fn max_mig_device_count = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn mig_device_by_index = nullptr;
  nvmlDeviceGetGpuInstanceId_fn gpu_instance_id = nullptr;
  nvmlDeviceGetNvLinkState_fn nvlink_state = nullptr;
  nvmlDeviceGetNvLinkRemotePciInfo_v2_fn nvlink_remote_pci = nullptr;
  nvmlDeviceGetNvLinkRemoteDeviceType_fn nvlink_remote_type = nullptr;
  nvmlEventSetCreate_fn event_set_create = nullptr;
  nvmlDeviceRegisterEvents_fn register_events = nullptr;
  nvmlEventSetWait_v2_fn event_set_wait = nullptr;
  nvmlEventSetFree_fn event_set_free = nullptr;
  // Optional: MIG configuration (agent/mig.h).
  nvmlDeviceSetMigMode_fn set_mig_mode = nullptr;
  nvmlDeviceCreateGpuInstanceWithPlacement_fn create_gpu_instance = nullptr;
  nvmlGpuInstanceDestroy_fn destroy_gpu_instance = nullptr;
  nvmlGpuInstanceGetComputeInstanceProfileInfo_fn compute_profile_info = nullptr;
  nvmlGpuInstanceCreateComputeInstance_fn create_compute_instance = nullptr;
  nvmlGpuInstanceGetComputeInstances_fn compute_instances = nullptr;
  nvmlComputeInstanceDestroy_fn destroy_compute_instance = nullptr;

  bool has_mig_queries() const {
    return gpu_instance_profile_info && gpu_instances && gpu_instance_info;
  }
  bool has_mig_configuration() const {
    return has_mig_queries() && set_mig_mode && create_gpu_instance && destroy_gpu_instance &&
           compute_profile_info && create_compute_instance && compute_instances &&
           destroy_compute_instance;
  }

  // "GPU is lost (NVML error 15)".
  std::string describe(nvmlReturn_t rc) const {
    const char* text = error_string ? error_string(rc) : nullptr;
    return fmt::format("{} (NVML error {})", text ? text : "unknown error",
                       static_cast<unsigned>(rc));
  }

  Error failure(std::string_view call, std::string_view subject, nvmlReturn_t rc) const {
    std::string message = fmt::format("{} failed for {}: {}", call, subject, describe(rc));
    if (rc == NVML_ERROR_NO_PERMISSION) {
      message += "; run the agent as root or grant it the NVIDIA capabilities it needs";
    }
    return Error::unavailable(std::move(message));
  }
};

struct Nvml::Device {
  int index = 0;
  nvmlDevice_t handle = nullptr;
  std::string uuid;
};

namespace {

// Ratio within which NVML's memory for a profile must match the catalog's nominal size.
constexpr double kProfileMemoryTolerance = 1.3;
// Bounds one poll_xid_events() drain, so a storm of events cannot hold the caller forever.
constexpr int kMaxEventsPerPoll = 4096;

template <typename Fn>
Fn resolve(const NvmlSymbolLookup& lookup, const char* symbol) {
  // POSIX guarantees that a dlsym() result converts to a function pointer.
  return reinterpret_cast<Fn>(lookup(symbol));
}

// The N of a catalog profile name "<c>g.<N>gb" in GB, or 0 when the name has another form.
double nominal_gb(std::string_view name) {
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return 0;
  std::string_view rest = name.substr(dot + 1);
  unsigned gb = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), gb);
  if (ec != std::errc() || gb == 0) return 0;
  if (std::string_view(end, rest.data() + rest.size()) != "gb") return 0;
  return gb;
}

// A NUL-terminated string NVML wrote into a fixed buffer.
template <size_t N>
std::string from_buffer(const char (&buffer)[N]) {
  return std::string(buffer, strnlen(buffer, N));
}

struct MigState {
  bool capable = false;
  bool enabled = false;
};

// A GPU instance as NVML lists it, named with the catalog.
struct ListedInstance {
  unsigned id = 0;  // GPU instance ID, as nvmlDeviceGetGpuInstanceId reports it for MIG devices
  vocab::PlacedInstance placed;
  nvmlGpuInstance_t handle = nullptr;
  unsigned slices = 0;  // compute slices of its profile
};

// The far ends of a GPU's active NVLinks.
struct NvLinks {
  std::set<std::string> remote_bus_ids;  // format_pci_bus_id of GPUs (and anything else)
  bool switch_attached = false;
};

}  // namespace

std::string format_pci_bus_id(unsigned domain, unsigned bus, unsigned device, unsigned function) {
  return fmt::format("{:08X}:{:02X}:{:02X}.{:X}", domain, bus, device, function);
}

Result<std::string> catalog_profile_for(const vocab::MigCatalog& catalog, unsigned slice_count,
                                        unsigned long long memory_mb) {
  if (slice_count == 0 || memory_mb == 0) {
    return fail(Error::invalid(fmt::format(
        "a GPU-instance profile needs compute slices and memory (got {} slices, {} MiB)",
        slice_count, memory_mb)));
  }
  const double memory_gb = static_cast<double>(memory_mb) * 1024.0 * 1024.0 / 1e9;
  const vocab::MigProfile* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  std::string candidates;
  for (const vocab::MigProfile& profile : catalog.profiles) {
    if (profile.compute_slices != static_cast<int>(slice_count)) continue;
    const double gb = nominal_gb(profile.name);
    if (gb <= 0) continue;
    if (!candidates.empty()) candidates += ", ";
    candidates += profile.name;
    const double distance = std::abs(std::log(memory_gb / gb));
    if (distance < best_distance) {
      best = &profile;
      best_distance = distance;
    }
  }
  if (best == nullptr) {
    return fail(Error::not_found(
        fmt::format("{} has no MIG profile with {} compute slices", catalog.model, slice_count)));
  }
  if (best_distance > std::log(kProfileMemoryTolerance)) {
    return fail(Error::not_found(
        fmt::format("no {}-slice MIG profile of {} has about {:.1f} GB ({} MiB); candidates: {}",
                    slice_count, catalog.model, memory_gb, memory_mb, candidates)));
  }
  return best->name;
}

Nvml::Nvml(void* library, std::unique_ptr<NvmlApi> api) : library_(library), api_(std::move(api)) {}

Nvml::~Nvml() {
  {
    MutexLock lock(events_mu_);
    if (event_set_ != nullptr && api_->event_set_free != nullptr) {
      api_->event_set_free(static_cast<nvmlEventSet_t>(event_set_));
    }
  }
  api_->shutdown();
  if (library_ != nullptr) dlclose(library_);
}

Result<std::unique_ptr<Nvml>> Nvml::open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail(Error::unavailable(
        fmt::format("NVML is unavailable: cannot load {} ({}); is the NVIDIA driver installed?",
                    library, why ? why : "unknown dlopen error")));
  }
  NvmlSymbolLookup lookup = [handle](const char* symbol) { return dlsym(handle, symbol); };
  return start(handle, lookup, library);
}

Result<std::unique_ptr<Nvml>> Nvml::open_with(const NvmlSymbolLookup& lookup) {
  return start(nullptr, lookup, "the supplied NVML");
}

Result<std::unique_ptr<Nvml>> Nvml::start(void* library, const NvmlSymbolLookup& lookup,
                                          const std::string& what) {
  auto api = std::make_unique<NvmlApi>();
  std::vector<std::string_view> missing;
  auto require = [&]<typename Fn>(Fn& slot, const char* symbol) {
    slot = resolve<Fn>(lookup, symbol);
    if (slot == nullptr) missing.push_back(symbol);
  };
  require(api->init, "nvmlInit_v2");
  require(api->shutdown, "nvmlShutdown");
  require(api->device_count, "nvmlDeviceGetCount_v2");
  require(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  require(api->name, "nvmlDeviceGetName");
  require(api->uuid, "nvmlDeviceGetUUID");
  require(api->memory_info, "nvmlDeviceGetMemoryInfo");
  require(api->pci_info, "nvmlDeviceGetPciInfo_v3");
  require(api->utilization, "nvmlDeviceGetUtilizationRates");

  auto optional = [&]<typename Fn>(Fn& slot, const char* symbol) {
    slot = resolve<Fn>(lookup, symbol);
  };
  optional(api->error_string, "nvmlErrorString");
  optional(api->numa_node, "nvmlDeviceGetNumaNodeId");
  optional(api->total_ecc_errors, "nvmlDeviceGetTotalEccErrors");
  optional(api->memory_info_v2, "nvmlDeviceGetMemoryInfo_v2");
  optional(api->power_usage, "nvmlDeviceGetPowerUsage");
  optional(api->total_energy, "nvmlDeviceGetTotalEnergyConsumption");
  optional(api->temperature, "nvmlDeviceGetTemperature");
  optional(api->clock_info, "nvmlDeviceGetClockInfo");
  optional(api->mig_mode, "nvmlDeviceGetMigMode");
  optional(api->gpu_instance_profile_info, "nvmlDeviceGetGpuInstanceProfileInfo");
  optional(api->gpu_instances, "nvmlDeviceGetGpuInstances");
  optional(api->gpu_instance_info, "nvmlGpuInstanceGetInfo");
  optional(api->max_mig_device_count, "nvmlDeviceGetMaxMigDeviceCount");
  optional(api->mig_device_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
  optional(api->gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
  optional(api->nvlink_state, "nvmlDeviceGetNvLinkState");
  optional(api->nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  optional(api->nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
  optional(api->event_set_create, "nvmlEventSetCreate");
  optional(api->register_events, "nvmlDeviceRegisterEvents");
  optional(api->event_set_wait, "nvmlEventSetWait_v2");
  optional(api->event_set_free, "nvmlEventSetFree");
  optional(api->set_mig_mode, "nvmlDeviceSetMigMode");
  optional(api->create_gpu_instance, "nvmlDeviceCreateGpuInstanceWithPlacement");
  optional(api->destroy_gpu_instance, "nvmlGpuInstanceDestroy");
  optional(api->compute_profile_info, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  optional(api->create_compute_instance, "nvmlGpuInstanceCreateComputeInstance");
  optional(api->compute_instances, "nvmlGpuInstanceGetComputeInstances");
  optional(api->destroy_compute_instance, "nvmlComputeInstanceDestroy");

  auto unload = [library] {
    if (library != nullptr) dlclose(library);
  };
  if (!missing.empty()) {
    unload();
    return fail(Error::unavailable(
        fmt::format("NVML is unavailable: {} lacks {}; the NVIDIA driver is too old", what,
                    fmt::join(missing, ", "))));
  }
  const nvmlReturn_t rc = api->init();
  if (rc != NVML_SUCCESS) {
    std::string reason = api->describe(rc);
    unload();
    return fail(
        Error::unavailable(fmt::format("NVML is unavailable: nvmlInit_v2 failed: {}", reason)));
  }
  return std::unique_ptr<Nvml>(new Nvml(library, std::move(api)));
}

Result<std::vector<Nvml::Device>> Nvml::devices() {
  unsigned count = 0;
  if (nvmlReturn_t rc = api_->device_count(&count); rc != NVML_SUCCESS) {
    return fail(api_->failure("nvmlDeviceGetCount_v2", "this node", rc));
  }
  std::vector<Device> out;
  for (unsigned i = 0; i < count; ++i) {
    Device device;
    device.index = static_cast<int>(i);
    nvmlReturn_t rc = api_->handle_by_index(i, &device.handle);
    // A GPU this process may not talk to (cgroups, containers) is not ours to report.
    if (rc == NVML_ERROR_NO_PERMISSION) continue;
    if (rc != NVML_SUCCESS) {
      return fail(api_->failure("nvmlDeviceGetHandleByIndex_v2", fmt::format("GPU {}", i), rc));
    }
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    rc = api_->uuid(device.handle, uuid, sizeof uuid);
    if (rc != NVML_SUCCESS) {
      return fail(api_->failure("nvmlDeviceGetUUID", fmt::format("GPU {}", i), rc));
    }
    device.uuid = from_buffer(uuid);
    out.push_back(std::move(device));
  }
  return out;
}

namespace {

Result<std::string> product_name(const NvmlApi& api, nvmlDevice_t device, std::string_view uuid) {
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (nvmlReturn_t rc = api.name(device, name, sizeof name); rc != NVML_SUCCESS) {
    return fail(api.failure("nvmlDeviceGetName", uuid, rc));
  }
  return from_buffer(name);
}

Result<MigState> mig_state(const NvmlApi& api, nvmlDevice_t device, std::string_view uuid) {
  if (api.mig_mode == nullptr) return MigState{};
  unsigned current = 0;
  unsigned pending = 0;
  const nvmlReturn_t rc = api.mig_mode(device, &current, &pending);
  if (rc == NVML_ERROR_NOT_SUPPORTED) return MigState{};
  if (rc != NVML_SUCCESS) return fail(api.failure("nvmlDeviceGetMigMode", uuid, rc));
  return MigState{.capable = true, .enabled = current == NVML_DEVICE_MIG_ENABLE};
}

Result<const vocab::MigCatalog*> catalog_of(std::string_view product, std::string_view uuid) {
  Result<const vocab::MigCatalog*> catalog = vocab::mig_catalog(product);
  if (!catalog) catalog = vocab::mig_catalog(fleet::canonical_model(product));
  if (!catalog) {
    return fail(Error::not_found(
        fmt::format("GPU {} ({}) is in MIG mode but gpuplane has no MIG catalog for it: {}", uuid,
                    product, catalog.error().message)));
  }
  return catalog;
}

// The GPU-instance profiles NVML reports for a device, one per profile ID. Every index up to
// kMaxGpuInstanceProfileIndex is probed; indices the driver or GPU does not know are skipped.
Result<std::vector<nvmlGpuInstanceProfileInfo_t>> list_profiles(const NvmlApi& api,
                                                                nvmlDevice_t device,
                                                                std::string_view uuid) {
  std::vector<nvmlGpuInstanceProfileInfo_t> out;
  if (api.gpu_instance_profile_info == nullptr) return out;
  for (unsigned index = 0; index <= kMaxGpuInstanceProfileIndex; ++index) {
    nvmlGpuInstanceProfileInfo_t info = {};
    const nvmlReturn_t rc = api.gpu_instance_profile_info(device, index, &info);
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT ||
        rc == NVML_ERROR_NOT_FOUND) {
      continue;
    }
    if (rc != NVML_SUCCESS) {
      return fail(api.failure("nvmlDeviceGetGpuInstanceProfileInfo", uuid, rc));
    }
    const bool seen =
        std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.id == info.id; });
    if (!seen) out.push_back(info);
  }
  return out;
}

// The GPU instances on a device in MIG mode, named with `catalog`, sorted by start.
Result<std::vector<ListedInstance>> list_instances(const NvmlApi& api, nvmlDevice_t device,
                                                   std::string_view uuid,
                                                   const vocab::MigCatalog& catalog) {
  if (!api.has_mig_queries()) {
    return fail(Error::unavailable(fmt::format(
        "GPU {} is in MIG mode but the NVIDIA driver lacks the GPU-instance queries", uuid)));
  }
  std::vector<ListedInstance> out;
  for (const nvmlGpuInstanceProfileInfo_t& profile : GP_TRY(list_profiles(api, device, uuid))) {
    if (profile.instanceCount == 0) continue;
    std::vector<nvmlGpuInstance_t> instances(profile.instanceCount);
    unsigned count = 0;
    nvmlReturn_t rc = api.gpu_instances(device, profile.id, instances.data(), &count);
    if (rc == NVML_ERROR_NO_PERMISSION) {
      return fail(Error::unavailable(fmt::format(
          "NVML refused to list the GPU instances of {}: {}; the agent needs root or the "
          "/proc/driver/nvidia/capabilities/mig/monitor capability",
          uuid, api.describe(rc))));
    }
    if (rc != NVML_SUCCESS) return fail(api.failure("nvmlDeviceGetGpuInstances", uuid, rc));
    if (count == 0) continue;
    Result<std::string> name =
        catalog_profile_for(catalog, profile.sliceCount, profile.memorySizeMB);
    if (!name) {
      return fail(name.error().code, fmt::format("GPU {}: NVML GPU-instance profile {}: {}", uuid,
                                                 profile.id, name.error().message));
    }
    for (unsigned i = 0; i < std::min<unsigned>(count, profile.instanceCount); ++i) {
      nvmlGpuInstanceInfo_t info = {};
      rc = api.gpu_instance_info(instances[i], &info);
      if (rc != NVML_SUCCESS) return fail(api.failure("nvmlGpuInstanceGetInfo", uuid, rc));
      out.push_back({.id = info.id,
                     .placed = {.profile = *name, .start = static_cast<int>(info.placement.start)},
                     .handle = instances[i],
                     .slices = profile.sliceCount});
    }
  }
  std::sort(out.begin(), out.end(), [](const ListedInstance& a, const ListedInstance& b) {
    return a.placed.start < b.placed.start;
  });
  return out;
}

NvLinks nvlinks(const NvmlApi& api, nvmlDevice_t device) {
  NvLinks out;
  if (api.nvlink_state == nullptr) return out;
  // Every link is probed: links may be absent or failing individually, and the topology is
  // advisory, so a link that cannot be read counts as down.
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    nvmlReturn_t rc = api.nvlink_state(device, link, &active);
    if (rc == NVML_ERROR_NOT_SUPPORTED && link == 0) break;  // no NVLink on this GPU
    if (rc != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
    if (api.nvlink_remote_type != nullptr) {
      nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      if (api.nvlink_remote_type(device, link, &type) == NVML_SUCCESS &&
          type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
        out.switch_attached = true;
        continue;
      }
    }
    if (api.nvlink_remote_pci != nullptr) {
      nvmlPciInfo_t pci = {};
      if (api.nvlink_remote_pci(device, link, &pci) == NVML_SUCCESS) {
        out.remote_bus_ids.insert(format_pci_bus_id(pci.domain, pci.bus, pci.device, 0));
      }
    }
  }
  return out;
}

}  // namespace

Result<std::vector<fleet::GpuInfo>> Nvml::discover() {
  std::vector<fleet::GpuInfo> gpus;
  std::vector<NvLinks> links;
  for (const Device& device : GP_TRY(devices())) {
    const std::string& uuid = device.uuid;
    fleet::GpuInfo gpu;
    gpu.uuid = uuid;
    gpu.index = device.index;
    gpu.product = GP_TRY(product_name(*api_, device.handle, uuid));
    gpu.model = fleet::canonical_model(gpu.product);

    nvmlMemory_t memory = {};
    if (nvmlReturn_t rc = api_->memory_info(device.handle, &memory); rc != NVML_SUCCESS) {
      return fail(api_->failure("nvmlDeviceGetMemoryInfo", uuid, rc));
    }
    gpu.memory_bytes = static_cast<int64_t>(memory.total);

    nvmlPciInfo_t pci = {};
    if (nvmlReturn_t rc = api_->pci_info(device.handle, &pci); rc != NVML_SUCCESS) {
      return fail(api_->failure("nvmlDeviceGetPciInfo_v3", uuid, rc));
    }
    gpu.pci_bus_id = format_pci_bus_id(pci.domain, pci.bus, pci.device, 0);

    if (api_->numa_node != nullptr) {
      unsigned node = 0;
      const nvmlReturn_t rc = api_->numa_node(device.handle, &node);
      if (rc == NVML_SUCCESS) {
        gpu.numa_node = static_cast<int>(node);
      } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
        return fail(api_->failure("nvmlDeviceGetNumaNodeId", uuid, rc));
      }
    }

    const MigState mig = GP_TRY(mig_state(*api_, device.handle, uuid));
    gpu.mig_capable = mig.capable;
    gpu.mode = mig.enabled ? fleet::GpuMode::kMig : fleet::GpuMode::kWhole;
    if (mig.enabled) {
      const vocab::MigCatalog* catalog = GP_TRY(catalog_of(gpu.product, uuid));
      for (ListedInstance& instance :
           GP_TRY(list_instances(*api_, device.handle, uuid, *catalog))) {
        gpu.mig_instances.push_back(std::move(instance.placed));
      }
      if (Result<void> valid = vocab::validate(*catalog, gpu.mig_instances); !valid) {
        return fail(
            Error::internal(fmt::format("GPU {} reports a MIG layout the {} catalog rejects: {}",
                                        uuid, catalog->model, valid.error().message)));
      }
    }

    if (api_->total_ecc_errors != nullptr) {
      unsigned long long count = 0;
      const nvmlReturn_t rc = api_->total_ecc_errors(
          device.handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &count);
      if (rc == NVML_SUCCESS) {
        gpu.health.ecc_uncorrected = static_cast<int64_t>(count);
      } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
        return fail(api_->failure("nvmlDeviceGetTotalEccErrors", uuid, rc));
      }
    }

    links.push_back(nvlinks(*api_, device.handle));
    gpus.push_back(std::move(gpu));
  }

  // NVLink peers among the GPUs found: direct links by bus id, NVSwitch fabric by membership.
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (i == j) continue;
      const bool direct = links[i].remote_bus_ids.contains(gpus[j].pci_bus_id);
      const bool fabric = links[i].switch_attached && links[j].switch_attached;
      if (direct || fabric) gpus[i].nvlink_peers.push_back(gpus[j].uuid);
    }
    std::sort(gpus[i].nvlink_peers.begin(), gpus[i].nvlink_peers.end());
  }
  return gpus;
}

namespace {

// An optional reading: the value when NVML gives it, else -1 (absent entry point, "not
// supported", no permission, ...); Nvml::sample() documents why these never fail the sample.
template <typename Value, typename Call>
int64_t optional_reading(const Call& call) {
  Value value{};
  return call(&value) == NVML_SUCCESS ? static_cast<int64_t>(value) : -1;
}

// Memory of a GPU or MIG device into `sample`: through _v2 where the driver has it, so that
// `used` leaves out what the driver reserves (as nvidia-smi and DCGM report it), else v1.
nvmlReturn_t read_memory(const NvmlApi& api, nvmlDevice_t device, Nvml::Sample& sample) {
  if (api.memory_info_v2 != nullptr) {
    nvmlMemory_v2_t memory = {.version = nvmlMemory_v2};
    const nvmlReturn_t rc = api.memory_info_v2(device, &memory);
    if (rc == NVML_SUCCESS) {
      sample.mem_used_bytes = static_cast<int64_t>(memory.used);
      sample.mem_reserved_bytes = static_cast<int64_t>(memory.reserved);
      sample.mem_total_bytes = static_cast<int64_t>(memory.total);
      return rc;
    }
    if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH) return rc;
  }
  nvmlMemory_t memory = {};
  const nvmlReturn_t rc = api.memory_info(device, &memory);
  if (rc == NVML_SUCCESS) {
    sample.mem_used_bytes = static_cast<int64_t>(memory.used);
    sample.mem_total_bytes = static_cast<int64_t>(memory.total);
  }
  return rc;
}

// The board-wide figures of a whole GPU (Nvml::Sample).
void read_board(const NvmlApi& api, nvmlDevice_t device, Nvml::Sample& sample) {
  if (api.power_usage != nullptr) {
    sample.power_mw =
        optional_reading<unsigned>([&](unsigned* mw) { return api.power_usage(device, mw); });
  }
  if (api.total_energy != nullptr) {
    sample.energy_mj = optional_reading<unsigned long long>(
        [&](unsigned long long* mj) { return api.total_energy(device, mj); });
  }
  if (api.temperature != nullptr) {
    sample.temperature_c = static_cast<int>(optional_reading<unsigned>(
        [&](unsigned* c) { return api.temperature(device, NVML_TEMPERATURE_GPU, c); }));
  }
  if (api.clock_info != nullptr) {
    sample.sm_clock_mhz = static_cast<int>(optional_reading<unsigned>(
        [&](unsigned* mhz) { return api.clock_info(device, NVML_CLOCK_SM, mhz); }));
  }
  if (api.total_ecc_errors != nullptr) {
    const auto ecc = [&](nvmlMemoryErrorType_t type) {
      return optional_reading<unsigned long long>([&](unsigned long long* count) {
        return api.total_ecc_errors(device, type, NVML_VOLATILE_ECC, count);
      });
    };
    sample.ecc_corrected = ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED);
    sample.ecc_uncorrected = ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
  }
}

}  // namespace

Result<std::vector<Nvml::Sample>> Nvml::sample() {
  std::vector<Sample> out;
  for (const Device& device : GP_TRY(devices())) {
    const std::string& uuid = device.uuid;
    Sample whole{.gpu_uuid = uuid};
    nvmlUtilization_t utilization = {};
    nvmlReturn_t rc = api_->utilization(device.handle, &utilization);
    if (rc == NVML_SUCCESS) {
      whole.util_pct = static_cast<int>(utilization.gpu);
      whole.mem_util_pct = static_cast<int>(utilization.memory);
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      return fail(api_->failure("nvmlDeviceGetUtilizationRates", uuid, rc));
    }
    rc = read_memory(*api_, device.handle, whole);
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) {
      return fail(api_->failure("nvmlDeviceGetMemoryInfo", uuid, rc));
    }
    read_board(*api_, device.handle, whole);
    out.push_back(std::move(whole));

    const MigState mig = GP_TRY(mig_state(*api_, device.handle, uuid));
    if (!mig.enabled || api_->max_mig_device_count == nullptr ||
        api_->mig_device_by_index == nullptr || api_->gpu_instance_id == nullptr) {
      continue;
    }
    const std::string product = GP_TRY(product_name(*api_, device.handle, uuid));
    const vocab::MigCatalog* catalog = GP_TRY(catalog_of(product, uuid));
    std::map<unsigned, std::string> labels;  // GPU instance ID -> "<profile>@<start>"
    for (const ListedInstance& instance :
         GP_TRY(list_instances(*api_, device.handle, uuid, *catalog))) {
      labels[instance.id] = vocab::instance_label(instance.placed);
    }
    unsigned max_devices = 0;
    rc = api_->max_mig_device_count(device.handle, &max_devices);
    if (rc != NVML_SUCCESS) return fail(api_->failure("nvmlDeviceGetMaxMigDeviceCount", uuid, rc));
    std::set<unsigned> sampled;
    for (unsigned i = 0; i < max_devices; ++i) {
      nvmlDevice_t mig_device = nullptr;
      rc = api_->mig_device_by_index(device.handle, i, &mig_device);
      if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT) continue;  // empty
      if (rc != NVML_SUCCESS) {
        return fail(api_->failure("nvmlDeviceGetMigDeviceHandleByIndex", uuid, rc));
      }
      unsigned instance_id = 0;
      rc = api_->gpu_instance_id(mig_device, &instance_id);
      if (rc != NVML_SUCCESS) return fail(api_->failure("nvmlDeviceGetGpuInstanceId", uuid, rc));
      auto label = labels.find(instance_id);
      // An instance created since the listing is sampled on the next call.
      if (label == labels.end() || !sampled.insert(instance_id).second) continue;
      Sample part{.gpu_uuid = uuid, .mig_instance = label->second};
      rc = api_->utilization(mig_device, &utilization);
      if (rc == NVML_SUCCESS) part.util_pct = static_cast<int>(utilization.gpu);
      read_memory(*api_, mig_device, part);  // -1 when the MIG device does not say
      out.push_back(std::move(part));
    }
  }
  return out;
}

Result<std::map<std::string, std::vector<int>>> Nvml::poll_xid_events() {
  if (api_->event_set_create == nullptr || api_->register_events == nullptr ||
      api_->event_set_wait == nullptr) {
    return fail(Error::unavailable("the NVIDIA driver lacks the NVML event API (XID reporting)"));
  }
  MutexLock lock(events_mu_);
  if (event_set_ == nullptr) {
    nvmlEventSet_t set = nullptr;
    if (nvmlReturn_t rc = api_->event_set_create(&set); rc != NVML_SUCCESS) {
      return fail(api_->failure("nvmlEventSetCreate", "this node", rc));
    }
    event_set_ = set;
  }
  auto* set = static_cast<nvmlEventSet_t>(event_set_);

  for (const Device& device : GP_TRY(devices())) {
    if (registered_uuids_.contains(device.uuid)) continue;
    const nvmlReturn_t rc =
        api_->register_events(device.handle, nvmlEventTypeXidCriticalError, set);
    if (rc == NVML_SUCCESS) {
      event_uuids_[device.handle] = device.uuid;
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      return fail(api_->failure("nvmlDeviceRegisterEvents", device.uuid, rc));
    }
    registered_uuids_.insert(device.uuid);  // not retried when unsupported
  }

  std::map<std::string, std::vector<int>> out;
  for (int n = 0; n < kMaxEventsPerPoll; ++n) {
    nvmlEventData_t data = {};
    const nvmlReturn_t rc = api_->event_set_wait(set, &data, 0);
    if (rc == NVML_ERROR_TIMEOUT) break;  // drained
    if (rc != NVML_SUCCESS) return fail(api_->failure("nvmlEventSetWait_v2", "this node", rc));
    if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
    std::string uuid;
    if (auto known = event_uuids_.find(data.device); known != event_uuids_.end()) {
      uuid = known->second;
    } else {
      char buffer[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (nvmlReturn_t urc = api_->uuid(data.device, buffer, sizeof buffer); urc != NVML_SUCCESS) {
        return fail(api_->failure("nvmlDeviceGetUUID", "an XID event's GPU", urc));
      }
      uuid = from_buffer(buffer);
    }
    out[uuid].push_back(static_cast<int>(data.eventData));
  }
  return out;
}

Result<std::vector<Nvml::ProfileInfo>> Nvml::gpu_instance_profiles(int index) {
  for (const Device& device : GP_TRY(devices())) {
    if (device.index != index) continue;
    std::vector<ProfileInfo> out;
    const MigState mig = GP_TRY(mig_state(*api_, device.handle, device.uuid));
    if (!mig.enabled) return out;
    const std::string product = GP_TRY(product_name(*api_, device.handle, device.uuid));
    Result<const vocab::MigCatalog*> catalog = catalog_of(product, device.uuid);
    for (const nvmlGpuInstanceProfileInfo_t& info :
         GP_TRY(list_profiles(*api_, device.handle, device.uuid))) {
      ProfileInfo profile{.nvml_profile_id = info.id,
                          .slice_count = info.sliceCount,
                          .memory_mb = info.memorySizeMB,
                          .max_instances = info.instanceCount};
      if (catalog) {
        profile.catalog_profile =
            catalog_profile_for(**catalog, info.sliceCount, info.memorySizeMB).value_or("");
      }
      out.push_back(std::move(profile));
    }
    return out;
  }
  return fail(Error::not_found(fmt::format("no GPU with NVML index {}", index)));
}

// ---- MIG configuration

namespace {

// The compute-instance profile index that spans a GPU instance of `slices` compute slices.
std::optional<unsigned> full_compute_profile(unsigned slices) {
  switch (slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6:
      return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 7:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
    case 8:
      return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default:
      return std::nullopt;
  }
}

// A refusal of a configuration call: "in use" and "no room" are conflicts, a refused argument
// (a placement the GPU does not offer) is invalid, the rest as any NVML failure.
Error refused(const NvmlApi& api, std::string_view call, std::string_view subject,
              nvmlReturn_t rc) {
  Error e = api.failure(call, subject, rc);
  if (rc == NVML_ERROR_IN_USE || rc == NVML_ERROR_INSUFFICIENT_RESOURCES) {
    e.code = ErrorCode::kConflict;
  } else if (rc == NVML_ERROR_INVALID_ARGUMENT) {
    e.code = ErrorCode::kInvalidArgument;
  }
  return e;
}

// The compute instances of a GPU instance, over every compute-instance profile.
Result<std::vector<nvmlComputeInstance_t>> compute_instances_of(const NvmlApi& api,
                                                                nvmlGpuInstance_t gi,
                                                                std::string_view subject) {
  std::vector<nvmlComputeInstance_t> out;
  for (unsigned index = 0; index < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++index) {
    nvmlComputeInstanceProfileInfo_t info = {};
    nvmlReturn_t rc =
        api.compute_profile_info(gi, index, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT ||
        rc == NVML_ERROR_NOT_FOUND) {
      continue;
    }
    if (rc != NVML_SUCCESS) {
      return fail(api.failure("nvmlGpuInstanceGetComputeInstanceProfileInfo", subject, rc));
    }
    if (info.instanceCount == 0) continue;
    std::vector<nvmlComputeInstance_t> found(info.instanceCount);
    unsigned count = 0;
    rc = api.compute_instances(gi, info.id, found.data(), &count);
    if (rc != NVML_SUCCESS) {
      return fail(api.failure("nvmlGpuInstanceGetComputeInstances", subject, rc));
    }
    out.insert(out.end(), found.begin(), found.begin() + std::min(count, info.instanceCount));
  }
  return out;
}

// The catalog of a GPU that may be configured now: the driver has the configuration calls and
// the GPU is in MIG mode.
Result<const vocab::MigCatalog*> configurable(const NvmlApi& api, nvmlDevice_t device,
                                              const std::string& uuid) {
  if (!api.has_mig_configuration()) {
    return fail(Error::unavailable(
        fmt::format("the NVIDIA driver lacks the MIG configuration calls (GPU {})", uuid)));
  }
  if (!GP_TRY(mig_state(api, device, uuid)).enabled) {
    return fail(Error::conflict(fmt::format("GPU {} is not in MIG mode", uuid)));
  }
  return catalog_of(GP_TRY(product_name(api, device, uuid)), uuid);
}

// "3g.71gb@4 on GPU GPU-...": what the configuration calls' errors name.
std::string on_gpu(const vocab::PlacedInstance& instance, const std::string& uuid) {
  return fmt::format("{} on GPU {}", vocab::instance_label(instance), uuid);
}

// An existing GPU instance of a GPU that may be configured now (configurable()).
Result<ListedInstance> find_instance(const NvmlApi& api, nvmlDevice_t device,
                                     const std::string& uuid, const vocab::PlacedInstance& wanted) {
  const vocab::MigCatalog* catalog = GP_TRY(configurable(api, device, uuid));
  for (ListedInstance& i : GP_TRY(list_instances(api, device, uuid, *catalog)))
    if (i.placed == wanted) return std::move(i);
  return fail(Error::not_found(
      fmt::format("GPU {} has no GPU instance {}", uuid, vocab::instance_label(wanted))));
}

}  // namespace

Result<Nvml::Device> Nvml::device(const std::string& uuid) {
  for (Device& d : GP_TRY(devices()))
    if (d.uuid == uuid) return std::move(d);
  return fail(Error::not_found(fmt::format("no GPU {} on this node", uuid)));
}

Result<Nvml::MigView> Nvml::mig_view(const std::string& uuid) {
  const Device d = GP_TRY(device(uuid));
  const MigState mode = GP_TRY(mig_state(*api_, d.handle, uuid));
  MigView view{.capable = mode.capable, .enabled = mode.enabled};
  if (!mode.capable) return view;
  unsigned current = 0;
  unsigned pending = 0;
  if (api_->mig_mode(d.handle, &current, &pending) == NVML_SUCCESS)
    view.pending_change = current != pending;
  if (!mode.enabled) return view;
  const vocab::MigCatalog* catalog =
      GP_TRY(catalog_of(GP_TRY(product_name(*api_, d.handle, uuid)), uuid));
  const bool sees_compute = api_->compute_profile_info && api_->compute_instances;
  for (const ListedInstance& i : GP_TRY(list_instances(*api_, d.handle, uuid, *catalog))) {
    view.layout.push_back(i.placed);
    const std::string subject = on_gpu(i.placed, uuid);
    if (sees_compute && GP_TRY(compute_instances_of(*api_, i.handle, subject)).empty())
      view.without_compute.push_back(i.placed);
  }
  return view;
}

Result<void> Nvml::create_gpu_instance(const std::string& uuid,
                                       const vocab::PlacedInstance& instance) {
  const Device d = GP_TRY(device(uuid));
  const vocab::MigCatalog* catalog = GP_TRY(configurable(*api_, d.handle, uuid));
  const auto profile =
      std::ranges::find(catalog->profiles, instance.profile, &vocab::MigProfile::name);
  if (profile == catalog->profiles.end()) {
    return fail(Error::invalid(
        fmt::format("{} has no MIG profile {} (GPU {})", catalog->model, instance.profile, uuid)));
  }
  const std::string subject = on_gpu(instance, uuid);
  // NVML's profile of that name: the first profile index the catalog names so (a base profile
  // comes before its +me variant).
  for (const nvmlGpuInstanceProfileInfo_t& info : GP_TRY(list_profiles(*api_, d.handle, uuid))) {
    if (catalog_profile_for(*catalog, info.sliceCount, info.memorySizeMB).value_or("") !=
        instance.profile) {
      continue;
    }
    const nvmlGpuInstancePlacement_t placement{
        .start = static_cast<unsigned>(instance.start),
        .size = static_cast<unsigned>(profile->memory_slices)};
    nvmlGpuInstance_t created = nullptr;
    if (nvmlReturn_t rc = api_->create_gpu_instance(d.handle, info.id, &placement, &created);
        rc != NVML_SUCCESS) {
      return fail(refused(*api_, "nvmlDeviceCreateGpuInstanceWithPlacement", subject, rc));
    }
    return ok();
  }
  return fail(Error::not_found(
      fmt::format("NVML offers no GPU-instance profile {} on GPU {}", instance.profile, uuid)));
}

Result<void> Nvml::create_compute_instance(const std::string& uuid,
                                           const vocab::PlacedInstance& instance) {
  const Device d = GP_TRY(device(uuid));
  const ListedInstance gi = GP_TRY(find_instance(*api_, d.handle, uuid, instance));
  const std::string subject = on_gpu(instance, uuid);
  const std::optional<unsigned> index = full_compute_profile(gi.slices);
  if (!index) {
    return fail(Error::internal(
        fmt::format("no compute-instance profile spans the {} slices of {}", gi.slices, subject)));
  }
  nvmlComputeInstanceProfileInfo_t info = {};
  nvmlReturn_t rc = api_->compute_profile_info(gi.handle, *index,
                                               NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
  if (rc != NVML_SUCCESS) {
    return fail(api_->failure("nvmlGpuInstanceGetComputeInstanceProfileInfo", subject, rc));
  }
  nvmlComputeInstance_t created = nullptr;
  rc = api_->create_compute_instance(gi.handle, info.id, &created);
  if (rc != NVML_SUCCESS) {
    return fail(refused(*api_, "nvmlGpuInstanceCreateComputeInstance", subject, rc));
  }
  return ok();
}

Result<void> Nvml::destroy_gpu_instance(const std::string& uuid,
                                        const vocab::PlacedInstance& instance) {
  const Device d = GP_TRY(device(uuid));
  const ListedInstance gi = GP_TRY(find_instance(*api_, d.handle, uuid, instance));
  const std::string subject = on_gpu(instance, uuid);
  for (nvmlComputeInstance_t ci : GP_TRY(compute_instances_of(*api_, gi.handle, subject))) {
    if (nvmlReturn_t rc = api_->destroy_compute_instance(ci); rc != NVML_SUCCESS)
      return fail(refused(*api_, "nvmlComputeInstanceDestroy", subject, rc));
  }
  if (nvmlReturn_t rc = api_->destroy_gpu_instance(gi.handle); rc != NVML_SUCCESS)
    return fail(refused(*api_, "nvmlGpuInstanceDestroy", subject, rc));
  return ok();
}

Result<bool> Nvml::set_mig_mode(const std::string& uuid, bool enabled) {
  const Device d = GP_TRY(device(uuid));
  if (api_->set_mig_mode == nullptr) {
    return fail(Error::unavailable(
        fmt::format("the NVIDIA driver lacks nvmlDeviceSetMigMode (GPU {})", uuid)));
  }
  nvmlReturn_t activation = NVML_SUCCESS;
  const nvmlReturn_t rc = api_->set_mig_mode(
      d.handle, enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE, &activation);
  if (rc != NVML_SUCCESS)
    return fail(refused(*api_, "nvmlDeviceSetMigMode", fmt::format("GPU {}", uuid), rc));
  return activation == NVML_SUCCESS;
}

}  // namespace gp::agent
