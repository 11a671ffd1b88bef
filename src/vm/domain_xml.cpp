// The renderers: libvirt domain XML from a DomainSpec (and back to the devices it gives), and
// cloud-init NoCloud data. Everything a spec holds is validated before a byte is written, so a
// refused spec renders nothing, and every value is escaped where it lands.
#include <fmt/format.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "common/crypto.h"
#include "common/markup.h"
#include "vm/vm.h"

namespace gp::vm {
namespace {

// The gpuplane namespace of the domain's <metadata> element.
constexpr std::string_view kDomainMetadataNs = "https://gpuplane.dev/xmlns/domain/1";

// ---- validation ----

bool is_name_token(std::string_view s, std::size_t max) {
  return !s.empty() && s.size() <= max && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

bool is_hex_char(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// 8-4-4-4-12 hex digits.
bool is_rfc4122_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !is_hex_char(s[i])) return false;
  }
  return true;
}

// Six colon-separated hex pairs.
bool is_mac_address(std::string_view s) {
  if (s.size() != 17) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i % 3 == 2 ? s[i] != ':' : !is_hex_char(s[i])) return false;
  }
  return true;
}

// A cpulist as sysfs writes it: "0-15,32-47".
bool is_cpulist(std::string_view s) {
  if (s.empty()) return false;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t comma = s.find(',', start);
    if (comma == std::string_view::npos) comma = s.size();
    const std::string_view range = s.substr(start, comma - start);
    const std::size_t dash = range.find('-');
    auto number = [](std::string_view n) {
      return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      });
    };
    if (dash == std::string_view::npos
            ? !number(range)
            : !number(range.substr(0, dash)) || !number(range.substr(dash + 1))) {
      return false;
    }
    start = comma + 1;
  }
  return true;
}

// Text XML 1.0 (and YAML) can carry: valid UTF-8 without control characters (C0, DEL, C1) or
// the noncharacters U+FFFE and U+FFFF.
bool is_clean_text(std::string_view s) {
  if (!is_valid_utf8(s)) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    if (c < 0x20 || c == 0x7f) return false;
    if (c == 0xc2 && next >= 0x80 && next <= 0x9f) return false;  // U+0080..U+009F
    if (c == 0xef && next == 0xbf && i + 2 < s.size() &&
        (static_cast<unsigned char>(s[i + 2]) & 0xfe) == 0xbe)  // U+FFFE, U+FFFF
      return false;
  }
  return true;
}

Result<void> check_clean_text(std::string_view field, std::string_view value) {
  if (!is_clean_text(value)) {
    return fail(
        Error::invalid(fmt::format("{} must be UTF-8 text without control characters", field)));
  }
  return ok();
}

Result<void> check_host_path(std::string_view field, std::string_view path) {
  if (!path.starts_with('/')) {
    return fail(Error::invalid(fmt::format("{} \"{}\" must be an absolute path", field, path)));
  }
  return check_clean_text(field, path);
}

