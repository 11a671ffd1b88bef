// Tenant networks and secrets through the API: segments that never overlap, policies the core
// validates (and audits with their diff), the nftables ruleset a node gets from the store,
// write-only secrets sealed per tenant, and offboarding that releases the segment and shreds the
// tenant's data keys.
#include "network/network.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "integration/harness.h"
#include "storage/storage.h"

namespace gp::it {
namespace {

class Network : public ::testing::Test {
 protected:
  TestServer s;
  TenantInfo a, b;

  void SetUp() override {
    a = s.create_tenant("alpha", "alpha-admin");
    b = s.create_tenant("bravo", "bravo-admin");
  }

  std::string net(const TenantInfo& t) const { return "/v1/tenants/" + t.id + "/network"; }
  std::string secrets(const TenantInfo& t) const { return "/v1/tenants/" + t.id + "/secrets"; }

  Json get_network(const TenantInfo& t) {
    auto r = s.request("GET", net(t), nullptr, t.admin_token);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body;
  }

  std::vector<Json> audit_of(const std::string& action, const std::string& outcome = "success") {
    std::vector<Json> out;
    for (auto& rec : s.audit_records())
      if (rec.at("action") == action && rec.at("outcome") == outcome) out.push_back(rec);
    return out;
  }
};

network::Ipv4Cidr cidr_of(const Json& n) {
  auto c = network::parse_cidr(n.at("segment").at("cidr").get<std::string>());
  EXPECT_TRUE(c.has_value());
  return c.value_or(network::Ipv4Cidr{});
}

TEST_F(Network, TenantsGetDistinctSegmentsFromThePool) {
  Json na = get_network(a);
  Json nb = get_network(b);
  network::Ipv4Cidr pool{0x0A400000, 10};  // the default supernet, 10.64.0.0/10
  auto ca = cidr_of(na), cb = cidr_of(nb);
  EXPECT_TRUE(pool.contains(ca)) << na.dump();
  EXPECT_TRUE(pool.contains(cb)) << nb.dump();
  EXPECT_EQ(ca.prefix, 24);
  EXPECT_FALSE(ca.overlaps(cb)) << na.dump() << " vs " << nb.dump();
  EXPECT_NE(na.at("segment").at("vni"), nb.at("segment").at("vni"));
  for (const Json& n : {na, nb}) {
    int64_t vni = n.at("segment").at("vni");
    EXPECT_GE(vni, 10000);
    EXPECT_LE(vni, 19999);
    EXPECT_EQ(n.at("version"), 0);
    EXPECT_TRUE(n.at("policy").at("egress").empty());
  }
  // Stable: asking again gives the same segment.
  EXPECT_EQ(get_network(a).at("segment"), na.at("segment"));
  // Another tenant's admin does not see it.
  EXPECT_TRUE(IsProblem(s.request("GET", net(a), nullptr, b.admin_token), 404, "not_found"));
}

// The segment is allocated in an audited write (the tenant's creation); reading the network
// writes nothing, and a tenant without a segment (one created before segments came with the
// tenant) reads null until an audited call allocates one.
TEST_F(Network, ReadingTheNetworkNeverAllocatesASegment) {
  auto segments_of = [&](const TenantInfo& t) {
    int64_t n = -1;
    EXPECT_TRUE(
        s.store()
            .read([&](store::Tx& tx) -> Result<void> {
              n = GP_TRY(tx.query_one("SELECT COUNT(*) FROM tenant_segments WHERE tenant_id = ?",
                                      {t.id}))
                      ->integer(0);
              return ok();
            })
            .has_value());
    return n;
  };
  // Created with its segment, and the creation's audit record says which.
  ASSERT_EQ(segments_of(a), 1);
  Json created;
  for (const Json& rec : audit_of("tenant.create"))
    if (rec.at("tenant_id") == a.id) created = rec;
  ASSERT_TRUE(created.is_object());
  Json stored = get_network(a).at("segment");
  EXPECT_EQ(created.at("detail").at("segment"), stored);

  // A tenant from before: no segment. Reading its network answers null and writes nothing.
  ASSERT_TRUE(s.store()
                  .write([&](store::Tx& tx) -> Result<void> {
                    GP_TRY(tx.exec("DELETE FROM tenant_segments WHERE tenant_id = ?", {b.id}));
                    return ok();
                  })
                  .has_value());
  const size_t records = s.audit_records().size();
  for (int i = 0; i < 2; ++i) {
    Json n = get_network(b);
    EXPECT_TRUE(n.at("segment").is_null()) << n.dump();
    EXPECT_EQ(n.at("version"), 0);
  }
  EXPECT_EQ(segments_of(b), 0) << "a GET allocated a segment";
  EXPECT_EQ(s.audit_records().size(), records);

  // The explicit, audited call allocates it; a second one is a conflict and changes nothing.
  auto r = s.request("POST", net(b) + "/segment", nullptr, b.admin_token);
  ASSERT_EQ(r.status, 201) << r.raw;
  EXPECT_EQ(segments_of(b), 1);
  EXPECT_EQ(get_network(b).at("segment"), r.body);
  auto recs = audit_of("network.segment.allocate");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].at("tenant_id"), b.id);
  EXPECT_EQ(recs[0].at("detail"), r.body);
  EXPECT_TRUE(
      IsProblem(s.request("POST", net(b) + "/segment", nullptr, b.admin_token), 409, "conflict"));
  EXPECT_EQ(get_network(b).at("segment"), r.body);
  // Other tenants' admins cannot allocate it for them.
  EXPECT_TRUE(
      IsProblem(s.request("POST", net(b) + "/segment", nullptr, a.admin_token), 404, "not_found"));
}

