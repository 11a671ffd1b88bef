// Jobs through the API with the node's side played by hand (docs/jobs.md): a job follows its
// allocation and its members' reports; its allocation turns active only once the member runs and
// is released when it ends; output sent twice is kept once; on-failure starts a new attempt; a
// job at its tenant's quota waits with the scheduler's reason; bad input changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "integration/harness.h"

namespace gp::it {
namespace {

class Jobs : public ::testing::Test {
 protected:
  TestServer s;
  TenantInfo acme, bravo;
  std::string acme_jobs, bravo_jobs, node_token, node_id;

  void SetUp() override {
    const std::string admin = s.admin_token();
    for (Json o : {Json{{"name", "gpu1"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}},
                   Json{{"name", "vm1"},
                        {"tier", "dedicated-gpu"},
                        {"models", {"H200"}},
                        {"delivery", "vm"},
                        {"vm", {{"vcpus", 4}, {"memory_mib", 8192}}}}}) {
      auto c = s.request("POST", "/v1/offerings", o, admin);
      ASSERT_EQ(c.status, 201) << c.raw;
    }
    acme = s.create_tenant("acme", "acme-admin");
    bravo = s.create_tenant("bravo", "bravo-admin");
    acme_jobs = "/v1/tenants/" + acme.id + "/projects/" +
                s.create_project(acme.admin_token, acme.id, "train").at("id").get<std::string>() +
                "/jobs";
    bravo_jobs = "/v1/tenants/" + bravo.id + "/projects/" +
                 s.create_project(bravo.admin_token, bravo.id, "nlp").at("id").get<std::string>() +
                 "/jobs";
    auto q = s.request("PUT", "/v1/tenants/" + acme.id + "/quota",
                       {{"models", {{"H200", {{"nominal", 2}}}}}}, admin);
    ASSERT_EQ(q.status, 200) << q.raw;
    auto jt = s.request("POST", "/v1/join-tokens", Json::object(), admin);
    auto enrolled =
        s.request("POST", "/v1/agent/enroll",
                  {{"join_token", jt.body["token"]}, {"inventory", h200_inventory("job-node", 2)}});
    ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
    node_token = enrolled.body["credential"];
    node_id = enrolled.body["node"]["id"];
  }

  Resp submit(const std::string& path, const std::string& token, Json extra = Json::object()) {
    Json body = {{"name", "train-1"},
                 {"image", "registry.example.com/acme/trainer:1"},
                 {"offering", "gpu1"},
                 {"command", {"python", "train.py"}}};
    body.update(extra);
    return s.request("POST", path, body, token);
  }

  // `holding`: the allocations whose containers the node still runs (an agent's "holding"); by
  // default none, so that an ended allocation's stop ends at once.
  Resp heartbeat(const Json& reports = nullptr, const Json& holding = Json::array()) {
    Json body = Json::object();
    if (!reports.is_null()) body["jobs"] = reports;
    if (!holding.is_null()) body["holding"] = holding;
    return s.request("POST", "/v1/agent/heartbeat", body, node_token);
  }

  Json get(const std::string& path) {
    auto r = s.request("GET", path, nullptr, acme.admin_token);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }
};

TEST_F(Jobs, AJobFollowsItsMembersReportsAndReleasesItsAllocationWhenItEnds) {
  auto created = submit(acme_jobs, acme.admin_token);
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string job = created.body["id"], path = acme_jobs + "/" + job;
  EXPECT_EQ(created.body["state"], "starting");
  EXPECT_EQ(created.body["allocation"]["state"], "placed");
  const std::string alloc_path = "/v1/tenants/" + acme.id + "/allocations";

  // The node's heartbeat assigns the member; the allocation stays placed until it runs.
  auto hb = heartbeat();
  ASSERT_EQ(hb.status, 200) << hb.raw;
  const Json& assigned = hb.body["assignments"]["jobs"];
  ASSERT_EQ(assigned.size(), 1u) << hb.raw;
  EXPECT_EQ(assigned[0]["job"], job);
  EXPECT_EQ(assigned[0]["attempt"], 1);
  EXPECT_EQ(assigned[0]["desired"], "running");
  EXPECT_EQ(assigned[0]["devices"].size(), 1u);
  EXPECT_GT(assigned[0]["ids"]["first"].get<int64_t>(), 0);
  EXPECT_EQ(get(path)["allocation"]["state"], "placed");

  const Json running = {{"job", job},         {"rank", 0},       {"attempt", 1},
                        {"state", "running"}, {"log_offset", 0}, {"log_end", 80},
                        {"log", "epoch 1\n"}};
  ASSERT_EQ(heartbeat(Json::array({running})).status, 200);
  Json j = get(path);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["allocation"]["state"], "active");
  EXPECT_FALSE(j["started_at"].is_null());
  // The same output again (a heartbeat whose answer was lost) is kept once.
  ASSERT_EQ(heartbeat(Json::array({running})).status, 200);
  EXPECT_EQ(heartbeat().body["assignments"]["jobs"][0]["log_offset"], 80);

