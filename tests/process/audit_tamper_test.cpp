// Offline verification against a real trail: a server writes ~30 records and stops cleanly
// (sealing a final checkpoint); then each case tampers with a copy of its database through the
// sqlite3 tool, as an attacker with file access would, and `gpuplane audit verify` must fail
// and name the first record that can no longer be trusted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "audit/chain.h"
#include "process/process_util.h"

namespace gp::proc {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRecordCols =
    "seq, time_us, actor, tenant_id, action, resource, outcome, request_id, source, detail, "
    "prev_hash, hash";

std::string sql_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

// Runs one sqlite3 script against `db`; returns stdout.
std::string sqlite(const fs::path& db, const std::string& script, bool json = false) {
  static const std::string binary = find_program("sqlite3");
  if (binary.empty()) {
    ADD_FAILURE() << "the sqlite3 command-line tool is not on PATH";
    return "";
  }
  std::vector<std::string> args;
  if (json) args.push_back("-json");
  args.push_back(db.string());
  args.push_back(script);
  auto r = run(binary, args);
  EXPECT_EQ(r.exit_code, 0) << "sqlite3 " << script << "\n" << r.err;
  return r.out;
}

// Reads audit records with seq >= `from` as stored, through the sqlite3 tool.
std::vector<audit::Record> read_records(const fs::path& db, int64_t from) {
  std::string out = sqlite(
      db, fmt::format("SELECT {} FROM audit_log WHERE seq >= {} ORDER BY seq", kRecordCols, from),
      /*json=*/true);
  Json rows = Json::parse(out.empty() ? "[]" : out, nullptr, false);
  std::vector<audit::Record> records;
  if (!rows.is_array()) {
    ADD_FAILURE() << "sqlite3 -json gave: " << out;
    return records;
  }
  for (const auto& j : rows) {
    records.push_back(audit::Record{
        .seq = j["seq"].get<int64_t>(),
        .time_us = j["time_us"].get<int64_t>(),
        .actor = j["actor"].get<std::string>(),
        .tenant_id = j["tenant_id"].get<std::string>(),
        .action = j["action"].get<std::string>(),
        .resource = j["resource"].get<std::string>(),
        .outcome = j["outcome"].get<std::string>(),
        .request_id = j["request_id"].get<std::string>(),
        .source = j["source"].get<std::string>(),
        .detail = j["detail"].get<std::string>(),
        .prev_hash = j["prev_hash"].get<std::string>(),
        .hash = j["hash"].get<std::string>(),
    });
  }
  return records;
}

// The forger's helper: rewrites record `seq` to claim another actor and gives it a correct
// hash with audit::compute_hash. With `rechain`, every later record is relinked and rehashed
// too, so the chain holds end to end and only a signed checkpoint can tell.
void forge(const fs::path& db, int64_t seq, bool rechain) {
  auto records = read_records(db, seq);
  ASSERT_FALSE(records.empty());
  ASSERT_EQ(records.front().seq, seq);
  if (!rechain) records.resize(1);
  std::string script = "BEGIN;";
  std::string prev = records.front().prev_hash;
  for (size_t i = 0; i < records.size(); ++i) {
    audit::Record& r = records[i];
    if (i == 0) r.actor = "mallory";
    std::string old_hash = r.hash;
    audit::seal(r, prev);
    EXPECT_NE(r.hash, old_hash);
    EXPECT_EQ(r.hash, audit::compute_hash(r));
    script += fmt::format("UPDATE audit_log SET actor={}, prev_hash={}, hash={} WHERE seq={};",
                          sql_quote(r.actor), sql_quote(r.prev_hash), sql_quote(r.hash), r.seq);
    prev = r.hash;
  }
  sqlite(db, script + "COMMIT;");
}

// What the trail looks like before tampering, for cases that aim relative to it.
struct Trail {
  int64_t last_seq = 0;
  std::vector<int64_t> checkpoints;  // seqs, ascending
  // The seq after the last checkpoint below `seq` (1 if none): where trust ends when
  // everything from `seq` on was rewritten.
  int64_t after_checkpoint_below(int64_t seq) const {
    int64_t from = 1;
    for (int64_t c : checkpoints)
      if (c < seq) from = c + 1;
    return from;
  }
};

struct Tampering {
  std::string name;
  std::function<void(const fs::path& db, const Trail&)> apply;
  std::function<int64_t(const Trail&)> first_bad_seq;
  std::string reason;  // a fragment of the reason verify gives
};

std::vector<Tampering> tamperings() {
  auto sql = [](std::string script) {
    return [script](const fs::path& db, const Trail&) { sqlite(db, script); };
  };
  auto at = [](int64_t seq) { return [seq](const Trail&) { return seq; }; };
  return {
      {"edit a field", sql("UPDATE audit_log SET actor='mallory' WHERE seq=7"), at(7),
       "record 7: hash mismatch"},
      {"delete a row", sql("DELETE FROM audit_log WHERE seq=12"), at(12), "record 12 missing"},
      {"store rows 5 and 6 in the opposite order",
       sql("BEGIN; CREATE TEMP TABLE moved AS SELECT * FROM audit_log WHERE seq IN (5, 6);"
           "DELETE FROM audit_log WHERE seq IN (5, 6);"
           "INSERT INTO audit_log SELECT * FROM moved WHERE seq = 6;"
           "INSERT INTO audit_log SELECT * FROM moved WHERE seq = 5; COMMIT;"),
       at(5), "record 5: out of order"},
      {"swap the seqs of rows 5 and 6",
       sql("BEGIN; UPDATE audit_log SET seq=-6 WHERE seq=6; UPDATE audit_log SET seq=6 WHERE "
           "seq=5; UPDATE audit_log SET seq=5 WHERE seq=-6; COMMIT;"),
       at(5), "record 5: seq altered to 6"},
      {"forge a row with a recomputed hash",
       [](const fs::path& db, const Trail&) { forge(db, 9, /*rechain=*/false); }, at(9),
       "record 9 forged"},
      {"forge a row and rewrite the chain after it",
       [](const fs::path& db, const Trail&) { forge(db, 25, /*rechain=*/true); },
       [](const Trail& t) { return t.after_checkpoint_below(25); }, "signed hash does not match"},
      {"truncate the tail behind the shutdown checkpoint",
       [](const fs::path& db, const Trail& t) {
         sqlite(db, fmt::format("DELETE FROM audit_log WHERE seq > {}", t.last_seq - 3));
       },
       [](const Trail& t) { return t.last_seq - 2; }, "truncated"},
      {"alter a signed checkpoint",
       sql("UPDATE audit_checkpoints SET time_us = time_us + 1 WHERE seq = 20"), at(20),
       "checkpoint at seq 20: bad signature"},
  };
}

class AuditTamper : public ::testing::Test {
 protected:
  // Built per test (CTest runs each in its own process anyway). Not in SetUpTestSuite: a
  // failure there makes gtest skip the tests, which CTest would count as "not run", not failed.
  void SetUp() override {
    Server server(data_, {"--checkpoint-every", "10"});
    ASSERT_TRUE(server.start());
    build_trail(server);
    ASSERT_FALSE(HasFailure()) << "server log:\n" << server.log();
    ASSERT_EQ(server.terminate(), 0) << "unclean shutdown:\n" << server.log();
    fs::path db = data_ / "gpuplane.db";
    trail_.last_seq = std::stoll("0" + sqlite(db, "SELECT MAX(seq) FROM audit_log"));
    std::istringstream cps(sqlite(db, "SELECT seq FROM audit_checkpoints ORDER BY seq"));
    for (int64_t s; cps >> s;) trail_.checkpoints.push_back(s);
    ASSERT_GE(trail_.last_seq, 30);
  }

