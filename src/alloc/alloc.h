// Allocations: the service catalog (offerings), the quota tree as operators and tenant admins
// set it, and tenants' allocations with their lifecycle, persisted in the store. The live
// scheduler (sched) is a cache of the store: rebuilt from it at start and after fleet changes,
// changed only inside the write transaction that records the change, and rebuilt again if that
// transaction fails. Public header of the alloc module.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "audit/audit.h"
#include "common/env.h"
#include "common/json.h"
#include "common/page.h"
#include "common/record.h"
#include "common/thread_safety.h"
#include "sched/sched.h"
#include "sla/standing.h"
#include "store/store.h"
#include "tenancy/tenancy.h"

namespace gp::alloc {

using sched::Tier;

// ---- offerings: what tenants may ask for ----

struct Offering {
  std::string id, name;
  Tier tier = Tier::kDedicatedGpu;
  std::vector<std::string> models;  // allowed GPU models in preference order; empty = any
  int gpus = 1;             // dedicated-gpu: GPUs per unit; dedicated-node/-pool: GPUs per node
  std::string mig_profile;  // mig
  int milli = 0;            // shared
  std::string description;
  // How a unit reaches the tenant: "container" (the GPUs on the node, for the tenant's
  // workloads) or "vm" (a libvirt VM of vm_vcpus and vm_memory_mib per unit: whole GPUs by VFIO
  // passthrough, MIG and shared units as NVIDIA vGPUs; docs/vms.md).
  std::string delivery = "container";
  int vm_vcpus = 0;
  int64_t vm_memory_mib = 0;
  // Delivery "container": the CPU (millicores) and memory each unit's workload may use on its
  // node; 0 leaves it to the node's share (the node's CPU and memory in proportion to the
  // share of its GPUs the unit holds).
  int64_t unit_cpu_millis = 0, unit_memory_mib = 0;
  int64_t created_at = 0, version = 1;
  Json to_json() const;
  // {vcpus, memory_mib, vgpu_types}; nullopt for delivery container.
  std::optional<Json> vm_json() const;
  // {cpu_millis, memory_mib}; nullopt for delivery vm, or a container left to the node's share.
  std::optional<Json> container_json() const;
};

// Validates a create body: the fields each tier needs and no others.
Result<Offering> parse_offering(const Json& body);
Result<Offering> create_offering(store::Tx& tx, const Env& w, Offering o);
Result<std::optional<Offering>> find_offering(store::Tx& tx, std::string_view id_or_name);
Result<std::vector<Offering>> list_offerings(store::Tx& tx);
// Every offering's name by its id, in one query: what billing prices usage by.
Result<std::map<std::string, std::string, std::less<>>> offering_names(store::Tx& tx);
// Refused while live allocations use it.
Result<void> delete_offering(store::Tx& tx, const std::string& id);

// ---- quota, in scheduler units (1 GPU = 7000) ----

struct ModelQuota {
  int64_t nominal = 0;
  std::optional<int64_t> borrow_limit, limit;
};
struct TenantQuota {
  std::string cohort;  // tenants of a cohort lend one another idle nominal quota
  double weight = 1;   // fair-share weight
  std::map<std::string, ModelQuota> models;
  std::map<std::string, std::map<std::string, int64_t>> profile_caps;  // model -> profile -> n
  int64_t version = 0;                                                 // 0 until first set
};
struct ProjectQuota {
  std::map<std::string, ModelQuota> models;
};

// Bodies in GPU-equivalents ({"models": {"H200": {"nominal": 8, "borrow_limit": 4,
// "limit": 16}}}); values are rounded to the unit (1/7000 GPU).
Result<TenantQuota> parse_tenant_quota(const Json& body);
// The stored quotas (all defaults when none was set).
Result<TenantQuota> load_tenant_quota(store::Tx& tx, const std::string& tenant_id);
Result<ProjectQuota> load_project_quota(store::Tx& tx, const std::string& tenant_id,
                                        const std::string& project_id);
Result<ProjectQuota> parse_project_quota(const Json& body);
Result<std::map<std::string, int64_t>> parse_platform_quota(const Json& body);

// ---- allocations ----

enum class State { kPending, kPlaced, kActive, kReleased, kPreempted, kFailed, kExpired };
// Each state's name, at its value's index.
inline constexpr std::array<std::string_view, 7> kAllocationStateNames = {
    "pending", "placed", "active", "released", "preempted", "failed", "expired"};
std::string_view state_name(State s);
std::optional<State> parse_state(std::string_view s);
inline bool live(State s) {
  return s == State::kPending || s == State::kPlaced || s == State::kActive;
}

// When a placed allocation turns active: once every node it uses has reported in (capacity
// the tenant uses as it likes), or once the workload it was made for runs (a job's containers;
// Service::activate).
enum class Activation { kNode, kWorkload };
inline constexpr std::array<std::string_view, 2> kActivationNames = {"node", "workload"};

// clang-tidy 16 finds a throw inside nlohmann::json's noexcept special members, which this
// struct's implicit ones call.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Allocation {
  std::string id, tenant_id, project_id, name;
  std::optional<std::string> offering_id;
  sched::Request request;
  State state = State::kPending;
  std::string reason_code, reason;
  Json placement;  // null until placed
  int64_t borrowed_units = 0;
  std::optional<int64_t> end_at, grace_until, placed_at, ended_at;
  std::string created_by;
  int64_t created_at = 0, updated_at = 0, version = 1;
  Activation activation = Activation::kNode;
  Json to_json() const;
  Json shape_json() const;  // to_json()'s "shape" alone
  // The request's priority by its class's name ("normal"), or its number where no class has it.
  std::string priority_class() const;
  // The GPU equivalents borrowed from the cohort ("1.5"); nullopt when none.
  std::optional<std::string> borrowed_gpu_equivalents() const;
};

