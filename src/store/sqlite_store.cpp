// SQLite implementation of Store: WAL mode, foreign keys on. One writer connection (SQLite
// allows one writer at a time anyway) fed by a group-commit queue, and a small pool of reader
// connections, each with a prepared-statement cache.
//
// Durability: the writer runs with synchronous=NORMAL (a COMMIT appends its frames to the WAL
// without waiting for the disk; checkpoints still sync, so the file is never corrupt) and the
// store itself flushes the WAL with fdatasync before any writer is answered. The flush runs
// outside the writer lock, so the next batch executes while the previous one reaches the disk:
// one fsync covers every batch committed before it began. The WAL is a checksummed sequence,
// so what survives a power loss is always a prefix of the commits, and no write is
// acknowledged before its frames are on disk. Readers may see a commit up to one flush before
// its writer is answered.
//
// Checkpoints (copying the WAL back into the database, which syncs both files) run on their own
// thread and connection once the WAL passes kCheckpointPages, never inside a writer's COMMIT,
// where SQLite runs them by default: there each one held every queued write for two disk
// flushes (docs/benchmarks.md, "Writes off the I/O threads, checkpoints off the writer").
#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "common/thread_safety.h"
#include "store/group_commit.h"
#include "store/store.h"

namespace gp::store {
namespace {

// The current row of a stepped statement, read in place.
class StatementRow final : public RowView {
 public:
  explicit StatementRow(sqlite3_stmt* stmt) : stmt_(stmt) {}
  size_t size() const override { return size_t(sqlite3_column_count(stmt_)); }
  bool is_null(size_t i) const override {
    return sqlite3_column_type(stmt_, int(i)) == SQLITE_NULL;
  }
  int64_t integer(size_t i) const override { return sqlite3_column_int64(stmt_, int(i)); }
  double real(size_t i) const override { return sqlite3_column_double(stmt_, int(i)); }
  std::string_view text(size_t i) const override {
    // column_text before column_bytes: the bytes are counted in the form just asked for.
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, int(i)));
    return p ? std::string_view(p, size_t(sqlite3_column_bytes(stmt_, int(i))))
             : std::string_view();
  }

 private:
  sqlite3_stmt* stmt_;
};

