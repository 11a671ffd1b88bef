// Policy: the isolation vocabulary every layer shares — tenant isolation classes, the tiers
// allocations get GPUs in, the modes a GPU can be in — and the rule tying classes to tiers
// (DESIGN.md, "Isolation tiers and classes"), and workload admission (admission.h: Pod Security
// Standards and tenant rules over Kubernetes AdmissionReviews). Public header of the policy module.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gp::policy {

// A tenant's isolation class, weakest demands first.
enum class IsolationClass : uint8_t { kInternal, kStandard, kSensitive, kRegulated };
std::string_view class_name(IsolationClass c);  // "internal", "standard", ...
std::optional<IsolationClass> parse_class(std::string_view name);

// How an allocation gets GPUs, strongest first.
enum class Tier : uint8_t { kDedicatedPool, kDedicatedNode, kDedicatedGpu, kMig, kShared };
std::string_view tier_name(Tier tier);  // "dedicated-pool", ..., "shared"
std::optional<Tier> parse_tier(std::string_view name);

// The weakest tier a class may receive: internal -> shared, standard -> mig,
// sensitive -> dedicated-gpu, regulated -> dedicated-node.
Tier weakest_tier(IsolationClass c);
bool class_allows(IsolationClass c, Tier tier);

// A GPU is in one mode at a time.
enum class GpuMode : uint8_t { kWhole, kMig, kTimeSliced };
std::string_view gpu_mode_name(GpuMode mode);  // "whole", "mig", "time-sliced"
std::optional<GpuMode> parse_gpu_mode(std::string_view name);

}  // namespace gp::policy

#include "policy/admission.h"  // IWYU pragma: export
