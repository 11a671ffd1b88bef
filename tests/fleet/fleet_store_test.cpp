#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/env.h"
#include "fleet/fleet.h"
#include "test_util.h"

namespace gp::fleet {
namespace {

using gp::testing::TempDir;

Inventory inventory(const std::string& name, std::vector<std::string> uuids) {
  Inventory inv;
  inv.node.name = name;
  inv.node.rack = "r1";
  int i = 0;
  for (auto& u : uuids) {
    GpuInfo g;
    g.uuid = u;
    g.index = i++;
    g.product = "NVIDIA H200";
    g.model = "H200";
    g.memory_bytes = int64_t(141) << 30;
    g.mig_capable = true;
    inv.gpus.push_back(g);
  }
  return inv;
}

class FleetTest : public ::testing::Test {
 protected:
  FleetTest() : store_(gp::testing::open_store(dir_)) {}

  template <typename F>
  auto run(F&& f) {
    return gp::testing::must_write(*store_, std::forward<F>(f));
  }
  template <typename F>
  Error error(F&& f) {
    return gp::testing::must_fail(*store_, std::forward<F>(f));
  }
  std::string token(Duration ttl = std::chrono::hours(1)) {
    return run([&](store::Tx& tx) { return create_join_token(tx, w_, std::nullopt, "test", ttl); })
        .token;
  }
  Enrolled enroll_node(const Inventory& inv) {
    auto t = token();
    return run([&](store::Tx& tx) { return enroll(tx, w_, t, inv); });
  }
  int64_t count(const std::string& sql) {
    int64_t n = 0;
    EXPECT_TRUE(store_->read([&](store::Tx& tx) -> Result<void> {
      n = GP_TRY(tx.query_one(sql))->integer(0);
      return ok();
    }));
    return n;
  }

  TempDir dir_;
  std::unique_ptr<store::Store> store_;
  ManualClock clock_{from_unix_micros(1'800'000'000'000'000)};
  SeededIdSource ids_{3};
  Env w_{clock_, ids_};
};

TEST_F(FleetTest, EnrolmentConsumesTheJoinTokenOnce) {
  auto t = token();
  auto e = run([&](store::Tx& tx) {
    return enroll(tx, w_, t, inventory("n1", {"GPU-a", "GPU-b"}));
  });
  EXPECT_EQ(e.node.state, NodeState::kReady);
  EXPECT_TRUE(e.credential.starts_with(e.node.id + "."));
  EXPECT_EQ(count("SELECT COUNT(*) FROM gpus WHERE present = 1"), 2);
  auto reused = error([&](store::Tx& tx) { return enroll(tx, w_, t, inventory("n2", {"GPU-c"})); });
  EXPECT_EQ(reused.code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(reused.message, "join token has already been used");
  auto forged = error([&](store::Tx& tx) {
    return enroll(tx, w_, t.substr(0, t.find('.')) + "." + std::string(43, 'x'),
                  inventory("n2", {}));
  });
  EXPECT_EQ(forged.message, "unknown join token");
  EXPECT_EQ(
      error([&](store::Tx& tx) { return enroll(tx, w_, "garbage", inventory("n2", {})); }).message,
      "malformed join token");
  EXPECT_EQ(count("SELECT COUNT(*) FROM nodes"), 1);
}

TEST_F(FleetTest, ExpiredJoinTokenIsRefused) {
  auto t = token(std::chrono::seconds(60));
  clock_.advance(std::chrono::seconds(61));
  EXPECT_EQ(error([&](store::Tx& tx) { return enroll(tx, w_, t, inventory("n1", {})); }).message,
            "join token has expired");
}

TEST_F(FleetTest, AGpuCannotBeInTwoNodesAndNothingIsHalfApplied) {
  auto a = enroll_node(inventory("a", {"GPU-1", "GPU-2"}));
  auto b = enroll_node(inventory("b", {"GPU-3"}));
  // b now claims GPU-2 (still on a): the whole report is refused.
  auto e = error([&](store::Tx& tx) {
    return apply_inventory(tx, w_, b.node.id, inventory("b", {"GPU-3", "GPU-4", "GPU-2"}));
  });
  EXPECT_EQ(e.code, ErrorCode::kConflict);
  EXPECT_NE(e.message.find("GPU-2 is registered to node a"), std::string::npos);
  EXPECT_EQ(count("SELECT COUNT(*) FROM gpus WHERE uuid = 'GPU-4'"), 0);
  // Enrolling a new node with a GPU of a live node is refused too, and leaves no node behind.
  auto t = token();
  EXPECT_EQ(error([&](store::Tx& tx) { return enroll(tx, w_, t, inventory("c", {"GPU-1"})); }).code,
            ErrorCode::kConflict);
  EXPECT_EQ(count("SELECT COUNT(*) FROM nodes"), 2);
  // Once a is retired, its GPUs may move.
  run([&](store::Tx& tx) {
    return apply_action(tx, w_, a.node.id, NodeAction::kMaintenance, "repair");
  });
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kRetire, "moved"); });
  auto moved = run([&](store::Tx& tx) {
    return apply_inventory(tx, w_, b.node.id, inventory("b", {"GPU-3", "GPU-2"}));
  });
  EXPECT_EQ(moved.id, b.node.id);
  EXPECT_EQ(
      count("SELECT COUNT(*) FROM gpus WHERE uuid = 'GPU-2' AND node_id = '" + b.node.id + "'"), 1);
}

TEST_F(FleetTest, InventoryForAnotherNodeNameIsRefused) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  EXPECT_EQ(error([&](store::Tx& tx) {
              return apply_inventory(tx, w_, a.node.id, inventory("z", {}));
            }).code,
            ErrorCode::kInvalidArgument);
}

TEST_F(FleetTest, MissedHeartbeatsFailANodeAndHeartbeatsRecoverIt) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  auto b = enroll_node(inventory("b", {"GPU-2"}));
  clock_.advance(std::chrono::seconds(30));
  run([&](store::Tx& tx) { return heartbeat(tx, w_, b.node.id); });
  clock_.advance(std::chrono::seconds(15));
  auto failed =
      run([&](store::Tx& tx) { return sweep_missed_heartbeats(tx, w_, std::chrono::seconds(40)); });
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].id, a.node.id);
  auto n = run([&](store::Tx& tx) { return find_node(tx, a.node.id); });
  EXPECT_EQ(n->state, NodeState::kFailed);
  EXPECT_FALSE(schedulable(n->state));
  auto back = run([&](store::Tx& tx) { return heartbeat(tx, w_, a.node.id); });
  EXPECT_EQ(back.state, NodeState::kReady);
  EXPECT_EQ(back.state_reason, "heartbeats resumed");
}

