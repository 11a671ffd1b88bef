// Billing accounts and invoices: drafts rated from metered usage, finalized (immutable, prepaid
// credit applied), voided and re-issued, verified against raw usage, exported as JSON, CSV and a
// printable HTML page. The rules live in gp_billing_ledger (billing/ledger.h).
#include <fmt/format.h>

#include "alloc/alloc.h"
#include "api/router.h"
#include "billing/ledger.h"

namespace gp::api {
namespace {

using iam::Permission;

std::string invoice_path(const std::string& tenant_id, const std::string& id) {
  return fmt::format("/v1/tenants/{}/invoices/{}", tenant_id, id);
}

// The SLA credits of `tenant_id` (every tenant: "") in `period`, the failed allocations read
// through alloc.
Result<billing::CreditsByTenant> sla_credits(Api& api, store::Tx& tx, const std::string& tenant_id,
                                             const billing::Period& period,
                                             const billing::OfferingNames& offerings) {
  return billing::load_sla_credits(
      tx, tenant_id, period, api.env().now(), offerings,
      [&tx](const std::string& id) { return alloc::find_failure(tx, id); });
}

// The SLA credits the tenant earned in `period` (none when it met every target).
Result<std::vector<billing::OfferingCredit>> tenant_sla_credits(
    Api& api, store::Tx& tx, const std::string& tenant_id, const billing::Period& period,
    const billing::OfferingNames& offerings) {
  auto credits = GP_TRY(sla_credits(api, tx, tenant_id, period, offerings));
  auto mine = credits.find(tenant_id);
  if (mine == credits.end()) return std::vector<billing::OfferingCredit>{};
  return std::move(mine->second);
}

// The account as both routes answer it, with what the operator needs to see beside it: whether
// its card has a version in force this month (without one the tenant's usage cannot be
// invoiced; a tenant without an account uses the card `default`) and that card's currency.
Result<Json> account_json(Api& api, store::Tx& tx, const billing::Account& a) {
  Json body = a.to_json();
  auto card =
      billing::rate_card_for_period(tx, a.rate_card_id, billing::month_containing(api.env().now()));
  if (!card && card.error().code != ErrorCode::kNotFound &&
      card.error().code != ErrorCode::kInvalidArgument && card.error().code != ErrorCode::kConflict)
    return fail(card.error());
  body["rate_card_in_force"] = card.has_value();
  if (card) body["currency"] = card->currency;
  if (!card) body["warning"] = card.error().message + ": this tenant's usage cannot be invoiced";
  return body;
}

Result<Reply> get_account(Api& api, Call& call, store::Tx& tx) {
  auto a = GP_TRY(billing::load_account(tx, call.tenant->id));
  return json_reply(200, GP_TRY(account_json(api, tx, a)), a.version);
}

Result<Mutation> put_account(Api& api, Call& call, store::Tx& tx) {
  auto before = GP_TRY(billing::load_account(tx, call.tenant->id));
  GP_TRY_VOID(check_if_match(call, before.version));
  auto next = GP_TRY(billing::apply_account_update(before, *call.body));
  if (GP_TRY(billing::load_rate_card_versions(tx, next.rate_card_id)).empty()) {
    return fail(Error::invalid(
        fmt::format("field 'rate_card': no rate card '{}' is published (POST /v1/rate-cards)",
                    next.rate_card_id)));
  }
  auto saved = GP_TRY(billing::save_account(tx, next, call.who.id, api.env().now()));
  Mutation m;
  m.reply = json_reply(200, GP_TRY(account_json(api, tx, saved)), saved.version);
  m.detail = {{"rate_card", saved.rate_card_id},
              {"tax_bps", saved.tax_bps},
              {"prepaid_credit_micros", saved.prepaid_credit_micros},
              {"previous_prepaid_credit_micros", before.prepaid_credit_micros},
              {"version", saved.version}};
  return m;
}

Result<Mutation> draft_invoice(Api& api, Call& call, store::Tx& tx) {
  auto period = GP_TRY(billing::parse_period_body(*call.body));
  const auto offerings = GP_TRY(alloc::offering_names(tx));
  const auto credits = GP_TRY(tenant_sla_credits(api, tx, call.tenant->id, period, offerings));
  auto r = GP_TRY(billing::refresh_draft(tx, api.env(), call.tenant->id, period, call.who.id,
                                         offerings, credits));
  Mutation m;
  m.reply = json_reply(r.outcome == billing::DraftOutcome::kRefreshed ? 200 : 201,
                       r.stored.to_json(), r.stored.version);
  m.resource = invoice_path(call.tenant->id, r.stored.id);
  m.detail = {{"id", r.stored.id},
              {"label", r.stored.invoice.id},
              {"outcome", billing::draft_outcome_name(r.outcome)},
              {"period", billing::period_label(period)},
              {"revision", r.stored.invoice.revision},
              {"total_micros", r.stored.invoice.total_micros},
              {"currency", r.stored.invoice.currency}};
  if (!r.stored.supersedes_id.empty()) m.detail["supersedes"] = r.stored.supersedes_id;
  return m;
}

Result<billing::InvoiceFilter> filter_from_query(const Call& call) {
  billing::InvoiceFilter f;
  if (auto p = call.req.query.find("period"); p != call.req.query.end())
    f.period = GP_TRY(billing::parse_month(p->second));
  if (auto s = call.req.query.find("state"); s != call.req.query.end()) {
    for (auto st : {billing::InvoiceState::kDraft, billing::InvoiceState::kFinalized,
                    billing::InvoiceState::kVoid})
      if (billing::invoice_state_name(st) == s->second) f.state = st;
    if (!f.state) return fail(Error::invalid("state must be draft, finalized or void"));
  }
  return f;
}

Result<Reply> list_tenant_invoices(Api& api, Call& call, store::Tx& tx) {
  auto f = GP_TRY(filter_from_query(call));
  f.tenant_id = call.tenant->id;
  auto page = GP_TRY(billing::list_invoices(tx, f, GP_TRY(page_request(api, call))));
  return json_reply(200, page_json(page, [](const auto& s) { return s.summary_json(); }));
}

Result<Reply> list_all_invoices(Api& api, Call& call, store::Tx& tx) {
  auto f = GP_TRY(filter_from_query(call));
  if (auto t = call.req.query.find("tenant"); t != call.req.query.end())
    f.tenant_id = GP_TRY(found(tenancy::find_tenant(tx, t->second), "tenant")).id;
  auto page = GP_TRY(billing::list_invoices(tx, f, GP_TRY(page_request(api, call))));
  return json_reply(200, page_json(page, [](const auto& s) { return s.summary_json(); }));
}

enum class Format { kJson, kCsv, kHtml };

// ?format= wins; else the Accept header (text/csv, text/html); else JSON.
Result<Format> wanted_format(const Call& call) {
  if (auto f = call.req.query.find("format"); f != call.req.query.end()) {
    if (f->second == "json") return Format::kJson;
    if (f->second == "csv") return Format::kCsv;
    if (f->second == "html") return Format::kHtml;
    return fail(Error::invalid("format must be json, csv or html"));
  }
  if (auto a = call.req.header("accept")) {
    if (a->find("text/csv") != std::string_view::npos) return Format::kCsv;
    if (a->find("text/html") != std::string_view::npos) return Format::kHtml;
  }
  return Format::kJson;
}

// A file name made of the label's safe characters: acme-2026-11-r2.
std::string file_stem(const billing::Invoice& inv) {
  std::string out;
  for (char c :
       fmt::format("{}-{}-r{}", inv.tenant, billing::period_label(inv.period), inv.revision)) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_';
    out.push_back(safe ? c : '-');
  }
  return "invoice-" + out;
}

Result<Reply> get_invoice(Api&, Call& call, store::Tx& tx) {
  const Format format = GP_TRY(wanted_format(call));
  auto s =
      GP_TRY(found(billing::find_invoice(tx, call.tenant->id, call.param("invoice")), "invoice"));
  if (format == Format::kJson) return json_reply(200, s.to_json(), s.version);
  Reply r;
  r.etag_version = s.version;
  if (format == Format::kCsv) {
    r.raw = billing::invoice_to_csv(s.invoice);
    r.content_type = "text/csv; charset=utf-8";
    r.headers.emplace_back("Content-Disposition",
                           fmt::format("attachment; filename=\"{}.csv\"", file_stem(s.invoice)));
  } else {
    r.raw = billing::invoice_to_html(s.invoice);
    r.content_type = "text/html; charset=utf-8";
    r.headers.emplace_back("Content-Disposition",
                           fmt::format("inline; filename=\"{}.html\"", file_stem(s.invoice)));
    // The page is self-contained: no scripts, no external resources, inline styles only.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'none'; style-src 'unsafe-inline'");
  }
  return r;
}

Mutation invoice_mutation(const billing::StoredInvoice& s) {
  Mutation m;
  m.reply = json_reply(200, s.to_json(), s.version);
  m.resource = invoice_path(s.invoice.tenant, s.id);
  m.detail = {{"id", s.id},
              {"label", s.invoice.id},
              {"state", billing::invoice_state_name(s.invoice.state)},
              {"total_micros", s.invoice.total_micros},
              {"prepaid_applied_micros", s.invoice.prepaid_applied_micros},
              {"currency", s.invoice.currency}};
  return m;
}

Result<Mutation> finalize(Api& api, Call& call, store::Tx& tx) {
  auto s = GP_TRY(billing::finalize_stored(tx, call.tenant->id, call.param("invoice"), call.who.id,
                                           api.env().now()));
  return invoice_mutation(s);
}

Result<Mutation> void_invoice(Api& api, Call& call, store::Tx& tx) {
  auto rd = body_reader(call, "void request");
  std::string reason = rd.string("reason", 500);
  GP_TRY_VOID(rd.finish());
  auto s = GP_TRY(billing::void_stored(tx, call.tenant->id, call.param("invoice"), reason,
                                       call.who.id, api.env().now()));
  Mutation m = invoice_mutation(s);
  m.detail["reason"] = reason;
  return m;
}

Result<Reply> verify(Api& api, Call& call, store::Tx& tx) {
  auto v = GP_TRY(billing::verify_invoice(tx, call.tenant->id, call.param("invoice"),
                                          api.env().now(), GP_TRY(alloc::offering_names(tx))));
  return json_reply(200, v.to_json());
}

Result<Mutation> run(Api& api, Call& call, store::Tx& tx) {
  auto period = GP_TRY(billing::parse_period_body(*call.body));
  const auto offerings = GP_TRY(alloc::offering_names(tx));
  const auto credits = GP_TRY(sla_credits(api, tx, "", period, offerings));
  auto report = GP_TRY(billing::run_period(tx, api.env(), period, call.who.id, offerings, credits));
  Json body = report.to_json();
  Mutation m;
  m.reply = json_reply(200, body);
  m.resource = "/v1/invoices";
  m.detail = {{"period", body["period"]},     {"drafts", body["drafts"]},
              {"created", body["created"]},   {"refreshed", body["refreshed"]},
              {"reissued", body["reissued"]}, {"finalized_unchanged", body["finalized_unchanged"]}};
  return m;
}

const std::vector<std::string> kListParams = {"limit", "after", "period", "state"};

}  // namespace

