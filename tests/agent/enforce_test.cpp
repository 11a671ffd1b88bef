// The agent's side of enforcement: reading its assignment and the workloads file strictly, so
// that a malformed answer or file changes nothing on the node; and a storage round against a
// scripted control plane on a real directory (as root), where a deletion never removes a tree
// recording another identity and trees are created only once the node is recorded as holding
// them.
#include "agent/enforce.h"

#include <gtest/gtest.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace gp::agent {
namespace {

Json good_assignment() {
  return {{"node", "node_1"},
          {"generated_at", "2026-01-01T00:00:00Z"},
          {"supernet", "10.64.0.0/10"},
          {"segments",
           {{{"tenant", "acme"}, {"vni", 10000}, {"cidr", "10.64.0.0/24"}},
            {{"tenant", "umbrella"}, {"vni", 10001}, {"cidr", "10.64.1.0/24"}}}},
          {"policies",
           {{{"tenant", "acme"},
             {"policy",
              {{"egress", {{{"destination", "203.0.113.0/24"}, {"protocol", "tcp"}}}},
               {"exposures", Json::array()}}}}}},
          {"volumes",
           {{{"tenant", "acme"},
             {"tenant_id", "ten_acme"},
             {"held", false},
             {"ids", {{"first", 1000000}, {"count", 65536}}},
             {"projects",
              {{{"project", "vision"},
                {"project_id", "prj_vision"},
                {"generation", "vgen_1"},
                {"id", 1000001},
                {"size_limits", {{"datasets", 1 << 22}}}}}}}}},
          {"storage_deletions",
           {{{"id", "sdel_1"},
             {"tenant", "old"},
             {"tenant_id", "ten_old"},
             {"project", ""},
             {"project_id", ""},
             {"generation", ""},
             {"owner", 2000000},
             {"due_at", "x"}},
            {{"id", "sdel_2"},
             {"tenant", "acme"},
             {"tenant_id", "ten_acme"},
             {"project", "speech"},
             {"project_id", "prj_speech"},
             {"generation", "vgen_0"},
             {"owner", nullptr},
             {"due_at", "x"}}}}};
}

TEST(Enforce, ParsesAWholeAssignment) {
  auto a = parse_assignment(good_assignment());
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->net.segments.size(), 2u);
  EXPECT_EQ(a->net.segments[1].tenant, "umbrella");
  EXPECT_EQ(a->net.segments[1].vni, 10001u);
  ASSERT_EQ(a->net.policies.size(), 1u);
  EXPECT_EQ(a->net.policies[0].egress.size(), 1u);
  ASSERT_EQ(a->volumes.size(), 1u);
  EXPECT_EQ(a->volumes[0].ids.first, 1000000u);
  ASSERT_EQ(a->volumes[0].projects.size(), 1u);
  EXPECT_EQ(a->volumes[0].projects[0].id, 1000001u);
  ASSERT_EQ(a->volumes[0].projects[0].size_limits.size(), 1u);
  EXPECT_EQ(a->volumes[0].projects[0].size_limits[0].second, 1u << 22);
  EXPECT_EQ(a->volumes[0].tenant_id, "ten_acme");
  EXPECT_EQ(a->volumes[0].projects[0].project_id, "prj_vision");
  EXPECT_EQ(a->volumes[0].projects[0].generation, "vgen_1");
  EXPECT_EQ(a->unheld, std::set<std::string>{"ten_acme"});
  ASSERT_EQ(a->deletions.size(), 2u);
  EXPECT_TRUE(a->deletions[0].project.empty());
  EXPECT_EQ(a->deletions[0].expected.identity, storage::TreeIdentity{.tenant_id = "ten_old"});
  EXPECT_EQ(a->deletions[0].expected.owner, 2000000u);
  EXPECT_EQ(a->deletions[1].expected.identity,
            (storage::TreeIdentity{"ten_acme", "prj_speech", "vgen_0"}));
  EXPECT_FALSE(a->deletions[1].expected.owner);
  // The rendered ruleset of the assignment alone is valid.
  EXPECT_TRUE(network::render_nftables(a->net));
}

