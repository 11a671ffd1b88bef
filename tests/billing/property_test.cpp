// Property: for random usage (tenants, projects, resource keys, offerings, classes, records
// crossing month boundaries), every monthly invoice's subtotal equals the records rated one by
// one, independently, as exact fractions, summed per line and rounded once per line; and no
// unit-microsecond of usage is lost or counted twice across the months.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

#include "billing/billing.h"
#include "billing/fixture.h"

namespace gp::billing {
namespace {

using namespace testing;

struct Model {
  std::string key;
  int64_t units_per_priced_unit;
};

const std::vector<Model> kKeys = {
    {"gpu/H200", 1}, {"mig/H200/3g.71gb", 1}, {"gpu-milli/H200", 1000}, {"gpu/A100", 1}};

RateCard random_card(std::mt19937_64& rng) {
  std::vector<Price> prices;
  for (const auto& k : kKeys) prices.push_back(flat(k.key, Micros(rng() % 9'000'000) + 1));
  Price premium;
  premium.offering = "premium";
  premium.tiers = {PriceTier{0, std::nullopt, Micros(rng() % 20'000'000)}};
  prices.push_back(premium);
  RateCard c = card_with(std::move(prices));
  c.spot_discount_bps = int32_t(rng() % 10001);
  c.committed_discount_bps = int32_t(rng() % 10001);
  return c;
}

// The independent rater: one record's exact amount, as a fraction over a denominator shared by
// every record of the same price (numerator, denominator).
std::pair<Wide, Wide> rate_exactly(const RateCard& card, const UsageRecord& r) {
  bool premium = r.offering == "premium";
  Micros price = 0;
  int64_t per_unit = 1;
  for (const auto& p : card.prices) {
    if (premium && p.offering == "premium") price = p.tiers[0].unit_price_micros;
    if (!premium && p.resource_key == r.resource_key) price = p.tiers[0].unit_price_micros;
  }
  for (const auto& k : kKeys) {
    if (!premium && k.key == r.resource_key) per_unit = k.units_per_priced_unit;
  }
  if (premium) per_unit = kGpuEquivalentUnits;
  int64_t weight = premium ? r.gpu_equivalent_units : r.quantity;
  int32_t discount = r.committed     ? card.committed_discount_bps
                     : r.preemptible ? card.spot_discount_bps
                                     : 0;
  Wide num = Wide(price) * weight * (r.end_us - r.start_us) * (kBasisPoints - discount);
  Wide den = Wide(kUsPerHour) * per_unit * kBasisPoints;
  return {num, den};
}

TEST(BillingProperty, InvoiceTotalsEqualIndependentlyRatedRecords) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    RateCard card = random_card(rng);
    std::vector<UsageRecord> usage;
    std::vector<TenantAccount> accounts;
    int tenants = 1 + int(rng() % 6);
    for (int t = 0; t < tenants; ++t) {
      accounts.push_back(
          TenantAccount{"t" + std::to_string(t), int32_t(rng() % 3000), Micros(rng() % 50) * kUsd});
    }
    int n = 1 + int(rng() % 300);
    for (int i = 0; i < n; ++i) {
      const auto& k = kKeys[rng() % kKeys.size()];
      // Starts from mid-October to January; durations up to 45 days: many cross months.
      int64_t start = kNov2026 - 20 * 24 * kHour + int64_t(rng() % uint64_t(70 * 24 * kHour));
      int64_t len = 1 + int64_t(rng() % uint64_t(45 * 24 * kHour));
      int64_t q = 1 + int64_t(rng() % (k.units_per_priced_unit == 1000 ? 7000 : 8));
      auto r = record("t" + std::to_string(rng() % uint64_t(tenants)),
                      "p" + std::to_string(rng() % 3), k.key, start, start + len, q);
      r.gpu_equivalent_units = 1 + int64_t(rng() % 56000);
      if (rng() % 4 == 0) r.offering = "premium";
      if (rng() % 5 == 0) r.offering = "unpriced-offering";  // falls back to the key
      int cls = int(rng() % 3);
      r.preemptible = cls == 1;
      r.committed = cls == 2;
      usage.push_back(r);
    }

