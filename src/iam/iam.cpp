#include "iam/iam.h"

#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <array>

#include "common/crypto.h"

namespace gp::iam {
namespace {

struct RoleInfo {
  Role role;
  std::string_view name;
  ScopeLevel level;
  std::vector<Permission> grants;
};

using P = Permission;

const std::vector<RoleInfo>& role_table() {
  static const std::vector<RoleInfo> kRoles = {
      {Role::kPlatformAdmin, "platform-admin", ScopeLevel::kPlatform, {}},  // everything
      {Role::kPlatformOperator,
       "platform-operator",
       ScopeLevel::kPlatform,
       {P::kTenantRead, P::kTenantList, P::kProjectRead, P::kIdentityRead, P::kFleetRead,
        P::kFleetWrite, P::kAllocationRead, P::kQuotaWrite, P::kAdmissionReview, P::kBillingRead,
        P::kBillingWrite, P::kUsageRead, P::kUsageWrite}},
      {Role::kAuditor,
       "auditor",
       ScopeLevel::kPlatform,
       {P::kTenantRead, P::kTenantList, P::kProjectRead, P::kIdentityRead, P::kAuditRead,
        P::kFleetRead, P::kAllocationRead, P::kBillingRead, P::kUsageRead}},
      {Role::kTenantAdmin,
       "tenant-admin",
       ScopeLevel::kTenant,
       {P::kTenantRead, P::kProjectCreate, P::kProjectRead, P::kProjectUpdate, P::kProjectDelete,
        P::kIdentityRead, P::kIdentityWrite, P::kBindingWrite, P::kAuditRead, P::kAllocationRead,
        P::kAllocationWrite, P::kBillingRead, P::kQuotaWrite, P::kUsageRead, P::kUsageWrite}},
      {Role::kTenantBilling,
       "tenant-billing",
       ScopeLevel::kTenant,
       {P::kTenantRead, P::kProjectRead, P::kBillingRead, P::kUsageRead}},
      {Role::kProjectAdmin,
       "project-admin",
       ScopeLevel::kProject,
       {P::kProjectRead, P::kProjectUpdate, P::kIdentityRead, P::kBindingWrite, P::kAllocationRead,
        P::kAllocationWrite}},
      {Role::kProjectMember,
       "project-member",
       ScopeLevel::kProject,
       {P::kProjectRead, P::kAllocationRead, P::kAllocationWrite}},
      {Role::kProjectViewer,
       "project-viewer",
       ScopeLevel::kProject,
       {P::kProjectRead, P::kAllocationRead}},
  };
  return kRoles;
}

const RoleInfo& info(Role r) {
  for (const auto& i : role_table())
    if (i.role == r) return i;
  return role_table().front();
}

bool grants(Role r, Permission p) {
  if (r == Role::kPlatformAdmin) return true;
  const auto& g = info(r).grants;
  return std::find(g.begin(), g.end(), p) != g.end();
}

}  // namespace

std::string_view role_name(Role r) { return info(r).name; }

std::optional<Role> parse_role(std::string_view s) {
  for (const auto& i : role_table())
    if (i.name == s) return i.role;
  return std::nullopt;
}

ScopeLevel role_level(Role r) { return info(r).level; }

const std::vector<Role>& all_roles() {
  static const std::vector<Role> kAll = [] {
    std::vector<Role> v;
    for (const auto& i : role_table()) v.push_back(i.role);
    return v;
  }();
  return kAll;
}

std::string_view permission_name(Permission p) {
  switch (p) {
    case P::kTenantCreate:
      return "tenant.create";
    case P::kTenantRead:
      return "tenant.read";
    case P::kTenantUpdate:
      return "tenant.update";
    case P::kTenantDelete:
      return "tenant.delete";
    case P::kTenantList:
      return "tenant.list";
    case P::kProjectCreate:
      return "project.create";
    case P::kProjectRead:
      return "project.read";
    case P::kProjectUpdate:
      return "project.update";
    case P::kProjectDelete:
      return "project.delete";
    case P::kIdentityRead:
      return "identity.read";
    case P::kIdentityWrite:
      return "identity.write";
    case P::kBindingWrite:
      return "binding.write";
    case P::kAuditRead:
      return "audit.read";
    case P::kFleetRead:
      return "fleet.read";
    case P::kFleetWrite:
      return "fleet.write";
    case P::kAllocationRead:
      return "allocation.read";
    case P::kAllocationWrite:
      return "allocation.write";
    case P::kBillingRead:
      return "billing.read";
    case P::kBillingWrite:
      return "billing.write";
    case P::kQuotaWrite:
      return "quota.write";
    case P::kAdmissionReview:
      return "admission.review";
    case P::kUsageRead:
      return "usage.read";
    case P::kUsageWrite:
      return "usage.write";
  }
  return "unknown";
}

ScopeLevel RoleBinding::level() const {
  if (project_id) return ScopeLevel::kProject;
  if (tenant_id) return ScopeLevel::kTenant;
  return ScopeLevel::kPlatform;
}

bool Principal::has_platform_role() const {
  return std::any_of(bindings.begin(), bindings.end(),
                     [](const RoleBinding& b) { return b.level() == ScopeLevel::kPlatform; });
}

bool Principal::reaches_tenant(std::string_view t) const {
  if (tenant_id && *tenant_id == t) return true;
  return std::any_of(bindings.begin(), bindings.end(), [&](const RoleBinding& b) {
    return b.level() == ScopeLevel::kPlatform || (b.tenant_id && *b.tenant_id == t);
  });
}

Decision authorize(const Principal& who, Permission what, const Scope& where) {
  if (!who.authenticated()) return Decision::kDeny;
  if (where.tenant_id && !who.reaches_tenant(*where.tenant_id)) return Decision::kHidden;
  // Anyone who reaches a tenant may read its basic record (name, class, state).
  if (what == P::kTenantRead && where.tenant_id && !where.project_id) return Decision::kAllow;
  for (const auto& b : who.bindings) {
    if (!grants(b.role, what)) continue;
    switch (b.level()) {
      case ScopeLevel::kPlatform:
        return Decision::kAllow;
      case ScopeLevel::kTenant:
        if (where.tenant_id && *where.tenant_id == *b.tenant_id) return Decision::kAllow;
        break;
      case ScopeLevel::kProject:
        if (where.project_id && *where.project_id == *b.project_id &&
            where.tenant_id == b.tenant_id)
          return Decision::kAllow;
        break;
    }
  }
  return Decision::kDeny;
}

bool may_grant(const Principal& granter, Role role, const Scope& where) {
  ScopeLevel want = where.project_id  ? ScopeLevel::kProject
                    : where.tenant_id ? ScopeLevel::kTenant
                                      : ScopeLevel::kPlatform;
  if (role_level(role) != want) return false;
  return authorize(granter, P::kBindingWrite, where) == Decision::kAllow;
}

// ---- credentials ----

std::string hash_secret(std::string_view secret) { return hex_encode(sha256(secret)); }

IssuedToken issue_token(std::string id, const Random& random) {
  std::string secret = base64url_encode(random.bytes(32));
  IssuedToken t;
  t.token = fmt::format("{}.{}", id, secret);
  t.secret_hash = hash_secret(secret);
  t.id = std::move(id);
  return t;
}

std::optional<ParsedToken> parse_token(std::string_view token) {
  auto dot = token.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= token.size()) return std::nullopt;
  std::string_view id = token.substr(0, dot), secret = token.substr(dot + 1);
  if (id.size() > 64 || secret.size() != 43) return std::nullopt;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return std::nullopt;
  if (!base64url_decode(secret)) return std::nullopt;
  return ParsedToken{std::string(id), std::string(secret)};
}

