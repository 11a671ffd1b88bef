// Private to the network module.
#pragma once

#include <span>

#include "network/network.h"

namespace gp::network {

// validate_policy against any set of CIDRs no rule may overlap (the renderer passes every
// tenant segment; the API passes the supernet).
Result<void> validate_policy_rules(const TenantPolicy& policy, std::span<const Ipv4Cidr> forbidden);

inline constexpr size_t kMaxInterfaceName = 15;  // IFNAMSIZ - 1
// 1 to 15 characters of letters, digits, '-', '_' or '.'.
Result<void> validate_interface(std::string_view name);

}  // namespace gp::network
