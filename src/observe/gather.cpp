// The two expositions of observe.h, read from the store through the modules that own the
// tables. Every family lists its series in a stable order (by state, model, tenant, node, GPU), so
// two scrapes of an unchanged fleet are the same text.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "common/env.h"
#include "fleet/fleet.h"
#include "jobs/records.h"
#include "metering/metering.h"
#include "observe/observe.h"
#include "tenancy/tenancy.h"

namespace gp::observe {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double gpus(int64_t units) { return double(units) / vocab::kUnitsPerGpu; }

std::string name_of(const std::unordered_map<std::string, std::string>& names,
                    const std::string& id) {
  auto it = names.find(id);
  return it == names.end() ? id : it->second;
}

void node_and_gpu_families(Exposition& e, const Json& summary) {
  e.family("gpuplane_nodes", "gauge", "Nodes by lifecycle state.");
  for (auto s :
       {fleet::NodeState::kEnrolling, fleet::NodeState::kReady, fleet::NodeState::kDraining,
        fleet::NodeState::kMaintenance, fleet::NodeState::kFailed, fleet::NodeState::kRetired}) {
    const std::string state(fleet::node_state_name(s));
    e.sample({{"state", state}}, summary["nodes_by_state"].value(state, 0.0));
  }
  const Json& models = summary["gpus_by_model"];
  e.family("gpuplane_gpus", "gauge", "GPUs on nodes not retired, by model and health.");
  for (const auto& [model, m] : models.items())
    for (const char* health : {"healthy", "unhealthy", "missing"})
      e.sample({{"model", model}, {"health", health}}, m.value(health, 0.0));
  e.family("gpuplane_gpus_availability", "gauge",
           "GPUs by model: free (healthy, on a ready node, held by nothing), allocated (held "
           "whole or in part), unavailable (neither).");
  for (const auto& [model, m] : models.items())
    for (const char* status : {"free", "allocated", "unavailable"})
      e.sample({{"model", model}, {"status", status}}, m.value(status, 0.0));
}

void allocation_families(Exposition& e, const Env& w, const std::vector<alloc::LiveCount>& live,
                         const std::map<std::string, int64_t>& by_state,
                         const std::unordered_map<std::string, std::string>& names,
                         size_t max_tenants) {
  std::map<std::pair<std::string, std::string>, int64_t> by_state_tier;
  std::map<std::string, int64_t> queued;        // tenant -> pending allocations
  std::map<std::string, int64_t> oldest_since;  // tenant -> oldest pending's creation
  for (const auto& c : live) {
    by_state_tier[{std::string(alloc::state_name(c.state)), c.tier}] += c.count;
    if (c.state != alloc::State::kPending) continue;
    const std::string tenant = name_of(names, c.tenant_id);
    queued[tenant] += c.count;
    auto [it, fresh] = oldest_since.try_emplace(tenant, c.oldest_created_at);
    if (!fresh) it->second = std::min(it->second, c.oldest_created_at);
  }
  e.family("gpuplane_allocations", "gauge", "Live allocations by state and tier.");
  for (const auto& [key, n] : by_state_tier)
    e.sample({{"state", key.first}, {"tier", key.second}}, n);
  e.family("gpuplane_allocations_ended", "gauge", "Ended allocations by how they ended.");
  for (auto s : {alloc::State::kReleased, alloc::State::kPreempted, alloc::State::kFailed,
                 alloc::State::kExpired}) {
    auto it = by_state.find(std::string(alloc::state_name(s)));
    e.sample({{"state", std::string(alloc::state_name(s))}},
             double(it == by_state.end() ? 0 : it->second));
  }
  std::vector<std::pair<std::string, double>> lengths(queued.begin(), queued.end());
  lengths = top_with_other(std::move(lengths), max_tenants);
  e.family("gpuplane_queue_length", "gauge", "Pending allocations per tenant.");
  for (const auto& [tenant, n] : lengths) e.sample({{"tenant", tenant}}, n);
  // The longest wait of the tenants named above; "_other" has the longest of the rest.
  e.family("gpuplane_queue_oldest_wait_seconds", "gauge",
           "How long each tenant's oldest pending allocation has waited.");
  std::set<std::string> named;
  for (const auto& [tenant, n] : lengths) named.insert(tenant);
  double other = -1;
  for (const auto& [tenant, since] : oldest_since) {
    const double wait = std::max<double>(0, double(w.now() - since) / 1e6);
    if (named.contains(tenant))
      e.sample({{"tenant", tenant}}, wait);
    else
      other = std::max(other, wait);
  }
  if (other >= 0) e.sample({{"tenant", "_other"}}, other);
}

void quota_families(Exposition& e, const std::vector<sched::QuotaTree::TenantModelUsage>& usages,
                    const std::unordered_map<std::string, std::string>& names, size_t max_tenants) {
  // The tenants using most are named; the rest are summed per model under "_other".
  std::map<std::string, double> used_by_tenant;
  for (const auto& u : usages) used_by_tenant[u.tenant] += double(u.usage.used);
  std::vector<std::pair<std::string, double>> ranked(used_by_tenant.begin(), used_by_tenant.end());
  std::set<std::string> named;
  for (const auto& [tenant, used] : top_with_other(std::move(ranked), max_tenants))
    named.insert(tenant);
  struct Row {
    double used = 0, nominal = 0;
    std::optional<double> limit;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;  // (tenant label, model)
  for (const auto& u : usages) {
    const std::string tenant = named.contains(u.tenant) ? name_of(names, u.tenant) : "_other";
    Row& r = rows[{tenant, u.model}];
    r.used += gpus(u.usage.used);
    r.nominal += gpus(u.usage.limits.nominal);
    if (u.usage.limits.limit) r.limit = r.limit.value_or(0) + gpus(*u.usage.limits.limit);
  }
  e.family("gpuplane_quota_used_gpus", "gauge", "GPU-equivalents a tenant holds, per model.");
  for (const auto& [key, r] : rows)
    e.sample({{"tenant", key.first}, {"model", key.second}}, r.used);
  e.family("gpuplane_quota_nominal_gpus", "gauge",
           "A tenant's nominal (guaranteed) quota, per model, in GPU-equivalents.");
  for (const auto& [key, r] : rows)
    e.sample({{"tenant", key.first}, {"model", key.second}}, r.nominal);
  e.family("gpuplane_quota_limit_gpus", "gauge",
           "A tenant's hard quota limit, per model, in GPU-equivalents (where one is set).");
  for (const auto& [key, r] : rows)
    if (r.limit) e.sample({{"tenant", key.first}, {"model", key.second}}, *r.limit);
}

}  // namespace

Result<std::string> fleet_metrics(store::Tx& tx, const Env& w, alloc::Service& service,
                                  const FleetOptions& options) {
  Exposition e;
  const auto names = GP_TRY(tenancy::tenant_names(tx));
  node_and_gpu_families(e, GP_TRY(fleet::summary(tx, GP_TRY(metering::held_gpus(tx)))));
  allocation_families(e, w, GP_TRY(alloc::count_live_allocations(tx)),
                      GP_TRY(alloc::count_allocations_by_state(tx)), names, options.max_tenants);
  quota_families(e, GP_TRY(service.quota_usages(tx)), names, options.max_tenants);
  const auto jobs = GP_TRY(jobs::count_jobs_by_state(tx));
  e.family("gpuplane_jobs", "gauge", "Jobs by state.");
  for (auto s : {jobs::State::kQueued, jobs::State::kStarting, jobs::State::kRunning,
                 jobs::State::kSucceeded, jobs::State::kFailed, jobs::State::kCancelled,
                 jobs::State::kPreempted}) {
    auto it = jobs.find(std::string(jobs::state_name(s)));
    e.sample({{"state", std::string(jobs::state_name(s))}},
             double(it == jobs.end() ? 0 : it->second));
  }
  return e.take();
}

Result<Shard> parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  Shard s;
  auto number = [](std::string_view t, uint32_t* out) {
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
    return ec == std::errc() && end == t.data() + t.size() && !t.empty();
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), &s.index) ||
      !number(text.substr(slash + 1), &s.count) || s.count == 0 || s.count > 4096 ||
      s.index >= s.count)
    return fail(Error::invalid(
        fmt::format("shard {:?} is not <index>/<count> with 0 <= index < count <= 4096", text)));
  return s;
}

