// gp_billing_ledger: the store-backed side of billing. Billing accounts (which rate card prices a
// tenant, its tax rate and prepaid credit), stored rate card versions, and the tenant's metered
// usage as billing records, rated with the pure core in billing.h. Functions run inside the
// caller's store transaction, like the other repositories.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "billing/billing.h"
#include "common/env.h"
#include "common/page.h"
#include "common/record.h"
#include "sla/standing.h"
#include "store/store.h"

namespace gp::billing {

// The rate card a tenant without an account is priced with.
inline constexpr std::string_view kDefaultRateCard = "default";

struct Account {
  std::string tenant_id;
  std::string rate_card_id = std::string(kDefaultRateCard);
  int32_t tax_bps = 0;
  Micros prepaid_credit_micros = 0;  // balance left for the next invoices
  // Printed on the tenant's invoices: the legal name and billing address invoices are addressed
  // to, and the payment terms (net days from the issue date to the due date).
  std::string legal_name;
  std::string billing_address;
  int32_t payment_terms_days = 30;
  std::string updated_by;
  int64_t updated_at = 0;
  int64_t version = 0;  // 0: never stored (the defaults above)

  TenantAccount terms() const;
  // Its fields, and, once stored, who changed it last, when and its version.
  Json to_json() const;
};

// The tenant's account, or the defaults when none is stored.
Result<Account> load_account(store::Tx& tx, const std::string& tenant_id);
// Strict update body: {"rate_card", "tax_bps", "prepaid_credit"} (each optional; prepaid credit
// as a decimal string of currency units, e.g. "250.00"), applied over `current`.
Result<Account> apply_account_update(Account current, const Json& body);
// Inserts or replaces the stored account; returns it with its new version.
Result<Account> save_account(store::Tx& tx, Account account, const std::string& who, int64_t now);

// A rate card version as published: the card's JSON (rate_card_to_json, with its version), who
// published it and when.
struct PublishedRateCard {
  Json card;
  std::string created_by;
  int64_t created_at = 0;
  // The card with created_by and created_at (RFC 3339): what the API answers.
  Json to_json() const;
};
// Publishes `card` as the next version of its id, which it assigns to card.version (1 for a new
// id), and returns it as stored.
Result<PublishedRateCard> publish_rate_card(store::Tx& tx, RateCard& card, const std::string& who,
                                            int64_t now);
// The latest version of every card, by id.
Result<std::vector<PublishedRateCard>> latest_rate_cards(store::Tx& tx);
// Every published version of card `id`, oldest first (empty when there is none).
Result<std::vector<PublishedRateCard>> published_rate_card_versions(store::Tx& tx,
                                                                    std::string_view id);

// Every stored version of card `id`, oldest first (empty when there is none).
Result<std::vector<RateCard>> load_rate_card_versions(store::Tx& tx, std::string_view id);
// The version of card `id` that prices `period`: the one in force at the period's start, else
// (a card first effective inside the period) the earliest version effective before its end.
Result<RateCard> rate_card_for_period(store::Tx& tx, std::string_view id, const Period& period);

// Offering ids to the names rate cards and invoices price them by. The offerings are alloc's, on
// billing's layer: the caller reads them through it (alloc::offering_names) in the same
// transaction and passes them in. An id without a name (a deleted offering) stands for itself.
using OfferingNames = std::map<std::string, std::string, std::less<>>;

// Metered usage overlapping `period` as billing records, clipped to it: usage intervals of one
// tenant (every tenant when empty), open intervals counted up to `now`, offerings by name.
Result<std::vector<UsageRecord>> load_usage_records(store::Tx& tx, const std::string& tenant_id,
                                                    const Period& period, int64_t now,
                                                    const OfferingNames& offerings);

// A tenant's metered usage in `period` rated with its account's card: the invoice as it stands
// at `now` (a draft; state and id are the caller's).
Result<Invoice> rate_tenant(store::Tx& tx, const std::string& tenant_id, const Period& period,
                            int64_t now, const OfferingNames& offerings,
                            std::span<const OfferingCredit> sla_credits = {});

// ---------------------------------------------------------------------------------------------
// Invoices stored by the server (migration 12). A tenant has at most one non-void invoice per
// period, and no two non-void invoices of a tenant overlap in time. Drafts are re-rated in place;
// a finalized invoice never changes again except to become void; a void one is re-issued as the
// next revision, which supersedes it. Finalizing applies the account's prepaid credit (the
// balance goes down in the same transaction); voiding gives it back.

// SLA credits per tenant id, for a run over every tenant.
using CreditsByTenant = std::map<std::string, std::vector<OfferingCredit>, std::less<>>;

struct StoredInvoice {
  std::string id;             // "inv_...": URL-safe, from the id source
  std::string supersedes_id;  // stored id of the void invoice this one re-issues
  Invoice invoice;            // invoice.id is the human label "<tenant>/<period>[#rev]"
  std::string created_by;
  int64_t created_at = 0;
  int64_t computed_at = 0;  // when the lines were last rated from metered usage
  int64_t version = 0;      // bumped by every change (refresh, finalize, void)

