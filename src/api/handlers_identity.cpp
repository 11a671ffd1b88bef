// Users, service accounts, API keys and role bindings. Each exists at platform scope (/v1/...)
// and inside a tenant (/v1/tenants/{tenant}/...); one set of handlers serves both, acting on
// call.owner() and call.scope().
#include <fmt/format.h>

#include "api/router.h"

namespace gp::api {
namespace {

using iam::Permission;

std::string base_path(const Call& call) {
  return call.tenant ? "/v1/tenants/" + call.tenant->id : "/v1";
}

Mutation created(Json body, std::string resource, std::optional<int64_t> version = {}) {
  Mutation m;
  m.reply = json_reply(201, std::move(body), version);
  m.reply.headers.emplace_back("Location", resource);
  m.resource = std::move(resource);
  return m;
}

Mutation no_content(Json detail = Json::object()) {
  Mutation m;
  m.reply.status = 204;
  m.detail = std::move(detail);
  return m;
}

// ---- users ----

Result<Mutation> create_user(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "user");
  auto spec = GP_TRY(tenancy::parse_user_spec(r));
  GP_TRY_VOID(r.finish());
  auto u = GP_TRY(tenancy::create_user(tx, api.env(), call.owner(), spec));
  auto m = created(u.to_json(), fmt::format("{}/users/{}", base_path(call), u.id), u.version);
  m.detail = {{"username", u.username}};
  return m;
}

Result<Reply> get_user(Api&, Call& call, store::Tx& tx) {
  auto u = GP_TRY(found(tenancy::find_user(tx, call.owner(), call.param("user")), "user"));
  if (u.state == "deleted") return fail(Error::not_found("user not found"));
  return json_reply(200, u.to_json(), u.version);
}

Result<Reply> list_users(Api& api, Call& call, store::Tx& tx) {
  auto p = GP_TRY(tenancy::list_users(tx, call.owner(), GP_TRY(page_request(api, call))));
  std::erase_if(p.items, [](const auto& u) { return u.state == "deleted"; });
  return json_reply(200, page_json(p, [](const auto& u) { return u.to_json(); }));
}

Result<Mutation> update_user(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "user patch");
  auto patch = GP_TRY(tenancy::parse_user_patch(r));
  GP_TRY_VOID(r.finish());
  auto target = GP_TRY(found(tenancy::find_user(tx, call.owner(), call.param("user")), "user"));
  auto u =
      GP_TRY(tenancy::update_user(tx, api.env(), call.owner(), target.id, patch, call.if_match()));
  Mutation m;
  m.reply = json_reply(200, u.to_json(), u.version);
  Json detail = *call.body;
  if (detail.contains("password")) detail["password"] = "(changed)";
  m.detail = detail;
  return m;
}

Result<Mutation> delete_user(Api& api, Call& call, store::Tx& tx) {
  auto u = GP_TRY(found(tenancy::find_user(tx, call.owner(), call.param("user")), "user"));
  if (u.id == call.who.id) return fail(Error::invalid("you cannot delete yourself"));
  GP_TRY_VOID(check_if_match(call, u.version));
  GP_TRY_VOID(tenancy::delete_user(tx, api.env(), call.owner(), u.id));
  return no_content({{"username", u.username}});
}

// ---- service accounts ----

Result<Mutation> create_sa(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "service account");
  auto spec = GP_TRY(tenancy::parse_service_account_spec(r));
  GP_TRY_VOID(r.finish());
  auto s = GP_TRY(tenancy::create_service_account(tx, api.env(), call.owner(), spec));
  auto m =
      created(s.to_json(), fmt::format("{}/service-accounts/{}", base_path(call), s.id), s.version);
  m.detail = {{"name", s.name}};
  return m;
}

Result<Reply> get_sa(Api&, Call& call, store::Tx& tx) {
  auto s =
      GP_TRY(found(tenancy::find_service_account(tx, call.owner(), call.param("service_account")),
                   "service account"));
  return json_reply(200, s.to_json(), s.version);
}

