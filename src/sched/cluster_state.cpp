// ClusterState: the fleet in flat vectors, its free-capacity indexes, and apply/release.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>

#include "sched/sched.h"

namespace gp::sched {
namespace {

constexpr int kMigBuckets = 8;      // owned compute slices 0..7
constexpr int kSharedBuckets = 10;  // used milli / 100, 0..9

int32_t intern(std::vector<std::string>& names, std::unordered_map<std::string, int32_t>& ids,
               const std::string& name) {
  if (name.empty()) return -1;
  auto [it, inserted] = ids.try_emplace(name, static_cast<int32_t>(names.size()));
  if (inserted) names.push_back(name);
  return it->second;
}

bool gpu_idle(const ClusterState::Gpu& g) {
  return g.whole_owner < 0 && g.mig_owned == 0 && g.milli_used == 0;
}

}  // namespace

Result<ClusterState> ClusterState::build(std::vector<NodeSpec> specs) {
  ClusterState s;
  std::set<std::string> model_names;
  for (const NodeSpec& n : specs) {
    for (const GpuSpec& g : n.gpus) {
      if (g.model.empty()) return fail(Error::invalid(fmt::format("GPU {} has no model", g.uuid)));
      model_names.insert(g.model);
    }
  }
  s.models_.assign(model_names.begin(), model_names.end());
  std::unordered_map<std::string, int32_t> rack_ids, nvlink_ids;
  std::map<const vocab::MigCatalog*, int8_t> table_ids;
  int max_gpus = 0;

  // Pool owners get a domain each, in order of first appearance.
  for (const NodeSpec& n : specs) {
    if (n.pool_owner.empty()) continue;
    const int32_t t = s.intern_tenant(n.pool_owner);
    if (!s.tenant_domain_.contains(t)) s.tenant_domain_[t] = s.domains_++;
  }

  for (NodeSpec& spec : specs) {
    if (spec.id.empty()) return fail(Error::invalid("node without id"));
    const int32_t node_number = static_cast<int32_t>(s.nodes_.size());
    if (!s.node_ids_.try_emplace(spec.id, node_number).second) {
      return fail(Error::invalid(fmt::format("duplicate node id {}", spec.id)));
    }
    Node node;
    node.id = spec.id;
    node.name = spec.name.empty() ? spec.id : spec.name;
    node.pool_id = spec.pool_id;
    node.pool_name = spec.pool_name.empty() ? spec.pool_id : spec.pool_name;
    node.pool_owner = spec.pool_owner.empty() ? -1 : s.find_tenant(spec.pool_owner);
    node.domain = node.pool_owner < 0 ? 0 : s.tenant_domain_.at(node.pool_owner);
    if (node.pool_owner >= 0) {
      auto& pools = s.tenant_pools_[node.pool_owner];
      std::pair<std::string, std::string> pool(node.pool_id, node.pool_name);
      if (std::ranges::find(pools, pool) == pools.end()) pools.push_back(std::move(pool));
    }
    node.schedulable = spec.schedulable;
    if (spec.cpu_milli < 0 || spec.memory_mib < 0) {
      return fail(
          Error::invalid(fmt::format("node {}: negative cpu_milli or memory_mib", spec.id)));
    }
    node.cpu_total = spec.cpu_milli;
    node.memory_total = spec.memory_mib;
    node.rack = intern(s.rack_names_, rack_ids, spec.rack);
    node.nvlink = intern(s.nvlink_names_, nvlink_ids, spec.nvlink_domain);
    node.first_gpu = static_cast<int32_t>(s.gpus_.size());
    node.gpu_count = static_cast<int32_t>(spec.gpus.size());
    max_gpus = std::max(max_gpus, node.gpu_count);
    std::map<std::string, int> per_model;
    for (GpuSpec& g : spec.gpus) {
      if (g.uuid.empty())
        return fail(Error::invalid(fmt::format("node {}: GPU without uuid", spec.id)));
      if (!s.gpu_ids_.try_emplace(g.uuid, static_cast<int32_t>(s.gpus_.size())).second) {
        return fail(Error::invalid(fmt::format("duplicate GPU uuid {}", g.uuid)));
      }
      Gpu gpu;
      gpu.uuid = g.uuid;
      gpu.node = node_number;
      gpu.index = static_cast<int16_t>(g.index);
      gpu.model = static_cast<int16_t>(s.find_model(g.model));
      gpu.mode = g.mode;
      gpu.healthy = g.healthy;
      gpu.slot_owner.fill(-1);
      gpu.mig_pos.fill(-1);
      gpu.mig_bucket.fill(-1);
      FleetLimits::Model& limit = s.limits_.models[g.model];
      if (g.mig_catalog != nullptr) {
        if (limit.mig_catalog != nullptr && limit.mig_catalog != g.mig_catalog) {
          return fail(Error::invalid(
              fmt::format("GPU {}: model {} has two MIG catalogs", g.uuid, g.model)));
        }
        limit.mig_catalog = g.mig_catalog;
        auto [it, inserted] = table_ids.try_emplace(g.mig_catalog, 0);
        if (inserted) {
          if (g.mig_catalog->profiles.size() > detail::kMaxMigProfiles) {
            return fail(Error::invalid(
                fmt::format("catalog {} has too many profiles", g.mig_catalog->model)));
          }
          const detail::MigTable& table = detail::mig_table(*g.mig_catalog);
          if (table.slots.size() > 20) {
            return fail(Error::invalid(
                fmt::format("catalog {} has too many placements", g.mig_catalog->model)));
          }
          it->second = static_cast<int8_t>(s.tables_.size());
          s.tables_.push_back(&table);
        }
        gpu.table = it->second;
      }
      if (g.mode == GpuMode::kMig) {
        if (gpu.table < 0) {
          return fail(
              Error::invalid(fmt::format("GPU {} is in MIG mode without a MIG catalog", g.uuid)));
        }
        GP_TRY_VOID(vocab::validate(*g.mig_catalog, g.mig_layout));
        const uint32_t mask = s.tables_[gpu.table]->mask_of(g.mig_layout);
        if (mask == ~0u || s.tables_[gpu.table]->id(mask) < 0) {
          return fail(Error::invalid(fmt::format("GPU {}: MIG layout not in catalog", g.uuid)));
        }
        gpu.mig_layout = mask;
      } else if (!g.mig_layout.empty()) {
        return fail(
            Error::invalid(fmt::format("GPU {} has MIG instances but is not in MIG mode", g.uuid)));
      }
      ++per_model[g.model];
      s.gpus_.push_back(std::move(gpu));
    }
    for (const auto& [model, count] : per_model) {
      FleetLimits::Model& limit = s.limits_.models[model];
      limit.max_gpus_per_node = std::max(limit.max_gpus_per_node, count);
      limit.total_gpus += count;
      ++limit.nodes;
      NodeModel entry;
      entry.model = static_cast<int16_t>(s.find_model(model));
      node.models.push_back(entry);
    }
    if (node.nvlink >= 0) {
      s.nvlink_nodes_.resize(s.nvlink_names_.size());
      s.nvlink_nodes_[node.nvlink].push_back(node_number);
    }
    if (node.rack >= 0) {
      s.rack_nodes_.resize(s.rack_names_.size());
      s.rack_nodes_[node.rack].push_back(node_number);
    }
    s.nodes_.push_back(std::move(node));
  }
  s.limits_.nodes = static_cast<int64_t>(s.nodes_.size());

  s.segments_.resize(static_cast<std::size_t>(s.domains_) * s.models_.size());
  for (detail::Segment& seg : s.segments_) {
    seg.whole.lists.resize(max_gpus + 1);
    seg.avail.lists.resize(max_gpus + 1);
    for (detail::Buckets& b : seg.mig) b.lists.resize(kMigBuckets);
    seg.shared.lists.resize(kSharedBuckets);
    seg.idle.lists.resize(2);
  }
  for (int32_t n = 0; n < static_cast<int32_t>(s.nodes_.size()); ++n) {
    s.recount_node(n);
    s.index_node(n);
    const Node& node = s.nodes_[n];
    for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) s.index_gpu(g);
  }
  return s;
}

