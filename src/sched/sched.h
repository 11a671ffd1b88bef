// Scheduler: the pure core that decides where tenants' GPU requests go. Plain structs in,
// decisions out; no I/O and no clock reads (time is a parameter), and the same inputs always
// give the same placements. Holds the isolation-tier invariant of DESIGN.md as a hard rule,
// keeps quota in exact integer units and queues what cannot run yet with the reason.
// Public header of the sched module.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "sched/internal.h"
#include "vocab/vocab.h"

namespace gp::sched {

// ---- the vocabulary (vocab/vocab.h): tiers, classes, GPU modes, units ----
// Named here without their namespace: the scheduler's types and messages are written in them.
using vocab::class_allows;
using vocab::class_name;
using vocab::format_units;
using vocab::gpu_mode_name;
using vocab::gpu_resource_key;
using vocab::gpu_units;
using vocab::GpuMode;
using vocab::IsolationClass;
using vocab::kUnitsPerGpu;
using vocab::mig_resource_key;
using vocab::mig_units;
using vocab::milli_resource_key;
using vocab::parse_class;
using vocab::parse_tier;
using vocab::shared_units;
using vocab::Tier;
using vocab::tier_name;
using vocab::weakest_tier;

// ---- the fleet as the scheduler sees it ----

struct GpuSpec {
  std::string uuid;
  int index = 0;
  std::string model;  // canonical short model, e.g. "H200"
  GpuMode mode = GpuMode::kWhole;
  const vocab::MigCatalog* mig_catalog = nullptr;  // required for MIG-capable GPUs
  vocab::Layout mig_layout;  // existing instances (all free) when mode == kMig
  bool healthy = true;
};

struct NodeSpec {
  std::string id, name;
  std::string pool_id, pool_name;
  std::string pool_owner;  // tenant owning the pool; empty for shared capacity
  bool schedulable = true;
  std::string rack, nvlink_domain;
  std::vector<GpuSpec> gpus;
  // Node resources beside the GPUs; 0 = not tracked (requests never wait for it).
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
};

// What any request could ever get from this fleet; used by validate().
struct FleetLimits {
  struct Model {
    int max_gpus_per_node = 0;
    int64_t total_gpus = 0;
    int64_t nodes = 0;
    const vocab::MigCatalog* mig_catalog = nullptr;  // when some GPU of the model has one
  };
  std::map<std::string, Model> models;
  int64_t nodes = 0;
};

// ---- requests ----

struct Request {
  std::string tenant, project;
  IsolationClass isolation = IsolationClass::kStandard;
  Tier tier = Tier::kDedicatedGpu;
  std::vector<std::string> models;  // allowed GPU models, in preference order; empty = any
  int count = 1;                    // whole GPUs (dedicated-gpu), instances (mig), shares (shared)
  int node_count = 0;               // dedicated-node / dedicated-pool
  int gpus_per_node = 0;            // dedicated-node / dedicated-pool
  std::string pool;         // dedicated-pool: one pool (id or name) of the tenant; empty = any
  std::string mig_profile;  // mig, e.g. "3g.71gb"
  int milli = 0;            // shared: 1..1000 per share
  bool same_node = false;
  bool same_nvlink_domain = false;
  bool gang = true;  // all-or-nothing over the count (every request is placed atomically)
  int priority = 0;
  bool preemptible = false;
  // When it will be released, if known: lets it backfill ahead of a blocked larger request, and
  // use capacity reserved for a later window.
  std::optional<TimePoint> end;
  // Node resources the request takes on the one node that hosts it (a request asking for any
  // is placed on a single node). A dedicated-gpu request with count 0 and some CPU or memory
  // is CPU-only: it takes no GPU, only room on a node.
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;

