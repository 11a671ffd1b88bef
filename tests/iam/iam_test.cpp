#include "iam/iam.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/env.h"
#include "test_util.h"

namespace gp::iam {
namespace {

using P = Permission;

Principal with(Role role, std::optional<std::string> tenant = std::nullopt,
               std::optional<std::string> project = std::nullopt) {
  Principal p;
  p.kind = PrincipalKind::kUser;
  p.id = "usr_1";
  p.tenant_id = tenant;
  p.bindings.push_back({"rb_1", role, tenant, project, "user", "usr_1"});
  return p;
}

struct Case {
  const char* name;
  Principal who;
  Permission what;
  Scope where;
  Decision want;
};

TEST(Authorize, RoleMatrix) {
  const Scope a = Scope::tenant("ten_a"), b = Scope::tenant("ten_b");
  const Scope a_p1 = Scope::project("ten_a", "prj_1"), a_p2 = Scope::project("ten_a", "prj_2");
  const Scope b_p1 = Scope::project("ten_b", "prj_9");
  std::vector<Case> cases = {
      {"platform admin anything", with(Role::kPlatformAdmin), P::kTenantCreate, Scope::platform(),
       Decision::kAllow},
      {"platform admin in any tenant", with(Role::kPlatformAdmin), P::kIdentityWrite, b,
       Decision::kAllow},
      {"operator reads tenants", with(Role::kPlatformOperator), P::kProjectRead, b_p1,
       Decision::kAllow},
      {"operator cannot create tenants", with(Role::kPlatformOperator), P::kTenantCreate,
       Scope::platform(), Decision::kDeny},
      {"operator answers admission reviews", with(Role::kPlatformOperator), P::kAdmissionReview,
       Scope::platform(), Decision::kAllow},
      {"auditor cannot answer admission reviews", with(Role::kAuditor), P::kAdmissionReview,
       Scope::platform(), Decision::kDeny},
      {"tenant admin cannot answer admission reviews", with(Role::kTenantAdmin, "ten_a"),
       P::kAdmissionReview, Scope::platform(), Decision::kDeny},
      {"auditor reads audit", with(Role::kAuditor), P::kAuditRead, a, Decision::kAllow},
      {"auditor cannot write", with(Role::kAuditor), P::kIdentityWrite, a, Decision::kDeny},
      {"tenant admin in own tenant", with(Role::kTenantAdmin, "ten_a"), P::kIdentityWrite, a,
       Decision::kAllow},
      {"tenant admin in own projects", with(Role::kTenantAdmin, "ten_a"), P::kProjectDelete, a_p2,
       Decision::kAllow},
      {"tenant admin elsewhere is hidden", with(Role::kTenantAdmin, "ten_a"), P::kTenantRead, b,
       Decision::kHidden},
      {"tenant admin elsewhere project hidden", with(Role::kTenantAdmin, "ten_a"), P::kProjectRead,
       b_p1, Decision::kHidden},
      {"tenant admin cannot create tenants", with(Role::kTenantAdmin, "ten_a"), P::kTenantCreate,
       Scope::platform(), Decision::kDeny},
      {"tenant admin cannot suspend itself", with(Role::kTenantAdmin, "ten_a"), P::kTenantUpdate, a,
       Decision::kDeny},
      {"billing reads billing", with(Role::kTenantBilling, "ten_a"), P::kBillingRead, a,
       Decision::kAllow},
      {"billing cannot manage identities", with(Role::kTenantBilling, "ten_a"), P::kIdentityWrite,
       a, Decision::kDeny},
      {"billing reads usage", with(Role::kTenantBilling, "ten_a"), P::kUsageRead, a,
       Decision::kAllow},
      {"billing cannot post usage", with(Role::kTenantBilling, "ten_a"), P::kUsageWrite, a,
       Decision::kDeny},
      {"tenant admin posts its tenant's usage", with(Role::kTenantAdmin, "ten_a"), P::kUsageWrite,
       a, Decision::kAllow},
      {"tenant admin cannot post another's usage", with(Role::kTenantAdmin, "ten_a"),
       P::kUsageWrite, b, Decision::kHidden},
      {"operator posts usage for every tenant", with(Role::kPlatformOperator), P::kUsageWrite, b,
       Decision::kAllow},
      {"operator reads usage platform-wide", with(Role::kPlatformOperator), P::kUsageRead,
       Scope::platform(), Decision::kAllow},
      {"auditor cannot post usage", with(Role::kAuditor), P::kUsageWrite, a, Decision::kDeny},
      {"project member cannot read tenant usage", with(Role::kProjectMember, "ten_a", "prj_1"),
       P::kUsageRead, a, Decision::kDeny},
      {"project member in its project", with(Role::kProjectMember, "ten_a", "prj_1"),
       P::kAllocationWrite, a_p1, Decision::kAllow},
      {"project member in another project", with(Role::kProjectMember, "ten_a", "prj_1"),
       P::kProjectRead, a_p2, Decision::kDeny},
      {"project member tenant-wide", with(Role::kProjectMember, "ten_a", "prj_1"),
       P::kIdentityWrite, a, Decision::kDeny},
      {"project member reads its tenant", with(Role::kProjectMember, "ten_a", "prj_1"),
       P::kTenantRead, a, Decision::kAllow},
      {"viewer cannot allocate", with(Role::kProjectViewer, "ten_a", "prj_1"), P::kAllocationWrite,
       a_p1, Decision::kDeny},
      {"project admin binds in project", with(Role::kProjectAdmin, "ten_a", "prj_1"),
       P::kBindingWrite, a_p1, Decision::kAllow},
      {"project admin not tenant-wide", with(Role::kProjectAdmin, "ten_a", "prj_1"),
       P::kBindingWrite, a, Decision::kDeny},
  };
  for (const auto& c : cases) EXPECT_EQ(authorize(c.who, c.what, c.where), c.want) << c.name;
}

TEST(Authorize, AnonymousIsDenied) {
  EXPECT_EQ(authorize(Principal{}, P::kTenantRead, Scope::tenant("ten_a")), Decision::kDeny);
}

TEST(Authorize, HomeTenantWithoutBindingsSeesOnlyTheTenantRecord) {
  Principal p;
  p.kind = PrincipalKind::kUser;
  p.tenant_id = "ten_a";
  EXPECT_EQ(authorize(p, P::kTenantRead, Scope::tenant("ten_a")), Decision::kAllow);
  EXPECT_EQ(authorize(p, P::kProjectRead, Scope::project("ten_a", "prj_1")), Decision::kDeny);
  EXPECT_EQ(authorize(p, P::kTenantRead, Scope::tenant("ten_b")), Decision::kHidden);
}

TEST(MayGrant, NoEscalation) {
  auto ta = with(Role::kTenantAdmin, "ten_a");
  EXPECT_TRUE(may_grant(ta, Role::kProjectMember, Scope::project("ten_a", "prj_1")));
  EXPECT_TRUE(may_grant(ta, Role::kTenantAdmin, Scope::tenant("ten_a")));
  EXPECT_FALSE(may_grant(ta, Role::kPlatformAdmin, Scope::platform()));
  EXPECT_FALSE(may_grant(ta, Role::kTenantAdmin, Scope::tenant("ten_b")));
  // Level must match the scope: a project role is never bound tenant-wide.
  EXPECT_FALSE(may_grant(ta, Role::kProjectMember, Scope::tenant("ten_a")));
  auto pa = with(Role::kProjectAdmin, "ten_a", "prj_1");
  EXPECT_TRUE(may_grant(pa, Role::kProjectViewer, Scope::project("ten_a", "prj_1")));
  EXPECT_FALSE(may_grant(pa, Role::kProjectViewer, Scope::project("ten_a", "prj_2")));
  EXPECT_FALSE(may_grant(pa, Role::kTenantAdmin, Scope::tenant("ten_a")));
  EXPECT_TRUE(may_grant(with(Role::kPlatformAdmin), Role::kAuditor, Scope::platform()));
  EXPECT_FALSE(may_grant(with(Role::kPlatformOperator), Role::kAuditor, Scope::platform()));
}

TEST(Roles, NamesRoundTrip) {
  for (Role r : all_roles()) EXPECT_EQ(parse_role(role_name(r)), r);
  EXPECT_FALSE(parse_role("root"));
  EXPECT_EQ(all_roles().size(), 8u);
}

TEST(Tokens, IssuedTokensParseAndHashToStoredValue) {
  auto t = issue_token("key_abc", system_random());
  auto p = parse_token(t.token);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->id, "key_abc");
  EXPECT_EQ(hash_secret(p->secret), t.secret_hash);
  EXPECT_EQ(t.token.find(t.secret_hash), std::string::npos);
  for (auto bad : {"", "key_abc", "key_abc.", ".secret", "key_abc.short", "key abc.x"})
    EXPECT_FALSE(parse_token(bad)) << bad;
}

TEST(Passwords, Argon2idHashesVerify) {
  auto h = hash_password("correct horse battery");
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->starts_with("$argon2id$"));
  EXPECT_TRUE(verify_password(*h, "correct horse battery"));
  EXPECT_FALSE(verify_password(*h, "correct horse batterY"));
  EXPECT_FALSE(validate_password_strength("short"));
  EXPECT_TRUE(validate_password_strength("twelve chars"));
}

