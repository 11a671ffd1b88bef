#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "store/group_commit.h"
#include "store/record_row.h"
#include "test_util.h"

namespace gp {
namespace {
enum class Shade : uint8_t { kLight, kDark };
constexpr std::array<std::string_view, 2> kShades = {"light", "dark"};
struct Widget {
  std::string id;
  std::optional<std::string> note;
  int64_t size = 0;
  std::optional<int64_t> ended_at;
  bool on = false;
  Shade shade = Shade::kLight;
  StringMap labels;
  double ratio = 0;
  StringList tags;
  int32_t rank = 0;
  Json spec;
};
}  // namespace
template <>
struct Fields<Widget> {
  static constexpr auto list = std::tuple{
      Field{"id", &Widget::id},
      Field{"note", &Widget::note, "remark"},
      Field{"size", &Widget::size},
      Field{"ended_at", &Widget::ended_at, {}, Form::kTime},
      Field{"on", &Widget::on, "is_on"},
      // Shown, never stored: no column.
      Derived<Widget>{"big",
                      [](const Widget& w) -> std::string { return w.size > 9 ? "yes" : "no"; }},
      Field{"shade", &Widget::shade, {}, Form::kEnum, kShades},
      Field{"labels", &Widget::labels},
      Field{"ratio", &Widget::ratio},
      Field{"tags", &Widget::tags},
      Field{"rank", &Widget::rank},
      Field{"spec", &Widget::spec, {}, Form::kNullIfEmpty},
  };
};
namespace {
// A value with a text form of its own (common/record.h, TextForm): a port range "first-last".
struct Ports {
  int first = 0, last = 0;
};
struct Gate {
  std::string id;
  Ports ports;
};
}  // namespace
template <>
struct TextForm<Ports> {
  static std::string text(const Ports& p) { return fmt::format("{}-{}", p.first, p.last); }
  static Result<Ports> parse(std::string_view text) {
    Ports p;
    const auto dash = text.find('-');
    if (dash == std::string_view::npos) return fail(Error::invalid("no dash"));
    p.first = std::stoi(std::string(text.substr(0, dash)));
    p.last = std::stoi(std::string(text.substr(dash + 1)));
    return p;
  }
};
template <>
struct Fields<Gate> {
  static constexpr auto list = std::tuple{
      Field{"id", &Gate::id},
      Field{"ports", &Gate::ports, "port_range"},
  };
};
namespace {
// A row with an integer list, replaced in place by an upsert.
struct Dial {
  std::string id;
  std::vector<int32_t> stops;
  int64_t version = 0;
};
}  // namespace
template <>
struct Fields<Dial> {
  static constexpr auto list = std::tuple{
      Field{"id", &Dial::id},
      Field{"stops", &Dial::stops, "stop_list"},
      Field{"version", &Dial::version},
  };
};
}  // namespace gp

