// Billing accounts, stored rate cards and metered usage as billing records.
#include "billing/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "common/clock.h"
#include "common/env.h"
#include "common/record_json.h"
#include "metering/metering.h"
#include "sla/standing.h"
#include "store/record_row.h"
#include "tenancy/tenancy.h"

namespace gp::billing {
namespace {

// An invoice's row: its JSON document beside the columns that find, filter and order it.
struct InvoiceRow {
  std::string id;  // the stored id ("inv_...")
  std::string tenant_id;
  int64_t period_start = 0, period_end = 0;
  int64_t revision = 1;
  InvoiceState state = InvoiceState::kDraft;
  std::string rate_card_id;
  int64_t rate_card_version = 0;
  std::optional<std::string> supersedes;  // the stored id of the void invoice this re-issues
  std::string invoice;                    // the document (invoice_to_json)
  int64_t total_micros = 0;
  std::string currency;
  std::string created_by;
  int64_t created_at = 0, computed_at = 0;
  std::optional<int64_t> finalized_at, voided_at;
  std::optional<std::string> void_reason, number;
  int64_t version = 0;
};

}  // namespace
}  // namespace gp::billing

namespace gp {

template <>
struct Fields<billing::InvoiceRow> {
  using R = billing::InvoiceRow;
  static constexpr auto list = std::tuple{
      Field{"id", &R::id},
      Field{"tenant_id", &R::tenant_id},
      Field{"period_start", &R::period_start},
      Field{"period_end", &R::period_end},
      Field{"revision", &R::revision},
      Field{"state", &R::state, {}, Form::kEnum, billing::kInvoiceStates},
      Field{"rate_card_id", &R::rate_card_id},
      Field{"rate_card_version", &R::rate_card_version},
      Field{"supersedes", &R::supersedes},
      Field{"invoice", &R::invoice},
      Field{"total_micros", &R::total_micros},
      Field{"currency", &R::currency},
      Field{"created_by", &R::created_by},
      Field{"created_at", &R::created_at},
      Field{"computed_at", &R::computed_at},
      Field{"finalized_at", &R::finalized_at},
      Field{"voided_at", &R::voided_at},
      Field{"void_reason", &R::void_reason},
      Field{"number", &R::number},
      Field{"version", &R::version},
  };
};

}  // namespace gp

namespace gp::billing {

TenantAccount Account::terms() const {
  return {.tenant = tenant_id, .tax_bps = tax_bps, .prepaid_credit_micros = prepaid_credit_micros};
}

Json Account::to_json() const {
  Json j = json_of_fields(*this);
  if (version > 0) {
    j["updated_by"] = updated_by;
    j["updated_at"] = format_rfc3339(from_unix_micros(updated_at));
    j["version"] = version;
  }
  return j;
}

namespace {

const std::string kAccountColumns = store::columns_of<Account>();
const std::string kAccountUpsert = fmt::format(
    "INSERT INTO billing_accounts ({}) VALUES ({}) ON CONFLICT (tenant_id) DO UPDATE SET {}",
    kAccountColumns, store::placeholders_of<Account>(), store::updates_of<Account>({"tenant_id"}));

}  // namespace

Result<Account> load_account(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM billing_accounts WHERE tenant_id = ?", kAccountColumns),
      {tenant_id}));
  if (!row) return Account{.tenant_id = tenant_id};
  return store::read_row<Account>(*row);
}

Result<Account> apply_account_update(Account current, const Json& body) {
  ObjectReader rd(body, "billing account");
  auto card = rd.optional_string("rate_card", 63);
  auto tax = rd.optional_integer("tax_bps", 0, kBasisPoints);
  auto prepaid = rd.optional_integer("prepaid_credit_micros", 0, INT64_MAX);
  auto legal = rd.optional_string("legal_name", 200);
  auto address = rd.optional_string("billing_address", 1000);
  auto terms = rd.optional_integer("payment_terms_days", 0, 365);
  GP_TRY_VOID(rd.finish());
  if (legal) current.legal_name = *legal;
  if (address) current.billing_address = *address;
  if (terms) current.payment_terms_days = int32_t(*terms);
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
  GP_TRY(tx.exec(kAccountUpsert, store::params_of(a)));
  return a;
}

namespace {

constexpr std::string_view kPublishedColumns = "card, created_by, created_at";

Result<PublishedRateCard> published_from(const store::Row& row) {
  return PublishedRateCard{.card = GP_TRY(parse_json(row.text(0))),
                           .created_by = row.text(1),
                           .created_at = row.integer(2)};
}

}  // namespace

