#include "billing/billing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "billing/fixture.h"
#include "common/clock.h"

namespace gp::billing {
namespace {

using namespace testing;

Invoice rate(const RateCard& card, std::vector<UsageRecord> usage, TenantAccount account = {},
             std::vector<OfferingCredit> credits = {}) {
  if (account.tenant.empty()) account.tenant = "acme";
  auto inv = compute_invoice(card, account, november(), usage, credits);
  EXPECT_TRUE(inv.has_value()) << (inv ? "" : inv.error().message);
  return inv ? *inv : Invoice{};
}

// ---- money -------------------------------------------------------------------------------

TEST(Money, RoundHalfEvenTiesGoToTheEvenNeighbour) {
  struct Case {
    Wide num, den;
    Micros want;
  };
  for (auto c : std::vector<Case>{{5, 2, 2},
                                  {7, 2, 4},
                                  {-5, 2, -2},
                                  {-7, 2, -4},
                                  {1, 3, 0},
                                  {2, 3, 1},
                                  {-2, 3, -1},
                                  {9, -2, -4},
                                  {250, 100, 2},
                                  {251, 100, 3},
                                  {0, 7, 0}}) {
    EXPECT_EQ(*round_half_even(c.num, c.den), c.want) << int64_t(c.num) << "/" << int64_t(c.den);
  }
}

TEST(Money, OverflowIsAnErrorNotAWrap) {
  EXPECT_FALSE(round_half_even(Wide(INT64_MAX) * 4, 2).has_value());
  EXPECT_FALSE(checked_add(INT64_MAX, 1).has_value());
  EXPECT_FALSE(checked_sub(INT64_MIN, 1).has_value());
  EXPECT_FALSE(round_half_even(1, 0).has_value());
}

TEST(Money, FormatsExactly) {
  EXPECT_EQ(format_micros(1'234'500'000), "1234.500000");
  EXPECT_EQ(format_micros(-1), "-0.000001");
  EXPECT_EQ(format_micros(INT64_MIN), "-9223372036854.775808");
  EXPECT_EQ(format_money(1'234'500'000, "USD"), "1234.50 USD");
  EXPECT_EQ(format_money(45'319, "EUR"), "0.045319 EUR");
  EXPECT_EQ(format_money(-1, "USD"), "-0.000001 USD");
  EXPECT_EQ(format_money(0, "JPY"), "0.00 JPY");
  EXPECT_EQ(format_micros_display(1'234'565'000, 2), "1234.56");  // tie -> even cent
  EXPECT_EQ(format_micros_display(1'234'575'000, 2), "1234.58");
  EXPECT_TRUE(validate_currency("EUR").has_value());
  EXPECT_FALSE(validate_currency("eur").has_value());
  EXPECT_FALSE(validate_currency("EURO").has_value());
}

// ---- periods and month boundaries ------------------------------------------------------------

TEST(Periods, CalendarMonthsAreUtc) {
  EXPECT_EQ(month_period(2026, 11)->start_us, kNov2026);
  EXPECT_EQ(month_period(2026, 11)->end_us, kDec2026);
  EXPECT_EQ(month_period(2026, 12)->end_us, kJan2027);
  auto feb = *month_period(2028, 2);  // leap year
  EXPECT_EQ(feb.end_us - feb.start_us, 29 * 24 * kHour);
  EXPECT_EQ(month_containing(kDec2026 - 1), november());
  EXPECT_EQ(month_containing(kDec2026).start_us, kDec2026);
  EXPECT_EQ(period_label(november()), "2026-11");
  EXPECT_EQ(period_label(Period{kNov2026, kNov2026 + kHour}),
            "2026-11-01T00:00:00.000000Z/2026-11-01T01:00:00.000000Z");
  EXPECT_FALSE(month_period(2026, 13).has_value());
  EXPECT_FALSE(month_period(2026, 0).has_value());
}

TEST(Periods, ADaySplitAcrossTwoMonthsIsSplitExactlyAtMidnightUtc) {
  // 2026-11-30T12:00Z to 2026-12-01T12:00Z: 12 hours in each month.
  auto r = record("acme", "p", "gpu/H200", kDec2026 - 12 * kHour, kDec2026 + 12 * kHour, 2);
  auto pieces = split_at_month_boundaries(std::span(&r, 1));
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].start_us, r.start_us);
  EXPECT_EQ(pieces[0].end_us, kDec2026);
  EXPECT_EQ(pieces[1].start_us, kDec2026);
  EXPECT_EQ(pieces[1].end_us, r.end_us);
  EXPECT_EQ(pieces[1].quantity, 2);

  auto card = card_with({flat("gpu/H200", 2 * kUsd)});
  auto nov = *compute_invoice(card, {"acme", 0, 0}, november(), std::span(&r, 1));
  auto dec = *compute_invoice(card, {"acme", 0, 0}, *month_period(2026, 12), std::span(&r, 1));
  EXPECT_EQ(nov.subtotal_micros, 48 * kUsd);  // 2 GPUs x 12 h x 2.00
  EXPECT_EQ(dec.subtotal_micros, 48 * kUsd);
  EXPECT_EQ(nov.lines.at(0).quantity_micro_hours, 24'000'000);
}

TEST(Periods, LocalTimeOffsetsBillInTheUtcMonth) {
  // 2026-11-30T23:30:00-05:00 is 2026-12-01T04:30:00Z: December, not November.
  TimePoint t;
  ASSERT_TRUE(parse_rfc3339("2026-11-30T23:30:00-05:00", &t));
  auto r = record("acme", "p", "gpu/H200", to_unix_micros(t), to_unix_micros(t) + kHour);
  EXPECT_FALSE(clip_to_period(r, november()).has_value());
  EXPECT_TRUE(clip_to_period(r, *month_period(2026, 12)).has_value());
}

TEST(Periods, ARecordOverThreeMonthsBecomesThreePieces) {
  auto r = record("acme", "p", "gpu/H200", kNov2026 + kHour, kJan2027 + kHour);
  auto pieces = split_at_month_boundaries(std::span(&r, 1));
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].end_us, kDec2026);
  EXPECT_EQ(pieces[1].start_us, kDec2026);
  EXPECT_EQ(pieces[1].end_us, kJan2027);
  EXPECT_EQ(pieces[2].start_us, kJan2027);
  int64_t total = 0;
  for (const auto& p : pieces) total += p.end_us - p.start_us;
  EXPECT_EQ(total, r.end_us - r.start_us);
}

TEST(Periods, OnDemandPeriodClipsRecords) {
  auto card = card_with({flat("gpu/H200", 2 * kUsd)});
  auto r = record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 10 * kHour);
  Period p{kNov2026 + 4 * kHour, kNov2026 + 7 * kHour};
  auto inv = *compute_invoice(card, {"acme", 0, 0}, p, std::span(&r, 1));
  EXPECT_EQ(inv.subtotal_micros, 6 * kUsd);
  EXPECT_EQ(inv.id, "acme/2026-11-01T04:00:00.000000Z/2026-11-01T07:00:00.000000Z");
}

// ---- pricing models --------------------------------------------------------------------------

TEST(Pricing, FlatPricePerUnitHour) {
  auto card = card_with({flat("gpu/H200", 2'500'000)});
  auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 10 * kHour, 8)});
  ASSERT_EQ(inv.lines.size(), 1u);
  EXPECT_EQ(inv.lines[0].quantity_micro_hours, 80'000'000);
  EXPECT_EQ(inv.lines[0].amount_micros, 200 * kUsd);
  EXPECT_EQ(inv.subtotal_micros, 200 * kUsd);
  EXPECT_EQ(inv.total_micros, 200 * kUsd);
}

TEST(Pricing, FractionsRoundOncePerLineHalfToEven) {
  struct Case {
    Micros price;
    int64_t duration_us;
    Micros want;
  };
  for (auto c : std::vector<Case>{
           {2 * kUsd, 1'000'000, 556},  // 2.00/h for 1 s = 555.5...
           {kUsd, 1'800'000, 500},      // exactly 500
           {1, kHour / 2, 0},           // 0.5 -> 0
           {1, 3 * kHour / 2, 2},       // 1.5 -> 2
           {1, 5 * kHour / 2, 2},       // 2.5 -> 2
           {3, kHour / 2, 2},           // 1.5 -> 2
       }) {
    auto card = card_with({flat("gpu/H200", c.price)});
    auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + c.duration_us)});
    EXPECT_EQ(inv.subtotal_micros, c.want) << c.price << " " << c.duration_us;
  }
  // Two records of one line are summed exactly before the single rounding: 2 x 0.5 = 1.
  auto card = card_with({flat("gpu/H200", 1)});
  auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + kHour / 2),
                         record("acme", "p", "gpu/H200", kDec2026 - kHour / 2, kDec2026)});
  EXPECT_EQ(inv.subtotal_micros, 1);
}

