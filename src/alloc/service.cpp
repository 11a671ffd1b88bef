// The live scheduler over the store: rebuilt from it, changed in the same transaction as the
// rows that record each change, every transition recorded with its reason and audited.
#include <fmt/format.h>

#include <algorithm>

#include "alloc/alloc.h"
#include "alloc/internal.h"
#include "common/env.h"
#include "fleet/fleet.h"
#include "metering/metering.h"

namespace gp::alloc {

using detail::ts;

namespace {

using detail::kScheduler;

// How long the work of an allocation ending for `code` has to stop.
Duration grace_for(const Options& o, std::string_view code) {
  if (code == "preempted" || code == "reclaimed" || code == "drain_deadline")
    return o.preemption_grace;
  if (code == "budget_exhausted") return o.budget_stop_grace;
  return o.stop_grace;
}

// An allocation as its node's assignment lists it: its GPUs on that node.
Json assignment_entry(const Allocation& a, const std::string& node_id) {
  Json gpus = Json::array();
  for (const auto& g : a.placement.value("gpus", Json::array()))
    if (g.value("node", "") == node_id) gpus.push_back(g);
  return {{"id", a.id},
          {"tenant_id", a.tenant_id},
          {"project_id", a.project_id},
          {"state", state_name(a.state)},
          {"tier", sched::tier_name(a.request.tier)},
          {"gpus", gpus}};
}

// When an allocation ended (nullopt: it has no end time, or is gone), as metering::recover asks.
metering::EndedAt allocation_ended_at(store::Tx& tx) {
  return [&tx](const std::string& id) -> Result<std::optional<int64_t>> {
    auto row = GP_TRY(tx.query_one("SELECT ended_at FROM allocations WHERE id = ?", {id}));
    if (!row) return std::optional<int64_t>();
    return row->opt_integer(0);
  };
}

std::string resource_of(const Allocation& a) {
  return fmt::format("/v1/tenants/{}/projects/{}/allocations/{}", a.tenant_id, a.project_id, a.id);
}

// What a placement gave, as its holder reads it: "placed 1 x 3g.71gb MIG instance of H200 on
// gpu-a", "placed 2 H200 GPUs on gpu-a", "placed a 0.25 share of one H200 GPU on gpu-b",
// "placed 2 whole nodes (16 H200 GPUs) on gpu-a, gpu-b". `node_names` as placement_json has them.
std::string placed_reason(const sched::Placement& p, const Json& node_names) {
  std::string on;
  for (const auto& name : node_names) {
    if (!on.empty()) on += ", ";
    on += name.get<std::string>();
  }
  const size_t n = p.gpus.size();
  if (!p.nodes.empty())
    return fmt::format("placed {} whole node{} ({} {} GPUs) on {}", p.nodes.size(),
                       p.nodes.size() == 1 ? "" : "s", n, p.model, on);
  if (!p.mig_profile.empty())
    return fmt::format("placed {} x {} MIG instance{} of {} on {}", n, p.mig_profile,
                       n == 1 ? "" : "s", p.model, on);
  if (n == 1 && p.gpus[0].milli > 0)
    return fmt::format("placed a {:g} share of one {} GPU on {}", p.gpus[0].milli / 1000.0, p.model,
                       on);
  return fmt::format("placed {} {} GPU{} on {}", n, p.model, n == 1 ? "" : "s", on);
}

}  // namespace

Service::Service(audit::AuditLog& audit, const Clock& clock, Options options)
    : audit_(audit), clock_(clock), options_(options) {}

void Service::invalidate() {
  MutexLock lock(mu_);
  dirty_ = true;
}

Result<void> Service::rebuild(store::Tx& tx) {
  sched_.reset();
  orphans_.clear();
  // The fleet: every node not retired, with its GPUs in the modes and MIG layouts the scheduler
  // planned (or, where it planned nothing, as the agent reported them).
  struct NodeRow {
    sched::NodeSpec spec;
    bool schedulable = true;
  };
  std::vector<NodeRow> nodes;
  std::unordered_map<std::string, size_t> node_at;
  for (const fleet::SchedulerNode& row : GP_TRY(fleet::scheduler_nodes(tx))) {
    NodeRow n;
    n.spec.id = row.id;
    n.spec.name = row.name;
    n.spec.pool_id = row.pool_id;
    n.spec.pool_name = row.pool_name;
    n.spec.pool_owner = row.pool_tenant_id;
    n.spec.rack = row.rack;
    n.spec.nvlink_domain = row.nvlink_domain;
    n.schedulable = row.schedulable;
    node_at.emplace(n.spec.id, nodes.size());
    nodes.push_back(std::move(n));
  }
  std::vector<std::pair<std::string, bool>> health;
  for (const fleet::SchedulerGpu& row : GP_TRY(fleet::scheduler_gpus(tx))) {
    auto n = node_at.find(row.node_id);
    if (n == node_at.end()) continue;
    sched::GpuSpec g;
    g.uuid = row.uuid;
    g.index = row.index;
    g.model = row.model;
    if (row.mig_capable) {
      if (auto catalog = vocab::mig_catalog(g.model)) g.mig_catalog = *catalog;
    }
    g.mode = vocab::parse_gpu_mode(row.mode).value_or(vocab::GpuMode::kWhole);
    if (g.mode == vocab::GpuMode::kMig && !g.mig_catalog) g.mode = vocab::GpuMode::kWhole;
    if (g.mode == vocab::GpuMode::kMig) {
      const Json layout = Json::parse(row.mig_layout, nullptr, false);
      if (layout.is_array())
        for (const auto& p : layout)
          g.mig_layout.push_back({p.value("profile", ""), p.value("start", 0)});
    }
    health.emplace_back(g.uuid, row.healthy);
    nodes[n->second].spec.gpus.push_back(std::move(g));
  }
  std::vector<sched::NodeSpec> specs;
  specs.reserve(nodes.size());
  for (const NodeRow& n : nodes) specs.push_back(n.spec);
  auto state = sched::ClusterState::build(std::move(specs));
  if (!state)
    return fail(Error::internal("cannot build the scheduler's view of the fleet: " +
                                state.error().message));
  sched::QuotaTree quota = GP_TRY(detail::load_quota(tx));
  sched_.emplace(std::move(*state), std::move(quota), options_.scheduler);
  for (const auto& row :
       GP_TRY(tx.query("SELECT tenant_id, weight FROM tenant_scheduling WHERE weight <> 1")))
    sched_->set_tenant_weight(row.text(0), row.real(1));

  // Live allocations in submission order: placed ones where they are, pending ones queued.
  const detail::Index index(sched_->state());
  std::vector<metering::LiveAllocation> holding;  // the placed and active ones, for metering
  for (const auto& row : GP_TRY(tx.query(fmt::format(
           "SELECT {} FROM allocations WHERE state IN ('pending','placed','active') ORDER BY "
           "created_at, id",
           detail::allocation_columns())))) {
    Allocation a = GP_TRY(detail::allocation_from(row));
    if (a.state != State::kPending)
      holding.push_back(
          {{a.id, a.tenant_id, a.project_id, a.offering_id, a.request.preemptible, a.placement},
           std::string(state_name(a.state)),
           a.placed_at});
    const TimePoint submitted = from_unix_micros(a.created_at);
    if (a.state == State::kPending) {
      Error why{ErrorCode::kConflict, a.reason};
      if (a.reason_code == "quota_exceeded") why.code = ErrorCode::kQuotaExceeded;
      sched_->restore_pending(a.id, a.request, submitted, std::move(why));
      continue;
    }
    // The lambda gets the scheduler itself: the analysis cannot see mu_ held inside it.
    Result<void> restored = [&, &s = *sched_]() -> Result<void> {
      auto p = GP_TRY(detail::placement_from(a.placement, a.request, s.state(), index));
      return s.restore(a.id, a.request, p, submitted, submitted);
    }();
    if (!restored) orphans_.emplace_back(a.id, restored.error().message);
  }
  GP_TRY_VOID(detail::restore_reservations(tx, *sched_, clock_.now()));
  for (const NodeRow& n : nodes) {
    if (!n.schedulable) GP_TRY_VOID(sched_->set_node_schedulable(n.spec.id, false));
  }
  for (const auto& [uuid, healthy] : health) {
    if (!healthy) GP_TRY_VOID(sched_->set_gpu_healthy(uuid, false));
  }
  // Usage intervals left open by allocations that ended outside this process's view.
  GP_TRY(metering::recover(tx, holding, allocation_ended_at(tx), to_unix_micros(clock_.now())));
  // Downtime intervals the fleet no longer explains (or outages without one), for SLAs.
  GP_TRY(fleet::repair_downtime(tx, to_unix_micros(clock_.now())));
  dirty_ = false;
  return ok();
}

Result<sched::Scheduler*> Service::ensure(store::Tx& tx) {
  if (dirty_ || !sched_) {
    if (Result<void> r = rebuild(tx); !r) {
      sched_.reset();
      dirty_ = true;
      return fail(r.error());
    }
  }
  return &*sched_;
}

namespace {

Result<void> insert_event(store::Tx& tx, const std::string& id, int64_t at, std::string_view from,
                          State to, const std::string& code, const std::string& reason) {
  GP_TRY(
      tx.exec("INSERT INTO allocation_events (allocation_id, seq, at, from_state, to_state, "
              "reason_code, reason) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM "
              "allocation_events WHERE allocation_id = ?",
              {id, at, std::string(from), std::string(state_name(to)), code, reason, id}));
  return ok();
}

}  // namespace

Result<void> Service::entered(store::Tx& tx, const Allocation& a, State to, int64_t now,
                              bool first) {
  // The nodes' agents hear of it at once (they wait on GET /v1/agent/changes).
  if (a.placement.is_object())  // a pending one has none
    for (const auto& node : a.placement.value("nodes", Json::array()))
      tx.announce("node:" + node.get<std::string>());
  // Usage intervals change with the state, in this same transaction; a placement's interval
  // starts at the instant it was stamped as placed_at.
  const metering::AllocationView view{a.id,          a.tenant_id,           a.project_id,
                                      a.offering_id, a.request.preemptible, a.placement};
  const int64_t at = to == State::kPlaced && a.placed_at ? *a.placed_at : now;
  return first ? metering::record_first_state(tx, view, state_name(to), at)
               : metering::record_transition(tx, view, state_name(to), at);
}

Result<void> Service::transition(store::Tx& tx, const Env& w, Allocation& a, State to,
                                 const std::string& code, const std::string& reason,
                                 const std::string& actor) {
  const std::string& id = a.id;
  const State from = a.state;
  const int64_t now = w.now();
  const bool ending = !live(to);
  // Its work stops on its nodes before its GPUs pass on (alloc.h, "stops").
  if (ending && (from == State::kPlaced || from == State::kActive))
    GP_TRY(detail::record_stops(tx, a, now, grace_for(options_, code)));
  GP_TRY(tx.exec(
      "UPDATE allocations SET state = ?, reason_code = ?, reason = ?, updated_at = ?, "
      "ended_at = CASE WHEN ? = 1 THEN ? ELSE ended_at END, version = version + 1 WHERE id = ?",
      {std::string(state_name(to)), code, reason, now, int64_t{ending}, now, id}));
  if (ending) GP_TRY(tx.exec("DELETE FROM allocation_nodes WHERE allocation_id = ?", {id}));
  GP_TRY_VOID(insert_event(tx, id, now, state_name(from), to, code, reason));
  GP_TRY_VOID(entered(tx, a, to, now, /*first=*/false));
  if (actor == kScheduler) {
    audit::Entry e{std::string(kScheduler),
                   a.tenant_id,
                   fmt::format("allocation.{}", state_name(to)),
                   resource_of(a),
                   "success",
                   "",
                   "local",
                   {{"from", state_name(from)}, {"to", state_name(to)}, {"reason", reason}}};
    GP_TRY(audit_.append(tx, e));
  }
  // What the UPDATE above wrote.
  a.state = to;
  a.reason_code = code;
  a.reason = reason;
  a.updated_at = now;
  if (ending) a.ended_at = now;
  a.version += 1;
  return ok();
}

Result<int> Service::end(store::Tx& tx, const Env& w, const std::string& id, State to,
                         const std::string& code, const std::string& reason,
                         const std::string& actor) {
  auto a = GP_TRY(detail::load(tx, id));
  if (!a || !live(a->state)) return 0;
  GP_TRY_VOID(transition(tx, w, *a, to, code, reason, actor));
  return 1;
}

Service::Placed Service::placed_of(const sched::Decision& d) const {
  const sched::Placement& p = *d.placement;
  Placed out{.placement = detail::placement_json(p, sched_->state())};
  out.reason = placed_reason(p, out.placement["node_names"]);
  if (!p.reservation.empty()) out.reason += fmt::format(" held by reservation {}", p.reservation);
  if (d.borrowed_units > 0)
    out.reason +=
        fmt::format(", {} GPU borrowed from the cohort", vocab::format_units(d.borrowed_units));
  return out;
}

Result<Allocation> Service::record_placed(store::Tx& tx, const Env& w, const std::string& id,
                                          const sched::Decision& d, const std::string& actor) {
  const int64_t now = w.now();
  const Placed placed = placed_of(d);
  GP_TRY(tx.exec(
      "UPDATE allocations SET placement = ?, borrowed_units = ?, placed_at = ? WHERE id = ?",
      {placed.placement.dump(), d.borrowed_units, now, id}));
  std::optional<Allocation> a = GP_TRY(detail::load(tx, id));
  if (!a) return fail(Error::internal(fmt::format("allocation {} vanished as it was placed", id)));
  GP_TRY_VOID(transition(tx, w, *a, State::kPlaced, "placed", placed.reason, actor));
  GP_TRY_VOID(record_placement(tx, w, *a, d));
  return std::move(*a);
}

Result<void> Service::record_placement(store::Tx& tx, const Env& w, const Allocation& a,
                                       const sched::Decision& d) {
  const sched::Placement& p = *d.placement;
  const int64_t now = w.now();
  for (const auto& node : a.placement["nodes"])
    GP_TRY_VOID(tx.send("INSERT INTO allocation_nodes (allocation_id, node_id) VALUES (?,?)",
                        {a.id, node.get<std::string>()}));
  // What the GPUs must become: their agents apply these plans. A mode change and a layout
  // change both leave the GPU as the state now holds it.
  std::vector<int32_t> changed;
  changed.reserve(p.mode_changes.size() + p.mig_changes.size());
  for (const auto& c : p.mode_changes) changed.push_back(c.gpu);
  for (const auto& c : p.mig_changes) changed.push_back(c.gpu);
  std::ranges::sort(changed);
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  const auto& gpus = sched_->state().gpus();
  for (const int32_t g : changed) {
    Json layout = Json::array();
    for (const auto& i : sched_->state().mig_layout(g))
      layout.push_back({{"profile", i.profile}, {"start", i.start}});
    GP_TRY_VOID(fleet::plan_gpu(tx, gpus[g].uuid, sched::gpu_mode_name(gpus[g].mode), layout, now));
  }
  return record_preempted(tx, w, d.preempted, a.id, a.tenant_id);
}

Result<void> Service::record_preempted(store::Tx& tx, const Env& w,
                                       const std::vector<std::string>& victims,
                                       const std::string& by, const std::string& by_tenant) {
  // Those that had to make room get their reason and a grace period to stop.
  const int64_t now = w.now();
  for (const std::string& victim : victims) {
    auto v = GP_TRY(detail::load(tx, victim));
    if (!v) continue;
    const bool same_tenant = v->tenant_id == by_tenant;
    const bool for_reservation = by.starts_with("rsv");
    const std::string why =
        for_reservation ? fmt::format("preempted: the window of reservation {} of tenant {} began",
                                      by, by_tenant)
        : same_tenant   ? fmt::format("preempted by higher-priority allocation {}", by)
                      : fmt::format("reclaimed: borrowed quota returned to lender tenant {} for {}",
                                    by_tenant, by);
    const int64_t grace =
        now +
        std::chrono::duration_cast<std::chrono::microseconds>(options_.preemption_grace).count();
    GP_TRY(tx.exec("UPDATE allocations SET grace_until = ? WHERE id = ?", {grace, victim}));
    GP_TRY_VOID(transition(tx, w, *v, State::kPreempted,
                           same_tenant || for_reservation ? "preempted" : "reclaimed", why,
                           std::string(kScheduler)));
  }
  return ok();
}

Result<Allocation> Service::create(store::Tx& tx, const Env& w, const NewAllocation& n,
                                   const std::string& actor) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  const std::string id = w.ids.next("alc");
  const int64_t now = w.now();
  const int64_t queued_since = std::min(now, n.queued_since.value_or(now));
  sched::Decision d =
      s->submit(id, n.request, from_unix_micros(now), from_unix_micros(queued_since));
  if (d.kind == sched::DecisionKind::kRejected) return fail(*d.reason);
  changed_ = true;
  // The row is written once, as it ends this call: placed, or pending with its reason. The
  // events say both steps of a placed one.
  Allocation a;
  a.id = id;
  a.tenant_id = n.request.tenant;
  a.project_id = n.request.project;
  a.name = n.name.empty() ? id : n.name;
  a.offering_id = n.offering_id;
  a.request = n.request;
  a.reason_code = d.reason ? detail::reason_code(*d.reason) : "";
  a.reason = d.reason ? d.reason->message : "";
  a.end_at = n.end_at;
  a.created_by = actor;
  a.created_at = queued_since;
  a.updated_at = now;
  a.activation = n.activation;
  std::vector<Event> events{{.seq = 1,
                             .at = now,
                             .from = "",
                             .to = std::string(state_name(State::kPending)),
                             .reason_code = a.reason_code.empty() ? "submitted" : a.reason_code,
                             .reason = d.reason ? d.reason->message : "submitted"}};
  if (d.kind == sched::DecisionKind::kPlaced) {
    const Placed placed = placed_of(d);
    a.state = State::kPlaced;
    a.reason_code = "placed";
    a.reason = placed.reason;
    a.placement = placed.placement;
    a.borrowed_units = d.borrowed_units;
    a.placed_at = now;
    a.version = 2;  // as a pending row moved to placed reads
    events.push_back({.seq = 2,
                      .at = now,
                      .from = std::string(state_name(State::kPending)),
                      .to = std::string(state_name(State::kPlaced)),
                      .reason_code = a.reason_code,
                      .reason = a.reason});
  }
  GP_TRY_VOID(detail::insert_allocation(tx, a));
  GP_TRY_VOID(detail::insert_first_events(tx, id, events));
  if (a.state == State::kPlaced) {
    GP_TRY_VOID(entered(tx, a, State::kPlaced, now, /*first=*/true));
    GP_TRY_VOID(record_placement(tx, w, a, d));
    // It may have taken a reservation's hold.
    if (!d.placement->reservation.empty()) GP_TRY_VOID(sync_reservations(tx, w));
  }
  return a;
}