TEST(Enforce, RefusesMalformedAssignments) {
  std::vector<std::pair<std::string, std::function<void(Json&)>>> breaks = {
      {"no segments", [](Json& j) { j.erase("segments"); }},
      {"overlapping segments", [](Json& j) { j["segments"][1]["cidr"] = "10.64.0.0/23"; }},
      {"vni as text", [](Json& j) { j["segments"][0]["vni"] = "10000"; }},
      {"policy into the supernet",
       [](Json& j) { j["policies"][0]["policy"]["egress"][0]["destination"] = "10.64.1.0/24"; }},
      {"project id outside the range", [](Json& j) { j["volumes"][0]["projects"][0]["id"] = 5; }},
      {"tenant name with a slash", [](Json& j) { j["volumes"][0]["tenant"] = "../etc"; }},
      {"project name with a slash",
       [](Json& j) { j["volumes"][0]["projects"][0]["project"] = "a/b"; }},
      {"unknown volume kind",
       [](Json& j) {
         j["volumes"][0]["projects"][0]["size_limits"] = {{"homes", 1}};
       }},
      {"negative limit",
       [](Json& j) {
         j["volumes"][0]["projects"][0]["size_limits"] = {{"datasets", -1}};
       }},
      {"deletion without id", [](Json& j) { j["storage_deletions"][0].erase("id"); }},
      {"deletion without a tenant id",
       [](Json& j) { j["storage_deletions"][0].erase("tenant_id"); }},
      {"deletion with an empty tenant id",
       [](Json& j) { j["storage_deletions"][0]["tenant_id"] = ""; }},
      {"deletion without a generation",
       [](Json& j) { j["storage_deletions"][1].erase("generation"); }},
      {"deletion without an owner", [](Json& j) { j["storage_deletions"][1].erase("owner"); }},
      {"deletion with a negative owner", [](Json& j) { j["storage_deletions"][1]["owner"] = -1; }},
      {"volumes without a tenant id", [](Json& j) { j["volumes"][0].erase("tenant_id"); }},
      {"volumes without held", [](Json& j) { j["volumes"][0].erase("held"); }},
      {"project without a generation",
       [](Json& j) { j["volumes"][0]["projects"][0].erase("generation"); }},
      {"project with an empty project id",
       [](Json& j) { j["volumes"][0]["projects"][0]["project_id"] = ""; }},
      {"not an object", [](Json& j) { j = Json::array(); }},
  };
  for (auto& [what, change] : breaks) {
    Json j = good_assignment();
    change(j);
    EXPECT_FALSE(parse_assignment(j)) << what;
  }
}

TEST(Enforce, ParsesWorkloadsStrictly) {
  auto w = parse_workloads(
      {{"a1", {{"tenant", "acme"}, {"interface", "veth-a1"}, {"address", "10.64.0.2"}}}});
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_EQ(w->size(), 1u);
  EXPECT_EQ((*w)[0].name, "a1");
  EXPECT_EQ((*w)[0].interface, "veth-a1");
  EXPECT_EQ((*w)[0].address, 0x0A400002u);
  EXPECT_TRUE(parse_workloads(Json::object()));
  for (const Json& bad : {
           Json::array(),
           Json{{"a1", "veth"}},
           Json{{"a1", {{"tenant", "acme"}, {"interface", "veth-a1"}}}},
           Json{{"a1", {{"tenant", "acme"}, {"interface", "veth-a1"}, {"address", "10.64.0.256"}}}},
           Json{{"a1",
                 {{"tenant", "acme"},
                  {"interface", "veth-a1"},
                  {"address", "10.64.0.2"},
                  {"extra", 1}}}},
       })
    EXPECT_FALSE(parse_workloads(bad)) << bad.dump();
}

TEST(Enforce, SplitsTheNftPrefix) {
  EXPECT_EQ(split_words("  ip netns  exec ns1 "),
            (std::vector<std::string>{"ip", "netns", "exec", "ns1"}));
  EXPECT_TRUE(split_words("   ").empty());
}

// A control plane scripted by the test: the assignment it answers, and every call the agent made.
struct ScriptedPlane {
  Json assignment;
  Json holdings_answer;  // null: accept every tenant asked for
  std::vector<std::pair<std::string, Json>> posts;
  std::vector<Json> reports;  // POST /v1/agent/storage-report bodies