  Json exited = {{"job", job},     {"rank", 0},        {"attempt", 1},   {"state", "exited"},
                 {"exit_code", 0}, {"log_offset", 80}, {"log_end", 120}, {"log", "done\n"}};
  ASSERT_EQ(heartbeat(Json::array({exited})).status, 200);
  j = get(path);
  EXPECT_EQ(j["state"], "succeeded") << j.dump(2);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["allocation"]["state"], "released");
  std::vector<std::string> states;
  for (const auto& e : j["events"]) states.push_back(e["to"]);
  EXPECT_EQ(states, (std::vector<std::string>{"queued", "starting", "running", "succeeded"}));
  Json logs = get(path + "/logs");
  ASSERT_EQ(logs["members"].size(), 1u);
  EXPECT_EQ(logs["members"][0]["text"], "epoch 1\ndone\n");
  EXPECT_EQ(get(path + "/logs?tail=1")["members"][0]["text"], "done\n");
  EXPECT_EQ(get(path + "/logs?since=8")["members"][0]["text"], "done\n");
  // Ended: no longer assigned, and a late report changes nothing.
  EXPECT_TRUE(heartbeat().body["assignments"]["jobs"].empty());
  ASSERT_EQ(heartbeat(Json::array({running})).status, 200);
  EXPECT_EQ(get(path)["state"], "succeeded");
  // The name is free again once the job has ended.
  EXPECT_EQ(submit(acme_jobs, acme.admin_token).status, 201);
}

TEST_F(Jobs, OnFailureStartsANewAttemptUntilItsRetriesAreSpent) {
  auto created =
      submit(acme_jobs, acme.admin_token, {{"restart_policy", "on-failure"}, {"retries", 1}});
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string job = created.body["id"], path = acme_jobs + "/" + job;
  auto exit1 = [&](int attempt) {
    return Json::array({{{"job", job},
                         {"rank", 0},
                         {"attempt", attempt},
                         {"state", "exited"},
                         {"exit_code", 1},
                         {"log_offset", 0},
                         {"log_end", 10},
                         {"log", "boom\n"}}});
  };
  ASSERT_EQ(heartbeat(exit1(1)).status, 200);
  Json j = get(path);
  EXPECT_EQ(j["state"], "starting") << j.dump(2);
  EXPECT_EQ(j["attempts"], 2);
  EXPECT_EQ(heartbeat().body["assignments"]["jobs"][0]["attempt"], 2);
  ASSERT_EQ(heartbeat(exit1(2)).status, 200);
  j = get(path);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["failure"], "exit_code");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(get(path + "/logs")["members"][0]["text"], "boom\n--- attempt 2 ---\nboom\n");
}

TEST_F(Jobs, AtItsQuotaAJobWaitsWithTheReasonAndACancelEndsItAtOnce) {
  auto created = submit(bravo_jobs, bravo.admin_token);  // bravo has no quota
  ASSERT_EQ(created.status, 201) << created.raw;
  EXPECT_EQ(created.body["state"], "queued");
  EXPECT_NE(created.body["reason"].get<std::string>().find("quota"), std::string::npos)
      << created.raw;
  const std::string path = bravo_jobs + "/" + created.body["id"].get<std::string>();
  auto cancelled = s.request("POST", path + "/cancel", Json::object(), bravo.admin_token);
  ASSERT_EQ(cancelled.status, 200) << cancelled.raw;
  EXPECT_EQ(cancelled.body["state"], "cancelled");
  EXPECT_EQ(cancelled.body["allocation"]["state"], "released");
  EXPECT_EQ(s.request("POST", path + "/cancel", Json::object(), bravo.admin_token).status, 409);
}

