// Members run by the real podman (runc) from podman_run_argv: exit codes and logs, no
// privileges, the tenant's ids, exactly the given devices (a CDI spec of stand-in device nodes),
// memory limits ending in oom, SIGTERM then SIGKILL, and finding members again by their labels.
// Root only; the test image is made here from Debian's busybox-static (nothing is pulled).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/subprocess.h"
#include "jobs/jobs.h"
#include "jobs/runtime.h"

namespace gp::jobs {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kImage = "localhost/gpuplane-test/busybox:1";
constexpr uint32_t kIdsFirst = 3'000'000'000u / 4;  // a block no real tenant of the host uses
constexpr uint32_t kIdsCount = 65'536;

Result<ProcessResult> sh(const std::vector<std::string>& argv) {
  return run_process(argv, "", std::chrono::minutes(2));
}

// Why podman members cannot run here, or empty.
std::string cannot_run() {
  if (::geteuid() != 0) return "needs root (user namespaces onto a tenant's ids, CDI devices)";
  if (!fs::exists("/bin/busybox")) return "/bin/busybox is missing: install busybox-static";
  auto v = sh({"podman", "--version"});
  if (!v || v->exit_code != 0) return "podman is missing: install podman and runc";
  auto r = sh({"runc", "--version"});
  if (!r || r->exit_code != 0) return "runc is missing";
  return {};
}

class PodmanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    why_not_ = cannot_run();
    if (!why_not_.empty()) return;
    // The test image: busybox and its applets, nothing else.
    // It carries NVIDIA_VISIBLE_DEVICES=all, as CUDA images do.
    auto imported = Podman().import_busybox(kImage, {"NVIDIA_VISIBLE_DEVICES=all"});
    ASSERT_TRUE(imported) << imported.error().message;
    // Whether this machine can run a container at all (a kernel without user namespaces or
    // overlayfs, a sandbox refusing cgroups): a fixed command line, none of gpuplane's, so a
    // skip here never hides a fault of podman_run_argv.
    auto probe =
        sh({"podman", "--runtime", "runc", "run", "--rm", "--network", "none", "--ulimit",
            "nproc=64:64", "--ulimit", "nofile=1024:1024", kImage, "/bin/sh", "-c", "exit 0"});
    if (!probe || probe->exit_code != 0)
      why_not_ = "podman cannot run a container on this machine: " +
                 (probe ? probe->err : probe.error().message);
  }

  void SetUp() override {
    if (!why_not_.empty()) GTEST_SKIP() << why_not_;
    job_ = fmt::format("jobt{}x{}", ::getpid(), counter_++);
  }

  void TearDown() override {
    auto mine = podman_.list_members();
    if (mine)
      for (const auto& c : *mine)
        if (c.job_id == job_) (void)podman_.remove(c.name);
    for (const auto& p : cleanup_) fs::remove_all(p);
  }

  MemberLaunch member(std::string shell, int rank = 0) {
    MemberLaunch m;
    m.job_id = job_;
    m.rank = rank;
    m.container = container_name(job_, rank, 1);
    m.tenant_id = "ten_test";
    m.project_id = "prj_test";
    m.allocation_id = "alc_" + job_;
    m.image = kImage;
    m.command = {"/bin/sh", "-c"};
    m.args = {std::move(shell)};
    m.ids_first = kIdsFirst;
    m.ids_count = kIdsCount;
    m.run_as = kIdsFirst + 7;
    m.limits = {.cpu_millis = 1000, .memory_bytes = 256 << 20, .pids = 256, .open_files = 1024};
    m.stop_grace_seconds = 10;
    return m;
  }

  void start(const MemberLaunch& m) {
    auto argv = podman_run_argv(m);
    ASSERT_TRUE(argv) << argv.error().message;
    auto r = podman_.run(*argv);
    ASSERT_TRUE(r) << r.error().message;
  }

  // Waits until the container is no longer running.
  ContainerStatus wait_exited(const std::string& name, std::chrono::seconds limit = 60s) {
    auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto s = podman_.inspect({name});
      EXPECT_TRUE(s) << (s ? "" : s.error().message);
      if (!s || s->empty()) return {};
      if (!s->front().running && s->front().state != "created") return s->front();
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << name << " still " << s->front().state;
        return s->front();
      }
      std::this_thread::sleep_for(100ms);
    }
  }

  void wait_for_output(const std::string& name, std::string_view text) {
    auto until = std::chrono::steady_clock::now() + 30s;
    while (logs(name).find(text) == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << name << " never printed " << text;
      std::this_thread::sleep_for(100ms);
    }
  }

  std::string logs(const std::string& name) {
    auto l = podman_.logs(name, 0);
    EXPECT_TRUE(l) << (l ? "" : l.error().message);
    return l ? *l : std::string();
  }

  static inline std::string why_not_;
  static inline int counter_ = 0;
  Podman podman_;
  std::string job_;
  std::vector<fs::path> cleanup_;
};

