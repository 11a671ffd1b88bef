// Jobs end to end (docs/jobs.md): a real server, two simulated nodes whose real agents run the
// members with the real podman (runc), two tenants. A job's exit code, output and devices; its
// checkpoints owned by the tenant's ids on the host; out of memory; an image from a registry the
// tenant's policy refuses; cancel as SIGTERM then SIGKILL; no capabilities; an agent killed with
// SIGKILL mid-job that loses and duplicates nothing. Root only (user namespaces, CDI devices);
// the image is made here from Debian's busybox-static, nothing is pulled.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "jobs/runtime.h"
#include "process/process_util.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kImage = "localhost/gpuplane-test/busybox:1";

std::string cannot_run() {
  if (::geteuid() != 0) return "needs root (user namespaces onto a tenant's ids, CDI devices)";
  if (!fs::exists("/bin/busybox")) return "/bin/busybox is missing: install busybox-static";
  auto probe =
      run(find_program("podman"),
          {"--runtime", "runc", "run", "--rm", "--network", "none", "--ulimit", "nproc=64:64",
           "--ulimit", "nofile=1024:1024", kImage, "/bin/sh", "-c", "exit 0"},
          {}, std::nullopt, std::chrono::minutes(2));
  if (probe.exit_code != 0) return "podman cannot run a container here: " + probe.err;
  return {};
}

class JobsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() == 0 && fs::exists("/bin/busybox")) {
      auto imported = jobs::Podman().import_busybox(kImage, {"NVIDIA_VISIBLE_DEVICES=all"});
      if (!imported) why_not_ = imported.error().message;
    }
    if (why_not_.empty()) why_not_ = cannot_run();
  }

  void SetUp() override {
    if (!why_not_.empty()) GTEST_SKIP() << why_not_;
    server_.emplace(dir_.path() / "data");
    ASSERT_TRUE(server_->start());
    root_ = dir_.path() / "storage";
    fs::create_directory(root_);
    admin("POST", "/v1/offerings",
          {{"name", "gpu1"}, {"tier", "dedicated-gpu"}, {"gpus", 1}, {"models", {"H200"}}}, 201);
    for (const char* name : {"node-a", "node-b"}) start_agent(name);
    ASSERT_TRUE(eventually([&] {
      return admin("GET", "/v1/fleet/summary").value("gpus_total", 0) == 4;
    })) << agents_log();
    alpha_ = tenant("alpha");
    bravo_ = tenant("bravo");
  }

  void TearDown() override {
    for (auto& [name, a] : agents_) a.signal(SIGTERM);
    for (auto& [name, a] : agents_) a.wait_for(std::chrono::seconds(10));
    // What the agents left: every container of this test's nodes.
    run("/bin/sh", {"-c", "podman ps -aq --filter label=dev.gpuplane.job | xargs -r podman rm -f"});
  }

  Json admin(std::string_view method, const std::string& target, const Json& body = nullptr,
             int want = 200) {
    auto r = server_->admin_request(method, target, body);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    if (!r) return Json();
    EXPECT_EQ(r->status, want) << method << " " << target << ": " << r->body;
    return Json::parse(r->body.empty() ? "null" : r->body, nullptr, false);
  }

  void start_agent(const std::string& name) {
    Json inv = {
        {"node", {{"name", name}, {"cpu_millis", 4000}, {"memory_bytes", int64_t{128} << 20}}},
        {"gpus", Json::array()}};
    for (int i = 0; i < 2; ++i)
      inv["gpus"].push_back({{"uuid", "GPU-" + name + "-" + std::to_string(i)},
                             {"index", i},
                             {"model", "NVIDIA H200"},
                             {"memory_bytes", int64_t{141} << 30}});
    const std::string inventory = dir_.str(name + ".json");
    std::ofstream(inventory) << inv.dump();
    std::vector<std::string> args = {"agent",
                                     "--server",
                                     server_->endpoint(),
                                     "--state-dir",
                                     dir_.str(name + "-state"),
                                     "--simulate",
                                     inventory,
                                     "--heartbeat-seconds",
                                     "1",
                                     "--jobs",
                                     "--storage-root",
                                     root_.string()};
    if (!fs::exists(dir_.path() / (name + "-state/node-credential"))) {
      args.push_back("--join-token");
      args.push_back(admin("POST", "/v1/join-tokens", {{"ttl_seconds", 600}}, 201)["token"]);
    }
    auto child = Child::spawn(gpuplane_binary(), args,
                              {.stdout_path = dir_.path() / (name + ".out"),
                               .stderr_path = dir_.path() / (name + ".err")});
    ASSERT_TRUE(child);
    agents_.erase(name);
    agents_.emplace(name, std::move(*child));
  }

  std::string agents_log() {
    std::string out;
    for (auto& [name, a] : agents_) out += "--- " + name + "\n" + a.stderr_text();
    return out;
  }

  struct Tenant {
    std::string id, project, jobs;  // jobs: the project's jobs path
    uint32_t project_uid = 0;
  };
  Tenant tenant(const std::string& name) {
    Tenant t;
    t.id = admin("POST", "/v1/tenants", {{"name", name}}, 201)["id"];
    t.project = admin("POST", "/v1/tenants/" + t.id + "/projects", {{"name", "train"}}, 201)["id"];
    admin("PUT", "/v1/tenants/" + t.id + "/quota", {{"models", {{"H200", {{"nominal", 2}}}}}});
    Json v = admin("PUT", "/v1/tenants/" + t.id + "/projects/train/volumes", Json::object());
    t.project_uid = v.value("uid", 0u);
    t.jobs = "/v1/tenants/" + t.id + "/projects/" + t.project + "/jobs";
    return t;
  }

  Json submit(const Tenant& t, const std::string& name, const std::string& script,
              Json extra = Json::object(), int want = 201) {
    Json body = {{"name", name},
                 {"image", kImage},
                 {"offering", "gpu1"},
                 {"command", {"/bin/sh", "-c", script}}};
    body.update(extra);
    return admin("POST", t.jobs, body, want);
  }

  Json job(const Tenant& t, const Json& j) {
    return admin("GET", t.jobs + "/" + j.value("id", ""));
  }

  // Waits for the job to finish; returns it.
  Json finished(const Tenant& t, const Json& j,
                std::chrono::seconds within = std::chrono::seconds(60)) {
    Json last;
    EXPECT_TRUE(eventually(
        [&] {
          last = job(t, j);
          const std::string s = last.value("state", "");
          return s != "queued" && s != "starting" && s != "running";
        },
        within))
        << last.dump(2) << "\n"
        << agents_log();
    return last;
  }

  std::string logs(const Tenant& t, const Json& j) {
    Json l = admin("GET", t.jobs + "/" + j.value("id", "") + "/logs");
    std::string out;
    for (const auto& m : l.value("members", Json::array())) out += m.value("text", "");
    return out;
  }

  static inline std::string why_not_;
  TempDir dir_;
  std::optional<Server> server_;
  fs::path root_;
  std::map<std::string, Child> agents_;
  Tenant alpha_, bravo_;
};

