// Stored budgets, their alerts and the month-to-date spend they are measured against.
#include <fmt/format.h>

#include <algorithm>
#include <any>
#include <map>
#include <set>

#include "billing/ledger.h"
#include "common/clock.h"
#include "metering/metering.h"
#include "store/record_row.h"

namespace gp::billing {

namespace {

const std::string kBudgetColumns = store::columns_of<StoredBudget>();
const std::string kBudgetUpsert = fmt::format(
    "INSERT INTO budgets ({}) VALUES ({}) ON CONFLICT (tenant_id, project_id) DO UPDATE SET {}",
    kBudgetColumns, store::placeholders_of<StoredBudget>(),
    store::updates_of<StoredBudget>({"tenant_id", "project_id"}));

// A transaction's hard-stop budgets, by tenant (Tx::memo): the creates of one write batch read a
// tenant's once. Any change to a budget forgets them.
using HardStopsByTenant = std::map<std::string, std::vector<Budget>, std::less<>>;
constexpr std::string_view kHardStopsMemo = "billing.hard_stops";
void forget_hard_stops(store::Tx& tx) { tx.memo(kHardStopsMemo).reset(); }

const std::string kAlertColumns = store::columns_of<AlertRecord>();
Result<AlertRecord> alert_from(const store::Row& row) { return store::read_row<AlertRecord>(row); }

}  // namespace

Result<Budget> parse_budget_body(const std::string& tenant, const std::string& project,
                                 const Json& body) {
  if (!body.is_object()) return fail(Error::invalid("budget: body must be a JSON object"));
  for (const char* key : {"tenant", "project"}) {
    if (body.contains(key))
      return fail(Error::invalid(fmt::format("field '{}': given by the path, not the body", key)));
  }
  Json j = body;
  j["tenant"] = tenant;
  if (!project.empty()) j["project"] = project;
  return parse_budget(j);
}

Result<std::vector<StoredBudget>> load_budgets(store::Tx& tx, const std::string& tenant_id) {
  std::vector<StoredBudget> out;
  for (const auto& row :
       GP_TRY(tx.query(fmt::format("SELECT {} FROM budgets WHERE tenant_id = ? ORDER BY project_id",
                                   kBudgetColumns),
                       {tenant_id})))
    out.push_back(GP_TRY(store::read_row<StoredBudget>(row)));
  return out;
}

Result<std::optional<StoredBudget>> find_budget(store::Tx& tx, const std::string& tenant_id,
                                                const std::string& project_id) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM budgets WHERE tenant_id = ? AND project_id = ?", kBudgetColumns),
      {tenant_id, project_id}));
  if (!row) return std::optional<StoredBudget>();
  return std::optional<StoredBudget>(GP_TRY(store::read_row<StoredBudget>(*row)));
}

Result<StoredBudget> save_budget(store::Tx& tx, const Budget& b, const std::string& who,
                                 int64_t now) {
  GP_TRY_VOID(validate_budget(b));
  auto current = GP_TRY(find_budget(tx, b.tenant, b.project));
  StoredBudget s{b, who, now, current ? current->version + 1 : 1};
  forget_hard_stops(tx);
  GP_TRY(tx.exec(kBudgetUpsert, store::params_of(s)));
  return s;
}

Result<bool> delete_budget(store::Tx& tx, const std::string& tenant_id,
                           const std::string& project_id) {
  forget_hard_stops(tx);
  return GP_TRY(tx.exec("DELETE FROM budgets WHERE tenant_id = ? AND project_id = ?",
                        {tenant_id, project_id})) > 0;
}

Micros Spend::for_project(std::string_view project) const {
  if (project.empty()) return total_micros;
  auto it = by_project.find(project);
  return it == by_project.end() ? 0 : it->second;
}

Result<Spend> month_to_date_spend(store::Tx& tx, const std::string& tenant_id, int64_t now,
                                  const OfferingNames& offerings,
                                  std::span<const UsageRecord> extra) {
  Spend s;
  s.period = month_containing(now);
  const Account account = GP_TRY(load_account(tx, tenant_id));
  auto usage = GP_TRY(load_usage_records(tx, tenant_id, s.period, now, offerings));
  auto card_in_force = rate_card_for_period(tx, account.rate_card_id, s.period);
  if (usage.empty() && extra.empty()) {
    // Nothing to price, so no card is needed; its currency, when there is one, names the zero.
    if (card_in_force) s.currency = card_in_force->currency;
    return s;
  }
  const RateCard card = GP_TRY(std::move(card_in_force));
  usage.insert(usage.end(), extra.begin(), extra.end());
  const Invoice inv = GP_TRY(compute_invoice(card, account.terms(), s.period, usage));
  s.currency = inv.currency;
  s.total_micros = inv.subtotal_micros;
  for (const auto& line : inv.lines) s.by_project[line.project] += line.amount_micros;
  for (const auto& r : usage) {
    auto piece = clip_to_period(r, s.period);
    if (piece)
      s.gpu_equivalent_unit_us += piece->gpu_equivalent_units * (piece->end_us - piece->start_us);
  }
  return s;
}

