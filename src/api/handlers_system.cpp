// System endpoints (health, readiness, metrics, OpenAPI), login/logout/whoami, and the audit
// trail (listing per platform or tenant, and server-side verification).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/client_key.h"
#include "api/router.h"
#include "common/crypto.h"
#include "common/env.h"
#include "observe/observe.h"

namespace gp::api {
namespace {

constexpr const char* kExpositionType = "text/plain; version=0.0.4; charset=utf-8";

Reply text_reply(std::string body, std::string content_type = "text/plain; charset=utf-8") {
  Reply r;
  r.raw = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

Result<Reply> login(Api& api, Call& call) {
  auto r = body_reader(call, "login");
  std::string username = r.string("username", 127);  // "<tenant>/<username>" or "<username>"
  std::string password = r.string("password", 256);
  const bool cookie = r.optional_bool("cookie").value_or(false);  // a browser's login
  GP_TRY_VOID(r.finish());
  // Wrong passwords are throttled per address and per account: a guesser is slowed to the
  // account's refill rate wherever it guesses from, and the real user waits seconds at most.
  // Both are checked before the password: its hash (argon2) is the costly part, and a password
  // cannot be known good without it. (A token, cheap to check, is always checked: api.cpp.)
  Throttles& t = api.throttles();
  const TimePoint now = api.clock().now();
  const std::string account = "login:" + username;
  const std::string address = throttle_key(call.req);
  for (auto [limiter, key, what] :
       {std::tuple{&t.auth_failures, address, "failed authentications from this address"},
        std::tuple{&t.login_failures, account, "failed logins of this account"}}) {
    if (auto v = limiter->check(key, now); !v.allowed) {
      Error e = throttled(call, v, what);
      if (t.audit_throttled.take(key, now).allowed)
        audit_failure(api, call, call.route, "throttled", e);
      return fail(e);
    }
  }
  // The slow password check runs outside the write transaction.
  std::string user_id;
  auto checked = api.store().read([&](store::Tx& tx) -> Result<void> {
    user_id = GP_TRY(tenancy::check_password(tx, username, password));
    return ok();
  });
  if (!checked) {
    if (checked.error().code == ErrorCode::kUnauthenticated) {
      t.auth_failures.take(address, now);
      t.login_failures.take(account, now);
    }
    return fail(checked.error());
  }
  // Login authenticates by password, so the session's owner is the audit actor.
  call.who.id = user_id;
  call.who.kind = iam::PrincipalKind::kUser;
  return run_mutation(api, call, [&](Api& api, Call&, store::Tx& tx) -> Result<Mutation> {
    return login_session(api, tx, user_id, cookie);
  });
}

Result<Reply> audit_list(Api& api, Call& call, store::Tx& tx) {
  audit::Query q;
  if (call.tenant) q.tenant_id = call.tenant->id;
  auto page = GP_TRY(page_request(api, call));
  q.limit = page.limit + 1;  // the one beyond the page only says there is a next one
  if (page.after) {
    try {
      q.after = std::stoll(*page.after);
    } catch (...) {
      return fail(Error::invalid("after must be a sequence number"));
    }
  }
  auto get = [&](const char* k) -> std::optional<std::string> {
    auto it = call.req.query.find(k);
    if (it == call.req.query.end()) return std::nullopt;
    return it->second;
  };
  q.actor = get("actor");
  q.action = get("action");
  q.outcome = get("outcome");
  if (!call.tenant) {
    if (auto t = get("tenant")) q.tenant_id = *t;
  }
  auto records = make_page(GP_TRY(api.audit().list(tx, q)), page,
                           [](const audit::Record& r) { return std::to_string(r.seq); });
  return json_reply(200, page_json(records, audit::record_to_json));
}

}  // namespace

Json principal_json(const iam::Principal& p) {
  Json bindings = Json::array();
  for (const auto& b : p.bindings)
    bindings.push_back({{"id", b.id},
                        {"role", iam::role_name(b.role)},
                        {"tenant_id", b.tenant_id ? Json(*b.tenant_id) : Json(nullptr)},
                        {"project_id", b.project_id ? Json(*b.project_id) : Json(nullptr)}});
  std::string kind = p.kind == iam::PrincipalKind::kUser             ? "user"
                     : p.kind == iam::PrincipalKind::kServiceAccount ? "service_account"
                                                                     : "node";
  return {{"kind", kind},
          {"id", p.id},
          {"name", p.name},
          {"tenant_id", p.tenant_id ? Json(*p.tenant_id) : Json(nullptr)},
          {"credential_id", p.credential_id},
          {"role_bindings", bindings}};
}

std::string csrf_token(std::string_view session_token) {
  return base64url_encode(sha256(std::string("gpuplane-csrf:").append(session_token)));
}

std::vector<std::pair<std::string, std::string>> session_cookies(const Api& api,
                                                                 std::string_view token,
                                                                 Duration ttl) {
  const int64_t age = std::chrono::duration_cast<std::chrono::seconds>(ttl).count();
  const std::string secure = api.isolation().api_tls ? "; Secure" : "";
  const bool clear = age <= 0;
  return {{"Set-Cookie", fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}",
                                     kSessionCookie, clear ? "" : std::string(token), age, secure)},
          {"Set-Cookie", fmt::format("{}={}; Path=/; Max-Age={}; SameSite=Strict{}", kCsrfCookie,
                                     clear ? "" : csrf_token(token), age, secure)},
          {"Cache-Control", "no-store"}};
}

