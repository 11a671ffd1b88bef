// Scheduling through the API: offerings, quotas and allocations against a real server with a
// fleet imported through the API. Each test states one rule operators and tenants rely on.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "fleet/fleet.h"
#include "integration/harness.h"

namespace gp::it {
namespace {

class Sched : public ::testing::Test {
 protected:
  TestServer s;
  std::string admin;

  void SetUp() override {
    admin = s.admin_token();
    Json nodes = Json::array();
    nodes.push_back({{"inventory", h200_inventory("gpu-a", 8)}});
    nodes.push_back({{"inventory", h200_inventory("gpu-b", 8, "r2")}});
    auto r = s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, admin);
    ASSERT_EQ(r.status, 201) << r.raw;
    for (Json o : {Json{{"name", "h200-1x"}, {"tier", "dedicated-gpu"}, {"models", {"H200"}}},
                   Json{{"name", "h200-8x-node"},
                        {"tier", "dedicated-node"},
                        {"models", {"H200"}},
                        {"gpus", 8}},
                   Json{{"name", "h200-mig-3g"},
                        {"tier", "mig"},
                        {"models", {"H200"}},
                        {"mig_profile", "3g.71gb"}},
                   Json{{"name", "h200-shared-250"},
                        {"tier", "shared"},
                        {"models", {"H200"}},
                        {"milli", 250}}}) {
      auto c = s.request("POST", "/v1/offerings", o, admin);
      ASSERT_EQ(c.status, 201) << c.raw;
    }
  }

  struct Tenant {
    TenantInfo info;
    std::string project;
    std::string base() const { return "/v1/tenants/" + info.id + "/projects/" + project; }
  };

  Tenant tenant(const std::string& name, const std::string& cls, Json quota) {
    Tenant t;
    t.info = s.create_tenant(name, name + "-admin");
    auto p = s.request("PATCH", "/v1/tenants/" + t.info.id, {{"isolation_class", cls}}, admin);
    EXPECT_EQ(p.status, 200) << p.raw;
    t.project = s.create_project(t.info.admin_token, t.info.id, name + "-prj").at("id");
    if (!quota.is_null()) {
      auto q = s.request("PUT", "/v1/tenants/" + t.info.id + "/quota", quota, admin);
      EXPECT_EQ(q.status, 200) << q.raw;
    }
    return t;
  }

