// Locks the compiler can check. With clang, -Wthread-safety proves that data marked
// GP_GUARDED_BY(mu) is only touched with `mu` held and that functions marked GP_REQUIRES(mu) are
// only called with it held; the macros expand to nothing under other compilers.
// scripts/thread_safety.sh runs the analysis over the whole tree (part of `make test`).
// libstdc++'s std::mutex carries no annotations, hence these thin wrappers over it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define GP_TSA(x) __attribute__((x))
#else
#define GP_TSA(x)
#endif

#define GP_CAPABILITY(name) GP_TSA(capability(name))
#define GP_SCOPED_CAPABILITY GP_TSA(scoped_lockable)
#define GP_GUARDED_BY(mu) GP_TSA(guarded_by(mu))
#define GP_PT_GUARDED_BY(mu) GP_TSA(pt_guarded_by(mu))
#define GP_REQUIRES(...) GP_TSA(requires_capability(__VA_ARGS__))
#define GP_ACQUIRE(...) GP_TSA(acquire_capability(__VA_ARGS__))
#define GP_RELEASE(...) GP_TSA(release_capability(__VA_ARGS__))
#define GP_TRY_ACQUIRE(...) GP_TSA(try_acquire_capability(__VA_ARGS__))
#define GP_EXCLUDES(...) GP_TSA(locks_excluded(__VA_ARGS__))

namespace gp {

class CondVar;

// std::mutex as a capability.
class GP_CAPABILITY("mutex") Mutex {
 public:
  void lock() GP_ACQUIRE() { m_.lock(); }
  void unlock() GP_RELEASE() { m_.unlock(); }
  bool try_lock() GP_TRY_ACQUIRE(true) { return m_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex m_;
};

// Holds a Mutex for its scope (std::unique_lock's role): unlock() and lock() release and take it
// again inside the scope.
class GP_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) GP_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() GP_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  void unlock() GP_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() GP_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable over Mutex. Waits are called with the mutex held and return with it
// held; callers loop on their own condition, where the analysis can see the lock.
class CondVar {
 public:
  void wait(Mutex& mu) GP_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.m_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when `deadline` passed.
  bool wait_until(Mutex& mu, std::chrono::steady_clock::time_point deadline) GP_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.m_, std::adopt_lock);
    bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace gp