TEST_F(FleetTest, ARepeatedInventoryIsKnownUntilStateRepairOrTimeSaysApplyItAgain) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  auto unchanged = [&](std::string_view digest) {
    return run([&](store::Tx& tx) { return inventory_unchanged(tx, w_, a.node.id, digest); });
  };
  auto applied = [&](std::string_view digest) {
    EXPECT_TRUE(store_->write(
        [&](store::Tx& tx) { return record_inventory_digest(tx, w_, a.node.id, digest); }));
  };
  EXPECT_FALSE(unchanged("d1"));  // never applied by a heartbeat
  applied("d1");
  EXPECT_TRUE(unchanged("d1"));
  EXPECT_FALSE(unchanged("d2"));
  // Applied again once in a while even when it repeats.
  clock_.advance(kInventoryResync);
  EXPECT_FALSE(unchanged("d1"));
  applied("d1");
  // A state change forgets it.
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kDrain, "PSU"); });
  EXPECT_FALSE(unchanged("d1"));
  applied("d1");
  // So does a GPU put in repair: the next report is merged with the repair.
  run([&](store::Tx& tx) { return start_repair(tx, w_, a.node.id, "GPU-1", "XID 79", "ops"); });
  EXPECT_FALSE(unchanged("d1"));
}

TEST_F(FleetTest, OperatorFailedNodeDoesNotRecoverByHeartbeat) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kFail, "bad PSU"); });
  auto n = run([&](store::Tx& tx) { return heartbeat(tx, w_, a.node.id); });
  EXPECT_EQ(n.state, NodeState::kFailed);
}

TEST_F(FleetTest, DrainWaitsForItsCompletionAndRetireRevokesTheCredential) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  // The fleet does not know what runs on the node: alloc::Service completes the drain.
  auto draining = run(
      [&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kDrain, "PSU"); });
  EXPECT_EQ(draining.state, NodeState::kDraining);
  EXPECT_FALSE(schedulable(draining.state));
  auto drained = run([&](store::Tx& tx) {
    return apply_action(tx, w_, a.node.id, NodeAction::kDrainComplete, "PSU");
  });
  EXPECT_EQ(drained.state, NodeState::kMaintenance);
  EXPECT_EQ(drained.state_reason, "PSU");
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kRetire, ""); });
  EXPECT_EQ(count("SELECT COUNT(*) FROM nodes WHERE credential_hash IS NOT NULL"), 0);
  auto again = error(
      [&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kResume, ""); });
  EXPECT_EQ(again.code, ErrorCode::kConflict);
}

