// Budgets through the API: alerts once per threshold and month from the billing sweep, the hard
// stop on allocation create (budget_exceeded, nothing created), project against tenant budgets,
// tenants without a budget never refused, isolation, strict bodies and the revenue gauges.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "integration/harness.h"

namespace gp::it {
namespace {

constexpr int64_t kUsd = 1'000'000;  // micro-units
constexpr int64_t kGpuHourPrice = 10 * kUsd;

class Budgets : public ::testing::Test {
 protected:
  TestServer s;
  std::string admin;

  void SetUp() override {
    admin = s.admin_token();
    Json nodes = Json::array({{{"inventory", h200_inventory("gpu-a", 8)}}});
    ASSERT_EQ(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, admin).status, 201);
    auto o =
        s.request("POST", "/v1/offerings",
                  {{"name", "h200-1x"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}}, admin);
    ASSERT_EQ(o.status, 201) << o.raw;
  }

  void publish_card() {
    Json card = {
        {"id", "default"},
        {"currency", "USD"},
        {"effective_from", "2026-01-01T00:00:00Z"},
        {"prices", {{{"resource_key", "gpu/H200"}, {"unit_price_micros", kGpuHourPrice}}}}};
    auto r = s.request("POST", "/v1/rate-cards", card, admin);
    ASSERT_EQ(r.status, 201) << r.raw;
  }

  TenantInfo tenant(const std::string& name) {
    TenantInfo t = s.create_tenant(name, name + "-admin");
    auto q = s.request("PUT", "/v1/tenants/" + t.id + "/quota",
                       {{"models", {{"H200", {{"nominal", 8}}}}}}, admin);
    EXPECT_EQ(q.status, 200) << q.raw;
    return t;
  }

  std::string project(const TenantInfo& t, const std::string& name) {
    return s.create_project(t.admin_token, t.id, name).at("id");
  }

  Resp allocate(const TenantInfo& t, const std::string& project, const Json& extra = {}) {
    Json body = {{"offering", "h200-1x"}, {"count", 1}};
    if (extra.is_object())
      for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return s.request("POST", "/v1/tenants/" + t.id + "/projects/" + project + "/allocations", body,
                     t.admin_token);
  }

  size_t allocation_count(const TenantInfo& t) {
    return s.list_all(admin, "/v1/tenants/" + t.id + "/allocations").size();
  }

  Resp put_budget(const TenantInfo& t, const std::string& which, const Json& body,
                  const std::string& token = {}) {
    return s.request("PUT", "/v1/tenants/" + t.id + "/budgets/" + which, body,
                     token.empty() ? t.admin_token : token);
  }

  int sweep() {
    auto r = s.api().billing_sweep();
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : -1;
  }

  void hours(int h) { s.clock().advance(std::chrono::hours(h)); }
};

TEST_F(Budgets, AlertsFireOncePerThresholdPerMonth) {
  publish_card();
  auto t = tenant("acme");
  auto p = project(t, "train");
  auto b =
      put_budget(t, "-", {{"amount_micros", 100 * kUsd}, {"thresholds_bps", {5000, 8000, 10000}}});
  ASSERT_EQ(b.status, 201) << b.raw;
  EXPECT_EQ(b.body["spend_micros"], 0);
  EXPECT_EQ(b.header("ETag"), "\"1\"");
  ASSERT_EQ(allocate(t, p).status, 201);

  hours(4);  // 40 USD
  EXPECT_EQ(sweep(), 0);
  hours(1);  // 50 USD: the 50% threshold
  EXPECT_EQ(sweep(), 1);
  EXPECT_EQ(sweep(), 0) << "an alert fires once per period";
  hours(3);  // 80 USD
  EXPECT_EQ(sweep(), 1);
  hours(2);  // 100 USD
  EXPECT_EQ(sweep(), 1);
  hours(5);  // 150 USD: nothing left to cross
  EXPECT_EQ(sweep(), 0);

  auto alerts = s.list_all(t.admin_token, "/v1/tenants/" + t.id + "/budget-alerts");
  ASSERT_EQ(alerts.size(), 3u);
  const int64_t expected_spend[] = {50 * kUsd, 80 * kUsd, 100 * kUsd};
  const int64_t thresholds[] = {5000, 8000, 10000};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(alerts[i]["threshold_bps"], thresholds[i]);
    EXPECT_EQ(alerts[i]["threshold_micros"], thresholds[i] * 100 * kUsd / 10000);
    EXPECT_EQ(alerts[i]["spend_micros"], expected_spend[i]);
    EXPECT_EQ(alerts[i]["period"], "2026-05");
    EXPECT_TRUE(alerts[i]["project_id"].is_null());
  }
  // Paginated like the other lists.
  auto page =
      s.request("GET", "/v1/tenants/" + t.id + "/budget-alerts?limit=2", nullptr, t.admin_token);
  ASSERT_EQ(page.status, 200) << page.raw;
  EXPECT_EQ(page.body["items"].size(), 2u);
  ASSERT_TRUE(page.body["next"].is_string());
  EXPECT_TRUE(IsProblem(
      s.request("GET", "/v1/tenants/" + t.id + "/budget-alerts?after=x", nullptr, t.admin_token),
      400, "invalid_argument"));

