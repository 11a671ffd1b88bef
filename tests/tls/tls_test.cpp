// The tls module without sockets: certificates from the small CA verify against that CA only
// and name what they were issued for; server contexts load matching pairs and explain bad
// ones; the development PKI is created once and never replaced.
#include "tls/tls.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <boost/asio/ssl/context.hpp>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace gp::tls {
namespace {

using gp::testing::TempDir;
const auto kNow = std::chrono::system_clock::now() - std::chrono::minutes(5);

std::unique_ptr<X509, decltype(&X509_free)> parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), int(pem.size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return {x, X509_free};
}

// Whether `leaf` chains to `ca` under OpenSSL's default verification (time, purpose, CA flag).
bool verifies(const std::string& leaf, const std::string& ca,
              int purpose = X509_PURPOSE_SSL_SERVER) {
  auto l = parse(leaf), c = parse(ca);
  if (!l || !c) return false;
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, c.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, l.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TlsModule, IssuedCertificateVerifiesAgainstItsCaOnlyAndNamesItsHosts) {
  auto ca = make_ca({.common_name = "ca one", .not_before = kNow}, 1);
  auto other = make_ca({.common_name = "ca two", .not_before = kNow}, 1);
  ASSERT_TRUE(ca && other);
  auto server = issue_server_cert(*ca,
                                  {.common_name = "api",
                                   .dns_names = {"cp.example"},
                                   .ip_addresses = {"10.0.0.7", "::1"},
                                   .not_before = kNow},
                                  2);
  ASSERT_TRUE(server) << server.error().message;
  EXPECT_TRUE(verifies(server->cert_pem, ca->cert_pem));
  EXPECT_FALSE(verifies(server->cert_pem, other->cert_pem));
  auto x = parse(server->cert_pem);
  EXPECT_EQ(X509_check_host(x.get(), "cp.example", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_host(x.get(), "evil.example", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(x.get(), "10.0.0.7", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(x.get(), "::1", 0), 1);
  EXPECT_NE(X509_check_ip_asc(x.get(), "10.0.0.8", 0), 1);
  // A server certificate cannot act as a CA.
  auto leaf_signed =
      issue_server_cert(*server, {.common_name = "x", .dns_names = {"x"}, .not_before = kNow}, 3);
  ASSERT_TRUE(leaf_signed);
  EXPECT_FALSE(verifies(leaf_signed->cert_pem, server->cert_pem));
  // Expired: not yet valid at the time it is checked.
  auto future =
      issue_server_cert(*ca,
                        {.common_name = "later",
                         .dns_names = {"x"},
                         .not_before = std::chrono::system_clock::now() + std::chrono::hours(48)},
                        4);
  ASSERT_TRUE(future);
  EXPECT_FALSE(verifies(future->cert_pem, ca->cert_pem));
}

TEST(TlsModule, BadCertificateRequestsAreRefused) {
  auto ca = make_ca({.common_name = "ca", .not_before = kNow}, 1);
  ASSERT_TRUE(ca);
  EXPECT_FALSE(issue_server_cert(*ca, {.common_name = "no names", .not_before = kNow}, 2));
  auto bad_ip = issue_server_cert(
      *ca, {.common_name = "x", .ip_addresses = {"300.1.1.1"}, .not_before = kNow}, 2);
  ASSERT_FALSE(bad_ip);
  EXPECT_NE(bad_ip.error().message.find("300.1.1.1"), std::string::npos);
  EXPECT_FALSE(make_ca({.common_name = "", .not_before = kNow}, 1));
  EXPECT_FALSE(make_ca({.common_name = "zero serial", .not_before = kNow}, 0));
  EXPECT_FALSE(make_ca({.common_name = "x", .not_before = kNow, .validity = {}}, 1));
  KeyAndCert mismatched{make_ca({.common_name = "a", .not_before = kNow}, 1)->key_pem,
                        ca->cert_pem};
  auto r = issue_server_cert(mismatched,
                             {.common_name = "x", .dns_names = {"x"}, .not_before = kNow}, 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("does not match"), std::string::npos);
}

TEST(TlsModule, ClientCertificateFromARequestNamesWhatTheIssuerSays) {
  auto ca = make_ca({.common_name = "node ca", .not_before = kNow}, 1);
  ASSERT_TRUE(ca);
  auto req = make_csr("whatever the node claims");
  ASSERT_TRUE(req) << req.error().message;
  auto cert = sign_client_csr(
      *ca, req->csr_pem,
      {.common_name = "nod_1", .not_before = kNow, .validity = std::chrono::hours(2)}, 77);
  ASSERT_TRUE(cert) << cert.error().message;
  EXPECT_TRUE(verifies(*cert, ca->cert_pem, X509_PURPOSE_SSL_CLIENT));
  EXPECT_FALSE(verifies(*cert, ca->cert_pem, X509_PURPOSE_SSL_SERVER));  // clientAuth only
  auto info = cert_info(*cert);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->common_name, "nod_1");  // the issuer's name, not the request's
  EXPECT_EQ(info->serial, "77");
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(info->not_after - info->not_before),
            std::chrono::hours(2));
  // The key of the request is the key of the certificate: the pair loads as a client identity.
  TempDir dir;
  std::ofstream(dir.file("id.pem")) << *cert << req->key_pem;
  std::ofstream(dir.file("ca.pem")) << ca->cert_pem;
  EXPECT_TRUE(client_context(dir.file("ca.pem"), dir.file("id.pem")));
  std::ofstream(dir.file("wrong.pem")) << *cert << make_csr("x")->key_pem;
  auto wrong = client_context(dir.file("ca.pem"), dir.file("wrong.pem"));
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("wrong.pem"), std::string::npos);
}

