// Jobs on the control plane: their rows, their allocation, their nodes' reports (records.h).
#include "jobs/records.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/env.h"
#include "fleet/fleet.h"
#include "network/records.h"
#include "policy/policy.h"
#include "storage/records.h"
#include "store/record_row.h"

namespace gp::jobs {
namespace {

// The spec, stored as its JSON, comes first; the table's columns follow.
const std::string kJobColumns = "spec, " + store::columns_of<Job>();

constexpr std::string_view kScheduler = "scheduler";

std::string ts(int64_t us) { return format_rfc3339(from_unix_micros(us)); }
Json opt_ts(const std::optional<int64_t>& us) { return us ? Json(ts(*us)) : Json(nullptr); }

std::optional<int64_t> wide(const std::optional<int>& v) {
  if (!v) return std::nullopt;
  return int64_t{*v};
}

Result<Failure> parse_failure(std::string_view name) {
  for (Failure f : {Failure::kNone, Failure::kExitCode, Failure::kOom, Failure::kNodeLost,
                    Failure::kImagePull, Failure::kDeadline, Failure::kStartFailed})
    if (failure_name(f) == name) return f;
  return fail(Error::internal(fmt::format("unknown job failure \"{}\"", name)));
}

Result<Job> job_from(const store::Row& row) {
  Job j = GP_TRY(store::read_row<Job>(row, 1));
  j.spec = GP_TRY(parse_job_spec(GP_TRY(parse_json(row.text(0)))));
  return j;
}

Result<std::optional<Job>> load(store::Tx& tx, const std::string& id) {
  auto row =
      GP_TRY(tx.query_one(fmt::format("SELECT {} FROM jobs WHERE id = ?", kJobColumns), {id}));
  if (!row) return std::optional<Job>{};
  return std::optional<Job>{GP_TRY(job_from(*row))};
}

Result<Member> member_from(const store::Row& row) {
  Member m;
  m.rank = static_cast<int>(row.integer(0));
  m.attempt = static_cast<int>(row.integer(1));
  m.node_id = row.text(2);
  m.state = row.text(3);
  if (!row.is_null(4)) m.exit_code = static_cast<int>(row.integer(4));
  m.oom = row.integer(5) != 0;
  m.failure = GP_TRY(parse_failure(row.text(6)));
  m.error = row.text(7);
  m.updated_at = row.integer(8);
  m.address = row.text(9);
  return m;
}

Result<void> insert_event(store::Tx& tx, const std::string& id, int64_t at, State from, State to,
                          const std::string& reason, bool first = false) {
  GP_TRY(
      tx.exec("INSERT INTO job_events (job_id, seq, at, from_state, to_state, reason) SELECT ?, "
              "COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM job_events WHERE job_id = ?",
              {id, at, first ? std::string() : std::string(state_name(from)),
               std::string(state_name(to)), reason, id}));
  return ok();
}

// Whether a job in this state has its members on the tenant's network (member_network).
bool on_network(State s) { return s == State::kStarting || s == State::kRunning; }

// Tells those who wait (the API's long polls) that the job changed: its followers, and the
// agents of its members' nodes. With `peers`, the job joined or left the tenant's network, which
// every node running one of the tenant's members lists: their agents are told too.
Result<void> announce(store::Tx& tx, const Job& j, bool peers) {
  tx.announce("job:" + j.id);
  const auto rows =
      peers ? GP_TRY(tx.query("SELECT DISTINCT m.node_id FROM job_members m JOIN jobs j ON j.id = "
                              "m.job_id WHERE (j.tenant_id = ? AND j.state IN ('starting', "
                              "'running')) OR j.id = ?",
                              {j.tenant_id, j.id}))
            : GP_TRY(tx.query("SELECT DISTINCT node_id FROM job_members WHERE job_id = ?", {j.id}));
  for (const auto& row : rows) tx.announce("node:" + row.text(0));
  return ok();
}

// Writes the job's state fields as they are in `j` (bumping its version) and records the
// transition from `from`.
Result<void> save(store::Tx& tx, const Env& w, Job& j, State from) {
  j.updated_at = w.now();
  ++j.version;
  if (finished(j.state) && !j.ended_at) j.ended_at = j.updated_at;
  GP_TRY(tx.exec(
      "UPDATE jobs SET state = ?, failure = ?, reason = ?, exit_code = ?, attempts = ?, "
      "image_digest = ?, cancel_requested_at = ?, started_at = ?, ended_at = ?, updated_at = ?, "
      "version = ?, allocation_id = ? WHERE id = ?",
      {std::string(state_name(j.state)), std::string(failure_name(j.failure)), j.reason,
       store::opt(j.exit_code), int64_t{j.attempts}, j.image_digest,
       store::opt(j.stop_requested_at), store::opt(j.started_at), store::opt(j.ended_at),
       j.updated_at, j.version, j.allocation_id, j.id}));
  if (from != j.state) GP_TRY_VOID(insert_event(tx, j.id, j.updated_at, from, j.state, j.reason));
  GP_TRY_VOID(announce(tx, j, on_network(from) != on_network(j.state)));
  return ok();
}

// The first address of a tenant's CIDR that job members may get: the ones below are left to
// gateways and VMs.
constexpr uint32_t kFirstMemberHost = 16;

// Addresses for `n` members of a job of the tenant: the lowest ones of its CIDR (from
// kFirstMemberHost, never the broadcast address) that no live member of the tenant holds. Empty
// strings when the tenant has no segment: its members then run without a network.
Result<std::vector<std::string>> member_addresses(store::Tx& tx, const std::string& tenant_id,
                                                  int n) {
  auto segment = GP_TRY(network::load_segment(tx, tenant_id));
  if (!segment) return std::vector<std::string>(static_cast<size_t>(n));
  std::set<std::string> taken;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT m.address FROM job_members m JOIN jobs j ON j.id = m.job_id WHERE j.tenant_id = "
           "? AND j.state IN ('queued', 'starting', 'running') AND m.address <> ''",
           {tenant_id})))
    taken.insert(row.text(0));
  std::vector<std::string> out;
  const network::Ipv4Cidr& c = segment->cidr;
  for (uint64_t host = kFirstMemberHost; host + 1 < c.size() && std::ssize(out) < n; ++host) {
    std::string a = network::format_ipv4(static_cast<uint32_t>(c.first() + host));
    if (!taken.contains(a)) out.push_back(std::move(a));
  }
  if (std::ssize(out) < n)
    return fail(Error{ErrorCode::kResourceExhausted,
                      fmt::format("the tenant's network {} has no address left for {} members",
                                  network::to_string(c), n)});
  return out;
}

