// Kubernetes import: builds gpuplane inventories from `kubectl get nodes -o json`, reading the
// labels NVIDIA GPU Feature Discovery (GFD) writes and the resources kubelet reports. Pure: a
// JSON value in, inventories out; enrolling them is the caller's business.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "fleet/inventory.h"

namespace gp::fleet {

struct ImportedNode {
  Inventory inventory;
  bool schedulable = true;  // false when cordoned (spec.unschedulable)
  bool ready = false;       // the Ready condition is "True"
  // Things the import had to assume or that look wrong but do not stop it, one sentence each.
  std::vector<std::string> warnings;
};

struct ImportResult {
  std::vector<ImportedNode> nodes;   // GPU nodes, in input order
  std::vector<std::string> skipped;  // "<node>: <reason>" for each node not imported
};

// Imports a v1 List (or NodeList) of Node. All-or-nothing: any error returns invalid_argument
// naming the item or node, and nothing is imported.
//
// What is read:
//  - metadata.name; metadata.labels; spec.unschedulable; the Ready condition; status.allocatable
//    (cpu, memory, falling back to status.capacity with a warning) and status.capacity for the
//    device-plugin resources nvidia.com/gpu, nvidia.com/gpu.shared and nvidia.com/mig-<profile>.
//  - GFD labels: nvidia.com/gpu.product ("NVIDIA-H200"; GFD writes the NVML name with spaces as
//    '-'), gpu.count, gpu.memory (MiB), gpu.replicas and gpu.sharing-strategy (time-slicing,
//    mps), mig.strategy (none | single | mixed), mig-<profile>.count, gpu.clique (NVLink domain).
//  - Topology: rack from topology.kubernetes.io/rack, else the label `rack`. The zone and other
//    labels are kept in NodeInfo::labels, except noisy or duplicated families
//    (feature.node.kubernetes.io/*, beta.kubernetes.io/*, most nvidia.com/*); at most 64 kept.
//
// What is built, per node with a gpu.product label and gpu.count > 0:
//  - GPU i (0..count-1) gets the synthetic, stable UUID "GPU-k8s-<node>-<i>" (Kubernetes does not
//    expose UUIDs), product = the NVML name ("NVIDIA H200"), model = canonical_model(product),
//    mig_capable = gpuplane has a MIG catalog for the model.
//  - mig.strategy mixed: gpu.count counts every physical GPU, capacity nvidia.com/gpu only the
//    whole ones (times replicas when time-sliced), so the difference is the MIG-enabled GPUs.
//    They are taken to be the lowest indices (Kubernetes does not say which). The instance counts
//    of the mig-<profile>.count labels are spread over them, each GPU's layout planned by plan().
//  - mig.strategy single: GFD relabels gpu.product as "<product>-MIG-<profile>" and gpu.count as
//    the number of MIG devices, so the number of GPUs is inferred as ceil(count / the profile's
//    max instances) and the GPU memory taken from a table of nominal sizes (warnings say so).
//  - gpu.replicas > 1: whole GPUs are GpuMode::kTimeSliced (MPS too, with a warning).
//  - The node name must be a DNS label; a DNS subdomain ("gpu-01.dc1.example.com") is shortened
//    to its first label, with a warning. The result passes parse_inventory().
//
// Errors: not a List/NodeList; an item that is not a Node or has a malformed shape; duplicate
// node names (also after shortening); a GFD count that is not a non-negative integer (or above
// 64 GPUs); an unknown mig.strategy or sharing strategy; mig-<profile>.count labels without
// mig.strategy=mixed; a MIG profile unknown for the model; MIG instances that cannot be placed
// on the node's MIG-enabled GPUs; a cpu or memory quantity that does not parse.
//
// Warnings, not errors, since a live cluster passes through such states (device plugin
// restarting, GFD relabeling, unhealthy devices) and one node should not block a fleet import:
// gpu.count (or a mig-<profile>.count) disagreeing with the device-plugin capacity (the labels
// win); allocatable below capacity (devices the plugin reports unhealthy); no Ready condition.
//
// Skipped (listed in ImportResult::skipped): nodes without a gpu.product label (CPU-only, or GPUs
// without GFD: their model is unknown), gpu.count 0, and GFD's "-MIG-INVALID" single-strategy
// state (the node exposes no GPUs).
Result<ImportResult> import_kubectl_nodes(const Json& node_list);

// A Kubernetes resource quantity ("2113412Ki", "2Ti", "1.5G", "1e3", "95500m") in base units,
// rounded up to an integer as Kubernetes does. Accepts an optional '+', digits with an optional
// fraction, and one suffix: binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P E, or an exponent
// e<int> / E<int>. Errors (invalid_argument): anything else, a negative value, more than 20
// significant digits, or a result above INT64_MAX.
Result<int64_t> parse_k8s_quantity(std::string_view q);

// A CPU quantity in millicores: "96" -> 96000, "95500m" -> 95500, "0.25" -> 250 (rounded up).
Result<int64_t> parse_cpu_millis(std::string_view q);

}  // namespace gp::fleet
