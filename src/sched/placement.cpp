// place(): where a request goes. Tier rules are hard constraints checked on every candidate;
// among the candidates, best fit (fullest node or GPU first) keeps large blocks free, and
// multi-GPU requests prefer one node, then one NVLink domain, then one rack.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>

#include "sched/sched.h"

namespace gp::sched {

class Placer {
 public:
  Placer(const ClusterState& s, const Request& r) : s_(s), r_(r) {}

  Result<Placement> run() {
    tenant_ = s_.find_tenant(r_.tenant);
    const int32_t own = s_.domain_of(tenant_);
    if (r_.tier == Tier::kDedicatedPool) {
      if (own < 0) {
        return fail(Error::conflict(fmt::format("tenant {} owns no node pool", r_.tenant)));
      }
      domains_ = {own};
    } else {
      if (own > 0) domains_.push_back(own);
      domains_.push_back(0);
    }
    std::vector<int16_t> models;
    if (r_.models.empty()) {
      for (std::size_t m = 0; m < s_.models_.size(); ++m) models.push_back(static_cast<int16_t>(m));
    } else {
      for (const std::string& name : r_.models) {
        const int32_t m = s_.find_model(name);
        if (m >= 0) models.push_back(static_cast<int16_t>(m));
      }
    }
    std::string reasons;
    for (int16_t m : models) {
      model_ = m;
      Result<Placement> placed = place_model();
      if (placed) return placed;
      if (placed.error().code != ErrorCode::kConflict) continue;  // the model cannot suit it
      if (!reasons.empty()) reasons += "; ";
      reasons += placed.error().message;
    }
    if (reasons.empty()) {
      reasons = models.empty() ? "no GPU model of the fleet is allowed"
                               : "no allowed GPU model suits the request";
    }
    return fail(Error::conflict(std::move(reasons)));
  }

 private:
  const std::string& model_name() const { return s_.models_[model_]; }
  bool node_tier() const {
    return r_.tier == Tier::kDedicatedNode || r_.tier == Tier::kDedicatedPool;
  }

  // The tier rules a node must meet for this request (pool ownership, exclusive holders, and
  // for the node tiers no other tenant at all).
  bool eligible(int32_t n) const {
    const ClusterState::Node& node = s_.nodes_[n];
    if (!node.schedulable) return false;
    if (node.exclusive_tenant >= 0 && node.exclusive_tenant != tenant_) return false;
    if (node.pool_owner >= 0 && node.pool_owner != tenant_) return false;
    if (r_.tier == Tier::kDedicatedPool) {
      if (node.pool_owner < 0) return false;
      if (!r_.pool.empty() && node.pool_id != r_.pool && node.pool_name != r_.pool) return false;
    }
    if (node_tier()) {
      for (const auto& [t, count] : node.tenants) {
        if (t != tenant_) return false;
      }
    }
    return true;
  }

  const ClusterState::NodeModel* entry(int32_t n) const {
    for (const ClusterState::NodeModel& e : s_.nodes_[n].models) {
      if (e.model == model_) return &e;
    }
    return nullptr;
  }
  int avail(int32_t n) const {
    const ClusterState::NodeModel* e = entry(n);
    return e ? e->free_whole + e->convertible : 0;
  }
  int free_whole(int32_t n) const {
    const ClusterState::NodeModel* e = entry(n);
    return e ? e->free_whole : 0;
  }
  bool idle(const ClusterState::Gpu& g) const {
    return g.healthy && g.whole_owner < 0 && g.mig_owned == 0 && g.milli_used == 0;
  }

  std::string where() const {
    if (r_.tier != Tier::kDedicatedPool) return "the fleet";
    std::string pools;
    if (auto it = s_.tenant_pools_.find(tenant_); it != s_.tenant_pools_.end()) {
      for (const auto& [id, name] : it->second) {
        if (!r_.pool.empty() && id != r_.pool && name != r_.pool) continue;
        pools += pools.empty() ? name : ", " + name;
      }
    }
    return fmt::format("tenant pool {}", pools.empty() ? r_.pool : pools);
  }

