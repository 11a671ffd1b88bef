// Billing commands: rate cards, billing accounts and invoices through the API, and an offline
// invoice preview that rates a JSON file of usage records with a rate card file through
// gp_billing (no server needed).
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "billing/billing.h"
#include "cli/client.h"

namespace gp::cli {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "error: cannot read " << path << "\n";
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<Json> read_json(const std::string& path) {
  auto text = read_text(path);
  if (!text) return std::nullopt;
  auto j = parse_json(*text);
  if (!j) {
    std::cerr << "error: " << path << ": " << j.error().message << "\n";
    return std::nullopt;
  }
  return *j;
}

void add_ratecard(CLI::App& app, ClientConfig& c, int* rc) {
  auto* rcmd = app.add_subcommand("ratecard", "Rate cards (prices), published as versions");
  rcmd->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  auto* create = rcmd->add_subcommand("create", "Publish a rate card (a new version of its id)");
  create->add_option("file", *file, "Rate card JSON (docs/billing.md)")->required();
  create->callback([&c, file, rc] {
    auto body = read_json(*file);
    std::optional<Json> r;
    if (body) r = call(c, "POST", "/v1/rate-cards", *body);
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json") {
      print(c, *r, {});
      return;
    }
    std::cout << fmt::format("rate card {} version {} published ({}, effective {}, {} prices)\n",
                             r->value("id", ""), cell(r->value("version", Json(nullptr))),
                             r->value("currency", ""), r->value("effective_from", ""),
                             r->value("prices", Json::array()).size());
    for (const auto& w : r->value("warnings", Json::array()))
      std::cerr << "warning: " << w.get<std::string>() << "\n";
  });
  auto* list = rcmd->add_subcommand("list", "The latest version of every rate card");
  list->callback([&c, rc] {
    auto r = call(c, "GET", "/v1/rate-cards");
    if (r) print(c, *r, {"id", "version", "currency", "effective_from", "created_by"});
    if (!r) *rc = 1;
  });
  auto id = std::make_shared<std::string>();
  auto* show = rcmd->add_subcommand("show", "Every version of one rate card");
  show->add_option("id", *id, "Rate card id")->required();
  show->callback([&c, id, rc] {
    auto r = call(c, "GET", "/v1/rate-cards/" + url_encode(*id));
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json") {
      std::cout << r->dump(2) << "\n";
      return;
    }
    std::vector<Json> rows;
    for (const auto& v : (*r)["versions"]) {
      Json row = v;
      row["prices"] = v["prices"].size();
      rows.push_back(row);
    }
    print_table(rows, {"version", "currency", "effective_from", "spot_discount_bps",
                       "committed_discount_bps", "prices", "created_by", "created_at"});
  });
}

struct PreviewOptions {
  std::string rate_card, usage, tenant, month, format = "table";
  int64_t tax_bps = 0;
  int64_t prepaid_micros = 0;
};