int32_t ClusterState::intern_tenant(const std::string& tenant) {
  return intern(tenants_, tenant_ids_, tenant);
}

int32_t ClusterState::find_tenant(std::string_view tenant) const {
  auto it = tenant_ids_.find(std::string(tenant));
  return it == tenant_ids_.end() ? -1 : it->second;
}

int32_t ClusterState::find_model(std::string_view model) const {
  auto it = std::ranges::lower_bound(models_, model);
  return it != models_.end() && *it == model ? static_cast<int32_t>(it - models_.begin()) : -1;
}

std::vector<std::pair<std::string, std::string>> ClusterState::pools_of(
    std::string_view tenant) const {
  auto it = tenant_pools_.find(find_tenant(tenant));
  return it == tenant_pools_.end() ? std::vector<std::pair<std::string, std::string>>{}
                                   : it->second;
}

int32_t ClusterState::domain_of(int32_t tenant) const {
  if (tenant < 0) return -1;
  auto it = tenant_domain_.find(tenant);
  return it == tenant_domain_.end() ? -1 : it->second;
}

vocab::Layout ClusterState::mig_layout(int32_t gpu) const {
  const Gpu& g = gpus_[gpu];
  if (g.mode != GpuMode::kMig || g.table < 0) return {};
  return tables_[g.table]->layout_of(g.mig_layout);
}

