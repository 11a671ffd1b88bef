// Helpers for the sched tests: small fleets built by hand.
#pragma once

#include <string>
#include <vector>

#include "sched/sched.h"
#include "vocab/vocab.h"

namespace gp::sched::testing {

inline const vocab::MigCatalog* catalog_for(const std::string& model) {
  if (model == "H200") return *vocab::mig_catalog("H200-141GB");
  if (model == "H100") return *vocab::mig_catalog("H100-80GB");
  if (model == "A100-80GB") return *vocab::mig_catalog("A100-80GB");
  return nullptr;
}

struct NodeShape {
  std::string id;
  int gpus = 8;
  std::string model = "H200";
  std::string rack = "", nvlink = "";
  std::string pool_owner = "", pool = "";
  GpuMode mode = GpuMode::kWhole;
};

inline NodeSpec make_node(const NodeShape& shape) {
  NodeSpec n;
  n.id = shape.id;
  n.name = shape.id;
  n.rack = shape.rack;
  n.nvlink_domain = shape.nvlink;
  n.pool_owner = shape.pool_owner;
  n.pool_id = shape.pool;
  n.pool_name = shape.pool;
  for (int i = 0; i < shape.gpus; ++i) {
    GpuSpec g;
    g.uuid = "GPU-" + shape.id + "-" + std::to_string(i);
    g.index = i;
    g.model = shape.model;
    g.mode = shape.mode;
    g.mig_catalog = catalog_for(shape.model);
    n.gpus.push_back(g);
  }
  return n;
}

inline ClusterState make_state(const std::vector<NodeShape>& shapes) {
  std::vector<NodeSpec> specs;
  for (const NodeShape& s : shapes) specs.push_back(make_node(s));
  Result<ClusterState> state = ClusterState::build(std::move(specs));
  if (!state) throw std::runtime_error(state.error().message);
  return std::move(*state);
}

inline Request gpus(const std::string& tenant, int count,
                    IsolationClass c = IsolationClass::kSensitive) {
  Request r;
  r.tenant = tenant;
  r.project = "p";
  r.isolation = c;
  r.tier = Tier::kDedicatedGpu;
  r.count = count;
  return r;
}

inline Request mig(const std::string& tenant, const std::string& profile, int count = 1) {
  Request r;
  r.tenant = tenant;
  r.project = "p";
  r.isolation = IsolationClass::kStandard;
  r.tier = Tier::kMig;
  r.mig_profile = profile;
  r.count = count;
  return r;
}

inline Request shared(const std::string& tenant, int milli, int count = 1) {
  Request r;
  r.tenant = tenant;
  r.project = "p";
  r.isolation = IsolationClass::kInternal;
  r.tier = Tier::kShared;
  r.milli = milli;
  r.count = count;
  return r;
}

inline Request nodes(const std::string& tenant, int node_count, int per_node,
                     Tier tier = Tier::kDedicatedNode) {
  Request r;
  r.tenant = tenant;
  r.project = "p";
  r.isolation = IsolationClass::kRegulated;
  r.tier = tier;
  r.node_count = node_count;
  r.gpus_per_node = per_node;
  return r;
}

// Checks the tier invariant of DESIGN.md over the live allocations; returns "" or a violation.
std::string tier_invariant_violation(const ClusterState& s);
// Recomputes GPU ownership from the allocations and compares it with the state's records.
std::string bookkeeping_violation(const ClusterState& s);

}  // namespace gp::sched::testing