  auto list = s.request("GET", "/v1/tenants/" + t.id + "/budgets", nullptr, t.admin_token);
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(list.body["items"][0]["spend_micros"], 150 * kUsd);
  EXPECT_EQ(list.body["items"][0]["spent_bps"], 15000);
  EXPECT_DOUBLE_EQ(list.body["items"][0]["percent"].get<double>(), 150.0);
  EXPECT_EQ(list.body["items"][0]["currency"], "USD");

  int audited = 0;
  for (const auto& rec : s.audit_records())
    if (rec["action"] == "budget.alert") ++audited;
  EXPECT_EQ(audited, 3);

  // The revenue gauges the sweep set.
  auto metrics = s.request("GET", "/metrics", nullptr, admin);
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.raw.find(fmt::format(
                "gpuplane_billing_revenue_month_to_date_micros{{tenant=\"{}\"}} 150000000", t.id)),
            std::string::npos)
      << metrics.raw;
  EXPECT_NE(metrics.raw.find(fmt::format(
                "gpuplane_billing_gpu_hours_month_to_date{{tenant=\"{}\"}} 15\n", t.id)),
            std::string::npos)
      << metrics.raw;
}

TEST_F(Budgets, LoweringABudgetBelowTheSpendAlertsAtOnce) {
  publish_card();
  auto t = tenant("acme");
  auto p = project(t, "train");
  ASSERT_EQ(allocate(t, p).status, 201);
  hours(6);  // 60 USD
  auto b = put_budget(t, p, {{"amount_micros", 100 * kUsd}});
  ASSERT_EQ(b.status, 201) << b.raw;
  EXPECT_EQ(b.body["spend_micros"], 60 * kUsd);
  EXPECT_EQ(b.body["project_id"], p);
  auto alerts = s.list_all(t.admin_token, "/v1/tenants/" + t.id + "/budget-alerts");
  ASSERT_EQ(alerts.size(), 1u) << "50% already reached when the budget was set";
  EXPECT_EQ(alerts[0]["threshold_bps"], 5000);
  EXPECT_EQ(alerts[0]["project_id"], p);
  EXPECT_EQ(sweep(), 0);
}

