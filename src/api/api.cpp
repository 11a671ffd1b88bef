// Request dispatch: route matching, authentication, tenant/project resolution, authorization,
// body parsing, the error mapping to problem+json, audit of denials and rejected mutations,
// metrics and the access log.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "api/client_key.h"
#include "api/console.h"
#include "api/router.h"
#include "common/crypto.h"
#include "common/env.h"
#include "fleet/fleet.h"
#include "tenancy/tenancy.h"

namespace gp::api {
namespace {

// A 403 names who was refused and what they lack, so the person reading it knows which
// credential to change.
Error missing_permission(const iam::Principal& who, iam::Permission p) {
  std::string_view kind = "principal";
  if (who.kind == iam::PrincipalKind::kUser) kind = "user";
  if (who.kind == iam::PrincipalKind::kServiceAccount) kind = "service account";
  if (who.kind == iam::PrincipalKind::kNode) kind = "node";
  return Error::denied(fmt::format("{} {} ({}) lacks permission {} at this scope", kind, who.name,
                                   who.id, iam::permission_name(p)));
}

int http_status(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kTenantSuspended:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kMethodNotAllowed:
      return 405;
    case ErrorCode::kConflict:
    case ErrorCode::kQuotaExceeded:
    case ErrorCode::kBudgetExceeded:
      return 409;
    case ErrorCode::kPreconditionFailed:
      return 412;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kUnsupportedMedia:
      return 415;
    case ErrorCode::kUnprocessable:
      return 422;
    case ErrorCode::kPreconditionRequired:
      return 428;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

std::string_view status_title(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 503:
      return "Service Unavailable";
    default:
      return "Internal Server Error";
  }
}

HttpResponse problem(const Error& e, const std::string& request_id) {
  int status = http_status(e.code);
  HttpResponse r;
  r.status = status;
  r.content_type = "application/problem+json";
  std::string code(error_code_name(e.code));
  Json body = {{"type", "https://gpuplane.dev/problems/" + code},
               {"title", status_title(status)},
               {"status", status},
               {"detail", e.message},
               {"code", code},
               {"request_id", request_id}};
  r.body = body.dump();
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

bool valid_request_id(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

std::vector<std::string_view> split_path(std::string_view p) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '/') {
      ++i;
      continue;
    }
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    out.push_back(p.substr(i, j - i));
    i = j;
  }
  return out;
}

// Whether `segs` (a request's path, split) matches the route's pattern; its parameters go into
// `params` when given.
bool match(const Route& route, const std::vector<std::string_view>& segs,
           std::map<std::string, std::string>* params) {
  const auto& pat = route.segments;
  if (pat.size() != segs.size()) return false;
  for (size_t i = 0; i < pat.size(); ++i) {
    if (pat[i].front() == '{') {
      if (segs[i].empty() || segs[i].size() > 128) return false;
    } else if (pat[i] != segs[i]) {
      return false;
    }
  }
  if (params) {
    params->clear();
    for (size_t i = 0; i < pat.size(); ++i)
      if (pat[i].front() == '{')
        (*params)[std::string(pat[i].substr(1, pat[i].size() - 2))] = std::string(segs[i]);
  }
  return true;
}

}  // namespace

Api::Api(store::Store& store, audit::AuditLog& audit, Env env, Limits limits,
         alloc::Options alloc_options)
    : store_(store),
      audit_(audit),
      env_(env),
      limits_(std::move(limits)),
      // The composition root of authentication: iam reads its own tables, and asks tenancy and
      // fleet about theirs.
      authn_(store, env.clock, tenancy::tenant_lookup(), fleet::node_credential),
      paths_(store),
      allocs_(audit, env.clock, alloc_options),
      throttles_(std::make_unique<Throttles>(limits_.rate)) {
  store_.set_change_listener(
      [this](const std::vector<std::string>& keys) { holds_.announce(keys); });
  store_.set_sole_writer(leader_);  // an Api leads until set_role says otherwise
  for (auto table : {system_routes(), tenancy_routes(), identity_routes(), fleet_routes(),
                     alloc_routes(), k8s_routes(), network_routes(), billing_routes(),
                     posture_routes(), usage_routes(), budget_routes()})
    for (auto& r : table) routes_.push_back(std::move(r));
  for (auto& r : sla_routes()) routes_.push_back(std::move(r));
  for (auto& r : storage_routes()) routes_.push_back(std::move(r));
  for (auto& r : job_routes()) routes_.push_back(std::move(r));
  for (auto& r : oidc_routes()) routes_.push_back(std::move(r));
  // The table is complete: nothing moves its patterns from here on.
  for (auto& r : routes_) {
    r.segments = split_path(r.pattern);
    r.reader = r.handler.target<ReadInSnapshot>();
  }
}

