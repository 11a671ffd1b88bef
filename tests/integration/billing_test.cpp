// Rate cards through the API: operators publish immutable versions; everyone reads prices.
// Billing accounts and invoices: drafts rated from metered usage with exact lines and totals,
// finalize (immutable, prepaid credit applied), verify, void and re-issue, CSV and HTML, the
// monthly run over every tenant, tenant isolation, and bad inputs that change nothing.
#include "billing/billing.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

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

// A price for an offering nobody created is published (the offering may come next) with a
// warning that it prices nothing yet; an existing offering draws none.
TEST(RateCards, APriceForAnOfferingThatDoesNotExistIsWarnedAbout) {
  TestServer s;
  ASSERT_EQ(s.request("POST", "/v1/offerings",
                      {{"name", "h200-1x"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}},
                      s.admin_token())
                .status,
            201);
  Json c = card();
  c["prices"].push_back({{"offering", "h200-1x"}, {"unit_price_micros", 4'000'000}});
  auto known = s.request("POST", "/v1/rate-cards", c, s.admin_token());
  ASSERT_EQ(known.status, 201) << known.raw;
  EXPECT_FALSE(known.body.contains("warnings")) << known.raw;
  c["prices"].push_back({{"offering", "h200-typo"}, {"unit_price_micros", 4'000'000}});
  auto typo = s.request("POST", "/v1/rate-cards", c, s.admin_token());
  ASSERT_EQ(typo.status, 201) << typo.raw;
  ASSERT_EQ(typo.body.value("warnings", Json::array()).size(), 1u) << typo.raw;
  EXPECT_NE(typo.body["warnings"][0].get<std::string>().find("'h200-typo' does not exist"),
            std::string::npos)
      << typo.raw;
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

// ---- invoices from metered usage ----

constexpr int64_t kGpuPrice = 3'500'000;  // per GPU-hour
constexpr int64_t kMigPrice = 1'600'000;  // per 3g instance-hour (first 100 h)

class Invoices : public ::testing::Test {
 protected:
  TestServer s;
  std::string admin;

  struct Tenant {
    TenantInfo info;
    std::string project;
    std::string base() const { return "/v1/tenants/" + info.id; }
    std::string allocations() const { return base() + "/projects/" + project + "/allocations"; }
  };

  void SetUp() override {
    admin = s.admin_token();
    at("2026-10-31T22:00:00Z");
    Json nodes = Json::array({{{"inventory", h200_inventory("gpu-a", 8)}}});
    ASSERT_EQ(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, admin).status, 201);
    for (Json o : {Json{{"name", "h200-1x"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}},
                   Json{{"name", "h200-mig-3g"},
                        {"tier", "mig"},
                        {"models", {"H200"}},
                        {"mig_profile", "3g.71gb"}}}) {
      auto c = s.request("POST", "/v1/offerings", o, admin);
      ASSERT_EQ(c.status, 201) << c.raw;
    }
    Json c = card();
    c["id"] = "default";
    c["effective_from"] = "2026-01-01T00:00:00Z";
    auto r = s.request("POST", "/v1/rate-cards", c, admin);
    ASSERT_EQ(r.status, 201) << r.raw;
  }

  void at(const std::string& when) {
    TimePoint tp;
    ASSERT_TRUE(parse_rfc3339(when, &tp));
    s.clock().set(tp);
  }

  Tenant tenant(const std::string& name) {
    Tenant t;
    t.info = s.create_tenant(name, name + "-admin");
    auto p =
        s.request("PATCH", "/v1/tenants/" + t.info.id, {{"isolation_class", "internal"}}, admin);
    EXPECT_EQ(p.status, 200) << p.raw;
    t.project = s.create_project(t.info.admin_token, t.info.id, name + "-prj").at("id");
    auto q =
        s.request("PUT", t.base() + "/quota", {{"models", {{"H200", {{"nominal", 4}}}}}}, admin);
    EXPECT_EQ(q.status, 200) << q.raw;
    return t;
  }

  std::string allocate(const Tenant& t, const std::string& offering, int count) {
    auto r = s.request("POST", t.allocations(), {{"offering", offering}, {"count", count}},
                       t.info.admin_token);
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.body.value("id", "");
  }

  void release(const Tenant& t, const std::string& id) {
    auto r = s.request("POST", t.allocations() + "/" + id + "/release", Json::object(),
                       t.info.admin_token);
    EXPECT_EQ(r.status, 200) << r.raw;
  }

  void advance_minutes(int m) { s.clock().advance(std::chrono::minutes(m)); }

  Resp draft(const Tenant& t, const Json& body) {
    return s.request("POST", t.base() + "/invoices", body, admin);
  }

  std::vector<Json> invoices(const Tenant& t) { return s.list_all(admin, t.base() + "/invoices"); }

  Json account(const Tenant& t) {
    auto r = s.request("GET", t.base() + "/billing-account", nullptr, admin);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }

  // The line of `resource_key`, or null.
  static Json line(const Json& inv, const std::string& resource_key) {
    for (const auto& l : inv["lines"])
      if (l["resource_key"] == resource_key) return l;
    return nullptr;
  }
};

