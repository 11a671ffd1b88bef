// Replicas of `gpuplane serve` on one PostgreSQL database (docs/ha.md): one leads, the others
// serve reads and refuse writes naming the leader, and when the leader is killed a follower
// takes over with every acknowledged write in place exactly once. Needs the PostgreSQL test
// cluster: CTest registers these tests a second time as `<name>.postgres` with it; without it
// they are skipped.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "pg_test_util.h"
#include "process/process_util.h"
#include "store/engines.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

Json readyz(const Server& s, const std::string& query = "") {
  auto r = s.request("GET", "/readyz" + query);
  if (!r) return Json();
  Json j = Json::parse(r->body, nullptr, false);
  j["http_status"] = r->status;
  return j;
}

// Polls /readyz until the server reports `role`; returns how long that took, or nullopt.
std::optional<std::chrono::milliseconds> wait_for_role(const Server& s, const std::string& role,
                                                       std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < timeout) {
    if (readyz(s).value("role", "") == role)
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

// Writes that must each land exactly once whichever replica leads: every request carries an
// Idempotency-Key and is retried, against the other replica after a failure or a 503, until
// it is answered. Returns the answer's body.
class FailoverClient {
 public:
  FailoverClient(const Server& a, const Server& b, const std::string& token)
      : replicas_{&a, &b}, token_(token) {}

  std::optional<Json> write(const std::string& target, const Json& body, const std::string& key,
                            const std::atomic<bool>& give_up) {
    while (!give_up) {
      const Server& s = *replicas_[current_];
      auto r = s.request("POST", target, body, token_, 5000, {{"Idempotency-Key", key}});
      if (r && r->status / 100 == 2) return Json::parse(r->body);
      if (r && r->status != 503) {
        ADD_FAILURE() << "POST " << target << ": HTTP " << r->status << " " << r->body;
        return std::nullopt;
      }
      current_ ^= 1;  // the leader died, or this is a follower: try the other
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

 private:
  const Server* replicas_[2];
  std::string token_;
  int current_ = 0;
};

TEST(Ha, FollowerRefusesWritesAndTakesOverWhenTheLeaderIsKilled) {
  const std::string conninfo = gp::testing::test_pg_conninfo();
  if (conninfo.empty()) GTEST_SKIP() << "needs the PostgreSQL test cluster (the .postgres tests)";
  TestDatabase db(conninfo);
  TempDir tmp;
  std::vector<std::string> args = kNoRateLimits;
  args.insert(args.end(), {"--store", db.url(), "--leader-takeover-ms", "500"});
  Server a(tmp.path() / "a", args), b(tmp.path() / "b", args);
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(wait_for_role(a, "leader", 10s)) << a.log();
  // Replicas share the master key and the audit signing key (docs/ha.md).
  fs::create_directories(b.data_dir());
  for (const char* key : {"master.key", "audit-signing.key"})
    fs::copy_file(a.data_dir() / key, b.data_dir() / key);
  b.use_admin(a.admin());
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(wait_for_role(b, "follower", 5s)) << b.log();
  const std::string token = a.admin().api_key;

  // The follower names the leader, serves reads, and refuses writes before doing anything.
  EXPECT_EQ(readyz(b)["leader"], a.endpoint());
  EXPECT_EQ(readyz(b, "?role=leader")["http_status"], 503);
  EXPECT_EQ(readyz(a, "?role=leader")["http_status"], 200);
  auto refused = b.request("POST", "/v1/tenants", {{"name", "refused"}}, token);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->header("X-Gpuplane-Leader"), a.endpoint());
  EXPECT_EQ(refused->header("Retry-After"), "1");
  EXPECT_NE(refused->body.find("send writes to the leader at " + a.endpoint()), std::string::npos)
      << refused->body;
  auto listed = b.request("GET", "/v1/tenants", nullptr, token);
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->status, 200);
  EXPECT_EQ(listed->body.find("refused"), std::string::npos);

  // A fleet of 16 GPUs and a tenant allowed more than that (the rest queues).
  auto admin = [&](const std::string& target, const Json& body) {
    auto r = a.request("POST", target, body, token);
    EXPECT_TRUE(r && r->status / 100 == 2) << target << ": " << (r ? r->body : r.error().message);
    return r ? Json::parse(r->body) : Json();
  };
  Json nodes = Json::array();
  for (int n = 0; n < 2; ++n) {
    Json gpus = Json::array();
    for (int g = 0; g < 8; ++g)
      gpus.push_back({{"uuid", "GPU-ha-" + std::to_string(n) + "-" + std::to_string(g)},
                      {"index", g},
                      {"model", "NVIDIA H200"},
                      {"memory_bytes", int64_t{150} << 30}});
    nodes.push_back(
        {{"inventory", {{"node", {{"name", "ha-" + std::to_string(n)}}}, {"gpus", gpus}}}});
  }
  admin("/v1/fleet/import", {{"nodes", nodes}});
  const std::string tenant = admin("/v1/tenants", {{"name", "ha"}})["id"];
  const std::string project = admin("/v1/tenants/" + tenant + "/projects", {{"name", "p"}})["id"];
  auto quota = a.request("PUT", "/v1/tenants/" + tenant + "/quota",
                         {{"models", {{"H200", {{"nominal", 64}}}}}}, token);
  ASSERT_TRUE(quota && quota->status == 200) << (quota ? quota->body : "");
  const std::string allocations = "/v1/tenants/" + tenant + "/projects/" + project + "/allocations";

  // Two clients create allocations and one posts usage events, through the failover.
  constexpr int kAllocsPerClient = 12, kEventBatches = 20, kEventsPerBatch = 10;
  std::mutex mu;
  std::set<std::string> acked_allocs;
  int acked_batches = 0;
  std::atomic<bool> give_up{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c)
    clients.emplace_back([&, c] {
      FailoverClient client(a, b, token);
      for (int i = 0; i < kAllocsPerClient; ++i) {
        auto r = client.write(allocations, {{"shape", {{"tier", "dedicated-gpu"}}}},
                              "alloc-" + std::to_string(c) + "-" + std::to_string(i), give_up);
        if (!r) return;
        std::lock_guard lock(mu);
        EXPECT_TRUE(acked_allocs.insert((*r)["id"].get<std::string>()).second)
            << "one id acknowledged twice: " << *r;
      }
    });
  clients.emplace_back([&] {
    FailoverClient client(a, b, token);
    const std::string now = format_rfc3339(SystemClock().now());
    for (int n = 0; n < kEventBatches; ++n) {
      Json batch = Json::array();
      for (int i = 0; i < kEventsPerBatch; ++i)
        batch.push_back(
            {{"specversion", "1.0"},
             {"id", "ev-" + std::to_string(n) + "-" + std::to_string(i)},
             {"source", "meter://ha-test"},
             {"type", "dev.gpuplane.usage"},
             {"time", now},
             {"tenant", tenant},
             {"data", {{"resource_key", "egress/internet"}, {"quantity", 1}, {"unit", "GiB"}}}});
      if (!client.write("/v1/usage-events", batch, "events-" + std::to_string(n), give_up)) return;
      std::lock_guard lock(mu);
      ++acked_batches;
    }
  });

  // Kill the leader mid-stream; the follower takes over.
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mu);
      if (acked_allocs.size() >= 6 && acked_batches >= 4) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  a.kill();
  auto took_over = wait_for_role(b, "leader", 15s);
  ASSERT_TRUE(took_over) << "the follower did not take over:\n" << b.log();
  std::cout << "[ ha       ] follower leads " << took_over->count()
            << " ms after the leader was killed\n";
  EXPECT_LT(took_over->count(), 5000);
  std::thread watchdog([&] {
    for (int i = 0; i < 600 && !give_up; ++i) std::this_thread::sleep_for(50ms);
    give_up = true;
  });
  for (auto& t : clients) t.join();
  give_up = true;
  watchdog.join();
  ASSERT_EQ(acked_allocs.size(), size_t(2 * kAllocsPerClient)) << "clients gave up:\n" << b.log();
  ASSERT_EQ(acked_batches, kEventBatches);

  // Every acknowledged allocation exactly once, no GPU held twice, every event counted once.
  auto all = list_all(b, allocations);
  ASSERT_TRUE(all) << all.error().message;
  std::multiset<std::string> ids;
  std::map<std::string, std::string> holder;  // GPU -> allocation
  for (const auto& alloc : *all) {
    ids.insert(alloc["id"].get<std::string>());
    if (alloc["state"] != "placed" && alloc["state"] != "active") continue;
    for (const auto& g : alloc["placement"]["gpus"]) {
      auto [it, fresh] = holder.emplace(g["gpu"], alloc["id"]);
      EXPECT_TRUE(fresh) << g["gpu"] << " held by both " << it->second << " and " << alloc["id"];
    }
  }
  EXPECT_EQ(ids, std::multiset<std::string>(acked_allocs.begin(), acked_allocs.end()));
  EXPECT_EQ(holder.size(), 16u);  // the fleet is full; the rest waits
  auto pg = store::open_postgres({.conninfo = db.url(), .read_connections = 1});
  ASSERT_TRUE(pg) << pg.error().message;
  int64_t events = -1;
  ASSERT_TRUE((*pg)->read([&](store::Tx& tx) -> Result<void> {
    auto row =
        GP_TRY(tx.query_one("SELECT COUNT(*) FROM usage_events WHERE tenant_id = ?", {tenant}));
    events = row->integer(0);
    return ok();
  }));
  EXPECT_EQ(events, kEventBatches * kEventsPerBatch);

  // The old leader comes back as a follower of the new one.
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(wait_for_role(a, "follower", 5s)) << a.log();
  EXPECT_EQ(readyz(a)["leader"], b.endpoint());
  EXPECT_EQ(b.terminate(), 0) << b.log();
  EXPECT_EQ(a.terminate(), 0) << a.log();
}