namespace gp::store {
namespace {

using gp::testing::TempDir;

// A record described once (common/record.h) is written and read back through its field table.
TEST(Record, AFieldTableGivesTheColumnsTheParametersAndTheRowReader) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  EXPECT_EQ(columns_of<Widget>(),
            "id, remark, size, ended_at, is_on, shade, labels, ratio, tags, rank, spec");
  EXPECT_EQ(placeholders_of<Widget>(), "?,?,?,?,?,?,?,?,?,?,?");
  Widget full{"w1", "hello", 42, 7, true, Shade::kDark, {{"a", "b"}}, 0.5, {"x", "y"}, -3};
  full.spec = {{"gpus", Json::array({1, 2})}};
  const Widget empty{"w2", std::nullopt, 0, std::nullopt, false};
  std::vector<Widget> back;
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY(
        tx.exec("CREATE TABLE widgets (id TEXT PRIMARY KEY, remark TEXT, size INTEGER, "
                "ended_at INTEGER, is_on INTEGER, shade TEXT, labels TEXT, ratio REAL, tags TEXT, "
                "rank INTEGER, spec TEXT)"));
    for (const auto& w : {full, empty})
      GP_TRY(tx.exec(fmt::format("INSERT INTO widgets ({}) VALUES ({})", columns_of<Widget>(),
                                 placeholders_of<Widget>()),
                     params_of(w)));
    for (const auto& row :
         GP_TRY(tx.query(fmt::format("SELECT {} FROM widgets ORDER BY id", columns_of<Widget>()))))
      back.push_back(GP_TRY(read_row<Widget>(row)));
    return ok();
  }));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].id, "w1");
  EXPECT_EQ(back[0].note, "hello");
  EXPECT_EQ(back[0].size, 42);
  EXPECT_EQ(back[0].ended_at, 7);
  EXPECT_TRUE(back[0].on);
  EXPECT_EQ(back[0].shade, Shade::kDark);
  EXPECT_EQ(back[0].labels, (StringMap{{"a", "b"}}));
  EXPECT_EQ(back[0].ratio, 0.5);
  EXPECT_EQ(back[0].tags, (StringList{"x", "y"}));
  EXPECT_EQ(back[0].rank, -3);
  EXPECT_EQ(back[0].spec, (Json{{"gpus", Json::array({1, 2})}}));
  EXPECT_TRUE(back[1].spec.is_null());
  EXPECT_TRUE(back[1].tags.empty());
  EXPECT_EQ(back[1].shade, Shade::kLight);
  EXPECT_TRUE(back[1].labels.empty());
  EXPECT_EQ(back[1].note, std::nullopt);
  EXPECT_EQ(back[1].ended_at, std::nullopt);
  EXPECT_FALSE(back[1].on);
}

// An integer list is stored as its JSON text; an upsert replaces every column but its keys, and
// a list that is not one of integers fails the read.
TEST(Record, AnIntegerListRoundTripsAndAnUpsertReplacesAllButTheKeys) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  EXPECT_EQ(updates_of<Dial>({"id"}), "stop_list = excluded.stop_list, version = excluded.version");
  const std::string upsert =
      fmt::format("INSERT INTO dials ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}",
                  columns_of<Dial>(), placeholders_of<Dial>(), updates_of<Dial>({"id"}));
  std::vector<Dial> back;
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("CREATE TABLE dials (id TEXT PRIMARY KEY, stop_list TEXT, version INTEGER)"));
    GP_TRY(tx.exec(upsert, params_of(Dial{"d1", {5000, 8000}, 1})));
    GP_TRY(tx.exec(upsert, params_of(Dial{"d1", {10000}, 2})));
    for (const auto& row :
         GP_TRY(tx.query(fmt::format("SELECT {} FROM dials", columns_of<Dial>()))))
      back.push_back(GP_TRY(read_row<Dial>(row)));
    return ok();
  }));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].stops, (std::vector<int32_t>{10000}));
  EXPECT_EQ(back[0].version, 2);
  for (std::string_view text : {"[1, \"2\"]", "{}", "not json"}) {
    auto r = s->write([&](Tx& tx) -> Result<void> {
      GP_TRY(tx.exec("UPDATE dials SET stop_list = ?", {std::string(text)}));
      auto row = GP_TRY(tx.query_one(fmt::format("SELECT {} FROM dials", columns_of<Dial>())));
      GP_TRY(read_row<Dial>(*row));
      return ok();
    });
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().message,
              "column stop_list holds text that is not a JSON array of integers");
  }
}