Api::~Api() { store_.set_change_listener(nullptr); }

const std::vector<Route>& Api::routes() const { return routes_; }

bool Api::writes_inline(HttpRequest& req) const {
  if (!store_.defers_flush()) return false;
  if (req.path.empty()) parse_target(req);
  const auto segs = split_path(req.path);
  return std::any_of(routes_.begin(), routes_.end(), [&](const Route& r) {
    return r.inline_write && r.method == req.method && match(r, segs, nullptr);
  });
}

namespace {

void append_audit(Api& api, const audit::Entry& entry) {
  auto r = api.store().write([&](store::Tx& tx) -> Result<void> {
    GP_TRY_VOID(api.audit().append(tx, entry));
    return ok();
  });
  if (!r)
    spdlog::error("audit write failed for request {}: {}", entry.request_id, r.error().message);
}

// Response fields that hold a secret: one-time credentials (API key, session and join tokens,
// node credentials), the CSRF token, a password.
bool is_secret_field(std::string_view key) {
  return key == "token" || key == "credential" || key == "csrf_token" || key == "password";
}

bool carries_secret(const Json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if ((is_secret_field(it.key()) && it->is_string()) || carries_secret(*it)) return true;
  } else if (j.is_array()) {
    return std::any_of(j.begin(), j.end(), [](const Json& v) { return carries_secret(v); });
  }
  return false;
}

// A response with a secret must not be kept by any cache, the browser's included.
void no_store(HttpResponse& resp) {
  for (const auto& [k, v] : resp.headers)
    if (k == "Cache-Control") return;
  resp.headers.emplace_back("Cache-Control", "no-store");
}

// The request bodies the API reads: JSON (merge patches too), in UTF-8, the one charset JSON
// has (RFC 8259); no other parameter means anything to it.
bool json_media_type(const MediaType& t) {
  if (t.type != "application" || (t.subtype != "json" && t.subtype != "merge-patch+json"))
    return false;
  for (const auto& [name, value] : t.parameters) {
    std::string v = value;
    std::transform(v.begin(), v.end(), v.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (name != "charset" || v != "utf-8") return false;
  }
  return true;
}

// The record of a hidden denial (a 404 under /v1/tenants/{tenant}, api.cpp Api::handle): in
// the caller's own trail (its home tenant; the platform's for a platform principal), which the
// platform's trail also holds, and never in the trail of the tenant the path names, whose
// admins would otherwise learn the prober's ids and address and see their trail flooded. At
// most RateLimits::hidden_denial_records_per_principal records are written; the next one
// counts those left out in `unrecorded_before`. Whether the named tenant or object exists
// changes nothing here.
void audit_hidden_denial(Api& api, const Call& call, const Error& e) {
  auto v = api.throttles().hidden_denial_records.take(call.who.id, api.clock().now());
  if (!v.allowed) return;
  audit::Entry entry;
  entry.actor = call.who.id;
  entry.tenant_id = call.who.tenant_id.value_or("");
  entry.action = call.route->action;
  entry.resource = call.req.path.substr(0, 512);
  entry.outcome = "denied";
  entry.request_id = call.request_id;
  entry.source = call.req.remote;
  entry.detail = {{"code", error_code_name(e.code)}, {"reason", e.message.substr(0, 300)}};
  if (v.refused_before > 0) entry.detail["unrecorded_before"] = v.refused_before;
  append_audit(api, entry);
}

}  // namespace

