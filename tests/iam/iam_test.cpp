#include "iam/iam.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gp::iam
