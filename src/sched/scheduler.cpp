// Scheduler: submit (validate -> quota -> place -> apply), release, the pending queue and
// preemption, over an owned ClusterState and QuotaTree.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "sched/sched.h"

namespace gp::sched {

std::string_view decision_kind_name(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::kPlaced:
      return "placed";
    case DecisionKind::kPending:
      return "pending";
    case DecisionKind::kRejected:
      return "rejected";
  }
  return "pending";
}

Scheduler::Scheduler(ClusterState state, QuotaTree quota, SchedulerOptions options)
    : state_(std::move(state)), quota_(std::move(quota)), options_(options) {}

const Scheduler::Held* Scheduler::held(const std::string& id) const {
  auto it = held_.find(id);
  return it == held_.end() ? nullptr : &it->second;
}

void Scheduler::set_tenant_weight(const std::string& tenant, double weight) {
  shares_[tenant].weight = weight > 0 ? weight : 1;
}

namespace {

double decayed(double usage, int64_t held_units, TimePoint at, TimePoint now, Duration half_life) {
  const double dt = std::chrono::duration<double>(now - at).count();
  if (dt <= 0) return usage;
  const double h = std::chrono::duration<double>(half_life).count();
  return usage * std::exp2(-dt / h) + static_cast<double>(held_units) * dt;
}

}  // namespace

void Scheduler::touch_share(const std::string& tenant, TimePoint now, int64_t delta_units) {
  Share& s = shares_[tenant];
  if (now > s.at) {
    s.usage = decayed(s.usage, s.held_units, s.at, now, options_.fair_share_half_life);
    s.at = now;
  }
  s.held_units += delta_units;
}

double Scheduler::fair_share_usage(const std::string& tenant, TimePoint now) const {
  auto it = shares_.find(tenant);
  if (it == shares_.end()) return 0;
  const Share& s = it->second;
  return decayed(s.usage, s.held_units, s.at, now, options_.fair_share_half_life);
}

double Scheduler::share_key(const std::string& tenant, TimePoint now) const {
  auto it = shares_.find(tenant);
  const double weight = it == shares_.end() ? 1 : it->second.weight;
  return fair_share_usage(tenant, now) / weight;
}

std::vector<QuotaCharge> Scheduler::charges(const Request& request) const {
  const FleetLimits& limits = state_.limits();
  std::vector<QuotaCharge> out;
  auto add = [&](const std::string& model, const auto& model_limits) {
    const int64_t units = request_units(request, model_limits);
    if (units <= 0) return;
    out.push_back({request.tenant, request.project, model, units,
                   request.tier == Tier::kMig ? request.mig_profile : "",
                   request.tier == Tier::kMig ? request.count : 0});
  };
  if (request.models.empty()) {
    out.reserve(limits.models.size());
    for (const auto& [name, model_limits] : limits.models) add(name, model_limits);
  } else {
    for (const std::string& model : request.models)
      if (auto it = limits.models.find(model); it != limits.models.end()) add(model, it->second);
  }
  return out;
}

std::optional<Error> Scheduler::never_fits(const Request& request) const {
  std::optional<Error> first;
  for (const QuotaCharge& c : charges(request)) {
    std::optional<Error> e = quota_.over_hard_limit(c);
    if (!e) return std::nullopt;  // this model may fit once others release
    if (!first) first = std::move(e);
  }
  return first;
}

Result<Placement> Scheduler::admit_and_place(const Request& request, QuotaCharge* charge,
                                             Admission* admission) const {
  Request restricted = request;
  restricted.models.clear();
  std::vector<std::pair<QuotaCharge, Admission>> admitted;
  std::optional<Error> quota_error;
  for (QuotaCharge& c : charges(request)) {
    const std::string model = c.model;
    Result<Admission> a = quota_.admit(c);
    if (!a) {
      if (!quota_error) quota_error = a.error();
      continue;
    }
    restricted.models.push_back(model);
    admitted.emplace_back(std::move(c), *a);
  }
  if (restricted.models.empty()) {
    return fail(quota_error ? *quota_error
                            : Error::invalid("no GPU model of the fleet suits the request"));
  }
  Result<Placement> placed = place(state_, restricted);
  if (!placed) {
    if (quota_error) placed.error().message += "; other models: " + quota_error->message;
    return placed;
  }
  for (std::size_t i = 0; i < restricted.models.size(); ++i) {
    if (restricted.models[i] == placed->model) {
      *charge = admitted[i].first;
      *admission = admitted[i].second;
    }
  }
  return placed;
}

