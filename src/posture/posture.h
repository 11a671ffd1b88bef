// Posture: one tenant's isolation stack judged against its class (DESIGN.md, "Isolation tiers
// and classes"). evaluate() is pure: plain Facts about one tenant in, one report out, per layer
// (identity, hardware, scheduling/quota, network, storage, workload, metering, audit) with each
// control's status, evidence, threat and remediation. gather() is the shell that reads those
// facts from the store inside the caller's read transaction. Public header of the posture module.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "audit/audit.h"
#include "common/json.h"
#include "common/result.h"
#include "fleet/inventory.h"
#include "network/network.h"
#include "store/store.h"
#include "tenancy/tenancy.h"
#include "vocab/vocab.h"

namespace gp::posture {

using vocab::IsolationClass;
using vocab::Tier;

enum class Layer : uint8_t {
  kIdentity,
  kHardware,
  kScheduling,
  kNetwork,
  kStorage,
  kWorkload,
  kMetering,
  kAudit
};
std::string_view layer_name(Layer layer);  // "identity", "hardware", "scheduling", ...

enum class Status : uint8_t { kPass, kFail, kNotApplicable };
std::string_view status_name(Status status);  // "pass", "fail", "not_applicable"

// ---- Facts: what gather() saw about one tenant; everything evaluate() judges ----

struct ApiKeyFact {
  std::string id, name, owner_kind, owner_id;
  std::optional<int64_t> expires_at;  // unix micros; nullopt: never expires
};

// A role binding that involves the tenant: granted inside it, or held by one of its subjects.
struct BindingFact {
  std::string id, role;
  std::string scope;                          // "platform" | "tenant" | "project"
  std::optional<std::string> scope_tenant;    // the tenant the binding grants in
  std::string subject_kind, subject_id;       // "user" | "service_account"
  std::optional<std::string> subject_tenant;  // the subject's home tenant; nullopt: platform
};

struct IdentityFacts {
  int users = 0, service_accounts = 0;
  std::vector<ApiKeyFact> active_keys;  // neither revoked nor expired
  std::vector<BindingFact> bindings;
};

struct AllocationFact {
  std::string id, state;
  Tier tier = Tier::kDedicatedGpu;
};

// A node that hosts a live allocation of the tenant and one of another tenant. Other tenants
// are never named, and counted only in the operators' view.
struct SharedNodeFact {
  std::string node, allocation;
  std::optional<int> other_tenants;  // operators' view only
};

// Tiers whose allocations hold their nodes alone: another tenant on such a node is a breach.
inline bool holds_nodes_alone(Tier t) {
  return t == Tier::kDedicatedNode || t == Tier::kDedicatedPool;
}

// Who reads the report. A tenant's principals read facts derived from the tenant's own
// allocations only: whether a neighbour sits on the node of an allocation whose tier shares
// nodes would make the report a co-residency oracle. Operators (platform principals) read every
// shared node with its count of other tenants.
enum class Audience { kTenant, kOperator };

struct HardwareFacts {
  std::vector<AllocationFact> live;  // pending, placed, active
  // Operators: every node shared with another tenant. Tenant: only those of allocations on a
  // node-exclusive tier (dedicated-node, dedicated-pool), where any neighbour breaks the tier's
  // own promise and tells nothing the tier does not already rule out.
  std::vector<SharedNodeFact> shared_nodes;
  Audience audience = Audience::kTenant;
};

struct ModelQuotaFact {
  std::string model;
  int64_t nominal = 0;  // scheduler units (1 GPU = 7000)
  std::optional<int64_t> limit;
};
struct ProjectQuotaFact {
  std::string project;  // name
  std::vector<ModelQuotaFact> models;
};
struct SchedulingFacts {
  std::vector<ModelQuotaFact> tenant_models;
  std::vector<ProjectQuotaFact> projects;  // every project, with its quota (maybe none)
};

struct NetworkFacts {
  network::Ipv4Cidr supernet;                    // the pool tenant segments come from
  std::optional<network::Segment> segment;       // nullopt: none assigned
  std::vector<network::Segment> other_segments;  // every other tenant's (tenant left empty)
  bool policy_stored = false;                    // false: the default (no egress, no exposures)
  std::optional<network::TenantPolicy> policy;   // nullopt when the stored one is unreadable
  std::string policy_error;                      // why it is unreadable
  bool tls = false;                              // the API is served over TLS
};

struct KeyringFact {
  bool destroyed = false;
  uint32_t current_version = 0;
  std::vector<uint32_t> versions;
  int64_t changed_at = 0;  // when the current data key was made, unix micros
};
struct SecretFact {
  std::string name;
  uint32_t key_version = 0;
  std::string sealed_for;  // the tenant name the ciphertext is bound to
};
struct VolumeFact {
  std::string path;
  uint32_t uid = 0, gid = 0, mode = 0;
};
struct VolumeFacts {
  uint32_t ids_first = 0, ids_count = 0;  // the tenant's uid/gid range
  std::vector<VolumeFact> volumes;
};
// What a node last reported of the tenant's tree there (its agent's storage round).
struct TreeReportFact {
  std::string node;
  bool encrypted = false;
  std::string encryption_detail;
  int64_t finding_count = 0;
  Json findings = Json::array();  // the first ones
  int64_t audited_at = 0;         // unix micros
};
struct StorageFacts {
  std::optional<KeyringFact> keyring;  // nullopt: the tenant has no data key yet
  std::vector<SecretFact> secrets;
  // nullopt: volume records are not kept by the control plane yet.
  std::optional<VolumeFacts> volumes;
  std::vector<TreeReportFact> trees;  // one per node holding the tenant's trees that reported
};
// A tree audit older than this fails storage.permission-audit.
inline constexpr int64_t kMaxTreeAuditAgeUs = int64_t{24} * 3600 * 1'000'000;

// One probe of the tenant's admission policy: a workload that must be refused.
struct ProbeFact {
  bool denied = false;
  std::string level;   // the Pod Security level it was checked at
  std::string detail;  // the controls that refused it, or why it was admitted
};
// A node of the tenant's live allocations on a tier that shares nodes with other tenants, with
// what its agent last reported about GPU device selection (nullopt: never reported).
struct SharedGpuNodeFact {
  std::string node;
  std::optional<fleet::GpuRuntime> runtime;
};
struct WorkloadFacts {
  ProbeFact privileged, host_path, host_namespaces, host_ports, other_tenant_pool;
  ProbeFact device_env;  // a pod setting NVIDIA_VISIBLE_DEVICES=all and requesting no GPU
  // Whether another tenant is on them now is not a fact here: the report would tell.
  std::vector<SharedGpuNodeFact> node_sharing_gpu_nodes;
};

struct UsageFacts {
  std::vector<std::string> placed_without_usage;  // allocations with no usage interval
};
struct MeteringFacts {
  int64_t allocations = 0;  // every allocation of the tenant, any state
  std::vector<std::string> allocations_without_events;
  std::optional<UsageFacts> usage;  // nullopt: the metering tables are not available
};

struct AuditFacts {
  bool chain_ok = false;
  int64_t records_checked = 0;  // the tenant's own records in the verified chain
  std::string chain_reason;     // why it does not verify
  int64_t oldest_seq = 0;       // 0: empty trail
  int64_t tenant_entries = 0;
  int64_t latest_tenant_entry_at = 0;
  bool reads_audited = false;  // every request, reads too, is recorded
};

struct Facts {
  std::string tenant_id, tenant_name;
  IsolationClass isolation_class = IsolationClass::kStandard;
  std::string state = "active";
  int64_t checked_at = 0;  // unix micros
  IdentityFacts identity;
  HardwareFacts hardware;
  SchedulingFacts scheduling;
  NetworkFacts network;
  StorageFacts storage;
  WorkloadFacts workload;
  MeteringFacts metering;
  AuditFacts audit;
};

// ---- Controls ----

struct Control {
  std::string_view id;  // "identity.api-key-expiry"
  Layer layer;
  std::string_view title;
  std::string_view threat;
  std::string_view remediation;
  IsolationClass required_from;  // required for this class and every stronger one
  std::string_view rule;         // the class rule (DESIGN.md) or benchmark item requiring it
  bool benchmark = false;        // one of the multi-tenancy benchmark controls
};
// Every control, grouped by layer in report order.
std::span<const Control> controls();
const Control* find_control(std::string_view id);
bool required(const Control& control, IsolationClass c);

// Data keys older than this fail storage.data-key-rotation.
inline constexpr int64_t kMaxDataKeyAgeUs = int64_t{90} * 24 * 3600 * 1'000'000;

// As alloc::Allocation: nlohmann::json's special members as clang-tidy 16 reads them.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ControlResult {
  const Control* control = nullptr;
  Status status = Status::kNotApplicable;
  bool required = false;
  std::string summary;  // one line: what was found
  Json evidence;        // {"checked": ..., "seen": {...}, "checked_at": ...}
  Json to_json() const;
};

