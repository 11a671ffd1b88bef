// Tenant storage through the API: volumes with strict input and allocated id ranges, tenant
// scoping, the node agent's assignment (segments, policies, volume plans, due deletions), and
// deletions scheduled by volume removal and offboarding that reach the agents only once due;
// deletions keyed by identity (a project name used again never inherits a deletion), confirmed
// by every node that holds the tenant's trees; and secret names a URL path can carry.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "common/crypto.h"
#include "integration/harness.h"
#include "storage/records.h"

namespace gp::it {
namespace {

using namespace std::chrono_literals;

class Storage : public ::testing::Test {
 protected:
  TestServer s;
  TenantInfo a, b;
  std::string node_token;

  void SetUp() override {
    a = s.create_tenant("alpha", "alpha-admin");
    b = s.create_tenant("bravo", "bravo-admin");
    s.create_project(a.admin_token, a.id, "vision");
    s.create_project(a.admin_token, a.id, "speech");
    s.create_project(b.admin_token, b.id, "nlp");
    auto jt = s.request("POST", "/v1/join-tokens", Json::object(), s.admin_token());
    ASSERT_EQ(jt.status, 201) << jt.raw;
    auto enrolled = s.request(
        "POST", "/v1/agent/enroll",
        {{"join_token", jt.body["token"]}, {"inventory", h200_inventory("storage-node", 1)}});
    ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
    node_token = enrolled.body["credential"];
  }

  std::string volumes(const TenantInfo& t, const std::string& project) const {
    return "/v1/tenants/" + t.id + "/projects/" + project + "/volumes";
  }
  Json plan(const TenantInfo& t) {
    auto r = s.request("GET", "/v1/tenants/" + t.id + "/volumes", nullptr, t.admin_token);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }
  Json assignment(const std::string& token = "") {
    auto r = s.request("GET", "/v1/agent/assignment", nullptr, token.empty() ? node_token : token);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }
  // Enrols another node; its credential, and its id in *id.
  std::string enroll(const std::string& name, std::string* id) {
    auto jt = s.request("POST", "/v1/join-tokens", Json::object(), s.admin_token());
    EXPECT_EQ(jt.status, 201) << jt.raw;
    auto r = s.request("POST", "/v1/agent/enroll",
                       {{"join_token", jt.body["token"]}, {"inventory", h200_inventory(name, 1)}});
    EXPECT_EQ(r.status, 201) << r.raw;
    *id = r.body["node"]["id"];
    return r.body["credential"];
  }
  Resp done(const std::string& deletion, const std::string& token,
            const std::string& outcome = "removed") {
    return s.request("POST", "/v1/agent/storage-deletions/" + deletion + "/done",
                     outcome.empty() ? Json::object() : Json{{"outcome", outcome}}, token);
  }
  // The tenant's id block as operators see it (offboarding revokes the tenant's own keys).
  Json ids_of(const TenantInfo& t) {
    auto r = s.request("GET", "/v1/tenants/" + t.id + "/volumes", nullptr, s.admin_token());
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body.at("ids");
  }
  std::set<std::string> due_ids(const std::string& token = "") {
    std::set<std::string> out;
    const Json as = assignment(token);
    for (const auto& d : as.at("storage_deletions")) out.insert(d.at("id"));
    return out;
  }
};

const Json* find_dir(const Json& plan, const std::string& path) {
  for (const auto& d : plan.at("directories"))
    if (d.at("path") == path) return &d;
  return nullptr;
}

TEST_F(Storage, VolumesGetTheTenantsIdsAndModesThatDenyOthers) {
  auto r = s.request("PUT", volumes(a, "vision"), {{"size_limits", {{"datasets", 1 << 30}}}},
                     a.admin_token);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.header("ETag"), "\"1\"");
  EXPECT_EQ(r.body.at("size_limits").at("datasets"), 1 << 30);
  ASSERT_EQ(s.request("PUT", volumes(a, "speech"), Json::object(), a.admin_token).status, 200);
  ASSERT_EQ(s.request("PUT", volumes(b, "nlp"), Json::object(), b.admin_token).status, 200);

