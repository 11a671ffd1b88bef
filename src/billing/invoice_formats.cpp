// Invoice renderers: JSON (machine), CSV (spreadsheets), HTML (a printable page).
#include <fmt/format.h>

#include "billing/billing.h"
#include "common/clock.h"
#include "common/markup.h"

namespace gp::billing {

namespace {

std::string time_text(int64_t us) { return format_rfc3339(from_unix_micros(us)); }

// Exact unit-hours with six decimals (micro-unit-hours, rounded half even).
std::string hours_text(int64_t micro_hours) { return format_micros(micro_hours); }

std::string csv_field(std::string_view s) {
  bool quote = s.find_first_of(",\"\r\n") != std::string_view::npos;
  // A leading = + - @ would make a spreadsheet evaluate the cell: prefix a quote mark.
  bool formula = !s.empty() && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@');
  std::string out;
  if (quote || formula) out.push_back('"');
  if (formula) out.push_back('\'');
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  if (quote || formula) out.push_back('"');
  return out;
}

// "gpu/H200" -> "H200 GPU", "mig/H200/3g.71gb" -> "H200 MIG 3g.71gb instance",
// "gpu-milli/H200" -> "H200 GPU share"; any other key as it is.
std::string resource_words(std::string_view key) {
  auto slash = key.find('/');
  if (slash == std::string_view::npos) return std::string(key);
  std::string_view kind = key.substr(0, slash), rest = key.substr(slash + 1);
  if (kind == "gpu") return fmt::format("{} GPU", rest);
  if (kind == "gpu-milli") return fmt::format("{} GPU share", rest);
  if (kind == "mig") {
    auto second = rest.find('/');
    if (second != std::string_view::npos)
      return fmt::format("{} MIG {} instance", rest.substr(0, second), rest.substr(second + 1));
  }
  return std::string(key);
}

std::string_view class_words(UsageClass c) {
  switch (c) {
    case UsageClass::kCommitted:
      return "committed use";
    case UsageClass::kSpot:
      return "spot";
    case UsageClass::kOnDemand:
      return "on-demand";
  }
  return "on-demand";
}

// Who the invoice is for: "Acme Corp (acme)" when the account has a legal name, else the
// tenant's name, else (an invoice rated before names were kept) the tenant's id.
std::string addressee(const Invoice& inv) {
  const BillTo& b = inv.bill_to;
  const std::string& name = b.name.empty() ? inv.tenant : b.name;
  return b.legal_name.empty() ? name : fmt::format("{} ({})", b.legal_name, name);
}

}  // namespace

std::string line_description(const LineItem& li) {
  std::string out =
      fmt::format("{}, {}", resource_words(li.resource_key), class_words(li.usage_class));
  if (li.model != PricingModel::kFlat) out += fmt::format(", tier {}", li.tier + 1);
  out += fmt::format(", project {}", li.project_name.empty() ? li.project : li.project_name);
  if (!li.offering.empty()) out += fmt::format(", offering {}", li.offering);
  return out;
}

Json invoice_to_json(const Invoice& inv) { return json_of_fields(inv); }

std::string invoice_to_csv(const Invoice& inv) {
  // One table: line rows, then credit rows, then summary rows keyed in the first column.
  std::string out =
      "kind,project,resource_key,offering,class,tier,quantity_unit_hours,unit_price,"
      "discount_bps,gross,discount,amount,currency,description\n";
  auto row = [&](std::initializer_list<std::string> cells) {
    bool first = true;
    for (const auto& c : cells) {
      if (!first) out.push_back(',');
      out += csv_field(c);
      first = false;
    }
    out.push_back('\n');
  };
  for (const auto& li : inv.lines) {
    row({"line", li.project, li.resource_key, li.offering,
         std::string(usage_class_name(li.usage_class)), std::to_string(li.tier),
         hours_text(li.quantity_micro_hours), format_micros(li.unit_price_micros),
         std::to_string(li.discount_bps), format_micros(li.gross_micros),
         format_micros(li.discount_micros), format_micros(li.amount_micros), inv.currency,
         line_description(li)});
  }
  for (const auto& c : inv.credits) {
    row({"sla_credit", "", "", c.offering, "", "", "", "", std::to_string(c.credit_bps),
         format_micros(c.charge_micros), "", format_micros(-c.amount_micros), inv.currency,
         fmt::format("SLA credit, offering {}", c.offering)});
  }
  auto summary = [&](std::string_view kind, Micros m) {
    row({std::string(kind), "", "", "", "", "", "", "", "", "", "", format_micros(m), inv.currency,
         ""});
  };
  summary("subtotal", inv.subtotal_micros);
  summary("sla_credits", -inv.sla_credit_micros);
  summary("tax", inv.tax_micros);
  summary("prepaid_applied", -inv.prepaid_applied_micros);
  summary("total", inv.total_micros);
  return out;
}

std::string invoice_to_html(const Invoice& inv) {
  auto money = [&](Micros m) { return markup_escape(format_micros_display(m, 2)); };
  std::string rows;
  for (const auto& li : inv.lines) {
    rows += fmt::format(
        "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td "
        "class=n>{}</td></tr>\n",
        markup_escape(line_description(li)), markup_escape(hours_text(li.quantity_micro_hours)),
        markup_escape(format_micros(li.unit_price_micros)), money(-li.discount_micros),
        money(li.amount_micros));
  }
  std::string credit_rows;
  for (const auto& c : inv.credits) {
    credit_rows += fmt::format(
        "<tr><td colspan=4>SLA credit: {} ({}.{:02}% of {}){}</td><td class=n>{}</td></tr>\n",
        markup_escape(c.offering), c.credit_bps / 100, c.credit_bps % 100, money(c.charge_micros),
        c.reason.empty() ? "" : " - " + markup_escape(c.reason), money(-c.amount_micros));
  }
  auto total_row = [&](std::string_view label, Micros m, bool strong = false) {
    return fmt::format("<tr{}><td colspan=4>{}</td><td class=n>{}</td></tr>\n",
                       strong ? " class=total" : "", label, money(m));
  };
  std::string status = std::string(invoice_state_name(inv.state));
  if (inv.state == InvoiceState::kVoid) status += " - " + inv.void_reason;
  // A draft has no number or dates yet: it says what it is instead.
  const std::string title =
      inv.number.empty()
          ? fmt::format("Invoice (not issued): {}, {}", addressee(inv), period_label(inv.period))
          : fmt::format("Invoice {}", inv.number);
  std::string address;
  for (size_t from = 0; from <= inv.bill_to.address.size() && !inv.bill_to.address.empty();) {
    size_t nl = inv.bill_to.address.find('\n', from);
    if (nl == std::string::npos) nl = inv.bill_to.address.size();
    address += "<br>" + markup_escape(inv.bill_to.address.substr(from, nl - from));
    from = nl + 1;
  }
  auto date = [](int64_t us) { return time_text(us).substr(0, 10); };
  std::string facts;
  if (!inv.number.empty()) facts += "Invoice number: " + markup_escape(inv.number) + "<br>";
  if (inv.finalized_at_us) facts += "Issue date: " + date(*inv.finalized_at_us) + "<br>";
  if (inv.due_at_us)
    facts +=
        fmt::format("Due date: {} (net {} days)<br>", date(*inv.due_at_us), inv.payment_terms_days);
  facts += fmt::format("Period: {} to {}<br>Reference: {}<br>Rate card: {} version {}",
                       markup_escape(time_text(inv.period.start_us)),
                       markup_escape(time_text(inv.period.end_us)), markup_escape(inv.id),
                       markup_escape(inv.rate_card_id), inv.rate_card_version);
  if (!inv.supersedes.empty()) facts += "<br>Supersedes: " + markup_escape(inv.supersedes);
  return fmt::format(
      R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font-family:sans-serif;margin:2em;color:#111}}
table{{border-collapse:collapse;width:100%}}
th,td{{border-bottom:1px solid #ccc;padding:4px 8px;text-align:left}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}}
tr.total td{{font-weight:bold;border-top:2px solid #111}}
.state{{text-transform:uppercase;letter-spacing:.1em}}
.parties{{display:flex;gap:4em}}
@media print{{body{{margin:0}}}}
</style></head><body>
<h1>{title}</h1>
<p class=state>{status}</p>
<div class=parties>
<p><strong>Bill to</strong><br>{bill_to}{address}</p>
<p>{facts}</p>
</div>
<table>
<thead><tr><th>Description</th><th>Unit-hours</th><th>Unit price</th><th>Discount</th><th>Amount ({currency})</th></tr></thead>
<tbody>
{rows}{credit_rows}{subtotal}{credits}{tax}{prepaid}{total}</tbody>
</table>
<p>Amounts in {currency}; each line is rounded once, half to even, to the micro-unit and shown to the cent.</p>
</body></html>
)",
      fmt::arg("title", markup_escape(title)), fmt::arg("status", markup_escape(status)),
      fmt::arg("bill_to", markup_escape(addressee(inv))), fmt::arg("address", address),
      fmt::arg("facts", facts), fmt::arg("currency", markup_escape(inv.currency)),
      fmt::arg("rows", rows), fmt::arg("credit_rows", credit_rows),
      fmt::arg("subtotal", total_row("Subtotal", inv.subtotal_micros)),
      fmt::arg("credits", total_row("SLA credits", -inv.sla_credit_micros)),
      fmt::arg("tax",
               total_row(fmt::format("Tax ({}.{:02}%)", inv.tax_bps / 100, inv.tax_bps % 100),
                         inv.tax_micros)),
      fmt::arg("prepaid", total_row("Prepaid credit applied", -inv.prepaid_applied_micros)),
      fmt::arg("total", total_row("Total due", inv.total_micros, true)));
}

}  // namespace gp::billing
