// A job member's start on the node (issue 25): the time `podman run --detach` takes to return
// with the member running, for the command line gpuplane builds (podman_run_argv: user
// namespace onto the tenant's ids, no capability, limits, labels, a memory cgroup of its own)
// against plain `podman run --detach` of the same image in the same run, alternately, with a
// warm image. The API's part of submit-to-running comes once jobs are submitted through it.
// Root, podman, runc and busybox-static needed.
//
//   build/bench/bench_job_start [starts-per-case]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_env.h"
#include "common/subprocess.h"
#include "jobs/jobs.h"
#include "jobs/runtime.h"

using namespace gp;
using Steady = std::chrono::steady_clock;

namespace {

constexpr const char* kImage = "localhost/gpuplane-bench/busybox:1";

// Milliseconds `argv` took to return, or a negative value when it failed.
double timed(const std::vector<std::string>& argv) {
  auto t0 = Steady::now();
  auto r = run_process(argv, "", std::chrono::minutes(1));
  double ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  if (!r || r->exit_code != 0) {
    std::fprintf(stderr, "%s failed: %s\n", argv[0].c_str(),
                 r ? r->err.c_str() : r.error().message.c_str());
    return -1;
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_job_start: needs root (user namespaces, cgroups)\n");
    return 1;
  }
  jobs::Podman podman;
  if (auto made = podman.import_busybox(kImage); !made) {
    std::fprintf(stderr, "bench_job_start: %s\n", made.error().message.c_str());
    return 1;
  }
  const bool tty = ::isatty(STDERR_FILENO);
  std::vector<double> plain, member;
  for (int i = 0; i < n; ++i) {
    if (tty) std::fprintf(stderr, "\rstart %d/%d", i + 1, n);
    std::string name = "gp-bench-plain-" + std::to_string(i);
    double p = timed({"podman", "--runtime", "runc", "run", "--detach", "--name", name, "--network",
                      "none", "--ulimit", "nproc=4096:4096", "--ulimit", "nofile=16384:16384",
                      kImage, "/bin/sleep", "60"});
    (void)podman.remove(name);
    jobs::MemberLaunch m;
    m.job_id = "bench" + std::to_string(::getpid());
    m.container = jobs::container_name(m.job_id, 0, i + 1);
    m.tenant_id = "ten_bench";
    m.allocation_id = "alc_bench";
    m.image = kImage;
    m.command = {"/bin/sleep"};
    m.args = {"60"};
    m.ids_first = 800'000'000;
    m.ids_count = 65'536;
    m.run_as = m.ids_first + 1;
    m.limits = {.cpu_millis = 1000, .memory_bytes = 256 << 20, .pids = 4096, .open_files = 16384};
    auto group = jobs::MemberCgroup::create(m.container, m.limits.memory_bytes);
    if (!group) {
      std::fprintf(stderr, "bench_job_start: %s\n", group.error().message.c_str());
      return 1;
    }
    m.cgroup_parent = group->parent();
    auto args = jobs::podman_run_argv(m);
    double g = args ? timed(*args) : -1;
    (void)podman.remove(m.container);
    (void)group->remove();
    if (p < 0 || g < 0) return 1;
    plain.push_back(p);
    member.push_back(g);
  }
  if (tty) std::fprintf(stderr, "\r%*s\r", 20, "");
  const double p50p = bench::percentile(plain, 0.5), p50g = bench::percentile(member, 0.5);
  const double p99p = bench::percentile(plain, 0.99), p99g = bench::percentile(member, 0.99);
  std::printf("%-34s %10s %10s\n", "podman run --detach (ms)", "p50", "p99");
  std::printf("%-34s %10.1f %10.1f\n", "plain", p50p, p99p);
  std::printf("%-34s %10.1f %10.1f\n", "gpuplane member (podman_run_argv)", p50g, p99g);
  std::printf("%-34s %10.2f %10.2f\n", "ratio", p50g / p50p, p99g / p99p);
  std::printf(
      "{\"starts\": %d, \"plain_p50_ms\": %.1f, \"plain_p99_ms\": %.1f, \"member_p50_ms\": %.1f, "
      "\"member_p99_ms\": %.1f, \"overhead_p50_ms\": %.1f}\n",
      n, p50p, p99p, p50g, p99g, p50g - p50p);
  return 0;
}
