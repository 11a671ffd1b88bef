// The openb CSV formats: node and pod lists, parsed strictly (every bad row is an error that
// names the file, line and column), and their mapping onto scheduler nodes and requests.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "sim/sim.h"

namespace gp::sim {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = line.find(sep, start);
    out.push_back(trim(line.substr(start, at == std::string_view::npos ? line.npos : at - start)));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// One CSV table: the header's column positions and the data rows with their line numbers.
struct Table {
  std::string source;
  std::vector<std::string> header;
  std::vector<std::pair<int, std::vector<std::string_view>>> rows;

  int column(std::string_view name) const {
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
};

Result<Table> read_table(std::string_view csv, std::string_view source,
                         const std::vector<std::string_view>& required) {
  Table t;
  t.source = std::string(source);
  int line_no = 0;
  std::size_t pos = 0;
  bool have_header = false;
  while (pos <= csv.size()) {
    const std::size_t end = csv.find('\n', pos);
    std::string_view line = csv.substr(pos, end == csv.npos ? csv.npos : end - pos);
    pos = end == csv.npos ? csv.size() + 1 : end + 1;
    ++line_no;
    if (trim(line).empty()) continue;
    if (line.find('"') != line.npos) {
      return fail(Error::invalid(
          fmt::format("{}:{}: quoted fields are not supported in trace files", source, line_no)));
    }
    std::vector<std::string_view> cells = split(line, ',');
    if (!have_header) {
      for (std::string_view c : cells) t.header.emplace_back(c);
      for (std::string_view name : required) {
        if (t.column(name) < 0) {
          return fail(Error::invalid(fmt::format("{}:{}: header lacks column \"{}\" (has: {})",
                                                 source, line_no, name, fmt::join(t.header, ","))));
        }
      }
      have_header = true;
      continue;
    }
    if (cells.size() != t.header.size()) {
      return fail(Error::invalid(fmt::format("{}:{}: {} fields, the header has {}", source, line_no,
                                             cells.size(), t.header.size())));
    }
    t.rows.emplace_back(line_no, std::move(cells));
  }
  if (!have_header) return fail(Error::invalid(fmt::format("{}: empty file", source)));
  return t;
}

Result<int64_t> integer(const Table& t, int line, const std::vector<std::string_view>& row,
                        std::string_view name, int64_t lo, int64_t hi, bool optional = false,
                        int64_t absent = 0) {
  const int c = t.column(name);
  if (c < 0 || (optional && row[c].empty())) {
    if (optional) return absent;
    return fail(Error::invalid(fmt::format("{}:{}: no column {}", t.source, line, name)));
  }
  std::string_view v = row[c];
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size()) {
    return fail(Error::invalid(
        fmt::format("{}:{}: column {}: \"{}\" is not an integer", t.source, line, name, v)));
  }
  if (out < lo || out > hi) {
    return fail(Error::invalid(
        fmt::format("{}:{}: column {}: {} is outside {}..{}", t.source, line, name, out, lo, hi)));
  }
  return out;
}

std::string_view text(const Table& t, const std::vector<std::string_view>& row,
                      std::string_view name) {
  const int c = t.column(name);
  return c < 0 ? std::string_view{} : row[c];
}

constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
constexpr int64_t kMaxMemoryMib = int64_t{1} << 40;
constexpr int kMaxGpusPerNode = 64;

}  // namespace

