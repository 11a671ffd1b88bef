// gp_billing: the pure functional core of billing. Rate cards (flat, graduated and volume
// pricing, spot and committed-use discounts), usage records split at UTC month boundaries,
// invoices per tenant per period (line items, SLA credits, prepaid credit, tax, states) with
// JSON/CSV/HTML renderers, and budget evaluation. No I/O, no clock: the same inputs always give
// the same invoice, to the micro-unit. Rules and rounding are described in docs/billing.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "billing/money.h"
#include "common/json.h"
#include "common/record.h"
#include "common/result.h"

namespace gp::billing {

// ---------------------------------------------------------------------------------------------
// Resource keys and periods

// GPU-equivalent units: one whole GPU is 7000 (so a MIG 1g slice of 7 is 1000 and a milli-GPU
// is 7).
constexpr int64_t kGpuEquivalentUnits = 7000;

// How many usage units make one priced unit of a resource key: `gpu/<model>` and
// `mig/<model>/<profile>` are priced per GPU-hour and per instance-hour (1); `gpu-milli/<model>`
// quantities are milli-GPUs priced per GPU-equivalent-hour (1000 milli-hours). Fails for a key
// that is not one of the three forms.
Result<int64_t> units_per_priced_unit(std::string_view resource_key);

// A half-open UTC interval [start_us, end_us) in Unix microseconds.
struct Period {
  int64_t start_us = 0;
  int64_t end_us = 0;
  bool operator==(const Period&) const = default;
};

// The UTC calendar month (month 1..12). Fails for an out-of-range month or year.
Result<Period> month_period(int year, int month);
// The UTC calendar month containing `us`.
Period month_containing(int64_t us);
// "2026-11" for a whole calendar month, else "<start RFC 3339>/<end RFC 3339>".
std::string period_label(const Period& p);

// ---------------------------------------------------------------------------------------------
// Usage records: the plain input the metering module produces.

struct UsageRecord {
  std::string tenant;
  std::string project;
  std::string resource_key;  // gpu/H200, mig/H200/3g.71gb, gpu-milli/H200
  std::string offering;      // empty when the allocation named no offering
  bool preemptible = false;  // spot usage: priced with the card's spot discount
  bool committed = false;    // used from a reservation: priced with the committed discount
  int64_t start_us = 0;      // [start_us, end_us), Unix microseconds UTC
  int64_t end_us = 0;
  int64_t quantity = 0;              // units of resource_key (GPUs, instances, milli-GPUs)
  int64_t gpu_equivalent_units = 0;  // the whole record's GPU-equivalents x 7000
};

// Limits that keep every product of the rating exact in 128-bit integers.
constexpr int64_t kMaxQuantity = 1'000'000'000;
constexpr int64_t kMaxGpuEquivalentUnits = kMaxQuantity * kGpuEquivalentUnits;

Result<void> validate_usage_record(const UsageRecord& r);
// Strict parse of one record object or of an array of records (or {"records": [...]}).
Result<UsageRecord> parse_usage_record(const Json& j);
Result<std::vector<UsageRecord>> parse_usage_records(const Json& j);
Json usage_record_to_json(const UsageRecord& r);

// Splits every record exactly at each UTC month boundary it crosses; quantities are rates, so
// each piece keeps the record's quantity and GPU-equivalents. Order is preserved.
std::vector<UsageRecord> split_at_month_boundaries(std::span<const UsageRecord> records);
// The part of `r` inside `p`, or nothing when they do not overlap.
std::optional<UsageRecord> clip_to_period(const UsageRecord& r, const Period& p);

// ---------------------------------------------------------------------------------------------
// Rate cards

enum class PricingModel { kFlat, kGraduated, kVolume };
std::string_view pricing_model_name(PricingModel m);

// Each PricingModel's name, at its value's index.
inline constexpr std::array<std::string_view, 3> kPricingModels = {"flat", "graduated", "volume"};

// A tier covers [from_hours, to_hours) of the priced quantity (unit-hours per tenant, price key
// and period); the last tier has no upper bound.
struct PriceTier {
  int64_t from_hours = 0;
  std::optional<int64_t> to_hours;
  Micros unit_price_micros = 0;  // per unit-hour
};

// Exactly one of resource_key / offering is set. An offering price is per GPU-equivalent-hour
// and wins over the resource key's price for records naming that offering.
struct Price {
  std::string resource_key;
  std::string offering;
  PricingModel model = PricingModel::kFlat;
  std::vector<PriceTier> tiers;  // flat: exactly one tier from 0, unbounded