  Json pa = plan(a), pb = plan(b);
  const int64_t first_a = pa.at("ids").at("first"), last_a = pa.at("ids").at("last");
  const int64_t first_b = pb.at("ids").at("first"), last_b = pb.at("ids").at("last");
  EXPECT_GE(first_a, 1'000'000);  // the default pool starts above login users
  EXPECT_TRUE(last_a < first_b || last_b < first_a) << pa.dump() << pb.dump();
  // The tenant's top directory is its own first id; projects get distinct ids inside the range.
  const Json* top = find_dir(pa, "alpha");
  ASSERT_NE(top, nullptr) << pa.dump();
  EXPECT_EQ(top->at("uid"), first_a);
  EXPECT_EQ(top->at("mode"), "0750");
  std::set<int64_t> project_ids;
  for (const auto& p : pa.at("projects")) {
    int64_t id = p.at("uid");
    EXPECT_GT(id, first_a);
    EXPECT_LE(id, last_a);
    project_ids.insert(id);
  }
  EXPECT_EQ(project_ids.size(), 2u);
  const Json* datasets = find_dir(pa, "alpha/vision/datasets");
  ASSERT_NE(datasets, nullptr);
  EXPECT_EQ(datasets->at("size_limit"), 1 << 30);
  EXPECT_EQ(datasets->at("mode"), "2770");
  EXPECT_EQ(find_dir(pa, "alpha/vision/scratch")->at("mode"), "3770");
  for (const auto& d : pa.at("directories")) {
    EXPECT_TRUE(d.at("path").get<std::string>().starts_with("alpha")) << d.dump();
    EXPECT_EQ(std::stoi(d.at("mode").get<std::string>(), nullptr, 8) & 07, 0) << d.dump();
  }

  // Changing the limits needs the current version; the ids stay.
  int64_t vision_uid = r.body.at("uid");
  EXPECT_TRUE(IsProblem(s.request("PUT", volumes(a, "vision"), Json::object(), a.admin_token,
                                  {{"If-Match", "W/\"7\""}}),
                        412));
  auto r2 = s.request("PUT", volumes(a, "vision"), {{"size_limits", {{"scratch", 4 << 20}}}},
                      a.admin_token, {{"If-Match", "W/\"1\""}});
  ASSERT_EQ(r2.status, 200) << r2.raw;
  EXPECT_EQ(r2.body.at("version"), 2);
  EXPECT_EQ(r2.body.at("uid"), vision_uid);
  EXPECT_EQ(r2.body.at("size_limits"), Json({{"scratch", 4 << 20}}));
  EXPECT_EQ(plan(a).at("ids").at("first"), first_a);
}

TEST_F(Storage, BadInputIsRefusedAndStoresNothing) {
  const std::vector<Json> bad = {
      {{"size_limits", {{"datasets", 0}}}},
      {{"size_limits", {{"datasets", (1 << 20) - 1}}}},
      {{"size_limits", {{"datasets", -5}}}},
      {{"size_limits", {{"datasets", "1G"}}}},
      {{"size_limits", {{"datasets", 1.5}}}},
      {{"size_limits", {{"homes", 100}}}},
      {{"size_limits", Json::array({1})}},
      {{"size_limits", {{"datasets", 100}}}, {"extra", true}},
      Json::array(),
  };
  for (const auto& body : bad)
    EXPECT_TRUE(IsProblem(s.request("PUT", volumes(a, "vision"), body, a.admin_token), 400))
        << body.dump();
  EXPECT_TRUE(IsProblem(s.request_raw("PUT", volumes(a, "vision"), "{\"size_limits\": {",
                                      a.admin_token, {{"Content-Type", "application/json"}}),
                        400));
  Json pa = plan(a);
  EXPECT_TRUE(pa.at("ids").is_null()) << pa.dump();
  EXPECT_TRUE(pa.at("projects").empty());
  EXPECT_TRUE(IsProblem(s.request("PUT", volumes(a, "nope"), Json::object(), a.admin_token), 404));
  EXPECT_TRUE(IsProblem(s.request("DELETE", volumes(a, "vision"), nullptr, a.admin_token), 404));
}

TEST_F(Storage, AnotherTenantSeesNothing) {
  ASSERT_EQ(s.request("PUT", volumes(a, "vision"), Json::object(), a.admin_token).status, 200);
  EXPECT_TRUE(
      IsProblem(s.request("GET", "/v1/tenants/" + a.id + "/volumes", nullptr, b.admin_token), 404));
  EXPECT_TRUE(
      IsProblem(s.request("PUT", volumes(a, "vision"), Json::object(), b.admin_token), 404));
  EXPECT_TRUE(IsProblem(s.request("DELETE", volumes(a, "vision"), nullptr, b.admin_token), 404));
  // Tenants do not list deletions, and node credentials reach only agent routes.
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/storage/deletions", nullptr, a.admin_token), 403));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/agent/assignment", nullptr, a.admin_token), 403));
  EXPECT_TRUE(
      IsProblem(s.request("GET", "/v1/tenants/" + a.id + "/volumes", nullptr, node_token), 403));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/agent/assignment"), 401));
  // B's plan is its own, empty.
  Json pb = plan(b);
  EXPECT_TRUE(pb.at("ids").is_null());
  EXPECT_EQ(pb.dump().find("alpha"), std::string::npos);
}

