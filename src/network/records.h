// Network's rows in the store (migration 4), read and written only here: each tenant's segment
// and its network policy. Keyed by tenant id (a Segment's `tenant` here is the tenant's id; the
// pure core names tenants, and callers put the name in). Functions over the caller's
// transaction.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "network/network.h"
#include "store/store.h"

namespace gp::network {

// The tenant's segment (its VNI and CIDR; `tenant` is the tenant's id), or nullopt when it has
// none (offboarded, or made before segments were allocated).
Result<std::optional<Segment>> load_segment(store::Tx& tx, const std::string& tenant_id);

// Every tenant's segment.
Result<std::vector<Segment>> load_segments(store::Tx& tx);
Result<void> insert_segment(store::Tx& tx, const Segment& segment, int64_t now_micros);

// A tenant's policy as it was written (network::to_json without its tenant) and its version.
struct StoredPolicyRecord {
  Json policy;
  int64_t version = 0;
};
// nullopt: never set.
Result<std::optional<StoredPolicyRecord>> load_policy(store::Tx& tx, const std::string& tenant_id);
// The policies of the tenants that have a segment, as (tenant id, policy).
Result<std::vector<std::pair<std::string, Json>>> load_policies_with_segments(store::Tx& tx);
// Writes version `version` of the tenant's policy: version 1 is its first, any later one
// replaces version - 1 (conflict when the stored one is not that).
Result<void> save_policy(store::Tx& tx, const std::string& tenant_id, const Json& policy,
                         int64_t version, int64_t now_micros);

// Offboarding: the tenant's segment and policy are released.
Result<void> release_tenant(store::Tx& tx, const std::string& tenant_id);

}  // namespace gp::network
