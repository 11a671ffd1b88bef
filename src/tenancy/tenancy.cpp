#include "tenancy/tenancy.h"

#include <fmt/format.h>

#include "common/crypto.h"
#include "policy/policy.h"
#include "storage/records.h"
#include "store/record_row.h"

namespace gp::tenancy {
namespace {

using store::Null;
using store::Row;
using store::Value;

constexpr size_t kMaxDisplay = 200;
constexpr size_t kMaxLabels = 32;

Json time_or_null(std::optional<int64_t> us) {
  if (!us) return nullptr;
  return format_rfc3339(from_unix_micros(*us));
}
std::string ts(int64_t us) { return format_rfc3339(from_unix_micros(us)); }
Value owner_value(const Owner& o) {
  if (!o) return Null{};
  return o->tenant_id();
}
// SQL fragment matching the owner column: "tenant_id = ?" or "tenant_id IS NULL".
std::string owner_clause(const Owner& o, store::Params& params,
                         std::string_view col = "tenant_id") {
  if (!o) return fmt::format("{} IS NULL", col);
  params.push_back(o->tenant_id());
  return fmt::format("{} = ?", col);
}

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

// One row more than the page, to know whether a next page exists.
int64_t fetch_limit(const PageRequest& p) { return int64_t(p.limit) + 1; }

Result<void> check_version(std::optional<int64_t> if_match, int64_t version) {
  if (if_match && *if_match != version)
    return fail(ErrorCode::kPreconditionFailed,
                fmt::format("resource is at version {}, not {}", version, *if_match));
  return ok();
}

Result<void> validate_email(std::string_view e) {
  if (e.empty()) return ok();
  auto at = e.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 >= e.size() || e.size() > 254)
    return fail(Error::invalid("email is not a valid address"));
  return ok();
}

Result<void> validate_display(std::string_view field, std::string_view v) {
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f)
      return fail(Error::invalid(fmt::format("{} must not contain control characters", field)));
  return ok();
}

// Revokes every credential of a subject (keys and, for users, sessions).
Result<void> revoke_credentials_of(store::Tx& tx, int64_t now, const std::string& subject_id) {
  GP_TRY_VOID(
      tx.exec("UPDATE api_keys SET revoked_at = ? WHERE owner_id = ? AND revoked_at IS NULL",
              {now, subject_id}));
  GP_TRY_VOID(tx.exec("UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
                      {now, subject_id}));
  return ok();
}

}  // namespace

std::string_view state_name(TenantState s) {
  switch (s) {
    case TenantState::kActive:
      return "active";
    case TenantState::kSuspended:
      return "suspended";
    case TenantState::kOffboarding:
      return "offboarding";
  }
  return "active";
}
std::optional<TenantState> parse_state(std::string_view s) {
  for (auto v : {TenantState::kActive, TenantState::kSuspended, TenantState::kOffboarding})
    if (state_name(v) == s) return v;
  return std::nullopt;
}

Json Tenant::to_json() const {
  return {{"id", id},
          {"name", name},
          {"display_name", display_name},
          {"isolation_class", class_name(isolation_class)},
          {"state", state_name(state)},
          {"labels", labels},
          {"created_at", ts(created_at)},
          {"updated_at", ts(updated_at)},
          {"version", version}};
}
Json User::to_json() const {
  return {{"id", id},
          {"tenant_id", tenant_id ? Json(*tenant_id) : Json(nullptr)},
          {"username", username},
          {"display_name", display_name},
          {"email", email},
          {"state", state},
          {"created_at", ts(created_at)},
          {"updated_at", ts(updated_at)},
          {"version", version}};
}
Json ServiceAccount::to_json() const {
  return {{"id", id},
          {"tenant_id", tenant_id ? Json(*tenant_id) : Json(nullptr)},
          {"name", name},
          {"description", description},
          {"state", state},
          {"created_at", ts(created_at)},
          {"updated_at", ts(updated_at)},
          {"version", version}};
}
Json ApiKey::to_json(int64_t now) const {
  std::string st = revoked_at                           ? "revoked"
                   : (expires_at && *expires_at <= now) ? "expired"
                                                        : "active";
  return {{"id", id},
          {"tenant_id", tenant_id ? Json(*tenant_id) : Json(nullptr)},
          {"owner_kind", owner_kind},
          {"owner_id", owner_id},
          {"name", name},
          {"state", st},
          {"created_at", ts(created_at)},
          {"expires_at", time_or_null(expires_at)},
          {"revoked_at", time_or_null(revoked_at)}};
}
Json Binding::to_json() const {
  return {{"id", id},
          {"tenant_id", tenant_id ? Json(*tenant_id) : Json(nullptr)},
          {"project_id", project_id ? Json(*project_id) : Json(nullptr)},
          {"subject_kind", subject_kind},
          {"subject_id", subject_id},
          {"role", role},
          {"source", source},
          {"created_at", ts(created_at)}};
}