Result<std::vector<TraceNode>> parse_nodes(std::string_view csv, std::string_view source) {
  Table t = GP_TRY(read_table(csv, source, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  std::vector<TraceNode> out;
  std::vector<std::string_view> names;
  for (const auto& [line, row] : t.rows) {
    TraceNode n;
    n.name = std::string(text(t, row, "sn"));
    if (n.name.empty()) {
      return fail(Error::invalid(fmt::format("{}:{}: empty node name (sn)", source, line)));
    }
    n.cpu_milli = GP_TRY(integer(t, line, row, "cpu_milli", 0, kMaxCpuMilli));
    n.memory_mib = GP_TRY(integer(t, line, row, "memory_mib", 0, kMaxMemoryMib));
    const int64_t gpus = GP_TRY(integer(t, line, row, "gpu", 0, kMaxGpusPerNode));
    n.gpus = static_cast<int>(gpus);
    n.model = std::string(text(t, row, "model"));
    if (n.gpus > 0 && n.model.empty()) {
      return fail(Error::invalid(
          fmt::format("{}:{}: node {} has {} GPUs but no model", source, line, n.name, n.gpus)));
    }
    out.push_back(std::move(n));
  }
  std::vector<std::string> sorted;
  sorted.reserve(out.size());
  for (const TraceNode& n : out) sorted.push_back(n.name);
  std::ranges::sort(sorted);
  if (auto dup = std::ranges::adjacent_find(sorted); dup != sorted.end()) {
    return fail(Error::invalid(fmt::format("{}: node {} listed twice", source, *dup)));
  }
  if (out.empty()) return fail(Error::invalid(fmt::format("{}: no nodes", source)));
  return out;
}

Result<std::vector<TracePod>> parse_pods(std::string_view csv, std::string_view source) {
  Table t =
      GP_TRY(read_table(csv, source, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}));
  std::vector<TracePod> out;
  const bool times = t.column("creation_time") >= 0 && t.column("deletion_time") >= 0;
  for (const auto& [line, row] : t.rows) {
    TracePod p;
    p.name = std::string(text(t, row, "name"));
    if (p.name.empty())
      return fail(Error::invalid(fmt::format("{}:{}: empty pod name", source, line)));
    p.cpu_milli = GP_TRY(integer(t, line, row, "cpu_milli", 0, kMaxCpuMilli));
    p.memory_mib = GP_TRY(integer(t, line, row, "memory_mib", 0, kMaxMemoryMib));
    const int64_t num_gpu = GP_TRY(integer(t, line, row, "num_gpu", 0, kMaxGpusPerNode));
    const int64_t gpu_milli = GP_TRY(integer(t, line, row, "gpu_milli", 0, 1000));
    p.num_gpu = static_cast<int>(num_gpu);
    p.gpu_milli = static_cast<int>(gpu_milli);
    if (p.num_gpu == 0 && p.gpu_milli != 0) {
      return fail(Error::invalid(fmt::format("{}:{}: pod {} asks for {} gpu_milli with num_gpu 0",
                                             source, line, p.name, gpu_milli)));
    }
    if (p.num_gpu == 1 && p.gpu_milli == 0) {
      return fail(Error::invalid(
          fmt::format("{}:{}: pod {} has num_gpu 1 and gpu_milli 0", source, line, p.name)));
    }
    if (p.num_gpu > 1 && p.gpu_milli != 1000) {
      return fail(Error::invalid(fmt::format(
          "{}:{}: pod {} asks for {} GPUs of {} milli; multi-GPU pods take whole GPUs (1000)",
          source, line, p.name, p.num_gpu, p.gpu_milli)));
    }
    if (p.num_gpu == 0 && p.cpu_milli == 0 && p.memory_mib == 0) {
      return fail(Error::invalid(fmt::format(
          "{}:{}: pod {} asks for nothing (no GPU, CPU or memory)", source, line, p.name)));
    }
    for (std::string_view m : split(text(t, row, "gpu_spec"), '|')) {
      if (!m.empty()) p.gpu_spec.emplace_back(m);
    }
    p.qos = std::string(text(t, row, "qos"));
    p.phase = std::string(text(t, row, "pod_phase"));
    p.tenant = std::string(text(t, row, "tenant"));
    if (times) {
      constexpr int64_t kMaxTime = int64_t{1} << 50;
      const int64_t created = GP_TRY(integer(t, line, row, "creation_time", 0, kMaxTime, true, -1));
      const int64_t deleted = GP_TRY(integer(t, line, row, "deletion_time", 0, kMaxTime, true, -1));
      if (created >= 0) p.creation_time = created;
      if (deleted >= 0) p.deletion_time = deleted;
      if (created >= 0 && deleted >= 0 && deleted < created) {
        return fail(
            Error::invalid(fmt::format("{}:{}: pod {} is deleted ({}) before it is created ({})",
                                       source, line, p.name, deleted, created)));
      }
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) return fail(Error::invalid(fmt::format("{}: no pods", source)));
  return out;
}

Result<std::string> load_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Error::invalid(fmt::format("cannot read {}", path)));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<sched::NodeSpec> cluster_of(const std::vector<TraceNode>& nodes) {
  std::vector<sched::NodeSpec> out;
  out.reserve(nodes.size());
  for (const TraceNode& n : nodes) {
    sched::NodeSpec spec;
    spec.id = spec.name = n.name;
    spec.cpu_milli = n.cpu_milli;
    spec.memory_mib = n.memory_mib;
    for (int g = 0; g < n.gpus; ++g) {
      sched::GpuSpec gpu;
      gpu.uuid = fmt::format("{}/gpu{}", n.name, g);
      gpu.index = g;
      gpu.model = n.model;
      spec.gpus.push_back(std::move(gpu));
    }
    out.push_back(std::move(spec));
  }
  return out;
}

int64_t gpu_capacity_milli(const std::vector<TraceNode>& nodes) {
  int64_t total = 0;
  for (const TraceNode& n : nodes) total += int64_t{1000} * n.gpus;
  return total;
}

sched::Request request_of(const TracePod& pod) {
  sched::Request r;
  r.tenant = pod.tenant.empty() ? std::string(kDefaultTenant) : pod.tenant;
  r.project = "trace";
  r.isolation = sched::IsolationClass::kInternal;
  r.models = pod.gpu_spec;
  r.cpu_milli = pod.cpu_milli;
  r.memory_mib = pod.memory_mib;
  if (pod.num_gpu == 0) {
    r.tier = sched::Tier::kDedicatedGpu;
    r.count = 0;
  } else if (pod.num_gpu == 1 && pod.gpu_milli < 1000) {
    r.tier = sched::Tier::kShared;
    r.count = 1;
    r.milli = pod.gpu_milli;
  } else {
    r.tier = sched::Tier::kDedicatedGpu;
    r.count = pod.num_gpu;
    r.same_node = true;
  }
  return r;
}

std::map<sched::ClusterState::Shape, int64_t> workload_of(const std::vector<TracePod>& pods,
                                                          const sched::ClusterState& state) {
  std::map<sched::ClusterState::Shape, int64_t> mix;
  for (const TracePod& p : pods) {
    sched::ClusterState::Shape s;
    s.gpus = static_cast<int16_t>(p.num_gpu);
    s.milli = static_cast<int16_t>(p.gpu_milli);
    s.cpu_milli = p.cpu_milli;
    s.memory_mib = p.memory_mib;
    if (state.models().size() <= 64) {
      for (const std::string& m : p.gpu_spec) {
        const int32_t i = state.find_model(m);
        if (i >= 0) s.model_mask |= uint64_t{1} << i;
      }
    }
    ++mix[s];
  }
  return mix;
}

}  // namespace gp::sim