struct Event {
  int64_t seq = 0, at = 0;
  std::string from, to, reason_code, reason;
  Json to_json() const;
};

// What a create request asks for, resolved against the tenant, project and offering.
struct NewAllocation {
  std::string name;
  std::optional<std::string> offering_id;
  sched::Request request;
  std::optional<int64_t> end_at;
  Activation activation = Activation::kNode;
  // Its place in the queue (created_at): by default now; a job placed again after its node was
  // lost or drained keeps its first submission's, ahead of what was submitted after it.
  std::optional<int64_t> queued_since;
};
Result<NewAllocation> parse_allocation(store::Tx& tx, const Env& w, const Json& body,
                                       const tenancy::Tenant& tenant,
                                       const tenancy::Project& project);

Result<std::optional<Allocation>> find_allocation(store::Tx& tx, const tenancy::TenantScope& scope,
                                                  std::string_view id);
struct AllocationFilter {
  std::optional<std::string> tenant_id;  // list_all_allocations only: a scope names its tenant
  std::optional<std::string> project_id;
  std::optional<std::string> node_id;  // the live allocations on this node, and its stops
  std::optional<State> state;
};
// The scope's tenant's allocations.
Result<Page<Allocation>> list_allocations(store::Tx& tx, const tenancy::TenantScope& scope,
                                          const AllocationFilter& filter, const PageRequest& page);
// The live allocations on a node, each as [id, state], in id order: what a node's assignment
// digest covers (the agent waits for it to change).
Result<Json> node_allocation_states(store::Tx& tx, const std::string& node_id);
// The placement of every placed or active allocation, by tenant id, in allocation id order: what
// the fleet holds for tenants now (the Kubernetes pod reconciliation compares it with the pods).
struct LivePlacement {
  std::string tenant_id, project_id, allocation_id;
  Json placement;
};
Result<std::vector<LivePlacement>> live_placements(store::Tx& tx);
// Live allocations (pending, placed, active) counted by tenant, state and tier, with the
// creation time of the oldest of each group (a pending group's longest wait).
struct LiveCount {
  std::string tenant_id;
  State state = State::kPending;
  std::string tier;
  int64_t count = 0, oldest_created_at = 0;
};
Result<std::vector<LiveCount>> count_live_allocations(store::Tx& tx);
// Every allocation ever made, by state name.
Result<std::map<std::string, int64_t>> count_allocations_by_state(store::Tx& tx);
// Every tenant's allocations (operators).
Result<Page<Allocation>> list_all_allocations(store::Tx& tx, const AllocationFilter& filter,
                                              const PageRequest& page);
Result<std::vector<Event>> list_events(store::Tx& tx, const std::string& allocation_id);
// The tenant's allocations without a single event, by id. Each allocation records one as it is
// created: one without is a lost write, which the posture report names.
Result<std::vector<std::string>> allocations_without_events(store::Tx& tx,
                                                            const std::string& tenant_id);
