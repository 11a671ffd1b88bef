// gp::sim::parse_nodes / parse_pods: the openb trace CSV files (Alibaba GPU cluster traces).
// The first byte picks the reader: even: nodes, odd: pods.
#include "fuzz_util.h"
#include "sim/sim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view csv = gp::fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    (void)gp::sim::parse_nodes(csv, "fuzz");
  } else {
    (void)gp::sim::parse_pods(csv, "fuzz");
  }
  return 0;
}
