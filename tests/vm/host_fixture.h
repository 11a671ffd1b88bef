// The fixture host of the vm tests: a sysfs tree in a temp dir laid out as the kernel lays it
// out (PCI devices with IOMMU groups, NUMA nodes, SR-IOV virtual functions offering vGPU types),
// as vm::read_host and vm::Mdevs read it on a node, and the kernel's part in creating mediated
// devices.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vm/vm.h"

namespace gp::vm::testing {

namespace fs = std::filesystem;

inline void write_file(const fs::path& path, std::string_view text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

struct FixtureDevice {
  std::string address;
  uint16_t vendor = 0x10de, device = 0x2335;  // an H200
  uint32_t class_code = 0x030200;
  std::optional<int> iommu_group;
  std::optional<int> numa_node;  // nullopt: no numa_node file at all
  std::string driver;
  std::string physfn;
  std::vector<MdevType> mdev_types;
};

// Lays out a device as sysfs does: its directory under devices/pci0000:00/, a link to it in
// bus/pci/devices/, and its iommu_group, driver and physfn links pointing where the kernel's do.
inline void add_fixture_device(const fs::path& root, const FixtureDevice& d) {
  const fs::path dir = root / "devices/pci0000:00" / d.address;
  fs::create_directories(dir);
  write_file(dir / "vendor", fmt::format("0x{:04x}\n", d.vendor));
  write_file(dir / "device", fmt::format("0x{:04x}\n", d.device));
  write_file(dir / "class", fmt::format("0x{:06x}\n", d.class_code));
  if (d.numa_node) write_file(dir / "numa_node", fmt::format("{}\n", *d.numa_node));
  if (d.iommu_group) {
    fs::create_directories(root / "kernel/iommu_groups" / std::to_string(*d.iommu_group));
    fs::create_symlink(fmt::format("../../../kernel/iommu_groups/{}", *d.iommu_group),
                       dir / "iommu_group");
  }
  if (!d.driver.empty()) {
    fs::create_directories(root / "bus/pci/drivers" / d.driver);
    fs::create_symlink("../../../bus/pci/drivers/" + d.driver, dir / "driver");
  }
  if (!d.physfn.empty()) fs::create_symlink("../" + d.physfn, dir / "physfn");
  for (const MdevType& type : d.mdev_types) {
    write_file(dir / "mdev_supported_types" / type.id / "name", type.name + "\n");
    write_file(dir / "mdev_supported_types" / type.id / "available_instances",
               fmt::format("{}\n", type.available_instances));
  }
  fs::create_directories(root / "bus/pci/devices");
  fs::create_symlink("../../../devices/pci0000:00/" + d.address,
                     root / "bus/pci/devices" / d.address);
}

// The host of libvirt's test driver ("test://<this file>"; it keeps its state per connection):
// two NUMA nodes of 32 CPUs, as the fixture host's cpulists say (0-15,32-47 and 16-31,48-63).
inline constexpr const char* kTestDriverNodeFile = R"(<node>
  <cpu><mhz>2600</mhz><model>x86_64</model><active>64</active><nodes>2</nodes>
    <sockets>2</sockets><cores>16</cores><threads>2</threads></cpu>
  <memory>268435456</memory>
</node>
)";

// Two NUMA nodes and:
//   0000:41:00.0  H200, group 10, node 0, SR-IOV: VFs 41:00.4 (group 40), 41:00.5 (group 41)
//                 with vGPU types (3-71C: room on 41:00.5 only; 1-18C: room on both;
//                 7-141C: room on neither)
//   0000:c1:00.0  H200, group 11, node 1, offering time-sliced types on itself (no SR-IOV)
//   0000:42:00.0  H200, group 12 with 0000:42:00.1, a host NIC
//   0000:60:00.0  a PCI bridge in group 13 with the H200 at 0000:61:00.0
//   0000:70:00.0  H200 without an IOMMU group, numa_node or driver
inline void build_fixture_host(const fs::path& root) {
  const std::vector<MdevType> vf4 = {{"nvidia-1150", "NVIDIA H200-3-71C", 0},
                                     {"nvidia-1151", "NVIDIA H200-1-18C", 1},
                                     {"nvidia-1155", "NVIDIA H200-7-141C", 0}};
  std::vector<MdevType> vf5 = vf4;
  vf5[0].available_instances = 1;
  const std::vector<FixtureDevice> devices = {
      {.address = "0000:41:00.0", .iommu_group = 10, .numa_node = 0, .driver = "nvidia"},
      {.address = "0000:41:00.4",
       .iommu_group = 40,
       .numa_node = 0,
       .driver = "nvidia",
       .physfn = "0000:41:00.0",
       .mdev_types = vf4},
      {.address = "0000:41:00.5",
       .iommu_group = 41,
       .numa_node = 0,
       .driver = "nvidia",
       .physfn = "0000:41:00.0",
       .mdev_types = vf5},
      {.address = "0000:c1:00.0",
       .iommu_group = 11,
       .numa_node = 1,
       .driver = "nvidia",
       .mdev_types = {{"nvidia-1162", "NVIDIA H200-35C", 4},
                      {"nvidia-1160", "NVIDIA H200-141C", 1}}},
      {.address = "0000:42:00.0", .iommu_group = 12, .numa_node = 0, .driver = "vfio-pci"},
      {.address = "0000:42:00.1",
       .vendor = 0x15b3,
       .device = 0x101d,
       .class_code = 0x020000,
       .iommu_group = 12,
       .numa_node = 0,
       .driver = "mlx5_core"},
      {.address = "0000:60:00.0",
       .vendor = 0x1000,
       .device = 0xc030,
       .class_code = 0x060400,
       .iommu_group = 13,
       .numa_node = 1,
       .driver = "pcieport"},
      {.address = "0000:61:00.0", .iommu_group = 13, .numa_node = 1, .driver = "vfio-pci"},
      {.address = "0000:70:00.0"},
  };
  for (const FixtureDevice& device : devices) add_fixture_device(root, device);
  write_file(root / "devices/system/node/node0/cpulist", "0-15,32-47\n");
  write_file(root / "devices/system/node/node0/meminfo",
             "Node 0 MemTotal:       131072000 kB\nNode 0 MemFree:        100000000 kB\n");
  write_file(root / "devices/system/node/node1/cpulist", "16-31,48-63\n");
  write_file(root / "devices/system/node/node1/meminfo",
             "Node 1 MemTotal:       65536000 kB\nNode 1 MemFree:        1000 kB\n");
  write_file(root / "devices/system/node/possible", "0-1\n");  // not a node directory
}

// Plays the kernel after vm::Mdevs wrote UUIDs to `create` files: each becomes a mediated
// device in its parent's directory, linked from bus/mdev/devices/<uuid>. Returns how many it
// made.
inline int kernel_creates_mdevs(const fs::path& root) {
  int made = 0;
  for (const auto& dev : fs::directory_iterator(root / "bus/pci/devices")) {
    const fs::path types = dev.path() / "mdev_supported_types";
    if (!fs::is_directory(types)) continue;
    for (const auto& t : fs::directory_iterator(types)) {
      std::ifstream in(t.path() / "create");
      std::string uuid;
      if (!std::getline(in, uuid) || uuid.empty()) continue;
      fs::remove(t.path() / "create");
      fs::create_directories(dev.path() / uuid);
      fs::create_directories(root / "bus/mdev/devices");
      fs::create_symlink(fs::canonical(dev.path()) / uuid, root / "bus/mdev/devices" / uuid);
      ++made;
    }
  }
  return made;
}

// Whether vm::Mdevs asked the kernel to remove the mediated device `uuid`.
inline bool mdev_removed(const fs::path& root, const std::string& uuid) {
  std::ifstream in(root / "bus/mdev/devices" / uuid / "remove");
  std::string v;
  return std::getline(in, v) && v == "1";
}

}  // namespace gp::vm::testing
