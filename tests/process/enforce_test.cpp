// A real agent enforcing its assignment against a real server, as root: it creates the tenant
// volume trees with the planned owners and modes, removes them once the deletion offboarding
// scheduled is due (and the deletion shows done), never removes a tree another project of the
// same name holds now, and applies the tenant nftables ruleset inside
// a network namespace the test creates (no links or routes out of it; removed even on failure).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "process/process_util.h"

namespace gp::proc {
namespace {

Json admin(const Server& server, std::string_view method, const std::string& target,
           const Json& body = nullptr, int status = 200) {
  auto r = server.admin_request(method, target, body);
  EXPECT_TRUE(r) << target;
  if (!r) return nullptr;
  EXPECT_EQ(r->status, status) << method << " " << target << ": " << r->body;
  return r->body.empty() ? Json(nullptr) : Json::parse(r->body, nullptr, false);
}

std::string write_inventory(const TempDir& dir, const std::string& name) {
  Json inv = {{"node", {{"name", name}, {"cpu_millis", 8000}, {"rack", "r1"}}},
              {"gpus",
               {{{"uuid", "GPU-" + name + "-0"},
                 {"index", 0},
                 {"model", "NVIDIA H200"},
                 {"memory_bytes", int64_t(141) << 30},
                 {"mig_capable", true}}}}};
  std::string path = dir.str(name + ".json");
  std::ofstream(path) << inv.dump();
  return path;
}

std::optional<Child> start_agent(const Server& server, const TempDir& dir, const std::string& name,
                                 std::vector<std::string> extra) {
  Json jt = admin(server, "POST", "/v1/join-tokens", Json{{"ttl_seconds", 600}}, 201);
  std::vector<std::string> args = {"agent",
                                   "--server",
                                   server.endpoint(),
                                   "--join-token",
                                   jt.value("token", ""),
                                   "--state-dir",
                                   dir.str(name + "-state"),
                                   "--simulate",
                                   write_inventory(dir, name),
                                   "--heartbeat-seconds",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return Child::spawn(
      gpuplane_binary(), args,
      {.stdout_path = dir.path() / (name + ".out"), .stderr_path = dir.path() / (name + ".err")});
}

TEST(Enforce, AgentCreatesVolumeTreesAndRemovesThemWhenDue) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the agent chowns the volume trees)";
  TempDir dir;
  Server server(dir.path() / "data", {"--storage-grace", "3s"});
  ASSERT_TRUE(server.start());
  Json t = admin(server, "POST", "/v1/tenants", Json{{"name", "acme"}}, 201);
  const std::string tenant = t.value("id", "");
  admin(server, "POST", "/v1/tenants/" + tenant + "/projects", Json{{"name", "vision"}}, 201);
  admin(server, "PUT", "/v1/tenants/" + tenant + "/projects/vision/volumes",
        Json{{"size_limits", {{"datasets", 1 << 30}}}});
  Json plan = admin(server, "GET", "/v1/tenants/" + tenant + "/volumes");
  ASSERT_EQ(plan["directories"].size(), 6u) << plan.dump();

  const std::filesystem::path root = dir.path() / "storage";
  std::filesystem::create_directory(root);
  auto agent = start_agent(server, dir, "store-node", {"--storage-root", root.string()});
  ASSERT_TRUE(agent);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(root / "acme/vision/scratch"); }))
      << agent->stderr_text();
  for (const auto& d : plan["directories"]) {
    std::string path = (root / d["path"].get<std::string>()).string();
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << path;
    EXPECT_EQ(st.st_uid, d["uid"].get<uid_t>()) << path;
    EXPECT_EQ(st.st_gid, d["gid"].get<gid_t>()) << path;
    EXPECT_EQ(fmt::format("{:04o}", st.st_mode & 07777), d["mode"].get<std::string>()) << path;
  }
  // A file a tenant workload wrote is removed with the tree.
  std::ofstream(root / "acme/vision/datasets/data.bin") << "payload";

  // Offboarding schedules the tree; the agent removes it once the (3 s) grace has passed.
  Json off = admin(server, "DELETE", "/v1/tenants/" + tenant);
  EXPECT_EQ(off.value("state", ""), "offboarding");
  Json scheduled = admin(server, "GET", "/v1/storage/deletions");
  ASSERT_EQ(scheduled["items"].size(), 1u) << scheduled.dump();
  EXPECT_EQ(scheduled["items"][0]["state"], "scheduled");
  EXPECT_TRUE(std::filesystem::exists(root / "acme")) << "removed before the grace ended";
  ASSERT_TRUE(eventually([&] { return !std::filesystem::exists(root / "acme"); }))
      << agent->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(root)) << "the storage root itself must stay";
  ASSERT_TRUE(eventually([&] {
    Json d = admin(server, "GET", "/v1/storage/deletions?state=done");
    return d.is_object() && d["items"].size() == 1;
  })) << agent->stderr_text();
  Json done = admin(server, "GET", "/v1/storage/deletions");
  EXPECT_EQ(done["items"][0]["state"], "done");
  Json node = admin(server, "GET", "/v1/nodes/store-node");
  EXPECT_EQ(done["items"][0]["done_by"], node["id"]);
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait_for(10s), 0);
}

