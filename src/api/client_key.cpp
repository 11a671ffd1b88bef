#include "api/client_key.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <optional>

namespace gp::api {
namespace {

namespace ip = boost::asio::ip;

// An address as parsed, IPv4-mapped IPv6 addresses as IPv4.
std::optional<ip::address> parse_client_address(std::string_view text) {
  boost::system::error_code ec;
  auto address = ip::make_address(std::string(text), ec);
  if (ec) return std::nullopt;
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return ip::make_address_v4(ip::v4_mapped, address.to_v6());
  return address;
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether `text` is an IPv4 address in dotted decimal as the address formats it (four parts,
// 0-255, no leading zeros): its own key, without parsing and formatting it again. Every request
// asks, and the formatting goes through sprintf.
bool canonical_v4(std::string_view text) {
  int parts = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    int value = 0;
    while (j < text.size() && j - i < 4 && text[j] >= '0' && text[j] <= '9')
      value = value * 10 + (text[j++] - '0');
    const size_t digits = j - i;
    if (digits == 0 || digits > 3 || value > 255 || (digits > 1 && text[i] == '0')) return false;
    if (++parts == 4) return j == text.size();
    if (j == text.size() || text[j] != '.') return false;
    i = j + 1;
  }
  return false;
}

}  // namespace

std::string client_key(std::string_view remote) {
  if (canonical_v4(remote)) return std::string(remote);
  auto address = parse_client_address(remote);
  if (!address) return std::string(remote);
  if (address->is_v4()) return address->to_string();
  auto bytes = address->to_v6().to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return ip::address_v6(bytes).to_string() + "/64";
}

std::string throttle_key(const HttpRequest& req) {
  if (req.client_cert && req.client_cert->verify_error.empty() &&
      !req.client_cert->common_name.empty())
    return "node:" + req.client_cert->common_name;
  return client_key(req.remote);
}

Result<TrustedProxies> TrustedProxies::parse(std::string_view list) {
  TrustedProxies out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view entry = trim_spaces(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (entry.empty()) continue;
    const size_t slash = entry.find('/');
    auto address = parse_client_address(entry.substr(0, slash));
    if (!address)
      return fail(Error::invalid(
          fmt::format("trusted proxy '{}' is not an address or network", entry.substr(0, 64))));
    const int max_bits = address->is_v4() ? 32 : 128;
    int bits = max_bits;
    if (slash != std::string_view::npos) {
      const std::string_view len = entry.substr(slash + 1);
      bits = -1;
      if (!len.empty() && len.size() <= 3 &&
          std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; }))
        bits = std::stoi(std::string(len));
      if (bits < 0 || bits > max_bits)
        return fail(Error::invalid(
            fmt::format("trusted proxy '{}': prefix length must be 0 to {}", entry, max_bits)));
    }
    if (address->is_v4()) {
      ip::network_v4 net(address->to_v4(), static_cast<unsigned short>(bits));
      if (net.network() != address->to_v4())
        return fail(
            Error::invalid(fmt::format("trusted proxy '{}' has host bits set (did you mean {}?)",
                                       entry, net.canonical().to_string())));
      out.v4_.push_back(net);
    } else {
      ip::network_v6 net(address->to_v6(), static_cast<unsigned short>(bits));
      if (net.network() != address->to_v6())
        return fail(
            Error::invalid(fmt::format("trusted proxy '{}' has host bits set (did you mean {}?)",
                                       entry, net.canonical().to_string())));
      out.v6_.push_back(net);
    }
  }
  return out;
}

bool TrustedProxies::contains(std::string_view text) const {
  if (empty()) return false;
  auto address = parse_client_address(text);
  if (!address) return false;
  if (address->is_v4()) {
    const ip::network_v4 host(address->to_v4(), 32);
    return std::any_of(v4_.begin(), v4_.end(), [&](const ip::network_v4& net) {
      return host == net || host.is_subnet_of(net);
    });
  }
  const ip::network_v6 host(address->to_v6(), 128);
  return std::any_of(v6_.begin(), v6_.end(), [&](const ip::network_v6& net) {
    return host == net || host.is_subnet_of(net);
  });
}

std::string TrustedProxies::client_address(
    std::string_view peer, const std::vector<std::string_view>& forwarded_for) const {
  if (!contains(peer)) return std::string(peer);
  std::vector<std::string_view> hops;
  for (std::string_view value : forwarded_for) {
    while (!value.empty()) {
      const size_t comma = value.find(',');
      hops.push_back(trim_spaces(value.substr(0, comma)));
      value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    }
  }
  std::string client(peer);
  for (auto hop = hops.rbegin(); hop != hops.rend(); ++hop) {
    auto address = parse_client_address(*hop);
    if (!address) break;
    client = address->to_string();
    if (!contains(client)) break;
  }
  return client;
}

std::string TrustedProxies::to_string() const {
  std::string out;
  for (const auto& n : v4_) out += (out.empty() ? "" : ",") + n.to_string();
  for (const auto& n : v6_) out += (out.empty() ? "" : ",") + n.to_string();
  return out;
}

}  // namespace gp::api
