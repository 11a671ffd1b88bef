#include "tls/tls.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <climits>
#include <ctime>
#include <filesystem>
#include <fstream>

namespace gp::tls {

namespace ssl = boost::asio::ssl;
namespace fs = std::filesystem;

namespace {

// The newest error on OpenSSL's queue, in words, and the queue emptied.
std::string openssl_error() {
  unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

Result<void> readable(const std::string& what, const std::string& path) {
  if (path.empty()) return fail(Error::invalid(what + ": no file given"));
  std::ifstream in(path);
  if (!in) return fail(Error::invalid(fmt::format("{} {}: cannot read the file", what, path)));
  return ok();
}

// Protocol floor and suites shared by both ends.
Result<void> harden(SSL_CTX* ctx) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1)
    return fail(Error::internal("TLS settings: " + openssl_error()));
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  return ok();
}

}  // namespace

Result<std::shared_ptr<ssl::context>> server_context(const CertFiles& files) {
  GP_TRY_VOID(readable("TLS certificate", files.cert_file));
  GP_TRY_VOID(readable("TLS key", files.key_file));
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* c = ctx->native_handle();
  GP_TRY_VOID(harden(c));
  // The server picks the suite: its order puts forward secrecy and AEAD first for every client.
  SSL_CTX_set_options(c, SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate_chain_file(c, files.cert_file.c_str()) != 1)
    return fail(
        Error::invalid(fmt::format("TLS certificate {}: {}", files.cert_file, openssl_error())));
  // OpenSSL compares the key with the certificate while loading it; say so in plain words.
  if (SSL_CTX_use_PrivateKey_file(c, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(c) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH)
      return fail(Error::invalid(fmt::format("TLS key {}: {}", files.key_file, openssl_error())));
    return fail(Error::invalid(fmt::format("TLS key {} does not match the certificate {}: {}",
                                           files.key_file, files.cert_file, openssl_error())));
  }
  if (!files.client_ca_file.empty()) {
    const std::string& ca = files.client_ca_file;
    GP_TRY_VOID(readable("client CA", ca));
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca.c_str());
    if (!names || SSL_CTX_load_verify_locations(c, ca.c_str(), nullptr) != 1) {
      if (names) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return fail(Error::invalid(fmt::format("client CA {}: {}", ca, openssl_error())));
    }
    SSL_CTX_set_client_CA_list(c, names);  // takes ownership
    // Ask for a certificate, verify it, but let the handshake go on whatever the result: the
    // API refuses agent calls whose certificate failed (peer_certificate) and says why, and
    // every other client (the CLI, browsers) has no certificate to give.
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
    static constexpr unsigned char kSessionContext[] = "gpuplane-api";
    SSL_CTX_set_session_id_context(c, kSessionContext, sizeof kSessionContext - 1);
  }
  return ctx;
}

Result<std::shared_ptr<ssl::context>> client_context(const std::string& ca_file,
                                                     const std::string& identity_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX* c = ctx->native_handle();
  GP_TRY_VOID(harden(c));
  if (!identity_file.empty()) {
    GP_TRY_VOID(readable("client certificate", identity_file));
    if (SSL_CTX_use_certificate_chain_file(c, identity_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(c, identity_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(c) != 1)
      return fail(
          Error::invalid(fmt::format("client certificate {}: {}", identity_file, openssl_error())));
  }
  if (ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(c) != 1)
      return fail(Error::internal("TLS: cannot load the system CA store: " + openssl_error()));
  } else {
    GP_TRY_VOID(readable("CA file", ca_file));
    if (SSL_CTX_load_verify_locations(c, ca_file.c_str(), nullptr) != 1)
      return fail(Error::invalid(fmt::format("CA file {}: {}", ca_file, openssl_error())));
  }
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  return ctx;
}

Result<void> expect_peer(void* handle, const std::string& host) {
  SSL* ssl = static_cast<SSL*>(handle);
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(host, ec);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (!ec) {
    // Certificates name addresses in IP SANs, never in DNS ones; X509_check_host would miss it.
    if (X509_VERIFY_PARAM_set1_ip_asc(param, address.to_string().c_str()) != 1)
      return fail(Error::invalid("TLS: bad peer address " + host));
    return ok();
  }
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(ssl, host.c_str()) != 1 || SSL_set_tlsext_host_name(ssl, host.c_str()) != 1)
    return fail(Error::invalid("TLS: bad peer host name " + host));
  return ok();
}

std::string verify_failure(const void* handle) {
  const SSL* ssl = static_cast<const SSL*>(handle);
  long r = SSL_get_verify_result(ssl);
  if (r == X509_V_OK) return "";
  return X509_verify_cert_error_string(r);
}

