// The host's PCI topology and NUMA nodes as sysfs shows them. Reading is separate from deciding
// (checks.cpp), so that the checks run on fixture trees and plain structs in tests.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "vm/vm.h"

namespace gp::vm {
namespace {

namespace fs = std::filesystem;

constexpr uint16_t kNvidiaVendor = 0x10de;

bool all_hex_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

template <typename T>
std::optional<T> parse_sysfs_number(std::string_view s, int base) {
  T value{};
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

// A sysfs attribute's text without its trailing newline; nullopt when it can't be read.
std::optional<std::string> read_sysfs_attribute(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// A hex attribute as sysfs writes it ("0x10de").
template <typename T>
std::optional<T> read_sysfs_hex(const fs::path& path) {
  std::optional<std::string> text = read_sysfs_attribute(path);
  if (!text) return std::nullopt;
  std::string_view digits = *text;
  if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
  return parse_sysfs_number<T>(digits, 16);
}

// The last component of a symlink's target: the IOMMU group's number, the driver's name, the
// physical function's address. Empty when `path` is not a link.
std::string sysfs_link_name(const fs::path& path) {
  std::error_code ec;
  fs::path target = fs::read_symlink(path, ec);
  if (ec) return "";
  return target.filename().string();
}

std::vector<MdevType> read_mdev_types(const fs::path& device_dir) {
  std::vector<MdevType> types;
  std::error_code ec;
  fs::directory_iterator it(device_dir / "mdev_supported_types", ec);
  if (ec) return types;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    MdevType type;
    type.id = it->path().filename().string();
    type.name = read_sysfs_attribute(it->path() / "name").value_or("");
    if (auto available = read_sysfs_attribute(it->path() / "available_instances")) {
      type.available_instances = parse_sysfs_number<int>(*available, 10).value_or(0);
    }
    types.push_back(std::move(type));
  }
  std::sort(types.begin(), types.end(),
            [](const MdevType& a, const MdevType& b) { return a.id < b.id; });
  return types;
}

PciDevice read_pci_device(const fs::path& dir, std::string address) {
  PciDevice device;
  device.address = std::move(address);
  device.vendor = read_sysfs_hex<uint16_t>(dir / "vendor").value_or(0);
  device.device = read_sysfs_hex<uint16_t>(dir / "device").value_or(0);
  device.class_code = read_sysfs_hex<uint32_t>(dir / "class").value_or(0);
  if (auto numa = read_sysfs_attribute(dir / "numa_node")) {
    device.numa_node = parse_sysfs_number<int>(*numa, 10).value_or(-1);
  }
  if (std::string group = sysfs_link_name(dir / "iommu_group"); !group.empty()) {
    device.iommu_group = parse_sysfs_number<int>(group, 10).value_or(-1);
  }
  device.driver = sysfs_link_name(dir / "driver");
  if (std::string physfn = sysfs_link_name(dir / "physfn"); !physfn.empty()) {
    device.physfn = normalize_pci_address(physfn).value_or(physfn);
  }
  device.mdev_types = read_mdev_types(dir);
  return device;
}

// "Node 0 MemTotal:       131072000 kB" -> 128000 MiB.
int64_t meminfo_total_mib(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t key = line.find("MemTotal:");
    if (key == std::string::npos) continue;
    std::istringstream fields(line.substr(key + std::string_view("MemTotal:").size()));
    int64_t kib = 0;
    if (fields >> kib) return kib / 1024;
  }
  return 0;
}

std::vector<NumaNode> read_numa_nodes(const fs::path& root) {
  std::vector<NumaNode> nodes;
  std::error_code ec;
  fs::directory_iterator it(root / "devices/system/node", ec);
  if (ec) return nodes;  // no NUMA information: a single-node host or a trimmed fixture
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (!name.starts_with("node")) continue;
    std::optional<int> id = parse_sysfs_number<int>(std::string_view(name).substr(4), 10);
    if (!id) continue;
    NumaNode node;
    node.id = *id;
    node.cpulist = read_sysfs_attribute(it->path() / "cpulist").value_or("");
    node.memory_mib = meminfo_total_mib(read_sysfs_attribute(it->path() / "meminfo").value_or(""));
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return nodes;
}

}  // namespace

bool PciDevice::is_gpu() const { return vendor == kNvidiaVendor && (class_code >> 16) == 0x03; }

bool PciDevice::is_bridge() const { return (class_code >> 8) == 0x0604; }

const PciDevice* HostTopology::find(std::string_view address) const {
  Result<std::string> normalized = normalize_pci_address(address);
  if (!normalized) return nullptr;
  for (const PciDevice& device : devices) {
    if (device.address == *normalized) return &device;
  }
  return nullptr;
}

std::vector<const PciDevice*> HostTopology::group(int iommu_group) const {
  std::vector<const PciDevice*> out;
  if (iommu_group < 0) return out;  // "no group" is not a group
  for (const PciDevice& device : devices) {
    if (device.iommu_group == iommu_group) out.push_back(&device);
  }
  return out;
}

Result<std::string> normalize_pci_address(std::string_view address) {
  auto refuse = [&] {
    return fail(Error::invalid(fmt::format(
        "\"{}\" is not a PCI address (domain:bus:slot.function, e.g. 0000:41:00.0)", address)));
  };
  // [domain:]bus:slot.function; the domain has 4 hex digits in sysfs (more on VMD domains),
  // 8 in NVML's bus ids, none in lspci's short form.
  const std::size_t dot = address.rfind('.');
  if (dot == std::string_view::npos) return refuse();
  const std::string_view function = address.substr(dot + 1);
  const std::string_view head = address.substr(0, dot);
  const std::size_t slot_colon = head.rfind(':');
  if (slot_colon == std::string_view::npos) return refuse();
  const std::string_view slot = head.substr(slot_colon + 1);
  const std::string_view domain_bus = head.substr(0, slot_colon);
  const std::size_t bus_colon = domain_bus.rfind(':');
  const std::string_view bus =
      bus_colon == std::string_view::npos ? domain_bus : domain_bus.substr(bus_colon + 1);
  const std::string_view domain = bus_colon == std::string_view::npos
                                      ? std::string_view("0000")
                                      : domain_bus.substr(0, bus_colon);
  if (domain.size() < 4 || domain.size() > 8 || !all_hex_digits(domain) || bus.size() != 2 ||
      !all_hex_digits(bus) || slot.size() != 2 || !all_hex_digits(slot) || function.size() != 1 ||
      !all_hex_digits(function)) {
    return refuse();
  }
  const uint32_t domain_value = *parse_sysfs_number<uint32_t>(domain, 16);
  const unsigned slot_value = *parse_sysfs_number<unsigned>(slot, 16);
  const unsigned function_value = *parse_sysfs_number<unsigned>(function, 16);
  if (slot_value > 0x1f || function_value > 7) return refuse();
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain_value,
                     *parse_sysfs_number<unsigned>(bus, 16), slot_value, function_value);
}

Result<HostTopology> read_host(const fs::path& root) {
  const fs::path devices_dir = root / "bus/pci/devices";
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    return fail(Error::not_found(fmt::format("sysfs root {} does not exist", root.string())));
  }
  fs::directory_iterator it(devices_dir, ec);
  if (ec) {
    return fail(Error::unavailable(
        fmt::format("cannot list PCI devices in {}: {}", devices_dir.string(), ec.message())));
  }
  HostTopology host;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) {
      return fail(Error::unavailable(
          fmt::format("cannot list PCI devices in {}: {}", devices_dir.string(), ec.message())));
    }
    // The entries are links named by address (../../../devices/pci0000:40/0000:41:00.0).
    Result<std::string> address = normalize_pci_address(it->path().filename().string());
    if (!address) continue;
    host.devices.push_back(read_pci_device(it->path(), std::move(*address)));
  }
  std::sort(host.devices.begin(), host.devices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  host.numa_nodes = read_numa_nodes(root);
  return host;
}

}  // namespace gp::vm
