#include "fleet/k8s_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "vocab/vocab.h"

namespace gp::fleet {
namespace {

constexpr int kMaxGpusPerNode = 64;      // as parse_inventory()
constexpr size_t kMaxKeptLabels = 64;    // as parse_inventory()
constexpr size_t kMaxLabelLength = 253;  // as parse_inventory()
constexpr size_t kMaxNameLength = 63;    // rack and nvlink_domain, as parse_inventory()
constexpr int64_t kMiB = int64_t{1} << 20;

// ---------------------------------------------------------------------------------------------
// Quantities

enum class Unit { kBase, kMilli };

// For messages: the quantity as given, cut short when it is long.
std::string quoted(std::string_view s) {
  constexpr size_t kMax = 40;
  return s.size() <= kMax ? fmt::format("'{}'", s) : fmt::format("'{}...'", s.substr(0, kMax));
}

// The exponent of a suffix: 10^exp10 * 2^exp2. False when `suffix` is none of Kubernetes'.
bool suffix_exponent(std::string_view suffix, int& exp10, int& exp2) {
  static constexpr std::array<std::pair<std::string_view, int>, 6> kBinary = {
      {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}}};
  static constexpr std::array<std::pair<std::string_view, int>, 9> kDecimal = {{{"n", -9},
                                                                                {"u", -6},
                                                                                {"m", -3},
                                                                                {"k", 3},
                                                                                {"M", 6},
                                                                                {"G", 9},
                                                                                {"T", 12},
                                                                                {"P", 15},
                                                                                {"E", 18}}};
  exp10 = exp2 = 0;
  if (suffix.empty()) return true;
  for (const auto& [name, e] : kBinary) {
    if (suffix == name) return exp2 = e, true;
  }
  for (const auto& [name, e] : kDecimal) {
    if (suffix == name) return exp10 = e, true;
  }
  // A decimal exponent: e or E, an optional sign, 1 to 4 digits.
  if (suffix[0] != 'e' && suffix[0] != 'E') return false;
  std::string_view digits = suffix.substr(1);
  int sign = 1;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    sign = digits[0] == '-' ? -1 : 1;
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 4) return false;
  int value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    value = value * 10 + (c - '0');
  }
  exp10 = sign * value;
  return true;
}

// Exact: the number is held as an integer mantissa and powers of 10 and 2, so "0.1" and "100m"
// agree, and the result is rounded up only once, at the end.
Result<int64_t> parse_quantity(std::string_view q, Unit unit) {
  auto bad = [&](std::string_view why) {
    return fail(Error::invalid(fmt::format("invalid quantity {}: {}", quoted(q), why)));
  };
  size_t i = 0;
  if (i < q.size() && q[i] == '-') return bad("must not be negative");
  if (i < q.size() && q[i] == '+') ++i;
  std::string digits;  // integer and fraction digits together
  int fraction_digits = 0;
  bool integer_part = false, fraction_part = false;
  for (; i < q.size() && std::isdigit(static_cast<unsigned char>(q[i])); ++i) {
    digits.push_back(q[i]);
    integer_part = true;
  }
  if (i < q.size() && q[i] == '.') {
    for (++i; i < q.size() && std::isdigit(static_cast<unsigned char>(q[i])); ++i) {
      digits.push_back(q[i]);
      ++fraction_digits;
      fraction_part = true;
    }
  }
  if (!integer_part && !fraction_part) return bad("expected a number");
  int exp10 = 0, exp2 = 0;
  if (!suffix_exponent(q.substr(i), exp10, exp2)) {
    return bad("unknown suffix (expected Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)");
  }
  exp10 -= fraction_digits;
  if (unit == Unit::kMilli) exp10 += 3;

  // Significant digits only: leading zeros dropped, trailing zeros moved into the exponent.
  size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return int64_t{0};
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    ++exp10;
  }
  // 10^20 * 2^60 < 2^127: the mantissa times any binary suffix fits in 128 bits.
  if (digits.size() > 20) return bad("more than 20 significant digits");
  unsigned __int128 value = 0;
  for (char c : digits) value = value * 10 + static_cast<unsigned>(c - '0');
  value <<= exp2;

  constexpr auto kMax = static_cast<unsigned __int128>(INT64_MAX);
  if (exp10 >= 0) {
    for (int e = 0; e < exp10 && value <= kMax; ++e) value *= 10;
    if (value > kMax) return bad("too large");
    return static_cast<int64_t>(value);
  }
  // value < 2^127 < 10^39: dividing by 10^39 or more leaves a positive fraction, rounded up to 1.
  if (-exp10 >= 39) return int64_t{1};
  unsigned __int128 divisor = 1;
  for (int e = 0; e < -exp10; ++e) divisor *= 10;
  value = (value + divisor - 1) / divisor;
  if (value > kMax) return bad("too large");
  return static_cast<int64_t>(value);
}

// ---------------------------------------------------------------------------------------------
// Reading the Node objects

// The parts of one Node the import reads.
struct RawNode {
  std::string name;  // metadata.name
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> capacity;
  std::map<std::string, std::string> allocatable;
  bool unschedulable = false;
  std::optional<bool> ready;  // nullopt: no Ready condition
};

enum class Kind { kObject, kArray, kString, kBool };

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
    case Kind::kString:
      return "a string";
    case Kind::kBool:
      return "true or false";
  }
  return "";
}

