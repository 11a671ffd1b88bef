// A small blocking HTTP/1.1 client for the CLI and tests (Boost.Beast).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace gp::cli {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(std::string_view name) const;
};

struct Endpoint {
  std::string host = "127.0.0.1";
  std::string port = "8080";
};
Result<Endpoint> parse_endpoint(std::string_view url);  // http://host:port

Result<ClientResponse> http_request(const Endpoint& ep, std::string_view method,
                                    std::string_view target, std::string_view body,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    int timeout_ms = 30000);

}  // namespace gp::cli
