// Pod Security Standards, control by control, as upstream pod-security-admission defines them
// (k8s.io/pod-security-admission/policy/check_*.go). Each check reads the pod JSON the way the
// Go structs decode it: absent and null are "unset"; a wrong type is a decode error, reported
// as control "malformed". Versions follow upstream's registry: for each check the newest
// revision at or below the policy version runs, and at restricted some baseline checks are
// replaced by their restricted counterparts (OverrideCheckIDs).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <set>

#include "policy/policy.h"

namespace gp::policy {

std::string_view pod_security_level_name(PodSecurityLevel level) {
  switch (level) {
    case PodSecurityLevel::kPrivileged:
      return "privileged";
    case PodSecurityLevel::kBaseline:
      return "baseline";
    case PodSecurityLevel::kRestricted:
      return "restricted";
  }
  return "restricted";
}

std::optional<PodSecurityLevel> parse_pod_security_level(std::string_view name) {
  for (auto l :
       {PodSecurityLevel::kPrivileged, PodSecurityLevel::kBaseline, PodSecurityLevel::kRestricted})
    if (pod_security_level_name(l) == name) return l;
  return std::nullopt;
}

Result<PodSecurityVersion> parse_pod_security_version(std::string_view text) {
  if (text == "latest") return kLatestPodSecurityVersion;
  auto bad = [&] {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("pod security version \"{}\" is not \"latest\" or \"v1.<minor>\"",
                            text.substr(0, 64)));
  };
  if (!text.starts_with("v1.") || text.size() < 4 || text.size() > 6) return bad();
  std::string_view digits = text.substr(3);
  if (digits.size() > 1 && digits.front() == '0') return bad();
  int minor = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), minor);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return bad();
  return PodSecurityVersion{std::min(minor, kLatestPodSecurityVersion.minor)};
}

std::string pod_security_version_name(PodSecurityVersion v) {
  return fmt::format("v1.{}", v.minor);
}

namespace {

// ---- reading the pod as Go would decode it ------------------------------------------------

// Collects decode problems (wrong JSON types) while the checks read the pod.
struct Decoder {
  std::vector<std::string> bad_fields;

  // The member `key` of `obj`, or nullptr when unset (absent or null). `obj` may be null.
  const Json* get(const Json* obj, std::string_view key) const {
    if (obj == nullptr || !obj->is_object()) return nullptr;
    auto it = obj->find(key);
    if (it == obj->end() || it->is_null()) return nullptr;
    return &*it;
  }
  const Json* object(const Json* obj, std::string_view key, const std::string& path) {
    const Json* v = get(obj, key);
    if (v != nullptr && !v->is_object()) {
      bad_fields.push_back(path);
      return nullptr;
    }
    return v;
  }
  const Json* array(const Json* obj, std::string_view key, const std::string& path) {
    const Json* v = get(obj, key);
    if (v != nullptr && !v->is_array()) {
      bad_fields.push_back(path);
      return nullptr;
    }
    return v;
  }
  std::optional<bool> boolean(const Json* obj, std::string_view key, const std::string& path) {
    const Json* v = get(obj, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      bad_fields.push_back(path);
      return std::nullopt;
    }
    return v->get<bool>();
  }
  // A string field; unset reads as "" (Go's zero value) and `set` tells them apart.
  std::string string(const Json* obj, std::string_view key, const std::string& path,
                     bool* set = nullptr) {
    const Json* v = get(obj, key);
    if (set != nullptr) *set = v != nullptr && v->is_string();
    if (v == nullptr) return {};
    if (!v->is_string()) {
      bad_fields.push_back(path);
      if (set != nullptr) *set = false;
      return {};
    }
    return v->get<std::string>();
  }
  std::optional<int64_t> integer(const Json* obj, std::string_view key, const std::string& path) {
    const Json* v = get(obj, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer()) {
      bad_fields.push_back(path);
      return std::nullopt;
    }
    return v->get<int64_t>();
  }
};

// One container of any kind, with its field path ("spec.initContainers[0]").
struct ContainerRef {
  const Json* json;
  std::string name;
  std::string path;
  bool ephemeral = false;
};

std::string quote_join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ", ";
    out += '"';
    out += s;
    out += '"';
  }
  return out;
}

std::string plain_join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

const char* plural(const char* one, const char* many, size_t n) { return n == 1 ? one : many; }

std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// A JSON-pointer-like path segment for a map key: annotations['key'] as upstream prints it.
std::string key_path(const std::string& base, std::string_view key) {
  return fmt::format("{}[{}]", base, key);
}

// Everything one evaluation reads, decoded once.
class Pod {
 public:
  Pod(const Json& metadata, const Json& spec, std::string prefix)
      : metadata_(metadata), spec_(spec), prefix_(std::move(prefix)) {
    pod_sc_ = dec_.object(&spec_, "securityContext", spec_path("securityContext"));
    // Upstream visits init containers, then containers, then ephemeral containers.
    for (std::string_view kind : {"initContainers", "containers", "ephemeralContainers"}) {
      const Json* list = dec_.array(&spec_, kind, spec_path(kind));
      if (list == nullptr) continue;
      for (size_t i = 0; i < list->size(); ++i) {
        std::string path = fmt::format("{}[{}]", spec_path(kind), i);
        const Json& c = (*list)[i];
        if (!c.is_object()) {
          dec_.bad_fields.push_back(path);
          continue;
        }
        containers_.push_back(
            {&c, dec_.string(&c, "name", path + ".name"), path, kind == "ephemeralContainers"});
      }
    }
  }

