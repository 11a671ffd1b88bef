// GPU virtual machines (DESIGN.md, tiers; docs/vms.md): a tenant's allocation delivered as a
// libvirt domain instead of a container. Whole GPUs go to the guest by VFIO passthrough; MIG
// instances and time-sliced shares go as NVIDIA vGPU mediated devices.
//
// This header is the pure part: the vGPU catalog, the host's PCI topology as sysfs shows it, the
// passthrough safety checks, and the renderers (libvirt domain XML, cloud-init NoCloud data).
// Talking to libvirt is in vm/hypervisor.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gp::vm {

// ---- vGPU types (NVIDIA's C-series, for compute) ----

enum class VgpuKind { kMigBacked, kTimeSliced };

struct VgpuType {
  std::string name;   // "H200-3-71C" (MIG-backed) or "H200-35C" (time-sliced)
  std::string model;  // the MIG catalog's model name, "H200-141GB"
  VgpuKind kind = VgpuKind::kMigBacked;
  std::string mig_profile;  // MIG-backed: the GPU-instance profile it sits on, "3g.71gb"
  int milli = 0;            // time-sliced: the share of the GPU it is sold as (1000 / max_per_gpu)
  int framebuffer_gib = 0;
  int max_per_gpu = 0;  // instances of this type one GPU holds

  friend bool operator==(const VgpuType&, const VgpuType&) = default;
};

// Every vGPU type gpuplane sells, for every model of the MIG catalog (vocab/vocab.h): one
// MIG-backed type per GPU-instance profile (<model>-<compute slices>-<memory GB>C, so H200's
// run from H200-1-18C to H200-7-141C), and time-sliced types of 1/1, 1/2, 1/4 and 1/8 of the GPU
// (<model>-<frame buffer GiB>C). <model> is the short name ("H200"); where two models share it
// (A100-40GB and A100-80GB) the full model name is used. Static storage.
const std::vector<VgpuType>& vgpu_types();
// By exact name; not_found names the model's types.
Result<const VgpuType*> find_vgpu_type(std::string_view name);
// The type a `mig` allocation of `profile` on `model` is delivered as, when delivered as a VM.
Result<const VgpuType*> vgpu_for_mig(std::string_view model, std::string_view profile);
// The type a `shared` allocation of `milli` on `model` is delivered as; invalid_argument when no
// time-sliced type has that share.
Result<const VgpuType*> vgpu_for_share(std::string_view model, int milli);

// ---- the host, as sysfs shows it ----

// A mediated-device type a PCI device offers (sysfs mdev_supported_types/<id>/).
struct MdevType {
  std::string id;    // "nvidia-1150"
  std::string name;  // as the driver names it: "NVIDIA H200-3-71C" (compared without "NVIDIA ")
  int available_instances = 0;
};

struct PciDevice {
  std::string address;  // "0000:41:00.0", lower case
  uint16_t vendor = 0, device = 0;
  uint32_t class_code = 0;  // 0x030200 = 3D controller; 0x060400 = PCI bridge
  int iommu_group = -1;     // -1: the host has no IOMMU group for it
  int numa_node = -1;
  std::string driver;  // bound driver: "nvidia", "vfio-pci", "" when none
  std::string physfn;  // an SR-IOV virtual function: its physical function's address
  std::vector<MdevType> mdev_types;

  bool is_gpu() const;     // NVIDIA (0x10de), display class (0x03xxxx)
  bool is_bridge() const;  // class 0x0604xx
};

struct NumaNode {
  int id = 0;
  std::string cpulist;  // "0-15,32-47", as sysfs writes it
  int64_t memory_mib = 0;
};

struct HostTopology {
  std::vector<PciDevice> devices;  // by address
  std::vector<NumaNode> numa_nodes;

  const PciDevice* find(std::string_view address) const;
  // Every device in `group`, by address.
  std::vector<const PciDevice*> group(int iommu_group) const;
};

// Normalises a PCI address as NVML ("00000000:41:00.0"), lspci ("41:00.0") or sysfs
// ("0000:41:00.0") write it to sysfs form; invalid_argument when it is none of those.
Result<std::string> normalize_pci_address(std::string_view address);

// Reads <root>/bus/pci/devices/* (vendor, device, class, iommu_group link, numa_node, driver
// link, physfn link, mdev_supported_types/*/{name,available_instances}) and
// <root>/devices/system/node/node*/{cpulist,meminfo}. `root` is "/sys" on a host; tests build a
// fixture tree. A missing attribute reads as unknown; an unreadable root is an error.
Result<HostTopology> read_host(const std::filesystem::path& root);

// ---- what a domain may be given ----

// A device already given to a domain on this host (from the host's defined domains).
struct Claim {
  std::string domain;   // libvirt domain name
  std::string address;  // PCI address passed through, or the parent of a mediated device
  bool mediated = false;
};

