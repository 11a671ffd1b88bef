// Metering through the API: usage intervals beside the allocation lifecycle (a property over
// random histories with rebuilds and failed transactions mid-stream), usage events from external
// meters (CloudEvents), and the usage rollups with utilization from the agents' samples.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "integration/harness.h"
#include "metering/metering.h"

namespace gp::it {
namespace {

constexpr int64_t kUsPerSecond = 1'000'000;

class Usage : public ::testing::Test {
 protected:
  TestServer s;
  std::string admin;

  void SetUp() override {
    admin = s.admin_token();
    Json nodes = Json::array();
    nodes.push_back({{"inventory", h200_inventory("gpu-a", 8)}});
    nodes.push_back({{"inventory", h200_inventory("gpu-b", 8, "r2")}});
    auto r = s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, admin);
    ASSERT_EQ(r.status, 201) << r.raw;
    for (Json o : {Json{{"name", "h200-1x"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}},
                   Json{{"name", "h200-mig-3g"},
                        {"tier", "mig"},
                        {"models", {"H200"}},
                        {"mig_profile", "3g.71gb"}},
                   Json{{"name", "h200-shared-250"},
                        {"tier", "shared"},
                        {"models", {"H200"}},
                        {"milli", 250}}}) {
      auto c = s.request("POST", "/v1/offerings", o, admin);
      ASSERT_EQ(c.status, 201) << c.raw;
    }
  }

  struct Tenant {
    TenantInfo info;
    std::string project;
    std::string base() const { return "/v1/tenants/" + info.id + "/projects/" + project; }
  };

  Tenant tenant(const std::string& name, const std::string& cls, double nominal) {
    Tenant t;
    t.info = s.create_tenant(name, name + "-admin");
    auto p = s.request("PATCH", "/v1/tenants/" + t.info.id, {{"isolation_class", cls}}, admin);
    EXPECT_EQ(p.status, 200) << p.raw;
    t.project = s.create_project(t.info.admin_token, t.info.id, name + "-prj").at("id");
    auto q = s.request("PUT", "/v1/tenants/" + t.info.id + "/quota",
                       {{"models", {{"H200", {{"nominal", nominal}}}}}}, admin);
    EXPECT_EQ(q.status, 200) << q.raw;
    return t;
  }

  int64_t now() { return to_unix_micros(s.clock().now()); }

  // Runs `fn` in a write transaction as the server's own background work does.
  void write(const std::function<Result<void>(store::Tx&)>& fn) {
    auto r = s.store().write([&](store::Tx& tx) -> Result<void> {
      s.api().allocs().begin();
      return fn(tx);
    });
    if (!r) s.api().allocs().invalidate();
    ASSERT_TRUE(r) << r.error().message;
  }

  std::vector<std::string> node_ids() {
    std::vector<std::string> out;
    for (const auto& n : s.list_all(admin, "/v1/nodes")) out.push_back(n.at("id"));
    return out;
  }