  std::string key() const;  // "gpu/H200" or "offering:<name>"
};

constexpr Micros kMaxUnitPriceMicros = 1'000'000'000'000;  // 1,000,000 currency units per hour
constexpr int64_t kMaxTierHours = 1'000'000'000'000;

struct RateCard {
  std::string id;
  int64_t version = 1;   // immutable once published; a new version supersedes
  std::string currency;  // ISO 4217
  int64_t effective_from_us = 0;
  int32_t spot_discount_bps = 0;       // off preemptible usage
  int32_t committed_discount_bps = 0;  // off usage from reservations
  std::vector<Price> prices;

  // The price for a record: the offering's when the card has one, else the resource key's;
  // nullptr when neither is priced.
  const Price* price_for(const UsageRecord& r) const;
};

Result<void> validate_rate_card(const RateCard& card);
// Strict JSON: unknown fields, bad types, negative prices, unordered, overlapping or gapped
// tiers, duplicate price keys are errors. "version" is optional (default 1) so that a server
// can assign it.
Result<RateCard> parse_rate_card(const Json& j);
Result<RateCard> parse_rate_card_text(std::string_view text);
// The card as Fields<RateCard> describes it (what is stored, and what the API shows).
Json rate_card_to_json(const RateCard& card);

// The version of card `id` in force at `at_us`: the latest effective_from <= at_us (the higher
// version on a tie). not_found when none is in force.
Result<RateCard> select_rate_card(std::span<const RateCard> versions, std::string_view id,
                                  int64_t at_us);

// ---------------------------------------------------------------------------------------------
// Invoices

enum class UsageClass { kCommitted, kOnDemand, kSpot };
// Each UsageClass's name, at its value's index.
inline constexpr std::array<std::string_view, 3> kUsageClasses = {"committed", "on_demand", "spot"};
std::string_view usage_class_name(UsageClass c);
UsageClass usage_class_of(const UsageRecord& r);

// One priced line: a project's usage of one resource key (and offering) in one class, at one
// tier's unit price. Amount = round_half_even(quantity x unit price x (1 - discount)).
struct LineItem {
  std::string project;
  std::string project_name;  // the project as people know it ("" when unknown)
  std::string resource_key;
  std::string offering;
  std::string price_key;  // which card price rated it (resource key or "offering:<name>")
  PricingModel model = PricingModel::kFlat;
  UsageClass usage_class = UsageClass::kOnDemand;
  int tier = 0;  // index into the price's tiers
  // Exact quantity = quantity_units_us / quantity_denominator unit-hours; quantity_micro_hours
  // is that value x 10^6 rounded half even, for display.
  Wide quantity_units_us = 0;
  int64_t quantity_denominator = 1;
  int64_t quantity_micro_hours = 0;
  Micros unit_price_micros = 0;
  int32_t discount_bps = 0;
  Micros gross_micros = 0;     // quantity x unit price, rounded for display
  Micros discount_micros = 0;  // gross_micros - amount_micros
  Micros amount_micros = 0;    // the rounded, discounted amount the subtotal adds up
};

// An SLA service credit for one offering, as a share of that offering's charge (from gp_sla).
struct OfferingCredit {
  std::string offering;
  int32_t credit_bps = 0;
  std::string reason;
};

struct CreditLine {
  std::string offering;
  int32_t credit_bps = 0;
  Micros charge_micros = 0;  // the offering's line amounts on this invoice
  Micros amount_micros = 0;  // round_half_even(charge x credit_bps / 10000)
  std::string reason;
};

struct TenantAccount {
  std::string tenant;
  int32_t tax_bps = 0;               // the tenant's tax rate
  Micros prepaid_credit_micros = 0;  // prepaid balance available to this invoice
};

// Who an invoice is addressed to: as the account stood when a draft was rated, and as it stood
// when the invoice was issued (finalized), from then on fixed.
struct BillTo {
  std::string name;        // the tenant's name
  std::string legal_name;  // the billing account's legal name ("" when not set)
  std::string address;     // the billing address, lines separated by '\n' ("" when not set)
};

// What a person reads a line as: "H200 GPU, on-demand, project ml, offering h200-1x";
// "H200 MIG 3g.71gb instance", "H200 GPU share", a tier named when the price has tiers.
std::string line_description(const LineItem& li);

enum class InvoiceState { kDraft, kFinalized, kVoid };
// Each InvoiceState's name, at its value's index.
inline constexpr std::array<std::string_view, 3> kInvoiceStates = {"draft", "finalized", "void"};
std::string_view invoice_state_name(InvoiceState s);

// Which rate card version rated an invoice: how an invoice shows its rate_card_id and version.
struct RateCardRef {
  std::string id;
  int64_t version = 0;
};

struct Invoice {
  std::string id;  // "<tenant>/<period label>" plus "#<revision>" from revision 2 on
  std::string tenant;
  Period period;
  std::string currency;
  std::string rate_card_id;
  int64_t rate_card_version = 0;
  InvoiceState state = InvoiceState::kDraft;
  int revision = 1;
  std::string supersedes;                  // id of the voided invoice this one re-issues
  std::optional<int64_t> finalized_at_us;  // the issue date
  std::optional<int64_t> voided_at_us;
  BillTo bill_to;
  std::string number;                // assigned when issued: "INV-000042", in issue order
  int32_t payment_terms_days = 30;   // net days: due this long after the issue date
  std::optional<int64_t> due_at_us;  // set when issued
  std::string void_reason;
  size_t usage_records = 0;  // record pieces rated (after clipping)