TEST_F(Storage, AssignmentCarriesSegmentsPoliciesAndVolumePlans) {
  Json policy = {{"egress",
                  {{{"destination", "203.0.113.0/24"},
                    {"protocol", "tcp"},
                    {"ports", {443}},
                    {"description", "registry"}}}}};
  ASSERT_EQ(
      s.request("PUT", "/v1/tenants/" + a.id + "/network/policy", policy, a.admin_token).status,
      200);
  ASSERT_EQ(s.request("GET", "/v1/tenants/" + b.id + "/network", nullptr, b.admin_token).status,
            200);
  ASSERT_EQ(s.request("PUT", volumes(a, "vision"), {{"size_limits", {{"models", 3 << 20}}}},
                      a.admin_token)
                .status,
            200);

  Json as = assignment();
  EXPECT_EQ(as.at("supernet"), "10.64.0.0/10");
  std::set<std::string> tenants;
  for (const auto& seg : as.at("segments")) tenants.insert(seg.at("tenant"));
  EXPECT_EQ(tenants, (std::set<std::string>{"alpha", "bravo"}));
  ASSERT_EQ(as.at("policies").size(), 1u) << as.dump();
  EXPECT_EQ(as.at("policies")[0].at("tenant"), "alpha");
  EXPECT_EQ(as.at("policies")[0].at("policy").at("egress")[0].at("destination"), "203.0.113.0/24");
  ASSERT_EQ(as.at("volumes").size(), 1u) << as.dump();
  const Json& v = as.at("volumes")[0];
  EXPECT_EQ(v.at("tenant"), "alpha");
  EXPECT_EQ(v.at("ids").at("first"), plan(a).at("ids").at("first"));
  ASSERT_EQ(v.at("projects").size(), 1u);
  EXPECT_EQ(v.at("projects")[0].at("project"), "vision");
  EXPECT_EQ(v.at("projects")[0].at("size_limits").at("models"), 3 << 20);
  EXPECT_TRUE(as.at("storage_deletions").empty());
}

