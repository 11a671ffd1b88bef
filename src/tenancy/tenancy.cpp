#include "tenancy/tenancy.h"

#include <fmt/format.h>

#include "common/crypto.h"
#include "common/env.h"
#include "policy/policy.h"
#include "storage/records.h"
#include "store/record_row.h"

namespace gp::tenancy {
namespace {

constexpr size_t kMaxLabels = 32;

Result<std::map<std::string, std::string>> parse_labels(const Json& j) {
  std::map<std::string, std::string> out;
  if (j.size() > kMaxLabels) return fail(Error::invalid("at most 32 labels"));
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key().empty() || it.key().size() > 63)
      return fail(Error::invalid("label keys must be 1 to 63 characters"));
    if (!it->is_string() || it->get_ref<const std::string&>().size() > 63)
      return fail(Error::invalid(
          fmt::format("label '{}' must be a string of at most 63 characters", it.key())));
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

}  // namespace

std::string_view state_name(TenantState s) { return enum_name(s, kTenantStateNames); }
std::optional<TenantState> parse_state(std::string_view s) {
  return parse_enum<TenantState>(s, kTenantStateNames);
}

// ---------------- tenants ----------------

namespace {
const std::string kTenantCols = store::columns_of<Tenant>();
// No LIMIT: a principal limited to some ids reads every row and keeps its own.
constexpr int64_t kEveryRow = int64_t(1) << 40;
}  // namespace

Result<TenantSpec> parse_tenant_spec(ObjectReader& r) {
  TenantSpec s;
  s.name = r.string("name", 63);
  s.display_name = r.optional_string("display_name", kMaxDisplay).value_or("");
  auto cls = r.optional_string("isolation_class", 32);
  if (cls) {
    auto c = parse_class(*cls);
    if (!c)
      r.reject("isolation_class", "must be one of internal, standard, sensitive, regulated");
    else
      s.isolation_class = *c;
  }
  if (auto l = r.optional_object("labels")) s.labels = GP_TRY(parse_labels(*l));
  return s;
}

Result<Tenant> create_tenant(store::Tx& tx, const Env& w, const TenantSpec& spec) {
  GP_TRY_VOID(validate_dns_label("name", spec.name));
  GP_TRY_VOID(validate_display("display_name", spec.display_name));
  // Names hold only [a-z0-9-], so they are safe in LIKE patterns. Only platform admins create
  // tenants and they see every tenant, so naming the other one reveals nothing.
  for (const auto& row : GP_TRY(tx.query(
           "SELECT name FROM tenants WHERE name LIKE ? OR ? LIKE (name || '-%') ORDER BY name",
           {spec.name + "-%", spec.name}))) {
    if (!policy::tenant_names_share_namespaces(spec.name, row.text(0))) continue;
    return fail(Error::conflict(fmt::format(
        "tenant name '{}' and the existing tenant '{}' extend one another at a '-', so their "
        "projects could get the same Kubernetes namespace ('<tenant>-<project>'); choose a name "
        "that neither extends nor is extended by another tenant's",
        spec.name, row.text(0))));
  }
  Tenant t;
  t.id = w.ids.next("ten");
  t.name = spec.name;
  t.display_name = spec.display_name.empty() ? spec.name : spec.display_name;
  t.isolation_class = spec.isolation_class;
  t.labels = spec.labels;
  t.created_at = t.updated_at = w.now();
  auto r = tx.exec(fmt::format("INSERT INTO tenants ({}) VALUES ({})", kTenantCols,
                               store::placeholders_of<Tenant>()),
                   store::params_of(t));
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(Error::conflict(fmt::format("a tenant named '{}' already exists", spec.name)));
  GP_TRY_VOID(r);
  return t;
}

Result<std::optional<Tenant>> find_tenant(store::Tx& tx, std::string_view key) {
  // Formatted once: every request under /v1/tenants/{tenant} runs one of them.
  static const std::string by_id = fmt::format("SELECT {} FROM tenants WHERE id = ?", kTenantCols);
  static const std::string by_name =
      fmt::format("SELECT {} FROM tenants WHERE name = ?", kTenantCols);
  return store::read_record<Tenant>(tx, key.starts_with("ten_") ? by_id : by_name,
                                    {std::string(key)});
}

Result<Page<Tenant>> list_tenants(store::Tx& tx, const PageRequest& page,
                                  const std::optional<std::vector<std::string>>& only_ids) {
  static const std::string sql =
      fmt::format("SELECT {} FROM tenants WHERE id > ? ORDER BY id LIMIT ?", kTenantCols);
  return store::read_page<Tenant>(
      tx, sql, {page.after.value_or(""), only_ids ? kEveryRow : fetch_limit(page)}, page, only_ids);
}

Result<std::vector<Tenant>> all_tenants(store::Tx& tx) {
  return all_pages([&](const PageRequest& page) { return list_tenants(tx, page, std::nullopt); });
}

Result<std::vector<Project>> all_projects(store::Tx& tx, const TenantScope& s) {
  return all_pages(
      [&](const PageRequest& page) { return list_projects(tx, s, page, std::nullopt); });
}

Result<std::unordered_map<std::string, std::string>> tenant_names(store::Tx& tx) {
  std::unordered_map<std::string, std::string> names;
  for (const auto& r : GP_TRY(tx.query("SELECT id, name FROM tenants")))
    names.emplace(r.text(0), r.text(1));
  return names;
}

Result<WorkloadPolicy> load_workload_policy(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(tx.query_one(
      "SELECT policy, version FROM tenant_workload_policies WHERE tenant_id = ?", {tenant_id}));
  if (!row) return WorkloadPolicy{};
  Json j = GP_TRY(parse_json(row->text(0)));
  WorkloadPolicy p;
  if (!j.is_object() || !j.contains("allowed_registries") || !j["allowed_registries"].is_array() ||
      !j.contains("require_pull_always") || !j["require_pull_always"].is_boolean())
    return fail(Error::internal("stored workload policy unreadable for tenant " + tenant_id));
  for (const auto& r : j["allowed_registries"]) {
    if (!r.is_string()) return fail(Error::internal("stored workload policy: registry not text"));
    p.allowed_registries.push_back(r.get<std::string>());
  }
  p.require_pull_always = j["require_pull_always"].get<bool>();
  p.version = row->integer(1);
  return p;
}

Result<WorkloadPolicy> save_workload_policy(store::Tx& tx, const std::string& tenant_id,
                                            const WorkloadPolicy& before, WorkloadPolicy next,
                                            const std::string& who, int64_t now) {
  next.version = before.version + 1;
  const Json stored = {{"allowed_registries", next.allowed_registries},
                       {"require_pull_always", next.require_pull_always}};
  if (before.version == 0) {
    GP_TRY(
        tx.exec("INSERT INTO tenant_workload_policies (tenant_id, policy, updated_by, updated_at, "
                "version) VALUES (?,?,?,?,?)",
                {tenant_id, stored.dump(), who, now, next.version}));
  } else {
    GP_TRY(
        tx.exec("UPDATE tenant_workload_policies SET policy = ?, updated_by = ?, updated_at = ?, "
                "version = ? WHERE tenant_id = ? AND version = ?",
                {stored.dump(), who, now, next.version, tenant_id, before.version}));
  }
  return next;
}

Result<TenantPatch> parse_tenant_patch(ObjectReader& r) {
  TenantPatch p;
  p.display_name = r.optional_string("display_name", kMaxDisplay);
  if (auto c = r.optional_string("isolation_class", 32)) {
    p.isolation_class = parse_class(*c);
    if (!p.isolation_class)
      r.reject("isolation_class", "must be one of internal, standard, sensitive, regulated");
  }
  if (auto s = r.optional_string("state", 32)) {
    p.state = parse_state(*s);
    if (!p.state || *p.state == TenantState::kOffboarding)
      r.reject("state", "must be active or suspended (offboard with DELETE)");
  }
  if (auto l = r.optional_object("labels")) p.labels = GP_TRY(parse_labels(*l));
  return p;
}

Result<Tenant> update_tenant(store::Tx& tx, const Env& w, const TenantScope& scope,
                             const TenantPatch& patch, std::optional<int64_t> if_match) {
  auto found = GP_TRY(find_tenant(tx, scope.tenant_id()));
  if (!found) return fail(Error::not_found("tenant not found"));
  Tenant t = *found;
  GP_TRY_VOID(check_version(if_match, t.version));
  if (t.state == TenantState::kOffboarding)
    return fail(Error::conflict(fmt::format(
        "tenant '{}' is offboarding: offboarding is final, the tenant can no longer be resumed "
        "or changed (create a new tenant instead)",
        t.name)));
  if (patch.display_name) {
    GP_TRY_VOID(validate_display("display_name", *patch.display_name));
    t.display_name = *patch.display_name;
  }
  if (patch.isolation_class) t.isolation_class = *patch.isolation_class;
  if (patch.state) t.state = *patch.state;
  if (patch.labels) t.labels = *patch.labels;
  t.updated_at = w.now();
  ++t.version;
  GP_TRY_VOID(tx.exec(
      "UPDATE tenants SET display_name=?, isolation_class=?, state=?, labels=?, updated_at=?, "
      "version=? WHERE id=?",
      {t.display_name, std::string(class_name(t.isolation_class)), std::string(state_name(t.state)),
       Json(t.labels).dump(), t.updated_at, t.version, t.id}));
  return t;
}

Result<Tenant> offboard_tenant(store::Tx& tx, const Env& w, const TenantScope& scope,
                               std::optional<int64_t> if_match) {
  auto found = GP_TRY(find_tenant(tx, scope.tenant_id()));
  if (!found) return fail(Error::not_found("tenant not found"));
  Tenant t = *found;
  GP_TRY_VOID(check_version(if_match, t.version));
  if (t.state == TenantState::kOffboarding) return t;
  int64_t now = w.now();
  t.state = TenantState::kOffboarding;
  t.updated_at = now;
  ++t.version;
  GP_TRY_VOID(tx.exec("UPDATE tenants SET state=?, updated_at=?, version=? WHERE id=?",
                      {std::string("offboarding"), now, t.version, t.id}));
  GP_TRY_VOID(iam::revoke_tenant_credentials(tx, t.id, now));
  return t;
}

iam::TenantLookup tenant_lookup() {
  return {.offboarding = [](store::Tx& tx, const std::string& tenant_id) -> Result<bool> {
            auto row = GP_TRY(tx.query_one("SELECT state FROM tenants WHERE id = ?", {tenant_id}));
            return row && row->text(0) == state_name(TenantState::kOffboarding);
          },
          .tables = {"tenants"}};
}

// ---------------- projects ----------------

namespace {
const std::string kProjectCols = store::columns_of<Project>();
}  // namespace

Result<ProjectSpec> parse_project_spec(ObjectReader& r) {
  ProjectSpec s;
  s.name = r.string("name", 63);
  s.display_name = r.optional_string("display_name", kMaxDisplay).value_or("");
  return s;
}

Result<Project> create_project(store::Tx& tx, const Env& w, const TenantScope& s,
                               const ProjectSpec& spec) {
  GP_TRY_VOID(validate_dns_label("name", spec.name));
  GP_TRY_VOID(validate_display("display_name", spec.display_name));
  auto tenant = GP_TRY(tx.query_one("SELECT name FROM tenants WHERE id = ?", {s.tenant_id()}));
  if (!tenant) return fail(Error::not_found("tenant not found"));
  Project p{w.ids.next("prj"), s.tenant_id(), spec.name,
            spec.display_name.empty() ? spec.name : spec.display_name};
  p.created_at = p.updated_at = w.now();
  // A name too long for a namespace gets none: the bundle render names the problem.
  if (auto ns = policy::project_namespace(tenant->text(0), spec.name)) p.kubernetes_namespace = *ns;
  // Checked before the insert: after a failed statement PostgreSQL reads nothing more.
  if (GP_TRY(tx.query_one("SELECT 1 FROM projects WHERE tenant_id = ? AND name = ?",
                          {s.tenant_id(), spec.name})))
    return fail(Error::conflict(fmt::format("a project named '{}' already exists", spec.name)));
  auto r = tx.exec(fmt::format("INSERT INTO projects ({}) VALUES ({})", kProjectCols,
                               store::placeholders_of<Project>()),
                   store::params_of(p));
  // Only a store from before migration 20 can hold another tenant's project with this
  // namespace (tenant names that extend one another at a '-'); the unique index keeps the older
  // one's, and the answer says no more than that the name is taken.
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(Error::conflict(fmt::format(
        "the Kubernetes namespace '{}' of a project named '{}' is already taken; choose another "
        "name",
        p.kubernetes_namespace.value_or(""), spec.name)));
  GP_TRY_VOID(r);
  return p;
}

Result<std::optional<Project>> find_project_by_namespace(store::Tx& tx, std::string_view ns) {
  static const std::string sql =
      fmt::format("SELECT {} FROM projects WHERE k8s_namespace = ?", kProjectCols);
  return store::read_record<Project>(tx, sql, {std::string(ns)});
}

Result<std::optional<Project>> find_project(store::Tx& tx, const TenantScope& s,
                                            std::string_view key) {
  static const std::string by_id =
      fmt::format("SELECT {} FROM projects WHERE tenant_id = ? AND id = ?", kProjectCols);
  static const std::string by_name =
      fmt::format("SELECT {} FROM projects WHERE tenant_id = ? AND name = ?", kProjectCols);
  return store::read_record<Project>(tx, key.starts_with("prj_") ? by_id : by_name,
                                     {s.tenant_id(), std::string(key)});
}

PathCache::PathCache(store::Store& store) { store.count_changes_to({"tenants", "projects"}); }

void PathCache::at(uint64_t generation) const {
  // Bounded: past this many names in use at once, start again.
  constexpr size_t kMaxKept = 10000;
  if (generation != generation_ || tenants_.size() + projects_.size() >= kMaxKept) {
    tenants_.clear();
    projects_.clear();
    generation_ = generation;
  }
}

Result<std::optional<Tenant>> PathCache::tenant(store::Tx& tx, std::string_view key,
                                                std::optional<uint64_t> generation) const {
  if (!generation) return find_tenant(tx, key);
  {
    MutexLock lock(mu_);
    at(*generation);
    if (auto it = tenants_.find(std::string(key)); it != tenants_.end())
      return std::optional<Tenant>(it->second);
  }
  auto found = GP_TRY(find_tenant(tx, key));
  if (found) {
    MutexLock lock(mu_);
    at(*generation);
    tenants_.insert_or_assign(std::string(key), *found);
  }
  return found;
}

Result<std::optional<Project>> PathCache::project(store::Tx& tx, const TenantScope& s,
                                                  std::string_view key,
                                                  std::optional<uint64_t> generation) const {
  if (!generation) return find_project(tx, s, key);
  const std::string kept_as = s.tenant_id() + "/" + std::string(key);
  {
    MutexLock lock(mu_);
    at(*generation);
    if (auto it = projects_.find(kept_as); it != projects_.end())
      return std::optional<Project>(it->second);
  }
  auto found = GP_TRY(find_project(tx, s, key));
  if (found) {
    MutexLock lock(mu_);
    at(*generation);
    projects_.insert_or_assign(kept_as, *found);
  }
  return found;
}

Result<Page<Project>> list_projects(store::Tx& tx, const TenantScope& s, const PageRequest& page,
                                    const std::optional<std::vector<std::string>>& only_ids) {
  // A page reads its own rows only; a principal limited to some projects filters them below.
  static const std::string sql = fmt::format(
      "SELECT {} FROM projects WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?", kProjectCols);
  return store::read_page<Project>(
      tx, sql, {s.tenant_id(), page.after.value_or(""), only_ids ? kEveryRow : fetch_limit(page)},
      page, only_ids);
}

Result<Project> update_project(store::Tx& tx, const Env& w, const TenantScope& s,
                               const std::string& id, const std::optional<std::string>& display,
                               std::optional<int64_t> if_match) {
  auto found = GP_TRY(find_project(tx, s, id));
  if (!found) return fail(Error::not_found("project not found"));
  Project p = *found;
  GP_TRY_VOID(check_version(if_match, p.version));
  if (display) {
    GP_TRY_VOID(validate_display("display_name", *display));
    p.display_name = *display;
  }
  p.updated_at = w.now();
  ++p.version;
  GP_TRY_VOID(tx.exec(
      "UPDATE projects SET display_name=?, updated_at=?, version=? WHERE id=? AND tenant_id=?",
      {p.display_name, p.updated_at, p.version, p.id, s.tenant_id()}));
  return p;
}

Result<void> delete_project(store::Tx& tx, const TenantScope& s, const std::string& id) {
  // A project with volumes keeps its tree until they are deleted (by its id, not its name).
  GP_TRY_VOID(storage::check_project_deletable(tx, s.tenant_id(), id));
  GP_TRY_VOID(iam::delete_project_bindings(tx, s, id));
  auto n =
      GP_TRY(tx.exec("DELETE FROM projects WHERE tenant_id = ? AND id = ?", {s.tenant_id(), id}));
  if (n == 0) return fail(Error::not_found("project not found"));
  return ok();
}

// ---------------- password login ----------------

Result<std::string> check_password(store::Tx& tx, std::string_view login,
                                   std::string_view password) {
  // Tenant users log in as "<tenant>/<username>", platform users by username alone.
  auto slash = login.find('/');
  if (slash == std::string_view::npos)
    return iam::check_password(tx, std::nullopt, login, password);
  // By name only: a login never names its tenant by id.
  auto tenant = GP_TRY(
      tx.query_one("SELECT id FROM tenants WHERE name = ?", {std::string(login.substr(0, slash))}));
  if (!tenant) return iam::refuse_login(password);
  return iam::check_password(tx, TenantScope(tenant->text(0)), login.substr(slash + 1), password);
}

// ---------------- bootstrap ----------------

Result<std::optional<Bootstrap>> bootstrap_platform_admin(
    store::Tx& tx, const Env& w, const std::optional<std::string>& password) {
  auto done = GP_TRY(tx.query_one("SELECT value FROM meta WHERE key = 'bootstrap'"));
  if (done) return std::optional<Bootstrap>();
  Bootstrap b;
  b.username = "admin";
  b.password = password.value_or(base64url_encode(w.random.bytes(18)));
  auto user = GP_TRY(create_user(tx, w, std::nullopt,
                                 UserSpec{b.username, "Platform administrator", "", b.password}));
  GP_TRY_VOID(create_binding(tx, w, std::nullopt, iam::Scope::platform(),
                             BindingSpec{iam::Role::kPlatformAdmin, "user", user.id, {}}));
  auto key = GP_TRY(
      create_api_key(tx, w, std::nullopt, ApiKeySpec{"bootstrap", "user", user.id, std::nullopt}));
  b.api_key = key.token;
  GP_TRY_VOID(tx.exec("INSERT INTO meta (key, value) VALUES ('bootstrap', ?)", {user.id}));
  return std::optional<Bootstrap>(std::move(b));
}

}  // namespace gp::tenancy