TEST_F(Invoices, DraftRefreshFinalizeVerifyVoidReissueWithExactTotals) {
  auto acme = tenant("acme");
  auto bolt = tenant("bolt");
  // Tenant admins read the account but only operators set it.
  auto denied =
      s.request("PUT", acme.base() + "/billing-account", {{"tax_bps", 0}}, acme.info.admin_token);
  EXPECT_TRUE(IsProblem(denied, 403, "permission_denied")) << denied.raw;
  auto set = s.request("PUT", acme.base() + "/billing-account",
                       {{"rate_card", "default"},
                        {"tax_bps", 1000},
                        {"prepaid_credit_micros", 5'000'000},
                        {"legal_name", "Acme Corporation"},
                        {"billing_address", "1 Main Street\nSpringfield"},
                        {"payment_terms_days", 30}},
                       admin);
  ASSERT_EQ(set.status, 200) << set.raw;
  EXPECT_EQ(set.body["legal_name"], "Acme Corporation");
  EXPECT_TRUE(IsProblem(
      s.request("PUT", acme.base() + "/billing-account", {{"payment_terms_days", 400}}, admin), 400,
      "invalid_argument"));
  EXPECT_EQ(set.body["version"], 1);
  auto mine = s.request("GET", acme.base() + "/billing-account", nullptr, acme.info.admin_token);
  ASSERT_EQ(mine.status, 200) << mine.raw;
  EXPECT_EQ(mine.body["prepaid_credit_micros"], 5'000'000);
  EXPECT_TRUE(IsProblem(
      s.request("PUT", acme.base() + "/billing-account", {{"rate_card", "no-such-card"}}, admin),
      400, "invalid_argument"));

  // 22:00 two GPUs; 23:00 one MIG 3g instance; 23:30 the GPUs are released; the MIG instance
  // runs on into November.
  const std::string gpus = allocate(acme, "h200-1x", 2);
  advance_minutes(30);
  auto first = draft(acme, {{"period", "2026-10"}});
  ASSERT_EQ(first.status, 201) << first.raw;
  const std::string id = first.body["id"];
  EXPECT_TRUE(id.starts_with("inv_")) << id;
  EXPECT_EQ(id.find_first_of("/#"), std::string::npos);
  EXPECT_EQ(first.body["label"], acme.info.id + "/2026-10");
  EXPECT_EQ(first.body["state"], "draft");
  ASSERT_EQ(first.body["lines"].size(), 1u) << first.raw;
  // 2 GPUs x 0.5 h = 1 GPU-hour so far.
  EXPECT_EQ(line(first.body, "gpu/H200")["quantity_micro_unit_hours"], 1'000'000);
  EXPECT_EQ(first.body["subtotal_micros"], kGpuPrice);
  // Too early to finalize: the month has not ended.
  auto early = s.request("POST", acme.base() + "/invoices/" + id + "/finalize", nullptr, admin);
  EXPECT_TRUE(IsProblem(early, 409, "conflict")) << early.raw;

  advance_minutes(30);
  allocate(acme, "h200-mig-3g", 1);
  advance_minutes(30);
  release(acme, gpus);
  at("2026-11-01T00:30:00Z");

  // Finalizing the draft rated before the month ended is refused: refresh first.
  auto stale = s.request("POST", acme.base() + "/invoices/" + id + "/finalize", nullptr, admin);
  EXPECT_TRUE(IsProblem(stale, 409, "conflict")) << stale.raw;
  EXPECT_NE(stale.body.value("detail", "").find("refresh"), std::string::npos) << stale.raw;

  auto refreshed = draft(acme, {{"period", "2026-10"}});
  ASSERT_EQ(refreshed.status, 200) << refreshed.raw;
  EXPECT_EQ(refreshed.body["id"], id);
  EXPECT_EQ(refreshed.body["version"], 2);
  ASSERT_EQ(refreshed.body["lines"].size(), 2u) << refreshed.raw;
  // 2 GPUs x 1.5 h = 3 GPU-hours; the MIG instance 23:00-24:00 = 1 instance-hour (October only).
  Json gpu_line = line(refreshed.body, "gpu/H200");
  Json mig_line = line(refreshed.body, "mig/H200/3g.71gb");
  EXPECT_EQ(gpu_line["quantity_micro_unit_hours"], 3'000'000);
  EXPECT_EQ(gpu_line["amount_micros"], 3 * kGpuPrice);
  EXPECT_EQ(gpu_line["project"], acme.project);
  // Lines read as a customer reads them, projects by name; a draft has no number yet.
  EXPECT_EQ(gpu_line["description"], "H200 GPU, on-demand, project acme-prj, offering h200-1x");
  EXPECT_TRUE(refreshed.body["number"].is_null()) << refreshed.raw;
  EXPECT_EQ(refreshed.body["bill_to"]["name"], "acme");
  EXPECT_EQ(mig_line["quantity_micro_unit_hours"], 1'000'000);
  EXPECT_EQ(mig_line["amount_micros"], kMigPrice);
  const int64_t subtotal = 3 * kGpuPrice + kMigPrice;  // 12,100,000
  const int64_t tax = subtotal / 10;                   // 10%: 1,210,000
  const int64_t total = subtotal + tax - 5'000'000;    // 8,310,000
  EXPECT_EQ(refreshed.body["subtotal_micros"], subtotal);
  EXPECT_EQ(refreshed.body["tax_micros"], tax);
  EXPECT_EQ(refreshed.body["prepaid_applied_micros"], 5'000'000);
  EXPECT_EQ(refreshed.body["total_micros"], total);
  EXPECT_EQ(refreshed.body["rate_card"]["id"], "default");
  EXPECT_EQ(refreshed.body["rate_card"]["version"], 1);

  // Tenant B never sees A's invoice; A's admin reads it.
  EXPECT_TRUE(
      IsProblem(s.request("GET", acme.base() + "/invoices/" + id, nullptr, bolt.info.admin_token),
                404, "not_found"));
  EXPECT_TRUE(
      IsProblem(s.request("GET", bolt.base() + "/invoices/" + id, nullptr, bolt.info.admin_token),
                404, "not_found"));
  EXPECT_EQ(
      s.request("GET", acme.base() + "/invoices/" + id, nullptr, acme.info.admin_token).status,
      200);
  // Tenant admins cannot finalize their own invoice.
  EXPECT_TRUE(IsProblem(s.request("POST", acme.base() + "/invoices/" + id + "/finalize", nullptr,
                                  acme.info.admin_token),
                        403, "permission_denied"));
  // A draft verifies as it was rated, before anyone finalizes it.
  auto checked = s.request("GET", acme.base() + "/invoices/" + id + "/verify", nullptr, admin);
  ASSERT_EQ(checked.status, 200) << checked.raw;
  EXPECT_EQ(checked.body["state"], "draft");
  EXPECT_EQ(checked.body["matches"], true) << checked.raw;
  EXPECT_EQ(checked.body["currency"], "USD");
  EXPECT_EQ(checked.body["recomputed"]["total_micros"], total);

  auto fin = s.request("POST", acme.base() + "/invoices/" + id + "/finalize", nullptr, admin);
  ASSERT_EQ(fin.status, 200) << fin.raw;
  EXPECT_EQ(fin.body["state"], "finalized");
  EXPECT_EQ(fin.body["total_micros"], total);
  EXPECT_EQ(fin.body["finalized_at"], "2026-11-01T00:30:00.000000Z");
  // Issued: the first number, due after the account's terms, addressed to its legal name.
  EXPECT_EQ(fin.body["number"], "INV-000001");
  EXPECT_EQ(fin.body["due_at"], "2026-12-01T00:30:00.000000Z");
  EXPECT_EQ(fin.body["bill_to"]["legal_name"], "Acme Corporation");
  EXPECT_EQ(fin.body["bill_to"]["address"], "1 Main Street\nSpringfield");
  EXPECT_EQ(account(acme)["prepaid_credit_micros"], 0) << "the prepaid credit was used";

  // Immutable: no refresh, no second finalize; nothing changed.
  advance_minutes(60);
  EXPECT_TRUE(IsProblem(draft(acme, {{"period", "2026-10"}}), 409, "conflict"));
  EXPECT_TRUE(
      IsProblem(s.request("POST", acme.base() + "/invoices/" + id + "/finalize", nullptr, admin),
                409, "conflict"));
  auto again = s.request("GET", acme.base() + "/invoices/" + id, nullptr, admin);
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.body, fin.body);
  EXPECT_EQ(account(acme)["prepaid_credit_micros"], 0);

  auto verify =
      s.request("GET", acme.base() + "/invoices/" + id + "/verify", nullptr, acme.info.admin_token);
  ASSERT_EQ(verify.status, 200) << verify.raw;
  EXPECT_EQ(verify.body["matches"], true) << verify.raw;
  EXPECT_EQ(verify.body["recomputed"]["total_micros"], total);
  EXPECT_TRUE(verify.body["differences"].empty());

  // CSV and HTML, by query and by Accept.
  auto csv = s.request("GET", acme.base() + "/invoices/" + id + "?format=csv", nullptr, admin);
  ASSERT_EQ(csv.status, 200) << csv.raw;
  EXPECT_EQ(csv.header("Content-Type"), "text/csv; charset=utf-8");
  EXPECT_NE(csv.header("Content-Disposition").find(".csv"), std::string::npos);
  EXPECT_TRUE(csv.raw.starts_with("kind,project,resource_key")) << csv.raw;
  EXPECT_NE(csv.raw.find("line," + acme.project +
                         ",gpu/H200,h200-1x,on_demand,0,3.000000,"
                         "3.500000,0,10.500000,0.000000,10.500000,USD"),
            std::string::npos)
      << csv.raw;
  EXPECT_NE(csv.raw.find("\ntotal,,,,,,,,,,,8.310000,USD,\n"), std::string::npos) << csv.raw;
  auto csv2 =
      s.request("GET", acme.base() + "/invoices/" + id, nullptr, admin, {{"Accept", "text/csv"}});
  EXPECT_EQ(csv2.raw, csv.raw);
  auto html =
      s.request("GET", acme.base() + "/invoices/" + id, nullptr, admin, {{"Accept", "text/html"}});
  ASSERT_EQ(html.status, 200) << html.raw;
  EXPECT_EQ(html.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(html.raw.starts_with("<!DOCTYPE html>")) << html.raw;
  EXPECT_NE(html.raw.find("@media print"), std::string::npos);
  EXPECT_NE(html.raw.find("Total due"), std::string::npos);
  EXPECT_NE(html.raw.find("8.31"), std::string::npos);
  EXPECT_NE(html.raw.find("<h1>Invoice INV-000001</h1>"), std::string::npos) << html.raw;
  EXPECT_NE(html.raw.find("Acme Corporation (acme)<br>1 Main Street<br>Springfield"),
            std::string::npos);
  EXPECT_NE(html.raw.find("Due date: 2026-12-01 (net 30 days)"), std::string::npos);
  EXPECT_EQ(html.raw.find("<script"), std::string::npos);
  EXPECT_TRUE(
      IsProblem(s.request("GET", acme.base() + "/invoices/" + id + "?format=pdf", nullptr, admin),
                400, "invalid_argument"));

  // Void needs a reason; it gives the prepaid credit back.
  EXPECT_TRUE(
      IsProblem(s.request("POST", acme.base() + "/invoices/" + id + "/void", Json::object(), admin),
                400, "invalid_argument"));
  auto voided = s.request("POST", acme.base() + "/invoices/" + id + "/void",
                          {{"reason", "wrong tax rate"}}, admin);
  ASSERT_EQ(voided.status, 200) << voided.raw;
  EXPECT_EQ(voided.body["state"], "void");
  EXPECT_EQ(voided.body["void_reason"], "wrong tax rate");
  EXPECT_EQ(account(acme)["prepaid_credit_micros"], 5'000'000);
  EXPECT_TRUE(IsProblem(
      s.request("POST", acme.base() + "/invoices/" + id + "/void", {{"reason", "twice"}}, admin),
      409, "conflict"));

  // Re-issue with the corrected tax rate: revision 2 supersedes the void one.
  ASSERT_EQ(s.request("PUT", acme.base() + "/billing-account", {{"tax_bps", 2000}}, admin).status,
            200);
  auto second = draft(acme, {{"period", "2026-10"}});
  ASSERT_EQ(second.status, 201) << second.raw;
  EXPECT_NE(second.body["id"], id);
  EXPECT_EQ(second.body["revision"], 2);
  EXPECT_EQ(second.body["supersedes"], id);
  EXPECT_EQ(second.body["label"], acme.info.id + "/2026-10#2");
  EXPECT_EQ(second.body["tax_micros"], subtotal / 5);
  EXPECT_EQ(second.body["total_micros"], subtotal + subtotal / 5 - 5'000'000);
  ASSERT_EQ(invoices(acme).size(), 2u);
  // Numbers go on in issue order; the void invoice keeps its own.
  auto reissued = s.request(
      "POST", acme.base() + "/invoices/" + second.body["id"].get<std::string>() + "/finalize",
      nullptr, admin);
  ASSERT_EQ(reissued.status, 200) << reissued.raw;
  EXPECT_EQ(reissued.body["number"], "INV-000002");

  // The audit trail has each mutation under its action.
  std::map<std::string, int> actions;
  for (const auto& rec : s.audit_records())
    if (rec.value("outcome", "") == "success") actions[rec.value("action", "")]++;
  EXPECT_EQ(actions["invoice.draft"], 3);
  EXPECT_EQ(actions["invoice.finalize"], 2);
  EXPECT_EQ(actions["invoice.void"], 1);
  EXPECT_EQ(actions["billing_account.update"], 2);
}