// The key a node encrypts a tenant's tree with reaches it in the assignment only, derived from
// the tenant's data key (made with the volumes) and different per tenant; the node's report of
// the tree (encryption and permission audit) is kept only for trees it holds, strictly read, and
// drives the tenant's posture, which goes stale when the audit is not repeated.
TEST_F(Storage, TheNodesEncryptionAndAuditReportsDriveThePosture) {
  for (const auto& [t, project] : {std::pair{a, "vision"}, std::pair{b, "nlp"}})
    ASSERT_EQ(s.request("PUT", volumes(t, project), Json::object(), t.admin_token).status, 200);
  Json as = assignment();
  ASSERT_EQ(as.at("volumes").size(), 2u) << as.dump();
  std::map<std::string, std::string> keys;
  for (const auto& v : as.at("volumes"))
    keys[v.at("tenant")] = base64url_decode(v.at("encryption_key").get<std::string>()).value_or("");
  EXPECT_EQ(keys["alpha"].size(), storage::kVolumeKeyBytes);
  EXPECT_NE(keys["alpha"], keys["bravo"]);
  auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
    auto ring = GP_TRY(storage::load_keyring(tx, a.id));
    EXPECT_EQ(GP_TRY(storage::derive_volume_key(ring, s.api().isolation().master_keys, "alpha")),
              keys["alpha"]);
    return ok();
  });
  ASSERT_TRUE(r) << r.error().message;
  // Tenants never see the key.
  EXPECT_EQ(s.request("GET", "/v1/tenants/" + a.id + "/volumes", nullptr, a.admin_token)
                .raw.find(base64url_encode(keys["alpha"])),
            std::string::npos);

  auto report = [&](bool encrypted, int findings) {
    Json listed = Json::array();
    for (int i = 0; i < findings; ++i)
      listed.push_back(
          {{"path", "vision/datasets/leak"}, {"kind", "other-readable"}, {"detail", "mode 0644"}});
    return s.request("POST", "/v1/agent/storage-report",
                     {{"tenants",
                       {{{"tenant_id", a.id},
                         {"encrypted", encrypted},
                         {"encryption_detail", encrypted ? "fscrypt v2 under key k" : "tmpfs"},
                         {"finding_count", findings},
                         {"findings", listed}}}}},
                     node_token);
  };
  auto control = [&](const std::string& id) {
    auto p = s.request("GET", "/v1/tenants/" + a.id + "/posture", nullptr, s.admin_token());
    EXPECT_EQ(p.status, 200) << p.raw;
    for (const auto& layer : p.body.at("layers"))
      for (const auto& c : layer.at("controls"))
        if (c.at("id") == id) return c;
    ADD_FAILURE() << id << " not in the posture report";
    return Json();
  };
  // Sensitive: encrypted volumes are required.
  ASSERT_EQ(
      s.request("PATCH", "/v1/tenants/" + a.id, {{"isolation_class", "sensitive"}}, s.admin_token())
          .status,
      200);
  EXPECT_EQ(control("storage.volumes-encrypted").at("status"), "fail");
  EXPECT_NE(control("storage.permission-audit").at("summary").get<std::string>().find("no node"),
            std::string::npos);

  // Not held by the node yet: refused, nothing kept.
  auto refused = report(true, 0);
  ASSERT_EQ(refused.status, 200) << refused.raw;
  EXPECT_EQ(refused.body.at("refused"), Json::array({a.id}));
  ASSERT_EQ(
      s.request("POST", "/v1/agent/storage-holdings", {{"tenants", {a.id}}}, node_token).status,
      200);
  // Malformed reports change nothing.
  Json bad = {{"tenants",
               {{{"tenant_id", a.id},
                 {"encrypted", true},
                 {"encryption_detail", "x"},
                 {"finding_count", 0},
                 {"findings", Json::array()},
                 {"extra", 1}}}}};
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/agent/storage-report", bad, node_token), 400));
  bad["tenants"][0].erase("extra");
  bad["tenants"][0]["findings"] = {{{"path", "p"}, {"kind", "k"}, {"detail", "d"}}};
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/agent/storage-report", bad, node_token), 400));
  EXPECT_TRUE(IsProblem(s.request("POST", "/v1/agent/storage-report", bad, a.admin_token), 403));
  EXPECT_NE(control("storage.permission-audit").at("summary").get<std::string>().find("no node"),
            std::string::npos);

  auto clear = report(false, 2);
  ASSERT_EQ(clear.status, 200) << clear.raw;
  EXPECT_EQ(clear.body.at("recorded"), Json::array({a.id}));
  Json enc = control("storage.volumes-encrypted");
  EXPECT_EQ(enc.at("status"), "fail");
  EXPECT_EQ(enc.at("evidence").at("seen").at("in_clear")[0].at("why"), "tmpfs") << enc.dump();
  Json audit = control("storage.permission-audit");
  EXPECT_EQ(audit.at("status"), "fail");
  EXPECT_NE(audit.at("summary").get<std::string>().find("2 finding(s)"), std::string::npos);
  // The tenant's own plan says so too: where its tree is in clear, and what the audit found.
  Json trees = plan(a).at("trees");
  ASSERT_EQ(trees.size(), 1u) << trees.dump();
  EXPECT_EQ(trees[0].at("node"), "storage-node");
  EXPECT_EQ(trees[0].at("encrypted"), false);
  EXPECT_EQ(trees[0].at("encryption_detail"), "tmpfs");
  EXPECT_EQ(trees[0].at("finding_count"), 2);
  EXPECT_TRUE(plan(b).at("trees").empty());

  ASSERT_EQ(report(true, 0).status, 200);
  EXPECT_EQ(control("storage.volumes-encrypted").at("status"), "pass");
  EXPECT_EQ(control("storage.permission-audit").at("status"), "pass");
  s.clock().advance(std::chrono::hours(25));
  audit = control("storage.permission-audit");
  EXPECT_EQ(audit.at("status"), "fail");
  EXPECT_NE(audit.at("summary").get<std::string>().find("25 hours old"), std::string::npos)
      << audit.dump();

  // Offboarded: its key leaves every assignment.
  ASSERT_EQ(s.request("DELETE", "/v1/tenants/" + a.id, nullptr, s.admin_token()).status, 200);
  const Json after = assignment();
  for (const auto& v : after.at("volumes")) EXPECT_NE(v.at("tenant"), "alpha");
}