// Every field of the spec, before anything is rendered.
Result<void> validate_domain_spec(const DomainSpec& spec) {
  if (!is_name_token(spec.name, 64)) {
    return fail(Error::invalid(
        fmt::format("domain name \"{}\" must be 1 to 64 of A-Z a-z 0-9 _ . -", spec.name)));
  }
  if (!is_rfc4122_uuid(spec.uuid)) {
    return fail(Error::invalid(fmt::format(
        "domain uuid \"{}\" is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", spec.uuid)));
  }
  GP_TRY_VOID(check_clean_text("tenant", spec.tenant));
  GP_TRY_VOID(check_clean_text("project", spec.project));
  GP_TRY_VOID(check_clean_text("allocation", spec.allocation));
  if (spec.hypervisor != "kvm" && spec.hypervisor != "qemu" && spec.hypervisor != "test") {
    return fail(Error::invalid(fmt::format(
        "domain type \"{}\" is not one gpuplane renders (kvm, qemu, test)", spec.hypervisor)));
  }
  if (!spec.firmware.empty() && spec.firmware != "efi" && spec.firmware != "bios") {
    return fail(
        Error::invalid(fmt::format("firmware \"{}\" is neither efi nor bios", spec.firmware)));
  }
  if (spec.vcpus < 1 || spec.vcpus > 1024) {
    return fail(Error::invalid(fmt::format("vcpus {} is not within 1..1024", spec.vcpus)));
  }
  if (spec.memory_mib <= 0) {
    return fail(Error::invalid(fmt::format("memory {} MiB must be positive", spec.memory_mib)));
  }
  if (spec.numa_node >= 0 && !is_cpulist(spec.cpuset)) {
    return fail(Error::invalid(
        fmt::format("cpuset \"{}\" of NUMA node {} is not a cpulist (\"0-15,32-47\")", spec.cpuset,
                    spec.numa_node)));
  }
  if (spec.numa_node < 0 && !spec.cpuset.empty()) {
    return fail(Error::invalid(
        fmt::format("cpuset \"{}\" without a NUMA node to bind memory to", spec.cpuset)));
  }
  std::set<std::string, std::less<>> addresses;
  for (const std::string& hostdev : spec.hostdevs) {
    const std::string address = GP_TRY(normalize_pci_address(hostdev));
    if (!addresses.insert(address).second) {
      return fail(Error::invalid(fmt::format("PCI device {} is listed twice", address)));
    }
  }
  for (const DomainSpec::Mdev& mdev : spec.mdevs) {
    if (!is_rfc4122_uuid(mdev.uuid)) {
      return fail(
          Error::invalid(fmt::format("mediated device uuid \"{}\" is not a UUID", mdev.uuid)));
    }
    if (!addresses.insert(mdev.uuid).second) {
      return fail(Error::invalid(fmt::format("mediated device {} is listed twice", mdev.uuid)));
    }
  }
  if (!spec.bridge.empty() && !is_name_token(spec.bridge, 15)) {
    return fail(Error::invalid(fmt::format(
        "bridge \"{}\" is not an interface name (1 to 15 of A-Z a-z 0-9 _ . -)", spec.bridge)));
  }
  if (!spec.mac.empty() && !is_mac_address(spec.mac)) {
    return fail(Error::invalid(
        fmt::format("MAC address \"{}\" is not six hex pairs (52:54:00:xx:xx:xx)", spec.mac)));
  }
  if (!spec.mac.empty() && spec.bridge.empty()) {
    return fail(Error::invalid(fmt::format("MAC address {} without a bridge", spec.mac)));
  }
  std::set<std::string, std::less<>> targets;
  for (const DomainSpec::Disk& disk : spec.disks) {
    GP_TRY_VOID(check_host_path("disk path", disk.path));
    const bool virtio_name = disk.target.size() > 2 && disk.target.starts_with("vd") &&
                             std::all_of(disk.target.begin() + 2, disk.target.end(),
                                         [](char c) { return c >= 'a' && c <= 'z'; });
    if (!virtio_name) {
      return fail(Error::invalid(
          fmt::format("disk target \"{}\" of {} is not a virtio disk name (vda, vdb, ...)",
                      disk.target, disk.path)));
    }
    if (!targets.insert(disk.target).second) {
      return fail(Error::invalid(fmt::format("disk target {} is used twice", disk.target)));
    }
  }
  std::set<std::string, std::less<>> tags;
  for (const DomainSpec::Share& share : spec.shares) {
    GP_TRY_VOID(check_host_path("share source", share.source));
    // The guest's virtio-fs driver takes tags of at most 36 bytes.
    if (!is_name_token(share.tag, 36)) {
      return fail(Error::invalid(fmt::format(
          "share tag \"{}\" of {} must be 1 to 36 of A-Z a-z 0-9 _ . -", share.tag, share.source)));
    }
    if (!tags.insert(share.tag).second) {
      return fail(Error::invalid(fmt::format("share tag {} is used twice", share.tag)));
    }
  }
  if (!spec.seed_iso.empty()) GP_TRY_VOID(check_host_path("seed ISO", spec.seed_iso));
  if (!spec.console_log.empty()) GP_TRY_VOID(check_host_path("console log", spec.console_log));
  if (!spec.security_model.empty() && spec.security_model != "apparmor" &&
      spec.security_model != "selinux") {
    return fail(Error::invalid(
        fmt::format("security model \"{}\" is neither apparmor nor selinux", spec.security_model)));
  }
  return ok();
}

