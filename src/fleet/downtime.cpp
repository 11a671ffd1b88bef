// Downtime history: the intervals during which a node or one of its GPUs could not serve, the
// input of SLA accounting (gp_sla_standing). Written in the transactions of the fleet changes
// that cause them (fleet_store.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "fleet/fleet.h"
#include "store/record_row.h"

namespace gp::fleet {
namespace {

const std::string kCols = store::columns_of<Downtime>();
Result<Downtime> downtime_from(const store::Row& r) { return store::read_row<Downtime>(r); }

// Deterministic, like usage intervals: the node, the GPU and the start identify an interval.
std::string downtime_id(const std::string& node_id, const std::string& gpu_uuid, int64_t start) {
  return gpu_uuid.empty() ? fmt::format("{}@{}", node_id, start)
                          : fmt::format("{}/{}@{}", node_id, gpu_uuid, start);
}

}  // namespace

Json Downtime::to_json() const { return json_of_fields(*this); }

Result<void> open_downtime(store::Tx& tx, const std::string& node_id, const std::string& gpu_uuid,
                           const std::string& cause, int64_t now) {
  auto open = GP_TRY(tx.query_one(
      "SELECT id FROM downtime_intervals WHERE node_id = ? AND gpu_uuid = ? AND end_us IS NULL",
      {node_id, gpu_uuid}));
  if (open) return ok();
  // Closed in this very instant: the outage never ended, keep one interval.
  auto touching = GP_TRY(
      tx.exec("UPDATE downtime_intervals SET end_us = NULL WHERE node_id = ? AND gpu_uuid = ? "
              "AND end_us = ?",
              {node_id, gpu_uuid, now}));
  if (touching > 0) return ok();
  const Downtime opened{downtime_id(node_id, gpu_uuid, now), node_id, gpu_uuid, cause, now, {}};
  GP_TRY(tx.exec(fmt::format("INSERT INTO downtime_intervals ({}) VALUES ({})", kCols,
                             store::placeholders_of<Downtime>()),
                 store::params_of(opened)));
  return ok();
}

Result<void> close_downtime(store::Tx& tx, const std::string& node_id, const std::string& gpu_uuid,
                            int64_t now) {
  GP_TRY(tx.exec(
      "DELETE FROM downtime_intervals WHERE node_id = ? AND gpu_uuid = ? AND end_us IS NULL "
      "AND start_us >= ?",
      {node_id, gpu_uuid, now}));
  GP_TRY(tx.exec(
      "UPDATE downtime_intervals SET end_us = ? WHERE node_id = ? AND gpu_uuid = ? AND end_us "
      "IS NULL",
      {now, node_id, gpu_uuid}));
  return ok();
}

Result<std::vector<Downtime>> list_downtime(store::Tx& tx, int64_t from_us, int64_t to_us) {
  if (to_us <= from_us) return fail(Error::invalid("from must be before to"));
  auto rows = GP_TRY(tx.query(
      fmt::format("SELECT {} FROM downtime_intervals WHERE start_us < ? AND (end_us IS NULL OR "
                  "end_us > ?) ORDER BY start_us, node_id, gpu_uuid",
                  kCols),
      {to_us, from_us}));
  std::vector<Downtime> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(GP_TRY(downtime_from(r)));
  return out;
}

Result<int> repair_downtime(store::Tx& tx, int64_t now) {
  int changed = 0;
  auto clip = [&](int64_t at, int64_t start) {
    return std::clamp(at, start, std::max(start, now));
  };
  // Open intervals the fleet no longer explains.
  for (const auto& r : GP_TRY(tx.query(
           "SELECT d.node_id, d.gpu_uuid, d.start_us, n.updated_at FROM downtime_intervals d "
           "LEFT JOIN nodes n ON n.id = d.node_id WHERE d.end_us IS NULL AND d.gpu_uuid = '' "
           "AND (n.id IS NULL OR n.state NOT IN ('failed', 'maintenance'))"))) {
    const int64_t at = r.is_null(3) ? now : clip(r.integer(3), r.integer(2));
    GP_TRY_VOID(close_downtime(tx, r.text(0), "", at));
    ++changed;
  }
  for (const auto& r : GP_TRY(tx.query(
           "SELECT d.node_id, d.gpu_uuid, d.start_us, g.updated_at FROM downtime_intervals d "
           "LEFT JOIN gpus g ON g.uuid = d.gpu_uuid AND g.node_id = d.node_id LEFT JOIN nodes n "
           "ON n.id = d.node_id WHERE d.end_us IS NULL AND d.gpu_uuid <> '' AND (g.uuid IS NULL "
           "OR g.health = 'healthy' OR g.present = 0 OR n.state = 'retired')"))) {
    const int64_t at = r.is_null(3) ? now : clip(r.integer(3), r.integer(2));
    GP_TRY_VOID(close_downtime(tx, r.text(0), r.text(1), at));
    ++changed;
  }
  // Outages without an interval (begun before downtime was recorded): from the last recorded
  // change, but never before the end of an earlier interval of the same node or GPU.
  auto start_after = [&](const std::string& node, const std::string& gpu,
                         int64_t at) -> Result<int64_t> {
    auto last = GP_TRY(tx.query_one(
        "SELECT MAX(end_us) FROM downtime_intervals WHERE node_id = ? AND gpu_uuid = ?",
        {node, gpu}));
    int64_t start = std::min(at, now);
    if (last && !last->is_null(0)) start = std::max(start, last->integer(0));
    return start;
  };
  for (const auto& r : GP_TRY(tx.query(
           "SELECT n.id, n.state_reason, n.updated_at FROM nodes n WHERE n.state = 'failed' AND "
           "NOT EXISTS (SELECT 1 FROM downtime_intervals d WHERE d.node_id = n.id AND "
           "d.gpu_uuid = '' AND d.end_us IS NULL)"))) {
    const int64_t start = GP_TRY(start_after(r.text(0), "", r.integer(2)));
    GP_TRY_VOID(open_downtime(tx, r.text(0), "", r.text(1), start));
    ++changed;
  }
  for (const auto& r : GP_TRY(tx.query(
           "SELECT g.node_id, g.uuid, g.health, g.health_reason, g.updated_at FROM gpus g JOIN "
           "nodes n ON n.id = g.node_id WHERE g.present = 1 AND g.health <> 'healthy' AND "
           "n.state <> 'retired' AND NOT EXISTS (SELECT 1 FROM downtime_intervals d WHERE "
           "d.node_id = g.node_id AND d.gpu_uuid = g.uuid AND d.end_us IS NULL)"))) {
    const std::string cause = r.text(3).empty() ? r.text(2) : r.text(2) + ": " + r.text(3);
    const int64_t start = GP_TRY(start_after(r.text(0), r.text(1), r.integer(4)));
    GP_TRY_VOID(open_downtime(tx, r.text(0), r.text(1), cause, start));
    ++changed;
  }
  return changed;
}

}  // namespace gp::fleet
