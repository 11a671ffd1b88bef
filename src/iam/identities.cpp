// The identities iam keeps: users, service accounts, API keys, login sessions and role bindings.
// This file alone reads and writes their tables (users, service_accounts, api_keys, sessions,
// role_bindings); tenancy and the API reach them through the functions of iam.h.
#include <fmt/format.h>

#include <set>
#include <tuple>

#include "common/env.h"
#include "iam/iam.h"
#include "iam/oidc.h"
#include "store/record_row.h"

namespace gp::iam {
namespace {

using store::Null;
using store::Row;
using store::Value;

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

Result<void> validate_email(std::string_view e) {
  if (e.empty()) return ok();
  auto at = e.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 >= e.size() || e.size() > 254)
    return fail(Error::invalid("email is not a valid address"));
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

std::string_view ApiKey::state(int64_t now) const {
  return revoked_at                           ? kApiKeyStates[2]
         : (expires_at && *expires_at <= now) ? kApiKeyStates[1]
                                              : kApiKeyStates[0];
}

Json ApiKey::to_json(int64_t now) const {
  Json j = json_of_fields(*this);
  j["state"] = std::string(state(now));
  return j;
}

// ---------------- what a tenant's posture report counts ----------------

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

// ---------------- users ----------------

namespace {
const std::string kUserCols = store::columns_of<User>();
Result<User> user_from(const Row& r) { return store::read_row<User>(r); }
}  // namespace

Result<UserSpec> parse_user_spec(ObjectReader& r) {
  UserSpec s;
  s.username = r.string("username", 63);
  s.display_name = r.optional_string("display_name", kMaxDisplay).value_or("");
  s.email = r.optional_string("email", 254).value_or("");
  s.password = r.optional_string("password", 256);
  return s;
}

Result<User> create_user(store::Tx& tx, const Env& w, const Owner& owner, const UserSpec& spec) {
  GP_TRY_VOID(validate_dns_label("username", spec.username));
  GP_TRY_VOID(validate_display("display_name", spec.display_name));
  GP_TRY_VOID(validate_email(spec.email));
  Value pw = Null{};
  if (spec.password) {
    GP_TRY_VOID(validate_password_strength(*spec.password));
    pw = GP_TRY(hash_password(*spec.password));
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
  return std::optional<User>(GP_TRY(user_from(*row)));
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
  for (const auto& r : rows) out.push_back(GP_TRY(user_from(r)));
  return make_page(std::move(out), page);
}

Result<void> delete_user(store::Tx& tx, const Env& w, const Owner& owner, const std::string& id) {
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

Result<User> update_user(store::Tx& tx, const Env& w, const Owner& owner, const std::string& id,
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
    GP_TRY_VOID(validate_password_strength(*patch.password));
    auto hash = GP_TRY(hash_password(*patch.password));
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

namespace {
// Takes as long as checking `password` against a real hash, and matches nothing.
void verify_against_nothing(std::string_view password) {
  static const std::string kDummy = *hash_password("not-a-real-password-000");
  verify_password(kDummy, password);
}
// The one answer to every failed login, so a caller cannot probe which part was wrong.
Error login_refused() { return Error::unauthenticated("invalid username or password"); }
}  // namespace

Result<std::string> check_password(store::Tx& tx, const Owner& home, std::string_view username,
                                   std::string_view password) {
  store::Params params;
  std::string where = owner_clause(home, params);
  params.push_back(std::string(username));
  auto row = GP_TRY(tx.query_one(
      fmt::format("SELECT id, password_hash, state FROM users WHERE {} AND username = ?", where),
      params));
  // Hash anyway when the user is unknown so timing does not reveal which usernames exist.
  bool good = row && !row->is_null(1) ? verify_password(row->text(1), password)
                                      : (verify_against_nothing(password), false);
  if (!good || row->text(2) != "active") return fail(login_refused());
  return row->text(0);
}

Result<std::string> refuse_login(std::string_view password) {
  verify_against_nothing(password);
  return fail(login_refused());
}

// ---------------- service accounts ----------------

namespace {
const std::string kSaCols = store::columns_of<ServiceAccount>();
Result<ServiceAccount> sa_from(const Row& r) { return store::read_row<ServiceAccount>(r); }
}  // namespace

Result<ServiceAccountSpec> parse_service_account_spec(ObjectReader& r) {
  ServiceAccountSpec s;
  s.name = r.string("name", 63);
  s.description = r.optional_string("description", 1000).value_or("");
  return s;
}

Result<ServiceAccount> create_service_account(store::Tx& tx, const Env& w, const Owner& owner,
                                              const ServiceAccountSpec& spec) {
  GP_TRY_VOID(validate_dns_label("name", spec.name));
  GP_TRY_VOID(validate_display("description", spec.description));
  ServiceAccount s;
  s.id = w.ids.next("sva");
  if (owner) s.tenant_id = owner->tenant_id();
  s.name = spec.name;
  s.description = spec.description;
  s.created_at = s.updated_at = w.now();
  auto r = tx.exec(fmt::format("INSERT INTO service_accounts ({}) VALUES ({})", kSaCols,
                               store::placeholders_of<ServiceAccount>()),
                   store::params_of(s));
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
  return std::optional<ServiceAccount>(GP_TRY(sa_from(*row)));
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
  for (const auto& r : rows) out.push_back(GP_TRY(sa_from(r)));
  return make_page(std::move(out), page);
}

Result<void> delete_service_account(store::Tx& tx, const Env& w, const Owner& owner,
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
const std::string kKeyCols = store::columns_of<ApiKey>();
Result<ApiKey> key_from(const Row& r) { return store::read_row<ApiKey>(r); }
}  // namespace

Result<ApiKeySpec> parse_api_key_spec(ObjectReader& r, const Env& w) {
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

Result<CreatedKey> create_api_key(store::Tx& tx, const Env& w, const Owner& owner,
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
  auto issued = issue_token(w.ids.next("key"), w.random);
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
  return std::optional<ApiKey>(GP_TRY(key_from(*row)));
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
  for (const auto& r : rows) out.push_back(GP_TRY(key_from(r)));
  return make_page(std::move(out), page);
}

Result<void> revoke_api_key(store::Tx& tx, const Env& w, const Owner& owner,
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

Result<CreatedSession> create_session(store::Tx& tx, const Env& w, const std::string& user_id,
                                      Duration ttl) {
  auto issued = issue_token(w.ids.next("ses"), w.random);
  int64_t now = w.now(), expires = now + ttl.count();
  GP_TRY_VOID(tx.exec(
      "INSERT INTO sessions (id, user_id, secret_hash, created_at, expires_at) VALUES (?,?,?,?,?)",
      {issued.id, user_id, issued.secret_hash, now, expires}));
  return CreatedSession{issued.id, issued.token, expires};
}

Result<void> revoke_session(store::Tx& tx, const Env& w, const std::string& id) {
  GP_TRY_VOID(
      tx.exec("UPDATE sessions SET revoked_at=? WHERE id=? AND revoked_at IS NULL", {w.now(), id}));
  return ok();
}

// ---------------- role bindings ----------------

namespace {
const std::string kBindingCols = store::columns_of<Binding>();
Result<Binding> binding_from(const Row& r) { return store::read_row<Binding>(r); }
}  // namespace

Result<BindingSpec> parse_binding_spec(ObjectReader& r) {
  BindingSpec s{};
  auto role = r.string("role", 32);
  auto parsed = parse_role(role);
  if (!parsed && !role.empty()) r.reject("role", "unknown role");
  s.role = parsed.value_or(Role::kProjectViewer);
  s.subject_kind = r.string("subject_kind", 32);
  if (!s.subject_kind.empty() && s.subject_kind != "user" && s.subject_kind != "service_account")
    r.reject("subject_kind", "must be user or service_account");
  s.subject_id = r.string("subject_id", 64);
  s.project = r.optional_string("project", 64);
  return s;
}

Result<Binding> create_binding(store::Tx& tx, const Env& w, const Owner& owner, const Scope& where,
                               const BindingSpec& spec) {
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
            spec.subject_id,  std::string(role_name(spec.role)),
            w.now()};
  auto r = tx.exec(fmt::format("INSERT INTO role_bindings ({}) VALUES ({})", kBindingCols,
                               store::placeholders_of<Binding>()),
                   store::params_of(b));
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
  return std::optional<Binding>(GP_TRY(binding_from(*row)));
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
  for (const auto& r : rows) out.push_back(GP_TRY(binding_from(r)));
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

Result<void> delete_project_bindings(store::Tx& tx, const TenantScope& s,
                                     const std::string& project_id) {
  GP_TRY_VOID(tx.exec("DELETE FROM role_bindings WHERE tenant_id = ? AND project_id = ?",
                      {s.tenant_id(), project_id}));
  return ok();
}

// ---------------- a tenant's offboarding ----------------

Result<void> revoke_tenant_credentials(store::Tx& tx, const std::string& tenant_id, int64_t now) {
  GP_TRY_VOID(tx.exec("UPDATE api_keys SET revoked_at=? WHERE tenant_id=? AND revoked_at IS NULL",
                      {now, tenant_id}));
  GP_TRY_VOID(
      tx.exec("UPDATE sessions SET revoked_at=? WHERE revoked_at IS NULL AND user_id IN "
              "(SELECT id FROM users WHERE tenant_id=?)",
              {now, tenant_id}));
  return ok();
}

// ---------------- users of an identity provider ----------------

Result<std::string> external_user(store::Tx& tx, const Env& w, const Owner& home,
                                  const oidc::Identity& id) {
  auto row =
      GP_TRY(tx.query_one("SELECT id, tenant_id, state, email, display_name FROM users "
                          "WHERE external_subject = ?",
                          {id.subject}));
  if (row) {
    std::string user_id = row->text(0);
    if (row->opt_text(1) != (home ? std::optional(home->tenant_id()) : std::nullopt))
      return fail(Error::denied(
          "this identity's user belongs to another tenant than the mapping rules now give; an "
          "operator must delete that user first"));
    if (row->text(2) != "active") return fail(Error::denied("this user is disabled"));
    if (row->text(3) != id.email || row->text(4) != id.display_name)
      GP_TRY_VOID(tx.exec(
          "UPDATE users SET email = ?, display_name = ?, updated_at = ?, version = version + 1 "
          "WHERE id = ?",
          {id.email, id.display_name, w.now(), user_id}));
    return user_id;
  }
  if (auto local = GP_TRY(find_user(tx, home, id.username)))
    return fail(Error::conflict(fmt::format(
        "username '{}' belongs to a user not bound to this identity; an operator must rename "
        "or remove it first",
        id.username)));
  auto user = GP_TRY(create_user(tx, w, home, {id.username, id.display_name, id.email, {}}));
  GP_TRY_VOID(tx.exec("UPDATE users SET external_subject = ? WHERE id = ?", {id.subject, user.id}));
  return user.id;
}

Result<void> set_bindings_from(store::Tx& tx, const Env& w, const Owner& home,
                               const std::string& user_id, const std::string& source,
                               const std::vector<std::pair<Role, Scope>>& grants) {
  // The bindings wanted, as (role, tenant id, project id).
  using Key = std::tuple<std::string, std::string, std::string>;
  std::set<Key> wanted;
  std::vector<std::pair<Key, Scope>> to_create;
  for (const auto& [role, where] : grants) {
    Key key{std::string(role_name(role)), where.tenant_id.value_or(""),
            where.project_id.value_or("")};
    if (wanted.insert(key).second) to_create.emplace_back(key, where);
  }
  auto existing =
      GP_TRY(tx.query("SELECT id, role, tenant_id, project_id FROM role_bindings "
                      "WHERE subject_kind = 'user' AND subject_id = ? AND source = ?",
                      {user_id, source}));
  std::set<Key> have;
  for (const auto& r : existing) {
    Key key{r.text(1), r.text(2), r.text(3)};
    if (wanted.contains(key))
      have.insert(key);
    else
      GP_TRY_VOID(tx.exec("DELETE FROM role_bindings WHERE id = ?", {r.text(0)}));
  }
  for (const auto& [key, where] : to_create) {
    if (have.contains(key)) continue;
    // Already bound through the API: that binding stands (checked first, since a failed
    // insert would end a PostgreSQL transaction).
    auto same = GP_TRY(tx.query_one(
        "SELECT id FROM role_bindings WHERE subject_kind = 'user' AND subject_id = ? AND "
        "role = ? AND COALESCE(tenant_id, '') = ? AND COALESCE(project_id, '') = ?",
        {user_id, std::get<0>(key), std::get<1>(key), std::get<2>(key)}));
    if (same) continue;
    BindingSpec spec{*parse_role(std::get<0>(key)), "user", user_id, where.project_id};
    auto b = GP_TRY(create_binding(tx, w, home, where, spec));
    GP_TRY_VOID(tx.exec("UPDATE role_bindings SET source = ? WHERE id = ?", {source, b.id}));
  }
  return ok();
}

}  // namespace gp::iam
