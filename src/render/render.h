// Render: pure functions from tenant state to the artifacts a cluster applies. The Kubernetes
// bundle turns one tenant into namespaces, quotas, limit ranges, network policies, service
// accounts, RBAC, node placement and the admission webhook that points back at gpuplane.
// Output is deterministic (stable ordering), so two renders diff to exactly what changed. Line
// charts as SVG for the CLI's drawings of curves over time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "policy/policy.h"

namespace gp::render {

// A port or port range (end_port > port) of one protocol: TCP, UDP or SCTP.
struct Port {
  std::string protocol = "TCP";
  int port = 0;      // 1..65535
  int end_port = 0;  // 0: a single port
};

// Traffic the tenant's pods may send out of the cluster network to `cidr` (minus `except`).
struct EgressRule {
  std::string name;  // DNS label, names the NetworkPolicy
  std::string cidr;  // IPv4 or IPv6 CIDR
  std::vector<std::string> except;
  std::vector<Port> ports;  // empty: every port
};

// A service the tenant exposes: pods matching `pod_labels` accept `ports` from `from_cidrs`.
struct Exposure {
  std::string name;                               // DNS label, names the NetworkPolicy
  std::map<std::string, std::string> pod_labels;  // empty: every pod of the project
  std::vector<Port> ports;                        // at least one
  std::vector<std::string> from_cidrs;            // empty: from anywhere (0.0.0.0/0 and ::/0)
};

// A project's quota, one ResourceQuota `hard` entry each. Quantities are Kubernetes quantity
// strings ("64", "500m", "256Gi"); GPU counts are whole instances.
struct ProjectQuota {
  int64_t gpus = 0;                    // requests.nvidia.com/gpu
  std::map<std::string, int64_t> mig;  // profile -> requests.nvidia.com/mig-<profile>
  int64_t shared_gpus = 0;             // requests.nvidia.com/gpu.shared (time-sliced)
  std::string cpu = "64", memory = "256Gi", storage = "1Ti";  // requests.*; limits = requests
  int64_t pods = 100, services = 20, persistent_volume_claims = 20, config_maps = 100,
          secrets = 100;
  int64_t load_balancers = 0, node_ports = 0;  // services.loadbalancers / services.nodeports
};

// Container defaults a LimitRange applies when a pod leaves requests or limits out.
struct ContainerDefaults {
  std::string cpu_request = "100m", cpu_limit = "1";
  std::string memory_request = "256Mi", memory_limit = "1Gi";
};

struct Project {
  std::string name;  // DNS label; the namespace is "<tenant>-<project>"
  ProjectQuota quota;
  ContainerDefaults defaults;
  std::vector<EgressRule> egress;
  std::vector<Exposure> exposures;
  std::vector<std::string> service_accounts;  // DNS labels
};

struct Taint {
  std::string key, value;
  std::string effect = "NoSchedule";  // NoSchedule, PreferNoSchedule, NoExecute
};

// A node pool the tenant owns (dedicated-pool / dedicated-node tiers).
struct Pool {
  std::string name;                                // DNS label
  std::map<std::string, std::string> node_labels;  // extra labels its nodes carry
  std::vector<Taint> taints;                       // extra taints its nodes carry
  std::vector<std::string> nodes;                  // node names
};

// One of the tenant's role bindings, in gpuplane's role names (iam): tenant-admin (every
// project namespace), project-admin, project-member, project-viewer (the one project).
// tenant-billing grants nothing in the cluster.
struct RoleBinding {
  std::string role;
  std::string subject_kind;  // User, Group or ServiceAccount
  std::string subject;
  std::string project;  // required for project roles and ServiceAccount subjects
};

struct Webhook {
  std::string base_url;      // https://host[:port][/prefix]; /v1/admission/validate is appended
  std::string ca_bundle;     // base64 PEM bundle for clientConfig.caBundle; empty: system roots
  int timeout_seconds = 10;  // 1..30
};

struct TenantBundleInput {
  std::string tenant;  // DNS label
  vocab::IsolationClass isolation_class = vocab::IsolationClass::kStandard;
  std::vector<vocab::Tier> tiers;         // each must be allowed by the class
  std::vector<std::string> mig_profiles;  // profiles quota may name ("1g.18gb")
  std::vector<Project> projects;
  std::vector<Pool> pools;
  std::vector<RoleBinding> role_bindings;
  Webhook webhook;
  // Lines for the bundle's header comment (what the renderer's caller left out, and why).
  std::vector<std::string> notes;
};

// Labels and names shared with admission and the docs.
inline constexpr std::string_view kTenantLabel = "gpuplane.io/tenant";
inline constexpr std::string_view kProjectLabel = "gpuplane.io/project";
inline constexpr std::string_view kPoolLabel = "gpuplane.io/pool";
inline constexpr std::string_view kAdmissionPath = "/v1/admission/validate";

// The namespace of a project: "<tenant>-<project>" (invalid_argument beyond 63 characters);
// the rule is policy's, shared with tenancy (which stores each project's namespace) and
// admission.
using policy::project_namespace;

// Every object of the bundle, in apply order: Namespaces, then per namespace ResourceQuota,
// LimitRange, NetworkPolicies, ServiceAccounts, Roles, RoleBindings; then Nodes of the
// tenant's pools (dedicated tiers only); then the ValidatingWebhookConfiguration.
// invalid_argument for any bad input (names, quantities, CIDRs, ports, tiers, roles, URL).
Result<std::vector<Json>> render_kubernetes_objects(const TenantBundleInput& input);

// The same objects as one multi-document YAML stream ("---" before each document), after a
// header comment: the tenant, the settings every GPU node the tenant's pods reach must have
// (the NVIDIA container toolkit must not take a device list from an unprivileged container's
// environment; the device plugin passes device lists as volume mounts or CDI), and the notes.
Result<std::string> render_kubernetes(const TenantBundleInput& input);

// YAML for one JSON value, block style, keys in JSON order, strings quoted whenever a plain
// scalar would read back as something else.
std::string to_yaml(const Json& value);

// A multi-document YAML stream (or JSON, which is YAML) as JSON values, read the way Kubernetes
// clients read manifests: quoted scalars are strings; plain scalars become integers, floats,
// booleans or null when they look like one, strings otherwise. Empty documents are skipped.
// Malformed YAML: kInvalidArgument naming the line.
Result<std::vector<Json>> from_yaml(std::string_view text);

// ---- charts ----
struct ChartLine {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
};
struct LineChart {
  std::string title, x_label, y_label;
  double x_min = 0, x_max = 1;                // the x axis
  double x_step = 0;                          // between x tick labels; 0: a fifth of the axis
  std::function<std::string(double)> x_tick;  // an x tick's label; default: the number
  double y_max = 100;                         // the y axis runs from 0; values are clamped to it
  std::vector<ChartLine> lines;
};
std::string line_chart_svg(const LineChart& chart);

}  // namespace gp::render