// The job's members for a new attempt, on the nodes of its allocation's placement: member r
// gets the r-th equal slice of the placement's grants, which lies on one node, and an address
// on the tenant's network.
Result<void> place_members(store::Tx& tx, const Env& w, const Job& j, const alloc::Allocation& a) {
  const Json grants = a.placement.value("gpus", Json::array());
  const int members = j.spec.members;
  if (grants.empty() || grants.size() % static_cast<size_t>(members) != 0)
    return fail(Error::internal(fmt::format("job {}: placement of {} grants for {} members", j.id,
                                            grants.size(), members)));
  const size_t per = grants.size() / static_cast<size_t>(members);
  GP_TRY(tx.exec("DELETE FROM job_members WHERE job_id = ?", {j.id}));
  const auto addresses = GP_TRY(member_addresses(tx, j.tenant_id, members));
  GP_TRY(tx.exec(
      "INSERT INTO job_attempts (job_id, attempt, allocation_id, nodes, started_at, ended_at, "
      "end_reason) VALUES (?, ?, ?, ?, ?, NULL, '') ON CONFLICT (job_id, attempt) DO NOTHING",
      {j.id, int64_t{j.attempts}, a.id, a.placement.value("nodes", Json::array()).dump(),
       w.now()}));
  for (int r = 0; r < members; ++r) {
    const std::string node = grants[static_cast<size_t>(r) * per].value("node", "");
    for (size_t k = 0; k < per; ++k)
      if (grants[static_cast<size_t>(r) * per + k].value("node", "") != node)
        return fail(Error::internal(
            fmt::format("job {}: member {}'s GPUs lie on more than one node", j.id, r)));
    GP_TRY(tx.exec(
        "INSERT INTO job_members (job_id, rank, attempt, node_id, state, exit_code, oom, failure, "
        "error, address, updated_at) VALUES (?, ?, ?, ?, 'pending', NULL, 0, '', '', ?, ?)",
        {j.id, int64_t{r}, int64_t{j.attempts}, node, addresses[static_cast<size_t>(r)], w.now()}));
  }
  return ok();
}

// Releases the job's allocation if it is still live: the job has ended.
Result<void> release_allocation(store::Tx& tx, const Env& w, alloc::Service& service,
                                const Job& j) {
  tenancy::TenantScope scope(j.tenant_id);
  auto a = GP_TRY(alloc::find_allocation(tx, scope, j.allocation_id));
  if (!a || !alloc::live(a->state)) return ok();
  GP_TRY(service.release(
      tx, w, scope, j.allocation_id,
      fmt::format(
          "job {} {}{}", j.spec.name, state_name(j.state),
          j.failure == Failure::kNone ? "" : fmt::format(" ({})", failure_name(j.failure)))));
  return ok();
}

// The allocation that holds every member of a job: the members' units together, each member
// on one node.
Result<alloc::NewAllocation> allocation_for(store::Tx& tx, const Env& w, const JobSpec& spec,
                                            const std::string& offering_id,
                                            const tenancy::Tenant& tenant,
                                            const tenancy::Project& project) {
  Json body = {{"name", spec.name},
               {"offering", offering_id},
               {"count", spec.count * spec.members},
               {"constraints", {{"same_node", spec.members == 1}}},
               {"priority_class", spec.priority_class},
               {"preemptible", spec.preemptible}};
  auto n = GP_TRY(alloc::parse_allocation(tx, w, body, tenant, project));
  n.activation = alloc::Activation::kWorkload;
  return n;
}

// The allocation of `j`'s next attempt, submitted as the job's first was.
Result<alloc::Allocation> requeue_allocation(store::Tx& tx, const Env& w, alloc::Service& service,
                                             const Job& j) {
  auto tenant = GP_TRY(tenancy::find_tenant(tx, j.tenant_id));
  auto project = GP_TRY(tenancy::find_project(tx, tenancy::TenantScope(j.tenant_id), j.project_id));
  if (!tenant || !project)
    return fail(Error::internal(fmt::format("job {}: its tenant or project is gone", j.id)));
  auto n = GP_TRY(allocation_for(tx, w, j.spec, j.offering_id, *tenant, *project));
  n.queued_since = j.created_at;  // its place in the queue is its first submission's
  return service.create(tx, w, n, std::string(kScheduler));
}