  bool cpu_only() const {
    return count == 0 && tier == Tier::kDedicatedGpu && (cpu_milli > 0 || memory_mib > 0);
  }
  bool needs_node_resources() const { return cpu_milli > 0 || memory_mib > 0; }
};

// Rejects shapes no GPU of the fleet could ever satisfy, at once (invalid_argument).
Result<void> validate(const Request& request, const FleetLimits& limits);

// Units a request takes when placed on `model` (which must suit it).
int64_t request_units(const Request& request, const FleetLimits::Model& model);

// ---- placements ----

struct GpuGrant {
  int32_t gpu = -1;  // index into ClusterState::gpus()
  std::string node_id, gpu_uuid;
  std::optional<vocab::PlacedInstance> mig_instance;  // tier mig
  int milli = 0;                                      // tier shared
};

struct ModeChange {
  int32_t gpu = -1;
  std::string gpu_uuid;
  GpuMode from = GpuMode::kWhole, to = GpuMode::kWhole;
};

struct MigLayoutChange {
  int32_t gpu = -1;
  std::string gpu_uuid;
  vocab::Layout before, after;  // after holds every instance the GPU must then have
};

struct Placement {
  std::string tenant, project;
  Tier tier = Tier::kDedicatedGpu;
  std::string model;
  std::string mig_profile;
  int64_t units = 0;
  int priority = 0;
  bool preemptible = false;
  std::vector<std::string> nodes;   // nodes held whole (dedicated-node / dedicated-pool)
  std::vector<int32_t> node_slots;  // the same, as indexes into ClusterState::nodes()
  std::vector<GpuGrant> gpus;
  std::vector<ModeChange> mode_changes;
  std::vector<MigLayoutChange> mig_changes;
  // The node charged with cpu_milli / memory_mib (-1 when the request asks for none).
  int32_t host = -1;
  std::string host_node;
  int64_t cpu_milli = 0, memory_mib = 0;
  // The models the request allowed, as a mask over ClusterState::models() (0 = any), so the
  // workload mix knows what each running allocation could have used.
  uint64_t model_mask = 0;
  // The reservation whose held GPUs this placement took over ("" when none): its usage is
  // committed use, priced with the rate card's committed discount.
  std::string reservation;
};

struct Allocation {
  std::string id;
  Placement placement;
  bool live = false;
};

// ---- placement policies ----

// A request shape of the workload mix (ClusterState::Shape): whole GPUs on one node (gpus >= 1,
// milli 1000), one share (gpus 1, milli < 1000) or CPU-only (gpus 0).
struct ClusterStateShape {
  int16_t gpus = 0;
  int16_t milli = 0;
  int64_t cpu_milli = 0, memory_mib = 0;
  uint64_t model_mask = 0;  // over ClusterState::models(); 0 = any
  auto operator<=>(const ClusterStateShape&) const = default;
};

// How place() chooses among the nodes and GPUs that satisfy every hard rule. The policy
// decides only for single-node shapes (one share, whole GPUs on one node, CPU-only); MIG,
// node tiers and multi-node spreads are placed by the index-driven best fit under every policy.
enum class PlacementPolicy {
  // Fragmentation-aware: the choice that least increases the expected GPU capacity the running
  // workload mix could not use (see docs/simulate.md), ties to the fullest node and GPU.
  kDefault,
  kBestFit,  // the node with the least CPU + GPU left after placing (0..100 score), tightest GPU
  kRandom,   // uniform among feasible nodes, then among the GPUs that fit (seeded by `draw`)
};
std::string_view policy_name(PlacementPolicy policy);
Result<PlacementPolicy> parse_policy(std::string_view name);

struct PlaceOptions {
  PlacementPolicy policy = PlacementPolicy::kDefault;
  uint64_t seed = 0;  // fixes the tie order between equally scored nodes (best-fit)
  uint64_t draw = 0;  // this decision's random number (random policy); the caller's stream
  // Nodes the default policy scores at most per decision, taken in best-fit order from the
  // free-capacity indexes (and four times as many looked at, identical ones skipped); 0 = every
  // feasible node. Bounds the decision time on large fleets.
  int max_scored_nodes = 16;
  // The workload mix (shape -> weight) the default policy keeps room for; null = the running
  // allocations plus the request. A simulator that knows the trace passes its mix.
  const std::map<ClusterStateShape, int64_t>* workload = nullptr;
};

// ---- cluster state ----

class ClusterState;
Result<Placement> place(const ClusterState& state, const Request& request,
                        const PlaceOptions& options = {});

// The fleet and what is allocated on it, with free-capacity indexes per pool domain and model
// so placement never scans the whole fleet for the common shapes. Built from plain structs;
// changed only by apply() and release() (and health/schedulability updates).
class ClusterState {
 public:
  struct NodeModel {
    int16_t model = 0;
    int16_t gpus = 0;         // healthy GPUs of this model
    int16_t free_whole = 0;   // whole mode, unowned
    int16_t convertible = 0;  // MIG or time-sliced with nothing on it
    int16_t whole_bucket = -1, avail_bucket = -1;
    int32_t whole_pos = -1, avail_pos = -1;
  };
  struct Node {
    std::string id, name, pool_id, pool_name;
    int32_t pool_owner = -1;  // tenant number, -1 for shared capacity
    int32_t domain = 0;       // 0: shared; else the owner tenant's pool domain
    bool schedulable = true;
    int32_t rack = -1, nvlink = -1;
    int32_t first_gpu = 0, gpu_count = 0;
    int32_t exclusive_tenant = -1;  // set while a dedicated-node/pool allocation holds it
    int32_t exclusive_refs = 0;
    std::vector<std::pair<int32_t, int32_t>> tenants;  // (tenant, grants on the node)
    std::vector<NodeModel> models;
    int64_t cpu_total = 0, cpu_used = 0;  // cpu_total 0: not tracked
    int64_t memory_total = 0, memory_used = 0;
    // Digest of what the node offers (free CPU and memory, each healthy GPU's model and free
    // milli, in any order), kept by every change: placement skips nodes identical to one it
    // has already looked at without reading their GPUs.
    uint64_t offer_digest = 0;
    bool fits(int64_t cpu, int64_t memory) const {
      return (cpu_total == 0 || cpu_used + cpu <= cpu_total) &&
             (memory_total == 0 || memory_used + memory <= memory_total);
    }
  };
  struct Gpu {
    std::string uuid;
    int32_t node = 0;
    int16_t index = 0;
    int16_t model = 0;
    int8_t table = -1;  // MIG table number when MIG-capable
    GpuMode mode = GpuMode::kWhole;
    bool healthy = true;
    int32_t whole_owner = -1;  // allocation slot
    uint32_t mig_layout = 0;   // MIG slots present
    uint32_t mig_owned = 0;    // MIG slots held by allocations
    int16_t milli_used = 0;
    std::vector<std::pair<int32_t, int16_t>> shares;  // (allocation slot, milli)
    std::array<int32_t, detail::kMaxMigSlots> slot_owner;
    std::array<int32_t, detail::kMaxMigProfiles> mig_pos;
    std::array<int8_t, detail::kMaxMigProfiles> mig_bucket;
    int32_t shared_pos = -1, idle_pos = -1;
    int8_t shared_bucket = -1, idle_bucket = -1;
  };