// A row the field table cannot read fails the read, naming the column: an enum name the field
// does not list (never read as the enum's first value), or JSON text that is not JSON.
TEST(Record, AnUnknownEnumNameOrTextThatIsNotJsonFailsTheRead) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY(tx.exec(
        "CREATE TABLE widgets (id TEXT, remark TEXT, size INTEGER, ended_at INTEGER, is_on "
        "INTEGER, shade TEXT, labels TEXT, ratio REAL, tags TEXT, rank INTEGER, spec TEXT)"));
    return ok();
  }));
  // One row, read back in the transaction that wrote it (a failed read rolls it back).
  auto read = [&](std::string_view shade, std::string_view spec) {
    return s->write([&](Tx& tx) -> Result<void> {
      GP_TRY(tx.exec("INSERT INTO widgets (id, shade, spec) VALUES ('w1', ?, ?)",
                     {std::string(shade), std::string(spec)}));
      auto row = GP_TRY(tx.query_one(fmt::format("SELECT {} FROM widgets", columns_of<Widget>())));
      GP_TRY(read_row<Widget>(*row));
      return ok();
    });
  };
  EXPECT_TRUE(read("dark", "{}"));
  ASSERT_TRUE(s->write([](Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("DELETE FROM widgets"));
    return ok();
  }));
  auto r = read("purple", "{}");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_EQ(r.error().message, "column shade holds 'purple', which is not one of light, dark");
  r = read("dark", "{not json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_EQ(r.error().message, "column spec holds text that is not JSON");
}

// A member with a text form is stored as its text and read back through it; text that does not
// read fails the read, naming the column.
TEST(Record, AMemberWithATextFormIsStoredAsItsText) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  EXPECT_EQ(columns_of<Gate>(), "id, port_range");
  std::string stored;
  Gate back;
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("CREATE TABLE gates (id TEXT PRIMARY KEY, port_range TEXT)"));
    GP_TRY(tx.exec(fmt::format("INSERT INTO gates ({}) VALUES ({})", columns_of<Gate>(),
                               placeholders_of<Gate>()),
                   params_of(Gate{"g1", {80, 443}})));
    stored = GP_TRY(tx.query_one("SELECT port_range FROM gates"))->text(0);
    auto row = GP_TRY(tx.query_one(fmt::format("SELECT {} FROM gates", columns_of<Gate>())));
    back = GP_TRY(read_row<Gate>(*row));
    return ok();
  }));
  EXPECT_EQ(stored, "80-443");
  EXPECT_EQ(back.ports.first, 80);
  EXPECT_EQ(back.ports.last, 443);
  auto r = s->write([&](Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("UPDATE gates SET port_range = '80'"));
    auto row = GP_TRY(tx.query_one(fmt::format("SELECT {} FROM gates", columns_of<Gate>())));
    GP_TRY(read_row<Gate>(*row));
    return ok();
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_EQ(r.error().message, "column port_range holds '80', which does not read: no dash");
}

TEST(SqliteStore, MigrationsAreAppliedOnceAndRecorded) {
  TempDir dir;
  { auto s = gp::testing::open_store(dir); }
  auto s = gp::testing::open_store(dir);  // reopening must not re-run migrations
  int64_t applied = 0;
  ASSERT_TRUE(s->read([&](Tx& tx) -> Result<void> {
    auto row = GP_TRY(tx.query_one("SELECT COUNT(*) FROM schema_migrations"));
    applied = row->integer(0);
    return ok();
  }));
  EXPECT_EQ(applied, int64_t(migrations().size()));
}

// generation() counts the commits that changed a row of a counted table, and only those.
TEST(SqliteStore, GenerationGrowsWithEachCommitThatChangesACountedTable) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  s->count_changes_to({"meta"});
  const auto before = s->generation();
  ASSERT_TRUE(before);
  gp::testing::must_write(*s, [&](Tx& tx) -> Result<int> {
    GP_TRY(tx.exec("CREATE TABLE other (x INTEGER)"));
    GP_TRY(tx.exec("INSERT INTO other (x) VALUES (1)"));
    return 0;
  });
  EXPECT_EQ(s->generation(), before);
  gp::testing::must_write(*s, [&](Tx& tx) -> Result<int> {
    GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES ('g', '1')"));
    GP_TRY(tx.exec("UPDATE meta SET value = '2' WHERE key = 'g'"));
    return 0;
  });
  EXPECT_EQ(s->generation(), *before + 1);
  gp::testing::must_write(*s, [&](Tx& tx) -> Result<int> {
    GP_TRY(tx.exec("DELETE FROM meta WHERE key = 'g'"));
    return 0;
  });
  EXPECT_EQ(s->generation(), *before + 2);
}