  // ---- whole GPUs ----

  // Whole GPUs of the model on node n: free whole-mode ones first, then idle convertible ones.
  void take_whole(int32_t n, int count, bool convert, Placement& p) const {
    const ClusterState::Node& node = s_.nodes_[n];
    int taken = 0;
    for (int pass = 0; pass < 2 && taken < count; ++pass) {
      if (pass == 1 && !convert) break;
      for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count && taken < count; ++g) {
        const ClusterState::Gpu& gpu = s_.gpus_[g];
        if (gpu.model != model_ || !idle(gpu)) continue;
        if ((gpu.mode == GpuMode::kWhole) != (pass == 0)) continue;
        if (gpu.mode != GpuMode::kWhole) {
          p.mode_changes.push_back({g, gpu.uuid, gpu.mode, GpuMode::kWhole});
        }
        p.gpus.push_back({g, node.id, gpu.uuid, std::nullopt, 0});
        ++taken;
      }
    }
  }

  // The first eligible node with at least `need` in an index, smallest bucket first.
  int32_t best_fit(detail::Buckets detail::Segment::*which, int need) const {
    for (int32_t d : domains_) {
      const detail::Buckets& b = s_.segment(d, model_).*which;
      for (std::size_t k = need; k < b.lists.size(); ++k) {
        for (int32_t n : b.lists[k]) {
          if (eligible(n)) return n;
        }
      }
    }
    return -1;
  }

  // The most GPUs (free + convertible) any eligible node offers.
  int best_available() const {
    int best = 0;
    for (int32_t d : domains_) {
      const detail::Buckets& b = s_.segment(d, model_).avail;
      for (std::size_t k = b.lists.size(); k-- > 1 && static_cast<int>(k) > best;) {
        for (int32_t n : b.lists[k]) {
          if (eligible(n)) {
            best = static_cast<int>(k);
            break;
          }
        }
      }
    }
    return best;
  }

  std::vector<int32_t> eligible_nodes(int min_avail) const {
    std::vector<int32_t> out;
    for (int32_t d : domains_) {
      const detail::Buckets& b = s_.segment(d, model_).avail;
      for (std::size_t k = std::max(min_avail, 1); k < b.lists.size(); ++k) {
        for (int32_t n : b.lists[k]) {
          if (eligible(n)) out.push_back(n);
        }
      }
    }
    std::ranges::sort(out);
    return out;
  }

  // Groups of nodes by a topology key (NVLink domain or rack); nodes without one are alone.
  template <typename KeyOf>
  static std::vector<std::vector<int32_t>> group(const std::vector<int32_t>& nodes, KeyOf key_of) {
    std::map<int64_t, std::vector<int32_t>> groups;
    for (int32_t n : nodes) {
      const int32_t key = key_of(n);
      groups[key < 0 ? (int64_t{1} << 40) + n : key].push_back(n);
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& [key, members] : groups) out.push_back(std::move(members));
    return out;
  }

