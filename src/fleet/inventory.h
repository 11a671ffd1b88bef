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
#include "fleet/mig_geometry.h"
#include "policy/policy.h"

namespace gp::fleet {

using policy::gpu_mode_name;
using policy::GpuMode;
using policy::parse_gpu_mode;

struct GpuHealth {
  std::vector<int> xid_errors;  // XID codes seen since the last report
  int64_t ecc_uncorrected = 0;  // volatile uncorrected ECC errors
  bool healthy() const;         // no critical XID and no uncorrected ECC errors
  std::string reason() const;   // why not healthy ("" when healthy)
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
  Layout mig_instances;  // existing MIG layout when mode == kMig
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

struct Inventory {
  NodeInfo node;
  std::vector<GpuInfo> gpus;
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

}  // namespace gp::fleet
