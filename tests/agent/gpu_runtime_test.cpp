// The agent's report of how the node selects GPU devices (issue 24): the NVIDIA container
// toolkit's config.toml and the device plugin's device-list strategy, read from the fixtures in
// tests/fixtures/agent. Whatever the agent cannot tell is reported as unknown, never guessed.
#include "agent/gpu_runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gp::agent {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) {
  const char* dir = std::getenv("GP_SOURCE_DIR");
  return (dir != nullptr ? fs::path(dir) : fs::path(".")) / "tests" / "fixtures" / "agent" / name;
}

std::string text_of(const std::string& name) {
  std::ifstream in(fixture(name));
  EXPECT_TRUE(in) << fixture(name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

GpuRuntimeSources toolkit_only(const std::string& name) {
  return {.toolkit_config = fixture(name).string(),
          .device_list_strategy = "",
          .device_plugin_config = ""};
}

TEST(ToolkitConfig, TheInstalledDefaultLeavesBothKeysToTheToolkitDefaults) {
  auto s = parse_toolkit_config(text_of("toolkit-default.toml"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->accepts_env_unprivileged);
  EXPECT_FALSE(s->accepts_volume_mounts);
  // Read as the toolkit applies it: the variable accepted.
  auto g = read_gpu_runtime(toolkit_only("toolkit-default.toml"));
  EXPECT_EQ(g.toolkit_config_state, "read");
  EXPECT_EQ(g.accepts_env_unprivileged, true);
  EXPECT_EQ(g.accepts_volume_mounts, false);
}

TEST(ToolkitConfig, AClosedNodeIsReadAsClosed) {
  auto g = read_gpu_runtime(toolkit_only("toolkit-closed.toml"));
  EXPECT_EQ(g.toolkit_config_state, "read") << g.detail;
  EXPECT_EQ(g.accepts_env_unprivileged, false);
  EXPECT_EQ(g.accepts_volume_mounts, true);
  EXPECT_EQ(g.toolkit_config, fixture("toolkit-closed.toml").string());
}

TEST(ToolkitConfig, AKeyInsideATableIsNotTheToolkitsSetting) {
  auto g = read_gpu_runtime(toolkit_only("toolkit-key-in-table.toml"));
  EXPECT_EQ(g.toolkit_config_state, "read");
  EXPECT_EQ(g.accepts_env_unprivileged, true);
}

TEST(ToolkitConfig, AMissingFileIsTheToolkitDefaultWhichAcceptsTheVariable) {
  auto g = read_gpu_runtime(toolkit_only("no-such-config.toml"));
  EXPECT_EQ(g.toolkit_config_state, "absent");
  EXPECT_EQ(g.accepts_env_unprivileged, true);
  EXPECT_EQ(g.accepts_volume_mounts, false);
}

TEST(ToolkitConfig, WhatCannotBeReadIsReportedUnknownWithTheReason) {
  for (const auto& [name, why] :
       {std::pair{"toolkit-not-boolean.toml", "not true or false"},
        std::pair{"toolkit-twice.toml", "set twice"}, std::pair{"", "cannot read"}}) {
    // "" names the fixture directory itself: it exists but is no file.
    auto g = read_gpu_runtime(toolkit_only(name));
    EXPECT_EQ(g.toolkit_config_state, "unreadable") << name;
    EXPECT_FALSE(g.accepts_env_unprivileged) << name;
    EXPECT_FALSE(g.accepts_volume_mounts) << name;
    EXPECT_NE(g.detail.find(why), std::string::npos) << name << ": " << g.detail;
  }
  for (const char* bad : {"just words", "key = \"\"\"never closed", "[x]\nk = [1,\n"})
    EXPECT_FALSE(parse_toolkit_config(bad)) << bad;
}

TEST(DeviceListStrategy, TheOperatorsFlagWins) {
  GpuRuntimeSources src = toolkit_only("toolkit-closed.toml");
  src.device_list_strategy = "volume-mounts, cdi-annotations";
  src.device_plugin_config = fixture("device-plugin-config-no-strategy.yaml").string();
  auto g = read_gpu_runtime(src);
  EXPECT_EQ(g.device_list_strategy, (std::vector<std::string>{"volume-mounts", "cdi-annotations"}));
  EXPECT_EQ(g.strategy_source, "flag");
  EXPECT_EQ(g.detail, "");
  for (const char* bad : {"", "magic", "envvar,,cdi-cri"})
    EXPECT_FALSE(parse_device_list_strategy(bad)) << bad;
}

TEST(DeviceListStrategy, TheDevicePluginConfigFileSaysItOrItIsUnknown) {
  GpuRuntimeSources src = toolkit_only("toolkit-closed.toml");
  src.device_plugin_config = fixture("device-plugin-config.yaml").string();
  auto g = read_gpu_runtime(src);
  EXPECT_EQ(g.device_list_strategy, (std::vector<std::string>{"volume-mounts", "cdi-annotations"}));
  EXPECT_EQ(g.strategy_source, "device-plugin-config");

  src.device_plugin_config = fixture("device-plugin-config-no-strategy.yaml").string();
  g = read_gpu_runtime(src);
  EXPECT_TRUE(g.device_list_strategy.empty());
  EXPECT_EQ(g.strategy_source, "unknown");
  EXPECT_NE(g.detail.find("sets no flags.plugin.deviceListStrategy"), std::string::npos)
      << g.detail;

  src.device_plugin_config.clear();
  g = read_gpu_runtime(src);
  EXPECT_EQ(g.strategy_source, "unknown");
  EXPECT_NE(g.detail.find("--device-list-strategy"), std::string::npos) << g.detail;

  EXPECT_EQ(*parse_device_plugin_config("flags: {plugin: {deviceListStrategy: envvar}}"),
            std::vector<std::string>{"envvar"});
  EXPECT_FALSE(parse_device_plugin_config("flags: {plugin: {deviceListStrategy: magic}}"));
  EXPECT_FALSE(parse_device_plugin_config("flags: [unclosed"));
}

// What the agent sends parses on the control plane's side, whatever it found.
TEST(GpuRuntimeReport, EveryReportTheAgentMakesParses) {
  for (const char* name : {"toolkit-default.toml", "toolkit-closed.toml", "toolkit-twice.toml",
                           "no-such-config.toml"}) {
    auto report = fleet::to_json(read_gpu_runtime(toolkit_only(name)));
    auto back = fleet::parse_gpu_runtime(report);
    ASSERT_TRUE(back) << name << ": " << back.error().message << "\n" << report.dump();
    EXPECT_EQ(fleet::to_json(*back), report) << name;
  }
}

}  // namespace
}  // namespace gp::agent