  std::vector<LineItem> lines;
  std::vector<CreditLine> credits;
  Micros subtotal_micros = 0;    // sum of line amounts
  Micros sla_credit_micros = 0;  // sum of credit lines
  Micros taxable_micros = 0;     // subtotal - SLA credits
  int32_t tax_bps = 0;
  Micros tax_micros = 0;  // round_half_even(taxable x tax_bps / 10000)
  Micros prepaid_available_micros = 0;
  Micros prepaid_applied_micros = 0;  // min(available, taxable + tax)
  Micros prepaid_carried_micros = 0;  // available - applied, carried to the next invoice
  Micros total_micros = 0;            // taxable + tax - prepaid applied, never negative
};

// Rates one tenant's usage for one period. Records of other tenants are ignored; records are
// clipped to the period. Line items come out in a canonical order, so the result does not
// depend on the order of `usage`.
Result<Invoice> compute_invoice(const RateCard& card, const TenantAccount& account,
                                const Period& period, std::span<const UsageRecord> usage,
                                std::span<const OfferingCredit> sla_credits = {});

// One invoice per tenant with usage in the period or with an account, sorted by tenant.
// Accounts absent for a tenant mean no tax and no prepaid credit.
Result<std::vector<Invoice>> run_invoices(
    const RateCard& card, const Period& period, std::span<const UsageRecord> usage,
    std::span<const TenantAccount> accounts,
    const std::map<std::string, std::vector<OfferingCredit>, std::less<>>& sla_credits = {});

// State rules: draft -> finalized (then immutable); a draft or a finalized invoice -> void (a
// voided draft frees its period, e.g. for an on-demand invoice inside it). conflict errors name
// the state that forbids the move.
Result<void> finalize_invoice(Invoice& inv, int64_t at_us);
Result<void> void_invoice(Invoice& inv, int64_t at_us, std::string_view reason);
// A corrected draft for a voided invoice: `recomputed` (from compute_invoice) gets the next
// revision, a new id and `supersedes` = the voided one.
Result<Invoice> reissue_invoice(const Invoice& voided, Invoice recomputed);
// Replaces the lines of a draft with a recomputation; refuses a finalized or void invoice.
Result<void> replace_draft(Invoice& draft, Invoice recomputed);

// The invoice as Fields<Invoice> describes it (what is stored, and what the API shows).
Json invoice_to_json(const Invoice& inv);
std::string invoice_to_csv(const Invoice& inv);
// A printable, self-contained HTML page (inline CSS, no scripts, no external resources).
std::string invoice_to_html(const Invoice& inv);

// ---------------------------------------------------------------------------------------------
// Budgets

struct Budget {
  std::string tenant;
  std::string project;       // empty: the whole tenant
  Micros amount_micros = 0;  // per period
  std::vector<int32_t> thresholds_bps = {5000, 8000, 10000};
  bool hard_stop = false;  // refuse spend that would go over amount_micros
};

struct BudgetAlert {
  int32_t threshold_bps = 0;
  Micros threshold_micros = 0;  // amount x threshold, rounded half even (display)
  Micros spend_micros = 0;      // spend after the proposal
};

struct BudgetDecision {
  std::vector<BudgetAlert> crossed;  // thresholds newly reached, ascending
  bool refused = false;
  std::string code;    // "budget_exceeded" when refused
  std::string reason;  // a human sentence when refused
};

Result<void> validate_budget(const Budget& b);
Result<Budget> parse_budget(const Json& j);
// Given the spend so far in the period and the cost of a proposed allocation (0 to evaluate
// spend already made), says which thresholds the proposal newly reaches (spend >= amount x
// threshold, compared exactly) and, with a hard stop, refuses a proposal that would take the
// spend above the amount. A refused proposal crosses nothing. `currency` is the rate card's,
// for the reason's amounts.
Result<BudgetDecision> evaluate_budget(const Budget& b, Micros spent_micros, Micros proposed_micros,
                                       std::string_view currency);

}  // namespace gp::billing