  Decoder& dec() { return dec_; }
  const Json& metadata() const { return metadata_; }
  const Json& spec() const { return spec_; }
  const Json* pod_sc() const { return pod_sc_; }
  const std::vector<ContainerRef>& containers() const { return containers_; }
  std::string spec_path(std::string_view field) const {
    return fmt::format("{}spec.{}", prefix_, field);
  }
  std::string metadata_path(std::string_view field) const {
    return fmt::format("{}metadata.{}", prefix_, field);
  }
  // A Pod itself (no path prefix), not a workload's template: the API server's Pod-only
  // defaults apply to it.
  bool is_pod() const { return prefix_.empty(); }
  // The container's securityContext, or nullptr.
  const Json* sc(const ContainerRef& c) {
    return dec_.object(c.json, "securityContext", c.path + ".securityContext");
  }
  bool is_windows() {
    const Json* os = dec_.object(&spec_, "os", spec_path("os"));
    return dec_.string(os, "name", spec_path("os.name")) == "windows";
  }
  // spec.hostUsers == false: the pod runs in a user namespace.
  bool in_user_namespace() {
    auto host_users = dec_.boolean(&spec_, "hostUsers", spec_path("hostUsers"));
    return host_users.has_value() && !*host_users;
  }

 private:
  const Json& metadata_;
  const Json& spec_;
  std::string prefix_;
  Decoder dec_;
  const Json* pod_sc_ = nullptr;
  std::vector<ContainerRef> containers_;
};

// The result of one check: allowed when `reason` is empty.
struct Finding {
  std::string reason, detail;
  std::vector<std::string> fields;
};

using CheckFn = std::function<std::optional<Finding>(Pod&)>;

// ---- baseline -------------------------------------------------------------------------------

std::optional<Finding> host_namespaces(Pod& pod) {
  Finding f;
  std::vector<std::string> set;
  for (std::string_view field : {"hostNetwork", "hostPID", "hostIPC"}) {
    auto v = pod.dec().boolean(&pod.spec(), field, pod.spec_path(field));
    if (v.value_or(false)) {
      set.push_back(fmt::format("{}=true", field));
      f.fields.push_back(pod.spec_path(field));
    }
  }
  if (set.empty()) return std::nullopt;
  f.reason = "host namespaces";
  f.detail = plain_join(set, ", ");
  return f;
}

std::optional<Finding> privileged(Pod& pod) {
  Finding f;
  std::vector<std::string> bad;
  for (const auto& c : pod.containers()) {
    const Json* sc = pod.sc(c);
    std::string path = c.path + ".securityContext.privileged";
    if (pod.dec().boolean(sc, "privileged", path).value_or(false)) {
      bad.push_back(c.name);
      f.fields.push_back(path);
    }
  }
  if (bad.empty()) return std::nullopt;
  f.reason = "privileged";
  f.detail = fmt::format("{} {} must not set securityContext.privileged=true",
                         plural("container", "containers", bad.size()), quote_join(bad));
  return f;
}

// Reads securityContext.capabilities.{add,drop} of a container.
struct Caps {
  bool present = false;  // securityContext.capabilities set
  std::vector<std::string> add, drop;
};
Caps read_caps(Pod& pod, const ContainerRef& c) {
  Caps caps;
  const Json* sc = pod.sc(c);
  std::string base = c.path + ".securityContext.capabilities";
  const Json* cap = pod.dec().object(sc, "capabilities", base);
  if (cap == nullptr) return caps;
  caps.present = true;
  for (auto [key, out] : {std::pair{"add", &caps.add}, std::pair{"drop", &caps.drop}}) {
    const Json* list = pod.dec().array(cap, key, base + "." + key);
    if (list == nullptr) continue;
    for (size_t i = 0; i < list->size(); ++i) {
      if (!(*list)[i].is_string()) {
        pod.dec().bad_fields.push_back(fmt::format("{}.{}[{}]", base, key, i));
        continue;
      }
      out->push_back((*list)[i].get<std::string>());
    }
  }
  return caps;
}

std::optional<Finding> capabilities_baseline(Pod& pod) {
  static const std::set<std::string, std::less<>> kAllowed = {
      "AUDIT_WRITE",      "CHOWN",   "DAC_OVERRIDE", "FOWNER",  "FSETID", "KILL",      "MKNOD",
      "NET_BIND_SERVICE", "SETFCAP", "SETGID",       "SETPCAP", "SETUID", "SYS_CHROOT"};
  Finding f;
  std::vector<std::string> bad, caps_seen;
  for (const auto& c : pod.containers()) {
    Caps caps = read_caps(pod, c);
    bool found = false;
    for (size_t i = 0; i < caps.add.size(); ++i) {
      if (kAllowed.contains(caps.add[i])) continue;
      found = true;
      caps_seen.push_back(caps.add[i]);
      f.fields.push_back(fmt::format("{}.securityContext.capabilities.add[{}]", c.path, i));
    }
    if (found) bad.push_back(c.name);
  }
  if (bad.empty()) return std::nullopt;
  f.reason = "non-default capabilities";
  f.detail = fmt::format("{} {} must not include {} in securityContext.capabilities.add",
                         plural("container", "containers", bad.size()), quote_join(bad),
                         quote_join(sorted_unique(caps_seen)));
  return f;
}