struct Report {
  std::string tenant_id, tenant_name;
  IsolationClass isolation_class = IsolationClass::kStandard;
  int64_t checked_at = 0;
  std::vector<ControlResult> results;  // one per control, in controls() order
  int count(Status s) const;
  std::vector<std::string> failing() const;  // control ids
  Json to_json() const;
};

// Judges the facts against the tenant's class. Pure and deterministic.
Report evaluate(const Facts& facts);

// Tenants x controls: which tenants fail which controls, with counts per control and tenant.
Json fleet_matrix(std::span<const Report> reports);

// ---- Rendering the API's JSON for people (the CLI) ----

// A report (Report::to_json) as a table per layer, then the failing controls with threat and
// remediation. ANSI colour only when `colour` is set (the CLI sets it for a terminal).
// Each renderer answers invalid_argument when the JSON does not have the API's shape.
Result<std::string> render_report_text(const Json& report, bool colour);
// A fleet matrix (fleet_matrix) as one row per tenant with its failing controls, then the
// controls that fail somewhere with how many tenants fail them.
Result<std::string> render_fleet_text(const Json& fleet, bool colour);
// The fleet matrix as an SVG image: tenants as rows, controls as columns, one cell per pair
// coloured by status.
Result<std::string> render_fleet_svg(const Json& fleet);

// ---- Gathering (reads the store; the caller holds one read transaction) ----

struct GatherOptions {
  network::Ipv4Cidr supernet;                 // the configured tenant segment pool
  const audit::Verifier* verifier = nullptr;  // the audit key; nullptr: chain reported unverified
  bool tls = false;                           // the API is served over TLS
  bool reads_audited = false;                 // the API records reads in the audit trail
  int64_t now = 0;                            // unix micros
  Audience audience = Audience::kTenant;      // who reads the report (HardwareFacts)
};

// The audit chain's verification, done once and shared by every tenant of a fleet view.
struct ChainState {
  audit::VerifyReport report;
  bool verified = false;  // false when no verifier was given
  int64_t oldest_seq = 0;
};
Result<ChainState> check_chain(store::Tx& tx, const audit::Verifier* verifier);

Result<Facts> gather(store::Tx& tx, const tenancy::Tenant& tenant, const GatherOptions& opts,
                     const ChainState& chain);

}  // namespace gp::posture
