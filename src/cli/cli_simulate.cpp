// `gpuplane simulate`: replays a trace through the scheduler's own placement engine, offline
// (no server). Protocol mode follows the FGD paper (data/openb/README.md) over one or several
// seeds; replay mode runs arrivals and departures with a pending queue. Tables or JSON on
// stdout, progress on stderr when it is a terminal, an optional SVG of allocation vs arrival.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/client.h"
#include "render/render.h"
#include "sim/sim.h"

namespace gp::cli {
namespace {

struct SimulateOptions {
  std::string nodes, pods;
  uint64_t seed = 42;
  std::string seeds;  // "42-51"
  double inflate = 1.3;
  std::string policy = "default";
  std::string mode = "protocol";
  std::string output = "table";
  bool compare = false;
  bool live_mix = false;
  int max_scored = sched::PlaceOptions{}.max_scored_nodes;
  std::string svg;
};

Result<std::pair<uint64_t, uint64_t>> parse_seeds(const std::string& text) {
  const std::size_t dash = text.find('-');
  auto number = [&](const std::string& s) -> Result<uint64_t> {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) {
      return fail(Error::invalid(fmt::format("--seeds: \"{}\" is not a seed number", s)));
    }
    return std::stoull(s);
  };
  const uint64_t a = GP_TRY(number(text.substr(0, dash)));
  const uint64_t b = dash == std::string::npos ? a : GP_TRY(number(text.substr(dash + 1)));
  if (b < a || b - a >= 1000) {
    return fail(
        Error::invalid(fmt::format("--seeds {}: want FIRST-LAST, at most 1000 seeds", text)));
  }
  return std::pair(a, b);
}

// The trace's name from an openb pod file name, for the published figures only.
std::string trace_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  const std::string prefix = "openb_pod_list_";
  return stem.starts_with(prefix) ? stem.substr(prefix.size()) : stem;
}

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

struct PolicyRun {
  std::string policy;
  std::vector<sim::ProtocolResult> runs;
  std::vector<double> wall_s;
  double total_wall_s = 0;
};

Json summary(const PolicyRun& p) {
  std::vector<double> a, b, f, failed;
  Json runs = Json::array();
  for (std::size_t i = 0; i < p.runs.size(); ++i) {
    const sim::ProtocolResult& r = p.runs[i];
    if (r.alloc_pct_at_100) a.push_back(*r.alloc_pct_at_100);
    if (r.alloc_pct_at_130) b.push_back(*r.alloc_pct_at_130);
    if (r.frag_pct_at_100) f.push_back(*r.frag_pct_at_100);
    failed.push_back(static_cast<double>(r.failed_pods));
    runs.push_back({{"seed", r.seed},
                    {"alloc_pct_at_100", opt(r.alloc_pct_at_100)},
                    {"alloc_pct_at_130", opt(r.alloc_pct_at_130)},
                    {"frag_pct_at_100", opt(r.frag_pct_at_100)},
                    {"pods", r.pods},
                    {"failed_pods", r.failed_pods},
                    {"failed_gpu_milli", r.failed_gpu_milli},
                    {"original_arrived_pct", r.original_arrived_pct},
                    {"final_arrived_pct", r.final_arrived_pct},
                    {"final_allocated_pct", r.final_allocated_pct},
                    {"wall_s", p.wall_s[i]}});
  }
  auto stat = [](const std::vector<double>& v) -> std::pair<Json, Json> {
    if (v.empty()) return {nullptr, nullptr};
    const sim::Stats s = sim::stats_of(v);
    return {s.mean, s.std};
  };
  const auto [a_mean, a_std] = stat(a);
  const auto [b_mean, b_std] = stat(b);
  const auto [f_mean, f_std] = stat(f);
  const auto [failed_mean, failed_std] = stat(failed);
  return {{"policy", p.policy},         {"seeds", p.runs.size()},
          {"alloc_pct_at_100", a_mean}, {"alloc_pct_at_100_std", a_std},
          {"alloc_pct_at_130", b_mean}, {"alloc_pct_at_130_std", b_std},
          {"frag_pct_at_100", f_mean},  {"frag_pct_at_100_std", f_std},
          {"failed_pods", failed_mean}, {"failed_pods_std", failed_std},
          {"wall_s", p.total_wall_s},   {"runs", runs}};
}