  // GPU-equivalent time per tenant, in scheduler units x microseconds, integrated from the
  // allocations' own event history (placed at, ended at) and placements: independent of metering.
  std::map<std::string, int64_t> integral_from_history() {
    std::map<std::string, int64_t> out;
    const int64_t t_now = now();
    auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
      std::map<std::string, std::pair<std::string, int64_t>> units;  // allocation -> tenant, units
      for (const auto& row : GP_TRY(tx.query(
               "SELECT id, tenant_id, placement FROM allocations WHERE placement IS NOT NULL"))) {
        Json p = Json::parse(row.text(2));
        units[row.text(0)] = {row.text(1), p["gpus"].empty() ? 0 : p["units"].get<int64_t>()};
      }
      std::map<std::string, int64_t> since;  // allocation -> when it began holding
      for (const auto& row :
           GP_TRY(tx.query("SELECT allocation_id, at, to_state FROM allocation_events ORDER BY "
                           "allocation_id, seq"))) {
        auto u = units.find(row.text(0));
        if (u == units.end()) continue;
        const std::string to = row.text(2);
        if (to == "placed") {
          since[row.text(0)] = row.integer(1);
        } else if (to != "active" && to != "pending") {
          if (auto it = since.find(row.text(0)); it != since.end()) {
            out[u->second.first] += u->second.second * (row.integer(1) - it->second);
            since.erase(it);
          }
        }
      }
      for (const auto& [id, at] : since) out[units[id].first] += units[id].second * (t_now - at);
      return ok();
    });
    EXPECT_TRUE(r) << r.error().message;
    return out;
  }

  std::map<std::string, int64_t> integral_from_intervals() {
    std::map<std::string, int64_t> out;
    auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
      for (const auto& row :
           GP_TRY(tx.query("SELECT tenant_id, SUM(units * (COALESCE(end_us, ?) - start_us)) FROM "
                           "usage_intervals GROUP BY tenant_id",
                           {now()})))
        out[row.text(0)] = row.integer(1);
      return ok();
    });
    EXPECT_TRUE(r) << r.error().message;
    return out;
  }

  // The same figure through the usage API, hour by hour (intervals cut at every hour).
  std::map<std::string, int64_t> integral_from_api(int64_t from) {
    std::map<std::string, int64_t> out;
    auto r = s.request("GET",
                       fmt::format("/v1/usage?from={}&to={}&granularity=hour&group_by=tenant",
                                   format_rfc3339(from_unix_micros(from)),
                                   format_rfc3339(from_unix_micros(now() + 1))),
                       nullptr, admin);
    EXPECT_EQ(r.status, 200) << r.raw;
    for (const auto& row : r.body["rows"]) {
      if (row["kind"] != "allocation") continue;
      out[row["tenant_id"]] += std::stoll(row["allocated_unit_us"].get<std::string>());
    }
    return out;
  }

  static void drop_zeros(std::map<std::string, int64_t>& m) {
    std::erase_if(m, [](const auto& kv) { return kv.second == 0; });
  }
};

Json ce(const std::string& tenant, const std::string& id, int64_t time_us, double quantity,
        const std::string& source = "meter://egress") {
  return {{"specversion", "1.0"},
          {"id", id},
          {"source", source},
          {"type", "dev.gpuplane.usage"},
          {"time", format_rfc3339(from_unix_micros(time_us))},
          {"tenant", tenant},
          {"data", {{"resource_key", "egress/internet"}, {"quantity", quantity}, {"unit", "GiB"}}}};
}

