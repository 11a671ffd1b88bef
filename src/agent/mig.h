// Applying the control plane's MIG plans on the node. The node's assignment carries a plan per
// GPU the scheduler changed (`gpu_plans`: the mode, and for MIG the GPU instances the GPU must
// hold); before a job member or VM starts on a MIG unit the agent makes the GPU match it through
// NVML (agent/nvml.h), verifies the result and reports it, and the control plane holds the work
// until the report says "applied" (docs/lifecycle.md).
//
// Rules, in plan_mig_steps(): instances the plan lacks are destroyed only when no allocation
// assigned to the node (live or still stopping) holds them; instances the plan has and the GPU
// lacks are created at their placement, each with one compute instance spanning it; an instance
// left without a compute instance (an agent that died between the two calls) gets one. A MIG
// mode change needs the GPU idle: it is made only when no allocation on the node uses the GPU,
// after the GPU's unused instances are gone, and a change NVML defers to a GPU reset is reported
// as waiting (the agent never resets a GPU).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/nvml.h"
#include "common/json.h"
#include "common/result.h"
#include "fleet/inventory.h"

namespace gp::agent {

// One GPU's plan, as the assignment gives it.
struct GpuPlan {
  std::string gpu;  // UUID
  fleet::GpuMode mode = fleet::GpuMode::kWhole;
  vocab::Layout layout;  // sorted by start; empty unless mode is MIG
};
// The assignment's `gpu_plans` (an array; absent or null is none). Strict: an entry without a
// GPU, with an unknown mode or a malformed layout is an invalid_argument naming it.
Result<std::vector<GpuPlan>> parse_gpu_plans(const Json& plans);

// What the allocations assigned to this node (live or stopping) hold of each GPU: any part of
// it, and which MIG instances. From the assignment's `allocations`; an allocation does not hold
// the GPUs it is `configuring` for (nothing of it has started there), and malformed entries hold
// nothing (the job and VM parsers report them).
struct GpuUse {
  bool any = false;
  std::set<vocab::PlacedInstance> instances;
};
std::map<std::string, GpuUse> gpu_use(const Json& allocations);

// The NVML calls that take a GPU from `now` to `plan`, or why none may be made now. Pure.
struct MigSteps {
  std::optional<bool> set_mig_mode;  // toggle the mode to this (after `destroy`)
  vocab::Layout destroy;             // instances the plan lacks that nothing holds
  vocab::Layout create;              // instances the plan has and the GPU lacks
  vocab::Layout add_compute;         // planned instances present without a compute instance
  std::string waiting;               // non-empty: nothing may be done yet, and why
  std::string impossible;            // non-empty: the plan cannot be carried out here, and why
  bool empty() const {
    return !set_mig_mode && destroy.empty() && create.empty() && add_compute.empty();
  }
};
MigSteps plan_mig_steps(const GpuPlan& plan, const Nvml::MigView& now, const GpuUse& use);

// What became of one plan this round, for the heartbeat's `mig` report.
struct MigOutcome {
  std::string gpu;
  std::string status;             // "applied", "waiting" or "failed"
  std::string detail;             // why it waits or failed; "" when applied
  std::vector<std::string> done;  // the calls made, e.g. "created 3g.71gb@4"
  Json to_json() const;
};

// Carries `plan` out on the GPU: plans the steps, makes the calls (destroys, the mode change,
// creates and compute instances, in that order), and verifies by reading the GPU back. A call
// NVML refuses ends the round as "failed" with NVML's message; what was already done stays
// (the next round reconciles from what the GPU then holds).
MigOutcome apply_mig_plan(Nvml& nvml, const GpuPlan& plan, const GpuUse& use);

// The same for a simulated node's GPU: `gpu` is its entry in the `--simulate` inventory file
// (fleet/inventory.h: mig_capable, mode, mig_instances), changed in place by the steps a real GPU
// would take (instances in use kept, a mode change only on an idle GPU). Pure.
MigOutcome apply_mig_plan_simulated(Json& gpu, const GpuPlan& plan, const GpuUse& use);

}  // namespace gp::agent
