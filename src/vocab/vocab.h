// Vocabulary: the terms every layer of gpuplane shares, and nothing else. Tenant isolation
// classes, the tiers allocations get GPUs in and the rule tying them (docs/isolation.md), the
// modes a GPU can be in, the exact integer units quota and usage are kept in with the resource
// keys that name them, and the MIG catalog with its geometry (which GPU instances NVIDIA allows
// on one GPU, where they go, which layout keeps the most room). Pure: no I/O, no store, no HTTP;
// it depends on common alone, and the scheduler, fleet, policy, tenancy, metering and the rest
// name these terms from here. Public header of the vocab module.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gp::vocab {

// ---- isolation classes, tiers, GPU modes ----

// A tenant's isolation class, weakest demands first.
enum class IsolationClass : uint8_t { kInternal, kStandard, kSensitive, kRegulated };
// Each class's name, at its value's index.
inline constexpr std::array<std::string_view, 4> kClassNames = {"internal", "standard", "sensitive",
                                                                "regulated"};
std::string_view class_name(IsolationClass c);  // "internal", "standard", ...
std::optional<IsolationClass> parse_class(std::string_view name);

// How an allocation gets GPUs, strongest first.
enum class Tier : uint8_t { kDedicatedPool, kDedicatedNode, kDedicatedGpu, kMig, kShared };
// Each tier's name, at its value's index.
inline constexpr std::array<std::string_view, 5> kTierNames = {"dedicated-pool", "dedicated-node",
                                                               "dedicated-gpu", "mig", "shared"};
std::string_view tier_name(Tier tier);  // "dedicated-pool", ..., "shared"
std::optional<Tier> parse_tier(std::string_view name);

// The weakest tier a class may receive: internal -> shared, standard -> mig,
// sensitive -> dedicated-gpu, regulated -> dedicated-node.
Tier weakest_tier(IsolationClass c);
bool class_allows(IsolationClass c, Tier tier);

// A GPU is in one mode at a time.
enum class GpuMode : uint8_t { kWhole, kMig, kTimeSliced };
// Each mode's name, at its value's index.
inline constexpr std::array<std::string_view, 3> kGpuModeNames = {"whole", "mig", "time-sliced"};
std::string_view gpu_mode_name(GpuMode mode);  // "whole", "mig", "time-sliced"
std::optional<GpuMode> parse_gpu_mode(std::string_view name);

// ---- units: quota and usage are exact integers ----
// 1 GPU = 7000 units, a MIG instance of k compute slices (of 7) = 1000 * k, a share of m
// milli-GPU = 7 * m. So a 7g and a 1g instance are never counted alike, and nothing rounds.
inline constexpr int64_t kUnitsPerGpu = 7000;
constexpr int64_t gpu_units(int64_t gpus) { return gpus * kUnitsPerGpu; }
constexpr int64_t mig_units(int compute_slices) { return int64_t{1000} * compute_slices; }
constexpr int64_t shared_units(int milli) { return int64_t{7} * milli; }
std::string gpu_resource_key(std::string_view model);                            // gpu/H200
std::string mig_resource_key(std::string_view model, std::string_view profile);  // mig/H200/1g.18gb
std::string milli_resource_key(std::string_view model);                          // gpu-milli/H200
// "2.5 GPU" style rendering of units for messages.
std::string format_units(int64_t units);

// ---- MIG catalog: the GPU-instance profiles NVIDIA's MIG user guide lists for each
// MIG-capable model gpuplane supports, with their compute and memory slices and the placements
// the driver accepts ----

// Slices of a MIG-capable GPU of the A100 / H100 / H200 families. A GPU-instance profile takes
// a whole number of each; placements are counted in memory slices.
inline constexpr int kMigComputeSlices = 7;
inline constexpr int kMigMemorySlices = 8;

// One GPU-instance profile ("3g.71gb") as `nvidia-smi mig -lgip` / `-lgipp` report it.
struct MigProfile {
  std::string name;
  int compute_slices = 0;  // of MigCatalog::compute_slices; 1g=1 ... 7g=7
  int memory_slices = 0;   // of MigCatalog::memory_slices; also the placement size
  int max_instances = 0;   // "Number of Instances Available" on an otherwise empty GPU
  // Valid placement starts, in memory-slice units, ascending. An instance placed at `s` holds
  // memory slices [s, s + memory_slices).
  std::vector<int> starts;

  friend bool operator==(const MigProfile&, const MigProfile&) = default;
};

// Every GPU-instance profile of one GPU model. `+me` (media extension) variants are not
// listed: they share the geometry of their base profile and gpuplane does not sell them.
struct MigCatalog {
  std::string model;  // canonical name, e.g. "H200-141GB"
  int compute_slices = kMigComputeSlices;
  int memory_slices = kMigMemorySlices;  // at most 32 (geometry keeps them in a bit mask)
  // Largest first (by compute slices, then memory slices). plan() below ranks the
  // room a layout leaves free in this order, so a catalog built by hand must keep it.
  std::vector<MigProfile> profiles;

