// Rate cards: strict parsing, validation, JSON form and version selection.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "billing/billing.h"
#include "common/clock.h"

namespace gp::billing {

namespace {

Result<PricingModel> parse_model(std::string_view s) {
  if (s == "flat") return PricingModel::kFlat;
  if (s == "graduated") return PricingModel::kGraduated;
  if (s == "volume") return PricingModel::kVolume;
  return fail(Error::invalid(fmt::format("model '{}' is not one of flat, graduated, volume", s)));
}

Result<PriceTier> parse_tier(const Json& j) {
  ObjectReader rd(j, "tier");
  PriceTier t;
  t.from_hours = rd.integer("from_hours", 0, kMaxTierHours);
  t.to_hours = rd.optional_integer("to_hours", 1, kMaxTierHours);
  t.unit_price_micros = rd.integer("unit_price_micros", INT64_MIN, INT64_MAX);
  GP_TRY_VOID(rd.finish());
  return t;
}

Result<Price> parse_price(const Json& j) {
  ObjectReader rd(j, "price");
  Price p;
  p.resource_key = rd.optional_string("resource_key").value_or("");
  p.offering = rd.optional_string("offering").value_or("");
  std::string model = rd.optional_string("model").value_or("flat");
  auto flat_price = rd.optional_integer("unit_price_micros", INT64_MIN, INT64_MAX);
  const Json* tiers = rd.optional_array("tiers");
  GP_TRY_VOID(rd.finish());
  p.model = GP_TRY(parse_model(model));
  std::string name = p.resource_key.empty() ? p.offering : p.resource_key;
  if (p.model == PricingModel::kFlat) {
    if (tiers) {
      return fail(Error::invalid(
          fmt::format("price '{}': a flat price takes unit_price_micros, not tiers", name)));
    }
    if (!flat_price) {
      return fail(
          Error::invalid(fmt::format("price '{}': a flat price needs unit_price_micros", name)));
    }
    p.tiers.push_back(PriceTier{0, std::nullopt, *flat_price});
  } else {
    if (flat_price) {
      return fail(Error::invalid(
          fmt::format("price '{}': a {} price takes tiers, not unit_price_micros", name, model)));
    }
    if (!tiers) {
      return fail(Error::invalid(fmt::format("price '{}': a {} price needs tiers", name, model)));
    }
    for (size_t i = 0; i < tiers->size(); ++i) {
      auto t = parse_tier((*tiers)[i]);
      if (!t) {
        return fail(
            Error::invalid(fmt::format("price '{}' tier {}: {}", name, i, t.error().message)));
      }
      p.tiers.push_back(*t);
    }
  }
  return p;
}

Result<void> validate_price(const Price& p) {
  if (p.resource_key.empty() == p.offering.empty()) {
    return fail(Error::invalid("a price names exactly one of resource_key or offering"));
  }
  std::string name = p.key();
  if (!p.resource_key.empty()) GP_TRY_VOID(units_per_priced_unit(p.resource_key));
  if (p.offering.size() > 253) {
    return fail(Error::invalid("price: offering longer than 253 characters"));
  }
  if (p.tiers.empty()) return fail(Error::invalid(fmt::format("price '{}': no tiers", name)));
  if (p.model == PricingModel::kFlat && p.tiers.size() != 1) {
    return fail(Error::invalid(fmt::format("price '{}': a flat price has one price", name)));
  }
  if (p.tiers.size() > 64) {
    return fail(Error::invalid(fmt::format("price '{}': more than 64 tiers", name)));
  }
  for (size_t i = 0; i < p.tiers.size(); ++i) {
    const auto& t = p.tiers[i];
    if (t.unit_price_micros < 0) {
      return fail(Error::invalid(fmt::format("price '{}' tier {}: unit_price_micros {} is negative",
                                             name, i, t.unit_price_micros)));
    }
    if (t.unit_price_micros > kMaxUnitPriceMicros) {
      return fail(Error::invalid(fmt::format("price '{}' tier {}: unit_price_micros is above {}",
                                             name, i, kMaxUnitPriceMicros)));
    }
    if (i == 0 && t.from_hours != 0) {
      return fail(Error::invalid(
          fmt::format("price '{}': the first tier must start at from_hours 0", name)));
    }
    if (t.to_hours && *t.to_hours <= t.from_hours) {
      return fail(
          Error::invalid(fmt::format("price '{}' tier {}: to_hours {} must be above from_hours {}",
                                     name, i, *t.to_hours, t.from_hours)));
    }
    bool last = i + 1 == p.tiers.size();
    if (last && t.to_hours) {
      return fail(Error::invalid(
          fmt::format("price '{}': the last tier must be unbounded (no to_hours)", name)));
    }
    if (!last) {
      if (!t.to_hours) {
        return fail(Error::invalid(
            fmt::format("price '{}' tier {}: only the last tier may be unbounded", name, i)));
      }
      int64_t next_from = p.tiers[i + 1].from_hours;
      if (next_from < *t.to_hours) {
        return fail(Error::invalid(
            fmt::format("price '{}': tiers {} and {} overlap or are out of order (from_hours {} < "
                        "to_hours {})",
                        name, i, i + 1, next_from, *t.to_hours)));
      }
      if (next_from > *t.to_hours) {
        return fail(Error::invalid(
            fmt::format("price '{}': gap between tiers {} and {} (to_hours {}, from_hours {})",
                        name, i, i + 1, *t.to_hours, next_from)));
      }
    }
  }
  return ok();
}

}  // namespace

std::string_view pricing_model_name(PricingModel m) { return enum_name(m, kPricingModels); }

std::string Price::key() const {
  return resource_key.empty() ? "offering:" + offering : resource_key;
}

const Price* RateCard::price_for(const UsageRecord& r) const {
  const Price* by_key = nullptr;
  for (const auto& p : prices) {
    if (!r.offering.empty() && p.offering == r.offering) return &p;
    if (!p.resource_key.empty() && p.resource_key == r.resource_key) by_key = &p;
  }
  return by_key;
}

Result<void> validate_rate_card(const RateCard& card) {
  if (card.id.empty() || card.id.size() > 63) {
    return fail(Error::invalid("rate card: id must be 1 to 63 characters"));
  }
  GP_TRY_VOID(validate_dns_label("rate card id", card.id));
  if (card.version < 1) return fail(Error::invalid("rate card: version must be at least 1"));
  GP_TRY_VOID(validate_currency(card.currency));
  if (card.effective_from_us < 0) {
    return fail(Error::invalid("rate card: effective_from must not be before 1970"));
  }
  for (auto [name, bps] : {std::pair{"spot_discount_bps", card.spot_discount_bps},
                           std::pair{"committed_discount_bps", card.committed_discount_bps}}) {
    if (bps < 0 || bps > kBasisPoints) {
      return fail(Error::invalid(fmt::format("rate card: {} must be between 0 and 10000", name)));
    }
  }
  if (card.prices.empty()) return fail(Error::invalid("rate card: no prices"));
  std::set<std::string, std::less<>> keys;
  for (const auto& p : card.prices) {
    GP_TRY_VOID(validate_price(p));
    if (!keys.insert(p.key()).second) {
      return fail(Error::invalid(fmt::format("rate card: two prices for '{}'", p.key())));
    }
  }
  return ok();
}

Result<RateCard> parse_rate_card(const Json& j) {
  ObjectReader rd(j, "rate card");
  RateCard card;
  card.id = rd.string("id", 63);
  card.version = rd.optional_integer("version", 1, INT32_MAX).value_or(1);
  card.currency = rd.string("currency", 8);
  std::string effective = rd.string("effective_from", 64);
  card.spot_discount_bps =
      int32_t(rd.optional_integer("spot_discount_bps", INT32_MIN, INT32_MAX).value_or(0));
  card.committed_discount_bps =
      int32_t(rd.optional_integer("committed_discount_bps", INT32_MIN, INT32_MAX).value_or(0));
  const Json* prices = rd.optional_array("prices");
  GP_TRY_VOID(rd.finish());
  TimePoint t;
  if (!parse_rfc3339(effective, &t)) {
    return fail(Error::invalid(
        fmt::format("rate card: effective_from '{}' is not an RFC 3339 time (2026-01-01T00:00:00Z)",
                    effective)));
  }
  card.effective_from_us = to_unix_micros(t);
  if (!prices) return fail(Error::invalid("rate card: field 'prices' is required"));
  if (prices->size() > 1000) return fail(Error::invalid("rate card: more than 1000 prices"));
  for (size_t i = 0; i < prices->size(); ++i) {
    auto p = parse_price((*prices)[i]);
    if (!p)
      return fail(Error::invalid(fmt::format("rate card price {}: {}", i, p.error().message)));
    card.prices.push_back(std::move(*p));
  }
  GP_TRY_VOID(validate_rate_card(card));
  return card;
}

Result<RateCard> parse_rate_card_text(std::string_view text) {
  Json j = GP_TRY(parse_json(text));
  return parse_rate_card(j);
}

Json rate_card_to_json(const RateCard& card) { return json_of_fields(card); }

Result<RateCard> select_rate_card(std::span<const RateCard> versions, std::string_view id,
                                  int64_t at_us) {
  const RateCard* best = nullptr;
  for (const auto& c : versions) {
    if (c.id != id || c.effective_from_us > at_us) continue;
    if (!best || c.effective_from_us > best->effective_from_us ||
        (c.effective_from_us == best->effective_from_us && c.version > best->version)) {
      best = &c;
    }
  }
  if (!best) {
    return fail(Error::not_found(fmt::format("rate card '{}' has no version in force at {}", id,
                                             format_rfc3339(from_unix_micros(at_us)))));
  }
  return *best;
}

}  // namespace gp::billing