std::vector<std::string> ClusterState::tenants_on_gpu(int32_t gpu) const {
  const Gpu& g = gpus_[gpu];
  std::vector<std::string> out;
  auto add = [&](int32_t slot) { out.push_back(allocs_[slot].placement.tenant); };
  if (g.whole_owner >= 0) add(g.whole_owner);
  for (int32_t owner : g.slot_owner) {
    if (owner >= 0) add(owner);
  }
  for (const auto& [slot, milli] : g.shares) add(slot);
  std::ranges::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const Allocation* ClusterState::find(std::string_view allocation_id) const {
  auto it = alloc_ids_.find(std::string(allocation_id));
  return it == alloc_ids_.end() ? nullptr : &allocs_[it->second];
}

int16_t ClusterState::free_milli(const Gpu& g) {
  if (!g.healthy) return 0;
  switch (g.mode) {
    case GpuMode::kWhole:
      return g.whole_owner < 0 ? 1000 : 0;
    case GpuMode::kTimeSliced:
      return static_cast<int16_t>(1000 - g.milli_used);
    default:
      return g.mig_owned == 0 ? 1000 : 0;
  }
}

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void ClusterState::recount_node(int32_t n) {
  Node& node = nodes_[n];
  for (NodeModel& m : node.models) m.gpus = m.free_whole = m.convertible = 0;
  // The GPUs enter the digest as a sum of mixed terms, so their order does not matter.
  uint64_t gpu_sum = 0;
  for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) {
    const Gpu& gpu = gpus_[g];
    gpu_sum +=
        mix64(static_cast<uint64_t>(gpu.model) << 16 | static_cast<uint16_t>(free_milli(gpu)));
    if (!gpu.healthy) continue;
    NodeModel* m = nullptr;
    for (NodeModel& entry : node.models) {
      if (entry.model == gpu.model) m = &entry;
    }
    ++m->gpus;
    if (!gpu_idle(gpu)) continue;
    if (gpu.mode == GpuMode::kWhole) {
      ++m->free_whole;
    } else {
      ++m->convertible;
    }
  }
  node.offer_digest = mix64(mix64(static_cast<uint64_t>(node.cpu_total - node.cpu_used)) ^
                            mix64(static_cast<uint64_t>(node.memory_total - node.memory_used)) ^
                            gpu_sum ^ static_cast<uint64_t>(node.gpu_count));
}

ClusterState::NodeModel& ClusterState::node_model(int32_t node, int16_t model) {
  for (NodeModel& e : nodes_[node].models)
    if (e.model == model) return e;
  return nodes_[node].models.front();
}

