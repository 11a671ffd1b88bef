// Specification of the scheduling core: tiers and classes, units, validation, placement under
// the tier rules, MIG and shared placement, topology, quota and the scheduler's queue and
// preemption.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "sched/test_fleet.h"

namespace gp::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using namespace gp::sched::testing;

const TimePoint kT0 = TimePoint(Duration(1'800'000'000'000'000));

std::set<std::string> nodes_of(const ClusterState& s, const Placement& p) {
  std::set<std::string> out;
  for (const GpuGrant& g : p.gpus) out.insert(g.node_id);
  (void)s;
  return out;
}

// The helpers' assertions are fatal in the helper only: a test calls them through
// ASSERT_PLACED and ASSERT_APPLIED, which end the test when they fail, so that no later line
// works on an empty placement or a missing allocation (and crashes the binary).
void place_ok(const ClusterState& s, const Request& r, Placement* out) {
  Result<Placement> p = place(s, r);
  ASSERT_TRUE(p.has_value()) << p.error().message;
  *out = std::move(*p);
}

void apply_ok(ClusterState& s, const Request& r, const std::string& id) {
  Placement p;
  ASSERT_NO_FATAL_FAILURE(place_ok(s, r, &p));
  Result<void> a = apply(s, p, id);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_EQ(tier_invariant_violation(s), "");
  ASSERT_EQ(bookkeeping_violation(s), "");
}

// Declares `var`, the placement of `request` in `state`; ends the test when there is none.
#define ASSERT_PLACED(var, state, request) \
  Placement var;                           \
  ASSERT_NO_FATAL_FAILURE(place_ok(state, request, &var))
// Places and applies `request` as allocation `id`; ends the test when it fails.
#define ASSERT_APPLIED(state, request, id) ASSERT_NO_FATAL_FAILURE(apply_ok(state, request, id))

// Runs `body` with its test failures captured into `failures` instead of reported.
void capture_failures(::testing::TestPartResultArray* failures, const std::function<void()>& body) {
  ::testing::ScopedFakeTestPartResultReporter reporter(
      ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, failures);
  body();
}

TEST(SchedTestHelpers, AFailedPlacementEndsTheTestBeforeAnythingUsesIt) {
  // Nothing fits 9 GPUs on an 8-GPU node: the test body must end at the assertion, before the
  // dereference of the allocation that was never made (which would crash the binary).
  bool went_on = false;
  ::testing::TestPartResultArray applied, placed;
  capture_failures(&applied, [&] {
    ClusterState s = make_state({{.id = "n1", .gpus = 8}});
    ASSERT_APPLIED(s, gpus("a", 9), "a1");
    went_on = true;
    (void)s.find("a1")->placement;
  });
  EXPECT_FALSE(went_on);
  ASSERT_GE(applied.size(), 1);
  EXPECT_TRUE(applied.GetTestPartResult(0).fatally_failed());
  EXPECT_THAT(applied.GetTestPartResult(0).message(), HasSubstr("fewer than 9 free"));

  capture_failures(&placed, [&] {
    ClusterState s = make_state({{.id = "n1", .gpus = 8}});
    ASSERT_PLACED(p, s, gpus("a", 9));
    went_on = true;
    (void)*p.gpus.begin();
  });
  EXPECT_FALSE(went_on);
  ASSERT_GE(placed.size(), 1);
  EXPECT_TRUE(placed.GetTestPartResult(0).fatally_failed());
}

// ---- tiers, classes, units ----

TEST(Tiers, NamesRoundTrip) {
  for (Tier t : {Tier::kDedicatedPool, Tier::kDedicatedNode, Tier::kDedicatedGpu, Tier::kMig,
                 Tier::kShared}) {
    EXPECT_EQ(parse_tier(tier_name(t)), t);
  }
  EXPECT_EQ(tier_name(Tier::kDedicatedPool), "dedicated-pool");
  EXPECT_EQ(parse_class("regulated"), IsolationClass::kRegulated);
  EXPECT_FALSE(parse_tier("dedicated"));
}

TEST(Classes, WeakestTierAllowedPerClass) {
  struct Case {
    IsolationClass c;
    Tier weakest;
  };
  for (auto [c, weakest] :
       {Case{IsolationClass::kInternal, Tier::kShared}, Case{IsolationClass::kStandard, Tier::kMig},
        Case{IsolationClass::kSensitive, Tier::kDedicatedGpu},
        Case{IsolationClass::kRegulated, Tier::kDedicatedNode}}) {
    EXPECT_EQ(weakest_tier(c), weakest);
    for (Tier t : {Tier::kDedicatedPool, Tier::kDedicatedNode, Tier::kDedicatedGpu, Tier::kMig,
                   Tier::kShared}) {
      EXPECT_EQ(class_allows(c, t), t <= weakest) << class_name(c) << " " << tier_name(t);
    }
  }
  EXPECT_FALSE(class_allows(IsolationClass::kStandard, Tier::kShared));
  EXPECT_FALSE(class_allows(IsolationClass::kRegulated, Tier::kDedicatedGpu));
  EXPECT_TRUE(class_allows(IsolationClass::kRegulated, Tier::kDedicatedPool));
}

TEST(Units, AreExactIntegers) {
  EXPECT_EQ(gpu_units(1), 7000);
  EXPECT_EQ(mig_units(1), 1000);
  EXPECT_EQ(mig_units(7), 7000);
  EXPECT_EQ(shared_units(250), 1750);
  EXPECT_EQ(shared_units(1000), gpu_units(1));
  EXPECT_EQ(gpu_resource_key("H200"), "gpu/H200");
  EXPECT_EQ(mig_resource_key("H200", "3g.71gb"), "mig/H200/3g.71gb");
  EXPECT_EQ(milli_resource_key("H200"), "gpu-milli/H200");
  EXPECT_EQ(format_units(14000), "2 GPU");
}

// ---- validation ----

TEST(Validate, RejectsImpossibleShapesAtOnce) {
  ClusterState s = make_state({{.id = "n1", .gpus = 8},
                               {.id = "n2", .gpus = 4, .model = "A100-80GB"},
                               {.id = "n3", .gpus = 8}});
  const FleetLimits& l = s.limits();
  auto rejects = [&](Request r, std::string_view text) {
    Result<void> v = validate(r, l);
    ASSERT_FALSE(v.has_value()) << text;
    EXPECT_EQ(v.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(v.error().message, HasSubstr(std::string(text)));
  };
  Request r = gpus("t", 1);
  r.models = {"B200"};
  rejects(r, "unknown GPU model \"B200\"");
  rejects(mig("t", "5g.99gb"), "no GPU model of the fleet has MIG profile \"5g.99gb\"");
  rejects(gpus("t", 0), "count must be at least 1");
  rejects(gpus("t", -3), "count must be at least 1");
  rejects(gpus("t", 2'000'000), "absurd");
  rejects(gpus("t", 17), "the fleet has 16 H200 GPU(s); 17 requested");
  Request same = gpus("t", 9);
  same.same_node = true;
  rejects(same, "same_node with 9 GPUs");
  rejects(gpus("t", 1, IsolationClass::kRegulated), "not allowed for isolation class regulated");
  Request sh = shared("t", 1001);
  rejects(sh, "milli must be 1..1000");
  Request n = nodes("t", 2, 8);
  n.same_node = true;
  rejects(n, "same_node contradicts node_count 2");
  rejects(nodes("t", 1, 9), "at most 8 GPUs");
  rejects(nodes("t", 0, 8), "node_count must be at least 1");
  EXPECT_TRUE(validate(gpus("t", 16), l).has_value());  // one model per request
  Request a100 = gpus("t", 5);
  a100.models = {"A100-80GB"};
  rejects(a100, "the fleet has 4 A100-80GB GPU(s); 5 requested");
  EXPECT_TRUE(validate(mig("t", "3g.40gb"), l).has_value());
}

TEST(Validate, NodeCountTimesGpusPerNodeIsBoundedWithoutOverflow) {
  ClusterState s = make_state({{.id = "n1", .gpus = 8}});
  const FleetLimits& l = s.limits();
  // 1000 x 1000 is exactly the bound: not absurd, refused for what the fleet has instead.
  Result<void> at = validate(nodes("t", 1000, 1000), l);
  ASSERT_FALSE(at);
  EXPECT_THAT(at.error().message, Not(HasSubstr("absurd")));
  EXPECT_THAT(at.error().message, HasSubstr("at most 8 GPUs; 1000 per node requested"));
  // One GPU more per node passes it.
  Result<void> over = validate(nodes("t", 1000, 1001), l);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(over.error().message,
              HasSubstr("node_count 1000 x gpus_per_node 1001 = 1001000 GPUs is absurd"));
  // Both factors at the bound: 10^12 overflows an int. The count the product wraps to must not
  // pass for the product.
  Request huge = nodes("t", 1'000'000, 1'000'000);
  huge.count = static_cast<int>(static_cast<uint32_t>(int64_t{1'000'000} * 1'000'000));
  Result<void> wrapped = validate(huge, l);
  ASSERT_FALSE(wrapped);
  EXPECT_THAT(wrapped.error().message, HasSubstr("= 1000000000000 GPUs is absurd"));
}

// ---- placement: tier rules ----

TEST(Place, DedicatedGpuGoesToTheFullestNodeThatFits) {
  ClusterState s = make_state({{.id = "big"}, {.id = "small", .gpus = 4}});
  ASSERT_APPLIED(s, gpus("a", 1), "a1");  // best fit: the 4-GPU node
  EXPECT_EQ(s.find("a1")->placement.gpus[0].node_id, "small");
  ASSERT_PLACED(p, s, gpus("b", 3));
  EXPECT_EQ(*nodes_of(s, p).begin(), "small");
  ASSERT_PLACED(q, s, gpus("b", 4));
  EXPECT_EQ(*nodes_of(s, q).begin(), "big");
}

TEST(Place, SameNodeFailureSaysWhatWasAsked) {
  ClusterState s = make_state({{.id = "n1", .gpus = 8}, {.id = "n2", .gpus = 8}});
  ASSERT_APPLIED(s, gpus("a", 8), "a1");
  ASSERT_APPLIED(s, gpus("a", 3), "a2");
  Request r = gpus("b", 8);
  r.same_node = true;
  Result<Placement> p = place(s, r);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kConflict);
  EXPECT_THAT(p.error().message, HasSubstr("no schedulable H200 node"));
  EXPECT_THAT(p.error().message, HasSubstr("with 8 free whole GPU(s)"));
}

// A refusal is stored as the tenant's pending reason and shown to it: it must read the same
// however much of the fleet other tenants use, or it would count their allocations.
TEST(Place, RefusalsReadTheSameWhateverOtherTenantsUse) {
  struct Case {
    const char* name;
    Request request;
  };
  Request same_node = gpus("b", 8);
  same_node.same_node = true;
  for (const Case& c : {Case{"same node", same_node}, Case{"spread", gpus("b", 12)},
                        Case{"mig", mig("b", "3g.71gb", 40)}, Case{"nodes", nodes("b", 2, 8)}}) {
    std::set<std::string> messages;
    for (int used : {3, 6}) {
      ClusterState s = make_state({{.id = "n1", .gpus = 8}, {.id = "n2", .gpus = 8}});
      ASSERT_APPLIED(s, gpus("a", 8), "a1");
      ASSERT_APPLIED(s, gpus("a", used), "a2");
      Result<Placement> p = place(s, c.request);
      ASSERT_FALSE(p) << c.name << " with " << used;
      messages.insert(p.error().message);
    }
    EXPECT_EQ(messages.size(), 1u) << c.name << ": " << ::testing::PrintToString(messages);
  }
}

TEST(Place, MultiGpuPrefersOneNvlinkDomainThenRack) {
  ClusterState s = make_state({{.id = "a", .gpus = 4, .rack = "r1", .nvlink = "x"},
                               {.id = "b", .gpus = 4, .rack = "r2", .nvlink = "y"},
                               {.id = "c", .gpus = 4, .rack = "r2", .nvlink = "x"}});
  ASSERT_PLACED(p, s, gpus("t", 6));
  EXPECT_THAT(nodes_of(s, p), ElementsAre("a", "c"));  // NVLink domain x
  ClusterState s2 = make_state({{.id = "a", .gpus = 4, .rack = "r1", .nvlink = "x"},
                                {.id = "b", .gpus = 4, .rack = "r2", .nvlink = "y"},
                                {.id = "c", .gpus = 4, .rack = "r2", .nvlink = "z"}});
  ASSERT_PLACED(q, s2, gpus("t", 6));
  EXPECT_THAT(nodes_of(s2, q), ElementsAre("b", "c"));  // rack r2
  Request r = gpus("t", 6);
  r.same_nvlink_domain = true;
  Result<Placement> none = place(s2, r);
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("no NVLink domain"));
  ASSERT_PLACED(one, s2, gpus("t", 4));
  EXPECT_EQ(nodes_of(s2, one).size(), 1u);  // one node before spreading
}

TEST(Place, DedicatedNodeNeverSharesANodeWithAnotherTenant) {
  ClusterState s = make_state({{.id = "n1", .gpus = 8}, {.id = "n2", .gpus = 8}});
  ASSERT_APPLIED(s, mig("a", "1g.18gb"), "a-mig");
  const std::string mig_node = s.find("a-mig")->placement.gpus[0].node_id;
  ASSERT_APPLIED(s, nodes("b", 1, 4), "b-node");
  const Placement held = s.find("b-node")->placement;  // a copy: apply may move slots
  ASSERT_EQ(held.nodes.size(), 1u);
  EXPECT_NE(held.nodes[0], mig_node);
  // The held node's other GPUs are out of reach for other tenants, of any tier.
  ASSERT_APPLIED(s, gpus("c", 7), "c1");
  EXPECT_EQ(*nodes_of(s, s.find("c1")->placement).begin(), mig_node);
  Result<Placement> more = place(s, gpus("c", 1));
  ASSERT_FALSE(more);
  // ... but not for its own tenant.
  Request b_gpu = gpus("b", 2);
  ASSERT_APPLIED(s, b_gpu, "b-gpu");
  EXPECT_EQ(*nodes_of(s, s.find("b-gpu")->placement).begin(), held.nodes[0]);
  ASSERT_TRUE(release(s, "b-node"));
  ASSERT_TRUE(release(s, "b-gpu"));
  ASSERT_APPLIED(s, gpus("c", 1), "c2");
}

TEST(Place, PoolNodesHostOnlyTheirOwner) {
  ClusterState s =
      make_state({{.id = "p1", .gpus = 8, .pool_owner = "acme", .pool = "acme-dedicated"},
                  {.id = "s1", .gpus = 2}});
  ASSERT_APPLIED(s, gpus("other", 2), "o1");
  Result<Placement> full = place(s, gpus("other", 1));
  ASSERT_FALSE(full);
  EXPECT_FALSE(place(s, mig("other", "1g.18gb")));
  Result<Placement> no_pool = place(s, nodes("other", 1, 8, Tier::kDedicatedPool));
  ASSERT_FALSE(no_pool);
  EXPECT_THAT(no_pool.error().message, HasSubstr("tenant other owns no node pool"));
  ASSERT_APPLIED(s, nodes("acme", 1, 8, Tier::kDedicatedPool), "acme1");
  EXPECT_THAT(s.find("acme1")->placement.nodes, ElementsAre("p1"));
  Result<Placement> again = place(s, nodes("acme", 1, 8, Tier::kDedicatedPool));
  ASSERT_FALSE(again);
  EXPECT_THAT(again.error().message, HasSubstr("tenant pool acme-dedicated"));
}

// A second guard of the dedicated-node rule, independent of the invariant checker the helpers
// run: with the rest of the fleet full, the only free GPUs lie on a node another tenant holds
// whole, and no request of any tier from anyone else may land there.
TEST(Place, AHeldNodeReceivesNoOtherTenantsAllocationOfAnyTier) {
  for (Tier held_tier : {Tier::kDedicatedNode, Tier::kDedicatedPool}) {
    SCOPED_TRACE(tier_name(held_tier));
    const bool pool = held_tier == Tier::kDedicatedPool;
    ClusterState s = make_state(
        {{.id = "held", .gpus = 8, .pool_owner = pool ? "owner" : "", .pool = pool ? "owned" : ""},
         {.id = "other", .gpus = 8}});
    Result<Placement> hold = place(s, nodes("owner", 1, 4, held_tier));
    ASSERT_TRUE(hold) << hold.error().message;
    ASSERT_EQ(hold->nodes.size(), 1u);
    const std::string held = hold->nodes[0];
    ASSERT_TRUE(apply(s, *hold, "owner-node"));
    Result<Placement> fill = place(s, gpus("filler", 8));
    ASSERT_TRUE(fill) << fill.error().message;
    ASSERT_TRUE(apply(s, *fill, "filler"));

    Request same_node = gpus("intruder", 2);
    same_node.same_node = true;
    Request node = nodes("intruder", 1, 2);
    for (const Request& r : {gpus("intruder", 1), same_node, mig("intruder", "1g.18gb"),
                             shared("intruder", 100), node}) {
      SCOPED_TRACE(tier_name(r.tier));
      Result<Placement> p = place(s, r);
      if (p) {
        for (const GpuGrant& g : p->gpus) EXPECT_NE(g.node_id, held);
        EXPECT_THAT(p->nodes, Not(::testing::Contains(held)));
      }
      EXPECT_FALSE(p) << "the only free GPUs are on the held node";
    }
    // The GPUs are free: the holder itself still gets them.
    Result<Placement> own = place(s, gpus("owner", 4));
    ASSERT_TRUE(own) << own.error().message;
    EXPECT_EQ(own->gpus[0].node_id, held);
  }
}

TEST(Place, DedicatedNodeTakesNoNodeWhereAnotherTenantRuns) {
  ClusterState s = make_state({{.id = "n1", .gpus = 8}, {.id = "n2", .gpus = 8}});
  Result<Placement> small = place(s, gpus("a", 1));
  ASSERT_TRUE(small) << small.error().message;
  const std::string busy = small->gpus[0].node_id;
  ASSERT_TRUE(apply(s, *small, "a1"));
  // Two whole nodes would need the one where tenant a runs.
  Result<Placement> both = place(s, nodes("b", 2, 1));
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error().code, ErrorCode::kConflict);
  Result<Placement> one = place(s, nodes("b", 1, 1));
  ASSERT_TRUE(one) << one.error().message;
  ASSERT_EQ(one->nodes.size(), 1u);
  EXPECT_NE(one->nodes[0], busy);
  for (const GpuGrant& g : one->gpus) EXPECT_NE(g.node_id, busy);
}