// ---------------- tenants ----------------

namespace {
constexpr std::string_view kTenantCols =
    "id, name, display_name, isolation_class, state, labels, created_at, updated_at, version";
Tenant tenant_from(const Row& r) {
  Tenant t;
  t.id = r.text(0);
  t.name = r.text(1);
  t.display_name = r.text(2);
  t.isolation_class = parse_class(r.text(3)).value_or(IsolationClass::kStandard);
  t.state = parse_state(r.text(4)).value_or(TenantState::kActive);
  auto labels = Json::parse(r.text(5), nullptr, false);
  if (labels.is_object())
    for (auto it = labels.begin(); it != labels.end(); ++it)
      t.labels[it.key()] = it->get<std::string>();
  t.created_at = r.integer(6);
  t.updated_at = r.integer(7);
  t.version = r.integer(8);
  return t;
}
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

Result<Tenant> create_tenant(store::Tx& tx, const World& w, const TenantSpec& spec) {
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
  auto r = tx.exec(fmt::format("INSERT INTO tenants ({}) VALUES (?,?,?,?,?,?,?,?,?)", kTenantCols),
                   {t.id, t.name, t.display_name, std::string(class_name(t.isolation_class)),
                    std::string(state_name(t.state)), Json(t.labels).dump(), t.created_at,
                    t.updated_at, t.version});
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(Error::conflict(fmt::format("a tenant named '{}' already exists", spec.name)));
  GP_TRY_VOID(r);
  return t;
}

Result<std::optional<Tenant>> find_tenant(store::Tx& tx, std::string_view key) {
  auto row = GP_TRY(tx.query_one(fmt::format("SELECT {} FROM tenants WHERE {} = ?", kTenantCols,
                                             key.starts_with("ten_") ? "id" : "name"),
                                 {std::string(key)}));
  if (!row) return std::optional<Tenant>();
  return std::optional<Tenant>(tenant_from(*row));
}

Result<Page<Tenant>> list_tenants(store::Tx& tx, const PageRequest& page,
                                  const std::optional<std::vector<std::string>>& only_ids) {
  std::vector<Tenant> out;
  auto rows = GP_TRY(
      tx.query(fmt::format("SELECT {} FROM tenants WHERE id > ? ORDER BY id LIMIT ?", kTenantCols),
               {page.after.value_or(""), only_ids ? int64_t(1) << 40 : fetch_limit(page)}));
  for (const auto& r : rows) {
    Tenant t = tenant_from(r);
    if (only_ids && std::find(only_ids->begin(), only_ids->end(), t.id) == only_ids->end())
      continue;
    out.push_back(std::move(t));
    if (out.size() > size_t(page.limit)) break;
  }
  return make_page(std::move(out), page);
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

Result<TenantIdentities> tenant_identities(store::Tx& tx, const std::string& tenant_id,
                                           int64_t now) {
  TenantIdentities out;
  const auto count = [&](std::string_view table) -> Result<int> {
    auto row = GP_TRY(tx.query_one(
        fmt::format("SELECT COUNT(*) FROM {} WHERE tenant_id = ? AND state = 'active'", table),
        {tenant_id}));
    return row ? static_cast<int>(row->integer(0)) : 0;
  };
  out.active_users = GP_TRY(count("users"));
  out.active_service_accounts = GP_TRY(count("service_accounts"));
  for (const auto& row : GP_TRY(tx.query(
           "SELECT id, name, owner_kind, owner_id, expires_at FROM api_keys WHERE tenant_id = ? "
           "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY id",
           {tenant_id, now}))) {
    ApiKey k;
    k.id = row.text(0);
    k.tenant_id = tenant_id;
    k.name = row.text(1);
    k.owner_kind = row.text(2);
    k.owner_id = row.text(3);
    k.expires_at = row.opt_integer(4);
    out.live_keys.push_back(std::move(k));
  }
  for (const auto& row : GP_TRY(tx.query(
           "SELECT b.id, b.role, b.tenant_id, b.project_id, b.subject_kind, b.subject_id, "
           "COALESCE(u.tenant_id, s.tenant_id) FROM role_bindings b "
           "LEFT JOIN users u ON b.subject_kind = 'user' AND u.id = b.subject_id "
           "LEFT JOIN service_accounts s ON b.subject_kind = 'service_account' AND s.id = "
           "b.subject_id WHERE b.tenant_id = ? OR u.tenant_id = ? OR s.tenant_id = ? ORDER BY b.id",
           {tenant_id, tenant_id, tenant_id}))) {
    Binding b;
    b.id = row.text(0);
    b.role = row.text(1);
    b.tenant_id = row.opt_text(2);
    b.project_id = row.opt_text(3);
    b.subject_kind = row.text(4);
    b.subject_id = row.text(5);
    out.bindings.emplace_back(std::move(b), row.opt_text(6));
  }
  return out;
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

Result<Tenant> update_tenant(store::Tx& tx, const World& w, const TenantScope& scope,
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

Result<Tenant> offboard_tenant(store::Tx& tx, const World& w, const TenantScope& scope,
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
  GP_TRY_VOID(tx.exec("UPDATE api_keys SET revoked_at=? WHERE tenant_id=? AND revoked_at IS NULL",
                      {now, t.id}));
  GP_TRY_VOID(
      tx.exec("UPDATE sessions SET revoked_at=? WHERE revoked_at IS NULL AND user_id IN "
              "(SELECT id FROM users WHERE tenant_id=?)",
              {now, t.id}));
  return t;
}

// ---------------- projects ----------------

namespace {
const std::string kProjectCols = store::columns_of<Project>();
Project project_from(const Row& r) { return store::read_row<Project>(r); }
}  // namespace

Result<ProjectSpec> parse_project_spec(ObjectReader& r) {
  ProjectSpec s;
  s.name = r.string("name", 63);
  s.display_name = r.optional_string("display_name", kMaxDisplay).value_or("");
  return s;
}

Result<Project> create_project(store::Tx& tx, const World& w, const TenantScope& s,
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
  auto row = GP_TRY(
      tx.query_one(fmt::format("SELECT {} FROM projects WHERE k8s_namespace = ?", kProjectCols),
                   {std::string(ns)}));
  if (!row) return std::optional<Project>();
  return std::optional<Project>(project_from(*row));
}

Result<std::optional<Project>> find_project(store::Tx& tx, const TenantScope& s,
                                            std::string_view key) {
  auto row =
      GP_TRY(tx.query_one(fmt::format("SELECT {} FROM projects WHERE tenant_id = ? AND {} = ?",
                                      kProjectCols, key.starts_with("prj_") ? "id" : "name"),
                          {s.tenant_id(), std::string(key)}));
  if (!row) return std::optional<Project>();
  return std::optional<Project>(project_from(*row));
}

Result<Page<Project>> list_projects(store::Tx& tx, const TenantScope& s, const PageRequest& page,
                                    const std::optional<std::vector<std::string>>& only_ids) {
  // A page reads its own rows only; a principal limited to some projects filters them below.
  auto rows = GP_TRY(tx.query(
      fmt::format("SELECT {} FROM projects WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?",
                  kProjectCols),
      {s.tenant_id(), page.after.value_or(""), only_ids ? int64_t(1) << 40 : fetch_limit(page)}));
  std::vector<Project> out;
  for (const auto& r : rows) {
    Project p = project_from(r);
    if (only_ids && std::find(only_ids->begin(), only_ids->end(), p.id) == only_ids->end())
      continue;
    out.push_back(std::move(p));
    if (out.size() > size_t(page.limit)) break;
  }
  return make_page(std::move(out), page);
}

Result<Project> update_project(store::Tx& tx, const World& w, const TenantScope& s,
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
  GP_TRY_VOID(tx.exec("DELETE FROM role_bindings WHERE tenant_id = ? AND project_id = ?",
                      {s.tenant_id(), id}));
  auto n =
      GP_TRY(tx.exec("DELETE FROM projects WHERE tenant_id = ? AND id = ?", {s.tenant_id(), id}));
  if (n == 0) return fail(Error::not_found("project not found"));
  return ok();
}

// ---------------- users ----------------

namespace {
constexpr std::string_view kUserCols =
    "id, tenant_id, username, display_name, email, state, created_at, updated_at, version";
User user_from(const Row& r) {
  User u;
  u.id = r.text(0);
  u.tenant_id = r.opt_text(1);
  u.username = r.text(2);
  u.display_name = r.text(3);
  u.email = r.text(4);
  u.state = r.text(5);
  u.created_at = r.integer(6);
  u.updated_at = r.integer(7);
  u.version = r.integer(8);
  return u;
}
}  // namespace

Result<UserSpec> parse_user_spec(ObjectReader& r) {
  UserSpec s;
  s.username = r.string("username", 63);
  s.display_name = r.optional_string("display_name", kMaxDisplay).value_or("");
  s.email = r.optional_string("email", 254).value_or("");
  s.password = r.optional_string("password", 256);
  return s;
}

Result<User> create_user(store::Tx& tx, const World& w, const Owner& owner, const UserSpec& spec) {
  GP_TRY_VOID(validate_dns_label("username", spec.username));
  GP_TRY_VOID(validate_display("display_name", spec.display_name));
  GP_TRY_VOID(validate_email(spec.email));
  Value pw = Null{};
  if (spec.password) {
    GP_TRY_VOID(iam::validate_password_strength(*spec.password));
    pw = GP_TRY(iam::hash_password(*spec.password));
  }
  User u;
  u.id = w.ids.next("usr");
  if (owner) u.tenant_id = owner->tenant_id();
  u.username = spec.username;
  u.display_name = spec.display_name.empty() ? spec.username : spec.display_name;
  u.email = spec.email;
  u.created_at = u.updated_at = w.now();
  auto r = tx.exec(
      "INSERT INTO users (id, tenant_id, username, display_name, email, password_hash, state, "
      "created_at, updated_at, version) VALUES (?,?,?,?,?,?,?,?,?,?)",
      {u.id, owner_value(owner), u.username, u.display_name, u.email, pw, u.state, u.created_at,
       u.updated_at, u.version});
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(
        Error::conflict(fmt::format("username '{}' is taken", spec.username)));  // in this scope
  GP_TRY_VOID(r);
  return u;
}

Result<std::optional<User>> find_user(store::Tx& tx, const Owner& owner, std::string_view key) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(std::string(key));
  auto row = GP_TRY(tx.query_one(fmt::format("SELECT {} FROM users WHERE {} AND {} = ?", kUserCols,
                                             where, key.starts_with("usr_") ? "id" : "username"),
                                 params));
  if (!row) return std::optional<User>();
  return std::optional<User>(user_from(*row));
}

Result<Page<User>> list_users(store::Tx& tx, const Owner& owner, const PageRequest& page) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(page.after.value_or(""));
  params.push_back(fetch_limit(page));
  auto rows = GP_TRY(tx.query(
      fmt::format("SELECT {} FROM users WHERE {} AND id > ? ORDER BY id LIMIT ?", kUserCols, where),
      params));
  std::vector<User> out;
  for (const auto& r : rows) out.push_back(user_from(r));
  return make_page(std::move(out), page);
}

Result<void> delete_user(store::Tx& tx, const World& w, const Owner& owner, const std::string& id) {
  auto u = GP_TRY(find_user(tx, owner, id));
  if (!u) return fail(Error::not_found("user not found"));
  int64_t now = w.now();
  GP_TRY_VOID(revoke_credentials_of(tx, now, u->id));
  GP_TRY_VOID(tx.exec("DELETE FROM role_bindings WHERE subject_id = ?", {u->id}));
  // The row stays (disabled) so the audit trail's actor ids keep resolving; the username is
  // freed for reuse, and an identity provider's subject too (its next login starts afresh).
  GP_TRY_VOID(
      tx.exec("UPDATE users SET state='deleted', username=?, password_hash=NULL, "
              "external_subject=NULL, updated_at=?, version=version+1 WHERE id=?",
              {fmt::format("deleted-{}", u->id), now, u->id}));
  return ok();
}

Result<UserPatch> parse_user_patch(ObjectReader& r) {
  UserPatch p;
  p.display_name = r.optional_string("display_name", kMaxDisplay);
  p.email = r.optional_string("email", 254);
  p.password = r.optional_string("password", 256);
  p.state = r.optional_string("state", 16);
  if (p.state && *p.state != "active" && *p.state != "disabled")
    r.reject("state", "must be active or disabled");
  return p;
}

Result<User> update_user(store::Tx& tx, const World& w, const Owner& owner, const std::string& id,
                         const UserPatch& patch, std::optional<int64_t> if_match) {
  auto found = GP_TRY(find_user(tx, owner, id));
  if (!found || found->state == "deleted") return fail(Error::not_found("user not found"));
  User u = *found;
  GP_TRY_VOID(check_version(if_match, u.version));
  int64_t now = w.now();
  if (patch.display_name) {
    GP_TRY_VOID(validate_display("display_name", *patch.display_name));
    u.display_name = *patch.display_name;
  }
  if (patch.email) {
    GP_TRY_VOID(validate_email(*patch.email));
    u.email = *patch.email;
  }
  if (patch.state) {
    if (*patch.state == "disabled" && u.state != "disabled")
      GP_TRY_VOID(revoke_credentials_of(tx, now, u.id));
    u.state = *patch.state;
  }
  if (patch.password) {
    GP_TRY_VOID(iam::validate_password_strength(*patch.password));
    auto hash = GP_TRY(iam::hash_password(*patch.password));
    GP_TRY_VOID(tx.exec("UPDATE users SET password_hash=? WHERE id=?", {hash, u.id}));
    // A new password ends every existing login session.
    GP_TRY_VOID(tx.exec("UPDATE sessions SET revoked_at=? WHERE user_id=? AND revoked_at IS NULL",
                        {now, u.id}));
  }
  u.updated_at = now;
  ++u.version;
  GP_TRY_VOID(tx.exec(
      "UPDATE users SET display_name=?, email=?, state=?, updated_at=?, version=? WHERE id=?",
      {u.display_name, u.email, u.state, u.updated_at, u.version, u.id}));
  return u;
}

Result<std::string> check_password(store::Tx& tx, std::string_view login,
                                   std::string_view password) {
  // Tenant users log in as "<tenant>/<username>", platform users by username alone.
  std::optional<store::Row> row;
  auto slash = login.find('/');
  if (slash == std::string_view::npos) {
    row = GP_TRY(tx.query_one(
        "SELECT id, password_hash, state FROM users WHERE tenant_id IS NULL AND username = ?",
        {std::string(login)}));
  } else {
    row = GP_TRY(tx.query_one(
        "SELECT u.id, u.password_hash, u.state FROM users u JOIN tenants t ON t.id = u.tenant_id "
        "WHERE t.name = ? AND u.username = ?",
        {std::string(login.substr(0, slash)), std::string(login.substr(slash + 1))}));
  }
  // Hash anyway when the user is unknown so timing does not reveal which usernames exist.
  static const std::string kDummy = *iam::hash_password("not-a-real-password-000");
  bool good = row && !row->is_null(1) ? iam::verify_password(row->text(1), password)
                                      : (iam::verify_password(kDummy, password), false);
  if (!good || row->text(2) != "active")
    return fail(Error::unauthenticated("invalid username or password"));
  return row->text(0);
}

// ---------------- service accounts ----------------

namespace {
constexpr std::string_view kSaCols =
    "id, tenant_id, name, description, state, created_at, updated_at, version";
ServiceAccount sa_from(const Row& r) {
  ServiceAccount s;
  s.id = r.text(0);
  s.tenant_id = r.opt_text(1);
  s.name = r.text(2);
  s.description = r.text(3);
  s.state = r.text(4);
  s.created_at = r.integer(5);
  s.updated_at = r.integer(6);
  s.version = r.integer(7);
  return s;
}
}  // namespace

Result<ServiceAccountSpec> parse_service_account_spec(ObjectReader& r) {
  ServiceAccountSpec s;
  s.name = r.string("name", 63);
  s.description = r.optional_string("description", 1000).value_or("");
  return s;
}

Result<ServiceAccount> create_service_account(store::Tx& tx, const World& w, const Owner& owner,
                                              const ServiceAccountSpec& spec) {
  GP_TRY_VOID(validate_dns_label("name", spec.name));
  GP_TRY_VOID(validate_display("description", spec.description));
  ServiceAccount s;
  s.id = w.ids.next("sva");
  if (owner) s.tenant_id = owner->tenant_id();
  s.name = spec.name;
  s.description = spec.description;
  s.created_at = s.updated_at = w.now();
  auto r =
      tx.exec(fmt::format("INSERT INTO service_accounts ({}) VALUES (?,?,?,?,?,?,?,?)", kSaCols),
              {s.id, owner_value(owner), s.name, s.description, s.state, s.created_at, s.updated_at,
               s.version});
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(
        Error::conflict(fmt::format("a service account named '{}' already exists", s.name)));
  GP_TRY_VOID(r);
  return s;
}

Result<std::optional<ServiceAccount>> find_service_account(store::Tx& tx, const Owner& owner,
                                                           std::string_view key) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(std::string(key));
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM service_accounts WHERE {} AND state != 'deleted' AND {} = ?",
                  kSaCols, where, key.starts_with("sva_") ? "id" : "name"),
      params));
  if (!row) return std::optional<ServiceAccount>();
  return std::optional<ServiceAccount>(sa_from(*row));
}