TEST_F(Invoices, MonthlyRunMakesOneDraftPerTenantAndOperatorsListAcrossTenants) {
  auto acme = tenant("acme");
  auto bolt = tenant("bolt");
  auto idle = tenant("idle");        // no usage, no account: no invoice
  auto dormant = tenant("dormant");  // no usage but an account: a zero invoice
  ASSERT_EQ(s.request("PUT", dormant.base() + "/billing-account", {{"tax_bps", 500}}, admin).status,
            200);
  allocate(acme, "h200-1x", 1);
  allocate(bolt, "h200-1x", 2);
  at("2026-11-01T01:00:00Z");  // both ran 2 h in October

  auto run = s.request("POST", "/v1/invoices/run", {{"period", "2026-10"}}, admin);
  ASSERT_EQ(run.status, 200) << run.raw;
  EXPECT_EQ(run.body["drafts"], 3) << run.raw;
  EXPECT_EQ(run.body["created"], 3);
  std::map<std::string, Json> by_tenant;
  for (const auto& item : run.body["items"]) by_tenant[item["tenant"]] = item;
  EXPECT_EQ(by_tenant[acme.info.id]["subtotal_micros"], 2 * kGpuPrice);
  EXPECT_EQ(by_tenant[bolt.info.id]["subtotal_micros"], 4 * kGpuPrice);
  EXPECT_EQ(by_tenant[dormant.info.id]["total_micros"], 0);
  EXPECT_FALSE(by_tenant.contains(idle.info.id));

  // Again: the same drafts, refreshed, never duplicated.
  auto rerun = s.request("POST", "/v1/invoices/run", {{"period", "2026-10"}}, admin);
  ASSERT_EQ(rerun.status, 200) << rerun.raw;
  EXPECT_EQ(rerun.body["refreshed"], 3);
  EXPECT_EQ(rerun.body["created"], 0);
  auto all = s.list_all(admin, "/v1/invoices?period=2026-10");
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(s.list_all(admin, "/v1/invoices?period=2026-10&tenant=" + bolt.info.id).size(), 1u);
  EXPECT_TRUE(s.list_all(admin, "/v1/invoices?period=2026-09").empty());

  // A finalized invoice stays as it is in later runs.
  const std::string bolt_id = by_tenant[bolt.info.id]["id"];
  ASSERT_EQ(
      s.request("POST", bolt.base() + "/invoices/" + bolt_id + "/finalize", nullptr, admin).status,
      200);
  auto third = s.request("POST", "/v1/invoices/run", {{"period", "2026-10"}}, admin);
  ASSERT_EQ(third.status, 200) << third.raw;
  EXPECT_EQ(third.body["drafts"], 2);
  EXPECT_EQ(third.body["finalized_unchanged"], 1);

  // Operators only; a tenant sees its own invoices and nobody else's.
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/invoices", nullptr, acme.info.admin_token), 403,
                        "permission_denied"));
  EXPECT_TRUE(IsProblem(
      s.request("POST", "/v1/invoices/run", {{"period", "2026-10"}}, acme.info.admin_token), 403,
      "permission_denied"));
  auto own = s.list_all(acme.info.admin_token, acme.base() + "/invoices");
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0]["tenant"], acme.info.id);
  EXPECT_TRUE(IsProblem(s.request("GET", bolt.base() + "/invoices", nullptr, acme.info.admin_token),
                        404, "not_found"));
}