  Resp allocate(const Tenant& t, const Json& body, const std::string& query = "") {
    return s.request("POST", t.base() + "/allocations" + query, body, t.info.admin_token);
  }
  Json get(const Tenant& t, const std::string& id) {
    auto r = s.request("GET", t.base() + "/allocations/" + id, nullptr, t.info.admin_token);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }
  // POST /v1/agent/enroll of a node with `inventory`, through a join token made for it.
  Resp enroll_agent(const Json& inventory) {
    auto jt = s.request("POST", "/v1/join-tokens", Json::object(), admin);
    EXPECT_EQ(jt.status, 201) << jt.raw;
    return s.request("POST", "/v1/agent/enroll",
                     {{"join_token", jt.body["token"]}, {"inventory", inventory}});
  }
  // An agent's node with one whole H200, enrolled, the imported nodes filled, and a 3g MIG
  // allocation of acme's that can only land on the agent's GPU (which must become MIG for it).
  struct MigOnAgent {
    Tenant t;
    Json inventory, mig;
    std::string node_token, node_id, gpu;
  };
  MigOnAgent mig_on_agent(const std::string& node) {
    MigOnAgent m;
    m.inventory = h200_inventory(node, 1, "r9");
    auto enrolled = enroll_agent(m.inventory);
    EXPECT_EQ(enrolled.status, 201) << enrolled.raw;
    m.node_token = enrolled.body.value("credential", "");
    m.node_id = enrolled.body["node"].value("id", "");
    m.gpu = m.inventory["gpus"][0]["uuid"];
    m.t = tenant("acme", "standard", {{"models", {{"H200", {{"nominal", 17}}}}}});
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(
          allocate(m.t,
                   {{"offering", "h200-1x"}, {"count", 8}, {"constraints", {{"same_node", true}}}})
              .body["state"],
          "placed");
    m.mig = allocate(m.t, {{"offering", "h200-mig-3g"}}).body;
    return m;
  }
};

Json gpus(double nominal, std::optional<double> limit = std::nullopt) {
  Json m = {{"nominal", nominal}};
  if (limit) m["limit"] = *limit;
  return {{"models", {{"H200", m}}}};
}

TEST_F(Sched, QuotaReachedWhileGpusAreFreeWaitsWithQuotaExceeded) {
  auto t = tenant("acme", "standard", gpus(2));
  auto first = allocate(t, {{"offering", "h200-1x"}, {"count", 2}});
  ASSERT_EQ(first.status, 201) << first.raw;
  EXPECT_EQ(first.body["state"], "placed");
  EXPECT_EQ(first.body["placement"]["gpus"].size(), 2u);

  auto second = allocate(t, {{"offering", "h200-1x"}});
  ASSERT_EQ(second.status, 201) << second.raw;
  EXPECT_EQ(second.body["state"], "pending");
  EXPECT_EQ(second.body["reason_code"], "quota_exceeded");
  EXPECT_NE(second.body["reason"].get<std::string>().find("tenant level"), std::string::npos)
      << second.body["reason"];
  // Named as people know the tenant, not by its id.
  EXPECT_NE(second.body["reason"].get<std::string>().find("tenant acme "), std::string::npos)
      << second.body["reason"];

  // Why: 14 GPUs are free; the tenant quota is what holds it.
  auto why =
      s.request("GET", t.base() + "/allocations/" + second.body["id"].get<std::string>() + "/why",
                nullptr, t.info.admin_token);
  ASSERT_EQ(why.status, 200) << why.raw;
  EXPECT_TRUE(why.body["capacity"]["fits_now"].get<bool>()) << why.raw;
  EXPECT_EQ(why.body["queue"]["position"], 1);
  EXPECT_EQ(why.body["quota"][0]["tenant"]["used"], 2.0);
  EXPECT_EQ(why.body["quota"][0]["tenant"]["nominal"], 2.0);

  // Releasing the first lets the second in, at once.
  auto rel = s.request(
      "POST", t.base() + "/allocations/" + first.body["id"].get<std::string>() + "/release",
      Json::object(), t.info.admin_token);
  ASSERT_EQ(rel.status, 200) << rel.raw;
  EXPECT_EQ(rel.body["state"], "released");
  Json now = get(t, second.body["id"]);
  EXPECT_EQ(now["state"], "placed") << now.dump();
  // Its history says how it got there.
  ASSERT_GE(now["events"].size(), 2u);
  EXPECT_EQ(now["events"][0]["to"], "pending");
  EXPECT_EQ(now["events"].back()["to"], "placed");
}

// A placement's reason says what was given in the holder's terms: the MIG profile, the share,
// the GPUs, by node name.
TEST_F(Sched, APlacementSaysWhatItGaveByProfileAndNodeName) {
  auto t = tenant("acme", "internal", gpus(16));  // internal: time-sliced shares allowed
  auto reason = [&](const Json& body) {
    auto r = allocate(t, body);
    EXPECT_EQ(r.status, 201) << r.raw;
    EXPECT_EQ(r.body["state"], "placed") << r.raw;
    // The create answers what it wrote (not read back): the same as a read of it, less what
    // only a read of one allocation adds (its events and its GPUs' configuration).
    Json read = get(t, r.body.value("id", ""));
    for (const char* extra : {"events", "configuring", "stopping"}) read.erase(extra);
    EXPECT_EQ(r.body, read) << r.raw;
    return r.body.value("reason", "");
  };
  auto mig = reason({{"offering", "h200-mig-3g"}});
  EXPECT_TRUE(mig.starts_with("placed 1 x 3g.71gb MIG instance of H200 on gpu-")) << mig;
  auto two =
      reason({{"offering", "h200-1x"}, {"count", 2}, {"constraints", {{"same_node", true}}}});
  EXPECT_TRUE(two.starts_with("placed 2 H200 GPUs on gpu-")) << two;
  auto share = reason({{"offering", "h200-shared-250"}});
  EXPECT_TRUE(share.starts_with("placed a 0.25 share of one H200 GPU on gpu-")) << share;
  EXPECT_EQ(mig.find("nod_"), std::string::npos) << "a node id instead of its name: " << mig;
  // The JSON placement names its nodes beside their ids.
  auto listed = s.request("GET", t.base() + "/allocations?limit=10", nullptr, t.info.admin_token);
  ASSERT_EQ(listed.status, 200) << listed.raw;
  ASSERT_EQ(listed.body["items"].size(), 3u) << listed.raw;
  for (const auto& a : listed.body["items"]) {
    const Json& p = a["placement"];
    ASSERT_EQ(p["node_names"].size(), p["nodes"].size()) << p.dump();
    EXPECT_TRUE(p["node_names"][0].get<std::string>().starts_with("gpu-")) << p.dump();
    EXPECT_TRUE(p["gpus"][0]["node_name"].get<std::string>().starts_with("gpu-")) << p.dump();
  }
  // The fleet map draws the same holdings under the tenant's name.
  auto map = s.request_raw("GET", "/v1/fleet/map.svg", "", admin);
  ASSERT_EQ(map.status, 200);
  // The MIG instance's GPU turns MIG when its agent applies the plan; until then it is a band.
  EXPECT_NE(map.raw.find("<title>acme (3g.71gb MIG instance at slice "), std::string::npos);
  EXPECT_NE(map.raw.find("<title>acme (250 milli-GPU)</title>"), std::string::npos);
  EXPECT_NE(map.raw.find("<title>held by acme</title>"), std::string::npos);
}

TEST_F(Sched, ClassDecidesTheWeakestTier) {
  auto reg = tenant("bank", "regulated", gpus(16));
  auto r = allocate(reg, {{"offering", "h200-1x"}});
  EXPECT_TRUE(IsProblem(r, 400, "invalid_argument"));
  EXPECT_NE(r.body["detail"].get<std::string>().find("regulated"), std::string::npos) << r.raw;
  // A whole node is fine for it.
  auto node = allocate(reg, {{"offering", "h200-8x-node"}});
  ASSERT_EQ(node.status, 201) << node.raw;
  EXPECT_EQ(node.body["state"], "placed");
  EXPECT_TRUE(node.body["placement"]["whole_nodes"].get<bool>());

  auto std_tenant = tenant("shop", "standard", gpus(4));
  EXPECT_TRUE(IsProblem(allocate(std_tenant, {{"offering", "h200-shared-250"}}), 400));
  // The catalog as each tenant sees it.
  auto cat = s.request("GET", "/v1/tenants/" + std_tenant.info.id + "/offerings", nullptr,
                       std_tenant.info.admin_token);
  ASSERT_EQ(cat.status, 200);
  for (const auto& o : cat.body["items"])
    EXPECT_EQ(o["allowed"].get<bool>(), o["tier"] != "shared") << o.dump();
  // The regulated tenant's node is nobody else's: 8 more GPUs of the other node only.
  auto other = allocate(std_tenant, {{"offering", "h200-1x"}, {"count", 4}});
  ASSERT_EQ(other.status, 201);
  for (const auto& g : other.body["placement"]["gpus"])
    EXPECT_NE(g["node"], node.body["placement"]["nodes"][0]) << other.raw;
}

// A request over a hard limit can never be placed by waiting: refused at once, naming the level
// and the limit, and a dry run says the same; under the limit it waits as before.
TEST_F(Sched, ARequestOverAHardLimitIsRefusedAtOnceNotQueued) {
  auto t = tenant("acme", "standard", gpus(4, 4));
  for (const std::string query : {"", "?dry_run=true"}) {
    auto r = allocate(t, {{"offering", "h200-1x"}, {"count", 9}}, query);
    EXPECT_TRUE(IsProblem(r, 409, "quota_exceeded")) << query << ": " << r.raw;
    const std::string detail = r.body.value("detail", "");
    EXPECT_NE(detail.find("tenant level"), std::string::npos) << detail;
    EXPECT_NE(detail.find("limit of 4"), std::string::npos) << detail;
  }
  auto list = s.request("GET", t.base() + "/allocations", nullptr, t.info.admin_token);
  EXPECT_EQ(list.body["items"].size(), 0u) << "nothing was queued";
  ASSERT_EQ(allocate(t, {{"offering", "h200-1x"}, {"count", 3}}).body["state"], "placed");
  auto waits = allocate(t, {{"offering", "h200-1x"}, {"count", 2}});
  ASSERT_EQ(waits.status, 201) << waits.raw;
  EXPECT_EQ(waits.body["reason_code"], "quota_exceeded") << "2 fit once the 3 are released";
}

TEST_F(Sched, DryRunAnswersWithoutChangingAnything) {
  auto t = tenant("acme", "standard", gpus(8));
  auto r = allocate(t, {{"offering", "h200-mig-3g"}, {"count", 2}}, "?dry_run=true");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_TRUE(r.body["would_place"].get<bool>());
  EXPECT_EQ(r.body["placement"]["gpus"].size(), 2u);
  EXPECT_EQ(r.body["placement"]["model"], "H200");
  auto list = s.request("GET", t.base() + "/allocations", nullptr, t.info.admin_token);
  EXPECT_EQ(list.body["items"].size(), 0u);
  // Over quota: it says so.
  auto over = allocate(t, {{"offering", "h200-1x"}, {"count", 9}}, "?dry_run=true");
  ASSERT_EQ(over.status, 200) << over.raw;
  EXPECT_FALSE(over.body["would_place"].get<bool>());
  EXPECT_EQ(over.body["reason_code"], "quota_exceeded");
}

TEST_F(Sched, MigAllocationsPlanTheLayoutAndCountBySlices) {
  auto t = tenant("acme", "standard", gpus(1));
  auto r = allocate(t, {{"offering", "h200-mig-3g"}, {"count", 2}});
  ASSERT_EQ(r.status, 201) << r.raw;
  ASSERT_EQ(r.body["state"], "placed") << r.raw;
  const Json& p = r.body["placement"];
  // Two 3g instances are 6/7 of a GPU: within a quota of 1.
  EXPECT_EQ(p["units"], 6000);
  EXPECT_FALSE(p["mode_changes"].empty() && p["mig_changes"].empty()) << p.dump();
  // A third 3g instance would be 9/7 GPU: over quota even though the GPU has room.
  auto third = allocate(t, {{"offering", "h200-mig-3g"}});
  ASSERT_EQ(third.status, 201);
  EXPECT_EQ(third.body["reason_code"], "quota_exceeded");
}

TEST_F(Sched, ImpossibleRequestsAreRejectedAtOnceAndStoreNothing) {
  auto t = tenant("acme", "standard", gpus(16));
  auto bad = [&](const Json& body, std::string_view word) {
    auto r = allocate(t, body);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << body.dump();
    EXPECT_NE(r.body["detail"].get<std::string>().find(word), std::string::npos)
        << body.dump() << " -> " << r.body["detail"];
  };
  bad({{"offering", "h900-1x"}}, "unknown offering");
  bad({{"offering", "h200-1x"}, {"count", 0}}, "count");
  bad({{"offering", "h200-1x"}, {"count", -3}}, "count");
  bad({{"offering", "h200-1x"}, {"count", 17}}, "can ever hold");
  bad({{"shape", {{"tier", "dedicated-gpu"}, {"count", 9}}},
       {"constraints", {{"same_node", true}}}},
      "same_node");
  bad({{"offering", "h200-8x-node"}, {"count", 2}, {"constraints", {{"same_node", true}}}},
      "same_node");
  bad({{"shape", {{"tier", "mig"}, {"mig_profile", "5g.99gb"}}}}, "MIG profile");
  bad({{"offering", "h200-1x"}, {"constraints", {{"models", {"A100-80GB"}}}}}, "in common");
  bad({{"offering", "h200-1x"}, {"shape", {{"tier", "mig"}}}}, "either");
  bad({{"offering", "h200-1x"}, {"colour", "blue"}}, "colour");
  bad({{"offering", "h200-1x"}, {"priority_class", "urgent"}}, "priority_class");
  bad({{"offering", "h200-1x"}, {"end_time", "2020-01-01T00:00:00Z"}}, "past");
  bad({{"shape", {{"tier", "shared"}, {"milli", 250}, {"count", 1}}}}, "standard");
  auto list = s.request("GET", t.base() + "/allocations", nullptr, t.info.admin_token);
  EXPECT_EQ(list.body["items"].size(), 0u);
}

// Offerings delivered as VMs (docs/vms.md): MIG and shared units become the vGPU type of their
// profile or share on each model; bad shapes are refused and store nothing.
TEST_F(Sched, VmOfferingsNameTheirVgpuTypesAndRefuseImpossibleShapes) {
  Json vm = {{"vcpus", 16}, {"memory_mib", 131072}};
  auto made = s.request("POST", "/v1/offerings",
                        {{"name", "h200-vm-3g"},
                         {"tier", "mig"},
                         {"models", {"H200"}},
                         {"mig_profile", "3g.71gb"},
                         {"delivery", "vm"},
                         {"vm", vm}},
                        admin);
  ASSERT_EQ(made.status, 201) << made.raw;
  EXPECT_EQ(made.body["delivery"], "vm");
  EXPECT_EQ(made.body["vm"]["vgpu_types"]["H200"], "H200-3-71C");
  EXPECT_EQ(made.body["vm"]["memory_mib"], 131072);
  auto shared = s.request("POST", "/v1/offerings",
                          {{"name", "h200-vm-quarter"},
                           {"tier", "shared"},
                           {"models", {"H200"}},
                           {"milli", 250},
                           {"delivery", "vm"},
                           {"vm", vm}},
                          admin);
  ASSERT_EQ(shared.status, 201) << shared.raw;
  EXPECT_EQ(shared.body["vm"]["vgpu_types"]["H200"], "H200-35C");
  auto whole = s.request("GET", "/v1/offerings/h200-1x", nullptr, admin);
  EXPECT_EQ(whole.body["delivery"], "container");
  EXPECT_TRUE(whole.body["vm"].is_null());

  auto bad = [&](Json body, std::string_view word) {
    body["name"] = "h200-vm-bad";
    auto r = s.request("POST", "/v1/offerings", body, admin);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << body.dump() << " -> " << r.raw;
    EXPECT_NE(r.body["detail"].get<std::string>().find(word), std::string::npos)
        << body.dump() << " -> " << r.body["detail"];
  };
  Json gpu = {{"tier", "dedicated-gpu"}, {"models", {"H200"}}};
  auto with = [](Json a, const Json& b) {
    a.update(b);
    return a;
  };
  bad(with(gpu, {{"delivery", "vm"}}), "vm: {vcpus");
  bad(with(gpu, {{"delivery", "bare-metal"}}), "unknown delivery");
  bad(with(gpu, {{"vm", vm}}), "delivery vm");
  bad(with(gpu, {{"delivery", "vm"}, {"vm", {{"vcpus", 0}, {"memory_mib", 1024}}}}), "vcpus");
  bad(with(gpu, {{"delivery", "vm"}, {"vm", with(vm, {{"disk", 1}})}}), "disk");
  bad({{"tier", "shared"}, {"models", {"H200"}}, {"milli", 300}, {"delivery", "vm"}, {"vm", vm}},
      "time-sliced");
  EXPECT_EQ(s.request("GET", "/v1/offerings/h200-vm-bad", nullptr, admin).status, 404);
}

TEST_F(Sched, HigherPriorityPreemptsTheTenantsOwnPreemptibleWork) {
  auto t = tenant("acme", "standard", gpus(16));
  auto low = allocate(
      t,
      {{"offering", "h200-1x"}, {"count", 16}, {"priority_class", "low"}, {"preemptible", true}});
  ASSERT_EQ(low.body["state"], "placed") << low.raw;
  auto high = allocate(t, {{"offering", "h200-1x"}, {"count", 4}, {"priority_class", "high"}});
  ASSERT_EQ(high.status, 201) << high.raw;
  EXPECT_EQ(high.body["state"], "placed") << high.raw;
  Json victim = get(t, low.body["id"]);
  EXPECT_EQ(victim["state"], "preempted");
  EXPECT_EQ(victim["reason_code"], "preempted");
  EXPECT_FALSE(victim["grace_until"].is_null());
  // Not preemptible: a high-priority request waits instead.
  auto solid = allocate(t, {{"offering", "h200-1x"}, {"count", 12}});
  ASSERT_EQ(solid.body["state"], "placed") << solid.raw;
  auto again = allocate(t, {{"offering", "h200-1x"}, {"priority_class", "critical"}});
  EXPECT_EQ(again.body["state"], "pending") << again.raw;
}

TEST_F(Sched, LenderReclaimsBorrowedCapacity) {
  Json a_quota = gpus(8);
  a_quota["cohort"] = "research";
  Json b_quota = gpus(8);
  b_quota["cohort"] = "research";
  auto a = tenant("alpha", "standard", a_quota);
  auto b = tenant("beta", "standard", b_quota);
  // Beta borrows alpha's idle half: 16 GPUs.
  auto borrow = allocate(b, {{"offering", "h200-1x"}, {"count", 16}});
  ASSERT_EQ(borrow.body["state"], "placed") << borrow.raw;
  EXPECT_EQ(borrow.body["borrowed_gpu_equivalents"], "8 GPU") << borrow.raw;
  // Alpha asks for its nominal quota back: beta's borrowed allocation goes.
  auto mine = allocate(a, {{"offering", "h200-1x"}, {"count", 8}});
  ASSERT_EQ(mine.body["state"], "placed") << mine.raw;
  Json lost = get(b, borrow.body["id"]);
  EXPECT_EQ(lost["state"], "preempted");
  EXPECT_EQ(lost["reason_code"], "reclaimed");
  EXPECT_NE(lost["reason"].get<std::string>().find(a.info.id), std::string::npos);
}

TEST_F(Sched, EndTimeExpiresAndNodeFailureFails) {
  auto t = tenant("acme", "standard", gpus(16));
  auto timed = allocate(t, {{"offering", "h200-1x"}, {"duration_seconds", 3600}});
  ASSERT_EQ(timed.body["state"], "placed");
  auto other = allocate(t, {{"offering", "h200-8x-node"}});
  ASSERT_EQ(other.body["state"], "placed") << other.raw;
  std::string node = other.body["placement"]["nodes"][0];

  s.clock().advance(std::chrono::seconds(3601));
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(get(t, timed.body["id"])["state"], "expired");

  auto f = s.request("POST", "/v1/nodes/" + node + "/fail", {{"reason", "PSU"}}, admin);
  ASSERT_EQ(f.status, 200) << f.raw;
  Json failed = get(t, other.body["id"]);
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["reason_code"], "node_failed");
  EXPECT_NE(failed["reason"].get<std::string>().find("PSU"), std::string::npos);
  // Another whole node is no longer possible: one node left, and it is schedulable.
  auto next = allocate(t, {{"offering", "h200-8x-node"}});
  EXPECT_EQ(next.body["state"], "placed") << next.raw;
  EXPECT_NE(next.body["placement"]["nodes"][0], node);
}

