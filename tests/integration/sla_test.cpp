// SLA accounting through the API: node outages become downtime in the same transaction as the
// fleet change, allocations on the node lose exactly that time, the monthly standing shows the
// exact availability and the credit tier it reaches (boundaries included), offering SLAs change
// the tiers, tenants see only their own standing, and bad input changes nothing.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "integration/harness.h"

namespace gp::it {
namespace {

constexpr int64_t kGpuUnits = 7000;  // scheduler units of one whole GPU
constexpr int64_t kUs = 1'000'000;

class Sla : public ::testing::Test {
 protected:
  TestServer s;
  std::string admin;
  TenantInfo acme, bravo;
  std::string acme_project, bravo_project;

  void SetUp() override {
    admin = s.admin_token();
    Json nodes = Json::array();
    nodes.push_back({{"inventory", h200_inventory("gpu-a", 2)}});
    nodes.push_back({{"inventory", h200_inventory("gpu-b", 2, "r2")}});
    ASSERT_EQ(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, admin).status, 201);
    auto o =
        s.request("POST", "/v1/offerings",
                  {{"name", "h200-1x"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}}, admin);
    ASSERT_EQ(o.status, 201) << o.raw;
    acme = s.create_tenant("acme", "acme-admin");
    bravo = s.create_tenant("bravo", "bravo-admin");
    for (auto* t : {&acme, &bravo}) {
      auto q = s.request("PUT", "/v1/tenants/" + t->id + "/quota",
                         {{"models", {{"H200", {{"nominal", 4}}}}}}, admin);
      ASSERT_EQ(q.status, 200) << q.raw;
    }
    acme_project = s.create_project(acme.admin_token, acme.id, "acme-prj").at("id");
    bravo_project = s.create_project(bravo.admin_token, bravo.id, "bravo-prj").at("id");
  }

  std::string period() { return format_rfc3339(s.clock().now()).substr(0, 7); }
  void advance(int64_t seconds) { s.clock().advance(std::chrono::seconds(seconds)); }

  // One h200-1x GPU for the tenant; returns its node.
  std::string allocate(const TenantInfo& t, const std::string& project) {
    auto r = s.request("POST", "/v1/tenants/" + t.id + "/projects/" + project + "/allocations",
                       {{"offering", "h200-1x"}}, t.admin_token);
    EXPECT_EQ(r.status, 201) << r.raw;
    EXPECT_EQ(r.body["state"], "placed") << r.raw;
    return r.body["placement"]["nodes"][0];
  }
  void node(const std::string& id, const std::string& verb, const std::string& reason = "") {
    Json body = Json::object();
    if (!reason.empty()) body["reason"] = reason;
    auto r = s.request("POST", "/v1/nodes/" + id + "/" + verb, body, admin);
    ASSERT_EQ(r.status, 200) << verb << ": " << r.raw;
  }
  Json standing(const std::string& target, const std::string& token) {
    auto r = s.request("GET", target, nullptr, token);
    EXPECT_EQ(r.status, 200) << target << ": " << r.raw;
    return r.body;
  }
  Json row(const Json& standing, const std::string& tenant_id) {
    for (const auto& i : standing["items"])
      if (i["tenant_id"] == tenant_id) return i;
    ADD_FAILURE() << "no row for " << tenant_id << " in " << standing.dump();
    return Json::object();
  }