void ClusterState::index_node(int32_t n) {
  Node& node = nodes_[n];
  if (!node.schedulable) return;
  for (NodeModel& m : node.models) {
    detail::Segment& seg = segment(node.domain, m.model);
    const int16_t model = m.model;
    auto entry = [this, model](int32_t item) -> NodeModel& { return node_model(item, model); };
    if (m.free_whole > 0) {
      m.whole_bucket = m.free_whole;
      seg.whole.insert(m.whole_bucket, n,
                       [&](int32_t i) -> int32_t& { return entry(i).whole_pos; });
    }
    const int avail = m.free_whole + m.convertible;
    if (avail > 0) {
      m.avail_bucket = static_cast<int16_t>(avail);
      seg.avail.insert(avail, n, [&](int32_t i) -> int32_t& { return entry(i).avail_pos; });
    }
  }
}

void ClusterState::unindex_node(int32_t n) {
  Node& node = nodes_[n];
  for (NodeModel& m : node.models) {
    detail::Segment& seg = segment(node.domain, m.model);
    const int16_t model = m.model;
    auto entry = [this, model](int32_t item) -> NodeModel& { return node_model(item, model); };
    if (m.whole_bucket >= 0) {
      seg.whole.erase(m.whole_bucket, n, [&](int32_t i) -> int32_t& { return entry(i).whole_pos; });
      m.whole_bucket = -1;
    }
    if (m.avail_bucket >= 0) {
      seg.avail.erase(m.avail_bucket, n, [&](int32_t i) -> int32_t& { return entry(i).avail_pos; });
      m.avail_bucket = -1;
    }
  }
}

void ClusterState::index_gpu(int32_t g) {
  Gpu& gpu = gpus_[g];
  const Node& node = nodes_[gpu.node];
  if (!gpu.healthy || !node.schedulable) return;
  detail::Segment& seg = segment(node.domain, gpu.model);
  if (gpu.mode == GpuMode::kMig) {
    const detail::MigTable& table = *tables_[gpu.table];
    const int16_t owned = table.id(gpu.mig_owned);
    for (std::size_t p = 0; p < table.catalog->profiles.size(); ++p) {
      if (table.add[owned][p] < 0) continue;
      gpu.mig_bucket[p] = table.compute[owned];
      seg.mig[p].insert(gpu.mig_bucket[p], g,
                        [this, p](int32_t i) -> int32_t& { return gpus_[i].mig_pos[p]; });
    }
    if (gpu.mig_owned == 0) {
      gpu.idle_bucket = 0;
      seg.idle.insert(0, g, [this](int32_t i) -> int32_t& { return gpus_[i].idle_pos; });
    }
  } else if (gpu.mode == GpuMode::kTimeSliced) {
    if (gpu.milli_used < 1000) {
      gpu.shared_bucket = static_cast<int8_t>(gpu.milli_used / 100);
      seg.shared.insert(gpu.shared_bucket, g,
                        [this](int32_t i) -> int32_t& { return gpus_[i].shared_pos; });
    }
    if (gpu.milli_used == 0) {
      gpu.idle_bucket = 1;
      seg.idle.insert(1, g, [this](int32_t i) -> int32_t& { return gpus_[i].idle_pos; });
    }
  }
}

void ClusterState::unindex_gpu(int32_t g) {
  Gpu& gpu = gpus_[g];
  detail::Segment& seg = segment(nodes_[gpu.node].domain, gpu.model);
  for (std::size_t p = 0; p < detail::kMaxMigProfiles; ++p) {
    if (gpu.mig_bucket[p] < 0) continue;
    seg.mig[p].erase(gpu.mig_bucket[p], g,
                     [this, p](int32_t i) -> int32_t& { return gpus_[i].mig_pos[p]; });
    gpu.mig_bucket[p] = -1;
  }
  if (gpu.shared_bucket >= 0) {
    seg.shared.erase(gpu.shared_bucket, g,
                     [this](int32_t i) -> int32_t& { return gpus_[i].shared_pos; });
    gpu.shared_bucket = -1;
  }
  if (gpu.idle_bucket >= 0) {
    seg.idle.erase(gpu.idle_bucket, g, [this](int32_t i) -> int32_t& { return gpus_[i].idle_pos; });
    gpu.idle_bucket = -1;
  }
}

