// Hostile and broken input, end to end: malformed, oversized and mistyped requests are answered
// with a problem+json and change nothing; slow clients cost a socket, not the service; the
// connection cap sheds load and recovers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "integration/harness.h"

namespace gp::it {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// A request written by hand, for what the HTTP client will not send.
std::string raw_request(const std::string& method, const std::string& target,
                        const Headers& headers, const std::string& body = {},
                        bool content_length = true) {
  std::string out = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  if (content_length && (!body.empty() || method == "POST"))
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return out + "\r\n" + body;
}

Resp send_raw(TestServer& s, const std::string& bytes) {
  RawConnection c(s.port());
  c.send(bytes);  // the server may answer and close before it has read everything
  auto r = c.read_response(milliseconds(5000));
  if (!r) throw std::runtime_error("no HTTP response to a raw request");
  return *r;
}

Json tenant_list(TestServer& s) { return Json(s.list_all(s.admin_token(), "/v1/tenants")); }

std::string nested(int depth) {
  return R"({"name":"deep","labels":)" + std::string(size_t(depth), '[') +
         std::string(size_t(depth), ']') + "}";
}

TEST(BadInput, MalformedBodiesAreProblemsAndChangeNothing) {
  TestServer s;
  struct Case {
    std::string name, body;
    std::string why;  // in the problem's detail, so each case fails for its own reason
  };
  const std::string kLong(10000, 'a');
  const std::vector<Case> cases = {
      {"truncated JSON", R"({"name": "acme")", "malformed JSON"},
      {"trailing garbage", R"({"name":"acme"} {})", "malformed JSON"},
      {"empty body", "", "malformed JSON"},
      {"array instead of object", R"(["acme"])", "must be a JSON object"},
      {"bare string", R"("acme")", "must be a JSON object"},
      {"unknown field", R"({"name":"acme","colour":"red"})", "unknown field 'colour'"},
      {"unknown nested field", R"({"name":"acme","admin":{"username":"root","role":"god"}})",
       "unknown field 'role'"},
      {"name is a number", R"({"name":5})", "'name': must be a string"},
      {"name is null", R"({"name":null})", "'name' is required"},
      {"name is an object", R"({"name":{"first":"acme"}})", "'name': must be a string"},
      {"label value is a number", R"({"name":"acme","labels":{"tier":1}})", "label 'tier'"},
      {"admin is a string", R"({"name":"acme","admin":"root"})", "'admin': must be an object"},
      {"missing name", R"({})", "'name' is required"},
      {"missing name, other fields present", R"({"display_name":"Acme"})", "'name' is required"},
      {"10k-character name", R"({"name":")" + kLong + R"("})", "longer than"},
      {"10k-character display name", R"({"name":"acme","display_name":")" + kLong + R"("})",
       "longer than"},
      {"name not a DNS label", R"({"name":"Acme_Corp"})", "lowercase"},
      {"control character in display name", "{\"name\":\"acme\",\"display_name\":\"a\\u0001b\"}",
       "control characters"},
      {"invalid UTF-8 byte", "{\"name\":\"acme\",\"display_name\":\"caf\xff\"}", "UTF-8"},
      {"overlong UTF-8", "{\"name\":\"acme\",\"display_name\":\"\xc0\xaf\"}", "UTF-8"},
      {"UTF-8 surrogate", "{\"name\":\"acme\",\"display_name\":\"\xed\xa0\x80\"}", "UTF-8"},
      {"lone surrogate escape", R"({"name":"acme","display_name":"\ud800"})", "malformed JSON"},
      {"JSON nested 100 deep", nested(100), "nesting"},
      {"JSON nested 33 deep", nested(33), "nesting"},
      {"unknown isolation class", R"({"name":"acme","isolation_class":"gold"})",
       "'isolation_class'"},
  };
  Json before = tenant_list(s);
  for (const auto& c : cases) {
    auto r = s.request_raw("POST", "/v1/tenants", c.body, s.admin_token());
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << c.name;
    EXPECT_NE(r.body.value("detail", "").find(c.why), std::string::npos)
        << c.name << ": detail " << r.body.value("detail", "") << " does not say " << c.why;
    EXPECT_EQ(tenant_list(s), before) << c.name << " changed the tenant list";
  }
  // Each rejected mutation is in the audit trail.
  int rejected = 0;
  for (const auto& rec : s.audit_records())
    if (rec.at("action") == "tenant.create" && rec.at("outcome") == "rejected") ++rejected;
  EXPECT_EQ(rejected, int(cases.size()));
  // The same endpoint takes a good body, so the refusals above are about the input.
  EXPECT_EQ(s.request("POST", "/v1/tenants", {{"name", "acme"}}, s.admin_token()).status, 201);
}

TEST(BadInput, OversizeBodyIs413) {
  TestServer s;
  Json before = tenant_list(s);
  const size_t limit = s.api().limits().max_body_bytes;
  Headers h = {{"Authorization", "Bearer " + s.admin_token()},
               {"Content-Type", "application/json"}};

  // Announced too large: refused from the head alone.
  Headers announced = h;
  announced.emplace_back("Content-Length", std::to_string(2 * limit));
  auto r = send_raw(s, raw_request("POST", "/v1/tenants", announced, {}, false));
  EXPECT_TRUE(IsProblem(r, 413, "payload_too_large", /*with_request_id=*/false));

  // Sent too large, one byte over.
  std::string big = R"({"name":"acme","display_name":")";
  big += std::string(limit + 1 - big.size() - 2, 'x') + "\"}";
  ASSERT_EQ(big.size(), limit + 1);
  r = send_raw(s, raw_request("POST", "/v1/tenants", h, big));
  EXPECT_TRUE(IsProblem(r, 413, "payload_too_large", false));