TEST_F(PodmanTest, ExitCodesAndLogsAreThoseOfTheMember) {
  auto ok = member("echo to-stdout; echo to-stderr >&2; exit 0", 0);
  auto three = member("echo failing; exit 3", 1);
  start(ok);
  start(three);
  auto s0 = wait_exited(ok.container);
  auto s3 = wait_exited(three.container);
  EXPECT_EQ(s0.exit_code, 0);
  EXPECT_EQ(s3.exit_code, 3);
  EXPECT_FALSE(s3.oom_killed);
  EXPECT_EQ(s3.job_id, job_);
  EXPECT_EQ(s3.rank, 1);
  std::string l = logs(ok.container);
  EXPECT_NE(l.find("to-stdout"), std::string::npos) << l;
  EXPECT_NE(l.find("to-stderr"), std::string::npos) << l;
  EXPECT_NE(logs(three.container).find("failing"), std::string::npos);
  // The state machine reads them as the job's outcome.
  JobSpec never;
  EXPECT_EQ(
      next_state(State::kRunning, {Event::kExited, s3.exit_code, s3.oom_killed}, never, 1)->failure,
      Failure::kExitCode);
}

TEST_F(PodmanTest, AMemberHasNoPrivilegeAndIsNobodyOnTheHost) {
  auto m = member(
      "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status; "
      "cat /proc/self/uid_map /proc/self/gid_map; id -u; id -g");
  start(m);
  auto s = wait_exited(m.container);
  EXPECT_EQ(s.exit_code, 0);
  std::string l = logs(m.container);
  for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
    EXPECT_NE(l.find(fmt::format("{}:\t0000000000000000", cap)), std::string::npos)
        << cap << " in\n"
        << l;
  EXPECT_NE(l.find("NoNewPrivs:\t1"), std::string::npos) << l;
  // Root inside is the tenant's first id outside, and the process runs as the project's id.
  std::string words;  // the maps, their columns' padding folded
  for (char c : l) {
    bool space = c == ' ' || c == '\t';
    if (!(space && (words.empty() || words.back() == ' ' || words.back() == '\n')))
      words += space ? ' ' : c;
  }
  EXPECT_NE(words.find(fmt::format("\n0 {} {}\n0 {} {}\n7\n7", kIdsFirst, kIdsCount, kIdsFirst,
                                   kIdsCount)),
            std::string::npos)
      << words;
  // What podman itself records: no capability added, no privileged mode, no host mount, no host
  // namespace.
  auto raw = sh({"podman", "inspect", "--type", "container", m.container});
  ASSERT_TRUE(raw && raw->exit_code == 0);
  Json c = Json::parse(raw->out)[0];
  EXPECT_FALSE(c["HostConfig"]["Privileged"].get<bool>());
  EXPECT_TRUE(c["HostConfig"]["CapAdd"].empty()) << c["HostConfig"]["CapAdd"].dump();
  EXPECT_TRUE(c["Mounts"].empty()) << c["Mounts"].dump();
  EXPECT_EQ(c["HostConfig"]["NetworkMode"], "none");
  for (const char* ns : {"PidMode", "IpcMode", "UTSMode", "UsernsMode", "CgroupnsMode"})
    EXPECT_NE(c["HostConfig"][ns], "host") << ns;
  EXPECT_EQ(c["HostConfig"]["PidMode"], "private");
}

