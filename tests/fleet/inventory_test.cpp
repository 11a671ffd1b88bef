#include "fleet/inventory.h"

#include <gtest/gtest.h>

namespace gp::fleet {
namespace {

Json gpu(int i, std::string model = "NVIDIA H200") {
  return {{"uuid", "GPU-0000-" + std::to_string(i)},
          {"index", i},
          {"model", model},
          {"memory_bytes", int64_t(141) << 30},
          {"mig_capable", true}};
}

// A vector, not a Json: `{gpu(0)}` as a Json is an array to g++ and a copy of the one GPU to
// clang (a one-element braced list of the same type).
Json node(const std::vector<Json>& gpus) {
  return {{"node", {{"name", "n1"}, {"cpu_millis", 1000}, {"rack", "r1"}}}, {"gpus", Json(gpus)}};
}

TEST(Inventory, ParsesAValidNodeWithMig) {
  Json g0 = gpu(0);
  g0["mode"] = "mig";
  g0["mig_instances"] = {{{"profile", "3g.71gb"}, {"start", 0}},
                         {{"profile", "3g.71gb"}, {"start", 4}}};
  Json g1 = gpu(1);
  g0["nvlink_peers"] = {"GPU-0000-1"};
  auto inv = parse_inventory(node({g0, g1}));
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].model, "H200");
  EXPECT_EQ(inv->gpus[0].mode, GpuMode::kMig);
  EXPECT_EQ(inv->gpus[0].mig_instances.size(), 2u);
  // Round trip through JSON gives the same inventory.
  auto again = parse_inventory(to_json(*inv));
  ASSERT_TRUE(again);
  EXPECT_EQ(to_json(*again), to_json(*inv));
}

// Issue 24: the agent reports how the node's container stack selects devices.
TEST(Inventory, CarriesTheGpuRuntimeReport) {
  Json j = node({gpu(0)});
  j["gpu_runtime"] = {{"toolkit_config", "/etc/nvidia-container-runtime/config.toml"},
                      {"toolkit_config_state", "read"},
                      {"accept_envvar_when_unprivileged", false},
                      {"accept_volume_mounts", true},
                      {"device_list_strategy", {"volume-mounts"}},
                      {"device_list_strategy_source", "flag"},
                      {"detail", ""}};
  auto inv = parse_inventory(j);
  ASSERT_TRUE(inv) << inv.error().message;
  ASSERT_TRUE(inv->gpu_runtime);
  EXPECT_EQ(inv->gpu_runtime->accepts_env_unprivileged, false);
  EXPECT_EQ(inv->gpu_runtime->accepts_volume_mounts, true);
  EXPECT_EQ(inv->gpu_runtime->device_list_strategy, std::vector<std::string>{"volume-mounts"});
  EXPECT_EQ(to_json(*inv).at("gpu_runtime"), j["gpu_runtime"]);
  // Unknown settings are null; an older agent sends no report at all.
  j["gpu_runtime"]["toolkit_config_state"] = "unreadable";
  j["gpu_runtime"]["accept_envvar_when_unprivileged"] = nullptr;
  j["gpu_runtime"]["device_list_strategy"] = Json::array();
  j["gpu_runtime"]["device_list_strategy_source"] = "unknown";
  inv = parse_inventory(j);
  ASSERT_TRUE(inv) << inv.error().message;
  EXPECT_FALSE(inv->gpu_runtime->accepts_env_unprivileged);
  EXPECT_TRUE(inv->gpu_runtime->device_list_strategy.empty());
  inv = parse_inventory(node({gpu(0)}));
  ASSERT_TRUE(inv);
  EXPECT_FALSE(inv->gpu_runtime);
  EXPECT_FALSE(to_json(*inv).contains("gpu_runtime"));
}

TEST(Inventory, RejectsAMalformedGpuRuntimeReport) {
  Json good = {{"toolkit_config", "/etc/nvidia-container-runtime/config.toml"},
               {"toolkit_config_state", "absent"},
               {"accept_envvar_when_unprivileged", true}};
  struct Case {
    const char* name;
    Json patch;
    const char* message;
  };
  const Case kCases[] = {
      {"state", {{"toolkit_config_state", "maybe"}}, "read, absent or unreadable"},
      {"flag type", {{"accept_envvar_when_unprivileged", "no"}}, "true or false"},
      {"strategy", {{"device_list_strategy", {"magic"}}}, "envvar, volume-mounts"},
      {"source", {{"device_list_strategy_source", "guess"}}, "flag, device-plugin-config"},
      {"unknown field", {{"accepts", true}}, "accepts"},
      {"absent config cannot refuse",
       {{"accept_envvar_when_unprivileged", false}},
       "cannot be false without a toolkit config"},
  };
  for (const auto& c : kCases) {
    Json j = node({gpu(0)});
    j["gpu_runtime"] = good;
    j["gpu_runtime"].merge_patch(c.patch);
    auto inv = parse_inventory(j);
    ASSERT_FALSE(inv) << c.name;
    EXPECT_NE(inv.error().message.find(c.message), std::string::npos)
        << c.name << ": " << inv.error().message;
  }
  Json not_object = node({gpu(0)});
  not_object["gpu_runtime"] = "false";
  EXPECT_FALSE(parse_inventory(not_object));
}

