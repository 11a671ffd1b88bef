// Fleet: the hardware gpuplane governs. Pools, nodes and their GPUs, node enrolment with
// one-time join tokens, the node lifecycle, health from agent reports, utilization samples, and
// MIG layouts drawn and written as mig-parted configs (the catalog and geometry themselves are
// vocabulary: vocab/vocab.h). Repository functions run inside a caller's store transaction,
// like tenancy's. Public header of the fleet module.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/page.h"
#include "common/record.h"
#include "fleet/inventory.h"
#include "fleet/k8s_import.h"
#include "fleet/lifecycle.h"
#include "fleet/pod_reconcile.h"
#include "iam/iam.h"
#include "store/store.h"
#include "vocab/vocab.h"

namespace gp::fleet {

struct Pool {
  std::string id, name;
  std::optional<std::string> tenant_id;  // dedicated to this tenant; shared when empty
  std::string description;
  int64_t created_at = 0, version = 1;
  std::string_view kind() const { return tenant_id ? "dedicated" : "shared"; }
  Json to_json() const { return json_of_fields(*this); }
};

struct Node {
  std::string id;
  std::optional<std::string> pool_id;
  std::optional<std::string> pool_name;  // as read with the node (nullopt: no pool)
  NodeState state = NodeState::kEnrolling;
  bool cordoned = false;
  std::string state_reason;
  NodeInfo info;
  std::string source;  // "agent" | "kubernetes"
  std::optional<int64_t> last_heartbeat;
  std::optional<GpuRuntime> gpu_runtime;  // as the agent last reported it; nullopt: never
  // Draining with a deadline: what still runs on it then is evicted (alloc::Service::tick).
  std::optional<int64_t> drain_deadline;
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const;
};

inline constexpr std::array<std::string_view, 3> kGpuHealthNames = {"healthy", "unhealthy",
                                                                    "missing"};

struct Gpu {
  GpuInfo info;
  std::string node_id;
  std::string health = "healthy";  // one of kGpuHealthNames
  std::string health_reason;
  Json to_json() const { return json_of_fields(*this); }
};

// ---- GPU health and repair (docs/fleet.md) ----
// A GPU that turned unhealthy stays so until an operator takes it through a repair: out of
// service from then on, and back to healthy once a health report of its node after the repair
// is clean (no critical XID, no uncorrected ECC errors). Every XID and every change of the
// uncorrected ECC count a node reports is kept, with the repairs and returns.
struct GpuRepair {
  int64_t since = 0;
  std::string reason, actor;
  Json to_json() const { return json_of_fields(*this); }
};
Result<std::optional<GpuRepair>> find_repair(store::Tx& tx, const std::string& uuid);
// The UUIDs of the node's GPUs in repair: its agent checks them (DCGM's diagnostics where
// installed) and reports the outcome as the GPU's health.diagnostics.
Result<std::vector<std::string>> node_repairs(store::Tx& tx, const std::string& node_id);
// `gpu`: the GPU's UUID or its index on the node. not_found for neither; conflict when it is in
// repair already. Returns the GPU as it now is (unhealthy, "in repair: <reason>").
Result<Gpu> start_repair(store::Tx& tx, const Env& w, const std::string& node_id,
                         const std::string& gpu, const std::string& reason,
                         const std::string& actor);
// [{seq, node_id, at, kind ("xid", "ecc", "repair", "returned"), detail, ecc_uncorrected}].
Result<Json> gpu_history(store::Tx& tx, const std::string& uuid);
// XID reports per GPU UUID: how many the GPU's node reported, and the last code of the last one
// (DCGM_FI_DEV_XID_ERRORS).
struct XidTally {
  int64_t reports = 0;
  int last = 0;
};
Result<std::map<std::string, XidTally>> xid_tallies(store::Tx& tx);
// apply_inventory's part: the report's XIDs and ECC count into the history, and a repair ended.
Result<void> record_health_report(store::Tx& tx, const std::string& node_id, const GpuInfo& g,
                                  int64_t now);
Result<void> end_repair(store::Tx& tx, const std::string& uuid, const std::string& node_id,
                        int64_t now);

// ---- pools ----
// `tenant_id` (a dedicated pool's tenant) as the caller resolved it; an id no tenant has is
// invalid_argument.
Result<Pool> create_pool(store::Tx& tx, const Env& w, const std::string& name,
                         const std::optional<std::string>& tenant_id,
                         const std::string& description);
Result<std::optional<Pool>> find_pool(store::Tx& tx, std::string_view id_or_name);
Result<std::vector<Pool>> list_pools(store::Tx& tx);
Result<void> delete_pool(store::Tx& tx, const std::string& id);

// ---- enrolment ----
// A join token as issued: its bearer token is shown once, at creation, and only its hash is
// stored. Enrolling with it (once, before it expires) registers the node, in its pool if it has
// one.
struct JoinToken {
  std::string id;
  std::string token;  // never stored
  std::string secret_hash;
  std::optional<std::string> pool_id;
  std::string created_by;
  int64_t created_at = 0;
  int64_t expires_at = 0;
  Json to_json() const { return json_of_fields(*this); }
};
Result<JoinToken> create_join_token(store::Tx& tx, const Env& w,
                                    const std::optional<std::string>& pool_id,
                                    const std::string& created_by, Duration ttl);
struct Enrolled {
  Node node;
  std::string credential;  // the node's own bearer token, shown once
};
// Consumes a join token (single use, unexpired) and registers the node with its GPUs.
Result<Enrolled> enroll(store::Tx& tx, const Env& w, std::string_view join_token,
                        const Inventory& inventory);
// Registers a node known from another inventory source (Kubernetes import); no agent credential.
Result<Node> import_node(store::Tx& tx, const Env& w, const Inventory& inventory,
                         const std::optional<std::string>& pool_id, bool ready);

// ---- node certificates (mTLS) ----
// The certificates the node CA issued to a node's agent; the tls module signs, these record.
struct NodeCertificate {
  std::string serial, node_id;
  int64_t not_before = 0, not_after = 0, issued_at = 0;
  std::optional<int64_t> revoked_at;
  std::string revoke_reason;
  Json to_json() const { return json_of_fields(*this); }
};
Result<void> record_certificate(store::Tx& tx, const Env& w, const NodeCertificate& cert);
// When each node's newest certificate not revoked expires (Unix micros), by node id.
Result<std::map<std::string, int64_t>> certificate_expiries(store::Tx& tx);
// Newest first.
Result<std::vector<NodeCertificate>> list_certificates(store::Tx& tx, const std::string& node_id);
// Whether an agent call from `node_id` presenting certificate `serial` may proceed: the
// certificate was issued to that node, is neither revoked nor expired at `now`. Unauthenticated
// errors say which.
Result<void> check_certificate(store::Tx& tx, const std::string& node_id, const std::string& serial,
                               int64_t now);
// Revokes every certificate of the node and its bearer credential: its agent is refused from
// the next call on and must enrol again with a new join token. Returns how many certificates
// were revoked.
Result<int> revoke_node(store::Tx& tx, const Env& w, const std::string& node_id,
                        const std::string& reason);
// The node's bearer credential, as iam::Authenticator asks for it (an iam::NodeLookup): the
// node's name and the hash of the credential's secret (nullopt once revoked); nullopt when there
// is no such node.
Result<std::optional<iam::NodeCredential>> node_credential(store::Tx& tx,
                                                           const std::string& node_id);

// ---- reports from agents ----
// Replaces the node's GPU inventory: GPUs owned by another live node are refused (a GPU cannot
// be in two nodes), GPUs no longer reported are marked missing, health is derived from XID and
// ECC reports. The GPU runtime report replaces the stored one (none reported: none stored).
Result<Node> apply_inventory(store::Tx& tx, const Env& w, const std::string& node_id,
                             const Inventory& inventory);
// Agents report their whole inventory with every heartbeat; one that repeats the inventory
// applied last need not be applied again. `digest` identifies the report (a hash of the JSON the
// agent sent). True when it is the node's last applied inventory and was applied within
// kInventoryResync; a node's state change or a GPU put in repair forgets the digest, so the next
// report is applied in full.
inline constexpr Duration kInventoryResync = std::chrono::minutes(5);
Result<bool> inventory_unchanged(store::Tx& tx, const Env& w, const std::string& node_id,
                                 std::string_view digest);
// Records `digest` as the inventory just applied to the node.
Result<void> record_inventory_digest(store::Tx& tx, const Env& w, const std::string& node_id,
                                     std::string_view digest);
// Records a heartbeat; a node failed for missed heartbeats recovers.
Result<Node> heartbeat(store::Tx& tx, const Env& w, const std::string& node_id);
// The address the node's agent reaches other nodes from (the underlay of tenant VXLANs), as it
// reports it with its heartbeats (a dotted quad the caller checked); nullopt until it has.
Result<void> record_underlay_address(store::Tx& tx, const std::string& node_id,
                                     const std::string& address);
Result<std::optional<std::string>> underlay_address(store::Tx& tx, const std::string& node_id);
// A utilization sample an agent reports with its heartbeat. Utilization and memory used go into
// the series usage is metered from (gpu_samples); every field, the telemetry included, replaces
// the GPU's (or instance's) latest reading (gpu_telemetry), which /metrics serves. Telemetry is
// -1 where the node's driver cannot read it; the DCGM exporter field it matches is in brackets.
struct Sample {
  std::string gpu_uuid;
  std::string instance;  // "" for the whole GPU, "<profile>@<start>" for a MIG instance
  int64_t time_us = 0;
  int util_pct = -1;             // [DCGM_FI_DEV_GPU_UTIL]
  int64_t mem_used_bytes = 0;    // [DCGM_FI_DEV_FB_USED]
  int64_t mem_total_bytes = -1;  // frame buffer of the GPU or instance
  int64_t power_mw = -1;         // [DCGM_FI_DEV_POWER_USAGE]
  int64_t energy_mj = -1;        // since the driver loaded [DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION]
  int temperature_c = -1;        // [DCGM_FI_DEV_GPU_TEMP]
  int sm_clock_mhz = -1;         // [DCGM_FI_DEV_SM_CLOCK]
  int64_t ecc_corrected = -1;    // volatile [DCGM_FI_DEV_ECC_SBE_VOL_TOTAL]
  int64_t ecc_uncorrected = -1;  // volatile [DCGM_FI_DEV_ECC_DBE_VOL_TOTAL]
};
Result<std::vector<Sample>> parse_samples(const Json& j, const Env& w);
// Stores samples of the node's own GPUs; returns how many were stored.
Result<int64_t> record_samples(store::Tx& tx, const std::string& node_id,
                               const std::vector<Sample>& samples);
// The latest sample of every present GPU and MIG instance, with the node it was reported by,
// ordered by node, GPU and instance.
struct Telemetry {
  std::string node_id;
  Sample sample;
};
Result<std::vector<Telemetry>> latest_telemetry(store::Tx& tx);
// A GPU's (or MIG instance's) samples in [from_us, to_us), as `buckets` equal spans: each the
// mean utilization and the largest memory used of its samples (spans without samples left out).
struct SeriesPoint {
  int64_t time_us = 0;  // the span's start
  double util_pct = 0;
  int64_t mem_used_bytes = 0;
  int samples = 0;
};
Result<std::vector<SeriesPoint>> sample_series(store::Tx& tx, const std::string& gpu_uuid,
                                               const std::string& instance, int64_t from_us,
                                               int64_t to_us, int buckets);
// A GPU's (or MIG instance's) samples in [from_us, to_us) with a known utilization: how many, and
// the sum of their util_pct (what metering attributes to the intervals that held the device).
struct UtilizationSum {
  int64_t samples = 0, util_sum = 0;
};
Result<UtilizationSum> utilization_sum(store::Tx& tx, const std::string& gpu_uuid,
                                       const std::string& instance, int64_t from_us, int64_t to_us);
// Marks nodes whose last heartbeat is older than `timeout` as failed; returns them.
Result<std::vector<Node>> sweep_missed_heartbeats(store::Tx& tx, const Env& w, Duration timeout);

// ---- nodes ----
Result<std::optional<Node>> find_node(store::Tx& tx, std::string_view id_or_name);
Result<Page<Node>> list_nodes(store::Tx& tx, const PageRequest& page,
                              const std::optional<NodeState>& state);
// Every node's name by its id, in one query.
Result<std::unordered_map<std::string, std::string>> node_names(store::Tx& tx);
// `drain_deadline` (kDrain only): when what still runs there is evicted.
Result<Node> apply_action(store::Tx& tx, const Env& w, const std::string& node_id,
                          NodeAction action, const std::string& reason,
                          std::optional<int64_t> drain_deadline = std::nullopt);
// Draining nodes whose deadline has passed (at `now`), by id.
Result<std::vector<Node>> overdue_drains(store::Tx& tx, int64_t now);
// Every draining node, by id.
Result<std::vector<Node>> draining_nodes(store::Tx& tx);
// Whether every node of `node_ids` has sent a heartbeat at or after `since` (an id no node has
// is not waited for), in one query.
Result<bool> all_heard_since(store::Tx& tx, const std::vector<std::string>& node_ids,
                             int64_t since);
Result<Node> set_cordoned(store::Tx& tx, const Env& w, const std::string& node_id, bool cordon);
Result<std::vector<Gpu>> list_gpus(store::Tx& tx, const std::optional<std::string>& node_id);
// The GPU with this UUID, present or not (nullopt: none).
Result<std::optional<Gpu>> find_gpu(store::Tx& tx, const std::string& uuid);
// Every GPU's node by the GPU's UUID, the GPUs no longer present included, in one query.
Result<std::map<std::string, std::string, std::less<>>> gpu_nodes(store::Tx& tx);
// GPUs by model, mode and health, nodes by state, free vs allocated. `held`: the GPUs live
// allocations hold, whole or in part, by UUID (metering::held_gpus, from the open usage
// intervals metering keeps beside every allocation).
Result<Json> summary(store::Tx& tx, const std::set<std::string>& held);

// ---- GPU plans: what the scheduler made of a GPU (docs/lifecycle.md) ----
// Placing work may change a GPU's mode or MIG layout. alloc decides; the plan is kept here, with
// the GPU it changes, until the GPU's node has carried it out: the agent receives it with its
// assignment, makes the GPU match through NVML, and reports on it ("planned" until then, then
// "applied", "waiting" for a drain or a GPU reset, or "failed", with NVML's reason).
struct GpuPlan {
  std::string gpu;         // UUID
  std::string mode;        // planned
  std::string mig_layout;  // planned, the JSON text stored: [{profile, start}]
  std::string status, detail;
  bool met = false;  // the GPU's reported mode and layout match the plan (in any order)
};
// Plans the GPU (a new plan replaces the old one, status "planned"), at `now`.
Result<void> plan_gpu(store::Tx& tx, const std::string& uuid, std::string_view mode,
                      const Json& mig_layout, int64_t now);
// The plans of the node's GPUs, by GPU index.
Result<std::vector<GpuPlan>> node_gpu_plans(store::Tx& tx, const std::string& node_id);
// GPU `uuid`'s plan (nullopt: none).
Result<std::optional<GpuPlan>> find_gpu_plan(store::Tx& tx, const std::string& uuid);
// The node's report on the GPU's plan.
Result<void> record_plan_report(store::Tx& tx, const std::string& uuid, const std::string& status,
                                const std::string& detail, int64_t now);
// Drops the GPU's plan: from then on the GPU is as its node reports it.
Result<void> drop_gpu_plan(store::Tx& tx, const std::string& uuid);

// ---- the fleet as the scheduler is rebuilt from it (alloc::Service::rebuild) ----
struct SchedulerNode {
  std::string id, name;
  std::string pool_id, pool_name, pool_tenant_id;  // "" : no pool, or a shared one
  std::string rack, nvlink_domain;
  bool schedulable = false;  // in a state that takes work, and not cordoned
};
// Every node not retired, by name, with its pool.
Result<std::vector<SchedulerNode>> scheduler_nodes(store::Tx& tx);
struct SchedulerGpu {
  std::string uuid, node_id;
  int index = 0;
  std::string model;
  bool mig_capable = false;
  // The mode and MIG layout (JSON text) the GPU was planned in, or, where it has no plan, the
  // ones its node reported.
  std::string mode, mig_layout;
  bool healthy = false;  // healthy and present
};
// Every GPU (of any node), by node and index.
Result<std::vector<SchedulerGpu>> scheduler_gpus(store::Tx& tx);

// ---- downtime (SLA accounting) ----
// A node (gpu_uuid empty) or one GPU out of service: the node failed (until it is ready again
// or retired: maintenance after a failure is still the outage), or the GPU unhealthy or missing.
// Intervals are opened and closed in the transaction of the fleet change that causes them (save of
// a node state, an inventory report), so they survive restarts with it; at most one is open per
// (node, GPU).
struct Downtime {
  std::string id, node_id, gpu_uuid, cause;
  int64_t start_us = 0;
  std::optional<int64_t> end_us;  // open while unset
  Json to_json() const;
};
// Opens an interval at `now` unless one is open for (node, gpu); one closed exactly at `now` is
// reopened (continuous downtime stays one interval).
Result<void> open_downtime(store::Tx& tx, const std::string& node_id, const std::string& gpu_uuid,
                           const std::string& cause, int64_t now);
// Closes the open interval of (node, gpu) at `now`, if any (an empty one is dropped).
Result<void> close_downtime(store::Tx& tx, const std::string& node_id, const std::string& gpu_uuid,
                            int64_t now);
// Intervals overlapping [from_us, to_us) (open ones reach to now), by start, node, GPU.
Result<std::vector<Downtime>> list_downtime(store::Tx& tx, int64_t from_us, int64_t to_us);
// Makes downtime agree with the fleet (at start and at every scheduler rebuild): an open
// interval of a node that is no longer failed (or in maintenance after failing), or of a GPU that
// is healthy, gone or on a retired node, is closed at the last recorded change of that node or GPU
// (clipped to [start, now]); a failed node or unhealthy/missing GPU without an open interval gets
// one from its last recorded change. Returns the number of intervals closed or opened.
Result<int> repair_downtime(store::Tx& tx, int64_t now);

// ---- drawings ----
// One GPU's MIG layout: memory slices with the instances placed on them, and the room left.
std::string mig_layout_svg(const vocab::MigCatalog& catalog, const vocab::Layout& layout,
                           std::string_view title);

// One entry of a mig-parted config: the device indices it applies to and their layout.
using MigPartedDevices = std::pair<std::vector<int>, vocab::Layout>;

// An NVIDIA mig-parted config file (format version v1) with one named config whose entries
// enable MIG on the given devices with each layout's instance counts:
//
//   version: v1
//   mig-configs:
//     <config_name>:
//       - devices: [0, 1]
//         mig-enabled: true
//         mig-devices:
//           "1g.18gb": 2
//
// mig-parted takes counts, not placements; the driver chooses placements when it applies the
// config, so starts in the layouts are not carried. Entries keep their given order; device
// indices are sorted; profiles are sorted by name; an empty layout gives `mig-devices: {}`.
// The config name is written plain when it starts with a letter, is only [A-Za-z0-9._-] and is
// no YAML keyword (true, no, null, ...); else double-quoted. Profile names are always quoted.
std::string to_mig_parted_yaml(const std::string& config_name,
                               const std::vector<MigPartedDevices>& devices);
// Who holds a GPU or a part of it, as the fleet map draws it.
struct GpuHold {
  std::string holder;                        // the tenant's name
  std::optional<vocab::PlacedInstance> mig;  // the MIG instance held, on a MIG GPU
  int milli = 0;  // the share held, on a time-sliced GPU (0: the whole GPU)
};
// Every node as a row of GPUs coloured by health, each GPU showing its holders (`holds` by GPU
// UUID) in one colour per tenant with a legend: a whole GPU as a band, MIG GPUs slice by slice
// (free instances greyed), time-sliced GPUs as their shares.
std::string fleet_map_svg(const std::vector<std::pair<Node, std::vector<Gpu>>>& nodes,
                          const std::map<std::string, std::vector<GpuHold>>& holds);

}  // namespace gp::fleet