TEST_F(PodmanTest, WhatAMemberWritesToAVolumeIsOwnedByTheProjectsId) {
  auto vol = fs::temp_directory_path() / fmt::format("gp-podman-vol-{}", job_);
  cleanup_.push_back(vol);
  fs::create_directories(vol);
  ASSERT_EQ(::chown(vol.c_str(), kIdsFirst + 7, kIdsFirst), 0);
  ASSERT_EQ(::chmod(vol.c_str(), 02770), 0);
  auto ro = fs::temp_directory_path() / fmt::format("gp-podman-ro-{}", job_);
  cleanup_.push_back(ro);
  fs::create_directories(ro);
  auto m = member(
      "echo step-1 > /data/checkpoints/ckpt && echo wrote; "
      "touch /data/datasets/x 2>/dev/null && echo ro-written || echo ro-refused");
  m.mounts = {BindMount{vol.string(), "/data/checkpoints", false},
              BindMount{ro.string(), "/data/datasets", true}};
  start(m);
  auto s = wait_exited(m.container);
  EXPECT_EQ(s.exit_code, 0);
  std::string l = logs(m.container);
  EXPECT_NE(l.find("wrote"), std::string::npos) << l;
  EXPECT_NE(l.find("ro-refused"), std::string::npos) << l;
  struct stat st {};
  ASSERT_EQ(::stat((vol / "ckpt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kIdsFirst + 7);
  EXPECT_FALSE(fs::exists(ro / "x"));
}

TEST_F(PodmanTest, AMemberSeesExactlyTheDevicesItWasGiven) {
  // Three stand-in GPUs in a CDI spec of their own; the member gets two of them.
  std::string dev_dir = fmt::format("/dev/gpuplane-test-{}", job_);
  cleanup_.push_back(dev_dir);
  fs::create_directories(dev_dir);
  std::vector<std::string> uuids, paths;
  for (int i = 0; i < 3; ++i) {
    uuids.push_back(fmt::format("GPU-{}-{}", job_, i));
    paths.push_back(fmt::format("{}/gpu{}", dev_dir, i));
    ASSERT_EQ(::mknod(paths.back().c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << paths.back();
  }
  auto spec = sim_cdi_spec(uuids, paths);
  ASSERT_TRUE(spec);
  // A kind of its own per test run: two runs never share a spec file.
  (*spec)["kind"] = fmt::format("test{}.gpuplane.dev/gpu", ::getpid());
  fs::create_directories("/var/run/cdi");
  fs::path spec_file = fmt::format("/var/run/cdi/gpuplane-test-{}.json", job_);
  cleanup_.push_back(spec_file);
  std::ofstream(spec_file) << spec->dump();

  auto m = member("ls " + dev_dir +
                  "; echo NV=$NVIDIA_VISIBLE_DEVICES; "
                  "echo CUDA=$CUDA_VISIBLE_DEVICES");
  std::string kind = (*spec)["kind"];
  m.devices = {{kind + "=" + uuids[0], uuids[0]}, {kind + "=" + uuids[2], uuids[2]}};
  start(m);
  auto s = wait_exited(m.container);
  EXPECT_EQ(s.exit_code, 0);
  std::string l = logs(m.container);
  EXPECT_NE(l.find("gpu0\ngpu2\n"), std::string::npos) << l;
  EXPECT_EQ(l.find("gpu1"), std::string::npos) << l;
  // The image says NVIDIA_VISIBLE_DEVICES=all; the platform's value is the one it sees.
  EXPECT_NE(l.find(fmt::format("NV={},{}", uuids[0], uuids[2])), std::string::npos) << l;
  EXPECT_NE(l.find("CUDA=0,1"), std::string::npos) << l;
}

TEST_F(PodmanTest, AMemberPastItsMemoryLimitEndsAsOomAndOneWithinItDoesNot) {
  // tail keeps a whole "line" of /dev/zero in memory: it grows until the limit stops it.
  auto hog = member("tail /dev/zero", 0);
  auto modest =
      member("head -c 1000000 /dev/zero | tail -c 10 >/dev/null; echo ready; sleep 60", 1);
  std::vector<MemberCgroup> groups;
  for (auto* m : {&hog, &modest}) {
    m->limits.memory_bytes = 32 << 20;
    auto g = MemberCgroup::create(m->container, m->limits.memory_bytes);
    ASSERT_TRUE(g) << g.error().message;
    m->cgroup_parent = g->parent();
    groups.push_back(*g);
    start(*m);
  }
  wait_for_output(modest.container, "ready");
  auto killed = sh({"podman", "kill", "--signal", "KILL", modest.container});
  ASSERT_TRUE(killed && killed->exit_code == 0);
  auto h = wait_exited(hog.container);
  auto k = wait_exited(modest.container);
  auto hog_full = groups[0].reached_limit();
  auto modest_full = groups[1].reached_limit();
  ASSERT_TRUE(hog_full && modest_full);
  EXPECT_TRUE(ended_by_oom(h, *hog_full)) << "exit " << h.exit_code;
  // Killed by SIGKILL too, but never near its limit: not out of memory.
  EXPECT_EQ(k.exit_code, 137);
  EXPECT_FALSE(ended_by_oom(k, *modest_full));
  JobSpec never;
  EXPECT_EQ(next_state(State::kRunning, {Event::kExited, h.exit_code, ended_by_oom(h, *hog_full)},
                       never, 1)
                ->failure,
            Failure::kOom);
  for (const auto* m : {&hog, &modest}) {
    auto removed = podman_.remove(m->container);
    ASSERT_TRUE(removed) << removed.error().message;
  }
  for (const auto& g : groups) {
    auto removed = g.remove();
    EXPECT_TRUE(removed) << removed.error().message;
    EXPECT_FALSE(fs::exists("/sys/fs/cgroup/memory" + g.parent()));
  }
}

TEST_F(PodmanTest, StopSendsTermThenKillsAfterTheGracePeriod) {
  auto polite =
      member("trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 1; done", 0);
  auto stubborn = member("trap '' TERM; echo ready; while :; do sleep 1; done", 1);
  start(polite);
  start(stubborn);
  for (const auto* m : {&polite, &stubborn}) wait_for_output(m->container, "ready");
  ASSERT_TRUE(podman_.stop(polite.container, 10s));
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(podman_.stop(stubborn.container, 2s));
  auto took = std::chrono::steady_clock::now() - t0;
  auto p = wait_exited(polite.container);
  auto k = wait_exited(stubborn.container);
  EXPECT_EQ(p.exit_code, 7);
  EXPECT_NE(logs(polite.container).find("got-term"), std::string::npos);
  EXPECT_EQ(k.exit_code, 137);  // SIGKILL
  EXPECT_GE(took, 2s);
}

TEST_F(PodmanTest, MembersAreFoundAgainByTheirLabels) {
  auto a = member("sleep 30", 0);
  auto b = member("exit 0", 1);
  start(a);
  start(b);
  wait_exited(b.container);
  auto all = podman_.list_members();
  ASSERT_TRUE(all) << all.error().message;
  std::vector<std::pair<int, bool>> mine;
  for (const auto& c : *all)
    if (c.job_id == job_) mine.emplace_back(c.rank, c.running);
  std::sort(mine.begin(), mine.end());
  EXPECT_EQ(mine, (std::vector<std::pair<int, bool>>{{0, true}, {1, false}}));
}

}  // namespace
}  // namespace gp::jobs