  // Streamed too large (chunked, no length up front): cut off once past the limit.
  {
    Headers chunked = h;
    chunked.emplace_back("Transfer-Encoding", "chunked");
    RawConnection c(s.port());
    c.send(raw_request("POST", "/v1/tenants", chunked, {}, false));
    std::string chunk(64 << 10, 'x');
    char size_line[32];
    std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
    for (size_t sent = 0; sent <= limit + chunk.size(); sent += chunk.size())
      if (!c.send(size_line + chunk + "\r\n")) break;
    auto streamed = c.read_response(milliseconds(5000));
    ASSERT_TRUE(streamed.has_value()) << "no answer to an endless chunked body";
    EXPECT_TRUE(IsProblem(*streamed, 413, "payload_too_large", false));
  }

  // Exactly at the limit it is read, and refused for its content instead.
  big.erase(40, 1);
  ASSERT_EQ(big.size(), limit);
  r = s.request_raw("POST", "/v1/tenants", big, s.admin_token());
  EXPECT_TRUE(IsProblem(r, 400, "invalid_argument"));

  EXPECT_EQ(tenant_list(s), before);
}

TEST(BadInput, WrongContentTypeIs415) {
  TestServer s;
  Json before = tenant_list(s);
  const std::string body = R"({"name":"acme"})";
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "application/xml",
                           "multipart/form-data; boundary=x"}) {
    auto r = send_raw(
        s, raw_request("POST", "/v1/tenants",
                       {{"Authorization", "Bearer " + s.admin_token()}, {"Content-Type", type}},
                       body));
    EXPECT_TRUE(IsProblem(r, 415, "unsupported_media_type")) << type;
  }
  auto missing = send_raw(s, raw_request("POST", "/v1/tenants",
                                         {{"Authorization", "Bearer " + s.admin_token()}}, body));
  EXPECT_TRUE(IsProblem(missing, 415, "unsupported_media_type")) << "no Content-Type";
  EXPECT_EQ(tenant_list(s), before);
  // With the right type the same bytes work.
  auto good = send_raw(s, raw_request("POST", "/v1/tenants",
                                      {{"Authorization", "Bearer " + s.admin_token()},
                                       {"Content-Type", "application/json; charset=utf-8"}},
                                      body));
  EXPECT_EQ(good.status, 201) << good.raw;
}

