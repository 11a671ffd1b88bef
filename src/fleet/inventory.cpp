#include "fleet/inventory.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace gp::fleet {

namespace {
// XIDs that mean the GPU needs attention (NVIDIA's XID catalog: 48 DBE ECC, 63/64 row
// remapping, 74 NVLink, 79 fallen off the bus, 92 high SBE rate, 94/95 contained/uncontained
// ECC, 119/120 GSP errors).
bool critical_xid(int xid) {
  static const std::set<int> kCritical = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120};
  return kCritical.contains(xid);
}
}  // namespace

bool GpuHealth::healthy() const { return reason().empty(); }

std::string GpuHealth::reason() const {
  std::vector<std::string> parts;
  for (int x : xid_errors)
    if (critical_xid(x)) parts.push_back(fmt::format("XID {}", x));
  if (ecc_uncorrected > 0)
    parts.push_back(fmt::format("{} uncorrected ECC errors", ecc_uncorrected));
  if (diagnostics.starts_with("failed")) parts.push_back("DCGM diagnostics " + diagnostics);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string canonical_model(std::string_view product) {
  std::string s(product);
  for (auto prefix : {"NVIDIA ", "NVIDIA-", "Tesla ", "Tesla-"})
    if (s.starts_with(prefix)) s = s.substr(std::string_view(prefix).size());
  if (auto cat = vocab::mig_catalog(product); cat) {
    const std::string& m = (*cat)->model;
    if (m == "H200-141GB") return "H200";
    if (m == "H100-80GB") return "H100";
    return m;  // A100-40GB, A100-80GB
  }
  std::replace(s.begin(), s.end(), ' ', '-');
  return s;
}

namespace {

Result<GpuInfo> parse_gpu(const Json& j, size_t pos) {
  ObjectReader r(j, fmt::format("gpus[{}]", pos));
  GpuInfo g;
  g.uuid = r.string("uuid", 96);
  g.index = int(r.integer("index", 0, 63));
  g.product = r.string("model", 96);
  g.memory_bytes = r.integer("memory_bytes", 0, int64_t(1) << 50);
  g.pci_bus_id = r.optional_string("pci_bus_id", 32).value_or("");
  g.numa_node = int(r.optional_integer("numa_node", -1, 63).value_or(-1));
  g.nvlink_peers =
      r.optional_string_array("nvlink_peers", 64, 96).value_or(std::vector<std::string>{});
  g.mig_capable = r.optional_bool("mig_capable").value_or(false);
  if (auto mode = r.optional_string("mode", 16)) {
    auto m = parse_gpu_mode(*mode);
    if (!m)
      r.reject("mode", "must be whole, mig or time-sliced");
    else
      g.mode = *m;
  }
  if (auto mig = r.optional_array("mig_instances")) {
    for (size_t i = 0; i < mig->size(); ++i) {
      const Json& inst = (*mig)[i];
      ObjectReader ir(inst, fmt::format("gpus[{}].mig_instances[{}]", pos, i));
      vocab::PlacedInstance p;
      p.profile = ir.string("profile", 32);
      p.start = int(ir.integer("start", 0, 31));
      GP_TRY_VOID(ir.finish());
      g.mig_instances.push_back(std::move(p));
    }
  }
  if (auto h = r.optional_object("health")) {
    ObjectReader hr(*h, fmt::format("gpus[{}].health", pos));
    if (auto x = hr.optional_array("xid_errors")) {
      for (const auto& v : *x) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000)
          return fail(
              Error::invalid(fmt::format("gpus[{}].health.xid_errors must be XID codes", pos)));
        g.health.xid_errors.push_back(v.get<int>());
      }
    }
    g.health.ecc_uncorrected =
        hr.optional_integer("ecc_uncorrected", 0, int64_t(1) << 40).value_or(0);
    g.health.diagnostics = hr.optional_string("diagnostics", 1000).value_or("");
    GP_TRY_VOID(hr.finish());
  }
  GP_TRY_VOID(r.finish());
  if (!g.uuid.starts_with("GPU-") && !g.uuid.starts_with("MIG-"))
    return fail(Error::invalid(fmt::format("gpus[{}].uuid '{}' is not a GPU UUID", pos, g.uuid)));
  g.model = canonical_model(g.product);
  if (g.mode == GpuMode::kMig) {
    if (!g.mig_capable)
      return fail(Error::invalid(fmt::format("GPU {} is in MIG mode but not MIG capable", g.uuid)));
    auto cat = vocab::mig_catalog(g.product);
    if (!cat)
      return fail(Error::invalid(
          fmt::format("GPU {}: no MIG geometry known for model '{}'", g.uuid, g.product)));
    if (auto v = vocab::validate(**cat, g.mig_instances); !v)
      return fail(Error::invalid(fmt::format("GPU {}: {}", g.uuid, v.error().message)));
  } else if (!g.mig_instances.empty()) {
    return fail(
        Error::invalid(fmt::format("GPU {} lists MIG instances but is not in MIG mode", g.uuid)));
  }
  return g;
}

}  // namespace

