// gp::fleet::parse_inventory: the GPU inventory an agent reports for its node.
#include "fleet/inventory.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = gp::parse_json(gp::fuzz::as_text(data, size));
  if (!j) return 0;
  (void)gp::fleet::parse_inventory(*j);
  return 0;
}