TEST_F(Sched, DrainWaitsForTheNodesAllocationsThenGoesToMaintenance) {
  auto t = tenant("acme", "standard", gpus(16));
  auto held = allocate(t, {{"offering", "h200-8x-node"}});
  ASSERT_EQ(held.body["state"], "placed") << held.raw;
  std::string busy = held.body["placement"]["nodes"][0];
  auto nodes = s.request("GET", "/v1/nodes", nullptr, admin);
  std::string idle;
  for (const auto& n : nodes.body["items"])
    if (n["id"] != busy) idle = n["id"];
  ASSERT_FALSE(idle.empty()) << nodes.raw;

  // A node with nothing on it is drained at once.
  auto d = s.request("POST", "/v1/nodes/" + idle + "/drain", {{"reason", "firmware"}}, admin);
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["state"], "maintenance");
  EXPECT_EQ(d.body["state_reason"], "firmware");

  // Operators see what is on each node, whoever holds it; tenants may not ask.
  auto on = s.request("GET", "/v1/allocations?node=" + busy, nullptr, admin);
  ASSERT_EQ(on.status, 200) << on.raw;
  ASSERT_EQ(on.body["items"].size(), 1u) << on.raw;
  EXPECT_EQ(on.body["items"][0]["id"], held.body["id"]);
  EXPECT_TRUE(
      s.request("GET", "/v1/allocations?node=" + idle, nullptr, admin).body["items"].empty());
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/allocations?node=nope", nullptr, admin), 404));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/allocations?state=odd", nullptr, admin), 400));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/allocations", nullptr, t.info.admin_token), 403));

  // A busy one keeps its allocation, takes no more, and waits for it to leave.
  d = s.request("POST", "/v1/nodes/" + busy + "/drain", {{"reason", "PSU swap"}}, admin);
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["state"], "draining");
  EXPECT_FALSE(d.body["schedulable"].get<bool>());
  EXPECT_EQ(get(t, held.body["id"])["state"], "placed");
  EXPECT_EQ(allocate(t, {{"offering", "h200-1x"}}).body["state"], "pending");
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(s.request("GET", "/v1/nodes/" + busy, nullptr, admin).body["state"], "draining");

  auto r = s.request("POST",
                     t.base() + "/allocations/" + held.body["id"].get<std::string>() + "/release",
                     Json::object(), t.info.admin_token);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  auto after = s.request("GET", "/v1/nodes/" + busy, nullptr, admin).body;
  EXPECT_EQ(after["state"], "maintenance");
  EXPECT_EQ(after["state_reason"], "PSU swap");
  bool audited = false;
  for (const auto& rec : s.audit_records())
    if (rec["action"] == "node.drain_complete" && rec["resource"] == "/v1/nodes/" + busy)
      audited = true;
  EXPECT_TRUE(audited);
}

