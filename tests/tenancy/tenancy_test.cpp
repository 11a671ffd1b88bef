#include "tenancy/tenancy.h"

#include <gtest/gtest.h>

#include <map>

#include "common/env.h"
#include "policy/policy.h"
#include "test_util.h"

namespace gp::tenancy {
namespace {

using gp::testing::TempDir;

class TenancyTest : public ::testing::Test {
 protected:
  TenancyTest() : store_(gp::testing::open_store(dir_)) {}

  template <typename F>
  auto write(F&& f) {
    return gp::testing::must_write(*store_, std::forward<F>(f));
  }
  template <typename F>
  Error write_error(F&& f) {
    return gp::testing::must_fail(*store_, std::forward<F>(f));
  }
  Tenant tenant(const std::string& name) {
    return write([&](store::Tx& tx) { return create_tenant(tx, w_, {name, "", {}, {}}); });
  }

  TempDir dir_;
  std::unique_ptr<store::Store> store_;
  ManualClock clock_{from_unix_micros(1'800'000'000'000'000)};
  SeededIdSource ids_{1};
  Env w_{clock_, ids_};
};

TEST_F(TenancyTest, TenantNamesAreUniqueAndValidated) {
  tenant("acme");
  EXPECT_EQ(write_error([&](store::Tx& tx) {
              return create_tenant(tx, w_, {"acme", "", {}, {}});
            }).code,
            ErrorCode::kConflict);
  EXPECT_EQ(write_error([&](store::Tx& tx) {
              return create_tenant(tx, w_, {"Acme!", "", {}, {}});
            }).code,
            ErrorCode::kInvalidArgument);
}

// Issue 24: tenant "acme", project "labs-research" and tenant "acme-labs", project "research"
// would share the namespace "acme-labs-research". Refusing the second tenant name makes
// namespaces unique by construction, whatever projects tenants create later.
TEST_F(TenancyTest, TenantNamesThatExtendAnotherAtAHyphenAreRefused) {
  tenant("acme");
  for (const char* name : {"acme-labs", "acme-1", "acme--x"}) {
    auto e = write_error([&](store::Tx& tx) { return create_tenant(tx, w_, {name, "", {}, {}}); });
    EXPECT_EQ(e.code, ErrorCode::kConflict) << name;
    EXPECT_NE(e.message.find("'acme'"), std::string::npos) << e.message;
  }
  tenant("beta-labs");
  for (const char* name : {"beta", "beta-labs-x"}) {
    auto e = write_error([&](store::Tx& tx) { return create_tenant(tx, w_, {name, "", {}, {}}); });
    EXPECT_EQ(e.code, ErrorCode::kConflict) << name;
    EXPECT_NE(e.message.find("'beta-labs'"), std::string::npos) << e.message;
  }
  // Prefixes that do not end at a '-' share nothing.
  for (const char* name : {"acmelabs", "acm", "beta-lab", "beta-labsx"}) tenant(name);
  EXPECT_TRUE(policy::tenant_names_share_namespaces("a", "a-b"));
  EXPECT_TRUE(policy::tenant_names_share_namespaces("a-b", "a"));
  EXPECT_FALSE(policy::tenant_names_share_namespaces("a", "a"));
  EXPECT_FALSE(policy::tenant_names_share_namespaces("a", "ab-c"));
}

// A stored state this build does not know (written by a newer one, or by hand) is an error, not
// the first state: reading "archived" as "active" would let a tenant that may not act act.
TEST_F(TenancyTest, ATenantWhoseStoredStateIsUnknownIsNotReadAsActive) {
  const Tenant t = tenant("acme");
  write([&](store::Tx& tx) {
    return tx.exec("UPDATE tenants SET state = 'archived' WHERE id = ?", {t.id});
  });
  for (auto e : {write_error([&](store::Tx& tx) { return find_tenant(tx, "acme"); }),
                 write_error([&](store::Tx& tx) { return list_tenants(tx, {}, std::nullopt); })}) {
    EXPECT_EQ(e.code, ErrorCode::kInternal);
    EXPECT_NE(e.message.find("state"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("'archived'"), std::string::npos) << e.message;
  }
}

TEST_F(TenancyTest, EachProjectKeepsItsNamespaceAndTheWebhookFindsItsOwnerByIt) {
  auto acme = tenant("acme");
  auto p = write([&](store::Tx& tx) {
    return create_project(tx, w_, TenantScope(acme.id), {"train", ""});
  });
  EXPECT_EQ(p.kubernetes_namespace, "acme-train");
  EXPECT_EQ(p.to_json().at("kubernetes_namespace"), "acme-train");
  auto found = write([&](store::Tx& tx) { return find_project_by_namespace(tx, "acme-train"); });
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, p.id);
  EXPECT_FALSE(write([&](store::Tx& tx) { return find_project_by_namespace(tx, "acme-nope"); }));
  // A name too long for a namespace gets none (the bundle says so) and owns nothing.
  std::string long_name(60, 'x');
  auto q = write([&](store::Tx& tx) {
    return create_project(tx, w_, TenantScope(acme.id), {long_name, ""});
  });
  EXPECT_FALSE(q.kubernetes_namespace);
  EXPECT_TRUE(q.to_json().at("kubernetes_namespace").is_null());
  EXPECT_EQ(write_error([&](store::Tx& tx) {
              return create_project(tx, w_, TenantScope(acme.id), {"train", ""});
            }).message,
            "a project named 'train' already exists");
}

// A store from before migration 20 may hold tenant names that extend one another and, with
// them, two projects with one namespace. The migration gives every project the namespace it
// had, the older project keeps a contested one, and from then on nobody takes another's.
TEST(TenancyMigration, ExistingProjectsGetTheirNamespacesAndTheOlderOneKeepsAContestedOne) {
  gp::testing::TempDir dir;
  {
    auto store = gp::testing::open_store(dir);
    gp::testing::must_write(*store, [](store::Tx& tx) -> Result<bool> {
      const std::string long_tenant(40, 'l');
      for (const std::string& sql :
           {// The schema as it was before migration 20.
            std::string("DROP INDEX projects_k8s_namespace"),
            std::string("ALTER TABLE projects DROP COLUMN k8s_namespace"),
            std::string("ALTER TABLE nodes DROP COLUMN gpu_runtime"),
            std::string("DELETE FROM schema_migrations WHERE version = 20"),
            // acme-labs' research came first; acme's labs-research produced its namespace.
            std::string("INSERT INTO tenants VALUES ('ten_a', 'acme', 'acme', 'standard', "
                        "'active', '{}', 1, 1, 1)"),
            std::string("INSERT INTO tenants VALUES ('ten_b', 'acme-labs', 'acme-labs', "
                        "'standard', 'active', '{}', 2, 2, 1)"),
            "INSERT INTO tenants VALUES ('ten_c', '" + long_tenant +
                "', 'l', 'standard', "
                "'active', '{}', 3, 3, 1)",
            std::string("INSERT INTO projects VALUES ('prj_1', 'ten_b', 'research', 'r', 10, "
                        "10, 1)"),
            std::string("INSERT INTO projects VALUES ('prj_2', 'ten_a', 'labs-research', 'r', "
                        "20, 20, 1)"),
            std::string("INSERT INTO projects VALUES ('prj_3', 'ten_a', 'train', 't', 5, 5, "
                        "1)"),
            std::string("INSERT INTO projects VALUES ('prj_4', 'ten_c', "
                        "'a-project-name-of-thirty-chars', 'p', 6, 6, 1)")})
        GP_TRY_VOID(tx.exec(sql));
      return true;
    });
  }
  auto store = gp::testing::open_store(dir);  // applies migration 20
  ManualClock clock{from_unix_micros(1'800'000'000'000'000)};
  SeededIdSource ids{7};
  Env w{clock, ids};
  std::map<std::string, std::optional<std::string>> ns;
  for (const char* t : {"ten_a", "ten_b", "ten_c"})
    for (const auto& p :
         gp::testing::must_write(*store, [&](store::Tx& tx) {
           return list_projects(tx, TenantScope(t), {std::nullopt, 100}, std::nullopt);
         }).items)
      ns[p.id] = p.kubernetes_namespace;
  EXPECT_EQ(ns["prj_1"], "acme-labs-research");
  EXPECT_EQ(ns["prj_2"], std::nullopt) << "the later project of the contested namespace";
  EXPECT_EQ(ns["prj_3"], "acme-train");
  EXPECT_EQ(ns["prj_4"], std::nullopt) << "longer than 63 characters";
  auto owner = gp::testing::must_write(
      *store, [](store::Tx& tx) { return find_project_by_namespace(tx, "acme-labs-research"); });
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->tenant_id, "ten_b");
  // First come, first served from now on, and the refusal names no other tenant.
  auto mine = gp::testing::must_write(*store, [&](store::Tx& tx) {
    return create_project(tx, w, TenantScope("ten_a"), {"labs-new", ""});
  });
  EXPECT_EQ(mine.kubernetes_namespace, "acme-labs-new");
  auto e = gp::testing::must_fail(*store, [&](store::Tx& tx) {
    return create_project(tx, w, TenantScope("ten_b"), {"new", ""});
  });
  EXPECT_EQ(e.code, ErrorCode::kConflict);
  EXPECT_EQ(e.message.find("ten_a"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find("'acme'"), std::string::npos) << e.message;
}

TEST_F(TenancyTest, ProjectsAreOnlyVisibleThroughTheirTenantScope) {
  auto a = tenant("a");
  auto b = tenant("b");
  auto pa = write([&](store::Tx& tx) {
    return create_project(tx, w_, TenantScope(a.id), {"ml", ""});
  });
  // Same name in another tenant is fine; lookup by id through the wrong scope finds nothing.
  write([&](store::Tx& tx) { return create_project(tx, w_, TenantScope(b.id), {"ml", ""}); });
  auto via_b = write([&](store::Tx& tx) { return find_project(tx, TenantScope(b.id), pa.id); });
  EXPECT_FALSE(via_b);
  auto via_a = write([&](store::Tx& tx) { return find_project(tx, TenantScope(a.id), "ml"); });
  ASSERT_TRUE(via_a);
  EXPECT_EQ(via_a->id, pa.id);
  EXPECT_EQ(
      write_error([&](store::Tx& tx) { return delete_project(tx, TenantScope(b.id), pa.id); }).code,
      ErrorCode::kNotFound);
}

TEST_F(TenancyTest, PaginationVisitsEveryItemOnce) {
  auto a = tenant("a");
  for (int i = 0; i < 23; ++i)
    write([&](store::Tx& tx) {
      return create_project(tx, w_, TenantScope(a.id), {"p" + std::to_string(i), ""});
    });
  std::set<std::string> seen;
  PageRequest page{std::nullopt, 10};
  int pages = 0;
  for (;;) {
    auto p = write(
        [&](store::Tx& tx) { return list_projects(tx, TenantScope(a.id), page, std::nullopt); });
    ++pages;
    for (const auto& x : p.items) EXPECT_TRUE(seen.insert(x.id).second);
    if (!p.next) break;
    page.after = p.next;
  }
  EXPECT_EQ(seen.size(), 23u);
  EXPECT_EQ(pages, 3);
}

TEST_F(TenancyTest, IfMatchGuardsUpdates) {
  auto a = tenant("a");
  TenantPatch patch;
  patch.display_name = "Acme Corp";
  EXPECT_EQ(write_error([&](store::Tx& tx) {
              return update_tenant(tx, w_, TenantScope(a.id), patch, 7);
            }).code,
            ErrorCode::kPreconditionFailed);
  auto t = write([&](store::Tx& tx) { return update_tenant(tx, w_, TenantScope(a.id), patch, 1); });
  EXPECT_EQ(t.version, 2);
  EXPECT_EQ(t.display_name, "Acme Corp");
}

// What PathCache keeps at one generation is what it answers at that generation, and only
// then: any change to a tenant or project row moves the store's generation on.
TEST_F(TenancyTest, PathCacheAnswersFromWhatItKeptOnlyAtTheSameGeneration) {
  PathCache paths(*store_);
  auto a = tenant("a");
  write([&](store::Tx& tx) { return create_project(tx, w_, TenantScope(a.id), {"ml", ""}); });
  auto read = [&](std::optional<uint64_t> generation) {
    std::pair<std::string, std::string> shown;
    EXPECT_TRUE(store_->read([&](store::Tx& tx) -> Result<void> {
      shown.first = GP_TRY(paths.tenant(tx, "a", generation)).value().display_name;
      shown.second =
          GP_TRY(paths.project(tx, TenantScope(a.id), "ml", generation)).value().display_name;
      return ok();
    }));
    return shown;
  };
  const auto before = store_->generation();
  ASSERT_TRUE(before);
  EXPECT_EQ(read(before), (std::pair<std::string, std::string>{"a", "ml"}));

  TenantPatch patch;
  patch.display_name = "Acme";
  write([&](store::Tx& tx) { return update_tenant(tx, w_, TenantScope(a.id), patch, 1); });
  write([&](store::Tx& tx) {
    return update_project(tx, w_, TenantScope(a.id), "ml", std::string("Models"), std::nullopt);
  });
  const auto after = store_->generation();
  ASSERT_TRUE(after);
  EXPECT_NE(after, before) << "changing a tenant or project row moves the generation";
  // At the old generation the kept rows answer (proof that they were kept); at the store's
  // own, the changed ones; without a generation, the store always.
  EXPECT_EQ(read(before), (std::pair<std::string, std::string>{"a", "ml"}));
  EXPECT_EQ(read(after), (std::pair<std::string, std::string>{"Acme", "Models"}));
  EXPECT_EQ(read(std::nullopt), (std::pair<std::string, std::string>{"Acme", "Models"}));
  // A store that is not the sole writer (a follower's) vouches for nothing.
  store_->set_sole_writer(false);
  EXPECT_FALSE(store_->generation());
}

// One authenticator for the whole test, as a server has: what it keeps between requests must
// never outlive a revocation.
class AuthTest : public TenancyTest {
 protected:
  Result<iam::Principal> auth(const std::string& token) { return authn_.authenticate(token); }
  iam::Authenticator authn_{*store_, clock_, tenant_lookup(), {}};
};

TEST_F(AuthTest, KeysExpireAndRevocationTakesEffectAtOnce) {
  auto a = tenant("a");
  TenantScope s(a.id);
  auto u = write([&](store::Tx& tx) { return create_user(tx, w_, s, {"alice", "", "", {}}); });
  auto key = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k", "user", u.id, w_.now() + 60'000'000});
  });
  auto p = auth(key.token);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->id, u.id);
  EXPECT_EQ(p->tenant_id, a.id);
  clock_.advance(std::chrono::seconds(61));
  EXPECT_EQ(auth(key.token).error().message, "credential has expired");

  auto key2 = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k2", "user", u.id, {}});
  });
  ASSERT_TRUE(auth(key2.token));
  write([&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(revoke_api_key(tx, w_, s, key2.key.id));
    return 0;
  });
  EXPECT_EQ(auth(key2.token).error().message, "credential has been revoked");
  // A wrong secret for a real key id is refused the same way as an unknown key.
  std::string forged = key2.key.id + "." + std::string(43, 'A');
  EXPECT_EQ(auth(forged).error().message, "unknown or invalid credential");
}

// The lifetime cap holds however the expiry is given: as ttl_seconds or as an expires_at time.
TEST_F(TenancyTest, ApiKeyLifetimeIsCappedAtTenYearsEitherWay) {
  auto parse = [&](const Json& body) -> Result<ApiKeySpec> {
    ObjectReader r(body, "api key");
    auto spec = parse_api_key_spec(r, w_);
    GP_TRY_VOID(r.finish());
    return spec;
  };
  const TimePoint cap = clock_.now() + std::chrono::seconds(kMaxApiKeyLifetimeSeconds);
  auto at = parse({{"expires_at", format_rfc3339(cap)}});
  ASSERT_TRUE(at) << at.error().message;
  EXPECT_EQ(at->expires_at, to_unix_micros(cap));
  for (const std::string& too_late :
       {format_rfc3339(cap + std::chrono::seconds(1)), std::string("9999-12-31T23:59:59Z")}) {
    auto r = parse({{"expires_at", too_late}});
    ASSERT_FALSE(r) << too_late << " was accepted";
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("expires_at"), std::string::npos) << r.error().message;
  }
  auto ttl = parse({{"ttl_seconds", kMaxApiKeyLifetimeSeconds}});
  ASSERT_TRUE(ttl) << ttl.error().message;
  EXPECT_EQ(ttl->expires_at, to_unix_micros(cap));
  EXPECT_FALSE(parse({{"ttl_seconds", kMaxApiKeyLifetimeSeconds + 1}}));
}