// Offboarding releases the tenant's allocations and leaves the month's final draft, rated from
// the usage up to that moment; a tenant that cannot be rated is still offboarded, and says why.
TEST_F(Invoices, OffboardingLeavesTheFinalInvoiceOfTheMonth) {
  auto acme = tenant("acme");
  auto bolt = tenant("bolt");
  at("2026-11-03T10:00:00Z");
  allocate(acme, "h200-1x", 2);
  advance_minutes(90);
  auto off = s.request("DELETE", acme.base(), nullptr, admin);
  ASSERT_EQ(off.status, 200) << off.raw;
  advance_minutes(600);  // nothing accrues after offboarding
  auto list = invoices(acme);
  ASSERT_EQ(list.size(), 1u);
  auto inv = s.request("GET", acme.base() + "/invoices/" + list[0]["id"].get<std::string>(),
                       nullptr, admin);
  ASSERT_EQ(inv.status, 200) << inv.raw;
  EXPECT_EQ(inv.body["state"], "draft");
  EXPECT_EQ(inv.body["period"]["label"], "2026-11");
  EXPECT_EQ(inv.body["subtotal_micros"], 2 * kGpuPrice * 3 / 2) << inv.raw;  // 2 GPUs x 1.5 h
  Json detail;
  for (const auto& rec : s.audit_records())
    if (rec.at("action") == "tenant.offboard" && rec.at("outcome") == "success")
      detail = rec.at("detail");
  ASSERT_TRUE(detail.contains("final_invoice")) << detail.dump();
  EXPECT_EQ(detail["final_invoice"]["id"], list[0]["id"]);
  EXPECT_EQ(detail["final_invoice"]["total_micros"], 2 * kGpuPrice * 3 / 2);

  // bolt's account names a card that was withdrawn from under it: no invoice, but offboarded.
  ASSERT_EQ(
      s.request("PUT", bolt.base() + "/billing-account", {{"rate_card", "default"}}, admin).status,
      200);
  auto moved = s.store().write([&](store::Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("UPDATE billing_accounts SET rate_card_id = 'withdrawn' WHERE tenant_id = ?",
                   {bolt.info.id}));
    return ok();
  });
  ASSERT_TRUE(moved) << moved.error().message;
  allocate(bolt, "h200-1x", 1);
  advance_minutes(30);
  auto off_b = s.request("DELETE", bolt.base(), nullptr, admin);
  ASSERT_EQ(off_b.status, 200) << off_b.raw;
  EXPECT_TRUE(invoices(bolt).empty());
  for (const auto& rec : s.audit_records())  // the last offboarding: bolt's
    if (rec.at("action") == "tenant.offboard" && rec.at("outcome") == "success")
      detail = rec.at("detail");
  EXPECT_NE(detail["final_invoice"].value("not_produced", "").find("withdrawn"), std::string::npos)
      << detail.dump();
}

