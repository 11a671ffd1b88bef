// Transport security: the OpenSSL contexts the API server and the HTTP client use (TLS 1.2
// minimum, AEAD suites with forward secrecy only, TLS 1.3 preferred), verification of the
// server's name or address, and a small certificate authority for development and tests
// (`gpuplane tls dev-certs`, the certificates `make run` serves with). Public header of tls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace boost::asio::ssl {
class context;  // <boost/asio/ssl/context.hpp>; forward-declared to keep this header light
}

namespace gp::tls {

// TLS 1.2 cipher suites: ECDHE key exchange with AES-GCM or ChaCha20-Poly1305. TLS 1.3 suites
// are all AEAD; OpenSSL's default list is kept for them.
inline constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// A certificate chain and its private key, both PEM files.
struct CertFiles {
  std::string cert_file;  // the server certificate first, then any intermediates
  std::string key_file;
};

// A server context over `files`: fails with a message naming the file when a file is missing,
// unreadable, not PEM, or the key does not match the certificate.
Result<std::shared_ptr<boost::asio::ssl::context>> server_context(const CertFiles& files);

// A client context that verifies the peer against the CA certificates in `ca_file` only (the
// pinned CA), or against the system store when `ca_file` is empty.
Result<std::shared_ptr<boost::asio::ssl::context>> client_context(const std::string& ca_file);

// Makes `ssl` (a client connection about to handshake) check that the peer's certificate names
// `host` (an IP address is matched against the IP SANs, a name against the DNS SANs), and
// sends `host` as SNI when it is a name.
Result<void> expect_peer(void* ssl, const std::string& host);

// Why the last handshake on `ssl` failed verification, in words; "" when it did not.
std::string verify_failure(const void* ssl);

// The subject common name of the peer's certificate on `ssl`, "" without one.
std::string peer_common_name(const void* ssl);

// ---- a small certificate authority (ECDSA P-256, SHA-256) ----

struct KeyAndCert {
  std::string key_pem;
  std::string cert_pem;
};

struct CertSpec {
  std::string common_name;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries (v4 or v6)
  std::chrono::system_clock::time_point not_before;
  std::chrono::seconds validity{std::chrono::hours(24 * 365)};
};

// A self-signed CA certificate (basicConstraints CA:TRUE, keyCertSign). `serial` must be
// positive and unique per issuer.
Result<KeyAndCert> make_ca(const CertSpec& spec, uint64_t serial);
// A server certificate for `spec`'s names and addresses signed by `ca` (serverAuth).
Result<KeyAndCert> issue_server_cert(const KeyAndCert& ca, const CertSpec& spec, uint64_t serial);

// The files of a development PKI in one directory.
struct DevPki {
  std::string ca_cert, ca_key, server_cert, server_key;
};
DevPki dev_pki_paths(const std::string& dir);
// Creates ca.pem/ca.key and server.pem/server.key in `dir` (keys 0600) for `dns_names` and
// `ip_addresses`, unless they exist: existing files are never replaced. Returns whether it
// created them.
Result<bool> ensure_dev_pki(const std::string& dir, const std::vector<std::string>& dns_names,
                            const std::vector<std::string>& ip_addresses,
                            std::chrono::system_clock::time_point now, uint64_t serial_seed);

}  // namespace gp::tls