// Rates the usage file offline and prints the invoices; returns the exit status.
int preview(const PreviewOptions& o) {
  auto card_text = read_text(o.rate_card);
  if (!card_text) return 1;
  auto card = billing::parse_rate_card_text(*card_text);
  if (!card) {
    std::cerr << "error: " << o.rate_card << ": " << card.error().message << "\n";
    return 1;
  }
  auto usage_json = read_json(o.usage);
  if (!usage_json) return 1;
  auto usage = billing::parse_usage_records(*usage_json);
  if (!usage) {
    std::cerr << "error: " << o.usage << ": " << usage.error().message << "\n";
    return 1;
  }
  billing::Period period;
  if (!o.month.empty()) {
    int y = 0, m = 0;
    char dash = 0;
    std::istringstream in(o.month);
    if (!(in >> y >> dash >> m) || dash != '-' || !in.eof()) {
      std::cerr << "error: --month must be YYYY-MM\n";
      return 1;
    }
    auto p = billing::month_period(y, m);
    if (!p) {
      std::cerr << "error: --month: " << p.error().message << "\n";
      return 1;
    }
    period = *p;
  } else if (!usage->empty()) {
    int64_t first = usage->front().start_us;
    for (const auto& r : *usage) first = std::min(first, r.start_us);
    period = billing::month_containing(first);
  } else {
    std::cerr << "error: no usage records and no --month\n";
    return 1;
  }
  std::vector<billing::TenantAccount> accounts;
  std::vector<billing::UsageRecord> records;
  for (const auto& r : *usage) {
    if (o.tenant.empty() || r.tenant == o.tenant) records.push_back(r);
  }
  if (!o.tenant.empty()) {
    accounts.push_back({o.tenant, int32_t(o.tax_bps), o.prepaid_micros});
  } else {
    std::set<std::string> tenants;
    for (const auto& r : records) tenants.insert(r.tenant);
    for (const auto& t : tenants) accounts.push_back({t, int32_t(o.tax_bps), o.prepaid_micros});
  }
  auto invoices = billing::run_invoices(*card, period, records, accounts);
  if (!invoices) {
    std::cerr << "error: " << invoices.error().message << "\n";
    return 1;
  }
  if (o.format == "json") {
    Json out = Json::array();
    for (const auto& inv : *invoices) out.push_back(billing::invoice_to_json(inv));
    std::cout << (out.size() == 1 ? out[0] : out).dump(2) << "\n";
  } else if (o.format == "csv") {
    for (size_t i = 0; i < invoices->size(); ++i) {
      if (invoices->size() > 1) std::cout << (i ? "\n" : "") << "# " << (*invoices)[i].id << "\n";
      std::cout << billing::invoice_to_csv((*invoices)[i]);
    }
  } else if (o.format == "html") {
    for (const auto& inv : *invoices) std::cout << billing::invoice_to_html(inv);
  } else {
    std::vector<Json> rows;
    for (const auto& inv : *invoices) {
      rows.push_back({{"invoice", inv.id},
                      {"rate_card", fmt::format("{} v{}", inv.rate_card_id, inv.rate_card_version)},
                      {"lines", inv.lines.size()},
                      {"subtotal", billing::format_micros(inv.subtotal_micros)},
                      {"tax", billing::format_micros(inv.tax_micros)},
                      {"prepaid", billing::format_micros(inv.prepaid_applied_micros)},
                      {"total", billing::format_micros(inv.total_micros)},
                      {"currency", inv.currency}});
    }
    print_table(
        rows, {"invoice", "rate_card", "lines", "subtotal", "tax", "prepaid", "total", "currency"});
  }
  return 0;
}

// Writes `text` to `path` (or stdout when empty); false after printing the error.
bool emit(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << text;
    if (!text.empty() && text.back() != '\n') std::cout << "\n";
    return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) {
    std::cerr << "error: cannot write " << path << "\n";
    return false;
  }
  std::cerr << "wrote " << path << "\n";
  return true;
}

std::string money(const Json& micros) {
  return micros.is_number_integer() ? billing::format_micros(micros.get<int64_t>()) : cell(micros);
}

// The totals every invoice carries, as a person reads them and as the JSON names them.
const std::vector<std::pair<std::string, std::string>> kInvoiceTotals = {
    {"subtotal", "subtotal_micros"},
    {"SLA credits", "sla_credit_micros"},
    {"tax", "tax_micros"},
    {"prepaid applied", "prepaid_applied_micros"},
    {"total", "total_micros"}};

// Money as the CLI shows it: with the currency when the answer names one.
std::string money_in(const Json& micros, const Json& currency) {
  if (!micros.is_number_integer()) return cell(micros);
  return billing::format_money(micros.get<int64_t>(),
                               currency.is_string() ? currency.get<std::string>() : "");
}

// 5000 basis points read "50%", 1250 "12.5%".
std::string percent_of_bps(const Json& bps) {
  return bps.is_number() ? cell(Json(bps.get<double>() / 100.0)) + "%" : cell(bps);
}