  Result<Placement> place_dedicated_gpu(Placement p) const {
    const int n = r_.count;
    for (auto which : {&detail::Segment::whole, &detail::Segment::avail}) {
      const int32_t node = best_fit(which, n);
      if (node >= 0) {
        take_whole(node, n, which == &detail::Segment::avail, p);
        return p;
      }
    }
    if (n == 1 || r_.same_node) {
      return fail(Error::conflict(
          fmt::format("no schedulable {} node in {} with {} free whole GPU(s); best has {}",
                      model_name(), where(), n, best_available())));
    }
    // Spread: one NVLink domain, else one rack, else anywhere; fewest nodes within the group.
    const std::vector<int32_t> nodes = eligible_nodes(1);
    int64_t total = 0;
    for (int32_t node : nodes) total += avail(node);
    auto fill = [&](const std::vector<int32_t>& members) {
      std::vector<int32_t> order(members);
      std::ranges::stable_sort(order, [&](int32_t a, int32_t b) { return avail(a) > avail(b); });
      int left = n;
      for (int32_t node : order) {
        if (left == 0) break;
        const int take = std::min(left, avail(node));
        take_whole(node, take, true, p);
        left -= take;
      }
    };
    auto try_groups = [&](const std::vector<std::vector<int32_t>>& groups) -> bool {
      const std::vector<int32_t>* best = nullptr;
      int64_t best_sum = 0;
      for (const auto& members : groups) {
        int64_t sum = 0;
        for (int32_t node : members) sum += avail(node);
        if (sum >= n && (best == nullptr || sum < best_sum)) {
          best = &members;
          best_sum = sum;
        }
      }
      if (best == nullptr) return false;
      fill(*best);
      return true;
    };
    if (try_groups(group(nodes, [&](int32_t x) { return s_.nodes_[x].nvlink; }))) return p;
    if (r_.same_nvlink_domain) {
      return fail(Error::conflict(
          fmt::format("no NVLink domain in {} has {} free {} GPUs", where(), n, model_name())));
    }
    if (try_groups(group(nodes, [&](int32_t x) { return s_.nodes_[x].rack; }))) return p;
    if (total >= n) {
      fill(nodes);
      return p;
    }
    return fail(
        Error::conflict(fmt::format("{} has {} free {} GPU(s) for this tenant; {} requested",
                                    where(), total, model_name(), n)));
  }

  Result<Placement> place_nodes(Placement p) const {
    const int g = r_.gpus_per_node;
    const int count = r_.node_count;
    if (count == 1) {
      for (auto which : {&detail::Segment::whole, &detail::Segment::avail}) {
        const int32_t node = best_fit(which, g);
        if (node >= 0) {
          p.node_slots = {node};
          take_whole(node, g, which == &detail::Segment::avail, p);
          p.nodes = {s_.nodes_[node].id};
          return p;
        }
      }
    } else {
      // Best fit: nodes that need no mode change first, then the fewest spare GPUs.
      auto better = [&](int32_t a, int32_t b) {
        return std::tuple(free_whole(a) < g, avail(a), a) <
               std::tuple(free_whole(b) < g, avail(b), b);
      };
      auto take_nodes = [&](std::vector<int32_t> members) {
        std::ranges::sort(members, better);
        for (int i = 0; i < count; ++i) {
          const int32_t node = members[i];
          p.node_slots.push_back(node);
          p.nodes.push_back(s_.nodes_[node].id);
          take_whole(node, g, free_whole(node) < g, p);
        }
      };
      // One NVLink domain (else one rack): groups are tried in the order their members appear
      // in the best-fit indexes, so the common case looks at a handful of nodes.
      auto in_one_group = [&](const std::vector<std::vector<int32_t>>& groups,
                              auto key_of) -> bool {
        std::vector<char> tried(groups.size(), 0);
        for (auto which : {&detail::Segment::whole, &detail::Segment::avail}) {
          for (int32_t d : domains_) {
            const detail::Buckets& b = s_.segment(d, model_).*which;
            for (std::size_t k = g; k < b.lists.size(); ++k) {
              for (int32_t n : b.lists[k]) {
                const int32_t key = key_of(n);
                if (key < 0 || tried[key] || !eligible(n)) continue;
                tried[key] = 1;
                std::vector<int32_t> members;
                for (int32_t m : groups[key]) {
                  if (entry(m) != nullptr && avail(m) >= g && eligible(m)) members.push_back(m);
                }
                if (static_cast<int>(members.size()) >= count) {
                  take_nodes(std::move(members));
                  return true;
                }
              }
            }
          }
        }
        return false;
      };
      if (in_one_group(s_.nvlink_nodes_, [&](int32_t x) { return s_.nodes_[x].nvlink; })) return p;
      if (r_.same_nvlink_domain) {
        return fail(Error::conflict(fmt::format(
            "no NVLink domain in {} has {} {} nodes with {} free GPUs and no other tenant", where(),
            count, model_name(), g)));
      }
      if (in_one_group(s_.rack_nodes_, [&](int32_t x) { return s_.nodes_[x].rack; })) return p;
      std::vector<int32_t> nodes = eligible_nodes(g);
      if (static_cast<int>(nodes.size()) >= count) {
        take_nodes(std::move(nodes));
        return p;
      }
      return fail(Error::conflict(fmt::format(
          "{} has {} schedulable {} node(s) with {} free GPUs and no other tenant; {} requested",
          where(), nodes.size(), model_name(), g, count)));
    }
    return fail(Error::conflict(fmt::format(
        "no schedulable {} node in {} with {} free GPUs and no other tenant; best has {}",
        model_name(), where(), g, best_available())));
  }