// Whatever ends an allocation (its end time, its tenant suspended), its work on a node whose
// agent runs it stops within the grace (the stop is in the node's assignment), and the node is
// not empty until its agent no longer holds that work: a drain waits for it.
TEST_F(Sched, EndedWorkHoldsItsNodeUntilTheAgentLetsGo) {
  auto enrolled = enroll_agent(h200_inventory("agent-node", 2, "r9"));
  ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
  const std::string token = enrolled.body["credential"], node = enrolled.body["node"]["id"];
  const auto heartbeat = [&](const Json& holding) {
    auto hb = s.request("POST", "/v1/agent/heartbeat", {{"holding", holding}}, token);
    EXPECT_EQ(hb.status, 200) << hb.raw;
    return hb;
  };
  heartbeat(Json::array());
  const Json nodes = s.request("GET", "/v1/nodes", nullptr, admin).body;
  for (const auto& n : nodes["items"]) {
    if (n["id"] == node) continue;
    auto c = s.request("POST", "/v1/nodes/" + n["id"].get<std::string>() + "/cordon",
                       Json::object(), admin);
    ASSERT_EQ(c.status, 200) << c.raw;
  }
  auto t = tenant("acme", "standard", gpus(4));
  auto timed = allocate(t, {{"offering", "h200-1x"}, {"duration_seconds", 60}});
  auto other = allocate(t, {{"offering", "h200-1x"}});
  ASSERT_EQ(timed.body["placement"]["nodes"][0], node) << timed.raw;
  ASSERT_EQ(other.body["placement"]["nodes"][0], node) << other.raw;
  const Json both = {timed.body["id"], other.body["id"]};
  heartbeat(both);

  s.clock().advance(std::chrono::seconds(61));
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  Json expired = get(t, timed.body["id"]);
  EXPECT_EQ(expired["state"], "expired");
  auto suspended = s.request("PATCH", "/v1/tenants/" + t.info.id, {{"state", "suspended"}}, admin);
  ASSERT_EQ(suspended.status, 200) << suspended.raw;
  Json released = get(t, other.body["id"]);
  EXPECT_EQ(released["state"], "released");
  EXPECT_EQ(released["reason_code"], "tenant_suspended");
  for (const Json& a : {expired, released}) {
    ASSERT_EQ(a["stopping"].size(), 1u) << a.dump();
    EXPECT_EQ(a["stopping"][0]["grace_seconds"], 30);
    EXPECT_FALSE(a["grace_until"].is_null());
  }

  auto d = s.request("POST", "/v1/nodes/" + node + "/drain", {{"reason", "BIOS"}}, admin);
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["state"], "draining");
  auto hb = heartbeat(both);
  int stops = 0;
  for (const auto& a : hb.body["assignments"]["allocations"]) stops += a.contains("stop") ? 1 : 0;
  EXPECT_EQ(stops, 2) << hb.raw;
  auto on = s.request("GET", "/v1/allocations?node=" + node, nullptr, admin);
  EXPECT_EQ(on.body["items"].size(), 2u) << on.raw;
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(s.request("GET", "/v1/nodes/" + node, nullptr, admin).body["state"], "draining");

  heartbeat(Json::array({timed.body["id"]}));
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(s.request("GET", "/v1/nodes/" + node, nullptr, admin).body["state"], "draining");
  EXPECT_TRUE(get(t, other.body["id"])["stopping"].empty());
  heartbeat(Json::array());
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(s.request("GET", "/v1/nodes/" + node, nullptr, admin).body["state"], "maintenance");
}

