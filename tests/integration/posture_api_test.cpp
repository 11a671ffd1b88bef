// Posture reports through the API: a compliant standard tenant passes every control it must
// have; breaking one thing through the API fails exactly that control, and the fleet view lists
// the tenant under it; other tenants' admins cannot read it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "integration/harness.h"

namespace gp::it {
namespace {

// A node whose agent reports its NVIDIA container toolkit refusing device lists from unprivileged
// containers' environment, so workload.gpu-device-env passes for allocations on it whatever
// their tier (the tests below are about other controls).
Json closed_toolkit_inventory(const std::string& name, int gpus) {
  Json inventory = h200_inventory(name, gpus);
  inventory["gpu_runtime"] = {{"toolkit_config", "/etc/nvidia-container-runtime/config.toml"},
                              {"toolkit_config_state", "read"},
                              {"accept_envvar_when_unprivileged", false},
                              {"accept_volume_mounts", true},
                              {"device_list_strategy", Json::array({"volume-mounts"})},
                              {"device_list_strategy_source", "flag"}};
  return inventory;
}

class Posture : public ::testing::Test {
 protected:
  TestServer s;

  struct Compliant {
    TenantInfo info;
    std::string token;  // the admin's expiring key (the initial key is revoked)
    std::string project;
    std::string base() const { return "/v1/tenants/" + info.id; }
  };

  // A standard tenant with everything its class requires: expiring keys only, a tenant quota,
  // a quota on its project, a segment (it comes with the tenant) with the default policy.
  Compliant compliant(const std::string& name) {
    Compliant t;
    t.info = s.create_tenant(name, name + "-admin");
    // The initial admin key never expires: replace it with one that does, then revoke it.
    Json key = s.create_api_key(t.info.admin_token, t.info.id,
                                {{"name", "admin-30d"},
                                 {"owner_kind", "user"},
                                 {"owner_id", t.info.admin_user_id},
                                 {"ttl_seconds", 30 * 86400}});
    t.token = key.at("token");
    std::string initial = t.info.admin_token.substr(0, t.info.admin_token.find('.'));
    expect_status(s.request("DELETE", t.base() + "/api-keys/" + initial, nullptr, t.token), 204,
                  "revoke the initial key");
    t.project = s.create_project(t.token, t.info.id, "train").at("id");
    expect_status(s.request("PUT", t.base() + "/quota", gpus(8), s.admin_token()), 200,
                  "tenant quota");
    expect_status(
        s.request("PUT", t.base() + "/projects/" + t.project + "/quota", gpus(4), t.token), 200,
        "project quota");
    return t;  // its segment came with it, the default policy with the segment
  }

  static Json gpus(double n) { return {{"models", {{"H200", {{"nominal", n}, {"limit", n}}}}}}; }

  Json posture(const Compliant& t) {
    return expect_status(s.request("GET", t.base() + "/posture", nullptr, t.token), 200,
                         "posture " + t.info.name)
        .body;
  }
  // The same report as a platform principal reads it.
  Json operators_posture(const Compliant& t) {
    return expect_status(s.request("GET", t.base() + "/posture", nullptr, s.admin_token()), 200,
                         "operators' posture " + t.info.name)
        .body;
  }

  static std::set<std::string> with_status(const Json& report, const std::string& status) {
    std::set<std::string> out;
    for (const auto& layer : report.at("layers"))
      for (const auto& c : layer.at("controls"))
        if (c.at("status") == status) out.insert(c.at("id").get<std::string>());
    return out;
  }

  static Json control(const Json& report, const std::string& id) {
    for (const auto& layer : report.at("layers"))
      for (const auto& c : layer.at("controls"))
        if (c.at("id") == id) return c;
    return nullptr;
  }