// The authenticator reads iam's own tables; what it must know of tenants and nodes (rows of
// modules above iam) it asks the lookups it was built with: tenancy's and fleet's in a server
// (api::Api), fakes here.
class AuthenticatorLookups : public ::testing::Test {
 protected:
  AuthenticatorLookups() : store_(gp::testing::open_store(dir_)) {
    gp::testing::must_write(*store_, [](store::Tx& tx) -> Result<int> {
      GP_TRY_VOID(gp::testing::insert_bare_tenants(tx, {"ten_a"}));
      return 0;
    });
  }

  // A lookup that answers from offboarding_ and counts how often it is asked.
  TenantLookup fake_tenants(std::vector<std::string> tables = {}) {
    return {.offboarding = [this](store::Tx&, const std::string& tenant_id) -> Result<bool> {
              ++asked_;
              return offboarding_.contains(tenant_id);
            },
            .tables = std::move(tables)};
  }
  // A key of a new user of `owner`.
  std::string key_of_user(const Owner& owner, const std::string& username) {
    return gp::testing::must_write(*store_, [&](store::Tx& tx) -> Result<std::string> {
      auto u = GP_TRY(create_user(tx, w_, owner, {username, "", "", {}}));
      auto k = GP_TRY(create_api_key(tx, w_, owner, {"k", "user", u.id, {}}));
      return k.token;
    });
  }