struct TierCase {
  int64_t duration_us;
  Micros graduated;
  Micros volume;
  int volume_tier;
};

// Tiers: 3.00 for [0,100) h, 2.00 for [100,500) h, 1.00 from 500 h.
const std::vector<TierCase> kTierCases = {
    {1 * kHour, 3 * kUsd, 3 * kUsd, 0},
    {99 * kHour, 297 * kUsd, 297 * kUsd, 0},
    {100 * kHour - 1, 300 * kUsd, 300 * kUsd, 0},  // 300 - 0.0008 micros rounds to 300
    {100 * kHour, 300 * kUsd, 300 * kUsd, 0},
    {100 * kHour + 1, 300 * kUsd, 200 * kUsd, 1},
    {101 * kHour, 302 * kUsd, 202 * kUsd, 1},
    {500 * kHour, 1100 * kUsd, 1000 * kUsd, 1},
    {500 * kHour + kHour / 2, 1100 * kUsd + 500'000, 500 * kUsd + 500'000, 2},
    {600 * kHour, 1200 * kUsd, 600 * kUsd, 2},
};

TEST(Pricing, GraduatedTiersPriceEachTiersQuantityAtItsPrice) {
  auto card = card_with({tiered("gpu/H200", PricingModel::kGraduated)});
  for (const auto& c : kTierCases) {
    auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + c.duration_us)});
    EXPECT_EQ(inv.subtotal_micros, c.graduated) << c.duration_us;
    Wide units = 0;
    for (const auto& li : inv.lines) units += li.quantity_units_us;
    EXPECT_TRUE(units == c.duration_us);
  }
  // Just over a boundary makes a second line with the microsecond in the next tier.
  auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 100 * kHour + 1)});
  ASSERT_EQ(inv.lines.size(), 2u);
  EXPECT_EQ(inv.lines[1].tier, 1);
  EXPECT_TRUE(inv.lines[1].quantity_units_us == 1);
}