TEST_F(Jobs, ACancelStopsTheMembersAndEndsOnceTheyHaveStopped) {
  auto created = submit(acme_jobs, acme.admin_token);
  const std::string job = created.body["id"], path = acme_jobs + "/" + job;
  ASSERT_EQ(
      heartbeat(Json::array({{{"job", job}, {"rank", 0}, {"attempt", 1}, {"state", "running"}}}))
          .status,
      200);
  auto c = s.request("POST", path + "/cancel", Json::object(), acme.admin_token);
  ASSERT_EQ(c.status, 200) << c.raw;
  EXPECT_EQ(c.body["state"], "running");
  EXPECT_EQ(heartbeat().body["assignments"]["jobs"][0]["desired"], "stopped");
  ASSERT_EQ(heartbeat(Json::array({{{"job", job},
                                    {"rank", 0},
                                    {"attempt", 1},
                                    {"state", "exited"},
                                    {"exit_code", 137}}}))
                .status,
            200);
  Json j = get(path);
  EXPECT_EQ(j["state"], "cancelled") << j.dump(2);
  EXPECT_EQ(j["allocation"]["state"], "released");
}

// Preemption stops the victim's members the way every end does (SIGTERM now, SIGKILL once the
// grace has passed, both the agent's), and its GPUs pass to the preemptor only once the node no
// longer runs anything of it: never before, even past the grace.
TEST_F(Jobs, APreemptedJobsGpusPassOnOnlyOnceItsNodeNoLongerHoldsIt) {
  auto low =
      submit(acme_jobs, acme.admin_token,
             {{"name", "low"}, {"count", 2}, {"priority_class", "low"}, {"preemptible", true}});
  ASSERT_EQ(low.status, 201) << low.raw;
  const std::string low_job = low.body["id"], low_alloc = low.body["allocation"]["id"];
  const auto report = [](const std::string& job, const std::string& state) {
    Json r = {{"job", job}, {"rank", 0}, {"attempt", 1}, {"state", state}};
    if (state == "exited") r["exit_code"] = 143;
    return Json::array({r});
  };
  ASSERT_EQ(heartbeat(report(low_job, "running"), {low_alloc}).status, 200);
  ASSERT_EQ(get(acme_jobs + "/" + low_job)["state"], "running");

  auto high = submit(acme_jobs, acme.admin_token,
                     {{"name", "high"}, {"count", 2}, {"priority_class", "high"}});
  ASSERT_EQ(high.status, 201) << high.raw;
  const std::string high_job = high.body["id"], high_alloc = high.body["allocation"]["id"];
  EXPECT_EQ(high.body["allocation"]["state"], "placed") << high.raw;
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(get(acme_jobs + "/" + low_job)["state"], "preempted");
  const std::string allocations = acme_jobs.substr(0, acme_jobs.size() - 4) + "allocations/";
  Json victim = get(allocations + low_alloc);
  EXPECT_EQ(victim["state"], "preempted");
  ASSERT_EQ(victim["stopping"].size(), 1u) << victim.dump();
  EXPECT_EQ(victim["stopping"][0]["node_id"], node_id);
  EXPECT_EQ(victim["stopping"][0]["grace_seconds"], 30);

  const auto member = [](const Resp& hb, const std::string& job) {
    for (const auto& m : hb.body["assignments"]["jobs"])
      if (m["job"] == job) return m;
    return Json();
  };
  const auto allocation = [](const Resp& hb, const std::string& id) {
    for (const auto& a : hb.body["assignments"]["allocations"])
      if (a["id"] == id) return a;
    return Json();
  };
  // The node still runs the victim: it is told to stop it within the preemption grace, and to
  // make the preemptor's member without starting it.
  for (int seconds : {0, 31}) {
    s.clock().advance(std::chrono::seconds(seconds));
    auto hb = heartbeat(report(low_job, "running"), {low_alloc});
    ASSERT_EQ(hb.status, 200) << hb.raw;
    EXPECT_EQ(member(hb, low_job)["desired"], "stopped") << hb.raw;
    EXPECT_EQ(member(hb, low_job)["stop_grace_seconds"], 30) << hb.raw;
    EXPECT_EQ(member(hb, high_job)["desired"], "created") << hb.raw;
    EXPECT_EQ(allocation(hb, high_alloc)["waiting_for"], Json::array({low_alloc})) << hb.raw;
    EXPECT_EQ(allocation(hb, low_alloc)["stop"]["grace_seconds"], 30) << hb.raw;
    EXPECT_EQ(get(allocations + high_alloc)["state"], "placed");
  }
  // A node that has just restarted says nothing of what it holds: the stop stays.
  auto silent = s.request("POST", "/v1/agent/heartbeat", Json::object(), node_token);
  EXPECT_EQ(member(silent, high_job)["desired"], "created") << silent.raw;

  // Gone from the node: the preemptor starts, the victim is no longer assigned.
  auto hb = heartbeat(report(low_job, "exited"));
  EXPECT_TRUE(member(hb, low_job).is_null()) << hb.raw;
  EXPECT_EQ(member(hb, high_job)["desired"], "running") << hb.raw;
  EXPECT_FALSE(allocation(hb, high_alloc).contains("waiting_for")) << hb.raw;
  EXPECT_TRUE(get(allocations + low_alloc)["stopping"].empty());
  bool audited = false;
  for (const auto& rec : s.audit_records())
    if (rec["action"] == "node.heartbeat" && rec["detail"].contains("stopped"))
      audited = rec["detail"]["stopped"][0]["allocation"] == low_alloc &&
                rec["detail"]["stopped"][0]["overdue"] == true;
  EXPECT_TRUE(audited);
}

