// Usage intervals: one row per stretch of time an allocation held its resources in one state,
// written in the transaction that changes the allocation, so the intervals and the allocation
// history never disagree.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "metering/metering.h"
#include "vocab/vocab.h"

namespace gp::metering {

Result<std::optional<Holding>> holding_of(const Json& placement) {
  if (placement.is_null()) return std::optional<Holding>();
  if (!placement.is_object()) return fail(Error::internal("placement is not an object"));
  const std::string tier = placement.value("tier", "");
  const std::string model = placement.value("model", "");
  const Json gpus = placement.value("gpus", Json::array());
  const Json units = placement.value("units", Json(0));
  if (!units.is_number_integer() || !gpus.is_array())
    return fail(Error::internal("placement lacks units or gpus"));
  Holding h;
  h.units = units.get<int64_t>();
  if (const Json r = placement.value("reservation", Json()); r.is_string())
    h.reservation_id = r.get<std::string>();
  if (gpus.empty() || h.units <= 0) return std::optional<Holding>();  // CPU-only
  if (model.empty()) return fail(Error::internal("placement names no GPU model"));
  for (const Json& g : gpus) {
    if (!g.is_object() || !g.contains("gpu") || !g["gpu"].is_string())
      return fail(Error::internal("placement GPU entry without a uuid"));
    Device d{g["gpu"].get<std::string>(), ""};
    if (tier == "mig") {
      const Json mig = g.value("mig", Json::object());
      const std::string profile = mig.value("profile", "");
      if (profile.empty()) return fail(Error::internal("MIG placement without a profile"));
      if (h.resource_key.empty()) h.resource_key = vocab::mig_resource_key(model, profile);
      d.instance = fmt::format("{}@{}", profile, mig.value("start", 0));
      h.quantity += 1;
    } else if (tier == "shared") {
      h.resource_key = vocab::milli_resource_key(model);
      h.quantity += g.value("milli", int64_t{0});
    } else {
      h.resource_key = vocab::gpu_resource_key(model);
      h.quantity += 1;
    }
    if (std::ranges::find(h.devices, d) == h.devices.end()) h.devices.push_back(std::move(d));
  }
  return std::optional<Holding>(std::move(h));
}

namespace {

bool holds(std::string_view state) { return state == "placed" || state == "active"; }

Result<void> open_interval(store::Tx& tx, const AllocationView& a, const Holding& h,
                           std::string_view state, int64_t start) {
  // Unique per allocation: a zero-length interval at the same instant was removed first.
  const std::string id = fmt::format("{}@{}", a.id, start);
  GP_TRY_VOID(tx.send(
      "INSERT INTO usage_intervals (id, tenant_id, project_id, allocation_id, offering_id, "
      "resource_key, quantity, units, state, preemptible, start_us, end_us, reservation_id) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,NULL,?)",
      {id, a.tenant_id, a.project_id, a.id, store::opt(a.offering_id), h.resource_key, h.quantity,
       h.units, std::string(state), int64_t{a.preemptible}, start, store::opt(h.reservation_id)}));
  for (const Device& d : h.devices)
    GP_TRY_VOID(
        tx.send("INSERT INTO usage_interval_gpus (interval_id, gpu_uuid, instance) VALUES (?,?,?)",
                {id, d.gpu_uuid, d.instance}));
  return ok();
}

Result<void> drop_empty(store::Tx& tx, const std::string& allocation_id) {
  GP_TRY(tx.exec(
      "DELETE FROM usage_interval_gpus WHERE interval_id IN (SELECT id FROM usage_intervals "
      "WHERE allocation_id = ? AND end_us = start_us)",
      {allocation_id}));
  GP_TRY(tx.exec("DELETE FROM usage_intervals WHERE allocation_id = ? AND end_us = start_us",
                 {allocation_id}));
  return ok();
}

}  // namespace

Result<void> record_transition(store::Tx& tx, const AllocationView& a, std::string_view state,
                               int64_t now) {
  const int64_t closed = GP_TRY(
      tx.exec("UPDATE usage_intervals SET end_us = ? WHERE allocation_id = ? AND end_us IS NULL",
              {now, a.id}));
  if (closed > 0) GP_TRY_VOID(drop_empty(tx, a.id));
  return record_first_state(tx, a, state, now);
}

Result<void> record_first_state(store::Tx& tx, const AllocationView& a, std::string_view state,
                                int64_t start) {
  if (!holds(state)) return ok();
  auto h = GP_TRY(holding_of(a.placement));
  if (!h) return ok();
  return open_interval(tx, a, *h, state, start);
}

Result<int> recover(store::Tx& tx, const std::vector<LiveAllocation>& live, const EndedAt& ended_at,
                    int64_t now) {
  int changed = 0;
  std::set<std::string, std::less<>> live_ids, open;
  for (const LiveAllocation& a : live) live_ids.insert(a.view.id);
  for (const auto& row : GP_TRY(tx.query(
           "SELECT id, allocation_id, start_us FROM usage_intervals WHERE end_us IS NULL"))) {
    if (live_ids.contains(row.text(1))) {
      open.insert(row.text(1));
      continue;
    }
    // An open interval of an allocation that ended (or vanished) without closing it.
    const std::optional<int64_t> ended = GP_TRY(ended_at(row.text(1)));
    const int64_t end = std::max(row.integer(2), ended.value_or(now));
    GP_TRY(tx.exec("UPDATE usage_intervals SET end_us = ? WHERE id = ?", {end, row.text(0)}));
    GP_TRY_VOID(drop_empty(tx, row.text(1)));
    ++changed;
  }
  // Placed or active allocations holding GPUs with no open interval: placed before metering.
  for (const LiveAllocation& a : live) {
    if (open.contains(a.view.id)) continue;
    auto h = GP_TRY(holding_of(a.view.placement));
    if (!h) continue;
    // Start after the last closed interval, so nothing is counted twice.
    auto last = GP_TRY(tx.query_one(
        "SELECT MAX(end_us) FROM usage_intervals WHERE allocation_id = ?", {a.view.id}));
    int64_t start = a.placed_at.value_or(now);
    if (last && !last->is_null(0)) start = std::max(start, last->integer(0));
    GP_TRY_VOID(open_interval(tx, a.view, *h, a.state, std::min(start, now)));
    ++changed;
  }
  return changed;
}

Json Interval::to_json() const {
  Json devices_json = Json::array();
  for (const Device& d : devices)
    devices_json.push_back({{"gpu", d.gpu_uuid}, {"instance", d.instance}});
  return {{"id", id},
          {"tenant_id", tenant_id},
          {"project_id", project_id},
          {"allocation_id", allocation_id},
          {"offering_id", offering_id ? Json(*offering_id) : Json(nullptr)},
          {"resource_key", resource_key},
          {"quantity", quantity},
          {"units", units},
          {"state", state},
          {"preemptible", preemptible},
          {"start", format_rfc3339(from_unix_micros(start_us))},
          {"end", end_us ? Json(format_rfc3339(from_unix_micros(*end_us))) : Json(nullptr)},
          {"devices", devices_json},
          {"reservation_id", reservation_id ? Json(*reservation_id) : Json(nullptr)}};
}

Result<std::set<std::string>> allocations_with_open_usage(store::Tx& tx,
                                                          const std::string& tenant_id) {
  std::set<std::string> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT DISTINCT allocation_id FROM usage_intervals WHERE tenant_id = ? AND end_us IS "
           "NULL",
           {tenant_id})))
    out.insert(row.text(0));
  return out;
}

