// Tenant rules and the AdmissionReview envelope around them and Pod Security.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "policy/policy.h"

namespace gp::policy {

bool class_requires_pull_always(IsolationClass c) {
  return c == IsolationClass::kSensitive || c == IsolationClass::kRegulated;
}

bool class_requires_own_pool(IsolationClass c) { return c == IsolationClass::kRegulated; }

std::string image_repository(std::string_view image) {
  std::string_view ref = image;
  if (auto at = ref.find('@'); at != std::string_view::npos) ref = ref.substr(0, at);
  auto slash = ref.rfind('/');
  auto colon = ref.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash))
    ref = ref.substr(0, colon);
  std::string domain, path;
  auto first = ref.find('/');
  std::string_view head =
      first == std::string_view::npos ? std::string_view{} : ref.substr(0, first);
  bool has_domain = first != std::string_view::npos &&
                    (head.find('.') != std::string_view::npos ||
                     head.find(':') != std::string_view::npos || head == "localhost");
  if (has_domain) {
    domain = std::string(head);
    path = std::string(ref.substr(first + 1));
  } else {
    domain = "docker.io";
    path = std::string(ref);
  }
  std::transform(domain.begin(), domain.end(), domain.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (domain == "index.docker.io" || domain == "registry-1.docker.io") domain = "docker.io";
  if (domain == "docker.io" && path.find('/') == std::string::npos) path = "library/" + path;
  return domain + "/" + path;
}

namespace {
bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
}  // namespace

