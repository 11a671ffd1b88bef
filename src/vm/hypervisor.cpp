// libvirt through its C API, mediated devices through sysfs, and provisioning (hypervisor.h).
#include "vm/hypervisor.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <set>

namespace gp::vm {
namespace {

namespace fs = std::filesystem;

// libvirt prints every error to stderr unless told otherwise; gpuplane reports them itself.
void quiet(void*, virErrorPtr) {}
void init_libvirt() {
  static std::once_flag once;
  std::call_once(once, [] {
    virInitialize();
    virSetErrorFunc(nullptr, quiet);
  });
}

// The calling thread's last libvirt error as an Error, its code mapped to ours.
Error last_error(std::string_view what) {
  virErrorPtr e = virGetLastError();
  const std::string why = e && e->message ? e->message : "unknown libvirt error";
  const std::string msg = fmt::format("{}: {}", what, why);
  switch (e ? e->code : VIR_ERR_INTERNAL_ERROR) {
    case VIR_ERR_NO_DOMAIN:
      return Error::not_found(msg);
    case VIR_ERR_OPERATION_INVALID:
    case VIR_ERR_DOM_EXIST:
      return Error::conflict(msg);
    case VIR_ERR_XML_ERROR:
    case VIR_ERR_XML_DETAIL:
    case VIR_ERR_XML_INVALID_SCHEMA:
    case VIR_ERR_CONFIG_UNSUPPORTED:
    case VIR_ERR_INVALID_ARG:
      return Error::invalid(msg);
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_SYSTEM_ERROR:
    case VIR_ERR_RPC:
    case VIR_ERR_AUTH_FAILED:
      return Error::unavailable(msg);
    default:
      return Error::internal(msg);
  }
}

struct DomainDeleter {
  void operator()(virDomainPtr d) const { virDomainFree(d); }
};
using Domain = std::unique_ptr<virDomain, DomainDeleter>;
struct FreeDeleter {
  void operator()(char* p) const { free(p); }  // NOLINT(cppcoreguidelines-no-malloc): libvirt's
};
using CString = std::unique_ptr<char, FreeDeleter>;

DomainState state_of(int s) {
  switch (s) {
    case VIR_DOMAIN_SHUTOFF:
      return DomainState::kShutOff;
    case VIR_DOMAIN_RUNNING:
      return DomainState::kRunning;
    case VIR_DOMAIN_PAUSED:
      return DomainState::kPaused;
    case VIR_DOMAIN_SHUTDOWN:
      return DomainState::kShuttingDown;
    case VIR_DOMAIN_CRASHED:
      return DomainState::kCrashed;
    default:
      return DomainState::kOther;
  }
}

// The first <secmodel><model> of the host's capabilities; libvirt's test driver reports a
// stand-in ("testSecurity") that is no confinement, so it counts as none.
std::string security_model_of(std::string_view caps) {
  const auto open = caps.find("<secmodel>");
  if (open == std::string_view::npos) return "";
  const auto m = caps.find("<model>", open), end = caps.find("</model>", open);
  if (m == std::string_view::npos || end == std::string_view::npos || end < m) return "";
  std::string model(caps.substr(m + 7, end - m - 7));
  return model == "none" || model == "testSecurity" ? "" : model;
}

Result<void> write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) return fail(Error::unavailable(fmt::format("cannot write {}", path.string())));
  return ok();
}

}  // namespace

std::string_view to_string(DomainState state) {
  switch (state) {
    case DomainState::kShutOff:
      return "shut-off";
    case DomainState::kRunning:
      return "running";
    case DomainState::kPaused:
      return "paused";
    case DomainState::kShuttingDown:
      return "shutting-down";
    case DomainState::kCrashed:
      return "crashed";
    case DomainState::kOther:
      break;
  }
  return "other";
}

struct Hypervisor::Impl {
  virConnectPtr conn = nullptr;
  ~Impl() {
    if (conn) virConnectClose(conn);
  }
  Result<Domain> lookup(std::string_view name) {
    virDomainPtr d = virDomainLookupByName(conn, std::string(name).c_str());
    if (!d) return fail(last_error(fmt::format("domain '{}'", name)));
    return Domain(d);
  }
  Result<DomainInfo> info(virDomainPtr d) {
    DomainInfo out;
    out.name = virDomainGetName(d);
    char uuid[VIR_UUID_STRING_BUFLEN] = {};
    if (virDomainGetUUIDString(d, uuid) < 0) return fail(last_error("domain uuid"));
    out.uuid = uuid;
    int state = 0, reason = 0;
    if (virDomainGetState(d, &state, &reason, 0) < 0)
      return fail(last_error(fmt::format("state of domain '{}'", out.name)));
    out.state = state_of(state);
    CString xml(virDomainGetXMLDesc(d, 0));
    if (!xml) return fail(last_error(fmt::format("XML of domain '{}'", out.name)));
    out.devices = GP_TRY(domain_devices(xml.get()));
    out.xml = xml.get();
    return out;
  }
};

