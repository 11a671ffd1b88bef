// The nftables renderer: a pure function from a node's tenant network state to an `nft -f`
// file that replaces table inet gpuplane in one transaction.
//
// Shape of the table: two base chains (input, forward) that let through every packet not
// touching a tenant interface, so other tables keep deciding about the node's own traffic;
// per tenant a `from_<t>` chain (packets arriving on its interfaces: anti-spoofing, allow
// within the tenant, drop towards other tenants, then its egress rules) and a `to_<t>` chain
// (packets from non-tenant interfaces towards it: its exposures). Both chains end in drop.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "network/internal.h"
#include "network/network.h"

namespace gp::network {

Result<void> validate_interface(std::string_view name) {
  bool good = !name.empty() && name.size() <= kMaxInterfaceName && name != "." && name != "..";
  for (char ch : name)
    good = good && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.');
  if (!good)
    return fail(Error::invalid(
        fmt::format("interface '{}': 1 to {} characters of letters, digits, '-', '_' or '.'", name,
                    kMaxInterfaceName)));
  return ok();
}

namespace {

// Tenant names are DNS labels (no '_'), so replacing '-' by '_' stays unique.
std::string ident(std::string_view tenant) {
  std::string out(tenant);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + fmt::format("\"{}\"", n);
  return out;
}

std::string ports_expr(const std::vector<PortRange>& ports) {
  auto one = [](const PortRange& r) {
    return r.first == r.last ? fmt::format("{}", r.first) : fmt::format("{}-{}", r.first, r.last);
  };
  if (ports.size() == 1) return one(ports[0]);
  std::string out;
  for (const auto& r : ports) out += (out.empty() ? "" : ", ") + one(r);
  return "{ " + out + " }";
}

// An address match: a /32 prints as a bare address.
std::string addr(const Ipv4Cidr& c) {
  return c.prefix == 32 ? format_ipv4(c.network) : to_string(c);
}

std::string comment(std::string_view text) {
  return text.empty() ? "" : fmt::format(" comment \"{}\"", text);
}

std::string egress_rule(const EgressRule& r) {
  std::string match = "ip daddr " + addr(r.destination);
  switch (r.protocol) {
    case Protocol::kTcp:
    case Protocol::kUdp:
      if (r.ports.empty())
        match += fmt::format(" meta l4proto {}", protocol_name(r.protocol));
      else
        match += fmt::format(" {} dport {}", protocol_name(r.protocol), ports_expr(r.ports));
      break;
    case Protocol::kIcmp:
      match += " meta l4proto icmp";
      break;
    case Protocol::kAny:
      break;
  }
  return match + " accept" + comment(r.description);
}

std::string exposure_rule(const Exposure& e, const Ipv4Cidr& tenant_cidr) {
  // CIDRs either nest or are disjoint: after sorting, drop any inside one already kept, so the
  // anonymous interval set never holds overlapping elements.
  std::vector<Ipv4Cidr> sorted = e.sources;
  std::sort(sorted.begin(), sorted.end(), [](const Ipv4Cidr& a, const Ipv4Cidr& b) {
    return std::pair(a.network, a.prefix) < std::pair(b.network, b.prefix);
  });
  std::vector<Ipv4Cidr> kept;
  for (const auto& s : sorted)
    if (kept.empty() || !kept.back().contains(s)) kept.push_back(s);
  std::string sources;
  for (const auto& s : kept) sources += (sources.empty() ? "" : ", ") + addr(s);
  return fmt::format("ip saddr {{ {} }} ip daddr {} {} dport {} accept{}", sources,
                     to_string(tenant_cidr), protocol_name(e.protocol), ports_expr(e.ports),
                     comment(e.description));
}

struct TenantView {
  const Segment* segment = nullptr;
  const TenantPolicy* policy = nullptr;
  std::vector<const Workload*> workloads;    // sorted by interface
  std::vector<const OverlayLink*> overlays;  // sorted by interface
  std::vector<std::string> interfaces;       // sorted
};

}  // namespace

std::string removal_ruleset() {
  return fmt::format("table {0} {1} {{}}\ndelete table {0} {1}\n", kTableFamily, kTableName);
}

Result<std::string> render_nftables(const NodeNetState& state) {
  GP_TRY_VOID(validate_segments(state.segments));
  std::map<std::string, TenantView, std::less<>> tenants;  // ordered: deterministic output
  std::vector<Ipv4Cidr> all_cidrs;
  for (const auto& s : state.segments) {
    GP_TRY_VOID(validate_dns_label("tenant", s.tenant));
    tenants[s.tenant].segment = &s;
    all_cidrs.push_back(s.cidr);
  }
  std::sort(all_cidrs.begin(), all_cidrs.end());
  auto tenant_of = [&](std::string_view what, std::string_view tenant) -> Result<TenantView*> {
    auto it = tenants.find(tenant);
    if (it == tenants.end())
      return fail(Error::invalid(fmt::format("{}: tenant '{}' has no segment", what, tenant)));
    return &it->second;
  };
  for (const auto& p : state.policies) {
    auto* t = GP_TRY(tenant_of("policy", p.tenant));
    if (t->policy)
      return fail(Error::invalid(fmt::format("tenant '{}' has two policies", p.tenant)));
    GP_TRY_VOID(validate_policy_rules(p, all_cidrs));
    t->policy = &p;
  }
  std::set<std::string, std::less<>> interfaces;
  std::set<uint32_t> addresses;
  auto claim = [&](std::string_view iface) -> Result<void> {
    GP_TRY_VOID(validate_interface(iface));
    if (!interfaces.emplace(iface).second)
      return fail(Error::invalid(fmt::format("interface '{}' is attached twice", iface)));
    return ok();
  };
  for (const auto& w : state.workloads) {
    GP_TRY_VOID(validate_dns_label("workload name", w.name));
    std::string what = fmt::format("workload '{}'", w.name);
    auto* t = GP_TRY(tenant_of(what, w.tenant));
    GP_TRY_VOID(claim(w.interface));
    if (!t->segment->cidr.contains(w.address))
      return fail(Error::invalid(fmt::format("{}: address {} is outside tenant '{}' network {}",
                                             what, format_ipv4(w.address), w.tenant,
                                             to_string(t->segment->cidr))));
    if (!addresses.insert(w.address).second)
      return fail(Error::invalid(
          fmt::format("{}: address {} is used twice", what, format_ipv4(w.address))));
    t->workloads.push_back(&w);
    t->interfaces.push_back(w.interface);
  }
  for (const auto& o : state.overlays) {
    auto* t = GP_TRY(tenant_of(fmt::format("overlay '{}'", o.interface), o.tenant));
    GP_TRY_VOID(claim(o.interface));
    t->overlays.push_back(&o);
    t->interfaces.push_back(o.interface);
  }
  for (auto& [name, t] : tenants) {
    std::sort(t.workloads.begin(), t.workloads.end(),
              [](auto* a, auto* b) { return a->interface < b->interface; });
    std::sort(t.overlays.begin(), t.overlays.end(),
              [](auto* a, auto* b) { return a->interface < b->interface; });
    std::sort(t.interfaces.begin(), t.interfaces.end());
  }

  std::string out;
  auto line = [&](int indent, std::string_view text) {
    out.append(indent, '\t');
    out += text;
    out += '\n';
  };
  line(0, "# gpuplane tenant network isolation for this node, rendered by the control plane.");
  line(0, "# The agent replaces this table as a whole (one nft transaction); do not edit.");
  out += removal_ruleset();
  line(0, fmt::format("table {} {} {{", kTableFamily, kTableName));

  // Sets: every tenant CIDR, every tenant interface, and each tenant's interfaces.
  line(1, "set tenant_cidrs {");
  line(2, "type ipv4_addr");
  line(2, "flags interval");
  if (!all_cidrs.empty()) {
    std::string list;
    for (const auto& c : all_cidrs) list += (list.empty() ? "" : ", ") + to_string(c);
    line(2, "elements = { " + list + " }");
  }
  line(1, "}");
  line(0, "");
  line(1, "set tenant_ifaces {");
  line(2, "type ifname");
  if (!interfaces.empty())
    line(2, "elements = { " +
                quoted_list(std::vector<std::string>(interfaces.begin(), interfaces.end())) + " }");
  line(1, "}");
  for (const auto& [name, t] : tenants) {
    if (t.interfaces.empty()) continue;
    line(0, "");
    line(1, fmt::format("set ifaces_{} {{", ident(name)));
    line(2, "type ifname");
    line(2, "elements = { " + quoted_list(t.interfaces) + " }");
    line(1, "}");
  }

  // The node itself is not reachable from tenant workloads (replies to its own traffic are).
  line(0, "");
  line(1, "chain input {");
  line(2, "type filter hook input priority filter; policy accept;");
  line(2, "iifname != @tenant_ifaces accept");
  line(2, "ct state established,related accept");
  line(2, "drop");
  line(1, "}");

  line(0, "");
  line(1, "chain forward {");
  line(2, "type filter hook forward priority filter; policy accept;");
  line(2, "iifname != @tenant_ifaces oifname != @tenant_ifaces accept");
  line(2, "ct state established,related accept");
  line(2, "ct state invalid drop");
  std::vector<std::string> from_map, to_map;
  for (const auto& [name, t] : tenants)
    for (const auto& iface : t.interfaces) {
      from_map.push_back(fmt::format("\"{}\" : jump from_{}", iface, ident(name)));
      to_map.push_back(fmt::format("\"{}\" : jump to_{}", iface, ident(name)));
    }
  std::sort(from_map.begin(), from_map.end());
  std::sort(to_map.begin(), to_map.end());
  auto vmap = [&](std::string_view key, const std::vector<std::string>& entries) {
    if (entries.empty()) return;
    line(2, fmt::format("{} vmap {{", key));
    for (size_t i = 0; i < entries.size(); ++i)
      line(3, entries[i] + (i + 1 < entries.size() ? "," : ""));
    line(2, "}");
  };
  vmap("iifname", from_map);
  vmap("oifname", to_map);
  line(2, "drop");
  line(1, "}");

  for (const auto& [name, t] : tenants) {
    if (t.interfaces.empty()) continue;
    const auto cidr = to_string(t.segment->cidr);
    line(0, "");
    line(1, fmt::format("chain from_{} {{", ident(name)));
    for (const auto* w : t.workloads)
      line(2, fmt::format("iifname \"{}\" ip saddr != {} drop comment \"workload {}\"",
                          w->interface, format_ipv4(w->address), w->name));
    for (const auto* o : t.overlays)
      line(2, fmt::format("iifname \"{}\" ip saddr != {} drop comment \"overlay\"", o->interface,
                          cidr));
    line(2, fmt::format("oifname @tenant_ifaces oifname != @ifaces_{} drop", ident(name)));
    line(2, fmt::format("ip daddr @tenant_cidrs ip daddr != {} drop", cidr));
    line(2, fmt::format("ip daddr {} accept comment \"within tenant {}\"", cidr, name));
    if (t.policy)
      for (const auto& r : t.policy->egress) line(2, egress_rule(r));
    line(2, "drop");
    line(1, "}");

    line(0, "");
    line(1, fmt::format("chain to_{} {{", ident(name)));
    line(2, "ip saddr @tenant_cidrs drop");
    if (t.policy)
      for (const auto& e : t.policy->exposures) line(2, exposure_rule(e, t.segment->cidr));
    line(2, "drop");
    line(1, "}");
  }
  line(0, "}");
  return out;
}

}  // namespace gp::network