struct VolumeRef {
  const Json* json;
  std::string name, path;
};
std::vector<VolumeRef> volumes(Pod& pod) {
  std::vector<VolumeRef> out;
  const Json* list = pod.dec().array(&pod.spec(), "volumes", pod.spec_path("volumes"));
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    std::string path = fmt::format("{}[{}]", pod.spec_path("volumes"), i);
    if (!(*list)[i].is_object()) {
      pod.dec().bad_fields.push_back(path);
      continue;
    }
    out.push_back({&(*list)[i], pod.dec().string(&(*list)[i], "name", path + ".name"), path});
  }
  return out;
}

std::optional<Finding> host_path_volumes(Pod& pod) {
  Finding f;
  std::vector<std::string> bad;
  for (const auto& v : volumes(pod)) {
    if (pod.dec().get(v.json, "hostPath") == nullptr) continue;
    bad.push_back(v.name);
    f.fields.push_back(v.path + ".hostPath");
  }
  if (bad.empty()) return std::nullopt;
  f.reason = "hostPath volumes";
  f.detail = fmt::format("{} {}", plural("volume", "volumes", bad.size()), quote_join(bad));
  return f;
}

std::optional<Finding> host_ports(Pod& pod) {
  Finding f;
  std::vector<std::string> bad, ports;
  // With hostNetwork the API server defaults each unset hostPort of a Pod's containers and init
  // containers to its containerPort (SetDefaults_Pod; templates no longer since v1.28), so the
  // webhook sees those ports as host ports.
  const bool host_network_ports =
      pod.is_pod() &&
      pod.dec().boolean(&pod.spec(), "hostNetwork", pod.spec_path("hostNetwork")).value_or(false);
  for (const auto& c : pod.containers()) {
    const Json* list = pod.dec().array(c.json, "ports", c.path + ".ports");
    if (list == nullptr) continue;
    bool found = false;
    for (size_t i = 0; i < list->size(); ++i) {
      std::string path = fmt::format("{}.ports[{}].hostPort", c.path, i);
      int64_t port = pod.dec().integer(&(*list)[i], "hostPort", path).value_or(0);
      if (port == 0 && host_network_ports && !c.ephemeral)
        port = pod.dec()
                   .integer(&(*list)[i], "containerPort",
                            fmt::format("{}.ports[{}].containerPort", c.path, i))
                   .value_or(0);
      if (port == 0) continue;
      found = true;
      ports.push_back(std::to_string(port));
      f.fields.push_back(path);
    }
    if (found) bad.push_back(c.name);
  }
  if (bad.empty()) return std::nullopt;
  // Upstream lists the distinct ports as a sorted string set.
  ports = sorted_unique(ports);
  f.reason = "hostPort";
  f.detail = fmt::format("{} {} {} {} {}", plural("container", "containers", bad.size()),
                         quote_join(bad), plural("uses", "use", bad.size()),
                         plural("hostPort", "hostPorts", ports.size()), plain_join(ports, ", "));
  return f;
}

std::optional<Finding> app_armor_profile(Pod& pod) {
  Finding f;
  std::vector<std::string> setters, values;
  auto allowed_type = [](const std::string& t) {
    return t == "RuntimeDefault" || t == "Localhost";
  };
  {
    std::string base = pod.spec_path("securityContext.appArmorProfile");
    const Json* p = pod.dec().object(pod.pod_sc(), "appArmorProfile", base);
    if (p != nullptr) {
      std::string t = pod.dec().string(p, "type", base + ".type");
      if (!allowed_type(t)) {
        setters.push_back("pod");
        values.push_back(t);
        f.fields.push_back(base + ".type");
      }
    }
  }
  std::vector<std::string> bad;
  for (const auto& c : pod.containers()) {
    std::string base = c.path + ".securityContext.appArmorProfile";
    const Json* p = pod.dec().object(pod.sc(c), "appArmorProfile", base);
    if (p == nullptr) continue;
    std::string t = pod.dec().string(p, "type", base + ".type");
    if (allowed_type(t)) continue;
    bad.push_back(c.name);
    values.push_back(t);
    f.fields.push_back(base + ".type");
  }
  if (!bad.empty())
    setters.push_back(
        fmt::format("{} {}", plural("container", "containers", bad.size()), quote_join(bad)));
  values = sorted_unique(values);
  // Annotations: container.apparmor.security.beta.kubernetes.io/<container> may only be empty,
  // runtime/default or localhost/<profile>.
  const Json* ann =
      pod.dec().object(&pod.metadata(), "annotations", pod.metadata_path("annotations"));
  std::vector<std::string> bad_ann;
  if (ann != nullptr) {
    constexpr std::string_view kPrefix = "container.apparmor.security.beta.kubernetes.io/";
    for (const auto& [k, v] : ann->items()) {
      if (!k.starts_with(kPrefix)) continue;
      if (!v.is_string()) {
        pod.dec().bad_fields.push_back(key_path(pod.metadata_path("annotations"), k));
        continue;
      }
      const std::string& s = v.get_ref<const std::string&>();
      if (s.empty() || s == "runtime/default" || s.starts_with("localhost/")) continue;
      bad_ann.push_back(fmt::format("{}=\"{}\"", k, s));
      f.fields.push_back(key_path(pod.metadata_path("annotations"), k));
    }
  }
  if (!bad_ann.empty()) {
    std::sort(bad_ann.begin(), bad_ann.end());
    values.insert(values.end(), bad_ann.begin(), bad_ann.end());
    setters.push_back(plural("annotation", "annotations", bad_ann.size()));
  }
  if (setters.empty()) return std::nullopt;
  f.reason = plural("forbidden AppArmor profile", "forbidden AppArmor profiles", values.size());
  f.detail = fmt::format("{} must not set AppArmor profile type to {}",
                         plain_join(setters, " and "), quote_join(values));
  return f;
}