// An invoice as a person reads one: number, who it is for, dates, then its lines described and
// the totals in its currency.
void print_invoice(const Json& j) {
  const Json currency = j.value("currency", Json(nullptr));
  const Json number = j.value("number", Json(nullptr));
  std::cout << fmt::format(
      "invoice   {} ({}{})\n", number.is_string() ? number.get<std::string>() : "not issued yet",
      j.value("id", ""), j.contains("label") ? ", " + j.value("label", "") : std::string());
  const Json bill_to = j.value("bill_to", Json::object());
  std::string name = bill_to.value("name", "");
  if (name.empty()) name = j.value("tenant", "");
  const std::string legal = bill_to.value("legal_name", "");
  std::cout << fmt::format("bill to   {}\n", legal.empty() ? name : legal + " (" + name + ")");
  std::istringstream address(bill_to.value("address", ""));
  for (std::string line; std::getline(address, line);) std::cout << "          " << line << "\n";
  std::cout << fmt::format("state     {} (revision {})\n", j.value("state", ""),
                           cell(j.value("revision", Json(nullptr))));
  if (j.contains("finalized_at"))
    std::cout << fmt::format(
        "issued    {}   due {} (net {} days)\n", j.value("finalized_at", "").substr(0, 10),
        j.value("due_at", "-").substr(0, 10), cell(j.value("payment_terms_days", Json(nullptr))));
  std::cout << fmt::format("period    {} .. {}\n", j["period"].value("start", ""),
                           j["period"].value("end", ""));
  std::cout << fmt::format("rate card {} v{}   currency {}\n", j["rate_card"].value("id", ""),
                           cell(j["rate_card"].value("version", Json(nullptr))),
                           j.value("currency", ""));
  if (j.contains("supersedes"))
    std::cout << fmt::format("supersedes {} ({})\n", j.value("supersedes", ""),
                             j.value("supersedes_label", ""));
  if (j.contains("void_reason"))
    std::cout << fmt::format("void      {}\n", j.value("void_reason", ""));
  std::vector<Json> rows;
  for (const auto& l : j["lines"]) {
    rows.push_back({{"description", l.value("description", l.value("resource_key", ""))},
                    {"unit-hours", l["quantity_unit_hours"]},
                    {"unit price", money(l["unit_price_micros"])},
                    {"discount", money(l["discount_micros"])},
                    {"amount", money(l["amount_micros"])}});
  }
  std::cout << "\n";
  if (rows.empty()) {
    std::cout << "(no usage in this period)\n";
  } else {
    print_table(rows, {"description", "unit-hours", "unit price", "discount", "amount"});
  }
  std::cout << "\n";
  for (const auto& [label, key] : kInvoiceTotals)
    std::cout << fmt::format("{:<16} {:>24}\n", label,
                             money_in(j.value(key, Json(nullptr)), currency));
}

// A command's answer that is one invoice: JSON with --output json, else print_invoice.
void show_invoice(const ClientConfig& c, const std::optional<Json>& r, int* rc) {
  if (!r) {
    *rc = 1;
  } else if (c.output == "json") {
    std::cout << r->dump(2) << "\n";
  } else {
    print_invoice(*r);
  }
}

std::string tenant_invoices(const std::string& tenant) {
  return "/v1/tenants/" + url_encode(tenant) + "/invoices";
}

Json period_body(const std::string& period, const std::string& start, const std::string& end) {
  Json b = Json::object();
  if (!period.empty()) b["period"] = period;
  if (!start.empty()) b["start"] = start;
  if (!end.empty()) b["end"] = end;
  return b;
}

const std::vector<std::string> kSummaryCols = {"number", "id",    "tenant_name", "period",
                                               "state",  "lines", "total",       "currency"};

struct InvoiceArgs {
  std::string tenant, id, period, start, end, state, format = "table", out, reason, after;
};

