// The Kubernetes tenant bundle. Every object is built as JSON (nlohmann keeps object keys
// sorted, which gives the stable ordering), after the whole input has been validated.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "render/render.h"

namespace gp::render {
namespace {

using vocab::Tier;

// ---- input validation ---------------------------------------------------------------------

bool is_alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A Kubernetes quantity: a non-negative decimal with an optional binary/decimal suffix or
// exponent ("1", "0.5", "500m", "256Gi", "1e3").
bool valid_quantity(std::string_view q) {
  if (q.empty() || q.size() > 64) return false;
  size_t i = 0;
  if (q[0] == '+') ++i;
  size_t digits = 0;
  while (i < q.size() && std::isdigit(static_cast<unsigned char>(q[i]))) ++i, ++digits;
  if (i < q.size() && q[i] == '.') {
    ++i;
    while (i < q.size() && std::isdigit(static_cast<unsigned char>(q[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  std::string_view suffix = q.substr(i);
  static const std::set<std::string_view> kSuffixes = {
      "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (kSuffixes.contains(suffix)) return true;
  if (suffix[0] != 'e' && suffix[0] != 'E') return false;
  suffix.remove_prefix(1);
  if (!suffix.empty() && (suffix[0] == '+' || suffix[0] == '-')) suffix.remove_prefix(1);
  return !suffix.empty() && std::all_of(suffix.begin(), suffix.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// A label value: empty, or at most 63 characters of [A-Za-z0-9._-] starting and ending with
// an alphanumeric.
bool valid_label_value(std::string_view v) {
  if (v.empty()) return true;
  if (v.size() > 63 || !is_alnum(v.front()) || !is_alnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A DNS subdomain (RFC 1123): lowercase labels joined by dots, at most 253 characters.
bool valid_dns_subdomain(std::string_view v) {
  if (v.empty() || v.size() > 253) return false;
  size_t start = 0;
  while (start <= v.size()) {
    size_t dot = v.find('.', start);
    std::string_view label = v.substr(start, dot == std::string_view::npos ? v.npos : dot - start);
    if (label.empty() || label.size() > 63 || !is_alnum_lower(label.front()) ||
        !is_alnum_lower(label.back()))
      return false;
    if (!std::all_of(label.begin(), label.end(),
                     [](char c) { return is_alnum_lower(c) || c == '-'; }))
      return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

// A label (or taint) key: [prefix/]name, prefix a DNS subdomain, name a label value that is
// not empty.
bool valid_label_key(std::string_view k) {
  auto slash = k.find('/');
  std::string_view name = k;
  if (slash != std::string_view::npos) {
    if (!valid_dns_subdomain(k.substr(0, slash))) return false;
    name = k.substr(slash + 1);
  }
  return !name.empty() && valid_label_value(name);
}

bool valid_cidr(std::string_view cidr, int* family = nullptr) {
  auto slash = cidr.find('/');
  if (slash == std::string_view::npos || slash + 1 >= cidr.size() || cidr.size() > 64) return false;
  std::string addr(cidr.substr(0, slash));
  std::string_view bits = cidr.substr(slash + 1);
  if (!std::all_of(bits.begin(), bits.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }) ||
      bits.size() > 3)
    return false;
  int prefix = std::stoi(std::string(bits));
  unsigned char buf[16];
  if (inet_pton(AF_INET, addr.c_str(), buf) == 1) {
    if (family) *family = 4;
    return prefix <= 32;
  }
  if (inet_pton(AF_INET6, addr.c_str(), buf) == 1) {
    if (family) *family = 6;
    return prefix <= 128;
  }
  return false;
}

Result<void> check(bool ok, std::string message) {
  if (ok) return gp::ok();
  return fail(ErrorCode::kInvalidArgument, std::move(message));
}

Result<void> validate_ports(const std::vector<Port>& ports, const std::string& what) {
  for (const auto& p : ports) {
    GP_TRY_VOID(
        check(p.protocol == "TCP" || p.protocol == "UDP" || p.protocol == "SCTP",
              fmt::format("{}: protocol \"{}\" is not TCP, UDP or SCTP", what, p.protocol)));
    GP_TRY_VOID(check(p.port >= 1 && p.port <= 65535,
                      fmt::format("{}: port {} is not in 1..65535", what, p.port)));
    GP_TRY_VOID(check(p.end_port == 0 || (p.end_port > p.port && p.end_port <= 65535),
                      fmt::format("{}: end_port {} must be above port {} and at most 65535", what,
                                  p.end_port, p.port)));
  }
  return gp::ok();
}

bool has_tier(const TenantBundleInput& in, Tier t) {
  return std::find(in.tiers.begin(), in.tiers.end(), t) != in.tiers.end();
}
bool has_whole_gpu_tier(const TenantBundleInput& in) {
  return has_tier(in, Tier::kDedicatedPool) || has_tier(in, Tier::kDedicatedNode) ||
         has_tier(in, Tier::kDedicatedGpu);
}
// Node placement is rendered for tenants that own nodes: dedicated-pool / dedicated-node.
bool places_on_own_nodes(const TenantBundleInput& in) {
  return (has_tier(in, Tier::kDedicatedPool) || has_tier(in, Tier::kDedicatedNode)) &&
         !in.pools.empty();
}

const std::set<std::string, std::less<>>& project_roles() {
  static const std::set<std::string, std::less<>> kRoles = {"project-admin", "project-member",
                                                            "project-viewer"};
  return kRoles;
}

Result<void> validate(const TenantBundleInput& in) {
  GP_TRY_VOID(validate_dns_label("tenant", in.tenant));
  GP_TRY_VOID(check(!in.tiers.empty(), "tiers: at least one tier is required"));
  for (Tier t : in.tiers)
    GP_TRY_VOID(check(vocab::class_allows(in.isolation_class, t),
                      fmt::format("tier {} is weaker than class {} allows", vocab::tier_name(t),
                                  vocab::class_name(in.isolation_class))));
  for (const auto& p : in.mig_profiles)
    GP_TRY_VOID(check(
        !p.empty() && p.size() <= 40 && std::isdigit(static_cast<unsigned char>(p[0])) &&
            std::all_of(p.begin(), p.end(), [](char c) { return is_alnum_lower(c) || c == '.'; }),
        fmt::format("mig profile \"{}\" is not a profile name like 1g.18gb", p)));
  GP_TRY_VOID(check(!in.projects.empty(), "projects: at least one project is required"));
  std::set<std::string> project_names;
  for (const auto& p : in.projects) {
    GP_TRY_VOID(validate_dns_label("project name", p.name));
    GP_TRY_VOID(check(project_names.insert(p.name).second,
                      fmt::format("project \"{}\" is listed twice", p.name)));
    GP_TRY_VOID(project_namespace(in.tenant, p.name));
    const auto& q = p.quota;
    std::string where = fmt::format("project {} quota", p.name);
    GP_TRY_VOID(check(q.gpus >= 0 && q.shared_gpus >= 0 && q.pods >= 0 && q.services >= 0 &&
                          q.persistent_volume_claims >= 0 && q.config_maps >= 0 && q.secrets >= 0 &&
                          q.load_balancers >= 0 && q.node_ports >= 0,
                      where + ": counts must not be negative"));
    GP_TRY_VOID(check(q.gpus == 0 || has_whole_gpu_tier(in),
                      fmt::format("{}: whole GPUs need a dedicated tier", where)));
    GP_TRY_VOID(check(q.shared_gpus == 0 || has_tier(in, Tier::kShared),
                      fmt::format("{}: shared GPUs need the shared tier", where)));
    for (const auto& [profile, count] : q.mig) {
      GP_TRY_VOID(check(has_tier(in, Tier::kMig),
                        fmt::format("{}: MIG instances need the mig tier", where)));
      GP_TRY_VOID(
          check(std::find(in.mig_profiles.begin(), in.mig_profiles.end(), profile) !=
                    in.mig_profiles.end(),
                fmt::format("{}: MIG profile \"{}\" is not among mig_profiles", where, profile)));
      GP_TRY_VOID(check(count >= 0, where + ": counts must not be negative"));
    }
    for (const auto& [name, value] : {std::pair{"cpu", &q.cpu},
                                      {"memory", &q.memory},
                                      {"storage", &q.storage},
                                      {"default cpu_request", &p.defaults.cpu_request},
                                      {"default cpu_limit", &p.defaults.cpu_limit},
                                      {"default memory_request", &p.defaults.memory_request},
                                      {"default memory_limit", &p.defaults.memory_limit}})
      GP_TRY_VOID(check(
          valid_quantity(*value),
          fmt::format("project {}: {} \"{}\" is not a Kubernetes quantity", p.name, name, *value)));
    std::set<std::string> policy_names;
    for (const auto& e : p.egress) {
      GP_TRY_VOID(validate_dns_label("egress rule name", e.name));
      GP_TRY_VOID(check(policy_names.insert("egress-" + e.name).second,
                        fmt::format("project {}: egress rule \"{}\" twice", p.name, e.name)));
      int family = 0, except_family = 0;
      GP_TRY_VOID(check(valid_cidr(e.cidr, &family),
                        fmt::format("egress rule {}: \"{}\" is not a CIDR", e.name, e.cidr)));
      for (const auto& x : e.except)
        GP_TRY_VOID(check(valid_cidr(x, &except_family) && except_family == family,
                          fmt::format("egress rule {}: except \"{}\" is not a CIDR of the same "
                                      "family as {}",
                                      e.name, x, e.cidr)));
      GP_TRY_VOID(validate_ports(e.ports, "egress rule " + e.name));
    }
    for (const auto& x : p.exposures) {
      GP_TRY_VOID(validate_dns_label("exposure name", x.name));
      GP_TRY_VOID(check(policy_names.insert("expose-" + x.name).second,
                        fmt::format("project {}: exposure \"{}\" twice", p.name, x.name)));
      GP_TRY_VOID(check(!x.ports.empty(), fmt::format("exposure {}: no ports", x.name)));
      GP_TRY_VOID(validate_ports(x.ports, "exposure " + x.name));
      for (const auto& c : x.from_cidrs)
        GP_TRY_VOID(
            check(valid_cidr(c), fmt::format("exposure {}: \"{}\" is not a CIDR", x.name, c)));
      for (const auto& [k, v] : x.pod_labels)
        GP_TRY_VOID(check(valid_label_key(k) && valid_label_value(v),
                          fmt::format("exposure {}: label {}={} is not valid", x.name, k, v)));
    }
    std::set<std::string> sas;
    for (const auto& sa : p.service_accounts) {
      GP_TRY_VOID(validate_dns_label("service account", sa));
      GP_TRY_VOID(check(sa != "default", "service account \"default\" is always rendered"));
      GP_TRY_VOID(check(sas.insert(sa).second, fmt::format("service account \"{}\" twice", sa)));
    }
  }
  std::set<std::string> pool_names, nodes;
  for (const auto& pool : in.pools) {
    GP_TRY_VOID(validate_dns_label("pool name", pool.name));
    GP_TRY_VOID(check(pool_names.insert(pool.name).second,
                      fmt::format("pool \"{}\" is listed twice", pool.name)));
    for (const auto& [k, v] : pool.node_labels) {
      GP_TRY_VOID(check(valid_label_key(k) && valid_label_value(v),
                        fmt::format("pool {}: node label {}={} is not valid", pool.name, k, v)));
      GP_TRY_VOID(check(k != kTenantLabel && k != kPoolLabel,
                        fmt::format("pool {}: node label {} is set by gpuplane", pool.name, k)));
    }
    for (const auto& t : pool.taints) {
      GP_TRY_VOID(
          check(valid_label_key(t.key) && valid_label_value(t.value),
                fmt::format("pool {}: taint {}={} is not valid", pool.name, t.key, t.value)));
      GP_TRY_VOID(check(
          t.effect == "NoSchedule" || t.effect == "PreferNoSchedule" || t.effect == "NoExecute",
          fmt::format("pool {}: taint effect \"{}\" is not NoSchedule, "
                      "PreferNoSchedule or NoExecute",
                      pool.name, t.effect)));
      GP_TRY_VOID(check(t.key != kTenantLabel,
                        fmt::format("pool {}: taint {} is set by gpuplane", pool.name, t.key)));
    }
    for (const auto& n : pool.nodes) {
      GP_TRY_VOID(check(valid_dns_subdomain(n), fmt::format("pool {}: node name \"{}\" is not a "
                                                            "DNS subdomain",
                                                            pool.name, n)));
      GP_TRY_VOID(check(nodes.insert(n).second, fmt::format("node \"{}\" is in two pools", n)));
    }
  }
  for (const auto& b : in.role_bindings) {
    std::string what = fmt::format("role binding {} {}:{}", b.role, b.subject_kind, b.subject);
    bool project_role = project_roles().contains(b.role);
    GP_TRY_VOID(check(project_role || b.role == "tenant-admin" || b.role == "tenant-billing",
                      what + ": role must be tenant-admin, tenant-billing, project-admin, "
                             "project-member or project-viewer"));
    GP_TRY_VOID(check(
        b.subject_kind == "User" || b.subject_kind == "Group" || b.subject_kind == "ServiceAccount",
        what + ": subject kind must be User, Group or ServiceAccount"));
    GP_TRY_VOID(
        check(!b.subject.empty() && b.subject.size() <= 253 &&
                  std::none_of(b.subject.begin(), b.subject.end(),
                               [](char c) { return std::iscntrl(static_cast<unsigned char>(c)); }),
              what + ": subject must be 1..253 printable characters"));
    if (b.subject_kind == "ServiceAccount")
      GP_TRY_VOID(validate_dns_label("service account", b.subject));
    if (project_role || b.subject_kind == "ServiceAccount")
      GP_TRY_VOID(
          check(project_names.contains(b.project),
                what + fmt::format(": project \"{}\" is not one of the tenant's", b.project)));
    else
      GP_TRY_VOID(
          check(b.project.empty() || project_names.contains(b.project),
                what + fmt::format(": project \"{}\" is not one of the tenant's", b.project)));
  }
  const auto& w = in.webhook;
  GP_TRY_VOID(check(w.base_url.starts_with("https://") && w.base_url.size() > 8 &&
                        w.base_url.size() <= 512 &&
                        w.base_url.find_first_of(" ?#\"'\\") == std::string::npos,
                    fmt::format("webhook base_url \"{}\" must be an https:// URL without query or "
                                "fragment",
                                w.base_url)));
  GP_TRY_VOID(check(w.timeout_seconds >= 1 && w.timeout_seconds <= 30,
                    "webhook timeout_seconds must be in 1..30"));
  GP_TRY_VOID(
      check(std::all_of(w.ca_bundle.begin(), w.ca_bundle.end(),
                        [](char c) { return is_alnum(c) || c == '+' || c == '/' || c == '='; }) &&
                w.ca_bundle.size() % 4 == 0,
            "webhook ca_bundle must be base64"));
  return gp::ok();
}

// ---- object builders ----------------------------------------------------------------------

Json object_meta(std::string_view name, std::string_view ns, Json labels) {
  Json meta = {{"name", name}, {"labels", std::move(labels)}};
  if (!ns.empty()) meta["namespace"] = ns;
  return meta;
}

Json base_labels(const TenantBundleInput& in) {
  return {{"app.kubernetes.io/managed-by", "gpuplane"}, {std::string(kTenantLabel), in.tenant}};
}

Json project_labels(const TenantBundleInput& in, const Project& p) {
  Json l = base_labels(in);
  l[std::string(kProjectLabel)] = p.name;
  return l;
}

Json toleration_for(const Taint& t) {
  return {{"key", t.key}, {"operator", "Equal"}, {"value", t.value}, {"effect", t.effect}};
}

// The tenant taint every node of its pools carries, so nothing else schedules there.
Taint tenant_taint(const TenantBundleInput& in) {
  return {std::string(kTenantLabel), in.tenant, "NoSchedule"};
}

// Every taint the tenant's pods must tolerate on its own nodes, sorted and unique.
std::vector<Taint> tenant_tolerated_taints(const TenantBundleInput& in) {
  std::vector<Taint> out = {tenant_taint(in)};
  for (const auto& pool : in.pools) out.insert(out.end(), pool.taints.begin(), pool.taints.end());
  std::sort(out.begin(), out.end(), [](const Taint& a, const Taint& b) {
    return std::tie(a.key, a.value, a.effect) < std::tie(b.key, b.value, b.effect);
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Taint& a, const Taint& b) {
                          return a.key == b.key && a.value == b.value && a.effect == b.effect;
                        }),
            out.end());
  return out;
}

Json namespace_object(const TenantBundleInput& in, const Project& p, const std::string& ns) {
  Json labels = project_labels(in, p);
  labels["gpuplane.io/isolation-class"] = vocab::class_name(in.isolation_class);
  for (std::string_view mode : {"enforce", "audit", "warn"}) {
    labels[fmt::format("pod-security.kubernetes.io/{}", mode)] = "restricted";
    labels[fmt::format("pod-security.kubernetes.io/{}-version", mode)] = "latest";
  }
  Json obj = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", object_meta(ns, "", labels)}};
  if (places_on_own_nodes(in)) {
    // PodNodeSelector and PodTolerationRestriction admission plugins: every pod of the
    // namespace lands on the tenant's nodes, tolerating their taints and no other.
    Json tolerations = Json::array();
    for (const auto& t : tenant_tolerated_taints(in)) tolerations.push_back(toleration_for(t));
    obj["metadata"]["annotations"] = {
        {"scheduler.alpha.kubernetes.io/node-selector",
         fmt::format("{}={}", kTenantLabel, in.tenant)},
        {"scheduler.alpha.kubernetes.io/defaultTolerations", tolerations.dump()},
        {"scheduler.alpha.kubernetes.io/tolerationsWhitelist", tolerations.dump()},
    };
  }
  return obj;
}

Json resource_quota(const TenantBundleInput& in, const Project& p, const std::string& ns) {
  const auto& q = p.quota;
  Json hard = {
      {"requests.cpu", q.cpu},
      {"limits.cpu", q.cpu},
      {"requests.memory", q.memory},
      {"limits.memory", q.memory},
      {"requests.storage", q.storage},
      {"pods", std::to_string(q.pods)},
      {"services", std::to_string(q.services)},
      {"persistentvolumeclaims", std::to_string(q.persistent_volume_claims)},
      {"configmaps", std::to_string(q.config_maps)},
      {"secrets", std::to_string(q.secrets)},
      {"services.loadbalancers", std::to_string(q.load_balancers)},
      {"services.nodeports", std::to_string(q.node_ports)},
      // Whole GPUs are capped even at 0, so a tier without them cannot request any.
      {"requests.nvidia.com/gpu", std::to_string(q.gpus)},
  };
  if (has_tier(in, Tier::kMig))
    for (const auto& profile : in.mig_profiles) {
      auto it = q.mig.find(profile);
      hard[fmt::format("requests.nvidia.com/mig-{}", profile)] =
          std::to_string(it == q.mig.end() ? 0 : it->second);
    }
  hard["requests.nvidia.com/gpu.shared"] = std::to_string(q.shared_gpus);
  return {{"apiVersion", "v1"},
          {"kind", "ResourceQuota"},
          {"metadata", object_meta("gpuplane-quota", ns, project_labels(in, p))},
          {"spec", Json{{"hard", hard}}}};
}

Json limit_range(const TenantBundleInput& in, const Project& p, const std::string& ns) {
  const auto& d = p.defaults;
  Json container = {{"type", "Container"},
                    {"default", {{"cpu", d.cpu_limit}, {"memory", d.memory_limit}}},
                    {"defaultRequest", {{"cpu", d.cpu_request}, {"memory", d.memory_request}}}};
  Json pvc = {{"type", "PersistentVolumeClaim"}, {"max", {{"storage", p.quota.storage}}}};
  return {{"apiVersion", "v1"},
          {"kind", "LimitRange"},
          {"metadata", object_meta("gpuplane-limits", ns, project_labels(in, p))},
          {"spec", Json{{"limits", Json(std::vector<Json>{container, pvc})}}}};
}

Json ports_json(const std::vector<Port>& ports) {
  Json out = Json::array();
  for (const auto& p : ports) {
    Json j = {{"protocol", p.protocol}, {"port", p.port}};
    if (p.end_port != 0) j["endPort"] = p.end_port;
    out.push_back(std::move(j));
  }
  return out;
}

Json network_policy(const TenantBundleInput& in, const Project& p, const std::string& ns,
                    const std::string& name, Json spec) {
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", object_meta(name, ns, project_labels(in, p))},
          {"spec", std::move(spec)}};
}

std::vector<Json> network_policies(const TenantBundleInput& in, const Project& p,
                                   const std::string& ns) {
  // nlohmann reads a two-string brace list as an object member, so arrays are spelled out.
  using A = std::vector<Json>;
  std::vector<Json> out;
  auto spec = [](Json selector, const std::vector<std::string>& types) {
    return Json{{"podSelector", std::move(selector)}, {"policyTypes", Json(types)}};
  };
  out.push_back(network_policy(in, p, ns, "gpuplane-default-deny",
                               spec(Json::object(), {"Ingress", "Egress"})));

  Json tenant_peer = Json::object();
  tenant_peer["namespaceSelector"]["matchLabels"][std::string(kTenantLabel)] = in.tenant;
  Json same_tenant = spec(Json::object(), {"Ingress", "Egress"});
  same_tenant["ingress"] = Json(A{Json{{"from", Json(A{tenant_peer})}}});
  same_tenant["egress"] = Json(A{Json{{"to", Json(A{tenant_peer})}}});
  out.push_back(network_policy(in, p, ns, "gpuplane-allow-tenant", same_tenant));

  Json dns_peer = Json::object();
  dns_peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] = "kube-system";
  dns_peer["podSelector"]["matchLabels"]["k8s-app"] = "kube-dns";
  Json dns = spec(Json::object(), {"Egress"});
  dns["egress"] = Json(
      A{Json{{"to", Json(A{dns_peer})}, {"ports", ports_json({{"UDP", 53, 0}, {"TCP", 53, 0}})}}});
  out.push_back(network_policy(in, p, ns, "gpuplane-allow-dns", dns));

  std::vector<const EgressRule*> egress;
  egress.reserve(p.egress.size());
  for (const auto& e : p.egress) egress.push_back(&e);
  std::sort(egress.begin(), egress.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const auto* e : egress) {
    Json block = {{"cidr", e->cidr}};
    if (!e->except.empty()) {
      std::vector<std::string> ex = e->except;
      std::sort(ex.begin(), ex.end());
      block["except"] = Json(ex);
    }
    Json rule = {{"to", Json(A{Json{{"ipBlock", block}}})}};
    if (!e->ports.empty()) rule["ports"] = ports_json(e->ports);
    Json s = spec(Json::object(), {"Egress"});
    s["egress"] = Json(A{rule});
    out.push_back(network_policy(in, p, ns, "gpuplane-egress-" + e->name, s));
  }

  std::vector<const Exposure*> exposures;
  exposures.reserve(p.exposures.size());
  for (const auto& x : p.exposures) exposures.push_back(&x);
  std::sort(exposures.begin(), exposures.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const auto* x : exposures) {
    std::vector<std::string> cidrs = x->from_cidrs;
    if (cidrs.empty()) cidrs = {"0.0.0.0/0", "::/0"};
    std::sort(cidrs.begin(), cidrs.end());
    Json from = Json::array();
    for (const auto& c : cidrs) from.push_back(Json{{"ipBlock", Json{{"cidr", c}}}});
    Json selector = Json::object();
    if (!x->pod_labels.empty()) selector["matchLabels"] = Json(x->pod_labels);
    Json s = spec(selector, {"Ingress"});
    s["ingress"] = Json(A{Json{{"from", from}, {"ports", ports_json(x->ports)}}});
    out.push_back(network_policy(in, p, ns, "gpuplane-expose-" + x->name, s));
  }
  return out;
}

std::vector<Json> service_accounts(const TenantBundleInput& in, const Project& p,
                                   const std::string& ns) {
  std::vector<std::string> names = p.service_accounts;
  names.push_back("default");
  std::sort(names.begin(), names.end());
  std::vector<Json> out;
  out.reserve(names.size());
  for (const auto& n : names)
    out.push_back({{"apiVersion", "v1"},
                   {"kind", "ServiceAccount"},
                   {"metadata", object_meta(n, ns, project_labels(in, p))},
                   // Pods get an API token only when they ask for one.
                   {"automountServiceAccountToken", false}});
  return out;
}

Json rule(const std::vector<std::string>& groups, const std::vector<std::string>& resources,
          const std::vector<std::string>& verbs) {
  return Json{{"apiGroups", Json(groups)}, {"resources", Json(resources)}, {"verbs", Json(verbs)}};
}

const std::vector<std::string> kRead = {"get", "list", "watch"};
const std::vector<std::string> kWrite = {"create", "delete", "deletecollection", "get",
                                         "list",   "patch",  "update",           "watch"};

// The three namespaced roles. None may write resourcequotas, limitranges, networkpolicies,
// roles or rolebindings: those belong to the platform. DaemonSets are left out on purpose: a
// tenant has no business running a pod on every node.
std::vector<Json> roles(const TenantBundleInput& in, const Project& p, const std::string& ns) {
  Json admin = Json(std::vector<Json>{
      rule({""},
           {"configmaps", "endpoints", "persistentvolumeclaims", "pods", "pods/attach", "pods/exec",
            "pods/log", "pods/portforward", "secrets", "serviceaccounts", "services"},
           kWrite),
      rule({"apps"}, {"deployments", "replicasets", "statefulsets"}, kWrite),
      rule({"batch"}, {"cronjobs", "jobs"}, kWrite),
      rule({"autoscaling"}, {"horizontalpodautoscalers"}, kWrite),
      rule({"policy"}, {"poddisruptionbudgets"}, kWrite),
      rule({""}, {"events", "limitranges", "resourcequotas"}, kRead),
      rule({"networking.k8s.io"}, {"networkpolicies"}, kRead),
      rule({"rbac.authorization.k8s.io"}, {"rolebindings", "roles"}, kRead),
  });
  Json edit = Json(std::vector<Json>{
      rule({""},
           {"configmaps", "persistentvolumeclaims", "pods", "pods/attach", "pods/exec", "pods/log",
            "pods/portforward", "secrets", "services"},
           kWrite),
      rule({"apps"}, {"deployments", "replicasets", "statefulsets"}, kWrite),
      rule({"batch"}, {"cronjobs", "jobs"}, kWrite),
      rule({"autoscaling"}, {"horizontalpodautoscalers"}, kWrite),
      rule({"policy"}, {"poddisruptionbudgets"}, kWrite),
      rule({""}, {"endpoints", "events", "limitranges", "resourcequotas", "serviceaccounts"},
           kRead),
      rule({"networking.k8s.io"}, {"networkpolicies"}, kRead),
  });
  Json view = Json(std::vector<Json>{
      rule({""},
           {"configmaps", "endpoints", "events", "limitranges", "persistentvolumeclaims", "pods",
            "pods/log", "resourcequotas", "serviceaccounts", "services"},
           kRead),
      rule({"apps"}, {"deployments", "replicasets", "statefulsets"}, kRead),
      rule({"batch"}, {"cronjobs", "jobs"}, kRead),
      rule({"autoscaling"}, {"horizontalpodautoscalers"}, kRead),
      rule({"policy"}, {"poddisruptionbudgets"}, kRead),
      rule({"networking.k8s.io"}, {"networkpolicies"}, kRead),
  });
  std::vector<Json> out;
  for (auto& [name, rules] : {std::pair{"gpuplane-admin", admin}, std::pair{"gpuplane-edit", edit},
                              std::pair{"gpuplane-view", view}})
    out.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                   {"kind", "Role"},
                   {"metadata", object_meta(name, ns, project_labels(in, p))},
                   {"rules", rules}});
  return out;
}

std::string_view k8s_role_for(std::string_view role) {
  if (role == "tenant-admin" || role == "project-admin") return "gpuplane-admin";
  if (role == "project-member") return "gpuplane-edit";
  return "gpuplane-view";
}

// FNV-1a, 32 bits: a short stable suffix that keeps binding names unique and valid whatever
// characters the subject has.
std::string short_hash(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return fmt::format("{:08x}", h);
}

std::vector<Json> role_bindings(const TenantBundleInput& in, const Project& p,
                                const std::string& ns) {
  std::map<std::string, Json> by_name;  // sorted and de-duplicated
  for (const auto& b : in.role_bindings) {
    if (b.role == "tenant-billing") continue;  // no cluster access
    bool applies = b.role == "tenant-admin" && b.subject_kind != "ServiceAccount"
                       ? (b.project.empty() || b.project == p.name)
                       : b.project == p.name;
    if (!applies) continue;
    std::string_view k8s_role = k8s_role_for(b.role);
    std::string name =
        fmt::format("{}-{}", k8s_role,
                    short_hash(fmt::format("{}\n{}\n{}", b.role, b.subject_kind, b.subject)));
    Json subject = {{"kind", b.subject_kind}, {"name", b.subject}};
    if (b.subject_kind == "ServiceAccount")
      subject["namespace"] = ns;
    else
      subject["apiGroup"] = "rbac.authorization.k8s.io";
    Json meta = object_meta(name, ns, project_labels(in, p));
    meta["annotations"] = {
        {"gpuplane.io/role", b.role},
        {"gpuplane.io/subject", fmt::format("{}:{}", b.subject_kind, b.subject)}};
    by_name[name] = {
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "RoleBinding"},
        {"metadata", meta},
        {"roleRef",
         {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", k8s_role}}},
        {"subjects", Json(std::vector<Json>{subject})}};
  }
  std::vector<Json> out;
  out.reserve(by_name.size());
  for (auto& [_, obj] : by_name) out.push_back(std::move(obj));
  return out;
}

// Labels and taints for the nodes of the tenant's pools; applied with server-side apply they
// merge into the existing Node objects.
std::vector<Json> node_objects(const TenantBundleInput& in) {
  std::map<std::string, Json> by_node;
  for (const auto& pool : in.pools) {
    Json labels = base_labels(in);
    labels[std::string(kPoolLabel)] = pool.name;
    for (const auto& [k, v] : pool.node_labels) labels[k] = v;
    std::vector<Taint> taints = pool.taints;
    taints.insert(taints.begin(), tenant_taint(in));
    std::sort(taints.begin(), taints.end(), [](const Taint& a, const Taint& b) {
      return std::tie(a.key, a.value, a.effect) < std::tie(b.key, b.value, b.effect);
    });
    Json taint_json = Json::array();
    for (const auto& t : taints)
      taint_json.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
    for (const auto& node : pool.nodes)
      by_node[node] = {{"apiVersion", "v1"},
                       {"kind", "Node"},
                       {"metadata", object_meta(node, "", labels)},
                       {"spec", Json{{"taints", taint_json}}}};
  }
  std::vector<Json> out;
  out.reserve(by_node.size());
  for (auto& [_, obj] : by_node) out.push_back(std::move(obj));
  return out;
}

Json webhook_configuration(const TenantBundleInput& in) {
  std::string base = in.webhook.base_url;
  while (base.ends_with('/')) base.pop_back();
  Json client = {{"url", base + std::string(kAdmissionPath)}};
  if (!in.webhook.ca_bundle.empty()) client["caBundle"] = in.webhook.ca_bundle;
  using A = std::vector<Json>;
  using S = std::vector<std::string>;
  auto rule_for = [&](std::string group, const S& resources) {
    return Json{{"apiGroups", Json(S{std::move(group)})},
                {"apiVersions", Json(S{"v1"})},
                {"operations", Json(S{"CREATE", "UPDATE"})},
                {"resources", Json(resources)},
                {"scope", "Namespaced"}};
  };
  Json selector = Json::object();
  selector["matchLabels"][std::string(kTenantLabel)] = in.tenant;
  Json hook = {
      {"name", fmt::format("{}.admission.gpuplane.io", in.tenant)},
      {"admissionReviewVersions", Json(S{"v1"})},
      {"clientConfig", client},
      {"failurePolicy", "Fail"},
      {"matchPolicy", "Equivalent"},
      {"namespaceSelector", selector},
      {"rules",
       Json(A{rule_for("", {"pods", "pods/ephemeralcontainers", "podtemplates",
                            "replicationcontrollers"}),
              rule_for("apps", {"daemonsets", "deployments", "replicasets", "statefulsets"}),
              rule_for("batch", {"cronjobs", "jobs"})})},
      {"sideEffects", "None"},
      {"timeoutSeconds", in.webhook.timeout_seconds},
  };
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "ValidatingWebhookConfiguration"},
          {"metadata", object_meta(fmt::format("gpuplane-{}", in.tenant), "", base_labels(in))},
          {"webhooks", Json(std::vector<Json>{hook})}};
}

}  // namespace

Result<std::vector<Json>> render_kubernetes_objects(const TenantBundleInput& input) {
  GP_TRY_VOID(validate(input));
  std::vector<const Project*> projects;
  projects.reserve(input.projects.size());
  for (const auto& p : input.projects) projects.push_back(&p);
  std::sort(projects.begin(), projects.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::vector<Json> out;
  out.reserve(projects.size());
  for (const auto* p : projects)
    out.push_back(namespace_object(input, *p, GP_TRY(project_namespace(input.tenant, p->name))));
  for (const auto* p : projects) {
    std::string ns = GP_TRY(project_namespace(input.tenant, p->name));
    out.push_back(resource_quota(input, *p, ns));
    out.push_back(limit_range(input, *p, ns));
    for (auto& o : network_policies(input, *p, ns)) out.push_back(std::move(o));
    for (auto& o : service_accounts(input, *p, ns)) out.push_back(std::move(o));
    for (auto& o : roles(input, *p, ns)) out.push_back(std::move(o));
    for (auto& o : role_bindings(input, *p, ns)) out.push_back(std::move(o));
  }
  if (places_on_own_nodes(input))
    for (auto& o : node_objects(input)) out.push_back(std::move(o));
  out.push_back(webhook_configuration(input));
  return out;
}

Result<std::string> render_kubernetes(const TenantBundleInput& input) {
  auto objects = GP_TRY(render_kubernetes_objects(input));
  std::string out = fmt::format(
      "# Kubernetes bundle for tenant {} (class {}), rendered by gpuplane. Do not edit: render "
      "again.\n",
      input.tenant, vocab::class_name(input.isolation_class));
  // The webhook refuses device variables in a pod's env (tenant.gpuDeviceEnv), but an image or
  // an envFrom ConfigMap can carry them too: only the node settings close that.
  out +=
      "# Every GPU node these pods can reach must keep containers from choosing their own GPUs\n"
      "# (docs/kubernetes.md, \"GPU devices\"):\n"
      "#   NVIDIA container toolkit, /etc/nvidia-container-runtime/config.toml:\n"
      "#     accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
      "#     accept-nvidia-visible-devices-as-volume-mounts = true\n"
      "#   NVIDIA device plugin: deviceListStrategy volume-mounts (or cdi-annotations / cdi-cri)\n"
      "# `gpuplane posture` fails workload.gpu-device-env on any shared node that lacks them.\n";
  for (const auto& note : input.notes) out += fmt::format("# {}\n", note);
  for (const auto& o : objects) {
    out += "---\n";
    out += to_yaml(o);
  }
  return out;
}

}  // namespace gp::render