// Moves `j` along event `e`; on a finished state its allocation is released. The transition
// table is next_state's.
Result<void> advance(store::Tx& tx, const Env& w, alloc::Service& service, Job& j, const Event& e,
                     std::string reason) {
  const State from = j.state;
  auto t = GP_TRY(next_state(from, e, j.spec, j.attempts));
  j.state = t.to;
  if (t.failure != Failure::kNone || finished(t.to)) j.failure = t.failure;
  j.reason = std::move(reason);
  if (e.kind == Event::kExited && (finished(t.to) || t.restart)) j.exit_code = e.exit_code;
  // The attempt under way ends here: another starts, or the job is over.
  if (t.restart || t.requeue || finished(t.to))
    GP_TRY(tx.exec(
        "UPDATE job_attempts SET ended_at = ?, end_reason = ? WHERE job_id = ? AND ended_at IS "
        "NULL",
        {w.now(), j.reason, j.id}));
  if (t.requeue) {
    // A new allocation for the next attempt, queued or placed at once (on other nodes: the
    // lost or drained one takes no work). Its members are made when it is placed. One the
    // scheduler refuses (the fleet can no longer hold its shape, its tenant's class forbids it)
    // ends the job instead.
    auto next = requeue_allocation(tx, w, service, j);
    if (!next && next.error().code == ErrorCode::kInternal) return fail(next.error());
    if (!next) {
      j.state = State::kFailed;
      j.failure = Failure::kNodeLost;
      j.reason += "; it cannot be placed again: " + next.error().message;
    } else {
      GP_TRY(tx.exec("DELETE FROM job_members WHERE job_id = ?", {j.id}));
      j.started_at.reset();
      j.allocation_id = next->id;
      GP_TRY_VOID(save(tx, w, j, from));
      if (next->state == alloc::State::kPending) return ok();
      ++j.attempts;
      GP_TRY_VOID(place_members(tx, w, j, *next));
      return advance(tx, w, service, j, Event{Event::kPlaced},
                     "placed again: starting on its nodes");
    }
  }
  if (t.restart) {
    ++j.attempts;
    auto a = GP_TRY(alloc::find_allocation(tx, tenancy::TenantScope(j.tenant_id), j.allocation_id));
    if (!a) return fail(Error::internal(fmt::format("job {}: its allocation is missing", j.id)));
    GP_TRY_VOID(place_members(tx, w, j, *a));
  }
  GP_TRY_VOID(save(tx, w, j, from));
  if (finished(j.state)) GP_TRY_VOID(release_allocation(tx, w, service, j));
  return ok();
}

// A job whose allocation ended without it: how it ends.
std::pair<Event, std::string> ending_for(const alloc::Allocation& a) {
  switch (a.state) {
    case alloc::State::kPreempted:
      if (a.reason_code == "drain_deadline") return {Event{Event::kEvicted}, a.reason};
      return {Event{Event::kPreempt}, "preempted: " + a.reason};
    case alloc::State::kFailed:
      return {Event{Event::kNodeLost}, "its allocation failed: " + a.reason};
    case alloc::State::kExpired:
      return {Event{Event::kCancel}, "its allocation expired"};
    default:
      return {Event{Event::kCancel}, "its allocation was released: " + a.reason};
  }
}

// The job's path as the audit trail names it.
std::string resource_of(const Job& j) {
  return fmt::format("/v1/tenants/{}/projects/{}/jobs/{}", j.tenant_id, j.project_id, j.id);
}

// The project's active volumes (its tree's name and its uid), if it has any.
Result<std::optional<storage::ProjectVolumes>> active_project_volumes(
    store::Tx& tx, const std::string& tenant_id, const std::string& project_id) {
  for (auto& v : GP_TRY(storage::load_volumes(tx, tenant_id)))
    if (v.project_id == project_id && v.state == "active")
      return std::optional<storage::ProjectVolumes>{v.volumes()};
  return std::optional<storage::ProjectVolumes>{};
}

// Node resources a member gets: what its offering gives each unit, times its units; where the
// offering names none, the node's CPU and memory in proportion to the share of its GPUs the
// member holds (whole GPUs, MIG slices as sevenths, shares in thousandths).
struct Share {
  int64_t cpu_millis = 0, memory_bytes = 0;
};
Share node_share(const fleet::Node& node, int node_gpus, const Json& grants) {
  if (node_gpus <= 0) return {};
  double gpus = 0;
  for (const auto& g : grants) {
    if (g.contains("mig"))
      gpus += 1.0 / 7;
    else if (g.contains("milli"))
      gpus += g.value("milli", 0) / 1000.0;
    else
      gpus += 1;
  }
  const double share = std::min(1.0, gpus / node_gpus);
  return {static_cast<int64_t>(static_cast<double>(node.info.cpu_millis) * share),
          static_cast<int64_t>(static_cast<double>(node.info.memory_bytes) * share)};
}
Share member_share(const fleet::Node& node, int node_gpus, const Json& grants,
                   const std::optional<alloc::Offering>& offering, int units) {
  Share s = node_share(node, node_gpus, grants);
  if (offering && offering->unit_cpu_millis > 0) s.cpu_millis = offering->unit_cpu_millis * units;
  if (offering && offering->unit_memory_mib > 0)
    s.memory_bytes = (offering->unit_memory_mib << 20) * units;
  return s;
}

}  // namespace

Json Job::to_json() const { return json_of_fields(*this); }

std::optional<std::string> Job::failure_shown() const {
  if (failure == Failure::kNone) return std::nullopt;
  return std::string(failure_name(failure));
}

Json JobEvent::to_json() const {
  return {{"seq", seq}, {"at", ts(at)}, {"from", from}, {"to", to}, {"reason", reason}};
}

