// A node's hardware inventory as an agent reports it (from NVML, or from a simulated inventory
// file with the same fields), and its strict validation. Shared by the agent, the control
// plane and the Kubernetes importer, so all three speak one format.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "vocab/vocab.h"

namespace gp::fleet {

using vocab::gpu_mode_name;
using vocab::GpuMode;
using vocab::parse_gpu_mode;

struct GpuHealth {
  std::vector<int> xid_errors;  // XID codes seen since the last report
  int64_t ecc_uncorrected = 0;  // volatile uncorrected ECC errors
  // The agent's check of a GPU in repair (docs/fleet.md, "GPU health and repair"): "" when none
  // ran, "passed", "not installed" (no DCGM on the node: NVML's state, ECC and XIDs alone), or
  // "failed: <what dcgmi said>".
  std::string diagnostics;
  bool healthy() const;        // no critical XID, no uncorrected ECC errors, diagnostics not failed
  std::string reason() const;  // why not healthy ("" when healthy)
};

struct GpuInfo {
  std::string uuid;     // "GPU-xxxxxxxx-..."
  int index = 0;        // NVML index on the node
  std::string model;    // canonical short model: "H200", "A100-80GB", "L40S"
  std::string product;  // as NVML names it: "NVIDIA H200"
  int64_t memory_bytes = 0;
  std::string pci_bus_id;  // "00000000:18:00.0"
  int numa_node = -1;
  std::vector<std::string> nvlink_peers;  // UUIDs
  bool mig_capable = false;
  GpuMode mode = GpuMode::kWhole;
  vocab::Layout mig_instances;  // existing MIG layout when mode == kMig
  GpuHealth health;
};

struct NodeInfo {
  std::string name;  // DNS label
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  std::string rack;
  std::string nvlink_domain;
  std::map<std::string, std::string> labels;
};

// How the node's container stack lets a container choose GPUs, as its agent reads it: the
// NVIDIA container toolkit's config and the device plugin's device-list strategy. Where the
// toolkit accepts a device list from an unprivileged container's environment, any pod on the
// node can take every GPU of it (NVIDIA_VISIBLE_DEVICES=all), other tenants' included.
struct GpuRuntime {
  // The toolkit config the agent read, and what it found: "read", "absent" (no file: the
  // toolkit's defaults apply) or "unreadable" (`detail` says why).
  std::string toolkit_config;
  std::string toolkit_config_state;
  // accept-nvidia-visible-devices-envvar-when-unprivileged as the toolkit applies it (no file or
  // no key: the toolkit default, true); nullopt when the agent could not tell.
  std::optional<bool> accepts_env_unprivileged;
  // accept-nvidia-visible-devices-as-volume-mounts likewise (default false).
  std::optional<bool> accepts_volume_mounts;
  // The device plugin's deviceListStrategy ("envvar", "volume-mounts", "cdi-annotations",
  // "cdi-cri"; it may use several); empty when unknown. `strategy_source` says where it came
  // from: "flag" (the operator told the agent), "device-plugin-config" (the plugin's config
  // file) or "unknown".
  std::vector<std::string> device_list_strategy;
  std::string strategy_source = "unknown";
  std::string detail;  // why something is unknown or unreadable; "" otherwise
};

// The deviceListStrategy values of the NVIDIA device plugin.
bool known_device_list_strategy(std::string_view s);

struct Inventory {
  NodeInfo node;
  std::vector<GpuInfo> gpus;
  std::optional<GpuRuntime> gpu_runtime;  // nullopt: the agent reports none (older agents)
};

// The canonical short model for an NVML product name: "NVIDIA H200" -> "H200",
// "NVIDIA A100-SXM4-80GB" -> "A100-80GB", "NVIDIA H100 80GB HBM3" -> "H100",
// anything else: without "NVIDIA ", spaces as '-'.
std::string canonical_model(std::string_view product);

// Parses and validates an inventory: types, limits, unique GPU UUIDs and indices, NVLink peers
// that exist on the node, MIG layouts valid for the model's geometry. All-or-nothing.
Result<Inventory> parse_inventory(const Json& j);
Json to_json(const Inventory& inv);
Json to_json(const GpuInfo& gpu);
// The inventory's "gpu_runtime" object, strictly (`what` names it in messages).
Result<GpuRuntime> parse_gpu_runtime(const Json& j, std::string_view what = "gpu_runtime");
Json to_json(const GpuRuntime& runtime);

}  // namespace gp::fleet