TEST(SqliteStore, FailedWriteRollsBackEverything) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  auto r = s->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("INSERT INTO meta (key, value) VALUES ('a', '1')"));
    return fail(Error::invalid("changed my mind"));
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "changed my mind");
  int64_t n = -1;
  ASSERT_TRUE(s->read([&](Tx& tx) -> Result<void> {
    n = GP_TRY(tx.query_one("SELECT COUNT(*) FROM meta"))->integer(0);
    return ok();
  }));
  EXPECT_EQ(n, 0);
  // Its transaction is over: the next write commits on its own.
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("INSERT INTO meta (key, value) VALUES ('b', '2')"));
    return ok();
  }));
  ASSERT_TRUE(s->read([&](Tx& tx) -> Result<void> {
    n = GP_TRY(tx.query_one("SELECT COUNT(*) FROM meta WHERE key = 'b'"))->integer(0);
    return ok();
  }));
  EXPECT_EQ(n, 1);
}

int64_t count_meta(Store& s) {
  int64_t n = -1;
  EXPECT_TRUE(s.read([&](Tx& tx) -> Result<void> {
    n = GP_TRY(tx.query_one("SELECT COUNT(*) FROM meta"))->integer(0);
    return ok();
  }));
  return n;
}

// Every reader connection busy at once, so that each is left holding a snapshot.
void read_on_every_connection(Store& s, int connections) {
  std::atomic<int> inside{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < connections; ++i)
    readers.emplace_back([&] {
      EXPECT_TRUE(s.read([&](Tx& tx) -> Result<void> {
        GP_TRY(tx.query_one("SELECT COUNT(*) FROM meta"));
        ++inside;
        while (inside.load() < connections) std::this_thread::yield();
        return ok();
      }));
    });
  for (auto& t : readers) t.join();
}

// A reader keeps its snapshot between reads (docs/benchmarks.md), but never past a commit: a
// read begun after a write returned sees it, on every reader connection.
TEST(SqliteStore, AReadAfterACommitSeesItOnEveryReaderConnection) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  for (int i = 1; i <= 3; ++i) {
    read_on_every_connection(*s, 4);
    gp::testing::must_write(*s, [&](Tx& tx) -> Result<int> {
      GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES (?, 'v')", {fmt::format("k{}", i)}));
      return 0;
    });
    std::atomic<int> inside{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r)
      readers.emplace_back([&] {
        EXPECT_TRUE(s->read([&](Tx& tx) -> Result<void> {
          EXPECT_EQ(GP_TRY(tx.query_one("SELECT COUNT(*) FROM meta"))->integer(0), i);
          ++inside;
          while (inside.load() < 4) std::this_thread::yield();
          return ok();
        }));
      });
    for (auto& t : readers) t.join();
  }
  // A failed read ends its transaction; the next read still sees new commits.
  EXPECT_FALSE(s->read([](Tx&) -> Result<void> { return fail(Error::invalid("no")); }));
  gp::testing::must_write(*s, [&](Tx& tx) -> Result<int> {
    GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES ('k4', 'v')"));
    return 0;
  });
  EXPECT_EQ(count_meta(*s), 4);
}

// A follower (docs/ha.md) reads a store that another process writes, whose commits it cannot
// count: told it is not the sole writer, its readers keep no snapshot and see each commit.
TEST(SqliteStore, AStoreThatIsNotTheSoleWriterSeesEveryCommitOfAnother) {
  TempDir dir;
  auto leader = gp::testing::open_store(dir);
  auto follower = gp::testing::open_store(dir);
  read_on_every_connection(*follower, 4);  // snapshots kept before it learns its role
  follower->set_sole_writer(false);
  for (int i = 1; i <= 3; ++i) {
    gp::testing::must_write(*leader, [&](Tx& tx) -> Result<int> {
      GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES (?, 'v')", {fmt::format("k{}", i)}));
      return 0;
    });
    EXPECT_EQ(count_meta(*follower), i);
    read_on_every_connection(*follower, 4);
  }
  // Its own reads are still served: a role can change back.
  follower->set_sole_writer(true);
  EXPECT_EQ(count_meta(*follower), 3);
}