Json PublishedRateCard::to_json() const {
  Json j = card;
  j["created_by"] = created_by;
  j["created_at"] = format_rfc3339(from_unix_micros(created_at));
  return j;
}

Result<PublishedRateCard> publish_rate_card(store::Tx& tx, RateCard& card, const std::string& who,
                                            int64_t now) {
  auto last = GP_TRY(tx.query_one("SELECT MAX(version) FROM rate_cards WHERE id = ?", {card.id}));
  card.version = last && !last->is_null(0) ? last->integer(0) + 1 : 1;
  PublishedRateCard published{
      .card = rate_card_to_json(card), .created_by = who, .created_at = now};
  GP_TRY(
      tx.exec("INSERT INTO rate_cards (id, version, currency, effective_from, card, created_by, "
              "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
              {card.id, card.version, card.currency, card.effective_from_us, published.card.dump(),
               who, now}));
  return published;
}

Result<std::vector<PublishedRateCard>> latest_rate_cards(store::Tx& tx) {
  std::vector<PublishedRateCard> out;
  for (const auto& row : GP_TRY(tx.query(fmt::format(
           "SELECT {} FROM rate_cards r WHERE version = (SELECT MAX(version) FROM rate_cards "
           "WHERE id = r.id) ORDER BY id",
           kPublishedColumns)))) {
    out.push_back(GP_TRY(published_from(row)));
  }
  return out;
}

Result<std::vector<PublishedRateCard>> published_rate_card_versions(store::Tx& tx,
                                                                    std::string_view id) {
  std::vector<PublishedRateCard> out;
  for (const auto& row :
       GP_TRY(tx.query(fmt::format("SELECT {} FROM rate_cards WHERE id = ? ORDER BY version",
                                   kPublishedColumns),
                       {std::string(id)}))) {
    out.push_back(GP_TRY(published_from(row)));
  }
  return out;
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

namespace {

// The name of offering `id`; a deleted offering keeps its id.
const std::string& name_of(const OfferingNames& offerings, const std::string& id) {
  auto it = offerings.find(id);
  return it != offerings.end() ? it->second : id;
}

}  // namespace

Result<std::vector<UsageRecord>> load_usage_records(store::Tx& tx, const std::string& tenant_id,
                                                    const Period& period, int64_t now,
                                                    const OfferingNames& offerings) {
  const int64_t until = std::min(period.end_us, now);
  std::vector<UsageRecord> out;
  if (until <= period.start_us) return out;
  for (const auto& i : GP_TRY(metering::load_intervals(tx, tenant_id, period.start_us, until))) {
    UsageRecord r;
    r.tenant = i.tenant_id;
    r.project = i.project_id;
    r.resource_key = i.resource_key;
    if (i.offering_id) r.offering = name_of(offerings, *i.offering_id);
    r.preemptible = i.preemptible;
    r.committed = i.reservation_id.has_value();
    r.start_us = std::max(i.start_us, period.start_us);
    r.end_us = std::min(i.end_us.value_or(until), until);
    r.quantity = i.quantity;
    r.gpu_equivalent_units = i.units;
    if (r.end_us > r.start_us) out.push_back(std::move(r));
  }
  return out;
}

Result<CreditsByTenant> load_sla_credits(store::Tx& tx, const std::string& tenant_id,
                                         const Period& period, int64_t now,
                                         const OfferingNames& offerings,
                                         const sla::FailureOf& failure_of) {
  CreditsByTenant out;
  for (const auto& a :
       GP_TRY(sla::standing(tx, tenant_id, period.start_us, period.end_us, now, failure_of))) {
    if (a.credit_bps > 0)
      out[a.tenant].push_back({.offering = name_of(offerings, a.offering),
                               .credit_bps = a.credit_bps,
                               .reason = a.reason});
  }
  return out;
}

namespace {

// Who `inv` is addressed to and its terms, from the tenant's account as it stands; its
// projects by name.
Result<void> address_invoice(store::Tx& tx, const Account& account, Invoice& inv) {
  inv.bill_to.legal_name = account.legal_name;
  inv.bill_to.address = account.billing_address;
  inv.payment_terms_days = account.payment_terms_days;
  if (auto t = GP_TRY(tenancy::find_tenant(tx, inv.tenant))) inv.bill_to.name = t->name;
  std::map<std::string, std::string> names;
  const tenancy::TenantScope scope(inv.tenant);
  for (auto& li : inv.lines) {
    if (!names.contains(li.project)) {
      auto p = GP_TRY(tenancy::find_project(tx, scope, li.project));
      names[li.project] = p ? p->name : "";
    }
    li.project_name = names[li.project];
  }
  return ok();
}

}  // namespace

Result<Invoice> rate_tenant(store::Tx& tx, const std::string& tenant_id, const Period& period,
                            int64_t now, const OfferingNames& offerings,
                            std::span<const OfferingCredit> sla_credits) {
  const Account account = GP_TRY(load_account(tx, tenant_id));
  const RateCard card = GP_TRY(rate_card_for_period(tx, account.rate_card_id, period));
  const auto usage = GP_TRY(load_usage_records(tx, tenant_id, period, now, offerings));
  Invoice inv = GP_TRY(compute_invoice(card, account.terms(), period, usage, sla_credits));
  GP_TRY_VOID(address_invoice(tx, account, inv));
  return inv;
}

}  // namespace gp::billing