Scheduler::VictimKey Scheduler::victim_key(const std::string& id, const Held& h) {
  return {h.request.priority, -h.submitted.time_since_epoch().count(), -h.seq, id};
}

void Scheduler::index_victim(const std::string& id, const Held& h, bool add) {
  TenantVictims& v = victims_[h.request.tenant];
  const VictimKey key = victim_key(id, h);
  if (add) {
    if (h.request.preemptible) v.preemptible.insert(key);
    if (h.borrowed > 0) v.borrowed.insert(key);
  } else {
    v.preemptible.erase(key);
    v.borrowed.erase(key);
  }
}

std::vector<std::string> Scheduler::victims(const Request& request, bool any_preemptible) const {
  const FleetLimits& limits = state_.limits();
  std::vector<std::string> models = request.models;
  if (models.empty()) {
    for (const auto& [name, unused] : limits.models) models.push_back(name);
  }
  auto model_ok = [&](const std::string& id, const std::vector<std::string>& allowed) {
    return std::ranges::find(allowed, held_.at(id).charge.model) != allowed.end();
  };
  std::vector<std::string> out;
  // Lender reclaim: borrowed allocations of the other cohort members, on the models where the
  // requester stays within its own nominal quota.
  const std::string cohort = quota_.cohort_of(request.tenant);
  std::vector<std::string> reclaim;
  if (!cohort.empty()) {
    for (const std::string& m : models) {
      auto it = limits.models.find(m);
      if (it == limits.models.end()) continue;
      const QuotaTree::Usage u = quota_.tenant_usage(request.tenant, m);
      if (u.used + request_units(request, it->second) <= u.limits.nominal) reclaim.push_back(m);
    }
  }
  if (!reclaim.empty()) {
    std::vector<VictimKey> keys;
    for (const std::string& member : quota_.cohort_members(cohort)) {
      if (member == request.tenant) continue;
      auto v = victims_.find(member);
      if (v == victims_.end()) continue;
      for (const VictimKey& key : v->second.borrowed) {
        if (model_ok(std::get<3>(key), reclaim)) keys.push_back(key);
        if (static_cast<int>(keys.size()) >= options_.max_victims) break;
      }
    }
    std::ranges::sort(keys);
    for (VictimKey& key : keys) out.push_back(std::move(std::get<3>(key)));
  }
  // The requester's own lower-priority preemptible work.
  if (auto v = victims_.find(request.tenant); v != victims_.end()) {
    for (const VictimKey& key : v->second.preemptible) {
      if (std::get<0>(key) >= request.priority) break;
      if (model_ok(std::get<3>(key), models)) out.push_back(std::get<3>(key));
      if (static_cast<int>(out.size()) >= 2 * options_.max_victims) break;
    }
  }
  // A reservation's window opening: preemptible work of any tenant makes room.
  if (any_preemptible) {
    std::vector<VictimKey> keys;
    for (const auto& [tenant, v] : victims_) {
      if (tenant == request.tenant) continue;
      for (const VictimKey& key : v.preemptible) {
        if (model_ok(std::get<3>(key), models)) keys.push_back(key);
        if (static_cast<int>(keys.size()) >= options_.max_victims) break;
      }
    }
    std::ranges::sort(keys);
    for (VictimKey& key : keys) {
      // A borrowed allocation may already be listed as a reclaim victim.
      if (std::ranges::find(out, std::get<3>(key)) == out.end())
        out.push_back(std::move(std::get<3>(key)));
    }
  }
  if (static_cast<int>(out.size()) > options_.max_victims) out.resize(options_.max_victims);
  return out;
}

