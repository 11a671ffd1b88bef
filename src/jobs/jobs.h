// Jobs (docs/jobs.md): a tenant's work, run as containers on the GPUs of its allocation, inside
// every boundary the tenant was promised. This header is the pure part: the job spec a tenant
// submits and its validation, the job's states and the transitions between them, and what a
// node runs for one member of a job (the `podman run` command line with every boundary in it,
// the CDI spec of a simulated node's stand-in GPUs, the reading of `podman inspect`). Driving
// podman on the node is jobs/runtime.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace gp::jobs {

// ---- the spec a tenant submits ----

inline constexpr int kMaxGangMembers = 64;
inline constexpr int kMaxUnitsPerMember = 64;
inline constexpr size_t kMaxArgs = 256;  // command and args, each
inline constexpr size_t kMaxArgBytes = 4096;
inline constexpr size_t kMaxEnv = 128;
inline constexpr size_t kMaxEnvValueBytes = 32 * 1024;
inline constexpr size_t kMaxSecrets = 32;
inline constexpr int kMaxRetries = 10;
inline constexpr int64_t kMaxDurationSeconds = 30LL * 24 * 3600;
inline constexpr int64_t kDefaultDurationSeconds = 24LL * 3600;

// The project volumes a job can mount: the project's trees of those kinds (storage module),
// at /data/<kind> in every member.
struct VolumeMount {
  std::string kind;  // "datasets" | "models" | "checkpoints" | "scratch"
  bool read_only = false;
  bool operator==(const VolumeMount&) const = default;
};

struct EnvVar {
  std::string name, value;
  bool operator==(const EnvVar&) const = default;
};

enum class RestartPolicy { kNever, kOnFailure };
std::string_view restart_policy_name(RestartPolicy p);  // "never", "on-failure"

struct JobSpec {
  std::string name;   // a DNS label, unique among the project's live jobs
  std::string image;  // an image reference: [registry/]path[:tag][@sha256:digest]
  std::vector<std::string> command, args;
  std::vector<EnvVar> env;
  std::string offering;  // the offering's name or id
  int count = 1;         // units of the offering each member gets
  int members = 1;       // the gang's size: all start together or none does
  std::vector<VolumeMount> volumes;
  std::vector<std::string> secrets;  // the tenant's secrets, as files under /run/secrets/
  int64_t max_duration_seconds = kDefaultDurationSeconds;
  RestartPolicy restart = RestartPolicy::kNever;
  int retries = 0;  // on-failure: how many times a failed member is started again
  // Its allocation's place in the tenant's queue, and whether higher-priority work of the
  // tenant (or a lender reclaiming its quota) may preempt it (docs/scheduling.md).
  std::string priority_class = "normal";  // low | normal | high | critical
  bool preemptible = false;
  bool operator==(const JobSpec&) const = default;
  Json to_json() const;
};

// A submitted body, strictly: unknown fields, wrong types and values out of range are
// invalid_argument naming the field. There is no field for privileges, host namespaces, host
// paths or devices: what a job gets is decided by its allocation and its tenant alone.
// Refused env names: every name that selects GPUs in the NVIDIA stack
// (policy::env_selects_gpu_devices) and the names gpuplane sets itself (set_by_platform()).
Result<JobSpec> parse_job_spec(const Json& body);

// Whether gpuplane sets `name` in every member (one of platform_env()'s names).
bool set_by_platform(std::string_view name);

// ---- states ----

enum class State { kQueued, kStarting, kRunning, kSucceeded, kFailed, kCancelled, kPreempted };
// Each state's name, at its value's index.
inline constexpr std::array<std::string_view, 7> kJobStateNames = {
    "queued", "starting", "running", "succeeded", "failed", "cancelled", "preempted"};
std::string_view state_name(State s);
std::optional<State> parse_state(std::string_view s);
inline bool finished(State s) {
  return s == State::kSucceeded || s == State::kFailed || s == State::kCancelled ||
         s == State::kPreempted;
}

// Why a job failed.
enum class Failure { kNone, kExitCode, kOom, kNodeLost, kImagePull, kDeadline, kStartFailed };
// Each failure's name, at its value's index ("" for none).
inline constexpr std::array<std::string_view, 7> kFailureNames = {
    "", "exit_code", "oom", "node_lost", "image_pull", "deadline", "start_failed"};
std::string_view failure_name(Failure f);  // "", "exit_code", "oom", "node_lost", ...

