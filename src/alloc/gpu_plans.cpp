// GPU plans (alloc.h): which plans a node has not carried out, who waits for them, and the
// node's reports on them. The plans are kept by the fleet, with their GPUs (fleet.h).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "alloc/alloc.h"
#include "alloc/internal.h"
#include "common/env.h"
#include "fleet/fleet.h"

namespace gp::alloc {
namespace {

// The GPUs `a` holds on `node_id` (all of its nodes when empty).
std::set<std::string> gpus_of(const Allocation& a, const std::string& node_id = "") {
  std::set<std::string> out;
  for (const auto& g : a.placement.value("gpus", Json::array()))
    if (node_id.empty() || g.value("node", "") == node_id) out.insert(g.value("gpu", ""));
  return out;
}

}  // namespace

Result<std::vector<MigReport>> parse_mig_reports(const Json& j) {
  std::vector<MigReport> out;
  if (!j.is_array()) return fail(Error::invalid("field 'mig' must be an array"));
  for (const auto& r : j) {
    if (!r.is_object() || !r.contains("gpu") || !r["gpu"].is_string() || !r.contains("status") ||
        !r["status"].is_string())
      return fail(Error::invalid("each MIG report needs a string 'gpu' and 'status'"));
    MigReport m{r["gpu"].get<std::string>(),
                r["status"].get<std::string>(),
                r.value("detail", std::string()),
                {}};
    if (m.status != "applied" && m.status != "waiting" && m.status != "failed")
      return fail(Error::invalid(
          fmt::format("MIG report for {}: status must be applied, waiting or failed, not '{}'",
                      m.gpu, m.status)));
    if (m.detail.size() > 2000) m.detail.resize(2000);
    for (const auto& d : r.value("done", Json::array()))
      if (d.is_string()) m.done.push_back(d.get<std::string>());
    out.push_back(std::move(m));
  }
  return out;
}

Json UnmetPlan::to_json() const {
  Json j = {{"gpu", gpu}, {"mode", mode}, {"mig_layout", mig_layout}, {"status", status}};
  if (!detail.empty()) j["detail"] = detail;
  return j;
}

Result<std::map<std::string, UnmetPlan>> unmet_plans(store::Tx& tx, const std::string& node_id) {
  std::map<std::string, UnmetPlan> out;
  for (const fleet::GpuPlan& p : GP_TRY(fleet::node_gpu_plans(tx, node_id)))
    if (!p.met)
      out.emplace(p.gpu, UnmetPlan{p.gpu, p.mode, p.status, p.detail,
                                   Json::parse(p.mig_layout, nullptr, false)});
  return out;
}

Result<std::map<std::string, std::vector<std::string>>> node_configuring(
    store::Tx& tx, const std::string& node_id) {
  std::map<std::string, std::vector<std::string>> out;
  const auto unmet = GP_TRY(unmet_plans(tx, node_id));
  if (unmet.empty()) return out;
  for (const auto& row : GP_TRY(
           tx.query("SELECT an.allocation_id FROM allocation_nodes an JOIN allocations a ON a.id = "
                    "an.allocation_id WHERE an.node_id = ? AND a.state = 'placed' ORDER BY a.id",
                    {node_id}))) {
    auto a = GP_TRY(detail::load(tx, row.text(0)));
    if (!a) continue;
    for (const std::string& gpu : gpus_of(*a, node_id))
      if (unmet.contains(gpu)) out[a->id].push_back(gpu);
  }
  return out;
}

Result<Json> allocation_configuring(store::Tx& tx, const Allocation& a) {
  Json out = Json::array();
  if (a.state != State::kPlaced) return out;
  const std::set<std::string> held = gpus_of(a);
  for (const auto& node : a.placement.value("nodes", Json::array())) {
    if (!node.is_string()) continue;
    for (const auto& [gpu, plan] : GP_TRY(unmet_plans(tx, node.get<std::string>()))) {
      if (!held.contains(gpu)) continue;
      Json j = plan.to_json();
      j["node"] = node;
      out.push_back(std::move(j));
    }
  }
  return out;
}

Result<Json> Service::record_mig_reports(store::Tx& tx, const Env& w, const std::string& node_id,
                                         const std::vector<MigReport>& reports) {
  MutexLock lock(mu_);
  Json changes = Json::array();
  for (const MigReport& r : reports) {
    auto gpu = GP_TRY(fleet::find_gpu(tx, r.gpu));
    if (!gpu || gpu->node_id != node_id)
      return fail(Error::invalid(fmt::format("MIG report: GPU {} is not on this node", r.gpu)));
    auto plan = GP_TRY(fleet::find_gpu_plan(tx, r.gpu));
    if (!plan) continue;  // planned no more: nothing to record
    if (r.status != "failed") {
      if (plan->status == r.status && plan->detail == r.detail && r.done.empty()) continue;
      GP_TRY_VOID(fleet::record_plan_report(tx, r.gpu, r.status, r.detail, w.now()));
      changes.push_back(
          {{"gpu", r.gpu}, {"status", r.status}, {"detail", r.detail}, {"done", r.done}});
      continue;
    }
    // The GPU refused: what waits for its layout fails with the node's reason, and the plan
    // goes, so the scheduler sees the GPU as the node reports it and places elsewhere.
    Json failed = Json::array();
    const std::string reason = fmt::format("GPU {} refused its MIG layout: {}", r.gpu, r.detail);
    for (const auto& [id, gpus] : GP_TRY(node_configuring(tx, node_id))) {
      if (std::ranges::find(gpus, r.gpu) == gpus.end()) continue;
      GP_TRY(end(tx, w, id, State::kFailed, "mig_config_failed", reason,
                 std::string(detail::kScheduler)));
      failed.push_back(id);
    }
    GP_TRY_VOID(fleet::drop_gpu_plan(tx, r.gpu));
    dirty_ = true;
    changed_ = true;
    changes.push_back({{"gpu", r.gpu},
                       {"status", "failed"},
                       {"detail", r.detail},
                       {"done", r.done},
                       {"allocations_failed", failed}});
  }
  return changes;
}

}  // namespace gp::alloc