TEST_F(FleetTest, UnhealthyGpusStayUnhealthyAndMissingOnesAreMarked) {
  auto inv = inventory("a", {"GPU-1", "GPU-2"});
  auto a = enroll_node(inv);
  inv.gpus[0].health.xid_errors = {79};
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  inv.gpus[0].health.xid_errors = {};
  inv.gpus.pop_back();  // GPU-2 disappears
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  auto gpus = run([&](store::Tx& tx) { return list_gpus(tx, a.node.id); });
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].health, "unhealthy");
  EXPECT_EQ(gpus[0].health_reason, "XID 79");
  EXPECT_EQ(gpus[1].health, "missing");
  auto s = run([&](store::Tx& tx) { return summary(tx, {}); });
  EXPECT_EQ(s["gpus_by_model"]["H200"]["unhealthy"], 1);
  EXPECT_EQ(s["gpus_by_model"]["H200"]["missing"], 1);
  EXPECT_EQ(s["gpus_by_model"]["H200"]["free"], 0);
}

// The held GPUs come from the caller (metering's open intervals): a held GPU is allocated and
// not free; one held while unhealthy is allocated too, and frees nothing.
TEST_F(FleetTest, TheSummaryCountsTheGpusItIsToldAreHeld) {
  auto inv = inventory("a", {"GPU-1", "GPU-2", "GPU-3"});
  auto a = enroll_node(inv);
  inv.gpus[2].health.xid_errors = {79};
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  auto s = run([&](store::Tx& tx) { return summary(tx, {"GPU-1", "GPU-3", "GPU-gone"}); });
  const Json& h200 = s["gpus_by_model"]["H200"];
  EXPECT_EQ(h200["total"], 3);
  EXPECT_EQ(h200["allocated"], 2);
  EXPECT_EQ(h200["free"], 1);
  EXPECT_EQ(h200["unavailable"], 0);
  EXPECT_EQ(s["gpus_total"], 3);
}

// alloc asks whether every node of a placed allocation has been heard from since the placement.
TEST_F(FleetTest, AllHeardSinceWaitsForEveryKnownNodeOfTheList) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  clock_.advance(std::chrono::seconds(10));
  auto b = enroll_node(inventory("b", {"GPU-2"}));
  const int64_t since = w_.now();
  auto heard = [&](std::vector<std::string> ids) {
    return run([&](store::Tx& tx) { return all_heard_since(tx, ids, since); });
  };
  EXPECT_FALSE(heard({a.node.id, b.node.id}));
  EXPECT_TRUE(heard({b.node.id, "nod_gone"}));  // an id no node has is not waited for
  EXPECT_TRUE(heard({}));
  clock_.advance(std::chrono::seconds(1));
  run([&](store::Tx& tx) { return heartbeat(tx, w_, a.node.id); });
  EXPECT_TRUE(heard({a.node.id, b.node.id}));
}

// A GPU's plan is met once its node reports the planned mode and layout, in any order; a new
// plan starts over as planned, and a dropped one is gone.
TEST_F(FleetTest, AGpuPlanIsMetOnceTheNodeReportsItsModeAndLayout) {
  auto inv = inventory("a", {"GPU-1", "GPU-2"});
  auto a = enroll_node(inv);
  const Json layout =
      Json::array({{{"profile", "3g.71gb"}, {"start", 4}}, {{"profile", "3g.71gb"}, {"start", 0}}});
  auto plans = [&] { return run([&](store::Tx& tx) { return node_gpu_plans(tx, a.node.id); }); };
  auto done = [&](auto f) {  // a write with nothing to return
    run([&](store::Tx& tx) -> Result<bool> {
      GP_TRY_VOID(f(tx));
      return true;
    });
  };
  done([&](store::Tx& tx) { return plan_gpu(tx, "GPU-1", "mig", layout, w_.now()); });
  auto p = plans();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].gpu, "GPU-1");
  EXPECT_EQ(p[0].mode, "mig");
  EXPECT_EQ(Json::parse(p[0].mig_layout), layout);
  EXPECT_EQ(p[0].status, "planned");
  EXPECT_FALSE(p[0].met);

  inv.gpus[0].mode = GpuMode::kMig;
  inv.gpus[0].mig_instances = {{"3g.71gb", 0}, {"3g.71gb", 4}};
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  EXPECT_TRUE(plans()[0].met);
  done([&](store::Tx& tx) { return record_plan_report(tx, "GPU-1", "applied", "", w_.now()); });
  auto found = run([&](store::Tx& tx) { return find_gpu_plan(tx, "GPU-1"); });
  ASSERT_TRUE(found);
  EXPECT_EQ(found->status, "applied");
  EXPECT_TRUE(found->met);

  done([&](store::Tx& tx) { return plan_gpu(tx, "GPU-1", "whole", Json::array(), w_.now()); });
  EXPECT_EQ(plans()[0].status, "planned");
  EXPECT_FALSE(plans()[0].met);
  done([&](store::Tx& tx) { return drop_gpu_plan(tx, "GPU-1"); });
  EXPECT_TRUE(plans().empty());
  EXPECT_FALSE(run([&](store::Tx& tx) { return find_gpu_plan(tx, "GPU-1"); }));
}

