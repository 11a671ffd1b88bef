// No secret the run creates reaches a log or the store in the clear. One server (debug logs) and
// one real agent go through every kind of credential and secret the control plane hands out or
// takes in, used rightly and wrongly; then the server's and the agent's logs and every file of
// the data directory are searched, byte for byte, for each of them.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "pg_test_util.h"
#include "process/process_util.h"
#include "store/backup.h"
#include "store/engines.h"

namespace gp::proc {
namespace {

// The secret part of "<id>.<secret>" tokens: the id may be logged, the secret never.
std::string secret_of(const std::string& token) {
  auto dot = token.find('.');
  return dot == std::string::npos ? token : token.substr(dot + 1);
}

// Every regular file under `dir`, except the key files the server keeps beside its store on
// purpose (master.key wraps tenant data keys; the audit signing key): keys, not secrets it
// was handed.
std::vector<std::filesystem::path> data_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    if (e.path().extension() == ".key") continue;
    out.push_back(e.path());
  }
  return out;
}

// The run, on SQLite (the data directory) or on PostgreSQL (`pg_url`, whose every table is
// copied into a SQLite file of the test's for the byte search: every column of every row).
void no_secret_in_clear(const std::optional<std::string>& pg_url) {
  TempDir dir;
  std::vector<std::string> args = {"--log-level", "debug"};
  if (pg_url) args.insert(args.end(), {"--store", *pg_url, "--leader-takeover-ms", "0"});
  Server server(dir.path() / "data", args);
  ASSERT_TRUE(server.start());
  std::map<std::string, std::string> secrets;  // what -> the secret text
  secrets["bootstrap password"] = server.admin().password;
  secrets["bootstrap API key"] = secret_of(server.admin().api_key);

  auto post = [&](const std::string& path, const Json& body, const std::string& token = "") {
    auto r = token.empty() ? server.admin_request("POST", path, body)
                           : server.request("POST", path, body, token);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : transport::ClientResponse{};
  };
  auto json = [](const transport::ClientResponse& r) {
    return Json::parse(r.body, nullptr, false);
  };

  // A tenant, a user with a password, a login session, a service account with an API key.
  auto t = post("/v1/tenants", {{"name", "vault"}});
  ASSERT_EQ(t.status, 201) << t.body;
  const std::string tenant = json(t)["id"];
  const std::string base = "/v1/tenants/" + tenant;
  const std::string password = "correct horse battery staple 4242";
  secrets["user password"] = password;
  auto u = post(base + "/users", {{"username", "carol"}, {"password", password}});
  ASSERT_EQ(u.status, 201) << u.body;
  const std::string user_id = json(u)["id"];
  ASSERT_EQ(post(base + "/role-bindings",
                 {{"role", "tenant-admin"}, {"subject_kind", "user"}, {"subject_id", user_id}})
                .status,
            201);
  auto login = post("/v1/auth/login", {{"username", "vault/carol"}, {"password", password}});
  ASSERT_EQ(login.status, 201) << login.body;
  const std::string session = json(login)["token"];
  secrets["session token"] = secret_of(session);
  auto sa = post(base + "/service-accounts", {{"name", "ci"}});
  ASSERT_EQ(sa.status, 201) << sa.body;
  auto key = post(base + "/api-keys",
                  {{"name", "ci-key"},
                   {"owner_kind", "service_account"},
                   {"owner_id", json(sa)["id"].get<std::string>()}},
                  session);
  ASSERT_EQ(key.status, 201) << key.body;
  const std::string api_key = json(key)["token"];
  secrets["service-account API key"] = secret_of(api_key);

  // A tenant secret (write-only: the API never returns it).
  const std::string value = "s3cr3t-value-that-must-stay-encrypted-0017";
  secrets["tenant secret value"] = value;
  ASSERT_EQ(post(base + "/secrets", {{"name", "db-password"}, {"value", value}}, session).status,
            201);
  auto read = server.request("GET", base + "/secrets/db-password", nullptr, session);
  ASSERT_TRUE(read && read->status == 200) << (read ? read->body : read.error().message);
  EXPECT_EQ(read->body.find(value), std::string::npos);

  // Used wrongly: a wrong password, the session and the key with a changed secret, a bogus
  // join token at enrolment.
  EXPECT_EQ(
      post("/v1/auth/login", {{"username", "vault/carol"}, {"password", password + "x"}}).status,
      401);
  secrets["wrong password"] = password + "x";
  for (std::string bad : {session, api_key}) {
    bad.back() = bad.back() == 'A' ? 'B' : 'A';
    auto r = server.request("GET", "/v1/whoami", nullptr, bad);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    secrets["tampered " + bad.substr(0, 4)] = secret_of(bad);
  }
  const std::string bogus_join = "jtk_nothing.thisIsNotARealJoinTokenSecret0123";
  secrets["bogus join token"] = secret_of(bogus_join);
  EXPECT_EQ(post("/v1/agent/enroll",
                 {{"join_token", bogus_join},
                  {"inventory",
                   {{"node", {{"name", "x"}, {"cpu_millis", 1000}}}, {"gpus", Json::array()}}}})
                .status,
            401);

  // A real agent enrols with a join token and heartbeats with its node credential.
  auto jt = post("/v1/join-tokens", {{"ttl_seconds", 600}});
  ASSERT_EQ(jt.status, 201);
  const std::string join = json(jt)["token"];
  secrets["join token"] = secret_of(join);
  Json inv = {{"node", {{"name", "node-s"}, {"cpu_millis", 64000}}},
              {"gpus",
               {{{"uuid", "GPU-s-0"},
                 {"index", 0},
                 {"model", "NVIDIA H200"},
                 {"memory_bytes", int64_t(141) << 30}}}}};
  std::ofstream(dir.str("inv.json")) << inv.dump();
  auto agent = Child::spawn(
      gpuplane_binary(),
      {"agent", "--server", server.endpoint(), "--join-token", join, "--state-dir",
       dir.str("agent-state"), "--simulate", dir.str("inv.json"), "--heartbeat-seconds", "1"},
      {.stdout_path = dir.path() / "agent.out", .stderr_path = dir.path() / "agent.err"});
  ASSERT_TRUE(agent);
  std::string credential;
  for (int i = 0; i < 150 && credential.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    credential = read_file(dir.path() / "agent-state" / "node-credential");
  }
  ASSERT_FALSE(credential.empty()) << agent->stderr_text();
  while (!credential.empty() && std::isspace(static_cast<unsigned char>(credential.back())))
    credential.pop_back();
  secrets["node credential"] = secret_of(credential);
  std::this_thread::sleep_for(2500ms);  // a few heartbeats with it
  agent->signal(SIGTERM);
  agent->wait_for(5s);
  const std::string agent_log = agent->stdout_text() + agent->stderr_text();
  ASSERT_EQ(server.terminate(), 0);  // flushes the log and checkpoints the store
  const std::string server_log = server.log();

  // The search can find things: the access log and the store do name the user.
  ASSERT_NE(server_log.find("principal=" + user_id), std::string::npos) << server_log.size();
  std::map<std::filesystem::path, std::string> files;
  if (pg_url) {
    const auto copy = dir.path() / "postgres-copy.db";
    auto from = store::open_store(*pg_url, 1);
    ASSERT_TRUE(from) << from.error().message;
    auto to = store::open_sqlite({.path = copy.string(), .read_connections = 1});
    ASSERT_TRUE(to) << to.error().message;
    auto copied = store::copy_store(**from, **to);
    ASSERT_TRUE(copied) << copied.error().message;
    ASSERT_GT(copied->rows, 0);
    to->reset();
    std::filesystem::remove(copy.string() + "-wal");  // checkpointed into the file on close
    files[copy] = read_file(copy);
  }
  for (const auto& f : data_files(server.data_dir())) files[f] = read_file(f);
  bool store_names_user = false;
  for (const auto& [_, bytes] : files) store_names_user |= bytes.find(user_id) != std::string::npos;
  ASSERT_TRUE(store_names_user);

  for (const auto& [what, secret] : secrets) {
    ASSERT_GE(secret.size(), 16u) << what;
    EXPECT_EQ(server_log.find(secret), std::string::npos) << what << " is in the server log";
    EXPECT_EQ(agent_log.find(secret), std::string::npos) << what << " is in the agent log";
    for (const auto& [path, bytes] : files)
      EXPECT_EQ(bytes.find(secret), std::string::npos) << what << " is in " << path;
  }
}

TEST(Secrets, NoSecretOfTheRunIsInALogOrInTheStore) { no_secret_in_clear(std::nullopt); }

// The same on PostgreSQL: registered again with the test cluster (Secrets.postgres).
TEST(Secrets, NoSecretOfTheRunIsInALogOrInThePostgresTables) {
  const std::string conninfo = gp::testing::test_pg_conninfo();
  if (conninfo.empty()) GTEST_SKIP() << "needs the PostgreSQL test cluster (the .postgres tests)";
  TestDatabase db(conninfo);
  no_secret_in_clear(db.url());
}

}  // namespace
}  // namespace gp::proc