TEST(Place, MigUsesTheGeometryAndReportsTheLayoutChange) {
  ClusterState s = make_state({{.id = "n1", .gpus = 1, .mode = GpuMode::kMig}});
  ASSERT_PLACED(p, s, mig("a", "3g.71gb"));
  ASSERT_EQ(p.gpus.size(), 1u);
  ASSERT_EQ(p.mig_changes.size(), 1u);
  EXPECT_THAT(p.mig_changes[0].before, IsEmpty());
  // The same choice vocab::plan_addition makes on an empty H200.
  Result<vocab::Layout> expected = vocab::plan_addition(*catalog_for("H200"), {}, "3g.71gb");
  EXPECT_EQ(p.mig_changes[0].after, *expected);
  EXPECT_EQ(*p.gpus[0].mig_instance, expected->back());
  EXPECT_EQ(p.units, 3000);
  ASSERT_TRUE(apply(s, p, "a1"));
  // Another tenant takes a disjoint instance on the same GPU.
  ASSERT_APPLIED(s, mig("b", "3g.71gb"), "b1");
  EXPECT_FALSE(place(s, mig("c", "1g.18gb")));  // 3g + 3g take all 8 memory slices
  // A released instance stays in the layout and is reused without a change.
  ASSERT_TRUE(release(s, "a1"));
  ASSERT_PLACED(reuse, s, mig("d", "3g.71gb"));
  EXPECT_THAT(reuse.mig_changes, IsEmpty());
  EXPECT_EQ(tier_invariant_violation(s), "");
}

