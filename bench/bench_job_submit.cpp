// Submit-to-running of a job (issue 25): from `POST .../jobs` to the job reading `running`, with
// the API server (SQLite, every write flushed) and a simulated node's agent (--jobs, heartbeat
// every second) in this process and the real podman (runc) on the node, against a plain
// `podman run --detach` of the same warm image in the same run, alternately. Each job runs
// `sleep 1` and ends by itself before the next is submitted.
// Root, podman, runc and busybox-static needed.
//
//   build/bench/bench_job_submit [jobs]
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "alloc/alloc.h"
#include "api/api.h"
#include "bench_env.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "fleet/fleet.h"
#include "jobs/runtime.h"
#include "tenancy/tenancy.h"
#include "transport/http_client.h"

using namespace gp;
using Steady = std::chrono::steady_clock;

namespace {

constexpr const char* kImage = "localhost/gpuplane-bench/busybox:1";

double ms_since(Steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_job_submit: needs root (user namespaces, cgroups)\n");
    return 1;
  }
  if (auto made = jobs::Podman().import_busybox(kImage); !made) {
    std::fprintf(stderr, "bench_job_submit: %s\n", made.error().message.c_str());
    return 1;
  }
  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  const std::string& dir = env->dir();
  std::string token, join, jobs_path;
  auto setup = store.write([&](store::Tx& tx) -> Result<void> {
    Env w{clock, ids};
    token = GP_TRY(tenancy::bootstrap_platform_admin(tx, w, std::nullopt))->api_key;
    auto t = GP_TRY(tenancy::create_tenant(tx, w, {"bench", "", {}, {}}));
    auto p = GP_TRY(tenancy::create_project(tx, w, tenancy::TenantScope(t.id), {"train", ""}));
    GP_TRY(alloc::create_offering(
        tx, w,
        GP_TRY(alloc::parse_offering({{"name", "gpu1"}, {"tier", "dedicated-gpu"}, {"gpus", 1}}))));
    GP_TRY(tx.exec(
        "INSERT INTO quotas (tenant_id, project_id, model, nominal) VALUES (?, '', 'H200', ?)",
        {t.id, int64_t{8} * 7000}));
    join =
        GP_TRY(fleet::create_join_token(tx, w, std::nullopt, "bench", std::chrono::hours(1))).token;
    jobs_path = "/v1/tenants/" + t.id + "/projects/" + p.id + "/jobs";
    return ok();
  });
  if (!setup) {
    std::fprintf(stderr, "setup: %s\n", setup.error().message.c_str());
    return 1;
  }
  spdlog::set_level(spdlog::level::warn);
  api::Api api(store, log, Env{clock, ids});
  api::Server server(api, "127.0.0.1", 0, 8, std::nullopt);
  auto port = server.start();
  if (!port) return 1;
  const std::string url = "http://127.0.0.1:" + std::to_string(*port);

  Json inv = {
      {"node", {{"name", "bench-node"}, {"cpu_millis", 8000}, {"memory_bytes", int64_t{16} << 30}}},
      {"gpus", Json::array()}};
  for (int i = 0; i < 8; ++i)
    inv["gpus"].push_back({{"uuid", "GPU-bench-" + std::to_string(i)},
                           {"index", i},
                           {"model", "NVIDIA H200"},
                           {"memory_bytes", int64_t{141} << 30}});
  std::ofstream(dir + "/inventory.json") << inv.dump();
  agent::AgentOptions ao;
  ao.server = url;
  ao.join_token = join;
  ao.state_dir = dir + "/agent";
  ao.simulate_file = dir + "/inventory.json";
  ao.heartbeat_seconds = 1;
  ao.run_jobs = true;
  std::atomic<bool> stop{false};
  std::thread agent([&] { agent::run_agent(ao, system_env(), stop); });

  auto ep = transport::parse_endpoint(url);
  const std::vector<std::pair<std::string, std::string>> auth = {
      {"Authorization", "Bearer " + token}};
  auto call = [&](std::string_view method, const std::string& path, const Json& body) -> Json {
    auto r =
        transport::http_request(*ep, method, path, body.is_null() ? "" : body.dump(), auth, 10000);
    if (!r) return Json();
    return Json::parse(r->body, nullptr, false);
  };
  const bool tty = ::isatty(STDERR_FILENO);
  std::vector<double> plain, submitted;
  for (int i = 0; i < n; ++i) {
    if (tty) std::fprintf(stderr, "\rjob %d/%d", i + 1, n);
    const std::string name = "gp-bench-plain-" + std::to_string(i);
    auto t0 = Steady::now();
    auto r = run_process({"podman", "--runtime", "runc", "run", "--detach", "--name", name,
                          "--network", "none", "--ulimit", "nproc=4096:4096", "--ulimit",
                          "nofile=16384:16384", kImage, "/bin/sleep", "1"},
                         "", std::chrono::minutes(1));
    const double p = ms_since(t0);
    (void)jobs::Podman().remove(name);
    if (!r || r->exit_code != 0) {
      std::fprintf(stderr, "podman run failed\n");
      return 1;
    }
    t0 = Steady::now();
    Json j = call("POST", jobs_path,
                  {{"name", "bench-" + std::to_string(i)},
                   {"image", kImage},
                   {"offering", "gpu1"},
                   {"command", {"/bin/sleep", "1"}}});
    const std::string id = j.value("id", "");
    if (id.empty()) {
      std::fprintf(stderr, "submit failed: %s\n", j.dump().c_str());
      return 1;
    }
    double s = -1;
    std::string state;
    while (ms_since(t0) < 60000) {
      state = call("GET", jobs_path + "/" + id, nullptr).value("state", "");
      if (state == "running" || state == "succeeded") {
        s = ms_since(t0);
        break;
      }
      if (state == "failed" || state == "cancelled") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (s < 0) {
      std::fprintf(stderr, "job %s never ran (%s)\n", id.c_str(), state.c_str());
      return 1;
    }
    plain.push_back(p);
    submitted.push_back(s);
    // The next job starts on a quiet node: this one has ended and its container is gone.
    for (int k = 0; k < 600; ++k) {
      if (call("GET", jobs_path + "/" + id, nullptr).value("state", "") == "succeeded") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (tty) std::fprintf(stderr, "\r%*s\r", 20, "");
  stop = true;
  agent.join();
  server.stop();
  const double p50p = bench::percentile(plain, 0.5), p50s = bench::percentile(submitted, 0.5);
  const double p99p = bench::percentile(plain, 0.99), p99s = bench::percentile(submitted, 0.99);
  std::printf("%-40s %10s %10s\n", "start to running (ms)", "p50", "p99");
  std::printf("%-40s %10.1f %10.1f\n", "plain podman run --detach", p50p, p99p);
  std::printf("%-40s %10.1f %10.1f\n", "gpuplane submit to running", p50s, p99s);
  std::printf("%-40s %10.1f %10.1f\n", "overhead", p50s - p50p, p99s - p99p);
  std::printf("%-40s %10.2f %10.2f\n", "ratio", p50s / p50p, p99s / p99p);
  std::printf(
      "{\"jobs\": %d, \"plain_p50_ms\": %.1f, \"plain_p99_ms\": %.1f, \"submit_p50_ms\": %.1f, "
      "\"submit_p99_ms\": %.1f, \"overhead_p50_ms\": %.1f}\n",
      n, p50p, p99p, p50s, p99s, p50s - p50p);
  return 0;
}
