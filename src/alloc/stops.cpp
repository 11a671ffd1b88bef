// Stops: the work of ended allocations still on their nodes, and the live allocations that wait
// for it to be gone before anything of theirs starts on the same GPUs (alloc.h, "stops").
#include <fmt/format.h>

#include <algorithm>

#include "alloc/alloc.h"
#include "alloc/internal.h"
#include "common/env.h"
#include "fleet/fleet.h"
#include "store/record_row.h"

namespace gp::alloc {

namespace {

const std::string kStopColumns = store::columns_of<Stop>();

// The GPU grants of `a` on `node_id`, as its placement names them.
std::vector<Json> grants_on(const Allocation& a, const std::string& node_id) {
  std::vector<Json> out;
  if (!a.placement.is_object()) return out;
  for (const auto& g : a.placement.value("gpus", Json::array()))
    if (g.value("node", "") == node_id) out.push_back(g);
  return out;
}

// Two grants hold the same hardware: one GPU, unless both are MIG instances starting at
// different slices (instances of one GPU are isolated from each other).
bool overlap(const Json& a, const Json& b) {
  if (a.value("gpu", "") != b.value("gpu", "")) return false;
  if (a.contains("mig") && b.contains("mig"))
    return a["mig"].value("start", -1) == b["mig"].value("start", -1);
  return true;
}

}  // namespace

namespace {

// The stops whose `column` is `value`, ordered by the other key.
Result<std::vector<Stop>> stops_where(store::Tx& tx, std::string_view column,
                                      const std::string& value) {
  std::vector<Stop> out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM allocation_stops WHERE {} = ? ORDER BY {}", kStopColumns,
                       column, column == "node_id" ? "allocation_id" : "node_id"),
           {value})))
    out.push_back(GP_TRY(store::read_row<Stop>(row)));
  return out;
}

}  // namespace

Result<std::vector<Stop>> node_stops(store::Tx& tx, const std::string& node_id) {
  return stops_where(tx, "node_id", node_id);
}

Result<std::vector<Stop>> allocation_stops(store::Tx& tx, const std::string& allocation_id) {
  return stops_where(tx, "allocation_id", allocation_id);
}

Result<std::map<std::string, std::vector<std::string>>> node_waits(store::Tx& tx,
                                                                   const std::string& node_id) {
  std::map<std::string, std::vector<std::string>> waits;
  const auto stops = GP_TRY(node_stops(tx, node_id));
  if (stops.empty()) return waits;
  std::vector<std::pair<std::string, std::vector<Json>>> held;
  for (const Stop& s : stops)
    if (auto a = GP_TRY(detail::load(tx, s.allocation_id)))
      held.emplace_back(a->id, grants_on(*a, node_id));
  for (const auto& row : GP_TRY(tx.query(
           "SELECT allocation_id FROM allocation_nodes WHERE node_id = ? ORDER BY allocation_id",
           {node_id}))) {
    // Only what has not started waits: a shared GPU's other holders run on.
    auto a = GP_TRY(detail::load(tx, row.text(0)));
    if (!a || a->state != State::kPlaced) continue;
    const std::vector<Json> mine = grants_on(*a, node_id);
    for (const auto& [stopping, theirs] : held) {
      const bool shares = std::ranges::any_of(mine, [&](const Json& g) {
        return std::ranges::any_of(theirs, [&](const Json& h) { return overlap(g, h); });
      });
      if (shares) waits[a->id].push_back(stopping);
    }
  }
  return waits;
}

Result<Json> end_stops(store::Tx& tx, const Env& w, const std::string& node_id,
                       const std::vector<std::string>& holding) {
  Json ended = Json::array();
  const int64_t now = w.now();
  for (const Stop& s : GP_TRY(node_stops(tx, node_id))) {
    if (std::ranges::find(holding, s.allocation_id) != holding.end()) continue;
    GP_TRY(tx.exec("DELETE FROM allocation_stops WHERE node_id = ? AND allocation_id = ?",
                   {node_id, s.allocation_id}));
    auto a = GP_TRY(detail::load(tx, s.allocation_id));
    ended.push_back({{"allocation", s.allocation_id},
                     {"tenant_id", a ? a->tenant_id : ""},
                     {"held_seconds", (now - s.since) / 1'000'000},
                     {"overdue", now > s.stop_by}});
  }
  // The node's assignment changed: what waited there may start now.
  if (!ended.empty()) tx.announce("node:" + node_id);
  return ended;
}

namespace detail {

Result<int> record_stops(store::Tx& tx, const Allocation& a, int64_t now, Duration grace) {
  const int64_t grace_us = std::chrono::duration_cast<std::chrono::microseconds>(grace).count();
  int n = 0;
  for (const auto& row :
       GP_TRY(tx.query("SELECT node_id FROM allocation_nodes WHERE allocation_id = ?", {a.id}))) {
    // A node whose agent never reported in runs nothing of it; a failed one is gone.
    auto node = GP_TRY(fleet::find_node(tx, row.text(0)));
    if (!node || !node->last_heartbeat || node->state == fleet::NodeState::kFailed ||
        node->state == fleet::NodeState::kRetired)
      continue;
    static const std::string kInsert = fmt::format(
        "INSERT INTO allocation_stops ({}) VALUES ({}) ON CONFLICT (node_id, "
        "allocation_id) DO NOTHING",
        kStopColumns, store::placeholders_of<Stop>());
    GP_TRY(tx.exec(kInsert, store::params_of(
                                Stop{a.id, node->id, now, now + grace_us, grace_us / 1'000'000})));
    ++n;
  }
  if (n > 0)
    GP_TRY(tx.exec("UPDATE allocations SET grace_until = COALESCE(grace_until, ?) WHERE id = ?",
                   {now + grace_us, a.id}));
  return n;
}

Result<void> drop_node_stops(store::Tx& tx, const std::string& node_id) {
  GP_TRY(tx.exec("DELETE FROM allocation_stops WHERE node_id = ?", {node_id}));
  return ok();
}

}  // namespace detail

}  // namespace gp::alloc
