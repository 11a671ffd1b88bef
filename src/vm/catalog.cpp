// The vGPU catalog, derived from the MIG catalog so that the two can never disagree: every
// GPU-instance profile gpuplane sells as a container is also sold as a VM.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <string>
#include <utility>

#include "vm/vm.h"
#include "vocab/vocab.h"

namespace gp::vm {
namespace {

// Time-sliced types: the whole GPU, a half, a quarter and an eighth.
constexpr std::array kTimeSliceDivisors = {1, 2, 4, 8};

// The GB a MIG profile's name ends with: 71 for "3g.71gb"; 0 when the name has none.
int profile_gb(std::string_view profile) {
  const std::size_t dot = profile.find('.');
  if (dot == std::string_view::npos) return 0;
  int gb = 0;
  const char* begin = profile.data() + dot + 1;
  const char* end = profile.data() + profile.size();
  auto [ptr, ec] = std::from_chars(begin, end, gb);
  if (ec != std::errc() || std::string_view(ptr, end - ptr) != "gb") return 0;
  return gb;
}

// The prefix of a model's vGPU type names. NVIDIA names vGPU types after the short product name
// ("H200-141GB" -> "H200"), but the MIG catalog holds two A100 models with different memory:
// their types would collide (A100-40GB's 1g.10gb and A100-80GB's 1g.10gb would both be
// A100-1-10C, and the 1/2 share of the 80GB model would be the 1/1 share of the 40GB one). So a
// short name that more than one catalog model shares is not used: those models keep their full
// catalog name ("A100-40GB-1-5C", "A100-80GB-7-80C", "A100-80GB-40C"), and every type name names
// exactly one model. A short name held by one model ("H100", "H200") is used as is.
std::string vgpu_prefix(const vocab::MigCatalog& catalog) {
  auto short_name = [](std::string_view model) {
    return std::string(model.substr(0, model.find('-')));
  };
  const std::string mine = short_name(catalog.model);
  int sharing = 0;
  for (const vocab::MigCatalog& other : vocab::mig_catalogs()) {
    if (short_name(other.model) == mine) ++sharing;
  }
  return sharing > 1 ? catalog.model : mine;
}

// The GB of the whole GPU: the memory in the name of the profile that holds every memory slice
// (7g.141gb on an H200).
int catalog_total_gb(const vocab::MigCatalog& catalog) {
  int total = 0;
  for (const vocab::MigProfile& profile : catalog.profiles) {
    if (profile.memory_slices == catalog.memory_slices) {
      total = std::max(total, profile_gb(profile.name));
    }
  }
  return total;
}

std::vector<VgpuType> build_vgpu_types() {
  std::vector<VgpuType> types;
  for (const vocab::MigCatalog& catalog : vocab::mig_catalogs()) {
    const std::string prefix = vgpu_prefix(catalog);
    for (const vocab::MigProfile& profile : catalog.profiles) {
      const int gb = profile_gb(profile.name);
      types.push_back({.name = fmt::format("{}-{}-{}C", prefix, profile.compute_slices, gb),
                       .model = catalog.model,
                       .kind = VgpuKind::kMigBacked,
                       .mig_profile = profile.name,
                       .framebuffer_gib = gb,
                       .max_per_gpu = profile.max_instances});
    }
    const int total_gb = catalog_total_gb(catalog);
    for (int n : kTimeSliceDivisors) {
      const int gb = total_gb / n;
      types.push_back({.name = fmt::format("{}-{}C", prefix, gb),
                       .model = catalog.model,
                       .kind = VgpuKind::kTimeSliced,
                       .milli = 1000 / n,
                       .framebuffer_gib = gb,
                       .max_per_gpu = n});
    }
  }
  return types;
}

std::string join_type_names(const std::vector<const VgpuType*>& types) {
  std::string out;
  for (const VgpuType* type : types) {
    if (!out.empty()) out += ", ";
    out += type->name;
  }
  return out;
}

std::vector<const VgpuType*> types_of_model(std::string_view model) {
  std::vector<const VgpuType*> out;
  for (const VgpuType& type : vgpu_types()) {
    if (type.model == model) out.push_back(&type);
  }
  return out;
}

}  // namespace

const std::vector<VgpuType>& vgpu_types() {
  static const std::vector<VgpuType> types = build_vgpu_types();
  return types;
}

Result<const VgpuType*> find_vgpu_type(std::string_view name) {
  for (const VgpuType& type : vgpu_types()) {
    if (type.name == name) return &type;
  }
  // Name the types of the model the name was meant for (the longest prefix that matches), or
  // the prefixes when none does.
  const vocab::MigCatalog* meant = nullptr;
  std::string meant_prefix;
  std::string prefixes;
  for (const vocab::MigCatalog& catalog : vocab::mig_catalogs()) {
    const std::string prefix = vgpu_prefix(catalog);
    if (!prefixes.empty()) prefixes += ", ";
    prefixes += prefix;
    if (name.starts_with(prefix + "-") && prefix.size() > meant_prefix.size()) {
      meant = &catalog;
      meant_prefix = prefix;
    }
  }
  if (meant == nullptr) {
    return fail(Error::not_found(
        fmt::format("no vGPU type \"{}\"; vGPU type names start with one of: {}", name, prefixes)));
  }
  return fail(Error::not_found(fmt::format("no vGPU type \"{}\"; {} offers: {}", name, meant->model,
                                           join_type_names(types_of_model(meant->model)))));
}

Result<const VgpuType*> vgpu_for_mig(std::string_view model, std::string_view profile) {
  const vocab::MigCatalog* catalog = GP_TRY(vocab::mig_catalog(model));
  for (const VgpuType& type : vgpu_types()) {
    if (type.model == catalog->model && type.kind == VgpuKind::kMigBacked &&
        type.mig_profile == profile) {
      return &type;
    }
  }
  std::string profiles;
  for (const vocab::MigProfile& p : catalog->profiles) {
    if (!profiles.empty()) profiles += ", ";
    profiles += p.name;
  }
  return fail(Error::invalid(fmt::format("\"{}\" is not a MIG profile of {}; its profiles: {}",
                                         profile, catalog->model, profiles)));
}

Result<const VgpuType*> vgpu_for_share(std::string_view model, int milli) {
  const vocab::MigCatalog* catalog = GP_TRY(vocab::mig_catalog(model));
  std::string shares;
  for (const VgpuType& type : vgpu_types()) {
    if (type.model != catalog->model || type.kind != VgpuKind::kTimeSliced) continue;
    if (type.milli == milli) return &type;
    if (!shares.empty()) shares += ", ";
    shares += fmt::format("{} ({})", type.milli, type.name);
  }
  return fail(Error::invalid(
      fmt::format("no time-sliced vGPU type of {} is a share of {} milli-GPU; the shares are: {}",
                  catalog->model, milli, shares)));
}

}  // namespace gp::vm
