// What the node's GPU container stack lets a container choose (issue 24): the agent reads the
// NVIDIA container toolkit's config.toml and learns the device plugin's device-list strategy,
// and reports both with its inventory (fleet::GpuRuntime). The parsers are pure; only
// read_gpu_runtime touches files. docs/kubernetes.md, "GPU devices", says what the settings
// must be and why.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "fleet/inventory.h"

namespace gp::agent {

// Where the agent learns the settings (agent flags).
struct GpuRuntimeSources {
  // The toolkit's config file (--container-toolkit-config). The toolkit reads
  // /etc/nvidia-container-runtime/config.toml unless XDG_CONFIG_HOME moves it.
  std::string toolkit_config = "/etc/nvidia-container-runtime/config.toml";
  // The device plugin's deviceListStrategy as the operator configured it
  // (--device-list-strategy, comma-separated); wins over device_plugin_config.
  std::string device_list_strategy;
  // The device plugin's config file (--device-plugin-config, YAML, flags.plugin.
  // deviceListStrategy). The plugin's DEVICE_LIST_STRATEGY variable or flag overrides the file,
  // so the agent reports what the file says, and unknown when the file says nothing.
  std::string device_plugin_config;
};

// The two settings a toolkit config.toml gives, nullopt where it leaves them out (the toolkit
// default then applies: the variable accepted, volume mounts not).
struct ToolkitSettings {
  std::optional<bool>
      accepts_env_unprivileged;  // accept-nvidia-visible-devices-envvar-when-unprivileged
  std::optional<bool> accepts_volume_mounts;  // accept-nvidia-visible-devices-as-volume-mounts
};

// Reads the two top-level keys of a toolkit config.toml, over the part of TOML that file uses
// (comments, [tables], bare or quoted keys, multi-line strings and arrays skipped).
// invalid_argument when one of the keys is not a boolean, is given twice, or a line cannot be
// read: the agent then cannot tell what the toolkit does.
Result<ToolkitSettings> parse_toolkit_config(std::string_view toml);

// The comma-separated strategies of --device-list-strategy; invalid_argument for a value the
// device plugin does not know or an empty list.
Result<std::vector<std::string>> parse_device_list_strategy(std::string_view list);

// flags.plugin.deviceListStrategy of a device plugin config file (a string, comma-separated, or
// a list); an empty vector when the file does not set it. invalid_argument when the YAML does
// not parse or names an unknown strategy.
Result<std::vector<std::string>> parse_device_plugin_config(std::string_view yaml);

// Reads the sources. Never fails: what the agent cannot tell is reported as unknown, with the
// reason in `detail`. A missing toolkit config is the toolkit's defaults (it accepts the
// variable).
fleet::GpuRuntime read_gpu_runtime(const GpuRuntimeSources& sources);

}  // namespace gp::agent