TEST_F(Network, PolicyInsideTheSupernetIsRefusedAndChangesNothing) {
  Json good = {{"egress",
                {{{"destination", "203.0.113.0/24"},
                  {"protocol", "tcp"},
                  {"ports", {443}},
                  {"description", "registry"}}}}};
  auto r = s.request("PUT", net(a) + "/policy", good, a.admin_token);
  ASSERT_EQ(r.status, 200) << r.raw;
  Json before = get_network(a);
  EXPECT_EQ(before.at("version"), 1);
  size_t audited = audit_of("network.policy.set").size();

  // B's CIDR (inside the tenant supernet) as egress: cross-tenant traffic is never policy.
  std::string b_cidr = get_network(b).at("segment").at("cidr");
  for (const std::string& dest : {b_cidr, std::string("10.64.0.0/10"), std::string("10.0.0.0/8")}) {
    Json bad = {{"egress", {{{"destination", dest}, {"protocol", "tcp"}}}}};
    EXPECT_TRUE(IsProblem(s.request("PUT", net(a) + "/policy", bad, a.admin_token), 400,
                          "invalid_argument"))
        << dest;
  }
  Json bad_exposure = {
      {"exposures", {{{"protocol", "tcp"}, {"ports", {22}}, {"sources", {b_cidr}}}}}};
  EXPECT_TRUE(IsProblem(s.request("PUT", net(a) + "/policy", bad_exposure, a.admin_token), 400,
                        "invalid_argument"));
  // Malformed: unknown field, bad protocol, bad port.
  for (Json bad :
       {Json{{"egress", Json::array()}, {"tenant", "bravo"}},
        Json{{"egress", {{{"destination", "198.51.100.0/24"}, {"protocol", "gre"}}}}},
        Json{{"egress",
              {{{"destination", "198.51.100.0/24"}, {"protocol", "tcp"}, {"ports", {0}}}}}}})
    EXPECT_TRUE(IsProblem(s.request("PUT", net(a) + "/policy", bad, a.admin_token), 400))
        << bad.dump();
  EXPECT_EQ(get_network(a), before);
  EXPECT_EQ(audit_of("network.policy.set").size(), audited);
  EXPECT_EQ(audit_of("network.policy.set", "rejected").size(), 7u);  // each refusal is recorded
}

