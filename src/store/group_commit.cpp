#include "store/group_commit.h"

#include <fmt/format.h>

#include <exception>

namespace gp::store {

QueuedWrite GroupCommit::submit(const WriteFn& fn, const BatchRunner& run_batch) {
  QueuedWrite me{.fn = &fn};
  std::unique_lock lock(mu_);
  queue_.push_back(&me);
  while (!me.done) {
    if (leading_) {
      cv_.wait(lock);
      continue;
    }
    leading_ = true;
    std::vector<QueuedWrite*> batch;
    batch.swap(queue_);
    lock.unlock();
    const uint64_t seq = run_batch(batch);
    lock.lock();
    for (QueuedWrite* q : batch) {
      q->commit_seq = seq;
      q->done = true;
    }
    leading_ = false;
    cv_.notify_all();
  }
  return me;
}

void run_under_savepoints(const std::function<Result<void>(std::string_view)>& script, Tx& tx,
                          const std::vector<QueuedWrite*>& batch) {
  for (QueuedWrite* q : batch) {
    if (auto sp = script("SAVEPOINT w"); !sp) {
      q->result = fail(sp.error());
      continue;
    }
    try {
      q->result = (*q->fn)(tx);
    } catch (const std::exception& e) {
      q->result = fail(Error::internal(fmt::format("write failed: {}", e.what())));
    }
    if (!q->result) (void)script("ROLLBACK TO w");
    (void)script("RELEASE w");
  }
}

}  // namespace gp::store
