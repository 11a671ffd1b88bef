// MIG catalog: the GPU-instance profiles NVIDIA's MIG user guide lists for each MIG-capable GPU
// model gpuplane supports, with their compute and memory slices and the placements the driver
// accepts. Pure data and lookups; what fits where on one GPU lives in mig_geometry.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gp::fleet {

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
  // Largest first (by compute slices, then memory slices). plan() in mig_geometry.h ranks the
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

}  // namespace gp::fleet
