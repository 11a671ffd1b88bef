// The H200 fleet the HTTP benchmarks place allocations on, imported inside the caller's
// transaction: `nodes` nodes of 8 H200 each (MIG capable), 32 to a rack, one NVLink domain per
// node.
#pragma once

#include <fmt/format.h>

#include "common/env.h"
#include "fleet/fleet.h"

namespace gp::bench {

// Node n's inventory as its agent reports it: GPUs GPU-<n>-0..7, named `name`.
inline Json h200_inventory(int n, const std::string& name) {
  Json gpus = Json::array();
  for (int g = 0; g < 8; ++g)
    gpus.push_back({{"uuid", fmt::format("GPU-{:05d}-{}", n, g)},
                    {"index", g},
                    {"model", "NVIDIA H200"},
                    {"memory_bytes", int64_t{150} << 30},
                    {"mig_capable", true}});
  return {{"node",
           {{"name", name},
            {"cpu_millis", 128000},
            {"memory_bytes", int64_t{1} << 40},
            {"rack", fmt::format("r{}", n / 32)},
            {"nvlink_domain", fmt::format("nvl{}", n)}}},
          {"gpus", gpus}};
}

inline Result<void> import_h200_fleet(store::Tx& tx, const Env& w, int nodes) {
  for (int n = 0; n < nodes; ++n) {
    Json inv = h200_inventory(n, fmt::format("n{:05d}", n));
    GP_TRY(fleet::import_node(tx, w, GP_TRY(fleet::parse_inventory(inv)), std::nullopt, true));
  }
  return ok();
}

}  // namespace gp::bench
