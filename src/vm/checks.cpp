// What a domain may be given: whole GPUs only when VFIO can hand them over without anything
// else going with them, vGPUs only where the driver offers the type and has room for it. The
// messages are for the operator who reads them, so each names the device and the reason.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "vm/vm.h"

namespace gp::vm {
namespace {

// What a device is, as a PCI class says it, for messages: "network controller".
std::string describe_pci_device(const PciDevice& device) {
  if (device.is_gpu()) return "GPU";
  if (device.is_bridge()) return "PCI bridge";
  switch (device.class_code >> 16) {
    case 0x01:
      return "storage controller";
    case 0x02:
      return "network controller";
    case 0x03:
      return "display controller";
    case 0x04:
      return "multimedia controller";
    case 0x05:
      return "memory controller";
    case 0x06:
      return "bridge";
    case 0x08:
      return "system peripheral";
    case 0x0c:
      return "serial bus controller";
    case 0x12:
      return "processing accelerator";
    default:
      return fmt::format("PCI class 0x{:06x}", device.class_code);
  }
}

// A claim's address in sysfs form (claims come from domain XML, normally already in it).
std::string claim_address(const Claim& claim) {
  return normalize_pci_address(claim.address).value_or(claim.address);
}

// The GPU and its SR-IOV virtual functions, by address: every device a vGPU of it may sit on.
std::vector<const PciDevice*> gpu_and_virtual_functions(const HostTopology& host,
                                                        const PciDevice& gpu) {
  std::vector<const PciDevice*> out;
  for (const PciDevice& device : host.devices) {
    if (device.address == gpu.address || device.physfn == gpu.address) out.push_back(&device);
  }
  return out;
}

// The host device `gpu` names that is an NVIDIA GPU, refusing anything else.
Result<const PciDevice*> find_gpu(const HostTopology& host, std::string_view gpu) {
  const std::string address = GP_TRY(normalize_pci_address(gpu));
  const PciDevice* device = host.find(address);
  if (device == nullptr) {
    return fail(Error::not_found(fmt::format("GPU {} is not a PCI device on this host", address)));
  }
  if (!device->is_gpu()) {
    return fail(Error::invalid(
        fmt::format("{} is not an NVIDIA GPU: it is a {} (vendor 0x{:04x}, class 0x{:06x})",
                    address, describe_pci_device(*device), device->vendor, device->class_code)));
  }
  return device;
}

std::string_view without_vendor(std::string_view mdev_name) {
  constexpr std::string_view kVendor = "NVIDIA ";
  if (mdev_name.starts_with(kVendor)) mdev_name.remove_prefix(kVendor.size());
  return mdev_name;
}

}  // namespace

Result<void> check_passthrough(const HostTopology& host, const std::vector<std::string>& gpus,
                               const std::vector<Claim>& claims, std::string_view domain) {
  std::vector<const PciDevice*> wanted;
  for (const std::string& gpu : gpus) {
    const PciDevice* device = GP_TRY(find_gpu(host, gpu));
    if (std::find(wanted.begin(), wanted.end(), device) != wanted.end()) {
      return fail(Error::invalid(
          fmt::format("GPU {} is listed twice for domain {}", device->address, domain)));
    }
    wanted.push_back(device);
  }
  auto is_wanted = [&](const PciDevice* device) {
    return std::find(wanted.begin(), wanted.end(), device) != wanted.end();
  };

  for (const PciDevice* gpu : wanted) {
    // Another domain's claim on the GPU, or on one of its virtual functions (its vGPUs).
    for (const PciDevice* part : gpu_and_virtual_functions(host, *gpu)) {
      for (const Claim& claim : claims) {
        if (claim.domain == domain || claim_address(claim) != part->address) continue;
        if (!claim.mediated) {
          return fail(Error::conflict(fmt::format("GPU {} is already passed through to domain {}",
                                                  gpu->address, claim.domain)));
        }
        return fail(Error::conflict(fmt::format(
            "GPU {} carries a vGPU of domain {}{}; it cannot also be passed through whole",
            gpu->address, claim.domain,
            part == gpu ? "" : fmt::format(" (on its virtual function {})", part->address))));
      }
    }
    if (gpu->iommu_group < 0) {
      return fail(ErrorCode::kConflict,
                  fmt::format("GPU {} has no IOMMU group: VFIO cannot pass a device through "
                              "without an IOMMU (is it enabled in firmware and on the kernel "
                              "command line: intel_iommu=on or amd_iommu=on?)",
                              gpu->address));
    }
    // VFIO hands the guest the whole IOMMU group. Bridges stay with the host (vfio-pci does
    // not bind them and they give the guest nothing); anything else would go with the GPU.
    for (const PciDevice* member : host.group(gpu->iommu_group)) {
      if (is_wanted(member) || member->is_bridge()) continue;
      return fail(ErrorCode::kConflict,
                  fmt::format("GPU {} shares IOMMU group {} with {} ({}), which is not part of "
                              "this allocation; passthrough would hand it to the guest",
                              gpu->address, gpu->iommu_group, member->address,
                              describe_pci_device(*member)));
    }
  }
  return ok();
}

Result<MdevPlacement> check_vgpu(const HostTopology& host, std::string_view gpu,
                                 const VgpuType& type, const std::vector<Claim>& claims) {
  const PciDevice* device = GP_TRY(find_gpu(host, gpu));
  const std::vector<const PciDevice*> candidates = gpu_and_virtual_functions(host, *device);

  for (const Claim& claim : claims) {
    if (claim.mediated) continue;
    const std::string address = claim_address(claim);
    for (const PciDevice* candidate : candidates) {
      if (candidate->address != address) continue;
      return fail(Error::conflict(fmt::format(
          "GPU {} is passed through whole to domain {}{}; it cannot also carry vGPUs",
          device->address, claim.domain,
          candidate == device ? "" : fmt::format(" (its virtual function {})", address))));
    }
  }

  std::set<std::string, std::less<>> offered;
  int offering = 0;  // devices that offer the type
  for (const PciDevice* candidate : candidates) {
    for (const MdevType& mdev : candidate->mdev_types) {
      offered.emplace(without_vendor(mdev.name));
      if (without_vendor(mdev.name) != type.name) continue;
      ++offering;
      if (mdev.available_instances > 0) {
        return MdevPlacement{.parent = candidate->address, .type_id = mdev.id};
      }
    }
  }
  if (offering == 0) {
    if (offered.empty()) {
      return fail(Error::invalid(fmt::format(
          "GPU {} offers no vGPU types, so not {}: is the NVIDIA vGPU manager loaded and, on "
          "SR-IOV GPUs, are its virtual functions enabled?",
          device->address, type.name)));
    }
    std::string names;
    for (const std::string& name : offered) {
      if (!names.empty()) names += ", ";
      names += name;
    }
    return fail(Error::invalid(fmt::format("GPU {} does not offer vGPU type {}; it offers: {}",
                                           device->address, type.name, names)));
  }
  return fail(ErrorCode::kConflict,
              fmt::format("GPU {} has no {} instance available: {} of its devices offer the type "
                          "and none has room for another",
                          device->address, type.name, offering));
}

}  // namespace gp::vm