// The property: over random histories (placements, activations, releases, preemptions, node
// failures, expiries), with the scheduler rebuilt from the store and transactions rolled back
// mid-stream, the usage intervals integrate to exactly the GPU-equivalent time the allocation
// history implies, per tenant, and the hourly rollup of the API says the same.
TEST_F(Usage, IntervalsIntegrateToTheAllocationHistoryAcrossRebuildsAndRollbacks) {
  auto a = tenant("acme", "internal", 10);
  auto b = tenant("bolt", "standard", 10);
  const int64_t start = now();
  const std::vector<std::string> nodes = node_ids();
  ASSERT_EQ(nodes.size(), 2u);
  std::mt19937 rng(20261130);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  std::vector<std::pair<const Tenant*, std::string>> made;
  int crashes = 0, rollbacks = 0, preempted = 0, failed = 0, expired = 0;
  for (int step = 0; step < 140; ++step) {
    const Tenant& t = pick(2) == 0 ? a : b;
    switch (pick(9)) {
      case 0:
      case 1:
      case 2: {  // create
        static const char* kOfferings[] = {"h200-1x", "h200-mig-3g", "h200-shared-250"};
        std::string offering = kOfferings[pick(&t == &a ? 3 : 2)];
        Json body = {{"offering", offering},
                     {"count", 1 + pick(3)},
                     {"priority_class", pick(3) == 0 ? "high" : "low"},
                     {"preemptible", pick(2) == 0}};
        if (pick(4) == 0) body["duration_seconds"] = 60 + pick(3000);
        auto r = s.request("POST", t.base() + "/allocations", body, t.info.admin_token);
        // 400 or 409 when the shape can never fit or conflicts: not what is tested here.
        ASSERT_TRUE(r.status == 201 || r.status == 400 || r.status == 409) << r.raw;
        if (r.status == 201) made.emplace_back(&t, r.body["id"]);
        break;
      }
      case 3: {  // release one
        if (made.empty()) break;
        auto [owner, id] = made[pick(int(made.size()))];
        auto r = s.request("POST", owner->base() + "/allocations/" + id + "/release",
                           Json::object(), owner->info.admin_token);
        ASSERT_TRUE(r.status == 200 || r.status == 409) << r.raw;
        break;
      }
      case 4:  // an agent reports in: placed allocations on the node become active
        write([&](store::Tx& tx) -> Result<void> {
          GP_TRY(tx.exec("UPDATE nodes SET last_heartbeat = ?", {now()}));
          for (const auto& n : nodes) GP_TRY(s.api().allocs().acknowledge(tx, s.api().env(), n));
          return ok();
        });
        break;
      case 5:  // time passes (often across an hour), expiries and queue work follow
        s.clock().advance(std::chrono::seconds(1 + pick(2400)));
        write([&](store::Tx& tx) -> Result<void> {
          GP_TRY(s.api().allocs().tick(tx, s.api().env()));
          return ok();
        });
        break;
      case 6:  // the scheduler is rebuilt from the store (a restart)
        s.api().allocs().invalidate();
        ++crashes;
        break;
      case 7: {  // a transaction does work and then fails: all of it rolls back
        auto r = s.store().write([&](store::Tx& tx) -> Result<void> {
          s.api().allocs().begin();
          GP_TRY(s.api().allocs().tick(tx, s.api().env()));
          if (!made.empty()) {
            auto [owner, id] = made[pick(int(made.size()))];
            (void)s.api().allocs().release(tx, s.api().env(), tenancy::TenantScope(owner->info.id),
                                           id, "doomed");
          }
          return fail(Error::internal("simulated crash before commit"));
        });
        ASSERT_FALSE(r);
        s.api().allocs().invalidate();
        ++rollbacks;
        break;
      }
      case 8:  // rarely, a node fails
        if (pick(4) == 0)
          write([&](store::Tx& tx) -> Result<void> {
            GP_TRY(s.api().allocs().node_failed(tx, s.api().env(), nodes[pick(2)], "test"));
            return ok();
          });
        break;
    }
  }
  auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
    for (const auto& row : GP_TRY(
             tx.query("SELECT state, COUNT(*) FROM allocations GROUP BY state ORDER BY state"))) {
      if (row.text(0) == "preempted") preempted = int(row.integer(1));
      if (row.text(0) == "failed") failed = int(row.integer(1));
      if (row.text(0) == "expired") expired = int(row.integer(1));
    }
    return ok();
  });
  ASSERT_TRUE(r);
  // The history must have exercised what the property is about.
  EXPECT_GT(made.size(), 20u);
  EXPECT_GT(crashes, 0);
  EXPECT_GT(rollbacks, 0);
  EXPECT_GT(preempted + failed + expired, 0) << "no allocation ended other than by release";

  auto want = integral_from_history();
  auto got = integral_from_intervals();
  auto api = integral_from_api(start);
  drop_zeros(want);
  drop_zeros(got);
  drop_zeros(api);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
  EXPECT_EQ(api, want);
  // After the whole history, no interval is open for an allocation that no longer holds GPUs.
  r = s.store().read([&](store::Tx& tx) -> Result<void> {
    auto row = GP_TRY(tx.query_one(
        "SELECT COUNT(*) FROM usage_intervals ui JOIN allocations a ON a.id = ui.allocation_id "
        "WHERE ui.end_us IS NULL AND a.state NOT IN ('placed','active')"));
    EXPECT_EQ(row->integer(0), 0);
    return ok();
  });
  ASSERT_TRUE(r);
}

