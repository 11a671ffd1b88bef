// Workloads attached to a node and a tenant's nodes joined by its VXLAN (network.h, "Links").
#include <fmt/format.h>

#include <set>

#include "common/subprocess.h"
#include "network/internal.h"
#include "network/network.h"

namespace gp::network {

namespace {

std::vector<std::string> sysctl(const std::string& key, std::string_view value) {
  return {"sysctl", "-q", "-w", fmt::format("{}={}", key, value)};
}

}  // namespace

std::string overlay_interface(uint32_t vni) { return fmt::format("gpvx{}", vni); }

std::string vtep_mac(uint32_t underlay) {
  // 02: locally administered, unicast. The four address bytes make it unique on the overlay,
  // whose members are nodes with distinct underlay addresses.
  return fmt::format("02:{:02x}:{:02x}:{:02x}:{:02x}:00", (underlay >> 24) & 0xff,
                     (underlay >> 16) & 0xff, (underlay >> 8) & 0xff, underlay & 0xff);
}

Result<Commands> plan_overlay(const TenantOverlay& o) {
  if (o.vni == 0 || o.vni > kMaxVni)
    return fail(Error::invalid(
        fmt::format("tenant {}: VNI {} is outside 1..{}", o.tenant, o.vni, kMaxVni)));
  if (o.local == 0) return fail(Error::invalid("overlay: no underlay address for this node"));
  const std::string dev = overlay_interface(o.vni);
  Commands c = {
      {"ip", "link", "add", dev, "address", vtep_mac(o.local), "type", "vxlan", "id",
       std::to_string(o.vni), "local", format_ipv4(o.local), "dstport", std::to_string(kVxlanPort),
       "nolearning"},
      {"ip", "link", "set", dev, "up"},
  };
  std::set<uint32_t> nodes, workloads;
  for (const auto& p : o.peers) {
    if (p.node == o.local)
      return fail(Error::invalid(fmt::format("overlay {}: workload {} is on this node, not a peer",
                                             dev, format_ipv4(p.workload))));
    if (!workloads.insert(p.workload).second)
      return fail(Error::invalid(
          fmt::format("overlay {}: workload {} is listed twice", dev, format_ipv4(p.workload))));
    const std::string node = format_ipv4(p.node);
    if (nodes.insert(p.node).second) {
      c.push_back({"bridge", "fdb", "append", vtep_mac(p.node), "dev", dev, "dst", node});
      c.push_back({"ip", "neigh", "replace", node, "lladdr", vtep_mac(p.node), "dev", dev, "nud",
                   "permanent"});
    }
    c.push_back({"ip", "route", "replace", format_ipv4(p.workload) + "/32", "via", node, "dev", dev,
                 "onlink"});
  }
  return c;
}

Commands plan_overlay_removal(uint32_t vni) {
  return {{"ip", "link", "delete", overlay_interface(vni)}};
}

Result<Commands> plan_attach(const Workload& w, std::string_view netns) {
  GP_TRY_VOID(validate_interface(w.interface));
  if (netns.empty() || netns.find('/') != std::string_view::npos)
    return fail(Error::invalid(fmt::format("workload {}: the namespace must be a name", w.name)));
  const std::string ns(netns), address = format_ipv4(w.address);
  const std::string conf = "net.ipv4.conf." + w.interface;
  return Commands{
      {"ip", "link", "add", w.interface, "type", "veth", "peer", "name", "eth0", "netns", ns},
      {"ip", "addr", "add", std::string(kNodeGateway) + "/32", "dev", w.interface},
      sysctl(conf + ".proxy_arp", "1"),
      sysctl("net.ipv4.neigh." + w.interface + ".proxy_delay", "0"),
      {"ip", "link", "set", w.interface, "up"},
      {"ip", "route", "replace", address + "/32", "dev", w.interface},
      {"ip", "-n", ns, "addr", "add", address + "/32", "dev", "eth0"},
      {"ip", "-n", ns, "link", "set", "eth0", "up"},
      {"ip", "-n", ns, "route", "add", "default", "dev", "eth0"},
  };
}

Commands plan_detach(const Workload& w) { return {{"ip", "link", "delete", w.interface}}; }

Result<void> run_link_commands(const Commands& commands, const std::vector<std::string>& prefix) {
  for (const auto& cmd : commands) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    auto r = GP_TRY(run_process(argv, "", std::chrono::seconds(30)));
    if (r.exit_code != 0) {
      std::string line;
      for (const auto& a : cmd) line += (line.empty() ? "" : " ") + a;
      std::string_view err = r.err;
      while (!err.empty() && err.back() == '\n') err.remove_suffix(1);
      return fail(Error::unavailable(fmt::format("{}: exit {}: {}", line, r.exit_code, err)));
    }
  }
  return ok();
}

}  // namespace gp::network
