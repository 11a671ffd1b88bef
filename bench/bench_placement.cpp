// Placement benchmark: the scheduling core (validate -> quota -> place -> apply, with
// preemption on) on synthetic fleets of 1,000 and 10,000 nodes x 8 GPUs: mixed models
// (H200 / H100 / A100-80GB), a fifth of the GPUs in MIG mode and a tenth time-sliced, pools
// owned by a few tenants, 100 tenants with quotas, classes and cohorts, and 100,000 requests
// of mixed shapes and tiers interleaved with releases so the fleet stays busy but not full.
// Prints decisions per second, p50/p99 latency per decision and memory per GPU.
//
//   bench_placement [requests [nodes...]]     (defaults: 100000; 1000 and 10000 nodes)
#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sched/sched.h"
#include "vocab/vocab.h"

namespace {

using namespace gp;
using namespace gp::sched;

const char* kModels[] = {"H200", "H100", "A100-80GB"};
const char* kCatalogs[] = {"H200-141GB", "H100-80GB", "A100-80GB"};
constexpr int kTenants = 100;
constexpr int kPoolOwners = 4;

std::string tenant_name(int t) { return fmt::format("tenant-{:03}", t); }

IsolationClass class_of(int t) {
  if (t < kPoolOwners) return IsolationClass::kRegulated;
  if (t < 30) return IsolationClass::kInternal;
  if (t < 75) return IsolationClass::kStandard;
  if (t < 92) return IsolationClass::kSensitive;
  return IsolationClass::kRegulated;
}

std::vector<NodeSpec> make_fleet(int nodes, std::mt19937_64& rng) {
  std::vector<NodeSpec> specs;
  specs.reserve(nodes);
  std::uniform_int_distribution<int> pct(0, 99);
  for (int n = 0; n < nodes; ++n) {
    NodeSpec node;
    node.id = fmt::format("node-{:05}", n);
    node.name = node.id;
    node.rack = fmt::format("rack-{:04}", n / 16);
    node.nvlink_domain = fmt::format("nvl-{:04}", n / 4);
    const int model = (n / 4) % 3;
    if (n < kPoolOwners * nodes / 100) {  // 1% of the nodes in tenant pools
      const int owner = n % kPoolOwners;
      node.pool_owner = tenant_name(owner);
      node.pool_id = node.pool_name = fmt::format("pool-{}", owner);
    }
    for (int g = 0; g < 8; ++g) {
      GpuSpec gpu;
      gpu.uuid = fmt::format("GPU-{:05}-{}", n, g);
      gpu.index = g;
      gpu.model = kModels[model];
      gpu.mig_catalog = *vocab::mig_catalog(kCatalogs[model]);
      const int r = pct(rng);
      gpu.mode = r < 20 ? GpuMode::kMig : r < 30 ? GpuMode::kTimeSliced : GpuMode::kWhole;
      node.gpus.push_back(std::move(gpu));
    }
    specs.push_back(std::move(node));
  }
  return specs;
}

QuotaTree make_quota(int nodes) {
  QuotaTree q;
  // Each model has nodes/3 * 8 GPUs; tenants' nominal adds up to ~90% of it, and a cohort lets
  // busy tenants borrow idle quota.
  const int64_t per_model_units = int64_t{nodes} / 3 * 8 * kUnitsPerGpu;
  for (int t = 0; t < kTenants; ++t) {
    const std::string name = tenant_name(t);
    q.set_cohort(name, fmt::format("cohort-{}", t % 4));
    for (const char* m : kModels) {
      const int64_t nominal = per_model_units * 9 / 10 / kTenants;
      q.set_tenant(name, m, {.nominal = nominal, .borrow_limit = nominal, .limit = nominal * 3});
    }
  }
  return q;
}

Request make_request(int t, std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Request r;
  r.tenant = tenant_name(t);
  r.project = fmt::format("proj-{}", pick(0, 3));
  r.isolation = class_of(t);
  r.priority = pick(0, 3);
  r.preemptible = pick(0, 1) == 0;
  if (pick(0, 2) == 0) r.models = {kModels[pick(0, 2)]};
  const Tier weakest = weakest_tier(r.isolation);
  const int roll = pick(0, 99);
  if (t < kPoolOwners && roll < 50) {
    r.tier = Tier::kDedicatedPool;
  } else if (weakest == Tier::kDedicatedNode || (roll < 3 && weakest >= Tier::kDedicatedNode)) {
    r.tier = Tier::kDedicatedNode;
  } else if (weakest == Tier::kDedicatedGpu || roll < 40) {
    r.tier = Tier::kDedicatedGpu;
  } else if (weakest == Tier::kMig || roll < 80) {
    r.tier = Tier::kMig;
  } else {
    r.tier = Tier::kShared;
  }
  switch (r.tier) {
    case Tier::kDedicatedPool:
    case Tier::kDedicatedNode:
      r.node_count = pick(0, 3) == 0 ? 2 : 1;
      r.gpus_per_node = 8;
      r.same_nvlink_domain = r.node_count > 1;
      break;
    case Tier::kDedicatedGpu: {
      static const int kCounts[] = {1, 1, 1, 2, 2, 4, 8};
      r.count = kCounts[pick(0, 6)];
      r.same_node = r.count > 1 && pick(0, 1) == 0;
      break;
    }
    case Tier::kMig: {
      r.count = pick(0, 4) == 0 ? 2 : 1;
      const std::string model = r.models.empty() ? "H200" : r.models[0];
      const vocab::MigCatalog* c = *vocab::mig_catalog(model == "H100" ? "H100-80GB" : model);
      if (r.models.empty()) r.models = {model};
      static const int kProfiles[] = {5, 5, 5, 4, 3, 3, 2, 1};
      r.mig_profile = c->profiles[kProfiles[pick(0, 7)]].name;
      break;
    }
    case Tier::kShared:
      r.milli = std::vector<int>{100, 250, 250, 500}[pick(0, 3)];
      r.count = 1;
      break;
  }
  return r;
}

struct Figures {
  int64_t decisions = 0, placed = 0, pending = 0, rejected = 0, preemptions = 0, releases = 0;
  double submit_seconds = 0, total_seconds = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;
  double bytes_per_gpu_state = 0, bytes_per_gpu_heap = 0;
  double build_seconds = 0;
  double utilization = 0;
  // p50 / p99 per tier and outcome, for the breakdown table
  std::vector<std::tuple<std::string, int64_t, double, double>> breakdown;
};

Figures run(int nodes, int requests, uint64_t seed) {
  Figures f;
  std::mt19937_64 rng(seed);
  const size_t heap_before = mallinfo2().uordblks;
  auto build_start = std::chrono::steady_clock::now();
  Result<ClusterState> state = ClusterState::build(make_fleet(nodes, rng));
  if (!state) {
    fmt::print(stderr, "fleet: {}\n", state.error().message);
    std::exit(1);
  }
  Scheduler sched(std::move(*state), make_quota(nodes));
  f.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
  const int64_t gpus = int64_t{nodes} * 8;

  std::vector<double> latencies;
  latencies.reserve(requests);
  std::map<std::string, std::vector<double>> by_kind;
  std::vector<std::string> live;
  live.reserve(requests);
  TimePoint now = TimePoint(std::chrono::seconds(1'800'000'000));
  std::uniform_int_distribution<int> tenant_pick(0, kTenants - 1);
  const auto start = std::chrono::steady_clock::now();
  // Keep roughly 75% of the fleet's GPUs allocated: release while above, submit otherwise.
  const double target = 0.75 * static_cast<double>(gpus) * kUnitsPerGpu;
  double held_units = 0;
  std::unordered_map<std::string, int64_t> units_of;
  for (int i = 0; i < requests; ++i) {
    now += std::chrono::milliseconds(10);
    while (held_units > target && !live.empty()) {
      const size_t k = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      std::swap(live[k], live.back());
      const std::string id = std::move(live.back());
      live.pop_back();
      if (sched.release(id, now)) {
        held_units -= static_cast<double>(units_of[id]);
        ++f.releases;
      }
      units_of.erase(id);
    }
    const Request r = make_request(tenant_pick(rng), rng);
    const std::string id = fmt::format("alloc-{}", i);
    const auto t0 = std::chrono::steady_clock::now();
    Decision d = sched.submit(id, r, now);
    const auto t1 = std::chrono::steady_clock::now();
    latencies.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    by_kind[fmt::format("{} {}{}", tier_name(r.tier), decision_kind_name(d.kind),
                        d.preempted.empty() ? "" : " +preempt")]
        .push_back(latencies.back());
    ++f.decisions;
    switch (d.kind) {
      case DecisionKind::kPlaced:
        ++f.placed;
        live.push_back(id);
        units_of[id] = d.placement->units;
        held_units += static_cast<double>(d.placement->units);
        f.preemptions += static_cast<int64_t>(d.preempted.size());
        for (const std::string& v : d.preempted) {
          held_units -= static_cast<double>(units_of[v]);
          units_of.erase(v);
          live.erase(std::find(live.begin(), live.end(), v));
        }
        break;
      case DecisionKind::kPending:
        ++f.pending;
        (void)sched.release(id, now);  // the client gives up: keeps the queue from growing
        break;
      case DecisionKind::kRejected:
        ++f.rejected;
        break;
    }
  }
  const auto end = std::chrono::steady_clock::now();
  f.total_seconds = std::chrono::duration<double>(end - start).count();
  for (double l : latencies) f.submit_seconds += l / 1e6;
  std::ranges::sort(latencies);
  f.p50_us = latencies[latencies.size() / 2];
  f.p99_us = latencies[latencies.size() * 99 / 100];
  f.max_us = latencies.back();
  for (auto& [kind, l] : by_kind) {
    std::ranges::sort(l);
    f.breakdown.emplace_back(kind, static_cast<int64_t>(l.size()), l[l.size() / 2],
                             l[l.size() * 99 / 100]);
  }
  f.bytes_per_gpu_state =
      static_cast<double>(sched.state().memory_bytes()) / static_cast<double>(gpus);
  f.bytes_per_gpu_heap =
      static_cast<double>(mallinfo2().uordblks - heap_before) / static_cast<double>(gpus);
  f.utilization = held_units / (static_cast<double>(gpus) * kUnitsPerGpu);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 100'000;
  fmt::print("placement core: {} requests per fleet, one thread\n\n", requests);
  fmt::print("{:>7} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>6} {:>9} {:>9}\n",
             "nodes", "gpus", "decisions", "dec/s", "p50 us", "p99 us", "max us", "placed",
             "pending", "preempt", "util", "B/GPU st", "B/GPU heap");
  std::vector<int> fleets;
  for (int i = 2; i < argc; ++i) fleets.push_back(std::atoi(argv[i]));
  if (fleets.empty()) fleets = {1'000, 10'000};
  for (int nodes : fleets) {
    const Figures f = run(nodes, requests, 42);
    fmt::print(
        "{:>7} {:>6} {:>10} {:>10.0f} {:>8.1f} {:>8.1f} {:>8.0f} {:>7} {:>7} {:>7} {:>5.0f}% "
        "{:>9.0f} {:>9.0f}\n",
        nodes, nodes * 8, f.decisions, static_cast<double>(f.decisions) / f.submit_seconds,
        f.p50_us, f.p99_us, f.max_us, f.placed, f.pending, f.preemptions, f.utilization * 100,
        f.bytes_per_gpu_state, f.bytes_per_gpu_heap);
    fmt::print(
        "        (fleet built in {:.2f} s; {} releases; {} rejected; wall {:.2f} s incl. "
        "releases)\n",
        f.build_seconds, f.releases, f.rejected, f.total_seconds);
    for (const auto& [kind, n, p50, p99] : f.breakdown) {
      fmt::print("        {:<32} {:>7} decisions  p50 {:>7.1f} us  p99 {:>8.1f} us\n", kind, n, p50,
                 p99);
    }
  }
  return 0;
}