// Once the answer names the digest of the inventory the control plane holds, a heartbeat may
// name that digest instead of the inventory. A digest that is not the one held, or one held past
// its resync, is answered with null: the next heartbeat must carry the inventory.
TEST_F(Sched, AHeartbeatNamesTheInventoryTheControlPlaneHoldsInsteadOfSendingIt) {
  Json inv = h200_inventory("digest-node", 2, "r9");
  auto enrolled = enroll_agent(inv);
  ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
  const std::string token = enrolled.body["credential"];
  auto full = s.request("POST", "/v1/agent/heartbeat", {{"inventory", inv}}, token);
  ASSERT_EQ(full.status, 200) << full.raw;
  ASSERT_TRUE(full.body["inventory_digest"].is_string()) << full.raw;
  const std::string digest = full.body["inventory_digest"];

  auto named = s.request("POST", "/v1/agent/heartbeat", {{"inventory_digest", digest}}, token);
  ASSERT_EQ(named.status, 200) << named.raw;
  EXPECT_EQ(named.body["inventory_digest"], digest);
  EXPECT_EQ(named.body["node"]["state"], "ready");

  auto wrong =
      s.request("POST", "/v1/agent/heartbeat", {{"inventory_digest", std::string(64, '0')}}, token);
  ASSERT_EQ(wrong.status, 200) << wrong.raw;
  EXPECT_TRUE(wrong.body["inventory_digest"].is_null()) << wrong.raw;

  const Json last = s.request("GET", "/v1/nodes/digest-node", nullptr, admin).body;
  s.clock().advance(std::chrono::seconds(1));
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/agent/heartbeat",
                                  {{"inventory", inv}, {"inventory_digest", digest}}, token),
                        400));
  EXPECT_EQ(s.request("GET", "/v1/nodes/digest-node", nullptr, admin).body["last_heartbeat"],
            last["last_heartbeat"])
      << "a refused heartbeat changes nothing";

  s.clock().advance(fleet::kInventoryResync);
  auto due = s.request("POST", "/v1/agent/heartbeat", {{"inventory_digest", digest}}, token);
  ASSERT_EQ(due.status, 200) << due.raw;
  EXPECT_TRUE(due.body["inventory_digest"].is_null()) << "due again: the inventory is wanted";
  auto again = s.request("POST", "/v1/agent/heartbeat", {{"inventory", inv}}, token);
  EXPECT_EQ(again.body["inventory_digest"], digest);
}

