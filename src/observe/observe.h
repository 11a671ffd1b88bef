// Observability: the fleet as Prometheus sees it (docs/observability.md). Two expositions, each
// computed from the store when scraped:
//
//   fleet_metrics: nodes by state, GPUs by model and health, allocations by state and tier,
//     queues and quota per tenant, jobs by state. Its series do not grow with the fleet: tenants
//     beyond `max_tenants` are summed under tenant="_other".
//   hardware_metrics: one series per node, GPU and MIG instance per metric, under the NVIDIA DCGM
//     exporter's names (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, ...) so that dashboards built
//     for the DCGM exporter work, labelled with who holds the GPU. A large fleet is scraped in
//     shards of its nodes.
//
// The exposition builder is pure; the gatherers read through the modules that own the tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "alloc/alloc.h"
#include "common/env.h"
#include "common/page.h"
#include "common/result.h"
#include "store/store.h"

namespace gp::observe {

// ---- the text exposition format (pure) ----
using Labels = std::vector<std::pair<std::string_view, std::string>>;

class Exposition {
 public:
  // Starts a family: the samples added after it belong to it. `type`: "gauge" or "counter".
  // A family with no samples is left out.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(const Labels& labels, double value);
  std::string take();

 private:
  void flush_header();
  std::string out_, header_;
  std::string_view name_;
};

// A label value as the format requires it: backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view v);

// Keeps the `max` keys with the largest values, sums the rest under "_other".
std::vector<std::pair<std::string, double>> top_with_other(
    std::vector<std::pair<std::string, double>> values, size_t max);

// ---- gatherers ----
struct FleetOptions {
  size_t max_tenants = 100;  // tenant label values per family, "_other" beyond
};
Result<std::string> fleet_metrics(store::Tx& tx, const Env& w, alloc::Service& service,
                                  const FleetOptions& options);

// The nodes whose name hashes (FNV-1a) to `index` modulo `count`; {0, 1} is every node.
struct Shard {
  uint32_t index = 0, count = 1;
};
Result<Shard> parse_shard(std::string_view text);  // "2/8"
bool in_shard(std::string_view node_name, Shard shard);
// What one scrape of the hardware exposition covers: the shard's nodes; with `tenant_id`, only
// the series of the GPUs and MIG instances that tenant holds (no node series, nothing another
// tenant holds or shares), which is what a tenant reads of its own.
struct HardwareScope {
  Shard shard;
  std::optional<std::string> tenant_id;
};
Result<std::string> hardware_metrics(store::Tx& tx, const Env& w, const HardwareScope& scope);

}  // namespace gp::observe
