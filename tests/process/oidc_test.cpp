// OIDC login end to end: `gpuplane serve --oidc-config` against a real OpenID provider (the npm
// package oidc-provider, tests/support/oidc_provider.mjs) on loopback. A cookie-keeping client
// walks the authorization code flow the way a browser does; the token-exchange endpoint is fed
// real tokens from the provider, altered ones, another client's and expired ones.
#include "iam/oidc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "common/crypto.h"
#include "process/process_util.h"

namespace gp::proc {
namespace {

const std::string kSecret = "gp-secret-1";
const std::string kOtherSecret = "other-secret-2";

// The provider as a child process.
class Idp {
 public:
  bool start(const TempDir& dir) {
    const char* src = std::getenv("GP_SOURCE_DIR");
    const std::string root = src ? src : ".";
    const std::string node = find_program("node");
    if (node.empty()) {
      ADD_FAILURE() << "node is not installed (scripts/setup.sh installs it)";
      return false;
    }
    if (!std::filesystem::exists(root + "/node_modules/oidc-provider")) {
      ADD_FAILURE() << "oidc-provider is not installed: run scripts/setup.sh (npm ci)";
      return false;
    }
    port_file_ = dir.str("idp-issuer");
    child_ = Child::spawn(node,
                          {root + "/tests/support/oidc_provider.mjs", "--port-file", port_file_,
                           "--client-secret", kSecret, "--other-secret", kOtherSecret},
                          {.stdout_path = dir.str("idp.out"), .stderr_path = dir.str("idp.err")});
    if (!child_) return false;
    for (int i = 0; i < 300 && issuer_.empty(); ++i) {
      issuer_ = read_file(port_file_);
      if (issuer_.empty()) std::this_thread::sleep_for(50ms);
      if (!child_->running()) break;
    }
    if (issuer_.empty())
      ADD_FAILURE() << "the OpenID provider did not start: " << child_->stderr_text();
    return !issuer_.empty();
  }
  const std::string& issuer() const { return issuer_; }
  void control(const std::string& target) {
    auto ep = *transport::parse_endpoint(issuer_);
    auto r = transport::http_request(ep, "POST", target, "", {});
    ASSERT_TRUE(r && r->status == 200) << target;
  }

 private:
  std::string port_file_, issuer_;
  std::optional<Child> child_;
};

// A client that keeps cookies per origin and follows redirects the way a browser does.
class Browser {
 public:
  struct Page {
    int status = 0;
    std::string url, location, body;
    std::vector<std::string> set_cookies;
  };

  Page get(const std::string& url, std::vector<std::pair<std::string, std::string>> headers = {}) {
    return request("GET", url, "", std::move(headers));
  }
  Page request(const std::string& method, const std::string& url, const std::string& body,
               std::vector<std::pair<std::string, std::string>> headers = {}) {
    const size_t path = url.find('/', url.find("://") + 3);
    const std::string origin = url.substr(0, path);
    auto ep = transport::parse_endpoint(origin);
    Page page;
    page.url = url;
    if (!ep) return page;
    std::string cookie;
    for (const auto& [k, v] : jar_[origin]) cookie += (cookie.empty() ? "" : "; ") + k + "=" + v;
    if (!cookie.empty()) headers.emplace_back("Cookie", cookie);
    auto r = transport::http_request(*ep, method, url.substr(path), body, headers);
    if (!r) return page;
    page.status = r->status;
    page.body = r->body;
    for (const auto& [k, v] : r->headers) {
      std::string name = k;
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      if (name == "location") page.location = v.starts_with("/") ? origin + v : v;
      if (name != "set-cookie") continue;
      page.set_cookies.push_back(v);
      const std::string pair = v.substr(0, v.find(';'));
      const std::string cname = pair.substr(0, pair.find('=')),
                        value = pair.substr(pair.find('=') + 1);
      if (value.empty() || v.find("Max-Age=0") != std::string::npos ||
          v.find("expires=Thu, 01 Jan 1970") != std::string::npos)
        jar_[origin].erase(cname);
      else
        jar_[origin][cname] = value;
    }
    return page;
  }
  // Follows redirects from `url` until one leaves for `stop_prefix` (not fetched) or a page
  // is not a redirect.
  Page follow(std::string url, const std::string& stop_prefix) {
    for (int hops = 0; hops < 10; ++hops) {
      Page p = get(url);
      if (p.status < 300 || p.status > 399 || p.location.starts_with(stop_prefix)) return p;
      url = p.location;
    }
    return {};
  }
  std::string cookie(const std::string& origin, const std::string& name) {
    auto it = jar_[origin].find(name);
    return it == jar_[origin].end() ? "" : it->second;
  }