bool in_shard(std::string_view node_name, Shard shard) {
  uint32_t h = 2166136261u;
  for (unsigned char c : node_name) h = (h ^ c) * 16777619u;
  return h % shard.count == shard.index;
}

namespace {

// Who holds a GPU or MIG instance: one allocation; several of one tenant (a time-sliced GPU: the
// tenant, no allocation or job); several tenants' (tenant "_shared", which no tenant's own
// metrics show); or none (every holder label empty).
struct Holder {
  std::string tenant_id, tenant, project, allocation, job;
};

std::map<std::pair<std::string, std::string>, Holder> holders(
    const std::vector<alloc::LivePlacement>& live, const std::map<std::string, std::string>& jobs,
    const std::unordered_map<std::string, std::string>& names) {
  std::map<std::pair<std::string, std::string>, Holder> out;  // (GPU UUID, instance)
  for (const auto& p : live)
    for (const auto& g : p.placement.value("gpus", Json::array())) {
      std::string instance;
      if (g.contains("mig") && g["mig"].is_object())
        instance =
            vocab::instance_label({g["mig"].value("profile", ""), g["mig"].value("start", 0)});
      auto job = jobs.find(p.allocation_id);
      Holder h{p.tenant_id, name_of(names, p.tenant_id), p.project_id, p.allocation_id,
               job == jobs.end() ? "" : job->second};
      auto [it, fresh] = out.try_emplace({g.value("gpu", ""), instance}, h);
      if (!fresh && it->second.allocation != h.allocation)
        it->second = it->second.tenant_id == h.tenant_id ? Holder{h.tenant_id, h.tenant, "", "", ""}
                                                         : Holder{"", "_shared", "", "", ""};
    }
  return out;
}

}  // namespace