// ---------------------------------------------------------------------------------------------
// Stored invoices

namespace gp::billing {

namespace {

constexpr int64_t kMaxOnDemandPeriodUs = int64_t(366) * 24 * kUsPerHour;
constexpr size_t kMaxVoidReason = 500;

const std::string kInvoiceColumns = store::columns_of<InvoiceRow>();
// The columns an invoice's row is inserted with and never changes.
constexpr std::array<std::string_view, 8> kInvoiceFixedColumns = {
    "id",       "tenant_id",  "period_start", "period_end",
    "revision", "supersedes", "created_by",   "created_at"};

std::string time_text(int64_t us) { return format_rfc3339(from_unix_micros(us)); }

// The inverse of invoice_to_json for the invoices this module stored, from the invoice's field
// table (trusted input: a mismatch is an internal error, not a client's). Keys an older
// document lacks (a line's project name, the bill-to party, the number, the payment terms, the
// due date) keep their defaults.
Result<Invoice> invoice_from_json(const Json& j) {
  auto inv = record_from_json<Invoice>(j);
  if (!inv)
    return fail(
        Error::internal(fmt::format("stored invoice is unreadable: {}", inv.error().message)));
  return inv;
}

std::optional<std::string> unless_empty(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

InvoiceRow row_of(const StoredInvoice& s) {
  const Invoice& inv = s.invoice;
  return {.id = s.id,
          .tenant_id = inv.tenant,
          .period_start = inv.period.start_us,
          .period_end = inv.period.end_us,
          .revision = inv.revision,
          .state = inv.state,
          .rate_card_id = inv.rate_card_id,
          .rate_card_version = inv.rate_card_version,
          .supersedes = unless_empty(s.supersedes_id),
          .invoice = invoice_to_json(inv).dump(),
          .total_micros = inv.total_micros,
          .currency = inv.currency,
          .created_by = s.created_by,
          .created_at = s.created_at,
          .computed_at = s.computed_at,
          .finalized_at = inv.finalized_at_us,
          .voided_at = inv.voided_at_us,
          .void_reason = unless_empty(inv.void_reason),
          .number = unless_empty(inv.number),
          .version = s.version};
}

// A stored invoice from its row (kInvoiceColumns): the document, with the state, revision and
// times the row holds.
Result<StoredInvoice> stored_from_row(const store::Row& row) {
  InvoiceRow r = GP_TRY(store::read_row<InvoiceRow>(row));
  StoredInvoice s;
  s.id = std::move(r.id);
  s.supersedes_id = r.supersedes.value_or("");
  s.invoice = GP_TRY(invoice_from_json(GP_TRY(parse_json(r.invoice))));
  s.invoice.state = r.state;
  s.invoice.revision = int(r.revision);
  s.created_by = std::move(r.created_by);
  s.created_at = r.created_at;
  s.computed_at = r.computed_at;
  s.invoice.finalized_at_us = r.finalized_at;
  s.invoice.voided_at_us = r.voided_at;
  s.invoice.void_reason = r.void_reason.value_or("");
  s.version = r.version;
  return s;
}

Result<void> insert_invoice(store::Tx& tx, const StoredInvoice& s) {
  static const std::string sql = fmt::format("INSERT INTO invoices ({}) VALUES ({})",
                                             kInvoiceColumns, store::placeholders_of<InvoiceRow>());
  GP_TRY(tx.exec(sql, store::params_of(row_of(s))));
  return ok();
}

// Writes a changed invoice over version `s.version - 1` (optimistic: a concurrent change is a
// conflict, though writes are serialized by the store anyway): every column but those fixed at
// insert.
Result<void> update_invoice(store::Tx& tx, const StoredInvoice& s) {
  store::Params all = store::params_of(row_of(s));
  std::string assignments;
  store::Params params;
  size_t i = 0;
  for_each_stored<InvoiceRow>([&](const auto& f) {
    const std::string_view column = f.stored_as();
    if (std::find(kInvoiceFixedColumns.begin(), kInvoiceFixedColumns.end(), column) ==
        kInvoiceFixedColumns.end()) {
      assignments += fmt::format("{}{} = ?", assignments.empty() ? "" : ", ", column);
      params.push_back(std::move(all[i]));
    }
    ++i;
  });
  params.emplace_back(s.id);
  params.emplace_back(s.version - 1);
  auto n = GP_TRY(tx.exec(
      fmt::format("UPDATE invoices SET {} WHERE id = ? AND version = ?", assignments), params));
  if (n != 1) return fail(Error::conflict(fmt::format("invoice {} changed meanwhile", s.id)));
  return ok();
}

// The latest revision of the tenant's invoice for exactly `period`.
Result<std::optional<StoredInvoice>> latest_for_period(store::Tx& tx, const std::string& tenant_id,
                                                       const Period& period) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM invoices WHERE tenant_id = ? AND period_start = ? AND "
                  "period_end = ? ORDER BY revision DESC LIMIT 1",
                  kInvoiceColumns),
      {tenant_id, period.start_us, period.end_us}));
  if (!row) return std::optional<StoredInvoice>();
  return std::optional<StoredInvoice>(GP_TRY(stored_from_row(*row)));
}