// A drain with a deadline evicts what still runs at the deadline (preempted, with the grace) and
// queues the job again: a new attempt under a new allocation on another node, each attempt's
// node and end visible. Before the deadline nothing moves.
TEST_F(Jobs, ADrainsDeadlineEvictsAJobAndPlacesItAgainOnAnotherNode) {
  auto created = submit(acme_jobs, acme.admin_token);
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string job = created.body["id"], path = acme_jobs + "/" + job;
  const std::string first = created.body["allocation"]["id"];
  ASSERT_EQ(
      heartbeat(Json::array({{{"job", job}, {"rank", 0}, {"attempt", 1}, {"state", "running"}}}),
                {first})
          .status,
      200);
  const std::string admin = s.admin_token();
  auto spare = s.request("POST", "/v1/fleet/import",
                         {{"nodes", {{{"inventory", h200_inventory("spare", 2)}}}}}, admin);
  ASSERT_EQ(spare.status, 201) << spare.raw;
  const std::string spare_id = spare.body["items"][0]["id"];

  auto d = s.request("POST", "/v1/nodes/" + node_id + "/drain",
                     {{"reason", "kernel update"}, {"deadline_seconds", 600}}, admin);
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["state"], "draining");
  EXPECT_FALSE(d.body["drain_deadline"].is_null());
  EXPECT_TRUE(IsProblem(
      s.request("POST", "/v1/nodes/" + spare_id + "/cordon", {{"deadline_seconds", 60}}, admin),
      400));
  s.clock().advance(std::chrono::seconds(599));
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(get(path)["state"], "running");

  s.clock().advance(std::chrono::seconds(2));
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  Json j = get(path);
  EXPECT_EQ(j["state"], "starting") << j.dump(2);
  EXPECT_EQ(j["attempts"], 2);
  ASSERT_EQ(j["members"].size(), 1u);
  EXPECT_EQ(j["members"][0]["node_id"], spare_id);
  EXPECT_EQ(j["members"][0]["attempt"], 2);
  ASSERT_EQ(j["attempt_history"].size(), 2u) << j.dump(2);
  EXPECT_EQ(j["attempt_history"][0]["nodes"], Json::array({node_id}));
  EXPECT_EQ(j["attempt_history"][0]["node_names"].size(), 1u);
  EXPECT_NE(j["attempt_history"][0]["node_names"][0], node_id) << j["attempt_history"];
  EXPECT_EQ(j["attempt_history"][0]["allocation_id"], first);
  EXPECT_NE(j["attempt_history"][0]["end_reason"].get<std::string>().find("deadline"),
            std::string::npos);
  EXPECT_EQ(j["attempt_history"][1]["nodes"], Json::array({spare_id}));
  EXPECT_TRUE(j["attempt_history"][1]["ended_at"].is_null());
  EXPECT_NE(j["allocation"]["id"], first);
  std::vector<std::string> states;
  for (const auto& e : j["events"]) states.push_back(e["to"]);
  EXPECT_EQ(states,
            (std::vector<std::string>{"queued", "starting", "running", "queued", "starting"}));

  // The drained node stops the first attempt within the preemption grace, then is empty.
  const std::string allocations = acme_jobs.substr(0, acme_jobs.size() - 4) + "allocations/";
  Json evicted = get(allocations + first);
  EXPECT_EQ(evicted["state"], "preempted");
  EXPECT_EQ(evicted["reason_code"], "drain_deadline");
  auto hb = heartbeat(nullptr, {first});
  ASSERT_EQ(hb.body["assignments"]["allocations"].size(), 1u) << hb.raw;
  EXPECT_EQ(hb.body["assignments"]["allocations"][0]["stop"]["grace_seconds"], 30) << hb.raw;
  EXPECT_TRUE(hb.body["assignments"]["jobs"].empty()) << hb.raw;
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(s.request("GET", "/v1/nodes/" + node_id, nullptr, admin).body["state"], "draining");
  heartbeat();
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  auto after = s.request("GET", "/v1/nodes/" + node_id, nullptr, admin).body;
  EXPECT_EQ(after["state"], "maintenance");
  EXPECT_TRUE(after["drain_deadline"].is_null());
}

