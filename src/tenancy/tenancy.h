// Tenancy: tenants and projects, as repository functions over a store transaction. Callers (the
// API layer) compose one transaction per mutation with its audit record. Tenant-owned rows are
// only reachable through a TenantScope, which the API layer builds after authorizing the
// principal for that tenant. The identities inside a tenant (users, service accounts, API keys,
// sessions, role bindings) are iam's: tenancy names them below for its callers, and calls iam
// where a change to a tenant or a project reaches them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/json_out.h"
#include "common/page.h"
#include "common/record.h"
#include "common/result.h"
#include "common/thread_safety.h"
#include "iam/iam.h"
#include "iam/oidc.h"
#include "store/store.h"
#include "vocab/vocab.h"

namespace gp::tenancy {

using vocab::class_name;
using vocab::IsolationClass;
using vocab::parse_class;

enum class TenantState { kActive, kSuspended, kOffboarding };
inline constexpr std::array<std::string_view, 3> kTenantStateNames = {"active", "suspended",
                                                                      "offboarding"};
std::string_view state_name(TenantState s);
std::optional<TenantState> parse_state(std::string_view s);

// The identities are iam's (iam/iam.h); these names keep tenancy's callers as they were.
using iam::ApiKey;
using iam::ApiKeySpec;
using iam::Binding;
using iam::BindingSpec;
using iam::CreatedKey;
using iam::CreatedSession;
using iam::Owner;
using iam::ServiceAccount;
using iam::ServiceAccountSpec;
using iam::TenantIdentities;
using iam::TenantScope;
using iam::User;
using iam::UserPatch;
using iam::UserSpec;

using iam::create_api_key;
using iam::create_binding;
using iam::create_service_account;
using iam::create_session;
using iam::create_user;
using iam::delete_binding;
using iam::delete_service_account;
using iam::delete_user;
using iam::find_api_key;
using iam::find_binding;
using iam::find_service_account;
using iam::find_user;
using iam::kMaxApiKeyLifetimeSeconds;
using iam::list_api_keys;
using iam::list_bindings;
using iam::list_service_accounts;
using iam::list_users;
using iam::parse_api_key_spec;
using iam::parse_binding_spec;
using iam::parse_service_account_spec;
using iam::parse_user_patch;
using iam::parse_user_spec;
using iam::revoke_api_key;
using iam::revoke_session;
using iam::tenant_identities;
using iam::update_user;

struct Tenant {
  std::string id, name, display_name;
  IsolationClass isolation_class = IsolationClass::kStandard;
  TenantState state = TenantState::kActive;
  std::map<std::string, std::string> labels;
  int64_t created_at = 0, updated_at = 0, version = 1;
  // Its JSON (common/json_out.h), from its field table below.
  void describe(ObjectOut& out) const { describe_fields(*this, out); }
  Json to_json() const { return json_of(*this); }
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
Result<Tenant> create_tenant(store::Tx& tx, const Env& w, const TenantSpec& spec);
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
Result<Tenant> update_tenant(store::Tx& tx, const Env& w, const TenantScope& scope,
                             const TenantPatch& patch, std::optional<int64_t> if_match);
// Offboarding: the tenant moves to state offboarding; its keys and sessions are revoked.
Result<Tenant> offboard_tenant(store::Tx& tx, const Env& w, const TenantScope& scope,
                               std::optional<int64_t> if_match);
// What iam::Authenticator asks of the tenants: whether one is being offboarded (one point read
// of its state, in the authentication's transaction), and the table that answer comes from.
iam::TenantLookup tenant_lookup();

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
Result<Project> create_project(store::Tx& tx, const Env& w, const TenantScope& s,
                               const ProjectSpec& spec);
Result<std::optional<Project>> find_project(store::Tx& tx, const TenantScope& s,
                                            std::string_view id_or_name);
Result<Page<Project>> list_projects(store::Tx& tx, const TenantScope& s, const PageRequest& page,
                                    const std::optional<std::vector<std::string>>& only_ids);
// Every project of the scope's tenant, by id.
Result<std::vector<Project>> all_projects(store::Tx& tx, const TenantScope& s);
Result<Project> update_project(store::Tx& tx, const Env& w, const TenantScope& s,
                               const std::string& id, const std::optional<std::string>& display,
                               std::optional<int64_t> if_match);
// Conflict while the project has active volumes (storage::check_project_deletable).
Result<void> delete_project(store::Tx& tx, const TenantScope& s, const std::string& id);
// The project whose Kubernetes namespace is `ns`, across tenants (for the admission webhook,
// which learns only the namespace): the stored, immutable mapping, never a parse of the name.
Result<std::optional<Project>> find_project_by_namespace(store::Tx& tx, std::string_view ns);

// ---- the tenant and project a request's path names ----

// Tenants and projects as the store's generation vouches for them (store::Store::generation):
// every request under /v1/tenants/{tenant} looks up its tenant, and most find it here rather
// than in the store. What is kept at generation G was read in a snapshot taken after G was; a
// commit that changes a tenant or project row moves the generation on, and nothing kept
// before it is used again. Where the store has no generation (a follower), every lookup reads.
class PathCache {
 public:
  // Counts changes to the tenants and projects tables (store::Store::count_changes_to).
  explicit PathCache(store::Store& store);
  // find_tenant(tx, key), or what an earlier lookup of `key` found at `generation`: the store's,
  // taken before `tx` began.
  Result<std::optional<Tenant>> tenant(store::Tx& tx, std::string_view key,
                                       std::optional<uint64_t> generation) const;
  // find_project(tx, s, key), likewise.
  Result<std::optional<Project>> project(store::Tx& tx, const TenantScope& s, std::string_view key,
                                         std::optional<uint64_t> generation) const;