  // ---- MIG instances and shares: one unit at a time on a tentative overlay ----

  struct Tentative {
    int32_t gpu;
    GpuMode from;
    uint32_t layout_before, layout, owned;
    int milli;
  };

  Tentative* find_overlay(std::vector<Tentative>& overlay, int32_t g) const {
    for (Tentative& t : overlay) {
      if (t.gpu == g) return &t;
    }
    return nullptr;
  }

  // One instance of profile `profile` (or one share of r_.milli) on GPU g, if it fits.
  bool try_gpu(int32_t g, bool convert, std::vector<Tentative>& overlay, Placement& p) const {
    const ClusterState::Gpu& gpu = s_.gpus_[g];
    if (gpu.model != model_ || !gpu.healthy) return false;
    Tentative* t = find_overlay(overlay, g);
    const GpuMode want = r_.tier == Tier::kMig ? GpuMode::kMig : GpuMode::kTimeSliced;
    if (t == nullptr) {
      if (gpu.mode != want) {
        if (!convert || !idle(gpu)) return false;
        if (want == GpuMode::kMig && gpu.table != table_) return false;
        overlay.push_back({g, gpu.mode, 0, 0, 0, 0});
      } else {
        if (want == GpuMode::kMig && gpu.table != table_) return false;
        overlay.push_back(
            {g, gpu.mode, gpu.mig_layout, gpu.mig_layout, gpu.mig_owned, gpu.milli_used});
      }
      t = &overlay.back();
      if (!fits(*t)) {
        overlay.pop_back();
        return false;
      }
    } else if (!fits(*t)) {
      return false;
    }
    const ClusterState::Node& node = s_.nodes_[gpu.node];
    if (want == GpuMode::kTimeSliced) {
      t->milli += r_.milli;
      p.gpus.push_back({g, node.id, gpu.uuid, std::nullopt, r_.milli});
      return true;
    }
    const detail::MigTable& table = *s_.tables_[table_];
    const uint32_t free = t->layout & ~t->owned & table.profile_slots[profile_];
    int slot;
    if (free != 0) {
      slot = 31 - std::countl_zero(free);  // an existing free instance: no layout change
    } else if (int a = table.add[table.id(t->layout)][profile_]; a >= 0) {
      slot = a;
    } else {
      slot = table.add[table.id(t->owned)][profile_];  // drops unused instances
      t->layout = t->owned;
    }
    t->layout |= uint32_t{1} << slot;
    t->owned |= uint32_t{1} << slot;
    p.gpus.push_back(
        {g, node.id, gpu.uuid,
         fleet::PlacedInstance{table.catalog->profiles[profile_].name, table.slots[slot].start},
         0});
    return true;
  }

  bool fits(const Tentative& t) const {
    if (r_.tier == Tier::kShared) return t.milli + r_.milli <= 1000;
    const detail::MigTable& table = *s_.tables_[table_];
    return table.add[table.id(t.owned)][profile_] >= 0;
  }

