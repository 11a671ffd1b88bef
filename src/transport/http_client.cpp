#include "transport/http_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <optional>
#include <utility>

#include "tls/tls.h"

namespace gp::transport {

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
  const std::string original(url);
  if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else if (url.starts_with("https://")) {
    url.remove_prefix(8);
    ep.tls = true;
  } else if (url.find("://") != std::string_view::npos) {
    return fail(Error::invalid(
        fmt::format("bad endpoint '{}': the scheme must be http:// or https://", original)));
  }
  while (url.ends_with('/')) url.remove_suffix(1);
  std::string_view host = url, port;
  if (url.starts_with('[')) {  // [v6 address]:port
    auto close = url.find(']');
    if (close == std::string_view::npos)
      return fail(Error::invalid(fmt::format("bad endpoint '{}': unclosed '['", original)));
    host = url.substr(1, close - 1);
    std::string_view rest = url.substr(close + 1);
    if (rest.starts_with(':'))
      port = rest.substr(1);
    else if (!rest.empty())
      return fail(Error::invalid(fmt::format("bad endpoint '{}'", original)));
  } else if (auto colon = url.rfind(':'); colon != std::string_view::npos) {
    host = url.substr(0, colon);
    port = url.substr(colon + 1);
    if (port.empty()) port = "-";  // "host:" is an error, not the default port
  }
  ep.host = std::string(host);
  ep.port = port.empty() ? (ep.tls ? "443" : "80") : std::string(port);
  bool numeric = !ep.port.empty() && ep.port.size() <= 5 &&
                 std::all_of(ep.port.begin(), ep.port.end(), ::isdigit);
  if (ep.host.empty() || !numeric || std::stoi(ep.port) > 65535)
    return fail(Error::invalid(
        fmt::format("bad endpoint '{}': want http://host:port or https://host:port", original)));
  return ep;
}

namespace {

using Steady = std::chrono::steady_clock;

template <typename Stream>
asio::awaitable<ClientResponse> exchange(Stream& stream, http::request<http::string_body>& req) {
  co_await http::async_write(stream, req, asio::use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
  auto& res = parser.get();
  ClientResponse out;
  out.status = res.result_int();
  out.body = std::move(res.body());
  for (const auto& f : res)
    out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  co_return out;
}

http::request<http::string_body> make_request(
    const Endpoint& ep, std::string_view method, std::string_view target, std::string_view body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  http::request<http::string_body> req{
      http::string_to_verb(beast::string_view(method.data(), method.size())), std::string(target),
      11};
  // RFC 9110 7.2: the port too unless it is the scheme's default (servers build URLs of it).
  const bool v6 = ep.host.find(':') != std::string::npos;
  std::string host = v6 ? "[" + ep.host + "]" : ep.host;
  if (ep.port != (ep.tls ? "443" : "80")) host += ":" + ep.port;
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "gpuplane-cli");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST" || method == "PATCH") {
    // JSON unless the caller named another type (CloudEvents, tests of media types).
    if (req.find(http::field::content_type) == req.end())
      req.set(http::field::content_type, "application/json");
    req.body() = std::string(body);
  }
  req.prepare_payload();
  return req;
}

// The whole exchange, each step under the request's deadline (the stream's timer).
asio::awaitable<Result<ClientResponse>> call(const Endpoint& ep,
                                             std::shared_ptr<asio::ssl::context> ctx,
                                             http::request<http::string_body> req,
                                             Steady::time_point deadline) {
  auto ex = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(ex);
  beast::tcp_stream stream(ex);
  stream.expires_at(deadline);
  auto addresses = co_await resolver.async_resolve(ep.host, ep.port, asio::use_awaitable);
  co_await stream.async_connect(addresses, asio::use_awaitable);
  if (!ep.tls) {
    ClientResponse out = co_await exchange(stream, req);
    beast::error_code ec;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    co_return out;
  }
  beast::ssl_stream<beast::tcp_stream> tls_stream(std::move(stream), *ctx);
  if (auto expected = tls::expect_peer(tls_stream.native_handle(), ep.host); !expected)
    co_return fail(expected.error());
  beast::error_code ec;
  co_await tls_stream.async_handshake(asio::ssl::stream_base::client,
                                      asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    std::string why = tls::verify_failure(tls_stream.native_handle());
    std::string trust = ep.ca_file.empty() ? "the system CA store" : "the CA in " + ep.ca_file;
    if (!why.empty())
      co_return fail(Error::unavailable(
          fmt::format("TLS: the certificate of {}:{} is not trusted ({}); it was checked "
                      "against {} (--ca-file or GPUPLANE_CA_FILE)",
                      ep.host, ep.port, why, trust)));
    co_return fail(Error::unavailable(
        fmt::format("TLS handshake with {}:{} failed: {}", ep.host, ep.port, ec.message())));
  }
  ClientResponse out = co_await exchange(tls_stream, req);
  beast::get_lowest_layer(tls_stream).expires_after(std::chrono::milliseconds(500));
  // close_notify; the answer is complete whatever this returns
  co_await tls_stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  co_return out;
}

}  // namespace

Result<ClientResponse> http_request(const Endpoint& ep, std::string_view method,
                                    std::string_view target, std::string_view body,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    int timeout_ms, const std::atomic<bool>* cancel) {
  std::shared_ptr<asio::ssl::context> ctx;
  if (ep.tls) ctx = GP_TRY(tls::client_context(ep.ca_file, ep.identity_file));
  std::optional<Result<ClientResponse>> result;
  asio::io_context ioc;
  asio::co_spawn(ioc,
                 call(ep, ctx, make_request(ep, method, target, body, headers),
                      Steady::now() + std::chrono::milliseconds(timeout_ms)),
                 [&](const std::exception_ptr& e, Result<ClientResponse> r) {
                   if (!e) {
                     result = std::move(r);
                     return;
                   }
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& x) {
                     result = fail(Error::unavailable(
                         fmt::format("cannot reach {}:{}: {}", ep.host, ep.port, x.what())));
                   }
                 });
  if (!cancel) {
    ioc.run();
  } else {
    // Checked every 50 ms: a caller that stops (the agent on SIGTERM) does not wait out a long
    // poll. Leaving drops the connection; the coroutine is destroyed with the io_context.
    while (!result && !ioc.stopped()) {
      if (cancel->load()) return fail(Error::unavailable("cancelled"));
      ioc.run_for(std::chrono::milliseconds(50));
    }
  }
  if (!result) return fail(Error::internal("the request ended without an answer"));
  return std::move(*result);
}

}  // namespace gp::transport
