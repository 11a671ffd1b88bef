// Transport security: the OpenSSL contexts the API server and the HTTP client use (TLS 1.2
// minimum, AEAD suites with forward secrecy only, TLS 1.3 preferred), verification of the
// server's name or address, and a small certificate authority for development and tests
// (`gpuplane tls dev-certs`, the certificates `make run` serves with). Public header of tls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
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
  // Node mTLS: ask every client for a certificate issued by the CA in this file (the node CA).
  // One is never required by the handshake, and one that fails verification does not end it:
  // the API decides per route (agent routes require a valid one) and says why it refused.
  std::string client_ca_file;
};

// A server context over `files`: fails with a message naming the file when a file is missing,
// unreadable, not PEM, or the key does not match the certificate.
Result<std::shared_ptr<boost::asio::ssl::context>> server_context(const CertFiles& files);

// A client context that verifies the peer against the CA certificates in `ca_file` only (the
// pinned CA), or against the system store when `ca_file` is empty. With `identity_file` (a PEM
// file holding a certificate and its private key) the client presents that certificate.
Result<std::shared_ptr<boost::asio::ssl::context>> client_context(
    const std::string& ca_file, const std::string& identity_file = "");

// Makes `ssl` (a client connection about to handshake) check that the peer's certificate names
// `host` (an IP address is matched against the IP SANs, a name against the DNS SANs), and
// sends `host` as SNI when it is a name.
Result<void> expect_peer(void* ssl, const std::string& host);

// Why the last handshake on `ssl` failed verification, in words; "" when it did not.
std::string verify_failure(const void* ssl);

// The subject common name of the peer's certificate on `ssl`, "" without one.
std::string peer_common_name(const void* ssl);

// The certificate a client presented on a server connection, as the handshake left it.
struct PeerCert {
  std::string serial;  // decimal
  std::string common_name;
  std::string verify_error;  // "" when it chains to the client CA and is within its validity
};
// Nothing when the client presented no certificate.
std::optional<PeerCert> peer_certificate(const void* ssl);

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

// A client certificate (clientAuth) named `spec.common_name` for the public key of a PKCS#10
// request, signed by `ca`. The request's own signature is checked (its sender holds the key);
// its subject and extensions are ignored: the issuer decides what the certificate says.
// Returns the certificate, PEM.
Result<std::string> sign_client_csr(const KeyAndCert& ca, std::string_view csr_pem,
                                    const CertSpec& spec, uint64_t serial);

// A new private key and a certificate request for it, both PEM (a node agent enrolling).
struct KeyAndCsr {
  std::string key_pem;
  std::string csr_pem;
};
Result<KeyAndCsr> make_csr(const std::string& common_name);

// What a PEM certificate says about itself.
struct CertInfo {
  std::string serial;  // decimal
  std::string common_name;
  std::chrono::system_clock::time_point not_before, not_after;
};
Result<CertInfo> cert_info(std::string_view cert_pem);

// A random serial for a new certificate: positive, 62 bits.
uint64_t random_serial(const Random& random);

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

// The control plane's node CA, which signs node agents' client certificates: node-ca.pem and
// node-ca.key (0600) in `dir`, created on first use (ten years) and loaded after that. Fails
// when only one of the two exists or the key does not match the certificate.
struct NodeCaFiles {
  std::string cert, key;
};
NodeCaFiles node_ca_paths(const std::string& dir);
Result<KeyAndCert> ensure_node_ca(const std::string& dir, std::chrono::system_clock::time_point now,
                                  const Random& random);

}  // namespace gp::tls
