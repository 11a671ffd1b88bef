#include "common/ids.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/crypto.h"

namespace gp {

std::string encode_id(std::string_view prefix, uint64_t hi, uint64_t lo) {
  static constexpr char kAlphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";  // Crockford
  std::string out;
  out.reserve(prefix.size() + 17);
  out.append(prefix);
  out.push_back('_');
  // 16 chars x 5 bits = 80 bits: 40 from each half.
  for (int i = 0; i < 8; ++i) out.push_back(kAlphabet[(hi >> (35 - 5 * i)) & 31]);
  for (int i = 0; i < 8; ++i) out.push_back(kAlphabet[(lo >> (35 - 5 * i)) & 31]);
  return out;
}

std::string RandomIdSource::next(std::string_view prefix) {
  // The first 40 bits are milliseconds since 2024-01-01 (good until 2058), the other 40 are
  // random: new rows land at the right edge of every index keyed by id, so a commit dirties a
  // few shared pages instead of one random page per index per row.
  constexpr int64_t kEpochMs = 1'704'067'200'000;
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count() -
                     kEpochMs;
  std::string r = random_bytes(8);
  uint64_t lo;
  std::memcpy(&lo, r.data(), 8);
  return encode_id(prefix, uint64_t(std::max<int64_t>(ms, 0)), lo);
}

std::string SeededIdSource::next(std::string_view prefix) {
  MutexLock lock(mu_);
  uint64_t hi = rng_(), lo = rng_();
  return encode_id(prefix, hi, lo);
}

}  // namespace gp
