// Rate limits over real sockets: a principal past its bucket gets 429 with Retry-After while
// another tenant is served; bad credentials throttle their address but not the valid
// credentials (users, node agents) sent from it; clients behind a trusted proxy count by their
// forwarded address; wrong passwords slow an account without locking the real user out;
// throttled requests do not flood the audit trail.
#include <gtest/gtest.h>

#include <set>

#include "integration/harness.h"

namespace gp::it {
namespace {

const std::string kPassword = "a long enough passphrase";

api::Limits limits(api::RateLimits rate) {
  api::Limits l;
  l.rate = rate;
  return l;
}

// The audit trail read from the store: the API itself may be throttled for this address.
std::vector<Json> audit_trail(TestServer& s) {
  std::vector<Json> out;
  auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
    for (const auto& rec : GP_TRY(s.api().audit().list(tx, {.limit = 10000})))
      out.push_back(audit::record_to_json(rec));
    return ok();
  });
  EXPECT_TRUE(r) << r.error().message;
  return out;
}

int64_t audit_count(TestServer& s) { return int64_t(audit_trail(s).size()); }

TEST(RateLimits, APrincipalPastItsBucketGets429WhileAnotherTenantIsServed) {
  TestServer s(limits({.per_principal = {.per_second = 0.5, .burst = 20}}));
  auto a = s.create_tenant("hammer", "hammer-admin");
  auto b = s.create_tenant("quiet", "quiet-admin");
  const std::string mine = "/v1/tenants/" + a.id;
  int served = 0;
  Resp refused;
  for (int i = 0; i < 40; ++i) {
    auto r = s.request("GET", mine, nullptr, a.admin_token);
    if (r.status != 200) {
      refused = r;
      break;
    }
    ++served;
  }
  // The harness spent some of the admin's bucket creating the tenant; never more than 20.
  EXPECT_GT(served, 10);
  EXPECT_LE(served, 20);
  ASSERT_TRUE(IsProblem(refused, 429, "rate_limited")) << refused.raw;
  EXPECT_EQ(refused.header("Retry-After"), "2") << refused.raw;  // one token at 0.5 per second
  EXPECT_NE(refused.body.value("detail", "").find(a.admin_user_id), std::string::npos)
      << refused.raw;
  // Throttled requests are not audited one by one.
  const int64_t before = audit_count(s);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(
        s.request("POST", mine + "/projects", {{"name", "p" + std::to_string(i)}}, a.admin_token)
            .status,
        429);
  EXPECT_EQ(audit_count(s), before);
  // The other tenant's principal has its own bucket.
  EXPECT_EQ(s.request("GET", "/v1/tenants/" + b.id, nullptr, b.admin_token).status, 200);
  // After Retry-After the hammering principal is served again.
  s.clock().advance(std::chrono::seconds(2));
  EXPECT_EQ(s.request("GET", mine, nullptr, a.admin_token).status, 200);
}

// Issue 24 finding 6: once an address had spent its failed-authentication budget, every
// request from it was refused before its credential was looked at, valid ones included.
TEST(RateLimits, BadTokensThrottleOnlyFailingCredentialsFromTheirAddress) {
  TestServer s(limits({.auth_failures_per_address = {.per_second = 0.1, .burst = 3}}));
  const std::string good = s.admin_token();
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(IsProblem(s.request("GET", "/v1/whoami", nullptr, "key_nope.guess"), 401)) << i;
  // Spent: a bad token from this address (all tests talk from 127.0.0.1) waits...
  auto throttled = s.request("GET", "/v1/whoami", nullptr, "key_nope.again");
  ASSERT_TRUE(IsProblem(throttled, 429, "rate_limited")) << throttled.raw;
  EXPECT_EQ(throttled.header("Retry-After"), "10");
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/whoami", nullptr, ""), 429));  // none at all too
  // ...and a valid one is served: it is judged by its own principal's bucket.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, good).status, 200);
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/whoami", nullptr, "key_nope.more"), 429));
  int throttled_records = 0, denied_records = 0;
  for (const auto& rec : audit_trail(s)) {
    throttled_records += rec.at("outcome") == "throttled";
    denied_records += rec.at("outcome") == "denied";
  }
  EXPECT_EQ(denied_records, 3);     // every failed authentication
  EXPECT_EQ(throttled_records, 1);  // the throttle, once a minute per address
  s.clock().advance(std::chrono::seconds(10));
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/whoami", nullptr, "key_nope.later"), 401));
}