  // Milli-GPU a GPU offers to one share or whole-GPU request: 1000 when idle (an idle GPU of
  // any mode converts), 1000 - used for a time-sliced GPU, else 0.
  static int16_t free_milli(const Gpu& g);

  // Validates the specs (unique ids and UUIDs, catalogs for MIG GPUs, valid layouts).
  static Result<ClusterState> build(std::vector<NodeSpec> nodes);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Gpu>& gpus() const { return gpus_; }
  const std::vector<std::string>& models() const { return models_; }
  const std::string& tenant_name(int32_t tenant) const { return tenants_[tenant]; }
  int32_t find_tenant(std::string_view tenant) const;  // -1 when never seen
  int32_t find_model(std::string_view model) const;    // -1 when not in the fleet
  // The pools (id, name) owned by a tenant; empty when it owns none.
  std::vector<std::pair<std::string, std::string>> pools_of(std::string_view tenant) const;
  const FleetLimits& limits() const { return limits_; }
  const detail::MigTable* mig_table(const Gpu& gpu) const {
    return gpu.table < 0 ? nullptr : tables_[gpu.table];
  }
  vocab::Layout mig_layout(int32_t gpu) const;
  // Tenants holding anything on a GPU (whole, MIG instances or shares), sorted.
  std::vector<std::string> tenants_on_gpu(int32_t gpu) const;
  const std::string& nvlink_name(int32_t nvlink) const { return nvlink_names_[nvlink]; }
  const std::string& rack_name(int32_t rack) const { return rack_names_[rack]; }