  // What a standard tenant cannot pass or fail yet: not required for its class, or facts the
  // control plane does not keep yet.
  const std::set<std::string> kNotApplicable = {
      "hardware.node-exclusive",   "network.tls",         "storage.secrets-encrypted",
      "storage.data-key-rotation", "audit.request-level", "audit.retention",
      "storage.volumes-encrypted"};
};

TEST_F(Posture, CompliantTenantPassesEveryRequiredControl) {
  auto t = compliant("acme");
  Json r = posture(t);
  EXPECT_EQ(r.at("tenant").at("id"), t.info.id);
  EXPECT_EQ(r.at("isolation_class"), "standard");
  EXPECT_EQ(with_status(r, "fail"), std::set<std::string>{}) << r.dump(2);
  EXPECT_EQ(with_status(r, "not_applicable"), kNotApplicable) << r.dump(2);
  std::vector<std::string> layers;
  for (const auto& l : r.at("layers")) layers.push_back(l.at("layer"));
  EXPECT_EQ(layers, (std::vector<std::string>{"identity", "hardware", "scheduling", "network",
                                              "storage", "workload", "metering", "audit"}));
  // Evidence shows what was looked at: the segment the tenant got, the verified chain.
  Json seg = control(r, "network.segment");
  EXPECT_EQ(seg.at("evidence").at("seen").at("vni"), 10000) << seg.dump(2);
  Json chain = control(r, "audit.chain");
  EXPECT_GT(chain.at("evidence").at("seen").at("records_checked").get<int>(), 5) << chain.dump(2);
  Json probe = control(r, "workload.block-privileged");
  EXPECT_NE(probe.at("summary").get<std::string>().find("privileged"), std::string::npos);
}

TEST_F(Posture, AFreshTenantLacksOnlyQuota) {
  auto t = s.create_tenant("fresh", "fresh-admin");
  auto r = s.request("GET", "/v1/tenants/" + t.id + "/posture", nullptr, t.admin_token);
  ASSERT_EQ(r.status, 200) << r.raw;
  // The initial admin key expires (90 days), so key expiry passes, and the segment comes with
  // the tenant; the quota is what onboarding still has to set.
  EXPECT_EQ(with_status(r.body, "fail"), (std::set<std::string>{"scheduling.tenant-quota"}))
      << r.raw;
  EXPECT_EQ(control(r.body, "network.segment").at("status"), "pass");
  EXPECT_EQ(control(r.body, "identity.api-key-expiry").at("status"), "pass");
}

TEST_F(Posture, KeyWithoutExpiryFailsOnlyKeyExpiry) {
  auto t = compliant("acme");
  auto sa = s.create_service_account(t.token, t.info.id, "ci");
  Json key = s.create_api_key(
      t.token, t.info.id,
      {{"name", "forever"}, {"owner_kind", "service_account"}, {"owner_id", sa.at("id")}});
  Json r = posture(t);
  EXPECT_EQ(with_status(r, "fail"), std::set<std::string>{"identity.api-key-expiry"}) << r.dump(2);
  Json c = control(r, "identity.api-key-expiry");
  EXPECT_EQ(c.at("evidence").at("seen").at("without_expiry")[0].at("id"), key.at("id"));
  // Revoking it restores the pass.
  expect_status(s.request("DELETE", t.base() + "/api-keys/" + key.at("id").get<std::string>(),
                          nullptr, t.token),
                204, "revoke");
  EXPECT_EQ(with_status(posture(t), "fail"), std::set<std::string>{});
}

TEST_F(Posture, ProjectWithoutQuotaFailsOnlyProjectQuotas) {
  auto t = compliant("acme");
  s.create_project(t.token, t.info.id, "adhoc");
  Json r = posture(t);
  EXPECT_EQ(with_status(r, "fail"), std::set<std::string>{"scheduling.project-quotas"})
      << r.dump(2);
  EXPECT_EQ(control(r, "scheduling.project-quotas").at("evidence").at("seen").at("without_quota"),
            Json::array({"adhoc"}));
}

TEST_F(Posture, AllowAllEgressFailsOnlyExplicitEgress) {
  auto t = compliant("acme");
  expect_status(
      s.request(
          "PUT", t.base() + "/network/policy",
          {{"egress", Json::array({{{"destination", "198.51.100.0/24"}, {"protocol", "any"}}})},
           {"exposures", Json::array()}},
          t.token),
      200, "policy");
  Json r = posture(t);
  EXPECT_EQ(with_status(r, "fail"), std::set<std::string>{"network.explicit-egress"}) << r.dump(2);
}

TEST_F(Posture, RaisingTheClassAboveALiveAllocationFailsTierMinimum) {
  Json nodes = Json::array({{{"inventory", closed_toolkit_inventory("gpu-a", 8)}}});
  expect_status(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, s.admin_token()), 201,
                "import");
  expect_status(s.request("POST", "/v1/offerings",
                          {{"name", "h200-mig-3g"},
                           {"tier", "mig"},
                           {"models", {"H200"}},
                           {"mig_profile", "3g.71gb"}},
                          s.admin_token()),
                201, "offering");
  auto t = compliant("acme");
  auto a = s.request("POST", t.base() + "/projects/" + t.project + "/allocations",
                     {{"offering", "h200-mig-3g"}, {"count", 1}}, t.token);
  ASSERT_EQ(a.status, 201) << a.raw;
  EXPECT_EQ(with_status(posture(t), "fail"), std::set<std::string>{});
  // Sensitive needs dedicated GPUs; the mig allocation it already holds is now below that. The
  // class also brings its own controls: request-level audit fails (reads are not audited).
  expect_status(s.request("PATCH", t.base(), {{"isolation_class", "sensitive"}}, s.admin_token()),
                200, "class");
  Json r = posture(t);
  EXPECT_EQ(with_status(r, "fail"),
            (std::set<std::string>{"hardware.tier-minimum", "audit.request-level"}))
      << r.dump(2);
  Json c = control(r, "hardware.tier-minimum");
  EXPECT_EQ(c.at("evidence").at("seen").at("below_minimum")[0].at("allocation"), a.body.at("id"));
  // Required now, and passing: the tenant's secrets are sealed with its own key.
  EXPECT_EQ(control(r, "storage.secrets-encrypted").at("status"), "pass");
}

TEST_F(Posture, ALiveAllocationWithoutAnOpenUsageIntervalFailsUsageRecorded) {
  Json nodes = Json::array({{{"inventory", closed_toolkit_inventory("gpu-a", 8)}}});
  expect_status(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, s.admin_token()), 201,
                "import");
  auto t = compliant("acme");
  auto a =
      s.request("POST", t.base() + "/projects/" + t.project + "/allocations",
                {{"shape", {{"tier", "mig"}, {"mig_profile", "3g.71gb"}, {"count", 1}}}}, t.token);
  ASSERT_EQ(a.status, 201) << a.raw;
  Json before = control(posture(t), "metering.usage-recorded");
  EXPECT_EQ(before.at("status"), "pass") << before.dump(2);
  // Close the interval behind the control plane's back: the allocation still holds its GPU.
  const std::string id = a.body.at("id");
  auto closed = s.store().write([&](store::Tx& tx) -> Result<void> {
    GP_TRY(
        tx.exec("UPDATE usage_intervals SET end_us = start_us + 1 WHERE allocation_id = ?", {id}));
    return ok();
  });
  ASSERT_TRUE(closed) << closed.error().message;
  Json r = posture(t);
  EXPECT_EQ(with_status(r, "fail"), std::set<std::string>{"metering.usage-recorded"}) << r.dump(2);
  EXPECT_EQ(control(r, "metering.usage-recorded").at("evidence").at("seen").at("without_usage"),
            Json::array({id}));
}

