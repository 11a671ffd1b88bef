#include <gtest/gtest.h>

#include "billing/billing.h"
#include "billing/fixture.h"

namespace gp::billing {
namespace {

using namespace testing;

constexpr std::string_view kCard = R"({
  "id": "standard", "version": 2, "currency": "USD",
  "effective_from": "2026-11-01T00:00:00Z",
  "spot_discount_bps": 6000, "committed_discount_bps": 2500,
  "prices": [
    {"resource_key": "gpu/H200", "unit_price_micros": 3500000},
    {"resource_key": "mig/H200/3g.71gb", "model": "volume", "tiers": [
      {"from_hours": 0, "to_hours": 1000, "unit_price_micros": 1600000},
      {"from_hours": 1000, "unit_price_micros": 1400000}]},
    {"offering": "h200-premium", "model": "graduated", "tiers": [
      {"from_hours": 0, "to_hours": 10, "unit_price_micros": 5000000},
      {"from_hours": 10, "unit_price_micros": 4000000}]}
  ]})";

// Replaces the first occurrence of `from` in the valid card.
std::string variant(std::string_view from, std::string_view to) {
  std::string s(kCard);
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(RateCard, ParsesAllPricingModelsAndRoundTrips) {
  auto card = parse_rate_card_text(kCard);
  ASSERT_TRUE(card) << card.error().message;
  EXPECT_EQ(card->version, 2);
  EXPECT_EQ(card->effective_from_us, kNov2026);
  ASSERT_EQ(card->prices.size(), 3u);
  EXPECT_EQ(card->prices[0].model, PricingModel::kFlat);
  EXPECT_EQ(card->prices[1].model, PricingModel::kVolume);
  EXPECT_EQ(card->prices[2].key(), "offering:h200-premium");
  EXPECT_EQ(card->prices[2].tiers[1].to_hours, std::nullopt);
  Json again = rate_card_to_json(*card);
  auto reparsed = parse_rate_card(again);
  ASSERT_TRUE(reparsed) << reparsed.error().message;
  EXPECT_EQ(rate_card_to_json(*reparsed).dump(), again.dump());
}

// A price shows its resource key or its offering, a flat one its unit price and a tiered one its
// tiers, and a tier its upper bound only where it has one: the stored document's exact text.
TEST(RateCard, TheJsonShowsEachKeyOnlyWhereItApplies) {
  auto card = parse_rate_card_text(kCard);
  ASSERT_TRUE(card) << card.error().message;
  EXPECT_EQ(rate_card_to_json(*card).dump(),
            R"({"committed_discount_bps":2500,"currency":"USD",)"
            R"("effective_from":"2026-11-01T00:00:00.000000Z","id":"standard","prices":[)"
            R"({"model":"flat","resource_key":"gpu/H200","unit_price_micros":3500000},)"
            R"({"model":"volume","resource_key":"mig/H200/3g.71gb","tiers":[)"
            R"({"from_hours":0,"to_hours":1000,"unit_price_micros":1600000},)"
            R"({"from_hours":1000,"unit_price_micros":1400000}]},)"
            R"({"model":"graduated","offering":"h200-premium","tiers":[)"
            R"({"from_hours":0,"to_hours":10,"unit_price_micros":5000000},)"
            R"({"from_hours":10,"unit_price_micros":4000000}]}],)"
            R"("spot_discount_bps":6000,"version":2})");
}

TEST(RateCard, VersionIsOptionalForTheServerToAssign) {
  auto card = parse_rate_card_text(variant(R"("version": 2, )", ""));
  ASSERT_TRUE(card) << card.error().message;
  EXPECT_EQ(card->version, 1);
}

TEST(RateCard, StrictParseErrorsSayWhatIsWrong) {
  struct Case {
    std::string text;
    std::string_view message;
  };
  std::vector<Case> cases = {
      {variant(R"("currency": "USD")", R"("currency": "USD", "colour": "red")"),
       "unknown field 'colour'"},
      {variant(R"("unit_price_micros": 3500000})", R"("unit_price_micros": 3500000, "x": 1})"),
       "unknown field 'x'"},
      {variant("3500000", "-1"), "is negative"},
      {variant(R"("from_hours": 1000, "unit)", R"("from_hours": 900, "unit)"), "overlap"},
      {variant(R"("from_hours": 1000, "unit)", R"("from_hours": 1100, "unit)"), "gap"},
      {variant(R"({"from_hours": 10, "unit_price_micros": 4000000})",
               R"({"from_hours": 10, "to_hours": 20, "unit_price_micros": 4000000})"),
       "last tier must be unbounded"},
      {variant(R"({"from_hours": 10, "unit_price_micros": 4000000})",
               R"({"from_hours": 10, "to_hours": 10, "unit_price_micros": 4000000},
                  {"from_hours": 10, "unit_price_micros": 1})"),
       "must be above from_hours"},
      {variant(R"("from_hours": 0, "to_hours": 1000)", R"("from_hours": 5, "to_hours": 1000)"),
       "first tier must start at from_hours 0"},
      {variant(R"("model": "volume")", R"("model": "stepped")"), "not one of flat"},
      {variant(R"("USD")", R"("usd")"), "ISO 4217"},
      {variant("2026-11-01T00:00:00Z", "November"), "not an RFC 3339 time"},
      {variant(R"("spot_discount_bps": 6000)", R"("spot_discount_bps": 10001)"),
       "spot_discount_bps"},
      {variant(R"("resource_key": "gpu/H200", )", R"("resource_key": "gpu/H200", "tiers": [], )"),
       "not tiers"},
      {variant(R"({"resource_key": "gpu/H200", "unit_price_micros": 3500000})",
               R"({"resource_key": "gpu/H200", "offering": "o", "unit_price_micros": 1})"),
       "exactly one of resource_key or offering"},
      {variant(R"("resource_key": "gpu/H200")", R"("resource_key": "gpu")"), "is not gpu/<model>"},
      {variant(R"("offering": "h200-premium")", R"("resource_key": "gpu/H200")"),
       "two prices for 'gpu/H200'"},
      {variant(R"("id": "standard")", R"("id": "Standard Card")"), "rate card id"},
      {variant(R"("unit_price_micros": 3500000)", R"("unit_price_micros": 3.5)"),
       "must be an integer"},
      {"[1]", "must be a JSON object"},
      {"{", "malformed JSON"},
  };
  for (const auto& c : cases) {
    auto r = parse_rate_card_text(c.text);
    ASSERT_FALSE(r) << c.message;
    EXPECT_NE(r.error().message.find(c.message), std::string::npos)
        << "want '" << c.message << "' in: " << r.error().message;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(RateCard, SelectsTheVersionInForce) {
  auto v1 = card_with({flat("gpu/H200", 1)});
  v1.version = 1;
  v1.effective_from_us = kNov2026;
  auto v2 = v1;
  v2.version = 2;
  v2.effective_from_us = kDec2026;
  auto v3 = v2;
  v3.version = 3;  // same start as v2: the higher version supersedes
  std::vector<RateCard> versions = {v3, v1, v2};
  EXPECT_EQ(select_rate_card(versions, "standard", kNov2026)->version, 1);
  EXPECT_EQ(select_rate_card(versions, "standard", kDec2026 - 1)->version, 1);
  EXPECT_EQ(select_rate_card(versions, "standard", kDec2026)->version, 3);
  auto none = select_rate_card(versions, "standard", kNov2026 - 1);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(select_rate_card(versions, "other", kDec2026));
}

TEST(UsageRecords, StrictParse) {
  auto ok = parse_usage_records(Json::parse(R"({"records": [
    {"tenant": "acme", "project": "ml", "resource_key": "gpu/H200", "start_us": 0,
     "end_us": 3600000000, "quantity": 2, "gpu_equivalent_units": 14000, "preemptible": true}]})"));
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_TRUE(ok->at(0).preemptible);
  EXPECT_EQ(parse_usage_record(usage_record_to_json(ok->at(0)))->quantity, 2);

  auto bad = parse_usage_records(Json::parse(R"([
    {"tenant": "acme", "project": "ml", "resource_key": "gpu/H200", "start_us": 0,
     "end_us": 3600000000, "quantity": 2},
    {"tenant": "acme", "project": "ml", "resource_key": "gpu/H200", "start_us": 10,
     "end_us": 5, "quantity": 2}])"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("record 1: usage record: end_us 5 must be after"),
            std::string::npos)
      << bad.error().message;
  auto unknown = parse_usage_records(Json::parse(
      R"([{"tenant": "a", "project": "p", "resource_key": "gpu/H200", "start_us": 0,
           "end_us": 1, "quantity": 1, "hours": 3}])"));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown field 'hours'"), std::string::npos);
  EXPECT_FALSE(parse_usage_records(Json::parse(R"({"rows": []})")));
  EXPECT_FALSE(parse_usage_records(Json::parse("3")));
}

}  // namespace
}  // namespace gp::billing