Result<Reply> list_sas(Api& api, Call& call, store::Tx& tx) {
  auto p =
      GP_TRY(tenancy::list_service_accounts(tx, call.owner(), GP_TRY(page_request(api, call))));
  return json_reply(200, page_json(p, [](const auto& s) { return s.to_json(); }));
}

Result<Mutation> delete_sa(Api& api, Call& call, store::Tx& tx) {
  auto s =
      GP_TRY(found(tenancy::find_service_account(tx, call.owner(), call.param("service_account")),
                   "service account"));
  GP_TRY_VOID(check_if_match(call, s.version));
  GP_TRY_VOID(tenancy::delete_service_account(tx, api.env(), call.owner(), s.id));
  return no_content({{"name", s.name}});
}

// ---- API keys ----

// Whether the caller manages keys beyond its own.
bool manages_identities(const Call& call) {
  return iam::authorize(call.who, Permission::kIdentityWrite, call.scope()) ==
         iam::Decision::kAllow;
}

Result<Mutation> create_key(Api& api, Call& call, store::Tx& tx) {
  auto w = api.env();
  auto r = body_reader(call, "api key");
  auto spec = GP_TRY(tenancy::parse_api_key_spec(r, w));
  GP_TRY_VOID(r.finish());
  if (spec.owner_id.empty()) {  // a key for the caller itself
    if (call.who.tenant_id != (call.tenant ? std::optional(call.tenant->id) : std::nullopt))
      return fail(Error::invalid("owner_id is required: the caller does not live in this scope"));
    spec.owner_kind = call.who.kind == iam::PrincipalKind::kUser ? "user" : "service_account";
    spec.owner_id = call.who.id;
  } else if (spec.owner_kind.empty()) {
    return fail(Error::invalid("owner_kind is required with owner_id"));
  }
  if (spec.owner_id != call.who.id && !manages_identities(call))
    GP_TRY_VOID(require(call, Permission::kIdentityWrite, call.scope()));
  auto k = GP_TRY(tenancy::create_api_key(tx, w, call.owner(), spec));
  Json body = k.key.to_json(w.now());
  body["token"] = k.token;  // the only time the secret is shown
  auto m = created(body, fmt::format("{}/api-keys/{}", base_path(call), k.key.id));
  m.detail = {{"owner_id", k.key.owner_id}, {"name", k.key.name}};
  return m;
}

Result<tenancy::ApiKey> visible_key(Call& call, store::Tx& tx) {
  auto k = GP_TRY(found(tenancy::find_api_key(tx, call.owner(), call.param("api_key")), "API key"));
  if (k.owner_id != call.who.id &&
      iam::authorize(call.who, Permission::kIdentityRead, call.scope()) != iam::Decision::kAllow)
    return fail(Error::not_found("API key not found"));
  return k;
}

Result<Reply> get_key(Api& api, Call& call, store::Tx& tx) {
  auto k = GP_TRY(visible_key(call, tx));
  return json_reply(200, k.to_json(api.env().now()));
}

Result<Reply> list_keys(Api& api, Call& call, store::Tx& tx) {
  std::optional<std::string> owner;
  if (iam::authorize(call.who, Permission::kIdentityRead, call.scope()) != iam::Decision::kAllow)
    owner = call.who.id;  // only one's own keys
  auto p = GP_TRY(tenancy::list_api_keys(tx, call.owner(), GP_TRY(page_request(api, call)), owner));
  int64_t now = api.env().now();
  return json_reply(200, page_json(p, [now](const auto& k) { return k.to_json(now); }));
}

Result<Mutation> revoke_key(Api& api, Call& call, store::Tx& tx) {
  auto k = GP_TRY(visible_key(call, tx));
  if (k.owner_id != call.who.id && !manages_identities(call))
    GP_TRY_VOID(require(call, Permission::kIdentityWrite, call.scope()));
  GP_TRY_VOID(tenancy::revoke_api_key(tx, api.env(), call.owner(), k.id));
  return no_content({{"owner_id", k.owner_id}});
}