  // Live allocations.
  const Allocation* find(std::string_view allocation_id) const;
  const std::vector<Allocation>& allocation_slots() const { return allocs_; }  // !live = free
  int64_t live_allocations() const { return static_cast<int64_t>(alloc_ids_.size()); }

  // Health and schedulability; allocations already placed stay where they are.
  Result<void> set_node_schedulable(std::string_view node_id, bool schedulable);
  Result<void> set_gpu_healthy(std::string_view gpu_uuid, bool healthy);

  // Bytes held by the state's containers (capacities), for memory-per-GPU figures.
  int64_t memory_bytes() const;

  // The running workload by shape, which the default policy treats as the mix of requests to
  // keep room for: whole GPUs on one node (gpus >= 1, milli 1000), one share (gpus 1, milli
  // < 1000) and CPU-only (gpus 0). MIG and node-tier allocations are not in it.
  using Shape = ClusterStateShape;
  const std::map<Shape, int64_t>& workload_mix() const { return mix_; }

 private:
  friend Result<void> apply(ClusterState&, const Placement&, std::string_view);
  friend Result<Placement> release(ClusterState&, std::string_view);
  friend class Placer;

  int32_t intern_tenant(const std::string& tenant);
  int32_t domain_of(int32_t tenant) const;
  detail::Segment& segment(int32_t domain, int16_t model) {
    return segments_[domain * models_.size() + model];
  }
  const detail::Segment& segment(int32_t domain, int16_t model) const {
    return segments_[domain * models_.size() + model];
  }
  void recount_node(int32_t node);
  // The node's entry for `model` (each node lists the models it has once).
  NodeModel& node_model(int32_t node, int16_t model);
  void index_node(int32_t node);
  void unindex_node(int32_t node);
  void index_gpu(int32_t gpu);
  void unindex_gpu(int32_t gpu);
  void add_node_tenant(int32_t node, int32_t tenant, int delta);

  std::vector<Node> nodes_;
  std::vector<Gpu> gpus_;
  std::vector<std::string> models_;  // sorted
  std::vector<const detail::MigTable*> tables_;
  std::vector<std::string> tenants_;
  std::unordered_map<std::string, int32_t> tenant_ids_;
  std::unordered_map<int32_t, int32_t> tenant_domain_;  // pool owner -> domain
  std::unordered_map<int32_t, std::vector<std::pair<std::string, std::string>>> tenant_pools_;
  int32_t domains_ = 1;
  std::vector<detail::Segment> segments_;
  std::vector<std::string> nvlink_names_, rack_names_;
  std::vector<std::vector<int32_t>> nvlink_nodes_, rack_nodes_;
  std::unordered_map<std::string, int32_t> node_ids_, gpu_ids_;
  std::vector<Allocation> allocs_;
  std::vector<int32_t> free_slots_;
  std::unordered_map<std::string, int32_t> alloc_ids_;
  FleetLimits limits_;
  std::map<Shape, int64_t> mix_;  // shape -> live allocations of it
  void count_shape(const Placement& p, int delta);
};

// Where the request would go now, changing nothing. Tier rules are hard constraints; the
// error (conflict) says specifically why nothing fits. `options` picks the policy.
Result<Placement> place(const ClusterState& state, const Request& request,
                        const PlaceOptions& options);
// Records a placement (as place() returned it against the current state) as allocation `id`.
// Re-checks every grant; a stale placement is refused (conflict) and nothing changes.
Result<void> apply(ClusterState& state, const Placement& placement, std::string_view id);
// The FGD paper's cluster fragmentation: over the schedulable nodes, the expected GPU milli
// that a request drawn from `mix` (shape -> weight) could not use, because it does not fit
// on the node at all (all the node's free milli) or because a GPU has less free than it needs.
double fragmentation_milli(const ClusterState& state,
                           const std::map<ClusterState::Shape, int64_t>& mix);
// Frees what allocation `id` holds; returns its placement. MIG instances stay in the layout,
// free for the next request of their profile.
Result<Placement> release(ClusterState& state, std::string_view id);

// ---- quota ----

struct QuotaLimits {
  int64_t nominal = 0;                  // guaranteed units
  std::optional<int64_t> borrow_limit;  // units above nominal the owner may borrow
  std::optional<int64_t> limit;         // hard cap on units
};

// What one allocation takes from the tree.
struct QuotaCharge {
  std::string tenant, project, model;
  int64_t units = 0;
  std::string mig_profile;  // for per-profile caps
  int64_t instances = 0;
};

struct Admission {
  int64_t borrowed = 0;  // units of the charge above the tenant's nominal
};

// Quota tree platform -> tenant -> project, per GPU model, in units. Tenants of a cohort lend
// one another their idle nominal quota: a tenant may go above its nominal (borrow) while its
// cohort's total use stays within the cohort's total nominal, its borrow_limit and its limit.
class QuotaTree {
 public:
  void set_platform(const std::string& model, std::optional<int64_t> limit);
  void set_tenant(const std::string& tenant, const std::string& model, QuotaLimits limits);
  void set_cohort(const std::string& tenant, const std::string& cohort);  // "" = none
  void set_project(const std::string& tenant, const std::string& project, const std::string& model,
                   QuotaLimits limits);
  // At most `max_instances` live instances of one MIG profile for the tenant.
  void set_profile_cap(const std::string& tenant, const std::string& model,
                       const std::string& profile, int64_t max_instances);
  // The name messages use for a tenant or project id (the id itself when none is set).
  void set_name(const std::string& id, std::string name);