// The WAL is copied back into the database while the store stays open (by the store's own
// checkpointer, not inside a writer's COMMIT), and starts over although the writes never pause:
// the database file grows to hold what was written, and the WAL stays far smaller than it.
TEST(SqliteStore, TheWriteAheadLogIsCheckpointedAndStartsOverUnderSteadyWrites) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  const auto size = [&](const char* name) { return std::filesystem::file_size(dir.file(name)); };
  const auto before = size("gpuplane.db");
  const std::string blob(64 * 1024, 'x');  // 16 pages a row, 4,096 pages (16 MiB) in all
  // Every reader connection left idle with a snapshot, which holds its place in the WAL.
  read_on_every_connection(*s, 4);
  for (int i = 0; i < 256; ++i) {
    gp::testing::must_write(*s, [&](Tx& tx) -> Result<int> {
      GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES (?, ?)", {fmt::format("k{}", i), blob}));
      return 0;
    });
    EXPECT_EQ(count_meta(*s), i + 1);  // and a reader busy between the writes
  }
  constexpr uintmax_t kMiB = 1024 * 1024;
  EXPECT_LT(size("gpuplane.db-wal"), 10 * kMiB) << "the WAL never started over";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (size("gpuplane.db") < before + 8 * kMiB && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(size("gpuplane.db"), before + 8 * kMiB) << "nothing was checkpointed";
}

// Group commit with the flush outside the writer lock: every writer gets its own result, a
// failing write rolls back alone, and everything acknowledged is there after reopening.
TEST(SqliteStore, ConcurrentWritersEachGetTheirOwnResult) {
  TempDir dir;
  constexpr int kThreads = 8, kEach = 40;
  std::atomic<int> acknowledged{0}, refused{0};
  {
    auto s = gp::testing::open_store(dir);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          const bool bad = i % 5 == 4;
          auto r = s->write([&](Tx& tx) -> Result<void> {
            GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES (?, 'v')",
                           {fmt::format("k{}-{}", t, i)}));
            if (bad) return fail(Error::invalid("refused"));
            return ok();
          });
          if (r) {
            ++acknowledged;
          } else {
            EXPECT_EQ(r.error().message, "refused");
            ++refused;
          }
        }
      });
    for (auto& th : threads) th.join();
  }
  EXPECT_EQ(acknowledged.load(), kThreads * kEach * 4 / 5);
  EXPECT_EQ(refused.load(), kThreads * kEach / 5);
  auto s = gp::testing::open_store(dir);
  int n = 0;
  ASSERT_TRUE(s->read([&](Tx& tx) -> Result<void> {
    for (const auto& row : GP_TRY(tx.query("SELECT key FROM meta WHERE key LIKE 'k%'"))) {
      ++n;
      const std::string key = row.text(0);
      EXPECT_NE(std::stoi(key.substr(key.find('-') + 1)) % 5, 4) << key << " was refused";
    }
    return ok();
  }));
  EXPECT_EQ(n, acknowledged.load());
}

