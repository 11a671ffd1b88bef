// Tenants and projects.
#include <fmt/format.h>

#include "api/router.h"

namespace gp::api {
namespace {

Result<Mutation> create_tenant(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "tenant");
  auto spec = GP_TRY(tenancy::parse_tenant_spec(r));
  std::optional<tenancy::UserSpec> admin;
  if (auto a = r.optional_object("admin")) {
    ObjectReader ar(*a, "admin");
    admin = GP_TRY(tenancy::parse_user_spec(ar));
    GP_TRY_VOID(ar.finish());
  }
  GP_TRY_VOID(r.finish());
  auto w = api.env();
  auto t = GP_TRY(tenancy::create_tenant(tx, w, spec));
  Json body = t.to_json();
  Json detail = {{"name", t.name}, {"isolation_class", tenancy::class_name(t.isolation_class)}};
  // The segment comes with the tenant, in this audited write: reads never allocate one.
  detail["segment"] = GP_TRY(allocate_tenant_segment(api, tx, t));
  if (admin) {
    tenancy::TenantScope scope(t.id);
    auto user = GP_TRY(tenancy::create_user(tx, w, scope, *admin));
    GP_TRY_VOID(tenancy::create_binding(tx, w, scope, iam::Scope::tenant(t.id),
                                        {iam::Role::kTenantAdmin, "user", user.id, {}}));
    // The first admin's key expires: the admin makes their own keys, and a forgotten
    // onboarding credential does not stay valid for ever.
    constexpr int64_t kInitialKeyTtlUs = int64_t{90} * 24 * 3600 * 1'000'000;
    auto key = GP_TRY(tenancy::create_api_key(
        tx, w, scope, {"initial", "user", user.id, w.now() + kInitialKeyTtlUs}));
    body["admin"] = {
        {"user", user.to_json()}, {"api_key", key.key.to_json(w.now())}, {"token", key.token}};
    detail["admin_user_id"] = user.id;
  }
  Mutation m;
  m.reply = json_reply(201, body, t.version);
  m.reply.headers.emplace_back("Location", "/v1/tenants/" + t.id);
  m.resource = "/v1/tenants/" + t.id;
  m.tenant_id = t.id;
  m.detail = detail;
  return m;
}

Result<Reply> list_tenants(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  std::optional<std::vector<std::string>> only;
  if (iam::authorize(call.who, iam::Permission::kTenantList, iam::Scope::platform()) !=
      iam::Decision::kAllow) {
    only.emplace();
    if (call.who.tenant_id) only->push_back(*call.who.tenant_id);
    for (const auto& b : call.who.bindings)
      if (b.tenant_id) only->push_back(*b.tenant_id);
  }
  auto p = GP_TRY(tenancy::list_tenants(tx, page, only));
  return json_reply(200, page_json(p, [](const auto& t) { return t.to_json(); }));
}

Result<Mutation> update_tenant(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "tenant patch");
  auto patch = GP_TRY(tenancy::parse_tenant_patch(r));
  GP_TRY_VOID(r.finish());
  const tenancy::TenantState before = call.tenant->state;
  auto t =
      GP_TRY(tenancy::update_tenant(tx, api.env(), call.tenant_scope(), patch, call.if_match()));
  Mutation m;
  m.reply = json_reply(200, t.to_json(), t.version);
  m.detail = *call.body;
  // A suspended tenant's work stops (its allocations end; running work within the grace).
  if (before != tenancy::TenantState::kSuspended && t.state == tenancy::TenantState::kSuspended)
    m.detail["allocations_released"] = GP_TRY(api.allocs().end_work(
        tx, api.env(), t.id, std::nullopt, "tenant_suspended", "the tenant was suspended"));
  return m;
}

Result<Mutation> offboard_tenant(Api& api, Call& call, store::Tx& tx) {
  // Offboarding happens once: a second DELETE says so instead of repeating it.
  if (call.tenant->state == tenancy::TenantState::kOffboarding) {
    return fail(Error::conflict(fmt::format(
        "tenant '{}' is already offboarding (since {}): its credentials are revoked, its "
        "allocations released and its data keys destroyed",
        call.tenant->name, format_rfc3339(from_unix_micros(call.tenant->updated_at)))));
  }
  auto t = GP_TRY(tenancy::offboard_tenant(tx, api.env(), call.tenant_scope(), call.if_match()));
  const int released = GP_TRY(api.allocs().offboard(tx, api.env(), t.id));
  GP_TRY_VOID(release_tenant_network(tx, t.id));
  GP_TRY_VOID(shred_tenant_keys(tx, t));
  Json storage = GP_TRY(schedule_tenant_storage_deletion(api, tx, t, call.who.id));
  Json invoice = GP_TRY(draft_final_invoice(api, tx, t, call.who.id));
  Mutation m;
  m.detail = {{"state", "offboarding"}, {"allocations_released", released},
              {"network", "released"},  {"data_keys", "destroyed"},
              {"storage", storage},     {"final_invoice", invoice}};
  // The answer says what was done, as the audit record does.
  Json body = t.to_json();
  body["offboarding"] = m.detail;
  m.reply = json_reply(200, std::move(body), t.version);
  return m;
}

Result<Mutation> create_project(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "project");
  auto spec = GP_TRY(tenancy::parse_project_spec(r));
  GP_TRY_VOID(r.finish());
  auto p = GP_TRY(tenancy::create_project(tx, api.env(), call.tenant_scope(), spec));
  Mutation m;
  m.reply = json_reply(201, p.to_json(), p.version);
  m.resource = fmt::format("/v1/tenants/{}/projects/{}", p.tenant_id, p.id);
  m.reply.headers.emplace_back("Location", m.resource);
  m.detail = {{"name", p.name}};
  return m;
}

