// Specification of MIG plans applied on the node (agent/mig.h): the pure step planner, and the
// applier against the simulated NVML driver (fake_nvml.h), through every configuration call and
// its failures, an agent that dies between creating an instance and reporting it, and the MIG
// mode change that only a drained GPU gets.
#include "agent/mig.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_nvml.h"

namespace gp::agent {
namespace {

using namespace fake_nvml;  // NOLINT: the simulated driver
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kGpu = "GPU-aaaaaaaa-0000-0000-0000-000000000000";

vocab::PlacedInstance at(const char* profile, int start) { return {profile, start}; }

GpuPlan mig_plan(vocab::Layout layout) {
  std::ranges::sort(layout);
  return {.gpu = kGpu, .mode = fleet::GpuMode::kMig, .layout = std::move(layout)};
}

// ---------------------------------------------------------------------------------------------
// parse_gpu_plans, gpu_use

TEST(ParseGpuPlans, ReadsModesAndLayoutsSortedByStart) {
  auto plans = parse_gpu_plans(Json::parse(R"([
    {"gpu": "GPU-a", "mode": "mig", "mig_layout": [{"profile": "3g.71gb", "start": 4},
                                                    {"profile": "1g.18gb", "start": 0}]},
    {"gpu": "GPU-b", "mode": "whole", "mig_layout": []}])"));
  ASSERT_TRUE(plans) << plans.error().message;
  ASSERT_EQ(plans->size(), 2u);
  EXPECT_EQ((*plans)[0].mode, fleet::GpuMode::kMig);
  EXPECT_THAT((*plans)[0].layout, ElementsAre(at("1g.18gb", 0), at("3g.71gb", 4)));
  EXPECT_EQ((*plans)[1].mode, fleet::GpuMode::kWhole);
  EXPECT_THAT(parse_gpu_plans(Json()).value(), IsEmpty());
}

TEST(ParseGpuPlans, RefusesMalformedPlansNamingThem) {
  for (const char* bad :
       {R"({"gpu": "x"})", R"([{"mode": "mig"}])", R"([{"gpu": "GPU-a", "mode": "half"}])",
        R"([{"gpu": "GPU-a", "mode": "mig", "mig_layout": {}}])",
        R"([{"gpu": "GPU-a", "mode": "mig", "mig_layout": [{"profile": 3}]}])"}) {
    auto plans = parse_gpu_plans(Json::parse(bad));
    ASSERT_FALSE(plans) << bad;
    EXPECT_EQ(plans.error().code, ErrorCode::kInvalidArgument) << bad;
  }
}

TEST(GpuUse, CollectsTheInstancesOfEveryAssignedAllocation) {
  auto use = gpu_use(Json::parse(R"([
    {"id": "a1", "gpus": [{"gpu": "GPU-a", "mig": {"profile": "3g.71gb", "start": 0}}]},
    {"id": "a2", "stop": {"grace_seconds": 5},
     "gpus": [{"gpu": "GPU-a", "mig": {"profile": "1g.18gb", "start": 6}}]},
    {"id": "a3", "gpus": [{"gpu": "GPU-b"}]},
    {"id": "a4", "configuring": ["GPU-c"], "gpus": [{"gpu": "GPU-c"}]},
    {"id": "bad", "gpus": "nope"}])"));
  EXPECT_THAT(use["GPU-a"].instances, ElementsAre(at("1g.18gb", 6), at("3g.71gb", 0)));
  EXPECT_TRUE(use["GPU-b"].any);
  EXPECT_THAT(use["GPU-b"].instances, IsEmpty());
  // a4 waits for GPU-c's plan: it started nothing there, so the GPU is free to change mode.
  EXPECT_FALSE(use.contains("GPU-c"));
}

// ---------------------------------------------------------------------------------------------
// plan_mig_steps (pure)

Nvml::MigView view(bool enabled, vocab::Layout layout, vocab::Layout without_compute = {}) {
  return {.capable = true,
          .enabled = enabled,
          .layout = std::move(layout),
          .without_compute = std::move(without_compute)};
}

TEST(PlanMigSteps, CreatesWhatThePlanHasAndDestroysOnlyWhatNothingHolds) {
  GpuUse use{.any = true, .instances = {at("3g.71gb", 0)}};
  // 3g@0 belongs to a stopping allocation the plan no longer has; 2g@4 is held by nobody.
  auto steps = plan_mig_steps(mig_plan({at("1g.18gb", 6)}),
                              view(true, {at("3g.71gb", 0), at("2g.35gb", 4)}), use);
  EXPECT_THAT(steps.destroy, ElementsAre(at("2g.35gb", 4)));
  EXPECT_THAT(steps.create, ElementsAre(at("1g.18gb", 6)));
  EXPECT_FALSE(steps.set_mig_mode);
  EXPECT_TRUE(steps.waiting.empty());
}

TEST(PlanMigSteps, GivesAComputeInstanceToAPlannedInstanceLeftWithout) {
  auto steps = plan_mig_steps(mig_plan({at("3g.71gb", 4)}),
                              view(true, {at("3g.71gb", 4)}, {at("3g.71gb", 4)}), {});
  EXPECT_THAT(steps.add_compute, ElementsAre(at("3g.71gb", 4)));
  EXPECT_THAT(steps.create, IsEmpty());
  // Matching already: nothing to do.
  EXPECT_TRUE(
      plan_mig_steps(mig_plan({at("3g.71gb", 4)}), view(true, {at("3g.71gb", 4)}), {}).empty());
}

TEST(PlanMigSteps, ModeChangesOnlyOnADrainedGpuAndNeverTwiceBeforeAReset) {
  const GpuPlan plan = mig_plan({at("7g.141gb", 0)});
  auto used = plan_mig_steps(plan, view(false, {}), GpuUse{.any = true});
  EXPECT_THAT(used.waiting, HasSubstr("drained"));
  EXPECT_TRUE(used.empty());

  auto idle = plan_mig_steps(plan, view(false, {}), {});
  EXPECT_EQ(idle.set_mig_mode, std::optional<bool>(true));
  EXPECT_THAT(idle.create, ElementsAre(at("7g.141gb", 0)));

  Nvml::MigView pending = view(false, {});
  pending.pending_change = true;
  auto waiting = plan_mig_steps(plan, pending, {});
  EXPECT_THAT(waiting.waiting, HasSubstr("GPU reset"));
  EXPECT_TRUE(waiting.empty());

  // Back to whole: the unused instances go first, then the mode.
  auto whole = plan_mig_steps({.gpu = kGpu}, view(true, {at("3g.71gb", 0), at("3g.71gb", 4)}), {});
  EXPECT_THAT(whole.destroy, ElementsAre(at("3g.71gb", 0), at("3g.71gb", 4)));
  EXPECT_EQ(whole.set_mig_mode, std::optional<bool>(false));

  Nvml::MigView incapable;
  EXPECT_THAT(plan_mig_steps(plan, incapable, {}).impossible, HasSubstr("does not support MIG"));
}

// ---------------------------------------------------------------------------------------------
// apply_mig_plan_simulated: a --simulate node's inventory entry, by the same rules

TEST(ApplyMigPlanSimulated, TakesTheSameStepsAsAGpuOnTheInventoryEntry) {
  Json gpu = {{"uuid", kGpu}, {"mig_capable", true}, {"mode", "whole"}};
  auto busy = apply_mig_plan_simulated(gpu, mig_plan({at("3g.71gb", 4)}), GpuUse{.any = true});
  EXPECT_EQ(busy.status, "waiting");
  EXPECT_EQ(gpu["mode"], "whole");

  auto out = apply_mig_plan_simulated(gpu, mig_plan({at("3g.71gb", 4)}), {});
  EXPECT_EQ(out.status, "applied");
  EXPECT_THAT(out.done, ElementsAre("created 3g.71gb@4", "enabled MIG"));
  EXPECT_EQ(gpu["mode"], "mig");
  EXPECT_EQ(gpu["mig_instances"], Json::parse(R"([{"profile": "3g.71gb", "start": 4}])"));

  // An instance a stopping allocation holds stays; an unused one goes.
  gpu["mig_instances"].push_back({{"profile", "3g.71gb"}, {"start", 0}});
  out = apply_mig_plan_simulated(gpu, mig_plan({at("1g.18gb", 6)}),
                                 GpuUse{.any = true, .instances = {at("3g.71gb", 0)}});
  EXPECT_THAT(out.done, ElementsAre("destroyed 3g.71gb@4", "created 1g.18gb@6"));
  EXPECT_EQ(gpu["mig_instances"], Json::parse(R"([{"profile": "3g.71gb", "start": 0},
                                                  {"profile": "1g.18gb", "start": 6}])"));
  // Matching: nothing done.
  EXPECT_TRUE(apply_mig_plan_simulated(gpu, mig_plan({at("3g.71gb", 0), at("1g.18gb", 6)}), {})
                  .done.empty());
  Json plain = {{"uuid", kGpu}, {"mode", "whole"}};
  EXPECT_EQ(apply_mig_plan_simulated(plain, mig_plan({at("3g.71gb", 4)}), {}).status, "failed");
}

// ---------------------------------------------------------------------------------------------
// apply_mig_plan against the simulated driver

class MigApply : public NvmlSimulated {
 protected:
  FakeGpu& h200(int mode = NVML_DEVICE_MIG_ENABLE) {
    FakeGpu& gpu = world_.add_gpu("NVIDIA H200", kGpu, 0x18);
    gpu.mig_mode = mode;
    return gpu;
  }
  MigOutcome apply(const GpuPlan& plan, const GpuUse& use = {}) {
    std::unique_ptr<Nvml> nvml = open();  // a fresh session, as a restarted agent has
    return nvml ? apply_mig_plan(*nvml, plan, use) : MigOutcome{};
  }
};

TEST_F(MigApply, CreatesThePlannedInstancesEachWithAComputeInstanceAndVerifies) {
  FakeGpu& gpu = h200();
  auto out = apply(mig_plan({at("3g.71gb", 4), at("1g.18gb", 0)}));
  EXPECT_EQ(out.status, "applied") << out.detail;
  EXPECT_THAT(world_.calls, ElementsAre("nvmlDeviceCreateGpuInstanceWithPlacement 1g@0",
                                        "nvmlDeviceCreateGpuInstanceWithPlacement 3g@4",
                                        "nvmlGpuInstanceCreateComputeInstance 1g@0",
                                        "nvmlGpuInstanceCreateComputeInstance 3g@4"));
  EXPECT_THAT(FakeWorld::describe(gpu), ElementsAre("1g@0/1", "3g@4/1"));
  EXPECT_THAT(out.done,
              ElementsAre("created 1g.18gb@0", "created 3g.71gb@4", "compute instance on 1g.18gb@0",
                          "compute instance on 3g.71gb@4"));
  // The discovery the heartbeat reports now shows them.
  EXPECT_EQ(open()->discover()->at(0).mig_instances.size(), 2u);
  // Applied again: nothing to call.
  world_.calls.clear();
  EXPECT_EQ(apply(mig_plan({at("3g.71gb", 4), at("1g.18gb", 0)})).status, "applied");
  EXPECT_THAT(world_.calls, IsEmpty());
}

TEST_F(MigApply, DestroysUnusedInstancesAndNeverOneInUse) {
  FakeGpu& gpu = h200();
  world_.add_instance(gpu, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 1, 0);  // a stopping job's
  world_.add_instance(gpu, NVML_GPU_INSTANCE_PROFILE_2_SLICE, 4, 2, 0);  // nobody's
  auto out =
      apply(mig_plan({at("1g.18gb", 6)}), GpuUse{.any = true, .instances = {at("3g.71gb", 0)}});
  EXPECT_EQ(out.status, "applied") << out.detail;
  EXPECT_THAT(world_.calls,
              ElementsAre("nvmlComputeInstanceDestroy 2g@4", "nvmlGpuInstanceDestroy 2g@4",
                          "nvmlDeviceCreateGpuInstanceWithPlacement 1g@6",
                          "nvmlGpuInstanceCreateComputeInstance 1g@6"));
  EXPECT_THAT(FakeWorld::describe(gpu), ElementsAre("3g@0/1", "1g@6/1"));
}

TEST_F(MigApply, EveryRefusedCallFailsTheRoundWithNvmlsReasonAndLeavesTheRestAlone) {
  struct Case {
    const char* symbol;
    nvmlReturn_t rc;
    const char* step;
  };
  for (const Case& c :
       {Case{"nvmlComputeInstanceDestroy", NVML_ERROR_IN_USE, "destroying 2g.35gb@4"},
        Case{"nvmlGpuInstanceDestroy", NVML_ERROR_UNKNOWN, "destroying 2g.35gb@4"},
        Case{"nvmlDeviceCreateGpuInstanceWithPlacement", NVML_ERROR_INSUFFICIENT_RESOURCES,
             "creating 1g.18gb@6"},
        Case{"nvmlGpuInstanceCreateComputeInstance", NVML_ERROR_GPU_IS_LOST,
             "creating the compute instance of 1g.18gb@6"},
        Case{"nvmlGpuInstanceGetComputeInstanceProfileInfo", NVML_ERROR_UNKNOWN,
             "reading its MIG configuration"}}) {
    SCOPED_TRACE(c.symbol);
    world_ = FakeWorld();
    FakeGpu& gpu = h200();
    world_.add_instance(gpu, NVML_GPU_INSTANCE_PROFILE_2_SLICE, 4, 2, 0);
    world_.fail_next[c.symbol] = c.rc;
    auto out = apply(mig_plan({at("1g.18gb", 6)}));
    EXPECT_EQ(out.status, "failed");
    EXPECT_THAT(out.detail, HasSubstr(c.step));
    EXPECT_THAT(out.detail, HasSubstr(c.symbol));
    EXPECT_THAT(out.detail, HasSubstr("NVML error " + std::to_string(static_cast<unsigned>(c.rc))));
  }
}

TEST_F(MigApply, AnInstanceAProcessStillUsesIsNotDestroyed) {
  FakeGpu& gpu = h200();
  world_.add_instance(gpu, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 1, 0).in_use = true;
  auto out = apply(mig_plan({at("3g.71gb", 4)}));
  EXPECT_EQ(out.status, "failed");
  EXPECT_THAT(out.detail, HasSubstr("destroying 3g.71gb@0"));
  EXPECT_THAT(FakeWorld::describe(gpu), ElementsAre("3g@0/1"));  // nothing created either
}

TEST_F(MigApply, AnAgentKilledBetweenCreateAndReportFinishesTheJobOnRestart) {
  FakeGpu& gpu = h200();
  // Killed after the GPU instance, before its compute instance: the round ends there.
  world_.fail_next["nvmlGpuInstanceCreateComputeInstance"] = NVML_ERROR_UNKNOWN;
  EXPECT_EQ(apply(mig_plan({at("3g.71gb", 4)})).status, "failed");
  EXPECT_THAT(FakeWorld::describe(gpu), ElementsAre("3g@4/0"));
  // The restarted agent finds the instance unusable and gives it its compute instance only.
  world_.calls.clear();
  auto out = apply(mig_plan({at("3g.71gb", 4)}));
  EXPECT_EQ(out.status, "applied") << out.detail;
  EXPECT_THAT(world_.calls, ElementsAre("nvmlGpuInstanceCreateComputeInstance 3g@4"));
  EXPECT_THAT(FakeWorld::describe(gpu), ElementsAre("3g@4/1"));
  // Killed after every call but before its report: the next round calls nothing and reports.
  world_.calls.clear();
  EXPECT_EQ(apply(mig_plan({at("3g.71gb", 4)})).status, "applied");
  EXPECT_THAT(world_.calls, IsEmpty());
}

TEST_F(MigApply, ADriverThatSaysYesAndDoesNothingFailsVerification) {
  h200();
  world_.creates_nothing = true;
  auto out = apply(mig_plan({at("3g.71gb", 4)}));
  EXPECT_EQ(out.status, "failed");
  EXPECT_THAT(out.detail, AnyOf(HasSubstr("verifying"), HasSubstr("no GPU instance 3g.71gb@4")));
}

TEST_F(MigApply, MigModeIsEnabledOnlyOnADrainedGpuAndAResetIsLeftToTheOperator) {
  FakeGpu& gpu = h200(NVML_DEVICE_MIG_DISABLE);
  auto busy = apply(mig_plan({at("7g.141gb", 0)}), GpuUse{.any = true});
  EXPECT_EQ(busy.status, "waiting");
  EXPECT_THAT(world_.calls, IsEmpty());

  auto out = apply(mig_plan({at("7g.141gb", 0)}));
  EXPECT_EQ(out.status, "applied") << out.detail;
  EXPECT_THAT(world_.calls,
              ElementsAre("nvmlDeviceSetMigMode 1", "nvmlDeviceCreateGpuInstanceWithPlacement 7g@0",
                          "nvmlGpuInstanceCreateComputeInstance 7g@0"));
  EXPECT_THAT(FakeWorld::describe(gpu), ElementsAre("7g@0/1"));

  // Back to whole, on a driver that defers mode changes to a reset: instance gone, mode pending,
  // and the next round does not ask again.
  gpu.mode_needs_reset = true;
  world_.calls.clear();
  auto whole = apply({.gpu = kGpu, .mode = fleet::GpuMode::kWhole});
  EXPECT_EQ(whole.status, "waiting");
  EXPECT_THAT(whole.detail, HasSubstr("GPU reset"));
  EXPECT_THAT(world_.calls, ElementsAre("nvmlComputeInstanceDestroy 7g@0",
                                        "nvmlGpuInstanceDestroy 7g@0", "nvmlDeviceSetMigMode 0"));
  world_.calls.clear();
  EXPECT_EQ(apply({.gpu = kGpu, .mode = fleet::GpuMode::kWhole}).status, "waiting");
  EXPECT_THAT(world_.calls, IsEmpty());
}

TEST_F(MigApply, SetMigModeRefusedIsAFailureWithTheReason) {
  h200(NVML_DEVICE_MIG_DISABLE).busy = true;  // a process the control plane does not know of
  auto out = apply(mig_plan({at("7g.141gb", 0)}));
  EXPECT_EQ(out.status, "failed");
  EXPECT_THAT(out.detail, HasSubstr("enabling MIG"));
  EXPECT_THAT(out.detail, HasSubstr("nvmlDeviceSetMigMode"));
}

TEST_F(MigApply, AGpuWithoutMigOrADriverWithoutTheCallsCannotBeConfigured) {
  h200(-1);
  EXPECT_THAT(apply(mig_plan({at("7g.141gb", 0)})).detail, HasSubstr("does not support MIG"));
  world_ = FakeWorld();
  h200();
  world_.absent = {"nvmlGpuInstanceCreateComputeInstance"};
  auto out = apply(mig_plan({at("7g.141gb", 0)}));
  EXPECT_EQ(out.status, "failed");
  EXPECT_THAT(out.detail, HasSubstr("lacks the MIG configuration calls"));
  world_.absent.clear();
  EXPECT_THAT(apply({.gpu = "GPU-nope", .mode = fleet::GpuMode::kMig}).detail,
              HasSubstr("no GPU GPU-nope"));
}

TEST_F(MigApply, ListingRefusedIsAFailureNotAnEmptyGpu) {
  FakeGpu& gpu = h200();
  world_.add_instance(gpu, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 0, 1, 0);
  world_.list_instances_rc = NVML_ERROR_NO_PERMISSION;
  auto out = apply(mig_plan({at("3g.71gb", 4)}));
  EXPECT_EQ(out.status, "failed");
  EXPECT_THAT(out.detail, HasSubstr("mig/monitor"));
  EXPECT_THAT(world_.calls, IsEmpty());
}

}  // namespace
}  // namespace gp::agent