bool Scheduler::bound_by_reservations(const Request& request, TimePoint now) const {
  if (request.preemptible) return false;
  for (const auto& [rid, r] : reservations_) {
    if (r.active || r.used || now >= r.start) continue;
    if (!request.end || *request.end > r.start) return true;
  }
  return false;
}

std::optional<std::string> Scheduler::crowds_reservation(const Request& request, TimePoint now) {
  if (!bound_by_reservations(request, now)) return std::nullopt;
  // Place every upcoming reservation the request would overlap, together, beside it.
  std::vector<std::string> tentative;
  std::optional<std::string> crowded;
  for (const auto& [rid, r] : reservations_) {
    if (r.active || r.used || now >= r.start) continue;
    if (request.end && *request.end <= r.start) continue;
    Result<Placement> p = place(state_, r.shape);
    const std::string hold = "tentative:" + rid;
    if (!p || !apply(state_, *p, hold)) {
      crowded = rid;
      break;
    }
    tentative.push_back(hold);
  }
  for (const std::string& hold : tentative) (void)sched::release(state_, hold);
  return crowded;
}

std::optional<TimePoint> Scheduler::earliest_start(const Request& request, TimePoint now) {
  if (place(state_, request)) return now;
  std::vector<std::pair<TimePoint, std::string>> ends;
  for (const auto& [id, h] : held_) {
    if (h.request.end) ends.emplace_back(*h.request.end, id);
  }
  std::ranges::sort(ends);
  struct Freed {
    std::string id;
    Placement placement;
  };
  std::vector<Freed> freed;
  std::optional<TimePoint> out;
  for (const auto& [t, id] : ends) {
    if (freed.size() >= 256) break;
    const Allocation* a = state_.find(id);
    if (a == nullptr) continue;
    // Only what can be put back exactly: healthy GPUs on schedulable nodes.
    const bool restorable = std::ranges::all_of(a->placement.gpus, [&](const GpuGrant& g) {
      const ClusterState::Gpu& gpu = state_.gpus()[g.gpu];
      return gpu.healthy && state_.nodes()[gpu.node].schedulable;
    });
    if (!restorable) continue;
    Placement p = *sched::release(state_, id);
    p.mode_changes.clear();
    p.mig_changes.clear();
    freed.push_back({id, std::move(p)});
    if (place(state_, request)) {
      out = std::max(t, now);
      break;
    }
  }
  for (auto it = freed.rbegin(); it != freed.rend(); ++it)
    (void)apply(state_, it->placement, it->id);
  return out;
}

void Scheduler::commit(const std::string& id, const Request& request, const QuotaCharge& charge,
                       int64_t borrowed, TimePoint submitted, int64_t seq, TimePoint now) {
  Held& h = held_[id] = Held{request, charge, borrowed, submitted, seq};
  index_victim(id, h, true);
  touch_share(request.tenant, now, charge.units);
}

void Scheduler::drop(const std::string& id, TimePoint now) {
  auto it = held_.find(id);
  index_victim(id, it->second, false);
  quota_.refund(it->second.charge);
  touch_share(it->second.request.tenant, now, -it->second.charge.units);
  held_.erase(it);
}