void ClusterState::add_node_tenant(int32_t n, int32_t tenant, int delta) {
  auto& tenants = nodes_[n].tenants;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    if (tenants[i].first != tenant) continue;
    tenants[i].second += delta;
    if (tenants[i].second == 0) tenants.erase(tenants.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
  tenants.emplace_back(tenant, delta);
}

Result<void> ClusterState::set_node_schedulable(std::string_view node_id, bool schedulable) {
  auto it = node_ids_.find(std::string(node_id));
  if (it == node_ids_.end()) return fail(Error::not_found(fmt::format("no node {}", node_id)));
  const int32_t n = it->second;
  Node& node = nodes_[n];
  unindex_node(n);
  for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) unindex_gpu(g);
  node.schedulable = schedulable;
  index_node(n);
  for (int32_t g = node.first_gpu; g < node.first_gpu + node.gpu_count; ++g) index_gpu(g);
  return ok();
}

Result<void> ClusterState::set_gpu_healthy(std::string_view gpu_uuid, bool healthy) {
  auto it = gpu_ids_.find(std::string(gpu_uuid));
  if (it == gpu_ids_.end()) return fail(Error::not_found(fmt::format("no GPU {}", gpu_uuid)));
  const int32_t g = it->second;
  const int32_t n = gpus_[g].node;
  unindex_node(n);
  unindex_gpu(g);
  gpus_[g].healthy = healthy;
  recount_node(n);
  index_node(n);
  index_gpu(g);
  return ok();
}

int64_t ClusterState::memory_bytes() const {
  int64_t bytes = sizeof(*this);
  auto str = [](const std::string& s) -> int64_t { return s.capacity() > 15 ? s.capacity() : 0; };
  bytes += static_cast<int64_t>(nodes_.capacity() * sizeof(Node));
  for (const Node& n : nodes_) {
    bytes += str(n.id) + str(n.name) + str(n.pool_id) + str(n.pool_name);
    bytes += static_cast<int64_t>(n.tenants.capacity() * sizeof(n.tenants[0]) +
                                  n.models.capacity() * sizeof(NodeModel));
  }
  bytes += static_cast<int64_t>(gpus_.capacity() * sizeof(Gpu));
  for (const Gpu& g : gpus_) {
    bytes += str(g.uuid) + static_cast<int64_t>(g.shares.capacity() * sizeof(g.shares[0]));
  }
  auto buckets = [](const detail::Buckets& b) {
    // The lists' own headers (each a vector), then what each holds.
    int64_t total = static_cast<int64_t>(b.lists.capacity() *
                                         sizeof(b.lists[0]));  // NOLINT(bugprone-sizeof-container)
    for (const auto& l : b.lists) total += static_cast<int64_t>(l.capacity() * sizeof(int32_t));
    return total;
  };
  for (const detail::Segment& seg : segments_) {
    bytes += sizeof(seg) + buckets(seg.whole) + buckets(seg.avail) + buckets(seg.shared) +
             buckets(seg.idle);
    for (const auto& b : seg.mig) bytes += buckets(b);
  }
  // Hash maps: a node per entry (key string + value + next pointer) plus the bucket array.
  auto map_bytes = [&](const std::unordered_map<std::string, int32_t>& m) {
    int64_t total = static_cast<int64_t>(m.bucket_count() * sizeof(void*));
    for (const auto& [k, v] : m) total += 48 + str(k);
    return total;
  };
  bytes +=
      map_bytes(node_ids_) + map_bytes(gpu_ids_) + map_bytes(alloc_ids_) + map_bytes(tenant_ids_);
  bytes += static_cast<int64_t>(allocs_.capacity() * sizeof(Allocation));
  for (const Allocation& a : allocs_) {
    bytes += str(a.id) + static_cast<int64_t>(a.placement.gpus.capacity() * sizeof(GpuGrant));
    for (const GpuGrant& grant : a.placement.gpus)
      bytes += str(grant.node_id) + str(grant.gpu_uuid);
  }
  return bytes;
}

void ClusterState::count_shape(const Placement& p, int delta) {
  Shape shape{.cpu_milli = p.cpu_milli, .memory_mib = p.memory_mib, .model_mask = p.model_mask};
  if (p.gpus.empty() && p.node_slots.empty()) {
    if (p.host < 0) return;  // nothing held
  } else if (p.tier == Tier::kDedicatedGpu) {
    shape.gpus = static_cast<int16_t>(p.gpus.size());
    shape.milli = 1000;
  } else if (p.tier == Tier::kShared) {
    shape.gpus = 1;
    shape.milli = static_cast<int16_t>(p.gpus.front().milli);
    delta *= static_cast<int>(p.gpus.size());  // each share is one unit of the mix
  } else {
    return;
  }
  auto [it, inserted] = mix_.try_emplace(shape, 0);
  it->second += delta;
  if (it->second <= 0) mix_.erase(it);
}