TEST_F(Storage, DeletionsReachTheAgentOnlyOnceDue) {
  ASSERT_EQ(s.request("PUT", volumes(a, "vision"), Json::object(), a.admin_token).status, 200);
  ASSERT_EQ(s.request("PUT", volumes(a, "speech"), Json::object(), a.admin_token).status, 200);
  int64_t speech_uid = 0;
  const Json before = plan(a);  // kept: a range-for over a temporary's member would dangle
  for (const auto& p : before.at("projects"))
    if (p.at("project") == "speech") speech_uid = p.at("uid");

  // Removing a project's volumes schedules its tree, due after the grace (168h by default).
  auto del = s.request("DELETE", volumes(a, "speech"), nullptr, a.admin_token);
  ASSERT_EQ(del.status, 202) << del.raw;
  EXPECT_EQ(del.body.at("path"), "alpha/speech");
  EXPECT_EQ(del.body.at("state"), "scheduled");
  const std::string project_deletion = del.body.at("id");
  // Not in the plan any more, and not yet due.
  Json as = assignment();
  ASSERT_EQ(as.at("volumes").size(), 1u);
  EXPECT_EQ(as.at("volumes")[0].at("projects").size(), 1u);
  EXPECT_TRUE(as.at("storage_deletions").empty());
  // Set again while the deletion is pending: refused, the old tree still exists.
  EXPECT_TRUE(
      IsProblem(s.request("PUT", volumes(a, "speech"), Json::object(), a.admin_token), 409));
  // A new project never gets the uid the old tree's files carry.
  s.create_project(a.admin_token, a.id, "robotics");
  auto robotics = s.request("PUT", volumes(a, "robotics"), Json::object(), a.admin_token);
  ASSERT_EQ(robotics.status, 200);
  EXPECT_NE(robotics.body.at("uid"), speech_uid);

  // Offboarding schedules the whole tree.
  auto off = s.request("DELETE", "/v1/tenants/" + a.id, nullptr, s.admin_token());
  ASSERT_EQ(off.status, 200) << off.raw;
  auto deletions = s.request("GET", "/v1/storage/deletions", nullptr, s.admin_token());
  ASSERT_EQ(deletions.status, 200) << deletions.raw;
  ASSERT_EQ(deletions.body.at("items").size(), 2u) << deletions.raw;
  std::string tenant_deletion;
  for (const auto& d : deletions.body.at("items"))
    if (d.at("project") == "") tenant_deletion = d.at("id");
  ASSERT_FALSE(tenant_deletion.empty());
  as = assignment();
  EXPECT_TRUE(as.at("volumes").empty()) << "an offboarded tenant's volumes are not planned";
  EXPECT_TRUE(as.at("storage_deletions").empty());
  // Acknowledging early is refused.
  EXPECT_TRUE(
      IsProblem(s.request("POST", "/v1/agent/storage-deletions/" + tenant_deletion + "/done",
                          Json::object(), node_token),
                409));

  s.clock().advance(167h);
  EXPECT_TRUE(assignment().at("storage_deletions").empty());
  s.clock().advance(2h);
  as = assignment();
  ASSERT_EQ(as.at("storage_deletions").size(), 2u) << as.dump();
  std::set<std::string> due;
  for (const auto& d : as.at("storage_deletions")) due.insert(d.at("id"));
  EXPECT_EQ(due, (std::set<std::string>{project_deletion, tenant_deletion}));

  // The agent acknowledges; a retry changes nothing.
  for (int i = 0; i < 2; ++i) {
    auto done = s.request("POST", "/v1/agent/storage-deletions/" + tenant_deletion + "/done",
                          Json::object(), node_token);
    ASSERT_EQ(done.status, 200) << done.raw;
    EXPECT_EQ(done.body.at("state"), "done");
    EXPECT_FALSE(done.body.at("done_by").is_null());
  }
  EXPECT_TRUE(IsProblem(
      s.request("POST", "/v1/agent/storage-deletions/sdel_nope/done", Json::object(), node_token),
      404));
  as = assignment();
  ASSERT_EQ(as.at("storage_deletions").size(), 1u);
  EXPECT_EQ(as.at("storage_deletions")[0].at("id"), project_deletion);
  // The tenant's ids are released: its plan has no range any more.
  auto pa = s.request("GET", "/v1/tenants/" + a.id + "/volumes", nullptr, s.admin_token());
  ASSERT_EQ(pa.status, 200) << pa.raw;
  EXPECT_TRUE(pa.body.at("ids").is_null());
  auto done_list = s.request("GET", "/v1/storage/deletions?state=done", nullptr, s.admin_token());
  ASSERT_EQ(done_list.body.at("items").size(), 1u);
  EXPECT_TRUE(IsProblem(
      s.request("GET", "/v1/storage/deletions?state=bogus", nullptr, s.admin_token()), 400));

  // Audited: the offboarding names the scheduled deletion; the acknowledgement is recorded once.
  int offboard = 0, done_records = 0;
  for (const auto& rec : s.audit_records()) {
    if (rec.at("action") == "tenant.offboard" && rec.at("outcome") == "success") {
      ++offboard;
      EXPECT_EQ(rec.at("detail").at("storage").at("deletion"), tenant_deletion);
    }
    if (rec.at("action") == "node.storage_deletion.done" && rec.at("outcome") == "success")
      ++done_records;
  }
  EXPECT_EQ(offboard, 1);
  EXPECT_EQ(done_records, 1);
}

