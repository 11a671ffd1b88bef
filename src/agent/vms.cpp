#include "agent/vms.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "common/subprocess.h"

namespace gp::agent {
namespace {

namespace fs = std::filesystem;

// The heartbeat report's limits on the control plane's side (alloc::parse_vm_reports).
constexpr size_t kMaxReportError = 2000;
constexpr size_t kMaxReportAddresses = 16;

// An error as the control plane takes it (the end is cut off past its limit).
std::string capped(std::string error) {
  if (error.size() > kMaxReportError) error.resize(kMaxReportError);
  return error;
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !is_hex(s[i])) return false;
  }
  return true;
}

bool is_mac(std::string_view s) {
  if (s.size() != 17) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (i % 3 == 2 ? s[i] != ':' : !is_hex(s[i])) return false;
  return true;
}

// A required array field, read with ObjectReader's checks.
std::vector<std::string> required_strings(ObjectReader& r, std::string_view key, size_t max_items,
                                          size_t max_len) {
  if (!r.has(key)) r.reject(key, "is required");
  return r.optional_string_array(key, max_items, max_len).value_or(std::vector<std::string>{});
}

Result<std::vector<vm::VmRequest::Vgpu>> parse_vgpus(const Json* list) {
  std::vector<vm::VmRequest::Vgpu> out;
  if (!list) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    ObjectReader r((*list)[i], fmt::format("vgpus[{}]", i));
    vm::VmRequest::Vgpu v{.gpu = r.string("gpu", 32), .type = r.string("type", 64)};
    if (auto done = r.finish(); !done)
      return fail(Error::invalid(fmt::format("vgpus[{}]: {}", i, done.error().message)));
    v.gpu = GP_TRY(vm::normalize_pci_address(v.gpu));
    if (v.type.empty()) return fail(Error::invalid(fmt::format("vgpus[{}]: no type", i)));
    out.push_back(std::move(v));
  }
  return out;
}

// A volume path as the control plane sends it: relative, components of a-z 0-9 - only (tenant,
// project and kind names), so it can never leave the storage root.
bool is_volume_path(std::string_view path) {
  if (path.empty() || path.size() > 200 || path.front() == '/' || path.back() == '/') return false;
  bool component_empty = true;
  for (char c : path) {
    if (c == '/') {
      if (component_empty) return false;
      component_empty = true;
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
      component_empty = false;
    } else {
      return false;
    }
  }
  return !component_empty;
}

Result<std::vector<VmAssignment::Volume>> parse_volumes(const Json* list) {
  std::vector<VmAssignment::Volume> out;
  if (!list) return out;
  if (list->size() > 16) return fail(Error::invalid("volumes: at most 16"));
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string what = fmt::format("volumes[{}]", i);
    ObjectReader r((*list)[i], what);
    VmAssignment::Volume v{.tag = r.string("tag", 36), .path = r.string("path", 200)};
    if (auto done = r.finish(); !done) return fail(Error::invalid(done.error().message));
    if (v.tag.empty() || !std::ranges::all_of(v.tag, [](char c) { return c >= 'a' && c <= 'z'; }))
      return fail(Error::invalid(fmt::format("{}: tag \"{}\" is not a-z", what, v.tag)));
    if (!is_volume_path(v.path))
      return fail(Error::invalid(
          fmt::format("{}: path \"{}\" is not relative names of a-z 0-9 -", what, v.path)));
    out.push_back(std::move(v));
  }
  return out;
}