// Group commit: one batch runs at a time, each writer is in exactly one batch and hears that
// batch's commit, and writers queued during a batch share the next one (were none of them to
// lead it, they would wait forever and the test would time out).
TEST(GroupCommit, EachWriterIsInOneBatchAndWritersQueuedDuringABatchShareTheNext) {
  store::GroupCommit group;
  constexpr int kThreads = 32, kEach = 20;
  std::atomic<int> running{0}, batches{0}, written{0};
  std::atomic<bool> overlapped{false};
  std::atomic<uint64_t> seq{0};
  const store::GroupCommit::BatchRunner run = [&](const std::vector<store::QueuedWrite*>& batch) {
    if (running.fetch_add(1) != 0) overlapped = true;
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    for (store::QueuedWrite* q : batch) q->result = ok();
    written += static_cast<int>(batch.size());
    ++batches;
    running.fetch_sub(1);
    return ++seq;
  };
  std::vector<std::thread> threads;
  std::atomic<int> stale{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      const store::WriteFn fn = [](store::Tx&) { return ok(); };
      for (int i = 0; i < kEach; ++i) {
        const uint64_t before = seq.load();
        store::QueuedWrite me = group.submit(fn, run);
        EXPECT_TRUE(me.result);
        if (me.commit_seq <= before) ++stale;  // its batch began after it queued
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_FALSE(overlapped) << "two batches ran at once";
  EXPECT_EQ(written.load(), kThreads * kEach);
  EXPECT_EQ(stale.load(), 0) << "a writer heard the commit of a batch it was not in";
  EXPECT_LT(batches.load(), kThreads * kEach / 2) << "writers did not share batches";
}

// Deferred durability: inside a scope, a write is committed and visible at once, and the scope
// holds the ticket to flush before acknowledging; nested scopes pass their tickets outwards.
TEST(SqliteStore, DeferFlushHandsOutTheTicketToWaitFor) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  auto insert = [&](const std::string& key) {
    return s->write([&](Tx& tx) -> Result<void> {
      GP_TRY(tx.exec("INSERT INTO meta (key, value) VALUES (?, 'v')", {key}));
      return ok();
    });
  };
  auto count = [&] {
    int64_t n = -1;
    EXPECT_TRUE(s->read([&](Tx& tx) -> Result<void> {
      n = GP_TRY(tx.query_one("SELECT COUNT(*) FROM meta WHERE key LIKE 'd%'"))->integer(0);
      return ok();
    }));
    return n;
  };
  uint64_t first = 0, second = 0;
  {
    store::DeferFlush outer;
    EXPECT_EQ(outer.ticket(), 0u) << "nothing written yet";
    ASSERT_TRUE(insert("d1"));
    first = outer.ticket();
    EXPECT_GT(first, 0u);
    EXPECT_EQ(count(), 1) << "committed and visible before the flush";
    {
      store::DeferFlush inner;
      ASSERT_TRUE(insert("d2"));
      second = inner.ticket();
      EXPECT_GT(second, first);
    }
    EXPECT_EQ(outer.ticket(), second) << "the inner scope's writes are the outer's to flush";
    // A failed write commits nothing and adds no ticket.
    ASSERT_FALSE(s->write([](Tx&) -> Result<void> { return fail(Error::invalid("no")); }));
    EXPECT_EQ(outer.ticket(), second);
    EXPECT_TRUE(s->flush(outer.ticket()));
  }
  EXPECT_EQ(store::DeferFlush::current(), nullptr);
  ASSERT_TRUE(insert("d3"));  // no scope: flushed before write() returns
  EXPECT_EQ(count(), 3);
}

// Announcements (Tx::announce) reach the change listener once their write has committed: a
// write that fails, alone or among others in one group commit, announces nothing.
TEST(SqliteStore, TheListenerHearsWhatCommittedWritesAnnouncedAndNothingElse) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  std::mutex mu;
  std::multiset<std::string> heard;
  s->set_change_listener([&](const std::vector<std::string>& keys) {
    std::lock_guard lock(mu);
    heard.insert(keys.begin(), keys.end());
  });
  ASSERT_TRUE(s->write([](Tx& tx) -> Result<void> {
    tx.announce("node:a");
    tx.announce("job:1");
    return ok();
  }));
  ASSERT_FALSE(s->write([](Tx& tx) -> Result<void> {
    tx.announce("node:rolled-back");
    return fail(Error::invalid("no"));
  }));
  // Concurrent writers share commits; the failing ones' announcements go with their savepoint.
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i)
        (void)s->write([&](Tx& tx) -> Result<void> {
          tx.announce(fmt::format("w:{}:{}:{}", t, i, i % 3 == 0 ? "bad" : "ok"));
          if (i % 3 == 0) return fail(Error::invalid("refused"));
          return ok();
        });
    });
  for (auto& th : threads) th.join();
  // A read's announcements go nowhere.
  ASSERT_TRUE(s->read([](Tx& tx) -> Result<void> {
    tx.announce("read");
    return ok();
  }));
  std::lock_guard lock(mu);
  EXPECT_EQ(heard.count("node:a"), 1u);
  EXPECT_EQ(heard.count("job:1"), 1u);
  EXPECT_EQ(heard.count("node:rolled-back"), 0u);
  EXPECT_EQ(heard.count("read"), 0u);
  size_t good = 0;
  for (const auto& k : heard) {
    EXPECT_FALSE(k.ends_with(":bad")) << k;
    good += k.ends_with(":ok") ? 1 : 0;
  }
  EXPECT_EQ(good, 8u * 13u);  // 13 of each thread's 20 writes succeed (i % 3 != 0)
}