Result<Mutation> login_session(Api& api, store::Tx& tx, const std::string& user_id, bool cookie) {
  Env w = api.env();
  auto s = GP_TRY(tenancy::create_session(tx, w, user_id, api.limits().session_ttl));
  auto principal = GP_TRY(api.authenticator().load_principal(tx, "user", user_id));
  Json body = {{"session_id", s.id},
               {"expires_at", format_rfc3339(from_unix_micros(s.expires_at))},
               {"principal", principal_json(principal)}};
  Mutation m;
  if (cookie) {
    body["csrf_token"] = csrf_token(s.token);
    m.reply = json_reply(201, body);
    m.reply.headers = session_cookies(api, s.token, api.limits().session_ttl);
  } else {
    body["token"] = s.token;
    m.reply = json_reply(201, body);
  }
  m.resource = "sessions/" + s.id;
  m.tenant_id = principal.tenant_id;
  m.actor = user_id;
  return m;
}

Result<audit::VerifyReport> Api::audit_sweep() {
  auto verifier = GP_TRY(audit::Verifier::from_public_pem(audit().signer().public_pem()));
  auto report = GP_TRY(audit::verify_store(store(), verifier));
  metrics().set_gauge("audit_chain_ok",
                      "1 when the last verification found the audit trail intact, 0 when not.",
                      report.ok ? 1 : 0);
  metrics().set_gauge("audit_chain_records_verified",
                      "Records the last verification found intact and linked.",
                      double(report.records_checked));
  metrics().set_gauge("audit_chain_verified_timestamp_seconds",
                      "When the audit trail was last verified (Unix seconds).",
                      double(env().now()) / 1e6);
  return report;
}

