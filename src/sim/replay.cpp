// Replay with departures: pods arrive at creation_time and leave at deletion_time (a pod that
// waited keeps its lifetime), through sched::place/apply/release; pods that do not fit wait in
// a FIFO queue that is retried whenever capacity is freed. Reports allocation over time,
// queueing delay and per-tenant fairness.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>
#include <random>
#include <set>
#include <unordered_map>

#include "sim/sim.h"

namespace gp::sim {
namespace {

struct Departure {
  int64_t time;
  std::size_t pod;
  bool operator>(const Departure& o) const { return std::tie(time, pod) > std::tie(o.time, o.pod); }
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::ranges::sort(v);
  const std::size_t i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

Result<ReplayResult> run_replay(const std::vector<TraceNode>& nodes,
                                const std::vector<TracePod>& pods, const ReplayOptions& o) {
  if (o.timeline_points < 1) return fail(Error::invalid("timeline_points must be at least 1"));
  if (o.max_scored_nodes < 0) return fail(Error::invalid("max_scored_nodes must not be negative"));
  for (const TracePod& p : pods) {
    if (!p.creation_time || !p.deletion_time) {
      return fail(Error::invalid(fmt::format(
          "pod {} has no creation_time/deletion_time: replay needs both (use --mode protocol "
          "for traces without times)",
          p.name)));
    }
  }
  const int64_t capacity = gpu_capacity_milli(nodes);
  if (capacity <= 0) return fail(Error::invalid("the cluster has no GPUs"));
  sched::ClusterState state = GP_TRY(sched::ClusterState::build(cluster_of(nodes)));

  ReplayResult r;
  r.policy = std::string(sched::policy_name(o.policy));
  r.pods = static_cast<int64_t>(pods.size());
  std::vector<std::size_t> arrivals(pods.size());
  for (std::size_t i = 0; i < pods.size(); ++i) arrivals[i] = i;
  std::ranges::stable_sort(arrivals, [&](std::size_t a, std::size_t b) {
    return std::tie(*pods[a].creation_time, pods[a].name) <
           std::tie(*pods[b].creation_time, pods[b].name);
  });
  if (pods.empty()) return r;
  r.start_time = *pods[arrivals.front()].creation_time;

  sched::PlaceOptions place_options;
  place_options.policy = o.policy;
  place_options.seed = o.seed;
  place_options.max_scored_nodes = o.max_scored_nodes;
  std::mt19937_64 draws(o.seed ^ 0x5eed5eed5eedULL);

  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  std::vector<std::size_t> pending;  // FIFO by arrival
  std::vector<int64_t> started(pods.size(), -1);
  std::vector<double> waits;
  std::map<std::string, TenantFigures> tenants;
  int64_t allocated = 0;
  int64_t now = r.start_time;
  double alloc_integral = 0;  // allocated milli x seconds
  std::vector<ReplayResult::Point> events;

  auto advance = [&](int64_t t) {
    alloc_integral += static_cast<double>(allocated) * static_cast<double>(t - now);
    now = t;
  };
  auto try_start = [&](std::size_t i) -> Result<bool> {
    const TracePod& pod = pods[i];
    place_options.draw = draws();
    Result<sched::Placement> placed = sched::place(state, request_of(pod), place_options);
    if (!placed) {
      if (placed.error().code == ErrorCode::kConflict) return false;
      return fail(Error::invalid(fmt::format("pod {}: {}", pod.name, placed.error().message)));
    }
    GP_TRY_VOID(sched::apply(state, *placed, fmt::format("pod-{}", i)));
    started[i] = now;
    allocated += pod.gpu_request();
    const int64_t lifetime = *pod.deletion_time - *pod.creation_time;
    departures.push({now + lifetime, i});
    const double wait = static_cast<double>(now - *pod.creation_time);
    waits.push_back(wait);
    TenantFigures& t = tenants[request_of(pod).tenant];
    ++t.placed;
    t.mean_wait_s += wait;
    t.max_wait_s = std::max(t.max_wait_s, wait);
    t.received_milli_s += pod.gpu_request() * lifetime;
    return true;
  };
  auto record = [&] {
    events.push_back({now, 100.0 * static_cast<double>(allocated) / static_cast<double>(capacity),
                      static_cast<int64_t>(pending.size())});
    r.peak_alloc_pct = std::max(r.peak_alloc_pct, events.back().allocated_pct);
  };
  // Retries the queue in order; a shape that failed in this pass is not tried again in it.
  auto retry = [&]() -> Result<void> {
    std::set<std::tuple<int, int, int64_t, int64_t, std::vector<std::string>>> failed;
    std::vector<std::size_t> still;
    for (std::size_t i : pending) {
      const TracePod& p = pods[i];
      auto key = std::tuple(p.num_gpu, p.gpu_milli, p.cpu_milli, p.memory_mib, p.gpu_spec);
      if (failed.contains(key)) {
        still.push_back(i);
        continue;
      }
      const bool started_now = GP_TRY(try_start(i));
      if (!started_now) {
        failed.insert(std::move(key));
        still.push_back(i);
      }
    }
    pending = std::move(still);
    return ok();
  };

  for (std::size_t i = 0; i < pods.size(); ++i) {
    TenantFigures& t = tenants[request_of(pods[i]).tenant];
    t.tenant = request_of(pods[i]).tenant;
    ++t.pods;
    t.demand_milli_s += pods[i].gpu_request() * (*pods[i].deletion_time - *pods[i].creation_time);
  }
  std::size_t next = 0;
  while (next < arrivals.size() || !departures.empty()) {
    const int64_t arrive_at = next < arrivals.size() ? *pods[arrivals[next]].creation_time
                                                     : std::numeric_limits<int64_t>::max();
    if (!departures.empty() && departures.top().time <= arrive_at) {
      // Departures first at equal times: what leaves makes room for what arrives.
      const int64_t t = departures.top().time;
      advance(t);
      while (!departures.empty() && departures.top().time == t) {
        const std::size_t i = departures.top().pod;
        departures.pop();
        GP_TRY(sched::release(state, fmt::format("pod-{}", i)));
        allocated -= pods[i].gpu_request();
      }
      GP_TRY_VOID(retry());
      record();
      continue;
    }
    advance(arrive_at);
    while (next < arrivals.size() && *pods[arrivals[next]].creation_time == arrive_at) {
      const std::size_t i = arrivals[next++];
      // An arrival that fits starts at once, even with others queued (they wait for room
      // that this pod does not take from them: it fits in what they could not use).
      const bool started_now = GP_TRY(try_start(i));
      if (started_now) {
        ++r.placed_at_once;
      } else {
        pending.push_back(i);
      }
    }
    record();
  }
  r.end_time = now;
  for (std::size_t i : pending) {
    TenantFigures& t = tenants[request_of(pods[i]).tenant];
    ++t.never_placed;
    ++r.never_placed;
  }
  r.placed = static_cast<int64_t>(waits.size());
  if (!waits.empty()) {
    double sum = 0;
    for (double w : waits) sum += w;
    r.mean_wait_s = sum / static_cast<double>(waits.size());
    r.p50_wait_s = percentile(waits, 0.5);
    r.p95_wait_s = percentile(waits, 0.95);
    r.max_wait_s = *std::ranges::max_element(waits);
  }
  const double span = static_cast<double>(r.end_time - r.start_time);
  r.mean_alloc_pct = span > 0 ? 100.0 * alloc_integral / span / static_cast<double>(capacity) : 0;
  // The timeline: the state after the last event at or before each of the evenly spaced times.
  std::size_t e = 0;
  for (int k = 0; k < o.timeline_points && !events.empty(); ++k) {
    const int64_t t = o.timeline_points == 1
                          ? r.end_time
                          : r.start_time + static_cast<int64_t>(span * k / (o.timeline_points - 1));
    while (e + 1 < events.size() && events[e + 1].time <= t) ++e;
    r.timeline.push_back({t, events[e].allocated_pct, events[e].pending});
  }
  double sum = 0, sum_sq = 0;
  int n = 0;
  for (auto& [name, t] : tenants) {
    if (t.placed > 0) t.mean_wait_s /= static_cast<double>(t.placed);
    if (t.demand_milli_s > 0) {
      const double x =
          static_cast<double>(t.received_milli_s) / static_cast<double>(t.demand_milli_s);
      sum += x;
      sum_sq += x * x;
      ++n;
    }
    r.tenants.push_back(t);
  }
  r.fairness = n > 0 && sum_sq > 0 ? sum * sum / (n * sum_sq) : 1;
  return r;
}

}  // namespace gp::sim