// Issue 24 finding 7: the type was matched by prefix, so "application/jsonfoo" passed.
TEST(BadInput, ContentTypeIsParsedAsAMediaTypeNotMatchedByPrefix) {
  TestServer s;
  Json before = tenant_list(s);
  const std::string body = R"({"name":"acme"})";
  auto post = [&](const std::string& type) {
    return send_raw(
        s, raw_request("POST", "/v1/tenants",
                       {{"Authorization", "Bearer " + s.admin_token()}, {"Content-Type", type}},
                       body));
  };
  for (const char* type :
       {"application/jsonfoo", "application/json-seq", "application/jsonx; charset=utf-8",
        "application/merge-patch+jsonfoo", "application/json garbage", "application/json;",
        "application/json; charset=latin1", "application/json; boundary=x",
        "application/json, text/plain", "application/json; charset=\"utf-8"}) {
    auto r = post(type);
    EXPECT_TRUE(IsProblem(r, 415, "unsupported_media_type")) << type;
  }
  EXPECT_EQ(tenant_list(s), before);
  // Case does not matter in the type or the charset, and spaces and quotes are allowed.
  EXPECT_EQ(post("Application/JSON ; Charset=\"UTF-8\"").status, 201);
}

TEST(BadInput, BadQueryParametersAre400) {
  TestServer s;
  s.create_tenant("acme", "acme-admin");
  Json before = tenant_list(s);
  for (const char* q : {"?foo=1", "?limit=0", "?limit=5000", "?limit=1001", "?limit=x", "?limit=-1",
                        "?limit=", "?limit=10abc", "?limit=1e2", "?limit=10&limit=20",
                        "?limit=99999999999999999999", "?verbose", "?after=%zz", "?limit=%zz"}) {
    auto r = s.request("GET", std::string("/v1/tenants") + q, nullptr, s.admin_token());
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << q;
  }
  auto long_cursor =
      s.request("GET", "/v1/tenants?after=" + std::string(65, 'a'), nullptr, s.admin_token());
  EXPECT_TRUE(IsProblem(long_cursor, 400, "invalid_argument"));
  // Tenant-scoped audit does not take the platform-only "tenant" filter.
  auto t = s.list_all(s.admin_token(), "/v1/tenants").at(0).at("id").get<std::string>();
  EXPECT_TRUE(IsProblem(
      s.request("GET", "/v1/tenants/" + t + "/audit?tenant=" + t, nullptr, s.admin_token()), 400));
  // The bounds themselves are fine.
  EXPECT_EQ(s.request("GET", "/v1/tenants?limit=1", nullptr, s.admin_token()).status, 200);
  EXPECT_EQ(s.request("GET", "/v1/tenants?limit=1000", nullptr, s.admin_token()).status, 200);
  EXPECT_EQ(tenant_list(s), before);
}

TEST(BadInput, BadPercentEncodingIs400) {
  TestServer s;
  auto t = s.create_tenant("acme", "acme-admin");
  Json before = tenant_list(s);
  for (const char* target : {"/v1/tenants/%zz", "/v1/tenants/%", "/v1/tenants/%4",
                             "/v1/tenants/%C3%28", "/v1/tenants/%FF", "/v1/tenants/%zz/projects"}) {
    auto r = s.request("GET", target, nullptr, s.admin_token());
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument")) << target;
  }
  auto post = s.request("POST", "/v1/tenants/%zz/projects", {{"name", "x"}}, s.admin_token());
  EXPECT_TRUE(IsProblem(post, 400, "invalid_argument"));
  // Well-formed escapes decode: %61cme is "acme".
  EXPECT_EQ(s.request("GET", "/v1/tenants/%61cme", nullptr, s.admin_token()).status, 200);
  EXPECT_EQ(s.list_all(s.admin_token(), "/v1/tenants/" + t.id + "/projects").size(), 0u);
  EXPECT_EQ(tenant_list(s), before);
}