TEST_F(Invoices, ReservationUsageIsCommittedUseAtTheCommittedDiscount) {
  auto acme = tenant("acme");
  Json c = card();
  c["id"] = "committed";
  c["committed_discount_bps"] = 2500;
  ASSERT_EQ(s.request("POST", "/v1/rate-cards", c, admin).status, 201);
  ASSERT_EQ(s.request("PUT", acme.base() + "/billing-account", {{"rate_card", "committed"}}, admin)
                .status,
            200);
  at("2026-11-03T09:00:00Z");
  auto r = s.request("POST", acme.base() + "/reservations",
                     {{"project", acme.project},
                      {"offering", "h200-1x"},
                      {"count", 2},
                      {"start_time", "2026-11-03T10:00:00Z"},
                      {"duration_seconds", 7200}},
                     acme.info.admin_token);
  ASSERT_EQ(r.status, 201) << r.raw;
  const std::string rid = r.body["id"];
  at("2026-11-03T10:00:00Z");
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  // The same shape takes the held GPUs; one more GPU is plain on-demand use.
  auto reserved = s.request("POST", acme.allocations(), {{"offering", "h200-1x"}, {"count", 2}},
                            acme.info.admin_token);
  ASSERT_EQ(reserved.status, 201) << reserved.raw;
  EXPECT_EQ(reserved.body["placement"]["reservation"], rid) << reserved.raw;
  EXPECT_NE(reserved.body["reason"].get<std::string>().find(rid), std::string::npos);
  const std::string on_demand = allocate(acme, "h200-1x", 1);
  advance_minutes(60);
  release(acme, reserved.body["id"]);
  release(acme, on_demand);

  auto inv = draft(acme, {{"period", "2026-11"}});
  ASSERT_EQ(inv.status, 201) << inv.raw;
  Json committed, plain;
  for (const auto& l : inv.body["lines"]) (l["class"] == "committed" ? committed : plain) = l;
  ASSERT_FALSE(committed.is_null()) << inv.raw;
  ASSERT_FALSE(plain.is_null()) << inv.raw;
  EXPECT_EQ(inv.body["lines"].size(), 2u) << inv.raw;
  EXPECT_EQ(committed["quantity_micro_unit_hours"], 2'000'000);  // 2 GPUs x 1 h
  EXPECT_EQ(committed["discount_bps"], 2500);
  EXPECT_EQ(committed["amount_micros"], 2 * kGpuPrice * 3 / 4);
  EXPECT_EQ(plain["class"], "on_demand");
  EXPECT_EQ(plain["amount_micros"], kGpuPrice);
  EXPECT_EQ(inv.body["subtotal_micros"], 2 * kGpuPrice * 3 / 4 + kGpuPrice) << inv.raw;
  // The stored usage names the reservation, so re-rating raw usage (verify) finds it too.
  int64_t intervals = 0;
  auto read = s.store().read([&](store::Tx& tx) -> Result<void> {
    auto row = GP_TRY(
        tx.query_one("SELECT COUNT(*) FROM usage_intervals WHERE reservation_id = ?", {rid}));
    intervals = row->integer(0);
    return ok();
  });
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(intervals, 1);
}

