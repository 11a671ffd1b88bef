// Private to the alloc module: conversions between the scheduler's structs and their stored
// and API JSON forms.
#pragma once

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "alloc/alloc.h"

namespace gp::alloc::detail {

// The actor of what the scheduler does on its own (placements, preemptions, failures).
inline constexpr std::string_view kScheduler = "scheduler";

std::string ts(int64_t us);
std::optional<std::string> ts(const std::optional<int64_t>& us);

// Reads an optional array of GPU model names (at most 8).
std::vector<std::string> read_models(ObjectReader& r, std::string_view key);

// Priority classes: names operators and tenants use, and the integer the scheduler orders by.
std::optional<int> priority_of(std::string_view name);
std::string priority_class(int priority);

// The shape part of a request as stored and shown (tenant and project are columns).
Json request_json(const sched::Request& r);
Result<sched::Request> request_from(const Json& j);
// The shape as tenants see it on an allocation or reservation (no class, priority, preemption).
Json shape_json(const sched::Request& r);

// A placement names GPUs and nodes by id, so it survives a rebuild of the cluster state.
Json placement_json(const sched::Placement& p, const sched::ClusterState& state);
// Against a rebuilt state: GPU and node indexes looked up by id, without mode or layout changes
// (the GPU plans already hold them).
struct Index {
  std::unordered_map<std::string, int32_t> gpus, nodes;
  explicit Index(const sched::ClusterState& state);
};
Result<sched::Placement> placement_from(const Json& j, const sched::Request& r,
                                        const sched::ClusterState& state, const Index& index);

// "quota_exceeded", "insufficient_capacity", ... from the scheduler's error.
std::string reason_code(const Error& e);

std::string_view allocation_columns();
Result<Allocation> allocation_from(const store::Row& row);
Result<std::optional<Allocation>> load(store::Tx& tx, const std::string& id);
// Writes a new allocation's row as `a` holds it (Service::create writes it once, in the state it
// ends the create in).
Result<void> insert_allocation(store::Tx& tx, const Allocation& a);
// A new allocation's events (seq 1, 2, ...), in one statement.
Result<void> insert_first_events(store::Tx& tx, const std::string& id,
                                 std::span<const Event> events);

// Quota rows into the scheduler's tree; quota documents as the API shows them.
Result<sched::QuotaTree> load_quota(store::Tx& tx);
Json model_quota_json(const ModelQuota& q, const sched::QuotaTree::Usage* usage);

// The stops `a` leaves on its nodes as it ends (alloc.h, "stops"): one on each node whose agent
// has reported in and that has not failed. Returns how many.
Result<int> record_stops(store::Tx& tx, const Allocation& a, int64_t now, Duration grace);
// A failed node's stops end with it.
Result<void> drop_node_stops(store::Tx& tx, const std::string& node_id);

// Reservations still to come or running, back into a rebuilt scheduler.
Result<void> restore_reservations(store::Tx& tx, sched::Scheduler& s, TimePoint now);

}  // namespace gp::alloc::detail