  // invoice_to_json with the stored id as "id", the label as "label", and the row's times.
  Json to_json() const;
  // A one-line summary (lists).
  Json summary_json() const;
};

// "2026-11": the UTC calendar month.
Result<Period> parse_month(std::string_view text);
// Strict body: {"period": "YYYY-MM"} or {"start": RFC 3339, "end": RFC 3339} (an on-demand
// period of at most 366 days).
Result<Period> parse_period_body(const Json& body);

enum class DraftOutcome { kCreated, kRefreshed, kReissued };
std::string_view draft_outcome_name(DraftOutcome o);

struct DraftResult {
  StoredInvoice stored;
  DraftOutcome outcome = DraftOutcome::kCreated;
};

// Creates or refreshes the tenant's draft for `period` from its metered usage as it stands at
// `world.now()`: a new draft (revision 1), the draft re-rated in place, or, after a void, the
// next revision superseding it. conflict when the period's invoice is finalized, when another
// non-void invoice of the tenant overlaps the period, or when the period has not started.
Result<DraftResult> refresh_draft(store::Tx& tx, Env world, const std::string& tenant_id,
                                  const Period& period, const std::string& who,
                                  const OfferingNames& offerings,
                                  std::span<const OfferingCredit> sla_credits = {});

// The tenant's invoice `id` (a stored id), or nothing (another tenant's invoice is nothing).
Result<std::optional<StoredInvoice>> find_invoice(store::Tx& tx, const std::string& tenant_id,
                                                  const std::string& id);

struct InvoiceFilter {
  std::string tenant_id;  // empty: every tenant
  std::optional<Period> period;
  std::optional<InvoiceState> state;
};
// Invoices by id (creation order), a page at a time.
Result<Page<StoredInvoice>> list_invoices(store::Tx& tx, const InvoiceFilter& filter,
                                          const PageRequest& page);

// draft -> finalized, at `now`. The period must have ended and the draft must have been rated
// after its end (refresh it otherwise). The prepaid credit is re-applied from the account's
// balance now, and the balance goes down by the amount applied.
Result<StoredInvoice> finalize_stored(store::Tx& tx, const std::string& tenant_id,
                                      const std::string& id, const std::string& who, int64_t now);
// draft or finalized -> void with a reason; the prepaid credit it applied goes back to the
// account.
Result<StoredInvoice> void_stored(store::Tx& tx, const std::string& tenant_id,
                                  const std::string& id, std::string_view reason,
                                  const std::string& who, int64_t now);

// An invoice recomputed from raw usage (a draft's as known when it was rated) with the rate card
// version it names, its tax rate, its prepaid credit available and its SLA credit rates.
struct Verification {
  StoredInvoice stored;
  Invoice recomputed;
  std::vector<std::string> differences;  // "total_micros: stored 1 recomputed 2", ...
  bool matches() const { return differences.empty(); }
  Json to_json() const;
};
Result<Verification> verify_invoice(store::Tx& tx, const std::string& tenant_id,
                                    const std::string& id, int64_t now,
                                    const OfferingNames& offerings);

// A run for every tenant with metered usage in `period` or a stored billing account: one draft
// each (created, refreshed or re-issued); finalized invoices are left as they are.
struct RunReport {
  Period period;
  std::vector<DraftResult> drafts;
  std::vector<StoredInvoice> finalized;  // already final: unchanged
  Json to_json() const;
};
Result<RunReport> run_period(store::Tx& tx, Env world, const Period& period, const std::string& who,
                             const OfferingNames& offerings,
                             const CreditsByTenant& sla_credits = {});
// The SLA credits earned in `period` (gp_sla_standing: availability below an offering's target,
// downtime up to `now`), per tenant id (every tenant when `tenant_id` is empty), offerings by
// name as the invoice's lines name them. `failure_of` as sla::standing takes it.
Result<CreditsByTenant> load_sla_credits(store::Tx& tx, const std::string& tenant_id,
                                         const Period& period, int64_t now,
                                         const OfferingNames& offerings,
                                         const sla::FailureOf& failure_of);
// Budgets, stored: one per tenant (project "") and per project, evaluated against the
// month-to-date spend rated from metered usage (docs/billing.md, "Budgets").

// A budget as stored: the budget, who changed it last, when, and its version.
struct StoredBudget : Budget {
  std::string updated_by;
  int64_t updated_at = 0;
  int64_t version = 0;
};

// A PUT body for the budget of `tenant`/`project` (project "" for the tenant): strictly
// {"amount_micros", "thresholds_bps"?, "hard_stop"?}; tenant and project come from the path.
Result<Budget> parse_budget_body(const std::string& tenant, const std::string& project,
                                 const Json& body);
Result<std::vector<StoredBudget>> load_budgets(store::Tx& tx, const std::string& tenant_id);
Result<std::optional<StoredBudget>> find_budget(store::Tx& tx, const std::string& tenant_id,
                                                const std::string& project_id);
// Inserts or replaces; the new version is the stored one + 1 (1 for a new budget).
Result<StoredBudget> save_budget(store::Tx& tx, const Budget& b, const std::string& who,
                                 int64_t now);
// False when there was none.
Result<bool> delete_budget(store::Tx& tx, const std::string& tenant_id,
                           const std::string& project_id);

// A tenant's spend so far in the UTC month holding `now`, rated with its account's card.
struct Spend {
  Period period;
  std::string currency;
  Micros total_micros = 0;
  std::map<std::string, Micros, std::less<>> by_project;
  int64_t gpu_equivalent_unit_us = 0;  // GPU-equivalent units x microseconds rated