// ---- rendering ----

void render_disk(std::string& xml, const DomainSpec::Disk& disk) {
  // A block device is a <source dev>; anything else a file.
  const bool block = disk.path.starts_with("/dev/");
  xml += fmt::format("    <disk type='{}' device='disk'>\n", block ? "block" : "file");
  xml += "      <driver name='qemu' type='raw'/>\n";
  xml += fmt::format("      <source {}='{}'/>\n", block ? "dev" : "file", markup_escape(disk.path));
  xml += fmt::format("      <target dev='{}' bus='virtio'/>\n", disk.target);
  if (disk.read_only) xml += "      <readonly/>\n";
  xml += "    </disk>\n";
}

// "0000:41:00.0" (already normalized) as libvirt's <address>.
std::string pci_source_address(std::string_view address) {
  const std::size_t bus_colon = address.find(':');
  const std::size_t slot_colon = address.find(':', bus_colon + 1);
  const std::size_t dot = address.find('.', slot_colon + 1);
  return fmt::format("<address domain='0x{}' bus='0x{}' slot='0x{}' function='0x{}'/>",
                     address.substr(0, bus_colon),
                     address.substr(bus_colon + 1, slot_colon - bus_colon - 1),
                     address.substr(slot_colon + 1, dot - slot_colon - 1), address.substr(dot + 1));
}

// ---- reading domain XML back ----

struct XmlDocFree {
  void operator()(xmlDoc* doc) const { xmlFreeDoc(doc); }
};

std::string xml_attribute(const xmlNode* node, const char* name) {
  xmlChar* value = xmlGetProp(node, reinterpret_cast<const xmlChar*>(name));
  if (value == nullptr) return "";
  std::string out(reinterpret_cast<const char*>(value));
  xmlFree(value);
  return out;
}

bool xml_named(const xmlNode* node, std::string_view name) {
  return node->type == XML_ELEMENT_NODE &&
         std::string_view(reinterpret_cast<const char*>(node->name)) == name;
}

const xmlNode* xml_child(const xmlNode* node, std::string_view name) {
  for (const xmlNode* child = node->children; child != nullptr; child = child->next) {
    if (xml_named(child, name)) return child;
  }
  return nullptr;
}

// A number of a libvirt <address> attribute: "0x41" (as libvirt writes it) or decimal.
std::optional<unsigned> address_number(std::string_view s) {
  int base = 10;
  if (s.starts_with("0x") || s.starts_with("0X")) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty() || s.size() > 8) return std::nullopt;
  unsigned value = 0;
  for (char c : s) {
    const int digit =
        std::isdigit(static_cast<unsigned char>(c))
            ? c - '0'
            : (base == 16 && is_hex_char(c) ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                                            : -1);
    if (digit < 0) return std::nullopt;
    value = value * base + digit;
  }
  return value;
}

Result<std::string> pci_address_from_xml(const xmlNode* address) {
  const std::string domain = xml_attribute(address, "domain");
  const std::string bus = xml_attribute(address, "bus");
  const std::string slot = xml_attribute(address, "slot");
  const std::string function = xml_attribute(address, "function");
  std::optional<unsigned> d = address_number(domain.empty() ? "0" : domain);
  std::optional<unsigned> b = address_number(bus), s = address_number(slot),
                          f = address_number(function);
  if (!d || !b || !s || !f || *b > 0xff || *s > 0x1f || *f > 7) {
    return fail(Error::invalid(
        fmt::format("domain XML has a PCI hostdev whose address domain='{}' bus='{}' slot='{}' "
                    "function='{}' is not a PCI address",
                    domain, bus, slot, function)));
  }
  return normalize_pci_address(fmt::format("{:04x}:{:02x}:{:02x}.{:x}", *d, *b, *s, *f));
}