TEST(SqliteStore, UniqueViolationIsConflictAndForeignKeysHold) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("INSERT INTO meta VALUES ('k', 'v')"));
    return ok();
  }));
  auto dup = s->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("INSERT INTO meta VALUES ('k', 'w')"));
    return ok();
  });
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict);
  auto orphan = s->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec(
        "INSERT INTO projects (id, tenant_id, name, display_name, created_at, updated_at, version) "
        "VALUES ('prj_x', 'ten_missing', 'p', 'p', 0, 0, 1)"));
    return ok();
  });
  ASSERT_FALSE(orphan);
  EXPECT_EQ(orphan.error().code, ErrorCode::kInvalidArgument);
}

TEST(SqliteStore, ValuesRoundTripWithTypes) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("CREATE TABLE t (a BIGINT, b TEXT, c REAL, d TEXT)"));
    GP_TRY_VOID(tx.exec("INSERT INTO t VALUES (?, ?, ?, ?)",
                        {int64_t(1) << 60, std::string("x\0y", 3), 2.5, Null{}}));
    return ok();
  }));
  ASSERT_TRUE(s->read([&](Tx& tx) -> Result<void> {
    auto row = *GP_TRY(tx.query_one("SELECT a, b, c, d FROM t"));
    EXPECT_EQ(row.integer(0), int64_t(1) << 60);
    EXPECT_EQ(row.text(1), std::string("x\0y", 3));
    EXPECT_DOUBLE_EQ(row.real(2), 2.5);
    EXPECT_TRUE(row.is_null(3));
    EXPECT_FALSE(row.opt_text(3));
    return ok();
  }));
}

// query_each reads each row where the statement holds it, as query's Rows would read, and stops
// where its callback says.
TEST(SqliteStore, QueryEachReadsRowsInPlaceAsQueryDoesAndStopsWhenTold) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("CREATE TABLE t (a BIGINT, b TEXT, c REAL, d TEXT)"));
    for (int64_t i = 1; i <= 3; ++i)
      GP_TRY_VOID(tx.exec("INSERT INTO t VALUES (?, ?, ?, ?)",
                          {i << 40, std::string("x\0y", 3) + char('0' + i), 2.5 * double(i),
                           i == 2 ? Value(Null{}) : Value(std::string("d"))}));
    return ok();
  }));
  ASSERT_TRUE(s->read([&](Tx& tx) -> Result<void> {
    const auto rows = GP_TRY(tx.query("SELECT a, b, c, d FROM t ORDER BY a"));
    size_t seen = 0;
    GP_TRY_VOID(tx.query_each("SELECT a, b, c, d FROM t ORDER BY a", {},
                              [&](const RowView& row) -> Result<bool> {
                                const Row& built = rows.at(seen++);
                                EXPECT_EQ(row.size(), built.size());
                                EXPECT_EQ(row.integer(0), built.integer(0));
                                EXPECT_EQ(row.text(1), built.text(1));
                                EXPECT_DOUBLE_EQ(row.real(2), built.real(2));
                                EXPECT_EQ(row.is_null(3), built.is_null(3));
                                EXPECT_EQ(row.text(3), built.text(3));
                                return true;
                              }));
    EXPECT_EQ(seen, 3u);
    EXPECT_TRUE(rows.at(1).is_null(3));
    // Told to stop after the first row, it reads no more; a failing callback fails the query.
    seen = 0;
    GP_TRY_VOID(tx.query_each("SELECT a FROM t ORDER BY a", {},
                              [&](const RowView&) -> Result<bool> { return ++seen < 1; }));
    EXPECT_EQ(seen, 1u);
    auto failed = tx.query_each("SELECT a FROM t", {}, [](const RowView&) -> Result<bool> {
      return fail(Error::internal("unreadable"));
    });
    EXPECT_FALSE(failed);
    // The statement is usable again at once.
    EXPECT_EQ(GP_TRY(tx.query("SELECT a FROM t")).size(), 3u);
    return ok();
  }));
}