TEST_F(Usage, OpenIntervalsOfAllocationsThatEndedElsewhereCloseAtTheirEndOnRebuild) {
  auto t = tenant("acme", "standard", 8);
  auto c = s.request("POST", t.base() + "/allocations", {{"offering", "h200-1x"}, {"count", 2}},
                     t.info.admin_token);
  ASSERT_EQ(c.status, 201) << c.raw;
  const std::string id = c.body["id"];
  const int64_t placed = now();
  s.clock().advance(std::chrono::seconds(600));
  const int64_t ended = now();
  s.clock().advance(std::chrono::seconds(3000));
  // A row changed by another writer (an older binary, an operator's SQL) without metering.
  write([&](store::Tx& tx) -> Result<void> {
    GP_TRY(
        tx.exec("UPDATE allocations SET state = 'failed', ended_at = ? WHERE id = ?", {ended, id}));
    return ok();
  });
  s.api().allocs().invalidate();
  write([&](store::Tx& tx) -> Result<void> {
    GP_TRY(s.api().allocs().tick(tx, s.api().env()));  // rebuilds, which recovers
    return ok();
  });
  auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
    auto rows = GP_TRY(tx.query(
        "SELECT start_us, end_us, units, quantity, resource_key FROM usage_intervals WHERE "
        "allocation_id = ?",
        {id}));
    EXPECT_EQ(rows.size(), 1u);
    if (rows.size() != 1) return ok();
    EXPECT_EQ(rows[0].integer(0), placed);
    EXPECT_EQ(rows[0].opt_integer(1), std::optional<int64_t>(ended));
    EXPECT_EQ(rows[0].integer(2), 14000);
    EXPECT_EQ(rows[0].integer(3), 2);
    EXPECT_EQ(rows[0].text(4), "gpu/H200");
    return ok();
  });
  ASSERT_TRUE(r);
}

