// Group commit, shared by the stores (private to gp_store). Concurrent write() calls queue up;
// whoever finds no batch running takes everything queued so far and runs it as one transaction,
// each function under its own savepoint, so one commit (and one flush) covers many writes while
// each caller still gets its own all-or-nothing result.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace gp::store {

using WriteFn = std::function<Result<void>(Tx&)>;

struct QueuedWrite {
  const WriteFn* fn = nullptr;
  Result<void> result = ok();
  uint64_t commit_seq = 0;  // the batch's commit; 0 when nothing was committed
  bool done = false;
};

class GroupCommit {
 public:
  // `run_batch` runs a whole batch in one transaction, sets each entry's result and returns the
  // commit's sequence number (0 when it did not commit). Returns this write's entry once the
  // batch holding it has finished.
  using BatchRunner = std::function<uint64_t(const std::vector<QueuedWrite*>&)>;
  QueuedWrite submit(const WriteFn& fn, const BatchRunner& run_batch);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<QueuedWrite*> queue_;
  bool leading_ = false;
};

// Executes one statement without results on a store's connection.
using Script = std::function<Result<void>(std::string_view sql)>;
// Starts a transaction on it (each store and use has its own BEGIN).
using Begin = std::function<Result<void>()>;

// Runs a batch as one transaction on a connection: `begin` starts it, then every queued
// function runs under SAVEPOINT w (a failing or throwing one is rolled back alone), then
// `script` commits. Returns whether it committed; when BEGIN or COMMIT fails, every write that
// had succeeded carries the failure instead (503: nothing of the batch is kept).
bool commit_batch(const Begin& begin, const Script& script, Tx& tx,
                  const std::vector<QueuedWrite*>& batch);

// Runs `fn` alone in a transaction `begin` starts (a read): rolled back when it fails,
// committed otherwise.
Result<void> run_in_tx(const Begin& begin, const Script& script, Tx& tx, const WriteFn& fn);

}  // namespace gp::store