bool known_device_list_strategy(std::string_view s) {
  return s == "envvar" || s == "volume-mounts" || s == "cdi-annotations" || s == "cdi-cri";
}

Result<GpuRuntime> parse_gpu_runtime(const Json& j, std::string_view what) {
  ObjectReader r(j, what);
  GpuRuntime g;
  g.toolkit_config = r.string("toolkit_config", 4096);
  g.toolkit_config_state = r.string("toolkit_config_state", 16);
  if (g.toolkit_config_state != "read" && g.toolkit_config_state != "absent" &&
      g.toolkit_config_state != "unreadable")
    r.reject("toolkit_config_state", "must be read, absent or unreadable");
  g.accepts_env_unprivileged = r.optional_bool("accept_envvar_when_unprivileged");
  g.accepts_volume_mounts = r.optional_bool("accept_volume_mounts");
  g.device_list_strategy =
      r.optional_string_array("device_list_strategy", 8, 32).value_or(std::vector<std::string>{});
  for (const auto& s : g.device_list_strategy)
    if (!known_device_list_strategy(s))
      r.reject("device_list_strategy",
               "values must be envvar, volume-mounts, cdi-annotations or cdi-cri");
  g.strategy_source = r.optional_string("device_list_strategy_source", 32).value_or("unknown");
  if (g.strategy_source != "flag" && g.strategy_source != "device-plugin-config" &&
      g.strategy_source != "unknown")
    r.reject("device_list_strategy_source", "must be flag, device-plugin-config or unknown");
  g.detail = r.optional_string("detail", 1024).value_or("");
  GP_TRY_VOID(r.finish());
  // An absent config is the toolkit's defaults, which accept the variable: never "false".
  if (g.toolkit_config_state == "absent" && g.accepts_env_unprivileged == false)
    return fail(Error::invalid(fmt::format(
        "{}: accept_envvar_when_unprivileged cannot be false without a toolkit config", what)));
  return g;
}

Json to_json(const GpuRuntime& g) {
  auto opt = [](const std::optional<bool>& b) { return b ? Json(*b) : Json(nullptr); };
  return {{"toolkit_config", g.toolkit_config},
          {"toolkit_config_state", g.toolkit_config_state},
          {"accept_envvar_when_unprivileged", opt(g.accepts_env_unprivileged)},
          {"accept_volume_mounts", opt(g.accepts_volume_mounts)},
          {"device_list_strategy", g.device_list_strategy},
          {"device_list_strategy_source", g.strategy_source},
          {"detail", g.detail}};
}