TEST_F(AuthTest, OffboardingRevokesEveryCredentialOfTheTenant) {
  auto a = tenant("a");
  TenantScope s(a.id);
  auto u = write([&](store::Tx& tx) { return create_user(tx, w_, s, {"alice", "", "", {}}); });
  auto key = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k", "user", u.id, {}});
  });
  auto sess =
      write([&](store::Tx& tx) { return create_session(tx, w_, u.id, std::chrono::hours(1)); });
  ASSERT_TRUE(auth(key.token));
  ASSERT_TRUE(auth(sess.token));
  write([&](store::Tx& tx) { return offboard_tenant(tx, w_, s, std::nullopt); });
  EXPECT_FALSE(auth(key.token));
  EXPECT_FALSE(auth(sess.token));
}

// The authenticator asks tenancy (tenant_lookup) whether a principal's tenant is being
// offboarded, and keeps principals only until the tenants table changes: a key made after the
// offboarding is refused, and so is one already kept when the tenant's state changes.
TEST_F(AuthTest, APrincipalOfAnOffboardedTenantIsRefusedEvenWhenKept) {
  auto a = tenant("a");
  TenantScope s(a.id);
  auto u = write([&](store::Tx& tx) { return create_user(tx, w_, s, {"alice", "", "", {}}); });
  auto key = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k", "user", u.id, {}});
  });
  ASSERT_TRUE(auth(key.token));
  write([&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(tx.exec("UPDATE tenants SET state = 'offboarding' WHERE id = ?", {a.id}));
    return 0;
  });
  EXPECT_EQ(auth(key.token).error().message, "tenant is being offboarded");

  auto b = tenant("b");
  TenantScope sb(b.id);
  auto ub = write([&](store::Tx& tx) { return create_user(tx, w_, sb, {"bob", "", "", {}}); });
  write([&](store::Tx& tx) { return offboard_tenant(tx, w_, sb, std::nullopt); });
  auto late = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, sb, {"late", "user", ub.id, {}});
  });
  EXPECT_EQ(auth(late.token).error().message, "tenant is being offboarded");
}