  // acme holds a GPU for `up` seconds, then its node fails for `down` seconds and comes back
  // through maintenance; bravo's GPU, placed during the outage, lands on the other node.
  std::string outage(int64_t up, int64_t down) {
    std::string n = allocate(acme, acme_project);
    advance(up);
    node(n, "fail", "PSU");
    advance(down / 2);
    EXPECT_NE(allocate(bravo, bravo_project), n);
    advance(down - down / 2);
    node(n, "maintenance");
    node(n, "resume");
    advance(300);  // after the outage: acme's allocation failed with it, entitlement ended
    return n;
  }
};

TEST_F(Sla, ExactlyAtTheNinetyNineBoundaryEarnsTheTenPercentTier) {
  outage(990, 10);
  Json all = standing("/v1/sla?period=" + period(), admin);
  EXPECT_EQ(all["period"], period());
  ASSERT_EQ(all["items"].size(), 2u) << all.dump();
  Json a = row(all, acme.id);
  EXPECT_EQ(a["tenant"], "acme");
  EXPECT_EQ(a["offering"], "h200-1x");
  // 990 s up, then 10 s of outage it stays entitled to: exactly 99%.
  EXPECT_EQ(a["entitled_unit_us"], std::to_string(kGpuUnits * 1000 * kUs));
  EXPECT_EQ(a["downtime_unit_us"], std::to_string(kGpuUnits * 10 * kUs));
  EXPECT_EQ(a["availability"], "99.000000%");
  EXPECT_EQ(a["availability_ppm"], 990000);
  EXPECT_DOUBLE_EQ(a["downtime_gpu_minutes"].get<double>(), 10.0 / 60);
  EXPECT_EQ(a["met_target"], false);
  // Not below 99.0%: the 30% tier is not reached, below 99.9% is.
  EXPECT_EQ(a["credit_bps"], 1000);
  EXPECT_EQ(a["reason"], "availability 99.000000% below 99.9000%");
  Json b = row(all, bravo.id);
  EXPECT_EQ(b["availability"], "100.000000%");
  EXPECT_EQ(b["credit_bps"], 0);
  EXPECT_EQ(b["met_target"], true);
  EXPECT_EQ(b["entitled_unit_us"], std::to_string(kGpuUnits * (5 + 300) * kUs));
}

TEST_F(Sla, OneSecondMoreIsBelowNinetyNineAndEarnsThirtyPercent) {
  outage(989, 11);
  Json a = row(standing("/v1/sla?period=" + period(), admin), acme.id);
  EXPECT_EQ(a["availability"], "98.900000%");
  EXPECT_EQ(a["credit_bps"], 3000);
}

TEST_F(Sla, AnOutageStillOpenCountsUpToNowAndTheRawIntervalsShowIt) {
  std::string n = allocate(acme, acme_project);
  advance(900);
  node(n, "fail", "PSU");
  advance(100);
  Json a = row(standing("/v1/tenants/" + acme.id + "/sla", acme.admin_token), acme.id);
  EXPECT_EQ(a["availability"], "90.000000%");
  EXPECT_EQ(a["credit_bps"], 10000);  // below 95%
  auto d = s.request("GET", "/v1/fleet/downtime", nullptr, admin);
  ASSERT_EQ(d.status, 200) << d.raw;
  ASSERT_EQ(d.body["items"].size(), 1u) << d.raw;
  EXPECT_EQ(d.body["items"][0]["node_id"], n);
  EXPECT_EQ(d.body["items"][0]["scope"], "node");
  EXPECT_EQ(d.body["items"][0]["cause"], "PSU");
  EXPECT_TRUE(d.body["items"][0]["end"].is_null());
  EXPECT_EQ(d.body["items"][0]["seconds_in_range"], 100);
  // Tenants do not read the fleet's downtime.
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/fleet/downtime", nullptr, acme.admin_token), 403));
  // The period before holds nothing.
  const int64_t now = to_unix_micros(s.clock().now());
  Json earlier = standing(
      "/v1/sla?period=" + format_rfc3339(from_unix_micros(now - 40LL * 86400 * kUs)).substr(0, 7),
      admin);
  EXPECT_TRUE(earlier["items"].empty()) << earlier.dump();
}

TEST_F(Sla, AnOfferingSlaReplacesTheDefaultTiers) {
  outage(990, 10);
  const std::string path = "/v1/offerings/h200-1x/sla";
  auto before = s.request("GET", path, nullptr, acme.admin_token);  // any caller reads it
  ASSERT_EQ(before.status, 200) << before.raw;
  EXPECT_EQ(before.body["version"], 0);
  EXPECT_EQ(before.body["configured"], false);
  EXPECT_EQ(before.body["target"], "99.9%");
  EXPECT_EQ(before.body["tiers"].size(), 3u);
  Json sla = {{"target_ppm", 990000}, {"tiers", {{{"below_ppm", 990001}, {"credit_bps", 500}}}}};
  auto put = s.request("PUT", path, sla, admin, {{"If-Match", "\"0\""}});
  ASSERT_EQ(put.status, 200) << put.raw;
  EXPECT_EQ(put.body["version"], 1);
  EXPECT_EQ(put.body["configured"], true);
  EXPECT_EQ(put.body["target"], "99%");
  EXPECT_EQ(put.header("ETag"), "\"1\"");
  Json a = row(standing("/v1/sla?period=" + period(), admin), acme.id);
  EXPECT_EQ(a["target"], "99%");
  EXPECT_EQ(a["met_target"], true);  // exactly at the target meets it
  EXPECT_EQ(a["credit_bps"], 500);   // but 99% is below 99.0001%
  // A stale If-Match is refused and changes nothing.
  auto stale = s.request("PUT", path, {{"target_ppm", 950000}}, admin, {{"If-Match", "\"0\""}});
  EXPECT_TRUE(IsProblem(stale, 412)) << stale.raw;
  EXPECT_EQ(s.request("GET", path, nullptr, admin).body["target_ppm"], 990000);
  bool audited = false;
  for (const auto& rec : s.audit_records())
    if (rec.at("action") == "offering.sla.set" && rec.at("outcome") == "success")
      audited = rec.at("detail").at("target_ppm") == 990000;
  EXPECT_TRUE(audited);
}

TEST_F(Sla, TenantsSeeOnlyTheirOwnStanding) {
  outage(990, 10);
  Json own = standing("/v1/tenants/" + acme.id + "/sla?period=" + period(), acme.admin_token);
  ASSERT_EQ(own["items"].size(), 1u) << own.dump();
  EXPECT_EQ(own["items"][0]["tenant_id"], acme.id);
  Json theirs = standing("/v1/tenants/" + bravo.id + "/sla", bravo.admin_token);
  ASSERT_EQ(theirs["items"].size(), 1u) << theirs.dump();
  EXPECT_EQ(theirs["items"][0]["tenant_id"], bravo.id);
  // Bravo cannot read acme's standing (hidden as if absent) nor the operator view.
  EXPECT_TRUE(
      IsProblem(s.request("GET", "/v1/tenants/" + acme.id + "/sla", nullptr, bravo.admin_token),
                404, "not_found"));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/sla", nullptr, bravo.admin_token), 403));
  EXPECT_TRUE(
      IsProblem(s.request("GET", "/v1/sla?tenant=" + acme.id, nullptr, bravo.admin_token), 403));
  // The operator can narrow to one tenant.
  Json one = standing("/v1/sla?tenant=acme&period=" + period(), admin);
  ASSERT_EQ(one["items"].size(), 1u);
  EXPECT_EQ(one["items"][0]["tenant_id"], acme.id);
}

TEST_F(Sla, BadInputIsAClearErrorAndChangesNothing) {
  outage(990, 10);
  for (std::string p :
       {"2026-13", "2026-00", "2026-1", "26-05", "2026-05x", "2026/05", "", "1969-12"}) {
    auto r = s.request("GET", "/v1/sla?period=" + p, nullptr, admin);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << p << ": " << r.raw;
    EXPECT_NE(r.body.value("detail", "").find("YYYY-MM"), std::string::npos) << r.raw;
    auto t =
        s.request("GET", "/v1/tenants/" + acme.id + "/sla?period=" + p, nullptr, acme.admin_token);
    EXPECT_TRUE(IsProblem(t, 400, "invalid_argument")) << p;
  }
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/sla?tenant=nobody", nullptr, admin), 404));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/fleet/downtime?from=yesterday", nullptr, admin), 400,
                        "invalid_argument"));
  EXPECT_TRUE(IsProblem(
      s.request("GET", "/v1/fleet/downtime?from=2026-05-02&to=2026-05-01", nullptr, admin), 400));

  const std::string path = "/v1/offerings/h200-1x/sla";
  Json good = {{"target_ppm", 999000}, {"tiers", {{{"below_ppm", 999000}, {"credit_bps", 1000}}}}};
  EXPECT_TRUE(IsProblem(s.request("PUT", "/v1/offerings/nope/sla", good, admin), 404));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/offerings/nope/sla", nullptr, admin), 404));
  const std::vector<std::pair<std::string, Json>> bad = {
      {"unknown field", {{"target_ppm", 999000}, {"bogus", 1}}},
      {"unknown tier field",
       {{"target_ppm", 999000}, {"tiers", {{{"below_ppm", 999000}, {"credit_bps", 1}, {"x", 1}}}}}},
      {"missing target", {{"tiers", Json::array()}}},
      {"target out of range", {{"target_ppm", 1000001}}},
      {"target as string", {{"target_ppm", "99.9"}}},
      {"ascending tiers",
       {{"target_ppm", 999000},
        {"tiers",
         {{{"below_ppm", 990000}, {"credit_bps", 1000}},
          {{"below_ppm", 999000}, {"credit_bps", 3000}}}}}},
      {"credit over 100%",
       {{"target_ppm", 999000}, {"tiers", {{{"below_ppm", 999000}, {"credit_bps", 10001}}}}}},
      {"another offering", {{"offering", "other"}, {"target_ppm", 999000}}},
      {"not an object", Json::array({1})},
  };
  for (const auto& [what, body] : bad) {
    auto r = s.request("PUT", path, body, admin);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << what << ": " << r.raw;
  }
  auto raw = s.request_raw("PUT", path, "{\"target_ppm\": 999000,", admin,
                           {{"Content-Type", "application/json"}});
  EXPECT_TRUE(IsProblem(raw, 400)) << raw.raw;
  // Tenants may not set SLAs.
  EXPECT_TRUE(IsProblem(s.request("PUT", path, good, acme.admin_token), 403));
  auto after = s.request("GET", path, nullptr, admin);
  EXPECT_EQ(after.body["version"], 0) << after.raw;
  EXPECT_EQ(after.body["configured"], false);
  for (const auto& rec : s.audit_records())
    EXPECT_FALSE(rec.at("action") == "offering.sla.set" && rec.at("outcome") == "success");
  // And the standing is what it was.
  EXPECT_EQ(row(standing("/v1/sla?period=" + period(), admin), acme.id)["credit_bps"], 1000);
}

}  // namespace
}  // namespace gp::it