Result<Json> Service::dry_run(store::Tx& tx, const NewAllocation& n) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  // What the create would say: a request no wait can place is refused, not probed.
  if (std::optional<Error> never = s->never_fits(n.request)) return fail(*never);
  Result<sched::Placement> p = s->probe(n.request);
  if (!p && p.error().code == ErrorCode::kInvalidArgument) return fail(p.error());
  Json out = {{"dry_run", true},
              {"would_place", p.has_value()},
              {"shape", detail::request_json(n.request)}};
  if (p) {
    out["placement"] = detail::placement_json(*p, s->state());
  } else {
    out["reason_code"] = detail::reason_code(p.error());
    out["reason"] = p.error().message;
  }
  return out;
}

Result<int> Service::schedule(store::Tx& tx, const Env& w) {
  sched::Scheduler* s = &*sched_;
  int n = 0;
  for (const sched::Decision& d : s->schedule(from_unix_micros(w.now()))) {
    changed_ = true;
    if (d.allocation_id.starts_with("reservation:")) {  // a window began: its hold is placed
      GP_TRY_VOID(record_preempted(tx, w, d.preempted,
                                   d.allocation_id.substr(std::string_view("reservation:").size()),
                                   d.placement->tenant));
      continue;
    }
    GP_TRY(record_placed(tx, w, d.allocation_id, d, std::string(kScheduler)));
    ++n;
  }
  GP_TRY_VOID(sync_reservations(tx, w));
  // Keep each waiting allocation's stated reason current.
  std::unordered_map<std::string, std::pair<std::string, std::string>> reasons;
  for (const auto& v : s->pending(from_unix_micros(w.now())))
    reasons.emplace(v.allocation_id, std::pair(detail::reason_code(v.reason), v.reason.message));
  for (const auto& row : GP_TRY(
           tx.query("SELECT id, reason_code, reason FROM allocations WHERE state = 'pending'"))) {
    auto it = reasons.find(row.text(0));
    if (it == reasons.end()) continue;
    if (it->second.first != row.text(1) || it->second.second != row.text(2))
      GP_TRY(
          tx.exec("UPDATE allocations SET reason_code = ?, reason = ?, updated_at = ? WHERE id = ?",
                  {it->second.first, it->second.second, w.now(), row.text(0)}));
  }
  return n;
}