// Issue 24: each report replaces the node's stored GPU runtime settings; a report without them
// (an older agent) leaves the node with none, never with stale ones.
TEST_F(FleetTest, TheGpuRuntimeReportIsStoredWithTheNode) {
  Inventory inv = inventory("a", {"GPU-1"});
  inv.gpu_runtime = GpuRuntime{.toolkit_config = "/etc/nvidia-container-runtime/config.toml",
                               .toolkit_config_state = "absent",
                               .accepts_env_unprivileged = true,
                               .accepts_volume_mounts = false};
  auto a = enroll_node(inv);
  auto stored = [&] {
    return run([&](store::Tx& tx) -> Result<Node> {
      auto n = GP_TRY(find_node(tx, a.node.id));
      return *n;
    });
  };
  ASSERT_TRUE(stored().gpu_runtime);
  EXPECT_EQ(stored().gpu_runtime->accepts_env_unprivileged, true);
  EXPECT_EQ(stored().to_json().at("gpu_runtime").at("toolkit_config_state"), "absent");
  inv.gpu_runtime->toolkit_config_state = "read";
  inv.gpu_runtime->accepts_env_unprivileged = false;
  inv.gpu_runtime->device_list_strategy = {"cdi-annotations"};
  inv.gpu_runtime->strategy_source = "flag";
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  ASSERT_TRUE(stored().gpu_runtime);
  EXPECT_EQ(stored().gpu_runtime->accepts_env_unprivileged, false);
  EXPECT_EQ(stored().gpu_runtime->device_list_strategy,
            std::vector<std::string>{"cdi-annotations"});
  inv.gpu_runtime.reset();
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  EXPECT_FALSE(stored().gpu_runtime);
  EXPECT_TRUE(stored().to_json().at("gpu_runtime").is_null());
}

TEST_F(FleetTest, SamplesOnlyForTheNodesOwnGpus) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  enroll_node(inventory("b", {"GPU-2"}));
  Json samples = {{{"gpu_uuid", "GPU-1"}, {"util_pct", 55}, {"mem_used_bytes", 1024}}};
  auto parsed = run([&](store::Tx&) { return parse_samples(samples, w_); });
  EXPECT_EQ(run([&](store::Tx& tx) { return record_samples(tx, a.node.id, parsed); }), 1);
  Json foreign = {{{"gpu_uuid", "GPU-2"}, {"util_pct", 1}}};
  auto p2 = run([&](store::Tx&) { return parse_samples(foreign, w_); });
  EXPECT_EQ(error([&](store::Tx& tx) { return record_samples(tx, a.node.id, p2); }).code,
            ErrorCode::kInvalidArgument);
  Json future = {{{"gpu_uuid", "GPU-1"}, {"time", "2099-01-01T00:00:00Z"}}};
  EXPECT_FALSE(parse_samples(future, w_));
  Json bad_util = {{{"gpu_uuid", "GPU-1"}, {"util_pct", 101}}};
  EXPECT_FALSE(parse_samples(bad_util, w_));
  EXPECT_EQ(count("SELECT COUNT(*) FROM gpu_samples"), 1);
}

