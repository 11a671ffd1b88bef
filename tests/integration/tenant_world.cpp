#include "integration/tenant_world.h"

#include <chrono>
#include <stdexcept>

namespace gp::it {

std::map<std::string, std::string> TenantWorld::path_ids() const {
  return {{"tenant", tenant.id},
          {"project", project_id},
          {"user", user_id},
          {"service_account", sa_id},
          {"api_key", key_id},
          {"role_binding", binding_id},
          {"allocation", allocation_id},
          {"reservation", reservation_id},
          {"invoice", invoice_id},
          {"secret", secret},
          {"vm", vm_id},
          {"job", job_id},
          {"budget", project_id}};
}

TenantWorld populate(TestServer& s, const std::string& name) {
  TenantWorld w;
  w.tenant = s.create_tenant(name, name + "-admin");
  const auto& token = w.tenant.admin_token;
  const auto& t = w.tenant.id;
  w.project_id = s.create_project(token, t, name + "-prj").at("id");
  w.user_id = s.create_user(token, t, name + "-user").at("id");
  w.sa_id = s.create_service_account(token, t, name + "-sa").at("id");
  auto key = s.create_api_key(
      token, t, {{"name", "ci"}, {"owner_kind", "service_account"}, {"owner_id", w.sa_id}});
  w.key_id = key.at("id");
  w.key_token = key.at("token");
  w.binding_id =
      s.create_binding(token, t, "project-member", "user", w.user_id, w.project_id).at("id");
  // A GPU allocation: the fleet has one node, the tenant a quota of one GPU.
  if (s.request("GET", "/v1/nodes/" + name + "-node", nullptr, s.admin_token()).status == 404) {
    Json nodes = Json::array({{{"inventory", h200_inventory(name + "-node", 2)}}});
    expect_status(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, s.admin_token()), 201,
                  "fleet import");
  }
  expect_status(s.request("PUT", "/v1/tenants/" + t + "/quota",
                          {{"models", {{"H200", {{"nominal", 2}}}}}}, s.admin_token()),
                200, "quota");
  w.allocation_id =
      expect_status(
          s.request("POST", "/v1/tenants/" + t + "/projects/" + w.project_id + "/allocations",
                    {{"shape", {{"tier", "dedicated-gpu"}}}}, token),
          201, "allocation")
          .body.at("id");
  // A GPU VM: an allocation of a vm offering on a node of the tenant's own pool, whose agent's
  // heartbeat creates the VM's record.
  if (s.request("GET", "/v1/offerings/vm-pool", nullptr, s.admin_token()).status == 404)
    expect_status(s.request("POST", "/v1/offerings",
                            {{"name", "vm-pool"},
                             {"tier", "dedicated-pool"},
                             {"models", {"H200"}},
                             {"gpus", 1},
                             {"delivery", "vm"},
                             {"vm", {{"vcpus", 4}, {"memory_mib", 8192}}}},
                            s.admin_token()),
                  201, "vm offering");
  const std::string pool = name + "-pool";
  expect_status(s.request("POST", "/v1/pools", {{"name", pool}, {"tenant", t}}, s.admin_token()),
                201, "pool");
  auto join = expect_status(s.request("POST", "/v1/join-tokens", {{"pool", pool}}, s.admin_token()),
                            201, "join token");
  const std::string node_token =
      expect_status(s.request("POST", "/v1/agent/enroll",
                              {{"join_token", join.body.at("token")},
                               {"inventory", h200_inventory(name + "-vm-node", 1)}}),
                    201, "enroll")
          .body.at("credential");
  auto vm_alloc_resp = expect_status(
      s.request("POST", "/v1/tenants/" + t + "/projects/" + w.project_id + "/allocations",
                {{"offering", "vm-pool"}}, token),
      201, "vm allocation");
  const std::string vm_allocation = vm_alloc_resp.body.at("id");
  auto hb = expect_status(s.request("POST", "/v1/agent/heartbeat", Json::object(), node_token), 200,
                          "heartbeat");
  for (const auto& a : hb.body.at("assignments").at("allocations"))
    if (a.at("id") == vm_allocation) w.vm_id = a.at("vm").at("id");
  if (w.vm_id.empty())
    throw std::runtime_error("the VM allocation did not reach its node: " + hb.raw);
  // A job (placed or queued: either way it has its rows and its allocation).
  if (s.request("GET", "/v1/offerings/job-gpu", nullptr, s.admin_token()).status == 404)
    expect_status(s.request("POST", "/v1/offerings",
                            {{"name", "job-gpu"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}},
                            s.admin_token()),
                  201, "job offering");
  w.job_id =
      expect_status(s.request("POST", "/v1/tenants/" + t + "/projects/" + w.project_id + "/jobs",
                              {{"name", "train"},
                               {"image", "registry.example.com/team/trainer:1"},
                               {"offering", "job-gpu"},
                               {"command", {"python", "train.py"}}},
                              token),
                    201, "job")
          .body.at("id");
  w.reservation_id = expect_status(s.request("POST", "/v1/tenants/" + t + "/reservations",
                                             {{"project", w.project_id},
                                              {"shape", {{"tier", "dedicated-gpu"}}},
                                              {"start_time", "2100-01-01T00:00:00Z"},
                                              {"duration_seconds", 3600}},
                                             token),
                                   201, "reservation")
                         .body.at("id");
  // A finalized invoice for the hour before last (operators draft and finalize invoices).
  if (s.request("GET", "/v1/rate-cards/default", nullptr, s.admin_token()).status == 404) {
    expect_status(
        s.request("POST", "/v1/rate-cards",
                  {{"id", "default"},
                   {"currency", "USD"},
                   {"effective_from", "2020-01-01T00:00:00Z"},
                   {"prices", {{{"resource_key", "gpu/H200"}, {"unit_price_micros", 1'000'000}}}}},
                  s.admin_token()),
        201, "rate card");
  }
  const TimePoint now = s.clock().now();
  w.invoice_id = expect_status(s.request("POST", "/v1/tenants/" + t + "/invoices",
                                         {{"start", format_rfc3339(now - std::chrono::hours(2))},
                                          {"end", format_rfc3339(now - std::chrono::hours(1))}},
                                         s.admin_token()),
                               201, "invoice")
                     .body.at("id");
  expect_status(s.request("POST", "/v1/tenants/" + t + "/invoices/" + w.invoice_id + "/finalize",
                          nullptr, s.admin_token()),
                200, "finalize invoice");
  expect_status(s.request("PUT", "/v1/tenants/" + t + "/budgets/" + w.project_id,
                          {{"amount_micros", 500'000'000}}, token),
                201, "budget");
  w.secret = name + "-registry";
  expect_status(s.request("POST", "/v1/tenants/" + t + "/secrets",
                          {{"name", w.secret}, {"value", name + "-s3cret"}}, token),
                201, "secret");
  expect_status(s.request("PUT", "/v1/tenants/" + t + "/projects/" + w.project_id + "/volumes",
                          {{"size_limits", {{"datasets", 1 << 20}}}}, token),
                200, "volumes");
  return w;
}

