// Property test: random fleets, tenants, classes and request streams (seeded). After every
// step: the tier invariant, quota within limits (above nominal only as borrowed within the
// cohort's limits), no GPU or MIG slice double-booked, gang requests all-or-nothing; and the
// same seed gives the same decisions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "sched/test_fleet.h"

namespace gp::sched {
namespace {

using namespace gp::sched::testing;

const std::vector<std::string> kModels = {"H200", "H100", "A100-80GB"};

struct World {
  std::vector<NodeSpec> nodes;
  std::vector<std::string> tenants;
  std::map<std::string, IsolationClass> classes;
  QuotaTree quota;
};

World random_world(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  World w;
  const int tenant_count = pick(2, 5);
  for (int t = 0; t < tenant_count; ++t) {
    const std::string name = fmt::format("t{}", t);
    w.tenants.push_back(name);
    w.classes[name] = static_cast<IsolationClass>(pick(0, 3));
    if (pick(0, 2) > 0) w.quota.set_cohort(name, pick(0, 1) ? "c1" : "c2");
    for (const std::string& m : kModels) {
      if (pick(0, 4) == 0) continue;  // no quota for this model
      QuotaLimits l{.nominal = int64_t{pick(0, 40)} * 1750};
      if (pick(0, 2) == 0) l.borrow_limit = int64_t{pick(0, 24)} * 1750;
      if (pick(0, 3) == 0) l.limit = l.nominal + int64_t{pick(0, 24)} * 1750;
      w.quota.set_tenant(name, m, l);
      if (pick(0, 3) == 0) {
        w.quota.set_project(name, "p1", m, {.nominal = int64_t{pick(0, 24)} * 1750});
      }
      if (pick(0, 4) == 0) {
        w.quota.set_profile_cap(name, m, catalog_for(m)->profiles[5].name, pick(0, 4));
      }
    }
  }
  if (pick(0, 3) == 0) w.quota.set_platform("H200", int64_t{pick(0, 20)} * 3500);
  const int node_count = pick(1, 7);
  for (int n = 0; n < node_count; ++n) {
    NodeShape shape{.id = fmt::format("n{}", n),
                    .gpus = pick(1, 8),
                    .model = kModels[pick(0, 2)],
                    .rack = fmt::format("r{}", pick(0, 2)),
                    .nvlink = pick(0, 3) ? fmt::format("d{}", pick(0, 3)) : ""};
    if (pick(0, 4) == 0) {
      shape.pool_owner = w.tenants[pick(0, tenant_count - 1)];
      shape.pool = "pool-" + shape.pool_owner;
    }
    NodeSpec spec = make_node(shape);
    spec.schedulable = pick(0, 15) > 0;
    for (GpuSpec& g : spec.gpus) {
      const int mode = pick(0, 4);
      g.mode = mode == 0 ? GpuMode::kMig : mode == 1 ? GpuMode::kTimeSliced : GpuMode::kWhole;
      g.healthy = pick(0, 20) > 0;
      if (g.mode == GpuMode::kMig && pick(0, 1)) {  // an existing layout of free instances
        const vocab::MigCatalog& cat = *g.mig_catalog;
        for (int k = pick(0, 3); k > 0; --k) {
          auto next = vocab::plan_addition(cat, g.mig_layout, cat.profiles[pick(1, 5)].name);
          if (next) g.mig_layout = *next;
        }
      }
    }
    w.nodes.push_back(std::move(spec));
  }
  return w;
}

Request random_request(std::mt19937_64& rng, const World& w) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Request r;
  r.tenant = w.tenants[pick(0, static_cast<int>(w.tenants.size()) - 1)];
  r.project = pick(0, 1) ? "p1" : "p2";
  r.isolation = w.classes.at(r.tenant);
  // Mostly tiers the class allows; sometimes one it does not (must be rejected).
  const int weakest = static_cast<int>(weakest_tier(r.isolation));
  r.tier = static_cast<Tier>(pick(0, 9) == 0 ? pick(0, 4) : pick(0, weakest));
  if (pick(0, 2) == 0) r.models = {kModels[pick(0, 2)]};
  r.priority = pick(0, 3);
  r.preemptible = pick(0, 1);
  r.same_node = pick(0, 5) == 0;
  r.same_nvlink_domain = pick(0, 5) == 0;
  switch (r.tier) {
    case Tier::kDedicatedPool:
    case Tier::kDedicatedNode:
      r.node_count = pick(1, 2);
      r.gpus_per_node = pick(1, 8);
      r.same_node = false;
      break;
    case Tier::kDedicatedGpu:
      r.count = pick(1, 6);
      break;
    case Tier::kMig: {
      r.count = pick(1, 4);
      const std::string model = r.models.empty() ? kModels[pick(0, 2)] : r.models[0];
      r.mig_profile = catalog_for(model)->profiles[pick(0, 5)].name;
      break;
    }
    case Tier::kShared:
      r.count = pick(1, 3);
      r.milli = std::vector<int>{100, 250, 500, 1000, 333}[pick(0, 4)];
      break;
  }
  if (pick(0, 40) == 0) r.count = 0;  // bad input
  return r;
}

std::string describe(const Decision& d) {
  std::string out = fmt::format("{} {}", d.allocation_id, decision_kind_name(d.kind));
  if (d.placement) {
    out += fmt::format(" {} {} {} {}u borrowed {}u:", d.placement->tenant,
                       tier_name(d.placement->tier), d.placement->model, d.placement->units,
                       d.borrowed_units);
    for (const GpuGrant& g : d.placement->gpus) {
      out += " " + g.gpu_uuid;
      if (g.mig_instance)
        out += fmt::format("/{}@{}", g.mig_instance->profile, g.mig_instance->start);
      if (g.milli) out += fmt::format("/{}m", g.milli);
    }
  }
  for (const std::string& p : d.preempted) out += " -" + p;
  if (d.reason) out += " : " + d.reason->message;
  return out;
}

// Quota: recomputed from the live allocations, within every level's limits.
std::string quota_violation(const Scheduler& s, const World& w) {
  std::map<std::pair<std::string, std::string>, int64_t> tenant_used;
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> project_used;
  std::map<std::string, int64_t> platform;
  for (const Allocation& a : s.state().allocation_slots()) {
    if (!a.live) continue;
    const Placement& p = a.placement;
    tenant_used[{p.tenant, p.model}] += p.units;
    project_used[{p.tenant, p.project, p.model}] += p.units;
    platform[p.model] += p.units;
  }
  for (const std::string& t : w.tenants) {
    for (const std::string& m : kModels) {
      const QuotaTree::Usage u = s.quota().tenant_usage(t, m);
      const int64_t used = tenant_used[{t, m}];
      if (u.used != used)
        return fmt::format("{} {}: tree says {} used, allocations {}", t, m, u.used, used);
      if (u.limits.limit && used > *u.limits.limit) return fmt::format("{} {} over limit", t, m);
      if (used > u.limits.nominal) {
        if (s.quota().cohort_of(t).empty()) {
          return fmt::format("{} {} borrowed without cohort: used {} nominal {}", t, m, used,
                             u.limits.nominal);
        }
        if (u.limits.borrow_limit && used - u.limits.nominal > *u.limits.borrow_limit) {
          return fmt::format("{} {} over borrow limit", t, m);
        }
      }
      for (const std::string project : {"p1", "p2"}) {
        const QuotaTree::Usage pu = s.quota().project_usage(t, project, m);
        const int64_t pused = project_used[{t, project, m}];
        if (pu.configured && pused > pu.limits.nominal) {
          return fmt::format("{}/{} {} over project quota", t, project, m);
        }
      }
      const std::string profile = catalog_for(m)->profiles[5].name;
      if (auto cap = s.quota().profile_cap(t, m, profile);
          cap && s.quota().profile_used(t, m, profile) > *cap) {
        return fmt::format("{} {} over profile cap", t, m);
      }
    }
  }
  if (auto cap = s.quota().platform_limit("H200"); cap && platform["H200"] > *cap) {
    return "platform H200 over limit";
  }
  return "";
}

// The decision's shape matches the request exactly: every member or none.
std::string gang_violation(const ClusterState& state, const Request& r, const Decision& d) {
  if (d.kind != DecisionKind::kPlaced) return "";
  const Placement& p = *d.placement;
  const bool node_tier = r.tier == Tier::kDedicatedNode || r.tier == Tier::kDedicatedPool;
  const int expected = node_tier ? r.node_count * r.gpus_per_node : r.count;
  if (static_cast<int>(p.gpus.size()) != expected) {
    return fmt::format("{}: {} grants for {} requested", d.allocation_id, p.gpus.size(), expected);
  }
  std::set<int32_t> nodes, nvlinks;
  for (const GpuGrant& g : p.gpus) {
    const int32_t n = state.gpus()[g.gpu].node;
    nodes.insert(n);
    nvlinks.insert(state.nodes()[n].nvlink);
  }
  if (node_tier && static_cast<int>(p.node_slots.size()) != r.node_count) return "node count";
  if (r.same_node && nodes.size() != 1) return fmt::format("{}: same_node spread", d.allocation_id);
  if (r.same_nvlink_domain && nodes.size() > 1 && (nvlinks.size() != 1 || *nvlinks.begin() < 0)) {
    return fmt::format("{}: same_nvlink_domain spread", d.allocation_id);
  }
  if (!class_allows(r.isolation, p.tier)) return "tier not allowed for class";
  return "";
}

// Runs one seeded case; returns the decision trace, or fails the test.
std::string run_case(uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  World w = random_world(rng);
  Result<ClusterState> state = ClusterState::build(w.nodes);
  EXPECT_TRUE(state.has_value()) << state.error().message;
  if (!state) return "";
  Scheduler sched(std::move(*state), w.quota, {.fair_share_half_life = std::chrono::minutes(10)});
  std::string trace;
  std::vector<std::string> ids;
  TimePoint now = TimePoint(Duration(1'800'000'000'000'000));
  for (int step = 0; step < steps; ++step) {
    now += std::chrono::seconds(pick(0, 60));
    const int op = pick(0, 10);
    std::string what;
    if (op < 6) {
      const Request r = random_request(rng, w);
      const std::string id = fmt::format("a{}", step);
      // Borrowed amounts before, to check that only borrowed work of other tenants is taken.
      std::map<std::string, std::pair<std::string, int64_t>> borrowed_before;
      for (const Allocation& a : sched.state().allocation_slots()) {
        if (!a.live) continue;
        if (const Scheduler::Held* h = sched.held(a.id)) {
          borrowed_before[a.id] = {h->request.tenant, h->borrowed};
        }
      }
      const int64_t live_before = sched.state().live_allocations();
      const Decision d = sched.submit(id, r, now);
      what = describe(d);
      if (d.kind == DecisionKind::kPlaced) ids.push_back(id);
      if (d.kind != DecisionKind::kPlaced && sched.state().live_allocations() != live_before) {
        ADD_FAILURE() << "seed " << seed << ": state changed on " << what;
      }
      if (std::string v = gang_violation(sched.state(), r, d); !v.empty()) {
        ADD_FAILURE() << "seed " << seed << " step " << step << ": " << v;
      }
      for (const std::string& victim : d.preempted) {
        if (!borrowed_before.contains(victim)) {
          ADD_FAILURE() << "seed " << seed << ": preempted unknown " << victim;
          continue;
        }
        const auto& [tenant, borrowed] = borrowed_before.at(victim);
        if (tenant != r.tenant && borrowed == 0) {
          ADD_FAILURE() << "seed " << seed << ": " << what << ": took " << victim
                        << " of another tenant within its nominal";
        }
        if (tenant == r.tenant && borrowed == 0 && sched.held(victim) == nullptr) {
          // same tenant: only lower-priority preemptible work (checked by the scenario tests)
        }
      }
      // Allowed rejections: a malformed request, or one over a hard quota limit (which would
      // otherwise wait forever).
      const bool never_fits = d.reason && d.reason->code == ErrorCode::kQuotaExceeded &&
                              sched.never_fits(r).has_value();
      if (d.kind == DecisionKind::kRejected && class_allows(r.isolation, r.tier) && r.count > 0 &&
          d.reason->code != ErrorCode::kInvalidArgument && !never_fits) {
        ADD_FAILURE() << "seed " << seed << ": odd rejection " << what;
      }
      if (!class_allows(r.isolation, r.tier) && d.kind != DecisionKind::kRejected) {
        ADD_FAILURE() << "seed " << seed << ": class rule not enforced: " << what;
      }
    } else if (op < 9 && !ids.empty()) {
      const std::size_t i = static_cast<std::size_t>(pick(0, static_cast<int>(ids.size()) - 1));
      const bool was_live = sched.held(ids[i]) != nullptr;
      Result<void> r = sched.release(ids[i], now);
      if (was_live && !r) ADD_FAILURE() << "seed " << seed << ": release failed";
      what = fmt::format("release {}", ids[i]);
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 10) {
      const Request shape = random_request(rng, w);
      const TimePoint start = now + std::chrono::seconds(pick(0, 120));
      const Decision d = sched.reserve(fmt::format("r{}", step), shape, start,
                                       start + std::chrono::seconds(pick(1, 300)), now);
      what = "reserve " + describe(d);
      if (std::string v = gang_violation(sched.state(), shape, d); !v.empty()) {
        ADD_FAILURE() << "seed " << seed << " step " << step << ": " << v;
      }
    } else {
      for (const Decision& d : sched.schedule(now)) {
        what += describe(d) + "; ";
        if (!d.allocation_id.starts_with("reservation:")) ids.push_back(d.allocation_id);
      }
    }
    trace += what + "\n";
    if (std::string v = tier_invariant_violation(sched.state()); !v.empty()) {
      ADD_FAILURE() << "seed " << seed << " step " << step << " (" << what
                    << "): tier invariant: " << v;
      return trace;
    }
    if (std::string v = bookkeeping_violation(sched.state()); !v.empty()) {
      ADD_FAILURE() << "seed " << seed << " step " << step << " (" << what
                    << "): bookkeeping: " << v;
      return trace;
    }
    if (std::string v = quota_violation(sched, w); !v.empty()) {
      ADD_FAILURE() << "seed " << seed << " step " << step << " (" << what << "): quota: " << v;
      return trace;
    }
    if (::testing::Test::HasFailure()) return trace;
  }
  return trace;
}

// Fewer cases under the sanitizers (GP_INSTRUMENTED); the release build runs them all.
constexpr uint64_t kCases = GP_INSTRUMENTED ? 500 : 3000;

TEST(SchedProperty, InvariantsHoldOverRandomFleetsAndStreams) {
  int placed_lines = 0;
  for (uint64_t seed = 1; seed <= kCases; ++seed) {
    const std::string trace = run_case(seed, 60);
    if (::testing::Test::HasFailure()) break;
    placed_lines += static_cast<int>(std::count(trace.begin(), trace.end(), 'G') > 0);
  }
  EXPECT_GT(placed_lines, static_cast<int>(kCases / 3));  // the streams do place work
}

TEST(SchedProperty, SameSeedGivesSamePlacements) {
  for (uint64_t seed = 5001; seed <= 5000 + kCases / 15; ++seed) {
    const std::string first = run_case(seed, 80);
    const std::string second = run_case(seed, 80);
    ASSERT_EQ(first, second) << "seed " << seed;
  }
}

// Prints one case's decisions: SEED=n prop_test --gtest_also_run_disabled_tests
//   --gtest_filter=*Trace
TEST(SchedProperty, DISABLED_Trace) {
  const char* seed = std::getenv("SEED");
  std::cout << run_case(seed ? std::stoull(seed) : 1, 80);
}

}  // namespace
}  // namespace gp::sched
