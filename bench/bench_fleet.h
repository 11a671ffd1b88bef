// The H200 fleet the HTTP benchmarks place allocations on, imported inside the caller's
// transaction: `nodes` nodes of 8 H200 each (MIG capable), 32 to a rack, one NVLink domain per
// node.
#pragma once

#include <fmt/format.h>

#include "fleet/fleet.h"

namespace gp::bench {

inline Result<void> import_h200_fleet(store::Tx& tx, const World& w, int nodes) {
  for (int n = 0; n < nodes; ++n) {
    Json gpus = Json::array();
    for (int g = 0; g < 8; ++g)
      gpus.push_back({{"uuid", fmt::format("GPU-{:05d}-{}", n, g)},
                      {"index", g},
                      {"model", "NVIDIA H200"},
                      {"memory_bytes", int64_t{150} << 30},
                      {"mig_capable", true}});
    Json inv = {{"node",
                 {{"name", fmt::format("n{:05d}", n)},
                  {"cpu_millis", 128000},
                  {"memory_bytes", int64_t{1} << 40},
                  {"rack", fmt::format("r{}", n / 32)},
                  {"nvlink_domain", fmt::format("nvl{}", n)}}},
                {"gpus", gpus}};
    GP_TRY(fleet::import_node(tx, w, GP_TRY(fleet::parse_inventory(inv)), std::nullopt, true));
  }
  return ok();
}

}  // namespace gp::bench
