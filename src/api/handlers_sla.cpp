// SLA accounting: per-offering SLAs (target and credit tiers), the monthly standing of every
// tenant or of one, and the fleet's raw downtime history (gp_sla_standing, gp_fleet).
#include <fmt/format.h>

#include <map>
#include <unordered_map>

#include "alloc/alloc.h"
#include "api/router.h"
#include "fleet/fleet.h"
#include "metering/metering.h"
#include "sla/standing.h"

namespace gp::api {
namespace {

using iam::Permission;

std::string ts(int64_t us) { return format_rfc3339(from_unix_micros(us)); }

// 999000 -> "99.9%", 1000000 -> "100%".
std::string percent(int64_t ppm) {
  std::string frac = fmt::format("{:04}", ppm % 10000);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return frac.empty() ? fmt::format("{}%", ppm / 10000) : fmt::format("{}.{}%", ppm / 10000, frac);
}

Json stored_sla_json(const sla::StoredSla& s, const alloc::Offering& o) {
  Json j = json_of_fields(s.sla);
  j["offering"] = o.id;
  j["offering_name"] = o.name;
  j["target"] = percent(s.sla.target_ppm);
  j["configured"] = s.configured;
  j["updated_by"] = s.configured ? Json(s.updated_by) : Json(nullptr);
  j["updated_at"] = s.configured ? Json(ts(s.updated_at)) : Json(nullptr);
  j["version"] = s.version;
  return j;
}

Result<Reply> get_offering_sla(Api&, Call& call, store::Tx& tx) {
  auto o = GP_TRY(found(alloc::find_offering(tx, call.param("offering")), "offering"));
  auto s = GP_TRY(sla::find_offering_sla(tx, o.id));
  return json_reply(200, stored_sla_json(s, o), s.version);
}

Result<Mutation> put_offering_sla(Api& api, Call& call, store::Tx& tx) {
  auto o = GP_TRY(found(alloc::find_offering(tx, call.param("offering")), "offering"));
  if (!call.body || !call.body->is_object())
    return fail(Error::invalid("offering SLA: the body must be a JSON object"));
  Json body = *call.body;
  if (!body.contains("offering")) {
    body["offering"] = o.id;
  } else if (!body["offering"].is_string() ||
             (body["offering"] != o.id && body["offering"] != o.name)) {
    return fail(Error::invalid(
        fmt::format("field 'offering': names another offering than the path ({})", o.name)));
  }
  auto next = GP_TRY(sla::parse_offering_sla(body));
  next.offering = o.id;
  auto before = GP_TRY(sla::find_offering_sla(tx, o.id));
  GP_TRY_VOID(check_if_match(call, before.version));
  auto stored =
      GP_TRY(sla::put_offering_sla(tx, next, before.version, call.who.id, api.env().now()));
  Mutation m;
  m.reply = json_reply(200, stored_sla_json(stored, o), stored.version);
  m.resource = fmt::format("/v1/offerings/{}/sla", o.id);
  m.detail = {{"offering", o.name},
              {"version", stored.version},
              {"target_ppm", next.target_ppm},
              {"tiers", next.tiers.size()},
              {"previous_target_ppm", before.sla.target_ppm},
              {"previous_version", before.version}};
  return m;
}

// ?period=YYYY-MM, the current UTC month by default.
Result<std::pair<int64_t, int64_t>> period_param(Api& api, const Call& call) {
  auto it = call.req.query.find("period");
  if (it == call.req.query.end()) return sla::parse_period(sla::period_of(api.env().now()));
  return sla::parse_period(it->second);
}

// For display; the exact figures travel beside it as decimal strings.
double ratio(__int128 num, int64_t den) { return double(num) / double(den); }

Result<Reply> standing_reply(Api& api, Call& call, store::Tx& tx, const std::string& tenant_id) {
  const auto [from, to] = GP_TRY(period_param(api, call));
  const int64_t now = api.env().now();
  auto rows = GP_TRY(sla::standing(tx, tenant_id, from, to, now, [&tx](const std::string& id) {
    return alloc::find_failure(tx, id);
  }));
  const auto tenant_names = GP_TRY(tenancy::tenant_names(tx));
  std::unordered_map<std::string, std::string> offering_names;
  for (const auto& o : GP_TRY(alloc::list_offerings(tx))) offering_names[o.id] = o.name;
  std::map<std::string, sla::OfferingSla, std::less<>> slas;
  Json items = Json::array();
  constexpr int64_t kUnitMinute = int64_t(vocab::kUnitsPerGpu) * 60'000'000;
  for (const auto& a : rows) {
    auto s = slas.find(a.offering);
    if (s == slas.end())
      s = slas.emplace(a.offering, GP_TRY(sla::find_offering_sla(tx, a.offering)).sla).first;
    auto name = [](const auto& names, const std::string& id) {
      auto it = names.find(id);
      return it == names.end() ? id : it->second;
    };
    items.push_back({{"tenant_id", a.tenant},
                     {"tenant", name(tenant_names, a.tenant)},
                     {"offering_id", a.offering},
                     {"offering", name(offering_names, a.offering)},
                     {"target_ppm", s->second.target_ppm},
                     {"target", percent(s->second.target_ppm)},
                     {"availability", sla::format_availability(a)},
                     {"availability_ppm", a.availability_ppm},
                     {"met_target", a.met_target},
                     {"entitled_gpu_hours", ratio(a.entitled, kUnitMinute * 60)},
                     {"downtime_gpu_minutes", ratio(a.downtime, kUnitMinute)},
                     {"entitled_unit_us", metering::decimal(a.entitled)},
                     {"downtime_unit_us", metering::decimal(a.downtime)},
                     {"credit_bps", a.credit_bps},
                     {"reason", a.reason}});
  }
  return json_reply(200, {{"period", sla::period_of(from)},
                          {"from", ts(from)},
                          {"to", ts(to)},
                          {"as_of", ts(std::min(now, to))},
                          {"items", items}});
}

Result<Reply> list_downtime(Api& api, Call& call, store::Tx& tx) {
  const int64_t now = api.env().now();
  const int64_t to = GP_TRY(time_param(call, "to", now));
  const int64_t from =
      GP_TRY(time_param(call, "from", metering::period_start(now, metering::Granularity::kMonth)));
  if (to <= from) return fail(Error::invalid("from must be before to"));
  const auto node_names = GP_TRY(fleet::node_names(tx));
  Json items = Json::array();
  for (const auto& d : GP_TRY(fleet::list_downtime(tx, from, to))) {
    Json j = d.to_json();
    auto n = node_names.find(d.node_id);
    j["node"] = n == node_names.end() ? d.node_id : n->second;
    // Seconds of this interval inside [from, to), open ones up to now.
    const int64_t s = std::max(d.start_us, from), e = std::min(d.end_us.value_or(now), to);
    j["seconds_in_range"] = e > s ? (e - s) / 1'000'000 : 0;
    items.push_back(std::move(j));
  }
  return json_reply(200, {{"from", ts(from)}, {"to", ts(to)}, {"items", items}});
}

}  // namespace

std::vector<Route> sla_routes() {
  std::vector<Route> r;
  r.push_back({.method = "GET",
               .pattern = "/v1/offerings/{offering}/sla",
               .action = "offering.sla.get",
               .access = Access::kAuthenticated,
               .handler = read_tx(get_offering_sla),
               .summary = "The offering's SLA: availability target and credit tiers (the "
                          "default 99.9/99.0/95.0% -> 10/30/100% when none is set; version 0).",
               .response_schema = "OfferingSla"});
  r.push_back({.method = "PUT",
               .pattern = "/v1/offerings/{offering}/sla",
               .action = "offering.sla.set",
               .permission = Permission::kBillingWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(put_offering_sla),
               .summary = "Replace the offering's SLA: target_ppm (999000 = 99.9%) and tiers "
                          "[{below_ppm, credit_bps}] by strictly descending below_ppm with "
                          "non-decreasing credit. Audited.",
               .request_schema = "OfferingSlaSet",
               .response_schema = "OfferingSla"});
  r.push_back({.method = "GET",
               .pattern = "/v1/sla",
               .action = "sla.list",
               .permission = Permission::kUsageRead,
               .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 std::string tenant_id;
                 if (auto t = call.req.query.find("tenant"); t != call.req.query.end())
                   tenant_id = GP_TRY(found(tenancy::find_tenant(tx, t->second), "tenant")).id;
                 return standing_reply(api, call, tx, tenant_id);
               }),
               .query_params = {"period", "tenant"},
               .summary = "SLA standing of every tenant (operators) for a UTC month "
                          "(period=YYYY-MM, default the current one): availability per tenant "
                          "and offering, downtime and the credit tier reached.",
               .response_schema = "SlaStanding"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/sla",
               .action = "sla.get",
               .permission = Permission::kUsageRead,
               .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 return standing_reply(api, call, tx, call.tenant->id);
               }),
               .query_params = {"period"},
               .summary = "The tenant's SLA standing for a UTC month (period=YYYY-MM).",
               .response_schema = "SlaStanding"});
  r.push_back({.method = "GET",
               .pattern = "/v1/fleet/downtime",
               .action = "fleet.downtime",
               .permission = Permission::kFleetRead,
               .handler = read_tx(list_downtime),
               .query_params = {"from", "to"},
               .summary = "Node and GPU downtime intervals overlapping [from, to) (RFC 3339 or "
                          "YYYY-MM-DD; default the current month up to now), oldest first.",
               .response_schema = "DowntimeList"});
  return r;
}

}  // namespace gp::api
