// gp::metering::parse_events: CloudEvents usage events from external meters
// (POST /v1/usage/events: one event, or a batch).
#include "fuzz_util.h"
#include "metering/metering.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = gp::parse_json(gp::fuzz::as_text(data, size));
  if (!j) return 0;
  auto parsed = gp::metering::parse_events(*j, 100);
  (void)parsed;
  return 0;
}