// How allocation `id` failed (its reason code, asked and actual end), or nullopt when it did not
// fail or has no end time: what sla::standing needs to keep one its node's failure ended
// entitled while the node is down.
Result<std::optional<sla::Failure>> find_failure(store::Tx& tx, const std::string& id);
// The nodes an allocation holds (none before it is placed).
Result<std::vector<std::string>> allocation_node_ids(store::Tx& tx,
                                                     const std::string& allocation_id);
// Where a live allocation of the tenant shares a node with a live allocation of another tenant:
// one row per (node, the tenant's allocation, the other tenant), in node id and allocation order.
struct NodeNeighbour {
  std::string node_id, allocation_id, other_tenant_id;
};
Result<std::vector<NodeNeighbour>> node_neighbours(store::Tx& tx, const std::string& tenant_id);

// The records of this module that name a project: its allocations (any state; the live ones
// counted apart) and its reservations. They stay as the project's billing and audit history,
// so a project any of them names cannot be deleted.
struct ProjectReferences {
  int64_t allocations = 0, live_allocations = 0, reservations = 0;
  bool any() const { return allocations > 0 || reservations > 0; }
};
Result<ProjectReferences> project_references(store::Tx& tx, const tenancy::TenantScope& scope,
                                             const std::string& project_id);

// ---- reservations: capacity of a shape held for a tenant during a window ----

enum class ReservationState { kScheduled, kActive, kUsed, kEnded, kCancelled };
inline constexpr std::array<std::string_view, 5> kReservationStateNames = {
    "scheduled", "active", "used", "ended", "cancelled"};
std::string_view reservation_state_name(ReservationState s);

struct Reservation {
  std::string id, tenant_id, project_id;
  std::optional<std::string> offering_id;
  sched::Request request;
  int64_t start_at = 0, end_at = 0;
  ReservationState state = ReservationState::kScheduled;
  std::string reason;
  std::string created_by;
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json shape_json() const;  // the request's shape, as an allocation shows it
  Json to_json() const;
};

// A create body: the allocation fields (offering or shape, constraints, end_time or
// duration_seconds: the window's end) plus "project" and "start_time" (default now).
struct NewReservation {
  NewAllocation shape;
  int64_t start_at = 0;
};
Result<NewReservation> parse_reservation(store::Tx& tx, const Env& w, const Json& body,
                                         const tenancy::Tenant& tenant,
                                         const tenancy::TenantScope& scope);
Result<Page<Reservation>> list_reservations(store::Tx& tx, const tenancy::TenantScope& scope,
                                            const PageRequest& page);
Result<std::optional<Reservation>> find_reservation(store::Tx& tx,
                                                    const tenancy::TenantScope& scope,
                                                    std::string_view id);

// ---- VMs: allocations of vm offerings (docs/vms.md) ----

// One VM per node an allocation of a vm offering uses. The control plane keeps what the tenant
// asked of it (desired power state, reboot count); the node's agent defines, starts, reboots and
// destroys the libvirt domain and reports back its state and addresses.
struct Vm {
  std::string id, allocation_id, node_id, tenant_id, project_id;
  std::string domain;  // libvirt domain name on the node: "gp-<allocation id>"
  std::string uuid, mac;
  std::string desired = "running";  // "running" | "stopped"
  int64_t reboot_seq = 0;           // the agent reboots the guest each time it grows
  // "pending" until the agent has reported; then what it reported (a libvirt domain state,
  // "absent", or "failed" with `error`); "destroyed" once the allocation ended and the node
  // no longer holds it.
  std::string state = "pending";
  std::vector<std::string> addresses;
  std::string error;
  // The serial console: requests to read it (console_seq) and the agent's latest answer, the
  // console's last bytes (at most kMaxConsoleBytes) as of console_captured_at.
  int64_t console_seq = 0, console_captured_seq = 0;
  std::optional<int64_t> console_captured_at;
  std::string console_text;
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const;  // without the console's text
  // {vm, domain, state, requested_seq, captured_seq, captured_at, current, text}: `current`
  // once the capture answers the latest request.
  Json console_json() const;
};
// The most of a VM's serial console an agent sends and the control plane keeps: its tail.
inline constexpr size_t kMaxConsoleBytes = 16 * 1024;