Result<Json> draft_final_invoice(Api& api, store::Tx& tx, const tenancy::Tenant& t,
                                 const std::string& who) {
  const billing::Period period = billing::month_containing(api.env().now());
  const auto offerings = GP_TRY(alloc::offering_names(tx));
  const auto credits = GP_TRY(tenant_sla_credits(api, tx, t.id, period, offerings));
  auto r = billing::refresh_draft(tx, api.env(), t.id, period, who, offerings, credits);
  if (!r) {
    // Rating fails before anything is written (no card in force, an overlapping invoice).
    if (r.error().code == ErrorCode::kInternal || r.error().code == ErrorCode::kUnavailable)
      return fail(r.error());
    return Json{{"period", billing::period_label(period)}, {"not_produced", r.error().message}};
  }
  return Json{{"id", r->stored.id},
              {"period", billing::period_label(period)},
              {"total_micros", r->stored.invoice.total_micros},
              {"currency", r->stored.invoice.currency}};
}

std::vector<Route> invoice_routes() {
  std::vector<Route> r;
  const std::string tenant_invoices = "/v1/tenants/{tenant}/invoices";
  const std::string one = tenant_invoices + "/{invoice}";
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/billing-account",
               .action = "billing_account.get",
               .permission = Permission::kBillingRead,
               .handler = read_tx(get_account),
               .summary = "The tenant's billing account: rate card, tax rate, prepaid credit "
                          "balance (the defaults when none is stored).",
               .response_schema = "BillingAccount"});
  r.push_back({.method = "PUT",
               .pattern = "/v1/tenants/{tenant}/billing-account",
               .action = "billing_account.update",
               .permission = Permission::kBillingWrite,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(put_account),
               .summary = "Set the tenant's rate card, tax rate or prepaid credit balance "
                          "(operators; fields not given keep their value).",
               .request_schema = "BillingAccountUpdate",
               .response_schema = "BillingAccount"});
  r.push_back({.method = "POST",
               .pattern = tenant_invoices,
               .action = "invoice.draft",
               .permission = Permission::kBillingWrite,
               .mutation = true,
               .handler = write_tx(draft_invoice),
               .summary = "Rate the tenant's metered usage into its draft invoice for a calendar "
                          "month ({\"period\": \"YYYY-MM\"}) or an on-demand period ({\"start\", "
                          "\"end\"}): 201 with a new draft (or the next revision after a void), "
                          "200 when the draft was re-rated; 409 when the period is finalized.",
               .request_schema = "InvoiceRequest",
               .response_schema = "Invoice",
               .success_status = 201,
               .other_success_status = 200});  // the draft re-rated
  r.push_back({.method = "GET",
               .pattern = tenant_invoices,
               .action = "invoice.list",
               .permission = Permission::kBillingRead,
               .handler = read_tx(list_tenant_invoices),
               .query_params = kListParams,
               .summary = "The tenant's invoices (every revision), oldest first; ?period=YYYY-MM, "
                          "?state=draft|finalized|void.",
               .response_schema = "InvoiceSummary[]"});
  r.push_back({.method = "GET",
               .pattern = one,
               .action = "invoice.get",
               .permission = Permission::kBillingRead,
               .handler = read_tx(get_invoice),
               .query_params = {"format"},
               .summary = "One invoice: JSON, CSV (?format=csv or Accept: text/csv) or a "
                          "printable HTML page (?format=html or Accept: text/html).",
               .response_schema = "Invoice"});
  r.push_back({.method = "POST",
               .pattern = one + "/finalize",
               .action = "invoice.finalize",
               .permission = Permission::kBillingWrite,
               .mutation = true,
               .handler = write_tx(finalize),
               .summary = "Finalize a draft once its period has ended and it was rated after the "
                          "end: immutable from then on; the prepaid credit it applies leaves the "
                          "account's balance.",
               .response_schema = "Invoice"});
  r.push_back({.method = "POST",
               .pattern = one + "/void",
               .action = "invoice.void",
               .permission = Permission::kBillingWrite,
               .mutation = true,
               .handler = write_tx(void_invoice),
               .summary = "Void a draft or a finalized invoice with a reason; a finalized one's "
                          "prepaid credit returns to the account. The next draft for the period "
                          "is its next revision; a voided draft frees the period for an "
                          "on-demand invoice inside it.",
               .request_schema = "InvoiceVoid",
               .response_schema = "Invoice"});
  r.push_back({.method = "GET",
               .pattern = one + "/verify",
               .action = "invoice.verify",
               .permission = Permission::kBillingRead,
               .handler = read_tx(verify),
               .summary = "Recompute an invoice from raw usage with the rate card version it "
                          "names (a draft with the usage known when it was rated); compares "
                          "every total to the micro-unit.",
               .response_schema = "InvoiceVerification"});
  r.push_back({.method = "POST",
               .pattern = "/v1/invoices/run",
               .action = "invoice.run",
               .permission = Permission::kBillingWrite,
               .mutation = true,
               .handler = write_tx(run),
               .summary = "Draft the invoices of a period for every tenant with metered usage "
                          "or a billing account (operators); finalized ones stay as they are.",
               .request_schema = "InvoiceRequest",
               .response_schema = "InvoiceRun"});
  std::vector<std::string> all_params = kListParams;
  all_params.push_back("tenant");
  r.push_back({.method = "GET",
               .pattern = "/v1/invoices",
               .action = "invoice.list_all",
               .permission = Permission::kBillingRead,
               .handler = read_tx(list_all_invoices),
               .query_params = all_params,
               .summary = "Invoices across every tenant (operators); ?period=YYYY-MM, ?state=, "
                          "?tenant=.",
               .response_schema = "InvoiceSummary[]"});
  return r;
}

}  // namespace gp::api
