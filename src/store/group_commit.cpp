#include "store/group_commit.h"

#include <fmt/format.h>

#include <exception>

namespace gp::store {

QueuedWrite GroupCommit::submit(const WriteFn& fn, const BatchRunner& run_batch) {
  QueuedWrite me{.fn = &fn};
  MutexLock lock(mu_);
  queue_.push_back(&me);
  while (!me.done) {
    if (leading_) {
      cv_.wait(mu_);
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

bool commit_batch(const Begin& begin, const Script& script, const Script& queue, Tx& tx,
                  const std::vector<QueuedWrite*>& batch) {
  if (auto begun = begin(); !begun) {
    for (QueuedWrite* q : batch) q->result = fail(begun.error());
    return false;
  }
  for (QueuedWrite* q : batch) {
    if (auto sp = queue("SAVEPOINT w"); !sp) {
      q->result = fail(sp.error());
      continue;
    }
    tx.collect_announcements(&q->announced);
    try {
      q->result = (*q->fn)(tx);
    } catch (const std::exception& e) {
      q->result = fail(Error::internal(fmt::format("write failed: {}", e.what())));
    }
    tx.collect_announcements(nullptr);
    if (q->result) {
      // Settles what the write sent: a statement of it that failed fails it.
      if (auto released = script("RELEASE w"); !released) q->result = fail(released.error());
    }
    if (!q->result) {
      tx.forget();
      (void)script("ROLLBACK TO w");
      (void)script("RELEASE w");
      q->announced.clear();
    }
  }
  if (auto commit = script("COMMIT"); !commit) {
    (void)script("ROLLBACK");
    for (QueuedWrite* q : batch) {
      q->announced.clear();
      if (q->result)
        q->result =
            fail(Error::unavailable(fmt::format("commit failed: {}", commit.error().message)));
    }
    return false;
  }
  return true;
}

}  // namespace gp::store