Result<Page<ServiceAccount>> list_service_accounts(store::Tx& tx, const Owner& owner,
                                                   const PageRequest& page) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(page.after.value_or(""));
  params.push_back(fetch_limit(page));
  auto rows = GP_TRY(tx.query(
      fmt::format("SELECT {} FROM service_accounts WHERE {} AND state != 'deleted' AND id > ? "
                  "ORDER BY id LIMIT ?",
                  kSaCols, where),
      params));
  std::vector<ServiceAccount> out;
  for (const auto& r : rows) out.push_back(sa_from(r));
  return make_page(std::move(out), page);
}

Result<void> delete_service_account(store::Tx& tx, const World& w, const Owner& owner,
                                    const std::string& id) {
  auto s = GP_TRY(find_service_account(tx, owner, id));
  if (!s) return fail(Error::not_found("service account not found"));
  int64_t now = w.now();
  GP_TRY_VOID(revoke_credentials_of(tx, now, s->id));
  GP_TRY_VOID(tx.exec("DELETE FROM role_bindings WHERE subject_id = ?", {s->id}));
  GP_TRY_VOID(tx.exec(
      "UPDATE service_accounts SET state='deleted', name=?, updated_at=?, version=version+1 "
      "WHERE id=?",
      {fmt::format("deleted-{}", s->id), now, s->id}));
  return ok();
}

