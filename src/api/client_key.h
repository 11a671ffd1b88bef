// The key a client address is throttled under: an IPv4 address as it is, an IPv6 address by
// its /64 (one subscriber or host usually holds a whole /64, so per-/128 buckets would let it
// rotate addresses past every limit). IPv4-mapped IPv6 addresses count as IPv4; anything that
// does not parse is used as given.
#pragma once

#include <string>
#include <string_view>

namespace gp::api {

std::string client_key(std::string_view remote);

}  // namespace gp::api