  Micros for_project(std::string_view project) const;  // "" : the whole tenant
};
// `extra` records (a proposal) are rated together with the metered usage, so the difference
// to the spend without them is their exact cost under tiered prices. Needs a rate card in force
// only when there is something to price.
Result<Spend> month_to_date_spend(store::Tx& tx, const std::string& tenant_id, int64_t now,
                                  const OfferingNames& offerings,
                                  std::span<const UsageRecord> extra = {});

// The spend a budget is measured against: the tenant's total, or its project's lines.
inline Micros spend_of(const Spend& s, const Budget& b) { return s.for_project(b.project); }

// The budgets of a tenant with a hard stop that covers `project` (its own and the tenant's):
// empty for almost every tenant. One indexed lookup per tenant and transaction: the writes of a
// group-commit batch share it (Tx::memo) until one of them changes a budget.
Result<std::vector<Budget>> hard_stop_budgets(store::Tx& tx, const std::string& tenant_id,
                                              const std::string& project_id);

struct AlertRecord {
  int64_t id = 0;
  std::string tenant_id, project_id, period;
  int32_t threshold_bps = 0;
  Micros threshold_micros = 0, amount_micros = 0, spend_micros = 0;
  int64_t created_at = 0;
  Json to_json() const;
};

// Records an alert for every threshold of `b` that `spend_micros` has reached in `period` and
// that has no alert yet in that period; returns the new ones (each fires once per period).
Result<std::vector<AlertRecord>> record_budget_alerts(store::Tx& tx, const Budget& b,
                                                      const Period& period, Micros spend_micros,
                                                      int64_t now);
// A tenant's alerts, oldest first, `limit` after id `after` (0: from the start).
Result<std::vector<AlertRecord>> list_budget_alerts(store::Tx& tx, const std::string& tenant_id,
                                                    int64_t after, int limit);

// Tenants with metered usage overlapping `period` (for the sweep).
Result<std::vector<std::string>> tenants_with_usage(store::Tx& tx, const Period& period,
                                                    int64_t now);
// Tenants with at least one budget.
Result<std::vector<std::string>> tenants_with_budgets(store::Tx& tx);

}  // namespace gp::billing