TEST_F(Posture, AVolumeOwnedOutsideTheTenantsIdsFailsPrivateVolumes) {
  auto t = compliant("acme");
  auto v = s.request("PUT", t.base() + "/projects/" + t.project + "/volumes", Json::object(),
                     s.admin_token());
  ASSERT_EQ(v.status, 200) << v.raw;
  Json before = control(posture(t), "storage.private-volumes");
  EXPECT_EQ(before.at("status"), "pass") << before.dump(2);
  EXPECT_EQ(before.at("evidence").at("seen").at("volumes"), 6) << before.dump(2);
  // A project id moved outside the tenant's range behind the API's back.
  auto moved = s.store().write([&](store::Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("UPDATE project_volumes SET uid = 5 WHERE tenant_id = ?", {t.info.id}));
    return ok();
  });
  ASSERT_TRUE(moved) << moved.error().message;
  Json r = posture(t);
  EXPECT_EQ(with_status(r, "fail"), std::set<std::string>{"storage.private-volumes"}) << r.dump(2);
}

TEST_F(Posture, SharedNodesShowToOperatorsAndFailWhenTheClassDemandsDedicatedNodes) {
  // One node with two GPUs: two tenants with one dedicated GPU each must share it.
  Json nodes = Json::array({{{"inventory", h200_inventory("gpu-a", 2)}}});
  expect_status(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, s.admin_token()), 201,
                "import");
  auto a = compliant("acme");
  auto b = compliant("bravo");
  std::string alloc_a;
  for (const auto* t : {&a, &b}) {
    auto r = s.request("POST", t->base() + "/projects/" + t->project + "/allocations",
                       {{"shape", {{"tier", "dedicated-gpu"}}}}, t->token);
    ASSERT_EQ(r.status, 201) << r.raw;
    ASSERT_EQ(r.body.at("state"), "placed") << r.raw;
    if (t == &a) alloc_a = r.body.at("id");
  }
  // Operators see the shared node, with how many other tenants share it.
  Json c = control(operators_posture(a), "hardware.node-exclusive");
  EXPECT_EQ(c.at("status"), "not_applicable");  // standard may share nodes
  Json shared = c.at("evidence").at("seen").at("shared_nodes");
  ASSERT_EQ(shared.size(), 1u) << c.dump(2);
  EXPECT_EQ(shared[0].at("node"), "gpu-a");
  EXPECT_EQ(shared[0].at("allocation"), alloc_a);
  EXPECT_EQ(shared[0].at("other_tenants"), 1);
  // The tenant's own report names its allocation's tier, never its neighbours.
  Json mine = control(posture(a), "hardware.node-exclusive");
  EXPECT_TRUE(mine.at("evidence").at("seen").at("shared_nodes").empty()) << mine.dump(2);
  Json may_share = mine.at("evidence").at("seen").at("on_tiers_that_share_nodes");
  ASSERT_EQ(may_share.size(), 1u) << mine.dump(2);
  EXPECT_EQ(may_share[0].at("allocation"), alloc_a);
  // Regulated: the dedicated-gpu tier it now sits below fails; operators also see the shared
  // node fail node-exclusive.
  expect_status(s.request("PATCH", a.base(), {{"isolation_class", "regulated"}}, s.admin_token()),
                200, "class");
  // (The imported node reports no GPU runtime settings and the dedicated-gpu tier shares nodes,
  // so workload.gpu-device-env fails at any class, neighbour or not.)
  const std::set<std::string> failing = {"hardware.tier-minimum", "network.tls",
                                         "audit.request-level", "workload.gpu-device-env"};
  Json r = posture(a);
  EXPECT_EQ(with_status(r, "fail"), failing) << r.dump(2);
  std::set<std::string> operators_failing = failing;
  operators_failing.insert("hardware.node-exclusive");
  EXPECT_EQ(with_status(operators_posture(a), "fail"), operators_failing);
  // Releasing B's allocation ends the sharing, which operators see. The tenant's report stays
  // as it was.
  const Json before = control(posture(a), "hardware.node-exclusive");
  auto list = s.request("GET", b.base() + "/allocations", nullptr, b.token);
  ASSERT_EQ(list.status, 200) << list.raw;
  std::string alloc_b = list.body.at("items")[0].at("id");
  expect_status(
      s.request("POST",
                b.base() + "/projects/" + b.project + "/allocations/" + alloc_b + "/release",
                Json::object(), b.token),
      200, "release");
  EXPECT_FALSE(with_status(operators_posture(a), "fail").contains("hardware.node-exclusive"));
  EXPECT_EQ(control(posture(a), "hardware.node-exclusive"), before);
}