Result<VmAssignment> parse_vm(const Json& j, const std::string& allocation_id) {
  ObjectReader r(j, "vm");
  VmAssignment a;
  a.allocation_id = allocation_id;
  a.id = r.string("id", 128);
  a.domain = r.string("domain", 64);
  a.uuid = r.string("uuid", 36);
  a.mac = r.string("mac", 17);
  a.tenant = r.string("tenant", 63);
  a.project = r.string("project", 63);
  a.vcpus = static_cast<int>(r.integer("vcpus", 1, 4096));
  a.memory_mib = r.integer("memory_mib", 1, int64_t{1} << 32);
  const std::string desired = r.string("desired", 16);
  a.reboot_seq = r.integer("reboot_seq", 0, INT64_MAX);
  a.console_seq = r.optional_integer("console_seq", 0, INT64_MAX).value_or(0);
  a.console_captured_seq = r.optional_integer("console_captured_seq", 0, INT64_MAX).value_or(0);
  a.passthrough = required_strings(r, "passthrough", 16, 32);
  if (!r.has("vgpus")) r.reject("vgpus", "is required");
  const Json* vgpus = r.optional_array("vgpus");
  if (!j.is_object() || !j.contains("segment")) r.reject("segment", "is required (null: none)");
  const Json* segment = r.optional_object("segment");
  a.ssh_keys = required_strings(r, "ssh_keys", vm::kMaxSshKeys, vm::kMaxSshKeyBytes);
  const Json* volumes = r.optional_array("volumes");
  GP_TRY_VOID(r.finish());

  if (a.id.empty()) return fail(Error::invalid("field 'id' is empty"));
  if (!vm::is_gpuplane_domain(a.domain))
    return fail(Error::invalid(
        fmt::format("field 'domain': \"{}\" is not \"gp-\" followed by a-z 0-9 -", a.domain)));
  if (!is_uuid(a.uuid))
    return fail(Error::invalid(fmt::format("field 'uuid': \"{}\" is not a UUID", a.uuid)));
  if (!is_mac(a.mac))
    return fail(Error::invalid(fmt::format("field 'mac': \"{}\" is not a MAC address", a.mac)));
  if (a.tenant.empty() || a.project.empty())
    return fail(Error::invalid("fields 'tenant' and 'project' must not be empty"));
  if (desired != "running" && desired != "stopped")
    return fail(Error::invalid(
        fmt::format("field 'desired': \"{}\" is neither running nor stopped", desired)));
  a.running = desired == "running";
  for (auto& gpu : a.passthrough) gpu = GP_TRY(vm::normalize_pci_address(gpu));
  a.vgpus = GP_TRY(parse_vgpus(vgpus));
  a.volumes = GP_TRY(parse_volumes(volumes));
  if (a.passthrough.empty() == a.vgpus.empty())
    return fail(Error::invalid("exactly one of 'passthrough' and 'vgpus' must list GPUs"));
  if (segment) {
    ObjectReader s(*segment, "segment");
    a.vni = static_cast<uint32_t>(s.integer("vni", 1, (1 << 24) - 1));
    a.cidr = s.string("cidr", 64);
    if (auto done = s.finish(); !done)
      return fail(Error::invalid("segment: " + done.error().message));
  }
  return a;
}

// Runs a program (argv[0] looked up in PATH; no shell) for at most `timeout`. Its output (stderr,
// else stdout) becomes the error message when it fails.
Result<void> run_tool(const std::vector<std::string>& argv,
                      std::chrono::seconds timeout = std::chrono::seconds(300)) {
  auto r = run_process(argv, "", timeout);
  if (!r) return fail(Error::unavailable(fmt::format("{}: {}", argv[0], r.error().message)));
  if (r->exit_code == 0) return ok();
  std::string output = r->err.empty() ? r->out : r->err;
  if (output.size() > 600) output = "..." + output.substr(output.size() - 600);
  return fail(
      Error::unavailable(fmt::format("{} failed (exit {}): {}", argv[0], r->exit_code, output)));
}

Result<void> write_text(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  if (!out) return fail(Error::unavailable("cannot write " + path.string()));
  return ok();
}

// The reboot_seq file: the last reboot applied, or nullopt when unknown.
std::optional<int64_t> read_seq(const fs::path& path) {
  std::ifstream in(path);
  int64_t seq = -1;
  if (!(in >> seq) || seq < 0) return std::nullopt;
  return seq;
}

bool is_active(vm::DomainState s) {
  return s == vm::DomainState::kRunning || s == vm::DomainState::kPaused ||
         s == vm::DomainState::kShuttingDown;
}

