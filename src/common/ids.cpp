#include "common/ids.h"

#include <cstring>

#include "common/crypto.h"

namespace gp {

std::string encode_id(std::string_view prefix, uint64_t hi, uint64_t lo) {
  static constexpr char kAlphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";  // Crockford
  std::string out(prefix);
  out.push_back('_');
  // 16 chars x 5 bits = 80 bits: 40 from each half.
  for (int i = 0; i < 8; ++i) out.push_back(kAlphabet[(hi >> (35 - 5 * i)) & 31]);
  for (int i = 0; i < 8; ++i) out.push_back(kAlphabet[(lo >> (35 - 5 * i)) & 31]);
  return out;
}

std::string RandomIdSource::next(std::string_view prefix) {
  std::string r = random_bytes(16);
  uint64_t hi, lo;
  std::memcpy(&hi, r.data(), 8);
  std::memcpy(&lo, r.data() + 8, 8);
  return encode_id(prefix, hi, lo);
}

std::string SeededIdSource::next(std::string_view prefix) {
  std::lock_guard lock(mu_);
  uint64_t hi = rng_(), lo = rng_();
  return encode_id(prefix, hi, lo);
}

}  // namespace gp