TEST_F(AuthTest, DeletedUserLosesKeysAndBindings) {
  auto a = tenant("a");
  TenantScope s(a.id);
  auto u = write([&](store::Tx& tx) { return create_user(tx, w_, s, {"alice", "", "", {}}); });
  write([&](store::Tx& tx) {
    return create_binding(tx, w_, s, iam::Scope::tenant(a.id),
                          {iam::Role::kTenantAdmin, "user", u.id, {}});
  });
  auto key = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k", "user", u.id, {}});
  });
  ASSERT_EQ(auth(key.token)->bindings.size(), 1u);
  write([&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(delete_user(tx, w_, s, u.id));
    return 0;
  });
  EXPECT_FALSE(auth(key.token));
  // The username is free again.
  write([&](store::Tx& tx) { return create_user(tx, w_, s, {"alice", "", "", {}}); });
}

TEST_F(AuthTest, AGrantOrARemovalIsSeenByTheNextRequest) {
  auto a = tenant("a");
  TenantScope s(a.id);
  auto u = write([&](store::Tx& tx) { return create_user(tx, w_, s, {"alice", "", "", {}}); });
  auto key = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k", "user", u.id, {}});
  });
  ASSERT_EQ(auth(key.token)->bindings.size(), 0u);
  auto b = write([&](store::Tx& tx) {
    return create_binding(tx, w_, s, iam::Scope::tenant(a.id),
                          {iam::Role::kTenantAdmin, "user", u.id, {}});
  });
  ASSERT_EQ(auth(key.token)->bindings.size(), 1u);
  write([&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(delete_binding(tx, s, b.id));
    return 0;
  });
  EXPECT_EQ(auth(key.token)->bindings.size(), 0u);
}

