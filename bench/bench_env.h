// A throwaway control plane for the benchmarks that run the API in process: a SQLite store and
// an audit log in a fresh temporary directory (removed with it), the system clock, random ids.
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "audit/audit.h"
#include "common/clock.h"
#include "common/ids.h"
#include "store/store.h"

namespace gp::bench {

class BenchEnv {
 public:
  // nullptr, with the reason on stderr, when the directory, store or audit key cannot be made.
  static std::unique_ptr<BenchEnv> open() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpbench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      return nullptr;
    }
    auto env = std::unique_ptr<BenchEnv>(new BenchEnv(tmpl));
    auto store = store::open_sqlite({.path = tmpl + "/gpuplane.db"});
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