// ---- cloud-init ----

// A YAML double-quoted scalar. The text is clean (no control characters), so only the quote
// and the backslash need escaping.
std::string yaml_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

bool is_dns_label(std::string_view s) {
  return !s.empty() && s.size() <= 63 && s.front() != '-' && s.back() != '-' &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
         });
}

// Standard base64 as OpenSSH writes key blobs: '+' and '/', padded to a multiple of 4.
std::optional<std::string> decode_base64(std::string_view s) {
  if (s.empty() || s.size() % 4 != 0 || s.find_first_of("-_") != std::string_view::npos ||
      s.ends_with("==="))
    return std::nullopt;
  return base64url_decode(s);
}

// The public-key algorithms OpenSSH's authorized_keys accepts today (ssh-dss is gone from
// OpenSSH and is not taken).
constexpr std::array<std::string_view, 7> kSshKeyTypes = {
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
};

}  // namespace

// One OpenSSH public key line: "<type> <base64 blob> [comment]", without authorized_keys
// options (a key may not bring its own command= or from=). The blob must decode and start with
// its own type, as every OpenSSH key blob does, so a truncated or pasted-wrong key is caught
// here and not when the tenant cannot log in.
Result<void> check_ssh_public_key(std::string_view key, std::size_t index) {
  auto refuse = [&](std::string_view why) {
    return fail(Error::invalid(
        fmt::format("SSH key {} is not an OpenSSH public key line: {}", index + 1, why)));
  };
  if (!is_clean_text(key)) return refuse("it holds a line break or control character");
  const std::size_t type_end = key.find(' ');
  if (type_end == std::string_view::npos) return refuse("expected \"<type> <base64> [comment]\"");
  const std::string_view type = key.substr(0, type_end);
  if (std::find(kSshKeyTypes.begin(), kSshKeyTypes.end(), type) == kSshKeyTypes.end()) {
    return refuse(
        fmt::format("\"{}\" is not a key type (ssh-ed25519, ssh-rsa, ecdsa-sha2-*, "
                    "sk-*@openssh.com)",
                    type.substr(0, 40)));
  }
  std::string_view rest = key.substr(type_end + 1);
  const std::size_t blob_end = rest.find(' ');
  const std::string_view blob = rest.substr(0, blob_end);
  std::optional<std::string> decoded = decode_base64(blob);
  if (!decoded) return refuse("the key is not base64");
  // uint32 big-endian length, then the type name.
  if (decoded->size() < 4 + type.size()) return refuse("the key is truncated");
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>((*decoded)[i]); };
  const uint32_t length = (uint32_t{byte(0)} << 24) | (uint32_t{byte(1)} << 16) |
                          (uint32_t{byte(2)} << 8) | uint32_t{byte(3)};
  if (length != type.size() || std::string_view(*decoded).substr(4, length) != type) {
    return refuse(fmt::format("its base64 blob does not hold a {} key", type));
  }
  return ok();
}

std::string domain_name(std::string_view allocation_id) {
  std::string d = "gp-" + std::string(allocation_id);
  std::ranges::replace(d, '_', '-');
  return d;
}