// A failed node's on-failure job is placed again on another node (a new attempt) while its
// retries last; a job without a restart policy fails with node_lost.
TEST_F(Jobs, ALostNodesOnFailureJobIsPlacedAgainElsewhere) {
  auto retried = submit(acme_jobs, acme.admin_token,
                        {{"name", "retried"}, {"restart_policy", "on-failure"}, {"retries", 1}});
  auto plain = submit(acme_jobs, acme.admin_token, {{"name", "plain"}});
  ASSERT_EQ(retried.status, 201) << retried.raw;
  ASSERT_EQ(plain.status, 201) << plain.raw;
  const std::string admin = s.admin_token();
  auto spare = s.request("POST", "/v1/fleet/import",
                         {{"nodes", {{{"inventory", h200_inventory("spare", 2)}}}}}, admin);
  ASSERT_EQ(spare.status, 201) << spare.raw;
  auto f = s.request("POST", "/v1/nodes/" + node_id + "/fail", {{"reason", "PSU"}}, admin);
  ASSERT_EQ(f.status, 200) << f.raw;
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  Json again = get(acme_jobs + "/" + retried.body["id"].get<std::string>());
  EXPECT_EQ(again["state"], "starting") << again.dump(2);
  EXPECT_EQ(again["attempts"], 2);
  EXPECT_EQ(again["members"][0]["node_id"], spare.body["items"][0]["id"]);
  EXPECT_NE(again["attempt_history"][0]["end_reason"].get<std::string>().find("PSU"),
            std::string::npos)
      << again.dump(2);
  Json lost = get(acme_jobs + "/" + plain.body["id"].get<std::string>());
  EXPECT_EQ(lost["state"], "failed");
  EXPECT_EQ(lost["failure"], "node_lost");
}

// A gang starts together or not at all: its members are only created until every one has its
// container; one that cannot start fails the job before any other member has run.
TEST_F(Jobs, AGangIsStartedOnlyOnceEveryMemberIsCreated) {
  auto member = [](const std::string& job, int rank, const std::string& state) {
    Json m = {{"job", job}, {"rank", rank}, {"attempt", 1}, {"state", state}};
    if (state == "failed") m["error"] = "volume checkpoints is not on this node yet";
    return m;
  };
  auto desired = [&] {
    std::vector<std::string> out;
    const Resp hb = heartbeat();
    for (const auto& m : hb.body["assignments"]["jobs"]) out.push_back(m["desired"]);
    return out;
  };
  auto created = submit(acme_jobs, acme.admin_token, {{"gang", 2}});
  ASSERT_EQ(created.status, 201) << created.raw;
  ASSERT_EQ(created.body["state"], "starting") << created.raw;
  const std::string job = created.body["id"];
  EXPECT_EQ(desired(), (std::vector<std::string>{"created", "created"}));
  ASSERT_EQ(heartbeat(Json::array({member(job, 0, "starting")})).status, 200);
  EXPECT_EQ(desired(), (std::vector<std::string>{"created", "created"}))
      << "rank 1 has no container yet";
  ASSERT_EQ(heartbeat(Json::array({member(job, 1, "starting")})).status, 200);
  EXPECT_EQ(desired(), (std::vector<std::string>{"running", "running"}));
  ASSERT_EQ(heartbeat(Json::array({member(job, 0, "running"), member(job, 1, "running")})).status,
            200);
  EXPECT_EQ(get(acme_jobs + "/" + job)["state"], "running");
  ASSERT_EQ(
      s.request("POST", acme_jobs + "/" + job + "/cancel", Json::object(), acme.admin_token).status,
      200);
  // Members that stop before they ever ran report so, and the cancel completes.
  ASSERT_EQ(heartbeat(Json::array({member(job, 0, "stopped"), member(job, 1, "stopped")})).status,
            200);
  EXPECT_EQ(get(acme_jobs + "/" + job)["state"], "cancelled");

  const std::string broken =
      submit(acme_jobs, acme.admin_token, {{"name", "train-2"}, {"gang", 2}}).body["id"];
  ASSERT_EQ(
      heartbeat(Json::array({member(broken, 0, "starting"), member(broken, 1, "failed")})).status,
      200);
  Json j = get(acme_jobs + "/" + broken);
  EXPECT_EQ(j["state"], "failed") << j.dump(2);
  EXPECT_EQ(j["failure"], "start_failed");
  EXPECT_TRUE(heartbeat().body["assignments"]["jobs"].empty()) << "rank 0 is never started";
}