// A report is written 64 rows per statement: 130 samples take three, and every row keeps its
// own values.
TEST_F(FleetTest, AReportOfManySamplesKeepsEveryRow) {
  auto a = enroll_node(inventory("a", {"GPU-1", "GPU-2"}));
  Json samples = Json::array();
  for (int i = 0; i < 130; ++i)
    samples.push_back({{"gpu_uuid", i % 2 ? "GPU-2" : "GPU-1"},
                       {"instance", fmt::format("mig-{}", i)},
                       {"util_pct", i % 101},
                       {"mem_used_bytes", int64_t{i} << 20}});
  auto parsed = run([&](store::Tx&) { return parse_samples(samples, w_); });
  EXPECT_EQ(run([&](store::Tx& tx) { return record_samples(tx, a.node.id, parsed); }), 130);
  EXPECT_EQ(count("SELECT COUNT(*) FROM gpu_samples"), 130);
  EXPECT_EQ(count("SELECT COUNT(*) FROM gpu_samples WHERE gpu_uuid = 'GPU-2'"), 65);
  // Each row's own fields, the last of the third statement included.
  EXPECT_EQ(count("SELECT SUM(util_pct) FROM gpu_samples"), 5050 + 406);  // 0..100, then 0..28
  EXPECT_EQ(count("SELECT mem_used_bytes >> 20 FROM gpu_samples WHERE instance = 'mig-129' AND "
                  "gpu_uuid = 'GPU-2' AND util_pct = 28"),
            129);
}

// The latest reading of each GPU and instance is kept beside the series: the newest sample of a
// report replaces it, a report older than the stored reading does not, and every figure is kept.
TEST_F(FleetTest, TheLatestTelemetryOfEachGpuIsTheNewestReportedAndKeepsEveryFigure) {
  auto a = enroll_node(inventory("a", {"GPU-1", "GPU-2"}));
  Json samples = {{{"gpu_uuid", "GPU-1"}, {"time", "2026-01-01T00:00:00Z"}, {"util_pct", 10}},
                  {{"gpu_uuid", "GPU-1"},
                   {"time", "2026-01-01T00:00:10Z"},
                   {"util_pct", 20},
                   {"mem_used_bytes", 3 << 20},
                   {"mem_total_bytes", 8 << 20},
                   {"power_mw", 81500},
                   {"energy_mj", 123456789},
                   {"temperature_c", 41},
                   {"sm_clock_mhz", 1980},
                   {"ecc_corrected", 3},
                   {"ecc_uncorrected", 1}},
                  {{"gpu_uuid", "GPU-2"}, {"instance", "1g.18gb@0"}, {"util_pct", 7}}};
  auto parsed = run([&](store::Tx&) { return parse_samples(samples, w_); });
  run([&](store::Tx& tx) { return record_samples(tx, a.node.id, parsed); });
  Json late = {{{"gpu_uuid", "GPU-1"}, {"time", "2026-01-01T00:00:05Z"}, {"util_pct", 99}}};
  auto delayed = run([&](store::Tx&) { return parse_samples(late, w_); });
  run([&](store::Tx& tx) { return record_samples(tx, a.node.id, delayed); });

  auto latest = run([&](store::Tx& tx) { return latest_telemetry(tx); });
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].node_id, a.node.id);
  const Sample& g1 = latest[0].sample;
  EXPECT_EQ(g1.gpu_uuid, "GPU-1");
  EXPECT_EQ(g1.util_pct, 20);
  EXPECT_EQ(g1.mem_used_bytes, 3 << 20);
  EXPECT_EQ(g1.mem_total_bytes, 8 << 20);
  EXPECT_EQ(g1.power_mw, 81500);
  EXPECT_EQ(g1.energy_mj, 123456789);
  EXPECT_EQ(g1.temperature_c, 41);
  EXPECT_EQ(g1.sm_clock_mhz, 1980);
  EXPECT_EQ(g1.ecc_corrected, 3);
  EXPECT_EQ(g1.ecc_uncorrected, 1);
  EXPECT_EQ(latest[1].sample.instance, "1g.18gb@0");
  EXPECT_EQ(latest[1].sample.power_mw, -1);  // not reported: unknown
  EXPECT_EQ(count("SELECT COUNT(*) FROM gpu_samples"), 4);
  Json hot = {{{"gpu_uuid", "GPU-1"}, {"temperature_c", 201}}};
  EXPECT_FALSE(parse_samples(hot, w_));
}

