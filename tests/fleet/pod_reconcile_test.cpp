// fleet::reconcile_pods over a made-up `kubectl get pods -A -o json` (tests/fixtures/pods):
// GPU pods per node, their tenants, and each kind of discrepancy against the allocations.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fleet/fleet.h"

namespace gp::fleet {
namespace {

std::filesystem::path fixture_path(std::string_view name) {
  const char* root = std::getenv("GP_SOURCE_DIR");
  std::filesystem::path base = root ? std::filesystem::path(root) / "tests"
                                    : std::filesystem::path(__FILE__).parent_path().parent_path();
  return base / "fixtures" / "pods" / name;
}

Json load_fixture(std::string_view name) {
  std::ifstream in(fixture_path(name));
  EXPECT_TRUE(in.good()) << "cannot open " << fixture_path(name);
  std::stringstream text;
  text << in.rdbuf();
  Result<Json> json = parse_json(text.str());
  EXPECT_TRUE(json.has_value()) << name;
  return json ? *json : Json();
}

PodReconcileInput cluster_input(const Json& pods) {
  PodReconcileInput in;
  in.pods = &pods;
  in.namespace_tenants = {{"acme-train", "acme"}, {"beta-infer", "beta"}};
  in.holdings = {
      {.tenant = "acme", .node = "gpu-a", .whole_gpus = 2},
      {.tenant = "beta", .node = "gpu-c", .mig = {{"1g.18gb", 2}}},
  };
  return in;
}

const Discrepancy* find(const PodReconcileReport& r, DiscrepancyKind k, const std::string& node) {
  for (const auto& d : r.discrepancies)
    if (d.kind == k && d.node == node) return &d;
  return nullptr;
}

TEST(PodReconcile, CountsGpuPodsPerNodeWithTheirTenants) {
  Json pods = load_fixture("cluster-pods.json");
  auto r = reconcile_pods(cluster_input(pods));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->pods_seen, 10);
  EXPECT_EQ(r->gpu_pods, 7) << "finished and CPU-only pods are not GPU pods";
  ASSERT_EQ(r->nodes.size(), 3u);
  EXPECT_EQ(r->nodes[0].node, "gpu-a");
  EXPECT_EQ(r->nodes[1].node, "gpu-b");
  EXPECT_EQ(r->nodes[2].node, "gpu-c");
  const auto& a = r->nodes[0];
  ASSERT_EQ(a.pods.size(), 3u);
  EXPECT_EQ(a.pods[0].name, "trainer-0");
  EXPECT_EQ(a.pods[0].tenant, "acme");
  EXPECT_EQ(a.pods[2].ns, "beta-infer");
  EXPECT_EQ(a.pods[2].tenant, "beta");
  EXPECT_EQ(a.requested.at("acme").at("nvidia.com/gpu"), 3) << "string and number quantities";
  EXPECT_EQ(a.requested.at("beta").at("nvidia.com/gpu"), 1);
  EXPECT_EQ(a.holders, std::vector<std::string>{"acme"});
  // An init container asking more than the app containers sets the pod's request.
  const auto& c = r->nodes[2];
  EXPECT_EQ(c.requested.at("beta").at("nvidia.com/mig-1g.18gb"), 2);
  EXPECT_EQ(c.requested.at("").at("nvidia.com/gpu.shared"), 1);
  ASSERT_EQ(r->unscheduled.size(), 1u);
  EXPECT_EQ(r->unscheduled[0].name, "waiting");
  EXPECT_EQ(r->unscheduled[0].resources.at("nvidia.com/gpu"), 4);
}

TEST(PodReconcile, ReportsEachKindOfDiscrepancy) {
  Json pods = load_fixture("cluster-pods.json");
  auto r = reconcile_pods(cluster_input(pods));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->discrepancies.size(), 4u) << to_json(*r).dump(1);

  const auto* over = find(*r, DiscrepancyKind::kOverRequest, "gpu-a");
  ASSERT_NE(over, nullptr);
  EXPECT_EQ(over->tenant, "acme");
  EXPECT_EQ(over->resource, "nvidia.com/gpu");
  EXPECT_EQ(over->requested, 3);
  EXPECT_EQ(over->held, 2);
  EXPECT_EQ(over->pods, (std::vector<std::string>{"acme-train/trainer-0", "acme-train/trainer-1"}));