Json Member::to_json() const {
  return {{"rank", rank},
          {"attempt", attempt},
          {"node_id", node_id},
          {"state", state},
          {"exit_code", exit_code ? Json(*exit_code) : Json(nullptr)},
          {"oom", oom},
          {"failure", failure == Failure::kNone ? Json(nullptr) : Json(failure_name(failure))},
          {"error", error.empty() ? Json(nullptr) : Json(error)},
          {"address", address.empty() ? Json(nullptr) : Json(address)},
          {"updated_at", ts(updated_at)}};
}

Result<Job> submit(store::Tx& tx, const Env& w, alloc::Service& service, const JobSpec& spec,
                   const Submission& s) {
  if (s.tenant.state != tenancy::TenantState::kActive)
    return fail(Error::conflict(fmt::format("tenant {} is {}: it cannot start jobs", s.tenant.name,
                                            tenancy::state_name(s.tenant.state))));
  if (!policy::registry_allowed(s.allowed_registries, spec.image))
    return fail(Error::invalid(fmt::format(
        "field 'image': {} is not from a registry the tenant's workload policy allows ({})",
        spec.image, fmt::join(s.allowed_registries, ", "))));
  auto offering = GP_TRY(alloc::find_offering(tx, spec.offering));
  if (!offering)
    return fail(
        Error::invalid(fmt::format("field 'offering': unknown offering \"{}\"", spec.offering)));
  if (offering->delivery != "container")
    return fail(Error::invalid(fmt::format(
        "field 'offering': {} delivers VMs; jobs run on offerings delivered as containers",
        offering->name)));
  if (!spec.volumes.empty() && !GP_TRY(active_project_volumes(tx, s.tenant.id, s.project.id)))
    return fail(Error::invalid(fmt::format(
        "field 'volumes': project {} has no volumes (set them with PUT .../volumes first)",
        s.project.name)));
  // The tenant's id block: its containers' user namespace maps onto it.
  GP_TRY(storage::ensure_ids(tx, s.id_pool, s.tenant.id, s.tenant.name, w.now()));

  auto a = GP_TRY(service.create(
      tx, w, GP_TRY(allocation_for(tx, w, spec, offering->id, s.tenant, s.project)), s.actor));

  Job j;
  j.id = w.ids.next("job");
  j.tenant_id = s.tenant.id;
  j.project_id = s.project.id;
  j.offering_id = offering->id;
  j.allocation_id = a.id;
  j.spec = spec;
  j.spec.offering = offering->name;
  j.reason = a.state == alloc::State::kPending ? a.reason : "submitted";
  j.created_by = s.actor;
  j.created_at = j.updated_at = w.now();
  j.pull_always = s.pull_always;
  j.allowed_registries = s.allowed_registries;
  // Queued, with no attempt yet: the row as `j` holds it now, its spec and its name beside it.
  store::Params params = store::params_of(j);
  params.insert(params.end(), {j.spec.to_json().dump(), spec.name});
  static const std::string kInsert =
      fmt::format("INSERT INTO jobs ({}, spec, name) VALUES ({},?,?)", store::columns_of<Job>(),
                  store::placeholders_of<Job>());
  auto inserted = tx.exec(kInsert, params);
  if (!inserted) {
    if (inserted.error().code == ErrorCode::kConflict)
      return fail(Error::conflict(
          fmt::format("project {} already has a live job named {}", s.project.name, spec.name)));
    return fail(inserted.error());
  }
  GP_TRY_VOID(insert_event(tx, j.id, j.created_at, State::kQueued, State::kQueued, j.reason, true));
  if (alloc::live(a.state) && a.state != alloc::State::kPending) {
    j.attempts = 1;
    GP_TRY_VOID(place_members(tx, w, j, a));
    GP_TRY_VOID(advance(tx, w, service, j, Event{Event::kPlaced}, "placed: starting on its nodes"));
  }
  return j;
}

Result<std::optional<Job>> find_job(store::Tx& tx, const tenancy::TenantScope& scope,
                                    std::string_view id) {
  auto j = GP_TRY(load(tx, std::string(id)));
  if (j && j->tenant_id != scope.tenant_id()) return std::optional<Job>{};
  return j;
}

Result<Page<Job>> list_jobs(store::Tx& tx, const tenancy::TenantScope& scope,
                            const JobFilter& filter, const PageRequest& page) {
  std::string sql = fmt::format("SELECT {} FROM jobs WHERE tenant_id = ? AND id > ?", kJobColumns);
  std::vector<store::Value> args = {scope.tenant_id(), page.after.value_or("")};
  if (filter.project_id) {
    sql += " AND project_id = ?";
    args.emplace_back(*filter.project_id);
  }
  if (filter.state) {
    sql += " AND state = ?";
    args.emplace_back(std::string(state_name(*filter.state)));
  }
  sql += " ORDER BY id LIMIT ?";
  args.emplace_back(int64_t{page.limit} + 1);
  std::vector<Job> items;
  for (const auto& row : GP_TRY(tx.query(sql, args))) items.push_back(GP_TRY(job_from(row)));
  return make_page(std::move(items), page);
}

Result<std::vector<JobEvent>> list_job_events(store::Tx& tx, const std::string& job_id) {
  std::vector<JobEvent> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT seq, at, from_state, to_state, reason FROM job_events WHERE job_id = ? ORDER "
           "BY seq",
           {job_id})))
    out.push_back({row.integer(0), row.integer(1), row.text(2), row.text(3), row.text(4)});
  return out;
}

Result<std::vector<Member>> list_members(store::Tx& tx, const std::string& job_id) {
  std::vector<Member> out;
  for (const auto& row : GP_TRY(tx.query("SELECT rank, attempt, node_id, state, exit_code, oom, "
                                         "failure, error, updated_at, address FROM "
                                         "job_members WHERE job_id = ? ORDER BY rank",
                                         {job_id})))
    out.push_back(GP_TRY(member_from(row)));
  return out;
}