// Issue 24 finding 6: anonymous failures from an address also stopped the node agents there
// (heartbeats answered 429, nodes then marked failed), and so did the per-address limit.
TEST(RateLimits, NodeAgentsAndUsersBehindABusyAddressAreServed) {
  TestServer s(limits({.per_address = {.per_second = 0.1, .burst = 5},
                       .auth_failures_per_address = {.per_second = 0.1, .burst = 3}}));
  auto join = s.request("POST", "/v1/join-tokens", Json::object(), s.admin_token());
  ASSERT_EQ(join.status, 201) << join.raw;
  auto enrolled = s.request(
      "POST", "/v1/agent/enroll",
      {{"join_token", join.body.at("token")}, {"inventory", h200_inventory("natted-node", 1)}});
  ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
  const std::string node_token = enrolled.body.at("credential");
  // One anonymous client at this address spends its failed-authentication budget and its
  // per-address budget.
  for (int i = 0; i < 6; ++i) s.request("GET", "/v1/whoami", nullptr, "key_nope.guess");
  for (int i = 0; i < 6; ++i) s.request("GET", "/healthz");
  ASSERT_EQ(s.request("GET", "/healthz").status, 429);
  ASSERT_EQ(s.request("GET", "/v1/whoami", nullptr, "key_nope.guess").status, 429);
  // The node's heartbeats and a user's requests from the same address go through.
  for (int i = 0; i < 5; ++i) {
    auto hb = s.request("POST", "/v1/agent/heartbeat", Json::object(), node_token);
    EXPECT_EQ(hb.status, 200) << hb.raw;
    EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, s.admin_token()).status, 200);
  }
}

// Issue 24 finding 6: behind a proxy every client had the proxy's address.
TEST(RateLimits, ClientsBehindATrustedProxyAreThrottledByTheirForwardedAddress) {
  api::Limits l = limits({.auth_failures_per_address = {.per_second = 0.1, .burst = 2}});
  l.trusted_proxies = *api::TrustedProxies::parse("127.0.0.0/8");
  TestServer s(l);
  auto from = [](const std::string& client) { return Headers{{"X-Forwarded-For", client}}; };
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, "key_nope.x", from("198.51.100.7")).status,
              401);
  EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, "key_nope.x", from("198.51.100.7")).status,
            429);
  // Another client of the same proxy is not affected; neither is the proxy's own address.
  EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, "key_nope.y", from("198.51.100.8")).status,
            401);
  EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, "key_nope.z").status, 401);
  // The audit trail names the client, not the proxy.
  std::set<std::string> sources;
  for (const auto& rec : audit_trail(s))
    if (rec.at("outcome") == "denied") sources.insert(rec.at("source"));
  EXPECT_EQ(sources, (std::set<std::string>{"198.51.100.7", "198.51.100.8", "127.0.0.1"}));
}

TEST(RateLimits, XForwardedForFromAnUntrustedPeerIsIgnored) {
  TestServer s(limits({.auth_failures_per_address = {.per_second = 0.1, .burst = 2}}));
  // Without trusted proxies the header is the client's own claim: rotating it changes nothing.
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, "key_nope.x",
                        {{"X-Forwarded-For", "198.51.100." + std::to_string(i)}})
                  .status,
              401);
  EXPECT_EQ(
      s.request("GET", "/v1/whoami", nullptr, "key_nope.x", {{"X-Forwarded-For", "198.51.100.99"}})
          .status,
      429);
  for (const auto& rec : audit_trail(s)) {
    if (rec.at("outcome") == "denied") {
      EXPECT_EQ(rec.at("source"), "127.0.0.1");
    }
  }
}

TEST(RateLimits, WrongPasswordsSlowTheAccountButTheRealUserGetsIn) {
  TestServer s(limits({.login_failures_per_account = {.per_second = 1, .burst = 3}}));
  auto t = s.create_tenant("acme", "acme-root");
  s.create_user(t.admin_token, t.id, "carol", kPassword);
  s.create_user(t.admin_token, t.id, "dave", kPassword);
  auto login = [&](const std::string& user, const std::string& password) {
    return s.request("POST", "/v1/auth/login", {{"username", user}, {"password", password}});
  };
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(IsProblem(login("acme/carol", "wrong guess " + std::to_string(i)), 401)) << i;
  // The guesser is slowed to one try a second...
  auto slowed = login("acme/carol", "wrong guess 3");
  ASSERT_TRUE(IsProblem(slowed, 429, "rate_limited")) << slowed.raw;
  EXPECT_EQ(slowed.header("Retry-After"), "1");
  // ...the right password waits the same second, no lockout...
  EXPECT_TRUE(IsProblem(login("acme/carol", kPassword), 429));
  // ...other accounts are not affected...
  EXPECT_EQ(login("acme/dave", kPassword).status, 201);
  // ...and a second later carol is in.
  s.clock().advance(std::chrono::seconds(1));
  EXPECT_EQ(login("acme/carol", kPassword).status, 201);
  bool audited = false;
  for (const auto& rec : audit_trail(s))
    audited |= rec.at("outcome") == "throttled" && rec.at("action") == "session.create";
  EXPECT_TRUE(audited);
}

}  // namespace
}  // namespace gp::it