void audit_failure(Api& api, const Call& call, const Route* route, std::string_view outcome,
                   const Error& e) {
  audit::Entry entry;
  entry.actor = call.who.authenticated() ? call.who.id : "anonymous";
  entry.tenant_id = call.tenant ? call.tenant->id : call.who.tenant_id.value_or("");
  entry.action = route ? route->action : fmt::format("{} {}", call.req.method, "unmatched");
  entry.resource = call.req.path.substr(0, 512);
  entry.outcome = std::string(outcome);
  entry.request_id = call.request_id;
  entry.source = call.req.remote;
  entry.detail = {{"code", error_code_name(e.code)}, {"reason", e.message.substr(0, 300)}};
  append_audit(api, entry);
}

namespace {

// Node mTLS: an agent call must come with its own node's certificate, verified against the node
// CA during the handshake and still unrevoked in the store.
Result<void> check_node_certificate(Api& api, const iam::Principal& who, const HttpRequest& req,
                                    std::string_view action) {
  const auto& pki = api.isolation().node_pki;
  if (!pki || !pki->required) return ok();
  if (!req.client_cert) {
    // A node enrolled before the control plane served TLS has no certificate on record: its
    // credential alone may ask for the first one, never for anything else.
    bool first = false;
    if (action == "node.certificate.renew")
      GP_TRY_VOID(api.store().read([&](store::Tx& tx) -> Result<void> {
        first = GP_TRY(fleet::list_certificates(tx, who.id)).empty();
        return ok();
      }));
    if (first) return ok();
    return fail(Error::unauthenticated(
        "agent calls need the node's client certificate (mTLS); this connection presented none"));
  }
  const tls::PeerCert& cert = *req.client_cert;
  if (!cert.verify_error.empty())
    return fail(Error::unauthenticated(
        fmt::format("node certificate {} refused: {}", cert.serial, cert.verify_error)));
  if (cert.common_name != who.id)
    return fail(Error::unauthenticated(
        fmt::format("node certificate {} names {}, not this node", cert.serial, cert.common_name)));
  return api.store().read([&](store::Tx& tx) {
    return fleet::check_certificate(tx, who.id, cert.serial, to_unix_micros(api.clock().now()));
  });
}

}  // namespace

