// The PostgreSQL store against a real server: CTest starts a throwaway cluster
// (tests/support/pg_cluster.sh); run alone, the server tests skip and say why.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "pg_test_util.h"

namespace gp::store {
namespace {

TEST(PostgresSql, PlaceholdersAreNumberedOutsideQuotes) {
  EXPECT_EQ(translate_placeholders("SELECT a FROM t WHERE b = ? AND c IN (?, ?)"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)");
  EXPECT_EQ(translate_placeholders("SELECT '?', 'it''s ?', \"odd?col\" FROM t WHERE x = ?"),
            "SELECT '?', 'it''s ?', \"odd?col\" FROM t WHERE x = $1");
  EXPECT_EQ(translate_placeholders("SELECT * FROM audit_log ORDER BY rowid"),
            "SELECT * FROM audit_log ORDER BY ctid");
  EXPECT_EQ(translate_placeholders("SELECT rowids, my_rowid, 'rowid' FROM t"),
            "SELECT rowids, my_rowid, 'rowid' FROM t");
}

TEST(PostgresUrl, OnlyPostgresUrlsOpenPostgres) {
  EXPECT_TRUE(is_postgres_url("postgres://u@127.0.0.1:5432/db"));
  EXPECT_TRUE(is_postgres_url("postgresql://127.0.0.1/db"));
  EXPECT_FALSE(is_postgres_url("/var/lib/gpuplane/gpuplane.db"));
  EXPECT_FALSE(is_postgres_url("postgres.db"));
  // An unreachable server is `unavailable`, with libpq's reason.
  auto r = open_store("postgres://nobody@127.0.0.1:1/none?connect_timeout=2");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("cannot connect to PostgreSQL"), std::string::npos)
      << r.error().message;
}

class Postgres : public ::testing::Test {
 protected:
  void SetUp() override {
    conninfo_ = gp::testing::test_pg_conninfo();
    if (conninfo_.empty()) GTEST_SKIP() << "no PostgreSQL cluster (run through ctest)";
    scoped_ = gp::testing::PgSchemaStore::new_schema(conninfo_, &schema_);
    auto s = open_postgres({.conninfo = scoped_ + " application_name=" + schema_});
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    if (!schema_.empty())
      (void)(*open_postgres_admin(conninfo_))("DROP SCHEMA " + schema_ + " CASCADE");
  }
  int64_t count(const std::string& where) {
    int64_t n = -1;
    EXPECT_TRUE(store_->read([&](Tx& tx) -> Result<void> {
      n = GP_TRY(tx.query_one("SELECT COUNT(*) FROM meta WHERE " + where))->integer(0);
      return ok();
    }));
    return n;
  }
  Result<void> insert(const std::string& key) {
    return store_->write([&](Tx& tx) -> Result<void> {
      GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES (?, 'v')", {key}));
      return ok();
    });
  }

  std::string conninfo_, scoped_, schema_;
  std::unique_ptr<Store> store_;
};

TEST_F(Postgres, MigrationsAreAppliedOnceAndRecorded) {
  EXPECT_EQ(store_->engine(), "postgres");
  auto again = open_postgres({.conninfo = scoped_});  // must not re-run anything
  ASSERT_TRUE(again) << again.error().message;
  int64_t applied = 0;
  ASSERT_TRUE((*again)->read([&](Tx& tx) -> Result<void> {
    applied = GP_TRY(tx.query_one("SELECT COUNT(*) FROM schema_migrations"))->integer(0);
    return ok();
  }));
  EXPECT_EQ(applied, int64_t(migrations().size()));
}

TEST_F(Postgres, FailedWriteRollsBackEverythingAndConstraintsMapToCodes) {
  auto r = store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("INSERT INTO meta (key, value) VALUES ('a', '1')"));
    return fail(Error::invalid("changed my mind"));
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "changed my mind");
  EXPECT_EQ(count("key = 'a'"), 0);

  ASSERT_TRUE(insert("k"));
  auto dup = insert("k");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict);
  EXPECT_TRUE(dup.error().message.starts_with(kUniqueViolation)) << dup.error().message;
  auto orphan = store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec(
        "INSERT INTO projects (id, tenant_id, name, display_name, created_at, updated_at, version) "
        "VALUES ('prj_x', 'ten_missing', 'p', 'p', 0, 0, 1)"));
    return ok();
  });
  ASSERT_FALSE(orphan);
  EXPECT_EQ(orphan.error().code, ErrorCode::kInvalidArgument);
  // A broken statement is a plain error (not 503), and the writer goes on.
  auto bad = store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("SELEC nothing"));
    return ok();
  });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(insert("after"));
}