TEST_F(Network, PolicyChangesAreAuditedWithTheDiff) {
  Json v1 = {{"egress",
              {{{"destination", "203.0.113.0/24"}, {"protocol", "tcp"}, {"ports", {443}}},
               {{"destination", "198.51.100.7"}, {"protocol", "udp"}, {"ports", {53}}}}}};
  ASSERT_EQ(s.request("PUT", net(a) + "/policy", v1, a.admin_token).status, 200);
  Json v2 = {
      {"egress", {{{"destination", "203.0.113.0/24"}, {"protocol", "tcp"}, {"ports", {443}}}}},
      {"exposures", {{{"protocol", "tcp"}, {"ports", {"8000-8080"}}, {"sources", {"0.0.0.0/0"}}}}}};
  // A stale If-Match is refused.
  EXPECT_TRUE(IsProblem(
      s.request("PUT", net(a) + "/policy", v2, a.admin_token, {{"If-Match", "W/\"7\""}}), 412));
  auto r = s.request("PUT", net(a) + "/policy", v2, a.admin_token, {{"If-Match", "W/\"1\""}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body.at("version"), 2);
  EXPECT_EQ(r.body.at("policy").at("exposures").size(), 1u);

  auto recs = audit_of("network.policy.set");
  ASSERT_EQ(recs.size(), 2u);
  const Json& d1 = recs[0].at("detail").at("diff");
  EXPECT_EQ(d1.at("egress").at("added").size(), 2u);
  EXPECT_TRUE(d1.at("egress").at("removed").empty());
  const Json& d2 = recs[1].at("detail").at("diff");
  ASSERT_EQ(d2.at("egress").at("removed").size(), 1u);
  EXPECT_EQ(d2.at("egress").at("removed")[0].at("destination"), "198.51.100.7/32");
  EXPECT_TRUE(d2.at("egress").at("added").empty());
  EXPECT_EQ(d2.at("exposures").at("added").size(), 1u);
  EXPECT_EQ(recs[1].at("tenant_id"), a.id);
  EXPECT_EQ(recs[1].at("actor"), a.admin_user_id);
}

// No workloads are recorded yet, so the ruleset holds the tenant CIDR set and the base chains
// (egress rules only appear once a tenant has a workload on the node).
TEST_F(Network, NodeRulesetNamesEveryTenantCidr) {
  Json nodes = Json::array({{{"inventory", h200_inventory("gpu-a", 2)}}});
  ASSERT_EQ(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, s.admin_token()).status, 201);
  std::string ca = get_network(a).at("segment").at("cidr");
  std::string cb = get_network(b).at("segment").at("cidr");
  ASSERT_EQ(s.request("PUT", net(a) + "/policy",
                      {{"egress", {{{"destination", "203.0.113.0/24"}, {"protocol", "tcp"}}}}},
                      a.admin_token)
                .status,
            200);
  auto r = s.request("GET", "/v1/nodes/gpu-a/nftables", nullptr, s.admin_token());
  ASSERT_EQ(r.status, 200) << r.raw;
  std::string rules = r.body.at("ruleset");
  EXPECT_NE(rules.find("table inet gpuplane"), std::string::npos) << rules;
  EXPECT_NE(rules.find(ca), std::string::npos) << rules;
  EXPECT_NE(rules.find(cb), std::string::npos) << rules;
  EXPECT_EQ(r.body.at("segments").size(), 2u);
  // Operators only; unknown nodes are 404.
  EXPECT_TRUE(IsProblem(s.request("GET", "/v1/nodes/gpu-a/nftables", nullptr, a.admin_token), 403));
  EXPECT_TRUE(
      IsProblem(s.request("GET", "/v1/nodes/nope/nftables", nullptr, s.admin_token()), 404));
}