// A live PostgreSQL store backed up, then restored into SQLite and into another PostgreSQL
// database: both serve the same tenants.
TEST(Ha, BackupOfAPostgresStoreRestoresIntoEitherEngine) {
  const std::string conninfo = gp::testing::test_pg_conninfo();
  if (conninfo.empty()) GTEST_SKIP() << "needs the PostgreSQL test cluster (the .postgres tests)";
  TestDatabase source(conninfo), target(conninfo);
  TempDir tmp;
  std::vector<std::string> args = kNoRateLimits;
  args.insert(args.end(), {"--store", source.url(), "--leader-takeover-ms", "0"});
  Server live(tmp.path() / "live", args);
  ASSERT_TRUE(live.start());
  ASSERT_TRUE(wait_for_role(live, "leader", 5s)) << live.log();
  auto t = live.admin_request("POST", "/v1/tenants", {{"name", "acme"}});
  ASSERT_TRUE(t && t->status == 201);
  for (int p = 0; p < 5; ++p)
    ASSERT_EQ(
        live.admin_request("POST", "/v1/tenants/acme/projects", {{"name", "p" + std::to_string(p)}})
            ->status,
        201);
  const std::string backup = (tmp.path() / "backup").string();
  auto made =
      run_gpuplane({"backup", "--data", live.data_dir().string(), "--store", source.url(), "--out",
                    backup, "--key-file", (tmp.path() / "backup.key").string(), "--new-key"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(live.terminate(), 0) << live.log();

  for (const std::string& store : {std::string(), target.url()}) {
    SCOPED_TRACE(store.empty() ? "into SQLite" : "into PostgreSQL");
    const fs::path dir = tmp.path() / (store.empty() ? "sqlite" : "postgres");
    std::vector<std::string> restore = {"restore",
                                        "--from",
                                        backup,
                                        "--data",
                                        dir.string(),
                                        "--key-file",
                                        (tmp.path() / "backup.key").string()};
    std::vector<std::string> serve = kNoRateLimits;
    if (!store.empty()) {
      restore.insert(restore.end(), {"--store", store});
      serve.insert(serve.end(), {"--store", store, "--leader-takeover-ms", "0"});
    }
    auto put = run_gpuplane(restore);
    ASSERT_EQ(put.exit_code, 0) << put.err;
    Server s(dir, serve);
    s.use_admin(live.admin());
    ASSERT_TRUE(s.start());
    ASSERT_TRUE(wait_for_role(s, "leader", 5s)) << s.log();
    auto projects = list_all(s, "/v1/tenants/acme/projects");
    ASSERT_TRUE(projects) << projects.error().message;
    EXPECT_EQ(projects->size(), 5u);
    EXPECT_EQ(s.terminate(), 0) << s.log();
  }
}

// A private cluster (the shared one must not restart under other tests), stopped and removed
// at the end.
class PrivateCluster {
 public:
  PrivateCluster() : dir_("/tmp/gpuplane-pgrestart-" + std::to_string(::getpid())) {
    const char* src = std::getenv("GP_SOURCE_DIR");
    script_ = std::string(src ? src : ".") + "/tests/support/pg_cluster.sh";
    auto r = run("/bin/bash", {script_, "start", dir_}, {}, std::nullopt, 120s);
    if (r.exit_code != 0) throw std::runtime_error("pg_cluster.sh start: " + r.err);
    auto kv = conninfo_fields(read_file(fs::path(dir_) / "conninfo"));
    url_ = "postgres://postgres@127.0.0.1:" + kv["port"] + "/postgres";
  }
  ~PrivateCluster() { (void)run("/bin/bash", {script_, "stop", dir_}, {}, std::nullopt, 60s); }
  RunResult restart() {
    return run("/bin/bash", {script_, "restart", dir_}, {}, std::nullopt, 120s);
  }
  const std::string& url() const { return url_; }

 private:
  std::string dir_, script_, url_;
};

// PostgreSQL restarts while clients write: requests answer 503 (or succeed), never a wrong
// answer; the server reconnects, takes the lead again and serves by itself; nothing
// acknowledged is lost.
TEST(Ha, PostgresRestartUnderLoadGives503sThenServiceResumes) {
  if (gp::testing::test_pg_conninfo().empty())
    GTEST_SKIP() << "needs PostgreSQL (the .postgres tests)";
  PrivateCluster cluster;
  TempDir tmp;
  std::vector<std::string> args = kNoRateLimits;
  args.insert(args.end(), {"--store", cluster.url(), "--leader-takeover-ms", "200"});
  Server server(tmp.path() / "data", args);
  ASSERT_TRUE(server.start());
  ASSERT_TRUE(wait_for_role(server, "leader", 10s)) << server.log();
  const std::string token = server.admin().api_key;
  auto t = server.request("POST", "/v1/tenants", {{"name", "restart"}}, token);
  ASSERT_TRUE(t && t->status == 201) << (t ? t->body : t.error().message);
  const std::string projects =
      "/v1/tenants/" + Json::parse(t->body)["id"].get<std::string>() + "/projects";

  std::mutex mu;
  std::set<std::string> acked;
  std::map<int, int> statuses;
  std::atomic<bool> stop{false};
  std::atomic<int> after_restart{0};
  std::atomic<bool> restarted{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; !stop; ++i) {
        const std::string name = "p-" + std::to_string(c) + "-" + std::to_string(i);
        auto r = server.request("POST", projects, {{"name", name}}, token, 10000);
        std::lock_guard lock(mu);
        if (!r) {
          ADD_FAILURE() << "no answer: " << r.error().message;
          return;
        }
        ++statuses[r->status];
        if (r->status == 201) {
          acked.insert(name);
          if (restarted) ++after_restart;
        } else if (r->status != 503) {
          ADD_FAILURE() << "HTTP " << r->status << ": " << r->body;
        } else {
          std::this_thread::sleep_for(20ms);
        }
      }
    });
  for (int i = 0; i < 300; ++i) {
    {
      std::lock_guard lock(mu);
      if (acked.size() >= 30) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  auto r = cluster.restart();
  restarted = true;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto restarted_at = std::chrono::steady_clock::now();
  for (int i = 0; i < 3000 && after_restart < 30; ++i) std::this_thread::sleep_for(10ms);
  const auto resumed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - restarted_at)
                              .count();
  stop = true;
  for (auto& c : clients) c.join();
  std::cout << "[ ha       ] PostgreSQL restarted: " << statuses[201] << " created, "
            << statuses[503] << " answered 503; 30 more created within " << resumed_ms
            << " ms of PostgreSQL accepting connections again\n";
  EXPECT_GE(after_restart.load(), 30) << "service did not resume:\n" << server.log();
  EXPECT_EQ(statuses.size(), statuses.count(201) + statuses.count(503));

  auto listed = list_all(server, projects);
  ASSERT_TRUE(listed) << listed.error().message;
  std::set<std::string> present;
  for (const auto& p : *listed) present.insert(p["name"].get<std::string>());
  for (const auto& name : acked) EXPECT_TRUE(present.contains(name)) << name << " lost";
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

}  // namespace
}  // namespace gp::proc
