// Identity and access: who is calling (authentication of API keys and session tokens, password
// hashing), what they may do (roles, permissions and the authorization decision), and the
// identities themselves: users, service accounts, API keys, sessions and role bindings, whose
// tables iam alone reads and writes. Pure decision logic lives in authorize(); credential
// lookups go through the store.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "common/json.h"
#include "common/page.h"
#include "common/record.h"
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

// ---- identities: users, service accounts, API keys, sessions, role bindings ----
// Repository functions over a store transaction, like tenancy's for tenants and projects: the
// caller (the API layer, tenancy) composes one transaction per mutation with its audit record.

// Proof that the caller was authorized for this tenant. Only the API layer constructs it (and
// tenancy, for a tenant it has just resolved).
class TenantScope {
 public:
  explicit TenantScope(std::string tenant_id) : tenant_id_(std::move(tenant_id)) {}
  const std::string& tenant_id() const { return tenant_id_; }

 private:
  std::string tenant_id_;
};

// Where a platform-or-tenant object lives: nullopt = platform.
using Owner = std::optional<TenantScope>;

struct User {
  std::string id;
  std::optional<std::string> tenant_id;
  std::string username, display_name, email, state = "active";
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const { return json_of_fields(*this); }
};

struct ServiceAccount {
  std::string id;
  std::optional<std::string> tenant_id;
  std::string name, description, state = "active";
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const { return json_of_fields(*this); }
};

inline constexpr std::array<std::string_view, 3> kApiKeyStates = {"active", "expired", "revoked"};
struct ApiKey {
  std::string id;
  std::optional<std::string> tenant_id;
  std::string owner_kind, owner_id, name;
  int64_t created_at = 0;
  std::optional<int64_t> expires_at, revoked_at;
  // One of kApiKeyStates: revoked, expired as of `now_us`, or active.
  std::string_view state(int64_t now_us) const;
  // Its fields (common/record.h) and its state as of `now_us`.
  Json to_json(int64_t now_us) const;
};

// A role binding as stored and shown (RoleBinding is what a principal carries).
struct Binding {
  std::string id;
  std::optional<std::string> tenant_id, project_id;
  std::string subject_kind, subject_id, role;
  int64_t created_at = 0;
  // "api" (granted through the API), or "oidc:<provider>" (kept in step with the provider's
  // claims at each login, docs/oidc.md).
  std::string source = "api";
  Json to_json() const { return json_of_fields(*this); }
};

// What the tenant's posture report counts of its identities.
struct TenantIdentities {
  int active_users = 0, active_service_accounts = 0;
  std::vector<ApiKey> live_keys;  // the tenant's keys neither revoked nor expired, by id
  // Bindings granted inside the tenant, and bindings anywhere held by the tenant's subjects, by
  // id, each with its subject's home tenant (nullopt: a platform subject).
  std::vector<std::pair<Binding, std::optional<std::string>>> bindings;
};
Result<TenantIdentities> tenant_identities(store::Tx& tx, const std::string& tenant_id,
                                           int64_t now);

// -- users --
struct UserSpec {
  std::string username, display_name, email;
  std::optional<std::string> password;
};
Result<UserSpec> parse_user_spec(ObjectReader& r);
Result<User> create_user(store::Tx& tx, const Env& w, const Owner& owner, const UserSpec& spec);
Result<std::optional<User>> find_user(store::Tx& tx, const Owner& owner,
                                      std::string_view id_or_username);
Result<Page<User>> list_users(store::Tx& tx, const Owner& owner, const PageRequest& page);
// Disables the user, revokes its keys and sessions and removes its role bindings.
Result<void> delete_user(store::Tx& tx, const Env& w, const Owner& owner, const std::string& id);
struct UserPatch {
  std::optional<std::string> display_name, email, password, state;
};
Result<UserPatch> parse_user_patch(ObjectReader& r);
Result<User> update_user(store::Tx& tx, const Env& w, const Owner& owner, const std::string& id,
                         const UserPatch& patch, std::optional<int64_t> if_match);
// Password login of user `username` of `home`. Returns the user id on success; the same error
// for unknown user and wrong password, so usernames cannot be probed.
Result<std::string> check_password(store::Tx& tx, const Owner& home, std::string_view username,
                                   std::string_view password);
// The answer to a login that names no place a user could be (a tenant that does not exist):
// the error of a wrong password, after as much work, so timing reveals nothing either.
Result<std::string> refuse_login(std::string_view password);

// -- service accounts --
struct ServiceAccountSpec {
  std::string name, description;
};
Result<ServiceAccountSpec> parse_service_account_spec(ObjectReader& r);
Result<ServiceAccount> create_service_account(store::Tx& tx, const Env& w, const Owner& owner,
                                              const ServiceAccountSpec& spec);
