// Running the members of jobs assigned to this node (jobs.h).
#include "agent/jobs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/files.h"
#include "common/subprocess.h"
#include "policy/policy.h"

namespace gp::agent {
namespace {

namespace fs = std::filesystem;

// The most of a member's output one report carries (the control plane's bound per chunk).
constexpr int64_t kLogChunk = 192 * 1024;

// A relative path of safe segments ("acme/vision/datasets"): nothing can lead out of the root.
bool safe_relative_path(std::string_view p) {
  if (p.empty() || p.front() == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    if (!jobs::plain_segment(
            p.substr(start, slash == std::string_view::npos ? slash : slash - start)))
      return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

// The name a simulated node's CDI spec gives a device: the GPU's UUID, and its first slice for
// a MIG instance.
std::string sim_device_name(const MemberAssignment::Device& d) {
  return d.mig ? fmt::format("{}-mig{}", d.gpu, *d.mig) : d.gpu;
}

// Bytes [offset, offset + kLogChunk) of the file, cut after its last newline (a line half
// written waits for the next round). Empty when nothing new.
struct Chunk {
  std::string raw;
  int64_t end = 0;
  bool at_end = true;  // nothing after this chunk (as of now)
};
Chunk read_chunk(const std::string& path, int64_t offset) {
  Chunk c{.end = offset};
  std::ifstream in(path, std::ios::binary);
  if (!in) return c;
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (size <= offset) return c;
  const int64_t n = std::min(kLogChunk, size - offset);
  c.raw.resize(static_cast<size_t>(n));
  in.seekg(offset);
  in.read(c.raw.data(), n);
  c.raw.resize(static_cast<size_t>(in.gcount()));
  const size_t nl = c.raw.rfind('\n');
  c.raw.resize(nl == std::string::npos ? 0 : nl + 1);
  c.end = offset + static_cast<int64_t>(c.raw.size());
  c.at_end = c.end >= size;
  return c;
}

// Why podman could not start a member: the image could not be had, or anything else.
jobs::Failure start_failure(std::string_view message) {
  for (std::string_view s : {"pull", "manifest unknown", "name unknown", "initializing source",
                             "image not known", "unable to find image", "access to the resource"})
    if (message.find(s) != std::string_view::npos) return jobs::Failure::kImagePull;
  return jobs::Failure::kStartFailed;
}

// A container made and never started (a gang member waiting for the others).
bool not_started(const jobs::ContainerStatus& s) {
  return !s.running &&
         (s.state == "created" || s.state == "configured" || s.state == "initialized");
}

// The node's end of a member's veth pair: "gpm" and 8 hex digits of its container's name (an
// interface name has at most 15 characters).
std::string member_interface(std::string_view container) {
  uint32_t h = 2166136261u;
  for (unsigned char c : container) h = (h ^ c) * 16777619u;
  return fmt::format("gpm{:08x}", h);
}

template <typename T>
Result<T> get(const Json& j, std::string_view key, std::string_view where) {
  auto it = j.find(key);
  if (it == j.end()) return fail(Error::invalid(fmt::format("{}: no {}", where, key)));
  try {
    return it->get<T>();
  } catch (const Json::exception&) {
    return fail(Error::invalid(fmt::format("{}: {} has the wrong type", where, key)));
  }
}

}  // namespace

Result<std::vector<MemberAssignment>> parse_member_assignments(const Json& jobs_json) {
  std::vector<MemberAssignment> out;
  if (jobs_json.is_null()) return out;
  if (!jobs_json.is_array()) return fail(Error::invalid("assignments.jobs: not an array"));
  std::set<std::string> seen;
  for (size_t i = 0; i < jobs_json.size(); ++i) {
    const Json& j = jobs_json[i];
    const std::string where = fmt::format("assignments.jobs[{}]", i);
    if (!j.is_object()) return fail(Error::invalid(where + ": not an object"));
    MemberAssignment m;
    m.job = GP_TRY(get<std::string>(j, "job", where));
    m.name = GP_TRY(get<std::string>(j, "name", where));
    GP_TRY_VOID(validate_dns_label(where + ".name", m.name));  // the member's hostname
    m.tenant_id = GP_TRY(get<std::string>(j, "tenant_id", where));
    m.tenant = GP_TRY(get<std::string>(j, "tenant", where));
    m.project_id = GP_TRY(get<std::string>(j, "project_id", where));
    m.allocation_id = GP_TRY(get<std::string>(j, "allocation_id", where));
    m.rank = GP_TRY(get<int>(j, "rank", where));
    m.attempt = GP_TRY(get<int>(j, "attempt", where));
    m.world_size = GP_TRY(get<int>(j, "world_size", where));
    m.image = GP_TRY(get<std::string>(j, "image", where));
    m.pull_always = GP_TRY(get<bool>(j, "pull_always", where));
    m.allowed_registries = GP_TRY(get<std::vector<std::string>>(j, "allowed_registries", where));
    m.command = GP_TRY(get<std::vector<std::string>>(j, "command", where));
    m.args = GP_TRY(get<std::vector<std::string>>(j, "args", where));
    for (const auto& e : GP_TRY(get<Json>(j, "env", where))) {
      m.env.push_back({GP_TRY(get<std::string>(e, "name", where + ".env")),
                       GP_TRY(get<std::string>(e, "value", where + ".env"))});
      if (jobs::set_by_platform(m.env.back().name) ||
          policy::env_selects_gpu_devices(m.env.back().name))
        return fail(Error::invalid(where + ": env sets " + m.env.back().name));
    }
    for (const auto& d : GP_TRY(get<Json>(j, "devices", where))) {
      MemberAssignment::Device dev{GP_TRY(get<std::string>(d, "gpu", where + ".devices")), {}};
      if (d.contains("mig")) dev.mig = GP_TRY(get<int>(d["mig"], "start", where + ".devices"));
      if (!jobs::plain_segment(dev.gpu))
        return fail(Error::invalid(where + ": a malformed GPU UUID"));
      m.devices.push_back(std::move(dev));
    }
    const Json ids = GP_TRY(get<Json>(j, "ids", where));
    m.ids_first = GP_TRY(get<uint32_t>(ids, "first", where + ".ids"));
    m.ids_count = GP_TRY(get<uint32_t>(ids, "count", where + ".ids"));
    m.run_as = GP_TRY(get<uint32_t>(j, "run_as", where));
    for (const auto& v : GP_TRY(get<Json>(j, "volumes", where))) {
      MemberAssignment::Volume vol{GP_TRY(get<std::string>(v, "kind", where + ".volumes")),
                                   GP_TRY(get<std::string>(v, "path", where + ".volumes")),
                                   GP_TRY(get<bool>(v, "read_only", where + ".volumes"))};
      if (!jobs::plain_segment(vol.kind) || !safe_relative_path(vol.path))
        return fail(Error::invalid(where + ": a volume path that is not a plain relative path"));
      m.volumes.push_back(std::move(vol));
    }
    const Json limits = GP_TRY(get<Json>(j, "limits", where));
    m.cpu_millis = GP_TRY(get<int64_t>(limits, "cpu_millis", where + ".limits"));
    m.memory_bytes = GP_TRY(get<int64_t>(limits, "memory_bytes", where + ".limits"));
    const std::string desired = GP_TRY(get<std::string>(j, "desired", where));
    if (desired != "running" && desired != "created" && desired != "stopped")
      return fail(Error::invalid(where + ": desired is none of running, created, stopped"));
    m.running = desired != "stopped";
    m.hold = desired == "created";
    m.stop_grace_seconds = GP_TRY(get<int>(j, "stop_grace_seconds", where));
    m.log_offset = GP_TRY(get<int64_t>(j, "log_offset", where));
    for (const auto& sec : GP_TRY(get<Json>(j, "secrets", where))) {
      m.secrets.emplace_back(GP_TRY(get<std::string>(sec, "name", where + ".secrets")),
                             GP_TRY(get<std::string>(sec, "value", where + ".secrets")));
      if (!jobs::plain_segment(m.secrets.back().first))
        return fail(Error::invalid(where + ": a secret whose name cannot be a file name"));
    }
    if (auto net = j.find("network"); net != j.end() && !net->is_null()) {
      MemberAssignment::Network n;
      n.vni = GP_TRY(get<uint32_t>(*net, "vni", where + ".network"));
      n.address = GP_TRY(
          network::parse_ipv4(GP_TRY(get<std::string>(*net, "address", where + ".network"))));
      n.master_addr = GP_TRY(get<std::string>(*net, "master_addr", where + ".network"));
      if (!n.master_addr.empty()) GP_TRY(network::parse_ipv4(n.master_addr));
      // Absent from a control plane older than the agent: the member's /etc/hosts names it alone.
      if (net->contains("members"))
        for (const auto& p : GP_TRY(get<Json>(*net, "members", where + ".network")))
          n.members.emplace_back(GP_TRY(get<int>(p, "rank", where + ".members")),
                                 GP_TRY(network::parse_ipv4(
                                     GP_TRY(get<std::string>(p, "address", where + ".members")))));
      for (const auto& p : GP_TRY(get<Json>(*net, "peers", where + ".network")))
        n.peers.push_back(
            {GP_TRY(network::parse_ipv4(GP_TRY(get<std::string>(p, "address", where + ".peers")))),
             GP_TRY(network::parse_ipv4(GP_TRY(get<std::string>(p, "node", where + ".peers"))))});
      m.network = std::move(n);
    }
    if (!jobs::plain_segment(m.job) || m.rank < 0 || m.attempt < 1 || m.world_size < 1 ||
        m.stop_grace_seconds < 0 || m.log_offset < 0 || m.cpu_millis < 0 || m.memory_bytes < 0)
      return fail(Error::invalid(where + ": a value out of range"));
    if (!seen.insert(jobs::container_name(m.job, m.rank, m.attempt)).second)
      return fail(Error::invalid(where + ": a member listed twice"));
    out.push_back(std::move(m));
  }
  return out;
}

JobRunner::JobRunner(JobRunnerOptions options, const Clock& clock)
    : o_(std::move(options)), clock_(clock), podman_(o_.podman, std::chrono::minutes(5)) {
  std::error_code ec;
  // Podman and the mounts need absolute paths; an agent may be given relative ones (make run's
  // demo agents are).
  o_.state_dir = fs::absolute(o_.state_dir, ec).string();
  if (!o_.storage_root.empty()) o_.storage_root = fs::absolute(o_.storage_root, ec).string();
  fs::create_directories(fs::path(o_.state_dir) / "jobs", ec);
  if (o_.network) {
    // A member's network namespace is made by the agent, outside the member's user namespace,
    // so the member cannot write its sysctls: podman's default of setting ping_group_range
    // there would fail every start. The agent's podman reads this file instead of the system's
    // containers.conf.
    const std::string conf = (fs::path(o_.state_dir) / "jobs" / "containers.conf").string();
    std::ofstream(conf) << "# written by the gpuplane agent (docs/jobs.md, \"Network\")\n"
                           "[containers]\ndefault_sysctls = []\n";
    podman_.set_environment({"CONTAINERS_CONF=" + conf});
  }
}

std::string JobRunner::log_path(const std::string& container) const {
  return (fs::path(o_.state_dir) / "jobs" / (container + ".log")).string();
}

Result<void> JobRunner::write_cdi_spec(const std::vector<MemberAssignment>& assigned) {
  std::vector<std::string> names, paths;
  for (const auto& m : assigned)
    for (const auto& d : m.devices) {
      const std::string name = sim_device_name(d);
      if (std::ranges::find(names, name) != names.end()) continue;
      names.push_back(name);
      paths.push_back(o_.device_dir + "/" + name);
    }
  std::error_code ec;
  const fs::path file = fs::path(o_.cdi_dir) / fmt::format("gpuplane-sim-{}.json", o_.node_id);
  if (names.empty()) {
    // No member holds a device: no spec either (a stale one would clash with the next agent
    // that simulates GPUs of the same names).
    fs::remove(file, ec);
    cdi_written_.clear();
    return ok();
  }
  fs::create_directories(o_.device_dir, ec);
  for (const auto& p : paths) {
    // A stand-in of /dev/null (1:3): a job sees exactly the nodes of the devices it was given.
    if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 && errno != EEXIST)
      return fail(Error::unavailable(fmt::format("mknod {}: {}", p, std::strerror(errno))));
  }
  const std::string text = GP_TRY(jobs::sim_cdi_spec(names, paths)).dump(2);
  if (text == cdi_written_) return ok();
  fs::create_directories(o_.cdi_dir, ec);
  {
    std::ofstream out(file.string() + ".tmp", std::ios::trunc);
    out << text;
    if (!out.flush()) return fail(Error::unavailable("cannot write " + file.string()));
  }
  fs::rename(file.string() + ".tmp", file, ec);
  if (ec) return fail(Error::unavailable("cannot write " + file.string() + ": " + ec.message()));
  cdi_written_ = text;
  return ok();
}

Result<void> JobRunner::attach(const MemberAssignment& m, const std::string& container) {
  if (!forwarding_) {
    std::vector<std::string> argv = o_.ip_prefix;
    argv.insert(argv.end(), {"sysctl", "-qw", "net.ipv4.ip_forward=1"});
    auto r = GP_TRY(run_process(argv, "", std::chrono::seconds(30)));
    if (r.exit_code != 0) return fail(Error::unavailable("cannot enable forwarding: " + r.err));
    forwarding_ = true;
  }
  detach(container);  // what a crash between attach and start may have left
  auto made = GP_TRY(run_process({"ip", "netns", "add", container}, "", std::chrono::seconds(30)));
  if (made.exit_code != 0)
    return fail(Error::unavailable(fmt::format("ip netns add {}: {}", container, made.err)));
  // The ruleset names a workload as it names its interface (the container's name has '_').
  const network::Workload w{member_interface(container), m.tenant, member_interface(container),
                            m.network->address};
  auto linked =
      network::run_link_commands(GP_TRY(network::plan_attach(w, container)), o_.ip_prefix);
  if (!linked) {
    detach(container);
    return fail(linked.error());
  }
  attached_.insert(container);
  return ok();
}

void JobRunner::detach(const std::string& container) {
  (void)network::run_link_commands(
      network::plan_detach({container, "", member_interface(container), 0}), o_.ip_prefix);
  (void)run_process({"ip", "netns", "delete", container}, "", std::chrono::seconds(30));
  attached_.erase(container);
}

void JobRunner::sync_overlays(const std::vector<MemberAssignment>& assigned) {
  struct Want {
    std::string tenant;
    std::vector<network::OverlayPeer> peers;
  };
  std::map<uint32_t, Want> want;
  for (const auto& m : assigned) {
    if (!m.network) continue;
    Want& w = want[m.network->vni];
    w.tenant = m.tenant;
    for (const auto& p : m.network->peers)
      if (p.node != o_.underlay &&
          std::ranges::none_of(w.peers, [&](const auto& q) { return q.workload == p.workload; }))
        w.peers.push_back(p);
  }
  for (auto it = overlays_.begin(); it != overlays_.end();) {
    if (want.contains(it->first)) {
      ++it;
      continue;
    }
    (void)network::run_link_commands(network::plan_overlay_removal(it->first), o_.ip_prefix);
    it = overlays_.erase(it);
  }
  for (auto& [vni, w] : want) {
    std::ranges::sort(w.peers, {}, &network::OverlayPeer::workload);
    auto have = overlays_.find(vni);
    const bool same =
        have != overlays_.end() && std::ranges::equal(have->second, w.peers, [](auto& a, auto& b) {
          return a.workload == b.workload && a.node == b.node;
        });
    if (!same) {
      (void)network::run_link_commands(network::plan_overlay_removal(vni), o_.ip_prefix);
      overlays_.erase(vni);
      auto plan = network::plan_overlay({w.tenant, vni, o_.underlay, w.peers});
      auto made = plan ? network::run_link_commands(*plan, o_.ip_prefix) : fail(plan.error());
      if (!made) {
        spdlog::error("jobs: tenant {}'s overlay {}: {}", w.tenant, network::overlay_interface(vni),
                      made.error().message);
        continue;
      }
      overlays_[vni] = w.peers;
    }
  }
}

Result<void> JobRunner::apply_network(const std::vector<MemberAssignment>& assigned,
                                      const std::set<std::string>& running) {
  std::vector<network::Workload> workloads;
  for (const auto& m : assigned) {
    const std::string name = jobs::container_name(m.job, m.rank, m.attempt);
    if (m.network && running.contains(name))
      workloads.push_back(
          {member_interface(name), m.tenant, member_interface(name), m.network->address});
  }
  std::vector<network::OverlayLink> links;
  for (const auto& m : assigned)
    if (m.network && overlays_.contains(m.network->vni) &&
        std::ranges::none_of(links, [&](const auto& l) { return l.tenant == m.tenant; }))
      links.push_back({m.tenant, network::overlay_interface(m.network->vni)});
  if (!o_.apply_network) return fail(Error::unavailable("no network enforcement on this node"));
  return o_.apply_network(std::move(workloads), std::move(links));
}

std::string JobRunner::names_dir(const std::string& container) const {
  return (fs::path(o_.state_dir) / "jobs" / "etc" / container).string();
}

Result<std::vector<jobs::BindMount>> JobRunner::write_names(const MemberAssignment& m,
                                                            const std::string& container,
                                                            const std::string& hostname) {
  jobs::MemberNames names{.hostname = hostname};
  if (m.network) {
    for (const auto& [rank, address] : m.network->members)
      names.hosts.push_back({jobs::member_hostname(m.name, rank), network::format_ipv4(address)});
    const network::TenantPolicy policy =
        o_.tenant_policy ? o_.tenant_policy(m.tenant) : network::TenantPolicy{};
    for (const uint32_t r : o_.resolvers)
      if (network::egress_allows(policy, r, network::Protocol::kUdp, 53))
        names.nameservers.push_back(network::format_ipv4(r));
  }
  const fs::path dir = names_dir(container);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return fail(
        Error::unavailable(fmt::format("cannot create {}: {}", dir.string(), ec.message())));
  std::vector<jobs::BindMount> mounts;
  for (const auto& [file, text] : {std::pair{"hosts", jobs::render_hosts(names)},
                                   std::pair{"resolv.conf", jobs::render_resolv_conf(names)}}) {
    GP_TRY_VOID(replace_private_file((dir / file).string(), text, 0644));
    mounts.push_back({(dir / file).string(), std::string("/etc/") + file, true});
  }
  return mounts;
}

std::string JobRunner::secrets_dir(const std::string& container) const {
  return (fs::path(o_.state_dir) / "jobs" / "secrets" / container).string();
}

Result<std::string> JobRunner::mount_secrets(const MemberAssignment& m,
                                             const std::string& container) {
  const std::string dir = secrets_dir(container);
  unmount_secrets(container);  // what a crash between mount and start may have left
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(Error::unavailable(fmt::format("cannot create {}: {}", dir, ec.message())));
  auto mounted = GP_TRY(run_process(
      {"mount", "-t", "tmpfs", "-o", "size=1m,mode=0500,nosuid,nodev,noexec", "tmpfs", dir}, "",
      std::chrono::seconds(30)));
  if (mounted.exit_code != 0)
    return fail(
        Error::unavailable(fmt::format("cannot mount a tmpfs at {}: {}", dir, mounted.err)));
  auto written = [&]() -> Result<void> {
    for (const auto& [name, value] : m.secrets) {
      const std::string file = (fs::path(dir) / name).string();
      const int fd =
          ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
      if (fd < 0)
        return fail(Error::unavailable(fmt::format("{}: {}", file, std::strerror(errno))));
      const bool ok =
          ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size()) &&
          ::fchown(fd, m.run_as, m.run_as) == 0;
      ::close(fd);
      if (!ok) return fail(Error::unavailable(fmt::format("cannot write secret {}", name)));
    }
    if (::chown(dir.c_str(), m.run_as, m.run_as) != 0)
      return fail(Error::unavailable(fmt::format("chown {}: {}", dir, std::strerror(errno))));
    return ok();
  }();
  if (!written) {
    unmount_secrets(container);
    return fail(written.error());
  }
  return dir;
}

void JobRunner::unmount_secrets(const std::string& container) {
  const std::string dir = secrets_dir(container);
  if (!fs::exists(dir)) return;
  (void)run_process({"umount", dir}, "", std::chrono::seconds(30));
  std::error_code ec;
  fs::remove(dir, ec);  // empty once unmounted; a tmpfs still mounted is not removed
}

Result<void> JobRunner::start(const MemberAssignment& m,
                              const std::vector<MemberAssignment>& assigned) {
  if (!policy::registry_allowed(m.allowed_registries, m.image))
    return fail(Error::denied(fmt::format(
        "image {} is not from a registry the tenant's workload policy allows", m.image)));
  jobs::MemberLaunch l;
  l.container = jobs::container_name(m.job, m.rank, m.attempt);
  l.node = o_.node_id;
  l.log_path = log_path(l.container);
  l.job_id = m.job;
  l.tenant_id = m.tenant_id;
  l.project_id = m.project_id;
  l.allocation_id = m.allocation_id;
  l.rank = m.rank;
  l.world_size = m.world_size;
  l.attempt = m.attempt;
  l.image = m.image;
  if (m.pull_always) {
    // Pulled now, and run as the digest pulled: what the job records is what runs.
    const std::string digest = GP_TRY(podman_.pull(m.image));
    l.image = policy::image_repository(m.image) + "@" + digest;
  }
  l.command = m.command;
  l.args = m.args;
  l.env = m.env;
  for (const auto& d : m.devices) {
    const std::string name = o_.simulated ? sim_device_name(d) : d.gpu;
    l.devices.push_back(
        {fmt::format("{}={}", o_.simulated ? jobs::kSimCdiKind : "nvidia.com/gpu", name), name});
  }
  l.ids_first = m.ids_first;
  l.ids_count = m.ids_count;
  l.run_as = m.run_as;
  for (const auto& v : m.volumes) {
    if (o_.storage_root.empty())
      return fail(Error::unavailable("the job mounts volumes and this node has no storage root"));
    const std::string host = o_.storage_root + "/" + v.path;
    if (!fs::is_directory(host))
      return fail(Error::unavailable(fmt::format("volume {} is not on this node yet", v.path)));
    l.mounts.push_back({host, "/data/" + v.kind, v.read_only});
  }
  l.limits.cpu_millis = m.cpu_millis;
  l.limits.memory_bytes = m.memory_bytes;
  l.stop_grace_seconds = m.stop_grace_seconds;
  l.create_only = m.hold;
  if (m.memory_bytes > 0 && !o_.cgroup_root.empty()) {
    if (auto g = jobs::MemberCgroup::create(l.container, m.memory_bytes, o_.cgroup_root))
      l.cgroup_parent = g->parent();
    else
      spdlog::warn("job {}: no member cgroup ({}); podman's limit alone applies", m.job,
                   g.error().message);
  }
  l.hostname = jobs::member_hostname(m.name, m.rank);
  for (auto& mount : GP_TRY(write_names(m, l.container, l.hostname)))
    l.mounts.push_back(std::move(mount));
  if (!m.secrets.empty())
    l.mounts.push_back({GP_TRY(mount_secrets(m, l.container)), "/run/secrets", true});
  if (o_.network && m.network) {
    // On the tenant's network, with its rules in force, before anything runs in it.
    GP_TRY_VOID(attach(m, l.container));
    if (auto applied = apply_network(assigned, attached_); !applied) {
      detach(l.container);
      unmount_secrets(l.container);
      return fail(applied.error());
    }
    l.netns = "/run/netns/" + l.container;
    l.master_addr = m.network->master_addr;
  }
  std::error_code ec;
  fs::remove(l.log_path, ec);  // a new attempt's output starts at offset 0
  auto argv = GP_TRY(jobs::podman_run_argv(l));
  spdlog::info("job {} ({}): {} member {} attempt {} as {}", m.name, m.job,
               m.hold ? "creating (its gang starts together)" : "starting", m.rank, m.attempt,
               l.container);
  return podman_.run(argv);
}

Json JobRunner::report(const MemberAssignment& m, const jobs::ContainerStatus& s) {
  const std::string name = jobs::container_name(m.job, m.rank, m.attempt);
  Json r = {{"job", m.job}, {"rank", m.rank}, {"attempt", m.attempt}};
  const Chunk chunk = read_chunk(log_path(name), m.log_offset);
  if (!chunk.raw.empty()) {
    r["log_offset"] = m.log_offset;
    r["log_end"] = chunk.end;
    r["log"] = jobs::k8s_file_text(chunk.raw);
  }
  if (!s.image_digest.empty()) r["image_digest"] = s.image_digest;
  if (s.running || not_started(s)) {
    r["state"] = s.running ? "running" : "starting";
    return r;
  }
  if (!s.error.empty() && s.state != "exited") {
    r["state"] = "failed";
    r["failure"] = jobs::failure_name(start_failure(s.error));
    r["error"] = s.error;
    return r;
  }
  // Ended: reported so once every line it wrote has been sent.
  if (!chunk.at_end) {
    r["state"] = "running";
    return r;
  }
  bool full = false;
  if (!o_.cgroup_root.empty() && m.memory_bytes > 0)
    if (auto g = jobs::MemberCgroup::existing(name, o_.cgroup_root))
      full = g->reached_limit().value_or(false);
  r["state"] = "exited";
  r["exit_code"] = s.exit_code;
  r["oom"] = jobs::ended_by_oom(s, full);
  return r;
}

int JobRunner::fence() {
  auto listed = podman_.list_members(o_.node_id);
  if (!listed) {
    spdlog::error("jobs: fencing: {}", listed.error().message);
    return 0;
  }
  for (const auto& c : *listed) remove(c.name);
  holding_.clear();
  return static_cast<int>(listed->size());
}

void JobRunner::remove(const std::string& container) {
  unmount_secrets(container);
  if (attached_.contains(container) || fs::exists("/run/netns/" + container)) detach(container);
  if (auto r = podman_.remove(container); !r)
    spdlog::warn("job member {}: {}", container, r.error().message);
  if (!o_.cgroup_root.empty())
    if (auto g = jobs::MemberCgroup::existing(container, o_.cgroup_root)) (void)g->remove();
  std::error_code ec;
  fs::remove(log_path(container), ec);
  fs::remove_all(names_dir(container), ec);
  stopping_.erase(container);
  failed_.erase(container);
}

std::vector<Json> JobRunner::round(const std::vector<MemberAssignment>& assigned,
                                   const std::map<std::string, int64_t>& stop_graces) {
  std::vector<Json> reports;
  auto listed = podman_.list_members(o_.node_id);
  if (!listed) {
    spdlog::error("jobs: {}", listed.error().message);
    return reports;
  }
  std::map<std::string, jobs::ContainerStatus> have;
  for (auto& c : *listed) have[c.name] = std::move(c);
  if (o_.simulated)
    if (auto w = write_cdi_spec(assigned); !w)
      spdlog::error("jobs: CDI spec: {}", w.error().message);
  if (o_.network) {
    // Members found again after a restart keep the namespace they were started in.
    for (const auto& [name, c] : have)
      if (fs::exists("/run/netns/" + name)) attached_.insert(name);
    sync_overlays(assigned);
  }

  // Starts what should run and does not yet. A member that could not start is reported failed
  // until it is no longer assigned.
  std::set<std::string> wanted;
  std::vector<std::string> present;
  holding_.clear();
  for (const auto& m : assigned) {
    const std::string name = jobs::container_name(m.job, m.rank, m.attempt);
    wanted.insert(name);
    const auto stopped = [&] {
      reports.push_back(
          {{"job", m.job}, {"rank", m.rank}, {"attempt", m.attempt}, {"state", "stopped"}});
    };
    Result<void> started = ok();
    if (auto it = have.find(name); it != have.end()) {
      if (!m.running && not_started(it->second)) {  // stopped before it ran: nothing to wait for
        remove(name);
        stopped();
        continue;
      }
      // A gang member made while the others were not ready starts once every one is.
      if (m.running && !m.hold && not_started(it->second)) {
        spdlog::info("job {} ({}): its gang is ready, starting member {}", m.name, m.job, m.rank);
        started = podman_.start(name);
      }
    } else if (!failed_.contains(name)) {
      if (!m.running) {  // stopped before it ever started: nothing runs
        stopped();
        continue;
      }
      started = start(m, assigned);
    }
    if (!started) {
      spdlog::error("job {}: member {} could not start: {}", m.job, m.rank,
                    started.error().message);
      remove(name);  // what podman may have left ("created"), its network and secrets
      failed_[name] = {started.error().code == ErrorCode::kPermissionDenied
                           ? jobs::Failure::kStartFailed
                           : start_failure(started.error().message),
                       started.error().message};
    }
    if (!failed_.contains(name)) {
      present.push_back(name);
      continue;
    }
    const auto& [why, error] = failed_.at(name);
    reports.push_back({{"job", m.job},
                       {"rank", m.rank},
                       {"attempt", m.attempt},
                       {"state", "failed"},
                       {"failure", jobs::failure_name(why)},
                       {"error", error}});
  }
  // One podman inspect for every member present (one by one only if that fails: a container
  // removed meanwhile fails the whole call).
  std::map<std::string, jobs::ContainerStatus> status;
  auto keep = [&status](std::vector<jobs::ContainerStatus> found) {
    for (auto& c : found) status[c.name] = std::move(c);
  };
  if (auto inspected = podman_.inspect(present)) {
    keep(std::move(*inspected));
  } else {
    for (const auto& name : present) {
      if (auto one = podman_.inspect({name}))
        keep(std::move(*one));
      else
        spdlog::error("job member {}: {}", name, one.error().message);
    }
  }
  for (const auto& m : assigned) {
    const std::string name = jobs::container_name(m.job, m.rank, m.attempt);
    auto it = status.find(name);
    if (it == status.end()) continue;
    const jobs::ContainerStatus& s = it->second;
    if (!m.running && s.running) {
      // SIGTERM at once, SIGKILL once the grace period has passed.
      auto [at, first] = stopping_.try_emplace(name, clock_.now());
      const bool overdue = clock_.now() - at->second >= std::chrono::seconds(m.stop_grace_seconds);
      if (first || overdue) {
        spdlog::info("job {}: member {}: {}", m.job, m.rank,
                     overdue ? "grace period over, SIGKILL" : "stopping, SIGTERM");
        if (auto k = podman_.kill(name, overdue ? "KILL" : "TERM"); !k)
          spdlog::warn("job {}: {}", m.job, k.error().message);
      }
    }
    if (s.running) holding_.insert(m.allocation_id);
    reports.push_back(report(m, s));
  }
  // What is no longer assigned: its job ended or moved on to another attempt. One whose
  // allocation the node is stopping gets that stop's grace (SIGTERM, then SIGKILL); one still
  // running without a stop is a stale attempt (its node was declared failed and the job placed
  // again elsewhere, or it outlived its stop): fenced, killed at once.
  for (const auto& [name, s] : have) {
    if (wanted.contains(name)) continue;
    const auto grace = stop_graces.find(s.allocation_id);
    if (s.running && grace != stop_graces.end()) {
      auto [at, first] = stopping_.try_emplace(name, clock_.now());
      if (first) {
        spdlog::info("job member {} is no longer assigned: stopping it", name);
        if (attached_.contains(name)) detach(name);  // off the tenant's network at once
        (void)podman_.kill(name, "TERM");
        holding_.insert(s.allocation_id);
        continue;
      }
      if (clock_.now() - at->second < std::chrono::seconds(grace->second)) {
        holding_.insert(s.allocation_id);
        continue;
      }
    }
    if (s.running)
      spdlog::warn("job member {} runs an attempt no longer assigned: fenced, killed", name);
    else
      spdlog::info("job member {} is no longer assigned: removing it", name);
    remove(name);
  }
  for (auto it = failed_.begin(); it != failed_.end();)
    it = wanted.contains(it->first) ? std::next(it) : failed_.erase(it);
  if (o_.network)
    if (auto applied = apply_network(assigned, attached_); !applied)
      spdlog::error("jobs: network: {}", applied.error().message);
  return reports;
}

}  // namespace gp::agent