// conflict when a non-void invoice of the tenant for another period overlaps `period`: the same
// GPU-second must never be billed twice.
Result<void> check_no_overlap(store::Tx& tx, const std::string& tenant_id, const Period& period) {
  auto row = GP_TRY(tx.query_one(
      "SELECT id, period_start, period_end FROM invoices WHERE tenant_id = ? AND state <> 'void' "
      "AND period_start < ? AND period_end > ? AND NOT (period_start = ? AND period_end = ?) "
      "LIMIT 1",
      {tenant_id, period.end_us, period.start_us, period.start_us, period.end_us}));
  if (row) {
    return fail(Error::conflict(fmt::format(
        "invoice {} ({}) overlaps {}: void it first, usage is never billed twice", row->text(0),
        period_label({row->integer(1), row->integer(2)}), period_label(period))));
  }
  return ok();
}

Result<void> check_period_started(const Period& period, int64_t now) {
  if (period.start_us >= now) {
    return fail(Error::invalid(fmt::format("period {} has not started yet (it starts at {})",
                                           period_label(period), time_text(period.start_us))));
  }
  return ok();
}

// Stores `recomputed` (a draft rated at `now`) as the tenant's invoice for its period, given the
// latest stored revision for that period.
Result<DraftResult> store_draft(store::Tx& tx, Env world, std::optional<StoredInvoice> latest,
                                Invoice recomputed, const std::string& who) {
  const int64_t now = world.now();
  DraftResult out;
  if (!latest) {
    out.outcome = DraftOutcome::kCreated;
    out.stored.id = world.ids.next("inv");
    out.stored.invoice = std::move(recomputed);
    out.stored.created_by = who;
    out.stored.created_at = now;
    out.stored.computed_at = now;
    out.stored.version = 1;
    GP_TRY_VOID(insert_invoice(tx, out.stored));
    return out;
  }
  switch (latest->invoice.state) {
    case InvoiceState::kDraft:
      out.outcome = DraftOutcome::kRefreshed;
      out.stored = std::move(*latest);
      GP_TRY_VOID(replace_draft(out.stored.invoice, std::move(recomputed)));
      out.stored.computed_at = now;
      out.stored.version += 1;
      GP_TRY_VOID(update_invoice(tx, out.stored));
      return out;
    case InvoiceState::kFinalized:
      return fail(Error::conflict(fmt::format(
          "invoice {} ({}) is finalized and cannot change; void it to re-issue the period",
          latest->id, latest->invoice.id)));
    case InvoiceState::kVoid:
      out.outcome = DraftOutcome::kReissued;
      out.stored.invoice = GP_TRY(reissue_invoice(latest->invoice, std::move(recomputed)));
      out.stored.id = world.ids.next("inv");
      out.stored.supersedes_id = latest->id;
      out.stored.created_by = who;
      out.stored.created_at = now;
      out.stored.computed_at = now;
      out.stored.version = 1;
      GP_TRY_VOID(insert_invoice(tx, out.stored));
      return out;
  }
  return fail(Error::internal("unknown invoice state"));
}

Result<StoredInvoice> require_invoice(store::Tx& tx, const std::string& tenant_id,
                                      const std::string& id) {
  auto s = GP_TRY(find_invoice(tx, tenant_id, id));
  if (!s) return fail(Error::not_found("invoice not found"));
  return std::move(*s);
}

