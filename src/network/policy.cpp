// Tenant network policy: validation and strict JSON reading/writing.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "network/internal.h"
#include "network/network.h"

namespace gp::network {

std::string_view protocol_name(Protocol p) { return enum_name(p, kProtocols); }

std::optional<Protocol> parse_protocol(std::string_view name) {
  return parse_enum<Protocol>(name, kProtocols);
}

namespace {

Result<void> validate_description(std::string_view what, std::string_view d) {
  if (d.size() > kMaxDescription)
    return fail(Error::invalid(
        fmt::format("{}: description longer than {} characters", what, kMaxDescription)));
  for (char ch : d)
    if (ch < 0x20 || ch > 0x7E || ch == '"' || ch == '\\')
      return fail(Error::invalid(fmt::format(
          "{}: description may hold printable ASCII only, without quotes or backslashes", what)));
  return ok();
}

Result<void> validate_ports(std::string_view what, const std::vector<PortRange>& ports) {
  if (ports.size() > kMaxPortRanges)
    return fail(Error::invalid(fmt::format("{}: more than {} port ranges", what, kMaxPortRanges)));
  for (const auto& r : ports)
    if (r.first == 0 || r.first > r.last)
      return fail(Error::invalid(fmt::format(
          "{}: port range {}-{} is invalid (1 <= first <= last <= 65535)", what, r.first, r.last)));
  return ok();
}

Result<void> outside_tenants(std::string_view what, const Ipv4Cidr& cidr,
                             std::span<const Ipv4Cidr> forbidden) {
  for (const auto& f : forbidden)
    if (cidr.overlaps(f))
      return fail(Error::invalid(
          fmt::format("{}: {} overlaps the tenant network {}; traffic between tenants is never "
                      "allowed",
                      what, to_string(cidr), to_string(f))));
  return ok();
}

}  // namespace

Result<void> validate_policy(const TenantPolicy& p, const Ipv4Cidr& supernet) {
  Ipv4Cidr forbidden[] = {supernet};
  return validate_policy_rules(p, forbidden);
}

Result<void> validate_policy_rules(const TenantPolicy& p, std::span<const Ipv4Cidr> forbidden) {
  GP_TRY_VOID(validate_dns_label("tenant", p.tenant));
  if (p.egress.size() > kMaxRules)
    return fail(Error::invalid(fmt::format("more than {} egress rules", kMaxRules)));
  if (p.exposures.size() > kMaxRules)
    return fail(Error::invalid(fmt::format("more than {} exposures", kMaxRules)));
  for (size_t i = 0; i < p.egress.size(); ++i) {
    const auto& r = p.egress[i];
    std::string what = fmt::format("egress[{}]", i);
    GP_TRY_VOID(validate_description(what, r.description));
    GP_TRY_VOID(validate_ports(what, r.ports));
    if (!r.ports.empty() && r.protocol != Protocol::kTcp && r.protocol != Protocol::kUdp)
      return fail(Error::invalid(fmt::format("{}: ports need protocol tcp or udp, not {}", what,
                                             protocol_name(r.protocol))));
    GP_TRY_VOID(outside_tenants(what, r.destination, forbidden));
  }
  for (size_t i = 0; i < p.exposures.size(); ++i) {
    const auto& e = p.exposures[i];
    std::string what = fmt::format("exposures[{}]", i);
    GP_TRY_VOID(validate_description(what, e.description));
    if (e.protocol != Protocol::kTcp && e.protocol != Protocol::kUdp)
      return fail(Error::invalid(fmt::format("{}: protocol must be tcp or udp", what)));
    if (e.ports.empty()) return fail(Error::invalid(fmt::format("{}: ports are required", what)));
    GP_TRY_VOID(validate_ports(what, e.ports));
    if (e.sources.empty())
      return fail(Error::invalid(
          fmt::format("{}: sources are required (0.0.0.0/0 exposes to everyone)", what)));
    if (e.sources.size() > kMaxSources)
      return fail(Error::invalid(fmt::format("{}: more than {} sources", what, kMaxSources)));
    for (const auto& s : e.sources) {
      // 0.0.0.0/0 contains the supernet; it means "anyone outside the fleet", and the ruleset
      // drops every tenant source before exposures apply.
      if (s.prefix == 0) continue;
      GP_TRY_VOID(outside_tenants(what, s, forbidden));
    }
  }
  return ok();
}

namespace {

Result<PortRange> parse_port_range(const Json& v, std::string_view what) {
  auto bad = [&] {
    return fail(Error::invalid(
        fmt::format("{}: ports must be integers 1-65535 or \"first-last\" strings", what)));
  };
  if (v.is_number_integer()) {
    auto n = v.get<int64_t>();
    if (n < 1 || n > 65535) return bad();
    return PortRange{static_cast<uint16_t>(n), static_cast<uint16_t>(n)};
  }
  if (!v.is_string()) return bad();
  auto s = v.get_ref<const std::string&>();
  auto dash = s.find('-');
  auto number = [](std::string_view t) -> std::optional<uint16_t> {
    unsigned n = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size() || n < 1 || n > 65535)
      return std::nullopt;
    return static_cast<uint16_t>(n);
  };
  auto first = number(std::string_view(s).substr(0, dash));
  auto last = dash == std::string::npos ? first : number(std::string_view(s).substr(dash + 1));
  if (!first || !last) return bad();
  if (*first > *last)
    return fail(Error::invalid(fmt::format("{}: port range {} is reversed", what, s)));
  return PortRange{*first, *last};
}

Result<std::vector<PortRange>> read_ports(const Json* arr, std::string_view what) {
  std::vector<PortRange> out;
  if (!arr) return out;
  if (arr->size() > kMaxPortRanges)
    return fail(Error::invalid(fmt::format("{}: more than {} port ranges", what, kMaxPortRanges)));
  for (const auto& v : *arr) out.push_back(GP_TRY(parse_port_range(v, what)));
  return out;
}

Result<Protocol> protocol_field(std::string_view what, std::string_view name) {
  auto p = parse_protocol(name);
  if (!p)
    return fail(
        Error::invalid(fmt::format("{}: field 'protocol': must be tcp, udp, icmp or any", what)));
  return *p;
}

}  // namespace

