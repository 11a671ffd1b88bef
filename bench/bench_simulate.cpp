// Trace-replay benchmark: every openb trace x seeds 42-51 through the FGD paper's protocol with
// our policies, printed beside the published figures (README of the data set). Prints the mean
// and population std of alloc_pct_at_100 / alloc_pct_at_130 per trace and policy, and the wall
// time of each 10-seed run.
//
//   bench_simulate [--data DIR] [--traces a,b,...] [--policies default,best-fit,random]
//                  [--seeds 42-51] [--max-scored N]
//   (DIR defaults to $GP_SOURCE_DIR/../shared/data/openb, else ../shared/data/openb)
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "sim/sim.h"

namespace {

using namespace gp;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t at = s.find(',', start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

std::string cell(const std::optional<double>& v) { return v ? fmt::format("{:.2f}", *v) : "-"; }

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  if (const char* src = std::getenv("GP_SOURCE_DIR"))
    dir = std::string(src) + "/../shared/data/openb";
  else
    dir = "../shared/data/openb";
  std::vector<std::string> traces;
  for (const sim::PublishedRow& row : sim::published_openb()) traces.emplace_back(row.trace);
  std::vector<std::string> policies = {"default", "best-fit", "random"};
  uint64_t first_seed = 42, last_seed = 51;
  int max_scored = sched::PlaceOptions{}.max_scored_nodes;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--data")
      dir = value;
    else if (flag == "--traces")
      traces = split(value);
    else if (flag == "--policies")
      policies = split(value);
    else if (flag == "--max-scored")
      max_scored = std::atoi(value.c_str());
    else if (flag == "--seeds") {
      const std::size_t dash = value.find('-');
      first_seed = std::stoull(value.substr(0, dash));
      last_seed = dash == std::string::npos ? first_seed : std::stoull(value.substr(dash + 1));
    } else {
      fmt::print(stderr, "unknown flag {}\n", flag);
      return 2;
    }
  }
  auto nodes_text = sim::load_text(dir + "/openb_node_list_gpu_node.csv");
  if (!nodes_text) {
    fmt::print(stderr, "error: {}\n", nodes_text.error().message);
    return 1;
  }
  auto nodes = sim::parse_nodes(*nodes_text, "openb_node_list_gpu_node.csv");
  if (!nodes) {
    fmt::print(stderr, "error: {}\n", nodes.error().message);
    return 1;
  }
  fmt::print(
      "openb, seeds {}-{}, mean (population std) of GPU allocated % at arrived 100% and "
      "130%; published figures from the data set's README\n\n",
      first_seed, last_seed);
  fmt::print("{:<11} {:<9} {:>14} {:>14} {:>9} {:>8} {:>8} | {:>7} {:>7} {:>7} | {:>7} {:>7}\n",
             "trace", "policy", "ours@100", "ours@130", "frag@100", "failed", "wall_s", "pubRand",
             "pubBF", "pubFGD", "FGD130", "vsFGD");
  bool all_beat = true;
  for (const std::string& trace : traces) {
    const std::string file = "openb_pod_list_" + trace + ".csv";
    auto text = sim::load_text(dir + "/" + file);
    if (!text) {
      fmt::print(stderr, "error: {}\n", text.error().message);
      return 1;
    }
    auto pods = sim::parse_pods(*text, file);
    if (!pods) {
      fmt::print(stderr, "error: {}\n", pods.error().message);
      return 1;
    }
    const sim::PublishedRow* pub = sim::published_for(trace);
    for (const std::string& name : policies) {
      auto policy = sched::parse_policy(name);
      if (!policy) {
        fmt::print(stderr, "error: {}\n", policy.error().message);
        return 2;
      }
      std::vector<double> at100, at130, frag, failed;
      const auto start = std::chrono::steady_clock::now();
      for (uint64_t seed = first_seed; seed <= last_seed; ++seed) {
        sim::ProtocolOptions o;
        o.seed = seed;
        o.policy = *policy;
        o.max_scored_nodes = max_scored;
        auto r = sim::run_protocol(*nodes, *pods, o);
        if (!r) {
          fmt::print(stderr, "error: {}: {}\n", trace, r.error().message);
          return 1;
        }
        if (r->alloc_pct_at_100) at100.push_back(*r->alloc_pct_at_100);
        if (r->alloc_pct_at_130) at130.push_back(*r->alloc_pct_at_130);
        if (r->frag_pct_at_100) frag.push_back(*r->frag_pct_at_100);
        failed.push_back(static_cast<double>(r->failed_pods));
        if (std::getenv("GP_SIM_DEBUG") != nullptr) {
          for (const auto& [shape, n] : r->failed_by_shape) fmt::print(" {}:{}", shape, n);
          fmt::print("\n");
        }
      }
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const sim::Stats a = sim::stats_of(at100), b = sim::stats_of(at130);
      const sim::Stats f = sim::stats_of(frag), fl = sim::stats_of(failed);
      std::string verdict = "-";
      if (name == "default" && pub != nullptr) {
        const bool beat100 = a.mean > pub->fgd;
        const bool beat130 = !pub->fgd_130 || b.mean > *pub->fgd_130;
        verdict = beat100 && beat130 ? "above" : "BELOW";
        all_beat = all_beat && beat100 && beat130;
      }
      fmt::print(
          "{:<11} {:<9} {:>7.2f} ({:.2f}) {:>7.2f} ({:.2f}) {:>9.2f} {:>8.0f} {:>8.1f} | {:>7} "
          "{:>7} {:>7} | {:>7} {:>7}\n",
          trace, name, a.mean, a.std, b.mean, b.std, f.mean, fl.mean, wall,
          pub ? fmt::format("{:.2f}", pub->random) : "-",
          pub ? fmt::format("{:.2f}", pub->bestfit) : "-",
          pub ? fmt::format("{:.2f}", pub->fgd) : "-", pub ? cell(pub->fgd_130) : "-", verdict);
      std::fflush(stdout);
    }
  }
  fmt::print("\ndefault policy above published FGD at 100% and 130% on every trace run: {}\n",
             all_beat ? "yes" : "NO");
  return 0;
}
