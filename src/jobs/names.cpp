// What a member resolves: its /etc/hosts and /etc/resolv.conf (jobs.h, "Names").
#include <fmt/format.h>

#include <sstream>

#include "jobs/jobs.h"
#include "network/network.h"

namespace gp::jobs {

std::string member_hostname(std::string_view job_name, int rank) {
  const std::string suffix = fmt::format("-{}", rank);
  std::string_view name = job_name.substr(0, 63 - std::min<size_t>(63, suffix.size()));
  while (name.ends_with('-')) name.remove_suffix(1);  // a label never has "--<rank>" at its end
  return fmt::format("{}{}", name, suffix);
}

std::string render_hosts(const MemberNames& names) {
  std::string out = "# Written by the gpuplane agent: this member and the members of its job.\n";
  out += "127.0.0.1\tlocalhost\n::1\tlocalhost\n";
  bool self_listed = false;
  for (const auto& h : names.hosts) {
    out += fmt::format("{}\t{}\n", h.address, h.name);
    self_listed = self_listed || h.name == names.hostname;
  }
  // Without an address of its own (no tenant network), its name is its loopback.
  if (!self_listed && !names.hostname.empty())
    out += fmt::format("127.0.1.1\t{}\n", names.hostname);
  return out;
}

std::string render_resolv_conf(const MemberNames& names) {
  if (names.nameservers.empty())
    return "# Written by the gpuplane agent. No nameserver: the tenant's network policy lets its\n"
           "# workloads reach none of this node's resolvers (an egress rule for UDP port 53).\n"
           "options attempts:1 timeout:1\n";
  std::string out =
      "# Written by the gpuplane agent: the node's resolvers that the tenant's network policy\n"
      "# lets its workloads reach.\n";
  for (const auto& ns : names.nameservers) out += fmt::format("nameserver {}\n", ns);
  return out;
}

std::vector<std::string> resolv_conf_nameservers(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, address;
    if (!(words >> key >> address) || key != "nameserver") continue;
    auto ip = network::parse_ipv4(address);
    if (!ip || (*ip >> 24) == 127) continue;  // IPv6, malformed or loopback
    out.push_back(address);
  }
  return out;
}

}  // namespace gp::jobs