Result<TenantPolicy> policy_from_json(const Json& j, std::string_view tenant,
                                      const Ipv4Cidr& supernet) {
  TenantPolicy p{.tenant = std::string(tenant)};
  ObjectReader body(j, "network policy");
  const Json* egress = body.optional_array("egress");
  const Json* exposures = body.optional_array("exposures");
  GP_TRY_VOID(body.finish());
  if (egress && egress->size() > kMaxRules)
    return fail(Error::invalid(fmt::format("more than {} egress rules", kMaxRules)));
  if (exposures && exposures->size() > kMaxRules)
    return fail(Error::invalid(fmt::format("more than {} exposures", kMaxRules)));
  for (size_t i = 0; egress && i < egress->size(); ++i) {
    std::string what = fmt::format("egress[{}]", i);
    ObjectReader r((*egress)[i], what);
    EgressRule rule;
    auto dest = r.string("destination", 18);
    auto protocol = r.string("protocol", 8);
    const Json* ports = r.optional_array("ports");
    rule.description = r.optional_string("description", kMaxDescription).value_or("");
    GP_TRY_VOID(r.finish());
    rule.protocol = GP_TRY(protocol_field(what, protocol));
    auto cidr = parse_cidr(dest);
    if (!cidr) return fail(Error::invalid(what + ": destination " + cidr.error().message));
    rule.destination = *cidr;
    rule.ports = GP_TRY(read_ports(ports, what));
    p.egress.push_back(std::move(rule));
  }
  for (size_t i = 0; exposures && i < exposures->size(); ++i) {
    std::string what = fmt::format("exposures[{}]", i);
    ObjectReader r((*exposures)[i], what);
    Exposure e;
    auto protocol = r.string("protocol", 8);
    const Json* ports = r.optional_array("ports");
    auto sources = r.optional_string_array("sources", kMaxSources, 18);
    e.description = r.optional_string("description", kMaxDescription).value_or("");
    GP_TRY_VOID(r.finish());
    e.protocol = GP_TRY(protocol_field(what, protocol));
    e.ports = GP_TRY(read_ports(ports, what));
    for (const auto& s : sources.value_or(std::vector<std::string>{})) {
      auto cidr = parse_cidr(s);
      if (!cidr) return fail(Error::invalid(what + ": source " + cidr.error().message));
      e.sources.push_back(*cidr);
    }
    p.exposures.push_back(std::move(e));
  }
  GP_TRY_VOID(validate_policy(p, supernet));
  return p;
}

bool egress_allows(const TenantPolicy& policy, uint32_t address, Protocol protocol, uint16_t port) {
  // As the rendered rule matches (nftables.cpp, egress_rule): protocol any takes every packet.
  return std::ranges::any_of(policy.egress, [&](const EgressRule& r) {
    if (!r.destination.contains(address)) return false;
    if (r.protocol == Protocol::kAny) return true;
    return r.protocol == protocol &&
           (r.ports.empty() || std::ranges::any_of(r.ports, [port](const PortRange& p) {
              return p.first <= port && port <= p.last;
            }));
  });
}

Json port_range_json(const PortRange& r) {
  if (r.first == r.last) return r.first;
  return fmt::format("{}-{}", r.first, r.last);
}

Json to_json(const TenantPolicy& p) {
  Json j = json_of_fields(p);
  j["tenant"] = p.tenant;
  return j;
}

}  // namespace gp::network