namespace {

std::string common_name(X509* cert) {
  char buf[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf) < 0)
    return "";
  return buf;
}

std::string serial_text(X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  char* dec = bn ? BN_bn2dec(bn) : nullptr;
  std::string out = dec ? dec : "";
  OPENSSL_free(dec);
  BN_free(bn);
  return out;
}

}  // namespace

std::string peer_common_name(const void* handle) {
  X509* cert = SSL_get0_peer_certificate(static_cast<const SSL*>(handle));
  return cert ? common_name(cert) : "";
}

std::optional<PeerCert> peer_certificate(const void* handle) {
  const SSL* ssl = static_cast<const SSL*>(handle);
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (!cert) return std::nullopt;
  PeerCert out{.serial = serial_text(cert), .common_name = common_name(cert)};
  if (long r = SSL_get_verify_result(ssl); r != X509_V_OK)
    out.verify_error = X509_verify_cert_error_string(r);
  return out;
}

// ---- certificate authority ----

namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using PKey = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO_free>>;
using Req = std::unique_ptr<X509_REQ, Deleter<X509_REQ_free>>;

Result<PKey> new_key() {
  PKey key(EVP_EC_gen("P-256"));
  if (!key) return fail(Error::internal("key generation: " + openssl_error()));
  return key;
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> key_pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return fail(Error::internal("key encoding: " + openssl_error()));
  return bio_text(bio.get());
}

Result<std::string> cert_pem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
    return fail(Error::internal("certificate encoding: " + openssl_error()));
  return bio_text(bio.get());
}

Bio read_bio(std::string_view pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(std::min<size_t>(pem.size(), INT_MAX))));
}

Result<PKey> parse_key(const std::string& pem) {
  Bio bio = read_bio(pem);
  PKey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return fail(Error::invalid("CA key: " + openssl_error()));
  return key;
}

Result<Cert> parse_cert(std::string_view pem, std::string_view what = "CA certificate") {
  Bio bio = read_bio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return fail(Error::invalid(fmt::format("{}: {}", what, openssl_error())));
  return cert;
}

struct Ca {
  PKey key;
  Cert cert;
};
Result<Ca> load_ca(const KeyAndCert& ca) {
  Ca out{GP_TRY(parse_key(ca.key_pem)), GP_TRY(parse_cert(ca.cert_pem))};
  if (X509_check_private_key(out.cert.get(), out.key.get()) != 1)
    return fail(Error::invalid("the CA key does not match the CA certificate"));
  return out;
}

Result<void> add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return fail(Error::invalid(fmt::format("extension '{}': {}", value, openssl_error())));
  int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return fail(Error::internal("extension: " + openssl_error()));
  return ok();
}

// A certificate for `key` with `spec`'s subject and validity; the caller adds extensions and
// signs it.
Result<Cert> new_cert(const CertSpec& spec, uint64_t serial, EVP_PKEY* key) {
  if (spec.common_name.empty()) return fail(Error::invalid("certificate: empty common name"));
  if (serial == 0 || serial > uint64_t(INT64_MAX))
    return fail(Error::invalid("certificate: serial must be in 1..2^63-1"));
  if (spec.validity <= std::chrono::seconds(0))
    return fail(Error::invalid("certificate: validity must be positive"));
  Cert cert(X509_new());
  time_t from = std::chrono::system_clock::to_time_t(spec.not_before);
  bool good =
      cert && X509_set_version(cert.get(), 2) == 1 &&
      ASN1_INTEGER_set_int64(X509_get_serialNumber(cert.get()), int64_t(serial)) == 1 &&
      ASN1_TIME_set(X509_getm_notBefore(cert.get()), from) != nullptr &&
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), from + spec.validity.count()) != nullptr &&
      X509_set_pubkey(cert.get(), key) == 1;
  X509_NAME* name = cert ? X509_get_subject_name(cert.get()) : nullptr;
  good =
      good && X509_NAME_add_entry_by_txt(
                  name, "CN", MBSTRING_UTF8,
                  reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0) == 1;
  if (!good) return fail(Error::internal("certificate: " + openssl_error()));
  return cert;
}

Result<KeyAndCert> finish(X509* cert, EVP_PKEY* key, EVP_PKEY* signer) {
  if (X509_sign(cert, signer, EVP_sha256()) == 0)
    return fail(Error::internal("certificate signing: " + openssl_error()));
  return KeyAndCert{GP_TRY(key_pem(key)), GP_TRY(cert_pem(cert))};
}