TEST_F(FleetTest, DedicatedPoolsNeedAnExistingTenantAndEmptyPoolsOnlyAreDeleted) {
  EXPECT_EQ(error([&](store::Tx& tx) {
              return create_pool(tx, w_, "p", std::string("ten_nope"), "");
            }).code,
            ErrorCode::kInvalidArgument);
  auto p = run([&](store::Tx& tx) { return create_pool(tx, w_, "shared-h200", std::nullopt, ""); });
  auto t = run([&](store::Tx& tx) {
    return create_join_token(tx, w_, p.id, "test", std::chrono::hours(1));
  });
  auto e = run([&](store::Tx& tx) { return enroll(tx, w_, t.token, inventory("a", {"GPU-1"})); });
  EXPECT_EQ(e.node.pool_id, p.id);
  EXPECT_EQ(error([&](store::Tx& tx) { return delete_pool(tx, p.id); }).code, ErrorCode::kConflict);
}

// ---- downtime history (SLA accounting) ----

class DowntimeTest : public FleetTest {
 protected:
  std::vector<Downtime> downtime() {
    return run([&](store::Tx& tx) { return list_downtime(tx, 0, clock_now() + 1); });
  }
  int64_t clock_now() const { return w_.now(); }
  int64_t open_count() {
    return count("SELECT COUNT(*) FROM downtime_intervals WHERE end_us IS NULL");
  }
};

TEST_F(DowntimeTest, OperatorFailOpensANodeIntervalAndRecoverClosesIt) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  clock_.advance(std::chrono::seconds(10));
  const int64_t failed_at = clock_now();
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kFail, "bad PSU"); });
  auto d = downtime();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].node_id, a.node.id);
  EXPECT_EQ(d[0].gpu_uuid, "");
  EXPECT_EQ(d[0].cause, "bad PSU");
  EXPECT_EQ(d[0].start_us, failed_at);
  EXPECT_FALSE(d[0].end_us);
  // Failing it again (a new reason) keeps the one open interval.
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kFail, "x"); });
  EXPECT_EQ(open_count(), 1);
  clock_.advance(std::chrono::seconds(90));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kRecover, ""); });
  d = downtime();
  ASSERT_EQ(d.size(), 1u);
  ASSERT_TRUE(d[0].end_us);
  EXPECT_EQ(*d[0].end_us - d[0].start_us, 90'000'000);
  // Repairing a failed node in maintenance is still the outage; it ends when the node resumes.
  clock_.advance(std::chrono::seconds(5));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kFail, "GPU"); });
  clock_.advance(std::chrono::seconds(3));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kMaintenance, ""); });
  EXPECT_EQ(open_count(), 1);
  clock_.advance(std::chrono::seconds(4));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kResume, ""); });
  d = downtime();
  ASSERT_EQ(d.size(), 2u);
  ASSERT_TRUE(d[1].end_us);
  EXPECT_EQ(*d[1].end_us - d[1].start_us, 7'000'000);
  // Planned maintenance of a healthy node is no outage.
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kMaintenance, ""); });
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kResume, ""); });
  EXPECT_EQ(downtime().size(), 2u);
  // A further outage is a further interval; retiring the failed node ends it.
  clock_.advance(std::chrono::seconds(5));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kFail, "fans"); });
  clock_.advance(std::chrono::seconds(7));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kRetire, ""); });
  d = downtime();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].cause, "fans");
  ASSERT_TRUE(d[2].end_us);
  EXPECT_EQ(*d[2].end_us - d[2].start_us, 7'000'000);
  EXPECT_EQ(open_count(), 0);
}

TEST_F(DowntimeTest, MissedHeartbeatsOpenAndResumedHeartbeatsClose) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  clock_.advance(std::chrono::seconds(60));
  run([&](store::Tx& tx) { return sweep_missed_heartbeats(tx, w_, std::chrono::seconds(40)); });
  // A second sweep finds the node already failed: still one open interval.
  clock_.advance(std::chrono::seconds(60));
  run([&](store::Tx& tx) { return sweep_missed_heartbeats(tx, w_, std::chrono::seconds(40)); });
  EXPECT_EQ(open_count(), 1);
  clock_.advance(std::chrono::seconds(30));
  run([&](store::Tx& tx) { return heartbeat(tx, w_, a.node.id); });
  auto d = downtime();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].cause, "missed heartbeats");
  ASSERT_TRUE(d[0].end_us);
  EXPECT_EQ(*d[0].end_us - d[0].start_us, 90'000'000);
}

