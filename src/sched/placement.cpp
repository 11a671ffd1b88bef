// place(): where a request goes. Tier rules are hard constraints checked on every candidate;
// among the candidates, best fit (fullest node or GPU first) keeps large blocks free, and
// multi-GPU requests prefer one node, then one NVLink domain, then one rack.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "sched/sched.h"

namespace gp::sched {

namespace {

// What a node offers, flattened for scoring: free milli per GPU (1000 for an idle GPU in any
// mode, since an idle GPU converts), the GPU's model, and the CPU and memory left.
struct NodeView {
  int64_t cpu_free = 0, memory_free = 0;
  int64_t cpu_total = 0;
  int64_t gpu_free = 0, gpu_total = 0;
  std::vector<int16_t> model, free;
};

int16_t gpu_free(const ClusterState::Gpu& g) { return ClusterState::free_milli(g); }

void view_of(const ClusterState& s, int32_t n, NodeView& v) {
  const ClusterState::Node& node = s.nodes()[n];
  constexpr int64_t kUntracked = int64_t{1} << 50;
  v.cpu_total = node.cpu_total;
  v.cpu_free = node.cpu_total == 0 ? kUntracked : node.cpu_total - node.cpu_used;
  v.memory_free = node.memory_total == 0 ? kUntracked : node.memory_total - node.memory_used;
  v.model.clear();
  v.free.clear();
  v.gpu_free = 0;
  v.gpu_total = 0;
  for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) {
    const ClusterState::Gpu& gpu = s.gpus()[g];
    v.model.push_back(gpu.model);
    v.free.push_back(gpu_free(gpu));
    v.gpu_free += v.free.back();
    if (gpu.healthy) v.gpu_total += 1000;
  }
}

// A workload mix grouped by GPU need: each group's members differ only in CPU and memory;
// weights are fractions of the mix.
struct MixGroup {
  int16_t gpus = 0, milli = 0;
  uint64_t mask = 0;
  double weight = 0;
  std::vector<std::tuple<int64_t, int64_t, double>> members;  // cpu, memory, weight
};

struct Mix {
  std::vector<MixGroup> groups;
  // CPU and memory the mix's GPU requests bring per milli-GPU (0: none tracked).
  double cpu_per_milli = 0, memory_per_milli = 0;
  // Weight of the stranded term in fragmentation(): 1 for the default policy, 0 for the FGD
  // paper's measure (the reported frag figure).
  double stranded_weight = 1;
  // Per GPU model (ClusterState::models() order): the share of the model's capacity that the
  // mix's model-restricted shapes would use if the fleet were filled with the mix, 0..1. Their
  // demand is spread over the models each allows in proportion to capacity.
  std::vector<double> pressure;
};

// Mix::pressure from the fleet's GPUs of each model (milli).
void model_pressure(const std::vector<double>& capacity, Mix& m) {
  m.pressure.assign(capacity.size(), 0);
  double cap_total = 0, demand_total = 0;
  for (double c : capacity) cap_total += c;
  for (const MixGroup& g : m.groups) demand_total += g.weight * g.gpus * g.milli;
  if (cap_total <= 0 || demand_total <= 0) return;
  for (const MixGroup& g : m.groups) {
    if (g.mask == 0 || g.gpus == 0) continue;
    double cap_mask = 0;
    for (std::size_t i = 0; i < capacity.size() && i < 64; ++i) {
      if (g.mask >> i & 1) cap_mask += capacity[i];
    }
    if (cap_mask <= 0) continue;
    const double demand = g.weight * g.gpus * g.milli / cap_mask;
    for (std::size_t i = 0; i < capacity.size() && i < 64; ++i) {
      if (g.mask >> i & 1) m.pressure[i] += demand * capacity[i];
    }
  }
  for (std::size_t i = 0; i < capacity.size(); ++i) {
    if (capacity[i] <= 0) continue;
    // (restricted demand on the model / all demand) / (model's capacity / all capacity)
    m.pressure[i] = std::min(1.0, m.pressure[i] / demand_total * cap_total / capacity[i]);
  }
}

// Groups `mix` (plus one extra shape when given) in shape order.
void group_mix(const std::map<ClusterState::Shape, int64_t>& mix, const ClusterState::Shape* extra,
               Mix& m) {
  // The groups already in `m` are reused, their member lists' storage with them: a placement
  // groups the live mix once per decision.
  std::vector<MixGroup>& out = m.groups;
  m.cpu_per_milli = m.memory_per_milli = 0;
  int64_t total = extra != nullptr ? 1 : 0;
  for (const auto& [shape, count] : mix) total += count;
  if (total <= 0) {
    out.clear();
    return;
  }
  std::size_t used = 0;
  auto add = [&](const ClusterState::Shape& shape, int64_t count) {
    const double w = static_cast<double>(count) / static_cast<double>(total);
    if (used == 0 || out[used - 1].gpus != shape.gpus || out[used - 1].milli != shape.milli ||
        out[used - 1].mask != shape.model_mask) {
      if (used == out.size()) out.emplace_back();
      MixGroup& g = out[used++];
      g.gpus = shape.gpus;
      g.milli = shape.milli;
      g.mask = shape.model_mask;
      g.weight = 0;
      g.members.clear();
    }
    out[used - 1].weight += w;
    out[used - 1].members.emplace_back(shape.cpu_milli, shape.memory_mib, w);
  };
  bool extra_added = extra == nullptr;
  for (const auto& [shape, count] : mix) {
    if (!extra_added && !(shape < *extra)) {
      extra_added = true;
      if (shape == *extra) {
        add(shape, count + 1);
        continue;
      }
      add(*extra, 1);
    }
    add(shape, count);
  }
  if (!extra_added) add(*extra, 1);
  out.resize(used);
  double milli = 0, cpu = 0, memory = 0;
  for (const MixGroup& g : out) {
    for (const auto& [c, mem, w] : g.members) {
      if (g.gpus == 0) continue;
      milli += w * g.gpus * g.milli;
      cpu += w * static_cast<double>(c);
      memory += w * static_cast<double>(mem);
    }
  }
  if (milli > 0) {
    m.cpu_per_milli = cpu / milli;
    m.memory_per_milli = memory / milli;
  }
}

// The weight of each group's members whose CPU and memory fit in what a node has free. It
// depends only on the node's free CPU and memory, so one node's choices share it.
void fit_weights(int64_t cpu_free, int64_t memory_free, const Mix& m, std::vector<double>& out) {
  out.assign(m.groups.size(), 0);
  for (std::size_t i = 0; i < m.groups.size(); ++i) {
    double fit = 0;
    for (const auto& [cpu, memory, w] : m.groups[i].members) {
      if (cpu <= cpu_free && memory <= memory_free) fit += w;
    }
    out[i] = fit;
  }
}

// Expected GPU milli of the node that the mix could not use (the FGD paper's node
// fragmentation): for each shape, all free milli when the shape cannot run on the node (CPU,
// memory, model or GPUs), else the free milli on GPUs too small for it. A CPU-only shape
// strands the node's free GPUs only where it cannot fit. With stranded_weight, plus the free
// milli the node's CPU or memory could not feed at the mix's CPU (memory) per milli-GPU.
// `fit` is fit_weights() of the node's free CPU and memory.
double fragmentation(const NodeView& v, const Mix& m, const std::vector<double>& fit) {
  double f = 0;
  if (m.stranded_weight > 0) {
    // Free GPU milli the node's CPU (memory) could not feed at the mix's CPU (memory) per milli.
    double stranded = 0;
    if (v.cpu_total > 0 && m.cpu_per_milli > 0) {
      stranded = std::max(stranded, static_cast<double>(v.gpu_free) -
                                        static_cast<double>(v.cpu_free) / m.cpu_per_milli);
    }
    if (m.memory_per_milli > 0 && v.memory_free < (int64_t{1} << 49)) {
      stranded = std::max(stranded, static_cast<double>(v.gpu_free) -
                                        static_cast<double>(v.memory_free) / m.memory_per_milli);
    }
    f += m.stranded_weight * stranded;
  }
  for (std::size_t gi = 0; gi < m.groups.size(); ++gi) {
    const MixGroup& group = m.groups[gi];
    int64_t usable = 0;
    int full = 0;
    int16_t best = 0;
    for (std::size_t i = 0; i < v.free.size(); ++i) {
      if (group.mask != 0 && (group.mask >> v.model[i] & 1) == 0) continue;
      const int16_t free = v.free[i];
      if (free >= group.milli) usable += free;
      if (free == 1000) ++full;
      best = std::max(best, free);
    }
    bool gpu_fit;
    if (group.gpus == 0) {
      gpu_fit = true;
      usable = v.gpu_free;
    } else if (group.milli < 1000) {
      gpu_fit = best >= group.milli;
    } else {
      gpu_fit = full >= group.gpus;
    }
    if (!gpu_fit) {
      f += group.weight * static_cast<double>(v.gpu_free);
      continue;
    }
    f += fit[gi] * static_cast<double>(v.gpu_free - usable) +
         (group.weight - fit[gi]) * static_cast<double>(v.gpu_free);
  }
  return f;
}

}  // namespace