Result<Page<Vm>> list_vms(store::Tx& tx, const tenancy::TenantScope& scope,
                          const PageRequest& page);
Result<std::optional<Vm>> find_vm(store::Tx& tx, const tenancy::TenantScope& scope,
                                  std::string_view id);
// "start", "stop" or "reboot". Refused (conflict) once the VM's allocation has ended, and a
// reboot of a VM that is stopped; starting a running VM is accepted and changes nothing.
Result<Vm> vm_action(store::Tx& tx, const Env& w, const tenancy::TenantScope& scope,
                     std::string_view id, std::string_view action);

// Asks the VM's agent for a fresh capture of the serial console (its next heartbeat answers);
// the VM returned still holds the previous capture. Refused (conflict) like vm_action once the
// allocation has ended.
Result<Vm> vm_console_request(store::Tx& tx, const Env& w, const tenancy::TenantScope& scope,
                              std::string_view id);

// What the node's agent needs to deliver `a` on `node_id` as a VM (the "vm" member of its
// assignment), creating the VM's record the first time; null when `a` is not delivered as a VM.
// `stopping`: `a` has ended and its VM there is to stop ("desired": "stopped"); null when it
// never had one.
Result<Json> vm_assignment(store::Tx& tx, const Env& w, const Allocation& a,
                           const std::string& node_id, bool stopping = false);

// The agent's report of the VMs assigned to it (heartbeat "vms"): [{"domain", "state",
// "addresses", "error", "console"?}]. Checked strictly; unknown domains are ignored. "console"
// ({"seq", "text"}) answers the console request `seq` the assignment carried.
struct VmReport {
  std::string domain, state, error;
  std::vector<std::string> addresses;
  struct Console {
    int64_t seq = 0;
    std::string text;
  };
  std::optional<Console> console;
};
Result<std::vector<VmReport>> parse_vm_reports(const Json& j);
// Records the reports; VMs of this node whose allocation has ended and that the report no longer
// lists are destroyed. Returns the state changes, for the audit trail.
Result<Json> apply_vm_reports(store::Tx& tx, const Env& w, const std::string& node_id,
                              const std::vector<VmReport>& reports);

// The tenant's SSH public keys, written into every VM's cloud-init data (one OpenSSH public key
// line each, at most 32).
Result<std::vector<std::string>> parse_ssh_keys(const Json& body);
Result<std::vector<std::string>> tenant_ssh_keys(store::Tx& tx, const std::string& tenant_id);
Result<void> set_tenant_ssh_keys(store::Tx& tx, const std::string& tenant_id,
                                 const std::vector<std::string>& keys);

// ---- stops: an ended allocation's work still on its nodes (docs/lifecycle.md) ----
// An allocation that ends while placed or active (preempted, expired, released, its tenant
// suspended or offboarded, a budget's hard stop, one of its other nodes failed) leaves a stop on
// each of its nodes whose agent has reported in. The agent stops the allocation's work there
// the same way whatever the cause: SIGTERM (an ACPI shutdown for a VM) at once, SIGKILL
// (destroy) once grace_seconds have passed. The stop ends when the agent reports it holds
// nothing of the allocation any more (a heartbeat's "holding"), or when the node fails. Until
// then its GPUs do not pass on: nothing of a live allocation that shares one of them starts on
// that node, and a draining node is not empty.
struct Stop {
  std::string allocation_id, node_id;
  int64_t since = 0, stop_by = 0, grace_seconds = 0;
  Json to_json() const { return json_of_fields(*this); }
};
Result<std::vector<Stop>> node_stops(store::Tx& tx, const std::string& node_id);
Result<std::vector<Stop>> allocation_stops(store::Tx& tx, const std::string& allocation_id);
// The placed (not yet active) allocations on the node that wait for a stop there: each with the
// stopping allocations that still hold one of its GPUs (a whole GPU, a shared one, or the same MIG
// instance).
Result<std::map<std::string, std::vector<std::string>>> node_waits(store::Tx& tx,
                                                                   const std::string& node_id);
// The node's agent holds the work of `holding` and nothing else: the node's other stops end
// (its next assignment no longer lists them, and what waited on them may start). Returns the
// stops ended, [{allocation, tenant_id, held_seconds, overdue}], for the audit trail.
Result<Json> end_stops(store::Tx& tx, const Env& w, const std::string& node_id,
                       const std::vector<std::string>& holding);