void add_invoice_api(CLI::App* inv, ClientConfig& c, int* rc) {
  auto a = std::make_shared<InvoiceArgs>();
  auto* create = inv->add_subcommand(
      "create", "Rate a tenant's metered usage into its draft for a month or a period");
  create->add_option("tenant", a->tenant, "Tenant name or id")->required();
  create->add_option("--period", a->period, "Calendar month YYYY-MM (UTC)");
  create->add_option("--start", a->start, "On-demand period start (RFC 3339)");
  create->add_option("--end", a->end, "On-demand period end (RFC 3339)");
  create->callback([&c, a, rc] {
    auto r = call(c, "POST", tenant_invoices(a->tenant), period_body(a->period, a->start, a->end));
    show_invoice(c, r, rc);
  });

  auto* list = inv->add_subcommand(
      "list", "A tenant's invoices, or every tenant's (operators) without TENANT");
  list->add_option("tenant", a->tenant, "Tenant name or id");
  list->add_option("--period", a->period, "Calendar month YYYY-MM");
  list->add_option("--state", a->state, "draft, finalized or void")
      ->check(CLI::IsMember({"draft", "finalized", "void"}));
  list->add_option("--after", a->after, "Cursor from the previous page");
  list->callback([&c, a, rc] {
    std::string target = a->tenant.empty() ? "/v1/invoices" : tenant_invoices(a->tenant);
    std::vector<std::string> q;
    if (!a->period.empty()) q.push_back("period=" + url_encode(a->period));
    if (!a->state.empty()) q.push_back("state=" + url_encode(a->state));
    if (!a->after.empty()) q.push_back("after=" + url_encode(a->after));
    for (size_t i = 0; i < q.size(); ++i) target += (i == 0 ? "?" : "&") + q[i];
    auto r = call(c, "GET", target);
    if (!r) {
      *rc = 1;
      return;
    }
    std::vector<std::string> cols = kSummaryCols;
    if (a->tenant.empty()) cols.insert(cols.begin() + 2, "tenant");
    print(c, *r, cols);
  });

  auto* get = inv->add_subcommand("get", "One invoice: a table, JSON, CSV or printable HTML");
  get->add_option("tenant", a->tenant, "Tenant name or id")->required();
  get->add_option("id", a->id, "Invoice id (inv_...)")->required();
  get->add_option("--format", a->format, "table, json, csv or html")
      ->check(CLI::IsMember({"table", "json", "csv", "html"}));
  get->add_option("--out,-o", a->out, "Write to this file instead of stdout");
  get->callback([&c, a, rc] {
    std::string target = tenant_invoices(a->tenant) + "/" + url_encode(a->id);
    const bool table = a->format == "table" && c.output != "json";
    if (!table) target += "?format=" + (a->format == "table" ? std::string("json") : a->format);
    auto r = call(c, "GET", target);
    if (!r) {
      *rc = 1;
      return;
    }
    if (table && a->out.empty()) {
      print_invoice(*r);
      return;
    }
    std::string text = r->is_string() ? r->get<std::string>() : r->dump(2) + "\n";
    if (!emit(text, a->out)) *rc = 1;
  });

  auto* fin = inv->add_subcommand(
      "finalize", "Finalize a draft (immutable; applies the tenant's prepaid credit)");
  fin->add_option("tenant", a->tenant, "Tenant name or id")->required();
  fin->add_option("id", a->id, "Invoice id")->required();
  fin->callback([&c, a, rc] {
    auto r = call(c, "POST", tenant_invoices(a->tenant) + "/" + url_encode(a->id) + "/finalize");
    show_invoice(c, r, rc);
  });

  auto* vd = inv->add_subcommand(
      "void", "Void a draft or a finalized invoice (the period can be re-issued)");
  vd->add_option("tenant", a->tenant, "Tenant name or id")->required();
  vd->add_option("id", a->id, "Invoice id")->required();
  vd->add_option("--reason", a->reason, "Why (kept on the invoice and in the audit trail)")
      ->required();
  vd->callback([&c, a, rc] {
    auto r = call(c, "POST", tenant_invoices(a->tenant) + "/" + url_encode(a->id) + "/void",
                  {{"reason", a->reason}});
    show_invoice(c, r, rc);
  });

  auto* ver = inv->add_subcommand(
      "verify", "Recompute an invoice (a draft as rated) from raw usage; exit 1 unless it matches");
  ver->add_option("tenant", a->tenant, "Tenant name or id")->required();
  ver->add_option("id", a->id, "Invoice id")->required();
  ver->callback([&c, a, rc] {
    auto r = call(c, "GET", tenant_invoices(a->tenant) + "/" + url_encode(a->id) + "/verify");
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json") {
      std::cout << r->dump(2) << "\n";
    } else {
      std::cout << fmt::format(
          "{} ({}): {}\n", r->value("id", ""), r->value("label", ""),
          r->value("matches", false) ? "matches raw usage" : "DIFFERS from raw usage");
      std::vector<Json> rows;
      rows.reserve(kInvoiceTotals.size());
      const std::string currency = r->value("currency", "");
      for (const auto& [label, k] : kInvoiceTotals) {
        rows.push_back(
            {{"total", currency.empty() ? label : fmt::format("{} ({})", label, currency)},
             {"stored", money((*r)["stored"].value(k, Json(nullptr)))},
             {"recomputed", money((*r)["recomputed"].value(k, Json(nullptr)))}});
      }
      print_table(rows, {"total", "stored", "recomputed"});
      for (const auto& d : (*r)["differences"]) std::cout << "difference: " << cell(d) << "\n";
    }
    if (!r->value("matches", false)) *rc = 1;
  });

  auto* run = inv->add_subcommand("run", "Draft the invoices of a month for every tenant");
  run->add_option("--period", a->period, "Calendar month YYYY-MM (UTC)")->required();
  run->callback([&c, a, rc] {
    auto r = call(c, "POST", "/v1/invoices/run", period_body(a->period, "", ""));
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json") {
      std::cout << r->dump(2) << "\n";
      return;
    }
    std::cout << fmt::format(
        "{}: {} drafts ({} created, {} refreshed, {} re-issued), {} finalized unchanged\n",
        r->value("period", ""), cell((*r)["drafts"]), cell((*r)["created"]),
        cell((*r)["refreshed"]), cell((*r)["reissued"]), cell((*r)["finalized_unchanged"]));
    std::vector<Json> rows((*r)["items"].begin(), (*r)["items"].end());
    print_table(rows, {"tenant", "id", "label", "outcome", "state", "total", "currency"});
  });
}