HttpResponse Api::handle(HttpRequest req) {
  auto started = std::chrono::steady_clock::now();
  if (req.path.empty()) parse_target(req);
  // Behind a trusted proxy the client is the one X-Forwarded-For names; the audit trail, the
  // access log and the address limits all see that address. `peer` stays for the log.
  const std::string peer = req.remote;
  req.remote =
      limits_.trusted_proxies.client_address(req.remote, req.header_values("x-forwarded-for"));
  std::string request_id;
  if (auto h = req.header("x-request-id"); h && valid_request_id(*h))
    request_id = std::string(*h);
  else
    request_id = env_.ids.next("req");

  Call call{req, nullptr, {}, request_id, {}, {}, {}, {}};
  const Route* route = nullptr;
  std::string_view route_label = "unmatched";
  bool audited = false;  // a denial already went into the audit trail
  std::string allowed;   // methods the matched path accepts (for 405)
  // A denial is recorded once the request's work is done: never while it holds a snapshot.
  std::optional<std::pair<std::string, Error>> denied;
  auto deny = [&](std::string_view outcome, const Error& e) {
    denied.emplace(std::string(outcome), e);
    audited = true;
  };
  const TimePoint now = env_.clock.now();
  // What the address limits count, worked out only for a request they limit.
  std::optional<std::string> address_key;
  auto client = [&]() -> const std::string& {
    if (!address_key) address_key = throttle_key(req);
    return *address_key;
  };

  // The rest of dispatch, from the path's tenant to the handler: in `snapshot` when the route's
  // handler is a read (`reader`), each lookup in its own read otherwise.
  auto in_scope = [&](store::Tx* snapshot, std::optional<uint64_t> snapshot_generation,
                      const ReadInSnapshot* reader) -> Result<Reply> {
    // Each lookup gets the store's generation from before its snapshot began (PathCache).
    auto lookup = [&](const std::function<Result<void>(store::Tx&, std::optional<uint64_t>)>& f) {
      if (snapshot) return f(*snapshot, snapshot_generation);
      const auto generation = store_.generation();
      return store_.read([&](store::Tx& tx) { return f(tx, generation); });
    };
    // Tenant and project from the path. A tenant the principal cannot reach answers exactly as
    // one that does not exist: the same lookup, the same 404, and the same hidden-denial record
    // (written where the response is made, in the caller's trail, never the target's).
    if (auto t = call.params.find("tenant"); t != call.params.end()) {
      std::optional<tenancy::Tenant> tenant;
      GP_TRY_VOID(lookup([&](store::Tx& tx, std::optional<uint64_t> generation) -> Result<void> {
        tenant = GP_TRY(paths_.tenant(tx, t->second, generation));
        return ok();
      }));
      if (!tenant || !call.who.reaches_tenant(tenant->id))
        return fail(Error::not_found("tenant not found"));
      call.tenant = std::move(tenant);
      if (auto p = call.params.find("project"); p != call.params.end()) {
        GP_TRY_VOID(lookup([&](store::Tx& tx, std::optional<uint64_t> generation) -> Result<void> {
          call.project = GP_TRY(paths_.project(tx, call.tenant_scope(), p->second, generation));
          return ok();
        }));
        if (!call.project) return fail(Error::not_found("project not found"));
      }
    }

    if (route->access == Access::kPermission) {
      auto d = iam::authorize(call.who, route->permission, call.scope());
      if (d == iam::Decision::kHidden) return fail(Error::not_found("not found"));
      if (d != iam::Decision::kAllow) {
        Error e = missing_permission(call.who, route->permission);
        deny("denied", e);
        return fail(e);
      }
    }

    // Suspended and offboarding tenants create nothing; releasing and deleting stay possible.
    if (route->mutation && route->action.ends_with(".create") && call.tenant &&
        call.tenant->state != tenancy::TenantState::kActive) {
      Error e{ErrorCode::kTenantSuspended, fmt::format("tenant is {}: nothing can be created in it",
                                                       tenancy::state_name(call.tenant->state))};
      deny("denied", e);
      return fail(e);
    }

    if (!route->request_schema.empty()) {
      auto ct = req.header("content-type");
      auto type = ct ? parse_media_type(*ct) : std::nullopt;
      if (!type || !json_media_type(*type))
        return fail(ErrorCode::kUnsupportedMedia,
                    "Content-Type must be application/json (optionally with charset=utf-8)");
      if (req.body.size() > limits_.max_body_bytes)
        return fail(ErrorCode::kPayloadTooLarge, "request body too large");
      call.body = GP_TRY(parse_json(req.body));
    }
    if (snapshot) return reader->fn(*this, call, *snapshot);
    return route->handler(*this, call);
  };

  auto dispatch = [&]() -> Result<Reply> {
    auto segs = split_path(req.path);
    for (const auto& r : routes_) {
      std::map<std::string, std::string> params;
      if (!match(r, segs, &params)) continue;
      if (r.method != req.method) {
        allowed += (allowed.empty() ? "" : ", ") + r.method;
        continue;
      }
      route = &r;
      call.route = &r;
      call.params = std::move(params);
      break;
    }
    // A request that will be authenticated is limited by its principal's bucket once its
    // credential is verified (a failing one by the failed-authentication bucket): one client
    // cannot spend the bucket of everyone who shares its address. Everything else is limited by
    // the address here, before any work.
    const bool by_credential =
        route && route->access != Access::kPublic &&
        (req.header("authorization") || req.cookie(kSessionCookie) || req.client_cert);
    if (!by_credential && !req.remote.empty()) {
      if (auto v = throttles_->address.take(client(), now); !v.allowed)
        return fail(throttled(call, v, "this client address"));
    }
    if (req.query_error) return fail(Error::invalid(*req.query_error));
    if (!route) {
      // The console's pages are under no route.
      if (auto page = console_reply(req, console_dir_)) return std::move(*page);
      if (!allowed.empty())
        return fail(ErrorCode::kMethodNotAllowed,
                    fmt::format("method {} not allowed here; allowed: {}", req.method, allowed));
      return fail(Error::not_found(fmt::format("no such endpoint: {}", req.path.substr(0, 200))));
    }
    route_label = route->pattern;
    for (const auto& [k, _] : req.query) {
      if (std::find(route->query_params.begin(), route->query_params.end(), k) ==
          route->query_params.end())
        return fail(Error::invalid(fmt::format("unknown query parameter '{}'", k.substr(0, 64))));
    }

    // A follower changes nothing: writes go to the leader.
    if (!leader_ && req.method != "GET" && req.method != "HEAD") {
      const std::string url = leader_url();
      call.retry_after = std::chrono::seconds(1);  // refused before any work, like a throttle
      return fail(Error::unavailable(
          url.empty()
              ? "this replica is a follower and no leader is known yet; retry shortly"
              : fmt::format("this replica is a follower; send writes to the leader at {}", url)));
    }

    // Authentication. Checking a token is one indexed lookup and a hash, so every token is
    // checked: a valid one passes whatever else its address sent. A failing one spends the
    // address's failed-authentication budget, and once that is spent it is answered 429.
    if (route->access != Access::kPublic) {
      // An address (or node) that keeps presenting bad credentials: refused, audited as
      // "throttled" once a minute rather than once per request.
      auto failed_authentication = [&](const Error& e) -> Error {
        if (auto v = throttles_->auth_failures.take(client(), now); !v.allowed) {
          Error refused = throttled(call, v, "failed authentications from this address");
          if (throttles_->audit_throttled.take(client(), now).allowed) deny("throttled", refused);
          return refused;
        }
        deny("denied", e);
        return e;
      };
      auto auth = req.header("authorization");
      // A browser's session rides in a cookie (when no Authorization header is sent).
      auto session_cookie = auth ? std::nullopt : req.cookie(kSessionCookie);
      Result<iam::Principal> who = fail(Error::unauthenticated("missing bearer token"));
      if (auth) {
        if (auth->size() > 7 && (auth->starts_with("Bearer ") || auth->starts_with("bearer ")))
          who = authn_.authenticate(auth->substr(7));
        else
          who = fail(Error::unauthenticated("Authorization must be 'Bearer <token>'"));
      } else if (session_cookie) {
        who = session_cookie->starts_with("ses_")
                  ? authn_.authenticate(*session_cookie)
                  : fail(Error::unauthenticated("the session cookie holds no login session"));
      }
      if (!who) {
        // A store that cannot be read (503) says nothing about the credential.
        if (who.error().code != ErrorCode::kUnauthenticated) return fail(who.error());
        return fail(failed_authentication(who.error()));
      }
      call.who = std::move(*who);
      if (auto v = throttles_->principal.take(call.who.id, now); !v.allowed)
        return fail(throttled(call, v, fmt::format("principal {}", call.who.id)));
      // The cookie goes along with any request the browser makes, a forged cross-site one
      // too: a write must also show the CSRF token, which only our own pages can read.
      if (session_cookie && req.method != "GET" && req.method != "HEAD") {
        auto sent = req.header("x-csrf-token");
        if (!sent || !constant_time_equal(*sent, csrf_token(*session_cookie))) {
          Error e = Error::denied(
              "a write authenticated by the session cookie must send the X-CSRF-Token header "
              "(the value of the gp_csrf cookie)");
          deny("denied", e);
          return fail(e);
        }
      }
      bool node = call.who.kind == iam::PrincipalKind::kNode;
      if (node != (route->access == Access::kNode)) {
        Error e = Error::denied(node ? "node credentials are accepted only by /v1/agent routes"
                                     : "this route accepts only node agent credentials");
        deny("denied", e);
        return fail(e);
      }
      if (node) {
        if (auto cert = check_node_certificate(*this, call.who, req, route->action); !cert) {
          if (cert.error().code != ErrorCode::kUnauthenticated) return fail(cert.error());
          return fail(failed_authentication(cert.error()));
        }
      }
    }

    // A read handler runs in the snapshot the path's tenant and project were found in.
    const ReadInSnapshot* reader = route->reader;
    if (!reader) return in_scope(nullptr, std::nullopt, nullptr);
    Result<Reply> out = fail(Error::internal("no reply"));
    const auto generation = store_.generation();  // before the snapshot begins
    GP_TRY_VOID(store_.read([&](store::Tx& tx) -> Result<void> {
      out = in_scope(&tx, generation, reader);
      return ok();
    }));
    return out;
  };

  Result<Reply> result = [&]() -> Result<Reply> {
    try {
      return dispatch();
    } catch (const std::exception& e) {
      spdlog::error("request {} failed: {}", request_id, e.what());
      return fail(Error::internal("internal error"));
    }
  }();
  if (denied) audit_failure(*this, call, route, denied->first, denied->second);

  HttpResponse resp;
  if (result) {
    Reply& r = *result;
    resp.status = r.status;
    resp.content_type = r.content_type;
    resp.body = r.raw ? std::move(*r.raw) : (r.body.is_null() ? "" : r.body.dump());
    resp.headers = std::move(r.headers);
    if (r.etag_version) resp.headers.emplace_back("ETag", fmt::format("\"{}\"", *r.etag_version));
    if (req.method == "GET") resp.hold = std::move(r.hold);
    if (carries_secret(r.body)) no_store(resp);
  } else {
    const Error& e = result.error();
    // A throttled request, or a write a follower refused, is not audited one by one (a flood
    // would cost a write each).
    bool throttled_now = call.retry_after.count() > 0;
    // A 404 under /v1/tenants/{tenant} for a principal: another tenant, or an object id the
    // principal cannot see, or one that does not exist. All are one kind of denial, recorded
    // the same way (see audit_hidden_denial), so neither the answer nor the work tells them
    // apart.
    bool hidden = e.code == ErrorCode::kNotFound && route && call.who.authenticated() &&
                  call.params.contains("tenant");
    // Failed mutations are audited too; denials were recorded where they happened. A request
    // for a tenant that does not exist has no tenant to record against.
    bool missing_tenant = call.params.contains("tenant") && !call.tenant;
    bool denial = e.code == ErrorCode::kUnauthenticated || e.code == ErrorCode::kPermissionDenied;
    if (hidden && !audited) {
      audit_hidden_denial(*this, call, e);
    } else if (route && !audited && !missing_tenant && !throttled_now &&
               (route->mutation || denial)) {
      audit_failure(*this, call, route, denial ? "denied" : "rejected", e);
    }
    resp = problem(e, request_id);
    if (e.code == ErrorCode::kMethodNotAllowed) resp.headers.emplace_back("Allow", allowed);
    if (call.retry_after.count() > 0)  // whole seconds, rounded up (RFC 9110 delay-seconds)
      resp.headers.emplace_back("Retry-After",
                                std::to_string((call.retry_after.count() + 999) / 1000));
    if (!leader_)
      if (auto url = leader_url(); !url.empty())
        resp.headers.emplace_back("X-Gpuplane-Leader", url);
    if (e.code == ErrorCode::kInternal) spdlog::error("request {}: {}", request_id, e.message);
  }
  resp.headers.emplace_back("X-Request-Id", request_id);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  metrics_.observe(req.method, route_label, resp.status, secs);
  if (spdlog::should_log(spdlog::level::info))  // its arguments cost copies
    spdlog::info("request id={} method={} route={} status={} ms={:.2f} principal={} remote={}{}",
                 request_id, req.method, route_label, resp.status, secs * 1000,
                 call.who.authenticated() ? call.who.id : "-", req.remote,
                 peer == req.remote ? std::string() : fmt::format(" via={}", peer));
  return resp;
}