// What happens to a job: the scheduler placed its allocation, the node started or lost its
// containers, a member exited, the tenant cancelled, the scheduler preempted it.
struct Event {
  enum Kind {
    kPlaced,       // queued -> starting
    kStarted,      // starting -> running (every member runs)
    kExited,       // a member's container ended: exit_code, oom
    kStartFailed,  // starting -> failed (image_pull or start_failed, with a message)
    kNodeLost,     // starting/running -> failed node_lost (queued again under on-failure)
    kDeadline,     // running past max_duration -> failed deadline
    kCancel,       // any live state -> cancelled
    kPreempt,      // any live state -> preempted
    kEvicted,      // starting/running -> queued: its node's drain reached its deadline
  } kind;
  int exit_code = 0;
  bool oom = false;
  Failure start_failure = Failure::kStartFailed;  // kStartFailed: kImagePull or kStartFailed
};

struct Transition {
  State to;
  Failure failure = Failure::kNone;
  bool restart = false;  // kExited under on-failure with retries left: start the member again
  // kNodeLost under on-failure with retries left, and kEvicted: a new attempt under a new
  // allocation, placed anew (on other nodes).
  bool requeue = false;
};

// The next state, or failed_precondition for an event the state does not take (a finished job
// takes none). `attempts` counts the starts so far (1 after the first).
Result<Transition> next_state(State from, const Event& e, const JobSpec& spec, int attempts);

// ---- what a node runs for one member ----

// A GPU (or MIG instance) given to a member, as the node's CDI spec names it.
struct Device {
  std::string cdi_name;  // "nvidia.com/gpu=GPU-<uuid>" or "sim.gpuplane.dev/gpu=GPU-sim-..."
  std::string uuid;      // what NVIDIA_VISIBLE_DEVICES lists
};

struct BindMount {
  std::string host_path, container_path;
  bool read_only = true;
};

struct Limits {
  int64_t cpu_millis = 0;    // 0: no CPU limit
  int64_t memory_bytes = 0;  // 0: no memory limit; swap is never added on top
  int64_t pids = 4096;
  int64_t open_files = 16384;  // at most the podman process's own hard limit (runc refuses more)
};

struct MemberLaunch {
  std::string container;  // podman's name: container_name(job, rank, attempt)
  std::string node;       // the node whose agent owns it (its label: several agents may share
                          // one podman, as simulated nodes do)
  std::string log_path;   // where podman writes its output (k8s-file); empty: podman's default
  std::string job_id, tenant_id, project_id, allocation_id;
  int rank = 0, world_size = 1, attempt = 1;
  std::string master_addr;  // rank 0's address on the tenant's network
  int master_port = 29500;
  std::string image;
  std::vector<std::string> command, args;
  std::vector<EnvVar> env;  // the tenant's, already checked by parse_job_spec
  std::vector<Device> devices;
  // The tenant's id block: the container's uids and gids 0..count-1 are the host's
  // first..first+count-1, so container root is the tenant's first id on the host, never root.
  uint32_t ids_first = 0, ids_count = 0;
  uint32_t run_as = 0;  // the id (host side, inside the block) the process runs as: the project's
  // Project volumes, the secrets directory (tmpfs), the agent's /etc/hosts and /etc/resolv.conf.
  std::vector<BindMount> mounts;
  std::string netns;          // a network namespace path, or empty for no network at all
  std::string hostname;       // empty: the container's name
  std::string cgroup_parent;  // MemberCgroup::parent(), or empty for podman's default
  Limits limits;
  int stop_grace_seconds = 30;
  // `podman create` instead of `podman run --detach`: everything made, nothing started (a gang
  // member waiting for the others; Podman::start starts it).
  bool create_only = false;
};

// ---- Names: what a member resolves (docs/jobs.md, "Names and DNS") ----
// Each member gets an /etc/hosts and an /etc/resolv.conf of the agent's making, bind-mounted
// read-only: nothing of the node's own files. Its hostname and every member of its job are
// names in /etc/hosts ("<job name>-<rank>"); the nameservers are those of the node's resolvers
// the tenant's egress policy lets it reach (UDP port 53), and none when the policy allows none.
struct MemberNames {
  std::string hostname;  // "<job name>-<rank>"
  struct Host {
    std::string name, address;
  };
  std::vector<Host> hosts;               // the job's members on the tenant's network
  std::vector<std::string> nameservers;  // IPv4 addresses
};
// "<job name>-<rank>", the name cut so that the whole stays one DNS label (63 characters).
std::string member_hostname(std::string_view job_name, int rank);
std::string render_hosts(const MemberNames& names);
std::string render_resolv_conf(const MemberNames& names);
// The IPv4 nameservers of a resolv.conf (a node's own), loopback ones left out: a member, in a
// network namespace of its own, cannot reach the node's 127.0.0.53.
std::vector<std::string> resolv_conf_nameservers(std::string_view text);