Json totals_json(const Invoice& inv) {
  return {{"subtotal_micros", inv.subtotal_micros},
          {"sla_credit_micros", inv.sla_credit_micros},
          {"tax_micros", inv.tax_micros},
          {"prepaid_applied_micros", inv.prepaid_applied_micros},
          {"total_micros", inv.total_micros},
          {"lines", inv.lines.size()}};
}

}  // namespace

Json StoredInvoice::to_json() const {
  Json j = invoice_to_json(invoice);
  j["id"] = id;
  j["label"] = invoice.id;
  j.erase("supersedes");
  if (!supersedes_id.empty()) {
    j["supersedes"] = supersedes_id;
    j["supersedes_label"] = invoice.supersedes;
  }
  j["created_by"] = created_by;
  j["created_at"] = time_text(created_at);
  j["computed_at"] = time_text(computed_at);
  j["version"] = version;
  return j;
}

Json StoredInvoice::summary_json() const {
  Json j = {{"id", id},
            {"label", invoice.id},
            {"tenant", invoice.tenant},
            {"period", period_label(invoice.period)},
            {"state", invoice_state_name(invoice.state)},
            {"revision", invoice.revision},
            {"currency", invoice.currency},
            {"rate_card", {{"id", invoice.rate_card_id}, {"version", invoice.rate_card_version}}},
            {"lines", invoice.lines.size()},
            {"subtotal_micros", invoice.subtotal_micros},
            {"total_micros", invoice.total_micros},
            {"total", format_micros(invoice.total_micros)},
            {"computed_at", time_text(computed_at)},
            {"number", invoice.number.empty() ? Json(nullptr) : Json(invoice.number)},
            {"tenant_name", invoice.bill_to.name}};
  if (!supersedes_id.empty()) j["supersedes"] = supersedes_id;
  return j;
}

Result<Period> parse_month(std::string_view text) {
  auto bad = [&] {
    return fail(Error::invalid(
        fmt::format("period '{}': want a UTC calendar month YYYY-MM", text.substr(0, 40))));
  };
  if (text.size() != 7 || text[4] != '-') return bad();
  int year = 0, month = 0;
  for (size_t i = 0; i < 7; ++i) {
    if (i == 4) continue;
    if (text[i] < '0' || text[i] > '9') return bad();
    (i < 4 ? year : month) = (i < 4 ? year : month) * 10 + (text[i] - '0');
  }
  auto p = month_period(year, month);
  if (!p) return bad();
  return p;
}

Result<Period> parse_period_body(const Json& body) {
  ObjectReader rd(body, "invoice request");
  auto month = rd.optional_string("period", 16);
  auto start = rd.optional_string("start", 64);
  auto end = rd.optional_string("end", 64);
  GP_TRY_VOID(rd.finish());
  if (month) {
    if (start || end)
      return fail(Error::invalid("give either 'period' (YYYY-MM) or 'start' and 'end', not both"));
    return parse_month(*month);
  }
  if (!start || !end)
    return fail(Error::invalid(
        "an invoice needs 'period' (YYYY-MM) or both 'start' and 'end' (RFC 3339, UTC)"));
  Period p;
  TimePoint tp;
  if (!parse_rfc3339(*start, &tp))
    return fail(Error::invalid("field 'start': not an RFC 3339 time"));
  p.start_us = to_unix_micros(tp);
  if (!parse_rfc3339(*end, &tp)) return fail(Error::invalid("field 'end': not an RFC 3339 time"));
  p.end_us = to_unix_micros(tp);
  if (p.end_us <= p.start_us) return fail(Error::invalid("field 'end': must be after 'start'"));
  if (p.end_us - p.start_us > kMaxOnDemandPeriodUs)
    return fail(Error::invalid("an on-demand period is at most 366 days"));
  return p;
}

std::string_view draft_outcome_name(DraftOutcome o) {
  switch (o) {
    case DraftOutcome::kCreated:
      return "created";
    case DraftOutcome::kRefreshed:
      return "refreshed";
    case DraftOutcome::kReissued:
      return "reissued";
  }
  return "created";
}