Hypervisor::Hypervisor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Hypervisor::~Hypervisor() = default;

Result<std::unique_ptr<Hypervisor>> Hypervisor::open(const std::string& uri) {
  init_libvirt();
  auto impl = std::make_unique<Impl>();
  impl->conn = virConnectOpen(uri.c_str());
  if (!impl->conn) {
    Error e = last_error(fmt::format("cannot connect to libvirt at {}", uri));
    e.code = ErrorCode::kUnavailable;
    return fail(std::move(e));
  }
  const char* type = virConnectGetType(impl->conn);
  CString caps(virConnectGetCapabilities(impl->conn));
  if (!type || !caps) return fail(last_error(fmt::format("libvirt at {}", uri)));
  std::unique_ptr<Hypervisor> hv(new Hypervisor(std::move(impl)));
  hv->uri_ = uri;
  hv->domain_type_ = std::string_view(type) == "TEST" ? "test" : "kvm";
  hv->security_model_ = security_model_of(caps.get());
  return hv;
}

Result<std::vector<DomainInfo>> Hypervisor::domains() {
  virDomainPtr* list = nullptr;
  const int n = virConnectListAllDomains(impl_->conn, &list, 0);
  if (n < 0) return fail(last_error("listing domains"));
  std::vector<Domain> owned;
  owned.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) owned.emplace_back(list[i]);
  free(list);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  std::vector<DomainInfo> out;
  out.reserve(owned.size());
  for (const auto& d : owned) out.push_back(GP_TRY(impl_->info(d.get())));
  std::ranges::sort(out, {}, &DomainInfo::name);
  return out;
}

Result<std::optional<DomainInfo>> Hypervisor::find(std::string_view name) {
  auto d = impl_->lookup(name);
  if (!d && d.error().code == ErrorCode::kNotFound) return std::nullopt;
  if (!d) return fail(d.error());
  return GP_TRY(impl_->info(d->get()));
}

Result<std::vector<Claim>> Hypervisor::claims(const Mdevs& mdevs) {
  std::vector<Claim> out;
  for (const auto& d : GP_TRY(domains())) {
    for (const auto& pci : d.devices.pci) out.push_back({d.name, pci, false});
    for (const auto& uuid : d.devices.mdevs)
      if (auto parent = mdevs.parent_of(uuid)) out.push_back({d.name, *parent, true});
  }
  return out;
}

Result<void> Hypervisor::define(std::string_view xml) {
  const std::string text(xml);
  // A define of an existing name would replace that domain's definition.
  const auto name_at = text.find("<name>"), name_end = text.find("</name>");
  if (name_at != std::string::npos && name_end != std::string::npos && name_end > name_at) {
    const std::string name = text.substr(name_at + 6, name_end - name_at - 6);
    if (GP_TRY(find(name))) return fail(Error::conflict(fmt::format("domain '{}' exists", name)));
  }
  virDomainPtr d = virDomainDefineXMLFlags(impl_->conn, text.c_str(), VIR_DOMAIN_DEFINE_VALIDATE);
  if (!d) return fail(last_error("defining the domain"));
  virDomainFree(d);
  return ok();
}

Result<void> Hypervisor::start(std::string_view name) {
  auto d = GP_TRY(impl_->lookup(name));
  if (virDomainIsActive(d.get()) == 1)
    return fail(Error::conflict(fmt::format("domain '{}' is already running", name)));
  if (virDomainCreate(d.get()) < 0) return fail(last_error(fmt::format("starting '{}'", name)));
  return ok();
}

Result<void> Hypervisor::shutdown(std::string_view name) {
  auto d = GP_TRY(impl_->lookup(name));
  if (virDomainShutdown(d.get()) < 0)
    return fail(last_error(fmt::format("shutting down '{}'", name)));
  return ok();
}

Result<void> Hypervisor::reboot(std::string_view name) {
  auto d = GP_TRY(impl_->lookup(name));
  if (virDomainReboot(d.get(), 0) < 0) return fail(last_error(fmt::format("rebooting '{}'", name)));
  return ok();
}

Result<void> Hypervisor::destroy(std::string_view name) {
  auto d = GP_TRY(impl_->lookup(name));
  if (virDomainIsActive(d.get()) == 0) return ok();
  if (virDomainDestroy(d.get()) < 0)
    return fail(last_error(fmt::format("powering off '{}'", name)));
  return ok();
}

Result<void> Hypervisor::undefine(std::string_view name) {
  auto d = GP_TRY(impl_->lookup(name));
  if (virDomainUndefine(d.get()) < 0) return fail(last_error(fmt::format("undefining '{}'", name)));
  return ok();
}

