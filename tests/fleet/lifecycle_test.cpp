#include "fleet/lifecycle.h"

#include <gtest/gtest.h>

#include <map>

namespace gp::fleet {
namespace {

using S = NodeState;
using A = NodeAction;

TEST(NodeLifecycle, EveryAllowedTransition) {
  // The complete table: anything not listed must be refused.
  const std::map<std::pair<S, A>, S> allowed = {
      {{S::kEnrolling, A::kActivate}, S::kReady},
      {{S::kEnrolling, A::kFail}, S::kFailed},
      {{S::kReady, A::kDrain}, S::kDraining},
      {{S::kReady, A::kMaintenance}, S::kMaintenance},
      {{S::kReady, A::kFail}, S::kFailed},
      {{S::kDraining, A::kDrain}, S::kDraining},
      {{S::kDraining, A::kDrainComplete}, S::kMaintenance},
      {{S::kDraining, A::kMaintenance}, S::kMaintenance},
      {{S::kDraining, A::kResume}, S::kReady},
      {{S::kDraining, A::kFail}, S::kFailed},
      {{S::kMaintenance, A::kMaintenance}, S::kMaintenance},
      {{S::kMaintenance, A::kResume}, S::kReady},
      {{S::kMaintenance, A::kRetire}, S::kRetired},
      {{S::kFailed, A::kFail}, S::kFailed},
      {{S::kFailed, A::kRecover}, S::kReady},
      {{S::kFailed, A::kMaintenance}, S::kMaintenance},
      {{S::kFailed, A::kRetire}, S::kRetired},
  };
  int checked = 0;
  for (S s : {S::kEnrolling, S::kReady, S::kDraining, S::kMaintenance, S::kFailed, S::kRetired}) {
    for (A a : {A::kActivate, A::kDrain, A::kDrainComplete, A::kMaintenance, A::kResume, A::kFail,
                A::kRecover, A::kRetire}) {
      auto got = transition(s, a);
      auto want = allowed.find({s, a});
      if (want == allowed.end()) {
        ASSERT_FALSE(got) << node_state_name(s) << " " << node_action_name(a);
        EXPECT_EQ(got.error().code, ErrorCode::kConflict);
        EXPECT_NE(got.error().message.find(node_state_name(s)), std::string::npos);
      } else {
        ASSERT_TRUE(got) << node_state_name(s) << " " << node_action_name(a);
        EXPECT_EQ(*got, want->second);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48);
}

TEST(NodeLifecycle, OnlyReadyNodesAreSchedulable) {
  EXPECT_TRUE(schedulable(S::kReady));
  for (S s : {S::kEnrolling, S::kDraining, S::kMaintenance, S::kFailed, S::kRetired})
    EXPECT_FALSE(schedulable(s));
}

TEST(NodeLifecycle, NamesRoundTrip) {
  for (S s : {S::kEnrolling, S::kReady, S::kDraining, S::kMaintenance, S::kFailed, S::kRetired})
    EXPECT_EQ(parse_node_state(node_state_name(s)), s);
  EXPECT_EQ(parse_node_action("drain"), A::kDrain);
  EXPECT_FALSE(parse_node_action("explode"));
}

}  // namespace
}  // namespace gp::fleet