// Writes the seed, builds the seed ISO and the boot disk under `dir` and defines the domain.
Result<void> define_vm(vm::Hypervisor& hv, const vm::Mdevs& mdevs, const VmDeliveryOptions& o,
                       const std::function<std::string()>& uuid_source, const VmAssignment& a,
                       const fs::path& dir) {
  const vm::CloudInit seed = GP_TRY(vm::render_cloud_init(a.id, a.domain, a.ssh_keys));
  const vm::HostTopology host = GP_TRY(vm::read_host(o.sysfs_root));
  vm::VmRequest request = vm_request(a, host);
  vm::DomainSpec& spec = request.spec;
  spec.firmware = o.firmware;
  // The project's volumes, which the agent's enforcement creates under the storage root.
  if (o.storage_root.empty() && !a.volumes.empty())
    spdlog::info("vm: {} gets no volumes: the agent has no --storage-root", a.domain);
  for (const VmAssignment::Volume& v : a.volumes) {
    if (o.storage_root.empty()) break;
    const fs::path source = fs::absolute(o.storage_root) / v.path;
    std::error_code missing;
    if (!fs::is_directory(source, missing))
      return fail(Error::unavailable(fmt::format(
          "volume {} is not on this node yet ({} is missing)", v.tag, source.string())));
    spec.shares.push_back({.source = source.string(), .tag = v.tag});
  }

  std::error_code ec;
  fs::remove_all(dir, ec);  // leftovers of an earlier attempt
  fs::create_directories(dir / "seed", ec);
  if (ec)
    return fail(
        Error::unavailable(fmt::format("cannot create {}: {}", dir.string(), ec.message())));
  GP_TRY_VOID(write_text(dir / "seed/meta-data", seed.meta_data));
  GP_TRY_VOID(write_text(dir / "seed/user-data", seed.user_data));
  spec.seed_iso = (dir / "seed.iso").string();
  spec.console_log = (dir / "console.log").string();
  GP_TRY_VOID(run_tool({"xorriso", "-as", "mkisofs", "-output", spec.seed_iso, "-volid", "cidata",
                        "-joliet", "-rock", (dir / "seed").string()}));
  if (!o.base_image.empty()) {
    const std::string boot = (dir / "boot.qcow2").string();
    GP_TRY_VOID(run_tool({"qemu-img", "create", "-f", "qcow2", "-b",
                          fs::absolute(o.base_image).string(), "-F", "qcow2", boot}));
    spec.disks.push_back({.path = boot, .target = "vda"});
  }
  GP_TRY(vm::provision(hv, mdevs, host, std::move(request), uuid_source));
  return write_text(dir / "reboot_seq", std::to_string(a.reboot_seq));
}

}  // namespace

Result<std::vector<VmAssignment>> parse_vm_assignments(const Json& assignments) {
  if (!assignments.is_object() || !assignments.contains("allocations") ||
      !assignments["allocations"].is_array())
    return fail(Error::invalid("assignments: 'allocations' missing or not an array"));
  std::vector<VmAssignment> out;
  std::set<std::string> domains;
  const Json& allocations = assignments["allocations"];
  for (size_t i = 0; i < allocations.size(); ++i) {
    const Json& alloc = allocations[i];
    if (!alloc.is_object() || !alloc.contains("id") || !alloc["id"].is_string() ||
        alloc["id"].get_ref<const std::string&>().empty())
      return fail(Error::invalid(fmt::format("allocations[{}]: no 'id'", i)));
    const std::string id = alloc["id"].get<std::string>();
    const std::string what = fmt::format("allocation {}", id);
    VmAssignment a;
    if (alloc.contains("vm") && !alloc["vm"].is_null()) {
      auto parsed = parse_vm(alloc["vm"], id);
      if (!parsed)
        return fail(Error::invalid(fmt::format("{} vm: {}", what, parsed.error().message)));
      a = std::move(*parsed);
      if (const Json* stop = alloc.contains("stop") ? &alloc["stop"] : nullptr) {
        if (!stop->is_object() || !stop->contains("grace_seconds") ||
            !(*stop)["grace_seconds"].is_number_integer() ||
            (*stop)["grace_seconds"].get<int64_t>() < 0)
          return fail(Error::invalid(what + ": 'stop' has no grace_seconds"));
        a.running = false;
        a.stop_grace = std::chrono::seconds((*stop)["grace_seconds"].get<int64_t>());
      }
      // What it waits for before it may be made: an ended allocation's work on its GPUs, or
      // their planned MIG layout.
      for (const auto& [key, why] :
           {std::pair{"waiting_for", "waiting for the work of {} to stop on this node"},
            std::pair{"configuring", "waiting for GPUs {} to take their planned MIG layout"}}) {
        if (!alloc.contains(key)) continue;
        if (!alloc[key].is_array())
          return fail(Error::invalid(fmt::format("{}: '{}' is not an array", what, key)));
        if (!alloc[key].empty()) a.unavailable = fmt::format(fmt::runtime(why), alloc[key].dump());
      }
    } else if (alloc.contains("vm_error")) {
      if (!alloc["vm_error"].is_string())
        return fail(Error::invalid(what + ": 'vm_error' is not a string"));
      a.allocation_id = id;
      a.domain = vm::domain_name(id);
      a.unavailable = alloc["vm_error"].get<std::string>();
      if (a.unavailable.empty()) a.unavailable = "the control plane cannot describe this VM";
      if (!vm::is_gpuplane_domain(a.domain)) continue;  // no VM of ours can have that name
    } else {
      continue;  // delivered as containers
    }
    if (!domains.insert(a.domain).second)
      return fail(Error::invalid(fmt::format("{}: domain {} is assigned twice", what, a.domain)));
    out.push_back(std::move(a));
  }
  return out;
}