void Api::set_role(bool leader, std::string leader_url) {
  MutexLock lock(role_mu_);
  leader_url_ = std::move(leader_url);
  leader_ = leader;
  authn_.set_caching(leader);
  store_.set_sole_writer(leader);
}

std::string Api::leader_url() const {
  MutexLock lock(role_mu_);
  return leader_url_;
}

// ---- Call helpers ----

Error throttled(Call& call, const RateLimiter::Verdict& v, std::string_view what) {
  call.retry_after = v.retry_after;
  return {ErrorCode::kResourceExhausted,
          fmt::format("rate limit of {} exceeded; retry after {} ms", what, v.retry_after.count())};
}

iam::Scope Call::scope() const {
  iam::Scope s;
  if (tenant) s.tenant_id = tenant->id;
  if (project) s.project_id = project->id;
  return s;
}

tenancy::Owner Call::owner() const {
  if (!tenant) return std::nullopt;
  return tenancy::TenantScope(tenant->id);
}

tenancy::TenantScope Call::tenant_scope() const { return tenancy::TenantScope(tenant->id); }

std::optional<int64_t> Call::if_match() const {
  auto h = req.header("if-match");
  if (!h) return std::nullopt;
  std::string_view v = *h;
  if (v == "*") return std::nullopt;  // any current version
  if (v.starts_with("W/")) v.remove_prefix(2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  try {
    return std::stoll(std::string(v));
  } catch (...) {
    return -1;  // matches no version: 412
  }
}

Reply json_reply(int status, Json body, std::optional<int64_t> etag) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  r.etag_version = etag;
  return r;
}

