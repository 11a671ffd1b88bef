// The browser side of the API: the console's files at /console/ (from a directory here; the
// browser test runs the built console), and cookie sessions with their CSRF guard.
#include <fstream>

#include "integration/harness.h"

namespace gp::it {
namespace {

std::string cookie_value(const Resp& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k != "Set-Cookie" && k != "set-cookie") continue;
    if (v.starts_with(name + "=")) return v.substr(name.size() + 1, v.find(';') - name.size() - 1);
  }
  return "";
}

std::string set_cookie(const Resp& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if ((k == "Set-Cookie" || k == "set-cookie") && v.starts_with(name + "=")) return v;
  return "";
}

TEST(Console, ServesTheAppWithItsRoutesAndAssets) {
  TestServer s;
  const auto dir = s.dir() / "console";
  std::filesystem::create_directories(dir / "assets");
  std::ofstream(dir / "index.html") << "<!doctype html><title>gpuplane</title>";
  std::ofstream(dir / "assets" / "index-abc123.js") << "console.log(1)";
  s.api().set_console_dir(dir.string());

  auto root = s.request("GET", "/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.header("Location"), "/console/");
  for (const char* page : {"/console/", "/console/fleet", "/console/tenants/acme/projects"}) {
    auto r = s.request("GET", page);
    EXPECT_EQ(r.status, 200) << page;
    EXPECT_EQ(r.raw, "<!doctype html><title>gpuplane</title>") << page;
    EXPECT_EQ(r.header("Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(r.header("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
    EXPECT_EQ(r.header("Cache-Control"), "no-cache");
  }
  auto js = s.request("GET", "/console/assets/index-abc123.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.raw, "console.log(1)");
  EXPECT_EQ(js.header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js.header("Cache-Control").find("immutable"), std::string::npos);
  EXPECT_EQ(js.header("X-Content-Type-Options"), "nosniff");
  // Missing files and paths that climb out are 404, whatever their spelling.
  for (const char* bad :
       {"/console/assets/missing.js", "/console/../gpuplane.db", "/console/%2e%2e/gpuplane.db",
        "/console/assets/..%2f..%2fx.js", "/console//etc/passwd.txt"})
    EXPECT_EQ(s.request("GET", bad).status, 404) << bad;
  // Only GET: the API's own answer otherwise.
  EXPECT_EQ(s.request("POST", "/console/").status, 404);
}

TEST(Console, CookieLoginNeedsTheCsrfTokenForWrites) {
  TestServer s;
  auto t = s.create_tenant("acme", "ann");
  s.create_user(t.admin_token, "acme", "bea", std::string("correct horse battery"));
  auto user = s.list_all(t.admin_token, "/v1/tenants/acme/users");
  std::string bea_id;
  for (const auto& u : user)
    if (u["username"] == "bea") bea_id = u["id"];
  s.create_binding(t.admin_token, "acme", "tenant-admin", "user", bea_id);

  auto login = s.request(
      "POST", "/v1/auth/login",
      {{"username", "acme/bea"}, {"password", "correct horse battery"}, {"cookie", true}});
  ASSERT_EQ(login.status, 201) << login.raw;
  EXPECT_FALSE(login.body.contains("token"));  // the token travels only in the HttpOnly cookie
  const std::string session = cookie_value(login, "gp_session"),
                    csrf = cookie_value(login, "gp_csrf");
  ASSERT_TRUE(session.starts_with("ses_"));
  EXPECT_EQ(login.body["csrf_token"], csrf);
  EXPECT_NE(set_cookie(login, "gp_session").find("HttpOnly"), std::string::npos);
  EXPECT_EQ(set_cookie(login, "gp_csrf").find("HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie(login, "gp_csrf").find("SameSite=Strict"), std::string::npos);
  // Plain HTTP here: no Secure flag (browsers would drop the cookie); with TLS it is set.
  EXPECT_EQ(set_cookie(login, "gp_session").find("Secure"), std::string::npos);

  const Headers cookie{{"Cookie", "theme=dark; gp_session=" + session}};
  auto me = s.request("GET", "/v1/whoami", nullptr, {}, cookie);
  ASSERT_EQ(me.status, 200);
  EXPECT_EQ(me.body["name"], "bea");
  Headers no_csrf = cookie;
  auto refused = s.request("POST", "/v1/tenants/acme/projects", {{"name", "p1"}}, {}, no_csrf);
  EXPECT_TRUE(IsProblem(refused, 403, "permission_denied"));
  Headers with_csrf = cookie;
  with_csrf.emplace_back("X-CSRF-Token", csrf);
  EXPECT_EQ(s.request("POST", "/v1/tenants/acme/projects", {{"name", "p1"}}, {}, with_csrf).status,
            201);
  // Another session's CSRF token does not fit this session.
  auto other = s.request(
      "POST", "/v1/auth/login",
      {{"username", "acme/bea"}, {"password", "correct horse battery"}, {"cookie", true}});
  Headers crossed = cookie;
  crossed.emplace_back("X-CSRF-Token", cookie_value(other, "gp_csrf"));
  EXPECT_EQ(s.request("POST", "/v1/tenants/acme/projects", {{"name", "p2"}}, {}, crossed).status,
            403);
  // A bearer token needs no CSRF token (no browser sends it on its own); an API key in the
  // cookie is not a session.
  EXPECT_EQ(s.request("POST", "/v1/tenants/acme/projects", {{"name", "p3"}}, t.admin_token).status,
            201);
  EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, {}, {{"Cookie", "gp_session=" + t.admin_token}})
                .status,
            401);
  // Refused writes changed nothing.
  int projects = 0;
  for (const auto& p : s.list_all(t.admin_token, "/v1/tenants/acme/projects"))
    projects += p["name"] == "p2" ? 1 : 0;
  EXPECT_EQ(projects, 0);

  auto out = s.request("POST", "/v1/auth/logout", nullptr, {}, with_csrf);
  EXPECT_EQ(out.status, 204);
  EXPECT_NE(set_cookie(out, "gp_session").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(s.request("GET", "/v1/whoami", nullptr, {}, cookie).status, 401);
}

}  // namespace
}  // namespace gp::it