TEST(Place, MigGpusServeOnlyMigAndIdleWholeGpusConvert) {
  ClusterState s =
      make_state({{.id = "m", .gpus = 1, .mode = GpuMode::kMig}, {.id = "w", .gpus = 1}});
  ASSERT_APPLIED(s, mig("a", "1g.18gb"), "a1");
  EXPECT_EQ(s.find("a1")->placement.gpus[0].node_id, "m");
  // The busy MIG GPU never takes a whole-GPU or shared request.
  ASSERT_APPLIED(s, gpus("b", 1), "b1");
  EXPECT_EQ(s.find("b1")->placement.gpus[0].node_id, "w");
  EXPECT_FALSE(place(s, gpus("b", 1)));
  EXPECT_FALSE(place(s, shared("c", 100)));
  ASSERT_TRUE(release(s, "b1"));
  // An idle whole GPU converts to time-sliced, reported as a planned mode change.
  ASSERT_PLACED(p, s, shared("c", 100));
  ASSERT_EQ(p.mode_changes.size(), 1u);
  EXPECT_EQ(p.mode_changes[0].from, GpuMode::kWhole);
  EXPECT_EQ(p.mode_changes[0].to, GpuMode::kTimeSliced);
  ASSERT_TRUE(apply(s, p, "c1"));
  ASSERT_APPLIED(s, shared("d", 900), "d1");  // two tenants share the time-sliced GPU
  const int32_t ts_gpu = s.find("d1")->placement.gpus[0].gpu;
  EXPECT_THAT(s.tenants_on_gpu(ts_gpu), ElementsAre("c", "d"));
  EXPECT_FALSE(place(s, shared("e", 1)));
  EXPECT_FALSE(place(s, gpus("e", 1)));
}

TEST(Place, MigPrefersFullerGpusToKeepEmptyOnesFree) {
  ClusterState s = make_state({{.id = "n1", .gpus = 2, .mode = GpuMode::kMig}});
  ASSERT_APPLIED(s, mig("a", "1g.18gb"), "a1");
  const std::string first = s.find("a1")->placement.gpus[0].gpu_uuid;
  ASSERT_APPLIED(s, mig("b", "1g.18gb"), "b1");
  EXPECT_EQ(s.find("b1")->placement.gpus[0].gpu_uuid, first);
  ASSERT_APPLIED(s, mig("c", "7g.141gb"), "c1");  // the other GPU stayed whole-free for a 7g
}

TEST(Place, MultiInstanceMigStaysOnOneGpuAndSameNodeHolds) {
  ClusterState s = make_state({{.id = "n1", .gpus = 2, .mode = GpuMode::kMig},
                               {.id = "n2", .gpus = 2, .mode = GpuMode::kMig}});
  ASSERT_PLACED(p, s, mig("a", "2g.35gb", 3));
  std::set<std::string> gpus_used;
  for (const GpuGrant& g : p.gpus) gpus_used.insert(g.gpu_uuid);
  EXPECT_EQ(gpus_used.size(), 1u);
  Request r = mig("a", "3g.71gb", 4);
  r.same_node = true;
  ASSERT_PLACED(q, s, r);
  EXPECT_EQ(nodes_of(s, q).size(), 1u);
  EXPECT_EQ(q.gpus.size(), 4u);
}

