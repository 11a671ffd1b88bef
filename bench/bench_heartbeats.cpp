// Heartbeats at fleet scale: N simulated nodes of 8 H200 each (default 12,500: 100,000 GPUs),
// enrolled with join tokens like real agents, each heartbeating every `interval` seconds with
// its inventory and one utilization sample per GPU, over keep-alive connections to the API in
// process (SQLite, every write durable before its answer). The heartbeats are staggered evenly
// over the interval, as a fleet's agents are; a heartbeat sent after its due time counts as
// lag. Prints the rate kept against the rate the fleet needs, the latency and lag, the server's
// CPU (the process's minus the load generator's threads) and its memory per GPU (resident
// memory above the same process before the fleet existed, divided by the GPUs).
//
// Each simulated node acts as the agent does: once the control plane's answer names the digest
// of the inventory it holds, the node's heartbeats name that digest instead of sending the
// inventory again. `full` sends the inventory with every heartbeat (agents before the digest).
//
//   build/bench/bench_heartbeats [nodes [seconds [interval-seconds [connections [digest|full]]]]]
//   (defaults: 12500 nodes, 60 s, 10 s, 64 connections, digest)
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/api.h"
#include "bench_env.h"
#include "bench_fleet.h"
#include "common/env.h"
#include "fleet/fleet.h"
#include "observe/observe.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace gp;
using Steady = std::chrono::steady_clock;

namespace {

constexpr int kGpusPerNode = 8;

Json inventory_of(int n) { return bench::h200_inventory(n, fmt::format("hb{:05d}", n)); }

// What an agent on NVML sends beside its inventory: a sample per GPU with every figure.
std::string samples_text(int n, int round) {
  Json samples = Json::array();
  for (int g = 0; g < kGpusPerNode; ++g)
    samples.push_back({{"gpu_uuid", fmt::format("GPU-{:05d}-{}", n, g)},
                       {"util_pct", (n * 7 + g * 13 + round * 29) % 101},
                       {"mem_used_bytes", int64_t{(n + g + round) % 140} << 30},
                       {"mem_total_bytes", int64_t{141} << 30},
                       {"power_mw", 75000 + (n * 31 + g) % 600000},
                       {"energy_mj", int64_t{n} * 1000000 + g},
                       {"temperature_c", 30 + (n + g) % 50},
                       {"sm_clock_mhz", 1980},
                       {"ecc_corrected", 0},
                       {"ecc_uncorrected", 0}});
  return samples.dump();
}

// The digest in a heartbeat's answer ("" when it has none), found without parsing the answer:
// the load generator's own CPU is kept small.
std::string digest_in(std::string_view answer) {
  constexpr std::string_view kKey = R"("inventory_digest":")";
  auto at = answer.find(kKey);
  if (at == std::string_view::npos) return "";
  at += kKey.size();
  auto end = answer.find('"', at);
  return end == std::string_view::npos ? "" : std::string(answer.substr(at, end - at));
}

long resident_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("VmRSS:")) return std::atol(line.c_str() + 6);
  return 0;
}

