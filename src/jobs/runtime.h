// Driving podman on a node for jobs (docs/jobs.md): start a member from podman_run_argv(),
// read its state, find a node's members again by their labels after the agent restarts, stop
// them (SIGTERM, then SIGKILL after the grace period), read their logs, remove them. Every call
// runs podman directly (no shell) and is bounded in time.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/subprocess.h"
#include "jobs/jobs.h"

namespace gp::jobs {

class Podman {
 public:
  // `program`: the podman binary (PATH lookup when not a path).
  explicit Podman(std::string program = "podman",
                  std::chrono::milliseconds timeout = std::chrono::minutes(5))
      : program_(std::move(program)), timeout_(timeout) {}

  // Variables ("NAME=value") podman runs with, through env(1): CONTAINERS_CONF for one.
  void set_environment(std::vector<std::string> vars) { environment_ = std::move(vars); }

  // Starts a member (argv from podman_run_argv, whose argv[0] is replaced by this binary).
  // unavailable with podman's message when it could not start it (an image that cannot be
  // pulled, a runtime error); the container may then exist in state "created".
  Result<void> run(const std::vector<std::string>& argv) const;
  // Pulls `image` from its registry (whatever the node holds) and returns the manifest digest
  // the registry served ("sha256:..."): the reference `repository@digest` names exactly what
  // was pulled. unavailable with podman's message when it cannot be pulled.
  Result<std::string> pull(const std::string& image) const;
  // Starts a member made with MemberLaunch::create_only.
  Result<void> start(const std::string& name) const;
  Result<std::vector<ContainerStatus>> inspect(const std::vector<std::string>& names) const;
  // Every container carrying the job label (any job, any state), as `podman ps` lists them;
  // with `node`, only those of that node's agent.
  Result<std::vector<ContainerStatus>> list_members(const std::string& node = "") const;
  // SIGTERM, then SIGKILL once `grace` has passed (blocks meanwhile).
  Result<void> stop(const std::string& name, std::chrono::seconds grace) const;
  // Sends `signal` ("TERM", "KILL") to the container's process, without waiting.
  Result<void> kill(const std::string& name, std::string_view signal) const;
  // The last `tail` lines of stdout and stderr together (0: all).
  Result<std::string> logs(const std::string& name, int tail) const;
  Result<void> remove(const std::string& name) const;
  // Makes the image `tag` from a statically linked busybox and its applets (sh, cat, ls, ...)
  // with `podman import`: the image of the tests, the benchmarks and a simulated node's demo
  // jobs, made without pulling anything. `image_env`: "NAME=value" the image carries.
  Result<void> import_busybox(const std::string& tag,
                              const std::vector<std::string>& image_env = {},
                              const std::filesystem::path& busybox = "/bin/busybox") const;

 private:
  // Runs podman with `args`; unavailable with podman's error line when it exits non-zero.
  Result<ProcessResult> exec(std::vector<std::string> args, std::string_view what) const;
  Result<std::string> call(std::vector<std::string> args, std::string_view what) const;  // stdout
  std::string program_;
  std::chrono::milliseconds timeout_;
  std::vector<std::string> environment_;
};

// The cgroup a member's container is put under (`--cgroup-parent`), owned by the agent and
// carrying the member's memory limit. It outlives the container, so once the member has ended
// the agent can still tell whether its memory reached the limit: on kernels whose cgroup v1
// memory controller reports no OOM kill (these machines: `oom_kill` stays 0 and podman's
// OOMKilled stays false), a member killed by SIGKILL at its limit is read as out of memory
// (ended_by_oom). On cgroup v2 the group's memory.events counts the kills.
//
// podman puts the container's conmon in the group too (<group>/conmon), so the group's limit is
// the member's plus kConmonHeadroom: the member's own limit (podman's --memory, on the
// container's cgroup inside the group) is reached first and the kernel's OOM killer chooses
// among the member's processes only. Were the two limits equal, the killer could choose conmon,
// and podman would never learn that the container ended.
class MemberCgroup {
 public:
  static constexpr int64_t kConmonHeadroom = 32 << 20;
  // Creates <root>/memory/gpuplane/<name> (v1) or <root>/gpuplane/<name> (v2, enabling the
  // memory controller on the way) with `memory_bytes` + kConmonHeadroom as its limit.
  static Result<MemberCgroup> create(const std::string& name, int64_t memory_bytes,
                                     const std::filesystem::path& root = "/sys/fs/cgroup");
  // The group `name` as create() made it, without touching it: to read whether its memory
  // reached the limit, or to remove it (after an agent restart too). invalid_argument for a
  // name that is not one path segment.
  static Result<MemberCgroup> existing(const std::string& name,
                                       const std::filesystem::path& root = "/sys/fs/cgroup");
  const std::string& parent() const { return parent_; }  // for --cgroup-parent
  // Whether the member's memory reached its limit (v1: the group's peak usage at the member's
  // limit or above, conmon's few hundred KiB included; v2: an OOM kill or a limit hit in the
  // group, from its hierarchical memory.events).
  Result<bool> reached_limit() const;
  // Removes the group and what podman left under it, in every controller.
  Result<void> remove() const;

 private:
  std::filesystem::path root_, memory_dir_;
  std::string parent_;
  bool v2_ = false;
};

}  // namespace gp::jobs