Result<Reply> list_projects(Api& api, Call& call, store::Tx& tx) {
  auto page = GP_TRY(page_request(api, call));
  std::optional<std::vector<std::string>> only;
  if (iam::authorize(call.who, iam::Permission::kProjectRead, call.scope()) !=
      iam::Decision::kAllow) {
    only.emplace();  // project-scoped principals see the projects they are bound in
    for (const auto& b : call.who.bindings)
      if (b.project_id && b.tenant_id == call.tenant->id) only->push_back(*b.project_id);
  }
  auto p = GP_TRY(tenancy::list_projects(tx, call.tenant_scope(), page, only));
  return page_reply(p);
}

Result<Mutation> update_project(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "project patch");
  auto display = r.optional_string("display_name", 200);
  GP_TRY_VOID(r.finish());
  auto p = GP_TRY(tenancy::update_project(tx, api.env(), call.tenant_scope(), call.project->id,
                                          display, call.if_match()));
  Mutation m;
  m.reply = json_reply(200, p.to_json(), p.version);
  m.detail = *call.body;
  return m;
}

Result<Mutation> delete_project(Api&, Call& call, store::Tx& tx) {
  GP_TRY_VOID(check_if_match(call, call.project->version));
  // Allocations and reservations keep naming their project as history: say so, instead of
  // letting the store's foreign key refuse the delete as if the request were malformed.
  auto refs = GP_TRY(alloc::project_references(tx, call.tenant_scope(), call.project->id));
  if (refs.any())
    return fail(Error::conflict(fmt::format(
        "project \"{}\" is still named by {} allocation(s) ({} live) and {} reservation(s), "
        "which are kept as its history: a project that has had allocations or reservations "
        "cannot be deleted",
        call.project->name, refs.allocations, refs.live_allocations, refs.reservations)));
  GP_TRY_VOID(tenancy::delete_project(tx, call.tenant_scope(), call.project->id));
  Mutation m;
  m.reply.status = 204;
  m.detail = {{"name", call.project->name}};
  return m;
}

}  // namespace

std::vector<Route> tenancy_routes() {
  using iam::Permission;
  std::vector<Route> r;
  r.push_back({.method = "POST",
               .pattern = "/v1/tenants",
               .action = "tenant.create",
               .permission = Permission::kTenantCreate,
               .mutation = true,
               .handler = write_tx(create_tenant),
               .summary = "Create a tenant, optionally with its first tenant-admin user.",
               .request_schema = "TenantCreate",
               .response_schema = "Tenant",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants",
               .action = "tenant.list",
               .access = Access::kAuthenticated,
               .handler = read_tx(list_tenants),
               .query_params = {"limit", "after"},
               .summary = "Tenants the caller can see (all of them for platform roles).",
               .response_schema = "Tenant[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}",
               .action = "tenant.get",
               .permission = Permission::kTenantRead,
               .handler = [](Api&, Call& call) -> Result<Reply> {
                 return json_reply(200, call.tenant->to_json(), call.tenant->version);
               },
               .summary = "One tenant, by id or name.",
               .response_schema = "Tenant"});
  r.push_back({.method = "PATCH",
               .pattern = "/v1/tenants/{tenant}",
               .action = "tenant.update",
               .permission = Permission::kTenantUpdate,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(update_tenant),
               .summary = "Change display name, class, labels, or suspend/resume (If-Match).",
               .request_schema = "TenantPatch",
               .response_schema = "Tenant"});
  r.push_back({.method = "DELETE",
               .pattern = "/v1/tenants/{tenant}",
               .action = "tenant.offboard",
               .permission = Permission::kTenantDelete,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(offboard_tenant),
               .summary = "Offboard: the tenant's credentials are revoked at once, its allocations "
                          "released, its network released and its data keys destroyed; its "
                          "storage is scheduled for deletion and its final invoice drafted. The "
                          "answer's `offboarding` says what was done; a second DELETE is a 409.",
               .response_schema = "Tenant"});
  r.push_back({.method = "POST",
               .pattern = "/v1/tenants/{tenant}/projects",
               .action = "project.create",
               .permission = Permission::kProjectCreate,
               .mutation = true,
               .handler = write_tx(create_project),
               .summary = "Create a project in the tenant.",
               .request_schema = "ProjectCreate",
               .response_schema = "Project",
               .success_status = 201});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/projects",
               .action = "project.list",
               .permission = Permission::kTenantRead,
               .handler = read_tx(list_projects),
               .query_params = {"limit", "after"},
               .summary = "Projects of the tenant visible to the caller.",
               .response_schema = "Project[]"});
  r.push_back({.method = "GET",
               .pattern = "/v1/tenants/{tenant}/projects/{project}",
               .action = "project.get",
               .permission = Permission::kProjectRead,
               .handler = [](Api&, Call& call) -> Result<Reply> {
                 return json_reply(200, call.project->to_json(), call.project->version);
               },
               .summary = "One project, by id or name.",
               .response_schema = "Project"});
  r.push_back({.method = "PATCH",
               .pattern = "/v1/tenants/{tenant}/projects/{project}",
               .action = "project.update",
               .permission = Permission::kProjectUpdate,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(update_project),
               .summary = "Change a project's display name (If-Match).",
               .request_schema = "ProjectPatch",
               .response_schema = "Project"});
  r.push_back({.method = "DELETE",
               .pattern = "/v1/tenants/{tenant}/projects/{project}",
               .action = "project.delete",
               .permission = Permission::kProjectDelete,
               .mutation = true,
               .conditional = true,
               .handler = write_tx(delete_project),
               .summary = "Delete a project and its role bindings (409 while allocations or "
                          "reservations name it).",
               .success_status = 204});
  return r;
}

}  // namespace gp::api
