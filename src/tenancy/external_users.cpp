// Users of an identity provider: found by the provider's subject, created on first login, and
// their provider-managed role bindings kept equal to what the operator's mapping rules grant.
#include <fmt/format.h>

#include <set>
#include <tuple>

#include "tenancy/tenancy.h"

namespace gp::tenancy {

Result<std::string> sync_external_user(store::Tx& tx, const World& w, const iam::oidc::Identity& id,
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
  auto row =
      GP_TRY(tx.query_one("SELECT id, tenant_id, state, email, display_name FROM users "
                          "WHERE external_subject = ?",
                          {id.subject}));
  std::string user_id;
  if (row) {
    user_id = row->text(0);
    if (row->opt_text(1) != (owner ? std::optional(owner->tenant_id()) : std::nullopt))
      return fail(Error::denied(
          "this identity's user belongs to another tenant than the mapping rules now give; an "
          "operator must delete that user first"));
    if (row->text(2) != "active") return fail(Error::denied("this user is disabled"));
    if (row->text(3) != id.email || row->text(4) != id.display_name)
      GP_TRY_VOID(tx.exec(
          "UPDATE users SET email = ?, display_name = ?, updated_at = ?, version = version + 1 "
          "WHERE id = ?",
          {id.email, id.display_name, w.now(), user_id}));
  } else {
    if (auto local = GP_TRY(find_user(tx, owner, id.username)))
      return fail(Error::conflict(fmt::format(
          "username '{}' belongs to a user not bound to this identity; an operator must rename "
          "or remove it first",
          id.username)));
    auto user = GP_TRY(create_user(tx, w, owner, {id.username, id.display_name, id.email, {}}));
    user_id = user.id;
    GP_TRY_VOID(
        tx.exec("UPDATE users SET external_subject = ? WHERE id = ?", {id.subject, user_id}));
  }

  // The bindings the rules grant now, as (role, tenant id, project id).
  using Key = std::tuple<std::string, std::string, std::string>;
  std::set<Key> wanted;
  std::vector<std::pair<Key, iam::Scope>> to_create;
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
    Key key{std::string(iam::role_name(g.role)), where.tenant_id.value_or(""),
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
    BindingSpec spec{*iam::parse_role(std::get<0>(key)), "user", user_id, where.project_id};
    auto b = GP_TRY(create_binding(tx, w, owner, where, spec));
    GP_TRY_VOID(tx.exec("UPDATE role_bindings SET source = ? WHERE id = ?", {source, b.id}));
  }
  return user_id;
}

}  // namespace gp::tenancy
