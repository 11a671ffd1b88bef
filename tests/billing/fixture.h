// Shared helpers for the billing tests: a November 2026 clock, records and cards.
#pragma once

#include <string>

#include "billing/billing.h"

namespace gp::billing::testing {

constexpr int64_t kHour = kUsPerHour;
constexpr int64_t kNov2026 = 1793491200000000;  // 2026-11-01T00:00:00Z
constexpr int64_t kDec2026 = 1796083200000000;  // 2026-12-01T00:00:00Z
constexpr int64_t kJan2027 = 1798761600000000;  // 2027-01-01T00:00:00Z
constexpr Micros kUsd = kMicrosPerUnit;

inline UsageRecord record(std::string tenant, std::string project, std::string key,
                          int64_t start_us, int64_t end_us, int64_t quantity = 1) {
  UsageRecord r;
  r.tenant = std::move(tenant);
  r.project = std::move(project);
  r.resource_key = std::move(key);
  r.start_us = start_us;
  r.end_us = end_us;
  r.quantity = quantity;
  r.gpu_equivalent_units = quantity * kGpuEquivalentUnits;
  return r;
}

inline Price flat(std::string key, Micros per_hour) {
  Price p;
  p.resource_key = std::move(key);
  p.tiers = {PriceTier{0, std::nullopt, per_hour}};
  return p;
}

// 3.00 for [0,100) h, 2.00 for [100,500) h, 1.00 from 500 h.
inline Price tiered(std::string key, PricingModel model) {
  Price p;
  p.resource_key = std::move(key);
  p.model = model;
  p.tiers = {PriceTier{0, 100, 3 * kUsd}, PriceTier{100, 500, 2 * kUsd},
             PriceTier{500, std::nullopt, 1 * kUsd}};
  return p;
}

inline RateCard card_with(std::vector<Price> prices) {
  RateCard c;
  c.id = "standard";
  c.version = 3;
  c.currency = "USD";
  c.effective_from_us = kNov2026;
  c.spot_discount_bps = 6000;
  c.committed_discount_bps = 3000;
  c.prices = std::move(prices);
  return c;
}

inline Period november() { return *month_period(2026, 11); }

}  // namespace gp::billing::testing