// How long a member has between SIGTERM and SIGKILL when its job stops it (a cancel, its maximum
// duration passed); an allocation that ended gives its own grace (docs/lifecycle.md).
inline constexpr int kStopGraceSeconds = 10;

// Whether `s` can be one path segment of a name the node makes (a cgroup, a secret's file, a
// device): 1 to 200 of letters, digits, '-', '_' and '.', and not "." or "..".
bool plain_segment(std::string_view s);

// "gp-<job id>-r<rank>-a<attempt>".
std::string container_name(std::string_view job_id, int rank, int attempt);

// Labels on every member container, so an agent that restarts finds its containers again.
inline constexpr std::string_view kLabelJob = "dev.gpuplane.job";
inline constexpr std::string_view kLabelTenant = "dev.gpuplane.tenant";
inline constexpr std::string_view kLabelRank = "dev.gpuplane.rank";
inline constexpr std::string_view kLabelAttempt = "dev.gpuplane.attempt";
inline constexpr std::string_view kLabelAllocation = "dev.gpuplane.allocation";
inline constexpr std::string_view kLabelNode = "dev.gpuplane.node";

// The argv (no shell) of `podman run --detach` for one member, runtime runc: every capability
// dropped, no-new-privileges, podman's default seccomp profile, the user namespace onto the
// tenant's ids, only the member's devices (CDI), its limits and ulimits, its mounts and
// nothing else of the host, its network namespace. The tenant's env comes first and the
// platform's last, so the platform's values are the ones the container sees.
// invalid_argument when the launch is unusable (no image, an id block that does not hold
// run_as, a mount path that is not absolute).
Result<std::vector<std::string>> podman_run_argv(const MemberLaunch& m);

// The environment the platform sets for `m`: NVIDIA_VISIBLE_DEVICES (its UUIDs, or "void"),
// CUDA_VISIBLE_DEVICES (0..n-1, or empty), RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, GPUPLANE_JOB.
std::vector<EnvVar> platform_env(const MemberLaunch& m);

// What `podman inspect` says of one container.
struct ContainerStatus {
  std::string name;
  std::string state;  // "created", "running", "exited", "stopped", ...
  bool running = false;
  int exit_code = 0;
  bool oom_killed = false;
  std::string error;  // the runtime's error when it failed to start
  std::string image_digest;
  std::string job_id, allocation_id, node;
  int rank = 0, attempt = 0;
};
// What podman's k8s-file log driver wrote ("<time> stdout|stderr F|P <text>" per line) as the
// text the container wrote: full lines ("F") end with a newline, partial ones ("P") do not.
// Lines that do not have that form are kept as they are.
std::string k8s_file_text(std::string_view raw);

// The JSON array `podman inspect --type container` prints. invalid_argument when malformed.
Result<std::vector<ContainerStatus>> parse_podman_inspect(const Json& j);
// The JSON array `podman ps --all --format json` prints: name, state, exit code and labels (not
// oom_killed, error or image_digest; inspect gives those).
Result<std::vector<ContainerStatus>> parse_podman_ps(const Json& j);

// Whether a member that ended was killed for memory: podman says so, or it died of SIGKILL
// (exit 137) after its memory reached the limit (MemberCgroup::reached_limit), which is all a
// kernel that reports no OOM kill shows.
bool ended_by_oom(const ContainerStatus& s, bool memory_reached_limit);

// A simulated node's stand-in GPUs as a CDI spec (kind "sim.gpuplane.dev/gpu"): one device per
// UUID, each a character device node at `device_paths[i]` (the agent makes them: stand-ins of
// /dev/null, so a job sees exactly the nodes of the devices it was given).
inline constexpr std::string_view kSimCdiKind = "sim.gpuplane.dev/gpu";
Result<Json> sim_cdi_spec(std::span<const std::string> uuids,
                          std::span<const std::string> device_paths);

}  // namespace gp::jobs
