// SLA standing from the store: usage intervals and downtime history into gp_sla's pure core.
#include "sla/standing.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/clock.h"
#include "fleet/fleet.h"
#include "metering/metering.h"

namespace gp::sla {
namespace {

bool digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Result<std::pair<int64_t, int64_t>> parse_period(std::string_view p) {
  const auto bad = [&] {
    return fail(Error::invalid(
        fmt::format("period '{}' is not a calendar month: use YYYY-MM (UTC), e.g. 2026-11", p)));
  };
  if (p.size() != 7 || p[4] != '-' || !digits(p.substr(0, 4)) || !digits(p.substr(5, 2)))
    return bad();
  const int year = std::stoi(std::string(p.substr(0, 4)));
  const int month = std::stoi(std::string(p.substr(5, 2)));
  if (year < 1970 || month < 1 || month > 12) return bad();
  TimePoint tp;
  if (!parse_rfc3339(fmt::format("{}-01T00:00:00Z", p), &tp)) return bad();
  const int64_t start = to_unix_micros(tp);
  return std::pair{start, metering::period_next(start, metering::Granularity::kMonth)};
}

std::string period_of(int64_t us) {
  return format_rfc3339(from_unix_micros(metering::period_start(us, metering::Granularity::kMonth)))
      .substr(0, 7);
}

Result<StoredSla> find_offering_sla(store::Tx& tx, const std::string& offering_id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT sla, updated_by, updated_at, version FROM offering_slas WHERE offering_id = ?",
      {offering_id}));
  StoredSla out;
  if (!row) {
    out.sla = default_offering_sla(offering_id);
    return out;
  }
  const Json j = GP_TRY(parse_json(row->text(0)));
  out.sla = GP_TRY(parse_offering_sla(j));
  out.sla.offering = offering_id;
  out.configured = true;
  out.updated_by = row->text(1);
  out.updated_at = row->integer(2);
  out.version = row->integer(3);
  return out;
}

Result<StoredSla> put_offering_sla(store::Tx& tx, const OfferingSla& s, int64_t expected_version,
                                   const std::string& updated_by, int64_t now) {
  GP_TRY_VOID(validate_offering_sla(s));
  const std::string stored = json_of_fields(s).dump();
  int64_t changed = 0;
  if (expected_version == 0)
    changed = GP_TRY(tx.exec(
        "INSERT INTO offering_slas (offering_id, sla, updated_by, updated_at, version) "
        "SELECT ?, ?, ?, ?, 1 WHERE NOT EXISTS (SELECT 1 FROM offering_slas WHERE offering_id = ?)",
        {s.offering, stored, updated_by, now, s.offering}));
  else
    changed = GP_TRY(
        tx.exec("UPDATE offering_slas SET sla = ?, updated_by = ?, updated_at = ?, version = ? "
                "WHERE offering_id = ? AND version = ?",
                {stored, updated_by, now, expected_version + 1, s.offering, expected_version}));
  if (changed != 1)
    return fail(Error::conflict("the offering's SLA changed meanwhile: read it and try again"));
  return StoredSla{s, true, updated_by, now, expected_version + 1};
}

Result<void> delete_offering_sla(store::Tx& tx, const std::string& offering_id) {
  GP_TRY(tx.exec("DELETE FROM offering_slas WHERE offering_id = ?", {offering_id}));
  return ok();
}

Result<std::vector<Availability>> standing(store::Tx& tx, const std::string& tenant_id,
                                           int64_t period_start_us, int64_t period_end_us,
                                           int64_t now, const FailureOf& failure_of) {
  if (period_end_us <= period_start_us)
    return fail(Error::invalid("SLA period: end must be after start"));
  std::vector<Availability> none;
  if (now <= period_start_us) return none;  // nothing has happened in the period yet
  const int64_t until = std::min(period_end_us, now);

  // Downtime, open intervals up to now.
  std::vector<DowntimeInterval> downtime;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>, std::less<>> node_down;
  for (const auto& d : GP_TRY(fleet::list_downtime(tx, period_start_us, until))) {
    const int64_t end = d.end_us.value_or(now);
    if (end <= d.start_us) continue;
    downtime.push_back({d.node_id, d.gpu_uuid, d.start_us, end});
    if (d.gpu_uuid.empty()) node_down[d.node_id].emplace_back(d.start_us, end);
  }

  const auto gpu_node = GP_TRY(fleet::gpu_nodes(tx));
  std::map<std::string, std::optional<Failure>, std::less<>> failures;
  auto failure_once = [&](const std::string& allocation) -> Result<std::optional<Failure>> {
    auto it = failures.find(allocation);
    if (it != failures.end()) return it->second;
    const std::optional<Failure> f = GP_TRY(failure_of(allocation));
    failures.emplace(allocation, f);
    return f;
  };

  std::vector<AllocationInterval> entitled;
  for (const auto& in : GP_TRY(metering::load_intervals(tx, tenant_id, period_start_us, until))) {
    if (!in.offering_id || in.offering_id->empty()) continue;  // no offering, no SLA
    const int64_t end = in.end_us.value_or(now);
    if (end <= in.start_us || in.units <= 0) continue;
    // The interval's GPUs by node; its weight (GPU-equivalent units) split by GPU count.
    std::map<std::string, std::vector<std::string>> by_node;
    for (const auto& d : in.devices) {
      auto g = gpu_node.find(d.gpu_uuid);
      if (g == gpu_node.end()) continue;
      auto& gpus = by_node[g->second];
      if (std::find(gpus.begin(), gpus.end(), d.gpu_uuid) == gpus.end()) gpus.push_back(d.gpu_uuid);
    }
    size_t total = 0;
    for (const auto& [node, gpus] : by_node) total += gpus.size();
    if (total == 0) continue;
    int64_t left = in.units;
    size_t seen = 0;
    const std::optional<Failure> failed =
        in.end_us ? GP_TRY(failure_once(in.allocation_id)) : std::nullopt;
    for (const auto& [node, gpus] : by_node) {
      seen += gpus.size();
      int64_t weight = seen == total ? left : in.units * int64_t(gpus.size()) / int64_t(total);
      left -= weight;
      weight = std::max<int64_t>(weight, 1);
      AllocationInterval a{in.tenant_id, *in.offering_id, in.allocation_id, node, gpus, in.start_us,
                           end,          weight};
      entitled.push_back(a);
      // An allocation its node's failure ended stays entitled while that node is down (up to
      // the end time it asked for): the outage, not the tenant, ended its service.
      if (!failed || failed->reason_code != "node_failed" || failed->ended_at != end) continue;
      auto nd = node_down.find(node);
      if (nd == node_down.end()) continue;
      for (const auto& [ds, de] : nd->second) {
        if (ds > end || de <= end) continue;
        int64_t ext_end = std::min(de, until);
        if (failed->end_at) ext_end = std::min(ext_end, *failed->end_at);
        if (ext_end <= end) continue;
        a.start_us = end;
        a.end_us = ext_end;
        entitled.push_back(a);
      }
    }
  }

  std::map<std::string, OfferingSla, std::less<>> slas;
  for (const auto& r : GP_TRY(tx.query("SELECT offering_id, sla FROM offering_slas"))) {
    auto s = parse_offering_sla(GP_TRY(parse_json(r.text(1))));
    if (!s)
      return fail(Error::internal(
          fmt::format("stored SLA of offering {}: {}", r.text(0), s.error().message)));
    s->offering = r.text(0);
    slas.emplace(r.text(0), std::move(*s));
  }
  return compute_availability(entitled, downtime, period_start_us, until, slas);
}

}  // namespace gp::sla
