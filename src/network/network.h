// Network: each tenant's private segment (a VXLAN VNI and an IPv4 CIDR from configured pools,
// never overlapping), its policy (allow within the tenant, deny across tenants, declared egress
// and exposures), and the nftables ruleset a node agent applies to enforce it. Everything but
// apply_ruleset/remove_ruleset/list_ruleset is pure. Public header of the network module.
#pragma once

#include <array>
#include <chrono>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/record.h"
#include "common/result.h"

namespace gp::network {

// ---- IPv4 addresses and CIDRs (host byte order) ----

Result<uint32_t> parse_ipv4(std::string_view text);  // strict dotted quad, no leading zeros
std::string format_ipv4(uint32_t address);

struct Ipv4Cidr {
  uint32_t network = 0;  // host bits are zero
  uint8_t prefix = 0;    // 0..32

  uint64_t size() const { return uint64_t{1} << (32 - prefix); }
  uint32_t first() const { return network; }
  uint32_t last() const { return static_cast<uint32_t>(network + (size() - 1)); }
  bool contains(uint32_t address) const { return address >= first() && address <= last(); }
  bool contains(const Ipv4Cidr& other) const {
    return other.first() >= first() && other.last() <= last();
  }
  bool overlaps(const Ipv4Cidr& other) const {
    return first() <= other.last() && other.first() <= last();
  }
  auto operator<=>(const Ipv4Cidr&) const = default;
};

// "a.b.c.d/n" (host bits must be zero) or a bare address, read as /32.
Result<Ipv4Cidr> parse_cidr(std::string_view text);
std::string to_string(const Ipv4Cidr& cidr);  // "10.0.0.0/24"; a /32 prints with its prefix

// ---- Tenant segments: VNI + CIDR allocation ----

constexpr uint32_t kMaxVni = 0xFFFFFF;  // VXLAN network identifiers are 24 bits

struct SegmentPoolConfig {
  uint32_t vni_first = 4096;
  uint32_t vni_last = 65535;
  Ipv4Cidr supernet{0x0AF00000, 12};  // 10.240.0.0/12
  uint8_t prefix_length = 24;         // every tenant CIDR has this prefix
};
Result<void> validate(const SegmentPoolConfig& config);

// Shown as {"vni", "cidr"} (Fields<Segment> below): the tenant is the one the reply is about.
struct Segment {
  std::string tenant;
  uint32_t vni = 0;
  Ipv4Cidr cidr;
  bool operator==(const Segment&) const = default;
};

// A new segment for `tenant`: the lowest free VNI in the range and the lowest free CIDR of the
// configured prefix inside the supernet that overlaps no existing segment (whatever its
// prefix). Errors: invalid config or tenant name, conflict when the tenant already has a
// segment, resource_exhausted when no VNI or no CIDR is left.
Result<Segment> allocate_segment(const SegmentPoolConfig& config, std::span<const Segment> existing,
                                 std::string_view tenant);
// `existing` without the tenant's segment; not_found when it has none. Its VNI and CIDR are
// free for the next allocation.
Result<std::vector<Segment>> release_segment(std::span<const Segment> existing,
                                             std::string_view tenant);
// Checks a set of segments for duplicate tenants, duplicate VNIs and overlapping CIDRs.
Result<void> validate_segments(std::span<const Segment> segments);

// ---- Tenant policy ----
// Within a tenant everything is allowed; across tenants everything is denied. A tenant adds
// egress rules (its workloads may open connections to these destinations) and exposures (these
// sources may open connections to its workloads). Neither may name addresses inside the tenant
// supernet: cross-tenant traffic is never allowed by policy.

enum class Protocol : uint8_t { kTcp, kUdp, kIcmp, kAny };
// Each Protocol's name, at its value's index.
inline constexpr std::array<std::string_view, 4> kProtocols = {"tcp", "udp", "icmp", "any"};
std::string_view protocol_name(Protocol p);  // "tcp", "udp", "icmp", "any"
std::optional<Protocol> parse_protocol(std::string_view name);

struct PortRange {
  uint16_t first = 0;
  uint16_t last = 0;
  bool operator==(const PortRange&) const = default;
};
// A single port as its number (443), a range as "first-last" ("8000-8099").
Json port_range_json(const PortRange& r);

struct EgressRule {
  Ipv4Cidr destination;
  Protocol protocol = Protocol::kTcp;
  std::vector<PortRange> ports;  // tcp/udp only; empty means every port
  std::string description;
  bool operator==(const EgressRule&) const = default;
};

struct Exposure {
  Protocol protocol = Protocol::kTcp;  // tcp or udp
  std::vector<PortRange> ports;        // at least one
  std::vector<Ipv4Cidr> sources;       // at least one; 0.0.0.0/0 for anyone outside the fleet
  std::string description;
  bool operator==(const Exposure&) const = default;
};

// Shown as {"egress", "exposures"} (Fields<TenantPolicy> below): the tenant is the one the
// policy is stored under, or the reply is about.
struct TenantPolicy {
  std::string tenant;
  std::vector<EgressRule> egress;
  std::vector<Exposure> exposures;
  bool operator==(const TenantPolicy&) const = default;
};

constexpr size_t kMaxRules = 64;        // egress rules, and exposures, per tenant
constexpr size_t kMaxPortRanges = 32;   // per rule
constexpr size_t kMaxSources = 32;      // per exposure
constexpr size_t kMaxDescription = 96;  // printable ASCII without quotes or backslashes

// Every rule well-formed; no destination or source overlapping `supernet` (the tenant pool).
Result<void> validate_policy(const TenantPolicy& policy, const Ipv4Cidr& supernet);
// Strict JSON: {"egress": [{"destination", "protocol", "ports", "description"}],
// "exposures": [{"protocol", "ports", "sources", "description"}]}; ports are integers or
// "first-last" strings. The tenant comes from the caller (the URL), never from the body.
Result<TenantPolicy> policy_from_json(const Json& j, std::string_view tenant,
                                      const Ipv4Cidr& supernet);
// The policy with its tenant: json_of_fields(policy) (what is stored, and what replies show) and
// "tenant".
Json to_json(const TenantPolicy& policy);
// Whether the tenant's egress rules let its workloads open a `protocol` connection to
// `address`:`port`, as the rendered ruleset decides (a rule of protocol any takes every packet
// to its destination, one without ports every port). Within the tenant's own CIDR the answer does
// not come from here: that is always allowed.
bool egress_allows(const TenantPolicy& policy, uint32_t address, Protocol protocol, uint16_t port);

// ---- One node's state and its nftables ruleset ----

// A tenant workload attached to the node by a veth pair: `interface` is the node-side end;
// the workload sends from `address` only (anything else is dropped as spoofed).
struct Workload {
  std::string name;
  std::string tenant;
  std::string interface;
  uint32_t address = 0;
};

// A tenant's overlay link (its VXLAN device towards other nodes): traffic on it belongs to the
// tenant and may come from anywhere in the tenant's CIDR.
struct OverlayLink {
  std::string tenant;
  std::string interface;
};

struct NodeNetState {
  std::vector<Segment> segments;       // every live tenant segment (cross-tenant drops use all)
  std::vector<TenantPolicy> policies;  // tenants without one get the default (no egress)
  std::vector<Workload> workloads;
  std::vector<OverlayLink> overlays;
};

constexpr std::string_view kTableFamily = "inet";
constexpr std::string_view kTableName = "gpuplane";

// A complete `nft -f` file that atomically replaces table inet gpuplane (and touches no other
// table): tenant traffic is allowed within a tenant, denied across tenants, allowed out by the
// tenant's egress rules and in by its exposures, dropped otherwise; traffic of interfaces that
// belong to no tenant is left to other tables. Deterministic: the same state always renders
// the same text. Errors on invalid names, addresses outside the tenant's CIDR, interfaces used
// twice, workloads of tenants without a segment, invalid policies or overlapping segments.
Result<std::string> render_nftables(const NodeNetState& state);

// Removes the table (and only it); applying it when the table is absent is not an error.
std::string removal_ruleset();

// ---- Applying (the agent's side; runs the real nft) ----

struct NftCommand {
  // The nft invocation; tests prefix it with `ip netns exec NAME`.
  std::vector<std::string> argv{"nft"};
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

// Runs `nft -f -` with `ruleset` on standard input. nft applies a file as one transaction, so
// on error nothing changed; the error carries nft's message.
Result<void> apply_ruleset(std::string_view ruleset, const NftCommand& nft = {});
// Applies removal_ruleset().
Result<void> remove_ruleset(const NftCommand& nft = {});
// `nft -c -f -`: checks a ruleset against the kernel without changing anything.
Result<void> check_ruleset(std::string_view ruleset, const NftCommand& nft = {});
// `nft list table inet gpuplane`; not_found when the table does not exist.
Result<std::string> list_ruleset(const NftCommand& nft = {});

// ---- Links: workloads attached to a node, a tenant's nodes joined by its VXLAN ----
// Routed, without bridges. A workload (a job member's network namespace) is joined to the node
// by a veth pair: its end is eth0 with the workload's /32 and a default route through it; the
// node's end has 169.254.1.1/32, answers ARP for what it routes (proxy_arp) and carries a /32
// route to the workload. Each tenant present on a node has one VXLAN device, gpvx<vni>, with the
// tenant's VNI, whose MAC is derived from the node's underlay address (vtep_mac): the node
// routes every workload of the tenant on another node through it, `via` that node's underlay
// address (onlink), with a permanent neighbour entry and a forwarding entry naming the node. No
// ARP and no learning cross the overlay, so the node's strict reverse-path filter holds, and a
// tenant's VXLAN carries only what the control plane told its nodes. Which traffic may use these
// routes is the ruleset's to decide (render_nftables: a VXLAN device is the tenant's
// OverlayLink). These functions plan the `ip` and `sysctl` command lines; run_link_commands
// runs them.

inline constexpr std::string_view kNodeGateway = "169.254.1.1";
inline constexpr uint16_t kVxlanPort = 4789;

std::string overlay_interface(uint32_t vni);  // "gpvx<vni>"
std::string vtep_mac(uint32_t underlay);      // "02:aa:bb:cc:dd:00" for a.b.c.d

// A workload of the tenant on another node.
struct OverlayPeer {
  uint32_t workload = 0;  // its address
  uint32_t node = 0;      // that node's underlay address
};

struct TenantOverlay {
  std::string tenant;
  uint32_t vni = 0;
  uint32_t local = 0;              // this node's underlay address
  std::vector<OverlayPeer> peers;  // the tenant's workloads on the other nodes
};

using Commands = std::vector<std::vector<std::string>>;

// Creates the tenant's VXLAN device and its routes to the peers. invalid_argument on a VNI
// outside 1..16777215 or a peer on this node.
Result<Commands> plan_overlay(const TenantOverlay& overlay);
Commands plan_overlay_removal(uint32_t vni);  // deleting the device takes its routes with it
// Joins the workload's namespace `netns` (a name under /run/netns) to the node: the veth pair,
// addresses, routes. The workload's interface is w.interface on the node's side.
Result<Commands> plan_attach(const Workload& w, std::string_view netns);
Commands plan_detach(const Workload& w);  // deleting one end of a veth pair deletes both

// Runs each command with `prefix` before it (e.g. {"ip", "netns", "exec", "node1"}), in order,
// stopping at the first failure: unavailable naming the command and its error output.
Result<void> run_link_commands(const Commands& commands,
                               const std::vector<std::string>& prefix = {});

}  // namespace gp::network

namespace gp {

// A CIDR shows and is stored as its text ("10.240.0.0/24").
template <>
struct TextForm<network::Ipv4Cidr> {
  static std::string text(const network::Ipv4Cidr& cidr) { return network::to_string(cidr); }
  static Result<network::Ipv4Cidr> parse(std::string_view text) {
    return network::parse_cidr(text);
  }
};

// A port range shows as a number or a "first-last" string.
template <>
struct JsonForm<network::PortRange> {
  static Json json(const network::PortRange& r) { return network::port_range_json(r); }
  static Json schema() { return {{"type", {"integer", "string"}}}; }
};

// The one description of a tenant's network policy: the document stored for the tenant, its
// JSON and its schema (common/record.h). A rule's description shows only where it has one.
template <>
struct Fields<network::EgressRule> {
  using E = network::EgressRule;
  static constexpr auto list = std::tuple{
      Field{"destination", &E::destination},
      Field{"protocol", &E::protocol, {}, Form::kEnum, network::kProtocols},
      Field{"ports", &E::ports},
      Field{"description", &E::description, {}, Form::kPlain, {}, Shown::kWhereSet},
  };
};

template <>
struct Fields<network::Exposure> {
  using E = network::Exposure;
  static constexpr auto list = std::tuple{
      Field{"protocol", &E::protocol, {}, Form::kEnum, network::kProtocols},
      Field{"ports", &E::ports},
      Field{"sources", &E::sources},
      Field{"description", &E::description, {}, Form::kPlain, {}, Shown::kWhereSet},
  };
};

template <>
struct Fields<network::TenantPolicy> {
  using P = network::TenantPolicy;
  static constexpr auto list = std::tuple{
      Field{"egress", &P::egress},
      Field{"exposures", &P::exposures},
  };
};

// The one description of a tenant's segment: its row (network/records.h, keyed by the tenant's
// id), its JSON and its schema (common/record.h).
template <>
struct Fields<network::Segment> {
  using S = network::Segment;
  static constexpr auto list = std::tuple{
      Field{"tenant", &S::tenant, "tenant_id", Form::kPlain, {}, Shown::kStoredOnly},
      Field{"vni", &S::vni},
      Field{"cidr", &S::cidr},
  };
};

}  // namespace gp
