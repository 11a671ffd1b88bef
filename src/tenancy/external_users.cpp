// Users of an identity provider: the tenant and projects the operator's mapping rules name are
// resolved here; iam finds or creates the user and keeps its provider-managed role bindings equal
// to what the rules grant.
#include <fmt/format.h>

#include "common/env.h"
#include "tenancy/tenancy.h"

namespace gp::tenancy {

Result<std::string> sync_external_user(store::Tx& tx, const Env& w, const iam::oidc::Identity& id,
                                       const std::string& source) {
  Owner owner;
  if (!id.tenant.empty()) {
    auto tenant = GP_TRY(find_tenant(tx, id.tenant));
    if (!tenant)
      return fail(Error::denied(fmt::format(
          "the identity provider's mapping rules name tenant '{}', which does not exist",
          id.tenant)));
    owner = TenantScope(tenant->id);
  }
  const std::string user_id = GP_TRY(iam::external_user(tx, w, owner, id));

  // The bindings the rules grant now, each at its resolved scope.
  std::vector<std::pair<iam::Role, iam::Scope>> grants;
  for (const auto& g : id.grants) {
    iam::Scope where = iam::Scope::platform();
    if (owner) {
      where = iam::Scope::tenant(owner->tenant_id());
      if (!g.project.empty()) {
        auto project = GP_TRY(find_project(tx, *owner, g.project));
        if (!project)
          return fail(Error::denied(fmt::format(
              "the identity provider's mapping rules name project '{}' in tenant '{}', which "
              "does not exist",
              g.project, id.tenant)));
        where = iam::Scope::project(owner->tenant_id(), project->id);
      }
    }
    grants.emplace_back(g.role, std::move(where));
  }
  GP_TRY_VOID(iam::set_bindings_from(tx, w, owner, user_id, source, grants));
  return user_id;
}

}  // namespace gp::tenancy