// The tenant's report is no co-residency oracle: another tenant placing work beside the
// tenant's allocation changes nothing in it.
TEST_F(Posture, ATenantsReportDoesNotChangeWhenANeighbourArrives) {
  Json nodes = Json::array({{{"inventory", h200_inventory("gpu-a", 2)}}});
  expect_status(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, s.admin_token()), 201,
                "import");
  auto a = compliant("acme");
  auto b = compliant("bravo");
  auto mine = s.request("POST", a.base() + "/projects/" + a.project + "/allocations",
                        {{"shape", {{"tier", "dedicated-gpu"}}}}, a.token);
  ASSERT_EQ(mine.status, 201) << mine.raw;
  // Every layer, audit included: it counts the tenant's own records, never the trail's total.
  auto layers = [&] { return posture(a).at("layers"); };
  const Json alone = layers();
  ASSERT_GE(alone.size(), 5u);
  auto theirs = s.request("POST", b.base() + "/projects/" + b.project + "/allocations",
                          {{"shape", {{"tier", "dedicated-gpu"}}}}, b.token);
  ASSERT_EQ(theirs.status, 201) << theirs.raw;
  ASSERT_EQ(theirs.body.at("placement").at("nodes")[0], mine.body.at("placement").at("nodes")[0])
      << "the two allocations must share the node";
  // The neighbour's own work leaves records in the trail too.
  s.create_project(b.token, b.info.id, "more");
  const Json beside = layers();
  EXPECT_EQ(beside, alone) << beside.dump(2);
  EXPECT_EQ(posture(a).dump().find("other_tenants"), std::string::npos);
}

