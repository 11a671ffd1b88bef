// GPU discovery and monitoring through NVML, loaded at run time with dlopen so that gpuplane
// builds and runs on machines without CUDA or the NVIDIA driver. Fills the shared inventory
// structs (fleet/inventory.h) and reports utilization and XID errors. The only calls that change
// a GPU are the MIG configuration primitives at the end of the class, which the agent's MIG
// applier (agent/mig.h) alone makes; nothing here touches clocks, persistence or resets.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/thread_safety.h"
#include "fleet/inventory.h"
#include "vocab/vocab.h"

namespace gp::agent {

// "DDDDDDDD:BB:DD.F" in upper-case hex, the form NVML's busId and `nvidia-smi` use,
// e.g. format_pci_bus_id(0, 0x18, 0, 0) == "00000000:18:00.0".
std::string format_pci_bus_id(unsigned domain, unsigned bus, unsigned device, unsigned function);

// The catalog profile an NVML GPU-instance profile corresponds to. NVML describes a profile by
// its compute slices (`sliceCount`) and memory (`memorySizeMB`, in MiB, somewhat below the
// nominal size in the profile name: H200's 1g.18gb has about 16-18 GiB). Among the catalog's
// profiles with `slice_count` compute slices, the one whose nominal memory (the N of "...gN gb",
// in GB) is nearest to `memory_mb` by ratio wins, provided it is within a factor of 1.3 (sizes
// of same-slice profiles differ by 2x). "+me" variants map to their base profile, which has
// the same geometry. Errors: invalid_argument for zero slices or memory; not_found when no
// profile matches.
Result<std::string> catalog_profile_for(const vocab::MigCatalog& catalog, unsigned slice_count,
                                        unsigned long long memory_mb);

struct NvmlApi;  // the resolved NVML entry points (nvml.cpp)

// Resolves an NVML entry point by symbol name, or returns nullptr when absent.
using NvmlSymbolLookup = std::function<void*(const char* symbol)>;

// An initialized NVML session. open() loads the library and calls nvmlInit_v2; the destructor
// frees the event set, calls nvmlShutdown and unloads the library. Methods may be called from
// several threads (NVML is thread-safe; the event state is guarded here).
//
// Entry points are resolved when the session opens. The basic queries (count, handles, name,
// UUID, memory, PCI, utilization) are required; the rest (NUMA, MIG, NVLink, ECC, events) are
// optional and a driver without them is treated as lacking the feature.
class Nvml {
 public:
  // Errors: unavailable, with the reason, when the library cannot be loaded (no NVIDIA driver),
  // lacks a required entry point (driver too old), or nvmlInit_v2 fails (driver not loaded,
  // no permission, ...).
  static Result<std::unique_ptr<Nvml>> open(const std::string& library = "libnvidia-ml.so.1");

  // As open(), resolving entry points through `lookup` instead of a loaded library; the
  // session then unloads nothing. For tests, which supply a simulated NVML.
  static Result<std::unique_ptr<Nvml>> open_with(const NvmlSymbolLookup& lookup);

  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Every GPU this process may use, by NVML index (GPUs NVML denies access to are skipped).
  // Per GPU: UUID, product and canonical model, memory, PCI bus id, NUMA node (-1 unknown),
  // MIG capability and mode, the existing GPU instances with their placements when in MIG mode
  // (named with the model's MIG catalog), NVLink peers among the returned GPUs, and the
  // volatile uncorrected ECC count. NVLink peers: GPUs whose bus id is the far end of an active
  // link, plus, for GPUs with a link to an NVSwitch, every other GPU attached to an NVSwitch
  // (one NVSwitch fabric per node, as on HGX boards). xid_errors is left empty: XIDs come from
  // poll_xid_events().
  //
  // Errors: unavailable for NVML failures (with the call and NVML's message); for a GPU in MIG
  // mode, not_found when its model has no MIG catalog or one of its profiles maps to none, and
  // unavailable when NVML refuses to list GPU instances (root or the mig/monitor capability is
  // needed); internal when NVML's layout is invalid for the catalog.
  Result<std::vector<fleet::GpuInfo>> discover();