// Issue 24, finding 5: create project p, give it volumes, delete the volumes, delete the
// project, create p again, give it volumes. The earlier deletion (due after the grace) named
// the tree "alpha/p" and nothing else, so when it came due the agents removed the new project's
// tree while the API still showed its volumes active. Now the deletion names the earlier
// project's id and generation; the path stays the earlier tree's until that deletion is done,
// so the new volumes wait for it; and completing it lets go of that generation only.
TEST_F(Storage, ReusingAProjectNameNeverInheritsAnEarlierDeletion) {
  auto first = s.create_project(a.admin_token, a.id, "p");
  const std::string first_id = first.at("id");
  auto v1 = s.request("PUT", volumes(a, "p"), Json::object(), a.admin_token);
  ASSERT_EQ(v1.status, 200) << v1.raw;
  const std::string gen1 = v1.body.value("generation", "");
  EXPECT_FALSE(gen1.empty());
  auto del = s.request("DELETE", volumes(a, "p"), nullptr, a.admin_token);
  ASSERT_EQ(del.status, 202) << del.raw;
  const std::string deletion = del.body.at("id");
  EXPECT_EQ(del.body.value("project_id", ""), first_id);
  EXPECT_EQ(del.body.value("generation", ""), gen1);
  // The volumes are being deleted (by the project's id): the project may go.
  ASSERT_EQ(
      s.request("DELETE", "/v1/tenants/" + a.id + "/projects/p", nullptr, a.admin_token).status,
      204);
  auto second = s.create_project(a.admin_token, a.id, "p");
  const std::string second_id = second.at("id");
  ASSERT_NE(second_id, first_id);
  // alpha/p is still the earlier project's tree: the new volumes wait for its removal.
  auto early = s.request("PUT", volumes(a, "p"), Json::object(), a.admin_token);
  EXPECT_TRUE(IsProblem(early, 409)) << early.raw;
  EXPECT_NE(early.raw.find(first_id), std::string::npos) << early.raw;
  const Json waiting = plan(a);
  EXPECT_EQ(find_dir(waiting, "alpha/p"), nullptr) << waiting.dump();

  s.clock().advance(169h);
  const Json as = assignment();
  ASSERT_EQ(as.at("storage_deletions").size(), 1u) << as.dump();
  const Json& due = as.at("storage_deletions")[0];
  EXPECT_EQ(due.at("id"), deletion);
  EXPECT_EQ(due.at("project"), "p");
  EXPECT_EQ(due.at("project_id"), first_id);
  EXPECT_EQ(due.at("generation"), gen1);
  EXPECT_EQ(due.at("owner"), v1.body.at("uid"));
  ASSERT_EQ(done(deletion, node_token).status, 200);

  // Now the new project's volumes: another generation, planned and assigned as active.
  auto v2 = s.request("PUT", volumes(a, "p"), Json::object(), a.admin_token);
  ASSERT_EQ(v2.status, 200) << v2.raw;
  EXPECT_NE(v2.body.at("generation"), gen1);
  EXPECT_EQ(v2.body.at("project_id"), second_id);
  Json pa = plan(a);
  ASSERT_EQ(pa.at("projects").size(), 1u) << pa.dump();
  EXPECT_EQ(pa.at("projects")[0].at("project_id"), second_id);
  EXPECT_EQ(pa.at("projects")[0].at("state"), "active");
  EXPECT_TRUE(pa.at("deletions").empty());
  // A retried acknowledgement of the earlier deletion changes nothing.
  ASSERT_EQ(done(deletion, node_token).status, 200);
  EXPECT_EQ(plan(a).at("projects"), pa.at("projects"));
  s.clock().advance(400h);
  EXPECT_TRUE(assignment().at("storage_deletions").empty());
  const Json later = assignment();
  ASSERT_EQ(later.at("volumes").size(), 1u);
  EXPECT_EQ(later.at("volumes")[0].at("projects")[0].at("generation"), v2.body.at("generation"));
}