// ---- GPU plans: what the scheduler made of a GPU, carried out by its node (docs/lifecycle.md) --
// Placing work may change a GPU's mode or MIG layout; the plan is in the node's assignment
// (`gpu_plans`) and its agent makes the GPU match it through NVML. A placed allocation on a GPU
// whose reported mode or layout does not match its plan yet is *configuring*: nothing of it
// starts (its members are held, its VM is not made, it is not activated) until it matches.
// The agent's report on each plan (the heartbeat's `mig`): "applied", "waiting" (for a drain or
// a GPU reset) or "failed", with NVML's reason.
struct MigReport {
  std::string gpu, status, detail;
  std::vector<std::string> done;
};
// Strict: each report needs a string `gpu` and a status of applied, waiting or failed.
Result<std::vector<MigReport>> parse_mig_reports(const Json& j);
// One plan its node has not carried out yet.
struct UnmetPlan {
  std::string gpu, mode, status, detail;
  Json mig_layout;
  Json to_json() const;
};
// The node's unmet plans, by GPU UUID.
Result<std::map<std::string, UnmetPlan>> unmet_plans(store::Tx& tx, const std::string& node_id);
// The placed allocations on the node waiting for one of those plans: each with its GPUs.
Result<std::map<std::string, std::vector<std::string>>> node_configuring(
    store::Tx& tx, const std::string& node_id);
// What `a` waits for, if it is placed: the unmet plans of its GPUs, on every node of it.
Result<Json> allocation_configuring(store::Tx& tx, const Allocation& a);

struct Options {
  sched::SchedulerOptions scheduler;
  // How long the work of an allocation has to stop once it ends: preempted or reclaimed (and
  // evicted by a drain's deadline), its budget's hard stop, and anything else (its end time, a
  // release, its tenant suspended or offboarded, another of its nodes failed).
  Duration preemption_grace = std::chrono::seconds(30);
  Duration budget_stop_grace = std::chrono::seconds(60);
  Duration stop_grace = std::chrono::seconds(30);
};

// The live scheduler over the store. Every call runs inside the caller's transaction; calls
// that change anything need the write transaction (the store serializes writers, and the
// service's own lock orders them against readers of its views).
class Service {
 public:
  Service(audit::AuditLog& audit, const Clock& clock, Options options = {});

