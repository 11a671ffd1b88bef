// `gpuplane key rewrap-master` against a real data directory: the master key is replaced, every
// tenant's data keys are rewrapped under the new one, and a rewrap interrupted between two
// tenants (the state kill -9 leaves) loses nothing: the server opens secrets under either key
// meanwhile, and running the command again finishes the work.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "common/crypto.h"
#include "process/process_util.h"
#include "storage/records.h"
#include "store/engines.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

std::string trimmed(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

storage::MasterKey key_of(const std::string& hex) {
  return *storage::MasterKey::from_bytes(*hex_decode(trimmed(hex)));
}

// Every data key version of the tenant as GET /keys reports it: the master key ids.
std::vector<std::string> wrapping_keys(Server& s, const std::string& tenant) {
  auto r = s.admin_request("GET", "/v1/tenants/" + tenant + "/keys");
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : r.error().message);
  std::vector<std::string> ids;
  const Json body = r ? Json::parse(r->body) : Json::object();
  for (const auto& v : body.value("versions", Json::array())) ids.push_back(v.at("master_key_id"));
  return ids;
}

// A rotation opens every secret of the tenant to reseal it: 200 proves they all open.
void expect_secrets_open(Server& s, const std::string& tenant) {
  auto r = s.admin_request("POST", "/v1/tenants/" + tenant + "/keys/rotate", Json::object());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body).value("resealed", -1), 1) << r->body;
}

TEST(Keys, RewrapMasterReplacesTheKeyAndAnInterruptedRewrapResumes) {
  TempDir tmp;
  const fs::path data = tmp.path() / "data";
  Server s(data, kNoRateLimits);
  ASSERT_TRUE(s.start());
  for (const std::string tenant : {"acme", "bravo"}) {
    ASSERT_EQ(s.admin_request("POST", "/v1/tenants", {{"name", tenant}})->status, 201);
    auto r = s.admin_request("POST", "/v1/tenants/" + tenant + "/secrets",
                             {{"name", "token"}, {"value", tenant + "-secret"}});
    ASSERT_EQ(r->status, 201) << r->body;
  }
  const auto old_key = key_of(read_file(data / "master.key"));
  EXPECT_EQ(wrapping_keys(s, "acme"), std::vector<std::string>{old_key.id()});

  // Not while a server runs on the store.
  auto busy = run_gpuplane({"key", "rewrap-master", "--data", data.string()});
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_NE(busy.err.find("a gpuplane server is running"), std::string::npos) << busy.err;
  ASSERT_EQ(s.terminate(), 0) << s.log();

  // The state a rewrap killed between its two tenants leaves: the new key beside the old one,
  // acme's data keys under the new key, bravo's still under the old.
  const std::string next_hex = hex_encode(random_bytes(storage::kKeyBytes)) + "\n";
  {
    std::ofstream(data / "master.key.next") << next_hex;
    ::chmod((data / "master.key.next").c_str(), 0600);
    const auto next_key = key_of(next_hex);
    auto store = store::open_store((data / "gpuplane.db").string(), 1);
    ASSERT_TRUE(store) << store.error().message;
    const storage::MasterKey both[] = {old_key, next_key};
    auto r = (*store)->write([&](store::Tx& tx) -> Result<void> {
      const std::string acme = GP_TRY(storage::keyrings_not_wrapped_by(tx, next_key.id())).at(0);
      GP_TRY(storage::rewrap_tenant_keyring(tx, acme, both, next_key, system_random(), 1));
      return ok();
    });
    ASSERT_TRUE(r) << r.error().message;
  }
  const auto next_key = key_of(next_hex);
  ASSERT_TRUE(s.start());
  EXPECT_NE(s.log().find("master-key rewrap is unfinished"), std::string::npos) << s.log();
  auto wrapped = wrapping_keys(s, "acme");
  auto bravo = wrapping_keys(s, "bravo");
  EXPECT_NE(wrapped.empty() ? "" : wrapped[0], bravo.empty() ? "" : bravo[0]);
  for (const char* tenant : {"acme", "bravo"}) expect_secrets_open(s, tenant);
  ASSERT_EQ(s.terminate(), 0) << s.log();

  auto resumed = run_gpuplane({"key", "rewrap-master", "--data", data.string()});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming the rewrap into " + next_key.id()), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.out.find("replaced by " + next_key.id()), std::string::npos) << resumed.out;
  EXPECT_EQ(read_file(data / "master.key"), next_hex);
  EXPECT_FALSE(fs::exists(data / "master.key.next"));

  ASSERT_TRUE(s.start());
  EXPECT_EQ(s.log().find("rewrap is unfinished"), std::string::npos) << s.log();
  // Audited per tenant, in the transaction of its rewrap. Both tenants: the rotations made while
  // the rewrap was unfinished wrapped their new data keys under the old master, which the
  // resumed run then rewrapped too.
  auto audited = s.admin_request("GET", "/v1/audit?action=key.rewrap_master");
  ASSERT_TRUE(audited && audited->status == 200);
  const Json records = Json::parse(audited->body).at("items");
  ASSERT_EQ(records.size(), 2u) << audited->body;
  for (const auto& rec : records) {
    EXPECT_EQ(rec.at("actor"), "operator");
    EXPECT_EQ(rec.at("detail").at("from"), old_key.id());
    EXPECT_EQ(rec.at("detail").at("to"), next_key.id());
  }
  for (const char* tenant : {"acme", "bravo"}) {
    for (const auto& id : wrapping_keys(s, tenant)) EXPECT_EQ(id, next_key.id()) << tenant;
    expect_secrets_open(s, tenant);
  }
  ASSERT_EQ(s.terminate(), 0) << s.log();

  // A fresh rewrap from a finished state makes a new key again.
  auto again = run_gpuplane({"key", "rewrap-master", "--data", data.string()});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto third = key_of(read_file(data / "master.key"));
  EXPECT_NE(third.id(), next_key.id());
  ASSERT_TRUE(s.start());
  for (const auto& id : wrapping_keys(s, "bravo")) EXPECT_EQ(id, third.id());
  expect_secrets_open(s, "bravo");
  EXPECT_EQ(s.terminate(), 0) << s.log();
  auto verified = run_gpuplane({"audit", "verify", "--data", data.string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
}

}  // namespace
}  // namespace gp::proc