Result<DraftResult> refresh_draft(store::Tx& tx, Env world, const std::string& tenant_id,
                                  const Period& period, const std::string& who,
                                  const OfferingNames& offerings,
                                  std::span<const OfferingCredit> sla_credits) {
  const int64_t now = world.now();
  GP_TRY_VOID(check_period_started(period, now));
  auto latest = GP_TRY(latest_for_period(tx, tenant_id, period));
  if (latest && latest->invoice.state == InvoiceState::kFinalized) {
    return fail(Error::conflict(fmt::format(
        "invoice {} ({}) is finalized and cannot change; void it to re-issue the period",
        latest->id, latest->invoice.id)));
  }
  GP_TRY_VOID(check_no_overlap(tx, tenant_id, period));
  Invoice recomputed = GP_TRY(rate_tenant(tx, tenant_id, period, now, offerings, sla_credits));
  return store_draft(tx, world, std::move(latest), std::move(recomputed), who);
}

Result<std::optional<StoredInvoice>> find_invoice(store::Tx& tx, const std::string& tenant_id,
                                                  const std::string& id) {
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM invoices WHERE id = ? AND tenant_id = ?", kInvoiceColumns),
      {id, tenant_id}));
  if (!row) return std::optional<StoredInvoice>();
  return std::optional<StoredInvoice>(GP_TRY(stored_from_row(*row)));
}

Result<Page<StoredInvoice>> list_invoices(store::Tx& tx, const InvoiceFilter& filter,
                                          const PageRequest& page) {
  std::string sql = fmt::format("SELECT {} FROM invoices WHERE 1 = 1", kInvoiceColumns);
  store::Params params;
  if (!filter.tenant_id.empty()) {
    sql += " AND tenant_id = ?";
    params.push_back(filter.tenant_id);
  }
  if (filter.period) {
    sql += " AND period_start = ? AND period_end = ?";
    params.push_back(filter.period->start_us);
    params.push_back(filter.period->end_us);
  }
  if (filter.state) {
    sql += " AND state = ?";
    params.push_back(std::string(invoice_state_name(*filter.state)));
  }
  if (page.after) {
    sql += " AND id > ?";
    params.push_back(*page.after);
  }
  sql += " ORDER BY id LIMIT ?";
  params.push_back(int64_t(page.limit) + 1);
  std::vector<StoredInvoice> items;
  for (const auto& row : GP_TRY(tx.query(sql, params)))
    items.push_back(GP_TRY(stored_from_row(row)));
  return make_page(std::move(items), page);
}

Result<StoredInvoice> finalize_stored(store::Tx& tx, const std::string& tenant_id,
                                      const std::string& id, const std::string& who, int64_t now) {
  StoredInvoice s = GP_TRY(require_invoice(tx, tenant_id, id));
  Invoice& inv = s.invoice;
  if (inv.state == InvoiceState::kDraft) {
    if (now < inv.period.end_us) {
      return fail(Error::conflict(
          fmt::format("invoice {} covers {}, which ends at {}: finalize it after the period ends",
                      s.id, period_label(inv.period), time_text(inv.period.end_us))));
    }
    if (s.computed_at < inv.period.end_us) {
      return fail(Error::conflict(
          fmt::format("draft {} was rated at {}, before its period ended: refresh it (POST "
                      "/v1/tenants/{}/invoices) and review it before finalizing",
                      s.id, time_text(s.computed_at), tenant_id)));
    }
  }
  // Prepaid credit from the balance as it is now (other invoices may have used some since the
  // draft was rated); the rest of the invoice is as reviewed.
  Account account = GP_TRY(load_account(tx, tenant_id));
  Micros due = GP_TRY(checked_add(inv.taxable_micros, inv.tax_micros));
  Invoice finalized = inv;
  finalized.prepaid_available_micros = account.prepaid_credit_micros;
  finalized.prepaid_applied_micros = std::min(account.prepaid_credit_micros, due);
  finalized.prepaid_carried_micros =
      account.prepaid_credit_micros - finalized.prepaid_applied_micros;
  finalized.total_micros = due - finalized.prepaid_applied_micros;
  // Issued to the account as it is now, with the next number, due after its terms.
  GP_TRY_VOID(address_invoice(tx, account, finalized));
  auto issued = GP_TRY(tx.query_one("SELECT COUNT(*) FROM invoices WHERE number IS NOT NULL"));
  finalized.number = fmt::format("INV-{:06}", issued->integer(0) + 1);
  finalized.due_at_us = now + int64_t(account.payment_terms_days) * 24 * kUsPerHour;
  GP_TRY_VOID(finalize_invoice(finalized, now));  // conflict unless a draft
  inv = std::move(finalized);
  s.version += 1;
  GP_TRY_VOID(update_invoice(tx, s));
  if (inv.prepaid_applied_micros > 0) {
    account.prepaid_credit_micros -= inv.prepaid_applied_micros;
    GP_TRY(save_account(tx, std::move(account), who, now));
  }
  return s;
}