// A GPU that threw a critical XID stays unhealthy on clean reports until an operator repairs
// it; in repair it is back in service only after a clean report, and its history keeps every
// XID, ECC change, repair and return.
TEST_F(Sched, AnUnhealthyGpuComesBackOnlyThroughARepairAndAHealthCheck) {
  Json inv = h200_inventory("agent-node", 2, "r9");
  auto enrolled = enroll_agent(inv);
  ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
  const std::string token = enrolled.body["credential"], node = enrolled.body["node"]["id"];
  const std::string uuid = inv["gpus"][1]["uuid"];
  const auto report = [&](Json health) {
    Json body = inv;
    body["gpus"][1]["health"] = std::move(health);
    auto hb = s.request("POST", "/v1/agent/heartbeat", {{"inventory", body}}, token);
    EXPECT_EQ(hb.status, 200) << hb.raw;
  };
  const auto health = [&] {
    auto h = s.request("GET", "/v1/nodes/" + node + "/gpus/1/health", nullptr, admin);
    EXPECT_EQ(h.status, 200) << h.raw;
    return h.body;
  };
  const Json clean = {{"xid_errors", Json::array()}, {"ecc_uncorrected", 0}};
  report({{"xid_errors", {79}}, {"ecc_uncorrected", 2}});
  EXPECT_EQ(health()["health"], "unhealthy");
  report(clean);
  EXPECT_EQ(health()["health"], "unhealthy") << "a clean report alone does not bring it back";

  // Tenants cannot repair; an unknown GPU is not found.
  auto t = tenant("acme", "standard", gpus(1));
  EXPECT_TRUE(IsProblem(
      s.request("POST", "/v1/nodes/" + node + "/gpus/1/repair", Json::object(), t.info.admin_token),
      403));
  EXPECT_TRUE(IsProblem(
      s.request("POST", "/v1/nodes/" + node + "/gpus/7/repair", Json::object(), admin), 404));
  auto repaired = s.request("POST", "/v1/nodes/" + node + "/gpus/" + uuid + "/repair",
                            {{"reason", "reseated"}}, admin);
  ASSERT_EQ(repaired.status, 200) << repaired.raw;
  EXPECT_EQ(repaired.body["health"], "unhealthy");
  EXPECT_EQ(repaired.body["repair"]["reason"], "reseated");
  EXPECT_TRUE(IsProblem(
      s.request("POST", "/v1/nodes/" + node + "/gpus/1/repair", Json::object(), admin), 409));

  // A new XID during the repair keeps it out; so does a clean report made before the agent's
  // repair check, and a failed DCGM diagnostic. The first clean report of the check brings it
  // back.
  report({{"xid_errors", {48}}, {"ecc_uncorrected", 0}});
  Json h = health();
  EXPECT_EQ(h["health"], "unhealthy");
  EXPECT_NE(h["health_reason"].get<std::string>().find("in repair"), std::string::npos) << h;
  report(clean);
  h = health();
  EXPECT_EQ(h["health"], "unhealthy") << h.dump(2);
  EXPECT_NE(h["health_reason"].get<std::string>().find("waiting for the node's health check"),
            std::string::npos)
      << h;
  Json diag_failed = clean;
  diag_failed["diagnostics"] = "failed: dcgmi diag -r 1 exited 226: Memory: Fail";
  report(diag_failed);
  h = health();
  EXPECT_EQ(h["health"], "unhealthy");
  EXPECT_NE(h["health_reason"].get<std::string>().find("Memory: Fail"), std::string::npos) << h;
  Json checked = clean;
  checked["diagnostics"] = "passed";
  report(checked);
  h = health();
  EXPECT_EQ(h["health"], "healthy") << h.dump(2);
  EXPECT_TRUE(h["repair"].is_null());
  std::vector<std::string> kinds;
  for (const auto& e : h["events"]) kinds.push_back(e["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"ecc", "xid", "ecc", "repair", "xid", "returned"}))
      << h.dump(2);
  bool audited = false;
  for (const auto& rec : s.audit_records())
    if (rec["action"] == "gpu.repair" && rec["outcome"] == "success")
      audited = rec["detail"]["reason"] == "reseated";
  EXPECT_TRUE(audited);
}

TEST_F(Sched, QueueViewsAndAuditOfSchedulerTransitions) {
  auto t = tenant("acme", "standard", gpus(1));
  auto other = tenant("zeta", "standard", gpus(1));
  ASSERT_EQ(allocate(t, {{"offering", "h200-1x"}}).body["state"], "placed");
  auto waiting = allocate(t, {{"offering", "h200-1x"}, {"duration_seconds", 60}});
  ASSERT_EQ(waiting.body["state"], "pending");
  ASSERT_EQ(allocate(other, {{"offering", "h200-1x"}, {"count", 2}}).body["state"], "pending");

  auto mine = s.request("GET", "/v1/tenants/" + t.info.id + "/queue", nullptr, t.info.admin_token);
  ASSERT_EQ(mine.status, 200) << mine.raw;
  ASSERT_EQ(mine.body["items"].size(), 1u);  // only its own
  EXPECT_EQ(mine.body["length"], 1);         // counted among its own
  auto all = s.request("GET", "/v1/queue", nullptr, admin);
  EXPECT_EQ(all.body["items"].size(), 2u);
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/queue", nullptr, t.info.admin_token), 403));
  // Other tenants cannot see or touch it.
  EXPECT_TRUE(IsProblem(s.request("GET",
                                  "/v1/tenants/" + t.info.id + "/projects/" + t.project +
                                      "/allocations/" + waiting.body["id"].get<std::string>(),
                                  nullptr, other.info.admin_token),
                        404));

  s.clock().advance(std::chrono::seconds(61));
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  bool audited = false;
  for (const auto& rec : s.audit_records())
    if (rec["action"] == "allocation.expired" && rec["actor"] == "scheduler") audited = true;
  EXPECT_TRUE(audited);
}

// A tenant reads its own position and figures: nothing counted from other tenants' work. The
// operators read the whole queue and the platform's use.
TEST_F(Sched, TenantViewsCountOnlyTheTenantsOwnWork) {
  auto zeta = tenant("zeta", "standard", gpus(32));
  auto acme = tenant("acme", "standard", gpus(4));
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(
        allocate(zeta,
                 {{"offering", "h200-1x"}, {"count", 8}, {"constraints", {{"same_node", true}}}})
            .body["state"],
        "placed");
  // The fleet is full: zeta's two (high priority, ahead) and acme's wait.
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(allocate(zeta, {{"offering", "h200-1x"}, {"priority_class", "high"}}).body["state"],
              "pending");
  auto waiting = allocate(acme, {{"offering", "h200-1x"}});
  ASSERT_EQ(waiting.body["state"], "pending") << waiting.raw;
  const std::string why_path =
      acme.base() + "/allocations/" + waiting.body["id"].get<std::string>() + "/why";

  auto tenant_why = s.request("GET", why_path, nullptr, acme.info.admin_token);
  ASSERT_EQ(tenant_why.status, 200) << tenant_why.raw;
  const Json& q = tenant_why.body["queue"];
  EXPECT_EQ(q["position"], 1) << q;  // first of its own; zeta's ahead are not counted
  EXPECT_EQ(q["length"], 1) << q;
  EXPECT_EQ(q["ahead_of_same_tenant"], 0) << q;
  ASSERT_EQ(tenant_why.body["quota"].size(), 1u) << tenant_why.raw;
  const Json& platform = tenant_why.body["quota"][0]["platform"];
  EXPECT_FALSE(platform.contains("used")) << platform;            // zeta's 16 GPUs
  EXPECT_EQ(tenant_why.body["quota"][0]["tenant"]["used"], 0.0);  // its own figures stay

  auto tenant_queue =
      s.request("GET", "/v1/tenants/" + acme.info.id + "/queue", nullptr, acme.info.admin_token);
  ASSERT_EQ(tenant_queue.status, 200) << tenant_queue.raw;
  ASSERT_EQ(tenant_queue.body["items"].size(), 1u);
  EXPECT_EQ(tenant_queue.body["items"][0]["position"], 1);
  EXPECT_EQ(tenant_queue.body["length"], 1);
  // Nothing of the tenant views moves when another tenant's queue grows.
  ASSERT_EQ(allocate(zeta, {{"offering", "h200-1x"}, {"priority_class", "critical"}}).body["state"],
            "pending");
  EXPECT_EQ(s.request("GET", why_path, nullptr, acme.info.admin_token).body["queue"], q);

  // Operators see the whole queue and the platform's use.
  auto operator_why = s.request("GET", why_path, nullptr, admin);
  ASSERT_EQ(operator_why.status, 200) << operator_why.raw;
  EXPECT_EQ(operator_why.body["queue"]["position"], 4) << operator_why.body["queue"];
  EXPECT_EQ(operator_why.body["queue"]["length"], 4);
  EXPECT_EQ(operator_why.body["quota"][0]["platform"]["used"], 16.0);
  auto operator_queue = s.request("GET", "/v1/tenants/" + acme.info.id + "/queue", nullptr, admin);
  ASSERT_EQ(operator_queue.status, 200) << operator_queue.raw;
  EXPECT_EQ(operator_queue.body["items"][0]["position"], 4);
  EXPECT_EQ(operator_queue.body["length"], 4);
}

// Allocations and reservations keep naming their project as history: deleting it is a
// conflict that says so (not the store's foreign key as a 400), and changes nothing.
TEST_F(Sched, DeletingAProjectThatAllocationsNameIsAConflict) {
  auto t = tenant("acme", "standard", gpus(4));
  const std::string project = "/v1/tenants/" + t.info.id + "/projects/" + t.project;
  auto a = allocate(t, {{"offering", "h200-1x"}});
  ASSERT_EQ(a.body["state"], "placed") << a.raw;
  auto bound = s.create_binding(t.info.admin_token, t.info.id, "project-viewer", "user",
                                t.info.admin_user_id, t.project);
  auto refused = s.request("DELETE", project, nullptr, t.info.admin_token);
  ASSERT_TRUE(IsProblem(refused, 409, "conflict")) << refused.raw;
  const std::string detail = refused.body["detail"];
  EXPECT_NE(detail.find("1 allocation(s) (1 live)"), std::string::npos) << detail;
  EXPECT_EQ(detail.find("FOREIGN KEY"), std::string::npos) << detail;
  // Nothing changed: the project and its binding are still there.
  EXPECT_EQ(s.request("GET", project, nullptr, t.info.admin_token).status, 200);
  EXPECT_EQ(
      s.request("GET",
                "/v1/tenants/" + t.info.id + "/role-bindings/" + bound.at("id").get<std::string>(),
                nullptr, t.info.admin_token)
          .status,
      200);
  // Released, the allocation is still the project's history.
  ASSERT_EQ(
      s.request("POST", t.base() + "/allocations/" + a.body["id"].get<std::string>() + "/release",
                Json::object(), t.info.admin_token)
          .status,
      200);
  auto still = s.request("DELETE", project, nullptr, t.info.admin_token);
  ASSERT_TRUE(IsProblem(still, 409, "conflict")) << still.raw;
  EXPECT_NE(still.body["detail"].get<std::string>().find("(0 live)"), std::string::npos);
  // A reservation names its project too.
  const std::string other = s.create_project(t.info.admin_token, t.info.id, "later").at("id");
  auto r = s.request("POST", "/v1/tenants/" + t.info.id + "/reservations",
                     {{"project", other},
                      {"offering", "h200-1x"},
                      {"start_time", format_rfc3339(s.clock().now() + std::chrono::hours(1))},
                      {"duration_seconds", 3600}},
                     t.info.admin_token);
  ASSERT_EQ(r.status, 201) << r.raw;
  auto reserved = s.request("DELETE", "/v1/tenants/" + t.info.id + "/projects/" + other, nullptr,
                            t.info.admin_token);
  ASSERT_TRUE(IsProblem(reserved, 409, "conflict")) << reserved.raw;
  EXPECT_NE(reserved.body["detail"].get<std::string>().find("1 reservation(s)"), std::string::npos);
  // A project nothing names is deleted.
  const std::string empty = s.create_project(t.info.admin_token, t.info.id, "empty").at("id");
  EXPECT_EQ(s.request("DELETE", "/v1/tenants/" + t.info.id + "/projects/" + empty, nullptr,
                      t.info.admin_token)
                .status,
            204);
}

// Counts multiplied out (count x gpus, gang_members x node_count x gpus_per_node) are bounded
// in 64 bits before anything narrows them to an int: exactly at the bound the request goes on
// to the fleet's checks, one over it is refused as absurd, and products far past int range are
// refused by the same rule instead of overflowing.
TEST_F(Sched, MultipliedOutCountsAreBoundedWithoutOverflow) {
  auto t = tenant("bank", "regulated", gpus(16));
  auto shape = [](int64_t node_count, int64_t gpus_per_node, int64_t members) {
    return Json{{"shape",
                 {{"tier", "dedicated-node"},
                  {"node_count", node_count},
                  {"gpus_per_node", gpus_per_node}}},
                {"constraints", {{"gang_members", members}}}};
  };
  auto detail_of = [&](const Json& body) {
    auto r = allocate(t, body);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << r.raw;
    return r.body.value("detail", "");
  };
  // 10000 x 10 = 100000 nodes of 1 GPU: at the bound, refused only for the fleet's size.
  std::string at = detail_of(shape(10000, 1, 10));
  EXPECT_EQ(at.find("absurd"), std::string::npos) << at;
  EXPECT_NE(at.find("100000 requested"), std::string::npos) << at;
  // 9091 x 11 = 100001: one over.
  std::string over = detail_of(shape(9091, 1, 11));
  EXPECT_NE(over.find("gang_members x node_count = 11 x 9091 = 100001 is absurd"),
            std::string::npos)
      << over;
  // 1250 nodes x 8 GPUs x 10 members = 100000 GPUs; 12501 x 8 = 100008.
  EXPECT_EQ(detail_of(shape(1250, 8, 10)).find("absurd"), std::string::npos);
  EXPECT_NE(detail_of(shape(12501, 8, 1))
                .find("node_count x gpus_per_node = 12501 x 8 = 100008 "
                      "is absurd"),
            std::string::npos);
  // The readers' own maxima multiplied out: 100000 x 64 x 1024 would overflow an int.
  std::string huge = detail_of(shape(100000, 64, 1024));
  EXPECT_NE(huge.find("node_count x gpus_per_node = 100000 x 64 = 6400000 is absurd"),
            std::string::npos)
      << huge;
  std::string gang = detail_of(shape(100000, 1, 1024));
  EXPECT_NE(gang.find("gang_members x node_count = 1024 x 100000 = 102400000 is absurd"),
            std::string::npos)
      << gang;
  // Through an offering (8 GPUs per node): 12500 nodes are at the bound, 12501 over it.
  EXPECT_EQ(detail_of({{"offering", "h200-8x-node"}, {"count", 12500}}).find("absurd"),
            std::string::npos);
  EXPECT_NE(detail_of({{"offering", "h200-8x-node"}, {"count", 12501}})
                .find("count x the offering's gpus = 12501 x 8 = 100008 is absurd"),
            std::string::npos);
  // And nothing was created.
  auto list = s.request("GET", t.base() + "/allocations", nullptr, t.info.admin_token);
  ASSERT_EQ(list.status, 200) << list.raw;
  EXPECT_TRUE(list.body["items"].empty());
}

TEST_F(Sched, QuotaIsForOperatorsAndProjectsShareTheTenants) {
  auto t = tenant("acme", "standard", gpus(4));
  // A tenant admin cannot raise its own quota...
  EXPECT_TRUE(IsProblem(
      s.request("PUT", "/v1/tenants/" + t.info.id + "/quota", gpus(100), t.info.admin_token), 403));
  // ...but divides it among projects, never promising more than it has.
  auto ok = s.request("PUT", t.base() + "/quota", gpus(3), t.info.admin_token);
  ASSERT_EQ(ok.status, 200) << ok.raw;
  EXPECT_TRUE(IsProblem(s.request("PUT", t.base() + "/quota", gpus(5), t.info.admin_token), 400));
  EXPECT_TRUE(IsProblem(s.request("PUT", t.base() + "/quota",
                                  {{"models", {{"H200", {{"nominal", -1}}}}}}, t.info.admin_token),
                        400));
  // The project cap holds: 3 GPUs, the fourth waits with the project named.
  ASSERT_EQ(allocate(t, {{"offering", "h200-1x"}, {"count", 3}}).body["state"], "placed");
  auto fourth = allocate(t, {{"offering", "h200-1x"}});
  EXPECT_EQ(fourth.body["reason_code"], "quota_exceeded");
  EXPECT_NE(fourth.body["reason"].get<std::string>().find("project level"), std::string::npos)
      << fourth.raw;
  auto q = s.request("GET", "/v1/tenants/" + t.info.id + "/quota", nullptr, t.info.admin_token);
  ASSERT_EQ(q.status, 200) << q.raw;
  EXPECT_EQ(q.body["models"]["H200"]["used"], 3.0);
}

}  // namespace
}  // namespace gp::it

