// Usage events are durable before 202: batches acknowledged while the server is killed with
// SIGKILL mid-load are all there after the restart (posting them again answers every event as
// a duplicate), and the rollup counts each stored event once. Also drives the CLI.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "process/process_util.h"
#include "store/store.h"

namespace gp::proc {
namespace {

constexpr int kMeterClients = 2;
constexpr int kBatch = 50;

Json batch_of(const std::string& tenant, const std::string& prefix) {
  Json batch = Json::array();
  const std::string now = format_rfc3339(SystemClock().now());
  for (int i = 0; i < kBatch; ++i)
    batch.push_back(
        {{"specversion", "1.0"},
         {"id", prefix + "-" + std::to_string(i)},
         {"source", "meter://crash-test"},
         {"type", "dev.gpuplane.usage"},
         {"time", now},
         {"tenant", tenant},
         {"data", {{"resource_key", "egress/internet"}, {"quantity", 1}, {"unit", "GiB"}}}});
  return batch;
}

TEST(ProcessCrash, AcknowledgedUsageEventsSurviveSigkill) {
  TempDir tmp;
  Server server(tmp.path() / "data", kNoRateLimits);
  ASSERT_TRUE(server.start());
  auto t = server.admin_request("POST", "/v1/tenants", {{"name", "meter"}});
  ASSERT_TRUE(t && t->status == 201);
  const std::string tenant = Json::parse(t->body)["id"];

  std::mutex mu;
  std::vector<Json> acked;  // batches answered 202
  int sent = 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < kMeterClients; ++c) {
    clients.emplace_back([&, c] {
      for (int n = 0; !stop; ++n) {
        Json batch = batch_of(tenant, "c" + std::to_string(c) + "-b" + std::to_string(n));
        {
          std::lock_guard lock(mu);
          ++sent;
        }
        auto r = server.request("POST", "/v1/usage-events", batch, server.admin().api_key, 5000);
        if (!r) return;  // killed under us
        std::lock_guard lock(mu);
        if (r->status == 202 && Json::parse(r->body)["accepted"] == kBatch)
          acked.push_back(batch);
        else
          ADD_FAILURE() << "HTTP " << r->status << " " << r->body.substr(0, 300);
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(10ms);
    std::lock_guard lock(mu);
    if (acked.size() >= 20) break;
  }
  server.kill();
  stop = true;
  for (auto& c : clients) c.join();
  ASSERT_FALSE(acked.empty()) << server.log();
  std::cout << "[ crash    ] " << acked.size() << " of " << sent
            << " usage batches acknowledged before SIGKILL\n";

  ASSERT_TRUE(server.start());
  // Every acknowledged event is stored: sending it again is a duplicate, never accepted.
  for (const auto& batch : acked) {
    auto r = server.request("POST", "/v1/usage-events", batch, server.admin().api_key);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 202) << r->body;
    Json body = Json::parse(r->body);
    EXPECT_EQ(body["duplicates"], kBatch) << r->body.substr(0, 300);
    EXPECT_EQ(body["accepted"], 0);
  }
  // The rollup counts stored events once: at least the acknowledged, at most the sent.
  auto u = server.admin_request(
      "GET", "/v1/tenants/" + tenant + "/usage?from=2000-01-01&to=2100-01-01&granularity=month");
  ASSERT_TRUE(u && u->status == 200) << (u ? u->body : u.error().message);
  int64_t events = 0;
  const Json report = Json::parse(u->body);
  for (const auto& row : report["rows"]) events += row["events"].get<int64_t>();
  EXPECT_GE(events, int64_t(acked.size()) * kBatch) << u->body.substr(0, 2000);
  EXPECT_LE(events, int64_t(sent) * kBatch);

  // The CLI posts a file and prints the rollup as CSV.
  const auto file = tmp.path() / "events.json";
  std::ofstream(file) << batch_of(tenant, "cli").dump();
  const std::map<std::string, std::optional<std::string>> env = {
      {"GPUPLANE_ENDPOINT", server.endpoint()}, {"GPUPLANE_TOKEN", server.admin().api_key}};
  auto post = run_gpuplane({"usage-events", "post", file.string()}, env);
  EXPECT_EQ(post.exit_code, 0) << post.out << post.err;
  EXPECT_NE(post.out.find("accepted 50, duplicates 0, rejected 0"), std::string::npos) << post.out;
  auto again = run_gpuplane({"usage-events", "post", file.string()}, env);
  EXPECT_NE(again.out.find("accepted 0, duplicates 50"), std::string::npos) << again.out;
  auto csv =
      run_gpuplane({"usage", "--tenant", "meter", "--from", "2000-01-01", "--to", "2100-01-01",
                    "--granularity", "month", "--group-by", "resource_key", "--csv"},
                   env);
  EXPECT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find("event,"), std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find(",egress/internet,"), std::string::npos) << csv.out;
  auto table = run_gpuplane({"usage", "--tenant", "meter", "--from", "2000-01-01", "--to",
                             "2100-01-01", "--granularity", "month"},
                            env);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("external usage events"), std::string::npos) << table.out;
  EXPECT_EQ(server.terminate(), 0);
}

// Allocations placed and released by clients while the server is killed: after the restart
// every allocation's intervals add up to exactly the time it held its GPUs (placed_at to
// ended_at, or to now while it still holds them), with one open interval per holding
// allocation and none for the others: nothing double counted, nothing lost.
TEST(ProcessCrash, UsageIntervalsMatchAllocationsAfterSigkill) {
  TempDir tmp;
  Server server(tmp.path() / "data", kNoRateLimits);
  ASSERT_TRUE(server.start());
  Json gpus = Json::array();
  for (int g = 0; g < 8; ++g)
    gpus.push_back({{"uuid", "GPU-meter-" + std::to_string(g)},
                    {"index", g},
                    {"model", "NVIDIA H200"},
                    {"memory_bytes", int64_t{150} << 30}});
  Json nodes = Json::array({{{"inventory", {{"node", {{"name", "meter-0"}}}, {"gpus", gpus}}}}});
  auto admin = [&](std::string_view method, const std::string& target, const Json& body) {
    auto r = server.admin_request(method, target, body);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? Json::parse(r->body.empty() ? "null" : r->body) : Json();
  };
  admin("POST", "/v1/fleet/import", {{"nodes", nodes}});
  const std::string tenant = admin("POST", "/v1/tenants", {{"name", "metered"}})["id"];
  const std::string project =
      admin("POST", "/v1/tenants/" + tenant + "/projects", {{"name", "p"}})["id"];
  admin("PUT", "/v1/tenants/" + tenant + "/quota", {{"models", {{"H200", {{"nominal", 8}}}}}});
  const std::string base = "/v1/tenants/" + tenant + "/projects/" + project + "/allocations";

  // Two clients allocate and release as fast as they can; the server dies under them twice.
  for (int cycle = 0; cycle < 2; ++cycle) {
    std::atomic<int> done{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < 2; ++c)
      clients.emplace_back([&] {
        while (!stop) {
          auto r = server.request("POST", base, {{"shape", {{"tier", "dedicated-gpu"}}}},
                                  server.admin().api_key, 5000);
          if (!r) return;
          if (r->status != 201) continue;
          const std::string id = Json::parse(r->body)["id"];
          if (++done % 3 == 0) continue;  // keep every third one
          if (!server.request("POST", base + "/" + id + "/release", Json::object(),
                              server.admin().api_key, 5000))
            return;
        }
      });
    for (int i = 0; i < 300 && done < 40; ++i) std::this_thread::sleep_for(10ms);
    server.kill();
    stop = true;
    for (auto& t : clients) t.join();
    ASSERT_GT(done.load(), 0) << server.log();
    ASSERT_TRUE(server.start()) << "restart after SIGKILL failed";
  }
  ASSERT_EQ(server.terminate(), 0);

  auto store =
      store::open_sqlite({.path = (server.data_dir() / "gpuplane.db").string(), .read_only = true});
  ASSERT_TRUE(store) << store.error().message;
  int holding = 0, ended = 0;
  auto r = (*store)->read([&](store::Tx& tx) -> Result<void> {
    const int64_t now = to_unix_micros(SystemClock().now());
    for (const auto& a : GP_TRY(tx.query(
             "SELECT id, state, placed_at, ended_at FROM allocations WHERE placed_at IS NOT "
             "NULL"))) {
      const std::string id = a.text(0);
      const bool holds = a.text(1) == "placed" || a.text(1) == "active";
      holds ? ++holding : ++ended;
      const int64_t want = (holds ? now : a.integer(3)) - a.integer(2);
      auto got = GP_TRY(tx.query_one(
          "SELECT COALESCE(SUM(COALESCE(end_us, ?) - start_us), 0), COUNT(*), SUM(CASE WHEN "
          "end_us IS NULL THEN 1 ELSE 0 END), MIN(start_us) FROM usage_intervals WHERE "
          "allocation_id = ?",
          {now, id}));
      EXPECT_EQ(got->integer(0), want) << id << " " << a.text(1);
      EXPECT_EQ(got->integer(2), holds ? 1 : 0) << id << " open intervals";
      if (got->integer(1) > 0) {
        EXPECT_EQ(got->integer(3), a.integer(2)) << id << " start";
      }
    }
    return ok();
  });
  ASSERT_TRUE(r) << r.error().message;
  std::cout << "[ crash    ] intervals checked for " << holding << " holding and " << ended
            << " ended allocations after 2 SIGKILLs\n";
  EXPECT_GT(holding, 0);
  EXPECT_GT(ended, 0);
}

}  // namespace
}  // namespace gp::proc