// A member's CPU and memory limits: its offering's per-unit shape times its units, or else the
// node's share in proportion to the GPUs it holds.
TEST_F(Jobs, AMembersLimitsComeFromItsOfferingOrElseItsShareOfTheNode) {
  const std::string admin = s.admin_token();
  auto shaped = s.request("POST", "/v1/offerings",
                          {{"name", "gpu1-small"},
                           {"tier", "dedicated-gpu"},
                           {"models", {"H200"}},
                           {"container", {{"cpu_millis", 1500}, {"memory_mib", 512}}}},
                          admin);
  ASSERT_EQ(shaped.status, 201) << shaped.raw;
  EXPECT_EQ(shaped.body["container"]["cpu_millis"], 1500);
  ASSERT_EQ(submit(acme_jobs, acme.admin_token, {{"offering", "gpu1-small"}, {"count", 2}}).status,
            201);
  const Resp hb = heartbeat();
  ASSERT_EQ(hb.body["assignments"]["jobs"].size(), 1u) << hb.raw;
  const Json& limits = hb.body["assignments"]["jobs"][0]["limits"];
  EXPECT_EQ(limits["cpu_millis"], 3000);
  EXPECT_EQ(limits["memory_bytes"], int64_t{1024} << 20);

  // Without a shape: half the node's CPU and memory for one GPU of its two.
  const Json node = s.request("GET", "/v1/nodes/" + node_id, nullptr, admin).body;
  auto other = s.create_project(acme.admin_token, acme.id, "eval");
  // (the first job holds both GPUs of the node: release it first)
  const Json first = get(acme_jobs)["items"][0];
  ASSERT_EQ(s.request("POST", acme_jobs + "/" + first["id"].get<std::string>() + "/cancel",
                      Json::object(), acme.admin_token)
                .status,
            200);
  ASSERT_EQ(
      heartbeat(
          Json::array({{{"job", first["id"]}, {"rank", 0}, {"attempt", 1}, {"state", "stopped"}}}))
          .status,
      200);
  const std::string eval_jobs =
      "/v1/tenants/" + acme.id + "/projects/" + other["id"].get<std::string>() + "/jobs";
  ASSERT_EQ(submit(eval_jobs, acme.admin_token).status, 201);
  const Resp hb2 = heartbeat();
  ASSERT_EQ(hb2.body["assignments"]["jobs"].size(), 1u) << hb2.raw;
  EXPECT_EQ(hb2.body["assignments"]["jobs"][0]["limits"]["cpu_millis"],
            node["cpu_millis"].get<int64_t>() / 2)
      << node.dump();
  EXPECT_EQ(hb2.body["assignments"]["jobs"][0]["limits"]["memory_bytes"],
            node["memory_bytes"].get<int64_t>() / 2);

  // A shape that does not fit the delivery, or out of range, is refused.
  EXPECT_EQ(s.request("POST", "/v1/offerings",
                      {{"name", "vm-shaped"},
                       {"tier", "dedicated-gpu"},
                       {"delivery", "vm"},
                       {"vm", {{"vcpus", 4}, {"memory_mib", 8192}}},
                       {"container", {{"cpu_millis", 1000}}}},
                      admin)
                .status,
            400);
  EXPECT_EQ(
      s.request("POST", "/v1/offerings",
                {{"name", "tiny"}, {"tier", "dedicated-gpu"}, {"container", {{"memory_mib", 1}}}},
                admin)
          .status,
      400);
}