TEST_F(Budgets, HardStopRefusesWithBudgetExceededAndCreatesNothing) {
  publish_card();
  auto t = tenant("acme");
  auto p = project(t, "train");
  ASSERT_EQ(put_budget(t, "-", {{"amount_micros", 25 * kUsd}, {"hard_stop", true}}).status, 201);

  ASSERT_EQ(allocate(t, p).status, 201) << "0 spent + 10 for the first hour fits in 25";
  hours(2);  // 20 USD spent
  const size_t before = allocation_count(t);

  // Another GPU's first hour would take the spend to 30.
  auto refused = allocate(t, p);
  EXPECT_TRUE(IsProblem(refused, 409, "budget_exceeded")) << refused.raw;
  const std::string detail = refused.body.value("detail", "");
  EXPECT_NE(detail.find("25.00 USD"), std::string::npos) << detail;
  EXPECT_NE(detail.find("20.00 USD"), std::string::npos) << detail;
  EXPECT_NE(detail.find("10.00 USD"), std::string::npos) << detail;
  EXPECT_EQ(allocation_count(t), before) << "nothing created";

  // Half an hour (5 USD) fits exactly.
  auto half = allocate(t, p, {{"duration_seconds", 1800}});
  ASSERT_EQ(half.status, 201) << half.raw;

  hours(1);  // 30 + 10 (no housekeeping here ends the half-hour one): the budget is spent
  const size_t now_count = allocation_count(t);
  auto spent = allocate(t, p, {{"duration_seconds", 60}});
  EXPECT_TRUE(IsProblem(spent, 409, "budget_exceeded")) << spent.raw;
  EXPECT_NE(spent.body.value("detail", "").find("is spent"), std::string::npos) << spent.raw;
  EXPECT_EQ(allocation_count(t), now_count);
  // A dry run says what the create says.
  auto dry =
      s.request("POST", "/v1/tenants/" + t.id + "/projects/" + p + "/allocations?dry_run=true",
                {{"offering", "h200-1x"}, {"count", 1}}, t.admin_token);
  EXPECT_TRUE(IsProblem(dry, 409, "budget_exceeded")) << dry.raw;

  // The refusal left the scheduler sound: another tenant still gets GPUs.
  auto other = tenant("bolt");
  EXPECT_EQ(allocate(other, project(other, "x")).status, 201);

  // Raising the budget lifts the stop.
  auto raised =
      put_budget(t, "-", {{"amount_micros", 1000 * kUsd}, {"hard_stop", true}}, t.admin_token);
  ASSERT_EQ(raised.status, 200) << raised.raw;
  EXPECT_EQ(allocate(t, p).status, 201);
}

// Spent, a hard stop stops what already runs too: the sweep ends the covered project's live
// allocations (budget_exhausted), audited, and leaves the other project's alone.
TEST_F(Budgets, ASpentHardStopEndsTheRunningWorkItCovers) {
  publish_card();
  auto t = tenant("acme");
  auto covered = project(t, "train"), other = project(t, "serve");
  ASSERT_EQ(put_budget(t, "train", {{"amount_micros", 25 * kUsd}, {"hard_stop", true}}).status,
            201);
  auto running = allocate(t, covered);
  ASSERT_EQ(running.status, 201) << running.raw;
  auto elsewhere = allocate(t, other);
  ASSERT_EQ(elsewhere.status, 201) << elsewhere.raw;
  const auto state = [&](const std::string& project, const Resp& a) {
    return s
        .request("GET",
                 "/v1/tenants/" + t.id + "/projects/" + project + "/allocations/" +
                     a.body["id"].get<std::string>(),
                 nullptr, t.admin_token)
        .body;
  };
  hours(2);  // 20 USD: under the amount, nothing stops
  sweep();
  EXPECT_EQ(state(covered, running)["state"], "placed");
  hours(1);  // 30 USD: spent
  sweep();
  Json ended = state(covered, running);
  EXPECT_EQ(ended["state"], "released") << ended.dump();
  EXPECT_EQ(ended["reason_code"], "budget_exhausted");
  EXPECT_NE(ended["reason"].get<std::string>().find("hard stop"), std::string::npos);
  EXPECT_EQ(state(other, elsewhere)["state"], "placed");
  bool audited = false;
  for (const auto& rec : s.audit_records())
    if (rec["action"] == "budget.hard_stop") audited = rec["detail"]["allocations_released"] == 1;
  EXPECT_TRUE(audited);
}

