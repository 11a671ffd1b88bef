// The store: durable state behind one small SQL interface, so that SQLite (embedded, default)
// and PostgreSQL (HA) are interchangeable without touching callers. SQL handed to a Tx uses `?`
// placeholders and the portable subset both engines accept; each engine translates as needed.
//
// Contract: write() runs its function inside a serializable transaction and keeps its changes
// only if the function succeeds (all of them or none); a write() that returns success is
// durable (fsynced). Concurrent write() calls run one after another and may share one commit
// (group commit), each still all-or-nothing. read() sees a consistent snapshot and never
// blocks writers.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"

namespace gp::store {

struct Null {};
using Value = std::variant<Null, int64_t, double, std::string>;

// Converts an optional into a Value (NULL when empty).
template <typename T>
Value opt(const std::optional<T>& v) {
  if (!v) return Null{};
  return Value(*v);
}

class Row {
 public:
  explicit Row(std::vector<Value> cols) : cols_(std::move(cols)) {}
  size_t size() const { return cols_.size(); }
  bool is_null(size_t i) const { return std::holds_alternative<Null>(cols_.at(i)); }
  int64_t integer(size_t i) const;
  double real(size_t i) const;
  const std::string& text(size_t i) const;  // "" for NULL
  // The text of column i moved out of the row ("" for NULL), for a reader done with the row.
  std::string take_text(size_t i);
  std::optional<std::string> opt_text(size_t i) const;
  std::optional<int64_t> opt_integer(size_t i) const;
  const Value& value(size_t i) const { return cols_.at(i); }  // as read (backup copies it)

 private:
  std::vector<Value> cols_;
};

using Params = std::vector<Value>;

// One row of a result read where it lies (Tx::query_each), without a Row built: valid only
// while the callback that was handed it runs. Columns convert as Row's do.
class RowView {
 public:
  virtual size_t size() const = 0;
  virtual bool is_null(size_t i) const = 0;
  virtual int64_t integer(size_t i) const = 0;        // 0 for NULL
  virtual double real(size_t i) const = 0;            // 0 for NULL
  virtual std::string_view text(size_t i) const = 0;  // "" for NULL

 protected:
  ~RowView() = default;
};

// Handed each row of a result in turn; answers whether to go on to the next.
using EachRow = std::function<Result<bool>(const RowView&)>;

class Tx {
 public:
  virtual ~Tx() = default;
  // Executes a statement; returns the number of rows changed.
  virtual Result<int64_t> exec(std::string_view sql, const Params& params = {}) = 0;
  virtual Result<std::vector<Row>> query(std::string_view sql, const Params& params = {}) = 0;
  // Executes a statement whose changed-row count is not needed, possibly later: an engine may
  // send it without waiting (PostgreSQL's pipeline), so that its failure is returned by a
  // later statement of the same write, or fails the write as it ends. For statements whose
  // failure the caller would only pass on, which saves a round trip to the server each.
  virtual Result<void> send(std::string_view sql, const Params& params = {}) {
    GP_TRY(exec(sql, params));
    return ok();
  }
  // Hands each row of the result to `each`, read in place where the engine can (SQLite reads
  // the statement's columns; the default builds the Rows first). Stops when `each` fails or
  // answers false.
  virtual Result<void> query_each(std::string_view sql, const Params& params, const EachRow& each);
  // Convenience: first row, or nullopt.
  Result<std::optional<Row>> query_one(std::string_view sql, const Params& params = {});
  // Names something this write changes that a waiting request may want to hear of
  // ("node:<id>"): told to the store's change listener once the write commits, never when it
  // rolls back. Ignored in a read.
  void announce(std::string key) {
    if (announced_) announced_->push_back(std::move(key));
  }
  // For stores: where announce() collects (null: nowhere).
  void collect_announcements(std::vector<std::string>* to) { announced_ = to; }

  // What a module remembers of this transaction's own writes, so as not to read it back (the
  // audit chain's head), by a key of its own. Kept across the writes of one group-commit
  // batch, which holds the store's write lock throughout; forgotten whenever a write rolls
  // back, since what it wrote is gone.
  // Empty until the module sets it.
  std::any& memo(std::string_view key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) it = memo_.emplace(std::string(key), std::any()).first;
    return it->second;
  }
  // For stores: a write rolled back.
  void forget() { memo_.clear(); }

 private:
  std::vector<std::string>* announced_ = nullptr;
  std::map<std::string, std::any, std::less<>> memo_;
};