TEST_F(Network, SecretsAreWriteOnlyAndTenantPrivate) {
  const std::string value = "hunter2-registry-token";
  auto c =
      s.request("POST", secrets(a), {{"name", "registry.pull"}, {"value", value}}, a.admin_token);
  ASSERT_EQ(c.status, 201) << c.raw;
  EXPECT_EQ(c.raw.find(value), std::string::npos) << c.raw;
  EXPECT_EQ(c.body.at("key_version"), 1);
  EXPECT_TRUE(IsProblem(
      s.request("POST", secrets(a), {{"name", "registry.pull"}, {"value", "again"}}, a.admin_token),
      409));
  EXPECT_TRUE(IsProblem(
      s.request("POST", secrets(a), {{"name", "bad name!"}, {"value", "x"}}, a.admin_token), 400));
  EXPECT_TRUE(IsProblem(
      s.request("POST", secrets(a), {{"name", "empty"}, {"value", ""}}, a.admin_token), 400));

  // The value never comes back: not from the list, one secret, or the audit trail.
  auto list = s.request("GET", secrets(a), nullptr, a.admin_token);
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.body.at("items").size(), 1u);
  auto one = s.request("GET", secrets(a) + "/registry.pull", nullptr, a.admin_token);
  for (const auto* r : {&list, &one, &c}) EXPECT_EQ(r->raw.find(value), std::string::npos);
  for (const auto& rec : s.audit_records())
    EXPECT_EQ(rec.dump().find(value), std::string::npos) << rec.dump();
  // Nor is it stored in the clear.
  ASSERT_TRUE(s.store()
                  .read([&](store::Tx& tx) -> Result<void> {
                    for (const auto& row : GP_TRY(tx.query("SELECT sealed FROM tenant_secrets")))
                      EXPECT_EQ(row.text(0).find(value), std::string::npos);
                    return ok();
                  })
                  .has_value());

  // Another tenant sees none of it, and its own list is empty.
  EXPECT_TRUE(IsProblem(s.request("GET", secrets(a), nullptr, b.admin_token), 404, "not_found"));
  EXPECT_TRUE(IsProblem(s.request("GET", secrets(b) + "/registry.pull", nullptr, b.admin_token),
                        404, "not_found"));
  EXPECT_TRUE(
      IsProblem(s.request("DELETE", secrets(b) + "/registry.pull", nullptr, b.admin_token), 404));
  EXPECT_TRUE(s.request("GET", secrets(b), nullptr, b.admin_token).body.at("items").empty());

  EXPECT_EQ(s.request("DELETE", secrets(a) + "/registry.pull", nullptr, a.admin_token).status, 204);
  EXPECT_TRUE(s.request("GET", secrets(a), nullptr, a.admin_token).body.at("items").empty());
}

template <typename T>
Result<T> found(Result<std::optional<T>> r, std::string_view what) {
  if (!r) return fail(r.error());
  if (!*r) return fail(Error::not_found(std::string(what) + " not found"));
  return std::move(**r);
}

// What the store holds for one secret, and the tenant's keyring.
struct StoredSecret {
  storage::SealedSecret sealed;
  storage::Keyring ring;
};

StoredSecret stored_secret(TestServer& s, const std::string& tenant_id, const std::string& name) {
  StoredSecret out;
  auto r = s.store().read([&](store::Tx& tx) -> Result<void> {
    auto row = GP_TRY(
        found(tx.query_one("SELECT sealed FROM tenant_secrets WHERE tenant_id = ? AND name = ?",
                           {tenant_id, name}),
              "secret"));
    out.sealed = GP_TRY(storage::sealed_secret_from_json(GP_TRY(parse_json(row.text(0)))));
    auto ring = GP_TRY(
        found(tx.query_one("SELECT keyring FROM tenant_keyrings WHERE tenant_id = ?", {tenant_id}),
              "keyring"));
    out.ring = GP_TRY(storage::keyring_from_json(GP_TRY(parse_json(ring.text(0)))));
    return ok();
  });
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return out;
}

