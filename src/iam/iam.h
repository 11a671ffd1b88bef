// Identity and access: who is calling (authentication of API keys and session tokens, password
// hashing) and what they may do (roles, permissions and the authorization decision). Pure
// decision logic lives in authorize(); credential lookups go through the store.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "common/result.h"
#include "common/thread_safety.h"
#include "store/store.h"

namespace gp::iam {

enum class Role {
  kPlatformAdmin,
  kPlatformOperator,
  kAuditor,
  kTenantAdmin,
  kTenantBilling,
  kProjectAdmin,
  kProjectMember,
  kProjectViewer,
};

enum class ScopeLevel { kPlatform, kTenant, kProject };

std::string_view role_name(Role r);
std::optional<Role> parse_role(std::string_view s);
// The scope at which a role may be bound (platform roles only at platform scope, ...).
ScopeLevel role_level(Role r);
const std::vector<Role>& all_roles();

enum class Permission {
  kTenantCreate,
  kTenantRead,
  kTenantUpdate,
  kTenantDelete,
  kTenantList,  // list every tenant (platform)
  kProjectCreate,
  kProjectRead,
  kProjectUpdate,
  kProjectDelete,
  kIdentityRead,   // users, service accounts, keys, bindings
  kIdentityWrite,  // create/delete users, service accounts, keys of others
  kBindingWrite,   // create/delete role bindings
  kAuditRead,
  kFleetRead,
  kFleetWrite,
  kAllocationRead,
  kAllocationWrite,
  kBillingRead,
  kBillingWrite,     // rate cards (platform)
  kQuotaWrite,       // tenant quotas (platform scope), project quotas (tenant scope)
  kAdmissionReview,  // answer a cluster's admission webhook (platform scope)
  kUsageRead,        // usage rollups (tenant scope; platform scope: every tenant)
  kUsageWrite,       // post usage events from external meters
};
std::string_view permission_name(Permission p);

// Where a request acts: the platform, a tenant, or a project inside a tenant.
struct Scope {
  std::optional<std::string> tenant_id;
  std::optional<std::string> project_id;

  static Scope platform() { return {}; }
  static Scope tenant(std::string t) { return {std::move(t), std::nullopt}; }
  static Scope project(std::string t, std::string p) { return {std::move(t), std::move(p)}; }
};

struct RoleBinding {
  std::string id;
  Role role;
  std::optional<std::string> tenant_id;   // empty for platform scope
  std::optional<std::string> project_id;  // set only for project scope
  std::string subject_kind;               // "user" | "service_account"
  std::string subject_id;
  ScopeLevel level() const;
};

enum class PrincipalKind { kAnonymous, kUser, kServiceAccount, kNode };

struct Principal {
  PrincipalKind kind = PrincipalKind::kAnonymous;
  std::string id;                        // user or service-account id
  std::string name;                      // username or service account name
  std::optional<std::string> tenant_id;  // home tenant; empty for platform principals
  std::string credential_id;             // the key or session used
  std::vector<RoleBinding> bindings;

  bool authenticated() const { return kind != PrincipalKind::kAnonymous; }
  bool has_platform_role() const;
  // True when the principal may know that objects of `tenant_id` exist: platform roles, home
  // tenant, or any binding inside it. Otherwise every answer about that tenant is 404.
  bool reaches_tenant(std::string_view tenant_id) const;
};

enum class Decision { kAllow, kDeny, kHidden };

// The authorization decision. kHidden (answered as 404) when the principal cannot reach the
// scope's tenant; kDeny (403) when it can but no binding grants the permission at that scope.
Decision authorize(const Principal& who, Permission what, const Scope& where);

// Whether `granter` may create a binding of `role` at `where` (no escalation: a tenant admin
// grants only tenant/project roles in its tenant; a project admin only project roles there).
bool may_grant(const Principal& granter, Role role, const Scope& where);

// ---- credentials ----

// Bearer tokens look like "<id>.<secret>" where id is "key_..." (API key), "ses_..." (login
// session) or "nod_..." (a node agent's credential, issued at enrolment) and secret is 32 random
// bytes in base64url. Only sha256(secret) is stored.
struct IssuedToken {
  std::string id;
  std::string token;        // shown once
  std::string secret_hash;  // hex sha256 of the secret part
};
IssuedToken issue_token(std::string id, const Random& random);
struct ParsedToken {
  std::string id;
  std::string secret;
};
std::optional<ParsedToken> parse_token(std::string_view token);
std::string hash_secret(std::string_view secret);

// argon2id via libsodium (interactive limits): returns the encoded hash string.
Result<std::string> hash_password(std::string_view password);
bool verify_password(std::string_view encoded_hash, std::string_view password);
Result<void> validate_password_strength(std::string_view password);

// Resolves a bearer token to a principal by reading the store. Errors are kUnauthenticated
// with a reason safe to return to the caller (never echoing the token).
//
// With caching on, the principals of API keys and sessions are kept between requests, each
// with the store's generation() of the identity tables it was read from (kIdentityTables).
// A key or session revoked or expired, a user or service account or tenant changed, a binding
// granted or removed: any of these ends every kept principal before the write that did it is
// answered. A store that cannot see every write (generation() is nullopt) keeps nothing. Node
// credentials are always read: their rows change with every heartbeat.
class Authenticator {
 public:
  static constexpr std::array<std::string_view, 6> kIdentityTables = {
      "api_keys", "sessions", "users", "service_accounts", "tenants", "role_bindings"};
  Authenticator(store::Store& store, const Clock& clock);
  Result<Principal> authenticate(std::string_view bearer_token) const;
  // Loads the principal of a user or service account by id (bindings included).
  Result<Principal> load_principal(store::Tx& tx, std::string_view kind, std::string_view id) const;
  // On (the default) only while this process is the one that writes the store: a follower
  // (docs/ha.md) reads a store that another process writes. Either way, forgets what it kept.
  void set_caching(bool on);

 private:
  struct Kept {
    std::string secret_hash;
    std::optional<int64_t> expires_at;
    uint64_t generation;
    Principal principal;
  };
  std::optional<Principal> kept(const std::string& id, std::string_view secret_hash,
                                uint64_t generation, int64_t now) const;

  store::Store& store_;
  const Clock& clock_;
  mutable Mutex mu_;
  bool caching_ GP_GUARDED_BY(mu_) = true;
  mutable std::unordered_map<std::string, Kept> kept_ GP_GUARDED_BY(mu_);
};

}  // namespace gp::iam
