// Node lifecycle as a pure transition table, so every state change an operator or the
// heartbeat sweeper asks for is checked in one place.
//
//   enroll -> ready <-> (cordoned flag)
//   ready -> draining -> maintenance -> ready        (drain completes when no work is left)
//   any live state -> failed (missed heartbeats, operator) -> ready (heartbeat resumes / repair)
//   maintenance | failed -> retired                  (terminal; its GPUs may enroll elsewhere)
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "common/result.h"

namespace gp::fleet {

enum class NodeState { kEnrolling, kReady, kDraining, kMaintenance, kFailed, kRetired };
// Each state's name, at its value's index.
inline constexpr std::array<std::string_view, 6> kNodeStateNames = {
    "enrolling", "ready", "draining", "maintenance", "failed", "retired"};
enum class NodeAction {
  kActivate,
  kDrain,
  kDrainComplete,
  kMaintenance,
  kResume,
  kFail,
  kRecover,
  kRetire
};

std::string_view node_state_name(NodeState s);
std::optional<NodeState> parse_node_state(std::string_view s);
std::string_view node_action_name(NodeAction a);
std::optional<NodeAction> parse_node_action(std::string_view s);

// The state after `action`, or a conflict error saying why the action is not allowed now.
Result<NodeState> transition(NodeState from, NodeAction action);

// Whether new work may be placed on a node in this state (cordon is a separate flag).
bool schedulable(NodeState s);

}  // namespace gp::fleet