  const auto* foreign = find(*r, DiscrepancyKind::kForeignNode, "gpu-a");
  ASSERT_NE(foreign, nullptr);
  EXPECT_EQ(foreign->tenant, "beta");
  EXPECT_EQ(foreign->pods, std::vector<std::string>{"beta-infer/server-0"});
  EXPECT_NE(foreign->message.find("allocated to acme"), std::string::npos) << foreign->message;

  const auto* stray = find(*r, DiscrepancyKind::kUnallocatedNode, "gpu-b");
  ASSERT_NE(stray, nullptr);
  EXPECT_EQ(stray->tenant, "acme");
  EXPECT_EQ(stray->pods, std::vector<std::string>{"acme-train/stray"});

  const auto* unowned = find(*r, DiscrepancyKind::kUnownedNamespace, "gpu-c");
  ASSERT_NE(unowned, nullptr);
  EXPECT_EQ(unowned->pods, std::vector<std::string>{"kube-system/dcgm-exporter-x1"});
  EXPECT_EQ(find(*r, DiscrepancyKind::kOverRequest, "gpu-c"), nullptr)
      << "beta's 2 MIG instances cover its init container's 2";

  Json j = to_json(*r);
  EXPECT_EQ(j.at("discrepancies").size(), 4u);
  EXPECT_EQ(j.at("nodes")[0].at("requested").at("acme").at("nvidia.com/gpu"), 3);
}

TEST(PodReconcile, MatchingAllocationsReportNothing) {
  Json pods = load_fixture("cluster-pods.json");
  auto in = cluster_input(pods);
  in.namespace_tenants["kube-system"] = "platform";
  in.holdings = {
      {.tenant = "acme", .node = "gpu-a", .whole_gpus = 3},
      {.tenant = "beta", .node = "gpu-a", .whole_gpus = 1},
      {.tenant = "acme", .node = "gpu-b", .whole_gpus = 1},
      {.tenant = "beta", .node = "gpu-c", .mig = {{"1g.18gb", 2}}},
      {.tenant = "platform", .node = "gpu-c", .shared = 1},
  };
  auto r = reconcile_pods(in);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(r->discrepancies.empty()) << to_json(*r).dump(1);
  EXPECT_EQ(r->nodes[0].holders, (std::vector<std::string>{"acme", "beta"}));
  // One GPU fewer for acme on gpu-a is an over-request again; a holding of another profile
  // does not cover a MIG request.
  in.holdings[0].whole_gpus = 2;
  in.holdings[3].mig = {{"2g.35gb", 2}};
  auto again = reconcile_pods(in);
  ASSERT_TRUE(again.has_value());
  ASSERT_EQ(again->discrepancies.size(), 2u) << to_json(*again).dump(1);
  EXPECT_EQ(again->discrepancies[1].resource, "nvidia.com/mig-1g.18gb");
  EXPECT_EQ(again->discrepancies[1].held, 0);
}

TEST(PodReconcile, RejectsMalformedListsNamingTheItem) {
  auto error_of = [](const Json& pods) {
    PodReconcileInput in;
    in.pods = &pods;
    auto r = reconcile_pods(in);
    EXPECT_FALSE(r.has_value()) << pods.dump();
    return r ? std::string() : r.error().message;
  };
  EXPECT_NE(error_of(Json::array()).find("List or PodList"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "NodeList"}, {"items", Json::array()}}).find("NodeList"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "List"}}).find("items"), std::string::npos);
  Json base = load_fixture("cluster-pods.json");
  Json half = base;
  half["items"][1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0.5";
  std::string e = error_of(half);
  EXPECT_NE(e.find("items[1] (acme-train/trainer-1)"), std::string::npos) << e;
  EXPECT_NE(e.find("whole non-negative"), std::string::npos) << e;
  Json negative = base;
  negative["items"][0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = -1;
  EXPECT_NE(error_of(negative).find("items[0]"), std::string::npos);
  Json dup = base;
  dup["items"].push_back(base["items"][0]);
  EXPECT_NE(error_of(dup).find("listed twice"), std::string::npos);
  Json noname = base;
  noname["items"][2]["metadata"].erase("name");
  EXPECT_NE(error_of(noname).find("items[2].metadata: name is missing"), std::string::npos);
  Json badnode = base;
  badnode["items"][0]["spec"]["nodeName"] = 7;
  EXPECT_NE(error_of(badnode).find("nodeName is not a string"), std::string::npos);
  Json svc = base;
  svc["items"][0]["kind"] = "Service";
  EXPECT_NE(error_of(svc).find("is not Pod"), std::string::npos);
}

}  // namespace
}  // namespace gp::fleet
