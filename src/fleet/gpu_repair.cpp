// GPU health history and repair (fleet.h, "GPU health and repair"): every XID and uncorrected
// ECC count a node reports, and the operator's repairs, in the fleet module's own tables.
#include <fmt/format.h>

#include <charconv>
#include <map>

#include "common/env.h"
#include "fleet/fleet.h"

namespace gp::fleet {

namespace {

std::string rfc3339(int64_t us) { return format_rfc3339(from_unix_micros(us)); }

// `ecc`: the uncorrected ECC count the event saw; nullopt keeps the last one recorded.
Result<void> insert_event(store::Tx& tx, const std::string& uuid, const std::string& node_id,
                          int64_t at, std::string_view kind, const std::string& detail,
                          std::optional<int64_t> ecc) {
  if (!ecc) {
    auto last = GP_TRY(tx.query_one(
        "SELECT ecc_uncorrected FROM gpu_health_events WHERE gpu_uuid = ? ORDER BY seq DESC "
        "LIMIT 1",
        {uuid}));
    ecc = last ? last->integer(0) : 0;
  }
  GP_TRY(tx.exec(
      "INSERT INTO gpu_health_events (gpu_uuid, seq, node_id, at, kind, detail, ecc_uncorrected) "
      "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM gpu_health_events WHERE "
      "gpu_uuid = ?",
      {uuid, node_id, at, std::string(kind), detail, *ecc, uuid}));
  return ok();
}

}  // namespace

Result<std::optional<GpuRepair>> find_repair(store::Tx& tx, const std::string& uuid) {
  auto row = GP_TRY(
      tx.query_one("SELECT since, reason, actor FROM gpu_repairs WHERE gpu_uuid = ?", {uuid}));
  if (!row) return std::optional<GpuRepair>();
  return std::optional<GpuRepair>(GpuRepair{row->integer(0), row->text(1), row->text(2)});
}

Result<std::vector<std::string>> node_repairs(store::Tx& tx, const std::string& node_id) {
  std::vector<std::string> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT gpu_uuid FROM gpu_repairs WHERE node_id = ? ORDER BY gpu_uuid", {node_id})))
    out.push_back(row.text(0));
  return out;
}

Result<void> record_health_report(store::Tx& tx, const std::string& node_id, const GpuInfo& g,
                                  int64_t now) {
  // The count is the driver's volatile one: recorded when it changes, not every heartbeat.
  auto last = GP_TRY(tx.query_one(
      "SELECT ecc_uncorrected FROM gpu_health_events WHERE gpu_uuid = ? ORDER BY seq DESC "
      "LIMIT 1",
      {g.uuid}));
  const int64_t before = last ? last->integer(0) : 0;
  if (g.health.ecc_uncorrected != before)
    GP_TRY_VOID(insert_event(tx, g.uuid, node_id, now, "ecc",
                             fmt::format("{} uncorrected ECC errors", g.health.ecc_uncorrected),
                             g.health.ecc_uncorrected));
  if (!g.health.xid_errors.empty()) {
    std::string codes;
    for (int x : g.health.xid_errors) codes += (codes.empty() ? "" : ", ") + std::to_string(x);
    GP_TRY_VOID(
        insert_event(tx, g.uuid, node_id, now, "xid", "XID " + codes, g.health.ecc_uncorrected));
  }
  return ok();
}

Result<void> end_repair(store::Tx& tx, const std::string& uuid, const std::string& node_id,
                        int64_t now) {
  GP_TRY(tx.exec("DELETE FROM gpu_repairs WHERE gpu_uuid = ?", {uuid}));
  return insert_event(tx, uuid, node_id, now, "returned",
                      "its node's health check passed after the repair (no XID, no uncorrected "
                      "ECC errors): back in service",
                      std::nullopt);
}

Result<Gpu> start_repair(store::Tx& tx, const Env& w, const std::string& node_id,
                         const std::string& uuid, const std::string& reason,
                         const std::string& actor) {
  std::optional<Gpu> gpu;
  for (auto& g : GP_TRY(list_gpus(tx, node_id)))
    if (g.info.uuid == uuid || std::to_string(g.info.index) == uuid) gpu = std::move(g);
  if (!gpu) return fail(Error::not_found("GPU not found on this node"));
  if (GP_TRY(find_repair(tx, gpu->info.uuid)))
    return fail(Error::conflict(fmt::format("GPU {} is in repair already", gpu->info.uuid)));
  const int64_t now = w.now();
  GP_TRY(tx.exec(
      "INSERT INTO gpu_repairs (gpu_uuid, node_id, since, reason, actor) VALUES (?,?,?,?,?)",
      {gpu->info.uuid, node_id, now, reason, actor}));
  // Out of service from now on: unhealthy until a health check after this passes.
  if (gpu->health == "healthy")
    GP_TRY_VOID(open_downtime(tx, node_id, gpu->info.uuid, "repair: " + reason, now));
  gpu->health = "unhealthy";
  gpu->health_reason = "in repair: " + reason;
  GP_TRY(
      tx.exec("UPDATE gpus SET health = 'unhealthy', health_reason = ?, updated_at = ? WHERE "
              "uuid = ?",
              {gpu->health_reason, now, gpu->info.uuid}));
  // The node's next report is applied in full, merging the repair into what it says.
  GP_TRY(tx.exec("UPDATE nodes SET inventory_digest = NULL WHERE id = ?", {node_id}));
  GP_TRY_VOID(insert_event(tx, gpu->info.uuid, node_id, now, "repair", reason, std::nullopt));
  return *gpu;
}

Result<std::map<std::string, XidTally>> xid_tallies(store::Tx& tx) {
  std::map<std::string, XidTally> out;
  for (const auto& r : GP_TRY(tx.query(
           "SELECT e.gpu_uuid, c.n, e.detail FROM gpu_health_events e JOIN (SELECT gpu_uuid, "
           "COUNT(*) AS n, MAX(seq) AS last FROM gpu_health_events WHERE kind = 'xid' GROUP BY "
           "gpu_uuid) c ON c.gpu_uuid = e.gpu_uuid AND c.last = e.seq"))) {
    // The detail reads "XID 79" or "XID 13, 79": the last code is after the last space.
    const std::string detail = r.text(2);
    int last = 0;
    const std::string code = detail.substr(detail.rfind(' ') + 1);
    std::from_chars(code.data(), code.data() + code.size(), last);
    out[r.text(0)] = {.reports = r.integer(1), .last = last};
  }
  return out;
}

Result<Json> gpu_history(store::Tx& tx, const std::string& uuid) {
  Json events = Json::array();
  for (const auto& row : GP_TRY(tx.query(
           "SELECT seq, node_id, at, kind, detail, ecc_uncorrected FROM gpu_health_events WHERE "
           "gpu_uuid = ? ORDER BY seq",
           {uuid})))
    events.push_back({{"seq", row.integer(0)},
                      {"node_id", row.text(1)},
                      {"at", rfc3339(row.integer(2))},
                      {"kind", row.text(3)},
                      {"detail", row.text(4)},
                      {"ecc_uncorrected", row.integer(5)}});
  return events;
}

}  // namespace gp::fleet