Result<Allocation> Service::release(store::Tx& tx, const Env& w, const tenancy::TenantScope& scope,
                                    const std::string& id, const std::string& reason) {
  MutexLock lock(mu_);
  auto a = GP_TRY(find_allocation(tx, scope, id));
  if (!a) return fail(Error::not_found("allocation not found"));
  if (!live(a->state))
    return fail(Error::conflict(fmt::format("allocation is already {}", state_name(a->state))));
  sched::Scheduler* s = GP_TRY(ensure(tx));
  changed_ = true;
  if (Result<void> r = s->release(id, from_unix_micros(w.now()));
      !r && r.error().code != ErrorCode::kNotFound)
    return fail(r.error());
  GP_TRY_VOID(transition(tx, w, *a, State::kReleased, "released",
                         reason.empty() ? "released by its owner" : reason, ""));
  GP_TRY(schedule(tx, w));
  return *GP_TRY(detail::load(tx, id));
}

Result<void> Service::activate(store::Tx& tx, const Env& w, const std::string& id,
                               const std::string& reason) {
  auto a = GP_TRY(detail::load(tx, id));
  if (!a) return fail(Error::not_found(fmt::format("allocation {} not found", id)));
  if (a->state == State::kActive) return ok();
  if (a->state != State::kPlaced)
    return fail(
        Error::conflict(fmt::format("allocation {} is {}, not placed", id, state_name(a->state))));
  return transition(tx, w, *a, State::kActive, "active", reason, std::string(kScheduler));
}

