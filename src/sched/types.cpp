// Request validation and the units a request takes.
#include <fmt/format.h>

#include <algorithm>

#include "sched/sched.h"

namespace gp::sched {

namespace {

// A count no request may exceed whatever the fleet: keeps arithmetic far from overflow.
constexpr int64_t kAbsurd = 1'000'000;

Result<void> check_count(std::string_view what, int64_t n) {
  if (n <= 0) return fail(Error::invalid(fmt::format("{} must be at least 1; got {}", what, n)));
  if (n > kAbsurd) {
    return fail(Error::invalid(fmt::format("{} {} is absurd (at most {})", what, n, kAbsurd)));
  }
  return ok();
}

}  // namespace

int64_t request_units(const Request& request, const FleetLimits::Model& model) {
  switch (request.tier) {
    case Tier::kDedicatedPool:
    case Tier::kDedicatedNode:
      return gpu_units(int64_t{request.node_count} * request.gpus_per_node);
    case Tier::kDedicatedGpu:
      return gpu_units(request.count);
    case Tier::kMig: {
      const vocab::MigProfile* profile =
          model.mig_catalog ? model.mig_catalog->find(request.mig_profile) : nullptr;
      return profile ? int64_t{request.count} * mig_units(profile->compute_slices) : 0;
    }
    case Tier::kShared:
      return int64_t{request.count} * shared_units(request.milli);
  }
  return 0;
}

Result<void> validate(const Request& request, const FleetLimits& limits) {
  if (request.tenant.empty()) return fail(Error::invalid("request has no tenant"));
  if (request.project.empty()) return fail(Error::invalid("request has no project"));
  if (!class_allows(request.isolation, request.tier)) {
    return fail(Error::invalid(
        fmt::format("tier {} is not allowed for isolation class {}: its weakest allowed tier is {}",
                    tier_name(request.tier), class_name(request.isolation),
                    tier_name(weakest_tier(request.isolation)))));
  }
  // The models the request may use at all.
  std::vector<std::string> candidates;
  for (const std::string& m : request.models) {
    if (!limits.models.contains(m)) {
      std::string known;
      for (const auto& [name, unused] : limits.models) {
        known += known.empty() ? name : ", " + name;
      }
      return fail(
          Error::invalid(fmt::format("unknown GPU model \"{}\"; the fleet has: {}", m, known)));
    }
    candidates.push_back(m);
  }
  if (request.models.empty()) {
    for (const auto& [name, unused] : limits.models) candidates.push_back(name);
  }
  if (candidates.empty()) return fail(Error::invalid("the fleet has no GPUs"));

  if (request.cpu_milli < 0 || request.memory_mib < 0) {
    return fail(Error::invalid("cpu_milli and memory_mib must not be negative"));
  }
  if (request.cpu_only()) return ok();  // no GPU: any node with room will do
  const bool node_tier =
      request.tier == Tier::kDedicatedNode || request.tier == Tier::kDedicatedPool;
  if (node_tier) {
    GP_TRY_VOID(check_count("node_count", request.node_count));
    GP_TRY_VOID(check_count("gpus_per_node", request.gpus_per_node));
    if (request.same_node && request.node_count > 1) {
      return fail(
          Error::invalid(fmt::format("same_node contradicts node_count {}", request.node_count)));
    }
    // In 64 bits: each factor may be up to kAbsurd, and their product overflows an int.
    const int64_t total = int64_t{request.node_count} * request.gpus_per_node;
    if (total > kAbsurd) {
      return fail(Error::invalid(
          fmt::format("node_count {} x gpus_per_node {} = {} GPUs is absurd (at most {})",
                      request.node_count, request.gpus_per_node, total, kAbsurd)));
    }
    if (request.count != 1 && request.count != total) {
      return fail(Error::invalid(fmt::format("{} takes node_count and gpus_per_node, not count",
                                             tier_name(request.tier))));
    }
  } else {
    GP_TRY_VOID(check_count("count", request.count));
    if (request.node_count != 0 || request.gpus_per_node != 0) {
      return fail(Error::invalid(fmt::format(
          "node_count and gpus_per_node apply only to dedicated-node and dedicated-pool, not {}",
          tier_name(request.tier))));
    }
  }
  if (request.tier != Tier::kMig && !request.mig_profile.empty()) {
    return fail(Error::invalid(
        fmt::format("mig_profile applies only to tier mig, not {}", tier_name(request.tier))));
  }
  if (request.tier != Tier::kShared && request.milli != 0) {
    return fail(Error::invalid(
        fmt::format("milli applies only to tier shared, not {}", tier_name(request.tier))));
  }
  if (request.tier != Tier::kDedicatedPool && !request.pool.empty()) {
    return fail(Error::invalid("pool applies only to tier dedicated-pool"));
  }

  // The shape must fit at least one candidate model; say why the closest one does not.
  std::string why;
  for (const std::string& name : candidates) {
    const FleetLimits::Model& m = limits.models.at(name);
    std::string reason;
    switch (request.tier) {
      case Tier::kDedicatedPool:
      case Tier::kDedicatedNode:
        if (request.gpus_per_node > m.max_gpus_per_node) {
          reason = fmt::format("{} nodes have at most {} GPUs; {} per node requested", name,
                               m.max_gpus_per_node, request.gpus_per_node);
        } else if (request.node_count > m.nodes) {
          reason = fmt::format("the fleet has {} {} node(s); {} requested", m.nodes, name,
                               request.node_count);
        }
        break;
      case Tier::kDedicatedGpu:
        if (request.count > m.total_gpus) {
          reason = fmt::format("the fleet has {} {} GPU(s); {} requested", m.total_gpus, name,
                               request.count);
        } else if (request.same_node && request.count > m.max_gpus_per_node) {
          reason = fmt::format("same_node with {} GPUs, but {} nodes have at most {}",
                               request.count, name, m.max_gpus_per_node);
        }
        break;
      case Tier::kMig: {
        const vocab::MigProfile* p =
            m.mig_catalog ? m.mig_catalog->find(request.mig_profile) : nullptr;
        if (p == nullptr) {
          reason = m.mig_catalog
                       ? fmt::format("{} has no MIG profile \"{}\"", name, request.mig_profile)
                       : fmt::format("{} is not MIG-capable", name);
        } else if (request.count > m.total_gpus * p->max_instances) {
          reason = fmt::format("the fleet holds at most {} {} instances of {}",
                               m.total_gpus * p->max_instances, name, p->name);
        } else if (request.same_node &&
                   request.count > int64_t{m.max_gpus_per_node} * p->max_instances) {
          reason =
              fmt::format("same_node with {} x {}, but a {} node holds at most {}", request.count,
                          p->name, name, m.max_gpus_per_node * p->max_instances);
        }
        break;
      }
      case Tier::kShared:
        if (request.milli < 1 || request.milli > 1000) {
          return fail(Error::invalid(
              fmt::format("milli must be 1..1000 per share; got {}", request.milli)));
        }
        if (request.count > m.total_gpus * (1000 / request.milli)) {
          reason = fmt::format("{} shares of {} milli exceed every {} GPU of the fleet",
                               request.count, request.milli, name);
        } else if (request.same_node &&
                   request.count > int64_t{m.max_gpus_per_node} * (1000 / request.milli)) {
          reason = fmt::format(
              "same_node with {} shares of {} milli, but a {} node holds at most {}", request.count,
              request.milli, name, m.max_gpus_per_node * (1000 / request.milli));
        }
        break;
    }
    if (reason.empty()) return ok();
    why += why.empty() ? reason : "; " + reason;
  }
  if (request.tier == Tier::kMig && request.models.empty()) {
    return fail(Error::invalid(
        fmt::format("no GPU model of the fleet has MIG profile \"{}\"", request.mig_profile)));
  }
  return fail(
      Error::invalid(fmt::format("no GPU of the fleet can ever hold this request: {}", why)));
}

}  // namespace gp::sched