TEST(Place, StalePlacementIsRefusedAndChangesNothing) {
  ClusterState s = make_state({{.id = "n1", .gpus = 1}});
  ASSERT_PLACED(p, s, gpus("a", 1));
  ASSERT_TRUE(apply(s, p, "a1"));
  Result<void> again = apply(s, p, "a2");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_EQ(s.live_allocations(), 1);
}

TEST(Place, GangIsAllOrNothing) {
  ClusterState s = make_state({{.id = "n1", .gpus = 2}});
  Request r = gpus("a", 3);
  r.gang = true;
  EXPECT_FALSE(place(s, r));
  Request m = mig("a", "3g.71gb", 5);
  Result<Placement> p = place(s, m);
  ASSERT_FALSE(p);
  EXPECT_THAT(p.error().message, HasSubstr("has room for 5 x 3g.71gb"));
  EXPECT_EQ(s.live_allocations(), 0);
  EXPECT_EQ(s.gpus()[0].mode, GpuMode::kWhole);
}

TEST(Place, UnhealthyAndUnschedulableCapacityIsSkipped) {
  ClusterState s = make_state({{.id = "n1", .gpus = 2}, {.id = "n2", .gpus = 2}});
  ASSERT_TRUE(s.set_node_schedulable("n1", false));
  ASSERT_TRUE(s.set_gpu_healthy("GPU-n2-0", false));
  ASSERT_PLACED(p, s, gpus("a", 1));
  EXPECT_EQ(p.gpus[0].gpu_uuid, "GPU-n2-1");
  ASSERT_TRUE(apply(s, p, "a1"));
  EXPECT_FALSE(place(s, gpus("a", 1)));
}

TEST(Place, AnIdleMigGpuSwitchesBackForAWholeGpuRequest) {
  ClusterState s = make_state({{.id = "n1", .gpus = 1, .mode = GpuMode::kMig}});
  ASSERT_APPLIED(s, mig("a", "1g.18gb"), "a1");
  EXPECT_FALSE(place(s, gpus("b", 1)));  // busy MIG GPU: never a whole-GPU grant
  ASSERT_TRUE(release(s, "a1"));
  ASSERT_PLACED(p, s, gpus("b", 1));
  ASSERT_EQ(p.mode_changes.size(), 1u);
  EXPECT_EQ(p.mode_changes[0].from, GpuMode::kMig);
  EXPECT_EQ(p.mode_changes[0].to, GpuMode::kWhole);
  ASSERT_TRUE(apply(s, p, "b1"));
  EXPECT_EQ(s.gpus()[0].mode, GpuMode::kWhole);
  EXPECT_THAT(s.mig_layout(0), IsEmpty());
}

TEST(Place, MigInstancesWithSameNvlinkDomainStayInOneDomain) {
  ClusterState s = make_state({{.id = "a", .gpus = 1, .nvlink = "x", .mode = GpuMode::kMig},
                               {.id = "b", .gpus = 1, .nvlink = "y", .mode = GpuMode::kMig},
                               {.id = "c", .gpus = 1, .nvlink = "x", .mode = GpuMode::kMig}});
  ASSERT_APPLIED(s, mig("z", "7g.141gb"), "z1");
  ASSERT_EQ(s.find("z1")->placement.gpus[0].node_id, "a");
  Request r = mig("t", "7g.141gb", 2);
  r.same_nvlink_domain = true;
  Result<Placement> none = place(s, r);  // x has one free GPU left, y has one
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("no NVLink domain in the fleet has room"));
  EXPECT_TRUE(place(s, mig("t", "7g.141gb", 2)));  // without the constraint: b and c
  ASSERT_TRUE(release(s, "z1"));
  ASSERT_PLACED(p, s, r);
  EXPECT_THAT(nodes_of(s, p), ElementsAre("a", "c"));
}

TEST(Place, MultiNodeRequestsPreferOneNvlinkDomain) {
  ClusterState s = make_state({{.id = "a", .gpus = 8, .nvlink = "x"},
                               {.id = "b", .gpus = 8, .nvlink = "y"},
                               {.id = "c", .gpus = 8, .nvlink = "x"}});
  ASSERT_PLACED(p, s, nodes("t", 2, 8));
  EXPECT_THAT(p.nodes, ElementsAre("a", "c"));
  EXPECT_EQ(p.gpus.size(), 16u);
  ASSERT_TRUE(apply(s, p, "t1"));
  Request again = nodes("u", 2, 8);
  again.same_nvlink_domain = true;
  Result<Placement> none = place(s, again);
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("no NVLink domain"));
}

TEST(Place, DedicatedPoolUsesOnlyTheNamedPoolOfItsOwner) {
  ClusterState s = make_state({{.id = "p1", .gpus = 4, .pool_owner = "acme", .pool = "acme-a"},
                               {.id = "p2", .gpus = 8, .pool_owner = "acme", .pool = "acme-b"},
                               {.id = "s1", .gpus = 8}});
  Request r = nodes("acme", 1, 4, Tier::kDedicatedPool);
  r.pool = "acme-b";
  ASSERT_PLACED(p, s, r);
  EXPECT_THAT(p.nodes, ElementsAre("p2"));
  ASSERT_PLACED(any, s, nodes("acme", 1, 4, Tier::kDedicatedPool));
  EXPECT_THAT(any.nodes, ElementsAre("p1"));  // best fit among the tenant's pools
  Request big = nodes("acme", 2, 8, Tier::kDedicatedPool);
  Result<Placement> none = place(s, big);
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("tenant pool acme-a, acme-b"));
}

// ---- quota ----

QuotaTree one_gpu_each(std::initializer_list<std::string> tenants, const std::string& cohort = "") {
  QuotaTree q;
  for (const std::string& t : tenants) {
    q.set_tenant(t, "H200", {.nominal = gpu_units(1)});
    if (!cohort.empty()) q.set_cohort(t, cohort);
  }
  return q;
}

TEST(Quota, ReachedWhileGpusAreFreeLeavesTheRequestPending) {
  Scheduler sched(make_state({{.id = "n1", .gpus = 8}}), one_gpu_each({"acme"}));
  Decision a = sched.submit("a1", gpus("acme", 1), kT0);
  ASSERT_EQ(a.kind, DecisionKind::kPlaced);
  Decision b = sched.submit("a2", gpus("acme", 1), kT0);
  ASSERT_EQ(b.kind, DecisionKind::kPending);
  EXPECT_EQ(b.reason->code, ErrorCode::kQuotaExceeded);
  EXPECT_THAT(b.reason->message, HasSubstr("tenant level"));
  EXPECT_THAT(b.reason->message, HasSubstr("H200"));
  EXPECT_THAT(b.reason->message, HasSubstr("used 1 GPU + requested 1 GPU; nominal 1 GPU"));
  ASSERT_EQ(sched.pending(kT0).size(), 1u);
  EXPECT_EQ(sched.pending(kT0)[0].reason.code, ErrorCode::kQuotaExceeded);
  ASSERT_TRUE(sched.release("a1", kT0));
  std::vector<Decision> placed = sched.schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].allocation_id, "a2");
}

// Work submitted again (a job placed anew after its node was lost) keeps its first place in
// the queue: ahead of what was submitted after it, behind what came before.
TEST(Quota, ResubmittedWorkKeepsItsPlaceInTheQueue) {
  Scheduler sched(make_state({{.id = "n1", .gpus = 8}}), one_gpu_each({"acme"}));
  ASSERT_EQ(sched.submit("running", gpus("acme", 1), kT0).kind, DecisionKind::kPlaced);
  const auto t = [](int s) { return kT0 + std::chrono::seconds(s); };
  ASSERT_EQ(sched.submit("early", gpus("acme", 1), t(1)).kind, DecisionKind::kPending);
  ASSERT_EQ(sched.submit("late", gpus("acme", 1), t(3)).kind, DecisionKind::kPending);
  ASSERT_EQ(sched.submit("again", gpus("acme", 1), t(9), t(2)).kind, DecisionKind::kPending);
  std::vector<std::string> order;
  for (const PendingView& v : sched.pending(t(9))) order.push_back(v.allocation_id);
  EXPECT_EQ(order, (std::vector<std::string>{"early", "again", "late"}));
  // A place "in the future" is now.
  ASSERT_EQ(sched.submit("odd", gpus("acme", 1), t(10), t(99)).kind, DecisionKind::kPending);
  EXPECT_EQ(sched.pending(t(10)).back().allocation_id, "odd");
}