Result<Json> list_attempts(store::Tx& tx, const std::string& job_id) {
  Json out = Json::array();
  for (const auto& row : GP_TRY(
           tx.query("SELECT attempt, allocation_id, nodes, started_at, ended_at, end_reason FROM "
                    "job_attempts WHERE job_id = ? ORDER BY attempt",
                    {job_id}))) {
    // Names beside the ids, for people (a retired node keeps its name; an unknown id stays).
    const Json nodes = Json::parse(row.text(2), nullptr, false);
    Json names = Json::array();
    for (const auto& id : nodes.is_array() ? nodes : Json::array()) {
      auto n = GP_TRY(fleet::find_node(tx, id.get<std::string>()));
      names.push_back(n ? n->info.name : id.get<std::string>());
    }
    out.push_back({{"attempt", row.integer(0)},
                   {"allocation_id", row.text(1)},
                   {"nodes", nodes},
                   {"node_names", names},
                   {"started_at", opt_ts(row.integer(3))},
                   {"ended_at", opt_ts(row.opt_integer(4))},
                   {"end_reason", row.text(5)}});
  }
  return out;
}

Result<Job> cancel(store::Tx& tx, const Env& w, alloc::Service& service,
                   const tenancy::TenantScope& scope, std::string_view id,
                   const std::string& actor) {
  auto found = GP_TRY(find_job(tx, scope, id));
  if (!found) return fail(Error::not_found("job not found"));
  Job j = std::move(*found);
  if (finished(j.state))
    return fail(Error::conflict(
        fmt::format("job {} has already {}", j.spec.name,
                    j.state == State::kSucceeded ? "succeeded" : state_name(j.state))));
  if (j.stop_requested_at) return j;  // being stopped already
  if (j.state == State::kQueued) {
    GP_TRY_VOID(advance(tx, w, service, j, Event{Event::kCancel}, "cancelled by " + actor));
    return j;
  }
  j.stop_requested_at = w.now();
  j.reason = fmt::format("cancel requested by {}: stopping its containers", actor);
  GP_TRY_VOID(save(tx, w, j, j.state));
  return j;
}

Result<std::map<std::string, std::string>> live_job_allocations(store::Tx& tx) {
  std::map<std::string, std::string> out;
  for (const auto& row : GP_TRY(tx.query("SELECT allocation_id, id FROM jobs WHERE state IN "
                                         "('queued', 'starting', 'running')")))
    out[row.text(0)] = row.text(1);
  return out;
}

Result<std::map<std::string, int64_t>> count_jobs_by_state(store::Tx& tx) {
  std::map<std::string, int64_t> out;
  for (const auto& row : GP_TRY(tx.query("SELECT state, COUNT(*) FROM jobs GROUP BY state")))
    out[row.text(0)] = row.integer(1);
  return out;
}

Result<int> sync(store::Tx& tx, const Env& w, alloc::Service& service) {
  int changed = 0;
  for (const auto& row : GP_TRY(tx.query(
           fmt::format("SELECT {} FROM jobs WHERE state IN ('queued', 'starting', 'running') "
                       "ORDER BY id",
                       kJobColumns),
           {}))) {
    Job j = GP_TRY(job_from(row));
    auto a = GP_TRY(alloc::find_allocation(tx, tenancy::TenantScope(j.tenant_id), j.allocation_id));
    if (!a) return fail(Error::internal(fmt::format("job {}: its allocation is missing", j.id)));
    if (!alloc::live(a->state)) {
      auto [event, reason] = ending_for(*a);
      GP_TRY_VOID(advance(tx, w, service, j, event, reason));
      ++changed;
    } else if (j.state == State::kQueued && a->state != alloc::State::kPending) {
      ++j.attempts;
      GP_TRY_VOID(place_members(tx, w, j, *a));
      GP_TRY_VOID(
          advance(tx, w, service, j, Event{Event::kPlaced}, "placed: starting on its nodes"));
      ++changed;
    } else if (j.state == State::kQueued && a->reason != j.reason) {
      j.reason = a->reason;  // the scheduler's latest word on why it waits
      GP_TRY_VOID(save(tx, w, j, j.state));
    } else if (j.state == State::kRunning && !j.stop_requested_at && j.started_at &&
               w.now() >= *j.started_at + j.spec.max_duration_seconds * 1'000'000) {
      j.stop_requested_at = w.now();
      j.failure = Failure::kDeadline;
      j.reason = fmt::format("ran past its maximum duration of {} s: stopping its containers",
                             j.spec.max_duration_seconds);
      GP_TRY_VOID(save(tx, w, j, j.state));
      ++changed;
    }
  }
  return changed;
}

