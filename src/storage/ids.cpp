// uid/gid range allocation: one aligned block per tenant, never overlapping.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "storage/storage.h"

namespace gp::storage {

Result<void> validate(const IdPoolConfig& c) {
  if (c.first < 1000 || c.last > kMaxId || c.first > c.last)
    return fail(Error::invalid(fmt::format(
        "id range {}-{} is invalid (1000 <= first <= last <= {})", c.first, c.last, kMaxId)));
  if (c.block_size < 16 || c.block_size > uint64_t{c.last} - c.first + 1)
    return fail(Error::invalid(
        fmt::format("id block size {} must be at least 16 and fit in the range", c.block_size)));
  return ok();
}

Result<TenantIds> allocate_ids(const IdPoolConfig& config, std::span<const TenantIds> existing,
                               std::string_view tenant) {
  GP_TRY_VOID(validate(config));
  GP_TRY_VOID(validate_dns_label("tenant", tenant));
  std::vector<std::pair<uint64_t, uint64_t>> used;
  for (const auto& t : existing) {
    if (t.tenant == tenant)
      return fail(Error::conflict(
          fmt::format("tenant '{}' already has ids {}-{}", tenant, t.range.first, t.range.last())));
    if (t.range.count > 0) used.emplace_back(t.range.first, t.range.last());
  }
  std::sort(used.begin(), used.end());
  const uint64_t block = config.block_size;
  uint64_t candidate = config.first;
  for (auto [first, last] : used) {
    if (candidate + block - 1 < first) break;
    if (last >= candidate)  // align up to the next block boundary counted from config.first
      candidate = config.first + (last + 1 - config.first + block - 1) / block * block;
  }
  if (candidate + block - 1 > config.last)
    return fail(ErrorCode::kResourceExhausted,
                fmt::format("id range {}-{} has no free block of {} left", config.first,
                            config.last, block));
  return TenantIds{std::string(tenant),
                   {static_cast<uint32_t>(candidate), static_cast<uint32_t>(block)}};
}

Result<std::vector<TenantIds>> release_ids(std::span<const TenantIds> existing,
                                           std::string_view tenant) {
  std::vector<TenantIds> rest;
  for (const auto& t : existing)
    if (t.tenant != tenant) rest.push_back(t);
  if (rest.size() == existing.size())
    return fail(Error::not_found(fmt::format("tenant '{}' has no id range", tenant)));
  return rest;
}

Result<uint32_t> allocate_project_id(const IdRange& ids, std::span<const ProjectVolumes> existing) {
  std::set<uint32_t> used;
  for (const auto& p : existing) used.insert(p.id);
  for (uint64_t id = uint64_t{ids.first} + 1; id <= ids.last(); ++id)
    if (!used.contains(static_cast<uint32_t>(id))) return static_cast<uint32_t>(id);
  return fail(
      ErrorCode::kResourceExhausted,
      fmt::format("the tenant's ids {}-{} are all used by projects", ids.first, ids.last()));
}

}  // namespace gp::storage