Result<PageRequest> page_request(const Api& api, const Call& call) {
  PageRequest p;
  if (auto l = call.req.query.find("limit"); l != call.req.query.end()) {
    int v = 0;
    auto [ptr, ec] = std::from_chars(l->second.data(), l->second.data() + l->second.size(), v);
    if (ec != std::errc() || ptr != l->second.data() + l->second.size() || v < 1 ||
        v > api.limits().max_page)
      return fail(Error::invalid(fmt::format("limit must be 1 to {}", api.limits().max_page)));
    p.limit = v;
  }
  if (auto a = call.req.query.find("after"); a != call.req.query.end()) {
    if (a->second.size() > 64) return fail(Error::invalid("after is not a valid cursor"));
    p.after = a->second;
  }
  return p;
}

Result<int64_t> int_param(const Call& call, const std::string& name, int64_t min, int64_t max,
                          int64_t fallback) {
  auto it = call.req.query.find(name);
  if (it == call.req.query.end()) return fallback;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || end != it->second.data() + it->second.size() || v < min || v > max)
    return fail(Error::invalid(fmt::format("{} must be an integer from {} to {}", name, min, max)));
  return v;
}

Result<std::optional<std::chrono::steady_clock::time_point>> hold_deadline(const Call& call) {
  using Steady = std::chrono::steady_clock;
  if (call.req.hold_until) {
    if (*call.req.hold_until <= Steady::now()) return std::nullopt;
    return *call.req.hold_until;
  }
  const int64_t wait = GP_TRY(int_param(call, "wait", 0, kMaxHoldSeconds, 0));
  if (wait == 0) return std::nullopt;
  return Steady::now() + std::chrono::seconds(wait);
}

