// Budgets: per tenant and per project, threshold alerts as events, the optional hard stop on
// allocation create, and the billing sweep that records alerts and sets the revenue gauges.
// The rules are in docs/billing.md ("Budgets").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "alloc/alloc.h"
#include "api/router.h"
#include "billing/ledger.h"

namespace gp::api {
namespace {

using iam::Permission;

constexpr int64_t kUsPerHour = 3'600'000'000;
// The path segment naming the tenant-wide budget (a project name never starts with '-').
constexpr std::string_view kTenantWide = "-";
// Series kept per revenue gauge; the rest are summed as tenant="_other".
constexpr size_t kRevenueSeries = 50;

// The tenant's spend so far this month (billing::month_to_date_spend), its usage priced by the
// offerings' names as alloc lists them; failing to read those is failing to rate the spend.
Result<billing::Spend> spend_this_month(store::Tx& tx, const std::string& tenant_id, int64_t now,
                                        std::span<const billing::UsageRecord> extra = {}) {
  auto offerings = alloc::offering_names(tx);
  if (!offerings) return fail(offerings.error());
  return billing::month_to_date_spend(tx, tenant_id, now, *offerings, extra);
}

// The project the path's {budget} names: "" for "-" (the whole tenant), else a project of the
// tenant by id or name.
Result<std::string> budget_project(Call& call, store::Tx& tx) {
  const std::string& which = call.param("budget");
  if (which == kTenantWide) return std::string();
  auto p = GP_TRY(found(tenancy::find_project(tx, call.tenant_scope(), which), "project"));
  return p.id;
}

std::string budget_path(const std::string& tenant_id, const std::string& project_id) {
  return fmt::format("/v1/tenants/{}/budgets/{}", tenant_id,
                     project_id.empty() ? std::string(kTenantWide) : project_id);
}

// The budget's project by name, for people (null: the whole tenant).
Result<Json> project_name(Call& call, store::Tx& tx, const std::string& project_id) {
  if (project_id.empty()) return Json(nullptr);
  auto p = GP_TRY(tenancy::find_project(tx, call.tenant_scope(), project_id));
  return p ? Json(p->name) : Json(nullptr);
}

// The budget (its field table) with its project's name and its spend this month.
Result<Json> budget_json(Call& call, store::Tx& tx, const billing::StoredBudget& b,
                         const Result<billing::Spend>& spend) {
  Json j = json_of_fields(b);
  j["project"] = GP_TRY(project_name(call, tx, b.project));
  if (spend) {
    const billing::Micros spent = billing::spend_of(*spend, b);
    j["period"] = billing::period_label(spend->period);
    j["currency"] = spend->currency.empty() ? Json(nullptr) : Json(spend->currency);
    j["spend_micros"] = spent;
    // Spent share of the amount in basis points (floor) and as a percentage for display.
    j["spent_bps"] = int64_t(billing::Wide(spent) * billing::kBasisPoints / b.amount_micros);
    j["percent"] = double(spent) * 100.0 / double(b.amount_micros);
  } else {
    j["spend_micros"] = nullptr;
    j["spend_error"] = spend.error().message;
  }
  return j;
}

audit::Entry alert_audit(const billing::AlertRecord& a, std::string_view request_id) {
  return audit::Entry{"system",       a.tenant_id,
                      "budget.alert", budget_path(a.tenant_id, a.project_id),
                      "success",      std::string(request_id),
                      "local",        a.to_json()};
}

// Paginated by project id, the tenant-wide budget first; the cursor is the last item's
// {budget} path segment ("-" for the tenant-wide one).
Result<Reply> list_budgets(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  auto budgets = GP_TRY(billing::load_budgets(tx, call.tenant->id));  // ordered by project_id
  if (page.after) {
    const std::string after = *page.after == kTenantWide ? std::string() : *page.after;
    std::erase_if(budgets, [&](const auto& b) {
      return *page.after == kTenantWide ? b.project.empty() : b.project <= after;
    });
  }
  auto listed = make_page(std::move(budgets), page, [](const auto& b) {
    return b.project.empty() ? std::string(kTenantWide) : b.project;
  });
  Json items = Json::array();
  if (!listed.items.empty()) {
    const auto spend = spend_this_month(tx, call.tenant->id, api.env().now());
    for (const auto& b : listed.items) items.push_back(GP_TRY(budget_json(call, tx, b, spend)));
  }
  return json_reply(200, {{"items", items}, {"next", next_json(listed)}});
}

Result<Reply> get_budget(Api& api, Call& call, store::Tx& tx) {
  const std::string project = GP_TRY(budget_project(call, tx));
  auto b = GP_TRY(found(billing::find_budget(tx, call.tenant->id, project), "budget"));
  const auto spend = spend_this_month(tx, call.tenant->id, api.env().now());
  return json_reply(200, GP_TRY(budget_json(call, tx, b, spend)), b.version);
}

Result<Mutation> put_budget(Api& api, Call& call, store::Tx& tx) {
  const std::string project = GP_TRY(budget_project(call, tx));
  auto b = GP_TRY(billing::parse_budget_body(call.tenant->id, project, *call.body));
  auto current = GP_TRY(billing::find_budget(tx, call.tenant->id, project));
  GP_TRY_VOID(check_if_match(call, current ? current->version : 0));
  const int64_t now = api.env().now();
  auto saved = GP_TRY(billing::save_budget(tx, b, call.who.id, now));
  // Thresholds the spend already reached fire now rather than at the next sweep.
  const auto spend = spend_this_month(tx, call.tenant->id, now);
  Json fired = Json::array();
  if (spend) {
    for (const auto& a : GP_TRY(billing::record_budget_alerts(tx, b, spend->period,
                                                              billing::spend_of(*spend, b), now))) {
      GP_TRY_VOID(api.audit().append(tx, alert_audit(a, call.request_id)));
      fired.push_back(a.threshold_bps);
    }
  }
  Mutation m;
  m.reply =
      json_reply(current ? 200 : 201, GP_TRY(budget_json(call, tx, saved, spend)), saved.version);
  m.resource = budget_path(call.tenant->id, project);
  m.detail = {{"amount_micros", b.amount_micros},
              {"thresholds_bps", b.thresholds_bps},
              {"hard_stop", b.hard_stop},
              {"version", saved.version},
              {"alerts_fired_bps", fired}};
  return m;
}

Result<Mutation> delete_budget(Api&, Call& call, store::Tx& tx) {
  const std::string project = GP_TRY(budget_project(call, tx));
  auto current = GP_TRY(found(billing::find_budget(tx, call.tenant->id, project), "budget"));
  GP_TRY_VOID(check_if_match(call, current.version));
  GP_TRY(billing::delete_budget(tx, call.tenant->id, project));
  Mutation m;
  m.reply = json_reply(204, nullptr);
  m.resource = budget_path(call.tenant->id, project);
  m.detail = {{"amount_micros", current.amount_micros}, {"version", current.version}};
  return m;
}

Result<Reply> list_alerts(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  int64_t after = 0;
  if (page.after) {
    const std::string& a = *page.after;
    auto [ptr, ec] = std::from_chars(a.data(), a.data() + a.size(), after);
    if (ec != std::errc() || ptr != a.data() + a.size() || after < 0)
      return fail(Error::invalid("after is not a valid cursor"));
  }
  auto alerts =
      make_page(GP_TRY(billing::list_budget_alerts(tx, call.tenant->id, after, page.limit + 1)),
                page, [](const auto& a) { return std::to_string(a.id); });
  const auto& rows = alerts.items;
  // Each alert's amounts are in the currency of the card that priced its month (null when that
  // month has no card in force any more).
  const auto account = GP_TRY(billing::load_account(tx, call.tenant->id));
  std::map<std::string, Json> currency_of, name_of;
  Json items = Json::array();
  for (const auto& a : rows) {
    Json item = a.to_json();
    if (!name_of.contains(a.project_id))
      name_of[a.project_id] = GP_TRY(project_name(call, tx, a.project_id));
    item["project"] = name_of[a.project_id];
    auto [it, fresh] = currency_of.try_emplace(a.period, nullptr);
    if (fresh)
      if (auto period = billing::parse_month(a.period))
        if (auto card = billing::rate_card_for_period(tx, account.rate_card_id, *period))
          it->second = card->currency;
    item["currency"] = it->second;
    items.push_back(std::move(item));
  }
  return json_reply(200, {{"items", items}, {"next", next_json(alerts)}});
}

// The budget as its messages name it: the tenant's and the project's names, not their ids.
Result<billing::Budget> named(store::Tx& tx, billing::Budget b) {
  if (auto t = GP_TRY(tenancy::find_tenant(tx, b.tenant))) {
    if (!b.project.empty())
      if (auto p = GP_TRY(tenancy::find_project(tx, tenancy::TenantScope(t->id), b.project)))
        b.project = p->name;
    b.tenant = t->name;
  }
  return b;
}

// "tenant 'acme'" or "project 'acme/ml'", by name.
Result<std::string> scope_text(store::Tx& tx, const billing::Budget& b) {
  const billing::Budget n = GP_TRY(named(tx, b));
  return n.project.empty() ? fmt::format("tenant '{}'", n.tenant)
                           : fmt::format("project '{}/{}'", n.tenant, n.project);
}

}  // namespace

// ---- the hard stop around allocation create ----

Result<std::optional<BudgetGate>> budget_precheck(Api& api, store::Tx& tx,
                                                  const std::string& tenant_id,
                                                  const std::string& project_id) {
  auto stops = GP_TRY(billing::hard_stop_budgets(tx, tenant_id, project_id));
  if (stops.empty()) return std::optional<BudgetGate>();
  auto spend = spend_this_month(tx, tenant_id, api.env().now());
  if (!spend)
    return fail(Error::conflict(fmt::format(
        "a budget with a hard stop covers this project but its spend cannot be rated: {}",
        spend.error().message)));
  for (const auto& b : stops) {
    const billing::Micros spent = billing::spend_of(*spend, b);
    if (spent < b.amount_micros) continue;
    const std::string scope = GP_TRY(scope_text(tx, b));
    return fail(ErrorCode::kBudgetExceeded,
                fmt::format("the budget of {} for {} is spent: {} spent in {} (hard stop); "
                            "nothing new can be allocated until the next period or a larger budget",
                            billing::format_money(b.amount_micros, spend->currency), scope,
                            billing::format_money(spent, spend->currency),
                            billing::period_label(spend->period)));
  }
  return std::optional<BudgetGate>(BudgetGate{std::move(stops), std::move(*spend)});
}

Result<void> budget_admit(Api& api, store::Tx& tx, const BudgetGate& gate,
                          const alloc::Allocation& a) {
  // A queued allocation holds nothing yet: it was admitted by the precheck (spend under the
  // amount) and its cost counts once it is placed.
  if (a.placement.is_null()) return ok();
  auto holding = GP_TRY(metering::holding_of(a.placement));
  if (!holding) return ok();
  const int64_t now = api.env().now();
  billing::UsageRecord r;
  r.tenant = a.tenant_id;
  r.project = a.project_id;
  r.resource_key = holding->resource_key;
  if (a.offering_id) {
    if (auto o = GP_TRY(alloc::find_offering(tx, *a.offering_id))) r.offering = o->name;
  }
  r.preemptible = a.request.preemptible;
  r.start_us = now;
  // The proposal: its first hour, or up to its end time when it has one.
  r.end_us = a.end_at ? *a.end_at : now + kUsPerHour;
  r.quantity = holding->quantity;
  r.gpu_equivalent_units = holding->units;
  if (r.end_us <= r.start_us) return ok();
  const billing::UsageRecord proposal[] = {r};
  auto with = spend_this_month(tx, a.tenant_id, now, proposal);
  if (!with)
    return fail(Error::conflict(fmt::format(
        "a budget with a hard stop covers this project but the allocation cannot be priced: {}",
        with.error().message)));
  for (const auto& b : gate.stops) {
    const billing::Micros before = billing::spend_of(gate.spend, b);
    const billing::Micros cost = std::max<billing::Micros>(0, billing::spend_of(*with, b) - before);
    auto d = GP_TRY(billing::evaluate_budget(b, before, cost, with->currency));
    // Names are looked up only for the refusal's message, not on every create.
    if (d.refused)
      d = GP_TRY(billing::evaluate_budget(GP_TRY(named(tx, b)), before, cost, with->currency));
    if (d.refused)
      return fail(ErrorCode::kBudgetExceeded,
                  fmt::format("{}; priced as {} of {} {} from now", d.reason,
                              a.end_at ? "the allocation up to its end time" : "the first hour",
                              r.quantity, r.resource_key));
  }
  return ok();
}

// ---- the billing sweep ----

Result<int> Api::billing_sweep() {
  const int64_t now = env().now();
  const billing::Period period = billing::month_containing(now);
  struct Rated {
    std::string tenant;
    billing::Spend spend;
    std::vector<billing::StoredBudget> budgets;
  };
  std::vector<Rated> rated;
  // Rating reads only; the write transaction below just records what fired.
  GP_TRY_VOID(store().read([&](store::Tx& tx) -> Result<void> {
    std::set<std::string> tenants;
    for (auto& t : GP_TRY(billing::tenants_with_usage(tx, period, now))) tenants.insert(t);
    for (auto& t : GP_TRY(billing::tenants_with_budgets(tx))) tenants.insert(t);
    for (const auto& t : tenants) {
      auto spend = spend_this_month(tx, t, now);
      if (!spend) {
        spdlog::warn("billing sweep: tenant {} not rated: {}", t, spend.error().message);
        continue;
      }
      rated.push_back({t, std::move(*spend), GP_TRY(billing::load_budgets(tx, t))});
    }
    return ok();
  }));

  std::vector<std::pair<std::string, double>> revenue, gpu_hours;
  for (const auto& r : rated) {
    revenue.emplace_back(r.tenant, double(r.spend.total_micros));
    gpu_hours.emplace_back(r.tenant, double(r.spend.gpu_equivalent_unit_us) /
                                         double(billing::kGpuEquivalentUnits) / double(kUsPerHour));
  }
  metrics().set_family("billing_revenue_month_to_date_micros",
                       "Revenue rated so far this UTC month (invoice subtotal before credits and "
                       "tax), micro-units of the tenant's card currency, by tenant (the largest "
                       "50; the rest summed as tenant=\"_other\").",
                       "tenant", std::move(revenue), kRevenueSeries);
  metrics().set_family("billing_gpu_hours_month_to_date",
                       "GPU-equivalent-hours billed so far this UTC month, by tenant (the largest "
                       "50; the rest summed as tenant=\"_other\").",
                       "tenant", std::move(gpu_hours), kRevenueSeries);

  int fired = 0;
  std::vector<std::pair<std::string, double>> budget_used;  // tenant-wide budgets
  GP_TRY_VOID(store().write([&](store::Tx& tx) -> Result<void> {
    for (const auto& r : rated) {
      for (const auto& b : r.budgets) {
        // Changed or removed since it was read: the next sweep judges the new one.
        auto now_stored = GP_TRY(billing::find_budget(tx, b.tenant, b.project));
        if (!now_stored || now_stored->version != b.version) continue;
        const billing::Micros spent = billing::spend_of(r.spend, b);
        if (b.project.empty() && b.amount_micros > 0)
          budget_used.emplace_back(r.tenant, double(spent) / double(b.amount_micros));
        for (const auto& a :
             GP_TRY(billing::record_budget_alerts(tx, b, r.spend.period, spent, now))) {
          GP_TRY_VOID(audit().append(tx, alert_audit(a, "billing-sweep")));
          ++fired;
        }
        // A hard stop stops running work too, within the operator's grace (--budget-stop-grace).
        if (b.hard_stop && spent >= b.amount_micros) {
          const auto project = b.project.empty() ? std::nullopt : std::optional(b.project);
          const int ended = GP_TRY(allocs().end_work(
              tx, env(), b.tenant, project, "budget_exhausted",
              fmt::format("the budget of {} for {} is spent ({} spent in {}, hard stop)",
                          billing::format_money(b.amount_micros, r.spend.currency),
                          GP_TRY(scope_text(tx, b)), billing::format_money(spent, r.spend.currency),
                          billing::period_label(r.spend.period))));
          if (ended > 0) {
            audit::Entry e{
                "billing-sweep",
                b.tenant,
                "budget.hard_stop",
                fmt::format("/v1/tenants/{}/budgets/{}", b.tenant, project.value_or("-")),
                "success",
                "",
                "local",
                {{"allocations_released", ended}, {"spent_micros", spent}}};
            GP_TRY_VOID(audit().append(tx, e));
          }
        }
      }
    }
    return ok();
  }));
  metrics().set_family("billing_budget_used_ratio",
                       "Spend this period over the tenant-wide budget (1 = spent), by tenant (the "
                       "largest 50; the rest summed as tenant=\"_other\").",
                       "tenant", std::move(budget_used), kRevenueSeries);
  metrics().set_gauge("billing_sweep_timestamp_seconds",
                      "When the budget sweep last rated usage (Unix seconds).", double(now) / 1e6);
  return fired;
}

std::vector<Route> budget_routes() {
  std::vector<Route> r;
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/budgets",
               .action = "budget.list",
               .permission = Permission::kBillingRead,
               .handler = read_tx(list_budgets),
               .query_params = {"limit", "after"},
               .summary = "The tenant's budgets (project_id null: the whole tenant), each with the "
                          "month-to-date spend and the share of the amount spent.",
               .response_schema = "Budget[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/budgets/{budget}",
               .action = "budget.get",
               .permission = Permission::kBillingRead,
               .handler = read_tx(get_budget),
               .summary = "One budget: {budget} is a project id or name, or '-' for the "
                          "tenant-wide budget.",
               .response_schema = "Budget"});
  r.push_back({.method = "PUT",
               .pattern = "/v1/tenants/{tenant}/budgets/{budget}",
               .action = "budget.set",
               .permission = Permission::kQuotaWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(put_budget),
               .summary = "Create or replace a budget ({budget}: project id or name, or '-' for "
                          "the whole tenant): amount per UTC month, alert thresholds, hard stop. "
                          "Operators and tenant admins (quota.write).",
               .request_schema = "BudgetPut",
               .response_schema = "Budget",
               .other_success_status = 201});  // a budget the PUT created
  r.push_back({.method = "DELETE",
               .pattern = "/v1/tenants/{tenant}/budgets/{budget}",
               .action = "budget.delete",
               .permission = Permission::kQuotaWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(delete_budget),
               .summary = "Remove a budget (its alerts stay).",
               .success_status = 204});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/budget-alerts",
               .action = "budget_alert.list",
               .permission = Permission::kBillingRead,
               .handler = read_tx(list_alerts),
               .query_params = {"limit", "after"},
               .summary = "Budget alerts, oldest first: one per budget, UTC month and threshold "
                          "reached.",
               .response_schema = "BudgetAlert[]"});
  return r;
}

}  // namespace gp::api