std::set<std::string> vm_holding(const std::vector<VmAssignment>& assigned,
                                 const std::vector<VmReport>& reports) {
  std::set<std::string> out;
  for (const VmAssignment& a : assigned)
    for (const VmReport& r : reports)
      if (r.domain == a.domain && r.state != "shut-off" && r.state != "absent" &&
          r.state != "failed" && r.state != "crashed")
        out.insert(a.allocation_id);
  return out;
}

std::string segment_bridge_name(uint32_t vni) { return fmt::format("gpbr{}", vni); }

vm::VmRequest vm_request(const VmAssignment& a, const vm::HostTopology& host) {
  vm::VmRequest request;
  request.gpus = a.passthrough;
  request.vgpus = a.vgpus;
  vm::DomainSpec& spec = request.spec;
  spec.name = a.domain;
  spec.uuid = a.uuid;
  spec.tenant = a.tenant;
  spec.project = a.project;
  spec.allocation = a.allocation_id;
  spec.vcpus = a.vcpus;
  spec.memory_mib = a.memory_mib;
  if (a.vni) {
    spec.bridge = segment_bridge_name(*a.vni);
    spec.mac = a.mac;
  }
  const std::string& first_gpu = a.passthrough.empty() ? a.vgpus.front().gpu : a.passthrough[0];
  if (const vm::PciDevice* gpu = host.find(first_gpu); gpu && gpu->numa_node >= 0) {
    for (const vm::NumaNode& node : host.numa_nodes) {
      if (node.id != gpu->numa_node) continue;
      spec.numa_node = node.id;
      spec.cpuset = node.cpulist;
    }
  }
  return request;
}

Json to_json(const std::vector<VmReport>& reports) {
  Json out = Json::array();
  for (const VmReport& r : reports) {
    Json j = {{"domain", r.domain}, {"state", r.state}, {"addresses", r.addresses}};
    if (!r.error.empty()) j["error"] = r.error;
    if (r.console_seq > 0) j["console"] = {{"seq", r.console_seq}, {"text", r.console}};
    out.push_back(std::move(j));
  }
  return out;
}

