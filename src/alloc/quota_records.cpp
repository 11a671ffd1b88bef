// Quota documents: parsing GPU-equivalents into scheduler units, storing the tree, loading it.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "alloc/alloc.h"
#include "alloc/internal.h"

namespace gp::alloc {
namespace {

constexpr double kMaxGpus = 1'000'000;

Result<int64_t> units_of(const Json& v, const std::string& where) {
  if (!v.is_number())
    return fail(Error::invalid(fmt::format("{} must be a number of GPU-equivalents", where)));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || x > kMaxGpus)
    return fail(Error::invalid(fmt::format("{} must be between 0 and {}", where, kMaxGpus)));
  return static_cast<int64_t>(std::llround(x * static_cast<double>(vocab::kUnitsPerGpu)));
}

Result<std::string> model_name(const std::string& key, const std::string& where) {
  if (key.empty() || key.size() > 64)
    return fail(Error::invalid(fmt::format("{}: a GPU model name of 1 to 64 characters", where)));
  return key;
}

Result<std::map<std::string, ModelQuota>> parse_models(const Json* models, std::string_view what) {
  std::map<std::string, ModelQuota> out;
  if (!models) return out;
  if (models->size() > 64) return fail(Error::invalid("at most 64 GPU models"));
  for (const auto& [key, value] : models->items()) {
    const std::string where = fmt::format("{}.models.{}", what, key);
    GP_TRY(model_name(key, where));
    if (!value.is_object()) return fail(Error::invalid(where + " must be an object"));
    ModelQuota q;
    for (const auto& [field, v] : value.items()) {
      if (field == "nominal") {
        q.nominal = GP_TRY(units_of(v, where + ".nominal"));
      } else if (field == "borrow_limit") {
        if (!v.is_null()) q.borrow_limit = GP_TRY(units_of(v, where + ".borrow_limit"));
      } else if (field == "limit") {
        if (!v.is_null()) q.limit = GP_TRY(units_of(v, where + ".limit"));
      } else {
        return fail(Error::invalid(fmt::format("{}: unknown field \"{}\"", where, field)));
      }
    }
    if (q.limit && *q.limit < q.nominal)
      return fail(Error::invalid(fmt::format("{}: limit is below nominal", where)));
    out[key] = q;
  }
  return out;
}

}  // namespace

Result<TenantQuota> parse_tenant_quota(const Json& body) {
  ObjectReader r(body, "quota");
  TenantQuota q;
  q.cohort = r.optional_string("cohort", 63).value_or("");
  const Json* models = r.optional_object("models");
  const Json* caps = r.optional_object("profile_caps");
  auto weight = r.optional_number("weight", 0.001, 1000);
  GP_TRY_VOID(r.finish());
  if (!q.cohort.empty()) GP_TRY_VOID(validate_dns_label("cohort", q.cohort));
  q.weight = weight.value_or(1);
  q.models = GP_TRY(parse_models(models, "quota"));
  if (caps) {
    for (const auto& [model, profiles] : caps->items()) {
      const std::string where = "quota.profile_caps." + model;
      GP_TRY(model_name(model, where));
      const vocab::MigCatalog* catalog = GP_TRY(vocab::mig_catalog(model));
      if (!profiles.is_object()) return fail(Error::invalid(where + " must be an object"));
      for (const auto& [profile, n] : profiles.items()) {
        if (!catalog->find(profile))
          return fail(Error::invalid(
              fmt::format("{}: {} has no MIG profile \"{}\"", where, model, profile)));
        if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 1'000'000)
          return fail(
              Error::invalid(fmt::format("{}.{} must be a count of instances", where, profile)));
        q.profile_caps[model][profile] = n.get<int64_t>();
      }
    }
  }
  return q;
}

Result<ProjectQuota> parse_project_quota(const Json& body) {
  ObjectReader r(body, "quota");
  const Json* models = r.optional_object("models");
  GP_TRY_VOID(r.finish());
  ProjectQuota q;
  q.models = GP_TRY(parse_models(models, "quota"));
  return q;
}