TEST_F(Budgets, ProjectBudgetCoversItsProjectAndTheTenantBudgetAll) {
  publish_card();
  auto t = tenant("acme");
  auto p1 = project(t, "one");
  auto p2 = project(t, "two");
  ASSERT_EQ(put_budget(t, "one", {{"amount_micros", 15 * kUsd}, {"hard_stop", true}}).status, 201);
  ASSERT_EQ(put_budget(t, "-", {{"amount_micros", 1000 * kUsd}}).status, 201);

  ASSERT_EQ(allocate(t, p1).status, 201);
  hours(1);  // project one: 10 USD
  EXPECT_TRUE(IsProblem(allocate(t, p1), 409, "budget_exceeded"));
  ASSERT_EQ(allocate(t, p2).status, 201) << "project two has no hard stop";
  hours(1);  // one: 20, two: 10, tenant: 30

  auto list = s.request("GET", "/v1/tenants/" + t.id + "/budgets", nullptr, t.admin_token);
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["items"].size(), 2u);
  for (const auto& b : list.body["items"]) {
    if (b["project_id"].is_null())
      EXPECT_EQ(b["spend_micros"], 30 * kUsd);
    else
      EXPECT_EQ(b["spend_micros"], 20 * kUsd);
  }

  // Paginated: the tenant-wide budget first (cursor "-"), then the project's.
  auto first = s.request("GET", "/v1/tenants/" + t.id + "/budgets?limit=1", nullptr, t.admin_token);
  ASSERT_EQ(first.status, 200) << first.raw;
  ASSERT_EQ(first.body["items"].size(), 1u);
  EXPECT_TRUE(first.body["items"][0]["project_id"].is_null());
  EXPECT_EQ(first.body["next"], "-");
  auto rest =
      s.request("GET", "/v1/tenants/" + t.id + "/budgets?limit=1&after=-", nullptr, t.admin_token);
  ASSERT_EQ(rest.status, 200) << rest.raw;
  ASSERT_EQ(rest.body["items"].size(), 1u);
  EXPECT_EQ(rest.body["items"][0]["project_id"], p1);
  EXPECT_TRUE(rest.body["next"].is_null());

  // A tenant-wide hard stop now covers project two as well: 30 + 10 > 35.
  ASSERT_EQ(put_budget(t, "-", {{"amount_micros", 35 * kUsd}, {"hard_stop", true}}).status, 200);
  auto r = allocate(t, p2);
  EXPECT_TRUE(IsProblem(r, 409, "budget_exceeded")) << r.raw;
  EXPECT_NE(r.body.value("detail", "").find("tenant"), std::string::npos) << r.raw;

  // Deleting the budgets lifts every stop.
  EXPECT_EQ(
      s.request("DELETE", "/v1/tenants/" + t.id + "/budgets/-", nullptr, t.admin_token).status,
      204);
  EXPECT_EQ(
      s.request("DELETE", "/v1/tenants/" + t.id + "/budgets/" + p1, nullptr, t.admin_token).status,
      204);
  EXPECT_EQ(allocate(t, p1).status, 201);
  EXPECT_TRUE(IsProblem(
      s.request("DELETE", "/v1/tenants/" + t.id + "/budgets/-", nullptr, t.admin_token), 404));
}

