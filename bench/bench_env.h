// A throwaway control plane for the benchmarks that run the API in process: a SQLite store (or
// a given PostgreSQL database) and an audit log in a fresh temporary directory (removed with
// it), the system clock, random ids.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/api.h"
#include "audit/audit.h"
#include "common/clock.h"
#include "common/ids.h"
#include "store/engines.h"
#include "store/store.h"

namespace gp::bench {

// The p-quantile (0..1) of `v` by rank; 0 for none.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(double(v.size()) * p))];
}

// The I/O threads of a benchmark's server: as many as `serve` runs by default, or
// GP_BENCH_THREADS.
inline int io_threads() {
  const char* v = std::getenv("GP_BENCH_THREADS");
  return v ? std::max(1, std::atoi(v)) : api::default_io_threads();
}

class BenchEnv {
 public:
  // nullptr, with the reason on stderr, when the directory, store or audit key cannot be made.
  // `store_location`: a postgres:// URL of an empty database instead of SQLite in the directory.
  static std::unique_ptr<BenchEnv> open(const std::string& store_location = "") {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpbench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      return nullptr;
    }
    auto env = std::unique_ptr<BenchEnv>(new BenchEnv(tmpl));
    auto store = store_location.empty() ? store::open_sqlite({.path = tmpl + "/gpuplane.db"})
                                        : store::open_store(store_location);
    auto signer = audit::load_or_create(tmpl);
    if (!store || !signer) {
      std::fprintf(stderr, "bench setup: %s\n",
                   (!store ? store.error() : signer.error()).message.c_str());
      return nullptr;
    }
    env->store_ = std::move(*store);
    env->log_ = std::make_unique<audit::AuditLog>(env->clock, std::move(*signer));
    return env;
  }
  ~BenchEnv() {
    log_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // What a benchmark works with, to bind by name:
  //   auto [store, clock, ids, log] = env->parts();
  struct Parts {
    store::Store& store;
    SystemClock& clock;
    RandomIdSource& ids;
    audit::AuditLog& log;
  };
  Parts parts() { return {*store_, clock, ids, *log_}; }

  const std::string& dir() const { return dir_; }
  SystemClock clock;
  RandomIdSource ids;

 private:
  explicit BenchEnv(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<audit::AuditLog> log_;
};

}  // namespace gp::bench
