// Long polls (docs/api.md, "Waiting for a change"): a request that found nothing new is held
// until a committed write announces a key it watches (store::Tx::announce) or its deadline
// passes, and is then answered by running it again. Keys name what changed: "node:<id>" (what
// the node's agent is assigned), "job:<id>" (a job's state or output).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/thread_safety.h"

namespace gp::api {

class Holds;

// One request's interest in a key, taken before it reads the state it compares: whatever is
// announced from then on fires it, so no change falls between the read and the wait.
class Watch {
 public:
  Watch(Holds& holds, std::string key);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  // Calls `wake` once the key is announced: at once, on this thread, if it already was;
  // otherwise on the announcing thread (keep it short: post the real work).
  void on_wake(std::function<void()> wake);
  bool fired() const;

 private:
  friend class Holds;
  Holds& holds_;
  std::string key_;
  bool fired_ = false;  // guarded by holds_.mu_
  std::function<void()> wake_;
};

class Holds {
 public:
  std::shared_ptr<Watch> watch(std::string key) {
    return std::make_shared<Watch>(*this, std::move(key));
  }
  // The store's change listener: fires every watch of these keys.
  void announce(const std::vector<std::string>& keys);
  // Fires every watch (the server is stopping: held requests are answered now).
  void wake_all();
  size_t watching() const;  // watches alive, for tests and metrics

 private:
  friend class Watch;
  void fire(Watch& w) GP_REQUIRES(mu_);
  mutable Mutex mu_;
  std::unordered_multimap<std::string, Watch*> watches_ GP_GUARDED_BY(mu_);
};

}  // namespace gp::api