class Placer {
 public:
  Placer(const ClusterState& s, const Request& r, const PlaceOptions& options)
      : s_(s), r_(r), options_(options) {}

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
    if (scored_shape()) return place_scored(models);
    if (r_.needs_node_resources()) {
      return fail(Error::invalid(
          "cpu_milli and memory_mib apply only to single-node requests (one share, whole GPUs "
          "on one node, or CPU-only)"));
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
    out.reserve(groups.size());
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
      return fail(Error::conflict(fmt::format(
          "no schedulable {} node in {} with {} free whole GPU(s)", model_name(), where(), n)));
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
    return fail(Error::conflict(fmt::format("{} has fewer than {} free {} GPUs for this tenant",
                                            where(), n, model_name())));
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
          "{} has fewer than {} schedulable {} nodes with {} free GPUs and no other tenant",
          where(), count, model_name(), g)));
    }
    return fail(
        Error::conflict(fmt::format("no schedulable {} node in {} with {} free GPUs and no other "
                                    "tenant",
                                    model_name(), where(), g)));
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
         vocab::PlacedInstance{table.catalog->profiles[profile_].name, table.slots[slot].start},
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
      const vocab::MigCatalog* catalog = s_.limits_.models.at(model_name()).mig_catalog;
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
        return fail(Error::conflict(fmt::format("no schedulable {} GPU in {} has room for {}",
                                                model_name(), where(), what)));
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

  // ---- single-node shapes under a placement policy ----
  // One share, whole GPUs on one node, or CPU-only: every candidate (node, GPUs) is scored by
  // the policy, so the same code serves the live server, the simulator and the benchmarks.

  bool scored_shape() const {
    if (r_.cpu_only()) return true;
    if (r_.tier == Tier::kShared) return r_.count == 1;
    if (r_.tier == Tier::kDedicatedGpu) return r_.count == 1 || r_.same_node;
    return false;
  }

  void build_mix() const {
    // The request being placed is part of the workload the cluster must keep room for.
    ClusterState::Shape self{
        .cpu_milli = r_.cpu_milli, .memory_mib = r_.memory_mib, .model_mask = model_mask()};
    if (r_.tier == Tier::kShared) {
      self.gpus = 1;
      self.milli = static_cast<int16_t>(r_.milli);
    } else if (!r_.cpu_only()) {
      self.gpus = static_cast<int16_t>(r_.count);
      self.milli = 1000;
    }
    group_mix(options_.workload != nullptr ? *options_.workload : s_.mix_,
              options_.workload != nullptr ? nullptr : &self, mix_);
    capacity_.assign(s_.models_.size(), 0);
    for (std::size_t m = 0; m < s_.models_.size(); ++m) {
      if (auto it = s_.limits_.models.find(s_.models_[m]); it != s_.limits_.models.end())
        capacity_[m] = 1000.0 * static_cast<double>(it->second.total_gpus);
    }
    model_pressure(capacity_, mix_);
  }

  uint64_t model_mask() const {
    if (r_.models.empty() || s_.models_.size() > 64) return 0;
    uint64_t mask = 0;
    for (const std::string& name : r_.models) {
      const int32_t m = s_.find_model(name);
      if (m >= 0) mask |= uint64_t{1} << m;
    }
    return mask;
  }

  // One way to place the request on a node: the GPUs it takes (empty for CPU-only).
  struct Choice {
    int32_t node = -1;
    int16_t model = -1;
    std::vector<int32_t> gpus;
  };

  bool model_allowed(int16_t m, uint64_t mask) const { return mask == 0 || (mask >> m & 1); }

  // Every distinct choice on node n for the request, tightest GPU first.
  void choices_on(int32_t n, uint64_t mask, std::vector<Choice>& out) const {
    const ClusterState::Node& node = s_.nodes_[n];
    if (r_.cpu_only()) {
      out.push_back({n, -1, {}});
      return;
    }
    if (r_.tier == Tier::kShared) {
      std::vector<std::pair<int, int32_t>> fits;  // (rank, gpu): used milli desc, whole before MIG
      for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) {
        const ClusterState::Gpu& gpu = s_.gpus_[g];
        if (!gpu.healthy || !model_allowed(gpu.model, mask)) continue;
        if (gpu.mode == GpuMode::kTimeSliced) {
          if (gpu.milli_used + r_.milli <= 1000) fits.emplace_back(-gpu.milli_used, g);
        } else if (idle(gpu)) {
          fits.emplace_back(gpu.mode == GpuMode::kWhole ? 1 : 2, g);
        }
      }
      std::ranges::sort(fits, [](auto a, auto b) {
        return a.first != b.first ? a.first < b.first : a.second > b.second;
      });
      // GPUs with the same model and free room score alike: keep the first of each.
      std::vector<std::pair<int16_t, int16_t>> seen;
      for (const auto& [rank, g] : fits) {
        const ClusterState::Gpu& gpu = s_.gpus_[g];
        const std::pair<int16_t, int16_t> key(gpu.model, gpu_free(gpu));
        if (std::ranges::find(seen, key) != seen.end()) continue;
        seen.push_back(key);
        out.push_back({n, gpu.model, {g}});
      }
      return;
    }
    for (const ClusterState::NodeModel& e : node.models) {
      if (!model_allowed(e.model, mask) || e.free_whole + e.convertible < r_.count) continue;
      Choice c{n, e.model, {}};
      for (int pass = 0; pass < 2; ++pass) {  // whole mode first (no mode change), lowest index
        for (int32_t g = node.first_gpu;
             g < node.first_gpu + node.gpu_count && static_cast<int>(c.gpus.size()) < r_.count;
             ++g) {
          const ClusterState::Gpu& gpu = s_.gpus_[g];
          if (gpu.model != e.model || !idle(gpu) || (gpu.mode == GpuMode::kWhole) != (pass == 0))
            continue;
          c.gpus.push_back(g);
        }
      }
      out.push_back(std::move(c));
    }
  }

  // Candidate nodes of one pool domain, in the best-fit order of the free-capacity indexes
  // (fullest first), each once. The allowed models come in groups, each walked in full before
  // the next; within a group they are interleaved level by level, so a cap on the nodes looked
  // at does not favour the model that happens to come first.
  template <typename Visit>
  void candidate_nodes(int32_t d, const std::vector<std::vector<int16_t>>& model_groups,
                       std::vector<char>& seen, Visit&& visit) const {
    auto offer = [&](int32_t n) -> bool {  // false: stop
      if (seen[n]) return true;
      seen[n] = 1;
      if (!eligible(n) || !s_.nodes_[n].fits(r_.cpu_milli, r_.memory_mib)) return true;
      return visit(n);
    };
    if (r_.cpu_only()) {
      // Nodes with the fewest idle GPUs first: CPU and memory taken there strand the least GPU
      // capacity. One counting pass over the domain's nodes.
      std::vector<std::vector<int32_t>> by_idle;
      for (int32_t n = 0; n < static_cast<int32_t>(s_.nodes_.size()); ++n) {
        const ClusterState::Node& node = s_.nodes_[n];
        if (node.domain != d || !node.schedulable) continue;
        std::size_t idle_gpus = 0;
        for (const ClusterState::NodeModel& e : node.models) {
          idle_gpus += static_cast<std::size_t>(e.free_whole + e.convertible);
        }
        if (by_idle.size() <= idle_gpus) by_idle.resize(idle_gpus + 1);
        by_idle[idle_gpus].push_back(n);
      }
      for (const std::vector<int32_t>& nodes : by_idle) {
        for (int32_t n : nodes) {
          if (!offer(n)) return;
        }
      }
      return;
    }
    // Each group of models in turn, its models interleaved level by level.
    for (const std::vector<int16_t>& group : model_groups) {
      if (!walk_models(d, group, offer)) return;
    }
  }

  // The GPU indexes of one domain for the request, over `models`; false when offer() stopped.
  template <typename Offer>
  bool walk_models(int32_t d, const std::vector<int16_t>& models, Offer& offer) const {
    // Nodes of a node index from bucket `from` up (fewest free GPUs first), models interleaved.
    auto each_level = [&](detail::Buckets detail::Segment::*which, std::size_t from) -> bool {
      std::size_t levels = 0;
      for (int16_t m : models) levels = std::max(levels, (s_.segment(d, m).*which).lists.size());
      for (std::size_t k = from; k < levels; ++k) {
        for (int16_t m : models) {
          const detail::Buckets& b = s_.segment(d, m).*which;
          if (k >= b.lists.size()) continue;
          for (int32_t n : b.lists[k]) {
            if (!offer(n)) return false;
          }
        }
      }
      return true;
    };
    if (r_.tier == Tier::kShared) {
      // Time-sliced GPUs the share fits on, fullest first (bucket = used milli / 100).
      const int top = (1000 - r_.milli) / 100;
      for (int k = top; k >= 0; --k) {
        for (int16_t m : models) {
          const detail::Buckets& b = s_.segment(d, m).shared;
          if (k >= static_cast<int>(b.lists.size())) continue;
          for (int32_t g : b.lists[k]) {
            if (s_.gpus_[g].milli_used + r_.milli <= 1000 && !offer(s_.gpus_[g].node)) return false;
          }
        }
      }
      if (!each_level(&detail::Segment::whole, 1)) return false;
      for (int16_t m : models) {
        for (int32_t g : s_.segment(d, m).idle.lists[0]) {
          if (!offer(s_.gpus_[g].node)) return false;
        }
      }
      return true;
    }
    for (auto which : {&detail::Segment::whole, &detail::Segment::avail}) {
      if (!each_level(which, static_cast<std::size_t>(r_.count))) return false;
    }
    return true;
  }

  static uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

  // A choice's score; lower is better. Default: the increase in node fragmentation; best-fit:
  // 100 minus the 0..100 integer fullness left after placing (CPU and GPU weighed alike).
  double score(const NodeView& before, double frag_before, const std::vector<double>& fit_after,
               const Choice& c, NodeView& after) const {
    after = before;
    after.cpu_free -= r_.cpu_milli;
    after.memory_free -= r_.memory_mib;
    const ClusterState::Node& node = s_.nodes_[c.node];
    for (int32_t g : c.gpus) {
      const int16_t take = r_.tier == Tier::kShared ? static_cast<int16_t>(r_.milli) : 1000;
      after.free[g - node.first_gpu] = static_cast<int16_t>(after.free[g - node.first_gpu] - take);
      after.gpu_free -= take;
    }
    if (options_.policy == PlacementPolicy::kDefault) {
      // The fragmentation it adds, plus the capacity it takes that model-restricted requests of
      // the mix are expected to need (both in milli-GPU).
      double reserved = 0;
      for (int32_t g : c.gpus) {
        reserved += (r_.tier == Tier::kShared ? r_.milli : 1000) * mix_.pressure[s_.gpus_[g].model];
      }
      return fragmentation(after, mix_, fit_after) - frag_before + reserved;
    }
    double left = 0, dims = 0;
    if (after.gpu_total > 0) {
      left += static_cast<double>(after.gpu_free) / static_cast<double>(after.gpu_total);
      ++dims;
    }
    if (after.cpu_total > 0) {
      left += static_cast<double>(after.cpu_free) / static_cast<double>(after.cpu_total);
      ++dims;
    }
    const double fullness = dims == 0 ? 0 : 1 - left / dims;
    return 100 - std::floor(100 * fullness + 0.5);
  }

  Result<Placement> place_scored(const std::vector<int16_t>& models) const {
    const uint64_t mask = model_mask();
    // Default: models grouped by Mix::pressure, the least needed by the mix's restricted
    // requests first, so a capped walk reaches the nodes where the request costs them least.
    // Other policies (and a mix without restricted requests): one group.
    std::vector<std::vector<int16_t>> walk;
    if (options_.policy == PlacementPolicy::kDefault) {
      build_mix();
      std::vector<int16_t> order(models);
      std::ranges::stable_sort(
          order, [&](int16_t a, int16_t b) { return mix_.pressure[a] < mix_.pressure[b]; });
      for (int16_t m : order) {
        if (walk.empty() || mix_.pressure[walk.back().front()] != mix_.pressure[m])
          walk.emplace_back();
        walk.back().push_back(m);
      }
    } else {
      walk.push_back(models);
    }
    std::vector<char> seen(s_.nodes_.size(), 0);
    std::vector<Choice> choices;
    NodeView before, after;
    std::vector<double> fit_before, fit_after;
    int visited = 0;
    for (int32_t d : domains_) {
      Choice best;
      double best_score = 0;
      uint64_t best_tie = 0;
      std::vector<int32_t> feasible;  // random: every feasible node
      // At most 4 x max_scored_nodes entries: a flat list searched in order beats a hash set.
      std::vector<uint64_t> digests;
      int scored = 0;
      const int limit =
          options_.policy == PlacementPolicy::kDefault ? options_.max_scored_nodes : 0;
      // Nodes looked at (scored or skipped as identical) are capped too, at four times the
      // scored cap, so a fleet of many identical nodes does not make a decision walk them all.
      candidate_nodes(d, walk, seen, [&](int32_t n) {
        if (limit > 0 && ++visited > 4 * limit) return false;
        // A node identical in what it offers to one already looked at scores alike: skip it
        // (the first, earlier in best-fit order, keeps the tie). It does not count as scored.
        if (options_.policy == PlacementPolicy::kDefault) {
          const uint64_t digest = s_.nodes_[n].offer_digest;
          if (std::ranges::find(digests, digest) != digests.end()) return true;
          digests.push_back(digest);
        }
        if (options_.policy != PlacementPolicy::kRandom) view_of(s_, n, before);
        choices.clear();
        choices_on(n, mask, choices);
        if (choices.empty()) return true;
        if (options_.policy == PlacementPolicy::kRandom) {
          feasible.push_back(n);
          return true;
        }
        double frag_before = 0;
        if (options_.policy == PlacementPolicy::kDefault) {
          fit_weights(before.cpu_free, before.memory_free, mix_, fit_before);
          frag_before = fragmentation(before, mix_, fit_before);
          fit_weights(before.cpu_free - r_.cpu_milli, before.memory_free - r_.memory_mib, mix_,
                      fit_after);
        }
        const uint64_t tie =
            options_.policy == PlacementPolicy::kBestFit ? mix64(options_.seed ^ mix64(n)) : 0;
        for (Choice& c : choices) {
          const double sc = score(before, frag_before, fit_after, c, after);
          // Default: strictly better wins, so ties keep the best-fit index order.
          constexpr double kEps = 1e-9;
          if (best.node < 0 || sc < best_score - kEps ||
              (options_.policy == PlacementPolicy::kBestFit && sc == best_score &&
               c.node != best.node && tie < best_tie)) {
            best = std::move(c);
            best_score = sc;
            best_tie = tie;
          }
        }
        return limit == 0 || ++scored < limit;
      });
      if (options_.policy == PlacementPolicy::kRandom && !feasible.empty()) {
        // Nodes uniformly, then among the node's fitting GPUs.
        std::ranges::sort(feasible);
        const uint64_t a = mix64(options_.draw), b = mix64(a);
        const int32_t n = feasible[a % feasible.size()];
        choices.clear();
        if (r_.cpu_only()) {
          best = {n, -1, {}};
        } else if (r_.tier == Tier::kShared) {
          const ClusterState::Node& node = s_.nodes_[n];
          std::vector<int32_t> fit;
          for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) {
            const ClusterState::Gpu& gpu = s_.gpus_[g];
            if (!gpu.healthy || !model_allowed(gpu.model, mask)) continue;
            if (gpu.mode == GpuMode::kTimeSliced ? gpu.milli_used + r_.milli <= 1000 : idle(gpu))
              fit.push_back(g);
          }
          const int32_t g = fit[b % fit.size()];
          best = {n, s_.gpus_[g].model, {g}};
        } else {
          choices_on(n, mask, choices);
          Choice c = choices[b % choices.size()];  // a model of the node, then its GPUs
          const ClusterState::Node& node = s_.nodes_[n];
          std::vector<int32_t> idle_gpus;
          for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) {
            if (s_.gpus_[g].model == c.model && idle(s_.gpus_[g])) idle_gpus.push_back(g);
          }
          uint64_t x = b;
          for (int i = 0; i < r_.count; ++i) {  // a uniform k-subset (partial Fisher-Yates)
            x = mix64(x);
            const std::size_t j = i + x % (idle_gpus.size() - i);
            std::swap(idle_gpus[i], idle_gpus[j]);
          }
          c.gpus.assign(idle_gpus.begin(), idle_gpus.begin() + r_.count);
          std::ranges::sort(c.gpus);
          best = std::move(c);
        }
      }
      if (best.node >= 0) return placement_of(best, mask);
    }
    if (r_.tier == Tier::kDedicatedGpu && !r_.cpu_only()) {
      std::string reasons;
      for (int16_t m : models) {
        model_ = m;
        if (!reasons.empty()) reasons += "; ";
        reasons += fmt::format("no schedulable {} node in {} with {} free whole GPU(s)",
                               model_name(), where(), r_.count);
        if (r_.needs_node_resources()) {
          reasons += fmt::format(" (and {} milli-CPU, {} MiB free)", r_.cpu_milli, r_.memory_mib);
        }
      }
      if (!reasons.empty()) return fail(Error::conflict(std::move(reasons)));
    }
    std::string what;
    if (r_.cpu_only()) {
      what = fmt::format("{} milli-CPU and {} MiB", r_.cpu_milli, r_.memory_mib);
    } else if (r_.tier == Tier::kShared) {
      what = fmt::format("a share of {} milli", r_.milli);
    } else {
      what = fmt::format("{} free whole GPU(s) on one node", r_.count);
    }
    if (r_.needs_node_resources() && !r_.cpu_only()) {
      what += fmt::format(" with {} milli-CPU and {} MiB", r_.cpu_milli, r_.memory_mib);
    }
    std::string names;
    for (int16_t m : models) names += names.empty() ? s_.models_[m] : "/" + s_.models_[m];
    return fail(Error::conflict(fmt::format("no schedulable node in {} has room for {}{}", where(),
                                            what, names.empty() ? "" : " of " + names)));
  }

  Placement placement_of(const Choice& c, uint64_t mask) const {
    Placement p;
    p.tenant = r_.tenant;
    p.project = r_.project;
    p.tier = r_.tier;
    p.priority = r_.priority;
    p.preemptible = r_.preemptible;
    p.model_mask = mask;
    const ClusterState::Node& node = s_.nodes_[c.node];
    if (r_.needs_node_resources()) {
      p.host = c.node;
      p.host_node = node.id;
      p.cpu_milli = r_.cpu_milli;
      p.memory_mib = r_.memory_mib;
    }
    if (c.model >= 0) {
      p.model = s_.models_[c.model];
      p.units = request_units(r_, s_.limits_.models.at(p.model));
    }
    const GpuMode want = r_.tier == Tier::kShared ? GpuMode::kTimeSliced : GpuMode::kWhole;
    for (int32_t g : c.gpus) {
      const ClusterState::Gpu& gpu = s_.gpus_[g];
      if (gpu.mode != want) p.mode_changes.push_back({g, gpu.uuid, gpu.mode, want});
      p.gpus.push_back(
          {g, node.id, gpu.uuid, std::nullopt, r_.tier == Tier::kShared ? r_.milli : 0});
    }
    return p;
  }

  const ClusterState& s_;
  const Request& r_;
  const PlaceOptions& options_;
  // Scratch kept by the thread between decisions, so that a decision reuses its storage.
  static Mix& scratch_mix() {
    static thread_local Mix mix;
    return mix;
  }
  Mix& mix_ = scratch_mix();
  mutable std::vector<double> capacity_;
  int32_t tenant_ = -1;
  std::vector<int32_t> domains_;
  mutable int16_t model_ = 0;
  mutable int8_t table_ = -1;
  mutable int profile_ = 0;
};

