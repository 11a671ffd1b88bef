// Specification of the isolation vocabulary: class and tier names, and which tiers a class allows.
#include <gtest/gtest.h>

#include "vocab/vocab.h"

namespace gp::vocab {
namespace {

TEST(Vocabulary, ClassesAllowTheirWeakestTierAndEveryStrongerOne) {
  using C = IsolationClass;
  using T = Tier;
  // Rows: class; columns: dedicated-pool, dedicated-node, dedicated-gpu, mig, shared.
  const std::vector<std::pair<C, std::vector<bool>>> table = {
      {C::kInternal, {true, true, true, true, true}},
      {C::kStandard, {true, true, true, true, false}},
      {C::kSensitive, {true, true, true, false, false}},
      {C::kRegulated, {true, true, false, false, false}},
  };
  const std::vector<T> tiers = {T::kDedicatedPool, T::kDedicatedNode, T::kDedicatedGpu, T::kMig,
                                T::kShared};
  for (const auto& [c, row] : table)
    for (size_t i = 0; i < tiers.size(); ++i)
      EXPECT_EQ(class_allows(c, tiers[i]), row[i]) << class_name(c) << " " << tier_name(tiers[i]);
}

TEST(Vocabulary, NamesRoundTrip) {
  for (auto c : {IsolationClass::kInternal, IsolationClass::kStandard, IsolationClass::kSensitive,
                 IsolationClass::kRegulated})
    EXPECT_EQ(parse_class(class_name(c)), c);
  for (auto t :
       {Tier::kDedicatedPool, Tier::kDedicatedNode, Tier::kDedicatedGpu, Tier::kMig, Tier::kShared})
    EXPECT_EQ(parse_tier(tier_name(t)), t);
  for (auto m : {GpuMode::kWhole, GpuMode::kMig, GpuMode::kTimeSliced})
    EXPECT_EQ(parse_gpu_mode(gpu_mode_name(m)), m);
  EXPECT_FALSE(parse_class("secret"));
  EXPECT_FALSE(parse_tier("exclusive"));
  EXPECT_FALSE(parse_gpu_mode("vgpu"));
}

}  // namespace
}  // namespace gp::vocab
