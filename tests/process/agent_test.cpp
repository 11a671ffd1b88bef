// Two real agents in simulate mode against a real server: enrol, report, heartbeat; one stops
// and is marked failed after the node timeout; reused and wrong join tokens are refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <thread>

#include "common/files.h"
#include "process/process_util.h"

namespace gp::proc {
namespace {

std::string write_inventory(const TempDir& dir, const std::string& name, int gpus) {
  Json inv = {{"node", {{"name", name}, {"cpu_millis", 64000}, {"rack", "r1"}}},
              {"gpus", Json::array()}};
  for (int i = 0; i < gpus; ++i)
    inv["gpus"].push_back({{"uuid", "GPU-" + name + "-" + std::to_string(i)},
                           {"index", i},
                           {"model", "NVIDIA H200"},
                           {"memory_bytes", int64_t(141) << 30},
                           {"mig_capable", true}});
  std::string path = dir.str(name + ".json");
  std::ofstream(path) << inv.dump();
  return path;
}

std::string join_token(const Server& server) {
  auto r = server.admin_request("POST", "/v1/join-tokens", Json{{"ttl_seconds", 600}});
  EXPECT_TRUE(r && r->status == 201);
  return Json::parse(r->body)["token"].get<std::string>();
}

// A real agent for node `name` on a simulated inventory, enrolled with a fresh join token, its
// state in <dir>/<name>-state and its output in <dir>/<name>.out and .err.
auto spawn_agent(const TempDir& dir, const Server& server, const std::string& name,
                 const std::string& inventory, std::vector<std::string> extra) {
  std::vector<std::string> args = {"agent",
                                   "--server",
                                   server.endpoint(),
                                   "--join-token",
                                   join_token(server),
                                   "--state-dir",
                                   dir.str(name + "-state"),
                                   "--simulate",
                                   inventory};
  args.insert(args.end(), extra.begin(), extra.end());
  return Child::spawn(
      gpuplane_binary(), args,
      {.stdout_path = dir.path() / (name + ".out"), .stderr_path = dir.path() / (name + ".err")});
}

Json node(const Server& server, const std::string& name) {
  auto r = server.admin_request("GET", "/v1/nodes/" + name);
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : r.error().message);
  return Json::parse(r->body);
}

TEST(Agent, EnrolHeartbeatAndFailureDetection) {
  TempDir dir;
  Server server(dir.path() / "data", {"--node-timeout-seconds", "2"});
  ASSERT_TRUE(server.start());
  std::string bin = gpuplane_binary();
  std::string t1 = join_token(server), t2 = join_token(server);

  auto agent = [&](const std::string& name, const std::string& token, int gpus) {
    SpawnOptions o;
    o.stdout_path = dir.path() / (name + ".out");
    o.stderr_path = dir.path() / (name + ".err");
    return Child::spawn(bin,
                        {"agent", "--server", server.endpoint(), "--join-token", token,
                         "--state-dir", dir.str(name + "-state"), "--simulate",
                         write_inventory(dir, name, gpus), "--heartbeat-seconds", "1"},
                        o);
  };
  auto a = agent("node-a", t1, 8);
  auto b = agent("node-b", t2, 4);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(eventually([&] {
    auto r = server.admin_request("GET", "/v1/fleet/summary");
    return r && r->status == 200 && Json::parse(r->body)["gpus_total"] == 12;
  })) << server.log();
  EXPECT_EQ(node(server, "node-a")["state"], "ready");
  EXPECT_EQ(node(server, "node-b")["gpus"].size(), 4u);

  // Heartbeats keep moving.
  std::string hb = node(server, "node-a")["last_heartbeat"];
  ASSERT_TRUE(eventually([&] { return node(server, "node-a")["last_heartbeat"] != hb; }));

  // The credential is kept in the state dir, private.
  struct stat st {};
  ASSERT_EQ(::stat(dir.str("node-a-state/node-credential").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // node-b stops: after the timeout it is failed; node-a stays ready.
  b->signal(SIGKILL);
  b->wait_for(5s);
  ASSERT_TRUE(eventually([&] { return node(server, "node-b")["state"] == "failed"; }));
  EXPECT_EQ(node(server, "node-b")["state_reason"], "missed heartbeats");
  EXPECT_EQ(node(server, "node-a")["state"], "ready");

  // It comes back with its saved credential (no join token needed) and recovers.
  auto b2 =
      Child::spawn(bin,
                   {"agent", "--server", server.endpoint(), "--state-dir", dir.str("node-b-state"),
                    "--simulate", dir.str("node-b.json"), "--heartbeat-seconds", "1"},
                   {.stdout_path = dir.path() / "b2.out", .stderr_path = dir.path() / "b2.err"});
  ASSERT_TRUE(b2);
  ASSERT_TRUE(eventually([&] { return node(server, "node-b")["state"] == "ready"; }));

  // The failure and the recovery are in the audit trail.
  auto audit = server.admin_request("GET", "/v1/audit?action=node.fail&limit=100");
  ASSERT_TRUE(audit && audit->status == 200);
  EXPECT_GE(Json::parse(audit->body)["items"].size(), 1u);

  // A reused join token and a wrong one are refused.
  auto reuse =
      run(bin, {"agent", "--server", server.endpoint(), "--join-token", t1, "--state-dir",
                dir.str("c-state"), "--simulate", write_inventory(dir, "node-c", 1), "--once"});
  EXPECT_EQ(reuse.exit_code, 1);
  EXPECT_NE(reuse.err.find("join token has already been used"), std::string::npos) << reuse.err;
  auto wrong = run(bin, {"agent", "--server", server.endpoint(), "--join-token",
                         t1.substr(0, t1.find('.')) + "." + std::string(43, 'A'), "--state-dir",
                         dir.str("d-state"), "--simulate", dir.str("node-c.json"), "--once"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("unknown join token"), std::string::npos) << wrong.err;
  EXPECT_FALSE(server.admin_request("GET", "/v1/nodes/node-c")->status == 200);

  // A retired node's agent is refused at once and exits.
  ASSERT_EQ(server.admin_request("POST", "/v1/nodes/node-a/maintenance", Json::object())->status,
            200);
  ASSERT_EQ(server.admin_request("POST", "/v1/nodes/node-a/retire", Json::object())->status, 200);
  auto code = a->wait_for(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 3);
  a.reset();
  b2->signal(SIGTERM);
  EXPECT_EQ(b2->wait_for(5s), 0);
}

// The scheduler turns a whole GPU into MIG for a 3g allocation: the real agent (a simulated node,
// which applies plans to its inventory file by the same rules as through NVML) makes the GPU
// match, reports it, and only then does the allocation stop configuring and turn active.
TEST(Agent, AppliesTheSchedulersMigPlanBeforeTheAllocationTurnsActive) {
  TempDir dir;
  Server server(dir.path() / "data");
  ASSERT_TRUE(server.start());
  const std::string inventory = write_inventory(dir, "node-m", 1);
  auto agent = spawn_agent(dir, server, "node-m", inventory, {"--heartbeat-seconds", "30"});
  ASSERT_TRUE(agent);
  ASSERT_TRUE(eventually([&] {
    auto r = server.admin_request("GET", "/v1/nodes/node-m");
    return r && r->status == 200 && Json::parse(r->body)["state"] == "ready";
  })) << server.log();
  auto admin = [&](std::string_view method, const std::string& target, const Json& body) {
    auto r = server.admin_request(method, target, body);
    EXPECT_TRUE(r && r->status < 300) << (r ? r->body : r.error().message);
    return r ? Json::parse(r->body.empty() ? "null" : r->body) : Json();
  };
  const std::string tenant = admin("POST", "/v1/tenants", {{"name", "migco"}})["id"];
  const std::string project =
      admin("POST", "/v1/tenants/" + tenant + "/projects", {{"name", "p"}})["id"];
  admin("PUT", "/v1/tenants/" + tenant + "/quota", {{"models", {{"H200", {{"nominal", 8}}}}}});
  const std::string base = "/v1/tenants/" + tenant + "/projects/" + project + "/allocations";
  const auto submitted = std::chrono::steady_clock::now();
  const Json placed =
      admin("POST", base, {{"shape", {{"tier", "mig"}, {"mig_profile", "3g.71gb"}, {"count", 1}}}});
  ASSERT_EQ(placed["state"], "placed") << placed;
  const Json instance = placed["placement"]["gpus"][0]["mig"];

  // The agent is woken by the change (its heartbeat is 30 s away), applies the plan and reports.
  Json seen;
  ASSERT_TRUE(eventually(
      [&] {
        seen = admin("GET", base + "/" + placed["id"].get<std::string>(), nullptr);
        return seen["state"] == "active";
      },
      20s))
      << seen << "\n"
      << read_text_file(dir.str("node-m.err")).value_or("");
  std::cout << "[ mig      ] placed to active (plan applied, reported) in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - submitted)
                   .count()
            << " ms\n";
  EXPECT_TRUE(seen["configuring"].empty()) << seen;
  // The node's file now holds the instance, and the control plane's inventory says so.
  const Json file = Json::parse(read_text_file(inventory).value_or("{}"));
  EXPECT_EQ(file["gpus"][0]["mode"], "mig");
  EXPECT_EQ(file["gpus"][0]["mig_instances"], Json::array({instance})) << file;
  const Json gpu = admin("GET", "/v1/nodes/node-m", nullptr)["gpus"][0];
  EXPECT_EQ(gpu["mode"], "mig") << gpu;
  // What the node did is in the audit trail.
  const Json audit = admin("GET", "/v1/audit?action=node.heartbeat&limit=100", nullptr);
  EXPECT_NE(audit.dump().find("created 3g.71gb@" + std::to_string(instance["start"].get<int>())),
            std::string::npos)
      << audit;
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait_for(10s), 0);
}

// GPUs an operator put in repair are checked by the real agent with DCGM's diagnostic (a stand-in
// `dcgmi` that fails for GPU index 1): GPU 0 passes and is back in service, GPU 1 stays out with
// what the diagnostic said.
TEST(Agent, AGpuInRepairIsBackOnlyWhenItsDcgmDiagnosticPasses) {
  TempDir dir;
  Server server(dir.path() / "data");
  ASSERT_TRUE(server.start());
  const std::string dcgmi = dir.str("dcgmi");
  std::ofstream(dcgmi) << "#!/bin/sh\necho \"$*\" >> " << dir.str("dcgmi.calls")
                       << "\ncase \"$*\" in *'-i 1'*) echo 'Memory: Fail'; exit 226;; esac\n"
                          "echo 'Diagnostic: Pass'\n";
  ::chmod(dcgmi.c_str(), 0755);
  // Both GPUs threw an XID, then report clean: unhealthy until repaired.
  const std::string inventory = write_inventory(dir, "node-r", 2);
  Json inv = Json::parse(read_text_file(inventory).value_or("{}"));
  auto write = [&](int xid) {
    for (auto& g : inv["gpus"])
      g["health"] = {{"xid_errors", xid ? Json::array({xid}) : Json::array()}};
    std::ofstream(inventory) << inv.dump();
  };
  write(79);
  auto agent =
      spawn_agent(dir, server, "node-r", inventory, {"--heartbeat-seconds", "1", "--dcgmi", dcgmi});
  ASSERT_TRUE(agent);
  auto gpu = [&](int index) {
    auto r =
        server.admin_request("GET", "/v1/nodes/node-r/gpus/" + std::to_string(index) + "/health");
    return r && r->status == 200 ? Json::parse(r->body) : Json::object();
  };
  ASSERT_TRUE(eventually([&] { return gpu(1).value("health", "") == "unhealthy"; }))
      << server.log();
  write(0);
  for (int index : {0, 1})
    ASSERT_EQ(
        server
            .admin_request("POST", "/v1/nodes/node-r/gpus/" + std::to_string(index) + "/repair",
                           Json{{"reason", "reseated"}})
            ->status,
        200);
  ASSERT_TRUE(eventually([&] { return gpu(0).value("health", "") == "healthy"; }))
      << gpu(0).dump(2) << read_text_file(dir.str("node-r.err")).value_or("");
  Json out;
  ASSERT_TRUE(eventually([&] {
    out = gpu(1);
    return out.value("health_reason", "").find("Memory: Fail") != std::string::npos;
  })) << out.dump(2);
  EXPECT_EQ(out["health"], "unhealthy");
  EXPECT_FALSE(out["repair"].is_null());
  // Each GPU was diagnosed once, by its own index.
  const std::string calls = read_text_file(dir.str("dcgmi.calls")).value_or("");
  EXPECT_EQ(calls, "diag -r 1 -i 0\ndiag -r 1 -i 1\n") << calls;
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait_for(10s), 0);
}

}  // namespace
}  // namespace gp::proc