Result<std::optional<ServiceAccount>> find_service_account(store::Tx& tx, const Owner& owner,
                                                           std::string_view id_or_name);
Result<Page<ServiceAccount>> list_service_accounts(store::Tx& tx, const Owner& owner,
                                                   const PageRequest& page);
Result<void> delete_service_account(store::Tx& tx, const Env& w, const Owner& owner,
                                    const std::string& id);

// -- API keys --
// The longest an API key may be given to live, whether as ttl_seconds or as expires_at: 10
// years.
inline constexpr int64_t kMaxApiKeyLifetimeSeconds = int64_t{10} * 365 * 86400;
struct ApiKeySpec {
  std::string name;
  std::string owner_kind;  // "user" | "service_account"; defaults to the caller
  std::string owner_id;
  std::optional<int64_t> expires_at;  // unix micros
};
Result<ApiKeySpec> parse_api_key_spec(ObjectReader& r, const Env& w);
struct CreatedKey {
  ApiKey key;
  std::string token;  // shown once
};
Result<CreatedKey> create_api_key(store::Tx& tx, const Env& w, const Owner& owner,
                                  const ApiKeySpec& spec);
Result<std::optional<ApiKey>> find_api_key(store::Tx& tx, const Owner& owner, std::string_view id);
Result<Page<ApiKey>> list_api_keys(store::Tx& tx, const Owner& owner, const PageRequest& page,
                                   const std::optional<std::string>& owner_id);
Result<void> revoke_api_key(store::Tx& tx, const Env& w, const Owner& owner, const std::string& id);

// -- sessions (login) --
struct CreatedSession {
  std::string id, token;
  int64_t expires_at;
};
Result<CreatedSession> create_session(store::Tx& tx, const Env& w, const std::string& user_id,
                                      Duration ttl);
Result<void> revoke_session(store::Tx& tx, const Env& w, const std::string& id);

// -- role bindings --
struct BindingSpec {
  Role role;
  std::string subject_kind, subject_id;
  std::optional<std::string> project;  // id or name, for project roles
};
Result<BindingSpec> parse_binding_spec(ObjectReader& r);
// `where` must already be resolved (project id) and checked with may_grant.
Result<Binding> create_binding(store::Tx& tx, const Env& w, const Owner& owner, const Scope& where,
                               const BindingSpec& spec);
Result<std::optional<Binding>> find_binding(store::Tx& tx, const Owner& owner, std::string_view id);
Result<Page<Binding>> list_bindings(store::Tx& tx, const Owner& owner, const PageRequest& page);
Result<void> delete_binding(store::Tx& tx, const Owner& owner, const std::string& id);
// Removes every binding granted in project `project_id` of the scope's tenant (the project is
// being deleted).
Result<void> delete_project_bindings(store::Tx& tx, const TenantScope& s,
                                     const std::string& project_id);

// -- what follows from a tenant's offboarding --
// Revokes every API key of the tenant and every session of its users.
Result<void> revoke_tenant_credentials(store::Tx& tx, const std::string& tenant_id, int64_t now);

// -- users of an identity provider (docs/oidc.md; tenancy::sync_external_user resolves the
// tenant and projects the provider's rules name, then calls these two) --
namespace oidc {
struct Identity;
}
// The user bound to `id.subject`, created in `home` on its first login (refused when a local
// user of `home` has its username), with its email and display name refreshed from the
// provider. Refused when that user lives elsewhere than `home` or is disabled. Returns its id.
Result<std::string> external_user(store::Tx& tx, const Env& w, const Owner& home,
                                  const oidc::Identity& id);
// Makes the user's role bindings of `source` ("oidc:<provider>") exactly `grants`, each a role at
// a resolved scope (a repeat counts once); bindings of other sources stay, and a grant the user
// already holds through one of them is not made again.
Result<void> set_bindings_from(store::Tx& tx, const Env& w, const Owner& home,
                               const std::string& user_id, const std::string& source,
                               const std::vector<std::pair<Role, Scope>>& grants);

// ---- authentication ----

