#include "api/rate_limit.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cmath>
#include <functional>

namespace gp::api {

std::string client_key(std::string_view remote) {
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(std::string(remote), ec);
  if (ec || !address.is_v6()) return std::string(remote);
  auto v6 = address.to_v6();
  if (v6.is_v4_mapped())
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

RateLimits RateLimits::server_defaults() {
  return {.per_principal = {.per_second = 200, .burst = 400},
          .per_address = {.per_second = 1000, .burst = 2000},
          .auth_failures_per_address = {.per_second = 0.2, .burst = 20},
          .login_failures_per_account = {.per_second = 1, .burst = 10}};
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
  auto it = shard.buckets.find(std::string(key));
  if (it == shard.buckets.end()) {
    if (shard.buckets.size() >= max_per_shard_) {
      // Drop the buckets that have refilled: forgetting them changes no answer.
      std::erase_if(shard.buckets,
                    [&](const auto& kv) { return tokens_at(kv.second, now) >= limit_.burst; });
      if (shard.buckets.size() >= max_per_shard_) return {};
    }
    it = shard.buckets.emplace(std::string(key), Bucket{limit_.burst, now}).first;
  }
  Bucket& b = it->second;
  b.tokens = tokens_at(b, now);
  b.at = std::max(b.at, now);
  if (b.tokens >= 1) {
    if (consume) b.tokens -= 1;
    return {};
  }
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
    n += s.buckets.size();
  }
  return n;
}

}  // namespace gp::api