TEST(Pricing, VolumeTiersPriceTheWholeQuantityAtTheTierReached) {
  auto card = card_with({tiered("gpu/H200", PricingModel::kVolume)});
  for (const auto& c : kTierCases) {
    auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + c.duration_us)});
    ASSERT_EQ(inv.lines.size(), 1u);
    EXPECT_EQ(inv.subtotal_micros, c.volume) << c.duration_us;
    EXPECT_EQ(inv.lines[0].tier, c.volume_tier) << c.duration_us;
  }
}

TEST(Pricing, TiersCountTheTenantsWholeQuantityAcrossProjects) {
  // Projects a and b use 60 h each: 120 h in all; graduated lines fill tiers in line order.
  auto card = card_with({tiered("gpu/H200", PricingModel::kGraduated)});
  auto inv = rate(card, {record("acme", "b", "gpu/H200", kNov2026, kNov2026 + 60 * kHour),
                         record("acme", "a", "gpu/H200", kNov2026, kNov2026 + 60 * kHour)});
  ASSERT_EQ(inv.lines.size(), 3u);
  EXPECT_EQ(inv.lines[0].project, "a");
  EXPECT_EQ(inv.lines[0].amount_micros, 180 * kUsd);
  EXPECT_EQ(inv.lines[1].project, "b");
  EXPECT_EQ(inv.lines[1].amount_micros, 120 * kUsd);
  EXPECT_EQ(inv.lines[2].amount_micros, 40 * kUsd);
  EXPECT_EQ(inv.subtotal_micros, 340 * kUsd);  // = graduated(120 h)

  auto vol = card_with({tiered("gpu/H200", PricingModel::kVolume)});
  auto v = rate(vol, {record("acme", "b", "gpu/H200", kNov2026, kNov2026 + 60 * kHour),
                      record("acme", "a", "gpu/H200", kNov2026, kNov2026 + 60 * kHour)});
  EXPECT_EQ(v.subtotal_micros, 240 * kUsd);  // 120 h all at 2.00
}

TEST(Pricing, SpotAndCommittedDiscounts) {
  auto card = card_with({flat("gpu/H200", 2 * kUsd)});  // spot 60% off, committed 30% off
  auto spot = record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 10 * kHour);
  spot.preemptible = true;
  auto committed = spot;
  committed.preemptible = false;
  committed.committed = true;
  auto on_demand = record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 10 * kHour);
  auto inv = rate(card, {spot, committed, on_demand});
  ASSERT_EQ(inv.lines.size(), 3u);
  // Canonical order: committed, on-demand, spot.
  EXPECT_EQ(inv.lines[0].usage_class, UsageClass::kCommitted);
  EXPECT_EQ(inv.lines[0].gross_micros, 20 * kUsd);
  EXPECT_EQ(inv.lines[0].discount_micros, 6 * kUsd);
  EXPECT_EQ(inv.lines[0].amount_micros, 14 * kUsd);
  EXPECT_EQ(inv.lines[1].amount_micros, 20 * kUsd);
  EXPECT_EQ(inv.lines[2].usage_class, UsageClass::kSpot);
  EXPECT_EQ(inv.lines[2].discount_bps, 6000);
  EXPECT_EQ(inv.lines[2].amount_micros, 8 * kUsd);
  EXPECT_EQ(inv.subtotal_micros, 42 * kUsd);

  auto both = spot;
  both.committed = true;
  EXPECT_FALSE(compute_invoice(card, {"acme", 0, 0}, november(), std::span(&both, 1)));
}