Decision Scheduler::try_place(const std::string& id, const Request& request, TimePoint submitted,
                              int64_t seq, TimePoint now, bool reservation_hold) {
  Decision d;
  d.allocation_id = id;
  QuotaCharge charge;
  Admission admission;
  Result<Placement> placed = admit_and_place(request, &charge, &admission);
  std::vector<std::string> preempted;
  if (!placed && options_.preemption &&
      (reservation_hold || !bound_by_reservations(request, now))) {
    const std::vector<std::string> candidates = victims(request, reservation_hold);
    struct Removed {
      std::string id;
      Held held;
      Placement placement;
    };
    std::vector<Removed> removed;
    auto remove = [&](const std::string& v) {
      Held h = held_.at(v);
      // Release leaves a GPU's mode and MIG layout as they are, so putting the allocation back
      // needs no mode or layout change.
      Placement freed = *sched::release(state_, v);
      freed.mode_changes.clear();
      freed.mig_changes.clear();
      quota_.refund(h.charge);
      removed.push_back({v, std::move(h), std::move(freed)});
    };
    auto restore_all = [&] {
      for (auto it = removed.rbegin(); it != removed.rend(); ++it) {
        if (apply(state_, it->placement, it->id)) {
          quota_.charge(it->held.charge);
        } else {  // cannot happen: the state is as it was; keep the books consistent anyway
          touch_share(it->held.request.tenant, now, -it->held.charge.units);
          index_victim(it->id, it->held, false);
          held_.erase(it->id);
        }
      }
      removed.clear();
    };
    // Victims in order, lowest priority and newest first, until the request fits; those that
    // still fit beside it are put back below.
    for (const std::string& v : candidates) {
      remove(v);
      placed = admit_and_place(request, &charge, &admission);
      if (placed) break;
    }
    if (!placed) {
      restore_all();
    } else if (Result<void> applied = apply(state_, *placed, id); !applied) {
      restore_all();
      placed = fail(applied.error());
    } else {
      quota_.charge(charge);  // before victims are re-admitted beside it
      // Put back every victim that still fits beside the new placement, last removed first,
      // so only the allocations that had to go are preempted.
      for (auto it = removed.rbegin(); it != removed.rend(); ++it) {
        Result<Admission> again = quota_.admit(it->held.charge);
        if (again && apply(state_, it->placement, it->id)) {
          quota_.charge(it->held.charge);
          Held& h = held_.at(it->id);
          index_victim(it->id, h, false);
          h.borrowed = again->borrowed;
          index_victim(it->id, h, true);
        } else {
          preempted.push_back(it->id);
        }
      }
      std::ranges::reverse(preempted);
      for (const std::string& v : preempted) {
        touch_share(held_.at(v).request.tenant, now, -held_.at(v).charge.units);
        index_victim(v, held_.at(v), false);
        held_.erase(v);
      }
      commit(id, request, charge, admission.borrowed, submitted, seq, now);
      d.kind = DecisionKind::kPlaced;
      d.placement = std::move(*placed);
      d.borrowed_units = admission.borrowed;
      d.preempted = std::move(preempted);
      return d;
    }
  }
  if (!placed) {
    d.kind = DecisionKind::kPending;
    d.reason = placed.error();
    return d;
  }
  Result<void> applied = apply(state_, *placed, id);
  if (!applied) {
    d.kind = DecisionKind::kPending;
    d.reason = applied.error();
    return d;
  }
  if (!reservation_hold) {
    if (std::optional<std::string> rid = crowds_reservation(request, now)) {
      (void)sched::release(state_, id);
      const Reservation& r = reservations_.at(*rid);
      d.kind = DecisionKind::kPending;
      // The reason is the requesting tenant's to read: another tenant's reservation stays
      // unnamed.
      d.reason = Error::conflict(fmt::format(
          "the free capacity is reserved for {} from {}; an allocation that ends before then, or "
          "a preemptible one, may use it",
          r.shape.tenant == request.tenant ? fmt::format("this tenant's reservation {}", *rid)
                                           : std::string("another tenant's reservation"),
          format_rfc3339(r.start)));
      return d;
    }
  }
  quota_.charge(charge);
  commit(id, request, charge, admission.borrowed, submitted, seq, now);
  d.kind = DecisionKind::kPlaced;
  d.placement = std::move(*placed);
  d.borrowed_units = admission.borrowed;
  return d;
}