namespace gp::it {
namespace {

TEST_F(Sched, AgentsReceiveAssignmentsAndActivateTheirAllocations) {
  auto [t, inventory, mig, node_token, node_id, gpu] = mig_on_agent("agent-node");
  ASSERT_EQ(mig["state"], "placed") << mig;
  ASSERT_EQ(mig["placement"]["nodes"][0], node_id) << mig;
  const Json instance = mig["placement"]["gpus"][0]["mig"];

  // The GPU must become MIG with a 3g instance: until its node reports it so, the allocation is
  // configuring, and stays placed.
  auto hb = s.request("POST", "/v1/agent/heartbeat", Json::object(), node_token);
  ASSERT_EQ(hb.status, 200) << hb.raw;
  const Json as = hb.body["assignments"];
  ASSERT_EQ(as["allocations"].size(), 1u) << hb.raw;
  EXPECT_EQ(as["allocations"][0]["id"], mig["id"]);
  EXPECT_EQ(as["allocations"][0]["state"], "placed");
  EXPECT_EQ(as["allocations"][0]["configuring"], Json::array({gpu})) << hb.raw;
  ASSERT_EQ(as["gpu_plans"].size(), 1u) << hb.raw;
  EXPECT_EQ(as["gpu_plans"][0]["mode"], "mig");
  EXPECT_EQ(as["gpu_plans"][0]["mig_layout"][0]["profile"], "3g.71gb");
  EXPECT_EQ(as["gpu_plans"][0]["status"], "planned");
  Json seen = get(t, mig["id"]);
  EXPECT_EQ(seen["state"], "placed");
  ASSERT_EQ(seen["configuring"].size(), 1u) << seen;
  EXPECT_EQ(seen["configuring"][0]["gpu"], gpu);

  // The agent made it so and reports both the outcome and the new inventory: active.
  inventory["gpus"][0]["mode"] = "mig";
  inventory["gpus"][0]["mig_instances"] = Json::array({instance});
  hb = s.request("POST", "/v1/agent/heartbeat",
                 {{"inventory", inventory},
                  {"mig", {{{"gpu", gpu}, {"status", "applied"}, {"done", {"created 3g"}}}}}},
                 node_token);
  ASSERT_EQ(hb.status, 200) << hb.raw;
  EXPECT_FALSE(hb.body["assignments"]["allocations"][0].contains("configuring")) << hb.raw;
  EXPECT_EQ(hb.body["assignments"]["allocations"][0]["state"], "active");
  EXPECT_EQ(hb.body["assignments"]["gpu_plans"][0]["status"], "applied");
  seen = get(t, mig["id"]);
  EXPECT_EQ(seen["state"], "active");
  EXPECT_TRUE(seen["configuring"].empty()) << seen;

  // A report on a GPU of another node is refused and changes nothing.
  auto foreign =
      s.request("POST", "/v1/agent/heartbeat",
                {{"mig", {{{"gpu", "GPU-crash-0-0"}, {"status", "failed"}}}}}, node_token);
  EXPECT_EQ(foreign.status, 400) << foreign.raw;
  auto bad = s.request("POST", "/v1/agent/heartbeat", {{"mig", {{{"gpu", gpu}, {"status", "ok"}}}}},
                       node_token);
  EXPECT_EQ(bad.status, 400) << bad.raw;
}

TEST_F(Sched, AGpuThatRefusesItsMigLayoutFailsWhatWaitedForItWithTheReason) {
  auto [t, inventory, mig, node_token, node_id, gpu] = mig_on_agent("refusing-node");
  ASSERT_EQ(mig["placement"]["nodes"][0], node_id) << mig;

  // Waiting (a drain, a reset) is recorded and shown; nothing fails.
  auto hb = s.request(
      "POST", "/v1/agent/heartbeat",
      {{"mig", {{{"gpu", gpu}, {"status", "waiting"}, {"detail", "waits for a GPU reset"}}}}},
      node_token);
  ASSERT_EQ(hb.status, 200) << hb.raw;
  Json seen = get(t, mig["id"]);
  EXPECT_EQ(seen["state"], "placed");
  EXPECT_EQ(seen["configuring"][0]["status"], "waiting") << seen;
  EXPECT_EQ(seen["configuring"][0]["detail"], "waits for a GPU reset");

  hb = s.request("POST", "/v1/agent/heartbeat",
                 {{"mig",
                   {{{"gpu", gpu},
                     {"status", "failed"},
                     {"detail",
                      "creating 3g.71gb@4: nvmlDeviceCreateGpuInstanceWithPlacement "
                      "failed: Insufficient Resources (NVML error 23)"}}}}},
                 node_token);
  ASSERT_EQ(hb.status, 200) << hb.raw;
  seen = get(t, mig["id"]);
  EXPECT_EQ(seen["state"], "failed");
  EXPECT_EQ(seen["reason_code"], "mig_config_failed");
  EXPECT_NE(seen["reason"].get<std::string>().find("Insufficient Resources"), std::string::npos)
      << seen;
  // The plan is gone: the node is not asked again, and the GPU is whole to the scheduler.
  EXPECT_TRUE(hb.body["assignments"]["gpu_plans"].empty()) << hb.raw;
  auto audit = s.request("GET", "/v1/audit?action=node.heartbeat&limit=50", nullptr, admin);
  ASSERT_EQ(audit.status, 200) << audit.raw;
  // The node's report is in the audit trail with the allocations it failed.
  EXPECT_NE(audit.raw.find("allocations_failed"), std::string::npos) << audit.raw;
  EXPECT_NE(audit.raw.find(mig["id"].get<std::string>()), std::string::npos);
}

}  // namespace
}  // namespace gp::it

