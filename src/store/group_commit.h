// What the SQLite and PostgreSQL stores share (private to gp_store): group commit (concurrent
// write() calls queue up; whoever finds no batch running takes everything queued so far and runs
// it as one transaction, each function under its own savepoint, so one commit and one flush
// cover many writes while each caller still gets its own all-or-nothing result), the
// transaction adapter over an engine connection, and the pool of reader connections.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/thread_safety.h"
#include "store/store.h"

namespace gp::store {

// A map keyed by SQL text, looked up by string_view: finding a statement builds no string (the
// engines' prepared statements, PostgreSQL's counted-table answers).
struct SqlHash : std::hash<std::string_view> {
  using is_transparent = void;
};
template <typename V>
using BySql = std::unordered_map<std::string, V, SqlHash, std::equal_to<>>;

using WriteFn = std::function<Result<void>(Tx&)>;

struct QueuedWrite {
  const WriteFn* fn = nullptr;
  Result<void> result = ok();
  uint64_t commit_seq = 0;  // the batch's commit; 0 when nothing was committed
  bool done = false;
  std::vector<std::string> announced;  // Tx::announce of this write, once it is committed
};

class GroupCommit {
 public:
  // `run_batch` runs a whole batch in one transaction, sets each entry's result and returns the
  // commit's sequence number (0 when it did not commit). Returns this write's entry once the
  // batch holding it has finished.
  using BatchRunner = std::function<uint64_t(const std::vector<QueuedWrite*>&)>;
  QueuedWrite submit(const WriteFn& fn, const BatchRunner& run_batch);

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<QueuedWrite*> queue_ GP_GUARDED_BY(mu_);
  bool leading_ GP_GUARDED_BY(mu_) = false;
};

// Executes one statement without results on a store's connection.
using Script = std::function<Result<void>(std::string_view sql)>;
// Starts a transaction on it (each store and use has its own BEGIN).
using Begin = std::function<Result<void>()>;

// Runs a batch as one transaction on a connection: `begin` starts it, then every queued
// function runs under SAVEPOINT w (a failing or throwing one is rolled back alone), then
// `script` commits. `queue` runs a statement, or sends it to be settled by the next `script`
// (Tx::send); RELEASE w, through `script`, settles each write's statements, so that one whose
// statement failed is rolled back alone too. Returns whether it committed; when BEGIN or
// COMMIT fails, every write that had succeeded carries the failure instead (503: nothing of the
// batch is kept).
bool commit_batch(const Begin& begin, const Script& script, const Script& queue, Tx& tx,
                  const std::vector<QueuedWrite*>& batch);

// A Tx over one engine connection: C::run(sql, params, int64_t* changes) runs a statement.
template <typename C>
class ConnectionTx final : public Tx {
 public:
  explicit ConnectionTx(C& c) : c_(c) {}
  Result<int64_t> exec(std::string_view sql, const Params& params) override {
    int64_t changes = 0;
    GP_TRY_VOID(c_.run(sql, params, &changes));
    return changes;
  }
  Result<std::vector<Row>> query(std::string_view sql, const Params& params) override {
    return c_.run(sql, params, nullptr);
  }
  Result<void> query_each(std::string_view sql, const Params& params,
                          const EachRow& each) override {
    if constexpr (requires { c_.each(sql, params, each); })
      return c_.each(sql, params, each);
    else
      return Tx::query_each(sql, params, each);
  }
  Result<void> send(std::string_view sql, const Params& params) override {
    if constexpr (requires { c_.queue(sql, params); })
      return c_.queue(sql, params);
    else
      return Tx::send(sql, params);
  }

 private:
  C& c_;
};

// Reader connections lent one at a time; a reader waits while every one is busy.
template <typename C>
class ReaderPool {
 public:
  void add(std::unique_ptr<C> c) {
    MutexLock lock(mu_);
    free_.push_back(c.get());
    all_.push_back(std::move(c));
  }
  // Runs f(C&) on a free connection and returns what it returns.
  template <typename F>
  auto with(F&& f) {
    C* c = nullptr;
    {
      MutexLock lock(mu_);
      while (free_.empty()) cv_.wait(mu_);
      c = free_.back();
      free_.pop_back();
    }
    auto r = f(*c);
    {
      MutexLock lock(mu_);
      free_.push_back(c);
    }
    cv_.notify_one();
    return r;
  }
  // Runs f(C&) on every connection not lent now; none is lent while it runs.
  template <typename F>
  void each_free(F&& f) {
    MutexLock lock(mu_);
    for (C* c : free_) f(*c);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::unique_ptr<C>> all_;
  std::vector<C*> free_ GP_GUARDED_BY(mu_);
};

}  // namespace gp::store