// "12.5" (currency units, at most six decimals) in micro-units; nullopt when malformed.
std::optional<int64_t> parse_units(std::string_view s, int decimals, int64_t scale) {
  if (s.empty() || s.size() > 24) return std::nullopt;
  int64_t whole = 0, frac = 0;
  int digits = 0;
  bool dot = false;
  for (char ch : s) {
    if (ch == '.' && !dot) {
      dot = true;
      continue;
    }
    if (ch < '0' || ch > '9') return std::nullopt;
    if (dot) {
      if (++digits > decimals) return std::nullopt;
      frac = frac * 10 + (ch - '0');
    } else {
      if (whole > (INT64_MAX / scale - 9) / 10) return std::nullopt;
      whole = whole * 10 + (ch - '0');
    }
  }
  if (s.back() == '.' || s.front() == '.') return std::nullopt;
  for (int i = digits; i < decimals; ++i) frac *= 10;
  return whole * scale + frac;
}

// A billing account as a person reads it: percent and money in the card's currency.
Json account_view(const Json& a) {
  const Json currency = a.value("currency", Json(nullptr));
  Json v = {
      {"tenant", a.value("tenant_id", "")},
      {"rate card", a.value("rate_card", "")},
      {"rate card in force", a.value("rate_card_in_force", false) ? "yes" : "no"},
      {"tax", percent_of_bps(a.value("tax_bps", Json(nullptr)))},
      {"prepaid credit", money_in(a.value("prepaid_credit_micros", Json(nullptr)), currency)},
      {"legal name", a.value("legal_name", "")},
      {"billing address", a.value("billing_address", "")},
      {"payment terms", fmt::format("net {} days", cell(a.value("payment_terms_days", Json(30))))}};
  if (a.contains("warning")) v["warning"] = a["warning"];
  return v;
}