TEST_F(Postgres, ConcurrentWritersEachGetTheirOwnResult) {
  constexpr int kThreads = 8, kEach = 25;
  std::atomic<int> acknowledged{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const bool bad = i % 5 == 4;
        auto r = store_->write([&](Tx& tx) -> Result<void> {
          GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES (?, 'v')",
                         {fmt::format("k{}-{}", t, i)}));
          if (bad) return fail(Error::invalid("refused"));
          return ok();
        });
        r ? ++acknowledged : ++refused;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(acknowledged.load(), kThreads * kEach * 4 / 5);
  EXPECT_EQ(refused.load(), kThreads * kEach / 5);
  EXPECT_EQ(count("key LIKE 'k%'"), acknowledged.load());
  EXPECT_EQ(count("key LIKE 'k%-4' OR key LIKE 'k%-9' OR key LIKE 'k%-14'"), 0);
}

// Tx::send pipelines a statement: its failure is reported by the next statement of the write,
// or by the write's end, and fails that write alone.
TEST_F(Postgres, ASentStatementThatFailsFailsOnlyItsOwnWrite) {
  // Every statement is used once first: a statement the connection has not prepared yet
  // settles what was sent before it, and this test is about the ones that are not settled.
  constexpr const char* kInsert = "INSERT INTO meta (key, value) VALUES (?, 'v')";
  constexpr const char* kCount = "SELECT COUNT(*) FROM meta WHERE key = ?";
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.send(kInsert, {"taken"}));
    GP_TRY(tx.query(kCount, {"taken"}));
    return ok();
  }));
  auto send_dup = [&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.send(kInsert, {"taken"}));
    return tx.send(kInsert, {"x1"});
  };
  auto at_end = store_->write(send_dup);
  ASSERT_FALSE(at_end);
  EXPECT_EQ(at_end.error().code, ErrorCode::kConflict) << at_end.error().message;
  EXPECT_EQ(count("key = 'x1'"), 0);

  auto at_query = store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.send(kInsert, {"x2"}));
    GP_TRY_VOID(tx.send(kInsert, {"taken"}));
    GP_TRY(tx.query(kCount, {"x2"}));
    ADD_FAILURE() << "the query ran after a failed statement";
    return ok();
  });
  ASSERT_FALSE(at_query);
  EXPECT_EQ(at_query.error().code, ErrorCode::kConflict) << at_query.error().message;
  EXPECT_EQ(count("key = 'x2'"), 0);

  // What a write sent, it reads back; a write that fails after sending keeps nothing.
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.send(kInsert, {"s1"}));
    auto n = GP_TRY(tx.query_one(kCount, {"s1"}));
    EXPECT_EQ(n->integer(0), 1);
    return ok();
  }));
  auto refused = store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.send(kInsert, {"y"}));
    return fail(Error::invalid("refused"));
  });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "refused");
  EXPECT_EQ(count("key = 'y'"), 0);

  // Batched with others, each write gets its own result.
  constexpr int kThreads = 8, kEach = 20;
  std::atomic<int> acknowledged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const bool bad = i % 4 == 3;
        auto r = store_->write([&](Tx& tx) -> Result<void> {
          GP_TRY_VOID(tx.send(kInsert, {fmt::format("p{}-{}", t, i)}));
          if (bad) return send_dup(tx);
          return ok();
        });
        EXPECT_EQ(bool(r), !bad) << (r ? "" : r.error().message);
        if (r) ++acknowledged;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(acknowledged.load(), kThreads * kEach * 3 / 4);
  EXPECT_EQ(count("key LIKE 'p%'"), acknowledged.load());
  EXPECT_TRUE(insert("after"));
}

// As on SQLite: the listener hears what committed writes announced, never a failed one's.
TEST_F(Postgres, TheListenerHearsWhatCommittedWritesAnnounced) {
  std::vector<std::string> heard;
  store_->set_change_listener([&](const std::vector<std::string>& keys) {
    heard.insert(heard.end(), keys.begin(), keys.end());
  });
  ASSERT_TRUE(store_->write([](Tx& tx) -> Result<void> {
    tx.announce("node:a");
    return ok();
  }));
  ASSERT_FALSE(store_->write([](Tx& tx) -> Result<void> {
    tx.announce("node:b");
    return fail(Error::invalid("no"));
  }));
  EXPECT_EQ(heard, (std::vector<std::string>{"node:a"}));
}

