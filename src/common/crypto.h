// Small wrappers over OpenSSL used across modules: digests, random bytes, encodings and
// constant-time comparison. Everything here is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"

namespace gp {

std::string sha256(std::string_view data);  // 32 raw bytes
std::string hex_encode(std::string_view bytes);
std::optional<std::string> hex_decode(std::string_view hex);
std::string base64url_encode(std::string_view bytes);  // no padding
std::optional<std::string> base64url_decode(std::string_view s);
// Cryptographically secure random bytes (OpenSSL RAND_bytes); aborts if the RNG fails. The
// system source behind SystemRandom (common/env.h): code outside src/common draws through an Env.
std::string random_bytes(size_t n);
bool constant_time_equal(std::string_view a, std::string_view b);
// True if `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace gp