// The authenticator keeps principals between requests, and only a write through its own store
// ends them: a write this store did not make (another process's, as a follower would see) goes
// unseen, which is why a follower keeps nothing (Api::set_role: no principals, and no reader
// snapshots in the store).
TEST_F(AuthTest, PrincipalsAreKeptUntilTheirOwnStoreChangesThem) {
  auto a = tenant("a");
  TenantScope s(a.id);
  auto u = write([&](store::Tx& tx) { return create_user(tx, w_, s, {"alice", "", "", {}}); });
  auto key = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k", "user", u.id, {}});
  });
  ASSERT_TRUE(auth(key.token));
  auto other = gp::testing::open_store(dir_);
  gp::testing::must_write(*other, [&](store::Tx& tx) -> Result<int> {
    GP_TRY_VOID(revoke_api_key(tx, w_, s, key.key.id));
    return 0;
  });
  EXPECT_TRUE(auth(key.token)) << "kept: this store did not see the revocation";
  authn_.set_caching(false);
  store_->set_sole_writer(false);
  EXPECT_EQ(auth(key.token).error().message, "credential has been revoked");
  // A wrong secret is refused even while the key's principal is kept.
  authn_.set_caching(true);
  store_->set_sole_writer(true);
  auto key2 = write([&](store::Tx& tx) {
    return create_api_key(tx, w_, s, {"k2", "user", u.id, {}});
  });
  ASSERT_TRUE(auth(key2.token));
  EXPECT_EQ(auth(key2.key.id + "." + std::string(43, 'A')).error().message,
            "unknown or invalid credential");
}

