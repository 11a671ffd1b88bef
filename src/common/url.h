// Percent-encoding for URLs and form bodies (RFC 3986: unreserved characters stay, every other
// byte becomes %XX).
#pragma once

#include <string>
#include <string_view>

namespace gp {

std::string percent_encode(std::string_view s);

}  // namespace gp