// ---- role bindings ----

Result<Mutation> create_binding(Api& api, Call& call, store::Tx& tx) {
  auto r = body_reader(call, "role binding");
  auto spec = GP_TRY(tenancy::parse_binding_spec(r));
  GP_TRY_VOID(r.finish());
  iam::Scope where = call.scope();
  if (spec.project) {
    if (!call.tenant) return fail(Error::invalid("project roles are bound inside a tenant"));
    auto p =
        GP_TRY(found(tenancy::find_project(tx, call.tenant_scope(), *spec.project), "project"));
    where.project_id = p.id;
  }
  if (iam::role_level(spec.role) == iam::ScopeLevel::kProject && !where.project_id)
    return fail(Error::invalid(
        fmt::format("role {} is bound to a project: give 'project'", iam::role_name(spec.role))));
  if (iam::role_level(spec.role) != iam::ScopeLevel::kProject && where.project_id)
    return fail(Error::invalid(
        fmt::format("role {} cannot be bound to a project", iam::role_name(spec.role))));
  if (iam::role_level(spec.role) == iam::ScopeLevel::kPlatform && call.tenant)
    return fail(Error::invalid(fmt::format(
        "role {} is a platform role: bind it at /v1/role-bindings", iam::role_name(spec.role))));
  if (iam::role_level(spec.role) == iam::ScopeLevel::kTenant && !call.tenant)
    return fail(Error::invalid(
        fmt::format("role {} is a tenant role: bind it at /v1/tenants/{{tenant}}/role-bindings",
                    iam::role_name(spec.role))));
  if (!iam::may_grant(call.who, spec.role, where))
    return fail(Error::denied(
        fmt::format("you may not grant {} at this scope", iam::role_name(spec.role))));
  auto b = GP_TRY(tenancy::create_binding(tx, api.env(), call.owner(), where, spec));
  auto m = created(b.to_json(), fmt::format("{}/role-bindings/{}", base_path(call), b.id));
  m.detail = {{"role", b.role}, {"subject_id", b.subject_id}};
  if (b.project_id) m.detail["project_id"] = *b.project_id;
  return m;
}

Result<Reply> get_binding(Api&, Call& call, store::Tx& tx) {
  auto b = GP_TRY(
      found(tenancy::find_binding(tx, call.owner(), call.param("role_binding")), "role binding"));
  return json_reply(200, b.to_json());
}

Result<Reply> list_bindings(Api& api, Call& call, store::Tx& tx) {
  auto p = GP_TRY(tenancy::list_bindings(tx, call.owner(), GP_TRY(page_request(api, call))));
  return json_reply(200, page_json(p, [](const auto& b) { return b.to_json(); }));
}

Result<Mutation> delete_binding(Api&, Call& call, store::Tx& tx) {
  auto b = GP_TRY(
      found(tenancy::find_binding(tx, call.owner(), call.param("role_binding")), "role binding"));
  auto role = iam::parse_role(b.role);
  iam::Scope where{b.tenant_id, b.project_id};
  if (!role || !iam::may_grant(call.who, *role, where))
    return fail(Error::denied(fmt::format("you may not revoke {} at this scope", b.role)));
  GP_TRY_VOID(tenancy::delete_binding(tx, call.owner(), b.id));
  return no_content({{"role", b.role}, {"subject_id", b.subject_id}});
}

// One resource's five routes under a prefix.
struct Crud {
  std::string noun;    // "users"
  std::string param;   // "user"
  std::string action;  // "user"
  std::string schema;  // "User"
  Permission read, write;
  MutationHandler create;
  TxHandler get, list;
  MutationHandler remove;
  std::optional<MutationHandler> update;
  std::optional<Access> access;  // overrides the permission check (self-service keys)
  bool versioned = false;        // carries a version: ETag and If-Match
};

