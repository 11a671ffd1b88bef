// What the agent reads from outside: the control plane's assignment (GET /v1/agent/assignment),
// the workloads file a CNI plugin writes, the VMs of a heartbeat's reply, and a VM's serial
// console log (bytes a guest wrote). The first byte picks the reader, modulo 4: 0 assignment,
// 1 workloads, 2 VM assignments, 3 console log.
#include <cstdlib>

#include "agent/enforce.h"
#include "agent/vms.h"
#include "common/crypto.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = gp::fuzz::as_text(data + 1, size - 1);
  if (data[0] % 4 == 3) {
    // The cleaned console goes into a JSON string: it must be valid UTF-8 and within its limit.
    const std::string text = gp::agent::console_tail(rest);
    if (!gp::is_valid_utf8(text) || text.size() > gp::agent::kMaxConsoleBytes) std::abort();
    return 0;
  }
  auto j = gp::parse_json(rest);
  if (!j) return 0;
  switch (data[0] % 4) {
    case 0:
      (void)gp::agent::parse_assignment(*j);
      break;
    case 1:
      (void)gp::agent::parse_workloads(*j);
      break;
    default:
      (void)gp::agent::parse_vm_assignments(*j);
  }
  return 0;
}