std::string fill(const std::string& pattern, const std::map<std::string, std::string>& ids) {
  std::string out;
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] != '{') {
      out += pattern[i++];
      continue;
    }
    size_t end = pattern.find('}', i);
    std::string name = pattern.substr(i + 1, end - i - 1);
    auto it = ids.find(name);
    if (it == ids.end()) throw std::runtime_error("no test value for {" + name + "} in " + pattern);
    out += it->second;
    i = end + 1;
  }
  return out;
}

Json snapshot(TestServer& s, const std::string& tenant) {
  Json out;
  out["tenant"] = expect_status(s.request("GET", "/v1/tenants/" + tenant, nullptr, s.admin_token()),
                                200, "snapshot tenant")
                      .body;
  for (const char* noun :
       {"projects", "users", "service-accounts", "api-keys", "role-bindings", "allocations",
        "reservations", "secrets", "budgets", "budget-alerts", "vms"})
    out[noun] = s.list_all(s.admin_token(), "/v1/tenants/" + tenant + "/" + noun);
  out["network"] = expect_status(s.request("GET", "/v1/tenants/" + tenant + "/network", nullptr,
                                           s.admin_token()),
                                 200, "snapshot network")
                       .body;
  out["volumes"] = expect_status(s.request("GET", "/v1/tenants/" + tenant + "/volumes", nullptr,
                                           s.admin_token()),
                                 200, "snapshot volumes")
                       .body;
  out["workload-policy"] =
      expect_status(
          s.request("GET", "/v1/tenants/" + tenant + "/workload-policy", nullptr, s.admin_token()),
          200, "snapshot workload policy")
          .body;
  out["billing-account"] =
      expect_status(
          s.request("GET", "/v1/tenants/" + tenant + "/billing-account", nullptr, s.admin_token()),
          200, "snapshot billing account")
          .body;
  out["invoices"] = s.list_all(s.admin_token(), "/v1/tenants/" + tenant + "/invoices");
  out["ssh-keys"] = expect_status(s.request("GET", "/v1/tenants/" + tenant + "/ssh-keys", nullptr,
                                            s.admin_token()),
                                  200, "snapshot ssh keys")
                        .body;
  return out;
}

}  // namespace gp::it