 private:
  // Forgets what was kept at another generation than `generation` (or too much).
  void at(uint64_t generation) const GP_REQUIRES(mu_);

  mutable Mutex mu_;
  mutable uint64_t generation_ GP_GUARDED_BY(mu_) = 0;
  // By the key looked up (an id or a name); projects by "<tenant id>/<key>".
  mutable std::unordered_map<std::string, Tenant> tenants_ GP_GUARDED_BY(mu_);
  mutable std::unordered_map<std::string, Project> projects_ GP_GUARDED_BY(mu_);
};

// ---- password login ----
// Password login as "<tenant>/<username>" (tenant users) or "<username>" (platform users).
// Returns the user id on success; the same error for unknown user and wrong password, so
// usernames cannot be probed.
Result<std::string> check_password(store::Tx& tx, std::string_view login,
                                   std::string_view password);

// ---- users of an identity provider (docs/oidc.md) ----
// Finds the user bound to `id.subject` or creates it (in `id.tenant`, a tenant name; platform
// user when empty), refreshes its email and display name, and makes its role bindings of
// `source` ("oidc:<provider>") exactly `id.grants`; bindings made through the API stay.
// Refused when the subject's user lives in another tenant or is disabled, when the username
// belongs to a local user, or when a rule names a tenant or project that does not exist.
// Returns the user id.
Result<std::string> sync_external_user(store::Tx& tx, const Env& w, const iam::oidc::Identity& id,
                                       const std::string& source);

// Makes sure a platform-admin exists. On first start, creates user "admin" with the given
// password (or a generated one) plus an API key, and returns the credentials to print once.
struct Bootstrap {
  std::string username, password, api_key;
};
Result<std::optional<Bootstrap>> bootstrap_platform_admin(
    store::Tx& tx, const Env& w, const std::optional<std::string>& password);

}  // namespace gp::tenancy

namespace gp {

// The one description of a project: its row, its JSON and its OpenAPI schema (common/record.h).
template <>
struct Fields<tenancy::Tenant> {
  using T = tenancy::Tenant;
  static constexpr auto list = std::tuple{
      Field{"id", &T::id},
      Field{"name", &T::name},
      Field{"display_name", &T::display_name},
      Field{"isolation_class", &T::isolation_class, {}, Form::kEnum, vocab::kClassNames},
      Field{"state", &T::state, {}, Form::kEnum, tenancy::kTenantStateNames},
      Field{"labels", &T::labels},
      Field{"created_at", &T::created_at, {}, Form::kTime},
      Field{"updated_at", &T::updated_at, {}, Form::kTime},
      Field{"version", &T::version},
  };
};

// The workload policy as shown (its row keeps the policy as one JSON text); a reply adds what
// the tenant's class requires (class_requires_pull_always).
template <>
struct Fields<tenancy::WorkloadPolicy> {
  using W = tenancy::WorkloadPolicy;
  static constexpr auto list = std::tuple{
      Field{"allowed_registries", &W::allowed_registries},
      Field{"require_pull_always", &W::require_pull_always},
      Field{"version", &W::version},
  };
};

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