std::vector<Route> system_routes() {
  std::vector<Route> routes;
  routes.push_back({.method = "GET",
                    .pattern = "/healthz",
                    .action = "system.healthz",
                    .access = Access::kPublic,
                    .handler = [](Api&, Call&) -> Result<Reply> { return text_reply("ok\n"); },
                    .summary = "Liveness: the process is serving."});
  routes.push_back(
      {.method = "GET",
       .pattern = "/readyz",
       .action = "system.readyz",
       .access = Access::kPublic,
       .handler = [](Api& api, Call& call) -> Result<Reply> {
         const bool store_ok = api.store().ping().has_value();
         if (!api.ready() || !store_ok)
           return fail(Error::unavailable(store_ok ? "shutting down" : "store unreachable"));
         // ?role=leader: ready only on the leader (a load balancer's check for writes).
         const auto wanted = call.req.query.find("role");
         if (wanted != call.req.query.end() && wanted->second != "leader" &&
             wanted->second != "any")
           return fail(Error::invalid("role must be 'leader' or 'any'"));
         const bool leader = api.leader();
         if (wanted != call.req.query.end() && wanted->second == "leader" && !leader)
           return fail(Error::unavailable("this replica is a follower"));
         Json body = {{"status", "ready"},
                      {"role", leader ? "leader" : "follower"},
                      {"store", api.store().engine()}};
         if (!leader) body["leader"] = api.leader_url();
         return json_reply(200, body);
       },
       .query_params = {"role"},
       .summary = "Readiness: the store answers and the server accepts work; its role (leader "
                  "or follower), and with ?role=leader ready only on the leader.",
       .response_schema = "Readiness"});
  routes.push_back({.method = "GET",
                    .pattern = "/metrics",
                    .action = "system.metrics",
                    // Per-tenant usage and revenue: platform credentials only (a scraper's
                    // service account with a platform role holding usage.read).
                    .permission = iam::Permission::kUsageRead,
                    // The server's own counters are served even when the store cannot be
                    // read; gpuplane_fleet_metrics_up says whether the fleet's families are.
                    .handler = [](Api& api, Call&) -> Result<Reply> {
                      std::string text = api.metrics().render(), fleet;
                      auto read = api.store().read([&](store::Tx& tx) -> Result<void> {
                        fleet = GP_TRY(observe::fleet_metrics(tx, api.env(), api.allocs(), {}));
                        return ok();
                      });
                      if (!read)
                        spdlog::warn("/metrics: the fleet could not be read: {}",
                                     read.error().message);
                      text += read ? fleet : "";
                      text += fmt::format(
                          "# HELP gpuplane_fleet_metrics_up 1 when the fleet's families below "
                          "were read from the store, 0 when it could not be read.\n"
                          "# TYPE gpuplane_fleet_metrics_up gauge\ngpuplane_fleet_metrics_up "
                          "{}\n",
                          read ? 1 : 0);
                      return text_reply(std::move(text), kExpositionType);
                    },
                    .summary = "Prometheus metrics: the server's requests, and the fleet's "
                               "nodes, GPUs, allocations, queues, quota and jobs "
                               "(docs/observability.md)."});
  routes.push_back(
      {.method = "GET",
       .pattern = "/metrics/hardware",
       .action = "system.metrics",
       .permission = iam::Permission::kUsageRead,
       .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
         observe::Shard shard;
         if (auto s = call.req.query.find("shard"); s != call.req.query.end())
           shard = GP_TRY(observe::parse_shard(s->second));
         return text_reply(GP_TRY(observe::hardware_metrics(tx, api.env(), {shard, {}})),
                           kExpositionType);
       }),
       .query_params = {"shard"},
       .summary = "Prometheus metrics per node, GPU and MIG instance under the DCGM exporter's "
                  "names, labelled with the tenant, project, allocation and job holding each; "
                  "?shard=i/n serves the nodes of one shard (docs/observability.md)."});
  routes.push_back(
      {.method = "GET",
       .pattern = "/v1/tenants/{tenant}/metrics",
       .action = "tenant.metrics",
       .permission = iam::Permission::kAllocationRead,
       .handler = read_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Reply> {
         return text_reply(GP_TRY(observe::hardware_metrics(tx, api.env(), {{}, call.tenant->id})),
                           kExpositionType);
       }),
       .summary = "The tenant's own GPUs and MIG instances as /metrics/hardware shows them "
                  "(DCGM names, with project, allocation and job labels), for the tenant's own "
                  "Prometheus: nothing another tenant holds or shares, no node series."});
  routes.push_back(
      {.method = "GET",
       .pattern = "/v1/openapi.json",
       .action = "system.openapi",
       .access = Access::kPublic,
       .handler = [](Api& api, Call&) -> Result<Reply> { return json_reply(200, api.openapi()); },
       .summary = "This API's OpenAPI 3 document.",
       .response_schema = "OpenApiDocument"});
  routes.push_back({.method = "POST",
                    .pattern = "/v1/auth/login",
                    .action = "session.create",
                    .access = Access::kPublic,
                    .mutation = true,
                    .handler = login,
                    .summary = "Log in with username and password; returns a session token.",
                    .request_schema = "LoginRequest",
                    .response_schema = "LoginResponse",
                    .success_status = 201});
  routes.push_back(
      {.method = "POST",
       .pattern = "/v1/auth/logout",
       .action = "session.delete",
       .access = Access::kAuthenticated,
       .mutation = true,
       .handler = write_tx([](Api& api, Call& call, store::Tx& tx) -> Result<Mutation> {
         if (!call.who.credential_id.starts_with("ses_"))
           return fail(
               Error::invalid("logout ends login sessions; revoke API keys "
                              "with DELETE on the key"));
         Env w = api.env();
         GP_TRY_VOID(tenancy::revoke_session(tx, w, call.who.credential_id));
         Mutation m;
         m.reply.status = 204;
         m.reply.headers = session_cookies(api, "", Duration::zero());  // a browser's too
         m.resource = "sessions/" + call.who.credential_id;
         m.tenant_id = call.who.tenant_id;
         return m;
       }),
       .summary = "End the current login session.",
       .success_status = 204});
  routes.push_back({.method = "GET",
                    .pattern = "/v1/whoami",
                    .action = "session.whoami",
                    .access = Access::kAuthenticated,
                    .handler = [](Api&, Call& call) -> Result<Reply> {
                      return json_reply(200, principal_json(call.who));
                    },
                    .summary = "The calling principal and its role bindings.",
                    .response_schema = "Principal"});
  routes.push_back({.method = "GET",
                    .pattern = "/v1/audit",
                    .action = "audit.list",
                    .permission = iam::Permission::kAuditRead,
                    .handler = read_tx(audit_list),
                    .query_params = {"limit", "after", "actor", "action", "outcome", "tenant"},
                    .summary = "The whole audit trail (platform auditors and admins).",
                    .response_schema = "AuditRecord[]"});
  routes.push_back({.method = "GET",
                    .pattern = "/v1/tenants/{tenant}/audit",
                    .action = "audit.list",
                    .permission = iam::Permission::kAuditRead,
                    .handler = read_tx(audit_list),
                    .query_params = {"limit", "after", "actor", "action", "outcome"},
                    .summary = "The tenant's own audit records.",
                    .response_schema = "AuditRecord[]"});
  routes.push_back(
      {.method = "GET",
       .pattern = "/v1/audit/verify",
       .action = "audit.verify",
       .permission = iam::Permission::kAuditRead,
       .handler = [](Api& api, Call&) -> Result<Reply> {
         auto verifier =
             GP_TRY(audit::Verifier::from_public_pem(api.audit().signer().public_pem()));
         auto rep = GP_TRY(audit::verify_store(api.store(), verifier));
         return json_reply(
             200, {{"ok", rep.ok},
                   {"records_checked", rep.records_checked},
                   {"checkpoints_checked", rep.checkpoints_checked},
                   {"first_bad_seq", rep.first_bad_seq ? Json(*rep.first_bad_seq) : Json(nullptr)},
                   {"reason", rep.reason},
                   {"last_seq", rep.last_seq},
                   {"head_hash", rep.head_hash}});
       },
       .summary = "Verify the hash chain and signed checkpoints of the whole trail.",
       .response_schema = "AuditVerification"});
  return routes;
}

}  // namespace gp::api