 private:
  std::map<std::string, std::map<std::string, std::string>> jar_;
};

std::string query_value(const std::string& url, const std::string& key) {
  size_t at = url.find("?" + key + "=");
  if (at == std::string::npos) at = url.find("&" + key + "=");
  if (at == std::string::npos) return "";
  size_t start = at + key.size() + 2, end = url.find('&', start);
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

class Oidc : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    idp_ = new Idp();
    if (!idp_->start(*dir_)) return;
    std::ofstream(dir_->str("client-secret")) << kSecret << "\n";
    auto rules = Json::array({
        {{"claim", "groups"},
         {"value", "acme-admins"},
         {"tenant", "acme"},
         {"role", "tenant-admin"}},
        {{"claim", "groups"},
         {"value", "acme-ml"},
         {"tenant", "acme"},
         {"project", "training"},
         {"role", "project-member"}},
        {{"claim", "groups"},
         {"value", "beta-admins"},
         {"tenant", "beta"},
         {"role", "tenant-admin"}},
    });
    Json provider = {{"name", "test"},
                     {"display_name", "Test IdP"},
                     {"issuer", idp_->issuer()},
                     {"client_id", "gpuplane"},
                     {"client_secret_file", dir_->str("client-secret")},
                     {"scopes", {"openid", "email", "profile", "groups"}},
                     {"clock_skew_seconds", 0},
                     {"rules", rules}};
    Json es = provider;
    es["name"] = "test-es";
    es["client_id"] = "gpuplane-es";
    std::ofstream(dir_->str("oidc.json")) << Json{{"providers", {provider, es}}}.dump(2);
    server_ = new Server(dir_->path() / "data", {"--oidc-config", dir_->str("oidc.json")});
    if (!server_->start()) return;
    for (const char* t : {"acme", "beta"})
      ASSERT_EQ(server_->admin_request("POST", "/v1/tenants", {{"name", t}})->status, 201);
    ASSERT_EQ(
        server_->admin_request("POST", "/v1/tenants/acme/projects", {{"name", "training"}})->status,
        201);
    ready_ = true;
  }
  static void TearDownTestSuite() {
    delete server_;
    delete idp_;
    delete dir_;
  }
  void SetUp() override {
    if (!ready_) GTEST_FAIL() << "the provider or the server did not start";
  }

