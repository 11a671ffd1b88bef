// Identifier generation, injected so tests and simulations are reproducible. Ids are a short
// type prefix and 16 lowercase base32 characters: "ten_k3x9...".
#pragma once

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "common/thread_safety.h"

namespace gp {

class IdSource {
 public:
  virtual ~IdSource() = default;
  virtual std::string next(std::string_view prefix) = 0;
};

// Production ids: time-ordered (millisecond prefix) with 40 cryptographically random bits, so
// ids sort by creation time and inserts append to the store's indexes.
class RandomIdSource final : public IdSource {
 public:
  std::string next(std::string_view prefix) override;
};

// Deterministic ids from a seed (tests, simulation). Thread-safe.
class SeededIdSource final : public IdSource {
 public:
  explicit SeededIdSource(uint64_t seed) : rng_(seed) {}
  std::string next(std::string_view prefix) override;

 private:
  Mutex mu_;
  std::mt19937_64 rng_ GP_GUARDED_BY(mu_);
};

// Encodes the low 40 bits of hi, then of lo, as 16 base32 characters (order-preserving).
std::string encode_id(std::string_view prefix, uint64_t hi, uint64_t lo);

}  // namespace gp
