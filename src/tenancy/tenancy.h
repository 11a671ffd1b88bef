// Tenancy: tenants, projects, users, service accounts, API keys and role bindings, as
// repository functions over a store transaction. Callers (the API layer) compose one
// transaction per mutation with its audit record. Tenant-owned rows are only reachable through
// a TenantScope, which the API layer builds after authorizing the principal for that tenant.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/json_out.h"
#include "common/page.h"
#include "common/record.h"
#include "common/result.h"
#include "iam/iam.h"
#include "iam/oidc.h"
#include "store/store.h"
#include "vocab/vocab.h"

namespace gp::tenancy {

using vocab::class_name;
using vocab::IsolationClass;
using vocab::parse_class;

enum class TenantState { kActive, kSuspended, kOffboarding };
std::string_view state_name(TenantState s);
std::optional<TenantState> parse_state(std::string_view s);

// Proof that the caller was authorized for this tenant. Only the API layer constructs it.
class TenantScope {
 public:
  explicit TenantScope(std::string tenant_id) : tenant_id_(std::move(tenant_id)) {}
  const std::string& tenant_id() const { return tenant_id_; }

 private:
  std::string tenant_id_;
};

struct Tenant {
  std::string id, name, display_name;
  IsolationClass isolation_class = IsolationClass::kStandard;
  TenantState state = TenantState::kActive;
  std::map<std::string, std::string> labels;
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const;
};

struct Project {
  std::string id, tenant_id, name, display_name;
  int64_t created_at = 0, updated_at = 0, version = 1;
  // The project's Kubernetes namespace (policy::project_namespace), fixed at creation and unique
  // across the platform. nullopt: none (the name would be longer than 63 characters, or, in a
  // store from before migration 20, an older project of another tenant already had it).
  std::optional<std::string> kubernetes_namespace;
  // Its JSON (common/json_out.h), from its field table below.
  void describe(ObjectOut& out) const { describe_fields(*this, out); }
  Json to_json() const { return json_of(*this); }
};

struct User {
  std::string id;
  std::optional<std::string> tenant_id;
  std::string username, display_name, email, state = "active";
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const;
};

struct ServiceAccount {
  std::string id;
  std::optional<std::string> tenant_id;
  std::string name, description, state = "active";
  int64_t created_at = 0, updated_at = 0, version = 1;
  Json to_json() const;
};

struct ApiKey {
  std::string id;
  std::optional<std::string> tenant_id;
  std::string owner_kind, owner_id, name;
  int64_t created_at = 0;
  std::optional<int64_t> expires_at, revoked_at;
  Json to_json(int64_t now_us) const;
};

struct Binding {
  std::string id;
  std::optional<std::string> tenant_id, project_id;
  std::string subject_kind, subject_id, role;
  int64_t created_at = 0;
  // "api" (granted through the API), or "oidc:<provider>" (kept in step with the provider's
  // claims at each login, docs/oidc.md).
  std::string source = "api";
  Json to_json() const;
};

// Where a platform-or-tenant object lives: nullopt = platform.
using Owner = std::optional<TenantScope>;

// ---- tenants (platform-level objects) ----
struct TenantSpec {
  std::string name, display_name;
  IsolationClass isolation_class = IsolationClass::kStandard;
  std::map<std::string, std::string> labels;
};
Result<TenantSpec> parse_tenant_spec(ObjectReader& r);
// Refused (conflict) when another tenant has the name, or a name that extends it or that it
// extends at a '-' (policy::tenant_names_share_namespaces): that keeps every project's
// Kubernetes namespace unique by construction, with nothing a tenant can do to take another's.
Result<Tenant> create_tenant(store::Tx& tx, const World& w, const TenantSpec& spec);
// Resolves an id ("ten_...") or a name.
Result<std::optional<Tenant>> find_tenant(store::Tx& tx, std::string_view id_or_name);
Result<Page<Tenant>> list_tenants(store::Tx& tx, const PageRequest& page,
                                  const std::optional<std::vector<std::string>>& only_ids);
// Every tenant, by id (for reads that need the whole set; the API lists page by page).
Result<std::vector<Tenant>> all_tenants(store::Tx& tx);
// Every tenant's name by its id, in one query: for views that show names where rows keep ids.
Result<std::unordered_map<std::string, std::string>> tenant_names(store::Tx& tx);
struct TenantPatch {
  std::optional<std::string> display_name;
  std::optional<IsolationClass> isolation_class;
  std::optional<TenantState> state;
  std::optional<std::map<std::string, std::string>> labels;
};
Result<TenantPatch> parse_tenant_patch(ObjectReader& r);
Result<Tenant> update_tenant(store::Tx& tx, const World& w, const TenantScope& scope,
                             const TenantPatch& patch, std::optional<int64_t> if_match);
// Offboarding: the tenant moves to state offboarding; its keys and sessions are revoked.
Result<Tenant> offboard_tenant(store::Tx& tx, const World& w, const TenantScope& scope,
                               std::optional<int64_t> if_match);

// ---- what the tenant's posture report counts of its identities ----

struct TenantIdentities {
  int active_users = 0, active_service_accounts = 0;
  std::vector<ApiKey> live_keys;  // the tenant's keys neither revoked nor expired, by id
  // Bindings granted inside the tenant, and bindings anywhere held by the tenant's subjects, by
  // id, each with its subject's home tenant (nullopt: a platform subject).
  std::vector<std::pair<Binding, std::optional<std::string>>> bindings;
};
Result<TenantIdentities> tenant_identities(store::Tx& tx, const std::string& tenant_id,
                                           int64_t now);

// ---- the tenant's workload policy: the registries its images may come from, for the admission
// webhook and for jobs ----

struct WorkloadPolicy {
  std::vector<std::string> allowed_registries;  // empty: any registry
  bool require_pull_always = false;             // on top of what the class requires
  int64_t version = 0;                          // 0: never set
};
// The tenant's policy; the defaults (version 0) when none was ever set.
Result<WorkloadPolicy> load_workload_policy(store::Tx& tx, const std::string& tenant_id);
// Stores `next` as the version after `before` (the policy load_workload_policy read in this
// transaction) and returns it with that version.
Result<WorkloadPolicy> save_workload_policy(store::Tx& tx, const std::string& tenant_id,
                                            const WorkloadPolicy& before, WorkloadPolicy next,
                                            const std::string& who, int64_t now);

// ---- projects ----
struct ProjectSpec {
  std::string name, display_name;
};
Result<ProjectSpec> parse_project_spec(ObjectReader& r);
Result<Project> create_project(store::Tx& tx, const World& w, const TenantScope& s,
                               const ProjectSpec& spec);
Result<std::optional<Project>> find_project(store::Tx& tx, const TenantScope& s,
                                            std::string_view id_or_name);
Result<Page<Project>> list_projects(store::Tx& tx, const TenantScope& s, const PageRequest& page,
                                    const std::optional<std::vector<std::string>>& only_ids);
// Every project of the scope's tenant, by id.
Result<std::vector<Project>> all_projects(store::Tx& tx, const TenantScope& s);
Result<Project> update_project(store::Tx& tx, const World& w, const TenantScope& s,
                               const std::string& id, const std::optional<std::string>& display,
                               std::optional<int64_t> if_match);
// Conflict while the project has active volumes (storage::check_project_deletable).
Result<void> delete_project(store::Tx& tx, const TenantScope& s, const std::string& id);
// The project whose Kubernetes namespace is `ns`, across tenants (for the admission webhook,
// which learns only the namespace): the stored, immutable mapping, never a parse of the name.
Result<std::optional<Project>> find_project_by_namespace(store::Tx& tx, std::string_view ns);

// ---- users ----
struct UserSpec {
  std::string username, display_name, email;
  std::optional<std::string> password;
};
Result<UserSpec> parse_user_spec(ObjectReader& r);
Result<User> create_user(store::Tx& tx, const World& w, const Owner& owner, const UserSpec& spec);
Result<std::optional<User>> find_user(store::Tx& tx, const Owner& owner,
                                      std::string_view id_or_username);
Result<Page<User>> list_users(store::Tx& tx, const Owner& owner, const PageRequest& page);
// Disables the user, revokes its keys and sessions and removes its role bindings.
Result<void> delete_user(store::Tx& tx, const World& w, const Owner& owner, const std::string& id);
struct UserPatch {
  std::optional<std::string> display_name, email, password, state;
};
Result<UserPatch> parse_user_patch(ObjectReader& r);
Result<User> update_user(store::Tx& tx, const World& w, const Owner& owner, const std::string& id,
                         const UserPatch& patch, std::optional<int64_t> if_match);
// Password login as "<tenant>/<username>" (tenant users) or "<username>" (platform users).
// Returns the user id on success; the same error for unknown user and wrong password, so
// usernames cannot be probed.
Result<std::string> check_password(store::Tx& tx, std::string_view login,
                                   std::string_view password);

// ---- service accounts ----
struct ServiceAccountSpec {
  std::string name, description;
};
Result<ServiceAccountSpec> parse_service_account_spec(ObjectReader& r);
Result<ServiceAccount> create_service_account(store::Tx& tx, const World& w, const Owner& owner,
                                              const ServiceAccountSpec& spec);
Result<std::optional<ServiceAccount>> find_service_account(store::Tx& tx, const Owner& owner,
                                                           std::string_view id_or_name);
Result<Page<ServiceAccount>> list_service_accounts(store::Tx& tx, const Owner& owner,
                                                   const PageRequest& page);
Result<void> delete_service_account(store::Tx& tx, const World& w, const Owner& owner,
                                    const std::string& id);

// ---- API keys ----
// The longest an API key may be given to live, whether as ttl_seconds or as expires_at: 10
// years.
inline constexpr int64_t kMaxApiKeyLifetimeSeconds = int64_t{10} * 365 * 86400;
struct ApiKeySpec {
  std::string name;
  std::string owner_kind;  // "user" | "service_account"; defaults to the caller
  std::string owner_id;
  std::optional<int64_t> expires_at;  // unix micros
};
Result<ApiKeySpec> parse_api_key_spec(ObjectReader& r, const World& w);
struct CreatedKey {
  ApiKey key;
  std::string token;  // shown once
};
Result<CreatedKey> create_api_key(store::Tx& tx, const World& w, const Owner& owner,
                                  const ApiKeySpec& spec);
Result<std::optional<ApiKey>> find_api_key(store::Tx& tx, const Owner& owner, std::string_view id);
Result<Page<ApiKey>> list_api_keys(store::Tx& tx, const Owner& owner, const PageRequest& page,
                                   const std::optional<std::string>& owner_id);
Result<void> revoke_api_key(store::Tx& tx, const World& w, const Owner& owner,
                            const std::string& id);

// ---- sessions (login) ----
struct CreatedSession {
  std::string id, token;
  int64_t expires_at;
};
Result<CreatedSession> create_session(store::Tx& tx, const World& w, const std::string& user_id,
                                      Duration ttl);
Result<void> revoke_session(store::Tx& tx, const World& w, const std::string& id);

// ---- role bindings ----
struct BindingSpec {
  iam::Role role;
  std::string subject_kind, subject_id;
  std::optional<std::string> project;  // id or name, for project roles
};
Result<BindingSpec> parse_binding_spec(ObjectReader& r);
// `where` must already be resolved (project id) and checked with iam::may_grant.
Result<Binding> create_binding(store::Tx& tx, const World& w, const Owner& owner,
                               const iam::Scope& where, const BindingSpec& spec);
Result<std::optional<Binding>> find_binding(store::Tx& tx, const Owner& owner, std::string_view id);
Result<Page<Binding>> list_bindings(store::Tx& tx, const Owner& owner, const PageRequest& page);
Result<void> delete_binding(store::Tx& tx, const Owner& owner, const std::string& id);

// ---- users of an identity provider (docs/oidc.md) ----
// Finds the user bound to `id.subject` or creates it (in `id.tenant`, a tenant name; platform
// user when empty), refreshes its email and display name, and makes its role bindings of
// `source` ("oidc:<provider>") exactly `id.grants`; bindings made through the API stay.
// Refused when the subject's user lives in another tenant or is disabled, when the username
// belongs to a local user, or when a rule names a tenant or project that does not exist.
// Returns the user id.
Result<std::string> sync_external_user(store::Tx& tx, const World& w, const iam::oidc::Identity& id,
                                       const std::string& source);

// Makes sure a platform-admin exists. On first start, creates user "admin" with the given
// password (or a generated one) plus an API key, and returns the credentials to print once.
struct Bootstrap {
  std::string username, password, api_key;
};
Result<std::optional<Bootstrap>> bootstrap_platform_admin(
    store::Tx& tx, const World& w, const std::optional<std::string>& password);

}  // namespace gp::tenancy

namespace gp {

// The one description of a project: its row, its JSON and its OpenAPI schema (common/record.h).
template <>
struct Fields<tenancy::Project> {
  using P = tenancy::Project;
  static constexpr auto list = std::tuple{
      Field{"id", &P::id},
      Field{"tenant_id", &P::tenant_id},
      Field{"name", &P::name},
      Field{"display_name", &P::display_name},
      Field{"kubernetes_namespace", &P::kubernetes_namespace, "k8s_namespace"},
      Field{"created_at", &P::created_at, {}, Form::kTime},
      Field{"updated_at", &P::updated_at, {}, Form::kTime},
      Field{"version", &P::version},
  };
};

}  // namespace gp
