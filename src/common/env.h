// The process's environment, injected as LevelDB's Env and Envoy's Api are: the clock, the
// randomness, the identifiers and the host's filesystem root. Code outside src/common reads the
// time, draws random bytes and makes ids only through an Env it was given, so a test can hold
// time still, replay the same ids and random bytes, and point host paths at a scratch
// directory. `scripts/module_graph.py --check` (part of `make test`) fails on a direct read of
// the wall clock or the system random source anywhere else, and on `system_env()` outside the
// composition root (src/cli), naming the file and line.
//
// A monotonic clock (std::chrono::steady_clock) read for deadlines, timeouts and durations is
// not the wall clock and stays where it is needed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/ids.h"
#include "common/thread_safety.h"

namespace gp {

// A source of random bytes. Thread-safe.
class Random {
 public:
  virtual ~Random() = default;
  virtual std::string bytes(size_t n) const = 0;
  uint64_t u64() const;
  // A random RFC 4122 version-4 UUID, lower-case hex with dashes ("6f1c3d2a-...").
  std::string uuid() const;
};

// The operating system's cryptographically secure generator (OpenSSL RAND_bytes, drawn through
// a per-thread pool for small draws); aborts if it fails.
class SystemRandom final : public Random {
 public:
  std::string bytes(size_t n) const override;
};

// The same bytes for the same seed, for tests and simulations; never for secrets.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : rng_(seed) {}
  std::string bytes(size_t n) const override;

 private:
  mutable Mutex mu_;
  mutable std::mt19937_64 rng_ GP_GUARDED_BY(mu_);
};

const Random& system_random();
const std::filesystem::path& host_root();  // "/"

struct Env {
  const Clock& clock;
  IdSource& ids;
  const Random& random = system_random();
  // Where the host's absolute paths (/sys, /etc, /run, ...) are found: "/" in production.
  const std::filesystem::path& root = host_root();

  int64_t now() const { return to_unix_micros(clock.now()); }
  // `absolute` ("/etc/resolv.conf") under root.
  std::filesystem::path host_path(std::string_view absolute) const;
};

// The real environment: the system clock, time-ordered random ids, the system generator and
// "/". Only the composition root (src/cli: `gpuplane serve`, `gpuplane agent` and the other
// commands) calls it; everything below is handed an Env.
Env system_env();

}  // namespace gp