TEST_F(DowntimeTest, GpuHealthFlipsOpenAndCloseGpuIntervalsOnce) {
  auto inv = inventory("a", {"GPU-1", "GPU-2"});
  auto a = enroll_node(inv);
  clock_.advance(std::chrono::seconds(1));
  inv.gpus[0].health.xid_errors = {79};
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  // Clean reports keep an unhealthy GPU unhealthy: no second interval, none closed.
  inv.gpus[0].health.xid_errors = {};
  clock_.advance(std::chrono::seconds(1));
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  clock_.advance(std::chrono::seconds(1));
  auto two = inv;
  two.gpus.pop_back();  // GPU-2 goes missing
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, two); });
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, two); });
  auto d = downtime();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].gpu_uuid, "GPU-1");
  EXPECT_EQ(d[0].cause, "unhealthy: XID 79");
  EXPECT_EQ(d[1].gpu_uuid, "GPU-2");
  EXPECT_EQ(d[1].cause, "missing: no longer reported by the node");
  EXPECT_EQ(open_count(), 2);
  // GPU-2 reported healthy again: its interval closes after 4 s; GPU-1 stays down.
  clock_.advance(std::chrono::seconds(4));
  run([&](store::Tx& tx) { return apply_inventory(tx, w_, a.node.id, inv); });
  d = downtime();
  ASSERT_EQ(d.size(), 2u);
  ASSERT_TRUE(d[1].end_us);
  EXPECT_EQ(*d[1].end_us - d[1].start_us, 4'000'000);
  EXPECT_FALSE(d[0].end_us);
  // The database itself refuses a second open interval for the same (node, GPU).
  auto dup = store_->write([&](store::Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("INSERT INTO downtime_intervals VALUES ('x', ?, 'GPU-1', 'dup', 1, NULL)",
                   {a.node.id}));
    return ok();
  });
  EXPECT_FALSE(dup);
  EXPECT_EQ(open_count(), 1);
}

TEST_F(DowntimeTest, RepairClosesStaleIntervalsAndOpensMissingOnes) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  auto b = enroll_node(inventory("b", {"GPU-2"}));
  clock_.advance(std::chrono::seconds(10));
  run([&](store::Tx& tx) { return apply_action(tx, w_, b.node.id, NodeAction::kFail, "PSU"); });
  const int64_t b_failed = clock_now();
  // What a crash between two writers could have left: a ready node with an open interval, a
  // failed node without one, a healthy GPU with an open interval.
  const int64_t a_changed =
      count(fmt::format("SELECT updated_at FROM nodes WHERE id = '{}'", a.node.id));
  ASSERT_TRUE(store_->write([&](store::Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("DELETE FROM downtime_intervals"));
    GP_TRY(tx.exec("INSERT INTO downtime_intervals VALUES ('s1', ?, '', 'stale', ?, NULL)",
                   {a.node.id, a_changed - 5'000'000}));
    GP_TRY(tx.exec("INSERT INTO downtime_intervals VALUES ('s2', ?, 'GPU-1', 'stale', ?, NULL)",
                   {a.node.id, a_changed - 5'000'000}));
    return ok();
  }));
  clock_.advance(std::chrono::seconds(100));
  EXPECT_EQ(run([&](store::Tx& tx) { return repair_downtime(tx, clock_now()); }), 3);
  EXPECT_EQ(run([&](store::Tx& tx) { return repair_downtime(tx, clock_now()); }), 0);
  auto d = downtime();
  ASSERT_EQ(d.size(), 3u);
  int open = 0;
  for (const auto& x : d) {
    if (x.node_id == a.node.id) {
      ASSERT_TRUE(x.end_us) << x.id;
      EXPECT_LE(*x.end_us, clock_now());
      EXPECT_GE(*x.end_us, x.start_us);
    } else {
      ++open;
      EXPECT_FALSE(x.end_us);
      EXPECT_EQ(x.start_us, b_failed);
      EXPECT_EQ(x.cause, "PSU");
    }
  }
  EXPECT_EQ(open, 1);
}

TEST_F(DowntimeTest, ListingIsARangeQuery) {
  auto a = enroll_node(inventory("a", {"GPU-1"}));
  const int64_t t0 = clock_now();
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kFail, "x"); });
  clock_.advance(std::chrono::seconds(10));
  run([&](store::Tx& tx) { return apply_action(tx, w_, a.node.id, NodeAction::kRecover, ""); });
  auto in = run([&](store::Tx& tx) { return list_downtime(tx, t0 + 1, t0 + 2); });
  EXPECT_EQ(in.size(), 1u);
  auto after =
      run([&](store::Tx& tx) { return list_downtime(tx, t0 + 10'000'000, t0 + 20'000'000); });
  EXPECT_EQ(after.size(), 0u);
  auto bad = error([&](store::Tx& tx) { return list_downtime(tx, t0, t0); });
  EXPECT_EQ(bad.code, ErrorCode::kInvalidArgument);
}

