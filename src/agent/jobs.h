// Private to the agent module: running the members of jobs assigned to this node (docs/jobs.md).
// The heartbeat's assignment lists them ("jobs"); each round JobRunner makes podman agree: it
// starts the members that do not run yet (every boundary in podman_run_argv), stops those the
// control plane wants stopped (SIGTERM, SIGKILL after the grace period) and removes those no
// longer assigned, and returns the reports the next heartbeat carries as "jobs": each member's
// state and the output it wrote since the control plane's last offset. Everything it knows it
// reads back from podman (the containers carry their job, rank, attempt and node as labels), so
// an agent restarted after kill -9 finds its members again and neither loses nor duplicates them.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"
#include "jobs/jobs.h"
#include "jobs/runtime.h"
#include "network/network.h"

namespace gp::agent {

// One member the control plane assigned to this node (heartbeat reply: assignments.jobs[]).
struct MemberAssignment {
  std::string job, name, tenant_id, tenant, project_id, allocation_id;
  int rank = 0, attempt = 1, world_size = 1;
  std::string image;
  bool pull_always = false;
  std::vector<std::string> allowed_registries;
  std::vector<std::string> command, args;
  std::vector<jobs::EnvVar> env;
  struct Device {
    std::string gpu;         // the GPU's UUID
    std::optional<int> mig;  // a MIG instance: its first slice
  };
  std::vector<Device> devices;
  uint32_t ids_first = 0, ids_count = 0, run_as = 0;
  struct Volume {
    std::string kind, path;  // path relative to the node's storage root
    bool read_only = false;
  };
  std::vector<Volume> volumes;
  int64_t cpu_millis = 0, memory_bytes = 0;
  bool running = true;  // desired is not "stopped"
  bool hold = false;    // desired "created": a gang member made, not started until all are
  int stop_grace_seconds = 10;
  int64_t log_offset = 0;  // what the control plane holds of this attempt's output
  // The tenant's secrets it mounts, opened: files under /run/secrets on a tmpfs of its own.
  std::vector<std::pair<std::string, std::string>> secrets;
  // Its place on the tenant's network; nullopt when the tenant has none (it runs without one).
  struct Network {
    uint32_t vni = 0;
    uint32_t address = 0;
    std::string master_addr;                        // rank 0's address
    std::vector<std::pair<int, uint32_t>> members;  // its job's members: rank, address
    std::vector<network::OverlayPeer> peers;        // the tenant's members on other nodes
  };
  std::optional<Network> network;
};

// The "jobs" array of a heartbeat reply's assignments. Strict: one malformed entry fails the
// whole parse, so nothing on the node changes that round.
Result<std::vector<MemberAssignment>> parse_member_assignments(const Json& jobs);

struct JobRunnerOptions {
  std::string node_id;       // this node: the label that tells its containers from others'
  std::string state_dir;     // member output under <state_dir>/jobs
  std::string storage_root;  // project volumes; empty: the node mounts none
  bool simulated = false;    // GPUs are stand-ins: a CDI spec of kind sim.gpuplane.dev/gpu
  std::string cdi_dir = "/var/run/cdi";
  std::string device_dir = "/dev/gpuplane-sim";  // a simulated node's stand-in device nodes
  std::string cgroup_root = "/sys/fs/cgroup";    // empty: no member cgroup of the agent's own
  std::string podman = "podman";
  // Members on their tenant's network (docs/jobs.md, "Network"): each in a namespace of its own
  // joined to the node, the tenant's VXLAN towards its members on other nodes, the ruleset
  // applied through `apply_network` before the member starts. Off: --network none.
  bool network = false;
  std::vector<std::string> ip_prefix;  // words before `ip` and `sysctl` (the node's namespace)
  uint32_t underlay = 0;               // this node's address towards other nodes
  std::function<Result<void>(std::vector<network::Workload>, std::vector<network::OverlayLink>)>
      apply_network;
  // The node's resolvers (IPv4) and the tenants' policies: a member on its tenant's network has
  // as nameservers those resolvers its tenant's egress rules let it reach (jobs.h, "Names").
  std::vector<uint32_t> resolvers;
  std::function<network::TenantPolicy(const std::string& tenant)> tenant_policy;
};

class JobRunner {
 public:
  JobRunner(JobRunnerOptions options, const Clock& clock);
  // One round over the node's assignment; returns the reports of every member it holds.
  // `stop_graces`: the grace (seconds) of each ended allocation the node is stopping (the
  // assignment's "stop"s): a member no longer assigned gets its allocation's between SIGTERM
  // and SIGKILL; one running without a stop is a stale attempt and is killed at once.
  std::vector<Json> round(const std::vector<MemberAssignment>& assigned,
                          const std::map<std::string, int64_t>& stop_graces = {});
  // The allocations with a member container still running on the node after the last round
  // (assigned or being stopped): what the heartbeat's "holding" reports.
  const std::set<std::string>& holding() const { return holding_; }
  // The node may have been declared failed and its jobs placed elsewhere: every member this
  // agent runs is killed (SIGKILL) and removed, whatever its assignment said. Returns how many.
  int fence();

 private:
  Result<void> start(const MemberAssignment& m, const std::vector<MemberAssignment>& assigned);
  Json report(const MemberAssignment& m, const jobs::ContainerStatus& s);
  Result<void> write_cdi_spec(const std::vector<MemberAssignment>& assigned);
  std::string log_path(const std::string& container) const;
  void remove(const std::string& container);
  // The member's secrets as files on a tmpfs (never on the node's disk), owned by the id it runs
  // as; the directory podman bind-mounts read-only at /run/secrets. Undone by unmount_secrets.
  Result<std::string> mount_secrets(const MemberAssignment& m, const std::string& container);
  void unmount_secrets(const std::string& container);
  std::string secrets_dir(const std::string& container) const;
  // The member's /etc/hosts and /etc/resolv.conf, in a directory of its own under the state
  // directory; mounted read-only, removed with the member.
  Result<std::vector<jobs::BindMount>> write_names(const MemberAssignment& m,
                                                   const std::string& container,
                                                   const std::string& hostname);
  std::string names_dir(const std::string& container) const;
  // The member's namespace joined to the node; undone by detach.
  Result<void> attach(const MemberAssignment& m, const std::string& container);
  void detach(const std::string& container);
  // The tenants' VXLAN devices as the assigned members need them (peers changed: made again).
  void sync_overlays(const std::vector<MemberAssignment>& assigned);
  // Hands the attached members and the tenants' overlay links to the node's ruleset.
  Result<void> apply_network(const std::vector<MemberAssignment>& assigned,
                             const std::set<std::string>& running);

  JobRunnerOptions o_;
  const Clock& clock_;
  jobs::Podman podman_;
  // Members asked to stop: when SIGTERM went out (SIGKILL follows after the grace period).
  std::map<std::string, TimePoint> stopping_;
  // Members that could not start, with why; reported as failed until no longer assigned.
  std::map<std::string, std::pair<jobs::Failure, std::string>> failed_;
  std::string cdi_written_;
  std::map<uint32_t, std::vector<network::OverlayPeer>> overlays_;  // VNI -> peers, as applied
  std::set<std::string> attached_;  // containers whose namespace this agent joined (or found)
  std::set<std::string> holding_;   // see holding()
  bool forwarding_ = false;         // the node forwards IPv4 (set once)
};

}  // namespace gp::agent
