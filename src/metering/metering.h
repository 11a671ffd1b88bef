// Metering: who held which GPU resources, for how long, and how much they used them. Usage
// intervals are written in the transaction of every allocation state change; external meters
// post CloudEvents that are deduplicated and stored durably; rollups split both over UTC hours,
// days or months. Public header of the metering module.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"
#include "store/store.h"

namespace gp::metering {

// ---- usage intervals ----

// A GPU (or one MIG instance of it, "<profile>@<start>") an interval held; utilization samples
// of that device are attributed to the interval.
struct Device {
  std::string gpu_uuid;
  std::string instance;  // "" for a whole or time-sliced GPU
  friend bool operator==(const Device&, const Device&) = default;
};

// What an allocation holds while placed or active, derived from its stored placement.
struct Holding {
  std::string resource_key;  // gpu/H200, mig/H200/3g.71gb, gpu-milli/H200
  int64_t quantity = 0;      // GPUs, MIG instances or milli-GPUs
  int64_t units = 0;         // GPU-equivalents in scheduler units (1 GPU = 7000)
  std::vector<Device> devices;
  // The reservation the placement took its GPUs from: its usage is committed use.
  std::optional<std::string> reservation_id;
};

// The placement JSON an allocation stores (alloc's placement_json) as a holding. A placement
// that takes no GPU (CPU-only) yields nullopt: it holds nothing metering counts.
Result<std::optional<Holding>> holding_of(const Json& placement);

// An allocation as metering sees it at a state change.
struct AllocationView {
  std::string id, tenant_id, project_id;
  std::optional<std::string> offering_id;
  bool preemptible = false;
  Json placement;  // null until placed
};

// Called inside the transaction that moves an allocation to `state`: closes its open intervals
// at `now` and, when the new state still holds resources (placed, active), opens one for it.
Result<void> record_transition(store::Tx& tx, const AllocationView& a, std::string_view state,
                               int64_t now);
// The same for the first state of an allocation written in this transaction: it has no
// interval yet, so none is looked for.
Result<void> record_first_state(store::Tx& tx, const AllocationView& a, std::string_view state,
                                int64_t start);

// A placed or active allocation, as recover sees it.
struct LiveAllocation {
  AllocationView view;
  std::string state;  // placed | active
  std::optional<int64_t> placed_at;
};
// When an allocation that is no longer live ended: its ended_at, or nullopt when it has none or
// is gone.
using EndedAt = std::function<Result<std::optional<int64_t>>(const std::string& allocation_id)>;

// Repairs intervals against the allocations (at start and whenever the scheduler is rebuilt).
// The allocations are alloc's, which passes them in: `live` is every placed or active one, and
// `ended_at` says when one that is not live ended. An open interval of an allocation not in
// `live` is closed at its ended_at (or `now` when it has none); a live allocation without an
// open interval (placed before metering existed) gets one from its placed_at. Returns the number
// of intervals closed or opened.
Result<int> recover(store::Tx& tx, const std::vector<LiveAllocation>& live, const EndedAt& ended_at,
                    int64_t now);

struct Interval {
  std::string id, tenant_id, project_id, allocation_id;
  std::optional<std::string> offering_id;
  std::string resource_key;
  int64_t quantity = 0, units = 0;
  std::string state;  // placed | active
  bool preemptible = false;
  int64_t start_us = 0;
  std::optional<int64_t> end_us;  // open while unset
  std::vector<Device> devices;
  std::optional<std::string> reservation_id;  // committed use, from this reservation
  Json to_json() const;
};

// The tenant's allocations that have an open interval (every allocation holding resources has
// one: the posture report names those that do not).
Result<std::set<std::string>> allocations_with_open_usage(store::Tx& tx,
                                                          const std::string& tenant_id);
// Intervals overlapping [from_us, to_us), of one tenant or of all (tenant empty), oldest first.
Result<std::vector<Interval>> load_intervals(store::Tx& tx, const std::string& tenant_id,
                                             int64_t from_us, int64_t to_us);
// The GPUs an open interval holds, whole or in part (a MIG instance or a share), by UUID: what
// the live allocations hold now.
Result<std::set<std::string>> held_gpus(store::Tx& tx);
// The tenants with an interval overlapping [from_us, to_us) (open ones included), by id.
Result<std::vector<std::string>> tenants_with_usage(store::Tx& tx, int64_t from_us, int64_t to_us);

// ---- usage events from external meters (CloudEvents 1.0, structured JSON) ----

struct UsageEvent {
  std::string tenant;  // as sent (id or name); resolved at ingestion
  std::optional<std::string> project;
  std::string source, id, type;
  int64_t time_us = 0;
  std::string resource_key, unit;
  int64_t quantity_micro = 0;  // quantity x 1,000,000, exact for up to six decimals
};

// One event's attributes and data, strictly: specversion 1.0, id, source, type, RFC 3339 time,
// extension attribute tenant (and optional project), data {resource_key, quantity, unit}.
// Errors name the offending attribute.
Result<UsageEvent> parse_event(const Json& j);

// The events of a request body: a JSON object is one event, an array a batch. `batch` is set
// for arrays. Each element parses on its own; the outer result fails only when the body as a
// whole is unusable (not an object or array, empty, or over `max_events`).
struct ParsedBody {
  bool batch = false;
  std::vector<Result<UsageEvent>> events;
};
Result<ParsedBody> parse_events(const Json& body, size_t max_events);

struct IngestOptions {
  Duration max_future_skew = std::chrono::minutes(5);  // clocks of meters run a little ahead
  Duration lateness = std::chrono::hours(24 * 7);      // older events are refused
};

enum class Outcome { kAccepted, kDuplicate, kRejected };
std::string_view outcome_name(Outcome o);

struct EventResult {
  Outcome outcome = Outcome::kRejected;
  std::string id, source;  // as sent, when readable
  std::string reason;      // why it was rejected or counted as a duplicate
};

struct IngestReport {
  std::vector<EventResult> results;  // one per event, in request order
  int accepted = 0, duplicates = 0, rejected = 0;
  Json to_json() const;
};

// Who may write usage for which tenant, and names to ids; supplied by the caller (the API
// resolves them against the principal and the store). An error rejects the event with its
// message; a tenant the caller cannot reach must read "tenant not found", like a missing one.
struct Resolver {
  std::function<Result<std::string>(const std::string& tenant)> tenant;
  std::function<Result<std::string>(const std::string& tenant_id, const std::string& project)>
      project;
};

// Checks the time window, resolves tenants and projects and inserts what is left in the
// caller's transaction with prepared statements: duplicates of (tenant, source, id), stored
// earlier or earlier in the same batch, are counted once. Durable when the transaction commits.
Result<IngestReport> ingest(store::Tx& tx, const std::vector<Result<UsageEvent>>& events,
                            const Resolver& resolve, const IngestOptions& options, int64_t now);

// ---- rollups ----

enum class Granularity { kHour, kDay, kMonth };
std::optional<Granularity> parse_granularity(std::string_view s);
std::string_view granularity_name(Granularity g);

// UTC calendar: the start of the period holding `us`, and the start of the next one.
int64_t period_start(int64_t us, Granularity g);
int64_t period_next(int64_t period_start_us, Granularity g);

// [start, end) cut at every period boundary in between.
struct Piece {
  int64_t period = 0, start = 0, end = 0;
};
std::vector<Piece> split(int64_t start, int64_t end, Granularity g);

enum class GroupBy { kTenant, kProject, kResourceKey, kOffering };
// "project,resource_key,offering" -> fields; unknown or repeated names are an error.
// `allow_tenant` is false for tenant-scoped queries.
Result<std::vector<GroupBy>> parse_group_by(std::string_view s, bool allow_tenant);

struct UsageQuery {
  std::string tenant_id;  // empty: every tenant (operators)
  int64_t from_us = 0, to_us = 0;
  Granularity granularity = Granularity::kDay;
  std::vector<GroupBy> group_by;
};

// Utilization samples of a device over [from, to): how many there were and the sum of their
// util_pct (samples with an unknown utilization are not counted).
struct SampleStats {
  int64_t count = 0, util_sum = 0;
};
using SampleSource =
    std::function<Result<SampleStats>(const Device& d, int64_t from_us, int64_t to_us)>;

struct UsageRow {
  std::string kind;  // "allocation" or "event"
  int64_t period_start = 0, period_end = 0;
  std::string tenant_id, project_id, resource_key, offering_id;  // "" when not grouped by it
  // allocation rows
  __int128 allocated_unit_us = 0;  // exact: scheduler units x microseconds
  // The part of the allocated time covered by utilization samples, and that part weighted by
  // the samples' mean utilization: an allocated but idle GPU shows allocated hours beside
  // (near) zero utilized hours.
  double sampled_gpu_hours = 0, utilized_gpu_hours = 0;
  int64_t intervals = 0;  // interval pieces summed into the row
  double allocated_gpu_hours() const;
  // event rows
  std::string unit;
  __int128 quantity_micro = 0;
  int64_t events = 0;
};

struct UsageReport {
  UsageQuery query;
  std::vector<UsageRow> rows;  // allocation rows, then event rows; each by period then key
  Json to_json() const;
  std::string to_csv() const;
};

// Pure: rolls intervals (open ones count up to `now`) and events up by period and group.
Result<UsageReport> rollup(const UsageQuery& q, const std::vector<Interval>& intervals,
                           const std::vector<UsageEvent>& events, int64_t now,
                           const SampleSource& samples);

// The store-backed query: loads intervals and events of the range and attributes the fleet's
// utilization samples (fleet::utilization_sum) to the devices each interval held.
Result<UsageReport> usage(store::Tx& tx, const UsageQuery& q, int64_t now);

// Events as stored (tenant and project ids resolved), overlapping the range.
Result<std::vector<UsageEvent>> load_events(store::Tx& tx, const std::string& tenant_id,
                                            int64_t from_us, int64_t to_us);

// Exact decimal rendering of a non-negative 128-bit integer, and of micro-units ("1.5").
std::string decimal(__int128 v);
std::string micro_decimal(__int128 micro);

// GPU-equivalents in use now per tenant (open intervals), for the metrics gauges.
Result<std::vector<std::pair<std::string, int64_t>>> open_units_by_tenant(store::Tx& tx);

}  // namespace gp::metering