Result<int> Service::tick(store::Tx& tx, const Env& w) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  int n = 0;
  for (const auto& [id, why] : std::exchange(orphans_, {})) {
    changed_ = true;
    n += GP_TRY(end(tx, w, id, State::kFailed, "lost_resources",
                    "its GPUs are no longer in the fleet: " + why, std::string(kScheduler)));
  }
  const int64_t now = w.now();
  for (const auto& row : GP_TRY(tx.query(
           "SELECT id FROM allocations WHERE state IN ('pending','placed','active') AND end_at "
           "IS NOT NULL AND end_at <= ? ORDER BY end_at, id",
           {now}))) {
    changed_ = true;
    (void)s->release(row.text(0), from_unix_micros(now));
    n += GP_TRY(end(tx, w, row.text(0), State::kExpired, "expired", "its end time passed",
                    std::string(kScheduler)));
  }
  // A drain's deadline has passed: what still runs there is evicted (preempted, with the
  // preemption grace); a job among it is queued again elsewhere (jobs::sync).
  for (const fleet::Node& node : GP_TRY(fleet::overdue_drains(tx, now))) {
    for (const auto& row : GP_TRY(tx.query(
             "SELECT allocation_id FROM allocation_nodes WHERE node_id = ? ORDER BY allocation_id",
             {node.id}))) {
      changed_ = true;
      (void)s->release(row.text(0), from_unix_micros(now));
      n += GP_TRY(end(tx, w, row.text(0), State::kPreempted, "drain_deadline",
                      fmt::format("evicted: the drain of node {} reached its deadline ({})",
                                  node.info.name, node.state_reason),
                      std::string(kScheduler)));
    }
  }
  n += GP_TRY(schedule(tx, w));
  n += GP_TRY(complete_drains(tx, w));
  return n;
}

