// `gpuplane backup` of a running server and `gpuplane restore` into a new data directory: the
// backup is one file sealed under a backup key kept apart from it (no key, no store page in
// clear); the restored server has every tenant, project, secret and audit record, the trail
// verifies; and restores that could clobber anything, or from a wrong key or an altered or
// truncated file, are refused before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "process/process_util.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

TEST(Backup, LiveBackupRestoresIntoANewDataDirectory) {
  TempDir tmp;
  Server a(tmp.path() / "a", kNoRateLimits);
  ASSERT_TRUE(a.start());
  auto post = [&](const std::string& target, const Json& body) {
    auto r = a.admin_request("POST", target, body);
    EXPECT_TRUE(r && r->status == 201) << target << ": " << (r ? r->body : r.error().message);
    return r ? Json::parse(r->body) : Json();
  };
  const std::string tenant = post("/v1/tenants", {{"name", "acme"}})["id"];
  for (int p = 0; p < 20; ++p)
    post("/v1/tenants/" + tenant + "/projects", {{"name", "p" + std::to_string(p)}});
  post("/v1/tenants/" + tenant + "/secrets", {{"name", "db-password"}, {"value", "s3cret"}});

  // While it serves, under a new backup key, which may not live inside the backup.
  const std::string backup = (tmp.path() / "backup").string();
  const std::string key = (tmp.path() / "backup.key").string();
  auto inside = run_gpuplane({"backup", "--data", a.data_dir().string(), "--out", backup,
                              "--key-file", backup + "/backup.key", "--new-key"});
  EXPECT_EQ(inside.exit_code, 1);
  EXPECT_NE(inside.err.find("keep the backup key apart"), std::string::npos) << inside.err;
  auto made = run_gpuplane(
      {"backup", "--data", a.data_dir().string(), "--out", backup, "--key-file", key, "--new-key"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.out.find("backup written to " + backup), std::string::npos) << made.out;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(backup)) files.push_back(e.path().filename());
  EXPECT_EQ(files, std::vector<std::string>{"gpuplane.backup"});
  // Nothing readable inside: not the master key, not the audit key, not a page of the store.
  const std::string sealed = read_file(fs::path(backup) / "gpuplane.backup");
  for (const char* f : {"master.key", "audit-signing.key"}) {
    std::string k = read_file(a.data_dir() / f);
    while (!k.empty() && k.back() == '\n') k.pop_back();
    ASSERT_GE(k.size(), 32u) << f;
    EXPECT_EQ(sealed.find(k.substr(0, 32)), std::string::npos) << f << " is in the backup in clear";
  }
  for (const char* clear : {"SQLite format 3", "CREATE TABLE", "db-password", "acme"})
    EXPECT_EQ(sealed.find(clear), std::string::npos) << clear;
  auto again =
      run_gpuplane({"backup", "--data", a.data_dir().string(), "--out", backup, "--key-file", key});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already holds a backup"), std::string::npos) << again.err;
  auto check = run_gpuplane({"restore", "--from", backup, "--key-file", key, "--check"});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("master.key"), std::string::npos) << check.out;

  // A wrong key, an altered byte, a truncated file: refused, and nothing is written.
  const fs::path wrong_key = tmp.path() / "wrong.key";
  ASSERT_EQ(run_gpuplane({"backup", "--data", a.data_dir().string(), "--out",
                          (tmp.path() / "other-backup").string(), "--key-file", wrong_key.string(),
                          "--new-key"})
                .exit_code,
            0);
  const fs::path altered = tmp.path() / "altered", truncated = tmp.path() / "truncated";
  fs::create_directories(altered);
  fs::create_directories(truncated);
  std::string flipped = sealed;
  flipped[flipped.size() / 2] ^= 0x01;
  std::ofstream(altered / "gpuplane.backup", std::ios::binary) << flipped;
  std::ofstream(truncated / "gpuplane.backup", std::ios::binary)
      << sealed.substr(0, sealed.size() - 100);
  for (const auto& [from, key_file, why] :
       {std::tuple{fs::path(backup), wrong_key, "wrong key"},
        std::tuple{altered, fs::path(key), "does not authenticate"},
        std::tuple{truncated, fs::path(key), "truncated"}}) {
    const fs::path target = tmp.path() / ("target-" + std::string(why));
    auto r = run_gpuplane({"restore", "--from", from.string(), "--data", target.string(),
                           "--key-file", key_file.string()});
    EXPECT_EQ(r.exit_code, 1) << why;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(target)) << why << ": the restore wrote into " << target;
  }

  // Not over a running server's store.
  auto busy = run_gpuplane(
      {"restore", "--from", backup, "--data", a.data_dir().string(), "--key-file", key});
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_NE(busy.err.find("a gpuplane server is running"), std::string::npos) << busy.err;
  auto tenants_after = a.admin_request("GET", "/v1/tenants");
  ASSERT_TRUE(tenants_after);
  EXPECT_NE(tenants_after->body.find("acme"), std::string::npos);

  // Into a new data directory; a second restore there is refused and changes nothing.
  const fs::path restored = tmp.path() / "restored";
  auto put =
      run_gpuplane({"restore", "--from", backup, "--data", restored.string(), "--key-file", key});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_NE(put.out.find("restored into"), std::string::npos) << put.out;
  auto twice =
      run_gpuplane({"restore", "--from", backup, "--data", restored.string(), "--key-file", key});
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.err.find("not empty"), std::string::npos) << twice.err;
  auto verify = run_gpuplane({"audit", "verify", "--data", restored.string()});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;

  Server b(restored, kNoRateLimits);
  b.use_admin(a.admin());
  ASSERT_TRUE(b.start());
  auto projects = list_all(b, "/v1/tenants/acme/projects");
  ASSERT_TRUE(projects) << projects.error().message;
  EXPECT_EQ(projects->size(), 20u);
  auto secret = b.admin_request("GET", "/v1/tenants/acme/secrets/db-password");
  ASSERT_TRUE(secret);
  EXPECT_EQ(secret->status, 200) << secret->body;
  // The restored server writes on: the audit chain continues from the backup's head.
  auto more = b.admin_request("POST", "/v1/tenants/acme/projects", {{"name", "after"}});
  ASSERT_TRUE(more);
  EXPECT_EQ(more->status, 201) << more->body;
  EXPECT_EQ(b.terminate(), 0) << b.log();
  EXPECT_EQ(run_gpuplane({"audit", "verify", "--data", restored.string()}).exit_code, 0);

  // A data directory with another master key is left alone.
  const fs::path other = tmp.path() / "other";
  fs::create_directories(other);
  std::ofstream(other / "master.key") << "another key";
  auto refused =
      run_gpuplane({"restore", "--from", backup, "--data", other.string(), "--key-file", key});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("differs from the backup's"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(other / "gpuplane.db"));
  EXPECT_EQ(a.terminate(), 0) << a.log();
}

}  // namespace
}  // namespace gp::proc