TEST(Scheduler, CpuOnlyRequestsAreRefusedAndChargeNothing) {
  // place() hosts CPU-only requests (the trace simulator uses them), but the scheduler admits
  // through GPU quota, which has no unit for them: it refuses them at once and holds nothing.
  std::vector<NodeSpec> specs = {make_node({.id = "n1", .gpus = 2})};
  specs[0].cpu_milli = 16000;
  specs[0].memory_mib = 65536;
  Result<ClusterState> state = ClusterState::build(std::move(specs));
  ASSERT_TRUE(state) << state.error().message;
  Scheduler sched(std::move(*state), one_gpu_each({"acme"}));
  Request cpu = gpus("acme", 0);
  cpu.cpu_milli = 4000;
  cpu.memory_mib = 1024;
  ASSERT_TRUE(cpu.cpu_only());
  ASSERT_TRUE(place(sched.state(), cpu).has_value());
  Decision d = sched.submit("c1", cpu, kT0);
  EXPECT_NE(d.kind, DecisionKind::kPlaced);
  ASSERT_TRUE(d.reason.has_value());
  EXPECT_EQ(d.reason->code, ErrorCode::kInvalidArgument) << d.reason->message;
  EXPECT_EQ(sched.held("c1"), nullptr);
  EXPECT_EQ(sched.state().nodes()[0].cpu_used, 0);
  EXPECT_EQ(sched.state().live_allocations(), 0);
  // The tenant's GPU quota is untouched: its one GPU still places.
  EXPECT_EQ(sched.submit("g1", gpus("acme", 1), kT0).kind, DecisionKind::kPlaced);
}

TEST(Quota, ProjectLevelIsNamed) {
  QuotaTree q;
  q.set_tenant("acme", "H200", {.nominal = gpu_units(4)});
  q.set_project("acme", "train", "H200", {.nominal = mig_units(3)});
  QuotaCharge c{"acme", "train", "H200", mig_units(4), "4g.71gb", 1};
  Result<Admission> a = q.admit(c);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kQuotaExceeded);
  EXPECT_THAT(a.error().message, HasSubstr("project level: project acme/train on H200"));
  c.units = mig_units(3);
  EXPECT_TRUE(q.admit(c));
}

TEST(Quota, CohortLendsIdleNominalWithinLimits) {
  QuotaTree q = one_gpu_each({"a", "b", "c"}, "co");
  q.set_tenant("a", "H200",
               {.nominal = gpu_units(1), .borrow_limit = gpu_units(1), .limit = gpu_units(3)});
  QuotaCharge two{"a", "p", "H200", gpu_units(2)};
  Result<Admission> ok2 = q.admit(two);
  ASSERT_TRUE(ok2);
  EXPECT_EQ(ok2->borrowed, gpu_units(1));
  QuotaCharge three{"a", "p", "H200", gpu_units(3)};
  Result<Admission> no = q.admit(three);
  ASSERT_FALSE(no);
  EXPECT_THAT(no.error().message, HasSubstr("over its borrow limit"));
  q.charge(two);
  q.charge({"b", "p", "H200", gpu_units(1)});
  Result<Admission> dry = q.admit({"c", "p", "H200", gpu_units(2)});
  ASSERT_FALSE(dry);
  EXPECT_THAT(dry.error().message, HasSubstr("cohort co has no idle quota to lend"));
  QuotaTree alone = one_gpu_each({"x"});
  EXPECT_FALSE(alone.admit({"x", "p", "H200", gpu_units(2)}));
}

TEST(Quota, PerProfileCapAndUnconfiguredTenant) {
  QuotaTree q;
  q.set_tenant("a", "H200", {.nominal = gpu_units(2)});
  q.set_profile_cap("a", "H200", "1g.18gb", 2);
  QuotaCharge one{"a", "p", "H200", mig_units(1), "1g.18gb", 1};
  q.charge(one);
  q.charge(one);
  Result<Admission> third = q.admit(one);
  ASSERT_FALSE(third);
  EXPECT_THAT(third.error().message, HasSubstr("may hold 2 instance(s) of 1g.18gb"));
  Result<Admission> none = q.admit({"nobody", "p", "H200", 1});
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("tenant nobody has no quota for H200"));
}

// A charge over a hard limit never fits, whatever is held; one within every limit may, later.
TEST(Quota, OverAHardLimitIsNamedAsNeverFitting) {
  QuotaTree q;
  q.set_platform("H200", gpu_units(16));
  q.set_tenant("a", "H200", {.nominal = gpu_units(2), .limit = gpu_units(4)});
  q.set_project("a", "p", "H200", {.nominal = gpu_units(1), .limit = gpu_units(3)});
  q.set_profile_cap("a", "H200", "1g.18gb", 2);
  q.charge({"a", "p", "H200", gpu_units(3)});
  EXPECT_FALSE(q.over_hard_limit({"a", "p", "H200", gpu_units(3)})) << "fits once 3 are freed";
  EXPECT_FALSE(q.over_hard_limit({"a", "q", "H200", gpu_units(4)}));
  auto over = [&](const QuotaCharge& c) {
    std::optional<Error> e = q.over_hard_limit(c);
    if (!e) {
      ADD_FAILURE() << "no hard limit named for " << c.tenant << "/" << c.project;
      return std::string();
    }
    EXPECT_EQ(e->code, ErrorCode::kQuotaExceeded);
    return e->message;
  };
  EXPECT_THAT(over({"a", "p", "H200", gpu_units(4)}), HasSubstr("project level"));
  EXPECT_THAT(over({"a", "q", "H200", gpu_units(5)}), HasSubstr("tenant level"));
  EXPECT_THAT(over({"a", "q", "H200", gpu_units(5)}), HasSubstr("limit of 4"));
  EXPECT_THAT(over({"b", "q", "H200", gpu_units(17)}), HasSubstr("platform level"));
  EXPECT_THAT(over({"a", "q", "H200", mig_units(3), "1g.18gb", 3}), HasSubstr("may hold 2"));
}

// ---- quota: the exact boundary, in mixed units ----

// Units are exact: 7000 per GPU, 1000 per MIG compute slice, 7 per milli of a share, so a
// 6-slice charge plus a 143-milli share lands exactly one unit above a 1-GPU limit. Every limit
// admits use that reaches it exactly and refuses one unit more.
struct QuotaBoundaryLevel {
  std::string name;
  std::string refusal;                         // what the refusal says
  std::function<QuotaTree(int64_t limit)> at;  // a tree whose binding limit sits at `limit`
};

struct QuotaBoundaryMix {
  std::string name;
  int64_t limit;
  std::vector<int64_t> used;  // charged first
  int64_t request;
};