// ---- apply / release ----

namespace {

// What a GPU would look like once a placement's changes are made; used to check a placement
// before anything is changed.
struct Effective {
  int32_t gpu;
  GpuMode mode;
  uint32_t layout, owned;
  int milli;
  bool whole_taken;
};

}  // namespace

Result<void> apply(ClusterState& s, const Placement& p, std::string_view id) {
  if (id.empty()) return fail(Error::invalid("allocation id is empty"));
  if (s.alloc_ids_.contains(std::string(id))) {
    return fail(Error::conflict(fmt::format("allocation {} already exists", id)));
  }
  const bool cpu_only = p.gpus.empty() && p.node_slots.empty() && p.host >= 0;
  const int32_t model = s.find_model(p.model);
  if (model < 0 && !cpu_only) return fail(Error::invalid(fmt::format("unknown model {}", p.model)));
  if (p.tenant.empty()) return fail(Error::invalid("placement without tenant"));
  if (p.cpu_milli < 0 || p.memory_mib < 0) {
    return fail(Error::invalid("placement with negative cpu_milli or memory_mib"));
  }
  if ((p.cpu_milli > 0 || p.memory_mib > 0) && p.host < 0) {
    return fail(Error::invalid("placement takes cpu or memory but names no host node"));
  }
  const int32_t tenant = s.find_tenant(p.tenant);  // -1: first allocation of this tenant
  const bool node_tier = p.tier == Tier::kDedicatedNode || p.tier == Tier::kDedicatedPool;
  auto stale = [&](std::string why) {
    return fail(Error::conflict(fmt::format("placement for {} is stale: {}", id, why)));
  };
  auto node_ok = [&](int32_t n) -> bool {
    const ClusterState::Node& node = s.nodes_[n];
    if (!node.schedulable) return false;
    if (node.exclusive_tenant >= 0 && node.exclusive_tenant != tenant) return false;
    if (node.pool_owner >= 0 && node.pool_owner != tenant) return false;
    if (p.tier == Tier::kDedicatedPool && node.pool_owner < 0) return false;
    return true;
  };
  for (int32_t n : p.node_slots) {
    if (n < 0 || n >= static_cast<int32_t>(s.nodes_.size()) || !node_ok(n)) {
      return stale("a node is not available");
    }
    for (const auto& [t, count] : s.nodes_[n].tenants) {
      if (t != tenant) return stale(fmt::format("node {} hosts another tenant", s.nodes_[n].id));
    }
  }
  if (p.host >= 0) {
    if (p.host >= static_cast<int32_t>(s.nodes_.size()) || !node_ok(p.host)) {
      return stale("the host node is not available");
    }
    if (!s.nodes_[p.host].fits(p.cpu_milli, p.memory_mib)) {
      return stale(fmt::format("node {} has no room for {} milli-CPU and {} MiB",
                               s.nodes_[p.host].id, p.cpu_milli, p.memory_mib));
    }
    for (const GpuGrant& grant : p.gpus) {
      if (grant.gpu >= 0 && grant.gpu < static_cast<int32_t>(s.gpus_.size()) &&
          s.gpus_[grant.gpu].node != p.host) {
        return stale("a GPU is not on the host node");
      }
    }
  }
  std::vector<Effective> eff;
  auto effective = [&](int32_t g) -> Effective& {
    for (Effective& e : eff) {
      if (e.gpu == g) return e;
    }
    const ClusterState::Gpu& gpu = s.gpus_[g];
    eff.push_back(
        {g, gpu.mode, gpu.mig_layout, gpu.mig_owned, gpu.milli_used, gpu.whole_owner >= 0});
    return eff.back();
  };
  const int32_t gpu_count = static_cast<int32_t>(s.gpus_.size());
  for (const ModeChange& c : p.mode_changes) {
    if (c.gpu < 0 || c.gpu >= gpu_count) return stale("unknown GPU");
    Effective& e = effective(c.gpu);
    const ClusterState::Gpu& gpu = s.gpus_[c.gpu];
    if (e.mode != c.from || !gpu_idle(gpu)) return stale(fmt::format("GPU {} is in use", gpu.uuid));
    if (c.to == GpuMode::kMig && gpu.table < 0) return stale("GPU is not MIG-capable");
    e.mode = c.to;
    e.layout = e.owned = 0;
  }
  for (const MigLayoutChange& c : p.mig_changes) {
    if (c.gpu < 0 || c.gpu >= gpu_count) return stale("unknown GPU");
    Effective& e = effective(c.gpu);
    const detail::MigTable* table = s.mig_table(s.gpus_[c.gpu]);
    if (e.mode != GpuMode::kMig || table == nullptr) return stale("GPU is not in MIG mode");
    const uint32_t before = table->mask_of(c.before);
    const uint32_t after = table->mask_of(c.after);
    if (before != e.layout) return stale("MIG layout changed");
    if (after == ~0u || table->id(after) < 0 || (after & e.owned) != e.owned) {
      return stale("new MIG layout is invalid or drops a held instance");
    }
    e.layout = after;
  }
  for (const GpuGrant& grant : p.gpus) {
    if (grant.gpu < 0 || grant.gpu >= gpu_count) return stale("unknown GPU");
    const ClusterState::Gpu& gpu = s.gpus_[grant.gpu];
    if (gpu.uuid != grant.gpu_uuid || gpu.model != model) return stale("GPU mismatch");
    if (!gpu.healthy || !node_ok(gpu.node))
      return stale(fmt::format("GPU {} unavailable", gpu.uuid));
    if (node_tier && std::ranges::find(p.node_slots, gpu.node) == p.node_slots.end()) {
      return stale("GPU outside the held nodes");
    }
    Effective& e = effective(grant.gpu);
    switch (p.tier) {
      case Tier::kDedicatedPool:
      case Tier::kDedicatedNode:
      case Tier::kDedicatedGpu:
        if (e.mode != GpuMode::kWhole || e.whole_taken)
          return stale(fmt::format("GPU {} taken", gpu.uuid));
        e.whole_taken = true;
        break;
      case Tier::kMig: {
        const detail::MigTable* table = s.mig_table(gpu);
        if (e.mode != GpuMode::kMig || table == nullptr || !grant.mig_instance)
          return stale("not MIG");
        const uint32_t bit = table->mask_of({*grant.mig_instance});
        if (bit == ~0u || (bit & e.layout) == 0 || (bit & e.owned) != 0) {
          return stale(fmt::format("MIG instance on {} not free", gpu.uuid));
        }
        e.owned |= bit;
        break;
      }
      case Tier::kShared:
        if (e.mode != GpuMode::kTimeSliced || grant.milli < 1 || e.milli + grant.milli > 1000) {
          return stale(fmt::format("GPU {} has no room for {} milli", gpu.uuid, grant.milli));
        }
        e.milli += grant.milli;
        break;
    }
  }

  // Checked: now change the state.
  const int32_t t = s.intern_tenant(p.tenant);
  int32_t slot;
  if (!s.free_slots_.empty()) {
    slot = s.free_slots_.back();
    s.free_slots_.pop_back();
  } else {
    slot = static_cast<int32_t>(s.allocs_.size());
    s.allocs_.emplace_back();
  }
  std::vector<int32_t> nodes(p.node_slots);
  for (const Effective& e : eff) nodes.push_back(s.gpus_[e.gpu].node);
  std::ranges::sort(nodes);
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  for (int32_t n : nodes) s.unindex_node(n);
  for (const Effective& e : eff) s.unindex_gpu(e.gpu);
  for (const Effective& e : eff) {
    ClusterState::Gpu& gpu = s.gpus_[e.gpu];
    gpu.mode = e.mode;
    gpu.mig_layout = e.mode == GpuMode::kMig ? e.layout : 0;
  }
  for (const GpuGrant& grant : p.gpus) {
    ClusterState::Gpu& gpu = s.gpus_[grant.gpu];
    switch (p.tier) {
      case Tier::kMig: {
        const uint32_t bit = s.tables_[gpu.table]->mask_of({*grant.mig_instance});
        gpu.mig_owned |= bit;
        gpu.slot_owner[std::countr_zero(bit)] = slot;
        break;
      }
      case Tier::kShared:
        gpu.milli_used = static_cast<int16_t>(gpu.milli_used + grant.milli);
        gpu.shares.emplace_back(slot, static_cast<int16_t>(grant.milli));
        break;
      default:
        gpu.whole_owner = slot;
    }
    s.add_node_tenant(gpu.node, t, 1);
  }
  for (int32_t n : p.node_slots) {
    ClusterState::Node& node = s.nodes_[n];
    node.exclusive_tenant = t;
    ++node.exclusive_refs;
    s.add_node_tenant(n, t, 1);
  }
  if (p.host >= 0) {
    ClusterState::Node& host = s.nodes_[p.host];
    host.cpu_used += p.cpu_milli;
    host.memory_used += p.memory_mib;
    if (p.gpus.empty()) s.add_node_tenant(p.host, t, 1);
  }
  s.count_shape(p, 1);
  for (int32_t n : nodes) {
    s.recount_node(n);
    s.index_node(n);
  }
  for (const Effective& e : eff) s.index_gpu(e.gpu);
  Allocation& a = s.allocs_[slot];
  a.id = std::string(id);
  a.placement = p;
  a.live = true;
  s.alloc_ids_.emplace(a.id, slot);
  return ok();
}