void add_billing_account(CLI::App& app, ClientConfig& c, int* rc) {
  auto* acc = app.add_subcommand("billing-account", "A tenant's rate card, tax rate and prepaid");
  acc->require_subcommand(1);
  auto tenant = std::make_shared<std::string>();
  auto* get = acc->add_subcommand("get", "Show a tenant's billing account");
  get->add_option("tenant", *tenant, "Tenant name or id")->required();
  get->callback([&c, tenant, rc] {
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(*tenant) + "/billing-account");
    if (r) print(c, c.output == "json" ? *r : account_view(*r), {});
    if (!r) *rc = 1;
  });
  auto body = std::make_shared<Json>(Json::object());
  auto* set = acc->add_subcommand("set", "Set a tenant's billing account (operators)");
  set->add_option("tenant", *tenant, "Tenant name or id")->required();
  field<std::string>(set, body, "--rate-card", "rate_card", "Rate card id");
  auto tax = std::make_shared<std::string>();
  auto prepaid = std::make_shared<std::string>();
  set->add_option("--tax", *tax, "Tax rate in percent, e.g. 8.25");
  set->add_option("--prepaid", *prepaid,
                  "Prepaid credit balance in currency units, e.g. 500.00 (replaces the balance)");
  // The API's units, kept for scripts written against them.
  field<int64_t>(set, body, "--tax-bps", "tax_bps", "Tax rate in basis points")->group("");
  field<int64_t>(set, body, "--prepaid-micros", "prepaid_credit_micros",
                 "Prepaid credit balance in micro-units")
      ->group("");
  field<std::string>(set, body, "--legal-name", "legal_name",
                     "Legal name invoices are addressed to");
  field<std::string>(set, body, "--address", "billing_address",
                     "Billing address printed on invoices (\\n between lines)");
  field<int64_t>(set, body, "--payment-terms", "payment_terms_days",
                 "Days from an invoice's issue to its due date (default 30)");
  set->callback([&c, tenant, body, tax, prepaid, rc] {
    if (!tax->empty()) {
      auto bps = parse_units(*tax, 2, 100);
      if (!bps) {
        std::cerr << "error: --tax must be a percentage with at most two decimals, e.g. 8.25\n";
        *rc = 1;
        return;
      }
      (*body)["tax_bps"] = *bps;
    }
    if (!prepaid->empty()) {
      auto micros = parse_units(*prepaid, 6, 1'000'000);
      if (!micros) {
        std::cerr << "error: --prepaid must be an amount with at most six decimals, e.g. 500.00\n";
        *rc = 1;
        return;
      }
      (*body)["prepaid_credit_micros"] = *micros;
    }
    // "\n" typed on a command line means a new line of the address.
    if (body->contains("billing_address")) {
      std::string address = (*body)["billing_address"];
      for (size_t at = address.find("\\n"); at != std::string::npos; at = address.find("\\n", at))
        address.replace(at, 2, "\n");
      (*body)["billing_address"] = address;
    }
    auto r = call(c, "PUT", "/v1/tenants/" + url_encode(*tenant) + "/billing-account", *body);
    if (r) print(c, c.output == "json" ? *r : account_view(*r), {});
    if (!r) *rc = 1;
  });
}

void add_invoice(CLI::App& app, ClientConfig& c, int* rc) {
  auto* inv = app.add_subcommand("invoice", "Invoices");
  inv->require_subcommand(1);
  add_invoice_api(inv, c, rc);
  auto o = std::make_shared<PreviewOptions>();
  auto* pv = inv->add_subcommand(
      "preview", "Rate a JSON file of usage records with a rate card file, offline (no server)");
  pv->add_option("--rate-card", o->rate_card, "Rate card JSON file")->required();
  pv->add_option("--usage", o->usage, "Usage records: a JSON array or {\"records\": [...]}")
      ->required();
  pv->add_option("--tenant", o->tenant, "Only this tenant (default: one invoice per tenant)");
  pv->add_option("--month", o->month, "Billing month YYYY-MM (UTC; default: the first record's)");
  auto tax = std::make_shared<std::string>();
  auto prepaid = std::make_shared<std::string>();
  pv->add_option("--tax", *tax, "Tax rate in percent, e.g. 8.25");
  pv->add_option("--prepaid", *prepaid, "Prepaid credit balance in currency units, e.g. 500.00");
  // The API's units, kept for scripts written against them.
  pv->add_option("--tax-bps", o->tax_bps, "Tax rate in basis points")
      ->check(CLI::Range(0, 10000))
      ->group("");
  pv->add_option("--prepaid-micros", o->prepaid_micros, "Prepaid credit balance (micro-units)")
      ->check(CLI::Range(int64_t(0), INT64_MAX))
      ->group("");
  pv->add_option("--format", o->format, "table, json, csv or html")
      ->check(CLI::IsMember({"table", "json", "csv", "html"}));
  pv->callback([o, tax, prepaid, rc] {
    auto bps = tax->empty() ? std::optional<int64_t>(o->tax_bps) : parse_units(*tax, 2, 100);
    auto micros = prepaid->empty() ? std::optional<int64_t>(o->prepaid_micros)
                                   : parse_units(*prepaid, 6, 1'000'000);
    if (!bps || *bps > 10000 || !micros) {
      std::cerr << fmt::format("error: {}\n", !bps || *bps > 10000
                                                  ? "--tax must be a percentage (0-100, at most "
                                                    "two decimals), e.g. 8.25"
                                                  : "--prepaid must be an amount with at most six "
                                                    "decimals, e.g. 500.00");
      *rc = 1;
      return;
    }
    o->tax_bps = *bps;
    o->prepaid_micros = *micros;
    *rc = preview(*o);
  });
}