TEST_F(JobsTest, ExitCodesOutputDevicesAndTheTenantsIdsOnTheHost) {
  Json ok = submit(alpha_, "hello",
                   "echo hello; ls /dev/gpuplane-sim; echo NV=$NVIDIA_VISIBLE_DEVICES; "
                   "grep CapEff /proc/self/status; echo ckpt > /data/checkpoints/step-1; id -u",
                   {{"volumes", {{{"kind", "checkpoints"}}}}});
  Json three = submit(bravo_, "three", "echo about to fail; exit 3");
  Json done = finished(alpha_, ok);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_EQ(done["exit_code"], 0);
  const std::string out = logs(alpha_, ok);
  EXPECT_NE(out.find("hello\n"), std::string::npos) << out;
  // Exactly the GPU of its allocation, and the platform's device list, not the image's "all".
  ASSERT_EQ(done["members"].size(), 1u);
  Json alloc = admin("GET", "/v1/tenants/" + alpha_.id + "/projects/" + alpha_.project +
                                "/allocations/" + done.value("allocation_id", ""));
  const std::string gpu = alloc["placement"]["gpus"][0].value("gpu", "");
  EXPECT_NE(out.find("\n" + gpu + "\nNV=" + gpu + "\n"), std::string::npos) << out;
  EXPECT_EQ(alloc["state"], "released") << alloc.dump(2);
  // No capabilities at all.
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  // What it wrote is the project's on the host, under the tenant's ids; root inside is not.
  struct stat st {};
  const fs::path ckpt = root_ / "alpha/train/checkpoints/step-1";
  ASSERT_EQ(::stat(ckpt.c_str(), &st), 0) << out;
  EXPECT_EQ(st.st_uid, alpha_.project_uid);
  EXPECT_NE(st.st_uid, 0u);
  // The permission audit of the tenant's tree finds nothing the job left wrong.
  Json ids = admin("GET", "/v1/tenants/" + alpha_.id + "/volumes")["ids"];
  auto audit = run_gpuplane(
      {"storage", "audit", (root_ / "alpha").string(), "--ids",
       std::to_string(ids.value("first", 0u)) + "-" + std::to_string(ids.value("last", 0u))});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;

  Json failed = finished(bravo_, three);
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["failure"], "exit_code");
  EXPECT_EQ(failed["exit_code"], 3);
  EXPECT_NE(logs(bravo_, three).find("about to fail"), std::string::npos);
  std::vector<std::string> states;
  for (const auto& e : failed["events"]) states.push_back(e.value("to", ""));
  EXPECT_EQ(states.front(), "queued");
  EXPECT_EQ(states.back(), "failed");
  EXPECT_NE(std::ranges::find(states, "starting"), states.end());

  // Each tenant sees its own jobs only.
  auto other = server_->admin_request("GET", bravo_.jobs + "/" + ok.value("id", ""));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
}

