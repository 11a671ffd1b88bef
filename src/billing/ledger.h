// gp_billing_ledger: the store-backed side of billing. Billing accounts (which rate card prices a
// tenant, its tax rate and prepaid credit), stored rate card versions, and the tenant's metered
// usage as billing records, rated with the pure core in billing.h. Functions run inside the
// caller's store transaction, like the other repositories.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "billing/billing.h"
#include "store/store.h"

namespace gp::billing {

// The rate card a tenant without an account is priced with.
inline constexpr std::string_view kDefaultRateCard = "default";

struct Account {
  std::string tenant_id;
  std::string rate_card_id = std::string(kDefaultRateCard);
  int32_t tax_bps = 0;
  Micros prepaid_credit_micros = 0;  // balance left for the next invoices
  std::string updated_by;
  int64_t updated_at = 0;
  int64_t version = 0;  // 0: never stored (the defaults above)

  TenantAccount terms() const;
  Json to_json() const;
};

// The tenant's account, or the defaults when none is stored.
Result<Account> load_account(store::Tx& tx, const std::string& tenant_id);
// Strict update body: {"rate_card", "tax_bps", "prepaid_credit"} (each optional; prepaid credit
// as a decimal string of currency units, e.g. "250.00"), applied over `current`.
Result<Account> apply_account_update(Account current, const Json& body);
// Inserts or replaces the stored account; returns it with its new version.
Result<Account> save_account(store::Tx& tx, Account account, const std::string& who, int64_t now);

// Every stored version of card `id`, oldest first (empty when there is none).
Result<std::vector<RateCard>> load_rate_card_versions(store::Tx& tx, std::string_view id);
// The version of card `id` that prices `period`: the one in force at the period's start, else
// (a card first effective inside the period) the earliest version effective before its end.
Result<RateCard> rate_card_for_period(store::Tx& tx, std::string_view id, const Period& period);

// Metered usage overlapping `period` as billing records, clipped to it: usage intervals of one
// tenant (every tenant when empty), open intervals counted up to `now`, offerings by name.
Result<std::vector<UsageRecord>> load_usage_records(store::Tx& tx, const std::string& tenant_id,
                                                    const Period& period, int64_t now);

// A tenant's metered usage in `period` rated with its account's card: the invoice as it stands
// at `now` (a draft; state and id are the caller's).
Result<Invoice> rate_tenant(store::Tx& tx, const std::string& tenant_id, const Period& period,
                            int64_t now, std::span<const OfferingCredit> sla_credits = {});

}  // namespace gp::billing
