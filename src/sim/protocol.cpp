// The FGD paper's protocol (data/openb/README.md): one seed's submission order, pods placed one
// at a time through sched::place/apply and never departing, one sample after every pod, and the
// figure at X% as the mean of the samples whose arrived % rounds to X.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "sim/sim.h"

namespace gp::sim {

std::vector<const TracePod*> protocol_order(const std::vector<TracePod>& pods,
                                            int64_t capacity_milli, const ProtocolOptions& o) {
  std::vector<const TracePod*> order;
  order.reserve(pods.size());
  for (const TracePod& p : pods) order.push_back(&p);
  std::ranges::stable_sort(order,
                           [](const TracePod* a, const TracePod* b) { return a->name < b->name; });
  // Fisher-Yates with our own index draws, so the order does not depend on the standard
  // library's shuffle.
  std::mt19937_64 rng(o.seed);
  auto below = [&](uint64_t n) { return rng() % n; };
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[below(i)]);
  const double target = o.inflate * static_cast<double>(capacity_milli);
  double total = 0;
  for (const TracePod* p : order) total += static_cast<double>(p->gpu_request());
  if (total <= target) {
    // Top up: draw with replacement until the next draw's per-GPU milli would pass the target.
    const std::size_t n = pods.size();
    std::vector<const TracePod*> by_name(order);
    std::ranges::stable_sort(
        by_name, [](const TracePod* a, const TracePod* b) { return a->name < b->name; });
    while (true) {
      const TracePod* p = by_name[below(n)];
      if (total + p->gpu_milli > target) break;
      order.push_back(p);
      total += static_cast<double>(p->gpu_request());
    }
  } else {
    // Thin: remove random pods until the total is at most the target.
    while (total > target && !order.empty()) {
      const std::size_t i = below(order.size());
      total -= static_cast<double>(order[i]->gpu_request());
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return order;
}

std::optional<double> figure_at(const std::vector<Sample>& samples, double x) {
  double sum = 0;
  int64_t n = 0;
  for (const Sample& s : samples) {
    if (s.arrived_pct >= x - 0.5 && s.arrived_pct < x + 0.5) {
      sum += s.allocated_pct;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

Stats stats_of(const std::vector<double>& values) {
  Stats s;
  s.n = static_cast<int>(values.size());
  if (values.empty()) return s;
  for (double v : values) s.mean += v;
  s.mean /= s.n;
  double var = 0;
  for (double v : values) var += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(var / s.n);
  return s;
}

Result<ProtocolResult> run_protocol(const std::vector<TraceNode>& nodes,
                                    const std::vector<TracePod>& pods, const ProtocolOptions& o) {
  if (!(o.inflate > 0) || o.inflate > 100) {
    return fail(Error::invalid(fmt::format("inflate must be in (0, 100]; got {}", o.inflate)));
  }
  if (o.max_scored_nodes < 0) return fail(Error::invalid("max_scored_nodes must not be negative"));
  const int64_t capacity = gpu_capacity_milli(nodes);
  if (capacity <= 0) return fail(Error::invalid("the cluster has no GPUs"));
  sched::ClusterState state = GP_TRY(sched::ClusterState::build(cluster_of(nodes)));
  const std::map<sched::ClusterState::Shape, int64_t> trace_mix = workload_of(pods, state);

  ProtocolResult r;
  r.seed = o.seed;
  r.policy = std::string(sched::policy_name(o.policy));
  r.original_pods = static_cast<int64_t>(pods.size());
  const std::vector<const TracePod*> order = protocol_order(pods, capacity, o);
  r.pods = static_cast<int64_t>(order.size());

  sched::PlaceOptions place_options;
  place_options.policy = o.policy;
  place_options.seed = o.seed;
  place_options.max_scored_nodes = o.max_scored_nodes;
  if (o.trace_mix) place_options.workload = &trace_mix;
  std::mt19937_64 draws(o.seed ^ 0x5eed5eed5eedULL);

  const double cap = static_cast<double>(capacity);
  int64_t arrived = 0, allocated = 0;
  std::vector<Sample> samples;
  samples.reserve(order.size());
  double frag_sum = 0;
  int64_t frag_n = 0;
  int64_t original_arrived = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const TracePod& pod = *order[i];
    arrived += pod.gpu_request();
    if (static_cast<int64_t>(i) < r.original_pods) original_arrived = arrived;
    const sched::Request request = request_of(pod);
    place_options.draw = draws();
    Result<sched::Placement> placed = sched::place(state, request, place_options);
    bool ok = false;
    if (placed) {
      Result<void> applied = sched::apply(state, *placed, fmt::format("pod-{}", i));
      if (!applied) {
        return fail(Error::internal(fmt::format("placement of {} could not be applied: {}",
                                                pod.name, applied.error().message)));
      }
      ok = true;
    } else if (placed.error().code != ErrorCode::kConflict) {
      return fail(Error::invalid(fmt::format("pod {}: {}", pod.name, placed.error().message)));
    }
    if (ok) {
      allocated += pod.gpu_request();
    } else {
      ++r.failed_pods;
      r.failed_gpu_milli += pod.gpu_request();
      if (static_cast<double>(arrived) <= cap) {
        std::string key = pod.num_gpu == 0 ? std::string("cpu")
                                           : fmt::format("{}x{}m", pod.num_gpu, pod.gpu_milli);
        for (std::size_t k = 0; k < pod.gpu_spec.size(); ++k) {
          key += (k == 0 ? "[" : "|") + pod.gpu_spec[k] + (k + 1 == pod.gpu_spec.size() ? "]" : "");
        }
        ++r.failed_by_shape[key];
      }
    }
    const Sample s{100.0 * static_cast<double>(arrived) / cap,
                   100.0 * static_cast<double>(allocated) / cap};
    samples.push_back(s);
    if (s.arrived_pct >= 99.5 && s.arrived_pct < 100.5) {
      frag_sum += 100.0 * sched::fragmentation_milli(state, trace_mix) / cap;
      ++frag_n;
    }
  }
  r.original_arrived_pct = 100.0 * static_cast<double>(original_arrived) / cap;
  r.final_arrived_pct = samples.empty() ? 0 : samples.back().arrived_pct;
  r.final_allocated_pct = samples.empty() ? 0 : samples.back().allocated_pct;
  r.alloc_pct_at_100 = figure_at(samples, 100);
  r.alloc_pct_at_130 = figure_at(samples, 130);
  if (frag_n > 0) r.frag_pct_at_100 = frag_sum / static_cast<double>(frag_n);
  if (o.curve) r.curve = std::move(samples);
  return r;
}

const std::vector<PublishedRow>& published_openb() {
  static const std::vector<PublishedRow> rows = {
      {"default", 86.30, 90.62, 91.65, 91.78, 92.86, 95.23, 87.47, 93.08, 95.39},
      {"cpu050", 89.02, 93.03, 93.52, 93.46, 93.56, 95.00, {}, {}, {}},
      {"cpu200", 83.03, 87.45, 89.67, 89.98, 92.15, 94.82, 83.77, 92.40, 95.05},
      {"gpushare40", 84.86, 89.30, 89.76, 89.77, 91.44, 93.96, {}, {}, {}},
      {"gpushare80", 80.62, 84.14, 84.50, 84.65, 86.66, 89.08, 81.22, 87.01, 89.30},
      {"gpuspec10", 86.26, 90.17, 91.96, 92.24, 93.10, 94.66, {}, {}, {}},
      {"gpuspec25", 85.42, 85.44, 86.41, 86.77, 85.67, 93.91, 86.94, 93.23, 94.74},
      {"multigpu20", 86.92, 91.85, 93.34, 93.50, 93.73, 95.53, {}, {}, {}},
      {"multigpu40", 85.38, 94.04, 95.35, 95.59, 95.10, 96.91, 90.09, 95.23, 96.99},
  };
  return rows;
}

const PublishedRow* published_for(std::string_view trace) {
  for (const PublishedRow& row : published_openb()) {
    if (row.trace == trace) return &row;
  }
  return nullptr;
}

}  // namespace gp::sim