std::string console_tail(std::string_view raw) {
  // Cleaning only removes bytes, so a tail of the raw bytes twice the limit is always enough
  // when the cleaned text is cut to the limit again below.
  if (raw.size() > 2 * kMaxConsoleBytes) raw.remove_prefix(raw.size() - 2 * kMaxConsoleBytes);
  auto byte = [&](size_t i) { return static_cast<unsigned char>(raw[i]); };
  auto continuation = [&](size_t i) { return i < raw.size() && (byte(i) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < raw.size() && i < 3 && continuation(i)) ++i;  // the rest of a cut character
  std::string out;
  out.reserve(raw.size() - i);
  while (i < raw.size()) {
    const unsigned char c = byte(i);
    if (c == 0x1b) {  // ESC: a CSI sequence up to its final byte, or the one byte after ESC
      size_t j = i + 1;
      if (j < raw.size() && raw[j] == '[') {
        ++j;
        while (j < raw.size() && (byte(j) < 0x40 || byte(j) > 0x7e)) ++j;
      }
      i = std::min(j + 1, raw.size());
      continue;
    }
    if (c < 0x80) {
      if (c >= 0x20 ? c != 0x7f : (c == '\n' || c == '\t')) out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, kept only when whole and valid.
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    bool whole = len > 0 && c <= 0xF4 && i + len <= raw.size();
    for (size_t k = 1; whole && k < len; ++k) whole = continuation(i + k);
    if (whole && is_valid_utf8(raw.substr(i, len))) {
      out.append(raw.substr(i, len));
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  if (out.size() > kMaxConsoleBytes) {
    size_t cut = out.size() - kMaxConsoleBytes;
    while (cut < out.size() && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) ++cut;
    out.erase(0, cut);
  }
  return out;
}

Result<std::string> SegmentBridges::ip(std::vector<std::string> args) const {
  std::vector<std::string> argv = ip_;
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_process(argv, "", std::chrono::seconds(30));
  if (!r) return fail(r.error());
  if (r->exit_code != 0) {
    std::string command;
    for (const auto& a : args) command += " " + a;
    return fail(Error::unavailable(
        fmt::format("ip{} failed (exit {}): {}", command, r->exit_code, r->err)));
  }
  return r->out;
}

Result<std::set<std::string>> SegmentBridges::list() const {
  // "7: gpbr4096: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 ..."
  const std::string out = GP_TRY(ip({"-o", "link", "show", "type", "bridge"}));
  std::set<std::string> names;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t start = line.find(": ");
    if (start == std::string::npos) continue;
    const size_t end = line.find(':', start + 2);
    const std::string name = line.substr(start + 2, end - start - 2);
    if (name.starts_with("gpbr")) names.insert(name);
  }
  return names;
}

Result<void> SegmentBridges::ensure(const std::string& name) const {
  if (GP_TRY(list()).contains(name)) return ok();
  GP_TRY(ip({"link", "add", name, "type", "bridge"}));
  // No IPv6 link-local address: a guest must not reach the node through its bridge.
  auto made = ip({"link", "set", name, "addrgenmode", "none"});
  if (made) made = ip({"link", "set", name, "up"});
  if (!made) {
    (void)ip({"link", "del", name});
    return fail(made.error());
  }
  spdlog::info("vm: created bridge {}", name);
  return ok();
}

Result<void> SegmentBridges::remove(const std::string& name) const {
  GP_TRY(ip({"link", "del", name}));
  spdlog::info("vm: removed bridge {}", name);
  return ok();
}

VmDelivery::VmDelivery(vm::Hypervisor& hv, VmDeliveryOptions options, const Clock& clock,
                       std::function<std::string()> uuid_source)
    : hv_(hv),
      mdevs_(options.sysfs_root),
      o_(std::move(options)),
      clock_(clock),
      uuid_source_(std::move(uuid_source)) {
  if (!o_.ip_command.empty()) bridges_.emplace(o_.ip_command);
}

std::map<std::string, std::string> VmDelivery::converge_bridges(
    const std::vector<VmAssignment>& assigned) {
  std::map<std::string, std::string> failed;
  if (!bridges_) return failed;
  std::set<std::string> wanted;
  bool all_known = true;  // a VM the control plane could not describe may use any bridge
  for (const VmAssignment& a : assigned) {
    if (!a.unavailable.empty()) all_known = false;
    if (a.vni) wanted.insert(segment_bridge_name(*a.vni));
  }
  for (const std::string& name : wanted)
    if (auto made = bridges_->ensure(name); !made) {
      spdlog::warn("vm: bridge {}: {}", name, made.error().message);
      failed[name] = made.error().message;
    }
  auto present = bridges_->list();
  if (!present || !all_known) return failed;
  for (const std::string& name : *present) {
    if (wanted.contains(name)) continue;
    if (auto gone = bridges_->remove(name); !gone)
      spdlog::warn("vm: removing bridge {}: {}", name, gone.error().message);
    else
      act("remove-bridge", name);
  }
  return failed;
}

fs::path VmDelivery::dir_of(const std::string& domain) const { return o_.vm_dir / domain; }

void VmDelivery::act(const std::string& verb, const std::string& domain) {
  spdlog::info("vm: {} {}", verb, domain);
  actions_.push_back(verb + " " + domain);
}

Result<void> VmDelivery::provision(const VmAssignment& a) {
  const fs::path dir = dir_of(a.domain);
  auto defined = define_vm(hv_, mdevs_, o_, uuid_source_, a, dir);
  if (!defined) {
    std::error_code ec;
    fs::remove_all(dir, ec);  // a refusal leaves nothing behind
    return defined;
  }
  act("define", a.domain);
  return ok();
}

Result<bool> VmDelivery::converge_power(const VmAssignment& a, vm::DomainState state) {
  if (a.running) {
    shutdown_asked_.erase(a.domain);
    if (state != vm::DomainState::kShutOff) return false;
    GP_TRY_VOID(hv_.start(a.domain));
    act("start", a.domain);
    return true;
  }
  if (!is_active(state)) {
    shutdown_asked_.erase(a.domain);
    return false;
  }
  // Ask the guest first (ACPI); power it off once it ignored that for the grace period. libvirt's
  // test driver powers off at once, so the grace only plays on a real host.
  const auto asked = shutdown_asked_.find(a.domain);
  if (asked == shutdown_asked_.end()) {
    GP_TRY_VOID(hv_.shutdown(a.domain));
    act("shutdown", a.domain);
    shutdown_asked_[a.domain] = clock_.now();
  } else if (clock_.now() - asked->second >= a.stop_grace.value_or(o_.shutdown_grace)) {
    GP_TRY_VOID(hv_.destroy(a.domain));
    act("destroy", a.domain);
    shutdown_asked_.erase(asked);
  }
  return false;
}

Result<void> VmDelivery::converge_reboot(const VmAssignment& a, bool booted_now) {
  const fs::path path = dir_of(a.domain) / "reboot_seq";
  const std::optional<int64_t> applied = read_seq(path);
  if (applied && a.reboot_seq <= *applied) return ok();
  // Unknown (the agent lost its directory) or a guest that boots anyway: nothing to reboot.
  if (applied && a.running && !booted_now) {
    auto info = GP_TRY(hv_.find(a.domain));
    if (info && info->state == vm::DomainState::kRunning) {
      GP_TRY_VOID(hv_.reboot(a.domain));
      act("reboot", a.domain);
    }
  }
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  return write_text(path, std::to_string(a.reboot_seq));
}

VmReport VmDelivery::report(const std::string& domain, std::string error) {
  VmReport r{
      .domain = domain, .state = "absent", .addresses = {}, .error = capped(std::move(error))};
  if (auto info = hv_.find(domain); !info) {
    r.state = "other";
    if (r.error.empty()) r.error = capped(info.error().message);
  } else if (*info) {
    r.state = std::string(vm::to_string((*info)->state));
    if ((*info)->state == vm::DomainState::kRunning) {
      if (auto addrs = hv_.addresses(domain))
        r.addresses = std::move(*addrs);
      else
        spdlog::debug("vm: addresses of {}: {}", domain, addrs.error().message);
    }
  }
  if (r.addresses.size() > kMaxReportAddresses) r.addresses.resize(kMaxReportAddresses);
  return r;
}

void VmDelivery::add_console(const VmAssignment& a, VmReport& r, size_t& budget) {
  if (a.console_seq <= a.console_captured_seq) return;
  std::ifstream in(dir_of(a.domain) / "console.log", std::ios::binary);
  std::string raw;
  if (in) {
    in.seekg(0, std::ios::end);
    const auto size = static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0));
    const size_t from = size > 2 * kMaxConsoleBytes ? size - 2 * kMaxConsoleBytes : 0;
    in.seekg(static_cast<std::streamoff>(from));
    raw.resize(size - from);
    in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
    raw.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  }
  std::string text = console_tail(raw);  // no log yet: an empty console, which is the truth
  if (text.size() > budget) return;      // the next heartbeat carries it
  budget -= text.size();
  r.console_seq = a.console_seq;
  r.console = std::move(text);
}

void VmDelivery::tear_down_unassigned(const std::vector<vm::DomainInfo>& defined,
                                      const std::set<std::string>& wanted,
                                      std::vector<VmReport>& reports) {
  std::set<std::string> kept;  // unassigned domains whose teardown failed keep their directory
  for (const vm::DomainInfo& d : defined) {
    if (!d.name.starts_with("gp-") || wanted.contains(d.name)) continue;
    if (auto gone = vm::teardown(hv_, mdevs_, d.name); !gone) {
      spdlog::warn("vm: tearing down {}: {}", d.name, gone.error().message);
      kept.insert(d.name);
      reports.push_back(report(d.name, "teardown: " + gone.error().message));
      continue;
    }
    act("teardown", d.name);
    shutdown_asked_.erase(d.name);
  }
  // Every directory of an unassigned domain goes, also those an interrupted round left.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(o_.vm_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!vm::is_gpuplane_domain(name) || wanted.contains(name) || kept.contains(name)) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (rm) spdlog::warn("vm: removing {}: {}", entry.path().string(), rm.message());
  }
}