Result<StoredInvoice> void_stored(store::Tx& tx, const std::string& tenant_id,
                                  const std::string& id, std::string_view reason,
                                  const std::string& who, int64_t now) {
  if (reason.size() > kMaxVoidReason)
    return fail(
        Error::invalid(fmt::format("field 'reason': at most {} characters", kMaxVoidReason)));
  StoredInvoice s = GP_TRY(require_invoice(tx, tenant_id, id));
  GP_TRY_VOID(void_invoice(s.invoice, now, reason));
  s.version += 1;
  GP_TRY_VOID(update_invoice(tx, s));
  if (s.invoice.prepaid_applied_micros > 0) {
    Account account = GP_TRY(load_account(tx, tenant_id));
    account.prepaid_credit_micros =
        GP_TRY(checked_add(account.prepaid_credit_micros, s.invoice.prepaid_applied_micros));
    GP_TRY(save_account(tx, std::move(account), who, now));
  }
  return s;
}

Json Verification::to_json() const {
  Json diffs = Json::array();
  for (const auto& d : differences) diffs.push_back(d);
  return {
      {"id", stored.id},
      {"label", stored.invoice.id},
      {"state", invoice_state_name(stored.invoice.state)},
      {"currency", stored.invoice.currency},
      {"rate_card", {{"id", recomputed.rate_card_id}, {"version", recomputed.rate_card_version}}},
      {"matches", matches()},
      {"stored", totals_json(stored.invoice)},
      {"recomputed", totals_json(recomputed)},
      {"usage_records", recomputed.usage_records},
      {"differences", diffs}};
}

Result<Verification> verify_invoice(store::Tx& tx, const std::string& tenant_id,
                                    const std::string& id, int64_t now,
                                    const OfferingNames& offerings) {
  Verification v;
  v.stored = GP_TRY(require_invoice(tx, tenant_id, id));
  const Invoice& inv = v.stored.invoice;
  RateCard card;
  bool found_card = false;
  for (auto& c : GP_TRY(load_rate_card_versions(tx, inv.rate_card_id))) {
    if (c.version == inv.rate_card_version) {
      card = std::move(c);
      found_card = true;
    }
  }
  if (!found_card) {
    return fail(Error::conflict(fmt::format("rate card '{}' version {} is no longer stored",
                                            inv.rate_card_id, inv.rate_card_version)));
  }
  // A draft is checked as it was rated (usage known at its rating time; a later refresh picks up
  // what came since); a finalized or void invoice against everything known of its period.
  const int64_t until =
      inv.state == InvoiceState::kDraft ? v.stored.computed_at : std::max(now, inv.period.end_us);
  auto usage = GP_TRY(load_usage_records(tx, tenant_id, inv.period, until, offerings));
  std::vector<OfferingCredit> credits;
  credits.reserve(inv.credits.size());
  for (const auto& c : inv.credits) credits.push_back({c.offering, c.credit_bps, c.reason});
  TenantAccount terms{tenant_id, inv.tax_bps, inv.prepaid_available_micros};
  v.recomputed = GP_TRY(compute_invoice(card, terms, inv.period, usage, credits));
  auto cmp = [&](std::string_view what, int64_t stored, int64_t again) {
    if (stored != again)
      v.differences.push_back(fmt::format("{}: stored {} recomputed {}", what, stored, again));
  };
  cmp("subtotal_micros", inv.subtotal_micros, v.recomputed.subtotal_micros);
  cmp("sla_credit_micros", inv.sla_credit_micros, v.recomputed.sla_credit_micros);
  cmp("taxable_micros", inv.taxable_micros, v.recomputed.taxable_micros);
  cmp("tax_micros", inv.tax_micros, v.recomputed.tax_micros);
  cmp("prepaid_applied_micros", inv.prepaid_applied_micros, v.recomputed.prepaid_applied_micros);
  cmp("total_micros", inv.total_micros, v.recomputed.total_micros);
  cmp("usage_records", int64_t(inv.usage_records), int64_t(v.recomputed.usage_records));
  // Names are how the invoice reads, not what it charges: the stored ones stand.
  std::map<std::string, std::string> names;
  for (const auto& li : inv.lines) names[li.project] = li.project_name;
  for (auto& li : v.recomputed.lines) li.project_name = names[li.project];
  const Json a = invoice_to_json(inv), b = invoice_to_json(v.recomputed);
  if (a["lines"] != b["lines"]) v.differences.push_back("lines differ");
  if (a["sla_credits"] != b["sla_credits"]) v.differences.push_back("SLA credit lines differ");
  return v;
}

