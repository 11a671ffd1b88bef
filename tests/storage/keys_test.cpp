// Data keys: envelope encryption, rotation without downtime, crypto-shredding.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/crypto.h"
#include "storage/storage.h"
#include "test_util.h"

namespace gp::storage {
namespace {

using gp::testing::TempDir;

// A source that answers fewer bytes than asked.
struct ShortRandom final : Random {
  std::string bytes(size_t) const override { return "x"; }
};

MasterKey master(std::string_view label) {
  return *MasterKey::from_bytes(sha256(std::string("master-") + std::string(label)));
}

class Keys : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(create_tenant_key(ring, "acme", m1, rnd));
    ASSERT_TRUE(create_tenant_key(ring, "beta", m1, rnd));
  }
  SealedSecret seal(std::string_view tenant, std::string_view name, std::string_view text,
                    std::span<const MasterKey> masters) {
    auto s = seal_secret(ring, masters, tenant, name, text, rnd);
    EXPECT_TRUE(s) << s.error().message;
    return *s;
  }

  SeededRandom rnd{42};  // reproducible runs
  MasterKey m1 = master("one");
  MasterKey m2 = master("two");
  std::vector<MasterKey> only_m1{m1};
  std::vector<MasterKey> only_m2{m2};
  Keyring ring;
};

TEST_F(Keys, SealedSecretsOpenAndAreBoundToTenantAndName) {
  auto s = seal("acme", "registry.ghcr", "hunter2", only_m1);
  EXPECT_EQ(s.key_version, 1u);
  EXPECT_EQ(s.ciphertext.find("hunter2"), std::string::npos);
  EXPECT_EQ(*open_secret(ring, only_m1, s), "hunter2");

  auto moved = s;
  moved.tenant = "beta";  // another tenant's row
  auto r = open_secret(ring, only_m1, moved);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  moved = s;
  moved.name = "registry.other";  // another secret's row
  EXPECT_FALSE(open_secret(ring, only_m1, moved));
  moved = s;
  moved.ciphertext[0] ^= 1;
  EXPECT_FALSE(open_secret(ring, only_m1, moved));
  moved = s;
  moved.key_version = 7;
  EXPECT_EQ(open_secret(ring, only_m1, moved).error().code, ErrorCode::kNotFound);
  // Two seals of one value differ (fresh nonces).
  EXPECT_NE(seal("acme", "registry.ghcr", "hunter2", only_m1).ciphertext, s.ciphertext);
}

TEST_F(Keys, WrappedDataKeysAreBoundToTheirTenant) {
  auto s = seal("acme", "db", "secret", only_m1);
  // Copy beta's wrapped key over acme's: it does not unwrap as acme's key.
  ring.tenants[0].versions = ring.tenants[1].versions;
  auto r = open_secret(ring, only_m1, s);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("altered"), std::string::npos);
}

TEST_F(Keys, MasterRotationRewrapsWithoutTouchingSecrets) {
  std::vector<SealedSecret> secrets;
  for (int i = 0; i < 5; ++i)
    secrets.push_back(seal(i % 2 ? "acme" : "beta", "s" + std::to_string(i),
                           "value-" + std::to_string(i), only_m1));
  ASSERT_TRUE(rotate_data_key(ring, "acme", m1, rnd));  // two acme versions to rewrap
  auto before = secrets;
  auto n = rewrap_all(ring, only_m1, m2, rnd);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 3u);
  for (const auto& t : ring.tenants)
    for (const auto& w : t.versions) EXPECT_EQ(w.master_key_id, m2.id());
  // Every secret opens with the new master alone; no secret was re-encrypted.
  for (size_t i = 0; i < secrets.size(); ++i) {
    EXPECT_EQ(secrets[i], before[i]);
    EXPECT_EQ(*open_secret(ring, only_m2, secrets[i]), "value-" + std::to_string(i));
  }
  // The old master alone opens nothing any more.
  auto r = open_secret(ring, only_m1, secrets[0]);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  // A rotation that is run again (resumed) has nothing left to do.
  EXPECT_EQ(*rewrap_all(ring, only_m1, m2, rnd), 0u);
}

TEST_F(Keys, MasterRotationIsAllOrNothing) {
  auto s = seal("acme", "a", "x", only_m1);
  auto copy = ring;
  MasterKey unknown = master("unknown");
  std::vector<MasterKey> wrong{unknown};
  EXPECT_FALSE(rewrap_all(ring, wrong, m2, rnd));
  EXPECT_EQ(ring, copy);
  EXPECT_EQ(*open_secret(ring, only_m1, s), "x");
}