// ---------------- API keys ----------------

namespace {
constexpr std::string_view kKeyCols =
    "id, tenant_id, owner_kind, owner_id, name, created_at, expires_at, revoked_at";
ApiKey key_from(const Row& r) {
  ApiKey k;
  k.id = r.text(0);
  k.tenant_id = r.opt_text(1);
  k.owner_kind = r.text(2);
  k.owner_id = r.text(3);
  k.name = r.text(4);
  k.created_at = r.integer(5);
  k.expires_at = r.opt_integer(6);
  k.revoked_at = r.opt_integer(7);
  return k;
}
}  // namespace

Result<ApiKeySpec> parse_api_key_spec(ObjectReader& r, const World& w) {
  ApiKeySpec s;
  s.name = r.optional_string("name", 63).value_or("default");
  s.owner_kind = r.optional_string("owner_kind", 32).value_or("");
  s.owner_id = r.optional_string("owner_id", 64).value_or("");
  if (!s.owner_kind.empty() && s.owner_kind != "user" && s.owner_kind != "service_account")
    r.reject("owner_kind", "must be user or service_account");
  if (auto e = r.optional_string("expires_at", 64)) {
    TimePoint t;
    if (!parse_rfc3339(*e, &t))
      r.reject("expires_at", "must be an RFC 3339 time");
    else if (t <= w.clock.now())
      r.reject("expires_at", "must be in the future");
    else if (to_unix_micros(t) - w.now() > kMaxApiKeyLifetimeSeconds * 1'000'000)
      r.reject("expires_at", fmt::format("must be at most {} s (10 years) from now, as ttl_seconds",
                                         kMaxApiKeyLifetimeSeconds));
    else
      s.expires_at = to_unix_micros(t);
  }
  if (auto ttl = r.optional_integer("ttl_seconds", 60, kMaxApiKeyLifetimeSeconds)) {
    if (s.expires_at) r.reject("ttl_seconds", "give either expires_at or ttl_seconds");
    s.expires_at = w.now() + *ttl * 1000000;
  }
  return s;
}