TEST(Pricing, OfferingPriceWinsOverResourceKey) {
  Price premium;
  premium.offering = "h200-premium";
  premium.tiers = {PriceTier{0, std::nullopt, 5 * kUsd}};  // per GPU-equivalent-hour
  auto card = card_with({flat("gpu/H200", 2 * kUsd), premium});
  auto a = record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 3 * kHour, 2);
  a.offering = "h200-premium";
  auto b = a;
  b.offering = "h200-basic";  // not priced: falls back to the resource key
  auto inv = rate(card, {a, b});
  ASSERT_EQ(inv.lines.size(), 2u);
  EXPECT_EQ(inv.lines[0].price_key, "gpu/H200");
  EXPECT_EQ(inv.lines[0].amount_micros, 12 * kUsd);
  EXPECT_EQ(inv.lines[1].price_key, "offering:h200-premium");
  EXPECT_EQ(inv.lines[1].amount_micros, 30 * kUsd);

  a.gpu_equivalent_units = 0;
  auto bad = compute_invoice(card, {"acme", 0, 0}, november(), std::span(&a, 1));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("gpu_equivalent_units"), std::string::npos);
}

TEST(Pricing, MigInstancesAndMilliGpuShares) {
  auto card = card_with({flat("mig/H200/3g.71gb", kUsd), flat("gpu-milli/H200", 4 * kUsd)});
  auto inv =
      rate(card, {record("acme", "p", "mig/H200/3g.71gb", kNov2026, kNov2026 + 5 * kHour, 2),
                  record("acme", "p", "gpu-milli/H200", kNov2026, kNov2026 + 2 * kHour, 500)});
  ASSERT_EQ(inv.lines.size(), 2u);
  EXPECT_EQ(inv.lines[0].resource_key, "gpu-milli/H200");
  EXPECT_EQ(inv.lines[0].quantity_micro_hours, 1'000'000);  // 0.5 GPU x 2 h
  EXPECT_EQ(inv.lines[0].amount_micros, 4 * kUsd);
  EXPECT_EQ(inv.lines[1].amount_micros, 10 * kUsd);
}

TEST(Pricing, UnpricedOrMalformedUsageIsAnError) {
  auto card = card_with({flat("gpu/H200", kUsd)});
  auto r = record("acme", "p", "gpu/A100", kNov2026, kNov2026 + kHour);
  auto e = compute_invoice(card, {"acme", 0, 0}, november(), std::span(&r, 1));
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("no price for resource key 'gpu/A100'"), std::string::npos);
  r.resource_key = "tpu/v5";
  EXPECT_FALSE(validate_usage_record(r));
  r = record("acme", "p", "gpu/H200", kNov2026 + kHour, kNov2026);
  EXPECT_FALSE(validate_usage_record(r));
  r = record("acme", "p", "gpu/H200", kNov2026, kNov2026 + kHour, 0);
  EXPECT_FALSE(validate_usage_record(r));
}

TEST(Pricing, OtherTenantsUsageIsNotOnTheInvoice) {
  auto card = card_with({flat("gpu/H200", kUsd)});
  auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + kHour),
                         record("globex", "p", "gpu/H200", kNov2026, kNov2026 + 5 * kHour)});
  EXPECT_EQ(inv.subtotal_micros, kUsd);
  EXPECT_EQ(inv.usage_records, 1u);
}

// ---- credits, prepaid, tax -------------------------------------------------------------------

TEST(Invoice, PrepaidCreditLargerThanTheTotalLeavesZeroAndCarriesTheRest) {
  auto card = card_with({flat("gpu/H200", 100 * kUsd)});
  auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 2 * kHour)},
                  {"acme", 1000, 1000 * kUsd});
  EXPECT_EQ(inv.subtotal_micros, 200 * kUsd);
  EXPECT_EQ(inv.tax_micros, 20 * kUsd);
  EXPECT_EQ(inv.prepaid_applied_micros, 220 * kUsd);
  EXPECT_EQ(inv.prepaid_carried_micros, 780 * kUsd);
  EXPECT_EQ(inv.total_micros, 0);

  auto partial = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 2 * kHour)},
                      {"acme", 0, 50 * kUsd});
  EXPECT_EQ(partial.prepaid_applied_micros, 50 * kUsd);
  EXPECT_EQ(partial.prepaid_carried_micros, 0);
  EXPECT_EQ(partial.total_micros, 150 * kUsd);
}

