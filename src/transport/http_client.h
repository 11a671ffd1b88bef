// transport: a small blocking HTTP/1.1 client for the CLI, the node agent and tests (Boost.Beast),
// over TCP or TLS (https://: TLS 1.2+, the server certificate verified against a CA file or the
// system store, and its name or IP address checked).
#pragma once

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace gp::transport {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(std::string_view name) const;
};

struct Endpoint {
  std::string host = "127.0.0.1";
  std::string port = "8080";
  bool tls = false;
  // With tls: trust only the CA certificates in this PEM file (empty: the system store).
  std::string ca_file;
  // With tls: present the client certificate and key in this PEM file (node mTLS).
  std::string identity_file;
};
// http://host[:port] or https://host[:port]; IPv6 hosts in brackets.
Result<Endpoint> parse_endpoint(std::string_view url);

// One request on a new connection. Connecting, the TLS handshake, sending and reading the answer
// all end by `timeout_ms` from the call (unavailable, "timeout", past it). With `cancel`, the
// call gives up (unavailable, "cancelled") within 50 ms of it turning true: a long poll does not
// hold up a caller that is stopping.
Result<ClientResponse> http_request(const Endpoint& ep, std::string_view method,
                                    std::string_view target, std::string_view body,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    int timeout_ms = 30000,
                                    const std::atomic<bool>* cancel = nullptr);

}  // namespace gp::transport
