// Independent checks of the invariant and of the state's bookkeeping, recomputed from the
// allocations alone.
#include <fmt/format.h>

#include <bit>
#include <map>
#include <set>

#include "sched/test_fleet.h"

namespace gp::sched::testing {

std::string tier_invariant_violation(const ClusterState& s) {
  struct Use {
    const Allocation* alloc;
    std::optional<vocab::PlacedInstance> instance;
  };
  std::map<int32_t, std::vector<Use>> by_gpu;
  std::map<int32_t, std::vector<const Allocation*>> by_node;
  for (const Allocation& a : s.allocation_slots()) {
    if (!a.live) continue;
    std::set<int32_t> nodes(a.placement.node_slots.begin(), a.placement.node_slots.end());
    for (const GpuGrant& g : a.placement.gpus) {
      by_gpu[g.gpu].push_back({&a, g.mig_instance});
      nodes.insert(s.gpus()[g.gpu].node);
    }
    for (int32_t n : nodes) {
      by_node[n].push_back(&a);
      const ClusterState::Node& node = s.nodes()[n];
      if (node.pool_owner >= 0 && s.tenant_name(node.pool_owner) != a.placement.tenant) {
        return fmt::format("{} of {} on pool node {} of {}", a.id, a.placement.tenant, node.id,
                           s.tenant_name(node.pool_owner));
      }
      if (a.placement.tier == Tier::kDedicatedPool && node.pool_owner < 0) {
        return fmt::format("dedicated-pool {} on shared node {}", a.id, node.id);
      }
    }
  }
  auto node_tier = [](Tier t) { return t == Tier::kDedicatedNode || t == Tier::kDedicatedPool; };
  for (const auto& [n, allocs] : by_node) {
    for (const Allocation* a : allocs) {
      for (const Allocation* b : allocs) {
        if (a->placement.tenant == b->placement.tenant) continue;
        if (node_tier(a->placement.tier) || node_tier(b->placement.tier)) {
          return fmt::format("{} ({}) and {} ({}) share node {}", a->id,
                             tier_name(a->placement.tier), b->id, tier_name(b->placement.tier),
                             s.nodes()[n].id);
        }
      }
    }
  }
  for (const auto& [g, uses] : by_gpu) {
    for (std::size_t i = 0; i < uses.size(); ++i) {
      for (std::size_t j = i + 1; j < uses.size(); ++j) {
        const Allocation* a = uses[i].alloc;
        const Allocation* b = uses[j].alloc;
        const Tier ta = a->placement.tier, tb = b->placement.tier;
        const bool both_mig = ta == Tier::kMig && tb == Tier::kMig;
        const bool both_shared = ta == Tier::kShared && tb == Tier::kShared;
        if (!both_mig && !both_shared) {
          return fmt::format("{} ({}) and {} ({}) share GPU {}", a->id, tier_name(ta), b->id,
                             tier_name(tb), s.gpus()[g].uuid);
        }
        if (both_mig) {
          const vocab::MigCatalog& cat = *s.mig_table(s.gpus()[g])->catalog;
          const auto& x = *uses[i].instance;
          const auto& y = *uses[j].instance;
          const int xs = cat.find(x.profile)->memory_slices,
                    ys = cat.find(y.profile)->memory_slices;
          if (x.start < y.start + ys && y.start < x.start + xs) {
            return fmt::format("MIG instances of {} and {} overlap on {}", a->id, b->id,
                               s.gpus()[g].uuid);
          }
        }
      }
    }
  }
  return "";
}

std::string bookkeeping_violation(const ClusterState& s) {
  const auto& gpus = s.gpus();
  std::vector<int32_t> whole(gpus.size(), -1);
  std::vector<int> milli(gpus.size(), 0);
  std::vector<vocab::Layout> held(gpus.size());
  for (std::size_t slot = 0; slot < s.allocation_slots().size(); ++slot) {
    const Allocation& a = s.allocation_slots()[slot];
    if (!a.live) continue;
    for (const GpuGrant& g : a.placement.gpus) {
      switch (a.placement.tier) {
        case Tier::kMig:
          held[g.gpu].push_back(*g.mig_instance);
          break;
        case Tier::kShared:
          milli[g.gpu] += g.milli;
          break;
        default:
          if (whole[g.gpu] >= 0) return fmt::format("GPU {} granted twice", gpus[g.gpu].uuid);
          whole[g.gpu] = static_cast<int32_t>(slot);
      }
    }
  }
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    const ClusterState::Gpu& gpu = gpus[g];
    if (whole[g] != gpu.whole_owner) return fmt::format("GPU {}: whole owner differs", gpu.uuid);
    if (whole[g] >= 0 && gpu.mode != GpuMode::kWhole) return "whole grant on non-whole GPU";
    if (milli[g] != gpu.milli_used) return fmt::format("GPU {}: milli differs", gpu.uuid);
    if (milli[g] > 1000) return fmt::format("GPU {}: {} milli", gpu.uuid, milli[g]);
    if (milli[g] > 0 && gpu.mode != GpuMode::kTimeSliced) return "share on non-shared GPU";
    if (!held[g].empty()) {
      if (gpu.mode != GpuMode::kMig) return "MIG grant on non-MIG GPU";
      const detail::MigTable& table = *s.mig_table(gpu);
      if (auto v = vocab::validate(*table.catalog, held[g]); !v) {
        return fmt::format("GPU {}: held instances invalid: {}", gpu.uuid, v.error().message);
      }
      if (table.mask_of(held[g]) != gpu.mig_owned)
        return fmt::format("GPU {}: owned mask", gpu.uuid);
      if ((gpu.mig_owned & ~gpu.mig_layout) != 0) return "owned instance not in layout";
    } else if (gpu.mig_owned != 0) {
      return fmt::format("GPU {}: owned MIG slots without allocation", gpu.uuid);
    }
    if (gpu.mode == GpuMode::kMig) {
      const detail::MigTable& table = *s.mig_table(gpu);
      if (auto v = vocab::validate(*table.catalog, table.layout_of(gpu.mig_layout)); !v) {
        return fmt::format("GPU {}: layout invalid: {}", gpu.uuid, v.error().message);
      }
    }
  }
  return "";
}

}  // namespace gp::sched::testing