Result<Inventory> parse_inventory(const Json& j) {
  ObjectReader r(j, "inventory");
  Inventory inv;
  const Json* node = r.optional_object("node");
  const Json* gpus = r.optional_array("gpus");
  const Json* runtime = r.optional_object("gpu_runtime");
  if (!node) r.reject("node", "is required");
  GP_TRY_VOID(r.finish());
  if (runtime) inv.gpu_runtime = GP_TRY(parse_gpu_runtime(*runtime, "inventory.gpu_runtime"));
  {
    ObjectReader nr(*node, "node");
    inv.node.name = nr.string("name", 63);
    inv.node.cpu_millis = nr.optional_integer("cpu_millis", 0, int64_t(1) << 40).value_or(0);
    inv.node.memory_bytes = nr.optional_integer("memory_bytes", 0, int64_t(1) << 56).value_or(0);
    inv.node.rack = nr.optional_string("rack", 63).value_or("");
    inv.node.nvlink_domain = nr.optional_string("nvlink_domain", 63).value_or("");
    if (auto labels = nr.optional_object("labels")) {
      if (labels->size() > 64) nr.reject("labels", "at most 64 labels");
      for (auto it = labels->begin(); it != labels->end(); ++it) {
        if (!it->is_string() || it.key().size() > 253 ||
            it->get_ref<const std::string&>().size() > 253) {
          nr.reject("labels", "keys and values must be strings of at most 253 characters");
          break;
        }
        inv.node.labels[it.key()] = it->get<std::string>();
      }
    }
    GP_TRY_VOID(nr.finish());
    GP_TRY_VOID(validate_dns_label("node.name", inv.node.name));
  }
  if (gpus) {
    if (gpus->size() > 64) return fail(Error::invalid("at most 64 GPUs per node"));
    for (size_t i = 0; i < gpus->size(); ++i) inv.gpus.push_back(GP_TRY(parse_gpu((*gpus)[i], i)));
  }
  std::set<std::string> uuids;
  std::set<int> indices;
  for (const auto& g : inv.gpus) {
    if (!uuids.insert(g.uuid).second)
      return fail(Error::invalid(fmt::format("duplicate GPU UUID {}", g.uuid)));
    if (!indices.insert(g.index).second)
      return fail(Error::invalid(fmt::format("duplicate GPU index {}", g.index)));
  }
  for (const auto& g : inv.gpus)
    for (const auto& peer : g.nvlink_peers)
      if (!uuids.contains(peer) || peer == g.uuid)
        return fail(Error::invalid(fmt::format(
            "GPU {} lists NVLink peer {} that is not another GPU of this node", g.uuid, peer)));
  return inv;
}

Json to_json(const GpuInfo& g) {
  Json mig = Json::array();
  for (const auto& m : g.mig_instances) mig.push_back({{"profile", m.profile}, {"start", m.start}});
  return {{"uuid", g.uuid},
          {"index", g.index},
          {"model", g.product.empty() ? g.model : g.product},
          {"memory_bytes", g.memory_bytes},
          {"pci_bus_id", g.pci_bus_id},
          {"numa_node", g.numa_node},
          {"nvlink_peers", g.nvlink_peers},
          {"mig_capable", g.mig_capable},
          {"mode", gpu_mode_name(g.mode)},
          {"mig_instances", mig},
          {"health",
           {{"xid_errors", g.health.xid_errors},
            {"ecc_uncorrected", g.health.ecc_uncorrected},
            {"diagnostics", g.health.diagnostics}}}};
}

Json to_json(const Inventory& inv) {
  Json gpus = Json::array();
  for (const auto& g : inv.gpus) gpus.push_back(to_json(g));
  Json out = {{"node",
               {{"name", inv.node.name},
                {"cpu_millis", inv.node.cpu_millis},
                {"memory_bytes", inv.node.memory_bytes},
                {"rack", inv.node.rack},
                {"nvlink_domain", inv.node.nvlink_domain},
                {"labels", inv.node.labels}}},
              {"gpus", gpus}};
  if (inv.gpu_runtime) out["gpu_runtime"] = to_json(*inv.gpu_runtime);
  return out;
}

}  // namespace gp::fleet