// The one description of a rate card and of an invoice, each kept as its JSON document: what is
// stored, what the API shows and its schema (common/record.h). Keys that apply only to some (a
// price's resource key or offering, a tier's upper bound, an issued invoice's due date, a void
// one's reason) are left out where they do not.
namespace gp {

template <>
struct Fields<billing::PriceTier> {
  using T = billing::PriceTier;
  static constexpr auto list = std::tuple{
      Field{"from_hours", &T::from_hours},
      Field{"to_hours", &T::to_hours, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"unit_price_micros", &T::unit_price_micros},
  };
};

// A flat price shows its one tier's unit price; a tiered one its tiers.
template <>
struct Fields<billing::Price> {
  using P = billing::Price;
  static constexpr auto list = std::tuple{
      Field{"resource_key", &P::resource_key, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"offering", &P::offering, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"model", &P::model, {}, Form::kEnum, billing::kPricingModels},
      Derived<P, std::optional<int64_t>>{"unit_price_micros",
                                         [](const P& p) -> std::optional<int64_t> {
                                           if (p.model != billing::PricingModel::kFlat ||
                                               p.tiers.empty())
                                             return std::nullopt;
                                           return p.tiers[0].unit_price_micros;
                                         },
                                         {},
                                         Form::kPlain,
                                         Shown::kWhereSet},
      Derived<P, std::vector<billing::PriceTier>>{"tiers",
                                                  [](const P& p) {
                                                    return p.model == billing::PricingModel::kFlat
                                                               ? std::vector<billing::PriceTier>{}
                                                               : p.tiers;
                                                  },
                                                  {},
                                                  Form::kPlain,
                                                  Shown::kWhereSet},
  };
};

template <>
struct Fields<billing::RateCard> {
  using C = billing::RateCard;
  static constexpr auto list = std::tuple{
      Field{"id", &C::id},
      Field{"version", &C::version},
      Field{"currency", &C::currency},
      Field{"effective_from", &C::effective_from_us, {}, Form::kTime},
      Field{"spot_discount_bps", &C::spot_discount_bps},
      Field{"committed_discount_bps", &C::committed_discount_bps},
      Field{"prices", &C::prices},
  };
};

template <>
struct Fields<billing::Period> {
  using P = billing::Period;
  static constexpr auto list = std::tuple{
      Field{"start", &P::start_us, {}, Form::kTime},
      Field{"end", &P::end_us, {}, Form::kTime},
      Derived<P>{"label", [](const P& p) { return billing::period_label(p); }},
  };
};

template <>
struct Fields<billing::RateCardRef> {
  using R = billing::RateCardRef;
  static constexpr auto list = std::tuple{
      Field{"id", &R::id},
      Field{"version", &R::version},
  };
};

template <>
struct Fields<billing::BillTo> {
  using B = billing::BillTo;
  static constexpr auto list = std::tuple{
      Field{"name", &B::name},
      Field{"legal_name", &B::legal_name},
      Field{"address", &B::address},
  };
};

// A line shows its quantity twice: as exact decimal unit-hours and as micro-unit-hours.
template <>
struct Fields<billing::LineItem> {
  using L = billing::LineItem;
  static constexpr auto list = std::tuple{
      Field{"project", &L::project},
      Field{"project_name", &L::project_name},
      Derived<L>{"description", [](const L& l) { return billing::line_description(l); }},
      Field{"resource_key", &L::resource_key},
      Field{"offering", &L::offering, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"price_key", &L::price_key},
      Field{"model", &L::model, {}, Form::kEnum, billing::kPricingModels},
      Field{"class", &L::usage_class, {}, Form::kEnum, billing::kUsageClasses},
      Field{"tier", &L::tier},
      Derived<L>{"quantity_unit_hours",
                 [](const L& l) { return billing::format_micros(l.quantity_micro_hours); }},
      Field{"quantity_micro_unit_hours", &L::quantity_micro_hours},
      Field{"unit_price_micros", &L::unit_price_micros},
      Field{"gross_micros", &L::gross_micros},
      Field{"discount_bps", &L::discount_bps},
      Field{"discount_micros", &L::discount_micros},
      Field{"amount_micros", &L::amount_micros},
  };
};

template <>
struct Fields<billing::CreditLine> {
  using C = billing::CreditLine;
  static constexpr auto list = std::tuple{
      Field{"offering", &C::offering},
      Field{"credit_bps", &C::credit_bps},
      Field{"charge_micros", &C::charge_micros},
      Field{"amount_micros", &C::amount_micros},
      Field{"reason", &C::reason},
  };
};

// A draft has no number (null) and no due date; an invoice shows when it was finalized or voided
// (and why) once it was, and which invoice it re-issues when it does.
template <>
struct Fields<billing::Invoice> {
  using I = billing::Invoice;
  static constexpr auto list = std::tuple{
      Field{"id", &I::id},
      Field{"tenant", &I::tenant},
      Field{"period", &I::period},
      Field{"currency", &I::currency},
      Derived<I, billing::RateCardRef>{
          .name = "rate_card",
          .get =
              [](const I& i) {
                return billing::RateCardRef{i.rate_card_id, i.rate_card_version};
              },
          .set =
              [](I& i, billing::RateCardRef r) {
                i.rate_card_id = std::move(r.id);
                i.rate_card_version = r.version;
              }},
      Field{"state", &I::state, {}, Form::kEnum, billing::kInvoiceStates},
      Field{"revision", &I::revision},
      Field{"usage_records", &I::usage_records},
      Field{"lines", &I::lines},
      Field{"sla_credits", &I::credits},
      Field{"subtotal_micros", &I::subtotal_micros},
      Field{"sla_credit_micros", &I::sla_credit_micros},
      Field{"taxable_micros", &I::taxable_micros},
      Field{"tax_bps", &I::tax_bps},
      Field{"tax_micros", &I::tax_micros},
      Field{"prepaid_available_micros", &I::prepaid_available_micros},
      Field{"prepaid_applied_micros", &I::prepaid_applied_micros},
      Field{"prepaid_carried_micros", &I::prepaid_carried_micros},
      Field{"total_micros", &I::total_micros},
      Derived<I>{"total", [](const I& i) { return billing::format_micros(i.total_micros); }},
      Field{"number", &I::number, {}, Form::kNullIfEmpty},
      Field{"bill_to", &I::bill_to},
      Field{"payment_terms_days", &I::payment_terms_days},
      Field{"due_at", &I::due_at_us, {}, Form::kTime, {}, Shown::kWhereSet},
      Field{"supersedes", &I::supersedes, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"finalized_at", &I::finalized_at_us, {}, Form::kTime, {}, Shown::kWhereSet},
      Field{"voided_at", &I::voided_at_us, {}, Form::kTime, {}, Shown::kWhereSet},
      Derived<I, std::optional<std::string>>{"void_reason",
                                             [](const I& i) -> std::optional<std::string> {
                                               if (!i.voided_at_us) return std::nullopt;
                                               return i.void_reason;
                                             },
                                             {},
                                             Form::kPlain,
                                             Shown::kWhereSet},
  };
};

}  // namespace gp
