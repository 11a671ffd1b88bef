// gp::parse_json: the strict JSON reader of every request body (depth, size, UTF-8 limits).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = gp::parse_json(gp::fuzz::as_text(data, size));
  if (!j) return 0;
  // Whatever parse_json accepts must serialize and read back as the same document.
  std::string text = j->dump();
  auto again = gp::parse_json(text);
  if (!again || *again != *j) __builtin_trap();
  return 0;
}
