// gp::policy::review_admission: AdmissionReview requests from the Kubernetes API server
// (the validating webhook), and pod_template_of on the object they carry.
#include "fuzz_util.h"
#include "policy/policy.h"

namespace {

gp::policy::TenantAdmissionContext make_tenant() {
  using namespace gp::policy;
  TenantAdmissionContext t;
  t.tenant = "acme";
  t.isolation_class = IsolationClass::kStandard;
  t.namespaces = {"acme-train"};
  t.tiers = {Tier::kMig, Tier::kDedicatedGpu};
  t.mig_profiles = {"1g.18gb", "3g.71gb"};
  t.own_pools = {{"p1",
                  {{"gpuplane.io/pool", "p1"}},
                  {{"gpuplane.io/tenant", "acme", "NoSchedule"}},
                  {"node-1"}}};
  t.other_pools = {{"p2", {{"gpuplane.io/pool", "p2"}}, {}, {"node-2"}}};
  t.allowed_registries = {"registry.example.com/acme", "ghcr.io"};
  t.require_pull_always = true;
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gp::policy::TenantAdmissionContext tenant = make_tenant();
  auto j = gp::parse_json(gp::fuzz::as_text(data, size));
  if (!j) return 0;
  if (auto review = gp::policy::review_admission(*j, tenant)) gp::fuzz::touch(*review);
  if (j->is_object() && j->contains("request") && (*j)["request"].is_object() &&
      (*j)["request"].contains("object")) {
    (void)gp::policy::pod_template_of((*j)["request"]["object"]);
  }
  (void)gp::policy::pod_template_of(*j);
  return 0;
}