Result<Placement> place(const ClusterState& state, const Request& request,
                        const PlaceOptions& options) {
  if (request.cpu_milli < 0 || request.memory_mib < 0) {
    return fail(Error::invalid("cpu_milli and memory_mib must not be negative"));
  }
  if (request.count <= 0 && !request.cpu_only() &&
      !(request.tier == Tier::kDedicatedNode || request.tier == Tier::kDedicatedPool)) {
    return fail(Error::invalid("count must be at least 1"));
  }
  if (request.tier == Tier::kShared && (request.milli < 1 || request.milli > 1000)) {
    return fail(
        Error::invalid(fmt::format("milli must be 1..1000 per share; got {}", request.milli)));
  }
  if (options.max_scored_nodes < 0) return fail(Error::invalid("max_scored_nodes is negative"));
  return Placer(state, request, options).run();
}

double fragmentation_milli(const ClusterState& state,
                           const std::map<ClusterState::Shape, int64_t>& mix) {
  Mix groups;
  group_mix(mix, nullptr, groups);
  groups.stranded_weight = 0;  // the FGD paper's measure only
  NodeView view;
  std::vector<double> fit;
  double total = 0;
  for (int32_t n = 0; n < static_cast<int32_t>(state.nodes().size()); ++n) {
    if (!state.nodes()[n].schedulable) continue;
    view_of(state, n, view);
    fit_weights(view.cpu_free, view.memory_free, groups, fit);
    total += fragmentation(view, groups, fit);
  }
  return total;
}

std::string_view policy_name(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kDefault:
      return "default";
    case PlacementPolicy::kBestFit:
      return "best-fit";
    case PlacementPolicy::kRandom:
      return "random";
  }
  return "unknown";
}

Result<PlacementPolicy> parse_policy(std::string_view name) {
  for (PlacementPolicy p :
       {PlacementPolicy::kDefault, PlacementPolicy::kBestFit, PlacementPolicy::kRandom}) {
    if (policy_name(p) == name) return p;
  }
  return fail(Error::invalid(
      fmt::format("unknown placement policy \"{}\"; use default, best-fit or random", name)));
}

}  // namespace gp::sched