  // One more unit anywhere allowed, preferring GPUs and nodes the request already uses.
  bool place_one(std::vector<Tentative>& overlay, Placement& p) const {
    for (std::size_t i = 0; i < overlay.size(); ++i) {
      if (try_gpu(overlay[i].gpu, false, overlay, p)) return true;
    }
    for (std::size_t i = 0; i < overlay.size(); ++i) {
      const ClusterState::Node& node = s_.nodes_[s_.gpus_[overlay[i].gpu].node];
      for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) {
        if (find_overlay(overlay, g) == nullptr && try_gpu(g, false, overlay, p)) return true;
      }
    }
    for (int32_t d : domains_) {
      const detail::Segment& seg = s_.segment(d, model_);
      const detail::Buckets& b = r_.tier == Tier::kMig ? seg.mig[profile_] : seg.shared;
      int top = static_cast<int>(b.lists.size()) - 1;
      if (r_.tier == Tier::kShared) top = std::min(top, (1000 - r_.milli) / 100);
      for (int k = top; k >= 0; --k) {
        for (int32_t g : b.lists[k]) {
          if (find_overlay(overlay, g) != nullptr || !eligible(s_.gpus_[g].node)) continue;
          if (try_gpu(g, false, overlay, p)) return true;
        }
      }
    }
    // A mode change: a free whole GPU on the fullest node, then an idle GPU of the other mode.
    for (int32_t d : domains_) {
      const detail::Segment& seg = s_.segment(d, model_);
      for (std::size_t k = 1; k < seg.whole.lists.size(); ++k) {
        for (int32_t n : seg.whole.lists[k]) {
          if (!eligible(n)) continue;
          const ClusterState::Node& node = s_.nodes_[n];
          for (int32_t g = node.first_gpu + node.gpu_count - 1; g >= node.first_gpu; --g) {
            if (s_.gpus_[g].mode != GpuMode::kWhole || find_overlay(overlay, g) != nullptr)
              continue;
            if (try_gpu(g, true, overlay, p)) return true;
          }
        }
      }
      for (int32_t g : seg.idle.lists[r_.tier == Tier::kMig ? 1 : 0]) {
        if (find_overlay(overlay, g) != nullptr || !eligible(s_.gpus_[g].node)) continue;
        if (try_gpu(g, true, overlay, p)) return true;
      }
    }
    return false;
  }

  // Every unit within one set of nodes (a node, or an NVLink domain).
  bool place_within(const std::vector<int32_t>& nodes, std::vector<Tentative>& overlay,
                    Placement& p) const {
    for (int unit = 0; unit < r_.count; ++unit) {
      bool placed = false;
      for (std::size_t i = 0; i < overlay.size() && !placed; ++i) {
        placed = try_gpu(overlay[i].gpu, false, overlay, p);
      }
      for (int convert = 0; convert < 2 && !placed; ++convert) {
        for (int32_t n : nodes) {
          if (placed) break;
          if (!eligible(n)) continue;
          const ClusterState::Node& node = s_.nodes_[n];
          for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count && !placed; ++g) {
            if (find_overlay(overlay, g) == nullptr) placed = try_gpu(g, convert == 1, overlay, p);
          }
        }
      }
      if (!placed) return false;
    }
    return true;
  }

  Placement finish(Placement p, const std::vector<Tentative>& overlay) const {
    for (const Tentative& t : overlay) {
      const ClusterState::Gpu& gpu = s_.gpus_[t.gpu];
      const GpuMode want = r_.tier == Tier::kMig ? GpuMode::kMig : GpuMode::kTimeSliced;
      if (t.from != want) p.mode_changes.push_back({t.gpu, gpu.uuid, t.from, want});
      if (want == GpuMode::kMig && t.layout != t.layout_before) {
        const detail::MigTable& table = *s_.tables_[table_];
        p.mig_changes.push_back(
            {t.gpu, gpu.uuid, table.layout_of(t.layout_before), table.layout_of(t.layout)});
      }
    }
    return p;
  }

  Result<Placement> place_units(Placement p) const {
    if (r_.tier == Tier::kMig) {
      const fleet::MigCatalog* catalog = s_.limits_.models.at(model_name()).mig_catalog;
      if (catalog == nullptr || catalog->find(r_.mig_profile) == nullptr) {
        return fail(
            Error::invalid(fmt::format("{} has no MIG profile {}", model_name(), r_.mig_profile)));
      }
      table_ = -1;
      for (std::size_t i = 0; i < s_.tables_.size(); ++i) {
        if (s_.tables_[i]->catalog == catalog) table_ = static_cast<int8_t>(i);
      }
      profile_ = s_.tables_[table_]->profile_index(r_.mig_profile);
    }
    const std::string what = r_.tier == Tier::kMig
                                 ? fmt::format("{} x {}", r_.count, r_.mig_profile)
                                 : fmt::format("{} share(s) of {} milli", r_.count, r_.milli);
    std::vector<Tentative> overlay;
    if (r_.count > 1 && (r_.same_node || r_.same_nvlink_domain)) {
      // Anchors: nodes in index order; the request must fit within the anchor's scope.
      std::vector<char> seen(s_.nodes_.size(), 0);
      for (int32_t d : domains_) {
        for (const ClusterState::Node& node : s_.nodes_) {
          const int32_t n = static_cast<int32_t>(&node - s_.nodes_.data());
          if (node.domain != d || seen[n] || !eligible(n) || entry(n) == nullptr) continue;
          std::vector<int32_t> scope{n};
          if (!r_.same_node && node.nvlink >= 0) scope = s_.nvlink_nodes_[node.nvlink];
          for (int32_t m : scope) seen[m] = 1;
          Placement attempt = p;
          overlay.clear();
          if (place_within(scope, overlay, attempt)) return finish(std::move(attempt), overlay);
        }
      }
      return fail(Error::conflict(fmt::format("no {} in {} has room for {} of {}",
                                              r_.same_node ? "node" : "NVLink domain", where(),
                                              what, model_name())));
    }
    for (int unit = 0; unit < r_.count; ++unit) {
      if (!place_one(overlay, p)) {
        return fail(Error::conflict(
            fmt::format("no schedulable {} GPU in {} has room for {}{}", model_name(), where(),
                        what, unit > 0 ? fmt::format(" (only {} fit)", unit) : "")));
      }
    }
    return finish(std::move(p), overlay);
  }

  Result<Placement> place_model() const {
    Placement p;
    p.tenant = r_.tenant;
    p.project = r_.project;
    p.tier = r_.tier;
    p.model = model_name();
    p.mig_profile = r_.mig_profile;
    p.priority = r_.priority;
    p.preemptible = r_.preemptible;
    const FleetLimits::Model& limits = s_.limits_.models.at(model_name());
    if (r_.tier == Tier::kMig &&
        (limits.mig_catalog == nullptr || limits.mig_catalog->find(r_.mig_profile) == nullptr)) {
      return fail(Error::invalid("model unsuitable"));
    }
    p.units = request_units(r_, limits);
    switch (r_.tier) {
      case Tier::kDedicatedPool:
      case Tier::kDedicatedNode:
        return place_nodes(std::move(p));
      case Tier::kDedicatedGpu:
        return place_dedicated_gpu(std::move(p));
      default:
        return place_units(std::move(p));
    }
  }

  const ClusterState& s_;
  const Request& r_;
  int32_t tenant_ = -1;
  std::vector<int32_t> domains_;
  int16_t model_ = 0;
  mutable int8_t table_ = -1;
  mutable int profile_ = 0;
};

Result<Placement> place(const ClusterState& state, const Request& request) {
  if (request.count <= 0 &&
      !(request.tier == Tier::kDedicatedNode || request.tier == Tier::kDedicatedPool)) {
    return fail(Error::invalid("count must be at least 1"));
  }
  return Placer(state, request).run();
}

}  // namespace gp::sched