  // Validates, checks the tier against the tenant's class, and places the allocation or queues
  // it with the reason. Preempted allocations are recorded and audited here.
  Result<Allocation> create(store::Tx& tx, const Env& w, const NewAllocation& n,
                            const std::string& actor);
  // Whether and where it would be placed now; changes nothing.
  Result<Json> dry_run(store::Tx& tx, const NewAllocation& n);
  // Releases a placed or active allocation, withdraws a pending one; then places what now fits.
  Result<Allocation> release(store::Tx& tx, const Env& w, const tenancy::TenantScope& scope,
                             const std::string& id, const std::string& reason);
  // A placed allocation of Activation::kWorkload turns active: its workload runs. Nothing to do
  // when it is active already; failed_precondition in any other state.
  Result<void> activate(store::Tx& tx, const Env& w, const std::string& id,
                        const std::string& reason);
  // Periodic work: expires allocations past their end time, fails those a fleet change left
  // without their GPUs, places pending ones that now fit, completes drains. Returns the
  // transitions made.
  Result<int> tick(store::Tx& tx, const Env& w);
  // A node's agent reported in: its placed allocations become active once every node they use
  // has reported since placement. Returns what the agent must apply: allocations on the node
  // and planned MIG layouts / modes of its GPUs.
  Result<Json> acknowledge(store::Tx& tx, const Env& w, const std::string& node_id);
  // Records the node's reports on its GPU plans. A failed one fails the placed allocations
  // waiting for that GPU (`mig_config_failed`, with the node's reason) and drops the plan: the
  // scheduler sees the GPU as its node reports it again. Returns what changed, for the audit
  // trail ([] when nothing did). Errors: invalid_argument for a GPU not on this node.
  Result<Json> record_mig_reports(store::Tx& tx, const Env& w, const std::string& node_id,
                                  const std::vector<MigReport>& reports);
  // Offboarding: every live allocation of the tenant is released and its reservations are
  // cancelled; what waited behind them is placed. Returns the allocations released.
  Result<int> offboard(store::Tx& tx, const Env& w, const std::string& tenant_id);
  // Every live allocation of the tenant (of one of its projects, when `project_id` is set) is
  // released with `code` and `reason` ("tenant_suspended", "budget_exhausted"): queued ones are
  // withdrawn, and the work of placed ones stops within the grace for `code` (stops). What
  // waited behind them is placed. Returns the allocations ended.
  Result<int> end_work(store::Tx& tx, const Env& w, const std::string& tenant_id,
                       const std::optional<std::string>& project_id, const std::string& code,
                       const std::string& reason);
  // Draining nodes that nothing is left on go to maintenance (ready -> draining -> maintenance),
  // keeping the operator's reason: at once after a drain, and from tick() once the last
  // allocation has left. Returns the nodes whose drain completed.
  Result<int> complete_drains(store::Tx& tx, const Env& w);
  // A node failed: its allocations fail and are released.
  Result<int> node_failed(store::Tx& tx, const Env& w, const std::string& node_id,
                          const std::string& reason);
  // The fleet or the quota changed: rebuild from the store before the next decision.
  void invalidate();
  // Calls made since the last begin() changed the in-memory scheduler; after a failed
  // transaction the caller must invalidate().
  void begin() GP_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    changed_ = false;
  }
  bool changed() GP_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return changed_;
  }

  // Holds the shape for the tenant during the window (placed at its start; placed at once
  // when the window has begun). Rejects what could never be held.
  Result<Reservation> reserve(store::Tx& tx, const Env& w, const NewReservation& n,
                              const std::string& actor);
  Result<Reservation> cancel_reservation(store::Tx& tx, const Env& w,
                                         const tenancy::TenantScope& scope, const std::string& id);

  // Views. A tenant's view holds its own position and figures only, nothing counted from other
  // tenants' allocations: queue positions and lengths count the tenant's own waiting
  // allocations, and the platform's use is left out. The operators' view counts the whole
  // queue and shows the platform's use.
  enum class Audience { kTenant, kOperator };
  Result<Json> why(store::Tx& tx, const Env& w, const Allocation& a, Audience audience);
  // Pending allocations in queue order; one tenant's, or all (tenant_id empty: operators only).
  Result<Json> queue(store::Tx& tx, const Env& w, const std::string& tenant_id, Audience audience);
  // Quota documents with current use.
  Result<Json> tenant_quota(store::Tx& tx, const std::string& tenant_id);
  Result<Json> project_quota(store::Tx& tx, const std::string& tenant_id,
                             const std::string& project_id);
  Result<Json> platform_quota(store::Tx& tx);
  // Every tenant's use of each model against its quota, in units.
  Result<std::vector<sched::QuotaTree::TenantModelUsage>> quota_usages(store::Tx& tx);
  Result<void> set_tenant_quota(store::Tx& tx, const std::string& tenant_id, const TenantQuota& q);
  Result<void> set_project_quota(store::Tx& tx, const std::string& tenant_id,
                                 const std::string& project_id, const ProjectQuota& q);
  Result<void> set_platform_quota(store::Tx& tx, const std::map<std::string, int64_t>& limits);

 private:
  Result<sched::Scheduler*> ensure(store::Tx& tx) GP_REQUIRES(mu_);
  Result<void> rebuild(store::Tx& tx) GP_REQUIRES(mu_);
  // What a placement decision makes of its allocation's row.
  struct Placed {
    Json placement;      // placement_json
    std::string reason;  // "placed 2 H200 GPUs on gpu-a", and any reservation or borrowing
  };
  Placed placed_of(const sched::Decision& d) const GP_REQUIRES(mu_);
  // Records a placement decision for a pending allocation; returns the allocation as it now
  // stands (as a load reads it).
  Result<Allocation> record_placed(store::Tx& tx, const Env& w, const std::string& id,
                                   const sched::Decision& d, const std::string& from)
      GP_REQUIRES(mu_);
  // What follows a placement of `a` (as placed): its node links, the plans of the GPUs whose
  // mode or layout it changed, and the preemption of those that made room.
  Result<void> record_placement(store::Tx& tx, const Env& w, const Allocation& a,
                                const sched::Decision& d) GP_REQUIRES(mu_);
  // What `a` entering `to` tells the others in its transaction: its nodes' agents, and its
  // usage intervals. `first`: `a` was inserted in this transaction, in state `to`.
  Result<void> entered(store::Tx& tx, const Allocation& a, State to, int64_t now, bool first);
  // Moves `a` (as loaded) to `to`, recording the event, and leaves `a` as its row now reads;
  // the scheduler's own moves are audited.
  Result<void> transition(store::Tx& tx, const Env& w, Allocation& a, State to,
                          const std::string& code, const std::string& reason,
                          const std::string& actor);
  Result<int> schedule(store::Tx& tx, const Env& w) GP_REQUIRES(mu_);
  Result<void> record_preempted(store::Tx& tx, const Env& w,
                                const std::vector<std::string>& victims, const std::string& by,
                                const std::string& by_tenant) GP_REQUIRES(mu_);
  // Brings stored reservation states in line with the scheduler's.
  Result<void> sync_reservations(store::Tx& tx, const Env& w) GP_REQUIRES(mu_);
  Result<int> end(store::Tx& tx, const Env& w, const std::string& id, State to,
                  const std::string& code, const std::string& reason, const std::string& actor)
      GP_REQUIRES(mu_);
  // end_work without placing what now fits.
  Result<int> end_all(store::Tx& tx, const Env& w, const std::string& tenant_id,
                      const std::optional<std::string>& project_id, const std::string& code,
                      const std::string& reason) GP_REQUIRES(mu_);

  audit::AuditLog& audit_;
  const Clock& clock_;
  Options options_;
  Mutex mu_;
  std::optional<sched::Scheduler> sched_ GP_GUARDED_BY(mu_);
  bool dirty_ GP_GUARDED_BY(mu_) = true;
  bool changed_ GP_GUARDED_BY(mu_) = false;
  // (id, why) lost in a rebuild
  std::vector<std::pair<std::string, std::string>> orphans_ GP_GUARDED_BY(mu_);
  std::map<std::string, double> carried_weights_ GP_GUARDED_BY(mu_);
};

}  // namespace gp::alloc

