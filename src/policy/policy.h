// Workload admission: Pod Security Standards (baseline and restricted, as upstream
// pod-security-admission evaluates them, per policy version) and gpuplane's tenant rules
// (namespace ownership, GPU resource names per tier, pool placement, image registries, pull
// policy), over a Kubernetes AdmissionReview. Pure: JSON in, JSON out. The isolation classes
// and tiers the rules are written in are vocabulary (vocab/vocab.h). Public header of the policy
// module.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "vocab/vocab.h"

namespace gp::policy {

using vocab::IsolationClass;
using vocab::Tier;

// ---- Pod Security Standards -------------------------------------------------------------

enum class PodSecurityLevel : uint8_t { kPrivileged, kBaseline, kRestricted };
std::string_view pod_security_level_name(PodSecurityLevel level);  // "privileged", ...
std::optional<PodSecurityLevel> parse_pod_security_level(std::string_view name);

// A Pod Security policy version, "v1.<minor>" as in the pod-security.kubernetes.io/*-version
// namespace labels. Versions newer than the newest one implemented clamp to it, exactly as the
// upstream registry clamps to its newest check version; "latest" is that newest version.
struct PodSecurityVersion {
  int minor = 0;
  friend bool operator==(const PodSecurityVersion&, const PodSecurityVersion&) = default;
};
// The newest policy version whose checks are implemented (v1.37: the sysctls added then).
inline constexpr PodSecurityVersion kLatestPodSecurityVersion{37};
// Accepts "latest" and "v1.<minor>" (minor 0..999); anything else is invalid_argument.
Result<PodSecurityVersion> parse_pod_security_version(std::string_view text);
std::string pod_security_version_name(PodSecurityVersion v);  // "v1.37"

// One violated control. `control` is the upstream check ID ("hostNamespaces", "runAsNonRoot",
// ...) for Pod Security and "tenant.<rule>" for tenant rules; `reason` and `detail` read like
// the upstream ForbiddenReason / ForbiddenDetail; `fields` are the offending field paths
// ("spec.template.spec.containers[0].securityContext.privileged").
struct Violation {
  std::string control;
  std::string reason;
  std::string detail;
  std::vector<std::string> fields;
};

// Evaluates one pod (its ObjectMeta and PodSpec as JSON) at `level` and `version`. Field paths
// are prefixed with `path_prefix` ("" for a Pod, "spec.template." for a Deployment's template).
// The pod is judged as the API server hands it to admission, after the defaults that can
// change a finding: a volume naming no source is an emptyDir, and a Pod's (path_prefix "")
// hostNetwork gives each container and init container port without a hostPort the host port
// of its containerPort.
// A field of the wrong JSON type is reported as a violation of control "malformed" (the API
// server would refuse to decode it, so it is never admitted). Privileged level checks nothing.
std::vector<Violation> check_pod_security(const Json& pod_metadata, const Json& pod_spec,
                                          PodSecurityLevel level,
                                          PodSecurityVersion version = kLatestPodSecurityVersion,
                                          std::string_view path_prefix = "");

// The pod template of a workload object: a Pod itself, or the template of a Deployment,
// ReplicaSet, StatefulSet, DaemonSet, Job, CronJob (spec.jobTemplate.spec.template),
// ReplicationController or PodTemplate.
struct PodTemplateView {
  const Json* metadata = nullptr;  // never null; points at an empty object when absent
  const Json* spec = nullptr;      // never null when found
  std::string path_prefix;         // "", "spec.template.", "spec.jobTemplate.spec.template.", ...
};
// nullopt for kinds that carry no pod (Service, ConfigMap, ...). invalid_argument when the
// kind carries a pod but the object has no pod spec object where the kind puts it.
Result<std::optional<PodTemplateView>> pod_template_of(const Json& object);

// ---- Tenant rules -------------------------------------------------------------------------

// GPU resource names gpuplane hands out (NVIDIA device plugin naming):
//   dedicated-pool, dedicated-node, dedicated-gpu: "nvidia.com/gpu" (whole GPUs)
//   mig:    "nvidia.com/mig-<profile>", e.g. "nvidia.com/mig-1g.18gb" (mixed MIG strategy)
//   shared: "nvidia.com/gpu.shared" (time-slicing with renamed resources)
inline constexpr std::string_view kWholeGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";
inline constexpr std::string_view kSharedGpuResource = "nvidia.com/gpu.shared";

// The node labels and taints of one pool (the tenant's own, or another tenant's).
struct PoolPlacement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> node_labels;  // e.g. gpuplane.io/pool=p1
  struct Taint {
    std::string key, value, effect;  // effect: NoSchedule, PreferNoSchedule, NoExecute
  };
  std::vector<Taint> taints;
  std::vector<std::string> nodes;  // node names (spec.nodeName bypasses the scheduler)
};