Result<void> write_file(const std::string& path, const std::string& content, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return fail(Error::invalid("cannot write " + path));
  bool written = ::fchmod(fd, mode) == 0 &&
                 ::write(fd, content.data(), content.size()) == ssize_t(content.size()) &&
                 ::fsync(fd) == 0;
  ::close(fd);
  std::error_code ec;
  if (written) fs::rename(tmp, path, ec);
  if (!written || ec) return fail(Error::invalid("cannot write " + path));
  return ok();
}

}  // namespace

Result<KeyAndCert> make_ca(const CertSpec& spec, uint64_t serial) {
  PKey key = GP_TRY(new_key());
  Cert cert = GP_TRY(new_cert(spec, serial, key.get()));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1)
    return fail(Error::internal("certificate: " + openssl_error()));
  GP_TRY_VOID(add_ext(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  GP_TRY_VOID(add_ext(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  GP_TRY_VOID(add_ext(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  return finish(cert.get(), key.get(), key.get());
}

Result<KeyAndCert> issue_server_cert(const KeyAndCert& ca, const CertSpec& spec, uint64_t serial) {
  if (spec.dns_names.empty() && spec.ip_addresses.empty())
    return fail(Error::invalid("server certificate: give at least one DNS name or IP address"));
  auto [ca_key, ca_cert] = GP_TRY(load_ca(ca));
  PKey key = GP_TRY(new_key());
  Cert cert = GP_TRY(new_cert(spec, serial, key.get()));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1)
    return fail(Error::internal("certificate: " + openssl_error()));
  std::string san;
  for (const auto& d : spec.dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + d;
  for (const auto& ip : spec.ip_addresses) {
    boost::system::error_code ec;
    boost::asio::ip::make_address(ip, ec);
    if (ec) return fail(Error::invalid("server certificate: bad IP address '" + ip + "'"));
    san += (san.empty() ? "IP:" : ",IP:") + ip;
  }
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  GP_TRY_VOID(
      add_ext(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyAgreement"));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth"));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_subject_alt_name, san));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_subject_key_identifier, "hash"));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  return finish(cert.get(), key.get(), ca_key.get());
}

Result<std::string> sign_client_csr(const KeyAndCert& ca, std::string_view csr_pem,
                                    const CertSpec& spec, uint64_t serial) {
  if (csr_pem.size() > 16 * 1024) return fail(Error::invalid("csr: longer than 16 KiB"));
  auto [ca_key, ca_cert] = GP_TRY(load_ca(ca));
  Bio bio = read_bio(csr_pem);
  Req req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req)
    return fail(Error::invalid("csr: not a PEM certificate request (" + openssl_error() + ")"));
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());
  if (!key) return fail(Error::invalid("csr: no public key (" + openssl_error() + ")"));
  if (X509_REQ_verify(req.get(), key) != 1) {
    ERR_clear_error();
    return fail(Error::invalid("csr: its signature does not match its key"));
  }
  const int type = EVP_PKEY_get_base_id(key), bits = EVP_PKEY_get_bits(key);
  if (!((type == EVP_PKEY_EC && bits >= 256) || (type == EVP_PKEY_RSA && bits >= 2048) ||
        type == EVP_PKEY_ED25519))
    return fail(Error::invalid("csr: the key must be EC P-256 or stronger, RSA 2048+ or Ed25519"));
  Cert cert = GP_TRY(new_cert(spec, serial, key));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1)
    return fail(Error::internal("certificate: " + openssl_error()));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature"));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_ext_key_usage, "clientAuth"));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_subject_key_identifier, "hash"));
  GP_TRY_VOID(add_ext(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0)
    return fail(Error::internal("certificate signing: " + openssl_error()));
  return cert_pem(cert.get());
}

Result<KeyAndCsr> make_csr(const std::string& cn) {
  PKey key = GP_TRY(new_key());
  Req req(X509_REQ_new());
  X509_NAME* name = req ? X509_REQ_get_subject_name(req.get()) : nullptr;
  Bio bio(BIO_new(BIO_s_mem()));
  bool good = req && bio && X509_REQ_set_version(req.get(), 0) == 1 &&
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                         reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                         0) == 1 &&
              X509_REQ_set_pubkey(req.get(), key.get()) == 1 &&
              X509_REQ_sign(req.get(), key.get(), EVP_sha256()) > 0 &&
              PEM_write_bio_X509_REQ(bio.get(), req.get()) == 1;
  if (!good) return fail(Error::internal("certificate request: " + openssl_error()));
  return KeyAndCsr{GP_TRY(key_pem(key.get())), bio_text(bio.get())};
}

