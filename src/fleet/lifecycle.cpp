#include "fleet/lifecycle.h"

#include <fmt/format.h>

#include <array>

namespace gp::fleet {

std::string_view node_state_name(NodeState s) {
  const auto i = static_cast<size_t>(s);
  return i < kNodeStateNames.size() ? kNodeStateNames[i] : "failed";
}

std::optional<NodeState> parse_node_state(std::string_view s) {
  for (auto v : {NodeState::kEnrolling, NodeState::kReady, NodeState::kDraining,
                 NodeState::kMaintenance, NodeState::kFailed, NodeState::kRetired})
    if (node_state_name(v) == s) return v;
  return std::nullopt;
}

std::string_view node_action_name(NodeAction a) {
  switch (a) {
    case NodeAction::kActivate:
      return "activate";
    case NodeAction::kDrain:
      return "drain";
    case NodeAction::kDrainComplete:
      return "drain-complete";
    case NodeAction::kMaintenance:
      return "maintenance";
    case NodeAction::kResume:
      return "resume";
    case NodeAction::kFail:
      return "fail";
    case NodeAction::kRecover:
      return "recover";
    case NodeAction::kRetire:
      return "retire";
  }
  return "fail";
}

std::optional<NodeAction> parse_node_action(std::string_view s) {
  for (auto v : {NodeAction::kActivate, NodeAction::kDrain, NodeAction::kDrainComplete,
                 NodeAction::kMaintenance, NodeAction::kResume, NodeAction::kFail,
                 NodeAction::kRecover, NodeAction::kRetire})
    if (node_action_name(v) == s) return v;
  return std::nullopt;
}

Result<NodeState> transition(NodeState from, NodeAction action) {
  using S = NodeState;
  using A = NodeAction;
  auto bad = [&] {
    return fail(Error::conflict(
        fmt::format("a {} node cannot {}", node_state_name(from), node_action_name(action))));
  };
  if (from == S::kRetired) return bad();
  switch (action) {
    case A::kActivate:
      if (from == S::kEnrolling) return S::kReady;
      return bad();
    case A::kDrain:
      if (from == S::kReady || from == S::kDraining) return S::kDraining;
      return bad();
    case A::kDrainComplete:
      if (from == S::kDraining) return S::kMaintenance;
      return bad();
    case A::kMaintenance:
      // Straight to maintenance skips the wait for work to leave: only when there is none,
      // which the caller checks.
      if (from == S::kReady || from == S::kDraining || from == S::kFailed ||
          from == S::kMaintenance)
        return S::kMaintenance;
      return bad();
    case A::kResume:
      if (from == S::kMaintenance || from == S::kDraining) return S::kReady;
      return bad();
    case A::kFail:
      if (from == S::kReady || from == S::kDraining || from == S::kEnrolling || from == S::kFailed)
        return S::kFailed;
      return bad();
    case A::kRecover:
      if (from == S::kFailed) return S::kReady;
      return bad();
    case A::kRetire:
      if (from == S::kMaintenance || from == S::kFailed) return S::kRetired;
      return bad();
  }
  return bad();
}

bool schedulable(NodeState s) { return s == NodeState::kReady; }

}  // namespace gp::fleet