TEST(BadInput, WrongMethodIs405) {
  TestServer s;
  auto t = s.create_tenant("acme", "acme-admin");
  Json before = tenant_list(s);
  struct Case {
    std::string method, target;
  };
  for (const Case& c : std::vector<Case>{{"PUT", "/v1/tenants"},
                                         {"DELETE", "/v1/tenants"},
                                         {"PUT", "/v1/tenants/" + t.id},
                                         {"POST", "/v1/tenants/" + t.id},
                                         {"POST", "/v1/tenants/" + t.id + "/audit"},
                                         {"PATCH", "/healthz"},
                                         {"GET", "/v1/auth/login"}}) {
    auto r = s.request(c.method, c.target, nullptr, s.admin_token());
    EXPECT_TRUE(IsProblem(r, 405, "method_not_allowed")) << c.method << " " << c.target;
  }
  EXPECT_EQ(tenant_list(s), before);
}

// SRC BUG (src/api/api.cpp, Api::handle): RFC 9110 section 15.5.6 requires a 405 response to
// carry an Allow header listing the methods the resource supports. dispatch() builds that list
// (`allowed`) but only puts it into the problem detail. Expected to fail until fixed.
TEST(BadInput, MethodNotAllowedListsAllowedMethods) {
  TestServer s;
  auto r = s.request("PUT", "/v1/tenants", nullptr, s.admin_token());
  ASSERT_EQ(r.status, 405);
  std::string allow = r.header("Allow");
  std::set<std::string> methods;
  for (size_t i = 0; i < allow.size();) {
    size_t j = std::min(allow.find(',', i), allow.size());
    std::string m = allow.substr(i, j - i);
    std::erase(m, ' ');
    if (!m.empty()) methods.insert(m);
    i = j + 1;
  }
  EXPECT_EQ(methods, (std::set<std::string>{"GET", "POST"})) << "Allow: '" << allow << "'";
}

TEST(BadInput, OversizeHeaderBlockIs431) {
  TestServer s;
  const size_t limit = s.api().limits().max_header_bytes;
  auto one_big =
      send_raw(s, raw_request("GET", "/healthz", {{"X-Filler", std::string(limit, 'a')}}));
  EXPECT_TRUE(IsProblem(one_big, 431, "header_too_large", false));
  Headers many;
  for (int i = 0; i < 40; ++i)
    many.emplace_back("X-Filler-" + std::to_string(i), std::string(500, 'b'));
  auto many_small = send_raw(s, raw_request("GET", "/healthz", many));
  EXPECT_TRUE(IsProblem(many_small, 431, "header_too_large", false));
  // A large but allowed head is served.
  auto fits =
      send_raw(s, raw_request("GET", "/healthz", {{"X-Filler", std::string(limit / 2, 'c')}}));
  EXPECT_EQ(fits.status, 200);
}

TEST(BadInput, MalformedHttpIs400) {
  TestServer s;
  for (const char* bytes : {"NOT-HTTP\r\n\r\n", "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n",
                            "POST /v1/tenants HTTP/1.1\r\nContent-Length: nope\r\n\r\n"}) {
    auto r = send_raw(s, bytes);
    EXPECT_TRUE(IsProblem(r, 400, "invalid_argument", false)) << bytes;
  }
  EXPECT_EQ(s.request("GET", "/healthz").status, 200);
}

