// Resource keys and the rendering of units (vocab.h, "units").
#include <fmt/format.h>

#include "vocab/vocab.h"

namespace gp::vocab {

std::string gpu_resource_key(std::string_view model) { return fmt::format("gpu/{}", model); }
std::string mig_resource_key(std::string_view model, std::string_view profile) {
  return fmt::format("mig/{}/{}", model, profile);
}
std::string milli_resource_key(std::string_view model) {
  return fmt::format("gpu-milli/{}", model);
}

std::string format_units(int64_t units) {
  const int64_t whole = units / kUnitsPerGpu;
  const int64_t rest = units % kUnitsPerGpu;
  if (rest == 0) return fmt::format("{} GPU", whole);
  return fmt::format("{:.3f} GPU", static_cast<double>(units) / kUnitsPerGpu);
}

}  // namespace gp::vocab