  // ok with the borrowed units, or quota_exceeded naming the level, model and figures.
  Result<Admission> admit(const QuotaCharge& charge) const;
  // quota_exceeded when `charge` is over a hard ceiling even with nothing else held: the
  // platform's limit, the tenant's or the project's `limit`, a MIG profile cap. Waiting cannot
  // change that; only raising the limit can.
  std::optional<Error> over_hard_limit(const QuotaCharge& charge) const;
  void charge(const QuotaCharge& charge);
  void refund(const QuotaCharge& charge);

  struct Usage {
    int64_t used = 0;
    QuotaLimits limits;
    bool configured = false;
  };
  Usage tenant_usage(const std::string& tenant, const std::string& model) const;
  // Every tenant's use of every model it holds or has a quota for, by tenant id and model.
  struct TenantModelUsage {
    std::string tenant, model;
    Usage usage;
  };
  std::vector<TenantModelUsage> tenant_usages() const;
  Usage project_usage(const std::string& tenant, const std::string& project,
                      const std::string& model) const;
  int64_t platform_used(const std::string& model) const;
  std::optional<int64_t> platform_limit(const std::string& model) const;
  std::string cohort_of(const std::string& tenant) const;
  const std::vector<std::string>& cohort_members(const std::string& cohort) const;
  int64_t profile_used(const std::string& tenant, const std::string& model,
                       const std::string& profile) const;
  std::optional<int64_t> profile_cap(const std::string& tenant, const std::string& model,
                                     const std::string& profile) const;

 private:
  struct Entry {
    QuotaLimits limits;
    bool configured = false;
    int64_t used = 0;
  };
  struct Tenant {
    std::string cohort;
    std::unordered_map<std::string, Entry> models;
    std::unordered_map<std::string, std::unordered_map<std::string, Entry>> projects;
    std::unordered_map<std::string, std::pair<int64_t, int64_t>> profile_caps;  // cap, used
  };
  struct CohortModel {
    int64_t nominal = 0, used = 0;
  };
  Tenant& tenant(const std::string& name) { return tenants_[name]; }
  const std::string& named(const std::string& id) const {
    auto it = names_.find(id);
    return it == names_.end() ? id : it->second;
  }
  void cohort_add(const std::string& cohort, const std::string& model, int64_t nominal,
                  int64_t used);

