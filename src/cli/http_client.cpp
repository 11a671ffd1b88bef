#include "cli/http_client.h"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <utility>

namespace gp::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

std::string ClientResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (beast::iequals(k, beast::string_view(name.data(), name.size()))) return v;
  return {};
}

Result<Endpoint> parse_endpoint(std::string_view url) {
  Endpoint ep;
  if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else if (url.starts_with("https://")) {
    return fail(Error::invalid("https endpoints are not supported by this build yet"));
  }
  while (url.ends_with('/')) url.remove_suffix(1);
  auto colon = url.rfind(':');
  if (colon == std::string_view::npos) {
    ep.host = std::string(url);
    ep.port = "80";
  } else {
    ep.host = std::string(url.substr(0, colon));
    ep.port = std::string(url.substr(colon + 1));
  }
  if (ep.host.empty() || ep.port.empty())
    return fail(Error::invalid(fmt::format("bad endpoint '{}': want http://host:port", url)));
  return ep;
}

Result<ClientResponse> http_request(const Endpoint& ep, std::string_view method,
                                    std::string_view target, std::string_view body,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    int timeout_ms) {
  try {
    asio::io_context ioc;
    asio::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.expires_after(std::chrono::milliseconds(timeout_ms));
    stream.connect(resolver.resolve(ep.host, ep.port));
    http::request<http::string_body> req{
        http::string_to_verb(beast::string_view(method.data(), method.size())), std::string(target),
        11};
    req.set(http::field::host, ep.host);
    req.set(http::field::user_agent, "gpuplane-cli");
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || method == "POST" || method == "PATCH") {
      // JSON unless the caller named another type (CloudEvents, tests of media types).
      if (req.find(http::field::content_type) == req.end())
        req.set(http::field::content_type, "application/json");
      req.body() = std::string(body);
    }
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    http::read(stream, buffer, parser);
    auto& res = parser.get();
    ClientResponse out;
    out.status = res.result_int();
    out.body = std::move(res.body());
    for (const auto& f : res)
      out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    beast::error_code ec;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    return out;
  } catch (const std::exception& e) {
    return fail(
        Error::unavailable(fmt::format("cannot reach {}:{}: {}", ep.host, ep.port, e.what())));
  }
}

}  // namespace gp::cli