TEST(Invoice, TaxIsRoundedHalfToEvenOnce) {
  struct Case {
    Micros subtotal;
    int32_t tax_bps;
    Micros tax;
  };
  for (auto c : std::vector<Case>{{1'000'005, 1000, 100'000},  // 100000.5 -> even
                                  {1'000'015, 1000, 100'002},  // 100001.5 -> even
                                  {1'000'016, 1000, 100'002},  // 100001.6
                                  {333, 1950, 65},             // 64.935
                                  {kUsd, 0, 0}}) {
    auto card = card_with({flat("gpu/H200", c.subtotal)});
    auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + kHour)},
                    {"acme", c.tax_bps, 0});
    EXPECT_EQ(inv.subtotal_micros, c.subtotal);
    EXPECT_EQ(inv.tax_micros, c.tax) << c.subtotal << " @ " << c.tax_bps;
    EXPECT_EQ(inv.total_micros, c.subtotal + c.tax);
  }
  auto card = card_with({flat("gpu/H200", kUsd)});
  std::vector<UsageRecord> none;
  EXPECT_FALSE(compute_invoice(card, {"acme", 10001, 0}, november(), none));
  EXPECT_FALSE(compute_invoice(card, {"acme", 0, -1}, november(), none));
}

TEST(Invoice, SlaCreditsAreAShareOfTheOfferingsCharge) {
  auto card = card_with({flat("gpu/H200", 10 * kUsd)});
  auto a = record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 10 * kHour);
  a.offering = "h200-dedicated";
  auto b = record("acme", "p", "gpu/H200", kNov2026, kNov2026 + 5 * kHour);
  b.offering = "h200-shared";
  auto inv =
      rate(card, {a, b}, {"acme", 1000, 0},
           {{"h200-dedicated", 1000, "availability 99.5% below 99.9%"}, {"h200-absent", 3000, ""}});
  EXPECT_EQ(inv.subtotal_micros, 150 * kUsd);
  ASSERT_EQ(inv.credits.size(), 2u);
  EXPECT_EQ(inv.credits[0].offering, "h200-absent");
  EXPECT_EQ(inv.credits[0].amount_micros, 0);
  EXPECT_EQ(inv.credits[1].charge_micros, 100 * kUsd);
  EXPECT_EQ(inv.credits[1].amount_micros, 10 * kUsd);
  EXPECT_EQ(inv.sla_credit_micros, 10 * kUsd);
  EXPECT_EQ(inv.taxable_micros, 140 * kUsd);
  EXPECT_EQ(inv.tax_micros, 14 * kUsd);
  EXPECT_EQ(inv.total_micros, 154 * kUsd);

  std::vector<UsageRecord> usage = {a};
  std::vector<OfferingCredit> dup = {{"x", 1000, ""}, {"x", 1000, ""}};
  EXPECT_FALSE(compute_invoice(card, {"acme", 0, 0}, november(), usage, dup));
  std::vector<OfferingCredit> over = {{"x", 10001, ""}};
  EXPECT_FALSE(compute_invoice(card, {"acme", 0, 0}, november(), usage, over));
}

// ---- states ----------------------------------------------------------------------------------

