// Admission and bundle rendering throughput on one core: AdmissionReviews of a Deployment
// (allowed and denied) through review_admission, and whole tenant bundles through
// render_kubernetes. Prints decisions per second and microseconds per call.
//
//   build/bench/bench_admission [iterations]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "policy/policy.h"
#include "render/render.h"

using namespace gp;
using Clock = std::chrono::steady_clock;

namespace {

Json deployment_review(bool violating) {
  Json container = {
      {"name", "main"},
      {"image", "registry.example.com/acme/train:1.0"},
      {"imagePullPolicy", "Always"},
      {"resources", {{"limits", {{"nvidia.com/mig-1g.18gb", "1"}, {"cpu", "4"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", violating}, {"capabilities", {{"drop", {"ALL"}}}}}}};
  Json spec = {{"securityContext",
                {{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
               {"containers", Json::array({container, container})}};
  spec["containers"][1]["name"] = "sidecar";
  Json object = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "serve"}, {"namespace", "acme-train"}}},
      {"spec",
       {{"replicas", 4},
        {"selector", {{"matchLabels", {{"app", "serve"}}}}},
        {"template", {{"metadata", {{"labels", {{"app", "serve"}}}}}, {"spec", spec}}}}}};
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}}},
            {"namespace", "acme-train"},
            {"operation", "CREATE"},
            {"object", object}}}};
}

template <typename F>
double per_call_us(int n, F&& f) {
  auto start = Clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  policy::TenantAdmissionContext t;
  t.tenant = "acme";
  t.isolation_class = vocab::IsolationClass::kStandard;
  t.namespaces = {"acme-train", "acme-serve"};
  t.tiers = {vocab::Tier::kMig};
  t.mig_profiles = {"1g.18gb", "3g.71gb"};
  t.allowed_registries = {"registry.example.com/acme"};
  t.other_pools = {{"globex-h200", {{"gpuplane.io/pool", "globex-h200"}}, {}, {"gpu-node-07"}}};
  size_t denied = 0;
  std::printf("%-34s %12s %12s\n", "operation", "us/call", "calls/s");
  for (bool violating : {false, true}) {
    Json review = deployment_review(violating);
    double us = per_call_us(n, [&] {
      auto out = policy::review_admission(review, t);
      denied += out && !(*out)["response"]["allowed"].get<bool>();
    });
    std::printf("%-34s %12.2f %12.0f\n",
                violating ? "review Deployment (denied)" : "review Deployment (allowed)", us,
                1e6 / us);
  }
  render::TenantBundleInput in;
  in.tenant = "acme";
  in.isolation_class = vocab::IsolationClass::kStandard;
  in.tiers = {vocab::Tier::kMig};
  in.mig_profiles = {"1g.18gb", "3g.71gb"};
  for (int p = 0; p < 10; ++p) {
    render::Project project;
    project.name = "project-" + std::to_string(p);
    project.quota.mig = {{"1g.18gb", 7}};
    project.egress = {{"object-store", "10.20.0.0/16", {}, {{"TCP", 443, 0}}}};
    project.service_accounts = {"runner"};
    in.projects.push_back(project);
    in.role_bindings.push_back(
        {"project-member", "Group", "team-" + std::to_string(p), project.name});
  }
  in.role_bindings.push_back({"tenant-admin", "User", "alice@example.com", ""});
  in.webhook.base_url = "https://gpuplane.example.com";
  size_t bytes = 0;
  int renders = std::max(1, n / 100);
  double us = per_call_us(renders, [&] { bytes = render::render_kubernetes(in)->size(); });
  std::printf("%-34s %12.2f %12.0f   (%zu bytes of YAML)\n", "render bundle, 10 projects", us,
              1e6 / us, bytes);
  return denied == static_cast<size_t>(n) ? 0 : 1;
}
