// Specification of the Kubernetes import: resource quantities, a realistic cluster from
// `kubectl get nodes -o json` read field by field, GFD's MIG strategies and time-slicing, and
// the error each bad input gets. Fixtures live in tests/fixtures/k8s/ (see its README.md).
#include "fleet/k8s_import.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "vocab/catalogs.h"
#include "vocab/vocab.h"

namespace gp::fleet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kKi = 1024;
constexpr int64_t kMi = kKi * 1024;

// ---------------------------------------------------------------------------------------------
// Helpers

// tests/fixtures/k8s/<name>, under GP_SOURCE_DIR when the harness sets it, else next to this file.
std::filesystem::path fixture_path(std::string_view name) {
  const char* root = std::getenv("GP_SOURCE_DIR");
  std::filesystem::path base = root ? std::filesystem::path(root) / "tests"
                                    : std::filesystem::path(__FILE__).parent_path().parent_path();
  return base / "fixtures" / "k8s" / name;
}

Json load_fixture(std::string_view name) {
  std::ifstream in(fixture_path(name));
  EXPECT_TRUE(in.good()) << "cannot open " << fixture_path(name);
  std::stringstream text;
  text << in.rdbuf();
  Result<Json> json = parse_json(text.str());
  EXPECT_TRUE(json.has_value()) << name << ": " << (json ? "" : json.error().message);
  return json ? *json : Json();
}

ImportResult import_ok(const Json& list) {
  Result<ImportResult> result = import_kubectl_nodes(list);
  EXPECT_TRUE(result.has_value()) << (result ? "" : result.error().message);
  return result ? *result : ImportResult();
}

std::string import_error(const Json& list) {
  Result<ImportResult> result = import_kubectl_nodes(list);
  EXPECT_FALSE(result.has_value());
  if (result) return "";
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  return result.error().message;
}

vocab::Layout planned(std::string_view model, const std::vector<std::string>& profiles) {
  Result<vocab::Layout> layout = vocab::plan(vocab::catalog_for(model), profiles);
  EXPECT_TRUE(layout.has_value()) << (layout ? "" : layout.error().message);
  return layout ? *layout : vocab::Layout();
}

// Instances per profile over all of a node's GPUs.
std::map<std::string, int> mig_totals(const Inventory& inventory) {
  std::map<std::string, int> totals;
  for (const GpuInfo& gpu : inventory.gpus) {
    for (const vocab::PlacedInstance& instance : gpu.mig_instances) ++totals[instance.profile];
  }
  return totals;
}

using StringMap = std::map<std::string, std::string>;