class Connection {
 public:
  static Result<std::unique_ptr<Connection>> open(const std::string& path, bool read_only) {
    sqlite3* db = nullptr;
    int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    flags |= SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
    auto conn = std::unique_ptr<Connection>(new Connection(db));
    if (rc != SQLITE_OK)
      return fail(Error::unavailable(
          fmt::format("cannot open {}: {}", path, db ? sqlite3_errmsg(db) : "out of memory")));
    sqlite3_busy_timeout(db, 10000);
    sqlite3_extended_result_codes(db, 1);
    return conn;
  }
  ~Connection() {
    for (auto& [_, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  Result<void> exec_script(std::string_view sql) {
    char* err = nullptr;
    std::string s(sql);
    if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return fail(Error::internal(fmt::format("sqlite: {}", msg)));
    }
    return ok();
  }

  // One statement without parameters or rows (BEGIN, COMMIT, ROLLBACK), prepared once per
  // connection like every query: sqlite3_exec would parse it again on every transaction.
  Result<void> exec_one(std::string_view sql) {
    GP_TRY(run(sql, {}, nullptr));
    return ok();
  }

  Result<std::vector<Row>> run(std::string_view sql, const Params& params, int64_t* changes) {
    std::vector<Row> rows;
    GP_TRY_VOID(step(sql, params, changes, [&](sqlite3_stmt* stmt) -> Result<bool> {
      const int n = sqlite3_column_count(stmt);
      std::vector<Value> cols;
      cols.reserve(n);
      for (int c = 0; c < n; ++c) {
        switch (sqlite3_column_type(stmt, c)) {
          case SQLITE_NULL:
            cols.emplace_back(Null{});
            break;
          case SQLITE_INTEGER:
            cols.emplace_back(int64_t(sqlite3_column_int64(stmt, c)));
            break;
          case SQLITE_FLOAT:
            cols.emplace_back(sqlite3_column_double(stmt, c));
            break;
          default:
            cols.emplace_back(std::string(StatementRow(stmt).text(size_t(c))));
        }
      }
      rows.emplace_back(std::move(cols));
      return true;
    }));
    return rows;
  }

  // Hands each row to `each` as the statement holds it (Tx::query_each).
  Result<void> each(std::string_view sql, const Params& params, const EachRow& on_row) {
    return step(sql, params, nullptr,
                [&](sqlite3_stmt* stmt) { return on_row(StatementRow(stmt)); });
  }

  sqlite3* db() { return db_; }

  // A reader's read transaction left open after its read (SqliteStore::read): the number of
  // commits there had been when it began; nullopt when none is open.
  std::optional<uint64_t> snapshot;
  // Ends the transaction left open, if any (rolled back when its COMMIT fails).
  Result<void> end_snapshot() {
    if (!snapshot) return ok();
    snapshot.reset();
    auto r = exec_one("COMMIT");
    if (!r) (void)exec_one("ROLLBACK");
    return r;
  }

 private:
  explicit Connection(sqlite3* db) : db_(db) {}

  // Runs `sql` (prepared once per connection) with `params`, handing each row to `on_row`
  // until it answers false; the changed-row count goes to `changes` when given.
  template <typename OnRow>
  Result<void> step(std::string_view sql, const Params& params, int64_t* changes, OnRow&& on_row) {
    sqlite3_stmt* stmt = nullptr;
    auto it = cache_.find(sql);
    if (it != cache_.end()) {
      stmt = it->second;
    } else {
      int rc = sqlite3_prepare_v3(db_, sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                  &stmt, nullptr);
      if (rc != SQLITE_OK)
        return fail(
            Error::internal(fmt::format("sqlite prepare: {} in: {}", sqlite3_errmsg(db_), sql)));
      cache_.emplace(std::string(sql), stmt);
    }
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    for (size_t i = 0; i < params.size(); ++i) {
      int idx = int(i) + 1;
      const Value& v = params[i];
      if (std::holds_alternative<Null>(v)) {
        sqlite3_bind_null(stmt, idx);
      } else if (auto p = std::get_if<int64_t>(&v)) {
        sqlite3_bind_int64(stmt, idx, *p);
      } else if (auto d = std::get_if<double>(&v)) {
        sqlite3_bind_double(stmt, idx, *d);
      } else {
        const auto& s = std::get<std::string>(v);
        sqlite3_bind_text(stmt, idx, s.data(), int(s.size()), SQLITE_STATIC);
      }
    }
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        int base = rc & 0xff;
        std::string msg = sqlite3_errmsg(db_);
        sqlite3_reset(stmt);
        if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
          return fail(Error::conflict(fmt::format("{}: {}", kUniqueViolation, msg)));
        if (base == SQLITE_CONSTRAINT)
          return fail(Error::invalid(fmt::format("constraint violated: {}", msg)));
        if (base == SQLITE_BUSY || base == SQLITE_LOCKED || base == SQLITE_FULL ||
            base == SQLITE_IOERR)
          return fail(Error::unavailable(fmt::format("store unavailable: {}", msg)));
        return fail(Error::internal(fmt::format("sqlite step: {}", msg)));
      }
      Result<bool> go_on = on_row(stmt);
      if (!go_on) {
        sqlite3_reset(stmt);
        return fail(std::move(go_on.error()));
      }
      if (!*go_on) break;
    }
    if (changes) *changes = sqlite3_changes64(db_);
    sqlite3_reset(stmt);
    return ok();
  }

  sqlite3* db_;
  BySql<sqlite3_stmt*> cache_;
};

using SqliteTx = ConnectionTx<Connection>;

// WAL pages after which a checkpoint is wanted (SQLite's own default threshold).
constexpr int kCheckpointPages = 1000;