std::optional<Finding> se_linux_options(Pod& pod, int minor) {
  std::set<std::string, std::less<>> allowed = {"", "container_t", "container_init_t",
                                                "container_kvm_t"};
  if (minor >= 31) allowed.insert("container_engine_t");
  Finding f;
  std::vector<std::string> setters, types;
  bool set_user = false, set_role = false;
  auto valid = [&](const Json* opts, const std::string& base) {
    bool ok = true;
    std::string type = pod.dec().string(opts, "type", base + ".type");
    if (!allowed.contains(type)) {
      ok = false;
      types.push_back(type);
      f.fields.push_back(base + ".type");
    }
    if (!pod.dec().string(opts, "user", base + ".user").empty()) {
      ok = false;
      set_user = true;
      f.fields.push_back(base + ".user");
    }
    if (!pod.dec().string(opts, "role", base + ".role").empty()) {
      ok = false;
      set_role = true;
      f.fields.push_back(base + ".role");
    }
    return ok;
  };
  std::string pod_base = pod.spec_path("securityContext.seLinuxOptions");
  const Json* pod_opts = pod.dec().object(pod.pod_sc(), "seLinuxOptions", pod_base);
  if (pod_opts != nullptr && !valid(pod_opts, pod_base)) setters.push_back("pod");
  std::vector<std::string> bad;
  for (const auto& c : pod.containers()) {
    std::string base = c.path + ".securityContext.seLinuxOptions";
    const Json* opts = pod.dec().object(pod.sc(c), "seLinuxOptions", base);
    if (opts != nullptr && !valid(opts, base)) bad.push_back(c.name);
  }
  if (!bad.empty())
    setters.push_back(
        fmt::format("{} {}", plural("container", "containers", bad.size()), quote_join(bad)));
  if (setters.empty()) return std::nullopt;
  std::vector<std::string> data;
  types = sorted_unique(types);
  if (!types.empty())
    data.push_back(fmt::format("{} {}", plural("type", "types", types.size()), quote_join(types)));
  if (set_user) data.push_back("user may not be set");
  if (set_role) data.push_back("role may not be set");
  f.reason = "seLinuxOptions";
  f.detail = fmt::format("{} set forbidden securityContext.seLinuxOptions: {}",
                         plain_join(setters, " and "), plain_join(data, "; "));
  return f;
}

// procMount other than Default (unset is fine).
std::optional<Finding> proc_mount_strict(Pod& pod) {
  Finding f;
  std::vector<std::string> bad, kinds;
  for (const auto& c : pod.containers()) {
    bool set = false;
    std::string path = c.path + ".securityContext.procMount";
    std::string v = pod.dec().string(pod.sc(c), "procMount", path, &set);
    if (!set || v == "Default") continue;
    bad.push_back(c.name);
    kinds.push_back(v);
    f.fields.push_back(path);
  }
  if (bad.empty()) return std::nullopt;
  f.reason = "procMount";
  f.detail = fmt::format("{} {} must not set securityContext.procMount to {}",
                         plural("container", "containers", bad.size()), quote_join(bad),
                         quote_join(sorted_unique(kinds)));
  return f;
}

// Baseline procMount: from v1.35 a pod in a user namespace (hostUsers: false) may set any.
std::optional<Finding> proc_mount_baseline(Pod& pod, int minor) {
  if (minor >= 35 && pod.in_user_namespace()) return std::nullopt;
  return proc_mount_strict(pod);
}

bool valid_seccomp_type(const std::string& t) { return t == "RuntimeDefault" || t == "Localhost"; }

// Seccomp before v1.19: the alpha annotations.
std::optional<Finding> seccomp_baseline_annotations(Pod& pod) {
  auto valid = [](const std::string& v) {
    return v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
  };
  const Json* ann =
      pod.dec().object(&pod.metadata(), "annotations", pod.metadata_path("annotations"));
  Finding f;
  std::vector<std::string> bad;
  auto check = [&](const std::string& key) {
    const Json* v = pod.dec().get(ann, key);
    if (v == nullptr) return;
    std::string s = v->is_string() ? v->get<std::string>() : std::string();
    if (valid(s)) return;
    bad.push_back(fmt::format("{}=\"{}\"", key, s));
    f.fields.push_back(key_path(pod.metadata_path("annotations"), key));
  };
  check("seccomp.security.alpha.kubernetes.io/pod");
  for (const auto& c : pod.containers())
    check("container.seccomp.security.alpha.kubernetes.io/" + c.name);
  if (bad.empty()) return std::nullopt;
  bad = sorted_unique(bad);
  f.reason = "seccompProfile";
  f.detail = fmt::format("forbidden {} {}", plural("annotation", "annotations", bad.size()),
                         plain_join(bad, ", "));
  return f;
}

