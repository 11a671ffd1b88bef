// Metering: usage events from external meters (CloudEvents) and the usage rollups of tenants and
// of the whole platform, as JSON or CSV.
#include <fmt/format.h>

#include <algorithm>

#include "api/router.h"
#include "metering/metering.h"

namespace gp::api {
namespace {

using iam::Permission;

constexpr size_t kMaxEventsPerBatch = 10000;
constexpr size_t kMaxPeriods = 2000;

// The scopes at which the principal holds usage.write: platform, or tenants.
bool may_write_usage_somewhere(const iam::Principal& who) {
  for (const auto& b : who.bindings) {
    iam::Scope s = b.project_id  ? iam::Scope::project(*b.tenant_id, *b.project_id)
                   : b.tenant_id ? iam::Scope::tenant(*b.tenant_id)
                                 : iam::Scope::platform();
    if (iam::authorize(who, Permission::kUsageWrite, s) == iam::Decision::kAllow) return true;
  }
  return false;
}

Result<Mutation> post_usage_events(Api& api, Call& call, store::Tx& tx) {
  auto ct = call.req.header("content-type");
  const std::string_view type = ct ? *ct : std::string_view();
  const bool single_ce = type.starts_with("application/cloudevents+json");
  const bool batch_ce = type.starts_with("application/cloudevents-batch+json");
  if (!single_ce && !batch_ce && !type.starts_with("application/json"))
    return fail(ErrorCode::kUnsupportedMedia,
                "Content-Type must be application/cloudevents+json, "
                "application/cloudevents-batch+json or application/json");
  if (call.req.body.size() > api.limits().max_body_bytes)
    return fail(ErrorCode::kPayloadTooLarge, "request body too large");
  if (!may_write_usage_somewhere(call.who))
    return fail(Error::denied("missing permission usage.write"));
  const Json body = GP_TRY(parse_json(call.req.body));
  if (single_ce && !body.is_object())
    return fail(Error::invalid("application/cloudevents+json carries one event (an object)"));
  if (batch_ce && !body.is_array())
    return fail(Error::invalid("application/cloudevents-batch+json carries an array of events"));
  auto parsed = GP_TRY(metering::parse_events(body, kMaxEventsPerBatch));
  if (!parsed.batch && !parsed.events.front())
    return fail(Error::invalid("event rejected: " + parsed.events.front().error().message));

  metering::Resolver resolve;
  resolve.tenant = [&](const std::string& t) -> Result<std::string> {
    auto tenant = GP_TRY(tenancy::find_tenant(tx, t));
    if (!tenant || !call.who.reaches_tenant(tenant->id))
      return fail(Error::not_found("tenant not found"));
    if (iam::authorize(call.who, Permission::kUsageWrite, iam::Scope::tenant(tenant->id)) !=
        iam::Decision::kAllow)
      return fail(Error::denied("missing permission usage.write in this tenant"));
    return tenant->id;
  };
  resolve.project = [&](const std::string& tenant_id, const std::string& p) -> Result<std::string> {
    auto project = GP_TRY(tenancy::find_project(tx, tenancy::TenantScope(tenant_id), p));
    if (!project) return fail(Error::not_found("project not found in the tenant"));
    return project->id;
  };
  const int64_t now = api.env().now();
  auto report = GP_TRY(metering::ingest(tx, parsed.events, resolve, api.metering(), now));
  Mutation m;
  if (!parsed.batch && report.results.front().outcome == metering::Outcome::kRejected)
    return fail(Error::invalid("event rejected: " + report.results.front().reason));
  m.reply = json_reply(202, report.to_json());
  m.detail = {{"events", parsed.events.size()},
              {"accepted", report.accepted},
              {"duplicates", report.duplicates},
              {"rejected", report.rejected}};
  if (call.who.tenant_id) m.tenant_id = call.who.tenant_id;
  return m;
}

Result<Reply> usage_report(Api& api, Call& call, store::Tx& tx, const std::string& tenant_id,
                           bool platform) {
  metering::UsageQuery q;
  q.tenant_id = tenant_id;
  const int64_t now = api.env().now();
  if (auto g = call.req.query.find("granularity"); g != call.req.query.end()) {
    auto parsed = metering::parse_granularity(g->second);
    if (!parsed) return fail(Error::invalid("granularity must be hour, day or month"));
    q.granularity = *parsed;
  }
  q.to_us = GP_TRY(time_param(call, "to", now));
  q.from_us =
      GP_TRY(time_param(call, "from", metering::period_start(now, metering::Granularity::kMonth)));
  if (q.to_us <= q.from_us) return fail(Error::invalid("from must be before to"));
  const int64_t first = metering::period_start(q.from_us, q.granularity);
  size_t periods = 0;
  for (int64_t p = first; p < q.to_us && periods <= kMaxPeriods;
       p = metering::period_next(p, q.granularity))
    ++periods;
  if (periods > kMaxPeriods)
    return fail(Error::invalid(fmt::format(
        "the range spans more than {} periods: choose a coarser granularity or a shorter range",
        kMaxPeriods)));
  if (auto g = call.req.query.find("group_by"); g != call.req.query.end())
    q.group_by = GP_TRY(metering::parse_group_by(g->second, platform));
  bool csv = false;
  if (auto f = call.req.query.find("format"); f != call.req.query.end()) {
    if (f->second != "csv" && f->second != "json")
      return fail(Error::invalid("format must be json or csv"));
    csv = f->second == "csv";
  }
  auto report = GP_TRY(metering::usage(tx, q, now));
  if (!csv) return json_reply(200, report.to_json());
  Reply r;
  r.raw = report.to_csv();
  r.content_type = "text/csv; charset=utf-8";
  r.headers.emplace_back("Content-Disposition", fmt::format("attachment; filename=\"usage-{}.csv\"",
                                                            tenant_id.empty() ? "all" : tenant_id));
  return r;
}

const std::vector<std::string> kUsageParams = {"from", "to", "group_by", "granularity", "format"};

}  // namespace

std::vector<Route> usage_routes() {
  std::vector<Route> r;
  r.push_back({.method = "POST",
               .pattern = "/v1/usage-events",
               .action = "usage_event.create",
               .access = Access::kAuthenticated,
               .mutation = true,
               .handler = write_tx(post_usage_events),
               .summary =
                   "Post usage from an external meter: one CloudEvent 1.0 "
                   "(application/cloudevents+json) or a batch (application/cloudevents-batch+json "
                   "or a JSON array). Needs usage.write in each event's tenant; deduplicated on "
                   "(tenant, source, id); durable before 202. The answer lists every event as "
                   "accepted, duplicate or rejected with the reason.",
               .response_schema = "UsageIngest",
               .success_status = 202});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/usage",
               .action = "usage.get",
               .permission = Permission::kUsageRead,
               .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 return usage_report(api, call, tx, call.tenant->id, false);
               }),
               .query_params = kUsageParams,
               .summary = "The tenant's usage by hour, day or month (UTC): allocated "
                          "GPU-equivalent time beside utilization-weighted time, and external "
                          "usage events; group_by project, resource_key, offering; format=csv.",
               .response_schema = "Usage"});
  std::vector<std::string> platform_params = kUsageParams;
  platform_params.push_back("tenant");
  r.push_back({.method = "GET",
               .pattern = "/v1/usage",
               .action = "usage.list",
               .permission = Permission::kUsageRead,
               .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
                 std::string tenant_id;
                 if (auto t = call.req.query.find("tenant"); t != call.req.query.end()) {
                   auto tenant = GP_TRY(found(tenancy::find_tenant(tx, t->second), "tenant"));
                   tenant_id = tenant.id;
                 }
                 return usage_report(api, call, tx, tenant_id, true);
               }),
               .query_params = platform_params,
               .summary = "Usage across every tenant (operators); group_by may include tenant.",
               .response_schema = "Usage"});
  return r;
}

void refresh_usage_gauges(Api& api, store::Tx& tx) {
  auto by_tenant = metering::open_units_by_tenant(tx);
  if (!by_tenant) return;
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [t, units] : *by_tenant)
    values.emplace_back(t, double(units) / vocab::kUnitsPerGpu);
  api.metrics().set_family("usage_gpu_equivalents",
                           "GPU-equivalents held by open usage intervals, by tenant (the largest "
                           "50; the rest summed as tenant=\"_other\").",
                           "tenant", std::move(values), 50);
}

}  // namespace gp::api