Result<std::vector<Interval>> load_intervals(store::Tx& tx, const std::string& tenant_id,
                                             int64_t from_us, int64_t to_us) {
  const std::string where =
      fmt::format("{}ui.start_us < ? AND (ui.end_us IS NULL OR ui.end_us > ?)",
                  tenant_id.empty() ? "" : "ui.tenant_id = ? AND ");
  store::Params params;
  if (!tenant_id.empty()) params.emplace_back(tenant_id);
  params.emplace_back(to_us);
  params.emplace_back(from_us);
  std::vector<Interval> out;
  std::map<std::string, size_t> at;
  for (const auto& row : GP_TRY(
           tx.query(fmt::format("SELECT ui.id, ui.tenant_id, ui.project_id, ui.allocation_id, "
                                "ui.offering_id, ui.resource_key, ui.quantity, ui.units, ui.state, "
                                "ui.preemptible, ui.start_us, ui.end_us, ui.reservation_id FROM "
                                "usage_intervals ui WHERE {} "
                                "ORDER BY ui.start_us, ui.id",
                                where),
                    params))) {
    Interval i;
    i.id = row.text(0);
    i.tenant_id = row.text(1);
    i.project_id = row.text(2);
    i.allocation_id = row.text(3);
    i.offering_id = row.opt_text(4);
    i.resource_key = row.text(5);
    i.quantity = row.integer(6);
    i.units = row.integer(7);
    i.state = row.text(8);
    i.preemptible = row.integer(9) != 0;
    i.start_us = row.integer(10);
    i.end_us = row.opt_integer(11);
    i.reservation_id = row.opt_text(12);
    at.emplace(i.id, out.size());
    out.push_back(std::move(i));
  }
  if (out.empty()) return out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT g.interval_id, g.gpu_uuid, g.instance FROM usage_interval_gpus g "
                       "JOIN usage_intervals ui ON ui.id = g.interval_id WHERE {} ORDER BY "
                       "g.interval_id, g.gpu_uuid, g.instance",
                       where),
           params))) {
    if (auto it = at.find(row.text(0)); it != at.end())
      out[it->second].devices.push_back({row.text(1), row.text(2)});
  }
  return out;
}

Result<std::set<std::string>> held_gpus(store::Tx& tx) {
  std::set<std::string> out;
  for (const auto& row : GP_TRY(
           tx.query("SELECT DISTINCT ug.gpu_uuid FROM usage_interval_gpus ug JOIN usage_intervals "
                    "ui ON ui.id = ug.interval_id WHERE ui.end_us IS NULL")))
    out.insert(row.text(0));
  return out;
}

Result<std::vector<std::string>> tenants_with_usage(store::Tx& tx, int64_t from_us, int64_t to_us) {
  std::vector<std::string> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT DISTINCT tenant_id FROM usage_intervals WHERE start_us < ? AND (end_us IS NULL "
           "OR end_us > ?) ORDER BY tenant_id",
           {to_us, from_us})))
    out.push_back(row.text(0));
  return out;
}

Result<std::vector<std::pair<std::string, int64_t>>> open_units_by_tenant(store::Tx& tx) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& row :
       GP_TRY(tx.query("SELECT tenant_id, SUM(units) FROM usage_intervals WHERE end_us IS NULL "
                       "GROUP BY tenant_id ORDER BY tenant_id")))
    out.emplace_back(row.text(0), row.integer(1));
  return out;
}

}  // namespace gp::metering