    Wide units_in = 0, units_billed = 0;
    for (const auto& r : usage) units_in += Wide(r.end_us - r.start_us);
    // Months from October 2026 to March 2027 cover every record.
    std::vector<Period> months;
    for (auto [y, m] :
         {std::pair{2026, 10}, {2026, 11}, {2026, 12}, {2027, 1}, {2027, 2}, {2027, 3}}) {
      months.push_back(*month_period(y, m));
    }
    for (const auto& month : months) {
      auto invoices = run_invoices(card, month, usage, accounts);
      ASSERT_TRUE(invoices) << invoices.error().message;
      ASSERT_EQ(invoices->size(), size_t(tenants));
      for (const auto& inv : *invoices) {
        // Independent rating: clip each record by hand, rate it exactly, sum per line.
        using Key = std::tuple<std::string, std::string, std::string, bool, bool>;
        std::map<Key, std::pair<Wide, Wide>> lines;
        Wide exact_units = 0;
        for (const auto& r : usage) {
          if (r.tenant != inv.tenant) continue;
          int64_t s = std::max(r.start_us, month.start_us), e = std::min(r.end_us, month.end_us);
          if (s >= e) continue;
          UsageRecord piece = r;
          piece.start_us = s;
          piece.end_us = e;
          exact_units += e - s;
          auto [num, den] = rate_exactly(card, piece);
          Key key{piece.project, piece.offering, piece.resource_key, piece.preemptible,
                  piece.committed};
          lines[key].first += num;
          lines[key].second = den;
        }
        Micros expected = 0;
        for (const auto& [key, frac] : lines) expected += *round_half_even(frac.first, frac.second);
        EXPECT_EQ(inv.subtotal_micros, expected) << "seed " << seed << " " << inv.id;
        EXPECT_EQ(inv.lines.size(), lines.size()) << "seed " << seed;
        Micros sum = 0;
        for (const auto& li : inv.lines) sum += li.amount_micros;
        EXPECT_EQ(sum, inv.subtotal_micros);
        EXPECT_GE(inv.total_micros, 0);
        EXPECT_EQ(inv.taxable_micros + inv.tax_micros - inv.prepaid_applied_micros,
                  inv.total_micros);
        EXPECT_EQ(inv.prepaid_applied_micros + inv.prepaid_carried_micros,
                  inv.prepaid_available_micros);
        units_billed += exact_units;
      }
    }
    EXPECT_TRUE(units_in == units_billed) << "seed " << seed;
  }
}

// Graduated tiers: however a tenant's usage is split into records and projects, the lines of a
// price add up to the graduated price of the total quantity (within half a micro per line).
TEST(BillingProperty, GraduatedLinesAddUpToTheGraduatedPriceOfTheTotal) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    RateCard card = card_with({tiered("gpu/H200", PricingModel::kGraduated)});
    std::vector<UsageRecord> usage;
    Wide total_us = 0;
    int n = 1 + int(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int64_t start = kNov2026 + int64_t(rng() % uint64_t(20 * 24 * kHour));
      int64_t len = 1 + int64_t(rng() % uint64_t(48 * kHour));
      int64_t q = 1 + int64_t(rng() % 4);
      usage.push_back(
          record("acme", "p" + std::to_string(rng() % 4), "gpu/H200", start, start + len, q));
      total_us += Wide(q) * len;
    }
    auto inv = *compute_invoice(card, {"acme", 0, 0}, november(), usage);
    // Reference graduated price of the total: 3.00 up to 100 h, 2.00 to 500 h, 1.00 beyond.
    Wide h100 = Wide(100) * kHour, h500 = Wide(500) * kHour;
    Wide num = Wide(3 * kUsd) * std::min(total_us, h100) +
               Wide(2 * kUsd) * std::max(Wide(0), std::min(total_us, h500) - h100) +
               Wide(1 * kUsd) * std::max(Wide(0), total_us - h500);
    Micros reference = *round_half_even(num, kHour);
    Micros diff = inv.subtotal_micros - reference;
    EXPECT_LE(std::abs(diff), Micros(inv.lines.size())) << "seed " << seed;
  }
}

}  // namespace
}  // namespace gp::billing