TEST_F(Invoices, BadInputsAreRefusedAndChangeNothing) {
  auto acme = tenant("acme");
  allocate(acme, "h200-1x", 1);
  at("2026-11-01T01:00:00Z");
  auto ok = draft(acme, {{"period", "2026-10"}});
  ASSERT_EQ(ok.status, 201) << ok.raw;
  const Json before =
      s.request("GET", acme.base() + "/invoices/" + ok.body["id"].get<std::string>(), nullptr,
                admin)
          .body;
  for (const Json& bad : std::vector<Json>{
           {{"period", "2026-13"}},
           {{"period", "2026-1"}},
           {{"period", "26-10"}},
           {{"period", 202610}},
           {{"period", "2026-10"}, {"extra", true}},
           Json::object(),
           {{"start", "2026-10-01T00:00:00Z"}},
           {{"start", "2026-10-02T00:00:00Z"}, {"end", "2026-10-01T00:00:00Z"}},
           {{"start", "yesterday"}, {"end", "2026-10-01T00:00:00Z"}},
           {{"period", "2026-10"}, {"start", "2026-10-01T00:00:00Z"}},
           {{"start", "2024-01-01T00:00:00Z"}, {"end", "2026-01-01T00:00:00Z"}},
           {{"period", "2027-01"}},  // not started yet
       }) {
    auto r = draft(acme, bad);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << bad.dump() << ": " << r.raw;
  }
  // An on-demand period overlapping the month's draft would bill the same hours twice.
  const Json last_day = {{"start", "2026-10-31T00:00:00Z"}, {"end", "2026-11-01T00:00:00Z"}};
  auto overlap = draft(acme, last_day);
  EXPECT_TRUE(IsProblem(overlap, 409, "conflict")) << overlap.raw;
  EXPECT_NE(overlap.body.value("detail", "").find("void it first"), std::string::npos);
  EXPECT_TRUE(
      IsProblem(s.request("PUT", acme.base() + "/billing-account", {{"tax_bps", 10001}}, admin),
                400, "invalid_argument"));
  EXPECT_TRUE(
      IsProblem(s.request("PUT", acme.base() + "/billing-account", {{"discount", 1}}, admin), 400,
                "invalid_argument"));
  EXPECT_TRUE(IsProblem(s.request("GET", acme.base() + "/invoices?period=october", nullptr, admin),
                        400, "invalid_argument"));
  EXPECT_TRUE(IsProblem(s.request("GET", acme.base() + "/invoices?state=paid", nullptr, admin), 400,
                        "invalid_argument"));
  EXPECT_TRUE(IsProblem(s.request("GET", acme.base() + "/invoices/inv_nope", nullptr, admin), 404,
                        "not_found"));
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/invoices/run", {{"period", "2026-00"}}, admin), 400,
                        "invalid_argument"));
  ASSERT_EQ(invoices(acme).size(), 1u);
  auto after = s.request("GET", acme.base() + "/invoices/" + ok.body["id"].get<std::string>(),
                         nullptr, admin);
  EXPECT_EQ(after.body, before);
  EXPECT_EQ(account(acme)["stored"], false);

  // The advice works: the voided draft frees its month for the on-demand invoice.
  const std::string month_id = ok.body["id"];
  auto voided = s.request("POST", acme.base() + "/invoices/" + month_id + "/void",
                          {{"reason", "billed on demand instead"}}, admin);
  ASSERT_EQ(voided.status, 200) << voided.raw;
  EXPECT_EQ(voided.body["state"], "void");
  auto again = s.request("POST", acme.base() + "/invoices/" + month_id + "/void",
                         {{"reason", "twice"}}, admin);
  EXPECT_TRUE(IsProblem(again, 409, "conflict")) << again.raw;
  auto on_demand = draft(acme, last_day);
  EXPECT_EQ(on_demand.status, 201) << on_demand.raw;

  // An on-demand period that does not overlap is its own invoice.
  auto week = draft(acme, {{"start", "2026-09-01T00:00:00Z"}, {"end", "2026-09-08T00:00:00Z"}});
  ASSERT_EQ(week.status, 201) << week.raw;
  EXPECT_EQ(week.body["period"]["label"],
            "2026-09-01T00:00:00.000000Z/2026-09-08T00:00:00.000000Z");
}

