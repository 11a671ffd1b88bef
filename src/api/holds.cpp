#include "api/holds.h"

namespace gp::api {

Watch::Watch(Holds& holds, std::string key) : holds_(holds), key_(std::move(key)) {
  MutexLock lock(holds_.mu_);
  holds_.watches_.emplace(key_, this);
}

Watch::~Watch() {
  MutexLock lock(holds_.mu_);
  auto [first, last] = holds_.watches_.equal_range(key_);
  for (auto it = first; it != last; ++it)
    if (it->second == this) {
      holds_.watches_.erase(it);
      break;
    }
}

void Watch::on_wake(std::function<void()> wake) {
  {
    MutexLock lock(holds_.mu_);
    if (!fired_) {
      wake_ = std::move(wake);
      return;
    }
  }
  wake();
}

bool Watch::fired() const {
  MutexLock lock(holds_.mu_);
  return fired_;
}

void Holds::fire(Watch& w) {
  if (w.fired_) return;
  w.fired_ = true;
  if (w.wake_) std::exchange(w.wake_, nullptr)();
}

void Holds::announce(const std::vector<std::string>& keys) {
  MutexLock lock(mu_);
  if (watches_.empty()) return;
  for (const auto& k : keys) {
    auto [first, last] = watches_.equal_range(k);
    for (auto it = first; it != last; ++it) fire(*it->second);
  }
}

void Holds::wake_all() {
  MutexLock lock(mu_);
  for (auto& [key, w] : watches_) fire(*w);
}

size_t Holds::watching() const {
  MutexLock lock(mu_);
  return watches_.size();
}

}  // namespace gp::api
