// Network's rows in the store that other modules read: a tenant's segment. Functions over the
// caller's transaction.
#pragma once

#include <optional>
#include <string>

#include "network/network.h"
#include "store/store.h"

namespace gp::network {

// The tenant's segment (its VNI and CIDR; `tenant` is the tenant's id), or nullopt when it has
// none (offboarded, or made before segments were allocated).
Result<std::optional<Segment>> load_segment(store::Tx& tx, const std::string& tenant_id);

}  // namespace gp::network