// Seccomp fields: baseline forbids explicit bad types; restricted also requires a type on the
// pod or on every container.
std::optional<Finding> seccomp_fields(Pod& pod, bool restricted) {
  Finding f;
  std::vector<std::string> setters, values, implicit;
  bool pod_set = false;
  std::string pod_base = pod.spec_path("securityContext.seccompProfile");
  const Json* pod_profile = pod.dec().object(pod.pod_sc(), "seccompProfile", pod_base);
  if (pod_profile != nullptr) {
    std::string t = pod.dec().string(pod_profile, "type", pod_base + ".type");
    if (valid_seccomp_type(t)) {
      pod_set = true;
    } else {
      setters.push_back("pod");
      values.push_back(t);
      f.fields.push_back(pod_base + ".type");
    }
  }
  std::vector<std::string> explicit_bad;
  std::vector<std::string> implicit_fields;
  for (const auto& c : pod.containers()) {
    std::string base = c.path + ".securityContext.seccompProfile";
    const Json* profile = pod.dec().object(pod.sc(c), "seccompProfile", base);
    if (profile != nullptr) {
      std::string t = pod.dec().string(profile, "type", base + ".type");
      if (!valid_seccomp_type(t)) {
        explicit_bad.push_back(c.name);
        values.push_back(t);
        f.fields.push_back(base + ".type");
      }
    } else if (restricted && !pod_set) {
      implicit.push_back(c.name);
      implicit_fields.push_back(base + ".type");
    }
  }
  if (!explicit_bad.empty())
    setters.push_back(fmt::format("{} {}", plural("container", "containers", explicit_bad.size()),
                                  quote_join(explicit_bad)));
  f.reason = "seccompProfile";
  if (!setters.empty()) {
    f.detail = fmt::format("{} must not set securityContext.seccompProfile.type to {}",
                           plain_join(setters, " and "), quote_join(sorted_unique(values)));
    return f;
  }
  if (!implicit.empty()) {
    f.fields = implicit_fields;
    f.detail = fmt::format(
        "pod or {} {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or "
        "\"Localhost\"",
        plural("container", "containers", implicit.size()), quote_join(implicit));
    return f;
  }
  return std::nullopt;
}

