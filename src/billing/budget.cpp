// Budgets: threshold alerts and the optional hard stop, evaluated exactly.
#include <fmt/format.h>

#include <algorithm>

#include "billing/billing.h"

namespace gp::billing {

namespace {

// spend >= amount x bps / 10000, compared without rounding.
bool reached(Micros spend, Micros amount, int32_t bps) {
  return Wide(spend) * kBasisPoints >= Wide(amount) * bps;
}

}  // namespace

Result<void> validate_budget(const Budget& b) {
  if (b.tenant.empty()) return fail(Error::invalid("budget: tenant is required"));
  if (b.amount_micros <= 0) return fail(Error::invalid("budget: amount_micros must be positive"));
  if (b.thresholds_bps.size() > 16) return fail(Error::invalid("budget: more than 16 thresholds"));
  for (size_t i = 0; i < b.thresholds_bps.size(); ++i) {
    int32_t t = b.thresholds_bps[i];
    if (t <= 0 || t > 100 * kBasisPoints) {
      return fail(
          Error::invalid(fmt::format("budget: threshold {} bps is not between 1 and 1000000", t)));
    }
    if (i > 0 && t <= b.thresholds_bps[i - 1]) {
      return fail(Error::invalid("budget: thresholds must be strictly ascending"));
    }
  }
  return ok();
}

Result<Budget> parse_budget(const Json& j) {
  ObjectReader rd(j, "budget");
  Budget b;
  b.tenant = rd.string("tenant");
  b.project = rd.optional_string("project").value_or("");
  b.amount_micros = rd.integer("amount_micros", INT64_MIN, INT64_MAX);
  b.hard_stop = rd.optional_bool("hard_stop").value_or(false);
  if (const Json* ts = rd.optional_array("thresholds_bps")) {
    b.thresholds_bps.clear();
    for (const auto& t : *ts) {
      if (!t.is_number_integer() || t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX) {
        rd.reject("thresholds_bps", "must be integers (basis points, 10000 = 100%)");
        break;
      }
      b.thresholds_bps.push_back(int32_t(t.get<int64_t>()));
    }
  }
  GP_TRY_VOID(rd.finish());
  GP_TRY_VOID(validate_budget(b));
  return b;
}

Result<BudgetDecision> evaluate_budget(const Budget& b, Micros spent_micros, Micros proposed_micros,
                                       std::string_view currency) {
  GP_TRY_VOID(validate_budget(b));
  if (spent_micros < 0 || proposed_micros < 0) {
    return fail(Error::invalid("budget evaluation: spend and proposed cost must not be negative"));
  }
  Micros after = GP_TRY(checked_add(spent_micros, proposed_micros));
  BudgetDecision d;
  std::string scope = b.project.empty() ? fmt::format("tenant '{}'", b.tenant)
                                        : fmt::format("project '{}/{}'", b.tenant, b.project);
  if (b.hard_stop && proposed_micros > 0 && after > b.amount_micros) {
    d.refused = true;
    d.code = "budget_exceeded";
    d.reason = fmt::format(
        "the budget of {} for {} would be exceeded: {} spent this period, this request would "
        "add {} (hard stop)",
        format_money(b.amount_micros, currency), scope, format_money(spent_micros, currency),
        format_money(proposed_micros, currency));
    return d;
  }
  for (int32_t t : b.thresholds_bps) {
    if (!reached(spent_micros, b.amount_micros, t) && reached(after, b.amount_micros, t)) {
      d.crossed.push_back(
          BudgetAlert{t, GP_TRY(round_half_even(Wide(b.amount_micros) * t, kBasisPoints)), after});
    }
  }
  return d;
}

}  // namespace gp::billing