  // About thirty records: tenants, projects, users, a conflict, denials, a suspension.
  static void build_trail(const Server& s) {
    auto expect = [&](std::string_view method, const std::string& target, const Json& body,
                      int status, const std::string& token) {
      auto r = s.request(method, target, body, token);
      if (!r)
        ADD_FAILURE() << method << " " << target << ": " << r.error().message;
      else
        EXPECT_EQ(r->status, status) << method << " " << target << ": " << r->body;
    };
    const std::string admin = s.admin().api_key;
    for (std::string t : {"alpha", "bravo", "charlie", "delta"}) {
      expect("POST", "/v1/tenants", {{"name", t}}, 201, admin);
      for (std::string p : {"train", "serve", "eval"})
        expect("POST", "/v1/tenants/" + t + "/projects", {{"name", p}}, 201, admin);
    }
    for (std::string u : {"ann", "ben", "cat"})
      expect("POST", "/v1/tenants/alpha/users", {{"username", u}, {"password", "correct-horse-1"}},
             201, admin);
    expect("POST", "/v1/tenants/bravo/service-accounts", {{"name", "ci"}}, 201, admin);
    expect("POST", "/v1/tenants/alpha/projects", {{"name", "train"}}, 409, admin);
    for (int i = 0; i < 3; ++i) {
      expect("GET", "/v1/tenants", nullptr, 401, "key_not_a_real_key");
      expect("POST", "/v1/tenants", {{"name", "evil"}}, 401, "");
    }
    expect("PATCH", "/v1/tenants/delta", {{"state", "suspended"}}, 200, admin);
    expect("POST", "/v1/tenants/delta/projects", {{"name", "late"}}, 403, admin);
  }