namespace gp {

// A billing account as stored and shown (common/record.h). Who changed it last, when and its
// version show only once it is stored (Account::to_json adds them); "stored" says whether it is.
template <>
struct Fields<billing::Account> {
  using A = billing::Account;
  static constexpr auto list = std::tuple{
      Field{"tenant_id", &A::tenant_id},
      Field{"rate_card", &A::rate_card_id, "rate_card_id"},
      Field{"tax_bps", &A::tax_bps},
      Field{"prepaid_credit_micros", &A::prepaid_credit_micros},
      Field{"legal_name", &A::legal_name},
      Field{"billing_address", &A::billing_address},
      Field{"payment_terms_days", &A::payment_terms_days},
      Derived<A, bool>{"stored", [](const A& a) { return a.version > 0; }},
      Field{"updated_by", &A::updated_by, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"updated_at", &A::updated_at, {}, Form::kTime, {}, Shown::kStoredOnly},
      Field{"version", &A::version, {}, Form::kPlain, {}, Shown::kStoredOnly},
  };
};

// A budget as stored and shown: a tenant budget has no project (null). Its thresholds are
// stored as their JSON text.
template <>
struct Fields<billing::StoredBudget> {
  using S = billing::StoredBudget;
  // The budget's own members belong to billing::Budget: named as the stored budget's.
  template <typename T>
  using F = Field<S, T>;
  static constexpr auto list = std::tuple{
      F<std::string>{"tenant_id", &S::tenant},
      F<std::string>{"project_id", &S::project, {}, Form::kNullIfEmpty},
      F<billing::Micros>{"amount_micros", &S::amount_micros},
      F<std::vector<int32_t>>{"thresholds_bps", &S::thresholds_bps, "thresholds"},
      F<bool>{"hard_stop", &S::hard_stop},
      Field{"updated_by", &S::updated_by},
      Field{"updated_at", &S::updated_at, {}, Form::kTime},
      Field{"version", &S::version},
  };
};

// A budget alert as stored and shown (common/record.h). Its id, a sequence number, shows as
// text; a tenant budget's alert has no project (null).
template <>
struct Fields<billing::AlertRecord> {
  using A = billing::AlertRecord;
  static constexpr auto list = std::tuple{
      Field{"id", &A::id, {}, Form::kDecimal},
      Field{"tenant_id", &A::tenant_id},
      Field{"project_id", &A::project_id, {}, Form::kNullIfEmpty},
      Field{"period", &A::period},
      Field{"threshold_bps", &A::threshold_bps},
      Field{"threshold_micros", &A::threshold_micros},
      Field{"amount_micros", &A::amount_micros},
      Field{"spend_micros", &A::spend_micros},
      Field{"created_at", &A::created_at, {}, Form::kTime},
  };
};

}  // namespace gp