namespace {
bool sodium_ready() {
  static const bool ready = sodium_init() >= 0;
  return ready;
}
}  // namespace

Result<std::string> hash_password(std::string_view password) {
  if (!sodium_ready()) return fail(Error::internal("libsodium failed to initialize"));
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str_alg(out, password.data(), password.size(),
                            crypto_pwhash_OPSLIMIT_INTERACTIVE, crypto_pwhash_MEMLIMIT_INTERACTIVE,
                            crypto_pwhash_ALG_ARGON2ID13) != 0)
    return fail(Error::internal("password hashing ran out of memory"));
  return std::string(out);
}

bool verify_password(std::string_view encoded_hash, std::string_view password) {
  if (!sodium_ready()) return false;
  std::string h(encoded_hash);
  return crypto_pwhash_str_verify(h.c_str(), password.data(), password.size()) == 0;
}

Result<void> validate_password_strength(std::string_view password) {
  if (password.size() < 12) return fail(Error::invalid("password must be at least 12 characters"));
  if (password.size() > 256) return fail(Error::invalid("password longer than 256 characters"));
  return ok();
}

Result<Principal> Authenticator::load_principal(store::Tx& tx, std::string_view kind,
                                                std::string_view id) const {
  Principal p;
  std::optional<store::Row> row;
  if (kind == "user") {
    row = GP_TRY(tx.query_one("SELECT id, username, tenant_id, state FROM users WHERE id = ?",
                              {std::string(id)}));
    p.kind = PrincipalKind::kUser;
  } else {
    row = GP_TRY(tx.query_one(
        "SELECT id, name, tenant_id, state FROM service_accounts WHERE id = ?", {std::string(id)}));
    p.kind = PrincipalKind::kServiceAccount;
  }
  if (!row) return fail(Error::unauthenticated("credential owner no longer exists"));
  if (row->text(3) != "active") return fail(Error::unauthenticated("account is disabled"));
  p.id = row->text(0);
  p.name = row->text(1);
  p.tenant_id = row->opt_text(2);
  if (p.tenant_id) {
    // Refused rather than let in unchecked.
    if (!tenants_.offboarding) return fail(Error::internal("the authenticator has no tenants"));
    if (GP_TRY(tenants_.offboarding(tx, *p.tenant_id)))
      return fail(Error::unauthenticated("tenant is being offboarded"));
  }
  auto rows = GP_TRY(tx.query(
      "SELECT id, role, tenant_id, project_id, subject_kind, subject_id FROM role_bindings "
      "WHERE subject_id = ? ORDER BY id",
      {p.id}));
  for (const auto& r : rows) {
    auto role = parse_role(r.text(1));
    if (!role) continue;
    p.bindings.push_back(
        RoleBinding{r.text(0), *role, r.opt_text(2), r.opt_text(3), r.text(4), r.text(5)});
  }
  return p;
}

