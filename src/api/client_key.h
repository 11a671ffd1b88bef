// Who a request comes from, for the limits that count clients: the client's address (through
// trusted proxies, from X-Forwarded-For) and the key its buckets are kept under.
#pragma once

#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/http.h"
#include "common/result.h"

namespace gp::api {

// The key a client address is throttled under: an IPv4 address as it is, an IPv6 address by
// its /64 (one subscriber or host usually holds a whole /64, so per-/128 buckets would let it
// rotate addresses past every limit). IPv4-mapped IPv6 addresses count as IPv4; anything that
// does not parse is used as given.
std::string client_key(std::string_view remote);

// The key of a request's address-based limits (failed authentications, requests without a
// valid credential, connections): a node agent that showed a client certificate chaining to the
// node CA (mTLS) is counted as that node ("node:<id>"), never by the address it shares with
// others; anyone else by client_key(req.remote).
std::string throttle_key(const HttpRequest& req);

// The reverse proxies (load balancers, ingress) whose X-Forwarded-For is believed: addresses
// and CIDR networks, IPv4 or IPv6. Empty: none, the TCP peer is the client.
class TrustedProxies {
 public:
  TrustedProxies() = default;
  // "10.0.0.0/8,192.0.2.10,2001:db8::/32": comma-separated, spaces allowed; invalid on any
  // entry that is not an address or network (host bits set in a network are refused too).
  static Result<TrustedProxies> parse(std::string_view list);

  bool empty() const { return v4_.empty() && v6_.empty(); }
  bool contains(std::string_view address) const;
  // The client's address. `peer` (the TCP peer) unless it is a trusted proxy; then the
  // X-Forwarded-For hops (the headers' values in order) are walked from the right, past every
  // trusted proxy, and the first other address is the client. A hop that is not an address
  // stops the walk at the trusted proxy before it (nothing left of a forged entry is believed);
  // when every hop is trusted, the left-most one is the client.
  std::string client_address(std::string_view peer,
                             const std::vector<std::string_view>& forwarded_for) const;
  std::string to_string() const;

 private:
  std::vector<boost::asio::ip::network_v4> v4_;
  std::vector<boost::asio::ip::network_v6> v6_;
};

}  // namespace gp::api