void add_crud(std::vector<Route>& out, const std::string& prefix, const Crud& c) {
  std::string coll = prefix + "/" + c.noun;
  std::string item = coll + "/{" + c.param + "}";
  Access access = c.access.value_or(Access::kPermission);
  std::string where = prefix == "/v1" ? "at platform scope" : "in the tenant";
  out.push_back({.method = "POST",
                 .pattern = coll,
                 .action = c.action + ".create",
                 .access = access,
                 .permission = c.write,
                 .mutation = true,
                 .handler = write_tx(c.create),
                 .summary = "Create a " + c.action + " " + where + ".",
                 .request_schema = c.schema + "Create",
                 .response_schema = c.schema,
                 .success_status = 201});
  out.push_back({.method = "GET",
                 .pattern = coll,
                 .action = c.action + ".list",
                 .access = access,
                 .permission = c.read,
                 .handler = read_tx(c.list),
                 .query_params = {"limit", "after"},
                 .summary = "List " + c.noun + " " + where + ".",
                 .response_schema = c.schema + "[]"});
  out.push_back({.method = "GET",
                 .pattern = item,
                 .action = c.action + ".get",
                 .access = access,
                 .permission = c.read,
                 .handler = read_tx(c.get),
                 .summary = "One " + c.action + ".",
                 .response_schema = c.schema});
  if (c.update)
    out.push_back({.method = "PATCH",
                   .pattern = item,
                   .action = c.action + ".update",
                   .access = access,
                   .permission = c.write,
                   .mutation = true,
                   .conditional = c.versioned,
                   .handler = write_tx(*c.update),
                   .summary = "Change a " + c.action + " (If-Match).",
                   .request_schema = c.schema + "Patch",
                   .response_schema = c.schema});
  out.push_back({.method = "DELETE",
                 .pattern = item,
                 .action = c.action + ".delete",
                 .access = access,
                 .permission = c.write,
                 .mutation = true,
                 .conditional = c.versioned,
                 .handler = write_tx(c.remove),
                 .summary = "Delete (revoke) a " + c.action + ".",
                 .success_status = 204});
}

}  // namespace

std::vector<Route> identity_routes() {
  std::vector<Crud> cruds = {
      {"users",
       "user",
       "user",
       "User",
       Permission::kIdentityRead,
       Permission::kIdentityWrite,
       create_user,
       get_user,
       list_users,
       delete_user,
       update_user,
       {},
       true},
      {"service-accounts",
       "service_account",
       "service_account",
       "ServiceAccount",
       Permission::kIdentityRead,
       Permission::kIdentityWrite,
       create_sa,
       get_sa,
       list_sas,
       delete_sa,
       {},
       {},
       true},
      {"api-keys",
       "api_key",
       "api_key",
       "ApiKey",
       Permission::kIdentityRead,
       Permission::kIdentityWrite,
       create_key,
       get_key,
       list_keys,
       revoke_key,
       {},
       Access::kAuthenticated},
      {"role-bindings",
       "role_binding",
       "role_binding",
       "RoleBinding",
       Permission::kIdentityRead,
       Permission::kBindingWrite,
       create_binding,
       get_binding,
       list_bindings,
       delete_binding,
       {},
       {}},
  };
  std::vector<Route> out;
  for (const auto& prefix : {std::string("/v1"), std::string("/v1/tenants/{tenant}")})
    for (const auto& c : cruds) add_crud(out, prefix, c);
  // Role bindings are granted at project scope too, so a project admin (who has no
  // tenant-wide binding.write) reaches the handler; may_grant() decides there.
  for (auto& r : out)
    if (r.pattern.find("role-bindings") != std::string::npos && r.method != "GET" &&
        r.pattern.starts_with("/v1/tenants"))
      r.access = Access::kAuthenticated;
  return out;
}

}  // namespace gp::api