struct Bad {
  const char* name;
  Json inventory;
  const char* message;
};

TEST(Inventory, RejectsBadInventoriesWithTheReason) {
  Json mig_overlap = gpu(0);
  mig_overlap["mode"] = "mig";
  mig_overlap["mig_instances"] = {{{"profile", "4g.71gb"}, {"start", 0}},
                                  {{"profile", "1g.18gb"}, {"start", 3}}};
  Json mig_unknown_model = gpu(0, "NVIDIA L40S");
  mig_unknown_model["mode"] = "mig";
  Json not_capable = gpu(0);
  not_capable["mig_capable"] = false;
  not_capable["mode"] = "mig";
  Json instances_without_mig = gpu(0);
  instances_without_mig["mig_instances"] = {{{"profile", "1g.18gb"}, {"start", 0}}};
  Json bad_peer = gpu(0);
  bad_peer["nvlink_peers"] = {"GPU-elsewhere"};
  Json self_peer = gpu(0);
  self_peer["nvlink_peers"] = {"GPU-0000-0"};
  Json bad_uuid = gpu(0);
  bad_uuid["uuid"] = "0000";
  Json dup_index = gpu(1);
  dup_index["index"] = 0;
  Json wrong_type = gpu(0);
  wrong_type["memory_bytes"] = "lots";
  Json extra = gpu(0);
  extra["colour"] = "green";
  std::vector<Bad> cases = {
      {"not an object", Json::array(), "inventory must be a JSON object"},
      {"no node", Json{{"gpus", Json::array()}}, "field 'node': is required"},
      {"bad node name", Json{{"node", {{"name", "node_1"}}}}, "node.name may contain only"},
      {"duplicate uuid", node({gpu(0), gpu(0)}), "duplicate GPU UUID GPU-0000-0"},
      {"duplicate index", node({gpu(0), dup_index}), "duplicate GPU index 0"},
      {"overlapping MIG", node({mig_overlap}), "overlaps"},
      {"MIG on an unknown model", node({mig_unknown_model}), "no MIG geometry known"},
      {"MIG but not capable", node({not_capable}), "not MIG capable"},
      {"instances without MIG", node({instances_without_mig}), "not in MIG mode"},
      {"peer not on the node", node({bad_peer}), "NVLink peer GPU-elsewhere"},
      {"peer is itself", node({self_peer}), "NVLink peer GPU-0000-0"},
      {"bad uuid", node({bad_uuid}), "is not a GPU UUID"},
      {"wrong type", node({wrong_type}), "must be an integer"},
      {"unknown field", node({extra}), "unknown field 'colour'"},
  };
  for (const auto& c : cases) {
    auto r = parse_inventory(c.inventory);
    ASSERT_FALSE(r) << c.name;
    EXPECT_NE(r.error().message.find(c.message), std::string::npos)
        << c.name << ": " << r.error().message;
  }
}

TEST(Inventory, CanonicalModels) {
  EXPECT_EQ(canonical_model("NVIDIA H200"), "H200");
  EXPECT_EQ(canonical_model("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(canonical_model("NVIDIA A100-SXM4-80GB"), "A100-80GB");
  EXPECT_EQ(canonical_model("NVIDIA A100-SXM4-40GB"), "A100-40GB");
  EXPECT_EQ(canonical_model("NVIDIA L40S"), "L40S");
  EXPECT_EQ(canonical_model("Tesla V100-SXM2-16GB"), "V100-SXM2-16GB");
}

TEST(Inventory, HealthFromXidAndEcc) {
  GpuHealth h;
  EXPECT_TRUE(h.healthy());
  h.xid_errors = {13, 31};  // application errors: not the GPU's fault
  EXPECT_TRUE(h.healthy());
  h.xid_errors.push_back(79);
  EXPECT_FALSE(h.healthy());
  EXPECT_EQ(h.reason(), "XID 79");
  h.ecc_uncorrected = 2;
  EXPECT_EQ(h.reason(), "XID 79, 2 uncorrected ECC errors");
}

}  // namespace
}  // namespace gp::fleet