Result<int> Service::complete_drains(store::Tx& tx, const Env& w) {
  int n = 0;
  for (const fleet::Node& node : GP_TRY(fleet::draining_nodes(tx))) {
    // Drained once nothing is on it and no ended allocation's work still stops there.
    if (GP_TRY(tx.query_one("SELECT node_id FROM allocation_nodes WHERE node_id = ? UNION ALL "
                            "SELECT node_id FROM allocation_stops WHERE node_id = ? LIMIT 1",
                            {node.id, node.id})))
      continue;
    GP_TRY(
        fleet::apply_action(tx, w, node.id, fleet::NodeAction::kDrainComplete, node.state_reason));
    audit::Entry e{std::string(kScheduler),
                   "",
                   "node.drain_complete",
                   "/v1/nodes/" + node.id,
                   "success",
                   "",
                   "local",
                   {{"node", node.info.name}, {"to", "maintenance"}}};
    GP_TRY(audit_.append(tx, e));
    ++n;
  }
  return n;
}

Result<Json> Service::acknowledge(store::Tx& tx, const Env& w, const std::string& node_id) {
  Json allocations = Json::array();
  const auto waits = GP_TRY(node_waits(tx, node_id));
  const auto configuring = GP_TRY(node_configuring(tx, node_id));
  for (const auto& row : GP_TRY(tx.query(
           "SELECT allocation_id FROM allocation_nodes WHERE node_id = ? ORDER BY allocation_id",
           {node_id}))) {
    auto a = GP_TRY(detail::load(tx, row.text(0)));
    const auto stopped_first = waits.find(a->id);
    const auto configured_first = configuring.find(a->id);
    if (a->state == State::kPlaced && a->activation == Activation::kNode &&
        stopped_first == waits.end() && configured_first == configuring.end()) {
      // Its nodes (allocation_nodes holds the placement's while it is live) have all been
      // heard from since it was placed.
      std::vector<std::string> nodes;
      for (const auto& node : a->placement.value("nodes", Json::array()))
        nodes.push_back(node.get<std::string>());
      if (GP_TRY(fleet::all_heard_since(tx, nodes, a->placed_at.value_or(0)))) {
        GP_TRY_VOID(transition(tx, w, *a, State::kActive, "active",
                               "every node of the allocation has it", std::string(kScheduler)));
        a->state = State::kActive;
      }
    }
    Json entry = assignment_entry(*a, node_id);
    // Nothing of it starts while an ended allocation's work still holds one of its GPUs.
    if (stopped_first != waits.end()) entry["waiting_for"] = stopped_first->second;
    // Nor while its GPUs do not yet have the mode and MIG layout the scheduler planned.
    if (configured_first != configuring.end()) entry["configuring"] = configured_first->second;
    // A VM that cannot be described (its offering names a shape with no vGPU type) must not
    // stop the node's other assignments: the agent is told why instead.
    if (auto vm = vm_assignment(tx, w, *a, node_id); !vm)
      entry["vm_error"] = vm.error().message;
    else if (!vm->is_null())
      entry["vm"] = std::move(*vm);
    allocations.push_back(std::move(entry));
  }
  // Ended allocations whose work the node still holds: the agent stops it within the grace.
  for (const Stop& stop : GP_TRY(node_stops(tx, node_id))) {
    auto a = GP_TRY(detail::load(tx, stop.allocation_id));
    if (!a) continue;
    Json entry = assignment_entry(*a, node_id);
    entry["stop"] = stop.to_json();
    if (auto vm = vm_assignment(tx, w, *a, node_id, true); vm && !vm->is_null())
      entry["vm"] = std::move(*vm);
    allocations.push_back(std::move(entry));
  }
  // Every plan of the node's GPUs, carried out or not: the agent checks each round that the GPU
  // still matches (an instance left without its compute instance by a crash is made whole).
  Json plans = Json::array();
  for (const fleet::GpuPlan& p : GP_TRY(fleet::node_gpu_plans(tx, node_id)))
    plans.push_back({{"gpu", p.gpu},
                     {"mode", p.mode},
                     {"mig_layout", Json::parse(p.mig_layout)},
                     {"status", p.status}});
  return Json{{"allocations", allocations}, {"gpu_plans", plans}};
}

