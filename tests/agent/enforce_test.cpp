// The agent's pure side of enforcement: reading its assignment and the workloads file strictly,
// so that a malformed answer or file changes nothing on the node.
#include "agent/enforce.h"

#include <gtest/gtest.h>

namespace gp::agent {
namespace {

Json good_assignment() {
  return {
      {"node", "node_1"},
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
         {"ids", {{"first", 1000000}, {"count", 65536}}},
         {"projects",
          {{{"project", "vision"}, {"id", 1000001}, {"size_limits", {{"datasets", 1 << 22}}}}}}}}},
      {"storage_deletions",
       {{{"id", "sdel_1"}, {"tenant", "old"}, {"project", ""}, {"due_at", "x"}}}}};
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
  ASSERT_EQ(a->deletions.size(), 1u);
  EXPECT_TRUE(a->deletions[0].project.empty());
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

}  // namespace
}  // namespace gp::agent