namespace gp {

inline constexpr std::array<std::string_view, 2> kPoolKinds = {"shared", "dedicated"};

template <>
struct Fields<fleet::Pool> {
  using P = fleet::Pool;
  static constexpr auto list = std::tuple{
      Field{"id", &P::id},
      Field{"name", &P::name},
      Field{"tenant_id", &P::tenant_id},
      Derived<P>{"kind", [](const P& p) { return std::string(p.kind()); }, kPoolKinds},
      Field{"description", &P::description},
      Field{"created_at", &P::created_at, {}, Form::kTime},
      Field{"version", &P::version},
  };
};

// A MIG instance placed on a GPU, as a GPU shows its layout.
template <>
struct Fields<vocab::PlacedInstance> {
  using P = vocab::PlacedInstance;
  static constexpr auto list = std::tuple{
      Field{"profile", &P::profile},
      Field{"start", &P::start},
  };
};

// A GPU's health as its node's agent last reported it.
template <>
struct Fields<fleet::GpuHealth> {
  using H = fleet::GpuHealth;
  static constexpr auto list = std::tuple{
      Field{"xid_errors", &H::xid_errors},
      Field{"ecc_uncorrected", &H::ecc_uncorrected},
      Field{"diagnostics", &H::diagnostics},
  };
};

// A GPU as shown (common/record.h): what its node's inventory says of it, the agent's last
// health report ("health_report"), and the health the control plane holds it at. Its row is
// read by hand.
template <>
struct Fields<fleet::Gpu> {
  using G = fleet::Gpu;
  static constexpr auto list = std::tuple{
      Derived<G>{"uuid", [](const G& g) { return g.info.uuid; }},
      Derived<G, int64_t>{"index", [](const G& g) { return int64_t{g.info.index}; }},
      Derived<G>{"model", [](const G& g) { return g.info.model; }},
      Derived<G>{"product", [](const G& g) { return g.info.product; }},
      Derived<G, int64_t>{"memory_bytes", [](const G& g) { return g.info.memory_bytes; }},
      Derived<G>{"pci_bus_id", [](const G& g) { return g.info.pci_bus_id; }},
      Derived<G, int64_t>{"numa_node", [](const G& g) { return int64_t{g.info.numa_node}; }},
      Derived<G, StringList>{"nvlink_peers", [](const G& g) { return g.info.nvlink_peers; }},
      Derived<G, bool>{"mig_capable", [](const G& g) { return g.info.mig_capable; }},
      Derived<G, vocab::GpuMode>{"mode", [](const G& g) { return g.info.mode; },
                                 vocab::kGpuModeNames},
      Derived<G, vocab::Layout>{"mig_instances", [](const G& g) { return g.info.mig_instances; }},
      Derived<G, fleet::GpuHealth>{"health_report", [](const G& g) { return g.info.health; }},
      Field{"node_id", &G::node_id},
      Derived<G>{"health", [](const G& g) { return g.health; }, fleet::kGpuHealthNames},
      Field{"health_reason", &G::health_reason},
  };
};

// A GPU's repair: since when, why and by whom.
template <>
struct Fields<fleet::GpuRepair> {
  using R = fleet::GpuRepair;
  static constexpr auto list = std::tuple{
      Field{"since", &R::since, {}, Form::kTime},
      Field{"reason", &R::reason},
      Field{"actor", &R::actor},
  };
};

// A node as shown (common/record.h): what its inventory says of it (name, CPU, memory, rack,
// NVLink domain, labels) shows at the top level. Its row is read with its pool's name and its
// inventory, by hand; a node read with its GPUs adds them ("gpus").
template <>
struct Fields<fleet::Node> {
  using N = fleet::Node;
  static constexpr auto list = std::tuple{
      Field{"id", &N::id},
      Derived<N>{"name", [](const N& n) { return n.info.name; }},
      Field{"pool_id", &N::pool_id},
      Field{"pool", &N::pool_name},
      Field{"state", &N::state, {}, Form::kEnum, fleet::kNodeStateNames},
      Field{"cordoned", &N::cordoned},
      Derived<N, bool>{"schedulable",
                       [](const N& n) { return fleet::schedulable(n.state) && !n.cordoned; }},
      Field{"state_reason", &N::state_reason},
      Derived<N, int64_t>{"cpu_millis", [](const N& n) { return n.info.cpu_millis; }},
      Derived<N, int64_t>{"memory_bytes", [](const N& n) { return n.info.memory_bytes; }},
      Derived<N>{"rack", [](const N& n) { return n.info.rack; }},
      Derived<N>{"nvlink_domain", [](const N& n) { return n.info.nvlink_domain; }},
      Derived<N, StringMap>{"labels", [](const N& n) { return n.info.labels; }},
      Field{"source", &N::source},
      Field{"last_heartbeat", &N::last_heartbeat, {}, Form::kTime},
      Derived<N, std::optional<Json>>{"gpu_runtime",
                                      [](const N& n) -> std::optional<Json> {
                                        if (!n.gpu_runtime) return std::nullopt;
                                        return fleet::to_json(*n.gpu_runtime);
                                      }},
      Field{"drain_deadline", &N::drain_deadline, {}, Form::kTime},
      Field{"created_at", &N::created_at, {}, Form::kTime},
      Field{"updated_at", &N::updated_at, {}, Form::kTime},
      Field{"version", &N::version},
  };
};

// A join token as stored and shown (its id, its token, its pool and its expiry).
template <>
struct Fields<fleet::JoinToken> {
  using J = fleet::JoinToken;
  static constexpr auto list = std::tuple{
      Field{"id", &J::id},
      // Shown once, never stored: a Derived, which store/record_row.h does not read.
      Derived<J>{"token", [](const J& t) { return t.token; }},
      Field{"secret_hash", &J::secret_hash, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"pool_id", &J::pool_id},
      Field{"created_by", &J::created_by, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"created_at", &J::created_at, {}, Form::kTime, {}, Shown::kStoredOnly},
      Field{"expires_at", &J::expires_at, {}, Form::kTime},
  };
};

inline constexpr std::array<std::string_view, 2> kDowntimeScopes = {"node", "gpu"};

// A downtime interval as stored and shown: the whole node's (no GPU) or one GPU's.
template <>
struct Fields<fleet::Downtime> {
  using D = fleet::Downtime;
  static constexpr auto list = std::tuple{
      Field{"id", &D::id},
      Field{"node_id", &D::node_id},
      Field{"gpu_uuid", &D::gpu_uuid, {}, Form::kNullIfEmpty},
      Derived<D>{"scope",
                 [](const D& d) { return std::string(kDowntimeScopes[!d.gpu_uuid.empty()]); },
                 kDowntimeScopes},
      Field{"cause", &D::cause},
      Field{"start", &D::start_us, "start_us", Form::kTime},
      Field{"end", &D::end_us, "end_us", Form::kTime},
  };
};

template <>
struct Fields<fleet::NodeCertificate> {
  using C = fleet::NodeCertificate;
  static constexpr auto list = std::tuple{
      Field{"serial", &C::serial},
      Field{"node_id", &C::node_id},
      Field{"not_before", &C::not_before, {}, Form::kTime},
      Field{"not_after", &C::not_after, {}, Form::kTime},
      Field{"issued_at", &C::issued_at, {}, Form::kTime},
      Field{"revoked_at", &C::revoked_at, {}, Form::kTime},
      Field{"revoke_reason", &C::revoke_reason},
  };
};

}  // namespace gp