Result<std::map<std::string, int64_t>> parse_platform_quota(const Json& body) {
  ObjectReader r(body, "platform quota");
  const Json* models = r.optional_object("models");
  GP_TRY_VOID(r.finish());
  std::map<std::string, int64_t> out;
  if (!models) return out;
  for (const auto& [key, value] : models->items()) {
    const std::string where = "models." + key;
    GP_TRY(model_name(key, where));
    if (!value.is_object() || value.size() != 1 || !value.contains("limit"))
      return fail(Error::invalid(where + " must be {\"limit\": GPU-equivalents}"));
    out[key] = GP_TRY(units_of(value["limit"], where + ".limit"));
  }
  return out;
}

namespace detail {

Json model_quota_json(const ModelQuota& q, const sched::QuotaTree::Usage* usage) {
  auto gpus = [](int64_t u) { return static_cast<double>(u) / vocab::kUnitsPerGpu; };
  Json j = {{"nominal", gpus(q.nominal)},
            {"borrow_limit", q.borrow_limit ? Json(gpus(*q.borrow_limit)) : Json(nullptr)},
            {"limit", q.limit ? Json(gpus(*q.limit)) : Json(nullptr)}};
  if (usage) {
    j["used"] = gpus(usage->used);
    j["used_units"] = usage->used;
    j["borrowed"] = gpus(std::max<int64_t>(0, usage->used - q.nominal));
  }
  return j;
}

}  // namespace detail

namespace {

std::map<std::string, ModelQuota> rows_to_models(const std::vector<store::Row>& rows) {
  std::map<std::string, ModelQuota> out;
  for (const auto& row : rows)
    out[row.text(0)] = {row.integer(1), row.opt_integer(2), row.opt_integer(3)};
  return out;
}

}  // namespace

Result<TenantQuota> load_tenant_quota(store::Tx& tx, const std::string& tenant_id) {
  TenantQuota q;
  if (auto row = GP_TRY(
          tx.query_one("SELECT cohort, weight, version FROM tenant_scheduling WHERE tenant_id = ?",
                       {tenant_id}))) {
    q.cohort = row->text(0);
    q.weight = row->real(1);
    q.version = row->integer(2);
  }
  q.models = rows_to_models(GP_TRY(tx.query(
      "SELECT model, nominal, borrow_limit, hard_limit FROM quotas WHERE tenant_id = ? AND "
      "project_id = '' ORDER BY model",
      {tenant_id})));
  for (const auto& row : GP_TRY(tx.query(
           "SELECT model, profile, max_instances FROM quota_profile_caps WHERE tenant_id = ?",
           {tenant_id})))
    q.profile_caps[row.text(0)][row.text(1)] = row.integer(2);
  return q;
}

Result<ProjectQuota> load_project_quota(store::Tx& tx, const std::string& tenant_id,
                                        const std::string& project_id) {
  ProjectQuota q;
  q.models = rows_to_models(GP_TRY(tx.query(
      "SELECT model, nominal, borrow_limit, hard_limit FROM quotas WHERE tenant_id = ? AND "
      "project_id = ? ORDER BY model",
      {tenant_id, project_id})));
  return q;
}

namespace detail {

Result<sched::QuotaTree> load_quota(store::Tx& tx) {
  sched::QuotaTree tree;
  for (const auto& row : GP_TRY(tx.query("SELECT model, hard_limit FROM platform_quotas")))
    tree.set_platform(row.text(0), row.integer(1));
  for (const auto& row : GP_TRY(tx.query("SELECT tenant_id, cohort FROM tenant_scheduling")))
    tree.set_cohort(row.text(0), row.text(1));
  for (const auto& row : GP_TRY(tx.query(
           "SELECT tenant_id, project_id, model, nominal, borrow_limit, hard_limit FROM quotas "
           "ORDER BY tenant_id, project_id, model"))) {
    sched::QuotaLimits limits{row.integer(3), row.opt_integer(4), row.opt_integer(5)};
    if (row.text(1).empty()) {
      tree.set_tenant(row.text(0), row.text(2), limits);
    } else {
      tree.set_project(row.text(0), row.text(1), row.text(2), limits);
    }
  }
  std::set<std::string> tenants;
  std::set<std::pair<std::string, std::string>> projects;
  for (const auto& row : GP_TRY(
           tx.query("SELECT tenant_id, model, profile, max_instances FROM quota_profile_caps"))) {
    tree.set_profile_cap(row.text(0), row.text(1), row.text(2), row.integer(3));
    tenants.insert(row.text(0));
  }
  for (const auto& row : GP_TRY(tx.query("SELECT DISTINCT tenant_id, project_id FROM quotas"))) {
    tenants.insert(row.text(0));
    if (!row.text(1).empty()) projects.emplace(row.text(0), row.text(1));
  }
  // Messages name tenants and projects as people know them.
  for (const auto& id : tenants)
    if (auto t = GP_TRY(tenancy::find_tenant(tx, id))) tree.set_name(id, t->name);
  for (const auto& [tenant, project] : projects)
    if (auto p = GP_TRY(tenancy::find_project(tx, tenancy::TenantScope(tenant), project)))
      tree.set_name(project, p->name);
  return tree;
}

}  // namespace detail

