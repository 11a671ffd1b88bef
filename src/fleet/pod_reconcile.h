// Pod reconcile: which GPUs the pods of a cluster use (`kubectl get pods -A -o json`) against
// what the fleet has allocated to each tenant on each node. Pure: JSON and plain structs in, a
// report out; the caller gathers the allocations and the namespace owners. Included by fleet.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace gp::fleet {

// What one tenant holds on one node: whole GPUs, MIG instances per profile ("1g.18gb") and
// time-sliced shares (GPU slots of shared GPUs).
struct NodeHolding {
  std::string tenant;
  std::string node;  // Kubernetes node name
  int64_t whole_gpus = 0;
  std::map<std::string, int64_t> mig;  // profile -> instances
  int64_t shared = 0;                  // nvidia.com/gpu.shared slots
};

struct PodReconcileInput {
  const Json* pods = nullptr;  // a v1 List (or PodList) of Pod
  // Namespace -> owning tenant; namespaces not listed belong to no tenant.
  std::map<std::string, std::string> namespace_tenants;
  std::vector<NodeHolding> holdings;
};

// One GPU pod in phase Running or Pending. `resources` are its effective GPU requests (per
// resource the larger of the app containers' sum and any one init container, limits before
// requests, as the scheduler counts extended resources): "nvidia.com/gpu",
// "nvidia.com/gpu.shared", "nvidia.com/mig-<profile>".
struct PodGpuUse {
  std::string ns, name, node, phase;  // node "" while unscheduled
  std::string tenant;                 // "" when no tenant owns the namespace
  std::map<std::string, int64_t> resources;
};

struct NodePodUse {
  std::string node;
  std::vector<PodGpuUse> pods;  // by namespace, then name
  // tenant ("" for none) -> resource -> requested by its pods on this node
  std::map<std::string, std::map<std::string, int64_t>> requested;
  std::vector<std::string> holders;  // tenants holding GPUs on the node, sorted
};

enum class DiscrepancyKind {
  kForeignNode,       // a tenant's pod on a node where only other tenants hold GPUs
  kUnallocatedNode,   // a GPU pod on a node where no tenant holds GPUs
  kOverRequest,       // a tenant's pods request more of a resource on a node than it holds
  kUnownedNamespace,  // a GPU pod in a namespace no tenant owns
};
std::string_view discrepancy_kind_name(DiscrepancyKind k);  // "foreign_node", ...

struct Discrepancy {
  DiscrepancyKind kind;
  std::string node, tenant, resource;
  std::vector<std::string> pods;    // "<namespace>/<name>"
  int64_t requested = 0, held = 0;  // kOverRequest
  std::string message;              // one sentence
};

struct PodReconcileReport {
  std::vector<NodePodUse> nodes;           // nodes with GPU pods, by name
  std::vector<PodGpuUse> unscheduled;      // Pending GPU pods without a node yet
  std::vector<Discrepancy> discrepancies;  // by node, kind, tenant, resource
  int64_t pods_seen = 0;                   // items of the list
  int64_t gpu_pods = 0;                    // Running/Pending pods requesting GPUs
};

// invalid_argument, naming the item, when the list or a pod has the wrong shape or a GPU
// quantity is not a non-negative whole number. Pods in other phases are skipped.
Result<PodReconcileReport> reconcile_pods(const PodReconcileInput& in);

Json to_json(const PodReconcileReport& r);

}  // namespace gp::fleet