TEST(InvoiceState, DraftFinalizedVoidAndReissue) {
  auto card = card_with({flat("gpu/H200", kUsd)});
  auto usage = std::vector{record("acme", "p", "gpu/H200", kNov2026, kNov2026 + kHour)};
  auto inv = rate(card, usage);
  EXPECT_EQ(inv.state, InvoiceState::kDraft);
  EXPECT_EQ(inv.id, "acme/2026-11");

  // A voided draft frees its period.
  Invoice discarded = inv;
  EXPECT_EQ(void_invoice(discarded, 5, "").error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(void_invoice(discarded, 5, "on-demand invoice instead"));
  EXPECT_EQ(discarded.state, InvoiceState::kVoid);
  EXPECT_EQ(discarded.void_reason, "on-demand invoice instead");

  // A draft can be replaced by a recomputation.
  auto more = rate(card, {usage[0], usage[0]});
  ASSERT_TRUE(replace_draft(inv, more));
  EXPECT_EQ(inv.subtotal_micros, 2 * kUsd);

  ASSERT_TRUE(finalize_invoice(inv, 10));
  EXPECT_EQ(inv.finalized_at_us, 10);
  EXPECT_EQ(finalize_invoice(inv, 11).error().code, ErrorCode::kConflict);
  EXPECT_EQ(replace_draft(inv, more).error().code, ErrorCode::kConflict);  // immutable
  EXPECT_FALSE(reissue_invoice(inv, more));  // only a void one is re-issued

  EXPECT_EQ(void_invoice(inv, 20, "").error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(void_invoice(inv, 20, "wrong rate card"));
  EXPECT_EQ(inv.state, InvoiceState::kVoid);
  EXPECT_EQ(void_invoice(inv, 21, "again").error().code, ErrorCode::kConflict);
  EXPECT_EQ(finalize_invoice(inv, 21).error().code, ErrorCode::kConflict);

  auto again = reissue_invoice(inv, rate(card, usage));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->state, InvoiceState::kDraft);
  EXPECT_EQ(again->revision, 2);
  EXPECT_EQ(again->id, "acme/2026-11#2");
  EXPECT_EQ(again->supersedes, "acme/2026-11");
  auto other = rate(card, usage, {"globex", 0, 0});
  EXPECT_FALSE(reissue_invoice(inv, other));
}

// ---- determinism and renderers ---------------------------------------------------------------

TEST(Invoice, RecomputingFromTheSameInputsInAnyOrderIsIdentical) {
  Price premium;
  premium.offering = "premium";
  premium.model = PricingModel::kGraduated;
  premium.tiers = {PriceTier{0, 10, 7 * kUsd}, PriceTier{10, std::nullopt, 5 * kUsd}};
  auto card = card_with(
      {tiered("gpu/H200", PricingModel::kGraduated), premium, flat("mig/H200/1g.18gb", 333'333)});
  std::mt19937_64 rng(7);
  std::vector<UsageRecord> usage;
  for (int i = 0; i < 200; ++i) {
    int64_t s = kNov2026 - 5 * kHour + int64_t(rng() % uint64_t(40 * 24 * kHour));
    auto r =
        record("acme", "p" + std::to_string(rng() % 3), rng() % 2 ? "gpu/H200" : "mig/H200/1g.18gb",
               s, s + 1 + int64_t(rng() % uint64_t(30 * kHour)), 1 + int64_t(rng() % 4));
    if (rng() % 4 == 0) r.offering = "premium";
    r.preemptible = rng() % 5 == 0;
    usage.push_back(r);
  }
  TenantAccount acct{"acme", 825, 3 * kUsd};
  std::vector<OfferingCredit> credits = {{"premium", 3000, "below 99.0%"}};
  auto first = *compute_invoice(card, acct, november(), usage, credits);
  std::shuffle(usage.begin(), usage.end(), rng);
  auto second = *compute_invoice(card, acct, november(), usage, credits);
  EXPECT_EQ(invoice_to_json(first).dump(), invoice_to_json(second).dump());
  EXPECT_EQ(invoice_to_csv(first), invoice_to_csv(second));
  EXPECT_GT(first.total_micros, 0);
  // Splitting at month boundaries first changes nothing.
  auto split = split_at_month_boundaries(usage);
  auto third = *compute_invoice(card, acct, november(), split, credits);
  EXPECT_EQ(third.total_micros, first.total_micros);
}

TEST(Render, JsonNamesTheRateCardVersionAndAddsUp) {
  auto card = card_with({flat("gpu/H200", 2 * kUsd)});
  auto inv =
      rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + kHour)}, {"acme", 1000, 0});
  Json j = invoice_to_json(inv);
  EXPECT_EQ(j["rate_card"]["id"], "standard");
  EXPECT_EQ(j["rate_card"]["version"], 3);
  EXPECT_EQ(j["state"], "draft");
  EXPECT_EQ(j["lines"][0]["quantity_unit_hours"], "1.000000");
  EXPECT_EQ(j["total_micros"], 2'200'000);
  EXPECT_EQ(j["total"], "2.200000");
  EXPECT_EQ(j["period"]["label"], "2026-11");
}

// The keys of an invoice's JSON, in order (Json keeps them sorted).
std::vector<std::string> keys_of(const Json& j) {
  std::vector<std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) out.push_back(it.key());
  return out;
}

