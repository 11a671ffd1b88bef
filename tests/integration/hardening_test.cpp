// Issue 24 finding 7: responses that carry a secret are never cached, and the OIDC logins an
// anonymous caller can begin are capped.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "integration/harness.h"

namespace gp::it {
namespace {

const std::string kHardeningPassword = "a long enough passphrase";

TEST(Hardening, EveryResponseCarryingATokenOrCredentialSaysNoStore) {
  TestServer s;
  auto no_store = [](const Resp& r) { return r.header("Cache-Control") == "no-store"; };
  // A tenant with its first admin's API key token.
  auto tenant = s.request("POST", "/v1/tenants",
                          {{"name", "acme"}, {"admin", {{"username", "root"}}}}, s.admin_token());
  ASSERT_EQ(tenant.status, 201) << tenant.raw;
  ASSERT_TRUE(tenant.body.at("admin").contains("token"));
  EXPECT_TRUE(no_store(tenant)) << "tenant create";
  const std::string token = tenant.body.at("admin").at("token");
  // An API key.
  auto user = s.create_user(token, "acme", "carol", kHardeningPassword);
  auto key = s.request("POST", "/v1/tenants/acme/api-keys",
                       {{"owner_kind", "user"}, {"owner_id", user.at("id")}}, token);
  ASSERT_EQ(key.status, 201);
  EXPECT_TRUE(no_store(key)) << "api key create";
  // A session token, and a browser session's CSRF token.
  auto login = s.request("POST", "/v1/auth/login",
                         {{"username", "acme/carol"}, {"password", kHardeningPassword}});
  ASSERT_EQ(login.status, 201);
  ASSERT_TRUE(login.body.contains("token"));
  EXPECT_TRUE(no_store(login)) << "login";
  auto browser =
      s.request("POST", "/v1/auth/login",
                {{"username", "acme/carol"}, {"password", kHardeningPassword}, {"cookie", true}});
  ASSERT_EQ(browser.status, 201);
  EXPECT_TRUE(no_store(browser)) << "cookie login";
  // A join token and a node credential.
  auto join = s.request("POST", "/v1/join-tokens", Json::object(), s.admin_token());
  ASSERT_EQ(join.status, 201);
  EXPECT_TRUE(no_store(join)) << "join token";
  auto enrolled =
      s.request("POST", "/v1/agent/enroll",
                {{"join_token", join.body.at("token")}, {"inventory", h200_inventory("n1", 1)}});
  ASSERT_EQ(enrolled.status, 201);
  EXPECT_TRUE(no_store(enrolled)) << "enrolment";
  // Exactly one Cache-Control header each time.
  int headers = 0;
  for (const auto& [k, v] : browser.headers) headers += k == "Cache-Control";
  EXPECT_EQ(headers, 1);
  // Responses without secrets are left alone.
  EXPECT_FALSE(s.request("GET", "/v1/tenants/acme", nullptr, token).has_header("Cache-Control"));
}

// An identity provider that answers discovery only: enough to begin logins.
iam::oidc::Fetch discovery_only_idp(const std::string& issuer) {
  return [issuer](const std::string&, const std::string& url, const std::string&,
                  const std::vector<std::pair<std::string, std::string>>&,
                  const std::string&) -> Result<iam::oidc::FetchResult> {
    if (url != issuer + "/.well-known/openid-configuration")
      return iam::oidc::FetchResult{404, "{}"};
    Json doc = {{"issuer", issuer},
                {"authorization_endpoint", issuer + "/auth"},
                {"token_endpoint", issuer + "/token"},
                {"jwks_uri", issuer + "/jwks"}};
    return iam::oidc::FetchResult{200, doc.dump()};
  };
}

iam::oidc::ProviderConfig capped_provider(const std::string& name, const std::string& issuer) {
  iam::oidc::ProviderConfig c;
  c.name = name;
  c.display_name = name;
  c.issuer = issuer;
  c.client_id = "gpuplane";
  c.client_secret = "secret";
  c.redirect_uri = "https://gpuplane.example.com/v1/auth/oidc/" + name + "/callback";
  return c;
}

TEST(Hardening, OidcLoginsInFlightAreCappedPerProvider) {
  api::Limits limits;
  limits.max_oidc_logins_in_flight = 3;
  TestServer s(limits);
  const std::string issuer = "https://idp.example.com";
  s.api().set_oidc({capped_provider("corp", issuer), capped_provider("partner", issuer)},
                   discovery_only_idp(issuer));
  auto begin = [&](const std::string& name) {
    return s.request("GET", "/v1/auth/oidc/" + name + "/login");
  };
  auto stored = [&](const std::string& name) {
    int64_t n = -1;
    auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
      auto row =
          GP_TRY(tx.query_one("SELECT COUNT(*) FROM oidc_logins WHERE provider = ?", {name}));
      n = row->integer(0);
      return ok();
    });
    EXPECT_TRUE(r);
    return n;
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(begin("corp").status, 302) << i;
  s.clock().advance(std::chrono::minutes(4));
  // Full: refused with a 429 that says when to come back (when the oldest login expires).
  for (int i = 0; i < 5; ++i) {
    auto full = begin("corp");
    ASSERT_TRUE(IsProblem(full, 429, "rate_limited")) << full.raw;
    EXPECT_EQ(full.header("Retry-After"), "360") << full.raw;
    EXPECT_NE(full.body.value("detail", "").find("in flight"), std::string::npos) << full.raw;
  }
  EXPECT_EQ(stored("corp"), 3);
  // Another provider has its own room.
  EXPECT_EQ(begin("partner").status, 302);
  // Once the logins expire there is room again.
  s.clock().advance(std::chrono::minutes(6) + std::chrono::seconds(1));
  EXPECT_EQ(begin("corp").status, 302);
  EXPECT_EQ(stored("corp"), 1);
}

}  // namespace
}  // namespace gp::it