TEST(FleetSvg, DrawingsAreWellFormed) {
  auto cat = vocab::mig_catalog("H200");
  ASSERT_TRUE(cat);
  std::string svg = mig_layout_svg(**cat, {{"3g.71gb", 4}, {"1g.18gb", 0}}, "H200 <test>");
  EXPECT_NE(svg.find("3g.71gb"), std::string::npos);
  EXPECT_NE(svg.find("H200 &lt;test&gt;"), std::string::npos);
  Node n;
  n.info.name = "n1";
  n.state = NodeState::kReady;
  Gpu g;
  g.info.uuid = "GPU-1";
  g.info.model = "H200";
  g.info.product = "NVIDIA H200";
  g.info.mode = GpuMode::kMig;
  g.info.mig_instances = {{"7g.141gb", 0}};
  std::string map = fleet_map_svg({{n, {g, g}}}, {});
  for (const std::string& doc : {svg, map}) {
    auto opens = [&](std::string_view tag) {
      size_t c = 0;
      for (size_t p = doc.find(tag); p != std::string::npos; p = doc.find(tag, p + 1)) ++c;
      return c;
    };
    EXPECT_EQ(opens("<g>") + opens("<g "), opens("</g>"));
    EXPECT_EQ(opens("<svg"), opens("</svg>"));
    EXPECT_EQ(opens("<text"), opens("</text>"));
    EXPECT_EQ(opens("<title>"), opens("</title>"));
  }
}

// The map says who holds what: a whole GPU's tenant, a MIG instance's, shares side by side,
// one colour per tenant named in the legend; free instances say so.
TEST(FleetSvg, TheMapDrawsHoldersInTheirColoursWithALegend) {
  Node n;
  n.info.name = "n1";
  n.state = NodeState::kReady;
  Gpu whole, mig, shared, idle;
  whole.info = {.uuid = "GPU-W", .index = 0, .model = "H200"};
  mig.info = {.uuid = "GPU-M", .index = 1, .model = "H200", .mode = GpuMode::kMig};
  mig.info.mig_instances = {{"3g.71gb", 0}, {"3g.71gb", 4}};
  shared.info = {.uuid = "GPU-S", .index = 2, .model = "H200", .mode = GpuMode::kTimeSliced};
  idle.info = {.uuid = "GPU-I", .index = 3, .model = "H200"};
  for (Gpu* g : {&whole, &mig, &shared, &idle}) g->health = "healthy";
  std::map<std::string, std::vector<GpuHold>> holds = {
      {"GPU-W", {{.holder = "acme"}}},
      {"GPU-M", {{.holder = "globex", .mig = vocab::PlacedInstance{"3g.71gb", 4}}}},
      {"GPU-S", {{.holder = "acme", .milli = 250}, {.holder = "globex", .milli = 500}}}};
  std::string map = fleet_map_svg({{n, {whole, mig, shared, idle}}}, holds);
  EXPECT_NE(map.find("GPU 0 H200 GPU-W whole , held by acme</title>"), std::string::npos) << map;
  EXPECT_NE(map.find("3g.71gb at memory slice 4 (3 compute slices), held by globex"),
            std::string::npos);
  EXPECT_NE(map.find("3g.71gb at memory slice 0 (3 compute slices), free"), std::string::npos);
  EXPECT_NE(map.find("<title>acme (250 milli-GPU)</title>"), std::string::npos);
  EXPECT_NE(map.find("<title>globex (500 milli-GPU)</title>"), std::string::npos);
  EXPECT_EQ(map.find("GPU-I whole , held by"), std::string::npos) << "an idle GPU has no holder";
  // One colour per tenant: acme's first, globex's second, each in the legend.
  EXPECT_NE(map.find("<title>held by acme</title><rect x=\"10\""), std::string::npos);
  EXPECT_NE(map.find("<title>held by globex</title>"), std::string::npos);
  EXPECT_NE(map.find("fill=\"#3498db\""), std::string::npos);
  EXPECT_NE(map.find("fill=\"#e67e22\""), std::string::npos);
}

}  // namespace
}  // namespace gp::fleet