Result<int64_t> time_param(const Call& call, const std::string& name, int64_t fallback) {
  auto it = call.req.query.find(name);
  if (it == call.req.query.end()) return fallback;
  std::string v = it->second;
  if (v.size() == 10) v += "T00:00:00Z";
  TimePoint tp;
  if (!parse_rfc3339(v, &tp))
    return fail(Error::invalid(
        fmt::format("{} must be an RFC 3339 time or a date (YYYY-MM-DD, UTC)", name)));
  return to_unix_micros(tp);
}

ObjectReader body_reader(const Call& call, std::string_view what) {
  static const Json kEmpty = Json::object();
  return ObjectReader(call.body ? *call.body : kEmpty, what);
}

Result<void> require(const Call& call, iam::Permission p, const iam::Scope& where) {
  switch (iam::authorize(call.who, p, where)) {
    case iam::Decision::kAllow:
      return ok();
    case iam::Decision::kHidden:
      return fail(Error::not_found("not found"));
    case iam::Decision::kDeny:
      break;
  }
  return fail(missing_permission(call.who, p));
}

Result<void> check_if_match(const Call& call, int64_t version) {
  return check_version(call.if_match(), version);
}

// One-time secrets (API key tokens, session tokens, node credentials) are shown in the first
// response only; a replayed response carries a placeholder, so the store never holds them.
Json redact_secrets(Json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (is_secret_field(it.key()) && it->is_string())
        *it = "(shown once, in the first response)";
      else
        *it = redact_secrets(std::move(*it));
    }
  } else if (j.is_array()) {
    for (auto& v : j) v = redact_secrets(std::move(v));
  }
  return j;
}