// Everything admission needs to know about the tenant that owns the request's namespace.
struct TenantAdmissionContext {
  std::string tenant;
  IsolationClass isolation_class{};
  std::vector<std::string> namespaces;  // namespaces the tenant owns
  std::vector<Tier> tiers;              // tiers the tenant may receive (filtered by its class)
  // MIG profiles the tenant may request ("1g.18gb"); empty means any profile when mig is
  // among the tiers.
  std::vector<std::string> mig_profiles;
  std::vector<PoolPlacement> own_pools;
  std::vector<PoolPlacement> other_pools;  // pools of other tenants: never a target
  // Pods requesting GPUs must select one of own_pools by node label (nodeSelector or a required
  // node affinity term), as dedicated-pool / dedicated-node tenants must.
  bool require_own_pool = false;
  // Registries (host, or host/path prefix) images may come from; empty: any registry.
  std::vector<std::string> allowed_registries;
  bool require_pull_always = false;  // every container must say imagePullPolicy: Always
  PodSecurityLevel level = PodSecurityLevel::kRestricted;
  PodSecurityVersion version = kLatestPodSecurityVersion;
};

// ---- GPU device selection through the environment ------------------------------------------

// Whether an environment variable named `name` (exact case, as the runtime reads it) makes the
// NVIDIA container stack choose which devices a container gets. This is THE rule for every
// workload gpuplane admits: the admission webhook refuses pods whose containers set such a name
// (control tenant.gpuDeviceEnv), and jobs the agent runs must never carry one in their own
// environment either (their devices come from their allocation alone). The names, from
// nvidia-container-toolkit (internal/config/image):
//   - NVIDIA_VISIBLE_DEVICES and the other device lists (NVIDIA_MIG_CONFIG_DEVICES,
//     NVIDIA_MIG_MONITOR_DEVICES, NVIDIA_IMEX_CHANNELS), and the switches that add device
//     nodes (NVIDIA_GDS, NVIDIA_MOFED, NVIDIA_NVSWITCH, NVIDIA_GDRCOPY);
//   - CUDA_VERSION and NVIDIA_REQUIRE_CUDA: a container with CUDA_VERSION and an empty or absent
//     NVIDIA_REQUIRE_CUDA is a "legacy" CUDA image, which gets every GPU when no device list
//     is set;
//   - every other NVIDIA_* name, failing closed (a device variable a later toolkit adds is
//     refused too), except those known to select no device: NVIDIA_DRIVER_CAPABILITIES,
//     NVIDIA_DISABLE_REQUIRE and NVIDIA_REQUIRE_<anything but CUDA>.
// The variable works only where the node's toolkit accepts it from unprivileged containers
// (accept-nvidia-visible-devices-envvar-when-unprivileged, default true); the same name can
// also come from an image or an envFrom ConfigMap, which no admission check sees, so the node
// setting is what closes the hole (docs/kubernetes.md, "GPU devices").
bool env_selects_gpu_devices(std::string_view name);
// Whether some variable an envFrom source adds under `prefix` could select devices: a
// non-empty prefix that env_selects_gpu_devices() holds for at least one completion of. The
// names in the referenced ConfigMap or Secret are invisible at admission; a prefix that turns
// them into device variables is not.
bool env_prefix_may_select_gpu_devices(std::string_view prefix);