Decision Scheduler::submit(const std::string& id, const Request& request, TimePoint now,
                           std::optional<TimePoint> submitted) {
  Decision d;
  d.allocation_id = id;
  const bool known = held_.contains(id) || pending_ids_.contains(id);
  if (id.empty() || known) {
    d.kind = DecisionKind::kRejected;
    d.reason = id.empty() ? Error::invalid("allocation id is empty")
                          : Error::conflict(fmt::format("allocation {} already exists", id));
    return d;
  }
  if (Result<void> valid = validate(request, state_.limits()); !valid) {
    d.kind = DecisionKind::kRejected;
    d.reason = valid.error();
    return d;
  }
  if (request.tier == Tier::kDedicatedPool) {
    // Pools are part of the fleet's shape: a tenant without one (or without the named one)
    // can never be served, so say so now instead of waiting forever.
    const auto pools = state_.pools_of(request.tenant);
    const bool named = request.pool.empty() || std::ranges::any_of(pools, [&](const auto& p) {
                         return p.first == request.pool || p.second == request.pool;
                       });
    if (pools.empty() || !named) {
      d.kind = DecisionKind::kRejected;
      d.reason = Error::invalid(
          pools.empty() ? fmt::format("tenant {} owns no node pool", request.tenant)
                        : fmt::format("tenant {} owns no pool {}", request.tenant, request.pool));
      return d;
    }
  }
  if (std::optional<Decision> reserved = use_reservation(id, request, now)) return *reserved;
  const int64_t seq = seq_++;
  const TimePoint since = std::min(now, submitted.value_or(now));
  d = try_place(id, request, since, seq, now);
  if (d.kind == DecisionKind::kPending) {
    // What cannot be placed now and never could, over a hard limit on every model it may use,
    // is refused rather than queued. (Asked only here: what was placed fits; what is over a
    // hard limit is never admitted, so it was neither placed nor did it preempt anything.)
    if (std::optional<Error> never = never_fits(request)) {
      d.kind = DecisionKind::kRejected;
      d.reason = std::move(never);
      return d;
    }
    pending_.push_back({id, request, *d.reason, since, seq});
    pending_ids_.insert(id);
  }
  return d;
}

Result<void> Scheduler::release(const std::string& id, TimePoint now) {
  if (held_.contains(id)) {
    GP_TRY(sched::release(state_, id));
    drop(id, now);
    return ok();
  }
  if (!pending_ids_.contains(id))
    return fail(Error::not_found(fmt::format("no allocation {}", id)));
  // Newest first: a caller withdrawing what it just submitted finds it at once.
  auto it = std::find_if(pending_.rbegin(), pending_.rend(),
                         [&](const Pending& p) { return p.id == id; });
  pending_.erase(std::next(it).base());
  pending_ids_.erase(id);
  return ok();
}

std::vector<PendingView> Scheduler::pending(TimePoint now) const {
  std::vector<const Pending*> order;
  order.reserve(pending_.size());
  for (const Pending& p : pending_) order.push_back(&p);
  std::ranges::stable_sort(order, [&](const Pending* a, const Pending* b) {
    return std::tuple(-a->request.priority, share_key(a->request.tenant, now), a->submitted,
                      a->seq) < std::tuple(-b->request.priority, share_key(b->request.tenant, now),
                                           b->submitted, b->seq);
  });
  std::vector<PendingView> out;
  out.reserve(order.size());
  for (const Pending* p : order) out.push_back({p->id, p->request, p->reason, p->submitted});
  return out;
}

Result<Placement> Scheduler::probe(const Request& request) const {
  GP_TRY_VOID(validate(request, state_.limits()));
  QuotaCharge charge;
  Admission admission;
  return admit_and_place(request, &charge, &admission);
}

Result<void> Scheduler::restore(const std::string& id, const Request& request,
                                const Placement& placement, TimePoint submitted, TimePoint now) {
  if (held_.contains(id) || pending_ids_.contains(id))
    return fail(Error::conflict(fmt::format("allocation {} already exists", id)));
  auto model = state_.limits().models.find(placement.model);
  if (model == state_.limits().models.end())
    return fail(
        Error::invalid(fmt::format("allocation {}: unknown model {}", id, placement.model)));
  QuotaCharge charge{request.tenant,
                     request.project,
                     placement.model,
                     request_units(request, model->second),
                     request.tier == Tier::kMig ? request.mig_profile : "",
                     request.tier == Tier::kMig ? request.count : 0};
  GP_TRY_VOID(apply(state_, placement, id));
  const QuotaTree::Usage u = quota_.tenant_usage(request.tenant, placement.model);
  const int64_t borrowed =
      u.configured ? std::clamp(u.used + charge.units - u.limits.nominal, int64_t{0}, charge.units)
                   : 0;
  quota_.charge(charge);
  commit(id, request, charge, borrowed, submitted, seq_++, now);
  return ok();
}

