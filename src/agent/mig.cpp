#include "agent/mig.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace gp::agent {
namespace {

std::string labels(const vocab::Layout& layout) {
  std::vector<std::string> out;
  out.reserve(layout.size());
  for (const auto& i : layout) out.push_back(vocab::instance_label(i));
  return out.empty() ? "none" : fmt::format("{}", fmt::join(out, ", "));
}

bool contains(const vocab::Layout& layout, const vocab::PlacedInstance& i) {
  return std::ranges::find(layout, i) != layout.end();
}

Result<vocab::PlacedInstance> parse_instance(const Json& j) {
  if (!j.is_object() || !j.contains("profile") || !j["profile"].is_string() ||
      !j.contains("start") || !j["start"].is_number_integer())
    return fail(Error::invalid("a MIG instance needs a string 'profile' and an integer 'start'"));
  return vocab::PlacedInstance{j["profile"].get<std::string>(), j["start"].get<int>()};
}

}  // namespace

Result<std::vector<GpuPlan>> parse_gpu_plans(const Json& plans) {
  std::vector<GpuPlan> out;
  if (plans.is_null()) return out;
  if (!plans.is_array()) return fail(Error::invalid("'gpu_plans' is not an array"));
  for (const Json& p : plans) {
    if (!p.is_object() || !p.contains("gpu") || !p["gpu"].is_string())
      return fail(Error::invalid("a GPU plan needs a string 'gpu'"));
    GpuPlan plan{.gpu = p["gpu"].get<std::string>()};
    const auto mode = vocab::parse_gpu_mode(p.value("mode", ""));
    if (!mode)
      return fail(Error::invalid(
          fmt::format("GPU plan {}: unknown mode {}", plan.gpu, p.value("mode", Json()).dump())));
    plan.mode = *mode;
    if (plan.mode == fleet::GpuMode::kMig) {
      const Json layout = p.value("mig_layout", Json::array());
      if (!layout.is_array())
        return fail(
            Error::invalid(fmt::format("GPU plan {}: 'mig_layout' is not an array", plan.gpu)));
      for (const Json& i : layout) {
        auto instance = parse_instance(i);
        if (!instance)
          return fail(
              Error::invalid(fmt::format("GPU plan {}: {}", plan.gpu, instance.error().message)));
        plan.layout.push_back(std::move(*instance));
      }
      std::ranges::sort(plan.layout);
    }
    out.push_back(std::move(plan));
  }
  return out;
}

std::map<std::string, GpuUse> gpu_use(const Json& allocations) {
  std::map<std::string, GpuUse> out;
  if (!allocations.is_array()) return out;
  for (const Json& a : allocations) {
    if (!a.is_object() || !a.contains("gpus") || !a["gpus"].is_array()) continue;
    // An allocation waiting for a GPU's plan has started nothing there: it does not use it.
    const Json configuring = a.value("configuring", Json::array());
    for (const Json& g : a["gpus"]) {
      if (!g.is_object() || !g.contains("gpu") || !g["gpu"].is_string()) continue;
      if (configuring.is_array() && std::ranges::find(configuring, g["gpu"]) != configuring.end())
        continue;
      GpuUse& use = out[g["gpu"].get<std::string>()];
      use.any = true;
      if (g.contains("mig"))
        if (auto instance = parse_instance(g["mig"])) use.instances.insert(std::move(*instance));
    }
  }
  return out;
}

MigSteps plan_mig_steps(const GpuPlan& plan, const Nvml::MigView& now, const GpuUse& use) {
  MigSteps steps;
  const bool want_mig = plan.mode == fleet::GpuMode::kMig;
  if (want_mig && !now.capable) {
    steps.impossible = "the GPU does not support MIG";
    return steps;
  }
  // Whatever the mode, instances the plan lacks go when nothing holds them.
  for (const auto& i : now.layout)
    if (!contains(plan.layout, i) && !use.instances.contains(i)) steps.destroy.push_back(i);
  if (want_mig != now.enabled) {
    if (now.pending_change) {
      steps.waiting = "the MIG mode change waits for a GPU reset";
      steps.destroy.clear();
      return steps;
    }
    if (use.any) {
      steps.waiting = "MIG mode changes only on a drained GPU, and allocations on this node use it";
      steps.destroy.clear();
      return steps;
    }
    steps.set_mig_mode = want_mig;
    if (!want_mig) return steps;
    // Enabled now, the GPU has no instances yet: every planned one is created.
    steps.create = plan.layout;
    return steps;
  }
  if (!want_mig) return steps;
  for (const auto& i : plan.layout) {
    if (!contains(now.layout, i))
      steps.create.push_back(i);
    else if (contains(now.without_compute, i))
      steps.add_compute.push_back(i);
  }
  return steps;
}

