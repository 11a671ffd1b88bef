// GPU plans (fleet.h): the mode and MIG layout the scheduler chose for a GPU, kept with the GPU
// until its node carries them out, and the GPUs as the scheduler is rebuilt from them.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "fleet/fleet.h"

namespace gp::fleet {
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

// Read after the plan's columns: the GPU's reported mode and layout.
constexpr std::string_view kPlanCols =
    "pl.gpu_uuid, pl.mode, pl.mig_layout, pl.status, pl.detail, g.mode, g.mig_layout";

GpuPlan plan_from(const store::Row& r) {
  return GpuPlan{.gpu = r.text(0),
                 .mode = r.text(1),
                 .mig_layout = r.text(2),
                 .status = r.text(3),
                 .detail = r.text(4),
                 .met = r.text(1) == r.text(5) && normalized(r.text(2)) == normalized(r.text(6))};
}

}  // namespace

Result<void> plan_gpu(store::Tx& tx, const std::string& uuid, std::string_view mode,
                      const Json& mig_layout, int64_t now) {
  GP_TRY(tx.exec(
      "INSERT INTO gpu_plans (gpu_uuid, mode, mig_layout, updated_at) VALUES (?,?,?,?) ON "
      "CONFLICT (gpu_uuid) DO UPDATE SET mode = excluded.mode, mig_layout = "
      "excluded.mig_layout, updated_at = excluded.updated_at, status = 'planned', detail = ''",
      {uuid, std::string(mode), mig_layout.dump(), now}));
  return ok();
}

Result<std::vector<GpuPlan>> node_gpu_plans(store::Tx& tx, const std::string& node_id) {
  std::vector<GpuPlan> out;
  for (const auto& r : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM gpu_plans pl JOIN gpus g ON g.uuid = pl.gpu_uuid WHERE "
                       "g.node_id = ? ORDER BY g.idx",
                       kPlanCols),
           {node_id})))
    out.push_back(plan_from(r));
  return out;
}

Result<std::optional<GpuPlan>> find_gpu_plan(store::Tx& tx, const std::string& uuid) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM gpu_plans pl JOIN gpus g ON g.uuid = pl.gpu_uuid WHERE "
                  "pl.gpu_uuid = ?",
                  kPlanCols),
      {uuid}));
  if (!row) return std::optional<GpuPlan>();
  return std::optional<GpuPlan>(plan_from(*row));
}

Result<void> record_plan_report(store::Tx& tx, const std::string& uuid, const std::string& status,
                                const std::string& detail, int64_t now) {
  GP_TRY(tx.exec("UPDATE gpu_plans SET status = ?, detail = ?, reported_at = ? WHERE gpu_uuid = ?",
                 {status, detail, now, uuid}));
  return ok();
}

Result<void> drop_gpu_plan(store::Tx& tx, const std::string& uuid) {
  GP_TRY(tx.exec("DELETE FROM gpu_plans WHERE gpu_uuid = ?", {uuid}));
  return ok();
}

Result<std::vector<SchedulerGpu>> scheduler_gpus(store::Tx& tx) {
  std::vector<SchedulerGpu> out;
  for (const auto& r : GP_TRY(tx.query(
           "SELECT g.uuid, g.node_id, g.idx, g.model, g.mig_capable, g.mode, g.mig_layout, "
           "g.health, g.present, pl.mode, pl.mig_layout FROM gpus g LEFT JOIN gpu_plans pl ON "
           "pl.gpu_uuid = g.uuid ORDER BY g.node_id, g.idx"))) {
    const bool planned = !r.is_null(9);
    out.push_back({.uuid = r.text(0),
                   .node_id = r.text(1),
                   .index = static_cast<int>(r.integer(2)),
                   .model = r.text(3),
                   .mig_capable = r.integer(4) != 0,
                   .mode = planned ? r.text(9) : r.text(5),
                   .mig_layout = planned ? r.text(10) : r.text(6),
                   .healthy = r.text(7) == "healthy" && r.integer(8) != 0});
  }
  return out;
}

}  // namespace gp::fleet