Json RunReport::to_json() const {
  Json items = Json::array();
  size_t created = 0, refreshed = 0, reissued = 0;
  Micros total = 0;
  for (const auto& d : drafts) {
    Json j = d.stored.summary_json();
    j["outcome"] = draft_outcome_name(d.outcome);
    items.push_back(std::move(j));
    created += d.outcome == DraftOutcome::kCreated;
    refreshed += d.outcome == DraftOutcome::kRefreshed;
    reissued += d.outcome == DraftOutcome::kReissued;
    total += d.stored.invoice.total_micros;
  }
  for (const auto& f : finalized) {
    Json j = f.summary_json();
    j["outcome"] = "unchanged";
    items.push_back(std::move(j));
  }
  return {{"period", period_label(period)},
          {"start", time_text(period.start_us)},
          {"end", time_text(period.end_us)},
          {"drafts", drafts.size()},
          {"created", created},
          {"refreshed", refreshed},
          {"reissued", reissued},
          {"finalized_unchanged", finalized.size()},
          {"drafts_total_micros", total},
          {"items", std::move(items)}};
}

Result<RunReport> run_period(store::Tx& tx, Env world, const Period& period, const std::string& who,
                             const OfferingNames& offerings, const CreditsByTenant& sla_credits) {
  const int64_t now = world.now();
  GP_TRY_VOID(check_period_started(period, now));
  RunReport report;
  report.period = period;
  // Everything read once: usage of every tenant, accounts, the invoices of the period, and any
  // non-void invoice of another period overlapping it.
  std::map<std::string, std::vector<UsageRecord>, std::less<>> usage;
  for (auto& r : GP_TRY(load_usage_records(tx, "", period, now, offerings)))
    usage[r.tenant].push_back(std::move(r));
  for (const auto& row : GP_TRY(tx.query("SELECT tenant_id FROM billing_accounts")))
    usage.try_emplace(row.text(0));
  std::map<std::string, StoredInvoice, std::less<>> latest;
  for (const auto& row :
       GP_TRY(tx.query(fmt::format("SELECT {} FROM invoices WHERE period_start = ? AND "
                                   "period_end = ? ORDER BY tenant_id, revision",
                                   kInvoiceColumns),
                       {period.start_us, period.end_us}))) {
    StoredInvoice s = GP_TRY(stored_from_row(row));
    std::string tenant = s.invoice.tenant;
    latest.insert_or_assign(std::move(tenant), std::move(s));
  }
  std::map<std::string, std::string, std::less<>> overlapping;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT tenant_id, id FROM invoices WHERE state <> 'void' AND period_start < ? AND "
           "period_end > ? AND NOT (period_start = ? AND period_end = ?)",
           {period.end_us, period.start_us, period.start_us, period.end_us}))) {
    overlapping.emplace(row.text(0), row.text(1));
  }
  std::map<std::string, RateCard, std::less<>> cards;
  for (auto& [tenant, records] : usage) {
    auto prior = latest.find(tenant);
    if (prior != latest.end() && prior->second.invoice.state == InvoiceState::kFinalized) {
      report.finalized.push_back(prior->second);
      continue;
    }
    if (auto o = overlapping.find(tenant); o != overlapping.end()) {
      return fail(Error::conflict(
          fmt::format("tenant '{}': invoice {} overlaps {}: void it first, usage is never billed "
                      "twice",
                      tenant, o->second, period_label(period))));
    }
    const Account account = GP_TRY(load_account(tx, tenant));
    auto card = cards.find(account.rate_card_id);
    if (card == cards.end()) {
      auto c = rate_card_for_period(tx, account.rate_card_id, period);
      if (!c) {
        return fail(
            Error{c.error().code, fmt::format("tenant '{}': {}", tenant, c.error().message)});
      }
      card = cards.emplace(account.rate_card_id, std::move(*c)).first;
    }
    std::span<const OfferingCredit> credits;
    if (auto c = sla_credits.find(tenant); c != sla_credits.end()) credits = c->second;
    auto inv = compute_invoice(card->second, account.terms(), period, records, credits);
    if (!inv) {
      return fail(
          Error{inv.error().code, fmt::format("tenant '{}': {}", tenant, inv.error().message)});
    }
    GP_TRY_VOID(address_invoice(tx, account, *inv));
    std::optional<StoredInvoice> before;
    if (prior != latest.end()) before = prior->second;
    report.drafts.push_back(
        GP_TRY(store_draft(tx, world, std::move(before), std::move(*inv), who)));
  }
  return report;
}

}  // namespace gp::billing