  std::string gp() const { return server_->endpoint(); }
  // A browser login as `account` up to the callback's answer.
  Browser::Page browser_login(Browser& b, const std::string& account,
                              const std::string& return_to = "/console/") {
    idp_->control("/test/next-login?account=" + account);
    return b.follow(gp() + "/v1/auth/oidc/test/login?return_to=" + return_to, gp() + "/console/");
  }
  Json whoami(const std::vector<std::pair<std::string, std::string>>& headers) {
    auto r = server_->request("GET", "/v1/whoami", nullptr, "", 10000, headers);
    if (!r || r->status != 200) return nullptr;
    return Json::parse(r->body);
  }
  // An ID token the provider issues to `client` for `account` (the test plays the client).
  std::string provider_token(const std::string& client, const std::string& secret,
                             const std::string& account) {
    idp_->control("/test/next-login?account=" + account);
    Browser rp;
    auto pkce = iam::oidc::make_pkce(system_random());
    const std::string redirect = "http://127.0.0.1:9/cb";
    auto page = rp.follow(idp_->issuer() + "/auth?client_id=" + client +
                              "&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&response_type=code"
                              "&scope=openid%20email%20profile%20groups&state=s1&nonce=n1"
                              "&code_challenge=" +
                              pkce.challenge + "&code_challenge_method=S256",
                          redirect);
    const std::string code = query_value(page.location, "code");
    EXPECT_FALSE(code.empty()) << page.status << " " << page.location << " " << page.body;
    auto ep = *transport::parse_endpoint(idp_->issuer());
    auto r = transport::http_request(
        ep, "POST", "/token",
        "grant_type=authorization_code&code=" + code +
            "&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&code_verifier=" + pkce.verifier,
        {{"Content-Type", "application/x-www-form-urlencoded"},
         {"Authorization", "Basic " + base64_std(client + ":" + secret)}});
    if (!r || r->status != 200) {
      ADD_FAILURE() << "token endpoint: " << (r ? r->body : r.error().message);
      return "";
    }
    return Json::parse(r->body).value("id_token", "");
  }
  static std::string base64_std(std::string s) {
    std::string b = base64url_encode(s);
    std::replace(b.begin(), b.end(), '-', '+');
    std::replace(b.begin(), b.end(), '_', '/');
    while (b.size() % 4) b += '=';
    return b;
  }
  Result<transport::ClientResponse> exchange(const std::string& provider,
                                             const std::string& token) {
    return server_->request("POST", "/v1/auth/oidc/" + provider + "/token", {{"id_token", token}});
  }

  static inline TempDir* dir_ = nullptr;
  static inline Idp* idp_ = nullptr;
  static inline Server* server_ = nullptr;
  static inline bool ready_ = false;
};

TEST_F(Oidc, BrowserLoginMapsGroupsToATenantRoleAndGuardsWritesWithCsrf) {
  auto providers = server_->request("GET", "/v1/auth/oidc/providers");
  ASSERT_TRUE(providers);
  EXPECT_EQ(Json::parse(providers->body)["items"][0]["login_url"], "/v1/auth/oidc/test/login");

  Browser b;
  auto done = browser_login(b, "alice");
  ASSERT_EQ(done.status, 302) << done.url << " " << done.body;
  EXPECT_EQ(done.location, gp() + "/console/");
  const std::string session = b.cookie(gp(), "gp_session"), csrf = b.cookie(gp(), "gp_csrf");
  ASSERT_TRUE(session.starts_with("ses_")) << session;
  ASSERT_FALSE(csrf.empty());
  bool http_only = false;
  for (const auto& c : done.set_cookies)
    if (c.starts_with("gp_session="))
      http_only =
          c.find("HttpOnly") != std::string::npos && c.find("SameSite=Lax") != std::string::npos;
  EXPECT_TRUE(http_only);

  const std::pair<std::string, std::string> cookie{"Cookie", "gp_session=" + session};
  Json me = whoami({cookie});
  ASSERT_TRUE(me.is_object());
  EXPECT_EQ(me["name"], "alice");
  ASSERT_EQ(me["role_bindings"].size(), 1u);
  EXPECT_EQ(me["role_bindings"][0]["role"], "tenant-admin");
  // The tenant's binding list says the provider's rules made it.
  auto bindings =
      server_->request("GET", "/v1/tenants/acme/role-bindings", nullptr, "", 10000, {cookie});
  ASSERT_TRUE(bindings);
  ASSERT_EQ(bindings->status, 200) << bindings->body;
  bool from_provider = false;
  const Json listed = Json::parse(bindings->body);
  for (const auto& b : listed["items"])
    from_provider |= b["subject_id"] == me["id"] && b["source"] == "oidc:test";
  EXPECT_TRUE(from_provider) << bindings->body;

  // A write on the cookie alone (what a forged cross-site form sends) is refused.
  auto forged = server_->request("POST", "/v1/tenants/acme/projects", {{"name", "inference"}}, "",
                                 10000, {cookie});
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 403) << forged->body;
  EXPECT_NE(forged->body.find("X-CSRF-Token"), std::string::npos);
  auto wrong = server_->request("POST", "/v1/tenants/acme/projects", {{"name", "inference"}}, "",
                                10000, {cookie, {"X-CSRF-Token", csrf + "x"}});
  EXPECT_EQ(wrong->status, 403);
  auto made = server_->request("POST", "/v1/tenants/acme/projects", {{"name", "inference"}}, "",
                               10000, {cookie, {"X-CSRF-Token", csrf}});
  EXPECT_EQ(made->status, 201) << made->body;
  // Alice reaches nothing of beta.
  auto other = server_->request("GET", "/v1/tenants/beta/projects", nullptr, "", 10000, {cookie});
  EXPECT_EQ(other->status, 404);