  std::unordered_map<std::string, Tenant> tenants_;
  std::unordered_map<std::string, std::unordered_map<std::string, CohortModel>> cohorts_;
  std::unordered_map<std::string, std::vector<std::string>> members_;
  std::unordered_map<std::string, std::pair<std::optional<int64_t>, int64_t>> platform_;
  std::unordered_map<std::string, std::string> names_;
};

// ---- the scheduler facade ----

struct SchedulerOptions {
  Duration fair_share_half_life = std::chrono::hours(24);
  bool preemption = true;
  // Victims tried for one request at most, so a blocked request costs bounded time.
  int max_victims = 8;
};

enum class DecisionKind { kPlaced, kPending, kRejected };
std::string_view decision_kind_name(DecisionKind kind);

struct Decision {
  DecisionKind kind = DecisionKind::kPending;
  std::string allocation_id;
  std::optional<Placement> placement;  // kPlaced
  std::optional<Error> reason;         // kPending / kRejected: why
  int64_t borrowed_units = 0;          // kPlaced: units above the tenant's nominal
  std::vector<std::string> preempted;  // allocations preempted to place this one
};

struct PendingView {
  std::string allocation_id;
  Request request;
  Error reason;
  TimePoint submitted;
};

// Owns the cluster state and the quota tree: submit (validate -> quota -> place -> apply),
// release, a pending queue (priority, then weighted fair share on decayed usage, then
// submission time) and preemption (same-tenant by priority; lenders reclaiming borrowed
// capacity). Every answer is a value; nothing here reads a clock or does I/O.
class Scheduler {
 public:
  Scheduler(ClusterState state, QuotaTree quota, SchedulerOptions options = {});

  // Places the request now or queues it with the reason; rejects invalid shapes.
  // `submitted`: its place in the queue when not now (work placed again keeps its first one).
  Decision submit(const std::string& id, const Request& request, TimePoint now,
                  std::optional<TimePoint> submitted = std::nullopt);
  // Frees a placed allocation or withdraws a pending one.
  Result<void> release(const std::string& id, TimePoint now);
  // Retries the pending queue in order; returns the decisions for entries that got placed.
  // Backfill: once a request is blocked for capacity, a later one is placed only if it ends
  // before the blocked one could start (from the end times of what runs), so it never delays
  // it; when that start cannot be known (nothing that holds capacity has an end), later
  // requests are placed as they fit.
  std::vector<Decision> schedule(TimePoint now);
  // When `request` could start for capacity alone if allocations were released at their end
  // times; nullopt when the known end times never free enough. Changes nothing.
  std::optional<TimePoint> earliest_start(const Request& request, TimePoint now);

  std::vector<PendingView> pending(TimePoint now) const;  // in queue order

  // Whether and where the request would be placed now, within quota and without preempting
  // anything; changes nothing (dry runs).
  Result<Placement> probe(const Request& request) const;
  // Why the request can never be placed as the quota stands (every model it may use is over a
  // hard limit), or nothing: submit rejects such a request instead of queueing it.
  std::optional<Error> never_fits(const Request& request) const;

  // Rebuilding from a store. restore() records an allocation that was placed, exactly where it
  // was (build the state with the GPU modes and MIG layouts the placements left, every node
  // schedulable and GPU healthy, restore, then apply schedulability and health). Quota is
  // charged as it was, even where a lowered limit would now refuse it. restore_pending() queues
  // a waiting one with its recorded reason. Both in submission order.
  Result<void> restore(const std::string& id, const Request& request, const Placement& placement,
                       TimePoint submitted, TimePoint now);
  void restore_pending(const std::string& id, const Request& request, TimePoint submitted,
                       Error reason);
  Result<void> set_node_schedulable(std::string_view node_id, bool schedulable) {
    return state_.set_node_schedulable(node_id, schedulable);
  }
  Result<void> set_gpu_healthy(std::string_view gpu_uuid, bool healthy) {
    return state_.set_gpu_healthy(gpu_uuid, healthy);
  }
  bool is_pending(const std::string& id) const { return pending_ids_.contains(id); }