// The property: over random allocation histories, every tenant's invoice subtotal equals its
// usage rated independently: usage intervals summed per (project, resource key, class) in SQL,
// priced and rounded once per line here.
TEST_F(Invoices, SubtotalsEqualUsageRatedIndependentlyOverRandomHistories) {
  std::vector<Tenant> tenants = {tenant("acme"), tenant("bolt"), tenant("cyan")};
  std::mt19937 rng(20261201);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  std::vector<std::pair<size_t, std::string>> live;
  for (int step = 0; step < 80; ++step) {
    const size_t ti = size_t(pick(3));
    switch (pick(4)) {
      case 0:
      case 1: {
        Json body = {{"offering", pick(2) ? "h200-1x" : "h200-mig-3g"},
                     {"count", 1 + pick(2)},
                     {"preemptible", pick(3) == 0}};
        auto r = s.request("POST", tenants[ti].allocations(), body, tenants[ti].info.admin_token);
        ASSERT_TRUE(r.status == 201 || r.status == 409 || r.status == 400) << r.raw;
        if (r.status == 201) live.emplace_back(ti, r.body["id"]);
        break;
      }
      case 2:
        if (!live.empty()) {
          size_t k = size_t(pick(int(live.size())));
          auto r = s.request(
              "POST", tenants[live[k].first].allocations() + "/" + live[k].second + "/release",
              Json::object(), tenants[live[k].first].info.admin_token);
          ASSERT_TRUE(r.status == 200 || r.status == 409) << r.raw;
          live.erase(live.begin() + long(k));
        }
        break;
      case 3:
        s.clock().advance(std::chrono::seconds(1 + pick(1800)));
        break;
    }
  }
  for (const auto& [ti, id] : live) {
    auto r = s.request("POST", tenants[ti].allocations() + "/" + id + "/release", Json::object(),
                       tenants[ti].info.admin_token);
    ASSERT_TRUE(r.status == 200 || r.status == 409) << r.raw;
  }
  // The history began at 22:00 on October 31st and ran into November: bill November.
  at("2026-12-01T00:00:00Z");
  auto run = s.request("POST", "/v1/invoices/run", {{"period", "2026-11"}}, admin);
  ASSERT_EQ(run.status, 200) << run.raw;

  // Independent rating: flat prices from the card, 60% off spot, one rounding per line.
  billing::Period nov{0, 0};
  {
    TimePoint a, b;
    ASSERT_TRUE(parse_rfc3339("2026-11-01T00:00:00Z", &a));
    ASSERT_TRUE(parse_rfc3339("2026-12-01T00:00:00Z", &b));
    nov = {to_unix_micros(a), to_unix_micros(b)};
  }
  std::map<std::string, int64_t> want;
  auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
    for (const auto& row : GP_TRY(tx.query(
             // Portable SQL (SQLite and PostgreSQL): each interval clipped to November.
             "SELECT tenant_id, project_id, resource_key, preemptible, SUM(quantity * ((CASE "
             "WHEN end_us IS NULL OR end_us > ? THEN ? ELSE end_us END) - (CASE WHEN start_us < "
             "? THEN ? ELSE start_us END))) FROM usage_intervals WHERE start_us < ? AND "
             "COALESCE(end_us, ?) > ? GROUP BY tenant_id, project_id, resource_key, preemptible",
             {nov.end_us, nov.end_us, nov.start_us, nov.start_us, nov.end_us, nov.end_us,
              nov.start_us}))) {
      const std::string key = row.text(2);
      const int64_t price = key == "gpu/H200" ? kGpuPrice : kMigPrice;
      const int64_t discount = row.integer(3) ? 6000 : 0;
      billing::Wide num = billing::Wide(row.integer(4)) * price * (10000 - discount);
      want[row.text(0)] +=
          GP_TRY(billing::round_half_even(num, billing::Wide(3'600'000'000) * 10000));
    }
    return ok();
  });
  ASSERT_TRUE(r) << r.error().message;
  std::map<std::string, int64_t> got;
  for (const auto& item : run.body["items"]) got[item["tenant"]] = item["subtotal_micros"];
  std::erase_if(want, [](const auto& kv) { return kv.second == 0; });
  std::erase_if(got, [](const auto& kv) { return kv.second == 0; });
  EXPECT_GE(want.size(), 2u);
  EXPECT_EQ(got, want);
  // And every run invoice verifies once finalized.
  for (const auto& item : run.body["items"]) {
    const std::string base = "/v1/tenants/" + item["tenant"].get<std::string>() + "/invoices/" +
                             item["id"].get<std::string>();
    ASSERT_EQ(s.request("POST", base + "/finalize", nullptr, admin).status, 200);
    auto v = s.request("GET", base + "/verify", nullptr, admin);
    EXPECT_EQ(v.body["matches"], true) << v.raw;
  }
}

}  // namespace
}  // namespace gp::it