namespace {

Result<void> write_models(store::Tx& tx, const std::string& tenant_id,
                          const std::string& project_id,
                          const std::map<std::string, ModelQuota>& models) {
  GP_TRY(tx.exec("DELETE FROM quotas WHERE tenant_id = ? AND project_id = ?",
                 {tenant_id, project_id}));
  for (const auto& [model, q] : models)
    GP_TRY(tx.exec(
        "INSERT INTO quotas (tenant_id, project_id, model, nominal, borrow_limit, hard_limit) "
        "VALUES (?,?,?,?,?,?)",
        {tenant_id, project_id, model, q.nominal, store::opt(q.borrow_limit),
         store::opt(q.limit)}));
  return ok();
}

}  // namespace

Result<void> Service::set_tenant_quota(store::Tx& tx, const std::string& tenant_id,
                                       const TenantQuota& q) {
  GP_TRY_VOID(write_models(tx, tenant_id, "", q.models));
  GP_TRY(tx.exec("DELETE FROM quota_profile_caps WHERE tenant_id = ?", {tenant_id}));
  for (const auto& [model, profiles] : q.profile_caps)
    for (const auto& [profile, n] : profiles)
      GP_TRY(tx.exec(
          "INSERT INTO quota_profile_caps (tenant_id, model, profile, max_instances) VALUES "
          "(?,?,?,?)",
          {tenant_id, model, profile, n}));
  GP_TRY(
      tx.exec("INSERT INTO tenant_scheduling (tenant_id, cohort, weight, version) VALUES (?,?,?,1) "
              "ON CONFLICT (tenant_id) DO UPDATE SET cohort = excluded.cohort, weight = "
              "excluded.weight, version = tenant_scheduling.version + 1",
              {tenant_id, q.cohort, q.weight}));
  invalidate();
  return ok();
}

Result<void> Service::set_project_quota(store::Tx& tx, const std::string& tenant_id,
                                        const std::string& project_id, const ProjectQuota& q) {
  // A project's nominal quota is carved out of its tenant's: together they may not promise more.
  auto tenant = GP_TRY(load_tenant_quota(tx, tenant_id));
  for (const auto& [model, pq] : q.models) {
    auto it = tenant.models.find(model);
    const int64_t tenant_cap =
        it == tenant.models.end() ? 0 : it->second.limit.value_or(it->second.nominal);
    auto others = GP_TRY(tx.query_one(
        "SELECT COALESCE(SUM(nominal), 0) FROM quotas WHERE tenant_id = ? AND project_id NOT IN "
        "('', ?) AND model = ?",
        {tenant_id, project_id, model}));
    if (it == tenant.models.end())
      return fail(Error::invalid(
          fmt::format("the tenant has no quota for {}; set the tenant's first", model)));
    if (others->integer(0) + pq.nominal > it->second.nominal)
      return fail(Error::invalid(fmt::format(
          "projects' nominal quota for {} would total {} GPU, above the tenant's nominal {}", model,
          vocab::format_units(others->integer(0) + pq.nominal),
          vocab::format_units(it->second.nominal))));
    if (pq.limit && *pq.limit > tenant_cap)
      return fail(Error::invalid(fmt::format("the project's limit for {} exceeds the tenant's {}",
                                             model, vocab::format_units(tenant_cap))));
  }
  GP_TRY_VOID(write_models(tx, tenant_id, project_id, q.models));
  invalidate();
  return ok();
}

Result<void> Service::set_platform_quota(store::Tx& tx,
                                         const std::map<std::string, int64_t>& limits) {
  GP_TRY(tx.exec("DELETE FROM platform_quotas"));
  for (const auto& [model, limit] : limits)
    GP_TRY(tx.exec("INSERT INTO platform_quotas (model, hard_limit) VALUES (?,?)", {model, limit}));
  invalidate();
  return ok();
}

}  // namespace gp::alloc