Result<CreatedKey> create_api_key(store::Tx& tx, const World& w, const Owner& owner,
                                  const ApiKeySpec& spec) {
  GP_TRY_VOID(validate_dns_label("name", spec.name));
  // The owner must live where the key lives.
  if (spec.owner_kind == "user") {
    auto u = GP_TRY(find_user(tx, owner, spec.owner_id));
    if (!u || u->state != "active") return fail(Error::invalid("owner user not found"));
  } else {
    auto s = GP_TRY(find_service_account(tx, owner, spec.owner_id));
    if (!s) return fail(Error::invalid("owner service account not found"));
  }
  auto issued = iam::issue_token(w.ids.next("key"), w.random);
  ApiKey k;
  k.id = issued.id;
  if (owner) k.tenant_id = owner->tenant_id();
  k.owner_kind = spec.owner_kind;
  k.owner_id = spec.owner_id;
  k.name = spec.name;
  k.created_at = w.now();
  k.expires_at = spec.expires_at;
  GP_TRY_VOID(tx.exec(
      "INSERT INTO api_keys (id, tenant_id, owner_kind, owner_id, name, secret_hash, created_at, "
      "expires_at) VALUES (?,?,?,?,?,?,?,?)",
      {k.id, owner_value(owner), k.owner_kind, k.owner_id, k.name, issued.secret_hash, k.created_at,
       store::opt(k.expires_at)}));
  return CreatedKey{std::move(k), std::move(issued.token)};
}