double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct ClientFigures {
  std::vector<double> latency_ms, lag_ms;
  int ok = 0, failed = 0;
  double cpu_seconds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::max(1, std::atoi(argv[1])) : 12'500;
  const double seconds = argc > 2 ? std::max(1.0, std::atof(argv[2])) : 60.0;
  const double interval = argc > 3 ? std::max(0.1, std::atof(argv[3])) : 10.0;
  const int conns = argc > 4 ? std::max(1, std::atoi(argv[4])) : 64;
  const bool full = argc > 5 && std::string_view(argv[5]) == "full";
  if (argc > 5 && !full && std::string_view(argv[5]) != "digest") {
    std::fprintf(stderr, "the fifth argument is 'digest' or 'full', not '%s'\n", argv[5]);
    return 2;
  }
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  spdlog::set_level(spdlog::level::off);

  auto env = bench::BenchEnv::open();
  if (!env) return 1;
  auto [store, clock, ids, log] = env->parts();
  api::Limits limits;
  limits.node_timeout = std::chrono::hours(1);  // enrolment takes a while; no node is failed
  api::Api api(store, log, Env{clock, ids}, limits);
  api::Server server(api, "127.0.0.1", 0, bench::io_threads());
  auto port = server.start();
  if (!port) {
    std::fprintf(stderr, "server: %s\n", port.error().message.c_str());
    return 1;
  }
  // The bodies are the load generator's, built before the baseline; what grows after is the
  // control plane's.
  std::vector<std::string> credentials(static_cast<size_t>(nodes));
  // Node n's full body, its samples, and the digest the control plane last said it holds.
  std::vector<std::string> bodies(static_cast<size_t>(nodes)), samples(static_cast<size_t>(nodes)),
      digests(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) {
    samples[size_t(n)] = samples_text(n, 0);
    bodies[size_t(n)] = fmt::format(R"({{"inventory":{},"samples":{}}})", inventory_of(n).dump(),
                                    samples[size_t(n)]);
  }
  const long rss_empty = resident_kib();

  const auto enrol_start = Steady::now();
  constexpr int kBatch = 250;
  for (int first = 0; first < nodes; first += kBatch) {
    auto wrote = store.write([&](store::Tx& tx) -> Result<void> {
      Env w{clock, ids};
      for (int n = first; n < std::min(nodes, first + kBatch); ++n) {
        auto token =
            GP_TRY(fleet::create_join_token(tx, w, std::nullopt, "bench", std::chrono::hours(1)));
        auto inventory = GP_TRY(fleet::parse_inventory(inventory_of(n)));
        credentials[size_t(n)] = GP_TRY(fleet::enroll(tx, w, token.token, inventory)).credential;
      }
      return ok();
    });
    if (!wrote) {
      std::fprintf(stderr, "enrolment: %s\n", wrote.error().message.c_str());
      return 1;
    }
    if (terminal)
      std::fprintf(stderr, "\renrolling nodes: %d of %d", std::min(nodes, first + kBatch), nodes);
  }
  if (terminal) std::fprintf(stderr, "\n");
  const double enrol_seconds = std::chrono::duration<double>(Steady::now() - enrol_start).count();

  // Node n's k-th heartbeat is due at start + (n / nodes + k) * interval; connection c serves
  // the nodes n with n % conns == c, in due order.
  std::vector<ClientFigures> figures(static_cast<size_t>(conns));
  std::atomic<int> sent{0};
  const double cpu_before = cpu_seconds(RUSAGE_SELF);
  const auto start = Steady::now() + std::chrono::milliseconds(200);
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c)
    threads.emplace_back([&, c] {
      ClientFigures& f = figures[size_t(c)];
      asio::io_context ioc;
      std::optional<beast::tcp_stream> tcp;
      beast::flat_buffer buf;
      for (int k = 0;; ++k) {
        for (int n = c; n < nodes; n += conns) {
          const auto due =
              start + std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(
                          (double(n) / double(nodes) + k) * interval));
          if (due >= end) {
            f.cpu_seconds = cpu_seconds(RUSAGE_THREAD);
            return;
          }
          std::this_thread::sleep_until(due);
          try {
            if (!tcp) {
              tcp.emplace(ioc);
              tcp->connect({asio::ip::make_address("127.0.0.1"), *port});
              buf.clear();
            }
            http::request<http::string_body> req{http::verb::post, "/v1/agent/heartbeat", 11};
            req.set(http::field::host, "127.0.0.1");
            req.set(http::field::authorization, "Bearer " + credentials[size_t(n)]);
            req.set(http::field::content_type, "application/json");
            const std::string& digest = digests[size_t(n)];
            req.body() = digest.empty() || full
                             ? bodies[size_t(n)]
                             : fmt::format(R"({{"inventory_digest":"{}","samples":{}}})", digest,
                                           samples[size_t(n)]);
            req.prepare_payload();
            const auto t0 = Steady::now();
            tcp->expires_after(std::chrono::seconds(30));
            http::write(*tcp, req);
            http::response<http::string_body> res;
            http::read(*tcp, buf, res);
            const auto t1 = Steady::now();
            f.latency_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            f.lag_ms.push_back(std::chrono::duration<double, std::milli>(t0 - due).count());
            (res.result_int() == 200 ? f.ok : f.failed)++;
            if (res.result_int() == 200) digests[size_t(n)] = digest_in(res.body());
            if (res.result_int() != 200 && f.failed == 1)
              std::fprintf(stderr, "heartbeat answered %d: %s\n", res.result_int(),
                           res.body().substr(0, 300).c_str());
            if (!res.keep_alive()) tcp.reset();
          } catch (const std::exception&) {
            ++f.failed;
            tcp.reset();
          }
          ++sent;
        }
      }
    });
  std::thread progress([&] {
    while (terminal && Steady::now() < end) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const double t = std::chrono::duration<double>(Steady::now() - start).count();
      std::fprintf(stderr, "\rheartbeats: %d in %.0f s", sent.load(), std::max(0.0, t));
    }
  });
  for (auto& t : threads) t.join();
  progress.join();
  if (terminal) std::fprintf(stderr, "\n");
  const double wall = std::chrono::duration<double>(Steady::now() - start).count();
  const double cpu_total = cpu_seconds(RUSAGE_SELF) - cpu_before;
  const long rss_after = resident_kib();
  server.stop();

  // What a scrape of the fleet costs: /metrics/hardware whole and one shard of ten, and the fleet
  // aggregates of /metrics, each built from the store as the endpoint builds it.
  struct Scrape {
    std::string what;
    double seconds = 0;
    size_t bytes = 0, series = 0;
  };
  std::vector<Scrape> scrapes;
  auto scrape = [&](std::string what, auto build) {
    const auto t0 = Steady::now();
    std::string text;
    auto read = store.read([&](store::Tx& tx) -> Result<void> {
      text = GP_TRY(build(tx));
      return ok();
    });
    if (!read) std::fprintf(stderr, "%s: %s\n", what.c_str(), read.error().message.c_str());
    Scrape s{std::move(what), std::chrono::duration<double>(Steady::now() - t0).count(),
             text.size(), 0};
    for (size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) {
      if (text[at] != '#') ++s.series;
      if (text.find('\n', at) == std::string::npos) break;
    }
    scrapes.push_back(std::move(s));
  };
  const Env world{clock, ids};
  scrape("/metrics/hardware", [&](store::Tx& tx) {
    return observe::hardware_metrics(tx, world, {{0, 1}, {}});
  });
  scrape("/metrics/hardware?shard=0/10", [&](store::Tx& tx) {
    return observe::hardware_metrics(tx, world, {{0, 10}, {}});
  });
  scrape("/metrics (fleet part)",
         [&](store::Tx& tx) { return observe::fleet_metrics(tx, world, api.allocs(), {}); });

  ClientFigures all;
  for (auto& f : figures) {
    all.latency_ms.insert(all.latency_ms.end(), f.latency_ms.begin(), f.latency_ms.end());
    all.lag_ms.insert(all.lag_ms.end(), f.lag_ms.begin(), f.lag_ms.end());
    all.ok += f.ok;
    all.failed += f.failed;
    all.cpu_seconds += f.cpu_seconds;
  }
  const double server_cpu = cpu_total - all.cpu_seconds;
  const int64_t gpus = int64_t{nodes} * kGpusPerNode;
  fmt::print(
      "heartbeats at fleet scale: {} nodes x {} GPUs = {} GPUs, every {:.0f} s, {} connections, "
      "{:.0f} s, {}\n",
      nodes, kGpusPerNode, gpus, interval, conns, seconds,
      full ? "the inventory in every heartbeat" : "the inventory's digest once it is held");
  fmt::print("  enrolment: {} nodes in {:.1f} s\n", nodes, enrol_seconds);
  fmt::print("  heartbeats/s: {:.0f} kept of {:.0f} needed ({} answered 200, {} failed)\n",
             double(all.ok) / wall, double(nodes) / interval, all.ok, all.failed);
  fmt::print("  latency ms: p50 {:.2f}  p99 {:.2f}  max {:.1f}\n",
             bench::percentile(all.latency_ms, 0.5), bench::percentile(all.latency_ms, 0.99),
             bench::percentile(all.latency_ms, 1.0));
  fmt::print("  lag behind schedule ms: p50 {:.1f}  p99 {:.1f}  max {:.1f}\n",
             bench::percentile(all.lag_ms, 0.5), bench::percentile(all.lag_ms, 0.99),
             bench::percentile(all.lag_ms, 1.0));
  fmt::print("  server CPU: {:.2f} cores (process {:.2f}, load generator {:.2f})\n",
             server_cpu / wall, cpu_total / wall, all.cpu_seconds / wall);
  fmt::print("  memory: {} KiB resident above the empty server = {:.0f} bytes per GPU\n",
             rss_after - rss_empty, double(rss_after - rss_empty) * 1024.0 / double(gpus));
  for (const auto& s : scrapes)
    fmt::print("  scrape {}: {} series, {:.1f} MB, {:.2f} s\n", s.what, s.series,
               double(s.bytes) / 1e6, s.seconds);
  return all.failed == 0 ? 0 : 1;
}