bool is_kind(const Json& j, Kind kind) {
  switch (kind) {
    case Kind::kObject:
      return j.is_object();
    case Kind::kArray:
      return j.is_array();
    case Kind::kString:
      return j.is_string();
    case Kind::kBool:
      return j.is_boolean();
  }
  return false;
}

// Where a field is, for messages: "items[3].metadata", or "node 'gpu-01': status.capacity" once
// the node's name is known (its path then starts as "node 'gpu-01': ").
std::string field_path(std::string_view path, std::string_view key) {
  return path.ends_with(": ") ? fmt::format("{}{}", path, key) : fmt::format("{}.{}", path, key);
}

// `obj[key]` when present and not null; an error naming the field when it has another kind, or
// when it is absent and `required`.
Result<const Json*> member(const Json& obj, std::string_view key, Kind kind, std::string_view path,
                           bool required) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) {
      return fail(Error::invalid(fmt::format("{} is required", field_path(path, key))));
    }
    return nullptr;
  }
  if (!is_kind(*it, kind)) {
    return fail(
        Error::invalid(fmt::format("{} must be {}", field_path(path, key), kind_name(kind))));
  }
  return &*it;
}

// A map of strings (labels, capacity, allocatable), empty when absent.
Result<std::map<std::string, std::string>> string_map(const Json& obj, std::string_view key,
                                                      std::string_view path) {
  std::map<std::string, std::string> out;
  const Json* m = GP_TRY(member(obj, key, Kind::kObject, path, false));
  if (!m) return out;
  for (auto it = m->begin(); it != m->end(); ++it) {
    if (!it->is_string()) {
      return fail(Error::invalid(
          fmt::format("{}['{}'] must be a string", field_path(path, key), it.key())));
    }
    out.emplace(it.key(), it->get<std::string>());
  }
  return out;
}

Result<std::optional<bool>> ready_condition(const Json& status, const std::string& path) {
  const Json* conditions = GP_TRY(member(status, "conditions", Kind::kArray, path, false));
  if (!conditions) return std::optional<bool>();
  for (size_t i = 0; i < conditions->size(); ++i) {
    const Json& c = (*conditions)[i];
    std::string cpath = fmt::format("{}.conditions[{}]", path, i);
    if (!c.is_object()) return fail(Error::invalid(fmt::format("{} must be an object", cpath)));
    const Json* type = GP_TRY(member(c, "type", Kind::kString, cpath, true));
    if (type->get_ref<const std::string&>() != "Ready") continue;
    const Json* s = GP_TRY(member(c, "status", Kind::kString, cpath, true));
    return std::optional<bool>(s->get_ref<const std::string&>() == "True");
  }
  return std::optional<bool>();
}

Result<RawNode> read_node(const Json& item, const std::string& path, bool kind_required) {
  if (!item.is_object()) return fail(Error::invalid(fmt::format("{} must be an object", path)));
  const Json* kind = GP_TRY(member(item, "kind", Kind::kString, path, kind_required));
  if (kind && kind->get_ref<const std::string&>() != "Node") {
    return fail(Error::invalid(
        fmt::format("{} is a {}, not a Node", path, kind->get_ref<const std::string&>())));
  }
  RawNode node;
  const Json* metadata = GP_TRY(member(item, "metadata", Kind::kObject, path, true));
  std::string mpath = path + ".metadata";
  const Json* name = GP_TRY(member(*metadata, "name", Kind::kString, mpath, true));
  node.name = name->get<std::string>();
  if (node.name.empty() || node.name.size() > 253) {
    return fail(Error::invalid(fmt::format("{}.name must be 1 to 253 characters", mpath)));
  }
  // From here on, messages name the node rather than its position.
  std::string npath = fmt::format("node '{}': ", node.name);
  node.labels = GP_TRY(string_map(*metadata, "labels", npath + "metadata"));
  if (const Json* spec = GP_TRY(member(item, "spec", Kind::kObject, npath, false))) {
    const Json* u = GP_TRY(member(*spec, "unschedulable", Kind::kBool, npath + "spec", false));
    node.unschedulable = u && u->get<bool>();
  }
  const Json* status = GP_TRY(member(item, "status", Kind::kObject, npath, true));
  node.capacity = GP_TRY(string_map(*status, "capacity", npath + "status"));
  node.allocatable = GP_TRY(string_map(*status, "allocatable", npath + "status"));
  node.ready = GP_TRY(ready_condition(*status, npath + "status"));
  return node;
}

// ---------------------------------------------------------------------------------------------
// GFD labels

constexpr std::string_view kProductLabel = "nvidia.com/gpu.product";
constexpr std::string_view kMigLabelPrefix = "nvidia.com/mig-";
constexpr std::string_view kCountSuffix = ".count";