std::string fixed(const Json& v) {
  return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-";
}

std::string svg_of(const std::vector<PolicyRun>& runs, double inflate) {
  render::LineChart chart{.title = "Allocation as demand grows",
                          .x_label = "arrived GPU % of capacity",
                          .y_label = "allocated GPU %",
                          .x_min = 0,
                          .x_max = inflate * 100,
                          .x_step = 20,
                          .x_tick = {},
                          .y_max = 100,
                          .lines = {}};
  for (const PolicyRun& run : runs) {
    const std::vector<sim::Sample>& curve = run.runs.front().curve;
    render::ChartLine line{fmt::format("{} (seed {})", run.policy, run.runs.front().seed), {}};
    const std::size_t step = std::max<std::size_t>(1, curve.size() / 800);
    for (std::size_t k = 0; k < curve.size(); k += step)
      line.points.emplace_back(curve[k].arrived_pct, curve[k].allocated_pct);
    chart.lines.push_back(std::move(line));
  }
  return render::line_chart_svg(chart);
}

int run_protocol_mode(const SimulateOptions& o, const std::vector<sim::TraceNode>& nodes,
                      const std::vector<sim::TracePod>& pods) {
  uint64_t first = o.seed, last = o.seed;
  if (!o.seeds.empty()) {
    auto range = parse_seeds(o.seeds);
    if (!range) {
      std::cerr << "error: " << range.error().message << "\n";
      return 2;
    }
    std::tie(first, last) = *range;
  }
  std::vector<std::string> names = {o.policy};
  if (o.compare) names = {"default", "best-fit", "random"};
  const bool progress = isatty(STDERR_FILENO) != 0;
  std::vector<PolicyRun> results;
  for (const std::string& name : names) {
    auto policy = sched::parse_policy(name);
    if (!policy) {
      std::cerr << "error: " << policy.error().message << "\n";
      return 2;
    }
    PolicyRun run{std::string(sched::policy_name(*policy)), {}, {}, 0};
    for (uint64_t seed = first; seed <= last; ++seed) {
      if (progress) {
        std::cerr << fmt::format("\rsimulating {} seed {} ({} of {})   ", run.policy, seed,
                                 seed - first + 1, last - first + 1)
                  << std::flush;
      }
      sim::ProtocolOptions po;
      po.seed = seed;
      po.inflate = o.inflate;
      po.policy = *policy;
      po.max_scored_nodes = o.max_scored;
      po.trace_mix = !o.live_mix;
      po.curve = !o.svg.empty() && seed == first;
      const auto start = std::chrono::steady_clock::now();
      auto r = sim::run_protocol(nodes, pods, po);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!r) {
        if (progress) std::cerr << "\n";
        std::cerr << "error: " << r.error().message << "\n";
        return 1;
      }
      run.runs.push_back(std::move(*r));
      run.wall_s.push_back(wall);
      run.total_wall_s += wall;
    }
    results.push_back(std::move(run));
  }
  if (progress) std::cerr << "\r" << std::string(60, ' ') << "\r" << std::flush;
  if (!o.svg.empty()) {
    std::ofstream out(o.svg, std::ios::trunc);
    out << svg_of(results, o.inflate);
    if (!out) {
      std::cerr << "error: cannot write " << o.svg << "\n";
      return 1;
    }
  }
  const std::string trace = trace_name(o.pods);
  const sim::PublishedRow* pub = sim::published_for(trace);
  Json policies = Json::array();
  for (const PolicyRun& r : results) policies.push_back(summary(r));
  Json published = nullptr;
  if (pub != nullptr) {
    published = {{"source", "FGD paper (USENIX ATC '23), openb README; not measured here"},
                 {"trace", trace},
                 {"alloc_pct_at_100",
                  {{"random", pub->random},
                   {"dotprod", pub->dotprod},
                   {"clustering", pub->clustering},
                   {"packing", pub->packing},
                   {"best-fit", pub->bestfit},
                   {"fgd", pub->fgd}}},
                 {"alloc_pct_at_130",
                  {{"random", opt(pub->random_130)},
                   {"best-fit", opt(pub->bestfit_130)},
                   {"fgd", opt(pub->fgd_130)}}}};
  }
  if (o.output == "json") {
    Json out = policies.size() == 1 ? policies[0] : Json{{"policies", policies}};
    out["mode"] = "protocol";
    out["inflate"] = o.inflate;
    out["published"] = published;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<10} {:>6} {:>16} {:>16} {:>16} {:>10} {:>8}\n", "POLICY", "SEEDS",
                           "ALLOC%@100", "ALLOC%@130", "FRAG%@100", "FAILED", "WALL_S");
  for (const Json& p : policies) {
    auto pair = [&](const char* key) {
      return fmt::format("{} ({})", fixed(p[key]), fixed(p[std::string(key) + "_std"]));
    };
    std::cout << fmt::format(
        "{:<10} {:>6} {:>16} {:>16} {:>16} {:>10} {:>8.1f}\n", p["policy"].get<std::string>(),
        p["seeds"].get<int>(), pair("alloc_pct_at_100"), pair("alloc_pct_at_130"),
        pair("frag_pct_at_100"), fixed(p["failed_pods"]), p["wall_s"].get<double>());
  }
  if (pub != nullptr) {
    std::cout << fmt::format(
        "\npublished ({} trace, FGD paper, mean of 10 seeds; not measured here):\n"
        "  at 100%: random {:.2f}  dotprod {:.2f}  clustering {:.2f}  packing {:.2f}  "
        "best-fit {:.2f}  FGD {:.2f}\n",
        trace, pub->random, pub->dotprod, pub->clustering, pub->packing, pub->bestfit, pub->fgd);
    if (pub->fgd_130) {
      std::cout << fmt::format("  at 130%: random {:.2f}  best-fit {:.2f}  FGD {:.2f}\n",
                               *pub->random_130, *pub->bestfit_130, *pub->fgd_130);
    }
  }
  return 0;
}