void Scheduler::restore_pending(const std::string& id, const Request& request, TimePoint submitted,
                                Error reason) {
  if (held_.contains(id) || !pending_ids_.insert(id).second) return;
  pending_.push_back({id, request, std::move(reason), submitted, seq_++});
}

std::vector<Decision> Scheduler::schedule(TimePoint now) {
  std::vector<Decision> placed;
  advance_reservations(now, &placed);
  std::vector<PendingView> order = pending(now);
  // The first request blocked for capacity, and when it could start.
  std::optional<Pending> head;
  std::optional<TimePoint> shadow;
  int checks = 16;  // backfill candidates checked against the head per pass (bounded cost)
  for (const PendingView& view : order) {
    auto it = std::ranges::find_if(pending_,
                                   [&](const Pending& p) { return p.id == view.allocation_id; });
    if (it == pending_.end()) continue;
    const Pending entry = *it;
    auto take = [&](Decision d) {
      auto at = std::ranges::find_if(pending_, [&](const Pending& p) { return p.id == entry.id; });
      pending_.erase(at);
      pending_ids_.erase(entry.id);
      placed.push_back(std::move(d));
    };
    if (head && shadow && !(entry.request.end && *entry.request.end <= *shadow)) {
      // It would outlive the head's start: only if it leaves the head's start where it was.
      QuotaCharge charge;
      Admission admission;
      Result<Placement> p = checks-- > 0 ? admit_and_place(entry.request, &charge, &admission)
                                         : fail(Error::conflict("not checked this pass"));
      if (p && apply(state_, *p, entry.id)) {
        const std::optional<TimePoint> start = earliest_start(head->request, now);
        if (start && *start <= *shadow && !crowds_reservation(entry.request, now)) {
          quota_.charge(charge);
          commit(entry.id, entry.request, charge, admission.borrowed, entry.submitted, entry.seq,
                 now);
          Decision d;
          d.kind = DecisionKind::kPlaced;
          d.allocation_id = entry.id;
          d.placement = std::move(*p);
          d.borrowed_units = admission.borrowed;
          take(std::move(d));
          continue;
        }
        (void)sched::release(state_, entry.id);
      }
      // The reason is the waiting tenant's to read: another tenant's allocation stays unnamed.
      it->reason = Error::conflict(fmt::format(
          "waiting behind {}, which needs the capacity from {}; placing this one now would "
          "delay it (an end time before then lets it run meanwhile)",
          head->request.tenant == entry.request.tenant ? head->id
                                                       : "an earlier request of the queue",
          format_rfc3339(*shadow)));
      continue;
    }
    Decision d = try_place(entry.id, entry.request, entry.submitted, entry.seq, now);
    if (d.kind == DecisionKind::kPlaced) {
      take(std::move(d));
      continue;
    }
    it = std::ranges::find_if(pending_, [&](const Pending& p) { return p.id == entry.id; });
    it->reason = *d.reason;
    if (!head && d.reason->code == ErrorCode::kConflict) {
      // Blocked for capacity (not kept out of a reservation's room, which fits now).
      const std::optional<TimePoint> start = earliest_start(entry.request, now);
      if (!start || *start > now) {
        head = entry;
        shadow = start;
      }
    }
  }
  return placed;
}

Decision Scheduler::reserve(const std::string& id, const Request& shape, TimePoint start,
                            TimePoint end, TimePoint now) {
  Decision d;
  d.allocation_id = reservation_hold_id(id);
  d.kind = DecisionKind::kRejected;
  if (id.empty() || reservations_.contains(id)) {
    d.reason = id.empty() ? Error::invalid("reservation id is empty")
                          : Error::conflict(fmt::format("reservation {} already exists", id));
    return d;
  }
  if (end <= start || end <= now) {
    d.reason = Error::invalid("a reservation's window must end after it starts and after now");
    return d;
  }
  if (Result<void> valid = validate(shape, state_.limits()); !valid) {
    d.reason = valid.error();
    return d;
  }
  reservations_.emplace(id, Reservation{shape, start, end});
  std::vector<Decision> placed;
  advance_reservations(now, &placed);
  const Reservation& r = reservations_.at(id);
  if (r.active) {
    for (Decision& p : placed) {
      if (p.allocation_id == d.allocation_id) return p;
    }
  }
  d.kind = DecisionKind::kPending;
  d.reason = r.reason
                 ? *r.reason
                 : Error::conflict(fmt::format(
                       "the reservation's window starts in {} s",
                       std::chrono::duration_cast<std::chrono::seconds>(r.start - now).count()));
  return d;
}

