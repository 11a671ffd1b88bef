#include "audit/signer.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/crypto.h"

namespace gp::audit {
namespace {

namespace fs = std::filesystem;

Signer generate() {
  Result<Signer> signer = Signer::generate();
  EXPECT_TRUE(signer.has_value());
  return std::move(*signer);
}

// A fresh directory, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gp_signer_test.XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

mode_t file_mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(AuditSigner, SignVerifyRoundTrip) {
  Signer signer = generate();
  std::string sig = signer.sign("checkpoint 5");
  EXPECT_EQ(sig.size(), 86u);  // 64 bytes, unpadded base64url
  EXPECT_TRUE(signer.verifier().verify("checkpoint 5", sig));
  EXPECT_EQ(signer.sign("checkpoint 5"), sig);  // Ed25519 is deterministic
  EXPECT_TRUE(signer.verifier().verify("", signer.sign("")));
}

TEST(AuditSigner, WrongKeyFails) {
  Signer signer = generate(), other = generate();
  EXPECT_NE(signer.key_id(), other.key_id());
  EXPECT_FALSE(other.verifier().verify("msg", signer.sign("msg")));
}

TEST(AuditSigner, TamperedMessageFails) {
  Signer signer = generate();
  std::string sig = signer.sign("seq=5 hash=abc");
  EXPECT_FALSE(signer.verifier().verify("seq=5 hash=abd", sig));
  EXPECT_FALSE(signer.verifier().verify("seq=5 hash=abc ", sig));
}

TEST(AuditSigner, MalformedSignaturesAreRejected) {
  Signer signer = generate();
  Verifier verifier = signer.verifier();
  std::string sig = signer.sign("msg");
  EXPECT_FALSE(verifier.verify("msg", ""));
  EXPECT_FALSE(verifier.verify("msg", "not base64 !"));
  EXPECT_FALSE(verifier.verify("msg", sig.substr(0, 85)));
  EXPECT_FALSE(verifier.verify("msg", sig + "AA"));
  EXPECT_FALSE(verifier.verify("msg", sig + "=="));  // padded: not the canonical form
  // The last character carries 4 unused bits; setting them decodes to the same bytes but is not
  // the canonical encoding, so the signature has exactly one accepted spelling.
  std::string noncanonical = sig;
  std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  noncanonical.back() = alphabet[alphabet.find(sig.back()) | 1];
  ASSERT_NE(noncanonical, sig);
  ASSERT_EQ(base64url_decode(noncanonical), base64url_decode(sig));
  EXPECT_FALSE(verifier.verify("msg", noncanonical));
}

TEST(AuditSigner, PemRoundTrip) {
  Signer signer = generate();
  std::string private_pem = signer.private_pem();
  EXPECT_NE(private_pem.find("-----BEGIN PRIVATE KEY-----"), std::string::npos);

  Result<Signer> reloaded = Signer::from_pem(private_pem);
  ASSERT_TRUE(reloaded.has_value()) << reloaded.error().message;
  EXPECT_EQ(reloaded->key_id(), signer.key_id());
  EXPECT_EQ(reloaded->sign("m"), signer.sign("m"));
  EXPECT_EQ(reloaded->public_pem(), signer.public_pem());

  Result<Verifier> verifier = Verifier::from_public_pem(signer.public_pem());
  ASSERT_TRUE(verifier.has_value()) << verifier.error().message;
  EXPECT_EQ(verifier->key_id(), signer.key_id());
  EXPECT_EQ(verifier->public_pem(), signer.public_pem());
  EXPECT_TRUE(verifier->verify("m", signer.sign("m")));
}

TEST(AuditSigner, KeyIdIsHashPrefixOfRawPublicKey) {
  Signer signer = generate();
  std::string pem = signer.public_pem();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* pkey = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  ASSERT_NE(pkey, nullptr);
  unsigned char raw[32];
  size_t len = sizeof raw;
  ASSERT_EQ(EVP_PKEY_get_raw_public_key(pkey, raw, &len), 1);
  EVP_PKEY_free(pkey);
  BIO_free(bio);
  std::string expected =
      hex_encode(sha256(std::string_view(reinterpret_cast<char*>(raw), len))).substr(0, 16);
  EXPECT_EQ(signer.key_id(), expected);
}

TEST(AuditSigner, RejectsWhatIsNotAnEd25519Key) {
  EXPECT_EQ(Signer::from_pem("garbage").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Verifier::from_public_pem("").error().code, ErrorCode::kInvalidArgument);
  // A public key is not a private key, and vice versa.
  Signer signer = generate();
  EXPECT_FALSE(Signer::from_pem(signer.public_pem()).has_value());

  // A valid PEM of another algorithm.
  EVP_PKEY* ec = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(ec, nullptr);
  BIO* priv = BIO_new(BIO_s_mem());
  BIO* pub = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(priv, ec, nullptr, nullptr, 0, nullptr, nullptr);
  PEM_write_bio_PUBKEY(pub, ec);
  // The length first: the order a constructor's arguments are evaluated in is unspecified.
  char* data = nullptr;
  const auto priv_size = static_cast<size_t>(BIO_get_mem_data(priv, &data));
  std::string priv_pem(data, priv_size);
  const auto pub_size = static_cast<size_t>(BIO_get_mem_data(pub, &data));
  std::string pub_pem(data, pub_size);
  BIO_free(priv);
  BIO_free(pub);
  EVP_PKEY_free(ec);
  Result<Signer> s = Signer::from_pem(priv_pem);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("not Ed25519"), std::string::npos);
  Result<Verifier> v = Verifier::from_public_pem(pub_pem);
  ASSERT_FALSE(v.has_value());
  EXPECT_NE(v.error().message.find("not Ed25519"), std::string::npos);
}

TEST(AuditSigner, MovedSignerKeepsWorking) {
  Signer a = generate();
  std::string key_id = a.key_id();
  Signer b = std::move(a);
  EXPECT_EQ(b.key_id(), key_id);
  EXPECT_TRUE(b.verifier().verify("x", b.sign("x")));
}

TEST(AuditSigner, ConcurrentSignAndVerify) {
  const Signer signer = generate();
  const Verifier verifier = signer.verifier();
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        std::string msg = "thread " + std::to_string(t) + " message " + std::to_string(i);
        if (!verifier.verify(msg, signer.sign(msg))) ++failures[t];
        if (verifier.verify(msg + "!", signer.sign(msg))) ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(AuditSignerFiles, LoadOrCreateCreatesThenReloadsTheSameKey) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Result<Signer> created = load_or_create(dir.path());
  ASSERT_TRUE(created.has_value()) << created.error().message;
  EXPECT_EQ(file_mode(dir.file(kSigningKeyFile)), 0600);
  EXPECT_EQ(file_mode(dir.file(kPublicKeyFile)), 0644);
  EXPECT_EQ(read_text(dir.file(kPublicKeyFile)), created->public_pem());
  EXPECT_EQ(read_text(dir.file(kSigningKeyFile)), created->private_pem());

  Result<Signer> reloaded = load_or_create(dir.path());
  ASSERT_TRUE(reloaded.has_value()) << reloaded.error().message;
  EXPECT_EQ(reloaded->key_id(), created->key_id());
  // No temporaries are left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2);
}

TEST(AuditSignerFiles, ModesDoNotDependOnUmask) {
  TempDir dir;
  mode_t old = ::umask(0);
  Result<Signer> created = load_or_create(dir.path());
  ::umask(old);
  ASSERT_TRUE(created.has_value()) << created.error().message;
  EXPECT_EQ(file_mode(dir.file(kSigningKeyFile)), 0600);
  EXPECT_EQ(file_mode(dir.file(kPublicKeyFile)), 0644);
}

TEST(AuditSignerFiles, CreatesAMissingDirectoryPrivately) {
  TempDir dir;
  std::string nested = dir.file("var/audit");
  Result<Signer> created = load_or_create(nested);
  ASSERT_TRUE(created.has_value()) << created.error().message;
  EXPECT_EQ(file_mode(nested), 0700);
  EXPECT_TRUE(fs::exists(nested + "/" + std::string(kSigningKeyFile)));
}

TEST(AuditSignerFiles, RefusesAKeyReadableByOthers) {
  TempDir dir;
  ASSERT_TRUE(load_or_create(dir.path()).has_value());
  ASSERT_EQ(::chmod(dir.file(kSigningKeyFile).c_str(), 0644), 0);
  Result<Signer> loaded = load_or_create(dir.path());
  ASSERT_FALSE(loaded.has_value());
  EXPECT_EQ(loaded.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(loaded.error().message.find("0644"), std::string::npos) << loaded.error().message;
}

TEST(AuditSignerFiles, RewritesAMissingPublicKey) {
  TempDir dir;
  Result<Signer> created = load_or_create(dir.path());
  ASSERT_TRUE(created.has_value());
  fs::remove(dir.file(kPublicKeyFile));
  ASSERT_TRUE(load_or_create(dir.path()).has_value());
  EXPECT_EQ(read_text(dir.file(kPublicKeyFile)), created->public_pem());
  EXPECT_EQ(file_mode(dir.file(kPublicKeyFile)), 0644);
}

TEST(AuditSignerFiles, RefusesAPublicKeyThatDoesNotMatch) {
  TempDir dir;
  ASSERT_TRUE(load_or_create(dir.path()).has_value());
  write_text(dir.file(kPublicKeyFile), generate().public_pem());
  Result<Signer> loaded = load_or_create(dir.path());
  ASSERT_FALSE(loaded.has_value());
  EXPECT_EQ(loaded.error().code, ErrorCode::kConflict);
}

TEST(AuditSignerFiles, RefusesACorruptKeyFile) {
  TempDir dir;
  write_text(dir.file(kSigningKeyFile), "-----BEGIN PRIVATE KEY-----\ntruncated");
  ASSERT_EQ(::chmod(dir.file(kSigningKeyFile).c_str(), 0600), 0);
  Result<Signer> loaded = load_or_create(dir.path());
  ASSERT_FALSE(loaded.has_value());
  EXPECT_EQ(loaded.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(loaded.error().message.find(kSigningKeyFile), std::string::npos);
}

TEST(AuditSignerFiles, ConcurrentCreatorsAgreeOnOneKey) {
  TempDir dir;
  std::vector<std::string> key_ids(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < key_ids.size(); ++i) {
    threads.emplace_back([&, i] {
      Result<Signer> s = load_or_create(dir.path());
      key_ids[i] = s ? s->key_id() : "error: " + s.error().message;
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& id : key_ids) EXPECT_EQ(id, key_ids[0]);
  EXPECT_EQ(key_ids[0].size(), 16u);
}

}  // namespace
}  // namespace gp::audit
