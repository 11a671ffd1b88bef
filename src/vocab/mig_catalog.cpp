// The MIG catalog (vocab.h, "MIG catalog").
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cstddef>
#include <string>
#include <utility>

#include "vocab/vocab.h"

namespace gp::vocab {
namespace {

// A100, H100 and H200 share one geometry (7 compute slices, 8 memory slices, the same
// placements); only the memory in the profile names differs. `gb` lists the names' memory for
// the 1-, 2-, 4- and 8-memory-slice profiles, smallest first.
//
// Source: NVIDIA MIG user guide, "Supported MIG Profiles" (tables and placement diagrams for
// A100, H100, H200), and `nvidia-smi mig -lgipp` on those GPUs:
//   1g.<m1>  {0,1,2,3,4,5,6}:1  x7     1g.<m2>  {0,2,4,6}:2  x4     2g.<m2>  {0,2,4}:2  x3
//   3g.<m4>  {0,4}:4            x2     4g.<m4>  {0}:4        x1     7g.<m8>  {0}:8      x1
MigCatalog seven_slice_catalog(std::string model, const std::array<int, 4>& gb) {
  auto name = [](int compute, int memory_gb) {
    return fmt::format("{}g.{}gb", compute, memory_gb);
  };
  MigCatalog catalog;
  catalog.model = std::move(model);
  catalog.profiles = {
      {name(7, gb[3]), 7, 8, 1, {0}},          {name(4, gb[2]), 4, 4, 1, {0}},
      {name(3, gb[2]), 3, 4, 2, {0, 4}},       {name(2, gb[1]), 2, 2, 3, {0, 2, 4}},
      {name(1, gb[1]), 1, 2, 4, {0, 2, 4, 6}}, {name(1, gb[0]), 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
  };
  return catalog;
}

// Lower-case alphanumerics only, without a leading "nvidia": the form aliases are compared in.
std::string normalize_model(std::string_view model) {
  std::string out;
  for (char c : model) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  constexpr std::string_view kVendor = "nvidia";
  if (out.starts_with(kVendor)) out.erase(0, kVendor.size());
  return out;
}

struct Alias {
  std::string_view name;  // already normalized
  std::size_t catalog;    // index into mig_catalogs()
};

// Product names as operators write them and as NVML reports them (nvmlDeviceGetName), after
// normalize_model. A100-PCIE-40GB and the 80GB PCIe cards share their SXM siblings' MIG tables.
constexpr std::array kAliases = {
    Alias{"a10040gb", 0},     Alias{"a100sxm440gb", 0}, Alias{"a100pcie40gb", 0},
    Alias{"a10080gb", 1},     Alias{"a100sxm480gb", 1}, Alias{"a10080gbpcie", 1},
    Alias{"a100pcie80gb", 1}, Alias{"h10080gb", 2},     Alias{"h10080gbhbm3", 2},
    Alias{"h100sxm580gb", 2}, Alias{"h100sxm80gb", 2},  Alias{"h100pcie", 2},
    Alias{"h100pcie80gb", 2}, Alias{"h10080gbpcie", 2}, Alias{"h200", 3},
    Alias{"h200141gb", 3},    Alias{"h200sxm141gb", 3}, Alias{"h200141gbhbm3e", 3},
};

}  // namespace

const MigProfile* MigCatalog::find(std::string_view name) const {
  for (const MigProfile& profile : profiles) {
    if (profile.name == name) return &profile;
  }
  return nullptr;
}

const std::vector<MigCatalog>& mig_catalogs() {
  static const std::vector<MigCatalog> catalogs = {
      seven_slice_catalog("A100-40GB", {5, 10, 20, 40}),
      seven_slice_catalog("A100-80GB", {10, 20, 40, 80}),
      seven_slice_catalog("H100-80GB", {10, 20, 40, 80}),
      seven_slice_catalog("H200-141GB", {18, 35, 71, 141}),
  };
  return catalogs;
}

Result<const MigCatalog*> mig_catalog(std::string_view model) {
  const std::vector<MigCatalog>& catalogs = mig_catalogs();
  const std::string key = normalize_model(model);
  for (const Alias& alias : kAliases) {
    if (alias.name == key) return &catalogs[alias.catalog];
  }
  for (const MigCatalog& catalog : catalogs) {
    if (normalize_model(catalog.model) == key) return &catalog;
  }
  std::string supported;
  for (const MigCatalog& catalog : catalogs) {
    if (!supported.empty()) supported += ", ";
    supported += catalog.model;
  }
  return fail(Error::not_found(
      fmt::format("no MIG catalog for GPU model \"{}\"; supported: {}", model, supported)));
}

}  // namespace gp::vocab