// read_page and read_record read records in place: a page stops one past its limit (the next
// page's cursor), keeps only the ids it is limited to, and read_record finds the first row.
TEST(Record, ReadPageAndReadRecordReadRecordsInPlace) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  const std::string select = fmt::format("SELECT {} FROM dials ORDER BY id", columns_of<Dial>());
  ASSERT_TRUE(s->write([&](Tx& tx) -> Result<void> {
    GP_TRY(tx.exec("CREATE TABLE dials (id TEXT PRIMARY KEY, stop_list TEXT, version INTEGER)"));
    for (int i = 1; i <= 5; ++i)
      GP_TRY(tx.exec(fmt::format("INSERT INTO dials ({}) VALUES ({})", columns_of<Dial>(),
                                 placeholders_of<Dial>()),
                     params_of(Dial{fmt::format("d{}", i), {i}, i})));
    return ok();
  }));
  ASSERT_TRUE(s->read([&](Tx& tx) -> Result<void> {
    auto page = GP_TRY(read_page<Dial>(tx, select, {}, PageRequest{.limit = 2}));
    EXPECT_EQ(page.items.size(), 2u);
    EXPECT_EQ(page.items.at(1).stops, (std::vector<int32_t>{2}));
    EXPECT_EQ(page.next, std::optional<std::string>("d2"));
    auto only = GP_TRY(read_page<Dial>(tx, select, {}, PageRequest{.limit = 2},
                                       std::vector<std::string>{"d3", "d5"}));
    EXPECT_EQ(only.items.size(), 2u);
    EXPECT_EQ(only.items.at(0).id, "d3");
    EXPECT_EQ(only.items.at(1).version, 5);
    EXPECT_FALSE(only.next);
    auto one = GP_TRY(read_record<Dial>(tx, select + " DESC"));
    EXPECT_EQ(one ? one->id : "", "d5");
    EXPECT_FALSE(GP_TRY(read_record<Dial>(tx, "SELECT id, stop_list, version FROM dials WHERE 0")));
    return ok();
  }));
}

TEST(SqliteStore, BackupIsAConsistentCopy) {
  TempDir dir;
  auto s = gp::testing::open_store(dir);
  ASSERT_TRUE(s->write([](Tx& tx) -> Result<void> {
    GP_TRY_VOID(tx.exec("INSERT INTO meta VALUES ('k', 'v')"));
    return ok();
  }));
  ASSERT_TRUE(s->backup_to(dir.file("copy.db")));
  auto copy = open_sqlite({.path = dir.file("copy.db"), .read_only = true});
  ASSERT_TRUE(copy);
  std::string v;
  ASSERT_TRUE((*copy)->read([&](Tx& tx) -> Result<void> {
    v = GP_TRY(tx.query_one("SELECT value FROM meta WHERE key='k'"))->text(0);
    return ok();
  }));
  EXPECT_EQ(v, "v");
}

}  // namespace
}  // namespace gp::store