Result<int> Service::end_work(store::Tx& tx, const Env& w, const std::string& tenant_id,
                              const std::optional<std::string>& project_id, const std::string& code,
                              const std::string& reason) {
  MutexLock lock(mu_);
  const int n = GP_TRY(end_all(tx, w, tenant_id, project_id, code, reason));
  GP_TRY(schedule(tx, w));
  return n;
}

Result<int> Service::end_all(store::Tx& tx, const Env& w, const std::string& tenant_id,
                             const std::optional<std::string>& project_id, const std::string& code,
                             const std::string& reason) {
  sched::Scheduler* s = GP_TRY(ensure(tx));
  int n = 0;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT id FROM allocations WHERE tenant_id = ? AND (? = '' OR project_id = ?) AND "
           "state IN ('pending','placed','active') ORDER BY id",
           {tenant_id, project_id.value_or(""), project_id.value_or("")}))) {
    changed_ = true;
    (void)s->release(row.text(0), w.clock.now());
    n += GP_TRY(end(tx, w, row.text(0), State::kReleased, code, reason, std::string(kScheduler)));
  }
  return n;
}

Result<int> Service::offboard(store::Tx& tx, const Env& w, const std::string& tenant_id) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  changed_ = true;
  const int n = GP_TRY(end_all(tx, w, tenant_id, std::nullopt, "tenant_offboarded",
                               "the tenant is being offboarded"));
  for (const auto& row : GP_TRY(tx.query(
           "SELECT id FROM reservations WHERE tenant_id = ? AND state IN ('scheduled','active')",
           {tenant_id}))) {
    (void)s->cancel_reservation(row.text(0), w.clock.now());
    GP_TRY(
        tx.exec("UPDATE reservations SET state = 'cancelled', reason = 'the tenant is being "
                "offboarded', updated_at = ?, version = version + 1 WHERE id = ?",
                {w.now(), row.text(0)}));
  }
  GP_TRY(schedule(tx, w));
  return n;
}