  // The login is audited with the provider and subject; a second login reuses the user.
  auto audit = list_all(*server_, "/v1/audit", "&action=session.create&outcome=success");
  ASSERT_TRUE(audit);
  bool seen = false;
  for (const auto& r : *audit)
    seen |= r["detail"].value("provider", "") == "test" && r["actor"] == me["id"];
  EXPECT_TRUE(seen);
  Browser again;
  ASSERT_EQ(browser_login(again, "alice").status, 302);
  EXPECT_EQ(whoami({{"Cookie", "gp_session=" + again.cookie(gp(), "gp_session")}})["id"], me["id"]);

  // Logout ends the session and clears the cookies.
  auto out = server_->request("POST", "/v1/auth/logout", nullptr, "", 10000,
                              {cookie, {"X-CSRF-Token", csrf}});
  ASSERT_EQ(out->status, 204) << out->body;
  EXPECT_TRUE(whoami({cookie}).is_null());
}

TEST_F(Oidc, ProjectRulesAndUnmappedIdentities) {
  Browser dave;
  auto page = browser_login(dave, "dave");
  ASSERT_EQ(page.status, 302);
  ASSERT_FALSE(page.location.contains("login_error")) << page.location;
  Json me = whoami({{"Cookie", "gp_session=" + dave.cookie(gp(), "gp_session")}});
  ASSERT_TRUE(me.is_object());
  ASSERT_EQ(me["role_bindings"].size(), 1u);
  EXPECT_EQ(me["role_bindings"][0]["role"], "project-member");
  EXPECT_FALSE(me["role_bindings"][0]["project_id"].is_null());

  // A refused login the console began goes back to the console's login page with the reason;
  // it is audited as denied.
  Browser carol;
  auto refused = browser_login(carol, "carol");
  EXPECT_EQ(refused.status, 302) << refused.body;
  EXPECT_TRUE(refused.location.starts_with(gp() + "/console/login?login_error="))
      << refused.location;
  EXPECT_NE(refused.location.find("no%20mapping%20rule"), std::string::npos) << refused.location;
  EXPECT_TRUE(carol.cookie(gp(), "gp_session").empty());
  auto denied = list_all(*server_, "/v1/audit", "&action=session.create&outcome=denied");
  ASSERT_TRUE(denied);
  bool seen = false;
  for (const auto& r : *denied)
    seen |= r["detail"].dump().find("no mapping rule") != std::string::npos;
  EXPECT_TRUE(seen);
}