// Whole GPUs for one domain. Refused, naming the device, when an address is unknown to the host
// (not_found), is not a GPU (invalid_argument), is listed twice, is already claimed by another
// domain (conflict), or shares its IOMMU group with a device that is neither in `gpus` nor a
// PCI bridge (conflict: another tenant's GPU or a host NIC would go with it), or has no IOMMU
// group (conflict: no VFIO without an IOMMU).
Result<void> check_passthrough(const HostTopology& host, const std::vector<std::string>& gpus,
                               const std::vector<Claim>& claims, std::string_view domain);

// A vGPU of `type` on the GPU at `gpu`. Refused when the address is unknown or not a GPU, when
// the GPU is passed through whole to a domain, when the GPU (or one of its virtual functions)
// does not offer the type (invalid_argument, naming the types it offers), or when no instance
// is available (conflict). Returns the device and the mdev type id to create.
struct MdevPlacement {
  std::string parent;  // the PCI device the mediated device is created on (a VF on SR-IOV GPUs)
  std::string type_id;
};
Result<MdevPlacement> check_vgpu(const HostTopology& host, std::string_view gpu,
                                 const VgpuType& type, const std::vector<Claim>& claims);

// ---- names ----

// The libvirt domain of an allocation's VM: "gp-" and the allocation id with '_' as '-', so it is
// also a valid hostname. The control plane names VMs so; the agent owns every "gp-" domain.
std::string domain_name(std::string_view allocation_id);
// True for "gp-" followed by 1 to 61 of a-z 0-9 -: a name domain_name() can give.
bool is_gpuplane_domain(std::string_view name);

// ---- renderers (pure) ----

struct DomainSpec {
  std::string name;                         // "gp-<allocation id>"
  std::string uuid;                         // RFC 4122 text form
  std::string tenant, project, allocation;  // written to the domain's metadata
  std::string hypervisor = "kvm";           // <domain type=...>; "test" for libvirt's test driver
  // "efi": UEFI firmware chosen by libvirt (OVMF), which GPUs with large BARs need; "bios"
  // (or empty): the machine's default firmware.
  std::string firmware;
  int vcpus = 1;
  int64_t memory_mib = 1024;
  int numa_node = -1;                 // >= 0: vCPUs pinned to `cpuset`, memory bound to that node
  std::string cpuset;                 // the node's cpulist
  std::vector<std::string> hostdevs;  // PCI addresses passed through (VFIO, managed)
  struct Mdev {
    std::string uuid;  // the mediated device's UUID
  };
  std::vector<Mdev> mdevs;
  std::string bridge;  // the tenant segment's bridge: agent::segment_bridge_name(vni)
  std::string mac;     // "52:54:00:xx:xx:xx"
  struct Disk {
    std::string path;    // a file or block device on the host
    std::string target;  // "vda", "vdb", ...
    bool read_only = false;
  };
  std::vector<Disk> disks;  // the boot disk first
  struct Share {
    std::string source;  // a host directory (the tenant's volume)
    std::string tag;     // the guest mounts it by this tag
  };
  std::vector<Share> shares;   // virtiofs; needs shared memory backing, which the renderer adds
  std::string seed_iso;        // cloud-init NoCloud seed, attached as a read-only CD-ROM
  std::string console_log;     // a file the serial console's output is appended to; optional
  std::string security_model;  // "apparmor" / "selinux": a dynamic label; empty: libvirt's default
};

// Invalid specs (no name, zero vCPUs or memory, a malformed PCI address or MAC, a share without
// a tag, ...) are refused; nothing is rendered half. The XML validates against libvirt's
// domain.rng (virt-xml-validate). Every value is XML-escaped.
Result<std::string> render_domain_xml(const DomainSpec& spec);

// The PCI addresses and mediated-device UUIDs a domain's XML gives it (what libvirt returns from
// virDomainGetXMLDesc): used to rebuild the host's claims and to check a domain holds nothing
// it was not allocated.
struct DomainDevices {
  std::vector<std::string> pci;    // sysfs form
  std::vector<std::string> mdevs;  // UUIDs
};
Result<DomainDevices> domain_devices(std::string_view xml);

// A tenant has at most this many SSH public keys, each line at most this long (an RSA-16384 key
// line is about 2.8 KB).
inline constexpr std::size_t kMaxSshKeys = 32;
inline constexpr std::size_t kMaxSshKeyBytes = 8192;

// One OpenSSH public key line, "<type> <base64 blob> [comment]" (no authorized_keys options);
// invalid_argument naming key `index` + 1 and what is wrong.
Result<void> check_ssh_public_key(std::string_view key, std::size_t index);

// cloud-init NoCloud (meta-data, user-data): the instance id, the hostname and the tenant's SSH
// public keys (each checked to be one OpenSSH public key line; anything else is refused).
struct CloudInit {
  std::string meta_data, user_data;
};
Result<CloudInit> render_cloud_init(std::string_view instance_id, std::string_view hostname,
                                    const std::vector<std::string>& ssh_keys);

}  // namespace gp::vm
