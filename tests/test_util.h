// Helpers shared by unit tests: temporary directories and a fresh SQLite store.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "store/store.h"

namespace gp::testing {

// Runs `command` with sh: whether it exited 0, and what it printed (stdout and stderr).
inline std::pair<bool, std::string> run_shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {false, ""};
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {::pclose(p) == 0, out};
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gptest-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The source tree (GP_SOURCE_DIR, set by CTest), else the working directory.
inline std::filesystem::path source_dir() {
  const char* dir = std::getenv("GP_SOURCE_DIR");
  return dir != nullptr ? std::filesystem::path(dir) : std::filesystem::path(".");
}

// The upstream Kubernetes JSON schemas live beside the repository (../shared/data), never in it.
inline std::filesystem::path shared_schemas() {
  return source_dir() / ".." / "shared" / "data" / "k8s-schemas";
}

// For the tests that need those schemas (and only those: verdict checks never do). Missing
// schemas fail the test when GP_REQUIRE_SHARED_DATA is set, and otherwise skip it loudly: on
// stderr and as a skipped test in ctest's summary.
#define GP_REQUIRE_SHARED_SCHEMAS()                                                \
  do {                                                                             \
    const std::filesystem::path schemas = ::gp::testing::shared_schemas();         \
    if (std::filesystem::exists(schemas)) break;                                   \
    if (std::getenv("GP_REQUIRE_SHARED_DATA") != nullptr)                          \
      FAIL() << "Kubernetes JSON schemas not found at " << schemas.string()        \
             << " and GP_REQUIRE_SHARED_DATA is set";                              \
    std::cerr << "WARNING: skipping a schema test: no Kubernetes JSON schemas at " \
              << schemas.string() << " (../shared/data beside the repository)\n";  \
    GTEST_SKIP() << "Kubernetes JSON schemas not found at " << schemas.string();   \
  } while (false)

inline std::unique_ptr<store::Store> open_store(const TempDir& dir) {
  auto s = store::open_sqlite({.path = dir.file("gpuplane.db")});
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  return std::move(*s);
}

// Bare tenant rows (class standard, active), named as their ids, for tests of the modules
// below tenancy whose tables reference tenants.
inline Result<void> insert_bare_tenants(store::Tx& tx, std::initializer_list<const char*> ids) {
  for (const char* id : ids)
    GP_TRY(tx.exec(
        "INSERT INTO tenants (id, name, display_name, isolation_class, state, labels, "
        "created_at, updated_at, version) VALUES (?, ?, '', 'standard', 'active', '{}', 0, 0, 1)",
        {std::string(id), std::string(id)}));
  return ok();
}

// Runs `f` (returning Result<T>) in a write transaction that must succeed; returns the T.
template <typename F>
auto must_write(store::Store& store, F&& f) {
  std::optional<std::remove_cvref_t<decltype(*f(std::declval<store::Tx&>()))>> out;
  auto r = store.write([&](store::Tx& tx) -> Result<void> {
    out = GP_TRY(f(tx));
    return ok();
  });
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return *out;
}

// Runs `f` in a write transaction that must fail; returns the error (rolled back).
template <typename F>
Error must_fail(store::Store& store, F&& f) {
  auto r = store.write([&](store::Tx& tx) -> Result<void> {
    GP_TRY_VOID(f(tx));
    return ok();
  });
  EXPECT_FALSE(r);
  return r ? Error::internal("succeeded") : r.error();
}

}  // namespace gp::testing