bool valid_registry_host(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  size_t start = 0;
  for (;;) {
    size_t dot = h.find('.', start);
    std::string_view label = h.substr(start, dot == std::string_view::npos ? h.npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char c : label)
      if (!lower_alnum(c) && c != '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool valid_repository_component(std::string_view p) {
  if (p.empty() || !lower_alnum(p.front()) || !lower_alnum(p.back())) return false;
  for (size_t i = 0; i < p.size();) {
    if (lower_alnum(p[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < p.size() && !lower_alnum(p[j])) ++j;
    std::string_view sep = p.substr(i, j - i);
    bool dashes = std::all_of(sep.begin(), sep.end(), [](char c) { return c == '-'; });
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) return false;
    i = j;
  }
  return true;
}

bool valid_image_reference(std::string_view image) {
  if (image.empty() || image.size() > 512) return false;
  std::string_view ref = image;
  if (auto at = ref.find('@'); at != std::string_view::npos) {
    std::string_view digest = ref.substr(at + 1);
    if (!digest.starts_with("sha256:") || digest.size() != 7 + 64 ||
        !std::all_of(digest.begin() + 7, digest.end(), is_hex))
      return false;
    ref = ref.substr(0, at);
  }
  auto last_slash = ref.rfind('/');
  auto colon = ref.rfind(':');
  if (colon != std::string_view::npos &&
      (last_slash == std::string_view::npos || colon > last_slash)) {
    std::string_view tag = ref.substr(colon + 1);
    if (tag.empty() || tag.size() > 128 || tag.front() == '.' || tag.front() == '-' ||
        !std::all_of(tag.begin(), tag.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
        }))
      return false;
    ref = ref.substr(0, colon);
  }
  // The first component names a registry when it has a '.' or a ':' or is "localhost".
  if (auto first = ref.find('/'); first != std::string_view::npos) {
    std::string_view head = ref.substr(0, first);
    if (head.find('.') != std::string_view::npos || head.find(':') != std::string_view::npos ||
        head == "localhost") {
      std::string host(head.substr(0, head.find(':')));
      std::transform(host.begin(), host.end(), host.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (!valid_registry_host(host)) return false;
      if (auto c = head.find(':'); c != std::string_view::npos) {
        std::string_view port = head.substr(c + 1);
        if (port.empty() || port.size() > 5 || port.front() == '0' ||
            !std::all_of(port.begin(), port.end(), [](char d) { return d >= '0' && d <= '9'; }))
          return false;
      }
      ref = ref.substr(first + 1);
    }
  }
  if (ref.empty()) return false;
  for (;;) {
    auto next = ref.find('/');
    if (!valid_repository_component(ref.substr(0, next))) return false;
    if (next == std::string_view::npos) return true;
    ref = ref.substr(next + 1);
  }
}

bool registry_allowed(std::span<const std::string> allowed, std::string_view image) {
  if (allowed.empty()) return true;
  std::string repo = image_repository(image);
  for (std::string entry : allowed) {
    while (!entry.empty() && entry.back() == '/') entry.pop_back();
    if (entry.empty()) continue;
    auto slash = entry.find('/');
    std::transform(entry.begin(), slash == std::string::npos ? entry.end() : entry.begin() + slash,
                   entry.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (repo == entry || repo.starts_with(entry + "/")) return true;
  }
  return false;
}

namespace {

// The device-selecting names outside the NVIDIA_ prefix rule (env_selects_gpu_devices).
constexpr std::string_view kLegacyCudaVersionEnv = "CUDA_VERSION";
constexpr std::string_view kNvidiaEnvPrefix = "NVIDIA_";
constexpr std::string_view kRequireEnvPrefix = "NVIDIA_REQUIRE_";
constexpr std::string_view kRequireCudaEnv = "NVIDIA_REQUIRE_CUDA";
// NVIDIA_* names known to select no device (besides NVIDIA_REQUIRE_*, NVIDIA_REQUIRE_CUDA
// aside).
constexpr std::string_view kNonSelectingNvidiaEnv[] = {"NVIDIA_DRIVER_CAPABILITIES",
                                                       "NVIDIA_DISABLE_REQUIRE"};

}  // namespace

bool env_selects_gpu_devices(std::string_view name) {
  if (name == kLegacyCudaVersionEnv || name == kRequireCudaEnv) return true;
  if (!name.starts_with(kNvidiaEnvPrefix) || name.starts_with(kRequireEnvPrefix)) return false;
  return std::find(std::begin(kNonSelectingNvidiaEnv), std::end(kNonSelectingNvidiaEnv), name) ==
         std::end(kNonSelectingNvidiaEnv);
}

bool env_prefix_may_select_gpu_devices(std::string_view prefix) {
  if (prefix.empty()) return false;
  // An envFrom key is never empty, so a prefix completes only to longer names: a proper prefix
  // of a selecting name completes to it, and past "NVIDIA_" every prefix but those of the
  // NVIDIA_REQUIRE_ family completes to a name nobody lists as harmless.
  auto completes_to = [&](std::string_view name) {
    return name.size() > prefix.size() && name.starts_with(prefix);
  };
  if (completes_to(kLegacyCudaVersionEnv) || completes_to(kRequireCudaEnv) ||
      completes_to(kNvidiaEnvPrefix))
    return true;
  return prefix.starts_with(kNvidiaEnvPrefix) && !prefix.starts_with(kRequireEnvPrefix);
}

Result<std::string> project_namespace(std::string_view tenant, std::string_view project) {
  std::string ns = fmt::format("{}-{}", tenant, project);
  if (ns.size() > 63)
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("namespace \"{}\" would be longer than 63 characters", ns));
  return ns;
}

bool tenant_names_share_namespaces(std::string_view a, std::string_view b) {
  // "<a>-<p>" == "<b>-<q>" with a shorter than b puts the '-' after a inside b.
  auto extends = [](std::string_view longer, std::string_view shorter) {
    return longer.size() > shorter.size() && longer.starts_with(shorter) &&
           longer[shorter.size()] == '-';
  };
  return extends(a, b) || extends(b, a);
}

namespace {

const Json* member(const Json* obj, std::string_view key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  if (it == obj->end() || it->is_null()) return nullptr;
  return &*it;
}

std::string str(const Json* obj, std::string_view key) {
  const Json* v = member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

template <typename Range>
std::string join(const Range& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

bool is_dedicated(Tier t) {
  return t == Tier::kDedicatedPool || t == Tier::kDedicatedNode || t == Tier::kDedicatedGpu;
}

bool tenant_has_tier(const TenantAdmissionContext& t, auto pred) {
  return std::any_of(t.tiers.begin(), t.tiers.end(), [&](Tier tier) {
    return class_allows(t.isolation_class, tier) && pred(tier);
  });
}

// The GPU resource names this tenant may use, for the denial message.
std::vector<std::string> allowed_gpu_names(const TenantAdmissionContext& t) {
  std::vector<std::string> out;
  if (tenant_has_tier(t, is_dedicated)) out.emplace_back(kWholeGpuResource);
  if (tenant_has_tier(t, [](Tier x) { return x == Tier::kMig; })) {
    if (t.mig_profiles.empty())
      out.push_back(std::string(kMigResourcePrefix) + "<profile>");
    else
      for (const auto& p : t.mig_profiles) out.push_back(std::string(kMigResourcePrefix) + p);
  }
  if (tenant_has_tier(t, [](Tier x) { return x == Tier::kShared; }))
    out.emplace_back(kSharedGpuResource);
  return out;
}

bool gpu_name_allowed(const TenantAdmissionContext& t, std::string_view name) {
  if (name == kWholeGpuResource) return tenant_has_tier(t, is_dedicated);
  if (name == kSharedGpuResource)
    return tenant_has_tier(t, [](Tier x) { return x == Tier::kShared; });
  if (name.starts_with(kMigResourcePrefix)) {
    std::string_view profile = name.substr(kMigResourcePrefix.size());
    if (profile.empty() || !tenant_has_tier(t, [](Tier x) { return x == Tier::kMig; }))
      return false;
    return t.mig_profiles.empty() ||
           std::find(t.mig_profiles.begin(), t.mig_profiles.end(), profile) != t.mig_profiles.end();
  }
  return false;
}

bool is_gpu_resource(std::string_view name) { return name.starts_with("nvidia.com/"); }

struct Containers {
  struct Ref {
    const Json* json;
    std::string name, path;
  };
  std::vector<Ref> list;
};

Containers containers_of(const PodTemplateView& pod) {
  Containers out;
  for (std::string_view kind : {"initContainers", "containers", "ephemeralContainers"}) {
    const Json* arr = member(pod.spec, kind);
    if (arr == nullptr || !arr->is_array()) continue;
    for (size_t i = 0; i < arr->size(); ++i) {
      const Json& c = (*arr)[i];
      if (!c.is_object()) continue;
      out.list.push_back(
          {&c, str(&c, "name"), fmt::format("{}spec.{}[{}]", pod.path_prefix, kind, i)});
    }
  }
  return out;
}

// Tenant rule findings, in a fixed order of controls.
class TenantRules {
 public:
  explicit TenantRules(const TenantAdmissionContext& t) : t_(t) {}

  void check_namespace(std::string_view ns) {
    if (std::find(t_.namespaces.begin(), t_.namespaces.end(), ns) != t_.namespaces.end()) return;
    add("tenant.namespace", "namespace not owned by tenant",
        fmt::format("namespace \"{}\" does not belong to tenant \"{}\"", ns, t_.tenant),
        {"metadata.namespace"});
  }

  void check_pod(const PodTemplateView& pod) {
    Containers cs = containers_of(pod);
    bool requests_gpu = check_gpu_resources(pod, cs);
    check_device_env(cs);
    check_cdi_annotations(pod);
    check_placement(pod, requests_gpu);
    check_images(cs);
  }

  std::vector<Violation> take() { return std::move(out_); }

 private:
  void add(std::string control, std::string reason, std::string detail,
           std::vector<std::string> fields) {
    out_.push_back({std::move(control), std::move(reason), std::move(detail), std::move(fields)});
  }

  // Returns whether any container asks for a GPU resource (allowed or not).
  bool check_gpu_resources(const PodTemplateView& pod, const Containers& cs) {
    std::vector<std::string> bad_names, fields;
    bool any = false;
    auto scan = [&](const Json* resources, const std::string& base) {
      for (std::string_view section : {"requests", "limits"}) {
        const Json* m = member(resources, section);
        if (m == nullptr || !m->is_object()) continue;
        for (const auto& [name, qty] : m->items()) {
          if (!is_gpu_resource(name)) continue;
          any = true;
          if (gpu_name_allowed(t_, name)) continue;
          bad_names.push_back(name);
          fields.push_back(fmt::format("{}.resources.{}[{}]", base, section, name));
        }
      }
    };
    scan(member(pod.spec, "resources"), pod.path_prefix + "spec");
    for (const auto& c : cs.list) scan(member(c.json, "resources"), c.path);
    if (bad_names.empty()) return any;
    std::sort(bad_names.begin(), bad_names.end());
    bad_names.erase(std::unique(bad_names.begin(), bad_names.end()), bad_names.end());
    auto allowed = allowed_gpu_names(t_);
    std::vector<std::string> tiers;
    for (Tier tier : t_.tiers)
      if (class_allows(t_.isolation_class, tier)) tiers.emplace_back(tier_name(tier));
    add("tenant.gpuResources", "GPU resource not allowed for the tenant's tiers",
        fmt::format("{} not allowed for tenant \"{}\" (class {}, tiers {}); allowed: {}",
                    join(bad_names, ", "), t_.tenant, class_name(t_.isolation_class),
                    tiers.empty() ? std::string("none") : join(tiers, ", "),
                    allowed.empty() ? std::string("no GPU resources") : join(allowed, ", ")),
        std::move(fields));
    return true;
  }

  // Environment variables the NVIDIA runtime chooses devices by (env_selects_gpu_devices), on
  // every container kind, and envFrom prefixes that would turn a ConfigMap's keys into them.
  void check_device_env(const Containers& cs) {
    std::vector<std::string> found, fields;
    for (const auto& c : cs.list) {
      std::vector<std::string> names;
      if (const Json* env = member(c.json, "env"); env != nullptr && env->is_array()) {
        for (size_t i = 0; i < env->size(); ++i) {
          std::string name = str(&(*env)[i], "name");
          if (!env_selects_gpu_devices(name)) continue;
          names.push_back(name);
          fields.push_back(fmt::format("{}.env[{}].name", c.path, i));
        }
      }
      if (const Json* from = member(c.json, "envFrom"); from != nullptr && from->is_array()) {
        for (size_t i = 0; i < from->size(); ++i) {
          std::string prefix = str(&(*from)[i], "prefix");
          if (!env_prefix_may_select_gpu_devices(prefix)) continue;
          names.push_back(fmt::format("envFrom prefix {}", prefix));
          fields.push_back(fmt::format("{}.envFrom[{}].prefix", c.path, i));
        }
      }
      if (!names.empty())
        found.push_back(fmt::format("container \"{}\" sets {}", c.name, join(names, ", ")));
    }
    if (found.empty()) return;
    add("tenant.gpuDeviceEnv", "environment selects GPU devices",
        fmt::format("{}; the NVIDIA container runtime picks a container's devices by these "
                    "variables, so the pod could reach GPUs it was not given (request "
                    "nvidia.com/* resources instead)",
                    join(found, "; ")),
        std::move(fields));
  }

  // Pod annotations under cdi.k8s.io/ make containerd and CRI-O inject CDI devices into the
  // pod's containers by name ("nvidia.com/gpu=all"), around the device plugin and the
  // scheduler. The device plugin never needs them on the pod (its own CDI annotations go into
  // the container's runtime config), so any is refused.
  void check_cdi_annotations(const PodTemplateView& pod) {
    const Json* annotations = member(pod.metadata, "annotations");
    if (annotations == nullptr || !annotations->is_object()) return;
    std::vector<std::string> keys, fields;
    for (const auto& [key, value] : annotations->items()) {
      if (!key.starts_with(kCdiAnnotationPrefix)) continue;
      keys.push_back(key);
      fields.push_back(fmt::format("{}metadata.annotations[{}]", pod.path_prefix, key));
    }
    if (keys.empty()) return;
    add("tenant.cdiDevices", "annotation requests CDI devices",
        fmt::format("{} {} the container runtime for CDI devices by name, around the device "
                    "plugin and the scheduler (request nvidia.com/* resources instead)",
                    join(keys, ", "), keys.size() == 1 ? "asks" : "ask"),
        std::move(fields));
  }

  static bool pool_has_label(const PoolPlacement& p, std::string_view key, std::string_view value) {
    return std::any_of(p.node_labels.begin(), p.node_labels.end(),
                       [&](const auto& kv) { return kv.first == key && kv.second == value; });
  }

  // The other-tenant pool a (key, value) node label selects, or nullptr.
  const PoolPlacement* foreign_pool(std::string_view key, std::string_view value) const {
    for (const auto& p : t_.other_pools)
      if (pool_has_label(p, key, value)) return &p;
    return nullptr;
  }
  const PoolPlacement* foreign_node(std::string_view node) const {
    for (const auto& p : t_.other_pools)
      if (std::find(p.nodes.begin(), p.nodes.end(), node) != p.nodes.end()) return &p;
    return nullptr;
  }
  bool own_label(std::string_view key, std::string_view value) const {
    return std::any_of(t_.own_pools.begin(), t_.own_pools.end(),
                       [&](const auto& p) { return pool_has_label(p, key, value); });
  }

  // Scans one nodeSelectorTerm; returns whether it pins an own pool label (key In [own value]).
  bool scan_term(const Json& term, const std::string& base, std::vector<std::string>& targets,
                 std::vector<std::string>& fields) {
    bool pins_own = false;
    const Json* exprs = member(&term, "matchExpressions");
    if (exprs != nullptr && exprs->is_array()) {
      for (size_t i = 0; i < exprs->size(); ++i) {
        const Json& e = (*exprs)[i];
        std::string key = str(&e, "key"), op = str(&e, "operator");
        const Json* values = member(&e, "values");
        if (op != "In" || values == nullptr || !values->is_array()) continue;
        bool all_own = !values->empty();
        for (const auto& v : *values) {
          if (!v.is_string()) continue;
          const std::string& s = v.get_ref<const std::string&>();
          if (const auto* p = foreign_pool(key, s)) {
            targets.push_back(fmt::format("pool \"{}\" ({}={})", p->name, key, s));
            fields.push_back(fmt::format("{}.matchExpressions[{}]", base, i));
          }
          if (!own_label(key, s)) all_own = false;
        }
        if (all_own) pins_own = true;
      }
    }
    const Json* mf = member(&term, "matchFields");
    if (mf != nullptr && mf->is_array()) {
      for (size_t i = 0; i < mf->size(); ++i) {
        const Json& e = (*mf)[i];
        const Json* values = member(&e, "values");
        if (str(&e, "key") != "metadata.name" || str(&e, "operator") != "In" || values == nullptr ||
            !values->is_array())
          continue;
        for (const auto& v : *values) {
          if (!v.is_string()) continue;
          if (const auto* p = foreign_node(v.get_ref<const std::string&>())) {
            targets.push_back(
                fmt::format("node \"{}\" of pool \"{}\"", v.get<std::string>(), p->name));
            fields.push_back(fmt::format("{}.matchFields[{}]", base, i));
          }
        }
      }
    }
    return pins_own;
  }

  void check_placement(const PodTemplateView& pod, bool requests_gpu) {
    const std::string spec = pod.path_prefix + "spec";
    std::vector<std::string> targets, fields;
    bool pins_own = false;
    // nodeSelector
    if (const Json* sel = member(pod.spec, "nodeSelector"); sel != nullptr && sel->is_object()) {
      for (const auto& [k, v] : sel->items()) {
        if (!v.is_string()) continue;
        const std::string& s = v.get_ref<const std::string&>();
        if (const auto* p = foreign_pool(k, s)) {
          targets.push_back(fmt::format("pool \"{}\" ({}={})", p->name, k, s));
          fields.push_back(fmt::format("{}.nodeSelector[{}]", spec, k));
        }
        if (own_label(k, s)) pins_own = true;
      }
    }
    // spec.nodeName bypasses the scheduler altogether.
    if (std::string node = str(pod.spec, "nodeName"); !node.empty()) {
      if (const auto* p = foreign_node(node)) {
        targets.push_back(fmt::format("node \"{}\" of pool \"{}\"", node, p->name));
        fields.push_back(spec + ".nodeName");
      }
      for (const auto& p : t_.own_pools)
        if (std::find(p.nodes.begin(), p.nodes.end(), node) != p.nodes.end()) pins_own = true;
    }
    // Node affinity, required and preferred.
    const Json* na = member(member(pod.spec, "affinity"), "nodeAffinity");
    std::string na_path = spec + ".affinity.nodeAffinity";
    if (const Json* req = member(na, "requiredDuringSchedulingIgnoredDuringExecution")) {
      const Json* terms = member(req, "nodeSelectorTerms");
      if (terms != nullptr && terms->is_array() && !terms->empty()) {
        // Terms are ORed: the pod is pinned to its own pool only if every term pins it.
        bool every_term_own = true;
        for (size_t i = 0; i < terms->size(); ++i) {
          std::string base =
              fmt::format("{}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{}]",
                          na_path, i);
          if (!scan_term((*terms)[i], base, targets, fields)) every_term_own = false;
        }
        if (every_term_own) pins_own = true;
      }
    }
    if (const Json* pref = member(na, "preferredDuringSchedulingIgnoredDuringExecution");
        pref != nullptr && pref->is_array()) {
      for (size_t i = 0; i < pref->size(); ++i) {
        const Json* term = member(&(*pref)[i], "preference");
        if (term == nullptr) continue;
        scan_term(*term,
                  fmt::format("{}.preferredDuringSchedulingIgnoredDuringExecution[{}].preference",
                              na_path, i),
                  targets, fields);
      }
    }
    // Tolerations of another pool's taints.
    if (const Json* tols = member(pod.spec, "tolerations"); tols != nullptr && tols->is_array()) {
      for (size_t i = 0; i < tols->size(); ++i) {
        const Json& tol = (*tols)[i];
        std::string key = str(&tol, "key"), op = str(&tol, "operator"), value = str(&tol, "value"),
                    effect = str(&tol, "effect");
        if (op.empty()) op = "Equal";
        for (const auto& p : t_.other_pools) {
          bool tolerated = std::any_of(p.taints.begin(), p.taints.end(), [&](const auto& taint) {
            bool key_ok = key.empty() ? op == "Exists" : key == taint.key;
            bool value_ok = op == "Exists" || value == taint.value;
            bool effect_ok = effect.empty() || effect == taint.effect;
            return key_ok && value_ok && effect_ok;
          });
          if (!tolerated) continue;
          targets.push_back(fmt::format("taints of pool \"{}\"", p.name));
          fields.push_back(fmt::format("{}.tolerations[{}]", spec, i));
        }
      }
    }
    if (!targets.empty()) {
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      add("tenant.placement", "placement onto another tenant's pool",
          fmt::format("pod targets {}, which belong to other tenants", join(targets, ", ")),
          std::move(fields));
    }
    if (t_.require_own_pool && requests_gpu && !pins_own) {
      std::vector<std::string> options;
      for (const auto& p : t_.own_pools)
        for (const auto& [k, v] : p.node_labels) options.push_back(fmt::format("{}={}", k, v));
      add("tenant.ownPool", "GPU pod not pinned to the tenant's pool",
          fmt::format(
              "class {} requires GPU pods to select the tenant's own nodes by nodeSelector "
              "or required node affinity ({})",
              class_name(t_.isolation_class),
              options.empty() ? std::string("the tenant has no pool") : join(options, " or ")),
          {spec + ".nodeSelector"});
    }
  }

  void check_images(const Containers& cs) {
    std::vector<std::string> bad_images, image_fields, bad_pull, pull_fields;
    for (const auto& c : cs.list) {
      std::string image = str(c.json, "image");
      if (!image.empty() && !registry_allowed(t_.allowed_registries, image)) {
        bad_images.push_back(fmt::format("container \"{}\" uses {}", c.name, image));
        image_fields.push_back(c.path + ".image");
      }
      if (t_.require_pull_always && str(c.json, "imagePullPolicy") != "Always") {
        bad_pull.push_back(fmt::format("\"{}\"", c.name));
        pull_fields.push_back(c.path + ".imagePullPolicy");
      }
    }
    if (!bad_images.empty())
      add("tenant.imageRegistry", "image registry not allowed",
          fmt::format("{}; allowed registries: {}", join(bad_images, ", "),
                      join(t_.allowed_registries, ", ")),
          std::move(image_fields));
    if (!bad_pull.empty())
      add("tenant.imagePullPolicy", "imagePullPolicy != Always",
          fmt::format("{} {} must set imagePullPolicy=Always ({})",
                      bad_pull.size() == 1 ? "container" : "containers", join(bad_pull, ", "),
                      class_requires_pull_always(t_.isolation_class)
                          ? fmt::format("required for class {}", class_name(t_.isolation_class))
                          : std::string("required by the tenant's workload policy")),
          std::move(pull_fields));
  }

  const TenantAdmissionContext& t_;
  std::vector<Violation> out_;
};

std::string version_label(PodSecurityVersion v) {
  return v == kLatestPodSecurityVersion ? std::string("latest") : pod_security_version_name(v);
}

}  // namespace

std::vector<Violation> check_tenant_rules(const Json& object, std::string_view namespace_name,
                                          const TenantAdmissionContext& tenant) {
  TenantRules rules(tenant);
  rules.check_namespace(namespace_name);
  auto pod = pod_template_of(object);
  if (pod && *pod) rules.check_pod(**pod);
  return rules.take();
}

AdmissionVerdict admit_object(const Json& object, std::string_view namespace_name,
                              const TenantAdmissionContext& tenant) {
  AdmissionVerdict verdict;
  auto pod = pod_template_of(object);
  if (!pod) {
    verdict.violations.push_back({"malformed", "malformed object", pod.error().message, {}});
  } else if (*pod) {
    verdict.violations = check_pod_security(*(*pod)->metadata, *(*pod)->spec, tenant.level,
                                            tenant.version, (*pod)->path_prefix);
  }
  size_t pss_count = verdict.violations.size();
  for (auto& v : check_tenant_rules(object, namespace_name, tenant))
    verdict.violations.push_back(std::move(v));
  verdict.allowed = verdict.violations.empty();
  if (verdict.allowed) return verdict;
  auto describe = [](const Violation& v) {
    std::string detail = v.detail;
    std::replace(detail.begin(), detail.end(), '\n', ';');
    return fmt::format("{} ({})", v.reason, detail);
  };
  std::vector<std::string> parts;
  if (pss_count > 0) {
    std::vector<std::string> items;
    for (size_t i = 0; i < pss_count; ++i) items.push_back(describe(verdict.violations[i]));
    parts.push_back(fmt::format("violates PodSecurity \"{}:{}\": {}",
                                pod_security_level_name(tenant.level),
                                version_label(tenant.version), join(items, ", ")));
  }
  if (pss_count < verdict.violations.size()) {
    std::vector<std::string> items;
    for (size_t i = pss_count; i < verdict.violations.size(); ++i)
      items.push_back(describe(verdict.violations[i]));
    parts.push_back(
        fmt::format("violates tenant policy of \"{}\": {}", tenant.tenant, join(items, ", ")));
  }
  verdict.message = join(parts, "; ");
  return verdict;
}

Result<std::string> admission_namespace(const Json& review) {
  if (!review.is_object())
    return fail(ErrorCode::kInvalidArgument, "AdmissionReview is not an object");
  const Json* request = member(&review, "request");
  if (request == nullptr || !request->is_object())
    return fail(ErrorCode::kInvalidArgument, "AdmissionReview has no request object");
  const Json* ns = member(request, "namespace");
  if (ns != nullptr && !ns->is_string())
    return fail(ErrorCode::kInvalidArgument, "request.namespace is not a string");
  return ns == nullptr ? std::string() : ns->get<std::string>();
}

Result<Json> review_admission(const Json& review, const TenantAdmissionContext& tenant) {
  if (!review.is_object())
    return fail(ErrorCode::kInvalidArgument, "AdmissionReview is not an object");
  if (str(&review, "apiVersion") != "admission.k8s.io/v1" ||
      str(&review, "kind") != "AdmissionReview")
    return fail(ErrorCode::kInvalidArgument,
                "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview");
  std::string ns = GP_TRY(admission_namespace(review));
  const Json* request = member(&review, "request");
  const Json* uid = member(request, "uid");
  if (uid == nullptr || !uid->is_string() || uid->get_ref<const std::string&>().empty())
    return fail(ErrorCode::kInvalidArgument, "request.uid is missing");
  const std::string op = str(request, "operation");
  if (op != "CREATE" && op != "UPDATE" && op != "DELETE" && op != "CONNECT")
    return fail(ErrorCode::kInvalidArgument,
                "request.operation must be CREATE, UPDATE, DELETE or CONNECT");

  Json response = {{"uid", *uid}, {"allowed", true}};
  auto envelope = [&] {
    return Json{
        {"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}};
  };
  const std::string sub = str(request, "subResource");
  if (op == "DELETE" || op == "CONNECT" || (!sub.empty() && sub != "ephemeralcontainers"))
    return envelope();
  const Json* object = member(request, "object");
  if (object == nullptr || !object->is_object())
    return fail(ErrorCode::kInvalidArgument, fmt::format("request.object is missing for {}", op));
  // The object's own kind, or the request's when the object leaves it out.
  Json with_kind;
  const Json* subject = object;
  if (str(object, "kind").empty()) {
    with_kind = *object;
    with_kind["kind"] = str(member(request, "kind"), "kind");
    subject = &with_kind;
  }
  AdmissionVerdict verdict = admit_object(*subject, ns, tenant);
  if (verdict.allowed) return envelope();
  Json causes = Json::array();
  for (const auto& v : verdict.violations) {
    std::string message = fmt::format("{}: {}", v.control, v.reason);
    if (v.fields.empty())
      causes.push_back({{"reason", "FieldValueForbidden"}, {"message", message}});
    for (const auto& f : v.fields)
      causes.push_back({{"reason", "FieldValueForbidden"}, {"message", message}, {"field", f}});
  }
  response["allowed"] = false;
  response["status"] = {{"status", "Failure"},
                        {"code", 403},
                        {"reason", "Forbidden"},
                        {"message", verdict.message},
                        {"details", {{"causes", std::move(causes)}}}};
  return envelope();
}

}  // namespace gp::policy
