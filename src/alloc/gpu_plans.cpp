// GPU plans (alloc.h): which plans a node has not carried out, who waits for them, and the
// node's reports on them.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "alloc/alloc.h"
#include "alloc/internal.h"

namespace gp::alloc {
namespace {

// A layout as a sorted list of (start, profile), so that order does not matter.
std::vector<std::pair<int, std::string>> normalized(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  const Json layout = Json::parse(text, nullptr, false);
  if (layout.is_array())
    for (const auto& i : layout)
      if (i.is_object()) out.emplace_back(i.value("start", 0), i.value("profile", ""));
  std::ranges::sort(out);
  return out;
}

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
  for (const auto& row : GP_TRY(tx.query(
           "SELECT pl.gpu_uuid, pl.mode, pl.mig_layout, g.mode, g.mig_layout, pl.status, "
           "pl.detail FROM gpu_plans pl JOIN gpus g ON g.uuid = pl.gpu_uuid WHERE g.node_id = ? "
           "ORDER BY g.idx",
           {node_id}))) {
    if (row.text(1) == row.text(3) && normalized(row.text(2)) == normalized(row.text(4))) continue;
    out.emplace(row.text(0), UnmetPlan{row.text(0), row.text(1), row.text(5), row.text(6),
                                       Json::parse(row.text(2), nullptr, false)});
  }
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

Result<Json> Service::record_mig_reports(store::Tx& tx, const World& w, const std::string& node_id,
                                         const std::vector<MigReport>& reports) {
  MutexLock lock(mu_);
  Json changes = Json::array();
  for (const MigReport& r : reports) {
    auto gpu = GP_TRY(tx.query_one("SELECT node_id FROM gpus WHERE uuid = ?", {r.gpu}));
    if (!gpu || gpu->text(0) != node_id)
      return fail(Error::invalid(fmt::format("MIG report: GPU {} is not on this node", r.gpu)));
    auto plan =
        GP_TRY(tx.query_one("SELECT status, detail FROM gpu_plans WHERE gpu_uuid = ?", {r.gpu}));
    if (!plan) continue;  // planned no more: nothing to record
    if (r.status != "failed") {
      if (plan->text(0) == r.status && plan->text(1) == r.detail && r.done.empty()) continue;
      GP_TRY(
          tx.exec("UPDATE gpu_plans SET status = ?, detail = ?, reported_at = ? WHERE gpu_uuid = ?",
                  {r.status, r.detail, w.now(), r.gpu}));
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
    GP_TRY(tx.exec("DELETE FROM gpu_plans WHERE gpu_uuid = ?", {r.gpu}));
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