TEST_F(Budgets, TenantsWithoutABudgetAreNeverRefused) {
  // Without a rate card at all: nothing to rate, nothing to refuse.
  auto t = tenant("free");
  auto p = project(t, "x");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(allocate(t, p).status, 201);
  publish_card();
  // Another tenant's spent hard stop does not touch this one.
  auto capped = tenant("capped");
  auto cp = project(capped, "y");
  ASSERT_EQ(allocate(capped, cp).status, 201);
  hours(30);  // free: 900 USD, capped: 300 USD
  ASSERT_EQ(put_budget(capped, "-", {{"amount_micros", 10 * kUsd}, {"hard_stop", true}}).status,
            201);
  EXPECT_TRUE(IsProblem(allocate(capped, cp), 409, "budget_exceeded"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(allocate(t, p).status, 201);
  EXPECT_EQ(allocation_count(t), 6u);
}

TEST_F(Budgets, OtherTenantsCannotReadOrSetThem) {
  auto a = tenant("alpha");
  auto b = tenant("bravo");
  auto bp = project(b, "prj");
  ASSERT_EQ(put_budget(b, "-", {{"amount_micros", 5 * kUsd}}).status, 201);
  const std::string base = "/v1/tenants/" + b.id;
  EXPECT_TRUE(IsProblem(s.request("GET", base + "/budgets", nullptr, a.admin_token), 404));
  EXPECT_TRUE(IsProblem(s.request("GET", base + "/budget-alerts", nullptr, a.admin_token), 404));
  EXPECT_TRUE(IsProblem(put_budget(b, "-", {{"amount_micros", 1}}, a.admin_token), 404));
  EXPECT_TRUE(IsProblem(s.request("DELETE", base + "/budgets/-", nullptr, a.admin_token), 404));
  // Nor under its own tenant with the other's project.
  EXPECT_TRUE(IsProblem(put_budget(a, bp, {{"amount_micros", 1}}), 404));

  // A project member of B may read nothing it lacks billing.read for, and set nothing.
  auto user = s.create_user(b.admin_token, b.id, "dev").at("id").get<std::string>();
  s.create_binding(b.admin_token, b.id, "project-member", "user", user, bp);
  auto dev = s.key_for(b.admin_token, b.id, user);
  auto r = put_budget(b, "-", {{"amount_micros", 1}}, dev);
  EXPECT_TRUE(r.status == 403 || r.status == 404) << r.raw;
  // Operators set them too.
  EXPECT_EQ(put_budget(b, "-", {{"amount_micros", 7 * kUsd}}, admin).status, 200);

  auto got = s.request("GET", base + "/budgets/-", nullptr, b.admin_token);
  ASSERT_EQ(got.status, 200) << got.raw;
  EXPECT_EQ(got.body["amount_micros"], 7 * kUsd);
  EXPECT_EQ(got.body["version"], 2);
}

TEST_F(Budgets, BadInputsChangeNothing) {
  auto t = tenant("acme");
  project(t, "prj");
  ASSERT_EQ(put_budget(t, "-", {{"amount_micros", 50 * kUsd}}).status, 201);
  const std::vector<Json> bad = {
      {{"amount_micros", 10 * kUsd}, {"thresholds_bps", {8000, 5000}}},
      {{"amount_micros", 10 * kUsd}, {"thresholds_bps", {5000, 5000}}},
      {{"amount_micros", 10 * kUsd}, {"thresholds_bps", {0}}},
      {{"amount_micros", 10 * kUsd}, {"thresholds_bps", {"50%"}}},
      {{"amount_micros", -1}},
      {{"amount_micros", 0}},
      {{"amount_micros", "10.00"}},
      {{"amount_micros", 10 * kUsd}, {"currency", "USD"}},
      {{"amount_micros", 10 * kUsd}, {"tenant", "someone-else"}},
      {{"thresholds_bps", {5000}}},
      Json::array(),
  };
  for (const auto& body : bad) {
    auto r = put_budget(t, "-", body);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << body.dump() << " -> " << r.raw;
  }
  EXPECT_TRUE(IsProblem(put_budget(t, "no-such-project", {{"amount_micros", 1}}), 404));
  // A stale If-Match is refused as well.
  auto stale = s.request("PUT", "/v1/tenants/" + t.id + "/budgets/-", {{"amount_micros", 1}},
                         t.admin_token, {{"If-Match", "\"7\""}});
  EXPECT_TRUE(IsProblem(stale, 412, "precondition_failed")) << stale.raw;
  auto matching = s.request("PUT", "/v1/tenants/" + t.id + "/budgets/-",
                            {{"amount_micros", 60 * kUsd}}, t.admin_token, {{"If-Match", "\"1\""}});
  EXPECT_EQ(matching.status, 200) << matching.raw;

  auto list = s.request("GET", "/v1/tenants/" + t.id + "/budgets", nullptr, t.admin_token);
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["items"].size(), 1u) << "no project budget slipped in";
  EXPECT_EQ(list.body["items"][0]["amount_micros"], 60 * kUsd);
  EXPECT_EQ(list.body["items"][0]["version"], 2);
  EXPECT_EQ(list.body["items"][0]["thresholds_bps"], Json({5000, 8000, 10000}));
}

}  // namespace
}  // namespace gp::it