TEST_F(Usage, RollupSplitsAcrossMidnightAndShowsIdleGpus) {
  // Move to 2026-11-30T23:00Z (before onboarding, so the admin's key is fresh): the allocation
  // runs into December.
  TimePoint eve;
  ASSERT_TRUE(parse_rfc3339("2026-11-30T23:00:00Z", &eve));
  s.clock().set(eve);
  auto t = tenant("acme", "internal", 8);
  auto c = s.request("POST", t.base() + "/allocations", {{"offering", "h200-1x"}, {"count", 1}},
                     t.info.admin_token);
  ASSERT_EQ(c.status, 201) << c.raw;
  const std::string gpu = c.body["placement"]["gpus"][0]["gpu"];
  auto m = s.request("POST", t.base() + "/allocations",
                     {{"offering", "h200-shared-250"}, {"count", 1}}, t.info.admin_token);
  ASSERT_EQ(m.status, 201) << m.raw;
  // Samples: the whole GPU is idle (0%) for the first hour and 50% busy after midnight.
  write([&](store::Tx& tx) -> Result<void> {
    for (int i = 0; i < 12; ++i) {
      const int64_t at = now() + i * 600 * kUsPerSecond;
      GP_TRY(
          tx.exec("INSERT INTO gpu_samples (gpu_uuid, instance, time_us, util_pct, "
                  "mem_used_bytes) VALUES (?,?,?,?,0)",
                  {gpu, std::string(), at, int64_t(i < 6 ? 0 : 50)}));
    }
    return ok();
  });
  s.clock().advance(std::chrono::hours(2));  // 01:00 on December 1st; both still running

  auto day = s.request("GET",
                       "/v1/tenants/" + t.info.id +
                           "/usage?from=2026-11-30&to=2026-12-02&granularity=day&group_by="
                           "resource_key",
                       nullptr, t.info.admin_token);
  ASSERT_EQ(day.status, 200) << day.raw;
  std::map<std::pair<std::string, std::string>, Json> rows;
  for (const auto& row : day.body["rows"])
    rows[{row["period_start"].get<std::string>().substr(0, 10),
          row["resource_key"].get<std::string>()}] = row;
  ASSERT_EQ(rows.size(), 4u) << day.raw;
  auto row = [&](const std::string& date, const std::string& key) { return rows[{date, key}]; };
  // One GPU for 1 h on Nov 30 and 1 h on Dec 1, exactly.
  EXPECT_EQ(row("2026-11-30", "gpu/H200")["allocated_unit_us"], "25200000000000");
  EXPECT_EQ(row("2026-12-01", "gpu/H200")["allocated_unit_us"], "25200000000000");
  EXPECT_DOUBLE_EQ(row("2026-11-30", "gpu/H200")["allocated_gpu_hours"].get<double>(), 1.0);
  // Idle before midnight: allocated, sampled, but no work done.
  EXPECT_DOUBLE_EQ(row("2026-11-30", "gpu/H200")["sampled_gpu_hours"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(row("2026-11-30", "gpu/H200")["utilized_gpu_hours"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(row("2026-12-01", "gpu/H200")["utilized_gpu_hours"].get<double>(), 0.5);
  // A quarter GPU share: 1750 units.
  EXPECT_EQ(row("2026-11-30", "gpu-milli/H200")["allocated_unit_us"], "6300000000000");

  // By month, the same hours land in November and December.
  auto month = s.request(
      "GET", "/v1/tenants/" + t.info.id + "/usage?from=2026-11-01&to=2027-01-01&granularity=month",
      nullptr, t.info.admin_token);
  ASSERT_EQ(month.status, 200) << month.raw;
  ASSERT_EQ(month.body["rows"].size(), 2u) << month.raw;
  EXPECT_EQ(month.body["rows"][0]["period_start"], "2026-11-01T00:00:00.000000Z");
  EXPECT_EQ(month.body["rows"][1]["period_start"], "2026-12-01T00:00:00.000000Z");
  EXPECT_EQ(month.body["rows"][0]["allocated_unit_us"], "31500000000000");

  // CSV for spreadsheets.
  auto csv = s.request("GET",
                       "/v1/tenants/" + t.info.id +
                           "/usage?from=2026-11-30&to=2026-12-02&granularity=day&format=csv",
                       nullptr, t.info.admin_token);
  ASSERT_EQ(csv.status, 200) << csv.raw;
  EXPECT_TRUE(csv.header("Content-Type").starts_with("text/csv")) << csv.header("Content-Type");
  EXPECT_TRUE(csv.raw.starts_with("kind,period_start,period_end,tenant_id")) << csv.raw;
  EXPECT_NE(csv.raw.find("allocation,2026-11-30T00:00:00.000000Z"), std::string::npos) << csv.raw;

  // Bad queries say why.
  for (const std::string q : {"granularity=week", "group_by=tenant", "group_by=project,project",
                              "from=yesterday", "from=2026-12-02&to=2026-12-01", "format=xml",
                              "granularity=hour&from=2025-01-01&to=2026-12-01"}) {
    auto bad =
        s.request("GET", "/v1/tenants/" + t.info.id + "/usage?" + q, nullptr, t.info.admin_token);
    EXPECT_TRUE(IsProblem(bad, 400, "invalid_argument")) << q << ": " << bad.raw;
  }
}

TEST_F(Usage, EventsAreDedupedRejectedWithReasonsAndRolledUp) {
  auto t = tenant("acme", "standard", 4);
  const std::string prj = t.project;
  const int64_t t0 = now();
  Json batch = Json::array();
  batch.push_back(ce(t.info.id, "e1", t0 - 60 * kUsPerSecond, 1.5));
  batch.push_back(ce(t.info.name, "e2", t0 - 3600 * kUsPerSecond, 2));        // out of order: fine
  batch.push_back(ce(t.info.id, "e1", t0 - 60 * kUsPerSecond, 1.5));          // duplicate in batch
  batch.push_back(ce(t.info.id, "e3", t0 + 3600 * kUsPerSecond, 1));          // future
  batch.push_back(ce(t.info.id, "e4", t0 - 30LL * 86400 * kUsPerSecond, 1));  // too old
  Json bad = ce(t.info.id, "e5", t0, 1);
  bad["specversion"] = "0.3";
  batch.push_back(bad);
  Json negative = ce(t.info.id, "e6", t0, -1);
  batch.push_back(negative);
  Json with_project = ce(t.info.id, "e7", t0, 0.25);
  with_project["project"] = prj;
  batch.push_back(with_project);
  batch.push_back(ce("no-such-tenant", "e8", t0, 1));
  auto r = s.request_raw("POST", "/v1/usage-events", batch.dump(), admin,
                         {{"Content-Type", "application/cloudevents-batch+json"}});
  ASSERT_EQ(r.status, 202) << r.raw;
  EXPECT_EQ(r.body["accepted"], 3);
  EXPECT_EQ(r.body["duplicates"], 1);
  EXPECT_EQ(r.body["rejected"], 5);
  const Json& res = r.body["results"];
  EXPECT_EQ(res[2]["status"], "duplicate");
  EXPECT_NE(res[3]["reason"].get<std::string>().find("future"), std::string::npos) << res[3];
  EXPECT_NE(res[4]["reason"].get<std::string>().find("lateness"), std::string::npos) << res[4];
  EXPECT_NE(res[5]["reason"].get<std::string>().find("specversion"), std::string::npos) << res[5];
  EXPECT_NE(res[6]["reason"].get<std::string>().find("negative"), std::string::npos) << res[6];
  EXPECT_EQ(res[7]["status"], "accepted");
  EXPECT_EQ(res[8]["reason"], "tenant not found");

  // Sending the batch again adds nothing: every accepted event is now a duplicate.
  auto again = s.request_raw("POST", "/v1/usage-events", batch.dump(), admin,
                             {{"Content-Type", "application/json"}});
  ASSERT_EQ(again.status, 202) << again.raw;
  EXPECT_EQ(again.body["accepted"], 0);
  EXPECT_EQ(again.body["duplicates"], 4);

  // One event alone: application/cloudevents+json, and a rejected one is a 400 with the reason.
  auto one = s.request_raw("POST", "/v1/usage-events", ce(t.info.id, "e9", t0, 4).dump(), admin,
                           {{"Content-Type", "application/cloudevents+json"}});
  ASSERT_EQ(one.status, 202) << one.raw;
  EXPECT_EQ(one.body["accepted"], 1);
  auto malformed = s.request_raw("POST", "/v1/usage-events", R"({"specversion":"1.0"})", admin,
                                 {{"Content-Type", "application/cloudevents+json"}});
  EXPECT_TRUE(IsProblem(malformed, 400, "invalid_argument")) << malformed.raw;
  auto not_json = s.request_raw("POST", "/v1/usage-events", "[{", admin,
                                {{"Content-Type", "application/json"}});
  EXPECT_TRUE(IsProblem(not_json, 400, "invalid_argument")) << not_json.raw;
  auto xml = s.request_raw("POST", "/v1/usage-events", "<e/>", admin,
                           {{"Content-Type", "application/xml"}});
  EXPECT_TRUE(IsProblem(xml, 415)) << xml.raw;
  auto empty = s.request_raw("POST", "/v1/usage-events", "[]", admin,
                             {{"Content-Type", "application/json"}});
  EXPECT_TRUE(IsProblem(empty, 400, "invalid_argument")) << empty.raw;

  // The rollup counts each accepted event once: 1.5 + 2 + 0.25 + 4 GiB.
  auto u = s.request("GET",
                     "/v1/tenants/" + t.info.id + "/usage?from=" +
                         format_rfc3339(from_unix_micros(t0 - 86400 * kUsPerSecond)) +
                         "&to=" + format_rfc3339(from_unix_micros(t0 + kUsPerSecond)) +
                         "&granularity=month&group_by=resource_key",
                     nullptr, t.info.admin_token);
  ASSERT_EQ(u.status, 200) << u.raw;
  Json total = Json::object();
  int64_t events = 0;
  for (const auto& row : u.body["rows"]) {
    if (row["kind"] != "event") continue;
    EXPECT_EQ(row["resource_key"], "egress/internet");
    EXPECT_EQ(row["unit"], "GiB");
    total = row["quantity"];
    events += row["events"].get<int64_t>();
  }
  EXPECT_EQ(total, "7.75") << u.raw;
  EXPECT_EQ(events, 4);
}

TEST_F(Usage, WhoMayPostUsageEvents) {
  auto a = tenant("acme", "standard", 4);
  auto b = tenant("bolt", "standard", 4);
  const int64_t t0 = now();
  // A tenant admin posts for its own tenant; another tenant's events read "tenant not found".
  Json batch = Json::array(
      {ce(a.info.id, "a1", t0, 1), ce(b.info.id, "b1", t0, 1), ce(b.info.name, "b2", t0, 1)});
  auto r = s.request_raw("POST", "/v1/usage-events", batch.dump(), a.info.admin_token,
                         {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.status, 202) << r.raw;
  EXPECT_EQ(r.body["accepted"], 1);
  EXPECT_EQ(r.body["results"][1]["reason"], "tenant not found");
  EXPECT_EQ(r.body["results"][2]["reason"], "tenant not found");
  // A project member has no usage.write anywhere: 403.
  auto member = s.create_user(a.info.admin_token, a.info.id, "dev");
  s.create_binding(a.info.admin_token, a.info.id, "project-member", "user", member["id"],
                   a.project);
  const std::string dev = s.key_for(a.info.admin_token, a.info.id, member["id"]);
  auto denied = s.request_raw("POST", "/v1/usage-events", ce(a.info.id, "a2", t0, 1).dump(), dev,
                              {{"Content-Type", "application/json"}});
  EXPECT_TRUE(IsProblem(denied, 403, "permission_denied")) << denied.raw;
  // Nor may it read the tenant's usage; the operator-wide view is platform-only.
  auto read = s.request("GET", "/v1/tenants/" + a.info.id + "/usage", nullptr, dev);
  EXPECT_TRUE(IsProblem(read, 403)) << read.raw;
  auto all = s.request("GET", "/v1/usage", nullptr, a.info.admin_token);
  EXPECT_TRUE(IsProblem(all, 403)) << all.raw;
  // Without a credential: 401.
  auto anon = s.request_raw("POST", "/v1/usage-events", ce(a.info.id, "a3", t0, 1).dump(), "",
                            {{"Content-Type", "application/json"}});
  EXPECT_TRUE(IsProblem(anon, 401)) << anon.raw;
}

TEST_F(Usage, MetricsShowGpuEquivalentsHeldPerTenant) {
  auto t = tenant("acme", "standard", 8);
  auto c = s.request("POST", t.base() + "/allocations", {{"offering", "h200-1x"}, {"count", 3}},
                     t.info.admin_token);
  ASSERT_EQ(c.status, 201) << c.raw;
  ASSERT_TRUE(s.api().housekeeping(std::chrono::seconds(3600), false));
  auto m = s.request("GET", "/metrics", nullptr, s.admin_token());
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.raw.find(fmt::format("gpuplane_usage_gpu_equivalents{{tenant=\"{}\"}} 3", t.info.id)),
            std::string::npos)
      << m.raw;
}

}  // namespace
}  // namespace gp::it