Json MigOutcome::to_json() const {
  Json j = {{"gpu", gpu}, {"status", status}};
  if (!detail.empty()) j["detail"] = detail;
  if (!done.empty()) j["done"] = done;
  return j;
}

MigOutcome apply_mig_plan(Nvml& nvml, const GpuPlan& plan, const GpuUse& use) {
  MigOutcome out{.gpu = plan.gpu};
  auto failed = [&](const std::string& what, const Error& e) {
    out.status = "failed";
    out.detail = what.empty() ? e.message : fmt::format("{}: {}", what, e.message);
    return out;
  };
  auto view = nvml.mig_view(plan.gpu);
  if (!view) return failed("reading its MIG configuration", view.error());
  const MigSteps steps = plan_mig_steps(plan, *view, use);
  if (!steps.impossible.empty()) return failed("", Error::invalid(steps.impossible));
  if (!steps.waiting.empty()) {
    out.status = "waiting";
    out.detail = steps.waiting;
    return out;
  }
  for (const auto& i : steps.destroy) {
    if (auto r = nvml.destroy_gpu_instance(plan.gpu, i); !r)
      return failed("destroying " + vocab::instance_label(i), r.error());
    out.done.push_back("destroyed " + vocab::instance_label(i));
  }
  vocab::Layout create = steps.create;
  if (steps.set_mig_mode) {
    auto effective = nvml.set_mig_mode(plan.gpu, *steps.set_mig_mode);
    if (!effective)
      return failed(*steps.set_mig_mode ? "enabling MIG" : "disabling MIG", effective.error());
    out.done.push_back(*steps.set_mig_mode ? "enabled MIG" : "disabled MIG");
    if (!*effective) {
      out.status = "waiting";
      out.detail = "the MIG mode change waits for a GPU reset";
      return out;
    }
  }
  for (const auto& i : create) {
    if (auto r = nvml.create_gpu_instance(plan.gpu, i); !r)
      return failed("creating " + vocab::instance_label(i), r.error());
    out.done.push_back("created " + vocab::instance_label(i));
  }
  vocab::Layout compute = steps.add_compute;
  compute.insert(compute.end(), create.begin(), create.end());
  for (const auto& i : compute) {
    if (auto r = nvml.create_compute_instance(plan.gpu, i); !r)
      return failed("creating the compute instance of " + vocab::instance_label(i), r.error());
    out.done.push_back("compute instance on " + vocab::instance_label(i));
  }
  // Verified by reading the GPU back: the plan's instances, each usable, in the planned mode.
  auto after = nvml.mig_view(plan.gpu);
  if (!after) return failed("verifying", after.error());
  const bool want_mig = plan.mode == fleet::GpuMode::kMig;
  vocab::Layout missing, unusable;
  for (const auto& i : plan.layout) {
    if (!contains(after->layout, i))
      missing.push_back(i);
    else if (contains(after->without_compute, i))
      unusable.push_back(i);
  }
  if (after->enabled != want_mig || !missing.empty() || !unusable.empty())
    return failed("verifying",
                  Error::internal(fmt::format(
                      "after the calls the GPU is {} with instances {} (missing {}, without a "
                      "compute instance {})",
                      after->enabled ? "in MIG mode" : "whole", labels(after->layout),
                      labels(missing), labels(unusable))));
  out.status = "applied";
  return out;
}

MigOutcome apply_mig_plan_simulated(Json& gpu, const GpuPlan& plan, const GpuUse& use) {
  MigOutcome out{.gpu = plan.gpu};
  Nvml::MigView now{.capable = gpu.value("mig_capable", false),
                    .enabled = gpu.value("mode", "whole") == "mig"};
  for (const Json& i : gpu.value("mig_instances", Json::array()))
    if (auto instance = parse_instance(i)) now.layout.push_back(std::move(*instance));
  const MigSteps steps = plan_mig_steps(plan, now, use);
  out.status = !steps.impossible.empty() ? "failed"
               : !steps.waiting.empty()  ? "waiting"
                                         : "applied";
  out.detail = !steps.impossible.empty() ? steps.impossible : steps.waiting;
  if (out.status != "applied" || steps.empty()) return out;
  Json instances = Json::array();
  for (const auto& i : now.layout) {
    if (contains(steps.destroy, i)) {
      out.done.push_back("destroyed " + vocab::instance_label(i));
      continue;
    }
    instances.push_back({{"profile", i.profile}, {"start", i.start}});
  }
  for (const auto& i : steps.create) {
    instances.push_back({{"profile", i.profile}, {"start", i.start}});
    out.done.push_back("created " + vocab::instance_label(i));
  }
  if (steps.set_mig_mode) out.done.push_back(*steps.set_mig_mode ? "enabled MIG" : "disabled MIG");
  gpu["mode"] = plan.mode == fleet::GpuMode::kMig ? "mig" : "whole";
  gpu["mig_instances"] = std::move(instances);
  return out;
}

}  // namespace gp::agent
