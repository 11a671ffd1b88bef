// Runs a program with input on stdin and captures its output (nft for network enforcement, the
// agent's VM tools).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gp {

struct ProcessResult {
  int exit_code = 0;  // 128 + signal when killed by a signal
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up in PATH) with `input` on standard input; stdout and stderr are
// captured in full. Errors: unavailable when the program cannot be started or runs past
// `timeout` (it is then killed). A non-zero exit is a result, not an error.
Result<ProcessResult> run_process(const std::vector<std::string>& argv, std::string_view input,
                                  std::chrono::milliseconds timeout);

}  // namespace gp