namespace gp {

inline constexpr std::array<std::string_view, 2> kDeliveries = {"container", "vm"};

// An offering as stored and shown (common/record.h): a VM's or a container's shape per unit is
// stored as columns and shown as one object ("vm", "container").
template <>
struct Fields<alloc::Offering> {
  using O = alloc::Offering;
  static constexpr auto list = std::tuple{
      Field{"id", &O::id},
      Field{"name", &O::name},
      Field{"tier", &O::tier, {}, Form::kEnum, vocab::kTierNames},
      Field{"models", &O::models},
      Field{"gpus", &O::gpus},
      Field{"mig_profile", &O::mig_profile, {}, Form::kNullIfEmpty},
      Field{"milli", &O::milli, {}, Form::kNullIfEmpty},
      Field{"description", &O::description},
      Field{"delivery", &O::delivery, {}, Form::kEnum, kDeliveries},
      Derived<O, std::optional<Json>>{"vm", [](const O& o) { return o.vm_json(); }},
      Derived<O, std::optional<Json>>{"container", [](const O& o) { return o.container_json(); }},
      Field{"vm_vcpus", &O::vm_vcpus, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"vm_memory_mib", &O::vm_memory_mib, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"unit_cpu_millis", &O::unit_cpu_millis, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"unit_memory_mib", &O::unit_memory_mib, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"created_at", &O::created_at, {}, Form::kTime},
      Field{"version", &O::version},
  };
};

// A reservation as shown (common/record.h); its row keeps the shape as the request's JSON.
template <>
struct Fields<alloc::Reservation> {
  using R = alloc::Reservation;
  static constexpr auto list = std::tuple{
      Field{"id", &R::id},
      Field{"tenant_id", &R::tenant_id},
      Field{"project_id", &R::project_id},
      Field{"offering_id", &R::offering_id},
      Derived<R, Json>{"shape", [](const R& r) { return r.shape_json(); }},
      Field{"start_time", &R::start_at, "start_at", Form::kTime},
      Field{"end_time", &R::end_at, "end_at", Form::kTime},
      Field{"state", &R::state, {}, Form::kEnum, alloc::kReservationStateNames},
      Field{"reason", &R::reason},
      Field{"created_by", &R::created_by},
      Field{"created_at", &R::created_at, {}, Form::kTime},
      Field{"updated_at", &R::updated_at, {}, Form::kTime},
      Field{"version", &R::version},
  };
};

// An allocation as stored and shown (common/record.h). Its request is stored as its JSON (with
// its priority and preemption as columns of their own) and shown as its shape, priority class,
// priority and preemption; the cohort's units it borrowed show as GPU equivalents.
template <>
struct Fields<alloc::Allocation> {
  using A = alloc::Allocation;
  static constexpr auto list = std::tuple{
      Field{"id", &A::id},
      Field{"tenant_id", &A::tenant_id},
      Field{"project_id", &A::project_id},
      Field{"name", &A::name},
      Field{"offering_id", &A::offering_id},
      Derived<A, Json>{"shape", [](const A& a) { return a.shape_json(); }},
      Derived<A>{"priority_class", [](const A& a) { return a.priority_class(); }},
      Derived<A, int64_t>{"priority", [](const A& a) { return int64_t{a.request.priority}; }},
      Derived<A, bool>{"preemptible", [](const A& a) { return a.request.preemptible; }},
      Field{"state", &A::state, {}, Form::kEnum, alloc::kAllocationStateNames},
      Field{"reason_code", &A::reason_code},
      Field{"reason", &A::reason},
      Field{"placement", &A::placement, {}, Form::kNullIfEmpty},
      Field{"borrowed_units", &A::borrowed_units, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Derived<A, std::optional<std::string>>{
          "borrowed_gpu_equivalents", [](const A& a) { return a.borrowed_gpu_equivalents(); }},
      Field{"end_time", &A::end_at, "end_at", Form::kTime},
      Field{"grace_until", &A::grace_until, {}, Form::kTime},
      Field{"created_by", &A::created_by},
      Field{"created_at", &A::created_at, {}, Form::kTime},
      Field{"placed_at", &A::placed_at, {}, Form::kTime},
      Field{"ended_at", &A::ended_at, {}, Form::kTime},
      Field{"updated_at", &A::updated_at, {}, Form::kTime},
      Field{"version", &A::version},
      Field{"activation", &A::activation, {}, Form::kEnum, alloc::kActivationNames},
  };
};

inline constexpr std::array<std::string_view, 2> kVmPowerStates = {"running", "stopped"};

// A stop as stored and shown: since when the node's agent has been stopping the allocation's
// work, and by when it kills what is left.
template <>
struct Fields<alloc::Stop> {
  using S = alloc::Stop;
  static constexpr auto list = std::tuple{
      Field{"allocation_id", &S::allocation_id},  Field{"node_id", &S::node_id},
      Field{"since", &S::since, {}, Form::kTime}, Field{"stop_by", &S::stop_by, {}, Form::kTime},
      Field{"grace_seconds", &S::grace_seconds},
  };
};

// A VM as stored and shown (common/record.h). Its serial console's capture is stored with it and
// shown apart (Vm::console_json).
template <>
struct Fields<alloc::Vm> {
  using V = alloc::Vm;
  static constexpr auto list = std::tuple{
      Field{"id", &V::id},
      Field{"allocation_id", &V::allocation_id},
      Field{"node_id", &V::node_id},
      Field{"tenant_id", &V::tenant_id},
      Field{"project_id", &V::project_id},
      Field{"domain", &V::domain},
      Field{"uuid", &V::uuid},
      Field{"mac", &V::mac},
      Field{"desired", &V::desired, {}, Form::kEnum, kVmPowerStates},
      Field{"reboot_seq", &V::reboot_seq},
      Field{"state", &V::state},
      Field{"addresses", &V::addresses},
      Field{"error", &V::error, {}, Form::kNullIfEmpty},
      Field{"console_seq", &V::console_seq},
      Field{"console_captured_seq",
            &V::console_captured_seq,
            {},
            Form::kPlain,
            {},
            Shown::kStoredOnly},
      Field{
          "console_captured_at", &V::console_captured_at, {}, Form::kTime, {}, Shown::kStoredOnly},
      Field{"console_text", &V::console_text, {}, Form::kPlain, {}, Shown::kStoredOnly},
      Field{"created_at", &V::created_at, {}, Form::kTime},
      Field{"updated_at", &V::updated_at, {}, Form::kTime},
      Field{"version", &V::version},
  };
};

}  // namespace gp