// What authentication must learn of rows that modules above iam own: iam may not read their
// tables (src/layers.txt), so whoever builds the Authenticator (api::Api) passes in their
// owners' lookups, each run in the authentication's own read transaction.
//
// Of the tenants (tenancy::tenant_lookup()): whether one is being offboarded (its principals
// are refused; false for a tenant that does not exist), and the tables that answer is read
// from, so that a change to them ends every principal kept. Without `offboarding`, a tenant's
// principal is refused (an internal error) rather than let in unchecked.
struct TenantLookup {
  std::function<Result<bool>(store::Tx& tx, const std::string& tenant_id)> offboarding;
  std::vector<std::string> tables;
};
// Of the nodes (fleet::node_credential): a node agent's name and the hash of its bearer
// credential's secret (nullopt once revoked); nullopt for a node that does not exist. Node
// principals are never kept, so no tables. Empty: no node credential is accepted.
struct NodeCredential {
  std::string name;
  std::optional<std::string> secret_hash;
};
using NodeLookup =
    std::function<Result<std::optional<NodeCredential>>(store::Tx& tx, const std::string& node_id)>;

// Resolves a bearer token to a principal by reading the store. Errors are kUnauthenticated
// with a reason safe to return to the caller (never echoing the token).
//
// With caching on, the principals of API keys and sessions are kept between requests, each
// with the store's generation() of the tables it was read from (kIdentityTables and the
// TenantLookup's tables). A key or session revoked or expired, a user or service account or
// tenant changed, a binding granted or removed: any of these ends every kept principal before
// the write that did it is answered. A store that cannot see every write (generation() is
// nullopt) keeps nothing. Node credentials are always read: their rows change with every
// heartbeat.
class Authenticator {
 public:
  static constexpr std::array<std::string_view, 5> kIdentityTables = {
      "api_keys", "sessions", "users", "service_accounts", "role_bindings"};
  Authenticator(store::Store& store, const Clock& clock, TenantLookup tenants, NodeLookup nodes);
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
  const TenantLookup tenants_;
  const NodeLookup nodes_;
  mutable Mutex mu_;
  bool caching_ GP_GUARDED_BY(mu_) = true;
  mutable std::unordered_map<std::string, Kept> kept_ GP_GUARDED_BY(mu_);
};

}  // namespace gp::iam

namespace gp {

// The one description of each identity: its row, its JSON and its schema (common/record.h).
inline constexpr std::array<std::string_view, 3> kIdentityStates = {"active", "disabled",
                                                                    "deleted"};
inline constexpr std::array<std::string_view, 2> kSubjectKinds = {"user", "service_account"};

template <>
struct Fields<iam::User> {
  using U = iam::User;
  static constexpr auto list = std::tuple{
      Field{"id", &U::id},
      Field{"tenant_id", &U::tenant_id},
      Field{"username", &U::username},
      Field{"display_name", &U::display_name},
      Field{"email", &U::email},
      Field{"state", &U::state, {}, Form::kEnum, kIdentityStates},
      Field{"created_at", &U::created_at, {}, Form::kTime},
      Field{"updated_at", &U::updated_at, {}, Form::kTime},
      Field{"version", &U::version},
  };
};

template <>
struct Fields<iam::ServiceAccount> {
  using S = iam::ServiceAccount;
  static constexpr auto list = std::tuple{
      Field{"id", &S::id},
      Field{"tenant_id", &S::tenant_id},
      Field{"name", &S::name},
      Field{"description", &S::description},
      Field{"state", &S::state, {}, Form::kEnum, kIdentityStates},
      Field{"created_at", &S::created_at, {}, Form::kTime},
      Field{"updated_at", &S::updated_at, {}, Form::kTime},
      Field{"version", &S::version},
  };
};

// An API key as stored (but its secret's hash) and shown (with its state, iam::ApiKey::to_json).
template <>
struct Fields<iam::ApiKey> {
  using K = iam::ApiKey;
  static constexpr auto list = std::tuple{
      Field{"id", &K::id},
      Field{"tenant_id", &K::tenant_id},
      Field{"owner_kind", &K::owner_kind, {}, Form::kEnum, kSubjectKinds},
      Field{"owner_id", &K::owner_id},
      Field{"name", &K::name},
      Field{"created_at", &K::created_at, {}, Form::kTime},
      Field{"expires_at", &K::expires_at, {}, Form::kTime},
      Field{"revoked_at", &K::revoked_at, {}, Form::kTime},
  };
};

template <>
struct Fields<iam::Binding> {
  using B = iam::Binding;
  static constexpr auto list = std::tuple{
      Field{"id", &B::id},
      Field{"tenant_id", &B::tenant_id},
      Field{"project_id", &B::project_id},
      Field{"subject_kind", &B::subject_kind, {}, Form::kEnum, kSubjectKinds},
      Field{"subject_id", &B::subject_id},
      Field{"role", &B::role},
      Field{"source", &B::source},
      Field{"created_at", &B::created_at, {}, Form::kTime},
  };
};

}  // namespace gp
