#include "common/env.h"

#include <algorithm>
#include <cstring>

#include "common/crypto.h"

namespace gp {

uint64_t Random::u64() const {
  const std::string b = bytes(sizeof(uint64_t));
  uint64_t v = 0;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

std::string Random::uuid() const {
  std::string b = bytes(16);
  b[6] = static_cast<char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  const std::string h = hex_encode(b);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::string SystemRandom::bytes(size_t n) const { return random_bytes(n); }

std::string SeededRandom::bytes(size_t n) const {
  std::string out(n, '\0');
  MutexLock lock(mu_);
  for (size_t i = 0; i < n; i += sizeof(uint64_t)) {
    const uint64_t v = rng_();
    std::memcpy(out.data() + i, &v, std::min(sizeof v, n - i));
  }
  return out;
}

const Random& system_random() {
  static const SystemRandom random;
  return random;
}

const std::filesystem::path& host_root() {
  static const std::filesystem::path root("/");
  return root;
}

std::filesystem::path Env::host_path(std::string_view absolute) const {
  while (absolute.starts_with('/')) absolute.remove_prefix(1);
  return root / absolute;
}

Env system_env() {
  static const SystemClock clock;
  static RandomIdSource ids;
  return Env{clock, ids, system_random(), host_root()};
}

}  // namespace gp