Result<int> Service::node_failed(store::Tx& tx, const Env& w, const std::string& node_id,
                                 const std::string& reason) {
  MutexLock lock(mu_);
  // What ran there is gone with the node; its allocations' other nodes get stops.
  GP_TRY_VOID(detail::drop_node_stops(tx, node_id));
  int n = 0;
  for (const auto& row : GP_TRY(tx.query(
           "SELECT allocation_id FROM allocation_nodes WHERE node_id = ? ORDER BY allocation_id",
           {node_id})))
    n += GP_TRY(
        end(tx, w, row.text(0), State::kFailed, "node_failed", reason, std::string(kScheduler)));
  // The rebuild leaves the failed allocations out and the node unschedulable.
  dirty_ = true;
  changed_ = true;
  return n;
}

Result<Json> Service::why(store::Tx& tx, const Env& w, const Allocation& a, Audience audience) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  Json out = {{"id", a.id},
              {"state", state_name(a.state)},
              {"reason_code", a.reason_code},
              {"reason", a.reason}};
  Json events = Json::array();
  for (const auto& e : GP_TRY(list_events(tx, a.id))) events.push_back(e.to_json());
  out["events"] = events;
  if (a.state != State::kPending) return out;
  const bool whole_fleet = audience == Audience::kOperator;
  int position = 0, length = 0, ahead_same_tenant = 0;
  bool seen = false;
  for (const auto& v : s->pending(w.clock.now())) {
    const bool own = v.request.tenant == a.tenant_id;
    if (!whole_fleet && !own) continue;
    ++length;
    if (seen) continue;
    ++position;
    if (v.allocation_id == a.id)
      seen = true;
    else if (own)
      ++ahead_same_tenant;
  }
  out["queue"] = {{"counts", whole_fleet ? "every tenant's waiting allocations"
                                         : "this tenant's waiting allocations"},
                  {"position", position},
                  {"length", length},
                  {"ahead_of_same_tenant", ahead_same_tenant}};
  // Quota at every level for the models the request may use.
  Json quota = Json::array();
  std::vector<std::string> models = a.request.models;
  if (models.empty())
    for (const auto& [m, unused] : s->state().limits().models) models.push_back(m);
  for (const std::string& m : models) {
    auto t = s->quota().tenant_usage(a.tenant_id, m);
    auto p = s->quota().project_usage(a.tenant_id, a.project_id, m);
    auto model = s->state().limits().models.find(m);
    const int64_t need = model == s->state().limits().models.end()
                             ? 0
                             : sched::request_units(a.request, model->second);
    auto level = [&](const sched::QuotaTree::Usage& u) -> Json {
      if (!u.configured) return nullptr;
      return detail::model_quota_json({u.limits.nominal, u.limits.borrow_limit, u.limits.limit},
                                      &u);
    };
    auto platform_limit = s->quota().platform_limit(m);
    Json platform = {
        {"limit", platform_limit ? Json(static_cast<double>(*platform_limit) / vocab::kUnitsPerGpu)
                                 : Json(nullptr)}};
    // The platform's use is every tenant's: operators only.
    if (whole_fleet)
      platform["used"] = static_cast<double>(s->quota().platform_used(m)) / vocab::kUnitsPerGpu;
    quota.push_back({{"model", m},
                     {"needs_gpu_equivalents", static_cast<double>(need) / vocab::kUnitsPerGpu},
                     {"tenant", level(t)},
                     {"project", level(p)},
                     {"platform", platform}});
  }
  out["quota"] = quota;
  // And whether the fleet has room for it right now, quota aside.
  sched::Request ignoring_quota = a.request;
  Result<sched::Placement> fits = sched::place(s->state(), ignoring_quota);
  out["capacity"] = fits ? Json{{"fits_now", true},
                                {"note",
                                 "GPUs are free for it; what holds it back is quota or "
                                 "queue order"}}
                         : Json{{"fits_now", false}, {"reason", fits.error().message}};
  return out;
}