TEST(TlsModule, ForgedOrWeakCertificateRequestsAreRefused) {
  auto ca = make_ca({.common_name = "node ca", .not_before = kNow}, 1);
  ASSERT_TRUE(ca);
  CertSpec spec{.common_name = "nod_1", .not_before = kNow};
  EXPECT_FALSE(sign_client_csr(*ca, "not a request", spec, 2));
  EXPECT_FALSE(sign_client_csr(*ca, std::string(20000, 'A'), spec, 2));
  // One byte of the signature changed: the sender does not hold the key.
  auto req = make_csr("n");
  ASSERT_TRUE(req);
  std::string tampered = req->csr_pem;
  size_t end = tampered.find("-----END");
  ASSERT_NE(end, std::string::npos);
  tampered[end - 6] = tampered[end - 6] == 'A' ? 'B' : 'A';
  auto forged = sign_client_csr(*ca, tampered, spec, 2);
  ASSERT_FALSE(forged);
  // A 1024-bit RSA key is too weak.
  EVP_PKEY* rsa = EVP_RSA_gen(1024);
  X509_REQ* weak = X509_REQ_new();
  X509_REQ_set_pubkey(weak, rsa);
  X509_REQ_sign(weak, rsa, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_REQ(bio, weak);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  std::string weak_pem(data, size_t(size));
  BIO_free(bio);
  X509_REQ_free(weak);
  EVP_PKEY_free(rsa);
  auto refused = sign_client_csr(*ca, weak_pem, spec, 2);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("RSA 2048"), std::string::npos);
}

TEST(TlsModule, NodeCaIsCreatedOnceAndAHalfMissingPairIsRefused) {
  TempDir dir;
  auto first = ensure_node_ca(dir.path(), kNow, system_random());
  ASSERT_TRUE(first) << first.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(node_ca_paths(dir.path()).key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = ensure_node_ca(dir.path(), kNow, system_random());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cert_pem, first->cert_pem);
  std::filesystem::remove(node_ca_paths(dir.path()).key);
  auto half = ensure_node_ca(dir.path(), kNow, system_random());
  ASSERT_FALSE(half);
  EXPECT_NE(half.error().message.find("only one of"), std::string::npos);
}

TEST(TlsModule, ServerContextLoadsAMatchingPairAndExplainsBadFiles) {
  TempDir dir;
  auto ca = make_ca({.common_name = "ca", .not_before = kNow}, 1);
  auto a = issue_server_cert(*ca, {.common_name = "a", .dns_names = {"a"}, .not_before = kNow}, 2);
  auto b = issue_server_cert(*ca, {.common_name = "b", .dns_names = {"b"}, .not_before = kNow}, 3);
  ASSERT_TRUE(ca && a && b);
  std::ofstream(dir.file("a.pem")) << a->cert_pem;
  std::ofstream(dir.file("a.key")) << a->key_pem;
  std::ofstream(dir.file("b.key")) << b->key_pem;
  std::ofstream(dir.file("junk.pem")) << "not PEM\n";
  auto good = server_context({dir.file("a.pem"), dir.file("a.key")});
  ASSERT_TRUE(good) << good.error().message;
  SSL_CTX* c = (*good)->native_handle();
  EXPECT_EQ(SSL_CTX_get_min_proto_version(c), TLS1_2_VERSION);

  auto mismatch = server_context({dir.file("a.pem"), dir.file("b.key")});
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().message.find("does not match the certificate"), std::string::npos)
      << mismatch.error().message;
  auto missing = server_context({dir.file("nope.pem"), dir.file("a.key")});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("nope.pem"), std::string::npos);
  auto junk = server_context({dir.file("junk.pem"), dir.file("a.key")});
  ASSERT_FALSE(junk);
  EXPECT_NE(junk.error().message.find("junk.pem"), std::string::npos);
  auto junk_key = server_context({dir.file("a.pem"), dir.file("junk.pem")});
  ASSERT_FALSE(junk_key);
  EXPECT_NE(junk_key.error().message.find("junk.pem"), std::string::npos);

  EXPECT_TRUE(client_context(""));
  EXPECT_TRUE(client_context(dir.file("a.pem")));
  EXPECT_FALSE(client_context(dir.file("nope.pem")));
  EXPECT_FALSE(client_context(dir.file("junk.pem")));
}

TEST(TlsModule, DevPkiIsCreatedOnceAndNeverReplaced) {
  TempDir dir;
  std::string d = dir.file("tls");
  auto made = ensure_dev_pki(d, {"localhost"}, {"127.0.0.1"}, std::chrono::system_clock::now(), 77);
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_TRUE(*made);
  DevPki p = dev_pki_paths(d);
  std::string ca = slurp(p.ca_cert), server = slurp(p.server_cert), key = slurp(p.server_key);
  EXPECT_TRUE(verifies(server, ca));
  struct stat st {};
  ASSERT_EQ(::stat(p.ca_key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(p.server_key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(server_context({p.server_cert, p.server_key}));

  auto again = ensure_dev_pki(d, {"other"}, {}, std::chrono::system_clock::now(), 99);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  EXPECT_EQ(slurp(p.ca_cert), ca);
  EXPECT_EQ(slurp(p.server_cert), server);
  EXPECT_EQ(slurp(p.server_key), key);

  std::filesystem::remove(p.server_key);
  auto partial = ensure_dev_pki(d, {"localhost"}, {}, std::chrono::system_clock::now(), 5);
  ASSERT_FALSE(partial);
  EXPECT_NE(partial.error().message.find("only some"), std::string::npos);
  EXPECT_EQ(slurp(p.ca_cert), ca);
}

}  // namespace
}  // namespace gp::tls