int run_replay_mode(const SimulateOptions& o, const std::vector<sim::TraceNode>& nodes,
                    const std::vector<sim::TracePod>& pods) {
  auto policy = sched::parse_policy(o.policy);
  if (!policy) {
    std::cerr << "error: " << policy.error().message << "\n";
    return 2;
  }
  sim::ReplayOptions ro;
  ro.policy = *policy;
  ro.seed = o.seed;
  ro.max_scored_nodes = o.max_scored;
  const auto start = std::chrono::steady_clock::now();
  auto r = sim::run_replay(nodes, pods, ro);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r) {
    std::cerr << "error: " << r.error().message << "\n";
    return 1;
  }
  Json timeline = Json::array();
  for (const auto& p : r->timeline) {
    timeline.push_back(
        {{"time", p.time}, {"allocated_pct", p.allocated_pct}, {"pending", p.pending}});
  }
  Json tenants = Json::array();
  for (const sim::TenantFigures& t : r->tenants) {
    tenants.push_back({{"tenant", t.tenant},
                       {"pods", t.pods},
                       {"placed", t.placed},
                       {"never_placed", t.never_placed},
                       {"demand_gpu_milli_s", t.demand_milli_s},
                       {"received_gpu_milli_s", t.received_milli_s},
                       {"mean_wait_s", t.mean_wait_s},
                       {"max_wait_s", t.max_wait_s}});
  }
  Json out = {{"mode", "replay"},
              {"policy", r->policy},
              {"pods", r->pods},
              {"placed", r->placed},
              {"placed_at_once", r->placed_at_once},
              {"never_placed", r->never_placed},
              {"start_time", r->start_time},
              {"end_time", r->end_time},
              {"mean_alloc_pct", r->mean_alloc_pct},
              {"peak_alloc_pct", r->peak_alloc_pct},
              {"wait_s",
               {{"mean", r->mean_wait_s},
                {"p50", r->p50_wait_s},
                {"p95", r->p95_wait_s},
                {"max", r->max_wait_s}}},
              {"fairness_jain", r->fairness},
              {"tenants", tenants},
              {"timeline", timeline},
              {"wall_s", wall}};
  if (o.output == "json") {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "policy {}: {} pods, {} placed ({} at once), {} never placed\n"
      "allocation: mean {:.2f}% (time-weighted), peak {:.2f}%\n"
      "queueing delay of placed pods: mean {:.0f}s, p50 {:.0f}s, p95 {:.0f}s, max {:.0f}s\n"
      "fairness (Jain's index of received / demanded GPU time over tenants): {:.3f}\n"
      "wall time {:.1f}s\n\n",
      r->policy, r->pods, r->placed, r->placed_at_once, r->never_placed, r->mean_alloc_pct,
      r->peak_alloc_pct, r->mean_wait_s, r->p50_wait_s, r->p95_wait_s, r->max_wait_s, r->fairness,
      wall);
  std::vector<Json> rows(tenants.begin(), tenants.end());
  print_table(rows, {"tenant", "pods", "placed", "never_placed", "mean_wait_s", "max_wait_s"});
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, int* rc) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand(
      "simulate", "Replay a GPU cluster trace through the placement engine (offline)");
  cmd->add_option("--nodes", o->nodes, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->required();
  cmd->add_option("--pods", o->pods, "Pod list CSV (openb format; see docs/simulate.md)")
      ->required();
  auto* seed = cmd->add_option("--seed", o->seed, "Seed of the shuffle and draws (default 42)");
  cmd->add_option("--seeds", o->seeds, "A seed range, e.g. 42-51: mean and std over the seeds")
      ->excludes(seed);
  cmd->add_option("--inflate", o->inflate, "Arrived GPU target as a multiple of capacity")
      ->check(CLI::Range(0.01, 100.0));
  cmd->add_option("--policy", o->policy, "default, best-fit or random");
  cmd->add_option("--mode", o->mode, "protocol (FGD paper) or replay (times, departures)")
      ->check(CLI::IsMember({"protocol", "replay"}));
  cmd->add_option("--output,-o", o->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_flag("--compare", o->compare, "Run default, best-fit and random (protocol mode)");
  cmd->add_flag("--live-mix", o->live_mix,
                "Default policy keeps room for the running pods' mix, not the whole trace's");
  cmd->add_option("--max-scored", o->max_scored, "Nodes scored per decision (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--svg", o->svg, "Write allocation % vs arrived % (first seed) to this SVG");
  cmd->callback([o, rc] {
    auto load_nodes = [&]() -> Result<std::vector<sim::TraceNode>> {
      const std::string text = GP_TRY(sim::load_text(o->nodes));
      return sim::parse_nodes(text, o->nodes);
    };
    auto load_pods = [&]() -> Result<std::vector<sim::TracePod>> {
      const std::string text = GP_TRY(sim::load_text(o->pods));
      return sim::parse_pods(text, o->pods);
    };
    auto nodes = load_nodes();
    if (!nodes) {
      std::cerr << "error: " << nodes.error().message << "\n";
      *rc = 1;
      return;
    }
    auto pods = load_pods();
    if (!pods) {
      std::cerr << "error: " << pods.error().message << "\n";
      *rc = 1;
      return;
    }
    if (o->mode == "replay") {
      if (o->compare || !o->seeds.empty()) {
        std::cerr << "error: --compare and --seeds apply to --mode protocol\n";
        *rc = 2;
        return;
      }
      *rc = run_replay_mode(*o, *nodes, *pods);
    } else {
      *rc = run_protocol_mode(*o, *nodes, *pods);
    }
  });
}

}  // namespace gp::cli