namespace {

// A member's place on its tenant's network: its address, the tenant's VNI and CIDR, rank 0's
// address (MASTER_ADDR), every member of its job by rank (its /etc/hosts), and the tenant's
// members on other nodes with those nodes' underlay
// addresses (the VXLAN's peers). Null when the tenant has no segment.
Result<Json> member_network(store::Tx& tx, const Job& j, int rank, const std::string& node_id) {
  auto segment = GP_TRY(network::load_segment(tx, j.tenant_id));
  if (!segment) return Json(nullptr);
  std::string address, master;
  Json peers = Json::array(), members = Json::array();
  std::map<std::string, std::optional<std::string>> underlays;  // node -> address, looked up once
  for (const auto& row : GP_TRY(tx.query(
           "SELECT m.job_id, m.rank, m.address, m.node_id FROM job_members m JOIN jobs j ON j.id "
           "= m.job_id WHERE j.tenant_id = ? AND j.state IN ('starting', 'running') AND "
           "m.address <> '' ORDER BY m.address",
           {j.tenant_id}))) {
    const bool same_job = row.text(0) == j.id;
    if (same_job && row.integer(1) == rank) address = row.text(2);
    if (same_job && row.integer(1) == 0) master = row.text(2);
    if (same_job) members.push_back({{"rank", row.integer(1)}, {"address", row.text(2)}});
    if (row.text(3) == node_id) continue;
    auto [at, fresh] = underlays.try_emplace(row.text(3));
    if (fresh) at->second = GP_TRY(fleet::underlay_address(tx, row.text(3)));
    if (at->second) peers.push_back({{"address", row.text(2)}, {"node", *at->second}});
  }
  if (address.empty()) return Json(nullptr);
  Json out = json_of_fields(*segment);
  out["address"] = address;
  out["master_addr"] = master;
  out["members"] = members;
  out["peers"] = peers;
  return out;
}

}  // namespace

Result<Json> node_assignment(store::Tx& tx, const std::string& node_id) {
  Json out = Json::array();
  // Most heartbeats come from agents whose node runs no job: one query answers them.
  const auto members = GP_TRY(tx.query(
      "SELECT m.job_id, m.rank, m.attempt, m.state, j.state IN ('starting', 'running'), "
      "j.allocation_id FROM job_members m JOIN jobs j ON j.id = m.job_id WHERE m.node_id = "
      "? ORDER BY m.job_id, m.rank",
      {node_id}));
  if (members.empty()) return out;
  auto node = GP_TRY(fleet::find_node(tx, node_id));
  if (!node) return out;
  const int node_gpus = static_cast<int>(GP_TRY(fleet::list_gpus(tx, node_id)).size());
  // Members of live jobs, and of ended jobs whose allocation's work the node still holds (a
  // stop: they are stopped within its grace, and listed until the agent no longer holds them).
  const auto waits = GP_TRY(alloc::node_waits(tx, node_id));
  const auto configuring = GP_TRY(alloc::node_configuring(tx, node_id));
  std::map<std::string, int64_t> stopping;  // allocation -> grace seconds
  for (const auto& st : GP_TRY(alloc::node_stops(tx, node_id)))
    stopping[st.allocation_id] = st.grace_seconds;
  for (const auto& row : members) {
    const auto stop = stopping.find(row.text(5));
    const bool live_job = row.integer(4) != 0;
    if (!live_job && stop == stopping.end()) continue;
    const Job j = *GP_TRY(load(tx, row.text(0)));
    // A gang starts together or not at all: its members are created first (image, devices,
    // network), and started only once every one of them has its container.
    const bool gang_ready =
        j.spec.members == 1 ||
        GP_TRY(tx.query_one("SELECT COUNT(*) FROM job_members WHERE job_id = ? AND state IN "
                            "('pending', 'failed')",
                            {j.id}))
                ->integer(0) == 0;
    const int rank = static_cast<int>(row.integer(1));
    auto a = GP_TRY(alloc::find_allocation(tx, tenancy::TenantScope(j.tenant_id), j.allocation_id));
    if (!a) continue;
    const bool stops = stop != stopping.end();
    if (!stops && !alloc::live(a->state)) continue;
    const Json grants = a->placement.value("gpus", Json::array());
    const size_t per = grants.size() / static_cast<size_t>(j.spec.members);
    Json mine = Json::array();
    for (size_t k = 0; k < per; ++k) {
      const Json& g = grants[static_cast<size_t>(rank) * per + k];
      Json d = {{"gpu", g.value("gpu", "")}};
      if (g.contains("mig")) d["mig"] = g["mig"];
      if (g.contains("milli")) d["milli"] = g["milli"];
      mine.push_back(std::move(d));
    }
    auto tenant = GP_TRY(tenancy::find_tenant(tx, j.tenant_id));
    auto ids = GP_TRY(storage::load_ids(tx, j.tenant_id));
    if (!tenant || !ids)
      return fail(Error::internal(fmt::format("job {}: its tenant has no id block", j.id)));
    // The member runs as its project's id when the project has volumes, else as the tenant's.
    const auto project = GP_TRY(active_project_volumes(tx, j.tenant_id, j.project_id));
    const uint32_t run_as = project ? project->id : ids->first;
    Json volumes = Json::array();
    for (const auto& v : j.spec.volumes)
      if (project)
        volumes.push_back(
            {{"kind", v.kind},
             {"path", fmt::format("{}/{}/{}", tenant->name, project->project, v.kind)},
             {"read_only", v.read_only}});
    Json env = Json::array();
    for (const auto& e : j.spec.env) env.push_back({{"name", e.name}, {"value", e.value}});
    const Share share = member_share(*node, node_gpus, mine,
                                     GP_TRY(alloc::find_offering(tx, j.offering_id)), j.spec.count);
    auto log =
        GP_TRY(tx.query_one("SELECT attempt, received FROM job_logs WHERE job_id = ? AND rank = ?",
                            {j.id, int64_t{rank}}));
    const int64_t log_offset =
        log && log->integer(0) == row.integer(2) ? log->integer(1) : int64_t{0};
    Json net = GP_TRY(member_network(tx, j, rank, node_id));
    out.push_back(
        {{"job", j.id},
         {"name", j.spec.name},
         {"tenant_id", j.tenant_id},
         {"tenant", tenant->name},
         {"project_id", j.project_id},
         {"allocation_id", j.allocation_id},
         {"rank", rank},
         {"attempt", row.integer(2)},
         {"world_size", j.spec.members},
         {"image", j.spec.image},
         {"pull_always", j.pull_always},
         {"allowed_registries", j.allowed_registries},
         {"command", j.spec.command},
         {"args", j.spec.args},
         {"env", env},
         {"devices", mine},
         {"ids", {{"first", ids->first}, {"count", ids->count}}},
         {"run_as", run_as},
         {"volumes", volumes},
         {"limits", {{"cpu_millis", share.cpu_millis}, {"memory_bytes", share.memory_bytes}}},
         // A member waits ("created") for its gang, for the GPUs an ended allocation's work
         // still holds on this node, and for its GPUs' planned MIG layout.
         {"desired", stops || j.stop_requested_at ? "stopped"
                     : gang_ready && !waits.contains(a->id) && !configuring.contains(a->id)
                         ? "running"
                         : "created"},
         {"stop_grace_seconds", stops ? stop->second : int64_t{kStopGraceSeconds}},
         {"log_offset", log_offset},
         {"network", net},
         // Only a member not started yet needs them: they are opened and sent once, not with
         // every heartbeat while it runs.
         {"secrets", row.text(3) == "pending" ? Json(j.spec.secrets) : Json::array()}});
  }
  return out;
}