// GFD's sanitise(): characters outside [A-Za-z0-9-_. ] dropped, runs of spaces as one '-'.
std::string gfd_sanitise(std::string_view name) {
  std::string out;
  bool space = false;
  for (char c : name) {
    if (c == ' ') {
      space = true;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') continue;
    if (space && !out.empty()) out.push_back('-');
    space = false;
    out.push_back(c);
  }
  return out;
}

// The NVML name GFD made `product` from. GFD's '-' for ' ' cannot be undone in general (NVML
// writes "A100-SXM4-80GB" but "H100 80GB HBM3"), so names of data-center GPUs are looked up; any
// other keeps its dashes, only the vendor prefix separated by a space. Older GFD versions wrote
// names without "NVIDIA-", as NVML then reported them; those map to today's names.
std::string nvml_product(std::string_view product) {
  static constexpr std::array<std::string_view, 32> kNvmlNames = {
      "NVIDIA H200",
      "NVIDIA H200 NVL",
      "NVIDIA H100 80GB HBM3",
      "NVIDIA H100 PCIe",
      "NVIDIA H100 NVL",
      "NVIDIA H100",
      "NVIDIA H800",
      "NVIDIA H20",
      "NVIDIA GH200 480GB",
      "NVIDIA B200",
      "NVIDIA A100-SXM4-80GB",
      "NVIDIA A100-SXM4-40GB",
      "NVIDIA A100 80GB PCIe",
      "NVIDIA A100-PCIE-40GB",
      "NVIDIA A800-SXM4-80GB",
      "NVIDIA A30",
      "NVIDIA A40",
      "NVIDIA A10",
      "NVIDIA A10G",
      "NVIDIA A16",
      "NVIDIA A2",
      "NVIDIA L4",
      "NVIDIA L40",
      "NVIDIA L40S",
      "NVIDIA RTX A6000",
      "NVIDIA RTX 6000 Ada Generation",
      "Tesla V100-SXM2-16GB",
      "Tesla V100-SXM2-32GB",
      "Tesla V100-PCIE-16GB",
      "Tesla V100-PCIE-32GB",
      "Tesla T4",
      "Tesla P100-PCIE-16GB",
  };
  for (std::string_view name : kNvmlNames) {
    std::string sanitised = gfd_sanitise(name);
    if (product == sanitised) return std::string(name);
    // "A100-SXM4-80GB" (older GFD) for "NVIDIA A100-SXM4-80GB".
    if (sanitised.starts_with("NVIDIA-") && product == sanitised.substr(7)) {
      return std::string(name);
    }
  }
  for (std::string_view vendor : {"NVIDIA-", "Tesla-"}) {
    if (product.starts_with(vendor) && product.size() > vendor.size()) {
      return fmt::format("{} {}", vendor.substr(0, vendor.size() - 1),
                         product.substr(vendor.size()));
    }
  }
  return std::string(product);
}

// Nominal memory of the MIG-capable models, for mig.strategy=single where GFD relabels
// gpu.memory with the memory of one MIG device. As nvidia-smi reports them.
std::optional<int64_t> nominal_memory_mib(std::string_view catalog_model) {
  static constexpr std::array<std::pair<std::string_view, int64_t>, 4> kMemory = {
      {{"A100-40GB", 40960}, {"A100-80GB", 81920}, {"H100-80GB", 81559}, {"H200-141GB", 143771}}};
  for (const auto& [model, mib] : kMemory) {
    if (model == catalog_model) return mib;
  }
  return std::nullopt;
}

// Labels kept in NodeInfo::labels: all but families that are noise to a scheduler or repeat
// what the inventory already says (NFD's hardware features, deprecated beta.* duplicates, and
// GFD's per-resource details), which on a GPU node run to well over a hundred.
bool keep_label(std::string_view key) {
  static constexpr std::array<std::string_view, 9> kKeptGfd = {
      "nvidia.com/gpu.product",
      "nvidia.com/gpu.machine",
      "nvidia.com/gpu.family",
      "nvidia.com/gpu.replicas",
      "nvidia.com/gpu.sharing-strategy",
      "nvidia.com/mig.strategy",
      "nvidia.com/mig.config",
      "nvidia.com/cuda.driver-version.full",
      "nvidia.com/cuda.runtime-version.full",
  };
  static constexpr std::array<std::string_view, 4> kDropped = {
      "feature.node.kubernetes.io/", "beta.kubernetes.io/", "failure-domain.beta.kubernetes.io/",
      "nvidia.com/"};
  if (std::find(kKeptGfd.begin(), kKeptGfd.end(), key) != kKeptGfd.end()) return true;
  return std::none_of(kDropped.begin(), kDropped.end(),
                      [&](std::string_view prefix) { return key.starts_with(prefix); });
}

// ---------------------------------------------------------------------------------------------
// Spreading MIG instances over GPUs

// "8 x 3g.71gb, 12 x 1g.18gb", largest profile first.
std::string describe_counts(const vocab::MigCatalog& catalog,
                            const std::map<std::string, int>& counts) {
  std::string out;
  for (const vocab::MigProfile& p : catalog.profiles) {
    auto it = counts.find(p.name);
    if (it == counts.end() || it->second == 0) continue;
    out += fmt::format("{}{} x {}", out.empty() ? "" : ", ", it->second, p.name);
  }
  return out.empty() ? "no instances" : out;
}

// Greedy, largest profile first, each instance onto the least loaded GPU (fewest compute slices
// used, then lowest index) whose layout plan() can still make. Uniform requests come out
// uniform, as mig-parted's "all-<profile>" and "all-balanced" configs are. Nullopt when stuck.
std::optional<std::vector<std::vector<std::string>>> spread_greedily(
    const vocab::MigCatalog& catalog, const std::map<std::string, int>& counts, int gpus) {
  std::vector<std::vector<std::string>> requests(gpus);
  std::vector<int> load(gpus, 0);
  std::vector<int> order(gpus);
  for (const vocab::MigProfile& profile : catalog.profiles) {
    auto it = counts.find(profile.name);
    for (int n = 0; it != counts.end() && n < it->second; ++n) {
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] < load[b]; });
      bool placed = false;
      for (int g : order) {
        requests[g].push_back(profile.name);
        if (vocab::plan(catalog, requests[g])) {
          load[g] += profile.compute_slices;
          placed = true;
          break;
        }
        requests[g].pop_back();
      }
      if (!placed) return std::nullopt;
    }
  }
  return requests;
}

