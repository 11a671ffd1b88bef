// Pod reconcile: GPU requests of pods per node against the tenants' allocations there.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "fleet/fleet.h"

namespace gp::fleet {
namespace {

constexpr std::string_view kWhole = "nvidia.com/gpu";
constexpr std::string_view kShared = "nvidia.com/gpu.shared";
constexpr std::string_view kMigPrefix = "nvidia.com/mig-";
constexpr int64_t kMaxQuantity = 1 << 20;

bool gpu_resource(std::string_view r) {
  return r == kWhole || r == kShared || (r.starts_with(kMigPrefix) && r.size() > kMigPrefix.size());
}

// An extended-resource quantity: a whole, non-negative number (Kubernetes refuses fractions
// of extended resources), as a JSON number or a decimal string.
Result<int64_t> quantity(const Json& v, const std::string& where) {
  auto bad = [&] {
    return fail(Error::invalid(
        fmt::format("{}: {} is not a whole non-negative quantity", where, v.dump())));
  };
  if (v.is_number_integer()) {
    auto n = v.get<int64_t>();
    if (n < 0 || n > kMaxQuantity) return bad();
    return n;
  }
  if (!v.is_string()) return bad();
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 7 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad();
  return std::stoll(s);
}

const Json* member(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

Result<std::string> text(const Json& obj, const char* key, const std::string& where,
                         bool required) {
  const Json* v = member(obj, key);
  if (v == nullptr) {
    if (required) return fail(Error::invalid(fmt::format("{}: {} is missing", where, key)));
    return std::string();
  }
  if (!v->is_string())
    return fail(Error::invalid(fmt::format("{}: {} is not a string", where, key)));
  return v->get<std::string>();
}

// One container's GPU requests: limits, else requests (for extended resources both must be
// equal when given, so limits decide).
Result<std::map<std::string, int64_t>> container_gpus(const Json& c, const std::string& where) {
  std::map<std::string, int64_t> out;
  if (!c.is_object()) return fail(Error::invalid(where + ": not an object"));
  const Json* res = member(c, "resources");
  if (res == nullptr) return out;
  if (!res->is_object()) return fail(Error::invalid(where + ".resources: not an object"));
  for (const char* part : {"requests", "limits"}) {  // limits second: they win
    const Json* m = member(*res, part);
    if (m == nullptr) continue;
    if (!m->is_object())
      return fail(Error::invalid(fmt::format("{}.resources.{}: not an object", where, part)));
    for (const auto& [k, v] : m->items())
      if (gpu_resource(k))
        out[k] = GP_TRY(quantity(v, fmt::format("{}.resources.{}[{}]", where, part, k)));
  }
  return out;
}

Result<std::map<std::string, int64_t>> pod_gpus(const Json& spec, const std::string& where) {
  std::map<std::string, int64_t> app, init;
  for (const char* list : {"containers", "initContainers"}) {
    const Json* cs = member(spec, list);
    if (cs == nullptr) continue;
    if (!cs->is_array())
      return fail(Error::invalid(fmt::format("{}.spec.{}: not an array", where, list)));
    bool is_init = std::string_view(list) == "initContainers";
    for (size_t i = 0; i < cs->size(); ++i) {
      auto one = GP_TRY(container_gpus((*cs)[i], fmt::format("{}.spec.{}[{}]", where, list, i)));
      for (const auto& [k, n] : one) {
        if (is_init)
          init[k] = std::max(init[k], n);
        else
          app[k] += n;
      }
    }
  }
  for (const auto& [k, n] : init) app[k] = std::max(app[k], n);
  std::erase_if(app, [](const auto& kv) { return kv.second == 0; });
  return app;
}

int64_t held(const NodeHolding& h, const std::string& resource) {
  if (resource == kWhole) return h.whole_gpus;
  if (resource == kShared) return h.shared;
  auto it = h.mig.find(resource.substr(kMigPrefix.size()));
  return it == h.mig.end() ? 0 : it->second;
}

bool holds_any(const NodeHolding& h) {
  if (h.whole_gpus > 0 || h.shared > 0) return true;
  return std::any_of(h.mig.begin(), h.mig.end(), [](const auto& kv) { return kv.second > 0; });
}

std::string pod_ref(const PodGpuUse& p) { return p.ns + "/" + p.name; }

}  // namespace

std::string_view discrepancy_kind_name(DiscrepancyKind k) {
  switch (k) {
    case DiscrepancyKind::kForeignNode:
      return "foreign_node";
    case DiscrepancyKind::kUnallocatedNode:
      return "unallocated_node";
    case DiscrepancyKind::kOverRequest:
      return "over_request";
    case DiscrepancyKind::kUnownedNamespace:
      return "unowned_namespace";
  }
  return "unknown";
}

Result<PodReconcileReport> reconcile_pods(const PodReconcileInput& in) {
  if (in.pods == nullptr || !in.pods->is_object())
    return fail(Error::invalid("pods: expected a v1 List or PodList object"));
  const Json& list = *in.pods;
  std::string kind = list.value("kind", "");
  if (kind != "List" && kind != "PodList")
    return fail(Error::invalid(fmt::format(
        "pods: kind \"{}\" is not List or PodList (use kubectl get pods -A -o json)", kind)));
  const Json* items = member(list, "items");
  if (items == nullptr || !items->is_array())
    return fail(Error::invalid("pods: items is missing or not an array"));

  // Holdings by node, then tenant (summed if given twice).
  std::map<std::string, std::map<std::string, NodeHolding>> holdings;
  for (const auto& h : in.holdings) {
    if (h.node.empty() || h.tenant.empty())
      return fail(Error::invalid("holdings: a holding needs a node and a tenant"));
    auto& into = holdings[h.node][h.tenant];
    into.node = h.node;
    into.tenant = h.tenant;
    into.whole_gpus += h.whole_gpus;
    into.shared += h.shared;
    for (const auto& [p, n] : h.mig) into.mig[p] += n;
  }

  PodReconcileReport r;
  r.pods_seen = static_cast<int64_t>(items->size());
  std::map<std::string, NodePodUse> nodes;
  std::set<std::pair<std::string, std::string>> seen;  // namespace, name
  for (size_t i = 0; i < items->size(); ++i) {
    const Json& pod = (*items)[i];
    std::string where = fmt::format("items[{}]", i);
    if (!pod.is_object()) return fail(Error::invalid(where + ": not an object"));
    if (pod.value("kind", "Pod") != "Pod")
      return fail(
          Error::invalid(fmt::format("{}: kind \"{}\" is not Pod", where, pod.value("kind", ""))));
    const Json* meta = member(pod, "metadata");
    if (meta == nullptr || !meta->is_object())
      return fail(Error::invalid(where + ": metadata is missing"));
    PodGpuUse use;
    use.name = GP_TRY(text(*meta, "name", where + ".metadata", true));
    use.ns = GP_TRY(text(*meta, "namespace", where + ".metadata", true));
    where = fmt::format("items[{}] ({}/{})", i, use.ns, use.name);
    if (!seen.emplace(use.ns, use.name).second)
      return fail(Error::invalid(where + ": listed twice"));
    const Json* status = member(pod, "status");
    use.phase = status == nullptr ? "" : GP_TRY(text(*status, "phase", where + ".status", false));
    if (use.phase != "Running" && use.phase != "Pending") continue;
    const Json* spec = member(pod, "spec");
    if (spec == nullptr || !spec->is_object())
      return fail(Error::invalid(where + ": spec is missing"));
    use.resources = GP_TRY(pod_gpus(*spec, where));
    if (use.resources.empty()) continue;
    use.node = GP_TRY(text(*spec, "nodeName", where + ".spec", false));
    if (auto t = in.namespace_tenants.find(use.ns); t != in.namespace_tenants.end())
      use.tenant = t->second;
    ++r.gpu_pods;
    if (use.node.empty()) {
      r.unscheduled.push_back(std::move(use));
      continue;
    }
    auto& n = nodes[use.node];
    n.node = use.node;
    for (const auto& [res, q] : use.resources) n.requested[use.tenant][res] += q;
    n.pods.push_back(std::move(use));
  }

  auto add = [&](DiscrepancyKind k, const NodePodUse& n, const std::string& tenant,
                 const std::string& resource, std::vector<std::string> pods, std::string msg) {
    Discrepancy d{.kind = k,
                  .node = n.node,
                  .tenant = tenant,
                  .resource = resource,
                  .pods = std::move(pods),
                  .message = std::move(msg)};
    r.discrepancies.push_back(std::move(d));
    return &r.discrepancies.back();
  };
  for (auto& [name, n] : nodes) {
    std::sort(n.pods.begin(), n.pods.end(), [](const auto& a, const auto& b) {
      return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
    });
    const auto hit = holdings.find(name);
    std::vector<std::string> holders;
    if (hit != holdings.end())
      for (const auto& [t, h] : hit->second)
        if (holds_any(h)) holders.push_back(t);
    n.holders = holders;
    auto pods_of = [&](const std::string& tenant) {
      std::vector<std::string> out;
      for (const auto& p : n.pods)
        if (p.tenant == tenant) out.push_back(pod_ref(p));
      return out;
    };
    for (const auto& [tenant, req] : n.requested) {
      auto pods = pods_of(tenant);
      if (tenant.empty()) {
        add(DiscrepancyKind::kUnownedNamespace, n, "", "", pods,
            fmt::format("{} GPU pod(s) on node {} in namespaces no tenant owns: {}", pods.size(),
                        name, fmt::join(pods, ", ")));
        continue;
      }
      if (holders.empty()) {
        add(DiscrepancyKind::kUnallocatedNode, n, tenant, "", pods,
            fmt::format("tenant {} runs GPU pods on node {}, where no tenant holds GPUs: {}",
                        tenant, name, fmt::join(pods, ", ")));
        continue;
      }
      if (std::find(holders.begin(), holders.end(), tenant) == holders.end()) {
        add(DiscrepancyKind::kForeignNode, n, tenant, "", pods,
            fmt::format("tenant {} runs GPU pods on node {}, whose GPUs are allocated to {}: {}",
                        tenant, name, fmt::join(holders, ", "), fmt::join(pods, ", ")));
        continue;
      }
      const NodeHolding& h = hit->second.at(tenant);
      for (const auto& [res, q] : req) {
        int64_t have = held(h, res);
        if (q <= have) continue;
        auto* d = add(DiscrepancyKind::kOverRequest, n, tenant, res, pods,
                      fmt::format("tenant {} requests {} {} on node {} but holds {} there", tenant,
                                  q, res, name, have));
        d->requested = q;
        d->held = have;
      }
    }
    r.nodes.push_back(std::move(n));
  }
  std::sort(r.unscheduled.begin(), r.unscheduled.end(), [](const auto& a, const auto& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  return r;
}

namespace {

Json use_json(const PodGpuUse& p) {
  return {{"namespace", p.ns},
          {"name", p.name},
          {"node", p.node.empty() ? Json(nullptr) : Json(p.node)},
          {"phase", p.phase},
          {"tenant", p.tenant.empty() ? Json(nullptr) : Json(p.tenant)},
          {"resources", p.resources}};
}

}  // namespace

Json to_json(const PodReconcileReport& r) {
  Json nodes = Json::array();
  for (const auto& n : r.nodes) {
    Json pods = Json::array();
    for (const auto& p : n.pods) pods.push_back(use_json(p));
    Json requested = Json::object();
    for (const auto& [t, req] : n.requested) requested[t.empty() ? "(none)" : t] = req;
    nodes.push_back(
        {{"node", n.node}, {"holders", n.holders}, {"requested", requested}, {"pods", pods}});
  }
  Json unscheduled = Json::array();
  for (const auto& p : r.unscheduled) unscheduled.push_back(use_json(p));
  Json ds = Json::array();
  for (const auto& d : r.discrepancies) {
    Json j = {{"kind", discrepancy_kind_name(d.kind)},
              {"node", d.node},
              {"tenant", d.tenant.empty() ? Json(nullptr) : Json(d.tenant)},
              {"pods", d.pods},
              {"message", d.message}};
    if (d.kind == DiscrepancyKind::kOverRequest) {
      j["resource"] = d.resource;
      j["requested"] = d.requested;
      j["held"] = d.held;
    }
    ds.push_back(std::move(j));
  }
  return {{"pods_seen", r.pods_seen},
          {"gpu_pods", r.gpu_pods},
          {"nodes", nodes},
          {"unscheduled", unscheduled},
          {"discrepancies", ds}};
}

}  // namespace gp::fleet