// The identity the agent recorded on a tree's top directory (null when none).
Json recorded_identity(const std::filesystem::path& dir) {
  std::string text(512, '\0');
  ssize_t n = ::getxattr(dir.c_str(), "trusted.gpuplane.identity", text.data(), text.size());
  if (n <= 0) return nullptr;
  text.resize(static_cast<size_t>(n));
  return Json::parse(text, nullptr, false);
}

// Issue 24, finding 5, end to end: create project p, give it volumes, delete the volumes (their
// removal is scheduled after the grace), delete the project, create p again, give it volumes,
// write a file. Before the fix the earlier deletion named only "acme/p": when the grace ended
// the agent removed the new project's tree, file included, while the API still showed its
// volumes active. Now the new volumes wait until the earlier tree is removed (409 meanwhile),
// the deletion names the earlier project's id and generation, and the new tree with its file
// outlives it, recording its own identity.
TEST(Enforce, ReusingAProjectNameNeverDeletesTheNewProjectsData) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the agent chowns the volume trees)";
  TempDir dir;
  Server server(dir.path() / "data", {"--storage-grace", "3s"});
  ASSERT_TRUE(server.start());
  Json t = admin(server, "POST", "/v1/tenants", Json{{"name", "acme"}}, 201);
  const std::string tenant = t.value("id", "");
  const std::string projects = "/v1/tenants/" + tenant + "/projects";
  const std::string volumes = projects + "/p/volumes";
  Json first = admin(server, "POST", projects, Json{{"name", "p"}}, 201);
  Json v1 = admin(server, "PUT", volumes, Json::object());

  const std::filesystem::path root = dir.path() / "storage";
  std::filesystem::create_directory(root);
  auto agent = start_agent(server, dir, "store-node", {"--storage-root", root.string()});
  ASSERT_TRUE(agent);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(root / "acme/p/datasets"); }))
      << agent->stderr_text();
  std::ofstream(root / "acme/p/datasets/old.bin") << "the first project's data";

  Json deletion = admin(server, "DELETE", volumes, nullptr, 202);
  EXPECT_EQ(deletion.value("project_id", ""), first.value("id", ""));
  admin(server, "DELETE", projects + "/p", nullptr, 204);
  Json second = admin(server, "POST", projects, Json{{"name", "p"}}, 201);
  ASSERT_NE(second.value("id", ""), first.value("id", ""));

  // Giving the new p volumes waits for the earlier tree's removal.
  auto put = server.admin_request("PUT", volumes, Json::object());
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 409) << put->body;
  Json v2;
  ASSERT_TRUE(eventually([&] {
    auto r = server.admin_request("PUT", volumes, Json::object());
    if (!r || r->status != 200) return false;
    v2 = Json::parse(r->body, nullptr, false);
    return true;
  })) << agent->stderr_text();
  // The agent makes the new tree (the earlier one is gone by now, so its uid may be reused).
  const uid_t new_uid = v2.value("uid", 0u);
  ASSERT_TRUE(eventually([&] {
    struct stat st {};
    return ::stat((root / "acme/p/datasets").c_str(), &st) == 0 && st.st_uid == new_uid;
  })) << agent->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(root / "acme/p/datasets/old.bin"))
      << "the new project was handed the earlier project's tree";
  const auto data = root / "acme/p/datasets/new.bin";
  std::ofstream(data) << "the new project's data";

  // The earlier deletion is done, and the agent keeps running rounds: the file stays.
  ASSERT_TRUE(eventually([&] {
    Json d = admin(server, "GET", "/v1/storage/deletions?state=done");
    return d.is_object() && d["items"].size() == 1;
  })) << agent->stderr_text();
  std::set<std::string> heartbeats;
  ASSERT_TRUE(eventually([&] {
    heartbeats.insert(admin(server, "GET", "/v1/nodes/store-node").value("last_heartbeat", ""));
    return heartbeats.size() >= 3;  // two more rounds after the file was written
  })) << agent->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(data)) << "the new project's file was deleted\n"
                                             << agent->stderr_text();
  Json plan = admin(server, "GET", "/v1/tenants/" + tenant + "/volumes");
  ASSERT_EQ(plan["projects"].size(), 1u) << plan.dump();
  EXPECT_EQ(plan["projects"][0]["state"], "active");
  EXPECT_EQ(plan["projects"][0]["project_id"], second["id"]);
  // The tree records whose it is, where the tenant cannot change it.
  EXPECT_EQ(recorded_identity(root / "acme/p"), (Json{{"tenant_id", tenant},
                                                      {"project_id", second["id"]},
                                                      {"generation", v2["generation"]}}));
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait_for(10s), 0);
}

