#include "api/rate_limit.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace gp::api {

RateLimits RateLimits::server_defaults() {
  return {.per_principal = {.per_second = 200, .burst = 400},
          .per_address = {.per_second = 1000, .burst = 2000},
          .auth_failures_per_address = {.per_second = 0.2, .burst = 20},
          .login_failures_per_account = {.per_second = 1, .burst = 10},
          .hidden_denial_records_per_principal = {.per_second = 1.0 / 60, .burst = 10}};
}

RateLimiter::RateLimiter(RateLimit limit, size_t max_keys)
    : limit_(limit), max_per_shard_(std::max<size_t>(1, max_keys / kShards)) {}

double RateLimiter::tokens_at(const Bucket& b, TimePoint now) const {
  if (now <= b.at) return b.tokens;  // a clock that stepped back adds nothing
  const double elapsed = std::chrono::duration<double>(now - b.at).count();
  return std::min(limit_.burst, b.tokens + elapsed * limit_.per_second);
}

RateLimiter::Verdict RateLimiter::visit(std::string_view key, TimePoint now, bool consume) {
  if (!limit_.enabled()) return {};
  Shard& shard = shards_[std::hash<std::string_view>{}(key) % kShards];
  MutexLock lock(shard.mu);
  auto found = shard.index.find(key);
  if (found != shard.index.end()) {
    shard.order.splice(shard.order.begin(), shard.order, found->second);  // seen now
  } else {
    if (shard.order.size() >= max_per_shard_) {
      // Full: forget the key seen least recently (most likely refilled by now).
      shard.index.erase(shard.order.back().first);
      shard.order.pop_back();
    }
    shard.order.emplace_front(std::string(key), Bucket{limit_.burst, now, 0});
    shard.index.emplace(shard.order.front().first, shard.order.begin());
  }
  Bucket& b = shard.order.front().second;
  b.tokens = tokens_at(b, now);
  b.at = std::max(b.at, now);
  if (b.tokens >= 1) {
    Verdict v;
    if (consume) {
      b.tokens -= 1;
      v.refused_before = std::exchange(b.refused, 0);
    }
    return v;
  }
  if (consume) ++b.refused;
  const double wait_s = (1 - b.tokens) / limit_.per_second;
  return {.allowed = false,
          .retry_after = std::chrono::milliseconds(int64_t(std::ceil(wait_s * 1000)))};
}

RateLimiter::Verdict RateLimiter::take(std::string_view key, TimePoint now) {
  return visit(key, now, true);
}

RateLimiter::Verdict RateLimiter::check(std::string_view key, TimePoint now) {
  return visit(key, now, false);
}

size_t RateLimiter::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    MutexLock lock(s.mu);
    n += s.order.size();
  }
  return n;
}

}  // namespace gp::api