  gp::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  ManualClock clock_{from_unix_micros(1'800'000'000'000'000)};
  SeededIdSource ids_{1};
  Env w_{clock_, ids_};
  std::set<std::string> offboarding_;
  int asked_ = 0;
};

TEST_F(AuthenticatorLookups, APrincipalOfATenantBeingOffboardedIsRefused) {
  Authenticator authn(*store_, clock_, fake_tenants(), {});
  const std::string tenant_key = key_of_user(TenantScope("ten_a"), "alice");
  const std::string platform_key = key_of_user(std::nullopt, "root");
  ASSERT_TRUE(authn.authenticate(tenant_key));
  EXPECT_EQ(asked_, 1) << "one question per authentication read from the store";
  ASSERT_TRUE(authn.authenticate(platform_key));
  EXPECT_EQ(asked_, 1) << "a platform principal has no tenant to ask about";

  offboarding_.insert("ten_a");
  authn.set_caching(false);  // the fake's answer is no table the store counts
  auto refused = authn.authenticate(tenant_key);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(refused.error().message, "tenant is being offboarded");
  EXPECT_TRUE(authn.authenticate(platform_key));
}

// What a kept principal rests on includes the lookup's tables: a change to one ends it before
// the write is answered, as a change to iam's own tables does.
TEST_F(AuthenticatorLookups, AChangeToALookupsTableEndsTheKeptPrincipals) {
  TenantLookup from_store{
      .offboarding = [this](store::Tx& tx, const std::string& tenant_id) -> Result<bool> {
        ++asked_;
        auto row = GP_TRY(tx.query_one("SELECT state FROM tenants WHERE id = ?", {tenant_id}));
        return row && row->text(0) == "offboarding";
      },
      .tables = {"tenants"}};
  Authenticator authn(*store_, clock_, std::move(from_store), {});
  const std::string key = key_of_user(TenantScope("ten_a"), "alice");
  ASSERT_TRUE(authn.authenticate(key));
  ASSERT_TRUE(authn.authenticate(key));
  EXPECT_EQ(asked_, 1) << "the second authentication was answered from what was kept";

  gp::testing::must_write(*store_, [](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(tx.exec("UPDATE tenants SET state = 'offboarding' WHERE id = 'ten_a'"));
    return 0;
  });
  auto refused = authn.authenticate(key);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "tenant is being offboarded");
  EXPECT_EQ(asked_, 2);
}

// Refused rather than let in unchecked: a tenant's principal needs someone to ask.
TEST_F(AuthenticatorLookups, WithoutATenantLookupATenantsPrincipalIsRefused) {
  Authenticator authn(*store_, clock_, {}, {});
  auto refused = authn.authenticate(key_of_user(TenantScope("ten_a"), "alice"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(authn.authenticate(key_of_user(std::nullopt, "root")));
}

// Node agents' credentials are the node owner's (fleet's); the authenticator compares the
// secret's hash, and reads it again for every request (nothing of a node is kept).
TEST_F(AuthenticatorLookups, NodeCredentialsComeFromTheNodeLookup) {
  const IssuedToken issued = issue_token("nod_1", system_random());
  std::map<std::string, NodeCredential> nodes = {
      {"nod_1", NodeCredential{.name = "gpu-1", .secret_hash = issued.secret_hash}}};
  Authenticator authn(
      *store_, clock_, fake_tenants(),
      [&](store::Tx&, const std::string& id) -> Result<std::optional<NodeCredential>> {
        auto it = nodes.find(id);
        if (it == nodes.end()) return std::optional<NodeCredential>();
        return std::optional<NodeCredential>(it->second);
      });
  auto node = authn.authenticate(issued.token);
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->kind, PrincipalKind::kNode);
  EXPECT_EQ(node->id, "nod_1");
  EXPECT_EQ(node->name, "gpu-1");
  EXPECT_EQ(node->credential_id, "nod_1");
  EXPECT_TRUE(node->bindings.empty());

  const std::string forged = "nod_1." + std::string(43, 'A');
  EXPECT_EQ(authn.authenticate(forged).error().message, "unknown or revoked node credential");
  nodes["nod_1"].secret_hash.reset();  // revoked: no store write, refused at the next request
  EXPECT_EQ(authn.authenticate(issued.token).error().message, "unknown or revoked node credential");
  nodes.erase("nod_1");
  EXPECT_EQ(authn.authenticate(issued.token).error().message, "unknown or revoked node credential");
  EXPECT_EQ(asked_, 0);

  Authenticator without_nodes(*store_, clock_, fake_tenants(), {});
  EXPECT_EQ(without_nodes.authenticate(issue_token("nod_2", system_random()).token).error().message,
            "unknown or revoked node credential");
}

}  // namespace
}  // namespace gp::iam
