// Private to the agent module: what the agent enforces on its node besides reporting. Each round
// it reads its assignment from the control plane (tenant segments and policies, volume plans,
// the storage deletions due for this node), executes the deletions and confirms each with its
// outcome, records the tenants whose trees it is about to hold, creates the planned volume trees,
// and applies the nftables ruleset for the live tenants and the workloads the runtime attached to
// this node. Parsing is pure; Enforcer::round does the I/O and never throws.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent.h"
#include "common/json.h"
#include "common/result.h"
#include "network/network.h"
#include "storage/storage.h"

namespace gp::agent {

struct DueDeletion {
  std::string id;
  std::string tenant;
  std::string project;  // empty: the whole tenant tree
  // What the tree to remove is: a tree at the path with another identity is never removed.
  storage::ExpectedTree expected;
};

struct Assignment {
  network::NodeNetState net;  // segments and policies; workloads come from the node
  std::vector<storage::TenantVolumes> volumes;
  // Ids of the planned tenants this node is not recorded as holding yet: it records them
  // (POST /v1/agent/storage-holdings) before it creates their trees.
  std::set<std::string> unheld;
  std::vector<DueDeletion> deletions;
  // The raw volume key (fscrypt, storage::kVolumeKeyBytes) of each tenant that has one, by
  // tenant id: its tree is encrypted under it. Kept in memory for the round only.
  std::map<std::string, std::string> volume_keys;
  ~Assignment();
  Assignment() = default;
  Assignment(Assignment&&) = default;
  Assignment& operator=(Assignment&&) = default;
};

// The body of GET /v1/agent/assignment, checked strictly enough that a malformed answer
// changes nothing on the node.
Result<Assignment> parse_assignment(const Json& j);

// The workloads file: {"NAME": {"tenant": "acme", "interface": "veth-a1", "address":
// "10.64.0.2"}, ...} as a CNI plugin or runtime writes it. Sorted by name.
Result<std::vector<network::Workload>> parse_workloads(const Json& j);

// Splits a command prefix ("ip netns exec ns1") into words; empty when `prefix` is blank.
std::vector<std::string> split_words(const std::string& prefix);

// One HTTP call to the control plane with the node credential: (status, parsed body).
using HttpCall = std::function<Result<std::pair<int, Json>>(
    std::string_view method, const std::string& path, const Json& body)>;

class Enforcer {
 public:
  explicit Enforcer(const AgentOptions& options);
  // True when any of --storage-root, --enforce-network is set.
  bool enabled() const;
  // One round; failures are logged and retried the next round. Returns false when something
  // failed (for --once).
  bool round(const HttpCall& http);
  // The job members the runtime attached to this node and their tenants' VXLAN devices
  // (agent/jobs.h): part of every ruleset from now on, and applied at once with the last
  // assignment's segments and policies, so a member never runs before its rules do.
  // unavailable when there is no assignment yet or the ruleset could not be applied.
  Result<void> set_runtime_network(std::vector<network::Workload> workloads,
                                   std::vector<network::OverlayLink> overlays);
  // The tenant's network policy as last assigned; without one, the default (no egress).
  network::TenantPolicy tenant_policy(const std::string& tenant) const;

 private:
  bool storage_round(const Assignment& a, const HttpCall& http);
  // Adds the tenant's volume key to the filesystem and encrypts its tree's top directory when
  // it is new (created empty here, before create_volumes fills it). False on failure.
  // `cannot_encrypt` is why the storage root cannot encrypt ("" when it can), asked once a
  // round. `state` says whether the tree is encrypted, and under which key or why not.
  struct TreeState {
    bool encrypted = false;
    std::string detail;
  };
  bool encrypt_tree(const storage::TenantVolumes& tv, const std::string& key,
                    const std::string& cannot_encrypt, std::set<std::string>* live_keys,
                    TreeState* state);
  // Audits each held tree (storage::audit_tree over the tenant's ids) and reports it with its
  // encryption state: POST /v1/agent/storage-report. Runs every --storage-audit-minutes.
  bool report_trees(const std::vector<std::pair<storage::TenantVolumes, TreeState>>& trees,
                    const HttpCall& http);
  // Removes from the filesystem the key of every tenant tree under the storage root that no
  // assigned tenant's key opens (an offboarded tenant, a tenant gone from this node): its files
  // and names are unreadable from then on, even to root. False when one could not be removed.
  // Only on a root that can encrypt.
  bool remove_unassigned_keys(const std::set<std::string>& live_keys);
  // Records the unheld tenants as held by this node; returns the tenants it may create trees of.
  std::set<std::string> hold_tenants(const Assignment& a, const HttpCall& http, bool* ok);
  bool network_round(const Assignment& a);
  // Renders `base` with the runtime's and the workloads file's workloads and applies it.
  bool apply_network(const network::NodeNetState& base);

  const AgentOptions& o_;
  network::NftCommand nft_;
  std::string applied_ruleset_;  // the text last applied successfully; "" before the first
  std::chrono::steady_clock::time_point applied_at_{};
  static constexpr std::chrono::seconds kResync{60};
  std::set<std::string> unattached_;  // workloads left out last round (warned about once)
  std::optional<network::NodeNetState> last_net_;  // the last assignment's segments, policies
  std::vector<network::Workload> runtime_workloads_;
  std::vector<network::OverlayLink> runtime_overlays_;
  bool warned_unrecorded_ = false;      // trees whose identity the filesystem cannot record
  std::set<std::string> warned_clear_;  // tenant trees left in clear (warned about once)
  std::optional<std::chrono::steady_clock::time_point> last_report_;  // of report_trees
};

}  // namespace gp::agent