class SqliteStore final : public Store {
 public:
  ~SqliteStore() override {
    if (checkpointer_.joinable()) {
      {
        MutexLock lock(checkpoint_mu_);
        stopping_ = true;
      }
      checkpoint_cv_.notify_all();
      checkpointer_.join();
    }
    if (wal_fd_ >= 0) ::close(wal_fd_);
  }

  static Result<std::unique_ptr<Store>> open(const SqliteOptions& o) {
    // SQLite counts every allocation under one process-wide mutex unless told not to; the
    // counts are never read here, and the mutex was taken several times per row by every reader
    // (docs/benchmarks.md). Settable only before SQLite first initialises: once per process.
    static const int memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    (void)memstatus_off;
    auto store = std::unique_ptr<SqliteStore>(new SqliteStore());
    store->path_ = o.path;
    store->read_only_ = o.read_only;
    store->keep_snapshots_ = !o.read_only;
    store->writer_ = GP_TRY(Connection::open(o.path, o.read_only));
    if (!o.read_only) {
      // temp_store=MEMORY keeps the writer's sub-journals in memory: every write of a batch runs
      // under its own savepoint, which saves each page it first touches, and past 64 KiB SQLite
      // spills that to a temporary file (a create touches some fifteen pages: 1,200 -> 1,580
      // creates/s in bench_load, docs/benchmarks.md).
      GP_TRY_VOID(store->writer_->exec_script(
          "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; "
          "PRAGMA temp_store=MEMORY;"));
      GP_TRY_VOID(store->migrate());
      sqlite3_update_hook(store->writer_->db(), &SqliteStore::row_changed, store.get());
      // From here on the store flushes the WAL itself (see the top of this file). A database
      // that cannot use WAL (e.g. on a file system without shared memory) keeps FULL.
      auto mode = GP_TRY(store->writer_->run("PRAGMA journal_mode", {}, nullptr));
      if (!mode.empty() && mode.front().text(0) == "wal") {
        GP_TRY_VOID(store->writer_->exec_script("PRAGMA synchronous=NORMAL;"));
        GP_TRY_VOID(store->open_wal());
        GP_TRY_VOID(store->start_checkpoints(o.path));
      }
    }
    for (int i = 0; i < std::max(1, o.read_connections); ++i) {
      auto c = GP_TRY(Connection::open(o.path, o.read_only));
      GP_TRY_VOID(c->exec_script("PRAGMA foreign_keys=ON;"));
      store->readers_.add(std::move(c));
    }
    return std::unique_ptr<Store>(std::move(store));
  }

  // Group commit (group_commit.h): one COMMIT and one fsync for many writes. Each caller returns
  // with its own result, after the COMMIT that holds its write and the flush that covers it
  // (inside a DeferFlush scope, the flush is left to the scope's holder).
  Result<void> write(const std::function<Result<void>(Tx&)>& fn) override {
    QueuedWrite me =
        group_.submit(fn, [this](const std::vector<QueuedWrite*>& b) { return run_batch(b); });
    if (me.result && me.commit_seq > 0) {
      changed(me.announced);
      if (DeferFlush* deferred = DeferFlush::current())
        deferred->note(me.commit_seq);
      else
        GP_TRY_VOID(flush(me.commit_seq));
    }
    return me.result;
  }