Result<std::optional<ApiKey>> find_api_key(store::Tx& tx, const Owner& owner, std::string_view id) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(std::string(id));
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM api_keys WHERE {} AND id = ?", kKeyCols, where), params));
  if (!row) return std::optional<ApiKey>();
  return std::optional<ApiKey>(key_from(*row));
}

Result<Page<ApiKey>> list_api_keys(store::Tx& tx, const Owner& owner, const PageRequest& page,
                                   const std::optional<std::string>& owner_id) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  if (owner_id) {
    where += " AND owner_id = ?";
    params.push_back(*owner_id);
  }
  params.push_back(page.after.value_or(""));
  params.push_back(fetch_limit(page));
  auto rows =
      GP_TRY(tx.query(fmt::format("SELECT {} FROM api_keys WHERE {} AND id > ? ORDER BY id LIMIT ?",
                                  kKeyCols, where),
                      params));
  std::vector<ApiKey> out;
  for (const auto& r : rows) out.push_back(key_from(r));
  return make_page(std::move(out), page);
}

Result<void> revoke_api_key(store::Tx& tx, const World& w, const Owner& owner,
                            const std::string& id) {
  store::Params params{w.now()};
  std::string where = owner_clause(owner, params);
  params.push_back(id);
  auto n = GP_TRY(tx.exec(
      fmt::format("UPDATE api_keys SET revoked_at = ? WHERE {} AND id = ? AND revoked_at IS NULL",
                  where),
      params));
  if (n == 0) {
    auto k = GP_TRY(find_api_key(tx, owner, id));
    if (!k) return fail(Error::not_found("API key not found"));
  }
  return ok();
}