Result<void> Scheduler::cancel_reservation(const std::string& id, TimePoint now) {
  auto it = reservations_.find(id);
  if (it == reservations_.end())
    return fail(Error::not_found(fmt::format("no reservation {}", id)));
  const std::string hold = reservation_hold_id(id);
  if (held_.contains(hold)) GP_TRY_VOID(release(hold, now));
  reservations_.erase(it);
  return ok();
}

std::optional<Scheduler::ReservationStatus> Scheduler::reservation(const std::string& id) const {
  auto it = reservations_.find(id);
  if (it == reservations_.end()) return std::nullopt;
  return ReservationStatus{it->second.active, it->second.used, it->second.reason};
}

void Scheduler::advance_reservations(TimePoint now, std::vector<Decision>* placed) {
  for (auto it = reservations_.begin(); it != reservations_.end();) {
    Reservation& r = it->second;
    const std::string hold = reservation_hold_id(it->first);
    if (now >= r.end) {  // the window is over: an unused hold goes back
      if (held_.contains(hold)) (void)release(hold, now);
      it = reservations_.erase(it);
      continue;
    }
    if (now >= r.start && !r.active && !r.used) {
      Decision d = try_place(hold, r.shape, r.start, seq_++, now, /*reservation_hold=*/true);
      if (d.kind == DecisionKind::kPlaced) {
        r.active = true;
        r.reason.reset();
        placed->push_back(std::move(d));
      } else {
        r.reason = d.reason;
      }
    }
    ++it;
  }
}

std::optional<Decision> Scheduler::use_reservation(const std::string& id, const Request& request,
                                                   TimePoint now) {
  for (auto& [rid, r] : reservations_) {
    if (!r.active || r.used || now < r.start || now >= r.end) continue;
    const Request& s = r.shape;
    if (s.tenant != request.tenant || s.tier != request.tier || s.count != request.count ||
        s.node_count != request.node_count || s.gpus_per_node != request.gpus_per_node ||
        s.mig_profile != request.mig_profile || s.milli != request.milli) {
      continue;
    }
    const std::string hold = reservation_hold_id(rid);
    auto h = held_.find(hold);
    if (h == held_.end()) continue;
    const Placement* held_placement = &state_.find(hold)->placement;
    if (!request.models.empty() &&
        std::ranges::find(request.models, held_placement->model) == request.models.end()) {
      continue;
    }
    // Hand the held GPUs over: the same placement under the request's id and project.
    const Held before = h->second;
    Placement p = *sched::release(state_, hold);
    p.mode_changes.clear();
    p.mig_changes.clear();
    drop(hold, now);
    Placement mine = p;
    mine.project = request.project;
    mine.priority = request.priority;
    mine.preemptible = request.preemptible;
    mine.reservation = rid;
    QuotaCharge charge = before.charge;
    charge.project = request.project;
    Result<Admission> admitted = quota_.admit(charge);
    if (admitted && apply(state_, mine, id)) {
      quota_.charge(charge);
      commit(id, request, charge, admitted->borrowed, now, seq_++, now);
      r.used = true;
      Decision d;
      d.kind = DecisionKind::kPlaced;
      d.allocation_id = id;
      d.placement = std::move(mine);
      d.borrowed_units = admitted->borrowed;
      return d;
    }
    // The project's quota refuses it: keep holding, and treat the request as any other.
    if (apply(state_, p, hold)) {
      quota_.charge(before.charge);
      commit(hold, before.request, before.charge, before.borrowed, before.submitted, before.seq,
             now);
    } else {
      r.active = false;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace gp::sched