TEST_F(Network, OffboardingReleasesTheSegmentAndShredsTheKeys) {
  const std::string value = "s3cret-storage-credential";
  ASSERT_EQ(
      s.request("POST", secrets(a), {{"name", "storage"}, {"value", value}}, a.admin_token).status,
      201);
  ASSERT_EQ(
      s.request("POST", secrets(b), {{"name", "storage"}, {"value", "b-value"}}, b.admin_token)
          .status,
      201);
  std::string ca = get_network(a).at("segment").at("cidr");
  get_network(b);
  const auto& masters = s.api().isolation().master_keys;

  // Before: the platform can open A's secret with A's data key, and not under B's name.
  auto before = stored_secret(s, a.id, "storage");
  auto opened = storage::open_secret(before.ring, masters, before.sealed);
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  EXPECT_EQ(*opened, value);

  ASSERT_EQ(s.request("DELETE", "/v1/tenants/" + a.id, nullptr, s.admin_token()).status, 200);

  // After: the same ciphertext row is still there, but no key opens it.
  auto after = stored_secret(s, a.id, "storage");
  EXPECT_EQ(after.sealed, before.sealed);
  ASSERT_EQ(after.ring.tenants.size(), 1u);
  EXPECT_TRUE(after.ring.tenants[0].destroyed);
  EXPECT_TRUE(after.ring.tenants[0].versions.empty());
  auto shredded = storage::open_secret(after.ring, masters, after.sealed);
  ASSERT_FALSE(shredded.has_value());
  EXPECT_EQ(shredded.error().code, ErrorCode::kPermissionDenied);
  // B's keys are untouched.
  auto b_secret = stored_secret(s, b.id, "storage");
  EXPECT_EQ(storage::open_secret(b_secret.ring, masters, b_secret.sealed).value_or(""), "b-value");

  // The segment is free: the next tenant may get A's CIDR, and the ruleset no longer names it.
  Json nodes = Json::array({{{"inventory", h200_inventory("gpu-a", 2)}}});
  ASSERT_EQ(s.request("POST", "/v1/fleet/import", {{"nodes", nodes}}, s.admin_token()).status, 201);
  auto rules = s.request("GET", "/v1/nodes/gpu-a/nftables", nullptr, s.admin_token());
  ASSERT_EQ(rules.status, 200) << rules.raw;
  EXPECT_EQ(rules.body.at("ruleset").get<std::string>().find(ca), std::string::npos);
  EXPECT_EQ(rules.body.at("segments").size(), 1u);
  TenantInfo c = s.create_tenant("charlie", "charlie-admin");
  EXPECT_EQ(get_network(c).at("segment").at("cidr"), ca);
  // The offboarded tenant has no segment and gets no new one; its offboarding was audited.
  auto gone = s.request("GET", net(a), nullptr, s.admin_token());
  ASSERT_EQ(gone.status, 200) << gone.raw;
  EXPECT_TRUE(gone.body.at("segment").is_null());
  EXPECT_TRUE(IsProblem(s.request("POST", net(a) + "/segment", nullptr, s.admin_token()), 409));
  auto recs = audit_of("tenant.offboard");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].at("detail").at("data_keys"), "destroyed");
}

