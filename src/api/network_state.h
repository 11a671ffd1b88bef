// The network as a node enforces it, shared by the nftables preview (handlers_network.cpp) and
// the agent's assignment (handlers_storage.cpp).
#pragma once

#include "api/api.h"
#include "network/network.h"
#include "store/store.h"

namespace gp::api {

// Every live tenant segment and the policy of each tenant that has one (re-validated, so a node
// never receives a policy the core would not render), named by tenant name and sorted by it.
// Workloads and overlay links are left to the node's agent.
Result<network::NodeNetState> node_net_state(Api& api, store::Tx& tx);

}  // namespace gp::api