std::optional<Finding> sysctls(Pod& pod, int minor) {
  std::set<std::string, std::less<>> allowed = {
      "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
      "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"};
  if (minor >= 27) allowed.insert("net.ipv4.ip_local_reserved_ports");
  if (minor >= 29)
    allowed.insert({"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                    "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"});
  if (minor >= 32) allowed.insert({"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"});
  if (minor >= 37)
    allowed.insert({"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"});
  std::string base = pod.spec_path("securityContext.sysctls");
  const Json* list = pod.dec().array(pod.pod_sc(), "sysctls", base);
  if (list == nullptr) return std::nullopt;
  Finding f;
  std::vector<std::string> bad;
  for (size_t i = 0; i < list->size(); ++i) {
    std::string path = fmt::format("{}[{}].name", base, i);
    std::string name = pod.dec().string(&(*list)[i], "name", path);
    if (allowed.contains(name)) continue;
    bad.push_back(name);
    f.fields.push_back(path);
  }
  if (bad.empty()) return std::nullopt;
  f.reason = "forbidden sysctls";
  f.detail = plain_join(bad, ", ");
  return f;
}

std::optional<Finding> windows_host_process(Pod& pod) {
  Finding f;
  std::vector<std::string> bad;
  bool pod_bad = false;
  auto host_process = [&](const Json* sc, const std::string& sc_path) {
    const Json* wo = pod.dec().object(sc, "windowsOptions", sc_path + ".windowsOptions");
    std::string path = sc_path + ".windowsOptions.hostProcess";
    bool on = pod.dec().boolean(wo, "hostProcess", path).value_or(false);
    if (on) f.fields.push_back(path);
    return on;
  };
  pod_bad = host_process(pod.pod_sc(), pod.spec_path("securityContext"));
  for (const auto& c : pod.containers())
    if (host_process(pod.sc(c), c.path + ".securityContext")) bad.push_back(c.name);
  if (!pod_bad && bad.empty()) return std::nullopt;
  std::vector<std::string> setters;
  if (pod_bad) setters.push_back("pod");
  if (!bad.empty())
    setters.push_back(
        fmt::format("{} {}", plural("container", "containers", bad.size()), quote_join(bad)));
  f.reason = "hostProcess";
  f.detail = fmt::format("{} must not set securityContext.windowsOptions.hostProcess=true",
                         plain_join(setters, " and "));
  return f;
}

std::optional<Finding> host_probes_and_lifecycle(Pod& pod) {
  Finding f;
  std::vector<std::string> bad, hosts;
  for (const auto& c : pod.containers()) {
    bool found = false;
    auto check_handler = [&](const Json* handler, const std::string& base) {
      for (std::string_view kind : {"httpGet", "tcpSocket"}) {
        std::string kpath = fmt::format("{}.{}", base, kind);
        const Json* h = pod.dec().object(handler, kind, kpath);
        std::string host = pod.dec().string(h, "host", kpath + ".host");
        if (host.empty()) continue;
        found = true;
        hosts.push_back(host);
        f.fields.push_back(kpath + ".host");
      }
    };
    for (std::string_view probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
      std::string base = fmt::format("{}.{}", c.path, probe);
      check_handler(pod.dec().object(c.json, probe, base), base);
    }
    const Json* lifecycle = pod.dec().object(c.json, "lifecycle", c.path + ".lifecycle");
    for (std::string_view hook : {"postStart", "preStop"}) {
      std::string base = fmt::format("{}.lifecycle.{}", c.path, hook);
      check_handler(pod.dec().object(lifecycle, hook, base), base);
    }
    if (found) bad.push_back(c.name);
  }
  if (bad.empty()) return std::nullopt;
  bad = sorted_unique(bad);
  hosts = sorted_unique(hosts);
  f.reason = "probe or lifecycle host";
  f.detail =
      fmt::format("{} {} {} {} {}", plural("container", "containers", bad.size()), quote_join(bad),
                  plural("uses", "use", bad.size()),
                  plural("probe or lifecycle host", "probe or lifecycle hosts", hosts.size()),
                  quote_join(hosts));
  return f;
}

// ---- restricted -----------------------------------------------------------------------------

// Whether a volume sets nothing but its name (null reads as unset, as Go decodes it).
bool names_no_source(const Json& volume) {
  for (const auto& [key, value] : volume.items())
    if (key != "name" && !value.is_null()) return false;
  return true;
}

std::optional<Finding> restricted_volumes(Pod& pod) {
  // Volume sources restricted pods may use; everything else (hostPath, nfs, ...) is refused.
  static const std::vector<std::string_view> kAllowed = {
      "configMap", "csi",   "downwardAPI",           "emptyDir",
      "ephemeral", "image", "persistentVolumeClaim", "projected",
      "secret"};
  // Upstream names the first restricted source it finds, in the order of the PodSpec fields.
  static const std::vector<std::string_view> kRestricted = {"hostPath",
                                                            "gcePersistentDisk",
                                                            "awsElasticBlockStore",
                                                            "gitRepo",
                                                            "nfs",
                                                            "iscsi",
                                                            "glusterfs",
                                                            "rbd",
                                                            "flexVolume",
                                                            "cinder",
                                                            "cephfs",
                                                            "flocker",
                                                            "fc",
                                                            "azureFile",
                                                            "vsphereVolume",
                                                            "quobyte",
                                                            "azureDisk",
                                                            "photonPersistentDisk",
                                                            "portworxVolume",
                                                            "scaleIO",
                                                            "storageos"};
  Finding f;
  std::vector<std::string> bad, types;
  for (const auto& v : volumes(pod)) {
    // A volume naming no source is an emptyDir: the API server defaults it so
    // (SetDefaults_Volume) before any admission check sees it, and upstream's fixtures admit
    // it. A source this list does not know stays "unknown" and refused (fail closed).
    if (names_no_source(*v.json)) continue;
    bool ok = std::any_of(kAllowed.begin(), kAllowed.end(),
                          [&](std::string_view k) { return pod.dec().get(v.json, k) != nullptr; });
    if (ok) continue;
    bad.push_back(v.name);
    std::string type = "unknown";
    for (auto k : kRestricted) {
      if (pod.dec().get(v.json, k) != nullptr) {
        type = std::string(k);
        break;
      }
    }
    types.push_back(type);
    f.fields.push_back(v.path + "." + type);
  }
  if (bad.empty()) return std::nullopt;
  types = sorted_unique(types);
  f.reason = "restricted volume types";
  f.detail = fmt::format("{} {} {} {} {}", plural("volume", "volumes", bad.size()), quote_join(bad),
                         plural("uses", "use", bad.size()),
                         plural("restricted volume type", "restricted volume types", types.size()),
                         quote_join(types));
  return f;
}

std::optional<Finding> allow_privilege_escalation(Pod& pod, int minor) {
  if (minor >= 25 && pod.is_windows()) return std::nullopt;
  Finding f;
  std::vector<std::string> bad;
  for (const auto& c : pod.containers()) {
    std::string path = c.path + ".securityContext.allowPrivilegeEscalation";
    auto v = pod.dec().boolean(pod.sc(c), "allowPrivilegeEscalation", path);
    if (v.has_value() && !*v) continue;
    bad.push_back(c.name);
    f.fields.push_back(path);
  }
  if (bad.empty()) return std::nullopt;
  f.reason = "allowPrivilegeEscalation != false";
  f.detail = fmt::format("{} {} must set securityContext.allowPrivilegeEscalation=false",
                         plural("container", "containers", bad.size()), quote_join(bad));
  return f;
}

std::optional<Finding> run_as_non_root(Pod& pod, int minor) {
  if (minor >= 35 && pod.in_user_namespace()) return std::nullopt;
  Finding f;
  std::vector<std::string> setters;
  bool pod_true = false;
  std::string pod_path = pod.spec_path("securityContext.runAsNonRoot");
  auto pod_v = pod.dec().boolean(pod.pod_sc(), "runAsNonRoot", pod_path);
  if (pod_v.has_value()) {
    if (*pod_v) {
      pod_true = true;
    } else {
      setters.push_back("pod");
      f.fields.push_back(pod_path);
    }
  }
  std::vector<std::string> explicit_bad, implicit_bad, implicit_fields;
  for (const auto& c : pod.containers()) {
    std::string path = c.path + ".securityContext.runAsNonRoot";
    auto v = pod.dec().boolean(pod.sc(c), "runAsNonRoot", path);
    if (v.has_value()) {
      if (!*v) {
        explicit_bad.push_back(c.name);
        f.fields.push_back(path);
      }
    } else if (!pod_true) {
      implicit_bad.push_back(c.name);
      implicit_fields.push_back(path);
    }
  }
  if (!explicit_bad.empty())
    setters.push_back(fmt::format("{} {}", plural("container", "containers", explicit_bad.size()),
                                  quote_join(explicit_bad)));
  std::vector<std::string> details;
  if (!setters.empty())
    details.push_back(fmt::format("{} must not set securityContext.runAsNonRoot=false",
                                  plain_join(setters, " and ")));
  if (!implicit_bad.empty()) {
    details.push_back(fmt::format("pod or {} {} must set securityContext.runAsNonRoot=true",
                                  plural("container", "containers", implicit_bad.size()),
                                  quote_join(implicit_bad)));
    f.fields.insert(f.fields.end(), implicit_fields.begin(), implicit_fields.end());
  }
  if (details.empty()) return std::nullopt;
  f.reason = "runAsNonRoot != true";
  f.detail = plain_join(details, "\n");
  return f;
}

std::optional<Finding> run_as_user(Pod& pod, int minor) {
  if (minor >= 35 && pod.in_user_namespace()) return std::nullopt;
  Finding f;
  std::vector<std::string> setters, bad;
  std::string pod_path = pod.spec_path("securityContext.runAsUser");
  if (pod.dec().integer(pod.pod_sc(), "runAsUser", pod_path) == 0) {
    setters.push_back("pod");
    f.fields.push_back(pod_path);
  }
  for (const auto& c : pod.containers()) {
    std::string path = c.path + ".securityContext.runAsUser";
    if (pod.dec().integer(pod.sc(c), "runAsUser", path) != 0) continue;
    bad.push_back(c.name);
    f.fields.push_back(path);
  }
  if (!bad.empty())
    setters.push_back(
        fmt::format("{} {}", plural("container", "containers", bad.size()), quote_join(bad)));
  if (setters.empty()) return std::nullopt;
  f.reason = "runAsUser=0";
  f.detail = fmt::format("{} must not set runAsUser=0", plain_join(setters, " and "));
  return f;
}

std::optional<Finding> capabilities_restricted(Pod& pod, int minor) {
  if (minor >= 25 && pod.is_windows()) return std::nullopt;
  Finding f;
  std::vector<std::string> missing_drop, adding, forbidden;
  for (const auto& c : pod.containers()) {
    Caps caps = read_caps(pod, c);
    std::string base = c.path + ".securityContext.capabilities";
    if (std::find(caps.drop.begin(), caps.drop.end(), "ALL") == caps.drop.end()) {
      missing_drop.push_back(c.name);
      f.fields.push_back(base + ".drop");
    }
    bool found = false;
    for (size_t i = 0; i < caps.add.size(); ++i) {
      if (caps.add[i] == "NET_BIND_SERVICE") continue;
      found = true;
      forbidden.push_back(caps.add[i]);
      f.fields.push_back(fmt::format("{}.add[{}]", base, i));
    }
    if (found) adding.push_back(c.name);
  }
  std::vector<std::string> details;
  if (!missing_drop.empty())
    details.push_back(fmt::format("{} {} must set securityContext.capabilities.drop=[\"ALL\"]",
                                  plural("container", "containers", missing_drop.size()),
                                  quote_join(missing_drop)));
  if (!adding.empty())
    details.push_back(fmt::format("{} {} must not include {} in securityContext.capabilities.add",
                                  plural("container", "containers", adding.size()),
                                  quote_join(adding), quote_join(sorted_unique(forbidden))));
  if (details.empty()) return std::nullopt;
  f.reason = "unrestricted capabilities";
  f.detail = plain_join(details, "; ");
  return f;
}

struct CheckEntry {
  std::string_view id;
  CheckFn fn;
};

// The checks that run at `level` and policy version `minor`, in upstream's registry order.
std::vector<CheckEntry> checks_for(PodSecurityLevel level, int minor) {
  std::vector<CheckEntry> out;
  if (level == PodSecurityLevel::kPrivileged) return out;
  const bool restricted = level == PodSecurityLevel::kRestricted;
  // Baseline checks, less the ones a restricted check overrides at this version.
  out.push_back({"hostNamespaces", host_namespaces});
  out.push_back({"privileged", privileged});
  if (!(restricted && minor >= 22)) out.push_back({"capabilities_baseline", capabilities_baseline});
  if (!restricted) out.push_back({"hostPathVolumes", host_path_volumes});
  out.push_back({"hostPorts", host_ports});
  out.push_back({"appArmorProfile", app_armor_profile});
  out.push_back({"seLinuxOptions", [minor](Pod& p) { return se_linux_options(p, minor); }});
  if (!(restricted && minor >= 35))
    out.push_back({"procMount", [minor](Pod& p) { return proc_mount_baseline(p, minor); }});
  if (!(restricted && minor >= 19)) {
    if (minor >= 19)
      out.push_back({"seccompProfile_baseline", [](Pod& p) { return seccomp_fields(p, false); }});
    else
      out.push_back({"seccompProfile_baseline", seccomp_baseline_annotations});
  }
  out.push_back({"sysctls", [minor](Pod& p) { return sysctls(p, minor); }});
  out.push_back({"windowsHostProcess", windows_host_process});
  if (minor >= 34) out.push_back({"hostProbesAndHostLifecycle", host_probes_and_lifecycle});
  if (!restricted) return out;
  out.push_back({"restrictedVolumes", restricted_volumes});
  if (minor >= 8)
    out.push_back({"allowPrivilegeEscalation",
                   [minor](Pod& p) { return allow_privilege_escalation(p, minor); }});
  out.push_back({"runAsNonRoot", [minor](Pod& p) { return run_as_non_root(p, minor); }});
  if (minor >= 23) out.push_back({"runAsUser", [minor](Pod& p) { return run_as_user(p, minor); }});
  if (minor >= 19) {
    auto windows_exempt = minor >= 25;
    out.push_back({"seccompProfile_restricted", [windows_exempt](Pod& p) -> std::optional<Finding> {
                     if (windows_exempt && p.is_windows()) return std::nullopt;
                     return seccomp_fields(p, true);
                   }});
  }
  if (minor >= 22)
    out.push_back(
        {"capabilities_restricted", [minor](Pod& p) { return capabilities_restricted(p, minor); }});
  if (minor >= 35) out.push_back({"procMount_restricted", proc_mount_strict});
  return out;
}

}  // namespace

std::vector<Violation> check_pod_security(const Json& pod_metadata, const Json& pod_spec,
                                          PodSecurityLevel level, PodSecurityVersion version,
                                          std::string_view path_prefix) {
  static const Json kEmpty = Json::object();
  const Json& metadata = pod_metadata.is_object() ? pod_metadata : kEmpty;
  std::vector<Violation> out;
  if (level == PodSecurityLevel::kPrivileged) return out;
  Pod pod(metadata, pod_spec.is_object() ? pod_spec : kEmpty, std::string(path_prefix));
  if (!pod_spec.is_object()) pod.dec().bad_fields.push_back(std::string(path_prefix) + "spec");
  int minor = std::clamp(version.minor, 0, kLatestPodSecurityVersion.minor);
  for (const auto& check : checks_for(level, minor)) {
    auto finding = check.fn(pod);
    if (!finding) continue;
    out.push_back({std::string(check.id), std::move(finding->reason), std::move(finding->detail),
                   std::move(finding->fields)});
  }
  auto bad = sorted_unique(pod.dec().bad_fields);
  if (!bad.empty())
    out.push_back({"malformed", "malformed pod",
                   fmt::format("{} {} of the wrong type", plural("field", "fields", bad.size()),
                               plain_join(bad, ", ")),
                   bad});
  return out;
}

Result<std::optional<PodTemplateView>> pod_template_of(const Json& object) {
  static const Json kEmpty = Json::object();
  if (!object.is_object()) return fail(ErrorCode::kInvalidArgument, "object is not a JSON object");
  auto kind_it = object.find("kind");
  if (kind_it == object.end() || !kind_it->is_string())
    return fail(ErrorCode::kInvalidArgument, "object has no string kind");
  const std::string& kind = kind_it->get_ref<const std::string&>();
  // Where each kind keeps its pod: the path to the object holding metadata + spec.
  std::vector<std::string_view> steps;
  std::string prefix;
  if (kind == "Pod") {
    prefix = "";
  } else if (kind == "Deployment" || kind == "ReplicaSet" || kind == "StatefulSet" ||
             kind == "DaemonSet" || kind == "Job" || kind == "ReplicationController") {
    steps = {"spec", "template"};
    prefix = "spec.template.";
  } else if (kind == "CronJob") {
    steps = {"spec", "jobTemplate", "spec", "template"};
    prefix = "spec.jobTemplate.spec.template.";
  } else if (kind == "PodTemplate") {
    steps = {"template"};
    prefix = "template.";
  } else {
    return std::optional<PodTemplateView>{};
  }
  const Json* holder = &object;
  for (auto step : steps) {
    auto it = holder->find(step);
    if (it == holder->end() || !it->is_object())
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} has no object at {}", kind, prefix.empty() ? "spec" : prefix));
    holder = &*it;
  }
  auto spec = holder->find("spec");
  if (spec == holder->end() || !spec->is_object())
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("{} has no pod spec at {}spec", kind, prefix));
  PodTemplateView view;
  auto md = holder->find("metadata");
  view.metadata = (md != holder->end() && md->is_object()) ? &*md : &kEmpty;
  view.spec = &*spec;
  view.path_prefix = prefix;
  return std::optional<PodTemplateView>(view);
}

}  // namespace gp::policy
