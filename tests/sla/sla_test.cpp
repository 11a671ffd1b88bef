#include "sla/sla.h"

#include <gtest/gtest.h>

namespace gp::sla {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMonth = 30LL * 24 * 3600 * kSecond;  // a 30-day period from 0
constexpr int64_t kStart = 0;

using Allocs = std::vector<AllocationInterval>;

AllocationInterval alloc(std::string tenant, std::string offering, std::string node,
                         std::vector<std::string> gpus, int64_t start, int64_t end,
                         int64_t weight = 1) {
  return AllocationInterval{std::move(tenant),
                            std::move(offering),
                            "a1",
                            std::move(node),
                            std::move(gpus),
                            start,
                            end,
                            weight};
}

Availability one(std::vector<AllocationInterval> allocs, std::vector<DowntimeInterval> down,
                 const std::map<std::string, OfferingSla, std::less<>>& slas = {}) {
  auto r = compute_availability(allocs, down, kStart, kMonth, slas);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  EXPECT_EQ(r ? r->size() : 0u, 1u);
  return r && !r->empty() ? r->front() : Availability{};
}

// Downtime of `down_us` over a 30-day allocation (2,592,000 s; 0.1% is 2,592 s).
Availability with_downtime(int64_t down_us) {
  std::vector<DowntimeInterval> down;
  if (down_us > 0)
    down.push_back({"n1", "", kStart + 100 * kSecond, kStart + 100 * kSecond + down_us});
  return one({alloc("acme", "h200", "n1", {"g0"}, kStart, kMonth)}, down);
}

TEST(Sla, TierBoundariesAreStrictlyBelow) {
  struct Case {
    int64_t down_us;
    int32_t credit_bps;
    bool met;
  };
  const int64_t tenth = 2592 * kSecond;  // exactly 0.1% of the month
  for (auto c : std::vector<Case>{
           {0, 0, true},
           {tenth - 1, 0, true},
           {tenth, 0, true},           // exactly 99.9%: target met, no credit
           {tenth + 1, 1000, false},   // just below 99.9%
           {10 * tenth, 1000, false},  // exactly 99.0%: still the 10% tier
           {10 * tenth + 1, 3000, false},
           {50 * tenth, 3000, false},  // exactly 95.0%
           {50 * tenth + 1, 10000, false},
           {kMonth - 100 * kSecond, 10000, false},  // down for the rest of the month
       }) {
    auto a = with_downtime(c.down_us);
    EXPECT_EQ(a.credit_bps, c.credit_bps) << c.down_us;
    EXPECT_EQ(a.met_target, c.met) << c.down_us;
  }
  auto at = with_downtime(tenth);
  EXPECT_EQ(at.availability_ppm, 999'000);
  EXPECT_EQ(format_availability(at), "99.900000%");
  auto below = with_downtime(tenth + 1);
  EXPECT_EQ(below.availability_ppm, 998'999);  // floor of 99.89999996%
  EXPECT_NE(below.reason.find("below 99.9000%"), std::string::npos) << below.reason;
}

TEST(Sla, OverlappingDowntimeIsCountedOnceAndOnlyWhileAllocated) {
  auto a = one({alloc("acme", "h200", "n1", {"g0", "g1"}, 1000 * kSecond, 2000 * kSecond)},
               {{"n1", "", 900 * kSecond, 1100 * kSecond},     // 100 s inside
                {"n1", "g1", 1050 * kSecond, 1200 * kSecond},  // overlaps: +100 s
                {"n1", "g7", 1500 * kSecond, 1600 * kSecond},  // another GPU: not ours
                {"n2", "", 1000 * kSecond, 2000 * kSecond},    // another node
                {"n1", "", 2000 * kSecond, 3000 * kSecond}});  // after release
  EXPECT_TRUE(a.entitled == 1000 * kSecond);
  EXPECT_TRUE(a.downtime == 200 * kSecond);
  EXPECT_EQ(a.availability_ppm, 800'000);
  EXPECT_EQ(a.credit_bps, 10000);
}

TEST(Sla, WholeNodeAllocationsAreHitByAnyGpuFailure) {
  auto a =
      one({alloc("acme", "node", "n1", {}, 0, 1000 * kSecond)}, {{"n1", "g3", 0, 10 * kSecond}});
  EXPECT_TRUE(a.downtime == 10 * kSecond);
}

TEST(Sla, WeightsAndTenantsAndOfferingsAreSeparate) {
  std::vector<AllocationInterval> allocs = {
      alloc("acme", "h200", "n1", {"g0"}, 0, 1000 * kSecond, 7000),
      alloc("acme", "h200", "n2", {"g0"}, 0, 1000 * kSecond, 21000),
      alloc("acme", "mig", "n1", {"g0"}, 0, 1000 * kSecond),
      alloc("globex", "h200", "n3", {"g0"}, 0, 1000 * kSecond),
  };
  std::vector<DowntimeInterval> down = {{"n1", "g0", 0, 100 * kSecond}};
  auto r = *compute_availability(allocs, down, 0, kMonth);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].tenant, "acme");
  EXPECT_EQ(r[0].offering, "h200");
  // n1 is 1/4 of acme's h200 weight and was down 10% of the time: 2.5% downtime.
  EXPECT_EQ(r[0].availability_ppm, 975'000);
  EXPECT_EQ(r[0].credit_bps, 3000);
  EXPECT_EQ(r[1].offering, "mig");
  EXPECT_EQ(r[1].availability_ppm, 900'000);
  EXPECT_EQ(r[2].tenant, "globex");
  EXPECT_EQ(r[2].credit_bps, 0);
  EXPECT_TRUE(r[2].met_target);
}

TEST(Sla, AllocationsAreClippedToThePeriod) {
  std::vector<DowntimeInterval> before = {{"n1", "", -kMonth, 0}};
  auto r = *compute_availability(Allocs{alloc("acme", "h200", "n1", {}, -kMonth, 2 * kMonth)},
                                 before, 0, kMonth);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].entitled == kMonth);
  EXPECT_TRUE(r[0].downtime == 0);
}

TEST(Sla, PerOfferingPoliciesOverrideTheDefault) {
  std::map<std::string, OfferingSla, std::less<>> slas;
  slas["h200"] = OfferingSla{"h200", 999'500, {{999'500, 500}, {990'000, 2500}}};
  const int64_t tenth = 2592 * kSecond;
  auto a = one({alloc("acme", "h200", "n1", {"g0"}, kStart, kMonth)}, {{"n1", "", 0, tenth}},
               slas);  // 99.9% is below the 99.95% target
  EXPECT_FALSE(a.met_target);
  EXPECT_EQ(a.credit_bps, 500);
}

TEST(Sla, BadInputIsRejected) {
  std::vector<DowntimeInterval> none;
  EXPECT_FALSE(compute_availability(Allocs{alloc("", "h200", "n1", {}, 0, 1)}, none, 0, kMonth));
  EXPECT_FALSE(compute_availability(Allocs{alloc("a", "h200", "n1", {}, 5, 5)}, none, 0, kMonth));
  EXPECT_FALSE(
      compute_availability(Allocs{alloc("a", "h200", "n1", {}, 0, 5, 0)}, none, 0, kMonth));
  std::vector<DowntimeInterval> bad = {{"", "", 0, 1}};
  EXPECT_FALSE(compute_availability({}, bad, 0, kMonth));
  EXPECT_FALSE(compute_availability({}, none, 5, 5));
  std::map<std::string, OfferingSla, std::less<>> slas;
  slas["x"] = OfferingSla{"x", 999'000, {{990'000, 1000}, {999'000, 3000}}};  // ascending
  EXPECT_FALSE(compute_availability({}, none, 0, kMonth, slas));
  slas["x"] = OfferingSla{"x", 999'000, {{999'000, 3000}, {990'000, 1000}}};  // credit falls
  EXPECT_FALSE(compute_availability({}, none, 0, kMonth, slas));

  auto parsed = parse_offering_sla(Json::parse(
      R"({"offering":"h200","target_ppm":999000,"tiers":[{"below_ppm":999000,"credit_bps":1000}]})"));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->tiers.size(), 1u);
  auto unknown = parse_offering_sla(Json::parse(R"({"offering":"h200","target_ppm":1,"x":1})"));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown field 'x'"), std::string::npos);
}

TEST(Sla, NoEntitledTimeMeansNoResult) {
  std::vector<DowntimeInterval> down = {{"n1", "", 0, kMonth}};
  auto r = compute_availability({}, down, 0, kMonth);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
}

}  // namespace
}  // namespace gp::sla
