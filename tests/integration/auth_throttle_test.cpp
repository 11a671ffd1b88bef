// The failed-authentication throttle, guarded a second way (issue 24 finding 8): rate_limit_test
// drives it over sockets, all from 127.0.0.1; this calls Api::handle in process with requests
// from chosen addresses, through a trusted proxy, and with node client certificates (mTLS), and
// checks who is slowed: only failing credentials, only from their own address (or node).
#include <gtest/gtest.h>

#include <string>

#include "integration/harness.h"

namespace gp::it {
namespace {

api::Limits auth_throttling(double burst) {
  api::Limits l;
  l.rate.auth_failures_per_address = {.per_second = 0.1, .burst = burst};
  l.trusted_proxies = *api::TrustedProxies::parse("10.0.0.0/8");
  return l;
}

struct HandleSender {
  TestServer& s;
  api::HttpResponse operator()(const std::string& remote, const std::string& token,
                               const std::string& target = "/v1/whoami",
                               std::optional<tls::PeerCert> cert = std::nullopt, Headers extra = {},
                               const std::string& method = "GET", const std::string& body = "") {
    api::HttpRequest req;
    req.method = method;
    req.target = target;
    req.remote = remote;
    req.client_cert = std::move(cert);
    req.body = body;
    if (!token.empty()) req.headers.emplace_back("authorization", "Bearer " + token);
    if (!body.empty()) req.headers.emplace_back("content-type", "application/json");
    for (auto& [k, v] : extra) {
      for (char& c : k) c = char(std::tolower(static_cast<unsigned char>(c)));
      req.headers.emplace_back(k, v);
    }
    return s.api().handle(std::move(req));
  }
};

TEST(AuthThrottle, OnlyFailingCredentialsFromTheFailingAddressAreSlowed) {
  TestServer s(auth_throttling(2));
  HandleSender send{s};
  const std::string bad = "key_aaaaaaaaaaaaaaaa." + std::string(43, 'A');
  EXPECT_EQ(send("203.0.113.9", bad).status, 401);
  EXPECT_EQ(send("203.0.113.9", bad).status, 401);
  EXPECT_EQ(send("203.0.113.9", bad).status, 429);
  EXPECT_EQ(send("203.0.113.9", "").status, 429);
  // A valid credential from that address passes, again and again.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(send("203.0.113.9", s.admin_token()).status, 200) << i;
  // Its neighbour is not slowed; nor is an IPv6 client.
  EXPECT_EQ(send("203.0.113.10", bad).status, 401);
  EXPECT_EQ(send("2001:db8::1", bad).status, 401);
  // Clients behind a trusted proxy count by their forwarded address, not the proxy's.
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(send("10.1.1.1", bad, "/v1/whoami", {}, {{"X-Forwarded-For", "198.51.100.1"}}).status,
              401);
  EXPECT_EQ(send("10.1.1.1", bad, "/v1/whoami", {}, {{"X-Forwarded-For", "198.51.100.1"}}).status,
            429);
  EXPECT_EQ(send("10.1.1.1", bad, "/v1/whoami", {}, {{"X-Forwarded-For", "198.51.100.2"}}).status,
            401);
  // A proxy that is not trusted cannot name another client.
  EXPECT_EQ(
      send("203.0.113.9", bad, "/v1/whoami", {}, {{"X-Forwarded-For", "198.51.100.3"}}).status,
      429);
}

TEST(AuthThrottle, NodeAgentsWithCertificatesAreCountedPerNodeNeverByAddress) {
  TestServer s(auth_throttling(2));
  HandleSender send{s};
  auto join = s.request("POST", "/v1/join-tokens", Json::object(), s.admin_token());
  ASSERT_EQ(join.status, 201);
  auto enrolled = s.request(
      "POST", "/v1/agent/enroll",
      {{"join_token", join.body.at("token")}, {"inventory", h200_inventory("edge-node", 1)}});
  ASSERT_EQ(enrolled.status, 201) << enrolled.raw;
  const std::string node_token = enrolled.body.at("credential");
  const std::string node_id = enrolled.body.at("node").at("id");
  const tls::PeerCert cert{.serial = "1", .common_name = node_id, .verify_error = ""};
  // Anonymous failures spend the shared address's budget...
  for (int i = 0; i < 3; ++i) send("192.0.2.50", "key_nope.x");
  ASSERT_EQ(send("192.0.2.50", "key_nope.x").status, 429);
  // ...the node behind it still reports, with and without its certificate.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(send("192.0.2.50", node_token, "/v1/agent/heartbeat", cert, {}, "POST", "{}").status,
              200);
    EXPECT_EQ(send("192.0.2.50", node_token, "/v1/agent/heartbeat", {}, {}, "POST", "{}").status,
              200);
  }
  // A node whose credential fails is counted as that node: the address's others are unaffected
  // by it, and it is not excused by the address's budget either.
  const tls::PeerCert other{.serial = "2", .common_name = "nod_other", .verify_error = ""};
  EXPECT_EQ(
      send("192.0.2.51", "nod_other.bad", "/v1/agent/heartbeat", other, {}, "POST", "{}").status,
      401);
  EXPECT_EQ(
      send("192.0.2.51", "nod_other.bad", "/v1/agent/heartbeat", other, {}, "POST", "{}").status,
      401);
  EXPECT_EQ(
      send("192.0.2.51", "nod_other.bad", "/v1/agent/heartbeat", other, {}, "POST", "{}").status,
      429);
  EXPECT_EQ(send("192.0.2.51", "key_nope.y").status, 401);
}

TEST(AuthThrottle, AThrottledAddressCannotTryPasswordsButItsTokensStillWork) {
  TestServer s(auth_throttling(2));
  HandleSender send{s};
  auto t = s.create_tenant("acme", "acme-root");
  s.create_user(t.admin_token, t.id, "carol", std::string("a long enough passphrase"));
  auto login = [&](const std::string& remote, const std::string& password) {
    return send(remote, "", "/v1/auth/login", {}, {}, "POST",
                Json{{"username", "acme/carol"}, {"password", password}}.dump());
  };
  EXPECT_EQ(login("203.0.113.20", "wrong 1").status, 401);
  EXPECT_EQ(login("203.0.113.20", "wrong 2").status, 401);
  // Spent: a password from here is refused before its (argon2) check, the right one included...
  EXPECT_EQ(login("203.0.113.20", "wrong 3").status, 429);
  EXPECT_EQ(login("203.0.113.20", "a long enough passphrase").status, 429);
  // ...while a token from here is checked and passes, and another address logs in.
  EXPECT_EQ(send("203.0.113.20", t.admin_token).status, 200);
  EXPECT_EQ(login("203.0.113.21", "a long enough passphrase").status, 201);
}

}  // namespace
}  // namespace gp::it