Result<std::vector<MemberReport>> parse_reports(const Json& j) {
  if (!j.is_array()) return fail(Error::invalid("jobs: must be an array"));
  if (j.size() > 1024) return fail(Error::invalid("jobs: at most 1024 members per report"));
  std::vector<MemberReport> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = fmt::format("jobs[{}]", i);
    if (!j[i].is_object()) return fail(Error::invalid(where + ": must be an object"));
    ObjectReader r(j[i], where);
    MemberReport m;
    m.job = r.string("job", 64);
    m.rank = static_cast<int>(r.integer("rank", 0, kMaxGangMembers - 1));
    m.attempt = static_cast<int>(r.integer("attempt", 1, kMaxRetries + 1));
    m.state = r.string("state", 16);
    auto code = r.optional_integer("exit_code", -1, 255);
    m.oom = r.optional_bool("oom").value_or(false);
    auto failure = r.optional_string("failure", 32);
    m.error = r.optional_string("error", 2000).value_or("");
    m.image_digest = r.optional_string("image_digest", 128).value_or("");
    m.log_offset = r.optional_integer("log_offset", 0, int64_t{1} << 50).value_or(0);
    m.log_end = r.optional_integer("log_end", 0, int64_t{1} << 50).value_or(m.log_offset);
    m.log = r.optional_string("log", kMaxLogChunk).value_or("");
    GP_TRY_VOID(r.finish());
    if (m.log_end < m.log_offset)
      return fail(Error::invalid(where + ": log_end comes before log_offset"));
    if (m.state != "starting" && m.state != "running" && m.state != "exited" &&
        m.state != "failed" && m.state != "stopped")
      return fail(Error::invalid(
          where + ": state must be one of starting, running, exited, failed, stopped"));
    if (code) m.exit_code = static_cast<int>(*code);
    if (m.state == "exited" && !m.exit_code)
      return fail(Error::invalid(where + ": an exited member reports its exit_code"));
    if (failure) {
      if (*failure == "image_pull")
        m.failure = Failure::kImagePull;
      else if (*failure == "start_failed")
        m.failure = Failure::kStartFailed;
      else
        return fail(Error::invalid(where + ": failure must be image_pull or start_failed"));
    }
    if (m.state == "failed" && m.failure == Failure::kNone) m.failure = Failure::kStartFailed;
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// Appends what the node sent beyond what is kept already, and trims the kept text to the
// member's share of the job's bound. True when something was kept.
Result<bool> append_log(store::Tx& tx, const Job& j, const MemberReport& r) {
  auto row = GP_TRY(tx.query_one(
      "SELECT attempt, received, dropped, text FROM job_logs WHERE job_id = ? AND rank = ?",
      {j.id, int64_t{r.rank}}));
  int64_t attempt = r.attempt, received = 0, dropped = 0;
  std::string text;
  if (row) {
    attempt = row->integer(0);
    received = row->integer(1);
    dropped = row->integer(2);
    text = row->text(3);
  }
  if (row && r.attempt < attempt) return false;  // an earlier attempt's late report
  if (row && r.attempt > attempt) {
    attempt = r.attempt;
    received = 0;
    text += fmt::format("--- attempt {} ---\n", r.attempt);
  }
  // Only what continues the kept output: an earlier chunk again, or one after a gap, is left
  // for the node to send again from the assignment's offset.
  if (r.log_end == r.log_offset || r.log_offset != received) return false;
  text += r.log;
  received = r.log_end;
  const auto limit = static_cast<size_t>(kMaxLogBytes / std::max(1, j.spec.members));
  if (text.size() > limit) {
    const size_t cut = text.size() - limit;
    dropped += static_cast<int64_t>(cut);
    text.erase(0, cut);
  }
  if (row)
    GP_TRY(tx.exec(
        "UPDATE job_logs SET attempt = ?, received = ?, dropped = ?, text = ? WHERE job_id = ? "
        "AND rank = ?",
        {attempt, received, dropped, text, j.id, int64_t{r.rank}}));
  else
    GP_TRY(tx.exec(
        "INSERT INTO job_logs (job_id, rank, attempt, received, dropped, text) VALUES (?, ?, ?, ?, "
        "?, ?)",
        {j.id, int64_t{r.rank}, attempt, received, dropped, text}));
  return true;
}

// Where the job's members stand, once reports are recorded: the event they make, if any.
struct Outcome {
  std::optional<Event> event;
  std::string reason;
};
Outcome evaluate(const Job& j, const std::vector<Member>& members) {
  const auto count = [&](std::string_view state) {
    return std::ranges::count_if(members, [&](const Member& m) { return m.state == state; });
  };
  const auto n = static_cast<int64_t>(members.size());
  for (const auto& m : members)
    if (m.state == "failed")
      return {Event{.kind = Event::kStartFailed, .start_failure = m.failure},
              fmt::format("member {} could not start: {}", m.rank, m.error)};
  if (j.stop_requested_at) {
    if (count("exited") + count("stopped") < n) return {};
    if (j.failure == Failure::kDeadline)
      return {Event{Event::kDeadline}, fmt::format("stopped after its maximum duration of {} s",
                                                   j.spec.max_duration_seconds)};
    return {Event{Event::kCancel}, "cancelled: its containers have stopped"};
  }
  for (const auto& m : members)
    if (m.state == "exited" && (m.exit_code.value_or(0) != 0 || m.oom))
      return {Event{.kind = Event::kExited, .exit_code = m.exit_code.value_or(0), .oom = m.oom},
              m.oom ? fmt::format("member {} ran out of memory", m.rank)
                    : fmt::format("member {} exited with code {}", m.rank, *m.exit_code)};
  if (count("exited") == n) return {Event{Event::kExited}, "every member exited with code 0"};
  if (j.state == State::kStarting && count("running") + count("exited") == n)
    return {Event{Event::kStarted}, "every member runs"};
  return {};
}

}  // namespace

