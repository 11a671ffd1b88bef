// Tenant segments: VNI and CIDR allocation from the configured pools, without overlaps.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "network/network.h"

namespace gp::network {

Result<void> validate(const SegmentPoolConfig& c) {
  if (c.vni_first < 1 || c.vni_last > kMaxVni || c.vni_first > c.vni_last)
    return fail(Error::invalid(fmt::format("VNI range {}-{} is invalid (1 <= first <= last <= {})",
                                           c.vni_first, c.vni_last, kMaxVni)));
  if (c.supernet.prefix > 32 ||
      (c.supernet.prefix < 32 &&
       (c.supernet.network & ~(~uint32_t{0} << (32 - c.supernet.prefix)))))
    return fail(Error::invalid("supernet has host bits set"));
  if (c.prefix_length < c.supernet.prefix || c.prefix_length > 30)
    return fail(Error::invalid(
        fmt::format("tenant prefix length /{} must lie between the supernet's /{} and /30",
                    c.prefix_length, c.supernet.prefix)));
  return ok();
}

Result<void> validate_segments(std::span<const Segment> segments) {
  std::set<std::string_view> tenants;
  std::set<uint32_t> vnis;
  for (const auto& s : segments) {
    if (!tenants.insert(s.tenant).second)
      return fail(Error::invalid(fmt::format("tenant '{}' has two segments", s.tenant)));
    if (s.vni < 1 || s.vni > kMaxVni)
      return fail(
          Error::invalid(fmt::format("segment of '{}': VNI {} out of range", s.tenant, s.vni)));
    if (!vnis.insert(s.vni).second)
      return fail(Error::invalid(fmt::format("VNI {} is used by two segments", s.vni)));
  }
  std::vector<const Segment*> by_start;
  for (const auto& s : segments) by_start.push_back(&s);
  std::sort(by_start.begin(), by_start.end(),
            [](auto* a, auto* b) { return a->cidr.first() < b->cidr.first(); });
  for (size_t i = 1; i < by_start.size(); ++i)
    if (by_start[i - 1]->cidr.overlaps(by_start[i]->cidr))
      return fail(Error::invalid(fmt::format(
          "segments of '{}' ({}) and '{}' ({}) overlap", by_start[i - 1]->tenant,
          to_string(by_start[i - 1]->cidr), by_start[i]->tenant, to_string(by_start[i]->cidr))));
  return ok();
}

namespace {

std::optional<uint32_t> lowest_free_vni(const SegmentPoolConfig& c,
                                        std::span<const Segment> existing) {
  std::set<uint32_t> used;
  for (const auto& s : existing) used.insert(s.vni);
  uint32_t candidate = c.vni_first;
  for (uint32_t vni : used) {
    if (vni < candidate) continue;
    if (vni > candidate) break;
    if (candidate == c.vni_last) return std::nullopt;
    ++candidate;
  }
  if (candidate > c.vni_last) return std::nullopt;
  return candidate;
}

// The lowest block of the configured size inside the supernet that overlaps no existing CIDR:
// one pass over the existing intervals sorted by start, O(n log n).
std::optional<Ipv4Cidr> lowest_free_cidr(const SegmentPoolConfig& c,
                                         std::span<const Segment> existing) {
  const uint64_t block = uint64_t{1} << (32 - c.prefix_length);
  const uint64_t end = uint64_t{c.supernet.last()} + 1;  // one past the supernet
  std::vector<std::pair<uint64_t, uint64_t>> used;       // [first, last]
  for (const auto& s : existing)
    if (s.cidr.overlaps(c.supernet)) used.emplace_back(s.cidr.first(), s.cidr.last());
  std::sort(used.begin(), used.end());
  uint64_t candidate = c.supernet.first();
  for (auto [first, last] : used) {
    if (candidate + block - 1 < first) break;
    if (last >= candidate) candidate = (last + 1 + block - 1) / block * block;  // align up
  }
  if (candidate + block > end) return std::nullopt;
  return Ipv4Cidr{static_cast<uint32_t>(candidate), c.prefix_length};
}

}  // namespace

Result<Segment> allocate_segment(const SegmentPoolConfig& config, std::span<const Segment> existing,
                                 std::string_view tenant) {
  GP_TRY_VOID(validate(config));
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  for (const auto& s : existing)
    if (s.tenant == tenant)
      return fail(Error::conflict(fmt::format("tenant '{}' already has segment VNI {} {}", tenant,
                                              s.vni, to_string(s.cidr))));
  auto vni = lowest_free_vni(config, existing);
  if (!vni)
    return fail(ErrorCode::kResourceExhausted,
                fmt::format("VNI pool {}-{} is exhausted", config.vni_first, config.vni_last));
  auto cidr = lowest_free_cidr(config, existing);
  if (!cidr)
    return fail(ErrorCode::kResourceExhausted,
                fmt::format("supernet {} has no free /{} left", to_string(config.supernet),
                            config.prefix_length));
  return Segment{std::string(tenant), *vni, *cidr};
}

Result<std::vector<Segment>> release_segment(std::span<const Segment> existing,
                                             std::string_view tenant) {
  std::vector<Segment> rest;
  bool found = false;
  for (const auto& s : existing) {
    if (s.tenant == tenant)
      found = true;
    else
      rest.push_back(s);
  }
  if (!found) return fail(Error::not_found(fmt::format("tenant '{}' has no segment", tenant)));
  return rest;
}

}  // namespace gp::network