// What every invoice shows, and what only some do: an issued one's due date, a void one's time
// and reason, a re-issue the invoice it supersedes, a line its offering when it names one.
TEST(Render, JsonShowsKeysOnlyWhereTheyApply) {
  auto card = card_with({flat("gpu/H200", 2 * kUsd)});
  auto inv = rate(card, {record("acme", "p", "gpu/H200", kNov2026, kNov2026 + kHour)});
  const std::vector<std::string> always = {"bill_to",
                                           "currency",
                                           "id",
                                           "lines",
                                           "number",
                                           "payment_terms_days",
                                           "period",
                                           "prepaid_applied_micros",
                                           "prepaid_available_micros",
                                           "prepaid_carried_micros",
                                           "rate_card",
                                           "revision",
                                           "sla_credit_micros",
                                           "sla_credits",
                                           "state",
                                           "subtotal_micros",
                                           "tax_bps",
                                           "tax_micros",
                                           "taxable_micros",
                                           "tenant",
                                           "total",
                                           "total_micros",
                                           "usage_records"};
  Json j = invoice_to_json(inv);
  EXPECT_EQ(keys_of(j), always);
  EXPECT_TRUE(j["number"].is_null());
  EXPECT_EQ(
      keys_of(j["lines"][0]),
      (std::vector<std::string>{"amount_micros", "class", "description", "discount_bps",
                                "discount_micros", "gross_micros", "model", "price_key", "project",
                                "project_name", "quantity_micro_unit_hours", "quantity_unit_hours",
                                "resource_key", "tier", "unit_price_micros"}));
  EXPECT_EQ(keys_of(j["period"]), (std::vector<std::string>{"end", "label", "start"}));

  Invoice voided = inv;
  ASSERT_TRUE(void_invoice(voided, kDec2026, "wrong rate"));
  j = invoice_to_json(voided);
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), always.begin(), always.end());
    std::sort(extra.begin(), extra.end());
    return extra;
  };
  EXPECT_EQ(keys_of(j), with({"voided_at", "void_reason"}));
  EXPECT_EQ(j["voided_at"], "2026-12-01T00:00:00.000000Z");
  EXPECT_EQ(j["void_reason"], "wrong rate");

  auto again = reissue_invoice(voided, inv);
  ASSERT_TRUE(again);
  again->lines[0].offering = "h200-1x";
  ASSERT_TRUE(finalize_invoice(*again, kDec2026));
  again->due_at_us = kDec2026 + 30 * 24 * kHour;
  j = invoice_to_json(*again);
  EXPECT_EQ(keys_of(j), with({"due_at", "finalized_at", "supersedes"}));
  EXPECT_EQ(j["supersedes"], voided.id);
  EXPECT_EQ(j["finalized_at"], "2026-12-01T00:00:00.000000Z");
  EXPECT_EQ(j["lines"][0]["offering"], "h200-1x");
}

TEST(Render, CsvHasOneRowPerLineAndQuotesHostileText) {
  auto card = card_with({flat("gpu/H200", 2 * kUsd)});
  auto inv = rate(card, {record("acme", "=cmd|calc", "gpu/H200", kNov2026, kNov2026 + kHour),
                         record("acme", "a,\"b\"", "gpu/H200", kNov2026, kNov2026 + kHour)});
  std::string csv = invoice_to_csv(inv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 + 5);
  EXPECT_NE(csv.find("\"a,\"\"b\"\"\""), std::string::npos);
  EXPECT_NE(csv.find("\"'=cmd|calc\""), std::string::npos);
  EXPECT_NE(csv.find("total,,,,,,,,,,,4.000000,USD"), std::string::npos);
}

TEST(Render, HtmlIsSelfContainedAndEscaped) {
  auto card = card_with({flat("gpu/H200", 2 * kUsd)});
  auto inv =
      rate(card, {record("acme", "<script>x</script>", "gpu/H200", kNov2026, kNov2026 + kHour)});
  std::string html = invoice_to_html(inv);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);  // nothing external
  EXPECT_NE(html.find("Rate card: standard version 3"), std::string::npos);
  EXPECT_NE(html.find("Total due"), std::string::npos);
  EXPECT_NE(html.find(">2.00<"), std::string::npos);
}