// ---------------- sessions ----------------

Result<CreatedSession> create_session(store::Tx& tx, const World& w, const std::string& user_id,
                                      Duration ttl) {
  auto issued = iam::issue_token(w.ids.next("ses"), w.random);
  int64_t now = w.now(), expires = now + ttl.count();
  GP_TRY_VOID(tx.exec(
      "INSERT INTO sessions (id, user_id, secret_hash, created_at, expires_at) VALUES (?,?,?,?,?)",
      {issued.id, user_id, issued.secret_hash, now, expires}));
  return CreatedSession{issued.id, issued.token, expires};
}

Result<void> revoke_session(store::Tx& tx, const World& w, const std::string& id) {
  GP_TRY_VOID(
      tx.exec("UPDATE sessions SET revoked_at=? WHERE id=? AND revoked_at IS NULL", {w.now(), id}));
  return ok();
}

// ---------------- role bindings ----------------

namespace {
constexpr std::string_view kBindingCols =
    "id, tenant_id, project_id, subject_kind, subject_id, role, created_at, source";
Binding binding_from(const Row& r) {
  return Binding{r.text(0), r.opt_text(1), r.opt_text(2), r.text(3),
                 r.text(4), r.text(5),     r.integer(6),  r.text(7)};
}
}  // namespace

