// Helpers shared by the libFuzzer targets (fuzz/*.cpp). Every target feeds bytes from outside
// to a parser that answers Result<T>: a crash, an ASan/UBSan report or an uncaught exception is
// a bug in the parser, never an expected outcome.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "common/result.h"

namespace gp::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Serializes a value the parser accepted, so the fuzzer also exercises the accepted object
// (and a dump of an invalid UTF-8 string would throw here, which is a finding too).
inline void touch(const Json& j) { (void)j.dump(); }

}  // namespace gp::fuzz