TEST_F(Keys, DataKeyRotationKeepsOldSecretsReadableUntilResealed) {
  auto old_secret = seal("acme", "old", "before", only_m1);
  auto v = rotate_data_key(ring, "acme", m1, rnd);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 2u);
  // No downtime: the old secret still opens; new secrets use version 2.
  EXPECT_EQ(*open_secret(ring, only_m1, old_secret), "before");
  auto fresh = seal("acme", "new", "after", only_m1);
  EXPECT_EQ(fresh.key_version, 2u);
  EXPECT_TRUE(needs_reseal(ring, old_secret));
  EXPECT_FALSE(needs_reseal(ring, fresh));
  // Version 1 cannot go while a secret uses it.
  std::vector<SealedSecret> all{old_secret, fresh};
  EXPECT_EQ(retire_data_key(ring, "acme", 1, all).error().code, ErrorCode::kConflict);
  EXPECT_EQ(retire_data_key(ring, "acme", 2, {}).error().code, ErrorCode::kConflict);
  // Reseal (lazily or in a batch), then retire version 1.
  for (auto& s : all)
    if (needs_reseal(ring, s)) s = *reseal_secret(ring, only_m1, s, rnd);
  EXPECT_EQ(all[0].key_version, 2u);
  ASSERT_TRUE(retire_data_key(ring, "acme", 1, all));
  EXPECT_EQ(*open_secret(ring, only_m1, all[0]), "before");
  EXPECT_EQ(open_secret(ring, only_m1, old_secret).error().code, ErrorCode::kNotFound);
}