std::string budget_target(const std::string& tenant, const std::string& project) {
  return "/v1/tenants/" + url_encode(tenant) + "/budgets/" +
         (project.empty() || project == "-" ? std::string("-") : url_encode(project));
}

std::string project_or_tenant(const Json& item) {
  if (item.value("project", Json(nullptr)).is_string()) return item["project"];
  const Json& id = item.value("project_id", Json(nullptr));
  return id.is_string() && !id.get<std::string>().empty() ? id.get<std::string>()
                                                          : "(whole tenant)";
}

// A budget as a person reads it: the CLI takes currency units and percent, so it shows them
// (the API's micro-units and basis points stay in --output json).
Json budget_view(const Json& b) {
  const Json currency = b.value("currency", Json(nullptr));
  Json thresholds = Json::array();
  for (const auto& t : b.value("thresholds_bps", Json::array()))
    thresholds.push_back(percent_of_bps(t));
  Json v = {{"project", project_or_tenant(b)},
            {"amount", money_in(b.value("amount_micros", Json(nullptr)), currency)},
            {"spend", money_in(b.value("spend_micros", Json(nullptr)), currency)},
            {"used", percent_of_bps(b.value("spent_bps", Json(nullptr)))},
            {"thresholds", thresholds},
            {"hard stop", b.value("hard_stop", false) ? "yes" : "no"},
            {"period", b.value("period", Json(nullptr))},
            {"version", b.value("version", Json(nullptr))}};
  if (b.contains("spend_error")) v["spend"] = "cannot be rated: " + b.value("spend_error", "");
  return v;
}

const std::vector<std::string> kBudgetCols = {"project",    "amount",    "spend",  "used",
                                              "thresholds", "hard stop", "period", "version"};

// One budget answer, as the output format asks.
void print_budget(const ClientConfig& c, const Json& b) {
  print(c, c.output == "json" ? b : budget_view(b), {});
}

struct BudgetArgs {
  std::string tenant, project, amount, thresholds;
  bool hard_stop = false;
  int limit = 100;
};