TEST(SlowClients, StalledHeadsDoNotBlockOthersAndAreClosedAfterHeaderTimeout) {
  api::Limits limits;
  limits.header_timeout = milliseconds(1500);
  TestServer s(limits);
  constexpr int kStalled = 20, kTricklers = 2;
  std::vector<std::unique_ptr<RawConnection>> slow;
  auto started = SteadyClock::now();
  for (int i = 0; i < kStalled; ++i) {
    slow.push_back(std::make_unique<RawConnection>(s.port()));
    ASSERT_TRUE(slow.back()->send("GET /v1/tenants HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
  }
  ASSERT_TRUE(s.wait_for_connections(kStalled, milliseconds(1000)));

  // Others are served promptly meanwhile.
  for (int i = 0; i < 5; ++i) {
    auto t0 = SteadyClock::now();
    auto r = s.request("GET", "/v1/tenants", nullptr, s.admin_token());
    EXPECT_EQ(r.status, 200);
    EXPECT_LT(SteadyClock::now() - t0, milliseconds(500)) << "request " << i << " was held up";
  }
  ASSERT_LT(SteadyClock::now() - started, limits.header_timeout)
      << "too slow to tell prompt service from timed-out stallers";
  for (auto& c : slow) EXPECT_TRUE(c->open_and_quiet()) << "closed before the header timeout";

  // The stalled ones are closed once the head has not arrived in time, tricklers included.
  std::vector<bool> closed(kStalled, false);
  int open = kStalled;
  auto deadline = started + limits.header_timeout + milliseconds(3000);
  auto next_trickle = SteadyClock::now();
  while (open > 0 && SteadyClock::now() < deadline) {
    if (SteadyClock::now() >= next_trickle) {
      for (int i = 0; i < kTricklers; ++i)
        if (!closed[i]) slow[i]->send("a");
      next_trickle += milliseconds(200);
    }
    for (int i = 0; i < kStalled; ++i) {
      if (closed[i] || !slow[i]->wait_closed(milliseconds(1))) continue;
      closed[i] = true;
      --open;
      EXPECT_GE(SteadyClock::now() - started, limits.header_timeout - milliseconds(100))
          << "connection " << i << " closed early";
    }
  }
  EXPECT_EQ(open, 0) << open << " stalled connections outlived the header timeout";
  EXPECT_TRUE(s.wait_for_connections(0, milliseconds(1000)));
  EXPECT_EQ(s.request("GET", "/healthz").status, 200);
}

// Issue 24 finding 7: after the first request a keep-alive connection's next head was read
// under the idle timeout, so it could trickle a head for a minute instead of 10 s.
TEST(SlowClients, AKeepAliveConnectionsNextHeadHasTheHeaderDeadlineToo) {
  api::Limits limits;
  limits.header_timeout = milliseconds(600);
  limits.idle_timeout = milliseconds(30000);
  TestServer s(limits);
  RawConnection c(s.port());
  const std::string keep_alive = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_TRUE(c.send(keep_alive));
  auto first = c.read_response(milliseconds(5000));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->status, 200);
  // Idle between requests is allowed past the header deadline...
  auto idle_from = SteadyClock::now();
  while (SteadyClock::now() - idle_from < limits.header_timeout + milliseconds(400))
    ASSERT_FALSE(c.wait_closed(milliseconds(50))) << "an idle keep-alive connection was closed";
  ASSERT_TRUE(c.open_and_quiet());
  // ...but once the next request begins, its head has header_timeout, not the idle timeout.
  auto started = SteadyClock::now();
  ASSERT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
  EXPECT_TRUE(c.wait_closed(milliseconds(5000)))
      << "the second request's head was still awaited after 5 s";
  EXPECT_GE(SteadyClock::now() - started, limits.header_timeout - milliseconds(100));
  // A keep-alive connection that sends its next request in time is served.
  RawConnection d(s.port());
  ASSERT_TRUE(d.send(keep_alive));
  ASSERT_TRUE(d.read_response(milliseconds(5000)).has_value());
  ASSERT_TRUE(d.send(keep_alive));
  auto second = d.read_response(milliseconds(5000));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->status, 200);
}