  // A reader leaves its read transaction open after a read, and the next read on that
  // connection runs in it while nothing has been committed since it began: that snapshot is the
  // one a new transaction would see. Beginning and ending a read transaction each take a lock
  // in the WAL's shared memory, which readers on other threads wait for (docs/benchmarks.md,
  // "A reader keeps its snapshot"). Only while this process makes every write
  // (set_sole_writer): a follower's store is written by another process, which it cannot count.
  Result<void> read(const std::function<Result<void>(Tx&)>& fn) override {
    return readers_.with([&](Connection& c) -> Result<void> {
      const bool keep = keep_snapshots_.load();
      // Loaded before the transaction begins: any commit after this makes its snapshot stale.
      const uint64_t commits = committed_seq_.load();
      if (c.snapshot != commits || !keep) {
        (void)c.end_snapshot();
        GP_TRY_VOID(c.exec_one("BEGIN"));
        c.snapshot = commits;
      }
      SqliteTx tx(c);
      auto r = fn(tx);
      if (!r) {
        c.snapshot.reset();
        (void)c.exec_one("ROLLBACK");
        return r;
      }
      // Kept after a read that holds a read snapshot (one that wrote, or that SQLite rolled back
      // after an error the read passed over, is ended), while nothing has committed since.
      if (keep && committed_seq_.load() == commits &&
          sqlite3_txn_state(c.db(), nullptr) == SQLITE_TXN_READ)
        return r;
      if (auto end = c.end_snapshot(); !end)
        return fail(Error::unavailable(fmt::format("commit failed: {}", end.error().message)));
      return r;
    });
  }

  void set_sole_writer(bool on) override {
    // A change of role starts a new generation: nothing kept before it is trusted after (while
    // another process wrote, this one counted nothing).
    ++generation_;
    keep_snapshots_ = on && !read_only_;
    if (!on) readers_.each_free([](Connection& c) { (void)c.end_snapshot(); });
  }

  std::string_view engine() const override { return "sqlite"; }

  void count_changes_to(const std::vector<std::string>& tables) override {
    MutexLock lock(counted_mu_);
    counted_.insert(tables.begin(), tables.end());
  }
  // Every write goes through this process's writer connection: the leader lock (engines.h)
  // keeps any other process from writing while it leads. A store that is not the sole writer
  // (a follower's, or one opened read-only) cannot count the commits of the process that is.
  std::optional<uint64_t> generation() const override {
    if (!keep_snapshots_.load()) return std::nullopt;
    return generation_.load();
  }

