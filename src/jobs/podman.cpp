// What a node runs for one member of a job: the `podman run` command line, the platform's
// environment, the reading of `podman inspect`, a simulated node's CDI spec (jobs.h).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "jobs/jobs.h"

namespace gp::jobs {

namespace {

std::string label(std::string_view key, std::string_view value) {
  return fmt::format("{}={}", key, value);
}

const Json* member(const Json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string text(const Json& j, std::string_view key) {
  const Json* v = member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

int label_int(const Json& labels, std::string_view key) {
  std::string v = text(labels, key);
  int n = 0;
  for (char c : v) {
    if (c < '0' || c > '9' || n > 100'000'000) return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

void read_labels(const Json* labels, ContainerStatus& s) {
  if (!labels || !labels->is_object()) return;
  s.job_id = text(*labels, kLabelJob);
  s.allocation_id = text(*labels, kLabelAllocation);
  s.rank = label_int(*labels, kLabelRank);
  s.attempt = label_int(*labels, kLabelAttempt);
  s.node = text(*labels, kLabelNode);
}

}  // namespace

bool plain_segment(std::string_view s) {
  return !s.empty() && s.size() <= 200 && s != "." && s != ".." &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

std::string container_name(std::string_view job_id, int rank, int attempt) {
  return fmt::format("gp-{}-r{}-a{}", job_id, rank, attempt);
}

std::vector<EnvVar> platform_env(const MemberLaunch& m) {
  std::string uuids, ordinals;
  for (size_t i = 0; i < m.devices.size(); ++i) {
    if (i) {
      uuids += ',';
      ordinals += ',';
    }
    uuids += m.devices[i].uuid;
    ordinals += std::to_string(i);
  }
  // "void": the NVIDIA runtime gives no GPU, whatever the image says.
  return {{"NVIDIA_VISIBLE_DEVICES", m.devices.empty() ? "void" : uuids},
          {"CUDA_VISIBLE_DEVICES", ordinals},
          {"RANK", std::to_string(m.rank)},
          {"LOCAL_RANK", "0"},
          {"WORLD_SIZE", std::to_string(m.world_size)},
          {"MASTER_ADDR", m.master_addr},
          {"MASTER_PORT", std::to_string(m.master_port)},
          {"GPUPLANE_JOB", m.job_id}};
}

bool set_by_platform(std::string_view name) {
  const auto env = platform_env(MemberLaunch{});
  return std::any_of(env.begin(), env.end(), [&](const EnvVar& e) { return e.name == name; });
}

Result<std::vector<std::string>> podman_run_argv(const MemberLaunch& m) {
  if (m.container.empty() || m.job_id.empty())
    return fail(Error::invalid("member launch: no container name or job"));
  if (m.image.empty() || m.image.front() == '-')
    return fail(Error::invalid("member launch: no image"));
  if (m.ids_count == 0 || m.run_as < m.ids_first || m.run_as - m.ids_first >= m.ids_count)
    return fail(
        Error::invalid(fmt::format("member launch: uid {} is outside the tenant's ids {}+{}",
                                   m.run_as, m.ids_first, m.ids_count)));
  std::set<std::string> targets;
  for (const auto& b : m.mounts) {
    if (!b.host_path.starts_with('/') || !b.container_path.starts_with('/') ||
        b.host_path.find(',') != std::string::npos ||
        b.container_path.find(',') != std::string::npos)
      return fail(Error::invalid(
          fmt::format("member launch: mount {} -> {} must join two absolute paths without ','",
                      b.host_path, b.container_path)));
    if (!targets.insert(b.container_path).second)
      return fail(Error::invalid("member launch: two mounts at " + b.container_path));
  }
  if (!m.cgroup_parent.empty() &&
      (!m.cgroup_parent.starts_with('/') || m.cgroup_parent.find("..") != std::string::npos))
    return fail(Error::invalid("member launch: the cgroup parent must be an absolute path"));
  if (!m.log_path.empty() &&
      (!m.log_path.starts_with('/') || m.log_path.find(',') != std::string::npos))
    return fail(Error::invalid("member launch: the log path must be absolute, without ','"));
  if (!m.hostname.empty()) GP_TRY_VOID(validate_dns_label("member launch: hostname", m.hostname));
  if (!m.netns.empty() && !m.netns.starts_with('/'))
    return fail(Error::invalid("member launch: the network namespace must be a path"));

  const uint32_t inside = m.run_as - m.ids_first;
  std::vector<std::string> a = {"podman", "--runtime", "runc"};
  if (m.create_only)
    a.emplace_back("create");
  else
    a.insert(a.end(), {"run", "--detach"});
  a.emplace_back("--no-hosts");
  auto opt = [&a](std::string_view flag, std::string value) {
    a.emplace_back(flag);
    a.push_back(std::move(value));
  };
  opt("--name", m.container);
  opt("--hostname", m.hostname.empty() ? m.container : m.hostname);
  opt("--label", label(kLabelJob, m.job_id));
  opt("--label", label(kLabelTenant, m.tenant_id));
  opt("--label", label(kLabelAllocation, m.allocation_id));
  opt("--label", label(kLabelRank, std::to_string(m.rank)));
  opt("--label", label(kLabelAttempt, std::to_string(m.attempt)));
  if (!m.node.empty()) opt("--label", label(kLabelNode, m.node));
  // Privileges: none. Podman's default seccomp profile applies (no --security-opt
  // seccomp=unconfined is ever given).
  opt("--cap-drop", "all");
  opt("--security-opt", "no-new-privileges");
  // Root inside is the tenant's first id outside; the process runs as the project's id.
  opt("--uidmap", fmt::format("0:{}:{}", m.ids_first, m.ids_count));
  opt("--gidmap", fmt::format("0:{}:{}", m.ids_first, m.ids_count));
  opt("--user", fmt::format("{}:{}", inside, inside));
  // What it creates in the project's volumes gives "other" nothing (the trees' own rule;
  // `storage audit` finds any file that does).
  opt("--umask", "0007");
  // Namespaces of its own: no host network, PID, IPC or UTS namespace.
  opt("--network", m.netns.empty() ? std::string("none") : "ns:" + m.netns);
  opt("--pid", "private");
  opt("--ipc", "private");
  opt("--uts", "private");
  // Limits. The ulimits are explicit: podman's defaults (nproc from the host) are refused by
  // runc inside a user namespace.
  opt("--pids-limit", std::to_string(m.limits.pids));
  opt("--ulimit", fmt::format("nproc={0}:{0}", m.limits.pids));
  opt("--ulimit", fmt::format("nofile={0}:{0}", m.limits.open_files));
  if (m.limits.memory_bytes > 0) {
    opt("--memory", std::to_string(m.limits.memory_bytes));
    opt("--memory-swap", std::to_string(m.limits.memory_bytes));  // no swap on top
  }
  if (m.limits.cpu_millis > 0)
    opt("--cpus", fmt::format("{}.{:03}", m.limits.cpu_millis / 1000, m.limits.cpu_millis % 1000));
  if (!m.cgroup_parent.empty()) opt("--cgroup-parent", m.cgroup_parent);
  opt("--stop-timeout", std::to_string(m.stop_grace_seconds));
  // The node's copy when it has one: a tenant that must pull has it pulled first and names it
  // by the digest pulled (Podman::pull).
  opt("--pull", "missing");
  opt("--log-driver", "k8s-file");
  if (!m.log_path.empty()) opt("--log-opt", "path=" + m.log_path);
  for (const auto& d : m.devices) opt("--device", d.cdi_name);
  for (const auto& b : m.mounts)
    opt("--mount", fmt::format("type=bind,source={},destination={}{}", b.host_path,
                               b.container_path, b.read_only ? ",ro=true" : ""));
  for (const auto& e : m.env) opt("--env", e.name + "=" + e.value);
  for (const auto& e : platform_env(m)) opt("--env", e.name + "=" + e.value);
  if (!m.command.empty()) opt("--entrypoint", Json(m.command).dump());
  a.push_back(m.image);
  a.insert(a.end(), m.args.begin(), m.args.end());
  return a;
}

Result<std::vector<ContainerStatus>> parse_podman_ps(const Json& j) {
  if (!j.is_array()) return fail(Error::invalid("podman ps: not a JSON array"));
  std::vector<ContainerStatus> out;
  for (const auto& c : j) {
    const Json* names = member(c, "Names");
    if (!names || !names->is_array() || names->empty() || !(*names)[0].is_string())
      return fail(Error::invalid("podman ps: a container without a name"));
    ContainerStatus s;
    s.name = (*names)[0].get<std::string>();
    s.state = text(c, "State");
    s.running = s.state == "running";
    const Json* code = member(c, "ExitCode");
    s.exit_code = code && code->is_number_integer() ? code->get<int>() : 0;
    read_labels(member(c, "Labels"), s);
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<ContainerStatus>> parse_podman_inspect(const Json& j) {
  if (!j.is_array()) return fail(Error::invalid("podman inspect: not a JSON array"));
  std::vector<ContainerStatus> out;
  for (const auto& c : j) {
    const Json* state = member(c, "State");
    const Json* config = member(c, "Config");
    if (!state || !state->is_object() || !config || !config->is_object())
      return fail(Error::invalid("podman inspect: a container without State or Config"));
    ContainerStatus s;
    s.name = text(c, "Name");
    s.state = text(*state, "Status");
    const Json* running = member(*state, "Running");
    s.running = running && running->is_boolean() && running->get<bool>();
    const Json* code = member(*state, "ExitCode");
    s.exit_code = code && code->is_number_integer() ? code->get<int>() : 0;
    const Json* oom = member(*state, "OOMKilled");
    s.oom_killed = oom && oom->is_boolean() && oom->get<bool>();
    s.error = text(*state, "Error");
    // Made from repository@digest (a pulled image pinned), the digest is that one: podman's
    // ImageDigest may name the manifest the image had when it first came to this host.
    const std::string image = text(c, "ImageName");
    const auto at = image.find("@sha256:");
    s.image_digest = at != std::string::npos ? image.substr(at + 1) : text(c, "ImageDigest");
    read_labels(member(*config, "Labels"), s);
    out.push_back(std::move(s));
  }
  return out;
}

std::string k8s_file_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  while (!raw.empty()) {
    const size_t nl = raw.find('\n');
    std::string_view line = raw.substr(0, nl);
    raw = nl == std::string_view::npos ? std::string_view() : raw.substr(nl + 1);
    // "<time> <stream> <tag> <text>": three fields before the text.
    size_t a = line.find(' ');
    size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
    size_t c = b == std::string_view::npos ? b : line.find(' ', b + 1);
    const std::string_view stream =
        b == std::string_view::npos ? "" : line.substr(a + 1, b - a - 1);
    const std::string_view tag = c == std::string_view::npos ? "" : line.substr(b + 1, c - b - 1);
    if ((stream != "stdout" && stream != "stderr") || (tag != "F" && tag != "P")) {
      out += line;
      out += '\n';
      continue;
    }
    out += line.substr(c + 1);
    if (tag == "F") out += '\n';
  }
  return out;
}

bool ended_by_oom(const ContainerStatus& s, bool memory_reached_limit) {
  if (s.running) return false;
  return s.oom_killed || (s.exit_code == 128 + 9 && memory_reached_limit);
}

Result<Json> sim_cdi_spec(std::span<const std::string> uuids,
                          std::span<const std::string> device_paths) {
  if (uuids.size() != device_paths.size())
    return fail(Error::invalid("sim CDI spec: one device path per UUID"));
  Json devices = Json::array();
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (!device_paths[i].starts_with("/dev/"))
      return fail(Error::invalid("sim CDI spec: device nodes live under /dev/"));
    devices.push_back({{"name", uuids[i]},
                       {"containerEdits",
                        {{"deviceNodes", Json::array({{{"path", device_paths[i]},
                                                       {"type", "c"},
                                                       {"major", 1},
                                                       {"minor", 3},
                                                       {"permissions", "rw"}}})}}}});
  }
  return Json{{"cdiVersion", "0.5.0"}, {"kind", kSimCdiKind}, {"devices", devices}};
}

}  // namespace gp::jobs