TEST_F(Storage, AProjectWithActiveVolumesIsNotDeleted) {
  ASSERT_EQ(s.request("PUT", volumes(a, "vision"), Json::object(), a.admin_token).status, 200);
  auto refused =
      s.request("DELETE", "/v1/tenants/" + a.id + "/projects/vision", nullptr, a.admin_token);
  EXPECT_TRUE(IsProblem(refused, 409)) << refused.raw;
  EXPECT_NE(refused.raw.find("volumes"), std::string::npos) << refused.raw;
  EXPECT_EQ(
      s.request("GET", "/v1/tenants/" + a.id + "/projects/vision", nullptr, a.admin_token).status,
      200);
  ASSERT_EQ(s.request("DELETE", volumes(a, "vision"), nullptr, a.admin_token).status, 202);
  EXPECT_EQ(s.request("DELETE", "/v1/tenants/" + a.id + "/projects/vision", nullptr, a.admin_token)
                .status,
            204);
  // Its deletion stays scheduled under the project's id.
  Json pa = plan(a);
  ASSERT_EQ(pa.at("deletions").size(), 1u);
  EXPECT_FALSE(pa.at("deletions")[0].at("project_id").get<std::string>().empty());
}

// Issue 24, finding 5: a node may confirm only a deletion of its own assignment, and a tenant's
// ids are released only once every node that held its trees has confirmed.
TEST_F(Storage, EveryHolderConfirmsBeforeTheIdsAreReleased) {
  std::string n2, n3;
  const std::string t2 = enroll("storage-node-2", &n2);
  const std::string t3 = enroll("storage-node-3", &n3);
  ASSERT_EQ(s.request("PUT", volumes(a, "vision"), Json::object(), a.admin_token).status, 200);
  // The assignment says whether the node holds the tenant's trees yet.
  EXPECT_EQ(assignment().at("volumes")[0].value("held", true), false);
  for (const std::string& token : std::vector<std::string>{node_token, t2}) {
    auto h = s.request("POST", "/v1/agent/storage-holdings", {{"tenants", {a.id, b.id}}}, token);
    EXPECT_EQ(h.status, 200) << h.raw;
    EXPECT_EQ(h.body.value("held", Json()), Json({a.id}));
    EXPECT_EQ(h.body.value("refused", Json()), Json({b.id})) << "bravo has no volumes to hold";
  }
  EXPECT_EQ(assignment().at("volumes")[0].value("held", false), true);
  EXPECT_EQ(assignment(t3).at("volumes")[0].value("held", true), false);
  EXPECT_TRUE(
      IsProblem(s.request("POST", "/v1/agent/storage-holdings", {{"tenants", "x"}}, t2), 400));

  auto off = s.request("DELETE", "/v1/tenants/" + a.id, nullptr, s.admin_token());
  ASSERT_EQ(off.status, 200) << off.raw;
  s.clock().advance(169h);
  auto ours = due_ids();
  ASSERT_EQ(ours.size(), 1u);
  const std::string id = *ours.begin();
  EXPECT_EQ(due_ids(t2), ours);
  // Node 3 never held alpha's trees: not its deletion.
  EXPECT_TRUE(due_ids(t3).empty());
  EXPECT_TRUE(IsProblem(done(id, t3, ""), 403));

  auto first = done(id, node_token);
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(first.body.at("state"), "scheduled");
  EXPECT_EQ(first.body.at("waiting_for"), Json({n2}));
  EXPECT_FALSE(ids_of(a).is_null()) << "ids released before every holder confirmed";
  EXPECT_TRUE(due_ids().empty()) << "a node that confirmed gets it again";
  EXPECT_EQ(done(id, node_token).status, 200);  // a retry changes nothing
  EXPECT_FALSE(ids_of(a).is_null());

  auto last = done(id, t2, "absent");
  ASSERT_EQ(last.status, 200) << last.raw;
  EXPECT_EQ(last.body.at("state"), "done");
  EXPECT_EQ(last.body.at("confirmations").size(), 2u);
  EXPECT_TRUE(ids_of(a).is_null());
  EXPECT_TRUE(IsProblem(done(id, t3), 409)) << "a node that did not confirm cannot now";
  EXPECT_TRUE(IsProblem(
      s.request("POST", "/v1/agent/storage-deletions/" + id + "/done", {{"outcome", "gone"}}, t2),
      400));
}