TEST_F(Jobs, BadInputIsRefusedAndChangesNothing) {
  const std::string t = acme.admin_token;
  EXPECT_EQ(submit(acme_jobs, t, {{"privileged", true}}).status, 400);
  EXPECT_EQ(
      submit(acme_jobs, t, {{"env", {{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}}}})
          .status,
      400);
  EXPECT_EQ(submit(acme_jobs, t, {{"offering", "nope"}}).status, 400);
  EXPECT_EQ(submit(acme_jobs, t, {{"offering", "vm1"}}).status, 400);
  EXPECT_EQ(submit(acme_jobs, t, {{"gang", 65}}).status, 400);
  EXPECT_EQ(submit(acme_jobs, t, {{"secrets", {"token"}}}).status, 400) << "no such secret";
  EXPECT_EQ(submit(acme_jobs, t, {{"volumes", {{{"kind", "checkpoints"}}}}}).status, 400)
      << "the project has no volumes";
  EXPECT_EQ(s.request_raw("POST", acme_jobs, "{not json", t).status, 400);
  // Another tenant's credentials see no such project.
  EXPECT_EQ(submit(acme_jobs, bravo.admin_token).status, 404);
  EXPECT_TRUE(get(acme_jobs)["items"].empty());

  auto created = submit(acme_jobs, t);
  const std::string job = created.body["id"], path = acme_jobs + "/" + job;
  EXPECT_EQ(submit(acme_jobs, t).status, 409) << "a live job of that name exists";
  // A malformed report is refused whole: the good entry beside it is not applied.
  auto bad =
      heartbeat(Json::array({{{"job", job}, {"rank", 0}, {"attempt", 1}, {"state", "running"}},
                             {{"job", job}, {"rank", 0}, {"attempt", 1}, {"state", "bogus"}}}));
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(
      heartbeat(Json::array({{{"job", job}, {"rank", 0}, {"attempt", 1}, {"state", "exited"}}}))
          .status,
      400)
      << "an exit without its code";
  EXPECT_EQ(get(path)["state"], "starting");
  EXPECT_EQ(s.request("GET", path, nullptr, bravo.admin_token).status, 404);
  EXPECT_EQ(s.request("GET", path + "/logs?tail=x", nullptr, t).status, 400);
}