Result<Json> Service::queue(store::Tx& tx, const Env& w, const std::string& tenant_id,
                            Audience audience) {
  if (tenant_id.empty() && audience != Audience::kOperator)
    return fail(Error::internal("the whole queue is the operators' view"));
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  const TimePoint now = w.clock.now();
  const bool whole_fleet = audience == Audience::kOperator;
  Json items = Json::array();
  int position = 0;
  for (const auto& v : s->pending(now)) {
    const bool listed = tenant_id.empty() || v.request.tenant == tenant_id;
    // A tenant's positions count its own waiting allocations only.
    if (whole_fleet || listed) ++position;
    if (!listed) continue;
    Json shape = detail::request_json(v.request);
    items.push_back({{"position", position},
                     {"id", v.allocation_id},
                     {"tenant_id", v.request.tenant},
                     {"project_id", v.request.project},
                     {"priority_class", detail::priority_class(v.request.priority)},
                     {"shape", shape},
                     {"reason_code", detail::reason_code(v.reason)},
                     {"reason", v.reason.message},
                     {"submitted_at", format_rfc3339(v.submitted)},
                     {"fair_share_usage", s->fair_share_usage(v.request.tenant, now)}});
  }
  return Json{{"counts", whole_fleet ? "every tenant's waiting allocations"
                                     : "this tenant's waiting allocations"},
              {"items", items},
              {"length", position}};
}

Result<Json> Service::tenant_quota(store::Tx& tx, const std::string& tenant_id) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  TenantQuota q = GP_TRY(load_tenant_quota(tx, tenant_id));
  Json models = Json::object();
  for (const auto& [m, mq] : q.models) {
    auto u = s->quota().tenant_usage(tenant_id, m);
    models[m] = detail::model_quota_json(mq, &u);
  }
  Json caps = Json::object();
  for (const auto& [m, profiles] : q.profile_caps)
    for (const auto& [profile, cap] : profiles)
      caps[m][profile] = {{"max_instances", cap},
                          {"used", s->quota().profile_used(tenant_id, m, profile)}};
  return Json{{"tenant_id", tenant_id},
              {"cohort", q.cohort.empty() ? Json(nullptr) : Json(q.cohort)},
              {"weight", q.weight},
              {"models", models},
              {"profile_caps", caps}};
}

Result<Json> Service::project_quota(store::Tx& tx, const std::string& tenant_id,
                                    const std::string& project_id) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  ProjectQuota q = GP_TRY(load_project_quota(tx, tenant_id, project_id));
  Json models = Json::object();
  for (const auto& [m, mq] : q.models) {
    auto u = s->quota().project_usage(tenant_id, project_id, m);
    models[m] = detail::model_quota_json(mq, &u);
  }
  return Json{{"tenant_id", tenant_id}, {"project_id", project_id}, {"models", models}};
}

Result<std::vector<sched::QuotaTree::TenantModelUsage>> Service::quota_usages(store::Tx& tx) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  return s->quota().tenant_usages();
}

Result<Json> Service::platform_quota(store::Tx& tx) {
  MutexLock lock(mu_);
  sched::Scheduler* s = GP_TRY(ensure(tx));
  Json models = Json::object();
  for (const auto& [m, model] : s->state().limits().models) {
    auto limit = s->quota().platform_limit(m);
    models[m] = {
        {"gpus", model.total_gpus},
        {"used", static_cast<double>(s->quota().platform_used(m)) / vocab::kUnitsPerGpu},
        {"limit", limit ? Json(static_cast<double>(*limit) / vocab::kUnitsPerGpu) : Json(nullptr)}};
  }
  for (const auto& row : GP_TRY(tx.query("SELECT model, hard_limit FROM platform_quotas")))
    if (!models.contains(row.text(0)))
      models[row.text(0)] = {{"gpus", 0},
                             {"used", 0},
                             {"limit", static_cast<double>(row.integer(1)) / vocab::kUnitsPerGpu}};
  return Json{{"models", models}};
}

}  // namespace gp::alloc