TEST_F(JobsTest, PastItsMemoryLimitAJobFailsOom) {
  // Its share of a node with 128 MiB and two GPUs is 64 MiB; tail keeps a "line" of /dev/zero.
  Json hog = submit(alpha_, "hog", "tail /dev/zero");
  Json done = finished(alpha_, hog);
  EXPECT_EQ(done["state"], "failed") << done.dump(2);
  EXPECT_EQ(done["failure"], "oom") << done.dump(2);
}

TEST_F(JobsTest, AnImageFromARegistryThePolicyDoesNotAllowIsRefused) {
  admin("PUT", "/v1/tenants/" + alpha_.id + "/workload-policy",
        {{"allowed_registries", {"registry.example.com"}}});
  Json refused = submit(alpha_, "elsewhere", "true", Json::object(), 400);
  EXPECT_NE(refused.value("detail", "").find("registry"), std::string::npos) << refused.dump();
  Json list = admin("GET", alpha_.jobs);
  EXPECT_TRUE(list["items"].empty());
}

TEST_F(JobsTest, CancelSendsSigtermThenSigkillAfterTheGracePeriod) {
  Json j = submit(alpha_, "stubborn",
                  "trap 'echo got-term' TERM; echo ready; while true; do sleep 1; done");
  ASSERT_TRUE(
      eventually([&] { return job(alpha_, j)["state"] == "running"; }, std::chrono::seconds(60)))
      << agents_log();
  ASSERT_TRUE(eventually([&] { return logs(alpha_, j).find("ready") != std::string::npos; }));
  const auto asked = std::chrono::steady_clock::now();
  admin("POST", alpha_.jobs + "/" + j.value("id", "") + "/cancel", Json::object());
  Json done = finished(alpha_, j);
  const auto took = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(done["state"], "cancelled") << done.dump(2);
  // It ignored SIGTERM (it printed and went on): SIGKILL ended it once the grace had passed.
  EXPECT_NE(logs(alpha_, j).find("got-term"), std::string::npos) << logs(alpha_, j);
  EXPECT_GE(took, std::chrono::seconds(9));
  EXPECT_EQ(done["members"][0]["exit_code"], 137) << done.dump(2);
}

TEST_F(JobsTest, AnAgentKilledMidJobLosesAndDuplicatesNothing) {
  Json j = submit(alpha_, "steady", "echo start; sleep 6; echo end");
  ASSERT_TRUE(
      eventually([&] { return job(alpha_, j)["state"] == "running"; }, std::chrono::seconds(60)))
      << agents_log();
  const std::string node = job(alpha_, j)["members"][0].value("node_id", "");
  Json n = admin("GET", "/v1/nodes/" + node);
  const std::string name = n.value("name", "");
  agents_.at(name).signal(SIGKILL);
  agents_.at(name).wait_for(std::chrono::seconds(5));
  start_agent(name);
  Json done = finished(alpha_, j);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2) << agents_log();
  EXPECT_EQ(done["attempts"], 1);
  const std::string out = logs(alpha_, j);
  EXPECT_EQ(out, "start\nend\n");
}

}  // namespace
}  // namespace gp::proc