Result<Reply> ReadInSnapshot::operator()(Api& api, Call& call) const {
  Result<Reply> out = fail(Error::internal("no reply"));
  auto r = api.store().read([&](store::Tx& tx) -> Result<void> {
    out = fn(api, call, tx);
    return ok();
  });
  if (!r) return fail(r.error());
  return out;
}

Handler read_tx(TxHandler fn) { return ReadInSnapshot{std::move(fn)}; }

Handler serialized_tx(TxHandler fn) {
  return [fn = std::move(fn)](Api& api, Call& call) -> Result<Reply> {
    Result<Reply> out = fail(Error::internal("no reply"));
    auto r = api.store().write([&](store::Tx& tx) -> Result<void> {
      // A follower's scheduler is not kept current by its own writes: read it afresh.
      if (!api.leader()) api.allocs().invalidate();
      out = fn(api, call, tx);
      return ok();
    });
    if (!r) return fail(r.error());
    return out;
  };
}

Handler write_tx(MutationHandler fn) {
  return [fn = std::move(fn)](Api& api, Call& call) { return run_mutation(api, call, fn); };
}

Result<Reply> run_mutation(Api& api, Call& call, const MutationHandler& fn) {
  std::optional<std::string> key;
  if (auto h = call.req.header("idempotency-key")) {
    if (h->empty() || h->size() > 128)
      return fail(Error::invalid("Idempotency-Key must be 1 to 128 characters"));
    key = std::string(*h);
  }
  std::string principal = call.who.authenticated() ? call.who.id : "anonymous";
  // What a retry with the same key must repeat.
  const std::string req_hash = key ? hex_encode(sha256(fmt::format("{}\n{}\n{}", call.req.method,
                                                                   call.req.path, call.req.body)))
                                   : std::string();
  Reply out;
  std::function<std::string()> render_body;
  bool replayed = false;
  bool body_done = false;
  auto written = api.store().write([&](store::Tx& tx) -> Result<void> {
    api.allocs().begin();
    auto r = [&]() -> Result<void> {
      if (key) {
        if (auto earlier = GP_TRY(store::find_idempotent_reply(tx, principal, *key))) {
          if (earlier->request_hash != req_hash)
            return fail(ErrorCode::kUnprocessable,
                        "Idempotency-Key was already used with a different request");
          out.status = earlier->status;
          out.raw = std::move(earlier->body);
          replayed = true;
          return ok();
        }
      }
      Mutation m = GP_TRY(fn(api, call, tx));
      audit::Entry e;
      e.actor = m.actor.value_or(principal);
      e.tenant_id = m.tenant_id ? *m.tenant_id : call.tenant ? call.tenant->id : "";
      e.action = call.route->action;
      e.resource = m.resource.empty() ? call.req.path : m.resource;
      e.outcome = "success";
      e.request_id = call.request_id;
      e.source = call.req.remote;
      e.detail = std::move(m.detail);
      if (m.audited) GP_TRY_VOID(api.audit().append(tx, e));
      out = std::move(m.reply);
      render_body = std::move(m.render_body);
      if (key) {
        if (render_body) out.raw = std::exchange(render_body, nullptr)();
        GP_TRY_VOID(store::record_idempotent_reply(
            tx, {.principal = principal,
                 .key = *key,
                 .method = call.req.method,
                 .path = call.req.path,
                 .reply = {.request_hash = req_hash,
                           .status = out.status,
                           .body = out.raw ? *out.raw : redact_secrets(out.body).dump()},
                 .created_at = to_unix_micros(api.clock().now())}));
      }
      return ok();
    }();
    // The scheduler changed in memory but the transaction will roll back: rebuild it.
    if (!r && api.allocs().changed()) api.allocs().invalidate();
    body_done = r.has_value();
    return r;
  });
  if (!written) {
    if (body_done) api.allocs().invalidate();  // the commit itself failed
    return fail(written.error());
  }
  if (replayed) out.headers.emplace_back("Idempotent-Replayed", "true");
  if (render_body) out.raw = render_body();
  return out;
}

}  // namespace gp::api