// An issued invoice carries what an invoice does: its number, issue and due dates, who it is
// addressed to, and lines a customer understands.
TEST(Render, AnIssuedInvoiceNamesItsPartiesNumberAndDates) {
  auto card = card_with({flat("gpu/H200", 2 * kUsd)});
  auto inv = rate(card, {record("acme", "prj_1", "gpu/H200", kNov2026, kNov2026 + kHour)});
  ASSERT_EQ(inv.lines.size(), 1u);
  inv.lines[0].project_name = "ml";
  EXPECT_EQ(line_description(inv.lines[0]), "H200 GPU, on-demand, project ml");
  std::string draft = invoice_to_html(inv);
  EXPECT_NE(draft.find("<h1>Invoice (not issued): acme, 2026-11</h1>"), std::string::npos) << draft;
  EXPECT_EQ(draft.find("Due date"), std::string::npos);

  inv.bill_to = {.name = "acme", .legal_name = "Acme <Corp>", .address = "1 Main St\nSpringfield"};
  inv.number = "INV-000007";
  inv.state = InvoiceState::kFinalized;
  inv.finalized_at_us = kDec2026;
  inv.payment_terms_days = 30;
  inv.due_at_us = kDec2026 + 30 * 24 * kHour;
  std::string html = invoice_to_html(inv);
  EXPECT_NE(html.find("<h1>Invoice INV-000007</h1>"), std::string::npos) << html;
  EXPECT_NE(html.find("Acme &lt;Corp&gt; (acme)<br>1 Main St<br>Springfield"), std::string::npos)
      << html;
  EXPECT_NE(html.find("Issue date: 2026-12-01"), std::string::npos) << html;
  EXPECT_NE(html.find("Due date: 2026-12-31 (net 30 days)"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>H200 GPU, on-demand, project ml</td>"), std::string::npos) << html;
  Json j = invoice_to_json(inv);
  EXPECT_EQ(j["number"], "INV-000007");
  EXPECT_EQ(j["due_at"], "2026-12-31T00:00:00.000000Z");
  EXPECT_EQ(j["bill_to"]["legal_name"], "Acme <Corp>");
  EXPECT_EQ(j["lines"][0]["description"], "H200 GPU, on-demand, project ml");

  LineItem mig = inv.lines[0];
  mig.resource_key = "mig/H200/3g.71gb";
  mig.usage_class = UsageClass::kSpot;
  mig.offering = "h200-mig-3g";
  EXPECT_EQ(line_description(mig),
            "H200 MIG 3g.71gb instance, spot, project ml, offering h200-mig-3g");
}

// ---- budgets ---------------------------------------------------------------------------------

TEST(Budget, ThresholdsAreCrossedOnceExactly) {
  Budget b{"acme", "", 1000 * kUsd, {5000, 8000, 10000}, false};
  auto d = *evaluate_budget(b, 400 * kUsd, 100 * kUsd, "USD");  // exactly 50%
  ASSERT_EQ(d.crossed.size(), 1u);
  EXPECT_EQ(d.crossed[0].threshold_bps, 5000);
  EXPECT_EQ(d.crossed[0].threshold_micros, 500 * kUsd);
  EXPECT_FALSE(d.refused);
  EXPECT_TRUE(evaluate_budget(b, 500 * kUsd, 0, "USD")->crossed.empty());  // already crossed
  EXPECT_TRUE(evaluate_budget(b, 400 * kUsd, 100 * kUsd - 1, "USD")->crossed.empty());
  auto two = *evaluate_budget(b, 500 * kUsd - 1, 300 * kUsd + 1, "USD");
  ASSERT_EQ(two.crossed.size(), 2u);
  EXPECT_EQ(two.crossed[1].threshold_bps, 8000);
  EXPECT_EQ(evaluate_budget(b, 900 * kUsd, 5000 * kUsd, "USD")->crossed.size(),
            1u);  // soft: alerts
}

TEST(Budget, HardStopRefusesSpendAboveTheAmount) {
  Budget b{"acme", "ml", 1000 * kUsd, {5000, 8000, 10000}, true};
  auto at = *evaluate_budget(b, 900 * kUsd, 100 * kUsd, "USD");  // reaching 100% is allowed
  EXPECT_FALSE(at.refused);
  ASSERT_EQ(at.crossed.size(), 1u);
  EXPECT_EQ(at.crossed[0].threshold_bps, 10000);
  auto over = *evaluate_budget(b, 900 * kUsd, 100 * kUsd + 1, "USD");
  EXPECT_TRUE(over.refused);
  EXPECT_EQ(over.code, "budget_exceeded");
  EXPECT_TRUE(over.crossed.empty());
  EXPECT_NE(over.reason.find("project 'acme/ml'"), std::string::npos);
  EXPECT_NE(over.reason.find("1000.00 USD"), std::string::npos) << over.reason;
  EXPECT_FALSE(evaluate_budget(b, 2000 * kUsd, 0, "USD")->refused);  // evaluating past spend only
}

TEST(Budget, BadBudgetsAreRejected) {
  EXPECT_FALSE(validate_budget({"acme", "", 0, {5000}, false}));
  EXPECT_FALSE(validate_budget({"acme", "", kUsd, {8000, 5000}, false}));
  EXPECT_FALSE(validate_budget({"acme", "", kUsd, {0}, false}));
  EXPECT_FALSE(validate_budget({"", "", kUsd, {5000}, false}));
  EXPECT_FALSE(evaluate_budget({"acme", "", kUsd, {5000}, false}, -1, 0, "USD"));
  auto parsed = parse_budget(Json::parse(
      R"({"tenant":"acme","project":"ml","amount_micros":5000000,"thresholds_bps":[5000,10000],"hard_stop":true})"));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_TRUE(parsed->hard_stop);
  EXPECT_EQ(parsed->thresholds_bps.size(), 2u);
  auto unknown = parse_budget(Json::parse(R"({"tenant":"acme","amount_micros":5,"limit":1})"));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown field 'limit'"), std::string::npos);
}

}  // namespace
}  // namespace gp::billing
