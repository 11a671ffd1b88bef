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
    case DecisionKind::kPlaced: return "placed";
    case DecisionKind::kPending: return "pending";
    case DecisionKind::kRejected: return "rejected";
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

Result<Placement> Scheduler::admit_and_place(const Request& request, QuotaCharge* charge,
                                             Admission* admission) const {
  const FleetLimits& limits = state_.limits();
  std::vector<std::string> candidates = request.models;
  if (candidates.empty()) {
    for (const auto& [name, unused] : limits.models) candidates.push_back(name);
  }
  Request restricted = request;
  restricted.models.clear();
  std::vector<std::pair<QuotaCharge, Admission>> admitted;
  std::optional<Error> quota_error;
  for (const std::string& model : candidates) {
    auto it = limits.models.find(model);
    if (it == limits.models.end()) continue;
    const int64_t units = request_units(request, it->second);
    if (units <= 0) continue;
    QuotaCharge c{request.tenant, request.project, model, units,
                  request.tier == Tier::kMig ? request.mig_profile : "",
                  request.tier == Tier::kMig ? request.count : 0};
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

std::vector<std::string> Scheduler::victims(const Request& request) const {
  const FleetLimits& limits = state_.limits();
  std::vector<std::string> models = request.models;
  if (models.empty()) {
    for (const auto& [name, unused] : limits.models) models.push_back(name);
  }
  // Models on which the requester reclaims its own nominal quota from borrowers.
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
  using Key = std::tuple<int, int, int64_t, int64_t>;  // group, priority, -submitted, -seq
  std::vector<std::pair<Key, std::string>> out;
  for (const auto& [id, h] : held_) {
    const bool model_ok = std::ranges::find(models, h.charge.model) != models.end();
    if (!model_ok) continue;
    const int64_t submitted = h.submitted.time_since_epoch().count();
    if (h.request.tenant != request.tenant) {
      // Lender reclaim: only borrowed allocations, of the same cohort, on a reclaimed model.
      if (h.borrowed > 0 && std::ranges::find(reclaim, h.charge.model) != reclaim.end() &&
          quota_.cohort_of(h.request.tenant) == cohort) {
        out.push_back({{0, h.request.priority, -submitted, -h.seq}, id});
      }
    } else if (h.request.preemptible && h.request.priority < request.priority) {
      out.push_back({{1, h.request.priority, -submitted, -h.seq}, id});
    }
  }
  std::ranges::sort(out);
  std::vector<std::string> ids;
  for (auto& [key, id] : out) ids.push_back(std::move(id));
  return ids;
}

void Scheduler::commit(const std::string& id, const Request& request, const Placement& placement,
                       const QuotaCharge& charge, int64_t borrowed, TimePoint submitted,
                       int64_t seq, TimePoint now) {
  (void)placement;
  quota_.charge(charge);
  held_[id] = Held{request, charge, borrowed, submitted, seq};
  touch_share(request.tenant, now, charge.units);
}

void Scheduler::drop(const std::string& id, TimePoint now) {
  auto it = held_.find(id);
  quota_.refund(it->second.charge);
  touch_share(it->second.request.tenant, now, -it->second.charge.units);
  held_.erase(it);
}

Decision Scheduler::try_place(const std::string& id, const Request& request, TimePoint submitted,
                              int64_t seq, TimePoint now) {
  Decision d;
  d.allocation_id = id;
  QuotaCharge charge;
  Admission admission;
  Result<Placement> placed = admit_and_place(request, &charge, &admission);
  std::vector<std::string> preempted;
  if (!placed && options_.preemption) {
    const std::vector<std::string> candidates = victims(request);
    struct Removed {
      std::string id;
      Held held;
      Placement placement;
    };
    std::vector<Removed> removed;
    for (const std::string& v : candidates) {
      Held h = held_.at(v);
      Placement freed = *sched::release(state_, v);
      quota_.refund(h.charge);
      removed.push_back({v, std::move(h), std::move(freed)});
      placed = admit_and_place(request, &charge, &admission);
      if (placed) break;
    }
    auto restore_all = [&] {
      for (auto it = removed.rbegin(); it != removed.rend(); ++it) {
        (void)apply(state_, it->placement, it->id);
        quota_.charge(it->held.charge);
      }
    };
    if (!placed) {
      restore_all();
    } else if (Result<void> applied = apply(state_, *placed, id); !applied) {
      restore_all();
      placed = fail(applied.error());
    } else {
      // Put back every victim that still fits beside the new placement, last removed first,
      // so only the allocations that had to go are preempted.
      for (auto it = removed.rbegin(); it != removed.rend(); ++it) {
        Result<Admission> again = quota_.admit(it->held.charge);
        if (again && apply(state_, it->placement, it->id)) {
          quota_.charge(it->held.charge);
          held_.at(it->id).borrowed = again->borrowed;
        } else {
          preempted.push_back(it->id);
        }
      }
      std::ranges::reverse(preempted);
      for (const std::string& v : preempted) {
        touch_share(held_.at(v).request.tenant, now, -held_.at(v).charge.units);
        held_.erase(v);
      }
      commit(id, request, *placed, charge, admission.borrowed, submitted, seq, now);
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
  commit(id, request, *placed, charge, admission.borrowed, submitted, seq, now);
  d.kind = DecisionKind::kPlaced;
  d.placement = std::move(*placed);
  d.borrowed_units = admission.borrowed;
  return d;
}

Decision Scheduler::submit(const std::string& id, const Request& request, TimePoint now) {
  Decision d;
  d.allocation_id = id;
  const bool known = held_.contains(id) || std::ranges::any_of(pending_, [&](const Pending& p) {
                       return p.id == id;
                     });
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
  const int64_t seq = seq_++;
  d = try_place(id, request, now, seq, now);
  if (d.kind == DecisionKind::kPending) pending_.push_back({id, request, *d.reason, now, seq});
  return d;
}

Result<void> Scheduler::release(const std::string& id, TimePoint now) {
  if (held_.contains(id)) {
    GP_TRY(sched::release(state_, id));
    drop(id, now);
    return ok();
  }
  auto it = std::ranges::find_if(pending_, [&](const Pending& p) { return p.id == id; });
  if (it == pending_.end()) return fail(Error::not_found(fmt::format("no allocation {}", id)));
  pending_.erase(it);
  return ok();
}

std::vector<PendingView> Scheduler::pending(TimePoint now) const {
  std::vector<const Pending*> order;
  for (const Pending& p : pending_) order.push_back(&p);
  std::ranges::stable_sort(order, [&](const Pending* a, const Pending* b) {
    return std::tuple(-a->request.priority, share_key(a->request.tenant, now), a->submitted,
                      a->seq) < std::tuple(-b->request.priority, share_key(b->request.tenant, now),
                                           b->submitted, b->seq);
  });
  std::vector<PendingView> out;
  for (const Pending* p : order) out.push_back({p->id, p->request, p->reason, p->submitted});
  return out;
}

std::vector<Decision> Scheduler::schedule(TimePoint now) {
  std::vector<Decision> placed;
  std::vector<PendingView> order = pending(now);
  for (const PendingView& view : order) {
    auto it = std::ranges::find_if(pending_, [&](const Pending& p) { return p.id == view.allocation_id; });
    if (it == pending_.end()) continue;
    const Pending entry = *it;
    Decision d = try_place(entry.id, entry.request, entry.submitted, entry.seq, now);
    it = std::ranges::find_if(pending_, [&](const Pending& p) { return p.id == entry.id; });
    if (d.kind == DecisionKind::kPlaced) {
      pending_.erase(it);
      placed.push_back(std::move(d));
    } else {
      it->reason = *d.reason;
    }
  }
  return placed;
}

}  // namespace gp::sched