Result<std::vector<std::string>> Hypervisor::addresses(std::string_view name) {
  auto d = GP_TRY(impl_->lookup(name));
  virDomainInterfacePtr* ifaces = nullptr;
  const int n =
      virDomainInterfaceAddresses(d.get(), &ifaces, VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, 0);
  if (n < 0) return fail(last_error(fmt::format("addresses of '{}'", name)));
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    for (unsigned j = 0; j < ifaces[i]->naddrs; ++j)
      out.push_back(fmt::format("{}/{}", ifaces[i]->addrs[j].addr, ifaces[i]->addrs[j].prefix));
    virDomainInterfaceFree(ifaces[i]);
  }
  free(ifaces);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  return out;
}

// ---- mediated devices ----

Result<void> Mdevs::create(const MdevPlacement& at, std::string_view uuid) const {
  const fs::path type_dir =
      root_ / "bus/pci/devices" / at.parent / "mdev_supported_types" / at.type_id;
  if (!fs::is_directory(type_dir))
    return fail(Error::not_found(
        fmt::format("GPU {} offers no mediated-device type {}", at.parent, at.type_id)));
  return write_file(type_dir / "create", uuid);
}

Result<void> Mdevs::remove(std::string_view uuid) const {
  const fs::path dev = root_ / "bus/mdev/devices" / std::string(uuid);
  if (!fs::exists(dev)) return ok();
  return write_file(dev / "remove", "1");
}

std::optional<std::string> Mdevs::parent_of(std::string_view uuid) const {
  std::error_code ec;
  const fs::path dev = fs::canonical(root_ / "bus/mdev/devices" / std::string(uuid), ec);
  if (ec) return std::nullopt;
  return dev.parent_path().filename().string();
}

// ---- provisioning ----

Result<std::string> provision(Hypervisor& hv, const Mdevs& mdevs, const HostTopology& host,
                              VmRequest request, const std::function<std::string()>& uuid_source) {
  DomainSpec& spec = request.spec;
  if (request.gpus.empty() == request.vgpus.empty())
    return fail(Error::invalid(
        "a VM gets either whole GPUs (passthrough) or vGPUs, and at least one of them"));
  if (GP_TRY(hv.find(spec.name)))
    return fail(Error::conflict(fmt::format("domain '{}' is already defined", spec.name)));
  const auto claims = GP_TRY(hv.claims(mdevs));
  spec.hypervisor = hv.domain_type();
  spec.security_model = hv.security_model();
  spec.hostdevs.clear();
  spec.mdevs.clear();
  if (!request.gpus.empty()) {
    GP_TRY_VOID(check_passthrough(host, request.gpus, claims, spec.name));
    for (const auto& gpu : request.gpus)
      spec.hostdevs.push_back(GP_TRY(normalize_pci_address(gpu)));
  }
  // Every vGPU is checked before any is created.
  std::vector<MdevPlacement> placements;
  std::set<std::string> vgpu_gpus;
  for (const auto& v : request.vgpus) {
    const VgpuType* type = GP_TRY(find_vgpu_type(v.type));
    if (!vgpu_gpus.insert(GP_TRY(normalize_pci_address(v.gpu))).second)
      return fail(Error::invalid(fmt::format("GPU {} is listed for two vGPUs of one VM", v.gpu)));
    placements.push_back(GP_TRY(check_vgpu(host, v.gpu, *type, claims)));
  }
  // Renders before anything exists on the host, so a bad spec leaves nothing behind.
  for (size_t i = 0; i < placements.size(); ++i) spec.mdevs.push_back({uuid_source()});
  const std::string xml = GP_TRY(render_domain_xml(spec));
  std::vector<std::string> created;
  auto undo = [&] {
    for (const auto& uuid : created) (void)mdevs.remove(uuid);
  };
  for (size_t i = 0; i < placements.size(); ++i) {
    if (auto made = mdevs.create(placements[i], spec.mdevs[i].uuid); !made) {
      undo();
      return fail(made.error());
    }
    created.push_back(spec.mdevs[i].uuid);
  }
  if (auto defined = hv.define(xml); !defined) {
    undo();
    return fail(defined.error());
  }
  return xml;
}

Result<void> teardown(Hypervisor& hv, const Mdevs& mdevs, std::string_view name) {
  auto info = GP_TRY(hv.find(name));
  if (!info) return fail(Error::not_found(fmt::format("no domain '{}' is defined", name)));
  GP_TRY_VOID(hv.destroy(name));
  GP_TRY_VOID(hv.undefine(name));
  for (const auto& uuid : info->devices.mdevs) GP_TRY_VOID(mdevs.remove(uuid));
  return ok();
}

}  // namespace gp::vm
