// Trace replay: runs a GPU cluster trace through the scheduler's own placement engine
// (sched::place/apply/release) on simulated time. Reads the openb CSV formats, follows the
// FGD paper's protocol (shuffled arrivals, inflation to a target load, never departing) and
// replays traces with departures and a pending queue. Pure functions over plain structs;
// only load_text() touches the file system. Public header of the sim module.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "sched/sched.h"

namespace gp::sim {

// ---- traces ----

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0, memory_mib = 0;
  int gpus = 0;
  std::string model;  // empty for CPU-only nodes
};

struct TracePod {
  std::string name;
  int64_t cpu_milli = 0, memory_mib = 0;
  int num_gpu = 0;    // 0: CPU-only
  int gpu_milli = 0;  // per GPU: 1..1000 when num_gpu is 1, 1000 when more, 0 when none
  std::vector<std::string> gpu_spec;  // allowed models; empty = any
  std::string qos, phase;
  std::optional<int64_t> creation_time, deletion_time;  // seconds
  std::string tenant;  // optional column; empty = the default tenant

  int64_t gpu_request() const { return int64_t{gpu_milli} * num_gpu; }  // milli-GPU
};

// Node list: header `sn,cpu_milli,memory_mib,gpu,model` (column order free, extra columns
// ignored). Pod list: `name,cpu_milli,memory_mib,num_gpu,gpu_milli` required; `gpu_spec`,
// `qos`, `pod_phase`, `creation_time`, `deletion_time`, `tenant` optional. Errors name the
// source, line and column.
Result<std::vector<TraceNode>> parse_nodes(std::string_view csv, std::string_view source);
Result<std::vector<TracePod>> parse_pods(std::string_view csv, std::string_view source);
Result<std::string> load_text(const std::string& path);

// The trace's cluster as scheduler nodes (GPU uuids "<node>/gpu<i>", CPU and memory tracked).
std::vector<sched::NodeSpec> cluster_of(const std::vector<TraceNode>& nodes);
int64_t gpu_capacity_milli(const std::vector<TraceNode>& nodes);

inline constexpr std::string_view kDefaultTenant = "trace";
// A pod as a scheduler request: a fractional pod is one shared share of gpu_milli, k whole
// GPUs are dedicated-gpu on one node, no GPU is CPU-only; gpu_spec -> allowed models; the
// tenant (class internal) is the pod's tenant column or kDefaultTenant.
sched::Request request_of(const TracePod& pod);

// The shapes of a pod list as a workload mix (for fragmentation figures).
std::map<sched::ClusterState::Shape, int64_t> workload_of(const std::vector<TracePod>& pods,
                                                          const sched::ClusterState& state);

// ---- the FGD paper's protocol ----

struct ProtocolOptions {
  uint64_t seed = 42;
  double inflate = 1.3;  // arrived GPU request target, as a multiple of capacity
  sched::PlacementPolicy policy = sched::PlacementPolicy::kDefault;
  int max_scored_nodes = sched::PlaceOptions{}.max_scored_nodes;  // the server's budget
  bool curve = false;                                             // keep every sample in the result
  // Default policy: keep room for the whole trace's mix (as FGD does) rather than for the
  // running allocations only.
  bool trace_mix = true;
};

struct Sample {
  double arrived_pct = 0, allocated_pct = 0;
};

struct ProtocolResult {
  uint64_t seed = 0;
  std::string policy;
  int64_t pods = 0;  // submitted after top-up or thinning
  int64_t original_pods = 0;
  int64_t failed_pods = 0;  // arrived and never placed
  int64_t failed_gpu_milli = 0;
  // Pods that failed while arrived was at most 100%, by shape ("1x460m", "8x1000m", "cpu").
  std::map<std::string, int64_t> failed_by_shape;
  double original_arrived_pct = 0;  // where the trace's own pods end
  double final_arrived_pct = 0, final_allocated_pct = 0;
  // Mean allocated % over samples whose arrived % lies in [X-0.5, X+0.5); nullopt: no sample.
  std::optional<double> alloc_pct_at_100, alloc_pct_at_130;
  // Mean over the same samples as alloc_pct_at_100 of the cluster fragmentation (see
  // sched::fragmentation_milli, with the whole trace as the mix) in % of capacity.
  std::optional<double> frag_pct_at_100;
  std::vector<Sample> curve;  // when ProtocolOptions::curve
};

// The submitted pod list of one seed: sorted by name, shuffled, topped up (drawn with
// replacement until the next draw's gpu_milli would pass inflate x capacity) or thinned.
std::vector<const TracePod*> protocol_order(const std::vector<TracePod>& pods,
                                            int64_t capacity_milli, const ProtocolOptions& o);

Result<ProtocolResult> run_protocol(const std::vector<TraceNode>& nodes,
                                    const std::vector<TracePod>& pods, const ProtocolOptions& o);

// Mean allocated % over samples with arrived % in [x-0.5, x+0.5).
std::optional<double> figure_at(const std::vector<Sample>& samples, double x);

struct Stats {
  double mean = 0, std = 0;  // population std
  int n = 0;
};
Stats stats_of(const std::vector<double>& values);

// The published results of the FGD paper on openb (README of the data set): GPU allocated %
// at arrived 100% (six policies) and 130% (three), mean of 10 seeds. Published figures, not
// measured here.
struct PublishedRow {
  std::string_view trace;
  double random, dotprod, clustering, packing, bestfit, fgd;  // at 100%
  std::optional<double> random_130, bestfit_130, fgd_130;
};
const std::vector<PublishedRow>& published_openb();
const PublishedRow* published_for(std::string_view trace);  // by trace name, e.g. "default"

// ---- replay with departures ----

struct ReplayOptions {
  sched::PlacementPolicy policy = sched::PlacementPolicy::kDefault;
  uint64_t seed = 42;
  int max_scored_nodes = sched::PlaceOptions{}.max_scored_nodes;
  int timeline_points = 100;  // allocation-over-time samples in the result
};

struct TenantFigures {
  std::string tenant;
  int64_t pods = 0, placed = 0, never_placed = 0;
  int64_t demand_milli_s = 0;    // GPU milli x lifetime asked for
  int64_t received_milli_s = 0;  // GPU milli x time held
  double mean_wait_s = 0, max_wait_s = 0;
};

struct ReplayResult {
  std::string policy;
  int64_t pods = 0, placed = 0, placed_at_once = 0, never_placed = 0;
  int64_t start_time = 0, end_time = 0;
  double mean_wait_s = 0, p50_wait_s = 0, p95_wait_s = 0, max_wait_s = 0;  // placed pods
  double mean_alloc_pct = 0;  // time-weighted over the replay
  double peak_alloc_pct = 0;
  struct Point {
    int64_t time = 0;
    double allocated_pct = 0;
    int64_t pending = 0;
  };
  std::vector<Point> timeline;
  std::vector<TenantFigures> tenants;
  // Jain's index over tenants of received / demanded GPU time (1 = all served alike).
  double fairness = 1;
};

// Arrivals at creation_time, departures at deletion_time (a delayed pod keeps its lifetime);
// a pod that does not fit waits in a FIFO queue, retried whenever capacity is freed. Pods
// without both times are refused (invalid_argument).
Result<ReplayResult> run_replay(const std::vector<TraceNode>& nodes,
                                const std::vector<TracePod>& pods, const ReplayOptions& o);

}  // namespace gp::sim
