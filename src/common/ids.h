// Identifier generation, injected so tests and simulations are reproducible. Ids are a short
// type prefix and 16 lowercase base32 characters of randomness: "ten_k3x9...".
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

namespace gp {

class IdSource {
 public:
  virtual ~IdSource() = default;
  virtual std::string next(std::string_view prefix) = 0;
};

// Cryptographically random ids (production).
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
  std::mutex mu_;
  std::mt19937_64 rng_;
};

// Encodes 80 random bits as 16 base32 characters.
std::string encode_id(std::string_view prefix, uint64_t hi, uint64_t lo);

}  // namespace gp