namespace gp::it {
namespace {

TEST_F(Sched, ReservationWindowsKeepTheirCapacity) {
  auto a = tenant("alpha", "standard", gpus(8));
  auto b = tenant("beta", "standard", gpus(16));
  const std::string start = format_rfc3339(s.clock().now() + std::chrono::hours(1));
  auto r = s.request("POST", "/v1/tenants/" + a.info.id + "/reservations",
                     {{"project", a.project},
                      {"offering", "h200-1x"},
                      {"count", 8},
                      {"start_time", start},
                      {"duration_seconds", 3600}},
                     a.info.admin_token);
  ASSERT_EQ(r.status, 201) << r.raw;
  EXPECT_EQ(r.body["state"], "scheduled");
  std::string rid = r.body["id"];
  // Before the window: work that would still run then may not take the reserved room...
  ASSERT_EQ(allocate(b, {{"offering", "h200-1x"}, {"count", 8}}).body["state"], "placed");
  auto crowding = allocate(b, {{"offering", "h200-1x"}, {"count", 8}});
  EXPECT_EQ(crowding.body["state"], "pending") << crowding.raw;
  // The reason is beta's to read: alpha and its reservation stay unnamed.
  const std::string crowded = crowding.body["reason"];
  EXPECT_NE(crowded.find("reserved for another tenant's reservation"), std::string::npos)
      << crowding.raw;
  EXPECT_EQ(crowded.find(a.info.id), std::string::npos) << crowded;
  EXPECT_EQ(crowded.find(rid), std::string::npos) << crowded;
  auto withdrawn = s.request(
      "POST", b.base() + "/allocations/" + crowding.body["id"].get<std::string>() + "/release",
      Json::object(), b.info.admin_token);
  ASSERT_EQ(withdrawn.status, 200);
  // ...but work that ends before the window may.
  auto brief = allocate(b, {{"offering", "h200-1x"}, {"count", 8}, {"duration_seconds", 1800}});
  EXPECT_EQ(brief.body["state"], "placed") << brief.raw;

  // The window opens: the brief work has expired and the capacity is held for alpha.
  s.clock().advance(std::chrono::minutes(61));
  ASSERT_TRUE(s.api().housekeeping(std::chrono::hours(24), false));
  EXPECT_EQ(get(b, brief.body["id"])["state"], "expired");
  auto held = s.request("GET", "/v1/tenants/" + a.info.id + "/reservations/" + rid, nullptr,
                        a.info.admin_token);
  EXPECT_EQ(held.body["state"], "active") << held.raw;
  // Others cannot take it now.
  EXPECT_EQ(allocate(b, {{"offering", "h200-1x"}}).body["state"], "pending");
  // Alpha's allocation of the same shape takes exactly the held GPUs.
  auto mine = allocate(a, {{"offering", "h200-1x"}, {"count", 8}});
  ASSERT_EQ(mine.body["state"], "placed") << mine.raw;
  held = s.request("GET", "/v1/tenants/" + a.info.id + "/reservations/" + rid, nullptr,
                   a.info.admin_token);
  EXPECT_EQ(held.body["state"], "used") << held.raw;
  // Beta cannot see alpha's reservation.
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/tenants/" + a.info.id + "/reservations/" + rid,
                                  nullptr, b.info.admin_token),
                        404));
}

}  // namespace
}  // namespace gp::it

namespace gp::it {
namespace {

TEST_F(Sched, OffboardingReleasesAllocationsAndLetsOthersIn) {
  auto gone = tenant("gone", "standard", gpus(16));
  auto next = tenant("next", "standard", gpus(16));
  auto held = allocate(gone, {{"offering", "h200-1x"}, {"count", 16}});
  ASSERT_EQ(held.body["state"], "placed");
  auto waiting = allocate(next, {{"offering", "h200-1x"}, {"count", 8}});
  ASSERT_EQ(waiting.body["state"], "pending");
  auto off = s.request("DELETE", "/v1/tenants/" + gone.info.id, nullptr, admin);
  ASSERT_EQ(off.status, 200) << off.raw;
  Json released =
      s.request("GET", gone.base() + "/allocations/" + held.body["id"].get<std::string>(), nullptr,
                admin)
          .body;
  EXPECT_EQ(released["state"], "released") << released.dump();
  EXPECT_EQ(released["reason_code"], "tenant_offboarded");
  EXPECT_EQ(get(next, waiting.body["id"])["state"], "placed");
}

}  // namespace
}  // namespace gp::it