Result<Placement> release(ClusterState& s, std::string_view id) {
  auto it = s.alloc_ids_.find(std::string(id));
  if (it == s.alloc_ids_.end()) return fail(Error::not_found(fmt::format("no allocation {}", id)));
  const int32_t slot = it->second;
  Allocation& a = s.allocs_[slot];
  const Placement& p = a.placement;
  const int32_t t = s.find_tenant(p.tenant);
  std::vector<int32_t> gpus, nodes(p.node_slots);
  for (const GpuGrant& grant : p.gpus) {
    gpus.push_back(grant.gpu);
    nodes.push_back(s.gpus_[grant.gpu].node);
  }
  std::ranges::sort(gpus);
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  std::ranges::sort(nodes);
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  for (int32_t n : nodes) s.unindex_node(n);
  for (int32_t g : gpus) s.unindex_gpu(g);
  for (const GpuGrant& grant : p.gpus) {
    ClusterState::Gpu& gpu = s.gpus_[grant.gpu];
    switch (p.tier) {
      case Tier::kMig: {
        const uint32_t bit = s.tables_[gpu.table]->mask_of({*grant.mig_instance});
        gpu.mig_owned &= ~bit;
        gpu.slot_owner[std::countr_zero(bit)] = -1;
        break;
      }
      case Tier::kShared: {
        gpu.milli_used = static_cast<int16_t>(gpu.milli_used - grant.milli);
        auto share = std::ranges::find(
            gpu.shares, std::pair<int32_t, int16_t>(slot, static_cast<int16_t>(grant.milli)));
        if (share != gpu.shares.end()) gpu.shares.erase(share);
        break;
      }
      default:
        gpu.whole_owner = -1;
    }
    s.add_node_tenant(gpu.node, t, -1);
  }
  for (int32_t n : p.node_slots) {
    ClusterState::Node& node = s.nodes_[n];
    if (--node.exclusive_refs == 0) node.exclusive_tenant = -1;
    s.add_node_tenant(n, t, -1);
  }
  if (p.host >= 0) {
    ClusterState::Node& host = s.nodes_[p.host];
    host.cpu_used -= p.cpu_milli;
    host.memory_used -= p.memory_mib;
    if (p.gpus.empty()) s.add_node_tenant(p.host, t, -1);
  }
  s.count_shape(p, -1);
  for (int32_t n : nodes) {
    s.recount_node(n);
    s.index_node(n);
  }
  for (int32_t g : gpus) s.index_gpu(g);
  Placement out = std::move(a.placement);
  a = Allocation{};
  s.alloc_ids_.erase(it);
  s.free_slots_.push_back(slot);
  return out;
}

}  // namespace gp::sched
