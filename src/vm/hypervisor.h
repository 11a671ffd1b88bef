// The hypervisor side of GPU virtual machines: libvirt through its C API (a connection URI such
// as qemu:///system on a node, test:///<node file> in tests), the mediated devices vGPUs need
// (created through sysfs, the kernel's own interface), and provisioning: check, create, render,
// define, in that order, so a refused request defines nothing.
//
// A Hypervisor is used from one thread at a time (the agent's loop); it is not safe for
// concurrent use.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "vm/vm.h"

namespace gp::vm {

enum class DomainState { kShutOff, kRunning, kPaused, kShuttingDown, kCrashed, kOther };
std::string_view to_string(DomainState state);

struct DomainInfo {
  std::string name, uuid;
  DomainState state = DomainState::kOther;
  DomainDevices devices;  // what its XML gives it
  std::string xml;        // the domain's XML as libvirt returns it
};

class Hypervisor {
 public:
  // Opens a libvirt connection; unavailable, with libvirt's reason, when it cannot.
  static Result<std::unique_ptr<Hypervisor>> open(const std::string& uri);
  ~Hypervisor();
  Hypervisor(const Hypervisor&) = delete;
  Hypervisor& operator=(const Hypervisor&) = delete;

  const std::string& uri() const { return uri_; }
  // The <domain type> this hypervisor runs: "kvm" on QEMU/KVM, "test" on the test driver.
  const std::string& domain_type() const { return domain_type_; }
  // The host's default security driver as libvirt reports it ("apparmor", "selinux"), or empty
  // when it has none (or only the test driver's stand-in).
  const std::string& security_model() const { return security_model_; }

  // Every defined domain, running or not, by name.
  Result<std::vector<DomainInfo>> domains();
  Result<std::optional<DomainInfo>> find(std::string_view name);
  // The devices every defined domain holds, for the checks in vm.h. A mediated device counts
  // against its parent GPU, resolved through `mdevs`.
  Result<std::vector<Claim>> claims(const class Mdevs& mdevs);

  // Defines a persistent domain; conflict when a domain of that name exists.
  Result<void> define(std::string_view xml);
  Result<void> start(std::string_view name);     // a defined, shut-off domain
  Result<void> shutdown(std::string_view name);  // asks the guest (ACPI) to power off
  Result<void> reboot(std::string_view name);    // asks the guest to reboot
  Result<void> destroy(std::string_view name);   // powers off at once; no-op when shut off
  Result<void> undefine(std::string_view name);  // a shut-off domain
  // The guest's addresses as the hypervisor knows them (DHCP leases; the test driver invents
  // one), "10.240.0.5/24" form.
  Result<std::vector<std::string>> addresses(std::string_view name);

 private:
  struct Impl;
  explicit Hypervisor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string uri_, domain_type_, security_model_;
};

// Mediated devices through sysfs under `root` ("/sys" on a node; a fixture tree in tests):
// created by writing a UUID to <root>/bus/pci/devices/<parent>/mdev_supported_types/<type>/create,
// found under <root>/bus/mdev/devices/<uuid> (a link into the parent's directory), removed by
// writing 1 to its `remove`.
class Mdevs {
 public:
  explicit Mdevs(std::filesystem::path root) : root_(std::move(root)) {}
  Result<void> create(const MdevPlacement& at, std::string_view uuid) const;
  Result<void> remove(std::string_view uuid) const;
  // The parent PCI address of a mediated device, or nullopt when the device does not exist.
  std::optional<std::string> parent_of(std::string_view uuid) const;

 private:
  std::filesystem::path root_;
};

// One VM to provision: the spec without devices, the whole GPUs to pass through and the vGPUs
// to create (each on a GPU, by type).
struct VmRequest {
  DomainSpec spec;
  std::vector<std::string> gpus;
  struct Vgpu {
    std::string gpu;
    std::string type;  // a vGPU type name, "H200-3-71C"
  };
  std::vector<Vgpu> vgpus;
};

// Checks the request against the host and the domains already defined (vm.h's checks; a VM
// takes GPUs by passthrough or by vGPU, not both, and at least one), creates its mediated
// devices (new UUIDs from `uuid_source`, removed again if a later step fails), renders the
// domain for this hypervisor and defines it. Nothing is defined when anything is refused.
// Returns the rendered XML.
Result<std::string> provision(Hypervisor& hv, const Mdevs& mdevs, const HostTopology& host,
                              VmRequest request, const std::function<std::string()>& uuid_source);

// Powers the domain off, undefines it and removes its mediated devices. not_found when no such
// domain is defined.
Result<void> teardown(Hypervisor& hv, const Mdevs& mdevs, std::string_view name);

}  // namespace gp::vm