  // The profile named exactly `name` (e.g. "2g.35gb"), or nullptr.
  const MigProfile* find(std::string_view name) const;

  // GPU-equivalents of one instance: compute slices / compute slices of the GPU, the unit quota
  // is kept in (DESIGN.md, "Resources and quota"). For exact accounting use the integer
  // `compute_slices` of the profile and of the catalog instead of this double.
  double gpu_equivalents(const MigProfile& profile) const {
    return static_cast<double>(profile.compute_slices) / compute_slices;
  }
};

// Catalogs of every supported model, in a fixed order: A100-40GB, A100-80GB, H100-80GB,
// H200-141GB. Static storage: references and pointers stay valid for the whole program.
const std::vector<MigCatalog>& mig_catalogs();

// The catalog for a GPU model named as an operator or NVML would name it. Matching ignores
// case, a leading "NVIDIA", and spaces, dashes and underscores, and accepts the common product
// names: "H200", "NVIDIA H200", "H200-141GB", "A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB",
// "A100-PCIE-40GB", "NVIDIA A100 80GB PCIe", "H100-80GB", "NVIDIA H100 80GB HBM3",
// "H100-SXM5-80GB", "NVIDIA H100 PCIe". A bare "A100" or "H100" is refused: each names models
// with different geometry. Unknown names give a not_found Error listing the supported models.
Result<const MigCatalog*> mig_catalog(std::string_view model);

// ---- MIG geometry: which sets of GPU instances one GPU can hold at once, where the next
// instance of a profile may go, and which layout to choose so the largest profiles stay free.
// Pure functions over a MigCatalog ----

// One GPU instance on a GPU: its profile and its placement start in memory slices.
struct PlacedInstance {
  std::string profile;
  int start = 0;

  friend bool operator==(const PlacedInstance&, const PlacedInstance&) = default;
  friend auto operator<=>(const PlacedInstance&, const PlacedInstance&) = default;
};

// "<profile>@<start>", e.g. "3g.71gb@4": how samples, usage and reports name an instance.
std::string instance_label(const PlacedInstance& instance);

// The GPU instances of one GPU, in no required order. Functions that build a layout return it
// sorted by start (instances of a valid layout never share a start).
using Layout = std::vector<PlacedInstance>;

// A layout is valid when every instance names a profile of the catalog at one of its
// placement starts, no profile exceeds its max_instances, the compute slices add up to at most
// the GPU's, and no two instances share a memory slice. Checks run instance by instance in
// layout order; the error (invalid_argument) names the first offending instance by its 0-based
// position, profile and start, and for an overlap the earlier instance it collides with. Count
// and compute limits are reported before overlaps: moving instances cannot cure them.
Result<void> validate(const MigCatalog& catalog, const Layout& layout);

// Starts, ascending, at which one more instance of `profile` could be added to `current` so the
// result is still valid. Empty when none, when the profile is unknown, or when `current` is
// itself invalid.
std::vector<int> placements(const MigCatalog& catalog, const Layout& current,
                            std::string_view profile);

// The room `layout` leaves free, the score plan() maximizes. Entry i is how many more instances
// of catalog.profiles[i] (largest first) would fit if only that profile were added. Compared
// lexicographically, a larger vector keeps a larger profile placeable, or more instances of the
// largest placeable one, and so on down the profiles. All zeros when `layout` is invalid.
std::vector<int> free_capacity(const MigCatalog& catalog, const Layout& layout);

// A valid layout holding exactly the requested instances (one profile name per instance, any
// order), sorted by start. Among all valid layouts for the request it picks the one with the
// greatest free_capacity(); ties go to the layout placed highest on the memory slices (starts
// compared largest profile first), which keeps slice 0, where every large profile starts, free.
// So a single 1g.18gb on an empty H200 goes to start 6: a 4g.71gb, a 3g.71gb and three 2g.35gb
// still fit beside it. Errors (invalid_argument): an unknown profile; more instances of a
// profile than it allows; more compute or memory slices in total than the GPU has; or no
// arrangement of the placements holds them together.
Result<Layout> plan(const MigCatalog& catalog, const std::vector<std::string>& requested_profiles);

// `current` plus one instance of `profile`, placed without moving existing instances at the
// start that maximizes free_capacity() (ties: the highest start). Existing instances keep their
// order; the new one is appended. Errors: invalid_argument when `current` is invalid or the
// profile unknown; conflict, with the reason, when the GPU has no room for it.
Result<Layout> plan_addition(const MigCatalog& catalog, const Layout& current,
                             std::string_view profile);

// Every valid layout, the empty one included, each sorted by start, in a fixed order. For the
// A100 / H100 / H200 geometry there are 723 (the 4 memory slices of each half of the GPU are
// used independently: 38 ways on the low half times 19 on the high half, plus the 7g).
std::vector<Layout> enumerate_layouts(const MigCatalog& catalog);

}  // namespace gp::vocab