TEST_F(Oidc, CallbackWorksOnceAndOnlyInTheBrowserThatBeganTheLogin) {
  idp_->control("/test/next-login?account=bob");
  Browser b;
  // Stop before the callback: hold its URL.
  auto at_callback =
      b.follow(gp() + "/v1/auth/oidc/test/login", gp() + "/v1/auth/oidc/test/callback");
  ASSERT_TRUE(at_callback.location.starts_with(gp() + "/v1/auth/oidc/test/callback"))
      << at_callback.location;
  const std::string callback = at_callback.location;
  EXPECT_EQ(query_value(callback, "iss").empty(), false);

  Browser attacker_victim;  // someone else's browser given the link (login CSRF)
  auto foreign = attacker_victim.get(callback);
  EXPECT_EQ(foreign.status, 401);
  EXPECT_NE(foreign.body.find("another browser"), std::string::npos) << foreign.body;

  Browser copy = b;
  auto ok = b.get(callback);
  ASSERT_EQ(ok.status, 302) << ok.body;
  EXPECT_EQ(ok.location, gp() + "/");
  auto replay = copy.get(callback);
  EXPECT_EQ(replay.status, 401);
  EXPECT_NE(replay.body.find("already used"), std::string::npos) << replay.body;

  // Where a login may return to: only this server's paths.
  for (const char* to : {"//evil.example.com/", "https://evil.example.com/", "/%0d%0aX:y"}) {
    auto r = server_->request("GET", std::string("/v1/auth/oidc/test/login?return_to=") + to);
    EXPECT_EQ(r->status, 400) << to;
  }
  EXPECT_EQ(server_->request("GET", "/v1/auth/oidc/nope/login")->status, 404);
}

TEST_F(Oidc, TokenExchangeRefusesForgedForeignAndExpiredTokens) {
  const std::string token = provider_token("gpuplane", kSecret, "bob");
  ASSERT_FALSE(token.empty());
  auto ok = exchange("test", token);
  ASSERT_EQ(ok->status, 201) << ok->body;
  const std::string session = Json::parse(ok->body)["token"];
  EXPECT_EQ(whoami({{"Authorization", "Bearer " + session}})["name"], "bob");

  // ES256 from the same provider (its EC key).
  auto es = exchange("test-es", provider_token("gpuplane-es", kSecret, "bob"));
  EXPECT_EQ(es->status, 201) << es->body;

  auto reason = [&](const std::string& provider, const std::string& t) {
    auto r = exchange(provider, t);
    EXPECT_EQ(r->status, 401) << r->body;
    return Json::parse(r->body).value("detail", "");
  };
  // Forged: the payload changed to claim alice's admin group, the provider's signature kept.
  const size_t dot1 = token.find('.'), dot2 = token.rfind('.');
  Json payload = Json::parse(*base64url_decode(token.substr(dot1 + 1, dot2 - dot1 - 1)));
  payload["groups"] = {"acme-admins"};
  payload["sub"] = "alice";
  const std::string forged =
      token.substr(0, dot1 + 1) + base64url_encode(payload.dump()) + token.substr(dot2);
  EXPECT_NE(reason("test", forged).find("signature does not verify"), std::string::npos);
  // Forged: signed by a key of the forger's under the provider's kid.
  auto resigned = iam::oidc::sign_jwt(payload, *iam::oidc::new_signing_key("RS256"),
                                      *iam::oidc::token_kid(token));
  ASSERT_TRUE(resigned);
  EXPECT_NE(reason("test", *resigned).find("signature does not verify"), std::string::npos);
  // "none".
  const std::string none =
      base64url_encode(R"({"alg":"none"})") + "." + base64url_encode(payload.dump()) + ".";
  EXPECT_NE(reason("test", none).find("not accepted"), std::string::npos);
  // Another client's token (the wrong audience).
  EXPECT_NE(reason("test", provider_token("other", kOtherSecret, "alice")).find("audience"),
            std::string::npos);
  // Expired: the provider issues a one-second token; the configuration allows no skew.
  idp_->control("/test/id-token-ttl?seconds=1");
  const std::string short_lived = provider_token("gpuplane", kSecret, "alice");
  idp_->control("/test/id-token-ttl?seconds=3600");
  std::this_thread::sleep_for(2100ms);
  EXPECT_NE(reason("test", short_lived).find("expired"), std::string::npos);
  // Garbage in, a clear 400 or 401 out, nothing created.
  auto junk = server_->request("POST", "/v1/auth/oidc/test/token", {{"id_token", 5}});
  EXPECT_EQ(junk->status, 400);
  auto extra =
      server_->request("POST", "/v1/auth/oidc/test/token", {{"id_token", token}, {"admin", true}});
  EXPECT_EQ(extra->status, 400);
}

}  // namespace
}  // namespace gp::proc