// Long polls (docs/api.md): the node's agent, waiting on GET /v1/agent/changes with the digest its
// heartbeat gave, is answered as soon as a job is placed on its node; unchanged, it is answered
// at the end of its wait; a stale digest is answered at once.
TEST_F(Jobs, AnAgentWaitingForChangesIsAnsweredAsSoonAsAJobIsPlacedOnItsNode) {
  using Clock = std::chrono::steady_clock;
  const std::string etag = heartbeat().body["assignments_etag"];
  ASSERT_EQ(etag.size(), 32u);
  auto now = s.request("GET", "/v1/agent/changes?since=" + etag, nullptr, node_token);
  ASSERT_EQ(now.status, 200) << now.raw;
  EXPECT_EQ(now.body["etag"], etag);
  EXPECT_EQ(now.body["changed"], false);
  EXPECT_EQ(s.request("GET", "/v1/agent/changes?since=stale", nullptr, node_token).body["changed"],
            true);

  auto t0 = Clock::now();
  auto idle = s.request("GET", "/v1/agent/changes?since=" + etag + "&wait=1", nullptr, node_token);
  EXPECT_EQ(idle.body["changed"], false);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(900)) << "held for its wait";

  Resp held;
  std::chrono::milliseconds took{};
  std::thread agent([&] {
    auto start = Clock::now();
    held = s.request("GET", "/v1/agent/changes?since=" + etag + "&wait=30", nullptr, node_token);
    took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(submit(acme_jobs, acme.admin_token).status, 201);
  agent.join();
  ASSERT_EQ(held.status, 200) << held.raw;
  EXPECT_EQ(held.body["changed"], true);
  EXPECT_NE(held.body["etag"], etag);
  EXPECT_GE(took, std::chrono::milliseconds(250)) << "it was held until the job came";
  EXPECT_LT(took, std::chrono::seconds(10)) << "answered when the job came, not at its wait's end";
  // The heartbeat that follows carries the job and the new digest.
  auto hb = heartbeat();
  EXPECT_EQ(hb.body["assignments"]["jobs"].size(), 1u);
  EXPECT_EQ(hb.body["assignments_etag"], held.body["etag"]);

  EXPECT_EQ(s.request("GET", "/v1/agent/changes?wait=61", nullptr, node_token).status, 400);
  EXPECT_EQ(s.request("GET", "/v1/agent/changes", nullptr, acme.admin_token).status, 403)
      << "only node credentials";
}

// A follower of a job's output (logs?since=S&wait=W) is answered as soon as the node reports more.
TEST_F(Jobs, AFollowerIsAnsweredAsSoonAsTheJobWritesMore) {
  const std::string job = submit(acme_jobs, acme.admin_token).body["id"];
  const std::string path = acme_jobs + "/" + job + "/logs";
  Resp followed;
  std::thread follower(
      [&] { followed = s.request("GET", path + "?since=0&wait=30", nullptr, acme.admin_token); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(heartbeat(Json::array({{{"job", job},
                                    {"rank", 0},
                                    {"attempt", 1},
                                    {"state", "running"},
                                    {"log_offset", 0},
                                    {"log_end", 6},
                                    {"log", "hello\n"}}}))
                .status,
            200);
  follower.join();
  ASSERT_EQ(followed.status, 200) << followed.raw;
  EXPECT_EQ(followed.body["members"][0]["text"], "hello\n");
  // Nothing past byte 6 yet: held for the wait, then answered with nothing new.
  auto t0 = std::chrono::steady_clock::now();
  auto idle = s.request("GET", path + "?since=6&wait=1", nullptr, acme.admin_token);
  EXPECT_EQ(idle.body["members"][0]["text"], "");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(900));
  EXPECT_EQ(s.request("GET", path + "?since=0&wait=30", nullptr, bravo.admin_token).status, 404);
}

// logs?follow=true streams the output as NDJSON on one response while the job runs: each piece
// arrives as the node reports it, the job's state comes with a cursor, and the body ends when
// the job has finished. A cursor resumes a stream without sending anything twice.
TEST_F(Jobs, AFollowedJobStreamsItsOutputOnOneResponseUntilItEnds) {
  const std::string job = submit(acme_jobs, acme.admin_token).body["id"];
  const std::string path = acme_jobs + "/" + job + "/logs";
  const auto report = [&](const std::string& state, int64_t from, const std::string& text,
                          Json extra = Json::object()) {
    Json r = {{"job", job},         {"rank", 0},
              {"attempt", 1},       {"state", state},
              {"log_offset", from}, {"log_end", from + static_cast<int64_t>(text.size())},
              {"log", text}};
    r.update(extra);
    return heartbeat(Json::array({r})).status;
  };
  ASSERT_EQ(heartbeat().body["assignments"]["jobs"].size(), 1u);  // the node has its member
  ASSERT_EQ(report("running", 0, "one\n"), 200);
  RawConnection c(s.port());
  ASSERT_TRUE(c.send("GET " + path + "?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                     acme.admin_token + "\r\n\r\n"));
  // The head says chunked; the first part has what is kept and the state.
  auto first = c.read_until("\"state\":\"running\"", std::chrono::seconds(10));
  ASSERT_TRUE(first);
  EXPECT_NE(first->find("Transfer-Encoding: chunked"), std::string::npos) << *first;
  EXPECT_NE(first->find("application/x-ndjson"), std::string::npos) << *first;
  EXPECT_NE(first->find(R"({"end":4,"rank":0,"start":0,"text":"one\n"})"), std::string::npos)
      << *first;
  // More output arrives on the same response while the job runs.
  ASSERT_EQ(report("running", 4, "two\n"), 200);
  auto second = c.read_until(R"("text":"two\n")", std::chrono::seconds(10));
  ASSERT_TRUE(second) << "the second piece was not streamed";
  EXPECT_EQ(second->find("\r\n0\r\n\r\n"), std::string::npos) << "the body ended early";
  // It exits: the last line says so and the body ends (the last chunk).
  ASSERT_EQ(report("exited", 8, "", {{"exit_code", 0}}), 200);
  auto ended = c.read_until("\r\n0\r\n\r\n", std::chrono::seconds(10));
  ASSERT_TRUE(ended) << "the stream did not end with the job";
  EXPECT_NE(ended->find(R"("finished":true)"), std::string::npos) << *ended;
  EXPECT_NE(ended->find(R"("state":"succeeded")"), std::string::npos) << *ended;
  EXPECT_EQ(ended->find(R"("text":"one\n")"), ended->rfind(R"("text":"one\n")"))
      << "a piece sent twice";

  // A cursor resumes after what it covers: the finished job's answer is one plain response.
  auto resumed =
      s.request("GET", path + "?follow=true&cursor=running~0:4", nullptr, acme.admin_token);
  ASSERT_EQ(resumed.status, 200) << resumed.raw;
  EXPECT_EQ(resumed.raw.find(R"("text":"one\n")"), std::string::npos) << resumed.raw;
  EXPECT_NE(resumed.raw.find(R"("text":"two\n")"), std::string::npos) << resumed.raw;
  for (const char* bad :
       {"?follow=yes", "?follow=true&cursor=bogus", "?follow=true&cursor=running~0:x",
        "?follow=true&since=0", "?follow=true&wait=5", "?cursor=running~"})
    EXPECT_EQ(s.request("GET", path + bad, nullptr, acme.admin_token).status, 400) << bad;
  EXPECT_EQ(s.request("GET", path + "?follow=true", nullptr, bravo.admin_token).status, 404);
}

}  // namespace
}  // namespace gp::it
