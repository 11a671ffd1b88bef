// `gpuplane backup` of a running server and `gpuplane restore` into a new data directory: the
// restored server has every tenant, project, secret and audit record, the trail verifies, and
// restores that could clobber anything are refused.
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

  // While it serves.
  const std::string backup = (tmp.path() / "backup").string();
  auto made = run_gpuplane({"backup", "--data", a.data_dir().string(), "--out", backup});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.out.find("backup written to " + backup), std::string::npos) << made.out;
  for (const char* f : {"gpuplane.db", "master.key", "audit-signing.key", "audit-signing.pub"})
    EXPECT_TRUE(fs::exists(fs::path(backup) / f)) << f;
  auto again = run_gpuplane({"backup", "--data", a.data_dir().string(), "--out", backup});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already holds a backup"), std::string::npos) << again.err;

  // Not over a running server's store.
  auto busy = run_gpuplane({"restore", "--from", backup, "--data", a.data_dir().string()});
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_NE(busy.err.find("a gpuplane server is running"), std::string::npos) << busy.err;
  auto tenants_after = a.admin_request("GET", "/v1/tenants");
  ASSERT_TRUE(tenants_after);
  EXPECT_NE(tenants_after->body.find("acme"), std::string::npos);

  // Into a new data directory; a second restore there is refused and changes nothing.
  const fs::path restored = tmp.path() / "restored";
  auto put = run_gpuplane({"restore", "--from", backup, "--data", restored.string()});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_NE(put.out.find("restored into"), std::string::npos) << put.out;
  auto twice = run_gpuplane({"restore", "--from", backup, "--data", restored.string()});
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
  auto refused = run_gpuplane({"restore", "--from", backup, "--data", other.string()});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("differs from the backup's"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(other / "gpuplane.db"));
  EXPECT_EQ(a.terminate(), 0) << a.log();
}

}  // namespace
}  // namespace gp::proc
