// OpenID Connect login (docs/oidc.md): the authorization code flow with PKCE for browsers
// (login redirects to the provider; the callback redeems the code, verifies the ID token, maps
// its claims to a user, a tenant and roles, and sets the session cookies), and the exchange of
// an ID token the caller obtained itself for a session token (the CLI, automation).
#include <fmt/format.h>

#include "api/client_key.h"
#include "api/router.h"
#include "common/crypto.h"
#include "common/url.h"

namespace gp::api {

void Api::set_oidc(std::vector<iam::oidc::ProviderConfig> providers,
                   const iam::oidc::Fetch& fetch) {
  oidc_.clear();
  for (auto& p : providers)
    oidc_.push_back(std::make_unique<iam::oidc::Provider>(std::move(p), fetch));
}

iam::oidc::Provider* Api::oidc_provider(std::string_view name) const {
  for (const auto& p : oidc_)
    if (p->config().name == name) return p.get();
  return nullptr;
}

namespace {

constexpr std::string_view kLoginCookie = "gp_oidc";  // binds a login to the browser that began it
constexpr auto kLoginTtl = std::chrono::minutes(10);

Result<iam::oidc::Provider*> provider_of(Api& api, const Call& call) {
  auto* p = api.oidc_provider(call.param("provider"));
  if (!p)
    return fail(Error::not_found(
        fmt::format("no identity provider '{}'", call.param("provider").substr(0, 63))));
  return p;
}

std::optional<std::string> query(const Call& call, const char* key) {
  auto it = call.req.query.find(key);
  if (it == call.req.query.end()) return std::nullopt;
  return it->second;
}

// Only paths of this server: an open redirect would hand the session to another site.
Result<std::string> return_path(const Call& call) {
  std::string to = query(call, "return_to").value_or("/");
  if (to.empty() || to.size() > 512 || to[0] != '/' || to.starts_with("//") ||
      to.find('\\') != std::string::npos ||
      std::any_of(to.begin(), to.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return fail(Error::invalid("return_to must be a path on this server, such as /console/"));
  return to;
}

// The callback URL the provider sends the browser back to: configured, or this server's own
// as the browser addressed it (the provider accepts only the redirect URIs registered there).
Result<std::string> redirect_uri(const Api& api, const Call& call,
                                 const iam::oidc::ProviderConfig& config) {
  if (!config.redirect_uri.empty()) return config.redirect_uri;
  auto host = call.req.header("host");
  if (!host || host->empty() || host->size() > 255 ||
      !std::all_of(host->begin(), host->end(), [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
      }))
    return fail(Error::invalid("a login needs a valid Host header (or a configured redirect_uri)"));
  return fmt::format("{}://{}/v1/auth/oidc/{}/callback", api.isolation().api_tls ? "https" : "http",
                     *host, config.name);
}

std::string login_cookie(const Api& api, std::string_view provider, std::string_view value,
                         int64_t max_age) {
  return fmt::format("{}={}; Path=/v1/auth/oidc/{}; Max-Age={}; HttpOnly; SameSite=Lax{}",
                     kLoginCookie, value, provider, max_age,
                     api.isolation().api_tls ? "; Secure" : "");
}

// Refuses an address that keeps failing logins (count_failure counts the failures).
Result<void> check_throttle(Api& api, Call& call) {
  Throttles& t = api.throttles();
  const std::string key = throttle_key(call.req);
  if (auto v = t.auth_failures.check(key, api.clock().now()); !v.allowed) {
    Error e = throttled(call, v, "failed authentications from this address");
    if (t.audit_throttled.take(key, api.clock().now()).allowed)
      audit_failure(api, call, call.route, "throttled", e);
    return fail(e);
  }
  return ok();
}
template <typename T>
Result<T> count_failure(Api& api, const Call& call, Result<T> r) {
  if (!r && (r.error().code == ErrorCode::kUnauthenticated ||
             r.error().code == ErrorCode::kPermissionDenied))
    api.throttles().auth_failures.take(throttle_key(call.req), api.clock().now());
  return r;
}

// Maps verified claims to the user and signs it in: the user, its managed bindings and the
// session in one audited transaction.
Result<Reply> sign_in(Api& api, Call& call, iam::oidc::Provider& provider, const Json& claims,
                      bool cookie, std::optional<std::string> redirect_to) {
  auto identity =
      GP_TRY(count_failure(api, call, iam::oidc::map_claims(provider.config(), claims)));
  const std::string source = "oidc:" + provider.config().name;
  return run_mutation(api, call, [&](Api& api, Call&, store::Tx& tx) -> Result<Mutation> {
    const std::string user_id =
        GP_TRY(tenancy::sync_external_user(tx, api.env(), identity, source));
    Mutation m = GP_TRY(login_session(api, tx, user_id, cookie));
    Json grants = Json::array();
    for (const auto& g : identity.grants)
      grants.push_back(
          {{"role", iam::role_name(g.role)}, {"tenant", g.tenant}, {"project", g.project}});
    m.detail = {
        {"provider", provider.config().name}, {"subject", identity.subject}, {"grants", grants}};
    if (redirect_to) {
      m.reply.status = 302;
      m.reply.body = nullptr;
      m.reply.headers.emplace_back("Location", *redirect_to);
      m.reply.headers.emplace_back("Set-Cookie",
                                   login_cookie(api, provider.config().name, "", 0));  // used up
    }
    return m;
  });
}

Result<Reply> begin_login(Api& api, Call& call) {
  auto* provider = GP_TRY(provider_of(api, call));
  const std::string to = GP_TRY(return_path(call));
  const std::string redirect = GP_TRY(redirect_uri(api, call, provider->config()));
  const std::string state = base64url_encode(api.random().bytes(32));
  const std::string nonce = base64url_encode(api.random().bytes(32));
  const auto pkce = iam::oidc::make_pkce(api.random());
  const std::string url =
      GP_TRY(provider->authorization_url(redirect, state, nonce, pkce.challenge));
  const int64_t now = to_unix_micros(api.clock().now());
  const iam::oidc::PendingLogin login{
      provider->config().name,
      nonce,
      pkce.verifier,
      redirect,
      to,
      now + std::chrono::duration_cast<std::chrono::microseconds>(kLoginTtl).count()};
  std::optional<Duration> full;
  GP_TRY_VOID(api.store().write([&](store::Tx& tx) -> Result<void> {
    full = GP_TRY(iam::oidc::save_pending_login(tx, state, login, now,
                                                api.limits().max_oidc_logins_in_flight));
    return ok();
  }));
  if (full) {
    // Logins are begun without credentials: the cap bounds what anonymous callers can store.
    call.retry_after = std::max<std::chrono::milliseconds>(
        std::chrono::seconds(1), std::chrono::ceil<std::chrono::milliseconds>(*full));
    return fail(Error{ErrorCode::kResourceExhausted,
                      fmt::format("too many logins with '{}' are in flight ({}, the most this "
                                  "server keeps); retry after {} s",
                                  provider->config().name, api.limits().max_oidc_logins_in_flight,
                                  (call.retry_after.count() + 999) / 1000)});
  }
  Reply r;
  r.status = 302;
  r.body = nullptr;
  r.headers = {{"Location", url},
               {"Set-Cookie",
                login_cookie(api, provider->config().name, state,
                             std::chrono::duration_cast<std::chrono::seconds>(kLoginTtl).count())},
               {"Cache-Control", "no-store"}};
  return r;
}

using Pending = iam::oidc::PendingLogin;
using Refuse = std::function<Result<Reply>(std::string)>;
// The callback past its state check: the provider's answer, the code, the ID token.
Result<Reply> complete_login(Api& api, Call& call, iam::oidc::Provider& provider,
                             const Pending& pending, const Refuse& refuse) {
  if (pending.expires_at < to_unix_micros(api.clock().now()))
    return refuse("the login took too long; start it again");
  if (auto err = query(call, "error"))
    return refuse(fmt::format("the identity provider refused the login: {}{}", err->substr(0, 64),
                              query(call, "error_description")
                                  ? ": " + query(call, "error_description")->substr(0, 300)
                                  : ""));
  // RFC 9207: a provider that names itself must be the one this login went to.
  if (auto iss = query(call, "iss"); iss && *iss != provider.config().issuer)
    return refuse("the callback names another issuer than this login's provider");
  const auto code = query(call, "code");
  if (!code || code->empty() || code->size() > 2048)
    return fail(Error::invalid("the callback carries no code"));
  auto claims =
      GP_TRY(count_failure(api, call,
                           provider.redeem(*code, pending.redirect_uri, pending.code_verifier,
                                           pending.nonce, api.clock())));
  return sign_in(api, call, provider, claims, true, pending.return_to);
}

Result<Reply> finish_login(Api& api, Call& call) {
  auto* provider = GP_TRY(provider_of(api, call));
  GP_TRY_VOID(check_throttle(api, call));
  const auto state = query(call, "state");
  if (!state || state->empty()) return fail(Error::invalid("the callback carries no state"));
  auto refuse = [&](std::string why) -> Result<Reply> {
    return count_failure(api, call, Result<Reply>(fail(Error::unauthenticated(std::move(why)))));
  };
  // Only in the browser that began it (no login CSRF: an attacker's callback URL is useless
  // elsewhere), and once.
  auto cookie = call.req.cookie(kLoginCookie);
  if (!cookie || !constant_time_equal(*cookie, *state))
    return refuse("this login was started in another browser (its gp_oidc cookie is missing)");
  std::optional<Pending> pending;
  GP_TRY_VOID(api.store().write([&](store::Tx& tx) -> Result<void> {
    pending = GP_TRY(iam::oidc::take_pending_login(tx, *state));
    return ok();
  }));
  if (!pending || pending->provider != provider->config().name)
    return refuse("unknown or already used login state; start the login again");
  auto signed_in = complete_login(api, call, *provider, *pending, refuse);
  if (signed_in || !pending->return_to.starts_with("/console/")) return signed_in;
  // A login the console began returns to its login page, which shows why (the refusal is
  // audited here, as the dispatcher would have).
  const Error& e = signed_in.error();
  const bool denial =
      e.code == ErrorCode::kUnauthenticated || e.code == ErrorCode::kPermissionDenied;
  audit_failure(api, call, call.route, denial ? "denied" : "rejected", e);
  Reply back;
  back.status = 302;
  back.body = nullptr;
  back.headers = {{"Location", "/console/login?login_error=" + percent_encode(e.message)},
                  {"Set-Cookie", login_cookie(api, provider->config().name, "", 0)},
                  {"Cache-Control", "no-store"}};
  return back;
}

Result<Reply> exchange_token(Api& api, Call& call) {
  auto* provider = GP_TRY(provider_of(api, call));
  auto r = body_reader(call, "token exchange");
  const std::string id_token = r.string("id_token", 16 << 10);
  GP_TRY_VOID(r.finish());
  GP_TRY_VOID(check_throttle(api, call));
  auto claims = GP_TRY(count_failure(api, call, provider->verify(id_token, api.clock().now())));
  return sign_in(api, call, *provider, claims, false, std::nullopt);
}

}  // namespace

std::vector<Route> oidc_routes() {
  std::vector<Route> routes;
  routes.push_back({.method = "GET",
                    .pattern = "/v1/auth/oidc/providers",
                    .action = "oidc.providers",
                    .access = Access::kPublic,
                    .handler = [](Api& api, Call&) -> Result<Reply> {
                      Json items = Json::array();
                      for (const auto& p : api.oidc_providers())
                        items.push_back({{"name", p->config().name},
                                         {"display_name", p->config().display_name},
                                         {"login_url", fmt::format("/v1/auth/oidc/{}/login",
                                                                   p->config().name)}});
                      return json_reply(200, {{"items", items}});
                    },
                    .summary = "The identity providers a user may log in with (for a login page).",
                    .response_schema = "OidcProviders"});
  routes.push_back({.method = "GET",
                    .pattern = "/v1/auth/oidc/{provider}/login",
                    .action = "oidc.login",
                    .access = Access::kPublic,
                    .handler = begin_login,
                    .query_params = {"return_to"},
                    .summary = "Begin a browser login: redirects (302) to the identity "
                               "provider with PKCE, state and nonce.",
                    .success_status = 302});
  routes.push_back({.method = "GET",
                    .pattern = "/v1/auth/oidc/{provider}/callback",
                    .action = "session.create",
                    .access = Access::kPublic,
                    .mutation = true,
                    .handler = finish_login,
                    .query_params = {"code", "state", "iss", "error", "error_description",
                                     "error_uri", "session_state", "scope"},
                    .summary =
                        "The identity provider's redirect back: redeems the code, verifies the ID "
                        "token, maps its claims to a user and roles, sets the session cookies and "
                        "redirects (302) to where the login began.",
                    .success_status = 302});
  routes.push_back({.method = "POST",
                    .pattern = "/v1/auth/oidc/{provider}/token",
                    .action = "session.create",
                    .access = Access::kPublic,
                    .mutation = true,
                    .handler = exchange_token,
                    .summary = "Exchange an ID token from the identity provider (issued to "
                               "this client) for a session token.",
                    .request_schema = "OidcTokenRequest",
                    .response_schema = "LoginResponse",
                    .success_status = 201});
  return routes;
}

}  // namespace gp::api