  // Reservations: `shape` (its tenant, tier, model and size) is held for the tenant during
  // [start, end). From the start (at reserve() or schedule()) the capacity is placed and held as
  // allocation "reservation:<id>", charged to the tenant's quota, so no other tenant can take
  // it; the tenant's first request of the same shape in the window takes exactly those GPUs.
  // Before the start, a request that is not preemptible and does not end before the window may
  // be placed only where it leaves room for every upcoming reservation; at the start the hold
  // may preempt preemptible allocations of any tenant. At the end an unused hold is released.
  // Placed: held now; pending: not yet (with why).
  Decision reserve(const std::string& id, const Request& shape, TimePoint start, TimePoint end,
                   TimePoint now);
  Result<void> cancel_reservation(const std::string& id, TimePoint now);
  struct ReservationStatus {
    bool active = false;          // its hold is placed
    bool used = false;            // an allocation of its tenant took the hold
    std::optional<Error> reason;  // why the hold is not placed yet
  };
  // nullopt once the window has ended (or it was cancelled).
  std::optional<ReservationStatus> reservation(const std::string& id) const;
  static std::string reservation_hold_id(const std::string& id) { return "reservation:" + id; }
  const ClusterState& state() const { return state_; }
  const QuotaTree& quota() const { return quota_; }
  QuotaTree& quota() { return quota_; }
  void set_tenant_weight(const std::string& tenant, double weight);
  double fair_share_usage(const std::string& tenant, TimePoint now) const;  // decayed unit-s

  struct Held {
    Request request;
    QuotaCharge charge;
    int64_t borrowed = 0;
    TimePoint submitted;
    int64_t seq = 0;
  };
  const Held* held(const std::string& id) const;

 private:
  struct Pending {
    std::string id;
    Request request;
    Error reason;
    TimePoint submitted;
    int64_t seq = 0;
  };
  // Candidates for preemption per tenant, in victim order (lowest priority, newest first).
  using VictimKey = std::tuple<int, int64_t, int64_t, std::string>;  // priority, -time, -seq, id
  struct TenantVictims {
    std::set<VictimKey> preemptible;
    std::set<VictimKey> borrowed;
  };
  static VictimKey victim_key(const std::string& id, const Held& h);
  void index_victim(const std::string& id, const Held& h, bool add);
  struct Reservation {
    Request shape;
    TimePoint start, end;
    bool active = false, used = false;
    std::optional<Error> reason;
  };
  void advance_reservations(TimePoint now, std::vector<Decision>* placed);
  std::optional<Decision> use_reservation(const std::string& id, const Request& request,
                                          TimePoint now);
  struct Share {
    double usage = 0;  // decayed unit-seconds at `at`
    int64_t held_units = 0;
    TimePoint at{};
    double weight = 1;
  };
  Decision try_place(const std::string& id, const Request& request, TimePoint submitted,
                     int64_t seq, TimePoint now, bool reservation_hold = false);
  // The quota charge of the request on each model it may use.
  std::vector<QuotaCharge> charges(const Request& request) const;
  Result<Placement> admit_and_place(const Request& request, QuotaCharge* charge,
                                    Admission* admission) const;
  std::vector<std::string> victims(const Request& request, bool any_preemptible) const;
  // The upcoming reservation (if any) that placing `request` now would leave without room.
  std::optional<std::string> crowds_reservation(const Request& request, TimePoint now);
  bool bound_by_reservations(const Request& request, TimePoint now) const;
  void commit(const std::string& id, const Request& request, const QuotaCharge& charge,
              int64_t borrowed, TimePoint submitted, int64_t seq, TimePoint now);
  void drop(const std::string& id, TimePoint now);
  void touch_share(const std::string& tenant, TimePoint now, int64_t delta_units);
  double share_key(const std::string& tenant, TimePoint now) const;

  ClusterState state_;
  QuotaTree quota_;
  SchedulerOptions options_;
  std::unordered_map<std::string, Held> held_;
  std::vector<Pending> pending_;
  std::unordered_set<std::string> pending_ids_;
  std::unordered_map<std::string, Share> shares_;
  std::unordered_map<std::string, TenantVictims> victims_;
  std::map<std::string, Reservation> reservations_;  // by id: a fixed order
  int64_t seq_ = 0;
};

}  // namespace gp::sched
