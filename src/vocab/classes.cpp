// Isolation classes, tiers and GPU modes: their names and the rule tying classes to tiers.
#include "vocab/vocab.h"

namespace gp::vocab {

std::string_view tier_name(Tier tier) {
  const auto i = static_cast<size_t>(tier);
  return i < kTierNames.size() ? kTierNames[i] : kTierNames.back();
}

std::optional<Tier> parse_tier(std::string_view name) {
  for (Tier t : {Tier::kDedicatedPool, Tier::kDedicatedNode, Tier::kDedicatedGpu, Tier::kMig,
                 Tier::kShared}) {
    if (tier_name(t) == name) return t;
  }
  return std::nullopt;
}

std::string_view class_name(IsolationClass c) {
  auto i = static_cast<size_t>(c);
  return i < kClassNames.size() ? kClassNames[i] : std::string_view{};
}

std::optional<IsolationClass> parse_class(std::string_view name) {
  for (size_t i = 0; i < kClassNames.size(); ++i)
    if (kClassNames[i] == name) return static_cast<IsolationClass>(i);
  return std::nullopt;
}

Tier weakest_tier(IsolationClass c) {
  switch (c) {
    case IsolationClass::kInternal:
      return Tier::kShared;
    case IsolationClass::kStandard:
      return Tier::kMig;
    case IsolationClass::kSensitive:
      return Tier::kDedicatedGpu;
    case IsolationClass::kRegulated:
      return Tier::kDedicatedNode;
  }
  return Tier::kDedicatedNode;
}

// Tiers are declared strongest first, so "at least as strong" is "not greater".
bool class_allows(IsolationClass c, Tier tier) { return tier <= weakest_tier(c); }

std::string_view gpu_mode_name(GpuMode mode) {
  const auto i = static_cast<size_t>(mode);
  return i < kGpuModeNames.size() ? kGpuModeNames[i] : kGpuModeNames[0];
}

std::optional<GpuMode> parse_gpu_mode(std::string_view name) {
  for (GpuMode m : {GpuMode::kWhole, GpuMode::kMig, GpuMode::kTimeSliced})
    if (gpu_mode_name(m) == name) return m;
  return std::nullopt;
}

}  // namespace gp::vocab