// Rotation through the API: a new data key version, every secret resealed under it in the same
// transaction (still opening to its value), audited; the old version stays listed; another
// tenant's keys are untouched; bad input changes nothing; an offboarded tenant has nothing to
// rotate; and the automatic rotation age rotates what is older than it, audited as the system.
TEST_F(Network, RotatingATenantKeyResealsItsSecretsUnderTheNewVersion) {
  for (const char* name : {"registry", "storage"})
    ASSERT_EQ(s.request("POST", secrets(a), {{"name", name}, {"value", std::string(name) + "-v"}},
                        a.admin_token)
                  .status,
              201);
  ASSERT_EQ(
      s.request("POST", secrets(b), {{"name", "storage"}, {"value", "b-value"}}, b.admin_token)
          .status,
      201);
  const auto& masters = s.api().isolation().master_keys;
  const std::string keys = "/v1/tenants/" + a.id + "/keys";
  auto before = s.request("GET", keys, nullptr, a.admin_token);
  ASSERT_EQ(before.status, 200) << before.raw;
  EXPECT_EQ(before.body.at("state"), "active");
  EXPECT_EQ(before.body.at("current_version"), 1);
  ASSERT_EQ(before.body.at("versions").size(), 1u);
  EXPECT_EQ(before.body.at("versions")[0].at("secrets"), 2);
  EXPECT_EQ(before.body.at("versions")[0].at("master_key_id"), masters[0].id());
  EXPECT_FALSE(before.body.at("rotated_at").is_null());
  EXPECT_TRUE(IsProblem(s.request("GET", keys, nullptr, b.admin_token), 404));

  // Bad input changes nothing.
  EXPECT_TRUE(IsProblem(s.request("POST", keys + "/rotate", {{"version", 7}}, a.admin_token), 400));
  EXPECT_TRUE(IsProblem(s.request("POST", keys + "/rotate", Json::object(), b.admin_token), 404));
  EXPECT_EQ(s.request("GET", keys, nullptr, a.admin_token).body, before.body);

  s.clock().advance(std::chrono::hours(1));
  auto rotated = s.request("POST", keys + "/rotate", Json::object(), a.admin_token);
  ASSERT_EQ(rotated.status, 200) << rotated.raw;
  EXPECT_EQ(rotated.body.at("current_version"), 2);
  EXPECT_EQ(rotated.body.at("resealed"), 2);
  ASSERT_EQ(rotated.body.at("versions").size(), 2u);
  EXPECT_EQ(rotated.body.at("versions")[0].at("secrets"), 0);
  EXPECT_EQ(rotated.body.at("versions")[1].at("secrets"), 2);
  EXPECT_NE(rotated.body.at("rotated_at"), before.body.at("rotated_at"));
  for (const char* name : {"registry", "storage"}) {
    auto stored = stored_secret(s, a.id, name);
    EXPECT_EQ(stored.sealed.key_version, 2u);
    EXPECT_EQ(storage::open_secret(stored.ring, masters, stored.sealed).value_or(""),
              std::string(name) + "-v");
  }
  auto b_secret = stored_secret(s, b.id, "storage");
  EXPECT_EQ(b_secret.sealed.key_version, 1u);
  EXPECT_EQ(b_secret.ring.tenants.at(0).current_version, 1u);
  auto recs = audit_of("key.rotate");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].at("actor"), a.admin_user_id);
  EXPECT_EQ(recs[0].at("detail").at("version"), 2);
  EXPECT_EQ(recs[0].at("detail").at("resealed"), 2);

  // The rotation age: bravo's key is 91 days old, alpha's (rotated an hour later) is younger.
  s.clock().advance(std::chrono::hours(24 * 91) - std::chrono::minutes(30));
  auto swept = s.api().key_rotation_sweep(std::chrono::hours(24 * 91));
  ASSERT_TRUE(swept.has_value()) << swept.error().message;
  EXPECT_EQ(*swept, 1);
  EXPECT_EQ(stored_secret(s, b.id, "storage").sealed.key_version, 2u);
  EXPECT_EQ(stored_secret(s, a.id, "storage").sealed.key_version, 2u);
  recs = audit_of("key.rotate");
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1].at("actor"), "system");
  EXPECT_EQ(recs[1].at("detail").at("automatic"), true);

  // Offboarded: the keys are destroyed and nothing rotates them back.
  ASSERT_EQ(s.request("DELETE", "/v1/tenants/" + a.id, nullptr, s.admin_token()).status, 200);
  EXPECT_TRUE(IsProblem(s.request("POST", keys + "/rotate", Json::object(), s.admin_token()), 409));
  auto shredded = s.request("GET", keys, nullptr, s.admin_token());
  ASSERT_EQ(shredded.status, 200) << shredded.raw;
  EXPECT_EQ(shredded.body.at("state"), "destroyed");
  EXPECT_TRUE(shredded.body.at("versions").empty());
}

}  // namespace
}  // namespace gp::it