TEST_F(TenancyTest, BindingsOnlyForSubjectsOfTheSameTenant) {
  auto a = tenant("a");
  auto b = tenant("b");
  auto ub = write([&](store::Tx& tx) {
    return create_user(tx, w_, TenantScope(b.id), {"bob", "", "", {}});
  });
  auto e = write_error([&](store::Tx& tx) {
    return create_binding(tx, w_, TenantScope(a.id), iam::Scope::tenant(a.id),
                          {iam::Role::kTenantAdmin, "user", ub.id, {}});
  });
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
}

TEST_F(TenancyTest, PasswordCheckDoesNotRevealWhichPartWasWrong) {
  write([&](store::Tx& tx) {
    return create_user(tx, w_, std::nullopt,
                       {"carol", "", "", std::string("a good long password")});
  });
  auto good =
      write([&](store::Tx& tx) { return check_password(tx, "carol", "a good long password"); });
  EXPECT_TRUE(good.starts_with("usr_"));
  auto wrong_pw =
      write_error([&](store::Tx& tx) { return check_password(tx, "carol", "nope nope nope"); });
  auto no_user =
      write_error([&](store::Tx& tx) { return check_password(tx, "dave", "nope nope nope"); });
  EXPECT_EQ(wrong_pw.message, no_user.message);
  EXPECT_EQ(wrong_pw.code, ErrorCode::kUnauthenticated);
}