namespace gp::it {
namespace {

// The fleet summary counts a GPU as allocated while a live allocation holds it, and as free only
// when it is healthy, on a ready node, and held by nothing.
TEST_F(Sla, FleetSummaryCountsHeldGpusAsAllocated) {
  auto summary = [&] {
    auto r = s.request("GET", "/v1/fleet/summary", nullptr, admin);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body["gpus_by_model"]["H200"];
  };
  EXPECT_EQ(summary()["allocated"], 0);
  EXPECT_EQ(summary()["free"], 4);
  const std::string n = allocate(acme, acme_project);
  Json held = summary();
  EXPECT_EQ(held["allocated"], 1) << held.dump();
  EXPECT_EQ(held["free"], 3) << held.dump();
  EXPECT_EQ(held["unavailable"], 0) << held.dump();
  // The node fails: its allocation ends and neither of its GPUs is free.
  node(n, "fail", "PSU");
  Json failed = summary();
  EXPECT_EQ(failed["allocated"], 0) << failed.dump();
  EXPECT_EQ(failed["free"], 2) << failed.dump();
  EXPECT_EQ(failed["unavailable"], 2) << "the failed node's GPUs: " << failed.dump();
  EXPECT_EQ(failed["total"], 4);
}

// The credit the standing shows is the one the invoice applies: 10% of the offering's charge.
TEST_F(Sla, TheCreditTierLandsOnTheTenantsInvoice) {
  auto card = s.request("POST", "/v1/rate-cards",
                        {{"id", "default"},
                         {"currency", "USD"},
                         {"effective_from", "2020-01-01T00:00:00Z"},
                         {"prices", {{{"offering", "h200-1x"}, {"unit_price_micros", 3'600'000}}}}},
                        admin);
  ASSERT_EQ(card.status, 201) << card.raw;
  outage(990, 10);
  auto draft =
      s.request("POST", "/v1/tenants/" + acme.id + "/invoices", {{"period", period()}}, admin);
  ASSERT_EQ(draft.status, 201) << draft.raw;
  // 990 s of one GPU at 3.60 an hour; the node failure ended the allocation.
  EXPECT_EQ(draft.body["subtotal_micros"], 990'000) << draft.raw;
  ASSERT_EQ(draft.body["sla_credits"].size(), 1u) << draft.raw;
  const Json& credit = draft.body["sla_credits"][0];
  EXPECT_EQ(credit["offering"], "h200-1x");
  EXPECT_EQ(credit["credit_bps"], 1000);
  EXPECT_EQ(credit["charge_micros"], 990'000);
  EXPECT_EQ(credit["amount_micros"], 99'000);
  EXPECT_EQ(credit["reason"], "availability 99.000000% below 99.9000%");
  EXPECT_EQ(draft.body["total_micros"], 891'000);
  // Bravo met its target: the monthly run gives it no credit line.
  auto run = s.request("POST", "/v1/invoices/run", {{"period", period()}}, admin);
  ASSERT_EQ(run.status, 200) << run.raw;
  auto list = s.request("GET", "/v1/tenants/" + bravo.id + "/invoices", nullptr, admin);
  ASSERT_EQ(list.status, 200) << list.raw;
  ASSERT_EQ(list.body["items"].size(), 1u) << list.raw;
  auto inv = s.request(
      "GET",
      "/v1/tenants/" + bravo.id + "/invoices/" + list.body["items"][0]["id"].get<std::string>(),
      nullptr, admin);
  EXPECT_TRUE(inv.body["sla_credits"].empty()) << inv.raw;
  EXPECT_GT(inv.body["subtotal_micros"].get<int64_t>(), 0) << inv.raw;
}

}  // namespace
}  // namespace gp::it