std::vector<QuotaBoundaryLevel> quota_boundary_levels() {
  constexpr int64_t plenty = gpu_units(100);
  auto lender = [](QuotaTree& q, int64_t nominal = -1) {
    q.set_tenant("lender", "H200", {.nominal = nominal < 0 ? plenty : nominal});
    q.set_cohort("lender", "co");
    q.set_cohort("t", "co");
  };
  return {
      {"platform limit", "platform level",
       [](int64_t l) {
         QuotaTree q;
         q.set_platform("H200", l);
         q.set_tenant("t", "H200", {.nominal = plenty});
         return q;
       }},
      {"tenant nominal", "over its nominal",
       [](int64_t l) {
         QuotaTree q;
         q.set_tenant("t", "H200", {.nominal = l});
         return q;
       }},
      {"tenant hard limit", "over its limit",
       [lender](int64_t l) {
         QuotaTree q;
         q.set_tenant("t", "H200", {.nominal = 0, .limit = l});
         lender(q);
         return q;
       }},
      {"tenant borrow limit", "over its borrow limit",
       [lender](int64_t l) {
         QuotaTree q;
         q.set_tenant("t", "H200", {.nominal = 0, .borrow_limit = l});
         lender(q);
         return q;
       }},
      {"cohort's idle quota", "no idle quota to lend",
       [lender](int64_t l) {
         QuotaTree q;
         q.set_tenant("t", "H200", {.nominal = 0});
         lender(q, l);
         return q;
       }},
      {"project hard limit", "project level",
       [](int64_t l) {
         QuotaTree q;
         q.set_tenant("t", "H200", {.nominal = plenty});
         q.set_project("t", "p", "H200", {.nominal = 0, .limit = l});
         return q;
       }},
      {"project nominal", "project level",
       [](int64_t l) {
         QuotaTree q;
         q.set_tenant("t", "H200", {.nominal = plenty});
         q.set_project("t", "p", "H200", {.nominal = l});
         return q;
       }},
      {"project nominal + borrow limit", "project level",
       [](int64_t l) {
         QuotaTree q;
         q.set_tenant("t", "H200", {.nominal = plenty});
         q.set_project("t", "p", "H200",
                       {.nominal = l - mig_units(3), .borrow_limit = mig_units(3)});
         return q;
       }},
  };
}

TEST(Quota, EveryLimitAdmitsUseExactlyAtItAndRefusesOneUnitMore) {
  const std::vector<QuotaBoundaryMix> at = {
      {"6 MIG slices + 1 MIG slice = 1 GPU", gpu_units(1), {mig_units(6)}, mig_units(1)},
      {"1 GPU + a 1000-milli share = 2 GPUs", gpu_units(2), {gpu_units(1)}, shared_units(1000)},
      {"143 milli + 7 slices + 857 milli = 2 GPUs",
       gpu_units(2),
       {shared_units(143), mig_units(6), mig_units(1)},
       shared_units(857)},
  };
  const std::vector<QuotaBoundaryMix> over = {
      {"6 MIG slices + a 143-milli share = 1 GPU + 1 unit",
       gpu_units(1),
       {mig_units(6)},
       shared_units(143)},
      {"143 milli + 6 slices + 1 GPU = 2 GPUs + 1 unit",
       gpu_units(2),
       {shared_units(143), mig_units(6)},
       gpu_units(1)},
      {"1 GPU + 6 slices + 143 milli = 2 GPUs + 1 unit",
       gpu_units(2),
       {gpu_units(1), mig_units(6)},
       shared_units(143)},
  };
  for (const auto& mix : over) {
    int64_t total = mix.request;
    for (int64_t u : mix.used) total += u;
    ASSERT_EQ(total, mix.limit + 1) << mix.name;
  }
  for (const auto& mix : at) {
    int64_t total = mix.request;
    for (int64_t u : mix.used) total += u;
    ASSERT_EQ(total, mix.limit) << mix.name;
  }
  for (const QuotaBoundaryLevel& level : quota_boundary_levels()) {
    for (const auto& mix : at) {
      SCOPED_TRACE(level.name + ": " + mix.name);
      QuotaTree q = level.at(mix.limit);
      for (int64_t u : mix.used) q.charge({"t", "p", "H200", u});
      Result<Admission> a = q.admit({"t", "p", "H200", mix.request});
      EXPECT_TRUE(a) << a.error().message;
    }
    for (const auto& mix : over) {
      SCOPED_TRACE(level.name + ": " + mix.name);
      QuotaTree q = level.at(mix.limit);
      for (int64_t u : mix.used) q.charge({"t", "p", "H200", u});
      Result<Admission> a = q.admit({"t", "p", "H200", mix.request});
      ASSERT_FALSE(a) << "admitted one unit over the " << level.name;
      EXPECT_EQ(a.error().code, ErrorCode::kQuotaExceeded);
      EXPECT_THAT(a.error().message, HasSubstr(level.refusal));
    }
  }
}

TEST(Quota, TheSchedulerChargesMigAndSharedUnitsExactly) {
  // Nominal 1 GPU. Two 3g instances take 6 slices; a 143-milli share would make 7001 units and
  // waits; a 1g instance makes exactly 7000 and is placed.
  QuotaTree q;
  q.set_tenant("t", "H200", {.nominal = gpu_units(1)});
  Scheduler sched(
      make_state({{.id = "m", .gpus = 2, .mode = GpuMode::kMig}, {.id = "w", .gpus = 1}}), q);
  Decision six = sched.submit("six", mig("t", "3g.71gb", 2), kT0);
  ASSERT_EQ(six.kind, DecisionKind::kPlaced) << six.reason->message;
  EXPECT_EQ(sched.quota().tenant_usage("t", "H200").used, mig_units(6));
  Decision share = sched.submit("share", shared("t", 143), kT0);
  ASSERT_EQ(share.kind, DecisionKind::kPending);
  EXPECT_EQ(share.reason->code, ErrorCode::kQuotaExceeded) << share.reason->message;
  Decision slice = sched.submit("slice", mig("t", "1g.18gb"), kT0);
  ASSERT_EQ(slice.kind, DecisionKind::kPlaced) << slice.reason->message;
  EXPECT_EQ(sched.quota().tenant_usage("t", "H200").used, gpu_units(1));
}

// ---- what a refusal tells the tenant: its own figures, nobody else's ----

TEST(Quota, PlatformAndCohortRefusalsCarryNoOtherTenantsUse) {
  QuotaTree platform;
  platform.set_platform("H200", gpu_units(2));
  platform.set_tenant("t", "H200", {.nominal = gpu_units(8)});
  platform.set_tenant("other", "H200", {.nominal = gpu_units(8)});
  platform.charge({"other", "p", "H200", gpu_units(1) + mig_units(3)});
  Result<Admission> p = platform.admit({"t", "p", "H200", gpu_units(1)});
  ASSERT_FALSE(p);
  EXPECT_THAT(p.error().message, HasSubstr("platform level"));
  EXPECT_THAT(p.error().message, HasSubstr("limit of 2 GPU"));
  EXPECT_THAT(p.error().message, Not(HasSubstr("used")));       // every tenant's use
  EXPECT_THAT(p.error().message, Not(HasSubstr("1.429 GPU")));  // the other tenant's 10000 units

  QuotaTree cohort = one_gpu_each({"t", "other"}, "co");
  cohort.charge({"other", "p", "H200", gpu_units(1) + mig_units(3)});
  Result<Admission> c = cohort.admit({"t", "p", "H200", gpu_units(1) + mig_units(1)});
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr("cohort co has no idle quota to lend"));
  EXPECT_THAT(c.error().message, Not(HasSubstr("cohort used")));
  EXPECT_THAT(c.error().message, Not(HasSubstr("1.429 GPU")));
  // The tenant's own figures stay: they are its to read.
  EXPECT_THAT(c.error().message, HasSubstr("used 0 GPU + requested 1.143 GPU; nominal 1 GPU"));
}