  HttpCall call() {
    return [this](std::string_view method, const std::string& path,
                  const Json& body) -> Result<std::pair<int, Json>> {
      if (method == "GET") return std::pair<int, Json>{200, assignment};
      if (path == "/v1/agent/storage-report") {  // what the audit found: not a change
        reports.push_back(body);
        return std::pair<int, Json>{200, Json::object()};
      }
      posts.emplace_back(path, body);
      if (path == "/v1/agent/storage-holdings")
        return std::pair<int, Json>{
            200, holdings_answer.is_null()
                     ? Json{{"held", body["tenants"]}, {"refused", Json::array()}}
                     : holdings_answer};
      return std::pair<int, Json>{200, Json::object()};
    };
  }
};

class EnforceStorage : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (the agent chowns the volume trees)";
    root = dir.path() + "/root";
    std::filesystem::create_directory(root);
    options.storage_root = root;
    plane.assignment = good_assignment();
    plane.assignment["storage_deletions"] = Json::array();
  }
  bool round() {
    Enforcer e(options);
    return e.round(plane.call());
  }

  gp::testing::TempDir dir;
  std::string root;
  AgentOptions options;
  ScriptedPlane plane;
};

TEST_F(EnforceStorage, TreesAreCreatedOnlyOnceTheNodeHoldsTheTenant) {
  plane.holdings_answer = {{"held", Json::array()}, {"refused", {"ten_acme"}}};
  round();
  ASSERT_EQ(plane.posts.size(), 1u);
  EXPECT_EQ(plane.posts[0].first, "/v1/agent/storage-holdings");
  EXPECT_EQ(plane.posts[0].second, (Json{{"tenants", {"ten_acme"}}}));
  EXPECT_FALSE(std::filesystem::exists(root + "/acme")) << "created a tree the node does not hold";

  plane.holdings_answer = nullptr;
  plane.posts.clear();
  EXPECT_TRUE(round());
  ASSERT_EQ(plane.posts.size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(root + "/acme/vision/datasets"));
  // The tree is reported: no volume key in this assignment, so in clear, and nothing found.
  ASSERT_EQ(plane.reports.size(), 1u);
  const Json& tree = plane.reports[0].at("tenants").at(0);
  EXPECT_EQ(tree.at("tenant_id"), "ten_acme");
  EXPECT_EQ(tree.at("encrypted"), false);
  EXPECT_EQ(tree.at("finding_count"), 0) << tree.dump();

  // Held already: no holdings call.
  plane.assignment["volumes"][0]["held"] = true;
  plane.posts.clear();
  EXPECT_TRUE(round());
  EXPECT_TRUE(plane.posts.empty());
}

// Issue 24, finding 5: a due deletion of an earlier "vision" (another project id and
// generation) while the tree at acme/vision is the current project's, with its files.
TEST_F(EnforceStorage, ADeletionNeverRemovesATreeOfAnotherIdentity) {
  plane.assignment["volumes"][0]["held"] = true;
  ASSERT_TRUE(round());
  const std::string data = root + "/acme/vision/datasets/file.bin";
  std::ofstream(data) << "the current project's data";
  plane.assignment["storage_deletions"] = {{{"id", "sdel_old"},
                                            {"tenant", "acme"},
                                            {"tenant_id", "ten_acme"},
                                            {"project", "vision"},
                                            {"project_id", "prj_vision_before"},
                                            {"generation", "vgen_0"},
                                            {"owner", 1000002},
                                            {"due_at", "x"}}};
  EXPECT_TRUE(round());
  EXPECT_TRUE(std::filesystem::exists(data)) << "removed the tree of another identity";
  ASSERT_FALSE(plane.posts.empty());
  EXPECT_EQ(plane.posts[0].first, "/v1/agent/storage-deletions/sdel_old/done");
  EXPECT_EQ(plane.posts[0].second, (Json{{"outcome", "replaced"}}));

  // The same deletion naming this tree's identity removes it (and says so).
  plane.assignment["storage_deletions"][0]["id"] = "sdel_now";
  plane.assignment["storage_deletions"][0]["project_id"] = "prj_vision";
  plane.assignment["storage_deletions"][0]["generation"] = "vgen_1";
  plane.assignment["storage_deletions"][0]["owner"] = 1000001;
  plane.assignment["volumes"] = Json::array();
  plane.posts.clear();
  EXPECT_TRUE(round());
  EXPECT_FALSE(std::filesystem::exists(root + "/acme/vision"));
  ASSERT_EQ(plane.posts.size(), 1u);
  EXPECT_EQ(plane.posts[0].second, (Json{{"outcome", "removed"}}));
}

}  // namespace
}  // namespace gp::agent