// Runs a command to completion; true when it exits 0.
bool sh(const std::vector<std::string>& argv, std::string* out = nullptr) {
  std::string program = find_program(argv[0]);  // run() takes a path, not a name
  if (program.empty()) return false;
  auto r = run(program, {argv.begin() + 1, argv.end()}, {}, std::nullopt, 20s);
  if (out) *out = r.out + r.err;
  return r.exit_code == 0;
}

// A network namespace removed when the test ends, also when it fails.
struct Netns {
  std::string name;
  bool made = false;
  explicit Netns(std::string n) : name(std::move(n)) { made = sh({"ip", "netns", "add", name}); }
  ~Netns() {
    if (made) sh({"ip", "netns", "delete", name});
  }
};

TEST(Enforce, AgentAppliesTheTenantRulesetInsideANamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces and nft)";
  if (find_program("ip").empty() || find_program("nft").empty())
    GTEST_SKIP() << "needs ip (iproute2) and nft (nftables)";
  Netns ns(fmt::format("gpe{}-node", ::getpid()));
  if (!ns.made) GTEST_SKIP() << "cannot create network namespaces here";
  // The namespace has only its own loopback: nothing the ruleset matches can leave it.

  TempDir dir;
  Server server(dir.path() / "data");
  ASSERT_TRUE(server.start());
  std::map<std::string, std::string> cidr;
  for (const std::string name : {"acme", "umbrella"}) {
    Json t = admin(server, "POST", "/v1/tenants", Json{{"name", name}}, 201);
    Json net = admin(server, "GET", "/v1/tenants/" + t.value("id", "") + "/network");
    cidr[name] = net["segment"]["cidr"];
  }
  Json acme = admin(server, "GET", "/v1/tenants/acme");
  admin(server, "PUT", "/v1/tenants/acme/network/policy",
        Json{{"egress",
              {{{"destination", "203.0.113.0/24"}, {"protocol", "tcp"}, {"ports", {443}}}}}});
  // The workloads a runtime attached: one per tenant, at the first host address of its CIDR.
  auto first_host = [](const std::string& c) {
    auto base = c.substr(0, c.find('/'));
    return base.substr(0, base.rfind('.')) + ".2";
  };
  Json workloads = {
      {"acme-train",
       {{"tenant", "acme"}, {"interface", "veth-acme0"}, {"address", first_host(cidr["acme"])}}},
      {"umb-infer",
       {{"tenant", "umbrella"},
        {"interface", "veth-umb0"},
        {"address", first_host(cidr["umbrella"])}}}};
  const std::string wl_path = dir.str("workloads.json");
  std::ofstream(wl_path) << workloads.dump();

  auto agent = start_agent(
      server, dir, "net-node",
      {"--enforce-network", "--workloads", wl_path, "--nft-prefix", "ip netns exec " + ns.name});
  ASSERT_TRUE(agent);
  std::string listed;
  auto table_has = [&](const std::string& needle) {
    sh({"ip", "netns", "exec", ns.name, "nft", "list", "table", "inet", "gpuplane"}, &listed);
    return listed.find(needle) != std::string::npos;
  };
  ASSERT_TRUE(eventually([&] { return table_has(cidr["umbrella"]); })) << agent->stderr_text();
  EXPECT_NE(listed.find(cidr["acme"]), std::string::npos) << listed;
  EXPECT_NE(listed.find("veth-acme0"), std::string::npos) << listed;
  EXPECT_NE(listed.find("203.0.113.0/24"), std::string::npos) << listed;
  // Not applied to the machine's own table set.
  std::string host;
  EXPECT_FALSE(sh({"nft", "list", "table", "inet", "gpuplane"}, &host) &&
               host.find(cidr["acme"]) != std::string::npos)
      << "the agent wrote outside the namespace";

  // Offboarding acme: its rules, addresses and workload disappear from the node's ruleset.
  admin(server, "DELETE", "/v1/tenants/" + acme.value("id", ""));
  ASSERT_TRUE(eventually([&] { return !table_has(cidr["acme"]); })) << agent->stderr_text();
  EXPECT_EQ(listed.find("veth-acme0"), std::string::npos) << listed;
  EXPECT_NE(listed.find(cidr["umbrella"]), std::string::npos) << listed;
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait_for(10s), 0);
}

}  // namespace
}  // namespace gp::proc