std::vector<VmReport> VmDelivery::round(const std::vector<VmAssignment>& assigned) {
  actions_.clear();
  std::vector<VmReport> reports;
  auto defined = hv_.domains();
  if (!defined) {
    spdlog::error("vm: listing domains: {}", defined.error().message);
    for (const VmAssignment& a : assigned)
      reports.push_back(
          {.domain = a.domain, .state = "other", .error = capped(defined.error().message)});
    return reports;
  }
  std::set<std::string> wanted;
  for (const VmAssignment& a : assigned) wanted.insert(a.domain);
  // First, so that GPUs released in this heartbeat are free for the VMs assigned in it.
  tear_down_unassigned(*defined, wanted, reports);
  const std::map<std::string, std::string> no_bridge = converge_bridges(assigned);
  size_t console_budget = kMaxConsoleBytesPerHeartbeat;

  for (const VmAssignment& a : assigned) {
    if (!a.unavailable.empty()) {
      reports.push_back(report(a.domain, a.unavailable));
      continue;
    }
    auto info = hv_.find(a.domain);
    if (!info) {
      reports.push_back(report(a.domain, info.error().message));
      continue;
    }
    bool booted_now = false;
    std::string error;
    if (auto missing = a.vni ? no_bridge.find(segment_bridge_name(*a.vni)) : no_bridge.end();
        missing != no_bridge.end() && !*info) {
      reports.push_back(
          {.domain = a.domain,
           .state = "failed",
           .error = capped("segment bridge " + missing->first + ": " + missing->second)});
      continue;
    }
    if (!*info) {
      if (auto made = provision(a); !made) {
        spdlog::warn("vm: {} refused: {}", a.domain, made.error().message);
        reports.push_back(
            {.domain = a.domain, .state = "failed", .error = capped(made.error().message)});
        continue;
      }
      info = hv_.find(a.domain);
      if (!info || !*info) {
        reports.push_back(report(a.domain, "defined, then not found"));
        continue;
      }
    }
    if (auto power = converge_power(a, (*info)->state); power)
      booted_now = *power;
    else
      error = power.error().message;
    if (auto reboot = converge_reboot(a, booted_now); !reboot)
      error += (error.empty() ? "" : "; ") + reboot.error().message;
    if (!error.empty()) spdlog::warn("vm: {}: {}", a.domain, error);
    reports.push_back(report(a.domain, std::move(error)));
    add_console(a, reports.back(), console_budget);
  }
  return reports;
}

}  // namespace gp::agent
