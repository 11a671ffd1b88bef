// Renders MIG layouts as an NVIDIA mig-parted config (declared in fleet.h). Plain text
// rather than a YAML library: the format is small and fixed, and golden tests pin it byte for
// byte.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "fleet/fleet.h"

namespace gp::fleet {
namespace {

// A YAML double-quoted scalar; escapes what YAML requires (quote, backslash, controls).
std::string yaml_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

// A mapping key: plain when no YAML 1.1 reader (mig-parted uses Go's yaml) could take it for
// anything but a string, else quoted.
std::string yaml_key(std::string_view key) {
  auto plain_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  };
  std::string lower;
  for (char c : key)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  constexpr std::string_view kReserved[] = {"y",   "n",    "yes",   "no",  "on",
                                            "off", "true", "false", "null"};
  const bool plain = !key.empty() && std::isalpha(static_cast<unsigned char>(key.front())) &&
                     std::ranges::all_of(key, plain_char) &&
                     std::ranges::find(kReserved, lower) == std::end(kReserved);
  return plain ? std::string(key) : yaml_quoted(key);
}

}  // namespace

std::string to_mig_parted_yaml(const std::string& config_name,
                               const std::vector<MigPartedDevices>& devices) {
  std::string out = "version: v1\nmig-configs:\n";
  out += fmt::format("  {}:\n", yaml_key(config_name));
  for (const auto& [indices, layout] : devices) {
    std::vector<int> sorted = indices;
    std::ranges::sort(sorted);
    std::vector<std::pair<std::string, int>> counts;  // (profile, instances)
    for (const vocab::PlacedInstance& instance : layout) {
      auto it = std::ranges::find(counts, instance.profile, &std::pair<std::string, int>::first);
      if (it == counts.end()) {
        counts.emplace_back(instance.profile, 1);
      } else {
        ++it->second;
      }
    }
    std::ranges::sort(counts);
    out += fmt::format("    - devices: [{}]\n", fmt::join(sorted, ", "));
    out += "      mig-enabled: true\n";
    if (counts.empty()) {
      out += "      mig-devices: {}\n";
      continue;
    }
    out += "      mig-devices:\n";
    for (const auto& [profile, count] : counts) {
      out += fmt::format("        {}: {}\n", yaml_quoted(profile), count);
    }
  }
  return out;
}

}  // namespace gp::fleet
