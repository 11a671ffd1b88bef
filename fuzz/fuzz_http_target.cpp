// gp::api::parse_target: the request target of every HTTP request (path and query string,
// percent-decoding).
#include "api/http.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gp::api::HttpRequest req;
  req.method = "GET";
  req.target = std::string(gp::fuzz::as_text(data, size));
  gp::api::parse_target(req);
  // The decoded path never grows: every escape shrinks three bytes to one.
  if (req.path.size() > req.target.size()) __builtin_trap();
  return 0;
}