Result<BindingSpec> parse_binding_spec(ObjectReader& r) {
  BindingSpec s{};
  auto role = r.string("role", 32);
  auto parsed = iam::parse_role(role);
  if (!parsed && !role.empty()) r.reject("role", "unknown role");
  s.role = parsed.value_or(iam::Role::kProjectViewer);
  s.subject_kind = r.string("subject_kind", 32);
  if (!s.subject_kind.empty() && s.subject_kind != "user" && s.subject_kind != "service_account")
    r.reject("subject_kind", "must be user or service_account");
  s.subject_id = r.string("subject_id", 64);
  s.project = r.optional_string("project", 64);
  return s;
}

Result<Binding> create_binding(store::Tx& tx, const World& w, const Owner& owner,
                               const iam::Scope& where, const BindingSpec& spec) {
  // Subjects are bound only where they live: a tenant's users in their tenant, platform
  // principals at platform scope.
  bool exists = false;
  if (spec.subject_kind == "user") {
    auto u = GP_TRY(find_user(tx, owner, spec.subject_id));
    exists = u && u->state == "active" && u->id == spec.subject_id;
  } else {
    auto s = GP_TRY(find_service_account(tx, owner, spec.subject_id));
    exists = s && s->id == spec.subject_id;
  }
  if (!exists)
    return fail(
        Error::invalid(fmt::format("subject {} not found in this tenant", spec.subject_id)));
  Binding b{w.ids.next("rb"), where.tenant_id,
            where.project_id, spec.subject_kind,
            spec.subject_id,  std::string(iam::role_name(spec.role)),
            w.now()};
  auto r =
      tx.exec(fmt::format("INSERT INTO role_bindings ({}) VALUES (?,?,?,?,?,?,?,?)", kBindingCols),
              {b.id, store::opt(b.tenant_id), store::opt(b.project_id), b.subject_kind,
               b.subject_id, b.role, b.created_at, b.source});
  if (!r && r.error().code == ErrorCode::kConflict)
    return fail(Error::conflict("this role binding already exists"));
  GP_TRY_VOID(r);
  return b;
}

Result<std::optional<Binding>> find_binding(store::Tx& tx, const Owner& owner,
                                            std::string_view id) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(std::string(id));
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT {} FROM role_bindings WHERE {} AND id = ?", kBindingCols, where),
      params));
  if (!row) return std::optional<Binding>();
  return std::optional<Binding>(binding_from(*row));
}

Result<Page<Binding>> list_bindings(store::Tx& tx, const Owner& owner, const PageRequest& page) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(page.after.value_or(""));
  params.push_back(fetch_limit(page));
  auto rows = GP_TRY(
      tx.query(fmt::format("SELECT {} FROM role_bindings WHERE {} AND id > ? ORDER BY id LIMIT ?",
                           kBindingCols, where),
               params));
  std::vector<Binding> out;
  for (const auto& r : rows) out.push_back(binding_from(r));
  return make_page(std::move(out), page);
}

Result<void> delete_binding(store::Tx& tx, const Owner& owner, const std::string& id) {
  store::Params params;
  std::string where = owner_clause(owner, params);
  params.push_back(id);
  auto n =
      GP_TRY(tx.exec(fmt::format("DELETE FROM role_bindings WHERE {} AND id = ?", where), params));
  if (n == 0) return fail(Error::not_found("role binding not found"));
  return ok();
}

// ---------------- bootstrap ----------------

Result<std::optional<Bootstrap>> bootstrap_platform_admin(
    store::Tx& tx, const World& w, const std::optional<std::string>& password) {
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