// Pod annotations with this prefix ask containerd and CRI-O (with CDI enabled) for CDI devices
// by name; the webhook refuses them (control tenant.cdiDevices).
inline constexpr std::string_view kCdiAnnotationPrefix = "cdi.k8s.io/";

// ---- Namespaces ---------------------------------------------------------------------------

// The Kubernetes namespace of a tenant's project: "<tenant>-<project>" (invalid_argument
// beyond 63 characters).
Result<std::string> project_namespace(std::string_view tenant, std::string_view project);
// Whether two different tenant names could give two projects the same namespace: one extends
// the other at a '-' ("acme" and "acme-labs": acme's project "labs-x" and acme-labs' project
// "x" would both be "acme-labs-x"). Tenant names are kept free of such pairs (tenancy refuses
// the second one), which makes project_namespace one-to-one across the platform.
bool tenant_names_share_namespaces(std::string_view a, std::string_view b);

// The defaults a class implies: sensitive and regulated require imagePullPolicy Always (so a
// cached image of another tenant is never reused without the registry checking credentials),
// regulated requires placement on the tenant's own pool.
bool class_requires_pull_always(IsolationClass c);
bool class_requires_own_pool(IsolationClass c);

// The normalized registry/repository of an image reference ("busybox" ->
// "docker.io/library/busybox", "ghcr.io/o/r:tag" -> "ghcr.io/o/r").
std::string image_repository(std::string_view image);

// Image references, as the admission webhook and jobs read them.
// A registry host: DNS labels (lower-case letters, digits, inner '-', at most 63 each) joined
// by '.', at most 253 characters.
bool valid_registry_host(std::string_view host);
// A repository path component: lower-case letters and digits, separated by '.', '_', "__" or
// runs of '-'.
bool valid_repository_component(std::string_view component);
// A whole reference, [registry[:port]/]path[:tag][@sha256:<64 hex>] ("busybox",
// "127.0.0.1:5000/team/img:1"). Never starts with '-', so it cannot be read as an option.
bool valid_image_reference(std::string_view image);
// Whether `image` comes from one of `allowed` (registries or registry/path prefixes, as a
// tenant's workload policy lists them); an empty list allows any registry.
bool registry_allowed(std::span<const std::string> allowed, std::string_view image);

// Tenant rules alone, over the object (any kind; pod-carrying kinds are checked through their
// template) in `namespace_name`.
std::vector<Violation> check_tenant_rules(const Json& object, std::string_view namespace_name,
                                          const TenantAdmissionContext& tenant);

// Full verdict on one object: Pod Security at tenant.level/version plus tenant rules.
struct AdmissionVerdict {
  bool allowed = true;
  std::vector<Violation> violations;
  std::string message;  // empty when allowed; one line per violated control otherwise
};
AdmissionVerdict admit_object(const Json& object, std::string_view namespace_name,
                              const TenantAdmissionContext& tenant);

// Answers an admission.k8s.io/v1 AdmissionReview request with an AdmissionReview response:
// uid echoed, allowed, and when denied status {code 403, reason Forbidden, message,
// details.causes[] with one cause per violated field}. DELETE and CONNECT operations,
// subresources other than ephemeralcontainers, and kinds that carry no pod are allowed.
// A review that is not a v1 AdmissionReview with request.uid is invalid_argument (answer 400).
Result<Json> review_admission(const Json& review, const TenantAdmissionContext& tenant);

// The namespace an AdmissionReview is about (request.namespace), so the caller can look up
// the tenant owning it before calling review_admission. invalid_argument when malformed.
Result<std::string> admission_namespace(const Json& review);

}  // namespace gp::policy