// Exhaustive: chooses, GPU by GPU, one of the instance-count vectors a valid layout can have,
// with memoized dead ends, so an arrangement is found whenever one exists. Only the greedy
// spread's failures come here; `budget` bounds the work for hopeless large requests.
class MigSpreadSearch {
 public:
  MigSpreadSearch(const vocab::MigCatalog& catalog, std::vector<int> wanted, int gpus)
      : catalog_(catalog), wanted_(std::move(wanted)), gpus_(gpus) {
    std::set<std::vector<int>> vectors;
    for (const vocab::Layout& layout : vocab::enumerate_layouts(catalog_)) {
      std::vector<int> v(catalog_.profiles.size(), 0);
      for (const vocab::PlacedInstance& inst : layout) {
        for (size_t p = 0; p < catalog_.profiles.size(); ++p) {
          if (catalog_.profiles[p].name == inst.profile) ++v[p];
        }
      }
      if (std::any_of(v.begin(), v.end(), [](int n) { return n > 0; })) vectors.insert(v);
    }
    vectors_.assign(vectors.begin(), vectors.end());
    // Fullest GPUs first (compute slices, then memory slices).
    std::stable_sort(vectors_.begin(), vectors_.end(), [&](const auto& a, const auto& b) {
      return std::pair(slices(a, true), slices(a, false)) >
             std::pair(slices(b, true), slices(b, false));
    });
  }

  // The count vector of each GPU that holds instances, or nullopt (none exists, or the budget
  // ran out: `exhausted()` tells which).
  std::optional<std::vector<std::vector<int>>> run() {
    std::vector<std::vector<int>> chosen;
    if (search(wanted_, gpus_, 0, chosen)) return chosen;
    return std::nullopt;
  }
  bool exhausted() const { return steps_ > kBudget; }

 private:
  static constexpr int kBudget = 200000;

  int slices(const std::vector<int>& v, bool compute) const {
    int total = 0;
    for (size_t p = 0; p < v.size(); ++p) {
      const vocab::MigProfile& profile = catalog_.profiles[p];
      total += v[p] * (compute ? profile.compute_slices : profile.memory_slices);
    }
    return total;
  }

  bool search(const std::vector<int>& left, int gpus_left, size_t first,
              std::vector<std::vector<int>>& chosen) {
    if (std::all_of(left.begin(), left.end(), [](int n) { return n == 0; })) return true;
    if (gpus_left == 0 || ++steps_ > kBudget) return false;
    if (slices(left, true) > gpus_left * catalog_.compute_slices ||
        slices(left, false) > gpus_left * catalog_.memory_slices) {
      return false;
    }
    for (size_t p = 0; p < left.size(); ++p) {
      if (left[p] > gpus_left * catalog_.profiles[p].max_instances) return false;
    }
    auto key = std::tuple(left, gpus_left, first);
    if (dead_ends_.contains(key)) return false;
    for (size_t i = first; i < vectors_.size(); ++i) {
      const std::vector<int>& v = vectors_[i];
      bool fits = true;
      for (size_t p = 0; p < v.size() && fits; ++p) fits = v[p] <= left[p];
      if (!fits) continue;
      std::vector<int> rest = left;
      for (size_t p = 0; p < v.size(); ++p) rest[p] -= v[p];
      chosen.push_back(v);
      if (search(rest, gpus_left - 1, i, chosen)) return true;
      chosen.pop_back();
      if (exhausted()) return false;
    }
    dead_ends_.insert(std::move(key));
    return false;
  }

  const vocab::MigCatalog& catalog_;
  std::vector<int> wanted_;
  int gpus_;
  std::vector<std::vector<int>> vectors_;
  std::set<std::tuple<std::vector<int>, int, size_t>> dead_ends_;
  int steps_ = 0;
};

// One valid layout per GPU (`gpus` of them, some possibly empty) holding exactly `counts`.
Result<std::vector<vocab::Layout>> spread_mig(const vocab::MigCatalog& catalog,
                                              const std::map<std::string, int>& counts, int gpus,
                                              std::string_view node) {
  auto cannot = [&](std::string_view why) {
    return fail(Error::invalid(fmt::format(
        "node '{}': cannot place {} on {} MIG-enabled {} GPU{}{}", node,
        describe_counts(catalog, counts), gpus, catalog.model, gpus == 1 ? "" : "s", why)));
  };
  std::optional<std::vector<std::vector<std::string>>> requests =
      spread_greedily(catalog, counts, gpus);
  if (!requests) {
    std::vector<int> wanted;
    for (const vocab::MigProfile& p : catalog.profiles) {
      auto it = counts.find(p.name);
      wanted.push_back(it == counts.end() ? 0 : it->second);
    }
    MigSpreadSearch search(catalog, wanted, gpus);
    std::optional<std::vector<std::vector<int>>> vectors = search.run();
    if (!vectors) return cannot(search.exhausted() ? " (none found within the search limit)" : "");
    requests.emplace(gpus);
    for (size_t g = 0; g < vectors->size(); ++g) {
      for (size_t p = 0; p < catalog.profiles.size(); ++p) {
        for (int n = 0; n < (*vectors)[g][p]; ++n)
          (*requests)[g].push_back(catalog.profiles[p].name);
      }
    }
  }
  std::vector<vocab::Layout> layouts;
  for (const std::vector<std::string>& request : *requests) {
    Result<vocab::Layout> layout = vocab::plan(catalog, request);
    if (!layout) return cannot(": " + layout.error().message);
    layouts.push_back(std::move(*layout));
  }
  return layouts;
}