  // One reading of a GPU or GPU instance; -1 marks a figure NVML does not report for it (a
  // driver without the entry point, a GPU without the sensor, a GPU in MIG mode for utilization).
  // A GPU instance has only utilization (where the driver reports it) and memory: power, energy,
  // temperature, clocks and ECC belong to the board. Units are NVML's; each figure is one DCGM
  // exporter field, named beside it.
  struct Sample {
    std::string gpu_uuid;
    std::string mig_instance;         // "" for the whole GPU, else "<profile>@<start>"
    int util_pct = -1;                // busy time of the last sample period (DCGM_FI_DEV_GPU_UTIL)
    int mem_util_pct = -1;            // memory read/write busy time (DCGM_FI_DEV_MEM_COPY_UTIL)
    int64_t mem_used_bytes = -1;      // frame buffer used (DCGM_FI_DEV_FB_USED, in MiB there)
    int64_t mem_reserved_bytes = -1;  // held by the driver (DCGM_FI_DEV_FB_RESERVED)
    int64_t mem_total_bytes = -1;     // frame buffer size
    int64_t power_mw = -1;            // board power draw (DCGM_FI_DEV_POWER_USAGE, in W there)
    int64_t energy_mj = -1;        // since the driver loaded (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)
    int temperature_c = -1;        // GPU die (DCGM_FI_DEV_GPU_TEMP)
    int sm_clock_mhz = -1;         // SM clock now (DCGM_FI_DEV_SM_CLOCK)
    int64_t ecc_corrected = -1;    // volatile single-bit errors (DCGM_FI_DEV_ECC_SBE_VOL_TOTAL)
    int64_t ecc_uncorrected = -1;  // volatile double-bit errors (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)
  };
  // One sample per GPU, plus one per GPU instance of a GPU in MIG mode (a GPU instance split
  // into several compute instances is sampled once). Utilization and memory of a whole GPU are
  // required: an NVML failure other than "not supported" fails the call. The other figures are
  // optional and read as -1 when NVML cannot give them.
  Result<std::vector<Sample>> sample();

  // XID errors since the last call: GPU UUID -> XID codes in the order NVML delivered them.
  // The first call registers every GPU for critical XID events (GPUs that do not support them
  // are skipped); GPUs that appear later are registered when seen. Never blocks. Errors:
  // unavailable when the driver lacks the event API or NVML fails.
  Result<std::map<std::string, std::vector<int>>> poll_xid_events();

  // One NVML GPU-instance profile of a GPU, and what the catalog calls it.
  struct ProfileInfo {
    unsigned nvml_profile_id = 0;
    unsigned slice_count = 0;
    unsigned long long memory_mb = 0;
    unsigned max_instances = 0;
    std::string catalog_profile;  // "" when the model has no catalog or nothing matches
  };
  // The GPU-instance profiles NVML reports for the GPU at NVML `index` (empty when MIG is not
  // enabled or not supported). Diagnostic: shows the raw figures catalog_profile_for() maps.
  Result<std::vector<ProfileInfo>> gpu_instance_profiles(int index);

  // ---- MIG configuration: the primitives agent/mig.h composes. GPUs are named by UUID and
  // instances by catalog profile and start. Errors common to all: not_found for an unknown GPU
  // or (for a GPU in MIG mode) a model without a catalog; unavailable when the driver lacks the
  // entry point or NVML fails, with the call and NVML's message; conflict for NVML's "in use".

  // What a GPU's MIG configuration is now.
  struct MigView {
    bool capable = false;
    bool enabled = false;           // the current mode
    bool pending_change = false;    // the pending mode differs: a GPU reset would apply it
    vocab::Layout layout;           // its GPU instances, sorted by start
    vocab::Layout without_compute;  // those of them with no compute instance (unusable)
  };
  Result<MigView> mig_view(const std::string& uuid);

  // Creates the GPU instance `instance` at its placement (the catalog's size for the profile).
  // Errors as above; conflict when NVML answers that the slices are taken or the profile has no
  // room (insufficient resources), invalid_argument when it refuses the placement.
  Result<void> create_gpu_instance(const std::string& uuid, const vocab::PlacedInstance& instance);
  // Gives the GPU instance one compute instance spanning all its slices (CUDA sees it then).
  Result<void> create_compute_instance(const std::string& uuid,
                                       const vocab::PlacedInstance& instance);
  // Destroys the GPU instance's compute instances, then the GPU instance. not_found when there
  // is no such instance; conflict when a process still uses it (nothing more is destroyed).
  Result<void> destroy_gpu_instance(const std::string& uuid, const vocab::PlacedInstance& instance);
  // Sets the GPU's MIG mode. True when the mode is in effect now; false when NVML accepted it
  // but it takes effect only after a GPU reset (the activation status NVML returns).
  Result<bool> set_mig_mode(const std::string& uuid, bool enabled);

 private:
  struct Device;  // one enumerated GPU (nvml.cpp)

  Nvml(void* library, std::unique_ptr<NvmlApi> api);
  static Result<std::unique_ptr<Nvml>> start(void* library, const NvmlSymbolLookup& lookup,
                                             const std::string& what);

  Result<std::vector<Device>> devices();
  Result<Device> device(const std::string& uuid);

  void* library_;  // dlopen handle; nullptr when opened with a lookup
  std::unique_ptr<NvmlApi> api_;

  Mutex events_mu_;
  void* event_set_ GP_GUARDED_BY(events_mu_) = nullptr;  // nvmlEventSet_t
  std::set<std::string> registered_uuids_ GP_GUARDED_BY(events_mu_);
  std::map<void*, std::string> event_uuids_ GP_GUARDED_BY(events_mu_);  // nvmlDevice_t -> UUID
};

}  // namespace gp::agent
