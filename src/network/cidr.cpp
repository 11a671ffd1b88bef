// IPv4 addresses and CIDRs: strict parsing and formatting.
#include <fmt/format.h>

#include <charconv>

#include "network/network.h"

namespace gp::network {

Result<uint32_t> parse_ipv4(std::string_view text) {
  auto bad = [&] { return fail(Error::invalid(fmt::format("'{}' is not an IPv4 address", text))); };
  uint32_t address = 0;
  size_t pos = 0;
  for (int octet = 0; octet < 4; ++octet) {
    if (octet > 0) {
      if (pos >= text.size() || text[pos] != '.') return bad();
      ++pos;
    }
    size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && pos - start < 4) ++pos;
    size_t len = pos - start;
    // Leading zeros are refused: some tools read them as octal.
    if (len == 0 || len > 3 || (len > 1 && text[start] == '0')) return bad();
    unsigned value = 0;
    std::from_chars(text.data() + start, text.data() + pos, value);
    if (value > 255) return bad();
    address = (address << 8) | value;
  }
  if (pos != text.size()) return bad();
  return address;
}

std::string format_ipv4(uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xFF, (a >> 8) & 0xFF, a & 0xFF);
}

Result<Ipv4Cidr> parse_cidr(std::string_view text) {
  auto slash = text.find('/');
  uint32_t address = GP_TRY(parse_ipv4(text.substr(0, slash)));
  unsigned prefix = 32;
  if (slash != std::string_view::npos) {
    auto digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
        prefix > 32 || (digits.size() > 1 && digits[0] == '0'))
      return fail(Error::invalid(fmt::format("'{}': prefix length must be 0 to 32", text)));
  }
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  if ((address & ~mask) != 0)
    return fail(Error::invalid(fmt::format("'{}' has host bits set (the network is {}/{})", text,
                                           format_ipv4(address & mask), prefix)));
  return Ipv4Cidr{address, static_cast<uint8_t>(prefix)};
}

std::string to_string(const Ipv4Cidr& cidr) {
  return fmt::format("{}/{}", format_ipv4(cidr.network), cidr.prefix);
}

}  // namespace gp::network