  // Copies the pristine data directory for one case to tamper with.
  fs::path copy_of_data(const std::string& name) {
    fs::path copy = tmp_.path() / name;
    fs::copy(data_, copy, fs::copy_options::recursive);
    return copy;
  }

  TempDir tmp_;
  fs::path data_ = tmp_.path() / "data";
  Trail trail_;
};

TEST_F(AuditTamper, TheUntouchedTrailVerifies) {
  auto text = run_gpuplane({"audit", "verify", "--data", data_.string()});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find(fmt::format("audit trail OK: {} records", trail_.last_seq)),
            std::string::npos)
      << text.out;

  auto json = run_gpuplane({"--output", "json", "audit", "verify", "--data", data_.string()});
  ASSERT_EQ(json.exit_code, 0) << json.out << json.err;
  Json rep = Json::parse(json.out, nullptr, false);
  ASSERT_TRUE(rep.is_object()) << json.out;
  EXPECT_EQ(rep["ok"], true);
  EXPECT_EQ(rep["records_checked"], trail_.last_seq);
  EXPECT_EQ(rep["last_seq"], trail_.last_seq);
  EXPECT_TRUE(rep["first_bad_seq"].is_null());
  // Checkpoints every 10 records, and one sealed at shutdown over the final head.
  EXPECT_EQ(rep["checkpoints_checked"], trail_.checkpoints.size());
  ASSERT_FALSE(trail_.checkpoints.empty());
  EXPECT_EQ(trail_.checkpoints.back(), trail_.last_seq);
  EXPECT_EQ(trail_.after_checkpoint_below(25), 21);

  // The denials are in the trail, not only the successes.
  fs::path db = data_ / "gpuplane.db";
  EXPECT_EQ(sqlite(db,
                   "SELECT COUNT(*) FROM audit_log WHERE outcome='denied' AND "
                   "actor='anonymous'"),
            "6\n");
}

TEST_F(AuditTamper, VerifyFailsAndNamesTheFirstBrokenRecord) {
  int index = 0;
  for (const auto& t : tamperings()) {
    SCOPED_TRACE(t.name);
    fs::path copy = copy_of_data("case-" + std::to_string(index++));
    t.apply(copy / "gpuplane.db", trail_);
    int64_t want = t.first_bad_seq(trail_);

    auto text = run_gpuplane({"audit", "verify", "--data", copy.string()});
    EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
    EXPECT_NE(text.out.find(fmt::format("audit trail BROKEN at record {}: ", want)),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find(t.reason), std::string::npos) << text.out;

    auto json = run_gpuplane({"--output", "json", "audit", "verify", "--data", copy.string()});
    EXPECT_EQ(json.exit_code, 1) << json.out << json.err;
    Json rep = Json::parse(json.out, nullptr, false);
    ASSERT_TRUE(rep.is_object()) << json.out;
    EXPECT_EQ(rep["ok"], false);
    EXPECT_EQ(rep["first_bad_seq"], want) << rep.dump();
    EXPECT_EQ(rep["last_seq"], want - 1) << rep.dump();
    EXPECT_NE(rep.value("reason", "").find(t.reason), std::string::npos) << rep.dump();
  }
}

}  // namespace
}  // namespace gp::proc