// A minimal Node as kubectl prints it: Ready, allocatable = capacity, cpu 8 and 32Gi of memory
// unless `capacity` says otherwise.
Json make_node(const std::string& name, const StringMap& labels, StringMap capacity = {}) {
  capacity.emplace("cpu", "8");
  capacity.emplace("memory", "32Gi");
  capacity.emplace("pods", "110");
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", Json::object()},
          {"status",
           {{"capacity", capacity},
            {"allocatable", capacity},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

Json make_list(std::vector<Json> items) {
  return {{"apiVersion", "v1"},
          {"kind", "List"},
          {"metadata", {{"resourceVersion", ""}}},
          {"items", std::move(items)}};
}

// GFD labels of a node with `count` GPUs named `product`, no MIG, no sharing.
StringMap gfd_labels(const std::string& product, int count, int64_t memory_mib,
                     const std::string& mig_strategy = "none") {
  return {{"nvidia.com/gpu.product", product},
          {"nvidia.com/gpu.count", std::to_string(count)},
          {"nvidia.com/gpu.memory", std::to_string(memory_mib)},
          {"nvidia.com/gpu.replicas", "1"},
          {"nvidia.com/gpu.sharing-strategy", "none"},
          {"nvidia.com/mig.strategy", mig_strategy}};
}

// One node of eight whole H200s, as GFD and the device plugin describe it.
Json h200_node(const std::string& name, StringMap extra_labels = {}, StringMap capacity = {}) {
  StringMap labels = gfd_labels("NVIDIA-H200", 8, 143771);
  for (auto& [k, v] : extra_labels) labels[k] = v;
  capacity.emplace("nvidia.com/gpu", "8");
  return make_node(name, labels, capacity);
}

// ---------------------------------------------------------------------------------------------
// Quantities

struct QuantityCase {
  std::string_view text;
  int64_t value;
};

TEST(K8sQuantity, ParsesEveryKubernetesFormInBaseUnitsRoundedUp) {
  const QuantityCase cases[] = {
      {"0", 0},
      {"1", 1},
      {"+5", 5},
      {"000012", 12},
      {"0.0", 0},
      {"128974848", 128974848},
      {"2113412Ki", 2113412 * kKi},
      {"2103066624Ki", 2103066624 * kKi},
      {"1Ki", kKi},
      {"123Mi", 123 * kMi},
      {"100Gi", 100 * kKi * kMi},
      {"2Ti", 2 * kMi * kMi},
      {"1Pi", int64_t{1} << 50},
      {"7Ei", int64_t{7} << 60},
      {"1k", 1000},
      {"129M", 129000000},
      {"1.5G", 1500000000},
      {"1T", 1000000000000},
      {"1P", 1000000000000000},
      {"1E", 1000000000000000000},  // E alone is exa
      {"9E", 9000000000000000000},
      {"1e3", 1000},
      {"1E3", 1000},  // E with digits is an exponent
      {"1e+2", 100},
      {"129e6", 129000000},
      {"1.5e3", 1500},
      {"12e-1", 2},  // 1.2 rounds up
      {"1e-50", 1},
      {"0.5", 1},
      {".5", 1},
      {"5.", 5},
      {"100m", 1},
      {"1500m", 2},
      {"3000m", 3},
      {"1u", 1},
      {"1n", 1},
      {"0.000001", 1},
      {"9223372036854775807", INT64_MAX},
      {"9223372036854775807000m", INT64_MAX},
  };
  for (const QuantityCase& c : cases) {
    Result<int64_t> value = parse_k8s_quantity(c.text);
    ASSERT_TRUE(value.has_value()) << c.text << ": " << value.error().message;
    EXPECT_EQ(*value, c.value) << c.text;
  }
}

TEST(K8sQuantity, ParsesCpuAsMillicores) {
  const QuantityCase cases[] = {
      {"96", 96000}, {"95500m", 95500}, {"223500m", 223500}, {"0.25", 250},
      {"0.1", 100},  {"100m", 100},     {"1.5", 1500},       {"0.0001", 1},
      {"250u", 1},   {"1500000n", 2},   {"2k", 2000000},     {"1e3", 1000000},
      {"0", 0},      {"1Ki", 1024000},
  };
  for (const QuantityCase& c : cases) {
    Result<int64_t> value = parse_cpu_millis(c.text);
    ASSERT_TRUE(value.has_value()) << c.text << ": " << value.error().message;
    EXPECT_EQ(*value, c.value) << c.text;
  }
}

struct BadQuantityCase {
  std::string_view text;
  std::string_view reason;
};

TEST(K8sQuantity, RejectsGarbageNegativesAndOverflow) {
  const BadQuantityCase cases[] = {
      {"", "expected a number"},
      {".", "expected a number"},
      {"Ki", "expected a number"},
      {" 1", "expected a number"},
      {"inf", "expected a number"},
      {"NaN", "expected a number"},
      {"+-1", "expected a number"},
      {"-1", "must not be negative"},
      {"-0", "must not be negative"},
      {"-1Gi", "must not be negative"},
      {"1 ", "unknown suffix"},
      {"1 Ki", "unknown suffix"},
      {"1KB", "unknown suffix"},
      {"1K", "unknown suffix"},
      {"1ki", "unknown suffix"},
      {"1mi", "unknown suffix"},
      {"1Eii", "unknown suffix"},
      {"1.2.3", "unknown suffix"},
      {"1,5", "unknown suffix"},
      {"0x10", "unknown suffix"},
      {"1e", "unknown suffix"},
      {"1e1.5", "unknown suffix"},
      {"1e12345", "unknown suffix"},
      {"1e3Ki", "unknown suffix"},
      {"8Ei", "too large"},
      {"10E", "too large"},
      {"1e19", "too large"},
      {"9223372036854775808", "too large"},
      {"12345678901234567890123", "more than 20 significant digits"},
  };
  for (const BadQuantityCase& c : cases) {
    Result<int64_t> value = parse_k8s_quantity(c.text);
    ASSERT_FALSE(value.has_value()) << c.text << " parsed as " << *value;
    EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(value.error().message, HasSubstr(c.reason)) << c.text;
  }
  Result<int64_t> cpu = parse_cpu_millis("9300000000000000");
  ASSERT_FALSE(cpu.has_value());
  EXPECT_THAT(cpu.error().message, HasSubstr("too large"));
}

// ---------------------------------------------------------------------------------------------
// The good cluster, field by field

void expect_gpus(const Inventory& inventory, int count, std::string_view product,
                 std::string_view model, int64_t memory_mib) {
  ASSERT_EQ(inventory.gpus.size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const GpuInfo& gpu = inventory.gpus[i];
    SCOPED_TRACE(gpu.uuid);
    EXPECT_EQ(gpu.uuid, "GPU-k8s-" + inventory.node.name + "-" + std::to_string(i));
    EXPECT_EQ(gpu.index, i);
    EXPECT_EQ(gpu.product, product);
    EXPECT_EQ(gpu.model, model);
    EXPECT_EQ(gpu.memory_bytes, memory_mib * kMi);
    EXPECT_EQ(gpu.pci_bus_id, "");
    EXPECT_EQ(gpu.numa_node, -1);
    EXPECT_THAT(gpu.nvlink_peers, IsEmpty());
    EXPECT_TRUE(gpu.health.healthy());
  }
}

TEST(K8sImport, ImportsTheClusterFixtureFieldByField) {
  ImportResult result = import_ok(load_fixture("cluster.json"));
  EXPECT_THAT(result.skipped,
              ElementsAre("cp-01: no NVIDIA GPUs (no nvidia.com/gpu.product label)"));
  ASSERT_EQ(result.nodes.size(), 3u);

  // gpu-h200-01: eight whole H200s, one reported unhealthy by the device plugin.
  {
    const ImportedNode& n = result.nodes[0];
    const NodeInfo& node = n.inventory.node;
    EXPECT_EQ(node.name, "gpu-h200-01");
    EXPECT_EQ(node.cpu_millis, 223500);
    EXPECT_EQ(node.memory_bytes, 2103066624 * kKi);
    EXPECT_EQ(node.rack, "b12");
    EXPECT_EQ(node.nvlink_domain, "");
    EXPECT_EQ(node.labels, (StringMap{
                               {"kubernetes.io/arch", "amd64"},
                               {"kubernetes.io/hostname", "gpu-h200-01"},
                               {"kubernetes.io/os", "linux"},
                               {"node.kubernetes.io/instance-type", "dell-xe9680-h200"},
                               {"nvidia.com/cuda.driver-version.full", "550.127.05"},
                               {"nvidia.com/cuda.runtime-version.full", "12.4"},
                               {"nvidia.com/gpu.family", "hopper"},
                               {"nvidia.com/gpu.machine", "PowerEdge-XE9680"},
                               {"nvidia.com/gpu.product", "NVIDIA-H200"},
                               {"nvidia.com/gpu.replicas", "1"},
                               {"nvidia.com/gpu.sharing-strategy", "none"},
                               {"nvidia.com/mig.config", "all-disabled"},
                               {"nvidia.com/mig.strategy", "mixed"},
                               {"topology.kubernetes.io/rack", "b12"},
                               {"topology.kubernetes.io/region", "us-central-dc1"},
                               {"topology.kubernetes.io/zone", "dc1-hall-b"},
                           }));
    EXPECT_TRUE(n.schedulable);
    EXPECT_TRUE(n.ready);
    EXPECT_THAT(n.warnings, ElementsAre("status.allocatable nvidia.com/gpu is 7 of capacity 8: "
                                        "the device plugin reports 1 unhealthy"));
    expect_gpus(n.inventory, 8, "NVIDIA H200", "H200", 143771);
    for (const GpuInfo& gpu : n.inventory.gpus) {
      EXPECT_TRUE(gpu.mig_capable);
      EXPECT_EQ(gpu.mode, GpuMode::kWhole);
      EXPECT_THAT(gpu.mig_instances, IsEmpty());
    }
  }

  // gpu-h200-02: mixed strategy, 8 x 3g.71gb and 12 x 1g.18gb on six GPUs, two GPUs whole.
  {
    const ImportedNode& n = result.nodes[1];
    const NodeInfo& node = n.inventory.node;
    EXPECT_EQ(node.name, "gpu-h200-02");
    EXPECT_EQ(node.cpu_millis, 223500);
    EXPECT_EQ(node.memory_bytes, 2069512192 * kKi);
    EXPECT_EQ(node.rack, "b12");
    EXPECT_EQ(node.labels.at("nvidia.com/mig.config"), "h200-6mig-2whole");
    EXPECT_EQ(node.labels.size(), 16u);
    EXPECT_FALSE(node.labels.contains("nvidia.com/mig-3g.71gb.count"));
    EXPECT_TRUE(n.schedulable);
    EXPECT_TRUE(n.ready);
    EXPECT_THAT(n.warnings, IsEmpty());
    expect_gpus(n.inventory, 8, "NVIDIA H200", "H200", 143771);
    // Largest first, onto the least loaded GPU: two GPUs get two 3g.71gb, four get one 3g.71gb
    // and three 1g.18gb.
    const vocab::Layout two_3g = planned("H200", {"3g.71gb", "3g.71gb"});
    const vocab::Layout one_3g = planned("H200", {"3g.71gb", "1g.18gb", "1g.18gb", "1g.18gb"});
    const std::vector<vocab::Layout> expected = {two_3g, two_3g, one_3g, one_3g,
                                                 one_3g, one_3g, {},     {}};
    for (int i = 0; i < 8; ++i) {
      const GpuInfo& gpu = n.inventory.gpus[i];
      SCOPED_TRACE(gpu.uuid);
      EXPECT_TRUE(gpu.mig_capable);
      EXPECT_EQ(gpu.mode, i < 6 ? GpuMode::kMig : GpuMode::kWhole);
      EXPECT_EQ(gpu.mig_instances, expected[i]);
      EXPECT_TRUE(vocab::validate(vocab::catalog_for("H200"), gpu.mig_instances));
    }
    EXPECT_EQ(mig_totals(n.inventory),
              (std::map<std::string, int>{{"1g.18gb", 12}, {"3g.71gb", 8}}));
  }

  // gpu-a100-01: A100 80GB time-sliced four ways, cordoned.
  {
    const ImportedNode& n = result.nodes[2];
    const NodeInfo& node = n.inventory.node;
    EXPECT_EQ(node.name, "gpu-a100-01");
    EXPECT_EQ(node.cpu_millis, 127000);
    EXPECT_EQ(node.memory_bytes, 1045742108 * kKi);
    EXPECT_EQ(node.rack, "a07");  // from the plain `rack` label
    EXPECT_EQ(node.labels.at("rack"), "a07");
    EXPECT_EQ(node.labels.at("topology.kubernetes.io/zone"), "dc1-hall-a");
    EXPECT_EQ(node.labels.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-SHARED");
    EXPECT_EQ(node.labels.at("nvidia.com/gpu.replicas"), "4");
    EXPECT_EQ(node.labels.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
    EXPECT_FALSE(node.labels.contains("feature.node.kubernetes.io/cpu-model.vendor_id"));
    EXPECT_FALSE(n.schedulable);
    EXPECT_TRUE(n.ready);
    EXPECT_THAT(n.warnings, IsEmpty());
    expect_gpus(n.inventory, 8, "NVIDIA A100-SXM4-80GB", "A100-80GB", 81920);
    for (const GpuInfo& gpu : n.inventory.gpus) {
      EXPECT_TRUE(gpu.mig_capable);
      EXPECT_EQ(gpu.mode, GpuMode::kTimeSliced);
      EXPECT_THAT(gpu.mig_instances, IsEmpty());
    }
  }
}

TEST(K8sImport, ImportedInventoriesRoundTripThroughTheAgentFormat) {
  for (const ImportedNode& n : import_ok(load_fixture("cluster.json")).nodes) {
    Result<Inventory> parsed = parse_inventory(to_json(n.inventory));
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    EXPECT_EQ(to_json(*parsed), to_json(n.inventory));
  }
}

TEST(K8sImport, MigSingleStrategyInfersGpusFromMigDeviceCount) {
  ImportResult result = import_ok(load_fixture("mig-single.json"));
  EXPECT_THAT(result.skipped,
              ElementsAre("cp-01: no NVIDIA GPUs (no nvidia.com/gpu.product label)"));
  ASSERT_EQ(result.nodes.size(), 1u);
  const ImportedNode& n = result.nodes[0];
  EXPECT_EQ(n.inventory.node.name, "dgx-a100-01");
  EXPECT_EQ(n.inventory.node.cpu_millis, 254000);
  EXPECT_EQ(n.inventory.node.memory_bytes, 1045742108 * kKi);
  EXPECT_EQ(n.inventory.node.rack, "a03");
  EXPECT_EQ(n.inventory.node.labels.at("nvidia.com/mig.strategy"), "single");
  EXPECT_TRUE(n.schedulable);
  EXPECT_TRUE(n.ready);
  EXPECT_THAT(n.warnings,
              ElementsAre("mig.strategy=single labels count MIG devices, not GPUs: assumed 8 "
                          "GPUs holding 56 x 1g.5gb",
                          "mig.strategy=single labels the memory of a MIG device, not of a GPU: "
                          "assumed the nominal 40960 MiB of A100-40GB"));
  expect_gpus(n.inventory, 8, "NVIDIA A100-SXM4-40GB", "A100-40GB", 40960);
  const vocab::Layout seven = planned("A100-40GB", std::vector<std::string>(7, "1g.5gb"));
  for (const GpuInfo& gpu : n.inventory.gpus) {
    EXPECT_TRUE(gpu.mig_capable);
    EXPECT_EQ(gpu.mode, GpuMode::kMig);
    EXPECT_EQ(gpu.mig_instances, seven);
  }
}

// ---------------------------------------------------------------------------------------------
// Bad fixtures: each is one change away from the good cluster

struct BadFixture {
  std::string_view file;
  std::string_view error;
};

TEST(K8sImport, EachBadFixtureGetsAClearError) {
  const BadFixture cases[] = {
      {"bad-not-a-list.json",
       "expected kind List or NodeList (kubectl get nodes -o json), got 'Node'"},
      {"bad-pod-list.json", "items[0] is a Pod, not a Node"},
      {"bad-items-not-array.json", "list.items must be an array"},
      {"bad-missing-name.json", "items[1].metadata.name is required"},
      {"bad-duplicate-name.json", "duplicate node name 'gpu-h200-01'"},
      {"bad-gpu-count.json",
       "node 'gpu-h200-01': label nvidia.com/gpu.count is '-8', not a count from 0 to 64"},
      {"bad-mig-profile.json",
       "node 'gpu-h200-02': MIG profile '3g.40gb' (label nvidia.com/mig-3g.40gb.count) is not a "
       "profile of H200-141GB (known: 7g.141gb, 4g.71gb, 3g.71gb, 2g.35gb, 1g.35gb, 1g.18gb)"},
      {"bad-mig-unplaceable.json",
       "node 'gpu-h200-02': cannot place 11 x 3g.71gb, 12 x 1g.18gb on 6 MIG-enabled H200-141GB "
       "GPUs"},
      {"bad-quantity.json",
       "node 'gpu-a100-01': status.allocatable['memory']: invalid quantity '1 TiB': unknown "
       "suffix"},
  };
  for (const BadFixture& c : cases) {
    SCOPED_TRACE(c.file);
    EXPECT_THAT(import_error(load_fixture(c.file)), HasSubstr(c.error));
  }
}

// ---------------------------------------------------------------------------------------------
// The list and its items

TEST(K8sImport, AcceptsANodeListWhoseItemsCarryNoKind) {
  Json node = h200_node("gpu-01");
  node.erase("kind");
  node.erase("apiVersion");
  Json list = {{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", Json::array({node})}};
  EXPECT_EQ(import_ok(list).nodes.size(), 1u);
  list["kind"] = "List";
  EXPECT_THAT(import_error(list), HasSubstr("items[0].kind is required"));
}

TEST(K8sImport, RejectsMalformedShapes) {
  EXPECT_THAT(import_error(Json::array()), HasSubstr("expected a JSON object"));
  EXPECT_THAT(import_error(Json{{"items", Json::array()}}), HasSubstr("list.kind is required"));
  EXPECT_THAT(import_error(make_list({Json("gpu-01")})), HasSubstr("items[0] must be an object"));

  Json no_status = h200_node("gpu-01");
  no_status.erase("status");
  EXPECT_THAT(import_error(make_list({no_status})), HasSubstr("node 'gpu-01': status is required"));

  Json label_not_string = h200_node("gpu-01");
  label_not_string["metadata"]["labels"]["nvidia.com/gpu.count"] = 8;
  EXPECT_THAT(import_error(make_list({label_not_string})),
              HasSubstr("node 'gpu-01': metadata.labels['nvidia.com/gpu.count'] must be a string"));

  Json bad_unschedulable = h200_node("gpu-01");
  bad_unschedulable["spec"]["unschedulable"] = "yes";
  EXPECT_THAT(import_error(make_list({bad_unschedulable})),
              HasSubstr("node 'gpu-01': spec.unschedulable must be true or false"));

  Json bad_condition = h200_node("gpu-01");
  bad_condition["status"]["conditions"] = Json::array({{{"type", "Ready"}}});
  EXPECT_THAT(import_error(make_list({bad_condition})),
              HasSubstr("node 'gpu-01': status.conditions[0].status is required"));
}

TEST(K8sImport, AnEmptyListImportsNothing) {
  ImportResult result = import_ok(make_list({}));
  EXPECT_THAT(result.nodes, IsEmpty());
  EXPECT_THAT(result.skipped, IsEmpty());
}

// ---------------------------------------------------------------------------------------------
// Node state and names

TEST(K8sImport, ReadsReadinessAndCordoning) {
  Json not_ready = h200_node("gpu-01");
  not_ready["status"]["conditions"] =
      Json::array({{{"type", "MemoryPressure"}, {"status", "False"}},
                   {{"type", "Ready"}, {"status", "False"}, {"reason", "KubeletNotReady"}}});
  Json unknown = h200_node("gpu-02");
  unknown["status"]["conditions"][0]["status"] = "Unknown";
  Json no_condition = h200_node("gpu-03");
  no_condition["status"].erase("conditions");
  Json cordoned = h200_node("gpu-04");
  cordoned["spec"]["unschedulable"] = true;

  ImportResult result = import_ok(make_list({not_ready, unknown, no_condition, cordoned}));
  ASSERT_EQ(result.nodes.size(), 4u);
  EXPECT_FALSE(result.nodes[0].ready);
  EXPECT_THAT(result.nodes[0].warnings, IsEmpty());
  EXPECT_FALSE(result.nodes[1].ready);
  EXPECT_FALSE(result.nodes[2].ready);
  EXPECT_THAT(result.nodes[2].warnings,
              ElementsAre("no Ready condition in status.conditions; taken as not ready"));
  EXPECT_TRUE(result.nodes[3].ready);
  EXPECT_FALSE(result.nodes[3].schedulable);
  EXPECT_TRUE(result.nodes[0].schedulable);
}

TEST(K8sImport, ShortensDnsSubdomainNamesToTheirFirstLabel) {
  ImportResult result = import_ok(make_list({h200_node("gpu-07.dc1.example.com")}));
  ASSERT_EQ(result.nodes.size(), 1u);
  const ImportedNode& n = result.nodes[0];
  EXPECT_EQ(n.inventory.node.name, "gpu-07");
  EXPECT_EQ(n.inventory.gpus[3].uuid, "GPU-k8s-gpu-07-3");
  EXPECT_THAT(n.warnings, ElementsAre("node name 'gpu-07.dc1.example.com' is not a DNS label; "
                                      "imported as 'gpu-07'"));
}

TEST(K8sImport, RejectsNamesThatCollideOrCannotBeShortened) {
  EXPECT_THAT(import_error(make_list(
                  {h200_node("gpu-07.dc1.example.com"), h200_node("gpu-07.dc2.example.com")})),
              HasSubstr("nodes 'gpu-07.dc1.example.com' and 'gpu-07.dc2.example.com' would both "
                        "be imported as 'gpu-07'"));
  EXPECT_THAT(import_error(make_list({h200_node("10.20.1.21")})),
              HasSubstr("node '10.20.1.21': the name cannot be imported as a gpuplane node name: "
                        "name must start with a lowercase letter"));
}

TEST(K8sImport, FallsBackToCapacityWhenAllocatableLacksCpuOrMemory) {
  Json node = h200_node("gpu-01", {}, {{"cpu", "96"}, {"memory", "2Ti"}});
  node["status"]["allocatable"].erase("cpu");
  ImportResult result = import_ok(make_list({node}));
  ASSERT_EQ(result.nodes.size(), 1u);
  EXPECT_EQ(result.nodes[0].inventory.node.cpu_millis, 96000);
  EXPECT_EQ(result.nodes[0].inventory.node.memory_bytes, int64_t{2} << 40);
  EXPECT_THAT(result.nodes[0].warnings,
              ElementsAre("status.allocatable lacks cpu or memory; status.capacity was used"));

  Json bad_cpu = h200_node("gpu-02", {}, {{"cpu", "lots"}});
  EXPECT_THAT(import_error(make_list({bad_cpu})),
              HasSubstr("node 'gpu-02': status.allocatable['cpu']: invalid quantity 'lots'"));
}

// ---------------------------------------------------------------------------------------------
// Labels and topology

TEST(K8sImport, KeepsAtMost64LabelsAndTakesTheNvlinkDomainFromTheClique) {
  StringMap extra = {{"nvidia.com/gpu.clique", "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1"},
                     {"topology.kubernetes.io/rack", "r1"},
                     {"rack", "ignored-when-the-topology-label-is-set"}};
  for (int i = 0; i < 70; ++i) extra[fmt::format("example.com/label-{:02}", i)] = "x";
  ImportResult result = import_ok(make_list({h200_node("gpu-01", extra)}));
  ASSERT_EQ(result.nodes.size(), 1u);
  const NodeInfo& node = result.nodes[0].inventory.node;
  EXPECT_EQ(node.nvlink_domain, "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1");
  EXPECT_EQ(node.rack, "r1");
  EXPECT_EQ(node.labels.size(), 64u);
  // 4 GFD labels kept + rack + topology rack + 70 custom = 76 candidates.
  EXPECT_THAT(result.nodes[0].warnings,
              ElementsAre("12 labels not kept (more than 64 labels, or longer than 253 "
                          "characters)"));
}

struct ProductCase {
  std::string_view label;
  std::string_view product;
  std::string_view model;
  bool mig_capable;
};

TEST(K8sImport, TurnsGfdProductNamesBackIntoNvmlNames) {
  const ProductCase cases[] = {
      {"NVIDIA-H200", "NVIDIA H200", "H200", true},
      {"NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", "H100", true},
      {"NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "A100-80GB", true},
      {"NVIDIA-A100-80GB-PCIe", "NVIDIA A100 80GB PCIe", "A100-80GB", true},
      {"A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "A100-40GB", true},  // older GFD
      {"Tesla-V100-SXM2-16GB", "Tesla V100-SXM2-16GB", "V100-SXM2-16GB", false},
      {"NVIDIA-L40S", "NVIDIA L40S", "L40S", false},
      {"NVIDIA-GeForce-RTX-4090", "NVIDIA GeForce-RTX-4090", "GeForce-RTX-4090", false},
  };
  for (const ProductCase& c : cases) {
    SCOPED_TRACE(c.label);
    Json node =
        make_node("gpu-01", gfd_labels(std::string(c.label), 2, 16384), {{"nvidia.com/gpu", "2"}});
    ImportResult result = import_ok(make_list({node}));
    ASSERT_EQ(result.nodes.size(), 1u);
    const GpuInfo& gpu = result.nodes[0].inventory.gpus[1];
    EXPECT_EQ(gpu.product, c.product);
    EXPECT_EQ(gpu.model, c.model);
    EXPECT_EQ(gpu.mig_capable, c.mig_capable);
    EXPECT_EQ(gpu.mode, GpuMode::kWhole);
  }
}

// ---------------------------------------------------------------------------------------------
// Skipped nodes

TEST(K8sImport, SkipsNodesWhoseGpusCannotBeKnown) {
  Json cpu_only = make_node("cpu-01", {{"kubernetes.io/os", "linux"}});
  Json no_gfd = make_node("gpu-01", {}, {{"nvidia.com/gpu", "8"}});
  Json zero = make_node("gpu-02", gfd_labels("NVIDIA-H200", 0, 143771));
  Json invalid =
      make_node("gpu-03", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-INVALID"},
                           {"nvidia.com/gpu.count", "0"},
                           {"nvidia.com/gpu.memory", "0"},
                           {"nvidia.com/mig.strategy", "single"}});
  ImportResult result = import_ok(make_list({cpu_only, no_gfd, zero, invalid}));
  EXPECT_THAT(result.nodes, IsEmpty());
  EXPECT_THAT(
      result.skipped,
      ElementsAre("cpu-01: no NVIDIA GPUs (no nvidia.com/gpu.product label)",
                  "gpu-01: has nvidia.com GPU resources but no GPU Feature Discovery labels "
                  "(nvidia.com/gpu.product), so its GPU model is unknown",
                  "gpu-02: nvidia.com/gpu.count is 0",
                  "gpu-03: GPU Feature Discovery reports an invalid MIG configuration for "
                  "mig.strategy=single (nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-INVALID); "
                  "the node exposes no GPUs"));
}

// ---------------------------------------------------------------------------------------------
// Counts, capacity and sharing

TEST(K8sImport, LabelsWinOverDisagreeingCapacityWithAWarning) {
  Json fewer = h200_node("gpu-01", {}, {{"nvidia.com/gpu", "4"}});
  Json none = h200_node("gpu-02");
  none["status"]["capacity"].erase("nvidia.com/gpu");
  none["status"]["allocatable"].erase("nvidia.com/gpu");
  ImportResult result = import_ok(make_list({fewer, none}));
  ASSERT_EQ(result.nodes.size(), 2u);
  EXPECT_EQ(result.nodes[0].inventory.gpus.size(), 8u);
  EXPECT_THAT(result.nodes[0].warnings,
              ElementsAre("status.capacity nvidia.com/gpu is 4 but the GFD labels imply 8 whole "
                          "GPUs; the labels were used"));
  EXPECT_EQ(result.nodes[1].inventory.gpus.size(), 8u);
  EXPECT_THAT(result.nodes[1].warnings,
              ElementsAre("status.capacity has no nvidia.com/gpu (expected 8 whole GPUs from the "
                          "GFD labels): is the NVIDIA device plugin running?"));
}

struct BadLabelCase {
  std::string key;
  std::string value;
  std::string error;
};

TEST(K8sImport, RejectsBadGfdLabels) {
  const BadLabelCase cases[] = {
      {"nvidia.com/gpu.count", "eight",
       "node 'gpu-01': label nvidia.com/gpu.count is 'eight', not a count from 0 to 64"},
      {"nvidia.com/gpu.count", "65", "label nvidia.com/gpu.count is '65', not a count"},
      {"nvidia.com/gpu.count", "", "label nvidia.com/gpu.count is '', not a count"},
      {"nvidia.com/gpu.count", "+8", "label nvidia.com/gpu.count is '+8', not a count"},
      {"nvidia.com/gpu.memory", "80GB", "label nvidia.com/gpu.memory is '80GB', not a count"},
      {"nvidia.com/gpu.replicas", "-2", "label nvidia.com/gpu.replicas is '-2', not a count"},
      {"nvidia.com/mig.strategy", "all",
       "label nvidia.com/mig.strategy is 'all', not none, single or mixed"},
      {"nvidia.com/gpu.sharing-strategy", "vgpu",
       "label nvidia.com/gpu.sharing-strategy is 'vgpu', not none, time-slicing or mps"},
      {"nvidia.com/mig-1g.18gb.count", "2",
       "node 'gpu-01': has nvidia.com/mig-1g.18gb.count labels, which GPU Feature Discovery "
       "writes only with nvidia.com/mig.strategy=mixed (it is 'none')"},
  };
  for (const BadLabelCase& c : cases) {
    SCOPED_TRACE(c.key + "=" + c.value);
    EXPECT_THAT(import_error(make_list({h200_node("gpu-01", {{c.key, c.value}})})),
                HasSubstr(c.error));
  }
  Json no_count = h200_node("gpu-01");
  no_count["metadata"]["labels"].erase("nvidia.com/gpu.count");
  EXPECT_THAT(import_error(make_list({no_count})),
              HasSubstr("node 'gpu-01': has label nvidia.com/gpu.product but no "
                        "nvidia.com/gpu.count"));
}

TEST(K8sImport, TimeSlicedGpusMayBeRenamedToGpuShared) {
  StringMap labels = gfd_labels("NVIDIA-A100-SXM4-80GB", 4, 81920);
  labels["nvidia.com/gpu.replicas"] = "10";
  labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing";
  Json renamed = make_node("gpu-01", labels, {{"nvidia.com/gpu.shared", "40"}});
  labels["nvidia.com/gpu.sharing-strategy"] = "mps";
  labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB-SHARED";
  Json mps = make_node("gpu-02", labels, {{"nvidia.com/gpu", "40"}});
  ImportResult result = import_ok(make_list({renamed, mps}));
  ASSERT_EQ(result.nodes.size(), 2u);
  EXPECT_THAT(result.nodes[0].warnings, IsEmpty());
  EXPECT_THAT(result.nodes[1].warnings,
              ElementsAre("GPUs shared with MPS (10 replicas) are imported as time-sliced"));
  for (const ImportedNode& n : result.nodes) {
    ASSERT_EQ(n.inventory.gpus.size(), 4u);
    for (const GpuInfo& gpu : n.inventory.gpus) {
      EXPECT_EQ(gpu.mode, GpuMode::kTimeSliced);
      EXPECT_EQ(gpu.product, "NVIDIA A100-SXM4-80GB");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// MIG, mixed strategy

Json mixed_node(const std::string& name, const std::string& product, int gpus, int whole,
                const std::map<std::string, int>& instances) {
  StringMap labels = gfd_labels(product, gpus, 143771, "mixed");
  StringMap capacity = {{"nvidia.com/gpu", std::to_string(whole)}};
  for (const auto& [profile, n] : instances) {
    labels["nvidia.com/mig-" + profile + ".count"] = std::to_string(n);
    capacity["nvidia.com/mig-" + profile] = std::to_string(n);
  }
  return make_node(name, labels, capacity);
}

TEST(K8sImport, MixedStrategyGivesUniformRequestsUniformLayouts) {
  // mig-parted's all-balanced on eight H200s.
  Json node =
      mixed_node("gpu-01", "NVIDIA-H200", 8, 0, {{"3g.71gb", 8}, {"2g.35gb", 8}, {"1g.18gb", 16}});
  ImportResult result = import_ok(make_list({node}));
  ASSERT_EQ(result.nodes.size(), 1u);
  const vocab::Layout balanced = planned("H200", {"3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"});
  for (const GpuInfo& gpu : result.nodes[0].inventory.gpus) {
    EXPECT_EQ(gpu.mode, GpuMode::kMig);
    EXPECT_EQ(gpu.mig_instances, balanced);
  }
  EXPECT_THAT(result.nodes[0].warnings, IsEmpty());
}

TEST(K8sImport, MixedStrategyFindsAnArrangementTheGreedySpreadMisses) {
  // Largest first onto the least loaded GPU: 4g.71gb on GPU 0, both 3g.71gb on GPU 1 (it is the
  // less loaded), one 2g.35gb beside the 4g.71gb, and then no GPU has room for the other one.
  // The only arrangement pairs the 4g.71gb with a 3g.71gb.
  std::map<std::string, int> request = {{"4g.71gb", 1}, {"3g.71gb", 2}, {"2g.35gb", 2}};
  Json node = mixed_node("gpu-01", "NVIDIA-H200", 2, 0, request);
  ImportResult result = import_ok(make_list({node}));
  ASSERT_EQ(result.nodes.size(), 1u);
  const Inventory& inventory = result.nodes[0].inventory;
  EXPECT_EQ(mig_totals(inventory), request);
  ASSERT_EQ(inventory.gpus.size(), 2u);
  EXPECT_EQ(inventory.gpus[0].mig_instances, planned("H200", {"3g.71gb", "2g.35gb", "2g.35gb"}));
  EXPECT_EQ(inventory.gpus[1].mig_instances, planned("H200", {"4g.71gb", "3g.71gb"}));
  for (const GpuInfo& gpu : inventory.gpus) EXPECT_EQ(gpu.mode, GpuMode::kMig);
}

TEST(K8sImport, MixedStrategyWithAllGpusInMigModeNeedNotAdvertiseWholeGpus) {
  Json node = mixed_node("gpu-01", "NVIDIA-H200", 2, 0, {{"7g.141gb", 2}});
  node["status"]["capacity"].erase("nvidia.com/gpu");
  node["status"]["allocatable"].erase("nvidia.com/gpu");
  ImportResult result = import_ok(make_list({node}));
  ASSERT_EQ(result.nodes.size(), 1u);
  EXPECT_THAT(result.nodes[0].warnings, IsEmpty());
  for (const GpuInfo& gpu : result.nodes[0].inventory.gpus) {
    EXPECT_EQ(gpu.mig_instances, planned("H200", {"7g.141gb"}));
  }
}

TEST(K8sImport, MixedStrategyMigGpusWithoutInstancesAreEmptyMigLayouts) {
  // Four GPUs, two whole: the other two are MIG-enabled but hold no instances yet.
  Json node = mixed_node("gpu-01", "NVIDIA-H200", 4, 2, {});
  ImportResult result = import_ok(make_list({node}));
  ASSERT_EQ(result.nodes.size(), 1u);
  const auto& gpus = result.nodes[0].inventory.gpus;
  ASSERT_EQ(gpus.size(), 4u);
  EXPECT_EQ(gpus[0].mode, GpuMode::kMig);
  EXPECT_EQ(gpus[1].mode, GpuMode::kMig);
  EXPECT_THAT(gpus[1].mig_instances, IsEmpty());
  EXPECT_EQ(gpus[2].mode, GpuMode::kWhole);
  EXPECT_THAT(result.nodes[0].warnings, IsEmpty());
}

TEST(K8sImport, MigCapacityDisagreeingWithLabelsIsAWarning) {
  Json node = mixed_node("gpu-01", "NVIDIA-H200", 1, 0, {{"3g.71gb", 2}});
  node["status"]["capacity"]["nvidia.com/mig-3g.71gb"] = "1";
  node["status"]["allocatable"]["nvidia.com/mig-3g.71gb"] = "0";
  ImportResult result = import_ok(make_list({node}));
  ASSERT_EQ(result.nodes.size(), 1u);
  EXPECT_THAT(result.nodes[0].warnings,
              ElementsAre("status.capacity nvidia.com/mig-3g.71gb is 1 but the GFD labels imply 2 "
                          "3g.71gb instances; the labels were used",
                          "status.allocatable nvidia.com/mig-3g.71gb is 0 of capacity 1: the "
                          "device plugin reports 1 unhealthy"));
}

TEST(K8sImport, RejectsMigThatCannotBeImported) {
  EXPECT_THAT(
      import_error(make_list({mixed_node("gpu-01", "NVIDIA-H200", 8, 8, {{"3g.71gb", 2}})})),
      HasSubstr("node 'gpu-01': has MIG instances (3g.71gb) but capacity nvidia.com/gpu counts "
                "all 8 GPUs as whole"));
  EXPECT_THAT(import_error(make_list({mixed_node("gpu-01", "NVIDIA-A30", 4, 0, {{"1g.6gb", 4}})})),
              HasSubstr("node 'gpu-01': no MIG geometry is known for NVIDIA A30"));
  EXPECT_THAT(
      import_error(make_list({mixed_node("gpu-01", "NVIDIA-H200", 1, 0, {{"1g.18gb", 8}})})),
      HasSubstr("node 'gpu-01': cannot place 8 x 1g.18gb on 1 MIG-enabled H200-141GB GPU"));
  EXPECT_THAT(
      import_error(make_list({mixed_node("gpu-01", "NVIDIA-H200", 1, 0, {{"1g.18gb.me", 1}})})),
      HasSubstr("MIG profile '1g.18gb.me' (label nvidia.com/mig-1g.18gb.me.count) is not a "
                "profile of H200-141GB"));
  EXPECT_THAT(
      import_error(make_list({mixed_node("gpu-01", "NVIDIA-H200", 1, 0, {{"1g.18gb", 449}})})),
      HasSubstr("label nvidia.com/mig-1g.18gb.count is '449', not a count from 0 to 448"));
}

// ---------------------------------------------------------------------------------------------
// MIG, single strategy

TEST(K8sImport, SingleStrategySpreadsAnUnevenDeviceCount) {
  StringMap labels = {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"},
                      {"nvidia.com/gpu.count", "5"},
                      {"nvidia.com/gpu.memory", "40320"},
                      {"nvidia.com/mig.strategy", "single"}};
  ImportResult result =
      import_ok(make_list({make_node("gpu-01", labels, {{"nvidia.com/gpu", "5"}})}));
  ASSERT_EQ(result.nodes.size(), 1u);
  const Inventory& inventory = result.nodes[0].inventory;
  ASSERT_EQ(inventory.gpus.size(), 3u);
  EXPECT_EQ(mig_totals(inventory), (std::map<std::string, int>{{"3g.40gb", 5}}));
  EXPECT_EQ(inventory.gpus[0].product, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(inventory.gpus[0].memory_bytes, 81559 * kMi);
  EXPECT_EQ(inventory.gpus[0].mig_instances, planned("H100-80GB", {"3g.40gb", "3g.40gb"}));
  EXPECT_EQ(inventory.gpus[2].mig_instances, planned("H100-80GB", {"3g.40gb"}));

  labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3-MIG-3g.71gb";
  EXPECT_THAT(import_error(make_list({make_node("gpu-01", labels)})),
              HasSubstr("node 'gpu-01': MIG profile '3g.71gb' (label nvidia.com/gpu.product) is "
                        "not a profile of H100-80GB"));
}

}  // namespace
}  // namespace gp::fleet