TEST(Scheduler, WaitingReasonsNameNoOtherTenantsReservationOrAllocation) {
  QuotaTree q;
  for (const char* t : {"a", "b"}) q.set_tenant(t, "H200", {.nominal = gpu_units(8)});
  Scheduler sched(make_state({{.id = "n1", .gpus = 3}}), q);
  const TimePoint start = kT0 + std::chrono::hours(1), end = kT0 + std::chrono::hours(2);
  ASSERT_EQ(sched.reserve("res-of-a", gpus("a", 2), start, end, kT0).kind, DecisionKind::kPending);
  Decision b = sched.submit("b0", gpus("b", 2), kT0);
  ASSERT_EQ(b.kind, DecisionKind::kPending);
  EXPECT_THAT(b.reason->message, HasSubstr("reserved for another tenant's reservation"));
  EXPECT_THAT(b.reason->message, Not(HasSubstr("res-of-a")));
  EXPECT_THAT(b.reason->message, Not(HasSubstr("tenant a")));
  ASSERT_TRUE(sched.release("b0", kT0));
  // The reservation's own tenant is told which of its reservations holds the room.
  Decision a = sched.submit("a0", gpus("a", 2), kT0);
  ASSERT_EQ(a.kind, DecisionKind::kPending);
  EXPECT_THAT(a.reason->message, HasSubstr("this tenant's reservation res-of-a"));
  ASSERT_TRUE(sched.release("a0", kT0));

  // Backfill behind another tenant's blocked head: the head stays unnamed.
  Scheduler s2(make_state({{.id = "n1", .gpus = 4}}), q);
  Request running = gpus("a", 2);
  running.end = kT0 + std::chrono::hours(1);
  ASSERT_EQ(s2.submit("r", running, kT0).kind, DecisionKind::kPlaced);
  ASSERT_EQ(s2.submit("forever", gpus("a", 1), kT0).kind, DecisionKind::kPlaced);
  Request head = gpus("a", 3);
  head.priority = 5;  // first in the queue, whatever the fair share says
  ASSERT_EQ(s2.submit("head-of-a", head, kT0).kind, DecisionKind::kPending);
  s2.restore_pending("long-of-b", gpus("b", 1), kT0, Error::conflict("queued"));
  s2.restore_pending("long-of-a", gpus("a", 1), kT0, Error::conflict("queued"));
  (void)s2.schedule(kT0);
  for (const PendingView& v : s2.pending(kT0)) {
    if (v.allocation_id == "long-of-b") {
      EXPECT_THAT(v.reason.message, HasSubstr("waiting behind an earlier request of the queue"));
      EXPECT_THAT(v.reason.message, Not(HasSubstr("head-of-a")));
    }
    if (v.allocation_id == "long-of-a") {
      EXPECT_THAT(v.reason.message, HasSubstr("waiting behind head-of-a"));
    }
  }
}

// ---- scheduler: preemption and queue ----

TEST(Scheduler, LenderReclaimsBorrowedCapacityNewestLowestPriorityFirst) {
  Scheduler sched(make_state({{.id = "n1", .gpus = 3}}),
                  one_gpu_each({"lender", "borrower"}, "co"));
  QuotaTree& q = sched.quota();
  q.set_tenant("borrower", "H200", {.nominal = gpu_units(1)});
  q.set_tenant("lender", "H200", {.nominal = gpu_units(2)});
  ASSERT_EQ(sched.submit("b1", gpus("borrower", 1), kT0).kind, DecisionKind::kPlaced);
  Decision b2 = sched.submit("b2", gpus("borrower", 1), kT0 + Duration(1));
  ASSERT_EQ(b2.kind, DecisionKind::kPlaced);
  EXPECT_EQ(b2.borrowed_units, gpu_units(1));
  Decision b3 = sched.submit("b3", gpus("borrower", 1), kT0 + Duration(2));
  ASSERT_EQ(b3.kind, DecisionKind::kPlaced);
  Decision l1 = sched.submit("l1", gpus("lender", 1), kT0 + Duration(3));
  ASSERT_EQ(l1.kind, DecisionKind::kPlaced) << l1.reason->message;
  EXPECT_THAT(l1.preempted, ElementsAre("b3"));  // newest borrowed first
  Decision l2 = sched.submit("l2", gpus("lender", 1), kT0 + Duration(4));
  ASSERT_EQ(l2.kind, DecisionKind::kPlaced);
  EXPECT_THAT(l2.preempted, ElementsAre("b2"));
  EXPECT_NE(sched.held("b1"), nullptr);  // within its owner's nominal: never taken
  Decision l3 = sched.submit("l3", gpus("lender", 1), kT0 + Duration(5));
  EXPECT_EQ(l3.kind, DecisionKind::kPending);
  EXPECT_NE(sched.held("b1"), nullptr);
}

TEST(Scheduler, AnotherTenantNeverPreemptsWorkWithinNominal) {
  QuotaTree q = one_gpu_each({"a", "b"});
  Scheduler sched(make_state({{.id = "n1", .gpus = 1}}), q);
  Request low = gpus("a", 1);
  low.preemptible = true;
  ASSERT_EQ(sched.submit("a1", low, kT0).kind, DecisionKind::kPlaced);
  Request high = gpus("b", 1);
  high.priority = 100;
  Decision d = sched.submit("b1", high, kT0);
  EXPECT_EQ(d.kind, DecisionKind::kPending);
  EXPECT_THAT(d.preempted, IsEmpty());
  EXPECT_NE(sched.held("a1"), nullptr);
}

TEST(Scheduler, HigherPriorityPreemptsLowerPreemptibleWorkOfTheSameTenant) {
  QuotaTree q;
  q.set_tenant("a", "H200", {.nominal = gpu_units(2)});
  Scheduler sched(make_state({{.id = "n1", .gpus = 2}}), q);
  Request keep = gpus("a", 1);
  keep.priority = 1;  // not preemptible
  Request low = gpus("a", 1);
  low.preemptible = true;
  ASSERT_EQ(sched.submit("keep", keep, kT0).kind, DecisionKind::kPlaced);
  ASSERT_EQ(sched.submit("low", low, kT0).kind, DecisionKind::kPlaced);
  Request high = gpus("a", 1);
  high.priority = 10;
  Decision d = sched.submit("high", high, kT0);
  ASSERT_EQ(d.kind, DecisionKind::kPlaced);
  EXPECT_THAT(d.preempted, ElementsAre("low"));
  EXPECT_NE(sched.held("keep"), nullptr);
  Request higher = gpus("a", 1);
  higher.priority = 20;
  EXPECT_EQ(sched.submit("higher", higher, kT0).kind, DecisionKind::kPending);
}

TEST(Scheduler, QueueOrdersByPriorityThenFairShareThenSubmission) {
  QuotaTree q;
  for (const char* t : {"heavy", "light"}) q.set_tenant(t, "H200", {.nominal = gpu_units(8)});
  Scheduler sched(make_state({{.id = "n1", .gpus = 4}}), q,
                  {.fair_share_half_life = std::chrono::hours(1)});
  ASSERT_EQ(sched.submit("h1", gpus("heavy", 3), kT0).kind, DecisionKind::kPlaced);
  ASSERT_EQ(sched.submit("l0", gpus("light", 1), kT0).kind, DecisionKind::kPlaced);
  const TimePoint t1 = kT0 + std::chrono::minutes(30);
  ASSERT_EQ(sched.submit("h2", gpus("heavy", 1), t1).kind, DecisionKind::kPending);
  ASSERT_EQ(sched.submit("l1", gpus("light", 1), t1 + Duration(1)).kind, DecisionKind::kPending);
  Request urgent = gpus("heavy", 1);
  urgent.priority = 5;
  ASSERT_EQ(sched.submit("h3", urgent, t1 + Duration(2)).kind, DecisionKind::kPending);
  EXPECT_GT(sched.fair_share_usage("heavy", t1), sched.fair_share_usage("light", t1));
  std::vector<PendingView> order = sched.pending(t1);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].allocation_id, "h3");
  EXPECT_EQ(order[1].allocation_id, "l1");  // lighter past usage goes first
  EXPECT_EQ(order[2].allocation_id, "h2");
  ASSERT_TRUE(sched.release("l0", t1));
  std::vector<Decision> placed = sched.schedule(t1);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].allocation_id, "h3");
}

