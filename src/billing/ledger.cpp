// Billing accounts, stored rate cards and metered usage as billing records.
#include "billing/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/clock.h"
#include "metering/metering.h"

namespace gp::billing {

TenantAccount Account::terms() const {
  return {.tenant = tenant_id, .tax_bps = tax_bps, .prepaid_credit_micros = prepaid_credit_micros};
}

Json Account::to_json() const {
  Json j = {{"tenant_id", tenant_id},
            {"rate_card", rate_card_id},
            {"tax_bps", tax_bps},
            {"prepaid_credit_micros", prepaid_credit_micros},
            {"stored", version > 0}};
  if (version > 0) {
    j["updated_by"] = updated_by;
    j["updated_at"] = format_rfc3339(from_unix_micros(updated_at));
    j["version"] = version;
  }
  return j;
}

Result<Account> load_account(store::Tx& tx, const std::string& tenant_id) {
  Account a;
  a.tenant_id = tenant_id;
  auto row = GP_TRY(tx.query_one(
      "SELECT rate_card_id, tax_bps, prepaid_credit_micros, updated_by, updated_at, version FROM "
      "billing_accounts WHERE tenant_id = ?",
      {tenant_id}));
  if (!row) return a;
  a.rate_card_id = row->text(0);
  a.tax_bps = int32_t(row->integer(1));
  a.prepaid_credit_micros = row->integer(2);
  a.updated_by = row->text(3);
  a.updated_at = row->integer(4);
  a.version = row->integer(5);
  return a;
}

Result<Account> apply_account_update(Account current, const Json& body) {
  ObjectReader rd(body, "billing account");
  auto card = rd.optional_string("rate_card", 63);
  auto tax = rd.optional_integer("tax_bps", 0, kBasisPoints);
  auto prepaid = rd.optional_integer("prepaid_credit_micros", 0, INT64_MAX);
  GP_TRY_VOID(rd.finish());
  if (card) {
    if (card->empty()) return fail(Error::invalid("field 'rate_card': must not be empty"));
    current.rate_card_id = *card;
  }
  if (tax) current.tax_bps = int32_t(*tax);
  if (prepaid) current.prepaid_credit_micros = *prepaid;
  return current;
}

Result<Account> save_account(store::Tx& tx, Account a, const std::string& who, int64_t now) {
  a.updated_by = who;
  a.updated_at = now;
  a.version += 1;
  GP_TRY(tx.exec(
      "INSERT INTO billing_accounts (tenant_id, rate_card_id, tax_bps, prepaid_credit_micros, "
      "updated_by, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO "
      "UPDATE SET rate_card_id = excluded.rate_card_id, tax_bps = excluded.tax_bps, "
      "prepaid_credit_micros = excluded.prepaid_credit_micros, updated_by = excluded.updated_by, "
      "updated_at = excluded.updated_at, version = excluded.version",
      {a.tenant_id, a.rate_card_id, int64_t(a.tax_bps), a.prepaid_credit_micros, a.updated_by,
       a.updated_at, a.version}));
  return a;
}

Result<std::vector<RateCard>> load_rate_card_versions(store::Tx& tx, std::string_view id) {
  std::vector<RateCard> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT card FROM rate_cards WHERE id = ? ORDER BY version", {std::string(id)}))) {
    out.push_back(GP_TRY(parse_rate_card_text(row.text(0))));
  }
  return out;
}

Result<RateCard> rate_card_for_period(store::Tx& tx, std::string_view id, const Period& period) {
  auto versions = GP_TRY(load_rate_card_versions(tx, id));
  if (auto at_start = select_rate_card(versions, id, period.start_us)) return at_start;
  const RateCard* first = nullptr;
  for (const auto& v : versions) {
    if (v.effective_from_us >= period.end_us) continue;
    if (!first || v.effective_from_us < first->effective_from_us ||
        (v.effective_from_us == first->effective_from_us && v.version > first->version)) {
      first = &v;
    }
  }
  if (!first) {
    return fail(Error::conflict(
        fmt::format("no version of rate card '{}' is in force in {} (publish one with POST "
                    "/v1/rate-cards)",
                    id, period_label(period))));
  }
  return *first;
}

Result<std::vector<UsageRecord>> load_usage_records(store::Tx& tx, const std::string& tenant_id,
                                                    const Period& period, int64_t now) {
  std::map<std::string, std::string, std::less<>> offering_names;
  for (const auto& row : GP_TRY(tx.query("SELECT id, name FROM offerings")))
    offering_names.emplace(row.text(0), row.text(1));
  const int64_t until = std::min(period.end_us, now);
  std::vector<UsageRecord> out;
  if (until <= period.start_us) return out;
  for (const auto& i : GP_TRY(metering::load_intervals(tx, tenant_id, period.start_us, until))) {
    UsageRecord r;
    r.tenant = i.tenant_id;
    r.project = i.project_id;
    r.resource_key = i.resource_key;
    if (i.offering_id) {
      auto name = offering_names.find(*i.offering_id);
      r.offering = name != offering_names.end() ? name->second : *i.offering_id;
    }
    r.preemptible = i.preemptible;
    r.start_us = std::max(i.start_us, period.start_us);
    r.end_us = std::min(i.end_us.value_or(until), until);
    r.quantity = i.quantity;
    r.gpu_equivalent_units = i.units;
    if (r.end_us > r.start_us) out.push_back(std::move(r));
  }
  return out;
}

Result<Invoice> rate_tenant(store::Tx& tx, const std::string& tenant_id, const Period& period,
                            int64_t now, std::span<const OfferingCredit> sla_credits) {
  const Account account = GP_TRY(load_account(tx, tenant_id));
  const RateCard card = GP_TRY(rate_card_for_period(tx, account.rate_card_id, period));
  const auto usage = GP_TRY(load_usage_records(tx, tenant_id, period, now));
  return compute_invoice(card, account.terms(), period, usage, sla_credits);
}

}  // namespace gp::billing