Result<CertInfo> cert_info(std::string_view pem) {
  Cert cert = GP_TRY(parse_cert(pem, "certificate"));
  auto when = [](const ASN1_TIME* t) -> std::optional<std::chrono::system_clock::time_point> {
    std::tm tm{};
    if (ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
    return std::chrono::system_clock::from_time_t(timegm(&tm));
  };
  auto from = when(X509_get0_notBefore(cert.get()));
  auto to = when(X509_get0_notAfter(cert.get()));
  if (!from || !to) return fail(Error::invalid("certificate: unreadable validity dates"));
  return CertInfo{serial_text(cert.get()), common_name(cert.get()), *from, *to};
}

uint64_t random_serial(const Random& random) { return (random.u64() & 0x3fffffffffffffffULL) | 1; }

DevPki dev_pki_paths(const std::string& dir) {
  fs::path d(dir);
  return {(d / "ca.pem").string(), (d / "ca.key").string(), (d / "server.pem").string(),
          (d / "server.key").string()};
}

Result<bool> ensure_dev_pki(const std::string& dir, const std::vector<std::string>& dns_names,
                            const std::vector<std::string>& ip_addresses,
                            std::chrono::system_clock::time_point now, uint64_t serial_seed) {
  DevPki p = dev_pki_paths(dir);
  std::error_code ec;
  int present = 0;
  for (const auto* f : {&p.ca_cert, &p.ca_key, &p.server_cert, &p.server_key})
    present += fs::exists(*f, ec) ? 1 : 0;
  if (present == 4) return false;
  if (present > 0)
    return fail(Error::invalid(fmt::format(
        "{} holds only some of ca.pem, ca.key, server.pem, server.key: remove them or add the "
        "missing ones",
        dir)));
  fs::create_directories(dir, ec);
  if (ec) return fail(Error::invalid(fmt::format("cannot create {}: {}", dir, ec.message())));
  ::chmod(dir.c_str(), 0700);
  // Backdated a little so a client whose clock lags the server's still accepts them.
  auto from = now - std::chrono::hours(1);
  uint64_t serial = (serial_seed & 0x3fffffffffffffffULL) | 1;
  KeyAndCert ca = GP_TRY(make_ca({.common_name = "gpuplane local CA",
                                  .not_before = from,
                                  .validity = std::chrono::hours(24 * 3650)},
                                 serial));
  KeyAndCert server = GP_TRY(issue_server_cert(ca,
                                               {.common_name = "gpuplane server",
                                                .dns_names = dns_names,
                                                .ip_addresses = ip_addresses,
                                                .not_before = from,
                                                .validity = std::chrono::hours(24 * 825)},
                                               serial + 1));
  // Keys first: a crash in between leaves a partial set, which the next start reports.
  GP_TRY_VOID(write_file(p.ca_key, ca.key_pem, 0600));
  GP_TRY_VOID(write_file(p.server_key, server.key_pem, 0600));
  GP_TRY_VOID(write_file(p.ca_cert, ca.cert_pem, 0644));
  GP_TRY_VOID(write_file(p.server_cert, server.cert_pem, 0644));
  return true;
}

NodeCaFiles node_ca_paths(const std::string& dir) {
  fs::path d(dir);
  return {(d / "node-ca.pem").string(), (d / "node-ca.key").string()};
}

Result<KeyAndCert> ensure_node_ca(const std::string& dir, std::chrono::system_clock::time_point now,
                                  const Random& random) {
  NodeCaFiles p = node_ca_paths(dir);
  std::error_code ec;
  bool cert = fs::exists(p.cert, ec), key = fs::exists(p.key, ec);
  if (cert != key)
    return fail(
        Error::invalid(fmt::format("{} holds only one of node-ca.pem and node-ca.key: "
                                   "restore the other (or remove both to start a new "
                                   "node CA, after which every node must enrol again)",
                                   dir)));
  if (cert) {
    auto read = [](const std::string& path) -> Result<std::string> {
      std::ifstream in(path);
      if (!in) return fail(Error::invalid("cannot read " + path));
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    KeyAndCert ca{GP_TRY(read(p.key)), GP_TRY(read(p.cert))};
    auto loaded = load_ca(ca);
    if (!loaded)
      return fail(Error::invalid(fmt::format("node CA in {}: {}", dir, loaded.error().message)));
    return ca;
  }
  KeyAndCert ca = GP_TRY(make_ca({.common_name = "gpuplane node CA",
                                  .not_before = now - std::chrono::hours(1),
                                  .validity = std::chrono::hours(24 * 3650)},
                                 random_serial(random)));
  GP_TRY_VOID(write_file(p.key, ca.key_pem, 0600));
  GP_TRY_VOID(write_file(p.cert, ca.cert_pem, 0644));
  return ca;
}

}  // namespace gp::tls
