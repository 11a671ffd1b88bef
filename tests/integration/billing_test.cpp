// Rate cards through the API: operators publish immutable versions; everyone reads prices.
#include <gtest/gtest.h>

#include "integration/harness.h"

namespace gp::it {
namespace {

Json card(int64_t price = 3'500'000) {
  return {{"id", "standard"},
          {"currency", "USD"},
          {"effective_from", "2026-11-01T00:00:00Z"},
          {"spot_discount_bps", 6000},
          {"prices",
           {{{"resource_key", "gpu/H200"}, {"unit_price_micros", price}},
            {{"resource_key", "mig/H200/3g.71gb"},
             {"model", "graduated"},
             {"tiers",
              {{{"from_hours", 0}, {"to_hours", 100}, {"unit_price_micros", 1'600'000}},
               {{"from_hours", 100}, {"unit_price_micros", 1'400'000}}}}}}}};
}

TEST(RateCards, PublishingTheSameIdMakesImmutableVersions) {
  TestServer s;
  auto first = s.request("POST", "/v1/rate-cards", card(), s.admin_token());
  ASSERT_EQ(first.status, 201) << first.raw;
  EXPECT_EQ(first.body["version"], 1);
  EXPECT_FALSE(first.body["created_by"].get<std::string>().empty());
  auto second = s.request("POST", "/v1/rate-cards", card(3'000'000), s.admin_token());
  ASSERT_EQ(second.status, 201) << second.raw;
  EXPECT_EQ(second.body["version"], 2);

  auto versions = s.request("GET", "/v1/rate-cards/standard", nullptr, s.admin_token());
  ASSERT_EQ(versions.status, 200) << versions.raw;
  ASSERT_EQ(versions.body["versions"].size(), 2u);
  EXPECT_EQ(versions.body["versions"][0]["prices"][0]["unit_price_micros"], 3'500'000);
  EXPECT_EQ(versions.body["latest"]["version"], 2);
  EXPECT_EQ(versions.header("ETag"), "\"2\"");

  auto list = s.request("GET", "/v1/rate-cards", nullptr, s.admin_token());
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["version"], 2);

  auto audit =
      s.request("GET", "/v1/audit?action=rate_card.create&limit=100", nullptr, s.admin_token());
  ASSERT_EQ(audit.status, 200) << audit.raw;
  EXPECT_EQ(audit.body["items"].size(), 2u);

  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/rate-cards/absent", nullptr, s.admin_token()), 404,
                        "not_found"));
}

TEST(RateCards, BadCardsAreRefusedWithTheReason) {
  TestServer s;
  Json overlapping = card();
  overlapping["prices"][1]["tiers"][1]["from_hours"] = 50;
  auto r = s.request("POST", "/v1/rate-cards", overlapping, s.admin_token());
  EXPECT_TRUE(IsProblem(r, 400, "invalid_argument"));
  EXPECT_NE(r.body.value("detail", "").find("overlap"), std::string::npos) << r.raw;

  Json versioned = card();
  versioned["version"] = 7;
  r = s.request("POST", "/v1/rate-cards", versioned, s.admin_token());
  EXPECT_TRUE(IsProblem(r, 400, "invalid_argument"));
  EXPECT_NE(r.body.value("detail", "").find("assigned by the server"), std::string::npos);

  Json negative = card(-1);
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/rate-cards", negative, s.admin_token()), 400));
  Json unknown = card();
  unknown["discount"] = 5;
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/rate-cards", unknown, s.admin_token()), 400));
  auto list = s.request("GET", "/v1/rate-cards", nullptr, s.admin_token());
  EXPECT_TRUE(list.body["items"].empty()) << "nothing half-applied";
}

TEST(RateCards, TenantsReadPricesButCannotPublish) {
  TestServer s;
  ASSERT_EQ(s.request("POST", "/v1/rate-cards", card(), s.admin_token()).status, 201);
  auto t = s.create_tenant("acme", "acme-admin");
  auto r = s.request("POST", "/v1/rate-cards", card(1), t.admin_token);
  EXPECT_TRUE(IsProblem(r, 403, "permission_denied")) << r.raw;
  auto list = s.request("GET", "/v1/rate-cards", nullptr, t.admin_token);
  ASSERT_EQ(list.status, 200) << list.raw;
  EXPECT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(s.request("GET", "/v1/rate-cards", nullptr).status, 401);
}

}  // namespace
}  // namespace gp::it