Result<Json> apply_reports(store::Tx& tx, const Env& w, alloc::Service& service,
                           const std::string& node_id, const std::vector<MemberReport>& reports) {
  Json changes = Json::array();
  std::map<std::string, bool> touched;
  for (const auto& r : reports) {
    auto member = GP_TRY(tx.query_one(
        "SELECT attempt, state FROM job_members WHERE job_id = ? AND rank = ? AND node_id = ?",
        {r.job, int64_t{r.rank}, node_id}));
    if (!member) continue;  // not this node's
    auto j = GP_TRY(load(tx, r.job));
    if (!j) continue;
    if (GP_TRY(append_log(tx, *j, r))) tx.announce("job:" + r.job);  // for its followers
    if (member->integer(0) != r.attempt || finished(j->state)) continue;
    // A member that ended stays ended: a late "running" report does not revive it.
    const std::string before = member->text(1);
    if ((before == "exited" || before == "failed" || before == "stopped") && r.state != before)
      continue;
    GP_TRY(
        tx.exec("UPDATE job_members SET state = ?, exit_code = ?, oom = ?, failure = ?, error = ?, "
                "updated_at = ? WHERE job_id = ? AND rank = ?",
                {r.state, store::opt(wide(r.exit_code)), int64_t{r.oom},
                 std::string(failure_name(r.failure)), r.error, w.now(), r.job, int64_t{r.rank}}));
    // Its followers hear of it; so do the nodes of a gang's other members, whose start may
    // wait on this one.
    if (r.state != before) GP_TRY_VOID(announce(tx, *j, false));
    if (!r.image_digest.empty() && j->image_digest != r.image_digest) {
      GP_TRY(tx.exec("UPDATE jobs SET image_digest = ? WHERE id = ?", {r.image_digest, r.job}));
    }
    touched[r.job] = true;
  }
  for (const auto& [id, _] : touched) {
    Job j = *GP_TRY(load(tx, id));
    const auto members = GP_TRY(list_members(tx, id));
    Outcome o = evaluate(j, members);
    if (!o.event) continue;
    const State from = j.state;
    const int attempt = j.attempts;
    if (o.event->kind == Event::kStarted) j.started_at = w.now();
    // An event the job's state does not take (next_state refuses it before anything is
    // written) leaves the job as it is: the reports are recorded, the heartbeat goes on.
    if (auto moved = advance(tx, w, service, j, *o.event, o.reason); !moved) {
      if (moved.error().code == ErrorCode::kConflict) continue;
      return fail(moved.error());
    }
    // Its allocation turns active; one that has just ended (preempted, its node failed) is
    // left to sync(), which ends the job with it.
    if (j.state == State::kRunning)
      if (auto on =
              service.activate(tx, w, j.allocation_id, fmt::format("job {} runs", j.spec.name));
          !on && on.error().code != ErrorCode::kConflict)
        return fail(on.error());
    changes.push_back({{"job", j.id},
                       {"resource", resource_of(j)},
                       {"from", state_name(from)},
                       {"to", state_name(j.state)},
                       {"attempt", attempt},
                       {"reason", j.reason}});
  }
  return changes;
}

Result<std::vector<MemberLog>> job_logs(store::Tx& tx, const std::string& job_id) {
  std::vector<MemberLog> out;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT rank, dropped, text FROM job_logs WHERE job_id = ? ORDER BY rank", {job_id}))) {
    MemberLog m;
    m.rank = static_cast<int>(row.integer(0));
    m.start = row.integer(1);
    m.text = row.text(2);
    m.end = m.start + static_cast<int64_t>(m.text.size());
    out.push_back(std::move(m));
  }
  return out;
}

std::string tail_lines(std::string_view text, int lines) {
  if (lines <= 0) return std::string(text);
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int n = 0; n < lines; ++n) {
    const size_t nl = text.rfind('\n', pos == 0 ? 0 : pos - 1);
    if (nl == std::string_view::npos || pos == 0) return std::string(text);
    pos = nl;
  }
  return std::string(text.substr(pos + 1));
}

}  // namespace gp::jobs
