// Tenant scoping, guarded a second way (issue 24 finding 8). cross_tenant_test walks the route
// table in process with tenant A's admin API key; this walks the OpenAPI document the server
// serves, with the two other kinds of credential a tenant holds: a browser session (password
// login, cookie and CSRF token) and a service account's API key, both tenant admins of A. Every
// operation on tenant B's paths must answer 404, exactly as for a tenant that does not exist,
// and change nothing.
#include <gtest/gtest.h>

#include <cctype>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "integration/harness.h"
#include "integration/tenant_world.h"

namespace gp::it {
namespace {

const std::string kScopePassword = "a long enough passphrase";

std::string scope_cookie(const Resp& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if ((k == "Set-Cookie" || k == "set-cookie") && v.starts_with(name + "="))
      return v.substr(name.size() + 1, v.find(';') - name.size() - 1);
  return "";
}

struct DocumentedOperation {
  std::string method, path;
  bool has_body = false;
};

// The served document's operations under /v1/tenants/{tenant}.
std::vector<DocumentedOperation> documented_tenant_operations(TestServer& s) {
  auto doc = expect_status(s.request("GET", "/v1/openapi.json"), 200, "openapi");
  std::vector<DocumentedOperation> out;
  for (const auto& [path, ops] : doc.body.at("paths").items()) {
    if (!path.starts_with("/v1/tenants/{tenant}")) continue;
    for (const auto& [method, op] : ops.items()) {
      std::string upper = method;
      for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
      out.push_back({upper, path, op.contains("requestBody")});
    }
  }
  return out;
}

TEST(TenantScope, EveryDocumentedTenantOperationIsHiddenFromAnotherTenantsSessionAndRobot) {
  TestServer s;
  TenantWorld a = populate(s, "alpha");
  TenantWorld b = populate(s, "bravo");

  // A browser user of A, tenant admin, logged in by password into a cookie session.
  const std::string browser_id =
      s.create_user(a.tenant.admin_token, a.tenant.id, "alpha-browser", kScopePassword).at("id");
  s.create_binding(a.tenant.admin_token, a.tenant.id, "tenant-admin", "user", browser_id);
  auto login = s.request(
      "POST", "/v1/auth/login",
      {{"username", "alpha/alpha-browser"}, {"password", kScopePassword}, {"cookie", true}});
  ASSERT_EQ(login.status, 201) << login.raw;
  const std::string session = scope_cookie(login, "gp_session");
  const std::string csrf = login.body.at("csrf_token");
  ASSERT_TRUE(session.starts_with("ses_"));
  const Headers browser{{"Cookie", "gp_session=" + session}, {"X-CSRF-Token", csrf}};
  // A's service account, tenant admin, with its API key.
  s.create_binding(a.tenant.admin_token, a.tenant.id, "tenant-admin", "service_account", a.sa_id);
  const std::string robot = a.key_token;
  // Both credentials work in A (so a 404 below is the scoping, not a dead credential).
  const std::string own = "/v1/tenants/" + a.tenant.id + "/projects";
  ASSERT_EQ(s.request("GET", own, nullptr, {}, browser).status, 200);
  ASSERT_EQ(s.request("GET", own, nullptr, robot).status, 200);
  ASSERT_EQ(s.request("POST", own, {{"name", "by-browser"}}, {}, browser).status, 201);

  auto operations = documented_tenant_operations(s);
  ASSERT_GE(operations.size(), 40u) << "the document lost its tenant operations";
  // Control: B's admin reads every documented GET with B's ids.
  for (const auto& op : operations) {
    if (op.method != "GET") continue;
    auto r = s.request("GET", fill(op.path, b.path_ids()), nullptr, b.tenant.admin_token);
    EXPECT_EQ(r.status, 200) << "control: " << op.path;
  }

  const Json before = snapshot(s, b.tenant.id);
  int checked = 0;
  for (const auto& op : operations) {
    const std::string target = fill(op.path, b.path_ids());
    // The tenant is resolved before the body is read: an empty object is enough.
    const std::string body = op.has_body ? "{}" : "";
    for (const auto& [name, token, headers] :
         std::vector<std::tuple<std::string, std::string, Headers>>{
             {"A's browser session", "", browser}, {"A's service account key", robot, {}}}) {
      Headers h = headers;
      if (op.has_body) h.emplace_back("Content-Type", "application/json");
      auto r = s.request_raw(op.method, target, body, token, h);
      EXPECT_TRUE(IsProblem(r, 404, "not_found"))
          << op.method << " " << op.path << " with " << name;
      ++checked;
    }
  }
  std::cout << "[ scope    ] checked " << checked << " (operation, credential) pairs\n";
  EXPECT_EQ(snapshot(s, b.tenant.id), before) << "tenant B changed under A's requests";
  // And B's name does not show up in what A lists.
  for (const auto& [name, token, headers] :
       std::vector<std::tuple<std::string, std::string, Headers>>{{"browser", "", browser},
                                                                  {"robot", robot, {}}}) {
    auto tenants = s.request("GET", "/v1/tenants", nullptr, token, headers);
    ASSERT_EQ(tenants.status, 200) << name;
    EXPECT_EQ(tenants.raw.find(b.tenant.id), std::string::npos) << name;
    EXPECT_EQ(tenants.raw.find("bravo"), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace gp::it
