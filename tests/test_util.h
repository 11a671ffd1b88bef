// Helpers shared by unit tests: temporary directories and a fresh SQLite store.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "store/store.h"

namespace gp::testing {

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

inline std::unique_ptr<store::Store> open_store(const TempDir& dir) {
  auto s = store::open_sqlite({.path = dir.file("gpuplane.db")});
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  return std::move(*s);
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