TEST(Scheduler, RejectsPoolRequestsOfTenantsWithoutThatPool) {
  Scheduler sched(make_state({{.id = "p1", .gpus = 8, .pool_owner = "acme", .pool = "acme-a"},
                              {.id = "n1", .gpus = 8}}),
                  one_gpu_each({"acme", "other"}));
  sched.quota().set_tenant("acme", "H200", {.nominal = gpu_units(8)});
  Decision d = sched.submit("o1", nodes("other", 1, 8, Tier::kDedicatedPool), kT0);
  EXPECT_EQ(d.kind, DecisionKind::kRejected);
  EXPECT_THAT(d.reason->message, HasSubstr("tenant other owns no node pool"));
  Request wrong = nodes("acme", 1, 8, Tier::kDedicatedPool);
  wrong.pool = "acme-z";
  EXPECT_EQ(sched.submit("a0", wrong, kT0).kind, DecisionKind::kRejected);
  Decision ok = sched.submit("a1", nodes("acme", 1, 8, Tier::kDedicatedPool), kT0);
  ASSERT_EQ(ok.kind, DecisionKind::kPlaced);
  EXPECT_THAT(ok.placement->nodes, ElementsAre("p1"));
}

TEST(Scheduler, ReservationHoldsCapacityForItsTenantDuringTheWindow) {
  QuotaTree q;
  for (const char* t : {"a", "b"}) q.set_tenant(t, "H200", {.nominal = gpu_units(4)});
  Scheduler sched(make_state({{.id = "n1", .gpus = 3}}), q);
  const TimePoint start = kT0 + std::chrono::hours(1), end = kT0 + std::chrono::hours(2);
  Decision r = sched.reserve("r1", gpus("a", 2), start, end, kT0);
  ASSERT_EQ(r.kind, DecisionKind::kPending);
  EXPECT_THAT(r.reason->message, HasSubstr("window starts in 3600 s"));
  // Before the window the capacity is free only for work that ends before it...
  Request until_start = gpus("b", 2);
  until_start.end = start;
  ASSERT_EQ(sched.submit("b1", until_start, kT0).kind, DecisionKind::kPlaced);
  ASSERT_TRUE(sched.release("b1", kT0));
  // ...not for work that would still hold it then,
  Decision overlapping = sched.submit("b0", gpus("b", 2), kT0);
  ASSERT_EQ(overlapping.kind, DecisionKind::kPending);
  EXPECT_THAT(overlapping.reason->message, HasSubstr("reserved for another tenant's reservation"));
  ASSERT_TRUE(sched.release("b0", kT0));
  // ...unless it is preemptible: the window's start takes it back.
  Request preemptible = gpus("b", 2);
  preemptible.preemptible = true;
  ASSERT_EQ(sched.submit("bp", preemptible, kT0).kind, DecisionKind::kPlaced);
  // From the start it is held for the tenant, charged to its quota.
  std::vector<Decision> placed = sched.schedule(start);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].allocation_id, "reservation:r1");
  EXPECT_THAT(placed[0].preempted, ElementsAre("bp"));
  EXPECT_EQ(sched.quota().tenant_usage("a", "H200").used, gpu_units(2));
  EXPECT_EQ(sched.submit("b2", gpus("b", 2), start).kind, DecisionKind::kPending);
  ASSERT_EQ(sched.submit("b3", gpus("b", 1), start).kind, DecisionKind::kPlaced);
  // The tenant's request of that shape takes exactly the held GPUs.
  const std::vector<GpuGrant> held = sched.state().find("reservation:r1")->placement.gpus;
  Decision a = sched.submit("a1", gpus("a", 2), start + std::chrono::minutes(5));
  ASSERT_EQ(a.kind, DecisionKind::kPlaced);
  ASSERT_EQ(a.placement->gpus.size(), 2u);
  EXPECT_EQ(a.placement->gpus[0].gpu_uuid, held[0].gpu_uuid);
  EXPECT_EQ(a.placement->gpus[1].gpu_uuid, held[1].gpu_uuid);
  EXPECT_EQ(sched.state().find("reservation:r1"), nullptr);
  EXPECT_EQ(sched.quota().tenant_usage("a", "H200").used, gpu_units(2));
  // An unused hold goes back at the end of its window.
  ASSERT_TRUE(sched.release("a1", start));
  ASSERT_TRUE(sched.release("b3", start));
  ASSERT_EQ(sched.reserve("r2", gpus("a", 3), start, end, start).kind, DecisionKind::kPlaced);
  EXPECT_EQ(sched.submit("b4", gpus("b", 1), start).kind, DecisionKind::kPending);
  std::vector<Decision> after = sched.schedule(end);
  ASSERT_EQ(after.size(), 2u);  // the queue gets the capacity back, in queue order
  EXPECT_EQ(after[0].allocation_id, "b2");
  EXPECT_EQ(after[1].allocation_id, "b4");
  EXPECT_EQ(sched.state().find("reservation:r2"), nullptr);
  EXPECT_EQ(sched.quota().tenant_usage("a", "H200").used, 0);
  EXPECT_EQ(sched.reserve("bad", gpus("a", 1), end, start, end).kind, DecisionKind::kRejected);
}

TEST(Scheduler, BackfillNeverDelaysTheBlockedHead) {
  QuotaTree q;
  for (const char* t : {"a", "b"}) q.set_tenant(t, "H200", {.nominal = gpu_units(8)});
  Scheduler sched(make_state({{.id = "n1", .gpus = 4}}), q);
  // Two GPUs run until T0+1h, one with no end.
  Request running = gpus("a", 2);
  running.end = kT0 + std::chrono::hours(1);
  ASSERT_EQ(sched.submit("r", running, kT0).kind, DecisionKind::kPlaced);
  ASSERT_EQ(sched.submit("forever", gpus("a", 1), kT0).kind, DecisionKind::kPlaced);
  // The head needs 3 GPUs: it can start at T0+1h when "r" ends.
  Decision head = sched.submit("head", gpus("b", 3), kT0);
  ASSERT_EQ(head.kind, DecisionKind::kPending);
  EXPECT_EQ(sched.earliest_start(gpus("b", 3), kT0), kT0 + std::chrono::hours(1));
  // A one-GPU request without an end would take the GPU the head needs then: it waits...
  ASSERT_EQ(sched.submit("long", gpus("b", 1), kT0).kind, DecisionKind::kPlaced)
      << "submit places what fits; the queue pass is what protects the head";
  ASSERT_TRUE(sched.release("long", kT0));
  Request long_one = gpus("b", 1);
  Request short_one = gpus("b", 1);
  short_one.end = kT0 + std::chrono::minutes(30);
  // Queue both behind the head (as if they arrived while the GPU was busy).
  sched.restore_pending("long", long_one, kT0, Error::conflict("queued"));
  sched.restore_pending("short", short_one, kT0, Error::conflict("queued"));
  std::vector<Decision> placed = sched.schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].allocation_id, "short");  // ends before the head's start: backfilled
  auto queue = sched.pending(kT0);
  ASSERT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue[1].allocation_id, "long");
  EXPECT_THAT(queue[1].reason.message, HasSubstr("waiting behind head"));
  // When "r" and "short" end, the head starts on time.
  ASSERT_TRUE(sched.release("r", kT0 + std::chrono::hours(1)));
  ASSERT_TRUE(sched.release("short", kT0 + std::chrono::hours(1)));
  placed = sched.schedule(kT0 + std::chrono::hours(1));
  ASSERT_GE(placed.size(), 1u);
  EXPECT_EQ(placed[0].allocation_id, "head");
}

TEST(Scheduler, RejectsInvalidRequestsAndDuplicateIds) {
  Scheduler sched(make_state({{.id = "n1", .gpus = 1}}), one_gpu_each({"a"}));
  Decision bad = sched.submit("x", gpus("a", 0), kT0);
  EXPECT_EQ(bad.kind, DecisionKind::kRejected);
  EXPECT_EQ(bad.reason->code, ErrorCode::kInvalidArgument);
  ASSERT_EQ(sched.submit("a1", gpus("a", 1), kT0).kind, DecisionKind::kPlaced);
  EXPECT_EQ(sched.submit("a1", gpus("a", 1), kT0).kind, DecisionKind::kRejected);
  EXPECT_FALSE(sched.release("nope", kT0));
}

}  // namespace
}  // namespace gp::sched
