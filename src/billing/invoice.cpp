// Rating usage into invoices, and the invoice state rules.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "billing/billing.h"

namespace gp::billing {

namespace {

// Above this a tenant's quantity of one price key (in unit-microseconds) could make
// price x quantity x 10^4 overflow 128 bits. It is ~1.3e12 GPU-hours: never reached in practice.
constexpr Wide kMaxGroupUnitsUs = Wide(1) << 72;

// One line before tiering: a project's usage of one resource key/offering in one class.
struct LineKey {
  std::string price_key;
  std::string project;
  std::string offering;
  std::string resource_key;
  UsageClass usage_class;
  auto operator<=>(const LineKey&) const = default;
};

struct PricedGroup {
  const Price* price = nullptr;
  int64_t denominator = 1;  // unit-microseconds per priced unit-hour
};

Result<void> validate_account(const TenantAccount& a) {
  if (a.tenant.empty()) return fail(Error::invalid("tenant account: tenant is required"));
  if (a.tax_bps < 0 || a.tax_bps > kBasisPoints) {
    return fail(Error::invalid(
        fmt::format("tenant '{}': tax_bps {} is not between 0 and 10000", a.tenant, a.tax_bps)));
  }
  if (a.prepaid_credit_micros < 0) {
    return fail(
        Error::invalid(fmt::format("tenant '{}': prepaid credit must not be negative", a.tenant)));
  }
  return ok();
}

int32_t discount_for(const RateCard& card, UsageClass c) {
  switch (c) {
    case UsageClass::kCommitted:
      return card.committed_discount_bps;
    case UsageClass::kSpot:
      return card.spot_discount_bps;
    case UsageClass::kOnDemand:
      return 0;
  }
  return 0;
}

Result<LineItem> make_line(const RateCard& card, const LineKey& key, const PricedGroup& g, int tier,
                           Wide units_us) {
  LineItem li;
  li.project = key.project;
  li.resource_key = key.resource_key;
  li.offering = key.offering;
  li.price_key = key.price_key;
  li.model = g.price->model;
  li.usage_class = key.usage_class;
  li.tier = tier;
  li.quantity_units_us = units_us;
  li.quantity_denominator = g.denominator;
  li.quantity_micro_hours = GP_TRY(round_half_even(units_us * kMicrosPerUnit, g.denominator));
  li.unit_price_micros = g.price->tiers.at(size_t(tier)).unit_price_micros;
  li.discount_bps = discount_for(card, key.usage_class);
  Wide gross = Wide(li.unit_price_micros) * units_us;
  // The one rounding of this line: the exact discounted amount.
  li.amount_micros = GP_TRY(round_half_even(gross * (kBasisPoints - li.discount_bps),
                                            Wide(g.denominator) * kBasisPoints));
  li.gross_micros = GP_TRY(round_half_even(gross, g.denominator));
  li.discount_micros = li.gross_micros - li.amount_micros;
  return li;
}

std::string invoice_base_id(const std::string& tenant, const Period& p) {
  return tenant + "/" + period_label(p);
}

}  // namespace

std::string_view usage_class_name(UsageClass c) { return enum_name(c, kUsageClasses); }

UsageClass usage_class_of(const UsageRecord& r) {
  if (r.committed) return UsageClass::kCommitted;
  if (r.preemptible) return UsageClass::kSpot;
  return UsageClass::kOnDemand;
}

std::string_view invoice_state_name(InvoiceState s) { return enum_name(s, kInvoiceStates); }

Result<Invoice> compute_invoice(const RateCard& card, const TenantAccount& account,
                                const Period& period, std::span<const UsageRecord> usage,
                                std::span<const OfferingCredit> sla_credits) {
  GP_TRY_VOID(validate_rate_card(card));
  GP_TRY_VOID(validate_account(account));
  if (period.end_us <= period.start_us) {
    return fail(Error::invalid("invoice period: end must be after start"));
  }
  Invoice inv;
  inv.tenant = account.tenant;
  inv.period = period;
  inv.id = invoice_base_id(account.tenant, period);
  inv.currency = card.currency;
  inv.rate_card_id = card.id;
  inv.rate_card_version = card.version;
  inv.tax_bps = account.tax_bps;

  // 1. Aggregate exact quantities (unit-microseconds) per line key.
  std::map<LineKey, Wide> units;
  std::map<std::string, PricedGroup, std::less<>> groups;
  for (const auto& raw : usage) {
    if (raw.tenant != account.tenant) continue;
    GP_TRY_VOID(validate_usage_record(raw));
    auto r = clip_to_period(raw, period);
    if (!r) continue;
    const Price* price = card.price_for(*r);
    if (!price) {
      return fail(Error::invalid(fmt::format(
          "rate card '{}' v{} has no price for resource key '{}'{}", card.id, card.version,
          r->resource_key, r->offering.empty() ? "" : " or offering '" + r->offering + "'")));
    }
    bool by_offering = !price->offering.empty();
    if (by_offering && r->gpu_equivalent_units == 0) {
      return fail(Error::invalid(
          fmt::format("usage of offering '{}' is priced per GPU-equivalent-hour and needs "
                      "gpu_equivalent_units",
                      r->offering)));
    }
    int64_t weight = by_offering ? r->gpu_equivalent_units : r->quantity;
    int64_t per_unit =
        by_offering ? kGpuEquivalentUnits : GP_TRY(units_per_priced_unit(r->resource_key));
    std::string pk = price->key();
    groups.try_emplace(pk, PricedGroup{price, kUsPerHour * per_unit});
    LineKey key{pk, r->project, r->offering, r->resource_key, usage_class_of(*r)};
    units[key] += Wide(weight) * Wide(r->end_us - r->start_us);
    ++inv.usage_records;
  }

  // 2. Tiers count the tenant's whole quantity of a price key in the period. Lines of one key
  //    are adjacent in the map (price_key sorts first) and fill graduated tiers in that order.
  for (auto it = units.begin(); it != units.end();) {
    const std::string& pk = it->first.price_key;
    const PricedGroup& g = groups.at(pk);
    auto end = it;
    Wide total = 0;
    for (; end != units.end() && end->first.price_key == pk; ++end) total += end->second;
    if (total > kMaxGroupUnitsUs) {
      return fail(Error::invalid(fmt::format("usage of '{}' too large to price exactly", pk)));
    }
    const auto& tiers = g.price->tiers;
    auto bound = [&](const std::optional<int64_t>& h) {
      return h ? Wide(*h) * g.denominator : kMaxGroupUnitsUs + 1;
    };
    int volume_tier = 0;
    while (tiers[size_t(volume_tier)].to_hours &&
           total > bound(tiers[size_t(volume_tier)].to_hours)) {
      ++volume_tier;
    }
    Wide cursor = 0;
    for (; it != end; ++it) {
      Wide lo = cursor, hi = cursor + it->second;
      cursor = hi;
      switch (g.price->model) {
        case PricingModel::kFlat:
          inv.lines.push_back(GP_TRY(make_line(card, it->first, g, 0, it->second)));
          break;
        case PricingModel::kVolume:
          inv.lines.push_back(GP_TRY(make_line(card, it->first, g, volume_tier, it->second)));
          break;
        case PricingModel::kGraduated:
          for (size_t t = 0; t < tiers.size(); ++t) {
            Wide t_lo = Wide(tiers[t].from_hours) * g.denominator;
            Wide t_hi = bound(tiers[t].to_hours);
            Wide portion = std::min(hi, t_hi) - std::max(lo, t_lo);
            if (portion > 0) {
              inv.lines.push_back(GP_TRY(make_line(card, it->first, g, int(t), portion)));
            }
          }
          break;
      }
    }
  }
  for (const auto& li : inv.lines) {
    inv.subtotal_micros = GP_TRY(checked_add(inv.subtotal_micros, li.amount_micros));
  }

  // 3. SLA credits: a share of each offering's charge.
  std::set<std::string, std::less<>> credited;
  for (const auto& c : sla_credits) {
    if (c.offering.empty()) return fail(Error::invalid("SLA credit: offering is required"));
    if (c.credit_bps < 0 || c.credit_bps > kBasisPoints) {
      return fail(Error::invalid(
          fmt::format("SLA credit for '{}': credit_bps {} is not between 0 and 10000", c.offering,
                      c.credit_bps)));
    }
    if (!credited.insert(c.offering).second) {
      return fail(Error::invalid(fmt::format("two SLA credits for offering '{}'", c.offering)));
    }
    CreditLine cl{c.offering, c.credit_bps, 0, 0, c.reason};
    for (const auto& li : inv.lines) {
      if (li.offering == c.offering)
        cl.charge_micros = GP_TRY(checked_add(cl.charge_micros, li.amount_micros));
    }
    cl.amount_micros = GP_TRY(round_half_even(Wide(cl.charge_micros) * c.credit_bps, kBasisPoints));
    inv.credits.push_back(std::move(cl));
  }
  std::sort(inv.credits.begin(), inv.credits.end(),
            [](const CreditLine& a, const CreditLine& b) { return a.offering < b.offering; });
  for (const auto& cl : inv.credits) {
    inv.sla_credit_micros = GP_TRY(checked_add(inv.sla_credit_micros, cl.amount_micros));
  }

  // 4. Tax on the credited amount; prepaid credit pays the taxed amount, never below zero.
  inv.taxable_micros = GP_TRY(checked_sub(inv.subtotal_micros, inv.sla_credit_micros));
  inv.tax_micros = GP_TRY(round_half_even(Wide(inv.taxable_micros) * inv.tax_bps, kBasisPoints));
  Micros due = GP_TRY(checked_add(inv.taxable_micros, inv.tax_micros));
  inv.prepaid_available_micros = account.prepaid_credit_micros;
  inv.prepaid_applied_micros = std::min(account.prepaid_credit_micros, due);
  inv.prepaid_carried_micros = account.prepaid_credit_micros - inv.prepaid_applied_micros;
  inv.total_micros = due - inv.prepaid_applied_micros;
  return inv;
}

Result<std::vector<Invoice>> run_invoices(
    const RateCard& card, const Period& period, std::span<const UsageRecord> usage,
    std::span<const TenantAccount> accounts,
    const std::map<std::string, std::vector<OfferingCredit>, std::less<>>& sla_credits) {
  std::map<std::string, std::vector<UsageRecord>, std::less<>> by_tenant;
  for (const auto& r : usage) by_tenant[r.tenant].push_back(r);
  std::map<std::string, TenantAccount, std::less<>> account_of;
  for (const auto& a : accounts) {
    if (!account_of.emplace(a.tenant, a).second) {
      return fail(Error::invalid(fmt::format("two accounts for tenant '{}'", a.tenant)));
    }
    by_tenant.try_emplace(a.tenant);
  }
  std::vector<Invoice> out;
  out.reserve(by_tenant.size());
  for (const auto& [tenant, records] : by_tenant) {
    auto acc = account_of.find(tenant);
    TenantAccount account = acc != account_of.end() ? acc->second : TenantAccount{tenant, 0, 0};
    auto credits = sla_credits.find(tenant);
    std::span<const OfferingCredit> c;
    if (credits != sla_credits.end()) c = credits->second;
    auto inv = compute_invoice(card, account, period, records, c);
    if (!inv) {
      return fail(
          Error{inv.error().code, fmt::format("tenant '{}': {}", tenant, inv.error().message)});
    }
    out.push_back(std::move(*inv));
  }
  return out;
}

Result<void> finalize_invoice(Invoice& inv, int64_t at_us) {
  if (inv.state != InvoiceState::kDraft) {
    return fail(Error::conflict(fmt::format("invoice {} is {}; only a draft can be finalized",
                                            inv.id, invoice_state_name(inv.state))));
  }
  inv.state = InvoiceState::kFinalized;
  inv.finalized_at_us = at_us;
  return ok();
}

Result<void> void_invoice(Invoice& inv, int64_t at_us, std::string_view reason) {
  if (inv.state == InvoiceState::kVoid)
    return fail(Error::conflict(fmt::format("invoice {} is already void", inv.id)));
  if (reason.empty()) return fail(Error::invalid("voiding an invoice needs a reason"));
  inv.state = InvoiceState::kVoid;
  inv.voided_at_us = at_us;
  inv.void_reason = std::string(reason);
  return ok();
}

Result<Invoice> reissue_invoice(const Invoice& voided, Invoice recomputed) {
  if (voided.state != InvoiceState::kVoid) {
    return fail(Error::conflict(fmt::format("invoice {} is {}; only a void invoice is re-issued",
                                            voided.id, invoice_state_name(voided.state))));
  }
  if (recomputed.state != InvoiceState::kDraft || recomputed.tenant != voided.tenant ||
      !(recomputed.period == voided.period)) {
    return fail(Error::invalid(
        fmt::format("a re-issue of {} must be a draft for the same tenant and period", voided.id)));
  }
  recomputed.revision = voided.revision + 1;
  recomputed.id =
      fmt::format("{}#{}", invoice_base_id(voided.tenant, voided.period), recomputed.revision);
  recomputed.supersedes = voided.id;
  return recomputed;
}

Result<void> replace_draft(Invoice& draft, Invoice recomputed) {
  if (draft.state != InvoiceState::kDraft) {
    return fail(Error::conflict(fmt::format("invoice {} is {} and cannot change", draft.id,
                                            invoice_state_name(draft.state))));
  }
  if (recomputed.tenant != draft.tenant || !(recomputed.period == draft.period)) {
    return fail(Error::invalid("a replacement draft must be for the same tenant and period"));
  }
  recomputed.id = draft.id;
  recomputed.revision = draft.revision;
  recomputed.supersedes = draft.supersedes;
  recomputed.state = InvoiceState::kDraft;
  draft = std::move(recomputed);
  return ok();
}

}  // namespace gp::billing