  Result<void> backup_to(const std::string& path) override {
    // VACUUM INTO writes a consistent, compacted copy while readers and writers continue.
    return readers_.with([&](Connection& c) -> Result<void> {
      (void)c.end_snapshot();  // VACUUM runs outside any transaction
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(c.db(), "VACUUM INTO ?", -1, &stmt, nullptr) != SQLITE_OK)
        return fail(Error::internal(sqlite3_errmsg(c.db())));
      sqlite3_bind_text(stmt, 1, path.c_str(), -1, SQLITE_TRANSIENT);
      Result<void> r = ok();
      if (sqlite3_step(stmt) != SQLITE_DONE)
        r = fail(Error::internal(fmt::format("backup failed: {}", sqlite3_errmsg(c.db()))));
      sqlite3_finalize(stmt);
      return r;
    });
  }

 private:
  SqliteStore() = default;

  // Opens the WAL for flushing, and makes its directory entry durable once.
  Result<void> open_wal() {
    const std::string wal = path_ + "-wal";
    wal_fd_ = ::open(wal.c_str(), O_RDONLY | O_CLOEXEC);
    if (wal_fd_ < 0)
      return fail(Error::unavailable(fmt::format("cannot open {}: {}", wal, errno_text())));
    const auto slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
    if (int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
      (void)::fsync(fd);
      ::close(fd);
    }
    return ok();
  }
  static std::string errno_text() { return std::strerror(errno); }

  // Replaces SQLite's automatic checkpoints (see the top of this file).
  Result<void> start_checkpoints(const std::string& path) {
    checkpoint_conn_ = GP_TRY(Connection::open(path, false));
    // A connection learns that the database is in WAL mode when it first reads it; until then
    // a checkpoint on it does nothing.
    GP_TRY_VOID(checkpoint_conn_->exec_script("SELECT 1 FROM sqlite_schema LIMIT 1"));
    sqlite3_wal_hook(writer_->db(), &SqliteStore::wal_grew, this);  // turns autocheckpoint off
    checkpointer_ = std::thread([this] { checkpoint_loop(); });
    return ok();
  }
  // Called by the writer after each commit, with the pages now in the WAL.
  static int wal_grew(void* self, sqlite3*, const char*, int pages) {
    auto* store = static_cast<SqliteStore*>(self);
    store->wal_pages_.store(pages, std::memory_order_relaxed);
    if (pages < kCheckpointPages) return SQLITE_OK;
    {
      MutexLock lock(store->checkpoint_mu_);
      store->checkpoint_wanted_ = true;
    }
    store->checkpoint_cv_.notify_one();
    return SQLITE_OK;
  }
  // SQLite starts the WAL over only when a writer begins with every frame of it copied, which a
  // checkpointer running beside a busy writer never sees: the writer's next batch has always
  // begun by then. So once a checkpoint has copied what the WAL held, the writer copies the few
  // frames committed since itself (a short copy and a flush of a few pages) before its next
  // BEGIN, and that BEGIN starts the WAL over.
  void finish_checkpoint() GP_REQUIRES(write_mu_) {
    if (wal_pages_.load(std::memory_order_relaxed) < kCheckpointPages ||
        !checkpoint_caught_up_.exchange(false))
      return;
    // A reader's open snapshot holds its place in the WAL, and the BEGIN below starts the WAL
    // over only when no reader holds one.
    readers_.each_free([](Connection& c) { (void)c.end_snapshot(); });
    (void)sqlite3_wal_checkpoint_v2(writer_->db(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                    nullptr);
  }

  void checkpoint_loop() {
    MutexLock lock(checkpoint_mu_);
    while (true) {
      // After a pass that caught up, the writer finishes (finish_checkpoint) before another.
      while ((!checkpoint_wanted_ || checkpoint_caught_up_) && !stopping_)
        checkpoint_cv_.wait(checkpoint_mu_);
      if (stopping_) return;
      checkpoint_wanted_ = false;
      lock.unlock();
      // Snapshots kept by idle readers from before the last commit hold back what it can copy.
      const uint64_t commits = committed_seq_.load();
      readers_.each_free([commits](Connection& c) {
        if (c.snapshot != commits) (void)c.end_snapshot();
      });
      // PASSIVE copies what no reader still needs and never blocks the writer; what it leaves
      // is copied by the next one (a failure, or SQLITE_BUSY, only lets the WAL grow until then).
      int frames = 0, copied = 0;
      if (sqlite3_wal_checkpoint_v2(checkpoint_conn_->db(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                    &frames, &copied) == SQLITE_OK &&
          copied == frames)
        checkpoint_caught_up_ = true;
      lock.lock();
    }
  }

  // The writer's update hook: SQLite calls it for each row a statement inserts, updates or
  // deletes (every delete here has a WHERE, so none is a truncation the hook misses).
  static void row_changed(void* self, int, const char*, const char* table, sqlite3_int64) {
    auto* store = static_cast<SqliteStore*>(self);
    if (store->counted_changed_.load(std::memory_order_relaxed)) return;
    MutexLock lock(store->counted_mu_);
    if (store->counted_.contains(std::string_view(table))) store->counted_changed_ = true;
  }

  // Returns once every commit up to `seq` is on disk. Whoever finds no flush running flushes
  // everything committed so far; the others wait for it.
  bool defers_flush() const override { return wal_fd_ >= 0; }

  Result<void> flush(uint64_t seq) override {
    if (wal_fd_ < 0) return ok();  // synchronous=FULL: the COMMIT was already durable
    MutexLock lock(flush_mu_);
    while (flushed_seq_ < seq) {
      if (flushing_) {
        flush_cv_.wait(flush_mu_);
        continue;
      }
      flushing_ = true;
      const uint64_t target = committed_seq_.load();
      lock.unlock();
      const bool synced = ::fdatasync(wal_fd_) == 0;
      const std::string why = synced ? "" : errno_text();
      lock.lock();
      flushing_ = false;
      if (synced) flushed_seq_ = std::max(flushed_seq_, target);
      flush_cv_.notify_all();
      if (!synced)  // committed and visible, but not known to be on disk: say so
        return fail(
            Error::unavailable(fmt::format("flushing the write-ahead log failed: {}", why)));
    }
    return ok();
  }

  // Runs a batch in one transaction; returns its commit's sequence number, 0 if none.
  uint64_t run_batch(const std::vector<QueuedWrite*>& batch) {
    MutexLock lock(write_mu_);
    Connection& c = *writer_;
    finish_checkpoint();
    SqliteTx tx(c);
    const auto script = [&](std::string_view sql) { return c.exec_one(sql); };
    const bool committed =
        commit_batch([&] { return c.exec_one("BEGIN IMMEDIATE"); }, script, script, tx, batch);
    // After the COMMIT, before any writer of the batch returns; also after a rollback (a
    // generation that grows needlessly only costs a cache one read). The commit count grows
    // first: a reader that sees the new generation also sees a kept snapshot from before this
    // commit as stale, so nothing it reads under that generation predates the commit.
    const uint64_t seq = committed ? ++committed_seq_ : 0;
    if (counted_changed_.exchange(false)) ++generation_;
    return seq;
  }

  Result<void> migrate() {
    GP_TRY_VOID(writer_->exec_script(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT "
        "NOT NULL, applied_at INTEGER NOT NULL)"));
    for (const auto& m : migrations()) {
      auto done = GP_TRY(writer_->run("SELECT 1 FROM schema_migrations WHERE version = ?",
                                      {int64_t(m.version)}, nullptr));
      if (!done.empty()) continue;
      GP_TRY_VOID(writer_->exec_script("BEGIN IMMEDIATE"));
      auto r = writer_->exec_script(m.sql);
      if (r) {
        auto ins = writer_->run("INSERT INTO schema_migrations VALUES (?, ?, strftime('%s','now'))",
                                {int64_t(m.version), std::string(m.name)}, nullptr);
        if (!ins) r = fail(ins.error());
      }
      if (!r) {
        (void)writer_->exec_script("ROLLBACK");
        return fail(Error::internal(
            fmt::format("migration {} ({}) failed: {}", m.version, m.name, r.error().message)));
      }
      GP_TRY_VOID(writer_->exec_script("COMMIT"));
    }
    return ok();
  }

  std::string path_;
  Mutex write_mu_;  // the writer connection (migrations run before anyone else has the store)
  std::unique_ptr<Connection> writer_;
  GroupCommit group_;
  std::atomic<uint64_t> committed_seq_{0};  // batches committed (under write_mu_)
  int wal_fd_ = -1;                         // -1: COMMIT itself syncs (synchronous=FULL)
  Mutex flush_mu_;
  CondVar flush_cv_;
  uint64_t flushed_seq_ GP_GUARDED_BY(flush_mu_) = 0;  // every commit up to here is on disk
  bool flushing_ GP_GUARDED_BY(flush_mu_) = false;
  ReaderPool<Connection> readers_;
  bool read_only_ = false;
  std::atomic<bool> keep_snapshots_{false};      // readers keep snapshots (read(), set_sole_writer)
  std::unique_ptr<Connection> checkpoint_conn_;  // used only by checkpointer_
  std::thread checkpointer_;
  Mutex checkpoint_mu_;
  CondVar checkpoint_cv_;
  bool checkpoint_wanted_ GP_GUARDED_BY(checkpoint_mu_) = false;
  bool stopping_ GP_GUARDED_BY(checkpoint_mu_) = false;
  std::atomic<int> wal_pages_{0};  // in the WAL after the last commit (the writer's WAL hook)
  std::atomic<bool> checkpoint_caught_up_{false};  // a checkpoint copied all the WAL it saw
  Mutex counted_mu_;
  std::set<std::string, std::less<>> counted_ GP_GUARDED_BY(counted_mu_);
  std::atomic<bool> counted_changed_{false};  // a counted table changed in the running batch
  std::atomic<uint64_t> generation_{0};
};

}  // namespace

Result<std::unique_ptr<Store>> open_sqlite(const SqliteOptions& options) {
  return SqliteStore::open(options);
}

}  // namespace gp::store