Authenticator::Authenticator(store::Store& store, const Clock& clock, TenantLookup tenants,
                             NodeLookup nodes)
    : store_(store), clock_(clock), tenants_(std::move(tenants)), nodes_(std::move(nodes)) {
  std::vector<std::string> counted(kIdentityTables.begin(), kIdentityTables.end());
  counted.insert(counted.end(), tenants_.tables.begin(), tenants_.tables.end());
  store_.count_changes_to(counted);
}

void Authenticator::set_caching(bool on) {
  MutexLock lock(mu_);
  caching_ = on;
  kept_.clear();
}

std::optional<Principal> Authenticator::kept(const std::string& id, std::string_view secret_hash,
                                             uint64_t generation, int64_t now) const {
  MutexLock lock(mu_);
  auto it = kept_.find(id);
  if (it == kept_.end()) return std::nullopt;
  const Kept& k = it->second;
  if (!caching_ || k.generation != generation || (k.expires_at && *k.expires_at <= now) ||
      !constant_time_equal(k.secret_hash, secret_hash))
    return std::nullopt;
  return k.principal;
}

Result<Principal> Authenticator::authenticate(std::string_view bearer) const {
  auto parsed = parse_token(bearer);
  if (!parsed) return fail(Error::unauthenticated("malformed bearer token"));
  int64_t now = to_unix_micros(clock_.now());
  const std::string secret_hash = hash_secret(parsed->secret);
  // Taken before the read: a change committed after it makes what is kept below stale at once.
  const auto generation = store_.generation();
  if (auto principal = generation ? kept(parsed->id, secret_hash, *generation, now) : std::nullopt)
    return std::move(*principal);
  std::optional<int64_t> expires_at;
  Principal out;
  GP_TRY_VOID(store_.read([&](store::Tx& tx) -> Result<void> {
    std::optional<store::Row> row;
    std::string kind, owner;
    if (parsed->id.starts_with("key_")) {
      row = GP_TRY(tx.query_one(
          "SELECT secret_hash, expires_at, revoked_at, owner_kind, owner_id FROM api_keys "
          "WHERE id = ?",
          {parsed->id}));
    } else if (parsed->id.starts_with("nod_")) {
      // A node agent: no role bindings; only the agent routes accept it.
      auto node = nodes_ ? GP_TRY(nodes_(tx, parsed->id)) : std::nullopt;
      if (!node || !node->secret_hash || !constant_time_equal(*node->secret_hash, secret_hash))
        return fail(Error::unauthenticated("unknown or revoked node credential"));
      out.kind = PrincipalKind::kNode;
      out.id = parsed->id;
      out.name = node->name;
      out.credential_id = parsed->id;
      return ok();
    } else if (parsed->id.starts_with("ses_")) {
      row = GP_TRY(tx.query_one(
          "SELECT secret_hash, expires_at, revoked_at, 'user', user_id FROM sessions WHERE id = ?",
          {parsed->id}));
    }
    if (!row || !constant_time_equal(row->text(0), secret_hash))
      return fail(Error::unauthenticated("unknown or invalid credential"));
    if (!row->is_null(2)) return fail(Error::unauthenticated("credential has been revoked"));
    if (!row->is_null(1) && row->integer(1) <= now)
      return fail(Error::unauthenticated("credential has expired"));
    expires_at = row->opt_integer(1);
    out = GP_TRY(load_principal(tx, row->text(3), row->text(4)));
    out.credential_id = parsed->id;
    return ok();
  }));
  if (generation && out.kind != PrincipalKind::kNode) {
    // Bounded: past this many credentials in use at once, start again.
    constexpr size_t kMaxKept = 10000;
    MutexLock lock(mu_);
    if (caching_) {
      if (kept_.size() >= kMaxKept) kept_.clear();
      kept_.insert_or_assign(parsed->id, Kept{secret_hash, expires_at, *generation, out});
    }
  }
  return out;
}

}  // namespace gp::iam