// generation() is known only while this process is the sole writer; then it grows with each
// commit whose statements name a counted table, and only with those.
TEST_F(Postgres, GenerationGrowsWithEachWriteThatNamesACountedTableWhileSoleWriter) {
  store_->count_changes_to({"meta"});
  EXPECT_FALSE(store_->generation()) << "another replica may write: nothing can be kept";
  store_->set_sole_writer(true);
  const auto before = store_->generation();
  ASSERT_TRUE(before);
  auto write = [&](std::string sql) {
    ASSERT_TRUE(store_->write([&](Tx& tx) -> Result<void> {
      GP_TRY(tx.exec(sql));
      return ok();
    }));
  };
  write("CREATE TABLE meta_notes (x BIGINT)");  // a longer name is another table
  write("INSERT INTO meta_notes (x) VALUES (1)");
  EXPECT_EQ(store_->generation(), before);
  write("INSERT INTO meta (key, value) VALUES ('g', '1')");
  EXPECT_EQ(store_->generation(), *before + 1);
  // Sent without waiting (PostgreSQL's pipeline) counts as well.
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Result<void> {
    return tx.send("UPDATE meta SET value = '2' WHERE key = 'g'");
  }));
  EXPECT_EQ(store_->generation(), *before + 2);
  store_->set_sole_writer(false);
  EXPECT_FALSE(store_->generation());
}

TEST_F(Postgres, ValuesRoundTripWithTypes) {
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("CREATE TABLE t (a BIGINT, b TEXT, c REAL, d TEXT)"));
    GP_TRY_VOID(tx.exec("INSERT INTO t VALUES (?, ?, ?, ?)",
                        {int64_t(1) << 60, std::string("x'y\"z"), 2.5, Null{}}));
    GP_TRY_VOID(tx.exec("INSERT INTO t VALUES (?, ?, ?, ?)",
                        {int64_t(1) << 60, std::string(""), -1.0, std::string("d")}));
    return ok();
  }));
  ASSERT_TRUE(store_->read([&](Tx& tx) -> Result<void> {
    auto row = *GP_TRY(tx.query_one("SELECT a, b, c, d FROM t ORDER BY c DESC"));
    EXPECT_EQ(row.integer(0), int64_t(1) << 60);
    EXPECT_EQ(row.text(1), "x'y\"z");
    EXPECT_DOUBLE_EQ(row.real(2), 2.5);
    EXPECT_TRUE(row.is_null(3));
    // SUM over BIGINT is NUMERIC in PostgreSQL; it reads back as an exact integer.
    auto sum = *GP_TRY(tx.query_one("SELECT SUM(a), COUNT(*), MAX(a) FROM t"));
    EXPECT_EQ(sum.integer(0), int64_t(1) << 61);
    EXPECT_EQ(sum.integer(1), 2);
    EXPECT_EQ(sum.integer(2), int64_t(1) << 60);
    return ok();
  }));
}

// query_each on PostgreSQL (its rows built first, then handed over one by one) reads as the
// Rows do and stops where its callback says.
TEST_F(Postgres, QueryEachHandsOverRowsAsQueryReadsThemAndStopsWhenTold) {
  ASSERT_TRUE(store_->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("CREATE TABLE t (a BIGINT, b TEXT, d TEXT)"));
    for (int64_t i = 1; i <= 3; ++i)
      GP_TRY_VOID(tx.exec("INSERT INTO t VALUES (?, ?, ?)",
                          {i << 40, std::string("b") + char('0' + i),
                           i == 2 ? Value(Null{}) : Value(std::string("d"))}));
    return ok();
  }));
  ASSERT_TRUE(store_->read([&](Tx& tx) -> Result<void> {
    std::vector<std::string> seen;
    GP_TRY_VOID(tx.query_each(
        "SELECT a, b, d FROM t ORDER BY a", {}, [&](const RowView& row) -> Result<bool> {
          seen.push_back(fmt::format("{}:{}:{}", row.integer(0) >> 40, row.text(1),
                                     row.is_null(2) ? "null" : row.text(2)));
          return seen.size() < 2;
        }));
    EXPECT_EQ(seen, (std::vector<std::string>{"1:b1:d", "2:b2:null"}));
    return ok();
  }));
}

// A connection the server drops (restart, failover, an administrator) answers 503 once, and
// the store reconnects by itself for the next request.
TEST_F(Postgres, LostConnectionsAreUnavailableThenRecover) {
  ASSERT_TRUE(insert("before"));
  auto admin = open_postgres_admin(conninfo_);
  ASSERT_TRUE(admin) << admin.error().message;
  ASSERT_TRUE(
      (*admin)("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
               "application_name = '" +
               schema_ + "'"));
  // A read begins again on a new connection: nothing had been done in it.
  EXPECT_EQ(count("key = 'before'"), 1);
  auto during = insert("during");
  if (!during) {
    EXPECT_EQ(during.error().code, ErrorCode::kUnavailable) << during.error().message;
  }
  ASSERT_TRUE(insert("after"));
  EXPECT_EQ(count("key = 'before' OR key = 'after'"), 2);
  EXPECT_EQ(count("key = 'during'"), during ? 1 : 0);
}

}  // namespace
}  // namespace gp::store