bool is_gpuplane_domain(std::string_view name) {
  if (name.size() <= 3 || name.size() > 64 || !name.starts_with("gp-")) return false;
  return std::ranges::all_of(name.substr(3), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

Result<std::string> render_domain_xml(const DomainSpec& spec) {
  GP_TRY_VOID(validate_domain_spec(spec));
  const bool pinned = spec.numa_node >= 0;

  std::string xml;
  xml += fmt::format("<domain type='{}'>\n", spec.hypervisor);
  xml += fmt::format("  <name>{}</name>\n", spec.name);
  xml += fmt::format("  <uuid>{}</uuid>\n", spec.uuid);
  xml += "  <metadata>\n";
  xml += fmt::format("    <gp:allocation xmlns:gp='{}' tenant='{}' project='{}' id='{}'/>\n",
                     kDomainMetadataNs, markup_escape(spec.tenant), markup_escape(spec.project),
                     markup_escape(spec.allocation));
  xml += "  </metadata>\n";
  xml += fmt::format("  <memory unit='MiB'>{}</memory>\n", spec.memory_mib);
  if (pinned) {
    xml +=
        fmt::format("  <vcpu placement='static' cpuset='{}'>{}</vcpu>\n", spec.cpuset, spec.vcpus);
    xml += "  <numatune>\n";
    xml += fmt::format("    <memory mode='strict' nodeset='{}'/>\n", spec.numa_node);
    xml += "  </numatune>\n";
  } else {
    xml += fmt::format("  <vcpu placement='static'>{}</vcpu>\n", spec.vcpus);
  }
  if (!spec.shares.empty()) {
    // virtiofsd maps the guest's memory: it must be shared, file-backed memory.
    xml += "  <memoryBacking>\n";
    xml += "    <source type='memfd'/>\n";
    xml += "    <access mode='shared'/>\n";
    xml += "  </memoryBacking>\n";
  }
  xml += spec.firmware == "efi" ? "  <os firmware='efi'>\n" : "  <os>\n";
  xml += "    <type arch='x86_64'>hvm</type>\n";
  xml += "    <boot dev='hd'/>\n";
  xml += "  </os>\n";
  xml += "  <features>\n";
  xml += "    <acpi/>\n";
  xml += "    <apic/>\n";
  xml += "  </features>\n";
  xml += "  <cpu mode='host-passthrough'/>\n";
  xml += "  <on_poweroff>destroy</on_poweroff>\n";
  xml += "  <on_reboot>restart</on_reboot>\n";
  xml += "  <on_crash>destroy</on_crash>\n";
  xml += "  <devices>\n";
  for (const DomainSpec::Disk& disk : spec.disks) render_disk(xml, disk);
  if (!spec.seed_iso.empty()) {
    xml += "    <disk type='file' device='cdrom'>\n";
    xml += "      <driver name='qemu' type='raw'/>\n";
    xml += fmt::format("      <source file='{}'/>\n", markup_escape(spec.seed_iso));
    xml += "      <target dev='sda' bus='sata'/>\n";
    xml += "      <readonly/>\n";
    xml += "    </disk>\n";
  }
  for (const DomainSpec::Share& share : spec.shares) {
    xml += "    <filesystem type='mount' accessmode='passthrough'>\n";
    xml += "      <driver type='virtiofs'/>\n";
    xml += fmt::format("      <source dir='{}'/>\n", markup_escape(share.source));
    xml += fmt::format("      <target dir='{}'/>\n", share.tag);
    xml += "    </filesystem>\n";
  }
  if (!spec.bridge.empty()) {
    xml += "    <interface type='bridge'>\n";
    if (!spec.mac.empty()) xml += fmt::format("      <mac address='{}'/>\n", spec.mac);
    xml += fmt::format("      <source bridge='{}'/>\n", spec.bridge);
    xml += "      <model type='virtio'/>\n";
    xml += "    </interface>\n";
  }
  for (const std::string& hostdev : spec.hostdevs) {
    const std::string address = *normalize_pci_address(hostdev);  // validated above
    xml += "    <hostdev mode='subsystem' type='pci' managed='yes'>\n";
    xml +=
        fmt::format("      <source>\n        {}\n      </source>\n", pci_source_address(address));
    xml += "    </hostdev>\n";
  }
  for (const DomainSpec::Mdev& mdev : spec.mdevs) {
    xml += "    <hostdev mode='subsystem' type='mdev' model='vfio-pci' managed='no'>\n";
    xml +=
        fmt::format("      <source>\n        <address uuid='{}'/>\n      </source>\n", mdev.uuid);
    xml += "    </hostdev>\n";
  }
  if (spec.console_log.empty()) {
    xml += "    <serial type='pty'/>\n";
  } else {
    // The serial console's output is also appended to a file the agent reads back when the
    // tenant asks to see it (POST .../vms/{vm}/console).
    xml += "    <serial type='pty'>\n";
    xml += fmt::format("      <log file='{}' append='on'/>\n", markup_escape(spec.console_log));
    xml += "    </serial>\n";
  }
  xml += "    <console type='pty'/>\n";
  xml += "  </devices>\n";
  if (!spec.security_model.empty()) {
    xml +=
        fmt::format("  <seclabel type='dynamic' model='{}' relabel='yes'/>\n", spec.security_model);
  }
  xml += "</domain>\n";
  return xml;
}

Result<DomainDevices> domain_devices(std::string_view xml) {
  xmlInitParser();
  if (xml.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return fail(Error::invalid("domain XML is too large"));
  }
  if (xml.empty()) return fail(Error::invalid("domain XML is empty"));
  xmlResetLastError();  // the error below must be this parse's, not an earlier one's
  // No network, no messages on stderr; entities are not substituted and no DTD is loaded.
  std::unique_ptr<xmlDoc, XmlDocFree> doc(
      xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "domain.xml", nullptr,
                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  if (doc == nullptr) {
    const xmlError* error = xmlGetLastError();
    std::string why = error != nullptr && error->message != nullptr ? error->message : "";
    while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
    return fail(
        Error::invalid(fmt::format("domain XML is malformed{}{}", why.empty() ? "" : ": ", why)));
  }
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (root == nullptr || !xml_named(root, "domain")) {
    return fail(Error::invalid("domain XML has no <domain> root element"));
  }
  DomainDevices out;
  const xmlNode* devices = xml_child(root, "devices");
  if (devices == nullptr) return out;
  for (const xmlNode* node = devices->children; node != nullptr; node = node->next) {
    if (!xml_named(node, "hostdev")) continue;
    const std::string type = xml_attribute(node, "type");
    if (type != "pci" && type != "mdev") continue;
    const xmlNode* source = xml_child(node, "source");
    const xmlNode* address = source != nullptr ? xml_child(source, "address") : nullptr;
    if (address == nullptr) {
      return fail(Error::invalid(
          fmt::format("domain XML has a {} hostdev without <source><address>", type)));
    }
    if (type == "pci") {
      out.pci.push_back(GP_TRY(pci_address_from_xml(address)));
    } else {
      const std::string uuid = xml_attribute(address, "uuid");
      if (!is_rfc4122_uuid(uuid)) {
        return fail(Error::invalid(
            fmt::format("domain XML has an mdev hostdev whose uuid \"{}\" is not a UUID", uuid)));
      }
      out.mdevs.push_back(uuid);
    }
  }
  return out;
}

Result<CloudInit> render_cloud_init(std::string_view instance_id, std::string_view hostname,
                                    const std::vector<std::string>& ssh_keys) {
  if (!is_name_token(instance_id, 128)) {
    return fail(Error::invalid(
        fmt::format("instance id \"{}\" must be 1 to 128 of A-Z a-z 0-9 _ . -", instance_id)));
  }
  if (!is_dns_label(hostname)) {
    return fail(Error::invalid(fmt::format(
        "hostname \"{}\" is not a DNS label (1 to 63 of A-Z a-z 0-9 -, not starting or ending "
        "with -)",
        hostname)));
  }
  for (std::size_t i = 0; i < ssh_keys.size(); ++i) {
    GP_TRY_VOID(check_ssh_public_key(ssh_keys[i], i));
  }

  CloudInit out;
  out.meta_data = fmt::format("instance-id: {}\nlocal-hostname: {}\n", yaml_quote(instance_id),
                              yaml_quote(hostname));
  out.user_data =
      "#cloud-config\n"
      "ssh_pwauth: false\n"
      "disable_root: true\n"
      "users:\n"
      "  - default\n";
  if (ssh_keys.empty()) {
    out.user_data += "ssh_authorized_keys: []\n";
  } else {
    // Top-level keys go to the image's default user.
    out.user_data += "ssh_authorized_keys:\n";
    for (const std::string& key : ssh_keys) out.user_data += "  - " + yaml_quote(key) + "\n";
  }
  return out;
}

}  // namespace gp::vm
