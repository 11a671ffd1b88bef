// gp::agent::parse_assignment / parse_workloads: what the agent reads from the control plane
// (GET /v1/agent/assignment) and from the workloads file a CNI plugin writes.
// The first byte picks the reader: even: assignment, odd: workloads.
#include "agent/enforce.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto j = gp::parse_json(gp::fuzz::as_text(data + 1, size - 1));
  if (!j) return 0;
  if (data[0] % 2 == 0) {
    (void)gp::agent::parse_assignment(*j);
  } else {
    (void)gp::agent::parse_workloads(*j);
  }
  return 0;
}