TEST_F(Posture, FleetViewListsWhichTenantsFailWhichControls) {
  auto good = compliant("acme");
  auto bad = compliant("bravo");
  s.create_project(bad.token, bad.info.id, "adhoc");
  auto r = s.request("GET", "/v1/posture", nullptr, s.admin_token());
  ASSERT_EQ(r.status, 200) << r.raw;
  std::map<std::string, Json> rows;
  std::vector<std::string> names;
  for (const auto& row : r.body.at("tenants")) {
    rows[row.at("name")] = row;
    names.push_back(row.at("name"));
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << r.raw;
  ASSERT_TRUE(rows.contains("acme") && rows.contains("bravo")) << r.raw;
  EXPECT_EQ(rows["acme"].at("fail"), 0);
  EXPECT_EQ(rows["bravo"].at("failing"), Json::array({"scheduling.project-quotas"}));
  EXPECT_EQ(rows["bravo"].at("controls").at("scheduling.project-quotas"), "fail");
  for (const auto& c : r.body.at("controls"))
    if (c.at("id") == "scheduling.project-quotas") {
      EXPECT_EQ(c.at("failing_tenants"), 1);
    }
  EXPECT_GE(r.body.at("counts").at("failing_tenants").get<int>(), 1);

  // An offboarded tenant leaves the matrix: it is listed apart and fails nothing.
  ASSERT_EQ(s.request("DELETE", "/v1/tenants/" + bad.info.id, nullptr, s.admin_token()).status,
            200);
  auto after = s.request("GET", "/v1/posture", nullptr, s.admin_token());
  ASSERT_EQ(after.status, 200) << after.raw;
  EXPECT_EQ(after.body.at("offboarding"), Json::array({"bravo"})) << after.raw;
  for (const auto& row : after.body.at("tenants")) EXPECT_NE(row.at("name"), "bravo");
}

TEST_F(Posture, OnlyTheTenantsAdminsAuditorsAndOperatorsReadIt) {
  auto a = compliant("acme");
  auto b = compliant("bravo");
  // Another tenant's admin: the tenant does not exist for it.
  auto other = s.request("GET", a.base() + "/posture", nullptr, b.token);
  EXPECT_TRUE(IsProblem(other, 404, "not_found")) << other.raw;
  // A member of the tenant without identity.read: forbidden.
  auto user = s.create_user(a.token, a.info.id, "dev");
  s.create_binding(a.token, a.info.id, "project-member", "user", user.at("id"), a.project);
  std::string dev = s.key_for(a.token, a.info.id, user.at("id"));
  EXPECT_TRUE(IsProblem(s.request("GET", a.base() + "/posture", nullptr, dev), 403));
  // Tenant admins never see the fleet.
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/posture", nullptr, a.token), 403));
  // Platform auditors and operators read both.
  for (const std::string role : {"auditor", "platform-operator"}) {
    auto u = expect_status(
        s.request("POST", "/v1/users", {{"username", role + "-user"}}, s.admin_token()), 201,
        "platform user");
    expect_status(
        s.request("POST", "/v1/role-bindings",
                  {{"role", role}, {"subject_kind", "user"}, {"subject_id", u.body["id"]}},
                  s.admin_token()),
        201, "bind " + role);
    auto key = expect_status(s.request("POST", "/v1/api-keys",
                                       {{"name", "k"},
                                        {"owner_kind", "user"},
                                        {"owner_id", u.body["id"]},
                                        {"ttl_seconds", 3600}},
                                       s.admin_token()),
                             201, "key");
    std::string token = key.body.at("token");
    EXPECT_EQ(s.request("GET", a.base() + "/posture", nullptr, token).status, 200) << role;
    EXPECT_EQ(s.request("GET", "/v1/posture", nullptr, token).status, 200) << role;
  }
}

}  // namespace
}  // namespace gp::it