TEST_F(Storage, ARetiredHolderIsNotWaitedFor) {
  std::string n2;
  const std::string t2 = enroll("storage-node-2", &n2);
  ASSERT_EQ(s.request("PUT", volumes(a, "vision"), Json::object(), a.admin_token).status, 200);
  for (const std::string& token : std::vector<std::string>{node_token, t2})
    ASSERT_EQ(s.request("POST", "/v1/agent/storage-holdings", {{"tenants", {a.id}}}, token).status,
              200);
  ASSERT_EQ(s.request("DELETE", "/v1/tenants/" + a.id, nullptr, s.admin_token()).status, 200);
  s.clock().advance(169h);
  const std::string id = *due_ids().begin();
  ASSERT_EQ(done(id, node_token).body.at("state"), "scheduled");
  ASSERT_EQ(
      s.request("POST", "/v1/nodes/" + n2 + "/maintenance", Json::object(), s.admin_token()).status,
      200);
  auto retired = s.request("POST", "/v1/nodes/" + n2 + "/retire", Json::object(), s.admin_token());
  ASSERT_EQ(retired.status, 200) << retired.raw;
  // The confirming node gets the deletion again; its acknowledgement completes it.
  EXPECT_EQ(due_ids(), std::set<std::string>{id});
  auto again = done(id, node_token, "absent");
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.body.at("state"), "done");
  EXPECT_TRUE(ids_of(a).is_null());
}

// Issue 24, finding 7: secret names may not hold "/" (the path is decoded before it is routed,
// so such a secret could never be read or deleted by its path); one stored before the rule is
// deleted by naming it in the query.
TEST_F(Storage, SecretNamesFitOnePathSegmentAndOldOnesCanBeDeleted) {
  const std::string secrets = "/v1/tenants/" + a.id + "/secrets";
  auto bad = s.request("POST", secrets, {{"name", "team/registry"}, {"value", "v"}}, a.admin_token);
  ASSERT_TRUE(IsProblem(bad, 400)) << bad.raw;
  EXPECT_NE(bad.raw.find("-_.:"), std::string::npos) << bad.raw;
  for (const std::string name : {"..", "."})
    EXPECT_TRUE(
        IsProblem(s.request("POST", secrets, {{"name", name}, {"value", "v"}}, a.admin_token), 400))
        << name;
  EXPECT_TRUE(s.request("GET", secrets, nullptr, a.admin_token).body.at("items").empty());

  // A secret stored before the rule (the row as it was written then).
  ASSERT_EQ(s.request("POST", secrets, {{"name", "kept"}, {"value", "v"}}, a.admin_token).status,
            201);
  ASSERT_TRUE(s.store()
                  .write([&](store::Tx& tx) -> Result<void> {
                    GP_TRY(tx.exec(
                        "INSERT INTO tenant_secrets (tenant_id, name, key_version, sealed, "
                        "created_by, created_at) SELECT tenant_id, 'team/registry', key_version, "
                        "sealed, created_by, created_at FROM tenant_secrets WHERE name = 'kept'"));
                    return ok();
                  })
                  .has_value());
  EXPECT_EQ(s.request("GET", secrets, nullptr, a.admin_token).body.at("items").size(), 2u);
  // Its path cannot name it...
  EXPECT_EQ(s.request("DELETE", secrets + "/team%2Fregistry", nullptr, a.admin_token).status, 404);
  // ...the query can.
  EXPECT_TRUE(IsProblem(s.request("DELETE", secrets, nullptr, a.admin_token), 400));
  EXPECT_TRUE(IsProblem(s.request("DELETE", secrets + "?name=nope", nullptr, a.admin_token), 404));
  EXPECT_TRUE(IsProblem(
      s.request("DELETE", secrets + "?name=team%2Fregistry", nullptr, b.admin_token), 404));
  EXPECT_EQ(s.request("DELETE", secrets + "?name=team%2Fregistry", nullptr, a.admin_token).status,
            204);
  auto left = s.request("GET", secrets, nullptr, a.admin_token);
  ASSERT_EQ(left.body.at("items").size(), 1u) << left.raw;
  EXPECT_EQ(left.body.at("items")[0].at("name"), "kept");
}

}  // namespace
}  // namespace gp::it