// Deferred durability, for a server that answers asynchronously. While a DeferFlush lives on
// this thread, write() returns once its transaction is committed (visible to readers) without
// waiting for the disk, and the scope keeps the commit's ticket. Before acknowledging anything
// those writes did, the holder must call Store::flush(ticket()) and see it succeed, typically
// on another thread, so that waiting for the disk does not hold a request thread.
class DeferFlush {
 public:
  DeferFlush();
  ~DeferFlush();
  DeferFlush(const DeferFlush&) = delete;
  DeferFlush& operator=(const DeferFlush&) = delete;
  uint64_t ticket() const { return ticket_; }  // 0: nothing to wait for
  // For stores: the innermost scope on this thread, or null.
  static DeferFlush* current();
  void note(uint64_t ticket) { ticket_ = std::max(ticket_, ticket); }

 private:
  uint64_t ticket_ = 0;
  DeferFlush* outer_;
};

class Store {
 public:
  virtual ~Store() = default;
  // Returns once `fn`'s changes are committed and, unless a DeferFlush scope is open on this
  // thread, on disk.
  virtual Result<void> write(const std::function<Result<void>(Tx&)>& fn) = 0;
  // Returns once every write up to `ticket` (DeferFlush::ticket) is on disk.
  virtual Result<void> flush(uint64_t ticket) = 0;
  // Whether a write in a DeferFlush scope returns at its commit, before the disk has it (SQLite
  // flushing its own WAL). Where it does not (PostgreSQL, whose COMMIT waits for the disk), a
  // server gains nothing by committing on a thread that must not wait.
  virtual bool defers_flush() const { return false; }
  virtual Result<void> read(const std::function<Result<void>(Tx&)>& fn) = 0;
  // A read that reaches the database and asks it nothing: what a readiness probe needs.
  Result<void> ping();
  // "sqlite" or "postgres"
  virtual std::string_view engine() const = 0;
  // A consistent copy of the whole store, taken while serving.
  virtual Result<void> backup_to(const std::string& path) = 0;

  // Hears the keys each write announced (Tx::announce), right after its commit: in a
  // DeferFlush scope that is before the disk has it (a listener wakes waiters, who read what
  // was committed; a crash before the flush loses the write as it loses its unsent answer).
  // Set before writing; the listener must not write to this store. Empty: nobody listens.
  using ChangeListener = std::function<void(const std::vector<std::string>& keys)>;
  void set_change_listener(ChangeListener listener) { listener_ = std::move(listener); }

  // Adds `tables` to those whose changes generation() counts.
  virtual void count_changes_to(const std::vector<std::string>& tables) { (void)tables; }
  // Grows after each commit that changed a row of a counted table, before any writer of that
  // commit returns: something read from those tables at generation G is still true while
  // generation() is G. nullopt where this process cannot see every write (PostgreSQL, which
  // other replicas write to): nothing may be kept.
  virtual std::optional<uint64_t> generation() const { return std::nullopt; }
  // Whether this process makes every write to the store: it leads, or nothing else opens it.
  // Until told otherwise, a SQLite store opened for writing assumes so, and its readers keep a
  // snapshot until its own next commit; told not, they see every commit of another process.
  virtual void set_sole_writer(bool on) { (void)on; }

 protected:
  void changed(const std::vector<std::string>& keys) const {
    if (listener_ && !keys.empty()) listener_(keys);
  }

 private:
  ChangeListener listener_;
};

struct SqliteOptions {
  std::string path;          // database file
  int read_connections = 4;  // pool for read()
  bool read_only = false;    // open without migrating (offline tools)
};

Result<std::unique_ptr<Store>> open_sqlite(const SqliteOptions& options);

// Numbered schema migrations, applied in order at open; each runs in its own transaction and
// is recorded in schema_migrations.
struct Migration {
  int version;
  std::string_view name;
  std::string_view sql;  // one or more statements separated by ';'
};
const std::vector<Migration>& migrations();

// ---- idempotency keys: the committed replies of writes a client may retry ----
// A write sent with an Idempotency-Key is recorded with its reply in the write's transaction;
// the same principal sending the same key again gets that reply, not a second write.

struct IdempotentReply {
  std::string request_hash;  // of method, path and body: the same key with another request is an
                             // error
  int status = 0;
  std::string body;
};
Result<std::optional<IdempotentReply>> find_idempotent_reply(Tx& tx, const std::string& principal,
                                                             const std::string& key);
struct IdempotentWrite {
  std::string principal, key, method, path;
  IdempotentReply reply;
  int64_t created_at = 0;
};
Result<void> record_idempotent_reply(Tx& tx, const IdempotentWrite& write);

// ---- the leader record: which replica leads, for followers to name (docs/ha.md) ----
// Replaces the record with `holder` (this replica), the URL it serves and since when.
Result<void> record_leader(Tx& tx, const std::string& holder, const std::string& url,
                           int64_t since_micros);
// The URL of the replica that last recorded itself as leader; empty when none has.
Result<std::string> leader_url(Tx& tx);

// A unique-constraint violation is reported as ErrorCode::kConflict with this prefix.
inline constexpr std::string_view kUniqueViolation = "unique constraint violated";

}  // namespace gp::store