Result<std::string> hardware_metrics(store::Tx& tx, const Env& w, const HardwareScope& scope) {
  const auto nodes = GP_TRY(all_pages(
      [&](const PageRequest& page) { return fleet::list_nodes(tx, page, std::nullopt); }));
  std::map<std::string, const fleet::Node*> by_id;  // the shard's nodes
  for (const auto& n : nodes)
    if (n.state != fleet::NodeState::kRetired && in_shard(n.info.name, scope.shard))
      by_id[n.id] = &n;
  // A tenant sees none of the fleet's nodes, only its own GPUs below.
  const std::map<std::string, const fleet::Node*> no_nodes;
  const auto& node_series = scope.tenant_id ? no_nodes : by_id;

  Exposition e;
  e.family("gpuplane_node_info", "gauge", "One series per node: its state and pool.");
  for (const auto& [id, n] : node_series)
    e.sample({{"node", n->info.name},
              {"state", std::string(fleet::node_state_name(n->state))},
              {"pool", n->pool_name.value_or("")},
              {"cordoned", n->cordoned ? "true" : "false"}},
             1);
  e.family("gpuplane_node_heartbeat_age_seconds", "gauge",
           "Seconds since the node's agent last reported.");
  for (const auto& [id, n] : node_series)
    if (n->last_heartbeat)
      e.sample({{"node", n->info.name}},
               std::max<double>(0, double(w.now() - *n->last_heartbeat) / 1e6));

  const auto expiries = GP_TRY(fleet::certificate_expiries(tx));
  e.family("gpuplane_node_certificate_expiry_timestamp_seconds", "gauge",
           "When the node agent's newest certificate expires (Unix seconds); the agent renews it "
           "once two thirds of its life have passed.");
  for (const auto& [id, n] : node_series)
    if (auto x = expiries.find(id); x != expiries.end())
      e.sample({{"node", n->info.name}}, double(x->second) / 1e6);

  // The GPUs of the shard's nodes, with their base labels.
  const auto names = GP_TRY(tenancy::tenant_names(tx));
  const auto held =
      holders(GP_TRY(alloc::live_placements(tx)), GP_TRY(jobs::live_job_allocations(tx)), names);
  const auto xids = GP_TRY(fleet::xid_tallies(tx));
  // Whether the scope shows the series of a GPU (instance "") or MIG instance.
  auto shown = [&](const std::string& uuid, const std::string& instance) {
    if (!scope.tenant_id) return true;
    auto h = held.find({uuid, instance});
    return h != held.end() && h->second.tenant_id == *scope.tenant_id;
  };
  std::vector<fleet::Gpu> all_gpus = GP_TRY(fleet::list_gpus(tx, std::nullopt));
  std::erase_if(all_gpus, [&](const fleet::Gpu& g) {
    return !by_id.contains(g.node_id) || g.health == "missing";
  });
  std::map<std::string, const fleet::Gpu*> gpu_by_uuid;
  std::vector<const fleet::Gpu*> gpus;  // the GPUs whose device series the scope shows
  for (const auto& g : all_gpus) {
    gpu_by_uuid[g.info.uuid] = &g;
    if (shown(g.info.uuid, "")) gpus.push_back(&g);
  }

  auto labels = [&](const fleet::Gpu& g, const std::string& instance) {
    // A MIG instance is named by its profile and the memory slice it starts at: two instances of
    // one profile on one GPU differ in gpu_instance.
    const size_t at = instance.find('@');
    const std::string profile = instance.substr(0, at);
    const std::string start = at == std::string::npos ? "" : instance.substr(at + 1);
    auto h = held.find({g.info.uuid, instance});
    const Holder none;
    const Holder& holder = h == held.end() ? none : h->second;
    return Labels{{"node", by_id.at(g.node_id)->info.name},
                  {"gpu", g.info.uuid},
                  {"model", g.info.model},
                  {"mig_profile", profile},
                  {"gpu_instance", start},
                  {"tenant", holder.tenant},
                  {"project", holder.project},
                  {"allocation", holder.allocation},
                  {"job", holder.job}};
  };

  e.family("gpuplane_gpu_healthy", "gauge",
           "1 when the GPU is healthy, 0 when unhealthy or in repair.");
  for (const auto* g : gpus) e.sample(labels(*g, ""), g->health == "healthy" ? 1 : 0);
  e.family("gpuplane_gpu_xid_reports_total", "counter",
           "Reports of XID errors the GPU's node made (one report may carry several codes).");
  for (const auto* g : gpus) {
    auto x = xids.find(g->info.uuid);
    e.sample(labels(*g, ""), double(x == xids.end() ? 0 : x->second.reports));
  }
  e.family("DCGM_FI_DEV_XID_ERRORS", "gauge", "The last XID error the GPU reported (0: none).");
  for (const auto* g : gpus) {
    auto x = xids.find(g->info.uuid);
    e.sample(labels(*g, ""), double(x == xids.end() ? 0 : x->second.last));
  }

  // Telemetry: the latest reading of each GPU, and of each MIG instance in its current layout.
  struct Reading {
    const fleet::Gpu* gpu;
    const fleet::Sample* sample;
  };
  const auto telemetry = GP_TRY(fleet::latest_telemetry(tx));
  std::vector<Reading> whole, instances;
  for (const auto& t : telemetry) {
    auto g = gpu_by_uuid.find(t.sample.gpu_uuid);
    if (g == gpu_by_uuid.end() || g->second->node_id != t.node_id ||
        !shown(t.sample.gpu_uuid, t.sample.instance))
      continue;
    if (t.sample.instance.empty()) {
      whole.push_back({g->second, &t.sample});
      continue;
    }
    const auto& layout = g->second->info.mig_instances;
    if (g->second->info.mode == vocab::GpuMode::kMig &&
        std::ranges::any_of(layout, [&](const vocab::PlacedInstance& p) {
          return vocab::instance_label(p) == t.sample.instance;
        }))
      instances.push_back({g->second, &t.sample});
  }
  // A figure the node could not read (-1) is left out, as the DCGM exporter leaves out a field
  // the GPU does not support.
  auto device = [&](std::string_view name, std::string_view help, std::string_view type,
                    auto value) {
    e.family(name, type, help);
    for (const auto& r : whole)
      if (auto v = value(*r.sample); v >= 0) e.sample(labels(*r.gpu, ""), v);
  };
  e.family("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (%), whole GPUs not in MIG mode.");
  for (const auto& r : whole)
    if (r.gpu->info.mode != vocab::GpuMode::kMig && r.sample->util_pct >= 0)
      e.sample(labels(*r.gpu, ""), r.sample->util_pct);
  e.family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge",
           "Ratio of time the graphics engine of a MIG instance was active.");
  for (const auto& r : instances)
    if (r.sample->util_pct >= 0)
      e.sample(labels(*r.gpu, r.sample->instance), r.sample->util_pct / 100.0);
  e.family("DCGM_FI_DEV_FB_USED", "gauge", "Frame buffer used (MiB), per GPU and MIG instance.");
  for (const auto* set : {&whole, &instances})
    for (const auto& r : *set)
      e.sample(labels(*r.gpu, r.sample->instance), double(r.sample->mem_used_bytes) / kMiB);
  e.family("DCGM_FI_DEV_FB_FREE", "gauge", "Frame buffer free (MiB), per GPU and MIG instance.");
  for (const auto* set : {&whole, &instances})
    for (const auto& r : *set)
      if (r.sample->mem_total_bytes >= 0)
        e.sample(
            labels(*r.gpu, r.sample->instance),
            double(std::max<int64_t>(0, r.sample->mem_total_bytes - r.sample->mem_used_bytes)) /
                kMiB);
  device("DCGM_FI_DEV_POWER_USAGE", "Power draw (W).", "gauge", [](const fleet::Sample& s) {
    return s.power_mw < 0 ? -1.0 : double(s.power_mw) / 1000.0;
  });
  device("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Energy since the driver loaded (mJ).", "gauge",
         [](const fleet::Sample& s) { return double(s.energy_mj); });
  device("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (C).", "gauge",
         [](const fleet::Sample& s) { return double(s.temperature_c); });
  device("DCGM_FI_DEV_SM_CLOCK", "SM clock (MHz).", "gauge",
         [](const fleet::Sample& s) { return double(s.sm_clock_mhz); });
  device("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Volatile single-bit (corrected) ECC errors.", "gauge",
         [](const fleet::Sample& s) { return double(s.ecc_corrected); });
  device("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Volatile double-bit (uncorrected) ECC errors.", "gauge",
         [](const fleet::Sample& s) { return double(s.ecc_uncorrected); });
  e.family("gpuplane_gpu_sample_age_seconds", "gauge",
           "Seconds since the GPU's latest reading was taken.");
  for (const auto& r : whole)
    e.sample(labels(*r.gpu, ""), std::max<double>(0, double(w.now() - r.sample->time_us) / 1e6));
  return e.take();
}

}  // namespace gp::observe
