// QuotaTree: platform -> tenant -> project quota per GPU model in exact units, with cohorts
// that lend idle nominal quota and optional per-MIG-profile caps.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "sched/sched.h"

namespace gp::sched {
namespace {

std::string figures(int64_t used, int64_t request, const QuotaLimits& l) {
  std::string out = fmt::format("used {} + requested {}; nominal {}", format_units(used),
                                format_units(request), format_units(l.nominal));
  if (l.borrow_limit) out += fmt::format(", borrow_limit {}", format_units(*l.borrow_limit));
  if (l.limit) out += fmt::format(", limit {}", format_units(*l.limit));
  return out;
}

Error exceeded(std::string message) { return Error{ErrorCode::kQuotaExceeded, std::move(message)}; }

}  // namespace

void QuotaTree::cohort_add(const std::string& cohort, const std::string& model, int64_t nominal,
                           int64_t used) {
  if (cohort.empty()) return;
  CohortModel& c = cohorts_[cohort][model];
  c.nominal += nominal;
  c.used += used;
}

void QuotaTree::set_platform(const std::string& model, std::optional<int64_t> limit) {
  platform_[model].first = limit;
}

void QuotaTree::set_tenant(const std::string& name, const std::string& model, QuotaLimits limits) {
  Tenant& t = tenant(name);
  Entry& e = t.models[model];
  cohort_add(t.cohort, model, limits.nominal - e.limits.nominal, 0);
  e.limits = limits;
  e.configured = true;
}

void QuotaTree::set_cohort(const std::string& name, const std::string& cohort) {
  Tenant& t = tenant(name);
  if (!t.cohort.empty()) std::erase(members_[t.cohort], name);
  if (!cohort.empty()) members_[cohort].push_back(name);
  for (const auto& [model, e] : t.models) cohort_add(t.cohort, model, -e.limits.nominal, -e.used);
  t.cohort = cohort;
  for (const auto& [model, e] : t.models) cohort_add(t.cohort, model, e.limits.nominal, e.used);
}

void QuotaTree::set_project(const std::string& name, const std::string& project,
                            const std::string& model, QuotaLimits limits) {
  Entry& e = tenant(name).projects[project][model];
  e.limits = limits;
  e.configured = true;
}

void QuotaTree::set_name(const std::string& id, std::string name) { names_[id] = std::move(name); }

void QuotaTree::set_profile_cap(const std::string& name, const std::string& model,
                                const std::string& profile, int64_t max_instances) {
  tenant(name).profile_caps[mig_resource_key(model, profile)].first = max_instances;
}

Result<Admission> QuotaTree::admit(const QuotaCharge& c) const {
  if (auto it = platform_.find(c.model); it != platform_.end() && it->second.first) {
    if (it->second.second + c.units > *it->second.first) {
      // The platform's use is every tenant's: the message, which the tenant reads, leaves it out.
      return fail(exceeded(fmt::format(
          "quota exceeded at platform level for {}: requested {} does not fit under the "
          "platform limit of {}",
          c.model, format_units(c.units), format_units(*it->second.first))));
    }
  }
  auto tenant_it = tenants_.find(c.tenant);
  if (tenant_it == tenants_.end()) {
    return fail(
        exceeded(fmt::format("quota exceeded at tenant level: tenant {} has no quota for {}",
                             named(c.tenant), c.model)));
  }
  const Tenant& t = tenant_it->second;
  if (auto p = t.projects.find(c.project); p != t.projects.end()) {
    if (auto e = p->second.find(c.model); e != p->second.end() && e->second.configured) {
      const QuotaLimits& l = e->second.limits;
      const int64_t cap = l.limit ? *l.limit : l.nominal + l.borrow_limit.value_or(0);
      if (e->second.used + c.units > cap) {
        return fail(exceeded(fmt::format("quota exceeded at project level: project {}/{} on {}: {}",
                                         named(c.tenant), named(c.project), c.model,
                                         figures(e->second.used, c.units, l))));
      }
    }
  }
  auto e = t.models.find(c.model);
  const Entry none;
  const Entry& entry = e == t.models.end() ? none : e->second;
  const QuotaLimits& l = entry.limits;
  const int64_t used = entry.used;
  const int64_t next = used + c.units;
  auto tenant_fail = [&](std::string_view why) {
    return fail(exceeded(fmt::format("quota exceeded at tenant level: tenant {} on {}: {} ({})",
                                     named(c.tenant), c.model, why, figures(used, c.units, l))));
  };
  if (!entry.configured && t.cohort.empty()) return tenant_fail("no quota for this model");
  if (l.limit && next > *l.limit) return tenant_fail("over its limit");
  Admission admission;
  if (next > l.nominal) {
    const int64_t over = next - l.nominal;
    if (t.cohort.empty()) return tenant_fail("over its nominal and in no cohort to borrow from");
    if (l.borrow_limit && over > *l.borrow_limit) return tenant_fail("over its borrow limit");
    const CohortModel* cm = nullptr;
    if (auto co = cohorts_.find(t.cohort); co != cohorts_.end()) {
      if (auto m = co->second.find(c.model); m != co->second.end()) cm = &m->second;
    }
    const int64_t cohort_nominal = cm ? cm->nominal : 0;
    const int64_t cohort_used = cm ? cm->used : 0;
    if (cohort_used + c.units > cohort_nominal) {
      // The cohort's use is its other members': the message, which the tenant reads, leaves
      // it out.
      return tenant_fail(fmt::format("cohort {} has no idle quota to lend", t.cohort));
    }
    admission.borrowed = over - std::max<int64_t>(0, used - l.nominal);
  }
  if (!c.mig_profile.empty() && !t.profile_caps.empty()) {
    if (auto cap = t.profile_caps.find(mig_resource_key(c.model, c.mig_profile));
        cap != t.profile_caps.end() && cap->second.second + c.instances > cap->second.first) {
      return fail(exceeded(fmt::format(
          "quota exceeded at tenant level: tenant {} may hold {} instance(s) of {} on {}; {} held, "
          "{} requested",
          named(c.tenant), cap->second.first, c.mig_profile, c.model, cap->second.second,
          c.instances)));
    }
  }
  return admission;
}

std::optional<Error> QuotaTree::over_hard_limit(const QuotaCharge& c) const {
  auto never = [&](std::string_view level, const std::string& what, int64_t limit) {
    return exceeded(fmt::format(
        "quota exceeded at {} level: {} requested {} exceeds the limit of {}, which no amount of "
        "waiting frees: ask for less or have the limit raised",
        level, what, format_units(c.units), format_units(limit)));
  };
  if (auto it = platform_.find(c.model);
      it != platform_.end() && it->second.first && c.units > *it->second.first)
    return never("platform", fmt::format("{}:", c.model), *it->second.first);
  auto t = tenants_.find(c.tenant);
  if (t == tenants_.end()) return std::nullopt;
  if (auto p = t->second.projects.find(c.project); p != t->second.projects.end()) {
    if (auto e = p->second.find(c.model); e != p->second.end() && e->second.configured &&
                                          e->second.limits.limit &&
                                          c.units > *e->second.limits.limit)
      return never("project",
                   fmt::format("project {}/{} on {}:", named(c.tenant), named(c.project), c.model),
                   *e->second.limits.limit);
  }
  if (auto e = t->second.models.find(c.model); e != t->second.models.end() &&
                                               e->second.configured && e->second.limits.limit &&
                                               c.units > *e->second.limits.limit)
    return never("tenant", fmt::format("tenant {} on {}:", named(c.tenant), c.model),
                 *e->second.limits.limit);
  if (!c.mig_profile.empty()) {
    if (auto cap = t->second.profile_caps.find(mig_resource_key(c.model, c.mig_profile));
        cap != t->second.profile_caps.end() && c.instances > cap->second.first)
      return exceeded(fmt::format(
          "quota exceeded at tenant level: tenant {} may hold {} instance(s) of {} on {} and "
          "requested {}, which no amount of waiting frees: ask for fewer or have the cap raised",
          named(c.tenant), cap->second.first, c.mig_profile, c.model, c.instances));
  }
  return std::nullopt;
}

void QuotaTree::charge(const QuotaCharge& c) {
  platform_[c.model].second += c.units;
  Tenant& t = tenant(c.tenant);
  t.models[c.model].used += c.units;
  cohort_add(t.cohort, c.model, 0, c.units);
  if (auto p = t.projects.find(c.project); p != t.projects.end()) {
    if (auto e = p->second.find(c.model); e != p->second.end()) e->second.used += c.units;
  }
  if (!c.mig_profile.empty() && !t.profile_caps.empty()) {
    if (auto cap = t.profile_caps.find(mig_resource_key(c.model, c.mig_profile));
        cap != t.profile_caps.end()) {
      cap->second.second += c.instances;
    }
  }
}

void QuotaTree::refund(const QuotaCharge& c) {
  QuotaCharge negative = c;
  negative.units = -c.units;
  negative.instances = -c.instances;
  charge(negative);
}

QuotaTree::Usage QuotaTree::tenant_usage(const std::string& name, const std::string& model) const {
  Usage u;
  auto t = tenants_.find(name);
  if (t == tenants_.end()) return u;
  auto e = t->second.models.find(model);
  if (e == t->second.models.end()) return u;
  return {e->second.used, e->second.limits, e->second.configured};
}

std::vector<QuotaTree::TenantModelUsage> QuotaTree::tenant_usages() const {
  std::vector<TenantModelUsage> out;
  for (const auto& [tenant, t] : tenants_)
    for (const auto& [model, e] : t.models)
      if (e.configured || e.used > 0)
        out.push_back({tenant, model, {e.used, e.limits, e.configured}});
  std::ranges::sort(out, {}, [](const TenantModelUsage& u) { return std::tie(u.tenant, u.model); });
  return out;
}

QuotaTree::Usage QuotaTree::project_usage(const std::string& name, const std::string& project,
                                          const std::string& model) const {
  Usage u;
  auto t = tenants_.find(name);
  if (t == tenants_.end()) return u;
  auto p = t->second.projects.find(project);
  if (p == t->second.projects.end()) return u;
  auto e = p->second.find(model);
  if (e == p->second.end()) return u;
  return {e->second.used, e->second.limits, e->second.configured};
}

int64_t QuotaTree::platform_used(const std::string& model) const {
  auto it = platform_.find(model);
  return it == platform_.end() ? 0 : it->second.second;
}

std::optional<int64_t> QuotaTree::platform_limit(const std::string& model) const {
  auto it = platform_.find(model);
  return it == platform_.end() ? std::nullopt : it->second.first;
}

std::string QuotaTree::cohort_of(const std::string& name) const {
  auto t = tenants_.find(name);
  return t == tenants_.end() ? "" : t->second.cohort;
}

const std::vector<std::string>& QuotaTree::cohort_members(const std::string& cohort) const {
  static const std::vector<std::string> kNone;
  auto it = members_.find(cohort);
  return it == members_.end() ? kNone : it->second;
}

int64_t QuotaTree::profile_used(const std::string& name, const std::string& model,
                                const std::string& profile) const {
  auto t = tenants_.find(name);
  if (t == tenants_.end()) return 0;
  auto cap = t->second.profile_caps.find(mig_resource_key(model, profile));
  return cap == t->second.profile_caps.end() ? 0 : cap->second.second;
}

std::optional<int64_t> QuotaTree::profile_cap(const std::string& name, const std::string& model,
                                              const std::string& profile) const {
  auto t = tenants_.find(name);
  if (t == tenants_.end()) return std::nullopt;
  auto cap = t->second.profile_caps.find(mig_resource_key(model, profile));
  if (cap == t->second.profile_caps.end()) return std::nullopt;
  return cap->second.first;
}

}  // namespace gp::sched