TEST_F(TenancyTest, UsernamesAreScopedToTheirTenant) {
  // A tenant must not learn that another tenant has a user of some name: the same name is
  // free in every tenant, and login names the tenant.
  auto a = tenant("a");
  auto b = tenant("b");
  std::string pw = "a good long password";
  auto ua = write([&](store::Tx& tx) {
    return create_user(tx, w_, TenantScope(a.id), {"bob", "", "", pw});
  });
  auto ub = write([&](store::Tx& tx) {
    return create_user(tx, w_, TenantScope(b.id), {"bob", "", "", pw});
  });
  EXPECT_NE(ua.id, ub.id);
  EXPECT_EQ(write([&](store::Tx& tx) { return check_password(tx, "a/bob", pw); }), ua.id);
  EXPECT_EQ(write([&](store::Tx& tx) { return check_password(tx, "b/bob", pw); }), ub.id);
  EXPECT_EQ(write_error([&](store::Tx& tx) { return check_password(tx, "bob", pw); }).code,
            ErrorCode::kUnauthenticated);
  EXPECT_EQ(write_error([&](store::Tx& tx) {
              return create_user(tx, w_, TenantScope(a.id), {"bob", "", "", {}});
            }).code,
            ErrorCode::kConflict);
}

TEST_F(TenancyTest, BootstrapHappensOnce) {
  auto first = write([&](store::Tx& tx) { return bootstrap_platform_admin(tx, w_, std::nullopt); });
  ASSERT_TRUE(first);
  EXPECT_EQ(first->username, "admin");
  auto p = iam::Authenticator(*store_, clock_, tenant_lookup(), {}).authenticate(first->api_key);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->has_platform_role());
  auto second =
      write([&](store::Tx& tx) { return bootstrap_platform_admin(tx, w_, std::nullopt); });
  EXPECT_FALSE(second);
}

}  // namespace
}  // namespace gp::tenancy