void add_budget(CLI::App& app, ClientConfig& c, int* rc) {
  auto* b = app.add_subcommand("budget", "Budgets per tenant and project: alerts and hard stop");
  b->require_subcommand(1);
  auto a = std::make_shared<BudgetArgs>();
  auto scope = [a](CLI::App* cmd) {
    cmd->add_option("tenant", a->tenant, "Tenant id or name")->required();
    cmd->add_option("project", a->project, "Project id or name; '-' or omitted: the whole tenant");
  };

  auto* set = b->add_subcommand("set", "Create or replace a budget for the UTC month");
  scope(set);
  set->add_option("--amount", a->amount, "Amount per month in currency units, e.g. 1000.00")
      ->required();
  set->add_option("--thresholds", a->thresholds,
                  "Alert thresholds in percent, ascending, e.g. 50,80,100 (the default)");
  set->add_flag("--hard-stop", a->hard_stop, "Refuse new allocations that would exceed it");
  set->callback([&c, a, rc] {
    auto amount = parse_units(a->amount, 6, 1'000'000);
    if (!amount || *amount <= 0) {
      std::cerr << "error: --amount must be a positive decimal with at most six decimals\n";
      *rc = 1;
      return;
    }
    Json body = {{"amount_micros", *amount}, {"hard_stop", a->hard_stop}};
    if (!a->thresholds.empty()) {
      Json ts = Json::array();
      std::stringstream in(a->thresholds);
      std::string item;
      while (std::getline(in, item, ',')) {
        auto bps = parse_units(item, 2, 100);
        if (!bps) {
          std::cerr << "error: --thresholds: '" << item
                    << "' is not a percentage (at most two decimals)\n";
          *rc = 1;
          return;
        }
        ts.push_back(*bps);
      }
      body["thresholds_bps"] = ts;
    }
    auto r = call(c, "PUT", budget_target(a->tenant, a->project), body);
    if (r) print_budget(c, *r);
    if (!r) *rc = 1;
  });

  auto* get = b->add_subcommand("get", "One budget with its month-to-date spend");
  scope(get);
  get->callback([&c, a, rc] {
    auto r = call(c, "GET", budget_target(a->tenant, a->project));
    if (r) print_budget(c, *r);
    if (!r) *rc = 1;
  });

  auto* list = b->add_subcommand("list", "The tenant's budgets with month-to-date spend");
  list->add_option("tenant", a->tenant, "Tenant id or name")->required();
  list->callback([&c, a, rc] {
    auto r = call(c, "GET", "/v1/tenants/" + url_encode(a->tenant) + "/budgets");
    if (!r) {
      *rc = 1;
      return;
    }
    if (c.output == "json") {
      print(c, *r, {});
      return;
    }
    std::vector<Json> rows;
    for (const auto& b : (*r)["items"]) rows.push_back(budget_view(b));
    print_table(rows, kBudgetCols);
  });

  auto* del = b->add_subcommand("delete", "Remove a budget (its alerts stay)");
  scope(del);
  del->callback([&c, a, rc] {
    auto r = call(c, "DELETE", budget_target(a->tenant, a->project));
    if (r && c.output != "json") std::cout << "deleted\n";
    if (r && c.output == "json") std::cout << "{}\n";
    if (!r) *rc = 1;
  });

  auto* alerts = b->add_subcommand("alerts", "Budget alerts of a tenant, oldest first");
  alerts->add_option("tenant", a->tenant, "Tenant id or name")->required();
  alerts->add_option("--limit", a->limit, "Page size")->check(CLI::Range(1, 1000));
  alerts->callback([&c, a, rc] {
    std::vector<Json> rows;
    std::string after;
    for (;;) {
      std::string target =
          fmt::format("/v1/tenants/{}/budget-alerts?limit={}", url_encode(a->tenant), a->limit);
      if (!after.empty()) target += "&after=" + url_encode(after);
      auto r = call(c, "GET", target);
      if (!r) {
        *rc = 1;
        return;
      }
      for (const auto& item : (*r)["items"]) rows.push_back(item);
      if (!(*r)["next"].is_string()) break;
      after = (*r)["next"].get<std::string>();
    }
    if (c.output == "json") {
      std::cout << Json{{"items", rows}}.dump(2) << "\n";
      return;
    }
    for (auto& row : rows) {
      const Json currency = row.value("currency", Json(nullptr));
      row = {{"period", row["period"]},
             {"project", project_or_tenant(row)},
             {"threshold", percent_of_bps(row["threshold_bps"])},
             {"reached at", money_in(row["threshold_micros"], currency)},
             {"spend", money_in(row["spend_micros"], currency)},
             {"created_at", row["created_at"]}};
    }
    print_table(rows, {"period", "project", "threshold", "reached at", "spend", "created_at"});
  });
}

}  // namespace

void add_billing_commands(CLI::App& app, ClientConfig& c, int* rc) {
  add_ratecard(app, c, rc);
  add_billing_account(app, c, rc);
  add_invoice(app, c, rc);
  add_budget(app, c, rc);
}

}  // namespace gp::cli