TEST_F(Keys, CryptoShreddingMakesTheTenantsCiphertextUnopenable) {
  std::vector<SealedSecret> acme;
  for (int i = 0; i < 3; ++i)
    acme.push_back(seal("acme", "cred-" + std::to_string(i), "acme-secret", only_m1));
  ASSERT_TRUE(rotate_data_key(ring, "acme", m1, rnd));
  acme.push_back(seal("acme", "cred-v2", "acme-secret", only_m1));
  auto beta = seal("beta", "cred", "beta-secret", only_m1);
  std::string persisted_before = to_json(ring).dump();
  std::vector<std::string> wrapped;
  for (const auto& w : ring.tenants[0].versions) wrapped.push_back(base64url_encode(w.ciphertext));

  ASSERT_TRUE(destroy_tenant_keys(ring, "acme"));

  // What the store persists after offboarding holds no trace of acme's keys...
  auto reloaded = keyring_from_json(parse_json(to_json(ring).dump()).value());
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  std::string persisted_after = to_json(*reloaded).dump();
  for (const auto& w : wrapped) {
    EXPECT_NE(persisted_before.find(w), std::string::npos);
    EXPECT_EQ(persisted_after.find(w), std::string::npos);
  }
  // ...so with every master key and every remaining data key, no acme ciphertext opens.
  std::vector<MasterKey> every{m1, m2};
  for (const auto& s : acme) {
    auto r = open_secret(*reloaded, every, s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
    // Not even as another tenant's secret under its key (versions 1 and 2 both exist there
    // after a rotation).
    auto as_beta = s;
    as_beta.tenant = "beta";
    EXPECT_FALSE(open_secret(*reloaded, every, as_beta));
  }
  ASSERT_TRUE(rotate_data_key(*reloaded, "beta", m1, rnd));
  for (auto s : acme) {
    s.tenant = "beta";
    EXPECT_FALSE(open_secret(*reloaded, every, s));
  }
  // Other tenants are untouched; the shredded tenant cannot silently get a new key.
  EXPECT_EQ(*open_secret(*reloaded, every, beta), "beta-secret");
  EXPECT_EQ(create_tenant_key(*reloaded, "acme", m1, rnd).error().code, ErrorCode::kConflict);
  EXPECT_EQ(seal_secret(*reloaded, every, "acme", "x", "y", rnd).error().code,
            ErrorCode::kPermissionDenied);
}

TEST_F(Keys, JsonRoundTripAndStrictReading) {
  auto s = seal("acme", "a.b-c:d", "v", only_m1);
  auto ring2 = keyring_from_json(to_json(ring));
  ASSERT_TRUE(ring2) << ring2.error().message;
  EXPECT_EQ(*ring2, ring);
  auto s2 = sealed_secret_from_json(to_json(s));
  ASSERT_TRUE(s2);
  EXPECT_EQ(*s2, s);
  Json bad = to_json(s);
  bad["nonce"] = "***";
  EXPECT_FALSE(sealed_secret_from_json(bad));
  bad = to_json(s);
  bad["extra"] = 1;
  EXPECT_FALSE(sealed_secret_from_json(bad));
  Json j = to_json(ring);
  j["tenants"][0]["current_version"] = 9;
  EXPECT_NE(keyring_from_json(j).error().message.find("current version"), std::string::npos);
  j = to_json(ring);
  j["tenants"][1]["tenant"] = "acme";
  EXPECT_FALSE(keyring_from_json(j));
}

TEST_F(Keys, BadInputsAreRejected) {
  EXPECT_EQ(create_tenant_key(ring, "acme", m1, rnd).error().code, ErrorCode::kConflict);
  EXPECT_FALSE(create_tenant_key(ring, "Not A Label", m1, rnd));
  EXPECT_EQ(seal_secret(ring, only_m1, "nobody", "a", "b", rnd).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(seal_secret(ring, only_m1, "acme", "", "b", rnd));
  EXPECT_FALSE(seal_secret(ring, only_m1, "acme", "a b", "b", rnd));
  EXPECT_FALSE(seal_secret(ring, only_m1, "acme", std::string(129, 'a'), "b", rnd));
  EXPECT_EQ(seal_secret(ring, only_m2, "acme", "a", "b", rnd).error().code,
            ErrorCode::kUnavailable);
  EXPECT_FALSE(MasterKey::from_bytes("short"));
  EXPECT_FALSE(seal_secret(ring, only_m1, "acme", "a", "b", ShortRandom()));
  EXPECT_EQ(destroy_tenant_keys(ring, "nobody").error().code, ErrorCode::kNotFound);
}

// Issue 24, finding 7: a secret's name is one segment of its URL path, decoded before routing,
// so a name with "/" could be stored but never read or deleted through its path.
TEST_F(Keys, SecretNamesAreOnePathSegment) {
  for (const std::string& good :
       std::vector<std::string>{"registry.pull", "a", "A-b_c.d:e", std::string(128, 'x'), "..."})
    EXPECT_TRUE(seal_secret(ring, only_m1, "acme", good, "v", rnd)) << good;
  for (const std::string& bad :
       std::vector<std::string>{"team/registry", "/", "a/", "%2F", ".", "..",
                                std::string("a\0b", 3), "a?b", "a#b", "a b", "caf\xc3\xa9"}) {
    auto r = seal_secret(ring, only_m1, "acme", bad, "v", rnd);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
    // The message names what is allowed.
    EXPECT_NE(r.error().message.find("-_.:"), std::string::npos) << r.error().message;
    EXPECT_FALSE(validate_secret_name(bad)) << bad;
  }
}

TEST(MasterKeyFile, CreatedFileLoadsBackWithTheSameId) {
  TempDir dir;
  auto created = create_master_key_file(dir.file("master.key"), system_random());
  ASSERT_TRUE(created) << created.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("master.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto loaded = load_master_key(dir.file("master.key"));
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->id(), created->id());
  EXPECT_EQ(loaded->bytes(), created->bytes());
  EXPECT_EQ(loaded->id().size(), 16u);
  // Never overwrites an existing key.
  EXPECT_FALSE(create_master_key_file(dir.file("master.key"), system_random()));
}

TEST(MasterKeyFile, UnsafeOrMalformedFilesAreRefused) {
  TempDir dir;
  std::string hex = hex_encode(sha256("k"));
  auto write = [&](const std::string& name, const std::string& content, mode_t mode) {
    std::ofstream(dir.file(name)) << content;
    ::chmod(dir.file(name).c_str(), mode);
    return dir.file(name);
  };
  EXPECT_TRUE(load_master_key(write("ok", hex + "\n", 0600)));
  EXPECT_TRUE(load_master_key(write("ro", hex, 0400)));
  auto r = load_master_key(write("open", hex, 0644));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("0600"), std::string::npos);
  EXPECT_FALSE(load_master_key(write("group", hex, 0640)));
  EXPECT_FALSE(load_master_key(write("short", hex.substr(2), 0600)));
  EXPECT_FALSE(load_master_key(write("nothex", std::string(64, 'z'), 0600)));
  EXPECT_FALSE(load_master_key(write("long", hex + hex, 0600)));
  ASSERT_EQ(::symlink(dir.file("ok").c_str(), dir.file("link").c_str()), 0);
  r = load_master_key(dir.file("link"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("symlink"), std::string::npos);
  EXPECT_FALSE(load_master_key(dir.path()));  // a directory
  EXPECT_FALSE(load_master_key(dir.file("missing")));
  if (::geteuid() == 0) {
    auto other = write("other-owner", hex, 0600);
    ASSERT_EQ(::chown(other.c_str(), 4242, 4242), 0);
    r = load_master_key(other);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("owned by uid 4242"), std::string::npos);
  }
}

}  // namespace
}  // namespace gp::storage