// Issue 24 finding 7: only the global cap existed, so one address could hold every connection.
TEST(SlowClients, ConnectionsPerAddressAreCappedWhileOtherAddressesAreServed) {
  api::Limits limits;
  limits.max_connections = 100;
  limits.max_connections_per_address = 3;
  TestServer s(limits);
  ASSERT_TRUE(s.wait_for_connections(0, milliseconds(2000)));
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawConnection>(s.port()));
  ASSERT_TRUE(s.wait_for_connections(3, milliseconds(2000)));
  // The fourth from the same address is refused: 429 and closed.
  RawConnection fourth(s.port());
  auto refused = fourth.read_response(milliseconds(3000));
  ASSERT_TRUE(refused.has_value()) << "the fourth connection got no answer";
  EXPECT_TRUE(IsProblem(*refused, 429, "rate_limited", false)) << refused->raw;
  EXPECT_EQ(refused->header("Retry-After"), "1");
  EXPECT_TRUE(fourth.wait_closed(milliseconds(2000)));
  EXPECT_EQ(s.server().active_connections(), 3);
  // Another address is served meanwhile.
  RawConnection other(s.port(), "127.0.0.2");
  ASSERT_TRUE(other.send(raw_request("GET", "/healthz", {})));
  auto served = other.read_response(milliseconds(3000));
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->status, 200);
  // Closing one frees its slot for the same address.
  held.pop_back();
  ASSERT_TRUE(s.wait_for_connections(2, milliseconds(3000)));
  EXPECT_EQ(s.request("GET", "/healthz").status, 200);
}

// Behind a trusted proxy every client shares its address: the proxy is not capped.
TEST(SlowClients, TrustedProxiesAreNotCappedPerAddress) {
  api::Limits limits;
  limits.max_connections_per_address = 2;
  limits.trusted_proxies = *api::TrustedProxies::parse("127.0.0.1");
  TestServer s(limits);
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 5; ++i) held.push_back(std::make_unique<RawConnection>(s.port()));
  ASSERT_TRUE(s.wait_for_connections(5, milliseconds(2000)));
  EXPECT_EQ(s.request("GET", "/healthz").status, 200);
  // An untrusted address still is.
  RawConnection a(s.port(), "127.0.0.2"), b(s.port(), "127.0.0.2"), c(s.port(), "127.0.0.2");
  auto refused = c.read_response(milliseconds(3000));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 429);
}

TEST(SlowClients, ConnectionCapShedsLoadAndRecovers) {
  api::Limits limits;
  limits.max_connections = 5;
  limits.header_timeout = milliseconds(10000);
  TestServer s(limits);
  ASSERT_TRUE(s.wait_for_connections(0, milliseconds(2000)));
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 5; ++i) idle.push_back(std::make_unique<RawConnection>(s.port()));
  ASSERT_TRUE(s.wait_for_connections(5, milliseconds(2000)));

  // The sixth is told to come back later (or simply closed).
  RawConnection sixth(s.port());
  auto r = sixth.read_response(milliseconds(3000));
  if (r) {
    EXPECT_TRUE(IsProblem(*r, 503, "unavailable", false));
    EXPECT_FALSE(r->header("Retry-After").empty());
  } else {
    EXPECT_TRUE(sixth.wait_closed(milliseconds(1000)))
        << "sixth connection neither refused nor closed";
  }
  EXPECT_EQ(s.server().active_connections(), 5);

  for (auto& c : idle) c->close();
  ASSERT_TRUE(s.wait_for_connections(0, milliseconds(3000)));
  EXPECT_EQ(s.request("GET", "/healthz").status, 200);
  EXPECT_EQ(s.request("GET", "/v1/tenants", nullptr, s.admin_token()).status, 200);
}

}  // namespace
}  // namespace gp::it