Result<std::vector<Budget>> hard_stop_budgets(store::Tx& tx, const std::string& tenant_id,
                                              const std::string& project_id) {
  auto& memo = tx.memo(kHardStopsMemo);
  if (!memo.has_value()) memo = HardStopsByTenant{};
  auto& by_tenant = std::any_cast<HardStopsByTenant&>(memo);
  auto it = by_tenant.find(tenant_id);
  if (it == by_tenant.end()) {
    std::vector<Budget> stops;
    // The primary key (tenant_id, project_id) serves this lookup.
    for (const auto& row : GP_TRY(tx.query(
             fmt::format("SELECT {} FROM budgets WHERE tenant_id = ? AND hard_stop <> 0 ORDER BY "
                         "project_id",
                         kBudgetColumns),
             {tenant_id})))
      stops.push_back(GP_TRY(store::read_row<StoredBudget>(row)));
    it = by_tenant.emplace(tenant_id, std::move(stops)).first;
  }
  std::vector<Budget> out;
  for (const auto& b : it->second)
    if (b.project.empty() || b.project == project_id) out.push_back(b);
  return out;
}

Json AlertRecord::to_json() const { return json_of_fields(*this); }

Result<std::vector<AlertRecord>> record_budget_alerts(store::Tx& tx, const Budget& b,
                                                      const Period& period, Micros spend_micros,
                                                      int64_t now) {
  std::vector<AlertRecord> out;
  if (spend_micros <= 0) return out;
  // Every threshold the spend has reached: the crossings from nothing spent to `spend`.
  Budget alerts_only = b;
  alerts_only.hard_stop = false;
  const BudgetDecision d = GP_TRY(evaluate_budget(alerts_only, 0, spend_micros, ""));
  const std::string label = period_label(period);
  for (const auto& c : d.crossed) {
    const int64_t changed = GP_TRY(tx.exec(
        "INSERT INTO budget_alerts (id, tenant_id, project_id, period, threshold_bps, "
        "threshold_micros, amount_micros, spend_micros, created_at) SELECT COALESCE(MAX(id), 0) "
        "+ 1, ?, ?, ?, ?, ?, ?, ?, ? FROM budget_alerts WHERE TRUE ON CONFLICT (tenant_id, "
        "project_id, period, threshold_bps) DO NOTHING",
        {b.tenant, b.project, label, int64_t(c.threshold_bps), c.threshold_micros, b.amount_micros,
         spend_micros, now}));
    if (changed == 0) continue;  // already fired this period
    auto row = GP_TRY(tx.query_one(
        fmt::format("SELECT {} FROM budget_alerts WHERE tenant_id = ? AND project_id = ? AND "
                    "period = ? AND threshold_bps = ?",
                    kAlertColumns),
        {b.tenant, b.project, label, int64_t(c.threshold_bps)}));
    if (!row) return fail(Error::internal("budget alert vanished after insert"));
    out.push_back(GP_TRY(alert_from(*row)));
  }
  return out;
}

Result<std::vector<AlertRecord>> list_budget_alerts(store::Tx& tx, const std::string& tenant_id,
                                                    int64_t after, int limit) {
  std::vector<AlertRecord> out;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM budget_alerts WHERE tenant_id = ? AND id > ? ORDER BY id "
                       "LIMIT ?",
                       kAlertColumns),
           {tenant_id, after, int64_t(limit)})))
    out.push_back(GP_TRY(alert_from(row)));
  return out;
}

Result<std::vector<std::string>> tenants_with_usage(store::Tx& tx, const Period& period,
                                                    int64_t now) {
  return metering::tenants_with_usage(tx, period.start_us, std::min(period.end_us, now));
}

Result<std::vector<std::string>> tenants_with_budgets(store::Tx& tx) {
  std::vector<std::string> out;
  for (const auto& row : GP_TRY(tx.query("SELECT DISTINCT tenant_id FROM budgets ORDER BY 1")))
    out.push_back(row.text(0));
  return out;
}

}  // namespace gp::billing