// ---------------------------------------------------------------------------------------------
// One node

// What the GFD labels and device-plugin resources of one node say about its GPUs.
struct GpuPlan {
  int gpus = 0;         // physical GPUs
  std::string product;  // NVML name
  int64_t memory_mib = 0;
  const vocab::MigCatalog* catalog = nullptr;  // null when gpuplane knows no MIG geometry for it
  std::vector<vocab::Layout> mig_layouts;      // of GPUs 0..size-1, which are in MIG mode
  bool time_sliced = false;                    // the whole GPUs
};

class NodeImporter {
 public:
  explicit NodeImporter(const RawNode& raw) : raw_(raw) {}

  // The imported node, or nullopt with `skip_reason()` set.
  Result<std::optional<ImportedNode>> run();
  const std::string& skip_reason() const { return skip_reason_; }

 private:
  template <typename... Args>
  std::unexpected<Error> error(fmt::format_string<Args...> f, Args&&... args) const {
    return fail(Error::invalid(
        fmt::format("node '{}': {}", raw_.name, fmt::format(f, std::forward<Args>(args)...))));
  }
  template <typename... Args>
  void warn(fmt::format_string<Args...> f, Args&&... args) {
    warnings_.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  const std::string* label(std::string_view key) const {
    auto it = raw_.labels.find(std::string(key));
    return it == raw_.labels.end() ? nullptr : &it->second;
  }
  Result<std::optional<int64_t>> label_count(std::string_view key, int64_t max) const;
  // status.<which>[resource] as an integer, nullopt when absent.
  Result<std::optional<int64_t>> resource(const std::map<std::string, std::string>& m,
                                          std::string_view which, const std::string& key,
                                          bool cpu) const;
  Result<std::map<std::string, int>> mig_label_counts() const;
  Result<std::string> inventory_name();
  Result<void> fill_node_info(NodeInfo& info);
  Result<std::optional<GpuPlan>> plan_gpus();
  Result<void> plan_single(GpuPlan& gpu, const std::string& product_label, int replicas);
  Result<void> plan_whole_and_mixed(GpuPlan& gpu, const std::string& strategy, int replicas,
                                    const std::map<std::string, int>& mig_counts);
  Result<void> check_capacity(const std::string& key, int64_t expected, std::string_view what);

  const RawNode& raw_;
  std::vector<std::string> warnings_;
  std::string skip_reason_;
};

Result<std::optional<int64_t>> NodeImporter::label_count(std::string_view key, int64_t max) const {
  const std::string* value = label(key);
  if (!value) return std::optional<int64_t>();
  bool digits = !value->empty() && value->size() <= 9 &&
                std::all_of(value->begin(), value->end(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  int64_t n = digits ? std::stoll(*value) : -1;
  if (n < 0 || n > max) {
    return error("label {} is '{}', not a count from 0 to {}", key, *value, max);
  }
  return std::optional<int64_t>(n);
}

Result<std::optional<int64_t>> NodeImporter::resource(const std::map<std::string, std::string>& m,
                                                      std::string_view which,
                                                      const std::string& key, bool cpu) const {
  auto it = m.find(key);
  if (it == m.end()) return std::optional<int64_t>();
  Result<int64_t> value = cpu ? parse_cpu_millis(it->second) : parse_k8s_quantity(it->second);
  if (!value) return error("status.{}['{}']: {}", which, key, value.error().message);
  return std::optional<int64_t>(*value);
}

// The mig-<profile>.count labels with a non-zero count, by profile name.
Result<std::map<std::string, int>> NodeImporter::mig_label_counts() const {
  std::map<std::string, int> counts;
  for (const auto& [key, value] : raw_.labels) {
    if (!key.starts_with(kMigLabelPrefix) || !key.ends_with(kCountSuffix)) continue;
    std::string profile = key.substr(kMigLabelPrefix.size(),
                                     key.size() - kMigLabelPrefix.size() - kCountSuffix.size());
    std::optional<int64_t> n =
        GP_TRY(label_count(key, int64_t{kMaxGpusPerNode} * vocab::kMigComputeSlices));
    if (*n > 0) counts[profile] = static_cast<int>(*n);
  }
  return counts;
}

Result<std::optional<GpuPlan>> NodeImporter::plan_gpus() {
  const std::string* product_label = label(kProductLabel);
  if (!product_label) {
    bool advertised = std::any_of(raw_.capacity.begin(), raw_.capacity.end(), [](const auto& kv) {
      return kv.first == "nvidia.com/gpu" || kv.first.starts_with("nvidia.com/gpu.") ||
             kv.first.starts_with(kMigLabelPrefix);
    });
    skip_reason_ = advertised ? "has nvidia.com GPU resources but no GPU Feature Discovery labels "
                                "(nvidia.com/gpu.product), so its GPU model is unknown"
                              : "no NVIDIA GPUs (no nvidia.com/gpu.product label)";
    return std::optional<GpuPlan>();
  }
  std::string strategy = "none";
  if (const std::string* s = label("nvidia.com/mig.strategy")) strategy = *s;
  if (strategy != "none" && strategy != "single" && strategy != "mixed") {
    return error("label nvidia.com/mig.strategy is '{}', not none, single or mixed", strategy);
  }
  std::optional<int64_t> replicas_label = GP_TRY(label_count("nvidia.com/gpu.replicas", 1024));
  int replicas = std::max<int>(1, static_cast<int>(replicas_label.value_or(1)));
  const std::string* sharing = label("nvidia.com/gpu.sharing-strategy");
  if (sharing && *sharing != "none" && *sharing != "time-slicing" && *sharing != "mps") {
    return error("label nvidia.com/gpu.sharing-strategy is '{}', not none, time-slicing or mps",
                 *sharing);
  }
  std::map<std::string, int> mig_counts = GP_TRY(mig_label_counts());
  if (!mig_counts.empty() && strategy != "mixed") {
    return error(
        "has {}{}.count labels, which GPU Feature Discovery writes only with "
        "nvidia.com/mig.strategy=mixed (it is '{}')",
        kMigLabelPrefix, mig_counts.begin()->first, strategy);
  }

  GpuPlan gpu;
  if (strategy == "single" && product_label->find("-MIG-") != std::string::npos) {
    if (product_label->ends_with("-MIG-INVALID")) {
      skip_reason_ = fmt::format(
          "GPU Feature Discovery reports an invalid MIG configuration for mig.strategy=single "
          "(nvidia.com/gpu.product={}); the node exposes no GPUs",
          *product_label);
      return std::optional<GpuPlan>();
    }
    GP_TRY_VOID(plan_single(gpu, *product_label, replicas));
  } else {
    std::string base = *product_label;
    // Time-sliced GPUs not renamed to nvidia.com/gpu.shared carry the suffix "-SHARED".
    if (base.ends_with("-SHARED")) base.erase(base.size() - 7);
    gpu.product = nvml_product(base);
    if (Result<const vocab::MigCatalog*> catalog = vocab::mig_catalog(gpu.product))
      gpu.catalog = *catalog;
    gpu.time_sliced = replicas > 1;
    if (gpu.time_sliced && sharing && *sharing == "mps") {
      warn("GPUs shared with MPS ({} replicas) are imported as time-sliced", replicas);
    } else if (gpu.time_sliced && sharing && *sharing == "none") {
      warn(
          "nvidia.com/gpu.replicas is {} but nvidia.com/gpu.sharing-strategy is none; imported "
          "as time-sliced",
          replicas);
    }
    GP_TRY_VOID(plan_whole_and_mixed(gpu, strategy, replicas, mig_counts));
  }
  if (gpu.gpus == 0) {
    skip_reason_ = "nvidia.com/gpu.count is 0";
    return std::optional<GpuPlan>();
  }
  return std::optional<GpuPlan>(std::move(gpu));
}

Result<void> NodeImporter::plan_single(GpuPlan& gpu, const std::string& product_label,
                                       int replicas) {
  size_t at = product_label.find("-MIG-");
  std::string profile_name = product_label.substr(at + 5);
  if (profile_name.ends_with("-SHARED")) profile_name.erase(profile_name.size() - 7);
  gpu.product = nvml_product(product_label.substr(0, at));
  Result<const vocab::MigCatalog*> catalog = vocab::mig_catalog(gpu.product);
  if (!catalog) return error("no MIG geometry is known for {}", gpu.product);
  gpu.catalog = *catalog;
  const vocab::MigProfile* profile = gpu.catalog->find(profile_name);
  if (!profile) {
    return error("MIG profile '{}' (label {}) is not a profile of {}", profile_name, kProductLabel,
                 gpu.catalog->model);
  }
  std::optional<int64_t> devices = GP_TRY(
      label_count("nvidia.com/gpu.count", int64_t{kMaxGpusPerNode} * profile->max_instances));
  if (!devices || *devices == 0) return error("label nvidia.com/gpu.count is missing or 0");
  int per_gpu = profile->max_instances;
  gpu.gpus = static_cast<int>((*devices + per_gpu - 1) / per_gpu);
  warn("mig.strategy=single labels count MIG devices, not GPUs: assumed {} GPU{} holding {} x {}",
       gpu.gpus, gpu.gpus == 1 ? "" : "s", *devices, profile_name);
  std::map<std::string, int> counts = {{profile_name, static_cast<int>(*devices)}};
  gpu.mig_layouts = GP_TRY(spread_mig(*gpu.catalog, counts, gpu.gpus, raw_.name));
  if (std::optional<int64_t> mib = nominal_memory_mib(gpu.catalog->model)) {
    gpu.memory_mib = *mib;
    warn(
        "mig.strategy=single labels the memory of a MIG device, not of a GPU: assumed the "
        "nominal {} MiB of {}",
        *mib, gpu.catalog->model);
  }
  if (replicas > 1) warn("MIG devices shared {} ways are imported unshared", replicas);
  return check_capacity("nvidia.com/gpu", *devices * replicas, "MIG devices");
}

Result<void> NodeImporter::plan_whole_and_mixed(GpuPlan& gpu, const std::string& strategy,
                                                int replicas,
                                                const std::map<std::string, int>& mig_counts) {
  std::optional<int64_t> count = GP_TRY(label_count("nvidia.com/gpu.count", kMaxGpusPerNode));
  if (!count) return error("has label {} but no nvidia.com/gpu.count", kProductLabel);
  gpu.gpus = static_cast<int>(*count);
  if (gpu.gpus == 0) return ok();
  std::optional<int64_t> memory = GP_TRY(label_count("nvidia.com/gpu.memory", int64_t{1} << 30));
  if (memory) {
    gpu.memory_mib = *memory;
  } else {
    warn("no nvidia.com/gpu.memory label: GPU memory unknown (0)");
  }
  // Time-sliced GPUs are advertised as nvidia.com/gpu, or as nvidia.com/gpu.shared when renamed.
  std::string whole_key = "nvidia.com/gpu";
  if (gpu.time_sliced && raw_.capacity.contains("nvidia.com/gpu.shared")) {
    whole_key = "nvidia.com/gpu.shared";
  }
  int per_whole = gpu.time_sliced ? replicas : 1;
  int whole = gpu.gpus;
  if (strategy == "mixed") {
    std::optional<int64_t> advertised =
        GP_TRY(resource(raw_.capacity, "capacity", whole_key, false));
    if (advertised) {
      whole = static_cast<int>(std::min<int64_t>(*advertised / per_whole, gpu.gpus));
    } else if (!mig_counts.empty()) {
      whole = 0;  // every GPU in MIG mode: the plugin may not advertise nvidia.com/gpu at all
    }
  }
  int mig_gpus = gpu.gpus - whole;
  if (!mig_counts.empty() && mig_gpus == 0) {
    std::vector<std::string> profiles;
    profiles.reserve(mig_counts.size());
    for (const auto& [profile, n] : mig_counts) profiles.push_back(profile);
    return error("has MIG instances ({}) but capacity {} counts all {} GPUs as whole",
                 fmt::join(profiles, ", "), whole_key, gpu.gpus);
  }
  if (mig_gpus > 0) {
    if (!gpu.catalog) return error("no MIG geometry is known for {}", gpu.product);
    for (const auto& [profile, n] : mig_counts) {
      if (!gpu.catalog->find(profile)) {
        std::vector<std::string> known;
        known.reserve(gpu.catalog->profiles.size());
        for (const vocab::MigProfile& p : gpu.catalog->profiles) known.push_back(p.name);
        return error("MIG profile '{}' (label {}{}{}) is not a profile of {} (known: {})", profile,
                     kMigLabelPrefix, profile, kCountSuffix, gpu.catalog->model,
                     fmt::join(known, ", "));
      }
    }
    gpu.mig_layouts = GP_TRY(spread_mig(*gpu.catalog, mig_counts, mig_gpus, raw_.name));
    for (const auto& [profile, n] : mig_counts) {
      GP_TRY_VOID(check_capacity(std::string(kMigLabelPrefix) + profile, n,
                                 fmt::format("{} instances", profile)));
    }
  }
  if (strategy != "mixed" || raw_.capacity.contains(whole_key) || mig_gpus == 0) {
    GP_TRY_VOID(check_capacity(whole_key, int64_t{whole} * per_whole,
                               gpu.time_sliced ? "GPU replicas" : "whole GPUs"));
  }
  return ok();
}

// Compares a device-plugin resource with what the labels imply; differences are warnings.
Result<void> NodeImporter::check_capacity(const std::string& key, int64_t expected,
                                          std::string_view what) {
  std::optional<int64_t> capacity = GP_TRY(resource(raw_.capacity, "capacity", key, false));
  std::optional<int64_t> allocatable =
      GP_TRY(resource(raw_.allocatable, "allocatable", key, false));
  if (!capacity) {
    warn(
        "status.capacity has no {} (expected {} {} from the GFD labels): is the NVIDIA device "
        "plugin running?",
        key, expected, what);
    return ok();
  }
  if (*capacity != expected) {
    warn("status.capacity {} is {} but the GFD labels imply {} {}; the labels were used", key,
         *capacity, expected, what);
  }
  if (allocatable && *allocatable < *capacity) {
    warn("status.allocatable {} is {} of capacity {}: the device plugin reports {} unhealthy", key,
         *allocatable, *capacity, *capacity - *allocatable);
  }
  return ok();
}

// The node's name as a DNS label: as given, or the first label of a DNS subdomain.
Result<std::string> NodeImporter::inventory_name() {
  if (validate_dns_label("name", raw_.name)) return raw_.name;
  std::string first = raw_.name.substr(0, raw_.name.find('.'));
  if (first.size() < raw_.name.size() && validate_dns_label("name", first)) {
    warn("node name '{}' is not a DNS label; imported as '{}'", raw_.name, first);
    return first;
  }
  Result<void> why = validate_dns_label("name", raw_.name);
  return error("the name cannot be imported as a gpuplane node name: {}", why.error().message);
}

Result<void> NodeImporter::fill_node_info(NodeInfo& info) {
  info.name = GP_TRY(inventory_name());
  const auto& cpu_source = raw_.allocatable.contains("cpu") ? raw_.allocatable : raw_.capacity;
  const auto& memory_source =
      raw_.allocatable.contains("memory") ? raw_.allocatable : raw_.capacity;
  std::optional<int64_t> cpu = GP_TRY(resource(
      cpu_source, &cpu_source == &raw_.allocatable ? "allocatable" : "capacity", "cpu", true));
  std::optional<int64_t> memory = GP_TRY(
      resource(memory_source, &memory_source == &raw_.allocatable ? "allocatable" : "capacity",
               "memory", false));
  if (!cpu || !memory) return error("status.allocatable and status.capacity lack cpu or memory");
  if (&cpu_source != &raw_.allocatable || &memory_source != &raw_.allocatable) {
    warn("status.allocatable lacks cpu or memory; status.capacity was used");
  }
  info.cpu_millis = *cpu;
  info.memory_bytes = *memory;

  for (std::string_view key : {"topology.kubernetes.io/rack", "rack"}) {
    const std::string* rack = label(key);
    if (!rack) continue;
    if (rack->size() <= kMaxNameLength) {
      info.rack = *rack;
    } else {
      warn("label {} is longer than {} characters; rack left empty", key, kMaxNameLength);
    }
    break;
  }
  if (const std::string* clique = label("nvidia.com/gpu.clique")) {
    if (clique->size() <= kMaxNameLength) {
      info.nvlink_domain = *clique;
    } else {
      warn("label nvidia.com/gpu.clique is longer than {} characters; NVLink domain left empty",
           kMaxNameLength);
    }
  }
  size_t dropped = 0;
  for (const auto& [key, value] : raw_.labels) {
    if (!keep_label(key)) continue;
    if (key.size() > kMaxLabelLength || value.size() > kMaxLabelLength ||
        info.labels.size() == kMaxKeptLabels) {
      ++dropped;
      continue;
    }
    info.labels.emplace(key, value);
  }
  if (dropped > 0) {
    warn("{} label{} not kept (more than {} labels, or longer than {} characters)", dropped,
         dropped == 1 ? "" : "s", kMaxKeptLabels, kMaxLabelLength);
  }
  return ok();
}

Result<std::optional<ImportedNode>> NodeImporter::run() {
  std::optional<GpuPlan> gpus = GP_TRY(plan_gpus());
  if (!gpus) return std::optional<ImportedNode>();
  Inventory inventory;
  GP_TRY_VOID(fill_node_info(inventory.node));
  std::string model = canonical_model(gpus->product);
  for (int i = 0; i < gpus->gpus; ++i) {
    GpuInfo g;
    g.uuid = fmt::format("GPU-k8s-{}-{}", inventory.node.name, i);
    g.index = i;
    g.product = gpus->product;
    g.model = model;
    g.memory_bytes = gpus->memory_mib * kMiB;
    g.mig_capable = gpus->catalog != nullptr;
    if (static_cast<size_t>(i) < gpus->mig_layouts.size()) {
      g.mode = GpuMode::kMig;
      g.mig_instances = gpus->mig_layouts[i];
    } else if (gpus->time_sliced) {
      g.mode = GpuMode::kTimeSliced;
    }
    inventory.gpus.push_back(std::move(g));
  }
  // The inventory must be what an agent could have reported: same format, same checks.
  Result<Inventory> checked = parse_inventory(to_json(inventory));
  if (!checked) return error("the imported inventory is invalid: {}", checked.error().message);

  ImportedNode node;
  node.inventory = std::move(*checked);
  node.schedulable = !raw_.unschedulable;
  node.ready = raw_.ready.value_or(false);
  if (!raw_.ready) warn("no Ready condition in status.conditions; taken as not ready");
  node.warnings = std::move(warnings_);
  return std::optional<ImportedNode>(std::move(node));
}

}  // namespace

Result<int64_t> parse_k8s_quantity(std::string_view q) { return parse_quantity(q, Unit::kBase); }

Result<int64_t> parse_cpu_millis(std::string_view q) { return parse_quantity(q, Unit::kMilli); }

Result<ImportResult> import_kubectl_nodes(const Json& node_list) {
  if (!node_list.is_object()) {
    return fail(
        Error::invalid("expected a JSON object: a List of Node (kubectl get nodes -o json)"));
  }
  const Json* kind = GP_TRY(member(node_list, "kind", Kind::kString, "list", true));
  const std::string& k = kind->get_ref<const std::string&>();
  if (k != "List" && k != "NodeList") {
    return fail(Error::invalid(
        fmt::format("expected kind List or NodeList (kubectl get nodes -o json), got '{}'", k)));
  }
  const Json* items = GP_TRY(member(node_list, "items", Kind::kArray, "list", true));

  std::vector<RawNode> raw;
  std::set<std::string> names;
  for (size_t i = 0; i < items->size(); ++i) {
    // A NodeList's items carry no kind; a List's must say what they are.
    RawNode node = GP_TRY(read_node((*items)[i], fmt::format("items[{}]", i), k == "List"));
    if (!names.insert(node.name).second) {
      return fail(Error::invalid(fmt::format("duplicate node name '{}'", node.name)));
    }
    raw.push_back(std::move(node));
  }

  ImportResult result;
  std::map<std::string, std::string> imported_names;  // inventory name -> Kubernetes name
  for (const RawNode& node : raw) {
    NodeImporter importer(node);
    std::optional<ImportedNode> imported = GP_TRY(importer.run());
    if (!imported) {
      result.skipped.push_back(fmt::format("{}: {}", node.name, importer.skip_reason()));
      continue;
    }
    const std::string& name = imported->inventory.node.name;
    auto [it, inserted] = imported_names.emplace(name, node.name);
    if (!inserted) {
      return fail(Error::invalid(fmt::format("nodes '{}' and '{}' would both be imported as '{}'",
                                             it->second, node.name, name)));
    }
    result.nodes.push_back(std::move(*imported));
  }
  return result;
}

}  // namespace gp::fleet
